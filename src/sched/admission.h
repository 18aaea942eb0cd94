// Admission: which pending workloads start, decided in one pass with placement.
//
// Queues form a tree (organisation → team → project); workloads wait in the leaves. Every queue
// may hold, per resource flavour (a GPU model, a MIG profile, fractional GPUs — whatever the
// flavour's selector names), a guaranteed quota, a borrowing limit (how far above its guarantee
// its subtree may go) and a lending limit (how much of its unused guarantee others may use).
// A subtree lends to and borrows from its siblings, so an inner queue is a cohort.
//
// Each Cycle:
//   1. gangs admitted more than `gang_timeout_s` ago whose pods are not all ready are released
//      and requeued;
//   2. workloads that preempted others and whose victims have all stopped go first;
//   3. then, until `max_admissions` are admitted or the attempt budget is spent, the next
//      workload is taken by descending the tree: at every level the child whose next workload
//      fits within its guarantee comes first, then by over-quota priority, then the one with
//      the lowest weighted dominant share (blended with its decayed usage history), and inside
//      a leaf the highest priority, then the oldest;
//   4. a workload is admitted only if its quota allows it AND the Placer finds room for all of
//      its pods (gangs all or nothing), so there is no "admitted but unplaceable" state;
//   5. when quota allows it but the fleet has no room, it may preempt: lower-priority workloads
//      of its own queue, and — when its queue is within its guarantee — workloads of queues that
//      are borrowing (reclaim), or, where fair-share preemption is on, of queues whose share
//      stays above its own. Victims must have run their minimum runtime and their queue's
//      disruption budget must allow one more eviction; among the eligible, the search frees one
//      node at a time for each pod and keeps the node whose victims are of the lowest priority,
//      then cost the fewest GPU-seconds (what they would lose, plus what their earlier evictions
//      lost), then are newest. Victims keep their devices until the caller reports
//      them stopped (after its grace period). Each queue's `preemption` policy narrows or widens
//      who may go: its own equal-priority newer work, no own work, reclaim only from lower
//      priority or not at all, or, while borrowing, other queues' lower-priority borrowed work;
//   6. last, running workloads admitted with fewer pods than asked take more where room and
//      quota allow (elastic growth).
// Every decision leaves a reason a user can read. Pure and deterministic: time is a parameter.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"
#include "core/workload.h"
#include "sched/cluster_state.h"
#include "sched/placer.h"
#include "sched/policy.h"

namespace fabrica {

// The flavour every GPU request falls to when no other flavour takes it: the only one where
// none is declared, and the last where some are.
inline constexpr const char* kDefaultFlavor = "gpu";

// A resource flavour: the GPUs a selector names. A pod's devices are charged to the first
// flavour (in the config's order; the server sorts stored flavours most specific first) that
// matches the model it was placed on, its kind and its MIG profile, preferring flavours that
// name its kind to those that name none (so a `kind: mig` flavour keeps MIG slices off a
// kind-less flavour's quota). A flavour no queue has a quota in takes nothing: its GPUs go to
// the next flavour that matches, and GPUs no limiting flavour takes are not limited.
struct FlavorSpec {
  std::string name;
  std::optional<DeviceKind> kind;         // unset: any GPU request
  std::vector<std::string> models;        // empty: any model
  std::vector<std::string> mig_profiles;  // empty: any profile (kMig only)
};

struct QuotaSpec {
  int64_t guaranteed_milli = 0;
  std::optional<int64_t> borrowing_limit_milli;  // unset: may borrow without limit
  std::optional<int64_t> lending_limit_milli;    // unset: lends all its unused guarantee
  // `guaranteed` not given: a queue with children is guaranteed their sum (as without the
  // entry; the entry then sets only its limits), a leaf nothing.
  bool guaranteed_unset = false;
};

// Which running workloads a pending workload of a queue may evict, as in Kueue's ClusterQueue
// `preemption`. The defaults are what admission did before the policy existed.
struct PreemptionPolicy {
  // withinQueue: its own queue's workloads of lower priority (kLowerPriority), or also those
  // of equal priority that arrived after it (kLowerOrNewerEqualPriority), or none (kNever).
  enum class Within { kNever, kLowerPriority, kLowerOrNewerEqualPriority };
  // reclaimWithinCohort: while within its guarantee, workloads that other queues run on
  // borrowed quota — any of them (kAny), only those of lower priority (kLowerPriority), none.
  enum class Reclaim { kNever, kLowerPriority, kAny };
  // borrowWithinCohort: whether a workload that must borrow may evict other queues' borrowed
  // workloads of lower priority (at or below `borrow_max_priority` when set) to make room.
  enum class Borrow { kNever, kLowerPriority };
  Within within_queue = Within::kLowerPriority;
  Reclaim reclaim_within_cohort = Reclaim::kAny;
  Borrow borrow_within_cohort = Borrow::kNever;
  std::optional<int> borrow_max_priority;
};

// stopPolicy (Kueue's): kHold admits nothing more from the queue and its subtree; kHoldAndDrain
// also evicts what they run (with the caller's grace period). An operator's switch: taken
// back to kNone, the queue admits again.
enum class StopPolicy { kNone, kHold, kHoldAndDrain };

// Beside GPU flavours, a queue's quotas may name the pods' CPU (milli-cores) and memory (MiB),
// which no flavour divides: limits on admission, as the GPUs' (guarantee, borrowing, lending).
// Past its guarantee of them only a queue's own lower-priority work is preempted for them;
// within it they are reclaimed from queues of its tree that borrow them.
inline constexpr const char* kCpuQuota = "cpu";
inline constexpr const char* kMemoryQuota = "memory";

struct QueueSpec {
  std::string name;
  std::string parent;  // empty: a root
  // Its part of what lies past its siblings' guarantees, against theirs (>= 0). 0: none of its
  // own: it takes idle GPUs past its guarantee only after its siblings of the same priority
  // that have a weight (KAI's overQuotaWeight 0).
  double weight = 1;
  // By flavour name (milli-GPUs), or kCpuQuota (milli-cores) and kMemoryQuota (MiB).
  std::map<std::string, QuotaSpec> quotas;
  int disruption_budget = -1;  // workloads being evicted at once; -1 = no limit
  // queueingStrategy. BestEffortFIFO (false): a workload that cannot start yet lets those
  // behind it in the queue try. StrictFIFO (true): the queue's head blocks the rest until it
  // starts (Kueue's two strategies); nothing behind it starts or preempts first.
  bool strict_fifo = false;
  PreemptionPolicy preemption = {};
  // flavorFungibility.whenCanBorrow (Kueue's): kBorrow lets placement pick among all the
  // flavours its quota allows; kTryNextFlavor places a workload first in the flavours where its
  // queue stays within its guarantee, and borrows only when none of those has room (borrowed
  // GPUs are the first to be reclaimed).
  enum class WhenCanBorrow { kBorrow, kTryNextFlavor };
  WhenCanBorrow when_can_borrow = WhenCanBorrow::kBorrow;
  // flavorOrder: flavours its workloads try in this order (Kueue's order of a ClusterQueue's
  // flavours: reserved before spot, cheap before fast); a workload goes to the first whose
  // models have room, then to the models no listed flavour takes. Empty: its nearest
  // ancestor's; none: placement picks among every flavour its quota allows.
  std::vector<std::string> flavor_order = {};
  StopPolicy stop_policy = StopPolicy::kNone;
  // Tenants whose workloads may wait in this queue or a leaf below it ("*": every tenant),
  // beside the tenant a leaf is named after (sched/queue_objects.h, TenantMayUse).
  std::vector<std::string> tenants = {};
  // reclaimMinRuntimeSeconds: the longest minimum runtime that shields a workload of this
  // queue (or of a queue below it without one of its own) from eviction by another queue's
  // work (a reclaim, fair-share or borrowWithinCohort preemption, a consolidation move); its
  // own minRuntimeSeconds still holds in full against its own queue's work. An administrator's
  // cap: a user cannot hold borrowed GPUs past it. -1: its parent's (at the top: the
  // admission config's reclaim_min_runtime_s).
  double reclaim_min_runtime_s = -1;
  // preemptMinRuntimeSeconds: how long every workload of this queue (or of a queue below it
  // without one of its own) runs before its own queue's work may preempt it, whatever its
  // minRuntimeSeconds asks (KAI's preempt-min-runtime): an administrator's floor, where
  // reclaimMinRuntimeSeconds is a cap. -1: its parent's (at the top: none).
  double preempt_min_runtime_s = -1;
  // A root that takes whatever GPUs, CPU and memory no one uses, beyond its guarantee, and is
  // reclaimed by any tree's work within its guarantee: the built-in `unqueued` when there are
  // several trees, so that work naming no queue still runs on idle capacity. Not a spec field.
  bool best_effort = false;
  // Never preempts for a fair share (the built-in `unqueued` wherever it sits: work naming no
  // queue runs on what is idle). Not a spec field.
  bool no_fair_share = false;
  // Over-quota priority (KAI's queue priority): among siblings past their guarantees, higher
  // priority is offered idle room first, and, under fair-share preemption, takes borrowed work
  // back from lower-priority siblings whatever their shares (never the other way round); the
  // weight divides room only between siblings of equal priority. Guarantees are not affected.
  int priority = 0;
  // Which of queueingStrategy, preemption and flavorFungibility its spec sets (kSets*). A leaf
  // that sets one not follows its nearest ancestor's that does (a department's policies hold
  // for its leaves: a user-style trial's department StrictFIFO with reclaimWithinCohort Never
  // was said by describe and did nothing).
  unsigned sets = 0;
  static constexpr unsigned kSetsStrategy = 1, kSetsPreemption = 2, kSetsFungibility = 4;
};

// The usage history's half-life where a configuration names none: the server's
// --usage-half-life and a scenario's admission.usageHalfLife (a trial's scenario without an
// admission block ran fair share on current usage alone, its ties to the first team listed).
inline constexpr double kDefaultUsageHalfLifeS = 3600;

struct AdmissionConfig {
  std::vector<FlavorSpec> flavors;  // empty: one flavour "gpu" for every GPU request
  std::vector<QueueSpec> queues;
  // 0: fair share looks at current usage only (what a bare config, as the unit tests', has;
  // configurations parsed default to kDefaultUsageHalfLifeS)
  double usage_half_life_s = 0;
  double history_weight = 0.5;  // blend of decayed history into the fair-share key
  double gang_timeout_s = 300;
  bool preemption = true;
  bool fair_share_preemption = false;     // also preempt queues whose share stays above ours
  bool strict_priority = true;            // false: a leaf is strict FIFO by arrival (the fifo mode)
  int max_attempts_per_cycle = 0;         // 0: 4 x max_admissions + 64
  int preemption_searches_per_queue = 1;  // per cycle, in queue order
  // More searches per queue and cycle for workloads that fit in what is left of their queue's
  // guarantee once the workloads it already preempts for are counted (so never more than the
  // guarantee is reclaimed at once).
  int reclaim_searches_per_queue = 64;
  // Consolidation: a workload within its guarantee that does not fit only because the free GPUs
  // are scattered may move up to `consolidation_max_moves` single-pod preemptible workloads
  // that fit elsewhere; at most `consolidation_searches_per_cycle` plans a cycle.
  bool consolidation = true;
  int consolidation_max_moves = 8;
  int consolidation_searches_per_cycle = 4;
  // A reclaim often frees more than the reclaiming workload needs (a whole gang for a quarter of
  // a GPU). Lent at once, that room goes to the borrower's next workload, which the queue's next
  // arrival reclaims again, throwing its work away each time. For this long after a reclaim, the
  // room its reclaims freed beyond their own need (up to its unused guarantee) is lent to no one
  // (0: all of it lent at once).
  double reclaim_hold_s = 300;
  // reclaimMinRuntime: the queues' reclaimMinRuntimeSeconds where they set none (a year, the
  // longest minimum runtime a workload may ask, leaves every one in force).
  double reclaim_min_runtime_s = 3600;
  // Elastic growth: a workload admitted with fewer pods than asked (partial admission) takes
  // more as room frees and its quota allows, once nothing waits in its queue and no workload
  // within its guarantee went without room this cycle (up to `max_growths_per_cycle` tries a
  // cycle).
  bool elastic_growth = true;
  int max_growths_per_cycle = 16;
  // Elastic shrink: a preemption or reclaim that victims' pods beyond their pod sets' minCount
  // (the last pods of each set) can make room for takes those pods and leaves the workloads
  // running with fewer, before it evicts any workload whole (as KAI shrinks elastic jobs to
  // their minimum).
  bool elastic_shrink = true;
  // Lending across trees (KAI's over-quota across departments): the roots of several trees
  // become siblings under the fleet, which lends what no tree uses of its guarantee (within
  // the roots' lendingLimits) and what no tree is guaranteed, to any tree within its root's
  // borrowingLimit; a tree below its guarantee takes it back by reclaim. GPU flavours only:
  // CPU and memory quotas stay within their tree. Off: a root's guarantee is the most its tree
  // holds (Kueue's cohorts, which lend to no one outside).
  bool lend_across_trees = false;
  // Reservations (Slurm's backfill reservation for its top jobs, Volcano's sla waiting time):
  // a workload of whole GPUs within its queue's guarantee that has waited this long and still
  // finds no room has nodes chosen for it — those closest to free, the ones it planned on before
  // first — and what frees there is held for it until it fits, so that smaller work arriving
  // behind it no longer takes each GPU as it frees. At most `max_reservations` at a time, on
  // nodes no other reservation holds. 0: none (the default).
  // Work with a time limit (spec.maxRuntimeSeconds) backfills into a reservation's held room
  // when it ends before the reservation could start: before every device of the plan is free,
  // by the time limits of what runs there (as Slurm's backfill, which needs every job's limit;
  // work without one may run forever, so a reservation with such work on its devices lets none
  // in).
  double reserve_after_s = 0;
  int max_reservations = 4;
};

// The queue the fleet is in the tree when trees lend to each other (AdmissionConfig::
// lend_across_trees): the parent of every root, guaranteed the fleet's GPUs. Not a name a
// queue may take.
inline constexpr const char* kFleetQueue = "(fleet)";

// How the reason of a workload holding a reservation begins (AdmissionConfig::reserve_after_s):
// "reserving room on N …"; the server's status reason for it is Reserved.
inline constexpr char kReservingRoom[] = "reserving room";

// Names the bad field ("queues[2].parent: unknown queue \"x\"", "... cycle ...", negatives,
// unknown flavours, children guaranteed more than their parent).
Status ValidateAdmissionConfig(const AdmissionConfig& config);
// The combinations a queue's preemption policy may not have; the message names the key below
// `preemption` ("borrowWithinCohort: ...").
Status ValidatePreemptionPolicy(const PreemptionPolicy& policy);

// Reads `flavors`, `queues` and the admission settings from a YAML mapping (the scenario's
// `admission` section or a Queue list); see scenarios/README.md for the schema.
class YamlMap;
Result<AdmissionConfig> ParseAdmissionConfig(YamlMap& map);
// One queue: name, parent, weight, disruptionBudget, queueingStrategy, preemption,
// flavorFungibility, flavorOrder, stopPolicy (None | Hold | HoldAndDrain), tenants (names or "*"),
// quotas (by flavour, or `cpu` and `memory`: guaranteed, borrowingLimit, lendingLimit); the tree is
// checked by ValidateAdmissionConfig.
Result<QueueSpec> ParseQueueSpec(YamlMap& map);
// One flavour: name, kind (whole | fraction | mig), models, migProfiles.
Result<FlavorSpec> ParseFlavor(YamlMap& map);
// The keys a queue and a scenario's team share: queueingStrategy (StrictFIFO | BestEffortFIFO),
// preemption {withinQueue, reclaimWithinCohort, borrowWithinCohort {policy,
// maxPriorityThreshold}}, flavorFungibility {whenCanBorrow: Borrow | TryNextFlavor} and
// reclaimMinRuntimeSeconds, into `spec`'s strict_fifo, preemption, when_can_borrow and
// reclaim_min_runtime_s.
Status ParseQueuePolicies(YamlMap& map, QueueSpec* spec);
// Only the cycle's knobs (usageHalfLife, historyWeight, gangTimeout, preemption,
// fairSharePreemption, preemptionSearchesPerQueue, reclaimSearchesPerQueue, consolidation,
// consolidationMaxMoves, reclaimHold, reclaimMinRuntime, elasticGrowth, elasticShrink), leaving
// other keys to the
// caller.
Status ParseAdmissionSettings(YamlMap& map, AdmissionConfig* config);

enum class Phase { kPending, kAdmitted, kEvicting, kFinished, kInfeasible };
const char* PhaseName(Phase p);

struct SubmitOptions {
  double min_runtime_s = 0;  // not preempted before it has run this long
  // Not preemptible: never a victim, and so admitted only while its queue's non-preemptible
  // work stays within the queue's guarantee (in GPUs, and CPU and memory where its queue limits
  // them): nobody could take borrowed room from it back.
  bool preemptible = true;
  // Workload::preempts: false (preemptionPolicy Never), nothing is evicted for it.
  bool may_preempt = true;
  // How often it saves its progress (0: never): evicting it loses only the work since its last
  // checkpoint (Admitter::LostIfEvicted), counted from the start of its run.
  double checkpoint_interval_s = 0;
  // When its run began, where that is after its admission (the server: a bound workload's
  // status.startTime, or the cycle's time while it has not started); -1: at its admission.
  double started_at = -1;
  // Restore: when it entered its queue (the server: its creation), which decides who is
  // newer under LowerOrNewerEqualPriority; -1: at its admission.
  double arrived_at = -1;
  // Restore of an evicting workload: it leaves for no preemptor (a drain, its maximum
  // runtime), so what it holds is not room its queue may count on reclaiming for.
  bool leaving = false;
  // Restore of a workload admitted with fewer pods (partial admission): its pods per pod set
  // (each between its minCount and count); empty: all of them.
  std::vector<int> pod_counts = {};
  // Restore: whether it may take more pods (elastic growth): not while its pods have not all
  // started, its tenant or queue is held over budget, or it runs on a queue it may no longer
  // use.
  bool may_grow = true;
  // Restore of a grown workload: when it last grew (its size before that counted as its
  // least, for the work an eviction would lose); -1: never.
  double resized_at = -1;
  // Whether an elastic shrink may take its pods beyond its minCount (the server: not until
  // every pod of its binding has started, so a shrink restarts no gang timeout).
  bool may_shrink = true;
  // Restore: its pods per pod set that have completed while others run on (Kueue's
  // reclaimablePods). They hold no devices and no quota: `assign` names only the others, and
  // it neither grows nor shrinks. Empty: none.
  std::vector<int> completed = {};
  // GPU-seconds its earlier evictions lost (the server: status.evictions.gpuSecondsLost). They
  // count toward the cost of evicting it again, so that a workload just restarted after an
  // eviction, which would lose little, is not the cheapest victim every time (Admitter::
  // EvictionCost).
  double lost_before_s = 0;
  // Restore: when each of its pods started, by name ("main-3"; the server: status.startedPods).
  // What a shrink's pods lose counts from when they started (Admitter::Split). Empty: unknown.
  std::map<std::string, double> pod_started = {};
  // Restore of an evicting workload: a consolidation moves it (Eviction::Basis::kMove), so its
  // preemptor holds room for it to go to (Admitter::RestoreNomination).
  bool moving = false;
};

// A victim is a whole workload, or the pods an elastic shrink takes from one: then `victim` is
// a new handle for those pods alone (fragment_of names the workload, which runs on with the
// rest; the workload's pod_counts say how many it keeps, the fragment's assignments which
// pods go). Either way the caller calls Terminated(victim) once its
// grace period ends; a fragment then frees its devices and is gone (nothing waits again).
struct Eviction {
  int victim = 0;
  int preemptor = 0;  // -1: none (its queue drains)
  std::string reason;
  // Why, where it is to be re-checked while the victim stops: kPriority, for work of its own
  // queue that outranks it (higher priority, or the same and earlier), holds only while the
  // preemptor still does; kReclaim, for work within its queue's guarantee, only while the
  // preemptor's queue may still reclaim for it (Admitter::GuaranteeHolds).
  // kMove: a consolidation moves it; its preemptor holds room for it elsewhere until it has
  // stopped (Entry::move_plan), so that newer work does not take the place it was moved to.
  enum class Basis { kOther, kPriority, kReclaim, kMove };
  Basis basis = Basis::kOther;
};

struct CycleResult {
  std::vector<int> admitted;
  std::vector<Eviction> evicted;
  std::vector<int> released;  // gangs that timed out, back to pending
  std::vector<int> grown;     // admitted in part, now with more pods (elastic growth)
  // Admitted earlier in this cycle, then taken back for a preemptor before starting: pending
  // again (not in `admitted`); its preemptor goes first next cycle.
  std::vector<int> taken_back;
  int attempts = 0;
};

class Admitter {
 public:
  // The config must pass ValidateAdmissionConfig; `policy` must outlive the Admitter.
  static Result<std::unique_ptr<Admitter>> Create(const Fleet& fleet, std::vector<Tenant> tenants,
                                                  AdmissionConfig config, const Policy& policy,
                                                  uint64_t seed = 1);

  // Adds a pending workload to its queue (spec.queue, which must be a leaf). Returns its handle.
  // A workload no node of the fleet could ever hold is kept as kInfeasible with the reason.
  Result<int> Submit(const Workload& spec, double now, SubmitOptions options = {});

  // A workload that already holds `assign` (one per pod, in pod-set order), admitted at
  // `admitted_at`: for callers that rebuild an Admitter from stored state, like the server's
  // scheduler each cycle. It is charged to its queue and holds its devices; `evicting` marks one
  // already chosen as a victim, which keeps its devices, counts against its queue's disruption
  // budget and is not chosen again.
  Result<int> Restore(const Workload& spec, const std::vector<Assignment>& assign,
                      double admitted_at, SubmitOptions options = {}, bool evicting = false);
  // The pods of restored workload `parent` that an elastic shrink takes and that have not
  // stopped yet, as a rebuilding caller finds them (Restore the workload with the pods it keeps):
  // per pod, its pod set's index and where it runs. An evicting fragment (see Eviction).
  Result<int> RestoreFragment(int parent, const std::vector<std::pair<int, Assignment>>& pods);
  // Takes capacity out of the fleet for the Admitter's life (a cordoned GPU, a node that must
  // take no new work): `a` as if placed for `req`, charged to no queue.
  void Reserve(const Assignment& a, const PodRequest& req) { state_.Apply(a, req); }
  // Preemption and consolidation plan no room on node n (it takes no new work, or only part of
  // it does): its workloads are neither victims nor movers for a pod to land there.
  void ExcludeFromEviction(int n) { no_eviction_[n] = true; }
  // Node n takes no new work (cordoned, NotReady, out of service), or only its GPUs `devices` do
  // not: what is free there now leaves the capacity that shares are measured against and, when
  // trees lend to each other, the fleet's guarantee (no tree borrows GPUs no one can be placed
  // on). What runs there still counts. Call once per node, after Reserve and Restore of the work
  // that runs there and before Reserve of what is held free.
  void TakeOutOfService(int n, const std::vector<int>& devices = {});
  // A pending workload (from Submit) that already waits for `victims` workloads to stop, as a
  // rebuilding caller finds it: it is not tried meanwhile, and the room it reclaims within its
  // queue's guarantee counts as promised, so no one else of its queue evicts for the same room.
  // `plan` is where it planned its pods (plan(id) when it was nominated, one per pod in pod-set
  // order; empty if unknown): what is free of it now is held for it, and once `victims` is 0 it
  // is tried first in the next Cycle, on the planned nodes first.
  // `victim_ids`: its victims still stopping, where the caller knows them (what they hold is
  // not counted twice in the quota it keeps: ReserveQuota). `swap`: its swap, as swap(id) gave
  // it (an unknown flavour: none); `held`: a held borrower's swap (HeldSwap), admitted as that
  // swap only once its victims have stopped.
  struct Swap {
    std::string first;   // the flavour
    int64_t second = 0;  // the ceiling, milli-GPUs
    bool held = false;
  };
  // `reservation`: it is a reservation (ReserveRoom; the server's reason Reserved): its plan is
  // held as one, promising no quota.
  // `counts`: its pods per pod set where it was nominated for fewer than all (pod_counts(id)
  // then: a reclaim for the pods its queue's guarantee holds); empty, or outside its pod sets'
  // minCount..count: all.
  void RestoreNomination(int id, int victims, const std::vector<Assignment>& plan = {},
                         const std::vector<int>& victim_ids = {},
                         const std::optional<Swap>& swap = std::nullopt, bool reservation = false,
                         const std::vector<int>& counts = {});
  // A victim restored as evicting (Restore) whose eviction its caller called off after all
  // (its preemptor's guarantee no longer holds it): it runs on, counted as running again, so
  // that budgets and later preemptors of the cycle read it so. Nothing else of its preemptor's
  // nomination changes.
  void Spare(int victim);
  // A nominated preemptor's swap (SwapAllows): the flavour and what its queue held there when
  // its preemption began, milli-GPUs; nullopt if it is none. A caller that rebuilds the
  // Admitter keeps it for RestoreNomination.
  std::optional<Swap> swap(int id) const;

  // Decayed usage history for fair share, carried across Admitters that a caller rebuilds:
  // each queue's value (by name; unknown names are ignored) as it stood at time `at`. The next
  // Cycle decays it from `at` and blends in current usage.
  void RestoreHistory(const std::map<std::string, double>& by_queue, double at);
  double usage_history(int q) const { return queues_[q].history; }
  // What fair share orders queue q's siblings by, lowest first: its dominant share blended with
  // its usage history, over its weight (Kueue's weightedShare, as a fraction).
  double weighted_share(int q) const { return Key(q); }
  double weight(int q) const { return queues_[q].spec.weight; }
  // The reclaim hold (reclaim_hold_s) of queue q: when it (or a queue below it) last reclaimed
  // borrowed GPUs, CPU or memory (-1: never; any reclaim restarts the whole hold) and what its
  // reclaims since the hold began freed beyond their need (GPU milli by flavour, cpu in
  // milli-cores, memory in MiB); carried, by queue name, across Admitters that a caller
  // rebuilds (times after `now` count as `now`).
  struct ReclaimRecord {
    double at = -1;
    std::map<std::string, int64_t> room_milli;  // by flavour name, or cpu (milli) and memory (MiB)
  };
  ReclaimRecord reclaim_record(int q) const;
  void RestoreReclaims(const std::map<std::string, ReclaimRecord>& by_queue, double now);

  CycleResult Cycle(double now, int max_admissions);

  // The workload ran to completion: its devices are freed.
  void Finish(int id, double now);
  // An evicted workload has stopped: its devices are freed and it waits again in its queue.
  void Terminated(int id, double now);
  // All pods of an admitted workload are running (ends its gang timeout).
  void PodsReady(int id);

  // Queries.
  Phase phase(int id) const { return entries_[id].phase; }
  const std::string& reason(int id) const { return entries_[id].reason; }
  // A workload's tenant/name, as messages name it (two tenants' workloads may share a name).
  std::string FullName(int id) const;
  // For a workload reserving room: when its planned devices are all free by the time limits of
  // the work on them (`now` if they are), as Slurm estimates a pending job's start; infinity
  // when some of that work has no limit (or it reserves nothing).
  double ExpectedStart(int id, double now);
  const std::vector<Assignment>& assignments(int id) const { return entries_[id].assign; }
  // Its pods per pod set as admitted (fewer than asked under partial admission), and whether
  // that is fewer.
  const std::vector<int>& pod_counts(int id) const { return entries_[id].counts; }
  bool partially_admitted(int id) const { return entries_[id].counts != entries_[id].full_counts; }
  // Admitted in part: why no more of its pods started ("its queue's quota holds no more now",
  // "the fleet has room for no more now").
  const std::string& partial_why(int id) const { return entries_[id].partial_why; }
  // Running in part and not grown this cycle: why not ("work waiting in its queue goes first",
  // "no node has room for another of its pods now"); empty where growth was not looked at.
  const std::string& growth_why(int id) const { return entries_[id].growth_why; }
  // The partial_why of one nominated for, or admitted with, the pods its queue's guarantee
  // holds (a reclaim for a cut); the server says it too.
  static constexpr const char* kCutWhy = "its queue's guarantee holds no more";
  // The workload a fragment's pods were taken from (an elastic shrink), or -1.
  int fragment_of(int id) const { return entries_[id].fragment_of; }
  // A fragment Split made: its pods as (pod set, index in the set) of its workload as it stood
  // then (the last of each set it took from; a restored fragment: empty).
  const std::vector<std::pair<int, int>>& fragment_pods(int id) const {
    return entries_[id].fragment_pods;
  }
  // A pending preemptor's planned place (one per pod, in pod-set order) while its victims stop;
  // empty otherwise. A caller that rebuilds the Admitter keeps it for RestoreNomination.
  std::vector<Assignment> plan(int id) const;
  // How many workloads have reserved room (AdmissionConfig::reserve_after_s) in this Admitter.
  int64_t workloads_reserved() const { return workloads_reserved_; }
  // How many workloads started in room held for a reservation, ending before it could start.
  int64_t workloads_backfilled() const { return workloads_backfilled_; }
  double admitted_at(int id) const { return entries_[id].admitted_at; }
  // A pending workload whose last preemption search needed victims still within their minimum
  // runtime: when the last of them may be evicted (else -1), and the longest of those runtimes.
  double victims_ready_at(int id) const { return entries_[id].victims_ready_at; }
  double victims_min_runtime(int id) const { return entries_[id].victims_min_runtime; }
  // Its last attempt searched for victims and found none it may evict because their queues'
  // disruption budgets allow no more evictions.
  bool budget_blocked(int id) const { return entries_[id].budget_blocked; }
  // Whether a preemption search could find any victim for it now: lower-priority work of its
  // own queue it may preempt, or other queues' work it may take back (they hold more than their
  // guarantee) or preempt under fair share. False: waiting is all it can do.
  bool may_preempt(int id) const { return MayPreempt(id); }
  bool nominated(int id) const { return entries_[id].nominated; }  // victims still stopping
  // Whether its queue's guarantee alone (its work and other promises aside) still holds it:
  // false once the guarantee is lowered below what it asks (in every flavour it may use, or, for
  // work without GPUs, of the CPU or memory its queue is limited in). A reclaim's victims are
  // called off then; the rest (room taken since, the order of restored nominations) is not
  // judged, so that nothing still owed is called off. False: `why`, where given, says what it
  // asks beside the guarantee ("it asks 6 GPUs; the guarantee is 4 in flavour h100").
  // `kept`, where given: what reclaims of its queue judged before it ask, which the guarantee
  // must hold beside it; what it asks is added where it holds.
  struct ReclaimTally {
    std::map<int, int64_t> gpu_milli;  // by flavour
    int64_t cpu_milli = 0, memory_mib = 0;
  };
  bool GuaranteeHolds(int id, std::string* why = nullptr, ReclaimTally* kept = nullptr) const;
  // GPUs (milli) of flavour `flavor` that workload id's queue has promised to its other
  // nominated preemptors (their victims are still stopping): room below the guarantee that is
  // already spoken for. 0 for an unknown flavour.
  int64_t promised_to_others(int id, const std::string& flavor) const;
  // GPUs (milli) of flavour `flavor` below workload id's queue's guarantee, its own work being
  // evicted counted as gone (as reclaim counts it), promises not subtracted. 0 if unknown.
  int64_t room_below_guarantee(int id, const std::string& flavor) const;
  // The GPU-seconds running workload `id` throws away if it stops at `at`: its GPUs times the
  // time since its run began or, if it checkpoints, since its last checkpoint. Victims are
  // ranked by it at the time of the decision: the grace period adds the same time to each
  // (a checkpoint within it is not foreseen).
  double LostIfEvicted(int id, double at) const;
  // What choosing it as a victim costs: what it would lose, plus what its earlier evictions
  // lost (SubmitOptions::lost_before_s).
  double EvictionCost(int id, double at) const;
  // How long workload `id` runs before workload `by` may evict it: its own minimum runtime
  // against work of its own queue, at most its queue's reclaimMinRuntime against another's.
  double MinRuntime(int id, int by) const;
  // For a victim `id` of `by` still within its own minimum runtime (so cut short by its queue's
  // reclaimMinRuntimeSeconds), a note saying so for its eviction message; else empty.
  std::string CutShortNote(int id, int by, double now) const;
  // Queue q's reclaimMinRuntime: its own, its nearest ancestor's or the config's.
  double reclaim_min_runtime(int q) const { return queues_[q].reclaim_min_runtime; }
  double preempt_min_runtime(int q) const { return queues_[q].preempt_min_runtime; }
  // Its place in its queue: pending workloads go in (-priority, arrival) order (a released
  // gang re-enters at the back).
  double arrival(int id) const { return entries_[id].arrival; }
  int queue_of(int id) const { return entries_[id].leaf; }
  int64_t gpu_milli(int id) const { return entries_[id].gpu_milli; }
  int workload_count() const { return static_cast<int>(entries_.size()); }
  const ClusterState& state() const { return state_; }

  int queue_count() const { return static_cast<int>(queues_.size()); }
  int QueueIndex(const std::string& name) const;
  const std::string& queue_name(int q) const { return queues_[q].spec.name; }
  bool is_leaf(int q) const { return queues_[q].children.empty(); }
  int64_t usage_milli(int q) const;  // GPU milli held by the subtree, every flavour
  int64_t guaranteed_milli(int q) const;
  double dominant_share(int q) const;
  // The largest of what `gpu_milli`, `cpu_milli` and `memory_mib` are of the fleet's in service.
  double DominantShare(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib) const;
  // Waiting in the subtree, those that could never be admitted too (as Kueue counts
  // inadmissible workloads).
  int pending_count(int q) const;
  // For work waiting because its tree has no GPU to lend it ("" otherwise): how fair share
  // orders its queue among its siblings, and each queue above it among its own, as room frees, and
  // what fair-share preemption would move for it. The rule, no names or shares: a message that
  // changed each cycle would be written each cycle.
  std::string FairShareNote(int id) const;
  // The flavours, in the order a request is charged to the first that takes it; whether any
  // queue has a quota in one (unmanaged: not limited); a queue's guarantee and use in one
  // (milli, its subtree's); and how many of the fleet's GPUs it selects: those on which a
  // whole-GPU, fractional or MIG-slice request would be charged to it were every flavour
  // limited (a flavour no queue has a quota in takes nothing, so its GPUs stay with the
  // flavours that limit them; 0 names a model or profile the fleet lacks, or one a more
  // specific flavour takes).
  int flavor_count() const { return static_cast<int>(flavors_.size()); }
  const std::string& flavor_name(int f) const { return flavors_[f].name; }
  bool flavor_managed(int f) const { return managed_[f]; }
  int64_t flavor_guaranteed_milli(int q, int f) const { return queues_[q].guaranteed[f]; }
  int64_t flavor_usage_milli(int q, int f) const { return queues_[q].usage[f]; }
  // By flavour; as if every flavour had a quota, or (`charged`) as requests are charged now.
  std::vector<int> FlavorGpus(bool charged = false) const;
  // The flavours a request for GPU d of node n could be charged to (its whole GPU, a fraction,
  // any of its MIG slices), or (`charged`) as requests are charged now.
  std::set<int> DeviceFlavors(int n, int d, bool charged) const;
  // Where the trees' guarantees of a flavour add up to more GPUs than the fleet has of it (they
  // cannot all be met at once: a reclaim may find nothing to take back), a warning for each
  // root guaranteed some of it, by queue index; roots without one are left out. And for a leaf
  // whose disruption budget of 0 keeps what it borrowed from a reclaim, that.
  std::map<int, std::string> GuaranteeWarnings() const;
  // The first of those, each once: where the trees' guarantees of a flavour (-1: of every GPU
  // flavour together) add up to more GPUs than the fleet holds of it, by flavour index.
  struct CapacityWarning {
    int flavor = -1;
    int64_t guaranteed_milli = 0;  // what the trees guarantee of it
    std::string text;
  };
  std::vector<CapacityWarning> CapacityWarnings() const;
  // The pods' CPU (r = 0, milli-cores) and memory (r = 1, MiB): whether a queue is limited in
  // it (a quota in its tree names it), and its guarantee and use of it (its subtree's).
  bool resource_limited(int q, int r) const { return queues_[q].res_limited[r]; }
  int64_t resource_guaranteed(int q, int r) const { return queues_[q].res_guaranteed[r]; }
  int64_t resource_usage(int q, int r) const { return r == 0 ? queues_[q].cpu : queues_[q].memory; }
  // Whether a stopPolicy of the queue or an ancestor stops it.
  bool stopped(int q) const { return queues_[q].stop != StopPolicy::kNone; }

 private:
  struct Entry {
    Workload spec;
    int leaf = -1;
    std::vector<PodRequest> pods;  // one per pod, in pod-set order
    int64_t gpu_milli = 0;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    // Per pod set: its pods' request, how many it asks for, the fewest it may start with
    // (partial admission; the count when it has no minCount), and how many `pods` holds now
    // (the full counts unless it was admitted with fewer).
    std::vector<PodRequest> set_request;
    std::vector<int> full_counts, min_counts, counts;
    bool above_min = false;  // counts != min_counts (kept by SetCounts: victim scans read it)
    bool narrowed = false;   // admitted: `pods` carry the models its quota allowed then
    double arrival = 0;
    double admitted_at = -1;
    // Its sizes in this run, from when (elastic growth): (time, milli-GPUs); empty: one size.
    std::vector<std::pair<double, int64_t>> sizes;
    SubmitOptions options;
    Phase phase = Phase::kPending;
    bool ready = false;
    bool nominated = false;  // has victims that have not stopped yet
    int victims_left = 0;
    // Tried this cycle as a preemptor whose victims have all stopped (it was nominated when the
    // cycle began): a disruption budget that allows none of the rest it needs now keeps it
    // nominated, the room its stopped victims freed held for it.
    bool continuing = false;
    // Its nomination is a stage of a consolidation under disruption budgets (Consolidate's
    // staged pass): only such a one, its moved work stopped, holds the room that work freed
    // while the budgets are spent (Preempt holds its own batches' room).
    bool consolidation_stage = false;
    // Being tried again, this cycle, while it held a reservation (Consolidate moves no work for
    // it: it waits for its room).
    bool was_reserving = false;
    // A swap (SwapAllows): short of its queue's quota in flavour swap_flavor, it may take the
    // place of its own queue's lower-priority work there as long as its queue then holds no
    // more of it than swap_ceiling, what the queue held when the preemption began.
    int swap_flavor = -1;
    int64_t swap_ceiling = 0;
    // Nominated by HeldSwap: the flavour of that swap, which it is admitted in, as a swap only,
    // once its victims have stopped (TryAdmit); -1: not one.
    int held_swap = -1;
    int64_t promised = 0;      // while nominated within its guarantee: GPUs its queue has promised
    int promised_flavor = -1;  // ... in this flavour
    // While nominated with a plan and short of quota (`reserves_quota`): the GPUs of its plan
    // per flavour that its victims still stopping do not hold, counted as used by its queue
    // and their ancestors (QueueNode::reserved; (queue, flavour, milli-GPUs)), so that the
    // quota its victims free as they stop is its, not the next workload's in line
    // (ReserveQuota).
    bool reserves_quota = false;
    std::vector<std::tuple<int, int, int64_t>> quota_reserved;
    // Likewise short of its queue's CPU or memory quota: (queue, 0 CPU / 1 memory, amount).
    bool reserves_resources = false;
    std::vector<std::tuple<int, int, int64_t>> resources_reserved;
    // While nominated: its CPU ([0]) and memory ([1]) its queue has promised (within the
    // queue's guarantee of them, where its tree limits them).
    int64_t res_promised[2] = {0, 0};
    // Its last preemption search found room only with victims still within their minimum
    // runtime: when the last of those it needs may go, and the longest such runtime (-1: not so).
    double victims_ready_at = -1;
    double victims_min_runtime = 0;
    bool budget_blocked = false;  // see budget_blocked()
    // Its planned place (pods and where they go) while its victims stop. The part of it that is
    // free is held for it (`reserved`), again each time one of its victims stops, so that
    // nobody else takes the room it is making. Once they have all stopped it tries the planned
    // nodes first (a gang all its pods there, unless it requires a topology domain): the
    // placement policy alone may prefer room another preemptor made, which then evicts again.
    std::vector<std::pair<Assignment, PodRequest>> plan;
    // While nominated for a consolidation: where each workload it moves goes, held (as the plan
    // is, its free part) until that workload has stopped and waits to be placed again. Each:
    // the mover, its place, its pod.
    struct MoveHold {
      int mover = -1;
      Assignment at;
      PodRequest pod;
    };
    std::vector<MoveHold> move_plan;
    std::vector<std::pair<Assignment, PodRequest>> reserved;
    std::vector<Assignment> assign;
    std::vector<std::pair<int, int64_t>> charged;  // (flavour, milli)
    std::string reason;
    // A workload that failed is parked out of its queue's walk until something it waits for
    // changes (see Wake): 1 = the fleet had no room for its shape, 2 = GPU quota, 3 = CPU or
    // memory quota (woken as 2, and for its queue's search only where its own lower-priority
    // work runs).
    int parked = 0;
    uint64_t park_shape = 0;
    bool waits_on_time = false;  // a victim's minimum runtime: never parked
    // Its preemption search was left out by the queue's limit this cycle, or a disruption
    // budget held its victims: parked, it is woken to search again (QueueNode::retry).
    bool retry_search = false;
    bool in_retry = false;   // on its queue's retry list now
    bool explained = false;  // the full placement explanation was computed once
    bool probe = false;      // woken only to try consolidation for it (see Wake)
    std::string history;     // why it waits again (a release), kept beside new reasons
    // A fragment: pods an elastic shrink took from workload `fragment_of`, stopping; `pods`
    // and `assign` are those pods only.
    int fragment_of = -1;
    std::string partial_why;  // admitted in part: why no more (TryPartial)
    // Admitted in part where its required domain holds no more pods even empty: its pods then
    // (no growth past them; a shrink below lets it grow back). -1: none.
    int never_above = -1;
    std::string growth_why;                          // running in part: why it grew not (Grow)
    std::vector<std::pair<int, int>> fragment_pods;  // (set, index), see fragment_pods()
    double shrunk_at = -1;  // when a shrink last took pods from it (it does not grow then)
    // A shrink's fragment: when its pods joined (what they lose counts from then; -1: its
    // workload's start).
    double joined_at = -1;
    bool reserving = false;  // nominated with a reservation (ReserveRoom): its plan held each cycle
    bool ever_reserved = false;
  };
  struct ParkedShape {
    std::vector<PodRequest> pods;
    std::deque<int> ids;  // in parking order; may hold stale ids (check Entry::parked/shape)
  };
  struct QueueNode {
    QueueSpec spec;
    int parent = -1;
    // Its reclaimMinRuntime, or its nearest ancestor's, or the config's (MinRuntime).
    double reclaim_min_runtime = 0;
    double preempt_min_runtime = 0;  // ... its preemptMinRuntime, or its nearest ancestor's
    std::vector<int> children;
    int infeasible = 0;  // workloads waiting here that no fleet or quota could ever admit
    std::vector<int64_t> guaranteed;  // per flavour; an inner queue without its own: the sum
    std::vector<std::optional<int64_t>> borrow_limit, lend_limit;
    std::vector<int64_t> usage;  // per flavour, whole subtree
    // A leaf's non-preemptible workloads' GPUs per flavour, and CPU ([0]) and memory ([1]):
    // within its guarantee (NonPreemptibleOver), so that what it borrows is always preemptible.
    std::vector<int64_t> np_usage;
    int64_t np_res[2] = {0, 0};
    int64_t gpu = 0, cpu = 0;  // whole subtree
    int64_t memory = 0;        // whole subtree, MiB
    // CPU ([0], milli-cores) and memory ([1], MiB) quotas; an inner queue without its own
    // guarantee: the sum of its children's.
    int64_t res_guaranteed[2] = {0, 0};
    std::optional<int64_t> res_borrow[2], res_lend[2];
    // Whether its tree (its root's subtree) limits it: some queue there names it.
    bool res_limited[2] = {false, false};
    // Leaves: of its CPU and memory, what its workloads being evicted hold, the part evicted
    // for no preemptor, and what its nominated preemptors were promised (as for GPUs below).
    int64_t res_evicting[2] = {0, 0}, res_leaving[2] = {0, 0}, res_promised[2] = {0, 0};
    // Whole subtree: what its work being evicted holds of CPU and memory (as evicting_below).
    int64_t res_evicting_below[2] = {0, 0};
    // Whole subtree: the CPU and memory nominated preemptors keep (as `reserved` for GPUs).
    int64_t res_reserved[2] = {0, 0};
    int root = -1;                  // the root of its tree (its cohort for CPU and memory)
    std::vector<int> flavor_order;  // spec.flavor_order, as flavour indices
    double history = 0;             // decayed dominant share
    int evicting = 0;
    int evicting_count_below =
        0;                     // whole subtree: its workloads being evicted (its own among them)
    int64_t evicting_gpu = 0;  // milli-GPUs of its workloads being evicted, every flavour or none
    std::vector<int64_t> evicting_usage;  // per flavour: GPUs of its workloads being evicted
    std::vector<int64_t> evicting_below;  // per flavour, whole subtree: the same
    std::vector<int64_t> leaving_usage;   // per flavour: the part evicted for no preemptor
    std::vector<int64_t> promised;        // per flavour: GPUs of its nominated preemptors (leaves)
    // Per flavour, whole subtree: the same two (leaving_usage, promised), for a department's
    // guarantee (ReclaimScope).
    std::vector<int64_t> leaving_below, promised_below;
    std::vector<int64_t> reserved;  // per flavour, whole subtree: Entry::quota_reserved
    double reclaimed_at = -1;       // its last reclaim (a leaf's, or a descendant's)
    // Whether a queue of its subtree may keep some of its unused guarantee from others (a
    // lending limit, a reclaim: MarkMayKeep), and the children of which that is so: the quota
    // walk asks only those what they keep.
    bool may_keep = false;
    std::vector<int> keepers;
    // The strongest stopPolicy of the queue and its ancestors, and the queue that set it.
    StopPolicy stop = StopPolicy::kNone;
    int stopped_by = -1;
    std::vector<int64_t> reclaim_room;     // per flavour: what its reclaims freed, unneeded
    int64_t res_reclaim_room[2] = {0, 0};  // ... of CPU (milli-cores) and memory (MiB)
    // Pending workloads of a leaf: (-priority, arrival, id).
    std::set<std::tuple<int, double, int>> pending;
    std::set<std::tuple<int, double, int>> parked;
    // Parked work whose preemption search the cycle's limit left out, or that a disruption
    // budget held (Entry::retry_search): woken a few a cycle, in parking order (Wake).
    std::deque<int> retry;
    std::multiset<int> running_priorities;  // of its admitted workloads (leaves)
    std::set<int> running;                  // its admitted workloads (leaves)
    int active = 0;  // leaves below (itself included) that still have candidates this cycle
  };
  struct Candidate {
    int id;
    double cost;   // GPU-seconds lost
    int tier = 0;  // Preempt's VictimTier: lower goes first among equal priorities
  };
  // How far from the preemptor's leaf victim `w_leaf`'s work is, for the order victims go in
  // (lower first): best-effort work (unqueued beside several trees) first; then by how high
  // the queue the two share stands (none, another tree's, first; the preemptor's own queue
  // last), so that a reclaim takes back first what other departments borrow from its
  // department, and only then what its own department's queues borrow from it (KAI reclaims
  // between departments before within one; a user-style review saw a department left below
  // its guarantee).
  int VictimTier(int preemptor_leaf, int w_leaf) const;
  // What a fair-share preemptor claims: its queue's weighted share once it (and the queue's
  // other nominated preemptors) hold what they wait for, and that addition itself, which counts
  // in its branch's share where a branch above it is compared with another.
  struct FairClaim {
    double share = -1;  // -1: no fair-share preemption
    int64_t gpu = 0, cpu = 0, memory = 0;
  };
  // Fair-share preemption: whether taking `gpu` milli-GPUs (`by_flavour` of them charged per
  // flavour), `cpu` milli-cores and `memory_mib` of queue `victim`'s work for queue `preemptor`'s
  // keeps the victim's queue at or above its guarantees (BranchLends above it too: only what it
  // borrows goes) and its weighted dominant share at or above the preemptor's once admitted
  // (Kueue's LessThanOrEqualToFinalShare), what is being evicted and `taken` counted as gone.
  // The shares are those of the two branches below the queue both share, as Kueue's
  // hierarchical fair sharing compares them, and their over-quota priorities go first
  // (FairShareYields): leaves' shares compared across departments, with priorities between
  // siblings, went round in a cycle of evictions for ever (a user-style trial).
  bool FairShareKeeps(int preemptor, int victim, const FairClaim& claim, int64_t gpu, int64_t cpu,
                      int64_t memory_mib, const std::vector<std::pair<int, int64_t>>& by_flavour,
                      const std::function<int64_t(int, int)>& taken) const;

  Admitter(const Fleet& fleet, std::vector<Tenant> tenants, AdmissionConfig config,
           const Policy& policy, uint64_t seed);

  Status Build();
  Result<int> LeafFor(const Workload& spec) const;
  int FlavorOf(const PodRequest& req, int model) const;
  int SelectFlavor(DeviceKind kind, int profile, int model, bool managed_only) const;
  // FlavorOf and FlavorModels by table: a row per request kind (whole, fraction, then MIG by
  // profile), built once the quotas are known.
  int ChargeRow(const PodRequest& req) const;  // -1: not in the table
  // Where e is charged more quota than the compute it asks (ClusterState::MakeRequest), a
  // note saying so for a refusal; else empty.
  // (`charge`: the amount to say, where not e's charge now: an Unschedulable refusal's least.)
  std::string ChargeNote(const Entry& e, int64_t charge = -1) const;
  // For a tenant with exclusiveNodes, where its running work is charged more than the compute
  // it uses, a note saying so for a quota refusal (a trial read "10/8 GPUs" of 2 running and 2
  // asked); else empty.
  std::string ExclusiveUsageNote(const Entry& e) const;
  // What e would be charged with its GPU pods on GPUs of model m (ClusterState::ChargeOnModel;
  // -1: not there), and the least of that over `models` (e.gpu_milli where its
  // charge does not depend on the GPU). A refusal by quota asks, model by model, where it
  // would be charged less (QuotaModels); what can never be admitted is judged by the least.
  int64_t ChargeOn(const Entry& e, int m) const;
  int64_t LeastCharge(const Entry& e, uint64_t models) const;
  bool ChargeVaries(const Entry& e) const;
  // The models of `req` whose most specific flavour is f, whether or not a quota names it (a
  // queue's flavorOrder).
  uint64_t OrderModels(int f, const PodRequest& req) const;
  // The models e's pods try first, in turn, before every model its quota allows (`allowed`):
  // its queue's flavorOrder and, under whenCanBorrow: TryNextFlavor, the models where its
  // queue stays within its guarantee for e.gpu_milli more. Empty: no preference.
  std::vector<uint64_t> PreferenceTiers(const Entry& e, const PodRequest& gpu_pod,
                                        uint64_t allowed) const;
  // Places `pods` (all or none) on each tier's models in turn, then on all of them; `pods`
  // keeps the masks of the attempt that placed them.
  bool PlacePreferred(const Entry& e, std::vector<PodRequest>& pods,
                      const std::vector<uint64_t>& tiers, std::vector<Assignment>* assign);
  // A trial of e's `pods` on the models `allowed`, its flavour preferences first, undone before
  // it returns: whether they fit, `assign` and `pods` (masks) as placed.
  bool TrialPlace(const Entry& e, std::vector<PodRequest>* pods, uint64_t allowed,
                  std::vector<Assignment>* assign);
  // The fleet's models `req` may use that no flavour is charged for (no quota limits them).
  uint64_t UnchargedModels(const PodRequest& req) const;
  void BuildChargeTables();
  std::vector<int> CandidateFlavors(const PodRequest& req) const;
  // The models flavour f takes `req` on (none if it does not take its kind or profile).
  uint64_t FlavorModels(int f, const PodRequest& req) const;
  // kCpuQuota (r = 0) or kMemoryQuota (r = 1) of `amount` more: as QuotaAllows, for the
  // pods' CPU or memory.
  bool ResourceAllows(int leaf, int r, int64_t amount, std::string* why,
                      int* blocker = nullptr) const;
  // Both, for e at its current size.
  bool ResourcesAllow(const Entry& e, std::string* why) const;
  // Why non-preemptible work is refused where it would take its queue (`q`) past its
  // guarantee (`held`: "9/8 GPUs of h100").
  std::string NonPreemptibleRefusal(int q, const std::string& held) const;
  // Whether e's work may not borrow, as nothing could take the room back: it is not
  // preemptible, or its queue's disruption budget of 0 lets none of its work be evicted (a
  // lender would wait for ever). Such work counts as non-preemptible (np_usage, np_res).
  bool Pinned(const Entry& e) const { return !e.options.preemptible || ZeroBudget(e.leaf) >= 0; }
  // "non-preemptible work", or, in leaf q under a disruption budget of 0, its work.
  std::string PinnedWork(int q) const;
  // Disruption budgets. A queue's counts the workloads being evicted at once in its whole
  // subtree (a department's, all its leaves'). The first queue on leaf q's way up whose budget
  // one more eviction of q's work would pass, or -1: what stops now and, besides, this pass's
  // choices by leaf (`counted`, `also`). `staged`: only budgets of 0 count (a staged
  // consolidation moves the rest batch by batch).
  int BudgetSpent(int q, const std::map<int, int>& counted = {},
                  const std::map<int, int>& also = {}, bool staged = false) const;
  // The first queue on q's way up whose disruption budget is 0 (none of the work below it is
  // evicted or moved), or -1.
  int ZeroBudget(int q) const;
  // Whether non-preemptible `e` would take its queue's non-preemptible work past the queue's
  // guarantee of flavour f (of CPU, r = 0, or memory, r = 1, where its tree limits them). As in
  // KAI, only non-preemptible work counts: beside it a queue may borrow, since what it holds
  // past its guarantee is then always preemptible work that a reclaim can take back.
  bool NonPreemptibleOver(const Entry& e, int f) const;
  bool NonPreemptibleOverResource(const Entry& e, int r) const;
  // When its queue's preemption policy (withinQueue or reclaimWithinCohort: Never) is what
  // keeps anything from being evicted for workload `id`, which; "" otherwise.
  std::string PolicyBlock(int id) const;
  void NotePolicyBlock(int id);  // adds PolicyBlock(id) to its reason (preemption on)
  // Why reclaim found nothing for id, within its queue's guarantee, where another queue borrows:
  // the borrowed room is inside work whose queue (or one above it) taking it would leave below
  // its guarantee, which reclaim never does ("": not so, or something could go).
  std::string BorrowedOutOfReach(int id) const;
  static constexpr const char* kBorrowedOutOfReach =
      ", but none of its work can go for this without leaving ";
  // ... or only part of it can go so: what waits is told how much.
  static constexpr const char* kPartlyOutOfReach = " of it can go for this without leaving ";
  static constexpr const char* kTakeable = "\x01";  // (out_of_reach_: something could go)
  // (leaf, flavour) -> what BorrowedOutOfReach said, this cycle.
  mutable std::map<std::pair<int, int>, std::string> out_of_reach_;
  struct Lender {  // a leaf that borrows a flavour, as BorrowedOutOfReach reads it
    int queue = -1;
    bool any = false;       // some of its work could go (preemptible, past its minimum runtime)
    bool takeable = false;  // best-effort, or elastic work it may shrink
    int64_t least = 0, most = 0;  // its work whole that keeps it at its guarantee (0: none)
    // The most of what it borrows that reclaim could take back together, work by work, and
    // keep it at its guarantee (the biggest first; about: not every mix is tried).
    int64_t reach = 0;
    // What it borrows is held by work that may not be preempted (admitted within a guarantee
    // lowered since): none of it can ever go.
    bool pinned = false;
  };
  mutable std::map<int, std::vector<Lender>> lenders_;  // by flavour, this cycle
  static const std::vector<Lender> kNoLenders;
  static constexpr const char* kDepartmentKeeps =
      " keeps the rest of its guarantee for its other queues, lent while they leave it unused: "
      "reclaim takes back for a queue past its own only what the department is guaranteed "
      "beyond its queues";
  // For work past its queue's guarantee under a department still below its own, whose own
  // part (its guarantee beyond its children's) is used up or none: why nothing is reclaimed
  // for it ("" otherwise).
  std::string DepartmentNote(int id) const;
  static constexpr const char* kNonPreemptibleBorrows =
      "non-preemptible work may not borrow (nobody could take the room back)";
  // The walk both take: `amount` more where queue q holds used(q), is guaranteed guar(q),
  // may borrow borrow(q) more (nullopt: no limit), and a sibling keeps kept(s, how) of its
  // unused guarantee (`how`, when given and it keeps some, says why: a lending limit or a
  // reclaim hold); `what` names it, and `fmt` and `unit` write amounts in the refusal.
  // GPU flavours walk up to the fleet when trees lend to each other; CPU and memory
  // (`in_tree`) stop at their tree's root.
  template <class Used, class Guar, class Borrow, class Kept, class Fmt>
  bool QuotaWalk(int leaf, int64_t amount, Used used, Guar guar, Borrow borrow, Kept kept,
                 const std::string& what, Fmt fmt, const char* unit, bool in_tree, std::string* why,
                 int* blocker, int flavor = -1) const;
  // Whether tree `root` may hold `used` of GPU flavour f, past its top's guarantee less what
  // its queues keep (`reserved`), where trees do not lend each other: a queue within its own
  // guarantee may take its tree into what no other tree is guaranteed or holds (best-effort
  // trees own nothing), never into another tree's unused guarantee, nor into GPUs that any
  // tree's guarantee in another flavour of them needs. (Past what is in service, quota allows
  // it: placement refuses it, and reclaims for room.)
  bool TopRoom(int root, int f, int64_t used, int64_t reserved) const;
  // What of flavour f's GPUs in service the trees' guarantees in other flavours of the same
  // GPUs need: of each, what the GPUs it has outside f cannot hold. (Into elsewhere_milli_,
  // for every flavour, where guarantees or GPUs in service change.)
  int64_t GuaranteedElsewhere(int f) const;
  void UpdateElsewhere();
  void MarkMayKeep(int q);  // queue q may keep unused guarantee from now on
  // Keepers anew: the queues with a lending limit, or a reclaim hold at `now`.
  void RebuildKeepers(double now);
  // Whether a refusal of quota in flavour f may be met by taking back what others borrow of
  // leaf's own guarantee (Preempt's quota_reclaim).
  bool QuotaReclaims(int leaf, int f, int64_t milli) const;
  // What best-effort leaves below queue a hold of flavour f.
  int64_t BestEffortUnder(int a, int f) const;
  // Where tree `root` is guaranteed none of flavour f and none of its queues names it while
  // another tree's does: a note saying so, for a refusal ("" otherwise).
  std::string FlavourNamedElsewhere(int root, int f) const;
  // Victims' GPUs already chosen, by (queue, flavour): a leaf's own and, under each ancestor,
  // its subtree's (NoteTaken).
  using TakenMap = std::map<std::pair<int, int>, int64_t>;
  void NoteTaken(TakenMap& taken, int leaf, int f, int64_t milli) const;
  // The same for CPU and memory (kTakenResource + r), which FairShareKeeps and
  // BranchLendsResource read.
  void NoteTakenResources(TakenMap& taken, int leaf, int64_t cpu_milli, int64_t memory_mib) const;
  // Whether queue a is q or above it.
  bool Under(int q, int a) const;
  // Whether taking `milli` of flavour f from work of leaf `victim` for work of leaf
  // `preemptor` leaves each queue above the victim's leaf and below the lowest one the two
  // share (every one up to its root when they share none) at or above its guarantee, `taken`
  // (of queue q, flavour f) already gone: only a branch that borrows from where the
  // preemptor's guarantee comes from gives back (Kueue's hierarchical cohorts; the leaf's own
  // guarantee is each caller's to check). One bigger than a queue's guarantee may go while
  // that queue borrows.
  bool BranchLends(int preemptor, int victim, int f, int64_t milli,
                   const std::function<int64_t(int, int)>& taken) const;
  // BranchLends for CPU (r = 0) or memory (r = 1): every queue above `victim` below the one it
  // shares with `preemptor` keeps its guarantee without `amount` more (`taken`: under
  // kTakenResource + r, per queue).
  bool BranchLendsResource(int preemptor, int victim, int r, int64_t amount,
                           const std::function<int64_t(int, int)>& taken) const;
  // Whether a reclaim for the guarantee of `scope` (the preemptor's leaf, or the department
  // whose own part it reclaims: ReclaimScope) may take `milli` of flavour f from leaf
  // `victim`'s work: every department above the scope, up to the queue the two share, stays
  // within its own guarantee with it (a trial's project took GPUs from another department
  // while its sibling held its department's whole guarantee: that guarantee is not borrowed
  // outside, and KAI reclaims only for a branch below its share at every level).
  bool ClaimHolds(int scope, int victim, int f, int64_t milli) const;
  // "queue NAME", or "the fleet" for the fleet's node (kFleetQueue).
  std::string QueueLabel(int q) const;
  // The root of q's tree: its topmost queue below the fleet's node.
  int TreeRoot(int q) const;
  // `milli` more of flavour `flavor` for queue `leaf`; `why` (when given) says why not, and
  // `blocker`, when it does not: the queue whose guarantee or borrowing limit stops it.
  bool QuotaAllows(int leaf, int flavor, int64_t milli, std::string* why,
                   int* blocker = nullptr) const;
  // Whether `e` may take `milli` of flavour f as a swap where the quota refuses it: its queue
  // came to hold more than its quota allows now (a sibling took its guarantee from free room
  // after this queue borrowed it, a limit was lowered), and its own lower-priority work that
  // makes way for it frees as much as it takes, so the queue holds no more than before and
  // nobody is worse off; evicting more, down to what the quota allows, would leave GPUs idle.
  // `freed`: what victims still charged free of it.
  // The ceiling a swap of leaf's work in flavour f starts with: what the queue holds and keeps.
  int64_t SwapCeiling(int leaf, int f) const;
  bool SwapAllows(const Entry& e, int f, int64_t milli, int64_t freed = 0) const {
    return e.swap_flavor == f && queues_[e.leaf].usage[f] - freed + milli <= e.swap_ceiling;
  }
  bool WithinGuarantee(int leaf, int flavor, int64_t milli) const;
  // Why sibling q keeps `amount` of its unused guarantee, for a refusal: its reclaim hold (when
  // `held`: what it reclaimed moments ago stays with it) or its lending limit.
  std::string KeptWhy(const QueueNode& q, bool held, const std::string& amount) const;
  // Within the guarantee once what is promised to the queue's nominated preemptors is counted,
  // or within a department's own part past it (ReclaimScope: a leaf with no guarantee of its
  // own is past it from its first GPU); else, for a leaf with no guarantee of its own in the
  // flavour, within an ancestor's while best-effort work holds some of it: that work is given
  // back (BestEffortReclaimOnly).
  bool MayReclaim(int leaf, int flavor, int64_t milli) const;
  // Whose guarantee leaf's work of `milli` in `flavor` reclaims: the leaf's own while that
  // holds it (promises counted, as MayReclaim); else the nearest queue above it, short of the
  // fleet, that it keeps within its guarantee (a department guaranteed more than its projects,
  // or whose other projects leave theirs unused: each level's guarantee is its own, as KAI's
  // departments' deserved quota), which then takes back only from queues outside it; -1:
  // none. (A leaf with no guarantee of the flavour has only a department's, or none.)
  int ReclaimScope(int leaf, int flavor, int64_t milli) const;
  // Whether queue a is a department: below a root (not the fleet's node, nor a root itself).
  bool IsDepartment(int a) const;
  // A queue's own part of its guarantee of `flavor`: what none of its children is guaranteed.
  int64_t OwnPart(int a, int flavor) const;
  // How much more of `flavor` department a's child `branch` may hold with a still within its
  // guarantee and its own part covering what its children hold past their own (promises
  // counted): ReclaimScope's test for a. Negative: nothing (or a has no own part).
  int64_t OwnPartRoom(int a, int branch, int flavor) const;
  // The most leaf's work may reclaim of `flavor` past its own guarantee under a department's
  // own part (the largest OwnPartRoom up its departments; 0: none), for Wake.
  int64_t DepartmentRoom(int leaf, int flavor) const;
  // Whether a reclaim by leaf `preemptor` in `flavor` may take only best-effort work: it has
  // no guarantee of its own in the flavour, and `scope`, its ReclaimScope for the work, is none
  // (no department's own part holds it), so what it reclaims is the guarantee of a queue above
  // it that no project was given. (Where a department's own part holds it, it reclaims that
  // from queues outside the department, as a project past its own guarantee does.)
  bool BestEffortReclaimOnly(int preemptor, int flavor, int scope) const {
    return queues_[preemptor].guaranteed[flavor] == 0 && scope < 0;
  }
  // The same for CPU (r = 0) or memory (r = 1), where the queue's tree limits it.
  bool MayReclaimResource(int leaf, int r, int64_t amount) const;
  // Whether admitting e keeps its queue within its guarantee of every CPU and memory quota
  // its tree has, promises counted: as in Kueue, only work within its queue's guarantee in
  // every resource it asks for reclaims (else two queues, each borrowing what the other is
  // guaranteed, would take it back from each other in turn).
  bool ResourcesWithinGuarantee(const Entry& e) const;
  // Whether leaf q holds more CPU or memory than its guarantee, less what is being evicted.
  bool BorrowsResource(int q, int r) const;
  // The resources (bit r) workload id may reclaim from other queues of its tree at its current
  // size: none while it would borrow GPUs or another resource.
  unsigned ResourceReclaims(int id) const;
  // Whether `victim`, of the preemptor's own queue, may go for it (the queue's withinQueue).
  bool MayEvictOwn(const Entry& preemptor, const Entry& victim) const;
  int64_t promised_milli(int q) const;  // every flavour
  // Whether it may reclaim GPUs its queue is guaranteed (ReclaimEligible), or that or CPU or
  // memory (MayReclaimAny).
  bool ReclaimEligible(int id) const;
  bool MayReclaimAny(int id) const;
  // Takes one of the queue's preemption searches of this cycle, if one is left for `id`.
  bool TakeSearch(int id);
  void Nominate(int id, int victims, bool within_guarantee);
  // Keeps `placed` as the nominated preemptor's plan and holds what is free of it (HoldPlan).
  // With `reserve_quota` (a preemptor short of quota, whose victims give quota back), its
  // planned GPUs count as its queues' (ReserveQuota) until it starts or gives the plan up.
  void SetPlan(int id, const std::vector<std::pair<Assignment, const PodRequest*>>& placed,
               bool reserve_quota = false, bool reserve_resources = false);
  void HoldPlan(int id);
  // Past config_.reserve_after_s without room: nominates `id` with a plan on the nodes closest to
  // free (`prefer`, where it planned before, first) and holds what is free of it (see
  // AdmissionConfig::reserve_after_s). False where it reserves nothing.
  bool ReserveRoom(int id, const std::vector<PodRequest>& pods, const std::vector<int>& prefer,
                   double now);
  // Placement failed for `id` (as the fleet stands, holds applied): places it in the room held
  // for the reservations that could not start before its time limit runs out (their holds
  // lifted for the try, and held again after), if it has a limit. True if placed (`e.assign`
  // set and applied; the caller admits it). `key`: its shape's (AttemptKey); a shape that
  // failed with the same reservations lifted is not tried again in the cycle.
  bool Backfill(int id, uint64_t key, const std::vector<PodRequest>& pods, double now);
  // Held room is no freed news to parked work (nothing wakes it there): parked work with a time
  // limit that ends before the latest start of a reservation holding room comes back to be
  // tried (and Backfill), as many as a cycle's backfill tries, looking at a bounded number.
  void WakeForBackfill(double now);
  // Reservation r waits and holds some room now (what Backfill may lift).
  bool HoldsRoom(int r) const;
  // When reservation `id` could start at the earliest: when the last of the work on the devices
  // of its plan ends by its time limit (now if none runs there; infinity where one has no
  // limit, or is stopping). Kept for the cycle while its plan stands.
  double ReservationStart(int id, double now);
  // When admitted workload e ends at the latest, by its time limit (spec.maxRuntimeSeconds from
  // its admission); infinity without one, or while it stops (a victim, a shrink's fragment).
  double EndsBy(const Entry& e) const;
  void ReleaseHolds(Entry& e);
  void VictimStopped(int id);
  void Unnominate(int id, bool log_freed = true);
  // Counts a nominated preemptor's planned GPUs as used by its queues (Entry::quota_reserved),
  // less what its victims still stopping hold there; again each time one of them stops.
  void ReserveQuota(int id);
  void UnreserveQuota(Entry& e);
  // (`flavors`: the flavours reclaimed, bit f; flavours past 63 always count; `resources`: CPU
  // (bit 0) and memory (bit 1) reclaimed.)
  void NoteReclaim(int id, const std::vector<int>& victims, double now,
                   uint64_t flavors = ~uint64_t{0}, unsigned resources = 0);
  bool Holding(const QueueNode& q, double t) const;
  double Key(int q) const;
  // Queue q's weighted share at dominant share `share`: +infinity for weight 0.
  double Weighted(int q, double share) const;
  // The two branches of leaves a and b below the queue they share (roots: siblings at the top),
  // a's first; {a, b} where one is the other's.
  std::pair<int, int> Branches(int a, int b) const;
  // Between leaves a and b, the over-quota priority of a's branch less b's (-1, 0, 1).
  int OverQuotaOrder(int a, int b) const;
  // Whether sibling branch q's work may go for sibling `mine`'s fair share: q is of lower
  // over-quota priority, or of the same and its weighted share `q_share` is at least (or, with
  // `strictly`, above) `my_share`; never for a `mine` of weight 0 alone.
  bool FairShareYields(int mine, int q, double my_share, double q_share, bool strictly) const;
  // Whether leaf q's branch (below the queue it shares with `leaf`) is of lower over-quota
  // priority than leaf's, or its weighted share now is above (MayPreempt's first look).
  bool FairShareAbove(int leaf, int q) const;
  // "for queue q's fair share", and where one of `victims` goes by over-quota priority, whose.
  std::string FairShareWhy(int leaf, const std::vector<int>& victims) const;
  // What the cycle tries next below a queue: the leaf, the next workload in its line (-1: none
  // left) and the milli-GPUs it asks.
  struct Pick {
    int leaf = -1;  // -2 in pick_: to be worked out again
    int64_t ask = 0;
    int id = -1;
  };
  // The leaf whose next workload the cycle tries next: down the tree, among active siblings,
  // those whose next workload fits within their guarantees first (Kueue orders workloads that
  // would borrow after those that would not), then by over-quota priority and weighted share.
  Pick PickLeaf();
  // The best active leaf below q and what it tries next, kept per queue for the cycle
  // (`pick_`) until something below q changes (ForgetPick).
  Pick PickBelow(int q);
  // PickBelow of the best of `level`'s queues, siblings (or the roots).
  Pick PickAmong(const std::vector<int>& level);
  // Whether queue q goes first among its siblings with its next workload of `ask` milli-GPUs.
  int Tier(int q, int64_t ask) const;
  // What changed at q (its usage, its line, its cursor) changes the picks of q and above it.
  void ForgetPick(int q);
  void Deactivate(int leaf);
  bool TryAdmit(int id, double now, CycleResult& out, std::map<uint64_t, std::string>& failed);
  // A preemptor whose victims have stopped (its held room given back) lets work of its own
  // queue that orders ahead of it with a higher priority (work that may not preempt:
  // preemptionPolicy Never) try that room first, as Kueue admits a queue's head first and
  // Kubernetes keeps a nominated node from no higher priority; the preemptor, tried after,
  // looks for victims again if it no longer fits. Not in a StrictFIFO queue (its head goes
  // first already).
  void TryAhead(int id, double now, CycleResult& out, std::map<uint64_t, std::string>& failed,
                int max_admissions, int budget);
  bool MayPreempt(int id) const;
  // Whether its queue runs work of its own that its withinQueue policy lets it evict.
  bool OwnMayGo(int id) const;
  // Whether no work held for this cycle is of workload `id`'s tree (held_roots_), and `id`
  // keeps its tree within the tree's guarantee: it takes nothing of a waiting tree's share, so
  // it is not held back.
  bool WithinOtherTree(int id) const;
  bool WouldBorrow(int id) const;
  // The hold on borrowing (hold_borrowing_) keeps to where the work it is for could run: the
  // nodes one of its pods could use (CouldUse), and for a required topology only the domains
  // that could hold the GPUs it would start with were they empty. HoldRegion adds the region of
  // workload `id`, asking for `pods`, to this cycle's hold, for its queue.
  void HoldRegion(int id, const std::vector<PodRequest>& pods);
  // Goes back to the first `regions` regions held (a reservation tried again, a cut admitted:
  // what they held the cycle for is given back).
  void RestoreHold(size_t regions);
  // Where `pods` could run, against the nodes held: none of them held (kOutside: not held
  // back), some (kPartly: it may start on the others), all (kInside); with the queue of the
  // first work held for whose region they reach (*queue; -1 where none does).
  enum class Reach { kOutside, kPartly, kInside };
  Reach HeldReach(const std::vector<PodRequest>& pods, int* queue = nullptr);
  // The nodes held this cycle (the union of the regions), brought up to date.
  const std::vector<char>& HeldNodes();
  // Whether pod `p` could run on node `n` were it empty: its node selector's set, the node's
  // CPU and memory, a GPU model it allows, a GPU in MIG mode for a slice and not for the rest.
  // (MIG profiles, GPU counts and exclusive nodes are not looked at: the hold errs towards
  // holding, a borrower's reach towards being held.)
  bool CouldUse(const PodRequest& p, int n) const;
  // ... its selector aside (so the same for every node of n's hardware type), and that for
  // each of `shapes` by type (ClusterState::node_type, type_representatives).
  bool TypeCouldUse(const PodRequest& p, int n) const;
  std::vector<std::vector<char>> TypesFor(const std::vector<const PodRequest*>& shapes) const;
  // `pods` kept off the nodes held (their selectors' and preferred tiers' sets narrowed).
  void KeepOffHeld(std::vector<PodRequest>& pods);
  void Park(int id, bool quota, uint64_t key, const std::vector<PodRequest>& pods);
  // Where room held for other workloads that wait ahead (nominated: reservations, preemptors
  // whose victims stop) is on nodes of one of `models` (GpuModels of its pods as they were
  // narrowed by quota when it failed): how much, for its reason ("" where none is). `id` -1:
  // no workload's own holds are left out.
  std::string HeldAheadNote(int id, uint64_t models) const;
  // Domain d of `level`, as e's reason names where its pods go: "leaf l1 (its gang needs one
  // leaf)".
  std::string DomainSaid(const Entry& e, TopologyLevel level, int d) const;
  // The GPU models some pod of `pods` may use (0: none asks for a GPU).
  static uint64_t GpuModels(const std::vector<PodRequest>& pods);
  // Adds HeldAheadNote to `id`'s reason where no node can take it now (and notes it in
  // held_noted_).
  void NoteHeldAhead(int id, const std::vector<PodRequest>& pods);
  // Takes HeldAheadNote's part out of `reason`; where it was (npos: it had none).
  static size_t EraseHeldAhead(std::string& reason);
  // HeldAheadNote again for each workload whose reason has one (held_noted_), as held room
  // changed in the cycle: parked work is not tried again for it. At the end of a cycle.
  void RefreshHeldAhead();
  void Unpark(int id);
  void Wake();
  // Wakes up to `count` of a parked shape's members, in parking order, of those whose GPU
  // pods may use one of `models` (a mask of GPU models; all by default).
  int WakeShape(uint64_t key, int count, uint64_t models = ~uint64_t{0});
  void AddRunning(int id);
  void RemoveRunning(int id);
  // Moves work to gather room for `id`. With `reclaim`, the room comes from what other queues
  // borrow too: their borrowed work anywhere in the fleet is evicted first (only down to their
  // guarantees), and the moves then clear whole nodes into that room, for a workload within its
  // guarantee that plain reclaim cannot place (a gang needing whole nodes while borrowed GPUs
  // lie scattered among work that stays).
  // The places other consolidations hold for the work they move (Entry::move_plan) are free to
  // its plan: found anew for that work afterwards, off their preemptors' planned nodes (a held
  // place is where a mover may go, not where it must).
  bool Consolidate(int id, const std::vector<PodRequest>& pods, const TopologyConstraint& topology,
                   double now, CycleResult& out, bool reclaim = false);
  bool ConsolidateOnce(int id, const std::vector<PodRequest>& pods,
                       const TopologyConstraint& topology, double now, CycleResult& out,
                       bool reclaim);
  // Places found anew for the work preemptor p's consolidation moves that still stops, held
  // with p's plan (off p's planned nodes; a mover no room takes has none held).
  void PlaceMoves(int p, const std::vector<int>& movers);
  // Whether room is held for mover v: its queue holds no more than its guarantee. Borrowed work
  // moved goes back to its queue as any victim does, and a queue below its guarantee may take
  // that room first (openb-4teams: holding it for borrowed work stretched guarantee waits).
  bool HoldsForMover(int v) const;
  bool consolidating_ = false;  // (within Consolidate: the held places are released)
  void MarkEvicting(int victim, int preemptor, const std::string& reason, CycleResult& out,
                    Eviction::Basis basis = Eviction::Basis::kOther);
  // An admitted workload gives its devices and quota back and is pending again (not yet in
  // its queue's line: the caller enqueues it).
  void GiveBack(int id);
  // Takes back a workload admitted earlier in this cycle (out.admitted): it waits again.
  void Unadmit(int id, const std::string& reason, CycleResult& out);
  // A victim of `preemptor`: evicted (true), or taken back if admitted this cycle (false).
  // "tenant/name, ..." of the first `most` of `ids`, then how many more.
  std::string WorkloadNames(const std::vector<int>& ids, size_t most = 5) const;
  bool EvictOrTakeBack(int victim, int preemptor, const std::string& reason, CycleResult& out,
                       Eviction::Basis basis = Eviction::Basis::kOther);
  // Takes victim v's pods out of the placement state for a trial, and puts them back. What
  // they hold on devices out of service (or on a node wholly out of it: its CPU and memory too)
  // stays held: room a victim frees where no new work goes is no room (a trial's preemptor
  // chose the same victim on a cordoned node every cycle, the eviction called off each time).
  void TrialRelease(int v);
  void TrialReapply(int v);
  // The part of victim pod `a` that a trial frees: its devices in service, or nothing where its
  // node is wholly out of service (false).
  bool InServicePart(const Assignment& a, Assignment* part) const;
  // What queue q's children keep of flavour f by their lending limits (their guarantees past
  // them), summed; computed once, as the tree's guarantees and limits are the Admitter's for
  // its life.
  int64_t KeptByChildren(int q, int f) const;
  // A gang that prefers (or needs) a topology, placed as a gang where the room is free now (a
  // preemption's trial, its quota's victims released), applied and added to `placed`: its plan
  // — the room held and shown while its victims stop — compact where it can be, not scattered
  // pod by pod. False, nothing placed, for other work or where it does not fit.
  bool PlaceGangNow(const Entry& e, const std::vector<PodRequest>& pods,
                    std::vector<std::pair<Assignment, const PodRequest*>>& placed);
  // Places `pod` where it fits now (a preemption's trial; on the nodes `only` where given),
  // applied and added to `placed`.
  bool PlaceNow(const PodRequest& pod,
                std::vector<std::pair<Assignment, const PodRequest*>>& placed,
                const std::vector<int>* only = nullptr);
  // What an elastic shrink for Preempt may take and why: the flavours (and CPU or memory) it
  // reclaims, whether other queues' victims must stay at their guarantee in those flavours
  // (`check_lending`; those in `must_lend` always, and only pods in those flavours), the
  // reason, and whether it is a reclaim (for the reclaim hold).
  struct ShrinkScope {
    uint64_t reclaim_flavors = 0;
    // By flavour, whose guarantee a reclaim takes back (Preempt's reclaim_scope): a
    // department's own part past the leaf's, whose own queues' pods stay; -1 beside a leaf
    // with no guarantee of the flavour: best-effort pods only (BestEffortReclaimOnly).
    std::vector<int> reclaim_scope;
    unsigned res_reclaim = 0;
    bool check_lending = false;
    std::set<int> must_lend;
    std::string why;
    bool reclaim = false;
    // Short of its own queue's GPU quota in this flavour (-1: not): pods of its own queue's
    // elastic victims go first until the quota allows it.
    int quota_flavor = -1;
    // ... and that quota is its tree's, at its top (Preempt's quota_reclaim): other queues'
    // borrowed pods there first, what they free counted at the top.
    bool quota_reclaim = false;
    // ... or it is short of that quota under fair-share preemption (Preempt's fair_quota):
    // other queues' pods under the queue whose limit stops it give it back, each victim's
    // queue kept at or above its share.
    bool fair_quota = false;
    int quota_blocker = -1;  // ... the queue whose limit stops it (Preempt's quota_blocker)
    // Whether a victim bigger than its queue's whole guarantee may take it below (a reclaim:
    // yes; work that borrows, preempting to borrow: no).
    bool big_may_go = true;
    // Fair-share preemption: the preemptor's claim (Preempt's), whose weighted share another
    // queue's pods may be taken down to (only what it borrows); share -1: off.
    // `takes_borrowed`: whether a reclaim's lending check may let them go instead.
    FairClaim fair_share;
    bool takes_borrowed = false;
  };
  // Elastic shrink (AdmissionConfig::elastic_shrink) for Preempt: quota (scope.quota_flavor)
  // and room for `pods` from the last pods of the elastic victims among `cands` (eligible
  // victims, cheapest first), beyond their pod sets' minCount. Commits like Preempt; false if
  // it cannot.
  bool Shrink(int id, const std::vector<PodRequest>& pods, const std::vector<Candidate>& cands,
              const ShrinkScope& scope, double now, CycleResult& out);
  // Running workload id holds `pods` at `assign` (`counts` per pod set) from now: charged,
  // held and its size noted (its devices on the state are the caller's to apply or release).
  void Resize(int id, const std::vector<int>& counts, std::vector<PodRequest> pods,
              std::vector<Assignment> assign);
  // Moves the last `cut[s]` pods of each pod set s of running workload v into a new fragment
  // entry (admitted, same queue), which it returns; v keeps running with the rest.
  int Split(int v, const std::vector<int>& cut);
  bool Preempt(int id, const std::vector<PodRequest>& pods, uint64_t allowed_models, double now,
               CycleResult& out);
  // A borrower held back for work waiting within a guarantee (the cycle's hold) may still take
  // the room of its own queue's lower-priority work, as a swap: Preempt with held_swap_ set
  // evicts only that work, and only while its queue then holds no more of the flavour than
  // before (SwapAllows), so nothing the hold keeps for others is taken. (Kueue preempts
  // within a ClusterQueue whatever its cohort waits for; a user-style trial saw critical
  // work wait behind its own queue's low-priority work for as long as another queue's work
  // waited, even work that could never start.) True if victims were chosen; else its reason is
  // left as it was.
  bool HeldSwap(int id, double now, CycleResult& out);
  void Charge(int id, int sign);
  void CountEvicting(int id, int sign);  // its queue's evicting count and GPUs, per flavour too
  void Hold(int id);
  void Unhold(int id);
  void Enqueue(int id);
  void Dequeue(int id);
  void UpdateHistory(double now);
  // Admits id as placed in e.assign (with e.pods as applied).
  void Admit(int id, uint64_t key, double now, CycleResult& out);
  // The models e may use as its quota stands now (0: none; `why`, `blocked`: the refusal that
  // its queue's own work could undo, the first flavour in which the queue holds GPUs, else the
  // first refusal).
  uint64_t QuotaModels(const Entry& e, const PodRequest& gpu_pod, std::string* why, int* blocked,
                       bool* by_cost = nullptr) const;
  void SetCounts(Entry& e, const std::vector<int>& counts);
  // Places all of `pods` (one pod alone, or a gang with e's topology) and applies them to the
  // state; on failure nothing is applied and `reason` (when given) says why. Nodes its
  // nodeAffinity prefers are tried first (PodRequest::preferred), best first.
  bool PlaceAll(const Entry& e, const std::vector<PodRequest>& pods,
                std::vector<Assignment>* assign, std::string* reason);
  // The same, on the nodes the requests name alone, with `topology` for e's.
  bool PlaceAllOnce(const Entry& e, const std::vector<PodRequest>& pods,
                    const TopologyConstraint& topology, std::vector<Assignment>* assign,
                    std::string* reason);
  // Partial admission of id with fewer pods; true if admitted. `key`: its full shape's.
  // `most_cut`: the most pods any pod set may be cut by (-1: down to its minCount).
  bool TryPartial(int id, uint64_t key, double now, CycleResult& out, int most_cut = -1);
  // The pods per pod set at `cut` pods fewer in each (none below its minCount).
  static std::vector<int> CountsAt(const Entry& e, int cut);
  // The GPUs (milli) it is charged at its pod sets' minCount.
  static int64_t LeastCharge(const Entry& e);
  // The least cut at which its queue may reclaim its guarantee for it (MayReclaimAny), or 0
  // where none may (or it may whole). e is left asking for all its pods.
  // `counts` (if given): the pods per pod set it reclaims for, from that cut, each pod set in
  // turn adding the most pods that stay within the guarantee.
  int ReclaimCut(int id, std::vector<int>* counts = nullptr);
  // Reclaim for `counts` pods per pod set (Consolidate, then Preempt, on them). kPreempting:
  // nominated with those until it starts or tries again. Else it asks for all its pods again:
  // kLater where the cut's victims are within their minimum runtime or past a disruption budget (it
  // says so), kNothing where nothing is there to take (its reason kept).
  enum class CutReclaim { kPreempting, kLater, kNothing };
  CutReclaim ReclaimForCut(int id, const std::vector<int>& counts, double now, CycleResult& out);
  // Elastic growth (AdmissionConfig::elastic_growth): each running workload admitted in part
  // tries to add pods (GrowPartial), the most that fit, by the same number per pod set (Grow):
  // within its queue's guarantee, or past it where the queue's other work fills the guarantee.
  void GrowPartial(CycleResult& out);
  // Whether it grew; `probed` says whether quota let it try placement at all.
  bool Grow(int id, bool* probed);
  std::set<int> partial_running_;  // admitted in part (may hold stale ids: checked on use)
  // Before it waits: a partial start, unless it may reclaim its guarantee and this cycle's
  // search (`searched`) has not come up empty. Where only fewer pods than all are within its
  // queue's guarantee, those reclaim it (as Kueue's partial admission searches with
  // preemption), unless free room starts as many. kPreempting: nominated with that cut.
  enum class CutOutcome { kNone, kAdmitted, kPreempting };
  CutOutcome PartialInstead(int id, bool searched, uint64_t key, double now, CycleResult& out);
  std::set<uint64_t> partial_failed_;  // shapes that failed to start in part this cycle
  // Shapes (AttemptKey, with the models quota allowed) whose search for victims or moves found
  // nothing this cycle, and what it left its workload: another of that shape finds nothing
  // either (the fleet only fills, and victims are only taken, as a cycle goes on), so it is
  // not searched again (a replay's tail ran 50 such searches a cycle, 3 ms each).
  struct FailedSearch {
    std::string reason;
    bool budget_blocked = false;
    double victims_ready_at = -1, victims_min_runtime = 0;
    bool retry = false;  // Entry::retry_search (a budget of 1 or more held it)
  };
  std::unordered_map<uint64_t, FailedSearch> failed_searches_;
  static uint64_t SearchKey(uint64_t key, uint64_t allowed) {
    return key ^ (allowed + 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
  }
  void NoteFailedSearch(int id, uint64_t search_key) {
    const Entry& e = entries_[id];
    if (e.continuing || e.nominated) return;
    failed_searches_[search_key] = {e.reason, e.budget_blocked, e.victims_ready_at,
                                    e.victims_min_runtime, e.retry_search};
  }

  const Fleet& fleet_;
  AdmissionConfig config_;
  const Policy& policy_;
  Placer placer_;
  ClusterState state_;
  Rng rng_;
  std::vector<FlavorSpec> flavors_;
  std::vector<bool> managed_;
  std::vector<uint64_t> flavor_models_;      // model mask per flavour
  std::vector<std::vector<int>> charge_of_;  // [row][model, the last: any other] -> flavour
  std::vector<std::vector<uint64_t>> charge_models_;  // [row][flavour] -> models
  std::vector<QueueNode> queues_;
  std::vector<int> roots_;
  int fleet_queue_ = -1;  // the fleet's node (kFleetQueue) when trees lend to each other, last
  // By flavour: the trees' guarantees added up (trees lending each other), and the GPUs in
  // service (TakeOutOfService), in milli-GPUs; the fleet's node is guaranteed the larger.
  std::vector<int64_t> trees_guaranteed_, in_service_milli_;
  std::vector<int64_t> elsewhere_milli_;  // by flavour: GuaranteedElsewhere, kept current
  // By pair of flavours: the GPUs in service that both charge (a whole-GPU flavour and a
  // fraction flavour of the same GPUs), in milli-GPUs.
  std::vector<std::vector<int64_t>> shared_milli_;
  mutable std::vector<std::vector<int64_t>> kept_by_children_;  // see KeptByChildren
  std::set<std::pair<int, int>> out_of_service_;  // (node, device; -1: its CPU) taken out
  std::map<std::string, int> queue_index_;
  std::vector<Entry> entries_;
  std::vector<std::vector<int>> node_workloads_;  // admitted/evicting workloads per node
  std::vector<int> nominated_;
  // Pending workloads whose reason has a HeldAheadNote, with the GPU models it counted.
  std::map<int, uint64_t> held_noted_;
  double now_ = 0;                // of the current Cycle
  std::map<int, int> preemptor_;  // evicting workload → the workload it makes room for
  std::set<int> unready_;         // admitted, pods not all ready yet
  double last_history_ = -1;
  // Nodes whose devices were freed since the last Wake.
  std::vector<int> freed_log_;
  size_t wake_pos_ = 0;
  std::unordered_map<uint64_t, ParkedShape> parked_shapes_;
  std::vector<int> quota_parked_;
  bool wake_quota_ = false;  // wake quota_parked_ in the next Wake
  // Whether QuotaAllows counts what nominated preemptors keep (RestoreNomination asks whether
  // a plan is short of quota on its own).
  bool count_reserved_ = true;
  struct VictimList {
    std::vector<Candidate> cands;
    int in_min_runtime = 0;
    std::string budget_block;
    std::vector<Candidate> later;  // eligible but within their minimum runtime
    std::string young_names;       // all within their minimum runtime, named (WorkloadNames)
    double young_free_at = -1;     // when the first of them may go
    std::string young_floor;       // ... held so by its queue's preemptMinRuntime: which ("": not)
    // Elastic workloads of other queues not eligible whole (their queue would drop below its
    // guarantee without them) whose pods beyond their minCount may be (elastic shrink).
    std::vector<Candidate> spare_only;
    // Eligible but in a queue whose disruption budget is spent (for a preemptor that goes on
    // batch by batch: see Entry::continuing).
    std::vector<Candidate> spent;
    // Under fair-share preemption, elastic workloads of other queues not eligible whole (their
    // queue's share would fall below the preemptor's) whose pods beyond their minCount may be,
    // as many as keep it at or above (Shrink's fair-share check, pod by pod).
    std::vector<Candidate> spare_fair;
    // Work of its own queue its priority would let go but that is not preemptible (said when
    // nothing else makes way: a trial's critical work read only of quota).
    int pinned = 0;
  };
  // Who asks: leaf, priority, flavours taken back, CPU or memory taken back, quota short,
  // borrowing, size (fair-share preemption), arrival (LowerOrNewerEqualPriority), a held
  // borrower's swap (HeldSwap).
  // (The last: the departments whose own guarantee it reclaims, by flavour (ReclaimScope),
  // which leave their own queues' work out.)
  using VictimKey =
      std::tuple<int, int, uint64_t, unsigned, bool, bool, double, double, bool, uint64_t>;
  std::map<VictimKey, VictimList> victim_cache_;    // this cycle
  std::map<int, std::string> stopping_names_;       // this cycle: by queue, its evicting work
  std::vector<int> preempt_tried_, reclaim_tried_;  // searches per queue, this cycle
  std::vector<bool> no_eviction_;                   // by node, see ExcludeFromEviction
  int consolidations_left_ = 0;                     // this cycle
  // Consolidate plans again with disruption budgets of 1 or more no bar, then moves now what
  // the budgets allow and the rest as they free (a user-style trial's gang waited for good
  // beside 12 free GPUs under a budget of 1, where preemption goes batch by batch).
  bool consolidation_staged_ = false;
  int consolidation_turn_ = 0;   // the queue Wake looks at first for consolidation
  bool hold_borrowing_ = false;  // this cycle: a within-guarantee workload found no room
  int held_for_ = -1;            // ... its queue (the first), which the waiting borrowers name
  std::set<int> held_roots_;     // the trees of all work held for this cycle (WithinOtherTree)
  // This cycle: the regions of the hold (HoldRegion) by what they were made from; the ones
  // held, in the order they were (a count is a snapshot to go back to), each with the queue it
  // is for; their union, how many of them it counts, a version bumped as it changes, and
  // whether it is every node; pods' reach by what CouldUse reads of them and the version
  // (HeldReach); the narrowed node sets and tiers by the set narrowed and the version
  // (KeepOffHeld); and the off-held placements left to try (kOffHeldTriesPerCycle).
  std::map<uint64_t, std::vector<char>> region_of_;
  std::vector<std::pair<const std::vector<char>*, int>> held_regions_;
  std::vector<char> held_nodes_;
  size_t held_nodes_of_ = 0;
  int held_version_ = 0;
  bool held_everywhere_ = false;
  std::map<std::pair<uint64_t, int>, std::pair<Reach, int>> reach_of_;
  using Tiers = std::vector<std::shared_ptr<const NodeSet>>;
  std::map<std::pair<const NodeSet*, int>, std::shared_ptr<const NodeSet>> off_held_nodes_;
  std::map<std::pair<const Tiers*, int>, std::shared_ptr<const Tiers>> off_held_tiers_;
  int off_held_left_ = 0;
  bool off_held_ = false;           // TryAdmit: the attempt keeps off the held nodes (KeepOffHeld)
  bool held_off_ = false;           // ... and found no room elsewhere (or its quota refused it)
  int held_swap_ = -1;              // Preempt for HeldSwap: the flavour of the swap; -1: not one
  bool held_swap_budget_ = false;   // ... and it found victims only a disruption budget refused
  std::set<int> held_swap_queues_;  // this cycle: the leaves a held swap was searched for
  std::set<int> reservations_;      // entries reserving (Entry::reserving)
  int64_t workloads_reserved_ = 0;  // workloads that ever reserved (workloads_reserved())
  int64_t workloads_backfilled_ = 0;         // see workloads_backfilled()
  std::map<int, double> reservation_start_;  // this cycle: ReservationStart by reservation
  int backfills_left_ = 0;                   // this cycle: tries of Backfill
  std::set<std::pair<uint64_t, std::vector<int>>> backfill_failed_;  // this cycle: (key, lifted)
  // The cycle's place in each leaf's line (the last workload it tried) and, per queue, its
  // cached PickBelow (leaf -2: to be worked out again).
  std::vector<std::optional<std::tuple<int, double, int>>> cursor_;
  std::vector<Pick> pick_;
  // The last parked workload WakeForBackfill looked at: (leaf, its parked key).
  std::pair<int, std::tuple<int, double, int>> wake_cursor_{
      0,
      {std::numeric_limits<int>::min(), -std::numeric_limits<double>::infinity(),
       std::numeric_limits<int>::min()}};
  // The fleet's GPUs (milli), cores (milli) and memory (MiB) in service: what dominant shares
  // are shares of.
  int64_t cap_gpu_ = 1, cap_cpu_ = 1, cap_memory_ = 1;
};

// Milli-GPU as GPUs for messages: 48000 → "48", 2500 → "2.5".
std::string GpuAmount(int64_t milli);
// ... with its noun: "1 GPU", "2.5 GPUs".
std::string GpusSaid(int64_t milli);
// An amount of the pods' CPU (r = 0: milli-cores, as cores) or memory (r = 1: MiB, as "2Gi"),
// and the quota key naming it.
std::string ResourceAmount(int r, int64_t v);
const char* ResourceName(int r);

}  // namespace fabrica
