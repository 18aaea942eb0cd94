// Unit tests for sched/admission: one test per rule of issue 3 (guarantee, borrowing and lending
// limits, reclaim, priority preemption, minimum runtime, disruption budget, gangs all-or-nothing
// and their timeout, trust isolation, fair-share order, usage history), the config validation,
// and the replay's scenario files.
//
// The fleets are small and whole-GPU so every expected count can be worked out by hand: "two
// nodes of four GPUs" holds exactly eight one-GPU workloads.
#include "sched/admission.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/workload.h"
#include "core/yaml_reader.h"
#include "sched/policy.h"
#include "sched/queue_objects.h"
#include "sim/replay.h"

namespace fabrica {
namespace {

using nlohmann::json;

Node GpuNode(const std::string& name, int gpus) {
  Node n;
  n.name = NodeId(name);
  n.cpu = MilliCpu(64000);
  n.memory = MemoryMib(512 * 1024);
  n.nvlink_domain = name;
  n.leaf = "leaf-" + name;
  for (int i = 0; i < gpus; ++i) {
    Device d;
    d.uuid = "GPU-" + name + "-" + std::to_string(i);
    d.model = "H100";
    d.memory = MemoryMib(80 * 1024);
    d.mig_capable = true;
    n.devices.push_back(d);
  }
  return n;
}

Fleet Nodes(int count, int gpus) {
  Fleet f;
  for (int i = 0; i < count; ++i) f.nodes.push_back(GpuNode("n" + std::to_string(i), gpus));
  EXPECT_TRUE(ValidateFleet(f).ok());
  return f;
}

Workload Gpus(const std::string& name, const std::string& queue, int gpus, int priority = 0,
              int pods = 1, bool gang = false, const std::string& tenant = "") {
  Workload w;
  w.name = WorkloadId(name);
  w.tenant = TenantId(tenant.empty() ? queue : tenant);
  w.queue = QueueId(queue);
  w.priority = priority;
  w.gang = gang;
  PodSet ps;
  ps.name = "main";
  ps.count = pods;
  ps.cpu = MilliCpu(1000);
  ps.memory = MemoryMib(1024);
  ps.device.kind = DeviceKind::kWhole;
  ps.device.gpus = gpus;
  w.pod_sets = {ps};
  return w;
}

Workload Fraction(const std::string& name, const std::string& queue, int64_t milli,
                  const std::string& tenant) {
  Workload w = Gpus(name, queue, 1, 0, 1, false, tenant);
  w.pod_sets[0].device.kind = DeviceKind::kFraction;
  w.pod_sets[0].device.gpus = 0;
  w.pod_sets[0].device.gpu_milli = MilliGpu(milli);
  return w;
}

// `pods` pods of one MIG slice of `profile` each (a gang where more than one).
Workload MigSlices(const std::string& name, const std::string& queue, int pods,
                   const std::string& profile) {
  Workload w = Gpus(name, queue, 1, 0, pods, /*gang=*/pods > 1);
  w.pod_sets[0].device.kind = DeviceKind::kMig;
  w.pod_sets[0].device.gpus = 0;
  w.pod_sets[0].device.mig_profile = profile;
  return w;
}

// `fleet` and one more node of `gpus` GPUs of `model` with `gib` GiB of memory each.
Fleet WithNodeOf(Fleet fleet, const std::string& name, int gpus, const std::string& model,
                 int64_t gib) {
  Node node = GpuNode(name, gpus);
  for (Device& d : node.devices) {
    d.model = model;
    d.memory = MemoryMib(gib * 1024);
  }
  fleet.nodes.push_back(node);
  return fleet;
}

// One pod's assignment: whole GPUs `gpus` of node `node`.
std::vector<Assignment> OnGpus(int node, std::vector<int> gpus) {
  Assignment a;
  a.node = node;
  for (int d : gpus) a.devices.push_back({d, 1000, 80 * 1024, -1});
  return {a};
}

QueueSpec Leaf(const std::string& name, double guaranteed_gpus,
               std::optional<double> borrowing = std::nullopt,
               std::optional<double> lending = std::nullopt, int budget = -1) {
  QueueSpec q;
  q.name = name;
  q.parent = "org";
  q.disruption_budget = budget;
  QuotaSpec quota;
  quota.guaranteed_milli = static_cast<int64_t>(guaranteed_gpus * 1000);
  if (borrowing) quota.borrowing_limit_milli = static_cast<int64_t>(*borrowing * 1000);
  if (lending) quota.lending_limit_milli = static_cast<int64_t>(*lending * 1000);
  q.quotas["gpu"] = quota;
  return q;
}

// A leaf without quotas: only fair share and the fleet limit it.
// One node of 4 H100s (n0) and one of 4 A100s (m0).
Fleet H100AndA100() {
  Fleet fleet = Nodes(1, 4);
  Node a100 = GpuNode("m0", 4);
  for (Device& d : a100.devices) d.model = "A100";
  fleet.nodes.push_back(a100);
  EXPECT_TRUE(ValidateFleet(fleet).ok());
  return fleet;
}

// Flavours `h100` and `a100`: whole GPUs of each model (the fleet of H100AndA100).
AdmissionConfig PerModelFlavours() {
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"h100", DeviceKind::kWhole, {"H100"}, {}},
                    FlavorSpec{"a100", DeviceKind::kWhole, {"A100"}, {}}};
  return config;
}

QueueSpec Plain(const std::string& name, double weight = 1) {
  QueueSpec q;
  q.name = name;
  q.parent = "org";
  q.weight = weight;
  return q;
}

std::vector<Tenant> Tenants(std::vector<std::string> names,
                            TrustLevel trust = TrustLevel::kStandard) {
  std::vector<Tenant> out;
  for (const std::string& n : names) {
    Tenant t;
    t.name = TenantId(n);
    t.trust = trust;
    t.trust_domain = "shared";
    out.push_back(t);
  }
  return out;
}

void ExpectBad(const Status& s, const std::string& field, const std::string& fragment) {
  ASSERT_FALSE(s.ok()) << "expected an error naming " << field;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(field), std::string::npos)
      << "'" << field << "' not in: " << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos)
      << "'" << fragment << "' not in: " << s.message();
}

class AdmissionTest : public ::testing::Test {
 protected:
  // `count` workloads of `gpus` GPUs each, named prefix0, prefix1, ..., for `queue` at `at`.
  std::vector<int> SubmitEach(const std::string& prefix, const std::string& queue, int count,
                              double at, int gpus = 1) {
    std::vector<int> ids;
    for (int i = 0; i < count; ++i)
      ids.push_back(Submit(Gpus(prefix + std::to_string(i), queue, gpus), at));
    return ids;
  }
  // SubmitEach at 0, then a cycle at 1 that must admit them all: the ids, or none if it did not.
  std::vector<int> AdmitEach(const std::string& prefix, const std::string& queue, int count) {
    std::vector<int> ids = SubmitEach(prefix, queue, count, 0);
    adm_->Cycle(1, 1000);
    const int admitted = CountPhase(ids, Phase::kAdmitted);
    EXPECT_EQ(admitted, count) << adm_->reason(ids.back());
    return admitted == count ? ids : std::vector<int>{};
  }
  // How many pods of `ids` were placed on node n.
  int PlacedOn(const std::vector<int>& ids, int n) const {
    int on = 0;
    for (int id : ids)
      for (const Assignment& as : adm_->assignments(id)) on += as.node == n;
    return on;
  }
  // One node of 4 GPUs (queue a, guaranteed `guarantee`, reserveAfter 10 s), each GPU running
  // a 1-GPU workload (not preemptible) restored at 0 with the limit of `limits[d]` (0: none;
  // -1: held by something the admitter knows no end of), and "big", asking for all 4 since 1,
  // reserving room on the node from the cycle at 12. Returns big; `running` gets the others.
  int BigReservesBehind(const std::vector<int64_t>& limits, std::vector<int>* running,
                        double guarantee = 16) {
    AdmissionConfig config;
    config.reserve_after_s = 10;
    Make(Nodes(1, 4), {Leaf("a", guarantee)}, {}, config);
    SubmitOptions o;
    o.preemptible = false;
    for (int d = 0; d < 4; ++d) {
      if (limits[d] < 0) {
        adm_->Reserve(Assignment{.node = 0, .devices = {{.device = d, .milli = 1000}}},
                      PodRequest{});
        continue;
      }
      Workload w = Gpus("s" + std::to_string(d), "a", 1);
      w.max_runtime_seconds = limits[d];
      auto id = adm_->Restore(w, OnGpus(0, {d}), 0, o);
      EXPECT_TRUE(id.ok());
      if (id.ok()) running->push_back(*id);
    }
    const int big = Submit(Gpus("big", "a", 4), 1, o);
    adm_->Cycle(1.5, 1000);
    adm_->Cycle(12, 1000);
    EXPECT_EQ(adm_->reason(big).rfind("reserving room on n0", 0), 0u) << adm_->reason(big);
    return big;
  }
  void Make(const Fleet& fleet, std::vector<QueueSpec> leaves,
            std::vector<std::string> tenants = {}, AdmissionConfig config = {}) {
    config.queues = {QueueSpec{"org", "", 1, {}, -1}};
    for (QueueSpec& q : leaves) {
      config.queues.push_back(q);
      if (tenants.empty() || std::find(tenants.begin(), tenants.end(), q.name) == tenants.end())
        tenants.push_back(q.name);
    }
    MakeTree(fleet, config, tenants);
  }
  // Queues a (guaranteed 32) and b (0) on leaf-1, n0-n2, and leaf-2, n3 and n4 (8 GPUs each,
  // labelled leaf=1 or 2), a's pinned work on 2 GPUs of n0; no consolidation.
  void MakeTwoLeaves(bool elastic_growth = false) {
    Fleet fleet = Nodes(5, 8);
    for (int n = 0; n < 5; ++n) {
      fleet.nodes[n].leaf = n < 3 ? "leaf-1" : "leaf-2";
      fleet.nodes[n].labels["leaf"] = n < 3 ? "1" : "2";
    }
    AdmissionConfig config;
    config.consolidation = false;
    config.elastic_growth = elastic_growth;
    Make(fleet, {Leaf("a", 32), Leaf("b", 0)}, {}, config);
    SubmitOptions pinned;
    pinned.preemptible = false;
    ASSERT_TRUE(adm_->Restore(Gpus("a0", "a", 2), OnGpus(0, {0, 1}), 0, pinned).ok());
  }
  // An Admitter over `config`'s whole tree as given (Make puts every leaf under one root).
  // Queues a and b, guaranteed 8 GPUs each, under org, whose tree may hold no more than their
  // 16 (borrowingLimit 0), on a fleet of 32.
  void MakeCappedTree() {
    AdmissionConfig config;
    QueueSpec org{"org", "", 1, {}, -1};
    org.quotas["gpu"] = QuotaSpec{16'000, int64_t{0}, {}};
    config.queues = {org, Leaf("a", 8), Leaf("b", 8)};
    MakeTree(Nodes(8, 4), config, {"a", "b"});
  }
  void MakeTree(const Fleet& fleet, const AdmissionConfig& config,
                const std::vector<std::string>& tenants) {
    fleet_ = fleet;
    auto policy = MakePolicy("bestfit");
    ASSERT_TRUE(policy.ok());
    policy_ = std::move(*policy);
    auto a = Admitter::Create(fleet_, Tenants(tenants), config, *policy_);
    ASSERT_TRUE(a.ok()) << a.status().message();
    adm_ = std::move(*a);
  }
  int Submit(const Workload& w, double now = 0, SubmitOptions o = {}) {
    auto id = adm_->Submit(w, now, o);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : -1;
  }
  // From t = 2 to `until`, each second the oldest of `running` ends and a new 1-GPU workload of
  // queue a arrives, while `big` waits: the second it was admitted (-1: never), and in
  // `reserved` its last reason that said it reserved room.
  double StreamSmallWork(std::deque<int>& running, int big, int until, const SubmitOptions& o,
                         std::string* reserved) {
    for (int t = 2; t <= until; ++t) {
      adm_->Finish(running.front(), t);
      running.pop_front();
      Submit(Gpus("next-" + std::to_string(t), "a", 1), t, o);
      CycleResult r = adm_->Cycle(t + 0.5, 1000);
      for (int id : r.admitted)
        if (id != big) running.push_back(id);
      if (adm_->reason(big).rfind("reserving room", 0) == 0) *reserved = adm_->reason(big);
      if (adm_->phase(big) == Phase::kAdmitted) return t;
    }
    return -1;
  }
  // Four workloads `low` run (admitted at 5); then `hot` (at 10) needs two of them gone, one at a
  // time under its queue's disruption budget of 1: the first, evicted at 11, stops at 30 and
  // the second is evicted at 31. Returns {hot, first victim, second victim}, or -1s; `ids`
  // gets low's ids.
  std::array<int, 3> TwoVictimsOneAtATime(const std::vector<Workload>& low, const Workload& hot,
                                          std::vector<int>& ids) {
    for (size_t i = 0; i < low.size(); ++i) ids.push_back(Submit(low[i], static_cast<double>(i)));
    adm_->Cycle(5, 1000);
    if (CountPhase(ids, Phase::kAdmitted) != static_cast<int>(low.size())) return {-1, -1, -1};
    const int preemptor = Submit(hot, 10);
    CycleResult r = adm_->Cycle(11, 1000);
    if (r.evicted.size() != 1u) return {preemptor, -1, -1};
    const int first = r.evicted[0].victim;
    adm_->Terminated(first, 30);
    r = adm_->Cycle(31, 1000);
    if (r.evicted.size() != 1u) return {preemptor, first, -1};
    return {preemptor, first, r.evicted[0].victim};
  }
  // Three nodes of two GPUs; queue a guaranteed 5 GPUs, b 1; on each node one one-GPU pod of
  // a (ids in `a`) and one of b (in `b`), so b borrows two.
  void OnePodOfEachQueuePerNode(std::vector<int>& a, std::vector<int>& b) {
    Make(Nodes(3, 2), {Leaf("a", 5), Leaf("b", 1)});
    for (int i = 0; i < 3; ++i) {
      a.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1), i));
      adm_->Cycle(i + 0.1, 1000);
      b.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), i + 0.5));
      adm_->Cycle(i + 0.6, 1000);
    }
  }
  int CountPhase(const std::vector<int>& ids, Phase p) {
    int n = 0;
    for (int id : ids) n += adm_->phase(id) == p;
    return n;
  }

  Fleet fleet_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Admitter> adm_;
};

TEST_F(AdmissionTest, AdmitsOnlyWhatFitsAndWhatQuotaAllows) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
  std::vector<int> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Submit(Gpus("w" + std::to_string(i), "a", 1)));
  CycleResult r = adm_->Cycle(1, 1000);
  // a borrows b's idle guarantee: all eight GPUs, no more.
  EXPECT_EQ(r.admitted.size(), 8u);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 8);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
}

TEST_F(AdmissionTest, BorrowingLimitCapsAQueue) {
  Make(Nodes(2, 4), {Leaf("a", 4, /*borrowing=*/2), Leaf("b", 4)});
  std::vector<int> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Submit(Gpus("w" + std::to_string(i), "a", 1)));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 6);
  EXPECT_NE(adm_->reason(ids[7]).find("queue a over its borrowing limit for gpu: 7/6"),
            std::string::npos)
      << adm_->reason(ids[7]);
}

// A workload larger than its queue may ever hold is refused at once, naming the limit, instead
// of waiting forever (in a StrictFIFO queue it would hold back everything behind it).
TEST_F(AdmissionTest, MoreThanTheQueueMayEverHoldIsInfeasible) {
  Make(Nodes(2, 8), {Leaf("a", 4, /*borrowing=*/2), Leaf("b", 4)});
  const int big = Submit(Gpus("a-big", "a", 8));
  EXPECT_EQ(adm_->phase(big), Phase::kInfeasible);
  EXPECT_EQ(
      adm_->reason(big),
      "asks for 8 GPUs; of gpu, queue a (guarantee 4 + borrowing limit 2) may hold at most 6");
  const int fits = Submit(Gpus("a-six", "a", 6));
  EXPECT_EQ(adm_->phase(fits), Phase::kPending);
  // Both wait in a (as Kueue counts inadmissible workloads as pending).
  EXPECT_EQ(adm_->pending_count(adm_->QueueIndex("a")), 2);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->pending_count(adm_->QueueIndex("a")), 1);
  EXPECT_EQ(adm_->phase(fits), Phase::kAdmitted) << adm_->reason(fits);
  // The top of the tree holds the guarantees of all: 8 here, on a fleet of 16 (2 pods of 5
  // GPUs fit the fleet, not the tree).
  const int huge = Submit(Gpus("b-ten", "b", 5, 0, /*pods=*/2));
  EXPECT_EQ(adm_->phase(huge), Phase::kInfeasible);
  EXPECT_NE(
      adm_->reason(huge).find("queue org (its guarantee, the top of the tree) may hold at most 8"),
      std::string::npos)
      << adm_->reason(huge);
  // With two flavours it could use, the limit of each.
  QueueSpec two = Plain("a");
  two.quotas["h100"] = QuotaSpec{2000, 0, {}};
  two.quotas["a100"] = QuotaSpec{4000, 0, {}};
  Make(H100AndA100(), {two}, {}, PerModelFlavours());
  const int six = Submit(Gpus("six", "a", 3, 0, /*pods=*/2));
  EXPECT_EQ(adm_->phase(six), Phase::kInfeasible);
  EXPECT_NE(adm_->reason(six).find("of h100, queue a (guarantee 2 + borrowing limit 0) may hold "
                                   "at most 2"),
            std::string::npos)
      << adm_->reason(six);
  EXPECT_NE(adm_->reason(six).find("of a100, queue a (guarantee 4 + borrowing limit 0) may hold "
                                   "at most 4"),
            std::string::npos)
      << adm_->reason(six);
}

// A gang that no domain of the level it requires could hold, even on an empty fleet, is refused
// at once, as one too big for the fleet is: waiting, it would hold a StrictFIFO queue forever
// (a user-style review's case). Preferred, it waits and runs across domains.
TEST_F(AdmissionTest, AGangNoRequiredDomainCouldHoldIsInfeasible) {
  Make(Nodes(2, 8), {Leaf("a", 16)});
  Workload gang = Gpus("big", "a", 8, 0, /*pods=*/2);
  gang.gang = true;
  gang.topology = {TopologyLevel::kNvlinkDomain, /*required=*/true};
  const int big = Submit(gang);
  EXPECT_EQ(adm_->phase(big), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(big),
            "gang needs 16 GPUs in one nvlink domain; the largest has 8 GPUs in all");
  // Its pods go together without `gang: true` too, and are not called a gang (a user-style
  // trial read "gang needs" of one written `gang: false`).
  gang.name = WorkloadId("together");
  gang.gang = false;
  const int together = Submit(gang);
  EXPECT_EQ(adm_->phase(together), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(together),
            "its pods together need 16 GPUs in one nvlink domain; the largest has 8 GPUs in all");
  gang.name = WorkloadId("spread");
  gang.gang = true;
  gang.topology.required = false;
  const int spread = Submit(gang);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(spread), Phase::kAdmitted) << adm_->reason(spread);
}

// GPUs enough in a domain are not enough: its nodes must take the pods' shape. Three 5-GPU pods
// that require one leaf of two 8-GPU nodes (16 GPUs) never fit, one such pod a node: refused
// at once (a trial's waited "for now" for ever, and held a StrictFIFO queue); three 4-GPU pods
// fit there.
TEST_F(AdmissionTest, AGangWhosePodsNoRequiredDomainHoldsByShapeIsInfeasible) {
  Fleet fleet = Nodes(4, 8);
  for (int n = 0; n < 4; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
  Make(fleet, {Leaf("a", 32)});
  const auto three_in_a_leaf = [&](const std::string& name, int gpus) {
    Workload gang = Gpus(name, "a", gpus, 0, /*pods=*/3);
    gang.gang = true;
    gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
    return Submit(gang);
  };
  const int fives = three_in_a_leaf("fives", 5);
  EXPECT_EQ(adm_->phase(fives), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(fives),
            "gang needs 3 pods of 5 GPUs in one leaf domain; at most 2 fit in one, even empty "
            "(leaf-1)");
  const int fours = three_in_a_leaf("fours", 4);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(fours), Phase::kAdmitted) << adm_->reason(fours);
}

// A gang that requires one leaf, where each leaf's nodes hold one of a's 1-GPU workloads: two
// moves clear a leaf. a's disruption budget of 0 is said, "lets none of its work be moved" (a
// trial's gang was told nothing of consolidation then); of 1, the two move one at a time (a
// later trial's gang waited for good beside 12 free GPUs, told each plan moved more at once).
TEST_F(AdmissionTest, AGangsConsolidationHeldByADisruptionBudgetSaysHow) {
  for (int budget : {-1, 0, 1}) {
    SCOPED_TRACE(budget);
    AdmissionConfig config;
    config.consolidation = true;
    Fleet fleet = Nodes(4, 4);
    for (int n = 0; n < 4; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
    Make(fleet, {Leaf("a", 4, std::nullopt, std::nullopt, budget), Leaf("b", 8)}, {}, config);
    for (int n = 0; n < 4; ++n) {
      Assignment on;
      on.node = n;
      on.devices.push_back({0, 1000, 80 * 1024, -1});
      ASSERT_TRUE(adm_->Restore(Gpus("a" + std::to_string(n), "a", 1), {on}, 0).ok());
    }
    Workload gang = Gpus("g", "b", 4, 0, /*pods=*/2);
    gang.gang = true;
    gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
    const int g = Submit(gang, 10);
    const CycleResult r = adm_->Cycle(11, 1000);
    if (budget < 0) {
      EXPECT_EQ(r.evicted.size(), 2u) << adm_->reason(g);
      continue;
    }
    if (budget == 1) {  // (one move now, the other as the first stops)
      ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(g);
      EXPECT_NE(adm_->reason(g).find("; 1 more to go as the disruption budget of queue a allows"),
                std::string::npos)
          << adm_->reason(g);
      adm_->Terminated(r.evicted[0].victim, 12);
      const CycleResult second = adm_->Cycle(13, 1000);
      ASSERT_EQ(second.evicted.size(), 1u) << adm_->reason(g);
      adm_->Terminated(second.evicted[0].victim, 14);
      adm_->Cycle(15, 1000);
      EXPECT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
      continue;
    }
    EXPECT_TRUE(r.evicted.empty()) << adm_->reason(g);
    EXPECT_NE(adm_->reason(g).find("no consolidation plan: queue a's disruptionBudget (0) lets "
                                   "none of its work be moved"),
              std::string::npos)
        << adm_->reason(g);
  }
}

// ... and staged however many domains the first pass tried (a review: with three leaves, each
// of two nodes with one of a's 1-GPU workloads, the first pass spent the cycle's plans and the
// gang waited for good).
TEST_F(AdmissionTest, AStagedConsolidationHasPlansOfItsOwn) {
  for (int leaves : {2, 3, 5}) {
    SCOPED_TRACE(leaves);
    AdmissionConfig config;
    config.consolidation = true;
    Fleet fleet = Nodes(2 * leaves, 4);
    for (int n = 0; n < 2 * leaves; ++n) fleet.nodes[n].leaf = "leaf-" + std::to_string(n / 2);
    Make(fleet, {Leaf("a", 16, std::nullopt, std::nullopt, /*budget=*/1), Leaf("b", 8)}, {},
         config);
    for (int n = 0; n < 2 * leaves; ++n)
      ASSERT_TRUE(adm_->Restore(Gpus("a" + std::to_string(n), "a", 1), OnGpus(n, {0}), 0).ok());
    Workload gang = Gpus("g", "b", 4, 0, /*pods=*/2, /*gang=*/true);
    gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
    const int g = Submit(gang, 10);
    const CycleResult r = adm_->Cycle(11, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(g);
    EXPECT_NE(adm_->reason(g).find("; 1 more to go as the disruption budget of queue a allows"),
              std::string::npos)
        << adm_->reason(g);
    EXPECT_EQ(adm_->reason(g).find("no consolidation plan"), std::string::npos) << adm_->reason(g);
  }
}

// Work a consolidation moves keeps the place it was moved to: held while it stops, so newer
// work of the same priority does not take it (a user-style trial: a newer 5-GPU job took the
// room in the grace period, and the two moved workloads waited for good, "fits elsewhere"
// notwithstanding). x1 (3 GPUs) and x2 (2) on n1, three 1-GPU jobs on n0; big needs 8.
TEST_F(AdmissionTest, WorkAConsolidationMovesKeepsThePlaceItWasMovedTo) {
  AdmissionConfig config;
  config.consolidation = true;
  Make(Nodes(2, 8), {Leaf("qa", 16)}, {}, config);
  const auto x1 = adm_->Restore(Gpus("x1", "qa", 3), OnGpus(1, {0, 1, 2}), 0);
  const auto x2 = adm_->Restore(Gpus("x2", "qa", 2), OnGpus(1, {3, 4}), 0);
  ASSERT_TRUE(x1.ok() && x2.ok());
  for (int d = 0; d < 3; ++d)
    ASSERT_TRUE(adm_->Restore(Gpus("s" + std::to_string(d), "qa", 1), OnGpus(0, {d}), 0).ok());
  const int big = Submit(Gpus("big", "qa", 8), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(big);
  EXPECT_EQ(r.evicted[0].basis, Eviction::Basis::kMove);
  const int z = Submit(Gpus("z", "qa", 5), 12);
  adm_->Cycle(13, 1000);
  EXPECT_EQ(adm_->phase(z), Phase::kPending) << "z took the room x1 and x2 were moved to";
  for (const Eviction& ev : r.evicted) adm_->Terminated(ev.victim, 41);
  adm_->Cycle(42, 1000);
  EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  EXPECT_EQ(adm_->phase(*x1), Phase::kAdmitted) << adm_->reason(*x1);
  EXPECT_EQ(adm_->phase(*x2), Phase::kAdmitted) << adm_->reason(*x2);
  EXPECT_EQ(adm_->phase(z), Phase::kPending);
}

// A staged consolidation whose moved work has stopped, while the budget is spent on others'
// moves at that moment, keeps the room that work freed (as Preempt keeps its stopped victims'):
// a review saw the room go back to the moved work, which the next stage moved again. Two leaf
// gangs, each planned where four of a's 1-GPU workloads are, under a's budget of 2.
TEST_F(AdmissionTest, AStagedConsolidationHoldsTheRoomItsMovedWorkFreed) {
  AdmissionConfig config;
  config.consolidation = true;
  Fleet fleet = Nodes(7, 4);
  for (int n = 0; n < 7; ++n) fleet.nodes[n].leaf = "leaf-" + std::to_string(n < 4 ? n / 2 : n);
  Make(fleet, {Leaf("a", 10, std::nullopt, std::nullopt, /*budget=*/2), Leaf("b", 16)}, {}, config);
  std::vector<int> a_ids;
  for (int n = 0; n < 4; ++n)
    for (int d = 0; d < 2; ++d) {
      auto id = adm_->Restore(Gpus("a" + std::to_string(n) + std::to_string(d), "a", 1),
                              OnGpus(n, {d}), 0);
      ASSERT_TRUE(id.ok());
      a_ids.push_back(*id);
    }
  Workload gang = Gpus("g1", "b", 4, 0, /*pods=*/2, /*gang=*/true);
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g1 = Submit(gang, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(g1);
  adm_->Terminated(r.evicted[0].victim, 12);
  const int g1_left = r.evicted[1].victim;
  gang.name = WorkloadId("g2");
  const int g2 = Submit(gang, 12);
  r = adm_->Cycle(13, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(g2);
  std::vector<int> stopping = {g1_left, r.evicted[0].victim};
  int moves = 3;
  for (double t = 14;
       t < 60 && !(adm_->phase(g1) == Phase::kAdmitted && adm_->phase(g2) == Phase::kAdmitted);
       t += 2) {
    for (int v : stopping) adm_->Terminated(v, t);
    r = adm_->Cycle(t + 1, 1000);
    stopping.clear();
    for (const auto& ev : r.evicted) stopping.push_back(ev.victim);
    moves += static_cast<int>(r.evicted.size());
    if (t == 14) {  // (g1 goes on with its last two, which spend the budget)
      EXPECT_TRUE(adm_->nominated(g2)) << adm_->reason(g2);
      EXPECT_NE(adm_->reason(g2).find("holding the room its moved work freed"), std::string::npos)
          << adm_->reason(g2);
    }
  }
  EXPECT_EQ(adm_->phase(g1), Phase::kAdmitted) << adm_->reason(g1);
  EXPECT_EQ(adm_->phase(g2), Phase::kAdmitted) << adm_->reason(g2);
  EXPECT_EQ(moves, 8);  // (each of a's moved once)
}

// Moves held by the budgets of two queues name both (a review: only the last was named).
TEST_F(AdmissionTest, MovesHeldByTwoQueuesBudgetsNameBoth) {
  AdmissionConfig config;
  config.consolidation = true;
  Fleet fleet = Nodes(6, 4);
  for (int n = 0; n < 6; ++n) fleet.nodes[n].leaf = "leaf-" + std::to_string(n < 4 ? n / 2 : n);
  Make(fleet,
       {Leaf("a", 4, std::nullopt, std::nullopt, /*budget=*/1),
        Leaf("c", 4, std::nullopt, std::nullopt, /*budget=*/1), Leaf("b", 8)},
       {}, config);
  SubmitOptions pinned;
  pinned.preemptible = false;
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(adm_->Restore(Gpus("a" + std::to_string(d), "a", 1), OnGpus(0, {d}), 0).ok());
    ASSERT_TRUE(adm_->Restore(Gpus("c" + std::to_string(d), "c", 1), OnGpus(1, {d}), 0).ok());
  }
  ASSERT_TRUE(adm_->Restore(Gpus("p2", "a", 1), OnGpus(2, {0}), 0, pinned).ok());
  ASSERT_TRUE(adm_->Restore(Gpus("p3", "c", 1), OnGpus(3, {0}), 0, pinned).ok());
  Workload gang = Gpus("g", "b", 4, 0, /*pods=*/2, /*gang=*/true);
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(gang, 10);
  const CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(r.evicted.size(), 2u) << adm_->reason(g);
  EXPECT_NE(adm_->reason(g).find("; 2 more to go as the disruption budgets of queues "),
            std::string::npos)
      << adm_->reason(g);
  EXPECT_TRUE(adm_->reason(g).find("queues a and c allow") != std::string::npos ||
              adm_->reason(g).find("queues c and a allow") != std::string::npos)
      << adm_->reason(g);
}

// Work in the way that is never moved is named where moving it would have made the room (a
// user-style trial's gang was told nothing of consolidation beside 15 free GPUs, non-preemptible
// work holding the one it lacked): a leaf gang as above, and a 4-GPU workload on two nodes of
// 4, each with two of a's 1-GPU workloads.
TEST_F(AdmissionTest, AConsolidationNamesTheWorkInItsWayThatNeverMoves) {
  SubmitOptions pinned;
  pinned.preemptible = false;
  for (bool scoped : {true, false}) {
    SCOPED_TRACE(scoped ? "a gang that needs one leaf" : "one 4-GPU pod");
    AdmissionConfig config;
    config.consolidation = true;
    Fleet fleet = Nodes(scoped ? 4 : 2, 4);
    for (int n = 0; n < 4 && scoped; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
    Make(fleet, {Leaf("a", 4), Leaf("b", 8)}, {}, config);
    for (int i = 0; i < 4; ++i) {
      const int node = scoped ? i : i / 2, gpu = scoped ? 0 : i % 2;
      ASSERT_TRUE(
          adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), OnGpus(node, {gpu}), 0, pinned)
              .ok());
    }
    Workload w = Gpus("g", "b", 4, 0, /*pods=*/scoped ? 2 : 1);
    w.gang = scoped;
    if (scoped) w.topology = {TopologyLevel::kLeaf, /*required=*/true};
    const int g = Submit(w, 10);
    EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(g);
    const std::string why = adm_->reason(g);
    const size_t at = why.find("; no consolidation plan: the work in its way is not moved (a/a");
    EXPECT_NE(at, std::string::npos) << why;
    EXPECT_NE(why.find(", not preemptible)", at), std::string::npos) << why;
  }
}

// Only the GPUs a gang's pods could use count: a leaf of 4 H100s and 4 A100s never holds a gang
// of 8 H100s, though the fleet has 8 (a user-style trial saw one shown first in line, forever),
// but holds one of 8 of either model.
TEST_F(AdmissionTest, AGangCountsOnlyTheGpuModelsItMayUseInItsDomain) {
  Fleet fleet = H100AndA100();
  for (Node& n : fleet.nodes) n.leaf = "leaf-1";
  fleet.nodes.push_back(GpuNode("n1", 4));  // (in a leaf of its own: 8 H100s in the fleet)
  Make(fleet, {Leaf("a", 16)});
  Workload gang = Gpus("h100s", "a", 4, 0, /*pods=*/2);
  gang.gang = true;
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  gang.pod_sets[0].device.models = {"H100"};
  const int h100s = Submit(gang);
  EXPECT_EQ(adm_->phase(h100s), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(h100s),
            "gang needs 8 GPUs in one leaf domain; the largest has 4 GPUs in all of the models "
            "its pods may use (a MIG-partitioned GPU only for a slice)");
  gang.name = WorkloadId("any");
  gang.pod_sets[0].device.models.clear();
  const int any = Submit(gang);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(any), Phase::kAdmitted) << adm_->reason(any);
}

// A gang whose topology is required evicts only where its victims make room for all its pods
// in one domain (a trial's gang of 3 nodes in one leaf evicted work in a leaf of 2 nodes,
// gaining nothing, then held that room from borrowers). leaf-1: n0-n2, its own queue's work on
// n0 and n2 (not its to take); leaf-2: n3, n4 (and n5), b's borrowed 4 GPUs on n3.
TEST_F(AdmissionTest, ARequiredTopologyGangEvictsOnlyForRoomInOneDomain) {
  for (int leaf2 : {2, 3}) {
    SCOPED_TRACE(std::to_string(leaf2) + " nodes in leaf-2");
    Fleet fleet = Nodes(3 + leaf2, 8);
    for (int n = 0; n < 3 + leaf2; ++n) fleet.nodes[n].leaf = n < 3 ? "leaf-1" : "leaf-2";
    Make(fleet, {Leaf("a", 8 * (3 + leaf2) - 8), Leaf("b", 0)});
    SubmitOptions pinned;
    pinned.preemptible = false;
    ASSERT_TRUE(adm_->Restore(Gpus("a0", "a", 2), OnGpus(0, {0, 1}), 0, pinned).ok());
    ASSERT_TRUE(adm_->Restore(Gpus("a2", "a", 4), OnGpus(2, {0, 1, 2, 3}), 0, pinned).ok());
    auto b = adm_->Restore(Gpus("b", "b", 4), OnGpus(3, {0, 1, 2, 3}), 0);
    ASSERT_TRUE(b.ok());
    Workload gang = Gpus("g", "a", 8, 0, /*pods=*/3, /*gang=*/true);
    gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
    const int g = Submit(gang, 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
    std::vector<int> evicted;
    for (const Eviction& v : r.evicted) evicted.push_back(v.victim);
    EXPECT_EQ(evicted, leaf2 == 3 ? std::vector<int>{*b} : std::vector<int>{}) << adm_->reason(g);
  }
}

// The hold on borrowing keeps to where the work it is for could run (a trial's borrower waited
// 17 virtual minutes beside idle GPUs for a gang that needs one leaf of three 8-GPU nodes):
// leaf-1 is n0-n2 (a's pinned work on n0), leaf-2 is n3, n4, too small for the gang. A borrower
// that could use either starts in leaf-2, though best fit would pick n0; one whose selector
// leaves it only leaf-1 waits for the gang. With the gang gone, best fit picks n0 again.
TEST_F(AdmissionTest, TheHoldForAGangThatNeedsOneLeafKeepsToTheLeavesThatCouldHoldIt) {
  for (bool gang : {true, false}) {
    SCOPED_TRACE(gang ? "a gang waits" : "no gang waits");
    MakeTwoLeaves();
    int g = -1;
    if (gang) {
      Workload w = Gpus("g", "a", 8, 0, /*pods=*/3, /*gang=*/true);
      w.topology = {TopologyLevel::kLeaf, /*required=*/true};
      g = Submit(w, 10);
    }
    const int anywhere = Submit(Gpus("b-any", "b", 1), 10);
    Workload only_leaf1 = Gpus("b-leaf1", "b", 1);
    only_leaf1.pod_sets[0].nodes.labels["leaf"] = "1";
    const int leaf1 = Submit(only_leaf1, 10);
    adm_->Cycle(11, 1000);
    ASSERT_EQ(adm_->phase(anywhere), Phase::kAdmitted) << adm_->reason(anywhere);
    if (!gang) {
      EXPECT_EQ(adm_->assignments(anywhere)[0].node, 0);
      EXPECT_EQ(adm_->phase(leaf1), Phase::kAdmitted) << adm_->reason(leaf1);
      continue;
    }
    EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
    EXPECT_GE(adm_->assignments(anywhere)[0].node, 3);
    EXPECT_EQ(adm_->phase(leaf1), Phase::kPending);
    EXPECT_NE(adm_->reason(leaf1).find("waiting: it would borrow, and work of queue a within its "
                                       "guarantee waits for room"),
              std::string::npos)
        << adm_->reason(leaf1);
    // Two 8-GPU borrowers: one fills leaf-2's empty node; the other finds no room off leaf-1
    // and is held, though leaf-1 has room for it.
    const std::vector<int> eights = {Submit(Gpus("b-8a", "b", 8), 12),
                                     Submit(Gpus("b-8b", "b", 8), 12)};
    adm_->Cycle(13, 1000);
    EXPECT_EQ(adm_->phase(eights[0]), Phase::kAdmitted) << adm_->reason(eights[0]);
    ASSERT_EQ(adm_->phase(eights[1]), Phase::kPending);
    EXPECT_NE(adm_->reason(eights[1]).find("waiting: it would borrow, and work of queue a"),
              std::string::npos)
        << adm_->reason(eights[1]);
  }
}

// A reclaim of MIG slices that waits for its victim's minimum runtime says so (a trial read only
// "the fleet has no room", with three of the slices it needs held by a victim within it).
TEST_F(AdmissionTest, AMigReclaimWaitingForAMinimumRuntimeSaysSo) {
  Fleet fleet = Nodes(1, 8);
  for (Device& d : fleet.nodes[0].devices)
    d.mig_slices = {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"};
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  Make(fleet, {Leaf("a", 2), Leaf("b", 4), Leaf("c", 2)});
  auto slices = [](const std::string& name, const std::string& queue, int pods) {
    return MigSlices(name, queue, pods, "3g.40gb");
  };
  const int a = Submit(slices("a3", "a", 3), 0);
  SubmitOptions young;
  young.min_runtime_s = 600;
  const int c = Submit(slices("c5", "c", 5), 0, young);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(a), Phase::kAdmitted) << adm_->reason(a);
  ASSERT_EQ(adm_->phase(c), Phase::kAdmitted) << adm_->reason(c);
  adm_->PodsReady(a);
  adm_->PodsReady(c);
  const int b = Submit(slices("b2", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(b), Phase::kPending);
  EXPECT_NE(adm_->reason(b).find("1 possible victim (c/c5) is within its minimum runtime"),
            std::string::npos)
      << adm_->reason(b);
  r = adm_->Cycle(602, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(b);
  EXPECT_EQ(r.evicted[0].victim, c);
}

// A reclaim of a MIG slice takes a slice of its profile, not the cheaper slices of others that
// free nothing it can use (a trial's 2g.20gb slice, within its queue's guarantee, waited for
// good: the lender's two 1g slices were tried first, and after them taking its 2g slice would
// have put it below its guarantee).
TEST_F(AdmissionTest, AMigReclaimTakesASliceOfItsProfile) {
  Fleet fleet = Nodes(1, 1);
  fleet.nodes[0].devices[0].mig_slices = {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"};
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  Make(fleet, {Leaf("a", 0.5), Leaf("b", 0.5)});
  std::map<std::string, int> b;
  for (const std::string profile : {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"})
    b[profile] = Submit(MigSlices("b-" + profile, "b", 1, profile), 0);
  adm_->Cycle(1, 1000);
  for (const auto& [profile, id] : b) ASSERT_EQ(adm_->phase(id), Phase::kAdmitted) << profile;
  const int a = Submit(MigSlices("a-2g", "a", 1, "2g.20gb"), 10);
  const CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(a);
  EXPECT_EQ(r.evicted[0].victim, b["2g.20gb"]);
  adm_->Terminated(r.evicted[0].victim, 20);
  adm_->Cycle(21, 1000);
  EXPECT_EQ(adm_->phase(a), Phase::kAdmitted) << adm_->reason(a);
}

// MIG slices are counted by profile: a gang of more 3g.40gb slices than the fleet has is refused
// at once (a user-style trial's gang of nine, on a fleet of eight, waited for ever, first in
// line, holding another queue's borrowers back), and so is one that needs slices and GPUs
// without MIG in one NVLink domain where no domain has both.
TEST_F(AdmissionTest, AGangOfMoreMigSlicesThanTheFleetHasIsInfeasible) {
  Fleet fleet = Nodes(2, 4);
  for (Device& d : fleet.nodes[0].devices) d.mig_slices = {"3g.40gb", "2g.20gb", "1g.10gb"};
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  Make(fleet, {Leaf("a", 8)});
  auto slices = [](const std::string& name, int pods, const std::string& profile) {
    Workload w = MigSlices(name, "a", pods, profile);
    w.gang = true;
    return w;
  };
  const int five = Submit(slices("five", 5, "3g.40gb"));
  EXPECT_EQ(adm_->phase(five), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(five),
            "needs 5 pods of a 3g.40gb MIG slice; the whole fleet, even empty, holds only 4");
  const int four = Submit(slices("four", 4, "3g.40gb"));
  Workload mixed = slices("mixed", 2, "1g.10gb");
  mixed.pod_sets.push_back(Gpus("x", "a", 1).pod_sets[0]);
  mixed.pod_sets[1].name = "whole";
  mixed.topology = {TopologyLevel::kNvlinkDomain, /*required=*/true};
  const int both = Submit(mixed);
  EXPECT_EQ(adm_->phase(both), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(both),
            "gang needs 284m GPUs of MIG slices (1g.10gb) and 1 GPU without MIG in one nvlink "
            "domain; no domain has both (the most slices in one: 568m GPUs; the most GPUs "
            "without MIG in one: 4), counting GPUs of the models its pods may use");
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(four), Phase::kAdmitted) << adm_->reason(four);
}

// The hold for a gang of MIG slices that needs one leaf counts a leaf's slices of its profile
// by their compute, not its MIG GPUs whole: leaf-2's three GPUs in 3g.40gb halves hold six
// slices, 2.568 GPUs, short of the gang's seven (2.996), though three GPUs are more; a borrower's
// slice starts there while the gang waits for leaf-1 (a's pinned work holds two of its eight).
TEST_F(AdmissionTest, TheHoldForAGangOfMigSlicesCountsALeafsSlices) {
  Fleet fleet = Nodes(2, 4);
  fleet.nodes[0].leaf = "leaf-1";
  fleet.nodes[1].leaf = "leaf-2";
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < 4; ++d)
      if (n == 0 || d < 3) fleet.nodes[n].devices[d].mig_slices = {"3g.40gb", "3g.40gb"};
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  config.consolidation = false;
  Make(fleet, {Leaf("a", 4), Leaf("b", 0)}, {}, config);
  SubmitOptions pinned;
  pinned.preemptible = false;
  for (int slice = 0; slice < 2; ++slice) {
    Assignment a;
    a.node = 0;
    a.devices.push_back({0, MigSliceMilli(3), 0, slice});
    ASSERT_TRUE(
        adm_->Restore(MigSlices("a" + std::to_string(slice), "a", 1, "3g.40gb"), {a}, 0, pinned)
            .ok());
  }
  Workload gang = MigSlices("g", "a", 7, "3g.40gb");
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(gang, 10);
  const int b = Submit(MigSlices("b-slice", "b", 1, "3g.40gb"), 10);
  adm_->Cycle(11, 1000);
  EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
  ASSERT_EQ(adm_->phase(b), Phase::kAdmitted) << adm_->reason(b);
  EXPECT_EQ(adm_->assignments(b)[0].node, 1);
}

// A gang of MIG slices that needs one leaf reclaims in one: each leaf (two nodes of two H100s
// in 3g.40gb halves, eight slices) has three of b's borrowed slices and five free, the gang
// needs six. One of b's slices in one leaf is taken back and the gang starts there (a node's free
// GPUs leave MIG GPUs out: placement and reclaim counted no free room in any leaf, and it waited
// for ever).
TEST_F(AdmissionTest, AGangOfMigSlicesThatNeedsOneLeafReclaimsInOne) {
  Fleet fleet = Nodes(4, 2);
  for (int n = 0; n < 4; ++n) {
    fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
    for (Device& d : fleet.nodes[n].devices) d.mig_slices = {"3g.40gb", "3g.40gb"};
  }
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  config.consolidation = false;
  Make(fleet, {Leaf("a", 4), Leaf("b", 0)}, {}, config);
  auto slices = [](const std::string& name, const std::string& queue, int pods) {
    return MigSlices(name, queue, pods, "3g.40gb");
  };
  const int64_t slice = MigSliceMilli(3);
  std::vector<int> borrowed;
  // b: slice 0 of GPU 0 on every node, and slice 0 of GPU 1 on n0 and n2.
  for (auto [node, gpu] :
       std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {2, 0}, {3, 0}, {2, 1}}) {
    Assignment a;
    a.node = node;
    a.devices.push_back({gpu, slice, 0, 0});
    auto id = adm_->Restore(slices("b" + std::to_string(borrowed.size()), "b", 1), {a}, 0);
    ASSERT_TRUE(id.ok()) << id.status().message();
    borrowed.push_back(*id);
  }
  Workload gang = slices("g", "a", 6);
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(gang, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(g);
  const int victim = r.evicted[0].victim;
  const int victim_leaf = adm_->assignments(victim)[0].node < 2 ? 0 : 1;
  adm_->Finish(victim, 12);
  adm_->Cycle(13, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  const int leaf = adm_->assignments(g)[0].node < 2 ? 0 : 1;
  for (const Assignment& a : adm_->assignments(g)) EXPECT_EQ(a.node < 2 ? 0 : 1, leaf);
  EXPECT_EQ(victim_leaf, leaf);
}

// ... and to the GPU models that work may use: with a's H100-only work waiting for the H100s,
// b borrows an A100, and work that may use either model borrows only an A100; work that needs
// an H100 waits.
TEST_F(AdmissionTest, TheHoldKeepsToTheModelsTheWaitingWorkMayUse) {
  Make(H100AndA100(), {Leaf("a", 8), Leaf("b", 0)});
  SubmitOptions pinned;
  pinned.preemptible = false;
  ASSERT_TRUE(adm_->Restore(Gpus("a0", "a", 2), OnGpus(0, {0, 1}), 0, pinned).ok());
  auto on = [](Workload w, const std::string& model) {
    if (!model.empty()) w.pod_sets[0].device.models = {model};
    return w;
  };
  const int waiting = Submit(on(Gpus("a-h100", "a", 4), "H100"), 10);
  const int a100 = Submit(on(Gpus("b-a100", "b", 1), "A100"), 10);
  const int either = Submit(on(Gpus("b-either", "b", 1), ""), 10);
  const int h100 = Submit(on(Gpus("b-h100", "b", 1), "H100"), 10);
  adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(waiting), Phase::kPending) << adm_->reason(waiting);
  EXPECT_EQ(adm_->phase(a100), Phase::kAdmitted) << adm_->reason(a100);
  ASSERT_EQ(adm_->phase(either), Phase::kAdmitted) << adm_->reason(either);
  EXPECT_EQ(adm_->assignments(either)[0].node, 1);
  EXPECT_EQ(adm_->phase(h100), Phase::kPending);
  EXPECT_NE(adm_->reason(h100).find("waiting: it would borrow"), std::string::npos)
      << adm_->reason(h100);
}

// A borrower held back names the queue whose waiting work could use its nodes: a waits for
// H100s and c for A100s (each behind b's borrowed work in its minimum runtime), so b's A100
// work is held for c, its H100 work for a; work that may use either, with no room left off
// them, is held too.
TEST_F(AdmissionTest, AHeldBorrowerNamesTheQueueWhoseWorkCouldUseItsNodes) {
  Fleet fleet = H100AndA100();
  Make(fleet, {Leaf("a", 4), Leaf("b", 0), Leaf("c", 4)});
  SubmitOptions young;
  young.min_runtime_s = 600;
  ASSERT_TRUE(adm_->Restore(Gpus("b-on-h100", "b", 3), OnGpus(0, {0, 1, 2}), 0, young).ok());
  ASSERT_TRUE(adm_->Restore(Gpus("b-on-a100", "b", 3), OnGpus(1, {0, 1, 2}), 0, young).ok());
  auto on = [](Workload w, const std::string& model) {
    if (!model.empty()) w.pod_sets[0].device.models = {model};
    return w;
  };
  const int a = Submit(on(Gpus("a-h100", "a", 2), "H100"), 10);
  const int c = Submit(on(Gpus("c-a100", "c", 2), "A100"), 10);
  const int h100 = Submit(on(Gpus("b-h100", "b", 1), "H100"), 10);
  const int a100 = Submit(on(Gpus("b-a100", "b", 1), "A100"), 10);
  const int either = Submit(on(Gpus("b-either", "b", 1), ""), 10);
  adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(a), Phase::kPending) << adm_->reason(a);
  ASSERT_EQ(adm_->phase(c), Phase::kPending) << adm_->reason(c);
  for (const auto& [id, queue] :
       std::vector<std::pair<int, std::string>>{{h100, "a"}, {a100, "c"}, {either, "a"}}) {
    EXPECT_EQ(adm_->phase(id), Phase::kPending) << adm_->reason(id);
    EXPECT_NE(adm_->reason(id).find("waiting: it would borrow, and work of queue " + queue +
                                    " within its guarantee waits for room"),
              std::string::npos)
        << adm_->reason(id);
  }
}

// ... and elastic work held back starts with as many pods as fit off the held nodes (a trial's
// 2-pod job with minCount 1 waited whole beside the room for one): leaf-2 has one free node.
TEST_F(AdmissionTest, ElasticWorkHeldBackStartsInPartOffTheHeldNodes) {
  MakeTwoLeaves();
  ASSERT_TRUE(adm_->Restore(Gpus("b0", "b", 8), OnGpus(3, {0, 1, 2, 3, 4, 5, 6, 7}), 0).ok());
  Workload w = Gpus("g", "a", 8, 0, /*pods=*/3, /*gang=*/true);
  w.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(w, 10);
  Workload elastic = Gpus("b-elastic", "b", 8, 0, /*pods=*/2);
  elastic.pod_sets[0].min_count = 1;
  const int el = Submit(elastic, 10);
  adm_->Cycle(11, 1000);
  EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
  ASSERT_EQ(adm_->phase(el), Phase::kAdmitted) << adm_->reason(el);
  EXPECT_EQ(adm_->pod_counts(el), std::vector<int>{1});
  EXPECT_EQ(adm_->assignments(el)[0].node, 4);
}

// ... and elastic work grows past that hold where none of its pods could run in the room held:
// b's elastic workload, kept to leaf-2, takes the 4 GPUs that free there while the gang waits.
TEST_F(AdmissionTest, ElasticWorkGrowsWhereTheHoldForAGangCannotReach) {
  MakeTwoLeaves(/*elastic_growth=*/true);
  ASSERT_TRUE(adm_->Restore(Gpus("b0", "b", 8), OnGpus(3, {0, 1, 2, 3, 4, 5, 6, 7}), 0).ok());
  auto b1 = adm_->Restore(Gpus("b1", "b", 4), OnGpus(4, {0, 1, 2, 3}), 0);
  ASSERT_TRUE(b1.ok());
  Workload elastic = Gpus("b-elastic", "b", 1, 0, /*pods=*/8, /*gang=*/true);
  elastic.pod_sets[0].min_count = 2;
  elastic.pod_sets[0].nodes.labels["leaf"] = "2";
  const int el = Submit(elastic, 1);
  adm_->Cycle(2, 1000);
  ASSERT_EQ(adm_->phase(el), Phase::kAdmitted) << adm_->reason(el);
  adm_->PodsReady(el);
  ASSERT_EQ(adm_->pod_counts(el), std::vector<int>{4});
  Workload w = Gpus("g", "a", 8, 0, /*pods=*/3, /*gang=*/true);
  w.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(w, 10);
  adm_->Finish(*b1, 10);
  const CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
  EXPECT_EQ(r.grown, std::vector<int>{el}) << adm_->growth_why(el);
  EXPECT_EQ(adm_->pod_counts(el), std::vector<int>{8});
}

// Elastic work its quota refuses at its fewest pods too says which quota does there, where its
// full size was refused by another (a trial's read "queue team-a over its borrowing limit" for
// all its pods, where at its minCount team-a was within and the root's limit held it): a may
// hold 10, org 20; a holds 4, b 12.
TEST_F(AdmissionTest, ElasticWorkRefusedAtItsFewestPodsSaysWhichQuotaHoldsThem) {
  AdmissionConfig config;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16'000, int64_t{4'000}, {}};
  config.queues = {org, Leaf("a", 4, /*borrowing=*/6), Leaf("b", 12)};
  MakeTree(Nodes(8, 4), config, {"a", "b"});
  ASSERT_TRUE(adm_->Restore(Gpus("a0", "a", 4), OnGpus(0, {0, 1, 2, 3}), 0).ok());
  for (int n = 1; n <= 3; ++n)
    ASSERT_TRUE(
        adm_->Restore(Gpus("b" + std::to_string(n), "b", 4), OnGpus(n, {0, 1, 2, 3}), 0).ok());
  Workload w = Gpus("el", "a", 2, 0, /*pods=*/6);
  w.pod_sets[0].min_count = 3;
  const int el = Submit(w, 1);
  adm_->Cycle(2, 1000);
  ASSERT_EQ(adm_->phase(el), Phase::kPending) << adm_->reason(el);
  EXPECT_NE(adm_->reason(el).find("queue a over its borrowing limit"), std::string::npos)
      << adm_->reason(el);
  EXPECT_NE(adm_->reason(el).find("; at its fewest pods (3) too: queue org over its borrowing "
                                  "limit for gpu: 22/20"),
            std::string::npos)
      << adm_->reason(el);
  adm_->Cycle(3, 1000);  // (said once)
  const std::string said = adm_->reason(el);
  EXPECT_EQ(said.find("; at its fewest pods"), said.rfind("; at its fewest pods")) << said;
}

// Elastic work that requires one domain grows in the domain it runs in, and not across it (a
// trial's gang that required one leaf stayed at 2 of 4 pods beside a free node of its leaf,
// for good): leaf-1 holds two of its 6-GPU pods, leaf-2 one; a filler in leaf-1 ends, and it
// grows by one pod there, not by two with leaf-2's room.
TEST_F(AdmissionTest, ElasticWorkThatRequiresOneDomainGrowsInIt) {
  MakeTwoLeaves(/*elastic_growth=*/true);
  auto filler = adm_->Restore(Gpus("f", "a", 8), OnGpus(1, {0, 1, 2, 3, 4, 5, 6, 7}), 0);
  ASSERT_TRUE(filler.ok());
  ASSERT_TRUE(adm_->Restore(Gpus("b0", "b", 8), OnGpus(3, {0, 1, 2, 3, 4, 5, 6, 7}), 0).ok());
  Workload w = Gpus("g", "a", 6, 0, /*pods=*/4, /*gang=*/true);
  w.pod_sets[0].min_count = 2;
  w.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(w, 1);
  adm_->Cycle(2, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{2});
  adm_->PodsReady(g);
  adm_->Finish(*filler, 10);
  const CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(r.grown, std::vector<int>{g}) << adm_->growth_why(g);
  EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{3});
  for (const Assignment& a : adm_->assignments(g)) EXPECT_LT(a.node, 3) << "off leaf-1";
  // Its fourth pod would fit on leaf-2's free node only: why it grows no more names its leaf
  // (a trial read "no node has room" beside that node).
  adm_->PodsReady(g);
  EXPECT_TRUE(adm_->Cycle(12, 1000).grown.empty());
  EXPECT_EQ(adm_->growth_why(g),
            "no node of its leaf leaf-1 has room for another of its pods now (its topology keeps "
            "its pods in one leaf)");
}

// ... and restored running in part where no leaf could hold a pod more even empty (the
// server's Admitter is rebuilt each cycle), it says it never grows, not "not now" (a user-style
// trial read "no node of its leaf has room for another of its pods now").
TEST_F(AdmissionTest, RestoredElasticWorkItsDomainCanHoldNoMoreOfSaysItNeverGrows) {
  MakeTwoLeaves(/*elastic_growth=*/true);
  Workload w = Gpus("g", "a", 6, 0, /*pods=*/4, /*gang=*/true);
  w.pod_sets[0].min_count = 2;
  w.topology = {TopologyLevel::kLeaf, /*required=*/true};
  SubmitOptions three;
  three.pod_counts = {3};
  const auto g = adm_->Restore(w,
                               {OnGpus(0, {2, 3, 4, 5, 6, 7})[0], OnGpus(1, {0, 1, 2, 3, 4, 5})[0],
                                OnGpus(2, {0, 1, 2, 3, 4, 5})[0]},
                               0, three);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(adm_->Cycle(1, 1000).grown.empty());
  EXPECT_EQ(adm_->growth_why(*g),
            "no domain its topology requires holds more of its pods, even empty");
}

// Flavours are the fleet's: a fraction goes to the most specific flavour any queue names, in
// every tree. When only another tree names it, the refusal says so, and who does (a user-style
// review: one team's new `frac` quota left every other tree's fractional work Unschedulable,
// "may hold at most 0", with nothing to say why).
TEST_F(AdmissionTest, AFlavourOnlyAnotherTreeNamesIsSaidSo) {
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"gpu", std::nullopt, {}, {}},
                    FlavorSpec{"frac", DeviceKind::kFraction, {}, {}}};
  QueueSpec shared = Plain("shared");
  shared.parent = "";
  shared.quotas["frac"] = QuotaSpec{1000, {}, {}};
  QueueSpec a = Leaf("a", 4);
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, a, shared};
  MakeTree(Nodes(2, 4), config, {"a", "shared"});
  const int half = Submit(Fraction("half", "a", 500, "a"));
  EXPECT_EQ(adm_->phase(half), Phase::kInfeasible);
  EXPECT_NE(adm_->reason(half).find("queue org (its guarantee, the top of the tree) may hold at "
                                    "most 0 (no queue of its tree has a quota of frac; queue "
                                    "shared's has, and such work is charged to frac in every "
                                    "tree: give this tree a quota of it)"),
            std::string::npos)
      << adm_->reason(half);
}

// Work within its queue's guarantee of one flavour is no borrower because another flavour it
// could be charged to is one its tree has no quota of (a trial: a whole GPU within team-a's
// guarantee of gpu waited "it would borrow, and work of its own queue within its guarantee
// waits for room" beside a free GPU, as another tree's h200 flavour counted against it).
TEST_F(AdmissionTest, AFlavourItsTreeHasNoQuotaOfMakesNoBorrower) {
  AdmissionConfig config;
  config.consolidation = false;
  config.flavors = {FlavorSpec{"h200", DeviceKind::kWhole, {"H200"}, {}},
                    FlavorSpec{"gpu", std::nullopt, {}, {}}};
  QueueSpec a = Leaf("a", 2), b = Leaf("b", 2), c = Plain("c");
  a.parent = b.parent = c.parent = "";
  c.quotas["h200"] = QuotaSpec{1000, {}, {}};
  config.queues = {a, b, c};
  MakeTree(WithNodeOf(Nodes(2, 2), "h200-0", 1, "H200", 141), config, {"a", "b", "c"});
  // b's work, within its guarantee, holds one GPU of each H100 node: 2 GPUs free, one on each.
  for (int n = 0; n < 2; ++n)
    ASSERT_TRUE(adm_->Restore(Gpus("b" + std::to_string(n), "b", 1), OnGpus(n, {0}), 0).ok());
  // a's 2-GPU pod of H100s fits no node and holds the room; its 1-GPU pod of any model is
  // within the guarantee too.
  Workload h100s = Gpus("two", "a", 2);
  h100s.pod_sets[0].device.models = {"H100"};
  const int two = Submit(h100s, 1);
  const int one = Submit(Gpus("one", "a", 1), 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(two), Phase::kPending);
  ASSERT_EQ(adm_->phase(one), Phase::kAdmitted) << adm_->reason(one);
}

// What a queue may hold is decided as admission decides it: a leaf guaranteed 8 under an inner
// queue without quotas of its own (guaranteed the sum of its children) may hold 8 — within its
// own guarantee, admission looks no further up. A root guaranteed less than that sum (4) is
// refused: its grandchild's guarantee counts against it.
TEST_F(AdmissionTest, WithinItsOwnGuaranteeAWorkloadIsNeverInfeasible) {
  AdmissionConfig config;
  config.queues = {QueueSpec{"top", "", 1, {{"gpu", QuotaSpec{4000, {}, {}}}}, -1},
                   QueueSpec{"mid", "top", 1, {}, -1}};
  QueueSpec a = Leaf("a", 8);
  a.parent = "mid";
  config.queues.push_back(a);
  auto policy = MakePolicy("bestfit");
  ASSERT_TRUE(policy.ok());
  fleet_ = Nodes(1, 8);
  auto refused = Admitter::Create(fleet_, Tenants({"a"}), config, **policy);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("children are guaranteed 8, more than its 4"),
            std::string::npos)
      << refused.status().message();
  config.queues[0].quotas["gpu"].guaranteed_milli = 8000;
  auto made = Admitter::Create(fleet_, Tenants({"a"}), config, **policy);
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto id = (*made)->Submit(Gpus("a-eight", "a", 8), 0);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ((*made)->phase(*id), Phase::kPending) << (*made)->reason(*id);
  (*made)->Cycle(1, 1000);
  EXPECT_EQ((*made)->phase(*id), Phase::kAdmitted) << (*made)->reason(*id);
}

TEST_F(AdmissionTest, LendingLimitKeepsPartOfAGuaranteeIdle) {
  // b lends only 1 of its 4 idle GPUs: a reaches 5.
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4, std::nullopt, /*lending=*/1)});
  std::vector<int> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Submit(Gpus("w" + std::to_string(i), "a", 1)));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 5);
  EXPECT_NE(adm_->reason(ids[7]).find("no unused gpu to lend"), std::string::npos)
      << adm_->reason(ids[7]);
  EXPECT_NE(adm_->reason(ids[7]).find("(b keeps 3 GPUs of its guarantee: its lending limit)"),
            std::string::npos)
      << adm_->reason(ids[7]);
  // b itself still gets its whole guarantee.
  std::vector<int> mine;
  for (int i = 0; i < 3; ++i) mine.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1)));
  adm_->Cycle(2, 1000);
  EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 3);
}

TEST_F(AdmissionTest, QueueBelowGuaranteeReclaimsBorrowedCapacity) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
  const std::vector<int> borrowed = AdmitEach("a", "a", 8);
  ASSERT_FALSE(borrowed.empty());

  int mine = Submit(Gpus("b0", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  // Two of a's borrowed GPUs are taken back; b0 waits for them to stop.
  ASSERT_EQ(r.evicted.size(), 2u);
  for (const Eviction& e : r.evicted) {
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "a");
    EXPECT_EQ(e.preemptor, mine);
    EXPECT_NE(e.reason.find("reclaims its guarantee"), std::string::npos) << e.reason;
  }
  EXPECT_EQ(adm_->phase(mine), Phase::kPending);
  // The victims hold their devices through the grace period.
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
  adm_->Cycle(12, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kPending);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
  CycleResult after = adm_->Cycle(41, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted);
  // The evicted workloads wait again; they do not take b0's room back.
  for (const Eviction& e : r.evicted) EXPECT_EQ(adm_->phase(e.victim), Phase::kPending);
  EXPECT_EQ(after.admitted.size(), 1u);
}

// A workload's nodeSelector and excludeNodes keep its pods to the nodes they leave, and its
// wait says how many it may not use; one no node matches never starts.
TEST_F(AdmissionTest, ANodeSelectorKeepsAWorkloadToItsNodes) {
  Fleet fleet = Nodes(3, 4);
  fleet.nodes[1].labels["zone"] = "b";
  Make(fleet, {Leaf("a", 12)});
  std::vector<int> pinned;
  for (int i = 0; i < 3; ++i) {
    Workload w = Gpus("pinned" + std::to_string(i), "a", 2);
    w.pod_sets[0].nodes.labels["zone"] = "b";
    pinned.push_back(Submit(w, i));
  }
  Workload avoid = Gpus("avoid", "a", 1);
  avoid.pod_sets[0].nodes.exclude = {"n0"};
  const int avoiding = Submit(avoid, 3);
  Workload host = Gpus("host", "a", 1);
  host.pod_sets[0].nodes.labels[kHostnameLabel] = "n0";
  const int on_n0 = Submit(host, 4);
  Workload nowhere = Gpus("nowhere", "a", 1);
  nowhere.pod_sets[0].nodes.labels["zone"] = "c";
  const int never = Submit(nowhere, 5);
  adm_->Cycle(6, 1000);
  EXPECT_EQ(PlacedOn({pinned[0], pinned[1]}, 1), 2);
  EXPECT_EQ(adm_->phase(pinned[2]), Phase::kPending);
  EXPECT_NE(adm_->reason(pinned[2]).find("(2 more are left out by its nodeSelector zone=b)"),
            std::string::npos)
      << adm_->reason(pinned[2]);
  ASSERT_EQ(adm_->assignments(avoiding).size(), 1u);
  EXPECT_EQ(adm_->assignments(avoiding)[0].node, 2);  // (n0, n1 first by index: n1 is full)
  ASSERT_EQ(adm_->assignments(on_n0).size(), 1u);
  EXPECT_EQ(adm_->assignments(on_n0)[0].node, 0);
  EXPECT_EQ(adm_->phase(never), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(never),
            "pod set main: its nodeSelector zone=c leaves it no node of the fleet");
}

// A node's NoSchedule and NoExecute taints keep off work that does not tolerate them; work
// that tolerates them may use it (and the nodes without taints); a pod set that runs on a node
// tainted since keeps running there (Restore), and adds nothing to it.
TEST_F(AdmissionTest, TaintsKeepOffWorkThatDoesNotTolerateThem) {
  // (The tainted nodes first: a first node of a class, or a remembered one, would be theirs.
  // Three of five left: most of the fleet, placed by class.)
  Fleet fleet = Nodes(5, 4);
  fleet.nodes[0].taints.push_back({"gpu", "suspect", TaintEffect::kNoExecute, ""});
  fleet.nodes[1].taints.push_back({"dedicated", "team-b", TaintEffect::kNoSchedule, ""});
  Make(fleet, {Leaf("a", 20)});
  const int plain = Submit(Gpus("plain", "a", 3, 0, 3), 0);  // (three pods of 3 GPUs)
  const int more = Submit(Gpus("more", "a", 3), 1);
  Workload tolerant = Gpus("tolerant", "a", 4);
  tolerant.pod_sets[0].nodes.tolerations = {
      Toleration{.key = "dedicated", .value = "team-b", .effect = 0}};
  const int dedicated = Submit(tolerant, 2);
  Workload any = Gpus("any", "a", 4);
  any.pod_sets[0].nodes.tolerations = {Toleration{.exists = true}};
  const int everywhere = Submit(any, 3);
  adm_->Cycle(4, 1000);
  ASSERT_EQ(adm_->assignments(plain).size(), 3u) << adm_->reason(plain);
  std::set<int> on;
  for (const Assignment& a : adm_->assignments(plain)) on.insert(a.node);
  EXPECT_EQ(on, (std::set<int>{2, 3, 4}));
  EXPECT_EQ(adm_->phase(more), Phase::kPending);
  const std::string why = adm_->reason(more);
  EXPECT_NE(why.find("(2 more are left out by its want of a toleration for taints "
                     "dedicated=team-b:NoSchedule (1 node), gpu=suspect:NoExecute (1 node))"),
            std::string::npos)
      << why;
  ASSERT_EQ(adm_->assignments(dedicated).size(), 1u);
  EXPECT_EQ(adm_->assignments(dedicated)[0].node, 1);
  ASSERT_EQ(adm_->assignments(everywhere).size(), 1u);
  EXPECT_EQ(adm_->assignments(everywhere)[0].node, 0);

  // Every node tainted: work that tolerates nothing can never start, and says why.
  Fleet all = Nodes(1, 4);
  all.nodes[0].taints.push_back({"maintenance", "", TaintEffect::kNoSchedule, ""});
  Make(all, {Leaf("a", 4)});
  const int never = Submit(Gpus("never", "a", 1), 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(never), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(never),
            "pod set main: its want of a toleration for taint maintenance:NoSchedule leaves it "
            "no node of the fleet");
  // A node with two taints: the wait names both (a toleration for one leaves it kept off).
  Fleet twice = Nodes(1, 4);
  twice.nodes[0].taints.push_back({"maintenance", "", TaintEffect::kNoSchedule, ""});
  twice.nodes[0].taints.push_back({"gpu", "bad", TaintEffect::kNoExecute, ""});
  Make(twice, {Leaf("a", 4)});
  Workload half = Gpus("half", "a", 1);
  half.pod_sets[0].nodes.tolerations = {Toleration{.key = "maintenance", .exists = true}};
  const int still = Submit(half, 0);
  const int neither = Submit(Gpus("neither", "a", 1), 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->reason(still),
            "pod set main: its want of a toleration for taint gpu=bad:NoExecute leaves it no "
            "node of the fleet");
  EXPECT_EQ(adm_->reason(neither),
            "pod set main: its want of a toleration for taints gpu=bad:NoExecute (1 node), "
            "maintenance:NoSchedule (1 node) leaves it no node of the fleet");
  Make(all, {Leaf("a", 4)});
  // ... but one placed before the taint was set runs on, where it is.
  const Workload was = Gpus("was", "a", 2);
  auto restored = adm_->Restore(was, OnGpus(0, {0, 1}), 0, SubmitOptions{});
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(adm_->phase(*restored), Phase::kAdmitted);
}

// Required node affinity keeps work to the nodes one of its terms matches; preferred terms send
// it to the nodes they weigh most first, then the next best, then any it may use.
TEST_F(AdmissionTest, NodeAffinityRequiresAndPrefers) {
  Fleet fleet = Nodes(4, 4);
  fleet.nodes[0].labels["zone"] = "a";
  fleet.nodes[1].labels["zone"] = "b";
  fleet.nodes[2].labels["zone"] = "b";
  fleet.nodes[2].labels["fast"] = "yes";
  fleet.nodes[3].labels["zone"] = "c";
  Make(fleet, {Leaf("a", 16)});
  NodeSelector sel;
  sel.required = {NodeTerm{{NodeRequirement{"zone", SelectorOp::kIn, {"b", "c"}}}}};
  sel.preferred = {PreferredTerm{50, NodeTerm{{NodeRequirement{"fast", SelectorOp::kExists}}}},
                   PreferredTerm{10, NodeTerm{{NodeRequirement{"zone", SelectorOp::kIn, {"c"}}}}}};
  const auto with = [&](Workload w, const NodeSelector& s) {
    for (PodSet& ps : w.pod_sets) ps.nodes = s;
    return w;
  };
  // A gang of two whole nodes: the fast node alone cannot hold it, so the next tier (fast or
  // zone c) does.
  Workload gang = Gpus("gang", "a", 4, 0, 2);
  gang.gang = true;
  const int both = Submit(with(gang, sel), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(both).size(), 2u) << adm_->reason(both);
  std::set<int> on;
  for (const Assignment& a : adm_->assignments(both)) on.insert(a.node);
  EXPECT_EQ(on, (std::set<int>{2, 3}));
  // Then the last node its required term leaves it; then none (n0 is zone a).
  const int third = Submit(with(Gpus("third", "a", 4), sel), 2);
  const int fourth = Submit(with(Gpus("fourth", "a", 4), sel), 3);
  adm_->Cycle(4, 1000);
  ASSERT_EQ(adm_->assignments(third).size(), 1u) << adm_->reason(third);
  EXPECT_EQ(adm_->assignments(third)[0].node, 1);
  EXPECT_EQ(adm_->phase(fourth), Phase::kPending);
  EXPECT_NE(adm_->reason(fourth).find("(1 more are left out by its nodeAffinity (zone In (b,c)))"),
            std::string::npos)
      << adm_->reason(fourth);

  // One pod alone goes to the most preferred node with room, before the node packing would
  // choose (n0, the first): the preference outweighs it.
  Make(fleet, {Leaf("a", 16)});
  const int plain = Submit(Gpus("plain", "a", 1), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(plain).size(), 1u);
  EXPECT_EQ(adm_->assignments(plain)[0].node, 0);
  Make(fleet, {Leaf("a", 16)});
  NodeSelector prefers;
  prefers.preferred = sel.preferred;
  const int one = Submit(with(Gpus("one", "a", 1), prefers), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(one).size(), 1u);
  EXPECT_EQ(adm_->assignments(one)[0].node, 2);

  // No node meets its required terms: it can never start, and says why.
  NodeSelector nowhere;
  nowhere.required = {NodeTerm{{NodeRequirement{"zone", SelectorOp::kIn, {"d"}}}},
                      NodeTerm{{NodeRequirement{"zone", SelectorOp::kDoesNotExist}}}};
  const int never = Submit(with(Gpus("never", "a", 1), nowhere), 3);
  adm_->Cycle(4, 1000);
  EXPECT_EQ(adm_->phase(never), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(never),
            "pod set main: its nodeAffinity (zone In (d)) or (zone DoesNotExist) leaves it no "
            "node of the fleet");
}

// Preferences rank nodes by their summed weights, in at most three steps; selectors differing
// in their preferences alone are told apart; a preferred gang topology outweighs them.
TEST_F(AdmissionTest, NodePreferencesRankNodesAndYieldToAPreferredTopology) {
  Fleet fleet = Nodes(5, 4);
  for (int n = 0; n < 5; ++n) fleet.nodes[n].labels["rank"] = std::to_string(n);
  Make(fleet, {Leaf("a", 20)});
  const auto prefer = [](std::vector<std::pair<int, std::string>> ranks) {
    NodeSelector s;
    for (const auto& [weight, rank] : ranks)
      s.preferred.push_back(
          PreferredTerm{weight, NodeTerm{{NodeRequirement{"rank", SelectorOp::kIn, {rank}}}}});
    return s;
  };
  const NodeSelector up = prefer({{10, "1"}, {20, "2"}, {30, "3"}, {40, "4"}});
  // Four values, three steps: {n4}, {n3,n4}, {n2,n3,n4}; n1 counts for no more than n0.
  const auto tiers = adm_->state().PreferredFor(up);
  ASSERT_TRUE(tiers);
  ASSERT_EQ(tiers->size(), 3u);
  EXPECT_EQ((*tiers)[0]->list, (std::vector<int>{4}));
  EXPECT_EQ((*tiers)[2]->list, (std::vector<int>{2, 3, 4}));
  const auto with = [](Workload w, const NodeSelector& s) {
    for (PodSet& ps : w.pod_sets) ps.nodes = s;
    return w;
  };
  // Whole nodes one by one: best first. Another selector differing in its preferences alone
  // (rank 1, below the cap above) gets its own steps in the same state.
  const int first = Submit(with(Gpus("first", "a", 4), up), 0);
  const int low = Submit(with(Gpus("low", "a", 4), prefer({{5, "1"}})), 1);
  adm_->Cycle(2, 1000);
  const int second = Submit(with(Gpus("second", "a", 4), up), 3);
  adm_->Cycle(4, 1000);
  // Lt: a required rank below 4 and the preference above leave it n2 (n3 and n4 preferred but
  // not allowed, n1 taken).
  NodeSelector below = up;
  below.required = {NodeTerm{{NodeRequirement{"rank", SelectorOp::kLt, {"4"}}}}};
  const int third = Submit(with(Gpus("third", "a", 4), below), 5);
  adm_->Cycle(6, 1000);
  std::vector<int> on;
  for (int id : {first, low, second, third}) {
    ASSERT_EQ(adm_->assignments(id).size(), 1u) << adm_->reason(id);
    on.push_back(adm_->assignments(id)[0].node);
  }
  EXPECT_EQ(on, (std::vector<int>{4, 1, 3, 2}));

  // A gang that prefers its leaf: two nodes it prefers lie in two leaves, so it goes whole to
  // one leaf instead.
  Fleet leaves = Nodes(4, 4);
  for (int n = 0; n < 4; ++n) leaves.nodes[n].leaf = n < 2 ? "leaf-a" : "leaf-b";
  leaves.nodes[1].labels["fast"] = "yes";
  leaves.nodes[2].labels["fast"] = "yes";
  Make(leaves, {Leaf("a", 16)});
  Workload gang = Gpus("gang", "a", 4, 0, 2);
  gang.gang = true;
  gang.topology = TopologyConstraint{TopologyLevel::kLeaf, false};
  NodeSelector fast;
  fast.preferred = {
      PreferredTerm{50, NodeTerm{{NodeRequirement{"fast", SelectorOp::kIn, {"yes"}}}}}};
  const int compact = Submit(with(gang, fast), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(compact).size(), 2u) << adm_->reason(compact);
  EXPECT_EQ(adm_->state().node(adm_->assignments(compact)[0].node).leaf,
            adm_->state().node(adm_->assignments(compact)[1].node).leaf);
  // ... and where the nodes it prefers hold it in one leaf, there (left to itself, it takes
  // the first leaf).
  leaves.nodes[3].labels["fast"] = "yes";
  Make(leaves, {Leaf("a", 16)});
  const int preferred = Submit(with(gang, fast), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(preferred).size(), 2u) << adm_->reason(preferred);
  std::set<int> on_nodes;
  for (const Assignment& a : adm_->assignments(preferred)) on_nodes.insert(a.node);
  EXPECT_EQ(on_nodes, (std::set<int>{2, 3}));
  Make(leaves, {Leaf("a", 16)});
  const int plain = Submit(gang, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(plain).size(), 2u) << adm_->reason(plain);
  EXPECT_EQ(adm_->state().node(adm_->assignments(plain)[0].node).leaf, "leaf-a");
}

// A PreferNoSchedule taint keeps nothing off: work that does not tolerate it goes to other
// nodes while they have room (before any node its affinity prefers), then there.
TEST_F(AdmissionTest, PreferNoScheduleTaintsRankANodeLast) {
  Fleet fleet = Nodes(3, 4);
  fleet.nodes[0].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
  fleet.nodes[0].labels["fast"] = "yes";
  Make(fleet, {Leaf("a", 12)});
  NodeSelector fast;
  fast.preferred = {PreferredTerm{100, NodeTerm{{NodeRequirement{"fast", SelectorOp::kExists}}}}};
  Workload first = Gpus("first", "a", 4);
  first.pod_sets[0].nodes = fast;
  std::vector<int> ids = {Submit(first, 0)};
  adm_->Cycle(1, 1000);
  ids.push_back(Submit(Gpus("second", "a", 4), 2));
  adm_->Cycle(3, 1000);
  ids.push_back(Submit(Gpus("third", "a", 4), 4));
  adm_->Cycle(5, 1000);
  std::vector<int> on;
  for (int id : ids) {
    ASSERT_EQ(adm_->assignments(id).size(), 1u) << adm_->reason(id);
    on.push_back(adm_->assignments(id)[0].node);
  }
  EXPECT_EQ(on, (std::vector<int>{1, 2, 0}));
  // Pods of one workload more than the untainted nodes hold: those that fit there go there,
  // the rest elsewhere (as Kubernetes ranks each pod), a gang's too.
  for (bool gang : {false, true}) {
    Fleet two = Nodes(3, 4);
    two.nodes[0].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
    two.nodes[1].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
    Make(two, {Leaf("a", 12)});
    const int pair = Submit(Gpus("pair", "a", 4, 0, 2, gang), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->assignments(pair).size(), 2u) << adm_->reason(pair);
    std::set<int> nodes;
    for (const Assignment& a : adm_->assignments(pair)) nodes.insert(a.node);
    EXPECT_TRUE(nodes.count(2)) << (gang ? "gang" : "pods");
  }
  // Past three preference steps the untainted nodes still come before the tainted one.
  Fleet five = Nodes(5, 4);
  five.nodes[0].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
  for (int n = 2; n < 5; ++n) five.nodes[n].labels["rank"] = std::to_string(n);
  Make(five, {Leaf("a", 20)});
  NodeSelector ranked;
  for (int n = 2; n < 5; ++n)
    ranked.preferred.push_back(PreferredTerm{
        10 * n, NodeTerm{{NodeRequirement{"rank", SelectorOp::kIn, {std::to_string(n)}}}}});
  const auto steps = adm_->state().PreferredFor(ranked);
  ASSERT_TRUE(steps);
  ASSERT_EQ(steps->size(), 4u);
  EXPECT_EQ(steps->back()->list, (std::vector<int>{1, 2, 3, 4}));
  // Nodes with such taints: fewest first (Kubernetes' TaintToleration score counts them).
  Fleet counted = Nodes(3, 4);
  counted.nodes[0].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
  counted.nodes[0].taints.push_back({"old", "", TaintEffect::kPreferNoSchedule, ""});
  counted.nodes[1].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
  Make(counted, {Leaf("a", 12)});
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    const int id = Submit(Gpus("w" + std::to_string(i), "a", 4), 2 * i);
    adm_->Cycle(2 * i + 1, 1000);
    ASSERT_EQ(adm_->assignments(id).size(), 1u) << adm_->reason(id);
    order.push_back(adm_->assignments(id)[0].node);
  }
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
  // Tolerated, it is a node like the others (packing takes the first).
  Make(fleet, {Leaf("a", 12)});
  Workload tolerant = Gpus("tolerant", "a", 4);
  tolerant.pod_sets[0].nodes.tolerations = {Toleration{.key = "spot", .exists = true}};
  const int t = Submit(tolerant, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->assignments(t).size(), 1u);
  EXPECT_EQ(adm_->assignments(t)[0].node, 0);
}

// A workload that cannot start on the nodes its selector leaves does not stop one of the same
// shape without a selector (the cycle skips attempts like one that failed: the selector is part
// of what makes them alike).
TEST_F(AdmissionTest, AWaitingSelectiveWorkloadDoesNotHoldBackOneWithoutASelector) {
  Fleet fleet = Nodes(2, 4);
  fleet.nodes[1].labels["zone"] = "b";
  Make(fleet, {Leaf("a", 8)});
  Workload full = Gpus("full", "a", 4);
  full.pod_sets[0].nodes.labels["zone"] = "b";
  const int filled = Submit(full, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(filled), Phase::kAdmitted);
  Workload pinned = Gpus("pinned", "a", 2);
  pinned.pod_sets[0].nodes.labels["zone"] = "b";
  const int waits = Submit(pinned, 2);
  const int plain = Submit(Gpus("plain", "a", 2), 3);
  adm_->Cycle(4, 1000);
  EXPECT_EQ(adm_->phase(waits), Phase::kPending);
  ASSERT_EQ(adm_->phase(plain), Phase::kAdmitted) << adm_->reason(plain);
  EXPECT_EQ(adm_->assignments(plain)[0].node, 0);
}

// A queue below its guarantee reclaims for a workload with a nodeSelector only from the nodes it
// may use: evicting elsewhere would free room it cannot take. (Left to itself, it takes n0's.)
TEST_F(AdmissionTest, ReclaimForASelectiveWorkloadTakesFromItsNodesOnly) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
  const std::vector<int> borrowed = AdmitEach("a", "a", 8);
  ASSERT_FALSE(borrowed.empty());
  Workload w = Gpus("b0", "b", 2);
  w.pod_sets[0].nodes.labels[kHostnameLabel] = "n1";
  const int mine = Submit(w, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u);
  for (const Eviction& e : r.evicted) {
    ASSERT_EQ(adm_->assignments(e.victim).size(), 1u);
    EXPECT_EQ(adm_->assignments(e.victim)[0].node, 1) << e.victim;
  }
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
  adm_->Cycle(41, 1000);
  ASSERT_EQ(adm_->phase(mine), Phase::kAdmitted);
  EXPECT_EQ(adm_->assignments(mine)[0].node, 1);
}

// Several workloads of a queue below its guarantee reclaim in the same cycle, but never more
// than the guarantee: what is already being reclaimed for its waiting workloads counts, so the
// fourth and fifth 1-GPU workloads of b (guarantee 3) do not evict anyone, in this cycle or the
// next, and a cycle while the victims stop does not evict again for the same room.
TEST_F(AdmissionTest, ReclaimInOneCycleStopsAtTheGuarantee) {
  Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 3), Leaf("c", 3)});
  const std::vector<int> borrowed = AdmitEach("a", "a", 8);
  ASSERT_FALSE(borrowed.empty());

  std::vector<int> mine = SubmitEach("b", "b", 5, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(r.evicted.size(), 3u);
  std::set<int> preemptors;
  for (const Eviction& e : r.evicted) preemptors.insert(e.preemptor);
  EXPECT_EQ(preemptors.size(), 3u);
  r = adm_->Cycle(12, 1000);
  EXPECT_TRUE(r.evicted.empty()) << r.evicted.size() << " more evicted while the first stop";
  for (int v : borrowed)
    if (adm_->phase(v) == Phase::kEvicting) adm_->Terminated(v, 40);
  r = adm_->Cycle(41, 1000);
  EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 3);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("b")), 3000);
}

// A workload bigger than its queue's whole guarantee only ever runs on borrowed GPUs: a queue
// below its guarantee reclaims it even though its queue is then below its own (a review acting
// as a user saw team-b wait out a whole 8-GPU run of team-a, guaranteed 4). Work that fits its
// queue's guarantee is still not taken below it: two 3-GPU runs stay.
TEST_F(AdmissionTest, ReclaimTakesAWorkloadBiggerThanItsQueuesGuarantee) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
  const int big = Submit(Gpus("big", "a", 4, 0, 2, true), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  const int mine = Submit(Gpus("mine", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(r.evicted[0].victim, big);
  adm_->Terminated(big, 40);
  adm_->Cycle(41, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);

  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
  const int a1 = Submit(Gpus("a1", "a", 3), 0), a2 = Submit(Gpus("a2", "a", 3), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(a1), Phase::kAdmitted);
  ASSERT_EQ(adm_->phase(a2), Phase::kAdmitted);
  const int four = Submit(Gpus("four", "b", 4), 10);
  r = adm_->Cycle(11, 1000);
  EXPECT_TRUE(r.evicted.empty()) << adm_->reason(four);
  EXPECT_EQ(adm_->phase(four), Phase::kPending);
}

// A preemptor whose victims have stopped takes the room they left, even when the placement
// policy would now prefer another node: otherwise it may take room another preemptor made, and
// that one evicts a second time.
TEST_F(AdmissionTest, PreemptorTakesTheRoomItsVictimsLeft) {
  Make(Nodes(3, 2), {Leaf("a", 2), Leaf("b", 4)});
  std::vector<int> borrowed = SubmitEach("a", "a", 4, 0);
  adm_->Cycle(1, 1000);
  for (int i = 4; i < 6; ++i) borrowed.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1), 5));
  adm_->Cycle(6, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 6);
  ASSERT_EQ(adm_->assignments(borrowed[0])[0].node, 0);

  const int mine = Submit(Gpus("b0", "b", 1), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u);
  const int victim = r.evicted[0].victim;
  ASSERT_EQ(adm_->assignments(victim)[0].node, 2);  // the youngest, cheapest victims are on n2
  // A GPU frees on node 0 meanwhile; best fit ties it with the victim's and takes the lowest.
  adm_->Finish(borrowed[0], 20);
  adm_->Cycle(21, 1000);
  adm_->Terminated(victim, 40);
  r = adm_->Cycle(41, 1000);
  ASSERT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
  EXPECT_EQ(adm_->assignments(mine)[0].node, 2);
}

// While a preemptor's victims stop one by one, the room each leaves is held for it: work of
// another queue within its own guarantee does not take it meanwhile (and the preemptor does
// not have to evict again).
TEST_F(AdmissionTest, RoomAVictimLeavesIsHeldWhileTheOthersStop) {
  Make(Nodes(3, 2), {Leaf("a", 2), Leaf("b", 1), Leaf("c", 3)});
  std::vector<int> c, b;
  for (int i = 0; i < 2; ++i) c.push_back(Submit(Gpus("c" + std::to_string(i), "c", 1), 0));
  adm_->Cycle(1, 1000);
  for (int i = 0; i < 4; ++i) b.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 2));
  adm_->Cycle(3, 1000);
  ASSERT_EQ(CountPhase(c, Phase::kAdmitted) + CountPhase(b, Phase::kAdmitted), 6);

  const int big = Submit(Gpus("a-big", "a", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(big);
  const int node = adm_->assignments(r.evicted[0].victim)[0].node;
  ASSERT_EQ(adm_->assignments(r.evicted[1].victim)[0].node, node);
  adm_->Terminated(r.evicted[0].victim, 20);
  const int other = Submit(Gpus("c-more", "c", 1), 20);
  adm_->Cycle(21, 1000);
  if (adm_->phase(other) == Phase::kAdmitted) {
    EXPECT_NE(adm_->assignments(other)[0].node, node);
  }
  adm_->Terminated(r.evicted[1].victim, 40);
  adm_->Cycle(41, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  EXPECT_EQ(adm_->assignments(big)[0].node, node);
}

// Reclaim with moves: queue a is guaranteed 5 GPUs and holds 3; b holds 3 on a guarantee of 1.
// Every node holds one pod of each, so no node frees by evicting b's borrowed work alone, and
// a's 2-GPU pod waited for b's work to end. Now b's two borrowed pods are evicted and one pod
// that stays moves into the room they leave, clearing a node for it.
TEST_F(AdmissionTest, ReclaimMovesWorkThatStaysToClearANode) {
  std::vector<int> a, b;
  OnePodOfEachQueuePerNode(a, b);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(adm_->phase(a[i]), Phase::kAdmitted);
    ASSERT_EQ(adm_->phase(b[i]), Phase::kAdmitted);
    ASSERT_EQ(adm_->assignments(a[i])[0].node, adm_->assignments(b[i])[0].node);
  }
  const int big = Submit(Gpus("a-big", "a", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  int from_b = 0;
  for (const Eviction& e : r.evicted) {
    EXPECT_EQ(e.preemptor, big);
    from_b += std::find(b.begin(), b.end(), e.victim) != b.end();
  }
  EXPECT_GE(from_b, 2) << adm_->reason(big);
  EXPECT_EQ(r.evicted.size(), 3u) << adm_->reason(big);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
  adm_->Cycle(41, 1000);
  EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("b")), 1000);
}

// The same on a fleet where two of the nodes take no new work (cordoned): work there is never
// evicted for it, and what b borrows elsewhere (one GPU) is not enough, so nothing is.
TEST_F(AdmissionTest, ReclaimWithMovesLeavesNodesThatTakeNoNewWork) {
  std::vector<int> a, b;
  OnePodOfEachQueuePerNode(a, b);
  adm_->ExcludeFromEviction(adm_->assignments(b[0])[0].node);
  adm_->ExcludeFromEviction(adm_->assignments(b[1])[0].node);
  const int big = Submit(Gpus("a-big", "a", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_TRUE(r.evicted.empty()) << r.evicted.size() << " evicted; " << adm_->reason(big);
  EXPECT_EQ(adm_->phase(big), Phase::kPending);
}

// A gang within its guarantee, on a fleet where borrowed work is scattered among work that stays
// (at its guarantee) and nothing free is large enough: reclaim clears whole nodes, taking the
// borrowed work there and moving the rest into the free room (4 moves, the most allowed here),
// rather than reclaiming the cheapest borrowed work wherever it runs (which needed 7 moves to
// fill in the holes that left on the gang's nodes: with 4 allowed, no plan, and the gang waited).
TEST_F(AdmissionTest, ReclaimClearsWholeNodesForAGang) {
  AdmissionConfig config;
  config.consolidation_max_moves = 4;
  Make(Nodes(5, 8), {Leaf("train", 20), Leaf("inf", 10), Leaf("ext", 8)}, {}, config);
  auto on = [](int node, int gpu) {
    Assignment a;
    a.node = node;
    a.devices.push_back({gpu, 1000, 80 * 1024, -1});
    return std::vector<Assignment>{a};
  };
  // inf: two GPUs on every node; ext: the other six on n0-n3, the newest (cheapest to evict)
  // spread over all four nodes. n4 has six free GPUs.
  std::vector<int> inf, ext;
  for (int n = 0; n < 5; ++n)
    for (int g = 0; g < 2; ++g) {
      auto r = adm_->Restore(Gpus("inf-" + std::to_string(n) + std::to_string(g), "inf", 1),
                             on(n, g), 0);
      ASSERT_TRUE(r.ok()) << r.status().message();
      inf.push_back(*r);
    }
  for (int k = 0; k < 24; ++k) {
    auto r = adm_->Restore(Gpus("ext-" + std::to_string(k), "ext", 1), on(k % 4, 2 + k / 4), k);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ext.push_back(*r);
  }
  const int gang = Submit(Gpus("train-gang", "train", 8, 0, 2, /*gang=*/true), 100);
  CycleResult r = adm_->Cycle(101, 1000);
  int from_ext = 0, from_inf = 0;
  for (const Eviction& e : r.evicted) {
    EXPECT_EQ(e.preemptor, gang);
    from_ext += std::find(ext.begin(), ext.end(), e.victim) != ext.end();
    from_inf += std::find(inf.begin(), inf.end(), e.victim) != inf.end();
  }
  EXPECT_EQ(from_ext, 12) << adm_->reason(gang);
  EXPECT_EQ(from_inf, 4) << adm_->reason(gang);
  EXPECT_NE(adm_->reason(gang).find("preempting 12 workload(s)"), std::string::npos)
      << adm_->reason(gang);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 130);
  adm_->Cycle(131, 1000);
  ASSERT_EQ(adm_->phase(gang), Phase::kAdmitted) << adm_->reason(gang);
  // The pods are on nodes they cleared (n0-n3); n4 took the moved work.
  for (const Assignment& a : adm_->assignments(gang)) EXPECT_LT(a.node, 4);
  EXPECT_EQ(CountPhase(inf, Phase::kAdmitted), 10);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("ext")), 12000);
}

// Reclaim is per flavour: a queue that borrows H100s while it holds less than its guarantee in
// total (its A100 guarantee lies unused) still gives the H100s back to a queue guaranteed them.
// Reclaim takes only what a queue borrows: where the borrowed room is inside work whose
// eviction would leave its queue, or one above it, below its guarantee, nothing goes, and the
// waiting workload says so (a user-style trial read only "no node can take it now").
// qa's guarantee was lowered (8 → 4) under its 8 GPUs of work that may not be preempted (the
// server restores it as it runs); qb, guaranteed 4 and holding none, waits: its message says
// why — what qa borrows can never be taken back — instead of only that no node has a free GPU
// (a user-style trial).
TEST_F(AdmissionTest, ReclaimSaysWhenTheBorrowerMayNotBePreempted) {
  Make(Nodes(1, 8), {Leaf("qa", 4), Leaf("qb", 4)});
  SubmitOptions pinned;
  pinned.preemptible = false;
  for (int d = 0; d < 8; d += 2)
    ASSERT_TRUE(
        adm_->Restore(Gpus("a" + std::to_string(d), "qa", 2), OnGpus(0, {d, d + 1}), 0, pinned)
            .ok());
  const int b = Submit(Gpus("b0", "qb", 2), 1);
  CycleResult cr = adm_->Cycle(2, 1000);
  EXPECT_TRUE(cr.evicted.empty());
  EXPECT_EQ(adm_->phase(b), Phase::kPending);
  EXPECT_NE(adm_->reason(b).find("queue qa borrows 4 GPUs of gpu in work that may not be "
                                 "preempted (spec.preemptible: false, admitted within a guarantee "
                                 "lowered since): this waits for that work to end"),
            std::string::npos)
      << adm_->reason(b);
}

// ... and how much of it can go where only part can: qa (8) runs 6 GPUs of work that may not be
// preempted and two 4-GPU workloads that may, 6 GPUs borrowed; taking both would leave it at 6.
// qb's 8 GPUs (its guarantee) wait, and say so (a trial's read only "no room", for good).
TEST_F(AdmissionTest, ReclaimSaysHowMuchOfTheBorrowedRoomIsInReach) {
  Make(Nodes(4, 4), {Leaf("qa", 8), Leaf("qb", 8)});
  SubmitOptions pinned;
  pinned.preemptible = false;
  for (const auto& [name, gpus, options] : std::vector<std::tuple<std::string, int, SubmitOptions>>{
           {"np1", 4, pinned}, {"low", 4, {}}, {"np2", 2, pinned}, {"hi", 4, {}}}) {
    const int id = Submit(Gpus(name, "qa", 1, 0, gpus), 0, options);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(id), Phase::kAdmitted) << name << ": " << adm_->reason(id);
  }
  const int b = Submit(Gpus("b", "qb", 1, 0, 8), 100);
  CycleResult cr = adm_->Cycle(100, 1000);
  EXPECT_TRUE(cr.evicted.empty());
  EXPECT_EQ(adm_->phase(b), Phase::kPending);
  EXPECT_NE(adm_->reason(b).find("; queue qa borrows 6 GPUs of gpu; only 4 GPUs of it can go for "
                                 "this without leaving it below its guarantee of 8 GPUs"),
            std::string::npos)
      << adm_->reason(b);
}

// team-a (8: a-train 6, a-serve 2) runs a-serve's 3-GPU s1, 1 GPU borrowed; team-c runs 7 of its
// 8. Taking s1 for team-c's 1 GPU would leave team-a at 6 of 8.
TEST_F(AdmissionTest, ReclaimSaysWhenTheBorrowedRoomIsInWorkItMayNotTake) {
  // (With a-serve's 3 GPUs as three 1-GPU workloads instead, one goes: it keeps a-serve and
  // team-a at their guarantees.)
  for (bool one : {true, false}) {
    SCOPED_TRACE(one ? "one 3-GPU workload" : "three 1-GPU workloads");
    QueueSpec team_a = Leaf("team-a", 8), train = Leaf("a-train", 6), serve = Leaf("a-serve", 2);
    train.parent = serve.parent = "team-a";
    Make(Nodes(4, 4), {team_a, train, serve, Leaf("team-c", 8)});
    ASSERT_EQ(AdmitEach("t", "a-train", 6).size(), 6u);
    if (one) {
      const int s1 = Submit(Gpus("s1", "a-serve", 3), 1);
      adm_->Cycle(2, 1000);
      ASSERT_EQ(adm_->phase(s1), Phase::kAdmitted) << adm_->reason(s1);
    } else {
      ASSERT_EQ(AdmitEach("s", "a-serve", 3).size(), 3u);
    }
    ASSERT_EQ(AdmitEach("c", "team-c", 7).size(), 7u);
    const int c6 = Submit(Gpus("c6", "team-c", 1), 3);
    CycleResult cr = adm_->Cycle(4, 1000);
    EXPECT_EQ(cr.evicted.size(), one ? 0u : 1u);
    const std::string says =
        "queue a-serve borrows 1 GPU of gpu, but none of its work can go for this without "
        "leaving queue team-a below its guarantee of 8 GPUs (reclaim takes only what a queue "
        "borrows: this waits for borrowed work to end)";
    if (!one) {
      EXPECT_EQ(adm_->reason(c6).find("none of its work can go"), std::string::npos)
          << adm_->reason(c6);
      continue;
    }
    EXPECT_EQ(adm_->phase(c6), Phase::kPending);
    EXPECT_NE(adm_->reason(c6).find(says), std::string::npos) << adm_->reason(c6);
    adm_->Cycle(5, 1000);
    EXPECT_NE(adm_->reason(c6).find(says), std::string::npos) << adm_->reason(c6);
    EXPECT_EQ(adm_->reason(c6).find(says), adm_->reason(c6).rfind(says)) << "said once";
  }
}

TEST_F(AdmissionTest, ReclaimIsPerFlavour) {
  const Fleet fleet = H100AndA100();
  AdmissionConfig config = PerModelFlavours();
  QueueSpec a = Plain("a"), b = Plain("b");
  a.quotas["h100"].guaranteed_milli = 1000;
  a.quotas["a100"].guaranteed_milli = 4000;
  b.quotas["h100"].guaranteed_milli = 3000;
  Make(fleet, {a, b}, {}, config);
  auto on_h100 = [](Workload w) {
    w.pod_sets[0].device.models = {"H100"};
    return w;
  };
  std::vector<int> borrowed;
  for (int i = 0; i < 4; ++i)
    borrowed.push_back(Submit(on_h100(Gpus("a" + std::to_string(i), "a", 1)), 0));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 4);

  int mine = Submit(on_h100(Gpus("b0", "b", 2)), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(r.evicted.size(), 2u) << adm_->reason(mine);
  for (const Eviction& e : r.evicted) EXPECT_EQ(e.preemptor, mine);
}

// reclaim_hold_s: after a queue reclaims, the room its reclaim freed beyond its need is lent to
// no one for a while. a (guaranteed 4) reclaims a 4-GPU workload of b for a 1-GPU one; the 3
// GPUs left over go to b's next workload at once without the hold, and only once the hold is
// over with it. A rebuilt Admitter told of the reclaim (RestoreReclaims) holds the same way.
TEST_F(AdmissionTest, ReclaimHoldKeepsTheReclaimedRoomFromTheBorrower) {
  for (double hold : {0.0, 300.0}) {
    SCOPED_TRACE("hold " + std::to_string(hold));
    AdmissionConfig config;
    config.reclaim_hold_s = hold;
    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)}, {}, config);
    std::vector<int> b = {Submit(Gpus("b0", "b", 4), 0), Submit(Gpus("b1", "b", 4), 0)};
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(b, Phase::kAdmitted), 2);
    const int a0 = Submit(Gpus("a0", "a", 1), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(a0);
    EXPECT_EQ(adm_->reclaim_record(adm_->QueueIndex("a")).at, 11);
    EXPECT_EQ(adm_->reclaim_record(adm_->QueueIndex("a")).room_milli,
              (std::map<std::string, int64_t>{{"gpu", 3000}}));
    adm_->Terminated(r.evicted[0].victim, 41);
    const int b2 = Submit(Gpus("b2", "b", 2), 41);
    adm_->Cycle(42, 1000);
    ASSERT_EQ(adm_->phase(a0), Phase::kAdmitted) << adm_->reason(a0);
    if (hold == 0) {
      EXPECT_EQ(adm_->phase(b2), Phase::kAdmitted) << adm_->reason(b2);
      continue;
    }
    EXPECT_EQ(adm_->phase(b2), Phase::kPending);
    EXPECT_NE(adm_->reason(b2).find("to lend"), std::string::npos) << adm_->reason(b2);
    // It says who keeps the room and until when.
    EXPECT_NE(adm_->reason(b2).find(
                  "(a keeps 3 GPUs it reclaimed less than a minute ago: its reclaim hold lasts "
                  "about 5 min more)"),
              std::string::npos)
        << adm_->reason(b2);
    adm_->Cycle(400, 1000);
    EXPECT_EQ(adm_->phase(b2), Phase::kAdmitted) << adm_->reason(b2);

    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)}, {}, config);
    adm_->RestoreReclaims({{"a", {5, {{"gpu", 4000}}}}, {"nobody", {5, {{"gpu", 4000}}}}}, 10);
    b = {Submit(Gpus("b0", "b", 4), 10), Submit(Gpus("b1", "b", 4), 10)};
    adm_->Cycle(11, 1000);
    EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 1);
    adm_->Cycle(306, 1000);
    EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 2);
  }
  // A restored time ahead of now (a clock that ran fast) counts as now: the hold ends on time.
  // With no hold, even such a time holds nothing.
  for (double hold : {0.0, 300.0}) {
    SCOPED_TRACE("future reclaim, hold " + std::to_string(hold));
    AdmissionConfig config;
    config.reclaim_hold_s = hold;
    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)}, {}, config);
    adm_->RestoreReclaims({{"a", {1e9, {{"gpu", 4000}}}}}, 10);
    std::vector<int> b = {Submit(Gpus("b0", "b", 4), 10), Submit(Gpus("b1", "b", 4), 10)};
    adm_->Cycle(11, 1000);
    EXPECT_EQ(CountPhase(b, Phase::kAdmitted), hold > 0 ? 1 : 2);
    adm_->Cycle(311, 1000);
    EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 2);
  }
}

// Two flavours that both match H100s: the one charging picks takes them (the first declared
// among those naming the request's kind, else among the kind-less), so the catch-all `gpu`
// flavour's quota never lets work onto H100s that `h100`'s exhausted quota (1 GPU, no
// borrowing) keeps off them; the A100s take the rest, charged to `gpu`. Both kind-less, both
// kind-named, and a kind-named `h100` beside a kind-less `gpu`.
TEST_F(AdmissionTest, OverlappingFlavoursChargeAndPlaceAlike) {
  using Kind = std::optional<DeviceKind>;
  for (auto [h100_kind, gpu_kind] :
       {std::pair<Kind, Kind>{}, std::pair<Kind, Kind>{DeviceKind::kWhole, DeviceKind::kWhole},
        std::pair<Kind, Kind>{DeviceKind::kWhole, std::nullopt}}) {
    SCOPED_TRACE(std::string(h100_kind ? "named" : "kind-less") + " h100, " +
                 (gpu_kind ? "named" : "kind-less") + " gpu");
    const Fleet fleet = H100AndA100();
    AdmissionConfig config;
    config.flavors = {FlavorSpec{"h100", h100_kind, {"H100"}, {}},
                      FlavorSpec{"gpu", gpu_kind, {}, {}}};
    QueueSpec a = Plain("a");
    a.quotas["h100"] = QuotaSpec{1000, 0, {}};
    a.quotas["gpu"].guaranteed_milli = 8000;
    Make(fleet, {a}, {}, config);
    std::vector<int> ids = SubmitEach("w", "a", 5, 0);
    adm_->Cycle(1, 1000);
    EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 5) << adm_->reason(ids[4]);
    const int on_h100 = PlacedOn(ids, 0);
    EXPECT_EQ(on_h100, 1);
  }
}

// Models no flavour names are not limited: with only H100s quota'd (1 GPU, no borrowing), the
// A100s still take the work the h100 quota turns away.
TEST_F(AdmissionTest, ModelsNoFlavourNamesAreNotLimited) {
  const Fleet fleet = H100AndA100();
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"h100", DeviceKind::kWhole, {"H100"}, {}}};
  QueueSpec a = Plain("a");
  a.quotas["h100"] = QuotaSpec{1000, 0, {}};
  Make(fleet, {a}, {}, config);
  std::vector<int> ids = SubmitEach("w", "a", 5, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 5) << adm_->reason(ids[4]);
  const int on_h100 = PlacedOn(ids, 0);
  EXPECT_EQ(on_h100, 1);
  // The A100s are full and the H100 quota used: the next one waits, though an H100 is free.
  const int w5 = Submit(Gpus("w5", "a", 1), 1);
  adm_->Cycle(2, 1000);
  EXPECT_EQ(adm_->phase(w5), Phase::kPending);
  EXPECT_NE(adm_->reason(w5).find("allowed model"), std::string::npos) << adm_->reason(w5);

  // More than the h100 quota may ever hold is not infeasible where the A100s may take it.
  Make(fleet, {a}, {}, config);
  const int two = Submit(Gpus("two", "a", 2), 0);
  EXPECT_EQ(adm_->phase(two), Phase::kPending) << adm_->reason(two);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(two), Phase::kAdmitted) << adm_->reason(two);
}

// Short of quota in every flavour it may use, higher-priority work preempts in the flavour
// where its queue's own work holds GPUs (a queue with no quota for H100s holds none there),
// whichever flavour is tried first.
TEST_F(AdmissionTest, QuotaPreemptionLooksWhereItsQueueHoldsGpus) {
  for (bool a100_first : {true, false}) {
    SCOPED_TRACE(a100_first ? "a100 first" : "h100 first");
    AdmissionConfig config = PerModelFlavours();
    if (a100_first) std::swap(config.flavors[0], config.flavors[1]);
    QueueSpec a = Plain("a");
    a.quotas["h100"] = QuotaSpec{0, 0, {}};
    a.quotas["a100"] = QuotaSpec{4000, 0, {}};
    Make(H100AndA100(), {a}, {}, config);
    const int lo = Submit(Gpus("lo", "a", 4), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(lo), Phase::kAdmitted) << adm_->reason(lo);
    const int hi = Submit(Gpus("hi", "a", 2, /*priority=*/10), 10);
    const CycleResult cr = adm_->Cycle(10, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(hi);
    EXPECT_EQ(cr.evicted[0].victim, lo);
  }
}

// Refused in every flavour for good, a workload names each flavour's limit (a trial read "no
// unused h200 to lend" of work that may use any GPU, in a queue guaranteed only `gpu`), what a
// sibling keeps by its lending limit among them: it is Unschedulable, not waiting "as room
// frees" for ever (a trial's did, its only sibling lending nothing).
TEST_F(AdmissionTest, AQuotaRefusalNamesTheFlavourItsQueueIsGuaranteed) {
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"h100", DeviceKind::kWhole, {"H100"}, {}},
                    FlavorSpec{"gpu", std::nullopt, {}, {}}};
  QueueSpec a = Leaf("a", 2, /*borrowing=*/0);
  QueueSpec b = Plain("b");
  b.quotas["h100"] = QuotaSpec{4000, 0, 0};  // (lends none of it)
  Make(H100AndA100(), {a, b}, {}, config);
  // (3 GPUs it may never hold: 2 of gpu, its borrowing limit 0; of h100, none b lends.)
  const int never = Submit(Gpus("never", "a", 3), 0);
  EXPECT_EQ(adm_->phase(never), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(never),
            "asks for 3 GPUs; of h100, queue org (its guarantee, the top of the tree) may hold at "
            "most 4, 4 of which queue b keeps by its lending limit; of gpu, queue a (guarantee 2 "
            "+ borrowing limit 0) may hold at most 2");
}

// Refused in two flavours its queue is guaranteed, a wait names both limits, not the first
// alone (a trial's workload, able to run on either model, read only one of them and took the
// other for room).
TEST_F(AdmissionTest, AQuotaRefusalNamesEveryFlavourItsQueueIsGuaranteed) {
  QueueSpec a = Plain("a");
  a.quotas["h100"] = QuotaSpec{1000, 0, {}};
  a.quotas["a100"] = QuotaSpec{1000, 0, {}};
  Make(H100AndA100(), {a}, {}, PerModelFlavours());
  const std::vector<int> ids = SubmitEach("w", "a", 3, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(ids, Phase::kAdmitted), 2);
  const std::string why = adm_->reason(ids[2]);
  EXPECT_NE(why.find("queue a over its borrowing limit for h100: 2/1 GPUs"), std::string::npos)
      << why;
  EXPECT_NE(why.find("; in flavour a100 too: queue a over its borrowing limit for a100: 2/1 GPUs"),
            std::string::npos)
      << why;
}

// FlavorGpus: the fleet's GPUs each flavour selects, as a flavour's status shows them — whole
// GPUs and fractions alike (a `fraction` flavour is not empty), a misspelt model none.
TEST_F(AdmissionTest, FlavourGpusCountWhatEachSelects) {
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"h100", {}, {"H100"}, {}}, FlavorSpec{"typo", {}, {"H10"}, {}},
                    FlavorSpec{"shares", DeviceKind::kFraction, {}, {}},
                    FlavorSpec{"gpu", {}, {}, {}}};
  Make(H100AndA100(), {Plain("a")}, {}, config);
  ASSERT_EQ(adm_->flavor_count(), 4);
  EXPECT_EQ(adm_->FlavorGpus(), (std::vector<int>{4, 0, 8, 4}));
  EXPECT_FALSE(adm_->flavor_managed(0));
}

// A flavour no queue has a quota in takes nothing: its GPUs stay with the flavour that limits
// them (here the catch-all), so declaring it lifts no limit.
TEST_F(AdmissionTest, UnlimitedFlavourLeavesItsGpusToTheLimitingOne) {
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"h100", DeviceKind::kWhole, {"H100"}, {}},
                    FlavorSpec{"gpu", {}, {}, {}}};
  QueueSpec a = Plain("a");
  a.quotas["gpu"] = QuotaSpec{2000, 0, {}};
  Make(H100AndA100(), {a}, {}, config);
  std::vector<int> ids = SubmitEach("w", "a", 4, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 2) << adm_->reason(ids[3]);
}

// flavorFungibility.whenCanBorrow. Queue a is guaranteed 4 A100s and may borrow H100s, which b
// is guaranteed but uses only 2 of; the H100 node, fuller, is where packing would put a's work.
// With TryNextFlavor a fills its A100s first (where it stays within its guarantee) and borrows
// only when they are full; by default (Borrow) too, as the flavours a queue is guaranteed come
// first, as a Kueue ClusterQueue lists its own flavours before those it borrows (until session
// 60 the default let packing borrow H100s, which b's next arrival took back by eviction).
TEST_F(AdmissionTest, WhenCanBorrowTryNextFlavorFillsTheGuaranteeFirst) {
  for (auto when : {QueueSpec::WhenCanBorrow::kBorrow, QueueSpec::WhenCanBorrow::kTryNextFlavor}) {
    const bool try_next = when == QueueSpec::WhenCanBorrow::kTryNextFlavor;
    SCOPED_TRACE(try_next ? "TryNextFlavor" : "Borrow");
    AdmissionConfig config = PerModelFlavours();
    QueueSpec a = Plain("a"), b = Plain("b");
    a.quotas["a100"].guaranteed_milli = 4000;
    a.quotas["h100"].guaranteed_milli = 0;
    b.quotas["h100"].guaranteed_milli = 4000;
    a.when_can_borrow = when;
    Make(H100AndA100(), {a, b}, {}, config);
    const int b0 = Submit(Gpus("b0", "b", 2), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(b0), Phase::kAdmitted);
    std::vector<int> mine = SubmitEach("a", "a", 4, 2);
    adm_->Cycle(3, 1000);
    ASSERT_EQ(CountPhase(mine, Phase::kAdmitted), 4);
    EXPECT_EQ(PlacedOn(mine, 0), 0);
    // b's next arrival within its guarantee: nothing of b's was borrowed, nothing is evicted.
    Workload b1_spec = Gpus("b1", "b", 2);
    b1_spec.pod_sets[0].device.models = {"H100"};
    const int b1 = Submit(b1_spec, 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_TRUE(r.evicted.empty()) << adm_->reason(b1);
    EXPECT_EQ(adm_->phase(b1), Phase::kAdmitted) << adm_->reason(b1);
    // Its A100s full, a still borrows H100s.
    const int a4 = Submit(Gpus("a4", "a", 1), 12);
    adm_->Cycle(13, 1000);
    EXPECT_EQ(adm_->phase(a4), Phase::kPending) << "H100s are full";
    adm_->Finish(b0, 14);
    adm_->Cycle(15, 1000);
    EXPECT_EQ(adm_->phase(a4), Phase::kAdmitted) << adm_->reason(a4);
  }
}

// Elastic growth: a gang admitted with fewer pods than asked takes more as room frees, after
// what waits in its queue, and only as far as its quota allows. Queue a may hold 10 of the 12
// GPUs; its gang of six 1-GPU pods starts with the 2 left beside 8 one-GPU fillers.
TEST_F(AdmissionTest, ElasticGrowthAddsPodsAsRoomFrees) {
  for (bool grow : {true, false}) {
    SCOPED_TRACE(grow ? "elasticGrowth" : "off");
    AdmissionConfig config;
    config.elastic_growth = grow;
    Make(Nodes(3, 4), {Leaf("a", 10, /*borrowing=*/0), Leaf("b", 2)}, {}, config);
    const std::vector<int> fillers = AdmitEach("f", "a", 8);
    ASSERT_EQ(fillers.size(), 8u);
    Workload gang = Gpus("gang", "a", 1, 0, 6, /*gang=*/true);
    gang.pod_sets[0].min_count = 2;
    const int g = Submit(gang, 2);
    adm_->Cycle(3, 1000);
    ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
    adm_->PodsReady(g);
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{2});
    // Not grown, it says why: a's 10 GPUs are all held.
    adm_->Cycle(4, 1000);
    if (grow)
      EXPECT_EQ(adm_->growth_why(g).rfind("its queue's GPU quota holds no more", 0), 0u)
          << adm_->growth_why(g);
    // Two fillers end: the gang takes their room, up to a's 10 GPUs, and no further.
    adm_->Finish(fillers[0], 4);
    adm_->Finish(fillers[1], 4);
    CycleResult cr = adm_->Cycle(5, 1000);
    EXPECT_EQ(cr.grown, grow ? std::vector<int>{g} : std::vector<int>{});
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{grow ? 4 : 2});
    if (!grow) continue;
    EXPECT_NE(adm_->reason(g).find("admitted 4 of 6 pods"), std::string::npos) << adm_->reason(g);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 10000);
    // Two more end while a 2-GPU workload waits in a: it goes first, and takes that quota.
    const int w = Submit(Gpus("w", "a", 2), 6);
    adm_->Finish(fillers[2], 6);
    adm_->Finish(fillers[3], 6);
    cr = adm_->Cycle(7, 1000);
    EXPECT_EQ(adm_->phase(w), Phase::kAdmitted) << adm_->reason(w);
    EXPECT_TRUE(cr.grown.empty());
    EXPECT_EQ(adm_->growth_why(g).rfind("its queue's GPU quota holds no more", 0), 0u)
        << adm_->growth_why(g);
    // It ends: the gang grows by 2 to its six pods.
    adm_->Finish(w, 8);
    cr = adm_->Cycle(9, 1000);
    EXPECT_EQ(cr.grown, std::vector<int>{g});
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{6});
    EXPECT_EQ(adm_->assignments(g).size(), 6u);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 10000);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 10000);
    // Finished, it gives back every pod's GPUs.
    adm_->Finish(g, 10);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 4000);
  }
  // Restored as the server does each cycle, it grows only where its options let it (its pods
  // all running, its tenant not held over budget, on the queue it asked for).
  for (bool may : {false, true}) {
    SCOPED_TRACE(may ? "may grow" : "may not");
    Make(Nodes(1, 4), {Leaf("a", 4)});
    Workload gang = Gpus("r", "a", 1, 0, 4, /*gang=*/true);
    gang.pod_sets[0].min_count = 1;
    SubmitOptions options;
    options.pod_counts = {2};
    options.may_grow = may;
    std::vector<Assignment> two = OnGpus(0, {0});
    two.push_back(OnGpus(0, {1})[0]);
    auto id = adm_->Restore(gang, two, 0, options);
    ASSERT_TRUE(id.ok()) << id.status().message();
    CycleResult cr = adm_->Cycle(1, 1000);
    EXPECT_EQ(cr.grown.size(), may ? 1u : 0u);
    EXPECT_EQ(adm_->pod_counts(*id), std::vector<int>{may ? 4 : 2});
  }
  // Grown to its queue's guarantee of 3 with room beside it, it says why it grows no further:
  // with no borrowing allowed, the quota; with borrowing, that it would hold part guaranteed
  // and part borrowed (a trial read both at once under a borrowing limit of 0).
  for (bool may_borrow : {false, true}) {
    SCOPED_TRACE(may_borrow ? "may borrow" : "borrowingLimit 0");
    AdmissionConfig config;
    config.elastic_growth = true;
    config.elastic_shrink = false;  // (with it, it may grow by pods a shrink takes back)
    Make(Nodes(1, 8),
         {Leaf("a", 3, may_borrow ? std::nullopt : std::optional<double>(0)), Leaf("b", 5)}, {},
         config);
    Workload gang = Gpus("r", "a", 1, 0, 6, /*gang=*/true);
    gang.pod_sets[0].min_count = 1;
    SubmitOptions options;
    options.pod_counts = {2};
    std::vector<Assignment> two = OnGpus(0, {0});
    two.push_back(OnGpus(0, {1})[0]);
    auto id = adm_->Restore(gang, two, 0, options);
    ASSERT_TRUE(id.ok()) << id.status().message();
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->pod_counts(*id), std::vector<int>{3});
    adm_->Cycle(2, 1000);
    EXPECT_EQ(adm_->pod_counts(*id), std::vector<int>{3});
    EXPECT_EQ(adm_->growth_why(*id),
              may_borrow ? "it would hold part of its queue's guarantee and borrow the rest (a "
                           "reclaim could not take the borrowed part back alone)"
                         : "its queue's GPU quota holds no more of its pods (queue a over its "
                           "borrowing limit for gpu: 4/3 GPUs)");
  }
}

// The pods a shrink takes from work that is no gang lose what they ran, from when the workload
// last grew to its size (the last pods are the ones growth added), not from its start (a trial
// saw 8 pods grown back at 06:33 said to lose their run since 06:05).
TEST_F(AdmissionTest, AShrinksLossCountsFromWhenThePodsTakenJoined) {
  // (1) Restored as the server does, its pods' start times known: grown to 8 at 1000, the pod
  // taken lost its run since then. (2) Its last resize a shrink (at 1500), every pod running
  // since 0: the pod taken lost its run since 0, not since the shrink (a review: a restored
  // workload's last resize is no growth). (3) One Admitter, no start times: by its sizes.
  // (4) Four pods taken, two started at 500 and two grown in at 1000: each counted from its own
  // start, 2 x 1500 + 2 x 1000 (a trial: all from the first one's start).
  for (int variant = 1; variant <= 4; ++variant) {
    SCOPED_TRACE(variant);
    Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 8)});
    Workload w = Gpus("w", "a", 1, 0, 8);
    w.pod_sets[0].min_count = 2;
    std::vector<Assignment> on;
    for (int i = 0; i < 8; ++i) on.push_back(OnGpus(i / 4, {i % 4})[0]);
    int id = -1;
    double expected = 0;
    if (variant != 3) {
      SubmitOptions options;
      options.started_at = 0;
      options.resized_at = variant == 2 ? 1500 : 1000;
      for (int i = 0; i < 8; ++i)
        options.pod_started["main-" + std::to_string(i)] = variant == 1 && i >= 2   ? 1000
                                                           : variant == 4 && i >= 6 ? 1000
                                                           : variant == 4 && i >= 4 ? 500
                                                                                    : 0;
      auto restored = adm_->Restore(w, on, 0, options);
      ASSERT_TRUE(restored.ok()) << restored.status().message();
      id = *restored;
      expected = variant == 1 ? 1000 : variant == 2 ? 2000 : 5000;
    } else {
      // Admitted with 2 of its 8 pods at 0 (the rest of the fleet held), grown at 1000.
      Workload fill = Gpus("fill", "b", 1, 0, 6);
      const int hold = Submit(fill, 0);
      adm_->Cycle(0, 1000);
      ASSERT_EQ(adm_->phase(hold), Phase::kAdmitted) << adm_->reason(hold);
      id = Submit(w, 0);
      adm_->Cycle(0, 1000);
      ASSERT_EQ(adm_->phase(id), Phase::kAdmitted) << adm_->reason(id);
      adm_->PodsReady(id);
      adm_->Finish(hold, 1000);
      adm_->Cycle(1000, 1000);
      ASSERT_EQ(adm_->pod_counts(id), std::vector<int>{8}) << adm_->reason(id);
      expected = 1000;
    }
    const int b = Submit(Gpus("b0", "b", variant == 4 ? 4 : 1), 1990);
    CycleResult cr = adm_->Cycle(2000, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(b);
    EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), id);
    const std::string lost = std::to_string(static_cast<int>(expected)) + " GPU-seconds lost";
    EXPECT_NE(adm_->reason(b).find(lost), std::string::npos) << adm_->reason(b);
    EXPECT_NE(adm_->reason(id).find("they run again later, " + lost), std::string::npos)
        << adm_->reason(id);
  }
}

// Elastic shrink: a reclaim takes an elastic victim's pods beyond its minCount, the last ones,
// and leaves it running with the rest, before it evicts any workload whole; the pods taken keep
// their GPUs until they stop (Terminated), then are gone. Queue a (no guarantee) borrows the
// whole fleet for gang g, eight 1-GPU pods of which two must run; b (guaranteed all 8) takes
// 1, then 5 more, shrinking g to its two; then g is at its least, and b's next pod evicts it
// whole. Off, the first reclaim evicts g whole.
TEST_F(AdmissionTest, ElasticShrinkTakesSparePodsBeforeEvictingWhole) {
  for (bool shrink : {true, false}) {
    SCOPED_TRACE(shrink ? "elasticShrink" : "off");
    AdmissionConfig config;
    config.elastic_shrink = shrink;
    Make(Nodes(2, 4), {Leaf("a", 0), Leaf("b", 8)}, {}, config);
    Workload gang = Gpus("g", "a", 1, 0, 8, /*gang=*/true);
    gang.pod_sets[0].min_count = 2;
    const int g = Submit(gang, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
    adm_->PodsReady(g);
    const std::vector<Assignment> before = adm_->assignments(g);
    const int w1 = Submit(Gpus("w1", "b", 1), 10);
    CycleResult cr = adm_->Cycle(10, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u);
    const int f1 = cr.evicted[0].victim;
    if (!shrink) {
      EXPECT_EQ(f1, g);
      EXPECT_EQ(adm_->phase(g), Phase::kEvicting);
      continue;
    }
    EXPECT_NE(f1, g);
    EXPECT_EQ(adm_->fragment_of(f1), g);
    EXPECT_EQ(adm_->phase(g), Phase::kAdmitted);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{7});
    // The pod taken is its last; the seven it keeps stay where they were.
    const auto where = [](const std::vector<Assignment>& as) {
      std::vector<std::pair<int, int>> out;  // (node, device)
      for (const Assignment& a : as)
        for (const DeviceShare& d : a.devices) out.push_back({a.node, d.device});
      return out;
    };
    const auto all = where(before);
    EXPECT_EQ(where(adm_->assignments(f1)), decltype(all)(all.begin() + 7, all.end()));
    EXPECT_EQ(where(adm_->assignments(g)), decltype(all)(all.begin(), all.begin() + 7));
    EXPECT_NE(adm_->reason(w1).find("preempting 1 pod(s) of 1 elastic workload(s) as queue b "
                                    "reclaims its guarantee, 0 GPU-seconds lost"),
              std::string::npos)
        << adm_->reason(w1);
    EXPECT_NE(adm_->reason(g).find("shrunk by 1 pod(s) for b/w1"), std::string::npos)
        << adm_->reason(g);
    // Until it stops, the pod keeps its GPU (charged to a, being evicted).
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
    adm_->Terminated(f1, 40);
    EXPECT_EQ(adm_->phase(f1), Phase::kFinished);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 7000);
    adm_->Cycle(40, 1000);
    EXPECT_EQ(adm_->phase(w1), Phase::kAdmitted) << adm_->reason(w1);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
    // Five more: g gives five pods and is at its least.
    const int w2 = Submit(Gpus("w2", "b", 1, 0, 5, /*gang=*/true), 50);
    cr = adm_->Cycle(50, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u);
    EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), g);
    EXPECT_EQ(adm_->assignments(cr.evicted[0].victim).size(), 5u);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{2});
    adm_->Terminated(cr.evicted[0].victim, 80);
    adm_->Cycle(80, 1000);
    EXPECT_EQ(adm_->phase(w2), Phase::kAdmitted) << adm_->reason(w2);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 2000);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("b")), 6000);
    // One more: nothing left to spare, so g goes whole.
    Submit(Gpus("w3", "b", 1), 90);
    cr = adm_->Cycle(90, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u);
    EXPECT_EQ(cr.evicted[0].victim, g);
    EXPECT_EQ(adm_->phase(g), Phase::kEvicting);
    adm_->Terminated(g, 120);
    EXPECT_EQ(adm_->phase(g), Phase::kPending);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{8});  // it asks for all again
  }
}

// A victim admitted earlier in the same cycle has not started: it is taken back and waits
// again at once (no grace period, not an eviction), and its preemptor starts next cycle. In
// arrival order (strict_priority off) x is admitted before higher-priority h, which needs the
// whole node.
TEST_F(AdmissionTest, AVictimAdmittedThisCycleIsTakenBackNotEvicted) {
  AdmissionConfig config;
  config.strict_priority = false;
  Make(Nodes(1, 8), {Leaf("a", 8)}, {}, config);
  const int x = Submit(Gpus("x", "a", 4), 0);
  const int h = Submit(Gpus("h", "a", 8, /*priority=*/10), 0.5);
  CycleResult cr = adm_->Cycle(1, 1000);
  EXPECT_TRUE(cr.admitted.empty());
  EXPECT_TRUE(cr.evicted.empty());
  EXPECT_EQ(cr.taken_back, std::vector<int>{x});  // (so a caller runs the next cycle)
  EXPECT_EQ(adm_->phase(x), Phase::kPending);
  EXPECT_NE(adm_->reason(x).find("admitted and taken back in the same cycle: preempted by a/h ("),
            std::string::npos)
      << adm_->reason(x);
  EXPECT_NE(adm_->reason(h).find(
                "taking back 1 workload(s) admitted this cycle before they "
                "started (a/x) for higher-priority work in queue a (at the quota of queue "
                "org); "
                "it starts next cycle"),
            std::string::npos)
      << adm_->reason(h);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 0);  // x charges nothing
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);    // the node is held for h
  cr = adm_->Cycle(2, 1000);
  EXPECT_EQ(cr.admitted, std::vector<int>{h});
  EXPECT_EQ(adm_->phase(x), Phase::kPending);
}

// Short of its own queue's quota (not of room), higher-priority work takes pods of its queue's
// lower-priority elastic work rather than evicting it whole: the fleet has room, the queue may
// not hold more than 8 GPUs, and the elastic gang holds all 8.
TEST_F(AdmissionTest, ElasticShrinkFreesItsOwnQueuesQuota) {
  for (bool shrink : {true, false}) {
    SCOPED_TRACE(shrink ? "elasticShrink" : "off");
    AdmissionConfig config;
    config.elastic_shrink = shrink;
    Make(Nodes(4, 4), {Leaf("a", 8, /*borrowing=*/0.0), Leaf("b", 8)}, {}, config);
    Workload gang = Gpus("g", "a", 1, /*priority=*/0, 8, /*gang=*/true);
    gang.pod_sets[0].min_count = 2;
    const int g = Submit(gang, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
    const int hi = Submit(Gpus("hi", "a", 3, /*priority=*/10), 10);
    CycleResult cr = adm_->Cycle(10, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(hi);
    if (!shrink) {
      EXPECT_EQ(cr.evicted[0].victim, g);
      continue;
    }
    const int f = cr.evicted[0].victim;
    EXPECT_EQ(adm_->fragment_of(f), g);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{5});  // three pods give back the quota
    EXPECT_EQ(adm_->assignments(f).size(), 3u);
    EXPECT_NE(adm_->reason(hi).find("preempting 3 pod(s) of 1 elastic workload(s) for "
                                    "higher-priority work"),
              std::string::npos)
        << adm_->reason(hi);
    adm_->Terminated(f, 40);
    adm_->Cycle(40, 1000);
    EXPECT_EQ(adm_->phase(hi), Phase::kAdmitted) << adm_->reason(hi);
    EXPECT_EQ(adm_->phase(g), Phase::kAdmitted);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
    // Four more GPUs at high priority would take g below its least (two pods): it goes whole.
    Submit(Gpus("hi2", "a", 4, /*priority=*/10), 50);
    cr = adm_->Cycle(50, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u);
    EXPECT_EQ(cr.evicted[0].victim, g);
  }
}

// Two reclaims in one cycle may each take pods of one elastic workload (the server writes both
// marks at once): each fragment names the pods it took, the second the ones before the
// first's; a workload shrunk in the cycle is not evicted whole in it.
TEST_F(AdmissionTest, ElasticShrinkMayTakeFromOneWorkloadTwiceInACycle) {
  Make(Nodes(2, 4), {Leaf("a", 0), Leaf("b", 8)});
  Workload gang = Gpus("g", "a", 1, 0, 8, /*gang=*/true);
  gang.pod_sets[0].min_count = 2;
  const int g = Submit(gang, 0);
  adm_->Cycle(1, 1000);
  adm_->PodsReady(g);
  Submit(Gpus("x1", "b", 1), 10);
  Submit(Gpus("x2", "b", 1), 10);
  CycleResult cr = adm_->Cycle(10, 1000);
  ASSERT_EQ(cr.evicted.size(), 2u);
  for (const Eviction& e : cr.evicted) EXPECT_EQ(adm_->fragment_of(e.victim), g);
  EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{6});
  using Pods = std::vector<std::pair<int, int>>;
  EXPECT_EQ(adm_->fragment_pods(cr.evicted[0].victim), (Pods{{0, 7}}));
  EXPECT_EQ(adm_->fragment_pods(cr.evicted[1].victim), (Pods{{0, 6}}));
  // Four more in one cycle: g gives what it spares (four pods), and the fifth waits rather
  // than evicting g whole in the cycle it shrank.
  for (int i = 0; i < 5; ++i) Submit(Gpus("y" + std::to_string(i), "b", 1), 20);
  cr = adm_->Cycle(20, 1000);
  ASSERT_EQ(cr.evicted.size(), 4u);
  for (const Eviction& e : cr.evicted) EXPECT_NE(e.victim, g);
  EXPECT_EQ(adm_->phase(g), Phase::kAdmitted);
  EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{2});
}

// A tree's root with a borrowing limit holds the tree to it even for a queue within its own
// guarantee (a session-25 reading: org at 20 of its 16 + 0, its borrower left running): the
// queue takes its guarantee back from the sibling that borrowed it instead.
TEST_F(AdmissionTest, ARootsBorrowingLimitHoldsItsTreeAndTheGuaranteeIsReclaimed) {
  MakeCappedTree();
  const std::vector<int> bs = SubmitEach("b", "b", 6, 0, 2);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(bs, Phase::kAdmitted), 6);
  const std::vector<int> as = SubmitEach("a", "a", 2, 5, 4);
  CycleResult cr = adm_->Cycle(10, 1000);
  EXPECT_EQ(CountPhase(as, Phase::kAdmitted), 1) << adm_->reason(as[1]);
  EXPECT_EQ(cr.evicted.size(), 2u) << adm_->reason(as[1]);
  EXPECT_LE(adm_->usage_milli(adm_->QueueIndex("org")), 16'000);
  for (const auto& e : cr.evicted) EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "b");
  EXPECT_NE(adm_->reason(as[1]).find("reclaims its guarantee"), std::string::npos)
      << adm_->reason(as[1]);
}

// A reclaim for quota (the tree is at its root's limit, though the fleet has room) takes an
// elastic borrower's spare pods too, rather than evicting it whole (a user-style review saw a
// 6-pod elastic gang evicted whole, its queue taken below its guarantee, for 8 GPUs); only
// what its queue borrows.
TEST_F(AdmissionTest, ElasticShrinkServesAReclaimForQuota) {
  MakeCappedTree();
  ASSERT_TRUE(adm_->Restore(Gpus("a0", "a", 4), OnGpus(0, {0, 1, 2, 3}), 0).ok());
  Workload gang = Gpus("g", "b", 2, 0, 6, /*gang=*/true);
  gang.pod_sets[0].min_count = 2;
  const int g = Submit(gang, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{6}) << adm_->reason(g);
  adm_->PodsReady(g);
  const int w = Submit(Gpus("a1", "a", 4), 10);
  CycleResult cr = adm_->Cycle(10, 1000);
  ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(w);
  EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), g) << adm_->reason(w);
  EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{4}) << adm_->reason(g);
  EXPECT_EQ(adm_->phase(g), Phase::kAdmitted);
  adm_->Terminated(cr.evicted[0].victim, 40);
  adm_->Cycle(40, 1000);
  EXPECT_EQ(adm_->phase(w), Phase::kAdmitted) << adm_->reason(w);
  // More than b borrows: b keeps its guarantee (4 pods = 8 GPUs), a waits.
  const int more = Submit(Gpus("a2", "a", 2), 50);
  cr = adm_->Cycle(50, 1000);
  EXPECT_TRUE(cr.evicted.empty()) << adm_->reason(more);
  EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{4});
}

// A gang that prefers one leaf, planned pod by pod where a shrink for quota freed room (the
// plan knows no topology), goes compact on one leaf once the pods taken stop, where a leaf has
// room for it all (a researcher trial saw it split over two leaves, one pod on the node the
// shrink freed).
TEST_F(AdmissionTest, AGangPlannedForQuotaGoesCompactWhereItCan) {
  AdmissionConfig config;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16'000, int64_t{0}, {}};
  config.queues = {org, Leaf("a", 8), Leaf("b", 8)};
  Fleet fleet = Nodes(8, 4);
  for (int n = 0; n < 8; ++n) fleet.nodes[n].leaf = n < 3 ? "leaf-1" : "leaf-2";
  MakeTree(fleet, config, {"a", "b"});
  Workload elastic = Gpus("g", "b", 2, 0, 6, /*gang=*/true);
  elastic.pod_sets[0].min_count = 2;
  const int g = Submit(elastic, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{6}) << adm_->reason(g);
  adm_->PodsReady(g);
  Workload pair = Gpus("pair", "a", 4, 0, 2, /*gang=*/true);
  pair.topology = TopologyConstraint{TopologyLevel::kLeaf, false};
  const int w = Submit(pair, 10);
  CycleResult cr = adm_->Cycle(10, 1000);
  ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(w);
  EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), g);
  // Its plan, the room held (and shown) while the pod stops, is in one leaf too.
  std::set<std::string> planned;
  for (const Assignment& a : adm_->plan(w)) planned.insert(fleet.nodes[a.node].leaf);
  EXPECT_EQ(planned.size(), 1u) << *planned.begin() << " and " << *planned.rbegin();
  adm_->Terminated(cr.evicted[0].victim, 40);
  adm_->Cycle(40, 1000);
  ASSERT_EQ(adm_->phase(w), Phase::kAdmitted) << adm_->reason(w);
  std::set<std::string> leaves;
  for (const Assignment& a : adm_->assignments(w)) leaves.insert(fleet.nodes[a.node].leaf);
  EXPECT_EQ(leaves.size(), 1u) << *leaves.begin() << " and " << *leaves.rbegin();
}

// Elastic shrink keeps lenders at their guarantee, and restores as the server rebuilds it.
// Nodes of 4, 4 and 1 GPUs (the last with too few cores for any pod); a, guaranteed 5, runs
// gang g on the two 4-GPU nodes (8 pods, two needed), lending b (guaranteed 4) 3: b's 3-GPU
// pod shrinks g by three. Its 4-GPU pod takes a to 4, below its guarantee: g, bigger than a's
// whole guarantee, runs on borrowed GPUs and may go (as a whole victim may), and shrinking it
// by four loses less than evicting it. A fragment restored beside its workload holds its GPUs
// until Terminated.
TEST_F(AdmissionTest, ElasticShrinkKeepsLendersAtTheirGuarantee) {
  for (auto [want, fair] : std::vector<std::pair<int, bool>>{{3, false}, {4, false}, {4, true}}) {
    SCOPED_TRACE(std::to_string(want) + (fair ? " GPUs, fair-share preemption" : " GPUs"));
    Fleet fleet = Nodes(2, 4);
    fleet.nodes.push_back(GpuNode("small", 1));
    fleet.nodes.back().cpu = MilliCpu(500);  // too few cores for any pod here
    AdmissionConfig config;
    config.fair_share_preemption = fair;
    Make(fleet, {Leaf("a", 5), Leaf("b", 4)}, {}, config);
    Workload gang = Gpus("g", "a", 1, 0, 8, /*gang=*/true);
    gang.pod_sets[0].min_count = 2;
    const int g = Submit(gang, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{8}) << adm_->reason(g);
    adm_->PodsReady(g);
    const int w = Submit(Gpus("w", "b", want), 10);
    CycleResult cr = adm_->Cycle(10, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(w);
    EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), g);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{8 - want});
  }
  {
    Make(Nodes(2, 4), {Leaf("a", 0), Leaf("b", 8)});
    Workload gang = Gpus("g", "a", 1, 0, 8, /*gang=*/true);
    gang.pod_sets[0].min_count = 2;
    SubmitOptions options;
    options.pod_counts = {6};
    std::vector<Assignment> kept, leaving;
    for (int n = 0; n < 2; ++n)
      for (int d = 0; d < 4; ++d) (n == 1 && d >= 2 ? leaving : kept).push_back(OnGpus(n, {d})[0]);
    auto g = adm_->Restore(gang, kept, 0, options);
    ASSERT_TRUE(g.ok()) << g.status().message();
    auto f = adm_->RestoreFragment(*g, {{0, leaving[0]}, {0, leaving[1]}});
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ(adm_->phase(*f), Phase::kEvicting);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
    EXPECT_FALSE(adm_->RestoreFragment(*g, {{3, leaving[0]}}).ok());
    adm_->Terminated(*f, 30);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 6000);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 6000);
  }
}

// Growth and the guarantees of others. (1) Without elastic shrink, growth past its queue's
// guarantee only where the queue's other work fills it: a workload holding part guarantee and
// part borrowed GPUs could never be reclaimed (its queue would drop below its guarantee without
// it), so b, guaranteed 4, could not take its GPUs back. With shrink (the default) it grows,
// since a reclaim takes the pods beyond its least back. (2) A workload whose guarantee will let it
// reclaim once its victims' minimum runtime has passed waits for that rather than start in part and
// give the claim up.
// Shrunk by a reclaim to a size that still borrows, an elastic workload grows back once the
// room frees: all it borrows is pods beyond its minCount, which a shrink takes again (a trial
// saw one stay at 4 of 12 beside idle GPUs for good).
TEST_F(AdmissionTest, AShrunkElasticWorkloadGrowsBackWhileItStillBorrows) {
  Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 6)});
  Workload elastic = Gpus("g", "a", 1, 0, 8, /*gang=*/true);
  elastic.pod_sets[0].min_count = 1;
  const int g = Submit(elastic, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{8});
  adm_->PodsReady(g);
  const int b1 = Submit(Gpus("b1", "b", 2), 2);
  CycleResult cr = adm_->Cycle(3, 1000);
  ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(b1);
  adm_->Terminated(cr.evicted[0].victim, 33);
  adm_->Cycle(33, 1000);
  ASSERT_EQ(adm_->phase(b1), Phase::kAdmitted) << adm_->reason(b1);
  ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{6});  // (2 of its guarantee, 4 borrowed)
  adm_->Finish(b1, 40);
  cr = adm_->Cycle(41, 1000);
  EXPECT_EQ(cr.grown, std::vector<int>{g});
  EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{8});
}

// Elastic work that may not be preempted starts and grows within its queue's guarantee only,
// and says that is why, not that the quota holds no more (a trial's then saw other work of its
// queue borrow beside it).
TEST_F(AdmissionTest, ElasticWorkThatMayNotBePreemptedSaysItMayNotBorrow) {
  Make(Nodes(2, 8), {Leaf("qa", 4), Leaf("qb", 12)});
  Workload w = Gpus("npe", "qa", 1, 0, 8);
  w.pod_sets[0].min_count = 2;
  SubmitOptions pinned;
  pinned.preemptible = false;
  const int id = Submit(w, 0, pinned);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(id), Phase::kAdmitted) << adm_->reason(id);
  EXPECT_EQ(adm_->pod_counts(id), std::vector<int>{4});
  EXPECT_EQ(adm_->partial_why(id),
            "its queue's guarantee holds no more now: non-preemptible work may not borrow "
            "(nobody could take the room back)");
  adm_->PodsReady(id);
  adm_->Cycle(2, 1000);
  EXPECT_EQ(adm_->pod_counts(id), std::vector<int>{4});
  EXPECT_EQ(adm_->growth_why(id),
            "queue qa's non-preemptible work would hold 5/4 GPUs of gpu, past its guarantee: "
            "non-preemptible work may not borrow (nobody could take the room back)");
}

// A reclaim's shrink takes the lowest-priority elastic work's pods first, wherever it runs (a
// trial's shrank priority-10 work on the first node while priority-0 work on the next kept all
// its pods), and room that frees grows the highest-priority work first, whichever the Admitter
// saw first (a trial's priority-0 work took it all).
TEST_F(AdmissionTest, ElasticShrinkAndGrowthGoByPriority) {
  // Restores "important" (priority 10) and "scavenger" (priority 0) of queue a, 8 GPU pods that
  // may run with 2, with `pods` each, scavenger first where `low_first`, on nodes 0 and 1 in
  // that order: their ids, important's first.
  const auto restore = [&](bool low_first, int pods) -> std::vector<int> {
    std::vector<int> ids(2, -1);
    for (int k : low_first ? std::vector<int>{1, 0} : std::vector<int>{0, 1}) {
      Workload w = Gpus(k == 0 ? "important" : "scavenger", "a", 1, k == 0 ? 10 : 0, 8, true);
      w.pod_sets[0].min_count = 2;
      const int node = (k == 1) == low_first ? 0 : 1;
      std::vector<Assignment> on;
      for (int d = 0; d < pods; ++d) on.push_back(OnGpus(node, {d})[0]);
      SubmitOptions o;
      o.pod_counts = {pods};
      auto id = adm_->Restore(w, on, 0, o);
      EXPECT_TRUE(id.ok()) << id.status().message();
      if (id.ok()) ids[k] = *id;
    }
    return ids;
  };
  for (bool low_first : {true, false}) {
    SCOPED_TRACE(low_first ? "scavenger restored first, on node 0" : "important first, on node 0");
    Make(Nodes(2, 8), {Leaf("a", 4), Leaf("b", 12)});
    const std::vector<int> ids = restore(low_first, 8);
    const int b = Submit(Gpus("b", "b", 1, 0, 6), 100);
    CycleResult cr = adm_->Cycle(100, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(b);
    EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), ids[1]);
    EXPECT_EQ(adm_->pod_counts(ids[0]), std::vector<int>{8});
    EXPECT_EQ(adm_->pod_counts(ids[1]), std::vector<int>{2});
  }
  for (bool low_first : {true, false}) {
    SCOPED_TRACE(low_first ? "scavenger restored first" : "important first");
    Make(Nodes(2, 8), {Leaf("a", 4), Leaf("b", 12)});
    const std::vector<int> ids = restore(low_first, 2);
    for (int d = 2; d < 8; ++d)  // (room for 6 more pods, on one node)
      adm_->Reserve(Assignment{.node = 1, .devices = {{.device = d, .milli = 1000}}}, PodRequest{});
    for (int id : ids) adm_->PodsReady(id);
    CycleResult cr = adm_->Cycle(100, 1000);
    EXPECT_EQ(cr.grown, std::vector<int>{ids[0]});
    EXPECT_EQ(adm_->pod_counts(ids[0]), std::vector<int>{8});
    EXPECT_EQ(adm_->pod_counts(ids[1]), std::vector<int>{2});
  }
}

TEST_F(AdmissionTest, ElasticGrowthLeavesOthersTheirGuarantee) {
  auto elastic = [](const std::string& name, const std::string& queue, int pods, int least) {
    Workload w = Gpus(name, queue, 1, 0, pods, /*gang=*/true);
    w.pod_sets[0].min_count = least;
    return w;
  };
  for (bool shrink : {false, true}) {  // (1)
    SCOPED_TRACE(shrink ? "elasticShrink" : "no shrink");
    AdmissionConfig config;
    config.elastic_shrink = shrink;
    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)}, {}, config);
    const int b0 = Submit(Gpus("b0", "b", 4), 0);
    adm_->Cycle(1, 1000);
    const int g = Submit(elastic("g", "a", 8, 4), 2);
    adm_->Cycle(3, 1000);
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{4}) << adm_->reason(g);
    adm_->PodsReady(g);
    adm_->Finish(b0, 4);
    CycleResult cr = adm_->Cycle(5, 1000);
    const int b1 = Submit(Gpus("b1", "b", 4), 6);
    if (!shrink) {
      EXPECT_TRUE(cr.grown.empty()) << "it would hold a's 4 and 4 of b's";
      adm_->Cycle(7, 1000);
      EXPECT_EQ(adm_->phase(b1), Phase::kAdmitted) << adm_->reason(b1);
      continue;
    }
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{8}) << "it borrows b's 4";
    adm_->PodsReady(g);
    cr = adm_->Cycle(7, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(b1);
    EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), g);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{4});
    adm_->Terminated(cr.evicted[0].victim, 37);
    adm_->Cycle(37, 1000);
    EXPECT_EQ(adm_->phase(b1), Phase::kAdmitted) << adm_->reason(b1);
  }
  {  // ... and where whole pods would not come back to its guarantee (a guaranteed 6, pods of
     // 4) when the workload alone would hold more than the guarantee: a reclaim's shrink takes
     // the pods past it back, and a is left with the one pod it held before it grew. (Before,
     // it did not grow: a trial's 142m MIG slices stayed 14 against a guarantee of 2 for good.)
    Make(Nodes(4, 4), {Leaf("a", 6), Leaf("b", 10)});
    const int b0 = Submit(Gpus("b0", "b", 4, 0, 3), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(b0), Phase::kAdmitted) << adm_->reason(b0);
    Workload four = Gpus("g", "a", 4, 0, 3, /*gang=*/true);
    four.pod_sets[0].min_count = 1;
    const int g = Submit(four, 2);
    adm_->Cycle(3, 1000);
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{1}) << adm_->reason(g);
    adm_->PodsReady(g);
    adm_->Finish(b0, 4);
    EXPECT_EQ(adm_->Cycle(5, 1000).grown, std::vector<int>{g});
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{3});  // (all it borrows is pods past 1)
    adm_->PodsReady(g);
    const int b1 = Submit(Gpus("b1", "b", 2, 0, 5, /*gang=*/true), 6);  // b's 10 back
    CycleResult cr = adm_->Cycle(7, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(b1);
    EXPECT_EQ(adm_->fragment_of(cr.evicted[0].victim), g);
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{1});
    adm_->Terminated(cr.evicted[0].victim, 37);
    adm_->Cycle(37, 1000);
    EXPECT_EQ(adm_->phase(b1), Phase::kAdmitted) << adm_->reason(b1);
  }
  {  // ... and grows past it where a's other work fills a's guarantee.
    Make(Nodes(3, 4), {Leaf("a", 4), Leaf("b", 8)});
    const int filler = Submit(Gpus("filler", "a", 4), 0);
    const int b0 = Submit(Gpus("b0", "b", 4), 0), b1 = Submit(Gpus("b1", "b", 3), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase({filler, b0, b1}, Phase::kAdmitted), 3);
    const int g = Submit(elastic("g", "a", 4, 1), 2);
    adm_->Cycle(3, 1000);
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{1}) << adm_->reason(g);
    adm_->PodsReady(g);
    adm_->Finish(b1, 4);
    CycleResult cr = adm_->Cycle(5, 1000);
    EXPECT_EQ(cr.grown, std::vector<int>{g});
    EXPECT_EQ(adm_->pod_counts(g), std::vector<int>{4});
  }
  {  // (2) a's borrowed work is within its ten-minute minimum runtime.
    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
    SubmitOptions young;
    young.min_runtime_s = 600;
    for (int i = 0; i < 7; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1), 0, young);
    adm_->Cycle(1, 1000);
    const int g = Submit(elastic("g", "b", 4, 1), 2);
    adm_->Cycle(3, 1000);
    EXPECT_EQ(adm_->phase(g), Phase::kPending) << adm_->reason(g);
    CycleResult cr = adm_->Cycle(602, 1000);
    EXPECT_EQ(cr.evicted.size(), 3u) << adm_->reason(g);
  }
}

// flavorOrder: a queue's flavours in its order of preference. Queue a may use H100s and A100s
// (node 0 and node 1) within its guarantee; its workloads fill the first flavour it lists, then
// the next. With whenCanBorrow: TryNextFlavor, the listed flavours where it stays within its
// guarantee come first, in order, then the others in order.
TEST_F(AdmissionTest, FlavorOrderIsTriedInTurn) {
  for (const auto& [order, first] : {std::pair{std::vector<std::string>{"a100", "h100"}, 1},
                                     std::pair{std::vector<std::string>{"h100", "a100"}, 0}}) {
    SCOPED_TRACE(order[0]);
    QueueSpec a = Plain("a");
    a.quotas["h100"].guaranteed_milli = 4000;
    a.quotas["a100"].guaranteed_milli = 4000;
    a.flavor_order = order;
    Make(H100AndA100(), {a}, {}, PerModelFlavours());
    std::vector<int> ids = SubmitEach("w", "a", 5, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(ids, Phase::kAdmitted), 5);
    EXPECT_EQ(PlacedOn(ids, first), 4);
    EXPECT_EQ(PlacedOn(ids, 1 - first), 1);
  }
  for (auto when : {QueueSpec::WhenCanBorrow::kBorrow, QueueSpec::WhenCanBorrow::kTryNextFlavor}) {
    const bool try_next = when == QueueSpec::WhenCanBorrow::kTryNextFlavor;
    SCOPED_TRACE(try_next ? "TryNextFlavor" : "Borrow");
    // a prefers A100s but is guaranteed only H100s; it borrows b's A100s.
    QueueSpec a = Plain("a"), b = Plain("b");
    a.quotas["h100"].guaranteed_milli = 2000;
    a.quotas["a100"].guaranteed_milli = 0;
    b.quotas["a100"].guaranteed_milli = 4000;
    a.flavor_order = {"a100", "h100"};
    a.when_can_borrow = when;
    Make(H100AndA100(), {a, b}, {}, PerModelFlavours());
    std::vector<int> ids = SubmitEach("w", "a", 4, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(ids, Phase::kAdmitted), 4);
    EXPECT_EQ(PlacedOn(ids, 0), try_next ? 2 : 0);  // its guaranteed H100s first
    EXPECT_EQ(PlacedOn(ids, 1), try_next ? 2 : 4);
  }
  // Elastic growth follows the order too: a's gang starts with 1 pod on the last free A100
  // (b's work, which may not be evicted and so holds only its own guarantee, holds the rest);
  // when b's work ends, the 3 pods it adds go to the H100s its order puts first, not to the
  // fuller A100 node packing prefers.
  {
    QueueSpec a = Plain("a"), b = Plain("b");
    a.quotas["h100"].guaranteed_milli = 4000;
    a.quotas["a100"].guaranteed_milli = 4000;
    b.quotas["h100"].guaranteed_milli = 4000;
    b.quotas["a100"].guaranteed_milli = 3000;
    a.flavor_order = {"h100", "a100"};
    Make(H100AndA100(), {a, b}, {}, PerModelFlavours());
    SubmitOptions fixed;
    fixed.preemptible = false;
    std::vector<int> bs;
    for (int i = 0; i < 7; ++i)
      bs.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 0, fixed));
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(bs, Phase::kAdmitted), 7);
    Workload gang = Gpus("g", "a", 1, 0, 4, /*gang=*/true);
    gang.pod_sets[0].min_count = 1;
    const int g = Submit(gang, 2);
    adm_->Cycle(3, 1000);
    ASSERT_EQ(adm_->pod_counts(g), std::vector<int>{1}) << adm_->reason(g);
    adm_->PodsReady(g);
    for (int b_id : bs) adm_->Finish(b_id, 4);
    CycleResult cr = adm_->Cycle(5, 1000);
    ASSERT_EQ(cr.grown, std::vector<int>{g});
    EXPECT_EQ(PlacedOn({g}, 0), 3);  // the H100s
    EXPECT_EQ(PlacedOn({g}, 1), 1);
  }
  // A listed flavour no quota names keeps its place (its models are unlimited, not "the rest"),
  // and a queue without an order follows its parent's.
  {
    QueueSpec mid = Plain("mid"), a = Plain("a");
    mid.flavor_order = {"a100", "h100"};
    a.parent = "mid";
    a.quotas["h100"].guaranteed_milli = 4000;
    Make(H100AndA100(), {mid, a}, {}, PerModelFlavours());
    std::vector<int> ids = SubmitEach("w", "a", 5, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(ids, Phase::kAdmitted), 5);
    EXPECT_EQ(PlacedOn(ids, 1), 4);  // the A100s first
  }
}

// An admission narrows a workload's pods to the models its quota allowed then; released, it asks
// again on every model its request allows. Gang G (TryNextFlavor) first starts on a's A100s;
// released by the gang timeout, it finds them taken by X and borrows H100s.
TEST_F(AdmissionTest, ReleasedWorkAsksForEveryModelAgain) {
  AdmissionConfig config = PerModelFlavours();
  QueueSpec a = Plain("a");
  a.quotas["a100"].guaranteed_milli = 4000;
  a.quotas["h100"].guaranteed_milli = 0;
  a.when_can_borrow = QueueSpec::WhenCanBorrow::kTryNextFlavor;
  QueueSpec b = Plain("b");
  b.quotas["h100"].guaranteed_milli = 4000;
  Make(H100AndA100(), {a, b}, {}, config);
  const int g = Submit(Gpus("g", "a", 1, 0, 4, /*gang=*/true), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  for (const Assignment& as : adm_->assignments(g)) EXPECT_EQ(as.node, 1);  // the A100s
  Workload x_spec = Gpus("x", "a", 4);
  x_spec.pod_sets[0].device.models = {"A100"};
  const int x = Submit(x_spec, 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(x), Phase::kPending);
  CycleResult r = adm_->Cycle(400, 1000);  // past the gang timeout
  ASSERT_EQ(r.released, std::vector<int>{g});
  EXPECT_EQ(adm_->phase(x), Phase::kAdmitted) << adm_->reason(x);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  for (const Assignment& as : adm_->assignments(g)) EXPECT_EQ(as.node, 0);  // borrowed H100s
}

// Partial admission (pod-set minCount): an elastic gang that cannot start whole starts with the
// most pods that fit now — room or quota — and never fewer than its minCount; released, it
// asks for all of them again.
// Started in part, it says why no more started: here the room, its quota to spare.
TEST_F(AdmissionTest, PartialAdmissionSaysWhetherRoomOrQuotaStoppedMore) {
  Make(Nodes(2, 4), {Leaf("a", 16)});
  ASSERT_FALSE(AdmitEach("g", "a", 5).empty());
  Workload w = Gpus("roomy", "a", 1, 0, 4, /*gang=*/true);
  w.pod_sets[0].min_count = 2;
  const int roomy = Submit(w, 4);
  adm_->Cycle(5, 1000);
  ASSERT_EQ(adm_->pod_counts(roomy), std::vector<int>{3}) << adm_->reason(roomy);
  EXPECT_EQ(adm_->partial_why(roomy), "the fleet has room for no more now");
  EXPECT_NE(adm_->reason(roomy).find("(partial admission: the fleet has room for no more now)"),
            std::string::npos)
      << adm_->reason(roomy);
}

// An elastic gang that requires one leaf, where a leaf holds 2 of its 5-GPU pods even empty:
// it starts with 2 and says that more never fit (not "no more now").
TEST_F(AdmissionTest, PartialAdmissionSaysWhenItsRequiredDomainNeverHoldsMore) {
  Fleet fleet = Nodes(4, 8);
  for (int n = 0; n < 4; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
  Make(fleet, {Leaf("a", 32)});
  Workload w = Gpus("elastic", "a", 5, 0, /*pods=*/4, /*gang=*/true);
  w.pod_sets[0].min_count = 1;
  w.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int id = Submit(w);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->pod_counts(id), std::vector<int>{2}) << adm_->reason(id);
  EXPECT_EQ(adm_->partial_why(id),
            "no more ever fit: gang needs 3 pods of 5 GPUs in one leaf domain; at most 2 fit in "
            "one, even empty (leaf-1)");
  adm_->PodsReady(id);
  adm_->Cycle(2, 1000);
  EXPECT_EQ(adm_->pod_counts(id), std::vector<int>{2});
  EXPECT_EQ(adm_->growth_why(id),
            "no domain its topology requires holds more of its pods, even empty");
}

// Partial admission reclaims, as Kueue's searches with preemption: a workload whose full size
// is past its queue's guarantee, while another queue borrows that guarantee, takes back the
// guarantee for the pods it holds and starts with those, rather than wait for the borrower's
// work to end. The room and the cut are kept while the victims stop.
TEST_F(AdmissionTest, PartialAdmissionReclaimsForThePodsItsGuaranteeHolds) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 0), Leaf("c", 4)});
  const std::vector<int> borrowed = AdmitEach("b", "b", 8);
  ASSERT_FALSE(borrowed.empty());
  Workload w = Gpus("big", "a", 1, 0, 8, /*gang=*/true);
  w.pod_sets[0].min_count = 2;
  const int big = Submit(w, 2);
  CycleResult r = adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kPending) << adm_->reason(big);
  EXPECT_EQ(r.evicted.size(), 4u) << adm_->reason(big);  // its guarantee's 4, not all 8
  EXPECT_EQ(adm_->pod_counts(big), std::vector<int>{4});
  EXPECT_EQ(adm_->plan(big).size(), 4u);
  EXPECT_NE(adm_->reason(big).find("4 of its 8 pods"), std::string::npos) << adm_->reason(big);
  // A cycle while they stop keeps the cut and its room.
  r = adm_->Cycle(4, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->pod_counts(big), std::vector<int>{4});
  for (int v : borrowed)
    if (adm_->phase(v) == Phase::kEvicting) adm_->Terminated(v, 30);
  adm_->Cycle(31, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  EXPECT_EQ(adm_->pod_counts(big), std::vector<int>{4});
  EXPECT_TRUE(adm_->partially_admitted(big));
  EXPECT_NE(adm_->reason(big).find("admitted 4 of 8 pods"), std::string::npos) << adm_->reason(big);
  EXPECT_EQ(CountPhase(borrowed, Phase::kAdmitted), 4);

  // With room free for more pods than its guarantee holds, it starts there and evicts nothing.
  Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 0), Leaf("c", 6)});
  const std::vector<int> some = AdmitEach("b", "b", 4);
  ASSERT_FALSE(some.empty());
  const int roomy = Submit(w, 2);
  r = adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(roomy), Phase::kAdmitted) << adm_->reason(roomy);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->pod_counts(roomy), std::vector<int>{4});

  // Not even its minCount fits the guarantee: nothing is reclaimed.
  Make(Nodes(2, 4), {Leaf("a", 1), Leaf("b", 0), Leaf("c", 7)});
  ASSERT_FALSE(AdmitEach("b", "b", 8).empty());
  const int past = Submit(w, 2);
  r = adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(past), Phase::kPending);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->pod_counts(past), std::vector<int>{8});
  // ... and it is told so of its least, not only of all its pods.
  EXPECT_NE(adm_->reason(past).find("its minCount alone (2 pods, 2 GPUs) is past the guarantee "
                                    "too, so it starts only where room is free"),
            std::string::npos)
      << adm_->reason(past);
  // (Said once, however many cycles it waits.)
  adm_->Cycle(4, 1000);
  adm_->Cycle(5, 1000);
  const std::string said = adm_->reason(past);
  EXPECT_EQ(said.find("its minCount alone"), said.rfind("its minCount alone")) << said;
}

// Several pod sets: from the one cut, each pod set in turn takes back what is left of the
// guarantee (a trial's workers and servers, both cut by 2, reclaimed 20 of 24 GPUs). Workers of
// 2 GPUs and servers of 1, four of each, one needed of each; guaranteed 7: the cut by 2 holds
// 6, and one server more fills the 7.
TEST_F(AdmissionTest, PartialAdmissionReclaimsTheWholeGuaranteeOverPodSets) {
  Make(Nodes(2, 8), {Leaf("a", 7), Leaf("b", 0), Leaf("c", 9)});
  ASSERT_FALSE(AdmitEach("b", "b", 16).empty());
  Workload w = Gpus("mixed", "a", 2, 0, 4, /*gang=*/true);
  w.pod_sets[0].min_count = 1;
  PodSet servers = Gpus("s", "a", 1, 0, 4).pod_sets[0];
  servers.name = "ps";
  servers.min_count = 1;
  w.pod_sets.push_back(servers);
  const int mixed = Submit(w, 2);
  CycleResult r = adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(mixed), Phase::kPending) << adm_->reason(mixed);
  EXPECT_EQ(adm_->pod_counts(mixed), (std::vector<int>{2, 3})) << adm_->reason(mixed);
  EXPECT_EQ(r.evicted.size(), 7u) << adm_->reason(mixed);
}

// The cut's victims are within their minimum runtime: it waits to take them back, saying so,
// rather than start with the one pod free room holds and give its claim up (a review found it
// started small); once they may go, it reclaims for the cut.
TEST_F(AdmissionTest, PartialAdmissionWaitsForTheCutsVictimsRatherThanStartSmaller) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 0), Leaf("c", 4)});
  SubmitOptions young;
  young.min_runtime_s = 100;
  std::vector<int> borrowed;
  for (int i = 0; i < 7; ++i)
    borrowed.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 0, young));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 7);
  Workload w = Gpus("big", "a", 1, 0, 8, /*gang=*/true);
  w.pod_sets[0].min_count = 1;
  const int big = Submit(w, 2);
  CycleResult r = adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(big), Phase::kPending) << adm_->reason(big);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->pod_counts(big), std::vector<int>{8});
  EXPECT_NE(adm_->reason(big).find("minimum runtime"), std::string::npos) << adm_->reason(big);
  EXPECT_NE(adm_->reason(big).find("for 4 of its 8 pods"), std::string::npos) << adm_->reason(big);
  r = adm_->Cycle(102, 1000);
  ASSERT_EQ(r.evicted.size(), 3u) << adm_->reason(big);  // (and the one free GPU)
  EXPECT_EQ(adm_->pod_counts(big), std::vector<int>{4});
}

// preemptionPolicy Never (SubmitOptions::may_preempt false), as Kubernetes' non-preempting
// priority: the workload evicts nothing — neither its queue's lower priorities nor work that
// borrows its guarantee — yet waits ahead of lower priorities, and an elastic one still starts
// with the pods that free room holds (a review found that it waited for a preemption search it
// may not make, and so never started in part).
TEST_F(AdmissionTest, NonPreemptingWorkEvictsNothingYetGoesFirstAndStartsInPart) {
  SubmitOptions never;
  never.may_preempt = false;
  // Its queue's lower priority fills the fleet; another waits from before it.
  Make(Nodes(1, 4), {Leaf("a", 4)});
  const std::vector<int> low = AdmitEach("low", "a", 4);
  ASSERT_FALSE(low.empty());
  const int earlier = Submit(Gpus("earlier", "a", 1), 1.5);
  const int hot = Submit(Gpus("hot", "a", 1, /*priority=*/10), 2, never);
  CycleResult r = adm_->Cycle(3, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(hot), Phase::kPending);
  EXPECT_FALSE(adm_->may_preempt(hot));
  // Room freed goes to it first.
  adm_->Finish(low[0], 5);
  r = adm_->Cycle(6, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(hot), Phase::kAdmitted) << adm_->reason(hot);
  EXPECT_EQ(adm_->phase(earlier), Phase::kPending);

  // b borrows a's guarantee: a's non-preempting work takes nothing back (a preempting one
  // does, the control).
  Make(Nodes(1, 4), {Leaf("a", 4), Leaf("b", 0)});
  ASSERT_FALSE(AdmitEach("b", "b", 4).empty());
  const int owed = Submit(Gpus("owed", "a", 1), 2, never);
  r = adm_->Cycle(3, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(owed), Phase::kPending);
  EXPECT_FALSE(adm_->may_preempt(owed));
  Submit(Gpus("control", "a", 1), 4);
  r = adm_->Cycle(5, 1000);
  EXPECT_EQ(r.evicted.size(), 1u);

  // Elastic, its guarantee borrowed by b and one GPU free: it starts with the one pod that
  // room holds, rather than wait for victims it will not evict.
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 0), Leaf("c", 4)});
  ASSERT_FALSE(AdmitEach("b", "b", 7).empty());
  Workload w = Gpus("elastic", "a", 1, 0, 8, /*gang=*/true);
  w.pod_sets[0].min_count = 1;
  const int elastic = Submit(w, 2, never);
  r = adm_->Cycle(3, 1000);
  EXPECT_TRUE(r.evicted.empty());
  ASSERT_EQ(adm_->phase(elastic), Phase::kAdmitted) << adm_->reason(elastic);
  EXPECT_EQ(adm_->pod_counts(elastic), std::vector<int>{1});
}

// The room a preemptor's victims free goes first to work of its queue that orders ahead of it
// and may not preempt (a trial: p, priority 1000 and Never, waited while u, priority 100 and
// later, took the GPU l-new freed, and l-old of priority 0 ran on). As Kueue admits a queue's
// head first: p starts there, and u preempts again.
TEST_F(AdmissionTest, RoomAPreemptorFreedGoesFirstToHigherPriorityWorkOfItsQueue) {
  SubmitOptions never;
  never.may_preempt = false;
  Make(Nodes(1, 2), {Leaf("a", 2)});
  const int l_old = Submit(Gpus("l-old", "a", 1), 0);
  const int l_new = Submit(Gpus("l-new", "a", 1), 0.5);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(l_old), Phase::kAdmitted);
  ASSERT_EQ(adm_->phase(l_new), Phase::kAdmitted);
  const int p = Submit(Gpus("p", "a", 1, /*priority=*/1000), 1.5, never);
  CycleResult r = adm_->Cycle(2, 1000);
  EXPECT_TRUE(r.evicted.empty());
  const int u = Submit(Gpus("u", "a", 1, /*priority=*/100), 2.5);
  r = adm_->Cycle(3, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(u);
  const int first = r.evicted[0].victim;
  const int second = first == l_old ? l_new : l_old;
  adm_->Terminated(first, 4);
  r = adm_->Cycle(5, 1000);
  EXPECT_EQ(adm_->phase(p), Phase::kAdmitted) << adm_->reason(p);
  EXPECT_EQ(adm_->phase(u), Phase::kPending);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(u);
  EXPECT_EQ(r.evicted[0].victim, second);
  adm_->Terminated(second, 6);
  adm_->Cycle(7, 1000);
  EXPECT_EQ(adm_->phase(u), Phase::kAdmitted) << adm_->reason(u);

  // Larger work ahead of it, which the freed room cannot take, does not cost it the room.
  Make(Nodes(1, 2), {Leaf("a", 2)});
  const std::vector<int> low = AdmitEach("low", "a", 2);
  ASSERT_FALSE(low.empty());
  const int big = Submit(Gpus("big", "a", 2, /*priority=*/1000), 1.5, never);
  adm_->Cycle(2, 1000);
  const int mid = Submit(Gpus("mid", "a", 1, /*priority=*/100), 2.5);
  r = adm_->Cycle(3, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mid);
  adm_->Terminated(r.evicted[0].victim, 4);
  r = adm_->Cycle(5, 1000);
  EXPECT_EQ(adm_->phase(mid), Phase::kAdmitted) << adm_->reason(mid);
  EXPECT_EQ(adm_->phase(big), Phase::kPending);
  EXPECT_TRUE(r.evicted.empty());

  // Work ahead that cannot use the freed node (its nodeSelector keeps it to a full one) is not
  // tried there, nor counted: five such ahead of one that fits (a trial: two used up the tries,
  // and the preemptor took the room before the third).
  Fleet fleet = Nodes(2, 2);
  fleet.nodes[0].labels["zone"] = "a";
  Make(fleet, {Leaf("a", 4)});
  const std::vector<int> fill = AdmitEach("fill", "a", 4);
  ASSERT_FALSE(fill.empty());
  for (int i = 0; i < 5; ++i) {
    Workload w = Gpus("pinned" + std::to_string(i), "a", 1, /*priority=*/1000 - i);
    w.pod_sets[0].nodes.labels["zone"] = "a";
    Submit(w, 1.1, never);
  }
  const int fits = Submit(Gpus("fits", "a", 1, /*priority=*/900), 1.2, never);
  adm_->Cycle(2, 1000);
  Workload m = Gpus("m", "a", 1, /*priority=*/100);
  m.pod_sets[0].nodes.exclude = {"n0"};  // (its victim on n1)
  const int preemptor = Submit(m, 2.5);
  r = adm_->Cycle(3, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(preemptor);
  adm_->Terminated(r.evicted[0].victim, 4);
  adm_->Cycle(5, 1000);
  EXPECT_EQ(adm_->phase(fits), Phase::kAdmitted) << adm_->reason(fits);
  EXPECT_EQ(adm_->phase(preemptor), Phase::kPending);
}

TEST_F(AdmissionTest, PartialAdmissionStartsWithTheMostPodsThatFit) {
  auto elastic = [](const std::string& name, const std::string& queue, int pods, int least) {
    Workload w = Gpus(name, queue, 1, 0, pods, /*gang=*/true);
    w.pod_sets[0].min_count = least;
    return w;
  };
  // Room: 3 of 8 GPUs free.
  Make(Nodes(2, 4), {Leaf("a", 8)});
  const std::vector<int> fillers = AdmitEach("f", "a", 5);
  ASSERT_FALSE(fillers.empty());
  const int too_many = Submit(elastic("needs-four", "a", 6, 4), 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(too_many), Phase::kPending) << adm_->reason(too_many);
  EXPECT_EQ(adm_->pod_counts(too_many), std::vector<int>{6});
  adm_->Finish(too_many, 4);  // (withdrawn)
  const int fits = Submit(elastic("elastic", "a", 4, 2), 4);
  adm_->Cycle(5, 1000);
  ASSERT_EQ(adm_->phase(fits), Phase::kAdmitted) << adm_->reason(fits);
  EXPECT_EQ(adm_->pod_counts(fits), std::vector<int>{3});
  EXPECT_TRUE(adm_->partially_admitted(fits));
  EXPECT_EQ(adm_->assignments(fits).size(), 3u);
  EXPECT_EQ(adm_->gpu_milli(fits), 3000);
  EXPECT_NE(adm_->reason(fits).find("admitted 3 of 4 pods"), std::string::npos)
      << adm_->reason(fits);
  // (Its queue's 8 are the fleet's 8: the quota is asked first.)
  EXPECT_EQ(adm_->partial_why(fits), "its queue's quota holds no more now");
  // Not all its pods start within the gang timeout: released, it asks for all 4 again, and
  // with the fillers gone the same cycle admits all 4.
  for (int f : fillers) adm_->Finish(f, 10);
  CycleResult r = adm_->Cycle(1000, 1000);
  ASSERT_EQ(r.released, std::vector<int>{fits});
  ASSERT_EQ(adm_->phase(fits), Phase::kAdmitted) << adm_->reason(fits);
  EXPECT_EQ(adm_->pod_counts(fits), std::vector<int>{4});
  EXPECT_FALSE(adm_->partially_admitted(fits));
  EXPECT_EQ(adm_->assignments(fits).size(), 4u);

  // Below its guarantee, with its share borrowed by b and 1 GPU free: it takes its guarantee
  // back (b's work is evicted) rather than start with 1 pod and grow only as b's work ends.
  Make(Nodes(2, 4), {Leaf("a", 8), Leaf("b", 0)});
  const std::vector<int> borrowed = AdmitEach("b", "b", 7);
  ASSERT_FALSE(borrowed.empty());
  const int owner = Submit(elastic("owner", "a", 8, 1), 2);
  r = adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(owner), Phase::kPending) << adm_->reason(owner);
  EXPECT_EQ(r.evicted.size(), 7u) << adm_->reason(owner);

  // Within its guarantee, but nobody borrows and the fleet is smaller than the guarantee: there
  // is nothing to take back, so it starts with what is free.
  Make(Nodes(2, 4), {Leaf("a", 16)});
  const std::vector<int> own = AdmitEach("o", "a", 4);
  ASSERT_FALSE(own.empty());
  const int small = Submit(elastic("small", "a", 8, 2), 2);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(small), Phase::kAdmitted) << adm_->reason(small);
  EXPECT_EQ(adm_->pod_counts(small), std::vector<int>{4});

  // Quota: guaranteed 4 and no borrowing, 8 GPUs free: 4 of 6 pods.
  Make(Nodes(2, 4), {Leaf("a", 4, 0), Leaf("b", 4)});
  const int capped = Submit(elastic("capped", "a", 6, 2), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(capped), Phase::kAdmitted) << adm_->reason(capped);
  EXPECT_EQ(adm_->pod_counts(capped), std::vector<int>{4});
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 4000);
  // Restored as admitted with 4 (the server's rebuild), it holds 4 GPUs.
  Make(Nodes(2, 4), {Leaf("a", 4, 0), Leaf("b", 4)});
  SubmitOptions options;
  options.pod_counts = {4};
  std::vector<Assignment> four;
  for (int g = 0; g < 4; ++g) four.push_back(OnGpus(0, {g}).front());
  auto restored = adm_->Restore(elastic("capped", "a", 6, 2), four, 0, options);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 4000);
  options.pod_counts = {1};  // below its minCount
  EXPECT_FALSE(adm_->Restore(elastic("other", "a", 6, 2), {four[0]}, 0, options).ok());
}

// Pods that completed while others run on (the server's status.finishedPods) are restored as
// holding nothing: their devices and their queue's quota are free for other work, and what
// runs on neither grows nor is shrunk.
TEST_F(AdmissionTest, CompletedPodsHoldNothing) {
  Make(Nodes(1, 4), {Leaf("a", 4, 0), Leaf("b", 0)});
  SubmitOptions options;
  options.completed = {3};
  auto sweep = adm_->Restore(Gpus("sweep", "a", 1, 0, 4, true), OnGpus(0, {0}), 0, options);
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 1000);
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 1000);
  const int next = Submit(Gpus("next", "a", 3), 1);
  adm_->Cycle(2, 1000);
  EXPECT_EQ(adm_->phase(next), Phase::kAdmitted) << adm_->reason(next);
  EXPECT_EQ(adm_->phase(*sweep), Phase::kAdmitted);
  // More completed pods than it runs, or counts for other pod sets than it has: refused.
  options.completed = {5};
  EXPECT_FALSE(adm_->Restore(Gpus("bad", "a", 1, 0, 4), {}, 0, options).ok());
  options.completed = {1, 1};
  EXPECT_FALSE(adm_->Restore(Gpus("bad", "a", 1, 0, 4), OnGpus(0, {1, 2, 3}), 0, options).ok());
}

// The pods' CPU and memory under quota: limits on admission like the GPUs' (guarantee,
// borrowing, the cohort's unused guarantee), no flavours, and work that could never fit its
// queue's limit is refused at once.
TEST_F(AdmissionTest, CpuAndMemoryQuotasLimitAdmission) {
  auto cpu_only = [](const std::string& name, const std::string& queue, int64_t cores,
                     int pods = 1) {
    Workload w = Gpus(name, queue, 1, 0, pods, pods > 1);
    w.pod_sets[0].device = DeviceRequest{};
    w.pod_sets[0].cpu = MilliCpu(cores * 1000);
    return w;
  };
  QueueSpec a = Plain("a"), b = Plain("b");
  a.quotas[kCpuQuota] = QuotaSpec{8000, 0, {}};
  b.quotas[kCpuQuota] = QuotaSpec{16000, {}, {}};
  // (Once a quota names memory, every queue is limited by it: c alone in its cohort here.)
  QueueSpec c = Plain("c");
  c.quotas[kMemoryQuota] = QuotaSpec{2048, 0, {}};
  Make(Nodes(2, 4), {c});
  std::vector<int> cs;
  for (int i = 0; i < 3; ++i) cs.push_back(Submit(cpu_only("c" + std::to_string(i), "c", 1), 0));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(cs, Phase::kAdmitted), 2);  // 1 GiB each, 2 GiB of memory
  EXPECT_NE(adm_->reason(cs[2]).find("for memory: 3Gi/2Gi"), std::string::npos)
      << adm_->reason(cs[2]);

  Make(Nodes(2, 4), {a, b});
  std::vector<int> as, bs;
  for (int i = 0; i < 3; ++i) as.push_back(Submit(cpu_only("a" + std::to_string(i), "a", 4), 0));
  for (int i = 0; i < 6; ++i) bs.push_back(Submit(cpu_only("b" + std::to_string(i), "b", 4), 0));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(as, Phase::kAdmitted), 2);
  EXPECT_NE(adm_->reason(as[2]).find("queue a over its borrowing limit for cpu: 12/8 cores"),
            std::string::npos)
      << adm_->reason(as[2]);
  // b borrows what the cohort leaves unused — nothing of a's, whose guarantee it uses: 4 x 4.
  EXPECT_EQ(CountPhase(bs, Phase::kAdmitted), 4) << adm_->reason(bs[5]);
  EXPECT_NE(adm_->reason(bs[5]).find("no unused cpu to lend"), std::string::npos)
      << adm_->reason(bs[5]);
  EXPECT_EQ(adm_->resource_usage(adm_->QueueIndex("a"), 0), 8000);
  EXPECT_EQ(adm_->resource_guaranteed(adm_->QueueIndex("org"), 0), 24000);
  // One of a's finishes: its next one starts.
  adm_->Finish(as[0], 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(as[2]), Phase::kAdmitted) << adm_->reason(as[2]);
  // Partial admission cut down by the CPU quota: a's 8 cores are used by a1 and a2 less the
  // one finished; an elastic 3-pod job of 4 cores each (minCount 1) starts with 1 pod.
  {
    Workload elastic = cpu_only("elastic", "a", 4, 3);
    elastic.pod_sets[0].min_count = 1;
    adm_->Finish(as[1], 4);
    const int e = Submit(elastic, 4);
    adm_->Cycle(5, 1000);
    ASSERT_EQ(adm_->phase(e), Phase::kAdmitted) << adm_->reason(e);
    EXPECT_EQ(adm_->pod_counts(e), std::vector<int>{1});
    EXPECT_EQ(adm_->partial_why(e), "its queue's quota holds no more now");
  }
  // Priority within the queue holds for CPU as for GPUs: a's quota is full with priority-0
  // work, and a priority-5 arrival evicts one of them (the cheapest) rather than wait.
  {
    Workload urgent = cpu_only("urgent", "a", 4);
    urgent.priority = 5;
    const int u = Submit(urgent, 6);
    CycleResult cr = adm_->Cycle(7, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(u);
    EXPECT_EQ(cr.evicted[0].preemptor, u);
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(cr.evicted[0].victim)), "a");
    adm_->Terminated(cr.evicted[0].victim, 40);
    adm_->Cycle(41, 1000);
    EXPECT_EQ(adm_->phase(u), Phase::kAdmitted) << adm_->reason(u);
  }
  // A tree none of whose queues names CPU is not limited by it.
  {
    AdmissionConfig config;
    config.queues = {QueueSpec{"org", "", 1, {}, -1}, a, QueueSpec{"solo", "", 1, {}, -1}};
    auto policy = MakePolicy("bestfit");
    ASSERT_TRUE(policy.ok());
    auto other = Admitter::Create(fleet_, Tenants({"a", "solo"}), config, **policy);
    ASSERT_TRUE(other.ok()) << other.status().message();
    EXPECT_FALSE((*other)->resource_limited((*other)->QueueIndex("solo"), 0));
    const int big = *(*other)->Submit(cpu_only("big", "solo", 64), 0);
    (*other)->Cycle(1, 1000);
    EXPECT_EQ((*other)->phase(big), Phase::kAdmitted) << (*other)->reason(big);
  }
  // More than a may ever hold: refused at once.
  const int huge = Submit(cpu_only("huge", "a", 4, 3), 4);
  EXPECT_EQ(adm_->phase(huge), Phase::kInfeasible);
  EXPECT_NE(adm_->reason(huge).find("asks for 12 cores of cpu; queue a may hold at most 8 cores"),
            std::string::npos)
      << adm_->reason(huge);
  // A workload that can use two flavours, one at its GPU quota (held by higher-priority work):
  // a search for CPU keeps to the flavour its quota allows and frees only CPU, rather than
  // giving up for want of H100 quota it does not need.
  {
    AdmissionConfig config = PerModelFlavours();
    QueueSpec q = Plain("q");
    q.quotas["h100"] = QuotaSpec{1000, 0, {}};
    q.quotas["a100"] = QuotaSpec{4000, 0, {}};
    q.quotas[kCpuQuota] = QuotaSpec{4000, 0, {}};
    Make(H100AndA100(), {q}, {}, config);
    Workload low_h100 = Gpus("high-h100", "q", 1, 10);
    low_h100.pod_sets[0].device.models = {"H100"};
    low_h100.pod_sets[0].cpu = MilliCpu(1000);
    Workload low_a100 = Gpus("low-a100", "q", 1);
    low_a100.pod_sets[0].device.models = {"A100"};
    low_a100.pod_sets[0].cpu = MilliCpu(3000);
    const int lh = Submit(low_h100, 0), la = Submit(low_a100, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase({lh, la}, Phase::kAdmitted), 2);
    Workload urgent = Gpus("urgent", "q", 1, 5);
    urgent.pod_sets[0].cpu = MilliCpu(2000);
    const int u = Submit(urgent, 2);
    CycleResult cr = adm_->Cycle(3, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(u);
    EXPECT_EQ(cr.evicted[0].victim, la) << "the CPU is freed where the quota lets it run";
  }
}

// One pod of `cores` cores and no GPU.
Workload CpuOnly(const std::string& name, const std::string& queue, int64_t cores) {
  Workload w = Gpus(name, queue, 1);
  w.pod_sets[0].device = DeviceRequest{};
  w.pod_sets[0].cpu = MilliCpu(cores * 1000);
  return w;
}

// A CPU reclaim takes only from a branch that borrows, as a GPU reclaim does: l2b holds its
// idle sibling's cores, but its department t2 is at its guarantee; t3 borrows t1's. t1's
// reclaim takes t3's work, though l2b's is newer (a review found l2b's taken, leaving t2 below
// its guarantee and t3 on t1's cores).
TEST_F(AdmissionTest, ACpuReclaimTakesOnlyFromABranchThatBorrows) {
  QueueSpec t1 = Plain("t1"), t2 = Plain("t2"), l2a = Plain("l2a"), l2b = Plain("l2b"),
            t3 = Plain("t3");
  t1.quotas[kCpuQuota] = QuotaSpec{32000, {}, {}};
  l2a.quotas[kCpuQuota] = QuotaSpec{16000, {}, {}};
  l2b.quotas[kCpuQuota] = QuotaSpec{16000, {}, {}};
  l2a.parent = l2b.parent = "t2";
  AdmissionConfig config;
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, t1, t2, l2a, l2b, t3};
  MakeTree(Nodes(1, 8), config, {"t1", "l2a", "l2b", "t3"});  // 64 cores
  std::vector<int> borrowers, sibling;
  for (int i = 0; i < 4; ++i)
    borrowers.push_back(Submit(CpuOnly("t3-" + std::to_string(i), "t3", 8), 0));
  adm_->Cycle(1, 1000);
  for (int i = 0; i < 4; ++i)
    sibling.push_back(Submit(CpuOnly("l2b-" + std::to_string(i), "l2b", 8), 2));
  adm_->Cycle(3, 1000);
  ASSERT_EQ(CountPhase(borrowers, Phase::kAdmitted) + CountPhase(sibling, Phase::kAdmitted), 8);
  const int mine = Submit(CpuOnly("t1-0", "t1", 8), 4);
  CycleResult cr = adm_->Cycle(5, 1000);
  ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(adm_->queue_name(adm_->queue_of(cr.evicted[0].victim)), "t3");
}

// A queue's CPU guarantee is reclaimed from the queues that borrowed it, as GPUs are: only
// what they hold beyond their own guarantees, and only up to the reclaiming queue's.
TEST_F(AdmissionTest, CpuGuaranteeIsReclaimedFromBorrowers) {
  QueueSpec a = Plain("a"), b = Plain("b");
  a.quotas[kCpuQuota] = QuotaSpec{16000, {}, {}};
  b.quotas[kCpuQuota] = QuotaSpec{48000, {}, {}};
  Make(Nodes(1, 8), {a, b});  // 64 cores
  // a borrows b's unused 48 cores: the node is full.
  std::vector<int> as, bs;
  for (int i = 0; i < 8; ++i) as.push_back(Submit(CpuOnly("a" + std::to_string(i), "a", 8), 0));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(as, Phase::kAdmitted), 8);
  // b asks for 56 cores: the 48 it is guaranteed come back from a, which keeps its 16; the
  // seventh pod would take b past its guarantee and waits.
  for (int i = 0; i < 7; ++i) bs.push_back(Submit(CpuOnly("b" + std::to_string(i), "b", 8), 2));
  CycleResult cr = adm_->Cycle(3, 1000);
  ASSERT_EQ(cr.evicted.size(), 6u) << adm_->reason(bs[0]);
  for (const auto& ev : cr.evicted) {
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), "a");
    adm_->Terminated(ev.victim, 30);
  }
  EXPECT_NE(adm_->reason(bs[0]).find("queue b reclaims its guarantee of cpu"), std::string::npos)
      << adm_->reason(bs[0]);
  cr = adm_->Cycle(31, 1000);
  EXPECT_TRUE(cr.evicted.empty());
  EXPECT_EQ(CountPhase(bs, Phase::kAdmitted), 6) << adm_->reason(bs[6]);
  EXPECT_EQ(adm_->resource_usage(adm_->QueueIndex("a"), 0), 16000);
  EXPECT_EQ(adm_->resource_usage(adm_->QueueIndex("b"), 0), 48000);
  // a's next arrival finds a at its guarantee and b within its own: nothing to reclaim.
  const int late = Submit(CpuOnly("a-late", "a", 8), 32);
  cr = adm_->Cycle(33, 1000);
  EXPECT_TRUE(cr.evicted.empty());
  EXPECT_EQ(adm_->phase(late), Phase::kPending);

  // The reclaim hold keeps the cores a reclaim freed beyond its need: b's 8-core pod evicts one
  // of a's 16-core pods; for the hold a may not borrow the other 8 back.
  {
    AdmissionConfig held;
    held.reclaim_hold_s = 300;
    Make(Nodes(1, 8), {a, b}, {}, held);
    std::vector<int> big;
    for (int i = 0; i < 4; ++i)
      big.push_back(Submit(CpuOnly("big" + std::to_string(i), "a", 16), 0));
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(big, Phase::kAdmitted), 4);
    const int mine = Submit(CpuOnly("mine", "b", 8), 2);
    cr = adm_->Cycle(3, 1000);
    ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(mine);
    adm_->Terminated(cr.evicted[0].victim, 30);
    adm_->Cycle(31, 1000);
    ASSERT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
    const int again = Submit(CpuOnly("again", "a", 8), 32);
    adm_->Cycle(33, 1000);
    EXPECT_EQ(adm_->phase(again), Phase::kPending) << adm_->reason(again);
    EXPECT_EQ(adm_->reclaim_record(adm_->QueueIndex("b")).room_milli.at(kCpuQuota), 8000);
    // What the server keeps in the queue's status between its per-cycle Admitters.
    const Admitter::ReclaimRecord record = adm_->reclaim_record(adm_->QueueIndex("b"));
    adm_->Cycle(304, 1000);
    EXPECT_EQ(adm_->phase(again), Phase::kAdmitted) << adm_->reason(again);
    Make(Nodes(1, 8), {a, b}, {}, held);
    adm_->RestoreReclaims({{"b", record}}, 40);
    EXPECT_EQ(adm_->reclaim_record(adm_->QueueIndex("b")).room_milli.at(kCpuQuota), 8000);
  }

  // Only work within its queue's guarantee in every resource reclaims: x is guaranteed CPU but
  // no GPUs, y GPUs but no CPU. y's job (8 GPUs, 8 borrowed cores) fills the GPUs; x's like
  // job, within its CPU guarantee but borrowing GPUs, does not evict it for CPU (y would take
  // the GPUs back, and so on for ever).
  QueueSpec x = Plain("x"), y = Plain("y"), z = Plain("z");
  x.quotas[kCpuQuota] = QuotaSpec{16000, {}, {}};
  x.quotas["gpu"] = QuotaSpec{0, {}, {}};
  y.quotas[kCpuQuota] = QuotaSpec{0, {}, {}};
  y.quotas["gpu"] = QuotaSpec{8000, {}, {}};
  z.quotas[kCpuQuota] = QuotaSpec{48000, {}, {}};
  z.quotas["gpu"] = QuotaSpec{8000, {}, {}};  // idle: lends to both
  Make(Nodes(1, 8), {x, y, z});
  Workload job = Gpus("y0", "y", 8);
  job.pod_sets[0].cpu = MilliCpu(8000);
  const int y0 = Submit(job, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(y0), Phase::kAdmitted) << adm_->reason(y0);
  job.name = WorkloadId("x0");
  job.queue = QueueId("x");
  job.tenant = TenantId("x");
  const int x0 = Submit(job, 2);
  cr = adm_->Cycle(3, 1000);
  EXPECT_TRUE(cr.evicted.empty()) << adm_->reason(x0);
  EXPECT_EQ(adm_->phase(x0), Phase::kPending);
}

// What the server's scheduler does every cycle: rebuild the Admitter from stored state. Restored
// work holds its devices and is charged to its queue; one already being evicted is not chosen
// again, and it counts against its queue's disruption budget.
TEST_F(AdmissionTest, RestoredWorkIsChargedAndHeldAndEvictingIsNotChosenAgain) {
  // a's disruption budget: one workload being evicted at a time.
  Make(Nodes(2, 4), {Leaf("a", 4, std::nullopt, std::nullopt, 1), Leaf("b", 4)});
  // a borrows the whole fleet: 4 GPUs on n0 and 2 + 2 on n1, one of the latter being evicted.
  auto r0 = adm_->Restore(Gpus("a0", "a", 4), OnGpus(0, {0, 1, 2, 3}), 0);
  auto r1 = adm_->Restore(Gpus("a1", "a", 2), OnGpus(1, {0, 1}), 0, {}, /*evicting=*/true);
  auto r2 = adm_->Restore(Gpus("a2", "a", 2), OnGpus(1, {2, 3}), 0);
  ASSERT_TRUE(r0.ok() && r1.ok() && r2.ok());
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
  EXPECT_EQ(adm_->phase(*r1), Phase::kEvicting);
  // The assignment must match the pods.
  EXPECT_FALSE(adm_->Restore(Gpus("bad", "a", 1, 0, 2), OnGpus(1, {2}), 0).ok());

  // b reclaims 2 GPUs: a's budget of one eviction at a time is used by the restored eviction,
  // so nothing more is evicted; once that one has stopped, its room is enough.
  int mine = Submit(Gpus("b0", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_TRUE(r.evicted.empty()) << adm_->reason(mine);
  EXPECT_EQ(adm_->phase(mine), Phase::kPending);
  adm_->Terminated(*r1, 20);
  r = adm_->Cycle(21, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted);
}

// A restored victim its caller spares (its eviction called off: its preemptor's guarantee no
// longer holds it) runs on, counted as running: its queue's budget of one eviction at a time is
// free again, and another reclaim may choose it (a review found it counted as stopping for the
// rest of the cycle).
TEST_F(AdmissionTest, ASparedRestoredVictimNoLongerUsesItsQueuesBudget) {
  Make(Nodes(2, 4), {Leaf("a", 4, std::nullopt, std::nullopt, 1), Leaf("b", 4)});
  auto r0 = adm_->Restore(Gpus("a0", "a", 4), OnGpus(0, {0, 1, 2, 3}), 0);
  auto r1 = adm_->Restore(Gpus("a1", "a", 2), OnGpus(1, {0, 1}), 0, {}, /*evicting=*/true);
  auto r2 = adm_->Restore(Gpus("a2", "a", 2), OnGpus(1, {2, 3}), 0);
  ASSERT_TRUE(r0.ok() && r1.ok() && r2.ok());
  adm_->Spare(*r1);
  EXPECT_EQ(adm_->phase(*r1), Phase::kAdmitted);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
  int mine = Submit(Gpus("b0", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(r.evicted[0].preemptor, mine);
  // (Sparing what is not being evicted changes nothing.)
  adm_->Spare(*r0);
  EXPECT_EQ(adm_->phase(*r0), Phase::kAdmitted);
}

// The server rebuilds the Admitter every cycle: a preemptor whose victim is still stopping is
// restored as nominated, so it is not tried, and the room it reclaims counts against its
// queue's guarantee — b (guaranteed 3) evicts for two more workloads, not three.
TEST_F(AdmissionTest, RestoredNominationKeepsItsRoomPromised) {
  Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 3), Leaf("c", 3)});
  auto on = [](int node, int gpu) {
    Assignment a;
    a.node = node;
    a.devices.push_back({gpu, 1000, 80 * 1024, -1});
    return std::vector<Assignment>{a};
  };
  int victim = -1;
  for (int i = 0; i < 8; ++i) {
    auto r = adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), on(i / 4, i % 4), 0, {},
                           /*evicting=*/i == 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (i == 0) victim = *r;
  }
  ASSERT_EQ(adm_->phase(victim), Phase::kEvicting);
  int waiting = Submit(Gpus("b0", "b", 1), 5);
  adm_->RestoreNomination(waiting, 1);
  std::vector<int> more;
  for (int i = 1; i < 4; ++i) more.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 6));
  CycleResult r = adm_->Cycle(10, 1000);
  EXPECT_EQ(r.evicted.size(), 2u);
  EXPECT_EQ(adm_->phase(waiting), Phase::kPending);  // still waits for its victim
  for (const Eviction& e : r.evicted) EXPECT_NE(e.preemptor, waiting);
  // What b has promised to its preemptors is spoken for, seen from each of its workloads (the
  // replay names waits that this room held up): 3 GPUs for one that waits on none of it, 2 for
  // a preemptor holding 1 of them.
  int idle = -1;
  for (int id : more)
    if (!adm_->nominated(id)) idle = id;
  ASSERT_GE(idle, 0) << "every b workload preempts: the check below sees no bystander";
  EXPECT_EQ(adm_->promised_to_others(idle, "gpu"), 3000);
  EXPECT_EQ(adm_->promised_to_others(waiting, "gpu"), 2000);
  EXPECT_EQ(adm_->promised_to_others(idle, "no-such-flavour"), 0);
}

// A restored nomination with its plan: the free part of the planned place is held (c, within
// its guarantee, does not get the one free GPU, which b planned on), and once no victim is left
// the preemptor is tried first, on the planned node although the policy prefers the other.
TEST_F(AdmissionTest, RestoredPlanHoldsItsRoomAndIsTriedFirst) {
  // Held: a holds 7 of 8 GPUs, all but node 0's GPU 3 (a0, on node 0's GPU 0, is a victim
  // stopping); b plans on node 0's GPUs 0 and 3.
  // A plan that names a device twice, or a negative share (a hand-edited record), is dropped.
  std::vector<Assignment> twice = OnGpus(0, {3, 3});
  std::vector<Assignment> negative = OnGpus(0, {0, 3});
  negative[0].devices[1].milli = -1000;
  for (const auto& bad : {twice, negative}) {
    Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 4), Leaf("c", 2)});
    for (int i = 0; i < 7; ++i)
      ASSERT_TRUE(adm_->Restore(Gpus("a" + std::to_string(i), "a", 1),
                                i < 3 ? OnGpus(0, {i}) : OnGpus(1, {i - 3}), 0, {}, i == 0)
                      .ok());
    int waiting = Submit(Gpus("b0", "b", 2), 5);
    adm_->RestoreNomination(waiting, 1, bad);
    EXPECT_TRUE(adm_->plan(waiting).empty());
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 7000);  // nothing held
  }
  for (bool with_plan : {false, true}) {
    SCOPED_TRACE(with_plan ? "with its plan" : "without");
    Make(Nodes(2, 4), {Leaf("a", 2), Leaf("b", 4), Leaf("c", 2)});
    for (int i = 0; i < 7; ++i) {
      ASSERT_TRUE(adm_->Restore(Gpus("a" + std::to_string(i), "a", 1),
                                i < 3 ? OnGpus(0, {i}) : OnGpus(1, {i - 3}), 0, {},
                                /*evicting=*/i == 0)
                      .ok());
    }
    int waiting = Submit(Gpus("b0", "b", 2), 5);
    adm_->RestoreNomination(waiting, 1, with_plan ? OnGpus(0, {0, 3}) : std::vector<Assignment>{});
    int c = Submit(Gpus("c0", "c", 1), 6);
    adm_->Cycle(10, 1000);
    EXPECT_EQ(adm_->phase(c) == Phase::kAdmitted, !with_plan) << adm_->reason(c);
  }
  // Tried first, on the planned node: where does the policy put it alone?
  int preferred = -1;
  for (int plan_node : {-1, 0, 1}) {
    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)});
    for (int n = 0; n < 2; ++n)
      ASSERT_TRUE(adm_->Restore(Gpus("a" + std::to_string(n), "a", 2), OnGpus(n, {0, 1}), 0).ok());
    int b = Submit(Gpus("b0", "b", 2), 5);
    if (plan_node >= 0) adm_->RestoreNomination(b, 0, OnGpus(plan_node, {2, 3}));
    adm_->Cycle(10, 1000);
    ASSERT_EQ(adm_->phase(b), Phase::kAdmitted) << adm_->reason(b);
    if (plan_node < 0) {
      preferred = adm_->assignments(b)[0].node;
    } else {
      EXPECT_EQ(adm_->assignments(b)[0].node, plan_node);
    }
  }
  ASSERT_GE(preferred, 0);
}

// Consolidation: four free GPUs scattered two and two; a 4-GPU workload within its guarantee
// gets them by moving two 1-GPU workloads (of a queue that is not borrowing, so reclaim cannot
// help), and everyone runs once the moved ones are placed again. Off, it waits. Under a
// disruption budget of 1 the two move one at a time (a user-style trial's gang waited for good
// under such a budget: "each plan found moves more of its work at once than that").
TEST_F(AdmissionTest, ConsolidationMovesWorkToGatherScatteredGpus) {
  // Off; on; on but a's disruption budget allows one move at a time (two are needed); none.
  for (int mode : {0, 1, 2, 3}) {
    const bool on = mode > 0;
    SCOPED_TRACE(mode == 0 ? "off" : mode == 1 ? "on" : mode == 2 ? "budget 1" : "budget 0");
    AdmissionConfig config;
    config.consolidation = on;
    Make(Nodes(2, 4),
         {Leaf("a", 4, std::nullopt, std::nullopt,
               mode == 2   ? 1
               : mode == 3 ? 0
                           : -1),
          Leaf("b", 4)},
         {}, config);
    auto on_node = [](int node, int gpu) {
      Assignment a;
      a.node = node;
      a.devices.push_back({gpu, 1000, 80 * 1024, -1});
      return std::vector<Assignment>{a};
    };
    std::vector<int> small;
    for (int i = 0; i < 4; ++i) {
      auto r = adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), on_node(i / 2, i % 2), 0);
      ASSERT_TRUE(r.ok()) << r.status().message();
      small.push_back(*r);
    }
    int big = Submit(Gpus("b0", "b", 4), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_EQ(adm_->phase(big), Phase::kPending);
    if (mode == 0 || mode == 3) {
      EXPECT_TRUE(r.evicted.empty());
      // The budget that stopped it is said (a trial read only "no node can take it now").
      EXPECT_EQ(adm_->reason(big).find("; no consolidation plan: queue a's disruptionBudget (0) "
                                       "lets none of its work be moved") != std::string::npos,
                mode == 3)
          << adm_->reason(big);
      continue;
    }
    if (mode == 2) {
      // One now, its room held; the second once the first has stopped.
      ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(big);
      EXPECT_NE(adm_->reason(big).find("consolidating: moving 1 workload(s)"), std::string::npos)
          << adm_->reason(big);
      EXPECT_NE(adm_->reason(big).find("; 1 more to go as the disruption budget of queue a allows"),
                std::string::npos)
          << adm_->reason(big);
      EXPECT_TRUE(adm_->Cycle(12, 1000).evicted.empty()) << adm_->reason(big);
      adm_->Terminated(r.evicted[0].victim, 13);
      const CycleResult second = adm_->Cycle(14, 1000);
      ASSERT_EQ(second.evicted.size(), 1u) << adm_->reason(big);
      EXPECT_EQ(adm_->phase(big), Phase::kPending);
      EXPECT_EQ(adm_->reason(big).find("more to go"), std::string::npos) << adm_->reason(big);
      adm_->Terminated(second.evicted[0].victim, 15);
      adm_->Cycle(16, 1000);
      EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
      EXPECT_EQ(CountPhase(small, Phase::kAdmitted), 4);
      continue;
    }
    ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(big);
    for (const Eviction& e : r.evicted) {
      EXPECT_EQ(e.preemptor, big);
      EXPECT_NE(e.reason.find("consolidation"), std::string::npos) << e.reason;
    }
    EXPECT_NE(adm_->reason(big).find("consolidating: moving 2"), std::string::npos)
        << adm_->reason(big);
    for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 20);
    adm_->Cycle(21, 1000);
    EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
    EXPECT_EQ(CountPhase(small, Phase::kAdmitted), 4);
    EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
  }
}

// A consolidation that would move more work than consolidationMaxMoves allows says so (a trial
// could not tell why scattered room was never gathered): two moves needed, one allowed.
TEST_F(AdmissionTest, AConsolidationPastItsMoveCapSaysSo) {
  AdmissionConfig config;
  config.consolidation_max_moves = 1;
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)}, {}, config);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(
        adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), OnGpus(i / 2, {i % 2}), 0).ok());
  const int big = Submit(Gpus("b0", "b", 4), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty());
  EXPECT_NE(adm_->reason(big).find("; no consolidation plan: it would move more than 1 "
                                   "workloads (consolidationMaxMoves)"),
            std::string::npos)
      << adm_->reason(big);
}

// A budget that holds back both a consolidation and a reclaim is named once, the same way each
// cycle (a trial read queue a's budget twice in one message). a borrows 2 GPUs, two on each
// node; b's 4-GPU workload would move or reclaim them, but a's budget is 0.
TEST_F(AdmissionTest, ABudgetHoldingConsolidationAndReclaimIsNamedOnce) {
  Make(Nodes(2, 4), {Leaf("a", 2, std::nullopt, std::nullopt, /*budget=*/0), Leaf("b", 4)});
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(
        adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), OnGpus(i / 2, {i % 2}), 0).ok());
  const int big = Submit(Gpus("b0", "b", 4), 10);
  std::string first;
  for (int t = 11; t < 14; ++t) {
    EXPECT_TRUE(adm_->Cycle(t, 1000).evicted.empty());
    const std::string why = adm_->reason(big);
    const size_t at = why.find("disruptionBudget");
    ASSERT_NE(at, std::string::npos) << why;
    EXPECT_EQ(why.find("disruptionBudget", at + 1), std::string::npos) << why;
    EXPECT_NE(why.find("; waiting: queue a's disruptionBudget is 0: none of its work is evicted "
                       "or moved until an administrator raises it"),
              std::string::npos)
        << why;
    if (t == 11) first = why;
    EXPECT_EQ(why, first);
  }
}

// A gang that needs one leaf is consolidated within a leaf: b's 1-GPU work on n1 moves to the
// other leaf's free GPUs, clearing leaf-1 for both its pods (a trial's gang waited for good
// beside such a leaf: consolidation left required topology to preemption, which had nothing
// to take, every queue within its guarantee).
TEST_F(AdmissionTest, AGangThatNeedsOneLeafIsConsolidatedWithinALeaf) {
  Fleet fleet = Nodes(4, 8);
  for (int n = 0; n < 4; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
  Make(fleet, {Leaf("a", 16), Leaf("b", 16)});
  // b: four 1-GPU workloads on each of n1, n2 and n3 (n0 free): 8 + 4 free in leaf-1, 4 + 4
  // in leaf-2.
  std::vector<int> b;
  for (int i = 0; i < 12; ++i) {
    auto r = adm_->Restore(Gpus("b" + std::to_string(i), "b", 1), OnGpus(1 + i / 4, {i % 4}), 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    b.push_back(*r);
  }
  Workload gang = Gpus("gang", "a", 8, 0, 2, /*gang=*/true);
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(gang, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kPending);
  ASSERT_EQ(r.evicted.size(), 4u) << adm_->reason(g);
  for (const Eviction& e : r.evicted) {
    EXPECT_EQ(adm_->assignments(e.victim)[0].node, 1) << e.reason;
    EXPECT_NE(e.reason.find("consolidation"), std::string::npos) << e.reason;
  }
  EXPECT_NE(adm_->reason(g).find("consolidating: moving 4"), std::string::npos) << adm_->reason(g);
  EXPECT_NE(adm_->reason(g).find("; its pods go in leaf leaf-1 (its gang needs one leaf)"),
            std::string::npos)
      << adm_->reason(g);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 20);
  adm_->Cycle(21, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  for (const Assignment& a : adm_->assignments(g)) EXPECT_LT(a.node, 2);
  EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 12);  // (the movers placed again, in leaf-2)
}

// ... also where its excludeNodes leaves out a node of the other leaf: the work moved goes there
// (a trial's gang, excluding n0, was refused any plan: the free GPUs it may use, 12, were
// counted short of its 16, though moves to n0 and n1 would clear leaf-2).
TEST_F(AdmissionTest, AGangsExcludedNodesStillTakeTheWorkItsConsolidationMoves) {
  Fleet fleet = Nodes(4, 8);
  for (int n = 0; n < 4; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
  Make(fleet, {Leaf("a", 16), Leaf("b", 16)});
  std::vector<int> b;  // four 1-GPU workloads on each node: 4 free on every one
  for (int i = 0; i < 16; ++i) {
    auto r = adm_->Restore(Gpus("b" + std::to_string(i), "b", 1), OnGpus(i / 4, {i % 4}), 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    b.push_back(*r);
  }
  Workload gang = Gpus("gang", "a", 8, 0, 2, /*gang=*/true);
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  gang.pod_sets[0].nodes.exclude = {"n0"};
  const int g = Submit(gang, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kPending);
  ASSERT_EQ(r.evicted.size(), 8u) << adm_->reason(g);
  for (const Eviction& e : r.evicted) EXPECT_GE(adm_->assignments(e.victim)[0].node, 2);
  EXPECT_NE(adm_->reason(g).find("its pods go in leaf leaf-2"), std::string::npos)
      << adm_->reason(g);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 20);
  adm_->Cycle(21, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  for (const Assignment& a : adm_->assignments(g)) EXPECT_GE(a.node, 2);
  EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 16);  // (the movers placed again, in leaf-1)
  for (int v : b)
    if (adm_->phase(v) == Phase::kAdmitted) EXPECT_LT(adm_->assignments(v)[0].node, 2);
}

// ... and admitted there once its movers have stopped, however many other domains have as much
// room free (a review: the gang placer tries the tightest few that could hold it, and the one
// the plan cleared came too late). Seventeen leaves of four nodes with 4 of 8 GPUs free on each
// (work that cannot move holds the rest) come before the leaf whose second node four moves clear.
TEST_F(AdmissionTest, AGangIsAdmittedInTheDomainItsConsolidationCleared) {
  constexpr int kDecoys = 17;
  Fleet fleet = Nodes(kDecoys * 4 + 2, 8);
  for (int n = 0; n < kDecoys * 4 + 2; ++n)
    fleet.nodes[n].leaf = n < kDecoys * 4 ? "d" + std::to_string(100 + n / 4) : "target";
  Make(fleet, {Leaf("a", 16), Leaf("b", 1000)});
  SubmitOptions pinned;
  pinned.preemptible = false;
  for (int n = 0; n < kDecoys * 4; ++n)
    ASSERT_TRUE(
        adm_->Restore(Gpus("p" + std::to_string(n), "b", 4), OnGpus(n, {0, 1, 2, 3}), 0, pinned)
            .ok());
  for (int d = 0; d < 4; ++d)
    ASSERT_TRUE(
        adm_->Restore(Gpus("m" + std::to_string(d), "b", 1), OnGpus(kDecoys * 4 + 1, {d}), 0).ok());
  Workload gang = Gpus("gang", "a", 8, 0, 2, /*gang=*/true);
  gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
  const int g = Submit(gang, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 4u) << adm_->reason(g);
  EXPECT_NE(adm_->reason(g).find("its pods go in leaf target"), std::string::npos)
      << adm_->reason(g);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 20);
  adm_->Cycle(21, 1000);
  ASSERT_EQ(adm_->phase(g), Phase::kAdmitted) << adm_->reason(g);
  for (const Assignment& a : adm_->assignments(g)) EXPECT_GE(a.node, kDecoys * 4);
}

// A consolidation move is another queue's disruption too: a's work asking two hours of minimum
// runtime may be moved for b once a's reclaimMinRuntime (the config's hour) has passed.
TEST_F(AdmissionTest, ConsolidationMovesOtherQueuesWorkPastItsReclaimMinRuntime) {
  AdmissionConfig config;
  config.reclaim_min_runtime_s = 3600;
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 4)}, {}, config);
  SubmitOptions two_hours;
  two_hours.min_runtime_s = 7200;
  for (int i = 0; i < 4; ++i) {
    Assignment at;
    at.node = i / 2;
    at.devices.push_back({i % 2, 1000, 80 * 1024, -1});
    auto r = adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), {at}, 0, two_hours);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  const int big = Submit(Gpus("b0", "b", 4), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(big);
  EXPECT_TRUE(adm_->Cycle(3599, 1000).evicted.empty()) << adm_->reason(big);
  CycleResult r = adm_->Cycle(3600, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(big);
  for (const Eviction& e : r.evicted)
    EXPECT_NE(e.reason.find("consolidation"), std::string::npos) << e.reason;
}

TEST_F(AdmissionTest, RoomFreedWhileAGuaranteeWaitsIsNotLentAway) {
  Make(Nodes(1, 4), {Leaf("a", 2), Leaf("b", 2)});
  std::vector<int> borrowed;
  for (int i = 0; i < 4; ++i) borrowed.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1)));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 4);
  int mine = Submit(Gpus("a0", "a", 2), 10);
  int more = Submit(Gpus("b4", "b", 1), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u);
  // One of b's other workloads ends before the victims stop: its GPU stays free for a0, b4
  // (which would borrow) does not get it.
  for (int id : borrowed)
    if (adm_->phase(id) == Phase::kAdmitted) {
      adm_->Finish(id, 12);
      break;
    }
  adm_->Cycle(13, 1000);
  EXPECT_EQ(adm_->phase(more), Phase::kPending);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 41);
  adm_->Cycle(42, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted);
}

TEST_F(AdmissionTest, NoReclaimAboveGuarantee) {
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 2)});
  std::vector<int> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1)));
  adm_->Cycle(1, 1000);
  std::vector<int> b = SubmitEach("b", "b", 4, 2);
  CycleResult r = adm_->Cycle(3, 1000);
  // b gets the 2 free GPUs (its guarantee), and reclaims nothing more: it would be borrowing.
  EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 2);
  EXPECT_TRUE(r.evicted.empty());
}

TEST_F(AdmissionTest, HigherPriorityPreemptsLowerInItsQueueNewestFirst) {
  Make(Nodes(1, 4), {Leaf("a", 4)});
  std::vector<int> low;
  for (int i = 0; i < 4; ++i) {
    low.push_back(Submit(Gpus("low" + std::to_string(i), "a", 1, 0), i));
    adm_->Cycle(i + 1, 1000);  // admitted at t = 1, 2, 3, 4
  }
  int high = Submit(Gpus("high", "a", 1, 10), 100);
  CycleResult r = adm_->Cycle(101, 1000);
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0].victim, low[3]) << "the newest low-priority workload loses least";
  EXPECT_NE(r.evicted[0].reason.find("higher-priority"), std::string::npos);
  adm_->Terminated(low[3], 130);
  adm_->Cycle(131, 1000);
  EXPECT_EQ(adm_->phase(high), Phase::kAdmitted);
  // Equal priority never preempts.
  int peer = Submit(Gpus("peer", "a", 1, 0), 200);
  CycleResult none = adm_->Cycle(201, 1000);
  EXPECT_TRUE(none.evicted.empty());
  EXPECT_EQ(adm_->phase(peer), Phase::kPending);
}

// The room a priority preemption in a queue frees is its preemptor's: the queue's other work
// does not read it as the queue's guarantee left free and reclaim from other queues for it (a
// trial: one eviction for `high` let an unrelated lower-priority workload of the same queue
// "reclaim its guarantee" from c, ending the queue past its guarantee after three evictions).
TEST_F(AdmissionTest, RoomAPriorityPreemptionFreesIsNotReclaimedAgainByItsQueue) {
  Make(Nodes(2, 8), {Leaf("a", 6), Leaf("b", 6), Leaf("c", 4)});
  std::vector<int> c, b;
  for (int i = 0; i < 5; ++i) c.push_back(Submit(Gpus("c" + std::to_string(i), "c", 2, -10), i));
  adm_->Cycle(5, 1000);
  for (int i = 0; i < 3; ++i) {
    b.push_back(Submit(Gpus("b" + std::to_string(i), "b", 2, -10), 10 + i));
    adm_->Cycle(11 + i, 1000);  // (admitted at 11, 12, 13)
  }
  ASSERT_EQ(CountPhase(c, Phase::kAdmitted) + CountPhase(b, Phase::kAdmitted), 8);
  // (Past c's work's reclaim minimum runtime. b is at its guarantee: low waits.)
  const int low = Submit(Gpus("low", "b", 2, -20), 5000);
  const int high = Submit(Gpus("high", "b", 2, 100), 5010);
  CycleResult r = adm_->Cycle(5011, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << (r.evicted.empty() ? "" : r.evicted.back().reason);
  EXPECT_EQ(r.evicted[0].victim, b[2]);
  EXPECT_NE(r.evicted[0].reason.find("higher-priority"), std::string::npos);
  EXPECT_EQ(adm_->phase(low), Phase::kPending);
  EXPECT_EQ(adm_->reason(low).find("preempted workload"), std::string::npos) << adm_->reason(low);
  {
    std::vector<std::pair<Workload, std::vector<Assignment>>> running;
    for (int i = 0; i < 5; ++i)
      running.push_back({Gpus("c" + std::to_string(i), "c", 2, -10), adm_->assignments(c[i])});
    for (int i = 0; i < 3; ++i)
      running.push_back({Gpus("b" + std::to_string(i), "b", 2, -10), adm_->assignments(b[i])});
    const std::vector<Assignment> plan = adm_->plan(high);
    auto keep = std::move(adm_);
    auto keep_policy = std::move(policy_);
    Make(Nodes(2, 8), {Leaf("a", 6), Leaf("b", 6), Leaf("c", 4)});
    std::vector<int> ids;
    for (size_t i = 0; i < running.size(); ++i) {
      auto id = adm_->Restore(running[i].first, running[i].second, 11, {}, i == running.size() - 1);
      ASSERT_TRUE(id.ok()) << id.status().message();
      ids.push_back(*id);
    }
    const int low2 = Submit(Gpus("low", "b", 2, -20), 5000);
    const int high2 = Submit(Gpus("high", "b", 2, 100), 5010);
    adm_->RestoreNomination(high2, 1, plan, {ids.back()});
    r = adm_->Cycle(5012, 1000);
    EXPECT_TRUE(r.evicted.empty()) << r.evicted[0].reason;
    EXPECT_EQ(adm_->phase(low2), Phase::kPending) << adm_->reason(low2);
    adm_ = std::move(keep);
    policy_ = std::move(keep_policy);
  }
  adm_->Terminated(b[2], 5030);
  r = adm_->Cycle(5031, 1000);
  EXPECT_EQ(adm_->phase(high), Phase::kAdmitted);
  EXPECT_EQ(adm_->phase(low), Phase::kPending) << adm_->reason(low);
  EXPECT_TRUE(r.evicted.empty()) << r.evicted[0].reason;
}

// ... and all of what the victim holds, where it holds more than its preemptor asks: the rest is
// the queue's again once it stops (a trial's 2-GPU preemption of a 6-GPU workload let a lower-
// priority 2-GPU workload of the queue reclaim from c in the same cycle).
TEST_F(AdmissionTest, RoomAPriorityPreemptionFreesPastItsPreemptorIsNotReclaimedEither) {
  Make(Nodes(2, 8), {Leaf("a", 6), Leaf("b", 6), Leaf("c", 4)});
  std::vector<int> c;
  for (int i = 0; i < 5; ++i) c.push_back(Submit(Gpus("c" + std::to_string(i), "c", 2, -10), i));
  adm_->Cycle(5, 1000);
  const int big = Submit(Gpus("big", "b", 6, -10), 10);
  adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kAdmitted);
  ASSERT_EQ(CountPhase(c, Phase::kAdmitted), 5);
  // (Past c's work's reclaim minimum runtime.)
  const int low = Submit(Gpus("low", "b", 2, -20), 5000);
  const int high = Submit(Gpus("high", "b", 2, 100), 5010);
  CycleResult r = adm_->Cycle(5011, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << (r.evicted.empty() ? "" : r.evicted.back().reason);
  EXPECT_EQ(r.evicted[0].victim, big);
  r = adm_->Cycle(5012, 1000);
  EXPECT_TRUE(r.evicted.empty()) << r.evicted[0].reason;
  adm_->Terminated(big, 5030);
  r = adm_->Cycle(5031, 1000);
  EXPECT_TRUE(r.evicted.empty()) << r.evicted[0].reason;
  EXPECT_EQ(adm_->phase(high), Phase::kAdmitted);
  EXPECT_EQ(adm_->phase(low), Phase::kAdmitted) << adm_->reason(low);
  EXPECT_EQ(CountPhase(c, Phase::kAdmitted), 5);
}

// ... nor, where a disruption budget lets its victims go one at a time, is the room of those
// that have already stopped: a preemptor that goes on is promised at least what it asks (a
// review: once the budget's first victim stopped, that victim, back in line, "reclaimed" the
// room it had left from another queue).
TEST_F(AdmissionTest, RoomAPreemptorGoingOnBatchByBatchHoldsIsNotReclaimedEither) {
  Make(Nodes(2, 8), {Leaf("a", 6), Leaf("b", 6, std::nullopt, std::nullopt, 1), Leaf("c", 4)});
  std::vector<int> c, b;
  for (int i = 0; i < 5; ++i) c.push_back(Submit(Gpus("c" + std::to_string(i), "c", 2, -10), i));
  adm_->Cycle(5, 1000);
  for (int i = 0; i < 3; ++i) {
    b.push_back(Submit(Gpus("b" + std::to_string(i), "b", 2, -10), 10 + i));
    adm_->Cycle(11 + i, 1000);
  }
  ASSERT_EQ(CountPhase(c, Phase::kAdmitted) + CountPhase(b, Phase::kAdmitted), 8);
  // (Past c's work's reclaim minimum runtime.) high needs two of b's, one at a time.
  const int high = Submit(Gpus("high", "b", 4, 100), 5010);
  CycleResult r = adm_->Cycle(5011, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(high);
  const int first = r.evicted[0].victim;
  EXPECT_EQ(first, b[2]);
  adm_->Terminated(first, 5030);
  const int back = Submit(Gpus("b2", "b", 2, -10), 5030);  // (back in line)
  r = adm_->Cycle(5031, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << (r.evicted.size() > 1 ? r.evicted[1].reason : "");
  EXPECT_EQ(r.evicted[0].victim, b[1]);
  EXPECT_EQ(adm_->phase(back), Phase::kPending) << adm_->reason(back);
  EXPECT_EQ(CountPhase(c, Phase::kAdmitted), 5);
  adm_->Terminated(b[1], 5050);
  r = adm_->Cycle(5051, 1000);
  EXPECT_TRUE(r.evicted.empty()) << r.evicted[0].reason;
  EXPECT_EQ(adm_->phase(high), Phase::kAdmitted) << adm_->reason(high);
  EXPECT_EQ(adm_->phase(back), Phase::kPending) << adm_->reason(back);
  EXPECT_EQ(CountPhase(c, Phase::kAdmitted), 5);
}

// A memory-only share needs on a node the compute its memory is of that node's GPUs: 20Gi is
// 0.833 of an L4 but 0.141 of an H200, so the 0.2 a lower-priority share holds on a full H200
// makes its room (a review: the search's node pre-filter asked 0.833 there and passed the
// H200 over, so it waited behind work it outranks).
TEST_F(AdmissionTest, AMemoryShareOutranksTheShareWhoseRoomItNeedsOnALargerGpu) {
  Fleet fleet = WithNodeOf(WithNodeOf(Nodes(1, 1), "l0", 1, "L4", 24), "m0", 1, "H200", 141);
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  Make(fleet, {Leaf("a", 8)});
  const auto pinned = [](Workload w, const std::string& model) {
    w.pod_sets[0].device.models = {model};
    return w;
  };
  std::vector<int> held = {Submit(pinned(Gpus("h100", "a", 1, 10), "H100")),
                           Submit(pinned(Gpus("l4", "a", 1, 10), "L4")), -1};
  Workload top = pinned(Fraction("top", "a", 800, "a"), "H200");
  top.priority = 10;
  held[2] = Submit(top);
  const int l = Submit(pinned(Fraction("low", "a", 200, "a"), "H200"));
  adm_->Cycle(1, 1000);
  for (int id : held) ASSERT_EQ(adm_->phase(id), Phase::kAdmitted) << adm_->reason(id);
  ASSERT_EQ(adm_->phase(l), Phase::kAdmitted) << adm_->reason(l);
  Workload kv = Fraction("kv", "a", 0, "a");
  kv.priority = 5;
  kv.pod_sets[0].device.gpu_memory = MemoryMib(20 * 1024);
  const int k = Submit(kv, 100);
  EXPECT_EQ(adm_->gpu_milli(k), 833);  // (waiting: as on the L4)
  CycleResult r = adm_->Cycle(101, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(k);
  EXPECT_EQ(r.evicted[0].victim, l);
  adm_->Terminated(l, 131);
  adm_->Cycle(131, 1000);
  ASSERT_EQ(adm_->phase(k), Phase::kAdmitted) << adm_->reason(k);
  EXPECT_EQ(adm_->gpu_milli(k), 141);
  for (const Assignment& a : adm_->assignments(k)) EXPECT_EQ(a.node, 2);
}

// Victims are picked cheapest first, then those the rest make room and quota without are let
// go (as Kueue keeps its preemption targets minimal): a user-style review saw a cheap small
// workload evicted beside the one whose GPUs were needed, and admitted again a second later.
TEST_F(AdmissionTest, APreemptionForQuotaEvictsNoVictimItDoesNotNeed) {
  // Quota: queue a is guaranteed 4 GPUs and holds 3.2; `high` needs 2, so 1.2 must go: the
  // 0.2 share (the cheapest) alone is too little, the 2-GPU job alone enough.
  Make(Nodes(2, 4), {Leaf("a", 4, /*borrowing=*/0.0)});
  const int job = Submit(Gpus("job", "a", 2), 0);
  const int keep = Submit(Gpus("keep", "a", 1, 10), 0);
  adm_->Cycle(1, 1000);
  const int share = Submit(Fraction("share", "a", 200, "a"), 50);
  adm_->Cycle(51, 1000);
  ASSERT_EQ(CountPhase({job, keep, share}, Phase::kAdmitted), 3);
  Submit(Gpus("high", "a", 2, 10), 100);
  CycleResult r = adm_->Cycle(101, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << r.evicted.size() << " victims";
  EXPECT_EQ(r.evicted[0].victim, job);
}

TEST_F(AdmissionTest, APreemptionForRoomEvictsNoVictimItDoesNotNeed) {
  // Room: one node of 4 GPUs, full: `older` (2 GPUs), `newer` (1, cheaper: it ran less) and
  // `keep` (1, above the preemptor); `hot` needs 2 on the node: `older` alone makes them.
  Make(Nodes(1, 4), {Leaf("a", 8)});
  const int older = Submit(Gpus("older", "a", 2), 0);
  const int top = Submit(Gpus("keep", "a", 1, 10), 0);
  adm_->Cycle(1, 1000);
  const int newer = Submit(Gpus("newer", "a", 1), 80);
  adm_->Cycle(81, 1000);
  ASSERT_EQ(CountPhase({older, top, newer}, Phase::kAdmitted), 3);
  Submit(Gpus("hot", "a", 2, 5), 100);
  CycleResult r = adm_->Cycle(101, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << r.evicted.size() << " victims";
  EXPECT_EQ(r.evicted[0].victim, older);
}

// A workload just restarted after an eviction would lose little if evicted again, so by its
// run alone it is the cheapest victim every time (it could be evicted over and over, never
// finishing): what its earlier evictions lost counts toward its cost. Here low1 loses 529
// GPU-seconds to high1 (low0 is within its minimum runtime); when high2 comes, low1 has run 699
// s again and low0 1,100 s: low0 goes, its 1,100 less than low1's 699 + 529.
TEST_F(AdmissionTest, AWorkloadRestartedAfterAnEvictionCountsWhatThatLost) {
  Make(Nodes(1, 2), {Leaf("a", 2)});
  int low1 = Submit(Gpus("low1", "a", 1, 0), 0);
  int filler = Submit(Gpus("filler", "a", 1, 0), 0);
  adm_->Cycle(1, 1000);
  adm_->Finish(filler, 199);
  SubmitOptions protect;
  protect.min_runtime_s = 1000;
  int low0 = Submit(Gpus("low0", "a", 1, 0), 199, protect);
  adm_->Cycle(200, 1000);
  ASSERT_EQ(adm_->phase(low0), Phase::kAdmitted);
  int high1 = Submit(Gpus("high1", "a", 1, 10), 500);
  CycleResult first = adm_->Cycle(500, 1000);
  ASSERT_EQ(first.evicted.size(), 1u);
  EXPECT_EQ(first.evicted[0].victim, low1) << "low0 is within its minimum runtime";
  adm_->Terminated(low1, 530);  // its run since 1: 529 GPU-seconds lost
  adm_->Cycle(531, 1000);
  ASSERT_EQ(adm_->phase(high1), Phase::kAdmitted);
  adm_->Finish(high1, 600);
  adm_->Cycle(601, 1000);
  ASSERT_EQ(adm_->phase(low1), Phase::kAdmitted);
  EXPECT_DOUBLE_EQ(adm_->LostIfEvicted(low1, 1300), 699);
  EXPECT_DOUBLE_EQ(adm_->EvictionCost(low1, 1300), 699 + 529);
  EXPECT_DOUBLE_EQ(adm_->EvictionCost(low0, 1300), 1100);
  Submit(Gpus("high2", "a", 1, 10), 1300);
  CycleResult second = adm_->Cycle(1300, 1000);
  ASSERT_EQ(second.evicted.size(), 1u);
  EXPECT_EQ(second.evicted[0].victim, low0) << "low1 was evicted once already";
  // The server restores that history (status.evictions.gpuSecondsLost) with the workload.
  Make(Nodes(1, 2), {Leaf("a", 2)});
  Assignment gpu0;
  gpu0.node = 0;
  gpu0.devices.push_back({0, 1000, 80 * 1024, -1});
  SubmitOptions history;
  history.lost_before_s = 529;
  auto restored = adm_->Restore(Gpus("low1", "a", 1, 0), {gpu0}, 601, history);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_DOUBLE_EQ(adm_->EvictionCost(*restored, 1300), 699 + 529);
}

// Non-preemptible work is never a victim, so it is admitted only within its queue's guarantee:
// borrowed room it held could never be taken back (KAI's rule; a user-style review borrowed 8
// GPUs on a guarantee of 2 with `preemptible: false`, and the lending queue's own work then
// waited for ever). Preemptible work of the same queue still borrows.
TEST_F(AdmissionTest, NonPreemptibleWorkDoesNotBorrow) {
  Make(Nodes(1, 8), {Leaf("a", 2), Leaf("b", 6)});
  SubmitOptions pinned;
  pinned.preemptible = false;
  std::vector<int> np;
  for (int i = 0; i < 3; ++i)
    np.push_back(Submit(Gpus("np" + std::to_string(i), "a", 1), i, pinned));
  CycleResult r = adm_->Cycle(10, 1000);
  EXPECT_EQ(adm_->phase(np[0]), Phase::kAdmitted);
  EXPECT_EQ(adm_->phase(np[1]), Phase::kAdmitted);
  EXPECT_EQ(adm_->phase(np[2]), Phase::kPending);
  EXPECT_NE(adm_->reason(np[2]).find("queue a's non-preemptible work would hold 3/2 GPUs of gpu, "
                                     "past its guarantee: non-preemptible work may not borrow"),
            std::string::npos)
      << adm_->reason(np[2]);
  EXPECT_TRUE(r.evicted.empty());
  int borrower = Submit(Gpus("borrower", "a", 2), 20);
  adm_->Cycle(21, 1000);
  EXPECT_EQ(adm_->phase(borrower), Phase::kAdmitted) << adm_->reason(borrower);
  EXPECT_EQ(adm_->phase(np[2]), Phase::kPending) << "its queue borrows now: still not";
  // b's own work reclaims what a borrowed: the preemptible borrower goes, never np*.
  for (int i = 0; i < 6; ++i) Submit(Gpus("b" + std::to_string(i), "b", 1), 30 + i);
  CycleResult reclaim = adm_->Cycle(40, 1000);
  ASSERT_FALSE(reclaim.evicted.empty());
  for (const Eviction& ev : reclaim.evicted) EXPECT_EQ(ev.victim, borrower);
  adm_->Terminated(borrower, 70);
  adm_->Cycle(71, 1000);
  EXPECT_EQ(adm_->phase(np[2]), Phase::kPending) << adm_->reason(np[2]);
  // Room within its queue's guarantee frees: it starts.
  adm_->Finish(np[0], 80);
  adm_->Cycle(81, 1000);
  EXPECT_EQ(adm_->phase(np[2]), Phase::kAdmitted) << adm_->reason(np[2]);
  // Refused by its queue's borrowing limit too, it is told of the limit that holds whatever
  // else frees (a user-style review saw "over its borrowing limit", as if waiting would do).
  Make(Nodes(1, 8), {Leaf("a", 2, /*borrowing=*/1), Leaf("b", 6)});
  for (int i = 0; i < 2; ++i) Submit(Gpus("np" + std::to_string(i), "a", 1), i, pinned);
  Submit(Gpus("borrower", "a", 1), 5);
  const int third = Submit(Gpus("np2", "a", 1), 6, pinned);
  adm_->Cycle(10, 1000);
  EXPECT_EQ(adm_->phase(third), Phase::kPending);
  EXPECT_EQ(adm_->reason(third).rfind("queue a's non-preemptible work would hold 3/2 GPUs", 0), 0u)
      << adm_->reason(third);
}

// Higher-priority work whose own queue's lower-priority work is all non-preemptible is told so,
// not only of the quota (a user-style trial read "queue lab has no unused h200 to lend").
TEST_F(AdmissionTest, WorkWhoseOwnLowerPriorityWorkIsPinnedIsToldSo) {
  Make(Nodes(1, 4), {Leaf("a", 2), Leaf("c", 2)});
  SubmitOptions pinned;
  pinned.preemptible = false;
  std::vector<int> first = {Submit(Gpus("np0", "a", 1), 0, pinned),
                            Submit(Gpus("np1", "a", 1), 0, pinned), Submit(Gpus("c0", "c", 2), 0)};
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(first, Phase::kAdmitted), 3);
  const int crit = Submit(Gpus("crit", "a", 1, /*priority=*/100), 2);
  EXPECT_TRUE(adm_->Cycle(3, 1000).evicted.empty());
  EXPECT_EQ(adm_->phase(crit), Phase::kPending);
  EXPECT_NE(adm_->reason(crit).find("waiting: 2 workloads of queue a that its priority could "
                                    "preempt are not preemptible (spec.preemptible: false)"),
            std::string::npos)
      << adm_->reason(crit);
}

// Only non-preemptible work counts against the guarantee (KAI's rule): beside it its queue may
// borrow with preemptible work, which a reclaim takes back — never the non-preemptible (a
// user-style review saw urgent non-preemptible work refused because preemptible work of its
// queue borrowed). Work that could never fit within the guarantee is refused at once.
TEST_F(AdmissionTest, NonPreemptibleWorkBesideBorrowedWorkLeavesReclaimPossible) {
  Make(Nodes(1, 8), {Leaf("a", 4), Leaf("b", 4)});
  std::vector<int> low;
  for (int i = 0; i < 4; ++i) low.push_back(Submit(Gpus("low" + std::to_string(i), "a", 1, 0), i));
  adm_->Cycle(10, 1000);
  ASSERT_EQ(CountPhase(low, Phase::kAdmitted), 4);
  SubmitOptions pinned;
  pinned.preemptible = false;
  const int np = Submit(Gpus("np", "a", 2, 10), 20, pinned);
  CycleResult r = adm_->Cycle(21, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(np), Phase::kAdmitted) << adm_->reason(np);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 6000);  // 2 of them borrowed
  // b takes back the 2 GPUs a borrows: from its preemptible work.
  for (int i = 0; i < 4; ++i) Submit(Gpus("b" + std::to_string(i), "b", 1), 30 + i);
  CycleResult reclaim = adm_->Cycle(40, 1000);
  ASSERT_EQ(reclaim.evicted.size(), 2u);
  for (const Eviction& ev : reclaim.evicted)
    EXPECT_NE(std::find(low.begin(), low.end(), ev.victim), low.end()) << ev.victim;
  // More than the guarantee could ever hold of non-preemptible work: refused now, not left
  // waiting for ever (nor holding a StrictFIFO queue).
  const int huge = Submit(Gpus("huge", "a", 5, 0), 50, pinned);
  EXPECT_EQ(adm_->phase(huge), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(huge),
            "asks for 5 GPUs; of gpu, queue a's guarantee, 4, is the most its non-preemptible "
            "work may hold");
}

// Guarantees past the fleet cannot all be met at once: each root guaranteed some is warned.
TEST_F(AdmissionTest, GuaranteesPastTheFleetAreWarnedOf) {
  for (const double b_gpus : {2.5, 2.0}) {
    SCOPED_TRACE(b_gpus);
    QueueSpec a = Leaf("a", 6), b = Leaf("b", b_gpus), idle = Leaf("idle", 0);
    a.parent = b.parent = idle.parent = "";
    AdmissionConfig config;
    config.queues = {a, b, idle};
    // (Trees that lend each other are warned of alike.)
    config.lend_across_trees = b_gpus == 2.5;
    MakeTree(Nodes(1, 8), config, {"a", "b", "idle"});
    const std::map<int, std::string> warnings = adm_->GuaranteeWarnings();
    if (b_gpus == 2.0) {
      EXPECT_TRUE(warnings.empty());
      continue;
    }
    ASSERT_EQ(warnings.size(), 2u);
    const std::string said =
        "the queue trees' guarantees of gpu add up to 8.5 GPUs, past the fleet's 8: they cannot "
        "all be met at once";
    EXPECT_EQ(warnings.at(adm_->QueueIndex("a")), said);
    EXPECT_EQ(warnings.at(adm_->QueueIndex("b")), said);
  }
}

// Guarantees that the GPUs in service no longer cover (a node out of service: cordoned, in
// repair, not ready) are warned of on each root guaranteed some (a trial's queue, its work
// evicted from a node in repair, was told nothing): two trees guaranteed all 8 GPUs, one node
// of 4 out.
TEST_F(AdmissionTest, GuaranteesPastTheGpusInServiceAreWarnedOf) {
  QueueSpec a = Leaf("a", 4), b = Leaf("b", 4);
  a.parent = b.parent = "";
  AdmissionConfig config;
  config.queues = {a, b};
  MakeTree(Nodes(2, 4), config, {"a", "b"});
  EXPECT_TRUE(adm_->GuaranteeWarnings().empty());
  adm_->TakeOutOfService(1);
  const std::map<int, std::string> warnings = adm_->GuaranteeWarnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings.at(adm_->QueueIndex("b")),
            "the queue trees' guarantees of gpu add up to 8 GPUs, and 4 of the fleet's 8 are out "
            "of service now (on n1: cordoned, draining, in repair or not ready): they cannot all "
            "be met until those are back");
}

// GPUs in MIG mode take MIG slices only: guarantees past the rest are warned of, as whole-GPU
// work cannot have them all (a user-style review's queues guaranteed 60 of 66 GPUs, 8 of them
// in MIG mode, and a 2-GPU job within its guarantee waited with no word why).
TEST_F(AdmissionTest, GuaranteesPastTheGpusNotInMigModeAreWarnedOf) {
  Fleet fleet = Nodes(2, 4);
  for (Device& d : fleet.nodes[1].devices) d.mig_slices = {"3g.40gb", "3g.40gb"};
  QueueSpec a = Leaf("a", 4), b = Leaf("b", 2.5);
  a.parent = b.parent = "";
  AdmissionConfig config;
  config.queues = {a, b};
  MakeTree(fleet, config, {"a", "b"});
  const std::map<int, std::string> warnings = adm_->GuaranteeWarnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings.at(adm_->QueueIndex("a")),
            "the queue trees' guarantees of gpu add up to 6.5 GPUs, past the fleet's 4 that "
            "whole-GPU work is charged to gpu on (the other 4 take only its MIG slices or "
            "fractions): whole-GPU work cannot have them all at once");
  // A flavour that takes a model's whole GPUs leaves the catch-all only their fractions: its
  // guarantees past the rest are warned of too (a trial's `h200` flavour of whole GPUs left the
  // catch-all 42 GPUs for whole-GPU work, its guarantees 58, unwarned).
  Fleet mixed = Nodes(2, 4);
  for (Device& d : mixed.nodes[1].devices) d.model = "H200";
  config.flavors = {FlavorSpec{"h200", DeviceKind::kWhole, {"H200"}, {}},
                    FlavorSpec{"gpu", {}, {}, {}}};
  config.queues[1].quotas["gpu"].guaranteed_milli = 1000;
  config.queues[1].quotas["h200"].guaranteed_milli = 2000;
  MakeTree(mixed, config, {"a", "b"});
  EXPECT_EQ(adm_->GuaranteeWarnings().at(adm_->QueueIndex("a")),
            "the queue trees' guarantees of gpu add up to 5 GPUs, past the fleet's 4 that "
            "whole-GPU work is charged to gpu on (the other 4 take only its MIG slices or "
            "fractions): whole-GPU work cannot have them all at once");
  // Flavours of MIG slices and of fractions take no whole-GPU work: within their GPUs, no
  // warning (a trial saw one on every `get queues`: "past the fleet's 0 that whole-GPU work is
  // charged to frac on").
  config.flavors = {FlavorSpec{"mig", DeviceKind::kMig, {}, {}},
                    FlavorSpec{"frac", DeviceKind::kFraction, {}, {}},
                    FlavorSpec{"gpu", {}, {}, {}}};
  config.queues[0].quotas = {{"mig", QuotaSpec{2000, {}, {}}}, {"frac", QuotaSpec{1000, {}, {}}}};
  config.queues[1].quotas = {{"mig", QuotaSpec{1000, {}, {}}}, {"frac", QuotaSpec{1000, {}, {}}}};
  MakeTree(fleet, config, {"a", "b"});
  EXPECT_TRUE(adm_->GuaranteeWarnings().empty()) << adm_->GuaranteeWarnings().begin()->second;
  // A flavour of MIG slices holds what its slices' compute does, less than their GPUs: eight
  // 3g.40gb slices on 4 GPUs are 3.424 GPUs, and a guarantee of 3.5 is past them (a trial's
  // guarantee of a profile's slices past what the fleet has of it was never warned of).
  config.queues[1].quotas["mig"].guaranteed_milli = 1500;
  MakeTree(fleet, config, {"a", "b"});
  const std::map<int, std::string> warnings_mig = adm_->GuaranteeWarnings();
  ASSERT_EQ(warnings_mig.size(), 2u);
  EXPECT_EQ(warnings_mig.at(adm_->QueueIndex("b")),
            "the queue trees' guarantees of mig add up to 3.5 GPUs, past the 3.428 its MIG slices "
            "hold (8 x 3g.40gb, each its compute slices out of 7): they cannot all be met at once");
}

// A GPU in the reach of two flavours (a fraction of an H100 is the catch-all's, a whole one
// h100's) meets one guarantee at a time: each flavour within its reach, all of them past the
// fleet's GPUs, is warned of too.
TEST_F(AdmissionTest, GuaranteesOfAllFlavoursPastTheFleetAreWarnedOf) {
  QueueSpec a = Leaf("a", 6), b = Plain("b");
  a.parent = b.parent = "";
  b.quotas["h100"] = QuotaSpec{4000, {}, {}};
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"h100", DeviceKind::kWhole, {}, {}}, FlavorSpec{"gpu", {}, {}, {}}};
  config.queues = {a, b};
  MakeTree(Nodes(1, 8), config, {"a", "b"});
  const std::map<int, std::string> warnings = adm_->GuaranteeWarnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings.at(adm_->QueueIndex("b")),
            "the queue trees' guarantees of all GPU flavours add up to 10 GPUs, past the fleet's "
            "8: they cannot all be met at once");
}

// A reclaim takes back only what a branch borrows from where the reclaiming queue's guarantee
// comes from (Kueue's hierarchical cohorts): y1 reclaims its 8 from y2, which borrows them
// within dept-y, not from x0, whose leaf has no guarantee of its own but whose department
// holds just its own 8 — whether the departments share a root or are roots of their own.
TEST_F(AdmissionTest, ReclaimTakesOnlyFromABranchThatBorrows) {
  for (const bool one_root : {true, false}) {
    SCOPED_TRACE(one_root);
    QueueSpec dept_x = Leaf("dept-x", 8), dept_y = Leaf("dept-y", 16);
    if (!one_root) dept_x.parent = dept_y.parent = "";
    QueueSpec x0 = Plain("x0"), y1 = Leaf("y1", 8), y2 = Leaf("y2", 8);
    x0.parent = "dept-x";
    y1.parent = y2.parent = "dept-y";
    AdmissionConfig config;
    config.queues = {dept_x, x0, dept_y, y1, y2};
    if (one_root) config.queues.insert(config.queues.begin(), QueueSpec{"org", "", 1, {}, -1});
    MakeTree(Nodes(3, 8), config, {"x0", "y1", "y2"});
    const std::vector<int> borrowed = SubmitEach("y", "y2", 2, 0, 8);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 2);
    const int x = Submit(Gpus("x", "x0", 8), 1);
    adm_->Cycle(2, 1000);
    ASSERT_EQ(adm_->phase(x), Phase::kAdmitted) << adm_->reason(x);
    const int mine = Submit(Gpus("mine", "y1", 8), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(r.evicted[0].victim)), "y2");
    EXPECT_EQ(adm_->phase(x), Phase::kAdmitted);
  }
}

// A reclaim takes back first what another department borrows from its department, then what
// its own department's queues borrow from it (KAI reclaims between departments first): pa's
// four GPUs come two from sb (rb-root, guaranteed 8, holds 10) and two from qa (pa's sibling
// without a guarantee), leaving both departments at their 8 — not all four from qa, the
// youngest, which would leave ra at 6 for good (qa cannot reclaim on its own).
TEST_F(AdmissionTest, ReclaimTakesFromOtherDepartmentsFirst) {
  QueueSpec ra = Leaf("ra", 8), rb = Leaf("rb-root", 8), pa = Leaf("pa", 8), qa = Plain("qa");
  QueueSpec b = Leaf("rb", 4), sb = Leaf("sb", 4);
  ra.parent = rb.parent = "top";
  pa.parent = qa.parent = "ra";
  b.parent = sb.parent = "rb-root";
  QueueSpec top{"top", "", 1, {}, -1};
  top.quotas["gpu"] = QuotaSpec{16000, {}, {}};
  AdmissionConfig config;
  config.queues = {top, ra, pa, qa, rb, b, sb};
  MakeTree(Nodes(2, 8), config, {"pa", "qa", "rb", "sb"});
  const std::vector<int> s = SubmitEach("s", "sb", 10, 0);
  adm_->Cycle(1, 1000);
  const std::vector<int> q = SubmitEach("q", "qa", 6, 2);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(CountPhase(s, Phase::kAdmitted) + CountPhase(q, Phase::kAdmitted), 16);
  SubmitEach("p", "pa", 4, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  std::map<std::string, int> from;
  for (const Eviction& e : r.evicted) ++from[adm_->queue_name(adm_->queue_of(e.victim))];
  EXPECT_EQ(from["sb"], 2);
  EXPECT_EQ(from["qa"], 2);
}

// org (16 GPUs) → team-a (12) → a1 (4), a2 (4); team-b (4).
AdmissionConfig TeamAWithItsOwnPart() {
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16000, {}, {}};
  QueueSpec a1 = Leaf("a1", 4), a2 = Leaf("a2", 4);
  a1.parent = a2.parent = "team-a";
  AdmissionConfig config;
  config.queues = {org, Leaf("team-a", 12), a1, a2, Leaf("team-b", 4)};
  return config;
}

// A department guaranteed more than its projects (team-a 12, its projects 4 and 4) holds the
// rest, 4, as its own: a project past its own guarantee takes back what another department
// borrows for it, up to that part (a user-style trial's team-a stayed at 4 while team-b held 12
// of its 4). Not past it: the other 4 are a2's, lent while a2 leaves them unused, and a2's own
// work takes them back (from team-b, which still borrows them).
TEST_F(AdmissionTest, ADepartmentsOwnGuaranteeIsReclaimedForItsProjects) {
  AdmissionConfig config = TeamAWithItsOwnPart();
  MakeTree(Nodes(2, 8), config, {"a1", "a2", "team-b"});
  const std::vector<int> b = SubmitEach("b", "team-b", 8, 0, 2);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(b, Phase::kAdmitted), 8);
  const std::vector<int> a = SubmitEach("a", "a1", 7, 10, 2);
  std::vector<int> evicted;
  std::string reasons;
  for (double t = 11; t < 200; t += 1) {
    CycleResult r = adm_->Cycle(t, 1000);
    for (const Eviction& ev : r.evicted) {
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), "team-b");
      evicted.push_back(ev.victim);
      reasons += ev.reason + "\n";
      adm_->Terminated(ev.victim, t);
    }
  }
  // Four of team-b's go; a1 runs its 4 and team-a's own 4, and the rest waits, saying why.
  EXPECT_EQ(evicted.size(), 4u);
  EXPECT_EQ(CountPhase(a, Phase::kAdmitted), 4);
  for (int id : a)
    if (adm_->phase(id) == Phase::kPending)
      EXPECT_NE(adm_->reason(id).find(
                    "queue a1 is past its guarantee of 4 GPUs of gpu; queue team-a (8/12) keeps "
                    "the rest of its guarantee for its other queues, lent while they leave it "
                    "unused: reclaim takes back for a queue past its own only what the "
                    "department is guaranteed beyond its queues (its own part, 4, is in use)"),
                std::string::npos)
          << adm_->reason(id);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("team-b")), 8000);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("team-a")), 8000);
  EXPECT_NE(reasons.find("(queue a1 reclaims queue team-a's guarantee (past its own))"),
            std::string::npos)
      << reasons;
  // a2, within its own 4, takes them back from team-b; team-a then holds its 12.
  const std::vector<int> mine = SubmitEach("m", "a2", 2, 300, 2);
  for (double t = 300; t < 400; t += 1) {
    CycleResult r = adm_->Cycle(t, 1000);
    for (const Eviction& ev : r.evicted) {
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), "team-b") << ev.reason;
      adm_->Terminated(ev.victim, t);
    }
  }
  EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 2);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("team-b")), 4000);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("team-a")), 12000);
}

// ... and a sibling's elastic work is not shrunk for it either: a1, past its own 4, takes
// team-a's own part back from team-b (which borrows 2), not pods of a2's elastic run, which
// holds 2 of that part within team-a (a review found the shrink path let such pods go).
TEST_F(AdmissionTest, ADepartmentsOwnGuaranteeShrinksNoSiblingsWork) {
  AdmissionConfig config = TeamAWithItsOwnPart();
  config.elastic_shrink = true;
  MakeTree(Nodes(2, 8), config, {"a1", "a2", "team-b"});
  ASSERT_EQ(CountPhase(SubmitEach("a", "a1", 4, 0), Phase::kPending), 4);
  adm_->Cycle(1, 1000);
  Workload run = Gpus("run", "a2", 1, 0, 6, /*gang=*/true);
  run.pod_sets[0].min_count = 2;
  const int elastic = Submit(run, 1);
  adm_->Cycle(2, 1000);
  ASSERT_EQ(adm_->pod_counts(elastic), std::vector<int>{6});
  const std::vector<int> b = SubmitEach("b", "team-b", 6, 2);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(CountPhase(b, Phase::kAdmitted), 6);
  const int mine = Submit(Gpus("x", "a1", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_FALSE(r.evicted.empty()) << adm_->reason(mine);
  for (const Eviction& ev : r.evicted)
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), "team-b") << ev.reason;
  EXPECT_EQ(adm_->pod_counts(elastic), std::vector<int>{6}) << adm_->reason(mine);
}

// A project with no guarantee of its own is past it from its first GPU: under a department
// guaranteed 4 it takes those 4 back from another department that borrows them, as a project
// guaranteed part of them does (a user-style trial's project waited saying only "the fleet has
// no room", while one guaranteed 2 of the 4 took back all 4). Its department's 4 in use, it
// takes no more; and a sibling guaranteed all of its department's (no own part) keeps them.
TEST_F(AdmissionTest, AProjectWithNoGuaranteeReclaimsItsDepartmentsOwnPart) {
  QueueSpec org{"org", "", 1, {}, -1};
  QueueSpec dept_a = Leaf("dept-a", 4), dept_b = Leaf("dept-b", 4);
  QueueSpec team_a = Plain("team-a"), team_b = Leaf("team-b", 4);
  dept_a.parent = dept_b.parent = "org";
  team_a.parent = "dept-a";
  team_b.parent = "dept-b";
  AdmissionConfig config;
  config.queues = {org, dept_a, team_a, dept_b, team_b};
  MakeTree(Nodes(1, 8), config, {"team-a", "team-b"});
  const std::vector<int> b = SubmitEach("b", "team-b", 8, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(b, Phase::kAdmitted), 8);
  const int mine = Submit(Gpus("a0", "team-a", 4), 10);
  int evicted = 0;
  for (double t = 11; t < 100; t += 1) {
    CycleResult r = adm_->Cycle(t, 1000);
    for (const Eviction& ev : r.evicted) {
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), "team-b");
      EXPECT_NE(ev.reason.find("queue team-a reclaims queue dept-a's guarantee (it has none of "
                               "its own)"),
                std::string::npos)
          << ev.reason;
      ++evicted;
      adm_->Terminated(ev.victim, t);
    }
  }
  EXPECT_EQ(evicted, 4);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
  // Past its department's 4 now: nothing more goes for it.
  const int more = Submit(Gpus("a1", "team-a", 1), 100);
  EXPECT_TRUE(adm_->Cycle(101, 1000).evicted.empty()) << adm_->reason(more);
  EXPECT_EQ(adm_->phase(more), Phase::kPending);

  // With a sibling guaranteed all of dept-a's 4, dept-a has no own part: those 4 are the
  // sibling's, lent while it leaves them unused, and team-a reclaims none of them.
  QueueSpec sibling = Leaf("a-sib", 4);
  sibling.parent = "dept-a";
  config.queues.push_back(sibling);
  MakeTree(Nodes(1, 8), config, {"team-a", "team-b", "a-sib"});
  SubmitEach("b", "team-b", 8, 0);
  adm_->Cycle(1, 1000);
  const int late = Submit(Gpus("a0", "team-a", 4), 10);
  for (double t = 11; t < 40; t += 1)
    EXPECT_TRUE(adm_->Cycle(t, 1000).evicted.empty()) << adm_->reason(late);
  EXPECT_EQ(adm_->phase(late), Phase::kPending);
}

// A project past its own guarantee that waits for team-a's own part is tried again once
// another tree borrows that part: a2's work past its guarantee held it when a1's 4-GPU job came
// (nothing to reclaim), then ended, 2 GPUs on each node, where the job does not fit, and
// team-b's new work took them. The job takes 4 back (a review: only a leaf within its own
// guarantee was woken for a reclaim, so the job waited until 4 GPUs of one node freed).
TEST_F(AdmissionTest, AProjectWaitingForItsDepartmentsPartIsWokenWhenAnotherTreeBorrowsIt) {
  AdmissionConfig config = TeamAWithItsOwnPart();
  MakeTree(Nodes(2, 8), config, {"a1", "a2", "team-b"});
  // n0: a1's 4, two of a2's past its guarantee, two of a2's own; n1: a2's other two, the other
  // two past it, team-b's 4.
  std::vector<int> past;
  SubmitEach("a1-", "a1", 4, 0);
  adm_->Cycle(1, 1000);
  for (int id : SubmitEach("a2x-", "a2", 2, 1)) past.push_back(id);
  adm_->Cycle(2, 1000);
  SubmitEach("a2-", "a2", 4, 2);
  adm_->Cycle(3, 1000);
  for (int id : SubmitEach("a2y-", "a2", 2, 3)) past.push_back(id);
  adm_->Cycle(4, 1000);
  SubmitEach("b-", "team-b", 4, 4);
  adm_->Cycle(5, 1000);
  ASSERT_EQ(adm_->usage_milli(adm_->QueueIndex("team-a")), 12000);
  ASSERT_EQ(adm_->usage_milli(adm_->QueueIndex("team-b")), 4000);
  for (int n = 0; n < 2; ++n) ASSERT_EQ(PlacedOn(past, n), 2);
  const int big = Submit(Gpus("big", "a1", 4), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(big);
  for (int id : past) adm_->Finish(id, 20);
  const std::vector<int> more = SubmitEach("b2-", "team-b", 4, 20);
  adm_->Cycle(21, 1000);
  ASSERT_EQ(CountPhase(more, Phase::kAdmitted), 4) << adm_->reason(big);
  std::vector<int> evicted;
  for (double t = 22; t < 60; t += 1)
    for (const Eviction& ev : adm_->Cycle(t, 1000).evicted) {
      evicted.push_back(ev.victim);
      adm_->Terminated(ev.victim, t);
    }
  EXPECT_EQ(evicted.size(), 4u) << adm_->reason(big);
  for (int v : evicted) EXPECT_EQ(adm_->queue_name(adm_->queue_of(v)), "team-b");
  EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
}

// Parked work is tried again when what kept it changes (a review of Wake; the replay's
// long-lived admitter runs a cycle only on events, so work never woken waited until a node it
// fit freed). Here: h1 (priority 5) takes queue a's one preemption search of the cycle and
// evicts l1; h2 (priority 4) waits without a search, and once h1 runs, h2 evicts l2
// (priority 0). With a disruption budget of 1 and searches to spare, h2 is held by the budget
// while l1 stops, and tries again once it has.
TEST_F(AdmissionTest, WorkWaitingForItsQueuesSearchOrBudgetTriesAgain) {
  for (bool budget : {false, true}) {
    SCOPED_TRACE(budget ? "disruption budget" : "one search a cycle");
    AdmissionConfig config;
    if (budget) config.preemption_searches_per_queue = 4;
    QueueSpec a = Plain("a");
    if (budget) a.disruption_budget = 1;
    Make(Nodes(2, 4), {a}, {}, config);
    const int l1 = Submit(Gpus("l1", "a", 4, 0), 0);
    const int l2 = Submit(Gpus("l2", "a", 4, 0), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(l1), Phase::kAdmitted);
    ASSERT_EQ(adm_->phase(l2), Phase::kAdmitted);
    const int h1 = Submit(Gpus("h1", "a", 4, 5), 2);
    const int h2 = Submit(Gpus("h2", "a", 4, 4), 2.5);
    CycleResult r = adm_->Cycle(3, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(h2);
    ASSERT_EQ(r.evicted[0].victim, l1);
    adm_->Terminated(l1, 10);
    std::vector<int> evicted;
    for (double t = 11; t < 20; t += 1)
      for (const Eviction& ev : adm_->Cycle(t, 1000).evicted) evicted.push_back(ev.victim);
    EXPECT_EQ(adm_->phase(h1), Phase::kAdmitted);
    EXPECT_EQ(evicted, std::vector<int>{l2}) << adm_->reason(h2);
  }
}

// Work whose quota narrowed it to one model (a's h100, while its a100 was in use) is woken
// when room of another model it may use frees, with that model's quota.
TEST_F(AdmissionTest, WorkNarrowedToOneModelIsWokenWhenAnotherModelFrees) {
  AdmissionConfig config = PerModelFlavours();
  config.consolidation = false;
  QueueSpec a = Plain("a");
  a.quotas["h100"] = QuotaSpec{8000, {}, {}};
  a.quotas["a100"] = QuotaSpec{4000, {}, {}};
  Make(H100AndA100(), {a}, {}, config);
  Workload hx = Gpus("hx", "a", 4), a1 = Gpus("a1", "a", 4);
  hx.pod_sets[0].device.models = {"H100"};
  a1.pod_sets[0].device.models = {"A100"};
  Submit(hx, 0);
  const int a100 = Submit(a1, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(a100), Phase::kAdmitted);
  const int w = Submit(Gpus("w", "a", 1), 2);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(w), Phase::kPending);
  adm_->Finish(a100, 10);
  adm_->Cycle(11, 1000);
  EXPECT_EQ(adm_->phase(w), Phase::kAdmitted) << adm_->reason(w);
}

// ... and a member of its parked shape that may not use the freed node's model does not take
// its wake: wb (A100 only) parked first beside w (any model, narrowed to A100 while a's h100
// quota was spent); an H100 node frees with its quota, and w is woken for it, not wb (a
// review: wb was woken, failed, and w waited for good).
TEST_F(AdmissionTest, AParkedShapesWakeGoesToAMemberThatMayUseTheFreedModel) {
  AdmissionConfig config = PerModelFlavours();
  config.consolidation = false;
  QueueSpec a = Plain("a");
  a.quotas["h100"] = QuotaSpec{4000, {}, {}};
  a.quotas["a100"] = QuotaSpec{8000, {}, {}};
  Make(H100AndA100(), {a}, {}, config);
  Workload hx = Gpus("hx", "a", 4), a1 = Gpus("a1", "a", 4);
  hx.pod_sets[0].device.models = {"H100"};
  a1.pod_sets[0].device.models = {"A100"};
  const int h100 = Submit(hx, 0);
  Submit(a1, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(h100), Phase::kAdmitted);
  Workload only_a100 = Gpus("wb", "a", 1);
  only_a100.pod_sets[0].device.models = {"A100"};
  const int wb = Submit(only_a100, 2);
  const int w = Submit(Gpus("w", "a", 1), 2);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(wb), Phase::kPending);
  ASSERT_EQ(adm_->phase(w), Phase::kPending);
  adm_->Finish(h100, 10);
  adm_->Cycle(11, 1000);
  adm_->Cycle(12, 1000);
  EXPECT_EQ(adm_->phase(w), Phase::kAdmitted) << adm_->reason(w);
  EXPECT_EQ(adm_->phase(wb), Phase::kPending) << adm_->reason(wb);
}

// A queue's room to reclaim is judged per flavour: a is past its a100 guarantee (6 of 4) but
// within its h100 one (0 of 2); once b borrows h100 (7 of 6), a's parked 2-GPU H100 work
// reclaims one of b's (a review: its room, summed over flavours, read 6 - 6 = 0, and it was
// never woken).
TEST_F(AdmissionTest, AReclaimIsWokenByItsFlavoursRoom) {
  Fleet fleet = Nodes(2, 4);
  for (int i = 0; i < 2; ++i) {
    Node m = GpuNode("m" + std::to_string(i), 4);
    for (Device& d : m.devices) d.model = "A100";
    fleet.nodes.push_back(m);
  }
  AdmissionConfig config = PerModelFlavours();
  config.consolidation = false;
  QueueSpec qa = Plain("a"), qb = Plain("b"), qc = Plain("c");
  qa.quotas["h100"] = QuotaSpec{2000, {}, {}};
  qa.quotas["a100"] = QuotaSpec{4000, {}, {}};
  qb.quotas["h100"] = QuotaSpec{6000, {}, {}};
  qb.quotas["a100"] = QuotaSpec{0, {}, {}};
  qc.quotas["a100"] = QuotaSpec{4000, {}, {}};
  qc.quotas["h100"] = QuotaSpec{0, {}, {}};
  Make(fleet, {qa, qb, qc}, {}, config);
  ASSERT_TRUE(adm_->Restore(Gpus("a1", "a", 4), OnGpus(2, {0, 1, 2, 3}), 0).ok());
  ASSERT_TRUE(adm_->Restore(Gpus("a2", "a", 2), OnGpus(3, {0, 1}), 0).ok());
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(
        adm_->Restore(Gpus("b" + std::to_string(i), "b", 1), OnGpus(i / 3, {i % 3}), 0).ok());
  Workload mine = Gpus("w", "a", 2);
  mine.pod_sets[0].device.models = {"H100"};
  const int w = Submit(mine, 1);
  EXPECT_TRUE(adm_->Cycle(2, 1000).evicted.empty()) << adm_->reason(w);
  // (Restored: submitted, b6 would be held back for a's waiting work.)
  ASSERT_TRUE(adm_->Restore(Gpus("b6", "b", 1), OnGpus(1, {3}), 3).ok());
  size_t evicted = 0;
  for (double t = 4; t < 8; t += 1) evicted += adm_->Cycle(t, 1000).evicted.size();
  EXPECT_EQ(evicted, 1u) << adm_->reason(w);
}

// Two trees (departments, each a root with a project below it) on 8 GPUs: dept-a is guaranteed
// 4, dept-b 2; 2 GPUs are nobody's. With `across`, the trees lend each other through the fleet.
AdmissionConfig TwoTrees(bool across, std::optional<double> a_borrowing = std::nullopt,
                         std::optional<double> b_lending = std::nullopt) {
  QueueSpec dept_a = Leaf("dept-a", 4, a_borrowing), dept_b = Leaf("dept-b", 2, {}, b_lending);
  dept_a.parent = dept_b.parent = "";
  QueueSpec a = Leaf("a", 4), b = Leaf("b", 2);
  a.parent = "dept-a";
  b.parent = "dept-b";
  AdmissionConfig config;
  config.queues = {dept_a, a, dept_b, b};
  config.lend_across_trees = across;
  return config;
}

// A tree already past its guarantee (a guarantee lowered under running work, as a user-style
// trial did with fabctl patch) says what it holds, or "would hold 16/8" reads as a riddle.
// Within its guarantee but past what its queues' lending limits leave it to lend (a limit set
// after a borrowed), it says what is kept, not that it is past its guarantee (a trial read
// "past its guarantee" of a queue at 21 of 24).
TEST_F(AdmissionTest, ATreePastItsGuaranteeSaysWhatItHolds) {
  for (bool kept : {false, true}) {
    SCOPED_TRACE(kept ? "past what it lends" : "past its guarantee");
    AdmissionConfig config;
    QueueSpec org{"org", "", 1, {}, -1};
    org.quotas["gpu"] = QuotaSpec{kept ? 16'000 : 8'000, {}, {}};
    config.queues = {org, Leaf("a", 8),
                     kept ? Leaf("b", 8, std::nullopt, /*lending=*/2) : Leaf("b", 0)};
    MakeTree(Nodes(4, 4), config, {"a", "b"});
    SubmitOptions o;
    o.preemptible = false;
    for (int n = 0; n < 3; ++n)
      ASSERT_TRUE(
          adm_->Restore(Gpus("a" + std::to_string(n), "a", 4), OnGpus(n, {0, 1, 2, 3}), 0, o).ok());
    // (Preemptible: it may borrow.)
    const int w = kept ? Submit(Gpus("more", "a", 1), 1) : Submit(Gpus("b", "b", 4), 1);
    adm_->Cycle(1.5, 1000);
    ASSERT_EQ(adm_->phase(w), Phase::kPending) << adm_->reason(w);
    const std::string says =
        kept ? "(b keeps 6 GPUs of its guarantee: its lending limit) (it holds 12 GPUs already, "
               "of its guarantee of 16: what is kept is not lent)"
             : "queue org has no unused gpu to lend to the queues below it: it would hold 16/8 "
               "GPUs (it holds 12 GPUs already: past its guarantee, it lends nothing more)";
    EXPECT_NE(adm_->reason(w).find(says), std::string::npos) << adm_->reason(w);
    if (kept)
      EXPECT_EQ(adm_->reason(w).find("past its guarantee, it lends"), std::string::npos)
          << adm_->reason(w);
  }
}

// A queue below its guarantee, beside a sibling that borrows, takes back nothing for work that
// would pass its guarantee, and says so (a trial read "queue org has no unused gpu" beside a
// queue at 0 of its 8 as reclaim switched off); for work within it, it reclaims.
TEST_F(AdmissionTest, WorkPastItsQueuesGuaranteeSaysWhyNothingIsTakenBack) {
  AdmissionConfig config;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16'000, {}, {}};
  config.queues = {org, Leaf("a", 8), Leaf("b", 8)};
  MakeTree(Nodes(4, 4), config, {"a", "b"});
  for (int n = 0; n < 4; ++n)
    ASSERT_TRUE(
        adm_->Restore(Gpus("b" + std::to_string(n), "b", 4), OnGpus(n, {0, 1, 2, 3}), 0).ok());
  const int big = Submit(Gpus("big", "a", 4, 0, 3), 1);  // 12 GPUs: past a's 8
  adm_->Cycle(1.5, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kPending) << adm_->reason(big);
  EXPECT_NE(adm_->reason(big).find("queue a would hold 12/8 GPUs, past its guarantee, so nothing "
                                   "is taken back for it (reclaim makes room only for work that "
                                   "fits within its queue's guarantee)"),
            std::string::npos)
      << adm_->reason(big);
  // Within it, the same queue reclaims what b borrows, and the note is not given.
  const int fits = Submit(Gpus("fits", "a", 4, 0, 2), 2);  // 8 GPUs
  CycleResult r = adm_->Cycle(2.5, 1000);
  EXPECT_EQ(r.evicted.size(), 2u) << adm_->reason(fits);
  EXPECT_EQ(adm_->reason(fits).find("past its guarantee"), std::string::npos) << adm_->reason(fits);
}

TEST_F(AdmissionTest, TreesLendEachOtherOnlyWhenAsked) {
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across);
    MakeTree(Nodes(2, 4), TwoTrees(across), {"a", "b"});
    std::vector<int> ids = SubmitEach("w", "a", 8, 0);
    adm_->Cycle(1, 1000);
    // Apart, a's tree holds its root's guarantee; lending, it takes the 2 GPUs nobody is
    // guaranteed and dept-b's 2 idle ones.
    EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), across ? 8 : 4) << adm_->reason(ids.back());
    if (!across)
      EXPECT_NE(adm_->reason(ids.back())
                    .find("queue dept-a has no unused gpu to lend to the queues below it: it "
                          "would hold 5/4 GPUs; queue trees do not lend each other "
                          "(lend-across-trees is off)"),
                std::string::npos)
          << adm_->reason(ids.back());
    // The fleet's node is nobody's queue: the queues keep their indices.
    EXPECT_EQ(adm_->QueueIndex("b"), 3);
  }
  // b comes back for its guarantee: two of a's borrowed GPUs are taken back.
  const int mine = Submit(Gpus("b0", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(mine);
  for (const Eviction& e : r.evicted) {
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "a");
    EXPECT_NE(e.reason.find("queue b reclaims its guarantee"), std::string::npos) << e.reason;
    adm_->Terminated(e.victim, 40);
  }
  adm_->Cycle(41, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
}

TEST_F(AdmissionTest, TreesLendWithinTheirRootsLimits) {
  // dept-a may borrow 1 GPU from the fleet.
  MakeTree(Nodes(2, 4), TwoTrees(true, /*a_borrowing=*/1), {"a", "b"});
  std::vector<int> ids = SubmitEach("w", "a", 8, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 5);
  EXPECT_NE(adm_->reason(ids.back()).find("queue dept-a over its borrowing limit for gpu: 6/5"),
            std::string::npos)
      << adm_->reason(ids.back());
  // dept-b lends none of its guarantee: a takes only what nobody is guaranteed.
  MakeTree(Nodes(2, 4), TwoTrees(true, std::nullopt, /*b_lending=*/0), {"a", "b"});
  ids = SubmitEach("w", "a", 8, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 6);
  EXPECT_NE(adm_->reason(ids.back())
                .find("the fleet has no unused gpu that its trees lend: they would hold 7/6 GPUs "
                      "(dept-b keeps 2 GPUs of its guarantee: its lending limit)"),
            std::string::npos)
      << adm_->reason(ids.back());
}

TEST_F(AdmissionTest, TreesBorrowOnlyGpusInService) {
  // dept-b lends none of its 2 GPUs; the 2 nobody is guaranteed are cordoned. Counted, they
  // would let a take dept-b's.
  MakeTree(Nodes(2, 4), TwoTrees(true, std::nullopt, /*b_lending=*/0), {"a", "b"});
  adm_->TakeOutOfService(0, {0, 1});
  adm_->Reserve(Assignment{.node = 0,
                           .devices = {{.device = 0, .milli = 1000}, {.device = 1, .milli = 1000}}},
                PodRequest{});
  std::vector<int> ids = SubmitEach("w", "a", 8, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 4);
  EXPECT_NE(adm_->reason(ids.back())
                .find("the fleet has no unused gpu that its trees lend: they would hold 5/4 GPUs "
                      "(dept-b keeps 2 GPUs of its guarantee: its lending limit)"),
            std::string::npos)
      << adm_->reason(ids.back());
  const int mine = Submit(Gpus("b0", "b", 2), 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
  // A node out of service with its work running: what runs there still counts, what is free
  // there does not.
  MakeTree(Nodes(2, 4), TwoTrees(true), {"a", "b"});
  ids = SubmitEach("x", "a", 6, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(ids, Phase::kAdmitted), 6);
  const double share = adm_->dominant_share(adm_->QueueIndex("a"));
  // (The 6 run on both nodes, one of them full: the other is taken out of service.)
  std::vector<int> on(2, 0);
  for (int id : ids) ++on[adm_->assignments(id)[0].node];
  const int node = on[0] == 4 ? 1 : 0;
  ASSERT_LT(on[node], 4);
  adm_->TakeOutOfService(node);
  adm_->TakeOutOfService(node, {0, 0});  // (counted once)
  EXPECT_NEAR(adm_->dominant_share(adm_->QueueIndex("a")), share * 8 / (8 - (4 - on[node])), 1e-9);
}

// b, short of quota in its tree (a borrows all of it), reclaims what a borrows; a's newest work,
// the cheapest victim, runs on a node that takes no new work (cordoned): it is not chosen, as
// the room it would free there is no room, and a's work on another node goes instead. (A
// trial: the preemptor chose that victim on the cordoned node every cycle, the eviction called
// off and made again, its stop time moving on for ever.)
TEST_F(AdmissionTest, AQuotaReclaimLeavesWorkOnNodesThatTakeNoNewWork) {
  QueueSpec org{.name = "org"};
  QueueSpec c = Leaf("c", 8);
  c.parent = "";
  AdmissionConfig config;
  config.queues = {org, Leaf("a", 16), Leaf("b", 16), c};
  Fleet fleet = Nodes(4, 8);
  fleet.nodes.push_back(GpuNode("m0", 4));
  fleet.nodes.push_back(GpuNode("m1", 4));
  MakeTree(fleet, config, {"a", "b", "c"});
  std::vector<int> a;
  for (int n = 0; n < 4; ++n) {
    Assignment on;
    on.node = n;
    for (int g = 0; g < 8; ++g) on.devices.push_back({g, 1000, 80 * 1024, -1});
    auto id = adm_->Restore(Gpus("a" + std::to_string(n), "a", 8), {on}, n);
    ASSERT_TRUE(id.ok()) << id.status().message();
    a.push_back(*id);
  }
  adm_->TakeOutOfService(3);
  adm_->ExcludeFromEviction(3);
  const int mine = Submit(Gpus("b0", "b", 8), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_NE(r.evicted[0].victim, a[3]) << adm_->reason(mine);
  EXPECT_EQ(r.evicted[0].victim, a[2]) << adm_->reason(mine);  // the newest of the others
  EXPECT_NE(adm_->plan(mine).at(0).node, 3);
}

// A lending limit holds above the lender's parent: what b keeps is kept from every queue that
// borrows through org, also when org borrows from above it (a user-style review: across trees,
// a took all 48 GPUs and b had to reclaim the 12 its lending limit keeps).
// A department's borrowing limit counts from what its queues lend: what a child keeps by its
// lending limit is not the department's to hand on (Kueue's cohort holds only what its queues
// lend). A review's department with borrowingLimit 0 let a take 8 where b kept 2 of its 4.
TEST_F(AdmissionTest, ADepartmentsBorrowingLimitLeavesWhatItsQueuesKeep) {
  QueueSpec org{.name = "org"};
  QueueSpec dept{.name = "dept", .parent = "org"};
  QuotaSpec none;
  none.guaranteed_milli = 8000;
  none.borrowing_limit_milli = 0;
  dept.quotas["gpu"] = none;
  QueueSpec a = Leaf("a", 4), b = Leaf("b", 4, std::nullopt, /*lending=*/2), c = Leaf("c", 8);
  a.parent = b.parent = "dept";
  AdmissionConfig config;
  config.queues = {org, dept, a, b, c};
  MakeTree(Nodes(2, 8), config, {"a", "b", "c"});
  std::vector<int> ids = SubmitEach("w", "a", 8, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 6) << adm_->reason(ids.back());
  EXPECT_NE(adm_->reason(ids.back())
                .find("queue dept over its borrowing limit for gpu: 7/6 GPUs (b keeps 2 GPUs of "
                      "its guarantee: its lending limit)"),
            std::string::npos)
      << adm_->reason(ids.back());
  // b's 2 kept are there for it without a reclaim.
  const std::vector<int> mine = SubmitEach("b", "b", 2, 2);
  CycleResult r = adm_->Cycle(3, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 2) << adm_->reason(mine.back());
  // More than it may ever hold is refused at once, naming what b keeps.
  MakeTree(Nodes(2, 8), config, {"a", "b", "c"});
  const int big = Submit(Gpus("a-seven", "a", 7));
  EXPECT_EQ(adm_->phase(big), Phase::kInfeasible);
  EXPECT_NE(adm_->reason(big).find("queue dept (guarantee 8, 2 of which queue b keeps by its "
                                   "lending limit; borrowing limit 0) may hold at most 6 for "
                                   "queue a"),
            std::string::npos)
      << adm_->reason(big);
}

TEST_F(AdmissionTest, ALendingLimitHoldsAboveTheLendersParent) {
  QueueSpec org{.name = "org"};
  QueueSpec c = Leaf("c", 16);
  c.parent = "";
  AdmissionConfig config;
  config.queues = {org, Leaf("a", 16), Leaf("b", 16, std::nullopt, /*lending=*/4), c};
  config.lend_across_trees = true;
  MakeTree(Nodes(6, 8), config, {"a", "b", "c"});
  std::vector<int> ids = SubmitEach("w", "a", 6, 0, 8);
  adm_->Cycle(1, 1000);
  // 16 of its own, b's 4, c's 16.
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 4) << adm_->reason(ids.back());
  EXPECT_NE(adm_->reason(ids.back())
                .find("the fleet has no unused gpu that its trees lend: they would hold 40/36 GPUs "
                      "(b keeps 12 GPUs of its guarantee: its lending limit)"),
            std::string::npos)
      << adm_->reason(ids.back());
  // b's 12 are there for it without a reclaim.
  const std::vector<int> mine = SubmitEach("b", "b", 3, 2, 4);
  CycleResult r = adm_->Cycle(3, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 3) << adm_->reason(mine.back());
  // From the other side: c, in another tree, borrows org's unused GPUs but not the 12 b keeps
  // (org itself has no lending limit: b's is kept through it).
  MakeTree(Nodes(6, 8), config, {"a", "b", "c"});
  ids = SubmitEach("c", "c", 6, 0, 8);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 4) << adm_->reason(ids.back());
  EXPECT_NE(adm_->reason(ids.back()).find("(b keeps 12 GPUs of its guarantee: its lending limit)"),
            std::string::npos)
      << adm_->reason(ids.back());

  // Within one tree, three levels deep: top (d1: a 10, b 10 lending none; d2 20) on 40 GPUs.
  QueueSpec top{.name = "top"}, d1{.name = "d1", .parent = "top"};
  QueueSpec a = Leaf("a", 10), b = Leaf("b", 10, std::nullopt, /*lending=*/0), d2 = Leaf("d2", 20);
  a.parent = b.parent = "d1";
  d2.parent = "top";
  config = AdmissionConfig{};
  config.queues = {top, d1, a, b, d2};
  MakeTree(Nodes(5, 8), config, {"a", "b", "d2"});
  ids = SubmitEach("x", "a", 40, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 30) << adm_->reason(ids.back());
  // ... and d2, a cousin, borrows d1's unused 10 but not b's.
  MakeTree(Nodes(5, 8), config, {"a", "b", "d2"});
  ids = SubmitEach("y", "d2", 40, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 30) << adm_->reason(ids.back());
}

TEST_F(AdmissionTest, AcrossTreesOnlyTheFleetBoundsAWorkload) {
  // 6 GPUs in one workload: past dept-a's guarantee, so it can never start while the trees keep
  // apart; lending, it can.
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across);
    MakeTree(Nodes(2, 4), TwoTrees(across), {"a", "b"});
    const int id = Submit(Gpus("big", "a", 2, 0, 3, true));
    adm_->Cycle(1, 1000);
    EXPECT_EQ(adm_->phase(id), across ? Phase::kAdmitted : Phase::kInfeasible) << adm_->reason(id);
    if (!across)
      EXPECT_NE(adm_->reason(id).find(
                    "of gpu, queue dept-a (its guarantee, the top of the tree) may hold at most 4"),
                std::string::npos)
          << adm_->reason(id);
  }
}

TEST_F(AdmissionTest, CpuQuotasStayWithinTheirTree) {
  AdmissionConfig config = TwoTrees(true);
  config.queues[0].quotas[kCpuQuota] = QuotaSpec{4000, {}, {}};  // dept-a: 4 cores
  config.queues[2].quotas[kCpuQuota] = QuotaSpec{4000, {}, {}};  // dept-b: 4 cores, idle
  MakeTree(Nodes(2, 4), config, {"a", "b"});
  // 1 core each: a's tree borrows GPUs from the fleet but not dept-b's cores.
  std::vector<int> ids = SubmitEach("w", "a", 6, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 4);
  EXPECT_NE(adm_->reason(ids.back())
                .find("queue dept-a has no unused cpu to lend to the queues below it: it would "
                      "hold 5/4 cores; CPU and memory are not lent across trees"),
            std::string::npos)
      << adm_->reason(ids.back());
}

// Messages and a queue's status give GPUs in decimals, as a spec's quotas store a fraction.
TEST(GpuAmountTest, IsDecimal) {
  EXPECT_EQ(GpuAmount(48000), "48");
  EXPECT_EQ(GpuAmount(66500), "66.5");
  EXPECT_EQ(GpuAmount(142), "0.142");
  EXPECT_EQ(GpuAmount(1050), "1.05");
  EXPECT_EQ(GpuAmount(0), "0");
  EXPECT_EQ(GpuAmount(-1500), "-1.5");
}

TEST_F(AdmissionTest, MinimumRuntimeDelaysEviction) {
  Make(Nodes(1, 4), {Leaf("a", 4)});
  SubmitOptions protect;
  protect.min_runtime_s = 100;
  std::vector<int> low;
  for (int i = 0; i < 4; ++i)
    low.push_back(Submit(Gpus("low" + std::to_string(i), "a", 1), 0, protect));
  adm_->Cycle(1, 1000);
  int high = Submit(Gpus("high", "a", 1, 10), 10);
  CycleResult early = adm_->Cycle(11, 1000);
  EXPECT_TRUE(early.evicted.empty());
  EXPECT_NE(adm_->reason(high).find("minimum runtime"), std::string::npos) << adm_->reason(high);
  // ... and says when (90 s from now, in whole minutes).
  EXPECT_NE(adm_->reason(high).find("(the first may go in about 2 min)"), std::string::npos)
      << adm_->reason(high);
  // The victim it needs may go when its minimum runtime ends (admitted at 1, 100 s).
  EXPECT_DOUBLE_EQ(adm_->victims_ready_at(high), 101);
  EXPECT_DOUBLE_EQ(adm_->victims_min_runtime(high), 100);
  CycleResult still = adm_->Cycle(50, 1000);
  EXPECT_TRUE(still.evicted.empty());
  // 51 s left: under a minute, said so (not "about 1 min").
  EXPECT_NE(adm_->reason(high).find("(the first may go in less than a minute)"), std::string::npos)
      << adm_->reason(high);
  CycleResult later = adm_->Cycle(101, 1000);  // admitted at 1: 100 s of runtime by now
  EXPECT_EQ(later.evicted.size(), 1u);
  {  // One victim, in hours and minutes: 4,990 s is about 1 h 24 min.
    Make(Nodes(1, 1), {Leaf("a", 1)});
    SubmitOptions long_run;
    long_run.min_runtime_s = 5000;
    Submit(Gpus("low", "a", 1), 0, long_run);
    adm_->Cycle(0, 1000);
    const int urgent = Submit(Gpus("urgent", "a", 1, 10), 10);
    adm_->Cycle(10, 1000);
    EXPECT_NE(
        adm_->reason(urgent).find("1 possible victim (a/low) is within its minimum runtime (it may "
                                  "go in about 1 h 24 min)"),
        std::string::npos)
        << adm_->reason(urgent);
  }
}

// A preemption held by a spent budget says whose eviction holds it, and one held by minimum
// runtimes names the victims it waits for and when the first may go, beside the budget too
// (a trial could tell neither, and lost the time where both held).
TEST_F(AdmissionTest, AWaitNamesTheEvictionsAndMinimumRuntimesThatHoldIt) {
  Make(Nodes(1, 4), {Leaf("a", 4, 0, std::nullopt, /*budget=*/1)});
  SubmitOptions protect;
  protect.min_runtime_s = 1200;
  const int m = Submit(Gpus("m", "a", 1), 0, protect);
  const std::vector<int> low = SubmitEach("l", "a", 3, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(m), Phase::kAdmitted);
  ASSERT_EQ(CountPhase(low, Phase::kAdmitted), 3);
  const int h = Submit(Gpus("h", "a", 1, /*priority=*/10), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(h);
  const std::string stopping = adm_->FullName(r.evicted[0].victim);
  const int h2 = Submit(Gpus("h2", "a", 1, /*priority=*/10), 12);
  adm_->Cycle(13, 1000);
  const std::string why = adm_->reason(h2);
  EXPECT_NE(why.find("waiting: the disruption budget of queue a allows no more evictions or "
                     "moves while " +
                     stopping + " stops"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("1 possible victim (a/m) is within its minimum runtime (it may go in about "
                     "20 min)"),
            std::string::npos)
      << why;
}

// A user's minimum runtime shields borrowed GPUs from the queue that lent them only as long as
// the administrator allows: reclaimMinRuntimeSeconds of the victim's queue (else its nearest
// ancestor's, else the config's reclaim_min_runtime_s). Queue a borrows b's two GPUs with work
// that asks for two hours; the config allows one hour, so b takes them back after an hour; with
// a's own cap (or its parent's) at two hours, after two: the nearest cap holds, stricter or
// not, and the reclaiming queue's own cap does not count. Against its own queue's work the
// workload's minimum runtime holds in full.
TEST_F(AdmissionTest, ReclaimMinRuntimeCapsWhatAMinimumRuntimeShieldsFromOtherQueues) {
  SubmitOptions two_hours;
  two_hours.min_runtime_s = 7200;
  struct Case {
    const char* name;
    double config_cap;
    double a_cap, org_cap, b_cap;  // -1: unset
    double ready;                  // when b's reclaim may evict
  };
  for (const Case& c :
       {Case{"config's hour", 3600, -1, -1, -1, 3601},
        Case{"a's own two hours", 3600, 7200, -1, -1, 7201},
        Case{"its parent's two hours", 3600, -1, 7200, -1, 7201},
        Case{"a's own beats its parent's", 3600, 600, 7200, -1, 601},
        Case{"a's own beats its parent's stricter one", 3600, 7200, 600, -1, 7201},
        Case{"the reclaiming queue's cap is not the victim's", 3600, -1, -1, 60, 3601}}) {
    SCOPED_TRACE(c.name);
    AdmissionConfig config;
    config.reclaim_min_runtime_s = c.config_cap;
    QueueSpec a = Leaf("a", 2), b = Leaf("b", 2);
    a.reclaim_min_runtime_s = c.a_cap;
    b.reclaim_min_runtime_s = c.b_cap;
    config.queues = {QueueSpec{"org", "", 1, {}, -1}, a, b};
    config.queues[0].reclaim_min_runtime_s = c.org_cap;
    MakeTree(Nodes(1, 4), config, {"a", "b"});
    for (int i = 0; i < 4; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1), 0, two_hours);
    adm_->Cycle(1, 1000);
    const int mine = Submit(Gpus("b0", "b", 1), 10);
    EXPECT_TRUE(adm_->Cycle(10, 1000).evicted.empty());
    EXPECT_NE(adm_->reason(mine).find("4 possible victims (a/a0, a/a1, a/a2 and 1 more) are within "
                                      "their minimum runtime (the "
                                      "first may go in about "),
              std::string::npos)
        << adm_->reason(mine);
    EXPECT_DOUBLE_EQ(adm_->victims_ready_at(mine), c.ready);
    EXPECT_DOUBLE_EQ(adm_->victims_min_runtime(mine), c.ready - 1);
    EXPECT_TRUE(adm_->Cycle(c.ready - 1, 1000).evicted.empty());
    const CycleResult r = adm_->Cycle(c.ready, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
    // The victim hears that its two hours were cut short (unless its own cap is two hours).
    const std::string note =
        "; its minimum runtime of 7200 s counts for " +
        std::to_string(static_cast<int>(c.ready - 1)) +
        " s against another queue's work (the reclaimMinRuntimeSeconds in force for its queue)";
    EXPECT_EQ(r.evicted[0].reason.find(note) != std::string::npos, c.ready < 7201)
        << r.evicted[0].reason;
  }
  {  // Its own queue's higher-priority work waits out the full two hours.
    AdmissionConfig config;
    config.reclaim_min_runtime_s = 3600;
    Make(Nodes(1, 4), {Leaf("a", 4)}, {}, config);
    for (int i = 0; i < 4; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1), 0, two_hours);
    adm_->Cycle(1, 1000);
    const int high = Submit(Gpus("high", "a", 1, 10), 10);
    EXPECT_TRUE(adm_->Cycle(3601, 1000).evicted.empty()) << adm_->reason(high);
    EXPECT_NE(adm_->reason(high).find("4 possible victims (a/a0, a/a1, a/a2 and 1 more) are within "
                                      "their minimum runtime (the "
                                      "first may go in about 1 h)"),
              std::string::npos)
        << adm_->reason(high);
    EXPECT_DOUBLE_EQ(adm_->victims_ready_at(high), 7201);
    EXPECT_EQ(adm_->Cycle(7201, 1000).evicted.size(), 1u) << adm_->reason(high);
  }
}

// A queue's preemptMinRuntimeSeconds (else its nearest ancestor's) is a floor every workload of
// it runs before its own queue's work may preempt it, whatever it asks itself (KAI's
// preempt-min-runtime: a trial's queue could set only the reclaim cap); a minimum runtime of its
// own that is longer still holds. Another queue's reclaim does not wait for it.
TEST_F(AdmissionTest, PreemptMinRuntimeIsAFloorAgainstItsOwnQueue) {
  struct Case {
    const char* name;
    bool on_parent;
    double own;    // each workload's minRuntimeSeconds
    double ready;  // when high may preempt
  };
  for (const Case& c :
       {Case{"set on the queue", false, 0, 601}, Case{"set on its parent", true, 0, 601},
        Case{"a longer one of its own holds", false, 900, 901}}) {
    SCOPED_TRACE(c.name);
    AdmissionConfig config;
    config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 4), Leaf("b", 0)};
    (c.on_parent ? config.queues[0] : config.queues[1]).preempt_min_runtime_s = 600;
    MakeTree(Nodes(1, 4), config, {"a", "b"});
    SubmitOptions own;
    own.min_runtime_s = c.own;
    for (int i = 0; i < 4; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1), 0, own);
    adm_->Cycle(1, 1000);
    const int high = Submit(Gpus("high", "a", 1, 10), 10);
    EXPECT_TRUE(adm_->Cycle(c.ready - 1, 1000).evicted.empty()) << adm_->reason(high);
    EXPECT_NE(adm_->reason(high).find("4 possible victims (a/a0, a/a1, a/a2 and 1 more) are within "
                                      "their minimum runtime"),
              std::string::npos)
        << adm_->reason(high);
    // (Which sets it, where the floor does: a re-trial's victim asked for none.)
    EXPECT_EQ(adm_->reason(high).find(", by its queue's preemptMinRuntimeSeconds of 600 s)") !=
                  std::string::npos,
              c.own < 600)
        << adm_->reason(high);
    EXPECT_DOUBLE_EQ(adm_->victims_ready_at(high), c.ready);
    EXPECT_EQ(adm_->Cycle(c.ready, 1000).evicted.size(), 1u) << adm_->reason(high);
  }
  {  // Another queue's reclaim does not wait for it.
    AdmissionConfig config;
    config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 0), Leaf("b", 4)};
    config.queues[1].preempt_min_runtime_s = 600;
    MakeTree(Nodes(1, 4), config, {"a", "b"});
    for (int i = 0; i < 4; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1), 0);
    adm_->Cycle(1, 1000);
    const int mine = Submit(Gpus("b0", "b", 1), 10);
    EXPECT_EQ(adm_->Cycle(10, 1000).evicted.size(), 1u) << adm_->reason(mine);
  }
}

// Reclaim evicts the workload that loses the least work: one that checkpoints every 100 s and
// has run 310 s loses 10 s, less than one without checkpoints that started 60 s before. Work
// counts from the start of the run, which may come after the admission (the server:
// status.startTime).
TEST_F(AdmissionTest, VictimThatJustCheckpointedLosesLeast) {
  for (const bool checkpoints : {false, true}) {
    SCOPED_TRACE(checkpoints ? "checkpoints every 100 s" : "no checkpoints");
    Make(Nodes(1, 3), {Leaf("a", 1), Leaf("b", 2)});
    auto on = [](int gpu) {
      Assignment a;
      a.node = 0;
      a.devices.push_back({gpu, 1000, 80 * 1024, -1});
      return std::vector<Assignment>{a};
    };
    SubmitOptions every_100;
    every_100.checkpoint_interval_s = checkpoints ? 100 : 0;
    auto old_one = adm_->Restore(Gpus("b-old", "b", 1), on(0), 0, every_100);
    auto new_one = adm_->Restore(Gpus("b-new", "b", 1), on(1), 250);
    SubmitOptions late = every_100;
    late.started_at = 95;  // bound at 0, running from 95
    auto late_one = adm_->Restore(Gpus("b-late", "b", 1), on(2), 0, late);
    ASSERT_TRUE(old_one.ok() && new_one.ok() && late_one.ok());
    EXPECT_DOUBLE_EQ(adm_->LostIfEvicted(*old_one, 310), checkpoints ? 10 : 310);
    EXPECT_DOUBLE_EQ(adm_->LostIfEvicted(*late_one, 310), checkpoints ? 15 : 215);
    EXPECT_DOUBLE_EQ(adm_->LostIfEvicted(*late_one, 50), 0);  // not started yet
    const int mine = Submit(Gpus("a0", "a", 1), 300);
    CycleResult r = adm_->Cycle(310, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
    EXPECT_EQ(r.evicted[0].victim, checkpoints ? *old_one : *new_one);
    EXPECT_NE(adm_->reason(mine).find(checkpoints ? "10 GPU-seconds lost" : "60 GPU-seconds lost"),
              std::string::npos)
        << adm_->reason(mine);
  }
}

// queueingStrategy: with BestEffortFIFO a small workload behind a head that cannot start yet
// takes the free GPU; with StrictFIFO it waits behind the head, which starts first once room
// frees up.
TEST_F(AdmissionTest, StrictFifoHeadBlocksTheRestOfItsQueue) {
  for (const bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "StrictFIFO" : "BestEffortFIFO");
    QueueSpec a = Leaf("a", 4);
    a.strict_fifo = strict;
    Make(Nodes(1, 4), {a, Leaf("b", 0)});
    SubmitOptions keep;
    keep.preemptible = false;
    auto run = adm_->Restore(Gpus("b-run", "b", 2), OnGpus(0, {0, 1}), 0, keep);
    auto stay = adm_->Restore(Gpus("b-stay", "b", 1), OnGpus(0, {2}), 0, keep);
    ASSERT_TRUE(run.ok() && stay.ok());
    const int head = Submit(Gpus("a-head", "a", 2), 1);
    const int small = Submit(Gpus("a-small", "a", 1), 2);
    for (double t : {3.0, 4.0}) adm_->Cycle(t, 1000);
    EXPECT_EQ(adm_->phase(head), Phase::kPending);
    EXPECT_EQ(adm_->phase(small), strict ? Phase::kPending : Phase::kAdmitted)
        << adm_->reason(small);
    if (!strict) continue;
    EXPECT_EQ(adm_->reason(small), "queued behind a-head (queue a is StrictFIFO)");
    // Room for both: the head goes first, then the one behind it.
    adm_->Finish(*run, 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_EQ(r.admitted, (std::vector<int>{head, small}));
  }
}

// Reservations (reserveAfter): a 4-GPU workload waits behind a stream of 1-GPU ones that take
// each GPU as it frees (BestEffortFIFO lets what fits go first). Without a reservation it
// never starts; with one, once it has waited reserveAfter, the node closest to free is held for
// it as its work ends, the small work goes to the other node, and it starts when its node has
// emptied. Admitted, it holds nothing more.
// ... also for a gang that needs one leaf: its reservation is in one leaf (a trial's gang of
// two 4-GPU pods waited for good behind its queue's 1-GPU work, reserveAfter or not).
TEST_F(AdmissionTest, AGangThatNeedsOneLeafReservesRoomInOneLeaf) {
  for (const double reserve_after : {0.0, 10.0}) {
    SCOPED_TRACE(reserve_after);
    AdmissionConfig config;
    config.reserve_after_s = reserve_after;
    Fleet fleet = Nodes(4, 4);
    for (int n = 0; n < 4; ++n) fleet.nodes[n].leaf = n < 2 ? "leaf-1" : "leaf-2";
    Make(fleet, {Leaf("a", 32)}, {}, config);  // (quota never the limit)
    SubmitOptions o;
    o.preemptible = false;  // (no preemption: only what frees counts)
    std::deque<int> running;
    for (int i = 0; i < 16; ++i) {
      auto id = adm_->Restore(Gpus("s" + std::to_string(i), "a", 1), OnGpus(i / 4, {i % 4}), 0, o);
      ASSERT_TRUE(id.ok());
      running.push_back(*id);
    }
    Workload gang = Gpus("gang", "a", 4, 0, 2, /*gang=*/true);
    gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
    const int big = Submit(gang, 1, o);
    std::string reserved_reason;
    const double started = StreamSmallWork(running, big, 80, o, &reserved_reason);
    if (reserve_after == 0) {
      EXPECT_EQ(started, -1) << "without a reservation the small work takes every freed GPU";
      continue;
    }
    ASSERT_GT(started, 0) << adm_->reason(big);
    // (In the leaf where most was free when it reserved, and it started when that leaf's work
    // had ended, the freed GPUs held for it meanwhile.)
    EXPECT_EQ(reserved_reason.rfind("reserving room on n3, n2 in leaf leaf-2 (its gang needs one "
                                    "leaf) (it has waited past reserveAfter 10 s)",
                                    0),
              0u)
        << reserved_reason;
    EXPECT_LE(started, 30);
    ASSERT_EQ(adm_->assignments(big).size(), 2u);
    for (const Assignment& a : adm_->assignments(big)) EXPECT_GE(a.node, 2);
  }
}

TEST_F(AdmissionTest, AReservationKeepsFreedRoomForWorkThatWaitedLong) {
  for (const double reserve_after : {0.0, 10.0}) {
    SCOPED_TRACE(reserve_after);
    AdmissionConfig config;
    config.reserve_after_s = reserve_after;
    Make(Nodes(2, 4), {Leaf("a", 16)}, {}, config);  // (quota never the limit)
    SubmitOptions o;
    o.preemptible = false;  // (no preemption: only what frees counts)
    std::deque<int> running;
    for (int n = 0; n < 2; ++n)
      for (int d = 0; d < 4; ++d) {
        auto id =
            adm_->Restore(Gpus("s" + std::to_string(n * 4 + d), "a", 1), OnGpus(n, {d}), 0, o);
        ASSERT_TRUE(id.ok());
        running.push_back(*id);
      }
    const int big = Submit(Gpus("big", "a", 4), 1, o);
    // One small workload ends (the oldest) and another arrives, each second.
    std::string reserved_reason;
    const double started = StreamSmallWork(running, big, 60, o, &reserved_reason);
    if (reserve_after == 0) {
      EXPECT_EQ(started, -1) << "without a reservation the small work takes every freed GPU";
      EXPECT_EQ(reserved_reason, "");
      continue;
    }
    ASSERT_GT(started, 0) << adm_->reason(big);
    // It reserved once it had waited 10 s (at 11 or 12), on the node whose work is oldest
    // (n0's: it ends first), and started when the 4 GPUs there had freed.
    EXPECT_LE(started, 20);
    EXPECT_EQ(reserved_reason.rfind("reserving room on n0 (it has waited past reserveAfter 10 s): "
                                    "what frees there is held for it until it fits",
                                    0),
              0u)
        << reserved_reason;
    EXPECT_GE(started, 11);
    EXPECT_EQ(adm_->assignments(big).size(), 1u);
    EXPECT_EQ(adm_->assignments(big)[0].node, 0);
    // Nothing stays held: every GPU that frees from now on goes to waiting small work at once
    // (a backlog waited while the node was held), so the fleet stays full, and once big ends
    // its node takes small work again.
    for (int t = static_cast<int>(started) + 1; t <= static_cast<int>(started) + 12; ++t) {
      const bool big_ends = t == static_cast<int>(started) + 4;
      if (big_ends) adm_->Finish(big, t);
      adm_->Finish(running.front(), t);
      running.pop_front();
      Submit(Gpus("after-" + std::to_string(t), "a", 1), t, o);
      CycleResult r = adm_->Cycle(t + 0.5, 1000);
      for (int id : r.admitted) running.push_back(id);
      const size_t busy = running.size() + (adm_->phase(big) == Phase::kAdmitted ? 4 : 0);
      EXPECT_EQ(busy, 8u) << "at " << t << " GPUs idle while work waits";
    }
  }
}

// Slurm's backfill: work with a time limit starts in a reservation's held room when it ends
// before the reservation could start (by the time limits of what runs on its devices); work
// that might run past then, or has no limit, waits. Where something on the reserved devices
// has no limit, the reservation could start never, and nothing gets in.
TEST_F(AdmissionTest, AReservationLetsInWorkThatEndsBeforeItCouldStart) {
  for (const bool all_limited : {true, false}) {
    SCOPED_TRACE(all_limited);
    SubmitOptions o;
    o.preemptible = false;
    std::vector<int> running;
    // (From 0: each ends by 100; or the last has no limit.)
    const int big = BigReservesBehind({100, 100, 100, all_limited ? 100 : 0}, &running);
    ASSERT_EQ(running.size(), 4u);
    // Work with a limit that found no room at all is parked: held room, no news to parked
    // work, does not wake it, but a reservation's wake for backfill does.
    Workload early = Gpus("early", "a", 1);
    early.max_runtime_seconds = 30;
    const int early_id = Submit(early, 12, o);
    adm_->Cycle(12.5, 1000);
    EXPECT_EQ(adm_->phase(early_id), Phase::kPending);
    adm_->Finish(running[0], 13);  // their GPUs are held for big from the next cycle
    adm_->Finish(running[1], 13);
    Workload slow = Gpus("slow", "a", 1);
    slow.max_runtime_seconds = 200;  // might run to 213
    const int slow_id = Submit(slow, 13, o);
    const int open_id = Submit(Gpus("open", "a", 1), 13, o);  // no limit
    adm_->Cycle(13.5, 1000);
    EXPECT_EQ(adm_->phase(slow_id), Phase::kPending);
    EXPECT_EQ(adm_->phase(open_id), Phase::kPending);
    EXPECT_EQ(adm_->phase(early_id), all_limited ? Phase::kAdmitted : Phase::kPending)
        << adm_->reason(early_id);
    // (One more of slow's shape first: quick, of the same shape, is tried after it failed.)
    slow.name = WorkloadId("slow-2");
    const int slow2_id = Submit(slow, 14, o);
    Workload quick = Gpus("quick", "a", 1);
    quick.max_runtime_seconds = 30;  // ends by 44
    const int quick_id = Submit(quick, 14, o);
    quick.name = WorkloadId("quick-2");  // (the same shape: tried once its first has failed)
    const int quick2_id = Submit(quick, 14, o);
    adm_->Cycle(14.5, 1000);
    EXPECT_EQ(adm_->phase(slow2_id), Phase::kPending);
    EXPECT_EQ(adm_->phase(slow_id), Phase::kPending);
    EXPECT_EQ(adm_->phase(open_id), Phase::kPending);
    EXPECT_EQ(adm_->phase(big), Phase::kPending);
    if (!all_limited) {
      EXPECT_EQ(adm_->phase(quick_id), Phase::kPending) << "s3 may run forever: big may never "
                                                           "start, so nothing is sure to end "
                                                           "before it";
      EXPECT_EQ(adm_->phase(quick2_id), Phase::kPending);
      EXPECT_EQ(adm_->workloads_backfilled(), 0);
      continue;
    }
    ASSERT_EQ(adm_->phase(quick_id), Phase::kAdmitted) << adm_->reason(quick_id);
    EXPECT_EQ(adm_->phase(quick2_id), Phase::kPending) << "the held room is taken";
    EXPECT_EQ(adm_->assignments(quick_id)[0].node, 0);
    EXPECT_EQ(adm_->workloads_backfilled(), 2);
    // The reservation stands: early's and quick's GPUs are held for big again once they end,
    // and big starts when the rest end, at 100, as it would have without them.
    adm_->Finish(early_id, 43);
    adm_->Finish(quick_id, 44);
    adm_->Cycle(44.5, 1000);
    EXPECT_EQ(adm_->phase(slow_id), Phase::kPending);
    EXPECT_EQ(adm_->phase(open_id), Phase::kPending);
    // (quick-2, woken for backfill, found the room again: it ends by 74.5.)
    if (adm_->phase(quick2_id) == Phase::kAdmitted) adm_->Finish(quick2_id, 74);
    for (int k = 2; k < 4; ++k) adm_->Finish(running[k], 100);
    adm_->Cycle(100.5, 1000);
    EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  }
}

// Work that finds no room because free GPUs are held for a reservation is told so (how many, on
// how many nodes, for how many workloads), and no more once the reservation has started.
TEST_F(AdmissionTest, WorkKeptOutOfHeldRoomIsToldSo) {
  SubmitOptions o;
  o.preemptible = false;
  std::vector<int> running;
  const int big = BigReservesBehind({0, 0, 0, 0}, &running);
  ASSERT_EQ(running.size(), 4u);
  const int first = Submit(Gpus("first", "a", 1), 12, o);
  adm_->Cycle(12.5, 1000);
  ASSERT_EQ(adm_->phase(first), Phase::kPending);
  EXPECT_EQ(adm_->reason(first).find("held for"), std::string::npos)
      << "nothing free is held yet: " << adm_->reason(first);
  adm_->Finish(running[0], 13);
  adm_->Finish(running[1], 13);
  adm_->Cycle(13.5, 1000);
  const int open = Submit(Gpus("open", "a", 1), 14, o);
  // (Of open's shape: tried after it failed, it takes open's reason, and the note is its own.)
  const int open2 = Submit(Gpus("open-2", "a", 1), 14, o);
  adm_->Cycle(14.5, 1000);
  ASSERT_EQ(adm_->phase(open2), Phase::kPending);
  EXPECT_NE(adm_->reason(open2).find("2 GPU(s) free on 1 node(s) are held for 1 workload(s)"),
            std::string::npos)
      << adm_->reason(open2);
  // (first, parked before any room was held, is not tried again for it: its reason stays.)
  ASSERT_EQ(adm_->phase(open), Phase::kPending);
  EXPECT_NE(adm_->reason(open).find(
                "2 GPU(s) free on 1 node(s) are held for 1 workload(s) that wait ahead of it"),
            std::string::npos)
      << adm_->reason(open);
  // More freed on the reserved node: parked, open is told of the room held now.
  adm_->Finish(running[2], 16);
  adm_->Cycle(16.5, 1000);
  ASSERT_EQ(adm_->phase(open), Phase::kPending);
  EXPECT_NE(adm_->reason(open).find(
                "3 GPU(s) free on 1 node(s) are held for 1 workload(s) that wait ahead of it"),
            std::string::npos)
      << adm_->reason(open);
  adm_->Finish(running[3], 20);
  adm_->Cycle(20.5, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  const int late = Submit(Gpus("late", "a", 1), 21, o);
  adm_->Cycle(21.5, 1000);
  for (int id : {first, open, open2, late}) {
    ASSERT_EQ(adm_->phase(id), Phase::kPending);
    EXPECT_EQ(adm_->reason(id).find("held for"), std::string::npos) << adm_->reason(id);
  }
}

// A planned device held by something the admitter knows no end of (the server's hold for work
// it could not restore, another's hold) frees never, as far as it knows: no work is let into
// that reservation's room by its limits.
TEST_F(AdmissionTest, NoBackfillWhereAPlannedDeviceHasAnUnknownUser) {
  for (const bool unknown : {false, true}) {
    SCOPED_TRACE(unknown);
    SubmitOptions o;
    o.preemptible = false;
    std::vector<int> running;
    BigReservesBehind({100, 100, 100, unknown ? -1 : 100}, &running);
    ASSERT_GE(running.size(), 3u);
    adm_->Finish(running[0], 13);
    adm_->Cycle(13.5, 1000);
    Workload quick = Gpus("quick", "a", 1);
    quick.max_runtime_seconds = 30;
    const int quick_id = Submit(quick, 14, o);
    adm_->Cycle(14.5, 1000);
    EXPECT_EQ(adm_->phase(quick_id), unknown ? Phase::kPending : Phase::kAdmitted)
        << adm_->reason(quick_id);
  }
}

// A workload holding a reservation waits for its room: it moves no other work to gather room
// elsewhere (a user-style review saw one move 7 workloads off a second node seconds before its
// own node freed, and the room it held then went to work without a limit).
TEST_F(AdmissionTest, AReservationMovesNoWorkToStartElsewhere) {
  AdmissionConfig config;
  config.reserve_after_s = 10;
  Make(Nodes(2, 4), {Leaf("a", 16)}, {}, config);
  SubmitOptions fixed;
  fixed.preemptible = false;
  std::vector<int> on_n0, on_n1;
  for (int d = 0; d < 4; ++d) {
    Workload w = Gpus("s" + std::to_string(d), "a", 1);
    w.max_runtime_seconds = 100;
    auto id = adm_->Restore(w, OnGpus(0, {d}), 0, fixed);
    ASSERT_TRUE(id.ok());
    on_n0.push_back(*id);
  }
  for (int d = 0; d < 3; ++d) {  // movable, with no limit: n1 frees never by the limits
    auto id = adm_->Restore(Gpus("m" + std::to_string(d), "a", 1), OnGpus(1, {d}), 0, {});
    ASSERT_TRUE(id.ok());
    on_n1.push_back(*id);
  }
  const int big = Submit(Gpus("big", "a", 4), 1, fixed);
  adm_->Cycle(1.5, 1000);
  adm_->Cycle(12, 1000);
  ASSERT_EQ(adm_->reason(big).rfind("reserving room on n0", 0), 0u) << adm_->reason(big);
  for (int k = 0; k < 3; ++k) adm_->Finish(on_n0[k], 13);
  adm_->Cycle(13.5, 1000);
  adm_->Cycle(14.5, 1000);
  for (int id : on_n1) EXPECT_EQ(adm_->phase(id), Phase::kAdmitted) << adm_->reason(big);
  EXPECT_EQ(adm_->reason(big).rfind("reserving room on n0", 0), 0u) << adm_->reason(big);
  adm_->Finish(on_n0[3], 100);
  adm_->Cycle(100.5, 1000);
  ASSERT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  EXPECT_EQ(adm_->assignments(big)[0].node, 0);
}

// Parked work woken to backfill is looked at round the queue from where the last cycle's look
// ended: the first few, failing each cycle, do not keep the rest from being tried.
TEST_F(AdmissionTest, BackfillWakesParkedWorkInTurn) {
  SubmitOptions o;
  o.preemptible = false;
  std::vector<int> running;
  BigReservesBehind({100, 100, 100, 100}, &running, /*guarantee=*/64);
  ASSERT_EQ(running.size(), 4u);
  // 20 workloads of two GPUs, then one of one, all with limits that end before big could
  // start; none finds room, and all are parked.
  std::vector<int> wide;
  for (int k = 0; k < 20; ++k) {
    Workload w = Gpus("wide-" + std::to_string(k), "a", 2);
    w.max_runtime_seconds = 30;
    wide.push_back(Submit(w, 12, o));
  }
  Workload narrow = Gpus("narrow", "a", 1);
  narrow.max_runtime_seconds = 30;
  const int narrow_id = Submit(narrow, 12, o);
  adm_->Cycle(12.5, 1000);
  ASSERT_EQ(adm_->phase(narrow_id), Phase::kPending);
  adm_->Finish(running[0], 13);  // one GPU, held for big: room for narrow alone
  for (double t = 13.5; t < 16; t += 1) adm_->Cycle(t, 1000);
  EXPECT_EQ(adm_->phase(narrow_id), Phase::kAdmitted) << adm_->reason(narrow_id);
  for (int id : wide) EXPECT_EQ(adm_->phase(id), Phase::kPending);
}

// With time limits a reservation plans on the nodes free soonest by them, which need not be
// those with the most GPUs free now; without, on those (the first of equals).
TEST_F(AdmissionTest, AReservationPlansWhereTheLimitsSayRoomFreesFirst) {
  for (const bool limited : {true, false}) {
    SCOPED_TRACE(limited);
    AdmissionConfig config;
    config.reserve_after_s = 10;
    Make(Nodes(3, 4), {Leaf("a", 16)}, {}, config);
    SubmitOptions o;
    o.preemptible = false;
    // n0: one GPU free, the rest held until 1000; n1 and n2 full until 50 and 80.
    const std::vector<std::pair<int, int>> ends = {{0, 1000}, {1, 50}, {2, 80}};
    for (const auto& [n, end] : ends)
      for (int d = n == 0 ? 1 : 0; d < 4; ++d) {
        Workload w = Gpus("s" + std::to_string(n) + std::to_string(d), "a", 1);
        w.max_runtime_seconds = limited ? end : 0;
        ASSERT_TRUE(adm_->Restore(w, OnGpus(n, {d}), 0, o).ok());
      }
    const int big = Submit(Gpus("big", "a", 4), 1, o);
    Workload filler = Gpus("filler", "a", 1);  // (takes n0's free GPU: big fits nowhere)
    Submit(filler, 1, o);
    adm_->Cycle(1.5, 1000);
    adm_->Cycle(12, 1000);
    EXPECT_EQ(adm_->reason(big).rfind(limited ? "reserving room on n1" : "reserving room on n0", 0),
              0u)
        << adm_->reason(big);
  }
}

// preemption.withinQueue: which of its own queue's workloads a pending one may evict. a-top
// (priority 5) waits on a full 4-GPU node held by a-low (priority 0, older) and a-peer
// (priority 5, arrived after a-top). Needing 2 GPUs, it may take a-low unless the policy is
// Never. Needing 4: LowerPriority may take a-low only, which is not enough;
// LowerOrNewerEqualPriority takes both.
TEST_F(AdmissionTest, WithinQueuePolicyDecidesWhichOwnWorkMayGo) {
  using Within = PreemptionPolicy::Within;
  struct Case {
    Within policy;
    int gpus;
    size_t evicted;
  };
  for (const Case& c :
       {Case{Within::kNever, 2, 0}, Case{Within::kLowerPriority, 2, 1},
        Case{Within::kLowerOrNewerEqualPriority, 2, 1}, Case{Within::kNever, 4, 0},
        Case{Within::kLowerPriority, 4, 0}, Case{Within::kLowerOrNewerEqualPriority, 4, 2}}) {
    SCOPED_TRACE(static_cast<int>(c.policy) * 10 + c.gpus);
    QueueSpec a = Leaf("a", 4);
    a.preemption.within_queue = c.policy;
    Make(Nodes(1, 4), {a});
    SubmitOptions older, newer;
    older.arrived_at = 0;
    newer.arrived_at = 3;  // admitted at 4 either way
    auto low = adm_->Restore(Gpus("a-low", "a", 2, 0), OnGpus(0, {0, 1}), 4, older);
    ASSERT_TRUE(low.ok());
    ASSERT_TRUE(adm_->Restore(Gpus("a-peer", "a", 2, 5), OnGpus(0, {2, 3}), 4, newer).ok());
    const int top = Submit(Gpus("a-top", "a", c.gpus, 5), 2);
    CycleResult r = adm_->Cycle(5, 1000);
    EXPECT_EQ(r.evicted.size(), c.evicted) << adm_->reason(top);
    if (c.evicted == 1) {
      EXPECT_EQ(r.evicted[0].victim, *low);
    }
    // Never: the wait names the policy.
    EXPECT_EQ(adm_->reason(top).find("queue a's preemption.withinQueue is Never: its "
                                     "lower-priority work is not preempted") != std::string::npos,
              c.policy == Within::kNever)
        << adm_->reason(top);
    // Taking the equal-priority peer says why.
    for (const Eviction& e : r.evicted)
      EXPECT_NE(e.reason.find(c.evicted == 2 ? "for earlier work of the same priority in queue a"
                                             : "for higher-priority work in queue a"),
                std::string::npos)
          << e.reason;
    EXPECT_EQ(adm_->phase(top), Phase::kPending);
  }
  // A peer that arrived before it is never taken, whatever its admission time.
  QueueSpec a = Leaf("a", 4);
  a.preemption.within_queue = Within::kLowerOrNewerEqualPriority;
  Make(Nodes(1, 4), {a});
  Assignment all;
  all.node = 0;
  for (int d = 0; d < 4; ++d) all.devices.push_back({d, 1000, 80 * 1024, -1});
  SubmitOptions first;
  first.arrived_at = 1;
  ASSERT_TRUE(adm_->Restore(Gpus("a-first", "a", 4, 5), {all}, 4, first).ok());
  Submit(Gpus("a-second", "a", 4, 5), 2);
  EXPECT_TRUE(adm_->Cycle(5, 1000).evicted.empty());
}

// Work leaving its queue for no preemptor (a drain, its maximum runtime) frees the queue's own
// room in a moment: the queue does not reclaim others' borrowed work for it meanwhile. a
// (guarantee 4) runs a-old, being evicted, and a-run; b borrows 2 of c's idle guarantee; a-new
// needs 2 more. When a-old's room is promised to a preemptor it counts as gone, so a-new is
// within a's guarantee and reclaims b's borrowed two; when a-old leaves for no one, a-new
// waits for its room.
TEST_F(AdmissionTest, RoomLeavingForNoOneIsNotReclaimedFromOthers) {
  for (const bool leaving : {false, true}) {
    SCOPED_TRACE(leaving ? "leaving for no one" : "evicted for a preemptor");
    Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 2), Leaf("c", 6)});
    SubmitOptions old;
    old.leaving = leaving;
    ASSERT_TRUE(adm_->Restore(Gpus("a-old", "a", 2), OnGpus(0, {0, 1}), 0, old, true).ok());
    ASSERT_TRUE(adm_->Restore(Gpus("a-run", "a", 2), OnGpus(0, {2, 3}), 0).ok());
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(adm_->Restore(Gpus("b" + std::to_string(i), "b", 1), OnGpus(1, {i}), 0).ok());
    const int mine = Submit(Gpus("a-new", "a", 2), 1);
    CycleResult r = adm_->Cycle(2, 1000);
    EXPECT_EQ(r.evicted.size(), leaving ? 0u : 2u) << adm_->reason(mine);
  }
}

// A reclaimWithinCohort setting, the preemptor's priority and the evictions expected.
struct ReclaimCase {
  PreemptionPolicy::Reclaim policy;
  int b_priority;
  size_t evicted;
};

// preemption.reclaimWithinCohort: b, within its guarantee, takes back the GPUs a borrows —
// from any priority (Any, the default), only from lower priority (LowerPriority), or never.
TEST_F(AdmissionTest, ReclaimWithinCohortPolicyNarrowsWhatIsTakenBack) {
  using Reclaim = PreemptionPolicy::Reclaim;
  using Case = ReclaimCase;
  for (const Case& c : {Case{Reclaim::kAny, 0, 2}, Case{Reclaim::kLowerPriority, 0, 0},
                        Case{Reclaim::kLowerPriority, 10, 2}, Case{Reclaim::kNever, 10, 0}}) {
    SCOPED_TRACE(static_cast<int>(c.policy) * 100 + c.b_priority);
    QueueSpec b = Leaf("b", 4);
    b.preemption.reclaim_within_cohort = c.policy;
    Make(Nodes(2, 4), {Leaf("a", 4), b});
    for (int i = 0; i < 8; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1, /*priority=*/5), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 8000);
    const int mine = Submit(Gpus("b0", "b", 2, c.b_priority), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_EQ(r.evicted.size(), c.evicted) << adm_->reason(mine);
    for (const Eviction& e : r.evicted)
      EXPECT_NE(e.reason.find("reclaims its guarantee"), std::string::npos) << e.reason;
    EXPECT_EQ(adm_->phase(mine), Phase::kPending);
    // Where the policy is what keeps a's work, the wait names it (a user-style review saw only
    // "no node can take it").
    const std::string note =
        c.evicted > 0 ? "preemption.reclaimWithinCohort"
        : c.policy == Reclaim::kNever
            ? "queue b's preemption.reclaimWithinCohort is Never: the 4 GPUs of gpu below its "
              "guarantee that queue a borrows are not taken back"
            : "queue b's preemption.reclaimWithinCohort is LowerPriority: the 4 GPUs of gpu below "
              "its guarantee that queue a borrows are not taken back (the work it borrows them "
              "with is not of lower priority)";
    EXPECT_EQ(adm_->reason(mine).find(note) != std::string::npos, c.evicted == 0)
        << adm_->reason(mine);
  }
}

// A queue may come to hold more than its quota allows without anyone reclaiming: b borrowed a's
// unused guarantee (5 jobs of 8 GPUs on 16 of its own), then a started two jobs within its
// guarantee on free nodes that no tree is guaranteed (c, the other tree, is guaranteed 8 of the
// 24 GPUs left), so b may hold only its 16 of the 40 it runs. Its
// own higher-priority work then swaps places with its lower-priority work GPU for GPU: b holds
// no more than before, so nobody is worse off, where evicting down to what the quota allows
// now (three jobs for one) would only leave GPUs idle. A node stays free throughout, so what
// holds other work back is the quota, not room. With a disruption budget of 1 and 4-GPU
// jobs the swap goes on batch by batch, still no further than it needs.
TEST_F(AdmissionTest, OwnQueuePreemptionPastAShrunkQuotaSwapsGpuForGpu) {
  for (const int size : {8, 4}) {
    SCOPED_TRACE(size);
    const int per_node = 8 / size;
    AdmissionConfig config;
    QueueSpec c = Leaf("c", 8);
    c.parent = "";
    config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 24),
                     Leaf("b", 16, std::nullopt, std::nullopt, size == 4 ? 1 : -1), c};
    MakeTree(Nodes(8, 8), config, {"a", "b", "c"});
    std::vector<int> fill;
    for (int i = 0; i < 5 * per_node; ++i)
      fill.push_back(Submit(Gpus("fill" + std::to_string(i), "b", size), 0));
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(fill, Phase::kAdmitted), 5 * per_node) << adm_->reason(fill.back());
    const int a0 = Submit(Gpus("a0", "a", 8), 5), a1 = Submit(Gpus("a1", "a", 8), 5);
    CycleResult back = adm_->Cycle(6, 1000);
    ASSERT_EQ(CountPhase({a0, a1}, Phase::kAdmitted), 2) << adm_->reason(a1);
    EXPECT_TRUE(back.evicted.empty());
    const int org = adm_->QueueIndex("org"), b = adm_->QueueIndex("b");
    ASSERT_EQ(adm_->usage_milli(org), 56000);
    // Runs cycles until `w` starts, the victims stopping 20 s after each; returns the evictions.
    double t = 10;
    const auto swap_in = [&](int w) {
      size_t evicted = 0;
      for (int round = 0; round < 4 && adm_->phase(w) != Phase::kAdmitted; ++round, t += 30) {
        CycleResult r = adm_->Cycle(t, 1000);
        evicted += r.evicted.size();
        for (const Eviction& e : r.evicted) {
          EXPECT_EQ(adm_->queue_of(e.victim), b);
          adm_->Terminated(e.victim, t + 20);
        }
      }
      EXPECT_EQ(adm_->phase(w), Phase::kAdmitted) << adm_->reason(w);
      return evicted;
    };
    const int urgent = Submit(Gpus("urgent", "b", 8, /*priority=*/100), t);
    EXPECT_EQ(swap_in(urgent), static_cast<size_t>(per_node)) << adm_->reason(urgent);
    EXPECT_EQ(adm_->usage_milli(b), 40000);
    // A second one swaps in likewise; work of b's own priority that would add to what it holds
    // does not start.
    const int more = Submit(Gpus("more", "b", 8, /*priority=*/100), t);
    EXPECT_EQ(swap_in(more), static_cast<size_t>(per_node)) << adm_->reason(more);
    const int extra = Submit(Gpus("extra", "b", 8), t);
    EXPECT_TRUE(adm_->Cycle(t, 1000).evicted.empty());
    EXPECT_EQ(adm_->phase(extra), Phase::kPending);
    EXPECT_NE(adm_->reason(extra).find("to lend"), std::string::npos) << adm_->reason(extra);
    EXPECT_EQ(adm_->usage_milli(b), 40000);
  }
}

// Where trees do not lend each other, a queue coming back for the guarantee its sibling borrowed
// takes it back from the sibling, not from the other tree's idle GPUs: org (a and b, 4 each)
// and c (a tree of its own, 8) on 16 GPUs; b borrows a's 4, then a asks for its 4. Before, a's
// work started on c's idle GPUs, org held 12 of its 8 and c, coming back, had to reclaim them.
// Where the fleet has GPUs no tree is guaranteed (c guaranteed 4), a takes those at once.
TEST_F(AdmissionTest, AQueueWithinItsGuaranteeTakesNoneOfAnotherTreesGuarantee) {
  for (const double c_guaranteed : {8.0, 4.0}) {
    SCOPED_TRACE(c_guaranteed);
    AdmissionConfig config;
    QueueSpec c = Leaf("c", c_guaranteed);
    c.parent = "";
    config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 4), Leaf("b", 4), c};
    MakeTree(Nodes(4, 4), config, {"a", "b", "c"});
    const std::vector<int> borrowed = AdmitEach("b", "b", 8);
    ASSERT_FALSE(borrowed.empty());
    const std::vector<int> mine = SubmitEach("a", "a", 4, 10);
    CycleResult r = adm_->Cycle(11, 1000);
    const int org = adm_->QueueIndex("org");
    if (c_guaranteed == 4) {
      EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 4) << adm_->reason(mine[0]);
      EXPECT_TRUE(r.evicted.empty());
      EXPECT_EQ(adm_->usage_milli(org), 12000);
      continue;
    }
    ASSERT_EQ(r.evicted.size(), 4u) << adm_->reason(mine[0]);
    for (const Eviction& e : r.evicted) {
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "b");
      EXPECT_NE(e.reason.find("queue a reclaims its guarantee"), std::string::npos) << e.reason;
    }
    EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 0);
    // c's GPUs stay free for c: its work starts at once, evicting no one.
    const std::vector<int> theirs = SubmitEach("c", "c", 8, 12);
    CycleResult c_back = adm_->Cycle(13, 1000);
    EXPECT_EQ(CountPhase(theirs, Phase::kAdmitted), 8) << adm_->reason(theirs[0]);
    EXPECT_TRUE(c_back.evicted.empty());
    for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
    adm_->Cycle(41, 1000);
    EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 4) << adm_->reason(mine[0]);
    EXPECT_EQ(adm_->usage_milli(org), 8000);
  }
}

// In one tree too, a queue within its guarantee takes no queue above it past its limits: d1 may
// not borrow (borrowingLimit 0), its b borrows a's unused 4 within d1, then a asks for them. a
// takes them back from b; before, a started on d2's idle GPUs and d1 held 12 of its 8.
TEST_F(AdmissionTest, AQueueWithinItsGuaranteeTakesNoDepartmentPastItsBorrowingLimit) {
  AdmissionConfig config;
  QueueSpec d1 = Leaf("d1", 8, 0), d2 = Leaf("d2", 8), a = Leaf("a", 4), b = Leaf("b", 4);
  a.parent = b.parent = "d1";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, d1, d2, a, b};
  MakeTree(Nodes(4, 4), config, {"a", "b", "d2"});
  const std::vector<int> borrowed = AdmitEach("b", "b", 8);
  ASSERT_FALSE(borrowed.empty());
  const std::vector<int> mine = SubmitEach("a", "a", 4, 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 4u) << adm_->reason(mine[0]);
  for (const Eviction& e : r.evicted) EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "b");
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("d1")), 8000);
  for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
  adm_->Cycle(41, 1000);
  EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), 4) << adm_->reason(mine[0]);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("d1")), 8000);
}

// What a lender keeps (its lending limit) stays free for it when a queue within its own
// guarantee comes back for what a borrower took, in one tree or across trees that lend: that
// queue takes it back from the borrower. In one tree: a, b, c guaranteed 4 each, c lends none;
// b borrows a's 4, a asks for them. Across trees (--lend-across-trees, a user-style review's
// case): ta 8, tb 8 lending 4, tc 0; tc borrows 12, ta asks for its 8. Before, a (ta) started
// on the GPUs c (tb) kept, and c (tb) then had to reclaim them, waiting out a grace period.
TEST_F(AdmissionTest, AQueueWithinItsGuaranteeLeavesWhatALenderKeeps) {
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across);
    AdmissionConfig config;
    std::string mine_q = "a", borrower = "b", keeper = "c";
    if (!across) {
      config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 4), Leaf("b", 4),
                       Leaf("c", 4, std::nullopt, /*lending=*/0)};
      MakeTree(Nodes(3, 4), config, {"a", "b", "c"});
      ASSERT_FALSE(AdmitEach("b", "b", 8).empty());
    } else {
      mine_q = "ta", borrower = "tc", keeper = "tb";
      QueueSpec ta = Leaf("ta", 8), tb = Leaf("tb", 8, std::nullopt, /*lending=*/4),
                tc = Leaf("tc", 0);
      ta.parent = tb.parent = tc.parent = "";
      config.queues = {ta, tb, tc};
      config.lend_across_trees = true;
      MakeTree(Nodes(4, 4), config, {"ta", "tb", "tc"});
      ASSERT_FALSE(AdmitEach("c", "tc", 12).empty());
    }
    const std::vector<int> mine = SubmitEach(mine_q, mine_q, across ? 8 : 4, 10);
    CycleResult r = adm_->Cycle(11, 1000);
    ASSERT_EQ(r.evicted.size(), across ? 8u : 4u) << adm_->reason(mine[0]);
    for (const Eviction& e : r.evicted)
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), borrower);
    // What the keeper keeps is there for it at once.
    const std::vector<int> kept = SubmitEach(keeper, keeper, 4, 12);
    CycleResult back = adm_->Cycle(13, 1000);
    EXPECT_EQ(CountPhase(kept, Phase::kAdmitted), 4) << adm_->reason(kept[0]);
    EXPECT_TRUE(back.evicted.empty());
    for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
    adm_->Cycle(41, 1000);
    EXPECT_EQ(CountPhase(mine, Phase::kAdmitted), static_cast<int>(mine.size()))
        << adm_->reason(mine[0]);
  }
}

// The same where the queue with room is a department, not the leaf (a code review's case): x
// borrows d1's unused 4, then a in d1 asks for 4 (2 its own, 2 borrowed from b). d1 has room,
// but its room is lent out: a does not start on c's idle GPUs (it would borrow, so it reclaims
// nothing and waits); b, within its guarantee, takes back from x.
TEST_F(AdmissionTest, RoomADepartmentLentOutIsNotTakenFromAnotherTree) {
  AdmissionConfig config;
  QueueSpec d1 = Leaf("d1", 4), d2 = Leaf("d2", 4), a = Leaf("a", 2), b = Leaf("b", 2),
            x = Leaf("x", 4), c = Leaf("c", 8);
  a.parent = b.parent = "d1";
  x.parent = "d2";
  c.parent = "";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, d1, d2, a, b, x, c};
  MakeTree(Nodes(4, 4), config, {"a", "b", "x", "c"});
  const std::vector<int> borrowed = AdmitEach("x", "x", 8);
  ASSERT_FALSE(borrowed.empty());
  const int mine = Submit(Gpus("a0", "a", 4), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_EQ(adm_->phase(mine), Phase::kPending);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_NE(adm_->reason(mine).find("its tree (queue org) would hold 12/8 GPUs of gpu and other "
                                    "queue trees are guaranteed the rest"),
            std::string::npos)
      << adm_->reason(mine);
  const std::vector<int> theirs = SubmitEach("b", "b", 2, 12);
  r = adm_->Cycle(13, 1000);
  EXPECT_EQ(r.evicted.size(), 2u) << adm_->reason(theirs[0]);
  for (const Eviction& e : r.evicted) EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "x");
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("org")), 8000);
}

// Taking back its guarantee for higher-priority work, a queue takes what others borrow of it
// before its own lower-priority work (a code review's case): b runs 2 GPUs of its 4 at priority
// 0 while a borrows the other 2 at priority 5; b's urgent 2 take them back from a.
TEST_F(AdmissionTest, AReclaimForQuotaTakesBorrowedWorkBeforeItsOwn) {
  AdmissionConfig config;
  QueueSpec c = Leaf("c", 8);
  c.parent = "";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 4), Leaf("b", 4), c};
  MakeTree(Nodes(4, 4), config, {"a", "b", "c"});
  std::vector<int> borrowed;  // (of a higher priority than b's own work)
  for (int i = 0; i < 6; ++i) borrowed.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1, 5)));
  const std::vector<int> low = SubmitEach("low", "b", 2, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted) + CountPhase(low, Phase::kAdmitted), 8);
  std::vector<int> urgent;
  for (int i = 0; i < 2; ++i)
    urgent.push_back(Submit(Gpus("u" + std::to_string(i), "b", 1, 10), 10));
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(urgent[0]);
  for (const Eviction& e : r.evicted) EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "a");
  EXPECT_EQ(CountPhase(low, Phase::kAdmitted), 2);
}

// With several flavours the queue may be charged to, the reclaim is tried in the one where it is
// within its guarantee (a code review's case): flavours a100 then h100; a is guaranteed 2 H100s
// and no A100, b borrowed a's 2 H100s, the other tree c is guaranteed the other 2 H100s and the
// A100s. a's pod may run on either model: it takes back an H100 from b.
TEST_F(AdmissionTest, AQueueReclaimsInTheFlavourItIsGuaranteed) {
  AdmissionConfig config = PerModelFlavours();
  std::swap(config.flavors[0], config.flavors[1]);
  QueueSpec a = Plain("a"), b = Plain("b"), c = Plain("c");
  a.quotas["h100"] = QuotaSpec{2000, {}, {}};
  a.quotas["a100"] = QuotaSpec{0, {}, {}};
  b.quotas["h100"] = QuotaSpec{0, {}, {}};
  c.parent = "";
  c.quotas["h100"] = QuotaSpec{2000, {}, {}};
  c.quotas["a100"] = QuotaSpec{4000, {}, {}};
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, a, b, c};
  MakeTree(H100AndA100(), config, {"a", "b", "c"});
  std::vector<int> borrowed;
  for (int i = 0; i < 2; ++i) {
    Workload w = Gpus("b" + std::to_string(i), "b", 1);
    w.pod_sets[0].device.models = {"H100"};
    borrowed.push_back(Submit(w, 0));
  }
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 2) << adm_->reason(borrowed[0]);
  const int mine = Submit(Gpus("a0", "a", 1), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(adm_->queue_name(adm_->queue_of(r.evicted[0].victim)), "b");
}

// Work that would borrow while another queue's work within its guarantee waits for room says
// which queue that is (a user-style review read "its own queue's" as the borrower's).
TEST_F(AdmissionTest, ABorrowerHeldBackNamesTheQueueItWaitsFor) {
  Make(Nodes(1, 4), {Leaf("a", 2), Leaf("b", 2), Leaf("c", 0)});
  ASSERT_FALSE(AdmitEach("c", "c", 4).empty());
  const std::vector<int> mine = SubmitEach("a", "a", 2, 10);
  ASSERT_EQ(adm_->Cycle(11, 1000).evicted.size(), 2u) << adm_->reason(mine[0]);
  const int more = Submit(Gpus("c-more", "c", 1), 11.5);
  adm_->Cycle(12, 1000);
  EXPECT_EQ(adm_->phase(more), Phase::kPending);
  EXPECT_NE(adm_->reason(more).find("waiting: it would borrow, and work of queue a within its "
                                    "guarantee waits for room: what frees goes to that first"),
            std::string::npos)
      << adm_->reason(more);
}

// A borrower held back for another queue's work within its guarantee still takes the room of its
// own queue's lower-priority work, as a swap: its queue holds no more than before, so the
// waiting queue loses nothing (a user-style trial: critical work of a borrowing queue waited
// behind its own low-priority work for as long as work of a queue that never reclaims was
// tried each cycle, and held the room that freed).
TEST_F(AdmissionTest, AHeldBorrowerStillSwapsOutItsOwnQueuesLowerPriorityWork) {
  QueueSpec c = Leaf("c", 2);
  c.preemption.reclaim_within_cohort = PreemptionPolicy::Reclaim::kNever;
  Make(Nodes(2, 4), {Leaf("a", 4), Leaf("b", 2), c});
  std::vector<int> first;
  for (int i = 0; i < 6; ++i) first.push_back(Submit(Gpus("a-low" + std::to_string(i), "a", 1)));
  for (int i = 0; i < 2; ++i) first.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1)));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(first, Phase::kAdmitted), 8) << adm_->reason(first.back());
  // c's work, within its guarantee, finds no room and takes none back: room is held for it in
  // the cycle a's critical work comes.
  const int waits = Submit(Gpus("c0", "c", 1), 2);
  const int crit = Submit(Gpus("crit", "a", 1, /*priority=*/100), 2);
  const CycleResult r = adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(waits), Phase::kPending);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(crit);
  EXPECT_EQ(adm_->queue_of(r.evicted[0].victim), adm_->QueueIndex("a"));
  EXPECT_NE(adm_->reason(crit).find("for higher-priority work in queue a"), std::string::npos)
      << adm_->reason(crit);
  adm_->Terminated(r.evicted[0].victim, 20);
  adm_->Cycle(21, 1000);
  EXPECT_EQ(adm_->phase(crit), Phase::kAdmitted) << adm_->reason(crit);
  EXPECT_EQ(adm_->phase(waits), Phase::kPending);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 6000);
  // Work of its own priority swaps nothing out, and still waits for the held room.
  const int peer = Submit(Gpus("peer", "a", 1), 22);
  EXPECT_TRUE(adm_->Cycle(23, 1000).evicted.empty());
  EXPECT_EQ(adm_->phase(peer), Phase::kPending);
}

// A held swap is all its victims at once or none: its queue's disruption budget letting only
// some go now, the rest later, it would start once the first had stopped and its queue would
// hold more than before (a review: the free GPU the hold kept went to it); going on batch by
// batch instead, the victims that stopped first were re-admitted into room the hold did not
// keep and more were taken each time. It waits, and says why (a trial saw only the hold).
TEST_F(AdmissionTest, AHeldSwapThatTheDisruptionBudgetWouldSplitWaitsAndSaysSo) {
  QueueSpec c = Leaf("c", 4);
  c.preemption.reclaim_within_cohort = PreemptionPolicy::Reclaim::kNever;
  Make(Nodes(2, 4), {Leaf("a", 4, std::nullopt, std::nullopt, /*budget=*/1), Leaf("b", 2), c});
  std::vector<int> low;
  for (int i = 0; i < 7; ++i) low.push_back(Submit(Gpus("a-low" + std::to_string(i), "a", 1)));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(low, Phase::kAdmitted), 7);
  // c's 2-GPU pod finds no node with 2 free (one GPU is): room is held for it.
  const int waits = Submit(Gpus("c0", "c", 2), 2);
  const int crit = Submit(Gpus("crit", "a", 2, /*priority=*/100), 2);
  EXPECT_TRUE(adm_->Cycle(3, 1000).evicted.empty()) << adm_->reason(crit);
  EXPECT_EQ(adm_->phase(crit), Phase::kPending);
  EXPECT_EQ(adm_->phase(waits), Phase::kPending);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 7000);
  const std::string why = adm_->reason(crit);
  EXPECT_NE(why.find("waiting: it would borrow"), std::string::npos) << why;
  EXPECT_NE(why.find("its own queue's lower-priority work could make way as a swap, but not all "
                     "at once: queue a's disruptionBudget is 1"),
            std::string::npos)
      << why;
}

// Work its quota refuses whatever frees says so while another tree's work within its guarantee
// waits for room, not that it waits behind that work (a trial saw a full tree's work told, cycle
// after cycle, that another tree's gang was ahead of it).
TEST_F(AdmissionTest, WorkItsQuotaRefusesIsNotToldItWaitsBehindAHold) {
  Fleet fleet = Nodes(2, 4);
  fleet.nodes[0].labels["zone"] = "x";
  AdmissionConfig config;
  QueueSpec a = Leaf("a", 2), b = Leaf("b", 2), c = Leaf("c", 4);
  a.parent = b.parent = "r";
  c.parent = "";
  config.queues = {QueueSpec{"r", "", 1, {}, -1}, a, b, c};
  MakeTree(fleet, config, {"a", "b", "c"});
  const std::vector<int> first = {Submit(Gpus("a0", "a", 2), 0), Submit(Gpus("b0", "b", 2), 0)};
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(first, Phase::kAdmitted), 2) << adm_->reason(first[1]);
  ASSERT_EQ(adm_->assignments(first[0])[0].node, 0);
  ASSERT_EQ(adm_->assignments(first[1])[0].node, 0);
  // c's pod, within its guarantee, may only use the full node: room is held for it.
  Workload pinned = Gpus("c0", "c", 2);
  pinned.pod_sets[0].nodes.labels["zone"] = "x";
  const int held = Submit(pinned, 2);
  const int more = Submit(Gpus("a1", "a", 1), 3);
  adm_->Cycle(4, 1000);
  ASSERT_EQ(adm_->phase(held), Phase::kPending);
  EXPECT_EQ(adm_->phase(more), Phase::kPending);
  const std::string why = adm_->reason(more);
  EXPECT_EQ(why.find("waiting: it would borrow"), std::string::npos) << why;
  EXPECT_NE(why.find("queue r has no unused gpu to lend"), std::string::npos) << why;
}

// Work within its guarantee that finds no room holds back borrowing only where the borrower
// would go past its tree's guarantee: another tree's queue borrowing within its own tree takes
// nothing of the waiting tree's share (a user-style review saw one unplaceable gang keep a
// separate tree from its own guarantee, indefinitely).
TEST_F(AdmissionTest, WorkWaitingForRoomHoldsNoOtherTreeWithinItsOwnGuarantee) {
  AdmissionConfig config;
  config.consolidation = false;  // (the waiting pod finds no room by moving work either)
  QueueSpec lab = Leaf("lab", 4);
  lab.parent = "";
  QueueSpec x = Leaf("x", 1), y = Leaf("y", 3);
  x.parent = y.parent = "lab";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 4), lab, x, y};
  MakeTree(Nodes(2, 4), config, {"a", "x", "y"});
  ASSERT_TRUE(adm_->Restore(Gpus("x0", "x", 1), OnGpus(0, {0}), 0).ok());
  ASSERT_TRUE(adm_->Restore(Gpus("x1", "x", 1), OnGpus(1, {0}), 0).ok());
  // a's 4 GPUs on one node: 3 free on each, and nothing of a's tree to take back.
  const int waiting = Submit(Gpus("a0", "a", 4), 10);
  adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(waiting), Phase::kPending) << adm_->reason(waiting);
  const int more = Submit(Gpus("x2", "x", 1), 11.5);
  adm_->Cycle(12, 1000);
  EXPECT_EQ(adm_->phase(more), Phase::kAdmitted) << adm_->reason(more);
}

// ... but every tree whose work waits so holds its own borrowers back, not only the first
// tree's (a review: the second waiting tree's borrower took the room its own work waited for).
TEST_F(AdmissionTest, EveryTreeWithWorkWaitingForRoomHoldsItsOwnBorrowers) {
  AdmissionConfig config;
  config.consolidation = false;
  config.preemption = false;  // (they wait for room, reclaiming nothing)
  QueueSpec r1 = Leaf("r1", 4), r2 = Leaf("r2", 8);
  r1.parent = r2.parent = "";
  QueueSpec a = Leaf("a", 4), x = Leaf("x", 2), y = Leaf("y", 6);
  a.parent = "r1";
  x.parent = y.parent = "r2";
  config.queues = {r1, r2, a, x, y};
  MakeTree(Nodes(3, 4), config, {"a", "x", "y"});
  for (int n = 0; n < 3; ++n)
    ASSERT_TRUE(adm_->Restore(Gpus("x" + std::to_string(n), "x", 1), OnGpus(n, {0}), 0).ok());
  const int a0 = Submit(Gpus("a0", "a", 4), 10);
  const int y0 = Submit(Gpus("y0", "y", 4), 10);
  const int x3 = Submit(Gpus("x3", "x", 1), 10);
  adm_->Cycle(11, 1000);
  ASSERT_EQ(adm_->phase(a0), Phase::kPending) << adm_->reason(a0);
  ASSERT_EQ(adm_->phase(y0), Phase::kPending) << adm_->reason(y0);
  EXPECT_EQ(adm_->phase(x3), Phase::kPending) << adm_->reason(x3);
  EXPECT_NE(adm_->reason(x3).find("within its guarantee waits for room"), std::string::npos)
      << adm_->reason(x3);
}

// While the sibling's borrowed work may not go yet (its minimum runtime), the queue coming back
// waits, and says why: its tree is at its top's guarantee.
TEST_F(AdmissionTest, AQueueWaitingForItsSiblingsBorrowedGpusSaysWhy) {
  AdmissionConfig config;
  QueueSpec c = Leaf("c", 8);
  c.parent = "";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 4), Leaf("b", 4), c};
  MakeTree(Nodes(4, 4), config, {"a", "b", "c"});
  SubmitOptions young;
  young.min_runtime_s = 600;
  std::vector<int> borrowed;
  for (int i = 0; i < 8; ++i)
    borrowed.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 0, young));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 8);
  const int mine = Submit(Gpus("a0", "a", 1), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(mine), Phase::kPending);
  EXPECT_NE(adm_->reason(mine).find("queue a is within its guarantee of gpu, but its tree (queue "
                                    "org) would hold 9/8 GPUs"),
            std::string::npos)
      << adm_->reason(mine);
  EXPECT_NE(adm_->reason(mine).find("within their minimum runtime"), std::string::npos)
      << adm_->reason(mine);
}

// A swap's ceiling leaves out what its queue holds that is already on its way out for no one
// (a drain) or for another queue: b (past its quota at 40) has one job draining when its urgent
// 16-GPU gang comes (b's disruption budget of 2 lets one of its own go now, the next later).
// Once those stop and c's job ends, room for the gang is free, but b may hold only 32 with it
// (its 40 less the 8 leaving), not refill the drained job's room: a second job of b's makes way.
TEST_F(AdmissionTest, ASwapsCeilingLeavesOutWhatLeavesTheQueue) {
  AdmissionConfig config;
  QueueSpec c = Leaf("c", 16);
  c.parent = "";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 24),
                   Leaf("b", 16, std::nullopt, std::nullopt, /*budget=*/2), c};
  MakeTree(Nodes(8, 8), config, {"a", "b", "c"});
  const auto restore = [&](const Workload& w, int node, bool leaving) {
    SubmitOptions o;
    o.leaving = leaving;
    auto id = adm_->Restore(w, OnGpus(node, {0, 1, 2, 3, 4, 5, 6, 7}), 0, o, leaving);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : -1;
  };
  std::vector<int> fill;
  for (int i = 0; i < 5; ++i)
    fill.push_back(restore(Gpus("fill" + std::to_string(i), "b", 8), i, i == 4));
  restore(Gpus("a0", "a", 8), 5, false);
  restore(Gpus("a1", "a", 8), 6, false);
  const int c0 = restore(Gpus("c0", "c", 8), 7, false);
  const int b = adm_->QueueIndex("b");
  ASSERT_EQ(adm_->usage_milli(b), 40000);
  const int urgent = Submit(Gpus("urgent", "b", 8, /*priority=*/100, /*pods=*/2, true), 10);
  CycleResult r = adm_->Cycle(12, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(urgent);
  ASSERT_EQ(r.evicted[0].preemptor, urgent);
  adm_->Terminated(r.evicted[0].victim, 30);
  adm_->Terminated(fill[4], 30);
  adm_->Terminated(c0, 30);
  int evicted_for_urgent = 1;
  for (double t = 31; t < 200 && adm_->phase(urgent) != Phase::kAdmitted; t += 30) {
    r = adm_->Cycle(t, 1000);
    for (const Eviction& e : r.evicted) {
      evicted_for_urgent += e.preemptor == urgent;
      adm_->Terminated(e.victim, t + 20);
    }
  }
  ASSERT_EQ(adm_->phase(urgent), Phase::kAdmitted) << adm_->reason(urgent);
  EXPECT_EQ(evicted_for_urgent, 2);
  EXPECT_EQ(adm_->usage_milli(b), 32000);
}

// Rebuilt while its victim (of its own queue) stops, a preemptor past its queue's quota whose
// swap was not kept (its status write lost a race) swaps as before: once the victim stops it
// takes its place, evicting no second job.
TEST_F(AdmissionTest, ARestoredPreemptorWithoutItsSwapSwapsAgain) {
  AdmissionConfig config;
  QueueSpec c = Leaf("c", 16);
  c.parent = "";
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 24), Leaf("b", 16), c};
  MakeTree(Nodes(8, 8), config, {"a", "b", "c"});
  std::vector<int> fill;
  const auto restore = [&](const Workload& w, int node, bool evicting) {
    auto id = adm_->Restore(w, OnGpus(node, {0, 1, 2, 3, 4, 5, 6, 7}), 0, {}, evicting);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : -1;
  };
  for (int i = 0; i < 5; ++i)
    fill.push_back(restore(Gpus("fill" + std::to_string(i), "b", 8), i, i == 0));
  restore(Gpus("a0", "a", 8), 5, false);
  restore(Gpus("a1", "a", 8), 6, false);
  restore(Gpus("c0", "c", 8), 7, false);
  const int urgent = Submit(Gpus("urgent", "b", 8, /*priority=*/100), 10);
  adm_->RestoreNomination(urgent, 1, {}, {fill[0]});
  ASSERT_TRUE(adm_->swap(urgent).has_value());
  EXPECT_EQ(adm_->swap(urgent)->second, 40000);
  adm_->Terminated(fill[0], 20);
  CycleResult r = adm_->Cycle(21, 1000);
  EXPECT_TRUE(r.evicted.empty()) << adm_->reason(urgent);
  EXPECT_EQ(adm_->phase(urgent), Phase::kAdmitted) << adm_->reason(urgent);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("b")), 40000);
}

// preemption.borrowWithinCohort: b (guarantee 1) needs 2 GPUs, so it must borrow, and a
// borrows all that its cohort has left (8 GPUs on a guarantee of 3); by default b0 only waits.
// With LowerPriority it evicts two of a's borrowed workloads of lower priority — never work at
// or above its own priority, never above maxPriorityThreshold, and never so much that a drops
// below its guarantee (a guaranteed 7 lends only 1: for quota when c guarantees nothing, for
// room when c's idle guarantee leaves quota enough).
TEST_F(AdmissionTest, BorrowWithinCohortEvictsLowerPriorityBorrowedWork) {
  using Borrow = PreemptionPolicy::Borrow;
  struct Case {
    Borrow policy;
    int a_priority;
    std::optional<int> threshold;
    size_t evicted;
    double a_guarantee = 3, c_guarantee = 4;
  };
  for (const Case& c :
       {Case{Borrow::kNever, 0, {}, 0}, Case{Borrow::kLowerPriority, 0, {}, 2},
        Case{Borrow::kLowerPriority, 10, {}, 0}, Case{Borrow::kLowerPriority, 0, -1, 0},
        Case{Borrow::kLowerPriority, 0, 0, 2}, Case{Borrow::kLowerPriority, 0, {}, 0, 7, 0},
        Case{Borrow::kLowerPriority, 0, {}, 0, 7, 4}}) {
    SCOPED_TRACE(static_cast<int>(c.policy) * 100 + c.a_priority * 10 + c.threshold.value_or(9));
    SCOPED_TRACE(c.a_guarantee * 10 + c.c_guarantee);
    QueueSpec b = Leaf("b", 1);
    b.preemption.borrow_within_cohort = c.policy;
    b.preemption.borrow_max_priority = c.threshold;
    Make(Nodes(1, 8), {Leaf("a", c.a_guarantee), b, Leaf("c", c.c_guarantee)});
    std::vector<int> borrowed;
    for (int i = 0; i < 8; ++i)
      borrowed.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1, c.a_priority), 0));
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 8);
    const int mine = Submit(Gpus("b0", "b", 2, /*priority=*/5), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_EQ(r.evicted.size(), c.evicted) << adm_->reason(mine);
    for (const Eviction& e : r.evicted) {
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(e.victim)), "a");
      EXPECT_NE(e.reason.find("for higher-priority work borrowing in queue b"), std::string::npos)
          << e.reason;
    }
    if (c.evicted == 0) continue;
    // Once they stop, b0 runs on what a borrowed, and a is back to 6.
    for (const Eviction& e : r.evicted) adm_->Terminated(e.victim, 40);
    adm_->Cycle(41, 1000);
    EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 6000);
  }
}

// A workload bigger than its queue's whole guarantee only ever runs on borrowed GPUs, so
// borrowWithinCohort may take it, as a reclaim may, even though its queue is then below its
// guarantee (trial #9: b's one 6-GPU job on a guarantee of 2 kept a's urgent work waiting, where
// Kueue evicts it: b was borrowing). It does not come back for its GPUs: reclaim makes room only
// for work within a guarantee, and a's work is of higher priority.
TEST_F(AdmissionTest, BorrowWithinCohortMayTakeWorkBiggerThanItsQueuesGuarantee) {
  for (const int b_priority : {0, 10}) {
    SCOPED_TRACE(b_priority);
    QueueSpec a = Leaf("a", 2);
    a.preemption.borrow_within_cohort = PreemptionPolicy::Borrow::kLowerPriority;
    Make(Nodes(1, 8), {a, Leaf("b", 2), Leaf("c", 4)});
    Submit(Gpus("a-base", "a", 2, 10), 0);
    const int big = Submit(Gpus("b-big", "b", 6, b_priority), 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->phase(big), Phase::kAdmitted);
    const int mine = Submit(Gpus("a-urgent", "a", 2, 10), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    if (b_priority >= 10) {
      EXPECT_TRUE(r.evicted.empty()) << adm_->reason(mine);
      continue;
    }
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
    EXPECT_EQ(r.evicted[0].victim, big);
    adm_->Terminated(big, 40);
    adm_->Cycle(41, 1000);
    EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
    for (int t = 42; t < 45; ++t) EXPECT_TRUE(adm_->Cycle(t, 1000).evicted.empty());
    EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 4000);
  }
}

// Where borrowWithinCohort takes nothing from a queue that borrows with lower-priority work, the
// wait says why: that work is above the threshold, or taking any of it would leave its queue
// below its guarantee (trial #9's wait said nothing of the policy).
TEST_F(AdmissionTest, BorrowWithinCohortSaysWhyItTakesNothing) {
  struct Case {
    std::vector<double> b_jobs;
    std::optional<int> threshold;
    std::string says;
  };
  for (const Case& c :
       {Case{{3, 2},
             {},
             "queue b borrows 1 GPU of gpu, but taking any of its lower-priority work "
             "there would leave it below its guarantee of 4 GPUs (borrowing "
             "preemption takes only what a queue borrows)"},
        Case{{2, 2, 2},
             -1,
             "queue b borrows 2 GPUs of gpu, but its lower-priority work there is above "
             "maxPriorityThreshold -1"}}) {
    SCOPED_TRACE(c.b_jobs.size());
    QueueSpec a = Leaf("a", 2);
    a.preemption.borrow_within_cohort = PreemptionPolicy::Borrow::kLowerPriority;
    a.preemption.borrow_max_priority = c.threshold;
    Make(Nodes(1, 8), {a, Leaf("b", 4), Leaf("c", 2)});
    Submit(Gpus("a-base", "a", 2, 10), 0);
    for (size_t i = 0; i < c.b_jobs.size(); ++i)
      Submit(Gpus("b" + std::to_string(i), "b", c.b_jobs[i], 0), 0);
    adm_->Cycle(1, 1000);
    const int mine = Submit(Gpus("a-urgent", "a", 2, 10), 10);
    EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(mine);
    EXPECT_NE(adm_->reason(mine).find("; queue a's preemption.borrowWithinCohort is "
                                      "LowerPriority: " +
                                      c.says),
              std::string::npos)
        << adm_->reason(mine);
  }
}

// The note names lower-priority work only where it holds GPUs of the flavour: b borrows with
// work of a's priority, and its lower-priority work is CPU-only, so the policy is not why a
// waits, and nothing is said of it (a review: the note blamed the CPU-only job).
TEST_F(AdmissionTest, BorrowWithinCohortSaysNothingOfWorkWithoutTheGpus) {
  QueueSpec a = Leaf("a", 2);
  a.preemption.borrow_within_cohort = PreemptionPolicy::Borrow::kLowerPriority;
  Make(Nodes(1, 8), {a, Leaf("b", 4), Leaf("c", 2)});
  Submit(Gpus("a-base", "a", 2, 10), 0);
  for (int i = 0; i < 3; ++i) Submit(Gpus("b" + std::to_string(i), "b", 2, 10), 0);
  Submit(Gpus("b-cpu", "b", 0, 0), 0);
  adm_->Cycle(1, 1000);
  const int mine = Submit(Gpus("a-urgent", "a", 2, 10), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(mine);
  EXPECT_EQ(adm_->reason(mine).find("borrowWithinCohort"), std::string::npos) << adm_->reason(mine);
}

// Borrowing within its cohort evicts others' work only where that gives the quota back: a is
// at its own borrowing limit (4 + 2), so only its own lower-priority work can make room for
// a-new, however cheap b's borrowed work is.
TEST_F(AdmissionTest, BorrowWithinCohortEvictsOnlyWhatFreesTheQuota) {
  QueueSpec a = Leaf("a", 4, /*borrowing=*/2);
  a.preemption.borrow_within_cohort = PreemptionPolicy::Borrow::kLowerPriority;
  Make(Nodes(1, 12), {a, Leaf("b", 4), Leaf("c", 4)});
  for (int i = 0; i < 4; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1, 5), 0);
  const int own = Submit(Gpus("a-low", "a", 2, 1), 0);
  for (int i = 0; i < 6; ++i) Submit(Gpus("b" + std::to_string(i), "b", 1, 0), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 6000);
  ASSERT_EQ(adm_->usage_milli(adm_->QueueIndex("b")), 6000);
  const int mine = Submit(Gpus("a-new", "a", 2, 10), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(r.evicted[0].victim, own);
}

// Fair-share preemption takes from a queue whose share stays above the preemptor's, within
// the preemptor's reclaimWithinCohort: not at all under Never, only lower priority under
// LowerPriority.
TEST_F(AdmissionTest, FairSharePreemptionFollowsTheReclaimPolicy) {
  using Reclaim = PreemptionPolicy::Reclaim;
  using Case = ReclaimCase;
  for (const Case& c : {Case{Reclaim::kAny, 0, 1}, Case{Reclaim::kNever, 5, 0},
                        Case{Reclaim::kLowerPriority, 0, 0}, Case{Reclaim::kLowerPriority, 5, 1}}) {
    SCOPED_TRACE(static_cast<int>(c.policy) * 10 + c.b_priority);
    AdmissionConfig config;
    config.fair_share_preemption = true;
    QueueSpec b = Plain("b");
    b.preemption.reclaim_within_cohort = c.policy;
    Make(Nodes(2, 4), {Plain("a"), b}, {}, config);
    for (int i = 0; i < 8; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1), 0);
    adm_->Cycle(1, 1000);
    const int mine = Submit(Gpus("b0", "b", 1, c.b_priority), 10);
    CycleResult r = adm_->Cycle(11, 1000);
    EXPECT_EQ(r.evicted.size(), c.evicted) << adm_->reason(mine);
  }
}

// Queues `leaves` under org, guaranteed the fleet's 8 GPUs (its children less: the rest is
// theirs to borrow).
AdmissionConfig UnderOrgOf8(std::vector<QueueSpec> leaves, AdmissionConfig config = {}) {
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{8000, {}, {}};
  config.queues = {org};
  config.queues.insert(config.queues.end(), leaves.begin(), leaves.end());
  return config;
}

// Over-quota priority (KAI's queue priority): each queue gets its guarantee first; past it,
// prod (priority 100) is offered idle GPUs before research (0), whatever their shares. At equal
// priorities the weights split the rest (4 / 4).
TEST_F(AdmissionTest, OverQuotaPriorityOffersIdleRoomToTheHigherPriorityQueueFirst) {
  for (const int priority : {100, 0}) {
    SCOPED_TRACE(priority);
    QueueSpec prod = Leaf("prod", 2), research = Leaf("research", 2);
    prod.priority = priority;
    MakeTree(Nodes(1, 8), UnderOrgOf8({prod, research}), {"prod", "research"});
    const std::vector<int> r = SubmitEach("r", "research", 8, 0);
    const std::vector<int> p = SubmitEach("p", "prod", 8, 0);
    adm_->Cycle(1, 1000);
    EXPECT_EQ(CountPhase(p, Phase::kAdmitted), priority > 0 ? 6 : 4);
    EXPECT_EQ(CountPhase(r, Phase::kAdmitted), priority > 0 ? 2 : 4);
    if (priority > 0)
      for (int id : r)
        if (adm_->phase(id) == Phase::kPending)
          EXPECT_NE(adm_->FairShareNote(id).find("then by over-quota priority, highest first"),
                    std::string::npos)
              << adm_->FairShareNote(id);
  }
}

// Whether a queue goes first among its siblings is judged by the workload it would admit: qb,
// guaranteed 2 of 8, holds nothing, but its 6-GPU job would borrow 4, so qa's work (over-quota
// priority 1, no guarantee) is offered the idle GPUs before it, as Kueue orders workloads that
// would borrow after those that would not. (Judged by qb's usage alone, the job started first
// and qa, of the higher priority, got 2.) A job of qb's within its guarantee still goes first.
TEST_F(AdmissionTest, AWorkloadThatWouldBorrowWaitsBehindAHigherPrioritySibling) {
  for (const int asks : {6, 2}) {
    SCOPED_TRACE(asks);
    QueueSpec qa = Leaf("qa", 0), qb = Leaf("qb", 2);
    qa.priority = 1;
    MakeTree(Nodes(1, 8), UnderOrgOf8({qa, qb}), {"qa", "qb"});
    const int job = Submit(Gpus("job", "qb", asks), 0);
    const std::vector<int> a = SubmitEach("a", "qa", 8, 0);
    adm_->Cycle(1, 1000);
    EXPECT_EQ(adm_->phase(job), asks > 2 ? Phase::kPending : Phase::kAdmitted) << adm_->reason(job);
    EXPECT_EQ(CountPhase(a, Phase::kAdmitted), asks > 2 ? 8 : 6);
  }
}

// Over-quota priority set on departments is told to the work of a department's only leaf:
// y1 waits while x1, under deptx (priority 1), holds the fleet; depty is the one with
// siblings.
TEST_F(AdmissionTest, TheWaitOfADepartmentsOnlyLeafNamesTheDepartmentsPriority) {
  QueueSpec deptx = Leaf("deptx", 0), depty = Leaf("depty", 0);
  deptx.priority = 1;
  QueueSpec x1 = Leaf("x1", 0), y1 = Leaf("y1", 0);
  x1.parent = "deptx";
  y1.parent = "depty";
  MakeTree(Nodes(1, 8), UnderOrgOf8({deptx, depty, x1, y1}), {"x1", "y1"});
  AdmitEach("x", "x1", 8);
  const int waits = Submit(Gpus("y", "y1", 1), 2);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(waits), Phase::kPending);
  const std::string note = adm_->FairShareNote(waits);
  EXPECT_NE(note.find("; as room frees, the work of depty's siblings goes first where it fits "
                      "within their queues' guarantees, then by over-quota priority, highest "
                      "first, then by weighted share"),
            std::string::npos)
      << adm_->reason(waits) << note;
}

// A project reclaims its guarantee only where its department's guarantee is lent out: b1's 4
// GPUs, all of department db's, are held by its sibling b2 (whose work may not be reclaimed
// for 10 minutes), so b1's job waits for b2's, and department da's 12 GPUs, none of db's,
// stay (taking them, db would hold 6 of its 4). Once b2's work may go, b1 takes it back.
TEST_F(AdmissionTest, AProjectReclaimsFromOutsideItsDepartmentOnlyWhatTheDepartmentLent) {
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16000, {}, {}};
  QueueSpec da = Leaf("da", 0), db = Leaf("db", 4), x = Leaf("x", 0), b1 = Leaf("b1", 4),
            b2 = Leaf("b2", 0);
  da.priority = 1;
  x.parent = "da";
  b1.parent = b2.parent = "db";
  b2.reclaim_min_runtime_s = 600;
  AdmissionConfig config;
  config.reclaim_min_runtime_s = 0;
  config.queues = {org, da, db, x, b1, b2};
  MakeTree(Nodes(2, 8), config, {"x", "b1", "b2"});
  const std::vector<int> xs = SubmitEach("x", "x", 12, 0);
  const std::vector<int> bs = SubmitEach("b", "b2", 4, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(xs, Phase::kAdmitted) + CountPhase(bs, Phase::kAdmitted), 16);
  const int job = Submit(Gpus("job", "b1", 2), 10);
  std::string evicted;
  for (double t = 11; t < 700; t += 30)
    for (const Eviction& ev : adm_->Cycle(t, 1000).evicted) {
      evicted += adm_->queue_name(adm_->queue_of(ev.victim)) + " ";
      adm_->Terminated(ev.victim, t);
    }
  EXPECT_EQ(evicted, "b2 b2 ") << adm_->reason(job);
  EXPECT_EQ(CountPhase(xs, Phase::kAdmitted), 12);
}

// Work admitted this cycle that a later reclaim of the cycle takes back before it starts goes
// newest first, as evictions do (on the node it is made on): qa's a7, not its oldest a0,
// which would wait behind all of qa's later work. (qb's 2-GPU job, within its guarantee, is tried
// after qa's work: the nine workloads ahead of it in qb would borrow.)
TEST_F(AdmissionTest, WorkTakenBackBeforeItStartsGoesNewestFirst) {
  QueueSpec qa = Leaf("qa", 0), qb = Leaf("qb", 4);
  qa.priority = 1;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16000, {}, {}};
  AdmissionConfig config;
  config.queues = {org, qa, qb};
  MakeTree(Nodes(1, 16), config, {"qa", "qb"});
  for (int i = 0; i < 9; ++i) Submit(Gpus("big" + std::to_string(i), "qb", 1, 0, 12), 0);
  const int small = Submit(Gpus("small", "qb", 2), 0);
  const std::vector<int> a = SubmitEach("a", "qa", 8, 0, 2);
  adm_->Cycle(1, 1000);
  EXPECT_NE(adm_->reason(small).find("taking back 1 workload(s) admitted this cycle before "
                                     "they started (qa/a7) as queue qb reclaims its guarantee"),
            std::string::npos)
      << adm_->reason(small);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(adm_->phase(a[i]), i < 7 ? Phase::kAdmitted : Phase::kPending) << i;
}

// A queue of weight 0 (KAI's overQuotaWeight 0) gets its guarantee, and past it only what its
// siblings leave: a wants 5 of the 8 and gets them; scratch gets the other 3 (with weight 1,
// 4 and 4).
TEST_F(AdmissionTest, AQueueOfWeightZeroTakesOnlyWhatItsSiblingsLeave) {
  for (const double weight : {0.0, 1.0}) {
    SCOPED_TRACE(weight);
    QueueSpec scratch = Leaf("scratch", 2);
    scratch.weight = weight;
    MakeTree(Nodes(1, 8), UnderOrgOf8({Leaf("a", 2), scratch}), {"a", "scratch"});
    const std::vector<int> s = SubmitEach("s", "scratch", 8, 0);
    const std::vector<int> a = SubmitEach("a", "a", 5, 0);
    adm_->Cycle(1, 1000);
    EXPECT_EQ(CountPhase(a, Phase::kAdmitted), weight > 0 ? 4 : 5);
    EXPECT_EQ(CountPhase(s, Phase::kAdmitted), weight > 0 ? 4 : 3);
  }
}

// Under fair-share preemption, over-quota priority goes before shares: prod (priority 100)
// takes research's borrowed GPUs down to research's guarantee, though its own share then
// passes research's (6 and 2 of 8; by shares alone it stops at 4). Research, of lower
// priority, takes back from prod only its guarantee, not the half its weight would give it.
TEST_F(AdmissionTest, FairSharePreemptionGoesByOverQuotaPriorityFirst) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  QueueSpec prod = Leaf("prod", 2), research = Leaf("research", 2);
  prod.priority = 100;
  std::string reasons;  // of every eviction
  // `holder` fills the fleet's 8 GPUs at 0; at 10 `comer` asks for `asks`. Returns how many of
  // holder's go in the minute after (each one checked to be holder's), and comer's ids.
  const auto fill_then_ask = [&](const std::string& holder, const std::string& comer, int asks,
                                 std::vector<int>* asked) {
    MakeTree(Nodes(1, 8), UnderOrgOf8({prod, research}, config), {"prod", "research"});
    const std::vector<int> held = SubmitEach(holder.substr(0, 1), holder, 8, 0);
    adm_->Cycle(1, 1000);
    EXPECT_EQ(CountPhase(held, Phase::kAdmitted), 8);
    *asked = SubmitEach(comer.substr(0, 1), comer, asks, 10);
    int evicted = 0;
    for (double t = 11; t < 71; t += 1)
      for (const Eviction& ev : adm_->Cycle(t, 1000).evicted) {
        EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), holder) << ev.reason;
        reasons += ev.reason + "\n";
        ++evicted;
        adm_->Terminated(ev.victim, t);
      }
    return evicted;
  };
  std::vector<int> p, r;
  EXPECT_EQ(fill_then_ask("research", "prod", 7, &p), 6);
  EXPECT_EQ(CountPhase(p, Phase::kAdmitted), 6);
  // (Past prod's guarantee, the evictions say why: not its share, its priority.)
  EXPECT_NE(reasons.find("for queue prod's fair share (over-quota priority: queue prod's 100 is "
                         "above queue research's 0, whatever their shares)"),
            std::string::npos)
      << reasons;
  EXPECT_EQ(fill_then_ask("prod", "research", 4, &r), 2);
  EXPECT_EQ(CountPhase(r, Phase::kAdmitted), 2);
}

// Fair-share preemption compares the two branches below the queue preemptor and victim share,
// as Kueue's hierarchical fair sharing does: a2's over-quota priority decides against a1, its
// sibling in dept-a, and the departments' shares between dept-a and dept-b. (Leaves' shares
// compared across departments, with a priority between siblings, went round for ever in a
// user-style trial: a2 took from a1 by priority, a1 from b by share, b from a2 by share.) And
// a department of weight 0 takes nothing past its guarantee for a share, whatever its
// project's weight.
TEST_F(AdmissionTest, FairSharePreemptionComparesTheBranchesBelowTheQueueTheyShare) {
  for (const bool weightless : {false, true}) {
    SCOPED_TRACE(weightless);
    AdmissionConfig config;
    config.fair_share_preemption = true;
    QueueSpec org{"org", "", 1, {}, -1};
    org.quotas["gpu"] = QuotaSpec{16000, {}, {}};
    QueueSpec dept_a = Plain("dept-a"), dept_b = Plain("dept-b"), a1 = Plain("a1"),
              a2 = Plain("a2"), b = Plain("b");
    a1.parent = a2.parent = "dept-a";
    b.parent = "dept-b";
    a2.priority = 1;
    if (weightless) dept_a.weight = 0;
    config.queues = {org, dept_a, a1, a2, dept_b, b};
    MakeTree(Nodes(2, 8), config, {"a1", "a2", "b"});
    std::map<std::string, int> evictions;  // "preemptor queue -> victim queue"
    const auto run = [&](double from, double to) {
      for (double t = from; t < to; t += 1)
        for (const Eviction& ev : adm_->Cycle(t, 1000).evicted) {
          ++evictions[adm_->queue_name(adm_->queue_of(ev.preemptor)) + " -> " +
                      adm_->queue_name(adm_->queue_of(ev.victim))];
          adm_->Terminated(ev.victim, t);
        }
    };
    const std::vector<int> on_a1 = SubmitEach("a1-", "a1", 8, 0);
    run(1, 2);
    const std::vector<int> on_b = SubmitEach("b-", "b", 16, 2);
    run(3, 4);
    // (Weight 0: a2 not at all; b takes dept-a's 8 for its share.)
    const std::vector<int> on_a2 = SubmitEach("a2-", "a2", weightless ? 0 : 8, 4);
    run(5, 600);
    // dept-a keeps its 8, all of them a2's: a1's went for a2's priority. With weight 0 it
    // keeps none: b has them.
    const std::map<std::string, int> expected = weightless
                                                    ? std::map<std::string, int>{{"b -> a1", 8}}
                                                    : std::map<std::string, int>{{"a2 -> a1", 8}};
    EXPECT_EQ(evictions, expected);
    EXPECT_EQ(CountPhase(on_a2, Phase::kAdmitted), weightless ? 0 : 8);
    EXPECT_EQ(CountPhase(on_a1, Phase::kAdmitted), 0);
    EXPECT_EQ(CountPhase(on_b, Phase::kAdmitted), weightless ? 16 : 8);
  }
}

// Two projects with no guarantee of their own share their department's by fair share, and the
// evictions say so: a2 takes 4 of a1's 8 inside dept-a "for its fair share", not as a reclaim
// of dept-a's guarantee (a user-style trial read that of work inside the department named).
TEST_F(AdmissionTest, ProjectsSharingTheirDepartmentsGuaranteeGoByFairShare) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{16000, {}, {}};
  QueueSpec dept_a = Leaf("dept-a", 8), dept_b = Plain("dept-b"), a1 = Plain("a1"),
            a2 = Plain("a2"), b = Plain("b");
  a1.parent = a2.parent = "dept-a";
  b.parent = "dept-b";
  config.queues = {org, dept_a, a1, a2, dept_b, b};
  MakeTree(Nodes(2, 8), config, {"a1", "a2", "b"});
  const std::vector<int> on_a1 = SubmitEach("a1-", "a1", 8, 0);
  adm_->Cycle(1, 1000);
  const std::vector<int> on_b = SubmitEach("b-", "b", 8, 2);
  adm_->Cycle(3, 1000);
  const std::vector<int> on_a2 = SubmitEach("a2-", "a2", 8, 4);
  int evicted = 0;
  for (double t = 5; t < 600; t += 1)
    for (const Eviction& ev : adm_->Cycle(t, 1000).evicted) {
      EXPECT_EQ(adm_->queue_name(adm_->queue_of(ev.victim)), "a1") << ev.reason;
      EXPECT_EQ(ev.reason.find("reclaims"), std::string::npos) << ev.reason;
      EXPECT_NE(ev.reason.find("for queue a2's fair share"), std::string::npos) << ev.reason;
      ++evicted;
      adm_->Terminated(ev.victim, t);
    }
  EXPECT_EQ(evicted, 4);
  EXPECT_EQ(CountPhase(on_a1, Phase::kAdmitted), 4);
  EXPECT_EQ(CountPhase(on_a2, Phase::kAdmitted), 4);
  EXPECT_EQ(CountPhase(on_b, Phase::kAdmitted), 8);
}

// Fair-share preemption takes only what a queue borrows: a, guaranteed 6 of org's 8 and
// holding them, keeps them against b (guaranteed 2, holding 2), whose share would stay lower
// (else b takes one, a reclaims it back, and so on for ever).
TEST_F(AdmissionTest, FairSharePreemptionLeavesWorkWithinItsGuarantee) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{8000, {}, {}};
  config.queues = {org, Leaf("a", 6), Leaf("b", 2)};
  MakeTree(Nodes(1, 8), config, {"a", "b"});
  const std::vector<int> a = SubmitEach("a", "a", 6, 0);
  const std::vector<int> b = SubmitEach("b", "b", 2, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(a, Phase::kAdmitted) + CountPhase(b, Phase::kAdmitted), 8);
  const int more = Submit(Gpus("more", "b", 1), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(more);
}

// Fair-share preemption counts what is already being evicted, whatever flavour (none here: no
// quota names one) and whoever for: a holds the fleet's 16; b and c come for 8 each in one
// cycle: b's eviction leaves a at 8, equal to b's, and then c may take nothing more from it.
TEST_F(AdmissionTest, FairSharePreemptionCountsWhatIsAlreadyBeingEvicted) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  Make(Nodes(2, 8), {Plain("a"), Plain("b"), Plain("c")}, {}, config);
  const std::vector<int> a = SubmitEach("a", "a", 2, 0, 8);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(a, Phase::kAdmitted), 2);
  Submit(Gpus("b0", "b", 8), 10);
  Submit(Gpus("c0", "c", 8), 10);
  EXPECT_EQ(adm_->Cycle(11, 1000).evicted.size(), 1u);
}

// Fair-share preemption's elastic shrink counts the pods it already took: a runs three elastic
// 4-pod jobs (minCount 1), each of which alone a may give whole and keep its share at b's
// (8 of 16); b's 8-pod gang would need pods of all three, taking a to 4, so nothing is taken.
TEST_F(AdmissionTest, FairShareShrinkCountsThePodsItTook) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  Make(Nodes(2, 8), {Plain("a"), Plain("b"), Plain("c")}, {}, config);
  std::vector<int> a;
  for (int i = 0; i < 3; ++i) {
    Workload w = Gpus("a" + std::to_string(i), "a", 1, 0, 4, /*gang=*/true);
    w.pod_sets[0].min_count = 1;
    a.push_back(Submit(w, 0));
  }
  const int c = Submit(Gpus("c", "c", 1, 0, 4, true), 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(a, Phase::kAdmitted), 3);
  ASSERT_EQ(adm_->phase(c), Phase::kAdmitted);
  for (int id : a) adm_->PodsReady(id);
  const int b = Submit(Gpus("b", "b", 1, 0, 8, true), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(b);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 12000);
}

// The same where memory is a's dominant resource: each of a's pods holds 80 GiB, so its 12 hold
// 960 of the fleet's 1,024 GiB (6 a node) and 4 GPUs stay free. b's 12-pod gang would need 8
// of a's 9 spare pods, leaving a at 4 pods (320 GiB, a share of 0.31) below b's 0.75, so
// nothing is taken (a review: the shrink counted the GPUs and CPU it took but not the memory,
// and took all 8).
TEST_F(AdmissionTest, FairShareShrinkCountsTheMemoryItTook) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  Make(Nodes(2, 8), {Plain("a"), Plain("b")}, {}, config);
  std::vector<int> a;
  for (int i = 0; i < 3; ++i) {
    Workload w = Gpus("a" + std::to_string(i), "a", 1, 0, 4, /*gang=*/true);
    w.pod_sets[0].min_count = 1;
    w.pod_sets[0].memory = MemoryMib(80 * 1024);
    a.push_back(Submit(w, 0));
  }
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(a, Phase::kAdmitted), 3);
  ASSERT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 12000);
  for (int id : a) adm_->PodsReady(id);
  const int b = Submit(Gpus("b", "b", 1, 0, 12, true), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(b);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 12000);
}

// Fair-share preemption shrinks an elastic workload its queue could not give whole: a holds all
// 8 GPUs with one 8-pod job (minCount 1, gang or not), b asks for four; a gives its last four
// pods, one shrink per cycle as b's work comes, and keeps the rest (equal shares). A user-style
// trial saw the job keep all 8 against a fair share of 4: only a reclaim took spare pods.
TEST_F(AdmissionTest, FairSharePreemptionShrinksElasticWork) {
  for (bool gang : {true, false}) {
    SCOPED_TRACE(gang ? "gang" : "not a gang");
    AdmissionConfig config;
    config.fair_share_preemption = true;
    Make(Nodes(2, 4), {Plain("a"), Plain("b")}, {}, config);
    Workload w = Gpus("elastic", "a", 1, 0, 8, gang);
    w.pod_sets[0].min_count = 1;
    const int elastic = Submit(w, 0);
    adm_->Cycle(1, 1000);
    adm_->PodsReady(elastic);
    const std::vector<int> b = SubmitEach("b", "b", 5, 10);
    int evictions = 0;
    for (int t = 11; t < 200; t += 10) {
      for (const auto& ev : adm_->Cycle(t, 1000).evicted) {
        // (Said to be for b's fair share: both are of priority 0.)
        if (evictions++ == 0)
          EXPECT_NE(adm_->reason(elastic).find("for queue b's fair share"), std::string::npos)
              << adm_->reason(elastic);
        adm_->Terminated(ev.victim, t + 1);
      }
    }
    EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 4) << adm_->reason(b[0]);
    EXPECT_EQ(adm_->pod_counts(elastic), std::vector<int>{4});
    EXPECT_EQ(adm_->phase(elastic), Phase::kAdmitted);
    EXPECT_GT(evictions, 0);
  }
}

// The same where the tree's quota, not room, is what is short: a tree guaranteed 16 of 32 GPUs,
// all held by queue a's 8-pod elastic job (2 GPUs a pod, minCount 2); b's four 2-GPU pods
// take four of its pods' quota back, and the job runs on with four (a user-style trial: it
// kept all 8 while b waited, "would hold 24/16").
TEST_F(AdmissionTest, FairSharePreemptionShrinksElasticWorkForTheTreesQuota) {
  for (bool gang : {true, false}) {
    SCOPED_TRACE(gang ? "gang" : "not a gang");
    AdmissionConfig config;
    config.fair_share_preemption = true;
    QueueSpec org{"org", "", 1, {}, -1};
    org.quotas["gpu"] = QuotaSpec{16'000, {}, {}};
    config.queues = {org, Leaf("a", 0), Leaf("b", 0)};
    MakeTree(Nodes(4, 8), config, {"a", "b"});
    Workload w = Gpus("elastic", "a", 2, 0, 8, gang);
    w.pod_sets[0].min_count = 2;
    const int elastic = Submit(w, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(adm_->pod_counts(elastic), std::vector<int>{8});
    adm_->PodsReady(elastic);
    const int b = Submit(Gpus("b", "b", 2, 0, 4), 10);
    for (const auto& ev : adm_->Cycle(11, 1000).evicted) adm_->Terminated(ev.victim, 12);
    EXPECT_NE(adm_->reason(elastic).find("for queue b's fair share"), std::string::npos)
        << adm_->reason(elastic);
    for (int t = 21; t < 200; t += 10)
      for (const auto& ev : adm_->Cycle(t, 1000).evicted) adm_->Terminated(ev.victim, t + 1);
    EXPECT_EQ(adm_->phase(b), Phase::kAdmitted) << adm_->reason(b);
    EXPECT_EQ(adm_->pod_counts(elastic), std::vector<int>{4}) << adm_->reason(elastic);
  }
}

// Best-effort work (the built-in unqueued beside several trees) takes what is idle, no one's
// fair share: under fair-share preemption it evicts nothing of a tree that borrows the fleet.
TEST_F(AdmissionTest, BestEffortWorkTakesNoFairShare) {
  AdmissionConfig config;
  config.fair_share_preemption = true;
  config.lend_across_trees = true;
  QueueSpec dx = Leaf("dx", 4), u = Plain("unqueued");
  dx.parent = u.parent = "";
  u.best_effort = true;
  config.queues = {dx, u};
  MakeTree(Nodes(2, 8), config, {"dx", "unqueued"});
  const std::vector<int> x = SubmitEach("x", "dx", 16, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(x, Phase::kAdmitted), 16);
  const int mine = Submit(Gpus("u0", "unqueued", 1), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty()) << adm_->reason(mine);
}

// Best-effort work gives its GPUs back to a reclaim in any flavour: the same GPUs are charged to
// whole-GPU and fractional flavours alike (a trial: a fraction within its queue's frac guarantee
// waited for good while best-effort work held every GPU, charged to gpu).
TEST_F(AdmissionTest, BestEffortWorkIsReclaimedWhateverFlavourChargesIt) {
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across ? "trees lend each other" : "trees lend nothing");
    AdmissionConfig config;
    config.flavors = {FlavorSpec{"gpu", std::nullopt, {}, {}},
                      FlavorSpec{"frac", DeviceKind::kFraction, {}, {}}};
    QueueSpec a = Plain("a"), u = Plain("unqueued");
    a.parent = u.parent = "";
    a.quotas["frac"] = QuotaSpec{1000, {}, {}};
    a.quotas["gpu"] = QuotaSpec{1000, {}, {}};
    u.best_effort = true;
    config.queues = {a, u};
    config.lend_across_trees = across;
    MakeTree(Nodes(1, 2), config, {"a", "unqueued"});
    const std::vector<int> us = SubmitEach("u", "unqueued", 2, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(us, Phase::kAdmitted), 2);
    const int half = Submit(Fraction("half", "a", 500, "a"), 2);
    CycleResult r = adm_->Cycle(3, 1000);
    ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(half);
    EXPECT_EQ(adm_->queue_name(adm_->queue_of(r.evicted[0].victim)), "unqueued");
    adm_->Terminated(r.evicted[0].victim, 20);
    adm_->Cycle(21, 1000);
    EXPECT_EQ(adm_->phase(half), Phase::kAdmitted) << adm_->reason(half);
  }
}

// Fractions do not take their tree past its fraction guarantee onto GPUs its whole-GPU
// guarantee needs (a trial's did, with no other tree: the whole-GPU work then waited for good,
// as nothing reclaims across flavours). Two GPUs, guaranteed one whole and one in fractions:
// b borrows a's fraction guarantee, and a's fraction takes it back instead; b's whole GPU runs.
// (One tenant's fractions, so that they may share a GPU.)
TEST_F(AdmissionTest, FractionsDoNotTakeTheGpusAWholeGpuGuaranteeNeeds) {
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"frac", DeviceKind::kFraction, {}, {}},
                    FlavorSpec{"gpu", std::nullopt, {}, {}}};
  QueueSpec a = Plain("a"), b = Plain("b");
  a.quotas["frac"] = QuotaSpec{500, {}, {}};
  b.quotas["frac"] = QuotaSpec{500, {}, {}};
  b.quotas["gpu"] = QuotaSpec{1000, {}, {}};
  Make(Nodes(1, 2), {a, b}, {}, config);
  std::vector<int> bs;
  for (int i = 0; i < 4; ++i)
    bs.push_back(Submit(Fraction("b" + std::to_string(i), "b", 250, "a"), 0));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(bs, Phase::kAdmitted), 4);
  const int mine = Submit(Fraction("a0", "a", 250, "a"), 2);
  CycleResult r = adm_->Cycle(3, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(adm_->queue_name(adm_->queue_of(r.evicted[0].victim)), "b");
  adm_->Terminated(r.evicted[0].victim, 20);
  adm_->Cycle(21, 1000);
  ASSERT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
  const int whole = Submit(Gpus("bw", "b", 1), 22);
  adm_->Cycle(23, 1000);
  EXPECT_EQ(adm_->phase(whole), Phase::kAdmitted) << adm_->reason(whole);
}

// ... but a MIG GPU's slices are a fixed partition: a guarantee in the flavour that takes its
// small slices needs none of the 3g slices another flavour takes (a review: counted as shared,
// they kept a tree from borrowing idle 3g slices no guarantee could ever use).
TEST_F(AdmissionTest, MigSlicesOfAnotherFlavourAreNotKeptForAGuarantee) {
  Fleet fleet = Nodes(2, 4);
  for (Device& d : fleet.nodes[1].devices)
    d.mig_slices = {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"};
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"m3", DeviceKind::kMig, {}, {"3g.40gb"}},
                    FlavorSpec{"gpu", std::nullopt, {}, {}}};
  // Tree b: b1 guaranteed two 3g slices, which b2 borrows; b1's own slice then takes an idle
  // 3g slice no tree is guaranteed rather than reclaim (a's guarantee in gpu needs none).
  QueueSpec a = Plain("a"), b = Plain("b"), b1 = Plain("b1"), b2 = Plain("b2");
  a.parent = b.parent = "";
  b1.parent = b2.parent = "b";
  a.quotas["gpu"] = QuotaSpec{8000, {}, {}};
  b1.quotas["m3"] = QuotaSpec{856, {}, {}};
  b2.quotas["m3"] = QuotaSpec{0, {}, {}};
  config.queues = {a, b, b1, b2};
  MakeTree(fleet, config, {"a", "b1", "b2"});
  const std::vector<int> borrowed = {Submit(MigSlices("x0", "b2", 1, "3g.40gb"), 0),
                                     Submit(MigSlices("x1", "b2", 1, "3g.40gb"), 0)};
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(borrowed, Phase::kAdmitted), 2);
  const int mine = Submit(MigSlices("y0", "b1", 1, "3g.40gb"), 2);
  const CycleResult r = adm_->Cycle(3, 1000);
  EXPECT_TRUE(r.evicted.empty()) << adm_->reason(mine);
  EXPECT_EQ(adm_->phase(mine), Phase::kAdmitted) << adm_->reason(mine);
}

// A leaf with no guarantee of its own takes back its department's guarantee from best-effort
// work only: a sibling that borrows within the department keeps what it borrows (that is fair
// share's to move, not reclaim's).
TEST_F(AdmissionTest, ADepartmentsGuaranteeIsReclaimedFromBestEffortWorkOnly) {
  QueueSpec research = Leaf("research", 32), a = Plain("a"), b = Leaf("b", 8), ops = Leaf("ops", 8),
            u = Plain("unqueued");
  research.parent = ops.parent = u.parent = "";
  a.parent = b.parent = "research";
  u.best_effort = true;
  AdmissionConfig config;
  config.queues = {research, a, b, ops, u};
  MakeTree(Nodes(5, 8), config, {"a", "b", "ops", "unqueued"});
  const std::vector<int> bs = SubmitEach("b", "b", 2, 0, 8);  // 8 its own, 8 research's
  adm_->Cycle(1, 1000);
  ASSERT_EQ(CountPhase(bs, Phase::kAdmitted), 2);
  const std::vector<int> us = SubmitEach("u", "unqueued", 3, 2, 8);  // the other 24 GPUs
  adm_->Cycle(3, 1000);
  ASSERT_EQ(CountPhase(us, Phase::kAdmitted), 3);
  const int mine = Submit(Gpus("a0", "a", 8), 4);
  CycleResult r = adm_->Cycle(5, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(mine);
  EXPECT_EQ(adm_->queue_name(adm_->queue_of(r.evicted[0].victim)), "unqueued");
  EXPECT_NE(r.evicted[0].reason.find("queue a reclaims queue research's guarantee (it has none "
                                     "of its own)"),
            std::string::npos)
      << r.evicted[0].reason;
  // With research's guarantee in use (b borrowing the rest of it), a reclaims nothing.
  MakeTree(Nodes(5, 8), config, {"a", "b", "ops", "unqueued"});
  SubmitEach("b", "b", 4, 0, 8);
  SubmitEach("u", "unqueued", 1, 0, 8);
  adm_->Cycle(1, 1000);
  const int late = Submit(Gpus("a1", "a", 8), 2);
  EXPECT_TRUE(adm_->Cycle(3, 1000).evicted.empty()) << adm_->reason(late);
}

// stopPolicy: Hold admits nothing more from the queue while what it runs keeps running;
// HoldAndDrain also evicts that (for no preemptor); a stopped inner queue stops its subtree.
TEST_F(AdmissionTest, StopPolicyHoldsAndDrainsAQueue) {
  for (const StopPolicy stop : {StopPolicy::kHold, StopPolicy::kHoldAndDrain}) {
    SCOPED_TRACE(static_cast<int>(stop));
    QueueSpec a = Leaf("a", 2);
    a.stop_policy = stop;
    Make(Nodes(1, 4), {a, Leaf("b", 2)});
    SubmitOptions keep;
    keep.preemptible = false;  // a drain evicts it all the same
    auto running = adm_->Restore(Gpus("a-run", "a", 1), OnGpus(0, {0}), 0, keep);
    ASSERT_TRUE(running.ok());
    const int waiting = Submit(Gpus("a-wait", "a", 1), 1);
    const int other = Submit(Gpus("b-0", "b", 1), 1);
    CycleResult r = adm_->Cycle(2, 1000);
    EXPECT_EQ(r.admitted, std::vector<int>{other});
    EXPECT_EQ(adm_->phase(waiting), Phase::kPending);
    EXPECT_TRUE(adm_->stopped(adm_->QueueIndex("a")));
    EXPECT_FALSE(adm_->stopped(adm_->QueueIndex("b")));
    if (stop == StopPolicy::kHold) {
      EXPECT_EQ(adm_->reason(waiting), "queue a is stopped (stopPolicy: Hold)");
      EXPECT_TRUE(r.evicted.empty());
      EXPECT_EQ(adm_->phase(*running), Phase::kAdmitted);
      continue;
    }
    EXPECT_EQ(adm_->reason(waiting), "queue a is stopped (stopPolicy: HoldAndDrain)");
    ASSERT_EQ(r.evicted.size(), 1u);
    EXPECT_EQ(r.evicted[0].victim, *running);
    EXPECT_EQ(r.evicted[0].preemptor, -1);
    EXPECT_EQ(r.evicted[0].reason, "queue a is draining (stopPolicy: HoldAndDrain)");
    adm_->Terminated(*running, 40);
    r = adm_->Cycle(41, 1000);
    EXPECT_TRUE(r.admitted.empty());
    EXPECT_EQ(adm_->phase(*running), Phase::kPending);
  }
  // Consolidation moves no work of a held queue: moved, it would wait in a queue that admits
  // nothing. b's 4-GPU pod needs a-0 or a-1 moved (3 GPUs free on each node).
  for (const bool hold : {false, true}) {
    SCOPED_TRACE(hold ? "Hold" : "None");
    QueueSpec a = Leaf("a", 2);
    if (hold) a.stop_policy = StopPolicy::kHold;
    Make(Nodes(2, 4), {a, Leaf("b", 4)});
    for (int n = 0; n < 2; ++n) {
      Assignment as;
      as.node = n;
      as.devices.push_back({0, 1000, 80 * 1024, -1});
      ASSERT_TRUE(adm_->Restore(Gpus("a-" + std::to_string(n), "a", 1), {as}, 0).ok());
    }
    const int big = Submit(Gpus("b-big", "b", 4), 1);
    CycleResult r = adm_->Cycle(2, 1000);
    EXPECT_EQ(r.evicted.size(), hold ? 0u : 1u) << adm_->reason(big);
  }
  // An inner queue's Hold stops the leaves below it, not their siblings elsewhere.
  AdmissionConfig config;
  QueueSpec org{"org", "", 1, {}, -1};
  QueueSpec team{"team", "org", 1, {}, -1};
  team.stop_policy = StopPolicy::kHold;
  QueueSpec proj = Leaf("proj", 2);
  proj.parent = "team";
  config.queues = {org, team, proj, Leaf("b", 2)};
  auto policy = MakePolicy("bestfit");
  ASSERT_TRUE(policy.ok());
  fleet_ = Nodes(1, 4);
  auto made = Admitter::Create(fleet_, Tenants({"proj", "b"}), config, **policy);
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto held = (*made)->Submit(Gpus("p-0", "proj", 1), 0);
  auto free = (*made)->Submit(Gpus("b-0", "b", 1), 0);
  ASSERT_TRUE(held.ok() && free.ok());
  (*made)->Cycle(1, 1000);
  EXPECT_EQ((*made)->phase(*held), Phase::kPending);
  EXPECT_EQ((*made)->reason(*held), "queue team is stopped (stopPolicy: Hold)");
  EXPECT_EQ((*made)->phase(*free), Phase::kAdmitted);
}

// A department's disruption budget counts the evictions of its whole subtree (a user-style
// trial: dept's budget of 1 was stored and said, and all eight of its leaves' workloads were
// evicted in one cycle; at 0, too).
// A department's preemption policy holds for a leaf below it that sets none of its own (a
// user-style trial: dept's reclaimWithinCohort Never was said and its leaf reclaimed at once);
// a leaf's own wins.
TEST_F(AdmissionTest, ALeafFollowsItsDepartmentsPreemptionPolicyUnlessItSetsItsOwn) {
  for (const bool own : {false, true}) {
    SCOPED_TRACE(own ? "the leaf sets its own" : "the department's");
    QueueSpec dept{"dept", "org", 1, {}, -1};
    dept.preemption.reclaim_within_cohort = PreemptionPolicy::Reclaim::kNever;
    dept.sets = QueueSpec::kSetsPreemption;
    QueueSpec a1 = Leaf("a1", 8);
    a1.parent = "dept";
    if (own) a1.sets = QueueSpec::kSetsPreemption;  // (the default: reclaimWithinCohort Any)
    Make(Nodes(4, 4), {dept, a1, Leaf("qb", 8)});
    const std::vector<int> held = SubmitEach("b", "qb", 16, 0);
    adm_->Cycle(1, 1000);
    ASSERT_EQ(CountPhase(held, Phase::kAdmitted), 16);
    const int small = Submit(Gpus("a-0", "a1", 2), 10);
    const CycleResult r = adm_->Cycle(400, 1000);
    EXPECT_EQ(r.evicted.size(), own ? 2u : 0u) << adm_->reason(small);
  }
}

TEST_F(AdmissionTest, ADepartmentsDisruptionBudgetCountsItsLeaves) {
  for (const int budget : {1, 0}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    QueueSpec dept{"dept", "org", 1, {}, budget};
    QueueSpec b1 = Leaf("b1", 2), b2 = Leaf("b2", 2);
    b1.parent = b2.parent = "dept";
    Make(Nodes(2, 4), {Leaf("qa", 4), dept, b1, b2});
    std::vector<int> held;
    for (int i = 0; i < 4; ++i) {
      held.push_back(Submit(Gpus("x" + std::to_string(i), "b1", 1)));
      held.push_back(Submit(Gpus("y" + std::to_string(i), "b2", 1)));
    }
    adm_->Cycle(1, 1000);
    // (At 0 the leaves' work may not borrow: nothing could take it back.)
    ASSERT_EQ(CountPhase(held, Phase::kAdmitted), budget == 0 ? 4 : 8) << adm_->reason(held[7]);
    if (budget == 0) {
      EXPECT_NE(adm_->reason(held[7]).find("queue b2's work (the disruptionBudget of 0 of queue "
                                           "dept above it lets none of it be evicted)"),
                std::string::npos)
          << adm_->reason(held[7]);
      continue;
    }
    const int big = Submit(Gpus("qa0", "qa", 4), 10);
    CycleResult r = adm_->Cycle(400, 1000);
    EXPECT_EQ(r.evicted.size(), 1u) << adm_->reason(big);
    EXPECT_NE(adm_->reason(big).find("3 more to go as the disruption budget of queue dept allows"),
              std::string::npos)
        << adm_->reason(big);
    EXPECT_TRUE(adm_->Cycle(401, 1000).evicted.empty()) << "dept's budget is spent while it stops";
    ASSERT_FALSE(r.evicted.empty());
    adm_->Terminated(r.evicted[0].victim, 430);
    EXPECT_EQ(adm_->Cycle(431, 1000).evicted.size(), 1u) << adm_->reason(big);
  }
}

TEST_F(AdmissionTest, DisruptionBudgetLimitsConcurrentEvictions) {
  Make(Nodes(2, 4), {Leaf("a", 4, std::nullopt, std::nullopt, /*budget=*/1), Leaf("b", 4)});
  for (int i = 0; i < 8; ++i) Submit(Gpus("a" + std::to_string(i), "a", 1));
  adm_->Cycle(1, 1000);
  int big = Submit(Gpus("b0", "b", 2), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(big);
  EXPECT_NE(adm_->phase(big), Phase::kAdmitted);
  // It needs two of a's GPUs at once: the second victim goes once the first has stopped, the
  // room the first freed held for b0 meanwhile, rather than never (a user-style review found
  // b0 waiting for good below its guarantee, told only that no node could take it).
  EXPECT_NE(adm_->reason(big).find("1 more to go as the disruption budget of queue a allows"),
            std::string::npos)
      << adm_->reason(big);
  EXPECT_TRUE(adm_->budget_blocked(big));
  const int first = r.evicted[0].victim;
  EXPECT_TRUE(adm_->Cycle(12, 1000).evicted.empty()) << "the budget is spent while it stops";
  adm_->Terminated(first, 40);
  r = adm_->Cycle(41, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(big);
  // The GPU the first victim freed went to no one else: not to that victim, waiting again.
  EXPECT_EQ(adm_->phase(first), Phase::kPending);
  adm_->Terminated(r.evicted[0].victim, 70);
  adm_->Cycle(71, 1000);
  EXPECT_EQ(adm_->phase(big), Phase::kAdmitted) << adm_->reason(big);
  // With the budget at zero nothing of a is ever evicted, and the reason says why: not for
  // its own higher-priority work, and a borrows nothing (a lender would wait for it for
  // ever), as non-preemptible work does not.
  Make(Nodes(2, 4), {Leaf("a", 4, std::nullopt, std::nullopt, /*budget=*/0), Leaf("b", 4)});
  const std::vector<int> own = SubmitEach("a", "a", 8, 0);
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(own, Phase::kAdmitted), 4);
  EXPECT_NE(adm_->reason(own.back())
                .find("queue a's work (its disruptionBudget of 0 lets none of it be evicted) "
                      "would hold 5/4 GPUs of gpu, past its guarantee"),
            std::string::npos)
      << adm_->reason(own.back());
  const int lender = Submit(Gpus("b0", "b", 4), 10);
  const int blocked = Submit(Gpus("hot", "a", 1, /*priority=*/100), 10);
  CycleResult none = adm_->Cycle(11, 1000);
  EXPECT_TRUE(none.evicted.empty());
  EXPECT_EQ(adm_->phase(lender), Phase::kAdmitted) << adm_->reason(lender);
  EXPECT_NE(adm_->reason(blocked).find("disruptionBudget of 0 lets none of it be evicted"),
            std::string::npos)
      << adm_->reason(blocked);
  // ... naming the lower-priority work it would otherwise preempt (a trial read only that it
  // may not borrow).
  EXPECT_NE(adm_->reason(blocked).find("; its lower-priority work (a/a0, a/a1, a/a2, a/a3) is "
                                       "not preempted for it either: the budget keeps it too"),
            std::string::npos)
      << adm_->reason(blocked);
}

// A queue set to a disruption budget of 0 after it borrowed keeps what it holds: its lender's
// work is told that only an administrator can change that (not just "waiting").
TEST_F(AdmissionTest, ALenderToAQueueWithABudgetOfZeroIsToldWhoMustRaiseIt) {
  Make(Nodes(2, 4), {Leaf("a", 4, std::nullopt, std::nullopt, /*budget=*/0), Leaf("b", 4)});
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(
        adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), OnGpus(i / 4, {i % 4}), 0).ok());
  const int mine = Submit(Gpus("b0", "b", 1), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty());
  EXPECT_NE(adm_->reason(mine).find(
                "queue a's disruptionBudget is 0: none of its work is evicted or moved "
                "until an administrator raises it"),
            std::string::npos)
      << adm_->reason(mine);
  // The queue itself says so too (its status' warning): what it borrowed stays.
  EXPECT_EQ(adm_->GuaranteeWarnings()[adm_->QueueIndex("a")],
            "its disruptionBudget of 0 keeps the 4 GPUs of gpu it holds past its guarantee from a "
            "reclaim: they stay until its work ends");
}

// A borrowing limit lowered below what a queue holds evicts nothing (as Kueue's): its new work
// waits, and the queue says why (a user-style review found no word of it anywhere).
TEST_F(AdmissionTest, AQueueOverALoweredBorrowingLimitSaysSoAndEvictsNothing) {
  Make(Nodes(2, 4), {Leaf("a", 4, /*borrowing=*/2), Leaf("b", 4)});
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(
        adm_->Restore(Gpus("a" + std::to_string(i), "a", 1), OnGpus(i / 4, {i % 4}), 0).ok());
  const int more = Submit(Gpus("a-more", "a", 1), 10);
  EXPECT_TRUE(adm_->Cycle(11, 1000).evicted.empty());
  EXPECT_EQ(adm_->phase(more), Phase::kPending) << adm_->reason(more);
  EXPECT_EQ(adm_->GuaranteeWarnings()[adm_->QueueIndex("a")],
            "over its borrowing limit of gpu: holds 7 GPUs, past its 4 guaranteed + borrowing "
            "limit 2; nothing is evicted for it, its new work waits until it is within");
  EXPECT_EQ(adm_->GuaranteeWarnings().count(adm_->QueueIndex("b")), 0u);
}

// Two preemptors go batch by batch under one disruption budget. When one's batch has stopped
// and the other's next batch spent the budget first, the room the first batch freed stays held
// for its preemptor (nominated, its plan kept), not taken by whatever waits behind it: that
// batch's evictions would otherwise be wasted and have to be made again.
TEST_F(AdmissionTest, BudgetSpentByAnotherPreemptorKeepsTheFreedRoomHeld) {
  Make(Nodes(2, 4),
       {Leaf("a", 0, std::nullopt, std::nullopt, /*budget=*/2), Leaf("b", 4), Leaf("c", 4)});
  std::vector<int> older, newer;  // a's work on one node, and (newer, cheaper) on the other
  for (int i = 0; i < 4; ++i) older.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1), 1));
  adm_->Cycle(1, 1000);
  for (int i = 4; i < 8; ++i) newer.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1), 2));
  adm_->Cycle(2, 1000);
  const int n_old = adm_->assignments(older[0])[0].node;
  ASSERT_EQ(PlacedOn(older, n_old), 4);
  ASSERT_EQ(PlacedOn(newer, 1 - n_old), 4);

  const int b0 = Submit(Gpus("b0", "b", 4), 10);
  CycleResult r = adm_->Cycle(11, 1000);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(b0);
  std::vector<int> b_victims = {r.evicted[0].victim, r.evicted[1].victim};
  const int c0 = Submit(Gpus("c0", "c", 4, /*priority=*/10), 20);
  EXPECT_TRUE(adm_->Cycle(21, 1000).evicted.empty()) << "a's budget is spent on b0's victims";
  adm_->Terminated(b_victims[0], 30);
  r = adm_->Cycle(31, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(c0);  // c0's first batch, on the older node
  const int c_victim = r.evicted[0].victim;
  ASSERT_NE(std::find(older.begin(), older.end(), c_victim), older.end());
  // Lower-priority work of c, which would fit the GPU c0's victim frees.
  const int c1 = Submit(Gpus("c1", "c", 1), 50);
  adm_->Terminated(b_victims[1], 60);
  adm_->Terminated(c_victim, 60);
  // b0 goes on first and its second batch spends the budget: c0 may evict nobody now.
  r = adm_->Cycle(61, 1000);
  ASSERT_EQ(r.evicted.size(), 2u);
  for (const Eviction& v : r.evicted) EXPECT_EQ(v.preemptor, b0);
  EXPECT_TRUE(adm_->nominated(c0)) << adm_->reason(c0);
  EXPECT_TRUE(adm_->budget_blocked(c0));
  EXPECT_NE(adm_->reason(c0).find("3 more to go as the disruption budget of queue a allows"),
            std::string::npos)
      << adm_->reason(c0);
  EXPECT_EQ(adm_->plan(c0).size(), 1u);
  EXPECT_EQ(adm_->phase(c1), Phase::kPending) << "the GPU c0's victim freed is held for c0";
  for (const Eviction& v : r.evicted) adm_->Terminated(v.victim, 90);
  r = adm_->Cycle(91, 1000);
  EXPECT_EQ(adm_->phase(b0), Phase::kAdmitted) << adm_->reason(b0);
  ASSERT_EQ(r.evicted.size(), 2u) << adm_->reason(c0);
  for (const Eviction& v : r.evicted) EXPECT_EQ(v.preemptor, c0);
  for (const Eviction& v : r.evicted) adm_->Terminated(v.victim, 120);
  r = adm_->Cycle(121, 1000);
  ASSERT_EQ(r.evicted.size(), 1u) << adm_->reason(c0);
  adm_->Terminated(r.evicted[0].victim, 150);
  adm_->Cycle(151, 1000);
  // Four evictions for four GPUs: none made twice.
  EXPECT_EQ(adm_->phase(c0), Phase::kAdmitted) << adm_->reason(c0);
  EXPECT_EQ(adm_->assignments(c0)[0].node, n_old);
}

// A preemptor short of quota whose victims go one at a time (disruption budget 1): the quota
// each batch frees is its, not the next lower-priority workload's in its queue. Before, the
// requeued victim took that quota back each time, and the preemptor evicted again, forever (a
// user-style review watched it do so for an hour and a half of virtual time).
TEST_F(AdmissionTest, QuotaFreedByABatchIsKeptForItsPreemptor) {
  Make(Nodes(2, 4), {Leaf("b", 4, /*borrowing=*/0.0, std::nullopt, /*budget=*/1)});
  std::vector<Workload> low;
  for (int i = 0; i < 4; ++i) low.push_back(Gpus("v" + std::to_string(i), "b", 1));
  std::vector<int> ids;
  const auto [hot, first, second] = TwoVictimsOneAtATime(low, Gpus("hot", "b", 2, 10), ids);
  ASSERT_EQ(CountPhase(ids, Phase::kAdmitted), 2);  // (two evicted, the first waiting again)
  ASSERT_GE(second, 0) << adm_->reason(hot);
  // The first victim, waiting again, would fit the quota its eviction freed; that is hot's.
  EXPECT_EQ(adm_->phase(first), Phase::kPending);
  EXPECT_NE(adm_->reason(first).find("1 of them for preemptors whose victims are stopping"),
            std::string::npos)
      << adm_->reason(first);
  adm_->Terminated(second, 60);
  CycleResult r = adm_->Cycle(61, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(hot), Phase::kAdmitted) << adm_->reason(hot);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 2);
}

// Reclaim frees the node whose victims are of the lowest priority before the one whose
// victims cost least: a newer node holding a priority-20 workload keeps it, and the older
// priority-0 work goes (a user-style review saw the priority-20 victim, requeued, preempt a
// third workload of its queue: three evictions where two would do).
TEST_F(AdmissionTest, ReclaimFreesTheNodeOfTheLowestPriorityVictims) {
  Make(Nodes(2, 4), {Leaf("a", 0), Leaf("b", 8)});
  const int a0 = Submit(Gpus("a0", "a", 2), 1), a1 = Submit(Gpus("a1", "a", 2), 1);
  adm_->Cycle(1, 1000);
  const int a2 = Submit(Gpus("a2", "a", 2), 2), a3 = Submit(Gpus("a3", "a", 2, 20), 2);
  adm_->Cycle(2, 1000);
  ASSERT_EQ(CountPhase({a0, a1, a2, a3}, Phase::kAdmitted), 4);
  ASSERT_EQ(adm_->assignments(a0)[0].node, adm_->assignments(a1)[0].node);
  ASSERT_EQ(adm_->assignments(a2)[0].node, adm_->assignments(a3)[0].node);
  ASSERT_NE(adm_->assignments(a0)[0].node, adm_->assignments(a2)[0].node);
  const int b0 = Submit(Gpus("b0", "b", 4), 100);
  CycleResult r = adm_->Cycle(101, 1000);
  std::vector<int> victims;
  for (const Eviction& v : r.evicted) victims.push_back(v.victim);
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, (std::vector<int>{a0, a1})) << adm_->reason(b0);
  EXPECT_EQ(adm_->phase(a3), Phase::kAdmitted);
}

// The quota a preemptor keeps is its plan less what its victims still stopping hold: a second
// preemptor of the queue evicts what it needs, not that again (a review: counting both made it
// evict twice as many).
TEST_F(AdmissionTest, QuotaKeptForAPreemptorIsNotCountedTwice) {
  Make(Nodes(2, 8), {Leaf("b", 8, /*borrowing=*/0.0)});
  std::vector<int> low;
  for (int i = 0; i < 8; ++i) low.push_back(Submit(Gpus("v" + std::to_string(i), "b", 1), i));
  adm_->Cycle(10, 1000);
  ASSERT_EQ(CountPhase(low, Phase::kAdmitted), 8);
  const int hot = Submit(Gpus("hot", "b", 2, /*priority=*/10), 20);
  ASSERT_EQ(adm_->Cycle(21, 1000).evicted.size(), 2u) << adm_->reason(hot);
  const int hot2 = Submit(Gpus("hot2", "b", 2, /*priority=*/10), 22);
  CycleResult r = adm_->Cycle(23, 1000);
  EXPECT_EQ(r.evicted.size(), 2u) << adm_->reason(hot2);
  for (const Eviction& v : r.evicted) EXPECT_EQ(v.preemptor, hot2);
}

// As for GPUs, the CPU quota a preemptor's victims free as they stop, one at a time under a
// disruption budget of 1, is its: the first victim, waiting again, does not take it back.
TEST_F(AdmissionTest, CpuQuotaFreedByABatchIsKeptForItsPreemptor) {
  QueueSpec b;
  b.name = "b";
  b.parent = "org";
  b.disruption_budget = 1;
  QuotaSpec cpu;
  cpu.guaranteed_milli = 4000;
  cpu.borrowing_limit_milli = 0;
  b.quotas["cpu"] = cpu;
  Make(Nodes(2, 8), {b});
  auto cpu_only = [](const std::string& name, int priority) {
    Workload w = Gpus(name, "b", 1, priority);
    w.pod_sets[0].device = {};
    return w;
  };
  std::vector<Workload> low;
  for (int i = 0; i < 4; ++i) low.push_back(cpu_only("v" + std::to_string(i), 0));
  Workload big = cpu_only("hot", 10);
  big.pod_sets[0].cpu = MilliCpu(2000);
  std::vector<int> ids;
  const auto [hot, first, second] = TwoVictimsOneAtATime(low, big, ids);
  ASSERT_GE(second, 0) << adm_->reason(hot);
  EXPECT_EQ(adm_->phase(first), Phase::kPending) << adm_->reason(first);
  adm_->Terminated(second, 60);
  CycleResult r = adm_->Cycle(61, 1000);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(adm_->phase(hot), Phase::kAdmitted) << adm_->reason(hot);
}

TEST_F(AdmissionTest, GangIsAllOrNothing) {
  Make(Nodes(2, 4), {Leaf("a", 8)});
  int too_big = Submit(Gpus("three", "a", 4, 0, /*pods=*/3, /*gang=*/true));
  int fits = Submit(Gpus("two", "a", 4, 0, /*pods=*/2, /*gang=*/true));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(too_big), Phase::kInfeasible) << "3 x 4 GPUs can never fit 2 x 4";
  EXPECT_EQ(adm_->phase(fits), Phase::kAdmitted);
  EXPECT_EQ(adm_->assignments(fits).size(), 2u);
  // A second gang of two does not get one node now and one later.
  int second = Submit(Gpus("again", "a", 4, 0, 2, true), 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(second), Phase::kPending);
  EXPECT_TRUE(adm_->assignments(second).empty());
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 8000);
}

TEST_F(AdmissionTest, GangNotReadyInTimeIsReleased) {
  AdmissionConfig c;
  c.gang_timeout_s = 60;
  Make(Nodes(2, 4), {Leaf("a", 8)}, {}, c);
  int gang = Submit(Gpus("g", "a", 4, 0, 2, true));
  int ready = Submit(Gpus("r", "a", 1, 0, 2, true));
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(gang), Phase::kAdmitted);
  ASSERT_EQ(adm_->phase(ready), Phase::kPending);  // no room left
  adm_->Cycle(30, 1000);
  EXPECT_EQ(adm_->phase(gang), Phase::kAdmitted);
  CycleResult r = adm_->Cycle(61, 1000);
  ASSERT_EQ(r.released.size(), 1u);
  EXPECT_EQ(r.released[0], gang);
  EXPECT_NE(adm_->reason(gang).find("gang timeout"), std::string::npos) << adm_->reason(gang);
  // Its devices went back: the other gang got them in the same cycle.
  EXPECT_EQ(adm_->phase(ready), Phase::kAdmitted);
  adm_->PodsReady(ready);
  CycleResult later = adm_->Cycle(500, 1000);
  EXPECT_TRUE(std::find(later.released.begin(), later.released.end(), ready) ==
              later.released.end());
  EXPECT_EQ(adm_->phase(ready), Phase::kAdmitted);
}

TEST_F(AdmissionTest, TrustIsolationHoldsThroughAdmission) {
  // Two standard tenants may not share one GPU fractionally; a tenant may share with itself.
  Make(Nodes(1, 1), {Leaf("a", 0.5), Leaf("b", 0.5)});
  int a1 = Submit(Fraction("a1", "a", 400, "a"));
  int b1 = Submit(Fraction("b1", "b", 400, "b"));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(a1), Phase::kAdmitted);
  EXPECT_EQ(adm_->phase(b1), Phase::kPending);
  int a2 = Submit(Fraction("a2", "a", 400, "a"), 2);
  adm_->Cycle(3, 1000);
  EXPECT_EQ(adm_->phase(a2), Phase::kAdmitted);
}

// A fraction holds the larger of its compute and its memory share of quota: 10m of compute with
// 41Gi of an 80Gi GPU keeps half the GPU from everyone else, so it takes half a GPU of quota
// (a review: it was charged 0.01, and a queue guaranteed one GPU held four).
TEST_F(AdmissionTest, AFractionIsChargedByItsMemoryWhereThatIsTheLargerShare) {
  Make(Nodes(1, 4), {Leaf("a", 1, /*borrowing=*/0), Leaf("b", 3)});
  std::vector<int> ids;
  for (int i = 0; i < 4; ++i) {
    Workload w = Fraction("f" + std::to_string(i), "a", 10, "a");
    w.pod_sets[0].device.gpu_memory = MemoryMib(41 * 1024);
    ids.push_back(Submit(w));
  }
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ids, Phase::kAdmitted), 1);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 512);
  EXPECT_EQ(adm_->gpu_milli(ids[0]), 512);
  EXPECT_EQ(adm_->state().allocated_gpu_milli(), 10);  // (the device's compute, as asked)
  EXPECT_NE(adm_->reason(ids[1]).find(
                "queue a over its borrowing limit for gpu: 1.024/1 GPUs (it counts as 0.512 "
                "GPUs of quota for the 0.01 of compute it asks: a fraction holds the larger of "
                "its compute and GPU memory share (of the smallest GPU it may land on))"),
            std::string::npos)
      << adm_->reason(ids[1]);
  // (Its tenant is not untrusted: nothing is said of untrusted tenants.)
  EXPECT_EQ(adm_->reason(ids[1]).find("untrusted"), std::string::npos) << adm_->reason(ids[1]);
}

// Placed, a fraction is charged as on the GPU it got: 41Gi waits charged as on an 80Gi H100 (the
// smallest GPU that holds it), and on a 141Gi H200 holds 0.291 of it, as the meter bills it.
TEST_F(AdmissionTest, APlacedFractionIsChargedAsOnTheGpuItGot) {
  Fleet fleet = WithNodeOf(Nodes(1, 4), "m0", 4, "H200", 141);
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 8)};
  MakeTree(fleet, config, {"a"});
  Workload full = Gpus("full", "a", 4);
  full.pod_sets[0].device.models = {"H100"};
  const int h100 = Submit(full);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(h100), Phase::kAdmitted);
  Workload w = Fraction("f", "a", 10, "a");
  w.pod_sets[0].device.gpu_memory = MemoryMib(41 * 1024);
  const int f = Submit(w, 2);
  EXPECT_EQ(adm_->gpu_milli(f), 512);  // (waiting: as on the H100)
  adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(f), Phase::kAdmitted) << adm_->reason(f);
  EXPECT_EQ(adm_->gpu_milli(f), 290);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 4290);
  // A memory-only share of the same: it waits as on the H100 and takes 290m of the H200, not
  // the 512m of an H100 (ClusterState::FractionMilli).
  Workload m = Fraction("m", "a", 0, "a");
  m.pod_sets[0].device.gpu_memory = MemoryMib(41 * 1024);
  const int mem = Submit(m, 4);
  EXPECT_EQ(adm_->gpu_milli(mem), 512);
  adm_->Cycle(5, 1000);
  ASSERT_EQ(adm_->phase(mem), Phase::kAdmitted) << adm_->reason(mem);
  EXPECT_EQ(adm_->gpu_milli(mem), 290);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 4580);
}

// A memory share is charged less on a larger GPU: where its quota refuses it as on the
// smallest GPU that holds it, it is admitted on one where it costs what the quota allows, and
// only what it could not be admitted on any is Unschedulable (a trial's three 10Gi shares were
// refused "asks for 1.251 GPUs" under a quota of 1, though on an H100 they cost 0.375).
TEST_F(AdmissionTest, AMemoryShareIsAdmittedWhereItCostsWhatItsQuotaAllows) {
  Fleet fleet = WithNodeOf(Nodes(1, 4), "l0", 4, "L4", 24);  // (and an 80Gi H100 node)
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("a", 1, /*borrowing=*/0)};
  MakeTree(fleet, config, {"a"});
  Workload w = Fraction("kv", "a", 0, "a");
  w.pod_sets[0].count = 3;
  w.pod_sets[0].device.gpu_memory = MemoryMib(10 * 1024);
  const int kv = Submit(w);
  EXPECT_EQ(adm_->gpu_milli(kv), 3 * 416);  // (waiting: as on the L4)
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(kv), Phase::kAdmitted) << adm_->reason(kv);
  EXPECT_EQ(adm_->gpu_milli(kv), 3 * 125);
  for (const Assignment& a : adm_->assignments(kv)) EXPECT_EQ(a.node, 0);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("a")), 375);
  // Three of 30Gi fit no L4 and cost 3 × 375m on an H100: never within 1 GPU.
  Workload big = Fraction("big", "a", 0, "a");
  big.pod_sets[0].count = 3;
  big.pod_sets[0].device.gpu_memory = MemoryMib(30 * 1024);
  const int b = Submit(big, 2);
  EXPECT_EQ(adm_->phase(b), Phase::kInfeasible);
  EXPECT_NE(adm_->reason(b).find("asks for 1.125 GPUs"), std::string::npos) << adm_->reason(b);
}

// Whether it could ever be admitted is asked flavour by flavour at what it costs on that
// flavour's GPUs: 10Gi costs 0.416 of an L4, past the L4 flavour's 0.3, and 0.125 of an H100,
// whose flavour this queue has none of: Unschedulable (a review: judged by its least cost on
// any GPU, 0.125 fitted the L4 quota and it waited for ever).
TEST_F(AdmissionTest, AMemoryShareIsJudgedByItsCostOnEachFlavoursGpus) {
  Fleet fleet = WithNodeOf(Nodes(1, 4), "l0", 4, "L4", 24);
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"l4", DeviceKind::kFraction, {"L4"}, {}},
                    FlavorSpec{"big", DeviceKind::kFraction, {"H100"}, {}}};
  QueueSpec a = Plain("a");
  a.quotas["l4"] = QuotaSpec{300, 0, {}};
  a.quotas["big"] = QuotaSpec{0, 0, {}};
  Make(fleet, {a}, {}, config);
  Workload w = Fraction("kv", "a", 0, "a");
  w.pod_sets[0].device.gpu_memory = MemoryMib(10 * 1024);
  const int kv = Submit(w);
  EXPECT_EQ(adm_->phase(kv), Phase::kInfeasible) << adm_->reason(kv);
  EXPECT_NE(adm_->reason(kv).find("asks for 0.416 GPUs; of l4, "), std::string::npos)
      << adm_->reason(kv);
}

// Narrowed by its quota to the GPUs it costs less on, a memory share takes back what another
// queue borrows there as it would at that cost (a trial's, held to H200s, waited behind
// borrowed work: reclaim weighed it as on an H100, past its guarantee).
TEST_F(AdmissionTest, AMemoryShareHeldToCheaperGpusReclaimsThere) {
  Fleet fleet = WithNodeOf(Nodes(1, 4), "m0", 4, "H200", 141);
  ASSERT_TRUE(ValidateFleet(fleet).ok());
  AdmissionConfig config;
  QueueSpec org{"org", "", 1, {}, -1};
  org.quotas["gpu"] = QuotaSpec{8000, std::nullopt, std::nullopt};  // (b borrows the rest)
  config.queues = {org, Leaf("a", 0.3, /*borrowing=*/0), Leaf("b", 0)};
  MakeTree(fleet, config, {"a", "b"});
  Workload fill = Gpus("fill", "b", 4, 0, 2, /*gang=*/false, "b");
  const int b = Submit(fill, 0);
  adm_->Cycle(1, 1000);
  ASSERT_EQ(adm_->phase(b), Phase::kAdmitted) << adm_->reason(b);
  Workload w = Fraction("kv", "a", 0, "a");
  w.pod_sets[0].count = 3;
  w.pod_sets[0].device.gpu_memory = MemoryMib(10 * 1024);
  const int kv = Submit(w, 100);
  EXPECT_EQ(adm_->gpu_milli(kv), 3 * 125);  // (waiting: as on an H100, past a's 0.3)
  CycleResult cr = adm_->Cycle(101, 1000);
  ASSERT_EQ(cr.evicted.size(), 1u) << adm_->reason(kv);
  EXPECT_EQ(cr.evicted[0].victim, b);
  EXPECT_EQ(adm_->gpu_milli(kv), 3 * 125) << "waiting, charged as before";
  adm_->Terminated(b, 131);
  adm_->Cycle(131, 1000);
  ASSERT_EQ(adm_->phase(kv), Phase::kAdmitted) << adm_->reason(kv);
  EXPECT_EQ(adm_->gpu_milli(kv), 3 * 70);
  for (const Assignment& a : adm_->assignments(kv)) EXPECT_EQ(a.node, 1);
}

// A tenant with exclusiveNodes is charged the nodes it keeps others off: five 1-GPU pods that
// each fill a node's memory count as the five nodes' 40 GPUs, past its queue's 8, and are
// refused saying so (a user-style trial: they kept 35 GPUs idle under a quota of 8).
TEST_F(AdmissionTest, ATenantWithExclusiveNodesIsChargedTheNodesItKeepsOthersOff) {
  fleet_ = Nodes(6, 8);
  AdmissionConfig config;
  config.queues = {QueueSpec{"org", "", 1, {}, -1}, Leaf("x", 8, /*borrowing=*/0)};
  std::vector<Tenant> tenants = Tenants({"x"}, TrustLevel::kUntrusted);
  tenants[0].exclusive_nodes = true;
  auto policy = MakePolicy("bestfit");
  ASSERT_TRUE(policy.ok());
  policy_ = std::move(*policy);
  auto a = Admitter::Create(fleet_, tenants, config, *policy_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  adm_ = std::move(*a);
  Workload hog = Gpus("hog", "x", 1, 0, 5);
  hog.pod_sets[0].memory = MemoryMib(400 * 1024);
  const int h = Submit(hog);
  EXPECT_EQ(adm_->phase(h), Phase::kInfeasible);
  EXPECT_EQ(adm_->reason(h).rfind("asks for 5 GPUs of compute, which count as 40 of quota; ", 0),
            0u)
      << adm_->reason(h);
  EXPECT_NE(adm_->reason(h).find("it counts as 40 GPUs of quota for the 5 of compute"),
            std::string::npos)
      << adm_->reason(h);
  const int small = Submit(Gpus("small", "x", 1));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(adm_->phase(small), Phase::kAdmitted) << adm_->reason(small);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("x")), 1000);
  // One that fills a node holds the queue's 8; the next is refused, saying why 1 GPU in use
  // counts as 8.
  adm_->Finish(small, 2);
  Workload one = Gpus("one", "x", 1);
  one.pod_sets[0].memory = MemoryMib(400 * 1024);
  const int o = Submit(one, 3);
  adm_->Cycle(3, 1000);
  ASSERT_EQ(adm_->phase(o), Phase::kAdmitted) << adm_->reason(o);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("x")), 8000);
  const int next = Submit(Gpus("next", "x", 1), 4);
  adm_->Cycle(4, 1000);
  EXPECT_EQ(adm_->phase(next), Phase::kPending);
  EXPECT_NE(adm_->reason(next).find("9/8 GPUs (tenant x's running work counts 8 GPUs of quota "
                                    "for the 1 its pods use: with exclusiveNodes"),
            std::string::npos)
      << adm_->reason(next);
  // A 3-GPU pod, two to an 8-GPU node, counts as 4 GPUs exactly, waiting and running (a trial
  // saw 3.999: the node's share was charged per GPU, rounded down).
  adm_->Finish(o, 5);
  const int three = Submit(Gpus("three", "x", 3), 6);
  adm_->Cycle(6, 1000);
  ASSERT_EQ(adm_->phase(three), Phase::kAdmitted) << adm_->reason(three);
  EXPECT_EQ(adm_->gpu_milli(three), 4000);
  EXPECT_EQ(adm_->usage_milli(adm_->QueueIndex("x")), 4000 + 1000);  // (and `next`, admitted)
}

TEST_F(AdmissionTest, FairShareFavoursTheLighterQueueAndWeights) {
  Make(Nodes(1, 4), {Plain("a"), Plain("b")});
  // a already runs two; both queue more: the free two go to b first.
  Submit(Gpus("a0", "a", 1));
  Submit(Gpus("a1", "a", 1));
  adm_->Cycle(1, 1000);
  std::vector<int> a, b;
  for (int i = 0; i < 3; ++i) a.push_back(Submit(Gpus("a" + std::to_string(i + 2), "a", 1), 2));
  for (int i = 0; i < 3; ++i) b.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 3));
  adm_->Cycle(4, 1000);
  EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 2);
  EXPECT_EQ(CountPhase(a, Phase::kAdmitted), 0);

  // Weight 3 against 1: of eight GPUs shared from empty, six go to the heavier queue.
  Make(Nodes(2, 4), {Plain("a", 3), Plain("b", 1)});
  std::vector<int> ha, lb;
  for (int i = 0; i < 8; ++i) ha.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1)));
  for (int i = 0; i < 8; ++i) lb.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1)));
  adm_->Cycle(1, 1000);
  EXPECT_EQ(CountPhase(ha, Phase::kAdmitted), 6);
  EXPECT_EQ(CountPhase(lb, Phase::kAdmitted), 2);
}

// The dominant share counts memory too: a queue whose one GPU holds 400Gi of the node's 512Gi
// is the heavier of the two, though it holds fewer GPUs (counted by GPUs and cores alone it
// was the lighter, and took the free GPUs first).
TEST_F(AdmissionTest, AQueueHoldingMostOfTheMemoryIsTheHeavierShare) {
  Make(Nodes(1, 8), {Plain("a"), Plain("b")});
  Workload big = Gpus("a-big", "a", 1);
  big.pod_sets[0].memory = MemoryMib(400 * 1024);
  Submit(big);
  Submit(Gpus("b0", "b", 1));
  Submit(Gpus("b1", "b", 1));
  adm_->Cycle(1, 1000);
  EXPECT_NEAR(adm_->dominant_share(adm_->QueueIndex("a")), 400.0 / 512, 1e-3);
  EXPECT_NEAR(adm_->dominant_share(adm_->QueueIndex("b")), 2.0 / 8, 1e-3);
  std::vector<int> a, b;
  for (int i = 0; i < 5; ++i) a.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1), 2));
  for (int i = 0; i < 5; ++i) b.push_back(Submit(Gpus("b" + std::to_string(i + 2), "b", 1), 2));
  adm_->Cycle(3, 1000);
  EXPECT_EQ(CountPhase(b, Phase::kAdmitted), 5);
  EXPECT_EQ(CountPhase(a, Phase::kAdmitted), 0);
}

TEST_F(AdmissionTest, UsageHistoryMakesYesterdaysHeavyUserYield) {
  AdmissionConfig c;
  c.usage_half_life_s = 3600;
  c.history_weight = 0.9;
  Make(Nodes(1, 4), {Plain("a"), Plain("b")}, {}, c);
  // a holds the whole node for ten hours, then lets go.
  std::vector<int> old;
  for (int i = 0; i < 4; ++i) old.push_back(Submit(Gpus("old" + std::to_string(i), "a", 1)));
  adm_->Cycle(0, 1000);
  for (int h = 1; h <= 10; ++h) adm_->Cycle(h * 3600.0, 1000);
  for (int id : old) adm_->Finish(id, 36000);
  // Both now ask for the whole node at the same moment; a's history puts b first.
  std::vector<int> a, b;
  for (int i = 0; i < 4; ++i) a.push_back(Submit(Gpus("a" + std::to_string(i), "a", 1), 36000));
  for (int i = 0; i < 4; ++i) b.push_back(Submit(Gpus("b" + std::to_string(i), "b", 1), 36000));
  adm_->Cycle(36001, 1000);
  EXPECT_GE(CountPhase(b, Phase::kAdmitted), 3);
  EXPECT_LE(CountPhase(a, Phase::kAdmitted), 1);
}

TEST_F(AdmissionTest, SubmitRejectsUnknownAndInnerQueues) {
  Make(Nodes(1, 4), {Leaf("a", 4)});
  auto unknown = adm_->Submit(Gpus("w", "nope", 1), 0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown queue \"nope\""), std::string::npos);
  auto inner = adm_->Submit(Gpus("w", "org", 1), 0);
  ASSERT_FALSE(inner.ok());
  EXPECT_NE(inner.status().message().find("has child queues"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Configuration files

Result<AdmissionConfig> ParseConfig(const std::string& yaml) {
  auto doc = LoadYaml(yaml, "queues.yaml");
  if (!doc.ok()) return doc.status();
  YamlMap m(*doc, "", "queues.yaml");
  return ParseAdmissionConfig(m);
}

Status ParseQueues(const std::string& yaml) { return ParseConfig(yaml).status(); }

TEST(AdmissionConfigTest, AcceptsAHierarchy) {
  Status s = ParseQueues(R"(
flavors:
  - {name: h100, kind: whole, models: [H100]}
  - {name: slices, kind: mig}
queues:
  - {name: org}
  - {name: team-a, parent: org, quotas: {h100: {guaranteed: 16, borrowingLimit: 8}}}
  - {name: proj-1, parent: team-a, weight: 2, quotas: {h100: {guaranteed: 8, lendingLimit: 4}}}
  - {name: proj-2, parent: team-a, queueingStrategy: StrictFIFO}
)");
  EXPECT_TRUE(s.ok()) << s.message();
  auto doc = LoadYaml("{name: q, queueingStrategy: StrictFIFO}", "q.yaml");
  ASSERT_TRUE(doc.ok());
  YamlMap m(*doc, "", "q.yaml");
  auto strict = ParseQueueSpec(m);
  ASSERT_TRUE(strict.ok()) << strict.status().message();
  EXPECT_TRUE(strict->strict_fifo);
  doc = LoadYaml("{name: q}", "q.yaml");
  ASSERT_TRUE(doc.ok());
  YamlMap plain(*doc, "", "q.yaml");
  auto defaults = ParseQueueSpec(plain);
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->strict_fifo);
  EXPECT_EQ(defaults->preemption.within_queue, PreemptionPolicy::Within::kLowerPriority);
  EXPECT_EQ(defaults->preemption.reclaim_within_cohort, PreemptionPolicy::Reclaim::kAny);
  EXPECT_EQ(defaults->preemption.borrow_within_cohort, PreemptionPolicy::Borrow::kNever);
  doc = LoadYaml(R"({name: q, preemption: {withinQueue: LowerOrNewerEqualPriority,
    reclaimWithinCohort: LowerPriority,
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: -5}}})",
                 "q.yaml");
  ASSERT_TRUE(doc.ok());
  YamlMap full(*doc, "", "q.yaml");
  auto set = ParseQueueSpec(full);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->preemption.within_queue, PreemptionPolicy::Within::kLowerOrNewerEqualPriority);
  EXPECT_EQ(set->preemption.reclaim_within_cohort, PreemptionPolicy::Reclaim::kLowerPriority);
  EXPECT_EQ(set->preemption.borrow_within_cohort, PreemptionPolicy::Borrow::kLowerPriority);
  EXPECT_EQ(set->preemption.borrow_max_priority, -5);
}

// Who may wait in a queue: its own tenant, anyone on the built-in unqueued, and the tenants a
// queue on its path lists ("*": all).
TEST(AdmissionConfigTest, TenantMayUseItsQueueOrOneThatListsIt) {
  std::map<std::string, QueueSpec> tree;
  tree["org"] = QueueSpec{"org", "", 1, {}, -1};
  tree["org"].tenants = {"ops"};
  tree["team-a"] = QueueSpec{"team-a", "org", 1, {}, -1};
  tree["pool"] = QueueSpec{"pool", "org", 1, {}, -1};
  tree["pool"].tenants = {"team-b"};
  tree["open"] = QueueSpec{"open", "", 1, {}, -1};
  tree["open"].tenants = {"*"};
  auto find = [&](const std::string& q) -> const QueueSpec* {
    auto it = tree.find(q);
    return it == tree.end() ? nullptr : &it->second;
  };
  EXPECT_TRUE(TenantMayUse("team-a", "team-a", find).ok());
  EXPECT_TRUE(TenantMayUse("team-b", "pool", find).ok());
  EXPECT_TRUE(TenantMayUse("ops", "team-a", find).ok());
  EXPECT_TRUE(TenantMayUse("anyone", "open", find).ok());
  EXPECT_TRUE(TenantMayUse("anyone", kUnqueuedQueue, find).ok());
  EXPECT_TRUE(TenantMayUse("anyone", "ghost", find).ok());  // admission says it is unknown
  Status no = TenantMayUse("team-b", "team-a", find);
  EXPECT_EQ(no.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(no.message().find("tenant team-b may not use queue team-a"), std::string::npos)
      << no.message();
  EXPECT_FALSE(TenantMayUse("team-a", "pool", find).ok());
}

// The server's flavours: stored ResourceFlavors, the most specific first (a request is charged
// to the first that takes it), then the built-in catch-all `gpu` unless one is stored by name.
TEST(AdmissionConfigTest, StoredFlavoursMostSpecificFirstThenTheBuiltIn) {
  auto flavor = [](const std::string& name, json spec) {
    return json{{"metadata", {{"name", name}}}, {"spec", spec}};
  };
  const json queue = {{"metadata", {{"name", "a"}}},
                      {"spec", {{"quotas", {{"h100", {{"guaranteed", 1}}}}}}}};
  const std::vector<json> stored = {
      flavor("any-whole", {{"kind", "whole"}}), flavor("h100", {{"models", {"H100"}}}),
      flavor("a-mig", {{"kind", "mig"}}), flavor("small-mig", {{"migProfiles", {"1g.10gb"}}}),
      flavor("a-hopper", {{"models", {"H100", "H200"}}})};
  auto tree = QueueTreeFromObjects({queue}, stored);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  std::vector<std::string> names;
  for (const FlavorSpec& f : tree->flavors) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"small-mig", "h100", "a-hopper", "a-mig", "any-whole",
                                             "gpu"}));

  // A stored `gpu` is the catch-all; none stored: the one built-in flavour.
  tree = QueueTreeFromObjects({queue}, {stored[1], flavor("gpu", {{"kind", "whole"}})});
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  ASSERT_EQ(tree->flavors.size(), 2u);
  EXPECT_EQ(tree->flavors[1].kind, DeviceKind::kWhole);
  EXPECT_TRUE(QueueTreeFromObjects({}, {}).value().flavors.empty());
  // A quota naming a flavour that is not stored makes the tree invalid, naming it.
  tree = QueueTreeFromObjects({queue}, {flavor("a100", {{"models", {"A100"}}})});
  ASSERT_FALSE(tree.ok());
  EXPECT_NE(tree.status().message().find("quotas.h100: unknown flavour"), std::string::npos)
      << tree.status().message();
  EXPECT_FALSE(FlavorFromObject(flavor("x", {{"kind", "tpu"}}), "body").ok());
}

TEST(AdmissionConfigTest, FlavorFungibilityIsParsedAndChecked) {
  auto doc = LoadYaml(
      "queues:\n  - {name: a, flavorFungibility: {whenCanBorrow: TryNextFlavor}}\n  - {name: b}\n",
      "queues.yaml");
  ASSERT_TRUE(doc.ok());
  YamlMap m(*doc, "", "queues.yaml");
  auto c = ParseAdmissionConfig(m);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->queues[0].when_can_borrow, QueueSpec::WhenCanBorrow::kTryNextFlavor);
  EXPECT_EQ(c->queues[1].when_can_borrow, QueueSpec::WhenCanBorrow::kBorrow);
  ExpectBad(ParseQueues("queues:\n  - {name: a, flavorFungibility: {whenCanBorrow: Maybe}}\n"),
            "queues[0].flavorFungibility.whenCanBorrow", "TryNextFlavor");
  ExpectBad(ParseQueues("queues:\n  - {name: a, flavorFungibility: {whenCanPreempt: Preempt}}\n"),
            "queues[0].flavorFungibility.whenCanPreempt", "unknown");
}

// A flavour's MIG profiles are checked as a workload's are (a trial's `5g.50gb` was taken, a
// flavour no workload could ever be charged to).
TEST(AdmissionConfigTest, AFlavoursMigProfilesMustBeOnesAGpuCanHave) {
  ExpectBad(ParseQueues("flavors:\n  - {name: m, kind: mig, migProfiles: [1g.10gb, 5g.50gb]}\n"
                        "queues:\n  - {name: a}\n"),
            "migProfiles", "takes 1, 2, 3, 4 or 7");
  AdmissionConfig config;
  config.flavors = {FlavorSpec{"m", DeviceKind::kMig, {}, {"3g.40gb", "banana"}}};
  QueueSpec a;
  a.name = "a";
  config.queues = {a};
  const Status st = ValidateAdmissionConfig(config);
  EXPECT_NE(st.message().find("flavors[0].migProfiles[1]: mig profile must look like"),
            std::string::npos)
      << st.message();
}

TEST(AdmissionConfigTest, CpuAndMemoryQuotasAreParsedInTheirUnits) {
  auto c = ParseConfig(
      "queues:\n  - {name: org, quotas: {cpu: {guaranteed: 64}, memory: {guaranteed: 1Ti}}}\n"
      "  - {name: a, parent: org, quotas: {cpu: {guaranteed: 500m, borrowingLimit: 2},\n"
      "     memory: {guaranteed: 512Gi}}}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->queues[1].quotas.at(kCpuQuota).guaranteed_milli, 500);
  EXPECT_EQ(c->queues[1].quotas.at(kCpuQuota).borrowing_limit_milli, 2000);
  EXPECT_EQ(c->queues[0].quotas.at(kMemoryQuota).guaranteed_milli, 1024 * 1024);
  ExpectBad(
      ParseQueues("queues:\n  - {name: a, quotas: {cpu: {guaranteed: 8, lendingLimit: 10}}}\n"),
      "queues[0].quotas.cpu.lendingLimit", "above the guarantee (10 > 8)");
  ExpectBad(ParseQueues("queues:\n  - {name: o, quotas: {memory: {guaranteed: 1Gi}}}\n"
                        "  - {name: a, parent: o, quotas: {memory: {guaranteed: 2Gi}}}\n"),
            "queues[0].quotas.memory.guaranteed", "children are guaranteed 2Gi, more than its 1Gi");
  ExpectBad(ParseQueues("flavors: [{name: cpu}]\nqueues:\n  - {name: a}\n"), "flavors[0].name",
            "reserved");
}

TEST(AdmissionConfigTest, ErrorsNameTheField) {
  ExpectBad(ParseQueues("queues:\n  - {name: a, parent: ghost}\n"), "queues[0].parent",
            "unknown queue \"ghost\"");
  ExpectBad(ParseQueues("queues:\n  - {name: a, parent: b}\n  - {name: b, parent: a}\n"),
            "queues[0].parent", "cycle");
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {gpu: {guaranteed: -4}}}\n"),
            "queues[0].quotas.gpu.guaranteed", "");
  // Past any fleet: refused, before the tree's sums could overflow (a user-style review's
  // 9223372036854775 GPUs wrapped below its parent's).
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {gpu: {guaranteed: 9223372036854775}}}\n"),
            "queues[0].quotas.gpu.guaranteed", "at most 1000000000 GPUs");
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {gpu: {borrowingLimit: 2000000000}}}\n"),
            "queues[0].quotas.gpu.borrowingLimit", "at most 1000000000 GPUs");
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {cpu: {guaranteed: 2000000000}}}\n"),
            "queues[0].quotas.cpu.guaranteed", "at most 1000000000 cores");
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {memory: {lendingLimit: 2048Pi}}}\n"),
            "queues[0].quotas.memory.lendingLimit", "");
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {memory: {guaranteed: 2000000Ti}}}\n"),
            "queues[0].quotas.memory.guaranteed", "at most 1Ei");
  EXPECT_TRUE(
      ParseQueues("queues:\n  - {name: a, quotas: {gpu: {borrowingLimit: 1000000000}}}\n").ok());
  ExpectBad(ParseQueues("queues:\n  - {name: a, quotas: {tpu: {guaranteed: 4}}}\n"),
            "queues[0].quotas.tpu", "unknown flavour \"tpu\" (the flavours are gpu, besides cpu");
  // Declared flavours keep the built-in catch-all, last, as the server's objects do (a trial's
  // scenario, the schema's example, was refused for a quota of gpu beside them).
  auto both = ParseConfig(
      "flavors: [{name: h100, models: [H100]}]\nqueues:\n  - {name: a, quotas: {h100: "
      "{guaranteed: 4}, gpu: {guaranteed: 2}}}\n");
  ASSERT_TRUE(both.ok()) << both.status().message();
  ASSERT_EQ(both->flavors.size(), 2u);
  EXPECT_EQ(both->flavors[1].name, "gpu");
  ExpectBad(ParseQueues("flavors: [{name: h100, models: [H100]}]\nqueues:\n  - {name: a, "
                        "quotas: {h200: {guaranteed: 4}}}\n"),
            "queues[0].quotas.h200", "(the flavours are gpu, h100, besides cpu and memory)");
  ExpectBad(ParseQueues("queues:\n  - {name: a, wieght: 2}\n"), "queues[0].wieght", "unknown");
  // Kueue's names are pointed to Fabrica's (a trial's `withinClusterQueue` got no hint).
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {withinClusterQueue: Never}}\n"),
            "queues[0].preemption.withinClusterQueue", "(did you mean withinQueue?)");
  ExpectBad(ParseQueues("queues:\n  - {name: a, cohort: org}\n"), "queues[0].cohort",
            "(did you mean parent?)");
  ExpectBad(ParseQueues("queues:\n  - {name: a, flavorOrder: [gpu, gpu]}\n"),
            "queues[0].flavorOrder", "'gpu' is listed twice");
  ExpectBad(ParseQueues("queues:\n  - {name: a, flavorOrder: [gpu, spot]}\n"),
            "queues[0].flavorOrder[1]", "unknown flavour \"spot\"");
  ExpectBad(ParseQueues("queues:\n  - {name: a, queueingStrategy: LIFO}\n"),
            "queues[0].queueingStrategy", "must be BestEffortFIFO or StrictFIFO");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {withinQueue: Sometimes}}\n"),
            "queues[0].preemption.withinQueue",
            "must be Never, LowerPriority or LowerOrNewerEqualPriority, got 'Sometimes'");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {reclaimWithinCohort: All}}\n"),
            "queues[0].preemption.reclaimWithinCohort", "must be Never, LowerPriority or Any");
  ExpectBad(
      ParseQueues("queues:\n  - {name: a, preemption: {borrowWithinCohort: {policy: Any}}}\n"),
      "queues[0].preemption.borrowWithinCohort.policy", "must be Never or LowerPriority");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {borrowWithinCohort: "
                        "{maxPriority: 3}}}\n"),
            "queues[0].preemption.borrowWithinCohort.maxPriority", "unknown");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {whithinQueue: Never}}\n"),
            "queues[0].preemption.whithinQueue", "unknown");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: Never}\n"), "queues[0].preemption", "");
  ExpectBad(ParseQueues("queues:\n  - {name: a, stopPolicy: Drain}\n"), "queues[0].stopPolicy",
            "must be None, Hold or HoldAndDrain, got 'Drain'");
  ExpectBad(ParseQueues("queues:\n  - {name: a, tenants: [team-a, Bad_Name]}\n"),
            "queues[0].tenants", "'Bad_Name'");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {reclaimWithinCohort: Never, "
                        "borrowWithinCohort: {policy: LowerPriority}}}\n"),
            "queues[0].preemption.borrowWithinCohort", "not Never");
  ExpectBad(ParseQueues("queues:\n  - {name: a, preemption: {borrowWithinCohort: "
                        "{maxPriorityThreshold: 3}}}\n"),
            "queues[0].preemption.borrowWithinCohort.maxPriorityThreshold",
            "only with policy LowerPriority");
  ExpectBad(ParseQueues("fairSharePreemption: true\nqueues:\n  - {name: a, preemption: "
                        "{borrowWithinCohort: {policy: LowerPriority}}}\n"),
            "queues[0].preemption.borrowWithinCohort", "not with fair-share preemption");
  ExpectBad(ParseQueues("queues:\n  - {name: p, quotas: {gpu: {guaranteed: 4}}}\n"
                        "  - {name: c, parent: p, quotas: {gpu: {guaranteed: 6}}}\n"),
            "queues[0].quotas.gpu.guaranteed", "children are guaranteed 6");
  // An inner queue that sets no guarantee is guaranteed its children's sum, at every depth: a
  // grandchild's guarantee counts against the grandparent (a user-style review found mid2's 6
  // accepted under top2's 2), and a root's against all below it.
  ExpectBad(ParseQueues("queues:\n  - {name: top2, quotas: {gpu: {guaranteed: 2}}}\n"
                        "  - {name: mid2, parent: top2}\n"
                        "  - {name: leaf2, parent: mid2, quotas: {gpu: {guaranteed: 6}}}\n"),
            "queues[0].quotas.gpu.guaranteed", "children are guaranteed 6, more than its 2");
  ExpectBad(ParseQueues("queues:\n  - {name: org, quotas: {gpu: {guaranteed: 20}}}\n"
                        "  - {name: research, parent: org}\n"
                        "  - {name: a, parent: research, quotas: {gpu: {guaranteed: 16}}}\n"
                        "  - {name: b, parent: research, quotas: {gpu: {guaranteed: 8}}}\n"
                        "  - {name: c, parent: org, quotas: {gpu: {guaranteed: 4}}}\n"),
            "queues[0].quotas.gpu.guaranteed", "children are guaranteed 28, more than its 20");
  // A lending limit above a guarantee that is the children's sum lends all of it: that sum moves
  // as children come and go (a user-style review found a tree that could be applied only in
  // three steps, and one left invalid by deleting a child).
  EXPECT_TRUE(ParseQueues("queues:\n  - {name: p, quotas: {gpu: {lendingLimit: 5}}}\n"
                          "  - {name: c, parent: p, quotas: {gpu: {guaranteed: 4}}}\n")
                  .ok());
}

// A quota entry that gives only limits keeps an inner queue's guarantee at its children's sum
// (a user-style review found `lendingLimit: 0` alone made it 0 and refused the tree); a leaf's
// is 0.
TEST(AdmissionConfigTest, AnEntryWithOnlyLimitsKeepsTheChildrensGuarantee) {
  auto c = ParseConfig(
      "queues:\n  - {name: research, quotas: {gpu: {lendingLimit: 0, borrowingLimit: 4}}}\n"
      "  - {name: a, parent: research, quotas: {gpu: {guaranteed: 8}}}\n"
      "  - {name: b, parent: research, quotas: {gpu: {guaranteed: 8}}}\n"
      "  - {name: solo, quotas: {gpu: {borrowingLimit: 2}}}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->queues[0].quotas.at("gpu").guaranteed_unset);
  EXPECT_FALSE(c->queues[1].quotas.at("gpu").guaranteed_unset);
  const Fleet fleet = Nodes(4, 8);
  auto policy = MakePolicy("fabrica");
  ASSERT_TRUE(policy.ok());
  auto made = Admitter::Create(fleet, {}, *c, **policy);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ((*made)->guaranteed_milli((*made)->QueueIndex("research")), 16000);
  EXPECT_EQ((*made)->guaranteed_milli((*made)->QueueIndex("solo")), 0);
}

// ---------------------------------------------------------------------------------------------
// Scenarios and the replay

const char* kSmallScenario = R"(
kind: Scenario
name: tiny
synthetic: {gpus: 64, migShare: 0, seed: 3, window: 3600}
load: 1.0
teams:
  - name: train
    share: 50
    workloads:
      - {pods: 1-2, cpu: 16, memory: 64Gi, devices: {gpus: 8}, gang: true, duration: 300-1800}
  - name: infer
    share: 30
    trust: trusted
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpuMilli: 250m}, duration: 60-600}
  - name: ext
    share: 20
    trust: untrusted
    workloads:
      - {pods: 1, cpu: 8, memory: 32Gi, devices: {gpus: 1}, duration: 60-900}
)";

TEST(ReplayTest, SharedFleetBeatsDedicatedAndFifoIsLessFair) {
  auto sc = sim::ParseScenario(kSmallScenario, "tiny.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_NEAR(sc->offered_load, 1.0, 0.1);
  auto dedicated = sim::RunReplay(*sc, "dedicated");
  auto fifo = sim::RunReplay(*sc, "fifo");
  auto fab = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(dedicated.ok() && fifo.ok() && fab.ok());
  EXPECT_GT(fab->utilization_pct, dedicated->utilization_pct);
  EXPECT_GT(fab->utilization_pct, 30);
  EXPECT_LE(fab->utilization_pct, 100.0 + 1e-9);
  EXPECT_EQ(fab->teams.size(), 3u);
  for (const auto& t : fab->teams) EXPECT_GT(t.workloads, 0) << t.name;
  EXPECT_GE(fab->jain_index, 0.0);
  EXPECT_LE(fab->jain_index, 1.0 + 1e-9);
}

// A share of GPU memory alone is GPU time: it counts toward the load by the compute its memory
// is of the fleet's mean GPU, and once placed toward utilization by what its GPU charges it (a
// trial's memory-only team drew without end, and a mixed one was measured as using nothing).
TEST(ReplayTest, MemoryOnlySharesCountAsTheComputeTheirGpuChargesThem) {
  const std::string text = R"(
kind: Scenario
name: memory
synthetic: {gpus: 64, migShare: 0, gb200Share: 0, h200Share: 0, seed: 3, window: 3600}
load: 0.5
teams:
  - name: a
    share: 100
    workloads: [{cpu: 4, memory: 16Gi, devices: {gpuMemory: 40Gi}, duration: 300-1200}]
)";
  auto sc = sim::ParseScenario(text, "memory.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_NEAR(sc->offered_load, 0.5, 0.05);  // (40Gi of an 80Gi H100: 500m each)
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->utilization_pct, 35);
  EXPECT_LT(r->utilization_pct, 55);
  ASSERT_EQ(r->teams.size(), 1u);
  ASSERT_FALSE(r->teams[0].waits_by_size.empty());
  EXPECT_EQ(r->teams[0].waits_by_size[0].gpus, "<1");
  EXPECT_EQ(r->teams[0].waits_by_size[0].workloads, r->teams[0].workloads);
}

// Dedicated hardware is split by guarantee over the GPU models together: two teams guaranteed
// half each get half the GPUs each (a trial: 40 and 24, each model's tie going to the first
// team), and a team guaranteed a sliver still gets a node.
TEST(ReplayTest, DedicatedSlicesFollowTheGuarantees) {
  const auto slices = [](const std::string& teams) {
    const std::string text =
        "kind: Scenario\nname: split\n"
        "synthetic: {gpus: 64, migShare: 0, gb200Share: 0, seed: 3, window: 3600}\n"
        "load: 0.5\nteams:\n" +
        teams;
    auto sc = sim::ParseScenario(text, "split.yaml", ".");
    EXPECT_TRUE(sc.ok()) << sc.status().message();
    std::vector<double> out;
    if (!sc.ok()) return out;
    auto r = sim::RunReplay(*sc, "dedicated");
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok())
      for (const auto& t : r->teams) out.push_back(t.guarantee_gpus);
    return out;
  };
  const std::string work = "    workloads: [{devices: {gpus: 1}, duration: 300-900}]\n";
  EXPECT_EQ(slices("  - name: busy\n    share: 100\n    guarantee: 32\n" + work +
                   "  - name: idle\n    share: 0\n    guarantee: 32\n" + work),
            (std::vector<double>{32, 32}));
  EXPECT_EQ(slices("  - name: a\n    share: 60\n    guarantee: 60\n" + work +
                   "  - name: b\n    share: 40\n    guarantee: 4\n" + work),
            (std::vector<double>{56, 8}));
}

// A review's scenario: explicit guarantees (so no MIG pool) on a fleet with MIG nodes, one team
// of MIG slices. fabrica ran (its root quota held the MIG GPUs back, and the guarantees were
// refused); dedicated gave the MIG team the MIG nodes (it got whole GPUs only); and work a
// policy can never start, though the whole fleet could, waits in the measures (it was left
// out, and Jain read 1.000).
TEST(ReplayTest, ExplicitGuaranteesOnAFleetWithMigNodes) {
  const auto scenario = [](const std::string& partner_gpus) {
    return "kind: Scenario\nname: mig\n"
           "synthetic: {gpus: 128, migShare: 0.5, gb200Share: 0, seed: 3, window: 3600}\n"
           "load: 0.5\nteams:\n"
           "  - name: partner\n    share: 20\n    guarantee: " +
           partner_gpus +
           "\n    workloads: [{cpu: 4, memory: 32Gi, devices: {mig: 1g.10gb}, duration: "
           "300-900}]\n"
           "  - name: train\n    share: 80\n    guarantee: 96\n"
           "    workloads: [{cpu: 16, memory: 128Gi, devices: {gpus: 1}, duration: 300-900}]\n";
  };
  auto sc = sim::ParseScenario(scenario("24"), "mig.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto fab = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(fab.ok()) << fab.status().message();
  EXPECT_GT(fab->teams[0].workloads, 0);
  EXPECT_EQ(fab->teams[0].policy_blocked, 0);
  auto ded = sim::RunReplay(*sc, "dedicated");
  ASSERT_TRUE(ded.ok()) << ded.status().message();
  EXPECT_EQ(ded->teams[0].policy_blocked, 0) << ded->teams[0].policy_blocked_reason;
  EXPECT_EQ(ded->teams[0].never_admitted, 0);
  // (Every MIG node, the only team with MIG work; none of the whole-GPU nodes.)
  EXPECT_EQ(ded->teams[1].policy_blocked, 0) << ded->teams[1].policy_blocked_reason;
  // A queue guaranteed nothing, with a borrowing limit of 0, never starts its work under
  // fabrica, though the fleet could: it waits to the end, counted in the waits and shares.
  sc = sim::ParseScenario(scenario("0\n    borrowingLimit: 0"), "mig.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  fab = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(fab.ok()) << fab.status().message();
  EXPECT_EQ(fab->teams[0].policy_blocked, fab->teams[0].workloads);
  EXPECT_EQ(fab->teams[0].infeasible, 0);
  EXPECT_GT(fab->teams[0].wait_mean_s, 0);
  EXPECT_LT(fab->jain_index, 0.9);
  EXPECT_NE(fab->teams[0].policy_blocked_reason.find("borrowing limit"), std::string::npos)
      << fab->teams[0].policy_blocked_reason;
}

// Teams that wait in one leaf share its guarantee in the measures too: held against the leaf's
// (a trial's teams a and b of a leaf of 16 were each held to 8, and a's waits while b held 9
// read as 30 guarantee-bound exceptions no scheduler could avoid without evicting b's work of
// the same queue and priority).
TEST(ReplayTest, TeamsOfOneLeafAreHeldToTheLeafsGuaranteeTogether) {
  auto sc = sim::ParseScenario(
      "kind: Scenario\nname: q\n"
      "synthetic: {gpus: 32, migShare: 0, gb200Share: 0, h200Share: 0, seed: 4, window: 3600}\n"
      "load: 1.2\nadmission:\n  queues:\n"
      "    - {name: org, quotas: {gpu: {guaranteed: 32}}}\n"
      "    - {name: shared, parent: org, tenants: [a, b], quotas: {gpu: {guaranteed: 16}}}\n"
      "    - {name: solo, parent: org, tenants: [c], quotas: {gpu: {guaranteed: 16}}}\n"
      "teams:\n"
      "  - {name: a, share: 25, queue: shared, workloads: [{cpu: 4, memory: 32Gi, devices: "
      "{gpus: 1}, duration: 300-900}]}\n"
      "  - {name: b, share: 25, queue: shared, workloads: [{cpu: 4, memory: 32Gi, devices: "
      "{gpus: 1}, duration: 300-900}]}\n"
      "  - {name: c, share: 50, queue: solo, workloads: [{cpu: 4, memory: 32Gi, devices: "
      "{gpus: 1}, duration: 300-900}]}\n",
      "q.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->bound.checked, 100);
  EXPECT_TRUE(r->bound.exceptions.empty()) << r->bound.exceptions[0].cause;
  // (Below the leaf's guarantee is one span for both: a and b read alike.)
  EXPECT_EQ(r->teams[0].below_guarantee_pending_s, r->teams[1].below_guarantee_pending_s);
  EXPECT_LT(r->teams[0].below_guarantee_pending_s, 600);
}

// Under dedicated, a team with a little MIG work still owns a MIG node while another team owns
// several (a trial's team of 16% of the MIG demand got none of three, and its slices never
// ran).
TEST(ReplayTest, DedicatedGivesEveryTeamWithMigWorkAMigNode) {
  auto sc = sim::ParseScenario(
      "kind: Scenario\nname: mig2\n"
      "synthetic: {gpus: 128, migShare: 0.5, gb200Share: 0, seed: 11, window: 3600}\n"
      "load: 0.8\nteams:\n"
      "  - name: big\n    share: 80\n    workloads:\n"
      "      - {weight: 1, cpu: 8, memory: 64Gi, devices: {mig: 3g.40gb}, duration: 300-900}\n"
      "      - {weight: 3, cpu: 8, memory: 64Gi, devices: {gpus: 1}, duration: 300-900}\n"
      "  - name: small\n    share: 20\n    workloads:\n"
      "      - {weight: 3, cpu: 8, memory: 64Gi, devices: {gpus: 1}, duration: 300-900}\n"
      "      - {weight: 1, cpu: 4, memory: 32Gi, devices: {mig: 1g.10gb}, duration: 300-900}\n",
      "mig2.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto ded = sim::RunReplay(*sc, "dedicated");
  ASSERT_TRUE(ded.ok()) << ded.status().message();
  for (const auto& t : ded->teams) {
    EXPECT_GT(t.workloads, 0) << t.name;
    EXPECT_EQ(t.policy_blocked, 0) << t.name << ": " << t.policy_blocked_reason;
    EXPECT_EQ(t.never_admitted, 0) << t.name;
  }
}

// A trial's scenarios with an explicit tree of a MIG flavour and a whole-GPU one: the MIG
// flavours' guarantee is a pool of its own in the measures (it read as owed to the team's
// whole-GPU work: 2541 s below guarantee, 38 bound exceptions), and one past the fleet's MIG
// GPUs is refused. Work whose memory or GPU memory no node has is infeasible, not
// policy-blocked (it was counted as waiting, and Jain read 0.5 under every policy).
TEST(ReplayTest, MigFlavoursAreAPoolOfTheirOwnAndWhatNoNodeHoldsIsInfeasible) {
  const auto scenario = [](int slices, const std::string& infer_work) {
    return "kind: Scenario\nname: r07\n"
           "synthetic: {gpus: 128, migShare: 0.5, gb200Share: 0, seed: 4, window: 3600}\n"
           "load: 1.0\nadmission:\n"
           "  flavors: [{name: slices, kind: mig}, {name: whole, kind: whole}]\n"
           "  queues:\n"
           "    - {name: org, quotas: {slices: {guaranteed: " +
           std::to_string(slices) + "}, whole: {guaranteed: " + std::to_string(128 - slices) +
           "}}}\n"
           "    - {name: train, parent: org, quotas: {whole: {guaranteed: " +
           std::to_string(128 - slices) +
           "}}}\n"
           "    - {name: infer, parent: org, quotas: {slices: {guaranteed: " +
           std::to_string(slices) +
           "}}}\n"
           "teams:\n"
           "  - {name: train, share: 70, workloads: [{cpu: 16, memory: 128Gi, devices: {gpus: "
           "1}, duration: 300-1800}]}\n"
           "  - {name: infer, share: 30, workloads: [{cpu: 4, memory: 32Gi, devices: {mig: "
           "1g.10gb}, duration: 300-1800}, " +
           infer_work + "]}\n";
  };
  const std::string whole = "{cpu: 4, memory: 32Gi, devices: {gpus: 1}, duration: 300-1800}";
  auto sc = sim::ParseScenario(scenario(24, whole), "r07.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->teams[1].below_guarantee_pending_s, 0);
  for (const auto& e : r->bound.exceptions) EXPECT_NE(e.team, "infer") << e.cause;
  ExpectBad(sim::ParseScenario(scenario(48, whole), "r06.yaml", ".").status(), "admission.queues",
            "guaranteed 48 GPUs of MIG flavours together, more than the fleet's 24 MIG GPUs");
  for (const char* huge : {"{cpu: 4, memory: 4Ti, devices: {gpus: 1}, duration: 300}",
                           "{cpu: 4, memory: 32Gi, devices: {gpuMilli: 250m, gpuMemory: 200Gi}, "
                           "duration: 300}"}) {
    SCOPED_TRACE(huge);
    sc = sim::ParseScenario(scenario(24, huge), "r02.yaml", ".");
    ASSERT_TRUE(sc.ok()) << sc.status().message();
    for (const char* policy : {"dedicated", "fabrica"}) {
      r = sim::RunReplay(*sc, policy);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_GT(r->teams[1].infeasible, 0) << policy;
      EXPECT_EQ(r->teams[1].policy_blocked, 0)
          << policy << ": " << r->teams[1].policy_blocked_reason;
    }
  }
}

// Work the policy keeps out (a dedicated slice of one 8-GPU node for a gang of two 8-GPU
// pods) counts in the below-guarantee-with-any-work-pending view: a trial's team held none of
// its GPUs the whole window with work waiting and read 0 there.
TEST(ReplayTest, PolicyBlockedWorkIsPendingInTheAnyPendingView) {
  auto sc = sim::ParseScenario(
      "kind: Scenario\nname: r03\n"
      "synthetic: {gpus: 64, migShare: 0, gb200Share: 0, seed: 9, window: 3600}\n"
      "load: 0.8\nteams:\n"
      "  - name: big\n    share: 80\n    guarantee: 56\n"
      "    workloads: [{cpu: 16, memory: 128Gi, devices: {gpus: 1}, duration: 300-1800}]\n"
      "  - name: tiny\n    share: 20\n    guarantee: 4\n"
      "    workloads: [{pods: 2, gang: true, cpu: 96, memory: 1Ti, devices: {gpus: 8}, "
      "duration: 600-1200}]\n",
      "r03.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto r = sim::RunReplay(*sc, "dedicated");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_GT(r->teams[1].policy_blocked, 0);
  EXPECT_GT(r->teams[1].below_guarantee_any_pending_s, 0.25 * r->window_s);  // (was 0)
}

// Computed guarantees count only work the fleet could ever run: a team whose work no node
// holds is guaranteed nothing (it was guaranteed room nobody could use).
TEST(ReplayTest, ComputedGuaranteesLeaveOutWorkNoNodeHolds) {
  auto sc = sim::ParseScenario(
      "kind: Scenario\nname: huge\n"
      "synthetic: {gpus: 64, migShare: 0, gb200Share: 0, seed: 3, window: 3600}\n"
      "load: 0.5\nteams:\n"
      "  - {name: a, share: 50, workloads: [{devices: {gpus: 1}, duration: 300-900}]}\n"
      "  - {name: b, share: 50, workloads: [{memory: 64Ti, devices: {gpus: 1}, duration: "
      "300-900}]}\n",
      "huge.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_GT(*sc->teams[0].guarantee_milli, 50000);
  EXPECT_EQ(*sc->teams[1].guarantee_milli, 0);
}

// The offered load is also given over the window the measures use (first to last arrival),
// which is shorter where arrivals stop early (a review read twice the load it was told).
TEST(ReplayTest, TheOfferedLoadIsMeasuredOverTheArrivalWindowToo) {
  auto sc = sim::ParseScenario(
      "kind: Scenario\nname: half\n"
      "synthetic: {gpus: 64, migShare: 0, gb200Share: 0, seed: 3, window: 7200}\n"
      "load: 0.4\nteams:\n"
      "  - name: a\n    share: 100\n    active: 0-0.5\n"
      "    workloads: [{devices: {gpus: 1}, duration: 300-900}]\n",
      "half.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto r = sim::RunReplay(*sc, "fifo");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->offered_load, 0.4, 0.05);
  EXPECT_LT(r->window_s, 0.6 * 7200);
  EXPECT_GT(r->offered_load_measured, 1.6 * r->offered_load);
}

// With a queue tree, the fairness measure weighs teams as the tree does, not by guarantee.
TEST(ReplayTest, AQueueTreesWeightsAreTheFairnessMeasuresWeights) {
  auto sc = sim::ParseScenario(
      "kind: Scenario\nname: tree\n"
      "synthetic: {gpus: 64, migShare: 0, gb200Share: 0, seed: 3, window: 3600}\n"
      "load: 0.5\n"
      "admission:\n  queues:\n"
      "    - {name: org, quotas: {gpu: {guaranteed: 64}}}\n"
      "    - {name: a, parent: org, weight: 3, quotas: {gpu: {guaranteed: 16}}}\n"
      "    - {name: b, parent: org, weight: 1, quotas: {gpu: {guaranteed: 16}}}\n"
      "teams:\n"
      "  - {name: a, share: 50, queue: a, workloads: [{devices: {gpus: 1}, duration: 300}]}\n"
      "  - {name: b, share: 50, queue: b, workloads: [{devices: {gpus: 1}, duration: 300}]}\n",
      "tree.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_DOUBLE_EQ(sc->teams[0].weight, 0.75);
  EXPECT_DOUBLE_EQ(sc->teams[1].weight, 0.25);
  // A queue no team uses takes nothing from its siblings (a review: a1 beside an unused a2
  // read half of a's).
  sc = sim::ParseScenario(
      "kind: Scenario\nname: tree\n"
      "synthetic: {gpus: 64, migShare: 0, gb200Share: 0, seed: 3, window: 3600}\n"
      "load: 0.5\n"
      "admission:\n  queues:\n"
      "    - {name: org, quotas: {gpu: {guaranteed: 64}}}\n"
      "    - {name: a, parent: org, quotas: {gpu: {guaranteed: 16}}}\n"
      "    - {name: a1, parent: a, tenants: [a], quotas: {gpu: {guaranteed: 8}}}\n"
      "    - {name: a2, parent: a, quotas: {gpu: {guaranteed: 8}}}\n"
      "    - {name: b, parent: org, quotas: {gpu: {guaranteed: 16}}}\n"
      "teams:\n"
      "  - {name: a, share: 50, queue: a1, workloads: [{devices: {gpus: 1}, duration: 300}]}\n"
      "  - {name: b, share: 50, queue: b, workloads: [{devices: {gpus: 1}, duration: 300}]}\n",
      "tree.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_DOUBLE_EQ(sc->teams[0].weight, 0.5);
  EXPECT_DOUBLE_EQ(sc->teams[1].weight, 0.5);
}

// An evicted workload runs again from the start, so what it had done was allocated but is done
// twice: useful utilization leaves that out. Without evictions the two are the same.
TEST(ReplayTest, UsefulUtilizationLeavesOutWorkEvictionsThrewAway) {
  auto sc = sim::ParseScenario(kSmallScenario, "tiny.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  for (const char* policy : {"dedicated", "fifo", "fabrica"}) {
    SCOPED_TRACE(policy);
    auto r = sim::RunReplay(*sc, policy);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const double capacity_s = 64.0 * r->window_s;
    if (r->preemptions == 0) {
      EXPECT_DOUBLE_EQ(r->useful_utilization_pct, r->utilization_pct);
      EXPECT_EQ(r->workloads_evicted, 0);
      EXPECT_EQ(r->evictions_max, 0);
      continue;
    }
    EXPECT_LT(r->useful_utilization_pct, r->utilization_pct);
    // How the evictions spread over workloads: each one evicted is counted once.
    EXPECT_GE(r->workloads_evicted, 1);
    EXPECT_LE(r->workloads_evicted, r->preemptions);
    EXPECT_GE(r->evictions_max * r->workloads_evicted, r->preemptions);
    EXPECT_LE(r->workloads_evicted_3plus, r->workloads_evicted);
    EXPECT_EQ(r->workloads_evicted_3plus > 0, r->evictions_max >= 3);
    double by_team = 0;
    for (const auto& t : r->teams) by_team += t.gpu_seconds_lost;
    EXPECT_NEAR(by_team, r->gpu_seconds_lost, 1e-6 * r->gpu_seconds_lost);
    // At most what the evictions lost, counted over the window only.
    EXPECT_GE(r->useful_utilization_pct,
              r->utilization_pct - 100.0 * r->gpu_seconds_lost / capacity_s - 1e-9);
  }
  auto fab = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(fab.ok());
  EXPECT_GT(fab->preemptions, 0) << "the scenario no longer evicts: the test checks nothing";
}

// A scenario on `gpus` GPUs of two teams: a, guaranteed 8 GPUs, drawing 8-GPU workloads, and
// b, whose settings and workloads `b` gives (YAML indented as a team's keys).
Result<sim::Scenario> TwoTeamScenario(const std::string& name, int gpus, const std::string& b,
                                      int a_guarantee = 8) {
  const std::string text =
      "kind: Scenario\nname: " + name + "\nsynthetic: {gpus: " + std::to_string(gpus) +
      ", migShare: 0, h200Share: 0, seed: 3, window: 3600}\nload: 0.5\nteams:\n"
      "  - name: a\n    share: 50\n    guarantee: " +
      std::to_string(a_guarantee) +
      "\n    workloads:\n"
      "      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 8}, duration: 100-200}\n"
      "  - name: b\n    share: 50" +
      b;
  return sim::ParseScenario(text, name + ".yaml", ".");
}

// One drawn workload of each of the two teams, as templates to reshape.
std::pair<sim::ReplayWorkload, sim::ReplayWorkload> TeamTemplates(const sim::Scenario& sc) {
  std::pair<sim::ReplayWorkload, sim::ReplayWorkload> out;
  for (const sim::ReplayWorkload& w : sc.workloads) (w.team == 0 ? out.first : out.second) = w;
  return out;
}

// A team's drawn workload reshaped: named, arriving at `at`, running `run` s on `gpus` GPUs.
sim::ReplayWorkload Shaped(sim::ReplayWorkload w, const std::string& name, double at, double run,
                           int gpus) {
  w.spec.name = WorkloadId(name);
  w.spec.pod_sets.at(0).device.gpus = gpus;
  w.arrival_s = at;
  w.duration_s = run;
  return w;
}

// A workload that checkpoints loses only the work since its last checkpoint when evicted, and
// its rerun resumes there: b's 8-GPU run (1,000 s, checkpoint every 100 s) is reclaimed by a at
// t = 250 and stops ~30 s later; with checkpoints 200 s of it are kept — 1,600 GPU·s fewer
// lost, and 200 s x 8 GPUs less to run again (10 points of the 2,000 s window).
TEST(ReplayTest, CheckpointsLimitTheWorkAnEvictionLoses) {
  auto sc = TwoTeamScenario("checkpoints", 8, R"(
    guarantee: 0
    checkpointInterval: 100
    flavorFungibility: {whenCanBorrow: TryNextFlavor}  # one flavour: nothing to try first
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 8}, duration: 100-200}
)");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto [a_tpl, b_tpl] = TeamTemplates(*sc);
  ASSERT_EQ(b_tpl.options.checkpoint_interval_s, 100);  // the team's setting
  ASSERT_EQ(a_tpl.options.checkpoint_interval_s, 0);
  EXPECT_EQ(sc->teams[1].when_can_borrow, QueueSpec::WhenCanBorrow::kTryNextFlavor);
  std::map<double, sim::ReplayResult> by_interval;
  for (double every : {0.0, 100.0}) {
    b_tpl.options.checkpoint_interval_s = every;
    sc->workloads = {Shaped(b_tpl, "b-long", 0, 1000, 8), Shaped(a_tpl, "a-reclaims", 250, 100, 8),
                     Shaped(a_tpl, "a-last", 2000, 10, 1)};
    auto r = sim::RunReplay(*sc, "fabrica");
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->preemptions, 1);
    EXPECT_EQ(r->workloads_evicted, 1);
    EXPECT_EQ(r->evictions_max, 1);
    by_interval[every] = *r;
  }
  const sim::ReplayResult &none = by_interval[0], &every = by_interval[100];
  EXPECT_GT(none.gpu_seconds_lost, 250 * 8);
  EXPECT_NEAR(none.gpu_seconds_lost - every.gpu_seconds_lost, 200 * 8, 1e-6);
  EXPECT_NEAR(none.utilization_pct - every.utilization_pct, 10, 1e-6);
  EXPECT_LT(every.utilization_pct - every.useful_utilization_pct,
            none.utilization_pct - none.useful_utilization_pct);
}

// Partial admission in the replay: b's elastic gang of two 8-GPU pods (minPods 1) may hold 8
// GPUs (no borrowing) while a's blocker holds the other 8, so it starts with 1 pod at once and
// runs twice as long (the same work), instead of waiting ~1,000 s.
TEST(ReplayTest, ElasticGangsStartSmallAndRunLonger) {
  auto sc = TwoTeamScenario("elastic", 16, R"(
    guarantee: 8
    borrowingLimit: 0
    workloads:
      - {pods: 2, minPods: 1, gang: true, cpu: 4, memory: 16Gi, devices: {gpus: 8},
         duration: 100-200}
)");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto [a_tpl, b_tpl] = TeamTemplates(*sc);
  ASSERT_EQ(b_tpl.spec.pod_sets[0].min_count, 1);
  // a-next, arriving at 150, finds no room until the elastic run ends at ~210 (not at 110).
  sc->workloads = {Shaped(a_tpl, "a-blocker", 0, 1000, 8), Shaped(b_tpl, "b-elastic", 10, 100, 8),
                   Shaped(a_tpl, "a-next", 150, 100, 8), Shaped(a_tpl, "a-last", 2000, 10, 1)};
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->partial_admissions, 1);
  EXPECT_LT(r->teams[1].wait_mean_s, 5);
  EXPECT_NEAR(r->teams[0].wait_mean_s, 60.0 / 3, 3);  // a-next waits ~60 s of a's 3 waits
  // By size: the two 8-GPU workloads wait 0 and ~60 s, the 1-GPU one not at all.
  const auto& sizes = r->teams[0].waits_by_size;
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[0].gpus, "1");
  EXPECT_EQ(sizes[0].workloads, 1);
  EXPECT_LT(sizes[0].wait_p95_s, 2);
  EXPECT_EQ(sizes[1].gpus, "2-8");
  EXPECT_EQ(sizes[1].workloads, 2);
  EXPECT_NEAR(sizes[1].wait_mean_s, 60.0 / 2, 3);
  EXPECT_NEAR(sizes[1].wait_p95_s, 60, 5);
  // 8 GPUs for 1,000 s, 8 for 200 s (half the gang, twice as long), 8 for 100 s and 1 for 10 s
  // over 2,000 s of 16 GPUs.
  EXPECT_NEAR(r->utilization_pct, 100.0 * (8000 + 1600 + 800 + 10) / (16 * 2000), 0.2);
}

// Elastic growth in the replay: b's elastic gang (two 8-GPU pods, 200 s at full size) starts
// with one pod at t = 10 (b's filler holds the rest of its guarantee) and takes the second when
// the filler ends at 100: 45 s of its work done by then, it finishes at 255 rather than 410.
TEST(ReplayTest, ElasticGangsGrowWhenRoomFrees) {
  for (bool grow : {true, false}) {
    SCOPED_TRACE(grow ? "elasticGrowth" : "off");
    auto sc = TwoTeamScenario("grow", 24, R"(
    guarantee: 16
    workloads:
      - {pods: 2, minPods: 1, gang: true, cpu: 4, memory: 16Gi, devices: {gpus: 8},
         duration: 100-200}
)");
    ASSERT_TRUE(sc.ok()) << sc.status().message();
    sc->admission.elastic_growth = grow;
    auto [a_tpl, b_tpl] = TeamTemplates(*sc);
    sim::ReplayWorkload filler = Shaped(b_tpl, "b-filler", 0, 100, 8);
    filler.spec.pod_sets[0].count = 1;
    filler.spec.pod_sets[0].min_count = 0;
    sc->workloads = {Shaped(a_tpl, "a-blocker", 0, 1000, 8), filler,
                     Shaped(b_tpl, "b-elastic", 10, 200, 8), Shaped(a_tpl, "a-last", 300, 10, 1)};
    auto r = sim::RunReplay(*sc, "fabrica");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->partial_admissions, 1);
    EXPECT_EQ(r->elastic_growths, grow ? 1 : 0);
    // Over the 300 s window of 24 GPUs: a-blocker 8 x 300, the filler 8 x 100, and the elastic
    // gang 8 x 90 then 16 x 155 grown (8 x 290 not).
    const double gpu_s = 2400 + 800 + (grow ? 720 + 2480 : 2320);
    EXPECT_NEAR(r->utilization_pct, 100.0 * gpu_s / (24 * 300), 0.5);
  }
}

// Elastic shrink in the replay: b's elastic gang (three 8-GPU pods, one needed, 1,000 s at
// full size) borrows a's idle 8 GPUs at t = 0; a's 8-GPU run arrives at 100. Shrunk by a pod,
// the gang runs on at two thirds of its pace (no work lost) and a starts after the grace
// period. Off, the gang is evicted whole (bigger than b's guarantee of 16, it runs on
// borrowed GPUs) and its 100 s of work are lost; a starts after the grace period too.
TEST(ReplayTest, ElasticShrinkLetsAReclaimTakePodsNotTheRun) {
  for (bool shrink : {true, false}) {
    SCOPED_TRACE(shrink ? "elasticShrink" : "off");
    auto sc = TwoTeamScenario("shrink", 24, R"(
    guarantee: 16
    workloads:
      - {pods: 3, minPods: 1, gang: true, cpu: 4, memory: 16Gi, devices: {gpus: 8},
         duration: 100-200}
)");
    ASSERT_TRUE(sc.ok()) << sc.status().message();
    sc->admission.elastic_shrink = shrink;
    auto [a_tpl, b_tpl] = TeamTemplates(*sc);
    sc->workloads = {Shaped(b_tpl, "b-elastic", 0, 1000, 8), Shaped(a_tpl, "a-run", 100, 100, 8),
                     Shaped(a_tpl, "a-last", 3000, 10, 1)};
    auto r = sim::RunReplay(*sc, "fabrica");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->preemptions, shrink ? 0 : 1);
    EXPECT_EQ(r->gpu_seconds_lost > 0, !shrink);
    EXPECT_EQ(r->elastic_shrinks, shrink ? 1 : 0);
    EXPECT_EQ(r->elastic_shrink_pods, shrink ? 1 : 0);
    // a-run waits the grace period (and a cycle) either way.
    EXPECT_LT(r->teams[0].wait_mean_s, 40 / 2.0);
    // Shrunk, the gang runs 100 s at 24 GPUs, then 900 s of its work at 2/3 pace (1,350 s) on
    // 16: it ends at 1,450 (its third pod's 8 GPUs held through the 30 s grace).
    if (shrink) {
      const double gpu_s = 24 * 100 + 8 * 30 + 16 * 1350 + 8 * 100 + 10;
      EXPECT_NEAR(r->utilization_pct, 100.0 * gpu_s / (24 * 3000), 0.3);
    }
  }
}

// The guarantee bound's causes: b, below its guarantee, waits for a 1-GPU pod while a holds
// exactly its guarantee (8 GPUs) and every core of both nodes, so there is nothing b may take
// back; the exception says so ("nothing to reclaim") rather than blame victims or room.
TEST(ReplayTest, BoundExceptionsNameNothingToReclaim) {
  auto sc = TwoTeamScenario("nothing", 16, R"(
    guarantee: 8
    workloads:
      - {pods: 1, cpu: 1, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
)");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  auto [a_tpl, b_tpl] = TeamTemplates(*sc);
  const MilliCpu cores = sc->fleet.nodes.at(0).cpu;
  sim::ReplayWorkload hog0 = Shaped(a_tpl, "a-hog-0", 0, 1000, 4);
  hog0.spec.pod_sets[0].cpu = cores;
  sim::ReplayWorkload hog1 = hog0;
  hog1.spec.name = WorkloadId("a-hog-1");
  sc->workloads = {hog0, hog1, Shaped(b_tpl, "b-small", 10, 100, 1),
                   Shaped(a_tpl, "a-last", 2000, 10, 1)};
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->bound.exceptions.size(), 1u);
  const sim::BoundException& e = r->bound.exceptions[0];
  EXPECT_EQ(e.workload, "b-small");
  EXPECT_EQ(e.kind, "nothing to reclaim") << e.cause;
  EXPECT_NEAR(e.wait_s, 990, 2);
  EXPECT_NE(e.cause.find("nothing to reclaim"), std::string::npos) << e.cause;
  EXPECT_EQ(r->preemptions, 0);
}

// cpuGuarantees: the generated queues guarantee the pods' CPU too, each team its CPU demand's
// share of guaranteeShare of the fleet's cores; with a scenario's own queues it is refused.
TEST(ReplayTest, CpuGuaranteesFollowCpuDemand) {
  const std::string text = R"(
kind: Scenario
name: cpu-guarantees
synthetic: {gpus: 16, migShare: 0, h200Share: 0, seed: 3, window: 3600}
load: 0.5
guaranteeShare: 0.9
cpuGuarantees: true
teams:
  - name: a
    share: 50
    workloads:
      - {pods: 1, cpu: 24, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
  - name: b
    share: 50
    workloads:
      - {pods: 1, cpu: 8, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
)";
  auto sc = sim::ParseScenario(text, "cpu-guarantees.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  int64_t cores = 0;
  for (const Node& n : sc->fleet.nodes) cores += n.cpu.value();
  const int64_t a = sc->teams[0].cpu_guarantee_milli, b = sc->teams[1].cpu_guarantee_milli;
  EXPECT_NEAR(static_cast<double>(a + b), 0.9 * static_cast<double>(cores), 2.0);
  EXPECT_GT(a, 2 * b);  // a asks three times b's cores per GPU
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string own = text + "admission:\n  queues: [{name: a}, {name: b}]\n";
  auto bad = sim::ParseScenario(own, "cpu-guarantees.yaml", ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpuGuarantees: only for generated queues"),
            std::string::npos)
      << bad.status().message();
}

// A scenario's own queues may limit CPU and memory; a team's guarantee (what the bound and the
// dedicated split count) is its leaf's GPUs only.
TEST(ReplayTest, CpuAndMemoryQuotasAreNotGpuGuarantees) {
  const std::string text = R"(
kind: Scenario
name: cpu
synthetic: {gpus: 16, migShare: 0, h200Share: 0, seed: 3, window: 3600}
load: 0.5
admission:
  queues:
    - {name: org}
    - {name: a, parent: org, quotas: {gpu: {guaranteed: 4}, cpu: {guaranteed: 64},
                                      memory: {guaranteed: 512Gi}}}
    - {name: b, parent: org, quotas: {gpu: {guaranteed: 12}}}
teams:
  - name: a
    share: 50
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
  - name: b
    share: 50
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
)";
  auto sc = sim::ParseScenario(text, "cpu.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_EQ(sc->teams[0].guarantee_milli, 4000);
  EXPECT_EQ(sc->teams[1].guarantee_milli, 12000);
  auto r = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(r.ok()) << r.status().message();
}

// MIG-partitioned GPUs only take MIG slices, so they are a pool of their own: a team's computed
// guarantee is split by its demand in each pool, queues get a `mig` flavour, and the guarantees
// split only `guaranteeShare` of each pool.
TEST(ReplayTest, MigGpusAreAPoolOfTheirOwn) {
  const std::string text = R"(
kind: Scenario
name: pools
synthetic: {gpus: 128, migShare: 0.5, h200Share: 0, seed: 3, window: 3600}
load: 0.8
guaranteeShare: 0.9
teams:
  - name: whole
    share: 60
    workloads:
      - {pods: 1, cpu: 8, memory: 32Gi, devices: {gpus: 1}, duration: 60-900}
  - name: slices
    share: 40
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {mig: 1g.10gb}, duration: 60-900}
)";
  auto sc = sim::ParseScenario(text, "pools.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  ASSERT_TRUE(sc->mig_pool);
  double mig_gpus = 0;
  for (const Node& n : sc->fleet.nodes)
    for (const Device& d : n.devices) mig_gpus += d.mig_enabled();
  ASSERT_GT(mig_gpus, 0);
  const double all_gpus = static_cast<double>(sc->fleet.total_gpus());
  const sim::TeamSpec& whole = sc->teams[0];
  const sim::TeamSpec& slices = sc->teams[1];
  EXPECT_EQ(whole.mig_guarantee_milli, 0);
  EXPECT_EQ(*slices.guarantee_milli, slices.mig_guarantee_milli);  // all its demand is MIG
  EXPECT_NEAR(static_cast<double>(slices.mig_guarantee_milli), 900 * mig_gpus, 1000);
  EXPECT_NEAR(static_cast<double>(*whole.guarantee_milli), 900 * (all_gpus - mig_gpus), 1000);

  auto fab = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(fab.ok()) << fab.status().message();
  EXPECT_GT(fab->bound.checked, 0);
}

// The guarantee bound reads "pending work that fits its guarantee" in queue order: a team with
// 4 GPUs of guarantee and a 4-GPU workload queued before a 1-GPU one has only the first within
// its guarantee; checked alone, both fit. The other team fills the fleet and its disruption
// budget of 1 lets its one-GPU runs go one at a time, so the first waits four grace periods
// and the second, borrowing once the first runs, until the other team's runs end.
TEST(ReplayTest, GuaranteeBoundCountsTheTeamsPendingWorkInQueueOrder) {
  const std::string text = R"(
kind: Scenario
name: order
synthetic: {gpus: 8, migShare: 0, h200Share: 0, seed: 3, window: 3600}
load: 0.5
teams:
  - name: a
    share: 50
    guarantee: 4
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 4}, duration: 100-200}
  - name: b
    share: 50
    guarantee: 0
    disruptionBudget: 1
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
)";
  auto sc = sim::ParseScenario(text, "order.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  ASSERT_EQ(sc->fleet.total_gpus(), 8);
  sim::ReplayWorkload a_tpl, b_tpl;
  for (const sim::ReplayWorkload& w : sc->workloads) (w.team == 0 ? a_tpl : b_tpl) = w;
  ASSERT_EQ(a_tpl.spec.pod_sets.at(0).device.gpus, 4);
  std::vector<sim::ReplayWorkload> list;
  for (int i = 0; i < 8; ++i) list.push_back(Shaped(b_tpl, "b-" + std::to_string(i), 0, 1000, 1));
  list.push_back(Shaped(a_tpl, "a-big", 10, 100, 4));
  list.push_back(Shaped(a_tpl, "a-small", 11, 100, 1));
  sc->workloads = list;
  auto fab = sim::RunReplay(*sc, "fabrica");
  ASSERT_TRUE(fab.ok()) << fab.status().message();
  ASSERT_EQ(fab->bound.exceptions.size(), 1u);
  EXPECT_EQ(fab->bound.exceptions[0].workload, "a-big");
  EXPECT_EQ(fab->bound.exceptions[0].kind, "disruption budget");
  EXPECT_GT(fab->bound.worst_excess_s, 60);
  EXPECT_LT(fab->bound.worst_excess_s, 200);
  EXPECT_EQ(fab->bound_alone.exceptions.size(), 2u);
}

// Time below guarantee: team a (guaranteed 4 of 8 GPUs) holds nothing from 0 while b's eight
// 1,000 s runs fill the fleet (fifo: nothing is reclaimed). Its 6-GPU workload waits from 20,
// its 1-GPU one from 500, both until 1,000: below its guarantee with work pending that fits the
// difference from 500 (the 6 GPUs never fit in 4), with any work pending from 20.
TEST(ReplayTest, TimeBelowGuaranteeCountsPendingWorkThatFitsAndAnyPendingWork) {
  auto sc = TwoTeamScenario("below", 8, R"(
    guarantee: 0
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
)",
                            /*a_guarantee=*/4);
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  const auto [a_tpl, b_tpl] = TeamTemplates(*sc);
  std::vector<sim::ReplayWorkload> list;
  for (int i = 0; i < 8; ++i) list.push_back(Shaped(b_tpl, "b-" + std::to_string(i), 0, 1000, 1));
  list.push_back(Shaped(a_tpl, "a-huge", 20, 100, 6));
  list.push_back(Shaped(a_tpl, "a-one", 500, 100, 1));
  list.push_back(Shaped(b_tpl, "b-late", 2000, 10, 1));  // (the window ends at the last arrival)
  sc->workloads = list;
  auto fifo = sim::RunReplay(*sc, "fifo");
  ASSERT_TRUE(fifo.ok()) << fifo.status().message();
  const sim::TeamResult& a = fifo->teams.at(0);
  EXPECT_NEAR(a.below_guarantee_pending_s, 500, 2);
  EXPECT_NEAR(a.below_guarantee_any_pending_s, 980, 2);
  const sim::TeamResult& b = fifo->teams.at(1);  // (guaranteed nothing: never below it)
  EXPECT_EQ(b.below_guarantee_pending_s, 0);
  EXPECT_EQ(b.below_guarantee_any_pending_s, 0);
}

// Work no fleet could ever run (a 16-GPU pod on 8-GPU nodes) is counted and said, not left
// out without a word (a user-style trial saw a team get nothing at Jain 1.000).
TEST(ReplayTest, WorkThatCanNeverRunIsCountedAndSaid) {
  auto sc = sim::ParseScenario(kSmallScenario, "tiny.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  sim::ReplayWorkload tpl;
  for (const sim::ReplayWorkload& w : sc->workloads)
    if (w.team == 2) tpl = w;
  std::vector<sim::ReplayWorkload> list = {
      Shaped(tpl, "huge-1", 0, 100, 16), Shaped(tpl, "huge-2", 10, 100, 16),
      Shaped(tpl, "fits", 20, 100, 1), Shaped(tpl, "ext-fits", 30, 100, 1)};
  list[2].team = 1;
  sc->workloads = list;
  auto fifo = sim::RunReplay(*sc, "fifo");
  ASSERT_TRUE(fifo.ok()) << fifo.status().message();
  EXPECT_EQ(fifo->teams.at(2).infeasible, 2);
  EXPECT_EQ(fifo->teams.at(2).never_admitted, 2);
  // Its waits are its runnable work's: the work that never runs waits for nothing (a trial's
  // team read the time to the replay's end, which differs by policy).
  EXPECT_EQ(fifo->teams.at(2).workloads, 3);
  EXPECT_LT(fifo->teams.at(2).wait_mean_s, 5);
  EXPECT_NE(fifo->teams.at(2).infeasible_reason.find("16 GPUs"), std::string::npos)
      << fifo->teams.at(2).infeasible_reason;
  EXPECT_EQ(fifo->teams.at(1).infeasible, 0);
  std::ostringstream table;
  sim::PrintReplayTable({*fifo}, table);
  EXPECT_NE(table.str().find("ext: 2 workload(s) can never run as they ask"), std::string::npos)
      << table.str();
}

// Under dedicated, a team that owns no node (two nodes, three teams) is said to, and its work
// waits to the end, in its waits and its fair share: not left out as work no fleet could run
// (a trial's node-less team was told "no node has 1 CPU cores", and Jain read 1.000).
TEST(ReplayTest, UnderDedicatedATeamWithoutANodeWaitsAndSaysWhy) {
  auto sc = sim::ParseScenario(kSmallScenario, "tiny.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  ASSERT_GE(sc->fleet.nodes.size(), 2u);
  sc->fleet.nodes.resize(2);
  std::vector<sim::ReplayWorkload> list;
  for (int team = 0; team < 3; ++team)
    for (const sim::ReplayWorkload& w : sc->workloads)
      if (w.team == team) {
        list.push_back(Shaped(w, "w" + std::to_string(team), 0, 100, 1));
        break;
      }
  ASSERT_EQ(list.size(), 3u);
  list.push_back(Shaped(list[0], "late", 100, 10, 1));  // (the window ends at the last arrival)
  sc->workloads = list;
  auto r = sim::RunReplay(*sc, "dedicated");
  ASSERT_TRUE(r.ok()) << r.status().message();
  int without = -1;
  for (int i = 0; i < 3; ++i)
    if (!r->teams.at(i).no_slice.empty()) without = i;
  ASSERT_GE(without, 0);
  const sim::TeamResult& t = r->teams.at(without);
  EXPECT_NE(t.no_slice.find("owns no node"), std::string::npos) << t.no_slice;
  EXPECT_EQ(t.infeasible, 0);
  EXPECT_EQ(t.never_admitted, 1);
  EXPECT_GT(t.wait_mean_s, 50);
  EXPECT_LT(r->jain_index, 0.99);
}

// Trace pods that ran for no time are counted apart from those that never started (a trial's
// read as never started).
TEST(ReplayTest, TracePodsThatRanForNoTimeAreCountedApart) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("zero-pods-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\n"
                                      "openb-node-0000,64000,262144,4,V100M32\n";
  std::ofstream(dir / "pods.csv")
      << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
         "deletion_time,scheduled_time\n"
         "openb-pod-0000,1000,1024,1,1000,,LS,Running,0,600,0\n"
         "openb-pod-0001,1000,1024,1,1000,,LS,Running,10,700,10\n"
         "openb-pod-0002,1000,1024,1,1000,,LS,Pending,20,30,\n"
         "openb-pod-0003,1000,1024,1,1000,,LS,Running,30,30,30\n";
  auto sc = sim::ParseScenario("kind: Scenario\nname: zero\ntrace: {dir: " + dir.string() +
                                   ", nodes: nodes.csv, pods: pods.csv}\nwindow: 600\n"
                                   "teamBlock: 1\nteams:\n  - {name: a, share: 100}\n",
                               "zero.yaml", ".");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_EQ(sc->left_out, 1);
  EXPECT_EQ(sc->left_out_zero, 1);
}

// The table says where the load that ran is not the load asked (a trial read the header's).
TEST(ReplayTest, TheTableSaysWhereTheOfferedLoadIsNotTheOneAsked) {
  sim::ReplayResult r;
  r.load = 0.5;
  r.offered_load = 0.9;
  std::ostringstream far;
  sim::PrintReplayTable({r}, far);
  EXPECT_NE(far.str().find("note: the offered load is 0.900, not the 0.500 asked"),
            std::string::npos)
      << far.str();
  // (A drawn scenario's says why as its own: it has no trace copies.)
  r.synthetic = true;
  std::ostringstream drawn;
  sim::PrintReplayTable({r}, drawn);
  EXPECT_NE(drawn.str().find("not the 0.500 asked: each team's draw ends past its part of the load "
                             "by its last workload"),
            std::string::npos)
      << drawn.str();
  r.offered_load = 0.52;
  std::ostringstream near;
  sim::PrintReplayTable({r}, near);
  EXPECT_EQ(near.str().find("note: the offered load"), std::string::npos) << near.str();
  // A team of no workloads (share 0) says so in the waits by size (its line was blank).
  r.teams.emplace_back().name = "idle";
  std::ostringstream idle;
  sim::PrintReplayTable({r}, idle);
  EXPECT_NE(idle.str().find("idle          (no workloads)"), std::string::npos) << idle.str();
}

// A team's share is its dominant one, as DRF's: of GPUs, CPU and memory, the largest. Team a's
// one-GPU workload holding half the fleet's memory all window has a share of a half (not the
// eighth its GPU is); b's one GPU with little memory has its eighth.
TEST(ReplayTest, AShareIsTheDominantOneOfGpusCpuAndMemory) {
  auto sc = TwoTeamScenario("drf", 8, R"(
    workloads:
      - {pods: 1, cpu: 1, memory: 1Gi, devices: {gpus: 1}, duration: 100-200}
)");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  int64_t memory = 0, largest = 0;
  for (const Node& n : sc->fleet.nodes) {
    memory += n.memory.value();
    largest = std::max(largest, n.memory.value());
  }
  const auto [a_tpl, b_tpl] = TeamTemplates(*sc);
  sim::ReplayWorkload heavy = Shaped(a_tpl, "a-heavy", 0, 5000, 1);
  heavy.spec.pod_sets.at(0).memory = MemoryMib(std::min(largest, memory / 2));
  const double heavy_share = static_cast<double>(std::min(largest, memory / 2)) / memory;
  ASSERT_GT(heavy_share, 0.25);  // (well past its GPU's eighth)
  sc->workloads = {heavy, Shaped(b_tpl, "b-one", 0, 5000, 1), Shaped(b_tpl, "b-late", 1000, 1, 1)};
  auto fifo = sim::RunReplay(*sc, "fifo");
  ASSERT_TRUE(fifo.ok()) << fifo.status().message();
  EXPECT_NEAR(fifo->teams.at(0).avg_share, heavy_share, 0.01);
  EXPECT_NEAR(fifo->teams.at(1).avg_share, 1.0 / 8, 0.01);
}

// A team's minimum runtime shields what it borrows for no longer than reclaimMinRuntime allows
// (an hour by default): team b's one-GPU workload, arriving at 10 while team a's two-hour runs
// fill the fleet, reclaims at 3,601 and starts once its victim's 30 s grace ends; the replay
// wakes for that hour's end. Without a cap (a year) it waits the two hours, within the bound
// that the full runtime sets. The bound counts the capped runtime: when a's disruption budget
// of 1 makes a two-GPU workload of b wait a second grace period, it is an exception against a
// bound of interval + grace + the 3,590 s left of the cap (not of the two hours).
TEST(ReplayTest, ReclaimMinRuntimeCapsTheWaitForBorrowedWork) {
  struct Case {
    const char* name;
    std::string settings;
    int budget_gpus;  // b's GPUs; 2: a's disruption budget is 1
    double start;     // when b starts
    double bound;     // -1: no exception
  };
  for (const Case& c :
       {Case{"default", "", 1, 3601 + 30, -1},
        Case{"no cap", "admission: {reclaimMinRuntime: 31536000}\n", 1, 7201 + 30, -1},
        Case{"default, budget", "", 2, 3601 + 30 + 31, 1 + 30 + 3590},
        Case{"no cap, budget", "admission: {reclaimMinRuntime: 31536000}\n", 2, 7201 + 30 + 31,
             1 + 30 + 7190}}) {
    SCOPED_TRACE(c.name);
    const std::string text = R"(
kind: Scenario
name: cap
synthetic: {gpus: 8, migShare: 0, h200Share: 0, seed: 3, window: 3600}
load: 0.5
)" + c.settings + R"(teams:
  - name: a
    share: 50
    guarantee: 4
    minRuntime: 7200
)" + (c.budget_gpus == 2 ? "    disruptionBudget: 1\n" : "") +
                             R"(    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
  - name: b
    share: 50
    guarantee: 4
    workloads:
      - {pods: 1, cpu: 4, memory: 16Gi, devices: {gpus: 1}, duration: 100-200}
)";
    auto sc = sim::ParseScenario(text, "cap.yaml", ".");
    ASSERT_TRUE(sc.ok()) << sc.status().message();
    sim::ReplayWorkload a_tpl, b_tpl;
    for (const sim::ReplayWorkload& w : sc->workloads) (w.team == 0 ? a_tpl : b_tpl) = w;
    ASSERT_DOUBLE_EQ(a_tpl.options.min_runtime_s, 7200);
    std::vector<sim::ReplayWorkload> list;
    for (int i = 0; i < 8; ++i)
      list.push_back(Shaped(a_tpl, "a-" + std::to_string(i), 0, 20000, 1));
    list.push_back(Shaped(b_tpl, "b-0", 10, 100, c.budget_gpus));
    sc->workloads = list;
    auto fab = sim::RunReplay(*sc, "fabrica");
    ASSERT_TRUE(fab.ok()) << fab.status().message();
    const sim::TeamResult& b = fab->teams.at(1);
    ASSERT_EQ(b.name, "b");
    EXPECT_NEAR(b.wait_mean_s, c.start - 10, 2);
    EXPECT_EQ(fab->preemptions, c.budget_gpus);
    EXPECT_GT(fab->bound.checked, 0);
    if (c.bound < 0) {
      EXPECT_TRUE(fab->bound.exceptions.empty()) << fab->bound.exceptions[0].cause;
    } else {
      ASSERT_EQ(fab->bound.exceptions.size(), 1u);
      EXPECT_EQ(fab->bound.exceptions[0].kind, "disruption budget");
      EXPECT_NEAR(fab->bound.exceptions[0].bound_s, c.bound, 2);
    }
  }
}

TEST(ReplayTest, JsonSortsGuaranteeExceptionsByKind) {
  sim::ReplayResult r;
  r.bound.checked = 3;
  r.bound.worst_excess_s = 20;
  r.bound.exceptions = {{"w1", "t", 40, 31, "no node can take it now", "no room"},
                        {"w2", "t", 51, 31, "preempting 1 workload(s)", "victims stopping"},
                        {"w3", "t", 35, 31, "no node can take it now", "no room"}};
  std::ostringstream out;
  sim::PrintReplayJson(r, out);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  const nlohmann::json& kinds = j["guarantee_bound"]["exceptions_by_kind"];
  EXPECT_EQ(kinds["no room"]["count"], 2);
  EXPECT_DOUBLE_EQ(kinds["no room"]["worst_excess_s"].get<double>(), 9);
  EXPECT_EQ(kinds["victims stopping"]["count"], 1);
  EXPECT_EQ(j["guarantee_bound"]["exceptions"].size(), 3u);
  EXPECT_EQ(j["guarantee_bound"]["exceptions"][1]["kind"], "victims stopping");
}

TEST(ReplayTest, ScenarioErrorsNameTheField) {
  auto bad = [](const std::string& patch_from, const std::string& patch_to) {
    std::string text = kSmallScenario;
    size_t at = text.find(patch_from);
    EXPECT_NE(at, std::string::npos) << patch_from;
    text.replace(at, patch_from.size(), patch_to);
    return sim::ParseScenario(text, "tiny.yaml", ".").status();
  };
  ExpectBad(bad("load: 1.0", "load: -1"), "load", "");
  // (Found by a user-style trial: each had been taken without a word, or named no line.)
  ExpectBad(bad("migShare: 0,", "migShare: 1.5,"), "tiny.yaml:4: synthetic.migShare",
            "must be between 0 and 1");
  // A share that rounds to no MIG rack, and a MIG flavour on a fleet without one (a trial's
  // MIG work was told only that it could never run, its flavour's guarantee taken).
  ExpectBad(bad("migShare: 0,", "migShare: 0.1,"), "tiny.yaml:4: synthetic.migShare",
            "gives no MIG GPU: whole H100 racks go to MIG");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  flavors: [{name: m, kind: mig}]\n"
                "  queues:\n    - {name: org, quotas: {m: {guaranteed: 4}}}\n"
                "    - {name: train, parent: org}\n    - {name: infer, parent: org}\n"
                "    - {name: ext, parent: org}\n"),
            "admission.flavors[0].kind", "mig, but no GPU of the fleet is in MIG mode");
  ExpectBad(bad("share: 20\n", "share: 20\n    guarantee: 100\n"), "tiny.yaml:7: teams",
            "the teams' guarantees add up to");
  ExpectBad(bad("load: 1.0", "---\nkind: Scenario\n---\nkind: Scenario"), "tiny.yaml: 3 documents",
            "a scenario file holds one");
  ExpectBad(sim::ParseScenario(kSmallScenario, "tiny.yaml", ".", "", 11).status(), "--load",
            "must be in (0, 10]");
  {
    // A team's queue setting beside admission.queues would be ignored: refused instead.
    std::string text = kSmallScenario;
    text.replace(text.find("load: 1.0"), 9,
                 "load: 1.0\nadmission:\n  queues:\n    - {name: org}\n"
                 "    - {name: train, parent: org}\n    - {name: infer, parent: org}\n"
                 "    - {name: ext, parent: org}\n");
    ASSERT_TRUE(sim::ParseScenario(text, "tiny.yaml", ".").ok());
    text.replace(text.find("share: 20\n"), 10, "share: 20\n    weight: 3\n");
    ExpectBad(sim::ParseScenario(text, "tiny.yaml", ".").status(), "teams[2].weight",
              "not with admission.queues: set it on the team's queue");
  }
  ExpectBad(bad("share: 20", "share: 25"), "teams", "sum to 100, they sum to 105");
  // kind is required (a file of another kind without one was read as a scenario).
  ExpectBad(bad("kind: Scenario\n", ""), "tiny.yaml", "kind: required field is missing");
  // A domain only trusted teams share by: on another it would read as sharing that never is.
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    trustDomain: research"),
            "tiny.yaml:19: teams[2].trustDomain",
            "only a trusted team shares GPUs by trust domain (this one is untrusted)");
  ExpectBad(bad("trust: untrusted", "trust: sometimes"), "teams[2].trust", "");
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    queueingStrategy: LIFO"),
            "teams[2].queueingStrategy", "must be BestEffortFIFO or StrictFIFO");
  ExpectBad(
      bad("trust: untrusted", "trust: untrusted\n    preemption: {reclaimWithinCohort: Sometimes}"),
      "teams[2].preemption.reclaimWithinCohort", "must be Never, LowerPriority or Any");
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    weight: -2"), "teams[2].weight",
            "must not be negative, got -2");
  // (Where a queue of weight 0 is written is said: a trial's was refused without it.)
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    weight: 0"), "teams[2].weight",
            "must be positive (the team's part of the fair share); a queue of weight 0 is given "
            "under admission.queues");
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    checkpointInterval: -60"),
            "teams[2].checkpointInterval", "must not be negative");
  ExpectBad(bad("duration: 60-900}", "duration: 60-900, checkpointInterval: -1}"),
            "teams[2].workloads[0].checkpointInterval", "must not be negative");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n    - {name: org}\n"
                "    - {name: train, parent: org}\n"
                "    - {name: infer, parent: org}\n"),
            "tiny.yaml:22: teams[2].queue", "unknown queue \"ext\"");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n"
                "    - {name: org, parent: ext}\n"
                "    - {name: train, parent: org}\n"
                "    - {name: infer, parent: org}\n"
                "    - {name: ext, parent: org}\n"),
            "tiny.yaml:8: admission.queues[0].parent", "cycle");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n"
                "    - {name: train, quotas: {gpu: {guaranteed: -8}}}\n"),
            "admission.queues[0].quotas.gpu.guaranteed", "");
  // Every bad value of the queues at once (and of two queues), not one a round.
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n"
                "    - {name: train, weight: -1, quotas: {gpu: {guaranteed: -8}}}\n"
                "    - {name: infer, preemption: {withinQueue: Sometimes}}\n"),
            "admission.queues[0].weight: must not be negative, got -1; tiny.yaml:",
            "admission.queues[0].quotas.gpu.guaranteed: GPU quantity must not be negative: '-8'; "
            "tiny.yaml:");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n"
                "    - {name: train, weight: -1, quotas: {gpu: {guaranteed: -8}}}\n"
                "    - {name: infer, preemption: {withinQueue: Sometimes}}\n"),
            "admission.queues[1].preemption.withinQueue", "got 'Sometimes'");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n"
                "    - {name: org}\n"
                "    - {name: train, parent: org, stopPolicy: Hold}\n"
                "    - {name: infer, parent: org}\n"
                "    - {name: ext, parent: org}\n"),
            "admission.queues[1].stopPolicy", "a replayed queue cannot be stopped");
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    stopPolicy: Hold"),
            "teams[2].stopPolicy", "unknown");
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    reclaimMinRuntimeSeconds: 40000000"),
            "teams[2].reclaimMinRuntimeSeconds", "must be between 0 and 31536000 (a year)");
  ExpectBad(bad("load: 1.0", "load: 1.0\nadmission: {reclaimMinRuntime: 4e7}"),
            "admission.reclaimMinRuntime", "must be between 0 and 31536000");
  ExpectBad(bad("load: 1.0", "load: 1.0\ntimeLimitFactor: 0.5"), "timeLimitFactor",
            "must be 0 (no time limits) or from 1 to 1000");
  {  // Misspellings of a team and of the admission settings, named together.
    std::string text = kSmallScenario;
    text.replace(text.find("load: 1.0"), 9, "load: 1.0\nadmission: {reserveAfer: 5}");
    text.replace(text.find("trust: untrusted"), 16, "trust: untrusted\n    shre: 1");
    ExpectBad(sim::ParseScenario(text, "tiny.yaml", ".").status(),
              "tiny.yaml:6: admission.reserveAfer: unknown field (did you mean reserveAfter?); "
              "tiny.yaml:20: teams[2].shre: unknown field (did you mean share?)",
              "");
  }
  {
    std::string text = kSmallScenario;
    text.replace(text.find("load: 1.0"), 9, "load: 1.0\nadmission: {fairSharePreemption: true}");
    text.replace(text.find("trust: untrusted"), 16,
                 "trust: untrusted\n    preemption: {borrowWithinCohort: {policy: LowerPriority}}");
    ExpectBad(sim::ParseScenario(text, "tiny.yaml", ".").status(),
              "teams[2].preemption.borrowWithinCohort", "not with fairSharePreemption");
  }
  // (Found by a user-style trial of the replay: each was taken without a word, or hung.)
  ExpectBad(bad("trust: untrusted", "trust: untrusted\n    queue: shared"), "teams[2].queue",
            "unknown queue \"shared\": without admission.queues each team waits in a queue of "
            "its own name (ext)");
  ExpectBad(bad("devices: {gpus: 1}, duration: 60-900}", "duration: 60-900}"), "teams[2].workloads",
            "no template (of positive weight) asks for a GPU");
  ExpectBad(bad("duration: 60-900}", "duration: 60-900, weight: 0}"), "teams[2].workloads",
            "the templates' weights add up to 0");
  ExpectBad(bad("window: 3600}", "window: 1e12}"), "synthetic: more than 5000000 workloads", "");
  ExpectBad(bad("gpus: 64,", "gpus: 20,"), "synthetic.gpus", "must be a multiple of 8");
  ExpectBad(sim::ParseScenario(kSmallScenario, "tiny.yaml", ".", "/traces").status(), "--trace-dir",
            "tiny.yaml is synthetic");
  ExpectBad(bad("pods: 1-2,", "pods: 1.5-2.5,"), "teams[0].workloads[0].pods", "whole number");
  ExpectBad(bad("load: 1.0", "load: 1.0\ninterval: 100000"), "interval",
            "must be shorter than the window (3600 s)");
  ExpectBad(bad("load: 1.0", "load: 1.0\ngrace: 1e300"), "grace", "must be at most the window");
  ExpectBad(bad("share: 20\n", "share: 20\n    lendingLimit: 60\n"), "teams[2].lendingLimit",
            "above the team's computed guarantee");
  ExpectBad(bad("load: 1.0", "load: 1.0\nadmission: {flavors: [{name: h100, models: [H100]}]}"),
            "admission.flavors", "only with admission.queues");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  flavors: [{name: b200, models: [B200]}]\n  queues:\n"
                "    - {name: org}\n"
                "    - {name: train, parent: org, quotas: {b200: {guaranteed: 8}}}\n"
                "    - {name: infer, parent: org}\n    - {name: ext, parent: org}\n"),
            "admission.flavors[0].models", "no GPU of the fleet is of them");
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n    - {name: org}\n"
                "    - {name: train, parent: org, quotas: {gpu: {guaranteed: 1000}}}\n"
                "    - {name: infer, parent: org}\n    - {name: ext, parent: org}\n"),
            "admission.queues: the teams' queues are guaranteed 1000 GPUs together", "fleet's 64");
  // (A trial's: a root guaranteed more than the fleet over leaves within it was taken.)
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n"
                "    - {name: org, quotas: {gpu: {guaranteed: 1000}}}\n"
                "    - {name: train, parent: org, quotas: {gpu: {guaranteed: 8}}}\n"
                "    - {name: infer, parent: org}\n    - {name: ext, parent: org}\n"),
            "admission.queues[0].quotas",
            "queue \"org\" is guaranteed 1000 GPUs, more than the "
            "fleet's 64");
  {  // A memory-only share is GPU time too: the draw ends, and reaches the load.
    std::string text = kSmallScenario;
    text.replace(text.find("devices: {gpuMilli: 250m}"), 25, "devices: {gpuMemory: 20Gi}");
    auto sc = sim::ParseScenario(text, "tiny.yaml", ".");
    ASSERT_TRUE(sc.ok()) << sc.status().message();
  }
  // A team's queue not named after it must list the team (the tenant) in spec.tenants.
  for (const bool listed : {false, true}) {
    std::string text = kSmallScenario;
    text.replace(text.find("load: 1.0"), 9,
                 std::string("load: 1.0\nadmission:\n  queues:\n    - {name: org}\n"
                             "    - {name: train, parent: org}\n"
                             "    - {name: infer, parent: org}\n"
                             "    - {name: shared, parent: org") +
                     (listed ? ", tenants: [ext]}\n" : "}\n"));
    text.replace(text.find("trust: untrusted"), 16, "trust: untrusted\n    queue: shared");
    Status st = sim::ParseScenario(text, "tiny.yaml", ".").status();
    if (listed) {
      EXPECT_TRUE(st.ok()) << st.message();
    } else {
      ExpectBad(st, "teams[2].queue", "tenant ext may not use queue shared");
    }
  }
  ExpectBad(bad("load: 1.0",
                "load: 1.0\nadmission:\n  queues:\n    - {name: org}\n"
                "    - {name: train, parent: org, tenants: [inference]}\n"
                "    - {name: infer, parent: org}\n    - {name: ext, parent: org}\n"),
            "admission.queues[1].tenants", "'inference' is no team of the scenario");
}

TEST(ReplayTest, TeamOfPodIsAFixedFunctionOfTheName) {
  std::vector<sim::TeamSpec> teams(2);
  teams[0].share = 50;
  teams[1].share = 50;
  int a = sim::TeamOfPod("openb-pod-0001", teams), b = sim::TeamOfPod("openb-pod-0001", teams);
  EXPECT_EQ(a, b);
  int counts[2] = {0, 0};
  for (int i = 0; i < 2000; ++i) ++counts[sim::TeamOfPod("pod-" + std::to_string(i), teams)];
  EXPECT_NEAR(counts[0], 1000, 120);
}

// The team of a pod is scenarios/README.md's function, rebuilt here from its words: FNV-1a 64
// (offset 14695981039346656037, prime 1099511628211) of the key, mod 100, through the shares
// (a trial rebuilt it and found 76% of openb's pods in other teams: the offset had lost a
// digit).
TEST(ReplayTest, TeamOfPodIsTheDocumentedHash) {
  std::vector<sim::TeamSpec> percent(100);
  for (sim::TeamSpec& t : percent) t.share = 1;
  const auto documented = [](const std::string& key) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
    return static_cast<int>(h % 100);
  };
  for (int i = 0; i < 500; ++i) {
    const std::string pod = "openb-pod-" + std::to_string(1000 + i * 7);
    EXPECT_EQ(sim::TeamOfPod(pod, percent), documented(pod)) << pod;
    EXPECT_EQ(sim::TeamOfPod(pod, percent, 200),
              documented("openb-pod-block-" + std::to_string((1000 + i * 7) / 200)))
        << pod;
  }
}

// A scenario with no admission block keeps a usage history as the server does (its half-life
// 3600 s): a trial's, written from the docs, ran fair share on current usage alone.
TEST(ReplayTest, AScenarioWithoutAdmissionSettingsKeepsTheServersUsageHistory) {
  auto sc = sim::ParseScenario(kSmallScenario, "tiny.yaml", ".");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_EQ(sc->admission.usage_half_life_s, 3600);
  auto none = sim::ParseScenario(std::string(kSmallScenario) + "admission: {usageHalfLife: 0}\n",
                                 "tiny.yaml", ".");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->admission.usage_half_life_s, 0);
}

TEST(ReplayTest, ShippedScenariosParse) {
  for (const char* name : {"openb-4teams.yaml", "modern-3teams.yaml"}) {
    std::string path = std::string(FABRICA_SOURCE_DIR) + "/scenarios/" + name;
    auto sc = sim::LoadScenario(path);
    if (!sc.ok() && sc.status().code() == StatusCode::kNotFound) {
      GTEST_LOG_(INFO) << name << ": trace absent (../shared missing), parse check skipped";
      continue;
    }
    ASSERT_TRUE(sc.ok()) << name << ": " << sc.status().message();
    EXPECT_GT(sc->workloads.size(), 100u) << name;
  }
}

}  // namespace
}  // namespace fabrica
