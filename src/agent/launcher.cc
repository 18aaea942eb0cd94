#include "agent/launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fabrica {
namespace {

using json = nlohmann::json;

bool Exists(const std::string& path) {
  struct stat sb;
  return stat(path.c_str(), &sb) == 0;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteSmallFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// The executable `name` resolves to along PATH (done before fork: nothing after fork may
// allocate).
std::string ResolveExecutable(const std::string& name, const std::string& path_env) {
  if (name.find('/') != std::string::npos) return name;
  std::stringstream ss(path_env.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_env);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Async-signal-safe helpers for the forked monitor.
void WriteAll(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}
void WriteStr(int fd, const char* s) { WriteAll(fd, s, strlen(s)); }
void WriteInt(int fd, long v) {
  char buf[24];
  int i = sizeof(buf);
  bool neg = v < 0;
  unsigned long u = neg ? -static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u > 0);
  if (neg) buf[--i] = '-';
  WriteAll(fd, buf + i, sizeof(buf) - i);
}
void CloseFrom(int lowest) {
  const long max_fd = sysconf(_SC_OPEN_MAX);
  for (long fd = lowest; fd < (max_fd > 0 ? std::min(max_fd, 65536L) : 1024L); ++fd) {
    close(static_cast<int>(fd));
  }
}
void DefaultSignals() {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT, SIGCHLD}) sigaction(s, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace

Result<std::vector<int>> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const size_t dash = part.find('-');
    try {
      size_t used = 0;
      const int lo = std::stoi(part.substr(0, dash), &used);
      int hi = lo;
      if (dash != std::string::npos) hi = std::stoi(part.substr(dash + 1), &used);
      if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) throw std::out_of_range("");
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    } catch (...) {
      return InvalidArgument("CPU list '" + list + "': bad part '" + part + "'");
    }
  }
  return cpus;
}

std::string PodFileId(const std::string& key) {
  std::string id = key;
  std::replace(id.begin(), id.end(), '/', '_');
  return id;
}

uint64_t ProcessStartTicks(pid_t pid) {
  std::string stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  // Field 2 (comm) may hold spaces and parentheses: fields resume after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::stringstream ss(stat.substr(close + 2));
  std::string field;
  // A zombie has ended: it only waits for a parent (not us, if adopted) to reap it.
  if (stat.size() > close + 2 && (stat[close + 2] == 'Z' || stat[close + 2] == 'X')) return 0;
  // After comm: field 3 (state) ... field 22 (starttime) is the 20th from here.
  for (int i = 3; i <= 22; ++i) {
    if (!(ss >> field)) return 0;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return 0;
  }
}

Launcher::Launcher(LauncherOptions options) : options_(std::move(options)) {
  mkdir(options_.state_dir.c_str(), 0700);
  mkdir((options_.state_dir + "/logs").c_str(), 0700);
  if (options_.cgroup_root.empty()) {
    cgroup_note_ = "no cgroup root: CPU and memory limits are not enforced";
    return;
  }
  mkdir(options_.cgroup_root.c_str(), 0755);
  if (!Exists(options_.cgroup_root + "/cgroup.procs")) {
    cgroup_note_ = "cgroup root " + options_.cgroup_root +
                   " is not a writable cgroup v2 directory: limits are not enforced";
    options_.cgroup_root.clear();
    return;
  }
  // Ask for the controllers in the root's subtree (may be refused: then limits are advisory).
  const std::string available = ReadSmallFile(options_.cgroup_root + "/cgroup.controllers");
  for (const char* c : {"cpu", "memory"}) {
    if (available.find(c) != std::string::npos) {
      WriteSmallFile(options_.cgroup_root + "/cgroup.subtree_control", std::string("+") + c);
    }
  }
  const std::string enabled = ReadSmallFile(options_.cgroup_root + "/cgroup.subtree_control");
  cgroup_cpu_ = enabled.find("cpu") != std::string::npos;
  cgroup_memory_ = enabled.find("memory") != std::string::npos;
  cgroup_note_ = "pods run in cgroups under " + options_.cgroup_root + "; cpu.max " +
                 (cgroup_cpu_ ? "enforced" : "not available (cpu controller not enabled)") +
                 ", memory.max " +
                 (cgroup_memory_ ? "enforced" : "not available (memory controller not enabled)");
}

std::string Launcher::LogPath(const std::string& key) const {
  return options_.state_dir + "/logs/" + PodFileId(key) + ".log";
}

std::string Launcher::ExitPath(const std::string& key) const {
  return options_.state_dir + "/" + PodFileId(key) + ".exit";
}

Status Launcher::Save() const {
  json pods = json::array();
  for (const auto& [key, p] : pods_) {
    pods.push_back({{"key", p.key},
                    {"binding", p.binding},
                    {"pid", p.pid},
                    {"startTicks", p.start_ticks},
                    {"log", p.log_path},
                    {"exit", p.exit_path},
                    {"cgroup", p.cgroup},
                    {"startedMs", p.started_ms},
                    {"stopDeadlineMs", p.stop_deadline_ms}});
  }
  json ended = json::array();
  for (const auto& [key, e] : ended_) {
    ended.push_back({{"key", e.key},
                     {"binding", e.binding},
                     {"exitCode", e.exit_code},
                     {"signal", e.signal},
                     {"stopped", e.stopped},
                     {"lost", e.lost},
                     {"log", e.log_path}});
  }
  const std::string path = options_.state_dir + "/pods.json";
  if (!WriteSmallFile(path + ".tmp", json{{"pods", pods}, {"ended", ended}}.dump(1)) ||
      rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return Internal("cannot write " + path + ": " + strerror(errno));
  }
  return Status::Ok();
}

Status Launcher::Load() {
  const std::string path = options_.state_dir + "/pods.json";
  if (!Exists(path)) return Status::Ok();
  json doc = json::parse(ReadSmallFile(path), nullptr, false);
  if (!doc.is_object() || !doc["pods"].is_array()) {
    return InvalidArgument(path + ": not a pod state file");
  }
  for (const json& j : doc["pods"]) {
    PodProcess p;
    p.key = j.value("key", "");
    p.binding = j.value("binding", "");
    p.pid = j.value("pid", -1);
    p.start_ticks = j.value("startTicks", uint64_t{0});
    p.log_path = j.value("log", "");
    p.exit_path = j.value("exit", "");
    p.cgroup = j.value("cgroup", "");
    p.started_ms = j.value("startedMs", int64_t{0});
    p.stop_deadline_ms = j.value("stopDeadlineMs", int64_t{-1});
    if (p.key.empty() || p.pid <= 0) continue;
    // A pid now used by another process is not ours: keep the record only to report the pod
    // (exit file or lost), never to signal that pid.
    if (ProcessStartTicks(p.pid) != p.start_ticks) p.pid = 0;
    pods_[p.key] = p;
  }
  if (doc.contains("ended") && !doc["ended"].is_array())
    return InvalidArgument(path + ": ended: expected a list");
  for (const json& j : doc.value("ended", json::array())) {
    if (!j.is_object()) continue;
    PodExit e;
    e.key = j.value("key", "");
    e.binding = j.value("binding", "");
    e.exit_code = j.value("exitCode", -1);
    e.signal = j.value("signal", 0);
    e.stopped = j.value("stopped", false);
    e.lost = j.value("lost", false);
    e.log_path = j.value("log", "");
    if (e.key.empty() || pods_.count(e.key)) continue;
    loaded_ended_.push_back(e.key);
    ended_[e.key] = std::move(e);
  }
  return Save();
}

Status Launcher::Launch(const LaunchSpec& spec, int64_t now_ms) {
  if (pods_.count(spec.key)) return FailedPrecondition("pod " + spec.key + " is already running");
  // (An earlier run's exit is not this one's.)
  if (ended_.erase(spec.key)) (void)Save();
  if (spec.argv.empty()) return InvalidArgument("pod " + spec.key + ": empty command");
  const auto path_it = spec.env.find("PATH");
  const std::string exe =
      ResolveExecutable(spec.argv[0], path_it == spec.env.end() ? "" : path_it->second);
  PodProcess p;
  p.key = spec.key;
  p.binding = spec.binding;
  p.log_path = LogPath(spec.key);
  p.exit_path = ExitPath(spec.key);
  p.started_ms = now_ms;
  unlink(p.exit_path.c_str());
  if (!options_.cgroup_root.empty()) {
    p.cgroup = options_.cgroup_root + "/" + PodFileId(spec.key);
    rmdir(p.cgroup.c_str());  // a leftover of an earlier run, if empty
    if (mkdir(p.cgroup.c_str(), 0755) != 0 && errno != EEXIST) {
      return Internal("cannot create cgroup " + p.cgroup + ": " + strerror(errno));
    }
    if (cgroup_cpu_ && spec.cpu_milli > 0) {
      // cpu.max: quota and period in microseconds; 1000m = one CPU = 100000 per 100000.
      WriteSmallFile(p.cgroup + "/cpu.max", std::to_string(spec.cpu_milli * 100) + " 100000");
    }
    if (cgroup_memory_ && spec.memory_mib > 0) {
      WriteSmallFile(p.cgroup + "/memory.max", std::to_string(spec.memory_mib << 20));
    }
  }

  // Everything the children need, built before fork.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string procs = p.cgroup.empty() ? "" : p.cgroup + "/cgroup.procs";
  const std::string exit_tmp = p.exit_path + ".tmp";
  const std::string missing = "fabrica: " + spec.argv[0] + ": command not found\n";
  // CPU pinning (the pod's GPUs' NUMA node), set in the monitor and inherited by the pod; CPUs
  // this process may not use are left out, and an empty result pins nothing.
  cpu_set_t pin;
  CPU_ZERO(&pin);
  bool pinned = false;
  if (!spec.cpus.empty()) {
    ASSIGN_OR_RETURN(std::vector<int> cpus, ParseCpuList(spec.cpus));
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      for (int c : cpus) {
        if (CPU_ISSET(c, &allowed)) {
          CPU_SET(c, &pin);
          pinned = true;
        }
      }
    }
  }

  const pid_t monitor = fork();
  if (monitor < 0) return Internal(std::string("fork: ") + strerror(errno));
  if (monitor == 0) {
    // The monitor: session and group leader, in the pod's cgroup, deaf to the group's SIGTERM
    // (it must outlive the pod to record its status), with nothing of the agent's open.
    setsid();
    DefaultSignals();
    if (pinned) sched_setaffinity(0, sizeof pin, &pin);
    if (!procs.empty()) {
      int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        WriteStr(fd, "0");
        close(fd);
      }
    }
    CloseFrom(3);
    struct sigaction ignore;
    memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaction(s, &ignore, nullptr);
    const pid_t child = fork();
    if (child == 0) {
      DefaultSignals();
      int log = open(p.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null >= 0) dup2(null, 0);
      if (log >= 0) {
        dup2(log, 1);
        dup2(log, 2);
      }
      if (!exe.empty()) execve(exe.c_str(), argv.data(), envp.data());
      WriteStr(2, missing.c_str());
      _exit(127);
    }
    int status = 0;
    long code = -1, sig = 0;
    if (child > 0) {
      while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      if (WIFEXITED(status)) code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) sig = WTERMSIG(status);
    }
    int fd = open(exit_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      WriteStr(fd, sig ? "signal " : "exit ");
      WriteInt(fd, sig ? sig : code);
      WriteStr(fd, "\n");
      fsync(fd);
      close(fd);
      rename(exit_tmp.c_str(), p.exit_path.c_str());
    }
    _exit(0);
  }
  p.pid = monitor;
  // The monitor's start time identifies it across agent restarts; retry while /proc catches up.
  for (int i = 0; i < 100 && p.start_ticks == 0; ++i) p.start_ticks = ProcessStartTicks(monitor);
  pods_[p.key] = p;
  return Save();
}

void Launcher::Stop(const std::string& key, int64_t grace_ms, int64_t now_ms) {
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  PodProcess& p = it->second;
  if (p.stop_deadline_ms >= 0) return;  // already stopping
  p.stop_deadline_ms = now_ms + std::max<int64_t>(0, grace_ms);
  if (p.pid > 0) kill(-p.pid, SIGTERM);
  (void)Save();
}

std::vector<PodExit> Launcher::Poll(int64_t now_ms) {
  std::vector<PodExit> out;
  for (const std::string& key : loaded_ended_)
    if (auto it = ended_.find(key); it != ended_.end()) out.push_back(it->second);
  loaded_ended_.clear();
  bool changed = false;
  std::vector<std::string> exit_files;  // removed once the exits are in the state file
  for (auto it = pods_.begin(); it != pods_.end();) {
    PodProcess& p = it->second;
    if (p.pid > 0) {
      int status;
      waitpid(p.pid, &status, WNOHANG);  // our own monitor (an adopted one is init's to reap)
    }
    const bool alive = p.pid > 0 && ProcessStartTicks(p.pid) == p.start_ticks;
    if (alive) {
      if (p.stop_deadline_ms >= 0 && now_ms >= p.stop_deadline_ms) {
        kill(-p.pid, SIGKILL);
        if (!p.cgroup.empty()) WriteSmallFile(p.cgroup + "/cgroup.kill", "1");
      }
      ++it;
      continue;
    }
    // (Ended between the reap above and the check: reaped now, so that no zombie of ours stays.)
    if (p.pid > 0) {
      int status;
      waitpid(p.pid, &status, WNOHANG);
    }
    PodExit e;
    e.key = p.key;
    e.binding = p.binding;
    e.log_path = p.log_path;
    e.stopped = p.stop_deadline_ms >= 0;
    std::string status = ReadSmallFile(p.exit_path);
    std::stringstream ss(status);
    std::string kind;
    long value = 0;
    if (ss >> kind >> value) {
      if (kind == "signal") {
        e.signal = static_cast<int>(value);
      } else {
        e.exit_code = static_cast<int>(value);
      }
    } else {
      e.lost = true;
    }
    if (!p.cgroup.empty()) {
      // Nothing of the pod may outlive it (a child that left its process group included).
      WriteSmallFile(p.cgroup + "/cgroup.kill", "1");
      rmdir(p.cgroup.c_str());
    }
    exit_files.push_back(p.exit_path);
    ended_[e.key] = e;
    out.push_back(e);
    it = pods_.erase(it);
    changed = true;
  }
  // (Should the state not be written, the exit files stay, and a restarted agent reads them.)
  if (changed && Save().ok())
    for (const std::string& path : exit_files) unlink(path.c_str());
  return out;
}

void Launcher::Forget(const std::vector<std::string>& keys) {
  size_t dropped = 0;
  for (const std::string& key : keys) dropped += ended_.erase(key);
  if (dropped == 0 || !Save().ok()) return;
  // (Left behind where the state could not be written when the exit was read.)
  for (const std::string& key : keys)
    if (!pods_.count(key)) unlink(ExitPath(key).c_str());
}

}  // namespace fabrica
