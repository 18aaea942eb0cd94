// `fabrica`: Fabrica's default placement policy (see ARCHITECTURE.md, "Placement quality").
//
// It keeps FGD's objective: place where the expected workload mix loses the least usable GPU
// capacity, judged on a coarse scale (the change in fragment squashed through a sigmoid and cut
// to whole points) with the remaining ties going to a fixed random node order. Measured on the
// openb trace, that coarse-then-random choice matters: ranking nodes by the exact change in
// fragment (9.1% unallocated at 100% arrived), or breaking ties by best fit (4.9%) or by spreading
// (10.4%), are all worse than FGD's 4.8%, because the random order spreads CPU and memory load.
// What fabrica changes:
//   - a typical pod whose memory no longer fits on a node counts as unable to run there, so the
//     measure sees memory-starved nodes (FGD ignores memory);
//   - a fractional pod goes to the GPU with the best exact change in fragment, not to the lowest
//     index among GPUs whose truncated scores tie.
// On its own the policy reaches FGD's quality, not better; see the issue notes for what was tried.
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
    auto gain = [&]() { return before - frag_.Fragment(model, cpu_after, free, gpus, mem_after); };

    if (req.kind == DeviceKind::kFraction) {
      int best = -1;
      double best_gain = 0;
      for (int d = 0; d < gpus; ++d) {
        if (!s.DeviceUsable(n, d, req)) continue;
        free[d] -= req.gpu_milli;
        const double g = gain();
        free[d] += req.gpu_milli;
        if (best < 0 || g > best_gain) {
          best = d;
          best_gain = g;
        }
      }
      return NodeChoice{Coarse(best_gain), {ShareOn(s, n, best, req)}};
    }
    std::vector<DeviceShare> chosen = DefaultDevices(s, n, req);
    for (const DeviceShare& d : chosen) free[d.device] -= d.milli;
    return NodeChoice{Coarse(gain()), std::move(chosen)};
  }

 private:
  // The change in fragment (milli-GPU) on FGD's scale of whole points 0..100.
  static double Coarse(double gain) {
    return static_cast<double>(static_cast<int64_t>(100.0 / (1.0 + std::exp(-gain / 1000.0))));
  }

  FragModel frag_;
};

}  // namespace

std::unique_ptr<Policy> MakeFabricaPolicy(std::vector<TypicalPod> typical) {
  return std::make_unique<FabricaPolicy>(std::move(typical));
}

}  // namespace fabrica
