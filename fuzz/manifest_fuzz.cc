// Fuzzes the manifest decoder (Tenant, Workload, WorkloadList documents in YAML or JSON): it must
// return a value or a Status, never crash, hang or leak, whatever the bytes.
#include <cstdint>
#include <string>

#include "core/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = fabrica::ParseManifestYaml(text, "fuzz");
  if (m.ok()) {
    for (const auto& w : m->workloads) (void)w.pod_count();
  } else {
    (void)m.status().message();
  }
  return 0;
}
