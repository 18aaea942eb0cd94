// The placement policies. The six of the FGD paper follow the reference simulator's scoring
// exactly, integer truncation included, because that is what the published numbers measured:
// its scores are whole numbers 0..100, so ties are frequent and the node order decides them.
// `fabrica` is ours: see FabricaPolicy below.
#include <algorithm>
#include <cmath>

#include "sched/frag.h"
#include "sched/policy.h"

namespace fabrica {

bool NodeFits(const ClusterState& s, int n, const PodRequest& req) {
  if (!s.MayFit(n, req) || !s.NodeUsable(n, req)) return false;
  if (req.num_gpu == 0) return true;
  int usable = 0;
  const int gpus = static_cast<int>(s.devices(n).size());
  for (int d = 0; d < gpus && usable < req.num_gpu; ++d) {
    if (s.DeviceUsable(n, d, req)) ++usable;
  }
  return usable >= req.num_gpu;
}

DeviceShare ShareOn(const ClusterState& s, int n, int d, const PodRequest& req) {
  DeviceShare share;
  share.device = d;
  share.milli = req.gpu_milli;
  if (req.kind == DeviceKind::kFraction) {
    share.milli = s.FractionMilli(n, d, req);
    share.memory_mib = s.FractionMemoryMib(n, d, req);
  } else if (req.kind == DeviceKind::kWhole) {
    share.memory_mib = s.devices(n)[d].free_memory_mib;
  } else if (req.kind == DeviceKind::kMig) {
    const DeviceState& ds = s.devices(n)[d];
    const int slices = static_cast<int>(s.node(n).devices[d].mig_slices.size());
    for (int k = 0; k < slices; ++k) {
      if ((ds.mig_free >> k & 1) && s.mig_slice_profile(n, d, k) == req.mig_profile) {
        share.mig_slice = k;
        break;
      }
    }
  }
  return share;
}

std::vector<DeviceShare> DefaultDevices(const ClusterState& s, int n, const PodRequest& req) {
  std::vector<DeviceShare> out;
  if (req.num_gpu == 0) return out;
  const auto& devs = s.devices(n);
  const int gpus = static_cast<int>(devs.size());
  if (req.kind == DeviceKind::kWhole) {
    // First free GPUs by index, on one NUMA node when one has enough — preferring one that
    // also has the CPU for the pod, so that GPUs and CPUs are local.
    const Node& node = s.node(n);
    for (int pass = 0; pass < 2 && out.empty(); ++pass) {
      for (int numa = 0; numa < node.numa_nodes && out.empty(); ++numa) {
        if (pass == 0 && node.numa_nodes > 1 && s.free_cpu_numa(n, numa) < req.cpu_milli) continue;
        std::vector<int> pick;
        for (int d = 0; d < gpus && static_cast<int>(pick.size()) < req.num_gpu; ++d) {
          if (node.devices[d].numa_node != numa) continue;
          if (s.DeviceUsable(n, d, req)) pick.push_back(d);
        }
        if (static_cast<int>(pick.size()) == req.num_gpu) {
          for (int d : pick) out.push_back(ShareOn(s, n, d, req));
        }
      }
    }
    if (out.empty()) {
      for (int d = 0; d < gpus && static_cast<int>(out.size()) < req.num_gpu; ++d) {
        if (s.DeviceUsable(n, d, req)) out.push_back(ShareOn(s, n, d, req));
      }
    }
    return out;
  }
  // A fraction or a MIG slice: the usable device with the least room left (best fit).
  int best = -1;
  int64_t best_room = 0;
  for (int d = 0; d < gpus; ++d) {
    if (!s.DeviceUsable(n, d, req)) continue;
    const int64_t room =
        req.kind == DeviceKind::kMig ? __builtin_popcount(devs[d].mig_free) : devs[d].free_milli;
    if (best < 0 || room < best_room) {
      best = d;
      best_room = room;
    }
  }
  if (best >= 0) out.push_back(ShareOn(s, n, best, req));
  return out;
}

namespace {

constexpr double kMaxSpecCpu = 128000;  // the reference's normalisers: a 128-core, 8-GPU node
constexpr double kMaxSpecGpu = 8000;

std::optional<NodeChoice> Choice(double score, std::vector<DeviceShare> devices) {
  return NodeChoice{score, std::move(devices)};
}

class RandomPolicy : public Policy {
 public:
  std::string name() const override { return "random"; }
  bool uniform_random() const override { return true; }
  std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                  const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    return Choice(0, DefaultDevices(s, n, req));
  }
  std::vector<DeviceShare> FinalDevices(const ClusterState& s, int n, const PodRequest& req,
                                        const NodeChoice& choice, Rng& rng) const override {
    if (req.kind != DeviceKind::kFraction) return choice.devices;
    std::vector<int> usable;
    for (int d = 0; d < static_cast<int>(s.devices(n).size()); ++d) {
      if (s.DeviceUsable(n, d, req)) usable.push_back(d);
    }
    return {ShareOn(s, n, usable[rng.Uniform(usable.size())], req)};
  }
};

class DotProdPolicy : public Policy {
 public:
  std::string name() const override { return "dotprod"; }
  std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                  const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    const double dot = (s.free_cpu(n) / kMaxSpecCpu) * (req.cpu_milli / kMaxSpecCpu) +
                       (s.node_free_milli(n) / kMaxSpecGpu) * (req.total_gpu_milli() / kMaxSpecGpu);
    return Choice(static_cast<double>(static_cast<int64_t>(100 * (1 - dot / 2))),
                  DefaultDevices(s, n, req));
  }
};

class ClusteringPolicy : public Policy {
 public:
  std::string name() const override { return "clustering"; }
  std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                  const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    if (req.num_gpu == 0) return Choice(0, {});
    const int tag = req.kind == DeviceKind::kWhole ? req.num_gpu : 0;
    const auto& tags = s.gpu_pod_tags(n);
    const int64_t left = s.node_free_milli(n);
    const int64_t b = 25 * (8000 - left) / 8000;
    const bool present =
        std::any_of(tags.begin(), tags.end(), [&](auto& p) { return p.first == tag; });
    int64_t score;
    if (present)
      score = b + (tags.size() == 1 ? 75 : 50);
    else
      score = b + (tags.empty() ? 25 : 0);
    return Choice(static_cast<double>(score), DefaultDevices(s, n, req));
  }
};

class PackingPolicy : public Policy {
 public:
  std::string name() const override { return "packing"; }
  std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                  const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    if (req.num_gpu == 0) return Choice(0, {});
    const auto& devs = s.devices(n);
    const int gpus = static_cast<int>(devs.size());
    int fully_free = 0;
    for (const DeviceState& d : devs) fully_free += d.free_milli == kMilliPerGpu ? 1 : 0;
    int64_t score;
    if (fully_free == gpus) {
      score = std::max<int64_t>(33 - fully_free, fully_free);  // an idle node: last resort
    } else {
      std::vector<int> order(gpus);
      for (int d = 0; d < gpus; ++d) order[d] = d;
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return devs[a].free_milli < devs[b].free_milli; });
      int taken = 0, untouched = 0;
      int64_t r = 0;
      for (int d : order) {
        if (taken == req.num_gpu) break;
        if (devs[d].free_milli < s.FractionMilli(n, d, req)) continue;
        ++taken;
        if (devs[d].free_milli == kMilliPerGpu) ++untouched;
        r += devs[d].free_milli * 100 / kMilliPerGpu;
      }
      if (untouched > 0)
        score = std::max<int64_t>(50 - untouched, 33);  // a used node's free GPU
      else
        score = std::max<int64_t>(100 - r / 10, 50);  // an already shared GPU
    }
    return Choice(static_cast<double>(score), DefaultDevices(s, n, req));
  }
};

class BestFitPolicy : public Policy {
 public:
  std::string name() const override { return "bestfit"; }
  std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                  const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    const double raw =
        0.5 * static_cast<double>(s.free_cpu(n) - req.cpu_milli) / kMaxSpecCpu +
        0.5 * static_cast<double>(s.node_free_milli(n) - req.total_gpu_milli()) / kMaxSpecGpu;
    return Choice(static_cast<double>(static_cast<int64_t>((1 - raw) * 100)),
                  DefaultDevices(s, n, req));
  }
};

// Fragmentation Gradient Descent: place where the expected fragment grows least. For a
// fractional pod it also picks the GPU. The reference squashes the change through a sigmoid and
// truncates to 0..100, which we keep here so that `fgd` reproduces the published numbers.
class FgdPolicy : public Policy {
 public:
  explicit FgdPolicy(std::vector<TypicalPod> typical) : frag_(typical) {}
  std::string name() const override { return "fgd"; }
  std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                  const PodRequest& req) const override {
    if (!NodeFits(s, n, req)) return std::nullopt;
    const auto& devs = s.devices(n);
    const int gpus = static_cast<int>(devs.size());
    int64_t free[kMaxGpusPerNode];
    for (int d = 0; d < gpus; ++d) free[d] = devs[d].free_milli;
    const int model = s.node_model(n);
    const double before = frag_.Fragment(model, s.free_cpu(n), free, gpus);
    const int64_t cpu_after = s.free_cpu(n) - req.cpu_milli;
    auto score_of = [&](double after) {
      const double x = (before - after) / 1000.0;
      return static_cast<double>(static_cast<int64_t>(100.0 / (1.0 + std::exp(-x))));
    };
    if (req.kind == DeviceKind::kFraction) {
      int best = -1;
      double best_score = -1;
      for (int d = 0; d < gpus; ++d) {
        if (!s.DeviceUsable(n, d, req)) continue;
        const int64_t milli = s.FractionMilli(n, d, req);
        free[d] -= milli;
        const double sc = score_of(frag_.Fragment(model, cpu_after, free, gpus));
        free[d] += milli;
        if (sc > best_score) {
          best_score = sc;
          best = d;
        }
      }
      return Choice(best_score, {ShareOn(s, n, best, req)});
    }
    std::vector<DeviceShare> chosen = DefaultDevices(s, n, req);
    for (const DeviceShare& d : chosen) free[d.device] -= d.milli;
    return Choice(score_of(frag_.Fragment(model, cpu_after, free, gpus)), std::move(chosen));
  }

 private:
  FragModel frag_;
};

}  // namespace

std::unique_ptr<Policy> MakeFabricaPolicy(std::vector<TypicalPod> typical,
                                          const ClusterState* fleet);

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {"random",  "dotprod", "clustering", "packing",
                                                  "bestfit", "fgd",     "fabrica"};
  return kNames;
}

Result<std::unique_ptr<Policy>> MakePolicy(const std::string& name, std::vector<TypicalPod> typical,
                                           const ClusterState* fleet) {
  if (name == "random") return std::unique_ptr<Policy>(new RandomPolicy());
  if (name == "dotprod") return std::unique_ptr<Policy>(new DotProdPolicy());
  if (name == "clustering") return std::unique_ptr<Policy>(new ClusteringPolicy());
  if (name == "packing") return std::unique_ptr<Policy>(new PackingPolicy());
  if (name == "bestfit") return std::unique_ptr<Policy>(new BestFitPolicy());
  if (name == "fgd") return std::unique_ptr<Policy>(new FgdPolicy(std::move(typical)));
  if (name == "fabrica") return MakeFabricaPolicy(std::move(typical), fleet);
  std::string known;
  for (const std::string& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown policy '" + name + "' (known: " + known + ")");
}

}  // namespace fabrica
