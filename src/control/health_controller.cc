#include "control/health_controller.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/json_fields.h"
#include "api/metrics.h"
#include "api/replies.h"
#include "control/eviction_record.h"
#include "health/burnin.h"
#include "health/inspection.h"
#include "health/netbox.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using jsonf::Field;
using jsonf::Int;
using jsonf::List;
using jsonf::Str;
using namespace health;

constexpr char kApi[] = "/apis/fabrica.dev/v1";
constexpr char kNodesPrefix[] = "/registry/nodes/";
constexpr char kHealthPrefix[] = "/registry/nodehealth/";
constexpr size_t kMaxReportBody = 1 << 20;
constexpr size_t kEventsKept = 20;

HttpResponse JsonReply(int status, const json& body) { return replies::Json(status, body); }
HttpResponse ErrorReply(int status, const std::string& message) {
  return replies::Error(status, message);
}
HttpResponse ErrorReply(const Status& st) { return replies::Error(st); }

bool BoundPhase(const std::string& phase) { return phase == "Scheduled" || phase == "Running"; }

// A stored Node object as the fleet schema's Node (the scheduler reads it the same way).
Result<Node> NodeFromObject(const json& n, const std::string& source) {
  json spec = Field(n, "spec");
  if (!spec.is_object()) return InvalidArgument(source + ": no spec");
  spec.erase("unschedulable");
  spec["name"] = Str(Field(n, "metadata"), "name");
  ASSIGN_OR_RETURN(Fleet f, ParseFleetYaml(json{{"nodes", json::array({spec})}}.dump(), source));
  return f.nodes.front();
}

json ConditionJson(const Condition& c) {
  json j = {{"type", c.type},
            {"status", c.StatusName()},
            {"reason", c.reason},
            {"message", c.message},
            {"lastTransitionTime", FormatTimestamp(c.last_transition_ms)}};
  if (c.device >= 0) j["gpu"] = c.device;
  if (c.problem()) {
    j["severity"] = SeverityName(c.severity);
    j["action"] = ActionName(c.action);
  }
  return j;
}

// Reads one report entry's optional typed field; `error` gets the first problem.
template <typename T>
std::optional<T> Opt(const json& o, const char* key, const std::string& path, std::string* error) {
  auto it = o.find(key);
  if (it == o.end()) return std::nullopt;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) {
      if (error->empty()) *error = path + "." + key + ": expected true or false";
      return std::nullopt;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number() || it->get<double>() < 0) {
      if (error->empty()) *error = path + "." + key + ": expected a number, 0 or more";
      return std::nullopt;
    }
  } else {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      if (error->empty()) *error = path + "." + key + ": expected an integer, 0 or more";
      return std::nullopt;
    }
  }
  return it->get<T>();
}

}  // namespace

HealthController::HealthController(Store& store, const Clock& clock, const Authorizer& auth,
                                   HealthControllerOptions options, Metrics* metrics)
    : store_(store),
      clock_(clock),
      auth_(auth),
      options_(std::move(options)),
      metrics_(metrics),
      next_task_id_(clock.NowMs() * 1000),
      ctl_(options_.remediation) {}

void HealthController::SetSimulation(Simulation sim) {
  std::lock_guard<std::mutex> lock(mu_);
  sim_ = std::move(sim);
}

HealthStats HealthController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Result<int> HealthController::GpuCount(const std::string& node) const {
  auto kv = store_.Get(kNodesPrefix + node);
  if (!kv.ok()) {
    if (kv.status().code() == StatusCode::kNotFound) return NotFound("node " + node + " not found");
    return kv.status();
  }
  json n = json::parse(kv->value, nullptr, false);
  return static_cast<int>(List(Field(n, "spec"), "devices").size());
}

Result<int> HealthController::Report(const std::string& node, const std::string& body) {
  ASSIGN_OR_RETURN(int gpus, GpuCount(node));
  std::string why;
  json report = jsonf::ParseBody(body, &why);
  if (!why.empty()) return InvalidArgument("the report: " + why);
  if (!report.is_object()) return InvalidArgument("the report must be a JSON object");
  for (const auto& [k, v] : report.items()) {
    if (k != "xids" && k != "devices") {
      return InvalidArgument(k + ": unknown field (expected xids, devices)");
    }
    if (!v.is_array()) return InvalidArgument(k + ": expected a list");
  }
  const int64_t now = clock_.NowMs();
  std::vector<Signal> signals;
  auto gpu_of = [&](const json& o, const std::string& path) -> Result<int> {
    const json& g = Field(o, "gpu");
    if (!g.is_number_integer()) return InvalidArgument(path + ".gpu: required, an integer");
    const int64_t gpu = g.get<int64_t>();
    if (gpu < 0 || gpu >= gpus) {
      return InvalidArgument(path + ".gpu: node " + node + " has " + std::to_string(gpus) +
                             " GPUs, no GPU " + std::to_string(gpu));
    }
    return static_cast<int>(gpu);
  };
  const json& xids = List(report, "xids");
  for (size_t i = 0; i < xids.size(); ++i) {
    const std::string path = "xids[" + std::to_string(i) + "]";
    const json& x = xids[i];
    if (!x.is_object()) return InvalidArgument(path + ": expected an object");
    for (const auto& [k, v] : x.items()) {
      if (k != "gpu" && k != "xid") return InvalidArgument(path + "." + k + ": unknown field");
    }
    Signal s;
    ASSIGN_OR_RETURN(s.gpu, gpu_of(x, path));
    const json& code = Field(x, "xid");
    if (!code.is_number_integer() || code.get<int64_t>() < 1 || code.get<int64_t>() > 9999) {
      return InvalidArgument(path + ".xid: required, an integer 1..9999");
    }
    s.xid = code.get<int>();
    s.at_ms = now;
    signals.push_back(s);
  }
  const json& devices = List(report, "devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string path = "devices[" + std::to_string(i) + "]";
    const json& d = devices[i];
    if (!d.is_object()) return InvalidArgument(path + ": expected an object");
    static const std::set<std::string> kFields = {
        "gpu",    "eccDoubleBitVolatile", "rowRemapFailure", "rowRemapPending", "temperatureC",
        "powerW", "powerLimitW"};
    for (const auto& [k, v] : d.items()) {
      if (!kFields.count(k)) return InvalidArgument(path + "." + k + ": unknown field");
    }
    Signal s;
    ASSIGN_OR_RETURN(s.gpu, gpu_of(d, path));
    std::string error;
    s.sample.ecc_dbe_volatile = Opt<int64_t>(d, "eccDoubleBitVolatile", path, &error);
    s.sample.row_remap_failure = Opt<bool>(d, "rowRemapFailure", path, &error);
    s.sample.row_remap_pending = Opt<bool>(d, "rowRemapPending", path, &error);
    auto temperature = Opt<int64_t>(d, "temperatureC", path, &error);
    if (temperature && *temperature > 1000) error = path + ".temperatureC: above 1000";
    if (temperature) s.sample.temperature_c = static_cast<int>(*temperature);
    s.sample.power_w = Opt<double>(d, "powerW", path, &error);
    s.sample.power_limit_w = Opt<double>(d, "powerLimitW", path, &error);
    if (!error.empty()) return InvalidArgument(error);
    if (d.size() == 1) return InvalidArgument(path + ": no reading besides gpu");
    s.at_ms = now;
    signals.push_back(s);
  }
  const int n = static_cast<int>(signals.size());
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto& q = queued_[node];
  q.insert(q.end(), signals.begin(), signals.end());
  return n;
}

Status HealthController::Sync() {
  const int64_t now = clock_.NowMs();
  std::lock_guard<std::mutex> lock(mu_);

  // Nodes: every registered one is known to the controller with its inventory.
  ASSIGN_OR_RETURN(ListResult node_list, store_.List(kNodesPrefix, "", 0));
  std::map<std::string, bool> unschedulable;  // node -> spec.unschedulable
  for (const KeyValue& kv : node_list.items) {
    json n = json::parse(kv.value, nullptr, false);
    const std::string name = Str(Field(n, "metadata"), "name");
    if (name.empty()) continue;
    unschedulable[name] = Field(Field(n, "spec"), "unschedulable") == true;
    if (const health::Lifecycle* life = ctl_.lifecycle(NodeId(name))) {
      // Pods that did not start here while the node renewed its lease, held by the scheduler
      // (status.startHold) a second time within two hours: its runtime is wedged, which no
      // telemetry says; the node is remediated as for a fault (drained, rebooted, burnt in).
      // (A trial's stalled node was held, freed, given work and held again, for ever, its
      // tenants billed for pods that never started.)
      constexpr int64_t kStartHoldWindowMs = 2 * 3'600'000;
      const json& hold = Field(Field(n, "status"), "startHold");
      const int64_t since = ParseTimestamp(Str(hold, "since"));
      std::deque<int64_t>& seen = start_holds_seen_[name];
      if (since >= 0 && (seen.empty() || seen.back() != since) &&
          life->state() == health::NodeState::kAvailable) {
        seen.push_back(since);
        while (!seen.empty() && seen.front() < now - kStartHoldWindowMs) seen.pop_front();
        if (seen.size() >= 2) {
          (void)ctl_.ObserveNodeProblem(
              NodeId(name), health::kPodsNotStarting, "RepeatedPodStartFailures",
              "pods did not start here " + std::to_string(seen.size()) +
                  " times within 2 h while the node renewed its lease (the scheduler's hold: " +
                  Str(hold, "message") + ")",
              health::Action::kRebootNode, now);
          seen.clear();
        }
      }
      continue;
    }
    auto node = NodeFromObject(n, kv.key);
    if (!node.ok()) continue;
    // Nodes in service when the controller starts are adopted; later ones enroll. One out of
    // service when it stopped (a user-style review saw a node that had stopped renewing its
    // lease adopted, unproven, and its cordon left behind) goes on from where it was, by the
    // same rules: cordoned, draining, in repair or burn-in, it starts cordoned (drained in its
    // turn under the remediation limit — work may still run there — then repaired as its
    // faults say, or burnt in); still enrolling, it enrolls again; retired, it stays retired.
    auto stored = store_.Get(kHealthPrefix + name);
    const json rec = stored.ok() ? json::parse(stored->value, nullptr, false) : json();
    const std::string was = Str(rec, "state");
    const bool out_of_service = first_sync_ && !was.empty() && was != "available";
    NodeState initial = first_sync_ ? NodeState::kAvailable : NodeState::kEnroll;
    std::string why;
    if (out_of_service) {
      if (was == "retired") {
        initial = NodeState::kRetired;
        why = "retired when the server stopped: stays retired";
      } else if (was == "enroll" || was == "inspecting" || was == "inspect failed") {
        initial = NodeState::kEnroll;
        why = was + " when the server stopped: enrolls again";
      } else {
        initial = NodeState::kCordoned;
        why = was + " when the server stopped: drained and proven again";
      }
    }
    if (!ctl_.AddNode(*node, initial, now, why).ok()) continue;
    expected_[name] = *node;
    if (!stored.ok()) continue;
    // A record from before this process: keep its history, and raise again the event
    // problems it had, so that a node caught mid-remediation is remediated again rather than
    // returned to service unproven.
    for (const json& h : List(rec, "history")) earlier_history_[name].push_back(h.dump());
    if (Field(rec, "cordonedByHealth") == true) cordoned_by_health_.insert(name);
    for (const json& c : List(rec, "conditions")) {
      if (Str(c, "status") != "True") continue;
      const std::string type = Str(c, "type");
      const int gpu = static_cast<int>(Int(c, "gpu", -1));
      if (gpu < 0) continue;
      if (type.rfind("Xid", 0) == 0) {
        (void)ctl_.ObserveXid(NodeId(name), gpu, std::atoi(type.c_str() + 3), now);
      } else if (type == kEccDoubleBit) {
        DeviceSample s;
        s.ecc_dbe_volatile = 1;
        (void)ctl_.ObserveSample(NodeId(name), gpu, s, now);
      }
    }
  }
  first_sync_ = false;

  // Heartbeats: the server stamps each lease renewal on receipt.
  ASSIGN_OR_RETURN(ListResult lease_list, store_.List("/registry/leases/", "", 0));
  for (const KeyValue& kv : lease_list.items) {
    json l = json::parse(kv.value, nullptr, false);
    const std::string name = Str(Field(l, "metadata"), "name");
    const int64_t renew = ParseTimestamp(Str(Field(l, "spec"), "renewTime"));
    if (renew < 0 || renew <= renewed_[name]) continue;
    renewed_[name] = renew;
    // Dead only once neither the server's timeout nor the lease the node declares has run out.
    (void)ctl_.ObserveHeartbeat(NodeId(name), renew,
                                LeaseMs(Int(Field(l, "spec"), "leaseDurationSeconds"), clock_));
  }

  // Agents' reports since the last round.
  std::map<std::string, std::vector<Signal>> signals;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    signals.swap(queued_);
  }
  for (const auto& [node, list] : signals) {
    for (const Signal& s : list) {
      if (s.xid > 0) {
        (void)ctl_.ObserveXid(NodeId(node), s.gpu, s.xid, s.at_ms);
      } else {
        (void)ctl_.ObserveSample(NodeId(node), s.gpu, s.sample, s.at_ms);
      }
    }
  }

  ApplyTaskResults(now);
  FinishSimOps(now);
  RunEvictions(now);

  // What is bound where.
  ASSIGN_OR_RETURN(ListResult workload_list, store_.List("/registry/workloads/", "", 0));
  std::vector<BoundPod> pods;
  std::map<std::string, std::pair<std::string, std::string>> bindings;  // id -> (key, time)
  for (const KeyValue& kv : workload_list.items) {
    json w = json::parse(kv.value, nullptr, false);
    const json& status = Field(w, "status");
    if (!BoundPhase(Str(status, "phase"))) continue;
    const WorkloadId id(Str(Field(w, "metadata"), "namespace") + "/" +
                        Str(Field(w, "metadata"), "name"));
    bindings[id.str()] = {kv.key, Str(status, "scheduledTime")};
    for (const json& a : List(status, "assignments")) {
      // (A pod that completed holds nothing: a fault where it ran does not touch the workload.)
      if (Field(status, "finishedPods").contains(Str(a, "pod", "0"))) continue;
      BoundPod p;
      p.workload = id;
      p.node = NodeId(Str(a, "node"));
      for (const json& d : List(a, "devices")) p.gpus.push_back(static_cast<int>(Int(d, "index")));
      pods.push_back(std::move(p));
    }
  }
  for (const ControllerAction& a : ctl_.Reconcile(now, pods)) Perform(a, now, bindings);

  // Cordons the controller asked for, or lifted, that did not reach the store (a conflict) are
  // tried again; one an administrator also set is theirs to lift.
  for (const NodeId& node : ctl_.Nodes()) {
    const std::string name = node.str();
    if (!cordoned_by_health_.count(name)) continue;
    const NodeState state = ctl_.lifecycle(node)->state();
    if (state != NodeState::kAvailable) {
      if (!unschedulable[name]) SetUnschedulable(name, true);
    } else {
      Uncordon(name);
    }
  }

  stats_.nodes = static_cast<int>(ctl_.Nodes().size());
  stats_.in_remediation = ctl_.InRemediation();
  stats_.remediation_limit = ctl_.RemediationLimit();
  stats_.max_in_remediation_seen = std::max(stats_.max_in_remediation_seen, stats_.in_remediation);
  WriteRecords(now);
  if (metrics_) {
    metrics_->SetGauge("fabrica_nodes_in_remediation",
                       "Nodes draining, in repair or in burn-in after a repair.", "",
                       stats_.in_remediation);
    metrics_->SetCounter("fabrica_workloads_requeued_by_health_total",
                         "Workloads the health controller evicted and requeued.", "",
                         static_cast<double>(stats_.requeued));
  }
  return Status::Ok();
}

HealthController::AgentTask& HealthController::AddTask(const std::string& node, ActionKind kind,
                                                       int gpu, int64_t now) {
  AgentTask task;
  task.id = ++next_task_id_;
  task.kind = kind;
  task.gpu = gpu;
  task.since_ms = now;
  return tasks_[node].emplace_back(std::move(task));
}

void HealthController::Perform(
    const ControllerAction& a, int64_t now,
    const std::map<std::string, std::pair<std::string, std::string>>& bindings) {
  const std::string node = a.node.str();
  const bool simulated = sim_.simulates && sim_.simulates(node);
  // A simulated node's hardware finishes after `duration_ms`; a real node's agent does it: a new
  // task for the node (or GPU) supersedes an older one.
  auto hand_off = [&](int64_t duration_ms) {
    if (simulated) {
      sim_ops_.push_back({now + duration_ms, a.node, a.gpu, a.kind});
      return;
    }
    auto& tasks = tasks_[node];
    tasks.erase(std::remove_if(
                    tasks.begin(), tasks.end(),
                    [&](const AgentTask& t) { return !t.inject && (t.gpu == a.gpu || a.gpu < 0); }),
                tasks.end());
    AddTask(node, a.kind, a.gpu, now);
  };
  switch (a.kind) {
    case ActionKind::kCordonNode:
    case ActionKind::kRetire: {
      auto kv = store_.Get(kNodesPrefix + node);
      if (!kv.ok()) return;
      json n = json::parse(kv->value, nullptr, false);
      if (Field(Field(n, "spec"), "unschedulable") == true) return;  // someone else's cordon
      cordoned_by_health_.insert(node);
      SetUnschedulable(node, true);
      return;
    }
    case ActionKind::kUncordonNode:
      if (cordoned_by_health_.count(node)) Uncordon(node);
      return;
    case ActionKind::kCordonGpu:
    case ActionKind::kUncordonGpu:
      // GPU cordons live in the node's health record, which the scheduler reads.
      return;
    case ActionKind::kRestartApp: {
      // Simulated workloads have no process to restart; a node's agent restarts the workload's
      // pods that use the GPU, in place.
      if (!simulated) AddTask(node, a.kind, a.gpu, now).workload = a.workload.str();
      return;
    }
    case ActionKind::kEvict: {
      auto it = bindings.find(a.workload.str());
      if (it == bindings.end()) return;
      stats_.evictions_requested += 1;
      evictions_.emplace(it->second.first,
                         Eviction{it->second.first, it->second.second, now + a.grace_ms, a.reason});
      return;
    }
    case ActionKind::kInspect:
      hand_off(options_.sim_inspect_ms);
      return;
    case ActionKind::kResetGpu:
      hand_off(options_.sim_reset_ms);
      return;
    case ActionKind::kRebootNode:
      hand_off(options_.sim_reboot_ms);
      return;
    case ActionKind::kRepair:
      hand_off(options_.sim_repair_ms);
      return;
    case ActionKind::kBurnIn:
      hand_off(options_.sim_burn_in_ms);
      return;
  }
}

bool HealthController::SetUnschedulable(const std::string& node, bool cordon) {
  // A conditional write; on a conflict the next Sync tries again.
  auto kv = store_.Get(kNodesPrefix + node);
  if (!kv.ok()) return false;
  json n = json::parse(kv->value, nullptr, false);
  if (!n.is_object() || !Field(n, "spec").is_object()) return false;
  if ((Field(n["spec"], "unschedulable") == true) == cordon) return true;
  // An administrator's cordon (the API stamps it, kubectl's cordon or fabctl's, even over
  // ours) stays when ours ends, as in Kubernetes a cordon stays until someone uncordons (a
  // user-style review saw a node an admin had cordoned for investigation returned to service
  // by the end of its repair). Read in the same version the write is conditional on, so that
  // a cordon that lands meanwhile is not lifted.
  if (!cordon &&
      Field(Field(Field(n, "metadata"), "annotations"), kCordonedByAnnotation).is_string())
    return true;
  if (cordon) {
    n["spec"]["unschedulable"] = true;
  } else {
    n["spec"].erase("unschedulable");
  }
  return store_.Put(kv->key, n.dump(), kv->mod_revision).ok();
}

void HealthController::Uncordon(const std::string& node) {
  // (An administrator's cordon it leaves in place: SetUnschedulable.)
  if (SetUnschedulable(node, false)) cordoned_by_health_.erase(node);
}

void HealthController::FinishSimOps(int64_t now) {
  std::vector<SimOp> due;
  for (auto it = sim_ops_.begin(); it != sim_ops_.end();) {
    if (it->due_ms <= now) {
      due.push_back(*it);
      it = sim_ops_.erase(it);
    } else {
      ++it;
    }
  }
  for (const SimOp& op : due) {
    const std::string node = op.node.str();
    auto repaired = [&] {
      if (sim_.repaired) sim_.repaired(node, op.gpu);
    };
    // Outcomes the controller no longer waits for (it escalated meanwhile) are refused; that is
    // expected and harmless.
    switch (op.kind) {
      case ActionKind::kInspect: {
        (void)ctl_.ReportInspection(op.node, expected_.at(node), now);
        break;
      }
      case ActionKind::kResetGpu:
        repaired();
        (void)ctl_.ReportActionDone(op.node, op.gpu, Action::kResetGpu, true, now);
        break;
      case ActionKind::kRebootNode:
        repaired();
        (void)ctl_.ReportActionDone(op.node, -1, Action::kRebootNode, true, now);
        break;
      case ActionKind::kRepair:
        repaired();
        (void)ctl_.ReportActionDone(op.node, -1, Action::kRepair, true, now);
        break;
      case ActionKind::kBurnIn:
        ReportBurnIn(node, op.gpu, SimulatedBurnIn(expected_.at(node), {}), "simulated", now);
        break;
      default:
        break;
    }
  }
}

Status HealthController::SubmitTaskResult(const std::string& node, int64_t task_id,
                                          const std::string& body) {
  std::string why;
  json j = jsonf::ParseBody(body, &why);
  if (!why.empty()) return InvalidArgument("task result: " + why);
  if (!j.is_object()) return InvalidArgument("task result: the body must be a JSON object");
  static const std::set<std::string> kFields = {"succeeded", "message", "inventory", "burnIn"};
  for (const auto& [k, v] : j.items()) {
    if (!kFields.count(k)) return InvalidArgument(k + ": unknown field");
  }
  TaskResult r;
  r.node = node;
  r.id = task_id;
  if (!Field(j, "succeeded").is_boolean())
    return InvalidArgument("succeeded: required, true or false");
  r.succeeded = j["succeeded"].get<bool>();
  if (j.contains("message") && !j["message"].is_string()) {
    return InvalidArgument("message: expected a string");
  }
  r.message = Str(j, "message");
  if (j.contains("inventory")) {
    auto inv = ParseInventoryReport(j["inventory"].dump());
    if (!inv.ok()) return InvalidArgument("inventory: " + inv.status().message());
    r.inventory = *inv;
  }
  if (j.contains("burnIn")) {
    const json& b = j["burnIn"];
    if (!b.is_object()) return InvalidArgument("burnIn: expected an object");
    static const std::set<std::string> kBurnIn = {"passed", "failedGpus", "summary", "dcgmDiag",
                                                  "ncclAllReduce"};
    for (const auto& [k, v] : b.items()) {
      if (!kBurnIn.count(k)) return InvalidArgument("burnIn." + k + ": unknown field");
    }
    r.has_burn_in = true;
    if (b.contains("dcgmDiag")) {
      auto d = ParseDcgmDiagJson(b["dcgmDiag"].is_string() ? b["dcgmDiag"].get<std::string>()
                                                           : b["dcgmDiag"].dump());
      if (!d.ok()) return InvalidArgument("burnIn.dcgmDiag: " + d.status().message());
      r.dcgm = *d;
    }
    if (b.contains("ncclAllReduce")) {
      if (!b["ncclAllReduce"].is_string()) {
        return InvalidArgument("burnIn.ncclAllReduce: expected all_reduce_perf's output as text");
      }
      auto n = ParseNcclAllReduce(b["ncclAllReduce"].get<std::string>());
      if (!n.ok()) return InvalidArgument("burnIn.ncclAllReduce: " + n.status().message());
      r.nccl = *n;
    }
    if (!r.dcgm && !r.nccl) {
      if (!Field(b, "passed").is_boolean()) {
        return InvalidArgument("burnIn.passed: required without dcgmDiag or ncclAllReduce");
      }
      r.own_verdict.passed = b["passed"].get<bool>();
      for (const json& g : List(b, "failedGpus")) {
        if (!g.is_number_integer()) return InvalidArgument("burnIn.failedGpus: expected integers");
        r.own_verdict.failed_gpus.push_back(g.get<int>());
      }
      r.own_verdict.summary = Str(b, "summary");
      if (!r.own_verdict.passed) r.own_verdict.failures.push_back(r.own_verdict.summary);
    }
  }
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (task_results_.size() >= 10'000) return InvalidArgument("too many task results queued");
  task_results_.push_back(std::move(r));
  return Status::Ok();
}

void HealthController::ApplyTaskResults(int64_t now) {
  std::vector<TaskResult> results;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    results.swap(task_results_);
  }
  for (TaskResult& r : results) {
    auto& tasks = tasks_[r.node];
    auto it =
        std::find_if(tasks.begin(), tasks.end(), [&](const AgentTask& t) { return t.id == r.id; });
    if (it == tasks.end()) continue;  // superseded, or from before a restart
    const AgentTask task = *it;
    tasks.erase(it);
    // A fault shows in the agent's reports like any other; a restart needs no verdict.
    if (task.inject || task.kind == ActionKind::kRestartApp) continue;
    const NodeId node(r.node);
    switch (task.kind) {
      case ActionKind::kInspect:
        // A failed inspection reports nothing discovered: every expected part is missing.
        (void)ctl_.ReportInspection(node, r.succeeded && r.inventory ? *r.inventory : Node{}, now);
        break;
      case ActionKind::kResetGpu:
        (void)ctl_.ReportActionDone(node, task.gpu, Action::kResetGpu, r.succeeded, now);
        break;
      case ActionKind::kRebootNode:
        (void)ctl_.ReportActionDone(node, -1, Action::kRebootNode, r.succeeded, now);
        break;
      case ActionKind::kRepair:
        (void)ctl_.ReportActionDone(node, -1, Action::kRepair, r.succeeded, now);
        break;
      case ActionKind::kBurnIn: {
        BurnInResult verdict;
        std::string source = "agent";
        if (r.dcgm || r.nccl) {
          verdict = JudgeBurnIn(expected_[r.node], r.dcgm ? &*r.dcgm : nullptr,
                                r.nccl ? &*r.nccl : nullptr);
          source = std::string(r.dcgm ? "dcgmi diag" : "") + (r.dcgm && r.nccl ? " + " : "") +
                   (r.nccl ? "nccl-tests all_reduce_perf" : "");
        } else if (r.has_burn_in) {
          verdict = r.own_verdict;
        } else {
          verdict.summary = r.message.empty() ? "no burn-in report" : r.message;
          verdict.failures.push_back(verdict.summary);
        }
        if (!r.succeeded) verdict.passed = false;
        ReportBurnIn(r.node, task.gpu, verdict, source, now);
        break;
      }
      default:
        break;
    }
  }
}

void HealthController::ReportBurnIn(const std::string& node, int gpu, const BurnInResult& verdict,
                                    const std::string& source, int64_t now) {
  (void)ctl_.ReportBurnIn(NodeId(node), gpu, verdict, now);
  json j = {{"time", FormatTimestamp(now)},
            {"passed", verdict.passed},
            {"source", source},
            {"summary", verdict.summary}};
  if (gpu >= 0) j["gpu"] = gpu;
  if (!verdict.failed_gpus.empty()) j["failedGpus"] = verdict.failed_gpus;
  if (!verdict.failures.empty()) j["failures"] = verdict.failures;
  auto& kept = burn_ins_[node];
  kept.push_back(j.dump());
  if (kept.size() > 5) kept.erase(kept.begin());
}

void HealthController::RunEvictions(int64_t now) {
  for (auto it = evictions_.begin(); it != evictions_.end();) {
    Eviction& e = it->second;
    if (e.due_ms > now && e.marked) {
      ++it;
      continue;
    }
    auto kv = store_.Get(e.key);
    if (!kv.ok()) {
      it = evictions_.erase(it);  // deleted meanwhile
      continue;
    }
    json w = json::parse(kv->value, nullptr, false);
    const json& status = Field(w, "status");
    if (!BoundPhase(Str(status, "phase")) || Str(status, "scheduledTime") != e.scheduled_time) {
      // Finished, or already requeued (its node's lease expired): requeued at most once.
      stats_.requeue_skipped += 1;
      it = evictions_.erase(it);
      continue;
    }
    // A mark of its own a server before a restart made keeps its deadline: the drain goes on,
    // not starting its grace anew (a trial's workload said it stopped at the first deadline
    // and was evicted, and billed, a grace period later).
    if (const json& mark = Field(status, "preemption");
        !e.marked && Str(mark, "evictor") == "health") {
      const int64_t stored = ParseTimestamp(Str(mark, "deadline"));
      if (stored >= 0 && stored < e.due_ms) e.due_ms = stored;
    }
    if (e.due_ms > now) {
      // Marked now, stopped at the deadline. (A mark already there, a preemption's or a drain's,
      // stays: this eviction still stops it at its own deadline.) On a conflict, again next round.
      if (!status.contains("preemption")) {
        const std::string deadline = FormatTimestamp(e.due_ms);
        w["status"]["preemption"] = {
            {"by", ""}, {"reason", e.reason}, {"deadline", deadline}, {"evictor", "health"}};
        w["status"]["message"] = "evicting: " + e.reason + "; stops at " + deadline;
        if (!store_.Put(kv->key, w.dump(), kv->mod_revision).ok()) {
          ++it;
          continue;
        }
      }
      e.marked = true;
      ++it;
      continue;
    }
    // Pods that completed stay completed (not a gang's: it starts again whole).
    const json finished =
        Field(Field(w, "spec"), "gang") == true ? json() : Field(status, "finishedPods");
    const json before = status;  // (`status` refers into w)
    w["status"] = {{"phase", "Pending"},
                   {"reason", "Evicted"},
                   {"message", "requeued: evicted: " + e.reason},
                   {"conditions",
                    {{{"type", "Scheduled"},
                      {"status", "False"},
                      {"reason", "Evicted"},
                      {"message", e.reason},
                      {"lastTransitionTime", FormatTimestamp(now)}}}}};
    if (finished.is_object() && !finished.empty()) w["status"]["finishedPods"] = finished;
    // Counted in its record of evictions, with the work the stopped run lost.
    NoteEviction(before, w["status"], "Evicted", e.reason, now,
                 RunGpuSecondsLost(Field(w, "spec"), before, now));
    if (store_.Put(kv->key, w.dump(), kv->mod_revision).ok()) {
      stats_.requeued += 1;
      it = evictions_.erase(it);
    } else {
      ++it;  // a concurrent write (the agent's status report): try again next round
    }
  }
}

void HealthController::WriteRecords(int64_t now) {
  (void)now;
  for (const NodeId& node : ctl_.Nodes()) {
    const std::string name = node.str();
    const Lifecycle& life = *ctl_.lifecycle(node);
    const NodeHealth& h = *ctl_.health(node);
    json gpus = json::array();
    for (int d = 0; d < life.gpus(); ++d) {
      gpus.push_back({{"index", d},
                      {"state", GpuStateName(life.gpu_state(d))},
                      {"schedulable", life.gpu_state(d) == GpuState::kInService}});
    }
    json conditions = json::array();
    for (const Condition& c : h.conditions()) conditions.push_back(ConditionJson(c));
    json events = json::array();
    const auto& ev = h.events();
    for (size_t i = ev.size() > kEventsKept ? ev.size() - kEventsKept : 0; i < ev.size(); ++i) {
      const HealthEvent& e = ev[i];
      events.push_back({{"time", FormatTimestamp(e.at_ms)},
                        {"gpu", e.device},
                        {"xid", e.xid},
                        {"severity", SeverityName(e.severity)},
                        {"action", ActionName(e.action)},
                        {"reason", e.reason},
                        {"message", e.message}});
    }
    json history = json::array();
    for (const std::string& earlier : earlier_history_[name])
      history.push_back(json::parse(earlier));
    for (const TransitionRecord& t : life.history()) {
      json j = {
          {"time", FormatTimestamp(t.at_ms)}, {"from", t.from}, {"to", t.to}, {"reason", t.reason}};
      if (t.device >= 0) j["gpu"] = t.device;
      history.push_back(j);
    }
    if (history.size() > options_.history_kept) {
      history.erase(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(
                                                           history.size() - options_.history_kept));
    }
    json rec = {{"apiVersion", "fabrica.dev/v1"},
                {"kind", "NodeHealth"},
                {"metadata", {{"name", name}}},
                {"state", NodeStateName(life.state())},
                {"stateSince", FormatTimestamp(life.state_since_ms())},
                {"schedulable", life.Schedulable()},
                {"ready", h.ready()},
                {"action", ActionName(ctl_.CurrentAction(node))},
                {"gpus", gpus},
                {"conditions", conditions},
                {"events", events},
                {"history", history}};
    if (cordoned_by_health_.count(name)) rec["cordonedByHealth"] = true;
    json tasks = json::array();
    for (const AgentTask& t : tasks_[name]) {
      json j = {{"id", t.id},
                {"kind", t.inject ? "inject" : ActionKindName(t.kind)},
                {"since", FormatTimestamp(t.since_ms)}};
      if (t.gpu >= 0) j["gpu"] = t.gpu;
      if (t.inject && t.fault.xid > 0) j["xid"] = t.fault.xid;
      if (t.inject && t.fault.ecc_double_bit >= 0) j["eccDoubleBit"] = t.fault.ecc_double_bit;
      if (t.inject && t.fault.kill) j["kill"] = true;
      if (t.inject && t.fault.stall) j["stall"] = true;
      if (!t.workload.empty()) j["workload"] = t.workload;
      tasks.push_back(j);
    }
    if (!tasks.empty()) rec["tasks"] = tasks;
    json burn_ins = json::array();
    for (const std::string& b : burn_ins_[name]) burn_ins.push_back(json::parse(b));
    if (!burn_ins.empty()) rec["burnIns"] = burn_ins;
    std::string text = rec.dump();
    if (written_[name] == text) continue;
    if (store_.Put(kHealthPrefix + name, text, kAnyRevision).ok()) written_[name] = std::move(text);
  }
}

ApiServer::Extension HealthController::Routes() {
  return [this](const HttpRequest& req, const Result<Principal>& principal,
                const std::vector<std::string>&, bool) -> std::optional<HttpResponse> {
    const std::string nodes = std::string(kApi) + "/nodes/";
    const std::string list_path = std::string(kApi) + "/nodehealth";
    const std::string inventory_path = std::string(kApi) + "/inventory";
    std::string node, sub;
    if (req.path.rfind(nodes, 0) == 0) {
      const std::string rest = req.path.substr(nodes.size());
      const size_t slash = rest.find('/');
      if (slash == std::string::npos) return std::nullopt;
      node = rest.substr(0, slash);
      sub = rest.substr(slash + 1);
      if (sub != "health" && sub != "inject" && sub.rfind("tasks/", 0) != 0) return std::nullopt;
    } else if (req.path != list_path && req.path != inventory_path) {
      return std::nullopt;
    }
    if (!principal.ok()) return ErrorReply(principal.status());
    const Principal& p = *principal;

    if (req.path == list_path || req.path == inventory_path) {
      if (req.method != "GET") return ErrorReply(405, "use GET");
      Status allowed = auth_.Check(p, Verb::kList, "nodes", "", "");
      if (!allowed.ok()) return ErrorReply(allowed);
      auto records = store_.List(kHealthPrefix, "", 0);
      if (!records.ok()) return ErrorReply(records.status());
      if (req.path == list_path) {
        json items = json::array();
        for (const KeyValue& kv : records->items) items.push_back(json::parse(kv.value));
        return JsonReply(200, {{"kind", "NodeHealthList"}, {"items", items}});
      }
      auto format = req.query.find("format");
      if (format != req.query.end() && format->second != "netbox") {
        return ErrorReply(400, "format: only netbox is supported, not '" + format->second + "'");
      }
      std::map<NodeId, std::string> states;
      for (const KeyValue& kv : records->items) {
        json rec = json::parse(kv.value, nullptr, false);
        states[NodeId(Str(Field(rec, "metadata"), "name"))] = Str(rec, "state", "available");
      }
      auto node_list = store_.List(kNodesPrefix, "", 0);
      if (!node_list.ok()) return ErrorReply(node_list.status());
      Fleet fleet;
      for (const KeyValue& kv : node_list->items) {
        auto n = NodeFromObject(json::parse(kv.value, nullptr, false), kv.key);
        if (n.ok()) fleet.nodes.push_back(*n);
      }
      const std::string site =
          req.query.count("site") ? req.query.at("site") : std::string("fabrica");
      HttpResponse r;
      r.body = ExportNetbox(fleet, states, site);
      return r;
    }

    if (sub == "health" && req.method == "GET") {
      Status allowed = auth_.Check(p, Verb::kGet, "nodes", "", node);
      if (!allowed.ok()) return ErrorReply(allowed);
      auto kv = store_.Get(kHealthPrefix + node);
      if (!kv.ok()) {
        if (kv.status().code() == StatusCode::kNotFound) {
          // (A node that does not exist is said so: a trial read "yet" of a typo.)
          if (!store_.Get(kNodesPrefix + node).ok())
            return ErrorReply(404, "node '" + node + "' not found");
          return ErrorReply(404, "no health record for node " + node + " yet");
        }
        return ErrorReply(kv.status());
      }
      HttpResponse r;
      r.body = kv->value;
      return r;
    }
    if (req.method != "POST") return ErrorReply(405, sub + ": use POST (or GET for health)");
    if (req.body.size() > kMaxReportBody) return ErrorReply(413, sub + ": body too large");
    if (sub.rfind("tasks/", 0) == 0) {
      // A node reports only its own tasks; a platform admin may too (a repair is people's work).
      if (!p.node.empty() && p.node != node) {
        return ErrorReply(403, "node " + p.node + " may report tasks only for itself, not " + node);
      }
      Status allowed = auth_.Check(p, Verb::kUpdate, "nodes", "", node);
      if (!allowed.ok()) return ErrorReply(allowed);
      const std::string id_text = sub.substr(6);
      int64_t id = 0;
      if (id_text.empty() || id_text.size() > 18 ||
          id_text.find_first_not_of("0123456789") != std::string::npos) {
        return ErrorReply(400, "task id: '" + id_text + "' is not a task id");
      }
      id = std::stoll(id_text);
      Status queued = SubmitTaskResult(node, id, req.body);
      if (!queued.ok()) return ErrorReply(queued);
      return JsonReply(202, {{"accepted", true}});
    }
    if (sub == "health") {
      // A node reports only its own health; a platform admin may report for any node.
      if (!p.node.empty() && p.node != node) {
        return ErrorReply(403,
                          "node " + p.node + " may report health only for itself, not " + node);
      }
      Status allowed = auth_.Check(p, Verb::kUpdate, "nodes", "", node);
      if (!allowed.ok()) return ErrorReply(allowed);
      auto queued = Report(node, req.body);
      if (!queued.ok()) return ErrorReply(queued.status());
      return JsonReply(202, {{"accepted", *queued}});
    }
    // inject: platform admins only (a node identity may update its own Node, not inject).
    Status allowed = p.node.empty() ? auth_.Check(p, Verb::kUpdate, "nodes", "", node)
                                    : Status(StatusCode::kPermissionDenied,
                                             "node identities may not inject faults");
    if (!allowed.ok()) return ErrorReply(allowed);
    auto gpus = GpuCount(node);
    if (!gpus.ok()) return ErrorReply(gpus.status());
    {
      // JSON's types first: YAML would read "79" as the number 79.
      std::string why;
      json body = jsonf::ParseBody(req.body, &why);
      if (!why.empty()) return ErrorReply(400, "inject: " + why);
      if (!body.is_object()) return ErrorReply(400, "inject: the body must be a JSON object");
      for (const char* key : {"xid", "gpu", "eccDoubleBit", "atSeconds"}) {
        if (body.contains(key) && !body[key].is_number_integer()) {
          return ErrorReply(400,
                            std::string(key) + ": expected an integer, got " + body[key].dump());
        }
      }
      for (const char* key : {"kill", "stall"}) {
        if (body.contains(key) && !body[key].is_boolean()) {
          return ErrorReply(400,
                            std::string(key) + ": expected true or false, got " + body[key].dump());
        }
      }
    }
    auto fault = ParseFaultInjection(req.body, "inject", node);
    if (!fault.ok()) return ErrorReply(fault.status());
    if (fault->node.str() != node) {
      return ErrorReply(400, "node: the body names " + fault->node.str() + ", the path " + node);
    }
    if (!fault->kill && !fault->stall && fault->gpu >= *gpus) {
      return ErrorReply(400, "gpu: node " + node + " has " + std::to_string(*gpus) +
                                 " GPUs, no GPU " + std::to_string(fault->gpu));
    }
    Simulation sim;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sim = sim_;
    }
    json out = {{"node", node}};
    if (fault->stall && (!sim.inject || !sim.simulates || !sim.simulates(node))) {
      return ErrorReply(400,
                        "stall: only a node of the simulated fleet (fabrica up) can be "
                        "stalled; node " +
                            node + " runs its own agent");
    }
    if (!sim.inject || !sim.simulates || !sim.simulates(node)) {
      // A node with its own agent: the fault is a task for that agent, which injects it into
      // its simulated devices (an agent on real GPUs refuses it).
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t now = clock_.NowMs();
      AgentTask& task = AddTask(node, ActionKind::kInspect, fault->gpu, now);
      task.inject = true;  // the kind is not used for an injection
      task.fault = *fault;
      out["task"] = task.id;
      WriteRecords(now);
    } else {
      Status st = sim.inject(*fault);
      if (!st.ok()) return ErrorReply(st);
    }
    if (fault->kill) out["kill"] = true;
    if (fault->stall) out["stall"] = true;
    if (fault->xid > 0) out["xid"] = fault->xid;
    if (fault->gpu >= 0) out["gpu"] = fault->gpu;
    if (fault->ecc_double_bit >= 0) out["eccDoubleBit"] = fault->ecc_double_bit;
    return JsonReply(202, {{"injected", out}});
  };
}

ApiServer::Extension ChainExtensions(ApiServer::Extension first, ApiServer::Extension second) {
  return [first = std::move(first), second = std::move(second)](
             const HttpRequest& req, const Result<Principal>& principal,
             const std::vector<std::string>& tenants, bool all) -> std::optional<HttpResponse> {
    if (first) {
      if (auto r = first(req, principal, tenants, all)) return r;
    }
    if (second) return second(req, principal, tenants, all);
    return std::nullopt;
  };
}

}  // namespace fabrica
