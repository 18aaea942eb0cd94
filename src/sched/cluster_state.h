// ClusterState: the free capacity of a fleet, per node and per device, as placement sees it.
//
// It is built from a Fleet and changed only through Apply and Release of assignments, so that
// what is free always equals capacity minus what was placed. Beside the raw numbers it keeps:
//   - per device, who may still share it: a fractional-share key and a MIG occupancy key derived
//     from the trust table of DESIGN.md, so that isolation is a constant-time check;
//   - per node, an exclusive owner (an untrusted tenant that asked for nodes of its own);
//   - an index of nodes by "state class": nodes whose type, free CPU, memory and multiset of
//     device states are equal are interchangeable for every policy, so a policy scores one node
//     per class rather than every node. The index is updated incrementally on every change.
// Policies read a const ClusterState and never change it. Not thread-safe; copy it to share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/fleet.h"
#include "core/workload.h"

namespace fabrica {

// The nodes a NodeSelector (and its tolerations, against the nodes' taints) lets a pod use,
// worked out once per selector and state (a ClusterState keeps them): by node index, as a list, and
// one node of each hardware type among them (what "could it ever fit" looks at).
struct NodeSet {
  std::vector<char> in;
  std::vector<int> list;
  std::vector<int> types;
  uint64_t models = 0;  // bit i: some node of it has GPU model i of the state's table
  std::string said;     // NodeSelector::Describe()
};

// A pod as placement sees it: interned and flattened, cheap to copy.
struct PodRequest {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  DeviceKind kind = DeviceKind::kNone;
  int num_gpu = 0;                     // devices needed (1 for a fraction or a MIG slice)
  int64_t gpu_milli = 0;               // per device: 1000 for whole GPUs, the share for a fraction
  int64_t gpu_memory_mib = 0;          // per device, fractions only; 0 = no memory cap requested
  int mig_profile = -1;                // interned profile name
  uint64_t model_mask = ~uint64_t{0};  // bit i = model i of the state's model table allowed
  int tenant = -1;                     // index in the state's tenant table; -1 = anonymous (traces)
  // Per device, what quotas and shares count it as holding; 0 = gpu_milli. A fraction is
  // charged the larger of its compute and its memory share (of the smallest GPU it may land
  // on), and an untrusted tenant's the device over how many such pods one device holds: no one
  // else may use the rest (MakeRequest).
  int64_t charge_milli = 0;
  // What a charge for all its GPUs that does not divide by num_gpu leaves over (exclusiveNodes:
  // 4000m for 3 GPUs is 1333m each and 1m more), so that the total is exact (ChargeAtLeast).
  int64_t charge_rest = 0;
  // A fraction that asked for memory alone: its compute on each GPU is the share its memory is
  // of that GPU (ClusterState::FractionMilli), and gpu_milli that share of the smallest GPU it
  // may land on (the most it takes anywhere).
  bool compute_from_memory = false;
  // The nodes its nodeSelector, excludeNodes, required nodeAffinity and tolerations leave it
  // (shared by the requests of one selector); null: any node.
  std::shared_ptr<const NodeSet> nodes;
  // Where its nodeAffinity prefers some nodes, or a PreferNoSchedule taint it does not tolerate
  // ranks some last: the nodes it may use whose rank (the weights of the preferred terms they
  // meet, less much for each such taint) is at least each of the highest few values, best
  // first, each a subset of `nodes` and smaller than it; placement tries them in turn before
  // `nodes` (ClusterState::PreferredFor). Null: no preference.
  std::shared_ptr<const std::vector<std::shared_ptr<const NodeSet>>> preferred;

  int64_t total_gpu_milli() const { return num_gpu * gpu_milli; }
  int64_t total_charge_milli() const {
    return num_gpu * (charge_milli > 0 ? charge_milli : gpu_milli) + charge_rest;
  }
  // Charged at least `total` for all its GPUs (a share of an exclusive node), exactly.
  void ChargeAtLeast(int64_t total) {
    if (num_gpu <= 0 || total <= total_charge_milli()) return;
    charge_milli = total / num_gpu;
    charge_rest = total % num_gpu;
  }
};

// What quotas and shares count a fractional share of `milli` compute and `memory_mib` memory
// (0: none asked) as holding of a GPU of `device_memory_mib` (0: not known): the larger of its
// compute and memory shares (HAMi's and KAI's measure: 10m with 41Gi of an 80Gi GPU holds half
// of it); for an untrusted tenant, whose GPU is its alone, at least the GPU over how many such
// shares one holds (rounded down: a GPU it fills with one shape is one GPU, no more).
int64_t FractionCharge(int64_t milli, int64_t memory_mib, int64_t device_memory_mib,
                       bool untrusted);

struct DeviceShare {
  int device = 0;
  int64_t milli = 0;
  int64_t memory_mib = 0;
  int mig_slice = -1;
};

struct Assignment {
  int node = -1;
  std::vector<DeviceShare> devices;
  // The NUMA node whose CPUs the pod runs on: its GPUs' NUMA node when that has CPU room for it
  // (then GPUs, CPUs and NIC are local), else -1 (its CPU is spread over the node's NUMA nodes).
  int numa = -1;
};

struct DeviceState {
  int64_t free_milli = kMilliPerGpu;
  int64_t free_memory_mib = 0;  // 0 capacity means memory is not tracked for this model
  int32_t share_key = -1;       // fractional sharers' key; -1 = no fractional user, kClosed
  int32_t users = 0;            // pods using the device
  uint32_t mig_free = 0;        // bit s = MIG slice s is free
  int32_t mig_key = -1;         // -1 none, kMigShared, kClosed or an untrusted tenant's index
};

class ClusterState {
 public:
  static constexpr int32_t kMigShared = -2;
  // A device's key where pods placed under different keys share it (a tenant's trust changed
  // under them; their workloads restored): open to no new sharer until the pods of all keys
  // but one have gone (a trial's tenant lowered to standard kept placing shares beside a
  // trusted tenant's).
  static constexpr int32_t kClosed = -3;
  // `key` (of a pod added to, or taken from, a device of `users` pods, it included) in the
  // device's `*slot` (its share_key or mig_key), with `mixed` its pods by key while they
  // differ.
  static void AddKey(int32_t* slot, int32_t key, int users,
                     std::map<std::pair<int, int>, std::map<int32_t, int>>& mixed,
                     std::pair<int, int> at);
  static void RemoveKey(int32_t* slot, int32_t key, int users,
                        std::map<std::pair<int, int>, std::map<int32_t, int>>& mixed,
                        std::pair<int, int> at);

  explicit ClusterState(const Fleet& fleet, const std::vector<Tenant>& tenants = {});

  const Fleet& fleet() const { return *fleet_; }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int n) const { return fleet_->nodes[n]; }

  int64_t free_cpu(int n) const { return nodes_[n].free_cpu; }
  // Free CPU on one NUMA node of n (the node's CPUs are split evenly among its NUMA nodes).
  int64_t free_cpu_numa(int n, int numa) const {
    const auto& v = nodes_[n].numa_cpu;
    if (v.empty()) return numa == 0 ? nodes_[n].free_cpu : 0;
    return numa >= 0 && numa < static_cast<int>(v.size()) ? v[numa] : 0;
  }
  // The NUMA node a pod with `devices` on node n should run its CPUs on: the one holding most
  // of its GPUs (for a pod without GPUs, the one with most free CPU), if it has room for the
  // pod's CPU; else -1.
  int HomeNuma(int n, const std::vector<DeviceShare>& devices, const PodRequest& req) const;
  int64_t free_memory(int n) const { return nodes_[n].free_memory; }
  const std::vector<DeviceState>& devices(int n) const { return nodes_[n].devices; }
  int node_model(int n) const { return nodes_[n].model; }
  int node_type(int n) const { return nodes_[n].type; }
  int exclusive_owner(int n) const { return nodes_[n].exclusive_owner; }
  int64_t node_free_milli(int n) const { return nodes_[n].free_milli; }
  // What the free MIG slices of node n of the profiles in `profiles` (bit p: profile p) count
  // as (MigSliceMilli each), which node_free_milli leaves out: a gang's room in a domain counts
  // them where it takes slices of those profiles.
  int64_t node_free_slice_milli(int n, uint64_t profiles) const;
  // What kinds of GPU room `pods` take: the MIG profiles of their slices (bit p: profile p),
  // and whether some pod takes GPUs without MIG (whole or a fraction).
  struct RoomKinds {
    uint64_t slices = 0;
    bool without_mig = false;
  };
  static RoomKinds RoomKindsOf(const std::vector<PodRequest>& pods);
  // The free room of node n for work of `kinds`: its free GPUs without MIG where that work takes
  // them, and its free slices of the profiles it asks.
  int64_t node_free_room(int n, const RoomKinds& kinds) const {
    return (kinds.without_mig ? node_free_milli(n) : 0) +
           (kinds.slices ? node_free_slice_milli(n, kinds.slices) : 0);
  }
  int node_whole_free(int n) const { return nodes_[n].whole_free; }  // unused GPUs, MIG off
  int node_pods(int n) const { return nodes_[n].pods; }
  // (tag, pods) of the GPU pods on node n: tag 0 = a fractional pod, k = a pod of k whole GPUs.
  // GpuClustering co-locates pods of one tag.
  const std::vector<std::pair<int, int>>& gpu_pod_tags(int n) const { return nodes_[n].gpu_tags; }

  // Interning of GPU models, MIG profiles and tenants.
  int ModelIndex(const std::string& model) const;  // -1 if no node has it
  const std::vector<std::string>& models() const { return models_; }
  int MigProfileIndex(const std::string& profile) const;  // -1 if unknown
  const std::string& mig_profile_name(int i) const { return mig_profiles_[i]; }
  int mig_profile_count() const { return static_cast<int>(mig_profiles_.size()); }
  int mig_slice_profile(int n, int d, int s) const;
  // How many MIG slices of `profile` node n's GPUs are partitioned into, free or not.
  int node_slices_of(int n, int profile) const;
  int TenantIndex(const TenantId& t) const;
  const Tenant& tenant(int i) const { return tenants_[i]; }

  // Converts one pod of a pod set into a PodRequest, or names what no node can satisfy.
  Result<PodRequest> MakeRequest(const PodSet& ps, const TenantId& tenant) const;
  // The same for a pod set that runs: where its nodeSelector or tolerations now leave it no
  // node (its nodes relabelled or tainted since), a request for its shape that may use no node.
  Result<PodRequest> MakeBoundRequest(const PodSet& ps, const TenantId& tenant) const;
  // Whether some node has a taint (then a pod without a selector may not use every node).
  bool tainted() const { return tainted_; }  // (NoSchedule or NoExecute taints; not soft ones)
  // What a GPU pod of a tenant with exclusiveNodes is charged on node n, in milli-GPUs for the
  // pod: the node's GPUs over how many such pods the node holds (by GPUs, CPU and memory),
  // since no other tenant may use what they leave; 0 if the node cannot hold one.
  int64_t ExclusiveCharge(const PodRequest& req, int n) const;
  // Whether what a pod is charged depends on the GPU it gets: a fraction that asks memory, a
  // pod of a tenant with exclusiveNodes.
  bool ChargeVaries(const PodRequest& req) const;
  // What the pod is charged (all its GPUs) on a node of GPU model `model` (the most, where
  // nodes of that model differ); -1 where no node of that model can hold it.
  int64_t ChargeOnModel(const PodRequest& req, int model) const;

  // The nodes `selector` leaves a pod (never null), kept per selector: the same selector gets
  // the same set for the life of the state.
  std::shared_ptr<const NodeSet> NodesFor(const NodeSelector& selector) const;
  // The nodes of `base` (every node when null) that `drop` leaves out, as a new set (its
  // `said` is base's): for an attempt kept off some nodes for now (Admitter's hold on
  // borrowing).
  std::shared_ptr<const NodeSet> Without(const NodeSet* base, const std::vector<char>& drop) const;
  // The preferred tiers of `selector` (PodRequest::preferred): at most kPreferenceTiers by
  // preference, then, where some node has a PreferNoSchedule taint it does not tolerate, every
  // node without one; none empty, none the whole of what NodesFor leaves; null when there are
  // none. Kept per selector.
  static constexpr int kPreferenceTiers = 3;
  // ... and at most this many steps among nodes with PreferNoSchedule taints it does not
  // tolerate, by how many (fewest first).
  static constexpr int kSoftTaintTiers = 2;
  std::shared_ptr<const std::vector<std::shared_ptr<const NodeSet>>> PreferredFor(
      const NodeSelector& selector) const;

  // Capacity totals.
  int64_t total_gpu_milli() const { return total_gpu_milli_; }
  int64_t allocated_gpu_milli() const { return allocated_gpu_milli_; }

  // Isolation: may this pod use device d of node n, given who already uses it?
  bool DeviceUsable(int n, int d, const PodRequest& req) const;
  bool NodeUsable(int n, const PodRequest& req) const;
  // A cheap necessary condition for NodeFits: false means the node certainly cannot take `req`.
  bool MayFit(int n, const PodRequest& req) const {
    const NodeState& s = nodes_[n];
    return MayFit(FitSummary{s.free_cpu, s.free_memory, s.max_free_milli, s.mig_profiles_free,
                             s.whole_free, s.model, n},
                  req);
  }
  // One node of each hardware type (model, GPU count, CPU, memory, NUMA and MIG layout).
  const std::vector<int>& type_representatives() const { return type_representatives_; }
  // Device memory a fractional `req` takes on device d of node n: its gpuMemory, or else its
  // share of the device's memory; 0 where the device's memory is not tracked.
  int64_t FractionMemoryMib(int n, int d, const PodRequest& req) const;
  // The compute a fractional pod takes of GPU d of node n: what it asked, or for a memory-only
  // share the share its memory is of that GPU (10Gi: 417m of a 24Gi L4, 71m of a 141Gi H200).
  int64_t FractionMilli(int n, int d, const PodRequest& req) const;

  // REQUIRES: the assignment was produced for `req` against this state.
  void Apply(const Assignment& a, const PodRequest& req);
  void Release(const Assignment& a, const PodRequest& req);

  // State classes: groups of interchangeable nodes. A class's node list is sorted by index, so
  // its front() is the node that index order prefers.
  const std::vector<int>& active_classes() const { return active_classes_; }
  // The same classes by position, flattened for scans: each one's front node and what MayFit
  // reads, kept contiguous so that rejecting a class touches one cache line, not its nodes.
  struct FitSummary {
    int64_t free_cpu = 0;
    int64_t free_memory = 0;
    int64_t max_free_milli = 0;
    uint64_t mig_profiles_free = 0;
    int32_t whole_free = 0;
    int32_t model = -1;
    int32_t front = -1;  // the class's lowest node index
  };
  const std::vector<FitSummary>& active_summaries() const { return active_fit_; }
  // MayFit on a class summary: the same answer as MayFit on any node of the class.
  static bool MayFit(const FitSummary& f, const PodRequest& req) {
    if (f.free_cpu < req.cpu_milli || f.free_memory < req.memory_mib) return false;
    if (req.kind != DeviceKind::kNone && f.model < 0) return false;
    switch (req.kind) {
      case DeviceKind::kNone:
        return true;
      case DeviceKind::kWhole:
        return f.whole_free >= req.num_gpu && (req.model_mask >> f.model & 1);
      case DeviceKind::kFraction:
        // (A memory-only share takes less of a larger GPU: DeviceUsable checks it exactly.)
        return f.max_free_milli >= (req.compute_from_memory ? 1 : req.gpu_milli) &&
               (req.model_mask >> f.model & 1);
      case DeviceKind::kMig:
        return req.mig_profile < 64 && (f.mig_profiles_free >> req.mig_profile & 1) &&
               (req.model_mask >> f.model & 1);
    }
    return true;
  }
  const std::vector<int>& class_nodes(int c) const { return classes_[c].nodes; }
  int node_class(int n) const { return nodes_[n].cls; }
  // Class c as it is now: a stamp no other class, nor c before a change of its nodes, ever had
  // (0: c is not active). Equal stamps mean the same nodes in the same state.
  uint64_t class_stamp(int c) const {
    return c >= 0 && c < static_cast<int>(classes_.size()) && classes_[c].active_pos >= 0
               ? classes_[c].stamp
               : 0;
  }
  const FitSummary& class_summary(int c) const { return active_fit_[classes_[c].active_pos]; }

  int32_t ShareKey(int tenant) const;

  // Topology: the domain (NVLink domain, leaf or rack) of node n, and each domain's nodes.
  // kNone has one domain holding every node.
  int domain_of(int n, TopologyLevel level) const { return domain_of_[Level(level)][n]; }
  const std::vector<std::vector<int>>& domains(TopologyLevel level) const {
    return domains_[Level(level)];
  }
  const std::string& domain_name(TopologyLevel level, int d) const {
    return domain_names_[Level(level)][d];
  }

 private:
  struct NodeState {
    int64_t free_cpu = 0;
    int64_t free_memory = 0;
    int64_t free_milli = 0;
    int model = -1;
    int type = 0;
    int exclusive_owner = -1;
    int pods = 0;
    // Summaries of the devices, refreshed on every change, for a quick rejection of nodes that
    // cannot take a request before any per-device check.
    int whole_free = 0;              // unused GPUs without MIG
    int64_t max_free_milli = 0;      // the largest free share of a GPU without MIG
    uint64_t mig_profiles_free = 0;  // bit p = some slice of MIG profile p is free
    std::vector<DeviceState> devices;
    // Free CPU per NUMA node, on nodes with more than one (empty otherwise). Sums to free_cpu.
    std::vector<int64_t> numa_cpu;
    std::vector<std::vector<int>> mig_slices;      // per device: profile index of each slice
    std::vector<std::pair<int, int>> tenant_pods;  // (tenant, pods) for exclusivity checks
    std::vector<std::pair<int, int>> gpu_tags;     // see gpu_pod_tags()
    int cls = -1;
  };
  struct NodeClass {
    std::string key;
    std::vector<int> nodes;
    int active_pos = -1;
    uint64_t stamp = 0;  // see class_stamp()
  };

  static int Level(TopologyLevel l) { return static_cast<int>(l); }
  std::string ClassKey(int n) const;
  void RefreshSummary(int n);
  void ChargeNumaCpu(NodeState& s, int home, int64_t cpu);
  void ReturnNumaCpu(NodeState& s, int home, int64_t cpu);
  void Reclassify(int n);

  const Fleet* fleet_;
  std::vector<Tenant> tenants_;
  std::unordered_map<std::string, int> tenant_index_;
  std::unordered_map<std::string, int> domain_index_;
  std::vector<std::string> models_;
  std::vector<std::string> mig_profiles_;
  std::vector<int64_t> mig_profile_milli_;  // by profile: what one slice of it counts as
  std::vector<NodeState> nodes_;
  std::vector<int> type_representatives_;
  int64_t total_gpu_milli_ = 0;
  int64_t allocated_gpu_milli_ = 0;

  static int GpuTag(const PodRequest& req);
  static void Count(std::vector<std::pair<int, int>>& counts, int key, int delta);

  std::vector<int> domain_of_[4];
  std::vector<std::vector<int>> domains_[4];
  std::vector<std::string> domain_names_[4];

  std::vector<NodeClass> classes_;
  uint64_t last_stamp_ = 0;
  std::vector<int> free_classes_;
  std::vector<int> active_classes_;
  std::vector<FitSummary> active_fit_;  // by active position
  std::unordered_map<std::string, int> class_by_key_;
  // NodesFor's answers (a cache: which nodes match a selector never changes with the state).
  // Devices whose pods hold different keys (kClosed), by (node, device): the pods of each key,
  // fractional and MIG apart, so that Release undoes Apply exactly (a trial's release of the
  // pod under the other key reopens the device to the rest's). Empty but after a trust change.
  std::map<std::pair<int, int>, std::map<int32_t, int>> mixed_share_, mixed_mig_;
  mutable std::map<NodeSelector, std::shared_ptr<const NodeSet>> node_sets_;
  mutable std::map<NodeSelector, std::shared_ptr<const std::vector<std::shared_ptr<const NodeSet>>>>
      preferred_sets_;
  // Adds node n to `set` (its list, its bit, its models, the first node of its type).
  void AddToSet(NodeSet& set, int n, std::vector<char>& type_seen) const;
  bool tainted_ = false;       // some node has a NoSchedule or NoExecute taint
  bool soft_tainted_ = false;  // ... a PreferNoSchedule one
};

}  // namespace fabrica
