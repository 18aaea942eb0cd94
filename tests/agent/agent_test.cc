// The node agent (issue 5): the launcher's process supervision, and several real `fabrica
// agent` processes against a real `fabrica server` — registration, heartbeats, pods run as
// processes with their exit status and logs reported, a SIGKILLed agent's node going NotReady
// and its work requeued, and restarted agents adopting or killing what they left running.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "../test_net.h"
#include "../test_util.h"
#include "agent/gpu_stress.h"
#include "agent/launcher.h"
#include "client/http_client.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using test::ReadFile;
using test::TempDir;

// Polls `done` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

LaunchSpec Shell(const std::string& key, const std::string& script) {
  LaunchSpec spec;
  spec.key = key;
  spec.binding = "b1";
  spec.argv = {"sh", "-c", script};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"POD_GREETING", "hello"}};
  return spec;
}

// Polls the launcher until `key` ended; returns its exit.
PodExit WaitExit(Launcher& launcher, const std::string& key, std::chrono::milliseconds timeout) {
  PodExit found;
  found.key = "";
  WaitFor(
      [&] {
        for (const PodExit& e : launcher.Poll(NowMs())) {
          if (e.key == key) found = e;
        }
        return !found.key.empty();
      },
      timeout);
  return found;
}

TEST(LauncherTest, RunsACommandWithItsEnvironmentAndRecordsItsExitAndOutput) {
  TempDir dir;
  Launcher launcher({dir.File("state"), ""});
  ASSERT_TRUE(
      launcher.Launch(Shell("t/w/p-0", "echo $POD_GREETING; echo oops >&2; exit 3"), NowMs()).ok());
  PodExit e = WaitExit(launcher, "t/w/p-0", 10s);
  ASSERT_EQ(e.key, "t/w/p-0");
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.signal, 0);
  EXPECT_FALSE(e.stopped);
  EXPECT_FALSE(e.lost);
  EXPECT_EQ(ReadFile(e.log_path), "hello\noops\n");
  EXPECT_TRUE(launcher.pods().empty());
}

TEST(LauncherTest, APodIsPinnedToItsCpus) {
  TempDir dir;
  Launcher launcher({dir.File("state"), ""});
  LaunchSpec spec = Shell("t/w/p-0", "grep Cpus_allowed_list /proc/self/status");
  spec.cpus = "0";
  ASSERT_TRUE(launcher.Launch(spec, NowMs()).ok());
  PodExit e = WaitExit(launcher, "t/w/p-0", 10s);
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(ReadFile(e.log_path), "Cpus_allowed_list:\t0\n");
  EXPECT_FALSE(ParseCpuList("0-3,x").ok());
  EXPECT_EQ(*ParseCpuList("0-2,5"), (std::vector<int>{0, 1, 2, 5}));
}

TEST(GpuStressTest, TheBuiltInBurnChecksMemoryAndComputeResults) {
  // The fake driver keeps what is written to small allocations and computes the burn kernel on
  // the host, so the burn's checks run for real; the PTX itself meets a GPU only in check.sh.
  GpuStressOptions o;
  o.library = std::string(FAKE_CUDA_DIR) + "/libcuda.so.1";
  o.memory_mib = 16;
  o.seconds = 0.05;
  o.threads = 4096;  // the fake computes the kernel on the host: keep it small
  o.iterations = 64;
  auto ok = StressGpus({}, o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_TRUE((*ok)[0].passed) << (*ok)[0].message;
  EXPECT_EQ((*ok)[0].words_checked, 4 * (16 << 20) / 4);
  EXPECT_GE((*ok)[0].kernels, 1);
  // A word that reads back wrong fails the GPU, naming the count.
  ::setenv("FAKECUDA_CORRUPT_WORD", "12345", 1);
  auto bad = StressGpus({0}, o);
  ::unsetenv("FAKECUDA_CORRUPT_WORD");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE((*bad)[0].passed);
  EXPECT_GE((*bad)[0].memory_errors, 4) << (*bad)[0].message;  // once per pattern
  EXPECT_NE((*bad)[0].message.find("wrong"), std::string::npos);
  // No driver: a clear error, not a crash.
  o.library = "/nonexistent/libcuda.so.1";
  auto none = StressGpus({}, o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("CUDA driver library not found"), std::string::npos);
  EXPECT_EQ(BurnValue(0, 0), 1u);
}

TEST(LauncherTest, AMissingCommandExits127WithAMessage) {
  TempDir dir;
  Launcher launcher({dir.File("state"), ""});
  LaunchSpec spec = Shell("t/w/p-0", "");
  spec.argv = {"no-such-command-fabrica"};
  ASSERT_TRUE(launcher.Launch(spec, NowMs()).ok());
  PodExit e = WaitExit(launcher, "t/w/p-0", 10s);
  EXPECT_EQ(e.exit_code, 127);
  EXPECT_NE(ReadFile(e.log_path).find("no-such-command-fabrica: command not found"),
            std::string::npos);
}

TEST(LauncherTest, StopSendsSigtermThenSigkillAfterTheGracePeriod) {
  TempDir dir;
  Launcher launcher({dir.File("state"), ""});
  // One pod leaves on SIGTERM; the other ignores it and must be killed. (Both running before
  // they are stopped, and both exits kept from the same polls: on a loaded CI machine the
  // polite one was stopped before it ran, and the stubborn one's exit, returned by a poll that
  // waited for the other, was dropped.)
  ASSERT_TRUE(launcher.Launch(Shell("t/w/polite", "echo ready; exec sleep 60"), NowMs()).ok());
  ASSERT_TRUE(
      launcher
          .Launch(Shell("t/w/stubborn", "trap '' TERM; echo ready; while :; do sleep 1; done"),
                  NowMs())
          .ok());
  for (const char* key : {"t/w/polite", "t/w/stubborn"})
    ASSERT_TRUE(WaitFor([&] { return ReadFile(launcher.LogPath(key)) == "ready\n"; }, 30s)) << key;
  const int64_t t0 = NowMs();
  launcher.Stop("t/w/polite", 60'000, t0);
  launcher.Stop("t/w/stubborn", 500, t0);
  std::map<std::string, PodExit> exits;
  WaitFor(
      [&] {
        for (const PodExit& e : launcher.Poll(NowMs())) exits[e.key] = e;
        return exits.size() == 2;
      },
      30s);
  ASSERT_TRUE(exits.count("t/w/polite") && exits.count("t/w/stubborn")) << exits.size();
  const PodExit& polite = exits["t/w/polite"];
  EXPECT_TRUE(polite.stopped);
  EXPECT_EQ(polite.signal, SIGTERM);
  const PodExit& stubborn = exits["t/w/stubborn"];
  EXPECT_TRUE(stubborn.stopped);
  // The monitor is killed with its group, so no status is written: the pod ended by force.
  EXPECT_TRUE(stubborn.lost || stubborn.signal == SIGKILL);
  EXPECT_GE(NowMs() - t0, 500);
}

TEST(LauncherTest, ARestartedLauncherAdoptsRunningPodsAndReadsExitsThatHappenedMeanwhile) {
  TempDir dir;
  pid_t running_pid = -1;
  {
    Launcher first({dir.File("state"), ""});
    ASSERT_TRUE(first.Launch(Shell("t/w/long", "sleep 60"), NowMs()).ok());
    ASSERT_TRUE(first.Launch(Shell("t/w/short", "sleep 0.3; exit 7"), NowMs()).ok());
    running_pid = first.pods().at("t/w/long").pid;
  }  // the "agent" goes away; its pods do not
  std::this_thread::sleep_for(1s);
  Launcher second({dir.File("state"), ""});
  ASSERT_TRUE(second.Load().ok());
  ASSERT_EQ(second.pods().size(), 2u);
  EXPECT_EQ(second.pods().at("t/w/long").pid, running_pid);
  PodExit short_exit = WaitExit(second, "t/w/short", 10s);
  EXPECT_EQ(short_exit.exit_code, 7);
  EXPECT_EQ(second.pods().count("t/w/long"), 1u);
  second.Stop("t/w/long", 5000, NowMs());
  PodExit long_exit = WaitExit(second, "t/w/long", 10s);
  EXPECT_TRUE(long_exit.stopped);
  EXPECT_NE(::kill(running_pid, 0), 0) << "the adopted pod was not stopped";
}

// An agent that read a pod's exit (Poll) and died before its report reached the server finds
// the exit again when it restarts, rather than forgetting the pod ran (the agent would start it
// again); once forgotten (the server has it) it is gone, and a new run of the pod replaces it.
TEST(LauncherTest, AnExitNotYetForgottenIsReturnedAgainAfterARestart) {
  TempDir dir;
  {
    Launcher first({dir.File("state"), ""});
    ASSERT_TRUE(first.Launch(Shell("t/w/done", "exit 3"), NowMs()).ok());
    PodExit e = WaitExit(first, "t/w/done", 10s);
    ASSERT_EQ(e.exit_code, 3);
    EXPECT_EQ(first.pods().count("t/w/done"), 0u);
    EXPECT_EQ(first.ended().count("t/w/done"), 1u);
    EXPECT_TRUE(first.Poll(NowMs()).empty()) << "an exit is returned once per launcher";
  }  // the agent dies before its report gets through
  Launcher second({dir.File("state"), ""});
  ASSERT_TRUE(second.Load().ok());
  EXPECT_TRUE(second.pods().empty());
  std::vector<PodExit> again = second.Poll(NowMs());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].key, "t/w/done");
  EXPECT_EQ(again[0].binding, "b1");
  EXPECT_EQ(again[0].exit_code, 3);
  EXPECT_FALSE(again[0].stopped || again[0].lost);
  EXPECT_TRUE(second.Poll(NowMs()).empty());
  second.Forget({"t/w/done"});
  EXPECT_TRUE(second.ended().empty());
  {
    Launcher third({dir.File("state"), ""});
    ASSERT_TRUE(third.Load().ok());
    EXPECT_TRUE(third.Poll(NowMs()).empty()) << "a forgotten exit came back";
    // A new run of the pod drops an earlier run's exit.
    ASSERT_TRUE(third.Launch(Shell("t/w/other", "exit 0"), NowMs()).ok());
    ASSERT_EQ(WaitExit(third, "t/w/other", 10s).exit_code, 0);
    ASSERT_TRUE(third.Launch(Shell("t/w/other", "sleep 30"), NowMs()).ok());
    EXPECT_EQ(third.ended().count("t/w/other"), 0u);
    third.Stop("t/w/other", 0, NowMs());
    EXPECT_TRUE(WaitExit(third, "t/w/other", 10s).stopped);
  }
}

TEST(LauncherTest, ARecordWhosePidWasReusedIsNeverSignalled) {
  TempDir dir;
  const std::string state = dir.File("state");
  ::mkdir(state.c_str(), 0700);
  // A stranger process holds the pid the state file names, with another start time.
  pid_t stranger = ::fork();
  if (stranger == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  {
    std::ofstream out(state + "/pods.json");
    out << json{{"pods",
                 {{{"key", "t/w/old"},
                   {"binding", "b0"},
                   {"pid", stranger},
                   {"startTicks", 1},
                   {"log", state + "/logs/x.log"},
                   {"exit", state + "/x.exit"}}}}}
               .dump();
  }
  Launcher launcher({state, ""});
  ASSERT_TRUE(launcher.Load().ok());
  launcher.Stop("t/w/old", 0, NowMs());
  PodExit e = WaitExit(launcher, "t/w/old", 5s);
  EXPECT_TRUE(e.lost);
  int status = 0;
  EXPECT_EQ(::waitpid(stranger, &status, WNOHANG), 0) << "the stranger was signalled";
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, &status, 0);
}

TEST(LauncherTest, PodsRunInTheirOwnCgroupWhereTheTreeIsWritable) {
  // cgroup v2 where writable: the unified mount of a hybrid host, or the root of a v2 host.
  std::string base;
  for (const char* candidate : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    struct stat sb;
    if (::stat((std::string(candidate) + "/cgroup.procs").c_str(), &sb) == 0 &&
        ::access(candidate, W_OK) == 0) {
      base = candidate;
      break;
    }
  }
  if (base.empty()) GTEST_SKIP() << "no writable cgroup v2 tree here";
  const std::string root = base + "/fabrica-test-" + std::to_string(::getpid());
  TempDir dir;
  {
    Launcher launcher({dir.File("state"), root});
    if (launcher.cgroup_note().find("not a writable") != std::string::npos) {
      ::rmdir(root.c_str());
      GTEST_SKIP() << launcher.cgroup_note();
    }
    LaunchSpec spec = Shell("t/w/p-0", "sleep 30 & sleep 30");
    spec.cpu_milli = 500;
    spec.memory_mib = 64;
    ASSERT_TRUE(launcher.Launch(spec, NowMs()).ok());
    const std::string cg = root + "/t_w_p-0";
    // The monitor, the shell and its background child are all in the pod's cgroup.
    ASSERT_TRUE(WaitFor(
        [&] {
          std::string procs = ReadFile(cg + "/cgroup.procs");
          return std::count(procs.begin(), procs.end(), '\n') >= 3;
        },
        10s))
        << ReadFile(cg + "/cgroup.procs");
    if (launcher.cgroup_note().find("cpu.max enforced") != std::string::npos) {
      EXPECT_EQ(ReadFile(cg + "/cpu.max"), "50000 100000\n");
    }
    launcher.Stop("t/w/p-0", 200, NowMs());
    PodExit e = WaitExit(launcher, "t/w/p-0", 10s);
    EXPECT_TRUE(e.stopped);
    struct stat sb;
    EXPECT_NE(::stat(cg.c_str(), &sb), 0) << "the pod's cgroup was not removed";
  }
  ::rmdir(root.c_str());
}

// ---------------------------------------------------------------------------------------------
// Real agents against a real server.

constexpr char kApi[] = "/apis/fabrica.dev/v1";
const std::string kAdminToken = test::TestToken("admin", "agent");
// Three one-GPU nodes the agents simulate (sim:FILE, the one fleet schema).
constexpr char kFleetYaml[] = R"(apiVersion: fabrica.dev/v1
kind: Fleet
nodes:
  - {name: n1, cpu: 16, memory: 64Gi, gpus: {count: 1, model: H100, memory: 80Gi}}
  - {name: n2, cpu: 16, memory: 64Gi, gpus: {count: 1, model: H100, memory: 80Gi}}
  - {name: n3, cpu: 16, memory: 64Gi, gpus: {count: 1, model: H100, memory: 80Gi}}
)";

using test::FreePort;

// A `fabrica` child process (server or agent), output to its log.
class Child : public test::ChildProcess {
 public:
  void Start(std::vector<std::string> args, const std::string& log) {
    ChildProcess::Start(FABRICA_BIN, std::move(args), log);
  }
};

class AgentFleetTest : public testing::Test {
 protected:
  // Pods outlive their agents by design; the test's must not outlive the test.
  void TearDown() override {
    for (auto& [node, child] : agents_) child.Kill(SIGKILL);
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      json state = json::parse(ReadFile(entry.path().string() + "/pods.json"), nullptr, false);
      if (!state.is_object()) continue;
      for (const json& p : state.value("pods", json::array())) {
        const pid_t pid = p.value("pid", -1);
        if (pid > 0 && ProcessStartTicks(pid) == p.value("startTicks", uint64_t{0})) {
          ::kill(-pid, SIGKILL);
          Gone(pid);
        }
      }
    }
  }

  void SetUp() override {
    // Pods orphaned by a killed agent become our children, so that Gone() can reap them.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    {
      std::ofstream(dir_.File("auth.yaml")) << test::AuthYaml("agent");
      std::ofstream(dir_.File("fleet.yaml")) << kFleetYaml;
    }
    // Virtual time x10: a node is NotReady 40 virtual (4 wall) seconds after its last renewal.
    bool up = false;
    for (int attempt = 0; attempt < 3 && !up; ++attempt) {
      port_ = FreePort();
      server_.Kill(SIGKILL);
      server_.Start(
          {"server", "--data", dir_.File("data"), "--listen", "127.0.0.1:" + std::to_string(port_),
           "--plain-http", "--auth", dir_.File("auth.yaml"), "--time-scale", "10"},
          dir_.File("server.log"));
      HttpClient probe(Options(""));
      up = WaitFor(
          [&] {
            auto r = probe.Do("GET", "/healthz");
            return r.ok() && r->status == 200;
          },
          15s);
    }
    ASSERT_TRUE(up) << ReadFile(dir_.File("server.log"));
    admin_ = std::make_unique<HttpClient>(Options(kAdminToken));
    json tenant = {{"apiVersion", "fabrica.dev/v1"},
                   {"kind", "Tenant"},
                   {"metadata", {{"name", "team-a"}}},
                   {"spec", {{"trust", "trusted"}}}};
    ASSERT_EQ(Call("POST", std::string(kApi) + "/tenants", tenant).first, 201);
    for (const char* node : {"n1", "n2", "n3"}) {
      auto [code, body] = Call("POST", std::string(kApi) + "/nodes/" + node + "/token", json{});
      ASSERT_EQ(code, 201) << body.dump();
      tokens_[node] = body["token"];
      StartAgent(node);
    }
    ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 3; }, 30s)) << Logs();
  }

  ClientOptions Options(const std::string& token) const {
    ClientOptions o;
    o.server = "http://127.0.0.1:" + std::to_string(port_);
    o.token = token;
    o.timeout_seconds = 10;
    return o;
  }

  void StartAgent(const std::string& node, const std::vector<std::string>& extra = {},
                  const std::string& fleet = "fleet.yaml") {
    std::vector<std::string> args = {"agent",
                                     "--server",
                                     Options("").server,
                                     "--token",
                                     tokens_[node],
                                     "--node",
                                     node,
                                     "--devices",
                                     "sim:" + dir_.File(fleet),
                                     "--state-dir",
                                     dir_.File("agent-" + node),
                                     "--heartbeat-seconds",
                                     "1",
                                     "--lease-seconds",  // (a killed agent is noticed in 3 s)
                                     "3",
                                     "--poll-seconds",
                                     "0.2",
                                     "--sample-seconds",
                                     "1",
                                     "--grace-seconds",
                                     "2",
                                     "--metrics-listen",
                                     "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    agents_[node].Start(args, dir_.File("agent-" + node + ".log"));
  }

  std::pair<int, json> Call(const std::string& method, const std::string& path,
                            const json& body = nullptr) {
    auto r = admin_->Do(method, path, body.is_null() ? "" : body.dump());
    if (!r.ok()) return {0, json(r.status().message())};
    json j = json::parse(r->body, nullptr, false);
    return {r->status, j.is_discarded() ? json(r->body) : j};
  }

  int ReadyNodes() {
    auto [code, list] = Call("GET", std::string(kApi) + "/nodes");
    int ready = 0;
    if (code != 200) return -1;
    for (const json& n : list["items"]) {
      for (const json& c : n.value("status", json::object()).value("conditions", json::array())) {
        if (c.value("type", "") == "Ready" && c.value("status", "") == "True") ++ready;
      }
    }
    return ready;
  }

  bool NodeReady(const std::string& node) {
    json n = Call("GET", std::string(kApi) + "/nodes/" + node).second;
    if (!n.is_object()) return false;
    for (const json& c : n.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
    }
    return false;
  }

  json Workload(const std::string& name) {
    return Call("GET", std::string(kApi) + "/namespaces/team-a/workloads/" + name).second;
  }

  void Submit(const std::string& name, const std::vector<std::string>& command,
              const json& devices = {{"gpus", 1}}) {
    json w = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Workload"},
              {"metadata", {{"name", name}, {"namespace", "team-a"}}},
              {"spec",
               {{"podSets",
                 {{{"name", "main"},
                   {"count", 1},
                   {"cpu", "1"},
                   {"memory", "1Gi"},
                   {"devices", devices}}}},
                {"run", {{"command", command}}}}}};
    auto [code, body] = Call("POST", std::string(kApi) + "/namespaces/team-a/workloads", w);
    ASSERT_EQ(code, 201) << body.dump();
  }

  // Workload team-a/pair: two 1-GPU pods (so on two nodes) running `sh -c script`.
  // A node `name` with `gpus` H100s registers late (a token, then its agent on a fleet file of
  // its own).
  void AddNode(const std::string& name, int gpus) {
    std::ofstream(dir_.File(name + "-fleet.yaml"))
        << "apiVersion: fabrica.dev/v1\nkind: Fleet\nnodes:\n  - {name: " << name
        << ", cpu: 16, memory: 64Gi, gpus: {count: " << gpus << ", model: H100, memory: 80Gi}}\n";
    auto [code, body] = Call("POST", std::string(kApi) + "/nodes/" + name + "/token", json{});
    ASSERT_EQ(code, 201) << body.dump();
    tokens_[name] = body["token"];
    StartAgent(name, {}, name + "-fleet.yaml");
  }
  // Workload `name` of team-a: two pods of `gpus` GPUs each, running `script` under sh.
  void SubmitPair(const std::string& script, const std::string& name = "pair", int gpus = 1) {
    json w = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Workload"},
              {"metadata", {{"name", name}, {"namespace", "team-a"}}},
              {"spec",
               {{"podSets",
                 {{{"name", "main"},
                   {"count", 2},
                   {"cpu", "1"},
                   {"memory", "1Gi"},
                   {"devices", {{"gpus", gpus}}}}}},
                {"run", {{"command", {"sh", "-c", script}}}}}}};
    auto [code, body] = Call("POST", std::string(kApi) + "/namespaces/team-a/workloads", w);
    ASSERT_EQ(code, 201) << body.dump();
  }
  std::string Phase(const std::string& name) { return Workload(name)["status"].value("phase", ""); }
  std::string NodeOf(const std::string& name) {
    json a = Workload(name)["status"].value("assignments", json::array());
    return a.empty() ? "" : a[0].value("node", "");
  }
  // The monitor pid the node's agent recorded for the workload's pod, or -1.
  pid_t PodPid(const std::string& node, const std::string& workload) {
    json state = json::parse(ReadFile(dir_.File("agent-" + node + "/pods.json")), nullptr, false);
    if (!state.is_object()) return -1;
    for (const json& p : state["pods"]) {
      if (p.value("key", "") == "team-a/" + workload + "/main-0") return p.value("pid", -1);
    }
    return -1;
  }
  // Whether `pid` has ended (reaping it if it was orphaned to us).
  static bool Gone(pid_t pid) {
    int status;
    ::waitpid(pid, &status, WNOHANG);
    return ProcessStartTicks(pid) == 0;
  }
  // The node agent's /metrics page (its address is in the agent's startup line).
  std::string Metrics(const std::string& node) {
    const std::string log = ReadFile(agents_[node].log());
    const std::string marker = "metrics on ";
    const size_t at = log.rfind(marker);
    if (at == std::string::npos) return "";
    std::string url = log.substr(at + marker.size());
    url = url.substr(0, url.find('\n'));
    const size_t path = url.find("/metrics");
    if (path == std::string::npos) return "";
    ClientOptions o;
    o.server = url.substr(0, path);
    HttpClient client(o);
    auto r = client.Do("GET", "/metrics");
    return r.ok() && r->status == 200 ? r->body : "";
  }
  std::string Log(const std::string& name, const std::string& pod = "") {
    auto r = admin_->Do("GET", std::string(kApi) + "/namespaces/team-a/workloads/" + name + "/log" +
                                   (pod.empty() ? "" : "?pod=" + pod));
    return r.ok() && r->status == 200 ? r->body : "";
  }
  std::string Logs() {
    std::string all = "--- server\n" + ReadFile(dir_.File("server.log"));
    for (auto& [node, child] : agents_) all += "--- agent " + node + "\n" + ReadFile(child.log());
    return all;
  }

  TempDir dir_;
  int port_ = 0;
  Child server_;
  std::map<std::string, Child> agents_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<HttpClient> admin_;
};

TEST_F(AgentFleetTest, PodsRunAsProcessesAndTheirExitAndOutputAreReported) {
  Submit("hello", {"sh", "-c", "echo hello from $FABRICA_NODE on $CUDA_VISIBLE_DEVICES; exit 0"});
  Submit("broken", {"sh", "-c", "echo about to fail >&2; exit 3"});
  ASSERT_TRUE(WaitFor([&] { return Phase("hello") == "Succeeded"; }, 30s)) << Logs();
  ASSERT_TRUE(WaitFor([&] { return Phase("broken") == "Failed"; }, 30s)) << Logs();
  json hello = Workload("hello");
  EXPECT_EQ(hello["status"].value("exitCode", -1), 0);
  // Its node reported the pod it started (the gang timeout and elastic growth read this).
  EXPECT_TRUE(hello["status"]["startedPods"].contains("main-0")) << hello.dump();
  json broken = Workload("broken");
  EXPECT_EQ(broken["status"].value("exitCode", -1), 3);
  EXPECT_NE(broken["status"].value("message", "").find("exited with code 3"), std::string::npos)
      << broken.dump();
  // The pod saw its node and its GPU's UUID; its output reached the server.
  const std::string node = NodeOf("hello");
  json n = Call("GET", std::string(kApi) + "/nodes/" + node).second;
  const std::string uuid = n["spec"]["devices"][0].value("uuid", "?");
  ASSERT_TRUE(WaitFor([&] { return !Log("hello").empty(); }, 30s)) << Logs();
  EXPECT_EQ(Log("hello"), "hello from " + node + " on " + uuid + "\n");
  ASSERT_TRUE(WaitFor([&] { return !Log("broken").empty(); }, 30s));
  EXPECT_EQ(Log("broken"), "about to fail\n");
  // Another tenant's member may not read it; the pod's tenant may.
  ClientOptions alice = Options(test::TestToken("alice", "agent"));
  HttpClient alice_client(alice);
  auto r = alice_client.Do("GET", std::string(kApi) + "/namespaces/team-a/workloads/hello/log");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  // A node may not write the log of a pod it does not run.
  std::string other = node == "n1" ? "n2" : "n1";
  HttpClient other_node(Options(tokens_[other]));
  r = other_node.Do("POST", std::string(kApi) + "/namespaces/team-a/workloads/hello/log?pod=main-0",
                    "forged\n", "text/plain");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403);
}

// A workload whose pods run on several nodes succeeds when all of them have: the node whose
// pod finishes first lists it (status.finishedPods) and the pods elsewhere run on to their
// end, rather than the first node's report ending the workload and stopping them.
TEST_F(AgentFleetTest, AMultiNodeWorkloadSucceedsWhenItsLastPodDoes) {
  // (main-1 runs long enough that main-0's report is seen before it ends, on a slow machine.)
  SubmitPair("if [ \"$FABRICA_POD\" = main-1 ]; then sleep 12; echo main-1 done; fi");
  // main-0 ends at once: listed, while the workload runs on.
  ASSERT_TRUE(WaitFor(
      [&] { return Workload("pair")["status"].value("finishedPods", json::object()).size() >= 1; },
      30s))
      << Logs();
  const json midway = Workload("pair")["status"];
  EXPECT_EQ(midway.value("phase", ""), "Running") << midway.dump();
  EXPECT_TRUE(midway["finishedPods"].contains("main-0")) << midway.dump();
  EXPECT_NE(midway.value("message", "").find("1 of 2 pods completed"), std::string::npos)
      << midway.dump();
  ASSERT_TRUE(WaitFor([&] { return Phase("pair") == "Succeeded"; }, 30s)) << Logs();
  const json done = Workload("pair")["status"];
  EXPECT_EQ(done["finishedPods"].size(), 2u) << done.dump();
  EXPECT_EQ(done.value("exitCode", -1), 0);
  EXPECT_NE(done.value("message", "").find("all 2 pods completed"), std::string::npos)
      << done.dump();
  ASSERT_TRUE(
      WaitFor([&] { return Log("pair", "main-1").find("main-1 done") != std::string::npos; }, 10s))
      << Log("pair", "main-1");
}

// Two pods of one workload on one node: the first to complete is reported at once (its GPUs
// are free for other work then), not when the node's last pod of the workload ends.
TEST_F(AgentFleetTest, APodIsReportedCompletedAtOnceBesideItsSiblingOnItsNode) {
  AddNode("big", 4);
  ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 4; }, 30s)) << Logs();
  // Two 2-GPU pods: only `big` has room for them.
  SubmitPair("if [ \"$FABRICA_POD\" = main-1 ]; then sleep 12; fi", "duo", 2);
  ASSERT_TRUE(WaitFor(
      [&] { return Workload("duo")["status"].value("finishedPods", json::object()).size() >= 1; },
      60s))
      << Logs();
  const json midway = Workload("duo")["status"];
  EXPECT_EQ(midway.value("phase", ""), "Running") << midway.dump();
  EXPECT_TRUE(midway["finishedPods"].contains("main-0")) << midway.dump();
  for (const json& a : midway["assignments"]) EXPECT_EQ(a.value("node", ""), "big");
  ASSERT_TRUE(WaitFor([&] { return Phase("duo") == "Succeeded"; }, 30s)) << Logs();
  EXPECT_EQ(Workload("duo")["status"]["finishedPods"].size(), 2u);
}

// A completed pod's node whose agent restarts (it no longer remembers the pod) does not run the
// pod again while the workload's other pod runs on.
TEST_F(AgentFleetTest, ACompletedPodIsNotRunAgainAfterItsAgentRestarts) {
  // (main-1 runs on past the restart, on a slow machine too.)
  SubmitPair("echo run $FABRICA_POD; if [ \"$FABRICA_POD\" = main-1 ]; then sleep 15; fi");
  ASSERT_TRUE(WaitFor(
      [&] { return Workload("pair")["status"].value("finishedPods", json::object()).size() >= 1; },
      30s))
      << Logs();
  ASSERT_EQ(Phase("pair"), "Running");
  std::string first;
  const json bound = Workload("pair");
  for (const json& a : bound["status"]["assignments"])
    if (a.value("pod", "") == "main-0") first = a.value("node", "");
  ASSERT_FALSE(first.empty()) << bound.dump();
  agents_[first].Kill(SIGKILL);
  StartAgent(first);
  ASSERT_TRUE(WaitFor([&] { return Phase("pair") == "Succeeded"; }, 30s)) << Logs();
  ASSERT_TRUE(WaitFor([&] { return !Log("pair", "main-0").empty(); }, 30s));
  EXPECT_EQ(Log("pair", "main-0"), "run main-0\n");  // once
  // The exits each agent kept until the server had them are forgotten.
  for (const json& a : bound["status"]["assignments"]) {
    const std::string state = dir_.File("agent-" + a.value("node", "") + "/pods.json");
    EXPECT_TRUE(WaitFor(
        [&] {
          const json doc = json::parse(ReadFile(state), nullptr, false);
          return doc.is_object() && doc.value("ended", json::array()).empty();
        },
        10s))
        << ReadFile(state);
  }
}

// A pod that writes its output and ends while its agent is down (killed before it had shipped
// anything of the pod's log) has that output shipped by the restarted agent, and its exit
// reported. (The agent also keeps a new pod's log cursor from its launch, not from its first
// shipment: one killed after it had seen the pod end but before it shipped the output lost it,
// as CI once saw in ACompletedPodIsNotRunAgainAfterItsAgentRestarts; that window is too narrow
// to hit on purpose from here.)
TEST_F(AgentFleetTest, OutputOfAPodThatEndedWhileItsAgentWasDownIsShippedAfterItsRestart) {
  const std::string go = dir_.File("go");
  Submit("quiet", {"sh", "-c", "while [ ! -f " + go + " ]; do sleep 0.1; done; echo late"});
  ASSERT_TRUE(WaitFor([&] { return Phase("quiet") == "Running"; }, 30s)) << Logs();
  const std::string node = NodeOf("quiet");
  const pid_t pid = PodPid(node, "quiet");
  ASSERT_GT(pid, 0);
  agents_[node].Kill(SIGKILL);
  std::ofstream(go) << "";
  ASSERT_TRUE(WaitFor([&] { return Gone(pid); }, 10s));  // ended while no agent ran
  StartAgent(node);
  ASSERT_TRUE(WaitFor([&] { return Phase("quiet") == "Succeeded"; }, 30s)) << Logs();
  EXPECT_TRUE(WaitFor([&] { return Log("quiet") == "late\n"; }, 10s)) << Log("quiet");
}

TEST_F(AgentFleetTest, BadTaskResultsAndLogWritesAreRefusedNamingWhatIsWrong) {
  HttpClient n1(Options(tokens_["n1"]));
  auto post = [&](HttpClient& c, const std::string& path, const std::string& body) {
    auto r = c.Do("POST", std::string(kApi) + path, body);
    return r.ok() ? std::make_pair(r->status, r->body) : std::make_pair(0, r.status().message());
  };
  // Task results: a node reports only for itself, strictly typed, unknown fields named.
  auto [code, body] = post(n1, "/nodes/n2/tasks/1", R"({"succeeded": true})");
  EXPECT_EQ(code, 403) << body;
  std::tie(code, body) = post(n1, "/nodes/n1/tasks/abc", R"({"succeeded": true})");
  EXPECT_EQ(code, 400) << body;
  EXPECT_NE(body.find("task id"), std::string::npos) << body;
  std::tie(code, body) = post(n1, "/nodes/n1/tasks/1", R"({"suceeded": true})");
  EXPECT_EQ(code, 400) << body;
  EXPECT_NE(body.find("suceeded: unknown field"), std::string::npos) << body;
  std::tie(code, body) = post(n1, "/nodes/n1/tasks/1", R"({"succeeded": "yes"})");
  EXPECT_EQ(code, 400) << body;
  EXPECT_NE(body.find("succeeded: required, true or false"), std::string::npos) << body;
  std::tie(code, body) =
      post(n1, "/nodes/n1/tasks/1", R"({"succeeded": true, "burnIn": {"dcgmDiag": "{}"}})");
  EXPECT_EQ(code, 400) << body;
  EXPECT_NE(body.find("burnIn.dcgmDiag"), std::string::npos) << body;
  std::tie(code, body) = post(n1, "/nodes/n1/tasks/1", "not json");
  EXPECT_EQ(code, 400) << body;
  // A result for a task that is not pending is accepted and ignored: nothing changes.
  std::tie(code, body) = post(n1, "/nodes/n1/tasks/1", R"({"succeeded": false})");
  EXPECT_EQ(code, 202) << body;
  // Logs: a gap is refused with the size to send from; a bad offset is named.
  Submit("talk", {"sh", "-c", "echo one; exec sleep 300"});
  ASSERT_TRUE(WaitFor([&] { return Log("talk") == "one\n"; }, 30s)) << Logs();
  const std::string node = NodeOf("talk");
  HttpClient runner(Options(tokens_[node]));
  const std::string log = "/namespaces/team-a/workloads/talk/log?pod=main-0";
  auto r = runner.Do("POST", std::string(kApi) + log + "&offset=100", "late\n", "text/plain");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_EQ(json::parse(r->body).value("size", -1), 4) << r->body;
  r = runner.Do("POST", std::string(kApi) + log + "&offset=-3", "x", "text/plain");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("offset"), std::string::npos) << r->body;
  // A resend of what the server has changes nothing.
  r = runner.Do("POST", std::string(kApi) + log + "&offset=0", "one\n", "text/plain");
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Log("talk"), "one\n");
  // A pod it does not have is not found, naming those it has (a typo printed nothing).
  r = admin_->Do("GET", std::string(kApi) + "/namespaces/team-a/workloads/talk/log?pod=main-7");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_NE(r->body.find("workload team-a/talk has no pod main-7 (its pods: main-0"),
            std::string::npos)
      << r->body;
  EXPECT_EQ(Log("talk", "main-0"), "one\n");
}

TEST_F(AgentFleetTest, AFractionalShareWithoutTheShimIsRefusedNotRunUncapped) {
  Submit("half", {"sh", "-c", "echo ran uncapped"}, {{"gpuMilli", "500m"}});
  ASSERT_TRUE(WaitFor([&] { return Phase("half") == "Failed"; }, 30s)) << Logs();
  json w = Workload("half");
  EXPECT_EQ(w["status"].value("reason", ""), "CannotRun");
  EXPECT_NE(w["status"].value("message", "").find("no vGPU shim"), std::string::npos) << w.dump();
  EXPECT_EQ(Log("half"), "");
}

TEST_F(AgentFleetTest, AKilledAgentsNodeGoesNotReadyItsWorkIsRequeuedAndRestartsCleanUp) {
  Submit("long", {"sh", "-c", "echo on $FABRICA_NODE; exec sleep 300"});
  ASSERT_TRUE(WaitFor([&] { return Phase("long") == "Running"; }, 30s)) << Logs();
  const std::string first = NodeOf("long");
  ASSERT_TRUE(WaitFor([&] { return Log("long") == "on " + first + "\n"; }, 10s)) << Log("long");
  pid_t orphan = -1;
  ASSERT_TRUE(WaitFor([&] { return (orphan = PodPid(first, "long")) > 0; }, 10s));
  ASSERT_FALSE(Gone(orphan));

  // SIGKILL the agent: its pods keep running, but its lease stops being renewed.
  agents_[first].Kill(SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !NodeReady(first); }, 30s)) << Logs();
  ASSERT_TRUE(WaitFor(
      [&] {
        return Phase("long") == "Running" && !NodeOf("long").empty() && NodeOf("long") != first;
      },
      30s))
      << Workload("long").dump() << Logs();
  const std::string second = NodeOf("long");
  pid_t moved = -1;
  ASSERT_TRUE(WaitFor([&] { return (moved = PodPid(second, "long")) > 0; }, 10s));
  EXPECT_FALSE(Gone(orphan)) << "nothing stops a pod on a node whose agent is dead";

  // The restarted agent finds its old pod no longer assigned to it and kills it, so the
  // workload does not run (nor get metered) twice; its node is Ready again.
  StartAgent(first);
  ASSERT_TRUE(WaitFor([&] { return Gone(orphan); }, 20s)) << Logs();
  ASSERT_TRUE(WaitFor([&] { return NodeReady(first); }, 20s)) << Logs();
  EXPECT_EQ(NodeOf("long"), second);
  EXPECT_EQ(Phase("long"), "Running");

  // Restarting the agent that runs it adopts the pod: same process, still Running.
  agents_[second].Kill(SIGKILL);
  StartAgent(second);
  std::this_thread::sleep_for(2s);  // several rounds of the new agent
  EXPECT_EQ(PodPid(second, "long"), moved);
  EXPECT_FALSE(Gone(moved));
  EXPECT_EQ(Phase("long"), "Running");
  EXPECT_EQ(NodeOf("long"), second);

  // The agent's /metrics page is dcgm-exporter's, labelled with the workload on the GPU (the
  // simulated GPU is 80% busy for the whole GPU the pod holds).
  std::string page;
  ASSERT_TRUE(WaitFor(
      [&] {
        page = Metrics(second);
        return page.find("fabrica_workload=\"long\"") != std::string::npos &&
               page.find("DCGM_FI_DEV_GPU_UTIL{") != std::string::npos;
      },
      10s))
      << page;
  EXPECT_NE(page.find("Hostname=\"" + second + "\""), std::string::npos) << page;
  EXPECT_NE(page.find("} 80\n"), std::string::npos) << page;

  // The pod's log holds both runs, in order: the second node's output follows the first's.
  EXPECT_TRUE(WaitFor([&] { return Log("long") == "on " + first + "\non " + second + "\n"; }, 10s))
      << Log("long");

  // Deleting the workload stops its pod.
  EXPECT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-a/workloads/long").first, 200);
  EXPECT_TRUE(WaitFor([&] { return Gone(moved); }, 20s)) << Logs();
}

TEST_F(AgentFleetTest, AnInjectedXidIsRemediatedThroughTheAgent) {
  Submit("victim", {"sleep", "300"});
  ASSERT_TRUE(WaitFor([&] { return Phase("victim") == "Running"; }, 30s)) << Logs();
  const std::string node = NodeOf("victim");
  // `fabctl debug inject NODE --xid 79 --gpu 0`: the server hands the fault to the node's
  // agent, whose simulated GPU falls off the bus; the agent reports the XID like a real one.
  auto [code, body] =
      Call("POST", std::string(kApi) + "/nodes/" + node + "/inject", json{{"xid", 79}, {"gpu", 0}});
  ASSERT_EQ(code, 202) << body.dump();
  // The work moves away; the node is rebooted (by its agent), burnt in, and back in service.
  ASSERT_TRUE(
      WaitFor([&] { return Phase("victim") == "Running" && NodeOf("victim") != node; }, 60s))
      << Workload("victim").dump() << Logs();
  json record;
  ASSERT_TRUE(WaitFor(
      [&] {
        record = Call("GET", std::string(kApi) + "/nodes/" + node + "/health").second;
        bool rebooted = false;
        for (const json& h : record.value("history", json::array())) {
          if (h.value("from", "") == "burn-in" && h.value("to", "") == "available") {
            rebooted = true;
          }
        }
        return rebooted && record.value("state", "") == "available";
      },
      60s))
      << record.dump(1) << Logs();
  bool saw_xid = false;
  for (const json& e : record.value("events", json::array())) saw_xid |= e.value("xid", 0) == 79;
  EXPECT_TRUE(saw_xid) << record.dump(1);
  std::string path;
  for (const json& h : record["history"]) path += h.value("to", "") + " ";
  EXPECT_NE(path.find("repair"), std::string::npos) << path;  // reboot happens in repair
}

TEST_F(AgentFleetTest, AnApplicationXidRestartsThePodInPlace) {
  Submit("server", {"sh", "-c", "echo started; sleep 300"});
  ASSERT_TRUE(WaitFor([&] { return Phase("server") == "Running"; }, 30s)) << Logs();
  const std::string node = NodeOf("server");
  pid_t first = -1;
  ASSERT_TRUE(WaitFor([&] { return (first = PodPid(node, "server")) > 0; }, 10s));
  // XID 94 (contained ECC error) hits only the application: restart it where it is.
  auto [code, body] =
      Call("POST", std::string(kApi) + "/nodes/" + node + "/inject", json{{"xid", 94}, {"gpu", 0}});
  ASSERT_EQ(code, 202) << body.dump();
  pid_t second = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        second = PodPid(node, "server");
        return second > 0 && second != first;
      },
      30s))
      << Logs();
  EXPECT_TRUE(WaitFor([&] { return Gone(first); }, 10s));
  EXPECT_EQ(Phase("server"), "Running");
  EXPECT_EQ(NodeOf("server"), node);
  ASSERT_TRUE(WaitFor([&] { return Log("server") == "started\nstarted\n"; }, 10s)) << Log("server");
}

TEST_F(AgentFleetTest, ANewNodeTakesWorkOnlyAfterItsInspectionAndBurnIn) {
  for (const char* node : {"n1", "n2", "n3"}) {
    auto r = admin_->Do("PATCH", std::string(kApi) + "/nodes/" + node,
                        json{{"spec", {{"unschedulable", true}}}}.dump(),
                        "application/merge-patch+json");
    ASSERT_TRUE(r.ok() && r->status == 200);
  }
  // Work waits for a node; then one registers.
  Submit("waiting", {"sleep", "300"});
  AddNode("late", 1);
  ASSERT_TRUE(WaitFor([&] { return Phase("waiting") == "Running"; }, 30s)) << Logs();
  ASSERT_EQ(NodeOf("waiting"), "late");
  // It was bound only once the node had been inspected and burnt in.
  json record = Call("GET", std::string(kApi) + "/nodes/late/health").second;
  std::string available_at;
  for (const json& h : record.value("history", json::array())) {
    if (h.value("to", "") == "available") available_at = h.value("time", "");
  }
  ASSERT_FALSE(available_at.empty()) << record.dump(1);
  const std::string bound_at = Workload("waiting")["status"].value("scheduledTime", "");
  EXPECT_GE(bound_at, available_at) << record.dump(1);
  std::string path;
  for (const json& h : record["history"]) path += h.value("to", "") + " ";
  EXPECT_EQ(path, "enroll inspecting burn-in available ") << record.dump(1);
}

TEST_F(AgentFleetTest, APodGetsItsGpusNumaNodeCpusAndNic) {
  for (const char* node : {"n1", "n2", "n3"}) {
    auto r = admin_->Do("PATCH", std::string(kApi) + "/nodes/" + node,
                        json{{"spec", {{"unschedulable", true}}}}.dump(),
                        "application/merge-patch+json");
    ASSERT_TRUE(r.ok() && r->status == 200);
  }
  // Two NUMA nodes, a GPU and a NIC on each; the second GPU is taken, so the pod gets GPU 1
  // on NUMA 1, and with it NUMA 1's NIC and CPUs.
  std::ofstream(dir_.File("numa-fleet.yaml"))
      << "apiVersion: fabrica.dev/v1\nkind: Fleet\nnodes:\n"
         "  - {name: u1, cpu: 16, memory: 64Gi, numaNodes: 2, gpus: {count: 2, model: H100, "
         "memory: 80Gi}, nics: [{name: mlx5_0, numa: 0}, {name: mlx5_1, numa: 1}]}\n";
  auto [code, body] = Call("POST", std::string(kApi) + "/nodes/u1/token", json{});
  ASSERT_EQ(code, 201);
  tokens_["u1"] = body["token"];
  StartAgent("u1", {}, "numa-fleet.yaml");
  ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 4; }, 30s)) << Logs();
  Submit("first", {"sleep", "300"});
  ASSERT_TRUE(WaitFor([&] { return Phase("first") == "Running"; }, 30s)) << Logs();
  Submit("second", {"sh", "-c",
                    "echo $FABRICA_NUMA_NODE $FABRICA_NIC $NCCL_IB_HCA; "
                    "grep Cpus_allowed_list /proc/self/status"});
  ASSERT_TRUE(WaitFor([&] { return Phase("second") == "Succeeded"; }, 30s)) << Logs();
  json a = Workload("second")["status"]["assignments"][0];
  const int numa = a.value("numa", -1);
  ASSERT_GE(numa, 0) << a.dump();
  const std::string nic = "mlx5_" + std::to_string(numa);
  EXPECT_EQ(a.value("nic", ""), nic) << a.dump();
  ASSERT_TRUE(WaitFor([&] { return !Log("second").empty(); }, 30s));
  // The simulated GPUs of NUMA node k are close to CPUs 8k..8k+7 of this 16-CPU node; the pod
  // is pinned to those of them this machine has (none: not pinned).
  const std::string log = Log("second");
  EXPECT_EQ(log.substr(0, log.find('\n')), std::to_string(numa) + " " + nic + " " + nic) << log;
}

TEST_F(AgentFleetTest, AFractionalShareRunsUnderTheShimWithItsCap) {
  // A fourth node whose agent has the shim; its GPU is the fake libcuda's device.
  {
    std::ofstream(dir_.File("shim-fleet.yaml"))
        << "apiVersion: fabrica.dev/v1\nkind: Fleet\nnodes:\n"
           "  - {name: s1, cpu: 16, memory: 64Gi, devices: [{model: H100, memory: 80Gi, "
           "uuid: GPU-face0000-0000-0000-0000-000000000000}]}\n";
  }
  auto [code, body] = Call("POST", std::string(kApi) + "/nodes/s1/token", json{});
  ASSERT_EQ(code, 201) << body.dump();
  tokens_["s1"] = body["token"];
  StartAgent("s1", {"--shim", FABRICA_SHIM}, "shim-fleet.yaml");
  ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 4; }, 30s)) << Logs();
  for (const char* node : {"n1", "n2", "n3"}) {
    auto r = admin_->Do("PATCH", std::string(kApi) + "/nodes/" + node,
                        json{{"spec", {{"unschedulable", true}}}}.dump(),
                        "application/merge-patch+json");
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().message());
  }
  // Half of an 80 GiB GPU: the shim caps the pod at 40 GiB, which the program checks
  // (cuMemGetInfo reports the cap; an allocation past it fails).
  const std::string cap = std::to_string(40LL << 30);
  Submit("half", {"env", std::string("LD_LIBRARY_PATH=") + FAKE_CUDA_DIR, VGPU_CHECK, "mem", cap},
         {{"gpuMilli", "500m"}});
  ASSERT_TRUE(
      WaitFor([&] { return Phase("half") == "Succeeded" || Phase("half") == "Failed"; }, 60s))
      << Workload("half").dump() << Logs();
  ASSERT_TRUE(WaitFor([&] { return Log("half").find("mem: PASS") != std::string::npos; }, 10s))
      << Log("half");
  EXPECT_EQ(Phase("half"), "Succeeded") << Workload("half").dump();
  EXPECT_NE(Log("half").find("total=" + cap), std::string::npos) << Log("half");
}

TEST_F(AgentFleetTest, AMigSlicesUseIsMeteredFromItsAgentsSamples) {
  // A MIG node: the agent reports the instance by its GPU instance id, the meter knows the slice
  // by its place in the geometry; the agent maps one to the other.
  std::ofstream(dir_.File("mig-fleet.yaml"))
      << "apiVersion: fabrica.dev/v1\nkind: Fleet\nnodes:\n"
         "  - {name: m1, cpu: 16, memory: 64Gi, gpus: {count: 1, model: H100, memory: 80Gi, "
         "mig: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}}\n";
  auto [code, body] = Call("POST", std::string(kApi) + "/nodes/m1/token", json{});
  ASSERT_EQ(code, 201) << body.dump();
  tokens_["m1"] = body["token"];
  StartAgent("m1", {}, "mig-fleet.yaml");
  ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 4; }, 30s)) << Logs();
  Submit("eval", {"sleep", "300"}, {{"mig", "2g.20gb"}});
  ASSERT_TRUE(WaitFor([&] { return Phase("eval") == "Running"; }, 30s)) << Logs();
  ASSERT_EQ(NodeOf("eval"), "m1");
  // The simulated instance is 80% busy while the pod runs; a few samples later the workload's
  // used GPU time is 80% of what it held in the sampled span (2/7 of the GPU: 2g.20gb).
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  const std::string query = std::string(kApi) +
                            "/usage?by=workload&window=" + std::to_string(now_s - 86400) + "," +
                            std::to_string(now_s + 86400);
  json row;
  ASSERT_TRUE(WaitFor(
      [&] {
        json usage = Call("GET", query).second;
        for (const json& w : usage.value("windows", json::array())) {
          for (const json& r : w.value("rows", json::array())) {
            if (r.value("key", "").find("eval") != std::string::npos) row = r;
          }
        }
        return row.value("gpuMilliMsUsed", int64_t{0}) > 0;
      },
      30s))
      << Call("GET", query).second.dump() << Logs();
  EXPECT_GT(row.value("gpuMilliMsHeld", int64_t{0}), row.value("gpuMilliMsUsed", int64_t{0}));
}

TEST_F(AgentFleetTest, ANewNodesBurnInRunsDcgmiOnTheNodeAndTheServerJudgesIt) {
  // An 8-GPU node whose `dcgmi` (a stand-in printing a recorded `dcgmi diag -r 3 -j`) finds GPU 5
  // failing its memory test: the server reads the report itself and records the verdict.
  std::ofstream(dir_.File("hgx-fleet.yaml"))
      << "apiVersion: fabrica.dev/v1\nkind: Fleet\nnodes:\n"
         "  - {name: h1, cpu: 224, memory: 2Ti, gpus: {count: 8, model: H100, memory: 80Gi}}\n";
  const std::string dcgmi = dir_.File("dcgmi");
  std::ofstream(dcgmi) << "#!/bin/sh\ncat " << FABRICA_SOURCE_DIR
                       << "/tests/data/health/dcgm_diag_r3_fail_gpu5.json\nexit 1\n";
  ::chmod(dcgmi.c_str(), 0755);
  auto [code, body] = Call("POST", std::string(kApi) + "/nodes/h1/token", json{});
  ASSERT_EQ(code, 201) << body.dump();
  tokens_["h1"] = body["token"];
  StartAgent("h1", {"--dcgmi", dcgmi, "--dcgm-level", "3"}, "hgx-fleet.yaml");
  json record;
  ASSERT_TRUE(WaitFor(
      [&] {
        record = Call("GET", std::string(kApi) + "/nodes/h1/health").second;
        return !record.value("burnIns", json::array()).empty();
      },
      30s))
      << record.dump(1) << Logs();
  const json burn = record["burnIns"][0];
  EXPECT_FALSE(burn.value("passed", true)) << burn.dump();
  EXPECT_EQ(burn.value("source", ""), "dcgmi diag") << burn.dump();
  EXPECT_EQ(burn.value("failedGpus", json::array()), json::array({5})) << burn.dump();
}

}  // namespace
}  // namespace fabrica
