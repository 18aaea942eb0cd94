// The openb trace simulator: the FGD paper's experiment on Alibaba's GPU-sharing trace, driven
// through Fabrica's own placement engine.
//
// Method (the reference's, see ARCHITECTURE.md): pods sorted by name are shuffled with the seed;
// random copies of trace pods are appended until the next copy would push the total GPU request
// past `inflate` x capacity (a list that asks for more loses random pods instead); the fleet's
// node order is permuted once with the same generator, which decides ties; pods arrive one at a
// time, never leave, and a pod that fits nowhere is dropped. After every arrival the arrived and
// allocated GPU percentages are recorded and bucketed by rounded arrived %.
#pragma once

#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"

namespace fabrica::sim {

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t num_gpu = 0;
  int64_t gpu_milli = 0;
  std::string gpu_spec;
  // Times in seconds from the trace start; -1 when absent (multigpu lists, pending pods).
  int64_t creation_s = -1;
  int64_t deletion_s = -1;
  int64_t scheduled_s = -1;
  int line = 0;

  int64_t total_gpu_milli() const { return num_gpu * gpu_milli; }
};

// Parse the trace's CSV files; errors name file, line and field.
Result<Fleet> ParseOpenbNodes(const std::string& text, const std::string& source);
Result<std::vector<TracePod>> ParseOpenbPods(const std::string& text, const std::string& source);
Result<std::string> ReadFile(const std::string& path);

constexpr int kBuckets = 131;  // arrived % 0..130

struct RunResult {
  uint64_t seed = 0;
  std::array<double, kBuckets> allocated_pct{};  // NaN where no event is near
  int64_t pods_placed = 0;
  int64_t pods_dropped = 0;
  double place_seconds = 0;  // time spent in placement decisions only
  int64_t decisions = 0;
  // Arrived pods (indexes into the tuned list) up to the last event of bucket 100.
  int64_t arrived_at_100 = 0;
};

struct RunOptions {
  std::string policy = "fabrica";
  uint64_t seed = 42;
  double inflate = 1.3;
  std::ostream* placements_out = nullptr;  // CSV seq,pod,node,gpu_index,gpu_milli
  std::string pods_source = "pods";        // the pod list's file name, for messages
};

// The tuned arrival list for a seed (exposed for the bounds and for tests).
std::vector<TracePod> TunePods(const std::vector<TracePod>& pods, int64_t capacity_milli,
                               double inflate, uint64_t seed, std::vector<int>* node_order,
                               int node_count);

Result<RunResult> RunOpenb(const Fleet& fleet, const std::vector<TracePod>& pods,
                           const RunOptions& options);

// Summary over seeds.
struct Summary {
  std::string policy;
  std::vector<uint64_t> seeds;
  double unalloc_100 = 0, unalloc_130 = 0, sd_100 = 0, sd_130 = 0;
  std::array<double, kBuckets> unalloc_curve{};
  int64_t pods_placed = 0, pods_dropped = 0;
  double placements_per_second = 0;
};
Summary Summarize(const std::string& policy, const std::vector<RunResult>& runs);

}  // namespace fabrica::sim
