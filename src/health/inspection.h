// Inspection: does the hardware a node agent discovered match what the inventory expects?
//
// Both sides use the one fleet schema (core/fleet.h). The comparison covers what a wrong or
// failing box shows first: the GPU count, each GPU's model, memory, ECC mode and NVLink peers,
// and the NICs (count, names, speeds). A mismatch lists every difference, not only the first, so
// one look at `describe node` says what to fix. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"

namespace fabrica::health {

// Every difference between `expected` and `discovered`, each a sentence naming the part, e.g.
// "GPU 3: memory 81559 MiB, expected 81920 MiB". Empty when they match.
std::vector<std::string> CompareInventory(const Node& expected, const Node& discovered);

// Reads an agent's inventory report, a JSON object:
//   {"node": "n1", "gpus": [{"uuid": "GPU-..", "model": "H100", "memoryMiB": 81920,
//     "eccEnabled": true, "nvlinkPeers": [1, 2]}], "nics": [{"name": "mlx5_0", "gbps": 400}]}
// Unknown fields are rejected, and every error names the field path; a report that fails to
// parse changes nothing anywhere.
Result<Node> ParseInventoryReport(const std::string& json_text);

}  // namespace fabrica::health
