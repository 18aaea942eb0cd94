#include "sim/bounds.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "sched/frag.h"
#include "sched/placer.h"
#include "sched/policy.h"

namespace fabrica::sim {

Result<double> OfflineAllocatedPct(const Fleet& fleet, const std::vector<TracePod>& pods,
                                   const std::string& policy_name) {
  ClusterState state(fleet);
  std::vector<std::pair<TracePod, PodRequest>> list;
  for (const TracePod& p : pods) {
    PodSet ps;
    ps.cpu = MilliCpu(p.cpu_milli);
    ps.memory = MemoryMib(p.memory_mib);
    ASSIGN_OR_RETURN(ps.device, DeviceRequestFromTrace(p.num_gpu, p.gpu_milli, p.gpu_spec));
    ASSIGN_OR_RETURN(PodRequest r, state.MakeRequest(ps, TenantId()));
    list.emplace_back(p, r);
  }
  // The typical mix of the known pods, for the policies that need one.
  std::vector<PodRequest> requests;
  for (const auto& [p, r] : list) requests.push_back(r);
  const std::vector<TypicalPod> typical = TypicalMix(requests);
  ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(policy_name, typical, &state));
  Placer placer(*policy);
  // Several orders, keeping the best packing: the arrival order itself, largest GPU request
  // first (first-fit-decreasing), and a few random orders.
  std::vector<std::vector<size_t>> orders;
  std::vector<size_t> order(list.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  orders.push_back(order);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const PodRequest& ra = list[a].second;
    const PodRequest& rb = list[b].second;
    if (ra.total_gpu_milli() != rb.total_gpu_milli())
      return ra.total_gpu_milli() > rb.total_gpu_milli();
    return ra.cpu_milli > rb.cpu_milli;
  });
  orders.push_back(order);
  Rng shuffle(7);
  for (int k = 0; k < 3; ++k) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.Uniform(i)]);
    orders.push_back(order);
  }
  double best = 0;
  for (const std::vector<size_t>& o : orders) {
    ClusterState packed(fleet);
    Rng rng(1);
    for (size_t i : o) {
      PodPlacement placed = placer.Place(packed, list[i].second, rng);
      if (placed.outcome == Outcome::kPlaced) packed.Apply(placed.assignment, list[i].second);
    }
    best = std::max(best, 100.0 * static_cast<double>(packed.allocated_gpu_milli()) /
                              static_cast<double>(packed.total_gpu_milli()));
  }
  return best;
}

Result<double> CeilingAllocatedPct(const Fleet& fleet, const std::vector<TracePod>& pods) {
  struct NodeType {
    std::string model;
    int gpus;
    int64_t cpu, memory;
    int64_t count = 0;
  };
  std::map<std::tuple<std::string, int, int64_t, int64_t>, int> type_index;
  std::vector<NodeType> types;
  int64_t capacity = 0;
  for (const Node& n : fleet.nodes) {
    if (n.devices.empty()) continue;
    auto key = std::make_tuple(n.gpu_model(), n.gpu_count(), n.cpu.value(), n.memory.value());
    auto [it, inserted] = type_index.emplace(key, static_cast<int>(types.size()));
    if (inserted) types.push_back({n.gpu_model(), n.gpu_count(), n.cpu.value(), n.memory.value()});
    types[it->second].count += 1;
    capacity += int64_t{n.gpu_count()} * kMilliPerGpu;
  }
  struct PodClass {
    int64_t cpu, memory, milli;
    int num;
    std::vector<std::string> models;
    int64_t count = 0;
  };
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, std::string>, PodClass> classes;
  std::set<int64_t> large_shares;
  for (const TracePod& p : pods) {
    if (p.num_gpu == 0) continue;  // CPU-only pods allocate no GPU: leaving them out only loosens
    auto& c = classes[{p.cpu_milli, p.memory_mib, p.gpu_milli, p.num_gpu, p.gpu_spec}];
    c.cpu = p.cpu_milli;
    c.memory = p.memory_mib;
    c.milli = p.gpu_milli;
    c.num = static_cast<int>(p.num_gpu);
    ASSIGN_OR_RETURN(c.models, ParseModelList(p.gpu_spec));
    c.count += 1;
    if (p.gpu_milli > kMilliPerGpu / 2 && p.gpu_milli < kMilliPerGpu)
      large_shares.insert(p.gpu_milli);
  }
  // Dual-feasible functions f (Fekete & Schepers): any set of shares that fits one GPU has
  // f-values summing to at most C = 1000, so sum f(share) <= C x GPUs is a valid cut.
  //   u_eps: a share above C - eps counts C, one in [eps, C - eps] counts itself, smaller ones
  //          nothing (one per large share in the trace: an 810m share leaves 190m);
  //   U_k:   a share x counts x when (k+1)x/C is whole, else floor((k+1)x/C) C/k (at most k
  //          shares above C/(k+1) fit one GPU).
  constexpr int64_t C = kMilliPerGpu;
  std::vector<std::function<double(int64_t)>> dffs;
  dffs.push_back([](int64_t m) { return static_cast<double>(m); });
  for (int64_t share : large_shares) {
    const int64_t eps = C - share + 1;
    dffs.push_back([eps](int64_t m) -> double {
      if (m > C - eps) return C;
      return m >= eps ? static_cast<double>(m) : 0.0;
    });
  }
  for (int64_t k = 1; k <= 12; ++k) {
    dffs.push_back([k](int64_t m) -> double {
      if (((k + 1) * m) % C == 0) return static_cast<double>(m);
      return static_cast<double>(((k + 1) * m) / C) * static_cast<double>(C) /
             static_cast<double>(k);
    });
  }

  glp_prob* lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MAX);
  const int rows_per_type = 4 + static_cast<int>(dffs.size());
  glp_add_rows(lp,
               static_cast<int>(types.size()) * rows_per_type + static_cast<int>(classes.size()));
  for (size_t t = 0; t < types.size(); ++t) {
    const NodeType& nt = types[t];
    const int base = static_cast<int>(t) * rows_per_type;
    glp_set_row_bnds(lp, base + 1, GLP_UP, 0, static_cast<double>(nt.count * nt.cpu));
    glp_set_row_bnds(lp, base + 2, GLP_UP, 0, static_cast<double>(nt.count * nt.memory));
    glp_set_row_bnds(lp, base + 3, GLP_UP, 0, static_cast<double>(nt.count));  // > half the GPUs
    glp_set_row_bnds(lp, base + 4, GLP_UP, 0, static_cast<double>(nt.count * nt.gpus));  // whole
    for (size_t e = 0; e < dffs.size(); ++e) {
      glp_set_row_bnds(lp, base + 5 + static_cast<int>(e), GLP_UP, 0,
                       static_cast<double>(nt.count * nt.gpus * kMilliPerGpu));
    }
  }
  const int class_base = static_cast<int>(types.size()) * rows_per_type;
  std::vector<int> ia = {0}, ja = {0};
  std::vector<double> ar = {0};
  int col = 0, ci = 0;
  for (const auto& [key, c] : classes) {
    ++ci;
    glp_set_row_bnds(lp, class_base + ci, GLP_UP, 0, static_cast<double>(c.count));
    for (size_t t = 0; t < types.size(); ++t) {
      const NodeType& nt = types[t];
      if (c.num > nt.gpus || c.cpu > nt.cpu || c.memory > nt.memory) continue;
      if (!c.models.empty() &&
          std::find(c.models.begin(), c.models.end(), nt.model) == c.models.end()) {
        continue;
      }
      ++col;
      glp_add_cols(lp, 1);
      glp_set_col_bnds(lp, col, GLP_LO, 0, 0);
      glp_set_obj_coef(lp, col, static_cast<double>(c.milli * c.num));
      const int base = static_cast<int>(t) * rows_per_type;
      auto add = [&](int row, double v) {
        if (v == 0) return;
        ia.push_back(row);
        ja.push_back(col);
        ar.push_back(v);
      };
      add(base + 1, static_cast<double>(c.cpu));
      add(base + 2, static_cast<double>(c.memory));
      add(base + 3, 2 * c.num > nt.gpus ? 1.0 : 0.0);
      add(base + 4, c.milli == kMilliPerGpu ? static_cast<double>(c.num) : 0.0);
      for (size_t e = 0; e < dffs.size(); ++e) {
        add(base + 5 + static_cast<int>(e), c.num * dffs[e](c.milli));
      }
      add(class_base + ci, 1.0);
    }
  }
  double value = 0;
  if (col > 0) {
    glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
    glp_smcp params;
    glp_init_smcp(&params);
    params.msg_lev = GLP_MSG_OFF;
    const int rc = glp_simplex(lp, &params);
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
      glp_delete_prob(lp);
      return Internal("the ceiling LP did not solve (glpk code " + std::to_string(rc) + ")");
    }
    value = glp_get_obj_val(lp);
  }
  glp_delete_prob(lp);
  return 100.0 * value / static_cast<double>(capacity);
}

Result<Bounds> BoundsAt100(const Fleet& fleet, const std::vector<TracePod>& pods, uint64_t seed,
                           double inflate, const std::string& offline_policy) {
  const int64_t capacity = fleet.total_gpus() * kMilliPerGpu;
  std::vector<TracePod> list = TunePods(pods, capacity, inflate, seed, nullptr, 0);
  // The events of bucket 100 are those whose arrived % rounds to 100; keep every pod up to the
  // last of them.
  int64_t arrived = 0;
  size_t keep = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    arrived += list[i].total_gpu_milli();
    if (std::nearbyint(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity)) <=
        100) {
      keep = i + 1;
    }
  }
  list.resize(keep);
  Bounds b;
  ASSIGN_OR_RETURN(b.offline_allocated_pct, OfflineAllocatedPct(fleet, list, offline_policy));
  ASSIGN_OR_RETURN(b.ceiling_allocated_pct, CeilingAllocatedPct(fleet, list));
  return b;
}

}  // namespace fabrica::sim
