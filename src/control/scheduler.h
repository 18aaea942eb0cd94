// Scheduler: the controller that turns Pending workloads into placements.
//
// Each cycle reads the fleet (Nodes, their Leases), the Tenants and the Workloads from the store,
// rebuilds a ClusterState with every bound workload's assignments applied, and places the
// Pending ones with the pure placement core (sched/): highest priority first, then oldest; a
// gang whole or not at all. A placed workload gets phase Scheduled with its assignments per pod
// (node, GPU index and UUID, milli-GPU, memory, MIG slice) and the isolation mechanism; one that
// does not fit keeps phase Pending with the placer's reason in status.message. Nodes whose lease
// has not been renewed within the grace period are NotReady: their workloads go back to Pending
// (requeue on node loss). Cordoned nodes (spec.unschedulable), nodes whose health record
// (/registry/nodehealth/, control/health_controller.h) says they are out of service, and GPUs that
// record cordons take no new work.
//
// When Queue objects exist, admission goes through the queue tree (sched/admission.h) instead:
// quotas, borrowing and lending limits, weighted fair share and preemption, decided in one pass
// with placement by an Admitter rebuilt from the store every cycle. A workload waits in
// spec.queue, else in the queue named after its tenant, else in the built-in best-effort queue
// `unqueued`. A victim is marked (status.preemption: by, reason, deadline, and a Preempted
// condition), keeps its devices for `preemption_grace_ms`, then returns to Pending; its
// preemptor waits for it, with its planned place in status.nomination: each cycle's Admitter
// holds what is free of that place for it, and once its victims have gone it is tried first
// there.
//
// Writes are conditional on the revision read, so a concurrent user update wins and the
// workload is looked at again next cycle. RunOnce is not re-entrant; call it from one thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "control/clock.h"
#include "store/store.h"

namespace fabrica {

class Metrics;

struct SchedulerOptions {
  std::string policy = "fabrica";
  // Budgets: a reason to hold pending work of a tenant and queue (an enforced budget is spent).
  std::function<std::optional<std::string>(const std::string& tenant, const std::string& queue)>
      admission_hold;
  int64_t node_grace_ms = 40'000;  // lease age after which a node is NotReady
  // With a health controller: a node without a health record yet (registered since the
  // controller's last round, so neither inspected nor burnt in) takes no work.
  bool require_health_record = false;
  // Admission through queues (when Queue objects exist): a preempted workload keeps running
  // this long after it is chosen (time to checkpoint), then goes back to its queue.
  int64_t preemption_grace_ms = 30'000;
  int max_admissions_per_cycle = 1000;
  // Fair share blends each queue's current dominant share with its usage history, decayed
  // with this half-life (0: current usage only), in this proportion.
  // A gang whose pods have not all started (phase still Scheduled) this long after it was
  // admitted gives its devices back and waits again.
  double gang_timeout_s = 300;
  // A gang the timeout released waits this long before it is tried again, doubling with each
  // release up to gang_requeue_backoff_max_s (Kueue's waitForPodsReady requeuingStrategy);
  // after gang_requeue_limit releases (0: no limit) it is deactivated (spec.active false,
  // reason RequeuingLimitExceeded) until someone sets it active again. Counted in
  // status.requeueState {count, requeueAt}.
  double gang_requeue_backoff_s = 60;
  double gang_requeue_backoff_max_s = 3600;
  int gang_requeue_limit = 0;
  // A node where pods the pods-ready timeout gave up on did not start while its agent renewed
  // its lease, and other nodes started pods meanwhile, takes no new work for this long (0: none
  // held), or until a pod starts there, as
  // Slurm drains a node that fails to launch a job: the Node's condition PodsStarting False
  // says so. Held in the scheduler's memory (a restarted scheduler forgets it).
  double unstarted_node_hold_s = 1800;
  double usage_half_life_s = 3600;  // (kDefaultUsageHalfLifeS)
  double history_weight = 0.5;
  // For this long after a queue reclaims borrowed GPUs, CPU or memory, the room its reclaims
  // freed beyond their need is lent to no one (AdmissionConfig::reclaim_hold_s; 0: lent at once).
  // Kept in the queue's status (lastReclaimTime, reclaimedRoomMilli) across cycles and restarts.
  double reclaim_hold_s = 300;
  // How long a workload's minRuntimeSeconds shields it from another queue's work, for queues
  // whose spec sets no reclaimMinRuntime (AdmissionConfig::reclaim_min_runtime_s).
  double reclaim_min_runtime_s = 3600;
  // Several queue trees lend each other what they leave unused (AdmissionConfig::
  // lend_across_trees).
  bool lend_across_trees = false;
  // Reservations for whole-GPU work that waited this long without room (AdmissionConfig::
  // reserve_after_s; 0: none), at most max_reservations at a time. The plan is kept in the
  // workload's status.nomination across cycles (reason Reserved).
  double reserve_after_s = 0;
  int max_reservations = 4;
  // Preemption for fair share beside reclaim (AdmissionConfig::fair_share_preemption).
  bool fair_share_preemption = false;
  // Work admitted with fewer pods than asked takes more as room frees and its quota allows
  // (AdmissionConfig::elastic_growth); the new size is billed from status.resizedTime.
  bool elastic_growth = true;
  // Preemption and reclaim take elastic work's pods beyond its minimum first, leaving it
  // running with the rest (AdmissionConfig::elastic_shrink; status.shrinks marks them until
  // they stop).
  bool elastic_shrink = true;
};

struct CycleStats {
  int scheduled = 0;
  int pending = 0;
  int requeued = 0;
  int preempted = 0;  // victims chosen this cycle
  int timed_out = 0;  // stopped for good past their maximum runtime
  int grown = 0;      // running work admitted in part that took more pods
  int shrinks = 0;    // running elastic work whose pods beyond its minimum a preemption took
  int growths_undone =
      0;  // grown work whose new pods did not start in time, back to those that did
  int running = 0;
  double seconds = 0;
};

class Scheduler {
 public:
  Scheduler(Store& store, const Clock& clock, SchedulerOptions options, Metrics* metrics);
  Result<CycleStats> RunOnce();

  struct ParsedWorkload;  // a stored workload as decoded: the object and its spec

 private:
  // The decoded workload of `kv`, from the cache while its revision is unchanged; null when it
  // does not decode (it is skipped, as before the cache).
  std::shared_ptr<const ParsedWorkload> Parse(const KeyValue& kv);
  // Holds the nodes where none of `workload`'s pods (bound at `bound_at`) started while their
  // agents renewed their leases (unstarted_node_hold_s), adds them to `unusable` for the rest of
  // the cycle, and says which for its message ("" if none).
  std::string HoldUnstartedNodes(const std::string& workload, const nlohmann::json& status,
                                 int64_t bound_at, int64_t now, std::set<std::string>& unusable,
                                 const std::map<std::string, int>& node_index);

  Store& store_;
  const Clock& clock_;
  SchedulerOptions options_;
  Metrics* metrics_;
  // key -> (mod_revision, decoded, cycle it was last listed in); entries of deleted keys are
  // dropped at the end of the listing.
  std::unordered_map<std::string,
                     std::tuple<int64_t, std::shared_ptr<const ParsedWorkload>, uint64_t>>
      parsed_;
  uint64_t cycle_ = 0;
  // Each queue's decayed usage history after the last cycle, and when; also kept in the
  // queues' status (usageHistory), from which a restarted scheduler takes it up again.
  std::map<std::string, double> history_;
  double history_at_ = -1;
  // Each queue's last reclaim (when, and the room it freed beyond its need by flavour) as this
  // scheduler's cycles left it, beside the copy in the queue's status (lastReclaimTime,
  // reclaimedRoomMilli): a status write that fails, because someone edited the queue while
  // the cycle ran, does not lose the reclaim hold. By queue name.
  struct Reclaim {
    int64_t queue_revision = 0;  // the queue's create_revision
    double at = -1;
    std::map<std::string, int64_t> room_milli;
  };
  std::map<std::string, Reclaim> reclaims_;
  // Nodes held for pods that did not start there (unstarted_node_hold_s), by name.
  struct StartHold {
    int64_t since_ms = 0;
    int64_t bound_ms = 0;  // when the work it is held for was bound: a start since lifts it
    int64_t until_ms = 0;
    std::string message;          // the condition's
    int64_t unready_from_ms = 0;  // a lapsed lease ends it only from then (read back: a grace)
  };
  std::map<std::string, StartHold> start_holds_;
  static void WriteStartHold(const StartHold& h, nlohmann::json& status);
  // Whether the holds saved in the Nodes' status (status.startHold) have been read back: once,
  // at this scheduler's first cycle, so that a restart keeps them.
  bool holds_restored_ = false;
  // When a pod was last reported started on each node (status.startedPods), as seen so far.
  std::map<std::string, int64_t> last_start_ms_;
  // By waiting preemptor, what of it was last called off (a victim's eviction, a shrink) and
  // when: said in its message while it waits without preempting again, not only in the cycle
  // it happened (a re-trial's preemptor soon read only "the fleet has no room").
  struct CalledOff {
    std::string note;
    int64_t at_ms = 0;
  };
  std::map<std::string, CalledOff> called_off_;
};

// A workload's status.assignments as it is admitted, each pod on the node its status.nomination
// planned for it where a pod of its set was placed there: the pods of a set ask alike, so places
// move between their names, and each name keeps its place in the list (pods are named by it).
nlohmann::json KeepNominatedNodes(const nlohmann::json& assignments,
                                  const nlohmann::json& nomination);

}  // namespace fabrica
