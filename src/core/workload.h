// Tenants and workloads as users declare them.
//
// A Workload is a set of pod sets, each `count` identical pods with one per-pod device request:
// whole GPUs, a fraction of one GPU (milli-GPU and/or memory MiB, enforced by the vGPU shim), or
// a MIG slice of a named profile; optionally restricted to GPU models ("V100M16|V100M32"). A gang
// workload starts all of its pods or none, and may ask that its pods share one NVLink domain,
// InfiniBand leaf or rack, either as a requirement or as a preference. Plain values.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/quantity.h"
#include "core/status.h"

namespace fabrica {

enum class TrustLevel { kUntrusted, kStandard, kTrusted };

const char* TrustLevelName(TrustLevel t);
Result<TrustLevel> ParseTrustLevel(const std::string& s);

// A spending limit of a tenant or a queue per calendar period (UTC), with alert thresholds in
// percent; `enforce` holds its new work once the period's cost reaches the amount.
struct Budget {
  int64_t amount_micros = 0;
  std::string period = "month";  // day, week (from Monday) or month
  std::vector<int> alert_percent = {50, 80, 100};
  bool enforce = false;
};

class YamlMap;
// Parses {amount: "500.00", period: month, alertPercent: [50, 80, 100], enforce: true}.
Result<Budget> ParseBudget(YamlMap& m);

struct Taint;

// A workload's leave to run on nodes with a taint (Kubernetes' pod toleration): of taints with
// `key` (empty with `exists`: every key), of value `value` (any, with `exists`), of `effect`
// (none: every effect). For NoExecute taints, `seconds` >= 0 is how long what runs may stay
// once the taint is set (tolerationSeconds); -1: for good.
struct Toleration {
  std::string key;
  bool exists = false;  // operator Exists; false: Equal
  std::string value;
  int effect = -1;  // a TaintEffect, or -1: all
  int64_t seconds = -1;

  bool Tolerates(const Taint& taint) const;
  // Whether every taint `t` tolerates, for as long, this one tolerates too (a tenant's
  // allowedTolerations entry admitting a workload's toleration, as Kubernetes' namespace
  // toleration whitelist does).
  bool Covers(const Toleration& t) const;
  // "key=value:Effect", "key:NoExecute for 300 s", "every taint": as messages quote it.
  std::string ToString() const;
  auto operator<=>(const Toleration&) const = default;
};

struct Tenant {
  TenantId name;
  std::optional<Budget> budget;
  TrustLevel trust = TrustLevel::kStandard;
  std::string trust_domain;      // defaults to the tenant's own name
  bool exclusive_nodes = false;  // an untrusted tenant may ask for nodes of its own
  // Tolerations every workload of the tenant is given when it is created (nodes kept for it
  // by a taint it alone tolerates), and, where set, the only tolerations its workloads may
  // carry, given or their own (Kubernetes' PodTolerationRestriction, per namespace).
  std::vector<Toleration> tolerations;
  std::optional<std::vector<Toleration>> allowed_tolerations;
  // Labels every workload of the tenant is kept to (Kubernetes' PodNodeSelector, per
  // namespace): merged into each workload's nodeSelector when it is written; a workload that
  // asks another value of one of these keys is refused.
  std::map<std::string, std::string> node_selector;
};

enum class DeviceKind { kNone, kWhole, kFraction, kMig };

struct DeviceRequest {
  DeviceKind kind = DeviceKind::kNone;
  int gpus = 0;             // kWhole: number of whole GPUs (1..64)
  MilliGpu gpu_milli;       // kFraction: compute share of one GPU (1..999), may be 0 with memory
  MemoryMib gpu_memory;     // kFraction: device memory cap; 0 = proportional to the share
  std::string mig_profile;  // kMig: e.g. "3g.40gb"
  std::vector<std::string> models;  // allowed GPU models; empty = any

  // GPU capacity this request takes from the fleet, for accounting and load (MIG by its
  // compute slices out of 7).
  MilliGpu TotalMilli() const;
};

enum class TopologyLevel { kNone, kNvlinkDomain, kLeaf, kRack };
const char* TopologyLevelName(TopologyLevel l);

struct TopologyConstraint {
  TopologyLevel level = TopologyLevel::kNone;
  bool required = false;  // false: preferred
};

struct Node;

// One requirement of a node selector term (Kubernetes' NodeSelectorRequirement): the node's
// label `key` (or, for a matchFields entry, its name: key metadata.name) is In / NotIn
// `values`, Exists / DoesNotExist, or, read as a whole number, Gt / Lt its one value. NotIn and
// DoesNotExist match a node without the label; Gt and Lt never match one whose label is no
// whole number.
enum class SelectorOp { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };
// `text` as a whole number, as Kubernetes' Gt and Lt read a label (Go's ParseInt: "+5" is 5),
// or nothing.
std::optional<int64_t> WholeNumber(const std::string& text);
const char* SelectorOpName(SelectorOp op);

struct NodeRequirement {
  std::string key;
  SelectorOp op = SelectorOp::kIn;
  std::vector<std::string> values;  // sorted, no repeats (Gt / Lt: the one number)
  bool field = false;               // a matchFields entry: the node's name

  bool Matches(const Node& node) const;
  // "zone In (a,b)", "gpu.count Gt 4", "metadata.name NotIn (n1)".
  std::string ToString() const;
  auto operator<=>(const NodeRequirement&) const = default;
};

// Requirements all of which a node must meet (Kubernetes' NodeSelectorTerm; never empty).
struct NodeTerm {
  std::vector<NodeRequirement> requirements;
  bool Matches(const Node& node) const;
  std::string ToString() const;  // "zone In (a,b), gpu.count Gt 4"
  auto operator<=>(const NodeTerm&) const = default;
};

// A term nodes that meet it are preferred by (Kubernetes' PreferredSchedulingTerm): a node's
// preference is the weights of the terms it meets, summed.
struct PreferredTerm {
  int weight = 1;  // 1..100
  NodeTerm term;
  auto operator<=>(const PreferredTerm&) const = default;
};

// Which nodes a pod may run on, beside what its devices ask: nodes with every label of
// `labels` (Kubernetes' nodeSelector; Node::Label, so kubernetes.io/hostname names one node),
// none of those named in `exclude` (Slurm's --exclude), whose NoSchedule and NoExecute taints
// `tolerations` all tolerate, and that meet one of the `required` terms where there are any
// (Kubernetes' required node affinity: the terms are ORed). Empty: any node but tainted ones.
// The `preferred` terms restrict nothing: placement tries the nodes they favour most first.
struct NodeSelector {
  std::map<std::string, std::string> labels;
  std::vector<std::string> exclude;  // sorted, no repeats
  std::vector<Toleration> tolerations;
  std::vector<NodeTerm> required;
  std::vector<PreferredTerm> preferred;

  // No labels asked, no node excluded, no required term (tolerations and preferences alone
  // restrict nothing).
  bool empty() const { return labels.empty() && exclude.empty() && required.empty(); }
  // The summed weight of the preferred terms `node` meets.
  int Preference(const Node& node) const;
  bool Matches(const Node& node) const;
  // Its labels, exclusions and required affinity alone, taints aside.
  bool MatchesLabels(const Node& node) const;
  // The first NoSchedule or NoExecute taint of `node` its tolerations do not tolerate; null.
  const Taint* Untolerated(const Node& node) const;
  // How many PreferNoSchedule taints of `node` its tolerations do not tolerate.
  int SoftUntolerated(const Node& node) const;
  // "nodeSelector a=b,c=d, excludeNodes n1,n2, nodeAffinity (zone In (a,b)) or (...)": what a
  // message about it quotes.
  std::string Describe() const;
  auto operator<=>(const NodeSelector&) const = default;
};

// Whether some entry of `allowed` covers `t` (Toleration::Covers).
bool ToleratesAllowed(const std::vector<Toleration>& allowed, const Toleration& t);
// Whether `tolerations` tolerate `taint`.
bool Tolerated(const std::vector<Toleration>& tolerations, const Taint& taint);

struct PodSet {
  std::string name;
  int count = 1;
  // Partial admission (Kueue's podSet minCount): when all `count` pods cannot start, it may
  // start with fewer, down to this many (an elastic job); 0: all or nothing.
  int min_count = 0;
  int least() const { return min_count > 0 ? min_count : count; }  // the fewest it starts with
  MilliCpu cpu;
  MemoryMib memory;
  DeviceRequest device;
  NodeSelector nodes;  // the workload's spec.nodeSelector and spec.excludeNodes
};

// What a workload's pods run. The simulated agents only honour the duration; a real agent also
// starts the command.
struct RunSpec {
  std::vector<std::string> command;
  int64_t duration_seconds = 0;  // 0 = until deleted
};

// The most GPU-seconds a workload's status.evictions.gpuSecondsLost holds (what the runs its
// evictions stopped lost, summed; the server caps the sum there).
inline constexpr int64_t kMaxLostGpuSeconds = 1'000'000'000'000;
// The most a workload's status.swap.ceilingMilli may hold (milli-GPUs its queue held).
inline constexpr int64_t kMaxSwapCeilingMilli = 1'000'000'000'000;
// The longest minimum runtime, maximum runtime or checkpoint interval a workload may ask: a year.
inline constexpr int64_t kMaxRunSeconds = 365LL * 24 * 3600;
// Why a run deactivated by its owner (spec.active false) stops: its status.preemption.reason.
// Its stop is no eviction (not counted in status.evictions), and is cancelled if it is made
// active again before its grace period ends.
inline constexpr const char* kDeactivatedWhy = "deactivated (spec.active is false)";
// A run marked to stop whose mark was lifted before its deadline (its preemptor no longer
// waits, its queue froze evictions, it was made active again): its status.message begins with
// this, and its events say EvictionCancelled.
inline constexpr const char* kEvictionCancelled = "eviction cancelled: ";

struct Workload {
  WorkloadId name;
  TenantId tenant;  // the API's namespace
  std::map<std::string, std::string> labels;
  RunSpec run;
  QueueId queue;
  int priority = 0;
  // The PriorityClass `priority` was taken from (the API server copies the class's value into
  // spec.priority when the workload is written); empty: none.
  std::string priority_class;
  bool gang = false;
  // Admission through queues: whether it may be evicted for others (preemption, reclaim,
  // consolidation), and not before it has run this long.
  bool preemptible = true;
  // spec.preemptionPolicy (Kubernetes' PriorityClass and pod field): PreemptLowerPriority
  // (true, the default) or Never (false): it waits ahead of lower-priority work in its queue, but
  // nothing is evicted for it (no priority preemption, reclaim, consolidation move or shrink).
  bool preempts = true;
  // false: it does not run — a pending one is not admitted, a running one is stopped after the
  // grace period and waits — until it is true again (Kueue's Workload spec.active).
  bool active = true;
  int64_t min_runtime_seconds = 0;
  // A run longer than this is stopped for good (Failed, reason MaxRuntimeExceeded), after the
  // eviction grace period, as Slurm's time limit: each run (after a preemption, the next one)
  // has the whole limit (Kueue's maximumExecutionTimeSeconds counts across runs). 0: none.
  int64_t max_runtime_seconds = 0;
  // How often it saves its progress (0: never). An eviction then throws away only the work
  // since its last checkpoint, which is what victim choice counts as lost; resuming from it on
  // restart is the application's part (the replay models it, the simulated fleet does not).
  int64_t checkpoint_interval_seconds = 0;
  TopologyConstraint topology;
  std::vector<PodSet> pod_sets;

  int pod_count() const;
};

// Builds a device request from the trace's (num_gpu, gpu_milli, gpu_spec) triple.
Result<DeviceRequest> DeviceRequestFromTrace(int64_t num_gpu, int64_t gpu_milli,
                                             const std::string& gpu_spec);

Status ValidateDeviceRequest(const DeviceRequest& r);

// Reads a pod set's `devices` mapping (gpus | gpuMilli/gpuMemory | mig, models).
class YamlMap;
Result<DeviceRequest> ParseDeviceRequest(YamlMap& m);
// Reads a `topology` mapping: level nvlink|leaf|rack|none, mode required|preferred.
Result<TopologyConstraint> ParseTopologyConstraint(YamlMap& m);

// Parses a workload manifest (kind: Workload) or a list of them (kind: WorkloadList).
Result<std::vector<Workload>> ParseWorkloadYaml(const std::string& text, const std::string& source);

// A manifest file: Tenant, Workload and WorkloadList documents in any order.
struct Manifest {
  std::vector<Tenant> tenants;
  std::vector<Workload> workloads;
};
Result<Manifest> ParseManifestYaml(const std::string& text, const std::string& source);
// Parses one document already decoded as JSON (an API request body, a stored object) without
// going through text: the same rules and messages as ParseManifestYaml, without line numbers.
Result<Manifest> ParseManifestJson(const nlohmann::json& doc, const std::string& source);

// Kubernetes object names: 1-63 characters of [a-z0-9-], starting and ending alphanumeric.
Status ValidateName(const std::string& name);
// A tenant's name: a ValidateName name that messages can tell from other words before a slash.
// Not all digits ("20/16 GPUs") and not a kind ("workload/a4", "node/n1", "queue/q"): what the
// scheduler writes of another tenant's work is concealed by those "tenant/name" words, and a
// tenant named like them would read as one.
Status ValidateTenantName(const std::string& name);
// A Kubernetes label: the key an optional DNS-subdomain prefix and '/', then a name of 1-63
// characters of [A-Za-z0-9-_.] that starts and ends alphanumeric; the value empty or such a name.
Status ValidateLabel(const std::string& key, const std::string& value);
// A MIG profile a GPU could have: "<1|2|3|4|7>g.<N>gb", what a driver adds after it allowed
// ("+me"). The API asks it of what is written new (a stored workload parses as before).
Status ValidateMigProfileName(const std::string& profile);

// Splits "A|B|C" into models, rejecting empty parts.
Result<std::vector<std::string>> ParseModelList(const std::string& spec);

}  // namespace fabrica
