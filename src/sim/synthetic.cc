#include "sim/synthetic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <map>
#include <memory>

#include "sched/cluster_state.h"
#include "sched/frag.h"
#include "sched/placer.h"
#include "sched/policy.h"
#include "sched/rng.h"

namespace fabrica::sim {
namespace {

constexpr int64_t kMibPerGib = 1024;
constexpr int64_t kMilliPerCore = 1000;

// One kind of machine, as its vendor sells it.
struct MachineSpec {
  const char* system;  // name prefix and label value
  const char* model;
  int64_t gpu_memory_gib;
  int gpus;
  int64_t cpu_cores;  // hardware threads: 2 x 56-core Xeon with SMT on HGX, 2 x 72 Grace on GB200
  int64_t memory_gib;
  int nics;
};

constexpr MachineSpec kHgxH100{"h100", "H100", 80, 8, 224, 2048, 8};
constexpr MachineSpec kHgxH200{"h200", "H200", 141, 8, 224, 2048, 8};
constexpr MachineSpec kGb200Tray{"gb200", "GB200", 186, 4, 144, 960, 4};
constexpr int kGb200TraysPerRack = 18;
constexpr int kGb200GpusPerRack = kGb200TraysPerRack * 4;

// MIG geometries of a partitioned H100 node, chosen with the mix's MIG demand (DrawWorkload):
// GPUs 0-3 [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb], GPUs 4-5 [2g.20gb x 3, 1g.10gb], GPUs 6-7
// 7 x 1g.10gb, i.e. per node 4 slices of 3g, 10 of 2g and 24 of 1g.
const std::vector<std::string>& MigGeometry(int device) {
  static const std::vector<std::string> kMixed = {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"};
  static const std::vector<std::string> kMedium = {"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"};
  static const std::vector<std::string> kSmall(7, "1g.10gb");
  return device < 4 ? kMixed : device < 6 ? kMedium : kSmall;
}

std::string Numbered(const std::string& prefix, int value, int width) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%0*d", width, value);
  return prefix + buf;
}

Node MakeNode(const MachineSpec& spec, const std::string& name, const std::string& rack,
              const std::string& leaf, const std::string& nvlink_domain, bool mig) {
  Node node;
  node.name = NodeId(name);
  node.cpu = MilliCpu(spec.cpu_cores * kMilliPerCore);
  node.memory = MemoryMib(spec.memory_gib * kMibPerGib);
  node.rack = rack;
  node.leaf = leaf;
  node.nvlink_domain = nvlink_domain;
  node.numa_nodes = 2;
  node.labels["fabrica.dev/system"] = spec.system;
  // (fabrica.dev/gpu-model needs no label: every node answers to it, Node::Label.)
  if (mig) node.labels["fabrica.dev/mig"] = "mixed";
  for (int d = 0; d < spec.gpus; ++d) {
    Device dev;
    dev.uuid = "GPU-" + name + "-" + std::to_string(d);
    dev.model = spec.model;
    dev.memory = MemoryMib(spec.gpu_memory_gib * kMibPerGib);
    dev.mig_capable = !MigProfilesFor(spec.model).empty();
    if (mig) dev.mig_slices = MigGeometry(d);
    dev.numa_node = d * node.numa_nodes / spec.gpus;
    dev.pcie_root = "pcie" + std::to_string(d / 2);  // a PCIe switch per GPU pair and its NICs
    for (int p = 0; p < spec.gpus; ++p) {
      if (p != d) dev.nvlink_peers.push_back(p);  // NVSwitch: every GPU reaches every other
    }
    node.devices.push_back(std::move(dev));
  }
  for (int i = 0; i < spec.nics; ++i) {
    Nic nic;
    nic.name = "mlx5_" + std::to_string(i);
    nic.numa_node = i * node.numa_nodes / spec.nics;
    nic.leaf = leaf;
    nic.gbps = 400;
    node.nics.push_back(std::move(nic));
  }
  return node;
}

// Appends `nodes` machines of one kind, rack by rack and leaf by leaf. Each kind has its own
// racks and leaves, as separate purchases do. `rack_is_nvlink_domain` is the NVL72 case.
void AddSection(Fleet& fleet, const MachineSpec& spec, int64_t nodes, int nodes_per_rack,
                int racks_per_leaf, bool rack_is_nvlink_domain, double mig_share) {
  const std::string prefix = spec.system;
  for (int64_t i = 0; i < nodes; ++i) {
    const int rack_index = static_cast<int>(i / nodes_per_rack);
    const int slot = static_cast<int>(i % nodes_per_rack);
    const std::string rack = Numbered(prefix + "-r", rack_index, 4);
    const std::string leaf = Numbered(prefix + "-leaf", rack_index / racks_per_leaf, 3);
    const std::string name = Numbered(rack + "-n", slot, 2);
    // Whole racks go to MIG, spread evenly: rack r is MIG when floor((r+1)s) > floor(rs).
    const bool mig = std::floor((rack_index + 1) * mig_share) > std::floor(rack_index * mig_share);
    fleet.nodes.push_back(
        MakeNode(spec, name, rack, leaf, rack_is_nvlink_domain ? rack : name, mig));
  }
}

bool ShareOk(double s) { return s >= 0 && s <= 1; }

// A draw from weights (not necessarily normalised); zero weights are never picked.
// REQUIRES: some weight is positive.
int Pick(Rng& rng, std::initializer_list<int> weights) {
  int total = 0;
  for (int w : weights) total += w;
  int k = static_cast<int>(rng.Uniform(static_cast<uint64_t>(total)));
  int i = 0;
  for (int w : weights) {
    if (k < w) return i;
    k -= w;
    ++i;
  }
  return i - 1;
}

// A value drawn from (value, weight) pairs.
template <typename T>
T PickFrom(Rng& rng, std::initializer_list<std::pair<T, int>> choices) {
  int total = 0;
  for (const auto& c : choices) total += c.second;
  int k = static_cast<int>(rng.Uniform(static_cast<uint64_t>(total)));
  for (const auto& c : choices) {
    if (k < c.second) return c.first;
    k -= c.second;
  }
  return (choices.end() - 1)->first;
}

// Tenant names, in SyntheticTenants' order; the mix picks among them by index.
enum SyntheticTenant { kChat, kSearch, kResearch, kEval, kTrain, kPartner };
const char* const kTenantNames[] = {"chat", "search", "research", "eval", "llm-train", "partner"};

PodSet MakePodSet(const std::string& name, int count, int64_t cpu_cores, int64_t memory_gib,
                  DeviceRequest device) {
  PodSet ps;
  ps.name = name;
  ps.count = count;
  ps.cpu = MilliCpu(cpu_cores * kMilliPerCore);
  ps.memory = MemoryMib(memory_gib * kMibPerGib);
  ps.device = std::move(device);
  return ps;
}

DeviceRequest Whole(int gpus, std::vector<std::string> models = {}) {
  DeviceRequest r;
  r.kind = DeviceKind::kWhole;
  r.gpus = gpus;
  r.models = std::move(models);
  return r;
}

struct MixAvailability {
  bool h100 = false, h200 = false, gb200 = false, mig = false;
};

// One workload of the mix. The per-kind weights (per mille of workloads) are chosen so that each
// pool is asked for about its share of the fleet: of the requested GPUs about 45% are HGX
// training gangs, 27% whole-GPU pods and 12% fractions on HGX, 6% MIG slices (the MIG racks'
// share) and 10% GB200 (gangs and a tenth of the small whole-GPU pods). Inference and
// experiments ask for HGX models because operators keep NVL72 racks, through taints, for the work
// that needs them; without that, best-fit policies fill the 4-GPU trays first and starve the
// GB200 gangs.
Workload DrawWorkload(Rng& rng, int64_t index, const MixAvailability& avail) {
  enum Kind { kFraction, kWholePods, kMigSlices, kHgxGang, kGb200Gang };
  const bool hgx = avail.h100 || avail.h200;
  const Kind kind = static_cast<Kind>(Pick(
      rng, {hgx ? 356 : 0, hgx ? 292 : 0, avail.mig ? 317 : 0, hgx ? 30 : 0, avail.gb200 ? 5 : 0}));
  std::vector<std::string> hgx_models;
  if (avail.h100) hgx_models.push_back("H100");
  if (avail.h200) hgx_models.push_back("H200");
  Workload w;
  w.name = WorkloadId(Numbered("syn-", static_cast<int>(index), 6));
  auto tenant = [&](int t) {
    w.tenant = TenantId(kTenantNames[t]);
    w.queue = QueueId(kTenantNames[t]);
  };
  switch (kind) {
    case kFraction: {
      tenant(PickFrom<int>(rng, {{kChat, 40}, {kSearch, 30}, {kEval, 20}, {kPartner, 10}}));
      const bool half = rng.Uniform(2) == 1;
      DeviceRequest r;
      r.kind = DeviceKind::kFraction;
      r.gpu_milli = MilliGpu(half ? 500 : 250);
      r.gpu_memory = MemoryMib((half ? 40 : 20) * kMibPerGib);
      r.models = hgx_models;
      const int replicas = 1 + static_cast<int>(rng.Uniform(4));
      w.pod_sets.push_back(MakePodSet("server", replicas, half ? 8 : 4, half ? 64 : 32, r));
      break;
    }
    case kWholePods: {
      tenant(PickFrom<int>(rng, {{kResearch, 40}, {kEval, 30}, {kTrain, 15}, {kPartner, 15}}));
      const int gpus = PickFrom<int>(rng, {{1, 45}, {2, 25}, {4, 15}, {8, 15}});
      const bool gb200 = avail.gb200 && gpus <= 4 && rng.Uniform(10) == 0;
      const std::vector<std::string> models =
          gb200 ? std::vector<std::string>{"GB200"} : hgx_models;
      w.pod_sets.push_back(
          MakePodSet("worker", 1, int64_t{16} * gpus, int64_t{128} * gpus, Whole(gpus, models)));
      break;
    }
    case kMigSlices: {
      tenant(PickFrom<int>(rng, {{kChat, 30}, {kSearch, 20}, {kResearch, 30}, {kPartner, 20}}));
      const int slices = PickFrom<int>(rng, {{1, 63}, {2, 26}, {3, 11}});
      DeviceRequest r;
      r.kind = DeviceKind::kMig;
      r.mig_profile = slices == 1 ? "1g.10gb" : slices == 2 ? "2g.20gb" : "3g.40gb";
      const int replicas = 1 + static_cast<int>(rng.Uniform(4));
      w.pod_sets.push_back(
          MakePodSet("slice", replicas, int64_t{2} * slices, int64_t{16} * slices, r));
      break;
    }
    case kHgxGang: {
      tenant(PickFrom<int>(rng, {{kTrain, 70}, {kResearch, 30}}));
      const int nodes = PickFrom<int>(rng, {{2, 40}, {4, 30}, {8, 20}, {16, 10}});
      // A gang trains on one GPU model: mixing H100 and H200 would pace it at the slower one.
      const bool h200 = Pick(rng, {avail.h100 ? 2 : 0, avail.h200 ? 1 : 0}) == 1;
      w.gang = true;
      w.topology = {TopologyLevel::kLeaf, /*required=*/false};
      w.pod_sets.push_back(
          MakePodSet("trainer", nodes, 192, 1536, Whole(8, {h200 ? "H200" : "H100"})));
      break;
    }
    case kGb200Gang: {
      tenant(kTrain);
      const int nodes = PickFrom<int>(rng, {{4, 30}, {8, 30}, {16, 20}, {18, 20}});
      w.gang = true;
      w.topology = {TopologyLevel::kNvlinkDomain, /*required=*/false};
      w.pod_sets.push_back(MakePodSet("trainer", nodes, 128, 768, Whole(4, {"GB200"})));
      break;
    }
  }
  return w;
}

int64_t RequestedMilli(const Workload& w) {
  int64_t milli = 0;
  for (const PodSet& ps : w.pod_sets) milli += ps.device.TotalMilli().value() * ps.count;
  return milli;
}

// FGD's typical pods of the mix, weighted by pod count. MIG pods are left out: the fragment
// measure is about the free share of un-partitioned GPUs, which a MIG slice never uses, and a
// 3g slice counted as a 0.43 GPU share would steer fractions as if it could use their leftovers.
Result<std::vector<TypicalPod>> TypicalPods(const ClusterState& state,
                                            const std::vector<Workload>& workloads) {
  std::vector<PodRequest> requests;
  for (const Workload& w : workloads) {
    for (const PodSet& ps : w.pod_sets) {
      if (ps.device.kind == DeviceKind::kMig) continue;
      ASSIGN_OR_RETURN(PodRequest r, state.MakeRequest(ps, TenantId()));
      requests.insert(requests.end(), ps.count, r);
    }
  }
  return TypicalMix(requests, 0.95);
}

// A workload as placement sees it: every pod's request, in pod-set order.
struct Arrival {
  std::vector<PodRequest> pods;
  int64_t milli = 0;
  bool gang = false;
  TopologyConstraint topology;
};

double Pct(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// Whether every pod of a placed gang is in one domain of `level`.
bool OneDomain(const ClusterState& s, const std::vector<Assignment>& pods, TopologyLevel level) {
  for (const Assignment& a : pods) {
    if (s.domain_of(a.node, level) != s.domain_of(pods.front().node, level)) return false;
  }
  return true;
}

}  // namespace

Result<Fleet> MakeSyntheticFleet(const SyntheticFleetOptions& o) {
  if (o.gpus < 1) return InvalidArgument("gpus must be at least 1");
  if (o.gpus > 1'000'000) return InvalidArgument("gpus must be at most 1000000");
  if (!ShareOk(o.gb200_share) || !ShareOk(o.h200_share) || !ShareOk(o.mig_share)) {
    return InvalidArgument("gb200_share, h200_share and mig_share must be between 0 and 1");
  }
  if (o.hgx_nodes_per_rack < 1 || o.hgx_racks_per_leaf < 1 || o.gb200_racks_per_leaf < 1) {
    return InvalidArgument("nodes per rack and racks per leaf must be at least 1");
  }
  int64_t gb200_racks = std::llround(static_cast<double>(o.gpus) * o.gb200_share /
                                     static_cast<double>(kGb200GpusPerRack));
  gb200_racks = std::min(gb200_racks, o.gpus / kGb200GpusPerRack);
  const int64_t hgx_nodes = (o.gpus - gb200_racks * kGb200GpusPerRack) / kHgxH100.gpus;
  const int64_t h200_nodes = std::llround(static_cast<double>(hgx_nodes) * o.h200_share);
  Fleet fleet;
  fleet.nodes.reserve(hgx_nodes + gb200_racks * kGb200TraysPerRack);
  AddSection(fleet, kHgxH100, hgx_nodes - h200_nodes, o.hgx_nodes_per_rack, o.hgx_racks_per_leaf,
             false, o.mig_share);
  AddSection(fleet, kHgxH200, h200_nodes, o.hgx_nodes_per_rack, o.hgx_racks_per_leaf, false, 0);
  AddSection(fleet, kGb200Tray, gb200_racks * kGb200TraysPerRack, kGb200TraysPerRack,
             o.gb200_racks_per_leaf, true, 0);
  if (fleet.nodes.empty()) return InvalidArgument("gpus too few for one node");
  RETURN_IF_ERROR(ValidateFleet(fleet));
  return fleet;
}

std::vector<Tenant> SyntheticTenants() {
  auto make = [](int index, TrustLevel trust, const std::string& domain) {
    Tenant t;
    t.name = TenantId(kTenantNames[index]);
    t.trust = trust;
    t.trust_domain = domain;
    return t;
  };
  return {
      make(kChat, TrustLevel::kTrusted, "product"), make(kSearch, TrustLevel::kTrusted, "product"),
      make(kResearch, TrustLevel::kStandard, ""),   make(kEval, TrustLevel::kStandard, ""),
      make(kTrain, TrustLevel::kStandard, ""),      make(kPartner, TrustLevel::kUntrusted, "")};
}

std::vector<Workload> MakeSyntheticWorkloads(const Fleet& fleet, double load, uint64_t seed) {
  MixAvailability avail;
  for (const Node& node : fleet.nodes) {
    const std::string& model = node.gpu_model();
    avail.h100 |= model == "H100";
    avail.h200 |= model == "H200";
    avail.gb200 |= model == "GB200";
    // The mix's MIG profiles are H100's.
    avail.mig |= model == "H100" && !node.devices.empty() && node.devices.front().mig_enabled();
  }
  std::vector<Workload> out;
  if (!(avail.h100 || avail.h200 || avail.gb200) || !(load > 0)) return out;
  const int64_t target =
      static_cast<int64_t>(load * static_cast<double>(fleet.total_gpus() * kMilliPerGpu));
  Rng rng(seed);
  int64_t requested = 0;
  // A workload larger than what is left of the target is skipped, not an end: on a small fleet
  // one early 16-node gang would otherwise stop arrivals far below the load. Many skips in a row
  // mean the target is as good as reached.
  constexpr int kMaxSkips = 100;
  int skips = 0;
  for (int64_t i = 0; skips < kMaxSkips; ++i) {
    Workload w = DrawWorkload(rng, i, avail);
    const int64_t milli = RequestedMilli(w);
    if (requested + milli > target) {
      ++skips;
      continue;
    }
    skips = 0;
    requested += milli;
    out.push_back(std::move(w));
  }
  return out;
}

double SyntheticRunResult::pods_per_second() const {
  return place_seconds > 0 ? static_cast<double>(pods_arrived) / place_seconds : 0;
}
double SyntheticRunResult::pods_per_cpu_second() const {
  return place_cpu_seconds > 0 ? static_cast<double>(pods_arrived) / place_cpu_seconds : 0;
}
double SyntheticRunResult::decisions_per_second() const {
  return place_seconds > 0 ? static_cast<double>(decisions) / place_seconds : 0;
}
double SyntheticRunResult::leaf_local_pct() const {
  return Pct(leaf_gangs_one_leaf, leaf_gangs_placed);
}
double SyntheticRunResult::rack_local_pct() const {
  return Pct(leaf_gangs_one_rack, leaf_gangs_placed);
}
double SyntheticRunResult::numa_local_pct() const {
  return Pct(gpu_pods_numa_local, gpu_pods_placed);
}

double SyntheticRunResult::nvlink_local_pct() const {
  return Pct(nvlink_gangs_one_domain, nvlink_gangs_placed);
}

Result<SyntheticRunResult> RunSynthetic(const Fleet& fleet, const std::vector<Tenant>& tenants,
                                        const std::vector<Workload>& workloads,
                                        const SyntheticRunOptions& options) {
  if (fleet.total_gpus() == 0) return InvalidArgument("the fleet has no GPU");
  ClusterState state(fleet, tenants);
  ASSIGN_OR_RETURN(std::vector<TypicalPod> typical, TypicalPods(state, workloads));
  ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(options.policy, typical, &state));

  std::vector<Arrival> arrivals;
  arrivals.reserve(workloads.size());
  for (const Workload& w : workloads) {
    Arrival a;
    a.gang = w.gang;
    a.topology = options.topology_blind ? TopologyConstraint{} : w.topology;
    for (const PodSet& ps : w.pod_sets) {
      auto req = state.MakeRequest(ps, w.tenant);
      if (!req.ok()) return req.status().WithContext("workload " + w.name.str());
      for (int i = 0; i < ps.count; ++i) a.pods.push_back(*req);
      a.milli += ps.device.TotalMilli().value() * ps.count;
    }
    arrivals.push_back(std::move(a));
  }

  SyntheticRunResult r;
  r.policy = options.policy;
  r.topology_blind = options.topology_blind;
  r.nodes = static_cast<int64_t>(fleet.nodes.size());
  r.gpus = fleet.total_gpus();
  r.workloads = static_cast<int64_t>(workloads.size());
  Placer placer(*policy);
  Rng rng(options.seed ^ 0x9e3779b97f4a7c15ULL);
  using Clock = std::chrono::steady_clock;
  Clock::duration spent{};
  std::clock_t spent_cpu = 0;
  int64_t arrived_milli = 0;
  auto count_numa = [&](const Assignment& asg, const PodRequest& req) {
    if (req.num_gpu == 0) return;
    ++r.gpu_pods_placed;
    if (asg.numa < 0) return;
    const Node& node = state.node(asg.node);
    for (const DeviceShare& d : asg.devices)
      if (node.devices[d.device].numa_node != asg.numa) return;
    ++r.gpu_pods_numa_local;
  };
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const Arrival& a = arrivals[i];
    arrived_milli += a.milli;
    const int64_t pods = static_cast<int64_t>(a.pods.size());
    r.pods_arrived += pods;
    if (!a.gang) {
      for (const PodRequest& req : a.pods) {
        const auto t0 = Clock::now();
        const std::clock_t c0 = std::clock();
        PodPlacement p = placer.Place(state, req, rng);
        spent_cpu += std::clock() - c0;
        spent += Clock::now() - t0;
        ++r.decisions;
        if (p.outcome == Outcome::kPlaced) {
          state.Apply(p.assignment, req);
          ++r.pods_placed;
          count_numa(p.assignment, req);
        } else {
          ++r.pods_dropped;
        }
      }
      continue;
    }
    ++r.gangs_arrived;
    const auto t0 = Clock::now();
    const std::clock_t c0 = std::clock();
    GangPlacement g = placer.PlaceGang(state, a.pods, a.topology, rng);
    spent_cpu += std::clock() - c0;
    spent += Clock::now() - t0;
    ++r.decisions;
    if (g.outcome != Outcome::kPlaced) {
      r.pods_dropped += pods;
      continue;
    }
    r.pods_placed += pods;
    ++r.gangs_placed;
    for (size_t k = 0; k < g.pods.size(); ++k) count_numa(g.pods[k], a.pods[k]);
    // Locality by what the workload asked for, not by the (possibly stripped) constraint.
    const TopologyLevel asked = workloads[i].topology.level;
    if (asked == TopologyLevel::kLeaf) {
      ++r.leaf_gangs_placed;
      r.leaf_gangs_one_leaf += OneDomain(state, g.pods, TopologyLevel::kLeaf) ? 1 : 0;
      r.leaf_gangs_one_rack += OneDomain(state, g.pods, TopologyLevel::kRack) ? 1 : 0;
    } else if (asked == TopologyLevel::kNvlinkDomain) {
      ++r.nvlink_gangs_placed;
      r.nvlink_gangs_one_domain += OneDomain(state, g.pods, TopologyLevel::kNvlinkDomain) ? 1 : 0;
    }
  }
  r.place_seconds = std::chrono::duration<double>(spent).count();
  r.place_cpu_seconds = static_cast<double>(spent_cpu) / CLOCKS_PER_SEC;
  r.arrived_gpu_pct = Pct(arrived_milli, state.total_gpu_milli());
  r.allocated_gpu_pct = Pct(state.allocated_gpu_milli(), state.total_gpu_milli());
  return r;
}

}  // namespace fabrica::sim
