// Launcher: runs a node's workload pods as supervised process groups and finds them again after
// the agent restarts.
//
// Each pod runs under a small monitor process, the leader of its own session and process
// group: the monitor forks the pod's command (stdout and stderr appended to the pod's log file),
// waits for it and writes its exit status to a file, so the outcome survives an agent that died
// meanwhile. Where a cgroup v2 tree is writable, the monitor first moves itself into its own
// cgroup (`<cgroup root>/<pod id>`, cpu.max and memory.max from the pod's request where those
// controllers are enabled), so the pod and everything it forks are limited and can be killed as
// one. Stop() sends SIGTERM to the group, then SIGKILL (and cgroup.kill) after the grace period.
//
// State (one JSON file in the state directory) records each pod's monitor pid and its start
// time in /proc, so that a restarted agent adopts exactly the processes it started and not a
// stranger that reused a pid. A pod that ended stays in it, with its exit, until the agent says
// the server has it (Forget): an agent that dies after Poll read the exit but before its report
// got through finds the exit again when it restarts (the first Poll returns it once more), rather
// than forgetting the pod ran and starting it again. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica {

struct LaunchSpec {
  std::string key;      // "<tenant>/<workload>/<pod>"
  std::string binding;  // the binding this run belongs to (the workload's scheduledTime)
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the whole environment of the pod
  int64_t cpu_milli = 0;                   // 0: no CPU limit
  int64_t memory_mib = 0;                  // 0: no memory limit
  std::string cpus;  // CPU list to pin the pod to ("0-47,96-143"), e.g. its GPUs' NUMA node's
};

// Parses a Linux CPU list ("0-3,8,10-11") into CPU numbers; InvalidArgument naming the part.
Result<std::vector<int>> ParseCpuList(const std::string& list);

struct PodProcess {
  std::string key;
  std::string binding;
  pid_t pid = -1;  // the monitor: leader of the pod's process group
  uint64_t start_ticks = 0;
  std::string log_path;
  std::string exit_path;
  std::string cgroup;  // "" when not in a cgroup of its own
  int64_t started_ms = 0;
  int64_t stop_deadline_ms = -1;  // SIGKILL due then (a stop is in progress)
};

struct PodExit {
  std::string key;
  std::string binding;
  int exit_code = -1;    // when it exited
  int signal = 0;        // when a signal ended it
  bool stopped = false;  // the agent stopped it (Stop)
  bool lost = false;     // its monitor vanished without a status (killed from outside)
  std::string log_path;
};

struct LauncherOptions {
  std::string state_dir;    // state file, exit files, logs/
  std::string cgroup_root;  // cgroup v2 directory to create pods' cgroups in; "" none
};

class Launcher {
 public:
  explicit Launcher(LauncherOptions options);

  // Reads the state file and keeps the pods whose monitor still runs (same pid, same start
  // time) or which exited while the agent was away (their exit file is read by Poll).
  Status Load();
  Status Launch(const LaunchSpec& spec, int64_t now_ms);
  // Starts stopping `key`: SIGTERM now, SIGKILL once `grace_ms` has passed (see Poll).
  void Stop(const std::string& key, int64_t grace_ms, int64_t now_ms);
  // Reaps, sends due SIGKILLs, and returns the pods that ended since the last call (the first
  // call after Load also those that ended before it and were never forgotten).
  std::vector<PodExit> Poll(int64_t now_ms);
  // Drops the exits of pods `keys` (they ended): the server has them, or no longer needs
  // them. One write of the state file, and any exit file left of them goes too.
  void Forget(const std::vector<std::string>& keys);
  const std::map<std::string, PodProcess>& pods() const { return pods_; }  // running or stopping
  const std::map<std::string, PodExit>& ended() const { return ended_; }   // not yet forgotten
  // Why limits are or are not enforced, for the agent's log and Node status.
  const std::string& cgroup_note() const { return cgroup_note_; }
  std::string LogPath(const std::string& key) const;
  std::string ExitPath(const std::string& key) const;  // where a pod's monitor writes its exit

 private:
  Status Save() const;

  LauncherOptions options_;
  std::map<std::string, PodProcess> pods_;
  std::map<std::string, PodExit> ended_;
  std::vector<std::string> loaded_ended_;  // read by Load, returned by the next Poll
  std::string cgroup_note_;
  bool cgroup_cpu_ = false;
  bool cgroup_memory_ = false;
};

// A pod key ("tenant/workload/pod") as one file name ('/' becomes '_'; names have no '_').
std::string PodFileId(const std::string& key);

// The process's start time in clock ticks since boot (/proc/PID/stat field 22); 0 if it is
// gone or a zombie.
uint64_t ProcessStartTicks(pid_t pid);

}  // namespace fabrica
