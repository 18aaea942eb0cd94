// The vGPU shim (libfabrica-vgpu.so) against the fake libcuda.so.1 / libnvidia-ml.so.1: memory
// caps across processes, memory queries, a killed lock holder, failing closed, compute throttling
// on the fake's virtual device, and lookups through dlsym and cuGetProcAddress.
//
// Each test starts shim_probe processes (see shim_probe.cc) with the shim preloaded and talks to
// them line by line. Nothing here depends on wall-clock speed: the throttling tests run on the
// fake's virtual clock, and timeouts only guard against hangs.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../fakecuda/fake_device.h"
#include "gtest/gtest.h"
#include "shim/shim_config.h"

namespace fabrica {
namespace {

constexpr int64_t kGiB = 1LL << 30;
const char* kFakeUuid0 = "GPU-face0000-0000-0000-0000-000000000000";

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/fabrica-shim-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A shim_probe process.
class Probe {
 public:
  // `env` is the whole environment besides PATH and the library path to the fakes.
  Probe(std::map<std::string, std::string> env, const std::string& stderr_path = "/dev/null") {
    env["LD_LIBRARY_PATH"] = FABRICA_FAKE_LIB_DIR;
    if (!env.count("LD_PRELOAD")) env["LD_PRELOAD"] = FABRICA_SHIM_PATH;
    if (env["LD_PRELOAD"].empty()) env.erase("LD_PRELOAD");
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) std::abort();
    std::vector<std::string> strings;
    for (const auto& [key, value] : env) strings.push_back(key + "=" + value);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      dup2(err, 2);
      std::vector<char*> envp;
      for (std::string& s : strings) envp.push_back(s.data());
      envp.push_back(nullptr);
      char* argv[] = {const_cast<char*>(FABRICA_PROBE_PATH), nullptr};
      execve(FABRICA_PROBE_PATH, argv, envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in_ = in[1];
    out_ = out[0];
  }
  ~Probe() {
    close(in_);
    close(out_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void Send(const std::string& command) {
    const std::string line = command + "\n";
    ASSERT_EQ(write(in_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }

  // The next line of output; "" after `timeout_ms` (a hang guard, or a check that nothing came).
  std::string ReadLine(int timeout_ms = 60000) {
    for (;;) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      pollfd p = {out_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return "";
      char chunk[4096];
      ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return "";
      buffer_.append(chunk, n);
    }
  }

  // Sends a command and returns the answer's words after the command name.
  std::vector<std::string> Call(const std::string& command) {
    Send(command);
    std::vector<std::string> words = Words(ReadLine());
    if (!words.empty()) words.erase(words.begin());
    return words;
  }
  std::string Rc(const std::string& command) {
    std::vector<std::string> words = Call(command);
    return words.empty() ? "<no answer>" : words[0];
  }

  int pid() const { return pid_; }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Closes stdin and waits for a normal exit.
  int Finish() {
    close(in_);
    in_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  int pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  std::string buffer_;
};

struct Container {
  std::string config_path;
  std::string region_path;
};

Container MakeContainer(const TempDir& dir, const std::string& name, int64_t memory_bytes,
                        int compute_permille = 1000, const std::string& uuid = kFakeUuid0) {
  ShimConfig config;
  config.container = name;
  config.region_path = dir.File(name + ".region");
  config.devices.push_back({uuid, memory_bytes, compute_permille});
  return {WriteFile(dir.File(name + ".conf"), FormatShimConfig(config)), config.region_path};
}

std::map<std::string, std::string> EnvFor(const Container& c) {
  return {{"FABRICA_VGPU_CONFIG", c.config_path}};
}

ContainerUsage Usage(const Container& c) {
  ContainerUsage usage;
  std::string error;
  EXPECT_TRUE(ReadShimRegion(c.region_path, &usage, &error)) << error;
  return usage;
}

// ---------------------------------------------------------------------------------------------
// The config format.

TEST(ShimConfig, FormatsAndParsesBack) {
  ShimConfig config;
  config.container = "team-a/job-7";
  config.region_path = "/dev/shm/fabrica-vgpu/team-a-job-7";
  config.devices.push_back({"GPU-12345678-1234-1234-1234-123456789abc", 10 * kGiB, 300});
  config.devices.push_back({"1", kGiB, 1000});
  ShimConfig parsed;
  std::string error;
  ASSERT_TRUE(ParseShimConfig(FormatShimConfig(config), &parsed, &error)) << error;
  EXPECT_EQ(parsed.container, config.container);
  EXPECT_EQ(parsed.region_path, config.region_path);
  ASSERT_EQ(parsed.devices.size(), 2u);
  EXPECT_EQ(parsed.devices[0].uuid, config.devices[0].uuid);
  EXPECT_EQ(parsed.devices[0].memory_limit_bytes, 10 * kGiB);
  EXPECT_EQ(parsed.devices[0].compute_permille, 300);
  EXPECT_EQ(parsed.devices[1].uuid, "1");
}

TEST(ShimConfig, NamesTheBadLineAndField) {
  const std::string head = "fabrica-vgpu-config 1\ncontainer c\nregion /dev/shm/r\n";
  struct Case {
    std::string text, expected;
  } cases[] = {
      {"", "no header"},
      {"fabrica-vgpu-config 2\n", "line 1: unsupported config version '2'"},
      {"container c\n", "line 1: expected the header"},
      {head, "no 'device' line"},
      {head + "device GPU-1 memory_bytes=10G compute_permille=300\n",
       "line 4: device: memory_bytes: not a non-negative integer: '10G'"},
      {head + "device GPU-1 memory_bytes=1 compute_permille=0\n",
       "line 4: device: compute_permille must be in 1..1000"},
      {head + "device GPU-1 memory_bytes=0 compute_permille=10\n",
       "line 4: device: memory_bytes must be positive"},
      {head + "device GPU-1 compute_permille=10 memory_bytes=1\n",
       "line 4: device: expected memory_bytes=N"},
      {head + "device GPU-1 memory_bytes=1\n", "line 4: device: expected 'device UUID"},
      {head + "container d\n", "line 4: container: given twice"},
      {head + "colour blue\n", "line 4: unknown key 'colour'"},
      {"fabrica-vgpu-config 1\ncontainer c\nregion relative\n", "line 3: region: not an absolute"},
      {head + "device GPU-1 memory_bytes=99999999999999999999 compute_permille=1\n",
       "not a non-negative integer"},
  };
  for (const Case& c : cases) {
    ShimConfig config;
    std::string error;
    EXPECT_FALSE(ParseShimConfig(c.text, &config, &error)) << c.text;
    EXPECT_NE(error.find(c.expected), std::string::npos) << "got: " << error;
  }
}

TEST(ShimConfig, ReadRegionNamesAMissingOrForeignFile) {
  TempDir dir;
  ContainerUsage usage;
  std::string error;
  EXPECT_FALSE(ReadShimRegion(dir.File("absent"), &usage, &error));
  EXPECT_NE(error.find("absent"), std::string::npos);
  WriteFile(dir.File("junk"), "not a region");
  EXPECT_FALSE(ReadShimRegion(dir.File("junk"), &usage, &error));
  EXPECT_NE(error.find("size"), std::string::npos) << error;
}

// ---------------------------------------------------------------------------------------------
// 1. Caps across the processes of one container.

TEST(Shim, CapIsSharedByTheContainersProcesses) {
  TempDir dir;
  Container c = MakeContainer(dir, "c1", 10 * kGiB);
  Probe a(EnvFor(c)), b(EnvFor(c));
  ASSERT_EQ(a.Rc("init"), "0");
  ASSERT_EQ(b.Rc("init"), "0");
  EXPECT_EQ(a.Rc("alloc " + std::to_string(6 * kGiB)), "0");
  EXPECT_EQ(b.Rc("alloc " + std::to_string(6 * kGiB)), "2");  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(b.Rc("alloc " + std::to_string(4 * kGiB)), "0");
  EXPECT_EQ(b.Rc("alloc 1"), "2");
  ContainerUsage usage = Usage(c);
  EXPECT_EQ(usage.container, "c1");
  EXPECT_EQ(usage.live_processes, 2);
  ASSERT_EQ(usage.devices.size(), 1u);
  EXPECT_EQ(usage.devices[0].uuid, kFakeUuid0);
  EXPECT_EQ(usage.devices[0].memory_used_bytes, 10 * kGiB);
  // Freeing in one process makes room for the other.
  EXPECT_EQ(a.Rc("free"), "0");
  EXPECT_EQ(b.Rc("alloc " + std::to_string(6 * kGiB)), "0");
  // A process that exits normally gives its share back too.
  EXPECT_EQ(b.Finish(), 0);
  EXPECT_EQ(a.Rc("alloc " + std::to_string(10 * kGiB)), "0");
  EXPECT_EQ(Usage(c).live_processes, 1);
}

TEST(Shim, EveryAllocationEntryPointIsCapped) {
  TempDir dir;
  Container c = MakeContainer(dir, "c1", kGiB);
  Probe p(EnvFor(c));
  ASSERT_EQ(p.Rc("init"), "0");
  for (const char* kind : {"v2", "pitch", "managed", "async", "async_ptsz", "pool", "pool_ptsz",
                           "create", "array", "array3d", "mipmap"}) {
    SCOPED_TRACE(kind);
    EXPECT_EQ(p.Rc(std::string("alloc_via ") + kind + " " + std::to_string(2 * kGiB)), "2");
    EXPECT_EQ(p.Rc(std::string("alloc_via ") + kind + " " + std::to_string(kGiB / 2)), "0");
    EXPECT_GE(Usage(c).devices[0].memory_used_bytes, kGiB / 2);
    EXPECT_EQ(p.Rc("free"), "0");
    EXPECT_EQ(Usage(c).devices[0].memory_used_bytes, 0);
  }
  // The 32-bit entry point too.
  EXPECT_EQ(p.Rc("alloc " + std::to_string(kGiB - 4096)), "0");
  EXPECT_EQ(p.Rc("alloc_via v1 8192"), "2");
}

// ---------------------------------------------------------------------------------------------
// 2. Memory queries report the cap.

TEST(Shim, MemoryQueriesReportTheCap) {
  TempDir dir;
  Container c = MakeContainer(dir, "c1", 10 * kGiB);
  Probe p(EnvFor(c));
  ASSERT_EQ(p.Rc("init"), "0");
  ASSERT_EQ(p.Rc("alloc " + std::to_string(3 * kGiB)), "0");
  const std::string cap = std::to_string(10 * kGiB), left = std::to_string(7 * kGiB),
                    used = std::to_string(3 * kGiB);
  EXPECT_EQ(p.Call("meminfo"), (std::vector<std::string>{"0", left, cap}));
  EXPECT_EQ(p.Call("totalmem"), (std::vector<std::string>{"0", cap}));
  EXPECT_EQ(p.Call("nvml"), (std::vector<std::string>{"0", cap, left, used, "0", cap, left, used}));
  // Without the shim the fake reports its whole 80 GiB.
  Probe bare(std::map<std::string, std::string>{{"LD_PRELOAD", ""}});
  ASSERT_EQ(bare.Rc("init"), "0");
  EXPECT_EQ(bare.Call("totalmem"), (std::vector<std::string>{"0", std::to_string(80 * kGiB)}));
}

// ---------------------------------------------------------------------------------------------
// 3. A process killed while holding the region lock blocks nobody, and its usage is reclaimed.

TEST(Shim, KilledLockHolderIsReclaimed) {
  TempDir dir;
  Container c = MakeContainer(dir, "c1", 10 * kGiB);
  Probe holder(EnvFor(c));
  ASSERT_EQ(holder.Rc("init"), "0");
  ASSERT_EQ(holder.Rc("alloc " + std::to_string(6 * kGiB)), "0");
  holder.Send("lock_and_stop");
  ASSERT_EQ(holder.ReadLine(), "locked");  // and now stopped, holding the lock

  Probe other(EnvFor(c));
  other.Send("init");  // joining the region needs the lock
  EXPECT_EQ(other.ReadLine(300), "") << "the lock was not held";
  holder.Kill();  // SIGKILL while stopped: the kernel drops its fcntl lock
  EXPECT_EQ(other.ReadLine(), "init 0");
  // The dead process's 6 GiB are reclaimed on the way.
  EXPECT_EQ(other.Rc("alloc " + std::to_string(8 * kGiB)), "0");
  ContainerUsage usage = Usage(c);
  EXPECT_EQ(usage.live_processes, 1);
  EXPECT_EQ(usage.devices[0].memory_used_bytes, 8 * kGiB);
}

TEST(Shim, DeadProcessIsReclaimedWhenTheCapWouldBePassed) {
  TempDir dir;
  Container c = MakeContainer(dir, "c1", 10 * kGiB);
  Probe a(EnvFor(c)), b(EnvFor(c));
  ASSERT_EQ(a.Rc("init"), "0");
  ASSERT_EQ(b.Rc("init"), "0");
  ASSERT_EQ(a.Rc("alloc " + std::to_string(9 * kGiB)), "0");
  a.Kill();
  EXPECT_EQ(Usage(c).devices[0].memory_used_bytes, 9 * kGiB);  // nobody has looked yet
  EXPECT_EQ(b.Rc("alloc " + std::to_string(9 * kGiB)), "0");
  EXPECT_EQ(Usage(c).live_processes, 1);
}

// ---------------------------------------------------------------------------------------------
// 4. Failing closed.

TEST(Shim, MissingConfigFailsClosed) {
  TempDir dir;
  const std::string log = dir.File("stderr");
  Probe p({}, log);
  EXPECT_EQ(p.Rc("init"), "3");  // CUDA_ERROR_NOT_INITIALIZED
  EXPECT_EQ(p.Rc("alloc 1"), "3");
  EXPECT_EQ(p.Call("meminfo")[0], "3");
  EXPECT_EQ(p.Call("nvml")[0], "4");  // NVML_ERROR_NO_PERMISSION
  EXPECT_EQ(p.Rc("alloc_via gpa_v2 1"), "3");
  EXPECT_EQ(p.Finish(), 0);
  const std::string message = ReadFile(log);
  EXPECT_NE(message.find("fabrica-vgpu: refusing GPU access (fail closed): FABRICA_VGPU_CONFIG is "
                         "not set"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), message.size() - 1) << "one message, once: " << message;
}

TEST(Shim, CorruptConfigFailsClosed) {
  TempDir dir;
  const std::string log = dir.File("stderr");
  const std::string config =
      WriteFile(dir.File("bad.conf"),
                "fabrica-vgpu-config 1\ncontainer c\nregion /tmp/x\ndevice GPU-1 memory_bytes=lots "
                "compute_permille=5\n");
  Probe p({{"FABRICA_VGPU_CONFIG", config}}, log);
  EXPECT_EQ(p.Rc("init"), "3");
  EXPECT_EQ(p.Rc("alloc 1"), "3");
  EXPECT_EQ(p.Finish(), 0);
  const std::string message = ReadFile(log);
  EXPECT_NE(message.find("bad config: " + config + ": line 4: device: memory_bytes"),
            std::string::npos)
      << message;

  Probe absent({{"FABRICA_VGPU_CONFIG", dir.File("absent.conf")}}, log);
  EXPECT_EQ(absent.Rc("init"), "3");
  WriteFile(dir.File("truncated.region"), "xx");
  Container c = MakeContainer(dir, "truncated", kGiB);
  Probe bad_region(EnvFor(c), log);
  EXPECT_EQ(bad_region.Rc("init"), "3");
  EXPECT_EQ(bad_region.Finish(), 0);
  EXPECT_NE(ReadFile(log).find("(another layout version?)"), std::string::npos) << ReadFile(log);
}

TEST(Shim, DeviceOutsideTheConfigIsRefused) {
  TempDir dir;
  const std::string log = dir.File("stderr");
  Container c = MakeContainer(dir, "c1", kGiB);  // device 0 only
  auto env = EnvFor(c);
  env["FAKECUDA_DEVICE_COUNT"] = "2";
  Probe p(env, log);
  ASSERT_EQ(p.Rc("init"), "0");
  EXPECT_EQ(p.Rc("alloc 1024"), "0");
  ASSERT_EQ(p.Rc("device 1"), "0");
  EXPECT_EQ(p.Rc("alloc 1024"), "800");  // CUDA_ERROR_NOT_PERMITTED
  EXPECT_EQ(p.Finish(), 0);
  EXPECT_NE(ReadFile(log).find("device 1 (GPU-face0000-0000-0000-0000-000000000001) is not in"),
            std::string::npos)
      << ReadFile(log);
}

// ---------------------------------------------------------------------------------------------
// 5. Compute shares on the fake's virtual device.

struct Share {
  double fraction = 0;  // busy time / window
  int64_t busy_ns = 0;
  int kernels = 0;
};

// Shares per tag over [0, end of the first tag to finish], from the device log.
std::map<int, Share> SharesFromLog(const std::string& device_file) {
  int fd = open(device_file.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  void* map = mmap(nullptr, sizeof(fakecuda::DeviceFile), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  const auto* d = static_cast<const fakecuda::DeviceFile*>(map);
  std::map<int, int64_t> last_end;
  for (int64_t i = 0; i < d->log_count; ++i) {
    last_end[d->log[i].tag] = std::max(last_end[d->log[i].tag], d->log[i].end_ns);
  }
  int64_t window = INT64_MAX;
  for (const auto& [tag, end] : last_end) window = std::min(window, end);
  std::map<int, Share> shares;
  for (int64_t i = 0; i < d->log_count; ++i) {
    const fakecuda::LogEntry& e = d->log[i];
    Share& s = shares[e.tag];
    s.busy_ns += std::max<int64_t>(0, std::min(e.end_ns, window) - e.start_ns);
    ++s.kernels;
  }
  for (auto& [tag, s] : shares) s.fraction = static_cast<double>(s.busy_ns) / window;
  munmap(map, sizeof(fakecuda::DeviceFile));
  return shares;
}

std::map<std::string, std::string> ThrottleEnv(const Container& c, const std::string& device,
                                               int tag, int clients) {
  auto env = EnvFor(c);
  env["FABRICA_VGPU_CLOCK"] = "fake";
  env["FAKECUDA_DEVICE_FILE"] = device;
  env["FAKECUDA_TAG"] = std::to_string(tag);
  env["FAKECUDA_CLIENTS"] = std::to_string(clients);
  return env;
}

TEST(Shim, TwoContainersGetTheirComputeShares) {
  TempDir dir;
  const std::string device = dir.File("device");
  Container a = MakeContainer(dir, "a", kGiB, 300);
  Container b = MakeContainer(dir, "b", kGiB, 700);
  // Container a runs two processes that share its 30%; b one process.
  std::vector<std::unique_ptr<Probe>> probes;
  probes.push_back(std::make_unique<Probe>(ThrottleEnv(a, device, 1, 3)));
  probes.push_back(std::make_unique<Probe>(ThrottleEnv(a, device, 1, 3)));
  probes.push_back(std::make_unique<Probe>(ThrottleEnv(b, device, 2, 3)));
  for (auto& p : probes) ASSERT_EQ(p->Rc("init"), "0");
  probes[0]->Send("launch kernel 1000 100");
  probes[1]->Send("launch kernel_ptsz 1000 100");
  probes[2]->Send("launch kernel 2000 100");
  for (auto& p : probes) EXPECT_EQ(p->ReadLine(), "launch 0");

  std::map<int, Share> shares = SharesFromLog(device);
  EXPECT_EQ(shares[1].kernels, 2000);
  EXPECT_EQ(shares[2].kernels, 2000);
  EXPECT_GE(shares[1].fraction, 0.27);
  EXPECT_LE(shares[1].fraction, 0.33);
  EXPECT_GE(shares[2].fraction, 0.63);
  EXPECT_LE(shares[2].fraction, 0.77);
  std::printf("shares: a %.4f (target 0.30), b %.4f (target 0.70)\n", shares[1].fraction,
              shares[2].fraction);
  // The region reports the busy time the shim measured: every kernel, 100 us each.
  EXPECT_EQ(Usage(a).devices[0].busy_ns, 2000 * 100000LL);
  EXPECT_EQ(Usage(b).devices[0].busy_ns, 2000 * 100000LL);
}

TEST(Shim, EveryLaunchEntryPointIsThrottled) {
  TempDir dir;
  for (const char* api :
       {"kernel", "kernel_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz", "graph", "graph_ptsz"}) {
    SCOPED_TRACE(api);
    const std::string device = dir.File(std::string("device-") + api);
    Container c = MakeContainer(dir, std::string("c-") + api, kGiB, 250);
    Probe p(ThrottleEnv(c, device, 1, 1));
    ASSERT_EQ(p.Rc("init"), "0");
    EXPECT_EQ(p.Rc(std::string("launch ") + api + " 200 100"), "0");
    EXPECT_EQ(p.Finish(), 0);
    // Alone on the device, throttled to 25% of the time from its first kernel to its last.
    std::map<int, Share> shares = SharesFromLog(device);
    EXPECT_EQ(shares[1].kernels, 200);
    EXPECT_GE(shares[1].fraction, 0.24);
    EXPECT_LE(shares[1].fraction, 0.26);
  }
}

// ---------------------------------------------------------------------------------------------
// 6. Lookups through dlsym and cuGetProcAddress(_v2) return the hooks.

TEST(Shim, LookupsReturnTheHooks) {
  TempDir dir;
  Container c = MakeContainer(dir, "c1", kGiB);
  Probe p(EnvFor(c));
  ASSERT_EQ(p.Rc("init"), "0");
  for (const char* kind : {"dlsym_default", "dlsym_handle", "gpa", "gpa_v2"}) {
    SCOPED_TRACE(kind);
    EXPECT_EQ(p.Rc(std::string("alloc_via ") + kind + " " + std::to_string(2 * kGiB)), "2");
    EXPECT_EQ(p.Rc(std::string("alloc_via ") + kind + " " + std::to_string(kGiB / 4)), "0");
  }
  EXPECT_EQ(Usage(c).devices[0].memory_used_bytes, kGiB);
  EXPECT_EQ(p.Call("gpa_check"), (std::vector<std::string>{"1", "1", "1", "1"}));
}

}  // namespace
}  // namespace fabrica
