// Fuzzes the fleet decoder: a value or a Status naming the field, never a crash. A fleet that
// parses must also pass ValidateFleet (the parser checks at least what the validator checks).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/fleet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // `count:` replication makes huge fleets from small inputs
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto fleet = fabrica::ParseFleetYaml(text, "fuzz");
  if (fleet.ok() && !fabrica::ValidateFleet(*fleet).ok()) std::abort();
  return 0;
}
