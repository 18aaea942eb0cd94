// `fabrica`: Fabrica's default placement policy.
//
// It starts from FGD's insight (place where the expected workload mix loses the least usable GPU
// capacity) and fixes what the reference implementation throws away:
//   - the change in fragment is compared exactly, not squashed through a sigmoid and truncated
//     to an integer 0..100, which makes most candidate nodes tie and leaves the choice to the
//     arbitrary node order;
//   - remaining ties go to the node that is left fullest (best fit), so that empty nodes stay
//     empty for the large multi-GPU pods that need them;
//   - the typical pods' memory counts when judging whether they could still run on a node.
#include <cmath>

#include "sched/frag.h"
#include "sched/policy.h"

namespace fabrica {
namespace {

class FabricaPolicy : public Policy {
 public:
  explicit FabricaPolicy(std::vector<TypicalPod> typical) : frag_(typical) {}
  std::string name() const override { return "fabrica"; }

  std::optional<NodeChoice> Score(const ClusterState& s, int n, const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    const auto& devs = s.devices(n);
    const int gpus = static_cast<int>(devs.size());
    int64_t free[64];
    for (int d = 0; d < gpus; ++d) free[d] = devs[d].free_milli;
    const int model = s.node_model(n);
    const int64_t cpu_after = s.free_cpu(n) - req.cpu_milli;
    const int64_t mem_after = s.free_memory(n) - req.memory_mib;
    const double before = frag_.Fragment(model, s.free_cpu(n), free, gpus, s.free_memory(n));
    // Secondary: how much GPU stays free on the node after placement, in GPUs; smaller is better.
    const double left_gpus = static_cast<double>(s.node_free_milli(n) - req.total_gpu_milli()) / 1000.0;
    auto score_of = [&](double after) { return (before - after) - kTieWeight * left_gpus; };

    if (req.kind == DeviceKind::kFraction) {
      int best = -1;
      double best_score = 0;
      for (int d = 0; d < gpus; ++d) {
        if (!s.DeviceUsable(n, d, req)) continue;
        free[d] -= req.gpu_milli;
        const double sc = score_of(frag_.Fragment(model, cpu_after, free, gpus, mem_after)) -
                          kTieWeight * 1e-3 * static_cast<double>(devs[d].free_milli);
        free[d] += req.gpu_milli;
        if (best < 0 || sc > best_score) {
          best_score = sc;
          best = d;
        }
      }
      return NodeChoice{best_score, {ShareOn(s, n, best, req)}};
    }
    std::vector<DeviceShare> chosen = DefaultDevices(s, n, req);
    for (const DeviceShare& d : chosen) free[d.device] -= d.milli;
    return NodeChoice{score_of(frag_.Fragment(model, cpu_after, free, gpus, mem_after)),
                      std::move(chosen)};
  }

 private:
  static constexpr double kTieWeight = 1.0;
  FragModel frag_;
};

}  // namespace

std::unique_ptr<Policy> MakeFabricaPolicy(std::vector<TypicalPod> typical) {
  return std::make_unique<FabricaPolicy>(std::move(typical));
}

}  // namespace fabrica
