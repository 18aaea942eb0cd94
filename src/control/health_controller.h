// HealthController: fleet health and the node lifecycle inside the server, around the pure
// RemediationController (health/remediation.h).
//
// Sync() runs once per scheduler cycle. It reads Nodes (every node is registered with its
// inventory; nodes present at the first Sync are adopted as available, later ones enroll and are
// inspected and burnt in before they take work), Leases (heartbeat age → NotReady), the health
// reports agents sent since the last Sync (XIDs per GPU, ECC and other device readings) and the
// bound workloads, asks the pure controller what to do and does it:
//   - cordon / uncordon a node: Node spec.unschedulable (a node an operator cordoned stays so);
//   - cordon / uncordon a GPU: the node's health record says the GPU is not schedulable, and the
//     scheduler reserves its free capacity for the cycle so nothing new lands on it;
//   - evict: after the grace period the whole workload (a gang whole) goes back to Pending with
//     reason Evicted and the cause in status.message, once per binding: a workload the scheduler
//     already requeued (its node's lease expired) or that finished is left alone;
//   - reset / reboot / repair / burn-in / inspect on a simulated node: simulated, each finishing
//     after its configured duration (burn-in passes; inspection finds the inventory it expects),
//     and the simulated agent is told (Repaired) so a rebooted node heartbeats again. A node this
//     server does not simulate waits for an agent that does not exist yet, and escalates on
//     timeout.
// The result is durable in the store, one record per node under /registry/nodehealth/<node>:
// lifecycle state, conditions per node and GPU, recent XID events and every transition with
// reason and time. The records carry no workload names (tenants may read them).
//
// Routes(): POST .../nodes/N/health (the node's own identity, or a platform admin: a report of
// XIDs and device readings), POST .../nodes/N/inject (platform admins: a fault for a simulated
// node), GET .../nodes/N/health, GET .../nodehealth (the records), GET .../inventory?format=netbox.
// A malformed report or injection is rejected whole, naming the field, and changes nothing.
// Sync and the routes may be called from different threads.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/api_server.h"
#include "api/auth.h"
#include "control/clock.h"
#include "core/fleet.h"
#include "health/burnin.h"
#include "health/remediation.h"
#include "store/store.h"

namespace fabrica {

class Metrics;

struct HealthControllerOptions {
  health::RemediationConfig remediation;
  // How long the simulated actions take on simulated nodes (virtual time).
  int64_t sim_reset_ms = 2 * 60'000;
  int64_t sim_reboot_ms = 5 * 60'000;
  int64_t sim_repair_ms = 30 * 60'000;
  int64_t sim_burn_in_ms = 10 * 60'000;
  int64_t sim_inspect_ms = 60'000;
  size_t history_kept = 200;  // transitions kept per node record
};

struct HealthStats {
  int nodes = 0;
  int in_remediation = 0;
  int remediation_limit = 0;
  int64_t evictions_requested = 0;
  int64_t requeued = 0;         // workloads this controller put back to Pending
  int64_t requeue_skipped = 0;  // evictions that found the binding already gone
  int max_in_remediation_seen = 0;
};

class HealthController {
 public:
  // The simulated side: which nodes are simulated, how to inject a fault into one, and the hook
  // called when a simulated remediation of a node (gpu -1) or GPU finished.
  struct Simulation {
    std::function<bool(const std::string& node)> simulates;
    std::function<Status(const FaultInjection& fault)> inject;
    std::function<void(const std::string& node, int gpu)> repaired;
  };

  // REQUIRES: store, clock, auth and metrics (may be null) outlive the controller.
  HealthController(Store& store, const Clock& clock, const Authorizer& auth,
                   HealthControllerOptions options, Metrics* metrics);
  void SetSimulation(Simulation sim);

  // One reconcile round; see the file comment.
  Status Sync();
  HealthStats stats() const;

  // Agents' reports, as the route takes them: {"xids": [{"gpu", "xid"}], "devices": [{"gpu",
  // "eccDoubleBitVolatile", "rowRemapFailure", "rowRemapPending", "temperatureC", "powerW",
  // "powerLimitW"}]}. InvalidArgument naming the field (nothing queued) or NotFound for an
  // unknown node; otherwise queued for the next Sync. Returns the number of signals queued.
  Result<int> Report(const std::string& node, const std::string& body);

  // An agent's result of one of its node's tasks (the record's `tasks`), as the route takes
  // it: {"succeeded": bool, "message": str, "inventory": {inventory report},
  // "burnIn": {"passed": bool, "failedGpus": [int], "summary": str, "dcgmDiag": {dcgmi diag -j},
  // "ncclAllReduce": "all_reduce_perf output"}}. InvalidArgument naming the field (nothing
  // queued); otherwise queued for the next Sync, where a result for a task no longer pending
  // is ignored.
  Status SubmitTaskResult(const std::string& node, int64_t task_id, const std::string& body);

  ApiServer::Extension Routes();

 private:
  // Work for a node's own agent (nodes this server does not simulate): inspect, reset a GPU,
  // reboot, burn in; `repair` waits for people (an admin reports it done).
  struct AgentTask {
    int64_t id = 0;
    health::ActionKind kind = health::ActionKind::kInspect;
    int gpu = -1;
    int64_t since_ms = 0;
    bool inject = false;  // a fault for the agent's simulated devices (`fault`)
    FaultInjection fault;
    std::string workload;  // restart-app: "tenant/name"
  };
  struct TaskResult {
    std::string node;
    int64_t id = 0;
    bool succeeded = false;
    std::string message;
    std::optional<Node> inventory;
    bool has_burn_in = false;
    health::BurnInResult own_verdict;  // the agent's, when it sent no tool reports
    std::optional<health::DcgmDiagReport> dcgm;
    std::optional<health::NcclReport> nccl;
  };
  void ApplyTaskResults(int64_t now);
  // A new pending task for `node`'s agent (with the next id). REQUIRES: mu_ held.
  AgentTask& AddTask(const std::string& node, health::ActionKind kind, int gpu, int64_t now);
  // Hands a burn-in verdict to the remediation controller and keeps it for the node's record.
  void ReportBurnIn(const std::string& node, int gpu, const health::BurnInResult& verdict,
                    const std::string& source, int64_t now);

  struct Signal {
    int gpu = -1;
    int xid = 0;  // 0: a device reading
    health::DeviceSample sample;
    int64_t at_ms = 0;
  };
  struct SimOp {
    int64_t due_ms = 0;
    NodeId node;
    int gpu = -1;
    health::ActionKind kind = health::ActionKind::kBurnIn;
  };
  struct Eviction {
    std::string key;             // the workload's store key
    std::string scheduled_time;  // the binding it applies to
    int64_t due_ms = 0;
    std::string reason;
    // Its status marked (status.preemption, evictor "health") so that users see it stopping
    // (Evicting, with its deadline) and the scheduler counts its devices as leaving.
    bool marked = false;
  };

  Result<int> GpuCount(const std::string& node) const;
  void Perform(const health::ControllerAction& a, int64_t now,
               const std::map<std::string, std::pair<std::string, std::string>>& bindings);
  // Sets spec.unschedulable; whether the store now says so (false: a conflict, tried again).
  // Lifting it leaves a cordon an administrator set (kCordonedByAnnotation) and says true.
  bool SetUnschedulable(const std::string& node, bool cordon);
  // Lifts the controller's cordon, unless an administrator cordoned the node too.
  void Uncordon(const std::string& node);
  void FinishSimOps(int64_t now);
  void RunEvictions(int64_t now);
  void WriteRecords(int64_t now);

  Store& store_;
  const Clock& clock_;
  const Authorizer& auth_;
  HealthControllerOptions options_;
  Metrics* metrics_;
  Simulation sim_;

  mutable std::mutex queue_mu_;
  std::map<std::string, std::vector<Signal>> queued_;  // node -> signals, in arrival order

  std::vector<TaskResult> task_results_;  // guarded by queue_mu_

  mutable std::mutex mu_;                                     // everything below; held by Sync
  std::map<std::string, std::vector<AgentTask>> tasks_;       // node -> pending agent tasks
  std::map<std::string, std::vector<std::string>> burn_ins_;  // node -> last verdicts (JSON)
  int64_t next_task_id_ = 0;  // from the clock at start, so ids are not reused by a restart
  health::RemediationController ctl_;
  bool first_sync_ = true;
  std::map<std::string, Node> expected_;    // node -> its registered inventory
  std::map<std::string, int64_t> renewed_;  // node -> the last lease renewal observed
  std::vector<SimOp> sim_ops_;
  std::map<std::string, Eviction> evictions_;  // by workload key
  std::set<std::string> cordoned_by_health_;   // nodes whose spec.unschedulable we set
  // The scheduler's holds of a node for pods that did not start there (its status.startHold
  // `since`), the recent ones: a second within kStartHoldWindowMs makes it a node problem.
  std::map<std::string, std::deque<int64_t>> start_holds_seen_;
  std::map<std::string, std::string> written_;  // node -> the record last written
  std::map<std::string, std::vector<std::string>> earlier_history_;  // before this process
  HealthStats stats_;
};

// Both extensions, `first` asked first.
ApiServer::Extension ChainExtensions(ApiServer::Extension first, ApiServer::Extension second);

}  // namespace fabrica
