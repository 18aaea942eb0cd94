#include "sim/replay.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <set>

#include "core/yaml_reader.h"
#include "sched/frag.h"
#include "sched/placer.h"
#include "sched/queue_objects.h"
#include "sim/openb.h"
#include "sim/synthetic.h"

namespace fabrica::sim {
namespace {

// "4-16" or "8": an inclusive range of numbers.
Result<std::pair<double, double>> ParseRange(YamlMap& m, const std::string& key, double lo_default,
                                             double hi_default) {
  if (!m.Has(key)) return std::pair<double, double>{lo_default, hi_default};
  ASSIGN_OR_RETURN(std::string s, m.String(key));
  auto num = [&](const std::string& t) -> Result<double> {
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v) || v < 0)
      return m.Error(key, "expected a number or a range like 4-16, got '" + s + "'");
    return v;
  };
  size_t dash = s.find('-', 1);
  if (dash == std::string::npos) {
    ASSIGN_OR_RETURN(double v, num(s));
    return std::pair<double, double>{v, v};
  }
  ASSIGN_OR_RETURN(double a, num(s.substr(0, dash)));
  ASSIGN_OR_RETURN(double b, num(s.substr(dash + 1)));
  if (b < a) return m.Error(key, "range '" + s + "' ends below its start");
  return std::pair<double, double>{a, b};
}

Result<TeamSpec::Template> ParseTemplate(YamlMap& m) {
  RETURN_IF_ERROR(m.CheckIsMap());
  TeamSpec::Template t;
  ASSIGN_OR_RETURN(t.weight, m.Double("weight", 1.0));
  ASSIGN_OR_RETURN(auto pods, ParseRange(m, "pods", 1, 1));
  if (pods.first < 1 || pods.second > 10000) return m.Error("pods", "must be between 1 and 10000");
  if (pods.first != std::floor(pods.first) || pods.second != std::floor(pods.second))
    return m.Error("pods", "a count of pods is a whole number, as 1-4");
  t.pods_min = static_cast<int>(pods.first);
  t.pods_max = static_cast<int>(pods.second);
  if (m.Has("minPods")) {
    ASSIGN_OR_RETURN(int64_t least, m.Int("minPods"));
    if (least < 1 || least > t.pods_max)
      return m.Error("minPods",
                     "must be between 1 and the most pods (" + std::to_string(t.pods_max) + ")");
    t.min_pods = static_cast<int>(least);
  }
  ASSIGN_OR_RETURN(t.pod.cpu, m.Cpu("cpu", MilliCpu(1000)));
  ASSIGN_OR_RETURN(t.pod.memory, m.Memory("memory", MemoryMib(4096)));
  if (m.Has("devices")) {
    YamlMap dm = m.Child("devices");
    RETURN_IF_ERROR(dm.CheckIsMap());
    ASSIGN_OR_RETURN(t.pod.device, ParseDeviceRequest(dm));
  }
  ASSIGN_OR_RETURN(t.gang, m.Bool("gang", false));
  if (m.Has("topology")) {
    YamlMap tm = m.Child("topology");
    ASSIGN_OR_RETURN(t.topology, ParseTopologyConstraint(tm));
  }
  ASSIGN_OR_RETURN(auto dur, ParseRange(m, "duration", 60, 3600));
  if (dur.first <= 0) return m.Error("duration", "must be positive");
  t.duration_min_s = dur.first;
  t.duration_max_s = dur.second;
  if (m.Has("priority")) {
    ASSIGN_OR_RETURN(int p, m.Priority("priority"));
    t.priority = p;
  }
  if (m.Has("minRuntime")) {
    ASSIGN_OR_RETURN(double r, m.Double("minRuntime"));
    t.min_runtime_s = r;
  }
  if (m.Has("checkpointInterval")) {
    ASSIGN_OR_RETURN(double c, m.Double("checkpointInterval"));
    if (c > 0 && c < 1) return m.Error("checkpointInterval", "must be 0 (never) or at least 1 s");
    t.checkpoint_interval_s = c;
  }
  ASSIGN_OR_RETURN(t.preemptible, m.Bool("preemptible", true));
  RETURN_IF_ERROR(m.Finish());
  return t;
}

Result<TeamSpec> ParseTeam(YamlMap& m, bool synthetic) {
  RETURN_IF_ERROR(m.CheckIsMap());
  TeamSpec t;
  ASSIGN_OR_RETURN(t.name, m.String("name"));
  if (Status s = ValidateName(t.name); !s.ok()) return m.Error("name", s.message());
  ASSIGN_OR_RETURN(t.queue, m.String("queue", t.name));
  ASSIGN_OR_RETURN(t.share, m.Double("share"));
  ASSIGN_OR_RETURN(std::string trust, m.String("trust", "standard"));
  auto level = ParseTrustLevel(trust);
  if (!level.ok()) return m.Error("trust", level.status().message());
  t.trust = *level;
  // (Only trusted teams share a GPU by domain: on another, a domain would be read as sharing
  // that never happens.)
  if (m.Has("trustDomain") && t.trust != TrustLevel::kTrusted &&
      m.Raw("trustDomain").Scalar() != t.name)
    return m.Error("trustDomain",
                   "only a trusted team shares GPUs by trust domain (this one is " + trust + ")");
  ASSIGN_OR_RETURN(t.trust_domain, m.String("trustDomain", t.name));
  if (m.Has("weight")) {
    ASSIGN_OR_RETURN(t.weight, m.Double("weight"));
    // (A queue of weight 0, which takes no part of what lies past the guarantees, is written
    // under admission.queues: here the weight is also the team's part of the fair share the
    // Jain index measures against, and 0 would leave it none.)
    if (t.weight <= 0)
      return m.Error("weight",
                     "must be positive (the team's part of the fair share); a queue of weight 0 "
                     "is given under admission.queues");
  }
  ASSIGN_OR_RETURN(t.priority, m.Priority("priority", 0));
  ASSIGN_OR_RETURN(t.min_runtime_s, m.Double("minRuntime", 0.0));
  ASSIGN_OR_RETURN(t.checkpoint_interval_s, m.Double("checkpointInterval", 0.0));
  if (t.checkpoint_interval_s > 0 && t.checkpoint_interval_s < 1)
    return m.Error("checkpointInterval", "must be 0 (never) or at least 1 s");
  if (m.Has("disruptionBudget")) {
    ASSIGN_OR_RETURN(int64_t b, m.Int("disruptionBudget"));
    // (Checked here, before it is narrowed: 2^32 would otherwise read as 0.)
    if (b > 1'000'000) return m.Error("disruptionBudget", "must be at most 1000000");
    t.disruption_budget = static_cast<int>(b);
  }
  QueueSpec policies;
  RETURN_IF_ERROR(ParseQueuePolicies(m, &policies));
  t.strict_fifo = policies.strict_fifo;
  t.preemption = policies.preemption;
  t.when_can_borrow = policies.when_can_borrow;
  t.reclaim_min_runtime_s = policies.reclaim_min_runtime_s;
  for (auto [key, field] : {std::pair{"guarantee", &t.guarantee_milli},
                            std::pair{"borrowingLimit", &t.borrowing_limit_milli},
                            std::pair{"lendingLimit", &t.lending_limit_milli}}) {
    if (!m.Has(key)) continue;
    ASSIGN_OR_RETURN(MilliGpu g, m.Gpu(key));
    *field = g.value();
  }
  if (synthetic) {
    ASSIGN_OR_RETURN(auto active, ParseRange(m, "active", 0, 1));
    if (active.second > 1 || active.second <= active.first)
      return m.Error("active", "expected a range of window fractions like 0-0.5");
    t.active_from = active.first;
    t.active_to = active.second;
    Doc ws = m.Raw("workloads");
    if (!ws || !ws.IsSequence() || ws.size() == 0)
      return m.Error("workloads", "a synthetic team needs a non-empty list of workload templates");
    for (size_t i = 0; i < ws.size(); ++i) {
      YamlMap wm = m.Child(ws[i], m.Path("workloads") + "[" + std::to_string(i) + "]");
      ASSIGN_OR_RETURN(TeamSpec::Template tpl, ParseTemplate(wm));
      t.templates.push_back(std::move(tpl));
    }
    // The team's share of the load is GPU time: a template drawn must ask for some, or the
    // draw never reaches it (a trial's CPU-only team ran the replay out of memory).
    double weights = 0;
    bool gpu = false;
    for (const TeamSpec::Template& tpl : t.templates) {
      weights += tpl.weight;
      gpu |= tpl.weight > 0 && tpl.pod.device.kind != DeviceKind::kNone;
    }
    if (weights <= 0)
      return m.Error("workloads", "the templates' weights add up to 0: give one a positive weight");
    if (!gpu && t.share > 0)
      return m.Error("workloads",
                     "no template (of positive weight) asks for a GPU (devices: gpus, gpuMilli, "
                     "gpuMemory or mig): the team's share is of the load in GPU time");
  }
  RETURN_IF_ERROR(m.Finish());
  return t;
}

// What one pod of `d` asks of GPU compute: a share of GPU memory alone, the compute its memory
// is of a GPU of `gpu_memory` MiB (Scenario::mean_gpu_memory_mib).
double PodMilli(const DeviceRequest& d, double gpu_memory) {
  const double milli = static_cast<double>(d.TotalMilli().value());
  if (milli > 0 || d.kind != DeviceKind::kFraction || gpu_memory <= 0) return milli;
  return std::min<double>(
      kMilliPerGpu,
      std::ceil(kMilliPerGpu * static_cast<double>(d.gpu_memory.value()) / gpu_memory));
}
double WorkloadMilli(const Workload& w, double gpu_memory) {
  double m = 0;
  for (const PodSet& ps : w.pod_sets) m += PodMilli(ps.device, gpu_memory) * ps.count;
  return m;
}
// ... once placed: a share of memory alone, what its GPU charges it.
double PlacedPodMilli(const DeviceRequest& d, const Assignment& a) {
  if (d.kind != DeviceKind::kFraction || d.TotalMilli().value() > 0)
    return static_cast<double>(d.TotalMilli().value());
  double milli = 0;
  for (const DeviceShare& share : a.devices) milli += static_cast<double>(share.milli);
  return milli;
}
double MeanGpuMemory(const Fleet& fleet) {
  double memory = 0;
  for (const Node& n : fleet.nodes)
    for (const Device& d : n.devices) memory += static_cast<double>(d.memory.value());
  return memory / static_cast<double>(std::max<int64_t>(1, fleet.total_gpus()));
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;  // (FNV-1a 64's offset basis)
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Workloads of the openb trace: one pod each, the team by name hash.
Status BuildOpenb(Scenario& sc, const std::string& nodes_path, const std::string& pods_path,
                  int team_block) {
  ASSIGN_OR_RETURN(std::string nodes_text, ReadFile(nodes_path));
  ASSIGN_OR_RETURN(std::string pods_text, ReadFile(pods_path));
  ASSIGN_OR_RETURN(sc.fleet, ParseOpenbNodes(nodes_text, nodes_path));
  sc.mean_gpu_memory_mib = MeanGpuMemory(sc.fleet);
  ASSIGN_OR_RETURN(std::vector<TracePod> pods, ParseOpenbPods(pods_text, pods_path));
  for (const TracePod& p : pods) {
    // (Pods that ran for no time are counted apart: a trial's read as never started.)
    if (p.scheduled_s >= 0 && p.creation_s >= 0 && p.deletion_s <= p.scheduled_s) {
      ++sc.left_out_zero;
      continue;
    }
    if (p.scheduled_s < 0 || p.creation_s < 0) {
      ++sc.left_out;
      continue;
    }
    ReplayWorkload w;
    w.team = TeamOfPod(p.name, sc.teams, team_block);
    const TeamSpec& team = sc.teams[w.team];
    w.spec.name = WorkloadId(p.name);
    w.spec.tenant = TenantId(team.name);
    w.spec.queue = QueueId(team.name);
    w.spec.priority = team.priority;
    PodSet ps;
    ps.name = "main";
    ps.cpu = MilliCpu(p.cpu_milli);
    ps.memory = MemoryMib(p.memory_mib);
    if (p.num_gpu > 0) {
      auto dev = DeviceRequestFromTrace(p.num_gpu, p.gpu_milli, p.gpu_spec);
      if (!dev.ok())
        return InvalidArgument(pods_path + ":" + std::to_string(p.line) + ": " +
                               dev.status().message());
      ps.device = *dev;
    }
    w.spec.pod_sets = {ps};
    w.arrival_s = static_cast<double>(p.creation_s);
    w.duration_s = static_cast<double>(p.deletion_s - p.scheduled_s);
    w.options.min_runtime_s = team.min_runtime_s;
    w.options.checkpoint_interval_s = team.checkpoint_interval_s;
    sc.workloads.push_back(std::move(w));
  }
  return Status();
}

struct SyntheticSource {
  SyntheticFleetOptions fleet;
  uint64_t seed = 1;
  double window_s = 86400;
};

// Each team's templates drawn until its requested GPU-seconds reach its share of
// load x capacity x window; arrivals uniform over the window.
Status BuildSynthetic(Scenario& sc, const SyntheticSource& src) {
  ASSIGN_OR_RETURN(sc.fleet, MakeSyntheticFleet(src.fleet));
  const double cap = static_cast<double>(sc.fleet.total_gpus()) * kMilliPerGpu;
  // A share of GPU memory alone is charged, where it lands, the compute its memory is of that
  // GPU's: toward the load it counts that of the fleet's mean GPU.
  sc.mean_gpu_memory_mib = MeanGpuMemory(sc.fleet);
  const auto load_milli = [&](const DeviceRequest& d) {
    return PodMilli(d, sc.mean_gpu_memory_mib);
  };
  // (A window or load that would take more workloads than a replay can hold is said, not run
  // until memory runs out.)
  constexpr size_t kMaxWorkloads = 5'000'000;
  Rng rng(src.seed);
  int serial = 0;
  for (size_t ti = 0; ti < sc.teams.size(); ++ti) {
    const TeamSpec& team = sc.teams[ti];
    double target = team.share / 100.0 * sc.load * cap * src.window_s;
    double total_weight = 0;
    for (const auto& t : team.templates) total_weight += t.weight;
    // What one draw asks for on average (its durations log-uniform): a team that would need more
    // draws than a replay holds is refused before it draws them.
    double per_draw = 0;
    for (const auto& t : team.templates) {
      const double lo = t.duration_min_s, hi = t.duration_max_s;
      const double duration = hi > lo && lo > 0 ? (hi - lo) / std::log(hi / lo) : lo;
      per_draw += t.weight / total_weight * load_milli(t.pod.device) * (t.pods_min + t.pods_max) /
                  2.0 * std::min(duration, src.window_s);
    }
    if (target > 0 && (per_draw <= 0 || target / per_draw > static_cast<double>(kMaxWorkloads)))
      return InvalidArgument(
          sc.source + ": synthetic: more than " + std::to_string(kMaxWorkloads) +
          " workloads (team " + team.name + " would need about " +
          std::to_string(static_cast<int64_t>(per_draw > 0 ? target / per_draw : 1e18)) +
          " to reach its share of the load): shorten synthetic.window or "
          "lower the load or the fleet's GPUs");
    double acc = 0;
    while (acc < target) {
      double r = rng.UniformDouble() * total_weight;
      size_t k = 0;
      while (k + 1 < team.templates.size() && r >= team.templates[k].weight) {
        r -= team.templates[k].weight;
        ++k;
      }
      const TeamSpec::Template& t = team.templates[k];
      ReplayWorkload w;
      w.team = static_cast<int>(ti);
      char name[64];
      std::snprintf(name, sizeof name, "%s-%05d", team.name.c_str(), ++serial);
      w.spec.name = WorkloadId(name);
      w.spec.tenant = TenantId(team.name);
      w.spec.queue = QueueId(team.name);
      w.spec.priority = t.priority.value_or(team.priority);
      w.spec.gang = t.gang;
      w.spec.topology = t.topology;
      PodSet ps = t.pod;
      ps.name = "main";
      ps.count = t.pods_min + static_cast<int>(rng.Uniform(t.pods_max - t.pods_min + 1));
      if (t.min_pods > 0 && t.min_pods < ps.count) ps.min_count = t.min_pods;
      w.spec.pod_sets = {ps};
      double u = rng.UniformDouble();
      w.duration_s =
          std::round(t.duration_min_s * std::pow(t.duration_max_s / t.duration_min_s, u));
      w.arrival_s = std::floor(
          (team.active_from + rng.UniformDouble() * (team.active_to - team.active_from)) *
          src.window_s);
      w.options.min_runtime_s = t.min_runtime_s.value_or(team.min_runtime_s);
      w.options.checkpoint_interval_s =
          t.checkpoint_interval_s.value_or(team.checkpoint_interval_s);
      w.options.preemptible = t.preemptible;
      // Only the part of its run inside the window counts toward the offered load.
      acc += load_milli(ps.device) * ps.count * std::min(w.duration_s, src.window_s - w.arrival_s);
      sc.workloads.push_back(std::move(w));
      if (sc.workloads.size() > kMaxWorkloads)
        return InvalidArgument(sc.source + ": synthetic: more than " +
                               std::to_string(kMaxWorkloads) + " workloads (team " + team.name +
                               " still short of its share of the load): shorten synthetic.window "
                               "or lower the load or the fleet's GPUs");
    }
  }
  std::stable_sort(
      sc.workloads.begin(), sc.workloads.end(),
      [](const ReplayWorkload& a, const ReplayWorkload& b) { return a.arrival_s < b.arrival_s; });
  return Status();
}

bool IsMig(const Workload& w) {
  for (const PodSet& ps : w.pod_sets)
    if (ps.device.kind == DeviceKind::kMig) return true;
  return false;
}
double MigCapacityMilli(const Fleet& fleet) {
  double m = 0;
  for (const Node& n : fleet.nodes)
    for (const Device& d : n.devices)
      if (d.mig_enabled()) m += kMilliPerGpu;
  return m;
}
// Classifies an admitter reason (sched/admission.cc words them) for the bound's exceptions, a
// disruption budget aside (the caller decides that one by the time it blocked).
std::string ExceptionKind(const std::string& reason) {
  if (reason.find("minimum runtime") != std::string::npos) return "minimum runtime";
  if (reason.rfind("preempting", 0) == 0 || reason.rfind("consolidating", 0) == 0 ||
      reason.rfind("taking back", 0) == 0)
    return "victims stopping";
  return "no room";
}
double WorkloadCpu(const Workload& w) {
  double m = 0;
  for (const PodSet& ps : w.pod_sets) m += static_cast<double>(ps.cpu.value()) * ps.count;
  return m;
}
double WorkloadMemory(const Workload& w) {
  double m = 0;
  for (const PodSet& ps : w.pod_sets) m += static_cast<double>(ps.memory.value()) * ps.count;
  return m;
}

// The GPU-seconds requested inside [0, window): each workload from its arrival for its
// duration, cut at the window's end.
double ClippedDemand(const std::vector<ReplayWorkload>& ws, double window, double gpu_memory) {
  double d = 0;
  for (const ReplayWorkload& w : ws)
    d += WorkloadMilli(w.spec, gpu_memory) *
         std::max(0.0, std::min(w.duration_s, window - w.arrival_s));
  return d;
}

// Trace scenarios: the trace's arrivals (quiet spells longer than `maxGap` shortened to it) are
// compressed into the scenario's window and the
// compressed list is overlaid as many times as it takes (the last copy a deterministic sample
// by pod name) for the GPU-seconds requested inside the window to reach load x capacity x
// window. Each copy of a pod arrives up to a minute after the original (a deterministic jitter
// from its name and copy number, never past the window's end) so copies do not arrive as one
// burst. Durations are the trace's.
void TileTrace(Scenario& sc, double window, double max_gap) {
  if (sc.workloads.empty()) return;
  // Quiet spells longer than max_gap shrink to it: openb's first 1% of pods were created
  // months before the rest (they were already running when the trace began), and a window
  // that spans the hole would measure an idle fleet.
  std::stable_sort(
      sc.workloads.begin(), sc.workloads.end(),
      [](const ReplayWorkload& a, const ReplayWorkload& b) { return a.arrival_s < b.arrival_s; });
  double prev = sc.workloads.front().arrival_s, at = 0;
  for (ReplayWorkload& w : sc.workloads) {
    at += std::min(w.arrival_s - prev, max_gap);
    prev = w.arrival_s;
    w.arrival_s = at;
  }
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const ReplayWorkload& w : sc.workloads) {
    first = std::min(first, w.arrival_s);
    last = std::max(last, w.arrival_s);
  }
  const double native = std::max(1.0, last - first);
  sc.compression = native / window;
  std::vector<ReplayWorkload> base = std::move(sc.workloads);
  sc.workloads.clear();
  for (ReplayWorkload& w : base) w.arrival_s = std::floor((w.arrival_s - first) / sc.compression);
  const double cap = static_cast<double>(sc.fleet.total_gpus()) * kMilliPerGpu;
  const double one = ClippedDemand(base, window, sc.mean_gpu_memory_mib);
  const double k = one > 0 ? sc.load * cap * window / one : 1;
  sc.copies = k;
  const int whole = static_cast<int>(std::floor(k));
  const int total = static_cast<int>(std::ceil(k));
  for (int j = 0; j < total; ++j) {
    for (const ReplayWorkload& w : base) {
      if (j == whole) {
        // The fractional copy: pods whose name hashes below the fraction.
        double u = static_cast<double>(Fnv1a(w.spec.name.str() + "#copy") % 1000000) / 1e6;
        if (u >= k - whole) continue;
      }
      ReplayWorkload c = w;
      if (j > 0) c.spec.name = WorkloadId(w.spec.name.str() + "-c" + std::to_string(j));
      if (j > 0) {
        double jitter = static_cast<double>(Fnv1a(c.spec.name.str()) % 60);
        c.arrival_s = std::min(w.arrival_s + jitter, std::floor(window) - 1);
      }
      sc.workloads.push_back(std::move(c));
    }
  }
  std::stable_sort(
      sc.workloads.begin(), sc.workloads.end(),
      [](const ReplayWorkload& a, const ReplayWorkload& b) { return a.arrival_s < b.arrival_s; });
}

// Offered load as measured, and guarantees proportional to each team's demand where none is
// given (what is left after the explicit ones, in whole GPUs).
// The scenario's teams as the fleet's tenants (their trust decides who may share a GPU).
std::vector<Tenant> TeamTenants(const Scenario& sc) {
  std::vector<Tenant> tenants;
  for (const TeamSpec& t : sc.teams) {
    Tenant tn;
    tn.name = TenantId(t.name);
    tn.trust = t.trust;
    tn.trust_domain = t.trust_domain;
    tenants.push_back(tn);
  }
  return tenants;
}

// Whether `fleet`, empty, could ever run `w`: each pod on some node (its CPU, memory, GPU
// memory, as the admitter checks them: a trial's 200Gi share read as runnable), then the pods
// together, in one domain where its topology requires one.
bool WholeFleetRuns(const ClusterState& fleet, const Workload& w) {
  std::vector<PodRequest> pods;
  for (const PodSet& ps : w.pod_sets) {
    auto req = fleet.MakeRequest(ps, w.tenant);
    if (!req.ok()) return false;
    for (int k = 0; k < ps.count; ++k) pods.push_back(*req);
  }
  const auto some_node_takes = [&](const PodRequest& p) {
    for (int n = 0; n < fleet.node_count(); ++n)
      if (fleet.MayFit(n, p) && NodeFits(fleet, n, p)) return true;
    return false;
  };
  std::string why;
  return !pods.empty() && std::all_of(pods.begin(), pods.end(), some_node_takes) &&
         FleetHoldsPods(fleet, pods, &why) && SomeDomainHolds(fleet, pods, w.topology, &why);
}

void Calibrate(Scenario& sc, double window) {
  const double cap = static_cast<double>(sc.fleet.total_gpus()) * kMilliPerGpu;
  double total = 0;
  for (const ReplayWorkload& w : sc.workloads)
    total += WorkloadMilli(w.spec, sc.mean_gpu_memory_mib) * w.duration_s;
  sc.offered_load = ClippedDemand(sc.workloads, window, sc.mean_gpu_memory_mib) / (cap * window);
  sc.offered_load_unclipped = total / (cap * window);
  // Two pools when the fleet has MIG-partitioned GPUs: those (only MIG requests use them) and
  // the rest. Each team's computed guarantee is split by its demand in each pool.
  // (Only for queues generated from computed guarantees: a scenario's own queue tree sets its
  // flavours, and explicit guarantees say nothing about pools.)
  const bool explicit_guarantee = std::any_of(sc.teams.begin(), sc.teams.end(),
                                              [](const TeamSpec& t) { return t.guarantee_milli; });
  const double mig_cap =
      sc.admission.queues.empty() && !explicit_guarantee ? MigCapacityMilli(sc.fleet) : 0;
  sc.mig_pool = mig_cap > 0;
  const double pool_cap[2] = {cap - mig_cap, mig_cap};
  // (Of work the fleet could ever run: a team's work no node holds would be guaranteed room
  // nobody can use.)
  const ClusterState empty(sc.fleet, TeamTenants(sc));
  std::vector<char> runs(sc.workloads.size());
  for (size_t w = 0; w < sc.workloads.size(); ++w)
    runs[w] = WholeFleetRuns(empty, sc.workloads[w].spec);
  std::vector<std::array<double, 2>> team_demand(sc.teams.size(), {0, 0});
  for (size_t i = 0; i < sc.workloads.size(); ++i) {
    const ReplayWorkload& w = sc.workloads[i];
    if (runs[i])
      team_demand[w.team][sc.mig_pool && IsMig(w.spec) ? 1 : 0] +=
          WorkloadMilli(w.spec, sc.mean_gpu_memory_mib) *
          std::max(0.0, std::min(w.duration_s, window - w.arrival_s));
  }
  double fixed = 0, open_demand[2] = {0, 0};
  for (size_t i = 0; i < sc.teams.size(); ++i) {
    if (sc.teams[i].guarantee_milli) {
      fixed += static_cast<double>(*sc.teams[i].guarantee_milli);
    } else {
      for (int p = 0; p < 2; ++p) open_demand[p] += team_demand[i][p];
    }
  }
  const double rest[2] = {std::max(0.0, pool_cap[0] * sc.guarantee_share - fixed),
                          pool_cap[1] * sc.guarantee_share};
  for (size_t i = 0; i < sc.teams.size(); ++i) {
    if (sc.teams[i].guarantee_milli) continue;
    int64_t g[2];
    for (int p = 0; p < 2; ++p) {
      double exact = open_demand[p] > 0 ? rest[p] * team_demand[i][p] / open_demand[p] : 0;
      g[p] = static_cast<int64_t>(std::floor(exact / 1000.0)) * 1000;
    }
    sc.teams[i].guarantee_milli = g[0] + g[1];
    sc.teams[i].mig_guarantee_milli = g[1];
  }
  // CPU guarantees (cpuGuarantees): guaranteeShare of the fleet's cores by CPU demand.
  if (sc.cpu_guarantees) {
    double cores = 0, cpu_total = 0;
    for (const Node& n : sc.fleet.nodes) cores += static_cast<double>(n.cpu.value());
    std::vector<double> cpu_demand(sc.teams.size(), 0);
    for (size_t i = 0; i < sc.workloads.size(); ++i) {
      const ReplayWorkload& w = sc.workloads[i];
      if (!runs[i]) continue;
      const double d =
          WorkloadCpu(w.spec) * std::max(0.0, std::min(w.duration_s, window - w.arrival_s));
      cpu_demand[w.team] += d;
      cpu_total += d;
    }
    for (size_t i = 0; i < sc.teams.size(); ++i)
      sc.teams[i].cpu_guarantee_milli =
          cpu_total > 0
              ? static_cast<int64_t>(cores * sc.guarantee_share * cpu_demand[i] / cpu_total)
              : 0;
  }
  // Fair-share weights default to the guarantees' proportions, so that the share a team is
  // promised and the share fairness aims at are the same.
  double gsum = 0;
  for (const TeamSpec& t : sc.teams) gsum += static_cast<double>(*t.guarantee_milli);
  for (TeamSpec& t : sc.teams)
    if (t.weight <= 0)
      t.weight = gsum > 0 ? std::max(0.01, static_cast<double>(*t.guarantee_milli) / gsum) : 1.0;
}

}  // namespace

int TeamOfPod(const std::string& pod_name, const std::vector<TeamSpec>& teams, int block) {
  // Trace pods are numbered in creation order ("openb-pod-0042"): consecutive runs of `block`
  // pods go to one team together, as a team submits a sweep or a batch at once.
  std::string key = pod_name;
  size_t digits = pod_name.find_last_not_of("0123456789");
  if (block > 1 && digits != std::string::npos && digits + 1 < pod_name.size()) {
    int64_t number = std::stoll(pod_name.substr(digits + 1));
    key = pod_name.substr(0, digits + 1) + "block-" + std::to_string(number / block);
  }
  double bucket = static_cast<double>(Fnv1a(key) % 100);
  double acc = 0;
  for (size_t i = 0; i < teams.size(); ++i) {
    acc += teams[i].share;
    if (bucket < acc) return static_cast<int>(i);
  }
  return static_cast<int>(teams.size()) - 1;
}

Result<Scenario> ParseScenario(const std::string& text, const std::string& source,
                               const std::string& base_dir, const std::string& trace_dir,
                               double load_override) {
  // One scenario a file: a second document would be dropped without a word.
  ASSIGN_OR_RETURN(std::vector<Doc> docs, LoadAllYaml(text, source));
  docs.erase(std::remove_if(docs.begin(), docs.end(), [](const Doc& d) { return !d; }), docs.end());
  if (docs.size() > 1)
    return InvalidArgument(source + ": " + std::to_string(docs.size()) +
                           " documents; a scenario file holds one");
  if (docs.empty()) return InvalidArgument(source + ": empty; a scenario file holds one Scenario");
  const Doc doc = docs.front();
  YamlMap top(doc, "", source);
  RETURN_IF_ERROR(top.CheckIsMap());
  Scenario sc;
  sc.source = source;
  // (Required, as the API requires a document's: a file of another kind without one was read
  // as a scenario, and its errors named scenario fields.)
  if (!top.Has("kind")) return top.Error("kind", "required field is missing: kind: Scenario");
  ASSIGN_OR_RETURN(std::string kind, top.String("kind"));
  if (kind != "Scenario") return top.Error("kind", "expected Scenario, got '" + kind + "'");
  ASSIGN_OR_RETURN(sc.name, top.String("name"));
  ASSIGN_OR_RETURN(std::string description, top.String("description", ""));
  (void)description;
  ASSIGN_OR_RETURN(sc.load, top.Double("load", 1.0));
  // (0: none given. One given on the command line is checked as its own.)
  if (load_override != 0) {
    if (!(load_override > 0 && load_override <= 10))
      return InvalidArgument("--load: must be in (0, 10], got " + std::to_string(load_override));
    sc.load = load_override;
  }
  if (!(sc.load > 0 && sc.load <= 10)) return top.Error("load", "must be in (0, 10]");
  ASSIGN_OR_RETURN(sc.interval_s, top.Double("interval", 1.0));
  if (sc.interval_s <= 0) return top.Error("interval", "must be positive");
  ASSIGN_OR_RETURN(sc.grace_s, top.Double("grace", 30.0));
  ASSIGN_OR_RETURN(sc.guarantee_share, top.Double("guaranteeShare", 1.0));
  if (sc.guarantee_share <= 0 || sc.guarantee_share > 1)
    return top.Error("guaranteeShare", "must be in (0, 1]");
  ASSIGN_OR_RETURN(sc.cpu_guarantees, top.Bool("cpuGuarantees", false));
  ASSIGN_OR_RETURN(sc.time_limit_factor, top.Double("timeLimitFactor", 0.0));
  if (sc.time_limit_factor != 0 && (sc.time_limit_factor < 1 || sc.time_limit_factor > 1000))
    return top.Error("timeLimitFactor", "must be 0 (no time limits) or from 1 to 1000");

  const bool has_trace = top.Has("trace"), has_synth = top.Has("synthetic");
  if (has_trace == has_synth) return top.Error("trace", "give exactly one of trace or synthetic");

  Doc teams = top.Raw("teams");
  if (!teams || !teams.IsSequence() || teams.size() == 0)
    return top.Error("teams", "expected a non-empty list of teams");
  double share_sum = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < teams.size(); ++i) {
    YamlMap tm = top.Child(teams[i], "teams[" + std::to_string(i) + "]");
    ASSIGN_OR_RETURN(TeamSpec t, ParseTeam(tm, has_synth));
    if (!names.insert(t.name).second) return tm.Error("name", "duplicate team '" + t.name + "'");
    share_sum += t.share;
    sc.teams.push_back(std::move(t));
  }
  if (std::abs(share_sum - 100) > 1e-6)
    return top.Error("teams", [&] {
      char sum[32];  // (as written: 110, not 110.000000)
      std::snprintf(sum, sizeof sum, "%g", share_sum);
      return "team shares must sum to 100, they sum to " + std::string(sum);
    }());

  sc.admission.usage_half_life_s = kDefaultUsageHalfLifeS;
  if (top.Has("admission")) {
    YamlMap am = top.Child("admission");
    RETURN_IF_ERROR(am.CheckIsMap());
    if (am.Has("queues")) {
      // A team's queue settings are its queue's there: given on the team too, they would be
      // ignored without a word (the weight would move only the fairness measure).
      for (size_t i = 0; i < teams.size(); ++i) {
        YamlMap tm = top.Child(teams[i], "teams[" + std::to_string(i) + "]");
        for (const char* key :
             {"guarantee", "borrowingLimit", "lendingLimit", "disruptionBudget", "weight",
              "preemption", "queueingStrategy", "flavorFungibility", "reclaimMinRuntimeSeconds"})
          if (tm.Has(key))
            return tm.Error(key, "not with admission.queues: set it on the team's queue");
      }
      if (sc.cpu_guarantees)
        return top.Error("cpuGuarantees",
                         "only for generated queues: with admission.queues, give the queues "
                         "cpu quotas");
      ASSIGN_OR_RETURN(sc.admission, ParseAdmissionConfig(am));
      RETURN_IF_ERROR(top.Unknowns());  // (before the teams are checked against the queues)
      AdmissionConfig& c = sc.admission;
      std::map<std::string, int> index;
      for (size_t i = 0; i < c.queues.size(); ++i) {
        index[c.queues[i].name] = static_cast<int>(i);
        // (A tenant no team is would be a typo: a trial's went unsaid.)
        for (const std::string& t : c.queues[i].tenants)
          if (t != "*" && std::none_of(sc.teams.begin(), sc.teams.end(),
                                       [&](const TeamSpec& team) { return team.name == t; }))
            return top.ErrorAt("admission.queues[" + std::to_string(i) + "].tenants",
                               "'" + t + "' is no team of the scenario");
        if (c.queues[i].stop_policy != StopPolicy::kNone)
          return top.ErrorAt("admission.queues[" + std::to_string(i) + "].stopPolicy",
                             "a replayed queue cannot be stopped");
      }
      for (size_t i = 0; i < sc.teams.size(); ++i) {
        std::string at = "teams[" + std::to_string(i) + "].queue";
        auto it = index.find(sc.teams[i].queue);
        if (it == index.end())
          return top.ErrorAt(at, "unknown queue \"" + sc.teams[i].queue + "\"");
        for (const QueueSpec& q : c.queues)
          if (q.parent == sc.teams[i].queue)
            return top.ErrorAt(at, "queue \"" + sc.teams[i].queue +
                                       "\" has child queues; a team's workloads wait in a leaf");
        // The team is the tenant: as in the server, a queue not named after it must list it.
        const Status may =
            TenantMayUse(sc.teams[i].name, sc.teams[i].queue, [&](const std::string& name) {
              auto q = index.find(name);
              return q == index.end() ? nullptr : &c.queues[q->second];
            });
        if (!may.ok()) return top.ErrorAt(at, may.message());
        // The team's guarantee is its leaf's, every GPU flavour together (not its CPU or
        // memory).
        int64_t g = 0, mig = 0;
        for (const auto& [flavor, quota] : c.queues[it->second].quotas) {
          if (flavor == kCpuQuota || flavor == kMemoryQuota) continue;
          g += quota.guaranteed_milli;
          // (Its MIG flavours' part, a pool of its own in the measures: a trial's guarantee of
          // MIG slices read as owed to its whole-GPU work.)
          for (const FlavorSpec& f : c.flavors)
            if (f.name == flavor && f.kind == DeviceKind::kMig) mig += quota.guaranteed_milli;
        }
        sc.teams[i].guarantee_milli = g;
        sc.teams[i].mig_guarantee_milli = mig;
      }
      // Teams that share a leaf share its guarantee; and the fairness measure weighs each team
      // as the tree does: its leaf's part of its siblings' weights, and so on up (a review:
      // weighed by guarantees, a tree of weights 3:1 was measured against 1:1).
      std::map<std::string, int> in_leaf;
      for (const TeamSpec& t : sc.teams) ++in_leaf[t.queue];
      // (Only subtrees with a team count among siblings: a queue no team uses takes no share
      // from its siblings' work — a review's A1 beside an unused A2 was read half of A's.)
      std::vector<char> has_team(c.queues.size(), 0);
      for (const TeamSpec& t : sc.teams)
        for (int q = index[t.queue], up = 0; q >= 0 && up <= static_cast<int>(c.queues.size());
             ++up) {
          has_team[q] = 1;
          const auto parent = index.find(c.queues[q].parent);
          q = parent == index.end() ? -1 : parent->second;
        }
      for (TeamSpec& t : sc.teams) {
        const int sharing = in_leaf[t.queue];
        *t.guarantee_milli /= sharing;
        t.mig_guarantee_milli /= sharing;
        double part = 1.0 / sharing;
        // (Up to the roots, which share the fleet by their weights too; bounded by the queues'
        // count, though the tree was checked for cycles before.)
        int q = index[t.queue];
        for (size_t up = 0; up < c.queues.size(); ++up) {
          double siblings = 0;
          for (size_t o = 0; o < c.queues.size(); ++o)
            if (has_team[o] && c.queues[o].parent == c.queues[q].parent)
              siblings += c.queues[o].weight;
          part *= siblings > 0 ? c.queues[q].weight / siblings : 1.0;
          const auto parent = index.find(c.queues[q].parent);
          if (parent == index.end()) break;
          q = parent->second;
        }
        t.weight = std::max(1e-6, part);
      }
    } else {
      if (am.Has("flavors"))
        return am.Error("flavors",
                        "only with admission.queues, whose quotas name them: the queues made "
                        "from the teams use the built-in flavours gpu (and mig)");
      RETURN_IF_ERROR(ParseAdmissionSettings(am, &sc.admission));
      RETURN_IF_ERROR(am.Finish());
    }
  }
  // A team's queue is named only within admission.queues: without, each waits in a queue of
  // its own name (a trial's `queue: ext` was dropped without a word).
  if (sc.admission.queues.empty())
    for (size_t i = 0; i < sc.teams.size(); ++i)
      if (sc.teams[i].queue != sc.teams[i].name)
        return top.ErrorAt("teams[" + std::to_string(i) + "].queue",
                           "unknown queue \"" + sc.teams[i].queue +
                               "\": without admission.queues each team waits in a queue of its "
                               "own name (" +
                               sc.teams[i].name + ")");
  // As for queues: borrowing preemption has no place beside fair-share preemption.
  for (size_t i = 0; i < sc.teams.size(); ++i)
    if (sc.admission.fair_share_preemption &&
        sc.teams[i].preemption.borrow_within_cohort != PreemptionPolicy::Borrow::kNever)
      return top.ErrorAt("teams[" + std::to_string(i) + "].preemption.borrowWithinCohort",
                         "not with fairSharePreemption");

  if (has_trace) {
    YamlMap tm = top.Child("trace");
    RETURN_IF_ERROR(tm.CheckIsMap());
    ASSIGN_OR_RETURN(std::string dir, tm.String("dir"));
    ASSIGN_OR_RETURN(std::string nodes, tm.String("nodes"));
    ASSIGN_OR_RETURN(std::string pods, tm.String("pods"));
    RETURN_IF_ERROR(tm.Finish());
    ASSIGN_OR_RETURN(sc.window_s, top.Double("window", 86400.0));
    if (sc.window_s < 1) return top.Error("window", "must be at least 1 second");
    ASSIGN_OR_RETURN(double max_gap, top.Double("maxGap", 3600.0));
    ASSIGN_OR_RETURN(int64_t team_block, top.Int("teamBlock", 1));
    if (team_block < 1 || team_block > 100000)
      return top.Error("teamBlock", "must be between 1 and 100000");
    if (max_gap <= 0) return top.Error("maxGap", "must be positive");
    RETURN_IF_ERROR(top.Finish());
    if (!trace_dir.empty()) {
      dir = trace_dir;
    } else if (!dir.empty() && dir[0] != '/' && !base_dir.empty()) {
      dir = base_dir + "/" + dir;
    }
    RETURN_IF_ERROR(
        BuildOpenb(sc, dir + "/" + nodes, dir + "/" + pods, static_cast<int>(team_block)));
    TileTrace(sc, sc.window_s, max_gap);
  } else {
    if (!trace_dir.empty())
      return InvalidArgument("--trace-dir: " + source +
                             " is synthetic (synthetic:, not trace:): it reads no trace");
    YamlMap sm = top.Child("synthetic");
    RETURN_IF_ERROR(sm.CheckIsMap());
    SyntheticSource src;
    ASSIGN_OR_RETURN(int64_t gpus, sm.Int("gpus", 1024));
    if (gpus < 8 || gpus > 200000) return sm.Error("gpus", "must be between 8 and 200000");
    if (gpus % 8 != 0)
      return sm.Error("gpus", "must be a multiple of 8: the fleet is made of 8-GPU nodes (" +
                                  std::to_string(gpus) + " would be " +
                                  std::to_string(gpus / 8 * 8) + ")");
    src.fleet.gpus = gpus;
    ASSIGN_OR_RETURN(src.fleet.gb200_share, sm.Double("gb200Share", 0.0));
    ASSIGN_OR_RETURN(src.fleet.mig_share, sm.Double("migShare", 0.1));
    ASSIGN_OR_RETURN(src.fleet.h200_share, sm.Double("h200Share", 1.0 / 3.0));
    for (const auto& [key, share] :
         {std::pair{"gb200Share", src.fleet.gb200_share},
          std::pair{"migShare", src.fleet.mig_share}, std::pair{"h200Share", src.fleet.h200_share}})
      if (!(share >= 0 && share <= 1)) return sm.Error(key, "must be between 0 and 1");
    ASSIGN_OR_RETURN(int64_t seed, sm.Int("seed", 1));
    src.seed = static_cast<uint64_t>(seed);
    ASSIGN_OR_RETURN(src.window_s, sm.Double("window", 86400.0));
    if (src.window_s < 1) return sm.Error("window", "must be at least 1 second");
    RETURN_IF_ERROR(sm.Finish());
    RETURN_IF_ERROR(top.Finish());
    sc.window_s = src.window_s;
    RETURN_IF_ERROR(BuildSynthetic(sc, src));
    sc.synthetic = true;
    // Whole racks of H100s go to MIG: a share too small for one rack gives none, said here
    // rather than as MIG work that can never run (a trial's 0.25 of 3 racks gave none).
    if (src.fleet.mig_share > 0 &&
        std::none_of(sc.fleet.nodes.begin(), sc.fleet.nodes.end(), [](const Node& n) {
          return std::any_of(n.devices.begin(), n.devices.end(),
                             [](const Device& d) { return d.mig_enabled(); });
        }))
      return sm.Error("migShare",
                      "gives no MIG GPU: whole H100 racks go to MIG, and this share "
                      "of the fleet's H100 racks rounds to none (raise it, or gpus, "
                      "or set it to 0)");
  }
  // An admission cycle, or a grace period, longer than the window: nothing it measures.
  char window[32];
  std::snprintf(window, sizeof window, "%g", sc.window_s);
  if (sc.interval_s >= sc.window_s)
    return top.Error("interval", std::string("must be shorter than the window (") + window + " s)");
  if (sc.grace_s > sc.window_s)
    return top.Error("grace", std::string("must be at most the window (") + window + " s)");
  // A team given a share of the load, or of the trace, that none of it reached.
  std::vector<int> workloads(sc.teams.size(), 0);
  for (const ReplayWorkload& w : sc.workloads) ++workloads[w.team];
  for (size_t i = 0; i < sc.teams.size(); ++i)
    if (sc.teams[i].share > 0 && workloads[i] == 0)
      return InvalidArgument(
          source + ": teams[" + std::to_string(i) + "].share: team " + sc.teams[i].name +
          " gets no workload" +
          (has_trace ? " of the trace (pods go to teams by hash into 100 buckets, in blocks of "
                       "teamBlock pods: a share under 1, or too few blocks, may take none)"
                     : ""));
  // A flavour of models the fleet does not have: its quotas would hold nothing.
  {
    std::set<std::string> models;
    bool has_mig = false;
    for (const Node& n : sc.fleet.nodes)
      for (const Device& d : n.devices) {
        models.insert(d.model);
        has_mig |= d.mig_enabled();
      }
    for (size_t i = 0; i < sc.admission.flavors.size(); ++i) {
      const FlavorSpec& f = sc.admission.flavors[i];
      if (!f.models.empty() &&
          std::none_of(f.models.begin(), f.models.end(),
                       [&](const std::string& m) { return models.count(m) > 0; })) {
        std::string have;
        for (const std::string& m : models) have += (have.empty() ? "" : ", ") + m;
        return top.ErrorAt("admission.flavors[" + std::to_string(i) + "].models",
                           "no GPU of the fleet is of them (it has " + have + ")");
      }
      // (Nor MIG slices where no GPU is in MIG mode: a trial's guarantee of 32 was taken.)
      if (f.kind == DeviceKind::kMig && !has_mig)
        return top.ErrorAt("admission.flavors[" + std::to_string(i) + "].kind",
                           "mig, but no GPU of the fleet is in MIG mode");
    }
  }
  std::vector<bool> guarantee_given;
  for (const TeamSpec& t : sc.teams) guarantee_given.push_back(t.guarantee_milli.has_value());
  Calibrate(sc, sc.window_s);
  // Guarantees past the fleet: every policy is refused them alike (fabrica's tree would lend
  // nothing it could keep; dedicated would hand some team no node).
  const int64_t cap = int64_t{sc.fleet.total_gpus()} * kMilliPerGpu;
  if (sc.admission.queues.empty()) {
    int64_t sum = 0;
    for (const TeamSpec& t : sc.teams) sum += t.guarantee_milli.value_or(0);
    if (sum > cap)
      return top.Error("teams", "the teams' guarantees add up to " + FormatMilliGpu(MilliGpu(sum)) +
                                    " GPUs, more than the fleet's " +
                                    FormatMilliGpu(MilliGpu(cap)));
    // A limit checked against the guarantee computed for the team, named as the file names it.
    for (size_t i = 0; i < sc.teams.size(); ++i) {
      const TeamSpec& t = sc.teams[i];
      if (t.lending_limit_milli && *t.lending_limit_milli > t.guarantee_milli.value_or(0))
        return top.ErrorAt("teams[" + std::to_string(i) + "].lendingLimit",
                           std::string("above the team's ") +
                               (guarantee_given[i] ? "" : "computed ") + "guarantee (" +
                               FormatMilliGpu(MilliGpu(*t.lending_limit_milli)) + " > " +
                               FormatMilliGpu(MilliGpu(t.guarantee_milli.value_or(0))) + " GPUs)");
    }
  } else {
    // What the file's trees guarantee the teams (teams of one leaf share its guarantee).
    int64_t sum = 0, mig = 0;
    for (const TeamSpec& t : sc.teams) {
      sum += t.guarantee_milli.value_or(0);
      mig += t.mig_guarantee_milli;
    }
    if (sum > cap)
      return top.ErrorAt("admission.queues", "the teams' queues are guaranteed " +
                                                 FormatMilliGpu(MilliGpu(sum)) +
                                                 " GPUs together, more than the "
                                                 "fleet's " +
                                                 FormatMilliGpu(MilliGpu(cap)));
    // Nor may a department or root be guaranteed more than the fleet (a trial's root of 1000
    // GPUs over leaves of 60 was taken without a word).
    for (size_t i = 0; i < sc.admission.queues.size(); ++i) {
      int64_t g = 0;
      for (const auto& [flavor, quota] : sc.admission.queues[i].quotas)
        if (flavor != kCpuQuota && flavor != kMemoryQuota) g += quota.guaranteed_milli;
      if (g > cap)
        return top.ErrorAt("admission.queues[" + std::to_string(i) + "].quotas",
                           "queue \"" + sc.admission.queues[i].name + "\" is guaranteed " +
                               FormatMilliGpu(MilliGpu(g)) + " GPUs, more than the fleet's " +
                               FormatMilliGpu(MilliGpu(cap)));
    }
    // ... and the MIG flavours' part past the fleet's MIG GPUs (a trial's 48 of 24 was taken,
    // and read as scheduler failure).
    const auto mig_cap = static_cast<int64_t>(MigCapacityMilli(sc.fleet));
    if (mig > mig_cap)
      return top.ErrorAt("admission.queues",
                         "the teams' queues are guaranteed " + FormatMilliGpu(MilliGpu(mig)) +
                             " GPUs of MIG flavours together, more than the fleet's " +
                             FormatMilliGpu(MilliGpu(mig_cap)) + " MIG GPUs");
  }
  return sc;
}

Result<Scenario> LoadScenario(const std::string& path, const std::string& trace_dir, double load) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::string base = ".";
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) base = path.substr(0, slash);
  return ParseScenario(text, path, base, trace_dir, load);
}

// ---- the replay ------------------------------------------------------------------------------

namespace {

// kShrunk: the pods an elastic shrink took from a run (fragment `aux` of its admitter) stop.
enum class EventType { kArrive, kTerminate, kFinish, kWake, kShrunk };

struct Event {
  double t;
  int order;  // arrivals after stops at the same instant, so freed room is seen
  int64_t seq;
  EventType type;
  int w;
  int epoch;
  int aux = -1;
  bool operator>(const Event& o) const {
    return std::tie(t, order, seq) > std::tie(o.t, o.order, o.seq);
  }
};

struct Group {
  Fleet fleet;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Admitter> admitter;
};

// The two readings of "pending work that fits its guarantee" (ReplayResult::bound).
constexpr int kInOrder = 0, kAlone = 1;

struct WState {
  int group = 0;
  int id = -1;  // in its group's admitter
  bool running = false;
  bool ever_admitted = false;
  bool infeasible = false;  // even the whole fleet, empty, could never admit it
  // The policy can never admit it (Phase::kInfeasible: its slice or quota) though the whole
  // fleet could: it waits to the end.
  bool policy_blocked = false;
  double admit_t = -1;
  double pending_since = -1;
  double wait_total = 0;
  int epoch = 0;
  bool evicting = false;
  int evictions = 0;    // times it was chosen as a victim (as `preemptions` counts them)
  double progress = 0;  // seconds of its run saved by checkpoints before evictions
  // While it runs: the part of its pods admitted (partial admission: its run goes that much
  // slower) and the GPUs (milli) they hold.
  double rate = 1;
  double run_milli = 0;
  // This run's spells at one size, from when (elastic growth adds one): (from, rate, milli).
  std::vector<std::tuple<double, double, double>> spells;
  // Per reading of "fits" (kInOrder, kAlone; see ReplayResult::bound): since when it has been
  // pending and fitting in its team's room below the guarantee, and the longest remaining
  // minimum runtime of the victims evicted for it.
  double fits_since[2] = {-1, -1};
  double victim_mr[2] = {0, 0};
  // Time of the wait in which a disruption budget forbade the evictions it needed: the issue
  // allows the bound to be exceeded by that much. Since when it is blocked now (-1: not).
  double budget_s[2] = {0, 0};
  double budget_since[2] = {-1, -1};
  // Likewise the time in which its team's room below the guarantee, enough for it, was
  // promised to other workloads of its queue already reclaiming (their victims still stopping).
  double promised_s[2] = {0, 0};
  double promised_since[2] = {-1, -1};
  // Likewise the time in which no preemption search could find it a victim (the admitter's
  // may_preempt: no other queue above its guarantee, nothing of its own it may preempt), while
  // it waited neither for its own victims nor for room promised to others.
  double nothing_s[2] = {0, 0};
  double nothing_since[2] = {-1, -1};
  // The time in which any of the three held (a budget, a promise, nothing to reclaim).
  double excused_s[2] = {0, 0};
  double excused_since[2] = {-1, -1};
  std::tuple<int, double, int> order;  // its place in its queue while pending (see pend_order)
  std::string reason;                  // why it still waited at the last cycle (while it fits)
};

// The event log's names of device kinds (DeviceKind's order), and the GPUs one pod of a set
// takes.
constexpr const char* kDeviceKinds[] = {"none", "whole", "fraction", "mig"};
int PodGpus(const PodSet& ps) {
  return ps.device.kind == DeviceKind::kWhole  ? ps.device.gpus
         : ps.device.kind == DeviceKind::kNone ? 0
                                               : 1;
}

// Water-filling: split `total` among claims by weight, none above its demand.
std::vector<double> WaterFill(const std::vector<double>& demand, const std::vector<double>& weight,
                              double total) {
  std::vector<double> out(demand.size(), 0);
  std::vector<int> open;
  for (size_t i = 0; i < demand.size(); ++i)
    if (demand[i] > 0) open.push_back(static_cast<int>(i));
  double left = total;
  while (!open.empty() && left > 1e-12) {
    double wsum = 0;
    for (int i : open) wsum += weight[i];
    double level = left / wsum;  // per unit weight
    std::vector<int> next;
    bool capped = false;
    for (int i : open) {
      if (demand[i] - out[i] <= level * weight[i]) capped = true;
    }
    if (!capped) {
      for (int i : open) out[i] += level * weight[i];
      break;
    }
    for (int i : open) {
      if (demand[i] - out[i] <= level * weight[i]) {
        left -= demand[i] - out[i];
        out[i] = demand[i];
      } else {
        next.push_back(i);
      }
    }
    open.swap(next);
  }
  return out;
}

}  // namespace

Result<ReplayResult> RunReplay(const Scenario& sc, const std::string& policy_name,
                               const std::string& placement, std::ostream* events_out) {
  if (policy_name != "dedicated" && policy_name != "fifo" && policy_name != "fabrica")
    return InvalidArgument("--policy: expected dedicated, fifo or fabrica, got '" + policy_name +
                           "'");
  const int nteams = static_cast<int>(sc.teams.size());
  const std::vector<Tenant> tenants = TeamTenants(sc);
  const double cap_gpu = static_cast<double>(sc.fleet.total_gpus()) * kMilliPerGpu;
  double cap_cpu = 0;
  for (const Node& n : sc.fleet.nodes) cap_cpu += static_cast<double>(n.cpu.value());
  cap_cpu = std::max(1.0, cap_cpu);
  double cap_memory = 0;
  for (const Node& n : sc.fleet.nodes) cap_memory += static_cast<double>(n.memory.value());
  cap_memory = std::max(1.0, cap_memory);

  // Guarantees per team (GPU milli) as the policy sees them.
  std::vector<double> guarantee(nteams);
  // The same per pool (0: whole and fractional GPUs, 1: MIG-partitioned GPUs).
  std::vector<std::array<double, 2>> pool_guarantee(nteams);
  for (int i = 0; i < nteams; ++i) {
    guarantee[i] = static_cast<double>(sc.teams[i].guarantee_milli.value_or(0));
    pool_guarantee[i] = {guarantee[i] - static_cast<double>(sc.teams[i].mig_guarantee_milli),
                         static_cast<double>(sc.teams[i].mig_guarantee_milli)};
  }
  // MIG work is measured in a pool of its own where MIG GPUs are guaranteed apart: the
  // generated queues' MIG pool, or a queue tree's MIG flavours.
  const bool mig_units =
      sc.mig_pool || std::any_of(sc.teams.begin(), sc.teams.end(),
                                 [](const TeamSpec& t) { return t.mig_guarantee_milli > 0; });
  auto pool_of = [&](int w) { return mig_units && IsMig(sc.workloads[w].spec) ? 1 : 0; };

  // Groups: one shared admitter, or one per team on its own nodes.
  std::vector<Group> groups;
  std::vector<int> group_of_team(nteams, 0);
  auto make_group = [&](Fleet fleet) -> Status {
    groups.emplace_back();
    Group& g = groups.back();
    g.fleet = std::move(fleet);
    ClusterState probe(g.fleet, tenants);
    std::vector<PodRequest> reqs;
    for (const ReplayWorkload& w : sc.workloads)
      for (const PodSet& ps : w.spec.pod_sets) {
        auto r = probe.MakeRequest(ps, w.spec.tenant);
        if (r.ok()) reqs.push_back(*r);
      }
    ASSIGN_OR_RETURN(g.policy, MakePolicy(placement, TypicalMix(reqs), &probe));
    return Status();
  };
  // Under dedicated, why a team that owns no node runs nothing (its work's reason, for the
  // empty fleet's "no node has ..." would be no reason).
  std::vector<std::string> no_slice_why(nteams);
  if (policy_name == "dedicated") {
    // Each GPU model's nodes (in fleet order) split among the teams by guarantee, largest
    // remainder first, each team's rounding carried from one model to the next in GPUs, so
    // that its slice of the pool stays within a node of its guarantee's share (a trial: two
    // teams guaranteed 32 GPUs each got 40 and 24, as each model's tie went to the first).
    // MIG-partitioned nodes are split apart from whole-GPU nodes of their model, by the MIG part
    // of the guarantees (a review: split together in fleet order, a team of MIG work got only
    // whole GPUs and another every MIG node).
    auto mig_node = [](const Node& n) {
      return std::any_of(n.devices.begin(), n.devices.end(),
                         [](const Device& d) { return d.mig_enabled(); });
    };
    std::map<std::pair<std::string, int>, std::vector<int>> by_model;
    for (int n = 0; n < static_cast<int>(sc.fleet.nodes.size()); ++n)
      by_model[{sc.fleet.nodes[n].gpu_model(), mig_node(sc.fleet.nodes[n]) ? 1 : 0}].push_back(n);
    // Each team's guarantee by pool: as the guarantees split it, or, where they do not (no MIG
    // pool: explicit guarantees), by its demand in each pool, as a team buys the hardware its
    // work runs on; a pool no team asks for goes by the whole guarantees. (A pool's nodes go to
    // the teams with work for it, in proportion, though that be more than a team's share of
    // the guarantees: a trial's team of whole-GPU work owned MIG nodes it never used, while
    // the MIG team's work waited.)
    std::vector<std::array<double, 2>> split = pool_guarantee;
    if (!sc.mig_pool) {
      std::vector<std::array<double, 2>> demand(nteams, {0, 0});
      for (const ReplayWorkload& w : sc.workloads)
        demand[w.team][IsMig(w.spec) ? 1 : 0] +=
            WorkloadMilli(w.spec, sc.mean_gpu_memory_mib) * w.duration_s;
      for (int i = 0; i < nteams; ++i) {
        const double all = demand[i][0] + demand[i][1];
        const double mig = all > 0 ? guarantee[i] * demand[i][1] / all : 0;
        split[i] = {guarantee[i] - mig, mig};
      }
    }
    double gsum[2] = {0, 0};
    for (const auto& g : split)
      for (int p = 0; p < 2; ++p) gsum[p] += g[p];
    for (int p = 0; p < 2; ++p)
      if (gsum[p] <= 0)
        for (int i = 0; i < nteams; ++i) {
          split[i][p] = guarantee[i];
          gsum[p] += guarantee[i];
        }
    std::vector<std::vector<int>> owned(nteams);               // node indices, by team
    std::vector<std::array<double, 2>> carry(nteams, {0, 0});  // GPUs owed (+) or ahead (-)
    for (const auto& [model_pool, nodes] : by_model) {
      const int pool = model_pool.second;
      // (The mean: a model's nodes may differ in GPUs, as openb's T4 nodes of 2 and 4.)
      double gpus = 0;
      for (int n : nodes) gpus += static_cast<double>(sc.fleet.nodes[n].devices.size());
      const int total = static_cast<int>(nodes.size());
      const double per_node = std::max(1.0, gpus / total);
      std::vector<double> exact(nteams), want(nteams);
      std::vector<int> count(nteams);
      int given = 0;
      for (int i = 0; i < nteams; ++i) {
        exact[i] = gsum[pool] > 0 ? total * split[i][pool] / gsum[pool] : 0;
        want[i] = exact[i] + carry[i][pool] / per_node;
        count[i] = std::max(0, static_cast<int>(std::floor(want[i])));
        given += count[i];
      }
      // (The carries add up to nothing, so the floors are at most a node short per team, or,
      // where a carry is negative past a node, over: taken from whoever is furthest ahead.)
      while (given > total) {
        int most = -1;
        for (int i = 0; i < nteams; ++i)
          if (count[i] > 0 && (most < 0 || count[i] - want[i] > count[most] - want[most])) most = i;
        --count[most];
        --given;
      }
      while (given < total) {
        int most = 0;
        for (int i = 1; i < nteams; ++i)
          if (want[i] - count[i] > want[most] - count[most]) most = i;
        ++count[most];
        ++given;
      }
      size_t at = 0;
      for (int i = 0; i < nteams; ++i) {
        carry[i][pool] += (exact[i] - count[i]) * per_node;
        for (int c = 0; c < count[i]; ++c) owned[i].push_back(nodes[at++]);
      }
    }
    // A team guaranteed GPUs is never left without a node while another has more than one:
    // the one furthest past its share gives it its last.
    for (int i = 0; i < nteams; ++i) {
      if (!owned[i].empty() || guarantee[i] <= 0) continue;
      int donor = -1;
      double ahead = 0;
      for (int j = 0; j < nteams; ++j) {
        const double past = -(carry[j][0] + carry[j][1]);
        if (owned[j].size() > 1 && (donor < 0 || past > ahead)) donor = j, ahead = past;
      }
      if (donor < 0) break;
      owned[i].push_back(owned[donor].back());
      owned[donor].pop_back();
    }
    // Nor is a team with MIG work left without a MIG node while another owns more than one:
    // the one with the most gives it its last (a trial's team of 16% of the MIG demand got none
    // of three MIG nodes, and its slices never ran).
    const auto mig_owned = [&](int i) {
      return std::count_if(owned[i].begin(), owned[i].end(),
                           [&](int n) { return mig_node(sc.fleet.nodes[n]); });
    };
    for (int i = 0; i < nteams; ++i) {
      if (split[i][1] <= 0 || mig_owned(i) > 0) continue;
      int donor = -1;
      for (int j = 0; j < nteams; ++j)
        if (mig_owned(j) > 1 && (donor < 0 || mig_owned(j) > mig_owned(donor))) donor = j;
      if (donor < 0) break;
      auto last = std::find_if(owned[donor].rbegin(), owned[donor].rend(),
                               [&](int n) { return mig_node(sc.fleet.nodes[n]); });
      owned[i].push_back(*last);
      owned[donor].erase(std::next(last).base());
    }
    // (Fewer nodes than teams guaranteed GPUs: some own none, as a trial's third team on two
    // nodes; said so, not blamed on its pods.)
    for (int i = 0; i < nteams; ++i)
      if (owned[i].empty())
        no_slice_why[i] = "under dedicated it owns no node: the fleet's " +
                          std::to_string(sc.fleet.nodes.size()) +
                          " node(s) were split among the teams by guarantee";
    std::vector<Fleet> fleets(nteams);
    for (int i = 0; i < nteams; ++i) {
      std::sort(owned[i].begin(), owned[i].end());
      for (int n : owned[i]) fleets[i].nodes.push_back(sc.fleet.nodes[n]);
    }
    for (int i = 0; i < nteams; ++i) {
      guarantee[i] = static_cast<double>(fleets[i].total_gpus()) * kMilliPerGpu;
      const double mig = mig_units ? MigCapacityMilli(fleets[i]) : 0;
      pool_guarantee[i] = {guarantee[i] - mig, mig};
      group_of_team[i] = i;
      RETURN_IF_ERROR(make_group(std::move(fleets[i])));
    }
  } else {
    RETURN_IF_ERROR(make_group(sc.fleet));
  }
  // The admitters keep references to their fleets: built once the vector stopped moving.
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    AdmissionConfig c;
    // The baselines neither preempt nor move work.
    if (policy_name == "dedicated") {
      c.queues = {QueueSpec{"own", "", 1, {}, -1}};
      c.preemption = false;
      c.consolidation = false;
      c.strict_priority = false;
    } else if (policy_name == "fifo") {
      c.queues = {QueueSpec{"shared", "", 1, {}, -1}};
      c.preemption = false;
      c.consolidation = false;
      c.strict_priority = false;
    } else if (!sc.admission.queues.empty()) {
      c = sc.admission;
    } else {
      c = sc.admission;
      // The root holds the whole fleet, so that what the guarantees leave out is lent too.
      QueueSpec root{"fleet", "", 1, {}, -1};
      const int64_t mig_cap = static_cast<int64_t>(MigCapacityMilli(sc.fleet));
      // (MIG capacity is the `mig` flavour's only where there is one: a review's scenario
      // with guarantees, so no MIG pool, was refused for children past the root's quota.)
      root.quotas["gpu"] =
          QuotaSpec{static_cast<int64_t>(cap_gpu) - (sc.mig_pool ? mig_cap : 0), {}, {}};
      if (sc.mig_pool) root.quotas["mig"] = QuotaSpec{mig_cap, {}, {}};
      if (sc.cpu_guarantees) {
        int64_t cores = 0;
        for (const Node& n : sc.fleet.nodes) cores += n.cpu.value();
        root.quotas[kCpuQuota] = QuotaSpec{cores, {}, {}};
      }
      c.queues = {root};
      if (sc.mig_pool) {
        // MIG slices are charged to `mig`, everything else to `gpu` (a named kind wins).
        c.flavors = {FlavorSpec{"mig", DeviceKind::kMig, {}, {}}, FlavorSpec{"gpu", {}, {}, {}}};
      }
      for (const TeamSpec& t : sc.teams) {
        QueueSpec q{t.name,        "fleet",     t.weight, {}, t.disruption_budget,
                    t.strict_fifo, t.preemption};
        q.when_can_borrow = t.when_can_borrow;
        q.reclaim_min_runtime_s = t.reclaim_min_runtime_s;
        q.quotas["gpu"] = QuotaSpec{t.guarantee_milli.value_or(0) - t.mig_guarantee_milli,
                                    t.borrowing_limit_milli, t.lending_limit_milli};
        if (sc.mig_pool) q.quotas["mig"] = QuotaSpec{t.mig_guarantee_milli, {}, {}};
        if (sc.cpu_guarantees) q.quotas[kCpuQuota] = QuotaSpec{t.cpu_guarantee_milli, {}, {}};
        c.queues.push_back(q);
      }
    }
    // Whether elastic jobs grow is the workloads' matter: the same under every policy.
    c.elastic_growth = sc.admission.elastic_growth;
    ASSIGN_OR_RETURN(g.admitter, Admitter::Create(g.fleet, tenants, c, *g.policy, 1));
  }
  auto queue_for = [&](int team) -> std::string {
    if (policy_name == "dedicated") return "own";
    if (policy_name == "fifo") return "shared";
    return sc.admission.queues.empty() ? sc.teams[team].name : sc.teams[team].queue;
  };

  // ---- the event loop ----
  const int nw = static_cast<int>(sc.workloads.size());
  std::vector<WState> ws(nw);
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  int64_t seq = 0;
  auto push = [&](double t, EventType type, int w, int epoch, int aux = -1) {
    int order = type == EventType::kArrive ? 2 : (type == EventType::kWake ? 1 : 0);
    events.push(Event{t, order, seq++, type, w, epoch, aux});
  };
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (int i = 0; i < nw; ++i) {
    push(sc.workloads[i].arrival_s, EventType::kArrive, i, 0);
    first = std::min(first, sc.workloads[i].arrival_s);
    last = std::max(last, sc.workloads[i].arrival_s);
  }
  if (nw == 0) first = 0;
  const double w0 = first, w1 = std::max(first + 1, last);

  // Per-team live quantities.
  std::vector<double> use_gpu(nteams, 0), use_cpu(nteams, 0), use_memory(nteams, 0),
      pend_gpu(nteams, 0), pend_cpu(nteams, 0), pend_memory(nteams, 0);
  std::vector<double> share_int(nteams, 0), fair_int(nteams, 0), below_int(nteams, 0),
      below_any_int(nteams, 0);
  // The guarantee is checked per team and pool (unit u = 2 x team + pool, the team being the
  // first of its leaf's, below): GPUs held, guarantee, and pending workloads by size (size,
  // workload).
  // Teams that wait in one leaf of the file's tree share its guarantee: checked together, as
  // their leaf's (a trial's two teams of one leaf were each held to half of it, and one's wait
  // while the other held the rest read as fabrica's breach). Under dedicated each owns its slice.
  std::vector<int> guar_of_team(nteams);
  for (int i = 0; i < nteams; ++i) {
    guar_of_team[i] = i;
    if (policy_name != "dedicated" && !sc.admission.queues.empty())
      for (int j = 0; j < i; ++j)
        if (sc.teams[j].queue == sc.teams[i].queue) {
          guar_of_team[i] = guar_of_team[j];
          break;
        }
  }
  const int nunits = 2 * nteams;
  auto unit_of = [&](int w) { return 2 * guar_of_team[sc.workloads[w].team] + pool_of(w); };
  std::vector<double> unit_use(nunits, 0), unit_guar(nunits, 0), room_seen(nunits);
  for (int i = 0; i < nteams; ++i)
    for (int p = 0; p < 2; ++p) unit_guar[2 * guar_of_team[i] + p] += pool_guarantee[i][p];
  room_seen = unit_guar;
  std::vector<std::set<std::pair<double, int>>> pend_by_size(nunits);
  std::vector<int64_t> blocked_pending(nunits, 0);  // policy-blocked work, pending to the end
  // Pending workloads in their queue's order (-priority, the admitter's arrival, workload), and
  // those that fit in that order.
  std::vector<std::set<std::tuple<int, double, int>>> pend_order(nunits);
  std::vector<std::vector<int>> fit_in_order(nunits);
  auto below_guarantee = [&](int u) {
    return unit_use[u] < unit_guar[u] && !pend_by_size[u].empty() &&
           pend_by_size[u].begin()->first <= unit_guar[u] - unit_use[u] + 1e-9;
  };
  // Guarantee-bound episodes: spans in which a unit holds less than its guarantee while one of
  // its pending workloads would fit in the difference.
  std::vector<double> ep_start(nunits, -1), ep_victim_mr(nunits, 0);
  std::vector<int64_t> preempted(nteams, 0);
  std::vector<std::map<std::string, int64_t>> preempted_by(nteams);
  std::vector<double> team_lost(nteams, 0);
  std::vector<std::string> infeasible_why(nteams);      // the last infeasible workload's reason
  std::vector<std::string> policy_blocked_why(nteams);  // ... and the last policy-blocked one's
  std::optional<ClusterState> whole_fleet;  // (dedicated: what the whole fleet could run)
  double alloc_int = 0, alloc_now = 0;
  double lost_int = 0;  // milli-GPU·s inside the window of runs that evictions threw away
  double clock = w0;
  std::vector<double> weights(nteams);
  for (int i = 0; i < nteams; ++i) weights[i] = sc.teams[i].weight;

  ReplayResult res;
  auto close_episode = [&](int u, double at) {
    double length = at - ep_start[u];
    double bound = sc.interval_s + sc.grace_s + ep_victim_mr[u];
    ++res.episodes;
    res.episode_worst_excess_s = std::max(res.episode_worst_excess_s, length - bound);
    if (length > bound + 1e-9) ++res.episode_exceptions;
    ep_start[u] = -1;
    ep_victim_mr[u] = 0;
  };
  auto reset_wait = [&](WState& st, int view) {
    st.fits_since[view] = -1;
    st.victim_mr[view] = 0;
    st.budget_s[view] = 0;
    st.budget_since[view] = -1;
    st.promised_s[view] = 0;
    st.promised_since[view] = -1;
    st.nothing_s[view] = 0;
    st.nothing_since[view] = -1;
    st.excused_s[view] = 0;
    st.excused_since[view] = -1;
  };
  auto check_wait = [&](int w, int view, double at, const std::string& note) {
    WState& st = ws[w];
    ReplayResult::BoundCheck& b = view == kInOrder ? res.bound : res.bound_alone;
    double wait = at - st.fits_since[view];
    double bound = sc.interval_s + sc.grace_s + st.victim_mr[view];
    double blocked =
        st.budget_s[view] + (st.budget_since[view] >= 0 ? at - st.budget_since[view] : 0);
    ++b.checked;
    b.worst_excess_s = std::max(b.worst_excess_s, wait - bound);
    if (wait > bound + 1e-9) {
      std::string cause = note + st.reason;
      std::string kind = ExceptionKind(st.reason);
      if (blocked > 0) {
        cause += " (a disruption budget forbade its evictions for " +
                 std::to_string(static_cast<int64_t>(blocked)) + " s of the wait)";
        if (wait - blocked <= bound + 1e-9) kind = "disruption budget";
      }
      const double spoken =
          st.promised_s[view] + (st.promised_since[view] >= 0 ? at - st.promised_since[view] : 0);
      if (spoken > 0) {
        cause += " (for " + std::to_string(static_cast<int64_t>(spoken)) +
                 " s of the wait its team's room was promised to other workloads of its queue "
                 "already reclaiming)";
        if (kind != "disruption budget" && wait - spoken <= bound + 1e-9)
          kind = "room promised in its queue";
      }
      const double nothing =
          st.nothing_s[view] + (st.nothing_since[view] >= 0 ? at - st.nothing_since[view] : 0);
      if (nothing > 0) {
        cause += " (for " + std::to_string(static_cast<int64_t>(nothing)) +
                 " s of the wait no other queue held more than its guarantee and its own queue "
                 "ran nothing it may preempt: nothing to reclaim)";
        if (kind != "disruption budget" && kind != "room promised in its queue" &&
            wait - nothing <= bound + 1e-9)
          kind = "nothing to reclaim";
      }
      // None alone explains the excess but together they do: named by the longest.
      const double excused =
          st.excused_s[view] + (st.excused_since[view] >= 0 ? at - st.excused_since[view] : 0);
      if (kind != "disruption budget" && kind != "room promised in its queue" &&
          kind != "nothing to reclaim" && wait - excused <= bound + 1e-9) {
        kind = blocked >= spoken && blocked >= nothing ? "disruption budget"
               : spoken >= nothing                     ? "room promised in its queue"
                                                       : "nothing to reclaim";
        kind += " (with others)";
      }
      b.exceptions.push_back({sc.workloads[w].spec.name.str(), sc.teams[sc.workloads[w].team].name,
                              wait, bound, cause, kind});
    }
    reset_wait(st, view);
  };
  // A wait ends: checked if it already ran past its bound (its own team then took the room, or
  // it was admitted), otherwise forgotten.
  auto stop_fitting = [&](int w, int view, double t) {
    WState& st = ws[w];
    if (t - st.fits_since[view] > sc.interval_s + sc.grace_s + st.victim_mr[view] + 1e-9) {
      check_wait(w, view, t, "stopped fitting after waiting past the bound: ");
    } else {
      reset_wait(st, view);
    }
  };
  auto start_fitting = [&](int w, int view, double t) {
    if (ws[w].fits_since[view] < 0 && t >= w0 && t <= w1) ws[w].fits_since[view] = t;
  };
  // A unit's room or pending work changed: workloads that now fit start their wait, those that
  // no longer fit end it.
  auto refit = [&](int u, double t) {
    const double room = unit_guar[u] - unit_use[u] + 1e-9;
    auto& by = pend_by_size[u];
    const double lo = std::min(room, room_seen[u]), hi = std::max(room, room_seen[u]);
    for (auto it = by.upper_bound({lo, nw}); it != by.end() && it->first <= hi; ++it) {
      if (it->first <= room)
        start_fitting(it->second, kAlone, t);
      else if (ws[it->second].fits_since[kAlone] >= 0)
        stop_fitting(it->second, kAlone, t);
    }
    room_seen[u] = room;
    // In queue order: each workload that fits in what those before it that fit have left. The
    // walk stops once the smallest pending workload no longer fits.
    std::vector<int> fit;
    double left = room;
    const double smallest = by.empty() ? 0 : by.begin()->first;
    for (auto it = pend_order[u].begin(); it != pend_order[u].end() && left >= smallest; ++it) {
      const int w = std::get<2>(*it);
      const double g = WorkloadMilli(sc.workloads[w].spec, sc.mean_gpu_memory_mib);
      if (g > left) continue;
      left -= g;
      fit.push_back(w);
    }
    std::sort(fit.begin(), fit.end());
    for (int w : fit_in_order[u])
      if (!std::binary_search(fit.begin(), fit.end(), w) && ws[w].fits_since[kInOrder] >= 0)
        stop_fitting(w, kInOrder, t);
    for (int w : fit) start_fitting(w, kInOrder, t);
    fit_in_order[u] = std::move(fit);
  };
  // Units whose room or pending work changed at instant `changed_at`: refitted once, when time
  // moves on or the caller asks (flush), not after every event of the instant.
  std::vector<char> unit_changed(nunits, 0);
  std::vector<int> changed_units;
  double changed_at = -1;
  auto flush = [&]() {
    for (int u : changed_units) {
      unit_changed[u] = 0;
      refit(u, changed_at);
    }
    changed_units.clear();
  };
  auto changed_unit = [&](int u, double t) {
    if (t != changed_at) flush();
    changed_at = t;
    if (!unit_changed[u]) {
      unit_changed[u] = 1;
      changed_units.push_back(u);
    }
  };
  auto integrate = [&](double to) {
    if (to > clock) {
      for (int u = 0; u < nunits; ++u) {
        bool below = below_guarantee(u);
        if (below && ep_start[u] < 0 && clock >= w0 && clock <= w1) ep_start[u] = clock;
        if (!below && ep_start[u] >= 0) close_episode(u, clock);
      }
    }
    double a = std::max(clock, w0), b = std::min(to, w1);
    if (b > a) {
      double dt = b - a;
      alloc_int += alloc_now * dt;
      std::vector<double> demand(nteams);
      for (int i = 0; i < nteams; ++i) {
        // (Dominant: the largest of its shares of GPUs, CPU and memory, as DRF's.)
        double s =
            std::max({use_gpu[i] / cap_gpu, use_cpu[i] / cap_cpu, use_memory[i] / cap_memory});
        share_int[i] += s * dt;
        demand[i] = std::min(1.0, std::max({(use_gpu[i] + pend_gpu[i]) / cap_gpu,
                                            (use_cpu[i] + pend_cpu[i]) / cap_cpu,
                                            (use_memory[i] + pend_memory[i]) / cap_memory}));
        const int g = guar_of_team[i];
        if (below_guarantee(2 * g) || below_guarantee(2 * g + 1)) below_int[i] += dt;
        // (The issue's words taken literally: below it with any work pending, even work too
        // large for the difference.)
        for (int u : {2 * g, 2 * g + 1})
          if (unit_use[u] < unit_guar[u] - 1e-9 &&
              (!pend_by_size[u].empty() || blocked_pending[u] > 0)) {
            below_any_int[i] += dt;
            break;
          }
      }
      std::vector<double> fair = WaterFill(demand, weights, 1.0);
      for (int i = 0; i < nteams; ++i) fair_int[i] += fair[i] * dt;
    }
    clock = std::max(clock, to);
  };
  auto add_pending = [&](int w, double t) {
    const ReplayWorkload& rw = sc.workloads[w];
    double g = WorkloadMilli(rw.spec, sc.mean_gpu_memory_mib), c = WorkloadCpu(rw.spec);
    pend_gpu[rw.team] += g;
    pend_cpu[rw.team] += c;
    pend_memory[rw.team] += WorkloadMemory(rw.spec);
    ws[w].pending_since = t;
    // (Work only the policy keeps out waits in the waits and fair shares, not in the guarantee
    // bound: it fits no guarantee this policy keeps — a review saw episodes that never closed.)
    if (ws[w].policy_blocked) {
      ++blocked_pending[unit_of(w)];  // (pending to the end: in the any-pending view)
      return;
    }
    const int u = unit_of(w);
    pend_by_size[u].insert({g, w});
    ws[w].order = {-rw.spec.priority, groups[ws[w].group].admitter->arrival(ws[w].id), w};
    pend_order[u].insert(ws[w].order);
    if (g <= room_seen[u]) start_fitting(w, kAlone, t);
    changed_unit(u, t);
  };
  auto remove_pending = [&](int w, double t) {
    const ReplayWorkload& rw = sc.workloads[w];
    double g = WorkloadMilli(rw.spec, sc.mean_gpu_memory_mib), c = WorkloadCpu(rw.spec);
    pend_gpu[rw.team] -= g;
    pend_cpu[rw.team] -= c;
    pend_memory[rw.team] -= WorkloadMemory(rw.spec);
    ws[w].wait_total += t - ws[w].pending_since;
    ws[w].pending_since = -1;
    const int u = unit_of(w);
    pend_by_size[u].erase({g, w});
    pend_order[u].erase(ws[w].order);
    for (int view : {kInOrder, kAlone})
      if (ws[w].fits_since[view] >= 0) check_wait(w, view, t, "");
    std::erase(fit_in_order[u], w);
  };
  // Each of run h's assignments' pod set: a fragment names them, a run holds pod_counts per
  // set in order.
  const auto sets_of = [](const Admitter& a, int h) {
    std::vector<int> set_of;
    if (a.fragment_of(h) >= 0) {
      for (const auto& [set, index] : a.fragment_pods(h)) set_of.push_back(set);
    } else {
      const std::vector<int>& counts = a.pod_counts(h);
      for (size_t k = 0; k < counts.size(); ++k)
        set_of.insert(set_of.end(), counts[k], static_cast<int>(k));
    }
    return set_of;
  };
  // The milli-GPUs run h of workload w asks of the GPUs it holds (PlacedPodMilli, pod by pod).
  const auto held_milli = [&](const Admitter& a, int h, int w) {
    const Workload& spec = sc.workloads[w].spec;
    const std::vector<int> set_of = sets_of(a, h);
    const std::vector<Assignment>& as = a.assignments(h);
    double milli = 0;
    for (size_t p = 0; p < as.size(); ++p)
      milli += PlacedPodMilli(spec.pod_sets[p < set_of.size() ? set_of[p] : 0].device, as[p]);
    return milli;
  };
  auto use = [&](int w, double t, int sign) {
    const ReplayWorkload& rw = sc.workloads[w];
    const double g = sign * ws[w].run_milli;
    use_gpu[rw.team] += g;
    use_cpu[rw.team] += sign * WorkloadCpu(rw.spec) * ws[w].rate;
    use_memory[rw.team] += sign * WorkloadMemory(rw.spec) * ws[w].rate;
    alloc_now += g;
    unit_use[unit_of(w)] += g;
    changed_unit(unit_of(w), t);
  };
  auto start_use = [&](int w, double t) { use(w, t, +1); };
  // Over [a, b] of its current run: the work done (in seconds of the whole workload at full
  // size), or with `gpu` the milli-GPU·s held.
  auto run_integral = [](const WState& st, double a, double b, bool gpu) {
    double sum = 0;
    for (size_t k = 0; k < st.spells.size(); ++k) {
      const auto [from, rate, milli] = st.spells[k];
      const double to = k + 1 < st.spells.size() ? std::get<0>(st.spells[k + 1])
                                                 : std::numeric_limits<double>::infinity();
      const double span = std::min(b, to) - std::max(a, from);
      if (span > 0) sum += span * (gpu ? milli : rate);
    }
    return sum;
  };
  auto stop_use = [&](int w, double t) { use(w, t, -1); };
  // What the pods an elastic shrink took from run w (fragment h of its admitter) hold until
  // they stop (their grace period): added (sign +1) and, when they stop, taken off (-1).
  auto held_by_stopping = [&](int w, int h, int sign, double t) {
    const ReplayWorkload& rw = sc.workloads[w];
    const Admitter& a = *groups[ws[w].group].admitter;
    // (What the pods ask, as a running workload's use counts it: not what a fraction is charged.)
    const double pods = static_cast<double>(a.assignments(h).size());
    const double g = sign * held_milli(a, h, w);
    use_gpu[rw.team] += g;
    use_cpu[rw.team] += sign * WorkloadCpu(rw.spec) * pods / rw.spec.pod_count();
    use_memory[rw.team] += sign * WorkloadMemory(rw.spec) * pods / rw.spec.pod_count();
    alloc_now += g;
    unit_use[unit_of(w)] += g;
    changed_unit(unit_of(w), t);
  };

  // Handle → workload, per group.
  std::vector<std::vector<int>> by_handle(groups.size());
  res.scenario = sc.name;
  res.policy = policy_name;
  res.load = sc.load;
  res.window_s = w1 - w0;
  res.workloads = nw;
  res.left_out = sc.left_out;
  res.left_out_zero = sc.left_out_zero;
  res.offered_load = sc.offered_load;
  res.offered_load_unclipped = sc.offered_load_unclipped;
  {
    double asked = 0;  // milli-GPU·s requested inside [w0, w1]
    for (const ReplayWorkload& w : sc.workloads)
      asked += WorkloadMilli(w.spec, sc.mean_gpu_memory_mib) *
               std::max(0.0, std::min(w1, w.arrival_s + w.duration_s) - std::max(w0, w.arrival_s));
    res.offered_load_measured = asked / (cap_gpu * (w1 - w0));
  }
  res.copies = sc.copies;
  res.synthetic = sc.synthetic;
  res.compression = sc.compression;

  // ---- the event log (events_out) ----
  const auto log_line = [&](const nlohmann::json& j) { *events_out << j.dump() << '\n'; };
  if (events_out != nullptr) {
    nlohmann::json h;
    h["ev"] = "scenario";
    h["scenario"] = sc.name;
    h["policy"] = policy_name;
    h["window"] = {w0, w1};
    h["interval_s"] = sc.interval_s;
    h["grace_s"] = sc.grace_s;
    for (int i = 0; i < nteams; ++i) {
      const TeamSpec& t = sc.teams[i];
      h["teams"].push_back({{"name", t.name},
                            {"trust", TrustLevelName(t.trust)},
                            {"trust_domain", t.trust_domain.empty() ? t.name : t.trust_domain},
                            {"weight", t.weight},
                            {"nodes", policy_name == "dedicated" ? nlohmann::json::array()
                                                                 : nlohmann::json(nullptr)}});
    }
    if (policy_name == "dedicated")
      for (int i = 0; i < nteams; ++i)
        for (const Node& n : groups[group_of_team[i]].fleet.nodes)
          h["teams"][i]["nodes"].push_back(n.name.str());
    for (const Node& n : sc.fleet.nodes) {
      nlohmann::json jn = {{"name", n.name.str()},
                           {"cpu", n.cpu.value()},
                           {"memory", n.memory.value()},
                           {"gpus", nlohmann::json::array()}};
      for (const Device& d : n.devices)
        jn["gpus"].push_back(
            {{"model", d.model}, {"memory", d.memory.value()}, {"mig", d.mig_slices}});
      h["nodes"].push_back(std::move(jn));
    }
    log_line(h);
  }
  const auto log_arrive = [&](int w, double t, bool infeasible) {
    const ReplayWorkload& rw = sc.workloads[w];
    int pods = 0, least = 0;
    nlohmann::json sets = nlohmann::json::array();
    for (const PodSet& ps : rw.spec.pod_sets) {
      pods += ps.count;
      least += ps.least();
      sets.push_back({{"count", ps.count},
                      {"least", ps.least()},
                      {"kind", kDeviceKinds[static_cast<int>(ps.device.kind)]},
                      {"gpus", PodGpus(ps)},
                      {"milli", ps.device.gpu_milli.value()},
                      {"gpu_memory", ps.device.gpu_memory.value()},
                      {"profile", ps.device.mig_profile},
                      {"models", ps.device.models},
                      {"cpu", ps.cpu.value()},
                      {"memory", ps.memory.value()},
                      {"selects_nodes", !ps.nodes.empty()}});
    }
    const TopologyConstraint& topology = rw.spec.topology;
    log_line({{"ev", "arrive"},
              {"t", t},
              {"w", rw.spec.name.str()},
              {"team", rw.team},
              {"milli", WorkloadMilli(rw.spec, sc.mean_gpu_memory_mib)},
              {"cpu", WorkloadCpu(rw.spec)},
              {"memory", WorkloadMemory(rw.spec)},
              {"pods", pods},
              {"least_pods", least},
              {"duration_s", rw.duration_s},
              {"checkpoint_s", rw.options.checkpoint_interval_s},
              {"topology_required", topology.required && topology.level != TopologyLevel::kNone},
              {"sets", std::move(sets)},
              {"infeasible", infeasible}});
  };
  // What run h of group gi (a workload's admitter handle, or a fragment a shrink took) holds
  // now: its pods, each with its request and its devices. Logged whenever that changes.
  const auto run_name = [](size_t gi, int h) {
    return std::to_string(gi) + ":" + std::to_string(h);
  };
  const auto log_place = [&](size_t gi, int h, int w, double t) {
    const Admitter& a = *groups[gi].admitter;
    const Workload& spec = sc.workloads[w].spec;
    const std::vector<int> set_of = sets_of(a, h);
    const std::vector<Assignment>& as = a.assignments(h);
    nlohmann::json pods = nlohmann::json::array();
    for (size_t p = 0; p < as.size(); ++p) {
      const PodSet& ps = spec.pod_sets[p < set_of.size() ? set_of[p] : 0];
      nlohmann::json devs = nlohmann::json::array();
      for (const DeviceShare& d : as[p].devices)
        devs.push_back({d.device, d.milli, d.memory_mib, d.mig_slice});
      pods.push_back({{"node", groups[gi].fleet.nodes[as[p].node].name.str()},
                      {"set", p < set_of.size() ? set_of[p] : -1},
                      {"kind", kDeviceKinds[static_cast<int>(ps.device.kind)]},
                      {"milli", PlacedPodMilli(ps.device, as[p])},
                      {"cpu", ps.cpu.value()},
                      {"memory", ps.memory.value()},
                      {"gpus", PodGpus(ps)},
                      {"gpu_memory", ps.device.gpu_memory.value()},
                      {"profile", ps.device.mig_profile},
                      {"models", ps.device.models},
                      {"devices", std::move(devs)}});
    }
    log_line({{"ev", "place"},
              {"t", t},
              {"run", run_name(gi, h)},
              {"w", spec.name.str()},
              {"team", sc.workloads[w].team},
              {"pods", std::move(pods)}});
  };
  const auto log_run = [&](const char* ev, size_t gi, int h, int w, double t,
                           const char* why = nullptr, int by = -1) {
    nlohmann::json j = {
        {"ev", ev}, {"t", t}, {"run", run_name(gi, h)}, {"w", sc.workloads[w].spec.name.str()}};
    if (why != nullptr) j["why"] = why;
    if (by >= 0) j["by"] = sc.workloads[by].spec.name.str();
    log_line(j);
  };

  double tick = std::ceil(w0 / sc.interval_s) * sc.interval_s;
  bool dirty = true;
  while (true) {
    while (!events.empty() && events.top().t <= tick) {
      Event ev = events.top();
      events.pop();
      integrate(ev.t);
      WState& st = ws[ev.w];
      const ReplayWorkload& rw = sc.workloads[ev.w];
      Admitter& adm = *groups[st.group].admitter;
      switch (ev.type) {
        case EventType::kArrive: {
          st.group = group_of_team[rw.team];
          Admitter& a = *groups[st.group].admitter;
          Workload spec = rw.spec;
          spec.queue = QueueId(queue_for(rw.team));
          if (sc.time_limit_factor > 0)
            spec.max_runtime_seconds = std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(rw.duration_s * sc.time_limit_factor)));
          ASSIGN_OR_RETURN(st.id, a.Submit(spec, ev.t, rw.options));
          if (static_cast<int>(by_handle[st.group].size()) <= st.id)
            by_handle[st.group].resize(st.id + 1, -1);
          by_handle[st.group][st.id] = ev.w;
          // (Work this policy can never start that the whole fleet could is not infeasible:
          // a shared fleet without its limits could start it. It waits, in the waits and the
          // fair shares, to the end: a trial's node-less team, and a review's team whose
          // dedicated slice held no node of the MIG slices it asked, read Jain 1.000.)
          bool infeasible = a.phase(st.id) == Phase::kInfeasible;
          if (infeasible) {
            // (... unless the whole fleet could not run it either: then it is left out as
            // under the other policies.)
            if (!whole_fleet) whole_fleet.emplace(sc.fleet, tenants);
            infeasible = !WholeFleetRuns(*whole_fleet, rw.spec);
          }
          if (events_out != nullptr) log_arrive(ev.w, ev.t, infeasible);
          if (!infeasible && a.phase(st.id) == Phase::kInfeasible) {
            st.policy_blocked = true;
            // (Its admitter's fleet is the team's slice under dedicated: "the fleet" there, said
            // so — a trial read "though the whole fleet could … the whole fleet holds only 1".)
            std::string why = a.reason(st.id);
            if (policy_name == "dedicated")
              for (const char* fleet : {"the whole fleet", "the fleet"})
                for (size_t at = why.find(fleet); at != std::string::npos;
                     at = why.find(fleet, at + 9))
                  why.replace(at, std::strlen(fleet), "its slice");
            policy_blocked_why[rw.team] = std::move(why);
          }
          if (infeasible) {
            st.pending_since = ev.t;  // never admitted: waits until the replay ends
            st.infeasible = true;
            infeasible_why[rw.team] = a.reason(st.id);
            break;
          }
          add_pending(ev.w, ev.t);
          dirty = true;
          break;
        }
        case EventType::kFinish:
          if (ev.epoch != st.epoch || !st.running) break;
          if (events_out != nullptr) log_run("free", st.group, st.id, ev.w, ev.t, "finish");
          adm.Finish(st.id, ev.t);
          st.running = false;
          stop_use(ev.w, ev.t);
          dirty = true;
          break;
        case EventType::kTerminate:
          if (ev.epoch != st.epoch || !st.running || !st.evicting) break;
          if (events_out != nullptr) log_run("free", st.group, st.id, ev.w, ev.t, "evicted");
          adm.Terminated(st.id, ev.t);
          {
            // Work up to its last checkpoint is kept (the rerun resumes there); the rest is lost.
            // (Progress counts whole-workload seconds: a run with part of its pods makes less.)
            const double ran = ev.t - st.admit_t, every = rw.options.checkpoint_interval_s;
            const double saved = every > 0 ? std::clamp(ran - std::fmod(ran, every), 0.0, ran) : 0;
            const double from = st.admit_t + saved;
            st.progress += run_integral(st, st.admit_t, from, false);
            const double lost = run_integral(st, from, ev.t, true);
            res.gpu_seconds_lost += lost / 1000.0;
            team_lost[rw.team] += lost / 1000.0;
            lost_int += run_integral(st, std::max(from, w0), std::min(ev.t, w1), true);
          }
          st.running = false;
          st.evicting = false;
          ++st.epoch;
          stop_use(ev.w, ev.t);
          add_pending(ev.w, ev.t);
          dirty = true;
          break;
        case EventType::kWake:
          dirty = true;
          break;
        case EventType::kShrunk: {
          // Its devices are free now; the run (if it still runs) holds only what it kept.
          held_by_stopping(ev.w, ev.aux, -1, ev.t);
          if (events_out != nullptr) log_run("free", st.group, ev.aux, ev.w, ev.t, "shrunk");
          adm.Terminated(ev.aux, ev.t);
          dirty = true;
          break;
        }
      }
    }
    flush();
    integrate(tick);
    bool changed = false;
    if (dirty) {
      dirty = false;
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        auto t0 = std::chrono::steady_clock::now();
        CycleResult cr = groups[gi].admitter->Cycle(tick, 1000000);
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++res.cycles;
        res.cycle_seconds += sec;
        res.cycle_max_seconds = std::max(res.cycle_max_seconds, sec);
        Admitter& adm = *groups[gi].admitter;
        // (Logged first: what a timed-out gang frees, admissions of this cycle may take.)
        if (events_out != nullptr)
          for (int h : cr.released) log_run("free", gi, h, by_handle[gi][h], tick, "released");
        // A reclaim hold that began now ends with a cycle, whatever else happens then.
        if (sc.admission.reclaim_hold_s > 0 && policy_name == "fabrica") {
          for (int q = 0; q < adm.queue_count(); ++q)
            if (adm.reclaim_record(q).at == tick)
              push(tick + sc.admission.reclaim_hold_s, EventType::kWake, 0, 0);
        }
        for (int h : cr.admitted) {
          int w = by_handle[gi][h];
          WState& st = ws[w];
          remove_pending(w, tick);
          st.running = true;
          st.admit_t = tick;
          st.ever_admitted = true;
          adm.PodsReady(h);
          st.rate = 1;
          if (adm.partially_admitted(h)) {
            int started = 0;
            for (int c : adm.pod_counts(h)) started += c;
            st.rate = static_cast<double>(started) / sc.workloads[w].spec.pod_count();
            ++res.partial_admissions;
          }
          st.run_milli = held_milli(adm, h, w);
          st.spells = {{tick, st.rate, st.run_milli}};
          start_use(w, tick);
          if (events_out != nullptr) log_place(gi, h, w, tick);
          ++st.epoch;
          push(tick + std::max(0.0, sc.workloads[w].duration_s - st.progress) / st.rate,
               EventType::kFinish, w, st.epoch);
          // (Other queues may evict it once its queue's reclaimMinRuntime has passed, its own
          // queue once its own minimum runtime has.)
          const double mr = sc.workloads[w].options.min_runtime_s;
          const double cap = adm.reclaim_min_runtime(adm.queue_of(h));
          if (mr > 0 && policy_name == "fabrica") {
            push(tick + mr, EventType::kWake, w, 0);
            if (cap < mr) push(tick + cap, EventType::kWake, w, 0);
          }
          changed = true;
        }
        // Elastic growth: from now on it runs (and finishes) at its new size.
        // Resized (grown, or shrunk by a preemption): from now it runs, and finishes, at the
        // pace of the pods admitter handle h holds.
        const auto resize = [&](int w, int h) {
          WState& st = ws[w];
          const double done = st.progress + run_integral(st, st.admit_t, tick, false);
          stop_use(w, tick);
          int pods = 0;
          for (int c : adm.pod_counts(h)) pods += c;
          st.rate = static_cast<double>(pods) / sc.workloads[w].spec.pod_count();
          st.run_milli = held_milli(adm, h, w);
          st.spells.push_back({tick, st.rate, st.run_milli});
          start_use(w, tick);
          if (events_out != nullptr) log_place(gi, h, w, tick);
          ++st.epoch;
          push(tick + std::max(0.0, sc.workloads[w].duration_s - done) / st.rate,
               EventType::kFinish, w, st.epoch);
          changed = true;
        };
        for (int h : cr.grown) {
          const int w = by_handle[gi][h];
          if (!ws[w].running || ws[w].evicting) continue;
          resize(w, h);
          ++res.elastic_growths;
        }
        for (const Eviction& e : cr.evicted) {
          if (e.preemptor < 0) continue;  // a drain: scenario queues cannot be stopped
          if (const int parent = adm.fragment_of(e.victim); parent >= 0) {
            // Elastic shrink: the run goes on with the pods it keeps, from now at their pace
            // (no work lost); the pods taken hold their GPUs until their grace ends.
            const int w = by_handle[gi][parent];
            resize(w, parent);
            held_by_stopping(w, e.victim, +1, tick);
            if (events_out != nullptr) {
              log_place(gi, e.victim, w, tick);
              log_run("evict", gi, e.victim, w, tick, "shrink", by_handle[gi][e.preemptor]);
            }
            push(tick + sc.grace_s, EventType::kShrunk, w, 0, e.victim);
            ++res.elastic_shrinks;
            res.elastic_shrink_pods += static_cast<int64_t>(adm.assignments(e.victim).size());
            continue;
          }
          int v = by_handle[gi][e.victim], p = by_handle[gi][e.preemptor];
          WState& vs = ws[v];
          if (events_out != nullptr) log_run("evict", gi, e.victim, v, tick, nullptr, p);
          vs.evicting = true;
          ++vs.evictions;
          ++res.preemptions;
          ++preempted[sc.workloads[v].team];
          ++preempted_by[sc.workloads[v].team][sc.teams[sc.workloads[p].team].name];
          const int pu = unit_of(p);
          // What was left of the victim's minimum runtime (as it held against the preemptor)
          // when the wait began (all of it for a victim that started later).
          const double mr = adm.MinRuntime(e.victim, e.preemptor);
          auto left_at = [&](double from) {
            return std::min(mr, std::max(0.0, vs.admit_t + mr - from));
          };
          if (ep_start[pu] >= 0)
            ep_victim_mr[pu] = std::max(ep_victim_mr[pu], left_at(ep_start[pu]));
          for (int view : {kInOrder, kAlone})
            if (ws[p].fits_since[view] >= 0)
              ws[p].victim_mr[view] =
                  std::max(ws[p].victim_mr[view], left_at(ws[p].fits_since[view]));
          push(tick + sc.grace_s, EventType::kTerminate, v, vs.epoch);
          changed = true;
        }
        // A preemptor whose victims were all taken back goes first next cycle.
        if (!cr.taken_back.empty()) changed = true;
        for (int h : cr.released) {
          int w = by_handle[gi][h];
          ws[w].running = false;
          ++ws[w].epoch;
          stop_use(w, tick);
          add_pending(w, tick);
          changed = true;
        }
      }
      flush();
      // Remember why the workloads that fit their team's room still wait, and, when they wait
      // for victims still within their minimum runtime, how much of it was left when the wait
      // began (it extends their bound as an evicted victim's does).
      // The generated queues' flavours are "gpu" and (with a MIG pool) "mig".
      const bool track_promises = policy_name == "fabrica" && sc.admission.queues.empty();
      auto note_reason = [&](int w) {
        WState& st = ws[w];
        const Admitter& adm = *groups[st.group].admitter;
        st.reason = adm.reason(st.id);
        const bool blocked = adm.budget_blocked(st.id);
        // Room below its queue's guarantee (its own evicting work counted as gone, as the
        // admitter counts it) that fits it but is promised to others of its queue.
        bool promised = false;
        if (track_promises) {
          const std::string flavor = pool_of(w) == 1 ? "mig" : "gpu";
          const double room = static_cast<double>(adm.room_below_guarantee(st.id, flavor));
          const double size = WorkloadMilli(sc.workloads[w].spec, sc.mean_gpu_memory_mib);
          promised =
              size <= room + 1e-9 &&
              size > room - static_cast<double>(adm.promised_to_others(st.id, flavor)) + 1e-9;
        }
        // (Not while its own victims stop, nor while its room is promised to others: those
        // are waits of their own.)
        const bool nothing = policy_name == "fabrica" && !adm.nominated(st.id) && !promised &&
                             !adm.may_preempt(st.id);
        // Time in a state: from when it began (since) to when it ended (added to total).
        const auto track = [&](bool on, double& total, double& since) {
          if (on && since < 0) since = tick;
          if (!on && since >= 0) {
            total += tick - since;
            since = -1;
          }
        };
        for (int view : {kInOrder, kAlone}) {
          if (st.fits_since[view] < 0) continue;
          track(blocked, st.budget_s[view], st.budget_since[view]);
          track(promised, st.promised_s[view], st.promised_since[view]);
          track(nothing, st.nothing_s[view], st.nothing_since[view]);
          track(blocked || promised || nothing, st.excused_s[view], st.excused_since[view]);
        }
        if (const double ready = adm.victims_ready_at(st.id); ready >= 0) {
          for (int view : {kInOrder, kAlone}) {
            if (st.fits_since[view] < 0) continue;
            const double left = std::min(adm.victims_min_runtime(st.id),
                                         std::max(0.0, ready - st.fits_since[view]));
            st.victim_mr[view] = std::max(st.victim_mr[view], left);
          }
        }
      };
      for (int u = 0; u < nunits; ++u) {
        for (const auto& [size, w] : pend_by_size[u]) {
          if (size > room_seen[u]) break;
          if (ws[w].fits_since[kAlone] >= 0 || ws[w].fits_since[kInOrder] >= 0) note_reason(w);
        }
      }
    }
    if (changed) dirty = true;
    if (std::getenv("FABRICA_REPLAY_DEBUG") && static_cast<int64_t>(tick) % 600 == 0) {
      int64_t pend = 0;
      for (auto& g : groups)
        for (int q = 0; q < g.admitter->queue_count(); ++q) pend += g.admitter->pending_count(q);
      std::fprintf(stderr, "t=%.0f alloc=%.1f%% pending=%lld\n", tick, 100 * alloc_now / cap_gpu,
                   static_cast<long long>(pend));
    }
    if (events.empty() && !changed) break;
    double next = tick + sc.interval_s;
    if (!changed && !events.empty())
      next = std::max(next, std::ceil(events.top().t / sc.interval_s) * sc.interval_s);
    tick = next;
  }
  flush();
  integrate(std::max(tick, w1));
  const double end = tick;
  if (events_out != nullptr) log_line({{"ev", "end"}, {"t", end}});
  for (int u = 0; u < nunits; ++u)
    if (ep_start[u] >= 0) close_episode(u, std::min(end, w1));
  for (int w = 0; w < nw; ++w)
    for (int view : {kInOrder, kAlone})
      if (ws[w].fits_since[view] >= 0 && ws[w].pending_since >= 0)
        check_wait(w, view, end, "never admitted: ");

  for (const Group& g : groups) {
    res.workloads_reserved += g.admitter->workloads_reserved();
    res.workloads_backfilled += g.admitter->workloads_backfilled();
  }
  res.utilization_pct = 100.0 * alloc_int / (cap_gpu * (w1 - w0));
  res.useful_utilization_pct = 100.0 * (alloc_int - lost_int) / (cap_gpu * (w1 - w0));
  std::vector<std::vector<double>> waits(nteams);
  static constexpr const char* kSizes[] = {"<1", "1", "2-8", "9-32", "33+"};
  std::vector<std::array<std::vector<double>, 5>> size_waits(nteams);
  for (int w = 0; w < nw; ++w) {
    WState& st = ws[w];
    int team = sc.workloads[w].team;
    // (Work no scheduler could start waits for nothing: left out of the waits as out of the
    // shares. Counted, it waited until the replay ended, which differs by policy: a trial's
    // team read 1,585 / 1,774 / 1,184 s where its runnable work waited 0 / 0 / 1.3 s.)
    if (st.infeasible) continue;
    double wait = st.wait_total;
    if (st.pending_since >= 0) wait += end - st.pending_since;
    waits[team].push_back(wait);
    // (A share of memory alone by the compute it asks of the mean GPU: "<1".)
    const auto milli =
        static_cast<int64_t>(WorkloadMilli(sc.workloads[w].spec, sc.mean_gpu_memory_mib));
    if (milli == 0) continue;  // (no GPU: in no bucket)
    // (By the GPUs rounded up: 1.5 is in "2-8".)
    const int size = milli < kMilliPerGpu         ? 0
                     : milli == kMilliPerGpu      ? 1
                     : milli <= 8 * kMilliPerGpu  ? 2
                     : milli <= 32 * kMilliPerGpu ? 3
                                                  : 4;
    size_waits[team][size].push_back(wait);
  }
  const auto mean_p95 = [](std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    std::sort(v.begin(), v.end());
    return std::make_pair(
        sum / v.size(),
        v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(0.95 * v.size())) - 1)]);
  };
  double sx = 0, sxx = 0;
  int nx = 0;
  for (int i = 0; i < nteams; ++i) {
    TeamResult t;
    t.name = sc.teams[i].name;
    for (int w = 0; w < nw; ++w)
      if (sc.workloads[w].team == i) {
        ++t.workloads;
        t.never_admitted += !ws[w].ever_admitted;
        t.infeasible += ws[w].infeasible;
        t.policy_blocked += ws[w].policy_blocked;
      }
    t.infeasible_reason = infeasible_why[i];
    t.policy_blocked_reason = policy_blocked_why[i];
    t.no_slice = no_slice_why[i];
    t.guarantee_gpus = guarantee[i] / kMilliPerGpu;
    std::vector<double>& v = waits[i];
    if (!v.empty()) std::tie(t.wait_mean_s, t.wait_p95_s) = mean_p95(v);
    for (int b = 0; b < 5; ++b) {
      std::vector<double>& sv = size_waits[i][b];
      if (sv.empty()) continue;
      TeamResult::SizeWaits sw{kSizes[b], static_cast<int64_t>(sv.size())};
      std::tie(sw.wait_mean_s, sw.wait_p95_s) = mean_p95(sv);
      t.waits_by_size.push_back(sw);
    }
    t.below_guarantee_pending_s = below_int[i];
    t.below_guarantee_any_pending_s = below_any_int[i];
    t.avg_share = share_int[i] / (w1 - w0);
    t.avg_fair_share = fair_int[i] / (w1 - w0);
    t.preempted = preempted[i];
    t.preempted_by = preempted_by[i];
    t.gpu_seconds_lost = team_lost[i];
    if (t.avg_fair_share > 0) {
      double x = t.avg_share / t.avg_fair_share;
      sx += x;
      sxx += x * x;
      ++nx;
    }
    res.teams.push_back(t);
  }
  res.jain_index = nx > 0 && sxx > 0 ? sx * sx / (nx * sxx) : 1.0;
  for (const WState& st : ws) {
    res.workloads_evicted += st.evictions > 0;
    res.workloads_evicted_3plus += st.evictions >= 3;
    res.evictions_max = std::max<int64_t>(res.evictions_max, st.evictions);
  }
  return res;
}

void PrintReplayJson(const ReplayResult& r, std::ostream& out) {
  nlohmann::json j;
  j["scenario"] = r.scenario;
  j["policy"] = r.policy;
  j["load"] = r.load;
  j["window_s"] = r.window_s;
  j["offered_load"] = r.offered_load;
  j["offered_load_unclipped"] = r.offered_load_unclipped;
  j["offered_load_measured"] = r.offered_load_measured;
  j["trace_copies"] = r.copies;
  j["arrival_compression"] = r.compression;
  j["workloads"] = r.workloads;
  j["left_out"] = r.left_out;
  if (r.left_out_zero > 0) j["left_out_zero_length"] = r.left_out_zero;
  j["utilization_pct"] = r.utilization_pct;
  j["useful_utilization_pct"] = r.useful_utilization_pct;
  j["jain_index"] = r.jain_index;
  j["preemptions"] = r.preemptions;
  j["partial_admissions"] = r.partial_admissions;
  j["workloads_reserved"] = r.workloads_reserved;
  j["workloads_backfilled"] = r.workloads_backfilled;
  j["elastic_growths"] = r.elastic_growths;
  j["elastic_shrinks"] = r.elastic_shrinks;
  j["elastic_shrink_pods"] = r.elastic_shrink_pods;
  j["gpu_seconds_lost"] = r.gpu_seconds_lost;
  j["workloads_evicted"] = r.workloads_evicted;
  j["workloads_evicted_3plus"] = r.workloads_evicted_3plus;
  j["evictions_max"] = r.evictions_max;
  j["cycles"] = r.cycles;
  j["cycle_mean_ms"] = r.cycles ? 1000 * r.cycle_seconds / r.cycles : 0.0;
  j["cycle_max_ms"] = 1000 * r.cycle_max_seconds;
  nlohmann::json teams = nlohmann::json::array();
  for (const TeamResult& t : r.teams) {
    teams.push_back({{"name", t.name},
                     {"workloads", t.workloads},
                     {"never_admitted", t.never_admitted},
                     {"infeasible", t.infeasible},
                     {"infeasible_reason", t.infeasible_reason},
                     {"guarantee_gpus", t.guarantee_gpus},
                     {"wait_mean_s", t.wait_mean_s},
                     {"wait_p95_s", t.wait_p95_s},
                     {"below_guarantee_pending_s", t.below_guarantee_pending_s},
                     {"below_guarantee_any_pending_s", t.below_guarantee_any_pending_s},
                     {"avg_share", t.avg_share},
                     {"avg_fair_share", t.avg_fair_share},
                     {"preempted", t.preempted},
                     {"preempted_by", t.preempted_by},
                     {"gpu_seconds_lost", t.gpu_seconds_lost}});
    if (!t.no_slice.empty()) teams.back()["no_slice"] = t.no_slice;
    if (t.policy_blocked > 0) {
      teams.back()["policy_blocked"] = t.policy_blocked;
      teams.back()["policy_blocked_reason"] = t.policy_blocked_reason;
    }
    nlohmann::json sizes = nlohmann::json::array();
    for (const TeamResult::SizeWaits& sw : t.waits_by_size)
      sizes.push_back({{"gpus", sw.gpus},
                       {"workloads", sw.workloads},
                       {"wait_mean_s", sw.wait_mean_s},
                       {"wait_p95_s", sw.wait_p95_s}});
    teams.back()["waits_by_size"] = sizes;
  }
  j["teams"] = teams;
  auto by_kind = [](const ReplayResult::BoundCheck& b) {
    nlohmann::json kinds = nlohmann::json::object();
    for (const BoundException& e : b.exceptions) {
      nlohmann::json& k = kinds[e.kind];
      if (k.is_null()) k = {{"count", 0}, {"worst_excess_s", 0.0}};
      k["count"] = k.value("count", 0) + 1;
      k["worst_excess_s"] = std::max(k.value("worst_excess_s", 0.0), e.wait_s - e.bound_s);
    }
    return kinds;
  };
  nlohmann::json ex = nlohmann::json::array();
  for (const BoundException& e : r.bound.exceptions)
    ex.push_back({{"workload", e.workload},
                  {"team", e.team},
                  {"wait_s", e.wait_s},
                  {"bound_s", e.bound_s},
                  {"cause", e.cause},
                  {"kind", e.kind}});
  j["guarantee_bound"] = {{"checked", r.bound.checked},
                          {"worst_excess_s", r.bound.worst_excess_s},
                          {"exceptions_by_kind", by_kind(r.bound)},
                          {"exceptions", ex}};
  j["guarantee_bound_alone"] = {{"checked", r.bound_alone.checked},
                                {"worst_excess_s", r.bound_alone.worst_excess_s},
                                {"exceptions_by_kind", by_kind(r.bound_alone)},
                                {"exceptions", r.bound_alone.exceptions.size()}};
  j["guarantee_episodes"] = {{"episodes", r.episodes},
                             {"exceptions", r.episode_exceptions},
                             {"worst_excess_s", r.episode_worst_excess_s}};
  out << j.dump(2) << "\n";
}

void PrintReplayTable(const std::vector<ReplayResult>& results, std::ostream& out) {
  for (const ReplayResult& r : results) {
    out << std::fixed << std::setprecision(1);
    out << r.scenario << "  policy " << r.policy << "  load " << std::setprecision(3) << r.load
        << std::setprecision(1) << "  window " << r.window_s << " s  workloads " << r.workloads
        << " (" << r.left_out << " trace pods never started"
        << (r.left_out_zero > 0 ? ", " + std::to_string(r.left_out_zero) + " ran for no time"
                                : std::string())
        << ", left out)\n";
    out << "  offered load " << std::setprecision(3) << r.offered_load << " (whole durations "
        << r.offered_load_unclipped << "), trace copies " << r.copies << ", arrivals compressed "
        << std::setprecision(1) << r.compression << "x\n";
    // (Asked and offered apart by more than a tenth: said, as a trial read the header's load
    // as what ran. Copies arrive up to a minute late, some past the window's end, and a load
    // below the trace's own is drawn down to a sample.)
    if (r.load > 0 && std::abs(r.offered_load - r.load) > 0.1 * r.load)
      out << "  note: the offered load is " << std::setprecision(3) << r.offered_load
          << ", not the " << r.load << " asked: "
          << (r.synthetic ? "each team's draw ends past its part of the load by its last "
                            "workload, and the window's edges cut what runs past them"
                          : "the trace's copies and the window's edges keep it from that")
          << "\n"
          << std::setprecision(1);
    // (The measures' window, first to last arrival, may be shorter than the scenario's.)
    if (std::abs(r.offered_load_measured - r.offered_load) > 0.1 * r.offered_load)
      out << "  note: over the window measured (first to last arrival) the offered load is "
          << std::setprecision(3) << r.offered_load_measured
          << ": the arrivals cover only part of the scenario's window\n"
          << std::setprecision(1);
    out << "  utilization " << r.utilization_pct << "% (" << r.useful_utilization_pct
        << "% less work evictions threw away)  Jain " << std::setprecision(3) << r.jain_index
        << std::setprecision(1) << "  preemptions " << r.preemptions << "  GPU-seconds lost "
        << r.gpu_seconds_lost << "\n";
    if (r.workloads_evicted)
      out << "  evicted: " << r.workloads_evicted << " workloads, " << r.workloads_evicted_3plus
          << " of them 3 times or more, at most " << r.evictions_max << " times\n";
    if (r.partial_admissions || r.elastic_growths || r.elastic_shrinks)
      out << "  elastic: " << r.partial_admissions << " started in part, " << r.elastic_growths
          << " growths, " << r.elastic_shrinks << " shrinks (" << r.elastic_shrink_pods
          << " pods taken)\n";
    for (const ReplayResult::BoundCheck* b : {&r.bound, &r.bound_alone}) {
      out << (b == &r.bound ? "  guarantee bound (team's pending work in queue order): "
                            : "  guarantee bound (each workload alone): ")
          << b->checked << " waits checked, worst excess " << b->worst_excess_s << " s, "
          << b->exceptions.size() << " exceptions\n";
      std::map<std::string, std::pair<int, double>> kinds;  // kind -> (count, worst excess)
      for (const BoundException& e : b->exceptions) {
        auto& k = kinds[e.kind];
        ++k.first;
        k.second = std::max(k.second, e.wait_s - e.bound_s);
      }
      for (const auto& [kind, k] : kinds)
        out << "    exceptions, " << kind << ": " << k.first << " (worst +" << k.second << " s)\n";
    }
    out << "  team episodes: " << r.episodes << ", worst excess " << r.episode_worst_excess_s
        << " s\n";
    out << "  " << std::left << std::setw(14) << "team" << std::right << std::setw(10)
        << "workloads" << std::setw(10) << "guar.GPU" << std::setw(12) << "wait mean"
        << std::setw(12) << "wait p95" << std::setw(14) << "below-guar s" << std::setw(14)
        << "(any pend.)" << std::setw(8) << "share" << std::setw(8) << "fair" << std::setw(10)
        << "preempted"
        << "\n";
    for (const TeamResult& t : r.teams) {
      out << "  " << std::left << std::setw(14) << t.name << std::right << std::setw(10)
          << t.workloads << std::setw(10) << t.guarantee_gpus << std::setw(12) << t.wait_mean_s
          << std::setw(12) << t.wait_p95_s << std::setw(14) << t.below_guarantee_pending_s
          << std::setw(14) << t.below_guarantee_any_pending_s << std::setprecision(3)
          << std::setw(8) << t.avg_share << std::setw(8) << t.avg_fair_share << std::setprecision(1)
          << std::setw(10) << t.preempted << "\n";
    }
    // (Work no fleet or quota could ever admit is left out of the shares and the guarantee's
    // measures: said, so that a team that got nothing does not read as treated fairly.)
    for (const TeamResult& t : r.teams)
      if (t.infeasible > 0)
        out << "  " << t.name << ": " << t.infeasible
            << " workload(s) can never run as they ask, left out of shares, waits and "
               "guarantee measures (last: "
            << t.infeasible_reason << ")\n";
    for (const TeamResult& t : r.teams)
      if (!t.no_slice.empty() && t.workloads > 0)
        out << "  " << t.name << ": " << t.no_slice << "; its work waits to the end\n";
      else if (t.policy_blocked > 0)
        out << "  " << t.name << ": " << t.policy_blocked
            << " workload(s) this policy can never start, though the whole fleet could, wait to "
               "the end (last: "
            << t.policy_blocked_reason << ")\n";
    out << "  waits by the GPUs a workload asks for (workloads, mean / p95 s):\n";
    for (const TeamResult& t : r.teams) {
      out << "    " << std::left << std::setw(12) << t.name << std::right;
      for (const TeamResult::SizeWaits& sw : t.waits_by_size)
        out << "  " << sw.gpus << ": " << sw.workloads << ", " << std::setprecision(0)
            << sw.wait_mean_s << " / " << sw.wait_p95_s << std::setprecision(1);
      if (t.waits_by_size.empty()) out << "  (no workloads)";
      out << "\n";
    }
    out << "\n";
  }
}

}  // namespace fabrica::sim
