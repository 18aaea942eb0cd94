// Time-based replay of a multi-team scenario through the admission layer, with a virtual clock.
//
// A scenario (scenarios/README.md) names its workloads — the openb trace's pods, or a synthetic
// mix per team on a modern fleet — the teams (trust level, weight, priority, minimum runtime,
// guarantee), an offered `load`, the arrival `window`, the admission `interval` and the eviction
// `grace`. Workloads arrive at their (compressed) creation time, wait until an admission cycle
// starts them, and run for their duration; an evicted workload stops `grace` seconds later,
// loses its work and waits again.
//
// Offered load = milli-GPU·s requested inside the arrival window / (capacity × window). Issue 3
// asked for whole durations in the numerator and arrival compression alone; on openb that cannot
// load the fleet: 84% of the requested GPU·s belong to pods that run for more than 10 days while
// holding 2-4% of the GPUs, and all started pods together ask for only 88% of the GPUs, so a
// single pass of the list, however compressed, never keeps the fleet busy (load 1.0 by the
// literal definition gives 3.4% utilization). So a trace scenario compresses the trace's
// arrivals into its window and overlays the compressed list as many times as the load needs
// (ARCHITECTURE.md); `offered_load_unclipped` reports the literal definition beside it.
//
// Three ways to share the fleet are compared on the same workloads:
//   dedicated — each team owns a fixed slice of the nodes (its guarantee's share of each GPU
//               model's nodes) and runs FIFO there;
//   fifo      — one shared queue in arrival order, no quotas, no preemption;
//   fabrica   — the queue tree, quotas, fair share, priorities, reclaim and preemption of
//               sched/admission.h.
// Measured over the arrival window (first to last arrival): GPU utilization, per-team waits,
// time below guarantee with pending work that fits it, Jain's index of normalised shares (each
// team's time-averaged dominant share over its time-averaged water-filled fair share), evictions
// and the GPU-seconds they lost, and the guarantee-wait bound of issue 3 with every exception.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"
#include "core/workload.h"
#include "sched/admission.h"

namespace fabrica::sim {

struct TeamSpec {
  std::string name;
  std::string queue;  // leaf queue under fabrica; defaults to the team's name
  double share = 0;   // % of trace pods (openb) or of the offered load (synthetic)
  TrustLevel trust = TrustLevel::kStandard;
  std::string trust_domain;
  double weight = 0;  // 0 (not given): its guarantee's share of all guarantees
  int priority = 0;
  double min_runtime_s = 0;
  double checkpoint_interval_s = 0;  // 0: its workloads never checkpoint
  int disruption_budget = -1;
  bool strict_fifo = false;     // queueingStrategy: StrictFIFO (its generated queue)
  PreemptionPolicy preemption;  // its generated queue's `preemption`
  QueueSpec::WhenCanBorrow when_can_borrow =
      QueueSpec::WhenCanBorrow::kBorrow;  // flavorFungibility
  double reclaim_min_runtime_s =
      -1;  // reclaimMinRuntimeSeconds; -1: the settings' reclaimMinRuntime
  std::optional<int64_t> guarantee_milli;  // unset: proportional to the team's average demand
  // The part of guarantee_milli on MIG-partitioned GPUs, which only MIG requests can use: where
  // the fleet has them, a computed guarantee is split into the two pools by the team's demand
  // in each (an explicit one is all on whole GPUs), and queues get a flavour per pool.
  int64_t mig_guarantee_milli = 0;
  int64_t cpu_guarantee_milli = 0;  // Scenario::cpu_guarantees: its cores (milli)
  std::optional<int64_t> borrowing_limit_milli;
  std::optional<int64_t> lending_limit_milli;
  // Synthetic workload templates.
  struct Template {
    double weight = 1;
    int pods_min = 1, pods_max = 1;
    // Partial admission: the fewest pods a workload of it may start with (an elastic job; its
    // run then lasts longer in proportion, the work being the same). 0: all of them.
    int min_pods = 0;
    PodSet pod;  // count ignored
    bool gang = false;
    TopologyConstraint topology;
    double duration_min_s = 60, duration_max_s = 3600;  // log-uniform
    std::optional<int> priority;
    std::optional<double> min_runtime_s;
    std::optional<double> checkpoint_interval_s;
    bool preemptible = true;
  };
  std::vector<Template> templates;
  // Synthetic: the part of the window the team submits in, as fractions (a campaign, a shift).
  double active_from = 0, active_to = 1;
};

struct ReplayWorkload {
  Workload spec;  // spec.queue = team name
  int team = 0;
  double arrival_s = 0;
  double duration_s = 0;
  SubmitOptions options;
};

struct Scenario {
  std::string name;
  std::string source;  // file
  // The fleet's mean GPU memory: a share of GPU memory alone (gpuMemory, no gpuMilli) asks, in
  // the measures of the load and of waiting work, the compute its memory is of that mean GPU;
  // once placed, the compute it is charged on its GPU.
  double mean_gpu_memory_mib = 0;
  double load = 1.0;
  double interval_s = 1;
  double grace_s = 30;
  // Computed guarantees split this share of the fleet: 1 promises every GPU, but a fleet packs
  // to a few percent below full, so guarantees that add up to all of it cannot all be placed.
  double guarantee_share = 1.0;
  // cpuGuarantees: the generated queues also guarantee the pods' CPU, each team its demand's
  // share of guaranteeShare of the fleet's cores (TeamSpec::cpu_guarantee_milli), so that a
  // team within its CPU guarantee reclaims cores others borrow (fabrica only).
  bool cpu_guarantees = false;
  // timeLimitFactor: each workload's time limit (spec.maxRuntimeSeconds) is its run time this
  // many times over, rounded up (as users overestimate the limits Slurm's backfill reads);
  // 0: none. Only a reservation's backfill reads it (admission.reserveAfter).
  double time_limit_factor = 0;
  std::vector<TeamSpec> teams;
  // Settings, and the queue tree when the scenario gives one (`admission.queues`); otherwise one
  // root `fleet` with a leaf per team is generated from the teams' guarantees and limits.
  AdmissionConfig admission;
  bool mig_pool = false;  // the fleet has MIG-partitioned GPUs: flavours `mig` and `gpu`
  // Built by LoadScenario:
  Fleet fleet;
  std::vector<ReplayWorkload> workloads;
  double window_s = 86400;            // arrival window
  int64_t left_out = 0;               // trace pods that never started
  int64_t left_out_zero = 0;          // trace pods that ran for no time (also left out)
  double compression = 1;             // trace arrivals: native window / window
  double copies = 1;                  // trace: how many times the compressed list is overlaid
  double offered_load = 0;            // GPU-s requested inside the window / (capacity x window)
  double offered_load_unclipped = 0;  // the same with whole durations
  bool synthetic = false;             // drawn from templates, not a trace
};

// Parses and builds a scenario. `trace_dir`, when not empty, replaces the scenario's trace.dir;
// `load`, when above zero, replaces its load.
// Errors name the file and the field. A trace scenario whose files are missing returns
// kNotFound, so tests can skip.
Result<Scenario> LoadScenario(const std::string& path, const std::string& trace_dir = "",
                              double load = 0);
Result<Scenario> ParseScenario(const std::string& text, const std::string& source,
                               const std::string& base_dir, const std::string& trace_dir = "",
                               double load = 0);

// The team of an openb pod: FNV-1a 64 of a key, mod 100, walked through the teams' shares in
// order (shares are percentages summing to 100). The key is the pod's name, or with block > 1
// its name with the trailing number n replaced by "block-" + n / block, so runs of `block`
// consecutively numbered (consecutively created) pods belong to one team.
int TeamOfPod(const std::string& pod_name, const std::vector<TeamSpec>& teams, int block = 1);

struct TeamResult {
  std::string name;
  int64_t workloads = 0;
  int64_t never_admitted = 0;
  // Of them, those no fleet or quota could ever admit as they ask (left out of the shares and
  // the guarantee's measures, as no scheduler could start them), and why the last one could not.
  int64_t infeasible = 0;
  std::string infeasible_reason;
  // Those this policy can never admit (a dedicated slice without the nodes they need, a queue's
  // guarantee and borrowing limit below what they ask) though the whole fleet could start
  // them: they wait to the end, in the waits and the fair shares; and why the last one waits.
  int64_t policy_blocked = 0;
  std::string policy_blocked_reason;
  // Under dedicated, where the team owns no node (fewer nodes than teams): why; its work waits
  // to the end. Empty otherwise.
  std::string no_slice;
  double guarantee_gpus = 0;
  double wait_mean_s = 0, wait_p95_s = 0;
  double below_guarantee_pending_s = 0;      // ... with pending work that fits the difference
  double below_guarantee_any_pending_s = 0;  // ... with any work pending
  double avg_share = 0, avg_fair_share = 0;
  int64_t preempted = 0;
  std::map<std::string, int64_t> preempted_by;  // preemptor's team → evictions of this team
  double gpu_seconds_lost = 0;                  // work of this team that evictions threw away
  // Waits by the GPUs a workload asks for in all, rounded up ("<1": a fraction or a MIG slice;
  // "1", "2-8", "9-32", "33+"; none: in no bucket), so that large gangs waiting behind small work
  // show: each bucket's count,
  // mean and p95 wait, in size order, buckets with no workload left out.
  struct SizeWaits {
    std::string gpus;
    int64_t workloads = 0;
    double wait_mean_s = 0, wait_p95_s = 0;
  };
  std::vector<SizeWaits> waits_by_size;
};

struct BoundException {
  std::string workload;
  std::string team;
  double wait_s = 0, bound_s = 0;
  std::string cause;  // the admitter's reason at the workload's last cycle
  // What held it: "disruption budget" (the allowed exception: a disruption budget
  // forbade the evictions it needed for at least the excess of its wait over the bound) or, by
  // the reason at its last cycle, "minimum runtime" (victims it could take were within theirs),
  // "victims stopping" (it had chosen victims or moves that were still stopping) or "no room"
  // (its pool is full or fragmented and nobody it may reclaim from holds what it needs, e.g.
  // CPU; also "queued behind" a StrictFIFO head), or "room promised in its queue" (the room
  // below its team's guarantee that it fits was promised to other workloads of its queue
  // whose victims were still stopping, for at least its excess).
  std::string kind;
};

struct ReplayResult {
  std::string scenario, policy;
  double load = 0, window_s = 0;
  double offered_load = 0, offered_load_unclipped = 0, copies = 1, compression = 1;
  // The offered load over the window the measures use (first to last arrival), where the load
  // is set over the scenario's whole window: apart where arrivals stop early (a team `active`
  // in part of it, a review's read twice the load it was told).
  double offered_load_measured = 0;
  int64_t workloads = 0, left_out = 0, left_out_zero = 0;
  double utilization_pct = 0;
  // The same less the part of it that evictions threw away: an evicted workload runs again
  // from the start, so what it had done inside the window before it stopped was allocated but
  // is done twice.
  double useful_utilization_pct = 0;
  double jain_index = 0;
  int64_t preemptions = 0;
  int64_t partial_admissions = 0;    // admissions with fewer pods than asked (minPods)
  int64_t workloads_reserved = 0;    // workloads that reserved room (admission.reserveAfter)
  int64_t workloads_backfilled = 0;  // started in held room, ending before (timeLimitFactor)
  int64_t elastic_growths = 0;       // runs started in part that took more pods later
  // Preemptions that took an elastic run's pods beyond its minimum and left it running with the
  // rest (elastic shrink; not counted in `preemptions`, and no work is lost), and the pods taken.
  int64_t elastic_shrinks = 0;
  int64_t elastic_shrink_pods = 0;
  double gpu_seconds_lost = 0;
  // How evictions spread over workloads: how many were evicted at all, how many three times or
  // more, and the most times one was (a workload evicted again and again may never finish).
  int64_t workloads_evicted = 0;
  int64_t workloads_evicted_3plus = 0;
  int64_t evictions_max = 0;
  std::vector<TeamResult> teams;
  // Guarantee-wait bound, per workload: from the moment a pending workload fits in what its
  // team holds below its guarantee in its pool (guarantee - usage) until it is admitted, against
  // interval + grace + the longest remaining minimum runtime (at that moment) of the victims
  // evicted for it. `bound` reads "fits" as the issue's "a team with pending work that fits its
  // guarantee": the team's pending work taken in its queue's order (priority, then arrival), each
  // workload counted when it fits in the room the ones before it that fit have left. A wait ends
  // unchecked when the workload stops fitting because its team's own work took the room (or
  // work of its team that goes before it arrived), unless it had already waited past its
  // bound. `bound_alone` checks each workload against the room
  // alone, as if none of its team's other pending work existed (stricter: ten waiting one-GPU
  // pods all "fit" four free GPUs). An exception names the workload and the reason it still
  // waited at its last cycle.
  struct BoundCheck {
    int64_t checked = 0;        // waits checked
    double worst_excess_s = 0;  // max(wait - bound); <= 0 means the bound always held
    std::vector<BoundException> exceptions;
  };
  BoundCheck bound, bound_alone;
  // The same against whole team episodes: spans in which a team held less than its guarantee
  // while any of its pending workloads would have fit in the difference. Stricter than the
  // issue's bound: a steady stream of arrivals, each admitted in time, keeps one episode open.
  int64_t episodes = 0, episode_exceptions = 0;
  double episode_worst_excess_s = 0;
  int64_t cycles = 0;
  double cycle_seconds = 0;  // wall time inside Admitter::Cycle
  double cycle_max_seconds = 0;
  bool synthetic = false;  // the scenario's workloads were drawn, not a trace's
};

// With `events`, every arrival, start, resize, eviction and stop is written there as a line of
// JSON (JSON Lines; scenarios/README.md "The event log" has the fields), after a first line with
// the teams and the fleet's nodes, so that scripts/verify_replay.py can check the run on its own:
// every device, core and byte within its node at every instant, trust isolation, gangs whole,
// runs as long as their workloads, and the utilization, waits, evictions and Jain's index
// recomputed from the log.
Result<ReplayResult> RunReplay(const Scenario& scenario, const std::string& policy,
                               const std::string& placement = "fabrica",
                               std::ostream* events = nullptr);

void PrintReplayJson(const ReplayResult& r, std::ostream& out);
void PrintReplayTable(const std::vector<ReplayResult>& results, std::ostream& out);

}  // namespace fabrica::sim
