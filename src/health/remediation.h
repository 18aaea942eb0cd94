// The remediation controller: from conditions to cordon, drain, repair, burn-in and back.
//
// RemediationController owns, per node, the lifecycle (lifecycle.h) and the health model
// (conditions.h), takes signals and the outcomes of the actions it asked for, and on each
// Reconcile(now, bound pods) returns the actions to carry out. It never performs one itself,
// reads no clock and keeps no reference to the caller's data, so the server's controller, the
// fault simulator and the tests drive the same code.
//
// The rules (issue 7):
//   - A fatal condition cordons at once: the node when the fault is the node's (not Ready, an
//     action that needs the node: reboot or repair) or more than `max_bad_gpus_for_gpu_cordon`
//     GPUs are bad; otherwise only the bad GPU, while the rest of the node keeps working.
//     Cordoning is never held back by any limit.
//   - A node that is not Ready has its workloads evicted at once (they cannot be running), so none
//     stays bound to a dead node longer than the heartbeat timeout plus the eviction grace.
//   - Draining evicts every workload on the node (or on the GPU) with a grace period; the unit of
//     eviction is the whole workload, so a gang leaves whole and is requeued whole. Each workload
//     is asked to leave once; the controller does not repeat the request.
//   - Nodes draining, in repair or in burn-in after a repair are "in remediation"; at most
//     RemediationLimit() of them at once: all nodes minus the minimum healthy percentage, but at
//     least one, so that a small fleet still heals. A cordoned node waits for a slot (it keeps
//     its running work and takes none). Single-GPU remediations do not take a slot.
//   - The repair action is the most disruptive one the present problems recommend; if it fails,
//     times out, or burn-in fails after it, the next rung runs (restart app → reset GPU → reboot
//     → repair/RMA). A node whose repair keeps failing burn-in is retired.
//   - A node (or GPU) returns to service only after burn-in passes; its event conditions clear
//     then. Warning-level reset actions (row remap pending) run at the next drain window: when
//     the GPU is idle.
//   - RESTART_APP events (e.g. XID 13, 31, 94) ask for the workloads on that GPU to restart.
// Not thread-safe; one owner drives it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/fleet.h"
#include "core/ids.h"
#include "core/status.h"
#include "health/burnin.h"
#include "health/conditions.h"
#include "health/lifecycle.h"

namespace fabrica::health {

struct RemediationConfig {
  HealthConfig health;
  double min_healthy_pct = 95;  // of nodes; the rest may be in remediation at once
  int max_bad_gpus_for_gpu_cordon = 1;
  int64_t eviction_grace_ms = 30'000;
  // How long each action may run before the controller escalates to the next rung.
  int64_t reset_timeout_ms = 10 * 60'000;
  int64_t reboot_timeout_ms = 30 * 60'000;
  int64_t repair_timeout_ms = 7 * 86'400'000LL;
  int64_t burn_in_timeout_ms = 2 * 3'600'000;
  int max_repair_attempts = 2;  // burn-in failing after this many REPAIRs retires the node
};

enum class ActionKind {
  kInspect,       // collect the node's inventory and report it (ReportInspection)
  kCordonNode,    // the node takes no new work
  kUncordonNode,  // back in service
  kCordonGpu,     // GPU `gpu` takes no new work
  kUncordonGpu,
  kEvict,       // stop `workload` within `grace_ms` and requeue it (all its pods)
  kRestartApp,  // restart `workload`'s pods on GPU `gpu` in place
  kResetGpu,    // reset GPU `gpu` (ReportActionDone)
  kRebootNode,  // (ReportActionDone)
  kRepair,      // hand the node to people: repair / RMA (ReportActionDone)
  kBurnIn,      // run burn-in on the node, or on GPU `gpu` only (ReportBurnIn)
  kRetire,      // the node leaves the fleet
};
const char* ActionKindName(ActionKind k);

struct ControllerAction {
  ActionKind kind = ActionKind::kCordonNode;
  NodeId node;
  int gpu = -1;
  WorkloadId workload;
  int64_t grace_ms = 0;
  std::string reason;
};

// Which workloads are bound where, as the caller's scheduler sees it. The controller asks only
// about nodes it is acting on, so a caller with an index answers cheaply.
class BindingView {
 public:
  virtual ~BindingView() = default;
  // Workloads with a pod on `node`, and with a pod using GPU `gpu` of it.
  virtual std::vector<WorkloadId> OnNode(const NodeId& node) const = 0;
  virtual std::vector<WorkloadId> OnGpu(const NodeId& node, int gpu) const = 0;
  // Whether any pod of `workload` is still bound.
  virtual bool Bound(const WorkloadId& workload) const = 0;
};

// One pod bound to a node.
struct BoundPod {
  WorkloadId workload;
  NodeId node;
  std::vector<int> gpus;
};

// A BindingView over a plain list of bound pods.
class PodListView : public BindingView {
 public:
  explicit PodListView(const std::vector<BoundPod>& pods);
  std::vector<WorkloadId> OnNode(const NodeId& node) const override;
  std::vector<WorkloadId> OnGpu(const NodeId& node, int gpu) const override;
  bool Bound(const WorkloadId& workload) const override;

 private:
  std::map<NodeId, std::set<WorkloadId>> on_node_;
  std::map<std::pair<NodeId, int>, std::set<WorkloadId>> on_gpu_;
  std::set<WorkloadId> bound_;
};

class RemediationController {
 public:
  explicit RemediationController(RemediationConfig config);

  // Registers a node with its expected inventory. A new node starts in `enroll` (the controller
  // then asks for an inspection); one already in service is adopted as `available`; one out of
  // service when an earlier controller stopped starts `cordoned` (it drains when a remediation
  // slot frees, then is repaired as its faults say, or burnt in) or stays `retired`.
  // InvalidArgument for another initial state, AlreadyExists for a known name.
  // `why`: the reason its first state is in (default: registered, or adopted in service).
  Status AddNode(const Node& expected, NodeState initial, int64_t now_ms,
                 const std::string& why = "");

  // Signals. NotFound for an unknown node, InvalidArgument for a GPU index out of range.
  // `lease_ms`: as NodeHealth::ObserveHeartbeat.
  Status ObserveHeartbeat(const NodeId& node, int64_t now_ms, int64_t lease_ms = 0);
  Result<XidInfo> ObserveXid(const NodeId& node, int gpu, int code, int64_t now_ms);
  Status ObserveSample(const NodeId& node, int gpu, const DeviceSample& sample, int64_t now_ms);
  // NodeHealth::ObserveNodeProblem of `node`.
  Status ObserveNodeProblem(const NodeId& node, const std::string& type, const std::string& reason,
                            const std::string& message, Action action, int64_t now_ms);

  // Outcomes. Each is FailedPrecondition, changing nothing, when the node (or GPU) is not waiting
  // for it.
  // The discovered inventory: a match moves on to burn-in, a mismatch holds the node in
  // `inspect failed` with every difference in the reason.
  Status ReportInspection(const NodeId& node, const Node& discovered, int64_t now_ms);
  // The action asked for on the node (gpu -1) or on one GPU finished; `succeeded` false
  // escalates.
  Status ReportActionDone(const NodeId& node, int gpu, Action action, bool succeeded,
                          int64_t now_ms);
  // Burn-in of the node (gpu -1) or of one GPU.
  Status ReportBurnIn(const NodeId& node, int gpu, const BurnInResult& result, int64_t now_ms);

  // Operator commands.
  Status Cordon(const NodeId& node, const std::string& reason, int64_t now_ms);
  Status Uncordon(const NodeId& node, const std::string& reason, int64_t now_ms);
  Status Reinspect(const NodeId& node, const std::string& reason, int64_t now_ms);

  // Applies time-based rules and returns what to do now. `view` is read during the call only.
  std::vector<ControllerAction> Reconcile(int64_t now_ms, const BindingView& view);
  std::vector<ControllerAction> Reconcile(int64_t now_ms, const std::vector<BoundPod>& bound) {
    return Reconcile(now_ms, PodListView(bound));
  }

  // Views.
  const Lifecycle* lifecycle(const NodeId& node) const;
  const NodeHealth* health(const NodeId& node) const;
  bool Schedulable(const NodeId& node) const;
  bool GpuSchedulable(const NodeId& node, int gpu) const;
  int InRemediation() const;
  int RemediationLimit() const;
  // The repair action running (or last run) on the node, NONE if none.
  Action CurrentAction(const NodeId& node) const;
  std::vector<NodeId> Nodes() const;

 private:
  // One remediation in progress: the node's, or one GPU's.
  struct Remedy {
    Action action = Action::kNone;  // the rung now running
    std::set<int> pending_gpus;     // a node-wide COMPONENT_RESET: GPUs still to report
    bool requested = false;         // the action (or burn-in) was handed out
    int64_t started_ms = 0;         // when the current step was handed out
    int64_t since_ms = 0;           // when the remediation began (draining)
    int64_t repaired_ms = 0;        // when its last repair step reported done
    int repair_attempts = 0;
  };
  struct Record {
    Record(const Node& node, NodeState initial, const std::string& reason,
           const HealthConfig& health_config, int64_t now_ms);

    Node expected;
    Lifecycle lifecycle;
    NodeHealth health;
    Remedy node;
    std::vector<Remedy> gpus;
    bool in_remediation = false;
    bool manual_cordon = false;
    bool inspect_requested = false;
    Action floor = Action::kNone;  // the least a node repair must do (a GPU repair failed)
    std::set<int> restart_app;     // GPUs whose applications should restart
  };

  Result<Record*> Find(const NodeId& node);
  const Record* Find(const NodeId& node) const;
  void ReconcileNode(Record& r, int64_t now_ms, const BindingView& view,
                     std::vector<ControllerAction>& out);
  void ReconcileGpus(Record& r, int64_t now_ms, const BindingView& view,
                     std::vector<ControllerAction>& out);
  void EvictFrom(const Record& r, int gpu, const BindingView& view, const std::string& reason,
                 std::vector<ControllerAction>& out);
  void SetInRemediation(Record& r, bool on);
  bool NodeProblem(const Record& r) const;
  static bool AllGpusInService(const Lifecycle& life);
  Action ChooseNodeAction(Record& r) const;
  void StartNodeRepair(Record& r, Action action, const std::string& why, int64_t now_ms);
  void EscalateNode(Record& r, const std::string& why, int64_t now_ms);
  void EscalateGpu(Record& r, int gpu, const std::string& why, int64_t now_ms);
  void Emit(ActionKind kind, const Record& r, int gpu, const std::string& reason,
            std::vector<ControllerAction>& out) const;
  int64_t TimeoutFor(Action a) const;

  RemediationConfig config_;
  std::map<NodeId, Record> nodes_;
  std::unordered_map<std::string, Record*> index_;  // by name; map nodes do not move
  std::set<WorkloadId> evicting_;                   // asked to leave and still bound
  std::vector<ControllerAction> pending_;  // decided outside Reconcile, returned by the next
  int in_remediation_ = 0;
  int retired_ = 0;
};

}  // namespace fabrica::health
