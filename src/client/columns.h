// How Fabrica's objects read in a table: the cells that `fabctl get` prints and that the API
// server sends kubectl as a Table (server-side printing), computed the same way for both, so
// that `kubectl get wl` and `fabctl get wl` agree.
//
// Pure functions of a stored object (and, for ages, a duration); thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace fabrica {

// A scalar for a table cell: strings without quotes, anything else as JSON.
std::string CellText(const nlohmann::json& v);

// A workload's phase as tables show it: its status.phase, except Evicting in its grace period
// (it still runs, as a Terminating pod does; Stopping where its owner deactivated it), Starting
// while some of its bound pods have not started (as kubectl's READY 4/5), Unschedulable when
// no fleet or quota could ever admit it as it asks, and Inactive while spec.active is false (a
// gang past its requeue limit too: it will not run until set true again).
std::string ShownPhase(const nlohmann::json& status);

// A workload's PHASE, PODS, GPUS and NODES cells. PODS and GPUS as admitted, less its pods that
// completed ("2/4" when it runs fewer pods than it asks for; "3/4 done" once ended); GPUS what
// its running pods hold where placed (MIG slices by profile, "3x3g.40gb"; a memory-only share
// waiting, "20Gi/GPU"); NODES its nodes, "-" for none.
struct WorkloadCells {
  std::string phase, pods, gpus, nodes;
};
WorkloadCells WorkloadColumns(const nlohmann::json& workload);

// A Node's condition PodsStarting False, where the scheduler holds it from new work (pods did
// not start there), else null.
nlohmann::json StartHold(const nlohmann::json& node_status);

// A node's STATUS: Ready, NotReady or Unknown, then ",SchedulingDisabled" when cordoned and
// ",PodsNotStarting" while held (StartHold).
std::string NodeStatusWords(const nlohmann::json& node);

// What a node's health record (GET .../nodehealth/NODE) adds to its STATUS: its lifecycle state
// where the health controller holds it (" (repair)"), else its GPUs out of service (",GPU 3
// repair"); "" for none.
std::string NodeHealthWords(const nlohmann::json& health_record);

// A workload's QUEUE cell: `waiting`, the queue it waits in as the scheduler picks it (its
// spec.queue, else its tenant's leaf, else unqueued; "" without queues); once admitted, the
// queue charged where that differs ("unqueued(was:qb)": its tenant may no longer use the one it
// names); "-" for none.
std::string WorkloadQueue(const nlohmann::json& workload, const std::string& waiting);

// An event's MESSAGE: its message, and how often it happened where more than once ("... (x3
// since 2026-12-06T09:00:00.000Z)").
std::string EventMessage(const nlohmann::json& event);

// A queue's GPUs by status key ("guaranteedGpus", "usedGpus"): the sum, or by flavour
// ("h100:8,a100-mig:1.284") wherever some flavour but the built-in gpu has some of either
// (`flavored`, so that GUARANTEED, USED and BORROWED read in one form); "<pending>" before
// the scheduler's first cycle (a trial read "-" as no guarantee).
bool QueueFlavored(const nlohmann::json& queue_status);
std::string QueueGpus(const nlohmann::json& queue_status, const char* key, bool flavored);
// A queue's weighted share in three decimals ("<0.001" for a share above 0 that rounds to 0;
// "<pending>" before the first cycle).
std::string QueueShare(const nlohmann::json& queue_status);
// Another field of a queue's status as a cell: "<pending>" before the first cycle, "-" where
// the scheduler left it out.
std::string QueueStatusCell(const nlohmann::json& queue_status, const char* key);
// BORROWED: what a queue holds past its guarantee, summed, or by flavour where USED is
// (QueueFlavored: a trial read "2" as gpu 1 + h200 1); a queue within its total guarantee may
// still borrow in one flavour (8 H200s past an h200 guarantee of 0). "-" where the status has
// no numbers.
// CPU and memory past their guarantees are added after the GPUs ("cpu:50,memory:500Gi").
std::string QueueBorrowed(const nlohmann::json& queue_status);
// What a queue holds of CPU and memory past their guarantees, where its status has them:
// "cpu:50,memory:500Gi", "" where neither.
std::string ResourceBorrowed(const nlohmann::json& queue_status);
// The same of one of them ("cpu", "memory"): "50", "500Gi", "" where none.
std::string ResourceBorrowedOf(const nlohmann::json& queue_status, const std::string& resource);
// A limit ("borrowingLimit", "lendingLimit") per GPU flavour its quotas name, then CPU's and
// memory's: "flavour:amount", comma-separated, "-" where none is set.
std::string QueueLimits(const nlohmann::json& queue_spec, const char* key);

// A tenant's or queue's cost budget from its status.budget, as the meter last wrote it (at each
// whole percent): "41% of 500.00 USD/month", ", new work held" added where it is enforced and
// spent; "-" where it has none (or the meter has not counted it yet).
std::string BudgetCell(const nlohmann::json& status);

// A duration as kubectl's AGE reads it: "45s", "4m12s", "17m", "5h3m", "30h", "3d4h", "40d",
// "2y10d"; "<invalid>" for a negative one past a second (a clock behind).
std::string HumanAge(int64_t ms);

}  // namespace fabrica
