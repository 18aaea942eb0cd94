#include "agent/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/dcgm_exporter.h"
#include "agent/gpu_stress.h"
#include "api/json_fields.h"
#include "control/sim_agent.h"
#include "core/quantity.h"
#include "shim/shim_config.h"

namespace fabrica {

using json = nlohmann::json;
using jsonf::Field;
using jsonf::Int;
using jsonf::List;
using jsonf::Str;

namespace {

constexpr char kApi[] = "/apis/fabrica.dev/v1";
constexpr size_t kLogChunk = 256 << 10;

Status Check(const Result<ClientResponse>& r, const std::string& node, const char* what) {
  if (!r.ok()) return r.status();
  if (r->status >= 300) {
    return Status(StatusCode::kUnavailable, "node " + node + ": " + what + " got HTTP " +
                                                std::to_string(r->status) + ": " + r->body);
  }
  return Status::Ok();
}

// A pod key "tenant/workload/pod" (or a workload key "tenant/workload") in its parts.
struct PodKey {
  std::string ns, name, pod;
};
PodKey SplitPodKey(const std::string& key) {
  const size_t a = key.find('/');
  const size_t b = key.find('/', a + 1);
  return {key.substr(0, a), key.substr(a + 1, b == std::string::npos ? b : b - a - 1),
          b == std::string::npos ? "" : key.substr(b + 1)};
}

std::string WorkloadPath(const std::string& ns, const std::string& name) {
  return std::string(kApi) + "/namespaces/" + ns + "/workloads/" + name;
}

}  // namespace

// One pod this node should run, from a workload's status.
struct NodeAgent::PodPlan {
  std::string ns, name, pod, key, binding, phase;
  json workload;
  json assignment;
};

NodeAgent::NodeAgent(AgentOptions options, std::unique_ptr<DeviceBackend> devices,
                     const Clock& clock)
    : options_(std::move(options)), devices_(std::move(devices)), clock_(clock) {
  client_ = std::make_unique<HttpClient>(options_.client);
  launcher_ = std::make_unique<Launcher>(LauncherOptions{options_.state_dir, options_.cgroup_root});
}

void NodeAgent::Watch() {
  ClientOptions o = options_.client;
  o.timeout_seconds = 2;  // an idle stream is re-opened; this bounds how long a stop waits
  HttpClient client(o);
  while (!stopping_) {
    auto r = client.Stream(std::string(kApi) + "/workloads?watch=true", [this](const std::string&) {
      assignments_changed_ = true;
      wake_.notify_all();
      return !stopping_.load();
    });
    // The stream ended (timeout, server restart): events may have been missed, so list again.
    assignments_changed_ = true;
    if (!r.ok() || *r >= 300) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_.load(); });
    }
  }
}

bool NodeAgent::WaitForWork(int64_t ms) {
  std::unique_lock<std::mutex> lock(wake_mu_);
  return wake_.wait_for(lock, std::chrono::milliseconds(ms),
                        [this] { return assignments_changed_.load() || stopping_.load(); });
}

Status NodeAgent::Start(bool watch) {
  auto inv = devices_->Discover();
  if (!inv.ok()) return inv.status();
  inventory_ = *inv;
  inventory_.node.name = NodeId(options_.node);
  RETURN_IF_ERROR(launcher_->Load());
  {
    std::ifstream in(options_.state_dir + "/logs.json");
    json saved = json::parse(in, nullptr, false);
    if (saved.is_object()) {
      for (const auto& [key, c] : saved.items()) {
        logs_[key] = LogCursor{Str(c, "file"), Int(c, "local"), Int(c, "base", -1)};
      }
    }
  }
  for (const auto& [key, p] : launcher_->pods()) {
    if (!logs_.count(key)) logs_[key] = LogCursor{p.log_path, 0, -1};
    // An adopted fractional pod keeps reporting its achieved share from its shim region.
    const std::string region = options_.state_dir + "/shim/" + PodFileId(key) + ".region";
    struct stat sb;
    if (stat(region.c_str(), &sb) == 0) shim_regions_[key] = region;
  }
  if (watch) {
    resync_ms_ = 10'000;
    watch_thread_ = std::thread([this] { Watch(); });
  }
  return Status::Ok();
}

Status NodeAgent::Register() {
  json node = {{"apiVersion", "fabrica.dev/v1"},
               {"kind", "Node"},
               {"metadata", {{"name", options_.node}}},
               {"spec", json::parse(NodeSpecJson(inventory_.node))}};
  auto r = client_->Do("POST", std::string(kApi) + "/nodes", node.dump());
  if (r.ok() && r->status == 409) {
    // Registered before: bring the stored inventory up to date, keeping what admins set
    // (labels, taints, unschedulable) — a merge patch of the discovered fields only.
    json spec = json::parse(NodeSpecJson(inventory_.node));
    spec.erase("labels");
    spec.erase("taints");
    r = client_->Do("PATCH", std::string(kApi) + "/nodes/" + options_.node,
                    json{{"spec", spec}}.dump(), "application/merge-patch+json");
  }
  RETURN_IF_ERROR(Check(r, options_.node, "register"));
  registered_ = true;
  return Status::Ok();
}

Status NodeAgent::Heartbeat(int64_t now) {
  json lease = {
      {"apiVersion", "fabrica.dev/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", options_.node}}},
      {"spec",
       {{"holderIdentity", options_.node}, {"leaseDurationSeconds", options_.lease_seconds}}}};
  const std::string path = std::string(kApi) + "/leases/" + options_.node;
  auto r = client_->Do("PUT", path, lease.dump());
  if (r.ok() && r->status == 404)
    r = client_->Do("POST", std::string(kApi) + "/leases", lease.dump());
  RETURN_IF_ERROR(Check(r, options_.node, "heartbeat"));
  last_heartbeat_ms_ = now;
  return Status::Ok();
}

Status NodeAgent::ReportHealth(const std::vector<GpuReading>& readings, bool with_gauges) {
  json report = json::object();
  std::set<int> xid79;
  for (const XidEvent& x : devices_->PollXids()) {
    if (x.gpu < 0 || x.xid < 1 || x.xid > 9999) continue;
    report["xids"].push_back({{"gpu", x.gpu}, {"xid", x.xid}});
    if (x.xid == 79) xid79.insert(x.gpu);
  }
  for (const GpuReading& g : readings) {
    if (g.mig_gpu_instance_id >= 0) continue;
    if (g.lost) {
      // A GPU that fell off the bus is XID 79 whether or not the driver sent the event.
      if (!lost_reported_.count(g.index) && !xid79.count(g.index)) {
        report["xids"].push_back({{"gpu", g.index}, {"xid", 79}});
      }
      lost_reported_.insert(g.index);
      continue;
    }
    lost_reported_.erase(g.index);
    json d = {{"gpu", g.index}};
    if (g.ecc_dbe_volatile >= 0) {
      auto it = ecc_reported_.find(g.index);
      if ((it == ecc_reported_.end() && g.ecc_dbe_volatile > 0) ||
          (it != ecc_reported_.end() && it->second != g.ecc_dbe_volatile)) {
        d["eccDoubleBitVolatile"] = g.ecc_dbe_volatile;
      }
    }
    if (with_gauges && g.temperature_c >= 0) d["temperatureC"] = g.temperature_c;
    if (with_gauges && g.power_watts >= 0) d["powerW"] = g.power_watts;
    if (d.size() > 1) report["devices"].push_back(d);
  }
  if (report.empty()) return Status::Ok();
  auto r =
      client_->Do("POST", std::string(kApi) + "/nodes/" + options_.node + "/health", report.dump());
  if (r.ok() && r->status == 404) return Status::Ok();  // a server without a health controller
  RETURN_IF_ERROR(Check(r, options_.node, "health report"));
  for (const GpuReading& g : readings) {
    if (g.mig_gpu_instance_id < 0 && !g.lost && g.ecc_dbe_volatile >= 0) {
      ecc_reported_[g.index] = g.ecc_dbe_volatile;
    }
  }
  return Status::Ok();
}

Status NodeAgent::PushSamples(int64_t now, const std::vector<GpuReading>& readings) {
  json samples = json::array();
  for (const GpuReading& g : readings) {
    // Busy per-mille: the GPU's utilization, or for a MIG instance (which has none) its
    // graphics engine activity, as dcgm-exporter's profiling field gives it.
    int32_t permille = -1;
    if (g.util_percent >= 0) permille = std::clamp(g.util_percent, 0, 100) * 10;
    if (permille < 0 && g.gr_engine_active >= 0) {
      permille = static_cast<int32_t>(std::lround(std::clamp(g.gr_engine_active, 0.0, 1.0) * 1000));
    }
    if (g.lost || permille < 0) continue;
    std::string uuid = g.uuid;
    if (g.mig_gpu_instance_id >= 0) {
      // The meter names a MIG instance as the scheduler binds it: "<GPU UUID>/<slice index in
      // the node's geometry>". The driver names it by GPU instance id; the agent knows both.
      if (static_cast<size_t>(g.index) >= inventory_.gpus.size()) continue;
      const GpuDetails& gpu = inventory_.gpus[g.index];
      int slice = -1;
      for (size_t k = 0; k < gpu.mig_instances.size(); ++k) {
        if (gpu.mig_instances[k].gpu_instance_id == g.mig_gpu_instance_id)
          slice = static_cast<int>(k);
      }
      if (slice < 0) continue;  // an instance created behind the inventory's back
      uuid = gpu.uuid + "/" + std::to_string(slice);
    }
    // No time: the server stamps samples on receipt, in the clock the bindings use.
    samples.push_back({{"node", options_.node}, {"uuid", uuid}, {"utilPermille", permille}});
  }
  // Achieved shares on shared GPUs: each container's busy time since the last sample, from
  // its shim region, as per-mille of the busy time of all containers on that GPU.
  std::map<std::string, std::map<std::string, int64_t>> busy;  // uuid -> workload -> ns
  for (const auto& [key, region] : shim_regions_) {
    if (!launcher_->pods().count(key)) continue;
    ContainerUsage usage;
    std::string error;
    if (!ReadShimRegion(region, &usage, &error)) continue;
    const std::string wkey = key.substr(0, key.rfind('/'));
    for (const ContainerUsage::Dev& d : usage.devices) {
      int64_t& last = shim_busy_[key + "|" + d.uuid];
      busy[d.uuid][wkey] += std::max<int64_t>(0, d.busy_ns - last);
      last = d.busy_ns;
    }
  }
  for (json& sample : samples) {
    auto it = busy.find(sample["uuid"].get<std::string>());
    if (it == busy.end()) continue;
    int64_t total = 0;
    for (const auto& [w, ns] : it->second) total += ns;
    if (total <= 0) continue;
    json shares = json::object();
    for (const auto& [w, ns] : it->second) {
      shares[w] = static_cast<int32_t>(ns * 1000 / total);
    }
    sample["achievedPermille"] = shares;
  }
  if (samples.empty()) return Status::Ok();
  auto r = client_->Do("POST", std::string(kApi) + "/telemetry", json{{"samples", samples}}.dump());
  if (r.ok() && r->status == 404) return Status::Ok();  // a server without a meter
  RETURN_IF_ERROR(Check(r, options_.node, "telemetry"));
  last_sample_ms_ = now;
  return Status::Ok();
}

Result<LaunchSpec> NodeAgent::MakeLaunchSpec(const PodPlan& plan) {
  LaunchSpec spec;
  spec.key = plan.key;
  spec.binding = plan.binding;
  const json& wspec = Field(plan.workload, "spec");
  const json& run = Field(wspec, "run");
  std::vector<std::string> command;
  for (const json& c : List(run, "command")) {
    if (c.is_string()) command.push_back(c.get<std::string>());
  }
  const int64_t duration = Int(run, "durationSeconds");
  if (options_.exec_commands && !command.empty()) {
    spec.argv = command;
  } else {
    // No command (or a dry-run node): a stand-in that lasts the declared duration.
    spec.argv = {"sleep", duration > 0 ? std::to_string(duration) : "infinity"};
  }
  // The pod set this pod belongs to ("<set>-<i>"), for its CPU and memory limits.
  const size_t dash = plan.pod.rfind('-');
  const std::string set = dash == std::string::npos ? plan.pod : plan.pod.substr(0, dash);
  for (const json& ps : List(wspec, "podSets")) {
    if (Str(ps, "name") != set) continue;
    const json& cpu = Field(ps, "cpu");
    if (cpu.is_string() || cpu.is_number()) {
      auto q = ParseMilliCpu(cpu.is_string() ? cpu.get<std::string>() : cpu.dump());
      if (q.ok()) spec.cpu_milli = q->value();
    }
    const json& mem = Field(ps, "memory");
    if (mem.is_string()) {
      auto q = ParseMemoryMib(mem.get<std::string>());
      if (q.ok()) spec.memory_mib = q->value();
    }
  }
  std::vector<std::string> visible;
  bool fractional = false;
  for (const json& d : List(plan.assignment, "devices")) {
    std::string uuid = Str(d, "uuid");
    const int64_t index = Int(d, "index", -1);
    const int64_t slice = Int(d, "migSlice", -1);
    if (slice >= 0 && index >= 0 && static_cast<size_t>(index) < inventory_.gpus.size()) {
      const auto& mig = inventory_.gpus[index].mig_instances;
      if (static_cast<size_t>(slice) < mig.size() && !mig[slice].uuid.empty()) {
        uuid = mig[slice].uuid;
      }
    }
    visible.push_back(uuid);
    // A share of a GPU (not a MIG slice, which the hardware isolates) needs the shim.
    int64_t total_mib = 0;
    if (index >= 0 && static_cast<size_t>(index) < inventory_.node.devices.size()) {
      total_mib = inventory_.node.devices[index].memory.value();
    }
    const int64_t mib = Int(d, "memoryMiB", 0);
    if (slice < 0 && (Int(d, "gpuMilli", 1000) < 1000 || (mib > 0 && mib < total_mib))) {
      fractional = true;
    }
  }
  // Locality: the NUMA node of the pod's GPUs and the NIC there, as the scheduler chose them.
  const int64_t numa = Int(plan.assignment, "numa", -1);
  const std::string nic = Str(plan.assignment, "nic");
  if (numa >= 0) {
    for (const json& d : List(plan.assignment, "devices")) {
      const int64_t index = Int(d, "index", -1);
      if (index >= 0 && static_cast<size_t>(index) < inventory_.gpus.size() &&
          !inventory_.gpus[index].cpu_affinity.empty()) {
        spec.cpus = inventory_.gpus[index].cpu_affinity;  // the CPUs closest to its GPUs
        break;
      }
    }
  }
  std::string visible_list;
  for (const std::string& v : visible) visible_list += (visible_list.empty() ? "" : ",") + v;
  const char* path = std::getenv("PATH");
  spec.env = {{"PATH", path ? path : "/usr/local/bin:/usr/bin:/bin"},
              {"HOME", "/tmp"},
              {"LANG", "C.UTF-8"},
              {"FABRICA_TENANT", plan.ns},
              {"FABRICA_WORKLOAD", plan.name},
              {"FABRICA_POD", plan.pod},
              {"FABRICA_NODE", options_.node},
              {"CUDA_VISIBLE_DEVICES", visible.empty() ? "" : visible_list},
              {"NVIDIA_VISIBLE_DEVICES", visible.empty() ? "void" : visible_list}};
  if (numa >= 0) spec.env["FABRICA_NUMA_NODE"] = std::to_string(numa);
  if (!nic.empty()) {
    spec.env["FABRICA_NIC"] = nic;
    spec.env["NCCL_IB_HCA"] = nic;  // NCCL's choice of InfiniBand device
  }
  if (fractional) {
    if (options_.shim_library.empty()) {
      // Fail closed: a fractional share never runs on an uncapped GPU.
      return FailedPrecondition("pod " + plan.pod +
                                " has a fractional GPU share and this node has no vGPU shim "
                                "(fabrica agent --shim)");
    }
    RETURN_IF_ERROR(PrepareShim(plan, &spec));
  }
  return spec;
}

Status NodeAgent::Reconcile(int64_t now) {
  auto list = client_->Do("GET", std::string(kApi) + "/workloads");
  RETURN_IF_ERROR(Check(list, options_.node, "list workloads"));
  json body = json::parse(list->body, nullptr, false);
  if (!Field(body, "items").is_array()) {
    return Internal("node " + options_.node + ": the workload list is not a list");
  }
  std::map<std::string, PodPlan> wanted;
  std::map<std::string, int> pods_here;  // "tenant/name" -> pods of its binding on this node
  for (const json& w : body["items"]) {
    const json& status = Field(w, "status");
    const std::string phase = Str(status, "phase");
    if (phase != "Scheduled" && phase != "Running") continue;
    for (const json& a : List(status, "assignments")) {
      if (Str(a, "node") != options_.node) continue;
      // (A pod listed as completed is not run again, nor waited for: after a restart this
      // agent no longer remembers it.)
      if (Field(status, "finishedPods").contains(Str(a, "pod", "0"))) continue;
      PodPlan plan;
      plan.ns = Str(Field(w, "metadata"), "namespace");
      plan.name = Str(Field(w, "metadata"), "name");
      plan.pod = Str(a, "pod", "0");
      plan.key = plan.ns + "/" + plan.name + "/" + plan.pod;
      plan.binding = Str(status, "scheduledTime");
      plan.phase = phase;
      plan.workload = w;
      plan.assignment = a;
      ++pods_here[plan.ns + "/" + plan.name];
      wanted[plan.key] = std::move(plan);
    }
  }
  Status first = Status::Ok();
  // Pods that run here without a current binding: stop them (requeued, moved, deleted, or
  // left from before a restart).
  for (const auto& [key, p] : launcher_->pods()) {
    auto it = wanted.find(key);
    if (it == wanted.end() || it->second.binding != p.binding) {
      launcher_->Stop(key, options_.grace_ms, now);
    }
  }
  // Per workload, the pods started here that its status does not list yet (those launched
  // now, and any whose report was lost), and whether it is still Scheduled.
  std::map<std::string, std::pair<const PodPlan*, json>> started;
  auto note_started = [&](const PodPlan& plan) {
    if (Field(Field(plan.workload, "status"), "startedPods").contains(plan.pod)) return;
    auto& [some_plan, pods] = started[plan.ns + "/" + plan.name];
    if (!some_plan) some_plan = &plan;
    pods[plan.pod] = "";
  };
  bool new_cursors = false;
  for (auto& [key, plan] : wanted) {
    const std::string wkey = plan.ns + "/" + plan.name;
    Outcome& outcome = outcomes_[wkey];
    if (outcome.binding != plan.binding) {
      outcome = Outcome();
      outcome.binding = plan.binding;
    }
    if (auto running = launcher_->pods().find(key); running != launcher_->pods().end()) {
      if (running->second.binding == plan.binding) note_started(plan);
      continue;  // running (or stopping an older binding)
    }
    auto done = finished_.find(key);
    if (done != finished_.end() && done->second == plan.binding) continue;
    auto spec = MakeLaunchSpec(plan);
    Status launched = spec.ok() ? launcher_->Launch(*spec, now) : spec.status();
    if (!launched.ok()) {
      // The pod cannot run here: it failed, and says why.
      PodExit e;
      e.key = key;
      e.binding = plan.binding;
      e.exit_code = 128;
      finished_[key] = plan.binding;
      outcome.message = launched.message();
      outcome.cannot_run = true;
      RecordExit(e);
      continue;
    }
    if (!logs_.count(key)) {
      // A fresh file (a pod run again keeps its file and cursor, and appends).
      struct stat sb;
      const std::string file = launcher_->LogPath(key);
      logs_[key] = LogCursor{file, stat(file.c_str(), &sb) == 0 ? sb.st_size : 0, -1};
      new_cursors = true;
    }
    note_started(plan);
  }
  // Kept before the pod's output is shipped: an agent killed before that would otherwise not
  // know the file after its restart (an ended pod is no longer the launcher's), and lose it.
  if (new_cursors) SaveLogCursors();
  // Reported started (the server stamps when); the first pod of a Scheduled workload to start
  // anywhere makes it Running.
  for (const auto& [wkey, entry] : started) {
    const auto& [plan, pods] = entry;
    json patch = {{"status", StartedPodsReport(Field(plan->workload, "status"), pods)}};
    if (plan->phase == "Scheduled") {
      patch["status"]["phase"] = "Running";
      patch["status"]["startTime"] = FormatTimestamp(now);
      patch["status"]["message"] = RunningMessage(Field(plan->workload, "status"));
    }
    auto r = client_->Do("PATCH", WorkloadPath(plan->ns, plan->name) + "/status", patch.dump(),
                         "application/merge-patch+json");
    Status st = Check(r, options_.node, "report started pods");
    if (!st.ok() && first.ok()) first = st;
  }
  wanted_keys_.clear();
  for (const auto& [key, plan] : wanted) wanted_keys_.insert(key);
  // Forget outcomes of pods no longer assigned here, and workloads with no pod here that have
  // nothing left to report (their pods stopped here, moved or were requeued).
  for (auto it = finished_.begin(); it != finished_.end();) {
    it = wanted.count(it->first) ? std::next(it) : finished_.erase(it);
  }
  // The exits the launcher keeps until the server has them: a pod no longer wanted here under
  // its binding (listed as completed, its workload failed, requeued or gone) is forgotten.
  std::vector<std::string> reported;
  for (const auto& [key, e] : launcher_->ended()) {
    auto it = wanted.find(key);
    if (it == wanted.end() || it->second.binding != e.binding) reported.push_back(key);
  }
  launcher_->Forget(reported);
  for (auto it = outcomes_.begin(); it != outcomes_.end();) {
    const Outcome& o = it->second;
    const bool unsent = o.failed > 0 || o.succeeded.size() > o.reported;
    it = pods_here.count(it->first) || unsent ? std::next(it) : outcomes_.erase(it);
  }
  {
    // Who uses each GPU now, for /metrics (a shared GPU lists its workloads, comma-separated)
    // and for the simulated load.
    std::lock_guard<std::mutex> lock(labels_mu_);
    gpu_labels_.clear();
    gpu_milli_.clear();
    running_devices_.clear();
    for (const auto& [key, plan] : wanted) {
      if (!launcher_->pods().count(key)) continue;
      for (const json& d : List(plan.assignment, "devices")) {
        running_devices_[key].insert(static_cast<int>(Int(d, "index", -1)));
        std::string device = Str(d, "uuid");
        const int64_t index = Int(d, "index", -1);
        const int64_t slice = Int(d, "migSlice", -1);
        if (slice >= 0 && index >= 0 && static_cast<size_t>(index) < inventory_.gpus.size() &&
            static_cast<size_t>(slice) < inventory_.gpus[index].mig_instances.size()) {
          const MigInstanceInfo& mig = inventory_.gpus[index].mig_instances[slice];
          device += "/" + std::to_string(mig.gpu_instance_id);
          gpu_milli_[mig.uuid.empty() ? device : mig.uuid] += 1000;
        } else {
          gpu_milli_[device] += Int(d, "gpuMilli", 1000);
        }
        auto& labels = gpu_labels_[device];
        for (const auto& [k, v] : WorkloadLabels(plan.ns, plan.name, plan.pod)) {
          std::string& have = labels[k];
          if (have.empty()) {
            have = v;
          } else if (("," + have + ",").find("," + v + ",") == std::string::npos) {
            have += "," + v;
          }
        }
      }
    }
  }
  return first;
}

void NodeAgent::RecordExit(const PodExit& e) {
  const PodKey k = SplitPodKey(e.key);
  const std::string& pod = k.pod;
  auto it = outcomes_.find(k.ns + "/" + k.name);
  if (it == outcomes_.end() || it->second.binding != e.binding) return;  // an older binding's
  Outcome& o = it->second;
  if (!e.lost && e.signal == 0 && e.exit_code == 0) {
    o.succeeded.push_back(pod);
    return;
  }
  ++o.failed;
  if (o.message.empty()) {
    o.message = e.lost     ? "pod " + pod + " vanished (its monitor was killed)"
                : e.signal ? "pod " + pod + " was killed by signal " + std::to_string(e.signal)
                           : "pod " + pod + " exited with code " + std::to_string(e.exit_code);
  }
  o.exit_code = e.signal ? 128 + e.signal : (e.lost ? 137 : e.exit_code);
}

Status NodeAgent::SendOutcomes(int64_t now) {
  Status first = Status::Ok();
  for (auto& [wkey, o] : outcomes_) {
    // Each pod that succeeds is reported at once (its devices are free for other work then),
    // as is the first that fails; the report that lists its last pod here is the final one.
    if (o.sent || (o.failed == 0 && o.succeeded.size() <= o.reported)) continue;
    bool last = o.failed > 0;  // (else: once the server lists every pod of it here)
    const PodKey k = SplitPodKey(wkey);
    const std::string& ns = k.ns;
    const std::string& name = k.name;
    // Report against the binding it belongs to: read, compare, write with the version read.
    Status st(StatusCode::kUnavailable, "node " + options_.node + ": could not report " + wkey);
    for (int attempt = 0; attempt < 5; ++attempt) {
      // A node reads workloads through its list, which holds those assigned to it.
      auto r = client_->Do("GET", std::string(kApi) + "/workloads");
      st = Check(r, options_.node, "read workloads");
      if (!st.ok()) break;
      json list = json::parse(r->body, nullptr, false);
      json w;
      for (const json& item : List(list, "items")) {
        const json& meta = Field(item, "metadata");
        if (Str(meta, "namespace") == ns && Str(meta, "name") == name) w = item;
      }
      if (w.is_null()) {
        last = true;
        break;  // deleted, or no longer assigned here
      }
      json& status = w["status"];
      const std::string phase = Str(status, "phase");
      if (Str(status, "scheduledTime") != o.binding ||
          (phase != "Running" && phase != "Scheduled")) {
        last = true;
        break;  // requeued, moved or already reported: not ours to end
      }
      // Its pods here that succeeded are listed (stamped by the server); the workload has
      // succeeded once every pod of its binding is, on whichever node reports last. A pod that
      // fails fails it at once (its other pods are stopped).
      if (!o.failed) {
        last = RecordSucceededPods(w, o.succeeded, options_.node, now);
      } else {
        status["phase"] = "Failed";
        status["completionTime"] = FormatTimestamp(now);
        status["exitCode"] = o.exit_code;
        status["message"] = o.message;
        status["reason"] = o.cannot_run ? "CannotRun" : "Error";
      }
      auto put = client_->Do("PUT", WorkloadPath(ns, name) + "/status", w.dump());
      if (put.ok() && put->status == 409) {
        // Changed meanwhile: look again (and, past the last try, report again next round).
        st = Status(StatusCode::kUnavailable,
                    "node " + options_.node + ": report for " + wkey + " kept conflicting");
        continue;
      }
      st = Check(put, options_.node, "report exit");
      break;
    }
    if (st.ok()) {
      o.sent = last;
      o.reported = o.succeeded.size();
    } else if (first.ok()) {
      first = st;  // tried again next round
    }
  }
  // Keep only outcomes still to send.
  for (auto it = outcomes_.begin(); it != outcomes_.end();) {
    it = it->second.sent ? outcomes_.erase(it) : std::next(it);
  }
  return first;
}

void NodeAgent::SaveLogCursors() const {
  json saved = json::object();
  for (const auto& [key, c] : logs_) {
    saved[key] = {{"file", c.file}, {"local", c.local}, {"base", c.base}};
  }
  const std::string path = options_.state_dir + "/logs.json";
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << saved.dump();
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

Status NodeAgent::ShipLogs() {
  Status first = Status::Ok();
  bool changed = false;
  for (auto it = logs_.begin(); it != logs_.end();) {
    const std::string& key = it->first;
    LogCursor& c = it->second;
    const bool running = launcher_->pods().count(key) > 0;
    const PodKey k = SplitPodKey(key);
    const std::string path = WorkloadPath(k.ns, k.name) + "/log?pod=" + k.pod;
    bool dropped = false;
    std::string chunk;
    {
      std::ifstream in(c.file, std::ios::binary);
      if (in) {
        in.seekg(c.local);
        chunk.resize(kLogChunk);
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        chunk.resize(static_cast<size_t>(in.gcount()));
      }
    }
    if (!chunk.empty()) {
      Result<ClientResponse> r = Status::Ok();
      if (c.base < 0) {
        // What the server has of this pod already: this file's output goes after it.
        r = client_->Do("POST", path, "", "text/plain");
        if (r.ok() && r->status == 200) {
          c.base = Int(json::parse(r->body, nullptr, false), "size", 0) - c.local;
          // Saved before anything is sent: an agent killed after sending would otherwise ask
          // again after its restart, take what it had sent for earlier output, and send it twice.
          SaveLogCursors();
        }
      }
      if (c.base >= 0) {
        r = client_->Do("POST", path + "&offset=" + std::to_string(c.base + c.local), chunk,
                        "text/plain");
        if (r.ok() && (r->status == 200 || r->status == 409)) {
          const int64_t size = Int(json::parse(r->body, nullptr, false), "size", -1);
          if (size >= c.base) {
            c.local = size - c.base;
          } else {
            c.base =
                -1;  // the server has less than this file's start (its log was lost): ask again
          }
          changed = true;
        }
      }
      if (r.ok() && (r->status == 404 || r->status == 403)) {
        dropped = true;  // the workload is gone or no longer ours: drop its log
      } else if (!r.ok() || (r->status != 200 && r->status != 409)) {
        Status st = r.ok() ? Check(r, options_.node, "ship log") : r.status();
        if (first.ok()) first = st;
      }
    }
    if (!running && !wanted_keys_.count(key) && (chunk.empty() || dropped)) {
      unlink(c.file.c_str());
      it = logs_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) SaveLogCursors();
  return first;
}

void NodeAgent::SimulateLoad() {
  auto* sim = dynamic_cast<SimDeviceBackend*>(devices_.get());
  if (!sim) return;
  // A simulated GPU is 80% busy for the share its running pods hold, as the built-in simulated
  // nodes report (control/sim_agent.h).
  std::map<std::string, int64_t> milli;
  {
    std::lock_guard<std::mutex> lock(labels_mu_);
    milli = gpu_milli_;
  }
  for (const Device& d : inventory_.node.devices) milli.emplace(d.uuid, 0);
  for (const GpuDetails& g : inventory_.gpus) {
    for (const MigInstanceInfo& m : g.mig_instances) {
      if (!m.uuid.empty()) milli.emplace(m.uuid, 0);
    }
  }
  for (const auto& [uuid, held] : milli) {
    (void)sim->SetBusy(uuid, static_cast<int32_t>(std::min<int64_t>(1000, held) * 8 / 10));
  }
}

Status NodeAgent::PrepareShim(const PodPlan& plan, LaunchSpec* spec) {
  ShimConfig config;
  config.container = plan.key;
  const std::string id = PodFileId(plan.key);
  const std::string dir = options_.state_dir + "/shim";
  mkdir(dir.c_str(), 0700);
  config.region_path = dir + "/" + id + ".region";
  unlink(config.region_path.c_str());  // a new binding starts with no usage
  for (const json& d : List(plan.assignment, "devices")) {
    ShimConfig::Dev dev;
    dev.uuid = Str(d, "uuid");
    const int64_t index = Int(d, "index", -1);
    int64_t total_mib = 0;
    if (index >= 0 && static_cast<size_t>(index) < inventory_.node.devices.size()) {
      total_mib = inventory_.node.devices[index].memory.value();
    }
    const int64_t milli = std::clamp<int64_t>(Int(d, "gpuMilli", 1000), 1, 1000);
    int64_t mib = Int(d, "memoryMiB", 0);
    if (mib <= 0) mib = total_mib * milli / 1000;  // memory in proportion to the compute share
    if (mib <= 0) {
      return FailedPrecondition("GPU " + dev.uuid +
                                ": no memory size known to cap a fractional share with");
    }
    dev.memory_limit_bytes = mib << 20;
    dev.compute_permille = static_cast<int>(milli);
    config.devices.push_back(dev);
  }
  const std::string file = dir + "/" + id + ".conf";
  std::ofstream out(file, std::ios::trunc);
  out << FormatShimConfig(config);
  out.close();
  if (!out) return Internal("cannot write the shim configuration " + file);
  spec->env["FABRICA_VGPU_CONFIG"] = file;
  spec->env["LD_PRELOAD"] = options_.shim_library;
  shim_regions_[plan.key] = config.region_path;
  return Status::Ok();
}

std::string NodeAgent::MetricsText() const {
  std::lock_guard<std::mutex> lock(labels_mu_);
  return RenderDcgmExporterPage(inventory_, last_readings_, gpu_labels_);
}

std::string NodeAgent::InventoryReport() const {
  json gpus = json::array();
  for (const Device& d : inventory_.node.devices) {
    gpus.push_back({{"uuid", d.uuid},
                    {"model", d.model},
                    {"memoryMiB", d.memory.value()},
                    {"eccEnabled", d.ecc_enabled},
                    {"nvlinkPeers", d.nvlink_peers}});
  }
  json nics = json::array();
  for (const Nic& n : inventory_.node.nics) nics.push_back({{"name", n.name}, {"gbps", n.gbps}});
  return json{{"node", options_.node}, {"gpus", gpus}, {"nics", nics}}.dump();
}

// Burn-in on this node: the readable-and-clean check every backend can do (each GPU answers,
// is on the bus, has no double-bit ECC errors). A GPU that fails is named. Compute and NCCL
// stress need dcgmi / nccl-tests, which this agent does not run yet.
std::string NodeAgent::BurnIn(int gpu, bool* passed) {
  auto readings = devices_->Read();
  std::vector<int> failed;
  std::string why;
  if (!readings.ok()) {
    *passed = false;
    return json{{"passed", false},
                {"summary", "cannot read the GPUs: " + readings.status().message()}}
        .dump();
  }
  int checked = 0;
  for (const GpuReading& g : *readings) {
    if (g.mig_gpu_instance_id >= 0 || (gpu >= 0 && g.index != gpu)) continue;
    ++checked;
    if (g.lost) {
      failed.push_back(g.index);
      why += "GPU " + std::to_string(g.index) + " is off the bus; ";
    } else if (g.ecc_dbe_volatile > 0) {
      failed.push_back(g.index);
      why += "GPU " + std::to_string(g.index) + " has " + std::to_string(g.ecc_dbe_volatile) +
             " double-bit ECC errors; ";
    }
  }
  *passed = failed.empty() && checked > 0;
  const std::string summary =
      *passed ? "built-in check: " + std::to_string(checked) +
                    " GPU(s) readable, on the bus, no double-bit ECC errors"
              : (checked == 0 ? std::string("no GPU to check") : why.substr(0, why.size() - 2));
  return json{{"passed", *passed}, {"failedGpus", failed}, {"summary", summary}}.dump();
}

// Runs `command` through the shell and returns its standard output and exit status.
static std::string RunCapture(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

static std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct NodeAgent::BurnInJob {
  int64_t id = 0;
  std::atomic<bool> done{false};
  std::string dcgm, nccl, error;
  bool stressed = false;  // the built-in burn ran
  std::vector<int> stress_failed;
  std::string stress_summary;
};

// A burn-in thread still running owns its job and ends alone; the watch is stopped and joined.
NodeAgent::~NodeAgent() {
  stopping_ = true;
  wake_.notify_all();
  if (watch_thread_.joinable()) watch_thread_.join();
}

std::optional<std::string> NodeAgent::ToolBurnIn(int64_t id, int gpu) {
  if (burn_in_ && burn_in_->id == id) {
    if (!burn_in_->done) return std::nullopt;
    std::shared_ptr<BurnInJob> job = std::move(burn_in_);
    json burn = json::object();
    if (!job->dcgm.empty()) burn["dcgmDiag"] = job->dcgm;
    if (!job->nccl.empty()) burn["ncclAllReduce"] = job->nccl;
    std::string error = job->error;
    if (burn.empty() && job->stressed) {
      // The built-in burn alone: its own verdict.
      burn = {{"passed", job->stress_failed.empty()},
              {"failedGpus", job->stress_failed},
              {"summary", job->stress_summary}};
    } else if (!job->stress_failed.empty() && error.empty()) {
      error = job->stress_summary;  // the tools' reports go with a failed built-in burn
    }
    json result = {{"succeeded", error.empty()}};
    if (!burn.empty()) result["burnIn"] = burn;
    if (!error.empty()) result["message"] = error;
    return result.dump();
  }
  if (burn_in_ && !burn_in_->done) return std::nullopt;  // an older task's run: let it end
  auto job = std::make_shared<BurnInJob>();
  job->id = id;
  burn_in_ = job;
  const int gpus = static_cast<int>(inventory_.node.devices.size());
  std::string dcgm_cmd, nccl_cmd;
  if (!options_.dcgmi.empty()) {
    dcgm_cmd = ShellQuote(options_.dcgmi) + " diag -r " + std::to_string(options_.dcgm_level) +
               " -j" + (gpu >= 0 ? " -i " + std::to_string(gpu) : "") + " 2>/dev/null";
  }
  if (!options_.nccl_all_reduce.empty() && gpu < 0 && gpus >= 2) {
    nccl_cmd = ShellQuote(options_.nccl_all_reduce) + " -b 8 -e 8G -f 2 -g " +
               std::to_string(gpus) + " 2>&1";
  }
  // The built-in burn on real GPUs (a simulated node's GPUs have nothing to burn).
  const bool stress = options_.gpu_burn_seconds > 0 && devices_->Kind() == "nvml";
  GpuStressOptions stress_options;
  stress_options.seconds = options_.gpu_burn_seconds;
  stress_options.memory_mib = options_.gpu_burn_mib;
  std::vector<int> stress_gpus;
  if (gpu >= 0) stress_gpus.push_back(gpu);
  std::thread([job, dcgm_cmd, nccl_cmd, stress, stress_options, stress_gpus] {
    if (stress) {
      job->stressed = true;
      auto results = StressGpus(stress_gpus, stress_options);
      if (!results.ok()) {
        job->stress_failed.push_back(stress_gpus.empty() ? 0 : stress_gpus[0]);
        job->stress_summary = "built-in GPU burn: " + results.status().message();
      } else {
        for (const GpuStressResult& r : *results) {
          if (!r.passed) job->stress_failed.push_back(r.gpu);
          job->stress_summary += (job->stress_summary.empty() ? "" : "; ") + r.message;
        }
        job->stress_summary = "built-in GPU burn: " + job->stress_summary;
      }
    }
    int status = 0;
    if (!dcgm_cmd.empty()) {
      job->dcgm = RunCapture(dcgm_cmd, &status);
      // dcgmi exits non-zero when a test fails; its JSON says which. No output is the failure.
      if (job->dcgm.empty())
        job->error = "dcgmi diag printed nothing (exit status " + std::to_string(status) + ")";
    }
    if (!nccl_cmd.empty() && job->error.empty()) {
      job->nccl = RunCapture(nccl_cmd, &status);
      if (status != 0) {
        job->error = "all_reduce_perf failed (exit status " + std::to_string(status) + ")";
      }
    }
    job->done = true;
  }).detach();
  return std::nullopt;
}

Status NodeAgent::DoTasks(int64_t now) {
  if (last_task_poll_ms_ >= 0 && now - last_task_poll_ms_ < 1000) return Status::Ok();
  last_task_poll_ms_ = now;
  auto r = client_->Do("GET", std::string(kApi) + "/nodes/" + options_.node + "/health");
  if (r.ok() && r->status == 404) return Status::Ok();  // no record yet, or no health controller
  RETURN_IF_ERROR(Check(r, options_.node, "read health record"));
  json rec = json::parse(r->body, nullptr, false);
  std::set<int64_t> listed;
  Status first = Status::Ok();
  for (const json& t : List(rec, "tasks")) {
    const int64_t id = Int(t, "id");
    listed.insert(id);
    if (tasks_done_.count(id)) continue;
    const std::string kind = Str(t, "kind");
    const int gpu = static_cast<int>(Int(t, "gpu", -1));
    auto* sim = dynamic_cast<SimDeviceBackend*>(devices_.get());
    json result;
    if (kind == "inspect") {
      auto inv = devices_->Discover();
      if (inv.ok()) {
        std::lock_guard<std::mutex> lock(labels_mu_);  // MetricsText reads it from other threads
        inventory_ = *inv;
        inventory_.node.name = NodeId(options_.node);
      }
      result = {{"succeeded", inv.ok()}, {"inventory", json::parse(InventoryReport())}};
      if (!inv.ok()) result["message"] = inv.status().message();
    } else if (kind == "burn-in") {
      bool passed = false;
      json check = json::parse(BurnIn(gpu, &passed));
      const bool builtin_burn = options_.gpu_burn_seconds > 0 && devices_->Kind() == "nvml";
      if (!passed ||
          (options_.dcgmi.empty() && options_.nccl_all_reduce.empty() && !builtin_burn)) {
        // The built-in check alone, or its failure (a GPU off the bus needs no diagnostic).
        result = {{"succeeded", true}, {"burnIn", check}};
      } else {
        auto tools = ToolBurnIn(id, gpu);
        if (!tools) continue;  // still running; the next poll looks again
        result = json::parse(*tools);
      }
    } else if (kind == "reset-gpu" || kind == "reboot-node") {
      if (sim) {
        // The simulated hardware's side: a reset or reboot clears volatile ECC counters and
        // brings a GPU that fell off the bus back.
        Status st = sim->Repair(kind == "reset-gpu" ? gpu : -1);
        result = {{"succeeded", st.ok()}, {"message", st.ok() ? "done" : st.message()}};
        ecc_reported_.clear();
        lost_reported_.clear();
      } else {
        result = {{"succeeded", false},
                  {"message", kind + " is not performed by this agent on real GPUs"}};
      }
    } else if (kind == "restart-app") {
      // The workload's pods on this GPU are stopped at once and, their binding being current,
      // started again by the next round.
      const std::string workload = Str(t, "workload");
      int restarted = 0;
      for (const auto& [key, plan] : running_devices_) {
        if (key.rfind(workload + "/", 0) != 0) continue;
        if (gpu >= 0 && !plan.count(gpu)) continue;
        launcher_->Stop(key, 0, now);
        ++restarted;
      }
      result = {{"succeeded", true},
                {"message", std::to_string(restarted) + " pod(s) of " + workload + " restarted"}};
    } else if (kind == "inject") {
      // `fabctl debug inject`: a fault for the simulated devices; real GPUs take none.
      FaultInjection fault;
      fault.node = NodeId(options_.node);
      fault.xid = static_cast<int>(Int(t, "xid"));
      fault.gpu = gpu;
      fault.ecc_double_bit = Int(t, "eccDoubleBit", -1);
      fault.kill = Field(t, "kill") == true;
      Status st = sim ? sim->Inject(fault, now)
                      : FailedPrecondition("node " + options_.node +
                                           " has real GPUs: faults are injected only into "
                                           "simulated devices");
      result = {{"succeeded", st.ok()}, {"message", st.ok() ? "injected" : st.message()}};
    } else {
      continue;  // repair: people's work, reported by an admin
    }
    auto post = client_->Do(
        "POST", std::string(kApi) + "/nodes/" + options_.node + "/tasks/" + std::to_string(id),
        result.dump());
    Status st = Check(post, options_.node, "report task");
    if (st.ok()) {
      tasks_done_.insert(id);
    } else if (first.ok()) {
      first = st;
    }
  }
  // Forget reported tasks the record no longer lists.
  for (auto it = tasks_done_.begin(); it != tasks_done_.end();) {
    it = listed.count(*it) ? std::next(it) : tasks_done_.erase(it);
  }
  return first;
}

Status NodeAgent::Tick() {
  const int64_t now = clock_.NowMs();
  Status first = Status::Ok();
  auto note = [&first](const Status& st) {
    if (!st.ok() && first.ok()) first = st;
  };
  auto* sim = dynamic_cast<SimDeviceBackend*>(devices_.get());
  if (sim && sim->Killed()) {
    // An injected `kill`: the node's agent is dead to the server (no heartbeat, no reports).
    return Status(StatusCode::kUnavailable,
                  "node " + options_.node + ": killed by an injected fault");
  }
  if (!registered_) {
    Status st = Register();
    if (!st.ok()) return st;
  }
  if (last_heartbeat_ms_ < 0 || now - last_heartbeat_ms_ >= options_.heartbeat_ms) {
    note(Heartbeat(now));
  }
  SimulateLoad();
  auto readings = devices_->Read();
  if (readings.ok()) {
    {
      std::lock_guard<std::mutex> lock(labels_mu_);
      last_readings_ = *readings;
    }
    note(ReportHealth(*readings, last_heartbeat_ms_ == now));
    if (last_sample_ms_ < 0 || now - last_sample_ms_ >= options_.sample_ms) {
      note(PushSamples(now, *readings));
    }
  } else {
    note(readings.status());
  }
  // Pods that ended: not to be started again under their binding, and counted once the
  // round's list has set up their workloads' outcomes (a pod that ended while the agent was
  // away included).
  for (const PodExit& e : launcher_->Poll(now)) {
    assignments_changed_ = true;  // list again: a stopped pod may have to start again
    auto region = shim_regions_.find(e.key);
    if (region != shim_regions_.end()) {
      unlink(region->second.c_str());
      unlink((region->second.substr(0, region->second.size() - 7) + ".conf").c_str());
      shim_regions_.erase(region);
      for (auto it = shim_busy_.lower_bound(e.key + "|");
           it != shim_busy_.end() && it->first.rfind(e.key + "|", 0) == 0;) {
        it = shim_busy_.erase(it);
      }
    }
    if (e.stopped) continue;  // the agent ended it: its binding is gone, nothing to report
    finished_[e.key] = e.binding;
    pending_exits_.push_back(e);
  }
  // List the assignments after a change the watch saw, when pods ended, or at the resync.
  Status reconciled = Status::Ok();
  if (assignments_changed_.exchange(false) || !pending_exits_.empty() || last_list_ms_ < 0 ||
      now - last_list_ms_ >= resync_ms_) {
    reconciled = Reconcile(now);
    if (reconciled.ok()) {
      last_list_ms_ = now;
    } else {
      assignments_changed_ = true;  // try again next round
    }
  }
  note(reconciled);
  if (reconciled.ok()) {
    for (const PodExit& e : pending_exits_) RecordExit(e);
    pending_exits_.clear();
  }
  // Output first: a workload reported ended has its pods' output shipped as far as it went.
  note(ShipLogs());
  note(SendOutcomes(now));
  note(DoTasks(now));
  return first;
}

}  // namespace fabrica
