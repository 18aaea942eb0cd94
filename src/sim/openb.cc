#include "sim/openb.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "sched/frag.h"
#include "sched/placer.h"
#include "sched/rng.h"

namespace fabrica::sim {
namespace {

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::pair<int, std::vector<std::string>>> rows;  // (line number, fields)
  int Column(const std::string& name) const {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  }
};

Result<CsvTable> ParseCsv(const std::string& text, const std::string& source) {
  CsvTable t;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    auto fields = SplitCsv(line);
    if (t.header.empty()) {
      t.header = fields;
      continue;
    }
    if (fields.size() != t.header.size()) {
      return InvalidArgument(source + ":" + std::to_string(lineno) + ": expected " +
                             std::to_string(t.header.size()) + " fields, got " +
                             std::to_string(fields.size()));
    }
    t.rows.emplace_back(lineno, std::move(fields));
  }
  if (t.header.empty()) return InvalidArgument(source + ": empty file, no header");
  return t;
}

Status RequireColumns(const CsvTable& t, const std::vector<std::string>& cols,
                      const std::string& source) {
  for (const std::string& c : cols) {
    if (t.Column(c) < 0) return InvalidArgument(source + ":1: missing column '" + c + "'");
  }
  return Status::Ok();
}

Result<int64_t> Field(const CsvTable& t, const std::vector<std::string>& row, int line,
                      const std::string& col, const std::string& source, bool optional = false) {
  const std::string& v = row[t.Column(col)];
  if (v.empty() && optional) return int64_t{-1};
  auto r = ParseNonNegativeInt(v);
  if (!r.ok()) {
    return InvalidArgument(source + ":" + std::to_string(line) + ": field '" + col +
                           "': " + r.status().message());
  }
  return *r;
}

double Round2(double v) { return std::round(v * 100.0) / 100.0; }

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  // (A directory opens, and reads as nothing: said as what it is.)
  if (std::filesystem::is_directory(path))
    return InvalidArgument("'" + path + "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<Fleet> ParseOpenbNodes(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, source));
  RETURN_IF_ERROR(RequireColumns(t, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, source));
  Fleet fleet;
  for (const auto& [line, row] : t.rows) {
    ASSIGN_OR_RETURN(int64_t gpus, Field(t, row, line, "gpu", source));
    if (gpus == 0) continue;  // the experiment's cluster is the GPU nodes only
    if (gpus > 64)
      return InvalidArgument(source + ":" + std::to_string(line) + ": field 'gpu': more than 64");
    Node node;
    node.name = NodeId(row[t.Column("sn")]);
    if (node.name.empty())
      return InvalidArgument(source + ":" + std::to_string(line) + ": field 'sn': empty");
    ASSIGN_OR_RETURN(int64_t cpu, Field(t, row, line, "cpu_milli", source));
    ASSIGN_OR_RETURN(int64_t mem, Field(t, row, line, "memory_mib", source));
    node.cpu = MilliCpu(cpu);
    node.memory = MemoryMib(mem);
    node.nvlink_domain = node.name.str();
    const std::string model = row[t.Column("model")];
    if (model.empty())
      return InvalidArgument(source + ":" + std::to_string(line) +
                             ": field 'model': empty for a GPU node");
    for (int64_t i = 0; i < gpus; ++i) {
      Device d;
      d.model = model;
      d.uuid = "GPU-" + node.name.str() + "-" + std::to_string(i);
      node.devices.push_back(d);
    }
    fleet.nodes.push_back(std::move(node));
  }
  Status st = ValidateFleet(fleet);
  if (!st.ok()) return st.WithContext(source);
  if (fleet.nodes.empty()) return InvalidArgument(source + ": no GPU node in the file");
  return fleet;
}

Result<std::vector<TracePod>> ParseOpenbPods(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, source));
  RETURN_IF_ERROR(
      RequireColumns(t, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, source));
  const bool has_spec = t.Column("gpu_spec") >= 0;
  const bool has_times = t.Column("creation_time") >= 0 && t.Column("deletion_time") >= 0 &&
                         t.Column("scheduled_time") >= 0;
  std::vector<TracePod> pods;
  // (A name twice would be two workloads of one name: a trial's replay took both, and its own
  // event log then failed verify_replay.py.)
  std::unordered_map<std::string, int> first_line;
  for (const auto& [line, row] : t.rows) {
    TracePod p;
    p.line = line;
    p.name = row[t.Column("name")];
    if (p.name.empty())
      return InvalidArgument(source + ":" + std::to_string(line) + ": field 'name': empty");
    if (auto [at, added] = first_line.emplace(p.name, line); !added)
      return InvalidArgument(source + ":" + std::to_string(line) + ": field 'name': pod '" +
                             p.name + "' is listed twice (first at line " +
                             std::to_string(at->second) + ")");
    ASSIGN_OR_RETURN(p.cpu_milli, Field(t, row, line, "cpu_milli", source));
    ASSIGN_OR_RETURN(p.memory_mib, Field(t, row, line, "memory_mib", source));
    ASSIGN_OR_RETURN(p.num_gpu, Field(t, row, line, "num_gpu", source));
    ASSIGN_OR_RETURN(p.gpu_milli, Field(t, row, line, "gpu_milli", source));
    if (has_spec) p.gpu_spec = row[t.Column("gpu_spec")];
    auto req = DeviceRequestFromTrace(p.num_gpu, p.gpu_milli, p.gpu_spec);
    if (!req.ok()) {
      return InvalidArgument(
          source + ":" + std::to_string(line) + ": field '" +
          (req.status().message().find("model") != std::string::npos ? "gpu_spec" : "gpu_milli") +
          "': " + req.status().message());
    }
    if (p.num_gpu == 0) p.gpu_milli = 0;
    if (has_times) {
      ASSIGN_OR_RETURN(p.creation_s, Field(t, row, line, "creation_time", source, true));
      ASSIGN_OR_RETURN(p.deletion_s, Field(t, row, line, "deletion_time", source, true));
      ASSIGN_OR_RETURN(p.scheduled_s, Field(t, row, line, "scheduled_time", source, true));
    }
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return InvalidArgument(source + ": no pod in the file");
  return pods;
}

std::vector<TracePod> TunePods(const std::vector<TracePod>& pods, int64_t capacity_milli,
                               double inflate, uint64_t seed, std::vector<int>* node_order,
                               int node_count) {
  std::vector<TracePod> sorted = pods;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  Rng rng(seed);
  std::vector<TracePod> list = sorted;
  for (size_t i = list.size(); i > 1; --i) std::swap(list[i - 1], list[rng.Uniform(i)]);
  int64_t total = 0;
  for (const TracePod& p : list) total += p.total_gpu_milli();
  const double target = inflate * static_cast<double>(capacity_milli);
  const bool any_gpu = std::any_of(sorted.begin(), sorted.end(),
                                   [](const TracePod& p) { return p.total_gpu_milli() > 0; });
  if (static_cast<double>(total) <= target) {
    while (any_gpu) {
      const TracePod& p = sorted[rng.Uniform(sorted.size())];
      if (static_cast<double>(total + p.total_gpu_milli()) > target) break;
      total += p.total_gpu_milli();
      list.push_back(p);
    }
  } else {
    while (static_cast<double>(total) > target && !list.empty()) {
      const size_t i = rng.Uniform(list.size());
      total -= list[i].total_gpu_milli();
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  if (node_order) {
    node_order->resize(node_count);
    for (int i = 0; i < node_count; ++i) (*node_order)[i] = i;
    for (int i = node_count; i > 1; --i) {
      std::swap((*node_order)[i - 1], (*node_order)[rng.Uniform(static_cast<uint64_t>(i))]);
    }
  }
  return list;
}

namespace {

// The typical pods of the original list, as PodRequests against `state`.
Result<std::vector<TypicalPod>> TypicalPods(const ClusterState& state,
                                            const std::vector<TracePod>& pods) {
  std::vector<PodClassKey> keys;
  std::map<PodClassKey, int64_t> memory;  // a representative memory per class (the largest)
  for (const TracePod& p : pods) {
    PodClassKey k{p.cpu_milli, p.gpu_milli, static_cast<int>(p.num_gpu), p.gpu_spec};
    keys.push_back(k);
    memory[k] = std::max(memory[k], p.memory_mib);
  }
  std::vector<TypicalPod> out;
  const auto classes = TypicalClasses(keys, 0.95);
  for (const auto& [key, weight] : classes) {
    PodSet ps;
    ps.cpu = MilliCpu(key.cpu_milli);
    ps.memory = MemoryMib(memory[key]);
    ASSIGN_OR_RETURN(ps.device, DeviceRequestFromTrace(key.num_gpu, key.gpu_milli, key.gpu_spec));
    ASSIGN_OR_RETURN(PodRequest req, state.MakeRequest(ps, TenantId()));
    out.push_back(TypicalPod{req, weight});
  }
  return out;
}

Result<PodRequest> RequestFor(const ClusterState& state, const TracePod& p,
                              const std::string& source) {
  PodSet ps;
  ps.cpu = MilliCpu(p.cpu_milli);
  ps.memory = MemoryMib(p.memory_mib);
  ASSIGN_OR_RETURN(ps.device, DeviceRequestFromTrace(p.num_gpu, p.gpu_milli, p.gpu_spec));
  auto r = state.MakeRequest(ps, TenantId());
  if (!r.ok()) {
    return r.status().WithContext(source + ":" + std::to_string(p.line) +
                                  ": field 'gpu_spec' of pod " + p.name);
  }
  return r;
}

}  // namespace

Result<RunResult> RunOpenb(const Fleet& fleet, const std::vector<TracePod>& pods,
                           const RunOptions& options) {
  const int64_t capacity = fleet.total_gpus() * kMilliPerGpu;
  if (capacity == 0) return InvalidArgument("the fleet has no GPU");
  std::vector<int> order;
  std::vector<TracePod> list = TunePods(pods, capacity, options.inflate, options.seed, &order,
                                        static_cast<int>(fleet.nodes.size()));
  // Node i of the fleet gets priority order[i]: ties go to the lowest priority number.
  Fleet permuted;
  permuted.nodes.resize(fleet.nodes.size());
  for (size_t i = 0; i < fleet.nodes.size(); ++i) permuted.nodes[order[i]] = fleet.nodes[i];

  ClusterState state(permuted);
  // Every pod of the list must be placeable in principle (its GPU models exist); say which one
  // is not, with its line, before anything else.
  for (const TracePod& p : pods)
    RETURN_IF_ERROR(RequestFor(state, p, options.pods_source).status());
  ASSIGN_OR_RETURN(std::vector<TypicalPod> typical, TypicalPods(state, pods));
  ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(options.policy, typical, &state));
  Placer placer(*policy);
  Rng rng(options.seed ^ 0x9e3779b97f4a7c15ULL);

  std::vector<PodRequest> requests;
  requests.reserve(list.size());
  for (const TracePod& p : list) {
    ASSIGN_OR_RETURN(PodRequest r, RequestFor(state, p, options.pods_source));
    requests.push_back(r);
  }

  RunResult result;
  result.seed = options.seed;
  std::vector<std::pair<int, double>> events;  // (rounded arrived %, allocated %)
  events.reserve(list.size());
  int64_t arrived = 0;
  std::ostream* out = options.placements_out;
  if (out) *out << "seq,pod,node,gpu_index,gpu_milli\n";
  using Clock = std::chrono::steady_clock;
  Clock::duration spent{};
  for (size_t i = 0; i < list.size(); ++i) {
    const auto t0 = Clock::now();
    PodPlacement p = placer.Place(state, requests[i], rng);
    spent += Clock::now() - t0;
    if (p.outcome == Outcome::kPlaced) {
      state.Apply(p.assignment, requests[i]);
      ++result.pods_placed;
    } else {
      ++result.pods_dropped;
    }
    if (out) {
      const std::string prefix = std::to_string(i) + "," + list[i].name + ",";
      if (p.outcome != Outcome::kPlaced) {
        *out << prefix << ",,\n";
      } else if (p.assignment.devices.empty()) {
        *out << prefix << permuted.nodes[p.assignment.node].name.str() << ",,\n";
      } else {
        for (const DeviceShare& d : p.assignment.devices) {
          *out << prefix << permuted.nodes[p.assignment.node].name.str() << "," << d.device << ","
               << d.milli << "\n";
        }
      }
    }
    arrived += list[i].total_gpu_milli();
    const int arrived_pct = static_cast<int>(
        std::nearbyint(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity)));
    const double alloc_pct = Round2(100.0 * static_cast<double>(state.allocated_gpu_milli()) /
                                    static_cast<double>(capacity));
    events.emplace_back(arrived_pct, alloc_pct);
    if (arrived_pct <= 100) result.arrived_at_100 = static_cast<int64_t>(i) + 1;
  }
  result.place_seconds = std::chrono::duration<double>(spent).count();
  result.decisions = static_cast<int64_t>(list.size());
  for (int b = 0; b < kBuckets; ++b) {
    double sum = 0;
    int n = 0;
    for (const auto& [r, a] : events) {
      if (r == b) sum += a, ++n;
    }
    if (n == 0) {
      for (const auto& [r, a] : events) {
        if (r >= b - 1 && r <= b + 1) sum += a, ++n;
      }
    }
    result.allocated_pct[b] = n ? sum / n : std::nan("");
  }
  return result;
}

Summary Summarize(const std::string& policy, const std::vector<RunResult>& runs) {
  Summary s;
  s.policy = policy;
  auto stats = [&](int b, double* mean, double* sd) {
    double sum = 0, sq = 0;
    int n = 0;
    for (const RunResult& r : runs) {
      if (std::isnan(r.allocated_pct[b])) continue;
      const double u = 100.0 - r.allocated_pct[b];
      sum += u;
      sq += u * u;
      ++n;
    }
    *mean = n ? sum / n : std::nan("");
    *sd = n ? std::sqrt(std::max(0.0, sq / n - (*mean) * (*mean))) : std::nan("");
  };
  double spent = 0;
  int64_t decisions = 0;
  for (const RunResult& r : runs) {
    s.seeds.push_back(r.seed);
    s.pods_placed += r.pods_placed;
    s.pods_dropped += r.pods_dropped;
    spent += r.place_seconds;
    decisions += r.decisions;
  }
  for (int b = 0; b < kBuckets; ++b) {
    double sd;
    stats(b, &s.unalloc_curve[b], &sd);
  }
  stats(100, &s.unalloc_100, &s.sd_100);
  stats(130, &s.unalloc_130, &s.sd_130);
  s.placements_per_second = spent > 0 ? static_cast<double>(decisions) / spent : 0;
  return s;
}

}  // namespace fabrica::sim
