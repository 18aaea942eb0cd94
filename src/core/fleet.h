// The fleet model: nodes, their GPUs, NICs and place in the network, as the hardware is.
//
// One schema serves every use: the simulator's fleets, the server's simulated nodes, the agent's
// simulated devices and the inventory that health checks compare discovered hardware against.
// Topology follows real machines: on HGX H100/H200 boxes the NVLink domain is the node itself
// (the default), while on GB200 NVL72-style racks several nodes declare one shared NVLink domain.
// Multi-node locality is then judged by InfiniBand leaf and rack. These are plain values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/quantity.h"

namespace fabrica {

// A MIG profile such as "3g.40gb": compute slices out of 7, memory slices out of 8.
struct MigProfile {
  std::string name;
  int compute_slices = 0;
  int memory_slices = 0;
  MemoryMib memory;
};

// The MIG profiles a GPU model supports; empty for models without MIG. `memory`, the GPU's,
// tells the A100's two tables apart: more than 40 GiB is the 80 GB card's (a trial's A100 80GB
// layout was refused by the 40 GB table); not given (0), the 40 GB one.
const std::vector<MigProfile>& MigProfilesFor(const std::string& model,
                                              MemoryMib memory = MemoryMib(0));
const MigProfile* FindMigProfile(const std::string& model, const std::string& profile,
                                 MemoryMib memory = MemoryMib(0));

// The share of a GPU a MIG slice of `compute_slices` (of 7) counts as, in milli-GPU: rounded
// down, so that the slices of one GPU never add up to more than the GPU (7 × 1g = 994). Quota,
// admission and metering all charge a slice this, so a team's metered GPU·s held and its quota
// charge agree.
inline int32_t MigSliceMilli(int compute_slices) { return compute_slices * 1000 / 7; }

struct Device {
  std::string uuid;
  std::string model;  // e.g. "H100", "H200", "GB200", "V100M32"
  MemoryMib memory;
  bool ecc_enabled = true;
  bool mig_capable = false;
  // Current MIG geometry: one entry per slice (profile names). Empty means MIG is off and the
  // GPU is handed out whole or in fractional shares.
  std::vector<std::string> mig_slices;
  std::vector<int> nvlink_peers;  // indexes of devices on the same node
  int numa_node = 0;
  std::string pcie_root;

  bool mig_enabled() const { return !mig_slices.empty(); }
};

struct Nic {
  std::string name;
  int numa_node = 0;
  std::string leaf;  // InfiniBand leaf it is cabled to; defaults to the node's
  int gbps = 400;
};

// A taint on a node (Kubernetes' node.spec.taints, `kubectl taint`): work that does not
// tolerate it (a Toleration of its workload) is not placed there (NoSchedule), and, for
// NoExecute, what runs there without tolerating it is evicted (after the toleration's
// seconds, for work that tolerates it for a while). Set by an admin on the Node object, or by
// the fleet file for the node's first registration.
// NoSchedule keeps off work that does not tolerate it, NoExecute also evicts what runs there,
// PreferNoSchedule only ranks the node after those work may use without it.
enum class TaintEffect { kNoSchedule, kNoExecute, kPreferNoSchedule };
const char* TaintEffectName(TaintEffect e);
// "NoSchedule", "NoExecute" or "PreferNoSchedule"; anything else is refused, named.
Result<TaintEffect> ParseTaintEffect(const std::string& name);
struct Taint {
  std::string key;
  std::string value;  // may be empty
  TaintEffect effect = TaintEffect::kNoSchedule;
  std::string time_added;  // RFC 3339; NoExecute: when it was set (the API stamps it)

  // "key=value:Effect" (kubectl's form; "key:Effect" without a value).
  std::string ToString() const;
};

struct Node {
  NodeId name;
  MilliCpu cpu;
  MemoryMib memory;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  std::string rack;
  std::string leaf;           // InfiniBand leaf switch
  std::string nvlink_domain;  // defaults to the node's name (HGX); shared across a GB200 rack
  int numa_nodes = 1;
  std::vector<Device> devices;
  std::vector<Nic> nics;

  int gpu_count() const { return static_cast<int>(devices.size()); }
  // The model of its GPUs ("" for a CPU-only node); fleets are homogeneous within a node.
  const std::string& gpu_model() const;
  // The value of label `key` as a node selector reads it: the well-known ones every node has
  // (kHostnameLabel: its name; kGpuModelLabel: its GPU model, where it has GPUs), whatever its
  // labels say, else its own labels; nullptr where it has none.
  const std::string* Label(const std::string& key) const;
};

// Labels every node answers to, as Kubernetes' nodes carry kubernetes.io/hostname.
inline constexpr const char* kHostnameLabel = "kubernetes.io/hostname";
inline constexpr const char* kGpuModelLabel = "fabrica.dev/gpu-model";

// A fault to inject into a simulated node (fleet file `faults:`, or `POST .../nodes/N/inject`):
// exactly one of an XID on GPU `gpu`, a double-bit ECC count on GPU `gpu`, the agent's death, or
// a stall (its agent alive, its container runtime wedged).
struct FaultInjection {
  NodeId node;
  int64_t at_ms = 0;  // after the fleet starts (scheduled faults only)
  int xid = 0;        // 0: none
  int gpu = -1;
  int64_t ecc_double_bit = -1;  // -1: none; otherwise the volatile double-bit counter to report
  bool kill = false;            // the agent stops heartbeating, as a crashed node would
  bool stall = false;           // the agent renews its lease but starts no pod
};

struct Fleet {
  std::vector<Node> nodes;
  std::vector<FaultInjection> faults;  // scheduled faults for simulated nodes, by at_ms

  int64_t total_gpus() const;
  const Node* Find(const NodeId& id) const;
  // Every GPU model present, sorted.
  std::vector<std::string> Models() const;
};

// Where a pod's GPUs sit on their node: the NUMA node most of them are on (ties: the lowest),
// and the NIC on that NUMA node to use for its network traffic (the first such, preferring one
// cabled to `leaf` when given; "" when the node has none there). -1 / "" without GPUs. So that
// a pod's GPUs, CPUs and NIC sit on one NUMA node when they can.
struct PodLocality {
  int numa = -1;
  std::string nic;
};
PodLocality LocalityOf(const Node& node, const std::vector<int>& gpu_indexes,
                       const std::string& leaf = "");

// Limits the scheduler's fixed-size tables rely on: a node's GPUs are copied into stack arrays
// of this many entries, and a request's allowed models are a 64-bit mask over the fleet's models.
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxGpuModels = 64;

// The Node annotation naming who cordoned it through the API (spec.unschedulable set by a
// person: kubectl's or fabctl's cordon): the health controller, which cordons nodes too,
// leaves such a cordon in place when its own ends.
inline constexpr const char* kCordonedByAnnotation = "fabrica.dev/cordoned-by";
// The Node annotation saying when a person last uncordoned it through the API (a patch that sets
// spec.unschedulable to false, cordoned or not): the scheduler lifts a hold it put on the node
// before then (pods that did not start there), as it is the person's word that the node is fine.
inline constexpr const char* kUncordonedAtAnnotation = "fabrica.dev/uncordoned-at";

// Checks cross-field invariants: unique names, at most kMaxGpusPerNode GPUs per node and
// kMaxGpuModels models per fleet, NUMA indexes in range, peers in range, MIG geometry that fits
// the model. Messages name the node and field. ParseFleetYaml reports most of these earlier, with
// file and line; this is the final check, and the only one for fleets built in code.
Status ValidateFleet(const Fleet& fleet);

// OK when the MIG geometry `slices` (profile names) exists on `model` and fits one GPU's 7
// compute and 8 memory slices; otherwise the message says why, without a location.
Status CheckMigGeometry(const std::string& model, const std::vector<std::string>& slices,
                        MemoryMib memory = MemoryMib(0));

// Parses the fleet YAML (see docs/fleet.md). `source` names the file in messages. An optional
// top-level `faults:` list schedules faults for simulated nodes:
//   faults:
//     - {node: hgx-a-0, atSeconds: 600, xid: 79, gpu: 3}
//     - {node: hgx-a-1, atSeconds: 900, gpu: 2, eccDoubleBit: 4}
//     - {node: hgx-b-0, atSeconds: 1200, kill: true}
// Each names a node of the fleet and a GPU it has, and exactly one of xid, eccDoubleBit, kill.
Result<Fleet> ParseFleetYaml(const std::string& text, const std::string& source);

// Parses one fault (YAML or JSON: an object of node?, atSeconds?, xid, gpu, eccDoubleBit, kill)
// without checking it against a fleet: unknown fields, wrong types, and anything but exactly one
// of xid / eccDoubleBit / kill are InvalidArgument naming the field. `node` fills in a missing
// node field.
Result<FaultInjection> ParseFaultInjection(const std::string& text, const std::string& source,
                                           const std::string& node);

}  // namespace fabrica
