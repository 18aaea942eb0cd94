// The node agent's threads in one process, for ThreadSanitizer: the round (Tick) on the test's
// thread, the assignment watch on its own, and /metrics readers hammering MetricsText, against an
// in-process API server and scheduler. Pods are real processes; the workload must run to its end
// and be reported.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "../test_util.h"
#include "agent/agent.h"
#include "api/api_server.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "control/clock.h"
#include "control/scheduler.h"
#include "store/store.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kApi[] = "/apis/fabrica.dev/v1";

TEST(AgentConcurrencyTest, RoundsWatchAndMetricsReadersShareTheAgent) {
  test::TempDir dir;
  RealClock clock;
  std::unique_ptr<Store> store = NewMemoryStore();
  auto auth = Authorizer::Parse(test::AuthYaml("conc"), "inline auth");
  ASSERT_TRUE(auth.ok()) << auth.status().message();
  ApiServer api(*store, *auth, clock, nullptr);
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  options.tls = false;
  options.threads = 4;
  HttpServer server(options, [&api](const HttpRequest& r) { return api.Handle(r); });
  ASSERT_TRUE(server.Start().ok());
  ClientOptions client;
  client.server = "http://127.0.0.1:" + std::to_string(server.port());
  client.timeout_seconds = 10;
  ClientOptions admin = client;
  admin.token = test::TestToken("admin", "conc");
  HttpClient http(admin);
  ASSERT_EQ(http.Do("POST", std::string(kApi) + "/tenants",
                    json{{"apiVersion", "fabrica.dev/v1"},
                         {"kind", "Tenant"},
                         {"metadata", {{"name", "team-a"}}},
                         {"spec", {{"trust", "trusted"}}}}
                        .dump())
                ->status,
            201);

  auto fleet = ParseFleetYaml(
      "nodes: [{name: c1, cpu: 16, memory: 64Gi, gpus: {count: 2, model: H100, memory: 80Gi}}]\n",
      "inline fleet");
  ASSERT_TRUE(fleet.ok());
  auto devices = NewSimDeviceBackend(*fleet, "c1", [&clock] { return clock.NowMs(); });
  ASSERT_TRUE(devices.ok());
  AgentOptions ao;
  ao.client = client;
  ao.client.token = *api.IssueNodeToken("c1");
  ao.node = "c1";
  ao.state_dir = dir.File("agent");
  ao.heartbeat_ms = 200;
  ao.sample_ms = 100;
  ao.grace_ms = 500;
  NodeAgent agent(ao, std::move(*devices), clock);
  ASSERT_TRUE(agent.Start(/*watch=*/true).ok());

  std::atomic<bool> stop{false};
  Scheduler scheduler(*store, clock, SchedulerOptions{}, nullptr);
  std::thread scheduling([&] {
    while (!stop) {
      (void)scheduler.RunOnce();
      std::this_thread::sleep_for(20ms);
    }
  });
  std::atomic<int64_t> pages{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      while (!stop) {
        if (agent.MetricsText().find("DCGM_FI_DEV_GPU_UTIL") != std::string::npos) ++pages;
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (int i = 0; i < 4; ++i) {
    json w = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Workload"},
              {"metadata", {{"name", "job-" + std::to_string(i)}, {"namespace", "team-a"}}},
              {"spec",
               {{"podSets",
                 {{{"name", "main"},
                   {"count", 1},
                   {"cpu", "1"},
                   {"memory", "1Gi"},
                   {"devices", {{"gpus", 1}}}}}},
                {"run", {{"command", {"sh", "-c", "echo job " + std::to_string(i)}}}}}}};
    ASSERT_EQ(http.Do("POST", std::string(kApi) + "/namespaces/team-a/workloads", w.dump())->status,
              201);
  }
  auto done = [&] {
    for (int i = 0; i < 4; ++i) {
      auto r = http.Do("GET",
                       std::string(kApi) + "/namespaces/team-a/workloads/job-" + std::to_string(i));
      if (!r.ok()) return false;
      json w = json::parse(r->body, nullptr, false);
      if (!w.is_object() || w["status"].value("phase", "") != "Succeeded") return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool finished = false;
  while (!finished && std::chrono::steady_clock::now() < deadline) {
    (void)agent.Tick();
    agent.WaitForWork(50);
    finished = done();
  }
  stop = true;
  scheduling.join();
  for (std::thread& t : readers) t.join();
  EXPECT_TRUE(finished) << "the four workloads did not all succeed";
  EXPECT_GT(pages.load(), 0);
  server.Stop();
}

}  // namespace
}  // namespace fabrica
