// Placement policies: how good is it to put this pod on this node, and on which devices.
//
// A Policy scores one (node, pod) pair on a read-only ClusterState and picks the devices the pod
// would use there; the Placer (placer.h) runs it over the fleet's state classes, breaks ties and
// handles gangs and topology. Policies are stateless after construction, so one instance may be
// used from several threads on different states. Higher scores are better.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sched/cluster_state.h"
#include "sched/rng.h"

namespace fabrica {

struct NodeChoice {
  double score = 0;
  std::vector<DeviceShare> devices;
};

// One class of pods in the expected workload mix, with its share of arrivals.
struct TypicalPod {
  PodRequest pod;
  double weight = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // nullopt when the pod cannot go on node n (resources, model, isolation).
  virtual std::optional<NodeChoice> Score(const ClusterState& s, int n,
                                          const PodRequest& req) const = 0;
  // True for random-fit: the Placer then picks uniformly among feasible nodes, not the best.
  virtual bool uniform_random() const { return false; }
  // The devices actually used on the chosen node; a policy that picks devices at random
  // overrides this, the rest keep what Score chose.
  virtual std::vector<DeviceShare> FinalDevices(const ClusterState& s, int n, const PodRequest& req,
                                                const NodeChoice& choice, Rng& rng) const {
    return choice.devices;
  }
};

// Names accepted by MakePolicy.
const std::vector<std::string>& PolicyNames();

// `typical` is the expected pod mix; fgd and fabrica need it, the others ignore it. `fleet`, when
// given, lets fabrica weigh how scarce each GPU model is for the pods restricted to it; the state
// is read during the call only (its model table and capacities), not kept.
Result<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                           std::vector<TypicalPod> typical = {},
                                           const ClusterState* fleet = nullptr);

// Shared helpers for policies.

// Whether the node can take the pod at all: resources, model, isolation, enough devices.
bool NodeFits(const ClusterState& s, int n, const PodRequest& req);

// Devices for a whole-GPU or MIG request, preferring one NUMA node and the NVLink-connected
// set; for fractions the device with the least free share that still fits (best fit).
std::vector<DeviceShare> DefaultDevices(const ClusterState& s, int n, const PodRequest& req);

// Share for device d when it is used by req.
DeviceShare ShareOn(const ClusterState& s, int n, int d, const PodRequest& req);

}  // namespace fabrica
