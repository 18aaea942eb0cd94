#include "health/remediation.h"

#include <algorithm>
#include <cmath>

#include "health/inspection.h"

namespace fabrica::health {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kInspect:
      return "inspect";
    case ActionKind::kCordonNode:
      return "cordon-node";
    case ActionKind::kUncordonNode:
      return "uncordon-node";
    case ActionKind::kCordonGpu:
      return "cordon-gpu";
    case ActionKind::kUncordonGpu:
      return "uncordon-gpu";
    case ActionKind::kEvict:
      return "evict";
    case ActionKind::kRestartApp:
      return "restart-app";
    case ActionKind::kResetGpu:
      return "reset-gpu";
    case ActionKind::kRebootNode:
      return "reboot-node";
    case ActionKind::kRepair:
      return "repair";
    case ActionKind::kBurnIn:
      return "burn-in";
    case ActionKind::kRetire:
      return "retire";
  }
  return "?";
}

namespace {

std::string Seconds(int64_t ms) { return std::to_string(ms / 1000) + "s"; }

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

ActionKind KindFor(Action a) {
  switch (a) {
    case Action::kResetGpu:
      return ActionKind::kResetGpu;
    case Action::kRebootNode:
      return ActionKind::kRebootNode;
    default:
      return ActionKind::kRepair;
  }
}

}  // namespace

RemediationController::Record::Record(const Node& node, NodeState initial,
                                      const std::string& reason, const HealthConfig& health_config,
                                      int64_t now_ms)
    : expected(node),
      lifecycle(node.name, node.gpu_count(), initial, reason, now_ms),
      health(node.gpu_count(), health_config, now_ms),
      gpus(static_cast<size_t>(node.gpu_count())) {}

PodListView::PodListView(const std::vector<BoundPod>& pods) {
  for (const BoundPod& p : pods) {
    on_node_[p.node].insert(p.workload);
    for (int d : p.gpus) on_gpu_[{p.node, d}].insert(p.workload);
    bound_.insert(p.workload);
  }
}

std::vector<WorkloadId> PodListView::OnNode(const NodeId& node) const {
  auto it = on_node_.find(node);
  if (it == on_node_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::vector<WorkloadId> PodListView::OnGpu(const NodeId& node, int gpu) const {
  auto it = on_gpu_.find({node, gpu});
  if (it == on_gpu_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

bool PodListView::Bound(const WorkloadId& workload) const { return bound_.count(workload) > 0; }

RemediationController::RemediationController(RemediationConfig config)
    : config_(std::move(config)) {}

Status RemediationController::AddNode(const Node& expected, NodeState initial, int64_t now_ms,
                                      const std::string& why) {
  if (initial != NodeState::kEnroll && initial != NodeState::kAvailable &&
      initial != NodeState::kCordoned && initial != NodeState::kRetired) {
    return InvalidArgument("node " + expected.name.str() +
                           ": a node starts in enroll, available, cordoned or retired, not " +
                           NodeStateName(initial));
  }
  if (nodes_.count(expected.name)) {
    return Status(StatusCode::kAlreadyExists, "node " + expected.name.str() + " is already known");
  }
  const std::string reason = !why.empty() ? why
                             : initial == NodeState::kEnroll
                                 ? "registered"
                                 : "adopted in service without inspection";
  auto [it, inserted] =
      nodes_.emplace(expected.name, Record(expected, initial, reason, config_.health, now_ms));
  index_[expected.name.str()] = &it->second;
  // (Out of service when a controller before this one stopped: kept out, its cordon said
  // again; a cordoned one drains, in its turn, and is burnt in before it serves again.)
  if (initial == NodeState::kRetired) retired_ += 1;
  if (initial == NodeState::kCordoned || initial == NodeState::kRetired)
    Emit(ActionKind::kCordonNode, it->second, -1, reason, pending_);
  return Status::Ok();
}

Result<RemediationController::Record*> RemediationController::Find(const NodeId& node) {
  auto it = index_.find(node.str());
  if (it == index_.end()) return NotFound("node " + node.str() + " is not known");
  return it->second;
}

const RemediationController::Record* RemediationController::Find(const NodeId& node) const {
  auto it = index_.find(node.str());
  return it == index_.end() ? nullptr : it->second;
}

namespace {

Status CheckGpu(const NodeHealth& h, const NodeId& node, int gpu) {
  if (gpu < 0 || gpu >= h.gpus()) {
    return InvalidArgument("node " + node.str() + " has no GPU " + std::to_string(gpu));
  }
  return Status::Ok();
}

}  // namespace

Status RemediationController::ObserveHeartbeat(const NodeId& node, int64_t now_ms,
                                               int64_t lease_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  r->health.ObserveHeartbeat(now_ms, lease_ms);
  return Status::Ok();
}

Result<XidInfo> RemediationController::ObserveXid(const NodeId& node, int gpu, int code,
                                                  int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  RETURN_IF_ERROR(CheckGpu(r->health, node, gpu));
  XidInfo info = r->health.ObserveXid(gpu, code, now_ms);
  if (info.action == Action::kRestartApp) r->restart_app.insert(gpu);
  return info;
}

Status RemediationController::ObserveSample(const NodeId& node, int gpu, const DeviceSample& sample,
                                            int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  RETURN_IF_ERROR(CheckGpu(r->health, node, gpu));
  r->health.ObserveSample(gpu, sample, now_ms);
  return Status::Ok();
}

Status RemediationController::ObserveNodeProblem(const NodeId& node, const std::string& type,
                                                 const std::string& reason,
                                                 const std::string& message, Action action,
                                                 int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  r->health.ObserveNodeProblem(type, reason, message, action, now_ms);
  return Status::Ok();
}

void RemediationController::Emit(ActionKind kind, const Record& r, int gpu,
                                 const std::string& reason,
                                 std::vector<ControllerAction>& out) const {
  ControllerAction a;
  a.kind = kind;
  a.node = r.expected.name;
  a.gpu = gpu;
  a.reason = reason;
  out.push_back(std::move(a));
}

Status RemediationController::ReportInspection(const NodeId& node, const Node& discovered,
                                               int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  if (r->lifecycle.state() != NodeState::kInspecting) {
    return FailedPrecondition("node " + node.str() + " is not being inspected (it is " +
                              NodeStateName(r->lifecycle.state()) + ")");
  }
  const std::vector<std::string> diffs = CompareInventory(r->expected, discovered);
  r->inspect_requested = false;
  if (!diffs.empty()) {
    return r->lifecycle.Transition(NodeState::kInspectFailed,
                                   "inventory mismatch: " + Join(diffs, "; "), now_ms);
  }
  RETURN_IF_ERROR(
      r->lifecycle.Transition(NodeState::kBurnIn, "inspection matched the inventory", now_ms));
  r->node = Remedy{};
  return Status::Ok();
}

Status RemediationController::ReportActionDone(const NodeId& node, int gpu, Action action,
                                               bool succeeded, int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  const std::string what = std::string(ActionName(action)) + (succeeded ? " done" : " failed");
  if (r->lifecycle.state() == NodeState::kRepair && r->node.requested && r->node.action == action) {
    // A node-wide GPU reset completes when every GPU it named has reported.
    if (action == Action::kResetGpu) {
      if (gpu < 0 || !r->node.pending_gpus.count(gpu)) {
        return FailedPrecondition("node " + node.str() + " is not waiting for a reset of GPU " +
                                  std::to_string(gpu));
      }
      if (!succeeded) {
        EscalateNode(*r, what + " on GPU " + std::to_string(gpu), now_ms);
        return Status::Ok();
      }
      r->node.pending_gpus.erase(gpu);
      if (!r->node.pending_gpus.empty()) return Status::Ok();
    } else if (gpu >= 0) {
      return FailedPrecondition("node " + node.str() + " is waiting for a node-wide " +
                                ActionName(action) + ", not one of GPU " + std::to_string(gpu));
    }
    if (!succeeded) {
      EscalateNode(*r, what, now_ms);
      return Status::Ok();
    }
    RETURN_IF_ERROR(r->lifecycle.Transition(NodeState::kBurnIn, what, now_ms));
    r->node.requested = false;
    r->node.repaired_ms = now_ms;
    return Status::Ok();
  }
  if (gpu >= 0 && gpu < r->lifecycle.gpus() && r->lifecycle.gpu_state(gpu) == GpuState::kRepair &&
      r->gpus[gpu].requested && r->gpus[gpu].action == action) {
    if (!succeeded) {
      EscalateGpu(*r, gpu, what, now_ms);
      return Status::Ok();
    }
    RETURN_IF_ERROR(r->lifecycle.TransitionGpu(gpu, GpuState::kBurnIn, what, now_ms));
    r->gpus[gpu].requested = false;
    r->gpus[gpu].repaired_ms = now_ms;
    return Status::Ok();
  }
  return FailedPrecondition("node " + node.str() + (gpu >= 0 ? " GPU " + std::to_string(gpu) : "") +
                            " is not waiting for " + ActionName(action));
}

Status RemediationController::ReportBurnIn(const NodeId& node, int gpu, const BurnInResult& result,
                                           int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  if (gpu < 0) {
    if (r->lifecycle.state() != NodeState::kBurnIn || !r->node.requested) {
      return FailedPrecondition("node " + node.str() + " is not in burn-in (it is " +
                                NodeStateName(r->lifecycle.state()) + ")");
    }
    if (!result.passed) {
      if (!r->in_remediation) {
        // The enrolment burn-in failed: repair it before it ever takes work.
        RETURN_IF_ERROR(r->lifecycle.Transition(NodeState::kRepair, result.summary, now_ms));
        r->node = Remedy{};
        r->node.since_ms = now_ms;
        r->node.pending_gpus.insert(result.failed_gpus.begin(), result.failed_gpus.end());
        StartNodeRepair(*r, result.failed_gpus.empty() ? Action::kRebootNode : Action::kResetGpu,
                        result.summary, now_ms);
        return Status::Ok();
      }
      EscalateNode(*r, result.summary, now_ms);
      return Status::Ok();
    }
    // What was reported before the repair finished came from before it (a late or repeated
    // report of the fault that started it must not outlive the fix); later events stand.
    r->health.ClearAfterRemediation(-1, std::max(r->node.since_ms, r->node.repaired_ms), now_ms);
    if (r->in_remediation && NodeProblem(*r)) {
      EscalateNode(*r, "burn-in passed but problems remain: " + r->health.Summary(), now_ms);
      return Status::Ok();
    }
    RETURN_IF_ERROR(r->lifecycle.Transition(NodeState::kAvailable, result.summary, now_ms));
    for (int d = 0; d < r->lifecycle.gpus(); ++d) {
      if (r->lifecycle.gpu_state(d) == GpuState::kCordoned && !r->health.DeviceFatal(d)) {
        RETURN_IF_ERROR(
            r->lifecycle.TransitionGpu(d, GpuState::kInService, "node back in service", now_ms));
        r->gpus[d] = Remedy{};
      }
    }
    SetInRemediation(*r, false);
    r->floor = Action::kNone;
    r->node = Remedy{};
    Emit(ActionKind::kUncordonNode, *r, -1, result.summary, pending_);
    return Status::Ok();
  }
  if (gpu >= r->lifecycle.gpus() || r->lifecycle.gpu_state(gpu) != GpuState::kBurnIn ||
      !r->gpus[gpu].requested) {
    return FailedPrecondition("node " + node.str() + " GPU " + std::to_string(gpu) +
                              " is not in burn-in");
  }
  const bool failed =
      !result.passed || std::find(result.failed_gpus.begin(), result.failed_gpus.end(), gpu) !=
                            result.failed_gpus.end();
  if (failed) {
    EscalateGpu(*r, gpu, result.summary, now_ms);
    return Status::Ok();
  }
  r->health.ClearAfterRemediation(gpu, std::max(r->gpus[gpu].since_ms, r->gpus[gpu].repaired_ms),
                                  now_ms);
  if (r->health.DeviceFatal(gpu) ||
      r->health.DeviceAction(gpu, Severity::kWarning) >= Action::kResetGpu) {
    EscalateGpu(*r, gpu, "burn-in passed but problems remain: " + r->health.Summary(), now_ms);
    return Status::Ok();
  }
  RETURN_IF_ERROR(r->lifecycle.TransitionGpu(gpu, GpuState::kInService, result.summary, now_ms));
  r->gpus[gpu] = Remedy{};
  Emit(ActionKind::kUncordonGpu, *r, gpu, result.summary, pending_);
  return Status::Ok();
}

Status RemediationController::Cordon(const NodeId& node, const std::string& reason,
                                     int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  RETURN_IF_ERROR(r->lifecycle.Transition(NodeState::kCordoned, reason, now_ms));
  r->manual_cordon = true;
  Emit(ActionKind::kCordonNode, *r, -1, reason, pending_);
  return Status::Ok();
}

Status RemediationController::Uncordon(const NodeId& node, const std::string& reason,
                                       int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  if (r->lifecycle.state() == NodeState::kCordoned && (!r->manual_cordon || NodeProblem(*r))) {
    return FailedPrecondition("node " + node.str() +
                              " was cordoned for a fault; it returns after repair and burn-in (" +
                              r->health.Summary() + ")");
  }
  RETURN_IF_ERROR(r->lifecycle.Transition(NodeState::kAvailable, reason, now_ms));
  r->manual_cordon = false;
  Emit(ActionKind::kUncordonNode, *r, -1, reason, pending_);
  return Status::Ok();
}

Status RemediationController::Reinspect(const NodeId& node, const std::string& reason,
                                        int64_t now_ms) {
  ASSIGN_OR_RETURN(Record * r, Find(node));
  RETURN_IF_ERROR(r->lifecycle.Transition(NodeState::kInspecting, reason, now_ms));
  r->inspect_requested = false;
  return Status::Ok();
}

void RemediationController::SetInRemediation(Record& r, bool on) {
  if (r.in_remediation == on) return;
  r.in_remediation = on;
  in_remediation_ += on ? 1 : -1;
}

bool RemediationController::AllGpusInService(const Lifecycle& life) {
  for (int d = 0; d < life.gpus(); ++d) {
    if (life.gpu_state(d) != GpuState::kInService) return false;
  }
  return true;
}

bool RemediationController::NodeProblem(const Record& r) const {
  if (r.health.healthy() && r.floor == Action::kNone) return false;
  return r.health.NodeLevelFault() || r.floor != Action::kNone ||
         static_cast<int>(r.health.FatalDevices().size()) > config_.max_bad_gpus_for_gpu_cordon;
}

int64_t RemediationController::TimeoutFor(Action a) const {
  switch (a) {
    case Action::kRebootNode:
      return config_.reboot_timeout_ms;
    case Action::kRepair:
      return config_.repair_timeout_ms;
    default:
      return config_.reset_timeout_ms;
  }
}

void RemediationController::EvictFrom(const Record& r, int gpu, const BindingView& view,
                                      const std::string& reason,
                                      std::vector<ControllerAction>& out) {
  const std::vector<WorkloadId> workloads =
      gpu < 0 ? view.OnNode(r.expected.name) : view.OnGpu(r.expected.name, gpu);
  for (const WorkloadId& w : workloads) {
    if (!evicting_.insert(w).second) continue;
    ControllerAction a;
    a.kind = ActionKind::kEvict;
    a.node = r.expected.name;
    a.gpu = gpu;
    a.workload = w;
    a.grace_ms = config_.eviction_grace_ms;
    a.reason = reason;
    out.push_back(std::move(a));
  }
}

Action RemediationController::ChooseNodeAction(Record& r) const {
  Action a = std::max(r.health.NodeAction(), r.floor);
  if (a == Action::kRestartApp) a = Action::kNone;  // the node is empty: nothing to restart
  r.node.pending_gpus.clear();
  // GPUs that want a reset (fatal, or a pending row remap) get it in this drain window.
  for (int d = 0; d < r.health.gpus(); ++d) {
    if (r.health.DeviceAction(d, Severity::kWarning) >= Action::kResetGpu) {
      r.node.pending_gpus.insert(d);
    }
  }
  if (a < Action::kResetGpu && !r.node.pending_gpus.empty()) a = Action::kResetGpu;
  return a;
}

void RemediationController::StartNodeRepair(Record& r, Action action, const std::string& why,
                                            int64_t now_ms) {
  r.node.action = action;
  r.node.requested = false;
  r.node.started_ms = now_ms;
  if (action == Action::kNone) {
    // Nothing to repair (the fault was a level signal that has cleared): prove it by burn-in.
    CHECK(
        r.lifecycle.Transition(NodeState::kBurnIn, "no repair action needed: " + why, now_ms).ok());
  }
}

void RemediationController::EscalateNode(Record& r, const std::string& why, int64_t now_ms) {
  if (r.lifecycle.state() == NodeState::kBurnIn) {
    CHECK(r.lifecycle.Transition(NodeState::kRepair, why, now_ms).ok());
  }
  CHECK(r.lifecycle.state() == NodeState::kRepair);
  if (r.node.action == Action::kRepair) {
    r.node.repair_attempts += 1;
    if (r.node.repair_attempts >= config_.max_repair_attempts) {
      const std::string reason = "retired after " + std::to_string(r.node.repair_attempts) +
                                 " repairs that did not hold: " + why;
      CHECK(r.lifecycle.Transition(NodeState::kRetired, reason, now_ms).ok());
      SetInRemediation(r, false);
      retired_ += 1;
      Emit(ActionKind::kRetire, r, -1, reason, pending_);
      return;
    }
  }
  const Action next = std::max(Escalate(r.node.action), Action::kRebootNode);
  r.lifecycle.Annotate(-1,
                       std::string("escalated from ") + ActionName(r.node.action) + " to " +
                           ActionName(next) + ": " + why,
                       now_ms);
  r.node.pending_gpus.clear();
  StartNodeRepair(r, next, why, now_ms);
}

void RemediationController::EscalateGpu(Record& r, int gpu, const std::string& why,
                                        int64_t now_ms) {
  Remedy& g = r.gpus[gpu];
  const Action next = Escalate(std::max(g.action, Action::kRestartApp));
  if (ActionNeedsNode(next)) {
    // A GPU that a reset does not fix takes its node down: the node-wide path runs from here.
    CHECK(r.lifecycle
              .TransitionGpu(
                  gpu, GpuState::kCordoned,
                  "escalated to " + std::string(ActionName(next)) + " for the node: " + why, now_ms)
              .ok());
    r.floor = std::max(r.floor, next);
    g = Remedy{};
    return;
  }
  if (r.lifecycle.gpu_state(gpu) == GpuState::kBurnIn) {
    CHECK(r.lifecycle.TransitionGpu(gpu, GpuState::kRepair, why, now_ms).ok());
  }
  r.lifecycle.Annotate(gpu,
                       std::string("escalated from ") + ActionName(g.action) + " to " +
                           ActionName(next) + ": " + why,
                       now_ms);
  g.action = next;
  g.requested = false;
}

void RemediationController::ReconcileGpus(Record& r, int64_t now_ms, const BindingView& view,
                                          std::vector<ControllerAction>& out) {
  const NodeId& name = r.expected.name;
  auto gpu_empty = [&](int d) { return view.OnGpu(name, d).empty(); };
  for (int d = 0; d < r.lifecycle.gpus(); ++d) {
    Remedy& g = r.gpus[d];
    const bool fatal = r.health.DeviceFatal(d);
    const Action wanted = r.health.DeviceAction(d, Severity::kWarning);
    if (r.lifecycle.gpu_state(d) == GpuState::kInService) {
      std::string reason;
      if (fatal) {
        reason = "fatal: " + r.health.Summary();
      } else if (wanted >= Action::kResetGpu && gpu_empty(d)) {
        reason = "GPU idle: running the pending " + std::string(ActionName(wanted));
      } else {
        continue;
      }
      CHECK(r.lifecycle.TransitionGpu(d, GpuState::kCordoned, reason, now_ms).ok());
      Emit(ActionKind::kCordonGpu, r, d, reason, out);
      g = Remedy{};
      g.since_ms = now_ms;
    }
    if (r.lifecycle.gpu_state(d) == GpuState::kCordoned) {
      CHECK(r.lifecycle
                .TransitionGpu(d, GpuState::kDraining, "draining GPU " + std::to_string(d), now_ms)
                .ok());
      EvictFrom(r, d, view, "GPU " + std::to_string(d) + " of node " + name.str() + " is draining",
                out);
    }
    if (r.lifecycle.gpu_state(d) == GpuState::kDraining && gpu_empty(d)) {
      CHECK(r.lifecycle.TransitionGpu(d, GpuState::kRepair, "GPU drained", now_ms).ok());
      g.action = std::max(wanted, Action::kResetGpu);
      g.requested = false;
    }
    if (r.lifecycle.gpu_state(d) == GpuState::kRepair) {
      if (!g.requested) {
        Emit(KindFor(g.action), r, d,
             std::string(ActionName(g.action)) + " of GPU " + std::to_string(d), out);
        g.requested = true;
        g.started_ms = now_ms;
      } else if (now_ms - g.started_ms > TimeoutFor(g.action)) {
        EscalateGpu(r, d,
                    std::string(ActionName(g.action)) + " timed out after " +
                        Seconds(now_ms - g.started_ms),
                    now_ms);
      }
    } else if (r.lifecycle.gpu_state(d) == GpuState::kBurnIn) {
      if (!g.requested) {
        Emit(ActionKind::kBurnIn, r, d, "burn-in of GPU " + std::to_string(d), out);
        g.requested = true;
        g.started_ms = now_ms;
      } else if (now_ms - g.started_ms > config_.burn_in_timeout_ms) {
        EscalateGpu(r, d, "burn-in timed out", now_ms);
      }
    }
  }
}

void RemediationController::ReconcileNode(Record& r, int64_t now_ms, const BindingView& view,
                                          std::vector<ControllerAction>& out) {
  r.health.Evaluate(now_ms);
  Lifecycle& life = r.lifecycle;
  const NodeId& name = r.expected.name;
  if (life.state() == NodeState::kEnroll) {
    CHECK(life.Transition(NodeState::kInspecting, "inspection requested", now_ms).ok());
    r.inspect_requested = false;
  }
  if (life.state() == NodeState::kInspecting && !r.inspect_requested) {
    Emit(ActionKind::kInspect, r, -1, "compare the hardware with the inventory", out);
    r.inspect_requested = true;
  }
  if (life.state() == NodeState::kAvailable) {
    for (int d : r.restart_app) {
      for (const WorkloadId& w : view.OnGpu(name, d)) {
        if (evicting_.count(w)) continue;
        ControllerAction a;
        a.kind = ActionKind::kRestartApp;
        a.node = name;
        a.gpu = d;
        a.workload = w;
        a.reason = "application error on GPU " + std::to_string(d);
        out.push_back(std::move(a));
      }
    }
    if (NodeProblem(r)) {
      const std::string reason = "fatal: " + r.health.Summary();
      CHECK(life.Transition(NodeState::kCordoned, reason, now_ms).ok());
      r.manual_cordon = false;
      Emit(ActionKind::kCordonNode, r, -1, reason, out);
    } else if (!r.health.healthy() || !AllGpusInService(r.lifecycle)) {
      ReconcileGpus(r, now_ms, view, out);
    }
  }
  r.restart_app.clear();
  if (!r.health.ready()) {
    // Whatever state the node is in, work bound to it cannot be running.
    EvictFrom(r, -1, view, "node " + name.str() + " is not ready", out);
  }
  if (life.state() == NodeState::kCordoned && !(r.manual_cordon && !NodeProblem(r)) &&
      InRemediation() < RemediationLimit()) {
    const std::string reason = "draining (" + std::to_string(InRemediation() + 1) + " of at most " +
                               std::to_string(RemediationLimit()) +
                               " nodes in remediation): " + r.health.Summary();
    CHECK(life.Transition(NodeState::kDraining, reason, now_ms).ok());
    SetInRemediation(r, true);
    r.node = Remedy{};
    r.node.since_ms = now_ms;
    for (int d = 0; d < life.gpus(); ++d) {
      const GpuState s = life.gpu_state(d);
      if (s == GpuState::kDraining || s == GpuState::kRepair || s == GpuState::kBurnIn) {
        CHECK(life.TransitionGpu(d, GpuState::kCordoned, "the node-wide remediation takes over",
                                 now_ms)
                  .ok());
        r.gpus[d] = Remedy{};
      }
    }
    EvictFrom(r, -1, view, "node " + name.str() + " is draining", out);
  }
  if (life.state() == NodeState::kCordoned) {
    // Waiting for a remediation slot, the node keeps its work but for what runs on a GPU with a
    // fatal fault (fallen off the bus, say): that cannot run, and would hold its quota.
    for (int d = 0; d < life.gpus(); ++d)
      if (r.health.DeviceFatal(d))
        EvictFrom(r, d, view,
                  "GPU " + std::to_string(d) + " of node " + name.str() +
                      " failed; the node waits for a remediation slot: " + r.health.Summary(),
                  out);
  }
  if (life.state() == NodeState::kDraining && view.OnNode(name).empty()) {
    CHECK(life.Transition(NodeState::kRepair, "drained", now_ms).ok());
    const Action action = ChooseNodeAction(r);
    r.floor = Action::kNone;  // consumed: the repair starts at or above it
    StartNodeRepair(r, action, r.health.Summary(), now_ms);
  }
  if (life.state() == NodeState::kRepair) {
    if (!r.node.requested) {
      const std::string reason = std::string(ActionName(r.node.action)) + ": " + r.health.Summary();
      if (r.node.action == Action::kResetGpu) {
        for (int d : r.node.pending_gpus) Emit(ActionKind::kResetGpu, r, d, reason, out);
      } else {
        Emit(KindFor(r.node.action), r, -1, reason, out);
      }
      r.node.requested = true;
      r.node.started_ms = now_ms;
    } else if (now_ms - r.node.started_ms > TimeoutFor(r.node.action)) {
      EscalateNode(r,
                   std::string(ActionName(r.node.action)) + " timed out after " +
                       Seconds(now_ms - r.node.started_ms),
                   now_ms);
    }
  }
  if (life.state() == NodeState::kBurnIn) {
    if (!r.node.requested) {
      Emit(ActionKind::kBurnIn, r, -1, "burn-in before service", out);
      r.node.requested = true;
      r.node.started_ms = now_ms;
    } else if (now_ms - r.node.started_ms > config_.burn_in_timeout_ms) {
      BurnInResult timed_out;
      timed_out.summary = "burn-in timed out after " + Seconds(now_ms - r.node.started_ms);
      CHECK(ReportBurnIn(name, -1, timed_out, now_ms).ok());
    }
  }
}

std::vector<ControllerAction> RemediationController::Reconcile(int64_t now_ms,
                                                               const BindingView& view) {
  // A workload that has left is forgotten, so that it may be evicted again once it lands anew.
  for (auto it = evicting_.begin(); it != evicting_.end();) {
    it = view.Bound(*it) ? std::next(it) : evicting_.erase(it);
  }
  std::vector<ControllerAction> out = std::move(pending_);
  pending_.clear();
  for (auto& [name, record] : nodes_) ReconcileNode(record, now_ms, view, out);
  // Decisions made while reconciling (a burn-in timing out) come out now, not a cycle late.
  for (ControllerAction& a : pending_) out.push_back(std::move(a));
  pending_.clear();
  return out;
}

const Lifecycle* RemediationController::lifecycle(const NodeId& node) const {
  const Record* r = Find(node);
  return r ? &r->lifecycle : nullptr;
}

const NodeHealth* RemediationController::health(const NodeId& node) const {
  const Record* r = Find(node);
  return r ? &r->health : nullptr;
}

bool RemediationController::Schedulable(const NodeId& node) const {
  const Record* r = Find(node);
  return r != nullptr && r->lifecycle.Schedulable();
}

bool RemediationController::GpuSchedulable(const NodeId& node, int gpu) const {
  const Record* r = Find(node);
  return r != nullptr && gpu >= 0 && gpu < r->lifecycle.gpus() && r->lifecycle.GpuSchedulable(gpu);
}

int RemediationController::InRemediation() const { return in_remediation_; }

int RemediationController::RemediationLimit() const {
  const auto nodes = static_cast<int64_t>(nodes_.size()) - retired_;
  const auto healthy = static_cast<int64_t>(
      std::ceil(static_cast<double>(nodes) * config_.min_healthy_pct / 100.0 - 1e-9));
  return static_cast<int>(std::max<int64_t>(1, nodes - healthy));
}

Action RemediationController::CurrentAction(const NodeId& node) const {
  const Record* r = Find(node);
  return r ? r->node.action : Action::kNone;
}

std::vector<NodeId> RemediationController::Nodes() const {
  std::vector<NodeId> out;
  for (const auto& [name, r] : nodes_) out.push_back(name);
  return out;
}

}  // namespace fabrica::health
