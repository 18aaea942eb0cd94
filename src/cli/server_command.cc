#include "cli/server_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "api/api_server.h"
#include "api/metrics.h"
#include "cli/factory_defaults.h"
#include "client/http_client.h"
#include "control/agent_service.h"
#include "control/health_controller.h"
#include "control/meter_service.h"
#include "control/scheduler.h"
#include "control/sim_agent.h"
#include "core/workload.h"
#include "core/yaml_reader.h"
#include "sim/openb.h"

namespace fabrica::cli {
namespace {

using json = nlohmann::json;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct ServerArgs {
  std::string data = "fabrica-data";
  std::string listen = "127.0.0.1:8443";
  std::string auth_file;
  std::string fleet_file;  // simulate these nodes in-process
  std::string policy = "fabrica";
  double time_scale = 1.0;
  bool plain_http = false;
  double run_seconds = 0;  // stop after this many wall seconds (0 = until a signal)
  std::string prices_file;
  std::vector<std::string> dcgm_exporters;  // dcgm-exporter /metrics URLs the server reads
  double preemption_grace_s = 30;
  double usage_half_life_s = 3600;  // (kDefaultUsageHalfLifeS)
  double reclaim_hold_s = 300;
  double reclaim_min_runtime_s = 3600;
  bool lend_across_trees = false;
  double reserve_after_s = 0;
  int max_reservations = 4;
  bool fair_share_preemption = false;
  bool no_elastic_growth = false;
  bool no_elastic_shrink = false;
  double gang_timeout_s = 300;
  double gang_requeue_backoff_s = 60;
  int gang_requeue_limit = 0;
  double unstarted_node_hold_s = 1800;
  bool up = false;
};

std::string RandomToken() {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) out += hex[rd() & 15];
  return out;
}

// Through a temporary file and a rename: a server killed mid-write leaves the old file whole
// (the saved virtual clock is written each second).
// (Created with `mode` from the start, so a secret is never readable by others meanwhile.)
Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());  // (one left by a crash may have other permissions)
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return InvalidArgument("cannot write '" + tmp + "': " + std::strerror(errno));
  bool ok = ::fchmod(fd, mode) == 0;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ::fsync(fd) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return InvalidArgument("cannot write '" + path + "'");
  }
  return Status::Ok();
}

// The auth file `fabrica up` writes on first start: an admin, a member of each example tenant and
// a viewer, each with a fresh random token.
std::string DefaultAuthYaml() {
  std::string y = "# Written by `fabrica up`: bearer tokens and role bindings.\ntokens:\n";
  const char* users[][2] = {{"admin", ""},       {"alice", "team-a"},     {"bob", "team-b"},
                            {"carol", "team-c"}, {"xavier", "partner-x"}, {"vera", ""}};
  for (auto& u : users) y += "  - {token: " + RandomToken() + ", user: " + u[0] + "}\n";
  y += "bindings:\n  - {role: platform-admin, user: admin}\n";
  for (auto& u : users) {
    if (u[1][0])
      y += std::string("  - {role: tenant-admin, tenant: ") + u[1] + ", user: " + u[0] + "}\n";
  }
  y += "  - {role: viewer, user: vera}\n";
  return y;
}

int Run(ServerArgs args) {
  auto fail = [&](const Status& st) {
    std::cerr << (args.up ? "fabrica up: " : "fabrica server: ") << st.message() << "\n";
    return 2;
  };
  mkdir(args.data.c_str(), 0700);
  struct stat sb;
  if (stat(args.data.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    return fail(InvalidArgument("--data '" + args.data + "' is not a directory"));
  }
  const std::string host = args.listen.substr(0, args.listen.rfind(':'));
  if (!args.plain_http) {
    Status st = EnsureServerCertificates(args.data, {"localhost", "127.0.0.1", host});
    if (!st.ok()) return fail(st);
  }
  if (args.auth_file.empty()) {
    args.auth_file = args.data + "/auth.yaml";
    if (stat(args.auth_file.c_str(), &sb) != 0) {
      if (!args.up)
        return fail(InvalidArgument("no --auth file, and " + args.auth_file + " does not exist"));
      Status st = WriteFile(args.auth_file, DefaultAuthYaml(), 0600);
      if (!st.ok()) return fail(st);
    }
  }
  auto auth_text = sim::ReadFile(args.auth_file);
  if (!auth_text.ok()) return fail(auth_text.status());
  auto auth = Authorizer::Parse(*auth_text, args.auth_file);
  if (!auth.ok()) return fail(auth.status());

  auto store = OpenSqliteStore(args.data + "/store.db");
  if (!store.ok()) return fail(store.status());
  // Virtual time (--time-scale, `up`'s x60) carries on from where it stopped: a restarted
  // factory's clock never runs back behind the times it stamped.
  const std::string clock_path = args.data + "/virtual-clock";
  // Whatever the scale now: a clock an earlier run moved ahead of the wall clock is never
  // taken back, even in real time.
  int64_t resume_ms = -1;
  {
    const int64_t wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    if (auto saved = sim::ReadFile(clock_path); saved.ok()) {
      char* end = nullptr;
      const long long at = std::strtoll(saved->c_str(), &end, 10);
      if (end != saved->c_str() && at > wall) resume_ms = at;
    }
  }
  RealClock clock(args.time_scale, resume_ms);
  // (Saved each wall second, a second ahead: killed before the next save, it still resumes
  // after every time it stamped. A clock that is the wall clock has nothing to save.)
  const bool virtual_time = args.time_scale != 1.0 || resume_ms >= 0;
  const auto save_clock = [&] {
    if (virtual_time)
      (void)WriteFile(
          clock_path,
          std::to_string(clock.NowMs() + static_cast<int64_t>(1000 * args.time_scale)) + "\n",
          0600);
  };
  save_clock();  // (before anything is stamped: a kill in the first second loses nothing)
  Metrics metrics;
  ApiServer api(**store, *auth, clock, &metrics);

  // Metering: its own journal beside the store; prices from --prices, else the embedded list.
  MeterServiceOptions meter_options;
  meter_options.journal_path = args.data + "/meter.db";
  {
    std::string prices_text = kDefaultPricesYaml;
    if (!args.prices_file.empty()) {
      auto text = sim::ReadFile(args.prices_file);
      if (!text.ok()) return fail(text.status());
      prices_text = *text;
    }
    auto prices = ParsePriceBook(prices_text,
                                 args.prices_file.empty() ? "embedded prices" : args.prices_file);
    if (!prices.ok()) return fail(prices.status());
    meter_options.prices = *prices;
  }
  auto meter = MeterService::Open(**store, clock, meter_options);
  if (!meter.ok()) return fail(meter.status());
  // Fleet health: node lifecycle, cordons, drains and remediation (control/health_controller.h).
  // Agents heartbeat in wall time: at a high time scale one round of their HTTP calls can take
  // longer than 40 s of virtual time, and a node would be taken for dead (its work requeued, the
  // node drained, rebooted and burnt in) for being slow. The timeout, for the scheduler and the
  // health controller alike, is therefore at least 3 wall seconds.
  const int64_t heartbeat_timeout_ms =
      std::max<int64_t>(40'000, static_cast<int64_t>(3000 * args.time_scale));
  HealthControllerOptions health_options;
  health_options.remediation.health.heartbeat_timeout_ms = heartbeat_timeout_ms;
  HealthController health(**store, clock, *auth, health_options, &metrics);
  // Node tokens and workload logs for node agents (control/agent_service.h).
  AgentServiceOptions agent_options;
  agent_options.log_dir = args.data + "/logs";
  AgentService agent_service(
      **store, *auth, [&api](const std::string& node) { return api.IssueNodeToken(node); },
      agent_options);
  api.SetExtension(ChainExtensions(ChainExtensions(health.Routes(), (*meter)->Routes()),
                                   agent_service.Routes()));
  api.SetMetricsExtra([m = meter->get()] { return m->MetricsText(); });
  api.SetEvictionGrace(static_cast<int64_t>(args.preemption_grace_s * 1000));
  HttpServerOptions options;
  options.listen = args.listen;
  options.tls = !args.plain_http;
  // Reads are served on the I/O threads; writes, which wait for their group commit, on a pool
  // large enough that every waiting writer joins the next commit.
  options.threads = 2;
  options.offload = ApiServer::MayBlock;
  options.offload_threads = 64;
  options.cert_file = args.data + "/server.crt";
  options.key_file = args.data + "/server.key";
  HttpServer server(options, [&api](const HttpRequest& r) { return api.Handle(r); });
  Status started = server.Start();
  if (!started.ok()) return fail(started);
  const std::string url = std::string(args.plain_http ? "http" : "https") + "://" + host + ":" +
                          std::to_string(server.port());

  // The admin token, for the bootstrap below and the fabctl config.
  std::string admin_token;
  {
    auto doc = LoadYaml(*auth_text, args.auth_file);
    if (doc.ok() && (*doc)["tokens"]) {
      for (const auto& t : (*doc)["tokens"]) {
        if (t["user"] && t["user"].Scalar() == "admin") admin_token = t["token"].Scalar();
      }
    }
  }
  ClientOptions client;
  client.server = url;
  client.ca_file = args.plain_http ? "" : args.data + "/ca.crt";

  Fleet fleet;
  std::string fleet_text;
  if (!args.fleet_file.empty()) {
    auto text = sim::ReadFile(args.fleet_file);
    if (!text.ok()) return fail(text.status());
    fleet_text = *text;
  } else if (args.up) {
    fleet_text = kDefaultFleetYaml;
  }
  if (!fleet_text.empty()) {
    auto parsed =
        ParseFleetYaml(fleet_text, args.fleet_file.empty() ? "embedded fleet" : args.fleet_file);
    if (!parsed.ok()) return fail(parsed.status());
    fleet = *parsed;
  }
  if (args.up && !admin_token.empty()) {
    // Example tenants, through the API like any client.
    ClientOptions admin = client;
    admin.token = admin_token;
    HttpClient http(admin);
    auto manifest = ParseManifestYaml(kDefaultTenantsYaml, "embedded tenants");
    for (const Tenant& t : manifest->tenants) {
      json obj = {{"apiVersion", "fabrica.dev/v1"},
                  {"kind", "Tenant"},
                  {"metadata", {{"name", t.name.str()}}},
                  {"spec", {{"trust", TrustLevelName(t.trust)}, {"trustDomain", t.trust_domain}}}};
      auto r = http.Do("POST", "/apis/fabrica.dev/v1/tenants", obj.dump());
      if (!r.ok()) return fail(r.status());
    }
  }
  std::map<std::string, std::string> node_tokens;
  for (const Node& n : fleet.nodes) {
    auto token = api.IssueNodeToken(n.name.str());
    if (!token.ok()) return fail(token.status());
    node_tokens[n.name.str()] = *token;
  }
  // The fleet file's scheduled faults count from the factory's first start on this data (its
  // virtual time carries on across restarts, so a fault fires once, not at each start); a
  // schedule changed since starts anew.
  int64_t schedule_start_ms = -1;
  if (!fleet.faults.empty()) {
    std::string schedule;
    for (const FaultInjection& f : fleet.faults)
      schedule += f.node.str() + "@" + std::to_string(f.at_ms) + ":" + std::to_string(f.xid) + "/" +
                  std::to_string(f.gpu) + "/" + std::to_string(f.ecc_double_bit) +
                  (f.kill ? "/kill" : "") + (f.stall ? "/stall" : "") + ";";
    uint64_t hash = 14695981039346656037ull;  // FNV-1a
    for (unsigned char c : schedule) hash = (hash ^ c) * 1099511628211ull;
    const std::string path = args.data + "/fault-schedule";
    const std::string mark = std::to_string(hash);
    if (auto saved = sim::ReadFile(path); saved.ok()) {
      std::istringstream in(*saved);
      long long at = -1;
      std::string was;
      if (in >> at >> was && was == mark && at >= 0) schedule_start_ms = at;
    }
    if (schedule_start_ms < 0) {
      schedule_start_ms = clock.NowMs();
      (void)WriteFile(path, std::to_string(schedule_start_ms) + " " + mark + "\n", 0600);
    }
  }
  SimulatedFleet agents(fleet, client, node_tokens, clock, 10'000, schedule_start_ms);
  HealthController::Simulation simulation;
  simulation.simulates = [&agents](const std::string& node) { return agents.Simulates(node); };
  simulation.inject = [&agents](const FaultInjection& f) { return agents.Inject(f); };
  simulation.repaired = [&agents](const std::string& node, int gpu) { agents.Repaired(node, gpu); };
  health.SetSimulation(simulation);
  if (!fleet.nodes.empty()) {
    Status first = agents.Tick();  // register and heartbeat before the first scheduling cycle
    if (!first.ok()) std::cerr << "simulated nodes: " << first.message() << "\n";
    agents.Start(static_cast<int64_t>(std::max(20.0, 1000.0 / args.time_scale)));
  }

  SchedulerOptions sched_options;
  sched_options.policy = args.policy;
  sched_options.node_grace_ms = heartbeat_timeout_ms;
  sched_options.require_health_record = true;  // new nodes are inspected and burnt in first
  sched_options.preemption_grace_ms = static_cast<int64_t>(args.preemption_grace_s * 1000);
  sched_options.usage_half_life_s = args.usage_half_life_s;
  sched_options.reclaim_hold_s = args.reclaim_hold_s;
  sched_options.reclaim_min_runtime_s = args.reclaim_min_runtime_s;
  sched_options.lend_across_trees = args.lend_across_trees;
  sched_options.reserve_after_s = args.reserve_after_s;
  sched_options.max_reservations = args.max_reservations;
  sched_options.fair_share_preemption = args.fair_share_preemption;
  sched_options.elastic_growth = !args.no_elastic_growth;
  sched_options.elastic_shrink = !args.no_elastic_shrink;
  // (In wall time too, as heartbeats: at a high time scale a gang's agents need a few wall
  // seconds to report its pods started, however few virtual seconds the timeout is.)
  sched_options.gang_timeout_s = std::max(args.gang_timeout_s, 3 * args.time_scale);
  sched_options.gang_requeue_backoff_s = args.gang_requeue_backoff_s;
  sched_options.gang_requeue_limit = args.gang_requeue_limit;
  sched_options.unstarted_node_hold_s = args.unstarted_node_hold_s;
  sched_options.admission_hold = [m = meter->get()](const std::string& tenant,
                                                    const std::string& queue) {
    return m->AdmissionHold(tenant, queue);
  };
  Scheduler scheduler(**store, clock, sched_options, &metrics);
  std::atomic<bool> stop_scheduler{false};
  const int64_t interval_wall_ms = static_cast<int64_t>(std::max(20.0, 1000.0 / args.time_scale));
  std::thread scheduler_thread([&] {
    auto saved = std::chrono::steady_clock::now();
    while (!stop_scheduler) {
      if (std::chrono::steady_clock::now() - saved >= std::chrono::seconds(1)) {
        save_clock();
        saved = std::chrono::steady_clock::now();
      }
      // Health first, so that a cordon decided now already holds in this placement cycle.
      Status healthy = health.Sync();
      if (!healthy.ok()) std::cerr << "health: " << healthy.message() << "\n";
      auto stats = scheduler.RunOnce();
      if (!stats.ok()) std::cerr << "scheduler: " << stats.status().message() << "\n";
      Status metered = (*meter)->Sync();
      if (!metered.ok()) std::cerr << "meter: " << metered.message() << "\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_wall_ms));
    }
  });
  // Utilization read from dcgm-exporter endpoints, every 30 s of the factory's clock.
  std::thread scrape_thread;
  if (!args.dcgm_exporters.empty()) {
    std::vector<ScrapeTarget> targets;
    for (const std::string& url : args.dcgm_exporters) targets.push_back({url, "", ""});
    const auto period = std::chrono::milliseconds(
        static_cast<int64_t>(std::max(200.0, 30'000.0 / args.time_scale)));
    scrape_thread = std::thread([&, targets, period] {
      while (!stop_scheduler) {
        Status st = (*meter)->ScrapeOnce(targets);
        if (!st.ok()) std::cerr << "meter: " << st.message() << "\n";
        const auto until = std::chrono::steady_clock::now() + period;
        while (!stop_scheduler && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }

  const std::string config_path = args.data + "/fabctl.yaml";
  if (!admin_token.empty()) {
    std::string cfg = "server: " + url + "\ntoken: " + admin_token + "\n";
    if (!args.plain_http) cfg += "ca: " + args.data + "/ca.crt\n";
    (void)WriteFile(config_path, cfg, 0600);
  }
  std::printf("fabrica %s listening on %s (time x%.0f), data in %s\n",
              args.up ? "factory" : "server", url.c_str(), args.time_scale, args.data.c_str());
  if (args.up) {
    std::printf(
        "%zu simulated nodes; tenants team-a, team-b (trust domain research), team-c, partner-x "
        "(untrusted)\n",
        fleet.nodes.size());
    std::printf(
        "Try:\n  export FABRICA_CONFIG=%s\n  build/release/src/cli/fabctl get nodes\n"
        "  build/release/src/cli/fabctl apply -f examples/demo.yaml\n"
        "  build/release/src/cli/fabctl get workloads -A -w\n"
        "Tokens for the example users are in %s/auth.yaml.\n",
        config_path.c_str(), args.data.c_str());
  }
  std::fflush(stdout);

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const auto began = std::chrono::steady_clock::now();
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (args.run_seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() >=
            args.run_seconds) {
      break;
    }
  }
  agents.Stop();
  stop_scheduler = true;
  scheduler_thread.join();
  save_clock();
  if (scrape_thread.joinable()) scrape_thread.join();
  (void)(*meter)->Sync();
  server.Stop();
  std::printf("stopped\n");
  return 0;
}

void AddCommon(CLI::App* cmd, ServerArgs* a) {
  cmd->add_option("--data", a->data, "data directory (store, certificates, auth file)");
  cmd->add_option("--listen", a->listen, "host:port to listen on (port 0 picks one)");
  cmd->add_option("--auth", a->auth_file, "auth file: tokens and role bindings");
  cmd->add_option("--fleet", a->fleet_file, "fleet YAML of nodes to simulate in-process");
  cmd->add_option("--policy", a->policy, "placement policy");
  cmd->add_option("--prices", a->prices_file, "price book YAML (currency, gpuHour per model)");
  cmd->add_option(
      "--dcgm-exporter", a->dcgm_exporters,
      "a dcgm-exporter /metrics URL to read GPU utilization from every 30 s (repeatable)");
  cmd->add_option("--time-scale", a->time_scale, "run virtual time this many times faster")
      ->check(CLI::Range(0.01, 100000.0));
  cmd->add_flag("--plain-http", a->plain_http, "serve plain HTTP (tests only)");
  cmd->add_option("--run-seconds", a->run_seconds, "stop after this many seconds (0: on a signal)");
  cmd->add_option("--preemption-grace", a->preemption_grace_s,
                  "seconds a preempted workload keeps running before it is requeued (default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--usage-half-life", a->usage_half_life_s,
                  "half-life in seconds of the usage history in fair share (default 3600; 0: "
                  "current usage only)")
      ->check(CLI::Range(0.0, 365.0 * 86400));
  cmd->add_option("--reclaim-hold", a->reclaim_hold_s,
                  "seconds that the room (GPUs, CPU, memory) a reclaim freed beyond its need stays "
                  "with the reclaiming queue (0: lent at once)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--reserve-after", a->reserve_after_s,
                  "seconds a workload of two or more whole GPUs, within its queue's guarantee, "
                  "waits without room before nodes are reserved for it: what frees there is "
                  "held until it fits (Slurm's backfill reservation; 0: none)")
      ->check(CLI::Range(0.0, 365.0 * 86400));
  cmd->add_option("--max-reservations", a->max_reservations,
                  "reservations (--reserve-after) held at a time")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--reclaim-min-runtime", a->reclaim_min_runtime_s,
                  "seconds at most that a workload's minRuntimeSeconds shields it from another "
                  "queue taking its GPUs back, where neither its queue nor one above it sets "
                  "spec.reclaimMinRuntimeSeconds (default 3600; 31536000, a year, is no cap)")
      ->check(CLI::Range(0.0, 365.0 * 86400));
  cmd->add_flag("--lend-across-trees", a->lend_across_trees,
                "let queue trees (several root queues) lend each other the GPUs they leave "
                "unused and borrow what no tree is guaranteed, within their roots' lending and "
                "borrowing limits, taken back by reclaim (as KAI's departments); by default a "
                "tree borrows nothing from another (as Kueue's cohorts), and holds more than "
                "its root's guarantee only where a queue within its own guarantee runs on GPUs "
                "no tree is guaranteed rather than evict the sibling that borrows its room");
  cmd->add_flag("--fair-share-preemption", a->fair_share_preemption,
                "also preempt a queue's work for a sibling whose weighted share would stay "
                "below its own after the eviction, so that weights rebalance running work (as "
                "KAI's over-quota reclaim by weight, Kueue's fairSharing); not with a queue's "
                "preemption.borrowWithinCohort");
  cmd->add_flag("--no-elastic-growth", a->no_elastic_growth,
                "keep work admitted with fewer pods than asked (minCount) at that size; by "
                "default it takes more pods as room frees and its queue's quota allows");
  cmd->add_flag("--no-elastic-shrink", a->no_elastic_shrink,
                "evict elastic work whole; by default a preemption or reclaim first takes its "
                "pods beyond its minCount and leaves it running with the rest");
  cmd->add_option("--gang-timeout", a->gang_timeout_s,
                  "seconds an admitted workload (a gang, or any other: Kueue's waitForPodsReady) "
                  "may take to start all its pods before it gives its GPUs back and waits again "
                  "(at least 3 wall seconds: 3 x --time-scale)")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--gang-requeue-backoff", a->gang_requeue_backoff_s,
                  "seconds a gang released by the timeout waits before it tries again, doubled "
                  "with each release (up to an hour)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--gang-requeue-limit", a->gang_requeue_limit,
                  "times a gang may be released by the timeout and requeued; the release past it "
                  "deactivates it (spec.active false; 2: deactivated at its third; 0: no limit)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--unstarted-node-hold", a->unstarted_node_hold_s,
                  "seconds a node where pods the pods-ready timeout gave up on did not start, "
                  "while it renewed its lease, takes no new work, unless a pod starts there "
                  "first (condition PodsStarting False; 0: none held)")
      ->check(CLI::Range(0.0, 86400.0));
}

}  // namespace

void AddServerCommands(CLI::App& app, int* exit_code) {
  auto server_args = std::make_shared<ServerArgs>();
  CLI::App* server = app.add_subcommand("server", "Run the control plane");
  AddCommon(server, server_args.get());
  server->callback([server_args, exit_code] { *exit_code = Run(*server_args); });

  auto up_args = std::make_shared<ServerArgs>();
  up_args->up = true;
  up_args->time_scale = 60;
  CLI::App* up = app.add_subcommand(
      "up", "Start a local factory: server, simulated nodes, example tenants, fabctl config");
  AddCommon(up, up_args.get());
  up->callback([up_args, exit_code] { *exit_code = Run(*up_args); });
}

}  // namespace fabrica::cli
