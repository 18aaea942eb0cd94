#include "control/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "api/json_fields.h"
#include "api/metrics.h"
#include "control/eviction_record.h"
#include "control/sim_agent.h"
#include "core/fleet.h"
#include "core/workload.h"
#include "core/yaml_reader.h"
#include "sched/admission.h"
#include "sched/frag.h"
#include "sched/placer.h"
#include "sched/queue_objects.h"

namespace fabrica {

struct Scheduler::ParsedWorkload {
  nlohmann::json obj;
  Workload w;
};

namespace {

using jsonf::Field;
using jsonf::Int;
using jsonf::List;
using jsonf::Str;

using json = nlohmann::json;

// v to `digits` significant digits (0 and non-finite values as they are).
double SignificantDigits(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * scale) / scale;
}

struct StoredWorkload {
  KeyValue kv;
  std::shared_ptr<const Scheduler::ParsedWorkload> parsed;  // shared with the parse cache
  std::vector<PodRequest> pods;
  Status request_error;
  // A pending preemptor's planned place (status.nomination), one per pod; empty if none.
  std::vector<Assignment> nomination;
  // ... nominated for fewer pods than all (status.nominatedCounts: a reclaim for the pods its
  // queue's guarantee holds), per pod set; `nomination` holds that many. Empty: all.
  std::vector<int> nomination_counts;
  // ... and, where its own queue's work makes way for it past a quota that shrank, the flavour
  // and what its queue held there (status.swap; Admitter::swap).
  std::optional<Admitter::Swap> swap;
  // Bound with fewer pods than asked (partial admission: status.admittedCounts), per pod set;
  // `pods` holds that many. Empty: all.
  std::vector<int> counts;
  // Pending after some of its pods completed (status.finishedPods, kept through a requeue):
  // per pod set, their indices; `pods` holds only the others, which are all it runs. Empty:
  // none.
  std::vector<std::set<int>> done;

  const json& obj() const { return parsed->obj; }
  const Workload& w() const { return parsed->w; }
};

struct BoundWorkload {
  StoredWorkload sw;
  std::vector<Assignment> assign;
  bool evicting = false;  // chosen as a victim; stops at status.preemption.deadline
  bool leaving = false;   // ... for no preemptor (a drain, its maximum runtime)
  // While pods elastic shrinks took stop (status.shrinks): the pods per set it keeps (the
  // first of each set; the rest are restored as fragments, one per mark). Empty: none.
  std::vector<int> kept_counts;
  nlohmann::json marks;  // those marks, oldest first
  // Its pods per set that completed while others run on: `assign` and sw.pods name only the
  // others. Empty: none.
  std::vector<int> completed;
  // What its queue is charged for its GPUs as restored this cycle (with the pods its shrinks
  // still stop), in milli-GPUs; -1: not charged to a queue (status.resourceUsage).
  int64_t charge_milli = -1;
  std::string charge_queue;  // ... and the queue charged
  // Running in part and not grown this cycle: why not (status.growthBlocked); empty: not known.
  std::string growth_why;
  // The object as this cycle rewrote it (a mark called off), or null: later writes of the cycle
  // start from it, as sw.kv's revision is that write's (a trial's called-off shrink was written
  // back from the object read at the cycle's start).
  nlohmann::json written;
  const nlohmann::json& obj() const { return written.is_null() ? sw.obj() : written; }
  // Each of `marks`' pods' id in the Admitter as restored this cycle (-1: none). (Last: the
  // cycle builds these from the fields above.)
  std::vector<int> mark_fragments;
};

// What one cycle decided for one pending workload.
struct Decision {
  std::vector<Assignment> placed;  // empty: it waits
  std::vector<int> counts;         // admitted with fewer pods: per pod set (empty: all)
  std::string message, reason;
  std::vector<Assignment> nomination;  // while it waits for its victims: its planned place
  std::vector<int> nomination_counts;  // ... for these pods per set (empty: all of them)
  std::optional<Admitter::Swap> swap;  // and its swap (status.swap)
  int64_t expected_start_ms = -1;      // reserving room: when it frees by the limits (or -1)
  int64_t charge_milli = -1;           // admitted: what its queue is charged for its GPUs
  std::string charge_queue;            // ... and which queue that is
  std::string partial_why;             // admitted in part: why no more (empty: not known)
};

// status.resourceUsage: what its queue is charged (as Kueue's podSetAssignments' resourceUsage):
// for its GPUs, a quantity in milli-GPUs ("513m": a fraction's memory share, a tenant's
// exclusive nodes, ... may charge more than the compute it asks), and the leaf queue charged (as
// Kueue's admission.clusterQueue): its tenant's when it names none, the built-in unqueued once
// its tenant may no longer use the queue it names.
json ResourceUsage(int64_t charge_milli, const std::string& queue) {
  return {{"gpu", std::to_string(charge_milli) + "m"}, {"queue", queue}};
}

// ... for running work, after `status` (as stored): a change of the queue charged is dated
// (`since`), kept until the next one, so that its meter bills the time before it to the queue it
// had and the time after to the one it has now — also from none (work that ran before any queue
// existed, charged to its tenant's queue once one is created: a trial's stayed billed to no
// queue for good, its queue's budget never counting it).
json ResourceUsage(int64_t charge_milli, const std::string& queue, const json& status,
                   int64_t now_ms) {
  json usage = ResourceUsage(charge_milli, queue);
  const json& old = Field(status, "resourceUsage");
  const std::string was = Str(old, "queue");
  if (was != queue) {
    usage["since"] = FormatTimestamp(now_ms);
  } else if (const std::string since = Str(old, "since"); !since.empty()) {
    usage["since"] = since;
  }
  return usage;
}

// The message of bound work whose pods have not all started, from a tenth of the pods-ready
// timeout after it was bound (at most 10 s) ("2 of 3 pods started; waiting for main-2 on n-3
// (released to wait again at T if not all have started: the pods-ready timeout of 300 s)"), or,
// once all have, what the nodes say (RunningMessage) in place of it, or of a growth's message
// ("all 4 pods admitted (2 added as room freed)" stayed on for good: a trial); empty where its
// message is another's to write (a partial admission's, a shrink's, ...) or stays as it is.
std::string PodsStartingMessage(const json& status, double timeout_s, int64_t now_ms) {
  const std::string phase = Str(status, "phase");
  if (phase != "Scheduled" && phase != "Running") return "";
  const std::string stored = Str(status, "message");
  const bool grown = stored.find(" added as room freed") != std::string::npos;
  const bool ours = stored.empty() || stored.rfind("running", 0) == 0 || grown ||
                    stored.find(" pods started; waiting for ") != std::string::npos ||
                    stored.rfind("waiting for its pod", 0) == 0;
  if (!ours) return "";
  const int64_t scheduled = ParseTimestamp(Str(status, "scheduledTime"));
  const int64_t resized = ParseTimestamp(Str(status, "resizedTime"));
  if (scheduled < 0) return "";
  if (AllPodsStarted(status)) {
    // (Its own text, once all started: what the nodes say; a message of theirs stays. A grown
    // partial admission keeps its size: "admitted 3 of 4 pods (partial admission); running …".)
    if (grown && stored.rfind("admitted ", 0) == 0)
      return stored.substr(0, stored.find(" (")) + " (partial admission); " +
             RunningMessage(status);
    return stored.rfind("running", 0) == 0 ? "" : RunningMessage(status);
  }
  // (Grown work's added pods: its growth's message stays, and the growth is undone in time.)
  if (resized >= scheduled) return "";
  // (Not at once: pods mostly start within seconds, and a write of every workload just bound
  // cost the server's admission benchmark a tenth of its rate.)
  if (now_ms - scheduled < static_cast<int64_t>(std::min(10.0, timeout_s / 10) * 1000)) return "";
  const json& started = Field(status, "startedPods");
  const json& finished = Field(status, "finishedPods");
  int pods = 0, up = 0, shown = 0;
  std::string missing;
  for (const json& a : List(status, "assignments")) {
    const std::string pod = Str(a, "pod", "0");
    if (Str(a, "node").empty()) continue;  // (completed before it was requeued)
    ++pods;
    if (started.contains(pod) || (finished.is_object() && finished.contains(pod))) {
      ++up;
    } else if (++shown <= 3) {
      missing += (missing.empty() ? "" : ", ") + pod + " on " + Str(a, "node");
    }
  }
  if (shown > 3) missing += " and " + std::to_string(shown - 3) + " more";
  const std::string deadline = FormatTimestamp(scheduled + static_cast<int64_t>(timeout_s * 1000));
  const std::string timeout = std::to_string(static_cast<int64_t>(timeout_s)) + " s";
  const std::string head = pods == 1 ? "waiting for its pod to start: " + missing
                                     : std::to_string(up) + " of " + std::to_string(pods) +
                                           " pods started; waiting for " + missing;
  return head + " (released to wait again at " + deadline +
         " if not all have started: the pods-ready timeout of " + timeout + ")";
}

// A decision that it waits, with why.
Decision Waits(std::string message, std::string reason, std::vector<Assignment> nomination = {}) {
  return {{}, {}, std::move(message), std::move(reason), std::move(nomination)};
}

// "waiting for 2 preempted workload(s) to stop", or, where `shrunk` of them give up only pods
// beyond their minCount (an elastic shrink), "... for the pods taken from 1 workload(s) ...".
// `names`: the whole victims' "tenant/name"s, said after their count where any.
std::string WaitingForVictims(int victims, int shrunk, const std::string& names = "",
                              const std::string& shrunk_names = "") {
  const std::string whole = std::to_string(victims - shrunk) + " preempted workload(s)" +
                            (names.empty() ? "" : " (" + names + ")");
  const std::string pods = "the pods taken from " + std::to_string(shrunk) + " workload(s)" +
                           (shrunk_names.empty() ? "" : " (" + shrunk_names + ")");
  return "waiting for " +
         (shrunk == 0         ? whole
          : shrunk == victims ? pods
                              : whole + " and " + pods) +
         " to stop";
}

bool Bound(const std::string& phase) { return phase == "Scheduled" || phase == "Running"; }

// What its start timeout is, said of a workload: a gang's, or, of work that is no gang, its pods
// (a trial's elastic job, no gang, read "its gang timed out").
std::string TimedOut(const Workload& w) {
  return w.gang ? "its gang timed out " : "its pods did not start in time ";
}

// When this run began, for its maximum runtime: its admission (status.scheduledTime), as Slurm
// counts a time limit from the allocation and Kueue from the admission, so that a limit is a
// promise the admitter can plan on (backfill), however long the pods take to start; an object
// written without one counts from its start. -1: neither.
int64_t RunBegan(const json& status) {
  const int64_t scheduled = ParseTimestamp(jsonf::Str(status, "scheduledTime"));
  return scheduled >= 0 ? scheduled : ParseTimestamp(jsonf::Str(status, "startTime"));
}

// Whether every pod of a bound workload's binding has completed (status.finishedPods).
bool AllPodsFinished(const json& status) {
  const json& finished = Field(status, "finishedPods");
  const json& assignments = List(status, "assignments");
  if (!finished.is_object() || assignments.empty()) return false;
  for (const json& a : assignments)
    if (!finished.contains(Str(a, "pod", "0"))) return false;
  return true;
}

// Pods of a pending workload that completed before it was requeued (status.finishedPods): per
// pod set, their indices. Empty when none did.
std::vector<std::set<int>> DonePods(const Workload& w, const json& status) {
  const json& finished = Field(status, "finishedPods");
  if (w.gang || !finished.is_object() || finished.empty()) return {};
  std::vector<std::set<int>> done(w.pod_sets.size());
  bool any = false;
  for (size_t set = 0; set < w.pod_sets.size(); ++set)
    for (int k = 0; k < w.pod_sets[set].count; ++k)
      if (finished.contains(w.pod_sets[set].name + "-" + std::to_string(k))) {
        done[set].insert(k);
        any = true;
      }
  return any ? done : std::vector<std::set<int>>{};
}

// The workload of the pods that did not complete (`done`, per pod set): each set less those,
// its minCount no more than what is left (admitted with fewer, it waits again for the others
// once those complete); a set all of whose pods completed is left out.
Workload Remaining(Workload w, const std::vector<std::set<int>>& done) {
  if (done.empty()) return w;
  std::vector<PodSet> sets;
  for (size_t set = 0; set < w.pod_sets.size(); ++set) {
    PodSet ps = w.pod_sets[set];
    ps.count -= static_cast<int>(done[set].size());
    if (ps.count <= 0) continue;
    if (ps.min_count > 0) ps.min_count = std::min(ps.min_count, ps.count);
    sets.push_back(std::move(ps));
  }
  w.pod_sets = std::move(sets);
  return w;
}

// What a workload's finishedPods keeps through a rewrite of its status (a requeue, a
// decision): the pods that completed stay done — but a gang's, which starts again whole (its
// pods are the ranks of one job, not independent pieces of work).
void KeepFinished(const Workload& w, const json& from, json& to) {
  if (const json& finished = Field(from, "finishedPods");
      !w.gang && finished.is_object() && !finished.empty())
    to["finishedPods"] = finished;
  // (And its history of being stopped and put back in line: status.evictions.)
  if (const json& evictions = Field(from, "evictions"); evictions.is_object())
    to["evictions"] = evictions;
}

// Its pods per pod set that have completed (status.finishedPods) while others run on, with the
// status that lists only those others' assignments. Empty when none completed, or all did.
std::pair<std::vector<int>, json> CompletedPods(const Workload& w, const json& status) {
  const json& finished = Field(status, "finishedPods");
  if (!finished.is_object() || finished.empty()) return {};
  std::map<std::string, size_t> set_of;
  for (size_t i = 0; i < w.pod_sets.size(); ++i) set_of[w.pod_sets[i].name] = i;
  std::vector<int> completed(w.pod_sets.size(), 0);
  json rest = json::array();
  for (const json& a : List(status, "assignments")) {
    const std::string pod = Str(a, "pod", "0");
    auto set = set_of.find(pod.substr(0, pod.rfind('-')));
    if (!finished.contains(pod)) {
      rest.push_back(a);
    } else if (set != set_of.end()) {
      ++completed[set->second];
    } else {
      return {};  // (not a pod of its sets: its assignments do not match it)
    }
  }
  if (rest.empty() || rest.size() == List(status, "assignments").size()) return {};
  json live = status;
  live["assignments"] = std::move(rest);
  return {completed, live};
}

// The part of a bound workload that runs on with only the pods `keep` accepts (a grown one
// whose new pods did not all start in time, one an elastic shrink took pods from): its
// assignments kept, and per pod set how many. Empty when those are not the first pods of each
// set, or fewer than a set may run with.
std::pair<json, std::vector<int>> KeptPart(const Workload& w, const json& status,
                                           const std::function<bool(const std::string&)>& keep) {
  json kept = json::array();
  std::vector<int> counts(w.pod_sets.size(), 0);
  std::set<std::string> names;
  for (const json& a : List(status, "assignments")) {
    if (!keep(Str(a, "pod", "0"))) continue;
    kept.push_back(a);
    names.insert(Str(a, "pod", "0"));
  }
  size_t named = 0;
  for (size_t set = 0; set < w.pod_sets.size(); ++set) {
    const PodSet& ps = w.pod_sets[set];
    while (counts[set] < ps.count && names.count(ps.name + "-" + std::to_string(counts[set])))
      ++counts[set];
    if (counts[set] < ps.least()) return {};
    named += counts[set];
  }
  if (named != names.size()) return {};  // kept pods beyond the first of their set
  return {kept, counts};
}

// The pods elastic shrinks' marks (status.shrinks) take.
std::set<std::string> ShrinkPods(const json& marks) {
  std::set<std::string> out;
  if (!marks.is_array()) return out;
  for (const json& m : marks)
    for (const json& p : List(m, "pods"))
      if (p.is_string()) out.insert(p.get<std::string>());
  return out;
}

std::string KeyName(const json& obj) {
  return Str(Field(obj, "metadata"), "namespace") + "/" + Str(Field(obj, "metadata"), "name");
}

std::vector<json> Objects(const ListResult& list) {
  std::vector<json> objects;
  for (const KeyValue& kv : list.items) objects.push_back(json::parse(kv.value, nullptr, false));
  return objects;
}

// What a workload's status.requeueState (its gang-timeout releases) becomes on its next
// write: kept, but cleared when it is set active again after the limit deactivated it (then
// it has no requeueAt) or deactivated by someone while it backs off, so that it starts
// counting afresh.
json RequeueStateKept(const StoredWorkload& sw) {
  const json& state = Field(Field(sw.obj(), "status"), "requeueState");
  if (!state.is_object()) return json();
  // Without requeueAt the limit deactivated it: kept while inactive, cleared once active.
  // With it, a user who deactivates it starts the count afresh too.
  if (sw.w().active != state.contains("requeueAt")) return json();
  return state;
}

// The admission tree of the stored Queue and ResourceFlavor objects (sched/queue_objects.h).
Result<AdmissionConfig> QueueConfig(const ListResult& queues, const ListResult& flavors) {
  return QueueTreeFromObjects(Objects(queues), Objects(flavors));
}

// All of a node's free capacity, or that of some of its GPUs, as an assignment to hold.
Assignment FreeCapacity(const ClusterState& s, int n, const std::vector<int>& gpus) {
  Assignment a;
  a.node = n;
  for (int d : gpus) {
    if (d < 0 || d >= static_cast<int>(s.devices(n).size())) continue;
    const DeviceState& ds = s.devices(n)[d];
    if (s.node(n).devices[d].mig_enabled()) {
      for (int slice = 0; slice < 32; ++slice) {
        if (ds.mig_free >> slice & 1) a.devices.push_back({d, 0, 0, slice});
      }
    } else if (ds.free_milli > 0 || ds.free_memory_mib > 0) {
      a.devices.push_back({d, ds.free_milli, ds.free_memory_mib, -1});
    }
  }
  return a;
}

// Why a run on the nodes of `status`'s assignments must stop for a NoExecute taint there that
// `tolerations` do not tolerate, or tolerate for seconds since passed; "" where none does. As
// Kubernetes' taint manager: each taint is tolerated by the first toleration that matches it,
// in the workload's order; the fewest seconds among those (none: for good; 0 or less: not at
// all) count from when the pod first met the taint, the later of the taint's timeAdded (which
// the API stamps) and the pod's start (or its placement, not started yet), so work placed on a
// node it tolerates for a while gets that while. Pods that have completed stop for nothing.
std::string NoExecuteEviction(const std::vector<Toleration>& tolerations, const json& status,
                              const Fleet& fleet, const std::map<std::string, int>& node_index,
                              int64_t now) {
  const json& finished = Field(status, "finishedPods");
  const json& started = Field(status, "startedPods");
  const int64_t placed = std::max(RunBegan(status), ParseTimestamp(Str(status, "resizedTime")));
  for (const json& a : List(status, "assignments")) {
    const std::string pod = Str(a, "pod", "0");
    if (finished.is_object() && finished.contains(pod)) continue;
    auto it = node_index.find(Str(a, "node"));
    if (it == node_index.end()) continue;
    const Node& node = fleet.nodes[it->second];
    int64_t seconds = -1;  // -1: for good
    int64_t met = -1;
    std::string what;
    for (const Taint& taint : node.taints) {
      if (taint.effect != TaintEffect::kNoExecute) continue;
      const Toleration* used = nullptr;
      for (const Toleration& t : tolerations)
        if (t.Tolerates(taint)) {
          used = &t;
          break;
        }
      const std::string on = "its node " + node.name.str() + " has taint " + taint.ToString();
      if (!used) return on + ", which it does not tolerate";
      if (used->seconds < 0) continue;
      if (seconds < 0 || used->seconds < seconds) {
        seconds = used->seconds;
        what = on;
        met = ParseTimestamp(taint.time_added);
      }
    }
    if (seconds < 0) continue;
    const int64_t began = started.is_object() && started.contains(pod)
                              ? ParseTimestamp(Str(started, pod.c_str()))
                              : placed;
    met = std::max(met, began);
    if (seconds > 0 && met >= 0 && now < met + seconds * 1000) continue;
    return what + ", which it tolerates for " + std::to_string(seconds) + " s only";
  }
  return "";
}

// Assignments as status.assignments (and status.nomination) store them, checked against the
// fleet: nullopt when one names a node the fleet lacks (or one in `gone`, prefixed "!") or
// devices its node does not have.
std::optional<std::vector<Assignment>> ParseAssignments(
    const json& status, const char* key, const ClusterState& state,
    const std::map<std::string, int>& node_index, const std::set<std::string>& gone,
    std::string* why = nullptr) {
  std::vector<Assignment> out;
  for (const json& a : List(status, key)) {
    const std::string node = Str(a, "node");
    auto it = node_index.find(node);
    if (it == node_index.end() || gone.count("!" + node)) return std::nullopt;
    const Node& n = state.node(it->second);
    Assignment asg;
    asg.node = it->second;
    asg.numa = static_cast<int>(Int(a, "numa", -1));
    for (const json& d : List(a, "devices")) {
      DeviceShare share;
      share.device = static_cast<int>(Int(d, "index", -1));
      share.milli = Int(d, "gpuMilli");
      share.memory_mib = Int(d, "memoryMiB");
      share.mig_slice = static_cast<int>(Int(d, "migSlice", -1));
      if (share.device < 0 || share.device >= static_cast<int>(n.devices.size()) ||
          share.milli < 0 || share.memory_mib < 0 || share.mig_slice < -1) {
        if (why) *why = "GPU " + std::to_string(share.device) + " of node " + node + " is gone";
        return std::nullopt;
      }
      // The slice it holds as the node has it now: a MIG layout changed under it (a trial's
      // 1g.10gb slice went with its GPU's relayout, and was told its node was lost) is not
      // there to account (nor another slice of that index, of another profile).
      const std::vector<std::string>& slices = n.devices[share.device].mig_slices;
      const std::string profile = Str(d, "migProfile");
      if (share.mig_slice >= static_cast<int>(slices.size()) ||
          (share.mig_slice >= 0 && !profile.empty() && slices[share.mig_slice] != profile)) {
        if (why)
          *why = "the MIG layout of GPU " + std::to_string(share.device) + " of node " + node +
                 " changed under it (its " + (profile.empty() ? "MIG" : profile) +
                 " slice is gone)";
        return std::nullopt;
      }
      asg.devices.push_back(share);
    }
    out.push_back(asg);
  }
  return out;
}

// Assignments (one per pod, in pod-set order) as status.assignments and status.nomination
// store them: the pod, its node, its devices (with UUIDs and MIG profiles), and the NUMA node
// and NIC for the agent.
json AssignmentsJson(const Workload& w, const std::vector<Assignment>& placed,
                     const ClusterState& state, const std::vector<int>& counts = {},
                     const std::vector<std::set<int>>& done = {}, bool with_done = false) {
  json assignments = json::array();
  size_t pod = 0;
  for (size_t set = 0; set < w.pod_sets.size(); ++set) {
    const PodSet& ps = w.pod_sets[set];
    const std::set<int> none;
    const std::set<int>& completed = set < done.size() ? done[set] : none;
    // (Pods that completed before are skipped, or listed with no node or devices.)
    const int count =
        set < counts.size() ? counts[set] : ps.count - static_cast<int>(completed.size());
    for (int k = 0, taken = 0; k < ps.count; ++k) {
      if (completed.count(k)) {
        if (with_done)
          assignments.push_back({{"pod", ps.name + "-" + std::to_string(k)},
                                 {"node", ""},
                                 {"devices", json::array()}});
        continue;
      }
      if (taken++ >= count || pod >= placed.size()) continue;
      const Assignment& a = placed[pod++];
      const Node& node = state.node(a.node);
      json devices = json::array();
      for (const DeviceShare& ds : a.devices) {
        json dj = {
            {"index", ds.device}, {"uuid", node.devices[ds.device].uuid}, {"gpuMilli", ds.milli}};
        if (ds.memory_mib) dj["memoryMiB"] = ds.memory_mib;
        if (ds.mig_slice >= 0) {
          dj["migSlice"] = ds.mig_slice;
          dj["migProfile"] = node.devices[ds.device].mig_slices[ds.mig_slice];
        }
        devices.push_back(dj);
      }
      json assignment = {{"pod", ps.name + "-" + std::to_string(k)},
                         {"node", node.name.str()},
                         {"devices", devices}};
      // The NUMA node of the pod's GPUs and the NIC there, for the agent to pin CPUs and
      // pick the network device.
      std::vector<int> gpus;
      for (const DeviceShare& ds : a.devices) gpus.push_back(ds.device);
      // The CPUs are on the GPUs' NUMA node only when it had room for them (a.numa);
      // the NIC follows the GPUs either way.
      const PodLocality where = LocalityOf(node, gpus, node.leaf);
      if (a.numa >= 0) assignment["numa"] = a.numa;
      if (!where.nic.empty()) assignment["nic"] = where.nic;
      assignments.push_back(assignment);
    }
  }
  return assignments;
}

}  // namespace

// (A trial saw main-0 planned on one node start on another, and main-1 on the first.)
json KeepNominatedNodes(const json& assignments, const json& nomination) {
  const auto set_of = [](const std::string& pod) { return pod.substr(0, pod.rfind('-')); };
  std::map<std::string, std::string> planned;  // pod -> node
  for (const json& a : nomination) planned[Str(a, "pod")] = Str(a, "node");
  std::map<std::string, std::vector<size_t>> by_set;  // set -> its placed entries, in order
  for (size_t i = 0; i < assignments.size(); ++i)
    if (!Str(assignments[i], "node").empty())
      by_set[set_of(Str(assignments[i], "pod"))].push_back(i);
  json out = assignments;
  for (const auto& [set, entries] : by_set) {
    std::vector<bool> taken(entries.size(), false);
    std::vector<int> chosen(entries.size(), -1);  // position j -> the entry it gets
    for (size_t j = 0; j < entries.size(); ++j) {
      const auto plan = planned.find(Str(assignments[entries[j]], "pod"));
      for (size_t k = 0; plan != planned.end() && k < entries.size() && chosen[j] < 0; ++k)
        if (!taken[k] && Str(assignments[entries[k]], "node") == plan->second) {
          taken[k] = true;
          chosen[j] = static_cast<int>(k);
        }
    }
    for (size_t j = 0, k = 0; j < entries.size(); ++j) {
      if (chosen[j] < 0) {
        while (taken[k]) ++k;
        taken[k] = true;
        chosen[j] = static_cast<int>(k);
      }
      json moved = assignments[entries[static_cast<size_t>(chosen[j])]];
      moved["pod"] = assignments[entries[j]]["pod"];
      out[entries[j]] = std::move(moved);
    }
  }
  return out;
}

Scheduler::Scheduler(Store& store, const Clock& clock, SchedulerOptions options, Metrics* metrics)
    : store_(store), clock_(clock), options_(std::move(options)), metrics_(metrics) {}

std::shared_ptr<const Scheduler::ParsedWorkload> Scheduler::Parse(const KeyValue& kv) {
  auto& [revision, parsed, seen] = parsed_[kv.key];
  seen = cycle_;
  if (parsed && revision == kv.mod_revision) return parsed;
  revision = kv.mod_revision;
  parsed.reset();
  json obj = json::parse(kv.value, nullptr, false);
  if (!obj.is_object() || !Field(obj, "metadata").is_object()) return nullptr;
  // The manifest reader knows tenants, not namespaces.
  json for_parse = obj;
  for_parse["metadata"]["tenant"] = Str(obj["metadata"], "namespace");
  for_parse["metadata"].erase("namespace");
  auto m = ParseManifestJson(for_parse, kv.key);
  if (!m.ok() || m->workloads.empty()) return nullptr;
  parsed = std::make_shared<const ParsedWorkload>(
      ParsedWorkload{std::move(obj), std::move(m->workloads.front())});
  return parsed;
}

// Puts hold `h` in a Node's status: the condition PodsStarting False (in place of any), and
// status.startHold, from which a restarted scheduler reads it back.
void Scheduler::WriteStartHold(const StartHold& h, json& status) {
  json conditions = json::array();
  for (const json& cond : List(status, "conditions"))
    if (Str(cond, "type") != "PodsStarting") conditions.push_back(cond);
  conditions.push_back({{"type", "PodsStarting"},
                        {"status", "False"},
                        {"reason", "PodsNotStarted"},
                        {"message", h.message},
                        {"lastTransitionTime", FormatTimestamp(h.since_ms)}});
  status["conditions"] = conditions;
  status["startHold"] = {{"since", FormatTimestamp(h.since_ms)},
                         {"workBoundAt", FormatTimestamp(h.bound_ms)},
                         {"until", FormatTimestamp(h.until_ms)},
                         {"message", h.message}};
}

std::string Scheduler::HoldUnstartedNodes(const std::string& workload, const json& status,
                                          int64_t bound_at, int64_t now,
                                          std::set<std::string>& unusable,
                                          const std::map<std::string, int>& node_index) {
  if (options_.unstarted_node_hold_s <= 0) return "";
  // (Only where other nodes started pods meanwhile, or the workload's own pods run on other
  // nodes — a growth's added pod that alone did not start: a trial's growth went back to a
  // wedged node every minute —: a fleet where none starts any has some other trouble, and
  // holding every node would stop it all.)
  bool others_started = false;
  for (const auto& [node, at] : last_start_ms_) others_started |= at >= bound_at;
  std::map<std::string, std::pair<bool, std::string>> by_node;  // started any, pods not started
  for (const json& a : List(status, "assignments")) {
    const std::string node = Str(a, "node"), pod = Str(a, "pod", "0");
    if (node.empty()) continue;
    auto& [any, pods] = by_node[node];
    if (Field(status, "startedPods").contains(pod) || Field(status, "finishedPods").contains(pod)) {
      any = true;
    } else {
      pods += (pods.empty() ? "" : ", ") + pod;
    }
  }
  for (const auto& [node, seen] : by_node) others_started |= seen.first;
  if (!others_started) return "";
  const int64_t until = now + static_cast<int64_t>(options_.unstarted_node_hold_s * 1000);
  const std::string timeout = std::to_string(static_cast<int64_t>(options_.gang_timeout_s)) + " s";
  std::string nodes;
  for (const auto& [node, seen] : by_node) {
    const auto last = last_start_ms_.find(node);
    if (seen.first || (last != last_start_ms_.end() && last->second >= bound_at) ||
        unusable.count("!" + node) || !node_index.count(node))
      continue;
    StartHold& h = start_holds_[node];
    if (h.until_ms <= now) h.since_ms = now;
    h.bound_ms = std::max(h.until_ms <= now ? 0 : h.bound_ms, bound_at);
    h.until_ms = until;
    h.message = "pods of " + workload + " (" + seen.second +
                ") did not start here within the pods-ready timeout of " + timeout +
                " while the node renewed its lease: it takes no new work until a pod starts "
                "here, or until " +
                FormatTimestamp(until);
    // (Saved now, not with the nodes' next cycle: the work it is held for is released in this
    // one, and a restart in between would not find the hold again.)
    if (auto kv = store_.Get("/registry/nodes/" + node); kv.ok()) {
      json n = json::parse(kv->value, nullptr, false);
      if (n.is_object()) {
        if (!n["status"].is_object()) n["status"] = json::object();
        WriteStartHold(h, n["status"]);
        (void)store_.Put(kv->key, n.dump(), kv->mod_revision);  // (else the next cycle writes it)
      }
    }
    nodes += (nodes.empty() ? "" : ", ") + node;
    // (And at once, for this cycle's placements too: a trial's waiting work went to the node
    // in the cycle that held it, and did not start either.)
    unusable.insert(node);
  }
  if (nodes.empty()) return "";
  return "; node(s) " + nodes + " take no new work until a pod starts there, or until " +
         FormatTimestamp(until);
}

Result<CycleStats> Scheduler::RunOnce() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t now = clock_.NowMs();
  CycleStats stats;

  // Tenants.
  ASSIGN_OR_RETURN(ListResult tenant_list, store_.List("/registry/tenants/", "", 0));
  std::vector<Tenant> tenants;
  for (const KeyValue& kv : tenant_list.items) {
    auto m = ParseManifestYaml(kv.value, kv.key);
    if (m.ok() && !m->tenants.empty()) tenants.push_back(m->tenants.front());
  }

  // Nodes: every registered node is in the fleet; readiness and cordons decide where new work
  // may go.
  ASSIGN_OR_RETURN(ListResult node_list, store_.List("/registry/nodes/", "", 0));
  ASSIGN_OR_RETURN(ListResult lease_list, store_.List("/registry/leases/", "", 0));
  std::map<std::string, int64_t> renewed;
  // How long each node's last renewal holds: the grace, or the lease the node declares when
  // longer (counted in its wall seconds).
  std::map<std::string, int64_t> grace;
  for (const KeyValue& kv : lease_list.items) {
    json l = json::parse(kv.value, nullptr, false);
    if (l.is_discarded()) continue;
    const std::string name = Str(Field(l, "metadata"), "name");
    renewed[name] = ParseTimestamp(Str(Field(l, "spec"), "renewTime"));
    grace[name] = std::max(options_.node_grace_ms,
                           LeaseMs(Int(Field(l, "spec"), "leaseDurationSeconds"), clock_));
  }
  // Health records (control/health_controller.h): a node out of service and GPUs cordoned one
  // by one take no new work.
  ASSIGN_OR_RETURN(ListResult health_list, store_.List("/registry/nodehealth/", "", 0));
  std::set<std::string> health_held;
  std::set<std::string> has_record;
  std::map<std::string, std::vector<int>> cordoned_gpus;
  for (const KeyValue& kv : health_list.items) {
    json h = json::parse(kv.value, nullptr, false);
    const std::string name = Str(Field(h, "metadata"), "name");
    has_record.insert(name);
    if (Field(h, "schedulable") == false) health_held.insert(name);
    for (const json& g : List(h, "gpus")) {
      if (Field(g, "schedulable") == false) {
        cordoned_gpus[name].push_back(static_cast<int>(Int(g, "index", -1)));
      }
    }
  }
  Fleet fleet;
  std::set<std::string> unusable;
  std::set<std::string> held_only;  // of those, held for pods that did not start, and usable else
  for (const KeyValue& kv : node_list.items) {
    json n = json::parse(kv.value, nullptr, false);
    json spec = Field(n, "spec");
    if (!spec.is_object()) continue;
    const std::string name = Str(Field(n, "metadata"), "name");
    const bool cordoned = Field(spec, "unschedulable") == true;
    spec.erase("unschedulable");
    spec["name"] = name;
    // What a node selector matches: the labels its agent registered (spec.labels), and those an
    // admin set on the object (metadata.labels, as `kubectl label node`), which win.
    if (const json& set = Field(Field(n, "metadata"), "labels"); set.is_object() && !set.empty()) {
      if (!spec.contains("labels") || !spec["labels"].is_object()) spec["labels"] = json::object();
      for (const auto& [k, v] : set.items())
        if (v.is_string()) spec["labels"][k] = v;
    }
    auto parsed = ParseFleetYaml(json{{"nodes", json::array({spec})}}.dump(), kv.key);
    if (!parsed.ok()) continue;
    fleet.nodes.push_back(parsed->nodes.front());
    auto it = renewed.find(name);
    const bool ready = it != renewed.end() && it->second >= 0 && now - it->second <= grace.at(name);
    const bool unproven = options_.require_health_record && !has_record.count(name);
    // (Held for pods that did not start here: until its time is up, or a pod starts here, or
    // its lease lapses, when the lost-node path takes over.)
    std::string start_hold;
    const json& saved = Field(Field(n, "status"), "startHold");
    if (!holds_restored_ && options_.unstarted_node_hold_s > 0 && saved.is_object() &&
        !start_holds_.count(name)) {
      // (A hold outlives a restart of the scheduler: read back once, from the Node's status;
      // its node's lease, which may have lapsed while no one read it, gets a grace period to be
      // renewed before it ends the hold.)
      StartHold h{ParseTimestamp(Str(saved, "since")), ParseTimestamp(Str(saved, "workBoundAt")),
                  ParseTimestamp(Str(saved, "until")), Str(saved, "message"), now + grace.at(name)};
      if (h.since_ms >= 0 && h.bound_ms >= 0 && h.until_ms > now && !h.message.empty())
        start_holds_[name] = h;
    }
    if (auto h = start_holds_.find(name); h != start_holds_.end()) {
      // (An uncordon dated later than now is no one's word yet: not counted.)
      const int64_t uncordoned =
          ParseTimestamp(Str(Field(Field(n, "metadata"), "annotations"), kUncordonedAtAnnotation));
      if (now >= h->second.until_ms || (!ready && now >= h->second.unready_from_ms) ||
          (uncordoned >= h->second.since_ms && uncordoned <= now)) {
        start_holds_.erase(h);
      } else {
        start_hold = h->second.message;
      }
    }
    if (cordoned || !ready || unproven || health_held.count(name) || !start_hold.empty())
      unusable.insert(name);
    if (!cordoned && ready && !unproven && !health_held.count(name) && !start_hold.empty())
      held_only.insert(name);
    if (!ready) unusable.insert("!" + name);  // marks NotReady, for requeue
    // The Node's Ready condition follows its lease; written only when it changes, so that a
    // healthy fleet costs no writes.
    const std::string want = ready ? "True" : "False";
    std::string have, have_hold;
    json ready_condition;
    for (const json& cond : List(Field(n, "status"), "conditions")) {
      if (Str(cond, "type") == "Ready") {
        have = Str(cond, "status");
        ready_condition = cond;
      }
      if (Str(cond, "type") == "PodsStarting") have_hold = Str(cond, "message");
    }
    if (have != want || have_hold != start_hold) {
      if (have != want)
        ready_condition = {
            {"type", "Ready"},
            {"status", want},
            {"reason", ready ? "LeaseRenewed" : (it == renewed.end() ? "NoLease" : "LeaseExpired")},
            {"message",
             ready ? "the node agent renews its lease"
                   : "the node agent has not renewed its lease within " +
                         std::to_string((grace.count(name) ? grace[name] : options_.node_grace_ms) /
                                        1000) +
                         " s"},
            {"lastTransitionTime", FormatTimestamp(now)}};
      // (Other conditions, and the rest of its status, are others' to write: kept.)
      json conditions = json::array({ready_condition});
      for (const json& cond : List(Field(n, "status"), "conditions"))
        if (Str(cond, "type") != "Ready" && Str(cond, "type") != "PodsStarting")
          conditions.push_back(cond);
      json next = n;
      if (!next["status"].is_object()) next["status"] = json::object();
      next["status"]["conditions"] = conditions;
      next["status"].erase("startHold");
      if (!start_hold.empty()) WriteStartHold(start_holds_[name], next["status"]);
      (void)store_.Put(kv.key, next.dump(), kv.mod_revision);  // a conflict retries next cycle
    }
  }
  holds_restored_ = true;
  ClusterState state(fleet, tenants);
  std::map<std::string, int> node_index;
  for (int i = 0; i < state.node_count(); ++i) node_index[state.node(i).name.str()] = i;

  ASSIGN_OR_RETURN(ListResult queue_list, store_.List("/registry/queues/", "", 0));
  const bool with_queues = !queue_list.items.empty();
  ListResult flavor_list;  // (read only where queues admit)
  if (with_queues) {
    ASSIGN_OR_RETURN(flavor_list, store_.List("/registry/resourceflavors/", "", 0));
  }

  // Workloads, parsed again only when their revision changed.
  ASSIGN_OR_RETURN(ListResult workload_list, store_.List("/registry/workloads/", "", 0));
  ++cycle_;
  std::vector<StoredWorkload> pending;
  std::vector<BoundWorkload> bound;
  std::map<std::string, double> allocated_by_tenant;
  std::map<std::string, double> pending_by_queue;
  std::map<std::string, int> victims_of;  // preemptor "ns/name" -> victims still stopping
  // ... and those of them restored whole, by their ids in the Admitter (RestoreNomination).
  std::map<std::string, std::vector<int>> victim_ids_of;
  std::map<std::string, int> shrunk_of;  // of victims_of: pods an elastic shrink takes
  // When each node last started a pod, before any release below asks it (a start seen after
  // one would hold its node for nothing); a node held for pods that did not start there that
  // has started one since the work it was held for was bound is no longer held.
  if (!start_holds_.empty() || options_.unstarted_node_hold_s > 0) {
    for (const KeyValue& kv : workload_list.items) {
      const std::shared_ptr<const ParsedWorkload> parsed = Parse(kv);
      if (!parsed) continue;
      const json& status = Field(parsed->obj, "status");
      const json& started = Field(status, "startedPods");
      if (!started.is_object() || !Bound(Str(status, "phase"))) continue;
      for (const json& a : List(status, "assignments")) {
        const int64_t at = ParseTimestamp(Str(started, Str(a, "pod", "0").c_str()));
        if (at < 0) continue;
        const std::string node = Str(a, "node");
        int64_t& last = last_start_ms_[node];
        last = std::max(last, at);
        if (auto h = start_holds_.find(node); h != start_holds_.end() && at >= h->second.bound_ms)
          start_holds_.erase(h);
      }
    }
    // (Lifted, it takes work in this cycle: a review found it kept for the cycle. Its Node's
    // condition goes with the next one.)
    for (const std::string& node : held_only)
      if (!start_holds_.count(node)) unusable.erase(node);
  }
  // (Work a consolidation moved that stops now is read again, pending, in this cycle: its
  // preemptor held its place until now, and starts now; a cycle later newer work took it.)
  std::vector<KeyValue> items = std::move(workload_list.items);
  for (size_t item = 0; item < items.size(); ++item) {
    const KeyValue kv = items[item];
    // One workload's bad record costs that workload this cycle, never the scheduler thread.
    try {
      StoredWorkload sw;
      sw.kv = kv;
      sw.parsed = Parse(kv);
      if (!sw.parsed) continue;
      // A running workload's status as rewritten below (a mark lifted, pods given up) and the
      // revision it has since: the cycle's later writes to it start from these (a review found
      // them made from the object read, and refused, a cycle late). Null: not rewritten.
      json rewritten;
      int64_t rewritten_rev = 0;
      const json& status = Field(sw.obj(), "status");
      const std::string phase = Str(status, "phase", "Pending");
      for (const PodSet& ps : sw.w().pod_sets) {
        // (One that runs stays where it runs though its nodes were relabelled or tainted since,
        // as Restore keeps it, on no node it may add to.)
        auto r = Bound(phase) ? state.MakeBoundRequest(ps, sw.w().tenant)
                              : state.MakeRequest(ps, sw.w().tenant);
        if (!r.ok()) {
          sw.request_error = r.status();
          break;
        }
        for (int i = 0; i < ps.count; ++i) sw.pods.push_back(*r);
      }
      // Bound with fewer pods (partial admission): as many pods as it runs. Counts that do not
      // fit its pod sets leave it asking for all, so its assignments do not match below.
      if (const json& admitted = Field(status, "admittedCounts");
          Bound(phase) && admitted.is_array() && sw.request_error.ok() &&
          admitted.size() == sw.w().pod_sets.size()) {
        std::vector<int> counts;
        for (size_t i = 0; i < admitted.size(); ++i) {
          const PodSet& ps = sw.w().pod_sets[i];
          if (!admitted[i].is_number_integer() || admitted[i] < ps.least() ||
              admitted[i] > ps.count)
            break;
          counts.push_back(admitted[i].get<int>());
        }
        if (counts.size() == admitted.size()) {
          std::vector<PodRequest> pods;
          size_t first = 0;
          for (size_t i = 0; i < counts.size(); ++i) {
            for (int k = 0; k < counts[i]; ++k) pods.push_back(sw.pods[first]);
            first += sw.w().pod_sets[i].count;
          }
          sw.pods = std::move(pods);
          sw.counts = std::move(counts);
        }
      }
      if (Bound(phase)) {
        // Every pod of it bound has completed, but it is no gang and some of its pods were
        // never bound nor completed (admitted with fewer, or a shrink took them before they
        // did): it waits again for those, as a Job's completions all run (a gang's pods are the
        // ranks of one run, which has ended). Not one past its maximum runtime: that fails as
        // marked, below.
        int left = 0;
        if (AllPodsFinished(status) && !sw.w().gang) {
          std::set<std::string> accounted;
          for (const json& a : List(status, "assignments")) accounted.insert(Str(a, "pod", "0"));
          if (const json& f = Field(status, "finishedPods"); f.is_object())
            for (const auto& [pod, at] : f.items()) accounted.insert(pod);
          for (const PodSet& ps : sw.w().pod_sets)
            for (int k = 0; k < ps.count; ++k)
              left += accounted.count(ps.name + "-" + std::to_string(k)) ? 0 : 1;
        }
        // (The limit counts from this run's admission: RunBegan.)
        const int64_t begun = RunBegan(status);
        const bool out_of_time = Field(Field(status, "preemption"), "final") == true ||
                                 (sw.w().max_runtime_seconds > 0 && begun >= 0 &&
                                  now - begun >= sw.w().max_runtime_seconds * 1000);
        // Every pod of it has completed (the pods a shrink left it had all finished, or its
        // last node's report was lost after it listed them): it has succeeded, whatever marks
        // it carried (a preemption, a shrink).
        if (AllPodsFinished(status) && left == 0) {
          json next = sw.obj();
          for (const char* mark : {"shrinks", "shrink", "preemption"}) next["status"].erase(mark);
          json conditions = json::array();
          for (const json& c : List(status, "conditions"))
            if (Str(c, "type") != "Preempted") conditions.push_back(c);
          next["status"]["conditions"] = conditions;
          next["status"]["phase"] = "Succeeded";
          next["status"]["completionTime"] = FormatTimestamp(now);
          next["status"]["exitCode"] = 0;
          next["status"]["message"] =
              "all " + std::to_string(List(status, "assignments").size()) + " pods completed";
          if (store_.Put(kv.key, next.dump(), kv.mod_revision).ok()) continue;
        }
        // Back to Pending with `reason`; true once written (a concurrent write, such as the
        // agent's report, wins and the workload stays bound this cycle).
        // A gang that never started keeps its gang-timeout count through other requeues (a
        // node that loses its lease, a preemption); one whose pods all started has shown it
        // can start.
        const json kept_state = !AllPodsStarted(status) ? RequeueStateKept(sw) : json();
        auto requeue = [&](const std::string& reason, const std::string& why) {
          json next = sw.obj();
          next["status"] = {{"phase", "Pending"},
                            {"reason", reason},
                            {"message", "requeued: " + why},
                            {"conditions",
                             {{{"type", "Scheduled"},
                               {"status", "False"},
                               {"reason", reason},
                               {"message", why},
                               {"lastTransitionTime", FormatTimestamp(now)}}}}};
          if (!kept_state.is_null()) next["status"]["requeueState"] = kept_state;
          KeepFinished(sw.w(), status, next["status"]);
          // (Pods left after others completed is no eviction: nothing of it was stopped; nor
          // is a stop its owner asked for, deactivating it.)
          if (reason != "PodsLeft" && reason != "Deactivated")
            NoteEviction(status, next["status"], reason, why, now,
                         RunGpuSecondsLost(Field(sw.obj(), "spec"), status, now));
          auto rev = store_.Put(kv.key, next.dump(), kv.mod_revision);
          if (!rev.ok()) return false;
          ++stats.requeued;
          if (Str(Field(status, "preemption"), "basis") == "Move")
            items.push_back({kv.key, next.dump(), kv.create_revision, *rev});
          return true;
        };
        if (left > 0 && !out_of_time &&
            requeue("PodsLeft",
                    PodsLeftMessage(List(status, "assignments").size(), left, sw.w().pod_count())))
          continue;
        // A preempted workload keeps its devices until its grace period ends; then it waits
        // in its queue again — or, marked `final` (past its maximum runtime), it has failed.
        json preemption = Field(status, "preemption");
        // Past its maximum runtime, counted from this run's admission.
        const int64_t limit_ms = sw.w().max_runtime_seconds * 1000;
        const bool expired = limit_ms > 0 && begun >= 0 && now - begun >= limit_ms;
        // Stopping because it was deactivated (no preemptor, not past its limit).
        const bool deactivating = preemption.is_object() && Str(preemption, "by").empty() &&
                                  Field(preemption, "final") != true &&
                                  Str(preemption, "reason") == kDeactivatedWhy;
        // Its mark to stop lifted, `why`: it runs on.
        // (Other writes of this pass read `kv`'s revision, as for the writes below: one made
        // from the object read, with its old mark, fails and is made again next cycle. The
        // cycle's later writes start from what this wrote: `rewritten`.)
        const auto cancel_mark = [&](const std::string& why) {
          json next = sw.obj();
          next["status"].erase("preemption");
          next["status"]["message"] =
              std::string(kEvictionCancelled) + why + "; " + RunningMessage(next["status"]);
          if (auto rev = store_.Put(kv.key, next.dump(), kv.mod_revision); rev.ok()) {
            preemption = json();
            rewritten = std::move(next);
            rewritten_rev = *rev;
          }
        };
        // Why a NoExecute taint on its nodes evicts it ("" where none does).
        const std::string tainted =
            sw.w().pod_sets.empty() ? std::string()
                                    : NoExecuteEviction(sw.w().pod_sets.front().nodes.tolerations,
                                                        status, fleet, node_index, now);
        // Active again before its grace period ended: it runs on (kubectl's cancelled drain).
        if (deactivating && sw.w().active && !expired)
          cancel_mark("active again (spec.active is true)");
        // Marked for a NoExecute taint that is gone since, or that it now tolerates (a
        // toleration added): it runs on, as Kubernetes' taint manager cancels an eviction.
        if (preemption.is_object() && Str(preemption, "evictor") == "taint" && !expired &&
            tainted.empty())
          cancel_mark("the NoExecute taint is gone or tolerated");
        if (preemption.is_object()) {
          int64_t deadline = ParseTimestamp(Str(preemption, "deadline"));
          // The health controller's evictions it stops itself at their deadline; a minute past
          // it, one it lost (a restart) is stopped here.
          const bool by_health = Str(preemption, "evictor") == "health";
          if (by_health && deadline >= 0) deadline += 60'000;
          if (deadline < 0 || now >= deadline) {
            // (A run that passed its limit while marked for another reason fails too: being
            // deactivated, or preempted, must not restart its clock.)
            if (Field(preemption, "final") == true || expired) {
              json next = sw.obj();
              next["status"].erase("preemption");
              next["status"]["phase"] = "Failed";
              next["status"]["reason"] = "MaxRuntimeExceeded";
              next["status"]["message"] = Field(preemption, "final") == true
                                              ? Str(preemption, "reason")
                                              : "ran past its maximum runtime of " +
                                                    std::to_string(sw.w().max_runtime_seconds) +
                                                    " s while " + Str(preemption, "reason");
              next["status"]["completionTime"] = FormatTimestamp(now);
              if (store_.Put(kv.key, next.dump(), kv.mod_revision).ok()) {
                ++stats.timed_out;
                continue;
              }
            } else if (requeue(by_health || Str(preemption, "evictor") == "api" ||
                                       Str(preemption, "evictor") == "taint"
                                   ? "Evicted"
                               : deactivating ? "Deactivated"
                                              : "Preempted",
                               (by_health ? "evicted: " : "") + Str(preemption, "reason"))) {
              continue;
            }
          }
        }
        // Past its maximum runtime, counted from the start of this run, or deactivated
        // (spec.active false): marked to stop when the grace period ends — for good, or to
        // wait again — keeping its devices until then, like a victim.
        // Marked to stop, `why`, when the grace period ends (`extra` in its mark).
        const auto mark_to_stop = [&](const std::string& why, const json& extra) {
          json next = sw.obj();
          const std::string deadline = FormatTimestamp(now + options_.preemption_grace_ms);
          next["status"]["preemption"] = {{"by", ""}, {"reason", why}, {"deadline", deadline}};
          next["status"]["preemption"].update(extra);
          next["status"]["message"] = why + "; stops at " + deadline;
          return store_.Put(kv.key, next.dump(), kv.mod_revision).ok();
        };
        bool expiring = false;
        if (!preemption.is_object() && (expired || !sw.w().active))
          expiring = mark_to_stop(expired ? "ran past its maximum runtime of " +
                                                std::to_string(sw.w().max_runtime_seconds) + " s"
                                          : std::string(kDeactivatedWhy),
                                  expired ? json{{"final", true}} : json::object());
        // On a node with a NoExecute taint it does not tolerate (or tolerates for seconds that
        // have passed since it met the taint): evicted, as Kubernetes' taint manager evicts,
        // after the grace period; it waits again for nodes it may use.
        if (!preemption.is_object() && !expiring && !tainted.empty())
          expiring = mark_to_stop(tainted, {{"evictor", "taint"}});
        // A gang whose pods have not all started within the gang timeout gives its devices back and
        // waits again (counted from when it was bound, or from its last growth). One that grew goes
        // back to the pods that started instead, and grows again only after the backoff.
        const int64_t scheduled = ParseTimestamp(Str(status, "scheduledTime"));
        const int64_t resized = ParseTimestamp(Str(status, "resizedTime"));
        const bool grew = scheduled >= 0 && resized >= scheduled;
        // Its status once rewritten this cycle (a growth undone, a shrink done): it runs on as
        // that says, with only the pods `kept` (`counts` per pod set); `edit` finishes the
        // status. Its revision in this cycle stays the one read: a later write for it this
        // cycle (made from the object read) fails and is made again next cycle.
        json undone;
        const auto run_on_with = [&](const json& kept, const std::vector<int>& counts,
                                     const std::function<void(json&)>& edit) {
          json next = sw.obj();
          json& st = next["status"];
          st["assignments"] = kept;
          bool whole = true;
          for (size_t i = 0; i < counts.size(); ++i)
            whole = whole && counts[i] == sw.w().pod_sets[i].count;
          if (whole) {
            st.erase("admittedCounts");
          } else {
            st["admittedCounts"] = counts;
          }
          st["resizedTime"] = FormatTimestamp(now);
          // (What its nodes reported of the pods it keeps; the pods it gives up that completed
          // stay completed.)
          for (const char* key : {"startedPods"}) {
            if (!st.contains(key) || !st[key].is_object()) continue;
            json pods = json::object();
            for (const json& a : kept)
              if (st[key].contains(Str(a, "pod", "0")))
                pods[Str(a, "pod", "0")] = st[key][Str(a, "pod", "0")];
            st[key] = pods;
          }
          edit(st);
          auto rev = store_.Put(kv.key, next.dump(), kv.mod_revision);
          if (!rev.ok()) return false;
          undone = st;
          rewritten = next;
          rewritten_rev = *rev;
          // As many pod requests as pods kept (the pods of a set ask for the same).
          std::vector<PodRequest> pods;
          for (size_t i = 0, first = 0; i < counts.size(); ++i) {
            for (int k = 0; k < counts[i]; ++k) pods.push_back(sw.pods[first]);
            first += sw.counts.empty() ? sw.w().pod_sets[i].count : sw.counts[i];
          }
          sw.pods = std::move(pods);
          sw.counts = whole ? std::vector<int>{} : counts;
          return true;
        };
        // Elastic shrinks' pods whose grace period has ended stop: it runs on without them.
        // Until then each mark's pods are a victim of their own (a fragment, restored below).
        // (A mark a build before status.shrinks wrote, status.shrink, reads as a list of one.)
        const json marks = Field(status, "shrink").is_object() && !status.contains("shrinks")
                               ? json::array({status["shrink"]})
                               : json(List(status, "shrinks"));
        const bool shrinking = !marks.empty();
        std::vector<int> kept_counts;  // while a shrink's pods stop: the pods per set it keeps
        json marks_left;               // those marks (their pods still stop)
        if (shrinking) {
          const std::set<std::string> leaving = ShrinkPods(marks);
          const std::vector<int> counts = KeptPart(sw.w(), status, [&](const std::string& pod) {
                                            return !leaving.count(pod);
                                          }).second;
          // A mark is done at its deadline, or when every pod it takes was on a node that is
          // gone (nothing is left to stop), so long as the pods that run on are all on live
          // nodes.
          std::set<std::string> on_lost_nodes;
          std::string devices_gone;  // (its node there, its devices not: said so)
          for (const json& a : List(status, "assignments"))
            if (leaving.count(Str(a, "pod", "0")) &&
                !ParseAssignments(json{{"assignments", json::array({a})}}, "assignments", state,
                                  node_index, unusable, &devices_gone))
              on_lost_nodes.insert(Str(a, "pod", "0"));
          json done = json::array(), left = json::array();
          bool lost = false;  // a mark done because its node was lost
          for (const json& m : marks) {
            const int64_t deadline = ParseTimestamp(Str(m, "deadline"));
            const std::set<std::string> pods = ShrinkPods(json::array({m}));
            const bool gone = !pods.empty() && std::all_of(pods.begin(), pods.end(), [&](auto& p) {
              return on_lost_nodes.count(p) > 0;
            });
            lost |= gone && deadline >= 0 && now < deadline;
            (gone || deadline < 0 || now >= deadline ? done : left).push_back(m);
          }
          const std::set<std::string> stop = ShrinkPods(done);
          auto part =
              KeptPart(sw.w(), status, [&](const std::string& pod) { return !stop.count(pod); });
          const json runs = std::move(part.first);
          const std::vector<int> running = std::move(part.second);
          // (Done for a lost node only where what runs on is on live nodes: else it is
          // requeued whole below, as for any lost node.)
          const bool usable = !lost || ParseAssignments(json{{"assignments", runs}}, "assignments",
                                                        state, node_index, unusable)
                                           .has_value();
          const auto drop_legacy = [](json& st) { st.erase("shrink"); };
          if (counts.empty()) {
            // (Not the last pods of their sets: the marks are dropped and it keeps them.)
            json next = sw.obj();
            next["status"].erase("shrinks");
            drop_legacy(next["status"]);
            (void)store_.Put(kv.key, next.dump(), kv.mod_revision);
          } else if (done.empty() || running.empty() || !usable) {
            // (Until the marks after it are done, a mark's pods are not the last: it waits.)
            kept_counts = counts;
            marks_left = marks;
          } else if (!run_on_with(runs, running, [&](json& st) {
                       int n = 0;
                       for (int c : running) n += c;
                       drop_legacy(st);
                       if (left.empty()) {
                         st.erase("shrinks");
                       } else {
                         st["shrinks"] = left;
                       }
                       // (Every mark done now: two reclaims in one cycle are two reasons.)
                       std::vector<std::string> reasons;
                       for (const json& m : done)
                         if (std::find(reasons.begin(), reasons.end(), Str(m, "reason")) ==
                             reasons.end())
                           reasons.push_back(Str(m, "reason"));
                       std::string why;
                       for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
                       st["message"] = "shrunk to " + std::to_string(n) + " of " +
                                       std::to_string(sw.w().pod_count()) + " pods (" + why + ")";
                       if (lost)
                         st["message"] =
                             st["message"].get<std::string>() + "; the pods it gave up " +
                             (devices_gone.empty()
                                  ? "were on a node that stopped renewing its lease"
                                  : "held devices that are gone (" + devices_gone + ")");
                     })) {
            kept_counts = counts;  // (a concurrent write: done next cycle)
            marks_left = marks;
          } else if (!left.empty()) {
            kept_counts = counts;
            marks_left = left;
          }
        }
        if (undone.is_null() && Bound(phase) && scheduled >= 0 && !AllPodsStarted(status) &&
            now - (grew ? resized : scheduled) >=
                static_cast<int64_t>(options_.gang_timeout_s * 1000)) {
          // (Only when the kept pods' nodes are all usable: else it is released whole, as
          // for a lost node, rather than accounted in part.)
          const json& started = Field(status, "startedPods");
          const json& finished = Field(status, "finishedPods");
          auto [kept, counts] = KeptPart(sw.w(), status, [&](const std::string& pod) {
            return started.contains(pod) || (finished.is_object() && finished.contains(pod));
          });
          auto kept_assign = ParseAssignments(json{{"assignments", kept}}, "assignments", state,
                                              node_index, unusable);
          if (grew && phase == "Running" && !counts.empty() && kept_assign && !shrinking) {
            std::string missing;
            for (const json& a : List(status, "assignments"))
              if (!started.contains(Str(a, "pod", "0")))
                missing += (missing.empty() ? "" : ", ") + Str(a, "pod", "0");
            const std::string retry =
                FormatTimestamp(now + static_cast<int64_t>(options_.gang_requeue_backoff_s * 1000));
            // The nodes where its added pods did not start take no new work for a while, as
            // for a released gang's (a trial's growth went back to a wedged node every minute).
            const std::string held_note =
                HoldUnstartedNodes(sw.w().tenant.str() + "/" + sw.w().name.str(), status, resized,
                                   now, unusable, node_index);
            if (run_on_with(kept, counts, [&](json& st) {
                  st["growthRetryTime"] = retry;
                  st["message"] = "growth undone: pod(s) " + missing +
                                  " did not start within the gang timeout of " +
                                  std::to_string(static_cast<int64_t>(options_.gang_timeout_s)) +
                                  " s; it may grow again at " + retry + held_note;
                }))
              ++stats.growths_undone;
          }
        }
        // (Not one marked to stop: a victim, or past its maximum runtime, stops as marked.)
        if (undone.is_null() && Bound(phase) && !preemption.is_object() && !expiring &&
            !shrinking && scheduled >= 0 && !AllPodsStarted(status) &&
            now - (grew ? resized : scheduled) >=
                static_cast<int64_t>(options_.gang_timeout_s * 1000)) {
          // It backs off before the next try, longer each time; past the limit it is
          // deactivated.
          const json& state = Field(status, "requeueState");
          const int64_t count =
              (Field(state, "count").is_number_integer() ? Field(state, "count").get<int64_t>()
                                                         : 0) +
              1;
          std::string missing;  // the pods its nodes did not report started (the first few)
          int not_started = 0;
          for (const json& a : List(status, "assignments"))
            if (!Field(status, "startedPods").contains(Str(a, "pod", "0")) &&
                !Field(status, "finishedPods").contains(Str(a, "pod", "0")) && ++not_started <= 3)
              missing +=
                  (missing.empty() ? "" : ", ") + Str(a, "pod", "0") + " on " + Str(a, "node");
          if (not_started > 3) missing += " and " + std::to_string(not_started - 3) + " more";
          // (Any workload, as Kueue's waitForPodsReady: one pod on a node whose agent never
          // starts it would otherwise hold its GPUs and quota for ever, a trial found.)
          const bool gang = sw.w().gang;
          const std::string timeout =
              std::to_string(static_cast<int64_t>(options_.gang_timeout_s)) + " s";
          const std::string why =
              (gang ? "not all pods were ready within the gang timeout of " + timeout
                    : std::string(sw.pods.size() > 1 ? "not all its pods started"
                                                     : "its pod did not start") +
                          " within the pods-ready timeout of " + timeout + " (--gang-timeout)") +
              (missing.empty() ? "" : " (not started: " + missing + ")");
          const std::string reason = gang ? "GangTimeout" : "PodsReadyTimeout";
          // The nodes that started none of its pods while their agents renewed their leases
          // take no new work for a while: placed again, it would go back to the same node, as
          // a trial's gang did three times while 16 GPUs idled.
          const std::string held_note =
              HoldUnstartedNodes(sw.w().tenant.str() + "/" + sw.w().name.str(), status,
                                 grew ? resized : scheduled, now, unusable, node_index);
          json next = sw.obj();
          const bool limit = options_.gang_requeue_limit > 0 && count > options_.gang_requeue_limit;
          const double backoff = std::min(
              options_.gang_requeue_backoff_max_s,
              options_.gang_requeue_backoff_s * std::pow(2.0, std::min<int64_t>(count - 1, 40)));
          const int64_t at = now + static_cast<int64_t>(backoff * 1000);
          next["status"] = {
              {"phase", "Pending"},
              {"reason", limit ? "RequeuingLimitExceeded" : reason},
              {"message",
               limit ? "deactivated: " +
                           std::string(gang ? "its gang timed out "
                                            : "its pods did not start in time ") +
                           std::to_string(count) +
                           " times, past the limit; set spec.active to true to try again"
                     : "requeued: " + why + held_note + "; tries again at " + FormatTimestamp(at)},
              {"requeueState", {{"count", count}, {"requeueAt", FormatTimestamp(at)}}},
              {"conditions",
               {{{"type", "Scheduled"},
                 {"status", "False"},
                 {"reason", reason},
                 {"message", why},
                 {"lastTransitionTime", FormatTimestamp(now)}}}}};
          KeepFinished(sw.w(), status, next["status"]);
          NoteEviction(status, next["status"], reason, why, now,
                       RunGpuSecondsLost(Field(sw.obj(), "spec"), status, now));
          if (limit) {
            next["spec"]["active"] = false;
            next["status"]["requeueState"].erase("requeueAt");
            const json& generation = Field(Field(next, "metadata"), "generation");
            if (generation.is_number_integer())
              next["metadata"]["generation"] = generation.get<int64_t>() + 1;
          }
          if (store_.Put(kv.key, next.dump(), kv.mod_revision).ok()) {
            ++stats.requeued;
            continue;
          }
        }
        // Pods that completed while others run on give their devices and quota back
        // (Kueue's reclaimablePods): it is accounted with the others alone, and a node lost
        // after its pods completed does not requeue it. (Not while pods elastic shrinks took
        // stop: their marks take pods by position.)
        const json& current = undone.is_null() ? status : undone;
        auto [completed, live] = kept_counts.empty() ? CompletedPods(sw.w(), current)
                                                     : std::pair<std::vector<int>, json>{};
        if (!completed.empty()) {
          std::vector<PodRequest> running;
          const json& list = List(current, "assignments");
          const json& finished = Field(current, "finishedPods");
          for (size_t i = 0; i < list.size() && i < sw.pods.size(); ++i)
            if (!finished.contains(Str(list[i], "pod", "0"))) running.push_back(sw.pods[i]);
          if (list.size() == sw.pods.size()) {
            sw.pods = std::move(running);
          } else {
            completed.clear();  // (its assignments do not match its pods: requeued below)
          }
        }
        // Account for it, unless its node is gone (or it names devices the node does not
        // have): then it goes back to the queue.
        std::string changed;  // (its node is there, its devices are not)
        auto assignments = ParseAssignments(completed.empty() ? current : live, "assignments",
                                            state, node_index, unusable, &changed);
        if (!assignments || assignments->size() != sw.pods.size()) {
          json patch = sw.obj();
          // A run already marked to fail (past its maximum runtime) fails now.
          if (Field(preemption, "final") == true) {
            patch["status"].erase("preemption");
            patch["status"]["phase"] = "Failed";
            patch["status"]["reason"] = "MaxRuntimeExceeded";
            patch["status"]["message"] =
                Str(preemption, "reason") + "; " +
                (changed.empty() ? "its node stopped renewing its lease" : changed);
            patch["status"]["completionTime"] = FormatTimestamp(now);
            if (store_.Put(kv.key, patch.dump(), kv.mod_revision).ok()) ++stats.timed_out;
            continue;
          }
          const std::string lost =
              changed.empty() ? "its node stopped renewing its lease" : changed;
          const char* reason = changed.empty() ? "NodeLost" : "DevicesChanged";
          patch["status"] = {
              {"phase", "Pending"}, {"message", "requeued: " + lost}, {"reason", reason}};
          if (!kept_state.is_null()) patch["status"]["requeueState"] = kept_state;
          KeepFinished(sw.w(), current, patch["status"]);
          NoteEviction(current, patch["status"], reason, lost, now,
                       RunGpuSecondsLost(Field(sw.obj(), "spec"), current, now));
          if (store_.Put(kv.key, patch.dump(), kv.mod_revision).ok()) ++stats.requeued;
          continue;
        }
        for (size_t i = 0; i < assignments->size(); ++i) state.Apply((*assignments)[i], sw.pods[i]);
        for (const PodRequest& r : sw.pods)
          allocated_by_tenant[sw.w().tenant.str()] += r.total_gpu_milli() / 1000.0;
        ++stats.running;
        if (preemption.is_object()) ++victims_of[Str(preemption, "by")];
        bound.push_back({std::move(sw), std::move(*assignments), preemption.is_object() || expiring,
                         expiring || (preemption.is_object() && Str(preemption, "by").empty()),
                         std::move(kept_counts), std::move(marks_left), std::move(completed)});
        if (!rewritten.is_null()) {
          bound.back().written = std::move(rewritten);
          bound.back().sw.kv.mod_revision = rewritten_rev;
        }
        continue;
      }
      if (phase == "Pending") {
        // Pods that completed before it was requeued are not run again: it asks for the
        // others (a Job's succeeded pods stay succeeded), and once none is left it has
        // succeeded.
        if (sw.request_error.ok()) sw.done = DonePods(sw.w(), status);
        if (!sw.done.empty()) {
          std::vector<PodRequest> rest;
          for (size_t set = 0, first = 0; set < sw.w().pod_sets.size(); ++set) {
            for (int k = 0; k < sw.w().pod_sets[set].count; ++k)
              if (!sw.done[set].count(k)) rest.push_back(sw.pods[first + k]);
            first += sw.w().pod_sets[set].count;
          }
          if (rest.empty()) {
            json next = sw.obj();
            next["status"] = {
                {"phase", "Succeeded"},
                {"completionTime", FormatTimestamp(now)},
                {"exitCode", 0},
                {"message", "all " + std::to_string(sw.w().pod_count()) + " pods completed"}};
            KeepFinished(sw.w(), status, next["status"]);
            (void)store_.Put(kv.key, next.dump(), kv.mod_revision);
            continue;
          }
          sw.pods = std::move(rest);
        }
        // Nominated for fewer pods (status.nominatedCounts, none completed): the first of
        // each pod set, so many.
        std::vector<int> pod_of;  // the plan's pods, by their index in sw.pods
        if (const json& cut = Field(status, "nominatedCounts");
            cut.is_array() && sw.done.empty() && sw.request_error.ok() &&
            cut.size() == sw.w().pod_sets.size()) {
          std::vector<int> counts;
          for (size_t set = 0, first = 0; set < cut.size(); ++set) {
            const PodSet& ps = sw.w().pod_sets[set];
            if (!cut[set].is_number_integer() || cut[set] < ps.least() || cut[set] > ps.count)
              break;
            counts.push_back(cut[set].get<int>());
            for (int k = 0; k < counts.back(); ++k) pod_of.push_back(static_cast<int>(first) + k);
            first += ps.count;
          }
          if (counts.size() == cut.size()) {
            sw.nomination_counts = std::move(counts);
          } else {
            pod_of.clear();
          }
        }
        if (sw.nomination_counts.empty())
          for (size_t i = 0; i < sw.pods.size(); ++i) pod_of.push_back(static_cast<int>(i));
        // A plan on a node that is gone, or that its pod may no longer use (tainted or
        // relabelled since), is no plan.
        auto plan = ParseAssignments(status, "nomination", state, node_index, unusable);
        if (plan && plan->size() == pod_of.size()) {
          bool usable = true;
          for (size_t i = 0; i < plan->size(); ++i) {
            const PodRequest& pod = sw.pods[pod_of[i]];
            usable = usable && (!pod.nodes || pod.nodes->in[(*plan)[i].node]);
          }
          if (usable) sw.nomination = std::move(*plan);
        }
        if (const json& swap = Field(status, "swap"); swap.is_object()) {
          const json& ceiling = Field(swap, "ceilingMilli");
          if (ceiling.is_number_unsigned() && ceiling.get<uint64_t>() <= kMaxSwapCeilingMilli &&
              !Str(swap, "flavor").empty())
            sw.swap = Admitter::Swap{Str(swap, "flavor"), ceiling.get<int64_t>(),
                                     Field(swap, "held") == json(true)};
        }
        pending.push_back(std::move(sw));
      }
    } catch (const std::exception&) {
      continue;
    }
  }

  std::erase_if(parsed_, [this](const auto& entry) { return std::get<2>(entry.second) != cycle_; });

  // A victim whose preemptor no longer waits (deleted, placed meanwhile, or in a queue a
  // stopPolicy stopped) is not evicted after all: its mark is taken off and it keeps running.
  Result<AdmissionConfig> config = with_queues ? QueueConfig(queue_list, flavor_list)
                                               : Result<AdmissionConfig>(AdmissionConfig{});
  std::set<std::string> stopped, leaves;
  std::map<std::string, QueueSpec> queue_specs;  // who may use which queue (spec.tenants)
  if (with_queues && config.ok()) {
    stopped = StoppedQueues(*config);
    leaves = LeafQueues(*config);
    for (const QueueSpec& q : config->queues) queue_specs[q.name] = q;
  }
  // The built-in unqueued, where no stored queue has its name, is kept as an object of its own
  // (kBuiltinQueueKey) for the API to show; with no queues, or a stored one, that goes.
  // (A tree that does not parse keeps the record as it was, and writes none.)
  bool builtin_unqueued = with_queues;
  for (const KeyValue& kv : queue_list.items)
    if (kv.key == std::string("/registry/queues/") + kUnqueuedQueue) builtin_unqueued = false;
  Result<KeyValue> builtin_kv = store_.Get(kBuiltinQueueKey);
  if (!builtin_unqueued && builtin_kv.ok())
    (void)store_.Delete(kBuiltinQueueKey, builtin_kv->mod_revision);
  // Whether a workload's tenant may wait in the queue it names.
  const auto allowed = [&](const Workload& w, const std::string& leaf) {
    return TenantMayUse(w.tenant.str(), leaf, [&](const std::string& q) -> const QueueSpec* {
      auto it = queue_specs.find(q);
      return it == queue_specs.end() ? nullptr : &it->second;
    });
  };
  auto hold_of = [&](const StoredWorkload& sw) -> std::optional<std::string> {
    if (!options_.admission_hold) return std::nullopt;
    return options_.admission_hold(sw.w().tenant.str(),
                                   sw.w().queue.empty() ? sw.w().tenant.str() : sw.w().queue.str());
  };
  std::set<std::string> waiting_keys;
  std::map<std::string, const StoredWorkload*> waiting_of;  // by key
  // Pending work that may not start this cycle whatever is freed (a hold on its tenant's
  // spending, a request no node can take): its victims need not stop for it (a review found
  // them evicted for a preemptor held over its budget). -> why
  std::map<std::string, std::string> may_not_start;
  for (StoredWorkload& sw : pending) {
    const std::string leaf = WaitingQueue(leaves, sw.w().queue.str(), sw.w().tenant.str());
    // (A plan on a node that now takes no new work is void: its victims need not stop for it,
    // and it plans again, from nothing: a trial's preemptor, handed its void plan back, chose
    // the same victim on the cordoned node again, and the eviction was called off and made
    // anew every cycle.)
    bool void_plan = false;
    for (const Assignment& a : sw.nomination) {
      const std::string& node = state.node(a.node).name.str();
      void_plan |= unusable.count(node) > 0;
      if (auto it = cordoned_gpus.find(node); it != cordoned_gpus.end())
        for (const DeviceShare& d : a.devices)
          void_plan |=
              std::find(it->second.begin(), it->second.end(), d.device) != it->second.end();
    }
    if (void_plan) {
      sw.nomination.clear();
      sw.nomination_counts.clear();
    }
    if (!sw.request_error.ok()) {
      may_not_start[KeyName(sw.obj())] = sw.request_error.message();
    } else if (auto h = sw.w().active ? hold_of(sw) : std::nullopt) {
      may_not_start[KeyName(sw.obj())] = *h;
    }
    if (sw.w().active && !stopped.count(leaf) && allowed(sw.w(), leaf).ok() && !void_plan &&
        !may_not_start.count(KeyName(sw.obj()))) {
      waiting_keys.insert(KeyName(sw.obj()));
      waiting_of[KeyName(sw.obj())] = &sw;
    }
  }
  // Nor one whose queue's disruption budget is now 0 (an admin froze evictions there mid-way:
  // stopped, it would only start again, its preemptor unable to evict the rest it needs).
  // A victim's mark lifted, `why`: it runs on, and says why (its message said when it would
  // stop). True once written.
  std::map<std::string, std::string> called_off_of;  // preemptor -> what of it was called off
  const auto call_off = [&](BoundWorkload& b, const std::string& why) {
    json next = b.obj();
    next["status"].erase("preemption");
    json conditions = json::array();
    for (const json& c : List(Field(b.sw.obj(), "status"), "conditions"))
      if (Str(c, "type") != "Preempted") conditions.push_back(c);
    next["status"]["conditions"] = conditions;
    next["status"]["message"] =
        std::string(kEvictionCancelled) + why + "; " + RunningMessage(next["status"]);
    auto rev = store_.Put(b.sw.kv.key, next.dump(), b.sw.kv.mod_revision);
    if (!rev.ok()) return false;
    // (Its revision now: a victim spared may be chosen again this cycle, by a preemptor that
    // plans anew.)
    b.sw.kv.mod_revision = *rev;
    b.written = std::move(next);
    b.evicting = false;
    return true;
  };
  // Nor one preempted for work of its own queue that no longer outranks it (a priority
  // changed meanwhile, either's: a trial's victim, raised past its preemptor, was evicted and
  // then evicted another on its return).
  // Why a mark of `b` for preemptor `by` (on `basis`) no longer holds because `by` no longer
  // outranks it ("" if it does, or the mark is not by priority).
  const auto outranked_by = [&](const BoundWorkload& b, const std::string& by,
                                const std::string& basis) -> std::string {
    const auto p = waiting_of.find(by);
    if (p == waiting_of.end() || basis != "Priority") return "";
    const int mine = b.sw.w().priority, theirs = p->second->w().priority;
    const auto created = [](const StoredWorkload& w) {
      return ParseTimestamp(Str(Field(w.obj(), "metadata"), "creationTimestamp"));
    };
    if (mine > theirs || (mine == theirs && created(b.sw) < created(*p->second)))
      return "its preemptor " + by + " no longer outranks it (priority " + std::to_string(theirs) +
             " to its " + std::to_string(mine) + ")";
    return "";
  };
  // (Its queue's budget of 0, or a department's above it: a department's counts its subtree.)
  const auto frozen_queue = [&](const BoundWorkload& b) -> std::string {
    auto spec = queue_specs.find(WaitingQueue(leaves, b.sw.w().queue.str(), b.sw.w().tenant.str()));
    for (size_t depth = 0; spec != queue_specs.end() && depth <= queue_specs.size(); ++depth) {
      if (spec->second.disruption_budget == 0) return spec->first;
      spec = queue_specs.find(spec->second.parent);
    }
    return "";
  };
  for (BoundWorkload& b : bound) {
    if (!b.evicting) continue;
    const json& mark = Field(Field(b.sw.obj(), "status"), "preemption");
    const std::string by = Str(mark, "by");
    const std::string frozen_in = frozen_queue(b);
    const bool frozen = !frozen_in.empty();
    const std::string outranked = outranked_by(b, by, Str(mark, "basis"));
    // (Empty: its queue drains.)
    if (by.empty() || (waiting_keys.count(by) && !frozen && outranked.empty())) continue;
    const auto held = may_not_start.find(by);
    if (call_off(b, frozen               ? "its queue's disruption budget is now 0"
                    : !outranked.empty() ? outranked
                    : held != may_not_start.end()
                        ? "its preemptor " + by + " may not start now: " + held->second
                        : "its preemptor " + by + " no longer waits for it")) {
      if (--victims_of[by] <= 0) victims_of.erase(by);
      // Its preemptor, still waiting, is told too (a preemptor lowered read only why it
      // waits now, not that its eviction of another was called off).
      if (waiting_keys.count(by)) {
        std::string& note = called_off_of[by];
        note += (note.empty() ? "" : "; ") + std::string("its preemption of ") +
                KeyName(b.sw.obj()) + " is called off: " +
                (frozen ? "queue " + frozen_in + "'s disruptionBudget is now 0"
                        : "it no longer outranks it (priority " +
                              std::to_string(waiting_of[by]->w().priority) + " to its " +
                              std::to_string(b.sw.w().priority) + ")");
      }
    }
  }
  // Likewise pods an elastic shrink took: they stay where a whole victim's eviction would be
  // called off — its preemptor no longer waits, or no longer outranks it, or its queue's
  // disruption budget is now 0 (a review found the shrink went ahead where the eviction was
  // called off) — and where its preemptor's other victims were called off (its plan was made
  // for them all). (The newest mark first, as its pods come before the older marks': a mark
  // behind one that stays stays too, and its pods stop at its deadline.)
  for (const BoundWorkload& b : bound) {
    if (b.kept_counts.empty() || !b.marks.is_array()) continue;
    const std::string frozen_in = frozen_queue(b);
    for (const json& m : b.marks) {
      const std::string by = Str(m, "by");
      if (!waiting_keys.count(by)) continue;
      const std::string outranked = outranked_by(b, by, Str(m, "basis"));
      if (frozen_in.empty() && outranked.empty()) continue;
      std::string& note = called_off_of[by];
      note += (note.empty() ? "" : "; ") + std::string("its shrink of ") + KeyName(b.sw.obj()) +
              " is called off: " +
              (!frozen_in.empty() ? "queue " + frozen_in + "'s disruptionBudget is now 0"
                                  : "it no longer outranks it (priority " +
                                        std::to_string(waiting_of[by]->w().priority) + " to its " +
                                        std::to_string(b.sw.w().priority) + ")");
    }
  }
  // Takes off `b`'s shrink marks that `off` says why for (empty: that mark stays) and writes
  // it: their pods run on. The pods a mark takes come before an older mark's, and those a
  // workload keeps must stay the first of each set, so the marks newer than one taken off go
  // too (a re-trial's older preemptor, unable to start, had its pods stopped for nothing behind
  // a newer mark that stayed); their preemptors, named in `*with` where given, plan anew. The
  // number of marks taken off, all the newest (0 if none, or the write failed).
  const auto call_off_shrinks = [&](BoundWorkload& b,
                                    const std::function<std::string(const json&)>& off,
                                    std::vector<std::string>* with = nullptr) -> size_t {
    if (b.kept_counts.empty() || !b.marks.is_array()) return 0;
    size_t first = b.marks.size();
    std::string why;  // (the oldest mark's taken off for a reason of its own, said)
    for (size_t m = 0; m < b.marks.size() && first == b.marks.size(); ++m)
      if (why = off(b.marks[m]); !why.empty()) first = m;
    if (first == b.marks.size()) return 0;
    std::vector<std::string> replan;
    for (size_t m = first + 1; m < b.marks.size(); ++m)
      if (off(b.marks[m]).empty()) replan.push_back(Str(b.marks[m], "by"));
    json left = json::array();
    for (size_t m = 0; m < first; ++m) left.push_back(b.marks[m]);
    if (!replan.empty())
      why += "; with it, as the pods a newer shrink takes come before its, the shrink(s) for " +
             [&] {
               std::string names;
               for (const std::string& by : replan) names += (names.empty() ? "" : ", ") + by;
               return names;
             }() +
             ", which plan anew";
    if (left.size() == b.marks.size()) return 0;
    json next = b.obj();
    next["status"].erase("shrink");  // (the earlier build's one mark: now in b.marks)
    if (left.empty()) {
      next["status"].erase("shrinks");
      next["status"]["message"] =
          std::string(kEvictionCancelled) + why + "; " + RunningMessage(next["status"]);
    } else {
      next["status"]["shrinks"] = left;
      next["status"]["message"] = std::string(kEvictionCancelled) +
                                  std::to_string(b.marks.size() - left.size()) +
                                  " of its shrinks (" + why + "); " + std::to_string(left.size()) +
                                  " still stop; " + RunningMessage(next["status"]);
    }
    auto rev = store_.Put(b.sw.kv.key, next.dump(), b.sw.kv.mod_revision);
    if (!rev.ok()) return 0;
    b.sw.kv.mod_revision = *rev;  // (as call_off's: written again this cycle, it must match)
    b.written = next;
    const std::set<std::string> leaving = ShrinkPods(left);
    b.kept_counts =
        left.empty() ? std::vector<int>{}
                     : KeptPart(b.sw.w(), Field(b.sw.obj(), "status"), [&](const std::string& pod) {
                         return !leaving.count(pod);
                       }).second;
    const size_t taken = b.marks.size() - left.size();
    b.marks = left;
    if (with != nullptr) with->insert(with->end(), replan.begin(), replan.end());
    return taken;
  };
  // (Again while a pass makes a preemptor plan anew: its shrinks of workloads passed already
  // go too. Marks only go, so this ends.)
  for (size_t planning = 0, before = SIZE_MAX; before != planning;) {
    before = planning;
    for (BoundWorkload& b : bound) {
      const std::string frozen_in = frozen_queue(b);
      std::vector<std::string> replan;  // (preemptors whose newer shrinks went with an older one)
      call_off_shrinks(
          b,
          [&](const json& m) -> std::string {
            const std::string by = Str(m, "by");
            const std::string outranked = outranked_by(b, by, Str(m, "basis"));
            if (const auto held = may_not_start.find(by); held != may_not_start.end())
              return "its preemptor " + by + " may not start now: " + held->second;
            return !waiting_keys.count(by) ? "the preemptor its shrink was for no longer waits"
                   : !frozen_in.empty()    ? "its queue's disruption budget is now 0"
                   : !outranked.empty()    ? outranked
                   : called_off_of.count(by)
                       ? "its preemptor " + by +
                             " plans anew: its eviction of another was called off"
                       : "";
          },
          &replan);
      // (Told, and their other victims called off below: their plan was made with these pods.)
      for (const std::string& by : replan)
        if (waiting_keys.count(by)) {
          std::string& note = called_off_of[by];
          note += (note.empty() ? "" : "; ") + std::string("its shrink of ") + KeyName(b.sw.obj()) +
                  " is called off with an older one, whose pods go after its";
        }
    }
    planning = called_off_of.size();
  }
  // A waiting preemptor that lost some of its victims so loses the rest too: its plan was made
  // for them all, and the room the rest free may not hold it (a re-trial: a preemptor lowered
  // below one of its two victims evicted the other for nothing, its queue's quota then too
  // short for it). It plans anew next cycle.
  if (!called_off_of.empty())
    for (BoundWorkload& b : bound) {
      if (!b.evicting) continue;
      const std::string by = Str(Field(Field(b.sw.obj(), "status"), "preemption"), "by");
      const auto off = called_off_of.find(by);
      if (off == called_off_of.end()) continue;
      if (!call_off(b,
                    "its preemptor " + by + " plans anew: its eviction of another was called off"))
        continue;
      if (--victims_of[by] <= 0) victims_of.erase(by);
      off->second += "; so is its preemption of " + KeyName(b.sw.obj()) + ", made with it";
    }
  // A cordoned GPU's free capacity is held for the cycle, so nothing new lands on it while the
  // rest of its node keeps taking work.
  const PodRequest hold{};  // a reservation: no CPU, no memory, no tenant
  std::vector<std::pair<Assignment, PodRequest>> held;
  for (const auto& [name, gpus] : cordoned_gpus) {
    auto it = node_index.find(name);
    if (it == node_index.end()) continue;
    Assignment a = FreeCapacity(state, it->second, gpus);
    if (a.devices.empty()) continue;
    state.Apply(a, hold);
    held.emplace_back(std::move(a), hold);
  }

  // The expected mix for the policy: the pods waiting now.
  std::vector<PodRequest> waiting;
  for (const StoredWorkload& sw : pending)
    waiting.insert(waiting.end(), sw.pods.begin(), sw.pods.end());
  const std::vector<TypicalPod> typical = TypicalMix(waiting);
  ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(options_.policy, typical, &state));

  std::vector<int> usable_nodes;
  for (int i = 0; i < state.node_count(); ++i) {
    if (!unusable.count(state.node(i).name.str())) usable_nodes.push_back(i);
  }

  std::sort(pending.begin(), pending.end(), [](const StoredWorkload& a, const StoredWorkload& b) {
    if (a.w().priority != b.w().priority) return a.w().priority > b.w().priority;
    return a.kv.create_revision < b.kv.create_revision;
  });
  std::vector<Decision> decisions(pending.size());
  std::vector<bool> decided(pending.size(), false);
  for (size_t i = 0; i < pending.size(); ++i) {
    // (Inactive first: what a stopped workload could not use is not why it waits.)
    if (!pending[i].request_error.ok() && pending[i].w().active) {
      decisions[i] = Waits(pending[i].request_error.message(), "Unschedulable");
      decided[i] = true;
    } else if (!pending[i].w().active) {
      // (Deactivated by the gang timeout's limit, it says so.)
      const json& state = Field(Field(pending[i].obj(), "status"), "requeueState");
      decisions[i] =
          state.is_object() && !state.contains("requeueAt")
              ? Waits("deactivated: " + TimedOut(pending[i].w()) + Field(state, "count").dump() +
                          " times, past the limit; set spec.active to true to try again",
                      "RequeuingLimitExceeded")
              : Waits("inactive: spec.active is false", "Inactive");
      decided[i] = true;
    } else if (const json& state = Field(Field(pending[i].obj(), "status"), "requeueState");
               std::min(ParseTimestamp(Str(state, "requeueAt")),
                        now + static_cast<int64_t>(options_.gang_requeue_backoff_max_s * 1000)) >
               now) {
      // Released by the gang timeout: it backs off before it tries again.
      decisions[i] =
          Waits("backing off: " + TimedOut(pending[i].w()) + Field(state, "count").dump() +
                    " time(s); tries again at " + Str(state, "requeueAt"),
                "Backoff");
      decided[i] = true;
    } else if (auto h = hold_of(pending[i])) {
      decisions[i] = Waits(*h, "BudgetExceeded");
      decided[i] = true;
    }
  }

  struct Victim {
    size_t bound;    // index in `bound`
    std::string by;  // the preemptor, "ns/name"
    std::string why;
    Eviction::Basis basis = Eviction::Basis::kOther;
  };
  std::vector<Victim> evictions;
  // Running elastic work whose last pods an elastic shrink takes (status.shrinks).
  struct ShrinkMark {
    size_t bound;    // index in `bound`
    std::string by;  // the preemptor, "ns/name"
    std::string why;
    std::vector<std::string> pods;  // those that stop
    Eviction::Basis basis = Eviction::Basis::kOther;
  };
  std::vector<ShrinkMark> shrinks;
  // Running work admitted in part that took more pods (elastic growth).
  struct Growth {
    size_t bound;  // index in `bound`
    std::vector<Assignment> placed;
    std::vector<int> counts;
    std::string message;
    int64_t charge_milli = -1;  // its queue's charge for its GPUs now
    std::string charge_queue;
  };
  std::vector<Growth> growths;
  std::vector<Store::Write> queue_writes;
  std::map<std::string, double> queue_used, queue_guaranteed;  // metrics, by queue label
  // ... by queue and flavour (flavours any quota names), and the pods' CPU cores and memory
  // bytes by queue (where a quota in its tree names them).
  std::map<std::string, double> flavor_used, flavor_guaranteed, cpu_used, memory_used;
  if (with_queues) {
    // Queues exist: admission through the queue tree (sched/admission.h), in one pass with
    // placement. The Admitter is rebuilt from the store every cycle: the store is the truth,
    // but for what this scheduler keeps between cycles (usage history, reclaim records), which
    // it also writes to the queues' status.
    std::unique_ptr<Admitter> admitter;
    std::set<std::string> set_aside;  // queues whose borrowWithinCohort is set aside
    if (config.ok()) {
      config->usage_half_life_s = options_.usage_half_life_s;
      config->gang_timeout_s = options_.gang_timeout_s;
      config->history_weight = options_.history_weight;
      config->reclaim_hold_s = options_.reclaim_hold_s;
      config->reclaim_min_runtime_s = options_.reclaim_min_runtime_s;
      config->lend_across_trees = options_.lend_across_trees;
      config->reserve_after_s = options_.reserve_after_s;
      config->max_reservations = options_.max_reservations;
      config->fair_share_preemption = options_.fair_share_preemption;
      // Fair-share preemption has its own rule for taking from other queues (as Kueue's): a
      // queue's borrowWithinCohort is set aside, with a warning in its status, rather than the
      // whole tree refused (a user-style review: examples/queues.yaml stopped all admission).
      if (config->fair_share_preemption)
        for (QueueSpec& q : config->queues)
          if (q.preemption.borrow_within_cohort != PreemptionPolicy::Borrow::kNever) {
            q.preemption.borrow_within_cohort = PreemptionPolicy::Borrow::kNever;
            q.preemption.borrow_max_priority.reset();
            set_aside.insert(q.name);
          }
      config->elastic_growth = options_.elastic_growth;
      config->elastic_shrink = options_.elastic_shrink;
      auto created =
          Admitter::Create(fleet, tenants, std::move(*config), *policy, static_cast<uint64_t>(now));
      if (created.ok()) {
        admitter = std::move(*created);
      } else {
        config = created.status();
      }
    }
    if (!admitter) {
      for (size_t i = 0; i < pending.size(); ++i) {
        if (!decided[i])
          decisions[i] = Waits("queues: " + config.status().message(), "QueueConfigInvalid");
      }
    } else {
      auto options_of = [](const Workload& w) {
        SubmitOptions o;
        o.preemptible = w.preemptible;
        o.may_preempt = w.preempts;
        o.min_runtime_s = static_cast<double>(w.min_runtime_seconds);
        o.checkpoint_interval_s = static_cast<double>(w.checkpoint_interval_seconds);
        return o;
      };
      // The queue a workload waits in: spec.queue, else its tenant's queue, else the built-in.
      auto leaf_of = [&](Workload w) {
        w.queue = QueueId(WaitingQueue(leaves, w.queue.str(), w.tenant.str()));
        return w;
      };
      const double now_s = static_cast<double>(now) / 1000.0;
      std::map<int, size_t> bound_of;           // admitter id -> bound index
      std::map<int, size_t> bound_of_fragment;  // admitter id of a shrink's pods -> bound index
      for (size_t b = 0; b < bound.size(); ++b) {
        const int64_t at = ParseTimestamp(Str(Field(bound[b].sw.obj(), "status"), "scheduledTime"));
        const Workload& spec = bound[b].sw.w();
        // Its run began at status.startTime (set when it started running); not yet, or a gang
        // some of whose pods have not started (within its gang timeout): no work to lose, as
        // its eviction would record.
        SubmitOptions options = options_of(spec);
        const json& status = Field(bound[b].sw.obj(), "status");
        const int64_t began = ParseTimestamp(Str(status, "startTime"));
        const bool gang_waits =
            spec.gang && Str(status, "resizedTime").empty() && !AllPodsStarted(status);
        options.started_at =
            began >= 0 && !gang_waits ? static_cast<double>(began) / 1000.0 : now_s;
        const json& lost =
            Field(Field(Field(bound[b].sw.obj(), "status"), "evictions"), "gpuSecondsLost");
        if (lost.is_number_integer())
          options.lost_before_s = static_cast<double>(lost.get<int64_t>());
        // When its pods started, as its nodes reported (what a shrink's pods lose counts from).
        if (const json& started = Field(status, "startedPods"); started.is_object())
          for (const auto& [pod, at] : started.items())
            if (const int64_t t = at.is_string() ? ParseTimestamp(at.get<std::string>()) : -1;
                t >= 0)
              options.pod_started[pod] = static_cast<double>(t) / 1000.0;
        const int64_t created =
            ParseTimestamp(Str(Field(bound[b].sw.obj(), "metadata"), "creationTimestamp"));
        if (created >= 0) options.arrived_at = static_cast<double>(created) / 1000.0;
        // Charged to its queue while its tenant may use it; no longer allowed there, it keeps
        // running on the built-in queue, where what it holds is borrowed (reclaimable).
        Workload charged = leaf_of(spec);
        // (A stopped queue keeps it: a drain evicts it there.)
        if (!allowed(charged, charged.queue.str()).ok() && !stopped.count(charged.queue.str()))
          charged.queue = QueueId(kUnqueuedQueue);
        options.leaving = bound[b].leaving;
        // (Moved by a consolidation: its preemptor holds a place for it while it stops.)
        options.moving =
            bound[b].evicting &&
            Str(Field(Field(bound[b].sw.obj(), "status"), "preemption"), "basis") == "Move";
        options.pod_counts = bound[b].sw.counts;
        // Elastic growth (only work started in part grows): once all its pods run, on the
        // queue it asked for, not held over budget.
        const json& bound_status = Field(bound[b].sw.obj(), "status");
        // (Its pods all started, and not within the backoff after a growth it undid.)
        const int64_t retry = ParseTimestamp(Str(bound_status, "growthRetryTime"));
        const std::optional<std::string> hold = hold_of(bound[b].sw);
        options.may_grow =
            !bound[b].sw.counts.empty() && Str(bound_status, "phase") == "Running" &&
            AllPodsStarted(bound_status) && (retry < 0 || now >= retry) &&
            // (On unqueued too, once its tenant may no longer use its queue:
            // work there takes what is idle, and is the first reclaimed.)
            (charged.queue == leaf_of(spec).queue || charged.queue.str() == kUnqueuedQueue) &&
            !hold;
        // (Why not, where this says so rather than the Admitter: status.growthBlocked.)
        if (!bound[b].sw.counts.empty() && !options.may_grow)
          bound[b].growth_why =
              hold ? *hold
              : Str(bound_status, "phase") != "Running" || !AllPodsStarted(bound_status)
                  ? "its pods have not all started"
              : retry >= 0 && now < retry
                  ? "its last growth was undone; it may grow again at " +
                        Str(bound_status, "growthRetryTime")
                  : "it runs charged to queue " + charged.queue.str() + ", not its own";
        // It shrinks, too, only once all its pods run (a shrink restarts no gang timeout). A
        // gang's pods are ranks of one run that goes on with fewer; a pod taken from other work
        // is a piece of it that runs again later (PodsLeft), which still loses less than an
        // eviction of all of it (the Admitter takes such pods only while one costs no more
        // than the cheapest whole victim).
        options.may_shrink =
            Str(bound_status, "phase") == "Running" && AllPodsStarted(bound_status);
        options.completed = bound[b].completed;
        const int64_t resized = ParseTimestamp(Str(bound_status, "resizedTime"));
        if (resized >= 0) options.resized_at = static_cast<double>(resized) / 1000.0;
        // Pods elastic shrinks took that are still stopping: a fragment of their own for each
        // mark, beside the pods it keeps; meanwhile it does not grow (it may shrink again: a
        // new mark takes the pods before these).
        std::vector<Assignment> assign = bound[b].assign;
        const json& marks = bound[b].marks;
        const size_t mark_count = std::max<size_t>(1, marks.is_array() ? marks.size() : 0);
        std::vector<std::vector<std::pair<int, Assignment>>> fragments(mark_count);
        std::vector<std::vector<size_t>> fragment_index(mark_count);  // in bound[b].assign
        if (!bound[b].kept_counts.empty()) {
          std::map<std::string, size_t> mark_of;
          for (size_t m = 0; m < mark_count && marks.is_array() && m < marks.size(); ++m)
            for (const std::string& pod : ShrinkPods(json::array({marks[m]}))) mark_of[pod] = m;
          const std::vector<int>& kept = bound[b].kept_counts;
          assign.clear();
          for (size_t set = 0, i = 0; set < kept.size(); ++set) {
            const int has =
                bound[b].sw.counts.empty() ? spec.pod_sets[set].count : bound[b].sw.counts[set];
            for (int k = 0; k < has && i < bound[b].assign.size(); ++k, ++i) {
              if (k < kept[set]) {
                assign.push_back(bound[b].assign[i]);
                continue;
              }
              auto it = mark_of.find(spec.pod_sets[set].name + "-" + std::to_string(k));
              const size_t m = it == mark_of.end() ? mark_count - 1 : it->second;
              fragments[m].push_back({static_cast<int>(set), bound[b].assign[i]});
              fragment_index[m].push_back(i);
            }
          }
          options.pod_counts = kept;
          options.may_grow = false;
          bound[b].growth_why = "pods it gave up are still stopping";
        }
        const double admitted_s = at >= 0 ? static_cast<double>(at) / 1000.0 : now_s;
        auto id = admitter->Restore(charged, assign, admitted_s, options, bound[b].evicting);
        if (!id.ok()) {
          // Its queue is gone: it keeps running, charged to the built-in queue.
          Workload w = bound[b].sw.w();
          w.queue = QueueId(kUnqueuedQueue);
          id = admitter->Restore(w, assign, admitted_s, options, bound[b].evicting);
        }
        // (A fragment it cannot restore still holds its devices.) Its preemptor waits for it.
        int64_t fragment_charge = 0;
        for (size_t m = 0; id.ok() && m < mark_count; ++m) {
          if (fragments[m].empty()) continue;
          if (const Result<int> fragment = admitter->RestoreFragment(*id, fragments[m]);
              fragment.ok()) {
            fragment_charge += admitter->gpu_milli(*fragment);
            // (Linked to its preemptor as a whole victim is, so that the quota the preemptor
            // keeps does not count the pods still stopping twice.)
            if (marks.is_array() && m < marks.size()) {
              const std::string by = Str(marks[m], "by");
              ++victims_of[by];
              ++shrunk_of[by];
              victim_ids_of[by].push_back(*fragment);
              bound[b].mark_fragments.resize(marks.size(), -1);
              bound[b].mark_fragments[m] = *fragment;
              bound_of_fragment[*fragment] = b;
            }
          } else {
            for (size_t i : fragment_index[m])
              admitter->Reserve(bound[b].assign[i], bound[b].sw.pods[i]);
          }
        }
        if (id.ok()) {
          bound_of[*id] = b;
          bound[b].charge_milli = admitter->gpu_milli(*id) + fragment_charge;
          bound[b].charge_queue = admitter->queue_name(admitter->queue_of(*id));
          if (bound[b].evicting)
            if (const std::string by =
                    Str(Field(Field(bound[b].sw.obj(), "status"), "preemption"), "by");
                !by.empty())
              victim_ids_of[by].push_back(*id);
        } else {
          // Never hand out what it holds, even if it cannot be charged to a queue.
          for (size_t i = 0; i < bound[b].assign.size(); ++i)
            admitter->Reserve(bound[b].assign[i], bound[b].sw.pods[i]);
        }
      }
      // What is free on nodes that take no new work, or on cordoned GPUs, is neither lent across
      // trees nor counted in the capacity shares are measured against (before it is held).
      for (int n = 0; n < state.node_count(); ++n) {
        const std::string& name = state.node(n).name.str();
        if (unusable.count(name)) {
          admitter->TakeOutOfService(n);
        } else if (auto it = cordoned_gpus.find(name); it != cordoned_gpus.end()) {
          admitter->TakeOutOfService(n, it->second);
        }
      }
      for (auto& [a, req] : held) admitter->Reserve(a, req);
      // No eviction is planned to make room on nodes that take no new work (the room it would
      // free there is not placeable), nor on nodes with cordoned GPUs.
      for (int n = 0; n < state.node_count(); ++n)
        if (unusable.count(state.node(n).name.str()) ||
            cordoned_gpus.count(state.node(n).name.str()))
          admitter->ExcludeFromEviction(n);
      // Nodes that take no new work: everything still free there is held for the cycle.
      for (int n = 0; n < state.node_count(); ++n) {
        if (!unusable.count(state.node(n).name.str())) continue;
        const ClusterState& as = admitter->state();
        std::vector<int> all(as.devices(n).size());
        for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int>(d);
        PodRequest rest;
        rest.cpu_milli = as.free_cpu(n);
        rest.memory_mib = as.free_memory(n);
        admitter->Reserve(FreeCapacity(as, n, all), rest);
      }
      // Calls off the shrinks made for `preemptor` (on `basis`; empty: any) where no newer mark
      // stays, saying `why`: their pods run on, counted as running for the rest of the cycle.
      // How many were called off.
      const auto spare_shrinks = [&](const std::string& preemptor, const std::string& basis,
                                     const std::string& why) {
        std::set<size_t> shrunk;
        for (int victim : victim_ids_of[preemptor])
          if (const auto at = bound_of_fragment.find(victim); at != bound_of_fragment.end())
            shrunk.insert(at->second);
        int spared = 0;
        for (size_t at : shrunk) {
          BoundWorkload& b = bound[at];
          const json marks = b.marks;
          const size_t had = marks.is_array() ? marks.size() : 0;
          const size_t off = call_off_shrinks(b, [&](const json& m) -> std::string {
            return Str(m, "by") == preemptor && (basis.empty() || Str(m, "basis") == basis) ? why
                                                                                            : "";
          });
          // (Newer marks of other preemptors that went with it: their pods run on too, and
          // those preemptors wait for them no more; they plan anew.)
          for (size_t m = had - off; m < had && m < b.mark_fragments.size(); ++m) {
            if (b.mark_fragments[m] < 0) continue;
            admitter->Spare(b.mark_fragments[m]);
            const std::string by = Str(marks[m], "by");
            if (by == preemptor) {
              ++spared;
            } else if (--victims_of[by] <= 0) {
              victims_of.erase(by);
            }
            if (--shrunk_of[by] <= 0) shrunk_of.erase(by);
          }
          if (b.mark_fragments.size() > had - off) b.mark_fragments.resize(had - off);
        }
        return spared;
      };
      std::map<int, size_t> pending_of;                     // admitter id -> pending index
      std::map<int, Admitter::ReclaimTally> reclaim_tally;  // queue -> its reclaims kept so far
      std::vector<bool> submitted(pending.size(), false);   // ... given to the Admitter at all
      for (size_t i = 0; i < pending.size(); ++i) {
        if (decided[i]) continue;
        int64_t created =
            ParseTimestamp(Str(Field(pending[i].obj(), "metadata"), "creationTimestamp"));
        // Released by the gang timeout, it queues again from the end of its backoff, behind
        // what arrived meanwhile (as the replay sends a released gang to the back).
        const int64_t requeued = ParseTimestamp(
            Str(Field(Field(pending[i].obj(), "status"), "requeueState"), "requeueAt"));
        if (requeued > created) created = requeued;
        // (Only the pods that have not completed.)
        const Workload w = Remaining(leaf_of(pending[i].w()), pending[i].done);
        // Only where its tenant may wait (a queue's spec.tenants); otherwise it uses no quota.
        const Status may = allowed(w, w.queue.str());
        if (!may.ok()) {
          decisions[i] = Waits(may.message(), "QueueNotAllowed");
          continue;
        }
        auto id = admitter->Submit(w, created >= 0 ? static_cast<double>(created) / 1000.0 : now_s,
                                   options_of(pending[i].w()));
        if (!id.ok() && id.status().code() == StatusCode::kNotFound) {
          // (Not Unschedulable: it starts once an admin creates the queue, as Kueue's
          // workloads wait on a LocalQueue that does not exist.)
          decisions[i] = Waits(id.status().message() + "; it waits until the queue is created",
                               "QueueNotFound");
          continue;
        }
        if (!id.ok()) {
          decisions[i] = Waits(id.status().message(), "Unschedulable");
          continue;
        }
        submitted[i] = true;
        // A preemptor whose victims still stop waits for them; its queue's room stays promised,
        // and what is free of its planned place is held for it. Once they have stopped, it is
        // tried first, on the nodes it planned on first.
        const std::string key = KeyName(pending[i].obj());
        const std::vector<Assignment>& plan = pending[i].nomination;
        const auto& swap = pending[i].swap;
        const std::vector<int>& cut = pending[i].nomination_counts;
        // One its queue may now never hold (a guarantee lowered past it) keeps no victims: they
        // run on (a re-trial's victim was evicted for a preemptor then refused as too large).
        if (auto v = victims_of.find(key);
            v != victims_of.end() && admitter->phase(*id) == Phase::kInfeasible) {
          const std::string why =
              "its preemptor " + key + " may not start now: " + admitter->reason(*id);
          for (int victim : victim_ids_of[key]) {
            const auto at = bound_of.find(victim);
            if (at == bound_of.end() || !bound[at->second].evicting) continue;
            if (call_off(bound[at->second], why)) admitter->Spare(victim);
          }
          // (Pods its shrinks took run on as well: a re-trial's were taken at the deadline.)
          spare_shrinks(key, "", why);
          victims_of.erase(v);
        }
        if (auto v = victims_of.find(key); v != victims_of.end()) {
          admitter->RestoreNomination(*id, v->second, plan, victim_ids_of[key], swap,
                                      /*reservation=*/false, cut);
          // Victims of a reclaim its queue's guarantee no longer holds (lowered since), beside
          // the queue's reclaims judged before it: they run on (a trial lowered the guarantee
          // mid-way; all three were evicted and the preemptor then never placed; a re-trial's
          // two reclaims, each within the lowered guarantee alone, took the queue past it).
          bool reclaims = false;
          for (int victim : victim_ids_of[key])
            if (const auto at = bound_of.find(victim); at != bound_of.end())
              reclaims |= bound[at->second].evicting &&
                          Str(Field(Field(bound[at->second].sw.obj(), "status"), "preemption"),
                              "basis") == "Reclaim";
          // (A shrink's mark says its basis too.)
          for (int victim : victim_ids_of[key])
            if (const auto at = bound_of_fragment.find(victim); at != bound_of_fragment.end())
              for (const json& m : bound[at->second].marks)
                reclaims |= Str(m, "by") == key && Str(m, "basis") == "Reclaim";
          if (std::string short_by;
              reclaims &&
              !admitter->GuaranteeHolds(*id, &short_by, &reclaim_tally[admitter->queue_of(*id)])) {
            const std::string past = "queue " + w.queue.str() + "'s guarantee no longer holds";
            for (int victim : victim_ids_of[key]) {
              const auto at = bound_of.find(victim);
              if (at == bound_of.end()) continue;
              BoundWorkload& b = bound[at->second];
              if (!b.evicting ||
                  Str(Field(Field(b.sw.obj(), "status"), "preemption"), "basis") != "Reclaim")
                continue;
              if (!call_off(b, past + " its preemptor " + key + " (" + short_by +
                                   "): nothing is taken back for it"))
                continue;
              // (Restored as evicting above: running again for the rest of the cycle, its
              // budget and later preemptors told; a review found it counted as stopping.)
              admitter->Spare(victim);
              if (--v->second <= 0) break;
            }
            // (And the pods its reclaim's shrinks took: a re-trial's were taken at the deadline
            // though the whole victims' evictions were called off.)
            if (v->second > 0)
              v->second -= spare_shrinks(key, "Reclaim",
                                         past + " its preemptor " + key + " (" + short_by +
                                             "): nothing is taken back for it");
            if (v->second <= 0) {  // (it plans anew next cycle)
              // (Out of this cycle's admitter as well: restored as nominated above, it held its
              // plan and stood as a preemptor for the rest of the cycle, so that its queue's
              // other work, which the lowered guarantee still holds, reclaimed past it.)
              admitter->Finish(*id, now_s);
              decisions[i] = Waits(
                  "its preemption is called off: " + past + " it (" + short_by + ")", "Pending");
              continue;
            }
          }
          // (A swap its stored status lost is derived again: kept from now on.)
          const std::optional<Admitter::Swap> restored = admitter->swap(*id);
          // (Victims a disruption budget let go one batch at a time: what the preemption said
          // of the rest stays said.)
          const std::string said = Str(Field(pending[i].obj(), "status"), "message");
          const size_t more = said.find(" more to go as the disruption budget");
          const size_t from = more == std::string::npos ? more : said.rfind("; ", more);
          // (Nominated for fewer pods than all: so many, as it was told.)
          std::string cut_note;
          const bool at_cut = admitter->partially_admitted(*id);
          if (at_cut) {
            const std::vector<int>& counts = admitter->pod_counts(*id);
            cut_note = "; for " + std::to_string(std::accumulate(counts.begin(), counts.end(), 0)) +
                       " of its " + std::to_string(pending[i].w().pod_count()) +
                       " pods (partial admission: " + Admitter::kCutWhy + ")";
          }
          // (Which: a trial's preemptor said only how many, and its victims had to be found.)
          // (In name order, as the admitter names them when it picks them.)
          // (And those its shrinks take pods from: a trial's read only how many.)
          std::vector<std::string> stopping;
          std::set<std::string> shrinking;
          for (int victim : victim_ids_of[key])
            if (const auto at = bound_of.find(victim);
                at != bound_of.end() && bound[at->second].evicting)
              stopping.push_back(KeyName(bound[at->second].sw.obj()));
            else if (const auto in = bound_of_fragment.find(victim); in != bound_of_fragment.end())
              shrinking.insert(KeyName(bound[in->second].sw.obj()));
          std::sort(stopping.begin(), stopping.end());
          const auto listed = [](const auto& all) {
            std::string names;
            size_t k = 0;
            for (const std::string& name : all)
              if (k++ < 5) names += (names.empty() ? "" : ", ") + name;
            if (all.size() > 5) names += " and " + std::to_string(all.size() - 5) + " more";
            return names;
          };
          const std::string names = listed(stopping);
          // (Some of its victims called off this cycle, the rest still stopping: said too.)
          const auto off = called_off_of.find(key);
          decisions[i] =
              Waits((off == called_off_of.end() ? "" : off->second + "; ") +
                        WaitingForVictims(v->second, shrunk_of[key], names, listed(shrinking)) +
                        cut_note + (from == std::string::npos ? "" : said.substr(from)),
                    "Preempting", plan);
          if (at_cut) decisions[i].nomination_counts = admitter->pod_counts(*id);
          decisions[i].swap = restored;
          continue;
        }
        if (!plan.empty())
          admitter->RestoreNomination(
              *id, 0, plan, {}, swap,
              Str(Field(pending[i].obj(), "status"), "reason") == "Reserved", cut);
        pending_of[*id] = i;
      }
      // Usage history: this scheduler's own, else (after a restart) what the queues' status kept.
      if (history_at_ < 0) {
        int64_t at = -1;
        for (const KeyValue& kv : queue_list.items) {
          json q = json::parse(kv.value, nullptr, false);
          const json& status = Field(q, "status");
          if (!Field(status, "usageHistory").is_number()) continue;
          history_[Str(Field(q, "metadata"), "name")] = Field(status, "usageHistory").get<double>();
          at = std::max(at, ParseTimestamp(Str(status, "usageHistoryTime")));
        }
        if (at >= 0) history_at_ = static_cast<double>(at) / 1000.0;
      }
      if (history_at_ >= 0) admitter->RestoreHistory(history_, history_at_);
      // Recent reclaims: the room they freed beyond their need stays with the reclaiming
      // queues for a while (reclaim_hold_s).
      // ... or, where that write failed, in this scheduler's memory (the same queue only: one
      // deleted and created again starts without a hold); the later of the two.
      std::map<std::string, Admitter::ReclaimRecord> reclaimed;
      std::vector<std::pair<std::string, int64_t>> queue_names;  // (name, create revision)
      for (const KeyValue& kv : queue_list.items) {
        json q = json::parse(kv.value, nullptr, false);
        const std::string name = Str(Field(q, "metadata"), "name");
        queue_names.push_back({name, kv.create_revision});
        const json& status = Field(q, "status");
        Admitter::ReclaimRecord r;
        if (const int64_t at = ParseTimestamp(Str(status, "lastReclaimTime")); at >= 0) {
          r.at = static_cast<double>(at) / 1000.0;
          const json& room = Field(status, "reclaimedRoomMilli");
          if (room.is_object())
            for (const auto& [flavor, milli] : room.items())
              if (milli.is_number_integer()) r.room_milli[flavor] = milli.get<int64_t>();
        }
        auto kept = reclaims_.find(name);
        if (kept != reclaims_.end() && kept->second.queue_revision == kv.create_revision &&
            kept->second.at > r.at)
          r = {kept->second.at, kept->second.room_milli};
        if (r.at >= 0) reclaimed[name] = std::move(r);
      }
      admitter->RestoreReclaims(reclaimed, now_s);
      CycleResult result = admitter->Cycle(now_s, options_.max_admissions_per_cycle);
      history_.clear();
      for (int q = 0; q < admitter->queue_count(); ++q)
        history_[admitter->queue_name(q)] = admitter->usage_history(q);
      reclaims_.clear();
      for (const auto& [name, created] : queue_names) {
        const int q = admitter->QueueIndex(name);
        if (q < 0) continue;
        const Admitter::ReclaimRecord r = admitter->reclaim_record(q);
        if (r.at >= 0 && now_s - r.at < options_.reclaim_hold_s)
          reclaims_[name] = {created, r.at, r.room_milli};
      }
      history_at_ = now_s;
      // Pending work the Admitter never saw (backing off, held over budget, asking for what
      // the fleet cannot make: decided before it), per queue of its path, so that a queue's
      // pendingWorkloads counts what its pending list shows (as Kueue counts inadmissible
      // workloads; inactive ones are not queued).
      std::map<std::string, int> unsubmitted;
      {
        for (size_t i = 0; i < pending.size(); ++i) {
          // (Inactive work is not queued. Work of a tenant the queue no longer takes is
          // counted, as the pending list shows it: inadmissible until the tenant is let back.)
          if (submitted[i] || !pending[i].w().active) continue;
          std::string q =
              WaitingQueue(leaves, pending[i].w().queue.str(), pending[i].w().tenant.str());
          for (int depth = 0; !q.empty() && depth < 64; ++depth) {
            ++unsubmitted[q];
            auto it = queue_specs.find(q);
            if (it == queue_specs.end()) break;
            q = it->second.parent;
          }
        }
      }
      // Each queue's standing after the cycle, in its status (written when it changes); a
      // root whose tree's guarantees the fleet cannot all meet says so (status.warning).
      const std::map<int, std::string> warnings = admitter->GuaranteeWarnings();
      std::vector<KeyValue> standing_of = queue_list.items;
      // (Its place: under the one tree's root, else a tree of its own.)
      json builtin_spec = json::object();
      if (const auto it = queue_specs.find(kUnqueuedQueue);
          it != queue_specs.end() && !it->second.parent.empty())
        builtin_spec["parent"] = it->second.parent;
      if (builtin_unqueued) {
        if (builtin_kv.ok()) {
          standing_of.push_back(*builtin_kv);
        } else {
          const json builtin = {
              {"apiVersion", "fabrica.dev/v1"},
              {"kind", "Queue"},
              {"metadata",
               {{"name", kUnqueuedQueue},
                {"creationTimestamp", FormatTimestamp(now)},
                {"annotations",
                 {{"fabrica.dev/built-in",
                   "work that names no queue, of tenants without a queue of their name, waits "
                   "here; create a Queue named unqueued to set its place and quotas"}}}}},
              {"spec", builtin_spec}};
          standing_of.push_back(KeyValue{
              .key = kBuiltinQueueKey, .value = builtin.dump(), .mod_revision = kMustNotExist});
        }
      }
      for (const KeyValue& kv : standing_of) {
        json q = json::parse(kv.value, nullptr, false);
        if (!q.is_object()) continue;
        const int index = admitter->QueueIndex(Str(Field(q, "metadata"), "name"));
        if (index < 0) continue;
        const std::string label = "queue=\"" + PromLabel(admitter->queue_name(index)) + "\"";
        queue_used[label] = static_cast<double>(admitter->usage_milli(index)) / 1000.0;
        queue_guaranteed[label] = static_cast<double>(admitter->guaranteed_milli(index)) / 1000.0;
        // History to three decimals, so that a queue's status is rewritten when its history
        // moves by a visible amount, not every cycle.
        const double history = std::round(admitter->usage_history(index) * 1000) / 1000;
        json standing = {
            {"guaranteedGpus", GpuAmount(admitter->guaranteed_milli(index))},
            {"usedGpus", GpuAmount(admitter->usage_milli(index))},
            {"pendingWorkloads",
             admitter->pending_count(index) + unsubmitted[admitter->queue_name(index)]},
            {"usageHistory", history},
            // (What it is made of: its dominant share of the fleet now, and how much the
            // history weighs beside it, so that describe can show the sum.)
            {"dominantShare", SignificantDigits(admitter->dominant_share(index), 3)},
            {"historyWeight", options_.usage_half_life_s > 0 ? options_.history_weight : 0.0},
            {"active", !admitter->stopped(index)},
            // (Its own reclaimMinRuntimeSeconds, else its nearest ancestor's, else
            // the server's --reclaim-min-runtime.)
            {"reclaimMinRuntimeSeconds", std::llround(admitter->reclaim_min_runtime(index))},
            // (Likewise its preemptMinRuntimeSeconds, else 0.)
            {"preemptMinRuntimeSeconds", std::llround(admitter->preempt_min_runtime(index))}};
        // (Three significant digits: rewritten when it moves visibly. None at weight 0: it has
        // no share of what lies past the guarantees.)
        if (admitter->weight(index) > 0)
          standing["weightedShare"] = SignificantDigits(admitter->weighted_share(index), 3);
        // The pods' CPU and memory, where a quota names them.
        for (int r = 0; r < 2; ++r) {
          if (!admitter->resource_limited(index, r)) continue;
          const double used = static_cast<double>(admitter->resource_usage(index, r));
          if (r == 0) cpu_used[label] = used / 1000.0;
          if (r == 1) memory_used[label] = used * 1024.0 * 1024.0;
          standing[ResourceName(r)] = {
              {"guaranteed", ResourceAmount(r, admitter->resource_guaranteed(index, r))},
              {"used", ResourceAmount(r, admitter->resource_usage(index, r))}};
        }
        // With flavours stored, the same per flavour that any queue has a quota in.
        if (!flavor_list.items.empty()) {
          json by_flavor = json::object();
          for (int f = 0; f < admitter->flavor_count(); ++f) {
            if (!admitter->flavor_managed(f)) continue;
            by_flavor[admitter->flavor_name(f)] = {
                {"guaranteedGpus", GpuAmount(admitter->flavor_guaranteed_milli(index, f))},
                {"usedGpus", GpuAmount(admitter->flavor_usage_milli(index, f))}};
            const std::string both =
                label + ",flavor=\"" + PromLabel(admitter->flavor_name(f)) + "\"";
            flavor_used[both] = static_cast<double>(admitter->flavor_usage_milli(index, f)) / 1000;
            flavor_guaranteed[both] =
                static_cast<double>(admitter->flavor_guaranteed_milli(index, f)) / 1000;
          }
          standing["flavors"] = std::move(by_flavor);
        }
        std::string warning;
        if (auto it = warnings.find(index); it != warnings.end()) warning = it->second;
        if (set_aside.count(admitter->queue_name(index)))
          warning += std::string(warning.empty() ? "" : "; ") +
                     "spec.preemption.borrowWithinCohort is set aside: with fair-share preemption "
                     "(the server's --fair-share-preemption) shares decide what is taken from "
                     "other queues";
        if (!warning.empty()) standing["warning"] = warning;
        // The reclaim hold: when it last reclaimed and what that freed beyond its need.
        const Admitter::ReclaimRecord reclaim = admitter->reclaim_record(index);
        if (reclaim.at >= 0 && options_.reclaim_hold_s > 0) {
          standing["lastReclaimTime"] = FormatTimestamp(std::llround(reclaim.at * 1000));
          standing["reclaimedRoomMilli"] = reclaim.room_milli;
        }
        json was = Field(q, "status");
        if (was.is_object()) was.erase("usageHistoryTime");
        // What the meter writes (its budget conditions and spending) is kept as it is: before,
        // the status was replaced whole, so each cycle dropped them and the meter put them back.
        for (const char* meters : {"conditions", "budget"})
          if (was.is_object() && was.contains(meters)) standing[meters] = was[meters];
        // Where only the drifting numbers moved (a decaying history, the share it weighs), by
        // less than a visible step, nothing is written: a watch of queues on an idle fleet heard
        // each queue every few seconds (a user-style review).
        bool moved = was != standing;
        // (The built-in's place follows the tree.)
        const bool respec = kv.key == kBuiltinQueueKey && Field(q, "spec") != builtin_spec;
        if (respec) q["spec"] = builtin_spec;
        if (moved && was.is_object()) {
          json a = was, b = standing;
          for (json* o : {&a, &b}) {
            o->erase("usageHistory");
            o->erase("weightedShare");
          }
          const json& h0 = Field(was, "usageHistory");
          const json& s0 = Field(was, "weightedShare");
          // (Both shares numbers: a queue given weight 0, or taken off it, has one on one side
          // only, and is written.)
          if (const json& s1 = Field(standing, "weightedShare");
              a == b && h0.is_number() && s0.is_number() && s1.is_number()) {
            const double share = s1.get<double>();
            const double step = std::max(0.001, 0.02 * std::max(share, s0.get<double>()));
            moved = std::abs(history - h0.get<double>()) >= 0.01 ||
                    std::abs(share - s0.get<double>()) >= step;
          }
        }
        if (moved || respec) {
          standing["usageHistoryTime"] = FormatTimestamp(now);
          q["status"] = std::move(standing);
          queue_writes.push_back({kv.key, q.dump(), kv.mod_revision});
        }
      }
      // Each flavour's reach: the fleet's GPUs it selects (Admitter::FlavorGpus).
      const std::vector<int> flavor_gpus =
          flavor_list.items.empty() ? std::vector<int>{} : admitter->FlavorGpus();
      for (const KeyValue& kv : flavor_list.items) {
        json f = json::parse(kv.value, nullptr, false);
        if (!f.is_object()) continue;
        const std::string name = Str(Field(f, "metadata"), "name");
        for (int index = 0; index < admitter->flavor_count(); ++index) {
          if (admitter->flavor_name(index) != name) continue;
          const json standing = {{"gpus", flavor_gpus[index]}};
          if (Field(f, "status") == standing) break;
          f["status"] = standing;
          queue_writes.push_back({kv.key, f.dump(), kv.mod_revision});
          break;
        }
      }
      for (const auto& [by, note] : called_off_of) called_off_[by] = {note, now};
      std::set<std::string> off_kept;  // (those still waiting without preempting)
      for (const auto& [id, i] : pending_of) {
        Decision& d = decisions[i];
        switch (admitter->phase(id)) {
          case Phase::kAdmitted:
            d.placed = admitter->assignments(id);
            d.charge_milli = admitter->gpu_milli(id);
            d.charge_queue = admitter->queue_name(admitter->queue_of(id));
            if (admitter->partially_admitted(id)) {
              d.counts = admitter->pod_counts(id);
              d.partial_why = admitter->partial_why(id);
            }
            break;
          case Phase::kInfeasible:
            d = Waits(admitter->reason(id), "Unschedulable");
            break;
          default: {
            const std::string& reason = admitter->reason(id);
            const bool preempting =
                reason.rfind("preempting", 0) == 0 || reason.rfind("consolidating", 0) == 0 ||
                reason.rfind("taking back", 0) == 0 || reason.rfind("holding the room", 0) == 0;
            // (Its eviction of another called off this cycle: said first, unless it found
            // another way to make room.)
            // (Or earlier, while it has not preempted since: said with when.)
            std::string off_note;
            const std::string key = KeyName(pending[i].obj());
            if (const auto off = called_off_of.find(key);
                off != called_off_of.end() && !preempting) {
              off_note = off->second + "; ";
            } else if (const auto was = called_off_.find(key);
                       was != called_off_.end() && !preempting) {
              off_note =
                  "at " + FormatTimestamp(was->second.at_ms) + ", " + was->second.note + "; ";
            }
            if (!preempting) off_kept.insert(key);
            d = Waits(off_note + reason + admitter->FairShareNote(id) +
                          (pending[i].w().preempts
                               ? ""
                               : "; its preemptionPolicy is Never: no work is evicted for it"),
                      preempting                             ? "Preempting"
                      : reason.rfind(kReservingRoom, 0) == 0 ? "Reserved"
                                                             : "Queued",
                      admitter->plan(id));
            if (admitter->partially_admitted(id)) d.nomination_counts = admitter->pod_counts(id);
            d.swap = admitter->swap(id);
            if (const double start = admitter->ExpectedStart(id, now_s);
                d.reason == "Reserved" && std::isfinite(start))
              d.expected_start_ms = std::llround(start * 1000.0);
            break;
          }
        }
      }
      std::erase_if(called_off_, [&](const auto& kv) { return !off_kept.count(kv.first); });
      for (int id : result.grown) {
        auto b = bound_of.find(id);
        if (b == bound_of.end()) continue;
        growths.push_back({b->second, admitter->assignments(id), admitter->pod_counts(id),
                           admitter->reason(id), admitter->gpu_milli(id),
                           admitter->queue_name(admitter->queue_of(id))});
      }
      for (const auto& [id, b] : bound_of)
        if (admitter->partially_admitted(id) && !admitter->growth_why(id).empty())
          bound[b].growth_why = admitter->growth_why(id);
      for (const Eviction& e : result.evicted) {
        auto p = pending_of.find(e.preemptor);
        // Elastic shrink: the pods the fragment took (the last of their sets then; pods are
        // named by their place in their set).
        if (const int parent = admitter->fragment_of(e.victim); parent >= 0) {
          auto b = bound_of.find(parent);
          if (b == bound_of.end() || p == pending_of.end()) continue;
          const StoredWorkload& sw = bound[b->second].sw;
          std::vector<std::string> pods;
          for (auto [set, k] : admitter->fragment_pods(e.victim))
            pods.push_back(sw.w().pod_sets[set].name + "-" + std::to_string(k));
          shrinks.push_back(
              {b->second, KeyName(pending[p->second].obj()), e.reason, pods, e.basis});
          continue;
        }
        auto b = bound_of.find(e.victim);
        if (b == bound_of.end()) continue;
        evictions.push_back({b->second,
                             p == pending_of.end() ? "" : KeyName(pending[p->second].obj()),
                             e.reason, e.basis});
      }
    }
  } else {
    // No queues: every pending workload in priority order, then oldest first. Work may not
    // land on cordoned or NotReady nodes: then placement is restricted to the usable ones.
    Placer placer(*policy);
    Placer quiet(*policy);  // (explains nothing: what fails is explained once, below)
    quiet.set_explain(false);
    Rng rng(static_cast<uint64_t>(now));
    for (size_t i = 0; i < pending.size(); ++i) {
      if (decided[i]) continue;
      StoredWorkload& sw = pending[i];
      // Naming a queue, it waits for it, as it would beside other queues (before, it ran at once
      // without its queue's limits, and was charged to unqueued once any queue existed).
      if (!sw.w().queue.empty() && sw.w().queue.str() != kUnqueuedQueue) {
        decisions[i] = Waits("workload " + sw.w().name.str() + ": unknown queue \"" +
                                 sw.w().queue.str() + "\"; it waits until the queue is created",
                             "QueueNotFound");
        continue;
      }
      // An elastic pod set starts with fewer pods through the queues alone: said, as a user
      // reading "minCount" expects it to start with that many (a trial).
      std::string elastic;
      for (const PodSet& ps : sw.w().pod_sets)
        if (ps.min_count > 0 && ps.min_count < ps.count && elastic.empty())
          elastic = "; pod set " + ps.name + "'s minCount (" + std::to_string(ps.min_count) +
                    " of " + std::to_string(ps.count) +
                    ") applies only where Queue objects exist: without them it waits to start "
                    "all its pods";
      // (Pods the fleet could never hold all of, even empty: Unschedulable, as with queues.)
      if (std::string why; sw.pods.size() > 1 && !FleetHoldsPods(state, sw.pods, &why)) {
        decisions[i] = Waits(why + elastic, "Unschedulable");
        continue;
      }
      // (Pods its required topology could never hold, even on an empty fleet: Unschedulable,
      // by the models its pods may use, as with queues; a trial's H100 gang needing one NVLink
      // domain of 16 GPUs waited for ever because a GB200 domain had 16.)
      if (std::string why; (sw.w().gang || sw.pods.size() > 1) &&
                           !SomeDomainHolds(state, sw.pods, sw.w().topology, &why)) {
        decisions[i] = Waits(TogetherSaid(sw.w().gang, why) + elastic, "Unschedulable");
        continue;
      }
      // (A tier's failure is not told: only the last attempt's, over every node it may use.)
      // Where some nodes take no new work, on the others alone, its topology kept (a trial's
      // gang that required one leaf was spread over two while one unrelated node was cordoned).
      const bool all_usable = usable_nodes.size() == static_cast<size_t>(state.node_count());
      GangPlacement g;
      const auto attempt = [&](const std::vector<PodRequest>& pods,
                               const TopologyConstraint& topology, bool explain) {
        g = (explain ? placer : quiet)
                .PlaceGang(state, pods, topology, rng, all_usable ? nullptr : &usable_nodes);
        return g.outcome == Outcome::kPlaced;
      };
      PlacePreferring(sw.pods, sw.w().topology, attempt);
      if (g.outcome == Outcome::kPlaced) {
        decisions[i].placed = std::move(g.pods);
      } else {
        decisions[i] =
            Waits(TogetherSaid(sw.w().gang, g.reason) + elastic,
                  g.outcome == Outcome::kInfeasible ? "Unschedulable" : "InsufficientCapacity");
      }
    }
  }

  // The cycle's decisions are written together, so that the store's group commit makes them
  // durable with one sync; each write is conditional on the revision read and fails alone.
  std::vector<Store::Write> writes = std::move(queue_writes);
  std::vector<std::function<void()>> on_written(writes.size());
  auto write = [&](const KeyValue& kv, const json& next, std::function<void()> done) {
    writes.push_back({kv.key, next.dump(), kv.mod_revision});
    on_written.push_back(std::move(done));
  };

  // Victims: marked with who preempts them and when they stop; they keep running until then.
  for (const Victim& v : evictions) {
    const StoredWorkload& sw = bound[v.bound].sw;
    const std::string& why = v.why;
    json next = bound[v.bound].obj();
    const std::string deadline = FormatTimestamp(now + options_.preemption_grace_ms);
    next["status"]["preemption"] = {{"by", v.by}, {"reason", why}, {"deadline", deadline}};
    // (Re-checked every cycle while it stops: the preemptor must still outrank it, or its
    // queue still be within its guarantee with it.)
    if (v.basis != Eviction::Basis::kOther)
      next["status"]["preemption"]["basis"] = v.basis == Eviction::Basis::kPriority ? "Priority"
                                              : v.basis == Eviction::Basis::kMove   ? "Move"
                                                                                    : "Reclaim";
    next["status"]["message"] = why + "; stops at " + deadline;  // (not "running on ...")
    json conditions = json::array();
    for (const json& c : List(Field(sw.obj(), "status"), "conditions"))
      if (Str(c, "type") != "Preempted") conditions.push_back(c);
    conditions.push_back({{"type", "Preempted"},
                          {"status", "True"},
                          {"reason", "Preempted"},
                          {"message", why + "; stops at " + deadline},
                          {"lastTransitionTime", FormatTimestamp(now)}});
    next["status"]["conditions"] = conditions;
    write(sw.kv, next, [&stats] { ++stats.preempted; });
  }
  // Shrunk: the pods taken are marked with who takes them and when they stop (the grace
  // period); they keep running until then.
  // (A workload shrunk more than once in the cycle gets its marks in one write, in the order
  // made: each later one takes the pods before the earlier one's.)
  std::map<size_t, std::vector<const ShrinkMark*>> marks_of;
  for (const ShrinkMark& m : shrinks) marks_of[m.bound].push_back(&m);
  for (const auto& [b, made] : marks_of) {
    const StoredWorkload& sw = bound[b].sw;
    json next = bound[b].obj();
    const std::string deadline = FormatTimestamp(now + options_.preemption_grace_ms);
    // (After the marks whose pods still stop: the oldest first.)
    json marks = bound[b].marks.is_array() ? bound[b].marks : json::array();
    std::string message;
    for (const ShrinkMark* m : made) {
      marks.push_back(
          {{"by", m->by}, {"reason", m->why}, {"deadline", deadline}, {"pods", m->pods}});
      // (Re-checked every cycle while its pods stop, as a whole victim's mark.)
      if (m->basis != Eviction::Basis::kOther)
        marks.back()["basis"] = m->basis == Eviction::Basis::kPriority ? "Priority" : "Reclaim";
      std::string names;
      for (const std::string& pod : m->pods) names += (names.empty() ? "" : ", ") + pod;
      message += (message.empty() ? "" : "; ") + m->why + "; pod(s) " + names;
    }
    next["status"]["shrinks"] = marks;
    next["status"].erase("shrink");  // (the earlier build's one mark: now in marks)
    next["status"]["message"] = message + " stop at " + deadline;
    const int n = static_cast<int>(made.size());
    write(sw.kv, next, [&stats, n] { stats.shrinks += n; });
  }
  // Grown: its pods as placed now (those running keep their names and places), and when it
  // grew (metering bills the new size from then).
  for (const Growth& g : growths) {
    const StoredWorkload& sw = bound[g.bound].sw;
    json next = bound[g.bound].obj();
    next["status"]["assignments"] = AssignmentsJson(sw.w(), g.placed, state, g.counts);
    // (Once every pod runs it is a whole workload again: no admittedCounts.)
    bool whole = g.counts.size() == sw.w().pod_sets.size();
    for (size_t i = 0; whole && i < g.counts.size(); ++i)
      whole = g.counts[i] == sw.w().pod_sets[i].count;
    if (whole) {
      next["status"].erase("admittedCounts");
    } else {
      next["status"]["admittedCounts"] = g.counts;
    }
    next["status"]["resizedTime"] = FormatTimestamp(now);
    next["status"]["message"] = g.message;
    // (Its Scheduled condition said how many pods it was admitted with: a trial read "admitted
    // 4 of 8 pods" of a workload grown to 8. Still True: its time stays.)
    if (next["status"]["conditions"].is_array())
      for (json& c : next["status"]["conditions"])
        if (Str(c, "type") == "Scheduled" && c.contains("message")) c["message"] = g.message;
    next["status"].erase("growthBlocked");
    if (g.charge_milli >= 0)
      next["status"]["resourceUsage"] =
          ResourceUsage(g.charge_milli, g.charge_queue, Field(sw.obj(), "status"), now);
    next["status"].erase("growthRetryTime");
    // Its new pods are waited for: the pods running now are the started ones, where its
    // nodes do not report pods (AllPodsStarted).
    if (!Field(Field(sw.obj(), "status"), "startedPods").is_object()) {
      json started = json::object();
      for (const json& a : List(Field(sw.obj(), "status"), "assignments"))
        started[Str(a, "pod", "0")] = Str(Field(sw.obj(), "status"), "startTime");
      next["status"]["startedPods"] = started;
    }
    double added = 0;  // GPUs of the new pods: all it holds now, less what it held
    for (int sign : {1, -1})
      for (const Assignment& a : sign > 0 ? g.placed : bound[g.bound].assign)
        for (const DeviceShare& d : a.devices)
          added += sign * static_cast<double>(d.milli) / 1000.0;
    write(sw.kv, next, [&stats, &allocated_by_tenant, &sw, added] {
      ++stats.grown;
      allocated_by_tenant[sw.w().tenant.str()] += added;
    });
  }

  for (size_t i = 0; i < pending.size(); ++i) {
    StoredWorkload& sw = pending[i];
    const Decision& d = decisions[i];
    const json& status = Field(sw.obj(), "status");
    json next = sw.obj();
    // (A workload created after this cycle read the clock is decided no earlier than it was
    // created.)
    const std::string at = FormatTimestamp(
        std::max(now, ParseTimestamp(Str(Field(sw.obj(), "metadata"), "creationTimestamp"))));
    if (!d.placed.empty()) {
      // Per pod set, the pods admitted; with pods completed before, those of the others (the
      // sets that had any left, as admitted).
      std::vector<int> counts = d.counts;
      std::vector<int> admitted = d.counts;  // ... and with the completed ones (admittedCounts)
      int done = 0;
      if (!sw.done.empty()) {
        counts.clear();
        admitted.clear();
        bool all = true;
        for (size_t set = 0, kept = 0; set < sw.w().pod_sets.size(); ++set) {
          const int count = sw.w().pod_sets[set].count;
          const int completed = static_cast<int>(sw.done[set].size());
          const int left = count - completed;
          const int runs = left <= 0 ? 0 : (d.counts.empty() ? left : d.counts[kept++]);
          counts.push_back(runs);
          admitted.push_back(runs + completed);
          all = all && runs + completed == count;
          done += completed;
        }
        if (all) admitted.clear();
      }
      const json assignments =
          KeepNominatedNodes(AssignmentsJson(sw.w(), d.placed, state, counts, sw.done, true),
                             List(Field(sw.obj(), "status"), "nomination"));
      // Its GPU pods' isolation, each kind once in pod-set order ("no GPU" only where no pod
      // has one: a trial saw a launcher without GPUs label a gang of 20 GPUs so).
      // Who may share its GPU follows its tenant's trust (DESIGN.md's table; a trial read
      // "within one trust domain" on an untrusted tenant's share, whose GPU is its alone).
      std::string isolation;
      for (const PodRequest& pod : sw.pods) {
        const Tenant* tenant = pod.tenant >= 0 ? &state.tenant(pod.tenant) : nullptr;
        const TrustLevel trust = tenant ? tenant->trust : TrustLevel::kStandard;
        std::string kind;
        if (pod.kind == DeviceKind::kWhole) {
          kind = "whole GPUs";
        } else if (pod.kind == DeviceKind::kMig) {
          kind = trust == TrustLevel::kUntrusted
                     ? "MIG slice, its GPU closed to other tenants (untrusted)"
                     : "MIG slice";
        } else if (pod.kind == DeviceKind::kFraction) {
          kind =
              trust == TrustLevel::kUntrusted
                  ? "fractional share, its GPU closed to other tenants (untrusted)"
              : trust == TrustLevel::kTrusted
                  ? "fractional share within trust domain " +
                        (tenant->trust_domain.empty() ? tenant->name.str() : tenant->trust_domain)
                  : "fractional share with its own tenant's pods only";
        }
        if (!kind.empty() && isolation.find(kind) == std::string::npos)
          isolation += (isolation.empty() ? "" : "; ") + kind;
      }
      if (isolation.empty()) isolation = "no GPU";
      next["status"] = {
          {"phase", "Scheduled"},
          {"assignments", assignments},
          {"isolation", isolation},
          {"scheduledTime", at},
          {"conditions",
           {{{"type", "Scheduled"}, {"status", "True"}, {"lastTransitionTime", at}}}}};
      // Its GPUs as placed.
      double gpus = 0;
      for (const Assignment& a : d.placed)
        for (const DeviceShare& ds : a.devices) gpus += static_cast<double>(ds.milli) / 1000.0;
      if (const json kept = RequeueStateKept(sw); !kept.is_null())
        next["status"]["requeueState"] = kept;
      KeepFinished(sw.w(), status, next["status"]);
      if (!admitted.empty()) next["status"]["admittedCounts"] = admitted;
      if (d.charge_milli >= 0)
        next["status"]["resourceUsage"] = ResourceUsage(d.charge_milli, d.charge_queue);
      const std::string earlier =
          done > 0 ? std::to_string(done) + " completed before it was requeued" : "";
      if (!d.counts.empty()) {
        next["status"]["message"] =
            "admitted " + std::to_string(d.placed.size()) + " of " +
            std::to_string(sw.pods.size()) + " pods (partial admission: " +
            (d.partial_why.empty() ? "not all of them fit now" : d.partial_why) +
            (earlier.empty() ? "" : "; " + earlier) + ")";
      } else if (done > 0) {
        next["status"]["message"] =
            d.placed.size() == 1 ? "admitted its pod that has not completed (" + earlier + ")"
                                 : "admitted its " + std::to_string(d.placed.size()) +
                                       " pods that have not completed (" + earlier + ")";
      }
      // (Kept in its Scheduled condition once its nodes report it running.)
      if (next["status"].contains("message"))
        next["status"]["conditions"][0]["message"] = next["status"]["message"];
      write(sw.kv, next, [&stats, &allocated_by_tenant, &sw, gpus] {
        ++stats.scheduled;
        allocated_by_tenant[sw.w().tenant.str()] += gpus;
      });
      continue;
    }
    ++stats.pending;
    // By the queue it waits in (its tenant's leaf or unqueued when it names none).
    const std::string waits_in =
        with_queues ? WaitingQueue(leaves, sw.w().queue.str(), sw.w().tenant.str())
                    : (sw.w().queue.empty() ? sw.w().tenant.str() : sw.w().queue.str());
    // (Not inactive work, which no queue holds: the queues' pendingWorkloads and the pending
    // list leave it out, and a trial's dashboard disagreed with them.)
    if (sw.w().active) pending_by_queue["queue=\"" + PromLabel(waits_in) + "\""] += 1;
    // Naming no queue, it waits in its tenant's; where that queue has children of its own, in
    // `unqueued`, which it says.
    std::string message = d.message;
    if (with_queues && sw.w().queue.empty() && waits_in == kUnqueuedQueue &&
        queue_specs.count(sw.w().tenant.str()))
      message = "waits in queue " + std::string(kUnqueuedQueue) + ": queue " + sw.w().tenant.str() +
                " has child queues (name one in spec.queue); " + message;
    // A preemptor keeps its planned place in status.nomination while its victims stop, so the
    // next cycle's Admitter holds that room for it.
    // (Nominated for fewer pods than all, none completed: as many, and status.nominatedCounts.)
    const bool cut = !d.nomination_counts.empty() && sw.done.empty();
    const size_t planned =
        cut ? std::accumulate(d.nomination_counts.begin(), d.nomination_counts.end(), size_t{0})
            : sw.pods.size();
    json nomination = d.nomination.size() == planned && !d.nomination.empty()
                          ? AssignmentsJson(sw.w(), d.nomination, state,
                                            cut ? d.nomination_counts : std::vector<int>{}, sw.done)
                          : json();
    const json nominated_counts = cut && !nomination.is_null() ? json(d.nomination_counts) : json();
    // (And its swap while it waits for victims, planned place or not.)
    json swap;
    if ((!nomination.is_null() || d.reason == "Preempting") && d.swap) {
      swap = {{"flavor", d.swap->first}, {"ceilingMilli", d.swap->second}};
      if (d.swap->held) swap["held"] = true;
    }
    const json requeue_state = RequeueStateKept(sw);
    // Reserving room: when it frees by the time limits of the work there (Slurm's start
    // estimate of a pending job).
    const json expected =
        d.expected_start_ms >= 0 ? json(FormatTimestamp(d.expected_start_ms)) : json();
    if (Str(status, "message") != message || Str(status, "reason") != d.reason ||
        Field(status, "nomination") != nomination ||
        Field(status, "nominatedCounts") != nominated_counts || Field(status, "swap") != swap ||
        Field(status, "requeueState") != requeue_state ||
        Field(status, "expectedStartTime") != expected) {
      next["status"] = {{"phase", "Pending"},
                        {"message", message},
                        {"reason", d.reason},
                        {"conditions",
                         {{{"type", "Scheduled"},
                           {"status", "False"},
                           {"reason", d.reason},
                           {"message", message},
                           {"lastTransitionTime", at}}}}};
      if (!nomination.is_null()) next["status"]["nomination"] = std::move(nomination);
      if (!nominated_counts.is_null()) next["status"]["nominatedCounts"] = nominated_counts;
      if (!swap.is_null()) next["status"]["swap"] = swap;
      if (!requeue_state.is_null()) next["status"]["requeueState"] = requeue_state;
      if (!expected.is_null()) next["status"]["expectedStartTime"] = expected;
      KeepFinished(sw.w(), status, next["status"]);
      write(sw.kv, next, nullptr);
    }
  }
  // Running work whose charge changed (first seen by this build, a shrink done, a growth
  // undone, a queue gone): status.resourceUsage follows; and bound work whose pods have not all
  // started says which it waits for (PodsStartingMessage). Where nothing else writes it now.
  {
    std::set<std::string> keys;
    for (const Store::Write& w : writes) keys.insert(w.key);
    for (const BoundWorkload& b : bound) {
      if (keys.count(b.sw.kv.key)) continue;
      const json& status = Field(b.obj(), "status");
      json usage;
      if (b.charge_milli >= 0) {
        usage = ResourceUsage(b.charge_milli, b.charge_queue, status, now);
        if (Field(status, "resourceUsage") == usage) usage = json();
      }
      std::string message;
      if (!b.evicting && b.marks.is_null()) {
        message = PodsStartingMessage(status, options_.gang_timeout_s, now);
        if (Str(status, "message") == message) message.clear();
      }
      // (Why an elastic workload running in part grows not, as it changes; gone once whole.)
      // (A reason not known this cycle leaves the one said; a whole workload has none. A
      // reason kept while a whole workload's shrink stops is not taken away each other cycle.)
      const bool say = !b.growth_why.empty() && Str(status, "growthBlocked") != b.growth_why;
      const bool unsay = b.growth_why.empty() && status.contains("growthBlocked") &&
                         !status.contains("admittedCounts");
      if (usage.is_null() && message.empty() && !say && !unsay)
        continue;  // (no copy of each one, each cycle)
      json next = b.obj();
      if (!usage.is_null()) next["status"]["resourceUsage"] = std::move(usage);
      if (!message.empty()) next["status"]["message"] = message;
      if (say) next["status"]["growthBlocked"] = b.growth_why;
      if (unsay) next["status"].erase("growthBlocked");
      write(b.sw.kv, next, nullptr);
    }
  }
  std::vector<Result<int64_t>> written = store_.PutAll(writes);
  for (size_t i = 0; i < written.size(); ++i) {
    if (written[i].ok() && on_written[i]) on_written[i]();
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (metrics_) {
    metrics_->SetGauge("fabrica_scheduler_cycle_seconds", "Duration of the last scheduling cycle.",
                       "", stats.seconds);
    // Every leaf queue has its series, 0 while nothing waits in it (a trial found a queue's
    // series missing until work waited, which alerts and rates read as "no data").
    for (const std::string& leaf : leaves)
      pending_by_queue.emplace("queue=\"" + PromLabel(leaf) + "\"", 0);
    metrics_->ReplaceGauge("fabrica_pending_workloads",
                           "Pending workloads by the leaf queue they wait in.", pending_by_queue);
    std::map<std::string, double> by_tenant;
    for (const auto& [t, g] : allocated_by_tenant) by_tenant["tenant=\"" + PromLabel(t) + "\""] = g;
    metrics_->ReplaceGauge("fabrica_gpus_allocated", "GPUs allocated by tenant.", by_tenant);
    metrics_->ReplaceGauge("fabrica_queue_used_gpus",
                           "GPUs held by each queue's subtree (admission through queues).",
                           queue_used);
    metrics_->ReplaceGauge("fabrica_queue_guaranteed_gpus", "GPUs guaranteed to each queue.",
                           queue_guaranteed);
    metrics_->ReplaceGauge("fabrica_queue_flavor_used_gpus",
                           "GPUs of each ResourceFlavor held by each queue's subtree.",
                           flavor_used);
    metrics_->ReplaceGauge("fabrica_queue_flavor_guaranteed_gpus",
                           "GPUs of each ResourceFlavor guaranteed to each queue.",
                           flavor_guaranteed);
    metrics_->ReplaceGauge("fabrica_queue_used_cpu_cores",
                           "CPU cores held by each queue's subtree, where a quota limits CPU.",
                           cpu_used);
    metrics_->ReplaceGauge("fabrica_queue_used_memory_bytes",
                           "Memory held by each queue's subtree, where a quota limits memory.",
                           memory_used);
    metrics_->SetGauge("fabrica_scheduler_preemptions",
                       "Workloads chosen for eviction (preemption, reclaim, consolidation) in the "
                       "last cycle.",
                       "", stats.preempted);
    metrics_->SetGauge("fabrica_scheduler_elastic_growths",
                       "Running workloads admitted in part that took more pods in the last cycle.",
                       "", stats.grown);
    metrics_->SetGauge("fabrica_scheduler_elastic_shrinks",
                       "Running elastic workloads whose pods beyond their minimum a preemption or "
                       "reclaim took in the last cycle (they run on with the rest).",
                       "", stats.shrinks);
    metrics_->SetGauge("fabrica_scheduler_elastic_growths_undone",
                       "Grown workloads whose new pods did not start within the gang timeout, "
                       "taken back to the pods that did, in the last cycle.",
                       "", stats.growths_undone);
    // The same as counters, which a scrape every 15 s does not miss (the gauges above read 0
    // at almost every scrape: a trial), as Kueue's *_total.
    metrics_->AddCounter("fabrica_scheduler_admissions_total",
                         "Workloads the scheduler bound to nodes.", "", stats.scheduled);
    metrics_->AddCounter("fabrica_scheduler_preemptions_total",
                         "Workloads chosen for eviction (preemption, reclaim, consolidation).", "",
                         stats.preempted);
    metrics_->AddCounter("fabrica_scheduler_elastic_growths_total",
                         "Running workloads admitted in part that took more pods.", "",
                         stats.grown);
    metrics_->AddCounter("fabrica_scheduler_elastic_shrinks_total",
                         "Running elastic workloads whose pods beyond their minimum a preemption "
                         "or reclaim took.",
                         "", stats.shrinks);
    metrics_->AddCounter("fabrica_scheduler_requeued_total",
                         "Workloads the scheduler put back to wait (evicted by a preemption or "
                         "an admin's drain, released by the gang timeout, their node lost); those "
                         "the health controller evicts are "
                         "fabrica_workloads_requeued_by_health_total.",
                         "", stats.requeued);
  }
  return stats;
}

}  // namespace fabrica
