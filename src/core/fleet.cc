#include "core/fleet.h"

#include <algorithm>
#include <set>

#include "core/workload.h"
#include "core/yaml_reader.h"

namespace fabrica {
namespace {

MigProfile P(const char* name, int c, int m, int64_t gib) {
  return MigProfile{name, c, m, MemoryMib(gib * 1024)};
}

}  // namespace

const std::vector<MigProfile>& MigProfilesFor(const std::string& model, MemoryMib memory) {
  // Published MIG geometries (NVIDIA MIG user guide): 7 compute slices, 8 memory slices.
  static const std::vector<MigProfile> kA100 = {P("1g.5gb", 1, 1, 5), P("2g.10gb", 2, 2, 10),
                                                P("3g.20gb", 3, 4, 20), P("4g.20gb", 4, 4, 20),
                                                P("7g.40gb", 7, 8, 40)};
  static const std::vector<MigProfile> kA100Of80 = {P("1g.10gb", 1, 1, 10), P("1g.20gb", 1, 2, 20),
                                                    P("2g.20gb", 2, 2, 20), P("3g.40gb", 3, 4, 40),
                                                    P("4g.40gb", 4, 4, 40), P("7g.80gb", 7, 8, 80)};
  static const std::vector<MigProfile> kH100 = {P("1g.10gb", 1, 1, 10), P("1g.20gb", 1, 2, 20),
                                                P("2g.20gb", 2, 2, 20), P("3g.40gb", 3, 4, 40),
                                                P("4g.40gb", 4, 4, 40), P("7g.80gb", 7, 8, 80)};
  static const std::vector<MigProfile> kH200 = {P("1g.18gb", 1, 1, 18), P("1g.35gb", 1, 2, 35),
                                                P("2g.35gb", 2, 2, 35), P("3g.71gb", 3, 4, 71),
                                                P("4g.71gb", 4, 4, 71), P("7g.141gb", 7, 8, 141)};
  static const std::vector<MigProfile> kGB200 = {P("1g.23gb", 1, 1, 23), P("1g.47gb", 1, 2, 47),
                                                 P("2g.47gb", 2, 2, 47), P("3g.93gb", 3, 4, 93),
                                                 P("4g.93gb", 4, 4, 93), P("7g.186gb", 7, 8, 186)};
  static const std::vector<MigProfile> kNone;
  if (model == "A100") return memory.value() > 40 * 1024 ? kA100Of80 : kA100;
  if (model == "H100") return kH100;
  if (model == "H200") return kH200;
  if (model == "GB200" || model == "B200") return kGB200;
  return kNone;
}

const MigProfile* FindMigProfile(const std::string& model, const std::string& profile,
                                 MemoryMib memory) {
  for (const MigProfile& p : MigProfilesFor(model, memory)) {
    if (p.name == profile) return &p;
  }
  return nullptr;
}

const char* TaintEffectName(TaintEffect e) {
  switch (e) {
    case TaintEffect::kNoSchedule:
      return "NoSchedule";
    case TaintEffect::kNoExecute:
      return "NoExecute";
    case TaintEffect::kPreferNoSchedule:
      return "PreferNoSchedule";
  }
  return "?";
}

Result<TaintEffect> ParseTaintEffect(const std::string& name) {
  if (name == "NoSchedule") return TaintEffect::kNoSchedule;
  if (name == "NoExecute") return TaintEffect::kNoExecute;
  if (name == "PreferNoSchedule") return TaintEffect::kPreferNoSchedule;
  return InvalidArgument("'" + name + "' is not NoSchedule, PreferNoSchedule or NoExecute");
}

std::string Taint::ToString() const {
  return key + (value.empty() ? "" : "=" + value) + ":" + TaintEffectName(effect);
}

const std::string& Node::gpu_model() const {
  static const std::string kNone;
  return devices.empty() ? kNone : devices.front().model;
}

const std::string* Node::Label(const std::string& key) const {
  // (The well-known ones are the node's own, whatever a label of that key says.)
  if (key == kHostnameLabel) return &name.str();
  if (key == kGpuModelLabel) return devices.empty() ? nullptr : &devices.front().model;
  if (auto it = labels.find(key); it != labels.end()) return &it->second;
  return nullptr;
}

int64_t Fleet::total_gpus() const {
  int64_t n = 0;
  for (const Node& node : nodes) n += node.gpu_count();
  return n;
}

PodLocality LocalityOf(const Node& node, const std::vector<int>& gpu_indexes,
                       const std::string& leaf) {
  PodLocality out;
  std::vector<int> count(static_cast<size_t>(std::max(1, node.numa_nodes)), 0);
  for (int g : gpu_indexes) {
    if (g < 0 || g >= node.gpu_count()) continue;
    const int numa = node.devices[g].numa_node;
    if (numa >= 0 && numa < static_cast<int>(count.size())) ++count[numa];
  }
  for (size_t n = 0; n < count.size(); ++n) {
    if (count[n] > 0 && (out.numa < 0 || count[n] > count[out.numa]))
      out.numa = static_cast<int>(n);
  }
  if (out.numa < 0) return out;
  for (const Nic& nic : node.nics) {
    if (nic.numa_node != out.numa) continue;
    const std::string& nic_leaf = nic.leaf.empty() ? node.leaf : nic.leaf;
    if (!leaf.empty() && nic_leaf == leaf) {
      out.nic = nic.name;  // on the NUMA node and cabled to the wanted leaf: the best there is
      break;
    }
    if (out.nic.empty()) out.nic = nic.name;
  }
  return out;
}

const Node* Fleet::Find(const NodeId& id) const {
  for (const Node& node : nodes) {
    if (node.name == id) return &node;
  }
  return nullptr;
}

std::vector<std::string> Fleet::Models() const {
  std::set<std::string> models;
  for (const Node& node : nodes) {
    for (const Device& d : node.devices) models.insert(d.model);
  }
  return {models.begin(), models.end()};
}

Status CheckMigGeometry(const std::string& model, const std::vector<std::string>& slices,
                        MemoryMib gpu_memory) {
  if (slices.empty()) return Status::Ok();
  if (MigProfilesFor(model).empty()) return InvalidArgument("model " + model + " has no MIG");
  int compute = 0, memory = 0;
  for (const std::string& slice : slices) {
    const MigProfile* p = FindMigProfile(model, slice, gpu_memory);
    if (!p) {
      std::string known;
      for (const MigProfile& q : MigProfilesFor(model, gpu_memory))
        known += (known.empty() ? "" : ", ") + q.name;
      return InvalidArgument(
          "unknown profile '" + slice + "' for " + model +
          (model == "A100" ? (gpu_memory.value() > 40 * 1024 ? " 80GB" : " 40GB") : std::string()) +
          " (its profiles: " + known + ")");
    }
    compute += p->compute_slices;
    memory += p->memory_slices;
  }
  if (compute > 7 || memory > 8) {
    return InvalidArgument("geometry needs " + std::to_string(compute) + "/7 compute and " +
                           std::to_string(memory) + "/8 memory slices");
  }
  return Status::Ok();
}

Status ValidateFleet(const Fleet& fleet) {
  std::set<std::string> names;
  std::set<std::string> uuids;
  for (const Node& node : fleet.nodes) {
    const std::string where = "node " + node.name.str();
    if (node.name.empty()) return InvalidArgument("a node has an empty name");
    if (!names.insert(node.name.str()).second) return InvalidArgument(where + ": duplicate name");
    if (node.cpu.IsNegative()) return InvalidArgument(where + ": cpu must not be negative");
    if (node.memory.IsNegative()) return InvalidArgument(where + ": memory must not be negative");
    if (node.numa_nodes < 1) return InvalidArgument(where + ": numaNodes must be at least 1");
    if (node.gpu_count() > kMaxGpusPerNode) {
      return InvalidArgument(where + ": devices: " + std::to_string(node.gpu_count()) +
                             " GPUs, at most " + std::to_string(kMaxGpusPerNode) + " per node");
    }
    for (size_t i = 0; i < node.devices.size(); ++i) {
      const Device& d = node.devices[i];
      const std::string dw = where + ": devices[" + std::to_string(i) + "]";
      if (d.model.empty()) return InvalidArgument(dw + ".model: required");
      if (d.model != node.devices.front().model) {
        return InvalidArgument(dw + ".model: a node's GPUs must all be one model");
      }
      if (!d.uuid.empty() && !uuids.insert(d.uuid).second) {
        return InvalidArgument(dw + ".uuid: duplicate '" + d.uuid + "'");
      }
      if (d.numa_node < 0 || d.numa_node >= node.numa_nodes) {
        return InvalidArgument(dw + ".numa: " + std::to_string(d.numa_node) +
                               " is not below numaNodes " + std::to_string(node.numa_nodes));
      }
      for (int peer : d.nvlink_peers) {
        if (peer < 0 || peer >= node.gpu_count() || peer == static_cast<int>(i)) {
          return InvalidArgument(dw + ".nvlinkPeers: bad device index " + std::to_string(peer));
        }
      }
      if (d.mig_enabled()) {
        if (!d.mig_capable) return InvalidArgument(dw + ".mig: model " + d.model + " has no MIG");
        Status st = CheckMigGeometry(d.model, d.mig_slices, d.memory);
        if (!st.ok()) return InvalidArgument(dw + ".mig: " + st.message());
      }
    }
    for (size_t i = 0; i < node.nics.size(); ++i) {
      if (node.nics[i].numa_node < 0 || node.nics[i].numa_node >= node.numa_nodes) {
        return InvalidArgument(where + ": nics[" + std::to_string(i) + "].numa out of range");
      }
    }
  }
  const size_t models = fleet.Models().size();
  if (models > static_cast<size_t>(kMaxGpuModels)) {
    return InvalidArgument("the fleet has " + std::to_string(models) + " GPU models, at most " +
                           std::to_string(kMaxGpuModels) + " are supported");
  }
  return Status::Ok();
}

namespace {

// Device `index` of a node with `device_count` devices. Ranges and MIG geometry are checked
// here rather than only in ValidateFleet so that the error carries the file, line and YAML path.
Result<Device> ParseDevice(YamlMap& m, const Node& node, int index, int device_count) {
  Device d;
  ASSIGN_OR_RETURN(d.model, m.String("model"));
  ASSIGN_OR_RETURN(d.uuid, m.String("uuid", ""));
  ASSIGN_OR_RETURN(d.memory, m.Memory("memory", MemoryMib(0)));
  ASSIGN_OR_RETURN(d.ecc_enabled, m.Bool("ecc", true));
  ASSIGN_OR_RETURN(int64_t numa, m.Int("numa", 0));
  if (numa >= node.numa_nodes) {
    return m.Error("numa", std::to_string(numa) + " is not below numaNodes " +
                               std::to_string(node.numa_nodes));
  }
  d.numa_node = static_cast<int>(numa);
  ASSIGN_OR_RETURN(d.pcie_root, m.String("pcieRoot", ""));
  ASSIGN_OR_RETURN(d.mig_slices, m.StringList("mig"));
  d.mig_capable = !MigProfilesFor(d.model).empty();
  Status mig = CheckMigGeometry(d.model, d.mig_slices, d.memory);
  if (!mig.ok()) return m.Error("mig", mig.message());
  Doc peers = m.Raw("nvlinkPeers");
  if (peers && !peers.IsNull()) {
    if (!peers.IsSequence()) return m.Error("nvlinkPeers", "expected a list of device indexes");
    for (const auto& p : peers) {
      auto v = ParseNonNegativeInt(p.Scalar());
      if (!v.ok()) return m.Error("nvlinkPeers", v.status().message());
      if (*v >= device_count || *v == index) {
        return m.Error("nvlinkPeers", "bad device index " + std::to_string(*v));
      }
      d.nvlink_peers.push_back(static_cast<int>(*v));
    }
  }
  RETURN_IF_ERROR(m.Finish());
  return d;
}

// The `gpus:` shorthand: N identical devices on an NVSwitch (all peers of each other), spread
// evenly over the node's NUMA nodes.
Status ParseGpuShorthand(YamlMap& m, Node& node) {
  ASSIGN_OR_RETURN(int64_t count, m.Int("count"));
  if (count > kMaxGpusPerNode) {
    return m.Error("count", "at most " + std::to_string(kMaxGpusPerNode) + " GPUs per node");
  }
  ASSIGN_OR_RETURN(std::string model, m.String("model"));
  ASSIGN_OR_RETURN(MemoryMib memory, m.Memory("memory", MemoryMib(0)));
  ASSIGN_OR_RETURN(bool ecc, m.Bool("ecc", true));
  ASSIGN_OR_RETURN(std::vector<std::string> mig, m.StringList("mig"));
  Status mig_ok = CheckMigGeometry(model, mig, memory);
  if (!mig_ok.ok()) return m.Error("mig", mig_ok.message());
  ASSIGN_OR_RETURN(bool nvswitch, m.Bool("nvswitch", true));
  RETURN_IF_ERROR(m.Finish());
  for (int64_t i = 0; i < count; ++i) {
    Device d;
    d.uuid = "GPU-" + node.name.str() + "-" + std::to_string(i);
    d.model = model;
    d.memory = memory;
    d.ecc_enabled = ecc;
    d.mig_capable = !MigProfilesFor(model).empty();
    d.mig_slices = mig;
    d.numa_node = static_cast<int>(i * node.numa_nodes / count);
    d.pcie_root = "pci" + std::to_string(i / 2);
    if (nvswitch) {
      for (int64_t j = 0; j < count; ++j) {
        if (j != i) d.nvlink_peers.push_back(static_cast<int>(j));
      }
    }
    node.devices.push_back(std::move(d));
  }
  return Status::Ok();
}

Result<std::vector<Node>> ParseNodeEntry(YamlMap& m) {
  Node node;
  ASSIGN_OR_RETURN(std::string name, m.String("name"));
  ASSIGN_OR_RETURN(int64_t count, m.Int("count", 1));
  if (count < 1 || count > 100000) return m.Error("count", "must be between 1 and 100000");
  ASSIGN_OR_RETURN(node.cpu, m.Cpu("cpu"));
  ASSIGN_OR_RETURN(node.memory, m.Memory("memory"));
  ASSIGN_OR_RETURN(node.rack, m.String("rack", ""));
  ASSIGN_OR_RETURN(node.leaf, m.String("leaf", ""));
  ASSIGN_OR_RETURN(node.nvlink_domain, m.String("nvlinkDomain", ""));
  ASSIGN_OR_RETURN(int64_t numa, m.Int("numaNodes", 1));
  // The upper bound only keeps the count an int; real machines have a handful of NUMA nodes.
  if (numa < 1 || numa > 64) return m.Error("numaNodes", "must be between 1 and 64");
  node.numa_nodes = static_cast<int>(numa);
  ASSIGN_OR_RETURN(node.labels, m.StringMap("labels"));
  for (const auto& [k, v] : node.labels) {
    if (Status valid = ValidateLabel(k, v); !valid.ok()) return m.Error("labels", valid.message());
    // (Every node answers to these with its own name and model: Node::Label.)
    if (k == kHostnameLabel || k == kGpuModelLabel)
      return m.Error("labels", "'" + k +
                                   "' is set by Fabrica on every node (its name, its GPU "
                                   "model)");
  }

  Doc taints = m.Raw("taints");
  if (taints && !taints.IsNull()) {
    if (!taints.IsSequence()) return m.Error("taints", "expected a list");
    if (taints.size() > 100) return m.Error("taints", "at most 100 taints");
    for (size_t i = 0; i < taints.size(); ++i) {
      YamlMap tm = m.Child(taints[i], m.Path("taints") + "[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(tm.CheckIsMap());
      Taint t;
      ASSIGN_OR_RETURN(t.key, tm.String("key"));
      ASSIGN_OR_RETURN(t.value, tm.String("value", ""));
      ASSIGN_OR_RETURN(std::string effect, tm.String("effect"));
      ASSIGN_OR_RETURN(t.time_added, tm.String("timeAdded", ""));
      RETURN_IF_ERROR(tm.Finish());
      if (Status valid = ValidateLabel(t.key, t.value); !valid.ok())
        return tm.Error(valid.message().rfind("label value", 0) == 0 ? "value" : "key",
                        valid.message());
      Result<TaintEffect> e = ParseTaintEffect(effect);
      if (!e.ok()) return tm.Error("effect", e.status().message());
      t.effect = *e;
      // (Kubernetes' rule: one taint per key and effect.)
      for (const Taint& other : node.taints)
        if (other.key == t.key && other.effect == t.effect)
          return tm.Error("key", "a second '" + t.key + "' taint of effect " + effect);
      node.taints.push_back(t);
    }
  }

  Doc nics = m.Raw("nics");
  if (nics && !nics.IsNull()) {
    if (!nics.IsSequence()) return m.Error("nics", "expected a list");
    for (size_t i = 0; i < nics.size(); ++i) {
      YamlMap nm = m.Child(nics[i], m.Path("nics") + "[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(nm.CheckIsMap());
      Nic nic;
      ASSIGN_OR_RETURN(nic.name, nm.String("name"));
      ASSIGN_OR_RETURN(int64_t nnuma, nm.Int("numa", 0));
      if (nnuma >= node.numa_nodes) {
        return nm.Error("numa", std::to_string(nnuma) + " is not below numaNodes " +
                                    std::to_string(node.numa_nodes));
      }
      nic.numa_node = static_cast<int>(nnuma);
      ASSIGN_OR_RETURN(nic.leaf, nm.String("leaf", node.leaf));
      ASSIGN_OR_RETURN(int64_t gbps, nm.Int("gbps", 400));
      nic.gbps = static_cast<int>(gbps);
      RETURN_IF_ERROR(nm.Finish());
      node.nics.push_back(nic);
    }
  }
  const bool has_gpus = m.Has("gpus"), has_devices = m.Has("devices");
  if (has_gpus && has_devices) return m.Error("devices", "give either gpus or devices, not both");
  std::vector<Node> out;
  for (int64_t r = 0; r < count; ++r) {
    Node copy = node;
    copy.name = NodeId(count == 1 ? name : name + "-" + std::to_string(r));
    if (copy.nvlink_domain.empty()) copy.nvlink_domain = copy.name.str();
    if (has_gpus) {
      YamlMap gm = m.Child("gpus");
      RETURN_IF_ERROR(gm.CheckIsMap());
      RETURN_IF_ERROR(ParseGpuShorthand(gm, copy));
    } else if (has_devices) {
      Doc devs = m.Raw("devices");
      if (!devs.IsSequence()) return m.Error("devices", "expected a list");
      if (devs.size() > static_cast<size_t>(kMaxGpusPerNode)) {
        return m.Error("devices", std::to_string(devs.size()) + " GPUs, at most " +
                                      std::to_string(kMaxGpusPerNode) + " per node");
      }
      const int device_count = static_cast<int>(devs.size());
      for (int i = 0; i < device_count; ++i) {
        YamlMap dm = m.Child(devs[i], m.Path("devices") + "[" + std::to_string(i) + "]");
        RETURN_IF_ERROR(dm.CheckIsMap());
        ASSIGN_OR_RETURN(Device d, ParseDevice(dm, copy, i, device_count));
        if (d.uuid.empty()) d.uuid = "GPU-" + copy.name.str() + "-" + std::to_string(i);
        copy.devices.push_back(std::move(d));
      }
    }
    out.push_back(std::move(copy));
  }
  RETURN_IF_ERROR(m.Finish());
  return out;
}

Result<FaultInjection> ParseFault(YamlMap& m, const std::string& default_node, bool scheduled) {
  RETURN_IF_ERROR(m.CheckIsMap());
  FaultInjection f;
  ASSIGN_OR_RETURN(std::string node,
                   default_node.empty() ? m.String("node") : m.String("node", default_node));
  if (node.empty()) return m.Error("node", "required");
  f.node = NodeId(node);
  ASSIGN_OR_RETURN(int64_t at_s, scheduled ? m.Int("atSeconds") : m.Int("atSeconds", 0));
  if (at_s < 0 || at_s > 366LL * 86400) return m.Error("atSeconds", "must be 0..31622400");
  f.at_ms = at_s * 1000;
  ASSIGN_OR_RETURN(int64_t xid, m.Int("xid", 0));
  if (m.Has("xid") && (xid < 1 || xid > 9999)) return m.Error("xid", "must be 1..9999");
  f.xid = static_cast<int>(xid);
  ASSIGN_OR_RETURN(int64_t gpu, m.Int("gpu", -1));
  if (m.Has("gpu") && (gpu < 0 || gpu >= kMaxGpusPerNode)) {
    return m.Error("gpu", "must be a GPU index 0.." + std::to_string(kMaxGpusPerNode - 1));
  }
  f.gpu = static_cast<int>(gpu);
  ASSIGN_OR_RETURN(f.ecc_double_bit, m.Int("eccDoubleBit", -1));
  if (m.Has("eccDoubleBit") && f.ecc_double_bit < 0) {
    return m.Error("eccDoubleBit", "must be a count, 0 or more");
  }
  ASSIGN_OR_RETURN(f.kill, m.Bool("kill", false));
  ASSIGN_OR_RETURN(f.stall, m.Bool("stall", false));
  RETURN_IF_ERROR(m.Finish());
  const int kinds = (f.xid > 0) + (f.ecc_double_bit >= 0) + (f.kill ? 1 : 0) + (f.stall ? 1 : 0);
  if (kinds != 1) {
    return m.Error(m.Has("xid")            ? "xid"
                   : m.Has("eccDoubleBit") ? "eccDoubleBit"
                   : m.Has("kill")         ? "kill"
                                           : "stall",
                   "give exactly one of xid, eccDoubleBit, kill: true or stall: true");
  }
  if ((f.kill || f.stall) && m.Has("gpu"))
    return m.Error("gpu", std::string("a ") + (f.kill ? "kill" : "stall") +
                              " takes the whole node, not a GPU");
  if (!f.kill && !f.stall && f.gpu < 0) return m.Error("gpu", "required with xid and eccDoubleBit");
  return f;
}

}  // namespace

Result<FaultInjection> ParseFaultInjection(const std::string& text, const std::string& source,
                                           const std::string& node) {
  ASSIGN_OR_RETURN(Doc doc, LoadYaml(text, source));
  YamlMap m(doc, "", source);
  return ParseFault(m, node, false);
}

Result<Fleet> ParseFleetYaml(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(Doc doc, LoadYaml(text, source));
  YamlMap top(doc, "", source);
  RETURN_IF_ERROR(top.CheckIsMap());
  ASSIGN_OR_RETURN(std::string kind, top.String("kind", "Fleet"));
  if (kind != "Fleet") return top.Error("kind", "expected Fleet, got '" + kind + "'");
  ASSIGN_OR_RETURN(std::string api, top.String("apiVersion", "fabrica.dev/v1"));
  if (api != "fabrica.dev/v1") return top.Error("apiVersion", "expected fabrica.dev/v1");
  Doc nodes = top.Raw("nodes");
  if (!nodes || !nodes.IsSequence()) return top.Error("nodes", "expected a list of nodes");
  Fleet fleet;
  std::set<std::string> names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    YamlMap m = top.Child(nodes[i], "nodes[" + std::to_string(i) + "]");
    RETURN_IF_ERROR(m.CheckIsMap());
    ASSIGN_OR_RETURN(std::vector<Node> expanded, ParseNodeEntry(m));
    // Checked here, not only in ValidateFleet, so that the error points at the entry's line.
    for (Node& n : expanded) {
      if (!names.insert(n.name.str()).second) {
        return m.Error("name", "node " + n.name.str() + ": duplicate name");
      }
      fleet.nodes.push_back(std::move(n));
    }
  }
  Doc faults = top.Raw("faults");
  if (faults && !faults.IsNull()) {
    if (!faults.IsSequence()) return top.Error("faults", "expected a list of faults");
    for (size_t i = 0; i < faults.size(); ++i) {
      YamlMap fm = top.Child(faults[i], "faults[" + std::to_string(i) + "]");
      ASSIGN_OR_RETURN(FaultInjection f, ParseFault(fm, "", true));
      const Node* n = fleet.Find(f.node);
      if (!n) return fm.Error("node", "no node " + f.node.str() + " in this fleet");
      if (f.gpu >= n->gpu_count()) {
        return fm.Error(
            "gpu", "node " + f.node.str() + " has " + std::to_string(n->gpu_count()) + " GPUs");
      }
      fleet.faults.push_back(f);
    }
    std::stable_sort(
        fleet.faults.begin(), fleet.faults.end(),
        [](const FaultInjection& a, const FaultInjection& b) { return a.at_ms < b.at_ms; });
  }
  RETURN_IF_ERROR(top.Finish());
  Status st = ValidateFleet(fleet);
  if (!st.ok()) return st.WithContext(source);
  return fleet;
}

}  // namespace fabrica
