#include "cli/agent_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/gpu_stress.h"
#include "api/http_server.h"

namespace fabrica::cli {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct AgentArgs {
  std::string server = "https://127.0.0.1:8443";
  std::string ca;
  std::string token;
  std::string token_file;
  std::string node;
  std::string devices = "nvml";
  std::string state_dir;
  std::string cgroup_root;
  std::string metrics_listen;
  std::string shim;
  std::string dcgmi = "auto", nccl_all_reduce = "auto";
  double gpu_burn_seconds = 10;
  int64_t gpu_burn_mib = 1024;
  int dcgm_level = 2;
  double heartbeat_s = 10, sample_s = 30, grace_s = 30, poll_s = 1;
  int lease_s = 40;
  bool dry_run = false;
  double run_seconds = 0;
};

int Run(AgentArgs args) {
  auto fail = [](const Status& st) {
    std::cerr << "fabrica agent: " << st.message() << "\n";
    return 2;
  };
  if (args.node.empty()) return fail(InvalidArgument("--node: required"));
  // A lease that runs out between two renewals would have the node taken for dead (and sent
  // to repair) while its agent is fine; the server accepts leases up to an hour.
  if (args.heartbeat_s <= 0) return fail(InvalidArgument("--heartbeat-seconds: must be positive"));
  if (args.lease_s < 1 || args.lease_s > 3600)
    return fail(InvalidArgument("--lease-seconds: must be from 1 to 3600"));
  if (args.lease_s <= args.heartbeat_s) {
    char heartbeat[32];
    std::snprintf(heartbeat, sizeof(heartbeat), "%g", args.heartbeat_s);
    return fail(InvalidArgument("--lease-seconds: " + std::to_string(args.lease_s) +
                                " must be longer than --heartbeat-seconds " + heartbeat));
  }
  if (!args.token_file.empty()) {
    std::ifstream in(args.token_file);
    if (!in) return fail(InvalidArgument("--token-file: cannot read '" + args.token_file + "'"));
    std::getline(in, args.token);
  }
  if (args.token.empty()) return fail(InvalidArgument("--token or --token-file: required"));
  if (args.server.rfind("https://", 0) == 0 && args.ca.empty()) {
    return fail(InvalidArgument("--ca: required for an https server"));
  }
  if (!args.shim.empty()) {
    std::ifstream probe(args.shim);
    if (!probe) return fail(InvalidArgument("--shim: no file '" + args.shim + "'"));
  }
  auto devices = OpenDeviceBackend(args.devices, args.node);
  if (!devices.ok()) return fail(devices.status());

  AgentOptions options;
  options.client.server = args.server;
  options.client.ca_file = args.ca;
  options.client.token = args.token;
  options.client.timeout_seconds = 10;
  options.node = args.node;
  options.state_dir = args.state_dir.empty() ? "fabrica-agent-" + args.node : args.state_dir;
  options.cgroup_root = args.cgroup_root;
  options.heartbeat_ms = static_cast<int64_t>(args.heartbeat_s * 1000);
  options.lease_seconds = args.lease_s;
  options.sample_ms = static_cast<int64_t>(args.sample_s * 1000);
  options.grace_ms = static_cast<int64_t>(args.grace_s * 1000);
  options.exec_commands = !args.dry_run;
  options.shim_library = args.shim;
  // Burn-in tools: found on PATH for real GPUs unless named (or turned off with "").
  auto tool = [&](const std::string& given, const char* name) -> std::string {
    if (given != "auto") return given;
    if (args.devices != "nvml") return "";
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const std::string candidate = dir + "/" + name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
  };
  options.gpu_burn_seconds = args.gpu_burn_seconds;
  options.gpu_burn_mib = args.gpu_burn_mib;
  options.dcgmi = tool(args.dcgmi, "dcgmi");
  options.dcgm_level = args.dcgm_level;
  options.nccl_all_reduce = tool(args.nccl_all_reduce, "all_reduce_perf");
  RealClock clock;
  NodeAgent agent(options, std::move(*devices), clock);
  Status started = agent.Start(/*watch=*/true);
  if (!started.ok()) return fail(started);

  std::unique_ptr<HttpServer> metrics;
  if (!args.metrics_listen.empty()) {
    HttpServerOptions mo;
    mo.listen = args.metrics_listen;
    mo.tls = false;
    mo.threads = 2;
    metrics = std::make_unique<HttpServer>(mo, [&agent](const HttpRequest& req) {
      HttpResponse r;
      if (req.path == "/metrics") {
        r.content_type = "text/plain; version=0.0.4";
        r.body = agent.MetricsText();
      } else if (req.path == "/healthz") {
        r.content_type = "text/plain";
        r.body = "ok";
      } else {
        r.status = 404;
        r.content_type = "text/plain";
        r.body = "no such path: " + req.path + "\n";
      }
      return r;
    });
    Status st = metrics->Start();
    if (!st.ok()) return fail(st);
  }
  std::printf("fabrica agent: node %s (%s devices, %zu GPUs) -> %s; state in %s; %s%s\n",
              args.node.c_str(), agent.devices().Kind().c_str(),
              agent.inventory().node.devices.size(), args.server.c_str(), options.state_dir.c_str(),
              agent.launcher().cgroup_note().c_str(),
              metrics ? ("; metrics on http://" +
                         args.metrics_listen.substr(0, args.metrics_listen.rfind(':')) + ":" +
                         std::to_string(metrics->port()) + "/metrics")
                            .c_str()
                      : "");
  std::fflush(stdout);

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  const auto began = std::chrono::steady_clock::now();
  std::string last_error;
  while (!g_stop) {
    Status st = agent.Tick();
    // Say each new trouble once, and when it clears.
    if (!st.ok() && st.message() != last_error)
      std::cerr << "fabrica agent: " << st.message() << "\n";
    if (st.ok() && !last_error.empty()) std::cerr << "fabrica agent: connected again\n";
    last_error = st.ok() ? "" : st.message();
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(args.poll_s * 1000));
    // Until the next round, or at once when the watch sees an assignment change.
    while (!g_stop && std::chrono::steady_clock::now() < until) {
      if (agent.WaitForWork(100)) break;
    }
    if (args.run_seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() >=
            args.run_seconds) {
      break;
    }
  }
  // Pods keep running: a restarted agent adopts them (or stops those no longer assigned).
  if (metrics) metrics->Stop();
  std::printf("fabrica agent: stopped\n");
  return 0;
}

}  // namespace

void AddAgentCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<AgentArgs>();
  CLI::App* cmd = app.add_subcommand("agent", "Run the node agent: register, heartbeat, run pods");
  cmd->add_option("--server", a->server, "the control plane's URL");
  cmd->add_option("--ca", a->ca, "PEM CA to verify the server with");
  cmd->add_option("--token", a->token, "the node's bearer token (fabctl nodes token NODE)");
  cmd->add_option("--token-file", a->token_file, "read the token from this file");
  cmd->add_option("--node", a->node, "this node's name")->required();
  cmd->add_option("--devices", a->devices, "nvml, or sim:FLEET_FILE to simulate that node's GPUs");
  cmd->add_option("--state-dir", a->state_dir, "pods' state, exit files and logs");
  cmd->add_option("--cgroup-root", a->cgroup_root,
                  "cgroup v2 directory for the pods' cgroups (empty: no cgroups)");
  cmd->add_option("--metrics-listen", a->metrics_listen,
                  "host:port for the dcgm-exporter-style /metrics page (e.g. 127.0.0.1:9400)");
  cmd->add_option("--shim", a->shim, "path of libfabrica-vgpu.so for fractional GPU shares");
  cmd->add_option("--dcgmi", a->dcgmi,
                  "dcgmi for burn-in (default: found on PATH with nvml devices; \"\": none)");
  cmd->add_option("--dcgm-level", a->dcgm_level, "dcgmi diag -r level for burn-in")
      ->check(CLI::Range(1, 4));
  cmd->add_option("--nccl-all-reduce", a->nccl_all_reduce,
                  "nccl-tests all_reduce_perf for node burn-in (default: found on PATH with nvml)");
  cmd->add_option("--gpu-burn-seconds", a->gpu_burn_seconds,
                  "built-in GPU burn per GPU during burn-in on real GPUs (0: none)");
  cmd->add_option("--gpu-burn-mib", a->gpu_burn_mib, "memory the built-in GPU burn checks");
  cmd->add_option("--heartbeat-seconds", a->heartbeat_s, "lease renewal period");
  cmd->add_option("--lease-seconds", a->lease_s, "lease duration written on the Lease");
  cmd->add_option("--sample-seconds", a->sample_s, "utilization sample period");
  cmd->add_option("--grace-seconds", a->grace_s, "SIGTERM to SIGKILL when a pod is stopped");
  cmd->add_option("--poll-seconds", a->poll_s, "time between rounds");
  cmd->add_flag("--dry-run", a->dry_run,
                "run a stand-in sleeping for each workload's duration instead of its command");
  cmd->add_option("--run-seconds", a->run_seconds, "stop after this many seconds (tests)");
  cmd->callback([a, exit_code] { *exit_code = Run(*a); });

  // `fabrica burn-in`: the agent's built-in GPU burn, by hand (and in tests/gpu/check.sh).
  auto burn = std::make_shared<std::pair<std::vector<int>, GpuStressOptions>>();
  CLI::App* b = app.add_subcommand(
      "burn-in", "Burn this machine's GPUs: a memory pattern check and a checked compute kernel");
  b->add_option("--gpu", burn->first, "CUDA ordinal (repeatable; default: every GPU)");
  b->add_option("--seconds", burn->second.seconds, "compute burn per GPU");
  b->add_option("--mib", burn->second.memory_mib, "memory to check per GPU");
  b->add_option("--threads", burn->second.threads, "burn kernel threads (each result checked)");
  b->callback([burn, exit_code] {
    auto results = StressGpus(burn->first, burn->second);
    if (!results.ok()) {
      std::cerr << "fabrica burn-in: " << results.status().message() << "\n";
      *exit_code = 2;
      return;
    }
    bool all = true;
    for (const GpuStressResult& r : *results) {
      std::printf("%s %s\n", r.passed ? "PASS" : "FAIL", r.message.c_str());
      all &= r.passed;
    }
    *exit_code = all ? 0 : 1;
  });
}

}  // namespace fabrica::cli
