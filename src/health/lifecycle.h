// The node lifecycle: the provisioning and repair states a node passes through, and its GPUs'.
//
// States use Ironic's names where Ironic has the state (enroll, inspecting, inspect failed,
// available) and Fabrica's own for the rest:
//
//   enroll → inspecting → burn-in → available                       (bringing a node in)
//   inspecting → inspect failed → inspecting | retired              (inventory mismatch: held)
//   available → cordoned → draining → repair → burn-in → available  (remediation)
//   cordoned → available                                            (uncordon before any drain)
//   burn-in → repair                                                (burn-in failed)
//   repair → inspecting                                             (hardware was replaced)
//   enroll | available | cordoned | repair | inspect failed → retired
//
// Only `available` takes new work. A single GPU has a smaller machine of its own, so that one
// bad GPU can be taken out while the rest of the node keeps working:
//
//   in-service → cordoned → draining → repair → burn-in → in-service
//   cordoned → in-service; burn-in → repair;
//   draining | repair | burn-in → cordoned   (a node-wide remediation took over)
//
// A transition that is not listed is rejected with FailedPrecondition naming from and to, and
// changes nothing. Every accepted transition is recorded with its reason and time. Time is a
// parameter. Not thread-safe; one owner drives it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace fabrica::health {

enum class NodeState {
  kEnroll,
  kInspecting,
  kInspectFailed,
  kBurnIn,
  kAvailable,
  kCordoned,
  kDraining,
  kRepair,
  kRetired,
};
inline constexpr int kNodeStateCount = 9;
const char* NodeStateName(NodeState s);  // "enroll", "inspect failed", "burn-in" ...
Result<NodeState> ParseNodeState(const std::string& name);
bool IsLegalTransition(NodeState from, NodeState to);

enum class GpuState { kInService, kCordoned, kDraining, kRepair, kBurnIn };
inline constexpr int kGpuStateCount = 5;
const char* GpuStateName(GpuState s);
bool IsLegalGpuTransition(GpuState from, GpuState to);

struct TransitionRecord {
  int64_t at_ms = 0;
  int device = -1;  // -1: the node's own state; otherwise the GPU's
  std::string from;
  std::string to;
  std::string reason;
};

class Lifecycle {
 public:
  // Starts in `initial` (a recorded transition from nothing, with `reason`), every GPU in
  // service.
  Lifecycle(NodeId name, int gpus, NodeState initial, const std::string& reason, int64_t now_ms);

  const NodeId& name() const { return name_; }
  NodeState state() const { return state_; }
  int64_t state_since_ms() const { return since_ms_; }
  int gpus() const { return static_cast<int>(gpus_.size()); }
  GpuState gpu_state(int device) const { return gpus_[device]; }

  // FailedPrecondition "node n1: illegal transition from available to repair" when the
  // machine has no such edge; InvalidArgument for an empty reason.
  Status Transition(NodeState to, const std::string& reason, int64_t now_ms);
  Status TransitionGpu(int device, GpuState to, const std::string& reason, int64_t now_ms);

  // Whether new work may land on the node, and on GPU `device` of it.
  bool Schedulable() const { return state_ == NodeState::kAvailable; }
  bool GpuSchedulable(int device) const {
    return Schedulable() && gpus_[device] == GpuState::kInService;
  }

  // Records a step that changes no state (an escalation inside repair), from == to.
  void Annotate(int device, const std::string& reason, int64_t now_ms);

  const std::vector<TransitionRecord>& history() const { return history_; }

 private:
  NodeId name_;
  NodeState state_;
  int64_t since_ms_;
  std::vector<GpuState> gpus_;
  std::vector<TransitionRecord> history_;
};

}  // namespace fabrica::health
