#include "sched/admission.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace fabrica {
namespace {

// The nodes none of a plan's pods is on (each entry a pair whose first is its Assignment):
// where the work a consolidation moves for it may go.
template <typename Plan>
std::vector<int> NodesOff(const Plan& plan, int nodes) {
  std::vector<char> planned(nodes, 0);
  for (const auto& entry : plan) planned[entry.first.node] = 1;
  std::vector<int> off;
  for (int n = 0; n < nodes; ++n)
    if (!planned[n]) off.push_back(n);
  return off;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The shape of a placement attempt, to skip identical attempts once one failed in a cycle (the
// fleet only fills up during a cycle: victims free nothing before the next one).
uint64_t AttemptKey(const Workload& w, int leaf, const std::vector<PodRequest>& pods) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
    h ^= h >> 29;
  };
  mix(leaf);
  mix(w.priority);
  mix(w.gang);
  mix(static_cast<int>(w.topology.level) * 2 + w.topology.required);
  for (const PodRequest& p : pods) {
    mix(p.cpu_milli);
    mix(p.memory_mib);
    mix(static_cast<int>(p.kind));
    mix(p.num_gpu);
    mix(p.gpu_milli);
    mix(p.charge_milli);
    mix(p.charge_rest);
    mix(p.gpu_memory_mib);
    mix(p.compute_from_memory);
    mix(p.mig_profile);
    mix(static_cast<int64_t>(p.model_mask));
    mix(p.tenant);
    // (The nodes its selector leaves: one set per selector in a state, so its address.)
    mix(static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.nodes.get())));
  }
  return h;
}

// "; N more to go as …": the moves or evictions left for later, and the queues whose disruption
// budgets hold them (each named once, as first met; none: held by the room they free).
std::string MoreToGo(int later, const std::vector<std::string>& queues) {
  std::string note = "; " + std::to_string(later) + " more to go as ";
  if (queues.empty()) return note + "the disruption budgets allow";
  if (queues.size() == 1) return note + "the disruption budget of queue " + queues[0] + " allows";
  note += "the disruption budgets of queues ";
  for (size_t i = 0; i < queues.size(); ++i)
    note += (i == 0 ? "" : i + 1 == queues.size() ? " and " : ", ") + queues[i];
  return note + " allow";
}

}  // namespace

namespace {
constexpr char kNextCycle[] = "waiting for the next admission cycle";
// Placement tries in reservations' held room a cycle (Admitter::Backfill): each is one more
// placement of work that found no room.
constexpr int kBackfillTriesPerCycle = 16;
// Placements tried a cycle for borrowers held back, on the nodes the hold leaves them (the
// Cycle's main loop): apart from its attempts, so that they never keep others from theirs.
constexpr int kOffHeldTriesPerCycle = 1024;
// Work of a preemptor's own queue that orders ahead of it and could use the room its victims
// freed, tried there before the preemptor is (TryAhead): at most this many per preemptor.
constexpr int kAheadTries = 4;
// Regions of the hold on borrowing, and borrowers' reaches, worked out a cycle (each a pass
// over the nodes): past them, a region is every node and a borrower is held back (as the hold
// was before it kept to regions).
constexpr size_t kHoldRegionsPerCycle = 64;
constexpr size_t kHeldReachesPerCycle = 512;
// Parked workloads looked at a cycle for one whose time limit may let it into held room
// (Admitter::WakeForBackfill).
constexpr int kBackfillScanPerCycle = 4096;
// (What follows names the queue whose work waits: HeldForGuarantees.)
constexpr char kHeldForGuarantees[] = "waiting: it would borrow, and ";
// How the part of a reason begins that says room is held for work that waits ahead.
constexpr char kHeldAhead[] = "of its GPU models, ";
}  // namespace

std::string GpuAmount(int64_t milli) {
  // In decimals, as a spec's quotas store a fraction (0.5, not 500m).
  if (milli % kMilliPerGpu == 0) return std::to_string(milli / kMilliPerGpu);
  std::string s = std::to_string(std::abs(milli) % kMilliPerGpu + kMilliPerGpu).substr(1);
  while (s.back() == '0') s.pop_back();
  return (milli < 0 ? "-" : "") + std::to_string(std::abs(milli) / kMilliPerGpu) + "." + s;
}

std::string GpusSaid(int64_t milli) {
  return GpuAmount(milli) + (milli == kMilliPerGpu ? " GPU" : " GPUs");
}

std::string ResourceAmount(int r, int64_t v) {
  return r == 0 ? FormatMilliCpu(MilliCpu(v)) : FormatMemoryMib(MemoryMib(v));
}

const char* ResourceName(int r) { return r == 0 ? kCpuQuota : kMemoryQuota; }

namespace {

// The first of `pods` that asks for GPUs (the one quota checks are made for), or null.
const PodRequest* FirstGpuPod(const std::vector<PodRequest>& pods) {
  for (const PodRequest& p : pods)
    if (p.kind != DeviceKind::kNone) return &p;
  return nullptr;
}

// In a preemption search's per-(queue, flavour) tallies of what victims take, CPU (+ 0) and
// memory (+ 1) after every flavour index.
constexpr int kTakenResource = 1 << 20;
constexpr int kTakenGpu = kTakenResource + 2;  // (taken maps: a leaf's GPUs, every flavour or none)

// A quota's amount as its resource reads: GPUs, cores or bytes.
std::string QuotaAmount(const std::string& resource, int64_t v) {
  if (resource == kCpuQuota) return ResourceAmount(0, v);
  if (resource == kMemoryQuota) return ResourceAmount(1, v);
  return GpuAmount(v);
}

}  // namespace

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kPending:
      return "Pending";
    case Phase::kAdmitted:
      return "Admitted";
    case Phase::kEvicting:
      return "Evicting";
    case Phase::kFinished:
      return "Finished";
    case Phase::kInfeasible:
      return "Infeasible";
  }
  return "?";
}

Status ValidatePreemptionPolicy(const PreemptionPolicy& p) {
  // As Kueue's ClusterQueue validation: borrowing preemption takes from other queues, which a
  // queue that never reclaims may not.
  if (p.borrow_within_cohort != PreemptionPolicy::Borrow::kNever &&
      p.reclaim_within_cohort == PreemptionPolicy::Reclaim::kNever)
    return InvalidArgument(
        "borrowWithinCohort: needs reclaimWithinCohort LowerPriority or Any, not Never");
  if (p.borrow_max_priority && p.borrow_within_cohort == PreemptionPolicy::Borrow::kNever)
    return InvalidArgument(
        "borrowWithinCohort.maxPriorityThreshold: only with policy LowerPriority");
  return Status();
}

Status ValidateAdmissionConfig(const AdmissionConfig& config) {
  std::map<std::string, int> flavor_index;
  for (size_t i = 0; i < config.flavors.size(); ++i) {
    const FlavorSpec& f = config.flavors[i];
    std::string at = "flavors[" + std::to_string(i) + "]";
    if (f.name.empty()) return InvalidArgument(at + ".name: required field is missing");
    if (!flavor_index.emplace(f.name, i).second)
      return InvalidArgument(at + ".name: duplicate flavour \"" + f.name + "\"");
    if (f.name == kCpuQuota || f.name == kMemoryQuota)
      return InvalidArgument(at + ".name: \"" + f.name +
                             "\" is reserved for the pods' CPU and memory quotas");
    if (!f.mig_profiles.empty() && f.kind && *f.kind != DeviceKind::kMig)
      return InvalidArgument(at + ".migProfiles: only a kind: mig flavour selects MIG profiles");
    // (A profile no workload may ask selects nothing: a trial's `5g.50gb` was taken.)
    for (size_t k = 0; k < f.mig_profiles.size(); ++k)
      if (Status st = ValidateMigProfileName(f.mig_profiles[k]); !st.ok())
        return InvalidArgument(at + ".migProfiles[" + std::to_string(k) + "]: " + st.message());
  }
  if (config.flavors.empty()) flavor_index.emplace("gpu", 0);

  std::map<std::string, int> index;
  for (size_t i = 0; i < config.queues.size(); ++i) {
    const QueueSpec& q = config.queues[i];
    std::string at = "queues[" + std::to_string(i) + "]";
    if (Status s = ValidateName(q.name); !s.ok())
      return InvalidArgument(at + ".name: " + s.message());
    if (!index.emplace(q.name, i).second)
      return InvalidArgument(at + ".name: duplicate queue \"" + q.name + "\"");
    if (!(q.weight >= 0) || !std::isfinite(q.weight))
      return InvalidArgument(at + ".weight: must be a finite number, 0 or more");
    if (q.disruption_budget < -1)
      return InvalidArgument(at + ".disruptionBudget: must not be negative");
    if (Status s = ValidatePreemptionPolicy(q.preemption); !s.ok())
      return InvalidArgument(at + ".preemption." + s.message());
    // Fair-share preemption has its own rule for taking from other queues (as Kueue's).
    if (q.preemption.borrow_within_cohort != PreemptionPolicy::Borrow::kNever &&
        config.fair_share_preemption)
      return InvalidArgument(at +
                             ".preemption.borrowWithinCohort: not with fair-share preemption "
                             "(fairSharePreemption, the server's --fair-share-preemption)");
    for (size_t k = 0; k < q.flavor_order.size(); ++k)
      if (!flavor_index.count(q.flavor_order[k]))
        return InvalidArgument(at + ".flavorOrder[" + std::to_string(k) + "]: unknown flavour \"" +
                               q.flavor_order[k] + "\"");
    for (const auto& [flavor, quota] : q.quotas) {
      std::string qa = at + ".quotas." + flavor;
      if (!flavor_index.count(flavor) && flavor != kCpuQuota && flavor != kMemoryQuota) {
        std::string known;
        for (const auto& [name, unused] : flavor_index) known += (known.empty() ? "" : ", ") + name;
        return InvalidArgument(qa + ": unknown flavour \"" + flavor + "\" (the flavours are " +
                               known + ", besides cpu and memory)");
      }
      if (quota.guaranteed_milli < 0) return InvalidArgument(qa + ".guaranteed: below zero");
      if (quota.borrowing_limit_milli && *quota.borrowing_limit_milli < 0)
        return InvalidArgument(qa + ".borrowingLimit: below zero");
      if (quota.lending_limit_milli && *quota.lending_limit_milli < 0)
        return InvalidArgument(qa + ".lendingLimit: below zero");
    }
  }
  for (size_t i = 0; i < config.queues.size(); ++i) {
    const QueueSpec& q = config.queues[i];
    std::string at = "queues[" + std::to_string(i) + "].parent";
    if (q.parent.empty()) continue;
    if (!index.count(q.parent)) return InvalidArgument(at + ": unknown queue \"" + q.parent + "\"");
    // Walk up; more steps than queues means a cycle.
    std::string cur = q.parent;
    for (size_t steps = 0; !cur.empty(); ++steps) {
      if (cur == q.name || steps > config.queues.size())
        return InvalidArgument(at + ": cycle in the queue hierarchy through \"" + q.name + "\"");
      cur = config.queues[index[cur]].parent;
    }
  }
  // Children may not be guaranteed more than a parent that sets its own guarantee; a queue
  // that sets none is guaranteed its children's sum, at every depth (as Build reckons it).
  std::vector<std::vector<size_t>> children(config.queues.size());
  for (size_t i = 0; i < config.queues.size(); ++i)
    if (!config.queues[i].parent.empty()) children[index[config.queues[i].parent]].push_back(i);
  std::map<std::pair<size_t, std::string>, int64_t> effective;
  std::function<int64_t(size_t, const std::string&)> guaranteed = [&](size_t i,
                                                                      const std::string& flavor) {
    auto memo = effective.find({i, flavor});
    if (memo != effective.end()) return memo->second;
    auto it = config.queues[i].quotas.find(flavor);
    int64_t g = 0;
    if (it != config.queues[i].quotas.end() && !it->second.guaranteed_unset) {
      g = it->second.guaranteed_milli;
    } else {
      for (size_t c : children[i]) g += guaranteed(c, flavor);
    }
    return effective[{i, flavor}] = g;
  };
  for (size_t i = 0; i < config.queues.size(); ++i) {
    const QueueSpec& p = config.queues[i];
    for (const auto& [flavor, quota] : p.quotas) {
      const std::string qa = "queues[" + std::to_string(i) + "].quotas." + flavor;
      int64_t sum = 0;
      for (size_t c : children[i]) sum += guaranteed(c, flavor);
      if (!quota.guaranteed_unset && sum > quota.guaranteed_milli)
        return InvalidArgument(qa + ".guaranteed: its children are guaranteed " +
                               QuotaAmount(flavor, sum) + ", more than its " +
                               QuotaAmount(flavor, quota.guaranteed_milli));
      // (Only against a guarantee it sets: one that is its children's sum moves as children
      // come and go, and a limit above it just lends all of it.)
      const int64_t g = guaranteed(i, flavor);
      if (!quota.guaranteed_unset && quota.lending_limit_milli && *quota.lending_limit_milli > g)
        return InvalidArgument(qa + ".lendingLimit: above the guarantee (" +
                               QuotaAmount(flavor, *quota.lending_limit_milli) + " > " +
                               QuotaAmount(flavor, g) + ")");
    }
  }
  if (config.usage_half_life_s < 0) return InvalidArgument("usageHalfLife: below zero");
  if (config.history_weight < 0 || config.history_weight > 1)
    return InvalidArgument("historyWeight: must be between 0 and 1");
  if (config.gang_timeout_s <= 0) return InvalidArgument("gangTimeout: must be positive");
  return Status();
}

Admitter::Admitter(const Fleet& fleet, std::vector<Tenant> tenants, AdmissionConfig config,
                   const Policy& policy, uint64_t seed)
    : fleet_(fleet),
      config_(std::move(config)),
      policy_(policy),
      placer_(policy),
      state_(fleet, tenants),
      rng_(seed) {}

Result<std::unique_ptr<Admitter>> Admitter::Create(const Fleet& fleet, std::vector<Tenant> tenants,
                                                   AdmissionConfig config, const Policy& policy,
                                                   uint64_t seed) {
  RETURN_IF_ERROR(ValidateAdmissionConfig(config));
  std::unique_ptr<Admitter> a(
      new Admitter(fleet, std::move(tenants), std::move(config), policy, seed));
  RETURN_IF_ERROR(a->Build());
  return a;
}

Status Admitter::Build() {
  flavors_ = config_.flavors;
  if (flavors_.empty()) flavors_.push_back(FlavorSpec{"gpu", std::nullopt, {}, {}});
  const int nf = static_cast<int>(flavors_.size());
  for (const FlavorSpec& f : flavors_) {
    uint64_t mask = 0;
    if (f.models.empty()) {
      mask = ~uint64_t{0};
    } else {
      for (const std::string& m : f.models) {
        int i = state_.ModelIndex(m);
        if (i >= 0 && i < 64) mask |= uint64_t{1} << i;
      }
    }
    flavor_models_.push_back(mask);
  }
  std::map<std::string, int> flavor_index;
  for (int f = 0; f < nf; ++f) flavor_index[flavors_[f].name] = f;
  managed_.assign(nf, false);

  // Trees that lend to each other hang under the fleet's node (last, so that the queues keep
  // their indices).
  if (config_.lend_across_trees) {
    int trees = 0;
    for (const QueueSpec& spec : config_.queues) trees += spec.parent.empty();
    if (trees > 1) {
      for (QueueSpec& spec : config_.queues)
        if (spec.parent.empty()) spec.parent = kFleetQueue;
      config_.queues.push_back(QueueSpec{.name = kFleetQueue});
      fleet_queue_ = static_cast<int>(config_.queues.size()) - 1;
    }
  }
  for (const QueueSpec& spec : config_.queues) {
    queue_index_[spec.name] = static_cast<int>(queues_.size());
    QueueNode q;
    q.spec = spec;
    q.guaranteed.assign(nf, 0);
    q.borrow_limit.assign(nf, std::nullopt);
    q.lend_limit.assign(nf, std::nullopt);
    q.usage.assign(nf, 0);
    q.np_usage.assign(nf, 0);
    q.evicting_usage.assign(nf, 0);
    q.evicting_below.assign(nf, 0);
    q.leaving_usage.assign(nf, 0);
    q.promised.assign(nf, 0);
    q.leaving_below.assign(nf, 0);
    q.promised_below.assign(nf, 0);
    q.reserved.assign(nf, 0);
    q.reclaim_room.assign(nf, 0);
    for (const std::string& name : spec.flavor_order) q.flavor_order.push_back(flavor_index[name]);
    queues_.push_back(std::move(q));
  }
  for (int i = 0; i < static_cast<int>(queues_.size()); ++i) {
    QueueNode& q = queues_[i];
    if (q.spec.parent.empty()) {
      roots_.push_back(i);
    } else {
      q.parent = queue_index_.at(q.spec.parent);
      queues_[q.parent].children.push_back(i);
    }
  }
  // A stopped queue stops its subtree; the strongest policy on the way up wins.
  for (int i = 0; i < static_cast<int>(queues_.size()); ++i)
    for (int p = i; p >= 0; p = queues_[p].parent)
      if (queues_[p].spec.stop_policy > queues_[i].stop) {
        queues_[i].stop = queues_[p].spec.stop_policy;
        queues_[i].stopped_by = p;
      }
  // Guarantees: a queue's own, or for an inner queue without one the sum of its children's.
  // Children before parents: order by depth, deepest first.
  std::vector<std::pair<int, int>> by_depth;
  for (int i = 0; i < static_cast<int>(queues_.size()); ++i) {
    int d = 0;
    for (int p = queues_[i].parent; p >= 0; p = queues_[p].parent) ++d;
    by_depth.push_back({-d, i});
  }
  std::sort(by_depth.begin(), by_depth.end());
  for (auto [neg_depth, i] : by_depth) {
    QueueNode& q = queues_[i];
    for (int f = 0; f < nf; ++f) {
      auto it = q.spec.quotas.find(flavors_[f].name);
      if (it != q.spec.quotas.end()) {
        managed_[f] = true;
        q.borrow_limit[f] = it->second.borrowing_limit_milli;
        q.lend_limit[f] = it->second.lending_limit_milli;
      }
      if (it != q.spec.quotas.end() && !it->second.guaranteed_unset) {
        q.guaranteed[f] = it->second.guaranteed_milli;
      } else {
        for (int c : q.children) q.guaranteed[f] += queues_[c].guaranteed[f];
      }
    }
  }
  BuildChargeTables();
  // The fleet is guaranteed its GPUs (or what its trees are, where that is more): what no tree
  // is guaranteed is lent too. (As requests are charged: a flavour no quota names leaves its
  // GPUs to those that limit them.)
  {
    const std::vector<int> gpus = FlavorGpus(/*charged=*/true);
    for (int f = 0; f < nf; ++f) in_service_milli_.push_back(int64_t{gpus[f]} * kMilliPerGpu);
    shared_milli_.assign(nf, std::vector<int64_t>(nf, 0));
    // (GPUs not in MIG mode only: a MIG GPU's slices are a fixed partition, no slice of one
    // flavour's ever another's, a review found.)
    for (int n = 0; n < state_.node_count(); ++n)
      for (int d = 0; d < static_cast<int>(fleet_.nodes[n].devices.size()); ++d) {
        if (fleet_.nodes[n].devices[d].mig_enabled()) continue;
        const std::set<int> takes = DeviceFlavors(n, d, /*charged=*/true);
        for (int f : takes)
          for (int g : takes)
            if (f != g) shared_milli_[f][g] += kMilliPerGpu;
      }
    UpdateElsewhere();
  }
  if (fleet_queue_ >= 0) {
    trees_guaranteed_ = queues_[fleet_queue_].guaranteed;
    for (int f = 0; f < nf; ++f)
      queues_[fleet_queue_].guaranteed[f] = std::max(trees_guaranteed_[f], in_service_milli_[f]);
  }
  for (auto [neg_depth, i] : by_depth) {
    QueueNode& q = queues_[i];
    for (int r = 0; r < 2; ++r) {
      auto it = q.spec.quotas.find(ResourceName(r));
      if (it != q.spec.quotas.end()) {
        queues_[TreeRoot(i)].res_limited[r] = true;
        q.res_borrow[r] = it->second.borrowing_limit_milli;
        q.res_lend[r] = it->second.lending_limit_milli;
      }
      if (it != q.spec.quotas.end() && !it->second.guaranteed_unset) {
        q.res_guaranteed[r] = it->second.guaranteed_milli;
      } else {
        for (int c : q.children) q.res_guaranteed[r] += queues_[c].res_guaranteed[r];
      }
    }
  }
  RebuildKeepers(0);
  // A tree limits CPU or memory where one of its queues names it (other trees do not).
  for (int i = 0; i < static_cast<int>(queues_.size()); ++i) {
    const int root = TreeRoot(i);
    queues_[i].root = root;
    // A queue without a flavorOrder of its own follows its nearest ancestor's.
    for (int a = queues_[i].parent; a >= 0 && queues_[i].flavor_order.empty();
         a = queues_[a].parent)
      queues_[i].flavor_order = queues_[a].flavor_order;
    // Nor a queueingStrategy, preemption or flavorFungibility (each ancestor's own, as set).
    QueueSpec& own = queues_[i].spec;
    for (int a = queues_[i].parent; a >= 0; a = queues_[a].parent) {
      const QueueSpec& up = queues_[a].spec;
      const unsigned takes = up.sets & ~own.sets;
      if (takes & QueueSpec::kSetsStrategy) own.strict_fifo = up.strict_fifo;
      if (takes & QueueSpec::kSetsPreemption) own.preemption = up.preemption;
      if (takes & QueueSpec::kSetsFungibility) own.when_can_borrow = up.when_can_borrow;
      own.sets |= takes;
    }
    for (int r = 0; r < 2; ++r) queues_[i].res_limited[r] = queues_[root].res_limited[r];
    queues_[i].reclaim_min_runtime = config_.reclaim_min_runtime_s;
    for (int a = i; a >= 0; a = queues_[a].parent)
      if (queues_[a].spec.reclaim_min_runtime_s >= 0) {
        queues_[i].reclaim_min_runtime = queues_[a].spec.reclaim_min_runtime_s;
        break;
      }
    queues_[i].preempt_min_runtime = 0;
    for (int a = i; a >= 0; a = queues_[a].parent)
      if (queues_[a].spec.preempt_min_runtime_s >= 0) {
        queues_[i].preempt_min_runtime = queues_[a].spec.preempt_min_runtime_s;
        break;
      }
  }
  cap_gpu_ = std::max<int64_t>(1, state_.total_gpu_milli());
  int64_t cpu = 0, memory = 0;
  for (const Node& n : fleet_.nodes) {
    cpu += n.cpu.value();
    memory += n.memory.value();
  }
  cap_cpu_ = std::max<int64_t>(1, cpu);
  cap_memory_ = std::max<int64_t>(1, memory);
  node_workloads_.assign(state_.node_count(), {});
  no_eviction_.assign(state_.node_count(), false);
  return Status();
}

void Admitter::NoteTaken(TakenMap& taken, int leaf, int f, int64_t milli) const {
  for (int q = leaf; q >= 0; q = queues_[q].parent) taken[{q, f}] += milli;
}

void Admitter::NoteTakenResources(TakenMap& taken, int leaf, int64_t cpu_milli,
                                  int64_t memory_mib) const {
  for (int q = leaf; q >= 0; q = queues_[q].parent) {
    taken[{q, kTakenResource}] += cpu_milli;
    taken[{q, kTakenResource + 1}] += memory_mib;
  }
}

bool Admitter::Under(int q, int a) const {
  for (; q >= 0; q = queues_[q].parent)
    if (q == a) return true;
  return false;
}

bool Admitter::BranchLends(int preemptor, int victim, int f, int64_t milli,
                           const std::function<int64_t(int, int)>& taken) const {
  const auto shared = [&](int q) { return Under(preemptor, q); };
  for (int q = queues_[victim].parent; q >= 0 && !shared(q); q = queues_[q].parent) {
    const QueueNode& n = queues_[q];
    const int64_t held = n.usage[f] - n.evicting_below[f] - taken(q, f);
    if (held - milli < n.guaranteed[f] && (milli <= n.guaranteed[f] || held <= n.guaranteed[f]))
      return false;
  }
  return true;
}

bool Admitter::BranchLendsResource(int preemptor, int victim, int r, int64_t amount,
                                   const std::function<int64_t(int, int)>& taken) const {
  const auto shared = [&](int q) { return Under(preemptor, q); };
  for (int q = queues_[victim].parent; q >= 0 && !shared(q); q = queues_[q].parent) {
    const QueueNode& n = queues_[q];
    const int64_t held =
        (r == 0 ? n.cpu : n.memory) - n.res_evicting_below[r] - taken(q, kTakenResource + r);
    if (held - amount < n.res_guaranteed[r]) return false;
  }
  return true;
}

int Admitter::VictimTier(int preemptor_leaf, int w_leaf) const {
  if (w_leaf != preemptor_leaf && queues_[w_leaf].spec.best_effort) return -1;
  for (int shared = w_leaf; shared >= 0; shared = queues_[shared].parent) {
    bool on_path = false;
    for (int p = preemptor_leaf; p >= 0 && !on_path; p = queues_[p].parent) on_path = p == shared;
    if (!on_path) continue;
    int depth = 1;  // (1: the top; 0: they share none)
    for (int a = queues_[shared].parent; a >= 0; a = queues_[a].parent) ++depth;
    return depth;
  }
  return 0;
}

bool Admitter::FairShareKeeps(int preemptor, int victim, const FairClaim& claim, int64_t gpu,
                              int64_t cpu, int64_t memory_mib,
                              const std::vector<std::pair<int, int64_t>>& by_flavour,
                              const std::function<int64_t(int, int)>& taken) const {
  const QueueNode& vq = queues_[victim];
  for (auto [f, milli] : by_flavour)
    if (managed_[f] &&
        (vq.usage[f] - vq.evicting_usage[f] - taken(victim, f) - milli < vq.guaranteed[f] ||
         !BranchLends(preemptor, victim, f, milli, taken)))
      return false;
  // What the victim's branch keeps: its leaves' usage, less what is being evicted or taken.
  const auto [mine, theirs] = Branches(preemptor, victim);
  int64_t held_gpu = -gpu, held_cpu = -cpu, held_memory = -memory_mib;
  const auto keeps = [&](int l) {
    const QueueNode& lq = queues_[l];
    held_gpu += lq.gpu - lq.evicting_gpu - taken(l, kTakenGpu);
    held_cpu += lq.cpu - lq.res_evicting[0] - taken(l, kTakenResource);
    held_memory += lq.memory - lq.res_evicting[1] - taken(l, kTakenResource + 1);
  };
  // (Its leaves: the victim alone where the two are siblings, the common case.)
  if (theirs == victim) {
    keeps(victim);
  } else {
    for (int l = 0; l < queue_count(); ++l)
      if (is_leaf(l) && Under(l, theirs)) keeps(l);
  }
  // (The preemptor's share is its queue's as claimed, or its branch's with the claim added.)
  const QueueNode& pq = queues_[mine];
  const double share = mine == preemptor
                           ? claim.share
                           : Weighted(mine, DominantShare(pq.gpu + claim.gpu, pq.cpu + claim.cpu,
                                                          pq.memory + claim.memory));
  return FairShareYields(mine, theirs, share,
                         Weighted(theirs, DominantShare(held_gpu, held_cpu, held_memory)),
                         /*strictly=*/false);
}

double Admitter::Weighted(int q, double share) const {
  const double w = queues_[q].spec.weight;
  return w > 0 ? share / w : std::numeric_limits<double>::infinity();
}

std::pair<int, int> Admitter::Branches(int a, int b) const {
  std::vector<int> up_a, up_b;  // leaf first, root last
  for (int q = a; q >= 0; q = queues_[q].parent) up_a.push_back(q);
  for (int q = b; q >= 0; q = queues_[q].parent) up_b.push_back(q);
  // (Below the last queue both paths share: each side's branch; roots are siblings.)
  size_t i = up_a.size(), j = up_b.size();
  while (i > 0 && j > 0 && up_a[i - 1] == up_b[j - 1]) --i, --j;
  if (i == 0 || j == 0) return {a, b};
  return {up_a[i - 1], up_b[j - 1]};
}

int Admitter::OverQuotaOrder(int a, int b) const {
  const auto [x, y] = Branches(a, b);
  const int px = queues_[x].spec.priority, py = queues_[y].spec.priority;
  return x == y ? 0 : px > py ? 1 : px < py ? -1 : 0;
}

std::string Admitter::FairShareWhy(int leaf, const std::vector<int>& victims) const {
  const std::string why = "for queue " + queues_[leaf].spec.name + "'s fair share";
  for (int v : victims) {
    const auto [mine, theirs] = Branches(leaf, entries_[v].leaf);
    if (mine == theirs || queues_[mine].spec.priority <= queues_[theirs].spec.priority) continue;
    return why + " (over-quota priority: queue " + queues_[mine].spec.name + "'s " +
           std::to_string(queues_[mine].spec.priority) + " is above queue " +
           queues_[theirs].spec.name + "'s " + std::to_string(queues_[theirs].spec.priority) +
           ", whatever their shares)";
  }
  return why;
}

bool Admitter::FairShareAbove(int leaf, int q) const {
  const auto [mine, theirs] = Branches(leaf, q);
  return FairShareYields(mine, theirs, Weighted(mine, dominant_share(mine)),
                         Weighted(theirs, dominant_share(theirs)), /*strictly=*/true);
}

bool Admitter::FairShareYields(int mine, int q, double my_share, double q_share,
                               bool strictly) const {
  if (const int order = OverQuotaOrder(mine, q); order != 0) return order > 0;
  // (A queue of weight 0 has no share to preempt for: only what its siblings leave.)
  if (!(queues_[mine].spec.weight > 0)) return false;
  return strictly ? q_share > my_share : q_share >= my_share - 1e-12;
}

int Admitter::TreeRoot(int q) const {
  while (queues_[q].parent >= 0 && queues_[q].parent != fleet_queue_) q = queues_[q].parent;
  return q;
}

std::string Admitter::QueueLabel(int q) const {
  return q == fleet_queue_ ? "the fleet" : "queue " + queues_[q].spec.name;
}

int Admitter::QueueIndex(const std::string& name) const {
  auto it = queue_index_.find(name);
  return it == queue_index_.end() ? -1 : it->second;
}

int64_t Admitter::usage_milli(int q) const { return queues_[q].gpu; }

int64_t Admitter::guaranteed_milli(int q) const {
  int64_t g = 0;
  for (int64_t v : queues_[q].guaranteed) g += v;
  return g;
}

double Admitter::DominantShare(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib) const {
  return std::max({static_cast<double>(gpu_milli) / static_cast<double>(cap_gpu_),
                   static_cast<double>(cpu_milli) / static_cast<double>(cap_cpu_),
                   static_cast<double>(memory_mib) / static_cast<double>(cap_memory_)});
}

double Admitter::dominant_share(int q) const {
  return DominantShare(queues_[q].gpu, queues_[q].cpu, queues_[q].memory);
}

int Admitter::pending_count(int q) const {
  int n = static_cast<int>(queues_[q].pending.size() + queues_[q].parked.size()) +
          queues_[q].infeasible;
  for (int c : queues_[q].children) n += pending_count(c);
  return n;
}

std::string Admitter::FairShareNote(int id) const {
  const Entry& e = entries_[id];
  if (e.phase != Phase::kPending || e.leaf < 0 ||
      e.reason.find(" to lend to the queues below it") == std::string::npos)
    return "";
  if (queues_[e.leaf].spec.best_effort) return "";
  // Whose siblings go first: the leaf's, and those of every queue above it (a trial's only
  // leaf of a department waited behind a department of higher priority, told nothing of it).
  // Over-quota priorities or a weight of 0 are said where some level has them.
  std::vector<std::string> beside;
  bool ranked = false, unweighted = false;
  for (int q = e.leaf; queues_[q].parent >= 0; q = queues_[q].parent) {
    const std::vector<int>& siblings = queues_[queues_[q].parent].children;
    if (siblings.size() < 2) continue;
    beside.push_back(q == e.leaf ? "its siblings" : queues_[q].spec.name + "'s siblings");
    for (int c : siblings) {
      ranked |= queues_[c].spec.priority != queues_[q].spec.priority;
      unweighted |= !(queues_[c].spec.weight > 0);
    }
  }
  if (beside.empty()) return "";
  std::string whose = "its siblings' work";
  if (beside.size() > 1 || beside[0] != "its siblings") {
    whose = "the work of " + beside[0];
    for (size_t i = 1; i < beside.size(); ++i) whose += " and of " + beside[i];
  }
  // The rule, not the order now: the order moves with usage history every cycle, and a message
  // that changed would be written every cycle (a review of a first version that named it).
  return "; as room frees, " + whose +
         " goes first where it fits within their queues' guarantees, then " +
         (ranked ? "by over-quota priority, highest first, then " : "") +
         (unweighted ? "queues with a weight before those of weight 0, then " : "") +
         "by weighted share, lowest first (fabctl describe queue shows each one's)" +
         (config_.fair_share_preemption
              ? "; fair-share preemption moves running work for it only from what another queue "
                "borrows past its guarantee, and only while that queue's current share (its "
                "dominant share now over its weight: usage history orders admission, not "
                "preemption) would stay at or above its own" +
                    std::string(ranked ? " (a branch of lower over-quota priority gives way "
                                         "whatever its share; one of higher priority never does)"
                                       : "")
          : queues_[e.leaf].spec.preemption.borrow_within_cohort ==
                  PreemptionPolicy::Borrow::kLowerPriority
              ? "; fair-share preemption is off: running work is not moved for its share "
                "(preemption.borrowWithinCohort still takes lower-priority work that other "
                "queues borrow with)"
              : "; fair-share preemption is off: running work is not moved for it");
}

// A request is charged, per model, to a flavour that names its kind when one matches it there,
// else to one that names no kind: MIG slices then never use a whole-GPU flavour's quota, and a
// kind-named flavour for some models leaves the others to the kind-less flavours. With
// `managed_only`, a flavour no queue has a quota in takes nothing (its GPUs stay with the
// flavours that limit them).
int Admitter::SelectFlavor(DeviceKind kind, int profile, int model, bool managed_only) const {
  if (kind == DeviceKind::kNone) return -1;
  int kindless = -1;
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f) {
    const FlavorSpec& fl = flavors_[f];
    if (managed_only && !managed_[f]) continue;
    if (fl.kind && *fl.kind != kind) continue;
    if (!fl.models.empty() && (model < 0 || model >= 64 || !(flavor_models_[f] >> model & 1)))
      continue;
    if (!fl.mig_profiles.empty() && (kind != DeviceKind::kMig || profile < 0 ||
                                     !Contains(fl.mig_profiles, state_.mig_profile_name(profile))))
      continue;
    if (fl.kind) return f;
    if (kindless < 0) kindless = f;
  }
  return kindless;
}

int Admitter::ChargeRow(const PodRequest& req) const {
  switch (req.kind) {
    case DeviceKind::kWhole:
      return 0;
    case DeviceKind::kFraction:
      return 1;
    case DeviceKind::kMig:
      return req.mig_profile >= 0 && req.mig_profile < state_.mig_profile_count()
                 ? 2 + req.mig_profile
                 : -1;
    case DeviceKind::kNone:
      break;
  }
  return -1;
}

void Admitter::BuildChargeTables() {
  const int models = std::min(static_cast<int>(state_.models().size()), 64);
  const int rows = 2 + state_.mig_profile_count();
  charge_of_.assign(rows, std::vector<int>(models + 1, -1));
  charge_models_.assign(rows, std::vector<uint64_t>(flavors_.size(), 0));
  for (int row = 0; row < rows; ++row) {
    const DeviceKind kind = row == 0   ? DeviceKind::kWhole
                            : row == 1 ? DeviceKind::kFraction
                                       : DeviceKind::kMig;
    const int profile = row >= 2 ? row - 2 : -1;
    for (int m = 0; m <= models; ++m) {
      // The last slot: a model outside the table (unknown to the fleet, or index 64 and up).
      const int f = SelectFlavor(kind, profile, m < models ? m : -1, true);
      charge_of_[row][m] = f;
      if (f >= 0 && m < models) charge_models_[row][f] |= uint64_t{1} << m;
    }
  }
}

int Admitter::FlavorOf(const PodRequest& req, int model) const {
  const int row = ChargeRow(req);
  if (row < 0) return SelectFlavor(req.kind, req.mig_profile, model, true);
  const std::vector<int>& by_model = charge_of_[row];
  const int slot = model >= 0 && model < static_cast<int>(by_model.size()) - 1
                       ? model
                       : static_cast<int>(by_model.size()) - 1;
  return by_model[slot];
}

// The models on which `req` would be charged to flavour f: those FlavorOf gives f for, so that
// a flavour whose quota allows the request never opens models another flavour is charged for.
uint64_t Admitter::FlavorModels(int f, const PodRequest& req) const {
  const int row = ChargeRow(req);
  if (row >= 0) return charge_models_[row][f] & req.model_mask;
  uint64_t out = 0;
  const int known = std::min(static_cast<int>(state_.models().size()), 64);
  for (int m = 0; m < known; ++m)
    if ((req.model_mask >> m & 1) && FlavorOf(req, m) == f) out |= uint64_t{1} << m;
  return out;
}

uint64_t Admitter::OrderModels(int f, const PodRequest& req) const {
  uint64_t out = 0;
  const int known = std::min(static_cast<int>(state_.models().size()), 64);
  for (int m = 0; m < known; ++m)
    if ((req.model_mask >> m & 1) && SelectFlavor(req.kind, req.mig_profile, m, false) == f)
      out |= uint64_t{1} << m;
  return out;
}

std::vector<uint64_t> Admitter::PreferenceTiers(const Entry& e, const PodRequest& gpu_pod,
                                                uint64_t allowed) const {
  const QueueNode& q = queues_[e.leaf];
  // flavorOrder: each listed flavour's models in turn (a flavour's own, whether or not a
  // quota names it), then the models none of them takes.
  std::vector<uint64_t> ordered;
  uint64_t covered = 0;
  for (int f : q.flavor_order) {
    const uint64_t models = OrderModels(f, gpu_pod) & allowed & ~covered;
    if (models == 0) continue;
    ordered.push_back(models);
    covered |= models;
  }
  if (!ordered.empty() && covered != allowed) ordered.push_back(allowed & ~covered);
  std::vector<uint64_t> tiers;
  // flavorFungibility.whenCanBorrow: TryNextFlavor — the models where its queue stays within
  // its guarantee (or that no flavour limits) first, in that order.
  if (q.spec.when_can_borrow == QueueSpec::WhenCanBorrow::kTryNextFlavor &&
      !CandidateFlavors(gpu_pod).empty()) {
    uint64_t within = UnchargedModels(gpu_pod);
    for (int f : CandidateFlavors(gpu_pod))
      if (WithinGuarantee(e.leaf, f, e.gpu_milli)) within |= FlavorModels(f, gpu_pod) & allowed;
    if (ordered.empty() && within != 0 && within != allowed) tiers.push_back(within);
    for (uint64_t models : ordered)
      if ((models & within) != 0) tiers.push_back(models & within);
  }
  // Borrow without an order: the models of the flavours its queue is guaranteed (and those no
  // flavour limits) first, as a Kueue ClusterQueue lists its own flavours before those it
  // borrows, then every allowed model. (A trial: a queue guaranteed only H200s borrowed all of
  // its sibling's H100s while its own idled, the sibling's work then borrowed its H200s, and
  // one 2-GPU job reclaimed across both, five evictions in all.)
  if (q.spec.when_can_borrow == QueueSpec::WhenCanBorrow::kBorrow && ordered.empty()) {
    uint64_t own = 0;
    for (int f : CandidateFlavors(gpu_pod))
      if (managed_[f] && q.guaranteed[f] > 0) own |= FlavorModels(f, gpu_pod) & allowed;
    if (own != 0) own |= UnchargedModels(gpu_pod) & allowed;
    if (own != 0 && own != allowed) tiers.push_back(own);
  }
  for (uint64_t models : ordered)
    if (std::find(tiers.begin(), tiers.end(), models) == tiers.end()) tiers.push_back(models);
  // (Every model allowed is the usual attempt's.)
  tiers.erase(std::find(tiers.begin(), tiers.end(), allowed), tiers.end());
  return tiers;
}

bool Admitter::TrialPlace(const Entry& e, std::vector<PodRequest>* pods, uint64_t allowed,
                          std::vector<Assignment>* assign) {
  for (PodRequest& p : *pods)
    if (p.kind != DeviceKind::kNone) p.model_mask &= allowed;
  const PodRequest* gpu_pod = FirstGpuPod(*pods);
  const std::vector<uint64_t> tiers =
      gpu_pod ? PreferenceTiers(e, *gpu_pod, allowed) : std::vector<uint64_t>{};
  placer_.set_explain(false);
  if (!PlacePreferred(e, *pods, tiers, assign)) return false;
  for (size_t k = assign->size(); k-- > 0;) state_.Release((*assign)[k], (*pods)[k]);
  return true;
}

bool Admitter::PlacePreferred(const Entry& e, std::vector<PodRequest>& pods,
                              const std::vector<uint64_t>& tiers, std::vector<Assignment>* assign) {
  for (uint64_t models : tiers) {
    std::vector<PodRequest> tier = pods;
    for (PodRequest& p : tier)
      if (p.kind != DeviceKind::kNone) p.model_mask &= models;
    if (!PlaceAll(e, tier, assign, nullptr)) continue;
    pods = std::move(tier);
    return true;
  }
  return PlaceAll(e, pods, assign, nullptr);
}

uint64_t Admitter::UnchargedModels(const PodRequest& req) const {
  if (req.kind == DeviceKind::kNone) return 0;
  const size_t known = std::min<size_t>(state_.models().size(), 64);
  const uint64_t fleet_models = known >= 64 ? ~uint64_t{0} : (uint64_t{1} << known) - 1;
  uint64_t charged = 0;
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f) charged |= FlavorModels(f, req);
  return req.model_mask & fleet_models & ~charged;
}

std::set<int> Admitter::DeviceFlavors(int n, int d, bool charged) const {
  const int model = state_.node_model(n);
  const Device& dev = fleet_.nodes[n].devices[d];
  std::set<int> takes;
  if (!dev.mig_enabled()) {
    takes.insert(SelectFlavor(DeviceKind::kWhole, -1, model, charged));
    takes.insert(SelectFlavor(DeviceKind::kFraction, -1, model, charged));
  } else {
    for (int s = 0; s < static_cast<int>(dev.mig_slices.size()); ++s)
      takes.insert(
          SelectFlavor(DeviceKind::kMig, state_.mig_slice_profile(n, d, s), model, charged));
  }
  takes.erase(-1);
  return takes;
}

std::vector<int> Admitter::FlavorGpus(bool charged) const {
  std::vector<int> gpus(flavors_.size(), 0);
  for (int n = 0; n < state_.node_count(); ++n)
    for (int d = 0; d < static_cast<int>(fleet_.nodes[n].devices.size()); ++d)
      for (int f : DeviceFlavors(n, d, charged)) ++gpus[f];  // once per flavour
  return gpus;
}

void Admitter::TakeOutOfService(int n, const std::vector<int>& devices) {
  std::vector<int> all;
  for (int d = 0; d < static_cast<int>(fleet_.nodes[n].devices.size()); ++d) all.push_back(d);
  int64_t free_gpu = 0;
  for (int d : devices.empty() ? all : devices) {
    // (Each device once, whatever the caller repeats.)
    if (d < 0 || d >= static_cast<int>(all.size()) || !out_of_service_.insert({n, d}).second)
      continue;
    const DeviceState& dev = state_.devices(n)[d];
    // A MIG device's free share: the whole GPU but its taken slices' compute, of 7, as quotas
    // charge them.
    const Device& spec = fleet_.nodes[n].devices[d];
    int64_t free = spec.mig_slices.empty() ? dev.free_milli : kMilliPerGpu;
    for (size_t sl = 0; sl < spec.mig_slices.size(); ++sl)
      if (!(dev.mig_free >> sl & 1))
        if (const MigProfile* mp = FindMigProfile(spec.model, spec.mig_slices[sl], spec.memory))
          free -= MigSliceMilli(mp->compute_slices);
    free = std::max<int64_t>(free, 0);
    free_gpu += free;
    const std::set<int> takes = DeviceFlavors(n, d, /*charged=*/true);
    if (!spec.mig_enabled())
      for (int f : takes)
        for (int g : takes)
          if (f != g) shared_milli_[f][g] -= free;
    for (int f : takes) {
      in_service_milli_[f] -= free;
      if (fleet_queue_ >= 0)
        queues_[fleet_queue_].guaranteed[f] = std::max(trees_guaranteed_[f], in_service_milli_[f]);
    }
  }
  UpdateElsewhere();
  cap_gpu_ = std::max<int64_t>(1, cap_gpu_ - free_gpu);
  if (devices.empty() && out_of_service_.insert({n, -1}).second) {
    cap_cpu_ = std::max<int64_t>(1, cap_cpu_ - state_.free_cpu(n));
    cap_memory_ = std::max<int64_t>(1, cap_memory_ - state_.free_memory(n));
  }
}

std::vector<Admitter::CapacityWarning> Admitter::CapacityWarnings() const {
  std::vector<CapacityWarning> out;
  // (No GPUs at all: no node has registered yet, nothing to compare with.)
  if (state_.total_gpu_milli() == 0) return out;
  // (As requests are charged: a flavour no quota names leaves its GPUs to those that limit
  // them; a trial's catch-all, guaranteed 6 of 8 H100s, read "past the fleet's 0" because a
  // stored h100 flavour no queue named would have taken them.)
  const std::vector<int> gpus = FlavorGpus(/*charged=*/true);
  // (Of those, the GPUs a whole-GPU request is charged to the flavour on: not in MIG mode,
  // and not of a model another flavour takes whole — a trial's catch-all lost its H200s to an
  // `h200` flavour of whole GPUs, unwarned, as fractions of them were still its own.)
  std::vector<int64_t> whole(flavors_.size(), 0);
  for (int n = 0; n < state_.node_count(); ++n)
    for (int d = 0; d < static_cast<int>(fleet_.nodes[n].devices.size()); ++d)
      if (!fleet_.nodes[n].devices[d].mig_enabled())
        if (const int f = SelectFlavor(DeviceKind::kWhole, -1, state_.node_model(n), true); f >= 0)
          whole[f] += kMilliPerGpu;
  // (And what the MIG slices charged to each flavour hold, by their compute slices out of 7,
  // with how many of each profile: a flavour of slices alone holds no more.)
  // (Compute slices of 7 summed, then counted in GPUs: seven 1g slices are one GPU, not 994m.)
  std::vector<int64_t> sliced(flavors_.size(), 0);
  std::vector<std::map<std::string, int>> slice_counts(flavors_.size());
  for (int n = 0; n < state_.node_count(); ++n)
    for (const Device& d : fleet_.nodes[n].devices)
      for (const std::string& slice : d.mig_slices)
        if (const MigProfile* mp = FindMigProfile(d.model, slice, d.memory))
          if (const int f = SelectFlavor(DeviceKind::kMig, state_.MigProfileIndex(slice),
                                         state_.node_model(n), true);
              f >= 0) {
            sliced[f] += mp->compute_slices;
            ++slice_counts[f][slice];
          }
  for (int64_t& compute : sliced) compute = compute * kMilliPerGpu / 7;
  for (int f = 0; f < flavor_count(); ++f) {
    if (!managed_[f]) continue;
    int64_t sum = 0;
    for (int q = 0; q < queue_count(); ++q)
      if (q != fleet_queue_ && TreeRoot(q) == q) sum += queues_[q].guaranteed[f];
    const int64_t have = int64_t{gpus[f]} * kMilliPerGpu;
    std::string warning;
    if (sum > sliced[f] && sum <= have && flavors_[f].kind &&
        *flavors_[f].kind == DeviceKind::kMig) {
      // (A trial guaranteed 3 GPUs of a flavour of 3g.40gb slices, seven of them: 3 GPUs.)
      std::string counts;
      for (const auto& [slice, n] : slice_counts[f])
        counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " x " + slice;
      warning = "the queue trees' guarantees of " + flavor_name(f) + " add up to " +
                GpuAmount(sum) + " GPUs, past the " + GpuAmount(sliced[f]) +
                " its MIG slices hold (" + (counts.empty() ? "none" : counts) +
                ", each its compute slices out of 7): they cannot all be met at once";
    } else if (sum > have) {
      warning = "the queue trees' guarantees of " + flavor_name(f) + " add up to " +
                GpuAmount(sum) + " GPUs, past the fleet's " + GpuAmount(have) +
                ": they cannot all be met at once";
    } else if (sum > whole[f] && (!flavors_[f].kind || *flavors_[f].kind == DeviceKind::kWhole)) {
      // (Not for a flavour of MIG slices or fractions: whole-GPU work is never charged to it.)
      warning = "the queue trees' guarantees of " + flavor_name(f) + " add up to " +
                GpuAmount(sum) + " GPUs, past the fleet's " + GpuAmount(whole[f]) +
                " that whole-GPU work is charged to " + flavor_name(f) + " on (the other " +
                GpuAmount(have - whole[f]) + " take only its MIG slices or fractions): whole-GPU " +
                "work cannot have them all at once";
    } else {
      continue;
    }
    out.push_back({f, sum, std::move(warning)});
  }
  // All flavours together: one GPU may be in the reach of several (a fraction of an H200 is
  // the catch-all's, a whole one its model's), but it meets one guarantee at a time.
  {
    int64_t sum = 0;
    int flavours = 0;  // (one alone: its own warning says it)
    for (int f = 0; f < flavor_count(); ++f) {
      bool any = false;
      for (int q = 0; q < queue_count() && managed_[f]; ++q)
        if (q != fleet_queue_ && TreeRoot(q) == q && queues_[q].guaranteed[f] > 0) {
          sum += queues_[q].guaranteed[f];
          any = true;
        }
      flavours += any;
    }
    int64_t devices = 0;
    for (const Node& n : fleet_.nodes) devices += static_cast<int64_t>(n.devices.size());
    if (flavours > 1 && sum > devices * kMilliPerGpu)
      out.push_back({-1, sum,
                     "the queue trees' guarantees of all GPU flavours add up to " + GpuAmount(sum) +
                         " GPUs, past the fleet's " + GpuAmount(devices * kMilliPerGpu) +
                         ": they cannot all be met at once"});
  }
  return out;
}

std::map<int, std::string> Admitter::GuaranteeWarnings() const {
  std::map<int, std::string> out;
  // The fleet's: on every root guaranteed some of the flavour (any flavour, for -1).
  for (const auto& [f, sum, warning] : CapacityWarnings())
    for (int q = 0; q < queue_count(); ++q) {
      if (q == fleet_queue_ || TreeRoot(q) != q) continue;
      bool guaranteed = false;
      for (int g = 0; g < flavor_count(); ++g)
        guaranteed |= (f < 0 ? managed_[g] : g == f) && queues_[q].guaranteed[g] > 0;
      if (guaranteed) out[q] += (out[q].empty() ? "" : "; ") + warning;
    }
  // GPUs out of service (a node cordoned, draining, in repair or not ready; a GPU the health
  // controller cordoned) that the trees' guarantees need: said on every root guaranteed some
  // (a trial's queue, its work evicted from a node in repair, was told nothing). Whole GPUs, by
  // the flavour whole-GPU work is charged to on them; the fleet's own warning, where the
  // guarantees pass every GPU, says more.
  {
    std::vector<int64_t> down(flavors_.size(), 0);
    std::vector<std::set<int>> nodes(flavors_.size());
    for (const auto& [n, d] : out_of_service_) {
      if (d < 0 || fleet_.nodes[n].devices[d].mig_enabled()) continue;
      const int f = SelectFlavor(DeviceKind::kWhole, -1, state_.node_model(n), true);
      if (f < 0) continue;
      down[f] += kMilliPerGpu;
      nodes[f].insert(n);
    }
    const std::vector<int> gpus = FlavorGpus(/*charged=*/true);
    for (int f = 0; f < flavor_count(); ++f) {
      if (!managed_[f] || down[f] == 0) continue;
      int64_t sum = 0;
      for (int q = 0; q < queue_count(); ++q)
        if (q != fleet_queue_ && TreeRoot(q) == q) sum += queues_[q].guaranteed[f];
      const int64_t have = int64_t{gpus[f]} * kMilliPerGpu;
      if (sum > have || sum <= have - down[f]) continue;
      std::string where;
      int named = 0;
      for (int n : nodes[f])
        if (++named <= 3) where += (where.empty() ? "" : ", ") + fleet_.nodes[n].name.str();
      if (named > 3) where += " and " + std::to_string(named - 3) + " more";
      const std::string warning =
          "the queue trees' guarantees of " + flavor_name(f) + " add up to " + GpuAmount(sum) +
          " GPUs, and " + GpuAmount(down[f]) + " of the fleet's " + GpuAmount(have) +
          " are out of service now (on " + where +
          ": cordoned, draining, in repair or not ready): they cannot all be met until those "
          "are back";
      for (int q = 0; q < queue_count(); ++q)
        if (q != fleet_queue_ && TreeRoot(q) == q && queues_[q].guaranteed[f] > 0)
          out[q] += (out[q].empty() ? "" : "; ") + warning;
    }
  }
  // A disruption budget of 0 set while the queue borrowed: what it borrowed stays until it
  // ends, and a lender below its guarantee waits for it (a user-style review: "the guarantee is
  // broken until a person intervenes", with nothing on the queue to say so).
  for (int q = 0; q < queue_count(); ++q) {
    const QueueNode& n = queues_[q];
    const int zero = is_leaf(q) ? ZeroBudget(q) : -1;  // (its own, or a department's above it)
    if (zero < 0) continue;
    for (int f = 0; f < flavor_count(); ++f)
      if (managed_[f] && n.usage[f] > n.guaranteed[f])
        out[q] += std::string(out[q].empty() ? "" : "; ") +
                  (zero == q ? std::string("its disruptionBudget of 0")
                             : "the disruptionBudget of 0 of queue " + queues_[zero].spec.name +
                                   " above it") +
                  " keeps the " + GpusSaid(n.usage[f] - n.guaranteed[f]) + " of " + flavor_name(f) +
                  " it holds past its guarantee from a reclaim: they stay until its work ends";
  }
  // A borrowing limit lowered below what the queue holds (as Kueue, nothing is evicted for it:
  // its new work waits until it is back within; a user-style review found nothing said so).
  for (int q = 0; q < queue_count(); ++q) {
    const QueueNode& n = queues_[q];
    if (q == fleet_queue_) continue;
    for (int f = 0; f < flavor_count(); ++f)
      if (managed_[f] && n.borrow_limit[f] && n.usage[f] > n.guaranteed[f] + *n.borrow_limit[f])
        out[q] += std::string(out[q].empty() ? "" : "; ") + "over its borrowing limit of " +
                  flavor_name(f) + ": holds " + GpuAmount(n.usage[f]) + " GPUs, past its " +
                  GpuAmount(n.guaranteed[f]) + " guaranteed + borrowing limit " +
                  GpuAmount(*n.borrow_limit[f]) +
                  "; nothing is evicted for it, its new work waits until it is within";
  }
  return out;
}

std::vector<int> Admitter::CandidateFlavors(const PodRequest& req) const {
  std::vector<int> out;
  if (req.kind == DeviceKind::kNone) return out;
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
    if (FlavorModels(f, req)) out.push_back(f);
  return out;
}

bool Admitter::WithinGuarantee(int leaf, int f, int64_t milli) const {
  return !managed_[f] || queues_[leaf].usage[f] + milli <= queues_[leaf].guaranteed[f];
}

std::string Admitter::FlavourNamedElsewhere(int root, int f) const {
  // (Flavours are the fleet's: a request goes to the most specific one any queue names, in
  // every tree. A tree none of whose queues names it holds none of it: said, with who names it,
  // as one team's new quota can leave another's work with nowhere to go.)
  if (queues_[root].guaranteed[f] > 0) return "";
  const std::string& name = flavors_[f].name;
  int other = -1;
  for (int q = 0; q < queue_count(); ++q) {
    if (!queues_[q].spec.quotas.count(name)) continue;
    if (TreeRoot(q) == root) return "";
    if (other < 0) other = q;
  }
  if (other < 0) return "";
  return " (no queue of its tree has a quota of " + name + "; queue " + queues_[other].spec.name +
         "'s has, and such work is charged to " + name +
         " in every tree: give this tree a quota of it)";
}

int64_t Admitter::promised_milli(int q) const {
  int64_t sum = 0;
  for (int64_t v : queues_[q].promised) sum += v;
  return sum;
}

int64_t Admitter::promised_to_others(int id, const std::string& flavor) const {
  const Entry& e = entries_[id];
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f) {
    if (flavors_[f].name != flavor) continue;
    return queues_[e.leaf].promised[f] - (e.nominated && e.promised_flavor == f ? e.promised : 0);
  }
  return 0;
}

int64_t Admitter::room_below_guarantee(int id, const std::string& flavor) const {
  const QueueNode& q = queues_[entries_[id].leaf];
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
    if (flavors_[f].name == flavor) return q.guaranteed[f] - q.usage[f] + q.evicting_usage[f];
  return 0;
}

bool Admitter::MayReclaim(int leaf, int f, int64_t milli) const {
  const QueueNode& q = queues_[leaf];
  if (q.spec.preemption.reclaim_within_cohort == PreemptionPolicy::Reclaim::kNever) return false;
  // (Best-effort work reclaims nothing: it is what is reclaimed. Under the one tree's root, its
  // no guarantee would otherwise read as a claim on the root's, and its promises as held
  // there, a review found.)
  if (q.spec.best_effort) return false;
  // Its own work being evicted counts as gone: the preemptor it makes room for has promised it.
  // Work leaving for no one (a drain, its maximum runtime) does not: its room is the queue's
  // own in a moment, so reclaiming from others for it would evict for room that then idles.
  if (!managed_[f]) return false;
  // (With no guarantee of its own, a department's own part past it, as for a project past its
  // own: a trial's project waited beside its department's 4 unused GPUs that another
  // department borrowed, where one guaranteed 2 of them took back all 4.)
  if (milli > 0 && ReclaimScope(leaf, f, milli) >= 0) return true;
  if (q.guaranteed[f] > 0) return false;
  // Else the guarantee of a queue above it that no project was given, from best-effort work
  // only (the built-in unqueued beside several trees, "reclaimed by any tree's work within its
  // guarantee").
  // (Its evicting work counted too: the reclaim that marked it still holds its promise.)
  bool best_effort_holds = false;
  for (const QueueNode& b : queues_) best_effort_holds |= b.spec.best_effort && b.usage[f] > 0;
  if (!best_effort_holds) return false;
  for (int a = q.parent; a >= 0 && a != fleet_queue_; a = queues_[a].parent) {
    if (queues_[a].guaranteed[f] == 0) continue;
    // (What its leaves' nominated preemptors were promised counts as held; best-effort work
    // below it, the built-in unqueued under the one tree's root, holds none of it: it is what
    // is reclaimed. One walk for both.)
    int64_t promised = 0, best_effort = 0;
    for (int l = 0; l < queue_count(); ++l)
      for (int up = queues_[l].parent; up >= 0 && is_leaf(l); up = queues_[up].parent)
        if (up == a) {
          promised += queues_[l].promised[f];
          if (queues_[l].spec.best_effort) best_effort += queues_[l].usage[f];
          break;
        }
    return queues_[a].usage[f] - best_effort + promised + milli <= queues_[a].guaranteed[f];
  }
  return false;
}

int Admitter::ReclaimScope(int leaf, int f, int64_t milli) const {
  const QueueNode& q = queues_[leaf];
  if (q.usage[f] - (q.evicting_usage[f] - q.leaving_usage[f]) + q.promised[f] + milli <=
      q.guaranteed[f])
    return leaf;
  // (Not a tree's root: what its tree holds beyond it, other trees lend or not by the fleet's
  // own rules; and the generated tree's root, guaranteed the fleet, would let every team
  // reclaim past its own.)
  int branch = leaf;
  for (int a = q.parent; IsDepartment(a); branch = a, a = queues_[a].parent)
    if (milli <= OwnPartRoom(a, branch, f)) return a;
  return -1;
}

bool Admitter::ClaimHolds(int scope, int victim, int f, int64_t milli) const {
  for (int a = queues_[scope].parent; IsDepartment(a) && !Under(victim, a); a = queues_[a].parent) {
    const QueueNode& n = queues_[a];
    const int64_t held =
        n.usage[f] - (n.evicting_below[f] - n.leaving_below[f]) + n.promised_below[f];
    if (held + milli > n.guaranteed[f]) return false;
  }
  return true;
}

int64_t Admitter::OwnPartRoom(int a, int branch, int f) const {
  // Only a department's own part of its guarantee, what none of its children is guaranteed,
  // is taken back for work past its projects' guarantees: the rest is theirs, lent while they
  // leave it unused, and a reclaim for work that borrows it would be undone by their next
  // (evicting twice for one GPU).
  // (What work being evicted holds counts as gone, but for work leaving for no one, as for the
  // leaf; best-effort work below it counts as held, which errs on the side of no reclaim.)
  const auto held = [&](const QueueNode& c) {
    return c.usage[f] - (c.evicting_below[f] - c.leaving_below[f]) + c.promised_below[f];
  };
  const QueueNode& n = queues_[a];
  const int64_t within = n.guaranteed[f] - held(n);
  if (within <= 0) return within;
  const int64_t own = OwnPart(a, f);
  int64_t others = 0;  // what the other children hold past their guarantees
  for (int c : n.children)
    if (c != branch) others += std::max<int64_t>(0, held(queues_[c]) - queues_[c].guaranteed[f]);
  if (own <= 0 || others > own) return -1;
  const QueueNode& b = queues_[branch];
  return std::min(within, own - others - (held(b) - b.guaranteed[f]));
}

int64_t Admitter::DepartmentRoom(int leaf, int f) const {
  int64_t room = 0;
  int branch = leaf;
  for (int a = queues_[leaf].parent; IsDepartment(a); branch = a, a = queues_[a].parent)
    room = std::max(room, OwnPartRoom(a, branch, f));
  return room;
}

bool Admitter::IsDepartment(int a) const {
  return a >= 0 && queues_[a].parent >= 0 && queues_[a].parent != fleet_queue_;
}

int64_t Admitter::OwnPart(int a, int f) const {
  int64_t own = queues_[a].guaranteed[f];
  for (int c : queues_[a].children) own -= queues_[c].guaranteed[f];
  return own;
}

int64_t Admitter::BestEffortUnder(int a, int f) const {
  int64_t held = 0;
  for (int l = 0; l < queue_count(); ++l)
    if (is_leaf(l) && queues_[l].spec.best_effort)
      for (int up = queues_[l].parent; up >= 0; up = queues_[up].parent)
        if (up == a) {
          held += queues_[l].usage[f];
          break;
        }
  return held;
}

bool Admitter::QuotaReclaims(int leaf, int f, int64_t milli) const {
  if (f >= 64 || !managed_[f]) return false;
  if (!BestEffortReclaimOnly(leaf, f, ReclaimScope(leaf, f, milli)))
    return MayReclaim(leaf, f, milli);
  // A department's guarantee is reclaimed from best-effort work only: for quota, only where
  // that work is below the department, whose quota counts it (the built-in unqueued under the
  // one tree's root; beside several trees it is a tree of its own).
  for (int a = queues_[leaf].parent; a >= 0 && a != fleet_queue_; a = queues_[a].parent)
    if (queues_[a].guaranteed[f] > 0)
      return MayReclaim(leaf, f, milli) && BestEffortUnder(a, f) > 0;
  return false;
}

bool Admitter::MayReclaimResource(int leaf, int r, int64_t amount) const {
  const QueueNode& q = queues_[leaf];
  if (!q.res_limited[r] || amount == 0 ||
      q.spec.preemption.reclaim_within_cohort == PreemptionPolicy::Reclaim::kNever)
    return false;
  const int64_t used = r == 0 ? q.cpu : q.memory;
  return used - (q.res_evicting[r] - q.res_leaving[r]) + q.res_promised[r] + amount <=
         q.res_guaranteed[r];
}

bool Admitter::BorrowsResource(int q, int r) const {
  const QueueNode& n = queues_[q];
  return n.res_limited[r] && (r == 0 ? n.cpu : n.memory) - n.res_evicting[r] > n.res_guaranteed[r];
}

bool Admitter::ResourcesWithinGuarantee(const Entry& e) const {
  const QueueNode& q = queues_[e.leaf];
  for (int r = 0; r < 2; ++r) {
    const int64_t amount = r == 0 ? e.cpu_milli : e.memory_mib;
    if (!q.res_limited[r] || amount == 0) continue;
    const int64_t used = r == 0 ? q.cpu : q.memory;
    if (used - (q.res_evicting[r] - q.res_leaving[r]) + q.res_promised[r] + amount >
        q.res_guaranteed[r])
      return false;
  }
  return true;
}

unsigned Admitter::ResourceReclaims(int id) const {
  const Entry& e = entries_[id];
  if (WouldBorrow(id) || !ResourcesWithinGuarantee(e)) return 0;
  unsigned out = 0;
  for (int r = 0; r < 2; ++r)
    if (MayReclaimResource(e.leaf, r, r == 0 ? e.cpu_milli : e.memory_mib)) out |= 1u << r;
  return out;
}

bool Admitter::MayReclaimAny(int id) const {
  if (!entries_[id].options.may_preempt) return false;  // (preemptionPolicy Never)
  return ReclaimEligible(id) || ResourceReclaims(id) != 0;
}

bool Admitter::MayEvictOwn(const Entry& preemptor, const Entry& victim) const {
  using Within = PreemptionPolicy::Within;
  switch (queues_[preemptor.leaf].spec.preemption.within_queue) {
    case Within::kNever:
      return false;
    case Within::kLowerPriority:
      return victim.spec.priority < preemptor.spec.priority;
    case Within::kLowerOrNewerEqualPriority:
      return victim.spec.priority < preemptor.spec.priority ||
             (victim.spec.priority == preemptor.spec.priority &&
              victim.arrival > preemptor.arrival);
  }
  return false;
}

bool Admitter::ReclaimEligible(int id) const {
  const Entry& e = entries_[id];
  if (!ResourcesWithinGuarantee(e)) return false;
  for (const PodRequest& p : e.pods) {
    if (p.kind == DeviceKind::kNone) continue;
    for (int f : CandidateFlavors(p))
      if (MayReclaim(e.leaf, f, e.gpu_milli)) return true;
    return false;
  }
  return false;
}

bool Admitter::TakeSearch(int id) {
  if (!entries_[id].options.may_preempt) return false;  // (preemptionPolicy Never)
  // One going on with its victims batch by batch searches again whatever the count: its
  // stopped victims' room is held only by a search that finds the rest.
  if (entries_[id].continuing) return true;
  const int leaf = entries_[id].leaf;
  if (preempt_tried_[leaf] < config_.preemption_searches_per_queue) {
    ++preempt_tried_[leaf];
    return true;
  }
  if (reclaim_tried_[leaf] < config_.reclaim_searches_per_queue && MayReclaimAny(id)) {
    ++reclaim_tried_[leaf];
    return true;
  }
  return false;
}

void Admitter::Nominate(int id, int victims, bool within_guarantee) {
  Entry& e = entries_[id];
  Unnominate(id);
  e.nominated = true;
  e.consolidation_stage = consolidation_staged_;
  e.victims_left = victims;
  // (A held swap's, batch by batch: admitted as that swap only, once its victims stop.)
  e.held_swap = held_swap_;
  // Its own queue's victims stop for it, and what they hold is its queue's again once they
  // have: MayReclaim counts their room as gone, promised to their preemptor, so all of it is
  // promised here, not only what the preemptor asks, or the queue's other work reads the rest
  // as guarantee left free and reclaims from other queues for it (a trial: a 2-GPU priority
  // preemption of a 6-GPU workload let two lower-priority workloads of the queue "reclaim"
  // from another queue, which then lost work to room the queue got back anyway).
  std::map<int, int64_t> own;  // flavour -> milli-GPUs its own queue's victims hold
  for (const auto& [victim, by] : preemptor_)
    if (by == id && entries_[victim].leaf == e.leaf)
      for (const auto& [f, milli] : entries_[victim].charged) own[f] += milli;
  if (within_guarantee) {
    // Promised in the first flavour it may reclaim in.
    for (const PodRequest& p : e.pods) {
      if (p.kind == DeviceKind::kNone) continue;
      for (int f : CandidateFlavors(p)) {
        if (!MayReclaim(e.leaf, f, e.gpu_milli)) continue;
        e.promised = std::max(e.gpu_milli, own[f]);
        e.promised_flavor = f;
        break;
      }
      break;
    }
  }
  if (e.promised_flavor < 0)
    for (const auto& [f, milli] : own)
      if (managed_[f] && milli > e.promised) {
        e.promised = milli;
        e.promised_flavor = f;
      }
  // Going on with its victims batch by batch, the room of those that have stopped is held for
  // it: promised too, at least what it asks (a review: once a budget's first victim stopped,
  // that victim, requeued, "reclaimed" the room from another queue).
  if (e.continuing && e.promised_flavor < 0)
    if (const PodRequest* gpu_pod = FirstGpuPod(e.pods))
      for (int f : CandidateFlavors(*gpu_pod))
        if (managed_[f]) {
          e.promised_flavor = f;
          break;
        }
  if (e.continuing && e.promised_flavor >= 0) e.promised = std::max(e.promised, e.gpu_milli);
  if (e.promised_flavor >= 0) {
    queues_[e.leaf].promised[e.promised_flavor] += e.promised;
    for (int a = e.leaf; a >= 0; a = queues_[a].parent)
      queues_[a].promised_below[e.promised_flavor] += e.promised;
  }
  // Its CPU and memory, wherever its queue's guarantee of them covers it.
  for (int r = 0; r < 2; ++r) {
    const int64_t amount = r == 0 ? e.cpu_milli : e.memory_mib;
    if (!MayReclaimResource(e.leaf, r, amount)) continue;
    e.res_promised[r] = amount;
    queues_[e.leaf].res_promised[r] += amount;
  }
  nominated_.push_back(id);
}

void Admitter::SetPlan(int id, const std::vector<std::pair<Assignment, const PodRequest*>>& placed,
                       bool reserve_quota, bool reserve_resources) {
  Entry& e = entries_[id];
  e.plan.clear();
  for (const auto& [planned, pod] : placed) e.plan.push_back({planned, *pod});
  HoldPlan(id);
  e.reserves_quota = reserve_quota;
  e.reserves_resources = reserve_resources;
  ReserveQuota(id);
}

void Admitter::UnreserveQuota(Entry& e) {
  for (const auto& [q, f, milli] : e.quota_reserved) queues_[q].reserved[f] -= milli;
  e.quota_reserved.clear();
  for (const auto& [q, r, amount] : e.resources_reserved) queues_[q].res_reserved[r] -= amount;
  e.resources_reserved.clear();
}

void Admitter::ReserveQuota(int id) {
  Entry& e = entries_[id];
  UnreserveQuota(e);
  if (!e.reserves_quota && !e.reserves_resources) return;
  // What its victims still stopping hold, per queue (theirs and their ancestors): charged there
  // until they stop, it is not counted again. GPUs per flavour; CPU and memory.
  std::map<std::pair<int, int>, int64_t> gpus;  // (queue, flavour) -> milli-GPUs
  std::map<int, std::array<int64_t, 2>> pods;   // queue -> (milli-cores, MiB)
  for (const auto& [victim, by] : preemptor_) {
    if (by != id) continue;
    const Entry& w = entries_[victim];
    for (int q = w.leaf; q >= 0; q = queues_[q].parent) {
      for (const auto& [f, milli] : w.charged) gpus[{q, f}] += milli;
      pods[q][0] += w.cpu_milli;
      pods[q][1] += w.memory_mib;
    }
  }
  if (e.reserves_resources)
    for (int q = e.leaf; q >= 0; q = queues_[q].parent)
      for (int r = 0; r < 2; ++r) {
        const int64_t amount = (r == 0 ? e.cpu_milli : e.memory_mib) - pods[q][r];
        if (amount <= 0) continue;
        queues_[q].res_reserved[r] += amount;
        e.resources_reserved.push_back({q, r, amount});
      }
  if (!e.reserves_quota) return;
  std::map<int, int64_t> planned;  // flavour -> milli-GPUs
  for (const auto& [at, pod] : e.plan) {
    const int f = FlavorOf(pod, state_.node_model(at.node));
    if (f >= 0 && managed_[f]) planned[f] += pod.total_charge_milli();
  }
  for (const auto& [f, milli] : planned)
    for (int q = e.leaf; q >= 0; q = queues_[q].parent) {
      const int64_t amount = milli - gpus[{q, f}];
      if (amount <= 0) continue;
      queues_[q].reserved[f] += amount;
      e.quota_reserved.push_back({q, f, amount});
    }
}

void Admitter::ReleaseHolds(Entry& e) {
  for (auto it = e.reserved.rbegin(); it != e.reserved.rend(); ++it)
    state_.Release(it->first, it->second);
  e.reserved.clear();
}

size_t Admitter::EraseHeldAhead(std::string& reason) {
  const size_t at = reason.find(std::string("; ") + kHeldAhead);
  if (at == std::string::npos) return at;
  const size_t to = reason.find("; ", at + 2);
  reason.erase(at, to == std::string::npos ? std::string::npos : to - at);
  return at;
}

void Admitter::RefreshHeldAhead() {
  // (One note a set of models: only a workload that holds room itself is left out of its own.)
  std::map<uint64_t, std::string> notes;
  for (auto it = held_noted_.begin(); it != held_noted_.end();) {
    Entry& e = entries_[it->first];
    const size_t at = e.phase == Phase::kPending ? EraseHeldAhead(e.reason) : std::string::npos;
    if (at == std::string::npos) {
      it = held_noted_.erase(it);
      continue;
    }
    std::string ahead;
    if (e.nominated) {
      ahead = HeldAheadNote(it->first, it->second);
    } else {
      auto [note, fresh] = notes.try_emplace(it->second);
      if (fresh) note->second = HeldAheadNote(-1, it->second);
      ahead = note->second;
    }
    if (ahead.empty()) {
      it = held_noted_.erase(it);
      continue;
    }
    e.reason.insert(at, "; " + ahead);
    ++it;
  }
}

uint64_t Admitter::GpuModels(const std::vector<PodRequest>& pods) {
  uint64_t models = 0;
  for (const PodRequest& p : pods)
    if (p.num_gpu > 0 || p.gpu_milli > 0 || p.kind == DeviceKind::kMig) models |= p.model_mask;
  return models;
}

void Admitter::NoteHeldAhead(int id, const std::vector<PodRequest>& pods) {
  Entry& e = entries_[id];
  if (e.reason.rfind("no node can take it now", 0) != 0) return;
  const uint64_t models = GpuModels(pods);
  if (std::string ahead = HeldAheadNote(id, models); !ahead.empty()) {
    e.reason += "; " + ahead;
    held_noted_[id] = models;
  }
}

std::string Admitter::HeldAheadNote(int id, uint64_t models) const {
  if (nominated_.empty() || models == 0) return "";  // (nothing held: the common case)
  int64_t milli = 0;
  std::set<int> nodes;
  std::set<int> holders;
  for (int other : nominated_) {
    const Entry& o = entries_[other];
    if (other == id || !o.nominated) continue;
    for (const auto& [hold, unused] : o.reserved) {
      const int model = state_.node_model(hold.node);
      if (model < 0 || !(models >> model & 1)) continue;
      for (const DeviceShare& d : hold.devices) {
        if (d.milli <= 0) continue;
        milli += d.milli;
        nodes.insert(hold.node);
        holders.insert(other);
      }
    }
  }
  if (milli == 0) return "";
  char gpus[32];
  std::snprintf(gpus, sizeof gpus, milli % kMilliPerGpu == 0 ? "%.0f" : "%.2f",
                static_cast<double>(milli) / kMilliPerGpu);
  return std::string(kHeldAhead) + gpus + " GPU(s) free on " + std::to_string(nodes.size()) +
         " node(s) are held for " + std::to_string(holders.size()) +
         " workload(s) that wait ahead of it (reserved room, or a preemptor's while its victims "
         "stop: fabctl top nodes)";
}

void Admitter::HoldPlan(int id) {
  Entry& e = entries_[id];
  ReleaseHolds(e);
  // (Its own pods' places, then those of the work its consolidation moves.)
  std::vector<std::pair<const Assignment*, const PodRequest*>> places;
  for (const auto& [planned, planned_pod] : e.plan) places.push_back({&planned, &planned_pod});
  for (const Entry::MoveHold& m : e.move_plan) places.push_back({&m.at, &m.pod});
  for (const auto& [planned_at, pod] : places) {
    const Assignment& planned = *planned_at;
    const int n = planned.node;
    // Held as the preemptor's own (tenant and kind, so isolation keys are its), but counting no
    // GPUs of its shape.
    PodRequest req;
    req.tenant = pod->tenant;
    req.kind = pod->kind;
    req.cpu_milli = std::min(pod->cpu_milli, std::max<int64_t>(0, state_.free_cpu(n)));
    req.memory_mib = std::min(pod->memory_mib, std::max<int64_t>(0, state_.free_memory(n)));
    const bool untrusted =
        pod->tenant >= 0 && state_.tenant(pod->tenant).trust == TrustLevel::kUntrusted;
    const int32_t mig_key = untrusted ? pod->tenant : ClusterState::kMigShared;
    Assignment hold;
    hold.node = n;
    for (const DeviceShare& d : planned.devices) {
      const DeviceState& ds = state_.devices(n)[d.device];
      if (d.mig_slice >= 0) {
        // Not a slice beside work it may not share a GPU with (that work is a victim still
        // stopping): holding it would give the device the preemptor's key meanwhile.
        if ((ds.mig_free >> d.mig_slice & 1) && (ds.mig_key == -1 || ds.mig_key == mig_key))
          hold.devices.push_back(d);
        continue;
      }
      if (pod->kind == DeviceKind::kFraction && ds.share_key != -1 &&
          ds.share_key != state_.ShareKey(pod->tenant))
        continue;
      DeviceShare part{d.device, std::min(d.milli, ds.free_milli),
                       std::min(d.memory_mib, std::max<int64_t>(0, ds.free_memory_mib)), -1};
      if (part.milli > 0 || part.memory_mib > 0) hold.devices.push_back(part);
    }
    if (hold.devices.empty() && req.cpu_milli == 0 && req.memory_mib == 0) continue;
    state_.Apply(hold, req);
    e.reserved.push_back({std::move(hold), req});
  }
}

bool Admitter::ReserveRoom(int id, const std::vector<PodRequest>& pods,
                           const std::vector<int>& prefer, double now) {
  Entry& e = entries_[id];
  if (config_.reserve_after_s <= 0 || now - e.arrival < config_.reserve_after_s || e.nominated ||
      e.phase != Phase::kPending || pods.empty())
    return false;
  // Work within its queue's guarantee only: room promised ahead to a borrower would be room
  // the lenders' own work cannot take back (a hold is no victim). Whole GPUs only.
  if (WouldBorrow(id)) return false;
  int gpus = 0;
  for (const PodRequest& p : pods) {
    if (p.kind != DeviceKind::kWhole) return false;
    gpus += p.num_gpu;
  }
  // Large work only: one GPU fits wherever any frees, so it is not starved by smaller work.
  if (gpus < 2) return false;
  // Others' reservations: how many, and their nodes.
  std::set<int> taken;
  int count = 0;
  for (int other : reservations_) {
    const Entry& o = entries_[other];
    if (other == id || !o.reserving) continue;
    ++count;
    for (const auto& [a, unused] : o.plan) taken.insert(a.node);
  }
  if (count >= config_.max_reservations) return false;
  const std::set<int> preferred(prefer.begin(), prefer.end());
  reservation_start_.erase(id);  // (a new plan: its start is estimated anew)
  // A plan on the nodes `within` leaves (null: any), one pod a node, and its key: how many of
  // its nodes it did not plan on before, when all its GPUs are free by the limits, then the
  // most of them free, the most free share (the smaller the better).
  using PlanKey = std::tuple<int, double, int, int64_t>;
  const auto plan_on = [&](const std::vector<int>* within,
                           std::vector<std::pair<Assignment, PodRequest>>& plan, PlanKey& total) {
    std::set<int> used = taken;
    total = {0, now, 0, 0};
    const int count = within ? static_cast<int>(within->size()) : state_.node_count();
    for (const PodRequest& pod : pods) {
      int best = -1;
      std::tuple<int, double, int, int64_t> best_key;
      std::vector<int> best_devices;
      for (int i = 0; i < count; ++i) {
        const int n = within ? (*within)[i] : i;
        if (used.count(n) || out_of_service_.count({n, -1})) continue;
        if (pod.nodes && !pod.nodes->in[n]) continue;  // (its selector leaves it out)
        const Node& node = fleet_.nodes[n];
        const int model = state_.node_model(n);
        if (model < 0 || !(pod.model_mask >> model & 1) || node.cpu.value() < pod.cpu_milli ||
            node.memory.value() < pod.memory_mib)
          continue;
        if (state_.exclusive_owner(n) >= 0 && state_.exclusive_owner(n) != pod.tenant) continue;
        // Its GPUs that could be the pod's once their work ends: those free soonest by the time
        // limits of their work (EndsBy; where limits are not known, none sooner), then free ones,
        // then the emptiest.
        std::vector<int> devices;
        int free_now = 0;
        int64_t free_milli = 0;
        for (int d = 0; d < static_cast<int>(node.devices.size()); ++d) {
          if (!node.devices[d].mig_slices.empty() || out_of_service_.count({n, d})) continue;
          devices.push_back(d);
        }
        if (static_cast<int>(devices.size()) < pod.num_gpu) continue;
        const auto& ds = state_.devices(n);
        // (A device in use by no workload is held: for a preemptor, free never as far as this
        // knows.)
        std::vector<double> free_at(node.devices.size(), now);
        std::vector<int> workloads(node.devices.size(), 0);
        for (int other : node_workloads_[n])
          for (const Assignment& a : entries_[other].assign)
            if (a.node == n)
              for (const DeviceShare& d : a.devices) {
                free_at[d.device] = std::max(free_at[d.device], EndsBy(entries_[other]));
                ++workloads[d.device];
              }
        for (int d : devices)
          if (ds[d].users > workloads[d]) free_at[d] = std::numeric_limits<double>::infinity();
        std::stable_sort(devices.begin(), devices.end(), [&](int a, int b) {
          return std::make_tuple(free_at[a], ds[a].users != 0, -ds[a].free_milli) <
                 std::make_tuple(free_at[b], ds[b].users != 0, -ds[b].free_milli);
        });
        devices.resize(pod.num_gpu);
        double starts = now;  // when all of them are free, by the limits
        for (int d : devices) {
          free_now += ds[d].users == 0;
          free_milli += ds[d].free_milli;
          starts = std::max(starts, free_at[d]);
        }
        // Where it planned before, then the soonest free by the limits, then the most of its GPUs
        // free, then the most free share.
        const std::tuple<int, double, int, int64_t> key{preferred.count(n) ? 0 : 1, starts,
                                                        -free_now, -free_milli};
        if (best < 0 || key < best_key) {
          best = n;
          best_key = key;
          best_devices = devices;
        }
      }
      if (best < 0) return false;
      Assignment a;
      a.node = best;
      for (int d : best_devices)
        a.devices.push_back({d, pod.gpu_milli, fleet_.nodes[best].devices[d].memory.value(), -1});
      plan.push_back({std::move(a), pod});
      used.insert(best);  // (one pod a node: a gang's pods spread as whole-node pods would)
      std::get<0>(total) += std::get<0>(best_key);
      std::get<1>(total) = std::max(std::get<1>(total), std::get<1>(best_key));
      std::get<2>(total) += std::get<2>(best_key);
      std::get<3>(total) += std::get<3>(best_key);
    }
    return true;
  };
  // A required topology domain: the plan in the one domain of its level that is best by that
  // key (a trial's 2-node gang needing one leaf waited for good behind its queue's 1-GPU work,
  // which took each GPU as it freed, in every leaf in turn).
  std::vector<std::pair<Assignment, PodRequest>> plan;
  std::string in_domain;
  const TopologyConstraint& topology = e.spec.topology;
  if (topology.required && topology.level != TopologyLevel::kNone) {
    const auto& domains = state_.domains(topology.level);
    PlanKey best_key;
    int best = -1;
    for (size_t d = 0; d < domains.size(); ++d) {
      if (domains[d].size() < pods.size()) continue;
      std::vector<std::pair<Assignment, PodRequest>> here;
      PlanKey key;
      if (plan_on(&domains[d], here, key) && (best < 0 || key < best_key)) {
        best = static_cast<int>(d);
        best_key = key;
        plan = std::move(here);
      }
    }
    if (best < 0) return false;
    in_domain = " in " + DomainSaid(e, topology.level, best);
  } else {
    PlanKey unused;
    if (!plan_on(nullptr, plan, unused)) return false;
  }
  std::string nodes;
  for (const auto& [a, unused] : plan) {
    const std::string name = fleet_.nodes[a.node].name.str();
    if (nodes.find(name) == std::string::npos) nodes += (nodes.empty() ? "" : ", ") + name;
  }
  e.plan = std::move(plan);
  e.nominated = true;
  e.victims_left = 0;
  e.reserving = true;
  e.swap_flavor = -1;  // (no swap: it evicts nothing)
  reservations_.insert(id);
  if (!e.ever_reserved) ++workloads_reserved_;
  e.ever_reserved = true;
  nominated_.push_back(id);
  HoldPlan(id);
  const std::string why = e.reason;
  // (No count of seconds: the server writes a status whose message changes.)
  e.reason = std::string(kReservingRoom) + " on " + nodes + in_domain +
             " (it has waited past reserveAfter " +
             std::to_string(static_cast<int64_t>(config_.reserve_after_s)) +
             " s): what frees there is held for it until it fits" + (why.empty() ? "" : "; " + why);
  return true;
}

std::string Admitter::DomainSaid(const Entry& e, TopologyLevel level, int d) const {
  const std::string name = TopologyLevelName(level);
  return name + " " + state_.domain_name(level, d) +
         (e.spec.gang ? " (its gang needs one " : " (its pods need one ") + name + ")";
}

double Admitter::EndsBy(const Entry& e) const {
  const double limit = static_cast<double>(e.spec.max_runtime_seconds);
  if (e.phase != Phase::kAdmitted || e.fragment_of >= 0 || limit <= 0 || e.admitted_at < 0)
    return std::numeric_limits<double>::infinity();
  return e.admitted_at + limit;
}

double Admitter::ReservationStart(int id, double now) {
  if (auto it = reservation_start_.find(id); it != reservation_start_.end()) return it->second;
  // (Computed once a cycle: within it, what lands on the plan is backfill ending before this.)
  constexpr double kNever = std::numeric_limits<double>::infinity();
  const Entry& r = entries_[id];
  std::set<std::pair<int, int>> planned;  // (node, device)
  for (const auto& [a, unused] : r.plan)
    for (const DeviceShare& d : a.devices) planned.insert({a.node, d.device});
  // Users of each planned device that are known: its own holds, and the workloads below. (One
  // more — another's hold, what the server could not restore — frees never, as far as this
  // knows, as ReserveRoom reads it.)
  std::map<std::pair<int, int>, int> known;
  for (const auto& [hold, unused] : r.reserved)
    for (const DeviceShare& d : hold.devices) ++known[{hold.node, d.device}];
  double start = now;
  // What runs (or stops: a victim, a shrink's fragment) on the planned nodes.
  for (auto it = planned.begin(); it != planned.end() && start < kNever;) {
    const int n = it->first;
    for (int other : node_workloads_[n]) {
      const Entry& o = entries_[other];
      bool there = false;
      for (const Assignment& a : o.assign)
        if (a.node == n)
          for (const DeviceShare& d : a.devices)
            if (planned.count({n, d.device})) {
              there = true;
              ++known[{n, d.device}];
            }
      if (there) start = std::max(start, EndsBy(o));
    }
    for (; it != planned.end() && it->first == n; ++it)
      if (state_.devices(n)[it->second].users > known[*it]) start = kNever;
  }
  reservation_start_[id] = start;
  return start;
}

double Admitter::ExpectedStart(int id, double now) {
  const Entry& e = entries_[id];
  if (!e.reserving || !e.nominated || e.phase != Phase::kPending)
    return std::numeric_limits<double>::infinity();
  return ReservationStart(id, now);
}

bool Admitter::HoldsRoom(int r) const {
  const Entry& o = entries_[r];
  return o.reserving && o.nominated && o.phase == Phase::kPending && !o.reserved.empty();
}

void Admitter::WakeForBackfill(double now) {
  if (reservations_.empty()) return;
  double latest = now;  // the latest start of a reservation that holds room
  for (int r : reservations_) {
    if (!HoldsRoom(r)) continue;
    if (const double start = ReservationStart(r, now);
        start < std::numeric_limits<double>::infinity())
      latest = std::max(latest, start);
  }
  if (latest <= now) return;
  // From where the last cycle's look ended, round the leaves, so that the same first few,
  // failing each cycle, do not keep the rest from being tried.
  std::vector<int> wake;
  int scanned = 0;
  const int nq = queue_count();
  const auto full = [&] {
    return static_cast<int>(wake.size()) >= kBackfillTriesPerCycle ||
           scanned >= kBackfillScanPerCycle;
  };
  if (wake_cursor_.first >= nq)
    wake_cursor_ = {0,
                    {std::numeric_limits<int>::min(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<int>::min()}};
  const int first = wake_cursor_.first;
  const auto from = wake_cursor_.second;
  for (int step = 0; step <= nq && !full(); ++step) {
    const int q = (first + step) % nq;
    if (!is_leaf(q) || queues_[q].stop != StopPolicy::kNone) continue;
    const auto& parked = queues_[q].parked;
    // (The first leaf from past the cursor; at the end of the round, up to it.)
    auto it = step == 0 ? parked.upper_bound(from) : parked.begin();
    const auto end = step == nq ? parked.upper_bound(from) : parked.end();
    for (; it != end && !full(); ++it) {
      ++scanned;
      wake_cursor_ = {q, *it};
      const Entry& e = entries_[std::get<2>(*it)];
      if (e.parked == 1 && e.spec.max_runtime_seconds > 0 &&
          now + static_cast<double>(e.spec.max_runtime_seconds) <= latest)
        wake.push_back(std::get<2>(*it));
    }
  }
  for (int id : wake) Unpark(id);
}

bool Admitter::Backfill(int id, uint64_t key, const std::vector<PodRequest>& pods, double now) {
  Entry& e = entries_[id];
  if (reservations_.empty() || e.spec.max_runtime_seconds <= 0 || e.reserving ||
      backfills_left_ <= 0)
    return false;
  const double ends = now + static_cast<double>(e.spec.max_runtime_seconds);
  std::vector<int> lifted;
  for (int r : reservations_) {
    if (r == id || !HoldsRoom(r)) continue;
    // (Not one that could start never: what runs there without a limit may end any time.)
    if (const double start = ReservationStart(r, now);
        start >= ends && start < std::numeric_limits<double>::infinity())
      lifted.push_back(r);
  }
  if (lifted.empty() || backfill_failed_.count({key, lifted})) return false;
  --backfills_left_;
  for (int r : lifted) ReleaseHolds(entries_[r]);
  placer_.set_explain(false);
  const bool placed = PlaceAll(e, pods, &e.assign, nullptr);
  for (int r : lifted) HoldPlan(r);
  if (placed)
    ++workloads_backfilled_;
  else
    backfill_failed_.insert({key, lifted});
  return placed;
}

void Admitter::Unnominate(int id, bool log_freed) {
  Entry& e = entries_[id];
  reservation_start_.erase(id);  // (its plan goes: a new one is estimated anew)
  if (log_freed)
    for (const auto& held : e.reserved) freed_log_.push_back(held.first.node);
  if (e.reserving) reservations_.erase(id);
  e.reserving = false;
  ReleaseHolds(e);
  e.move_plan.clear();
  e.nominated = false;
  e.reserves_quota = false;
  e.reserves_resources = false;
  // What it kept may now let others in.
  if (!e.quota_reserved.empty() || !e.resources_reserved.empty()) wake_quota_ = true;
  UnreserveQuota(e);
  if (e.promised_flavor >= 0) {
    queues_[e.leaf].promised[e.promised_flavor] -= e.promised;
    for (int a = e.leaf; a >= 0; a = queues_[a].parent)
      queues_[a].promised_below[e.promised_flavor] -= e.promised;
  }
  e.promised = 0;
  e.promised_flavor = -1;
  for (int r = 0; r < 2; ++r) {
    queues_[e.leaf].res_promised[r] -= e.res_promised[r];
    e.res_promised[r] = 0;
  }
}

void Admitter::Spare(int victim) {
  if (victim < 0 || victim >= static_cast<int>(entries_.size())) return;
  Entry& w = entries_[victim];
  if (w.phase != Phase::kEvicting) return;
  CountEvicting(victim, -1);
  w.phase = Phase::kAdmitted;
  w.reason = "admitted";
  w.options.leaving = false;
  AddRunning(victim);
  if (w.counts != w.full_counts) partial_running_.insert(victim);
  preemptor_.erase(victim);
}

std::optional<Admitter::Swap> Admitter::swap(int id) const {
  const Entry& e = entries_[id];
  if (e.phase != Phase::kPending || !e.nominated || e.swap_flavor < 0) return std::nullopt;
  return Swap{flavors_[e.swap_flavor].name, e.swap_ceiling, e.held_swap == e.swap_flavor};
}

void Admitter::RestoreNomination(int id, int victims, const std::vector<Assignment>& plan,
                                 const std::vector<int>& victim_ids,
                                 const std::optional<Swap>& swap, bool reservation,
                                 const std::vector<int>& counts) {
  Entry& e = entries_[id];
  if (e.phase != Phase::kPending) return;
  reservation = reservation && victims == 0 && !plan.empty();
  bool counts_fit = counts.size() == e.full_counts.size();
  for (size_t i = 0; counts_fit && i < counts.size(); ++i)
    counts_fit = counts[i] >= e.min_counts[i] && counts[i] <= e.full_counts[i];
  if (counts_fit && counts != e.counts) {
    SetCounts(e, counts);
    e.partial_why = kCutWhy;
  }
  // (Its victims first: what its own queue's free for it is promised to it.)
  bool own_victims = false;
  for (int v : victim_ids)
    if (v >= 0 && v < static_cast<int>(entries_.size()) && entries_[v].phase == Phase::kEvicting) {
      preemptor_[v] = id;
      own_victims |= entries_[v].leaf == e.leaf;
    }
  Nominate(id, victims, !reservation && ReclaimEligible(id));
  e.swap_flavor = -1;
  for (int f = 0; swap && f < flavor_count(); ++f)
    if (flavors_[f].name == swap->first) {
      e.swap_flavor = f;
      e.swap_ceiling = swap->second;
      // (The server rebuilds its admitter each cycle: a held swap is told so, or it would be
      // admitted, once its victims stopped, as any borrower, in any flavour its quota allows.)
      if (swap->held) e.held_swap = f;
    }
  // Its own queue's work stops for it while its quota refuses it, but no swap was kept (its
  // status write lost a race with its owner's): the same swap again, from what its queue holds
  // and keeps, so that it does not evict more once they have stopped.
  if (!swap && own_victims)
    if (const PodRequest* gpu_pod = FirstGpuPod(e.pods))
      for (int f : CandidateFlavors(*gpu_pod))
        if (managed_[f] && !QuotaAllows(e.leaf, f, e.gpu_milli, nullptr)) {
          e.swap_flavor = f;
          e.swap_ceiling = SwapCeiling(e.leaf, f);
          break;
        }
  e.plan.clear();
  // A plan that does not match the pods (the workload changed since) is dropped.
  if (plan.size() != e.pods.size()) return;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int n = plan[i].node;
    bool fits = n >= 0 && n < state_.node_count();
    const std::vector<DeviceShare>& shares = plan[i].devices;
    for (size_t k = 0; fits && k < shares.size(); ++k) {
      const DeviceShare& d = shares[k];
      const int devices = static_cast<int>(state_.devices(n).size());
      fits = d.device >= 0 && d.device < devices && d.milli >= 0 && d.memory_mib >= 0 &&
             d.mig_slice >= -1 &&
             d.mig_slice < static_cast<int>(state_.node(n).devices[d.device].mig_slices.size());
      // A device (or MIG slice) named twice would be held twice.
      for (size_t j = 0; fits && j < k; ++j)
        fits = shares[j].device != d.device || shares[j].mig_slice != d.mig_slice;
    }
    if (!fits) {
      e.plan.clear();
      return;
    }
    e.plan.push_back({plan[i], e.pods[i]});
  }
  // The work its consolidation moves and that still stops: a place for each, off its plan's
  // nodes, found anew (where the move counted on room, it is still free: held so since), and
  // held with the plan.
  PlaceMoves(id, victim_ids);  // (and HoldPlan)
  if (reservation) {           // (its quota allowed it: nothing of it is kept)
    e.reserving = true;
    e.swap_flavor = -1;
    reservations_.insert(id);
    return;
  }
  // Short of quota while its victims stop (they are still charged): the quota they free is its.
  // (Asked of its own plan, not of what preemptors restored before it keep.)
  count_reserved_ = false;
  for (const auto& [planned, pod] : e.plan) {
    const int f = FlavorOf(pod, state_.node_model(planned.node));
    if (f < 0 || !managed_[f] || QuotaAllows(e.leaf, f, e.gpu_milli, nullptr, nullptr)) continue;
    e.reserves_quota = true;
    break;
  }
  e.reserves_resources = !e.plan.empty() && (!ResourceAllows(e.leaf, 0, e.cpu_milli, nullptr) ||
                                             !ResourceAllows(e.leaf, 1, e.memory_mib, nullptr));
  count_reserved_ = true;
  ReserveQuota(id);
}

std::vector<Assignment> Admitter::plan(int id) const {
  const Entry& e = entries_[id];
  std::vector<Assignment> out;
  if (e.phase != Phase::kPending || !e.nominated) return out;
  for (const auto& [a, unused] : e.plan) out.push_back(a);
  return out;
}

template <class Used, class Guar, class Borrow, class Kept, class Fmt>
bool Admitter::QuotaWalk(int leaf, int64_t amount, Used used_of, Guar guar, Borrow borrow,
                         Kept kept, const std::string& what, Fmt fmt, const char* unit,
                         bool in_tree, std::string* why, int* blocker, int flavor) const {
  int n = leaf;
  // Where a queue on the way has room, what is asked for is that queue's own (its guarantee, or
  // what it lends below); but that guarantee may be lent above it meanwhile (a sibling borrowed
  // it): so GPU flavours walk on to the top, where no queue may pass its limits for it, nor
  // what a lender keeps, nor (trees lending nothing) its tree another tree's guarantee
  // (TopRoom). CPU and memory stop at the first queue with room.
  const bool walk_on = flavor >= 0;
  bool owned = false;  // a queue on the way had room
  // The unused guarantee that siblings of the queues on the way up do not lend: kept from every
  // queue above them too (what a lender keeps at its parent, its parent cannot lend upward,
  // nor take from above to hand on: it stays free for the lender).
  int64_t reserved = 0;
  std::string kept_why;  // (with `why`) which siblings keep it, and why
  // What queue s keeps of its unused guarantee from the queues outside it: its own (kept) or,
  // where more, what the queues below it keep (they lend nothing outside s either), at most its
  // unused guarantee.
  const std::function<int64_t(int, std::string*)> subtree_kept = [&](int s, std::string* how) {
    const QueueNode& sq = queues_[s];
    const int64_t own = kept(sq, how);
    int64_t below = 0;
    std::string below_how;
    for (int c : sq.keepers) {
      std::string h;
      below += subtree_kept(c, how ? &h : nullptr);
      if (!h.empty()) below_how += (below_how.empty() ? "" : "; ") + h;
    }
    below = std::min(below, std::max<int64_t>(0, guar(sq) - used_of(sq)));
    if (below <= own) return own;
    if (how) *how = below_how;
    return below;
  };
  while (true) {
    const QueueNode& q = queues_[n];
    const int64_t used = used_of(q) + amount;
    const bool room = used <= guar(q) - reserved;
    if (room && (!walk_on || q.parent < 0)) return true;
    // (Nor past the root's own borrowing limit: an administrator's cap on the whole tree.)
    if (!room && owned && q.parent < 0 && (!borrow(q) || used <= guar(q) + *borrow(q) - reserved) &&
        // (Past the GPUs in service it fits nowhere: placement refuses it, and reclaims room.)
        (n == fleet_queue_ ? used > in_service_milli_[flavor] : TopRoom(n, flavor, used, reserved)))
      return true;
    // On up: what n's siblings keep is kept from the queues above too.
    const auto on_up = [&] {
      if (!kept_why.empty()) kept_why.pop_back();  // (reopened for more)
      for (int s : queues_[q.parent].keepers) {
        if (s == n) continue;
        std::string how;
        reserved += subtree_kept(s, why ? &how : nullptr);
        if (!how.empty()) kept_why += (kept_why.empty() ? " (" : "; ") + how;
      }
      if (!kept_why.empty()) kept_why += ")";
      n = q.parent;
    };
    if (room) {
      owned = true;
      on_up();
      continue;
    }
    if (blocker) *blocker = n;
    if (owned && q.parent < 0 && n != fleet_queue_) {
      if (why) {
        bool others = false;  // other trees are guaranteed, or hold, some of the rest
        for (int r : roots_)
          others |= r != n && !queues_[r].spec.best_effort &&
                    (queues_[r].guaranteed[flavor] > 0 || queues_[r].usage[flavor] > 0);
        const QueueNode& l = queues_[leaf];
        const std::string holds =
            fmt(used) + "/" + fmt(std::max<int64_t>(0, guar(q) - reserved)) + unit + " of " + what;
        *why = (used_of(l) + amount <= guar(l)
                    ? "queue " + l.spec.name + " is within its guarantee of " + what +
                          ", but its tree (queue " + q.spec.name + ") would hold " + holds
                    : "its tree (queue " + q.spec.name + ") would hold " + holds) +
               kept_why +
               (others ? " and other queue trees are guaranteed the rest (lend-across-trees is "
                         "off)"
                       : "") +
               ": what its queues borrow of one another's guarantees is theirs to take back first";
      }
      return false;
    }
    // (Its guarantee less what queues below it keep by their lending limits, which is not its
    // to hand on: as Kueue's cohort holds only what its queues lend. A review's department
    // with borrowingLimit 0 let a child take what a sibling's lendingLimit kept.)
    if (const std::optional<int64_t> limit = borrow(q);
        limit && used - (guar(q) - reserved) > *limit) {
      if (why)
        *why = "queue " + q.spec.name + " over its borrowing limit for " + what + ": " + fmt(used) +
               "/" + fmt(std::max<int64_t>(0, guar(q) - reserved) + *limit) + unit + kept_why;
      return false;
    }
    // (A best-effort tree of its own, the built-in unqueued beside several trees, takes what
    // is idle: any tree's work within its guarantee reclaims it.)
    if (q.parent < 0 && q.spec.best_effort) return true;
    if (q.parent < 0 || (in_tree && q.parent == fleet_queue_)) {
      // (A tree's top borrows from no other tree, unless trees lend to each other: then the
      // fleet is the top, lending what its trees leave. Its guarantee is the most its queues
      // hold.)
      if (why)
        *why = (n == fleet_queue_
                    ? "the fleet has no unused " + what + " that its trees lend: they would hold "
                : n == leaf ? "queue " + q.spec.name + " is at its guarantee of " + what +
                                  (fleet_queue_ >= 0
                                       ? " (CPU and memory are not lent across trees)"
                                       : " (at the top of its tree, it borrows from no one)") +
                                  ": it would hold "
                            : "queue " + q.spec.name + " has no unused " + what +
                                  " to lend to the queues below it: it would hold ") +
               fmt(used) + "/" + fmt(std::max<int64_t>(0, guar(q) - reserved)) + unit + kept_why;
      // (Past its guarantee already — GPUs no tree is guaranteed, taken by work within its
      // queues' guarantees, or a guarantee lowered since —: said, or "48/24" reads as a riddle.)
      // (Within its guarantee but past what its queues' lending limits leave to lend, it says
      // that: a trial read "past its guarantee" of a queue at 21 of 24, 6 of them kept.)
      // (The fleet's are its trees': a trial read "it" of the fleet as a queue's.)
      const bool trees = n == fleet_queue_;
      if (why && used_of(q) > guar(q))
        *why += (trees ? " (the trees hold " : " (it holds ") + fmt(used_of(q)) + unit +
                (trees ? " already: past what they are guaranteed, they lend nothing more)"
                       : " already: past its guarantee, it lends nothing more)");
      else if (why && used_of(q) > std::max<int64_t>(0, guar(q) - reserved))
        *why += (trees ? " (the trees hold " : " (it holds ") + fmt(used_of(q)) + unit +
                (trees ? " already, of the " + fmt(guar(q)) + " they are guaranteed" +
                             ": what they keep is not lent)"
                       : " already, of its guarantee of " + fmt(guar(q)) +
                             ": what is kept is not lent)");
      // (Its own queue below its guarantee, beside siblings that borrow, takes nothing back for
      // work that would pass the guarantee: said, or a queue at 0 of its guarantee reads as
      // one whose reclaim is off, a trial found.)
      // (Not where fair-share preemption or its queue's borrowWithinCohort may move borrowed
      // work for it: then something may be.)
      if (const QueueNode& l = queues_[leaf];
          why && flavor >= 0 && n != leaf && used_of(l) < guar(l) &&
          used_of(l) + amount > guar(l) &&
          (!config_.fair_share_preemption || l.spec.no_fair_share) &&
          l.spec.preemption.borrow_within_cohort == PreemptionPolicy::Borrow::kNever)
        *why += "; queue " + l.spec.name + " would hold " + fmt(used_of(l) + amount) + "/" +
                fmt(guar(l)) + unit + ", past its guarantee, so nothing is taken back for it " +
                "(reclaim makes room only for work that fits within its queue's guarantee)";
      // (Where other trees lend it GPUs but not this.)
      if (why && in_tree && n != leaf && q.parent == fleet_queue_)
        *why += "; CPU and memory are not lent across trees";
      // (Where other trees could have lent it GPUs.)
      if (why && !in_tree && fleet_queue_ < 0) {
        int trees = 0;
        for (int r : roots_) trees += !queues_[r].spec.best_effort;
        if (trees > 1) *why += "; queue trees do not lend each other (lend-across-trees is off)";
      }
      return false;
    }
    on_up();
  }
}

void Admitter::RebuildKeepers(double now) {
  for (QueueNode& q : queues_) {
    q.may_keep = false;
    q.keepers.clear();
  }
  for (int i = 0; i < static_cast<int>(queues_.size()); ++i) {
    const QueueNode& q = queues_[i];
    bool keeps = q.res_lend[0].has_value() || q.res_lend[1].has_value() || Holding(q, now);
    for (const std::optional<int64_t>& l : q.lend_limit) keeps |= l.has_value();
    if (keeps) MarkMayKeep(i);
  }
}

void Admitter::MarkMayKeep(int q) {
  for (; q >= 0 && !queues_[q].may_keep; q = queues_[q].parent) {
    queues_[q].may_keep = true;
    if (queues_[q].parent >= 0) queues_[queues_[q].parent].keepers.push_back(q);
  }
}

bool Admitter::TopRoom(int root, int f, int64_t used, int64_t reserved) const {
  int64_t owned = 0, held = 0;
  for (int r : roots_) {
    const QueueNode& t = queues_[r];
    // (Best-effort work, the built-in unqueued's, is anyone's to reclaim: it owns nothing.)
    if (r == root || t.spec.best_effort) continue;
    const int64_t holds = t.usage[f] + (count_reserved_ ? t.reserved[f] : 0);
    owned += std::max(t.guaranteed[f], holds);
    held += holds;
  }
  // Past what is in service it fits nowhere: placement says so, and reclaims for room.
  return used + reserved <= in_service_milli_[f] - owned - elsewhere_milli_[f] ||
         used > in_service_milli_[f] - held;
}

void Admitter::UpdateElsewhere() {
  elsewhere_milli_.assign(flavors_.size(), 0);
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
    elsewhere_milli_[f] = GuaranteedElsewhere(f);
}

int64_t Admitter::GuaranteedElsewhere(int f) const {
  // (A trial's fractions took its tree past its fraction guarantee onto the GPU its whole-GPU
  // guarantee needed, which then waited for good: nothing reclaims across flavours.)
  int64_t needed = 0;
  for (int g = 0; g < static_cast<int>(flavors_.size()); ++g) {
    if (g == f || shared_milli_[f][g] <= 0 || !managed_[g]) continue;
    int64_t guaranteed = 0;
    for (int r : roots_)
      if (!queues_[r].spec.best_effort) guaranteed += queues_[r].guaranteed[g];
    needed += std::clamp<int64_t>(guaranteed - (in_service_milli_[g] - shared_milli_[f][g]), 0,
                                  shared_milli_[f][g]);
  }
  return needed;
}

std::string Admitter::KeptWhy(const QueueNode& q, bool held, const std::string& amount) const {
  if (!held) return q.spec.name + " keeps " + amount + " of its guarantee: its lending limit";
  // (In whole minutes: a message that changes every cycle would be written every cycle.)
  const auto ago = static_cast<int64_t>(std::floor(std::max(0.0, now_ - q.reclaimed_at) / 60));
  const auto left = static_cast<int64_t>(
      std::ceil(std::max(0.0, q.reclaimed_at + config_.reclaim_hold_s - now_) / 60));
  return q.spec.name + " keeps " + amount + " it reclaimed " +
         (ago == 0 ? "less than a minute ago" : std::to_string(ago) + " min ago") +
         ": its reclaim hold lasts about " + std::to_string(std::max<int64_t>(1, left)) +
         " min more";
}

int64_t Admitter::SwapCeiling(int leaf, int f) const {
  // Less what it holds that is already on its way out for another queue's work or for no one
  // (a lender's reclaim, a drain): that is not its to swap into. What stops for its own
  // preemptors stays counted, as they take it back.
  int64_t out = queues_[leaf].usage[f] - queues_[leaf].evicting_usage[f];
  for (const auto& [victim, by] : preemptor_) {
    const Entry& v = entries_[victim];
    if (v.leaf != leaf || by < 0 || entries_[by].leaf != leaf) continue;
    for (const auto& [flavor, milli] : v.charged)
      if (flavor == f) out += milli;
  }
  return out;
}

bool Admitter::QuotaAllows(int leaf, int f, int64_t milli, std::string* why, int* blocker) const {
  if (!managed_[f]) return true;
  int at = -1;
  const bool allows = QuotaWalk(
      leaf, milli,
      [this, f](const QueueNode& q) { return q.usage[f] + (count_reserved_ ? q.reserved[f] : 0); },
      [f](const QueueNode& q) { return q.guaranteed[f]; },
      [f](const QueueNode& q) { return q.borrow_limit[f]; },
      [&](const QueueNode& sib, std::string* how) {
        const int64_t unused = std::max<int64_t>(
            0, sib.guaranteed[f] - sib.usage[f] - (count_reserved_ ? sib.reserved[f] : 0));
        const int64_t limited =
            sib.lend_limit[f] ? std::max<int64_t>(0, unused - *sib.lend_limit[f]) : 0;
        // What a reclaim of a moment ago freed beyond its own need stays (reclaim_hold_s).
        const int64_t held = Holding(sib, now_) ? std::min(unused, sib.reclaim_room[f]) : 0;
        const int64_t kept = std::max(limited, held);
        if (how && kept > 0)
          *how = KeptWhy(sib, held > limited,
                         GpuAmount(kept) + (kept == kMilliPerGpu ? " GPU" : " GPUs"));
        return kept;
      },
      flavor_name(f), GpuAmount, " GPUs", false, why, &at, f);
  if (blocker && at >= 0) *blocker = at;
  // (What it counts as held includes what preemptors there will take once their victims stop.)
  if (!allows && why && at >= 0 && queues_[at].reserved[f] > 0)
    *why += " (" + GpuAmount(queues_[at].reserved[f]) + " of them for preemptors whose " +
            "victims are stopping)";
  return allows;
}

bool Admitter::ResourceAllows(int leaf, int r, int64_t amount, std::string* why,
                              int* blocker) const {
  if (!queues_[leaf].res_limited[r] || amount == 0) return true;
  const auto used = [this, r](const QueueNode& q) {
    return (r == 0 ? q.cpu : q.memory) + (count_reserved_ ? q.res_reserved[r] : 0);
  };
  return QuotaWalk(
      leaf, amount, used, [r](const QueueNode& q) { return q.res_guaranteed[r]; },
      [r](const QueueNode& q) { return q.res_borrow[r]; },
      [&](const QueueNode& sib, std::string* how) {
        const int64_t unused = std::max<int64_t>(0, sib.res_guaranteed[r] - used(sib));
        const int64_t limited =
            sib.res_lend[r] ? std::max<int64_t>(0, unused - *sib.res_lend[r]) : int64_t{0};
        // What a reclaim of a moment ago freed beyond its own need stays (reclaim_hold_s).
        const int64_t held =
            Holding(sib, now_) ? std::min(unused, sib.res_reclaim_room[r]) : int64_t{0};
        const int64_t kept = std::max(limited, held);
        if (how && kept > 0)
          *how = KeptWhy(sib, held > limited,
                         ResourceAmount(r, kept) + (r == 0 ? " cores" : " of memory"));
        return kept;
      },
      ResourceName(r), [r](int64_t v) { return ResourceAmount(r, v); }, r == 0 ? " cores" : "",
      true, why, blocker);
}

bool Admitter::ResourcesAllow(const Entry& e, std::string* why) const {
  // Non-preemptible work does not borrow CPU or memory either (said first: that limit holds
  // whatever else frees).
  const QueueNode& q = queues_[e.leaf];
  for (int r = 0; r < 2 && Pinned(e); ++r) {
    if (!NonPreemptibleOverResource(e, r)) continue;
    const int64_t held = q.np_res[r] + (r == 0 ? e.cpu_milli : e.memory_mib);
    if (why)
      *why = NonPreemptibleRefusal(e.leaf, ResourceAmount(r, held) + "/" +
                                               ResourceAmount(r, q.res_guaranteed[r]) +
                                               (r == 0 ? " cores" : " of memory"));
    return false;
  }
  return ResourceAllows(e.leaf, 0, e.cpu_milli, why) &&
         ResourceAllows(e.leaf, 1, e.memory_mib, why);
}

bool Admitter::NonPreemptibleOver(const Entry& e, int f) const {
  const QueueNode& q = queues_[e.leaf];
  return managed_[f] && q.np_usage[f] + e.gpu_milli > q.guaranteed[f];
}

bool Admitter::NonPreemptibleOverResource(const Entry& e, int r) const {
  const QueueNode& q = queues_[e.leaf];
  const int64_t amount = r == 0 ? e.cpu_milli : e.memory_mib;
  return q.res_limited[r] && amount > 0 && q.np_res[r] + amount > q.res_guaranteed[r];
}

std::string Admitter::PinnedWork(int q) const {
  const int zero = ZeroBudget(q);
  return zero == q   ? "work (its disruptionBudget of 0 lets none of it be evicted)"
         : zero >= 0 ? "work (the disruptionBudget of 0 of queue " + queues_[zero].spec.name +
                           " above it lets none of it be evicted)"
                     : "non-preemptible work";
}

int Admitter::ZeroBudget(int q) const {
  for (int a = q; a >= 0; a = queues_[a].parent)
    if (queues_[a].spec.disruption_budget == 0) return a;
  return -1;
}

int Admitter::BudgetSpent(int q, const std::map<int, int>& counted, const std::map<int, int>& also,
                          bool staged) const {
  for (int a = q; a >= 0; a = queues_[a].parent) {
    const int budget = queues_[a].spec.disruption_budget;
    if (budget < 0 || (staged && budget > 0)) continue;
    int stopping = queues_[a].evicting_count_below;
    for (const std::map<int, int>* m : {&counted, &also})
      for (auto [leaf, n] : *m)
        if (Under(leaf, a)) stopping += n;
    if (stopping >= budget) return a;
  }
  return -1;
}

std::string Admitter::NonPreemptibleRefusal(int leaf, const std::string& held) const {
  const QueueNode& q = queues_[leaf];
  return "queue " + q.spec.name + "'s " + PinnedWork(leaf) + " would hold " + held +
         ", past its guarantee: " + kNonPreemptibleBorrows;
}

double Admitter::Key(int q) const {
  double beta = config_.usage_half_life_s > 0 ? config_.history_weight : 0.0;
  const double blend = (1 - beta) * dominant_share(q) + beta * queues_[q].history;
  // (Weight 0: unweighted; PickLeaf puts such a queue after its siblings with a weight.)
  return queues_[q].spec.weight > 0 ? blend / queues_[q].spec.weight : blend;
}

int Admitter::Tier(int q, int64_t ask) const {
  // (Best-effort work, which any other queue reclaims, last. Work that asks no GPU goes first
  // while its queue is below its GPU guarantee.)
  if (queues_[q].spec.best_effort) return 2;
  const int64_t used = queues_[q].gpu, guaranteed = guaranteed_milli(q);
  return (ask > 0 ? used + ask <= guaranteed : used < guaranteed) ? 0 : 1;
}

Admitter::Pick Admitter::PickAmong(const std::vector<int>& level) {
  Pick pick;
  std::tuple<int, int, bool, double, int> best_key;
  for (int c : level) {
    const Pick below = PickBelow(c);
    if (below.leaf < 0) continue;
    // (Past their guarantees, by over-quota priority, then queues with a weight before those
    // without, then by weighted share.)
    const QueueSpec& spec = queues_[c].spec;
    const int tier = Tier(c, below.ask);
    std::tuple<int, int, bool, double, int> k{tier, tier == 1 ? -spec.priority : 0,
                                              tier == 1 && !(spec.weight > 0), Key(c), c};
    if (pick.leaf < 0 || k < best_key) pick = below, best_key = k;
  }
  return pick;
}

Admitter::Pick Admitter::PickBelow(int q) {
  if (pick_[q].leaf != -2) return pick_[q];
  Pick pick;
  const QueueNode& n = queues_[q];
  if (n.active > 0 && is_leaf(q)) {
    const auto it = cursor_[q] ? n.pending.upper_bound(*cursor_[q]) : n.pending.begin();
    pick.leaf = q;
    if (it != n.pending.end()) pick.id = std::get<2>(*it), pick.ask = entries_[pick.id].gpu_milli;
  } else if (n.active > 0) {
    pick = PickAmong(n.children);
  }
  return pick_[q] = pick;
}

Admitter::Pick Admitter::PickLeaf() { return PickAmong(roots_); }

void Admitter::ForgetPick(int q) {
  if (pick_.size() != queues_.size()) return;  // (outside a cycle's loop)
  for (; q >= 0; q = queues_[q].parent) pick_[q].leaf = -2;
}

void Admitter::Deactivate(int leaf) {
  if (queues_[leaf].active <= 0) return;
  ForgetPick(leaf);
  for (int q = leaf; q >= 0; q = queues_[q].parent) --queues_[q].active;
}

void Admitter::Enqueue(int id) {
  Entry& e = entries_[id];
  // Admitted before, it asks again for all its pods, on every model its request allows (an
  // admission narrows the pods' models to where its quota let it go then).
  if (e.narrowed || e.counts != e.full_counts) SetCounts(e, e.full_counts);
  e.narrowed = false;
  int prio = config_.strict_priority ? -e.spec.priority : 0;
  queues_[e.leaf].pending.insert({prio, e.arrival, id});
  ForgetPick(e.leaf);
}

void Admitter::Dequeue(int id) {
  Entry& e = entries_[id];
  int prio = config_.strict_priority ? -e.spec.priority : 0;
  queues_[e.leaf].pending.erase({prio, e.arrival, id});
  ForgetPick(e.leaf);
}

Result<int> Admitter::LeafFor(const Workload& spec) const {
  const int leaf = QueueIndex(spec.queue.str());
  if (leaf < 0)
    return NotFound("workload " + spec.name.str() + ": unknown queue \"" + spec.queue.str() + "\"");
  if (!is_leaf(leaf))
    return InvalidArgument("workload " + spec.name.str() + ": queue \"" + spec.queue.str() +
                           "\" has child queues; workloads wait in leaf queues");
  return leaf;
}

Result<int> Admitter::Submit(const Workload& spec, double now, SubmitOptions options) {
  ASSIGN_OR_RETURN(const int leaf, LeafFor(spec));
  Entry e;
  e.spec = spec;
  e.leaf = leaf;
  e.arrival = now;
  e.options = options;
  int id = static_cast<int>(entries_.size());
  for (const PodSet& ps : spec.pod_sets) {
    Result<PodRequest> r = state_.MakeRequest(ps, spec.tenant);
    if (!r.ok()) {
      e.phase = Phase::kInfeasible;
      ++queues_[leaf].infeasible;
      e.reason = "pod set " + ps.name + ": " + r.status().message();
      entries_.push_back(std::move(e));
      return id;
    }
    std::string why;
    if (!FitsSomeEmptyNode(state_, *r, &why)) {
      e.phase = Phase::kInfeasible;
      ++queues_[leaf].infeasible;
      e.reason = "pod set " + ps.name + ": " + why;
      entries_.push_back(std::move(e));
      return id;
    }
    e.set_request.push_back(*r);
    e.full_counts.push_back(ps.count);
    e.min_counts.push_back(ps.least());
  }
  // Whether it can ever start is judged at the fewest pods it may start with (partial
  // admission); Enqueue asks for all of them.
  SetCounts(e, e.min_counts);
  // A workload of several pods can never fit if the fleet has fewer places for them than pods.
  if (std::string why; e.pods.size() > 1 && !FleetHoldsPods(state_, e.pods, &why)) {
    e.phase = Phase::kInfeasible;
    ++queues_[leaf].infeasible;
    e.reason = why;
    entries_.push_back(std::move(e));
    return id;
  }
  // A gang (or pods placed together) that no domain of the level it requires could hold even
  // empty: it would wait forever (a user-style review saw one hold a StrictFIFO queue).
  if (e.spec.gang || e.pods.size() > 1) {
    if (std::string why; !SomeDomainHolds(state_, e.pods, e.spec.topology, &why)) {
      e.phase = Phase::kInfeasible;
      ++queues_[leaf].infeasible;
      e.reason = TogetherSaid(e.spec.gang, why);
      entries_.push_back(std::move(e));
      return id;
    }
  }
  // More GPUs than its queue may ever hold in every flavour it could be charged to: it would
  // wait forever (and, in a StrictFIFO queue, hold everything behind it). What a queue may
  // hold is decided as QuotaAllows decides it with nothing else running: up the chain, within
  // some queue's guarantee, never past a borrowing limit, and no further than the root's
  // guarantee.
  // (By the least it could be charged: a memory share on the largest GPU it may use.)
  for (const PodRequest& p : e.pods) {
    if (p.kind == DeviceKind::kNone) continue;
    std::string why;
    int64_t first_need = -1;  // (what the refusal's first flavour says it counts as)
    bool holdable = UnchargedModels(p) != 0;  // no quota limits it there
    for (int f : CandidateFlavors(p)) {
      if (holdable) break;
      // (The least it costs on this flavour's models: a flavour is charged only for those.)
      const int64_t need = LeastCharge(e, FlavorModels(f, p));
      if (!managed_[f]) {
        holdable = true;
        break;
      }
      std::string limit;
      // (Non-preemptible work never borrows: its queue's guarantee is all it may hold.)
      if (Pinned(e) && need > queues_[leaf].guaranteed[f])
        limit = "queue " + queues_[leaf].spec.name + "'s guarantee, " +
                GpuAmount(queues_[leaf].guaranteed[f]) + ", is the most its " + PinnedWork(leaf) +
                " may hold";
      // What the queues beside its path keep by their lending limits, which they keep from it
      // even with nothing running (a trial's queue, its only sibling lending nothing, waited
      // "as room frees" for more than its guarantee for ever). (Summed per level from
      // KeptByChildren: a submission stays O(depth); the names only where it is refused.)
      const auto keeps = [&](int c) {
        const QueueNode& k = queues_[c];
        return k.lend_limit[f] && k.guaranteed[f] > *k.lend_limit[f]
                   ? k.guaranteed[f] - *k.lend_limit[f]
                   : int64_t{0};
      };
      // ", K of which queue(s) ... keep(s) by ... lending limit(s)" up to level `top`.
      const auto kept_said = [&](int top, int64_t kept) {
        if (kept <= 0) return std::string();
        std::string names;
        int count = 0;
        for (int n = leaf, below = -1; n >= 0; below = n, n = queues_[n].parent) {
          for (int c : queues_[n].children)
            if (c != below && keeps(c) > 0) {
              names += (names.empty() ? "" : ", ") + queues_[c].spec.name;
              ++count;
            }
          if (n == top) break;
        }
        return ", " + GpuAmount(kept) + " of which " +
               (count == 1 ? "queue " + names + " keeps by its lending limit"
                           : "queues " + names + " keep by their lending limits");
      };
      int64_t kept = 0;
      for (int n = leaf, below = -1; n >= 0 && limit.empty(); below = n, n = queues_[n].parent) {
        const QueueNode& q = queues_[n];
        kept += KeptByChildren(n, f) - (below >= 0 ? keeps(below) : 0);
        if (need <= q.guaranteed[f] - kept) {
          holdable = true;
          break;
        }
        // (What the queues below it keep by their lending limits is not its to hand on.)
        if (q.borrow_limit[f] && need - (q.guaranteed[f] - kept) > *q.borrow_limit[f]) {
          limit = kept > 0
                      ? "queue " + q.spec.name + " (guarantee " + GpuAmount(q.guaranteed[f]) +
                            kept_said(n, kept) + "; borrowing limit " +
                            GpuAmount(*q.borrow_limit[f]) + ") may hold at most " +
                            GpuAmount(
                                std::max<int64_t>(0, q.guaranteed[f] - kept + *q.borrow_limit[f])) +
                            " for queue " + queues_[leaf].spec.name
                      : "queue " + q.spec.name + " (guarantee " + GpuAmount(q.guaranteed[f]) +
                            " + borrowing limit " + GpuAmount(*q.borrow_limit[f]) +
                            ") may hold at most " + GpuAmount(q.guaranteed[f] + *q.borrow_limit[f]);
          break;
        }
        if (q.parent < 0 && q.spec.best_effort) {
          holdable = true;
          break;
        }
        // (What trees keep by their lending limits, said as at a tree's top.)
        if (n == fleet_queue_)
          limit = "the fleet has " + GpuAmount(q.guaranteed[f]) + kept_said(n, kept);
        else if (q.parent < 0)
          limit = "queue " + q.spec.name +
                  " (its guarantee, the top of the tree) may hold at most " +
                  GpuAmount(q.guaranteed[f]) + kept_said(n, kept) + FlavourNamedElsewhere(n, f);
      }
      if (holdable) break;
      // (Each flavour it could use, with its limit.)
      // (Where it counts for more than the compute it asks, both: a trial read "asks for 16
      // GPUs" of two 1-GPU pods of a tenant with exclusiveNodes.)
      int64_t compute = 0;
      for (const PodRequest& q : e.pods) compute += q.total_gpu_milli();
      const auto gpus = [](int64_t m) {
        return GpuAmount(m) + (m == kMilliPerGpu ? " GPU" : " GPUs");
      };
      if (why.empty()) first_need = need;
      if (why.empty())
        why = "asks for " + (need > compute ? gpus(compute) + " of compute, which count" +
                                                  (compute == kMilliPerGpu ? "s" : "") + " as " +
                                                  GpuAmount(need) + " of quota; "
                                            : gpus(need) + "; ");
      else
        why += "; ";
      why += "of " + flavor_name(f) + ", " + limit;
    }
    if (!holdable && !why.empty()) {
      e.phase = Phase::kInfeasible;
      ++queues_[leaf].infeasible;
      e.reason = why + ChargeNote(e, first_need);
      entries_.push_back(std::move(e));
      return id;
    }
    break;
  }
  // Likewise more CPU or memory than its queue may ever hold.
  for (int r = 0; r < 2; ++r) {
    const int64_t amount = r == 0 ? e.cpu_milli : e.memory_mib;
    if (!queues_[leaf].res_limited[r] || amount == 0) continue;
    const auto fmt = [r](int64_t v) { return ResourceAmount(r, v) + (r == 0 ? " cores" : ""); };
    if (const QueueNode& q = queues_[leaf]; Pinned(e) && amount > q.res_guaranteed[r]) {
      e.phase = Phase::kInfeasible;
      ++queues_[leaf].infeasible;
      e.reason = "asks for " + fmt(amount) + " of " + ResourceName(r) + "; queue " + q.spec.name +
                 "'s guarantee, " + fmt(q.res_guaranteed[r]) + ", is the most its " +
                 PinnedWork(leaf) + " may hold";
      entries_.push_back(std::move(e));
      return id;
    }
    for (int n = leaf; n >= 0; n = queues_[n].parent) {
      const QueueNode& q = queues_[n];
      if (amount <= q.res_guaranteed[r]) break;
      const bool capped = q.res_borrow[r] && amount - q.res_guaranteed[r] > *q.res_borrow[r];
      if (!capped && q.parent >= 0 && q.parent != fleet_queue_) continue;
      e.phase = Phase::kInfeasible;
      ++queues_[leaf].infeasible;
      e.reason = "asks for " + fmt(amount) + " of " + ResourceName(r) + "; queue " + q.spec.name +
                 " may hold at most " + fmt(q.res_guaranteed[r] + (capped ? *q.res_borrow[r] : 0));
      entries_.push_back(std::move(e));
      return id;
    }
  }
  e.reason = kNextCycle;
  entries_.push_back(std::move(e));
  Enqueue(id);
  return id;
}

Result<int> Admitter::Restore(const Workload& spec, const std::vector<Assignment>& assign,
                              double admitted_at, SubmitOptions options, bool evicting) {
  ASSIGN_OR_RETURN(const int leaf, LeafFor(spec));
  Entry e;
  e.spec = spec;
  e.leaf = leaf;
  e.arrival = options.arrived_at >= 0 ? options.arrived_at : admitted_at;
  e.admitted_at = admitted_at;
  e.options = options;
  for (const PodSet& ps : spec.pod_sets) {
    ASSIGN_OR_RETURN(PodRequest r, state_.MakeBoundRequest(ps, spec.tenant));
    e.set_request.push_back(r);
    e.full_counts.push_back(ps.count);
    e.min_counts.push_back(ps.least());
  }
  // Admitted with fewer pods (partial admission): as many as it runs.
  bool counts_fit = options.pod_counts.size() == e.full_counts.size();
  for (size_t i = 0; counts_fit && i < e.full_counts.size(); ++i)
    counts_fit =
        options.pod_counts[i] >= e.min_counts[i] && options.pod_counts[i] <= e.full_counts[i];
  if (!options.pod_counts.empty() && !counts_fit)
    return InvalidArgument("workload " + spec.name.str() +
                           ": admitted pod counts outside its pod sets' minCount..count");
  std::vector<int> counts = counts_fit ? options.pod_counts : e.full_counts;
  // Pods that completed hold nothing: it is restored with the others, at that size for good.
  if (!options.completed.empty()) {
    if (options.completed.size() != counts.size())
      return InvalidArgument("workload " + spec.name.str() + ": completed pods for " +
                             std::to_string(options.completed.size()) + " pod sets, not " +
                             std::to_string(counts.size()));
    for (size_t i = 0; i < counts.size(); ++i) {
      if (options.completed[i] < 0 || options.completed[i] > counts[i])
        return InvalidArgument("workload " + spec.name.str() + ": " +
                               std::to_string(options.completed[i]) +
                               " completed pods in pod set " + spec.pod_sets[i].name + " of " +
                               std::to_string(counts[i]));
      counts[i] -= options.completed[i];
    }
    if (std::all_of(counts.begin(), counts.end(), [](int c) { return c == 0; }))
      return InvalidArgument("workload " + spec.name.str() + ": all its pods completed");
    e.min_counts = counts;
    e.options.may_grow = false;
    e.options.may_shrink = false;
  }
  SetCounts(e, counts);
  if (assign.size() != e.pods.size())
    return InvalidArgument("workload " + spec.name.str() + ": " + std::to_string(assign.size()) +
                           " assignments for " + std::to_string(e.pods.size()) + " pods");
  e.assign = assign;
  e.ready = true;
  const int id = static_cast<int>(entries_.size());
  entries_.push_back(std::move(e));
  for (size_t i = 0; i < assign.size(); ++i) state_.Apply(assign[i], entries_[id].pods[i]);
  Hold(id);
  Charge(id, +1);
  entries_[id].options.leaving = evicting && options.leaving;
  if (evicting) {
    entries_[id].phase = Phase::kEvicting;
    entries_[id].reason = "being preempted";
    CountEvicting(id, +1);
  } else {
    entries_[id].phase = Phase::kAdmitted;
    entries_[id].reason = "admitted";
    AddRunning(id);
    if (entries_[id].counts != entries_[id].full_counts) partial_running_.insert(id);
  }
  // Running in part where no domain its topology requires could hold one pod more even empty:
  // it never grows, as TryPartial finds of one it admits (the server restores its work each
  // cycle; a user-style trial's was said to grow "not now" beside a leaf too small for good).
  if (Entry& r = entries_[id]; !evicting && r.spec.topology.required && r.counts != r.full_counts) {
    std::vector<int> next = r.counts;
    for (size_t i = 0; i < next.size(); ++i)
      if (next[i] < r.full_counts[i]) {
        ++next[i];
        break;
      }
    Entry one_more;
    one_more.set_request = r.set_request;
    SetCounts(one_more, next);
    if (std::string why; !SomeDomainHolds(state_, one_more.pods, r.spec.topology, &why))
      r.never_above = std::accumulate(r.counts.begin(), r.counts.end(), 0);
  }
  // Grown since it started: its least size until then (what it held before is not kept).
  Entry& r = entries_[id];
  const double began = std::max(r.admitted_at, r.options.started_at);
  // (Not with pods completed: what runs on is its size from its start.)
  if (options.resized_at > began && options.completed.empty()) {
    int64_t least = 0;
    for (size_t i = 0; i < r.set_request.size(); ++i)
      least += r.min_counts[i] * r.set_request[i].total_charge_milli();
    r.sizes = {{began, least}, {options.resized_at, r.gpu_milli}};
  }
  return id;
}

Result<int> Admitter::RestoreFragment(int parent,
                                      const std::vector<std::pair<int, Assignment>>& pods) {
  if (parent < 0 || parent >= static_cast<int>(entries_.size()) ||
      entries_[parent].fragment_of >= 0)
    return InvalidArgument("fragment of an unknown workload");
  Entry f;
  {
    const Entry& w = entries_[parent];
    f.spec = w.spec;
    f.leaf = w.leaf;
    f.options = w.options;
    f.arrival = w.arrival;
    f.admitted_at = w.admitted_at;
    for (const auto& [set, a] : pods) {
      if (set < 0 || set >= static_cast<int>(w.set_request.size()))
        return InvalidArgument("workload " + w.spec.name.str() + ": no pod set " +
                               std::to_string(set));
      f.pods.push_back(w.set_request[set]);
      f.assign.push_back(a);
    }
  }
  for (const PodRequest& p : f.pods) {
    f.gpu_milli += p.total_charge_milli();
    f.cpu_milli += p.cpu_milli;
    f.memory_mib += p.memory_mib;
  }
  f.fragment_of = parent;
  f.options.leaving = false;  // (it stops for a preemptor, whatever its workload does)
  f.ready = true;
  f.phase = Phase::kEvicting;
  f.reason = "being stopped (elastic shrink)";
  const int id = static_cast<int>(entries_.size());
  entries_.push_back(std::move(f));
  for (size_t i = 0; i < entries_[id].assign.size(); ++i)
    state_.Apply(entries_[id].assign[i], entries_[id].pods[i]);
  Hold(id);
  Charge(id, +1);
  CountEvicting(id, +1);
  return id;
}

void Admitter::Resize(int id, const std::vector<int>& counts, std::vector<PodRequest> pods,
                      std::vector<Assignment> assign) {
  Entry& e = entries_[id];
  if (e.sizes.empty())
    e.sizes.push_back({std::max(e.admitted_at, e.options.started_at), e.gpu_milli});
  Charge(id, -1);
  for (const Assignment& a : e.assign) {
    std::vector<int>& on = node_workloads_[a.node];
    on.erase(std::remove(on.begin(), on.end(), id), on.end());
  }
  SetCounts(e, counts);
  e.pods = std::move(pods);
  e.assign = std::move(assign);
  Charge(id, +1);
  Hold(id);
  e.sizes.push_back({now_, e.gpu_milli});
}

int Admitter::Split(int v, const std::vector<int>& cut) {
  Entry f;
  {
    Entry& w = entries_[v];
    f.spec = w.spec;
    f.leaf = w.leaf;
    f.options = w.options;
    f.arrival = w.arrival;
    f.admitted_at = w.admitted_at;
    f.ready = true;
    f.narrowed = true;
    f.fragment_of = v;
    f.phase = Phase::kAdmitted;
    std::vector<PodRequest> kept_pods;
    std::vector<Assignment> kept_assign;
    std::vector<int> counts = w.counts;
    for (size_t s = 0, i = 0; s < w.counts.size(); ++s) {
      for (int k = 0; k < w.counts[s]; ++k, ++i) {
        const bool leaves = k >= w.counts[s] - cut[s];
        (leaves ? f.pods : kept_pods).push_back(w.pods[i]);
        (leaves ? f.assign : kept_assign).push_back(w.assign[i]);
        if (leaves) f.fragment_pods.push_back({static_cast<int>(s), k});
      }
      counts[s] -= cut[s];
    }
    // What the pods taken lose counts from when they joined, not from the workload's start (a
    // trial saw a shrink of pods grown back two hours in said to lose a quarter more than they
    // ran): when they started, where that is known (the server's startedPods), else when the
    // workload last reached its size now (in one Admitter's memory, its sizes: the last pods
    // are the ones growth added; a restored one's sizes name its last resize, a shrink's too,
    // so they are not read for it).
    double joined = -1;
    bool known = !w.options.pod_started.empty();
    std::vector<std::pair<double, int64_t>> starts;  // (when, milli-GPUs) of each pod taken
    for (size_t i = 0; i < f.fragment_pods.size(); ++i) {
      const auto [set, k] = f.fragment_pods[i];
      const auto it =
          w.options.pod_started.find(w.spec.pod_sets[set].name + "-" + std::to_string(k));
      if (it == w.options.pod_started.end()) {
        known = false;
        break;
      }
      joined = joined < 0 ? it->second : std::min(joined, it->second);
      starts.push_back({it->second, f.pods[i].total_charge_milli()});
    }
    // Each from its own start (a trial's shrink of two pods grown in and two there from the
    // start counted all four from the first start): the fragment grew as they joined.
    if (known && starts.size() > 1) {
      std::sort(starts.begin(), starts.end());
      int64_t held = 0;
      for (const auto& [when, milli] : starts) {
        held += milli;
        if (!f.sizes.empty() && f.sizes.back().first == when)
          f.sizes.back().second = held;
        else
          f.sizes.push_back({when, held});
      }
    }
    if (!known && w.options.pod_started.empty() && w.options.resized_at < 0 && !w.sizes.empty()) {
      joined = w.sizes.back().first;
      for (size_t k = w.sizes.size(); k-- > 0 && w.sizes[k].second >= w.gpu_milli;)
        joined = w.sizes[k].first;
    } else if (!known) {
      joined = -1;
    }
    f.joined_at = joined;
    Resize(v, counts, std::move(kept_pods), std::move(kept_assign));
    w.shrunk_at = now_;
    partial_running_.insert(v);
  }
  for (const PodRequest& p : f.pods) {
    f.gpu_milli += p.total_charge_milli();
    f.cpu_milli += p.cpu_milli;
    f.memory_mib += p.memory_mib;
  }
  const int id = static_cast<int>(entries_.size());
  entries_.push_back(std::move(f));
  Charge(id, +1);
  Hold(id);
  return id;
}

void Admitter::Charge(int id, int sign) {
  Entry& e = entries_[id];
  if (sign > 0) {
    // A fraction placed is charged as on the GPU it got (it waited charged as on the smallest
    // it could get: never less), so that quotas, shares and the meter agree.
    int64_t total = 0;
    for (size_t i = 0; i < e.pods.size(); ++i) {
      PodRequest& p = e.pods[i];
      if (p.kind == DeviceKind::kFraction && i < e.assign.size() && e.assign[i].node >= 0 &&
          e.assign[i].devices.size() == 1) {
        const Node& node = state_.node(e.assign[i].node);
        const int d = e.assign[i].devices[0].device;
        if (d >= 0 && d < node.gpu_count())
          p.charge_milli = FractionCharge(
              e.assign[i].devices[0].milli, p.gpu_memory_mib, node.devices[d].memory.value(),
              p.tenant >= 0 && state_.tenant(p.tenant).trust == TrustLevel::kUntrusted);
      }
      // A tenant with exclusiveNodes: as on the node it got (ClusterState::ExclusiveCharge).
      if (p.num_gpu > 0 && p.tenant >= 0 && state_.tenant(p.tenant).exclusive_nodes &&
          i < e.assign.size() && e.assign[i].node >= 0) {
        const int64_t base = p.kind == DeviceKind::kFraction ? p.charge_milli : p.gpu_milli;
        p.charge_milli = base > 0 ? base : p.gpu_milli;
        p.charge_rest = 0;
        p.ChargeAtLeast(state_.ExclusiveCharge(p, e.assign[i].node));
      }
      total += p.total_charge_milli();
    }
    if (!e.pods.empty()) e.gpu_milli = total;
    e.charged.clear();
    for (size_t i = 0; i < e.pods.size(); ++i) {
      int f = FlavorOf(e.pods[i], state_.node_model(e.assign[i].node));
      if (f < 0) continue;
      auto it = std::find_if(e.charged.begin(), e.charged.end(),
                             [f](const auto& c) { return c.first == f; });
      if (it == e.charged.end()) {
        e.charged.push_back({f, e.pods[i].total_charge_milli()});
      } else {
        it->second += e.pods[i].total_charge_milli();
      }
    }
  }
  if (Pinned(e)) {  // (at its leaf: see NonPreemptibleOver)
    QueueNode& n = queues_[e.leaf];
    for (auto [f, milli] : e.charged) n.np_usage[f] += sign * milli;
    n.np_res[0] += sign * e.cpu_milli;
    n.np_res[1] += sign * e.memory_mib;
  }
  for (int q = e.leaf; q >= 0; q = queues_[q].parent) {
    QueueNode& n = queues_[q];
    for (auto [f, milli] : e.charged) n.usage[f] += sign * milli;
    n.gpu += sign * e.gpu_milli;
    n.cpu += sign * e.cpu_milli;
    n.memory += sign * e.memory_mib;
  }
  ForgetPick(e.leaf);
}

void Admitter::CountEvicting(int id, int sign) {
  const Entry& e = entries_[id];
  QueueNode& q = queues_[e.leaf];
  q.evicting += sign;
  for (int a = e.leaf; a >= 0; a = queues_[a].parent) queues_[a].evicting_count_below += sign;
  q.evicting_gpu += sign * e.gpu_milli;
  for (auto [f, milli] : e.charged) {
    q.evicting_usage[f] += sign * milli;
    if (e.options.leaving) q.leaving_usage[f] += sign * milli;
    for (int a = e.leaf; a >= 0; a = queues_[a].parent) {
      queues_[a].evicting_below[f] += sign * milli;
      if (e.options.leaving) queues_[a].leaving_below[f] += sign * milli;
    }
  }
  for (int r = 0; r < 2; ++r) {
    const int64_t amount = sign * (r == 0 ? e.cpu_milli : e.memory_mib);
    q.res_evicting[r] += amount;
    if (e.options.leaving) q.res_leaving[r] += amount;
    for (int a = e.leaf; a >= 0; a = queues_[a].parent) queues_[a].res_evicting_below[r] += amount;
  }
}

void Admitter::Hold(int id) {
  for (const Assignment& a : entries_[id].assign) {
    std::vector<int>& on = node_workloads_[a.node];
    if (std::find(on.begin(), on.end(), id) == on.end()) on.push_back(id);
  }
}

void Admitter::Unhold(int id) {
  Entry& e = entries_[id];
  for (size_t i = 0; i < e.assign.size(); ++i) {
    freed_log_.push_back(e.assign[i].node);
    state_.Release(e.assign[i], e.pods[i]);
    std::vector<int>& on = node_workloads_[e.assign[i].node];
    on.erase(std::remove(on.begin(), on.end(), id), on.end());
  }
}

void Admitter::UpdateHistory(double now) {
  if (config_.usage_half_life_s > 0 && last_history_ >= 0 && now > last_history_) {
    double a = std::exp2(-(now - last_history_) / config_.usage_half_life_s);
    for (int q = 0; q < queue_count(); ++q)
      queues_[q].history = a * queues_[q].history + (1 - a) * dominant_share(q);
  }
  last_history_ = now;
}

void Admitter::RestoreHistory(const std::map<std::string, double>& by_queue, double at) {
  for (const auto& [name, value] : by_queue) {
    const int q = QueueIndex(name);
    if (q >= 0) queues_[q].history = value;
  }
  last_history_ = at;
}

// Queue q's reclaim hold is on at time t (reclaim_hold_s).
bool Admitter::Holding(const QueueNode& q, double t) const {
  return config_.reclaim_hold_s > 0 && q.reclaimed_at >= 0 &&
         t < q.reclaimed_at + config_.reclaim_hold_s;
}

Admitter::ReclaimRecord Admitter::reclaim_record(int q) const {
  ReclaimRecord r;
  r.at = queues_[q].reclaimed_at;
  for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
    if (queues_[q].reclaim_room[f] > 0) r.room_milli[flavor_name(f)] = queues_[q].reclaim_room[f];
  for (int k = 0; k < 2; ++k)
    if (queues_[q].res_reclaim_room[k] > 0)
      r.room_milli[ResourceName(k)] = queues_[q].res_reclaim_room[k];
  return r;
}

void Admitter::RestoreReclaims(const std::map<std::string, ReclaimRecord>& by_queue, double now) {
  for (const auto& [name, record] : by_queue) {
    const int q = QueueIndex(name);
    if (q < 0) continue;
    // A time ahead of now (a clock that ran fast, a record written by hand) counts as now, so a
    // hold never outlasts its length.
    queues_[q].reclaimed_at = std::min(record.at, now);
    if (Holding(queues_[q], now)) MarkMayKeep(q);
    for (int f = 0; f < static_cast<int>(flavors_.size()); ++f) {
      auto it = record.room_milli.find(flavor_name(f));
      queues_[q].reclaim_room[f] =
          it == record.room_milli.end() ? 0 : std::max<int64_t>(0, it->second);
    }
    for (int k = 0; k < 2; ++k) {
      auto it = record.room_milli.find(ResourceName(k));
      queues_[q].res_reclaim_room[k] =
          it == record.room_milli.end() ? 0 : std::max<int64_t>(0, it->second);
    }
  }
}

// The queue's workload `id` reclaims `victims`: what those of other queues free beyond its own
// need, per flavour and of CPU and memory, is kept for its queue (and the queues above it) for
// reclaim_hold_s. Within a hold, what an earlier reclaim kept counts only as far as the queue has
// not used it since, so a queue that reclaims again and again does not come to hold all its unused
// guarantee.
void Admitter::NoteReclaim(int id, const std::vector<int>& victims, double now, uint64_t flavors,
                           unsigned resources) {
  const Entry& e = entries_[id];
  std::vector<int64_t> excess(flavors_.size(), 0);
  int64_t res_excess[2] = {0, 0};
  bool freed = false;
  for (int v : victims) {
    const Entry& w = entries_[v];
    if (w.leaf == e.leaf) continue;  // its own lower-priority work: not a reclaim
    for (auto [f, milli] : w.charged) {
      if (flavors == 0 || (f < 64 && !(flavors >> f & 1))) continue;
      excess[f] += milli;
      freed |= milli > 0;
    }
    for (int r = 0; r < 2; ++r) {
      if (!(resources >> r & 1)) continue;
      res_excess[r] += r == 0 ? w.cpu_milli : w.memory_mib;
      freed = true;
    }
  }
  if (!freed) return;
  // It will be charged where its victims freed the most.
  const auto most = std::max_element(excess.begin(), excess.end());
  if (most != excess.end() && *most > 0) *most -= e.gpu_milli;
  for (int r = 0; r < 2; ++r)
    if (resources >> r & 1) res_excess[r] -= r == 0 ? e.cpu_milli : e.memory_mib;
  for (int q = e.leaf; q >= 0; q = queues_[q].parent) {
    QueueNode& n = queues_[q];
    const bool within = Holding(n, now);
    for (size_t f = 0; f < excess.size(); ++f) {
      const int64_t unused = std::max<int64_t>(0, n.guaranteed[f] - n.usage[f]);
      const int64_t carried = within ? std::min(n.reclaim_room[f], unused) : 0;
      n.reclaim_room[f] = carried + std::max<int64_t>(0, excess[f]);
    }
    for (int r = 0; r < 2; ++r) {
      const int64_t unused =
          std::max<int64_t>(0, n.res_guaranteed[r] - (r == 0 ? n.cpu : n.memory));
      const int64_t carried = within ? std::min(n.res_reclaim_room[r], unused) : 0;
      n.res_reclaim_room[r] = carried + std::max<int64_t>(0, res_excess[r]);
    }
    n.reclaimed_at = now;
    if (Holding(n, now)) MarkMayKeep(q);
  }
}

CycleResult Admitter::Cycle(double now, int max_admissions) {
  CycleResult out;
  UpdateHistory(now);
  // A hold that ended since the last cycle lets borrowers in again: wake those parked on quota.
  for (const QueueNode& q : queues_)
    if (Holding(q, now_) && !Holding(q, now)) wake_quota_ = true;
  now_ = now;
  // (Holds that ended keep nothing: the quota walk no longer asks those queues.)
  RebuildKeepers(now);

  // Gangs whose pods did not all start in time give their devices back and wait again.
  for (int id : std::vector<int>(unready_.begin(), unready_.end())) {
    Entry& e = entries_[id];
    if (now - e.admitted_at < config_.gang_timeout_s) continue;
    GiveBack(id);
    e.arrival = now;  // to the back of its queue, behind what waited meanwhile
    e.reason = "released: not all pods were ready within the gang timeout of " +
               std::to_string(static_cast<int64_t>(config_.gang_timeout_s)) + " s";
    e.history = e.reason;
    Enqueue(id);
    out.released.push_back(id);
  }
  // HoldAndDrain: what a stopped queue runs is evicted.
  for (int q = 0; q < queue_count(); ++q) {
    if (!is_leaf(q) || queues_[q].stop != StopPolicy::kHoldAndDrain) continue;
    const std::string why = "queue " + queues_[queues_[q].stopped_by].spec.name +
                            " is draining (stopPolicy: HoldAndDrain)";
    for (int v : std::vector<int>(queues_[q].running.begin(), queues_[q].running.end()))
      MarkEvicting(v, -1, why, out);
  }
  // A reservation holds, from now, what freed of its plan since the last cycle (before Wake:
  // that room is not news to parked work).
  for (int id : reservations_)
    if (entries_[id].reserving && entries_[id].nominated && entries_[id].phase == Phase::kPending)
      HoldPlan(id);
  Wake();

  int budget =
      config_.max_attempts_per_cycle > 0 ? config_.max_attempts_per_cycle : 4 * max_admissions + 64;
  std::map<uint64_t, std::string> failed;
  preempt_tried_.assign(queues_.size(), 0);
  reclaim_tried_.assign(queues_.size(), 0);
  consolidations_left_ = config_.consolidation ? config_.consolidation_searches_per_cycle : 0;
  reservation_start_.clear();
  backfill_failed_.clear();
  backfills_left_ = kBackfillTriesPerCycle;
  victim_cache_.clear();
  stopping_names_.clear();
  hold_borrowing_ = false;
  held_roots_.clear();
  region_of_.clear();
  held_regions_.clear();
  held_nodes_.assign(state_.node_count(), 0);
  held_nodes_of_ = 0;
  held_everywhere_ = false;
  reach_of_.clear();
  off_held_nodes_.clear();
  off_held_tiers_.clear();
  off_held_left_ = kOffHeldTriesPerCycle;
  held_swap_queues_.clear();
  partial_failed_.clear();
  failed_searches_.clear();
  out_of_reach_.clear();
  lenders_.clear();

  // Preemptors whose victims have all stopped go first — in a StrictFIFO queue only its head
  // (work put back ahead of it, an evicted older workload, goes before it), and a head that
  // does not start holds its queue back for the cycle.
  std::vector<int> nominated;
  nominated.swap(nominated_);
  std::vector<std::pair<int, int>> held_by;  // (StrictFIFO leaf, the head that held it back)
  for (int id : nominated) {
    Entry& e = entries_[id];
    if (e.phase != Phase::kPending || !e.nominated) continue;
    if (queues_[e.leaf].stop != StopPolicy::kNone) {  // stopped meanwhile: no longer starts
      Unnominate(id);
      continue;
    }
    const bool strict = queues_[e.leaf].spec.strict_fifo;
    const auto& line = queues_[e.leaf].pending;
    const bool behind = strict && !line.empty() && std::get<2>(*line.begin()) != id;
    if (e.victims_left > 0 || behind || static_cast<int>(out.admitted.size()) >= max_admissions) {
      nominated_.push_back(id);
      // Its victims are still stopping: GPU room that frees meanwhile is not lent away either
      // (none is needed by a preemptor without GPUs, one that evicts for CPU or memory).
      if (e.victims_left > 0 && e.gpu_milli > 0 && !WouldBorrow(id) && !hold_borrowing_) {
        hold_borrowing_ = true;
        held_for_ = e.leaf;
      }
      if (e.victims_left > 0 && e.gpu_milli > 0 && !WouldBorrow(id)) {
        held_roots_.insert(TreeRoot(e.leaf));
        HoldRegion(id, e.pods);
      }
      continue;
    }
    // A reservation tried again: its room is not freed news unless the reservation leaves it
    // (logged each cycle, it woke every parked workload each cycle); and, finding no room again,
    // it holds no borrower back (what it needs is held on its own nodes).
    const bool was_reserving = e.reserving;
    std::set<int> reserved_nodes;
    if (was_reserving)
      for (const auto& [a, unused] : e.plan) reserved_nodes.insert(a.node);
    const bool hold_before = hold_borrowing_;
    const int held_for_before = held_for_;
    const std::set<int> held_roots_before = held_roots_;
    const size_t held_regions_before = held_regions_.size();
    Unnominate(id, /*log_freed=*/!was_reserving);
    ++out.attempts;
    // (`e` may not outlive TryAdmit: an elastic shrink adds entries.)
    const int leaf = e.leaf;
    e.continuing = !was_reserving;  // (a preemptor whose victims stopped; not a reservation)
    e.was_reserving = was_reserving;
    if (!was_reserving) TryAhead(id, now, out, failed, max_admissions, budget);
    const bool admitted = TryAdmit(id, now, out, failed);
    entries_[id].continuing = false;
    entries_[id].was_reserving = false;
    if (was_reserving) {
      const Entry& after = entries_[id];
      if (!admitted && after.reserving) {
        hold_borrowing_ = hold_before;
        held_for_ = held_for_before;
        held_roots_ = held_roots_before;
        RestoreHold(held_regions_before);
      }
      // What it no longer holds nor runs on is freed news.
      std::set<int> kept;
      for (const auto& [a, unused] : after.plan) kept.insert(a.node);
      if (admitted)
        for (const Assignment& a : after.assign) kept.insert(a.node);
      for (int n : reserved_nodes)
        if (!kept.count(n)) freed_log_.push_back(n);
    }
    if (!admitted && strict) held_by.push_back({leaf, id});
  }

  // Work parked for room that has waited past reserveAfter reserves (ReserveRoom): the first of
  // each leaf whose plan is found, in queue order, while reservations are left (two plans
  // searched a leaf and cycle at most; none once every reservation is taken).
  if (config_.reserve_after_s > 0) {
    for (int q = 0; q < queue_count(); ++q) {
      if (static_cast<int>(reservations_.size()) >= config_.max_reservations) break;
      if (!is_leaf(q) || queues_[q].stop != StopPolicy::kNone) continue;
      int searched = 0;
      const auto& parked = queues_[q].parked;
      for (auto it = parked.begin(); it != parked.end(); ++it) {
        const auto& k = *it;
        if (now - std::get<1>(k) < config_.reserve_after_s) {  // (its arrival)
          // (The rest of its priority arrived later still: on to the next priority.)
          it = parked.lower_bound({std::get<0>(k) + 1, -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<int>::min()});
          if (it == parked.end()) break;
          --it;
          continue;
        }
        const int id = std::get<2>(k);
        const Entry& e = entries_[id];
        if (e.parked != 1 || e.gpu_milli < 2 * kMilliPerGpu) continue;
        // (Back in its queue's line, nominated: tried first from the next cycle.)
        if (const std::vector<PodRequest> pods = e.pods; ReserveRoom(id, pods, {}, now)) {
          Unpark(id);
          break;
        }
        if (++searched == 2) break;
      }
    }
  }
  WakeForBackfill(now);
  for (QueueNode& q : queues_) q.active = 0;
  for (int q = 0; q < queue_count(); ++q) {
    if (!is_leaf(q) || queues_[q].pending.empty() || queues_[q].stop != StopPolicy::kNone) continue;
    for (int p = q; p >= 0; p = queues_[p].parent) ++queues_[p].active;
  }
  for (const auto& [leaf, head] : held_by) Deactivate(leaf);
  cursor_.assign(queues_.size(), std::nullopt);
  pick_.assign(queues_.size(), Pick{-2});
  // Held-back borrowers' quota refusals this cycle, by queue, charge and request shape.
  std::map<std::tuple<int, int64_t, uint64_t, int, int>, std::string> quota_refusals;
  while (static_cast<int>(out.admitted.size()) < max_admissions && out.attempts < budget) {
    const Pick pick = PickLeaf();
    if (pick.leaf < 0) break;
    const int leaf = pick.leaf;
    if (pick.id < 0) {
      Deactivate(leaf);
      continue;
    }
    const int id = pick.id;
    cursor_[leaf] = {config_.strict_priority ? -entries_[id].spec.priority : 0,
                     entries_[id].arrival, id};
    ForgetPick(leaf);
    // StrictFIFO: a head that does not start now holds the rest of its queue back this cycle.
    const bool strict = queues_[leaf].spec.strict_fifo;
    auto hold_back = [&]() {
      Deactivate(leaf);
      held_by.push_back({leaf, id});
    };
    if (entries_[id].nominated) {  // waits for its victims to stop
      if (strict) hold_back();
      continue;
    }
    // A workload within its queue's guarantee found no room: room freed from now on in this
    // cycle is kept for it, not lent to queues above their guarantee.
    // (Not where its pods could use none of the nodes the hold is for: HeldReach.)
    int held_for = held_for_;  // the queue whose waiting work it is held for
    const Reach reach = hold_borrowing_ && WouldBorrow(id) && !WithinOtherTree(id)
                            ? HeldReach(entries_[id].pods, &held_for)
                            : Reach::kOutside;
    if (held_for < 0) held_for = held_for_;
    if (reach != Reach::kOutside) {
      // Held for another tree's work while its own tree's quota refuses it: that is why it
      // waits, not the hold (a trial saw work of a full tree told, cycle after cycle, that
      // another tree's gang was ahead of it). (Where work of its own tree waits for room the
      // hold is the news: the quota it would borrow is what that queue is owed.) Cheap first:
      // a flavour or an uncharged model that takes it means no refusal; the refusal's words
      // are built once per queue, charge and shape in the cycle.
      if (const PodRequest* gpu_pod = FirstGpuPod(entries_[id].pods);
          gpu_pod && !held_roots_.count(TreeRoot(entries_[id].leaf)) &&
          UnchargedModels(*gpu_pod) == 0 && !CandidateFlavors(*gpu_pod).empty()) {
        const Entry& e = entries_[id];
        bool refused = true;
        for (int f : CandidateFlavors(*gpu_pod))
          if (QuotaAllows(e.leaf, f, e.gpu_milli, nullptr)) {
            refused = false;
            break;
          }
        if (refused) {
          const auto key = std::make_tuple(e.leaf, e.gpu_milli, gpu_pod->model_mask,
                                           static_cast<int>(gpu_pod->kind), gpu_pod->tenant);
          auto said = quota_refusals.find(key);
          if (said == quota_refusals.end()) {
            std::string quota_why;
            int blocked = -1;
            if (QuotaModels(e, *gpu_pod, &quota_why, &blocked) != 0) quota_why.clear();
            said = quota_refusals.emplace(key, std::move(quota_why)).first;
          }
          if (!said->second.empty()) {
            if (!HeldSwap(id, now, out)) entries_[id].reason = said->second;
            if (strict) hold_back();
            continue;
          }
        }
      }
      // Some of the nodes it could use are not held: it may start there (a few tries a cycle,
      // apart from the cycle's attempts: work not held back is not kept waiting by them).
      if (reach == Reach::kPartly && off_held_left_ > 0) {
        off_held_ = true;
        held_off_ = false;
        const bool admitted = TryAdmit(id, now, out, failed);
        off_held_ = false;
        if (!held_off_) {  // (it started, or waits for a reason of its own)
          if (!admitted && strict) hold_back();
          continue;
        }
      }
      // Its own queue's lower-priority work may still make way for it (HeldSwap).
      if (HeldSwap(id, now, out)) {
        if (strict) hold_back();
        continue;
      }
      // (Said beside why it last waited, not instead: it may wait so for many cycles.)
      std::string& why = entries_[id].reason;
      // (One note, of the queue that holds it now.)
      if (const size_t at = why.find(kHeldForGuarantees); at != std::string::npos)
        why.erase(at >= 2 ? at - 2 : at);
      const std::string held =
          kHeldForGuarantees + std::string("work of ") +
          (held_for == entries_[id].leaf ? "its own queue" : QueueLabel(held_for)) +
          " within its guarantee waits for room: what frees goes to that first";
      why = why.empty() || why == kNextCycle ? held : why + "; " + held;
      if (strict) hold_back();
      continue;
    }

    ++out.attempts;
    if (!TryAdmit(id, now, out, failed) && strict) hold_back();
  }
  pick_.clear();
  // Growth comes after every queue's pending work had its turn: not in a cycle cut short.
  // (Growing within its guarantee before other queues' borrowers, as pending work would, was
  // measured: more evictions and longer waits for the others; BENCHMARKS.md §5.)
  if (static_cast<int>(out.admitted.size()) < max_admissions && out.attempts < budget)
    GrowPartial(out);
  // What waits in a stopped queue says so.
  for (int q = 0; q < queue_count(); ++q) {
    if (!is_leaf(q) || queues_[q].stop == StopPolicy::kNone) continue;
    const std::string why = "queue " + queues_[queues_[q].stopped_by].spec.name +
                            " is stopped (stopPolicy: " +
                            (queues_[q].stop == StopPolicy::kHold ? "Hold" : "HoldAndDrain") + ")";
    for (const auto* line : {&queues_[q].pending, &queues_[q].parked})
      for (const auto& k : *line) entries_[std::get<2>(k)].reason = why;
  }
  // What waits behind a StrictFIFO head says so.
  for (const auto& [leaf, head] : held_by) {
    const std::string why = "queued behind " + entries_[head].spec.name.str() + " (queue " +
                            queues_[leaf].spec.name + " is StrictFIFO)";
    for (const auto& k : queues_[leaf].pending)
      if (std::get<2>(k) != head) entries_[std::get<2>(k)].reason = why;
  }
  // Work parked with room held ahead of it is told how much is held now.
  RefreshHeldAhead();
  return out;
}

void Admitter::TryAhead(int id, double now, CycleResult& out,
                        std::map<uint64_t, std::string>& failed, int max_admissions, int budget) {
  const Entry& e = entries_[id];
  const QueueNode& q = queues_[e.leaf];
  if (q.spec.strict_fifo) return;  // (its head went first: a preemptor behind it stays held)
  const int64_t room = e.gpu_milli;
  const std::tuple<int, double, int> key{config_.strict_priority ? -e.spec.priority : 0, e.arrival,
                                         id};
  // The nodes its victims freed room on; work none of whose pods could use one of them (a node
  // selector elsewhere) is not tried, nor counted against the tries (a trial: two such ahead of
  // a third that fitted used up the tries, and the preemptor took the room before it).
  std::vector<int> freed;
  for (const auto& [a, unused] : e.plan) freed.push_back(a.node);
  std::sort(freed.begin(), freed.end());
  freed.erase(std::unique(freed.begin(), freed.end()), freed.end());
  const auto could_use = [&](const Entry& a) {
    for (const PodRequest& p : a.pods) {
      bool any = false;
      for (int n : freed) any = any || CouldUse(p, n);
      if (!any) return false;
    }
    return true;
  };
  // Ahead of it, of a higher priority (work it could preempt right back is not: its own
  // victims, in a queue ordered by arrival) and no larger (larger work would need more than its
  // victims freed): the first few of its queue's line and of those parked, in queue order.
  std::vector<std::tuple<int, double, int>> ahead;
  for (const auto* line : {&q.pending, &q.parked}) {
    int taken = 0;
    for (auto it = line->begin(); it != line->end() && *it < key && taken < kAheadTries; ++it) {
      const Entry& a = entries_[std::get<2>(*it)];
      if (a.nominated || a.spec.priority <= e.spec.priority || a.gpu_milli > room ||
          (a.gpu_milli == 0) != (room == 0) || !could_use(a))
        continue;
      ahead.push_back(*it);
      ++taken;
    }
  }
  std::sort(ahead.begin(), ahead.end());
  if (ahead.size() > kAheadTries) ahead.resize(kAheadTries);
  for (const auto& k : ahead) {
    const int a = std::get<2>(k);
    // (Within the cycle's admissions and attempts, as the rest of the cycle.)
    if (static_cast<int>(out.admitted.size()) >= max_admissions || out.attempts >= budget) break;
    if (entries_[a].phase != Phase::kPending || entries_[a].nominated) continue;
    Unpark(a);
    ++out.attempts;
    TryAdmit(a, now, out, failed);
  }
}

void Admitter::Park(int id, bool quota, uint64_t key, const std::vector<PodRequest>& pods) {
  Entry& e = entries_[id];
  if (e.waits_on_time || e.nominated) return;  // time alone may let it in: keep trying
  // A StrictFIFO queue's head stays at the head (and is tried again each cycle): parked, it
  // would let the next one in line overtake it.
  if (queues_[e.leaf].spec.strict_fifo) return;
  Dequeue(id);
  QueueNode& q = queues_[e.leaf];
  int prio = config_.strict_priority ? -e.spec.priority : 0;
  q.parked.insert({prio, e.arrival, id});
  if (quota) {
    e.parked = 2;
    quota_parked_.push_back(id);
  } else {
    e.parked = 1;
    e.park_shape = key;
    ParkedShape& shape = parked_shapes_[key];
    // (As its members ask, their models together, not as quota narrowed them, which the key
    // is of: a node of another model they may use that frees wakes them too; a review saw such
    // work wait for good.)
    const std::vector<PodRequest>& asked = e.pods.size() == pods.size() ? e.pods : pods;
    if (shape.ids.empty()) {
      shape.pods = asked;
    } else if (shape.pods.size() == asked.size()) {
      for (size_t i = 0; i < asked.size(); ++i) shape.pods[i].model_mask |= asked[i].model_mask;
    }
    shape.ids.push_back(id);
    if (e.retry_search && !e.in_retry) {
      e.in_retry = true;
      q.retry.push_back(id);
    }
  }
}

void Admitter::Unpark(int id) {
  Entry& e = entries_[id];
  if (!e.parked) return;
  int prio = config_.strict_priority ? -e.spec.priority : 0;
  queues_[e.leaf].parked.erase({prio, e.arrival, id});
  e.parked = 0;
  e.retry_search = false;
  Enqueue(id);
}

int Admitter::WakeShape(uint64_t key, int count, uint64_t models) {
  auto it = parked_shapes_.find(key);
  if (it == parked_shapes_.end()) return 0;
  int woken = 0;
  auto& ids = it->second.ids;
  std::deque<int> passed;  // (members that may use none of `models`: they keep their place)
  while (!ids.empty() && woken < count) {
    int id = ids.front();
    ids.pop_front();
    const Entry& e = entries_[id];
    if (e.parked != 1 || e.park_shape != key) continue;
    // (The shape's models are its members' together: a member that may use none of the freed
    // nodes' would be woken in another's place, and the chain of wakes stop — a review.)
    uint64_t asks = 0;
    for (const PodRequest& p : e.pods)
      if (p.kind != DeviceKind::kNone) asks |= p.model_mask;
    if (asks != 0 && (asks & models) == 0) {
      passed.push_back(id);
      continue;
    }
    Unpark(id);
    ++woken;
  }
  ids.insert(ids.begin(), passed.begin(), passed.end());
  if (ids.empty()) parked_shapes_.erase(it);
  return woken;
}

// Parked workloads come back when something they wait for changes: a node freed since that one
// of their pods now fits on (the rest of the fleet has only filled up), any freed quota, or —
// with preemption — their queue below its guarantee while another borrows.
void Admitter::Wake() {
  if (wake_pos_ < freed_log_.size()) {
    std::set<int> nodes(freed_log_.begin() + static_cast<std::ptrdiff_t>(wake_pos_),
                        freed_log_.end());
    wake_pos_ = freed_log_.size();
    for (auto it = parked_shapes_.begin(); it != parked_shapes_.end();) {
      int fits = 0;         // freed nodes that take one of its pods
      uint64_t models = 0;  // ... and their GPU models
      for (int n : nodes) {
        for (const PodRequest& p : it->second.pods) {
          if (state_.MayFit(n, p) && NodeFits(state_, n, p)) {
            ++fits;
            if (const int m = state_.node_model(n); m >= 0 && m < 64) models |= uint64_t{1} << m;
            break;
          }
        }
      }
      uint64_t key = it->first;
      ++it;
      // A freed node takes a few pods of a shape, not all of them: wake one per node that fits,
      // in parking order, of the members that may use its model; each one admitted wakes the
      // next (TryAdmit).
      if (fits) WakeShape(key, fits, models);
    }
    wake_quota_ = true;
    // Forget freed-node history nobody parked before can need.
    if (parked_shapes_.empty()) {
      freed_log_.clear();
      wake_pos_ = 0;
    }
  }
  if (wake_quota_) {
    for (int id : quota_parked_)
      if (entries_[id].parked == 2 || entries_[id].parked == 3) Unpark(id);
    quota_parked_.clear();
    wake_quota_ = false;
  }
  // Consolidation may gather room for a workload within its queue's guarantee whenever the
  // fleet's free GPUs add up to enough: the first such parked workload of each queue comes back.
  // At most as many as the cycle has consolidation plans, taking the queues in turn.
  if (config_.consolidation && queue_count() > 0) {
    const int64_t free = state_.total_gpu_milli() - state_.allocated_gpu_milli();
    int woken = 0;
    for (int i = 0; i < queue_count() && woken < config_.consolidation_searches_per_cycle; ++i) {
      const int q = (consolidation_turn_ + i) % queue_count();
      QueueNode& node = queues_[q];
      if (!is_leaf(q) || node.parked.empty()) continue;
      const int64_t room = guaranteed_milli(q) - node.gpu - promised_milli(q);
      for (const auto& k : node.parked) {
        const int id = std::get<2>(k);
        if (entries_[id].parked != 1) continue;  // quota-parked: moving work cannot help
        if (entries_[id].gpu_milli <= std::min(room, free)) {
          Unpark(id);
          entries_[id].probe = true;
          ++woken;
        }
        break;
      }
    }
    consolidation_turn_ = (consolidation_turn_ + 1) % queue_count();
  }
  if (!config_.preemption) return;
  // Work whose search the cycle's limit left out, or whose victims a disruption budget of 1 or
  // more held, searches again, as many a cycle as the queue has preemption searches (work that
  // may reclaim is woken for its reclaim searches below; a review: nothing else woke it while
  // the room its queue's other preemptor made went to that one).
  for (int q = 0; q < queue_count(); ++q) {
    std::deque<int>& retry = queues_[q].retry;
    for (int woken = 0; !retry.empty() && woken < config_.preemption_searches_per_queue;) {
      const int id = retry.front();
      retry.pop_front();
      entries_[id].in_retry = false;
      if (entries_[id].parked != 1 || !entries_[id].retry_search) continue;
      Unpark(id);
      ++woken;
    }
  }
  // Work waiting on its queue's CPU or memory quota tries again where lower-priority work of
  // its own queue runs that could give the quota back (the queue's usual searches).
  for (int q = 0; q < queue_count(); ++q) {
    if (!is_leaf(q) || queues_[q].parked.empty() || queues_[q].running_priorities.empty() ||
        (!queues_[q].res_limited[0] && !queues_[q].res_limited[1]))
      continue;
    std::vector<int> wake;
    for (const auto& k : queues_[q].parked) {
      if (static_cast<int>(wake.size()) >= config_.preemption_searches_per_queue) break;
      const int id = std::get<2>(k);
      if (entries_[id].parked == 3 && OwnMayGo(id)) wake.push_back(id);
    }
    for (int id : wake) Unpark(id);
  }
  // Work its queue's CPU or memory guarantee covers tries again where others of its tree
  // borrow them (parked for room: the queue's reclaim searches).
  std::vector<unsigned> tree_borrows(queue_count(), 0);  // by root: resources someone borrows
  for (int q = 0; q < queue_count(); ++q)
    if (is_leaf(q))
      for (int r = 0; r < 2; ++r)
        if (BorrowsResource(q, r)) tree_borrows[queues_[q].root] |= 1u << r;
  for (int q = 0; q < queue_count(); ++q) {
    const QueueNode& node = queues_[q];
    if (!is_leaf(q) || node.parked.empty() || !tree_borrows[node.root]) continue;
    // The first that fit in what is left of its guarantee, as for GPUs below.
    int64_t left[2];
    for (int r = 0; r < 2; ++r)
      left[r] = !node.res_limited[r]
                    ? std::numeric_limits<int64_t>::max()
                    : node.res_guaranteed[r] - (r == 0 ? node.cpu : node.memory) +
                          (node.res_evicting[r] - node.res_leaving[r]) - node.res_promised[r];
    std::vector<int> wake;
    for (const auto& k : node.parked) {
      if (static_cast<int>(wake.size()) >= config_.reclaim_searches_per_queue) break;
      const int id = std::get<2>(k);
      const Entry& e = entries_[id];
      if (e.parked != 1 || !(ResourceReclaims(id) & tree_borrows[node.root])) continue;
      if (e.cpu_milli > left[0] || e.memory_mib > left[1]) continue;
      left[0] -= e.cpu_milli;
      left[1] -= e.memory_mib;
      wake.push_back(id);
    }
    for (int id : wake) Unpark(id);
  }
  bool someone_borrows = false;
  for (int q = 0; q < queue_count() && !someone_borrows; ++q)
    if (is_leaf(q))
      for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
        if (managed_[f] &&
            queues_[q].usage[f] - queues_[q].evicting_usage[f] > queues_[q].guaranteed[f])
          someone_borrows = true;
  if (!someone_borrows && !config_.fair_share_preemption) return;
  for (int q = 0; q < queue_count(); ++q) {
    QueueNode& node = queues_[q];
    if (!is_leaf(q) || node.parked.empty()) continue;
    const PreemptionPolicy& policy = node.spec.preemption;
    // Its room to reclaim in the flavour that has the most: left of its guarantee or, past it,
    // what a department's own part holds for it (ReclaimScope). (A review: summed over
    // flavours, a queue past its guarantee in one read none in another; and a project waited
    // for its department's part while another tree borrowed it, until room freed.)
    int64_t room = 0;
    if (policy.reclaim_within_cohort != PreemptionPolicy::Reclaim::kNever)
      for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
        if (managed_[f])
          room = std::max(
              {room, node.guaranteed[f] - node.usage[f] - node.promised[f], DepartmentRoom(q, f)});
    // Work of any size may preempt under fair-share preemption or borrowWithinCohort.
    const bool any_size = config_.fair_share_preemption ||
                          policy.borrow_within_cohort == PreemptionPolicy::Borrow::kLowerPriority;
    if (room <= 0 && !any_size) continue;
    // The first parked workloads that fit the room get the queue's preemption searches.
    std::vector<int> wake;
    int64_t left = room;
    const int searches =
        config_.preemption_searches_per_queue + (room > 0 ? config_.reclaim_searches_per_queue : 0);
    for (const auto& k : node.parked) {
      if (static_cast<int>(wake.size()) >= searches) break;
      int id = std::get<2>(k);
      // (Waiting on CPU or memory quota, which only its own queue's work gives back: above.)
      if (entries_[id].parked == 3) continue;
      // (Work that may start with fewer pods reclaims for as many as its guarantee holds:
      // woken for its least.)
      const Entry& p = entries_[id];
      const int64_t least =
          p.min_counts != p.full_counts && p.counts == p.full_counts ? LeastCharge(p) : p.gpu_milli;
      if (least <= left || any_size) {
        wake.push_back(id);
        left -= least;
      }
    }
    for (int id : wake) Unpark(id);
  }
}

bool Admitter::TryAdmit(int id, double now, CycleResult& out,
                        std::map<uint64_t, std::string>& failed) {
  Entry& e = entries_[id];
  // Nominated for fewer pods than all (a reclaim for a cut: ReclaimForCut), it goes on with
  // that cut once its victims have stopped; tried afresh, it asks for all of them again.
  // (A reservation made at the cut, tried again, keeps it too.)
  if (!e.continuing && !e.was_reserving && e.counts != e.full_counts) SetCounts(e, e.full_counts);
  std::vector<PodRequest> pods = e.pods;
  // Narrowed by its quota to the models it costs less on (QuotaModels), it is charged for this
  // attempt the most it costs there, so that reclaim and preemption weigh that (a trial's
  // memory share, held to H200s, took nothing back from best-effort work there); unless it is
  // admitted (then charged as placed), its charge is what it was after.
  // (Nor where it now asks for fewer pods: ReclaimForCut.)
  struct KeepCharge {
    Admitter* a;
    int id;
    std::vector<int> counts;
    int64_t charge = -1;
    ~KeepCharge() {
      const Entry& after = a->entries_[id];
      if (charge >= 0 && after.phase != Phase::kAdmitted && after.counts == counts)
        a->entries_[id].gpu_milli = charge;
    }
  } keep_charge{this, id, e.counts};
  // A held swap whose victims have stopped (HeldSwap) is admitted as that swap or not at all:
  // in its flavour, its queue holding no more than before (QuotaModels, Preempt). Failing, it
  // waits as a held borrower again.
  struct HeldMode {
    Admitter* a;
    int before;
    ~HeldMode() { a->held_swap_ = before; }
  } held_mode{this, held_swap_};
  if (e.continuing && e.held_swap >= 0) held_swap_ = e.held_swap;
  e.held_swap = -1;
  // Woken only to see whether moving work helps (Wake): if it does not, nothing is held for it.
  const bool probe = e.probe;
  e.probe = false;
  e.victims_ready_at = -1;  // set again by this attempt's preemption search, if any
  e.budget_blocked = false;
  e.retry_search = false;
  // A preemptor whose victims have stopped tries the nodes it planned on first (below).
  std::vector<int> planned;
  for (const auto& [a, unused] : e.plan) planned.push_back(a.node);
  std::sort(planned.begin(), planned.end());
  planned.erase(std::unique(planned.begin(), planned.end()), planned.end());
  e.plan.clear();

  // Quota first: the flavours this workload may be charged to narrow the models it may use.
  const PodRequest* gpu_pod = FirstGpuPod(pods);
  uint64_t allowed = ~uint64_t{0};
  // Models to try first, in turn (flavorOrder, whenCanBorrow: TryNextFlavor), before the
  // usual attempt on every model its quota allows.
  std::vector<uint64_t> tiers;
  int quota_blocked = -1;
  if (gpu_pod) {
    std::vector<int> cands = CandidateFlavors(*gpu_pod);
    if (!cands.empty()) {
      std::string first_why;
      bool by_cost = false;
      allowed = QuotaModels(e, *gpu_pod, &first_why, &quota_blocked, &by_cost);
      if (allowed == 0 && held_swap_ >= 0) quota_blocked = held_swap_;  // (its swap's, only)
      if (allowed != 0 && by_cost) {
        int64_t most = -1;
        for (int m = 0; m < static_cast<int>(state_.models().size()) && m < 64; ++m)
          if (allowed >> m & 1) most = std::max(most, ChargeOn(e, m));
        if (most >= 0 && most < e.gpu_milli) {
          keep_charge.charge = e.gpu_milli;
          e.gpu_milli = most;
        }
      }
      if (allowed == 0 && off_held_) {  // (the hold is the news: HeldReach's caller)
        held_off_ = true;
        return false;
      }
      if (allowed == 0) {
        e.reason = first_why;
        if (!e.history.empty()) e.reason += "; " + e.history;
        e.waits_on_time = false;
        bool searched = false;
        // (Refused because its queue's non-preemptible work would pass the guarantee: no
        // eviction changes that, as non-preemptible work is never a victim.)
        const bool may_not_borrow = first_why.find(kNonPreemptibleBorrows) != std::string::npos;
        if (config_.preemption && !may_not_borrow && TakeSearch(id)) {
          // Lower-priority work of its own queue gives quota back, or, where its queue may
          // borrow within its cohort, others' lower-priority borrowed work.
          std::vector<PodRequest> masked = pods;
          for (PodRequest& p : masked)
            if (p.kind != DeviceKind::kNone) p.model_mask &= FlavorModels(quota_blocked, *gpu_pod);
          if (Preempt(id, masked, FlavorModels(quota_blocked, *gpu_pod), now, out)) return false;
          e.waits_on_time = e.reason.find("minimum runtime") != std::string::npos;
          searched = true;
        }
        if (held_swap_ >= 0) return false;  // (no cut, no parking: held again next cycle)
        NotePolicyBlock(id);
        if (const CutOutcome cut = PartialInstead(id, searched, 0, now, out);
            cut != CutOutcome::kNone)
          return cut == CutOutcome::kAdmitted;
        Park(id, true, 0, pods);
        return false;
      }
      for (PodRequest& p : pods)
        if (p.kind != DeviceKind::kNone) p.model_mask &= allowed;
    }
    tiers = PreferenceTiers(e, *gpu_pod, allowed);
  }

  // The pods' CPU and memory where a queue's quota names them (checked once the GPU quota has
  // narrowed the models, which a search for CPU keeps to): lower-priority work of its own
  // queue gives them back (its withinQueue policy), as it does GPU quota; else it waits,
  // unless fewer pods would do.
  if (std::string why; !ResourcesAllow(e, &why)) {
    if (off_held_) {
      held_off_ = true;
      return false;
    }
    e.reason = why;
    if (!e.history.empty()) e.reason += "; " + e.history;
    e.waits_on_time = false;
    if (config_.preemption && why.find(kNonPreemptibleBorrows) == std::string::npos &&
        OwnMayGo(id) && TakeSearch(id)) {
      if (Preempt(id, pods, allowed, now, out)) return false;
      e.waits_on_time = e.reason.find("minimum runtime") != std::string::npos;
    }
    if (held_swap_ >= 0) return false;
    if (const CutOutcome cut = PartialInstead(id, /*searched=*/true, 0, now, out);
        cut != CutOutcome::kNone)
      return cut == CutOutcome::kAdmitted;
    Park(id, true, 0, pods);
    if (entries_[id].parked == 2) entries_[id].parked = 3;  // (on CPU or memory)
    return false;
  }

  const uint64_t key = AttemptKey(e.spec, e.leaf, pods);
  e.waits_on_time = false;
  bool placed = false;
  // A borrower held back where the hold's work could run, tried on the other nodes only
  // (PlaceAllOnce keeps off the held ones while off_held_ is set), its preferred models first,
  // and, elastic, with as many pods as fit there (TryPartial): placed, it starts; else the hold
  // is why it waits. (No search for victims, moves or reservations for it, nor a cut that
  // would reclaim: those are for work not held back.)
  if (off_held_) {
    // (Its own failure is for this version of the hold: one given back may let it in.)
    HeldNodes();
    const uint64_t off_key =
        key ^ 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(held_version_) * 0xc2b2ae3d27d4eb4full;
    if (failed.count(key) || failed.count(off_key)) {
      held_off_ = true;
      return false;
    }
    --off_held_left_;
    placer_.set_explain(false);
    if (PlacePreferred(e, pods, tiers, &e.assign)) {
      e.pods = pods;  // (the narrowed masks are what was applied; its selectors stay its own)
      Admit(id, key, now, out);
      return true;
    }
    if (e.min_counts != e.full_counts && e.counts == e.full_counts &&
        TryPartial(id, key, now, out)) {
      Entry& started = entries_[id];
      if (started.partial_why == "the fleet has room for no more now")
        started.partial_why =
            "the nodes not held for work waiting within its guarantee have room for no more now";
      return true;
    }
    failed[off_key] = e.reason;
    held_off_ = true;
    return false;
  }
  std::string reason;
  // A gang that prefers a topology goes compact where it can before its plan's nodes: a plan
  // made pod by pod (for quota, or by a shrink) knows no topology, and placing on its nodes
  // first scattered a gang over two leaves while one had room for it all (a researcher
  // trial).
  if (!planned.empty() && e.spec.gang && pods.size() > 1 &&
      e.spec.topology.level != TopologyLevel::kNone && !e.spec.topology.required) {
    TopologyConstraint compact = e.spec.topology;
    compact.required = true;
    placer_.set_explain(false);
    std::vector<Assignment> all;
    if (PlaceAllOnce(e, pods, compact, &all, nullptr)) {
      e.assign = std::move(all);
      placed = true;
    }
  }
  if (!placed && !planned.empty() && pods.size() == 1 && !e.spec.gang) {
    PodPlacement p = placer_.PlaceIn(state_, planned, pods[0], rng_);
    if (p.outcome == Outcome::kPlaced) {
      state_.Apply(p.assignment, pods[0]);
      e.assign = {p.assignment};
      placed = true;
    }
  } else if (!placed && !planned.empty() && e.spec.gang && pods.size() > 1 &&
             e.spec.topology.required && e.spec.topology.level != TopologyLevel::kNone) {
    // A gang that needs one domain tries the domain its plan cleared first (a review: the
    // gang placer tries the tightest domains that could hold it, a few, and the one a
    // consolidation cleared, the roomiest, could come too late).
    const std::vector<int>& domain = state_.domains(
        e.spec.topology.level)[state_.domain_of(planned.front(), e.spec.topology.level)];
    placer_.set_explain(false);
    GangPlacement g = placer_.PlaceGang(state_, pods, e.spec.topology, rng_, &domain);
    if (g.outcome == Outcome::kPlaced) {
      e.assign = std::move(g.pods);
      placed = true;
    }
  } else if (!placed && !planned.empty() &&
             !(e.spec.topology.required && e.spec.topology.level != TopologyLevel::kNone)) {
    // A gang's plan placed its pods one by one on these nodes, all or none.
    std::vector<Assignment> all;
    if (placer_.PlaceAllIn(state_, &planned, pods, rng_, all)) {
      e.assign = std::move(all);
      placed = true;
    }
  }
  if (!placed && !tiers.empty() && planned.empty() && !failed.count(key)) {
    // The preferred models in turn; failing there, wherever its quota allows (below).
    placer_.set_explain(false);
    for (uint64_t models : tiers) {
      std::vector<PodRequest> tier = pods;
      for (PodRequest& p : tier)
        if (p.kind != DeviceKind::kNone) p.model_mask &= models;
      if (!PlaceAll(e, tier, &e.assign, nullptr)) continue;
      pods = std::move(tier);
      placed = true;
      break;
    }
  }
  // A held swap whose plan no longer takes it goes where its quota's swap lets it, or waits.
  if (!placed && held_swap_ >= 0) {
    placer_.set_explain(false);
    if (!PlaceAll(e, pods, &e.assign, nullptr)) {
      e.reason.clear();  // (not "preempting" still: the hold's words follow, Cycle)
      return false;
    }
    placed = true;
  }
  // The same shape failed this cycle, and the fleet has only filled up since; but a time limit
  // may let it into a reservation's held room.
  if (!placed && !probe && failed.count(key) && Backfill(id, key, pods, now)) {
    e.pods = pods;
    Admit(id, key, now, out);
    return true;
  }
  if (auto same = failed.find(key); !placed && same != failed.end()) {
    // ... and it may still reclaim what is left of its queue's guarantee. (What is held ahead
    // of it is its own to say: the first one's note leaves out what that one held itself.)
    e.reason = same->second;
    if (const size_t at = EraseHeldAhead(e.reason); at != std::string::npos) {
      const uint64_t models = GpuModels(pods);
      if (std::string ahead = HeldAheadNote(id, models); !ahead.empty()) {
        e.reason.insert(at, "; " + ahead);
        held_noted_[id] = models;
      }
    }
    if (!WouldBorrow(id) && Consolidate(id, pods, e.spec.topology, now, out)) return false;
    bool searched = false;
    const uint64_t search_key = SearchKey(key, allowed);
    auto found =
        e.continuing || e.nominated ? failed_searches_.end() : failed_searches_.find(search_key);
    if (found != failed_searches_.end() && config_.preemption && MayReclaimAny(id) &&
        MayPreempt(id)) {
      // (The same shape's search found nothing this cycle: nor would this one.)
      e.reason = found->second.reason;
      e.budget_blocked = found->second.budget_blocked;
      e.retry_search = found->second.retry;
      e.victims_ready_at = found->second.victims_ready_at;
      e.victims_min_runtime = found->second.victims_min_runtime;
      searched = true;
    } else if (config_.preemption && (MayReclaimAny(id) || e.continuing) && MayPreempt(id) &&
               TakeSearch(id)) {
      if (Preempt(id, pods, allowed, now, out) ||
          (!WouldBorrow(id) && Consolidate(id, pods, e.spec.topology, now, out, true)))
        return false;
      searched = true;
      NoteFailedSearch(id, search_key);
    } else if (config_.preemption && MayPreempt(id)) {
      e.retry_search = true;  // (no search of its own this cycle: parked, it gets one later)
    }
    e.waits_on_time = e.reason.find("minimum runtime") != std::string::npos;
    NotePolicyBlock(id);
    if (const CutOutcome cut = PartialInstead(id, searched, key, now, out);
        cut != CutOutcome::kNone)
      return cut == CutOutcome::kAdmitted;
    if (!probe && ReserveRoom(id, pods, planned, now)) return false;
    Park(id, false, key, pods);
    return false;
  }
  // Explain in full the first time only; later failures keep that reason.
  placer_.set_explain(!e.explained);
  if (!placed) placed = PlaceAll(e, pods, &e.assign, &reason);
  // No room as the fleet stands: a time limit may let it into a reservation's held room.
  if (!placed && !probe) placed = Backfill(id, key, pods, now);
  if (placed) {
    e.pods = pods;  // the narrowed masks are what was applied
    Admit(id, key, now, out);
    return true;
  }
  // A retry keeps the full explanation computed the first time, nothing else (nor the hold it
  // was under, which is over while it is tried).
  if (const size_t held = e.reason.find(std::string("; ") + kHeldForGuarantees);
      held != std::string::npos)
    e.reason.erase(held);
  // (Nor what was held ahead of it then: said again as it is now.)
  EraseHeldAhead(e.reason);
  if (!e.explained || reason != "no node can take it now" ||
      e.reason.rfind("no node can take it now", 0) != 0)
    e.reason = reason;
  e.explained = true;
  NoteHeldAhead(id, pods);
  if (!e.history.empty() && e.reason.find(e.history) == std::string::npos)
    e.reason += "; " + e.history;
  failed[key] = e.reason;
  const bool borrowing = WouldBorrow(id);
  const bool held_before = hold_borrowing_;
  const int held_for_before = held_for_;
  if (!borrowing && !probe && !hold_borrowing_) {
    hold_borrowing_ = true;
    held_for_ = e.leaf;
  }
  const bool root_held_before = held_roots_.count(TreeRoot(e.leaf)) > 0;
  const size_t held_regions_before = held_regions_.size();
  if (!borrowing && !probe) {
    held_roots_.insert(TreeRoot(e.leaf));
    HoldRegion(id, pods);
  }
  // Scattered free room is gathered by moving work before anyone loses their place.
  if (!borrowing && Consolidate(id, pods, e.spec.topology, now, out)) return false;
  // A few preemption searches per queue and cycle, in queue order; more for reclaim.
  bool searched = false;
  const bool may_preempt = config_.preemption && MayPreempt(id);
  if (may_preempt && !TakeSearch(id)) e.retry_search = true;  // (see above)
  if (may_preempt && !e.retry_search) {
    if (Preempt(id, pods, allowed, now, out)) return false;
    // Reclaim alone found no place: reclaim and move work together.
    if (!borrowing && ReclaimEligible(id) &&
        Consolidate(id, pods, e.spec.topology, now, out, /*reclaim=*/true))
      return false;
    searched = true;
    // (Noted for the same shape's later tries, whose search also moves work where it does
    // not borrow: so where this one's did too, or borrows.)
    if (borrowing || ReclaimEligible(id)) NoteFailedSearch(id, SearchKey(key, allowed));
  }
  e.waits_on_time = e.reason.find("minimum runtime") != std::string::npos;
  NotePolicyBlock(id);
  const CutOutcome cut = PartialInstead(id, searched, key, now, out);
  if (cut == CutOutcome::kAdmitted) {
    hold_borrowing_ = held_before;  // it runs: nothing waits for room to be kept
    held_for_ = held_for_before;
    if (!root_held_before) held_roots_.erase(TreeRoot(entries_[id].leaf));
    RestoreHold(held_regions_before);
    return true;
  }
  if (cut == CutOutcome::kPreempting) return false;
  if (!probe && ReserveRoom(id, pods, planned, now)) return false;
  Park(id, false, key, pods);
  return false;
}

void Admitter::NotePolicyBlock(int id) {
  Entry& e = entries_[id];
  if (!config_.preemption) return;
  // (An earlier note, which may name other amounts, goes: one at a time.)
  for (const char* policy :
       {"'s preemption.withinQueue is Never", "'s preemption.reclaimWithinCohort is ",
        "'s preemption.borrowWithinCohort is ", kBorrowedOutOfReach, kPartlyOutOfReach,
        kDepartmentKeeps})
    if (const size_t at = e.reason.find(policy); at != std::string::npos)
      if (const size_t from = e.reason.rfind("; queue ", at); from != std::string::npos) {
        const size_t to = e.reason.find("; ", at);
        e.reason.erase(from, to == std::string::npos ? std::string::npos : to - from);
      }
  if (const std::string blocked = PolicyBlock(id); !blocked.empty()) {
    e.reason += "; " + blocked;
  } else if (const std::string kept = DepartmentNote(id); !kept.empty()) {
    e.reason += "; " + kept;
  }
}

std::string Admitter::DepartmentNote(int id) const {
  const Entry& e = entries_[id];
  const QueueNode& q = queues_[e.leaf];
  const PodRequest* gpu_pod = FirstGpuPod(e.pods);
  if (!gpu_pod || q.spec.best_effort ||
      q.spec.preemption.reclaim_within_cohort == PreemptionPolicy::Reclaim::kNever)
    return "";
  for (int f : CandidateFlavors(*gpu_pod)) {
    if (!managed_[f] || q.usage[f] + e.gpu_milli <= q.guaranteed[f] ||
        ReclaimScope(e.leaf, f, e.gpu_milli) >= 0)
      continue;
    // (Past its own guarantee, under a department (not a root) still below its own: the rest
    // of it is its other queues', which reclaim does not take for this one.)
    for (int a = q.parent; IsDepartment(a); a = queues_[a].parent) {
      const QueueNode& n = queues_[a];
      if (n.usage[f] + e.gpu_milli > n.guaranteed[f]) continue;
      const int64_t own = OwnPart(a, f);
      return "queue " + q.spec.name + " is past its guarantee of " + GpuAmount(q.guaranteed[f]) +
             " GPUs of " + flavor_name(f) + "; queue " + n.spec.name + " (" +
             GpuAmount(n.usage[f]) + "/" + GpuAmount(n.guaranteed[f]) + ")" + kDepartmentKeeps +
             (own > 0 ? " (its own part, " + GpuAmount(own) + ", is in use)" : "");
    }
  }
  return "";
}

std::string Admitter::PolicyBlock(int id) const {
  const Entry& e = entries_[id];
  const QueueNode& q = queues_[e.leaf];
  const PreemptionPolicy& policy = q.spec.preemption;
  // Work a policy could let go: preemptible and past its minimum runtime (else that, not the
  // policy, is what keeps it; a user-style review saw the policy blamed for non-preemptible
  // victims).
  const auto could_go = [&](int v) {
    const Entry& w = entries_[v];
    return w.phase == Phase::kAdmitted && w.options.preemptible &&
           now_ - w.admitted_at >= MinRuntime(v, id);
  };
  if (policy.within_queue == PreemptionPolicy::Within::kNever)
    for (int v : q.running)
      if (entries_[v].spec.priority < e.spec.priority && could_go(v))
        return "queue " + q.spec.name +
               "'s preemption.withinQueue is Never: its lower-priority work is not preempted";
  const PodRequest* gpu_pod = FirstGpuPod(e.pods);
  if (!gpu_pod) return "";
  const auto gpus = GpusSaid;
  // Past its guarantee under borrowWithinCohort (and within its borrowing limit), while another
  // queue it may borrow from borrows with lower-priority work that could go: why none of it
  // went (trial #9: the wait said nothing). Said only where no such queue has work that could
  // go: where one has, the policy is not what keeps it waiting.
  if (policy.borrow_within_cohort == PreemptionPolicy::Borrow::kLowerPriority) {
    std::string note;
    for (int f : CandidateFlavors(*gpu_pod)) {
      if (!managed_[f] || q.usage[f] + e.gpu_milli <= q.guaranteed[f]) continue;
      if (const auto& limit = q.borrow_limit[f];
          limit && q.usage[f] + e.gpu_milli > q.guaranteed[f] + *limit)
        continue;
      for (int o = 0; o < queue_count(); ++o) {
        const QueueNode& other = queues_[o];
        const int64_t held = other.usage[f] - other.evicting_usage[f];
        if (o == e.leaf || !is_leaf(o) || (fleet_queue_ < 0 && other.root != q.root) ||
            held <= other.guaranteed[f])
          continue;
        bool lower = false, under_threshold = false, may_go = false;
        for (int v : other.running) {
          const Entry& w = entries_[v];
          int64_t milli = 0;
          for (auto [cf, cm] : w.charged) milli += cf == f ? cm : 0;
          if (milli == 0 || w.spec.priority >= e.spec.priority || !could_go(v)) continue;
          lower = true;
          if (policy.borrow_max_priority && w.spec.priority > *policy.borrow_max_priority) continue;
          under_threshold = true;
          may_go |= held - milli >= other.guaranteed[f] || milli > other.guaranteed[f];
        }
        if (may_go) return "";
        if (!lower || !note.empty()) continue;
        note = "queue " + q.spec.name +
               "'s preemption.borrowWithinCohort is LowerPriority: queue " + other.spec.name +
               " borrows " + gpus(held - other.guaranteed[f]) + " of " + flavor_name(f);
        note += !under_threshold
                    ? ", but its lower-priority work there is above maxPriorityThreshold " +
                          std::to_string(*policy.borrow_max_priority)
                    : ", but taking any of its lower-priority work there would leave it below "
                      "its guarantee of " +
                          gpus(other.guaranteed[f]) +
                          " (borrowing preemption takes only what a queue borrows)";
      }
    }
    if (!note.empty()) return note;
  }
  if (policy.reclaim_within_cohort == PreemptionPolicy::Reclaim::kAny)
    return BorrowedOutOfReach(id);
  const bool never = policy.reclaim_within_cohort == PreemptionPolicy::Reclaim::kNever;
  // Below its guarantee in a flavour it may use, while another queue of its tree borrows
  // there work a reclaim could take (under LowerPriority: only work at its priority or above).
  for (int f : CandidateFlavors(*gpu_pod)) {
    if (!managed_[f] || q.usage[f] + e.gpu_milli > q.guaranteed[f]) continue;
    for (int o = 0; o < queue_count(); ++o) {
      const QueueNode& other = queues_[o];
      if (o == e.leaf || !is_leaf(o) || (fleet_queue_ < 0 && other.root != q.root) ||
          other.usage[f] - other.evicting_usage[f] <= other.guaranteed[f])
        continue;
      bool takeable = false, lower = false;
      for (int v : other.running) {
        if (!could_go(v)) continue;
        takeable = true;
        lower |= entries_[v].spec.priority < e.spec.priority;
      }
      if (!takeable || (!never && lower)) continue;
      const int64_t room = q.guaranteed[f] - q.usage[f];
      return "queue " + q.spec.name + "'s preemption.reclaimWithinCohort is " +
             (never ? "Never" : "LowerPriority") + ": the " + gpus(room) + " of " + flavor_name(f) +
             " below its guarantee that queue " + other.spec.name + " borrows " +
             (room == kMilliPerGpu ? "is" : "are") + " not taken back" +
             (never
                  ? ""
                  : std::string(" (the work it borrows ") + (room == kMilliPerGpu ? "it" : "them") +
                        " with is not of lower priority)");
    }
  }
  return "";
}

const std::vector<Admitter::Lender> Admitter::kNoLenders;

std::string Admitter::BorrowedOutOfReach(int id) const {
  const Entry& e = entries_[id];
  const QueueNode& q = queues_[e.leaf];
  const PodRequest* gpu_pod = FirstGpuPod(e.pods);
  if (!gpu_pod) return "";
  const auto gpus = GpusSaid;
  const auto none = [](int, int) { return int64_t{0}; };
  // What each leaf that borrows flavour f could give, once a cycle: the least and the most of
  // its work, whole, that keeps it at its guarantee (or is bigger than all of it), and whether
  // anything could go at all, or be shrunk. (A minimum runtime against another queue's work
  // does not depend on which queue asks.)
  const auto lenders = [&](int f) -> const std::vector<Lender>& {
    auto [it, fresh] = lenders_.try_emplace(f);
    if (!fresh) return it->second;
    for (int o = 0; o < queue_count(); ++o) {
      const QueueNode& other = queues_[o];
      const int64_t held = other.usage[f] - other.evicting_usage[f];
      if (!is_leaf(o) || held <= other.guaranteed[f]) continue;
      Lender l;
      l.queue = o;
      l.takeable = other.spec.best_effort;  // (its work is taken whatever it holds)
      int64_t pinned = 0;                   // (GPUs of f its work that may not be preempted holds)
      std::vector<int64_t> sizes;           // (of the work that could go)
      for (int v : other.running) {
        const Entry& w = entries_[v];
        if (l.takeable) break;
        if (w.phase == Phase::kAdmitted && !w.options.preemptible)
          for (auto [cf, cm] : w.charged) pinned += cf == f ? cm : 0;
        if (w.phase != Phase::kAdmitted || !w.options.preemptible ||
            now_ - w.admitted_at < MinRuntime(v, id))
          continue;
        int64_t milli = 0;
        for (auto [cf, cm] : w.charged) milli += cf == f ? cm : 0;
        if (milli == 0) continue;
        l.any = true;
        sizes.push_back(milli);
        // (Elastic work may give pods beyond its minCount where it may not go whole.)
        if (config_.elastic_shrink && w.options.may_shrink)
          for (size_t i = 0; i < w.min_counts.size() && i < w.counts.size(); ++i)
            l.takeable |= w.counts[i] > w.min_counts[i];
        if (held - milli < other.guaranteed[f] &&
            (milli <= other.guaranteed[f] || held <= other.guaranteed[f]))
          continue;
        l.least = l.least == 0 ? milli : std::min(l.least, milli);
        l.most = std::max(l.most, milli);
      }
      l.pinned = !l.takeable && pinned > other.guaranteed[f];
      std::sort(sizes.rbegin(), sizes.rend());
      for (int64_t m : sizes)
        if (held - l.reach - m >= other.guaranteed[f] ||
            (m > other.guaranteed[f] && held - l.reach > other.guaranteed[f]))
          l.reach += m;
      it->second.push_back(l);
    }
    return it->second;
  };
  std::string note;
  for (int f : CandidateFlavors(*gpu_pod)) {
    // (Only where its queue is owed room: within its guarantee, and reclaim may take other
    // queues' work for it at all.)
    if (!managed_[f] || q.usage[f] + e.gpu_milli > q.guaranteed[f]) continue;
    // (Once per queue and flavour a cycle: every failed attempt asks, and the answer is the
    // same for the queue's work.)
    auto [cached, fresh] = out_of_reach_.try_emplace({e.leaf, f});
    std::string& said = cached->second;
    for (const Lender& l : fresh ? lenders(f) : kNoLenders) {
      const QueueNode& other = queues_[l.queue];
      if (l.queue == e.leaf || (fleet_queue_ < 0 && other.root != q.root)) continue;
      if (!l.any) {
        // (Nothing it runs may go: said where what it borrows is work that may not be
        // preempted, which only its end gives back — a trial's queue, its guarantee lowered
        // under such work, left another below its own with no word why.)
        if (l.pinned && said.empty())
          said = "queue " + other.spec.name + " borrows " +
                 gpus(other.usage[f] - other.evicting_usage[f] - other.guaranteed[f]) + " of " +
                 flavor_name(f) +
                 " in work that may not be preempted (spec.preemptible: false, admitted within a "
                 "guarantee lowered since): this waits for that work to end";
        continue;
      }
      const int64_t borrowed = other.usage[f] - other.evicting_usage[f] - other.guaranteed[f];
      if (l.takeable || (l.least > 0 && (BranchLends(e.leaf, l.queue, f, l.least, none) ||
                                         BranchLends(e.leaf, l.queue, f, l.most, none)))) {
        // (Only part of what it borrows: said, as none of it would be, unless another queue's
        // could all go. A trial's queue waited for good for its guarantee with "no room"
        // while its sibling borrowed 6 GPUs, 4 of them in reach.)
        if (l.takeable || l.reach >= borrowed) {
          said = kTakeable;
          break;
        }
        if (said.empty() || said.find(kPartlyOutOfReach) == std::string::npos)
          said = "queue " + other.spec.name + " borrows " + gpus(borrowed) + " of " +
                 flavor_name(f) + "; only " + gpus(l.reach) + kPartlyOutOfReach +
                 "it below its guarantee of " + gpus(other.guaranteed[f]) +
                 " (reclaim takes only what a queue borrows: the rest waits for borrowed work "
                 "to end)";
        continue;
      }
      if (!said.empty()) continue;
      // The queue that keeps it: the leaf, or the first above it that its least work would
      // leave below its guarantee. (Queues' use and guarantees are anyone's to read; the
      // sizes of another tenant's work are not said.)
      int blocker = l.queue;
      if (l.least > 0)
        for (int a = other.parent; a >= 0; a = queues_[a].parent) {
          const QueueNode& n = queues_[a];
          const int64_t n_held = n.usage[f] - n.evicting_below[f];
          if (n_held - l.least < n.guaranteed[f] &&
              (l.least <= n.guaranteed[f] || n_held <= n.guaranteed[f])) {
            blocker = a;
            break;
          }
        }
      said = "queue " + other.spec.name + " borrows " +
             gpus(other.usage[f] - other.evicting_usage[f] - other.guaranteed[f]) + " of " +
             flavor_name(f) + kBorrowedOutOfReach +
             (blocker == l.queue ? std::string("it") : "queue " + queues_[blocker].spec.name) +
             " below its guarantee of " + gpus(queues_[blocker].guaranteed[f]) +
             " (reclaim takes only what a queue borrows: this waits for borrowed work to end)";
    }
    if (said == kTakeable) return "";
    if (note.empty()) note = said;
  }
  return note;
}

// Admits workload id, placed (e.assign) with e.pods as applied: holds and charges it, and
// lets what waits behind it in its queue try again.
void Admitter::Admit(int id, uint64_t key, double now, CycleResult& out) {
  Entry& e = entries_[id];
  e.narrowed = true;
  Hold(id);
  Charge(id, +1);
  Dequeue(id);
  e.phase = Phase::kAdmitted;
  e.admitted_at = now;
  e.sizes.clear();
  e.ready = e.pods.size() == 1 && !e.spec.gang;
  AddRunning(id);
  if (!e.ready) unready_.insert(id);
  Unnominate(id);
  e.reason = "admitted";
  if (e.counts != e.full_counts) {
    int started = 0, asked = 0;
    for (size_t i = 0; i < e.counts.size(); ++i) started += e.counts[i], asked += e.full_counts[i];
    e.reason += " " + std::to_string(started) + " of " + std::to_string(asked) +
                " pods (partial admission" + (e.partial_why.empty() ? "" : ": " + e.partial_why) +
                ")";
  }
  e.history.clear();
  out.admitted.push_back(id);
  if (e.counts != e.full_counts) partial_running_.insert(id);
  WakeShape(key, 1);
  // Higher-priority work parked in this queue may now preempt it.
  QueueNode& q = queues_[e.leaf];
  if (config_.preemption && config_.strict_priority) {
    // (Or, under LowerOrNewerEqualPriority, older work of the same priority.)
    const bool newer_equal =
        q.spec.preemption.within_queue == PreemptionPolicy::Within::kLowerOrNewerEqualPriority;
    std::vector<int> wake;
    for (const auto& [neg_priority, arrival, parked] : q.parked) {
      if (-neg_priority < e.spec.priority ||
          (-neg_priority == e.spec.priority && (!newer_equal || arrival >= e.arrival)))
        break;
      wake.push_back(parked);
    }
    for (int w : wake) Unpark(w);
  }
}

uint64_t Admitter::QuotaModels(const Entry& e, const PodRequest& gpu_pod, std::string* why,
                               int* blocked, bool* by_cost) const {
  // Models no flavour is charged for are not limited.
  uint64_t allowed = UnchargedModels(gpu_pod);
  bool holds = false;     // whether *blocked is a flavour its queue holds GPUs in
  bool reclaims = false;  // ... one it may reclaim quota in (QuotaReclaims)
  bool pinned = false;    // *why says non-preemptible work may not borrow
  bool owed = false;      // ... one its queue is guaranteed GPUs in
  int varies = -1;        // whether e's charge depends on its GPU: asked once a flavour refuses it
  // Every flavour's refusal, so that one named first is not taken for the only one (a trial's
  // workload, able to run on either GPU model, read only the H100 limit where the A100 one
  // held it too).
  std::vector<std::pair<int, std::string>> refusals;
  for (int f : CandidateFlavors(gpu_pod)) {
    // Non-preemptible work does not borrow: nobody could take the room back (KAI's rule). That
    // limit holds whatever else frees, so it is what a refusal names.
    if (const QueueNode& q = queues_[e.leaf]; Pinned(e) && NonPreemptibleOver(e, f)) {
      std::string text = NonPreemptibleRefusal(e.leaf, GpuAmount(q.np_usage[f] + e.gpu_milli) +
                                                           "/" + GpuAmount(q.guaranteed[f]) +
                                                           " GPUs of " + flavor_name(f));
      // (Under a budget of 0, the queue's lower-priority work it would otherwise preempt is
      // named: a trial's high-priority work read only that it may not borrow.)
      if (ZeroBudget(e.leaf) >= 0 && !pinned) {
        std::vector<int> lower;
        for (int w : q.running)
          if (entries_[w].phase == Phase::kAdmitted && entries_[w].spec.priority < e.spec.priority)
            lower.push_back(w);
        if (!lower.empty())
          text += "; its lower-priority work (" + WorkloadNames(lower) +
                  ") is not preempted for it either: the budget keeps it too";
      }
      if (!pinned) {
        *why = text;
        *blocked = f;
        pinned = true;
      }
      refusals.emplace_back(f, std::move(text));
      continue;
    }
    std::string refused;
    // Charged less on some models (a memory share of a larger GPU, a node that holds more of
    // an exclusiveNodes tenant's pods): those, where the quota allows what it costs there.
    uint64_t cheaper = 0;
    // (A held swap fits only as a swap: below.)
    const bool fits = held_swap_ < 0 && QuotaAllows(e.leaf, f, e.gpu_milli, &refused);
    if (!fits && varies < 0) varies = ChargeVaries(e) ? 1 : 0;
    if (!fits && varies == 1 && held_swap_ < 0) {
      const uint64_t models = FlavorModels(f, gpu_pod);
      for (int m = 0; m < 64; ++m)
        if (models >> m & 1)
          if (const int64_t c = ChargeOn(e, m);
              c >= 0 && c < e.gpu_milli && QuotaAllows(e.leaf, f, c, nullptr))
            cheaper |= uint64_t{1} << m;
    }
    // (A swap, once its victims have stopped: it is admitted where they were.)
    const bool swap = !fits && e.continuing && SwapAllows(e, f, e.gpu_milli);
    if (!fits && !swap && cheaper == 0) refusals.emplace_back(f, refused);
    if (fits || swap) {
      allowed |= FlavorModels(f, gpu_pod);
    } else if (cheaper != 0) {
      allowed |= cheaper;
      if (by_cost) *by_cost = true;
    } else if (const bool h = queues_[e.leaf].usage[f] > 0,
               r = QuotaReclaims(e.leaf, f, e.gpu_milli), g = queues_[e.leaf].guaranteed[f] > 0;
               !pinned && (why->empty() || (r && !reclaims) || (!reclaims && h && !holds) ||
                           (!reclaims && !holds && !h && g && !owed))) {
      // (Where it may take back what others borrow of its guarantee, that; else, where its
      // queue holds GPUs, its own lower-priority work may give quota back; else a flavour its
      // queue is guaranteed, rather than one it has no quota in that is merely tried first.)
      *why = refused;
      *blocked = f;
      holds = h;
      reclaims = r;
      owed = g;
    }
  }
  if (allowed == 0 && !why->empty()) {
    int told = 0, untold = 0;
    // (Only flavours its queue is guaranteed or holds GPUs in: not every flavour it is tried in
    // first, where it has no quota at all.)
    const QueueNode& q = queues_[e.leaf];
    for (const auto& [f, text] : refusals) {
      if (f == *blocked || text.empty() || why->find(text) != std::string::npos ||
          (q.guaranteed[f] <= 0 && q.usage[f] <= 0))
        continue;
      if (told == 2) {
        ++untold;
        continue;
      }
      *why += "; in flavour " + flavor_name(f) + " too: " + text;
      ++told;
    }
    if (untold > 0) *why += "; and " + std::to_string(untold) + " more flavours refuse it";
    *why += ChargeNote(e) + ExclusiveUsageNote(e);
  }
  return allowed;
}

std::string Admitter::ExclusiveUsageNote(const Entry& e) const {
  const PodRequest* gpu_pod = FirstGpuPod(e.pods);
  if (!gpu_pod || gpu_pod->tenant < 0 || !state_.tenant(gpu_pod->tenant).exclusive_nodes) return "";
  // (A scan of every workload: only for such tenants, which are few.)
  int64_t charged = 0, compute = 0;
  for (const Entry& w : entries_) {
    if (w.phase != Phase::kAdmitted && w.phase != Phase::kEvicting) continue;
    const PodRequest* p = FirstGpuPod(w.pods);
    if (!p || p->tenant != gpu_pod->tenant) continue;
    charged += w.gpu_milli;
    for (const PodRequest& q : w.pods) compute += q.total_gpu_milli();
  }
  if (charged <= compute) return "";
  return " (tenant " + state_.tenant(gpu_pod->tenant).name.str() + "'s running work counts " +
         GpuAmount(charged) + " GPUs of quota for the " + GpuAmount(compute) +
         " its pods use: with exclusiveNodes each pod counts its node's GPUs over how many such "
         "pods one node holds)";
}

bool Admitter::ChargeVaries(const Entry& e) const {
  for (const PodRequest& p : e.pods)
    if (state_.ChargeVaries(p)) return true;
  return false;
}

int64_t Admitter::ChargeOn(const Entry& e, int m) const {
  int64_t total = 0;
  for (const PodRequest& p : e.pods) {
    const int64_t c = state_.ChargeOnModel(p, m);
    if (c < 0) return -1;
    total += c;
  }
  return total;
}

int64_t Admitter::LeastCharge(const Entry& e, uint64_t models) const {
  if (!ChargeVaries(e)) return e.gpu_milli;
  int64_t least = -1;
  for (int m = 0; m < static_cast<int>(state_.models().size()) && m < 64; ++m)
    if (const int64_t c = (models >> m & 1) ? ChargeOn(e, m) : -1;
        c >= 0 && (least < 0 || c < least))
      least = c;
  return least < 0 ? e.gpu_milli : std::min(least, e.gpu_milli);
}

std::string Admitter::ChargeNote(const Entry& e, int64_t charge) const {
  int64_t compute = 0;
  for (const PodRequest& p : e.pods) compute += p.total_gpu_milli();
  if (charge < 0) charge = e.gpu_milli;
  if (charge <= compute) return "";
  // Why, by what it asks: a trial read a fraction's reason for an exclusiveNodes charge.
  bool exclusive = false, fraction = false;
  bool untrusted = false;
  for (const PodRequest& p : e.pods) {
    exclusive |= p.num_gpu > 0 && p.tenant >= 0 && state_.tenant(p.tenant).exclusive_nodes;
    fraction |= p.kind == DeviceKind::kFraction;
    untrusted |= p.tenant >= 0 && state_.tenant(p.tenant).trust == TrustLevel::kUntrusted;
  }
  std::string why;
  if (exclusive)
    why =
        "its tenant has exclusiveNodes, so each pod counts the GPUs of its node over how many "
        "such pods one node holds (by GPUs, CPU and memory): no other tenant may use the rest";
  if (fraction)
    why += std::string(why.empty() ? "" : "; ") +
           std::string(
               "a fraction holds the larger of its compute and GPU memory share (of the "
               "smallest GPU it may land on)") +
           (untrusted ? ", and an untrusted tenant's GPU what no other pod may use" : "");
  return " (it counts as " + GpuAmount(charge) + " GPUs of quota for the " + GpuAmount(compute) +
         " of compute it asks: " + why + ")";
}

bool Admitter::PlaceAll(const Entry& e, const std::vector<PodRequest>& pods,
                        std::vector<Assignment>* assign, std::string* reason) {
  // (A tier's failure is not told: only the last attempt's, over every node it may use.)
  const bool explain = placer_.explain();
  const bool placed = PlacePreferring(
      pods, e.spec.topology,
      [&](const std::vector<PodRequest>& some, const TopologyConstraint& topology, bool last) {
        placer_.set_explain(explain && last);
        return PlaceAllOnce(e, some, topology, assign, last ? reason : nullptr);
      });
  placer_.set_explain(explain);
  return placed;
}

bool Admitter::PlaceAllOnce(const Entry& e, const std::vector<PodRequest>& pods,
                            const TopologyConstraint& topology, std::vector<Assignment>* assign,
                            std::string* reason) {
  if (off_held_) {  // (a borrower held back, tried off the held nodes: TryAdmit)
    std::vector<PodRequest> off = pods;
    KeepOffHeld(off);
    off_held_ = false;
    const bool placed = PlaceAllOnce(e, off, topology, assign, reason);
    off_held_ = true;
    return placed;
  }
  if (pods.size() == 1 && !e.spec.gang) {
    PodPlacement p = placer_.Place(state_, pods[0], rng_);
    if (p.outcome != Outcome::kPlaced) {
      if (reason) *reason = p.reason;
      return false;
    }
    state_.Apply(p.assignment, pods[0]);
    *assign = {p.assignment};
    return true;
  }
  GangPlacement g = placer_.PlaceGang(state_, pods, topology, rng_);
  if (g.outcome != Outcome::kPlaced) {
    if (reason) *reason = TogetherSaid(e.spec.gang, g.reason);
    return false;
  }
  *assign = std::move(g.pods);
  return true;
}

void Admitter::SetCounts(Entry& e, const std::vector<int>& counts) {
  e.pods.clear();
  e.gpu_milli = 0;
  e.cpu_milli = 0;
  e.memory_mib = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    for (int k = 0; k < counts[i]; ++k) {
      e.pods.push_back(e.set_request[i]);
      e.gpu_milli += e.set_request[i].total_charge_milli();
      e.cpu_milli += e.set_request[i].cpu_milli;
      e.memory_mib += e.set_request[i].memory_mib;
    }
  e.counts = counts;
  e.above_min = e.counts != e.min_counts;
}

// Partial admission: when its pod sets with a minCount cannot all start, the most pods that
// can start now, quota and placement alike — every such pod set cut by the same number of
// pods, none below its minCount — found by binary search over the cut (more cut never needs
// more room). Each probe places for real and is undone; the best is applied again.
Admitter::CutOutcome Admitter::PartialInstead(int id, bool searched, uint64_t key, double now,
                                              CycleResult& out) {
  // A workload that may still take its guarantee back waits for that (a partial start grows
  // only as room frees), unless this cycle's search found nothing to take.
  const Entry& e = entries_[id];
  if (e.counts != e.full_counts || e.min_counts == e.full_counts) return CutOutcome::kNone;
  // (A search that could not find anything counts as one that found nothing.) Nor while the
  // victims its guarantee may take are within their minimum runtime or a disruption budget:
  // started in part, it would give that claim up.
  if (config_.preemption && MayReclaimAny(id) &&
      ((!searched && MayPreempt(id)) || e.waits_on_time || e.budget_blocked))
    return CutOutcome::kNone;
  // The same shape with the same least failed to start in part this cycle: so does this one.
  uint64_t partial_key = key ^ 0x9e3779b97f4a7c15ULL;
  for (size_t i = 0; i < e.min_counts.size(); ++i)
    partial_key = (partial_key ^ static_cast<uint64_t>(e.min_counts[i])) * 0x100000001b3ULL;
  if (key != 0 && partial_failed_.count(partial_key)) return CutOutcome::kNone;
  // Its full size is past its queue's guarantee, but fewer pods are within it: those take it
  // back, unless free room starts as many now (a start with fewer only grows as room frees,
  // and its queue would stay short of its guarantee meanwhile).
  // (Not for one going on with victims it chose for all its pods: it holds their room.)
  if (config_.preemption && !e.continuing && !e.nominated && !MayReclaimAny(id)) {
    std::vector<int> counts;
    const int cut = ReclaimCut(id, &counts);
    // (None may: where it is told nothing is taken back for it, that its least is past the
    // guarantee too, or a trial's minCount of 7 read as if all 10 pods were the trouble.)
    if (Entry& w = entries_[id];
        cut == 0 && w.reason.find("so nothing is taken back for it") != std::string::npos &&
        w.reason.find("its minCount alone") == std::string::npos) {
      const int pods = std::accumulate(w.min_counts.begin(), w.min_counts.end(), 0);
      char gpus[32];
      std::snprintf(gpus, sizeof(gpus), "%g", static_cast<double>(LeastCharge(w)) / kMilliPerGpu);
      w.reason += "; its minCount alone (" + std::to_string(pods) + " pods, " + gpus +
                  " GPUs) is past the guarantee too, so it starts only where room is free";
    }
    if (cut > 0) {
      if (TryPartial(id, key, now, out, cut)) return CutOutcome::kAdmitted;
      switch (ReclaimForCut(id, counts, now, out)) {
        case CutReclaim::kPreempting:
          return CutOutcome::kPreempting;
        case CutReclaim::kLater:  // (started smaller now, it would give that claim up)
          return CutOutcome::kNone;
        case CutReclaim::kNothing:
          break;
      }
    }
  }
  if (TryPartial(id, key, now, out)) return CutOutcome::kAdmitted;
  if (key != 0) partial_failed_.insert(partial_key);
  return CutOutcome::kNone;
}

int64_t Admitter::LeastCharge(const Entry& e) {
  int64_t least = 0;
  for (size_t i = 0; i < e.set_request.size(); ++i)
    least += e.min_counts[i] * e.set_request[i].total_charge_milli();
  return least;
}

std::vector<int> Admitter::CountsAt(const Entry& e, int cut) {
  std::vector<int> c;
  for (size_t i = 0; i < e.full_counts.size(); ++i)
    c.push_back(std::max(e.min_counts[i], e.full_counts[i] - cut));
  return c;
}

int Admitter::ReclaimCut(int id, std::vector<int>* counts) {
  Entry& e = entries_[id];
  int max_cut = 0;
  for (size_t i = 0; i < e.full_counts.size(); ++i)
    max_cut = std::max(max_cut, e.full_counts[i] - e.min_counts[i]);
  if (max_cut == 0) return 0;
  const std::vector<int> full = e.full_counts;
  // (Fewer pods never ask more of the guarantee: the least cut within it, by binary search.)
  const auto reclaims_at = [&](int cut) {
    SetCounts(e, CountsAt(e, cut));
    return MayReclaimAny(id);
  };
  int hi = max_cut;
  if (!reclaims_at(hi)) hi = 0;
  for (int lo = 1; hi > 0 && lo < hi;) {
    const int mid = lo + (hi - lo) / 2;
    if (reclaims_at(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  // Then each pod set in turn takes back what the one cut left of the guarantee, the most pods
  // that stay within it (a trial's 6 workers and 4 servers, both cut by 2, reclaimed 20 of a
  // 24-GPU guarantee and could never grow into the rest).
  if (counts) {
    *counts = hi > 0 ? CountsAt(e, hi) : std::vector<int>{};
    for (size_t i = 0; hi > 0 && i < counts->size(); ++i) {
      int lo = (*counts)[i], top = full[i];
      while (lo < top) {
        const int mid = lo + (top - lo + 1) / 2;
        std::vector<int> c = *counts;
        c[i] = mid;
        SetCounts(e, c);
        if (MayReclaimAny(id)) {
          lo = mid;
        } else {
          top = mid - 1;
        }
      }
      (*counts)[i] = lo;
    }
  }
  SetCounts(e, full);
  return hi;
}

Admitter::CutReclaim Admitter::ReclaimForCut(int id, const std::vector<int>& counts, double now,
                                             CycleResult& out) {
  Entry& e = entries_[id];
  const std::vector<int> full = e.full_counts;
  const std::string said = e.reason;
  SetCounts(e, counts);
  int nominated = 0, asked = 0;
  for (size_t i = 0; i < full.size(); ++i) nominated += e.counts[i], asked += full[i];
  const std::string note = "for " + std::to_string(nominated) + " of its " + std::to_string(asked) +
                           " pods (partial admission: " + kCutWhy + ")";
  // Its pods on the models its quota takes them on now, else on those of the flavour that
  // refuses them (as TryAdmit's search for quota).
  std::vector<PodRequest> pods = e.pods;
  uint64_t allowed = ~uint64_t{0};
  bool quota_allows = true;
  if (const PodRequest* gpu_pod = FirstGpuPod(pods);
      gpu_pod && !CandidateFlavors(*gpu_pod).empty()) {
    std::string why;
    int blocked = -1;
    allowed = QuotaModels(e, *gpu_pod, &why, &blocked);
    quota_allows = allowed != 0;
    if (allowed == 0 && blocked >= 0) allowed = FlavorModels(blocked, *gpu_pod);
    for (PodRequest& p : pods)
      if (p.kind != DeviceKind::kNone) p.model_mask &= allowed;
  }
  // Where its quota takes the cut and only scattered room stops it, moving work goes first, as
  // for any work within its guarantee; then one of its queue's searches takes the guarantee
  // back, and with it, moving work into the room it leaves.
  bool no_search = false;  // (its queue's searches are spent this cycle)
  const auto preempts = [&]() {
    if (allowed == 0) return false;
    if (quota_allows && Consolidate(id, pods, e.spec.topology, now, out)) return true;
    if (!TakeSearch(id)) {
      no_search = true;
      return false;
    }
    return Preempt(id, pods, allowed, now, out) ||
           (quota_allows && Consolidate(id, pods, entries_[id].spec.topology, now, out,
                                        /*reclaim=*/true));
  };
  // (What kept the whole from its victims stays said of it: the cut's is added.)
  const bool on_time = e.waits_on_time, budget = e.budget_blocked;
  if (preempts()) {
    Entry& after = entries_[id];  // (a shrink adds entries)
    after.partial_why = kCutWhy;
    // (Before what a disruption budget leaves for later.)
    size_t at = after.reason.find(" more to go as the disruption budget");
    at = at == std::string::npos ? std::string::npos : after.reason.rfind("; ", at);
    after.reason.insert(at == std::string::npos ? after.reason.size() : at, "; " + note);
    return CutReclaim::kPreempting;
  }
  Entry& after = entries_[id];
  // (A search that held its stopped victims' room nominates it without preempting: none runs
  // here, but nothing of a nomination is kept at a size it no longer asks for.)
  if (after.nominated) Unnominate(id);
  // Its victims within their minimum runtime, or past a disruption budget: it waits to take
  // them, saying so, rather than start smaller and give that claim up.
  const bool young = after.reason.find("minimum runtime") != std::string::npos;
  const bool later = allowed != 0 && (young || after.budget_blocked || no_search);
  if (later && !no_search) {
    after.reason += " (" + note + ")";
  } else {
    after.reason = said;
  }
  after.waits_on_time = on_time || young;
  after.budget_blocked = budget || after.budget_blocked;
  SetCounts(after, full);
  return later ? CutReclaim::kLater : CutReclaim::kNothing;
}

// Begins the partial_why of work whose required domain holds no more of its pods, even empty.
constexpr char kNeverMore[] = "no more ever fit: ";

bool Admitter::TryPartial(int id, uint64_t key, double now, CycleResult& out, int most_cut) {
  Entry& e = entries_[id];
  int max_cut = 0;
  for (size_t i = 0; i < e.full_counts.size(); ++i)
    max_cut = std::max(max_cut, e.full_counts[i] - e.min_counts[i]);
  if (most_cut >= 0) max_cut = std::min(max_cut, most_cut);
  if (max_cut == 0 || e.counts != e.full_counts) return false;
  const std::vector<int> full = e.full_counts;
  auto counts_for = [&](int cut) { return CountsAt(e, cut); };
  // Places e at `cut` and undoes it: the assignments and the pods (masked) that fit, or none.
  // Refused, whether by quota (else by room), per cut.
  std::map<int, bool> by_quota;
  std::string quota_why;  // the last quota refusal's reason
  auto probe = [&](int cut, std::vector<Assignment>* assign, std::vector<PodRequest>* pods) {
    SetCounts(e, counts_for(cut));
    *pods = e.pods;
    assign->clear();
    by_quota[cut] = true;
    quota_why.clear();
    if (!ResourcesAllow(e, &quota_why)) return false;
    const PodRequest* gpu_pod = FirstGpuPod(*pods);
    uint64_t allowed = ~uint64_t{0};
    if (gpu_pod && !CandidateFlavors(*gpu_pod).empty()) {
      int blocked = -1;
      allowed = QuotaModels(e, *gpu_pod, &quota_why, &blocked);
      if (allowed == 0) return false;
    }
    by_quota[cut] = false;
    return TrialPlace(e, pods, allowed, assign);
  };
  std::vector<Assignment> assign, best_assign;
  std::vector<PodRequest> pods, best_pods;
  int hi = max_cut;
  if (!probe(hi, &best_assign, &best_pods)) {
    // Its fewest pods refused by a quota: which, where its full size was told of another (a
    // trial's elastic job read "queue team-a over its borrowing limit for gpu: 64/40" for all
    // 6 pods, where at its minCount team-a was within and the root's limit held it).
    int least = 0;
    for (int c : e.counts) least += c;
    SetCounts(e, full);
    placer_.set_explain(!e.explained);
    if (most_cut < 0 && by_quota[hi] && !quota_why.empty() &&
        e.reason.find(quota_why) == std::string::npos &&
        e.reason.find("; at its fewest pods") == std::string::npos)
      e.reason += "; at its fewest pods (" + std::to_string(least) + ") too: " + quota_why;
    return false;
  }
  for (int lo = 1; lo < hi;) {
    const int mid = lo + (hi - lo) / 2;
    if (probe(mid, &assign, &pods)) {
      hi = mid;
      best_assign = std::move(assign);
      best_pods = std::move(pods);
    } else {
      lo = mid + 1;
    }
  }
  // Why one pod set more did not start: the size just above, tried here if it was not.
  if (!by_quota.count(hi - 1)) probe(hi - 1, &assign, &pods);
  // (Work that may not be preempted, held at its queue's guarantee, says so: a trial's read
  // that the quota held no more while other work of its queue borrowed beside it.)
  e.partial_why =
      !by_quota[hi - 1] ? "the fleet has room for no more now"
      : quota_why.find(kNonPreemptibleBorrows) != std::string::npos
          ? std::string("its queue's guarantee holds no more now: ") + kNonPreemptibleBorrows
          : "its queue's quota holds no more now";
  // Where no domain its topology requires could hold one pod more even empty, that lasts: said
  // so (a review read "no more now" of a gang that would never grow).
  e.never_above = -1;
  if (!by_quota[hi - 1] && e.spec.topology.required) {
    SetCounts(e, counts_for(hi - 1));
    if (std::string why; !SomeDomainHolds(state_, e.pods, e.spec.topology, &why)) {
      e.partial_why = kNeverMore + why;
      e.never_above = 0;
      for (int c : counts_for(hi)) e.never_above += c;
    }
  }
  SetCounts(e, counts_for(hi));
  for (size_t k = 0; k < best_assign.size(); ++k) state_.Apply(best_assign[k], best_pods[k]);
  e.pods = std::move(best_pods);
  e.assign = std::move(best_assign);
  placer_.set_explain(!e.explained);
  Admit(id, key, now, out);  // (what waits parked under its full shape may try again)
  return true;
}

void Admitter::GrowPartial(CycleResult& out) {
  if (!config_.elastic_growth) return;
  std::erase_if(partial_running_, [&](int id) {
    return entries_[id].phase != Phase::kAdmitted ||
           entries_[id].counts == entries_[id].full_counts;
  });
  // Higher priority first, then the longest running (not by entry: a trial's priority-0 work,
  // restored before priority-10 work of its queue, took all the room that freed).
  std::vector<int> order(partial_running_.begin(), partial_running_.end());
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Entry& x = entries_[a];
    const Entry& y = entries_[b];
    if (x.spec.priority != y.spec.priority) return x.spec.priority > y.spec.priority;
    return x.admitted_at < y.admitted_at;
  });
  int tries = 0;  // placement probes (quota refusals are cheap and not counted)
  for (size_t i = 0; i < order.size() && tries < config_.max_growths_per_cycle; ++i) {
    const int id = order[i];
    Entry& e = entries_[id];
    if (!e.options.may_grow) continue;  // (held back by its caller)
    const QueueNode& q = queues_[e.leaf];
    // Each reason it does not grow now, said where it runs (describe's Growth line). Room a
    // workload within its guarantee found too little of is not taken for growth; what waits in
    // its queue goes first; a required topology domain is not grown across. (Room held is kept
    // to where that work could run: HeldReach.)
    // (Its pods as asked, not as they were narrowed when it started: Grow adds those.)
    const bool held = hold_borrowing_ && HeldReach(e.set_request) != Reach::kOutside;
    int pods = 0;
    for (int c : e.counts) pods += c;
    e.growth_why = e.never_above >= 0 && pods >= e.never_above
                       ? "no domain its topology requires holds more of its pods, even empty"
                   : held                ? "room is held for work waiting within its guarantee"
                   : !e.ready            ? "its pods have not all started"
                   : e.shrunk_at == now_ ? "it just gave pods up"
                   : !q.pending.empty() || !q.parked.empty()
                       ? "work waiting in its queue goes first"
                   : q.stop != StopPolicy::kNone ? "its queue admits nothing now (stopPolicy)"
                                                 : "";
    if (!e.growth_why.empty()) continue;
    bool probed = false;
    if (Grow(id, &probed)) out.grown.push_back(id);
    tries += probed;
  }
}

// Adds to every pod set short of its count the same number of pods (fewer where it reaches its
// count), the most that quota (borrowing included, as for any admission: Kueue admits a new
// slice of an elastic job so) and room allow now, found by binary search as TryPartial's cut.
// Each probe places and is undone.
bool Admitter::Grow(int id, bool* probed) {
  Entry& e = entries_[id];
  const QueueNode& q = queues_[e.leaf];
  // Past its queue's guarantee only where the queue's other work fills the guarantee: else it
  // would hold part of the guarantee and part borrowed, and reclaim, which takes only work its
  // queue stays at its guarantee without, could never take it back.
  const auto within_or_beyond = [&](int64_t used, int64_t mine, int64_t guar, int64_t add) {
    return used + add <= guar || used - mine >= guar;
  };
  int most = 0;
  for (size_t i = 0; i < e.full_counts.size(); ++i)
    most = std::max(most, e.full_counts[i] - e.counts[i]);
  if (most == 0) return false;
  Entry more;  // the pods it would add
  more.leaf = e.leaf;
  more.spec = e.spec;
  more.options = e.options;  // (non-preemptible: grows within its queue's guarantee only)
  more.set_request = e.set_request;
  // A required topology: the pods added go to the domain its pods run in, on the nodes they
  // may use there (a trial's gang that required one leaf stayed at 2 of 4 pods beside a free
  // node of its leaf, for good).
  const TopologyConstraint& topology = e.spec.topology;
  std::vector<char> off_domain;
  std::map<const NodeSet*, std::shared_ptr<const NodeSet>> in_domain;  // (asked -> there)
  if (topology.required && topology.level != TopologyLevel::kNone) {
    int at = -1;
    for (const Assignment& a : e.assign)
      if (a.node >= 0) at = a.node;
    if (at < 0) return false;
    off_domain.assign(state_.node_count(), 1);
    for (int n : state_.domains(topology.level)[state_.domain_of(at, topology.level)])
      off_domain[n] = 0;
    more.spec.topology = TopologyConstraint();
  }
  auto extra_for = [&](int step) {
    std::vector<int> x;
    for (size_t i = 0; i < e.full_counts.size(); ++i)
      x.push_back(std::min(e.full_counts[i], e.counts[i] + step) - e.counts[i]);
    return x;
  };
  // (Why the first probe, one more pod per set, failed: what describe says. A literal: probes
  // run each cycle, and most say nothing.)
  const char* why = "";
  std::string quota_why;   // (what `why` points to where a quota's limit is said)
  std::string domain_why;  // (... where its topology keeps it in one domain)
  std::string pinned_why;  // (... where it may not be preempted, and so not borrow)
  auto probe = [&](int step, std::vector<Assignment>* assign, std::vector<PodRequest>* pods) {
    SetCounts(more, extra_for(step));
    if (!off_domain.empty())
      for (PodRequest& p : more.pods) {
        std::shared_ptr<const NodeSet>& there = in_domain[p.nodes.get()];
        if (!there) there = state_.Without(p.nodes.get(), off_domain);
        p.nodes = there;
        p.preferred = nullptr;  // (its tiers reach past the domain)
      }
    *pods = more.pods;
    assign->clear();
    why = "its queue's CPU or memory quota holds no more of its pods";
    if (!ResourcesAllow(more, nullptr)) return false;
    for (int r = 0; r < 2; ++r)
      if (q.res_limited[r] &&
          !within_or_beyond(r == 0 ? q.cpu : q.memory, r == 0 ? e.cpu_milli : e.memory_mib,
                            q.res_guaranteed[r], r == 0 ? more.cpu_milli : more.memory_mib))
        return false;
    why = "its queue's GPU quota holds no more of its pods";
    quota_why.clear();
    const PodRequest* gpu_pod = FirstGpuPod(*pods);
    uint64_t allowed = ~uint64_t{0};
    if (gpu_pod) {
      allowed = UnchargedModels(*gpu_pod);
      bool plain = false;  // some flavour allows it as any growth
      int by_shrink = -1;  // else the first that allows it because a shrink could take it back
      for (int f : CandidateFlavors(*gpu_pod)) {
        if (!QuotaAllows(e.leaf, f, more.gpu_milli, quota_why.empty() ? &quota_why : nullptr)) {
          // (Which limit, of which flavour: a trial read only "its queue's GPU quota" where a
          // borrowing limit of mig stopped it.)
          if (!quota_why.empty() && quota_why.rfind("its queue", 0) != 0) {
            quota_why = "its queue's GPU quota holds no more of its pods (" + quota_why + ")";
            why = quota_why.c_str();
          }
          continue;
        }
        if (Pinned(e) && NonPreemptibleOver(more, f)) {
          // (Said so: a trial's read that the quota held no more, and other work of its queue
          // then borrowed beside it.)
          pinned_why = NonPreemptibleRefusal(e.leaf, GpuAmount(q.np_usage[f] + more.gpu_milli) +
                                                         "/" + GpuAmount(q.guaranteed[f]) +
                                                         " GPUs of " + flavor_name(f));
          why = pinned_why.c_str();
          continue;
        }
        int64_t mine = 0;
        for (auto [g, milli] : e.charged)
          if (g == f) mine += milli;
        // (With elastic shrink a reclaim takes its pods beyond minCount back, the last first,
        // each while its queue stays at its guarantee: so it may also grow past the guarantee
        // where those pods cover exactly what it would borrow — one pod set, held within the
        // guarantee a whole number of pods short of it — if it may be preempted at all.)
        const int64_t pod = e.set_request.size() == 1 ? e.set_request[0].total_charge_milli() : 0;
        // (What is being evicted counts as gone, as a shrink counts it.)
        // The queue's other work within the guarantee, the gap to it a whole number of pods,
        // and what it would borrow no more than its pods beyond minCount: those a reclaim's
        // shrink takes back. (Before, it had to hold no more than the guarantee to grow past
        // it: a trial saw one shrunk for fair share stay at 4 of 12 beside idle GPUs for good,
        // though growing back to 12 would borrow only pods a shrink takes again.)
        const int64_t held = q.usage[f] - q.evicting_usage[f];
        const int64_t others = held - mine;
        const int64_t beyond_least =
            e.min_counts.size() == 1
                ? int64_t{e.counts[0] + extra_for(step)[0] - e.min_counts[0]} * pod
                : 0;
        // (Where the gap is not a whole number of pods, a shrink may still take the pod that
        // straddles the guarantee when the workload alone would hold more than it: a reclaim
        // may take the pods of such a workload while its queue borrows. Its queue is then left
        // with what it held before it grew, the most whole pods within the guarantee: a trial's
        // 1g.10gb slices, 142m each against a guarantee of 2, stayed at 14 beside idle slices
        // for good.)
        const bool whole_pods_back = (q.guaranteed[f] - others) % std::max<int64_t>(pod, 1) == 0 ||
                                     mine + more.gpu_milli > q.guaranteed[f];
        const bool reclaimable_by_shrink = config_.elastic_shrink && e.options.preemptible &&
                                           e.options.may_shrink && pod > 0 &&
                                           others <= q.guaranteed[f] && whole_pods_back &&
                                           held + more.gpu_milli - q.guaranteed[f] <= beyond_least;
        if (managed_[f] && !within_or_beyond(q.usage[f], mine, q.guaranteed[f], more.gpu_milli)) {
          // (Only where no other flavour would do, and then in this one alone: a shrink takes
          // back only pods of the flavour lent.)
          if (reclaimable_by_shrink && by_shrink < 0) by_shrink = f;
          // (Said so, apart from a quota that holds no more: a trial read "or part borrowed"
          // under a borrowing limit of 0.)
          why =
              "it would hold part of its queue's guarantee and borrow the rest (a reclaim could "
              "not take the borrowed part back alone)";
          continue;
        }
        allowed |= FlavorModels(f, *gpu_pod);
        plain = true;
      }
      if (!plain && by_shrink >= 0) allowed |= FlavorModels(by_shrink, *gpu_pod);
      if (allowed == 0) return false;
    }
    *probed = true;
    why = "no node has room for another of its pods now";
    // (Held to the domain its pods run in, said so: a trial read "no node has room" beside
    // another leaf's free GPUs.)
    if (const TopologyLevel level = e.spec.topology.level;
        e.spec.topology.required && level != TopologyLevel::kNone && !e.assign.empty()) {
      domain_why = std::string("no node of its ") + TopologyLevelName(level) + " " +
                   state_.domain_name(level, state_.domain_of(e.assign[0].node, level)) +
                   " has room for another of its pods now (its topology keeps its pods in one " +
                   TopologyLevelName(level) + ")";
      why = domain_why.c_str();
    }
    return TrialPlace(more, pods, allowed, assign);
  };
  std::vector<Assignment> assign, best_assign;
  std::vector<PodRequest> pods, best_pods;
  if (!probe(1, &best_assign, &best_pods)) {
    e.growth_why = why;
    return false;
  }
  e.growth_why.clear();
  int best = 1;
  for (int lo = 2, hi = most; lo <= hi;) {
    const int mid = lo + (hi - lo) / 2;
    if (probe(mid, &assign, &pods)) {
      best = mid;
      best_assign = std::move(assign);
      best_pods = std::move(pods);
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  // The new pods join their pod sets after the ones running (whose places do not change).
  const std::vector<int> extra = extra_for(best);
  std::vector<PodRequest> all_pods;
  std::vector<Assignment> all_assign;
  std::vector<int> counts = e.counts;
  for (size_t i = 0, old_k = 0, new_k = 0; i < counts.size(); ++i) {
    for (int k = 0; k < counts[i]; ++k, ++old_k) {
      all_pods.push_back(e.pods[old_k]);
      all_assign.push_back(e.assign[old_k]);
    }
    for (int k = 0; k < extra[i]; ++k, ++new_k) {
      state_.Apply(best_assign[new_k], best_pods[new_k]);
      all_pods.push_back(best_pods[new_k]);
      all_assign.push_back(best_assign[new_k]);
    }
    counts[i] += extra[i];
  }
  Resize(id, counts, std::move(all_pods), std::move(all_assign));
  int started = 0, asked = 0, added = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    started += counts[i], asked += e.full_counts[i], added += extra[i];
  // ("admitted 8 of 8 pods" read as if some were missing: a trial.)
  e.reason = started == asked ? "all " + std::to_string(asked) + " pods admitted (" +
                                    std::to_string(added) + " added as room freed)"
                              : "admitted " + std::to_string(started) + " of " +
                                    std::to_string(asked) + " pods (" + std::to_string(added) +
                                    " added as room freed; partial admission)";
  return true;
}

// Whether admitting it would take its queue above its guarantee in a managed flavour.
bool Admitter::WouldBorrow(int id) const {
  const Entry& e = entries_[id];
  for (const PodRequest& p : e.pods) {
    if (p.kind == DeviceKind::kNone) continue;
    // Any flavour it may be charged to where its queue would go past its guarantee (its
    // attempts may land there: callers treat it as borrowing) and its quota lets it: a flavour
    // its quota refuses it is one it is never charged to (a trial's whole-GPU work, within its
    // queue's guarantee of gpu, was held back as a borrower for an h200 flavour its tree has no
    // quota of). Where it fits no guarantee at all, it borrows whatever its quota says.
    bool within = false, past = false;
    for (int f : CandidateFlavors(p)) {
      if (!managed_[f] || WithinGuarantee(e.leaf, f, e.gpu_milli)) {
        within = true;
        continue;
      }
      if (QuotaAllows(e.leaf, f, e.gpu_milli, nullptr)) return true;
      past = true;
    }
    return past && !within;
  }
  return false;
}

namespace {

// `pods` once for each difference CouldUse sees, and a hash of those differences.
std::vector<const PodRequest*> PlacesOf(const std::vector<PodRequest>& pods, uint64_t* key) {
  std::vector<const PodRequest*> shapes;
  for (const PodRequest& p : pods)
    if (std::none_of(shapes.begin(), shapes.end(), [&](const PodRequest* q) {
          return q->kind == p.kind && q->model_mask == p.model_mask && q->nodes == p.nodes &&
                 q->cpu_milli == p.cpu_milli && q->memory_mib == p.memory_mib;
        }))
      shapes.push_back(&p);
  uint64_t h = 1469598103934665603ull;
  for (const PodRequest* p : shapes)
    for (uint64_t v : {static_cast<uint64_t>(p->kind), p->model_mask,
                       static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p->nodes.get())),
                       static_cast<uint64_t>(p->cpu_milli), static_cast<uint64_t>(p->memory_mib)}) {
      h ^= v;
      h *= 1099511628211ull;
      h ^= h >> 29;
    }
  *key = h;
  return shapes;
}

}  // namespace

bool Admitter::CouldUse(const PodRequest& p, int n) const {
  return (!p.nodes || p.nodes->in[n]) && TypeCouldUse(p, n);
}

std::vector<std::vector<char>> Admitter::TypesFor(
    const std::vector<const PodRequest*>& shapes) const {
  const std::vector<int>& reps = state_.type_representatives();
  std::vector<std::vector<char>> types(shapes.size(), std::vector<char>(reps.size(), 0));
  for (size_t k = 0; k < shapes.size(); ++k)
    for (size_t t = 0; t < reps.size(); ++t) types[k][t] = TypeCouldUse(*shapes[k], reps[t]);
  return types;
}

bool Admitter::TypeCouldUse(const PodRequest& p, int n) const {
  const Node& node = state_.node(n);
  if (node.cpu.value() < p.cpu_milli || node.memory.value() < p.memory_mib) return false;
  if (p.kind == DeviceKind::kNone) return true;
  const int model = state_.node_model(n);
  if (model < 0 || model >= 64 || !(p.model_mask >> model & 1)) return false;
  for (const Device& d : node.devices)
    if (d.mig_enabled() == (p.kind == DeviceKind::kMig)) return true;
  return false;
}

void Admitter::HoldRegion(int id, const std::vector<PodRequest>& pods) {
  const Entry& e = entries_[id];
  const TopologyConstraint& topology = e.spec.topology;
  const bool domains = topology.required && topology.level != TopologyLevel::kNone;
  uint64_t key = 0;
  const std::vector<const PodRequest*> shapes = PlacesOf(pods, &key);
  // A required domain must hold the GPUs it would start with: its pod sets' least counts
  // (elastic work may start with fewer pods), or what it asks now where that is less.
  int64_t need = 0;
  if (domains) {
    int64_t least = 0;
    for (size_t i = 0; i < e.set_request.size() && i < e.min_counts.size(); ++i)
      least += e.min_counts[i] * e.set_request[i].total_gpu_milli();
    for (const PodRequest& p : pods) need += p.total_gpu_milli();
    need = std::min(need, least);
    key ^= (static_cast<uint64_t>(topology.level) + 1) * 0x9e3779b97f4a7c15ull ^
           static_cast<uint64_t>(need) * 0xc2b2ae3d27d4eb4full;
  }
  auto [it, made] = region_of_.try_emplace(key);
  std::vector<char>& region = it->second;
  if (made && region_of_.size() > kHoldRegionsPerCycle) {
    region.assign(state_.node_count(), 1);
  } else if (made) {
    region.assign(state_.node_count(), 0);
    const std::vector<std::vector<char>> types = TypesFor(shapes);
    for (int n = 0; n < state_.node_count(); ++n)
      for (size_t k = 0; k < shapes.size(); ++k)
        if (types[k][state_.node_type(n)] && (!shapes[k]->nodes || shapes[k]->nodes->in[n])) {
          region[n] = 1;
          break;
        }
    if (domains) {
      // Only the domains whose GPUs some pod could use add up to what it needs: a gang that
      // must run in one leaf waits for nothing in a leaf too small for it.
      std::vector<char> kept(state_.node_count(), 0);
      for (const std::vector<int>& domain : state_.domains(topology.level)) {
        int64_t milli = 0;
        for (int n : domain) {
          if (!region[n]) continue;
          // A GPU counts whole for whole GPUs and fractions; in MIG mode, its slices of the
          // profiles the pods ask, by their compute (a leaf of three GPUs in 3g.40gb halves
          // holds 2.568 GPUs of such slices, not 3).
          // (Each slice once, where any of its pods asks its profile: a gang of a 3g and a 4g
          // pod counts both halves of a GPU split so.)
          for (const Device& d : state_.node(n).devices) {
            bool whole = false;
            int64_t compute = 0;  // its asked slices' compute slices, of 7
            for (size_t sl = 0; sl < d.mig_slices.size(); ++sl) {
              const int profile = state_.MigProfileIndex(d.mig_slices[sl]);
              for (const PodRequest* p : shapes)
                if (p->kind == DeviceKind::kMig && p->mig_profile == profile && CouldUse(*p, n)) {
                  if (const MigProfile* mp = FindMigProfile(d.model, d.mig_slices[sl], d.memory))
                    compute += mp->compute_slices;
                  break;
                }
            }
            for (const PodRequest* p : shapes)
              whole |= p->kind != DeviceKind::kNone && p->kind != DeviceKind::kMig &&
                       !d.mig_enabled() && CouldUse(*p, n);
            milli += whole ? kMilliPerGpu : compute * kMilliPerGpu / 7;
          }
        }
        if (milli < need) continue;
        for (int n : domain) kept[n] = region[n];
      }
      region = std::move(kept);
    }
  }
  if (std::none_of(held_regions_.begin(), held_regions_.end(),
                   [&](const auto& held) { return held.first == &region; }))
    held_regions_.push_back({&region, e.leaf});
}

void Admitter::RestoreHold(size_t regions) {
  if (regions >= held_regions_.size()) return;
  held_regions_.resize(regions);
  held_nodes_.assign(state_.node_count(), 0);  // (counted afresh by HeldNodes)
  held_nodes_of_ = 0;
  held_everywhere_ = false;
  ++held_version_;
  reach_of_.clear();  // (of versions gone: the cap counts the live ones)
}

const std::vector<char>& Admitter::HeldNodes() {
  bool grew = false;
  for (; held_nodes_of_ < held_regions_.size(); ++held_nodes_of_) {
    if (held_everywhere_) continue;
    const std::vector<char>& region = *held_regions_[held_nodes_of_].first;
    for (int n = 0; n < state_.node_count(); ++n)
      if (region[n] && !held_nodes_[n]) held_nodes_[n] = grew = true;
  }
  if (grew) {
    ++held_version_;
    reach_of_.clear();  // (of versions gone: the cap counts the live ones)
    held_everywhere_ =
        std::all_of(held_nodes_.begin(), held_nodes_.end(), [](char held) { return held != 0; });
  }
  return held_nodes_;
}

Admitter::Reach Admitter::HeldReach(const std::vector<PodRequest>& pods, int* queue) {
  const std::vector<char>& held = HeldNodes();
  uint64_t key = 0;
  const std::vector<const PodRequest*> shapes = PlacesOf(pods, &key);
  auto [it, made] = reach_of_.try_emplace({key, held_version_});
  if (made && reach_of_.size() > kHeldReachesPerCycle) {
    it->second = {Reach::kInside, held_regions_.empty() ? -1 : held_regions_.front().second};
  } else if (made) {
    // Whether each node could take one of its pods (once: the regions are read against it).
    std::vector<char> could(state_.node_count(), 0);
    bool in = false, out = false;
    const std::vector<std::vector<char>> types = TypesFor(shapes);
    for (int n = 0; n < state_.node_count(); ++n) {
      for (size_t k = 0; k < shapes.size(); ++k)
        if (types[k][state_.node_type(n)] && (!shapes[k]->nodes || shapes[k]->nodes->in[n])) {
          could[n] = 1;
          break;
        }
      if (could[n]) (held[n] ? in : out) = true;
    }
    // (Where it could run nowhere, it is not held back: its own attempt says why.)
    it->second.first = !in ? Reach::kOutside : out ? Reach::kPartly : Reach::kInside;
    it->second.second = -1;
    for (const auto& [region, leaf] : held_regions_) {
      if (!in) break;
      bool reaches = false;
      for (int n = 0; n < state_.node_count() && !reaches; ++n) reaches = could[n] && (*region)[n];
      if (reaches) {
        it->second.second = leaf;
        break;
      }
    }
  }
  if (queue) *queue = it->second.second;
  return it->second.first;
}

void Admitter::KeepOffHeld(std::vector<PodRequest>& pods) {
  const std::vector<char>& held = HeldNodes();
  for (PodRequest& p : pods) {
    std::shared_ptr<const NodeSet>& nodes = off_held_nodes_[{p.nodes.get(), held_version_}];
    if (!nodes) nodes = state_.Without(p.nodes.get(), held);
    if (p.preferred) {
      std::shared_ptr<const Tiers>& tiers = off_held_tiers_[{p.preferred.get(), held_version_}];
      if (!tiers) {
        auto narrowed = std::make_shared<Tiers>();
        for (const std::shared_ptr<const NodeSet>& tier : *p.preferred) {
          std::shared_ptr<const NodeSet>& off = off_held_nodes_[{tier.get(), held_version_}];
          if (!off) off = state_.Without(tier.get(), held);
          if (!off->list.empty()) narrowed->push_back(off);
        }
        tiers = std::move(narrowed);
      }
      p.preferred = tiers->empty() ? nullptr : tiers;
    }
    p.nodes = nodes;
  }
}

bool Admitter::WithinOtherTree(int id) const {
  const Entry& e = entries_[id];
  const int root = TreeRoot(e.leaf);
  if (held_for_ < 0 || held_roots_.count(root)) return false;
  for (const PodRequest& p : e.pods) {
    if (p.kind == DeviceKind::kNone) continue;
    for (int f : CandidateFlavors(p))
      if (managed_[f] && !WithinGuarantee(root, f, e.gpu_milli)) return false;
    return true;
  }
  return true;
}

// A cheap necessary condition for Preempt to find any victim.
bool Admitter::OwnMayGo(int id) const {
  const Entry& e = entries_[id];
  const PreemptionPolicy& policy = queues_[e.leaf].spec.preemption;
  const auto& own = queues_[e.leaf].running_priorities;
  return !own.empty() && policy.within_queue != PreemptionPolicy::Within::kNever &&
         (*own.begin() < e.spec.priority ||
          (*own.begin() == e.spec.priority &&
           policy.within_queue == PreemptionPolicy::Within::kLowerOrNewerEqualPriority));
}

bool Admitter::MayPreempt(int id) const {
  const Entry& e = entries_[id];
  // (preemptionPolicy Never: nothing to wait for a search about; partial admission goes on.)
  if (!e.options.may_preempt) return false;
  const PreemptionPolicy& policy = queues_[e.leaf].spec.preemption;
  if (OwnMayGo(id)) return true;
  // Others' borrowed work: taken back within the guarantee, or, where the queue's policy lets
  // it, evicted for higher-priority work that borrows.
  bool takes_borrowed = policy.borrow_within_cohort == PreemptionPolicy::Borrow::kLowerPriority;
  if (ResourcesWithinGuarantee(e))
    for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
      if (MayReclaim(e.leaf, f, e.gpu_milli)) takes_borrowed = true;
  // And CPU or memory others of its tree hold beyond their guarantees.
  const unsigned resources = ResourceReclaims(id);
  for (int q = 0; q < queue_count(); ++q) {
    if (q == e.leaf || !is_leaf(q)) continue;
    for (int r = 0; r < 2; ++r)
      if ((resources >> r & 1) && queues_[q].root == queues_[e.leaf].root && BorrowsResource(q, r))
        return true;
    if (takes_borrowed)
      for (int f = 0; f < static_cast<int>(flavors_.size()); ++f)
        if (managed_[f] &&
            queues_[q].usage[f] - queues_[q].evicting_usage[f] > queues_[q].guaranteed[f])
          return true;
    if (config_.fair_share_preemption && !queues_[e.leaf].spec.best_effort &&
        !queues_[e.leaf].spec.no_fair_share && FairShareAbove(e.leaf, q) &&
        policy.reclaim_within_cohort != PreemptionPolicy::Reclaim::kNever)
      return true;
  }
  return false;
}

void Admitter::AddRunning(int id) {
  queues_[entries_[id].leaf].running.insert(id);
  queues_[entries_[id].leaf].running_priorities.insert(entries_[id].spec.priority);
}

void Admitter::RemoveRunning(int id) {
  if (!queues_[entries_[id].leaf].running.erase(id)) return;
  auto& prios = queues_[entries_[id].leaf].running_priorities;
  prios.erase(prios.find(entries_[id].spec.priority));
  unready_.erase(id);
}

void Admitter::MarkEvicting(int victim, int preemptor, const std::string& reason, CycleResult& out,
                            Eviction::Basis basis) {
  Entry& w = entries_[victim];
  w.phase = Phase::kEvicting;
  w.reason = reason;
  w.options.leaving = preemptor < 0;
  CountEvicting(victim, +1);
  RemoveRunning(victim);
  out.evicted.push_back({victim, preemptor, reason, basis});
  preemptor_[victim] = preemptor;
}

double Admitter::LostIfEvicted(int id, double at) const {
  const Entry& w = entries_[id];
  const double began = std::max(w.admitted_at, w.options.started_at);
  double ran = std::max(0.0, at - began);
  const double every = w.options.checkpoint_interval_s;
  if (every > 0) ran = std::clamp(std::fmod(ran, every), 0.0, ran);
  // (A shrink's pods: no more than since they joined; checkpoints kept their phase.)
  if (w.joined_at >= 0) ran = std::min(ran, std::max(0.0, at - w.joined_at));
  if (w.sizes.empty()) return ran * static_cast<double>(w.gpu_milli) / 1000.0;
  // Grown: each size over the part of [at - ran, at] it held.
  double lost = 0;
  for (size_t k = 0; k < w.sizes.size(); ++k) {
    const double from = std::max(at - ran, w.sizes[k].first);
    const double to = k + 1 < w.sizes.size() ? std::min(at, w.sizes[k + 1].first) : at;
    if (to > from) lost += (to - from) * static_cast<double>(w.sizes[k].second) / 1000.0;
  }
  return lost;
}

// A preemption's why after "preempting N workload(s) ": "for higher-priority work" as it is,
// "queue b reclaims its guarantee" as "as queue b reclaims …".
static std::string ForWhy(const std::string& why) {
  return why.rfind("for ", 0) == 0 ? why : "as " + why;
}

double Admitter::EvictionCost(int id, double at) const {
  return LostIfEvicted(id, at) + entries_[id].options.lost_before_s;
}

std::string Admitter::CutShortNote(int id, int by, double now) const {
  const Entry& w = entries_[id];
  if (now - w.admitted_at >= w.options.min_runtime_s) return "";
  const auto secs = [](double s) { return std::to_string(std::llround(s)) + " s"; };
  return "; its minimum runtime of " + secs(w.options.min_runtime_s) + " counts for " +
         secs(MinRuntime(id, by)) +
         " against another queue's work (the reclaimMinRuntimeSeconds in force for its queue)";
}

double Admitter::MinRuntime(int id, int by) const {
  const Entry& w = entries_[id];
  // (Against its own queue's work: at least the queue's preemptMinRuntimeSeconds.)
  if (entries_[by].leaf == w.leaf)
    return std::max(w.options.min_runtime_s, queues_[w.leaf].preempt_min_runtime);
  return std::min(w.options.min_runtime_s, queues_[w.leaf].reclaim_min_runtime);
}

// Takes a running workload off the state for a trial plan, and puts it back.
int64_t Admitter::KeptByChildren(int q, int f) const {
  if (kept_by_children_.empty()) {
    kept_by_children_.assign(queues_.size(), std::vector<int64_t>(flavors_.size(), 0));
    for (size_t n = 0; n < queues_.size(); ++n)
      for (int c : queues_[n].children)
        for (size_t g = 0; g < flavors_.size(); ++g)
          if (queues_[c].lend_limit[g] && queues_[c].guaranteed[g] > *queues_[c].lend_limit[g])
            kept_by_children_[n][g] += queues_[c].guaranteed[g] - *queues_[c].lend_limit[g];
  }
  return kept_by_children_[q][f];
}

bool Admitter::InServicePart(const Assignment& a, Assignment* part) const {
  if (out_of_service_.count({a.node, -1})) return false;
  *part = a;
  std::erase_if(part->devices, [&](const DeviceShare& d) {
    return out_of_service_.count({a.node, d.device}) > 0;
  });
  return true;
}

void Admitter::TrialRelease(int v) {
  const Entry& w = entries_[v];
  for (size_t i = 0; i < w.assign.size(); ++i) {
    if (out_of_service_.empty()) {
      state_.Release(w.assign[i], w.pods[i]);
    } else if (Assignment part; InServicePart(w.assign[i], &part)) {
      state_.Release(part, w.pods[i]);
    }
  }
}

void Admitter::TrialReapply(int v) {
  const Entry& w = entries_[v];
  for (size_t i = 0; i < w.assign.size(); ++i) {
    if (out_of_service_.empty()) {
      state_.Apply(w.assign[i], w.pods[i]);
    } else if (Assignment part; InServicePart(w.assign[i], &part)) {
      state_.Apply(part, w.pods[i]);
    }
  }
}

bool Admitter::HoldsForMover(int v) const {
  const Entry& w = entries_[v];
  for (auto [f, milli] : w.charged)
    if (managed_[f] && queues_[w.leaf].usage[f] > queues_[w.leaf].guaranteed[f]) return false;
  return true;
}

void Admitter::PlaceMoves(int p, const std::vector<int>& movers) {
  Entry& e = entries_[p];
  e.move_plan.clear();
  const std::vector<int> elsewhere = NodesOff(e.plan, state_.node_count());
  ReleaseHolds(e);  // (its own plan's holds are not room for its movers)
  std::vector<std::pair<Assignment, const PodRequest*>> trial;
  for (int v : movers) {
    if (v < 0 || v >= static_cast<int>(entries_.size())) continue;
    const Entry& w = entries_[v];
    if (w.phase != Phase::kEvicting || !w.options.moving || w.pods.size() != 1 || !HoldsForMover(v))
      continue;
    if (const auto by = preemptor_.find(v); by == preemptor_.end() || by->second != p) continue;
    if (PlaceNow(w.pods[0], trial, &elsewhere))
      e.move_plan.push_back({v, trial.back().first, w.pods[0]});
  }
  for (auto it = trial.rbegin(); it != trial.rend(); ++it) state_.Release(it->first, *it->second);
  HoldPlan(p);
}

bool Admitter::Consolidate(int id, const std::vector<PodRequest>& pods,
                           const TopologyConstraint& topology, double now, CycleResult& out,
                           bool reclaim) {
  if (consolidating_ || consolidations_left_ <= 0)
    return ConsolidateOnce(id, pods, topology, now, out, reclaim);
  // Other consolidations' held places for their movers, released for this one's plan.
  // (Nominated ones only: nominated_, not every entry, which a cycle of 50,000 waiting would
  // scan on each plan.)
  std::vector<std::pair<int, std::vector<int>>> holding;
  for (int p : std::set<int>(nominated_.begin(), nominated_.end())) {
    Entry& e = entries_[p];
    if (p == id || e.move_plan.empty() || !e.nominated) continue;
    std::vector<int> movers;
    for (const Entry::MoveHold& m : e.move_plan) movers.push_back(m.mover);
    e.move_plan.clear();
    HoldPlan(p);
    holding.push_back({p, std::move(movers)});
  }
  consolidating_ = true;
  const bool planned = ConsolidateOnce(id, pods, topology, now, out, reclaim);
  consolidating_ = false;
  for (const auto& [p, movers] : holding)
    if (entries_[p].nominated && entries_[p].phase == Phase::kPending) PlaceMoves(p, movers);
  return planned;
}

bool Admitter::ConsolidateOnce(int id, const std::vector<PodRequest>& pods,
                               const TopologyConstraint& topology, double now, CycleResult& out,
                               bool reclaim) {
  if (consolidations_left_ <= 0) return false;
  if (!entries_[id].options.may_preempt) return false;  // (preemptionPolicy Never)
  // A workload holding a reservation waits for its room, which its plan says frees: moving
  // others' work to gather room elsewhere would throw their work away to start a little sooner,
  // and give the room it held to others. (Reclaim, with moves, takes back only what others
  // borrow.)
  if (!reclaim && (entries_[id].reserving || entries_[id].was_reserving)) return false;
  const PodRequest* gpu_pod = nullptr;
  int64_t need = 0;
  for (const PodRequest& p : pods) {
    need += p.total_gpu_milli();
    if (!gpu_pod && p.kind != DeviceKind::kNone) gpu_pod = &p;
  }
  if (!gpu_pod) return false;
  // A gang that needs one domain (a required topology) is planned within one domain at a time,
  // the roomiest first: its pods are placed there only, and the work that leaves it goes
  // anywhere (a trial's 2-node gang needing one leaf waited for good beside a leaf that moves
  // would have cleared).
  const bool scoped = topology.required && topology.level != TopologyLevel::kNone;
  const std::vector<int>* scope = nullptr;  // (the domain tried now; null: every node)
  std::vector<char> in_scope;
  const auto scoped_out = [&](int n) { return scope != nullptr && !in_scope[n]; };
  // Fragmentation only: the free GPUs of the models it may use add up to enough (below). Its
  // pods go on the nodes its selector leaves it (a workload's pod sets share one).
  const auto model_ok = [&](int n) {
    const int m = state_.node_model(n);
    return m >= 0 && (gpu_pod->model_mask >> m & 1) && (!gpu_pod->nodes || gpu_pod->nodes->in[n]);
  };
  const auto usable_room = [&](int v) {  // the GPUs v holds on nodes of those models
    int64_t room = 0;
    for (const Assignment& a : entries_[v].assign)
      if (model_ok(a.node))
        for (const DeviceShare& d : a.devices) room += d.milli;
    return room;
  };
  // (A node's free GPUs leave MIG GPUs out: work that takes slices counts their free slices.)
  const ClusterState::RoomKinds kinds = ClusterState::RoomKindsOf(pods);
  const auto free_on = [&](int n) { return state_.node_free_room(n, kinds); };
  // ... of its models on every node: what its selector leaves out (excludeNodes, a
  // nodeSelector) is where work moved off the nodes it may use can go (a trial's gang excluding
  // one node of the other leaf was refused a plan that moved work there).
  int64_t free = 0;
  for (int n = 0; n < state_.node_count(); ++n)
    if (const int m = state_.node_model(n); m >= 0 && (gpu_pod->model_mask >> m & 1))
      free += free_on(n);
  // A disruption budget that kept work from leaving a node that would otherwise have made the
  // room: said if no plan is found; else whether the moves a node needed passed the cap
  // (consolidationMaxMoves), or those that cleared one had nowhere else to go.
  std::string budget_held;
  bool move_capped = false, homeless = false;
  // Work in the way that never moves, and why, where moving it would have made the room: said
  // if no plan is found (a user-style trial's gang, beside 15 free GPUs of which non-preemptible
  // work held the one it lacked, was told nothing of consolidation).
  std::string pinned_said;
  const auto stays_why = [&](int v) -> const char* {
    const Entry& w = entries_[v];
    if (v == id || w.phase != Phase::kAdmitted) return "";
    if (!w.options.preemptible) return "not preemptible";
    if (w.pods.size() != 1 || w.spec.gang) return "of several pods, which are not moved";
    if (w.counts != w.full_counts) return "started in part";
    if (now - w.admitted_at < MinRuntime(v, id)) return "within its minimum runtime";
    if (queues_[w.leaf].stop != StopPolicy::kNone) return "its queue is stopped";
    return "";
  };
  const auto pinned_note = [&](int v, int n) {
    return FullName(v) + " on " + fleet_.nodes[n].name.str() + ", " + std::string(stays_why(v));
  };
  // (By each budget on leaf q's way up, `counted` this plan's moves by leaf.)
  const auto within_budget = [&](int q, const std::map<int, int>& counted) {
    return BudgetSpent(q, counted, {}, consolidation_staged_) < 0;
  };

  // Whether leaf q is inside the department whose own guarantee a reclaim in f takes back
  // (ReclaimScope): its work does not go for it.
  std::map<int, int> scope_of;  // by flavour, as first asked
  const auto scope_in = [&](int f) {
    auto [it, fresh] = scope_of.try_emplace(f, -1);
    if (fresh) it->second = ReclaimScope(entries_[id].leaf, f, entries_[id].gpu_milli);
    return it->second;
  };
  const auto in_department = [&](int f, int q) {
    const int scope = scope_in(f);
    return scope >= 0 && scope != entries_[id].leaf && Under(q, scope);
  };
  const auto best_effort_only = [&](int f) {
    return BestEffortReclaimOnly(entries_[id].leaf, f, scope_in(f));
  };
  std::vector<int> reclaimed;                    // of the plan being tried
  std::map<std::pair<int, int>, int64_t> taken;  // reclaimed GPUs by (queue, flavour)
  std::map<int, int> moving_per_queue;           // workloads reclaimed or moved, by queue
  uint64_t flavors = 0;
  // Whether v may be reclaimed beside what `t` and `pq` already hold: its queue's disruption
  // budget allows it and the queue stays at or above its guarantee without it.
  const auto lends = [&](int v, const std::map<std::pair<int, int>, int64_t>& t,
                         const std::map<int, int>& pq) {
    const Entry& w = entries_[v];
    const QueueNode& vq = queues_[w.leaf];
    if (!within_budget(w.leaf, pq)) return false;
    const auto taken_in = [&t](int q, int f) {
      const auto held = t.find({q, f});
      return held == t.end() ? int64_t{0} : held->second;
    };
    for (auto [f, milli] : w.charged)
      if (f < 64 && (flavors >> f & 1) &&
          (vq.usage[f] - vq.evicting_usage[f] - taken_in(w.leaf, f) - milli < vq.guaranteed[f] ||
           (best_effort_only(f) && !vq.spec.best_effort) ||
           !BranchLends(entries_[id].leaf, w.leaf, f, milli, taken_in) || in_department(f, w.leaf)))
        return false;
    return true;
  };
  // Takes the cheapest candidates that may go, in order, into `t` and `pq` until `have` GPUs
  // are free (each one's usable room added); `take(v)` is called for each. Returns `have`.
  std::vector<int> cands, by_id;  // by_id: the same, sorted, for lookups
  const auto take_cheapest = [&](int64_t have, std::map<std::pair<int, int>, int64_t>& t,
                                 std::map<int, int>& pq, const std::function<void(int)>& take) {
    for (int v : cands) {
      if (have >= need) break;
      if (!lends(v, t, pq)) continue;
      for (auto [f, milli] : entries_[v].charged) NoteTaken(t, entries_[v].leaf, f, milli);
      ++pq[entries_[v].leaf];
      have += usable_room(v);
      take(v);
    }
    return have;
  };
  // Reclaim candidates: other queues' preemptible work past its minimum runtime, charged to a
  // flavour it may reclaim, whose room the pods can use, on nodes that take new work, cheapest
  // first (priority, GPU-seconds lost); `lends` decides, as the plan grows, which may go.
  if (reclaim) {
    const Entry& me = entries_[id];
    for (int f : CandidateFlavors(*gpu_pod))
      if (f < 64 && MayReclaim(me.leaf, f, me.gpu_milli)) flavors |= uint64_t{1} << f;
    if (flavors == 0) return false;
    std::vector<std::tuple<int, double, int>> cost;
    for (int q = 0; q < queue_count(); ++q) {
      if (!is_leaf(q) || q == me.leaf) continue;
      for (int v : queues_[q].running) {
        const Entry& w = entries_[v];
        if (!w.options.preemptible || now - w.admitted_at < MinRuntime(v, id) ||
            w.shrunk_at == now_)
          continue;
        if (queues_[me.leaf].spec.preemption.reclaim_within_cohort ==
                PreemptionPolicy::Reclaim::kLowerPriority &&
            w.spec.priority >= me.spec.priority)
          continue;
        bool in_flavor = false;
        for (auto [f, milli] : w.charged) in_flavor |= f < 64 && (flavors >> f & 1) && milli > 0;
        for (const Assignment& a : w.assign) in_flavor &= !no_eviction_[a.node];
        if (in_flavor && usable_room(v) > 0)
          cost.emplace_back(w.spec.priority, EvictionCost(v, now), v);
      }
    }
    std::sort(cost.begin(), cost.end());
    for (const auto& c : cost) cands.push_back(std::get<2>(c));
    by_id = cands;
    std::sort(by_id.begin(), by_id.end());
    // Enough room once the candidates are gone, as far as their queues lend it?
    std::map<std::pair<int, int>, int64_t> t;
    std::map<int, int> pq;
    free = take_cheapest(free, t, pq, [](int) {});
  }
  if (free < need) return false;
  --consolidations_left_;
  // What the plan being tried does with a workload: kStays, moved or reclaimed (set where they
  // are pushed, cleared between tries).
  constexpr uint8_t kStays = 0, kMoved = 1, kReclaimed = 2;
  std::vector<uint8_t> fate(entries_.size(), kStays);
  const auto is_reclaimed = [&](int v) { return fate[v] == kReclaimed; };

  std::vector<int> moved;  // released from their nodes for the trial
  std::vector<std::pair<Assignment, const PodRequest*>> applied;  // trial placements
  auto movable = [&](int v, bool mind_budget = true) {
    const Entry& w = entries_[v];
    // (Not one started in part: moved, it would ask for all its pods again.)
    if (v == id || w.phase != Phase::kAdmitted || !w.options.preemptible || w.pods.size() != 1 ||
        w.spec.gang || now - w.admitted_at < MinRuntime(v, id) || w.counts != w.full_counts)
      return false;
    // Moved work waits to be placed again, which a stopped queue's never is.
    if (fate[v] != kStays || queues_[w.leaf].stop != StopPolicy::kNone) return false;
    return !mind_budget || within_budget(w.leaf, moving_per_queue);
  };
  // A reclaim candidate that is still running in the trial and may be reclaimed now.
  const auto reclaimable = [&](int v, const std::map<std::pair<int, int>, int64_t>& t,
                               const std::map<int, int>& pq) {
    return fate[v] == kStays && std::binary_search(by_id.begin(), by_id.end(), v) &&
           lends(v, t, pq);
  };
  auto place = [&](const PodRequest& pod, const std::vector<int>* only) {
    return PlaceNow(pod, applied, only);
  };
  // A mover goes outside the domain being cleared where it can (a test: best fit put the first
  // pod's movers on the domain's next node, where moved work stays, and that pod found none).
  std::vector<int> outside;  // (the nodes off the scope, as set below)
  auto place_mover = [&](const PodRequest& pod) {
    return (scope != nullptr && place(pod, &outside)) || place(pod, nullptr);
  };
  auto undo_to = [&](size_t mark) {
    while (applied.size() > mark) {
      state_.Release(applied.back().first, *applied.back().second);
      applied.pop_back();
    }
  };

  // Two tries when reclaiming. First, work is reclaimed only where it clears a node for a pod:
  // the fewest evictions. If that finds no plan (typically: the movers found no room), the
  // cheapest candidates are reclaimed first, wherever they run, until the free GPUs add up,
  // the movers go into that room, and of those first victims only the ones on nodes the plan
  // uses are kept.
  // A gang that needs one domain: the domains where it could fit once what may leave has left
  // — on each node the free GPUs of its models and those of the work that may move or be
  // reclaimed there, counted where they hold one of its pods — the most free first; a few
  // (a review: by free room alone, domains of nodes none of which could take a pod came
  // first and used up the tries).
  std::vector<const std::vector<int>*> scopes{nullptr};
  std::vector<int> scope_domain{-1};  // (each scope's domain, for the reason)
  int cleared = -1;                   // the domain the plan found is in
  if (scoped) {
    constexpr size_t kMaxDomains = 4;
    int64_t least = std::numeric_limits<int64_t>::max();  // the smallest pod's GPUs
    for (const PodRequest& p : pods)
      if (p.kind != DeviceKind::kNone) least = std::min(least, p.total_gpu_milli());
    std::vector<std::tuple<int64_t, int, const std::vector<int>*>> roomy;  // (-free, d, nodes)
    const auto& domains = state_.domains(topology.level);
    for (size_t d = 0; d < domains.size(); ++d) {
      int64_t room = 0, potential = 0;
      // (The same, were disruption budgets no bar, and the last queue whose budget was: a
      // domain only a budget keeps from a plan is said, as a node so kept is below.)
      int64_t unbudgeted = 0, unpinned = 0;  // (and were work that never moves no bar)
      int held_queue = -1;
      std::string pinned_here;
      for (int n : domains[d]) {
        if (!model_ok(n)) continue;
        int64_t here = free_on(n), here_unbudgeted = here, here_unpinned = here;
        room += here;
        for (int v : node_workloads_[n]) {
          if (no_eviction_[n]) continue;
          const bool leaves = movable(v) || reclaimable(v, taken, moving_per_queue);
          const bool held = !leaves && movable(v, /*mind_budget=*/false);
          const bool pinned = !leaves && !held && *stays_why(v) != '\0';
          if (held) held_queue = entries_[v].leaf;
          if (pinned && pinned_here.empty()) pinned_here = pinned_note(v, n);
          if (!leaves && !held && !pinned) continue;
          for (const Assignment& a : entries_[v].assign)
            if (a.node == n)
              for (const DeviceShare& share : a.devices) {
                here_unpinned += share.milli;
                if (!pinned) here_unbudgeted += share.milli;
                if (leaves) here += share.milli;
              }
        }
        if (here >= least) potential += here;
        if (here_unbudgeted >= least) unbudgeted += here_unbudgeted;
        if (here_unpinned >= least) unpinned += here_unpinned;
      }
      if (potential < need && unbudgeted < need && unpinned >= need && pinned_said.empty())
        pinned_said = pinned_here;
      if (potential >= need) {
        roomy.emplace_back(-room, static_cast<int>(d), &domains[d]);
      } else if (unbudgeted >= need && held_queue >= 0) {
        budget_held = queues_[held_queue].spec.name;
      }
    }
    std::sort(roomy.begin(), roomy.end());
    if (roomy.size() > kMaxDomains) roomy.resize(kMaxDomains);
    scopes.clear();
    scope_domain.clear();
    for (const auto& r : roomy) {
      scopes.push_back(std::get<2>(r));
      scope_domain.push_back(std::get<1>(r));
    }
  }
  bool ok = false;
  std::vector<std::pair<Assignment, const PodRequest*>> mine;  // its pods' planned places
  placer_.set_explain(false);
  for (size_t tried = 0; tried < scopes.size() && !ok; ++tried) {
    // (Each domain after the first is a plan of the cycle's few.)
    if (tried > 0 && consolidations_left_-- <= 0) break;
    scope = scopes[tried];
    cleared = scope_domain[tried];
    if (scope != nullptr) {
      in_scope.assign(state_.node_count(), 0);
      for (int n : *scope) in_scope[n] = 1;
      outside.clear();
      for (int n = 0; n < state_.node_count(); ++n)
        if (!in_scope[n]) outside.push_back(n);
    }
    for (int pass = 0; pass < (reclaim ? 2 : 1) && !ok; ++pass) {
      for (int v : reclaimed) fate[v] = kStays;
      for (int v : moved) fate[v] = kStays;
      reclaimed.clear();
      moved.clear();
      taken.clear();
      moving_per_queue.clear();
      mine.clear();
      if (pass == 1) {
        int64_t have = 0;
        for (int n = 0; n < state_.node_count(); ++n)
          if (model_ok(n)) have += free_on(n);
        take_cheapest(have, taken, moving_per_queue, [&](int v) {
          TrialRelease(v);
          reclaimed.push_back(v);
          fate[v] = kReclaimed;
        });
      }
      const size_t first_victims = reclaimed.size();
      ok = true;
      for (const PodRequest& pod : pods) {
        if (place(pod, scope)) {
          mine.push_back(applied.back());
          continue;
        }
        // Nodes where the free room plus the work that may leave covers the pod, fewest leaving
        // first, then the lowest top priority among them. Work leaves by moving (it must fit
        // elsewhere) or by being reclaimed.
        std::vector<std::tuple<int, int, int64_t, int>> order;  // (leaving, priority, -free, node)
        for (int n = 0; n < state_.node_count(); ++n) {
          if (node_workloads_[n].empty() || no_eviction_[n] || !model_ok(n) || scoped_out(n))
            continue;
          int64_t cpu = state_.free_cpu(n), mem = state_.free_memory(n), gpu = free_on(n);
          int leaving = 0, top = std::numeric_limits<int>::min();
          // (What would leave too but for its queue's disruption budget, and the last such;
          // and what never moves, and the first such.)
          int64_t held_gpu = 0, pinned_gpu = 0;
          int held_queue = -1, pinned_by = -1;
          for (int v : node_workloads_[n]) {
            // Reclaimed work is already gone from the state.
            const Entry& w = entries_[v];
            if (!movable(v) && !reclaimable(v, taken, moving_per_queue)) {
              const bool held = movable(v, /*mind_budget=*/false);
              const bool pinned = !held && *stays_why(v) != '\0';
              if (held) held_queue = w.leaf;
              if (pinned && pinned_by < 0) pinned_by = v;
              if (held || pinned)
                for (size_t i = 0; i < w.assign.size(); ++i)
                  if (w.assign[i].node == n)
                    for (const DeviceShare& d : w.assign[i].devices)
                      (held ? held_gpu : pinned_gpu) += d.milli;
              continue;
            }
            ++leaving;
            top = std::max(top, w.spec.priority);
            for (size_t i = 0; i < w.assign.size(); ++i) {
              if (w.assign[i].node != n) continue;
              cpu += w.pods[i].cpu_milli;
              mem += w.pods[i].memory_mib;
              for (const DeviceShare& d : w.assign[i].devices) gpu += d.milli;
            }
          }
          if (leaving == 0 || cpu < pod.cpu_milli || mem < pod.memory_mib ||
              gpu < pod.total_gpu_milli()) {
            // (Room its budget kept: a node that would otherwise have made it.)
            if (held_queue >= 0 && gpu < pod.total_gpu_milli() &&
                gpu + held_gpu >= pod.total_gpu_milli())
              budget_held = queues_[held_queue].spec.name;
            if (pinned_by >= 0 && pinned_said.empty() && gpu + held_gpu < pod.total_gpu_milli() &&
                gpu + held_gpu + pinned_gpu >= pod.total_gpu_milli())
              pinned_said = pinned_note(pinned_by, n);
            continue;
          }
          order.emplace_back(leaving, top, -gpu, n);
        }
        std::sort(order.begin(), order.end());
        constexpr size_t kMaxTrialNodes = 16;
        if (order.size() > kMaxTrialNodes) order.resize(kMaxTrialNodes);
        std::vector<int> best;
        std::vector<char> best_reclaims;  // per workload of `best`: reclaimed, not moved
        int best_node = -1;
        for (const auto& [estimate, unused_top, unused_free, n] : order) {
          if (best_node >= 0 && estimate >= static_cast<int>(best.size())) break;
          // Devices are cleared one at a time, the one with the fewest leaving first, and none
          // that holds work that stays: a whole-GPU pod needs whole free devices, not a little
          // room on each. Work without GPUs (it frees only CPU and memory) goes last.
          std::vector<int> here;
          std::map<int, int> leaving_on;  // device -> workloads on it that may leave
          std::set<int> pinned;           // devices with work that stays
          for (int v : node_workloads_[n]) {
            if (is_reclaimed(v)) continue;
            const bool can = movable(v) || reclaimable(v, taken, moving_per_queue);
            if (can) here.push_back(v);
            for (const Assignment& a : entries_[v].assign) {
              if (a.node != n) continue;
              for (const DeviceShare& d : a.devices) {
                if (can) {
                  ++leaving_on[d.device];
                } else {
                  pinned.insert(d.device);
                }
              }
            }
          }
          constexpr int kLast = 1 << 20;
          auto clearing = [&](int v) {  // (cost of clearing its cheapest device, that device)
            std::pair<int, int> best{kLast, kLast};
            for (const Assignment& a : entries_[v].assign) {
              if (a.node != n) continue;
              for (const DeviceShare& d : a.devices)
                best = std::min(
                    best, {pinned.count(d.device) ? kLast - 1 : leaving_on[d.device], d.device});
            }
            return best;
          };
          std::sort(here.begin(), here.end(), [&](int a, int b) {
            const auto ca = clearing(a), cb = clearing(b);
            if (ca != cb) return ca < cb;
            if (entries_[a].spec.priority != entries_[b].spec.priority)
              return entries_[a].spec.priority < entries_[b].spec.priority;
            if (entries_[a].gpu_milli != entries_[b].gpu_milli)
              return entries_[a].gpu_milli > entries_[b].gpu_milli;
            return a < b;
          });
          std::vector<int> leave;
          std::vector<char> reclaims;
          auto taken_here = taken;
          auto disrupted = moving_per_queue;  // for disruption budgets
          int moves = 0;
          bool fits = false;
          for (int v : here) {
            const int q = entries_[v].leaf;
            // Borrowed work is reclaimed (it need not fit elsewhere); other work moves.
            const bool take_back = reclaimable(v, taken_here, disrupted);
            if (take_back) {
              for (auto [f, milli] : entries_[v].charged) NoteTaken(taken_here, q, f, milli);
            } else {
              if (!movable(v)) continue;
              if (static_cast<int>(moved.size()) + moves >= config_.consolidation_max_moves) {
                move_capped = true;
                continue;
              }
              if (const int spent = BudgetSpent(q, disrupted, {}, consolidation_staged_);
                  spent >= 0) {
                budget_held = queues_[spent].spec.name;
                continue;
              }
              ++moves;
            }
            ++disrupted[q];
            TrialRelease(v);
            leave.push_back(v);
            reclaims.push_back(take_back);
            if (NodeFits(state_, n, pod) && policy_.Score(state_, n, pod)) {
              fits = true;
              break;
            }
          }
          // Then the pod goes there and every mover must fit somewhere at once.
          const size_t mark = applied.size();
          const std::vector<int> only{n};
          bool relocated = fits && place(pod, &only);
          for (size_t k = 0; relocated && k < leave.size(); ++k)
            if (!reclaims[k]) relocated = place_mover(entries_[leave[k]].pods[0]);
          homeless |= fits && !relocated;
          undo_to(mark);
          for (auto it = leave.rbegin(); it != leave.rend(); ++it) TrialReapply(*it);
          if (relocated && (best_node < 0 || leave.size() < best.size())) {
            best = leave;
            best_reclaims = reclaims;
            best_node = n;
          }
        }
        if (best_node < 0) {
          ok = false;
          break;
        }
        // Keep this pod's plan in the trial state and go on with the next pod.
        for (size_t k = 0; k < best.size(); ++k) {
          const int v = best[k];
          TrialRelease(v);
          ++moving_per_queue[entries_[v].leaf];
          if (best_reclaims[k]) {
            for (auto [f, milli] : entries_[v].charged)
              NoteTaken(taken, entries_[v].leaf, f, milli);
            reclaimed.push_back(v);
            fate[v] = kReclaimed;
          } else {
            moved.push_back(v);
            fate[v] = kMoved;
          }
        }
        const std::vector<int> only{best_node};
        ok = place(pod, &only);
        if (ok) mine.push_back(applied.back());
        for (size_t k = 0; ok && k < best.size(); ++k)
          if (!best_reclaims[k]) ok = place_mover(entries_[best[k]].pods[0]);
        if (!ok) break;
      }
      // First victims on no node the plan places a pod or a mover on freed nothing it uses.
      std::vector<int> unused;
      if (ok && first_victims > 0) {
        std::set<int> used;
        for (const auto& [a, unused_pod] : applied) used.insert(a.node);
        for (size_t k = 0; k < first_victims; ++k) {
          bool needed = false;
          for (const Assignment& a : entries_[reclaimed[k]].assign)
            needed |= used.count(a.node) > 0;
          if (!needed) unused.push_back(reclaimed[k]);
        }
      }
      undo_to(0);
      for (auto it = moved.rbegin(); it != moved.rend(); ++it) TrialReapply(*it);
      for (auto it = reclaimed.rbegin(); it != reclaimed.rend(); ++it) TrialReapply(*it);
      for (int v : unused) {
        fate[v] = kStays;
        std::erase(reclaimed, v);
      }
    }
  }
  placer_.set_explain(!entries_[id].explained);
  // Held by a budget of 1 or more: planned again with such budgets no bar, the moves they allow
  // now are made, the room they free held for it, and the rest follow as they free.
  if (!ok && !budget_held.empty() && !consolidation_staged_) {
    const int q = QueueIndex(budget_held);
    if (q >= 0 && queues_[q].spec.disruption_budget > 0) {
      // (With plans of its own: the pass that found the budget in the way may have spent the
      // cycle's on its domains; a review saw a gang with three leaves to try never staged.)
      const int left = consolidations_left_;
      consolidations_left_ = config_.consolidation_searches_per_cycle;
      consolidation_staged_ = true;
      const bool staged = Consolidate(id, pods, topology, now, out, reclaim);
      consolidation_staged_ = false;
      consolidations_left_ = left;
      if (staged) return true;
    }
  }
  if (!ok && !budget_held.empty()) {
    // (Said once: a cycle may try it twice.)
    std::string& why = entries_[id].reason;
    const int q = QueueIndex(budget_held);
    const int budget = q >= 0 ? queues_[q].spec.disruption_budget : 0;
    const int disrupted = q >= 0 ? queues_[q].evicting_count_below : 0;
    // (By what keeps it: a budget of 0; the work of the queue being disrupted now; or, none
    // being so, a plan that would move more at once than the budget — a trial read "no more"
    // while none of the queue's work was disrupted.)
    const std::string said =
        "queue " + budget_held + "'s disruptionBudget (" + std::to_string(budget) + ")";
    const std::string note =
        budget == 0     ? "; no consolidation plan: " + said + " lets none of its work be moved"
        : disrupted > 0 ? "; no consolidation plan: " + said +
                              " allows no more of its work to be moved or evicted at once (" +
                              std::to_string(disrupted) + " of its workloads are being stopped now)"
                        : "; no consolidation plan within " + said +
                              ": each plan found moves more of its work at once than that";
    // (Nor where preemption's note names the same budget: Preempt's waiting_reason folds
    // this note into its own; nor where the staged pass, budgets aside, said why it found none.)
    if (why.find(note) == std::string::npos &&
        why.find("; no consolidation plan: ") == std::string::npos &&
        why.find("; waiting: queue " + budget_held + "'s disruptionBudget is") ==
            std::string::npos &&
        why.find("; waiting: the disruption budget of queue " + budget_held + " allows") ==
            std::string::npos)
      why += note;
  } else if (!ok && (move_capped || homeless)) {
    // (A trial could not tell why scattered room was never gathered.)
    std::string& why = entries_[id].reason;
    const std::string note =
        move_capped ? "; no consolidation plan: it would move more than " +
                          std::to_string(config_.consolidation_max_moves) +
                          " workloads (consolidationMaxMoves)"
                    : "; no consolidation plan: the work that would make room has nowhere else "
                      "to go";
    if (why.find("; no consolidation plan: ") == std::string::npos) why += note;
  } else if (!ok && !pinned_said.empty()) {
    std::string& why = entries_[id].reason;
    if (why.find("; no consolidation plan: ") == std::string::npos)
      why += "; no consolidation plan: the work in its way is not moved (" + pinned_said + ")";
  }
  if (!ok || (moved.empty() && reclaimed.empty())) return false;
  // (Staged: of each queue's, in the plan's order, as many as its budget allows now.)
  int later = 0, budget_later = 0;  // (budget_later: of them, those a budget holds)
  std::vector<std::string> later_queues;
  if (consolidation_staged_) {
    std::map<int, int> now_per_queue;
    const auto now_only = [&](std::vector<int>& list) {
      std::vector<int> now_ones;
      for (int v : list) {
        const int q = entries_[v].leaf;
        if (const int spent = BudgetSpent(q, now_per_queue); spent < 0) {
          ++now_per_queue[q];
          now_ones.push_back(v);
        } else {
          ++later;
          ++budget_later;
          if (!Contains(later_queues, queues_[spent].spec.name))
            later_queues.push_back(queues_[spent].spec.name);
        }
      }
      list = std::move(now_ones);
    };
    now_only(reclaimed);
    now_only(moved);
    // (None of its moves allowed now: the budgets are spent, so it may hold; one allowed that
    // then finds no room is no reason to hold the plan.)
    const bool spent = moved.empty() && reclaimed.empty();
    // The movers kept must fit now beside the work that stays, off the nodes its pods are
    // planned on (the full plan placed them in room work left for later frees); one that does
    // not is left for later too (a review: it would be evicted with nowhere to go).
    const std::vector<int> elsewhere = NodesOff(mine, state_.node_count());
    for (bool dropped = true; dropped && !moved.empty();) {
      dropped = false;
      for (int v : reclaimed) TrialRelease(v);
      for (int v : moved) TrialRelease(v);
      std::vector<std::pair<Assignment, const PodRequest*>> trial;
      std::vector<int> fits;
      for (int v : moved)
        if (PlaceNow(entries_[v].pods[0], trial, &elsewhere)) fits.push_back(v);
      for (auto it = trial.rbegin(); it != trial.rend(); ++it)
        state_.Release(it->first, *it->second);
      for (auto it = moved.rbegin(); it != moved.rend(); ++it) TrialReapply(*it);
      for (auto it = reclaimed.rbegin(); it != reclaimed.rend(); ++it) TrialReapply(*it);
      if (fits.size() < moved.size()) {
        later += static_cast<int>(moved.size() - fits.size());
        moved = std::move(fits);
        dropped = true;
      }
    }
    if (moved.empty() && reclaimed.empty()) {
      // Its moved work has stopped but the budgets are spent (on others' moves or evictions)
      // this moment: the room that work freed is kept for it, as Preempt keeps its stopped
      // victims', rather than go back to the moved work and be moved again next stage.
      // (Only a consolidation's stage: a preemptor between its batches goes on with Preempt,
      // which holds its own; and only while the budgets allow none of its moves, not where a
      // mover allowed found no room, which would hold the same plan every cycle — a review.)
      if (!entries_[id].continuing || !entries_[id].consolidation_stage || budget_later == 0 ||
          !spent)
        return false;
      Entry& e = entries_[id];
      Nominate(id, 0, ReclaimEligible(id));
      e.swap_flavor = -1;
      SetPlan(id, mine);
      e.budget_blocked = true;
      e.victims_ready_at = -1;
      e.reason = "holding the room its moved work freed" + MoreToGo(later, later_queues);
      return true;
    }
  }

  // Where the movers go: off its planned nodes, beside the work that stays (the places held for
  // them while they stop, below).
  std::vector<Entry::MoveHold> destinations;
  if (!moved.empty()) {
    const std::vector<int> elsewhere = NodesOff(mine, state_.node_count());
    for (int v : reclaimed) TrialRelease(v);
    for (int v : moved) TrialRelease(v);
    std::vector<std::pair<Assignment, const PodRequest*>> trial;
    for (int v : moved)
      if (HoldsForMover(v) && PlaceNow(entries_[v].pods[0], trial, &elsewhere))
        destinations.push_back({v, trial.back().first, entries_[v].pods[0]});
    for (auto it = trial.rbegin(); it != trial.rend(); ++it) state_.Release(it->first, *it->second);
    for (auto it = moved.rbegin(); it != moved.rend(); ++it) TrialReapply(*it);
    for (auto it = reclaimed.rbegin(); it != reclaimed.rend(); ++it) TrialReapply(*it);
  }

  Entry& e = entries_[id];
  if (!reclaimed.empty()) NoteReclaim(id, reclaimed, now);
  int stopping = 0;
  for (int v : reclaimed)
    stopping +=
        EvictOrTakeBack(v, id,
                        "preempted by " + FullName(id) + " (queue " + queues_[e.leaf].spec.name +
                            " reclaims its guarantee; work that stays is moved into the room)" +
                            CutShortNote(v, id, now),
                        out, Eviction::Basis::kReclaim);
  for (int v : moved)
    stopping += EvictOrTakeBack(v, id,
                                "moved to make room for " + FullName(id) +
                                    " (consolidation: it fits elsewhere, where room is held for "
                                    "it while it stops, and waits to be placed again)" +
                                    CutShortNote(v, id, now),
                                out, Eviction::Basis::kMove);
  Nominate(id, stopping, ReclaimEligible(id));
  e.swap_flavor = -1;  // (a consolidation is no swap: the quota allows it)
  // The places its movers go to are held with its plan while they stop (each its free part,
  // as they free), and each goes to its mover once that has stopped (VictimStopped): newer work
  // does not take the room a move counted on (a trial's newer 5-GPU job took it in the grace
  // period, and the two moved workloads waited for good). A mover taken back in the cycle it
  // was admitted waits again at once, with nothing held for it.
  for (const Entry::MoveHold& m : destinations)
    if (entries_[m.mover].phase == Phase::kEvicting) {
      entries_[m.mover].options.moving = true;
      e.move_plan.push_back(m);
    }
  SetPlan(id, mine);
  if (reclaimed.empty()) {
    e.reason = "consolidating: moving " + std::to_string(moved.size()) + " workload(s) (" +
               WorkloadNames(moved) + ") to gather room scattered over the fleet";

  } else {
    e.reason = "preempting " + std::to_string(reclaimed.size()) + " workload(s) (" +
               WorkloadNames(reclaimed) + ") as queue " + queues_[e.leaf].spec.name +
               " reclaims its guarantee, borrowed anywhere in the fleet";
    if (!moved.empty())
      e.reason +=
          ", and moving " + std::to_string(moved.size()) + " workload(s) into the room they leave";
  }
  // (Where its topology needs one domain, which one: a trial could not tell where its gang was
  // headed.)
  if (cleared >= 0) e.reason += "; its pods go in " + DomainSaid(e, topology.level, cleared);
  // (Its wait is stretched by the budget: the replay's bound counts it an exception.)
  e.budget_blocked = later > 0;
  if (later > 0) e.reason += MoreToGo(later, later_queues);
  return true;
}

bool Admitter::PlaceGangNow(const Entry& e, const std::vector<PodRequest>& pods,
                            std::vector<std::pair<Assignment, const PodRequest*>>& placed) {
  if (!e.spec.gang || pods.size() < 2 || e.spec.topology.level == TopologyLevel::kNone)
    return false;
  const bool explain = placer_.explain();
  placer_.set_explain(false);
  std::vector<Assignment> all;
  const bool fits = PlaceAllOnce(e, pods, e.spec.topology, &all, nullptr);
  placer_.set_explain(explain);
  if (!fits) return false;
  for (size_t i = 0; i < all.size(); ++i) placed.push_back({all[i], &pods[i]});
  return true;
}

bool Admitter::PlaceNow(const PodRequest& pod,
                        std::vector<std::pair<Assignment, const PodRequest*>>& placed,
                        const std::vector<int>* only) {
  PodPlacement p =
      only ? placer_.PlaceIn(state_, *only, pod, rng_) : placer_.Place(state_, pod, rng_);
  if (p.outcome != Outcome::kPlaced) return false;
  state_.Apply(p.assignment, pod);
  placed.push_back({p.assignment, &pod});
  return true;
}

bool Admitter::Shrink(int id, const std::vector<PodRequest>& pods,
                      const std::vector<Candidate>& cands, const ShrinkScope& scope, double now,
                      CycleResult& out) {
  if (!entries_[id].options.may_preempt) return false;  // (preemptionPolicy Never)
  const uint64_t reclaim_flavors = scope.reclaim_flavors;
  // (Entries are added below: `e` is not used once the first is.)
  const Entry& e = entries_[id];
  const std::string name = FullName(id);
  // The victims with pods to spare, cheapest first.
  std::vector<int> elastic;
  std::vector<int> tier_of;  // ... each one's Candidate::tier
  for (const Candidate& c : cands) {
    const Entry& w = entries_[c.id];
    // (One shrunk this cycle may shrink again; not one admitted this cycle, which is taken
    // back whole if it must go.)
    if (w.fragment_of >= 0 || w.phase != Phase::kAdmitted || !w.options.may_shrink ||
        std::find(out.admitted.begin(), out.admitted.end(), c.id) != out.admitted.end())
      continue;
    for (size_t s = 0; s < w.counts.size(); ++s) {
      if (w.counts[s] > w.min_counts[s]) {
        elastic.push_back(c.id);
        tier_of.push_back(c.tier);
        break;
      }
    }
  }
  if (elastic.empty()) return false;
  // The trial: per victim and pod set, how many of its last pods it gives (released on the
  // state); GPUs taken from each lender by (queue, flavour); victims by queue (budgets).
  std::map<int, std::vector<int>> cut;
  std::map<std::pair<int, int>, int64_t> taken;
  std::map<int, int> victims_of_queue;
  std::vector<std::tuple<int, size_t, int>> log;  // (victim, pod set, its cut before)
  // The pod `from_end` places before the last of pod set s of w.
  const auto pod_index = [](const Entry& w, size_t s, int from_end) {
    int first = 0;
    for (size_t i = 0; i < s; ++i) first += w.counts[i];
    return first + w.counts[s] - 1 - from_end;
  };
  const auto cut_of = [&](int v, size_t s) {
    auto it = cut.find(v);
    return it == cut.end() ? 0 : it->second[s];
  };
  // Takes the last `to` pods of set s of v (those not taken yet), unless its queue's disruption
  // budget or, lending, its guarantee in a reclaimed flavour forbids it. Returns the GPUs
  // (milli) it took, or -1.
  const auto take = [&](int v, size_t s, int to) -> int64_t {
    const Entry& w = entries_[v];
    std::vector<int>& c = cut[v];
    const bool fresh = c.empty();
    if (fresh) c.assign(w.counts.size(), 0);
    const bool untouched = std::all_of(c.begin(), c.end(), [](int k) { return k == 0; });
    const QueueNode& vq = queues_[w.leaf];
    if (untouched && BudgetSpent(w.leaf, victims_of_queue) >= 0) return -1;
    std::map<int, int64_t> add;  // by flavour
    int64_t milli = 0;
    for (int k = c[s]; k < to; ++k) {
      const int i = pod_index(w, s, k);
      milli += w.pods[i].total_charge_milli();
      const int f = FlavorOf(w.pods[i], state_.node_model(w.assign[i].node));
      if (f >= 0) add[f] += w.pods[i].total_charge_milli();
    }
    const auto taken_in = [&taken](int q, int g) {
      const auto t = taken.find({q, g});
      return t == taken.end() ? int64_t{0} : t->second;
    };
    const bool must_lend = scope.must_lend.count(v) > 0;
    // (Whether its queue lends these pods for a reclaim: the checks below, as a yes or no.)
    const auto lends = [&]() {
      for (auto [f, m] : add) {
        const bool reclaimed = f < 64 && (reclaim_flavors >> f & 1);
        if (must_lend && !reclaimed) return false;  // (only what it borrows where reclaimed)
        const int64_t held = vq.usage[f] - vq.evicting_usage[f] - taken[{w.leaf, f}];
        const int dept = reclaimed && static_cast<size_t>(f) < scope.reclaim_scope.size()
                             ? scope.reclaim_scope[f]
                             : -1;
        // (Above its queue too, only a branch that borrows gives back; for a department's own
        // part, only queues outside it; for a guarantee above no project was given, only
        // best-effort work.)
        if (reclaimed &&
            (!BranchLends(e.leaf, w.leaf, f, m, taken_in) ||
             (scope.big_may_go && BestEffortReclaimOnly(e.leaf, f, dept) && !vq.spec.best_effort) ||
             (dept >= 0 && dept != e.leaf && Under(w.leaf, dept))))
          return false;
        if (!reclaimed || held - m >= vq.guaranteed[f]) continue;
        // (As for a whole victim: one bigger than its queue's guarantee runs on borrowed GPUs,
        // and may go while its queue, but for what this victim already gave, borrows.)
        int64_t whole = 0, given = 0;
        for (auto [cf, cm] : w.charged) whole += cf == f ? cm : 0;
        for (size_t s2 = 0; s2 < c.size(); ++s2)
          for (int k = 0; k < c[s2]; ++k) {
            const int i = pod_index(w, s2, k);
            if (FlavorOf(w.pods[i], state_.node_model(w.assign[i].node)) == f)
              given += w.pods[i].total_charge_milli();
          }
        if (!scope.big_may_go || whole <= vq.guaranteed[f] || held + given <= vq.guaranteed[f])
          return false;
      }
      return true;
    };
    // Under fair-share preemption: only what its queue borrows, its weighted share staying at
    // or above the preemptor's with the pods taken so far (as Preempt's fair_allows).
    int64_t cpu = 0, memory = 0;
    for (int k = c[s]; k < to; ++k) {
      cpu += w.pods[pod_index(w, s, k)].cpu_milli;
      memory += w.pods[pod_index(w, s, k)].memory_mib;
    }
    const auto fair = [&]() {
      return FairShareKeeps(e.leaf, w.leaf, scope.fair_share, milli, cpu, memory,
                            {add.begin(), add.end()}, taken_in);
    };
    if (w.leaf != e.leaf) {
      if (scope.fair_share.share >= 0 && !must_lend) {
        if (!(scope.takes_borrowed && lends()) && !fair()) return -1;
      } else if ((scope.check_lending || must_lend) && !lends()) {
        return -1;
      }
    }
    for (auto [f, m] : add) NoteTaken(taken, w.leaf, f, m);
    taken[{w.leaf, kTakenGpu}] += milli;
    NoteTakenResources(taken, w.leaf, cpu, memory);
    if (untouched) ++victims_of_queue[w.leaf];
    for (int k = c[s]; k < to; ++k) {
      const int i = pod_index(w, s, k);
      state_.Release(w.assign[i], w.pods[i]);
    }
    log.push_back({v, s, c[s]});
    c[s] = to;
    return milli;
  };
  const auto undo_to = [&](size_t mark, const std::map<std::pair<int, int>, int64_t>& t,
                           const std::map<int, int>& q) {
    while (log.size() > mark) {
      const auto [v, s, before] = log.back();
      log.pop_back();
      const Entry& w = entries_[v];
      for (int k = before; k < cut[v][s]; ++k) {
        const int i = pod_index(w, s, k);
        state_.Apply(w.assign[i], w.pods[i]);
      }
      cut[v][s] = before;
    }
    taken = t;
    victims_of_queue = q;
  };
  // Frees room for `pod` on node n, the cheapest victims' last pods first, each set's pods
  // through its last one there; kept (true) or undone. The highest priority and, at it, tier of
  // the victims it takes from (lower first, as whole victims go: a trial's reclaim shrank
  // priority-10 work on the first node while priority-0 work on the next kept all its pods),
  // the GPUs taken and the victims; or -1 GPUs.
  struct NodeCost {
    std::pair<int, int> dearest;
    int64_t cost;
    int victims;
  };
  const auto try_node = [&](int n, const PodRequest& pod, bool keep) -> NodeCost {
    const size_t mark = log.size();
    const auto t0 = taken;
    const auto q0 = victims_of_queue;
    int64_t cost = 0;
    std::set<int> touched;
    std::pair<int, int> dearest{INT_MIN, INT_MIN};
    bool fits = false;
    for (size_t at = 0; at < elastic.size() && !fits; ++at) {
      const int v = elastic[at];
      const Entry& w = entries_[v];
      for (size_t s = 0; s < w.counts.size() && !fits; ++s) {
        for (int k = cut_of(v, s); k < w.counts[s] - w.min_counts[s] && !fits; ++k) {
          if (w.assign[pod_index(w, s, k)].node != n) continue;
          const int64_t got = take(v, s, k + 1);
          if (got < 0) break;
          cost += got;
          touched.insert(v);
          dearest = std::max(dearest, std::pair<int, int>{w.spec.priority, tier_of[at]});
          fits = NodeFits(state_, n, pod) && policy_.Score(state_, n, pod);
        }
      }
    }
    if (!fits || !keep) undo_to(mark, t0, q0);
    return fits ? NodeCost{dearest, cost, static_cast<int>(touched.size())}
                : NodeCost{dearest, -1, 0};
  };
  std::vector<std::pair<Assignment, const PodRequest*>> placed;
  bool ok = true;
  // Short of its queue's quota: its own queue's pods first (the last of each set, cheapest
  // victim first) until what they free lets the quota take it.
  // Reclaiming its guarantee for quota (its tree at its top's limit): the pods of what other
  // queues of its tree borrow first (each victim's queue kept at its guarantee, as `take`
  // checks), counted as freed at the top, where the quota is short.
  if (const int f = scope.quota_flavor; f >= 0) {
    const bool others = scope.quota_reclaim || (scope.fair_quota && scope.quota_blocker >= 0);
    const int at = others ? scope.quota_blocker : e.leaf;
    // (Only work under the queue whose limit stops it gives that quota back.)
    const auto under = [&](int q) {
      for (; q >= 0; q = queues_[q].parent)
        if (q == at) return true;
      return false;
    };
    const auto allows = [&] {
      auto it = taken.find({at, f});
      const int64_t freed = it == taken.end() ? 0 : it->second;
      return (held_swap_ < 0 && QuotaAllows(e.leaf, f, e.gpu_milli - freed, nullptr)) ||
             (!scope.quota_reclaim && SwapAllows(e, f, e.gpu_milli, freed));
    };
    std::vector<int> order = elastic;
    if (scope.quota_reclaim)
      std::stable_partition(order.begin(), order.end(),
                            [&](int v) { return entries_[v].leaf != e.leaf; });
    for (size_t i = 0; i < order.size() && !allows(); ++i) {
      const Entry& w = entries_[order[i]];
      if (w.leaf != e.leaf && (!others || !under(w.leaf))) continue;
      // (Only pods charged to that flavour give it back.)
      for (size_t s = 0; s < w.counts.size() && !allows(); ++s)
        for (int k = 0; k < w.counts[s] - w.min_counts[s] && !allows(); ++k) {
          const int p = pod_index(w, s, k);
          if (FlavorOf(w.pods[p], state_.node_model(w.assign[p].node)) != f ||
              take(order[i], s, k + 1) < 0)
            break;
        }
    }
    ok = allows();
  }
  // (A gang that prefers a topology and fits the room its quota's pods free: as a gang.)
  const bool as_gang = ok && PlaceGangNow(e, pods, placed);
  for (const PodRequest& pod : pods) {
    if (!ok || as_gang) break;
    if (PlaceNow(pod, placed)) continue;
    std::set<int> nodes;  // where victims have pods to spare
    for (int v : elastic) {
      const Entry& w = entries_[v];
      for (size_t s = 0; s < w.counts.size(); ++s)
        for (int k = cut_of(v, s); k < w.counts[s] - w.min_counts[s]; ++k)
          nodes.insert(w.assign[pod_index(w, s, k)].node);
    }
    // (The dearest victim taken from, GPUs taken, victims, node.)
    std::tuple<std::pair<int, int>, int64_t, int, int> best{{}, 0, 0, -1};
    for (int n : nodes) {
      if (no_eviction_[n]) continue;
      if (pod.kind != DeviceKind::kNone &&
          (state_.node_model(n) < 0 || !(pod.model_mask >> state_.node_model(n) & 1)))
        continue;
      const NodeCost c = try_node(n, pod, false);
      if (c.cost < 0) continue;
      const std::tuple<std::pair<int, int>, int64_t, int, int> k{c.dearest, c.cost, c.victims, n};
      if (std::get<3>(best) < 0 || k < best) best = k;
    }
    if (std::get<3>(best) < 0 || try_node(std::get<3>(best), pod, true).cost < 0) {
      ok = false;
      break;
    }
    if (const std::vector<int> there{std::get<3>(best)}; !PlaceNow(pod, placed, &there)) {
      ok = false;
      break;
    }
  }
  // Undo the trial: the pods keep their devices until they stop.
  for (auto it = placed.rbegin(); it != placed.rend(); ++it) state_.Release(it->first, *it->second);
  std::map<int, std::vector<int>> chosen;
  for (const auto& [v, c] : cut)
    if (std::any_of(c.begin(), c.end(), [](int k) { return k > 0; })) chosen[v] = c;
  undo_to(0, {}, {});
  if (!ok || chosen.empty()) return false;

  // Under fair-share preemption, pods taken from other queues' work only are its fair share's
  // (a user-style trial saw them said to be for higher-priority work of equal priority).
  std::string why = scope.why;
  if (scope.fair_share.share >= 0 && !scope.reclaim &&
      (scope.quota_flavor < 0 || scope.fair_quota) &&
      std::all_of(chosen.begin(), chosen.end(),
                  [&](const auto& c) { return entries_[c.first].leaf != e.leaf; })) {
    std::vector<int> victims;
    for (const auto& c : chosen) victims.push_back(c.first);
    why = FairShareWhy(e.leaf, victims);
  }
  std::vector<int> fragments;
  int taken_pods = 0;
  double lost = 0;  // the runs of pods taken from work that is not a gang
  // (On what basis, as a whole victim's: re-checked each cycle while its pods stop. Its leaf
  // read now: Split adds entries, and `e` may move.)
  const int leaf = e.leaf;
  const bool own_only = std::all_of(chosen.begin(), chosen.end(),
                                    [&](const auto& c) { return entries_[c.first].leaf == leaf; });
  for (const auto& [v, c] : chosen) {
    int n = 0;
    for (int k : c) n += k;
    taken_pods += n;
    const bool gang = entries_[v].spec.gang;
    const int f = Split(v, c);
    // (A fragment is admitted when its workload was: what its pods ran is lost.)
    const double loses = gang ? 0 : LostIfEvicted(f, now);
    lost += loses;
    std::string reason =
        "shrunk by " + std::to_string(n) + " pod(s) for " + name + " (" + why + ")";
    if (!gang)
      reason +=
          "; they run again later, " + std::to_string(std::llround(loses)) + " GPU-seconds lost";
    entries_[v].reason = reason;
    MarkEvicting(f, id, reason, out,
                 own_only                                    ? Eviction::Basis::kPriority
                 : scope.reclaim && entries_[v].leaf != leaf ? Eviction::Basis::kReclaim
                                                             : Eviction::Basis::kOther);
    fragments.push_back(f);
  }
  if (scope.reclaim) NoteReclaim(id, fragments, now, reclaim_flavors, scope.res_reclaim);
  Nominate(id, static_cast<int>(fragments.size()), scope.reclaim);
  // (Short of its queue's GPU quota: what the pods taken free of it is kept for it.)
  SetPlan(id, placed, scope.quota_flavor >= 0);
  entries_[id].victims_ready_at = -1;
  entries_[id].reason = "preempting " + std::to_string(taken_pods) + " pod(s) of " +
                        std::to_string(fragments.size()) + " elastic workload(s) " + ForWhy(why) +
                        (lost > 0 ? ", " + std::to_string(std::llround(lost)) +
                                        " GPU-seconds lost (they run on with fewer pods; the "
                                        "pods taken run again later)"
                                  : ", 0 GPU-seconds lost (they run on with fewer pods)");
  return true;
}

bool Admitter::Preempt(int id, const std::vector<PodRequest>& pods, uint64_t allowed_models,
                       double now, CycleResult& out) {
  Entry& e = entries_[id];
  if (!e.options.may_preempt) return false;  // (preemptionPolicy Never)
  const int leaf = e.leaf;

  // The flavour it would be charged to, and what that allows: reclaim needs the guarantee.
  // Reclaim takes back only what others borrow in the flavours it may reclaim.
  int quota_flavor = -1;
  bool quota_short = false;
  int quota_blocker = -1;  // the queue whose limit it reaches
  uint64_t reclaim_flavors = 0;
  for (const PodRequest& p : pods) {
    if (p.kind == DeviceKind::kNone) continue;
    for (int f : CandidateFlavors(p)) {
      if (!(FlavorModels(f, p) & allowed_models)) continue;
      if (int blocker = -1; !QuotaAllows(leaf, f, e.gpu_milli, nullptr, &blocker)) {
        quota_short = true;
        quota_flavor = f;
        quota_blocker = blocker;
      } else if (MayReclaim(leaf, f, e.gpu_milli) && f < 64) {
        reclaim_flavors |= uint64_t{1} << f;
      }
    }
    break;
  }
  // Its queue's CPU or memory quota refuses it: only its own lower-priority work may give it
  // back (a refusal means past its guarantee: nothing is reclaimed or borrowed for CPU or memory
  // then).
  // A held borrower's swap (HeldSwap): short, as it were, of what its queue holds of the flavour.
  if (held_swap_ >= 0) {
    quota_short = true;
    quota_flavor = held_swap_;
    quota_blocker = leaf;
  }
  const bool cpu_short = !ResourceAllows(leaf, 0, e.cpu_milli, nullptr);
  const bool memory_short = !ResourceAllows(leaf, 1, e.memory_mib, nullptr);
  const bool res_short = cpu_short || memory_short;
  if (res_short) quota_short = true;
  // Short of GPU quota, its own queue's work may make way for it as a swap (SwapAllows); the
  // ceiling is what its queue held when its preemption began (SwapCeiling; kept while it goes
  // on after a batch of its victims stopped).
  if (quota_short && quota_flavor >= 0) {
    if (!e.continuing || e.swap_flavor != quota_flavor) {
      e.swap_flavor = quota_flavor;
      e.swap_ceiling = SwapCeiling(leaf, quota_flavor);
    }
  } else {
    e.swap_flavor = -1;
  }
  // Past its guarantee of CPU or memory it reclaims nothing (ResourcesWithinGuarantee).
  if (!ResourcesWithinGuarantee(e)) reclaim_flavors = 0;
  if (quota_short) reclaim_flavors = 0;
  const PreemptionPolicy& policy = queues_[leaf].spec.preemption;
  // borrowWithinCohort: beyond its guarantee it may evict other queues' borrowed work of lower
  // priority, for quota (what they borrow is what its cohort has no more of) and for room.
  bool borrow_preempt = false;
  // Within its guarantee but its tree at its top's (trees do not lend each other): what others
  // of its tree borrow is reclaimed for quota, as for room.
  const bool quota_reclaim = quota_short && !res_short && quota_flavor >= 0 && quota_flavor < 64 &&
                             quota_blocker != leaf &&
                             QuotaReclaims(leaf, quota_flavor, e.gpu_milli);
  if (quota_reclaim) {
    reclaim_flavors = uint64_t{1} << quota_flavor;
  } else if (quota_short && !res_short && quota_flavor >= 0 && quota_flavor < 64 &&
             held_swap_ < 0 &&
             policy.borrow_within_cohort == PreemptionPolicy::Borrow::kLowerPriority) {
    reclaim_flavors = uint64_t{1} << quota_flavor;
    borrow_preempt = true;
  } else if (!quota_short && reclaim_flavors == 0 &&
             policy.borrow_within_cohort == PreemptionPolicy::Borrow::kLowerPriority &&
             WouldBorrow(id)) {
    for (const PodRequest& p : pods) {
      if (p.kind == DeviceKind::kNone) continue;
      for (int f : CandidateFlavors(p))
        if (f < 64 && managed_[f] && (FlavorModels(f, p) & allowed_models))
          reclaim_flavors |= uint64_t{1} << f;
      break;
    }
    borrow_preempt = reclaim_flavors != 0;
  }
  // Fair-share preemption short of GPU quota: work of queues under the one whose limit stops it
  // that stay above its share gives the quota back (else, with the tree's quota all lent out,
  // weights would never move running work).
  // (Best-effort work — the built-in unqueued — takes what is idle, no one's share.)
  const bool fair_share = config_.fair_share_preemption && !queues_[leaf].spec.best_effort &&
                          !queues_[leaf].spec.no_fair_share;
  const bool fair_quota =
      quota_short && !res_short && quota_flavor >= 0 && fair_share && held_swap_ < 0;
  // CPU and memory its queue is guaranteed and others of its tree borrow (not while it borrows
  // GPUs, or is short of quota).
  const unsigned res_reclaim = quota_short || borrow_preempt ? 0 : ResourceReclaims(id);
  const bool reclaim = (reclaim_flavors != 0 || res_reclaim != 0) && !borrow_preempt;
  const bool takes_borrowed = reclaim_flavors != 0 || res_reclaim != 0;
  // Per reclaimed flavour, whose guarantee it takes back (ReclaimScope): a department's, past
  // its leaf's own, only from queues outside that department.
  std::vector<int> reclaim_scope(flavor_count(), -1);
  if (reclaim)
    for (int f = 0; f < flavor_count() && f < 64; ++f)
      if (reclaim_flavors >> f & 1) reclaim_scope[f] = ReclaimScope(leaf, f, e.gpu_milli);
  // "queue a reclaims its guarantee", or a department's: a leaf with no guarantee of its own
  // takes back its department's, from best-effort work; one past its own, its department's
  // where that holds it, from queues outside it.
  const auto reclaims_what = [&]() {
    int dept = -1;
    bool none_own = false;
    for (int f = 0; f < flavor_count() && f < 64 && dept < 0; ++f) {
      if (!(reclaim_flavors >> f & 1)) continue;
      if (BestEffortReclaimOnly(leaf, f, reclaim_scope[f])) {
        for (int a = queues_[leaf].parent; a >= 0 && a != fleet_queue_ && dept < 0;
             a = queues_[a].parent)
          if (queues_[a].guaranteed[f] > 0) dept = a;
        none_own = dept >= 0;
      } else if (reclaim_scope[f] >= 0 && reclaim_scope[f] != leaf) {
        dept = reclaim_scope[f];
        none_own = queues_[leaf].guaranteed[f] == 0;
      }
    }
    return "queue " + queues_[leaf].spec.name + " reclaims " +
           (dept < 0 ? std::string("its guarantee")
                     : "queue " + queues_[dept].spec.name + "'s guarantee (" +
                           (none_own ? "it has none of its own" : "past its own") + ")");
  };
  // Whether other queue's borrowed workload w may go for this one, by priority.
  const auto priority_allows = [&](const Entry& w) {
    if (borrow_preempt)
      return w.spec.priority < e.spec.priority &&
             (!policy.borrow_max_priority || w.spec.priority <= *policy.borrow_max_priority);
    return policy.reclaim_within_cohort != PreemptionPolicy::Reclaim::kLowerPriority ||
           w.spec.priority < e.spec.priority;
  };
  // What victim v of another queue gives back in the reclaimed flavours, or 0 when taking it
  // would push its queue below its own guarantee in one of them (`taken`: GPUs of that queue
  // and flavour already chosen; CPU and memory under kTakenResource + r). CPU or memory it
  // holds counts where its queue borrows them and keeps its guarantee without it.
  auto lendable = [&](int v, const std::function<int64_t(int, int)>& taken) -> int64_t {
    const Entry& w = entries_[v];
    const QueueNode& vq = queues_[w.leaf];
    // Best-effort work (the built-in unqueued: no guarantee anywhere) gives back all its GPUs,
    // whatever flavour charges them, to a reclaim in any flavour: the same GPUs may be charged
    // to several flavours (a trial's fraction within its queue's frac guarantee waited for good
    // while best-effort work held whole GPUs charged to gpu).
    if (vq.spec.best_effort && reclaim_flavors != 0 && !borrow_preempt) return w.gpu_milli;
    int64_t gives = 0;
    for (auto [f, milli] : w.charged) {
      if (f >= 64 || !(reclaim_flavors >> f & 1)) continue;
      // (A workload bigger than its queue's whole guarantee only ever runs on borrowed GPUs:
      // while its queue borrows, a reclaim, or work of higher priority that preempts to borrow,
      // may take it even if its queue is then below its guarantee, as Kueue takes work of a
      // queue that borrows. Neither comes back for it: reclaim makes room only for work within
      // a guarantee, and borrowing preemption takes only lower priority.)
      if (!borrow_preempt && BestEffortReclaimOnly(leaf, f, reclaim_scope[f]) &&
          !vq.spec.best_effort)
        return 0;
      const int64_t held = vq.usage[f] - vq.evicting_usage[f] - taken(w.leaf, f);
      if (held - milli < vq.guaranteed[f] &&
          (milli <= vq.guaranteed[f] || held <= vq.guaranteed[f]))
        return 0;
      if (!BranchLends(leaf, w.leaf, f, milli, taken)) return 0;
      if (reclaim_scope[f] >= 0 && reclaim_scope[f] != leaf && Under(w.leaf, reclaim_scope[f]))
        return 0;
      if (reclaim && reclaim_scope[f] >= 0 && !ClaimHolds(reclaim_scope[f], w.leaf, f, e.gpu_milli))
        return 0;
      gives += milli;
    }
    for (int r = 0; r < 2; ++r) {
      const int64_t amount = r == 0 ? w.cpu_milli : w.memory_mib;
      if (!(res_reclaim >> r & 1) || amount == 0 || vq.root != queues_[leaf].root) continue;
      const int64_t used = r == 0 ? vq.cpu : vq.memory;
      // (And, as for GPUs, its branch up to the queue it shares with the preemptor: a
      // review's leaf borrowing from its idle sibling, its department at its guarantee, gave
      // cores while another department kept borrowing the preemptor's.)
      if (used - vq.res_evicting[r] - taken(w.leaf, kTakenResource + r) - amount >=
              vq.res_guaranteed[r] &&
          BranchLendsResource(leaf, w.leaf, r, amount, taken))
        gives += amount;
    }
    return gives;
  };
  // Whether some workload of queue q could lend (lendable above, nothing taken yet): it holds
  // more than its guarantee of a reclaimed flavour, or of CPU or memory reclaimed in its tree.
  // (A necessary condition, kept per queue: a scan of every running workload asks it of each.)
  std::vector<signed char> may_lend;  // (by queue: -1 not yet known)
  const auto queue_may_lend = [&](int q) {
    if (may_lend.empty()) may_lend.assign(queues_.size(), -1);
    signed char& known = may_lend[q];
    if (known >= 0) return known == 1;
    const QueueNode& vq = queues_[q];
    bool lends = vq.spec.best_effort && reclaim_flavors != 0 && !borrow_preempt && vq.gpu > 0;
    for (int f = 0; f < flavor_count() && f < 64 && !lends; ++f)
      lends = (reclaim_flavors >> f & 1) && vq.usage[f] - vq.evicting_usage[f] > vq.guaranteed[f];
    for (int r = 0; r < 2 && !lends; ++r)
      lends = (res_reclaim >> r & 1) && vq.root == queues_[leaf].root &&
              (r == 0 ? vq.cpu : vq.memory) - vq.res_evicting[r] > vq.res_guaranteed[r];
    known = lends ? 1 : 0;
    return lends;
  };
  // Notes what victim v takes from its queue (for `taken` above).
  const auto note_taken = [&](std::map<std::pair<int, int>, int64_t>& taken, int v) {
    const Entry& w = entries_[v];
    for (auto [f, milli] : w.charged) NoteTaken(taken, w.leaf, f, milli);
    taken[{w.leaf, kTakenGpu}] += w.gpu_milli;
    NoteTakenResources(taken, w.leaf, w.cpu_milli, w.memory_mib);
  };
  // Its queue's weighted dominant share once it and the queue's other nominated preemptors hold
  // what they wait for (fair-share preemption takes from queues whose weighted share stays above
  // it).
  double my_share = 0;
  FairClaim claim;
  if (config_.fair_share_preemption) {
    claim = {0, e.gpu_milli, e.cpu_milli, e.memory_mib};
    for (int n : nominated_)
      if (n != id && entries_[n].nominated && entries_[n].leaf == leaf) {
        claim.gpu += entries_[n].gpu_milli;
        claim.cpu += entries_[n].cpu_milli;
        claim.memory += entries_[n].memory_mib;
      }
    my_share = claim.share =
        Weighted(leaf, DominantShare(queues_[leaf].gpu + claim.gpu, queues_[leaf].cpu + claim.cpu,
                                     queues_[leaf].memory + claim.memory));
  }
  // Fair-share preemption: whether victim v of another queue may go, its queue's weighted
  // dominant share staying at or above my_share without it (Kueue's LessThanOrEqualToFinalShare:
  // shares may end equal, never swapped), what is being evicted and what `taken` (as for
  // lendable) says is already chosen counted as gone.
  // Only what it borrows goes (its queue and the branch above it, up to the queue they share,
  // stay at their guarantees: as Kueue's fair sharing counts only borrowed quota), or two
  // queues would evict each other's work within its guarantee in turn.
  const auto fair_allows = [&](int v, const std::function<int64_t(int, int)>& taken) {
    const Entry& w = entries_[v];
    return FairShareKeeps(leaf, w.leaf, claim, w.gpu_milli, w.cpu_milli, w.memory_mib, w.charged,
                          taken);
  };

  // Whether leaf q is inside a department whose own guarantee this reclaims: its work is
  // not taken for it.
  const auto in_scope = [&](int q) {
    for (int f = 0; f < static_cast<int>(reclaim_scope.size()); ++f)
      if (reclaim_scope[f] >= 0 && reclaim_scope[f] != leaf && Under(q, reclaim_scope[f]))
        return true;
    return false;
  };
  uint64_t scope_key = 0;
  for (int f = 0; f < static_cast<int>(reclaim_scope.size()); ++f)
    if (reclaim_scope[f] >= 0 && reclaim_scope[f] != leaf)
      scope_key = scope_key * 1000003 + static_cast<uint64_t>(f) * 65537 +
                  static_cast<uint64_t>(reclaim_scope[f]) + 1;
  // Eligible victims, cheapest first. They depend on who asks (queue, priority, why) and on the
  // running set, which only shrinks during a cycle: computed once per cycle and key. (Whether
  // a queue lends, or keeps its fair share, changes as evictions are chosen: every path that
  // takes a cached victim asks again, with what is taken so far.)
  const VictimKey cache_key{
      leaf,
      e.spec.priority,
      reclaim_flavors,
      res_reclaim,
      quota_short,
      borrow_preempt || fair_quota,  // (never both: ValidateAdmissionConfig)
      config_.fair_share_preemption ? my_share : 0.0,
      policy.within_queue == PreemptionPolicy::Within::kLowerOrNewerEqualPriority ? e.arrival : 0,
      held_swap_ >= 0,
      scope_key};
  // Lower priority first, then the fewest GPU-seconds lost, then the newest.
  auto cheaper = [&](const Candidate& a, const Candidate& b) {
    const Entry& x = entries_[a.id];
    const Entry& y = entries_[b.id];
    if (x.spec.priority != y.spec.priority) return x.spec.priority < y.spec.priority;
    if (a.tier != b.tier) return a.tier < b.tier;
    if (a.cost != b.cost) return a.cost < b.cost;
    if (x.admitted_at != y.admitted_at) return x.admitted_at > y.admitted_at;
    // (Admitted in the same cycle: the later submitted first; a trial's take-back of a queue's
    // oldest workload left it waiting behind all the queue's later ones.)
    return a.id > b.id;
  };
  auto cached = victim_cache_.find(cache_key);
  if (cached == victim_cache_.end()) {
    int in_min_runtime = 0;
    std::string budget_block;
    std::vector<Candidate> cands, later;  // later: within their minimum runtime
    std::vector<int> young_ids;
    std::vector<Candidate> spare_only, spare_fair, spent;
    // Only queues that can give victims are scanned: its own (lower priority) and, for reclaim or
    // fair-share preemption, the others.
    std::vector<int> pool;
    for (int q = 0; q < queue_count(); ++q) {
      if (!is_leaf(q)) continue;
      if (q == leaf) {
        const auto& prios = queues_[q].running_priorities;
        if (prios.empty() || policy.within_queue == PreemptionPolicy::Within::kNever ||
            *prios.begin() > e.spec.priority)
          continue;
      } else if (quota_short ? !borrow_preempt && !fair_quota && !quota_reclaim
                             : !takes_borrowed && !config_.fair_share_preemption) {
        continue;
      } else if (!quota_short && reclaim_flavors == 0 && !config_.fair_share_preemption &&
                 queues_[q].root != queues_[leaf].root) {
        continue;  // (reclaiming CPU or memory only: from its own tree)
      }
      pool.insert(pool.end(), queues_[q].running.begin(), queues_[q].running.end());
    }
    int pinned = 0;
    for (int v : pool) {
      const Entry& w = entries_[v];
      if (v == id) continue;
      if (!w.options.preemptible) {
        // (Of the flavour its quota is short of, where it is: other work gives none back.)
        bool counts = quota_flavor < 0;
        for (auto [f, milli] : w.charged) counts |= f == quota_flavor && milli > 0;
        if (counts && w.leaf == leaf && MayEvictOwn(e, w)) ++pinned;
        continue;
      }
      bool own = w.leaf == leaf && MayEvictOwn(e, w);
      bool other = false;
      if (!own && w.leaf != leaf &&
          (!quota_short || borrow_preempt || fair_quota || quota_reclaim)) {
        if (takes_borrowed && priority_allows(w) && queue_may_lend(w.leaf)) {
          // Only what it borrows: the victim's queue stays at or above its guarantee without it,
          // so two queues never take the same GPUs back and forth.
          // Workloads already being evicted count as gone.
          other = lendable(v, [](int, int) { return int64_t{0}; }) > 0;
        }
        if (!other && fair_share && (!quota_short || fair_quota) &&
            policy.reclaim_within_cohort != PreemptionPolicy::Reclaim::kNever &&
            (policy.reclaim_within_cohort == PreemptionPolicy::Reclaim::kAny ||
             w.spec.priority < e.spec.priority)) {
          other = fair_allows(v, [](int, int) { return int64_t{0}; });
        }
      }
      if (!own && !other) {
        const bool spare = config_.elastic_shrink && w.leaf != leaf && w.above_min &&
                           now - w.admitted_at >= MinRuntime(v, id) && BudgetSpent(w.leaf) < 0;
        // Borrowing with its pods beyond its minCount only: those may go (elastic shrink);
        // not inside a department whose own guarantee is what is reclaimed (ReclaimScope).
        if (spare && reclaim_flavors != 0 && !quota_short && priority_allows(w) &&
            !in_scope(w.leaf)) {
          spare_only.push_back({v, EvictionCost(v, now), VictimTier(leaf, w.leaf)});
        } else if (spare && fair_share && (!quota_short || fair_quota) &&
                   policy.reclaim_within_cohort != PreemptionPolicy::Reclaim::kNever &&
                   (policy.reclaim_within_cohort == PreemptionPolicy::Reclaim::kAny ||
                    w.spec.priority < e.spec.priority)) {
          // Under fair-share preemption, one whose queue would fall below the preemptor's
          // share without it may still give the pods beyond its minCount that keep it at or
          // above (a user-style trial: an 8-pod elastic job kept its queue at 8 of 8 GPUs
          // against a fair share of 4).
          spare_fair.push_back({v, EvictionCost(v, now), VictimTier(leaf, w.leaf)});
        }
        continue;
      }
      const bool young = now - w.admitted_at < MinRuntime(v, id);
      if (young) {
        ++in_min_runtime;
        young_ids.push_back(v);
      }
      if (const int at = BudgetSpent(w.leaf); at >= 0) {
        if (!young) {
          budget_block = queues_[at].spec.name;
          // (A budget of 0 never frees: nothing is held waiting for it.)
          if (queues_[at].spec.disruption_budget > 0)
            spent.push_back({v, EvictionCost(v, now), VictimTier(leaf, w.leaf)});
        }
        continue;
      }
      (young ? later : cands).push_back({v, EvictionCost(v, now), VictimTier(leaf, w.leaf)});
    }
    std::sort(cands.begin(), cands.end(), cheaper);
    std::sort(spare_only.begin(), spare_only.end(), cheaper);
    std::sort(spent.begin(), spent.end(), cheaper);
    // (Named once here: a search that fails is said each time.)
    double young_free_at = -1;
    bool floored = false;  // the first to go is held by its queue's floor, not its own ask
    for (int v : young_ids) {
      const double free_at = entries_[v].admitted_at + MinRuntime(v, id);
      if (young_free_at < 0 || free_at < young_free_at) {
        young_free_at = free_at;
        floored = MinRuntime(v, id) > entries_[v].options.min_runtime_s;
      }
    }
    VictimList list;
    list.cands = std::move(cands);
    list.in_min_runtime = in_min_runtime;
    list.budget_block = budget_block;
    list.later = std::move(later);
    if (!young_ids.empty()) list.young_names = WorkloadNames(young_ids, 3);
    list.young_free_at = young_free_at;
    // (Said where the floor, not the workload, sets it: a re-trial's victim asked for none.)
    if (floored)
      list.young_floor = "its queue's preemptMinRuntimeSeconds of " +
                         std::to_string(std::llround(queues_[leaf].preempt_min_runtime)) + " s";
    list.spare_only = std::move(spare_only);
    list.spent = std::move(spent);
    list.spare_fair = std::move(spare_fair);
    list.pinned = pinned;
    victim_cache_[cache_key] = std::move(list);
    cached = victim_cache_.find(cache_key);
  }
  int in_min_runtime = cached->second.in_min_runtime;
  std::string budget_block = cached->second.budget_block;
  // (One shrunk this cycle may shrink again, not go whole: the server writes its marks
  // together, and one decision of each other kind per workload and cycle.)
  // (A held borrower's swap takes its own queue's work only.)
  const auto may_take = [&](const Candidate& c) {
    return entries_[c.id].phase == Phase::kAdmitted &&
           (held_swap_ < 0 || entries_[c.id].leaf == leaf);
  };
  std::vector<Candidate> cands;
  for (const Candidate& c : cached->second.cands)
    if (may_take(c) && entries_[c.id].shrunk_at != now_) cands.push_back(c);
  auto waiting_reason = [&]() {
    std::string r = e.reason.substr(0, e.reason.find("; waiting:"));
    if (in_min_runtime) {
      // (Named: a trial could not tell which of its victims was protected.)
      r += "; waiting: " + std::to_string(in_min_runtime) +
           (in_min_runtime == 1 ? " possible victim (" : " possible victims (") +
           cached->second.young_names +
           (in_min_runtime == 1 ? ") is within its minimum runtime"
                                : ") are within their minimum runtime");
      // When the first of them may go (in whole minutes: a message that changed every cycle
      // would be written every cycle), those a spent budget holds too (a trial's lost its time
      // beside the budget's note).
      const double first = cached->second.young_free_at;
      if (first >= 0) {
        const int64_t minutes =
            std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::max(0.0, first - now_) / 60)));
        std::string in = minutes % 60 ? std::to_string(minutes % 60) + " min" : "";
        if (minutes >= 60) in = std::to_string(minutes / 60) + " h" + (in.empty() ? "" : " " + in);
        // (Under a minute, said so: "about 1 min" read as a minute when 20 s were left.)
        if (first - now_ < 60) in = "less than a minute";
        r += std::string(in_min_runtime == 1 ? " (it" : " (the first") + " may go in " +
             (first - now_ < 60 ? "" : "about ") + in +
             (cached->second.young_floor.empty() ? "" : ", by " + cached->second.young_floor) + ")";
      }
    }
    if (const int pinned = cached->second.pinned;
        pinned > 0 && cands.empty() && in_min_runtime == 0 && budget_block.empty())
      r += "; waiting: " + std::to_string(pinned) + (pinned == 1 ? " workload" : " workloads") +
           " of queue " + queues_[leaf].spec.name + " that its priority could preempt " +
           (pinned == 1 ? "is" : "are") + " not preemptible (spec.preemptible: false)";
    if (!budget_block.empty()) {
      // (The same budget held a consolidation back: said once, of both (a trial read the
      // budget twice in one message). Consolidate leaves its note out beside this one.)
      for (const std::string& said :
           {"; no consolidation plan: queue " + budget_block + "'s disruptionBudget (",
            "; no consolidation plan within queue " + budget_block + "'s disruptionBudget ("})
        if (const size_t at = r.find(said); at != std::string::npos) {
          const size_t end = r.find("; ", at + 2);
          r.erase(at, end == std::string::npos ? std::string::npos : end - at);
        }
      // (A budget of 0 frees nothing by itself: it says who must raise it.)
      const int q = QueueIndex(budget_block);
      r += q >= 0 && queues_[q].spec.disruption_budget == 0
               ? "; waiting: queue " + budget_block + "'s disruptionBudget is 0: none of " +
                     (is_leaf(q) ? "its work" : "the work below it") +
                     " is evicted or moved until an administrator raises it"
               : "; waiting: the disruption budget of queue " + budget_block +
                     " allows no more evictions or moves";
      // ... while which of its work stops (a trial could not tell whose eviction held it).
      // (Found once a cycle: every entry is scanned. A department's: its leaves' work.)
      if (q >= 0 && queues_[q].evicting_count_below > 0) {
        auto [named, fresh] = stopping_names_.try_emplace(q);
        if (fresh) {
          std::vector<int> stopping;
          for (int w = 0; w < static_cast<int>(entries_.size()); ++w)
            if (entries_[w].phase == Phase::kEvicting && Under(entries_[w].leaf, q))
              stopping.push_back(w);
          if (!stopping.empty())
            named->second = " while " + WorkloadNames(stopping, 3) +
                            (stopping.size() == 1 ? " stops" : " stop");
        }
        r += named->second;
      }
    }
    return r;
  };
  // One trial on the state, undone before it returns: the victims (`chosen`) that make room for
  // every pod, and where the pods would go (`placed`). `budget_refused` notes that a disruption
  // budget kept a victim out; with `ignore_budget` none does (the plan whose victims go as the
  // budgets allow, some now and the rest later).
  bool budget_refused = false, ignore_budget = false;
  std::vector<int> chosen;
  std::vector<std::pair<Assignment, const PodRequest*>> placed;
  // A required topology is planned in one domain at a time (`domain`, an index of the level's
  // domains; -1: anywhere): pod by pod across the fleet, victims could be taken in a domain the
  // pods never fit in together.
  const bool one_domain =
      e.spec.topology.required && e.spec.topology.level != TopologyLevel::kNone && pods.size() >= 2;
  int domain = -1;
  auto plan_in = [&](const std::vector<Candidate>& cands) -> bool {
    chosen.clear();
    placed.clear();
    std::unordered_map<int, int> rank_of;
    for (size_t i = 0; i < cands.size(); ++i) rank_of[cands[i].id] = static_cast<int>(i);
    auto rank = [&](int v) {
      auto it = rank_of.find(v);
      return it == rank_of.end() ? -1 : it->second;
    };

    std::map<int, int> chosen_per_queue;
    std::map<std::pair<int, int>, int64_t> chosen_milli;  // (queue, flavour)
    auto budget_ok = [&](int v) {
      if (ignore_budget || BudgetSpent(entries_[v].leaf, chosen_per_queue) < 0) return true;
      budget_refused = true;
      return false;
    };

    // Quota short: free own lower-priority work (and, borrowing within its cohort, others'
    // borrowed work), cheapest first, until the quota allows it. Victims are uncharged while
    // the quota is tried, so that a lender's queue keeps its own guarantee.
    // (CPU and memory short too: then its own work only, which is under any blocker.)
    const auto quota_allows = [&](int* blocker) {
      if (quota_flavor >= 0 &&
          (held_swap_ >= 0 || !QuotaAllows(leaf, quota_flavor, e.gpu_milli, nullptr, blocker)) &&
          !SwapAllows(e, quota_flavor, e.gpu_milli))
        return false;
      return !res_short || ResourcesAllow(e, nullptr);
    };
    if (quota_short) {
      // (Taking back its guarantee, what others borrow of it goes before its own work, as a
      // reclaim for room takes it.)
      const std::vector<Candidate>* in_order = &cands;
      std::vector<Candidate> others_first;
      if (quota_reclaim) {
        others_first = cands;
        std::stable_partition(others_first.begin(), others_first.end(),
                              [&](const Candidate& c) { return entries_[c.id].leaf != leaf; });
        in_order = &others_first;
      }
      for (const Candidate& c : *in_order) {
        int blocker = -1;
        if (quota_allows(&blocker)) break;
        if (!budget_ok(c.id)) continue;
        const Entry& w = entries_[c.id];
        // Only work under the queue whose limit stops it gives quota back: another queue's
        // does not while its own borrowing limit (or its parent's) is what is reached.
        bool under = blocker < 0;
        for (int q = w.leaf; q >= 0 && !under; q = queues_[q].parent) under = q == blocker;
        if (!under) continue;
        int64_t milli = 0;
        for (auto [f, m] : w.charged)
          if (f == quota_flavor) milli += m;
        if (cpu_short) milli += w.cpu_milli;
        if (memory_short) milli += w.memory_mib;
        if (milli == 0) continue;
        // (Those chosen are uncharged already: their queues' shares are without them.)
        const auto none = [](int, int) { return int64_t{0}; };
        if (w.leaf != leaf && (fair_quota ? !fair_allows(c.id, none) : lendable(c.id, none) == 0))
          continue;
        chosen.push_back(c.id);
        ++chosen_per_queue[w.leaf];
        note_taken(chosen_milli, c.id);
        TrialRelease(c.id);
        Charge(c.id, -1);
      }
      const bool allows = quota_allows(nullptr);
      for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) Charge(*it, +1);
      if (!allows) {
        for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) TrialReapply(*it);
        chosen.clear();
        return false;
      }
    }

    // Room: pod by pod, place where it fits now, or free the node whose victims are of the
    // lowest priority (its highest-priority victim's), then cost least. (A gang that prefers a
    // topology and fits the room free once its quota's victims go is placed as a gang.)
    bool ok = true;
    const bool as_gang = PlaceGangNow(e, pods, placed);
    const std::vector<int>* in_domain =
        domain >= 0 ? &state_.domains(e.spec.topology.level)[domain] : nullptr;
    for (const PodRequest& pod : pods) {
      if (as_gang) break;
      if (PlaceNow(pod, placed, in_domain)) continue;
      // (priority, tier, cost, victims, node): as candidates are ordered (cheaper), the highest
      // priority and the nearest queue (VictimTier) a node's victims take compare first, so
      // that a node of cheaper work of the preemptor's own department does not win over another
      // department's borrowed work (a test's project took from its sibling while another
      // department went on borrowing the sibling's guarantee).
      std::tuple<int, int, double, int, int> best{0, 0, 0, 0, -1};
      std::vector<int> best_set;
      // Nodes worth a trial: those where the free room plus what the candidates there hold covers
      // the pod, cheapest candidates first, at most kMaxTrialNodes of them.
      std::map<int, std::tuple<double, int64_t, int64_t, int64_t>> room;  // cost, cpu, mem, gpu
      // Per node, its candidates' (priority, cpu, memory, GPUs): the priority up to which they
      // must go for the pod to fit there orders the nodes tried.
      std::map<int, std::vector<std::tuple<int, int64_t, int64_t, int64_t>>> by_priority;
      for (const Candidate& c : cands) {
        if (std::find(chosen.begin(), chosen.end(), c.id) != chosen.end()) continue;
        const Entry& w = entries_[c.id];
        for (size_t i = 0; i < w.assign.size(); ++i) {
          // (What it holds as placed: a memory-only share's compute is its GPU's.)
          int64_t held = 0;
          for (const DeviceShare& d : w.assign[i].devices) held += d.milli;
          by_priority[w.assign[i].node].push_back(
              {w.spec.priority, w.pods[i].cpu_milli, w.pods[i].memory_mib, held});
          auto& r = room[w.assign[i].node];
          std::get<0>(r) += c.cost;
          std::get<1>(r) += w.pods[i].cpu_milli;
          std::get<2>(r) += w.pods[i].memory_mib;
          std::get<3>(r) += held;
        }
      }
      // The compute the pod needs on node n: a memory-only share's is, at least, its memory's
      // share of the node's largest GPU (FractionMilli), not of the smallest it may land on.
      const auto need_on = [&](int n) {
        if (!pod.compute_from_memory) return pod.total_gpu_milli();
        int64_t least = pod.total_gpu_milli();
        for (int d = 0; d < state_.node(n).gpu_count(); ++d)
          least = std::min(least, state_.FractionMilli(n, d, pod));
        return least;
      };
      std::vector<std::tuple<int, double, int>> order;  // (priority it needs there, cost, node)
      for (const auto& [n, r] : room) {
        if (no_eviction_[n]) continue;
        if (pod.nodes && !pod.nodes->in[n]) continue;  // (its selector leaves it out)
        if (domain >= 0 && state_.domain_of(n, e.spec.topology.level) != domain) continue;
        if (state_.free_cpu(n) + std::get<1>(r) < pod.cpu_milli) continue;
        if (state_.free_memory(n) + std::get<2>(r) < pod.memory_mib) continue;
        const int64_t need = need_on(n);
        const int64_t free_there =
            pod.kind == DeviceKind::kMig
                ? state_.node_free_slice_milli(n, pod.mig_profile >= 0 && pod.mig_profile < 64
                                                      ? uint64_t{1} << pod.mig_profile
                                                      : 0)
                : state_.node_free_milli(n);
        if (free_there + std::get<3>(r) < need) continue;
        if (pod.kind != DeviceKind::kNone &&
            (state_.node_model(n) < 0 || !(pod.model_mask >> state_.node_model(n) & 1)))
          continue;
        std::vector<std::tuple<int, int64_t, int64_t, int64_t>>& there = by_priority[n];
        std::sort(there.begin(), there.end());
        int64_t cpu = state_.free_cpu(n), memory = state_.free_memory(n), gpu = free_there;
        int up_to = std::get<0>(there.back());
        for (const auto& [priority, c, m, g] : there) {
          cpu += c;
          memory += m;
          gpu += g;
          if (cpu >= pod.cpu_milli && memory >= pod.memory_mib && gpu >= need) {
            up_to = priority;
            break;
          }
        }
        order.push_back({up_to, std::get<0>(r), n});
      }
      std::sort(order.begin(), order.end());
      constexpr size_t kMaxTrialNodes = 32;
      if (order.size() > kMaxTrialNodes) order.resize(kMaxTrialNodes);
      for (auto [unused_priority, unused_cost, n] : order) {
        std::vector<int> here;
        for (int v : node_workloads_[n])
          if (rank(v) >= 0 && std::find(chosen.begin(), chosen.end(), v) == chosen.end())
            here.push_back(v);
        if (here.empty()) continue;
        std::sort(here.begin(), here.end(), [&](int a, int b) { return rank(a) < rank(b); });
        std::vector<int> taken;
        double cost = 0;
        int top = std::numeric_limits<int>::min();   // the highest priority among `taken`
        int tier = std::numeric_limits<int>::min();  // ... and tier
        bool fits = false;
        std::map<int, int> extra;
        std::map<std::pair<int, int>, int64_t> extra_milli;  // (queue, flavour)
        const auto taken_so_far = [&](int q, int f) {
          auto a = chosen_milli.find({q, f});
          auto b = extra_milli.find({q, f});
          return (a == chosen_milli.end() ? 0 : a->second) +
                 (b == extra_milli.end() ? 0 : b->second);
        };
        // (A MIG slice's pod is helped by victims holding a slice of its profile there, the
        // layout being fixed, or by any where CPU or memory is short: cheaper ones holding
        // other slices would use up what their queue lends first (a trial's 2g slice waited
        // for good while two 1g slices of the lender were tried before its 2g one).)
        const bool slice_only = pod.kind == DeviceKind::kMig && pod.mig_profile >= 0 &&
                                state_.free_cpu(n) >= pod.cpu_milli &&
                                state_.free_memory(n) >= pod.memory_mib;
        const auto holds_slice = [&](int v) {
          for (const Assignment& a : entries_[v].assign)
            if (a.node == n)
              for (const DeviceShare& d : a.devices)
                if (d.mig_slice >= 0 &&
                    state_.mig_slice_profile(n, d.device, d.mig_slice) == pod.mig_profile)
                  return true;
          return false;
        };
        for (int v : here) {
          if (slice_only && !holds_slice(v)) continue;
          int q = entries_[v].leaf;
          if (!ignore_budget && BudgetSpent(q, chosen_per_queue, extra) >= 0) {
            budget_refused = true;
            continue;
          }
          // (Neither past the lender's guarantee nor, under fair-share preemption, its share
          // below the preemptor's, with what is chosen so far.)
          if (q != leaf && fair_share
                  ? !(takes_borrowed && lendable(v, taken_so_far) > 0) &&
                        !fair_allows(v, taken_so_far)
                  : q != leaf && takes_borrowed && lendable(v, taken_so_far) == 0)
            continue;
          ++extra[q];
          note_taken(extra_milli, v);
          TrialRelease(v);
          taken.push_back(v);
          cost += cands[rank(v)].cost;
          top = std::max(top, entries_[v].spec.priority);
          tier = std::max(tier, cands[rank(v)].tier);
          if (NodeFits(state_, n, pod) && policy_.Score(state_, n, pod)) {
            fits = true;
            break;
          }
        }
        for (auto it = taken.rbegin(); it != taken.rend(); ++it) TrialReapply(*it);
        if (!fits) continue;
        std::tuple<int, int, double, int, int> k{top, tier, cost, static_cast<int>(taken.size()),
                                                 n};
        if (std::get<4>(best) < 0 || k < best) {
          best = k;
          best_set = taken;
        }
      }
      if (std::get<4>(best) < 0) {
        ok = false;
        break;
      }
      for (int v : best_set) {
        TrialRelease(v);
        chosen.push_back(v);
        ++chosen_per_queue[entries_[v].leaf];
        note_taken(chosen_milli, v);
      }
      if (const std::vector<int> there{std::get<4>(best)}; !PlaceNow(pod, placed, &there)) {
        ok = false;
        break;
      }
    }
    // A required topology holds the pods as a whole: planned pod by pod, where its victims
    // leave room, they may land in several domains. So once they are chosen, the gang is placed
    // again as a gang, in one domain, or the plan fails (a trial saw a gang that needs 3 nodes
    // in one leaf evict work in a leaf of 2, gaining nothing).
    if (ok && !as_gang && !chosen.empty() && one_domain) {
      for (auto it = placed.rbegin(); it != placed.rend(); ++it)
        state_.Release(it->first, *it->second);
      placed.clear();
      const bool explain = placer_.explain();
      placer_.set_explain(false);
      std::vector<Assignment> all;
      ok = PlaceAllOnce(e, pods, e.spec.topology, &all, nullptr);
      placer_.set_explain(explain);
      for (size_t i = 0; ok && i < all.size(); ++i) placed.push_back({all[i], &pods[i]});
    }
    // Undo the trial: the victims keep their devices until they stop.
    for (auto it = placed.rbegin(); it != placed.rend(); ++it)
      state_.Release(it->first, *it->second);
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) TrialReapply(*it);
    return ok && !chosen.empty();
  };
  // The domains tried, most room first (free GPUs and what candidates hold there), those that
  // could hold it at all, a few: the first plan that works is taken.
  auto plan = [&](const std::vector<Candidate>& cands) -> bool {
    if (!one_domain) return plan_in(cands);
    const TopologyLevel level = e.spec.topology.level;
    std::vector<int64_t> reach(state_.domains(level).size(), 0);
    // (A node's free GPUs leave MIG GPUs out: a gang of slices counts their free slices.)
    const ClusterState::RoomKinds kinds = ClusterState::RoomKindsOf(pods);
    for (int n = 0; n < state_.node_count(); ++n)
      reach[state_.domain_of(n, level)] += state_.node_free_room(n, kinds);
    for (const Candidate& c : cands)
      for (const Assignment& a : entries_[c.id].assign)
        for (const DeviceShare& d : a.devices) reach[state_.domain_of(a.node, level)] += d.milli;
    std::vector<int> order;
    for (int d = 0; d < static_cast<int>(reach.size()); ++d)
      if (reach[d] >= e.gpu_milli) order.push_back(d);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return reach[a] > reach[b]; });
    constexpr size_t kMaxDomains = 8;
    if (order.size() > kMaxDomains) order.resize(kMaxDomains);
    bool found = false;
    for (int d : order) {
      domain = d;
      if ((found = plan_in(cands))) break;
    }
    domain = -1;
    return found;
  };
  // It would fit once victims within their minimum runtime may go: when that is (for the
  // caller's guarantee bound) — the victims it needs, not every young one.
  auto note_later = [&](std::vector<Candidate> all) {
    e.victims_ready_at = -1;
    std::vector<Candidate> young;
    for (const Candidate& c : cached->second.later)
      if (may_take(c)) young.push_back(c);
    if (young.empty()) return;
    all.insert(all.end(), young.begin(), young.end());
    std::sort(all.begin(), all.end(), cheaper);
    if (!plan(all)) return;
    double ready = now, longest = 0;
    for (int v : chosen) {
      const Entry& w = entries_[v];
      ready = std::max(ready, w.admitted_at + MinRuntime(v, id));
      longest = std::max(longest, MinRuntime(v, id));
    }
    e.victims_ready_at = ready;
    e.victims_min_runtime = longest;
    chosen.clear();
  };
  // Elastic victims' spare pods first: taking them loses no work (they run on with fewer).
  // (Short of its queue's GPU quota, of its own queue's pods: they free quota as they go; short
  // of its tree's, reclaiming its guarantee, first of what the tree's other queues borrow.)
  // (Not where the fleet is what stops it, trees lending each other: what another tree's
  // pods free is not counted there; whole victims only.)
  if (config_.elastic_shrink &&
      (!quota_short ||
       (!res_short && !borrow_preempt && quota_flavor >= 0 &&
        !(quota_reclaim && (quota_blocker < 0 || quota_blocker == fleet_queue_))))) {
    ShrinkScope scope;
    if (quota_short) scope.quota_flavor = quota_flavor;
    scope.quota_reclaim = quota_reclaim;
    scope.fair_quota = fair_quota;
    scope.quota_blocker = quota_blocker;
    scope.reclaim_flavors = reclaim_flavors;
    scope.reclaim_scope = reclaim_scope;
    scope.res_reclaim = res_reclaim;
    scope.check_lending = takes_borrowed && !fair_share;
    if (fair_share) scope.fair_share = claim;
    scope.takes_borrowed = takes_borrowed;
    scope.big_may_go = !borrow_preempt;
    scope.reclaim = reclaim;
    if (borrow_preempt) {
      scope.why = "for higher-priority work borrowing in queue " + queues_[leaf].spec.name;
    } else if (takes_borrowed) {
      scope.why = reclaims_what();
    } else {
      scope.why = "for higher-priority work";
    }
    // The elastic ones among the victims, cheapest first (few: no copy of them all).
    std::vector<Candidate> spare;
    for (const Candidate& c : cached->second.cands)
      if (may_take(c) && entries_[c.id].above_min) spare.push_back(c);
    for (const Candidate& c : cached->second.spare_only) {
      if (!may_take(c)) continue;
      spare.push_back(c);
      scope.must_lend.insert(c.id);
    }
    for (const Candidate& c : cached->second.spare_fair)
      if (may_take(c)) spare.push_back(c);
    // A pod taken from work that is not a gang loses its run (it runs again later), where a
    // gang's ranks run on: such work gives pods only while one of them costs no more than the
    // cheapest whole victim (fewer GPU-seconds lost than evicting it whole, in any case).
    double cheapest_whole = std::numeric_limits<double>::infinity();
    for (const Candidate& c : cands) cheapest_whole = std::min(cheapest_whole, c.cost);
    spare.erase(std::remove_if(spare.begin(), spare.end(),
                               [&](const Candidate& c) {
                                 const Entry& w = entries_[c.id];
                                 return !w.spec.gang && !w.pods.empty() &&
                                        c.cost / static_cast<double>(w.pods.size()) >
                                            cheapest_whole;
                               }),
                spare.end());
    std::sort(spare.begin(), spare.end(), cheaper);
    if (!spare.empty() && Shrink(id, pods, spare, scope, now, out)) return true;
  }
  // The plan's victims, each tried without (the last chosen, the dearest, first): one the
  // others make room and quota without stays, as Kueue keeps its preemption targets minimal
  // (a user-style review: a cheap MIG slice went with the job whose GPUs were the room, and
  // came back on the same slice a second later). On a plan that succeeded.
  auto prune = [&](const std::vector<Candidate>& from) {
    if (chosen.size() < 2) return;
    std::vector<int> keep = chosen;
    auto keep_placed = placed;
    const bool refused = budget_refused;
    const std::vector<int> tries(chosen.rbegin(), chosen.rend());  // (plan rewrites chosen)
    for (int drop : tries) {
      if (keep.size() < 2 || std::find(keep.begin(), keep.end(), drop) == keep.end()) continue;
      std::vector<Candidate> without;
      for (const Candidate& c : from)
        if (c.id != drop && std::find(keep.begin(), keep.end(), c.id) != keep.end())
          without.push_back(c);
      if (plan(without)) {
        keep = chosen;
        keep_placed = placed;
      }
    }
    chosen = keep;
    placed = keep_placed;
    budget_refused = refused;
  };
  bool planned = !cands.empty() && plan(cands);
  if (planned) prune(cands);
  // Disruption budgets alone forbid the victims it needs at once: those the budgets allow go
  // now, their room held for it, and the rest as the budgets free (it tries again first when
  // these have stopped), rather than none ever.
  int budget_later = 0;
  std::vector<std::string> later_queues;  // (whose budgets hold them, as first met)
  // (One whose earlier batch has stopped also counts the victims of queues whose budget is
  // spent now: the room that batch freed is its, and the rest follow as the budgets free.)
  std::vector<Candidate> spent;
  if (!planned && e.continuing)
    for (const Candidate& c : cached->second.spent)
      if (may_take(c) && entries_[c.id].shrunk_at != now_) spent.push_back(c);
  // (Not a held swap's: its victims that stopped first would be re-admitted into the room the
  // hold does not keep, batch after batch, and more taken for it each time; it says why.)
  if (!planned && (budget_refused || !spent.empty()) && held_swap_ >= 0) held_swap_budget_ = true;
  if (!planned && (budget_refused || !spent.empty()) && held_swap_ < 0) {
    ignore_budget = true;
    std::vector<Candidate> all = cands;
    all.insert(all.end(), spent.begin(), spent.end());
    std::sort(all.begin(), all.end(), cheaper);
    if (plan(all)) {
      prune(all);
      std::map<int, int> now_per_queue;
      std::vector<int> now_ones;
      for (int v : chosen) {
        if (const int at = BudgetSpent(entries_[v].leaf, now_per_queue); at < 0) {
          ++now_per_queue[entries_[v].leaf];
          now_ones.push_back(v);
        } else {
          budget_block = queues_[at].spec.name;
          if (!Contains(later_queues, budget_block)) later_queues.push_back(budget_block);
          ++budget_later;
        }
      }
      planned = !now_ones.empty();
      if (planned) chosen = now_ones;
      // A batch of its victims has stopped but the budget is spent (on other preemptors'
      // victims): it keeps the room they freed, as it did while they stopped, and goes on
      // as the budget frees, rather than let that room (and those evictions) go to others.
      if (!planned && e.continuing) {
        Nominate(id, 0, reclaim);
        SetPlan(id, placed, quota_short && quota_flavor >= 0, res_short);
        e.budget_blocked = true;
        e.victims_ready_at = -1;
        e.reason =
            "holding the room its stopped victims freed" + MoreToGo(budget_later, later_queues);
        ignore_budget = false;
        return false;
      }
    }
    ignore_budget = false;
  }
  if (!planned) {
    e.reason = waiting_reason();
    e.budget_blocked = !budget_block.empty();
    // (Held by a budget that frees as its work stops: it searches again then. Not one of 0,
    // which frees only when an administrator raises it.)
    if (const int bq = budget_block.empty() ? -1 : QueueIndex(budget_block);
        bq >= 0 && queues_[bq].spec.disruption_budget > 0)
      e.retry_search = true;
    note_later(cands);
    return false;
  }
  e.victims_ready_at = -1;
  // (Its wait is stretched by the budget: the replay's bound counts it an exception.)
  e.budget_blocked = budget_later > 0;

  bool own_only = true;
  for (int v : chosen) own_only &= entries_[v].leaf == leaf;
  std::string why;
  bool equal = false;  // a victim of its own priority that came after it
  for (int v : chosen) equal |= entries_[v].spec.priority >= e.spec.priority;
  if (own_only) {
    why =
        std::string(equal ? "for earlier work of the same priority" : "for higher-priority work") +
        " in queue " + queues_[leaf].spec.name +
        (!quota_short || held_swap_ >= 0 ? ""
         : quota_blocker < 0 || quota_blocker == leaf
             ? " (at its quota)"
             : " (at the quota of " + QueueLabel(quota_blocker) + ")");
  } else if (reclaim && reclaim_flavors == 0) {
    why = "queue " + queues_[leaf].spec.name + " reclaims its guarantee of " +
          (res_reclaim == 3 ? "cpu and memory" : ResourceName(res_reclaim == 1 ? 0 : 1));
  } else if (reclaim && fair_share && std::none_of(chosen.begin(), chosen.end(), [&](int v) {
               return lendable(v, [](int, int) { return int64_t{0}; }) > 0;
             })) {
    // (None of them goes by the reclaim's rule, all by fair share: said so, not "reclaims" of
    // work a trial saw taken from inside the department whose guarantee it named.)
    why = FairShareWhy(leaf, chosen);
  } else if (reclaim) {
    why = reclaims_what();
  } else if (borrow_preempt) {
    why = "for higher-priority work borrowing in queue " + queues_[leaf].spec.name;
  } else if (fair_share) {
    why = FairShareWhy(leaf, chosen);
  } else {
    why = "for higher-priority work";
  }
  double lost = 0;
  int stopping = 0, taken_back = 0;
  for (int v : chosen) {
    const double loses = LostIfEvicted(v, now);
    if (EvictOrTakeBack(
            v, id, "preempted by " + FullName(id) + " (" + why + ")" + CutShortNote(v, id, now),
            out,
            own_only                              ? Eviction::Basis::kPriority
            : reclaim && entries_[v].leaf != leaf ? Eviction::Basis::kReclaim
                                                  : Eviction::Basis::kOther)) {
      lost += loses;
      ++stopping;
    } else {
      ++taken_back;
    }
  }
  if (reclaim && !own_only) NoteReclaim(id, chosen, now, reclaim_flavors, res_reclaim);
  // (With every victim taken back it goes first next cycle, its room held meanwhile.)
  Nominate(id, stopping, reclaim);
  // (Short of GPU, CPU or memory quota: what its victims free of it is kept for it.)
  SetPlan(id, placed, quota_short && quota_flavor >= 0, res_short);
  if (stopping == 0) {
    e.reason = "taking back " + std::to_string(taken_back) +
               " workload(s) admitted this cycle before they started (" + WorkloadNames(chosen) +
               ") " + ForWhy(why) + "; it starts next cycle";
  } else {
    std::vector<int> stops;
    for (int v : chosen)
      if (entries_[v].phase == Phase::kEvicting) stops.push_back(v);
    e.reason = "preempting " + std::to_string(stopping) + " workload(s) (" + WorkloadNames(stops) +
               ") " + ForWhy(why) + ", " + std::to_string(static_cast<int64_t>(lost)) +
               // (Of these victims: a trial read a later batch's as a running total.)
               " GPU-seconds lost, what these ran so far (what they run until they stop is lost "
               "too)" +
               (taken_back ? " (and taking back " + std::to_string(taken_back) +
                                 " admitted this cycle before it started)"
                           : "");
  }
  if (budget_later > 0) e.reason += MoreToGo(budget_later, later_queues);
  return true;
}

bool Admitter::HeldSwap(int id, double now, CycleResult& out) {
  if (!entries_[id].options.may_preempt) return false;  // (preemptionPolicy Never)
  const Entry& e = entries_[id];
  if (!config_.preemption || e.nominated || !OwnMayGo(id)) return false;
  const PodRequest* gpu_pod = FirstGpuPod(e.pods);
  if (!gpu_pod) return false;
  // The flavour its queue holds work in that it may use: what its own work there gives back
  // is what it takes. (Work of an unmanaged flavour is charged nothing: never held.)
  int flavor = -1;
  for (int f : CandidateFlavors(*gpu_pod))
    if (managed_[f] && queues_[e.leaf].usage[f] > 0) {
      flavor = f;
      break;
    }
  // (One search a queue and cycle, apart from TakeSearch's: a held borrower's failed swap
  // would have used the search its queue's other work gets.)
  if (flavor < 0 || !held_swap_queues_.insert(e.leaf).second) return false;
  const uint64_t models = FlavorModels(flavor, *gpu_pod);
  std::vector<PodRequest> masked = e.pods;
  for (PodRequest& p : masked)
    if (p.kind != DeviceKind::kNone) p.model_mask &= models;
  // (What a failed search says of victims is not why it waits: the hold is. Kept as it was.)
  const std::string reason = e.reason;
  const double ready_at = e.victims_ready_at, min_runtime = e.victims_min_runtime;
  const bool budget_blocked = e.budget_blocked, waits_on_time = e.waits_on_time;
  held_swap_ = flavor;
  held_swap_budget_ = false;
  const bool started = Preempt(id, masked, models, now, out);
  held_swap_ = -1;
  if (!started) {
    Entry& w = entries_[id];  // (Preempt may add entries: an elastic victim's fragment)
    w.reason = reason;
    // (Said after the hold's words, once: its own queue's work could make way, but not at once.)
    constexpr char kNotAtOnce[] = "; its own queue's lower-priority work could make way";
    if (const size_t at = w.reason.find(kNotAtOnce); at != std::string::npos) w.reason.erase(at);
    // (Its own budget, or the nearest department's above it that sets one.)
    int b = w.leaf;
    while (queues_[b].spec.disruption_budget < 0 && queues_[b].parent >= 0) b = queues_[b].parent;
    if (held_swap_budget_)
      w.reason += std::string(kNotAtOnce) + " as a swap, but not all at once: queue " +
                  queues_[b].spec.name + "'s disruptionBudget is " +
                  std::to_string(queues_[b].spec.disruption_budget);
    w.victims_ready_at = ready_at;
    w.victims_min_runtime = min_runtime;
    w.budget_blocked = budget_blocked;
    w.waits_on_time = waits_on_time;
    w.swap_flavor = -1;
  }
  return started;
}

bool Admitter::GuaranteeHolds(int id, std::string* why, ReclaimTally* kept) const {
  const Entry& e = entries_[id];
  const ReclaimTally none;
  const ReclaimTally& also = kept != nullptr ? *kept : none;
  // (Held, in flavour f (-1: CPU or memory): what it asks joins what the guarantee must hold for
  // the queue's next reclaim.)
  const auto holds = [&](int f) {
    if (kept != nullptr) {
      if (f >= 0) kept->gpu_milli[f] += e.gpu_milli;
      kept->cpu_milli += e.cpu_milli;
      kept->memory_mib += e.memory_mib;
    }
    return true;
  };
  const QueueNode& q = queues_[e.leaf];
  // (Elastic work reclaims for as few pods as its guarantee holds: not judged by its full size.)
  if (e.min_counts != e.full_counts) return true;
  const PodRequest* gpu_pod = FirstGpuPod(e.pods);
  if (gpu_pod == nullptr) {
    // A reclaim of CPU or memory: its queue's guarantee of each it is limited in.
    for (int r = 0; r < 2; ++r) {
      const int64_t asks = r == 0 ? e.cpu_milli : e.memory_mib;
      const int64_t before = r == 0 ? also.cpu_milli : also.memory_mib;
      if (q.res_limited[r] && asks + before > q.res_guaranteed[r]) {
        if (why != nullptr)
          *why = std::string("it asks ") + ResourceAmount(r, asks) + " " + ResourceName(r) +
                 (before > 0 ? ", beside the " + ResourceAmount(r, before) +
                                   " its queue's other reclaims ask"
                             : std::string()) +
                 "; the guarantee is " + ResourceAmount(r, q.res_guaranteed[r]);
        return false;
      }
    }
    return holds(-1);
  }
  std::string past;
  int64_t beside = 0;  // (what the others ask in the first flavour named)
  for (int f : CandidateFlavors(*gpu_pod)) {
    if (!managed_[f]) return true;  // (a flavour no quota limits: not judged)
    const auto other = also.gpu_milli.find(f);
    const int64_t before = other == also.gpu_milli.end() ? 0 : other->second;
    if (e.gpu_milli + before <= q.guaranteed[f]) return holds(f);
    // Past its own, a department's own part (ReclaimScope) holds it while what the
    // department's work and the promises made below it, its own among them, take past its
    // children's guarantees stays within that part.
    const int64_t mine = e.nominated && e.promised_flavor == f ? 0 : e.gpu_milli;
    const int scope = ReclaimScope(e.leaf, f, mine);
    if (scope >= 0 && scope != e.leaf) return holds(f);
    // No guarantee of its own, nor a department's own part: the guarantee of a queue above it,
    // reclaimed from best-effort work only, holds it while such work holds some of the flavour
    // (not judged further).
    if (BestEffortReclaimOnly(e.leaf, f, scope))
      for (const QueueNode& b : queues_)
        if (b.spec.best_effort && b.usage[f] > 0) return holds(-1);
    if (past.empty()) beside = before;
    past +=
        (past.empty() ? "" : ", ") + GpuAmount(q.guaranteed[f]) + " in flavour " + flavors_[f].name;
  }
  if (why != nullptr)
    *why = "it asks " + GpuAmount(e.gpu_milli) + " GPUs" +
           (beside > 0 ? ", beside the " + GpuAmount(beside) + " its queue's other reclaims ask"
                       : std::string()) +
           "; the guarantee is " + (past.empty() ? std::string("none") : past);
  return false;
}

std::string Admitter::FullName(int id) const {
  return entries_[id].spec.tenant.str() + "/" + entries_[id].spec.name.str();
}

std::string Admitter::WorkloadNames(const std::vector<int>& ids, size_t most) const {
  // (In name order, as the scheduler names them while they stop: a trial's events listed the
  // same victims in two orders.)
  std::vector<std::string> names;
  for (int id : ids) names.push_back(FullName(id));
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (out.empty() ? "" : ", ") + names[i];
  if (names.size() > most) out += " and " + std::to_string(names.size() - most) + " more";
  return out;
}

bool Admitter::EvictOrTakeBack(int victim, int preemptor, const std::string& reason,
                               CycleResult& out, Eviction::Basis basis) {
  // Admitted earlier in this cycle, it has not started: it waits again at once, as if it had
  // not been admitted (no grace period, nothing lost, no eviction).
  if (std::find(out.admitted.begin(), out.admitted.end(), victim) != out.admitted.end()) {
    Unadmit(victim, "admitted and taken back in the same cycle: " + reason, out);
    return false;
  }
  MarkEvicting(victim, preemptor, reason, out, basis);
  return true;
}

void Admitter::GiveBack(int id) {
  Entry& e = entries_[id];
  Unhold(id);
  Charge(id, -1);
  RemoveRunning(id);
  e.assign.clear();
  e.phase = Phase::kPending;
  e.admitted_at = -1;
  e.ready = false;
}

void Admitter::Unadmit(int id, const std::string& reason, CycleResult& out) {
  Entry& e = entries_[id];
  GiveBack(id);
  out.admitted.erase(std::find(out.admitted.begin(), out.admitted.end(), id));
  out.taken_back.push_back(id);
  Enqueue(id);
  e.reason = reason;
}

void Admitter::Finish(int id, double now) {
  (void)now;
  Entry& e = entries_[id];
  switch (e.phase) {
    case Phase::kPending:
      if (e.parked) Unpark(id);
      Unnominate(id);
      e.plan.clear();
      Dequeue(id);
      break;
    case Phase::kAdmitted:
    case Phase::kEvicting:
      RemoveRunning(id);
      Unhold(id);
      Charge(id, -1);
      if (e.phase == Phase::kEvicting) {
        CountEvicting(id, -1);
        VictimStopped(id);
      }
      break;
    default:
      break;
  }
  e.assign.clear();
  e.phase = Phase::kFinished;
  e.reason = "finished";
}

// A victim is gone (its room is free): its preemptor, still waiting, holds that room too.
void Admitter::VictimStopped(int id) {
  auto it = preemptor_.find(id);
  if (it == preemptor_.end()) return;
  const int preemptor = it->second;
  preemptor_.erase(it);
  if (preemptor < 0) return;  // drained, for no one
  Entry& p = entries_[preemptor];
  --p.victims_left;
  // (Stopped, work it moved waits to be placed again: the room held for it is its to take.)
  std::erase_if(p.move_plan, [id](const Entry::MoveHold& m) { return m.mover == id; });
  if (p.nominated && p.phase == Phase::kPending && !p.plan.empty()) {
    HoldPlan(preemptor);
    ReserveQuota(preemptor);  // what the victim held is its now
  }
}

void Admitter::Terminated(int id, double now) {
  Entry& e = entries_[id];
  if (e.phase != Phase::kEvicting) return;
  if (e.fragment_of < 0) e.options.lost_before_s += LostIfEvicted(id, now);
  Unhold(id);
  Charge(id, -1);
  CountEvicting(id, -1);
  VictimStopped(id);
  e.assign.clear();
  if (e.fragment_of >= 0) {  // pods an elastic shrink took: gone, nothing waits again
    e.phase = Phase::kFinished;
    e.reason = "stopped (elastic shrink)";
    return;
  }
  e.phase = Phase::kPending;
  e.admitted_at = -1;
  e.ready = false;
  Enqueue(id);
}

void Admitter::PodsReady(int id) {
  entries_[id].ready = true;
  unready_.erase(id);
}

}  // namespace fabrica
