#include "health/lifecycle.h"

namespace fabrica::health {

const char* NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kEnroll:
      return "enroll";
    case NodeState::kInspecting:
      return "inspecting";
    case NodeState::kInspectFailed:
      return "inspect failed";
    case NodeState::kBurnIn:
      return "burn-in";
    case NodeState::kAvailable:
      return "available";
    case NodeState::kCordoned:
      return "cordoned";
    case NodeState::kDraining:
      return "draining";
    case NodeState::kRepair:
      return "repair";
    case NodeState::kRetired:
      return "retired";
  }
  return "?";
}

Result<NodeState> ParseNodeState(const std::string& name) {
  for (int i = 0; i < kNodeStateCount; ++i) {
    const auto s = static_cast<NodeState>(i);
    if (name == NodeStateName(s)) return s;
  }
  return InvalidArgument("unknown node state '" + name +
                         "' (expected enroll, inspecting, inspect failed, burn-in, available, "
                         "cordoned, draining, repair or retired)");
}

bool IsLegalTransition(NodeState from, NodeState to) {
  using S = NodeState;
  switch (from) {
    case S::kEnroll:
      return to == S::kInspecting || to == S::kRetired;
    case S::kInspecting:
      return to == S::kBurnIn || to == S::kInspectFailed;
    case S::kInspectFailed:
      return to == S::kInspecting || to == S::kRetired;
    case S::kBurnIn:
      return to == S::kAvailable || to == S::kRepair;
    case S::kAvailable:
      return to == S::kCordoned || to == S::kRetired;
    case S::kCordoned:
      return to == S::kDraining || to == S::kAvailable || to == S::kRetired;
    case S::kDraining:
      return to == S::kRepair;
    case S::kRepair:
      return to == S::kBurnIn || to == S::kInspecting || to == S::kRetired;
    case S::kRetired:
      return false;
  }
  return false;
}

const char* GpuStateName(GpuState s) {
  switch (s) {
    case GpuState::kInService:
      return "in-service";
    case GpuState::kCordoned:
      return "cordoned";
    case GpuState::kDraining:
      return "draining";
    case GpuState::kRepair:
      return "repair";
    case GpuState::kBurnIn:
      return "burn-in";
  }
  return "?";
}

bool IsLegalGpuTransition(GpuState from, GpuState to) {
  using G = GpuState;
  switch (from) {
    case G::kInService:
      return to == G::kCordoned;
    case G::kCordoned:
      return to == G::kDraining || to == G::kInService;
    case G::kDraining:
      return to == G::kRepair || to == G::kCordoned;
    case G::kRepair:
      return to == G::kBurnIn || to == G::kCordoned;
    case G::kBurnIn:
      return to == G::kInService || to == G::kRepair || to == G::kCordoned;
  }
  return false;
}

Lifecycle::Lifecycle(NodeId name, int gpus, NodeState initial, const std::string& reason,
                     int64_t now_ms)
    : name_(std::move(name)),
      state_(initial),
      since_ms_(now_ms),
      gpus_(static_cast<size_t>(gpus), GpuState::kInService) {
  history_.push_back({now_ms, -1, "", NodeStateName(initial), reason});
}

Status Lifecycle::Transition(NodeState to, const std::string& reason, int64_t now_ms) {
  if (reason.empty())
    return InvalidArgument("node " + name_.str() + ": a transition needs a reason");
  if (!IsLegalTransition(state_, to)) {
    return FailedPrecondition("node " + name_.str() + ": illegal transition from " +
                              NodeStateName(state_) + " to " + NodeStateName(to));
  }
  history_.push_back({now_ms, -1, NodeStateName(state_), NodeStateName(to), reason});
  state_ = to;
  since_ms_ = now_ms;
  return Status::Ok();
}

Status Lifecycle::TransitionGpu(int device, GpuState to, const std::string& reason,
                                int64_t now_ms) {
  const std::string what = "node " + name_.str() + " GPU " + std::to_string(device);
  if (device < 0 || device >= gpus()) return InvalidArgument(what + ": no such GPU");
  if (reason.empty()) return InvalidArgument(what + ": a transition needs a reason");
  const GpuState from = gpus_[device];
  if (!IsLegalGpuTransition(from, to)) {
    return FailedPrecondition(what + ": illegal transition from " + GpuStateName(from) + " to " +
                              GpuStateName(to));
  }
  history_.push_back({now_ms, device, GpuStateName(from), GpuStateName(to), reason});
  gpus_[device] = to;
  return Status::Ok();
}

void Lifecycle::Annotate(int device, const std::string& reason, int64_t now_ms) {
  const std::string state = device < 0 ? NodeStateName(state_) : GpuStateName(gpus_[device]);
  history_.push_back({now_ms, device, state, state, reason});
}

}  // namespace fabrica::health
