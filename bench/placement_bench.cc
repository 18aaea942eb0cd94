// Placement throughput: how many placement decisions per second the engine makes, per policy,
// on the openb trace (1,213 nodes of the FGD paper) and on the synthetic 80,000-GPU fleet.
//
// Only the time inside Placer::Place / PlaceGang counts (manual time, measured by the
// simulators with a steady clock), so items_per_second is placements per second of placement
// work and excludes parsing, fleet generation and bookkeeping. Each benchmark is one iteration
// of a whole run: a run is long (tens of thousands of decisions) and deterministic, so repeating
// it only re-measures timer noise. Benchmarks run in registration order and each records its
// rate, so later ones report `rate_vs_fgd`, their rate over fgd's on the same input, in the same
// run. On a shared machine wall time also counts waits for a core, so the synthetic runs also
// report `cpu_items_per_s` and `cpu_rate_vs_fgd` from the process CPU time of the same calls.
#include <benchmark/benchmark.h>

#include <map>
#include <optional>
#include <string>

#include "sim/openb.h"
#include "sim/synthetic.h"

namespace fabrica {
namespace {

// Rates of this process's benchmarks, keyed by "<family>/<policy>".
std::map<std::string, double>& Rates() {
  static std::map<std::string, double> rates;
  return rates;
}

// Records `rate` under family/policy and, for policies other than fgd, reports it over fgd's
// as `counter` (fgd runs first in each family).
void ReportRate(benchmark::State& state, const std::string& family, const std::string& policy,
                double rate, const std::string& counter) {
  Rates()[family + "/" + policy] = rate;
  auto fgd = Rates().find(family + "/fgd");
  if (policy != "fgd" && fgd != Rates().end() && fgd->second > 0) {
    state.counters[counter] = rate / fgd->second;
  }
}

struct OpenbInput {
  Fleet fleet;
  std::vector<sim::TracePod> pods;
};

// The trace, read once; nullopt with `error` set when the files are missing or malformed.
const std::optional<OpenbInput>& Openb(std::string* error) {
  static std::string load_error;
  static const std::optional<OpenbInput> kInput = []() -> std::optional<OpenbInput> {
    const std::string dir = FABRICA_OPENB_DIR;
    auto nodes = sim::ReadFile(dir + "openb_node_list_gpu_node.csv");
    auto pods = sim::ReadFile(dir + "openb_pod_list_default.csv");
    if (!nodes.ok() || !pods.ok()) {
      load_error = "openb trace not found under " + dir;
      return std::nullopt;
    }
    auto fleet = sim::ParseOpenbNodes(*nodes, "openb_node_list_gpu_node.csv");
    auto list = sim::ParseOpenbPods(*pods, "openb_pod_list_default.csv");
    if (!fleet.ok() || !list.ok()) {
      load_error = !fleet.ok() ? fleet.status().message() : list.status().message();
      return std::nullopt;
    }
    return OpenbInput{std::move(*fleet), std::move(*list)};
  }();
  *error = load_error;
  return kInput;
}

void BM_OpenbPlace(benchmark::State& state, const std::string& policy) {
  std::string error;
  const auto& input = Openb(&error);
  if (!input) {
    state.SkipWithError(error.c_str());
    return;
  }
  sim::RunOptions options;
  options.policy = policy;
  options.seed = 42;
  int64_t decisions = 0;
  double seconds = 0, unallocated = 0;
  for (auto _ : state) {
    auto r = sim::RunOpenb(input->fleet, input->pods, options);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    state.SetIterationTime(r->place_seconds);
    decisions += r->decisions;
    seconds += r->place_seconds;
    unallocated = 100.0 - r->allocated_pct[100];
  }
  state.SetItemsProcessed(decisions);
  state.counters["unalloc_pct_at_100"] = unallocated;
  ReportRate(state, "openb", policy, seconds > 0 ? static_cast<double>(decisions) / seconds : 0,
             "rate_vs_fgd");
}

struct SyntheticInput {
  Fleet fleet;
  std::vector<Workload> workloads;
};

const SyntheticInput& Synthetic() {
  static const SyntheticInput kInput = [] {
    auto fleet = sim::MakeSyntheticFleet(sim::SyntheticFleetOptions{});
    CHECK(fleet.ok());
    SyntheticInput in{std::move(*fleet), {}};
    in.workloads = sim::MakeSyntheticWorkloads(in.fleet, 0.9, 42);
    return in;
  }();
  return kInput;
}

void BM_SyntheticPlace(benchmark::State& state, const std::string& policy) {
  const SyntheticInput& input = Synthetic();
  sim::SyntheticRunOptions options;
  options.policy = policy;
  options.seed = 42;
  int64_t pods = 0;
  double seconds = 0;
  std::optional<sim::SyntheticRunResult> last;
  for (auto _ : state) {
    auto r = sim::RunSynthetic(input.fleet, sim::SyntheticTenants(), input.workloads, options);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    state.SetIterationTime(r->place_seconds);
    pods += r->pods_arrived;
    seconds += r->place_seconds;
    last = *r;
  }
  state.SetItemsProcessed(pods);
  state.counters["nodes"] = static_cast<double>(last->nodes);
  state.counters["gpus"] = static_cast<double>(last->gpus);
  state.counters["cpu_items_per_s"] = last->pods_per_cpu_second();
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(last->decisions), benchmark::Counter::kIsRate);
  state.counters["alloc_pct"] = last->allocated_gpu_pct;
  state.counters["gang_one_leaf_pct"] = last->leaf_local_pct();
  state.counters["gang_one_rack_pct"] = last->rack_local_pct();
  state.counters["numa_local_pct"] = last->numa_local_pct();
  ReportRate(state, "synthetic", policy, seconds > 0 ? static_cast<double>(pods) / seconds : 0,
             "rate_vs_fgd");
  ReportRate(state, "synthetic-cpu", policy, last->pods_per_cpu_second(), "cpu_rate_vs_fgd");
}

BENCHMARK_CAPTURE(BM_OpenbPlace, fgd, std::string("fgd"))->Iterations(1)->UseManualTime();
BENCHMARK_CAPTURE(BM_OpenbPlace, fabrica, std::string("fabrica"))->Iterations(1)->UseManualTime();
BENCHMARK_CAPTURE(BM_SyntheticPlace, fgd, std::string("fgd"))->Iterations(1)->UseManualTime();
BENCHMARK_CAPTURE(BM_SyntheticPlace, fabrica, std::string("fabrica"))
    ->Iterations(1)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_SyntheticPlace, bestfit, std::string("bestfit"))
    ->Iterations(1)
    ->UseManualTime();

}  // namespace
}  // namespace fabrica

BENCHMARK_MAIN();
