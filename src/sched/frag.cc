#include "sched/frag.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

namespace fabrica {

FragModel::FragModel(const std::vector<TypicalPod>& typical) {
  std::map<std::tuple<int64_t, int, uint64_t>,
           std::vector<std::pair<int64_t, std::pair<int64_t, double>>>>
      by_shape;
  double cpu_sum = 0, gpu_sum = 0;
  for (const TypicalPod& t : typical) {
    if (t.pod.num_gpu > 0) {
      cpu_sum += t.weight * static_cast<double>(t.pod.cpu_milli);
      gpu_sum += t.weight * static_cast<double>(t.pod.total_gpu_milli());
    }
  }
  cpu_per_gpu_milli_ = gpu_sum > 0 ? cpu_sum / gpu_sum : 0;
  for (const TypicalPod& t : typical) {
    if (t.pod.num_gpu == 0) {
      cpu_weight_ += t.weight;
      continue;
    }
    by_shape[{t.pod.gpu_milli, t.pod.num_gpu, t.pod.model_mask}].push_back(
        {t.pod.cpu_milli, {t.pod.memory_mib, t.weight}});
  }
  for (auto& [key, pods] : by_shape) {
    Shape s;
    std::tie(s.milli, s.num, s.model_mask) = key;
    std::sort(pods.begin(), pods.end());
    double cum = 0;
    for (const auto& [cpu, mw] : pods) {
      s.cpu.push_back(cpu);
      s.memory.push_back(mw.first);
      cum += mw.second;
      s.cum_weight.push_back(cum);
    }
    s.weight = cum;
    shapes_.push_back(std::move(s));
  }
}

double FragModel::Fragment(int model, int64_t cpu_free, const int64_t* free, int gpus,
                           int64_t memory_free) const {
  int64_t total = 0;
  for (int g = 0; g < gpus; ++g) total += free[g];
  if (total == 0) return 0;
  double f = cpu_weight_ * static_cast<double>(total);
  for (const Shape& s : shapes_) {
    if (model < 0 || !(s.model_mask >> model & 1)) {
      f += s.weight * static_cast<double>(total);
      continue;
    }
    int can = 0;
    int64_t below = 0;
    for (int g = 0; g < gpus; ++g) {
      if (free[g] >= s.milli)
        ++can;
      else
        below += free[g];
    }
    if (can < s.num) {
      f += s.weight * static_cast<double>(total);
      continue;
    }
    // Pods of this shape whose CPU fits see only `below` as fragment; the rest see it all.
    const size_t k = std::upper_bound(s.cpu.begin(), s.cpu.end(), cpu_free) - s.cpu.begin();
    double ok = k ? s.cum_weight[k - 1] : 0.0;
    if (memory_free >= 0 && k) {
      for (size_t i = 0; i < k; ++i) {
        if (s.memory[i] > memory_free) ok -= s.cum_weight[i] - (i ? s.cum_weight[i - 1] : 0.0);
      }
    }
    f += ok * static_cast<double>(below) + (s.weight - ok) * static_cast<double>(total);
  }
  return f;
}

std::vector<std::pair<PodClassKey, double>> TypicalClasses(const std::vector<PodClassKey>& pods,
                                                           double popularity) {
  std::map<PodClassKey, int64_t> counts;
  for (const PodClassKey& p : pods) ++counts[p];
  std::vector<std::pair<PodClassKey, int64_t>> sorted(counts.begin(), counts.end());
  // Most popular first; equal counts in descending key order, so the cut is deterministic.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  const double target = popularity * static_cast<double>(pods.size());
  int64_t cum = 0;
  size_t take = 0;
  while (take < sorted.size() && static_cast<double>(cum) < target) cum += sorted[take++].second;
  std::vector<std::pair<PodClassKey, double>> out;
  for (size_t i = 0; i < take; ++i) {
    out.emplace_back(sorted[i].first,
                     static_cast<double>(sorted[i].second) / static_cast<double>(cum));
  }
  return out;
}

std::vector<TypicalPod> TypicalMix(const std::vector<PodRequest>& pods, double popularity) {
  using Key = std::tuple<int64_t, int64_t, int, uint64_t, int, int>;
  std::map<Key, std::pair<PodRequest, int64_t>> classes;
  for (const PodRequest& r : pods) {
    auto& e = classes[Key{r.cpu_milli, r.gpu_milli, r.num_gpu, r.model_mask, r.mig_profile,
                          static_cast<int>(r.kind)}];
    if (e.second == 0 || r.memory_mib > e.first.memory_mib) e.first = r;
    e.second += 1;
  }
  std::vector<std::pair<Key, std::pair<PodRequest, int64_t>>> sorted(classes.begin(),
                                                                     classes.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.second != b.second.second) return a.second.second > b.second.second;
    return a.first > b.first;
  });
  const double target = popularity * static_cast<double>(pods.size());
  int64_t cum = 0;
  size_t take = 0;
  while (take < sorted.size() && static_cast<double>(cum) < target)
    cum += sorted[take++].second.second;
  std::vector<TypicalPod> out;
  for (size_t i = 0; i < take; ++i) {
    PodRequest r = sorted[i].second.first;
    r.tenant = -1;  // the mix describes shapes, not owners
    out.push_back(
        TypicalPod{r, static_cast<double>(sorted[i].second.second) / static_cast<double>(cum)});
  }
  return out;
}

}  // namespace fabrica
