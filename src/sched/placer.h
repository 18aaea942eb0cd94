// The Placer runs a Policy over a ClusterState: one pod, or a whole gang all-or-nothing, with
// topology constraints. It scores one node per state class (see ClusterState), takes the best
// score, and breaks ties toward the lowest node index (callers that want a random priority order
// permute the fleet once, as the reference simulator does). Outcomes distinguish "not now"
// (Pending: it would fit an emptier fleet) from "never" (Infeasible: no node could ever hold it),
// each with a reason a user can read. Deterministic for a given state, request and generator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sched/policy.h"
#include "sched/rng.h"

namespace fabrica {

enum class Outcome { kPlaced, kPending, kInfeasible };
const char* OutcomeName(Outcome o);

struct PodPlacement {
  Outcome outcome = Outcome::kPending;
  Assignment assignment;
  std::string reason;
};

struct GangPlacement {
  Outcome outcome = Outcome::kPending;
  std::vector<Assignment> pods;
  std::string reason;
  int domains_used = 0;  // distinct domains of the constraint's level (leaves when none given)
};

class Placer {
 public:
  explicit Placer(const Policy& policy) : policy_(policy) {}

  // The best node and devices for one pod; `s` is not changed.
  PodPlacement Place(const ClusterState& s, const PodRequest& req, Rng& rng) const;
  // The same, restricted to `nodes`.
  PodPlacement PlaceIn(const ClusterState& s, const std::vector<int>& nodes, const PodRequest& req,
                       Rng& rng) const;
  // Places every pod or none. On success the assignments have been applied to `s`; on failure
  // `s` is exactly as it was. With `only`, on those nodes alone (the others take no new work:
  // cordoned, held, not ready), the topology kept as without.
  GangPlacement PlaceGang(ClusterState& s, const std::vector<PodRequest>& pods,
                          const TopologyConstraint& topology, Rng& rng,
                          const std::vector<int>* only = nullptr) const;

  // Places every pod, one after another, on `nodes` (all nodes when null), or none; applied to
  // `s` on success, `s` unchanged on failure. No topology: for plans made the same way. On
  // failure `failed` (if given) gets how many pods fitted before one did not, and its reason.
  bool PlaceAllIn(ClusterState& s, const std::vector<int>* nodes,
                  const std::vector<PodRequest>& pods, Rng& rng, std::vector<Assignment>& out,
                  std::pair<size_t, std::string>* failed = nullptr) const;

  // When off, a pod that fits nowhere gets a short reason instead of a scan of every class
  // (callers that retry often, like admission, explain once and then skip the cost).
  void set_explain(bool on) { explain_ = on; }
  bool explain() const { return explain_; }

  // Why no node takes `req` now, or that none ever could (Infeasible). With `only`, the nodes
  // outside it count as having no room (they take no new work: cordoned, held, not ready).
  PodPlacement Explain(const ClusterState& s, const PodRequest& req,
                       const std::vector<int>* only = nullptr) const;

 private:
  // The classes a request may fit, each scored on its front node, kept from one pod of
  // PlaceAllIn to the next equal one: a placement changes one node, so only the two classes it
  // left and joined are looked at again (a gang of like pods scans the fleet once, not per pod).
  struct Memo {
    bool valid = false;
    PodRequest req;
    struct Scored {
      int cls = -1;
      uint64_t stamp = 0;  // ClusterState::class_stamp when scored
      int node = -1;       // its front
      std::optional<double> score;
    };
    std::vector<Scored> scored;
  };
  // Place, through `memo`; `touched`: the classes changed since the memo's last use.
  PodPlacement PlaceRemembering(const ClusterState& s, const PodRequest& req, Rng& rng, Memo& memo,
                                const std::vector<int>& touched) const;
  PodPlacement Finish(const ClusterState& s, int node, const NodeChoice& choice,
                      const PodRequest& req, Rng& rng) const;
  template <typename NodeAt>
  PodPlacement Best(const ClusterState& s, const PodRequest& req, Rng& rng, size_t count,
                    NodeAt node_at, bool explain = true) const;
  // Place for a pod with a node selector: over the nodes it leaves, one by one.
  PodPlacement PlaceSelected(const ClusterState& s, const PodRequest& req, Rng& rng) const;
  // An exclusiveNodes tenant's pod on a node its tenant already holds, where one has room.
  bool PlaceOnHeldNode(const ClusterState& s, const PodRequest& req, Rng& rng,
                       PodPlacement* out) const;

  const Policy& policy_;
  mutable bool explain_ = true;  // (PlaceAllIn turns it off for its preferred tiers' tries)
};

// Places `pods` (which share one selector) on the nodes their nodeAffinity prefers most first
// (PodRequest::preferred: each tier in turn, all of them there), then on every node they may
// use (where pods placed one by one over the fleet each try the tiers again: PlaceAllIn). On a tier
// a preferred topology is asked as a required one: a compact placement on any allowed nodes beats
// one scattered over preferred nodes. `attempt(pods, topology, last)` places them and says
// whether it did, leaving the state as it was when not; `last` marks the attempt on every
// allowed node, the one whose failure is explained.
template <class Attempt>
bool PlacePreferring(const std::vector<PodRequest>& pods, const TopologyConstraint& topology,
                     Attempt&& attempt) {
  const PodRequest* preferring = nullptr;
  for (const PodRequest& p : pods)
    if (p.preferred) preferring = &p;
  if (preferring) {
    TopologyConstraint strict = topology;
    if (strict.level != TopologyLevel::kNone) strict.required = true;
    for (size_t t = 0; t < preferring->preferred->size(); ++t) {
      std::vector<PodRequest> tier = pods;
      for (PodRequest& p : tier) {
        if (p.preferred && t < p.preferred->size()) p.nodes = (*p.preferred)[t];
        p.preferred = nullptr;  // (on this tier alone)
      }
      if (attempt(tier, strict, false)) return true;
    }
  }
  return attempt(pods, topology, true);
}

// Whether some node of the fleet could hold the pod if the fleet were empty.
bool FitsSomeEmptyNode(const ClusterState& s, const PodRequest& req, std::string* why);
// Whether the fleet, were it empty, has a place for each of `pods`: whole-GPU pods counted by
// shape, a node taking as many of one shape as its GPUs not in MIG mode (of a model the pod
// allows) and its CPU allow (fractions and slices are not bounded here); `why` says which
// shape has too few. A workload that fails it never fits: Infeasible, not Pending.
bool FleetHoldsPods(const ClusterState& s, const std::vector<PodRequest>& pods, std::string* why);
// The placer's words for pods placed together ("gang needs ..."), for a workload that is no
// gang: its pods go together all the same ("its pods together need ...").
std::string TogetherSaid(bool gang, std::string why);

// Whether a domain of the level `topology` requires could hold the GPUs of `pods` were it
// empty (always, when it requires none), counting only the GPUs some pod could use (of a model
// it allows; a MIG-partitioned GPU only for a MIG slice); `why` says which it needs and the
// largest there is. A required domain that could not hold a gang even empty never will:
// Infeasible, not Pending. `by_model` false: every GPU counts (for pods whose models a quota
// narrowed for now, where a "no" would not be a "never").
bool SomeDomainHolds(const ClusterState& s, const std::vector<PodRequest>& pods,
                     const TopologyConstraint& topology, std::string* why, bool by_model = true);

}  // namespace fabrica
