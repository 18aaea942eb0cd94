// NodeAgent: `fabrica agent`, the server's hands on one node.
//
// Every round (Tick) it: registers the node with the inventory its DeviceBackend discovered
// (once); renews the node's Lease (the heartbeat); reports XIDs, ECC counters, temperature and
// power to the server's health controller; pushes utilization samples for metering every
// sample period; lists the workloads assigned to its node (the server shows a node identity
// only those) and reconciles them with the pods the Launcher runs: a pod assigned here that
// does not run is started, a running pod whose binding is gone (deleted, requeued, moved) is
// stopped with its grace period; a pod that ended is reported (phase, exitCode, message) if its
// binding is still current; and it ships new log output to the server. On start it adopts the
// pods a previous agent left running (Launcher::Load) and, on its first successful list, stops
// those no longer assigned to it, so nothing runs or is metered twice.
//
// Pods get CUDA_VISIBLE_DEVICES (the assigned GPUs' UUIDs, MIG instances' UUIDs where the
// backend knows them), FABRICA_* variables, and, for a fractional share, the vGPU shim preloaded
// with its limits (src/shim/). Without the shim a fractional pod is refused, never run uncapped.
// Not thread-safe except MetricsText(), which the metrics server calls from its threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "agent/device_backend.h"
#include "agent/launcher.h"
#include "client/http_client.h"
#include "control/clock.h"

namespace fabrica {

struct AgentOptions {
  ClientOptions client;  // server, CA, the node's token
  std::string node;
  std::string state_dir = "fabrica-agent";
  std::string cgroup_root;  // "" : no cgroups
  int64_t heartbeat_ms = 10'000;
  int lease_seconds = 40;
  int64_t sample_ms = 30'000;
  int64_t grace_ms = 30'000;  // SIGTERM to SIGKILL
  // Run pods' commands (true), or stand-ins that sleep for the declared duration (false: a
  // dry-run node for demos whose commands do not exist here).
  bool exec_commands = true;
  std::string shim_library;  // path of libfabrica-vgpu.so; "" : fractional pods are refused
  // Burn-in tools; "" : not run. Without either, burn-in is the built-in check only.
  std::string dcgmi;  // runs `dcgmi diag -r <dcgm_level> -j [-i GPU]`
  int dcgm_level = 2;
  std::string nccl_all_reduce;  // runs `all_reduce_perf -b 8 -e 8G -f 2 -g <GPUs>` (node burn-in)
  // The built-in single-GPU burn (agent/gpu_stress.h) on real GPUs; 0 seconds: not run.
  double gpu_burn_seconds = 10;
  int64_t gpu_burn_mib = 1024;
};

class NodeAgent {
 public:
  NodeAgent(AgentOptions options, std::unique_ptr<DeviceBackend> devices, const Clock& clock);
  ~NodeAgent();

  // Discovers the devices and adopts pods left by a previous run. With `watch`, a thread
  // watches the workloads assigned to this node, so that a round lists them only after a
  // change (or every `resync_ms`) and WaitForWork returns as soon as one arrives.
  Status Start(bool watch = false);
  // Sleeps up to `ms`, or until the watch reports a change (then returns true).
  bool WaitForWork(int64_t ms);
  // One round; the first error is returned after the round's other steps ran.
  Status Tick();
  // The dcgm-exporter page of this node's GPUs, labelled with the workloads using them.
  std::string MetricsText() const;
  DeviceBackend& devices() { return *devices_; }
  const Inventory& inventory() const { return inventory_; }
  const Launcher& launcher() const { return *launcher_; }

 private:
  struct PodPlan;
  Status Register();
  Status Heartbeat(int64_t now);
  Status ReportHealth(const std::vector<GpuReading>& readings, bool with_gauges);
  Status PushSamples(int64_t now, const std::vector<GpuReading>& readings);
  Status Reconcile(int64_t now);
  // Counts a pod's end into its workload's outcome; SendOutcomes reports complete ones.
  void RecordExit(const PodExit& exit);
  Status SendOutcomes(int64_t now);
  // The shim's configuration for a fractional pod, and its environment.
  Status PrepareShim(const PodPlan& plan, LaunchSpec* spec);
  // Simulated devices: busy in proportion to the shares running pods hold.
  void SimulateLoad();
  // The health controller's tasks for this node (its health record's `tasks`): inspection,
  // GPU reset, reboot, burn-in. Results go to POST .../nodes/N/tasks/ID.
  Status DoTasks(int64_t now);
  std::string InventoryReport() const;
  std::string BurnIn(int gpu, bool* passed);
  // Starts the burn-in tools for task `id` on a thread, or returns the finished run's result
  // (the body to post); nullopt while it runs.
  std::optional<std::string> ToolBurnIn(int64_t id, int gpu);
  Status ShipLogs();
  Result<LaunchSpec> MakeLaunchSpec(const PodPlan& plan);

  AgentOptions options_;
  std::unique_ptr<DeviceBackend> devices_;
  const Clock& clock_;
  std::unique_ptr<HttpClient> client_;
  std::unique_ptr<Launcher> launcher_;
  Inventory inventory_;
  bool registered_ = false;
  int64_t last_heartbeat_ms_ = -1;
  int64_t last_sample_ms_ = -1;
  std::map<int, int64_t> ecc_reported_;  // GPU -> double-bit counter last reported
  std::set<int> lost_reported_;
  // Pods that ended under their current binding: key -> binding (not started again).
  std::map<std::string, std::string> finished_;
  // Per workload ("tenant/name") and binding: outcomes of its local pods so far.
  struct Outcome {
    std::string binding;
    int failed = 0;
    std::vector<std::string> succeeded;  // its pods here that exited 0
    size_t reported = 0;                 // ... of which the server has been told
    std::string message;
    int exit_code = 0;
    bool cannot_run = false;
    bool sent = false;
  };
  std::map<std::string, Outcome> outcomes_;
  std::map<std::string, std::string> shim_regions_;  // pod key -> its shim usage region
  std::map<std::string, int64_t> shim_busy_;         // "pod key|uuid" -> busy ns at the last sample
  std::vector<PodExit> pending_exits_;
  int64_t last_task_poll_ms_ = -1;
  // The assignment watch.
  void Watch();
  std::thread watch_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> assignments_changed_{true};
  std::mutex wake_mu_;
  std::condition_variable wake_;
  int64_t last_list_ms_ = -1;
  int64_t resync_ms_ = 1000;  // without a watch, every round lists
  struct BurnInJob;
  std::shared_ptr<BurnInJob> burn_in_;  // the tools' run in progress (shared with its thread)
  std::set<int64_t> tasks_done_;  // reported; the record drops them on the server's next round  //
                                  // counted after the next successful list
  // Where each pod's log stands: the local file, how much of it the server has, and the
  // server's offset of the file's first byte (a pod run again appends to its file; a pod that
  // ran on another node before has output there already). Saved in the state directory, so a
  // restarted agent neither resends nor skips. A file is removed once shipped and no longer
  // assigned here.
  struct LogCursor {
    std::string file;
    int64_t local = 0;
    int64_t base = -1;  // unknown until the server says its size
  };
  std::map<std::string, LogCursor> logs_;
  std::set<std::string> wanted_keys_;  // pods assigned here at the last list
  void SaveLogCursors() const;
  // For /metrics and the sim backend's load; also guards writes of inventory_ after Start (the
  // main thread reads it without the lock, the metrics threads with it).
  mutable std::mutex labels_mu_;
  std::map<std::string, std::map<std::string, std::string>> gpu_labels_;  // device -> labels
  std::map<std::string, int64_t> gpu_milli_;
  std::map<std::string, std::set<int>>
      running_devices_;  // pod key -> GPU indexes it holds  // GPU or MIG UUID -> milli-GPU running
                         // pods hold
  std::vector<GpuReading> last_readings_;
};

}  // namespace fabrica
