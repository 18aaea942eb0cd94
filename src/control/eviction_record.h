// The record a workload keeps of the runs that were stopped and put back in line
// (status.evictions): written by the scheduler (a preemption, its node lost, its gang timed out)
// and by the health controller (its node drained), read by admission as part of what evicting
// it again would cost. Include only in .cc files that already use nlohmann/json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace fabrica {

// The GPU-seconds a bound workload's run throws away if it stops at `now_ms`, read from its
// stored spec and status as admission reads them when it restores the workload
// (Admitter::LostIfEvicted): the GPUs of its pods that still run (not those completed, nor those
// an elastic shrink is taking), times the time since status.startTime or, with
// spec.checkpointIntervalSeconds, since its last checkpoint; grown since it started
// (status.resizedTime) and with no pod completed, its minCount pods' GPUs until then. 0 when
// it has not started, nor, for a gang, until every pod has (and it has not grown since).
double RunGpuSecondsLost(const nlohmann::json& spec, const nlohmann::json& status, int64_t now_ms);
// Whether every pod of its binding has started, as its nodes reported them (status.startedPods,
// Kueue's PodsReady). Running with no such report counts as started: bound before nodes made
// them, or run by agents that do not make them (a growth lists the pods then running, so that
// its new pods are waited for).
bool AllPodsStarted(const nlohmann::json& status);

// Writes into `to` (the status replacing `from`) status.evictions: the count one more, the
// GPU-seconds lost summed (`lost` added; capped at kMaxLostGpuSeconds) and this eviction as
// the last one.
void NoteEviction(const nlohmann::json& from, nlohmann::json& to, const std::string& reason,
                  const std::string& why, int64_t now_ms, double lost);

}  // namespace fabrica
