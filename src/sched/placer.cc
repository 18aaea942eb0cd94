#include "sched/placer.h"

#include <algorithm>
#include <cstring>

namespace fabrica {

namespace {

// Whether the nodes a request may use are most of the fleet (those a taint leaves): placed
// by class, as the whole fleet is, rather than node by node.
bool MostNodes(const ClusterState& s, const PodRequest& req) {
  return req.nodes && req.nodes->list.size() * 2 > static_cast<size_t>(s.node_count());
}

// The first node of class c that the request may use (any, without a selector); -1: none.
int FirstIn(const ClusterState& s, int c, const PodRequest& req) {
  for (int n : s.class_nodes(c))
    if (!req.nodes || req.nodes->in[n]) return n;
  return -1;
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPlaced:
      return "Placed";
    case Outcome::kPending:
      return "Pending";
    case Outcome::kInfeasible:
      return "Infeasible";
  }
  return "?";
}

bool FitsSomeEmptyNode(const ClusterState& s, const PodRequest& req, std::string* why) {
  int cpu_ok = 0, mem_ok = 0, model_ok = 0, gpus_ok = 0;
  // (Capacity is all that matters: one node per type, of the nodes its selector leaves it.)
  for (int n : req.nodes ? req.nodes->types : s.type_representatives()) {
    const Node& node = s.node(n);
    if (node.cpu.value() < req.cpu_milli) continue;
    ++cpu_ok;
    if (node.memory.value() < req.memory_mib) continue;
    ++mem_ok;
    if (req.num_gpu == 0) return true;
    if (node.devices.empty() || !(req.model_mask >> s.node_model(n) & 1)) continue;
    ++model_ok;
    if (req.kind == DeviceKind::kMig) {
      for (size_t d = 0; d < node.devices.size(); ++d) {
        for (size_t k = 0; k < node.devices[d].mig_slices.size(); ++k) {
          if (s.mig_slice_profile(n, static_cast<int>(d), static_cast<int>(k)) == req.mig_profile) {
            return true;
          }
        }
      }
      continue;
    }
    int whole = 0;
    for (const Device& d : node.devices) whole += d.mig_enabled() ? 0 : 1;
    if (whole < req.num_gpu) continue;
    ++gpus_ok;
    if (req.kind != DeviceKind::kFraction || req.gpu_memory_mib == 0) return true;
    // A share with its own memory cap needs a GPU with at least that much memory; memory that
    // is not tracked (0) never refuses it.
    for (const Device& d : node.devices) {
      const int64_t cap = d.memory.value();
      if (!d.mig_enabled() && (cap == 0 || cap >= req.gpu_memory_mib)) return true;
    }
  }
  if (why) {
    // (Of the nodes its selector leaves, said so: "no node has 16 CPU cores" would be false.)
    const std::string node =
        req.nodes ? "no node its " + req.nodes->said + " leaves it" : "no node";
    if (cpu_ok == 0)
      *why = node + " has " + FormatMilliCpu(MilliCpu(req.cpu_milli)) +
             (req.cpu_milli % 1000 == 0 ? " CPU cores" : " CPU");
    else if (mem_ok == 0)
      *why = node + " has " + FormatMemoryMib(MemoryMib(req.memory_mib)) + " of memory";
    else if (model_ok == 0)
      *why =
          node + (req.nodes ? " and" : "") + " with enough CPU and memory has an allowed GPU model";
    else if (req.kind == DeviceKind::kMig) {
      // (Where nodes of other models offer it, said so: a trial's `models: H200` read "no node
      // offers the MIG profile 1g.10gb" beside a node that did.)
      bool elsewhere = false;
      for (int n : s.type_representatives())
        elsewhere |= s.node_model(n) >= 0 && !(req.model_mask >> s.node_model(n) & 1) &&
                     s.node_slices_of(n, req.mig_profile) > 0;
      *why = node + (elsewhere ? " with a GPU of a model it allows" : "") +
             " offers the MIG profile " + s.mig_profile_name(req.mig_profile) +
             (elsewhere ? " (nodes of other models do)" : "");
    } else if (gpus_ok == 0) {
      *why = node + " has " + std::to_string(req.num_gpu) + " GPUs of an allowed model";
    } else {
      *why = std::string(req.nodes ? "no GPU there" : "no GPU") + " of an allowed model has " +
             FormatMemoryMib(MemoryMib(req.gpu_memory_mib)) + " of memory";
    }
  }
  return false;
}

PodPlacement Placer::Explain(const ClusterState& s, const PodRequest& req,
                             const std::vector<int>* only) const {
  PodPlacement p;
  std::string why;
  if (!FitsSomeEmptyNode(s, req, &why)) {
    p.outcome = Outcome::kInfeasible;
    p.reason = why;
    return p;
  }
  int lack_cpu = 0, lack_mem = 0, lack_gpu = 0, other = 0, other_model = 0, no_room = 0;
  int other_gpu_model = 0;  // (of other_model, nodes with GPUs)
  // Nodes another tenant's exclusivity keeps it off; nodes with some unused GPUs but fewer than
  // a pod of whole GPUs needs, and those GPUs (free GPUs scattered over nodes).
  int exclusive = 0, scattered = 0, scattered_gpus = 0;
  int small = 0;  // nodes whose GPUs all have less memory than the share asks
  // Nodes whose GPUs are all split into MIG slices, for a share or whole GPUs (a trial read
  // "have GPUs with less than its 10Gi of memory" of a MIG node's 80Gi GPUs).
  int mig_only = 0;
  const auto all_mig = [&](int n) {
    if (req.kind != DeviceKind::kFraction && req.kind != DeviceKind::kWhole) return false;
    const auto& devices = s.node(n).devices;
    return !devices.empty() && std::all_of(devices.begin(), devices.end(),
                                           [](const Device& d) { return d.mig_enabled(); });
  };
  // Nodes where a GPU has the compute a share needs but none the memory it asks free, and the
  // most GPU memory free on one GPU there (a trial found "lack a free GPU" of an L4 with 2.4Gi
  // free for a 3Gi share, the why only in the workloads' JSON).
  int short_memory = 0;
  int64_t most_free_memory = 0;
  const auto memory_short = [&](int n) {
    if (req.kind != DeviceKind::kFraction || req.gpu_memory_mib <= 0) return false;
    bool compute = false;
    int64_t most = 0;
    for (int d = 0; d < static_cast<int>(s.devices(n).size()); ++d) {
      const DeviceState& ds = s.devices(n)[d];
      if (s.node(n).devices[d].mig_enabled() || s.node(n).devices[d].memory.value() <= 0) continue;
      if (ds.free_memory_mib >= s.FractionMemoryMib(n, d, req)) return false;
      if (ds.free_milli < s.FractionMilli(n, d, req)) continue;
      compute = true;
      most = std::max(most, ds.free_memory_mib);
    }
    if (compute) most_free_memory = std::max(most_free_memory, most);
    return compute;
  };
  const auto too_small = [&](int n) {
    if (req.kind != DeviceKind::kFraction || req.gpu_memory_mib <= 0) return false;
    for (const Device& d : s.node(n).devices)
      if (!d.mig_enabled() && d.memory.value() >= req.gpu_memory_mib) return false;
    return true;
  };
  // Nodes with no MIG slice of the profile a MIG pod asks, however free (they are not short of
  // a free one: a trial read "10 lack a free 3g.40gb slice" of a fleet with two MIG nodes).
  int no_profile = 0;
  const auto offers_no_profile = [&](int n) {
    return req.kind == DeviceKind::kMig && s.node_slices_of(n, req.mig_profile) == 0;
  };
  // Nodes where a GPU has room for it but other tenants' pods on it keep it off (a trial read
  // "1 lack a free GPU" of a GPU with 600m free beside an untrusted tenant's share).
  int isolated = 0;
  const auto isolation_only = [&](int n) {
    const bool untrusted = req.tenant >= 0 && s.tenant(req.tenant).trust == TrustLevel::kUntrusted;
    for (int d = 0; d < static_cast<int>(s.devices(n).size()); ++d) {
      const DeviceState& ds = s.devices(n)[d];
      const Device& dev = s.node(n).devices[d];
      if (req.kind == DeviceKind::kFraction && !dev.mig_enabled() &&
          ds.free_milli >= s.FractionMilli(n, d, req) &&
          ds.free_memory_mib >= s.FractionMemoryMib(n, d, req) && ds.share_key != -1 &&
          ds.share_key != s.ShareKey(req.tenant))
        return true;
      if (req.kind == DeviceKind::kMig && dev.mig_enabled() &&
          ((ds.mig_key >= 0 && ds.mig_key != req.tenant) || ds.mig_key == ClusterState::kClosed ||
           (untrusted && ds.mig_key == ClusterState::kMigShared)))
        for (size_t k = 0; k < dev.mig_slices.size(); ++k)
          if ((ds.mig_free >> k & 1) &&
              s.mig_slice_profile(n, d, static_cast<int>(k)) == req.mig_profile)
            return true;
    }
    return false;
  };
  std::vector<char> usable;
  if (only) {
    usable.assign(s.node_count(), 0);
    for (int n : *only) usable[n] = 1;
  }
  int unselected = 0;  // nodes its nodeSelector, excludeNodes or nodeAffinity leaves out
  for (int c : s.active_classes()) {
    // (The class's nodes are alike in state: its front speaks for them, but NodeUsable would
    // refuse it for its labels alone; one of the nodes the selector leaves speaks instead.)
    int n = s.class_nodes(c).front();
    if (req.nodes)
      for (int m : s.class_nodes(c))
        if (req.nodes->in[m]) {
          n = m;
          break;
        }
    int count = static_cast<int>(s.class_nodes(c).size());
    if (req.nodes) {
      const int in =
          static_cast<int>(std::count_if(s.class_nodes(c).begin(), s.class_nodes(c).end(),
                                         [&](int m) { return req.nodes->in[m] != 0; }));
      unselected += count - in;
      count = in;
      if (count == 0) continue;
    }
    if (only) {
      const int in = static_cast<int>(std::count_if(
          s.class_nodes(c).begin(), s.class_nodes(c).end(),
          [&](int m) { return usable[m] != 0 && (!req.nodes || req.nodes->in[m] != 0); }));
      no_room += count - in;  // (take no new work)
      count = in;
      if (count == 0) continue;
    }
    // (A node of another GPU model never could: not counted as lacking room.)
    if (req.num_gpu > 0 && (s.node_model(n) < 0 || !(req.model_mask >> s.node_model(n) & 1))) {
      other_model += count;
      if (s.node_model(n) >= 0) other_gpu_model += count;  // (not a node without GPUs)
    } else if (all_mig(n))
      mig_only += count;  // (never, however free: its GPUs take MIG pods only)
    else if (too_small(n))
      small += count;  // (never, however free: a trial read "lack a free GPU" of idle L4s)
    else if (offers_no_profile(n))
      no_profile += count;
    else if (s.free_cpu(n) <= 0 && s.free_memory(n) <= 0)
      no_room += count;  // (full, or held whole: cordoned, not ready, out of service)
    else if (s.free_cpu(n) < req.cpu_milli)
      lack_cpu += count;
    else if (s.free_memory(n) < req.memory_mib)
      lack_mem += count;
    else if (NodeFits(s, n, req))
      other += count;
    else if (!s.NodeUsable(n, req))  // (room, model and labels are there: exclusivity is not)
      exclusive += count;
    else if (req.kind == DeviceKind::kWhole && s.node_whole_free(n) > 0 &&
             s.node_whole_free(n) < req.num_gpu) {
      scattered += count;
      scattered_gpus += count * s.node_whole_free(n);
    } else if (isolation_only(n)) {
      isolated += count;
    } else if (memory_short(n)) {
      short_memory += count;
    } else {
      lack_gpu += count;
    }
  }
  p.outcome = Outcome::kPending;
  p.reason = "no node can take it now: " + std::to_string(lack_cpu) + " lack CPU, " +
             std::to_string(lack_mem) + " lack memory, " + std::to_string(lack_gpu) +
             // (What a device lacks, by what it asks: a trial read of isolation for whole GPUs.)
             (req.kind == DeviceKind::kFraction
                  ? " lack a free GPU, or a shared one with its compute and memory left that "
                    "isolation lets it share"
              : req.kind == DeviceKind::kMig
                  ? " lack a free " + s.mig_profile_name(req.mig_profile) + " slice it may use"
              // ("of an allowed model" only where a model was left out: a trial's workload
              // that named none read it.)
              : other_gpu_model > 0 ? " lack a free GPU of an allowed model"
                                    : " lack a free GPU");
  if (scattered)
    p.reason += ", " + std::to_string(scattered) + " have " + std::to_string(scattered_gpus) +
                " unused GPUs between them but fewer than the " + std::to_string(req.num_gpu) +
                " it needs on one node";
  if (exclusive) {
    const bool own = req.tenant >= 0 && s.tenant(req.tenant).exclusive_nodes;
    p.reason += ", " + std::to_string(exclusive) +
                (own ? " run other tenants' pods (its tenant asks for nodes of its own: "
                       "exclusiveNodes)"
                     : " are held by another tenant's exclusiveNodes");
  }
  if (isolated) {
    const Tenant* t = req.tenant >= 0 ? &s.tenant(req.tenant) : nullptr;
    const TrustLevel trust = t ? t->trust : TrustLevel::kStandard;
    p.reason +=
        ", " + std::to_string(isolated) +
        " have room for it only on GPUs other tenants' pods use, which isolation keeps it off (" +
        (trust == TrustLevel::kUntrusted ? "its tenant is untrusted: its GPU must be its alone"
         : req.kind == DeviceKind::kMig  ? "an untrusted tenant's GPU is closed to others"
         : trust == TrustLevel::kTrusted
             ? "it shares a GPU only within trust domain " +
                   (t->trust_domain.empty() ? t->name.str() : t->trust_domain)
             : "its tenant is standard: it shares a GPU only with its own pods") +
        ")";
  }
  if (other) p.reason += ", " + std::to_string(other) + " refused by policy";
  if (short_memory)
    p.reason += ", " + std::to_string(short_memory) + " have the compute but no GPU with its " +
                FormatMemoryMib(MemoryMib(req.gpu_memory_mib)) + " of memory free (at most " +
                // (In whole GiB, rounded down: a wait's message that moved with every share
                // that came or went would be written each time.)
                FormatMemoryMib(MemoryMib(most_free_memory / 1024 * 1024)) + " on one)";
  if (no_profile)
    p.reason += ", " + std::to_string(no_profile) + " offer no " +
                s.mig_profile_name(req.mig_profile) + " slice";
  if (mig_only)
    p.reason += ", " + std::to_string(mig_only) + " have only MIG-partitioned GPUs (they take " +
                "pods that ask for a MIG slice)";
  if (small)
    p.reason += ", " + std::to_string(small) + " have GPUs with less than its " +
                FormatMemoryMib(MemoryMib(req.gpu_memory_mib)) + " of memory";
  if (no_room)
    p.reason += ", " + std::to_string(no_room) +
                " have no room at all (full, cordoned, held, not ready or out of service)";
  if (other_model) p.reason += " (" + std::to_string(other_model) + " have no allowed GPU model)";
  if (unselected)
    p.reason +=
        " (" + std::to_string(unselected) + " more are left out by its " + req.nodes->said + ")";
  return p;
}

PodPlacement Placer::Finish(const ClusterState& s, int node, const NodeChoice& choice,
                            const PodRequest& req, Rng& rng) const {
  PodPlacement p;
  p.outcome = Outcome::kPlaced;
  p.assignment.node = node;
  p.assignment.devices = policy_.FinalDevices(s, node, req, choice, rng);
  p.assignment.numa = s.HomeNuma(node, p.assignment.devices, req);
  return p;
}

// A tenant with exclusiveNodes keeps every other tenant off each node its pods run on: its
// next pod goes to a node it already holds where one has room, before it takes another (a
// trial saw two pods that fit one node hold two, 16 GPUs kept from others). Placed: true.
bool Placer::PlaceOnHeldNode(const ClusterState& s, const PodRequest& req, Rng& rng,
                             PodPlacement* out) const {
  if (req.tenant < 0 || req.num_gpu <= 0 || !s.tenant(req.tenant).exclusive_nodes) return false;
  std::vector<int> held;
  for (int n = 0; n < s.node_count(); ++n)
    if (s.exclusive_owner(n) == req.tenant) held.push_back(n);
  if (held.empty()) return false;
  PodPlacement p = Best(
      s, req, rng, held.size(), [&](size_t i) { return held[i]; },
      /*explain=*/false);
  if (p.outcome != Outcome::kPlaced) return false;
  *out = std::move(p);
  return true;
}

PodPlacement Placer::Place(const ClusterState& s, const PodRequest& req, Rng& rng) const {
  if (PodPlacement held; PlaceOnHeldNode(s, req, rng, &held)) return held;
  if (req.nodes) return PlaceSelected(s, req, rng);
  const std::vector<int>& classes = s.active_classes();
  if (policy_.uniform_random()) {
    // Random-fit: every feasible node equally likely.
    std::vector<std::pair<int, int>> feasible;  // (class, nodes)
    int64_t total = 0;
    for (int c : classes) {
      if (NodeFits(s, s.class_nodes(c).front(), req)) {
        feasible.emplace_back(c, static_cast<int>(s.class_nodes(c).size()));
        total += feasible.back().second;
      }
    }
    if (total == 0) {
      if (explain_) return Explain(s, req);
      PodPlacement p;
      p.reason = "no node can take it now";
      return p;
    }
    int64_t k = static_cast<int64_t>(rng.Uniform(total));
    for (const auto& [c, count] : feasible) {
      if (k < count) {
        const int n = s.class_nodes(c)[k];
        auto choice = policy_.Score(s, n, req);
        CHECK(choice.has_value());
        return Finish(s, n, *choice, req, rng);
      }
      k -= count;
    }
  }
  // One node per class: the lowest index of its class. Most classes of a busy fleet cannot take
  // the pod at all; their contiguous summaries reject them before any node is looked at.
  const std::vector<ClusterState::FitSummary>& fit = s.active_summaries();
  std::vector<int> candidates;
  for (const ClusterState::FitSummary& f : fit)
    if (ClusterState::MayFit(f, req)) candidates.push_back(f.front);
  return Best(s, req, rng, candidates.size(), [&](size_t i) { return candidates[i]; });
}

// A pod whose selector leaves it some nodes: those, each on its own (a class's nodes are alike in
// state, not in labels). As Place otherwise: random-fit draws among those that fit.
PodPlacement Placer::PlaceSelected(const ClusterState& s, const PodRequest& req, Rng& rng) const {
  if (policy_.uniform_random()) {
    std::vector<int> feasible;
    for (int n : req.nodes->list)
      if (s.MayFit(n, req) && NodeFits(s, n, req)) feasible.push_back(n);
    if (!feasible.empty()) {
      const int n = feasible[rng.Uniform(static_cast<int64_t>(feasible.size()))];
      auto choice = policy_.Score(s, n, req);
      CHECK(choice.has_value());
      return Finish(s, n, *choice, req, rng);
    }
  }
  // Nodes of one class score alike and ties go to the lowest index: of each class only its
  // first node in the set is scored, as Place scores a class's front. A set of most nodes (one
  // that leaves out tainted nodes) is walked by class, as Place walks them, the summaries
  // rejecting most; a smaller one node by node.
  std::vector<int> candidates;
  if (MostNodes(s, req)) {
    const std::vector<int>& classes = s.active_classes();
    const std::vector<ClusterState::FitSummary>& fit = s.active_summaries();
    for (size_t i = 0; i < classes.size(); ++i)
      if (ClusterState::MayFit(fit[i], req))
        if (const int n = FirstIn(s, classes[i], req); n >= 0) candidates.push_back(n);
    return Best(s, req, rng, candidates.size(), [&](size_t i) { return candidates[i]; });
  }
  std::vector<char> seen;
  for (int n : req.nodes->list) {
    if (!s.MayFit(n, req)) continue;
    const int c = s.node_class(n);
    if (c >= static_cast<int>(seen.size())) seen.resize(static_cast<size_t>(c) + 1, 0);
    if (seen[c]) continue;
    seen[c] = 1;
    candidates.push_back(n);
  }
  return Best(s, req, rng, candidates.size(), [&](size_t i) { return candidates[i]; });
}

PodPlacement Placer::PlaceIn(const ClusterState& s, const std::vector<int>& nodes,
                             const PodRequest& req, Rng& rng) const {
  return Best(s, req, rng, nodes.size(), [&](size_t i) { return nodes[i]; });
}

template <typename NodeAt>
PodPlacement Placer::Best(const ClusterState& s, const PodRequest& req, Rng& rng, size_t count,
                          NodeAt node_at, bool explain) const {
  // The highest score wins; ties go to the lowest node index.
  int best_node = -1;
  NodeChoice best;
  for (size_t i = 0; i < count; ++i) {
    const int n = node_at(i);
    auto choice = policy_.Score(s, n, req);
    if (!choice) continue;
    if (best_node < 0 || choice->score > best.score ||
        (choice->score == best.score && n < best_node)) {
      best_node = n;
      best = std::move(*choice);
    }
  }
  if (best_node < 0) {
    if (explain_ && explain) return Explain(s, req);
    PodPlacement p;
    p.reason = "no node can take it now";
    return p;
  }
  return Finish(s, best_node, best, req, rng);
}

namespace {

bool SameRequest(const PodRequest& a, const PodRequest& b) {
  return a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib && a.kind == b.kind &&
         a.num_gpu == b.num_gpu && a.gpu_milli == b.gpu_milli &&
         a.gpu_memory_mib == b.gpu_memory_mib && a.mig_profile == b.mig_profile &&
         a.model_mask == b.model_mask && a.tenant == b.tenant && a.nodes == b.nodes;
}

}  // namespace

PodPlacement Placer::PlaceRemembering(const ClusterState& s, const PodRequest& req, Rng& rng,
                                      Memo& memo, const std::vector<int>& touched) const {
  // (A set of most nodes, one that leaves out tainted ones, is remembered by class as the
  // fleet is: a class's first node in the set speaks for it. Smaller ones are placed afresh.)
  if (policy_.uniform_random() || (req.nodes && !MostNodes(s, req))) return Place(s, req, rng);
  if (PodPlacement held; PlaceOnHeldNode(s, req, rng, &held)) return held;
  // A score depends on the request and on its node's state alone, which a class's stamp pins
  // (and the class's nodes: a node that joins or leaves it changes the stamp).
  const auto scored = [&](int c) {
    const int n = FirstIn(s, c, req);
    if (n < 0) return Memo::Scored{c, s.class_stamp(c), s.class_summary(c).front, std::nullopt};
    const std::optional<NodeChoice> choice = policy_.Score(s, n, req);
    return Memo::Scored{c, s.class_stamp(c), n,
                        choice ? std::optional<double>(choice->score) : std::nullopt};
  };
  if (memo.valid && SameRequest(memo.req, req)) {
    std::vector<Memo::Scored> kept;
    kept.reserve(memo.scored.size() + touched.size());
    for (const Memo::Scored& e : memo.scored)
      if (s.class_stamp(e.cls) == e.stamp) kept.push_back(e);
    for (int c : touched) {
      if (s.class_stamp(c) == 0) continue;  // gone
      bool current = false;
      for (const Memo::Scored& e : kept) current |= e.cls == c;
      if (!current && ClusterState::MayFit(s.class_summary(c), req)) kept.push_back(scored(c));
    }
    memo.scored = std::move(kept);
  } else {
    memo.scored.clear();
    const std::vector<int>& classes = s.active_classes();
    const std::vector<ClusterState::FitSummary>& fit = s.active_summaries();
    for (size_t i = 0; i < fit.size(); ++i)
      if (ClusterState::MayFit(fit[i], req)) memo.scored.push_back(scored(classes[i]));
    memo.req = req;
    memo.valid = true;
  }
  // As Best: the highest score, ties to the lowest node index.
  const Memo::Scored* best = nullptr;
  for (const Memo::Scored& e : memo.scored) {
    if (!e.score) continue;
    if (!best || *e.score > *best->score || (*e.score == *best->score && e.node < best->node))
      best = &e;
  }
  if (!best) {
    if (explain_) return Explain(s, req);
    PodPlacement p;
    p.reason = "no node can take it now";
    return p;
  }
  const std::optional<NodeChoice> choice = policy_.Score(s, best->node, req);
  CHECK(choice.has_value());
  return Finish(s, best->node, *choice, req, rng);
}

bool Placer::PlaceAllIn(ClusterState& s, const std::vector<int>* nodes,
                        const std::vector<PodRequest>& pods, Rng& rng, std::vector<Assignment>& out,
                        std::pair<size_t, std::string>* failed) const {
  out.clear();
  Memo memo;
  std::vector<int> touched;
  for (const PodRequest& req : pods) {
    // Over the fleet, each pod on the nodes it prefers most that have room for it, then
    // anywhere it may run (a workload whose pods did not all fit on the preferred ones: the
    // rest go where they can, as Kubernetes ranks each pod).
    PodPlacement p;
    if (!nodes && req.preferred) {
      const bool explain = explain_;
      explain_ = false;  // (a tier's failure is not told)
      for (const std::shared_ptr<const NodeSet>& tier : *req.preferred) {
        PodRequest narrowed = req;
        narrowed.nodes = tier;
        narrowed.preferred = nullptr;
        p = Place(s, narrowed, rng);
        if (p.outcome == Outcome::kPlaced) break;
      }
      explain_ = explain;
    }
    if (p.outcome != Outcome::kPlaced)
      p = nodes ? PlaceIn(s, *nodes, req, rng) : PlaceRemembering(s, req, rng, memo, touched);
    if (p.outcome != Outcome::kPlaced) {
      if (failed) *failed = {out.size(), p.reason};
      for (size_t i = out.size(); i-- > 0;) s.Release(out[i], pods[i]);
      out.clear();
      return false;
    }
    const int left = s.node_class(p.assignment.node);
    s.Apply(p.assignment, req);
    touched = {left, s.node_class(p.assignment.node)};
    out.push_back(std::move(p.assignment));
  }
  return true;
}

namespace {

using PodShape =
    std::tuple<int64_t, int64_t, int, int, int64_t, int64_t, uint64_t, const NodeSet*, int>;

// The whole-GPU and MIG-slice pods of `pods` by shape: (how many, one of them). Fractions are
// not bounded by shape.
std::map<PodShape, std::pair<int, const PodRequest*>> BoundedShapes(
    const std::vector<PodRequest>& pods) {
  std::map<PodShape, std::pair<int, const PodRequest*>> shapes;
  for (const PodRequest& p : pods) {
    if (p.kind != DeviceKind::kWhole && p.kind != DeviceKind::kMig) continue;
    auto& [count, req] =
        shapes[PodShape{p.cpu_milli, p.memory_mib, static_cast<int>(p.kind), p.num_gpu, p.gpu_milli,
                        p.gpu_memory_mib, p.model_mask, p.nodes.get(), p.mig_profile}];
    ++count;
    req = &p;
  }
  return shapes;
}

// How many pods like `req` node n takes were it empty: as many as its GPUs not in MIG mode
// (or its slices of the profile) and its CPU allow; none where its model or the pod's
// selector leaves it out (the model counts only `by_model`).
int64_t PlacesOnEmpty(const ClusterState& s, int n, const PodRequest& req, bool by_model = true) {
  const Node& node = s.node(n);
  const int model = s.node_model(n);
  if (by_model && (model < 0 || !(req.model_mask >> model & 1))) return 0;
  if (req.nodes && !req.nodes->in[n]) return 0;
  int64_t by_gpu = 0;
  if (req.kind != DeviceKind::kMig) {
    // (A MIG-partitioned GPU takes no whole-GPU pod; nor one with less memory than a share
    // asks: a trial's 200Gi share read as runnable.)
    int whole = 0;
    for (const Device& d : node.devices)
      whole += d.mig_enabled() || (req.gpu_memory_mib > 0 && d.memory.value() > 0 &&
                                   d.memory.value() < req.gpu_memory_mib)
                   ? 0
                   : 1;
    by_gpu = whole / std::max(1, req.num_gpu);
  } else {
    by_gpu = s.node_slices_of(n, req.mig_profile);
  }
  const int64_t by_cpu = req.cpu_milli ? node.cpu.value() / req.cpu_milli : by_gpu;
  // (And memory: a trial's 4Ti pod on nodes of 2Ti read as runnable.)
  const int64_t by_memory =
      req.memory_mib && node.memory.value() > 0 ? node.memory.value() / req.memory_mib : by_gpu;
  return std::min({by_gpu, by_cpu, by_memory});
}

std::string ShapeSaid(const ClusterState& s, const PodRequest& req, int count) {
  return std::to_string(count) + " pods of " +
         (req.kind == DeviceKind::kMig ? "a " + s.mig_profile_name(req.mig_profile) + " MIG slice"
                                       : std::to_string(req.num_gpu) + " GPUs");
}

}  // namespace

bool FleetHoldsPods(const ClusterState& s, const std::vector<PodRequest>& pods, std::string* why) {
  for (const auto& [shape, entry] : BoundedShapes(pods)) {
    const auto [count, req] = entry;
    int64_t places = 0;
    for (int n = 0; n < s.node_count() && places < count; ++n) places += PlacesOnEmpty(s, n, *req);
    if (places < count) {
      if (why)
        *why = "needs " + ShapeSaid(s, *req, count) + "; " +
               // (Said of the fleet empty: a trial read "has room for" as room free now.)
               (req->nodes ? "the nodes its " + req->nodes->said + " leaves it, even empty, hold"
                           : std::string("the whole fleet, even empty, holds")) +
               " only " + std::to_string(places);
      return false;
    }
  }
  return true;
}

bool SomeDomainHolds(const ClusterState& s, const std::vector<PodRequest>& pods,
                     const TopologyConstraint& topology, std::string* why, bool by_model) {
  if (!topology.required || topology.level == TopologyLevel::kNone) return true;
  // What its MIG slices need (of MIG GPUs' slices of the profiles they ask) and what the rest
  // need (of GPUs without MIG), apart: the one never takes the other's GPUs.
  int64_t need_slices = 0, need_other = 0;
  uint64_t models = 0;    // the models some pod may use
  uint64_t profiles = 0;  // the MIG profiles some pod asks
  // The nodes some pod's selector leaves it (every node where one has none).
  bool anywhere = false;
  std::vector<const NodeSet*> sets;
  for (const PodRequest& p : pods) {
    if (!p.nodes)
      anywhere = true;
    else if (std::find(sets.begin(), sets.end(), p.nodes.get()) == sets.end())
      sets.push_back(p.nodes.get());
  }
  const auto selected = [&](int n) {
    if (anywhere) return true;
    for (const NodeSet* set : sets)
      if (set->in[n]) return true;
    return false;
  };
  std::string profile_names;
  for (const PodRequest& p : pods) {
    if (p.kind == DeviceKind::kNone) continue;
    models |= p.model_mask;
    if (p.kind != DeviceKind::kMig) {
      need_other += p.total_gpu_milli();
      continue;
    }
    need_slices += p.total_gpu_milli();
    if (p.mig_profile >= 0 && p.mig_profile < 64 && !(profiles >> p.mig_profile & 1)) {
      profiles |= uint64_t{1} << p.mig_profile;
      profile_names += (profile_names.empty() ? "" : ", ") + s.mig_profile_name(p.mig_profile);
    }
  }
  // Counting every GPU (and slice) of the domain some pod could use keeps a "no" a sure
  // "never".
  int64_t most_slices = 0, most_other = 0;
  bool narrowed = false;   // some domain has GPUs no pod could use
  bool off_nodes = false;  // ... or nodes no pod's selector leaves it
  // Whole-GPU pods and slices by shape: a domain with GPUs enough in all may still hold too
  // few of them (a trial's three 5-GPU pods that required one leaf of two 8-GPU nodes waited
  // for ever: one such pod a node). Per shape, the most any domain with GPUs enough holds.
  const auto shapes = BoundedShapes(pods);
  std::vector<int64_t> most_places(shapes.size(), 0);
  std::vector<std::string> most_where(shapes.size());
  bool enough_gpus = false;  // some domain has GPUs enough in all
  int domain_index = -1;
  for (const std::vector<int>& domain : s.domains(topology.level)) {
    ++domain_index;
    int64_t slices = 0, other = 0;
    for (int n : domain) {
      const Node& node = s.node(n);
      if (!selected(n)) {
        off_nodes = true;
        continue;
      }
      const bool model = !by_model || (s.node_model(n) >= 0 && (models >> s.node_model(n) & 1));
      narrowed |= !model && node.gpu_count() > 0;
      for (size_t d = 0; d < node.devices.size(); ++d) {
        const Device& dev = node.devices[d];
        if (!dev.mig_enabled()) {
          other += model ? kMilliPerGpu : 0;
          narrowed |= model && need_other == 0;
          continue;
        }
        narrowed |= model && need_slices == 0;
        for (size_t k = 0; k < dev.mig_slices.size(); ++k) {
          const int profile = s.mig_slice_profile(n, static_cast<int>(d), static_cast<int>(k));
          if (model && profile >= 0 && profile < 64 && (profiles >> profile & 1))
            slices += MigSliceMilli(dev.mig_slices[k][0] - '0');
        }
      }
    }
    most_slices = std::max(most_slices, slices);
    most_other = std::max(most_other, other);
    if (slices < need_slices || other < need_other) continue;
    enough_gpus = true;
    bool all_fit = true;
    size_t k = 0;
    for (const auto& [shape, entry] : shapes) {
      int64_t places = 0;
      for (int n : domain) places += PlacesOnEmpty(s, n, *entry.second, by_model);
      if (places > most_places[k]) {
        most_places[k] = places;
        most_where[k] = s.domain_name(topology.level, domain_index);
      }
      all_fit &= places >= entry.first;
      ++k;
    }
    if (all_fit) return true;
  }
  if (enough_gpus) {
    if (why) {
      const std::string level = TopologyLevelName(topology.level);
      size_t k = 0;
      for (const auto& [shape, entry] : shapes) {
        if (most_places[k] < entry.first) {
          *why = "gang needs " + ShapeSaid(s, *entry.second, entry.first) + " in one " + level +
                 " domain; " +
                 (most_places[k] == 0
                      ? "no " + level + " domain with GPUs enough holds one, even empty"
                      : "at most " + std::to_string(most_places[k]) + " fit in one, even empty (" +
                            most_where[k] + ")");
          return false;
        }
        ++k;
      }
      *why = "gang needs its pods in one " + level +
             " domain; no domain holds all of them, even empty (each shape fits in some)";
    }
    return false;
  }
  if (why) {
    const auto gpus = [](int64_t milli) {
      return FormatMilliGpu(MilliGpu(milli)) + (milli == kMilliPerGpu ? " GPU" : " GPUs");
    };
    const std::string in_one =
        " in one " + std::string(TopologyLevelName(topology.level)) + " domain";
    const std::string where =
        off_nodes ? std::string(" on the nodes its pods' node selectors leave them") : "";
    if (need_slices == 0) {
      *why = "gang needs " + FormatMilliGpu(MilliGpu(need_other)) + " GPUs" + in_one +
             "; the largest has " + FormatMilliGpu(MilliGpu(most_other)) + " GPUs in all" +
             (narrowed ? " of the models its pods may use (a MIG-partitioned GPU only for a slice)"
                       : "") +
             where;
    } else {
      const std::string slices_said = "MIG slices (" + profile_names + ")";
      *why = "gang needs " + gpus(need_slices) + " of " + slices_said +
             (need_other > 0 ? " and " + gpus(need_other) + " without MIG" : "") + in_one + "; ";
      const std::string models = by_model ? ", counting GPUs of the models its pods may use" : "";
      if (need_other == 0)
        *why += "the largest has " + gpus(most_slices) + " of such slices" + models;
      else
        *why += "no domain has both (the most slices in one: " + gpus(most_slices) +
                "; the most GPUs without MIG in one: " + FormatMilliGpu(MilliGpu(most_other)) +
                ")" + models;
      *why += where;
    }
  }
  return false;
}

GangPlacement Placer::PlaceGang(ClusterState& s, const std::vector<PodRequest>& pods,
                                const TopologyConstraint& topology, Rng& rng,
                                const std::vector<int>* only) const {
  GangPlacement g;
  // (Nodes outside `only` count as full; a domain is tried on its nodes in it.)
  std::vector<char> in_only;
  if (only) {
    in_only.assign(s.node_count(), 0);
    for (int n : *only) in_only[n] = 1;
  }
  const auto open = [&](int n) { return !only || in_only[n]; };
  const auto open_part = [&](const std::vector<int>& domain) {
    std::vector<int> out;
    for (int n : domain)
      if (open(n)) out.push_back(n);
    return out;
  };
  for (const PodRequest& req : pods) {
    std::string why;
    if (!FitsSomeEmptyNode(s, req, &why)) {
      g.outcome = Outcome::kInfeasible;
      g.reason = why;
      return g;
    }
  }
  int64_t need_milli = 0;
  for (const PodRequest& req : pods) need_milli += req.total_gpu_milli();
  // (Its pods' models may be narrowed by quota for now: every GPU counts here, the models only
  // when it is submitted.)
  if (!SomeDomainHolds(s, pods, topology, &g.reason, /*by_model=*/false)) {
    g.outcome = Outcome::kInfeasible;
    return g;
  }

  // Levels to try, tightest first. A preferred constraint widens step by step to the levels whose
  // domains are larger on this fleet (racks hold leaves in some designs and leaves hold racks in
  // others, and on NVL72 the rack is the NVLink domain); a required one does not widen at all.
  std::vector<TopologyLevel> levels;
  if (topology.level != TopologyLevel::kNone) {
    levels.push_back(topology.level);
    if (!topology.required) {
      auto mean_size = [&](TopologyLevel l) {
        return static_cast<double>(s.node_count()) / static_cast<double>(s.domains(l).size());
      };
      std::vector<std::pair<double, TopologyLevel>> wider;
      for (TopologyLevel l :
           {TopologyLevel::kNvlinkDomain, TopologyLevel::kRack, TopologyLevel::kLeaf}) {
        if (l != topology.level && mean_size(l) > mean_size(topology.level)) {
          wider.emplace_back(mean_size(l), l);
        }
      }
      std::sort(wider.begin(), wider.end());
      for (const auto& [size, l] : wider) levels.push_back(l);
      levels.push_back(TopologyLevel::kNone);
    }
  } else {
    levels.push_back(TopologyLevel::kNone);
  }

  const TopologyLevel count_level =
      topology.level == TopologyLevel::kNone ? TopologyLevel::kLeaf : topology.level;
  auto finish = [&](std::vector<Assignment> out) {
    g.outcome = Outcome::kPlaced;
    std::vector<int> used;
    for (const Assignment& a : out) used.push_back(s.domain_of(a.node, count_level));
    std::sort(used.begin(), used.end());
    g.domains_used = static_cast<int>(std::unique(used.begin(), used.end()) - used.begin());
    g.pods = std::move(out);
    return g;
  };

  std::vector<Assignment> out;
  // For the reason it waits: the most free GPUs in one domain of the required level on nodes
  // of the models its pods may use (not every GPU there: an H100 gang cannot use L4s).
  const PodRequest* gpu_pod = nullptr;
  for (const PodRequest& req : pods)
    if (req.kind != DeviceKind::kNone && !gpu_pod) gpu_pod = &req;
  // (A workload's pod sets share one selector: its first GPU pod's nodes are its nodes.)
  const auto selected = [&](int n) { return !gpu_pod || !gpu_pod->nodes || gpu_pod->nodes->in[n]; };
  const auto usable = [&](int n) {
    return !gpu_pod ||
           (s.node_model(n) >= 0 && (gpu_pod->model_mask >> s.node_model(n) & 1) && selected(n));
  };
  // A node's free GPUs leave MIG GPUs out; a gang that takes slices counts the free slices of
  // the profiles it asks.
  const ClusterState::RoomKinds kinds = ClusterState::RoomKindsOf(pods);
  const auto room = [&](int n) { return open(n) ? s.node_free_room(n, kinds) : int64_t{0}; };
  // What of that its GPU pods may take, for the reason: whole GPUs alone for work of whole GPUs,
  // only shares isolation lets it join, nothing on a node kept for another tenant (a trial's
  // 4-GPU gang read 7 free in a leaf of two nodes with a 500m share on each, where 6 were).
  bool whole_only = gpu_pod != nullptr;
  for (const PodRequest& req : pods)
    whole_only &= req.kind == DeviceKind::kNone || req.kind == DeviceKind::kWhole;
  PodRequest probe;  // (the node's isolation and models, not its CPU, memory or selector)
  if (gpu_pod) probe = *gpu_pod, probe.cpu_milli = 0, probe.memory_mib = 0, probe.nodes = nullptr;
  const auto usable_room = [&](int n) -> int64_t {
    if (!gpu_pod || !open(n) || !s.NodeUsable(n, probe)) return 0;
    if (whole_only) return int64_t{s.node_whole_free(n)} * kMilliPerGpu;
    if (gpu_pod->kind != DeviceKind::kFraction) return room(n);
    int64_t shared = 0;
    for (size_t d = 0; d < s.devices(n).size(); ++d)
      if (s.DeviceUsable(n, static_cast<int>(d), probe)) shared += s.devices(n)[d].free_milli;
    return shared;
  };
  int64_t largest_free = 0;
  int largest_domain = -1;  // (named in the reason: a trial read two domains' numbers as one's)
  std::pair<size_t, std::string> failed{0, ""};  // the fleet-wide try's (see the reason below)
  for (TopologyLevel level : levels) {
    if (level == TopologyLevel::kNone && only) {
      // Pod by pod on the open nodes; the one that fits none is explained with those nodes
      // alone open (over the whole fleet, a trial read held or cordoned nodes as "refused by
      // policy").
      const bool explain = explain_;
      explain_ = false;
      out.clear();
      bool all = true;
      for (size_t k = 0; k < pods.size() && all; ++k) {
        PodPlacement p = PlaceIn(s, *only, pods[k], rng);
        if (p.outcome != Outcome::kPlaced) {
          explain_ = explain;
          failed = {k, explain ? Explain(s, pods[k], only).reason : p.reason};
          for (size_t i = out.size(); i-- > 0;) s.Release(out[i], pods[i]);
          out.clear();
          all = false;
          break;
        }
        s.Apply(p.assignment, pods[k]);
        out.push_back(std::move(p.assignment));
      }
      explain_ = explain;
      if (all) return finish(std::move(out));
      continue;
    }
    if (level == TopologyLevel::kNone) {
      if (PlaceAllIn(s, nullptr, pods, rng, out, &failed)) return finish(std::move(out));
      continue;
    }
    // Candidate domains with enough free GPU capacity, the tightest first so that large
    // domains stay whole for large gangs.
    const auto& domains = s.domains(level);
    std::vector<std::pair<int64_t, int>> candidates;
    for (size_t d = 0; d < domains.size(); ++d) {
      int64_t free = 0, usable_free = 0;
      for (int n : domains[d]) {
        if (selected(n)) free += room(n);
        if (usable(n)) usable_free += gpu_pod ? usable_room(n) : room(n);
      }
      if (level == topology.level && (largest_domain < 0 || usable_free > largest_free)) {
        largest_free = usable_free;
        largest_domain = static_cast<int>(d);
      }
      if (free >= need_milli) candidates.emplace_back(free, static_cast<int>(d));
    }
    std::sort(candidates.begin(), candidates.end());
    constexpr size_t kMaxDomainTries = 16;
    for (size_t i = 0; i < candidates.size() && i < kMaxDomainTries; ++i) {
      const std::vector<int> part =
          only ? open_part(domains[candidates[i].second]) : std::vector<int>();
      if (PlaceAllIn(s, only ? &part : &domains[candidates[i].second], pods, rng, out)) {
        return finish(std::move(out));
      }
    }
  }
  g.outcome = Outcome::kPending;
  if (topology.level != TopologyLevel::kNone && topology.required) {
    // (On the nodes its selector leaves it, said so: a trial's excludeNodes kept it off a
    // leaf with 24 GPUs free, and the reason named another with 8 as the most.)
    const std::string where = gpu_pod && gpu_pod->nodes && !gpu_pod->nodes->said.empty()
                                  ? ", on the nodes its " + gpu_pod->nodes->said + " leaves it"
                                  : "";
    g.reason = "gang needs " + FormatMilliGpu(MilliGpu(need_milli)) + " GPUs in one " +
               TopologyLevelName(topology.level) + " domain; the most free in one, of the " +
               "models it may use" + where + ", is " + FormatMilliGpu(MilliGpu(largest_free)) +
               (largest_domain >= 0 && largest_free > 0
                    ? " (" + s.domain_name(topology.level, largest_domain) + ")"
                    : "");
    // Free GPUs enough but split among nodes that cannot take a pod each: how many fit.
    if (explain_ && pods.size() > 1) {
      size_t most = 0;
      int most_in = -1;
      Rng trial = rng;  // (a copy: explaining draws nothing from the caller's sequence)
      const auto& all = s.domains(topology.level);
      // (Each pod's own failure is not said here: explained, each would look over the fleet,
      // per domain. Nor is a domain tried whose usable free GPUs take no pod of it.)
      explain_ = false;
      // (Whole GPUs only: a node's free count leaves MIG GPUs out, and a fraction sized by its
      // memory needs less on a bigger GPU than it says.)
      int64_t least_pod = 0;  // the fewest GPUs a pod of it asks (0: no domain is skipped)
      bool first = true;
      for (const PodRequest& req : pods) {
        const int64_t milli = req.kind == DeviceKind::kWhole ? req.total_gpu_milli() : 0;
        least_pod = first ? milli : std::min(least_pod, milli);
        first = false;
      }
      for (size_t d = 0; d < all.size(); ++d) {
        const std::vector<int> part = only ? open_part(all[d]) : std::vector<int>();
        const std::vector<int>& domain = only ? part : all[d];
        int64_t usable_free = 0;
        for (int n : domain)
          if (usable(n)) usable_free += gpu_pod ? usable_room(n) : room(n);
        if (usable_free < least_pod) continue;
        std::vector<Assignment> fitted;
        for (const PodRequest& req : pods) {
          PodPlacement p = PlaceIn(s, domain, req, trial);
          if (p.outcome != Outcome::kPlaced) break;
          s.Apply(p.assignment, req);
          fitted.push_back(std::move(p.assignment));
        }
        if (fitted.size() > most) {
          most = fitted.size();
          most_in = static_cast<int>(d);
        }
        for (size_t i = fitted.size(); i-- > 0;) s.Release(fitted[i], pods[i]);
      }
      explain_ = true;
      g.reason += "; at most " + std::to_string(most) + " of its " + std::to_string(pods.size()) +
                  " pods fit in one now" +
                  (most_in >= 0 ? " (" + s.domain_name(topology.level, most_in) + ")" : "");
    }
  } else {
    g.reason = pods.size() == 1 ? "the fleet has no room for its pod now"
                                : "the fleet has no room for all " + std::to_string(pods.size()) +
                                      " pods at once";
    // Explained: how many fitted before one did not, and why that one did not (a user-style
    // trial saw only the line above, where a pod alone was told of scattered GPUs and nodes
    // another tenant holds).
    constexpr const char* kNoNode = "no node can take it now: ";
    if (explain_ && failed.second.rfind(kNoNode, 0) == 0) {
      if (pods.size() > 1)
        g.reason +=
            (failed.first == 0 ? std::string(" (none fits: ")
                               : " (" + std::to_string(failed.first) + " fit; for the next, ") +
            failed.second.substr(std::strlen(kNoNode)) + ")";
      else
        g.reason += ": " + failed.second.substr(std::strlen(kNoNode));
    }
  }
  return g;
}

// (A user-style trial read "gang" of one written `gang: false`, with a required topology.)
std::string TogetherSaid(bool gang, std::string why) {
  if (gang) return why;
  if (why.rfind("gang needs its pods in one ", 0) == 0)
    return "its pods need to be in one " + why.substr(std::strlen("gang needs its pods in one "));
  if (why.rfind("gang needs ", 0) == 0)
    return "its pods together need " + why.substr(std::strlen("gang needs "));
  return why;
}

}  // namespace fabrica
