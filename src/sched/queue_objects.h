// Stored Queue objects as the admission layer's tree, and the leaf a workload waits in: one
// reading for the server's scheduler (which admits through the tree) and its API (which shows
// what waits where, GET .../queues/NAME/pendingworkloads).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "sched/admission.h"

namespace fabrica {

// The built-in leaf for workloads that name no queue and whose tenant has no leaf queue of its
// name: no guarantee, so what it holds is borrowed and the first to be reclaimed.
inline constexpr const char* kUnqueuedQueue = "unqueued";
// Where the scheduler keeps the built-in unqueued as a Queue object (its place in the tree and
// its standing) while queues exist and none is stored by that name: the API lists and shows it
// beside the stored queues.
inline constexpr const char* kBuiltinQueueKey = "/registry/builtin/queues/unqueued";

// The tree of stored Queue objects (their spec as in a scenario's `admission.queues`, minus
// `budget`, which the meter reads), plus the built-in leaf: under the tree's one root when
// there is one with children, so that it borrows what the tree leaves unused; otherwise a root
// of its own.
//
// Its flavours are the stored ResourceFlavor objects (spec as a scenario's `flavors` entry:
// kind, models, migProfiles), the most specific first, since a request is charged to the
// first that matches (among those naming its kind, else among the kind-less; Admitter): those
// naming MIG profiles, then those naming models, fewer before more, then the rest, ties by
// name; then the built-in catch-all kDefaultFlavor unless one is stored under that name.
Result<AdmissionConfig> QueueTreeFromObjects(const std::vector<nlohmann::json>& queues,
                                             const std::vector<nlohmann::json>& flavors = {});

// A stored ResourceFlavor's spec and name as a FlavorSpec (the API's check when it is written).
Result<FlavorSpec> FlavorFromObject(const nlohmann::json& flavor, const std::string& source);

// The queues of `tree` with no children.
std::set<std::string> LeafQueues(const AdmissionConfig& tree);

// The queue a workload of `tenant` that names `queue` (empty: none) waits in: that queue, else
// the queue named after its tenant when it is a leaf (of LeafQueues), else kUnqueuedQueue.
std::string WaitingQueue(const std::set<std::string>& leaves, const std::string& queue,
                         const std::string& tenant);

// Who may wait in a queue: a tenant may use the leaf named after it, the built-in
// kUnqueuedQueue, and any leaf on whose path (the leaf or an ancestor) a queue is named after
// it or lists it, or "*", in spec.tenants. `find` gives a queue's spec by name (nullptr: none); a
// queue that does not exist is not refused here (admission says it is unknown). PermissionDenied
// names the queue and the rule.
Status TenantMayUse(const std::string& tenant, const std::string& leaf,
                    const std::function<const QueueSpec*(const std::string&)>& find);

// The queues a stopPolicy stops: their own or an ancestor's.
std::set<std::string> StoppedQueues(const AdmissionConfig& tree);

// `name` and every queue below it, in the tree's order.
std::vector<std::string> Subtree(const AdmissionConfig& tree, const std::string& name);

}  // namespace fabrica
