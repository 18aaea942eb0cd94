#include "control/eviction_record.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "api/json_fields.h"
#include "control/clock.h"
#include "core/workload.h"

namespace fabrica {

using json = nlohmann::json;
using jsonf::Field;
using jsonf::Int;
using jsonf::List;
using jsonf::Str;

// (Pods that ended before their start was reported have started too.)
bool AllPodsStarted(const json& status) {
  const json& started = Field(status, "startedPods");
  const json& finished = Field(status, "finishedPods");
  if (!started.is_object()) return Str(status, "phase") == "Running";
  for (const json& a : List(status, "assignments"))
    if (!started.contains(Str(a, "pod", "0")) &&
        !(finished.is_object() && finished.contains(Str(a, "pod", "0"))))
      return false;
  return true;
}

double RunGpuSecondsLost(const json& spec, const json& status, int64_t now_ms) {
  const int64_t began = ParseTimestamp(Str(status, "startTime"));
  if (began < 0 || now_ms <= began) return 0;
  // A gang some of whose pods its nodes never reported started did no work as a gang (its
  // pods wait for one another): nothing to lose (a user-style review saw 618 GPU-seconds
  // "lost" by a gang whose last pod sat on a dead node). Grown since, its run before counts.
  if (const json& gang = Field(spec, "gang"); gang.is_boolean() && gang.get<bool>() &&
                                              Str(status, "resizedTime").empty() &&
                                              !AllPodsStarted(status))
    return 0;
  // Pods that no longer run: completed, or taken by an elastic shrink (which loses no work).
  const json& finished = Field(status, "finishedPods");
  std::set<std::string> gone;
  for (const json& mark : List(status, "shrinks"))
    for (const json& pod : List(mark, "pods"))
      if (pod.is_string()) gone.insert(pod.get<std::string>());
  // A pod set's minCount (its count when it has none), by name (a set with none is "main").
  std::map<std::string, int64_t> least_of;
  for (const json& set : List(spec, "podSets"))
    least_of[Str(set, "name", "main")] = Int(set, "minCount", Int(set, "count", 1));
  double milli = 0, least = 0;
  for (const json& a : List(status, "assignments")) {
    const std::string pod = Str(a, "pod", "0");
    if ((finished.is_object() && finished.contains(pod)) || gone.count(pod)) continue;
    double held = 0;
    for (const json& d : List(a, "devices")) held += static_cast<double>(Int(d, "gpuMilli"));
    milli += held;
    // (Pods are named by their set and place in it: the first minCount of each are its least.)
    const size_t dash = pod.rfind('-');
    auto set = least_of.find(pod.substr(0, dash));
    if (dash != std::string::npos && set != least_of.end()) {
      const std::string k = pod.substr(dash + 1);
      if (!k.empty() && std::all_of(k.begin(), k.end(), ::isdigit) && std::stoll(k) < set->second)
        least += held;
    }
  }
  double ran = static_cast<double>(now_ms - began) / 1000.0;
  const double every = static_cast<double>(Int(spec, "checkpointIntervalSeconds"));
  if (every > 0) ran = std::fmod(ran, every);
  const double from = static_cast<double>(now_ms) / 1000.0 - ran;
  const int64_t resized = ParseTimestamp(Str(status, "resizedTime"));
  const double grown_at = static_cast<double>(resized) / 1000.0;
  if (resized > began && !(finished.is_object() && !finished.empty()) && grown_at > from) {
    const double to = static_cast<double>(now_ms) / 1000.0;
    return ((grown_at - from) * least + (to - grown_at) * milli) / 1000.0;
  }
  return ran * milli / 1000.0;
}

void NoteEviction(const json& from, json& to, const std::string& reason, const std::string& why,
                  int64_t now_ms, double lost) {
  const json& before = Field(from, "evictions");
  const int64_t count = Int(before, "count");
  const int64_t sum = std::min<int64_t>(
      Int(before, "gpuSecondsLost") + std::llround(std::max(0.0, lost)), kMaxLostGpuSeconds);
  to["evictions"] = {
      {"count", count + 1},
      {"gpuSecondsLost", sum},
      {"last", {{"reason", reason}, {"message", why}, {"time", FormatTimestamp(now_ms)}}}};
}

}  // namespace fabrica
