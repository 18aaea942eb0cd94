#include "client/columns.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "api/json_fields.h"
#include "core/quantity.h"
#include "core/workload.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using jsonf::List;
using jsonf::Object;
using jsonf::Str;

int CountOf(const json& pod_set) {
  const json& c = jsonf::Field(pod_set, "count");
  return c.is_number() ? c.get<int>() : 1;
}

}  // namespace

std::string CellText(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string ShownPhase(const json& status) {
  const std::string phase = Str(status, "phase");
  const json& finished = Object(status, "finishedPods");
  if ((phase == "Running" || phase == "Scheduled") &&
      jsonf::Field(status, "preemption").is_object()) {
    // (Its owner's stop, deactivating it, is no eviction.)
    const json& p = Object(status, "preemption");
    const bool own = Str(p, "by") == "" && Str(p, "reason") == kDeactivatedWhy;
    return own ? "Stopping" : "Evicting";
  }
  if (const json& started = jsonf::Field(status, "startedPods");
      phase == "Running" && started.is_object()) {
    size_t bound = 0, up = 0;
    for (const json& a : List(status, "assignments")) {
      const std::string pod = Str(a, "pod");
      ++bound;
      up += started.contains(pod) || finished.contains(pod);
    }
    if (up < bound) return "Starting";
  }
  const std::string reason = Str(status, "reason");
  if (phase == "Pending" && reason == "Unschedulable") return "Unschedulable";
  // (Set inactive by hand, or by the gang timeout's requeue limit.)
  if (phase == "Pending" &&
      (reason == "Inactive" || reason == "Deactivated" || reason == "RequeuingLimitExceeded"))
    return "Inactive";
  return phase;
}

WorkloadCells WorkloadColumns(const json& workload) {
  const json& spec = Object(workload, "spec");
  const json& status = Object(workload, "status");
  // PODS and GPUS as admitted, less its pods that completed.
  int pods = 0, asked = 0;
  double gpus = 0;
  std::string memory_only;            // waiting memory-only shares: the memory they ask
  std::map<std::string, int> slices;  // MIG profile -> its slices asked (or held)
  const json& admitted = List(status, "admittedCounts");
  const json& sets = List(spec, "podSets");
  const json& finished = Object(status, "finishedPods");
  std::map<std::string, int> completed;  // pod set -> its pods that completed
  for (const auto& [pod, at] : finished.items()) ++completed[pod.substr(0, pod.rfind('-'))];
  for (size_t i = 0; i < sets.size(); ++i) {
    const json& ps = sets[i];
    const int count = CountOf(ps);
    const int running =
        (i < admitted.size() && admitted[i].is_number() ? admitted[i].get<int>() : count) -
        completed[Str(ps, "name")];
    pods += running;
    asked += count;
    const json& dev = Object(ps, "devices");
    if (const json& g = jsonf::Field(dev, "gpus"); g.is_number()) {
      gpus += running * g.get<double>();
    } else if (const json& m = jsonf::Field(dev, "mig"); m.is_string()) {
      // MIG slices by their profile ("3x3g.40gb"): a trial read three 3g.40gb slices as
      // 1.284 GPUs, their compute slices out of 7 as queues' quotas charge them.
      if (running > 0) slices[m.get<std::string>()] += running;
    } else if (dev.contains("gpuMilli")) {
      // A share of a GPU ("250m", "0.25").
      const json& share = dev["gpuMilli"];
      auto milli = ParseMilliGpu(share.is_string() ? share.get<std::string>() : share.dump());
      if (milli.ok()) gpus += running * static_cast<double>(milli->value()) / 1000.0;
    } else if (dev.contains("gpuMemory") && running > 0) {
      memory_only = CellText(dev["gpuMemory"]);  // (its compute depends on the GPU it gets)
    }
  }
  // Placed: the compute its running pods hold (a memory-only share's is that of the GPU it
  // got; a trial read 0 for one).
  double held = 0;
  bool placed = false;
  std::map<std::string, int> held_slices;
  for (const json& a : List(status, "assignments")) {
    // (Its pods that completed keep their assignments while the others run on.)
    if (Str(a, "node").empty() || finished.contains(Str(a, "pod"))) continue;
    placed = true;
    for (const json& d : List(a, "devices")) {
      if (const json& profile = jsonf::Field(d, "migProfile"); profile.is_string()) {
        ++held_slices[profile.get<std::string>()];
      } else if (const json& milli = jsonf::Field(d, "gpuMilli"); milli.is_number()) {
        held += milli.get<double>() / 1000.0;
      }
    }
  }
  if (placed) gpus = held, memory_only.clear(), slices = held_slices;
  WorkloadCells cells;
  for (const json& a : List(status, "assignments")) {
    const std::string n = Str(a, "node");
    if (!n.empty() && ("," + cells.nodes + ",").find("," + n + ",") == std::string::npos)
      cells.nodes += (cells.nodes.empty() ? "" : ",") + n;
  }
  if (cells.nodes.empty()) cells.nodes = "-";
  char g[32];
  if (!memory_only.empty() && gpus == 0) {
    std::snprintf(g, sizeof(g), "%s/GPU", memory_only.c_str());
  } else {
    std::snprintf(g, sizeof(g), "%g", gpus);
  }
  cells.gpus = slices.empty() || gpus > 0 ? std::string(g) : std::string();
  for (const auto& [profile, n] : slices)
    cells.gpus += (cells.gpus.empty() ? "" : "+") + std::to_string(n) + "x" + profile;
  // Ended: how many of its pods completed (as a Job's COMPLETIONS), not the none it runs.
  cells.phase = Str(status, "phase");
  cells.pods =
      pods == asked ? std::to_string(pods) : std::to_string(pods) + "/" + std::to_string(asked);
  if (cells.phase == "Succeeded" || cells.phase == "Failed") {
    cells.pods = std::to_string(finished.size()) + "/" + std::to_string(asked) + " done";
    cells.gpus = "0";
  } else {
    cells.phase = ShownPhase(status);
  }
  return cells;
}

json StartHold(const json& status) {
  for (const json& c : List(status, "conditions"))
    if (Str(c, "type") == "PodsStarting" && Str(c, "status") == "False") return c;
  return json();
}

std::string NodeStatusWords(const json& node) {
  const json& spec = Object(node, "spec");
  const json& status = Object(node, "status");
  std::string ready = "Unknown";
  for (const json& c : List(status, "conditions"))
    if (Str(c, "type") == "Ready") ready = Str(c, "status") == "True" ? "Ready" : "NotReady";
  if (const json& u = jsonf::Field(spec, "unschedulable"); u.is_boolean() && u.get<bool>())
    ready += ",SchedulingDisabled";
  // (Held by the scheduler: pods did not start there; describe node says until when.)
  if (!StartHold(status).is_null()) ready += ",PodsNotStarting";
  return ready;
}

std::string NodeHealthWords(const json& record) {
  std::string out;
  const std::string state = Str(record, "state", "available");
  if (state != "available") out += " (" + state + ")";
  std::string gpus;
  for (const json& g : List(record, "gpus"))
    if (const json& ok = jsonf::Field(g, "schedulable"); ok.is_boolean() && !ok.get<bool>())
      gpus += (gpus.empty() ? "" : ", ") + std::to_string(jsonf::Int(g, "index", -1)) + " " +
              Str(g, "state");
  if (!gpus.empty() && state == "available") out += ",GPU " + gpus;
  return out;
}

std::string WorkloadQueue(const json& workload, const std::string& waiting) {
  const json& status = Object(workload, "status");
  std::string queue = waiting;
  const std::string stored = Str(status, "phase");
  if (const std::string charged = Str(Object(status, "resourceUsage"), "queue");
      !charged.empty() && charged != queue && (stored == "Scheduled" || stored == "Running"))
    queue = charged + (queue.empty() ? "" : "(was:" + queue + ")");
  return queue.empty() ? "-" : queue;
}

std::string EventMessage(const json& e) {
  const json& c = jsonf::Field(e, "count");
  const int64_t count = c.is_number_integer() ? c.get<int64_t>() : 1;
  return Str(e, "message") +
         (count > 1 ? " (x" + std::to_string(count) + " since " + Str(e, "firstTimestamp") + ")"
                    : "");
}

bool QueueFlavored(const json& status) {
  const json& flavors = Object(status, "flavors");
  const auto some_in = [&](const char* key) {
    std::string only;
    int some = 0;
    for (const auto& [flavor, f] : flavors.items()) {
      const json& v = jsonf::Field(f, key);
      if (const std::string text = v.is_null() ? "0" : CellText(v); text != "0" && text != "-") {
        only = flavor;
        ++some;
      }
    }
    return some > 1 || (some == 1 && only != "gpu");
  };
  return some_in("guaranteedGpus") || some_in("usedGpus");
}

namespace {
// (The scheduler writes every queue's guaranteedGpus each cycle: without it, none has run yet.)
bool QueueStatusWritten(const json& status) {
  return !jsonf::Field(status, "guaranteedGpus").is_null();
}
constexpr char kNotYet[] = "<pending>";
}  // namespace

std::string QueueStatusCell(const json& status, const char* key) {
  if (!QueueStatusWritten(status)) return kNotYet;
  const json& v = jsonf::Field(status, key);
  return v.is_null() ? "-" : CellText(v);
}

std::string QueueBorrowed(const json& status) {
  const auto past = [](const json& used, const json& guaranteed) {
    return std::max(0.0, std::stod(CellText(used)) - std::stod(CellText(guaranteed)));
  };
  const auto amount = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  try {
    double sum = 0;
    std::string each;
    const json& flavors = jsonf::Field(status, "flavors");
    if (flavors.is_object() && !flavors.empty()) {
      for (const auto& [flavor, f] : flavors.items()) {
        const double v = past(f.value("usedGpus", json("-")), f.value("guaranteedGpus", json("-")));
        sum += v;
        if (v > 0) each += (each.empty() ? "" : ",") + flavor + ":" + amount(v);
      }
    } else {
      sum = past(status.value("usedGpus", json("-")), status.value("guaranteedGpus", json("-")));
    }
    std::string gpus = QueueFlavored(status) && !each.empty() ? each : amount(sum);
    // CPU and memory past their guarantee too, where the queue's tree limits them (a trial's
    // queue borrowing 50 cores and 500Gi read "0").
    std::string res = ResourceBorrowed(status);
    if (res.empty()) return gpus;
    return sum > 0 ? gpus + "," + res : res;
  } catch (const std::exception&) {
    return "-";
  }
}

std::string ResourceBorrowedOf(const json& status, const std::string& resource) {
  const json& st = jsonf::Field(status, resource.c_str());
  if (!st.is_object()) return "";
  const std::string used = CellText(jsonf::Field(st, "used")),
                    guaranteed = CellText(jsonf::Field(st, "guaranteed"));
  if (resource == "cpu") {
    auto u = ParseMilliCpu(used), g = ParseMilliCpu(guaranteed);
    if (u.ok() && g.ok() && u->value() > g->value())
      return FormatMilliCpu(MilliCpu(u->value() - g->value()));
  } else {
    auto u = ParseMemoryMib(used), g = ParseMemoryMib(guaranteed);
    if (u.ok() && g.ok() && u->value() > g->value())
      return FormatMemoryMib(MemoryMib(u->value() - g->value()));
  }
  return "";
}

std::string ResourceBorrowed(const json& status) {
  std::string out;
  for (const char* r : {"cpu", "memory"})
    if (const std::string past = ResourceBorrowedOf(status, r); !past.empty())
      out += (out.empty() ? "" : ",") + std::string(r) + ":" + past;
  return out;
}

std::string QueueLimits(const json& spec, const char* key) {
  std::string out;
  const json& quotas = jsonf::Field(spec, "quotas");
  if (quotas.is_object())
    for (const auto& [flavor, q] : quotas.items())
      if (flavor != "cpu" && flavor != "memory" && q.is_object() && q.contains(key))
        out += (out.empty() ? "" : ",") + flavor + ":" + CellText(q[key]);
  // ... then CPU's and memory's, after the GPU flavours (a trial's cpu borrowingLimit of 10
  // read "-").
  for (const char* r : {"cpu", "memory"})
    if (const json& q = jsonf::Field(quotas, r); q.is_object() && q.contains(key))
      out += (out.empty() ? "" : ",") + std::string(r) + ":" + CellText(q[key]);
  return out.empty() ? "-" : out;
}

std::string QueueGpus(const json& status, const char* key, bool flavored) {
  if (!flavored) return QueueStatusCell(status, key);
  std::string out;
  for (const auto& [flavor, f] : Object(status, "flavors").items()) {
    const json& v = jsonf::Field(f, key);
    if (const std::string text = v.is_null() ? "0" : CellText(v); text != "0" && text != "-")
      out += (out.empty() ? "" : ",") + flavor + ":" + text;
  }
  return out.empty() ? std::string("0") : out;
}

std::string QueueShare(const json& status) {
  const json& v = jsonf::Field(status, "weightedShare");
  if (!v.is_number()) return QueueStatusCell(status, "weightedShare");
  // (Three decimals: the status keeps three significant digits, 9.69e-05 reads as <0.001.)
  const double x = v.get<double>();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", x);
  return x > 0 && x < 0.0005 ? "<0.001" : x == 0 ? "0" : buf;
}

std::string BudgetCell(const json& status) {
  const json& b = jsonf::Field(status, "budget");
  if (!b.is_object() || !jsonf::Field(b, "spentPercent").is_number()) return "-";
  const int64_t percent = b["spentPercent"].get<int64_t>();
  const std::string currency = jsonf::Str(b, "currency");
  std::string out = std::to_string(percent) + "% of " + jsonf::Str(b, "amount") +
                    (currency.empty() ? "" : " " + currency) + "/" + jsonf::Str(b, "period");
  if (percent >= 100 && jsonf::Field(b, "enforce") == true) out += ", new work held";
  return out;
}

std::string HumanAge(int64_t ms) {
  if (ms < -1000) return "<invalid>";
  const int64_t s = ms < 0 ? 0 : ms / 1000;
  const int64_t m = s / 60, h = s / 3600, d = s / 86400, y = d / 365;
  const auto two = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    return std::to_string(a) + ua + (b == 0 ? "" : std::to_string(b) + ub);
  };
  if (s < 120) return std::to_string(s) + "s";
  if (m < 10) return two(m, "m", s % 60, "s");
  if (h < 3) return std::to_string(m) + "m";
  if (h < 8) return two(h, "h", m % 60, "m");
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) return two(d, "d", h % 24, "h");
  if (y < 2) return std::to_string(d) + "d";
  if (y < 8) return two(y, "y", d % 365, "d");
  return std::to_string(y) + "y";
}

}  // namespace fabrica
