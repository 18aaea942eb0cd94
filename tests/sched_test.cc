// Unit tests for src/sched: ClusterState accounting and its class index, the trust-isolation table
// of DESIGN.md, the Placer (single pods, gangs, topology, NUMA), the policies, and FGD's
// fragmentation measure.
//
// Fleets are built in code by the small helpers below; every helper fleet passes ValidateFleet.
// Most placement tests use `bestfit`, whose device choice is DefaultDevices: a fraction or a MIG
// slice goes to the usable GPU with the least room left, so "did the second pod land on the GPU
// the first one uses?" is exactly "may these two share a GPU?".
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/workload.h"
#include "known_bug.h"
#include "sched/cluster_state.h"
#include "sched/frag.h"
#include "sched/placer.h"
#include "sched/policy.h"
#include "sched/rng.h"

namespace fabrica {
namespace {

// ---------------------------------------------------------------------------------------------
// Fleet, tenant and request helpers

int64_t GpuMemoryMib(const std::string& model) {
  return (model == "H100" ? 80 : model == "A100" ? 40 : model == "L4" ? 24 : 16) * int64_t{1024};
}

Node GpuNode(const std::string& name, int gpus, const std::string& model = "H100",
             int numa_nodes = 1, const std::string& leaf = "") {
  Node n;
  n.name = NodeId(name);
  n.cpu = MilliCpu(64000);
  n.memory = MemoryMib(512 * 1024);
  n.numa_nodes = numa_nodes;
  n.leaf = leaf;
  n.nvlink_domain = name;
  for (int i = 0; i < gpus; ++i) {
    Device d;
    d.uuid = "GPU-" + name + "-" + std::to_string(i);
    d.model = model;
    d.memory = MemoryMib(GpuMemoryMib(model));
    d.mig_capable = !MigProfilesFor(model).empty();
    d.numa_node = i * numa_nodes / gpus;
    n.devices.push_back(d);
  }
  return n;
}

// H100s, each split into two 3g.40gb MIG slices.
Node MigNode(const std::string& name, int gpus) {
  Node n = GpuNode(name, gpus, "H100");
  for (Device& d : n.devices) d.mig_slices = {"3g.40gb", "3g.40gb"};
  return n;
}

Node CpuNode(const std::string& name) {
  Node n;
  n.name = NodeId(name);
  n.cpu = MilliCpu(32000);
  n.memory = MemoryMib(128 * 1024);
  n.nvlink_domain = name;
  return n;
}

Fleet FleetOf(std::vector<Node> nodes) {
  Fleet f;
  f.nodes = std::move(nodes);
  Status st = ValidateFleet(f);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return f;
}

// `count` identical nodes of `gpus` GPUs each, named prefix-0, prefix-1, ...
std::vector<Node> Nodes(const std::string& prefix, int count, int gpus,
                        const std::string& model = "H100", const std::string& leaf = "") {
  std::vector<Node> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(GpuNode(prefix + "-" + std::to_string(i), gpus, model, 1, leaf));
  }
  return out;
}

Tenant MakeTenant(const std::string& name, TrustLevel trust, const std::string& domain = "",
                  bool exclusive_nodes = false) {
  Tenant t;
  t.name = TenantId(name);
  t.trust = trust;
  t.trust_domain = domain;
  t.exclusive_nodes = exclusive_nodes;
  return t;
}

PodSet Whole(int gpus, int64_t cpu_milli = 1000) {
  PodSet ps;
  ps.cpu = MilliCpu(cpu_milli);
  ps.memory = MemoryMib(1024);
  ps.device.kind = DeviceKind::kWhole;
  ps.device.gpus = gpus;
  return ps;
}

PodSet Fraction(int64_t milli, int64_t cpu_milli = 1000) {
  PodSet ps;
  ps.cpu = MilliCpu(cpu_milli);
  ps.memory = MemoryMib(1024);
  ps.device.kind = DeviceKind::kFraction;
  ps.device.gpu_milli = MilliGpu(milli);
  return ps;
}

PodSet Mig(const std::string& profile) {
  PodSet ps;
  ps.cpu = MilliCpu(1000);
  ps.memory = MemoryMib(1024);
  ps.device.kind = DeviceKind::kMig;
  ps.device.mig_profile = profile;
  return ps;
}

PodSet CpuOnly(int64_t cpu_milli) {
  PodSet ps;
  ps.cpu = MilliCpu(cpu_milli);
  ps.memory = MemoryMib(1024);
  return ps;
}

PodSet WithModels(PodSet ps, std::vector<std::string> models) {
  ps.device.models = std::move(models);
  return ps;
}

PodRequest Req(const ClusterState& s, const PodSet& ps, const std::string& tenant = "") {
  Result<PodRequest> r = s.MakeRequest(ps, TenantId(tenant));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : PodRequest{};
}

std::unique_ptr<Policy> MustMakePolicy(const std::string& name,
                                       std::vector<TypicalPod> typical = {}) {
  Result<std::unique_ptr<Policy>> p = MakePolicy(name, std::move(typical));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : nullptr;
}

// Places one pod and, when placed, applies it to `s`.
PodPlacement PlaceAndApply(ClusterState& s, const Placer& placer, const PodRequest& req, Rng& rng) {
  PodPlacement p = placer.Place(s, req, rng);
  if (p.outcome == Outcome::kPlaced) s.Apply(p.assignment, req);
  return p;
}

std::vector<int> DevicesOf(const Assignment& a) {
  std::vector<int> out;
  for (const DeviceShare& d : a.devices) out.push_back(d.device);
  return out;
}

// Everything a policy can observe about the state, as text, so that "exactly as before" is one
// string comparison whose failure shows the difference.
std::string Snapshot(const ClusterState& s) {
  std::ostringstream o;
  o << "allocated=" << s.allocated_gpu_milli() << " classes=" << s.active_classes().size() << "\n";
  for (int n = 0; n < s.node_count(); ++n) {
    o << "node " << n << " cpu=" << s.free_cpu(n) << " mem=" << s.free_memory(n)
      << " milli=" << s.node_free_milli(n) << " pods=" << s.node_pods(n)
      << " excl=" << s.exclusive_owner(n) << " tags=";
    for (const auto& [tag, pods] : s.gpu_pod_tags(n)) o << tag << ":" << pods << ",";
    o << " class_size=" << s.class_nodes(s.node_class(n)).size() << "\n";
    for (const DeviceState& d : s.devices(n)) {
      o << "  dev milli=" << d.free_milli << " mem=" << d.free_memory_mib << " key=" << d.share_key
        << " users=" << d.users << " mig_free=" << d.mig_free << " mig_key=" << d.mig_key << "\n";
    }
  }
  // The partition of nodes into classes, independent of class ids.
  std::set<std::vector<int>> partition;
  for (int c : s.active_classes()) partition.insert(s.class_nodes(c));
  for (const auto& nodes : partition) {
    o << "class";
    for (int n : nodes) o << " " << n;
    o << "\n";
  }
  return o.str();
}

// Whether `a` is a feasible placement of `req` on `s` (checked before it is applied).
void ExpectFeasible(const ClusterState& s, const Assignment& a, const PodRequest& req,
                    const std::string& what) {
  ASSERT_GE(a.node, 0) << what;
  EXPECT_TRUE(NodeFits(s, a.node, req)) << what;
  ASSERT_EQ(static_cast<int>(a.devices.size()), req.num_gpu) << what;
  std::set<int> distinct;
  for (const DeviceShare& d : a.devices) {
    EXPECT_TRUE(s.DeviceUsable(a.node, d.device, req)) << what << " device " << d.device;
    EXPECT_EQ(d.milli, req.gpu_milli) << what;
    distinct.insert(d.device);
  }
  EXPECT_EQ(distinct.size(), a.devices.size()) << what << ": a device used twice";
}

// ---------------------------------------------------------------------------------------------
// ClusterState

TEST(ClusterState, InitialCapacity) {
  Fleet fleet = FleetOf({GpuNode("a", 8), MigNode("m", 2), CpuNode("c")});
  ClusterState s(fleet);
  EXPECT_EQ(s.node_count(), 3);
  EXPECT_EQ(s.total_gpu_milli(), 10000);
  EXPECT_EQ(s.allocated_gpu_milli(), 0);
  EXPECT_EQ(s.free_cpu(0), 64000);
  EXPECT_EQ(s.free_memory(0), 512 * 1024);
  EXPECT_EQ(s.node_free_milli(0), 8000);
  EXPECT_EQ(s.devices(0)[3].free_memory_mib, 80 * 1024);
  // MIG GPUs are handed out by slice only, so they add no fractional capacity.
  EXPECT_EQ(s.node_free_milli(1), 0);
  EXPECT_EQ(s.devices(1)[0].mig_free, 0b11u);
  EXPECT_EQ(s.node_model(2), -1);
  EXPECT_EQ(s.models(), std::vector<std::string>{"H100"});
  EXPECT_EQ(s.ModelIndex("H100"), 0);
  EXPECT_EQ(s.ModelIndex("T4"), -1);
  EXPECT_GE(s.MigProfileIndex("3g.40gb"), 0);
  EXPECT_EQ(s.MigProfileIndex("1g.10gb"), -1);
}

TEST(ClusterState, MakeRequestFlattensPodSets) {
  Fleet fleet = FleetOf({GpuNode("a", 2, "H100"), GpuNode("b", 2, "T4"), MigNode("m", 1)});
  ClusterState s(fleet, {MakeTenant("acme", TrustLevel::kStandard)});
  PodRequest whole = Req(s, Whole(2, 3000), "acme");
  EXPECT_EQ(whole.kind, DeviceKind::kWhole);
  EXPECT_EQ(whole.num_gpu, 2);
  EXPECT_EQ(whole.gpu_milli, 1000);
  EXPECT_EQ(whole.cpu_milli, 3000);
  EXPECT_EQ(whole.tenant, 0);
  EXPECT_EQ(whole.total_gpu_milli(), 2000);

  PodRequest t4 = Req(s, WithModels(Fraction(300), {"T4"}));
  EXPECT_EQ(t4.num_gpu, 1);
  EXPECT_EQ(t4.gpu_milli, 300);
  EXPECT_EQ(t4.tenant, -1);
  EXPECT_EQ(t4.model_mask, uint64_t{1} << s.ModelIndex("T4"));

  // A memory-only share is charged the compute share its memory is of the smallest allowed GPU:
  // 4Gi of a 16Gi T4 is 250m.
  PodSet mem_only = Fraction(0);
  mem_only.device.gpu_memory = MemoryMib(4 * 1024);
  PodRequest m = Req(s, mem_only);
  EXPECT_EQ(m.gpu_milli, 250);
  EXPECT_EQ(m.gpu_memory_mib, 4 * 1024);

  PodRequest mig = Req(s, Mig("3g.40gb"));
  EXPECT_EQ(mig.mig_profile, s.MigProfileIndex("3g.40gb"));
  EXPECT_EQ(mig.gpu_milli, 3 * 1000 / 7);

  Result<PodRequest> unknown_tenant = s.MakeRequest(Whole(1), TenantId("nobody"));
  ASSERT_FALSE(unknown_tenant.ok());
  EXPECT_EQ(unknown_tenant.status().code(), StatusCode::kNotFound);
  Result<PodRequest> no_model = s.MakeRequest(WithModels(Whole(1), {"A10"}), TenantId());
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find("'A10'"), std::string::npos);
  Result<PodRequest> no_profile = s.MakeRequest(Mig("1g.10gb"), TenantId());
  ASSERT_FALSE(no_profile.ok());
  EXPECT_NE(no_profile.status().message().find("1g.10gb"), std::string::npos);
}

// Quotas count a fraction by the larger of its compute and its memory share (of the smallest GPU
// it may land on: one its memory fits on), as HAMi and KAI do; an untrusted tenant's by the
// device over how many such pods fit on one, since no one else may use the rest.
TEST(ClusterState, AFractionIsChargedTheLargerOfItsComputeAndMemoryShares) {
  Fleet fleet = FleetOf({GpuNode("a", 2, "H100"), GpuNode("b", 2, "T4")});
  ClusterState s(fleet, {MakeTenant("acme", TrustLevel::kStandard),
                         MakeTenant("guest", TrustLevel::kUntrusted)});
  const auto with_memory = [](int64_t milli, int64_t gib) {
    PodSet ps = Fraction(milli);
    ps.device.gpu_memory = MemoryMib(gib * 1024);
    return ps;
  };
  // 10m with 41Gi: no 16Gi T4 holds it, so half of an 80Gi H100 (512.5, rounded down: shares
  // whose memory fills a GPU are one GPU between them).
  PodRequest big_memory = Req(s, with_memory(10, 41), "acme");
  EXPECT_EQ(big_memory.gpu_milli, 10);  // placement still packs by what it asked
  EXPECT_EQ(big_memory.total_gpu_milli(), 10);
  EXPECT_EQ(big_memory.total_charge_milli(), 512);
  // On T4s, 8Gi is half of one; 300m of compute with 4Gi is its compute.
  EXPECT_EQ(Req(s, WithModels(with_memory(100, 8), {"T4"}), "acme").total_charge_milli(), 500);
  EXPECT_EQ(Req(s, WithModels(with_memory(300, 4), {"T4"}), "acme").total_charge_milli(), 300);
  // A memory-only share holds what its memory is of the smallest GPU that holds it.
  PodRequest mem_only = Req(s, with_memory(0, 20), "acme");
  EXPECT_EQ(mem_only.gpu_milli, 250);
  EXPECT_EQ(mem_only.total_charge_milli(), 250);
  // Without memory, a standard tenant's is its compute; whole GPUs and slices as placed.
  EXPECT_EQ(Req(s, Fraction(600), "acme").total_charge_milli(), 600);
  EXPECT_EQ(Req(s, Whole(2), "acme").total_charge_milli(), 2000);
  // An untrusted tenant: one 600m pod per GPU (the whole GPU), three of 300m (a third each,
  // rounded down: three on one GPU are no more than one GPU), two of 250m with 30Gi of an H100
  // (memory fits two: half each).
  EXPECT_EQ(Req(s, Fraction(600), "guest").total_charge_milli(), 1000);
  EXPECT_EQ(Req(s, Fraction(300), "guest").total_charge_milli(), 333);
  EXPECT_EQ(Req(s, WithModels(with_memory(250, 30), {"H100"}), "guest").total_charge_milli(), 500);
  EXPECT_EQ(Req(s, Fraction(250), "guest").total_charge_milli(), 250);
}

// A tenant with exclusiveNodes keeps every other tenant off the nodes its pods run on: each pod
// is charged the node's GPUs over how many such pods one node holds (by GPUs, CPU, memory).
TEST(ClusterState, ATenantWithExclusiveNodesIsChargedTheNodesItHolds) {
  Fleet fleet = FleetOf({GpuNode("a", 8, "H100"), GpuNode("b", 8, "H100")});  // 512Gi each
  ClusterState s(fleet, {MakeTenant("guest", TrustLevel::kUntrusted, "", true),
                         MakeTenant("acme", TrustLevel::kStandard)});
  PodSet small = Whole(1);
  EXPECT_EQ(Req(s, small, "guest").total_charge_milli(), 1000);  // eight to a node
  PodSet hog = Whole(1);
  hog.memory = MemoryMib(300 * 1024);  // one to a node: the node's 8 GPUs
  EXPECT_EQ(Req(s, hog, "guest").total_charge_milli(), 8000);
  EXPECT_EQ(Req(s, hog, "acme").total_charge_milli(), 1000);  // (others: what they ask)
  PodSet pair = Whole(2);
  pair.memory = MemoryMib(200 * 1024);  // two to a node: half of it each
  EXPECT_EQ(Req(s, pair, "guest").total_charge_milli(), 4000);
  EXPECT_EQ(s.ExclusiveCharge(Req(s, hog, "guest"), 1), 8000);
}

TEST(ClusterState, ModelListWithOneAbsentModelStillMatchesThePresentOne) {
  Fleet fleet = FleetOf({GpuNode("a", 2, "V100M16")});
  ClusterState s(fleet);
  Result<PodRequest> r =
      s.MakeRequest(WithModels(Fraction(500), {"V100M16", "V100M32"}), TenantId());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_mask, uint64_t{1} << s.ModelIndex("V100M16"));
  // Only a list none of whose models is present is an error, and it names them.
  Result<PodRequest> none =
      s.MakeRequest(WithModels(Fraction(500), {"A10", "V100M32"}), TenantId());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("A10|V100M32"), std::string::npos)
      << none.status().message();
}

TEST(ClusterState, ApplyChargesAndReleaseRestoresExactly) {
  Fleet fleet = FleetOf(
      {GpuNode("a", 8, "H100", 2), GpuNode("b", 8, "H100", 2), MigNode("m", 2), CpuNode("c")});
  std::vector<Tenant> tenants = {MakeTenant("acme", TrustLevel::kStandard),
                                 MakeTenant("lab", TrustLevel::kTrusted, "org"),
                                 MakeTenant("guest", TrustLevel::kUntrusted, "", true)};
  ClusterState s(fleet, tenants);
  const std::string initial = Snapshot(s);
  const size_t initial_classes = s.active_classes().size();

  // A fraction charged by hand, so that every number it changes can be checked.
  PodRequest frac = Req(s, Fraction(250, 2000), "acme");
  Assignment a{0, {ShareOn(s, 0, 3, frac)}};
  s.Apply(a, frac);
  EXPECT_EQ(s.free_cpu(0), 64000 - 2000);
  EXPECT_EQ(s.free_memory(0), 512 * 1024 - 1024);
  EXPECT_EQ(s.node_free_milli(0), 8000 - 250);
  EXPECT_EQ(s.allocated_gpu_milli(), 250);
  EXPECT_EQ(s.node_pods(0), 1);
  const DeviceState& d3 = s.devices(0)[3];
  EXPECT_EQ(d3.free_milli, 750);
  EXPECT_EQ(d3.free_memory_mib, 80 * 1024 - 20 * 1024);  // memory in proportion: 250m of 80Gi
  EXPECT_EQ(d3.users, 1);
  EXPECT_EQ(d3.share_key, s.ShareKey(0));
  EXPECT_EQ(s.gpu_pod_tags(0), (std::vector<std::pair<int, int>>{{0, 1}}));

  // More pods of every kind, placed by the Placer so that they are valid.
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(7);
  std::vector<std::pair<Assignment, PodRequest>> placed = {{a, frac}};
  for (const auto& [ps, tenant] :
       std::vector<std::pair<PodSet, std::string>>{{Whole(4), "acme"},
                                                   {Fraction(500), "lab"},
                                                   {Mig("3g.40gb"), "lab"},
                                                   {Mig("3g.40gb"), "acme"},
                                                   {CpuOnly(8000), "acme"},
                                                   {Whole(2), "guest"},
                                                   {Fraction(100), ""},
                                                   {Whole(1), ""}}) {
    PodRequest req = Req(s, ps, tenant);
    PodPlacement p = PlaceAndApply(s, placer, req, rng);
    ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
    placed.emplace_back(p.assignment, req);
  }
  EXPECT_EQ(s.allocated_gpu_milli(), 250 + 4000 + 500 + 2 * 428 + 2000 + 100 + 1000);
  EXPECT_NE(Snapshot(s), initial);

  // Release in an order unrelated to the order of placement.
  for (size_t i : {3, 0, 8, 5, 1, 7, 2, 6, 4}) s.Release(placed[i].first, placed[i].second);
  EXPECT_EQ(s.allocated_gpu_milli(), 0);
  EXPECT_EQ(s.active_classes().size(), initial_classes);
  EXPECT_EQ(Snapshot(s), initial);
}

TEST(ClusterState, FractionMemoryCapIsEnforced) {
  Fleet fleet = FleetOf({GpuNode("n", 1)});  // one 80Gi H100
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodSet big_memory = Fraction(100);
  big_memory.device.gpu_memory = MemoryMib(70 * 1024);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, big_memory), rng).outcome, Outcome::kPlaced);
  EXPECT_EQ(s.devices(0)[0].free_memory_mib, 10 * 1024);
  // An explicit 20Gi cap does not fit in the 10Gi left.
  PodSet capped = Fraction(100);
  capped.device.gpu_memory = MemoryMib(20 * 1024);
  EXPECT_FALSE(s.DeviceUsable(0, 0, Req(s, capped)));
  EXPECT_EQ(placer.Place(s, Req(s, capped), rng).outcome, Outcome::kPending);
}

TEST(ClusterState, ProportionalFractionMemoryIsNotOvercommitted) {
  Fleet fleet = FleetOf({GpuNode("n", 1)});
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodSet big_memory = Fraction(100);
  big_memory.device.gpu_memory = MemoryMib(70 * 1024);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, big_memory), rng).outcome, Outcome::kPlaced);
  PodRequest proportional = Req(s, Fraction(500));  // would take 40Gi; 10Gi are left
  EXPECT_FALSE(s.DeviceUsable(0, 0, proportional));
  EXPECT_EQ(placer.Place(s, proportional, rng).outcome, Outcome::kPending);
}

TEST(ClusterState, IdenticalNodesShareOneClass) {
  Fleet fleet = FleetOf(Nodes("n", 10, 4));
  ClusterState s(fleet);
  ASSERT_EQ(s.active_classes().size(), 1u);
  EXPECT_EQ(s.class_nodes(s.active_classes()[0]), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  PodRequest req = Req(s, Whole(1));
  Assignment on3{3, {ShareOn(s, 3, 0, req)}};
  s.Apply(on3, req);
  ASSERT_EQ(s.active_classes().size(), 2u);
  EXPECT_EQ(s.class_nodes(s.node_class(3)), std::vector<int>{3});
  EXPECT_EQ(s.class_nodes(s.node_class(0)), (std::vector<int>{0, 1, 2, 4, 5, 6, 7, 8, 9}));

  // The same pod on another node (on a different GPU index) makes it interchangeable with 3.
  Assignment on5{5, {ShareOn(s, 5, 2, req)}};
  s.Apply(on5, req);
  EXPECT_EQ(s.active_classes().size(), 2u);
  EXPECT_EQ(s.node_class(5), s.node_class(3));
  EXPECT_EQ(s.class_nodes(s.node_class(3)), (std::vector<int>{3, 5}));

  s.Release(on3, req);
  s.Release(on5, req);
  ASSERT_EQ(s.active_classes().size(), 1u);
  EXPECT_EQ(s.class_nodes(s.node_class(0)).size(), 10u);
}

TEST(ClusterState, DifferentHardwareIsNeverOneClass) {
  Fleet fleet = FleetOf({GpuNode("a", 4, "H100"), GpuNode("b", 4, "T4"), GpuNode("c", 2, "H100"),
                         GpuNode("d", 4, "H100", 2), GpuNode("e", 4, "H100")});
  ClusterState s(fleet);
  EXPECT_EQ(s.active_classes().size(), 4u);
  EXPECT_EQ(s.node_class(0), s.node_class(4));
}

TEST(ClusterState, TopologyDomains) {
  std::vector<Node> nodes = Nodes("a", 2, 4, "H100", "leaf-a");
  for (Node& n : Nodes("b", 2, 4, "H100", "leaf-b")) nodes.push_back(n);
  nodes.push_back(GpuNode("lone", 4));
  nodes[0].rack = nodes[1].rack = "r1";
  Fleet fleet = FleetOf(nodes);
  ClusterState s(fleet);
  EXPECT_EQ(s.domains(TopologyLevel::kNone).size(), 1u);
  EXPECT_EQ(s.domains(TopologyLevel::kLeaf).size(), 3u);  // a node without a leaf is its own
  EXPECT_EQ(s.domain_of(0, TopologyLevel::kLeaf), s.domain_of(1, TopologyLevel::kLeaf));
  EXPECT_NE(s.domain_of(1, TopologyLevel::kLeaf), s.domain_of(2, TopologyLevel::kLeaf));
  EXPECT_EQ(s.domain_name(TopologyLevel::kLeaf, s.domain_of(3, TopologyLevel::kLeaf)), "leaf-b");
  EXPECT_EQ(s.domain_name(TopologyLevel::kLeaf, s.domain_of(4, TopologyLevel::kLeaf)), "lone");
  EXPECT_EQ(s.domain_of(0, TopologyLevel::kRack), s.domain_of(1, TopologyLevel::kRack));
  EXPECT_EQ(s.domains(TopologyLevel::kNvlinkDomain).size(), 5u);
}

// ---------------------------------------------------------------------------------------------
// Isolation by trust level (DESIGN.md, "Isolation by trust level")

struct SharingCase {
  std::vector<Tenant> tenants;
  std::string first, second;
};

// On one node of two plain H100s, `first` takes 500m of a GPU; returns the GPU that the 300m
// share of `second` then lands on (best fit prefers the used GPU), or -1 if it is not placed.
int SecondFractionGpu(const SharingCase& c) {
  Fleet fleet = FleetOf({GpuNode("n", 2)});
  ClusterState s(fleet, c.tenants);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodPlacement p1 = PlaceAndApply(s, placer, Req(s, Fraction(500), c.first), rng);
  EXPECT_EQ(p1.outcome, Outcome::kPlaced);
  EXPECT_EQ(DevicesOf(p1.assignment), std::vector<int>{0});
  PodRequest second = Req(s, Fraction(300), c.second);
  PodPlacement p2 = placer.Place(s, second, rng);
  if (p2.outcome != Outcome::kPlaced) return -1;
  // The Placer's choice must agree with the constant-time isolation check.
  const int gpu = p2.assignment.devices.at(0).device;
  EXPECT_EQ(s.DeviceUsable(0, 0, second), gpu == 0);
  return gpu;
}

// The same with MIG: each H100 holds two 3g.40gb slices; `first` takes one on GPU 0.
int SecondMigGpu(const SharingCase& c) {
  Fleet fleet = FleetOf({MigNode("n", 2)});
  ClusterState s(fleet, c.tenants);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodPlacement p1 = PlaceAndApply(s, placer, Req(s, Mig("3g.40gb"), c.first), rng);
  EXPECT_EQ(p1.outcome, Outcome::kPlaced);
  EXPECT_EQ(DevicesOf(p1.assignment), std::vector<int>{0});
  PodRequest second = Req(s, Mig("3g.40gb"), c.second);
  PodPlacement p2 = placer.Place(s, second, rng);
  if (p2.outcome != Outcome::kPlaced) return -1;
  const int gpu = p2.assignment.devices.at(0).device;
  EXPECT_EQ(s.DeviceUsable(0, 0, second), gpu == 0);
  return gpu;
}

TEST(TrustIsolation, SameTenantSharesFractionallyAndMig) {
  for (TrustLevel t : {TrustLevel::kUntrusted, TrustLevel::kStandard, TrustLevel::kTrusted}) {
    SharingCase c{{MakeTenant("x", t)}, "x", "x"};
    EXPECT_EQ(SecondFractionGpu(c), 0) << TrustLevelName(t);
    EXPECT_EQ(SecondMigGpu(c), 0) << TrustLevelName(t);
  }
}

TEST(TrustIsolation, TrustedTenantsOfOneDomainShareFractionally) {
  SharingCase c{
      {MakeTenant("x", TrustLevel::kTrusted, "org"), MakeTenant("y", TrustLevel::kTrusted, "org")},
      "x",
      "y"};
  EXPECT_EQ(SecondFractionGpu(c), 0);
  EXPECT_EQ(SecondMigGpu(c), 0);
  // A trusted tenant's default domain is its own name, so naming it as the domain also matches.
  SharingCase by_name{
      {MakeTenant("x", TrustLevel::kTrusted), MakeTenant("y", TrustLevel::kTrusted, "x")},
      "x",
      "y"};
  EXPECT_EQ(SecondFractionGpu(by_name), 0);
}

TEST(TrustIsolation, TrustedTenantsOfDifferentDomainsShareMigOnly) {
  SharingCase c{{MakeTenant("x", TrustLevel::kTrusted, "org1"),
                 MakeTenant("y", TrustLevel::kTrusted, "org2")},
                "x",
                "y"};
  EXPECT_EQ(SecondFractionGpu(c), 1);
  EXPECT_EQ(SecondMigGpu(c), 0);
}

TEST(TrustIsolation, StandardTenantsShareMigOnly) {
  for (const auto& [a, b] : std::vector<std::pair<TrustLevel, TrustLevel>>{
           {TrustLevel::kStandard, TrustLevel::kTrusted},
           {TrustLevel::kTrusted, TrustLevel::kStandard},
           {TrustLevel::kStandard, TrustLevel::kStandard}}) {
    // Even a shared domain name does not let a standard tenant share fractionally.
    SharingCase c{{MakeTenant("x", a, "org"), MakeTenant("y", b, "org")}, "x", "y"};
    EXPECT_EQ(SecondFractionGpu(c), 1) << TrustLevelName(a) << "/" << TrustLevelName(b);
    EXPECT_EQ(SecondMigGpu(c), 0) << TrustLevelName(a) << "/" << TrustLevelName(b);
  }
}

TEST(TrustIsolation, UntrustedNeverSharesAGpuButMayShareTheNode) {
  for (TrustLevel other : {TrustLevel::kUntrusted, TrustLevel::kStandard, TrustLevel::kTrusted}) {
    std::vector<Tenant> tenants = {MakeTenant("u", TrustLevel::kUntrusted, "org"),
                                   MakeTenant("o", other, "org")};
    // Either order: the untrusted tenant first, or the other one first. GPU 1 of the same node
    // is always fine.
    EXPECT_EQ(SecondFractionGpu({tenants, "u", "o"}), 1) << TrustLevelName(other);
    EXPECT_EQ(SecondFractionGpu({tenants, "o", "u"}), 1) << TrustLevelName(other);
    EXPECT_EQ(SecondMigGpu({tenants, "u", "o"}), 1) << TrustLevelName(other);
    EXPECT_EQ(SecondMigGpu({tenants, "o", "u"}), 1) << TrustLevelName(other);
  }
}

// Pods placed under a tenant's earlier trust, restored beside each other after it was lowered
// (x trusted, y once trusted in x's domain, now standard; u once standard, now untrusted): their
// GPU takes no new sharer, of either tenant, until it empties (a trial's lowered tenant kept
// placing shares beside the trusted one's).
TEST(TrustIsolation, AGpuSharedUnderAnEarlierTrustTakesNoNewSharer) {
  const std::vector<Tenant> tenants = {
      MakeTenant("x", TrustLevel::kTrusted, "org"), MakeTenant("y", TrustLevel::kStandard, "org"),
      MakeTenant("c", TrustLevel::kStandard), MakeTenant("u", TrustLevel::kUntrusted)};
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  {
    Fleet fleet = FleetOf({GpuNode("n", 2)});
    ClusterState s(fleet, tenants);
    for (const std::string t : {"x", "y"}) {
      Assignment a;
      a.node = 0;
      a.devices.push_back({0, 300, 0, -1});
      s.Apply(a, Req(s, Fraction(300), t));
    }
    for (const std::string t : {"x", "y"}) {
      PodPlacement p = placer.Place(s, Req(s, Fraction(100), t), rng);
      ASSERT_EQ(p.outcome, Outcome::kPlaced) << t;
      EXPECT_EQ(DevicesOf(p.assignment), std::vector<int>{1}) << t;
      EXPECT_FALSE(s.DeviceUsable(0, 0, Req(s, Fraction(100), t))) << t;
    }
    // y's pod gone, it is x's again (as a rebuilt state, which restores x's alone, has it);
    // emptied, anyone's.
    Assignment a;
    a.node = 0;
    a.devices.push_back({0, 300, 0, -1});
    s.Release(a, Req(s, Fraction(300), "y"));
    EXPECT_TRUE(s.DeviceUsable(0, 0, Req(s, Fraction(100), "x")));
    EXPECT_FALSE(s.DeviceUsable(0, 0, Req(s, Fraction(100), "y")));
    s.Release(a, Req(s, Fraction(300), "x"));
    EXPECT_TRUE(s.DeviceUsable(0, 0, Req(s, Fraction(100), "y")));
  }
  {
    Node node = GpuNode("n", 2);
    for (Device& d : node.devices) d.mig_slices.assign(7, "1g.10gb");
    Fleet fleet = FleetOf({node});
    // c (standard) and u (once standard, now untrusted) hold slices 0 and 1 of GPU 0, restored
    // in either order.
    for (bool c_first : {true, false}) {
      ClusterState s(fleet, tenants);
      for (const std::string t :
           c_first ? std::vector<std::string>{"c", "u"} : std::vector<std::string>{"u", "c"}) {
        Assignment a;
        a.node = 0;
        a.devices.push_back({0, 0, 0, t == "c" ? 0 : 1});
        s.Apply(a, Req(s, Mig("1g.10gb"), t));
      }
      for (const std::string t : {"c", "u"}) {
        EXPECT_FALSE(s.DeviceUsable(0, 0, Req(s, Mig("1g.10gb"), t))) << t << c_first;
        PodPlacement p = placer.Place(s, Req(s, Mig("1g.10gb"), t), rng);
        ASSERT_EQ(p.outcome, Outcome::kPlaced) << t;
        EXPECT_EQ(DevicesOf(p.assignment), std::vector<int>{1}) << t << c_first;
      }
      // u's slice gone, c's standard kind may share it again.
      Assignment u;
      u.node = 0;
      u.devices.push_back({0, 0, 0, 1});
      s.Release(u, Req(s, Mig("1g.10gb"), "u"));
      EXPECT_TRUE(s.DeviceUsable(0, 0, Req(s, Mig("1g.10gb"), "c"))) << c_first;
      EXPECT_FALSE(s.DeviceUsable(0, 0, Req(s, Mig("1g.10gb"), "u"))) << c_first;
    }
  }
}

TEST(TrustIsolation, UntrustedOnASingleGpuNodeLeavesNoRoom) {
  Fleet fleet = FleetOf({GpuNode("n", 1)});
  ClusterState s(fleet,
                 {MakeTenant("u", TrustLevel::kUntrusted), MakeTenant("o", TrustLevel::kStandard)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Fraction(100), "u"), rng).outcome, Outcome::kPlaced);
  PodPlacement p = placer.Place(s, Req(s, Fraction(100), "o"), rng);
  EXPECT_EQ(p.outcome, Outcome::kPending);
  // Isolation alone keeps it off, and the reason says so, not that the GPU lacks room (a trial).
  EXPECT_NE(p.reason.find("0 lack a free GPU, or a shared one"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find(", 1 have room for it only on GPUs other tenants' pods use, which "
                          "isolation keeps it off (its tenant is standard: it shares a GPU only "
                          "with its own pods)"),
            std::string::npos)
      << p.reason;
  // A share bigger than what is left there lacks room as before.
  EXPECT_NE(placer.Place(s, Req(s, Fraction(950), "o"), rng).reason.find("1 lack a free GPU"),
            std::string::npos);
  // A whole GPU pod of the untrusted tenant's own is refused too: the GPU is in use.
  EXPECT_EQ(placer.Place(s, Req(s, Whole(1), "u"), rng).outcome, Outcome::kPending);
}

TEST(TrustIsolation, ExclusiveNodesKeepOthersOut) {
  Fleet fleet = FleetOf(Nodes("n", 2, 2));
  ClusterState s(fleet, {MakeTenant("u", TrustLevel::kUntrusted, "", true),
                         MakeTenant("o", TrustLevel::kStandard)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  // Another tenant is on node 0, which still has a free GPU; the exclusive tenant goes to node 1.
  PodPlacement o1 = PlaceAndApply(s, placer, Req(s, Whole(1), "o"), rng);
  ASSERT_EQ(o1.outcome, Outcome::kPlaced);
  ASSERT_EQ(o1.assignment.node, 0);
  PodPlacement u1 = PlaceAndApply(s, placer, Req(s, Whole(1), "u"), rng);
  ASSERT_EQ(u1.outcome, Outcome::kPlaced);
  EXPECT_EQ(u1.assignment.node, 1);
  EXPECT_EQ(s.exclusive_owner(1), s.TenantIndex(TenantId("u")));
  EXPECT_EQ(s.exclusive_owner(0), -1);
  // Node 0 fills up; node 1's free GPU is the exclusive tenant's alone.
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1), "o"), rng).assignment.node, 0);
  PodRequest o3 = Req(s, Whole(1), "o");
  EXPECT_FALSE(s.NodeUsable(1, o3));
  EXPECT_EQ(placer.Place(s, o3, rng).outcome, Outcome::kPending);
  // Not even a CPU-only pod: the node, not only its GPUs, is the exclusive tenant's.
  PodRequest o_cpu = Req(s, CpuOnly(1000), "o");
  EXPECT_FALSE(s.NodeUsable(1, o_cpu));
  EXPECT_EQ(placer.Place(s, o_cpu, rng).assignment.node, 0);
  PodPlacement u2 = PlaceAndApply(s, placer, Req(s, Whole(1), "u"), rng);
  ASSERT_EQ(u2.outcome, Outcome::kPlaced);
  EXPECT_EQ(u2.assignment.node, 1);
  // When the exclusive tenant leaves, the node is open again.
  s.Release(u2.assignment, Req(s, Whole(1), "u"));
  EXPECT_EQ(s.exclusive_owner(1), s.TenantIndex(TenantId("u")));
  s.Release(u1.assignment, Req(s, Whole(1), "u"));
  EXPECT_EQ(s.exclusive_owner(1), -1);
  EXPECT_EQ(placer.Place(s, o3, rng).assignment.node, 1);
}

TEST(TrustIsolation, ExclusiveTenantAvoidsNodesWithAnyOtherPod) {
  Fleet fleet = FleetOf(Nodes("n", 2, 2));
  ClusterState s(fleet, {MakeTenant("u", TrustLevel::kUntrusted, "", true)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1)), rng).assignment.node, 0);
  EXPECT_EQ(placer.Place(s, Req(s, Whole(1), "u"), rng).assignment.node, 1);
}

TEST(TrustIsolation, AnonymousPodWithoutResourcesStillKeepsAnExclusiveTenantOut) {
  // A pod that takes no CPU, memory or GPU leaves its node's free capacity as it was; the node
  // must still not share a state class with an empty one, or the exclusive tenant would be
  // judged by the wrong node.
  Fleet fleet = FleetOf(Nodes("n", 2, 2));
  ClusterState s(fleet, {MakeTenant("u", TrustLevel::kUntrusted, "", true)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodSet nothing = CpuOnly(0);
  nothing.memory = MemoryMib(0);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, nothing), rng).assignment.node, 0);
  EXPECT_NE(s.node_class(0), s.node_class(1));
  PodPlacement p = placer.Place(s, Req(s, Whole(1), "u"), rng);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.assignment.node, 1);
}

// ---------------------------------------------------------------------------------------------
// Placer: single pods

TEST(Placer, RespectsTheModelConstraint) {
  // The lower-index node is the wrong model, so a policy that ignored the constraint would pick it.
  Fleet fleet = FleetOf({GpuNode("v", 4, "V100M16"), GpuNode("t", 4, "T4")});
  ClusterState s(fleet);
  for (const std::string& name : PolicyNames()) {
    auto policy = MustMakePolicy(name);
    Placer placer(*policy);
    Rng rng(3);
    for (const PodSet& ps : {WithModels(Whole(2), {"T4"}), WithModels(Fraction(400), {"T4"})}) {
      PodPlacement p = placer.Place(s, Req(s, ps), rng);
      ASSERT_EQ(p.outcome, Outcome::kPlaced) << name;
      EXPECT_EQ(p.assignment.node, 1) << name;
    }
    PodPlacement v = placer.Place(s, Req(s, WithModels(Whole(4), {"V100M16"})), rng);
    ASSERT_EQ(v.outcome, Outcome::kPlaced) << name;
    EXPECT_EQ(v.assignment.node, 0) << name;
  }
}

// PlaceAllIn keeps each like pod's scores from the one before and looks again only at the two
// classes a placement changed: the result must be what placing the pods one by one gives, on a
// fleet in many states, for like pods in a row (whole GPUs, shares) and an unlike one between.
TEST(Placer, LikePodsInARowPlaceAsOneByOne) {
  std::vector<Node> nodes = Nodes("h", 6, 8);
  for (Node& n : Nodes("a", 4, 8, "A100")) nodes.push_back(n);
  const Fleet fleet = FleetOf(nodes);
  for (const char* name : {"fabrica", "bestfit", "fgd", "dotprod"}) {
    SCOPED_TRACE(name);
    ClusterState s(fleet);
    auto policy = MustMakePolicy(name);
    Placer placer(*policy);
    Rng fill(11);
    const int64_t shares[] = {250, 500, 700, 300};
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Fraction(shares[i % 4])), fill).outcome,
                Outcome::kPlaced);
    ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(3)), fill).outcome, Outcome::kPlaced);
    std::vector<PodRequest> pods;
    for (int i = 0; i < 4; ++i) pods.push_back(Req(s, Whole(2)));
    pods.push_back(Req(s, Fraction(400)));
    for (int i = 0; i < 6; ++i) pods.push_back(Req(s, Fraction(300)));
    for (int i = 0; i < 2; ++i) pods.push_back(Req(s, WithModels(Whole(1), {"A100"})));
    ClusterState one_by_one = s;
    Rng r1(5), r2(5);
    std::vector<PodPlacement> ref;
    for (size_t i = 0; i < pods.size(); ++i) {
      ref.push_back(placer.Place(one_by_one, pods[i], r2));
      ASSERT_EQ(ref.back().outcome, Outcome::kPlaced) << i << ": " << ref.back().reason;
      one_by_one.Apply(ref.back().assignment, pods[i]);
    }
    std::vector<Assignment> out;
    ASSERT_TRUE(placer.PlaceAllIn(s, nullptr, pods, r1, out));
    ASSERT_EQ(out.size(), pods.size());
    for (size_t i = 0; i < pods.size(); ++i) {
      const PodPlacement& p = ref[i];
      EXPECT_EQ(p.assignment.node, out[i].node) << "pod " << i;
      ASSERT_EQ(p.assignment.devices.size(), out[i].devices.size()) << i;
      for (size_t d = 0; d < out[i].devices.size(); ++d)
        EXPECT_EQ(p.assignment.devices[d].device, out[i].devices[d].device) << i;
    }
    EXPECT_EQ(s.allocated_gpu_milli(), one_by_one.allocated_gpu_milli());
  }
}

// Why a pod waits counts only nodes of a model it may use as lacking room; the others are named
// apart (a user-style review saw a NotReady A100 node counted as "1 lack CPU" for an H100 pod).
TEST(Placer, PendingReasonSetsOtherModelsApart) {
  std::vector<Node> nodes = Nodes("h", 2, 8);
  for (Node& n : Nodes("a", 1, 8, "A100")) nodes.push_back(n);
  Fleet fleet = FleetOf(nodes);
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(PlaceAndApply(s, placer, Req(s, WithModels(Whole(8), {"H100"})), rng).outcome,
              Outcome::kPlaced);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, CpuOnly(s.node(2).cpu.value())), rng).outcome,
            Outcome::kPlaced);
  const PodPlacement p = placer.Place(s, Req(s, WithModels(Whole(1), {"H100"})), rng);
  EXPECT_EQ(p.outcome, Outcome::kPending);
  EXPECT_NE(p.reason.find("0 lack CPU"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("2 lack a free GPU of an allowed model"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("(1 have no allowed GPU model)"), std::string::npos) << p.reason;
  // Of "an allowed model" only where a model was left out (a trial's workload that named
  // none read it).
  const PodPlacement any = placer.Place(s, Req(s, Whole(8)), rng);
  EXPECT_NE(any.reason.find("2 lack a free GPU"), std::string::npos) << any.reason;
  EXPECT_EQ(any.reason.find("allowed model"), std::string::npos) << any.reason;
  // A node held whole (as the scheduler holds a cordoned or NotReady one) is said to have no
  // room at all, not to lack CPU.
  Fleet three = FleetOf(Nodes("h", 3, 8));
  ClusterState t(three);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(PlaceAndApply(t, placer, Req(t, Whole(8)), rng).outcome, Outcome::kPlaced);
  PodSet whole_node = CpuOnly(t.node(2).cpu.value());
  whole_node.memory = t.node(2).memory;
  Assignment held;
  held.node = 2;
  t.Apply(held, Req(t, whole_node));
  const PodPlacement q = placer.Place(t, Req(t, Whole(1)), rng);
  EXPECT_NE(q.reason.find("0 lack CPU"), std::string::npos) << q.reason;
  EXPECT_NE(q.reason.find("1 have no room at all"), std::string::npos) << q.reason;
}

// Why a pod of whole GPUs finds no node: unused GPUs scattered over nodes, each with too few, and
// nodes an exclusiveNodes tenant holds or that run others' pods, each said as such.
TEST(Placer, ExplainNamesScatteredGpusAndExclusiveNodes) {
  Fleet fleet = FleetOf(Nodes("h", 2, 8));
  ClusterState s(fleet, {MakeTenant("acme", TrustLevel::kStandard),
                         MakeTenant("guest", TrustLevel::kUntrusted, "", true)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1), "acme"), rng).outcome, Outcome::kPlaced);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1), "guest"), rng).outcome, Outcome::kPlaced);
  // Each node has 7 unused GPUs: acme's 8-GPU pod fits neither (one is guest's own).
  const PodPlacement acme = placer.Explain(s, Req(s, Whole(8), "acme"));
  EXPECT_EQ(acme.outcome, Outcome::kPending);
  EXPECT_NE(acme.reason.find("0 lack a free GPU"), std::string::npos) << acme.reason;
  EXPECT_NE(acme.reason.find("1 have 7 unused GPUs between them but fewer than the 8 it needs "
                             "on one node"),
            std::string::npos)
      << acme.reason;
  EXPECT_NE(acme.reason.find("1 are held by another tenant's exclusiveNodes"), std::string::npos)
      << acme.reason;
  const PodPlacement guest = placer.Explain(s, Req(s, Whole(8), "guest"));
  EXPECT_NE(guest.reason.find("1 run other tenants' pods (its tenant asks for nodes of its own"),
            std::string::npos)
      << guest.reason;
  // A workload of several pods is told how many fit and why the next does not.
  const PodRequest four = Req(s, Whole(4), "acme");
  const GangPlacement two = placer.PlaceGang(s, {four, four, four}, TopologyConstraint{}, rng);
  EXPECT_EQ(two.outcome, Outcome::kPending);
  EXPECT_NE(two.reason.find("the fleet has no room for all 3 pods at once (1 fit; for the next, "),
            std::string::npos)
      << two.reason;
  EXPECT_NE(two.reason.find("1 are held by another tenant's exclusiveNodes"), std::string::npos)
      << two.reason;
}

// A memory-only share takes, of each GPU, the share its memory is of that GPU: 8Gi is half a
// 16Gi T4 but a tenth of an 80Gi H100, so it still fits an H100 with 150m of compute left (a
// user-style trial saw 10Gi take 417m of an H200, as of the smallest GPU that held it).
TEST(Placer, AMemoryOnlyShareTakesItsMemorysShareOfTheGpuItLandsOn) {
  Fleet fleet = FleetOf({GpuNode("a", 1, "H100"), GpuNode("b", 1, "T4")});
  // (Every policy scores it by what it takes there: fabrica's read past its table with the
  // smallest GPU's share, a review found.)
  for (const char* name : {"bestfit", "fabrica", "fgd", "packing"}) {
    SCOPED_TRACE(name);
    ClusterState s(fleet, {MakeTenant("acme", TrustLevel::kStandard)});
    auto policy = MustMakePolicy(name);
    ASSERT_NE(policy, nullptr);
    Placer placer(*policy);
    Rng rng(1);
    PodSet mem_only = Fraction(0);
    mem_only.device.gpu_memory = MemoryMib(8 * 1024);
    const PodRequest req = Req(s, mem_only, "acme");
    EXPECT_EQ(req.gpu_milli, 500);  // (the most it takes: of the T4)
    EXPECT_EQ(s.FractionMilli(0, 0, req), 100);
    EXPECT_EQ(s.FractionMilli(1, 0, req), 500);
    ASSERT_EQ(
        PlaceAndApply(s, placer, Req(s, WithModels(Fraction(850), {"H100"}), "acme"), rng).outcome,
        Outcome::kPlaced);
    ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1), "acme"), rng).outcome, Outcome::kPlaced);
    const PodPlacement p = PlaceAndApply(s, placer, req, rng);
    ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
    EXPECT_EQ(p.assignment.node, 0);
    ASSERT_EQ(p.assignment.devices.size(), 1u);
    EXPECT_EQ(p.assignment.devices[0].milli, 100);
    EXPECT_EQ(s.allocated_gpu_milli(), 850 + 1000 + 100);
    // Another does not fit the H100's 50m left.
    EXPECT_NE(PlaceAndApply(s, placer, req, rng).outcome, Outcome::kPlaced);
    // A 20Gi share is told that the T4's GPUs are too small, not that they are in use.
    PodSet big = Fraction(0);
    big.device.gpu_memory = MemoryMib(20 * 1024);
    const PodPlacement waits = placer.Explain(s, Req(s, big, "acme"));
    EXPECT_NE(waits.reason.find("1 lack a free GPU, or a shared one"), std::string::npos)
        << waits.reason;
    EXPECT_NE(waits.reason.find("1 have GPUs with less than its 20Gi of memory"), std::string::npos)
        << waits.reason;
    s.Release(p.assignment, req);
    EXPECT_EQ(s.allocated_gpu_milli(), 1850);
  }
}

// A share that waits for GPU memory, where a GPU has the compute it needs, is told so, with the
// most memory free on one GPU (a trial read "lack a free GPU" of an L4 with 2Gi free for a 3Gi
// share: the why was only in the workloads' JSON).
TEST(Placer, AShareWaitingForGpuMemorySaysHowMuchIsFree) {
  Fleet fleet = FleetOf({GpuNode("l", 1, "L4")});
  ClusterState s(fleet, {MakeTenant("acme", TrustLevel::kStandard)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodSet hog = Fraction(100);
  hog.device.gpu_memory = MemoryMib(22 * 1024);
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, hog, "acme"), rng).outcome, Outcome::kPlaced);
  PodSet kv = Fraction(0);
  kv.device.gpu_memory = MemoryMib(3 * 1024);
  const PodPlacement waits = placer.Explain(s, Req(s, kv, "acme"));
  EXPECT_EQ(waits.outcome, Outcome::kPending);
  EXPECT_NE(waits.reason.find("0 lack a free GPU, or a shared one"), std::string::npos)
      << waits.reason;
  EXPECT_NE(waits.reason.find(", 1 have the compute but no GPU with its 3Gi of memory free (at "
                              "most 2Gi on one)"),
            std::string::npos)
      << waits.reason;
  // Short of compute too, it is a lack of a GPU as before.
  PodSet big = Fraction(950);
  big.device.gpu_memory = MemoryMib(3 * 1024);
  EXPECT_NE(placer.Explain(s, Req(s, big, "acme")).reason.find("1 lack a free GPU, or a shared"),
            std::string::npos);
}

// As many memory-only shares fit on a GPU as its memory holds: three of 8Gi on a 24Gi GPU
// (333m each; rounded up to 334m, a trial's six fitted two GPUs four times, not six, and the
// workload waited for ever).
TEST(Placer, AsManyMemoryOnlySharesFitAsTheGpusMemoryHolds) {
  Fleet fleet = FleetOf({GpuNode("l", 2, "L4")});
  ASSERT_EQ(fleet.nodes[0].devices[0].memory.value(), 24 * 1024);
  ClusterState s(fleet, {MakeTenant("acme", TrustLevel::kStandard)});
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodSet share = Fraction(0);
  share.device.gpu_memory = MemoryMib(8 * 1024);
  const PodRequest req = Req(s, share, "acme");
  EXPECT_EQ(req.gpu_milli, 333);
  EXPECT_EQ(req.total_charge_milli(), 333);
  const GangPlacement six =
      placer.PlaceGang(s, std::vector<PodRequest>(6, req), TopologyConstraint{}, rng);
  EXPECT_EQ(six.outcome, Outcome::kPlaced) << six.reason;
  // (A seventh finds no memory left.)
  EXPECT_NE(placer.Place(s, req, rng).outcome, Outcome::kPlaced);
}

// A tenant with exclusiveNodes fills the nodes it holds before it takes another: each node it
// touches is kept from every other tenant (a trial saw two pods that fit one node hold two).
TEST(Placer, ATenantWithExclusiveNodesFillsTheNodesItHoldsFirst) {
  Fleet fleet = FleetOf(Nodes("n", 4, 8));
  ClusterState s(fleet, {MakeTenant("guest", TrustLevel::kUntrusted, "", true),
                         MakeTenant("acme", TrustLevel::kStandard)});
  auto policy = MustMakePolicy("random");  // (any node equally likely, but for this rule)
  Placer placer(*policy);
  Rng rng(7);
  std::set<int> nodes;
  for (int i = 0; i < 8; ++i) {
    const PodPlacement p = PlaceAndApply(s, placer, Req(s, Whole(1), "guest"), rng);
    ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
    nodes.insert(p.assignment.node);
  }
  EXPECT_EQ(nodes.size(), 1u);
  // The ninth takes a second node; another tenant's work is placed as before.
  EXPECT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1), "guest"), rng).outcome, Outcome::kPlaced);
  EXPECT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1), "acme"), rng).outcome, Outcome::kPlaced);
}

TEST(Placer, InfeasibleVersusPending) {
  Fleet fleet = FleetOf(Nodes("n", 2, 8));
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  // No node has 16 GPUs: never.
  PodPlacement never = placer.Place(s, Req(s, Whole(16)), rng);
  EXPECT_EQ(never.outcome, Outcome::kInfeasible);
  EXPECT_NE(never.reason.find("16 GPUs"), std::string::npos) << never.reason;
  PodPlacement cpu = placer.Place(s, Req(s, CpuOnly(100000)), rng);
  EXPECT_EQ(cpu.outcome, Outcome::kInfeasible);
  EXPECT_NE(cpu.reason.find("CPU"), std::string::npos) << cpu.reason;

  // Fill the fleet: a one-GPU pod now waits.
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(8)), rng).outcome, Outcome::kPlaced);
  }
  EXPECT_EQ(s.allocated_gpu_milli(), s.total_gpu_milli());
  PodPlacement later = placer.Place(s, Req(s, Whole(1)), rng);
  EXPECT_EQ(later.outcome, Outcome::kPending);
  EXPECT_NE(later.reason.find("2 lack a free GPU"), std::string::npos) << later.reason;
  // Explain agrees with Place.
  EXPECT_EQ(placer.Explain(s, Req(s, Whole(1))).outcome, Outcome::kPending);
  EXPECT_EQ(placer.Explain(s, Req(s, Whole(16))).outcome, Outcome::kInfeasible);
  // A CPU-only pod still fits beside the GPU pods.
  EXPECT_EQ(placer.Place(s, Req(s, CpuOnly(1000)), rng).outcome, Outcome::kPlaced);
}

TEST(Placer, FractionLargerThanAnyGpuMemoryIsInfeasible) {
  Fleet fleet = FleetOf({GpuNode("n", 2)});
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  PodSet ps = Fraction(100);
  ps.device.gpu_memory = MemoryMib(100 * 1024);
  PodPlacement p = placer.Place(s, Req(s, ps), rng);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_NE(p.reason.find("100Gi"), std::string::npos) << p.reason;
  // A GPU whose memory is not tracked (0) does not refuse it.
  Node untracked = GpuNode("u", 1);
  untracked.devices[0].memory = MemoryMib(0);
  Fleet with_untracked = FleetOf({GpuNode("n", 2), untracked});
  ClusterState s2(with_untracked);
  PodPlacement q = placer.Place(s2, Req(s2, ps), rng);
  ASSERT_EQ(q.outcome, Outcome::kPlaced) << q.reason;
  EXPECT_EQ(q.assignment.node, 1);
}

TEST(Placer, InfeasibleMigProfileNamesIt) {
  Fleet fleet = FleetOf({MigNode("m", 1), GpuNode("g", 1, "A100")});
  ClusterState s(fleet);
  std::string why;
  PodRequest req = Req(s, WithModels(Mig("3g.40gb"), {"A100"}));
  EXPECT_FALSE(FitsSomeEmptyNode(s, req, &why));
  // (Of the models it allows: node m offers it; a trial read "no node offers" beside it.)
  EXPECT_EQ(why,
            "no node with a GPU of a model it allows offers the MIG profile 3g.40gb (nodes of "
            "other models do)");
  EXPECT_TRUE(FitsSomeEmptyNode(s, Req(s, Mig("3g.40gb")), nullptr));
}

// Nodes with no slice of the profile asked are not said to lack a free one (a trial read "10
// lack a free 3g.40gb slice" of a fleet with two MIG nodes and eight without MIG).
TEST(Placer, NodesWithoutTheProfileAreNotSaidToLackAFreeSlice) {
  Fleet fleet = FleetOf({MigNode("m", 1), GpuNode("g1", 2, "H100"), GpuNode("g2", 2, "H100")});
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Mig("3g.40gb")), rng).outcome, Outcome::kPlaced);
  const PodPlacement p = placer.Place(s, Req(s, Mig("3g.40gb")), rng);
  ASSERT_EQ(p.outcome, Outcome::kPending);
  EXPECT_NE(p.reason.find("1 lack a free 3g.40gb slice it may use"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find(", 2 offer no 3g.40gb slice"), std::string::npos) << p.reason;
  // Nor is a MIG node said to lack what a share or whole GPUs ask (a trial read "have GPUs with
  // less than its 10Gi of memory" of one with 80Gi GPUs): its GPUs take MIG pods only.
  for (int g = 0; g < 2; ++g)
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Whole(1)), rng).outcome, Outcome::kPlaced);
  PodSet share = Fraction(500);
  share.device.gpu_memory = MemoryMib(10 * 1024);
  for (const PodSet& ps : {share, Whole(1)}) {
    const PodPlacement q = placer.Place(s, Req(s, ps), rng);
    ASSERT_EQ(q.outcome, Outcome::kPending);
    EXPECT_NE(q.reason.find(", 1 have only MIG-partitioned GPUs (they take pods that ask for a "
                            "MIG slice)"),
              std::string::npos)
        << q.reason;
    EXPECT_EQ(q.reason.find("less than its"), std::string::npos) << q.reason;
  }
}

TEST(Placer, TiesGoToTheLowestNodeIndex) {
  Fleet fleet = FleetOf(Nodes("n", 6, 4));
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  EXPECT_EQ(placer.Place(s, Req(s, Whole(1)), rng).assignment.node, 0);
  std::vector<int> only = {4, 2, 5};
  EXPECT_EQ(placer.PlaceIn(s, only, Req(s, Whole(1)), rng).assignment.node, 2);
}

TEST(Placer, EveryPolicyPlacesFeasibly) {
  Fleet fleet = FleetOf(
      {GpuNode("a", 8, "H100", 2), GpuNode("b", 8, "H100"), GpuNode("c", 2, "T4"), CpuNode("cpu")});
  ASSERT_EQ(PolicyNames().size(), 7u);
  for (const std::string& name : PolicyNames()) {
    ClusterState s(fleet);
    std::vector<TypicalPod> typical = {
        {Req(s, Whole(1)), 0.4}, {Req(s, Fraction(500)), 0.4}, {Req(s, CpuOnly(4000)), 0.2}};
    auto policy = MustMakePolicy(name, typical);
    ASSERT_NE(policy, nullptr);
    EXPECT_EQ(policy->name(), name);
    Placer placer(*policy);
    Rng rng(11);
    // The model-constrained pods come first: random-fit may later spread fractions over the
    // T4s too. The rest asks for 10.8 of the 16 H100s, which fits under any policy.
    const std::vector<PodSet> pods = {WithModels(Whole(1), {"T4"}),
                                      WithModels(Fraction(500), {"T4"}),
                                      Whole(2),
                                      Fraction(300),
                                      Fraction(700),
                                      CpuOnly(2000),
                                      Whole(4),
                                      Fraction(250),
                                      Whole(1),
                                      Fraction(900),
                                      Fraction(50),
                                      CpuOnly(500),
                                      Whole(1),
                                      Fraction(600)};
    int64_t expected_milli = 0;
    for (size_t i = 0; i < pods.size(); ++i) {
      PodRequest req = Req(s, pods[i]);
      PodPlacement p = placer.Place(s, req, rng);
      const std::string what = name + " pod " + std::to_string(i);
      ASSERT_EQ(p.outcome, Outcome::kPlaced) << what << ": " << p.reason;
      ExpectFeasible(s, p.assignment, req, what);
      if (req.model_mask != ~uint64_t{0}) {
        EXPECT_EQ(p.assignment.node, 2) << what;
      }
      s.Apply(p.assignment, req);
      expected_milli += req.total_gpu_milli();
    }
    EXPECT_EQ(s.allocated_gpu_milli(), expected_milli) << name;
    for (int n = 0; n < s.node_count(); ++n) {
      EXPECT_GE(s.free_cpu(n), 0) << name;
      for (const DeviceState& d : s.devices(n)) {
        EXPECT_GE(d.free_milli, 0) << name;
        EXPECT_GE(d.free_memory_mib, 0) << name;
      }
    }
  }
}

TEST(Placer, RandomPolicySpreadsOverFeasibleNodes) {
  Fleet fleet = FleetOf(Nodes("n", 4, 2));
  ClusterState s(fleet);
  auto policy = MustMakePolicy("random");
  ASSERT_TRUE(policy->uniform_random());
  Placer placer(*policy);
  Rng rng(5);
  std::map<int, int> hits;
  for (int i = 0; i < 400; ++i) ++hits[placer.Place(s, Req(s, Whole(1)), rng).assignment.node];
  ASSERT_EQ(hits.size(), 4u);
  for (const auto& [node, count] : hits) EXPECT_GT(count, 50) << "node " << node;
  // The same seed makes the same choices.
  Rng a(9), b(9);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(placer.Place(s, Req(s, Whole(1)), a).assignment.node,
              placer.Place(s, Req(s, Whole(1)), b).assignment.node);
  }
}

TEST(MakePolicy, UnknownNameListsTheKnownOnes) {
  Result<std::unique_ptr<Policy>> p = MakePolicy("nope");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("'nope'"), std::string::npos) << p.status().message();
  for (const std::string& name : PolicyNames()) {
    EXPECT_NE(p.status().message().find(name), std::string::npos) << name;
  }
}

TEST(Placer, WholeGpusStayOnOneNumaNodeWhenPossible) {
  Fleet fleet = FleetOf({GpuNode("n", 8, "H100", 2)});  // GPUs 0-3 on NUMA 0, 4-7 on NUMA 1
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  auto place = [&](int gpus) {
    return DevicesOf(PlaceAndApply(s, placer, Req(s, Whole(gpus)), rng).assignment);
  };
  EXPECT_EQ(place(1), (std::vector<int>{0}));
  // NUMA 0 has three GPUs left, so four come from NUMA 1 rather than from the lowest indexes.
  EXPECT_EQ(place(4), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(place(2), (std::vector<int>{1, 2}));

  ClusterState t(fleet);
  auto place_t = [&](int gpus) {
    return DevicesOf(PlaceAndApply(t, placer, Req(t, Whole(gpus)), rng).assignment);
  };
  EXPECT_EQ(place_t(3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(place_t(2), (std::vector<int>{4, 5}));
  // One GPU left on NUMA 0 and two on NUMA 1: three GPUs must span both.
  EXPECT_EQ(place_t(3), (std::vector<int>{3, 6, 7}));
}

// `fabrica` counts the waste a share leaves once common shares fill the GPU: a 320m share does
// not go beside a 470m one (a 210m gap no common share fills) when a fresh GPU would leave 680m
// for the common 650m shares. A size under a tenth as frequent as the top one (210m here) is no
// partner. FGD, which looks one pod ahead, takes the 470m GPU.
TEST(Placer, FabricaLeavesGapsThatCommonSharesFill) {
  Fleet fleet = FleetOf({GpuNode("n", 2)});
  for (const auto& [name, device] : {std::pair<std::string, int>{"fabrica", 1}, {"fgd", 0}}) {
    ClusterState s(fleet);
    const std::vector<TypicalPod> typical = {{Req(s, Fraction(810)), 0.35},
                                             {Req(s, Fraction(470)), 0.3},
                                             {Req(s, Fraction(650)), 0.2},
                                             {Req(s, Fraction(320)), 0.15},
                                             // Rare: were it a partner, the 210m gap would fill.
                                             {Req(s, Fraction(210)), 0.02}};
    auto policy = MustMakePolicy(name, typical);
    Placer placer(*policy);
    Rng rng(1);
    EXPECT_EQ(DevicesOf(PlaceAndApply(s, placer, Req(s, Fraction(470)), rng).assignment),
              (std::vector<int>{0}));
    EXPECT_EQ(DevicesOf(PlaceAndApply(s, placer, Req(s, Fraction(320)), rng).assignment),
              (std::vector<int>{device}))
        << name;
  }
}

// CPUs count per NUMA node: a pod's GPUs go to a NUMA node that also has CPU for it, the
// assignment says which NUMA node its CPUs are on, and a pod whose GPUs' NUMA node has no CPU
// room left is not pinned there (-1). The books balance after release.
TEST(Placer, GpusAndCpusShareANumaNodeWhenItHasRoom) {
  Fleet fleet = FleetOf({GpuNode("n", 8, "H100", 2)});  // 64 CPUs: 32 per NUMA node
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  EXPECT_EQ(s.free_cpu_numa(0, 0), 32000);
  EXPECT_EQ(s.free_cpu_numa(0, 1), 32000);
  const PodRequest a = Req(s, Whole(2, 30000));
  PodPlacement pa = PlaceAndApply(s, placer, a, rng);
  EXPECT_EQ(DevicesOf(pa.assignment), (std::vector<int>{0, 1}));
  EXPECT_EQ(pa.assignment.numa, 0);
  EXPECT_EQ(s.free_cpu_numa(0, 0), 2000);
  // NUMA 0 still has GPUs 2 and 3 but only 2 CPUs: the next pod goes to NUMA 1 whole.
  const PodRequest b = Req(s, Whole(2, 8000));
  PodPlacement pb = PlaceAndApply(s, placer, b, rng);
  EXPECT_EQ(DevicesOf(pb.assignment), (std::vector<int>{4, 5}));
  EXPECT_EQ(pb.assignment.numa, 1);
  EXPECT_EQ(s.free_cpu_numa(0, 1), 24000);
  // 4 GPUs but 26 CPUs: no NUMA node has both; the node has both, so it is placed, unpinned.
  const PodRequest c = Req(s, Whole(4, 26000));
  PodPlacement pc = PlaceAndApply(s, placer, c, rng);
  ASSERT_EQ(pc.outcome, Outcome::kPlaced) << pc.reason;
  EXPECT_EQ(pc.assignment.numa, -1);
  // A spread pod is charged evenly; the books still sum to the node's free CPU, and releasing
  // it gives back exactly what it took, wherever pinned pods sit.
  EXPECT_EQ(s.free_cpu_numa(0, 0) + s.free_cpu_numa(0, 1), s.free_cpu(0));
  s.Release(pc.assignment, c);
  EXPECT_EQ(s.free_cpu_numa(0, 0), 2000);
  EXPECT_EQ(s.free_cpu_numa(0, 1), 24000);
  s.Release(pb.assignment, b);
  s.Release(pa.assignment, a);
  EXPECT_EQ(s.free_cpu_numa(0, 0), 32000);
  EXPECT_EQ(s.free_cpu_numa(0, 1), 32000);
}

// ---------------------------------------------------------------------------------------------
// Placer: gangs and topology

// Two leaves of two four-GPU nodes each: a-0, a-1 on leaf-a (nodes 0, 1), b-0, b-1 on leaf-b.
Fleet TwoLeaves() {
  std::vector<Node> nodes = Nodes("a", 2, 4, "H100", "leaf-a");
  for (Node& n : Nodes("b", 2, 4, "H100", "leaf-b")) nodes.push_back(n);
  return FleetOf(nodes);
}

TEST(PlaceGang, AllOrNothing) {
  Fleet fleet = FleetOf(Nodes("n", 2, 4));
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  // Occupy a GPU so that the state is not trivially the initial one.
  ASSERT_EQ(PlaceAndApply(s, placer, Req(s, Fraction(500)), rng).outcome, Outcome::kPlaced);
  const std::string before = Snapshot(s);

  // Three pods of three GPUs: the first two fit (one per node), the third cannot.
  std::vector<PodRequest> too_big(3, Req(s, Whole(3)));
  GangPlacement g = placer.PlaceGang(s, too_big, {}, rng);
  EXPECT_EQ(g.outcome, Outcome::kPending);
  EXPECT_TRUE(g.pods.empty());
  EXPECT_NE(g.reason.find("3 pods"), std::string::npos) << g.reason;
  EXPECT_EQ(Snapshot(s), before);

  std::vector<PodRequest> fits(2, Req(s, Whole(3)));
  GangPlacement ok = placer.PlaceGang(s, fits, {}, rng);
  ASSERT_EQ(ok.outcome, Outcome::kPlaced) << ok.reason;
  ASSERT_EQ(ok.pods.size(), 2u);
  EXPECT_NE(ok.pods[0].node, ok.pods[1].node);
  EXPECT_EQ(s.allocated_gpu_milli(), 500 + 6000);  // applied on success

  std::vector<PodRequest> never = {Req(s, Whole(1)), Req(s, Whole(5))};
  GangPlacement inf = placer.PlaceGang(s, never, {}, rng);
  EXPECT_EQ(inf.outcome, Outcome::kInfeasible);
  EXPECT_NE(inf.reason.find("5 GPUs"), std::string::npos) << inf.reason;
}

TEST(PlaceGang, RequiredLeafLandsInOneLeaf) {
  Fleet fleet = TwoLeaves();
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  std::vector<PodRequest> gang(3, Req(s, Whole(2)));  // six GPUs; a leaf has eight
  GangPlacement g = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  ASSERT_EQ(g.outcome, Outcome::kPlaced) << g.reason;
  ASSERT_EQ(g.pods.size(), 3u);
  EXPECT_EQ(g.domains_used, 1);
  const int leaf = s.domain_of(g.pods[0].node, TopologyLevel::kLeaf);
  for (const Assignment& a : g.pods) EXPECT_EQ(s.domain_of(a.node, TopologyLevel::kLeaf), leaf);
  // The gang took a leaf; a second one fits only in the other.
  GangPlacement g2 = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  ASSERT_EQ(g2.outcome, Outcome::kPlaced) << g2.reason;
  for (const Assignment& a : g2.pods) EXPECT_NE(s.domain_of(a.node, TopologyLevel::kLeaf), leaf);
}

// A gang that may use one model only is told of the free GPUs of that model, not of every
// GPU of the domain (a user-style review read "needs 24; the largest free one has 34", the 34
// counting H200s and L4s an H100 gang could not use).
TEST(PlaceGang, RequiredDomainReasonCountsTheModelsItMayUse) {
  std::vector<Node> nodes = Nodes("a", 2, 4, "H100", "leaf-a");
  for (Node& n : Nodes("b", 4, 4, "L4", "leaf-a")) nodes.push_back(n);
  for (Node& n : Nodes("c", 1, 4, "H100", "leaf-b")) nodes.push_back(n);
  Fleet fleet = FleetOf(nodes);
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  s.Apply({0, {ShareOn(s, 0, 0, Req(s, Whole(1)))}}, Req(s, Whole(1)));
  std::vector<PodRequest> gang(2, Req(s, WithModels(Whole(4), {"H100"})));
  GangPlacement g = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  EXPECT_EQ(g.outcome, Outcome::kPending);
  EXPECT_NE(g.reason.find("needs 8 GPUs in one leaf domain; the most free in one, of the models "
                          "it may use, is 7 (leaf-a)"),
            std::string::npos)
      << g.reason;
  // (Each number names its domain: a trial read two domains' numbers as one's.)
  EXPECT_NE(g.reason.find("at most 1 of its 2 pods fit in one now (leaf-a)"), std::string::npos)
      << g.reason;
}

// A gang of MIG slices that needs one leaf places there: a MIG GPU's free slices count as
// its room (a node's free GPUs leave MIG GPUs out, so such a gang never found a leaf).
TEST(PlaceGang, RequiredLeafGangOfMigSlicesPlaces) {
  std::vector<Node> nodes;
  for (const char* leaf : {"leaf-a", "leaf-b"})
    for (int i = 0; i < 2; ++i) {
      Node n = MigNode(std::string(leaf) + "-" + std::to_string(i), 2);
      n.leaf = leaf;
      nodes.push_back(n);
    }
  Fleet fleet = FleetOf(nodes);
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  // Six slices: a leaf holds eight (two nodes of two GPUs of two slices).
  std::vector<PodRequest> gang(6, Req(s, Mig("3g.40gb")));
  GangPlacement g = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  ASSERT_EQ(g.outcome, Outcome::kPlaced) << g.reason;
  const int leaf = s.domain_of(g.pods[0].node, TopologyLevel::kLeaf);
  for (const Assignment& a : g.pods) EXPECT_EQ(s.domain_of(a.node, TopologyLevel::kLeaf), leaf);
  // Two slices are left in that leaf: a second gang of six takes the other leaf.
  GangPlacement g2 = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  ASSERT_EQ(g2.outcome, Outcome::kPlaced) << g2.reason;
  for (const Assignment& a : g2.pods) EXPECT_NE(s.domain_of(a.node, TopologyLevel::kLeaf), leaf);
  // A third waits, told of the slices' room in GPUs.
  GangPlacement g3 = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  EXPECT_EQ(g3.outcome, Outcome::kPending);
  EXPECT_NE(g3.reason.find("is 856m ("), std::string::npos) << g3.reason;
}

// ... counting only free slices of the profiles it asks: seventeen leaves of free 1g.10gb slices
// are no room for a gang of 3g.40gb slices (counted, they came first among the 16 leaves tried,
// and the one leaf that could hold it was never tried).
TEST(PlaceGang, AGangOfSlicesCountsOnlyTheProfilesItAsks) {
  std::vector<Node> nodes;
  for (int i = 0; i < 17; ++i) {
    Node n = GpuNode("small-" + std::to_string(i), 1, "H100");
    n.leaf = "leaf-" + std::to_string(i);
    n.devices[0].mig_slices = std::vector<std::string>(7, "1g.10gb");
    nodes.push_back(n);
  }
  Node big = MigNode("big", 2);  // two GPUs of two 3g.40gb slices each
  big.leaf = "leaf-big";
  nodes.push_back(big);
  Fleet fleet = FleetOf(nodes);
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  std::vector<PodRequest> gang(2, Req(s, Mig("3g.40gb")));
  GangPlacement g = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  ASSERT_EQ(g.outcome, Outcome::kPlaced) << g.reason;
  EXPECT_EQ(g.pods[0].node, 17);
}

// A gang of whole GPUs reads the whole GPUs free in a domain: a share's rest is no room for it
// (a trial's 4-GPU gang read 7 free in a leaf of two 4-GPU nodes with a 500m share on each).
TEST(PlaceGang, AWholeGpuGangsReasonCountsWholeFreeGpusOnly) {
  Fleet fleet = TwoLeaves();
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  for (int n : {0, 1})
    s.Apply({n, {ShareOn(s, n, 0, Req(s, Fraction(500)))}}, Req(s, Fraction(500)));
  for (int n : {2, 3})
    s.Apply({n,
             {ShareOn(s, n, 0, Req(s, Whole(3))), ShareOn(s, n, 1, Req(s, Whole(3))),
              ShareOn(s, n, 2, Req(s, Whole(3)))}},
            Req(s, Whole(3)));
  std::vector<PodRequest> gang(2, Req(s, Whole(4)));
  GangPlacement g = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  EXPECT_EQ(g.outcome, Outcome::kPending);
  EXPECT_NE(g.reason.find("the most free in one, of the models it may use, is 6 (leaf-a)"),
            std::string::npos)
      << g.reason;
  // A gang of shares reads the shares' rest.
  std::vector<PodRequest> shares(16, Req(s, Fraction(500)));
  g = placer.PlaceGang(s, shares, {TopologyLevel::kLeaf, true}, rng);
  EXPECT_EQ(g.outcome, Outcome::kPending);
  EXPECT_NE(g.reason.find("is 7 (leaf-a)"), std::string::npos) << g.reason;
}

TEST(PlaceGang, RequiredLeafWithoutRoomIsPendingAndPreferredSpans) {
  Fleet fleet = TwoLeaves();
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  // Three GPUs taken in each leaf leave five per leaf, ten in all.
  s.Apply({0,
           {ShareOn(s, 0, 0, Req(s, Whole(3))), ShareOn(s, 0, 1, Req(s, Whole(3))),
            ShareOn(s, 0, 2, Req(s, Whole(3)))}},
          Req(s, Whole(3)));
  s.Apply({2,
           {ShareOn(s, 2, 0, Req(s, Whole(3))), ShareOn(s, 2, 1, Req(s, Whole(3))),
            ShareOn(s, 2, 2, Req(s, Whole(3)))}},
          Req(s, Whole(3)));
  const std::string before = Snapshot(s);
  std::vector<PodRequest> gang(3, Req(s, Whole(2)));

  GangPlacement required = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  EXPECT_EQ(required.outcome, Outcome::kPending);
  EXPECT_NE(required.reason.find("leaf"), std::string::npos) << required.reason;
  EXPECT_NE(required.reason.find("needs 6 GPUs"), std::string::npos) << required.reason;
  EXPECT_NE(required.reason.find("the most free in one, of the models it may use, is 5 (leaf-a)"),
            std::string::npos)
      << required.reason;
  // (Five free GPUs, but one of them alone on its node: two of the 2-GPU pods fit.)
  EXPECT_NE(required.reason.find("at most 2 of its 3 pods fit in one now (leaf-a)"),
            std::string::npos)
      << required.reason;
  EXPECT_EQ(Snapshot(s), before);

  GangPlacement preferred = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, false}, rng);
  ASSERT_EQ(preferred.outcome, Outcome::kPlaced) << preferred.reason;
  EXPECT_EQ(preferred.domains_used, 2);
  EXPECT_EQ(s.allocated_gpu_milli(), 6000 + 6000);
}

TEST(PlaceGang, RequiredDomainSmallerThanTheGangIsInfeasible) {
  Fleet fleet = TwoLeaves();
  ClusterState s(fleet);
  auto policy = MustMakePolicy("bestfit");
  Placer placer(*policy);
  Rng rng(1);
  std::vector<PodRequest> gang(3, Req(s, Whole(4)));
  GangPlacement g = placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, true}, rng);
  EXPECT_EQ(g.outcome, Outcome::kInfeasible);
  EXPECT_NE(g.reason.find("the largest has 8 GPUs"), std::string::npos) << g.reason;
  EXPECT_EQ(s.allocated_gpu_milli(), 0);
  // Preferred, the same gang spans both leaves.
  EXPECT_EQ(placer.PlaceGang(s, gang, {TopologyLevel::kLeaf, false}, rng).outcome,
            Outcome::kPlaced);
}

// ---------------------------------------------------------------------------------------------
// Fragmentation (FGD)

TypicalPod Typical(int num_gpu, int64_t gpu_milli, int64_t cpu_milli, double weight,
                   int64_t memory_mib = 0) {
  TypicalPod t;
  t.pod.num_gpu = num_gpu;
  t.pod.gpu_milli = gpu_milli;
  t.pod.cpu_milli = cpu_milli;
  t.pod.memory_mib = memory_mib;
  t.pod.kind = num_gpu == 0        ? DeviceKind::kNone
               : gpu_milli == 1000 ? DeviceKind::kWhole
                                   : DeviceKind::kFraction;
  t.weight = weight;
  return t;
}

TEST(FragModel, HandComputedFragments) {
  const int64_t free[] = {1000, 300};
  // One whole-GPU typical pod: the 300m GPU is the only one it cannot use.
  FragModel whole({Typical(1, 1000, 500, 1.0)});
  EXPECT_DOUBLE_EQ(whole.Fragment(0, 1000, free, 2), 300);
  // Short of CPU, the pod cannot run at all, so all 1300m idle count.
  EXPECT_DOUBLE_EQ(whole.Fragment(0, 400, free, 2), 1300);
  // It needs two whole GPUs and the node has one free: everything is fragment.
  FragModel two({Typical(2, 1000, 500, 1.0)});
  EXPECT_DOUBLE_EQ(two.Fragment(0, 1000, free, 2), 1300);
  // A 200m pod fits on both GPUs: nothing is fragment.
  FragModel small({Typical(1, 200, 500, 1.0)});
  EXPECT_DOUBLE_EQ(small.Fragment(0, 1000, free, 2), 0);
  // A CPU-only pod can use no GPU.
  FragModel cpu({Typical(0, 0, 500, 1.0)});
  EXPECT_DOUBLE_EQ(cpu.Fragment(0, 1000, free, 2), 1300);
  // Weighted mix: 0.5 * 300 + 0.25 * 0 + 0.25 * 1300.
  FragModel mix({Typical(1, 1000, 500, 0.5), Typical(1, 200, 500, 0.25), Typical(0, 0, 500, 0.25)});
  EXPECT_DOUBLE_EQ(mix.Fragment(0, 1000, free, 2), 150 + 0 + 325);
  // Same shape, different CPU: the 2000m pod does not fit in 1000m CPU, the 500m one does.
  FragModel cpus({Typical(1, 1000, 500, 0.5), Typical(1, 1000, 2000, 0.5)});
  EXPECT_DOUBLE_EQ(cpus.Fragment(0, 1000, free, 2), 0.5 * 300 + 0.5 * 1300);
  // A node with nothing idle has no fragment.
  const int64_t full[] = {0, 0};
  EXPECT_DOUBLE_EQ(mix.Fragment(0, 1000, full, 2), 0);
}

TEST(FragModel, ModelAndMemory) {
  const int64_t free[] = {1000, 300};
  TypicalPod only_model_1 = Typical(1, 1000, 500, 1.0);
  only_model_1.pod.model_mask = uint64_t{1} << 1;
  FragModel f({only_model_1});
  EXPECT_DOUBLE_EQ(f.Fragment(1, 1000, free, 2), 300);
  EXPECT_DOUBLE_EQ(f.Fragment(0, 1000, free, 2), 1300);  // a model it may not use
  // Memory counts only when given: 4Gi does not fit in 2Gi free.
  FragModel mem({Typical(1, 1000, 500, 1.0, 4096)});
  EXPECT_DOUBLE_EQ(mem.Fragment(0, 1000, free, 2), 300);
  EXPECT_DOUBLE_EQ(mem.Fragment(0, 1000, free, 2, 8192), 300);
  EXPECT_DOUBLE_EQ(mem.Fragment(0, 1000, free, 2, 2048), 1300);
  EXPECT_TRUE(FragModel({}).empty());
  EXPECT_FALSE(mem.empty());
}

TEST(TypicalClasses, PopularityCutAndRenormalisation) {
  const PodClassKey a{1000, 1000, 1, ""}, b{2000, 500, 1, ""}, c{4000, 0, 0, ""};
  std::vector<PodClassKey> pods;
  for (int i = 0; i < 5; ++i) pods.push_back(a);
  for (int i = 0; i < 3; ++i) pods.push_back(b);
  for (int i = 0; i < 2; ++i) pods.push_back(c);

  auto all = TypicalClasses(pods, 1.0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].first, a);
  EXPECT_DOUBLE_EQ(all[0].second, 0.5);
  EXPECT_EQ(all[1].first, b);
  EXPECT_DOUBLE_EQ(all[1].second, 0.3);
  EXPECT_EQ(all[2].first, c);
  EXPECT_DOUBLE_EQ(all[2].second, 0.2);

  // 70% needs a (50%) and b (30%); their weights are renormalised to 5/8 and 3/8.
  auto most = TypicalClasses(pods, 0.7);
  ASSERT_EQ(most.size(), 2u);
  EXPECT_DOUBLE_EQ(most[0].second, 5.0 / 8);
  EXPECT_DOUBLE_EQ(most[1].second, 3.0 / 8);
  // 50% is covered by a alone.
  auto top = TypicalClasses(pods, 0.5);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].first, a);
  EXPECT_DOUBLE_EQ(top[0].second, 1.0);
  // Classes differ by model constraint too.
  EXPECT_EQ(TypicalClasses({a, PodClassKey{1000, 1000, 1, "T4"}}, 1.0).size(), 2u);
}

TEST(Rng, DeterministicAndInRange) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Uniform(7);
    EXPECT_EQ(x, b.Uniform(7));
    EXPECT_LT(x, 7u);
    differs |= x != c.Uniform(7);
    const double d = a.UniformDouble();
    b.UniformDouble();
    EXPECT_GE(d, 0.0);
    EXPECT_LT(d, 1.0);
  }
  EXPECT_TRUE(differs);
  // std::mt19937_64's 10000th output for the default seed is fixed by the C++ standard.
  Rng d(5489);
  uint64_t v = 0;
  for (int i = 0; i < 10000; ++i) v = d.Next();
  EXPECT_EQ(v, 9981545732273789042ULL);
}

}  // namespace
}  // namespace fabrica
