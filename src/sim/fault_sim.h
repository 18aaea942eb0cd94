// The fault-injection simulator: a synthetic fleet running a stream of workloads, with random
// XIDs, ECC errors and agent deaths, driven through the health model and the remediation
// controller of src/health on a virtual clock.
//
// The fleet is the synthetic HGX fleet (sim/synthetic.h; H100 and H200 nodes of 8 GPUs, no MIG,
// no GB200). Workload shapes are drawn from the synthetic mix (fractions, whole-GPU pods, gangs of
// 8-GPU pods preferring one leaf); they arrive as a Poisson stream sized to the offered `load`,
// run for a log-uniform duration, and are placed by the Placer (sched/placer.h) over a
// ClusterState in arrival order. A cordoned node or GPU is kept out of placement by holding its
// free capacity with a reservation, the way a real scheduler masks it; every placement is then
// checked against the controller's view as well, so a leak would be counted, not hidden.
//
// Faults (per node and day, from a seeded sched/rng.h Rng): fatal XIDs (48, 95, 119, 79 ...),
// warning XIDs (63 with a pending row remap, 94), application XIDs (13, 31, 43), unknown XIDs,
// double-bit ECC counters, and agent deaths (the node stops heartbeating and its work stops;
// some come back by themselves). Each fault leaves a hidden hardware truth — what it takes to
// fix the GPU: a reset, a reboot or a repair — and the simulated actions (reset, reboot, repair,
// burn-in) consult it, so escalation is exercised when a reset is not enough.
//
// The run asserts the properties of issue 7 and reports violations instead of aborting:
//   - no workload stays bound to a dead node longer than heartbeat timeout + grace (+ one
//     controller tick, the resolution at which the controller looks);
//   - no new work lands on a cordoned node or GPU;
//   - never more nodes in remediation than the limit;
//   - every evicted workload is requeued exactly once per eviction;
// and measures the goodput lost to faults: GPU-seconds of work thrown away by evictions and
// application restarts. Deterministic for a seed. Reads no clock; single-threaded.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "health/remediation.h"

namespace fabrica::sim {

struct FaultSimOptions {
  int nodes = 200;  // HGX nodes of 8 GPUs
  double days = 1;
  uint64_t seed = 42;
  double load = 0.8;  // offered GPU-seconds / capacity
  std::string policy = "bestfit";
  int64_t tick_ms = 10'000;  // heartbeat period and controller interval
  // Fault rates per node per day.
  double fatal_xid_rate = 0.01;
  double warning_xid_rate = 0.02;
  double app_xid_rate = 0.05;
  double unknown_xid_rate = 0.005;
  double ecc_rate = 0.005;
  double agent_death_rate = 0.005;
  double agent_self_recovery = 0.3;  // share of agent deaths that end on their own
  // How often a GPU reset does not fix a fatal XID (the GPU then needs a reboot), and how often a
  // reboot does not fix it (then a repair).
  double reset_insufficient = 0.1;
  double reboot_insufficient = 0.2;
  // Durations of the simulated actions.
  int64_t reset_ms = 2 * 60'000;
  int64_t reboot_ms = 10 * 60'000;
  int64_t repair_ms = 8 * 3'600'000LL;
  int64_t burn_in_ms = 30 * 60'000;
  // Workload durations, log-uniform.
  double duration_min_s = 300;
  double duration_max_s = 12 * 3600;
  health::RemediationConfig remediation;
};

struct FaultSimReport {
  int nodes = 0;
  int64_t gpus = 0;
  double days = 0;
  uint64_t seed = 0;
  // Work.
  int64_t workloads_arrived = 0;
  int64_t workloads_started = 0;  // first starts
  int64_t workloads_completed = 0;
  int64_t workloads_pending_at_end = 0;
  double gpu_seconds_useful = 0;  // work of completed workloads
  // Goodput lost to faults: GPU-seconds of work thrown away (no checkpoints are assumed: an
  // evicted or restarted workload starts over), by evictions and by application restarts.
  double gpu_seconds_lost_evictions = 0;
  double gpu_seconds_lost_restarts = 0;
  double gpu_seconds_out_of_service = 0;  // idle GPU capacity held back by cordons
  double utilization_pct = 0;             // GPU-seconds held by workloads / capacity
  // Faults injected.
  int64_t fatal_xids = 0, warning_xids = 0, app_xids = 0, unknown_xids = 0, ecc_errors = 0;
  int64_t agent_deaths = 0;
  // What the controller did.
  int64_t node_cordons = 0, gpu_cordons = 0, evictions = 0, requeues = 0, app_restarts = 0;
  int64_t gpu_resets = 0, reboots = 0, repairs = 0, burn_ins = 0, burn_in_failures = 0;
  int64_t retired = 0;
  int64_t stale_reports = 0;  // results that arrived after the controller moved on
  // Invariants.
  int remediation_limit = 0;
  int max_in_remediation = 0;
  int64_t dead_bound_limit_ms = 0;
  int64_t max_dead_bound_ms = 0;  // longest a workload stayed bound to a node after its death
  int64_t placements_on_cordoned = 0;
  std::vector<std::string> violations;  // empty when every invariant held

  int final_in_remediation = 0;

  double gpu_seconds_lost() const { return gpu_seconds_lost_evictions + gpu_seconds_lost_restarts; }
  bool ok() const { return violations.empty(); }
  void Print(std::ostream& out) const;
};

// REQUIRES nothing; InvalidArgument for nodes < 1, days <= 0, load outside (0, 2] or a tick
// below 1 ms.
Result<FaultSimReport> RunFaultSim(const FaultSimOptions& options);

}  // namespace fabrica::sim
