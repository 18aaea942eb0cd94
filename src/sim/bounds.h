// How good can any placement be on a trace? Two numbers bracket the optimum at a point of
// arrival, for the pods that have arrived by then:
//   - OfflineAllocatedPct: a feasible packing with every pod known in advance (largest GPU
//     request first, placed by `policy`): a lower bound on the optimum.
//   - CeilingAllocatedPct: an upper bound no placement can beat, the optimum of a linear
//     relaxation over node types and pod classes. Per node type it keeps the aggregate CPU,
//     memory and GPU capacity, the rule that a node holds at most one pod needing more than half
//     its GPUs, and dual-feasible-function cuts (Fekete & Schepers) that charge each GPU for the
//     shares too large to sit beside another (an 810m share leaves 190m that only pods of 190m or
//     less can use). Solved with GLPK's simplex.
#pragma once

#include <string>
#include <vector>

#include "core/fleet.h"
#include "sim/openb.h"

namespace fabrica::sim {

Result<double> OfflineAllocatedPct(const Fleet& fleet, const std::vector<TracePod>& pods,
                                   const std::string& policy);
Result<double> CeilingAllocatedPct(const Fleet& fleet, const std::vector<TracePod>& pods);

// Both bounds for the pods of one seed's tuned list that arrived by the last event of bucket
// 100 (see openb.h), as allocated % of capacity.
struct Bounds {
  double offline_allocated_pct = 0;
  double ceiling_allocated_pct = 0;
};
Result<Bounds> BoundsAt100(const Fleet& fleet, const std::vector<TracePod>& pods, uint64_t seed,
                           double inflate, const std::string& offline_policy);

}  // namespace fabrica::sim
