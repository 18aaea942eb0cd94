// The fragmentation measure of FGD (Weng et al., ATC'23): how much of a node's idle GPU capacity
// the expected workload mix could not use.
//
// For each typical pod p with weight w_p, the idle GPU milli of a node counts as fragment when p
// could not run there at all (CPU short, no allowed model, too few GPUs with p's share free), and
// otherwise only the GPUs whose free share is below p's per-GPU request count. A CPU-only p can
// use no GPU, so all idle GPU milli counts for it. F(node) = sum_p w_p * fragment_p(node).
//
// Typical pods are grouped by GPU shape (per-GPU milli, GPU count, allowed models) and sorted by
// CPU inside a shape, so F costs O(shapes * GPUs) and the change of F for a hypothetical
// placement is computed without copying the node. Immutable after construction.
#pragma once

#include <vector>

#include "sched/cluster_state.h"
#include "sched/policy.h"

namespace fabrica {

class FragModel {
 public:
  explicit FragModel(const std::vector<TypicalPod>& typical);

  // F for a node of GPU model index `model` with `cpu_free` and per-GPU free milli `free`.
  // When `memory_free` >= 0, typical pods whose memory does not fit count as not runnable.
  double Fragment(int model, int64_t cpu_free, const int64_t* free, int gpus,
                  int64_t memory_free = -1) const;

  bool empty() const { return shapes_.empty() && cpu_weight_ == 0; }

  // Milli-CPU the typical GPU pods ask per milli-GPU (their weighted ratio of sums).
  double cpu_per_gpu_milli() const { return cpu_per_gpu_milli_; }

 private:
  struct Shape {
    int64_t milli = 0;  // per GPU
    int num = 0;
    uint64_t model_mask = ~uint64_t{0};
    std::vector<int64_t> cpu;        // ascending
    std::vector<int64_t> memory;     // same order as cpu
    std::vector<double> cum_weight;  // prefix sums over the cpu order
    double weight = 0;
  };
  std::vector<Shape> shapes_;
  double cpu_weight_ = 0;  // CPU-only typical pods
  double cpu_per_gpu_milli_ = 0;
};

// The "typical pods" of a pod list, as FGD defines them: classes of equal (CPU, per-GPU milli,
// GPU count, model constraint), most popular first until `popularity` (0..1) of the pods are
// covered, weights renormalised to sum to one.
struct PodClassKey {
  int64_t cpu_milli;
  int64_t gpu_milli;
  int num_gpu;
  std::string gpu_spec;
  auto operator<=>(const PodClassKey&) const = default;
};
std::vector<std::pair<PodClassKey, double>> TypicalClasses(const std::vector<PodClassKey>& pods,
                                                           double popularity);

// The same on pod requests: classes of equal CPU, per-GPU share, GPU count, allowed models and
// MIG profile (a class's memory is the largest of its pods), most popular first until
// `popularity` of the pods are covered, weights renormalised. What the server, `fabrica place`
// and the bounds use as the expected mix.
std::vector<TypicalPod> TypicalMix(const std::vector<PodRequest>& pods, double popularity = 1.0);

}  // namespace fabrica
