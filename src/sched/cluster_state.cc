#include "sched/cluster_state.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace fabrica {
namespace {

// The MIG key a pod of `tenant` gives its GPU: an untrusted tenant's own, else shared.
int32_t MigKeyOf(const std::vector<Tenant>& tenants, int tenant) {
  return tenant >= 0 && tenants[tenant].trust == TrustLevel::kUntrusted ? tenant
                                                                        : ClusterState::kMigShared;
}

}  // namespace

namespace {

template <typename T>
void AppendRaw(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// What a slice of MIG profile `profile` ("<compute slices>g.<memory>") counts as.
int64_t SliceMilli(const std::string& profile) {
  DeviceRequest slice;
  slice.kind = DeviceKind::kMig;
  slice.mig_profile = profile;
  return slice.TotalMilli().value();
}

}  // namespace

ClusterState::ClusterState(const Fleet& fleet, const std::vector<Tenant>& tenants)
    : fleet_(&fleet), tenants_(tenants) {
  for (size_t i = 0; i < tenants_.size(); ++i) {
    tenant_index_[tenants_[i].name.str()] = static_cast<int>(i);
    std::string domain =
        tenants_[i].trust_domain.empty() ? tenants_[i].name.str() : tenants_[i].trust_domain;
    domain_index_.emplace(domain, static_cast<int>(domain_index_.size()));
  }
  models_ = fleet.Models();
  // ValidateFleet rejects larger fleets: models are bits of a 64-bit mask, and policies copy a
  // node's GPUs into arrays of kMaxGpusPerNode entries.
  CHECK(models_.size() <= static_cast<size_t>(kMaxGpuModels));
  std::map<std::string, int> types;
  nodes_.resize(fleet.nodes.size());
  for (size_t n = 0; n < fleet.nodes.size(); ++n) {
    const Node& node = fleet.nodes[n];
    CHECK(node.gpu_count() <= kMaxGpusPerNode);
    for (const Taint& t : node.taints)
      (t.effect == TaintEffect::kPreferNoSchedule ? soft_tainted_ : tainted_) = true;
    NodeState& s = nodes_[n];
    s.free_cpu = node.cpu.value();
    s.free_memory = node.memory.value();
    if (node.numa_nodes > 1) {
      const int64_t k = node.numa_nodes;
      s.numa_cpu.assign(static_cast<size_t>(k), s.free_cpu / k);
      s.numa_cpu[0] += s.free_cpu % k;
    }
    s.model = node.devices.empty() ? -1 : ModelIndex(node.gpu_model());
    std::string type_key = node.gpu_model() + "/" + std::to_string(node.gpu_count()) + "/" +
                           std::to_string(node.cpu.value()) + "/" +
                           std::to_string(node.memory.value());
    s.devices.resize(node.devices.size());
    s.mig_slices.resize(node.devices.size());
    for (size_t d = 0; d < node.devices.size(); ++d) {
      const Device& dev = node.devices[d];
      DeviceState& ds = s.devices[d];
      ds.free_memory_mib = dev.memory.value();
      type_key += "/" + std::to_string(dev.numa_node) + "." + std::to_string(dev.memory.value());
      for (size_t k = 0; k < dev.mig_slices.size(); ++k) {
        auto it = std::find(mig_profiles_.begin(), mig_profiles_.end(), dev.mig_slices[k]);
        int idx = static_cast<int>(it - mig_profiles_.begin());
        if (it == mig_profiles_.end()) {
          mig_profiles_.push_back(dev.mig_slices[k]);
          mig_profile_milli_.push_back(SliceMilli(dev.mig_slices[k]));
        }
        s.mig_slices[d].push_back(idx);
        ds.mig_free |= 1u << k;
        type_key += ":" + dev.mig_slices[k];
      }
      if (dev.mig_enabled()) ds.free_milli = 0;  // MIG GPUs are handed out by slice only
      total_gpu_milli_ += kMilliPerGpu;
      s.free_milli += ds.free_milli;
    }
    auto [it, inserted] = types.emplace(type_key, static_cast<int>(types.size()));
    s.type = it->second;
    if (inserted) type_representatives_.push_back(static_cast<int>(n));
    RefreshSummary(static_cast<int>(n));
    Reclassify(static_cast<int>(n));
  }
  for (TopologyLevel level : {TopologyLevel::kNone, TopologyLevel::kNvlinkDomain,
                              TopologyLevel::kLeaf, TopologyLevel::kRack}) {
    const int l = Level(level);
    std::unordered_map<std::string, int> index;
    domain_of_[l].resize(fleet.nodes.size());
    for (size_t n = 0; n < fleet.nodes.size(); ++n) {
      const Node& node = fleet.nodes[n];
      std::string name = level == TopologyLevel::kNone           ? "fleet"
                         : level == TopologyLevel::kNvlinkDomain ? node.nvlink_domain
                         : level == TopologyLevel::kLeaf         ? node.leaf
                                                                 : node.rack;
      if (name.empty()) name = node.name.str();  // no declared domain: the node alone
      auto [it, inserted] = index.emplace(name, static_cast<int>(domains_[l].size()));
      if (inserted) {
        domains_[l].emplace_back();
        domain_names_[l].push_back(name);
      }
      domain_of_[l][n] = it->second;
      domains_[l][it->second].push_back(static_cast<int>(n));
    }
  }
}

int ClusterState::ModelIndex(const std::string& model) const {
  auto it = std::find(models_.begin(), models_.end(), model);
  return it == models_.end() ? -1 : static_cast<int>(it - models_.begin());
}

int ClusterState::MigProfileIndex(const std::string& profile) const {
  auto it = std::find(mig_profiles_.begin(), mig_profiles_.end(), profile);
  return it == mig_profiles_.end() ? -1 : static_cast<int>(it - mig_profiles_.begin());
}

int ClusterState::mig_slice_profile(int n, int d, int s) const {
  return nodes_[n].mig_slices[d][s];
}

int ClusterState::node_slices_of(int n, int profile) const {
  int count = 0;
  for (const std::vector<int>& slices : nodes_[n].mig_slices)
    count += static_cast<int>(std::count(slices.begin(), slices.end(), profile));
  return count;
}

int64_t ClusterState::node_free_slice_milli(int n, uint64_t profiles) const {
  const NodeState& s = nodes_[n];
  int64_t milli = 0;
  for (size_t d = 0; d < s.devices.size(); ++d)
    for (size_t k = 0; k < s.mig_slices[d].size(); ++k) {
      const int p = s.mig_slices[d][k];
      if ((s.devices[d].mig_free >> k & 1) && p < 64 && (profiles >> p & 1))
        milli += mig_profile_milli_[p];
    }
  return milli;
}

ClusterState::RoomKinds ClusterState::RoomKindsOf(const std::vector<PodRequest>& pods) {
  RoomKinds kinds;
  for (const PodRequest& p : pods) {
    if (p.kind == DeviceKind::kMig && p.mig_profile >= 0 && p.mig_profile < 64)
      kinds.slices |= uint64_t{1} << p.mig_profile;
    kinds.without_mig |= p.kind == DeviceKind::kWhole || p.kind == DeviceKind::kFraction;
  }
  return kinds;
}

int ClusterState::TenantIndex(const TenantId& t) const {
  auto it = tenant_index_.find(t.str());
  return it == tenant_index_.end() ? -1 : it->second;
}

int32_t ClusterState::ShareKey(int tenant) const {
  if (tenant < 0) return 0;
  const Tenant& t = tenants_[tenant];
  if (t.trust == TrustLevel::kTrusted) {
    const std::string& domain = t.trust_domain.empty() ? t.name.str() : t.trust_domain;
    return 1'000'000 + domain_index_.at(domain);
  }
  return tenant + 1;
}

int64_t FractionCharge(int64_t milli, int64_t memory_mib, int64_t device_memory_mib,
                       bool untrusted) {
  const bool memory = memory_mib > 0 && device_memory_mib > 0;
  int64_t charge = milli;
  // (Rounded down, at least 1m: shares whose memory fills a GPU are one GPU between them, and
  // as many fit by compute as by memory; rounded up, three 8Gi shares of a 24Gi GPU took 1002m
  // and only two fitted.)
  if (memory)
    charge = std::max(charge, std::clamp<int64_t>(memory_mib * kMilliPerGpu / device_memory_mib, 1,
                                                  kMilliPerGpu));
  if (untrusted && milli > 0) {
    int64_t fit = kMilliPerGpu / milli;
    if (memory) fit = std::min(fit, device_memory_mib / memory_mib);
    charge = std::max(charge, kMilliPerGpu / std::max<int64_t>(fit, 1));
  }
  return charge;
}

int64_t ClusterState::ExclusiveCharge(const PodRequest& req, int n) const {
  const Node& node = fleet_->nodes[n];
  if (req.num_gpu <= 0 || node.gpu_count() == 0) return 0;
  int64_t fit = std::numeric_limits<int64_t>::max();
  if (req.cpu_milli > 0) fit = std::min(fit, node.cpu.value() / req.cpu_milli);
  if (req.memory_mib > 0) fit = std::min(fit, node.memory.value() / req.memory_mib);
  int64_t by_gpu = 0;
  for (int i = 0; i < node.gpu_count(); ++i) {
    const Device& d = node.devices[i];
    if (req.kind == DeviceKind::kMig) {
      for (const std::string& slice : d.mig_slices)
        by_gpu += req.mig_profile >= 0 && slice == mig_profiles_[req.mig_profile];
    } else if (!d.mig_enabled()) {
      if (req.kind == DeviceKind::kWhole) {
        ++by_gpu;
      } else {
        const int64_t milli = FractionMilli(n, i, req);
        int64_t k = milli > 0 ? kMilliPerGpu / milli : 1;
        if (req.gpu_memory_mib > 0) k = std::min(k, d.memory.value() / req.gpu_memory_mib);
        by_gpu += k;
      }
    }
  }
  if (req.kind == DeviceKind::kWhole) by_gpu /= req.num_gpu;
  fit = std::min(fit, by_gpu);
  return fit <= 0 ? 0 : int64_t{node.gpu_count()} * kMilliPerGpu / fit;
}

bool ClusterState::ChargeVaries(const PodRequest& req) const {
  if (req.num_gpu <= 0) return false;
  return (req.kind == DeviceKind::kFraction && req.gpu_memory_mib > 0) ||
         (req.tenant >= 0 && tenants_[req.tenant].exclusive_nodes);
}

int64_t ClusterState::ChargeOnModel(const PodRequest& req, int model) const {
  if (req.num_gpu <= 0) return 0;
  if (model < 0 || !(req.model_mask >> model & 1)) return -1;
  if (!ChargeVaries(req)) return req.total_charge_milli();
  const bool untrusted = req.tenant >= 0 && tenants_[req.tenant].trust == TrustLevel::kUntrusted;
  const bool exclusive = req.tenant >= 0 && tenants_[req.tenant].exclusive_nodes;
  int64_t most = -1;
  for (int n : type_representatives_) {
    if (nodes_[n].model != model) continue;
    const Node& node = fleet_->nodes[n];
    int64_t per_gpu = -1;  // the most one of its GPUs is charged on this node, -1: none holds it
    if (req.kind == DeviceKind::kFraction) {
      for (int d = 0; d < node.gpu_count(); ++d) {
        const int64_t mem = node.devices[d].memory.value();
        if (node.devices[d].mig_enabled() || mem < req.gpu_memory_mib) continue;
        // (Its own share on this GPU, before the exclusive rule below: charge_milli may hold
        // the most that rule charges on any node.)
        per_gpu = std::max(
            per_gpu, FractionCharge(FractionMilli(n, d, req), req.gpu_memory_mib, mem, untrusted));
      }
    } else {
      per_gpu = req.gpu_milli;
    }
    if (per_gpu < 0) continue;
    int64_t charge = per_gpu * req.num_gpu;
    if (exclusive) {
      const int64_t node_charge = ExclusiveCharge(req, n);
      if (node_charge <= 0) continue;  // (it cannot hold one)
      // (The pod's whole charge, not per GPU rounded down: a trial's 3-GPU pod was charged
      // 3.999 GPUs, not the 4 of the 8-GPU node's 2 such pods.)
      charge = std::max(charge, node_charge);
    }
    most = std::max(most, charge);
  }
  return most;
}

Result<PodRequest> ClusterState::MakeRequest(const PodSet& ps, const TenantId& tenant) const {
  PodRequest r;
  r.cpu_milli = ps.cpu.value();
  r.memory_mib = ps.memory.value();
  r.kind = ps.device.kind;
  if (!tenant.empty()) {
    r.tenant = TenantIndex(tenant);
    if (r.tenant < 0) return NotFound("unknown tenant '" + tenant.str() + "'");
  }
  if (!ps.device.models.empty()) {
    // Any listed model will do, so models this fleet lacks are skipped; only a list of which no
    // model is present can never be satisfied.
    r.model_mask = 0;
    for (const std::string& m : ps.device.models) {
      int idx = ModelIndex(m);
      if (idx >= 0) r.model_mask |= uint64_t{1} << idx;
    }
    if (r.model_mask == 0) {
      std::string names;
      for (const std::string& m : ps.device.models) names += (names.empty() ? "" : "|") + m;
      return InvalidArgument("no node of the fleet has any of the GPU models '" + names + "'");
    }
  }
  // (Where no node is tainted, a pod without a selector may use every node: no set.)
  if (!ps.nodes.empty() || tainted_) r.nodes = NodesFor(ps.nodes);
  if (r.nodes && r.nodes->list.size() == nodes_.size()) r.nodes = nullptr;  // (every node)
  r.preferred = PreferredFor(ps.nodes);
  if (r.nodes) {
    if (r.nodes->list.empty())
      return InvalidArgument("its " + r.nodes->said + " leaves it no node of the fleet");
    // (Its GPUs can only be of the models its nodes have: what flavour it is charged to.)
    if (ps.device.kind != DeviceKind::kNone) {
      if ((r.model_mask & r.nodes->models) == 0)
        return InvalidArgument("no node its " + r.nodes->said + " leaves it" +
                               " has GPUs of a model it allows");
      r.model_mask &= r.nodes->models;
    }
  }
  const std::vector<int>& types = r.nodes ? r.nodes->types : type_representatives_;
  switch (ps.device.kind) {
    case DeviceKind::kNone:
      break;
    case DeviceKind::kWhole:
      r.num_gpu = ps.device.gpus;
      r.gpu_milli = kMilliPerGpu;
      break;
    case DeviceKind::kFraction: {
      r.num_gpu = 1;
      r.gpu_milli = ps.device.gpu_milli.value();
      r.gpu_memory_mib = ps.device.gpu_memory.value();
      // The memory of the smallest GPU it may land on (one that holds its memory: a fraction
      // takes part of one GPU); failing any, the smallest of all (it can then never start).
      int64_t smallest = 0, smallest_any = 0;
      if (r.gpu_memory_mib > 0) {
        for (int n : types) {  // (one node of each kind: they alone differ)
          const Node& node = fleet_->nodes[n];
          if (node.devices.empty()) continue;
          int m = ModelIndex(node.gpu_model());
          if (!(r.model_mask >> m & 1)) continue;
          for (const Device& dev : node.devices) {
            const int64_t mem = dev.memory.value();
            if (dev.mig_enabled() || mem <= 0) continue;
            if (smallest_any == 0 || mem < smallest_any) smallest_any = mem;
            if (mem >= r.gpu_memory_mib && (smallest == 0 || mem < smallest)) smallest = mem;
          }
        }
        if (smallest == 0) smallest = smallest_any;
      }
      if (r.gpu_milli == 0) {
        // A memory-only share takes the compute share its memory is of that GPU, so that
        // accounting and packing still see it.
        if (smallest == 0) return InvalidArgument("gpuMemory given but no allowed GPU has memory");
        r.gpu_milli = std::min<int64_t>(
            kMilliPerGpu - 1, FractionCharge(0, r.gpu_memory_mib, smallest, /*untrusted=*/false));
        r.compute_from_memory = true;  // (on a larger GPU, less: FractionMilli)
      }
      // Charged as on that GPU until it is placed (Admitter::Charge then counts the GPU it
      // has): never less than it will be.
      r.charge_milli =
          FractionCharge(r.gpu_milli, r.gpu_memory_mib, smallest,
                         r.tenant >= 0 && tenants_[r.tenant].trust == TrustLevel::kUntrusted);
      break;
    }
    case DeviceKind::kMig:
      r.num_gpu = 1;
      r.mig_profile = MigProfileIndex(ps.device.mig_profile);
      if (r.mig_profile < 0) {
        return InvalidArgument("MIG profile '" + ps.device.mig_profile +
                               "' is configured on no GPU of the fleet");
      }
      r.gpu_milli = ps.device.TotalMilli().value();
      break;
  }
  if (r.num_gpu > 0 && r.tenant >= 0 && tenants_[r.tenant].exclusive_nodes) {
    // Its nodes are its alone: charged, until placed (Admitter::Charge then counts the node
    // it got), as on the node of the models it may use that holds fewest such pods.
    int64_t most = 0;
    for (int n : types) {
      const int m = nodes_[n].model;
      if (m >= 0 && (r.model_mask >> m & 1)) most = std::max(most, ExclusiveCharge(r, n));
    }
    r.ChargeAtLeast(most);
  }
  return r;
}

void ClusterState::AddToSet(NodeSet& set, int n, std::vector<char>& type_seen) const {
  set.in[n] = 1;
  set.list.push_back(n);
  const NodeState& s = nodes_[n];
  if (s.model >= 0) set.models |= uint64_t{1} << s.model;
  if (s.type >= static_cast<int>(type_seen.size())) type_seen.resize(s.type + 1, 0);
  if (!type_seen[s.type]) {
    type_seen[s.type] = 1;
    set.types.push_back(n);
  }
}

std::shared_ptr<const std::vector<std::shared_ptr<const NodeSet>>> ClusterState::PreferredFor(
    const NodeSelector& selector) const {
  if (selector.preferred.empty() && !soft_tainted_) return nullptr;
  if (auto it = preferred_sets_.find(selector); it != preferred_sets_.end()) return it->second;
  const std::shared_ptr<const NodeSet> base = NodesFor(selector);
  // A node's rank: the weights of the preferred terms it meets, or minus the number of
  // PreferNoSchedule taints it has that the request does not tolerate (such nodes come after
  // every other, fewest such taints first, as Kubernetes' TaintToleration score orders them).
  // The steps: the three highest positive ranks, then every node without such a taint (so the
  // cap on preferences never drops it), then those with at most one, two ... (kSoftTaintTiers
  // of them), then all.
  std::vector<int> score(nodes_.size(), 0);
  std::set<int, std::greater<>> ranks;
  std::set<int, std::greater<>> avoided_ranks;
  for (int n : base->list) {
    const int soft = soft_tainted_ ? selector.SoftUntolerated(fleet_->nodes[n]) : 0;
    score[n] = soft > 0 ? -soft : selector.Preference(fleet_->nodes[n]);
    if (score[n] > 0) ranks.insert(score[n]);
    if (score[n] < 0) avoided_ranks.insert(score[n]);
  }
  std::vector<int> values;
  for (int r : ranks)
    if (static_cast<int>(values.size()) < kPreferenceTiers) values.push_back(r);
  if (!avoided_ranks.empty()) values.push_back(0);
  int soft_steps = 0;
  for (int r : avoided_ranks)
    if (soft_steps++ < kSoftTaintTiers) values.push_back(r);
  auto tiers = std::make_shared<std::vector<std::shared_ptr<const NodeSet>>>();
  for (int least : values) {
    auto set = std::make_shared<NodeSet>();
    set->in.assign(nodes_.size(), 0);
    std::vector<char> type_seen;
    for (int n : base->list)
      if (score[n] >= least) AddToSet(*set, n, type_seen);
    if (set->list.size() == base->list.size()) break;  // (all it may use: the usual attempt)
    if (set->list.empty()) continue;                   // (no node without such a taint)
    set->said = base->said + (base->said.empty() ? "" : " and ") +
                (least >= 0 ? "preferred nodes (rank " + std::to_string(least) + " or more)"
                            : "nodes with at most " + std::to_string(-least) +
                                  " PreferNoSchedule taint(s) it does not tolerate");
    tiers->push_back(std::move(set));
  }
  std::shared_ptr<const std::vector<std::shared_ptr<const NodeSet>>> out;
  if (!tiers->empty()) out = std::move(tiers);
  preferred_sets_.emplace(selector, out);
  return out;
}

std::shared_ptr<const NodeSet> ClusterState::Without(const NodeSet* base,
                                                     const std::vector<char>& drop) const {
  auto set = std::make_shared<NodeSet>();
  set->in.assign(nodes_.size(), 0);
  std::vector<char> type_seen;
  for (int n = 0; n < node_count(); ++n)
    if ((!base || base->in[n]) && !drop[n]) AddToSet(*set, n, type_seen);
  if (base) set->said = base->said;
  return set;
}

std::shared_ptr<const NodeSet> ClusterState::NodesFor(const NodeSelector& selector) const {
  if (!selector.preferred.empty()) {
    // (Preferences restrict nothing: one set for every preference of one selector.)
    NodeSelector plain = selector;
    plain.preferred.clear();
    return NodesFor(plain);
  }
  if (auto it = node_sets_.find(selector); it != node_sets_.end()) return it->second;
  auto set = std::make_shared<NodeSet>();
  set->in.assign(nodes_.size(), 0);
  std::vector<char> type_seen;
  std::map<std::string, int> untolerated;  // taint -> nodes it keeps from the pod
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!selector.MatchesLabels(fleet_->nodes[n])) continue;
    if (selector.Untolerated(fleet_->nodes[n])) {
      // (Every such taint of the node: a toleration for one of two leaves it kept off.)
      for (const Taint& t : fleet_->nodes[n].taints)
        if (t.effect != TaintEffect::kPreferNoSchedule && !Tolerated(selector.tolerations, t))
          ++untolerated[t.ToString()];
      continue;
    }
    AddToSet(*set, static_cast<int>(n), type_seen);
  }
  set->said = selector.Describe();
  if (!untolerated.empty()) {
    // "want of a toleration for taint gpu=reserved:NoSchedule": the subject of
    // "its ... leaves it no node", as the selector is.
    std::string taints;
    int shown = 0;
    for (const auto& [taint, count] : untolerated) {
      if (++shown > 3) {
        taints += ", ...";
        break;
      }
      // (How many nodes each keeps off, where there are several to tell apart.)
      taints += (taints.empty() ? "" : ", ") + taint;
      if (untolerated.size() > 1)
        taints += " (" + std::to_string(count) + (count == 1 ? " node)" : " nodes)");
    }
    set->said += std::string(set->said.empty() ? "" : " and ") + "want of a toleration for " +
                 (untolerated.size() == 1 ? "taint " : "taints ") + taints;
  }
  node_sets_.emplace(selector, set);
  return set;
}

Result<PodRequest> ClusterState::MakeBoundRequest(const PodSet& ps, const TenantId& tenant) const {
  Result<PodRequest> made = MakeRequest(ps, tenant);
  if (made.ok()) return made;
  // (Its nodes were relabelled or tainted, or left, since it was placed: what it runs stays
  // where it is, and it adds nothing, as its selector and tolerations leave it no node.)
  PodSet anywhere = ps;
  anywhere.nodes = NodeSelector();
  Toleration every;  // (an empty key with Exists: every taint)
  every.exists = true;
  anywhere.nodes.tolerations = {every};
  Result<PodRequest> again = MakeRequest(anywhere, tenant);
  if (!again.ok()) return made;
  // (... nowhere: the nodes it may use are none, not every one.)
  again->nodes = NodesFor(ps.nodes);
  return again;
}

bool ClusterState::NodeUsable(int n, const PodRequest& req) const {
  const NodeState& s = nodes_[n];
  if (req.nodes && !req.nodes->in[n]) return false;
  if (s.free_cpu < req.cpu_milli || s.free_memory < req.memory_mib) return false;
  if (req.num_gpu > 0 && (s.model < 0 || !(req.model_mask >> s.model & 1))) return false;
  if (s.exclusive_owner >= 0 && s.exclusive_owner != req.tenant) return false;
  if (req.tenant >= 0 && tenants_[req.tenant].exclusive_nodes) {
    // Any pod that is not the tenant's own counts, anonymous (tenant-less) ones included.
    int own = 0;
    for (const auto& [t, pods] : s.tenant_pods) {
      if (t == req.tenant) own = pods;
    }
    if (s.pods > own) return false;
  }
  return true;
}

int64_t ClusterState::FractionMemoryMib(int n, int d, const PodRequest& req) const {
  const int64_t cap = fleet_->nodes[n].devices[d].memory.value();
  if (cap <= 0) return 0;
  return req.gpu_memory_mib > 0 ? req.gpu_memory_mib : cap * req.gpu_milli / kMilliPerGpu;
}

int64_t ClusterState::FractionMilli(int n, int d, const PodRequest& req) const {
  if (!req.compute_from_memory) return req.gpu_milli;
  const int64_t cap = fleet_->nodes[n].devices[d].memory.value();
  if (cap <= 0) return req.gpu_milli;
  return std::min<int64_t>(kMilliPerGpu - 1,
                           FractionCharge(0, req.gpu_memory_mib, cap, /*untrusted=*/false));
}

bool ClusterState::DeviceUsable(int n, int d, const PodRequest& req) const {
  const DeviceState& ds = nodes_[n].devices[d];
  switch (req.kind) {
    case DeviceKind::kNone:
      return false;
    case DeviceKind::kWhole:
      return ds.users == 0 && nodes_[n].mig_slices[d].empty();
    case DeviceKind::kFraction:
      if (!nodes_[n].mig_slices[d].empty()) return false;
      if (ds.free_milli < FractionMilli(n, d, req)) return false;
      // The memory ShareOn will charge, explicit or proportional, so that it never goes negative.
      if (ds.free_memory_mib < FractionMemoryMib(n, d, req)) return false;
      return ds.share_key == -1 || ds.share_key == ShareKey(req.tenant);
    case DeviceKind::kMig: {
      if (ds.mig_key == kClosed || (ds.mig_key >= 0 && ds.mig_key != req.tenant)) return false;
      const bool untrusted =
          req.tenant >= 0 && tenants_[req.tenant].trust == TrustLevel::kUntrusted;
      if (untrusted && ds.mig_key == kMigShared) return false;
      const auto& slices = nodes_[n].mig_slices[d];
      for (size_t k = 0; k < slices.size(); ++k) {
        if ((ds.mig_free >> k & 1) && slices[k] == req.mig_profile) return true;
      }
      return false;
    }
  }
  return false;
}

int ClusterState::HomeNuma(int n, const std::vector<DeviceShare>& devices,
                           const PodRequest& req) const {
  const NodeState& s = nodes_[n];
  if (s.numa_cpu.empty()) return 0;  // one NUMA node: node-level room is its room
  const Node& node = fleet_->nodes[n];
  int home = -1;
  if (devices.empty()) {
    for (size_t k = 0; k < s.numa_cpu.size(); ++k)
      if (home < 0 || s.numa_cpu[k] > s.numa_cpu[home]) home = static_cast<int>(k);
  } else {
    std::vector<int> count(s.numa_cpu.size(), 0);
    for (const DeviceShare& d : devices) {
      const int numa = node.devices[d.device].numa_node;
      if (numa >= 0 && numa < static_cast<int>(count.size())) ++count[numa];
    }
    for (size_t k = 0; k < count.size(); ++k)
      if (count[k] > 0 && (home < 0 || count[k] > count[home])) home = static_cast<int>(k);
  }
  return home >= 0 && s.numa_cpu[home] >= req.cpu_milli ? home : -1;
}

// A pod that runs on its home NUMA node takes its CPU from there. A spread pod (home -1) is
// charged evenly to every NUMA node (the remainder to the first), whatever their room: its
// threads may run anywhere, and a fixed split makes Release the exact inverse of Apply, so the
// books (and the state classes built on them) come back exactly after a trial is undone. A
// NUMA node may go below zero that way; pinned pods then see no room there.
void ClusterState::ChargeNumaCpu(NodeState& s, int home, int64_t cpu) {
  if (s.numa_cpu.empty() || cpu == 0) return;
  if (home >= 0 && home < static_cast<int>(s.numa_cpu.size())) {
    s.numa_cpu[home] -= cpu;
    return;
  }
  const int64_t k = static_cast<int64_t>(s.numa_cpu.size());
  for (int64_t i = 0; i < k; ++i) s.numa_cpu[i] -= cpu / k + (i == 0 ? cpu % k : 0);
}

void ClusterState::ReturnNumaCpu(NodeState& s, int home, int64_t cpu) {
  ChargeNumaCpu(s, home, -cpu);
}

void ClusterState::Apply(const Assignment& a, const PodRequest& req) {
  NodeState& s = nodes_[a.node];
  s.free_cpu -= req.cpu_milli;
  ChargeNumaCpu(s, a.numa, req.cpu_milli);
  s.free_memory -= req.memory_mib;
  s.pods += 1;
  if (req.tenant >= 0) {
    Count(s.tenant_pods, req.tenant, +1);
    if (tenants_[req.tenant].exclusive_nodes) s.exclusive_owner = req.tenant;
  }
  if (req.num_gpu > 0) Count(s.gpu_tags, GpuTag(req), +1);
  for (const DeviceShare& share : a.devices) {
    DeviceState& ds = s.devices[share.device];
    ds.users += 1;
    if (share.mig_slice >= 0) {
      ds.mig_free &= ~(1u << share.mig_slice);
      AddKey(&ds.mig_key, MigKeyOf(tenants_, req.tenant), ds.users, mixed_mig_,
             {a.node, share.device});
    } else {
      ds.free_milli -= share.milli;
      s.free_milli -= share.milli;
      ds.free_memory_mib -= share.memory_mib;
      if (req.kind == DeviceKind::kFraction)
        AddKey(&ds.share_key, ShareKey(req.tenant), ds.users, mixed_share_, {a.node, share.device});
    }
    allocated_gpu_milli_ += share.milli;
  }
  RefreshSummary(a.node);
  Reclassify(a.node);
}

void ClusterState::Release(const Assignment& a, const PodRequest& req) {
  NodeState& s = nodes_[a.node];
  s.free_cpu += req.cpu_milli;
  ReturnNumaCpu(s, a.numa, req.cpu_milli);
  s.free_memory += req.memory_mib;
  s.pods -= 1;
  if (req.tenant >= 0) {
    Count(s.tenant_pods, req.tenant, -1);
    if (s.exclusive_owner == req.tenant &&
        std::none_of(s.tenant_pods.begin(), s.tenant_pods.end(),
                     [&](const auto& p) { return p.first == req.tenant; })) {
      s.exclusive_owner = -1;
    }
  }
  if (req.num_gpu > 0) Count(s.gpu_tags, GpuTag(req), -1);
  for (const DeviceShare& share : a.devices) {
    DeviceState& ds = s.devices[share.device];
    ds.users -= 1;
    if (share.mig_slice >= 0) {
      ds.mig_free |= 1u << share.mig_slice;
      RemoveKey(&ds.mig_key, MigKeyOf(tenants_, req.tenant), ds.users, mixed_mig_,
                {a.node, share.device});
    } else {
      ds.free_milli += share.milli;
      s.free_milli += share.milli;
      ds.free_memory_mib += share.memory_mib;
      if (req.kind == DeviceKind::kFraction)
        RemoveKey(&ds.share_key, ShareKey(req.tenant), ds.users, mixed_share_,
                  {a.node, share.device});
      else if (ds.users == 0)
        ds.share_key = -1;
    }
    allocated_gpu_milli_ -= share.milli;
  }
  RefreshSummary(a.node);
  Reclassify(a.node);
}

void ClusterState::AddKey(int32_t* slot, int32_t key, int users,
                          std::map<std::pair<int, int>, std::map<int32_t, int>>& mixed,
                          std::pair<int, int> at) {
  if (auto m = mixed.find(at); m != mixed.end()) {
    ++m->second[key];
  } else if (*slot == -1 || *slot == key) {
    *slot = key;
  } else {
    // (Every pod there before this one holds the one key there was.)
    std::map<int32_t, int>& by_key = mixed[at];
    by_key[*slot] = users - 1;
    by_key[key] = 1;
    *slot = kClosed;
  }
}

void ClusterState::RemoveKey(int32_t* slot, int32_t key, int users,
                             std::map<std::pair<int, int>, std::map<int32_t, int>>& mixed,
                             std::pair<int, int> at) {
  if (auto m = mixed.find(at); m != mixed.end()) {
    if (auto k = m->second.find(key); k != m->second.end() && --k->second <= 0) m->second.erase(k);
    if (m->second.size() <= 1) {
      *slot = m->second.empty() || users == 0 ? -1 : m->second.begin()->first;
      mixed.erase(m);
    }
  } else if (users == 0) {
    *slot = -1;
  }
}

int ClusterState::GpuTag(const PodRequest& req) {
  return req.kind == DeviceKind::kWhole ? req.num_gpu : 0;
}

void ClusterState::Count(std::vector<std::pair<int, int>>& counts, int key, int delta) {
  auto it =
      std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == key; });
  if (it == counts.end()) {
    CHECK(delta > 0);
    counts.emplace_back(key, delta);
    std::sort(counts.begin(), counts.end());
    return;
  }
  it->second += delta;
  CHECK(it->second >= 0);
  if (it->second == 0) counts.erase(it);
}

std::string ClusterState::ClassKey(int n) const {
  const NodeState& s = nodes_[n];
  std::string key;
  key.reserve(32 + s.devices.size() * 24);
  AppendRaw(key, s.type);
  AppendRaw(key, s.free_cpu);
  for (int64_t c : s.numa_cpu) AppendRaw(key, c);
  AppendRaw(key, s.free_memory);
  AppendRaw(key, s.exclusive_owner);
  using DevKey = std::tuple<int, int64_t, int64_t, int32_t, uint32_t, int32_t>;
  std::vector<DevKey> devs;
  devs.reserve(s.devices.size());
  const Node& node = fleet_->nodes[n];
  for (size_t d = 0; d < s.devices.size(); ++d) {
    const DeviceState& ds = s.devices[d];
    devs.emplace_back(node.devices[d].numa_node, ds.free_milli, ds.free_memory_mib, ds.share_key,
                      ds.mig_free, ds.mig_key);
  }
  std::sort(devs.begin(), devs.end());
  for (const DevKey& k : devs) {
    AppendRaw(key, std::get<0>(k));
    AppendRaw(key, std::get<1>(k));
    AppendRaw(key, std::get<2>(k));
    AppendRaw(key, std::get<3>(k));
    AppendRaw(key, std::get<4>(k));
    AppendRaw(key, std::get<5>(k));
  }
  for (const auto& [tag, pods] : s.gpu_tags) {
    AppendRaw(key, tag);
    AppendRaw(key, pods);
  }
  AppendRaw(key, -1);
  // Whether anonymous pods are present decides NodeUsable for exclusive tenants, so nodes of one
  // class must agree on it even where those pods took no CPU or memory.
  int tenant_pods = 0;
  for (const auto& [t, pods] : s.tenant_pods) {
    AppendRaw(key, t);
    tenant_pods += pods;
  }
  AppendRaw(key, s.pods > tenant_pods);
  return key;
}

void ClusterState::RefreshSummary(int n) {
  NodeState& s = nodes_[n];
  s.whole_free = 0;
  s.max_free_milli = 0;
  s.mig_profiles_free = 0;
  for (size_t d = 0; d < s.devices.size(); ++d) {
    const DeviceState& ds = s.devices[d];
    const auto& slices = s.mig_slices[d];
    if (slices.empty()) {
      if (ds.users == 0) ++s.whole_free;
      s.max_free_milli = std::max(s.max_free_milli, ds.free_milli);
      continue;
    }
    for (size_t k = 0; k < slices.size(); ++k) {
      if ((ds.mig_free >> k & 1) && slices[k] < 64) s.mig_profiles_free |= uint64_t{1} << slices[k];
    }
  }
}

void ClusterState::Reclassify(int n) {
  NodeState& s = nodes_[n];
  std::string key = ClassKey(n);
  if (s.cls >= 0) {
    if (classes_[s.cls].key == key) return;
    // Remove n from its sorted class list; drop the class from the active list when it empties.
    NodeClass& old = classes_[s.cls];
    old.nodes.erase(std::lower_bound(old.nodes.begin(), old.nodes.end(), n));
    if (old.nodes.empty()) {
      int moved = active_classes_.back();
      active_classes_[old.active_pos] = moved;
      active_fit_[old.active_pos] = active_fit_.back();
      classes_[moved].active_pos = old.active_pos;
      active_classes_.pop_back();
      active_fit_.pop_back();
      class_by_key_.erase(old.key);
      old.active_pos = -1;
      free_classes_.push_back(s.cls);
    } else {
      active_fit_[old.active_pos].front = old.nodes.front();
      old.stamp = ++last_stamp_;
    }
  }
  auto it = class_by_key_.find(key);
  int c;
  if (it != class_by_key_.end()) {
    c = it->second;
  } else {
    if (!free_classes_.empty()) {
      c = free_classes_.back();
      free_classes_.pop_back();
    } else {
      c = static_cast<int>(classes_.size());
      classes_.emplace_back();
    }
    classes_[c].key = key;
    classes_[c].nodes.clear();
    classes_[c].active_pos = static_cast<int>(active_classes_.size());
    active_classes_.push_back(c);
    active_fit_.push_back(FitSummary{s.free_cpu, s.free_memory, s.max_free_milli,
                                     s.mig_profiles_free, s.whole_free, s.model, n});
    class_by_key_.emplace(std::move(key), c);
  }
  s.cls = c;
  auto& list = classes_[c].nodes;
  list.insert(std::lower_bound(list.begin(), list.end(), n), n);
  active_fit_[classes_[c].active_pos].front = list.front();
  classes_[c].stamp = ++last_stamp_;
}

}  // namespace fabrica
