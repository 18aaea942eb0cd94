#include "control/sim_agent.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "api/json_fields.h"

namespace fabrica {

using json = nlohmann::json;

namespace {

using jsonf::Field;
using jsonf::Int;
using jsonf::Str;

}  // namespace

std::string NodeSpecJson(const Node& node) {
  json spec = {{"cpu", FormatMilliCpu(node.cpu)},
               {"memory", FormatMemoryMib(node.memory)},
               {"numaNodes", node.numa_nodes}};
  if (!node.rack.empty()) spec["rack"] = node.rack;
  if (!node.leaf.empty()) spec["leaf"] = node.leaf;
  if (!node.nvlink_domain.empty()) spec["nvlinkDomain"] = node.nvlink_domain;
  if (!node.labels.empty()) spec["labels"] = node.labels;
  for (const Taint& t : node.taints) {
    json tj = {{"key", t.key}, {"effect", TaintEffectName(t.effect)}};
    if (!t.value.empty()) tj["value"] = t.value;
    if (!t.time_added.empty()) tj["timeAdded"] = t.time_added;
    spec["taints"].push_back(tj);
  }
  json devices = json::array();
  for (const Device& d : node.devices) {
    json dj = {{"model", d.model}, {"uuid", d.uuid}, {"numa", d.numa_node}, {"ecc", d.ecc_enabled}};
    if (!d.memory.IsZero()) dj["memory"] = FormatMemoryMib(d.memory);
    if (!d.pcie_root.empty()) dj["pcieRoot"] = d.pcie_root;
    if (!d.mig_slices.empty()) dj["mig"] = d.mig_slices;
    if (!d.nvlink_peers.empty()) dj["nvlinkPeers"] = d.nvlink_peers;
    devices.push_back(dj);
  }
  if (!devices.empty()) spec["devices"] = devices;
  json nics = json::array();
  for (const Nic& n : node.nics) {
    nics.push_back({{"name", n.name}, {"numa", n.numa_node}, {"leaf", n.leaf}, {"gbps", n.gbps}});
  }
  if (!nics.empty()) spec["nics"] = nics;
  return spec.dump();
}

struct SimulatedFleet::Agent {
  const Node* node;
  std::unique_ptr<HttpClient> client;
  bool registered = false;
  int64_t last_heartbeat_ms = -1;
  int64_t last_sample_ms = -1;
  // Guarded by the fleet's mu_: health to report on the next round.
  std::vector<std::pair<int, int>> xids;  // (gpu, code)
  std::map<int, int64_t> ecc;             // GPU -> its double-bit counter now
  std::map<int, int64_t> ecc_report;      // counters changed since the last report
  uint64_t repairs = 0;                   // Repaired calls so far
};

SimulatedFleet::SimulatedFleet(Fleet fleet, ClientOptions client,
                               std::map<std::string, std::string> tokens, const Clock& clock,
                               int64_t heartbeat_ms, int64_t schedule_start_ms)
    : fleet_(std::move(fleet)),
      clock_(clock),
      heartbeat_ms_(heartbeat_ms),
      start_ms_(schedule_start_ms >= 0 ? schedule_start_ms : clock.NowMs()) {
  // (Faults an earlier run of the same schedule reached: injected then, not again — a trial's
  // fault fired again at each restart and evicted the node's work anew.)
  const int64_t elapsed = clock_.NowMs() - start_ms_;
  while (schedule_start_ms >= 0 && next_fault_ < fleet_.faults.size() &&
         fleet_.faults[next_fault_].at_ms < elapsed)
    ++next_fault_;
  for (const Node& n : fleet_.nodes) {
    auto a = std::make_unique<Agent>();
    a->node = &n;
    ClientOptions o = client;
    o.token = tokens[n.name.str()];
    a->client = std::make_unique<HttpClient>(o);
    agents_.push_back(std::move(a));
  }
}

SimulatedFleet::~SimulatedFleet() { Stop(); }

json StartedPodsReport(const json& status, const json& pods) {
  return {{"startedPods", pods},
          {"scheduledTime", Field(status, "scheduledTime")},
          {"resizedTime", Field(status, "resizedTime")}};
}

std::string PodsLeftMessage(size_t admitted, size_t left, size_t asked) {
  return (admitted == 1 ? std::string("its admitted pod completed; ")
                        : "its " + std::to_string(admitted) + " admitted pods completed; ") +
         std::to_string(left) + " of its " + std::to_string(asked) + " pods " +
         (left == 1 ? "has" : "have") + " not run";
}

bool RecordSucceededPods(json& w, const std::vector<std::string>& pods, const std::string& node,
                         int64_t now_ms) {
  json& status = w["status"];
  json& finished = status["finishedPods"];
  if (!finished.is_object()) finished = json::object();
  // (Only pods its binding still places here: one an elastic shrink took meanwhile is not this
  // node's to report.)
  std::set<std::string> here;
  for (const json& a : jsonf::List(status, "assignments"))
    if (Str(a, "node") == node) here.insert(Str(a, "pod", "0"));
  for (const std::string& pod : pods)
    if (here.count(pod) && !finished.contains(pod)) finished[pod] = "";
  size_t bound = 0, done = 0;
  bool last = true;
  for (const json& a : jsonf::List(status, "assignments")) {
    ++bound;
    const bool listed = finished.contains(Str(a, "pod", "0"));
    done += listed ? 1 : 0;
    if (!listed && Str(a, "node") == node) last = false;
  }
  // (Admitted with fewer pods than it asks for and no gang, it has not succeeded: the scheduler
  // queues it again for the pods neither bound nor completed.)
  std::set<std::string> accounted;
  for (const json& a : jsonf::List(status, "assignments")) accounted.insert(Str(a, "pod", "0"));
  for (const auto& [pod, at] : finished.items()) accounted.insert(pod);
  size_t asked = 0, left = 0;
  for (const json& ps : jsonf::List(Field(w, "spec"), "podSets")) {
    const int64_t count = std::max<int64_t>(1, Int(ps, "count", 1));
    asked += static_cast<size_t>(count);
    for (int64_t k = 0; k < count; ++k)
      left += accounted.count(Str(ps, "name") + "-" + std::to_string(k)) ? 0 : 1;
  }
  if (done < bound) {
    status["message"] = std::to_string(done) + " of " + std::to_string(bound) +
                        " pods completed; running on the others";
  } else if (left > 0 && Field(Field(w, "spec"), "gang") != true) {
    status["message"] = PodsLeftMessage(bound, left, asked);
  } else {
    status["phase"] = "Succeeded";
    status["completionTime"] = FormatTimestamp(now_ms);
    status["exitCode"] = 0;
    status["message"] =
        bound > 1 ? "all " + std::to_string(bound) + " pods completed" : "completed on " + node;
  }
  return last;
}

std::string RunningMessage(const json& status) {
  std::vector<std::string> nodes;
  for (const json& a : jsonf::List(status, "assignments")) {
    const std::string node = Str(a, "node");  // ("" for a pod that completed earlier)
    if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) == nodes.end())
      nodes.push_back(node);
  }
  if (nodes.empty()) return "running";
  if (nodes.size() == 1) return "running on " + nodes[0];
  std::string m = "running on " + std::to_string(nodes.size()) + " nodes: ";
  constexpr size_t kShown = 3;
  for (size_t i = 0; i < nodes.size() && i < kShown; ++i) m += (i ? ", " : "") + nodes[i];
  if (nodes.size() > kShown) m += ", ...";
  return m;
}

void SimulatedFleet::StopNode(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_.insert(node);
}

void SimulatedFleet::StallNode(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  stalled_.insert(node);
}

bool SimulatedFleet::Simulates(const std::string& node) const {
  return fleet_.Find(NodeId(node)) != nullptr;
}

Status SimulatedFleet::Inject(const FaultInjection& fault) {
  const Node* node = fleet_.Find(fault.node);
  if (!node) return NotFound("node " + fault.node.str() + " is not simulated here");
  if (!fault.kill && !fault.stall && (fault.gpu < 0 || fault.gpu >= node->gpu_count())) {
    return InvalidArgument("gpu: node " + fault.node.str() + " has " +
                           std::to_string(node->gpu_count()) + " GPUs, no GPU " +
                           std::to_string(fault.gpu));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (fault.kill) {
    stopped_.insert(fault.node.str());
    return Status::Ok();
  }
  if (fault.stall) {
    stalled_.insert(fault.node.str());
    return Status::Ok();
  }
  for (auto& a : agents_) {
    if (a->node->name != fault.node) continue;
    if (fault.xid > 0) a->xids.emplace_back(fault.gpu, fault.xid);
    if (fault.ecc_double_bit >= 0) {
      a->ecc[fault.gpu] = fault.ecc_double_bit;
      a->ecc_report[fault.gpu] = fault.ecc_double_bit;
    }
  }
  return Status::Ok();
}

void SimulatedFleet::Repaired(const std::string& node, int gpu) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& a : agents_) {
    if (a->node->name.str() != node) continue;
    // A reset or reboot zeroes the volatile ECC counters; the agent reports the zero once.
    for (auto& [d, count] : a->ecc) {
      if ((gpu < 0 || d == gpu) && count != 0) {
        count = 0;
        a->ecc_report[d] = 0;
      }
    }
    a->xids.clear();
    ++a->repairs;
    if (gpu < 0 && stopped_.erase(node)) a->last_heartbeat_ms = -1;  // back from the dead
    if (gpu < 0) stalled_.erase(node);
  }
}

Status SimulatedFleet::Tick() {
  {
    // Scheduled faults whose time has come.
    std::vector<FaultInjection> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t elapsed = clock_.NowMs() - start_ms_;
      while (next_fault_ < fleet_.faults.size() && fleet_.faults[next_fault_].at_ms <= elapsed) {
        due.push_back(fleet_.faults[next_fault_++]);
      }
    }
    for (const FaultInjection& f : due) (void)Inject(f);  // validated with the fleet
  }
  Status first = Status::Ok();
  for (auto& a : agents_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_.count(a->node->name.str())) continue;
    }
    Status st = TickAgent(*a);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Status SimulatedFleet::TickAgent(Agent& a) {
  const std::string name = a.node->name.str();
  const std::string base = "/apis/fabrica.dev/v1";
  auto check = [&](const Result<ClientResponse>& r, const char* what) -> Status {
    if (!r.ok()) return r.status();
    if (r->status >= 300) {
      return Status(StatusCode::kInternal, "node " + name + ": " + what + " got HTTP " +
                                               std::to_string(r->status) + ": " + r->body);
    }
    return Status::Ok();
  };
  if (!a.registered) {
    json node = {{"apiVersion", "fabrica.dev/v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", name}}},
                 {"spec", json::parse(NodeSpecJson(*a.node))}};
    auto r = a.client->Do("POST", base + "/nodes", node.dump());
    if (r.ok() && r->status == 409) {
      a.registered = true;  // registered before a restart: keep the inventory as the server has it
    } else {
      RETURN_IF_ERROR(check(r, "register"));
      a.registered = true;
    }
  }
  const int64_t now = clock_.NowMs();
  if (a.last_heartbeat_ms < 0 || now - a.last_heartbeat_ms >= heartbeat_ms_) {
    // (One heartbeat's interval, in wall seconds as an agent counts them: the server's own
    // timeout, longer, decides when a simulated node is dead.)
    const int64_t lease_s = std::max<int64_t>(
        1, std::llround(static_cast<double>(heartbeat_ms_) / 1000.0 / clock_.scale()));
    json lease = {{"apiVersion", "fabrica.dev/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", name}}},
                  {"spec", {{"holderIdentity", name}, {"leaseDurationSeconds", lease_s}}}};
    auto r = a.client->Do("PUT", base + "/leases/" + name, lease.dump());
    if (r.ok() && r->status == 404) r = a.client->Do("POST", base + "/leases", lease.dump());
    RETURN_IF_ERROR(check(r, "heartbeat"));
    a.last_heartbeat_ms = now;
  }
  // Health: XIDs and ECC counters injected since the last round, as the node's own report.
  {
    json report = json::object();
    std::vector<std::pair<int, int>> xids;
    std::map<int, int64_t> ecc;
    uint64_t repairs = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      xids.swap(a.xids);
      ecc.swap(a.ecc_report);
      repairs = a.repairs;
    }
    for (const auto& [gpu, code] : xids) report["xids"].push_back({{"gpu", gpu}, {"xid", code}});
    for (const auto& [gpu, count] : ecc) {
      report["devices"].push_back({{"gpu", gpu}, {"eccDoubleBitVolatile", count}});
    }
    if (!report.empty()) {
      auto r = a.client->Do("POST", base + "/nodes/" + name + "/health", report.dump());
      // A server without a health controller has no such route; that is not the node's failure.
      if (!(r.ok() && r->status == 404)) {
        Status st = check(r, "health report");
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          // Try again next round, unless the node was repaired meanwhile: what it saw before
          // the repair is gone with it (re-sending it would reopen the problem it fixed).
          if (a.repairs == repairs) {
            a.xids.insert(a.xids.begin(), xids.begin(), xids.end());
            a.ecc_report.insert(ecc.begin(), ecc.end());
          }
          return st;
        }
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stalled_.count(name)) return Status::Ok();  // (alive, but runs nothing)
  }
  // Workloads assigned to this node: the server lists only those for a node identity.
  auto list = a.client->Do("GET", base + "/workloads");
  RETURN_IF_ERROR(check(list, "list workloads"));
  json items = json::parse(list->body, nullptr, false);
  if (!Field(items, "items").is_array()) return Internal("node " + name + ": bad workload list");
  // Utilization samples in the shape agents push: a simulated device is 80% busy for the share
  // its running workloads hold, idle otherwise (MIG instances report on their own).
  if (a.last_sample_ms < 0 || now - a.last_sample_ms >= sample_ms_) {
    std::map<std::string, int64_t> busy_milli;
    for (const Device& d : a.node->devices) busy_milli[d.uuid] = 0;
    for (const json& w : items["items"]) {
      if (Str(Field(w, "status"), "phase") != "Running") continue;
      for (const json& as : jsonf::List(Field(w, "status"), "assignments")) {
        if (Str(as, "node") != name) continue;
        if (Field(Field(w, "status"), "finishedPods").contains(Str(as, "pod", "0"))) continue;
        for (const json& d : jsonf::List(as, "devices")) {
          std::string uuid = Str(d, "uuid");
          const int64_t slice = Int(d, "migSlice", -1);
          if (slice >= 0) {
            busy_milli[uuid + "/" + std::to_string(slice)] += 1000;
          } else {
            busy_milli[uuid] += Int(d, "gpuMilli", 1000);
          }
        }
      }
    }
    json samples = json::array();
    for (const auto& [uuid, milli] : busy_milli) {
      samples.push_back({{"node", name},
                         {"uuid", uuid},
                         {"time", now},
                         {"utilPermille", std::min<int64_t>(1000, milli) * 8 / 10}});
    }
    auto r = a.client->Do("POST", base + "/telemetry", json{{"samples", samples}}.dump());
    // A server without a meter has no telemetry route; that is not the node's failure.
    if (!(r.ok() && r->status == 404)) RETURN_IF_ERROR(check(r, "telemetry"));
    a.last_sample_ms = now;
  }
  for (const json& w : items["items"]) {
    const json& status = Field(w, "status");
    const std::string phase = Str(status, "phase");
    const std::string path = base + "/namespaces/" + Str(Field(w, "metadata"), "namespace") +
                             "/workloads/" + Str(Field(w, "metadata"), "name") + "/status";
    // Its pods here start at once (the server stamps when): those of a new binding, and those
    // elastic growth added to a running one.
    json started = json::object();
    if (phase == "Scheduled" || phase == "Running")
      for (const json& a : jsonf::List(status, "assignments"))
        if (Str(a, "node") == name && !Field(status, "startedPods").contains(Str(a, "pod", "0")))
          started[Str(a, "pod", "0")] = "";
    json patch;
    if (phase == "Scheduled") {
      patch = {{"status",
                {{"phase", "Running"},
                 {"startTime", FormatTimestamp(now)},
                 {"message", RunningMessage(status)}}}};
    } else if (phase == "Running") {
      // Each of its pods here runs for the duration from when it started, and is reported on
      // its own as it completes, as an agent does: the scheduler decides what follows (a
      // workload admitted with fewer pods than it asks for waits again for the rest).
      const int64_t duration_s = Int(Field(Field(w, "spec"), "run"), "durationSeconds");
      std::vector<std::string> done;
      for (const json& a : jsonf::List(status, "assignments")) {
        const std::string pod = Str(a, "pod", "0");
        if (Str(a, "node") != name || Field(status, "finishedPods").contains(pod)) continue;
        // (A pod not reported started yet has not run: it is reported started first.)
        const std::string at = Str(Field(status, "startedPods"), pod.c_str());
        const int64_t from = at.empty() ? -1 : ParseTimestamp(at);
        if (duration_s > 0 && from >= 0 && now - from >= duration_s * 1000) done.push_back(pod);
      }
      if (!done.empty() && started.empty()) {
        json report = w;
        RecordSucceededPods(report, done, name, now);
        // With the version read: a change since (another node's report, the scheduler's
        // decision) is a conflict, and the next round reads it again.
        auto r = a.client->Do("PUT", path, report.dump());
        if (!r.ok()) return r.status();
        if (r->status >= 300 && r->status != 409)  // (409: changed meanwhile; next round)
          return Internal("node " + name + ": report of completed pods refused: " + r->body);
        continue;
      }
    }
    if (!started.empty() && (patch.is_null() || phase == "Scheduled"))
      patch["status"].update(StartedPodsReport(status, started));
    if (patch.is_null()) continue;
    // Several nodes may run pods of one gang; the first to report moves the phase.
    auto r = a.client->Do("PATCH", path, patch.dump(), "application/merge-patch+json");
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

void SimulatedFleet::Start(int64_t tick_wall_ms) {
  if (running_.exchange(true)) return;
  thread_ = std::thread([this, tick_wall_ms] {
    while (running_) {
      (void)Tick();
      for (int64_t slept = 0; slept < tick_wall_ms && running_; slept += 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
}

void SimulatedFleet::Stop() {
  if (!running_.exchange(false)) return;
  if (thread_.joinable()) thread_.join();
}

}  // namespace fabrica
