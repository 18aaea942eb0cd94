// YAML for the admission settings: flavours, the queue tree and the cycle's knobs.
#include "core/yaml_reader.h"
#include "sched/admission.h"

namespace fabrica {
namespace {

Result<DeviceKind> ParseKind(YamlMap& m) {
  ASSIGN_OR_RETURN(std::string k, m.String("kind"));
  if (k == "whole") return DeviceKind::kWhole;
  if (k == "fraction") return DeviceKind::kFraction;
  if (k == "mig") return DeviceKind::kMig;
  return m.Error("kind", "expected whole, fraction or mig, got '" + k + "'");
}

}  // namespace

Result<FlavorSpec> ParseFlavor(YamlMap& m) {
  RETURN_IF_ERROR(m.CheckIsMap());
  FlavorSpec f;
  ASSIGN_OR_RETURN(f.name, m.String("name"));
  if (f.name == kCpuQuota || f.name == kMemoryQuota)
    return m.Error("name", "'" + f.name + "' is reserved for the pods' CPU and memory quotas");
  if (m.Has("kind")) {
    ASSIGN_OR_RETURN(DeviceKind k, ParseKind(m));
    f.kind = k;
  }
  if (m.Has("models")) {
    ASSIGN_OR_RETURN(f.models, m.StringList("models"));
  }
  if (m.Has("migProfiles")) {
    ASSIGN_OR_RETURN(f.mig_profiles, m.StringList("migProfiles"));
    if (f.kind && *f.kind != DeviceKind::kMig)
      return m.Error("migProfiles", "only a kind: mig flavour selects MIG profiles");
    for (const std::string& profile : f.mig_profiles)
      if (Status st = ValidateMigProfileName(profile); !st.ok())
        return m.Error("migProfiles", st.message());
  }
  RETURN_IF_ERROR(m.Finish());
  return f;
}

namespace {

// A quota of GPUs (a flavour's), or of the pods' CPU (`cpu`: cores, "500m") or memory
// (`memory`: "4Ti"), in milli-GPUs, milli-cores or MiB.
Result<QuotaSpec> ParseQuota(YamlMap& m, const std::string& resource) {
  if (!m.Keep(m.CheckIsMap())) return m.Unknowns();  // (with what was kept before)
  // (Bounded far past any fleet, so that the tree's sums cannot overflow: a user-style review
  // passed 9223372036854775 GPUs, whose sum wrapped below its parent's. Each bound is about
  // 10^12 milli-GPUs, milli-cores or MiB, so a million queues' sum still fits; a billion GPUs,
  // a sentinel for "unlimited" a stored queue may hold, is still taken.)
  auto amount = [&](const std::string& key) -> Result<int64_t> {
    if (resource == kCpuQuota) {
      ASSIGN_OR_RETURN(MilliCpu c, m.Cpu(key));
      if (c.value() > int64_t{1'000'000'000} * 1000)
        return m.Error(key, "at most 1000000000 cores");
      return c.value();
    }
    if (resource == kMemoryQuota) {
      ASSIGN_OR_RETURN(MemoryMib b, m.Memory(key));
      if (b.value() > int64_t{1} << 40) return m.Error(key, "at most 1Ei of memory");
      return b.value();
    }
    ASSIGN_OR_RETURN(MilliGpu g, m.Gpu(key));
    if (g.value() > int64_t{1'000'000'000} * kMilliPerGpu)
      return m.Error(key, "at most 1000000000 GPUs");
    return g.value();
  };
  // (Every bad amount is said at once: Keep.)
  QuotaSpec q;
  if (m.Has("guaranteed")) {
    m.Keep(amount("guaranteed"), &q.guaranteed_milli);
  } else {
    q.guaranteed_unset = true;
  }
  int64_t limit = 0;
  if (m.Has("borrowingLimit") && m.Keep(amount("borrowingLimit"), &limit))
    q.borrowing_limit_milli = limit;
  if (m.Has("lendingLimit") && m.Keep(amount("lendingLimit"), &limit))
    q.lending_limit_milli = limit;
  RETURN_IF_ERROR(m.Finish());
  return q;
}

// One of `names` (matched exactly, as Kueue spells them) at `key`, or `fallback` when absent.
Result<int> ParseChoice(YamlMap& m, const std::string& key, const std::vector<std::string>& names,
                        int fallback) {
  if (!m.Has(key)) return fallback;
  ASSIGN_OR_RETURN(std::string value, m.String(key));
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == value) return static_cast<int>(i);
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return m.Error(key, "must be " + list + ", got '" + value + "'");
}

Result<PreemptionPolicy> ParsePreemption(YamlMap& m) {
  if (!m.Keep(m.CheckIsMap())) return m.Unknowns();  // (with what was kept before)
  using P = PreemptionPolicy;
  P p;
  // The lists are in enum order. (Every bad value is said at once: Keep; the policy as a
  // whole is checked only where each value was good.)
  bool good = true;
  int within = static_cast<int>(p.within_queue);
  good &= m.Keep(ParseChoice(m, "withinQueue",
                             {"Never", "LowerPriority", "LowerOrNewerEqualPriority"}, within),
                 &within);
  p.within_queue = static_cast<P::Within>(within);
  int reclaim = static_cast<int>(p.reclaim_within_cohort);
  good &= m.Keep(ParseChoice(m, "reclaimWithinCohort", {"Never", "LowerPriority", "Any"}, reclaim),
                 &reclaim);
  p.reclaim_within_cohort = static_cast<P::Reclaim>(reclaim);
  if (m.Has("borrowWithinCohort")) {
    YamlMap b = m.Child("borrowWithinCohort");
    if (!b.Keep(b.CheckIsMap())) return b.Unknowns();
    int borrow = 0;
    good &= b.Keep(ParseChoice(b, "policy", {"Never", "LowerPriority"}, 0), &borrow);
    p.borrow_within_cohort = static_cast<P::Borrow>(borrow);
    int t = 0;
    if (b.Has("maxPriorityThreshold")) {
      if (b.Keep(b.Priority("maxPriorityThreshold"), &t))
        p.borrow_max_priority = t;
      else
        good = false;
    }
    RETURN_IF_ERROR(b.Finish());
  }
  RETURN_IF_ERROR(m.Finish());
  if (!good) return p;
  if (Status s = ValidatePreemptionPolicy(p); !s.ok()) {
    const std::string& msg = s.message();
    const size_t colon = msg.find(": ");
    return m.Error(msg.substr(0, colon), msg.substr(colon + 2));
  }
  return p;
}

}  // namespace

Status ParseQueuePolicies(YamlMap& m, QueueSpec* q) {
  // (Every bad value is said at once: Keep, then the caller's Finish.)
  int strict = 0;
  m.Keep(ParseChoice(m, "queueingStrategy", {"BestEffortFIFO", "StrictFIFO"}, 0), &strict);
  q->strict_fifo = strict == 1;
  if (m.Has("queueingStrategy")) q->sets |= QueueSpec::kSetsStrategy;
  if (m.Has("preemption")) {
    q->sets |= QueueSpec::kSetsPreemption;
    YamlMap p = m.Child("preemption");
    m.Keep(ParsePreemption(p), &q->preemption);
  }
  if (m.Has("flavorFungibility")) {
    q->sets |= QueueSpec::kSetsFungibility;
    YamlMap f = m.Child("flavorFungibility");
    if (f.Keep(f.CheckIsMap())) {
      int borrow = 0;
      f.Keep(ParseChoice(f, "whenCanBorrow", {"Borrow", "TryNextFlavor"}, 0), &borrow);
      q->when_can_borrow = static_cast<QueueSpec::WhenCanBorrow>(borrow);
      RETURN_IF_ERROR(f.Finish());
    }
  }
  // (Seconds from 0 to a year: the reclaim cap, and the floor against its own queue's work.)
  for (auto [key, to] : {std::pair{"reclaimMinRuntimeSeconds", &q->reclaim_min_runtime_s},
                         std::pair{"preemptMinRuntimeSeconds", &q->preempt_min_runtime_s}}) {
    int64_t s = 0;
    if (!m.Has(key) || !m.Keep(m.Int(key), &s)) continue;
    if (s > kMaxRunSeconds)  // (Int refuses negatives)
      m.Keep(m.Error(key, "must be between 0 and " + std::to_string(kMaxRunSeconds) + " (a year)"));
    else
      *to = static_cast<double>(s);
  }
  return Status();
}

Result<QueueSpec> ParseQueueSpec(YamlMap& m) {
  if (!m.Keep(m.CheckIsMap())) return m.Unknowns();  // (with what was kept before)
  // Every bad value is said at once, after any unknown field (Keep, then Finish): a queue
  // with three mistakes is mended in one round.
  QueueSpec q;
  m.Keep(m.String("name"), &q.name);
  m.Keep(m.String("parent", ""), &q.parent);
  // (Weight 0: no part of what lies past the guarantees, KAI's overQuotaWeight 0.)
  m.Keep(m.Double("weight", 1.0), &q.weight);
  m.Keep(m.Priority("priority", 0), &q.priority);
  int64_t budget = 0;
  if (m.Has("disruptionBudget") && m.Keep(m.Int("disruptionBudget"), &budget)) {
    // (Checked here, before it is narrowed: 2^32 would otherwise read as 0.)
    if (budget > 1'000'000)
      m.Keep(m.Error("disruptionBudget", "must be at most 1000000"));
    else
      q.disruption_budget = static_cast<int>(budget);
  }
  RETURN_IF_ERROR(ParseQueuePolicies(m, &q));
  if (m.Has("flavorOrder") && m.Keep(m.StringList("flavorOrder"), &q.flavor_order))
    for (size_t i = 0; i < q.flavor_order.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (q.flavor_order[i] == q.flavor_order[j])
          m.Keep(m.Error("flavorOrder", "'" + q.flavor_order[i] + "' is listed twice"));
  int stop = 0;
  m.Keep(ParseChoice(m, "stopPolicy", {"None", "Hold", "HoldAndDrain"}, 0), &stop);
  q.stop_policy = static_cast<StopPolicy>(stop);
  if (m.Has("tenants") && m.Keep(m.StringList("tenants"), &q.tenants))
    for (const std::string& t : q.tenants)
      if (t != "*")
        if (Status s = ValidateName(t); !s.ok())
          m.Keep(m.Error("tenants", "'" + t + "': " + s.message()));
  if (m.Has("quotas")) {
    Doc quotas = m.Raw("quotas");
    if (!quotas.IsMap()) {
      m.Keep(m.Error("quotas", "expected a map from flavour to quota"));
    } else {
      for (const Doc::Entry& entry : quotas.entries()) {
        const std::string& flavor = entry.first.Scalar();
        YamlMap qm = m.Child(entry.second, m.Path("quotas") + "." + flavor);
        m.Keep(ParseQuota(qm, flavor), &q.quotas[flavor]);
      }
    }
  }
  RETURN_IF_ERROR(m.Finish());
  return q;
}

Status ParseAdmissionSettings(YamlMap& m, AdmissionConfig* c) {
  RETURN_IF_ERROR(m.CheckIsMap());
  ASSIGN_OR_RETURN(c->usage_half_life_s, m.Double("usageHalfLife", kDefaultUsageHalfLifeS));
  ASSIGN_OR_RETURN(c->history_weight, m.Double("historyWeight", 0.5));
  if (c->history_weight > 1) return m.Error("historyWeight", "must be between 0 and 1");
  ASSIGN_OR_RETURN(c->gang_timeout_s, m.Double("gangTimeout", 300.0));
  if (c->gang_timeout_s <= 0) return m.Error("gangTimeout", "must be positive");
  ASSIGN_OR_RETURN(c->preemption, m.Bool("preemption", true));
  ASSIGN_OR_RETURN(c->fair_share_preemption, m.Bool("fairSharePreemption", false));
  ASSIGN_OR_RETURN(int64_t searches, m.Int("preemptionSearchesPerQueue", 1));
  if (searches < 1 || searches > 1000)
    return m.Error("preemptionSearchesPerQueue", "must be between 1 and 1000");
  c->preemption_searches_per_queue = static_cast<int>(searches);
  ASSIGN_OR_RETURN(int64_t reclaims, m.Int("reclaimSearchesPerQueue", 64));
  if (reclaims < 0 || reclaims > 1000)
    return m.Error("reclaimSearchesPerQueue", "must be between 0 and 1000");
  c->reclaim_searches_per_queue = static_cast<int>(reclaims);
  ASSIGN_OR_RETURN(c->consolidation, m.Bool("consolidation", true));
  ASSIGN_OR_RETURN(int64_t moves, m.Int("consolidationMaxMoves", 8));
  if (moves < 1 || moves > 1000)
    return m.Error("consolidationMaxMoves", "must be between 1 and 1000");
  c->consolidation_max_moves = static_cast<int>(moves);
  ASSIGN_OR_RETURN(c->reclaim_hold_s, m.Double("reclaimHold", 300.0));
  if (c->reclaim_hold_s < 0) return m.Error("reclaimHold", "must not be negative");
  ASSIGN_OR_RETURN(c->reclaim_min_runtime_s, m.Double("reclaimMinRuntime", 3600.0));
  if (c->reclaim_min_runtime_s < 0 || c->reclaim_min_runtime_s > kMaxRunSeconds)
    return m.Error("reclaimMinRuntime",
                   "must be between 0 and " + std::to_string(kMaxRunSeconds) + " (a year)");
  ASSIGN_OR_RETURN(c->elastic_growth, m.Bool("elasticGrowth", true));
  ASSIGN_OR_RETURN(c->elastic_shrink, m.Bool("elasticShrink", true));
  ASSIGN_OR_RETURN(c->lend_across_trees, m.Bool("lendAcrossTrees", false));
  ASSIGN_OR_RETURN(c->reserve_after_s, m.Double("reserveAfter", 0.0));
  if (c->reserve_after_s > kMaxRunSeconds)
    return m.Error("reserveAfter", "must be between 0 and " + std::to_string(kMaxRunSeconds) +
                                       " (a year); 0: no reservations");
  ASSIGN_OR_RETURN(int64_t reservations, m.Int("maxReservations", 4));
  if (reservations < 1 || reservations > 1000)
    return m.Error("maxReservations", "must be between 1 and 1000");
  c->max_reservations = static_cast<int>(reservations);
  return Status();
}

Result<AdmissionConfig> ParseAdmissionConfig(YamlMap& m) {
  AdmissionConfig c;
  RETURN_IF_ERROR(ParseAdmissionSettings(m, &c));
  if (m.Has("flavors")) {
    Doc fl = m.Raw("flavors");
    if (!fl.IsSequence()) return m.Error("flavors", "expected a list");
    for (size_t i = 0; i < fl.size(); ++i) {
      YamlMap fm = m.Child(fl[i], m.Path("flavors") + "[" + std::to_string(i) + "]");
      ASSIGN_OR_RETURN(FlavorSpec f, ParseFlavor(fm));
      c.flavors.push_back(std::move(f));
    }
    // Then the built-in catch-all, as the server's queue objects have it (a trial's scenario,
    // the schema's own example, was refused for a quota of `gpu` beside a declared flavour).
    if (std::none_of(c.flavors.begin(), c.flavors.end(),
                     [](const FlavorSpec& f) { return f.name == kDefaultFlavor; }))
      c.flavors.push_back(FlavorSpec{kDefaultFlavor, std::nullopt, {}, {}});
  }
  Doc qs = m.Raw("queues");
  if (!qs || !qs.IsSequence()) return m.Error("queues", "expected a list of queues");
  for (size_t i = 0; i < qs.size(); ++i) {
    YamlMap qm = m.Child(qs[i], m.Path("queues") + "[" + std::to_string(i) + "]");
    ASSIGN_OR_RETURN(QueueSpec q, ParseQueueSpec(qm));
    c.queues.push_back(std::move(q));
  }
  RETURN_IF_ERROR(m.Finish());
  Status valid = ValidateAdmissionConfig(c);
  if (!valid.ok()) {
    // (A bad value or unknown field first, where this map is inside another: the check's
    // failure may follow from it.)
    RETURN_IF_ERROR(m.Unknowns());
    // (The check's message starts with the path of what it found wrong: its line is said.)
    const std::string& said = valid.message();
    const size_t colon = said.find(": ");
    if (colon != std::string::npos && said.find(' ') > colon)
      return m.ErrorAt(said.substr(0, colon), said.substr(colon + 2));
    std::string prefix = m.path().empty() ? "" : m.path() + ".";
    return InvalidArgument(m.source() + ": " + prefix + said);
  }
  return c;
}

}  // namespace fabrica
