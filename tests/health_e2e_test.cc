// End-to-end tests of fleet health (issue 7): faults injected live into a running factory.
//
// HealthFactoryTest runs the factory in this process as FactoryTest in e2e_test.cc does (SQLite
// store, the API over HTTPS, simulated agents through the real client, the scheduler) plus the
// HealthController, on a ManualClock driven by hand. Faults go in through the API as an operator
// would send them (POST .../nodes/N/inject); the simulated agent reports them as the node's own
// health report; the controller cordons, drains, requeues, repairs and burns in.
//
// UpProcessTest runs the real `fabrica up --time-scale 60` and injects one fault into it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/api_server.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "client/http_client.h"
#include "control/clock.h"
#include "control/health_controller.h"
#include "control/scheduler.h"
#include "control/sim_agent.h"
#include "core/fleet.h"
#include "store/store.h"
#include "test_net.h"
#include "test_util.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kApi[] = "/apis/fabrica.dev/v1";
constexpr char kAuthYaml[] = R"(tokens:
  - {token: admin-token-health-0123456789, user: admin}
  - {token: alice-token-health-0123456789, user: alice}
bindings:
  - {role: platform-admin, user: admin}
  - {role: tenant-member, tenant: team-a, user: alice}
)";

// Four 8-GPU nodes and a MIG node: five nodes, so at most one may be in remediation at once
// (95% must stay healthy; at least one may always heal).
constexpr char kFleetYaml[] = R"(apiVersion: fabrica.dev/v1
kind: Fleet
nodes:
  - name: hgx-a
    count: 2
    cpu: 224
    memory: 2Ti
    rack: rack-1
    leaf: leaf-1
    numaNodes: 2
    gpus: {count: 8, model: H100, memory: 80Gi}
  - name: hgx-b
    count: 2
    cpu: 224
    memory: 2Ti
    rack: rack-2
    leaf: leaf-2
    numaNodes: 2
    gpus: {count: 8, model: H100, memory: 80Gi}
  - name: hgx-mig
    cpu: 224
    memory: 2Ti
    rack: rack-2
    leaf: leaf-2
    numaNodes: 2
    gpus: {count: 2, model: H100, memory: 80Gi, mig: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}
)";

json Workload(const std::string& name, int gpus, int pods = 1) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Workload"},
          {"metadata", {{"name", name}, {"namespace", "team-a"}}},
          {"spec",
           {{"podSets",
             {{{"name", "main"},
               {"count", pods},
               {"cpu", "16"},
               {"memory", "64Gi"},
               {"devices", {{"gpus", gpus}}}}}},
            {"run", {{"command", {"train"}}, {"durationSeconds", 360000}}}}}};
}

class HealthFactoryTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EnsureServerCertificates(dir_.path(), {"127.0.0.1", "localhost"}).ok());
    auto store = OpenSqliteStore(dir_.File("store.db"));
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
    auto auth = Authorizer::Parse(kAuthYaml, "inline auth");
    ASSERT_TRUE(auth.ok()) << auth.status().message();
    auth_ = std::make_unique<Authorizer>(std::move(*auth));
    api_ = std::make_unique<ApiServer>(*store_, *auth_, clock_, nullptr);

    StartHealthController();

    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    options.tls = true;
    options.cert_file = dir_.File("server.crt");
    options.key_file = dir_.File("server.key");
    server_ = std::make_unique<HttpServer>(
        options, [this](const HttpRequest& r) { return api_->Handle(r); });
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.message();

    client_options_.server = "https://127.0.0.1:" + std::to_string(server_->port());
    client_options_.ca_file = dir_.File("ca.crt");
    client_options_.timeout_seconds = 20;
    admin_ = Client("admin-token-health-0123456789");

    auto fleet = ParseFleetYaml(kFleetYaml, "inline fleet");
    ASSERT_TRUE(fleet.ok()) << fleet.status().message();
    fleet_ = *fleet;
    for (const Node& n : fleet_.nodes) {
      auto token = api_->IssueNodeToken(n.name.str());
      ASSERT_TRUE(token.ok()) << token.status().message();
      node_tokens_[n.name.str()] = *token;
    }
    sim_ = std::make_unique<SimulatedFleet>(fleet_, client_options_, node_tokens_, clock_);
    health_->SetSimulation(SimulationHooks());
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, SchedulerOptions{}, nullptr);

    json t = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Tenant"},
              {"metadata", {{"name", "team-a"}}},
              {"spec", {{"trust", "trusted"}, {"trustDomain", "research"}}}};
    ASSERT_EQ(Call("POST", std::string(kApi) + "/tenants", t.dump()).status, 201);
    Status first = sim_->Tick();
    ASSERT_TRUE(first.ok()) << first.message();
    Cycle();
  }

  void TearDown() override {
    sim_.reset();
    if (server_) server_->Stop();
  }

  std::unique_ptr<HttpClient> Client(const std::string& token) {
    ClientOptions o = client_options_;
    o.token = token;
    return std::make_unique<HttpClient>(o);
  }

  ClientResponse Call(const std::string& method, const std::string& path,
                      const std::string& body = "") {
    auto r = admin_->Do(method, path, body);
    EXPECT_TRUE(r.ok()) << method << " " << path << ": " << r.status().message();
    return r.ok() ? *r : ClientResponse{};
  }

  // A health controller over the store (a new one: as a restarted server starts it), its
  // routes served by the API.
  void StartHealthController() {
    HealthControllerOptions ho;
    ho.remediation.eviction_grace_ms = 30'000;
    ho.sim_reset_ms = 60'000;
    ho.sim_reboot_ms = 120'000;
    ho.sim_burn_in_ms = 120'000;
    health_ = std::make_unique<HealthController>(*store_, clock_, *auth_, ho, nullptr);
    api_->SetExtension(health_->Routes());
  }
  // The simulated fleet's side of the controller's actions.
  HealthController::Simulation SimulationHooks() {
    HealthController::Simulation simulation;
    simulation.simulates = [this](const std::string& node) { return sim_->Simulates(node); };
    simulation.inject = [this](const FaultInjection& f) { return sim_->Inject(f); };
    simulation.repaired = [this](const std::string& node, int gpu) { sim_->Repaired(node, gpu); };
    return simulation;
  }

  ClientResponse Inject(const std::string& node, const json& body) {
    return Call("POST", std::string(kApi) + "/nodes/" + node + "/inject", body.dump());
  }

  void Create(const json& w) {
    ClientResponse r = Call("POST", std::string(kApi) + "/namespaces/team-a/workloads", w.dump());
    EXPECT_EQ(r.status, 201) << r.body;
  }

  std::map<std::string, json> Workloads() {
    std::map<std::string, json> out;
    json list = json::parse(Call("GET", std::string(kApi) + "/workloads").body, nullptr, false);
    for (const json& w : list.value("items", json::array())) {
      out[w["metadata"].value("name", "")] = w;
    }
    return out;
  }

  // The health record of every node, by name.
  std::map<std::string, json> Records() {
    std::map<std::string, json> out;
    json list = json::parse(Call("GET", std::string(kApi) + "/nodehealth").body, nullptr, false);
    for (const json& r : list.value("items", json::array())) {
      out[r["metadata"].value("name", "")] = r;
    }
    return out;
  }

  bool NodeUnschedulable(const std::string& node) {
    json n = json::parse(Call("GET", std::string(kApi) + "/nodes/" + node).body, nullptr, false);
    return n.value("spec", json::object()).value("unschedulable", false);
  }

  // One round: agents heartbeat and report, health reconciles, the scheduler places, agents
  // start what was placed. Afterwards the invariants every round must keep are checked:
  // nothing runs on a GPU or node that was out of service when it was placed, never more nodes
  // in remediation than the limit, and each workload's evictions are counted.
  void Cycle(int64_t advance_ms = 1000) {
    clock_.AdvanceMs(advance_ms);
    Status st = sim_->Tick();
    EXPECT_TRUE(st.ok()) << st.message();
    st = health_->Sync();
    EXPECT_TRUE(st.ok()) << st.message();
    // What is out of service as the scheduler starts its cycle.
    held_nodes_.clear();
    held_gpus_.clear();
    for (const auto& [name, r] : Records()) {
      if (!r.value("schedulable", true) || NodeUnschedulable(name)) held_nodes_.insert(name);
      for (const json& g : r.value("gpus", json::array())) {
        if (!g.value("schedulable", true)) {
          held_gpus_.insert(name + "/" + std::to_string(g.value("index", -1)));
        }
      }
    }
    auto stats = scheduler_->RunOnce();
    EXPECT_TRUE(stats.ok()) << stats.status().message();
    st = sim_->Tick();
    EXPECT_TRUE(st.ok()) << st.message();

    const std::map<std::string, json> records = Records();
    int in_remediation = 0;
    for (const auto& [name, r] : records) {
      const std::string state = r.value("state", "");
      if (state == "draining" || state == "repair" || state == "burn-in") ++in_remediation;
    }
    EXPECT_LE(in_remediation, 1) << "more nodes in remediation than the limit";
    max_in_remediation_ = std::max(max_in_remediation_, in_remediation);
    for (const auto& [name, w] : Workloads()) {
      const json status = w.value("status", json::object());
      const std::string phase = status.value("phase", "Pending");
      const std::string time = status.value("scheduledTime", "");
      // A requeue shows as a new binding (the eviction and the next placement may fall in one
      // round) or as Pending after a binding.
      const bool bound = phase == "Scheduled" || phase == "Running";
      if (!last_binding_[name].empty() && (!bound || time != last_binding_[name])) {
        ++requeued_[name];
      }
      last_binding_[name] = bound ? time : "";
      // A binding made in this round must avoid what was out of service before it.
      if (time.empty() || placed_checked_.count(name + "@" + time)) continue;
      placed_checked_.insert(name + "@" + time);
      for (const json& a : status.value("assignments", json::array())) {
        const std::string node = a.value("node", "");
        EXPECT_FALSE(held_nodes_.count(node)) << name << " placed on held node " << node;
        for (const json& d : a.value("devices", json::array())) {
          const std::string gpu = node + "/" + std::to_string(d.value("index", -1));
          EXPECT_FALSE(held_gpus_.count(gpu)) << name << " placed on cordoned GPU " << gpu;
        }
      }
    }
  }

  // Cycles until `done` holds, at most `max_cycles` rounds of `advance_ms`.
  template <typename F>
  bool CycleUntil(F done, int max_cycles, int64_t advance_ms = 5000) {
    for (int i = 0; i < max_cycles; ++i) {
      Cycle(advance_ms);
      if (done()) return true;
    }
    return false;
  }

  std::string State(const std::string& node) { return Records()[node].value("state", ""); }

  // Every node a workload's pods run on.
  static std::set<std::string> NodesOf(const json& w) {
    std::set<std::string> out;
    for (const json& a : w["status"].value("assignments", json::array())) {
      out.insert(a.value("node", ""));
    }
    return out;
  }

  static std::string History(const json& record) {
    std::string out;
    for (const json& h : record.value("history", json::array())) {
      out += h.value("from", "") + " -> " + h.value("to", "") +
             (h.contains("gpu") ? " (gpu " + std::to_string(h.value("gpu", -1)) + ")" : "") + ": " +
             h.value("reason", "") + "\n";
    }
    return out;
  }

  test::TempDir dir_{"health_e2e"};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Authorizer> auth_;
  ManualClock clock_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HealthController> health_;
  std::unique_ptr<HttpServer> server_;
  ClientOptions client_options_;
  std::unique_ptr<HttpClient> admin_;
  Fleet fleet_;
  std::map<std::string, std::string> node_tokens_;
  std::unique_ptr<SimulatedFleet> sim_;
  std::unique_ptr<Scheduler> scheduler_;

  std::set<std::string> held_nodes_, held_gpus_, placed_checked_;
  std::map<std::string, std::string> last_binding_;
  std::map<std::string, int> requeued_;
  int max_in_remediation_ = 0;
};

TEST_F(HealthFactoryTest, FatalXidOnOneGpuCordonsOnlyThatGpu) {
  for (const auto& [name, r] : Records()) EXPECT_EQ(r.value("state", ""), "available") << name;
  ClientResponse r = Inject("hgx-a-0", {{"xid", 48}, {"gpu", 3}});
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_TRUE(CycleUntil(
      [&] {
        json rec = Records()["hgx-a-0"];
        return rec["gpus"][3].value("state", "") != "in-service";
      },
      3, 1000));
  json rec = Records()["hgx-a-0"];
  EXPECT_EQ(rec.value("state", ""), "available") << History(rec);
  EXPECT_FALSE(NodeUnschedulable("hgx-a-0"));
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(rec["gpus"][d].value("schedulable", true), d != 3) << d;
  }
  bool xid_condition = false;
  for (const json& c : rec["conditions"]) {
    if (c.value("type", "") == "Xid48" && c.value("gpu", -1) == 3) {
      xid_condition = c.value("status", "") == "True";
    }
  }
  EXPECT_TRUE(xid_condition) << rec["conditions"].dump();

  // 33 one-GPU jobs on 31 usable whole GPUs (the MIG node takes no whole-GPU work): all land
  // around the cordoned GPU, and two wait.
  for (int i = 0; i < 33; ++i) Create(Workload("job-" + std::to_string(i), 1));
  Cycle();
  Cycle();
  int running = 0, on_a0 = 0;
  for (const auto& [name, w] : Workloads()) {
    for (const json& a : w["status"].value("assignments", json::array())) {
      ++running;
      if (a.value("node", "") == "hgx-a-0") {
        ++on_a0;
        EXPECT_NE(a["devices"][0].value("index", -1), 3) << name;
      }
    }
  }
  EXPECT_EQ(running, 31);
  EXPECT_EQ(on_a0, 7);

  // The reset and the GPU's burn-in bring it back; a waiting job lands on it.
  ASSERT_TRUE(CycleUntil(
      [&] { return Records()["hgx-a-0"]["gpus"][3].value("state", "") == "in-service"; }, 80))
      << History(Records()["hgx-a-0"]);
  ASSERT_TRUE(CycleUntil(
      [&] {
        for (const auto& [name, w] : Workloads()) {
          for (const json& a : w["status"].value("assignments", json::array())) {
            if (a.value("node", "") == "hgx-a-0" && a["devices"][0].value("index", -1) == 3) {
              return true;
            }
          }
        }
        return false;
      },
      3, 1000));
  const std::string history = History(Records()["hgx-a-0"]);
  for (const char* step : {"in-service -> cordoned (gpu 3)", "cordoned -> draining (gpu 3)",
                           "draining -> repair (gpu 3)", "repair -> burn-in (gpu 3)",
                           "burn-in -> in-service (gpu 3)"}) {
    EXPECT_NE(history.find(step), std::string::npos) << step << " missing from\n" << history;
  }
}

TEST_F(HealthFactoryTest, Xid79DrainsTheNodeAndRequeuesItsGangOnce) {
  Create(Workload("gang", 8, 2));
  Create(Workload("small", 2));
  ASSERT_TRUE(CycleUntil(
      [&] {
        for (const auto& [n, w] : Workloads()) {
          if (w["status"].value("phase", "") != "Running") return false;
        }
        return true;
      },
      5, 1000));
  const std::set<std::string> gang_nodes = NodesOf(Workloads()["gang"]);
  ASSERT_EQ(gang_nodes.size(), 2u);
  const std::string victim = *gang_nodes.begin();
  const std::string small_node = *NodesOf(Workloads()["small"]).begin();
  ASSERT_FALSE(gang_nodes.count(small_node));

  ASSERT_EQ(Inject(victim, {{"xid", 79}, {"gpu", 0}}).status, 202);
  Cycle(1000);
  Cycle(1000);
  EXPECT_TRUE(NodeUnschedulable(victim));
  EXPECT_EQ(State(victim), "draining") << History(Records()[victim]);
  // Within the grace period the gang keeps running, marked to stop (shown Evicting, with its
  // deadline; the scheduler counts its devices as leaving).
  const json marked = Workloads()["gang"]["status"];
  EXPECT_EQ(marked.value("phase", ""), "Running");
  EXPECT_EQ(marked.value("preemption", json::object()).value("evictor", ""), "health")
      << marked.dump();
  EXPECT_FALSE(marked.value("preemption", json::object()).value("deadline", "").empty());
  EXPECT_EQ(marked.value("message", "").rfind("evicting: node " + victim + " is draining", 0), 0u)
      << marked.dump();

  ASSERT_TRUE(CycleUntil(
      [&] {
        json g = Workloads()["gang"];
        return g["status"].value("phase", "") == "Running" && !NodesOf(g).count(victim);
      },
      20))
      << Workloads()["gang"].dump();
  EXPECT_EQ(requeued_["gang"], 1);
  EXPECT_EQ(requeued_["small"], 0);
  EXPECT_EQ(NodesOf(Workloads()["gang"]).size(), 2u);
  // Its record of evictions counts the drain, with the work its 16 GPUs lost (whole seconds
  // of it: the clock moves in whole seconds), which later victim choices weigh.
  const json evictions = Workloads()["gang"]["status"].value("evictions", json());
  EXPECT_EQ(evictions.value("count", 0), 1) << evictions.dump();
  EXPECT_EQ(evictions.value("last", json::object()).value("reason", ""), "Evicted")
      << evictions.dump();
  EXPECT_GE(evictions.value("gpuSecondsLost", int64_t{0}), 16) << evictions.dump();
  EXPECT_EQ(evictions.value("gpuSecondsLost", int64_t{0}) % 16, 0) << evictions.dump();
  EXPECT_EQ(*NodesOf(Workloads()["small"]).begin(), small_node);

  // Reboot, burn-in, back in service, and uncordoned.
  ASSERT_TRUE(CycleUntil([&] { return State(victim) == "available"; }, 120))
      << History(Records()[victim]);
  EXPECT_FALSE(NodeUnschedulable(victim));
  const std::string history = History(Records()[victim]);
  for (const char* step : {"available -> cordoned", "cordoned -> draining", "draining -> repair",
                           "repair -> burn-in", "burn-in -> available"}) {
    EXPECT_NE(history.find(step), std::string::npos) << step << " missing from\n" << history;
  }
  EXPECT_NE(history.find("RESTART_BM"), std::string::npos) << history;
  for (int i = 0; i < 5; ++i) Cycle(5000);
  EXPECT_EQ(requeued_["gang"], 1) << "requeued more than once";
  EXPECT_EQ(health_->stats().requeued, 1);
}

// A server restarted while the health controller drains a node: the workload it marked stops at
// the deadline it was told, not a grace period after the restart (a trial's was evicted, and
// billed, 10 s past the deadline it showed).
TEST_F(HealthFactoryTest, ARestartMidDrainKeepsTheEvictionsDeadline) {
  Create(Workload("w", 8));
  ASSERT_TRUE(CycleUntil([&] { return Workloads()["w"]["status"].value("phase", "") == "Running"; },
                         5, 1000));
  const std::string node = *NodesOf(Workloads()["w"]).begin();
  ASSERT_EQ(Inject(node, {{"xid", 79}, {"gpu", 0}}).status, 202);
  ASSERT_TRUE(
      CycleUntil([&] { return Workloads()["w"]["status"].contains("preemption"); }, 5, 1000));
  const std::string deadline = Workloads()["w"]["status"]["preemption"].value("deadline", "");
  const int64_t due = ParseTimestamp(deadline);
  ASSERT_GT(due, clock_.NowMs());
  Cycle(10'000);
  // The server stops and starts again.
  StartHealthController();
  health_->SetSimulation(SimulationHooks());
  while (clock_.NowMs() < due - 1000) Cycle(1000);
  EXPECT_EQ(Workloads()["w"]["status"].value("phase", ""), "Running");
  EXPECT_EQ(Workloads()["w"]["status"]["preemption"].value("deadline", ""), deadline);
  Cycle(2000);
  Cycle(1000);
  const json status = Workloads()["w"]["status"];
  EXPECT_EQ(requeued_["w"], 1) << status.dump();
  const int64_t evicted = ParseTimestamp(
      status.value("evictions", json::object()).value("last", json::object()).value("time", ""));
  EXPECT_GE(evicted, due) << status.dump();
  EXPECT_LE(evicted, due + 2000) << status.dump();
}

TEST_F(HealthFactoryTest, KilledAgentGoesNotReadyAndItsWorkIsRequeued) {
  Create(Workload("job", 4));
  ASSERT_TRUE(CycleUntil(
      [&] { return Workloads()["job"]["status"].value("phase", "") == "Running"; }, 5, 1000));
  const std::string victim = *NodesOf(Workloads()["job"]).begin();
  ASSERT_EQ(Inject(victim, {{"kill", true}}).status, 202);

  // Not ready once the heartbeat timeout (40 s) has passed without a lease renewal.
  int cycles = 0;
  ASSERT_TRUE(CycleUntil(
      [&] {
        ++cycles;
        return !Records()[victim].value("ready", true);
      },
      20));
  EXPECT_GE(cycles * 5, 30);
  ASSERT_TRUE(CycleUntil(
      [&] {
        json j = Workloads()["job"];
        return j["status"].value("phase", "") == "Running" && !NodesOf(j).count(victim);
      },
      20))
      << Workloads()["job"].dump();
  EXPECT_EQ(requeued_["job"], 1);

  // The reboot brings the agent back; burn-in returns the node to service.
  ASSERT_TRUE(CycleUntil([&] { return State(victim) == "available"; }, 120))
      << History(Records()[victim]);
  EXPECT_TRUE(Records()[victim].value("ready", false));
  for (int i = 0; i < 5; ++i) Cycle(5000);
  EXPECT_EQ(requeued_["job"], 1) << "requeued more than once";
}

// An administrator's cordon stays until an administrator lifts it, even one set while the
// health controller held the node (a user-style review saw the end of the repair lift it).
TEST_F(HealthFactoryTest, AnAdministratorsCordonOutlastsTheRepair) {
  const std::string node = "hgx-a-0";
  ASSERT_EQ(Inject(node, {{"xid", 79}, {"gpu", 0}}).status, 202);
  Cycle(1000);
  Cycle(1000);
  ASSERT_TRUE(NodeUnschedulable(node));
  const auto cordon = [&](bool on) {
    auto r =
        admin_->Do("PATCH", std::string(kApi) + "/nodes/" + node,
                   json{{"spec", {{"unschedulable", on}}}}.dump(), "application/merge-patch+json");
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().message());
  };
  const auto annotations = [&] {
    const json n =
        json::parse(Call("GET", std::string(kApi) + "/nodes/" + node).body, nullptr, false);
    return n["metadata"].value("annotations", json::object());
  };
  // The whole node written back as it reads (fabctl apply, the controller's cordon in it) is
  // no one's cordon: the controller's stays its own (a review found it stamped the admin's).
  {
    json n = json::parse(Call("GET", std::string(kApi) + "/nodes/" + node).body, nullptr, false);
    n["metadata"]["labels"]["rack"] = "r9";
    auto r = admin_->Do("PUT", std::string(kApi) + "/nodes/" + node, n.dump(), "application/json");
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().message());
    EXPECT_FALSE(annotations().contains(kCordonedByAnnotation));
  }
  cordon(true);
  EXPECT_EQ(annotations().value(kCordonedByAnnotation, ""), "admin");
  ASSERT_TRUE(CycleUntil([&] { return State(node) == "available"; }, 120))
      << History(Records()[node]);
  for (int i = 0; i < 3; ++i) Cycle(5000);
  EXPECT_TRUE(NodeUnschedulable(node)) << "the repair lifted the administrator's cordon";
  cordon(false);
  EXPECT_FALSE(NodeUnschedulable(node));
  EXPECT_FALSE(annotations().contains(kCordonedByAnnotation));
  // The controller's own cordon, with no one else's, is lifted at the end of its repair.
  ASSERT_EQ(Inject(node, {{"xid", 79}, {"gpu", 1}}).status, 202);
  Cycle(1000);
  Cycle(1000);
  ASSERT_TRUE(NodeUnschedulable(node));
  ASSERT_TRUE(CycleUntil([&] { return State(node) == "available"; }, 120))
      << History(Records()[node]);
  EXPECT_FALSE(NodeUnschedulable(node));
}

// A node out of service when the server stopped (here: it stopped renewing its lease while
// another node held the one remediation slot) is inspected and burnt in again when the server
// starts, and its cordon lifted then, rather than adopted in service unproven with the cordon
// left behind (a user-style review).
TEST_F(HealthFactoryTest, ANodeOutOfServiceWhenTheServerStoppedIsInspectedAgain) {
  ASSERT_EQ(Inject("hgx-a-0", {{"xid", 79}, {"gpu", 1}}).status, 202);
  Cycle(1000);
  const std::string node = "hgx-b-1";
  ASSERT_EQ(Inject(node, {{"kill", true}}).status, 202);
  ASSERT_TRUE(CycleUntil([&] { return State(node) == "cordoned"; }, 20))
      << History(Records()[node]);
  ASSERT_TRUE(NodeUnschedulable(node));
  // The server stops; its machines come back with it.
  sim_->Repaired(node, -1);
  StartHealthController();
  health_->SetSimulation(SimulationHooks());
  Cycle(1000);
  EXPECT_NE(State(node), "available") << History(Records()[node]);
  EXPECT_TRUE(NodeUnschedulable(node));
  ASSERT_TRUE(CycleUntil([&] { return State(node) == "available"; }, 200))
      << History(Records()[node]);
  for (int i = 0; i < 2; ++i) Cycle(5000);
  EXPECT_FALSE(NodeUnschedulable(node)) << History(Records()[node]);
  const std::string history = History(Records()[node]);
  EXPECT_NE(history.find("cordoned when the server stopped: drained and proven again"),
            std::string::npos)
      << history;
  EXPECT_NE(history.find("burn-in -> available"), std::string::npos) << history;
}

// A node the scheduler holds a second time within two hours for pods that did not start there
// (its runtime wedged, which no telemetry says) is remediated as for a fault: drained,
// rebooted (which restarts a stalled agent) and burnt in (a trial's stalled node was held,
// given work again when the hold ended, and held again, for ever). One hold alone is the
// scheduler's to deal with.
TEST_F(HealthFactoryTest, ANodeWherePodsRepeatedlyDoNotStartIsRebooted) {
  const std::string node = "hgx-a-0";
  ASSERT_EQ(Inject(node, {{"stall", true}}).status, 202);
  const auto hold = [&] {
    const std::string key = "/registry/nodes/" + node;
    auto kv = store_->Get(key);
    ASSERT_TRUE(kv.ok());
    json n = json::parse(kv->value);
    const int64_t now = clock_.NowMs();
    n["status"]["startHold"] = {
        {"since", FormatTimestamp(now)},
        {"workBoundAt", FormatTimestamp(now - 300'000)},
        {"until", FormatTimestamp(now + 1'800'000)},
        {"message", "pods of team-a/w (main-0) did not start here within the pods-ready timeout"}};
    ASSERT_TRUE(store_->Put(key, n.dump(), kv->mod_revision).ok());
  };
  hold();
  Cycle(1000);
  Cycle(1000);
  EXPECT_EQ(State(node), "available") << History(Records()[node]);
  Cycle(600'000);
  hold();
  Cycle(1000);
  Cycle(1000);
  EXPECT_NE(State(node), "available") << History(Records()[node]);
  bool raised = false;
  for (const json& c : Records()[node].value("conditions", json::array()))
    raised |= c.value("type", "") == "PodsNotStarting" && c.value("status", "") == "True";
  EXPECT_TRUE(raised) << Records()[node].dump();
  ASSERT_TRUE(CycleUntil([&] { return State(node) == "available"; }, 200))
      << History(Records()[node]);
  const std::string history = History(Records()[node]);
  EXPECT_NE(history.find("RepeatedPodStartFailures"), std::string::npos) << history;
}

TEST_F(HealthFactoryTest, NeverMoreNodesInRemediationThanTheLimit) {
  ASSERT_EQ(health_->stats().remediation_limit, 1);
  ASSERT_EQ(Inject("hgx-a-0", {{"xid", 79}, {"gpu", 1}}).status, 202);
  ASSERT_EQ(Inject("hgx-b-1", {{"xid", 79}, {"gpu", 2}}).status, 202);
  Cycle(1000);
  Cycle(1000);
  std::map<std::string, json> r = Records();
  std::set<std::string> states = {r["hgx-a-0"].value("state", ""), r["hgx-b-1"].value("state", "")};
  // One heals; the other is cordoned (no new work) and waits for the slot.
  EXPECT_TRUE(states.count("cordoned")) << r["hgx-a-0"].dump() << r["hgx-b-1"].dump();
  EXPECT_TRUE(NodeUnschedulable("hgx-a-0"));
  EXPECT_TRUE(NodeUnschedulable("hgx-b-1"));
  ASSERT_TRUE(CycleUntil(
      [&] { return State("hgx-a-0") == "available" && State("hgx-b-1") == "available"; }, 200));
  EXPECT_EQ(max_in_remediation_, 1);
  EXPECT_EQ(health_->stats().max_in_remediation_seen, 1);
}

// A stalled node (its agent renews its lease but starts no pod) is no health fault: it stays
// in service, Ready, for the scheduler's pods-ready timeout and node hold to deal with.
TEST_F(HealthFactoryTest, AStalledNodeStaysInService) {
  ClientResponse r = Inject("hgx-a-0", {{"stall", true}});
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_NE(r.body.find("\"stall\":true"), std::string::npos) << r.body;
  for (int i = 0; i < 5; ++i) Cycle(30'000);
  EXPECT_EQ(State("hgx-a-0"), "available") << History(Records()["hgx-a-0"]);
  EXPECT_FALSE(NodeUnschedulable("hgx-a-0"));
}

TEST_F(HealthFactoryTest, MalformedInjectionsAndReportsChangeNothing) {
  struct Case {
    json body;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{{"xid", 79}}, "gpu"},
      {{{"xid", "79"}, {"gpu", 1}}, "xid"},
      {{{"xid", 79}, {"gpu", 99}}, "gpu"},
      {{{"xid", 79}, {"gpu", 1}, {"colour", "red"}}, "colour: unknown field"},
      {{{"xid", 79}, {"gpu", 1}, {"kill", true}}, "exactly one"},
      {{{"kill", true}, {"gpu", 1}}, "gpu"},
      {{{"stall", true}, {"gpu", 1}}, "a stall takes the whole node"},
      {{{"stall", "yes"}}, "stall: expected true or false"},
      {{{"kill", true}, {"stall", true}}, "exactly one"},
      // (The field that is wrong: a trial's xid 0 and -5 were answered about the kinds.)
      {{{"xid", 0}, {"gpu", 1}}, "xid: must be 1..9999"},
      {{{"xid", -5}, {"gpu", 1}}, "xid: integer must not be negative"},
  };
  for (const Case& c : cases) {
    ClientResponse r = Inject("hgx-a-0", c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump() << ": " << r.body;
    EXPECT_NE(r.body.find(c.names), std::string::npos) << c.body.dump() << ": " << r.body;
    // (A Status object, as the resource API's errors: a review found reason and metadata
    // missing here.)
    test::ExpectStatusObject(r.body, 400);
  }
  test::ExpectStatusObject(Inject("no-such-node", {{"xid", 79}, {"gpu", 1}}).body, 404);
  const ClientResponse none = Call("GET", std::string(kApi) + "/nodes/no-such-node/health");
  EXPECT_EQ(none.status, 404);
  test::ExpectStatusObject(none.body, 404);
  EXPECT_NE(none.body.find("node 'no-such-node' not found"), std::string::npos) << none.body;
  // A dry run of these routes writes nothing (a review found the fault injected).
  {
    ClientResponse dry = Call("POST", std::string(kApi) + "/nodes/hgx-a-0/inject?dryRun=All",
                              json{{"xid", 79}, {"gpu", 1}}.dump());
    EXPECT_EQ(dry.status, 400) << dry.body;
    EXPECT_NE(dry.body.find("takes no dry run"), std::string::npos) << dry.body;
    Cycle(1000);
    EXPECT_EQ(State("hgx-a-0"), "available") << History(Records()["hgx-a-0"]);
  }
  // A malformed injection says where it stops.
  {
    ClientResponse bad =
        Call("POST", std::string(kApi) + "/nodes/hgx-a-0/inject", R"({"stall": tru)");
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("inject: malformed JSON body: parse error at line 1, column "),
              std::string::npos)
        << bad.body;
  }
  // A tenant member may not inject; a node may not inject, nor report for another node.
  auto alice = Client("alice-token-health-0123456789");
  auto r = alice->Do("POST", std::string(kApi) + "/nodes/hgx-a-0/inject", R"({"kill": true})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403) << r->body;
  test::ExpectStatusObject(r->body, 403);
  auto node = Client(node_tokens_["hgx-a-1"]);
  r = node->Do("POST", std::string(kApi) + "/nodes/hgx-a-0/inject", R"({"kill": true})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403) << r->body;
  r = node->Do("POST", std::string(kApi) + "/nodes/hgx-a-0/health",
               R"({"xids": [{"gpu": 1, "xid": 79}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403) << r->body;
  // Malformed reports from the node itself: rejected whole, the valid part included.
  const std::vector<std::pair<std::string, std::string>> reports = {
      {R"({"xids": [{"gpu": 1, "xid": 79, "foo": 1}]})", "xids[0].foo: unknown field"},
      {R"({"xids": [{"gpu": 1, "xid": 79}], "devices": [{"gpu": 42, "eccDoubleBitVolatile": 1}]})",
       "devices[0].gpu"},
      {R"({"xids": [{"gpu": 1, "xid": 79}], "devices": [{"gpu": 0, "temperatureC": "hot"}]})",
       "devices[0].temperatureC"},
      {R"({"xid": 79})", "xid: unknown field"},
      {R"([1, 2])", "JSON object"},
      // (Where it stops, and a key given twice: the last would win silently.)
      {R"({"xids": [{"gpu": 1,)",
       "the report: malformed JSON body: parse error at line 1, column "},
      {R"({"xids": [], "xids": [{"gpu": 1, "xid": 79}]})", "xids\\\" is given twice in one object"},
  };
  for (const auto& [body, names] : reports) {
    r = node->Do("POST", std::string(kApi) + "/nodes/hgx-a-1/health", body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << body << ": " << r->body;
    EXPECT_NE(r->body.find(names), std::string::npos) << body << ": " << r->body;
    test::ExpectStatusObject(r->body, 400);
  }
  for (int i = 0; i < 3; ++i) Cycle(1000);
  for (const auto& [name, rec] : Records()) {
    EXPECT_EQ(rec.value("state", ""), "available") << name;
    EXPECT_TRUE(rec.value("events", json::array()).empty()) << name;
    for (const json& g : rec["gpus"]) EXPECT_TRUE(g.value("schedulable", false)) << name;
  }
  // A well-formed report from the node itself is taken.
  r = node->Do("POST", std::string(kApi) + "/nodes/hgx-a-1/health",
               R"({"devices": [{"gpu": 5, "eccDoubleBitVolatile": 2}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 202) << r->body;
  Cycle(1000);
  EXPECT_FALSE(Records()["hgx-a-1"]["gpus"][5].value("schedulable", true));
}

TEST(FleetFaultsTest, ScheduledFaultsAreValidatedStrictly) {
  const std::string base = std::string(kFleetYaml);
  auto ok = ParseFleetYaml(base +
                               "faults:\n"
                               "  - {node: hgx-a-1, atSeconds: 600, xid: 79, gpu: 3}\n"
                               "  - {node: hgx-b-0, atSeconds: 60, kill: true}\n"
                               "  - {node: hgx-a-0, atSeconds: 90, gpu: 2, eccDoubleBit: 4}\n",
                           "fleet.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->faults.size(), 3u);
  EXPECT_TRUE(ok->faults[0].kill);  // sorted by time
  EXPECT_EQ(ok->faults[2].xid, 79);
  EXPECT_EQ(ok->faults[2].at_ms, 600'000);
  test::ExpectInvalid(
      ParseFleetYaml(base + "faults:\n  - {node: hgx-a-1, atSeconds: 6, xid: 79, gpu: 3, x: 1}\n",
                     "fleet.yaml"),
      {"fleet.yaml", "faults[0].x", "unknown field"});
  test::ExpectInvalid(
      ParseFleetYaml(base + "faults:\n  - {node: nope, atSeconds: 6, xid: 79, gpu: 3}\n",
                     "fleet.yaml"),
      {"faults[0].node", "no node nope"});
  test::ExpectInvalid(
      ParseFleetYaml(base + "faults:\n  - {node: hgx-mig, atSeconds: 6, xid: 79, gpu: 2}\n",
                     "fleet.yaml"),
      {"faults[0].gpu", "has 2 GPUs"});
  test::ExpectInvalid(
      ParseFleetYaml(base + "faults:\n  - {node: hgx-a-0, xid: 79, gpu: 2}\n", "fleet.yaml"),
      {"faults[0].atSeconds"});
}

// A scheduled fault from the fleet file fires at its time through the simulated agent.
TEST_F(HealthFactoryTest, ScheduledFaultFiresThroughTheAgent) {
  FaultInjection f;
  f.node = NodeId("hgx-b-0");
  f.xid = 48;
  f.gpu = 6;
  fleet_.faults = {f};
  fleet_.faults[0].at_ms = 10'000;
  sim_ = std::make_unique<SimulatedFleet>(fleet_, client_options_, node_tokens_, clock_);
  Cycle(5000);
  EXPECT_TRUE(Records()["hgx-b-0"]["gpus"][6].value("schedulable", false));
  Cycle(6000);
  Cycle(1000);
  EXPECT_FALSE(Records()["hgx-b-0"]["gpus"][6].value("schedulable", true));
}

// A restarted factory's schedule goes on from its first start (the server passes it): a fault
// an earlier run reached is not injected again (a trial's fired at each restart), one still
// ahead fires at its time.
TEST_F(HealthFactoryTest, AScheduleResumedFiresNoFaultAgain) {
  FaultInjection past, ahead;
  past.node = NodeId("hgx-b-0");
  past.xid = 48;
  past.gpu = 6;
  past.at_ms = 10'000;
  ahead = past;
  ahead.gpu = 5;
  ahead.at_ms = 40'000;
  fleet_.faults = {past, ahead};
  sim_ = std::make_unique<SimulatedFleet>(fleet_, client_options_, node_tokens_, clock_, 10'000,
                                          clock_.NowMs() - 30'000);
  Cycle(5000);
  Cycle(1000);
  EXPECT_TRUE(Records()["hgx-b-0"]["gpus"][6].value("schedulable", false));
  for (int i = 0; i < 6; ++i) Cycle(1000);
  EXPECT_TRUE(Records()["hgx-b-0"]["gpus"][6].value("schedulable", false));
  EXPECT_FALSE(Records()["hgx-b-0"]["gpus"][5].value("schedulable", true));
}

// ---------------------------------------------------------------------------------------------
// The real `fabrica up`, with a fault injected through its API.

using test::FreePort;

TEST(UpProcessTest, InjectedXid79IsRemediatedInTheRunningFactory) {
  test::TempDir dir("health_up");
  const std::string data = dir.File("data");
  const std::string log = dir.File("up.log");
  const int port = FreePort();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    ::execl(FABRICA_BIN, "fabrica", "up", "--data", data.c_str(), "--listen", listen.c_str(),
            "--plain-http", "--time-scale", "60", "--run-seconds", "120",
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      ::kill(pid, SIGTERM);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  } reaper{pid};

  // The admin token is in the fabctl config `up` writes once it serves.
  std::string token;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (token.empty() && std::chrono::steady_clock::now() < deadline) {
    const std::string cfg = test::ReadFile(data + "/fabctl.yaml");
    const size_t at = cfg.find("token: ");
    if (at != std::string::npos) token = cfg.substr(at + 7, cfg.find('\n', at) - at - 7);
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(token.empty()) << test::ReadFile(log);
  ClientOptions o;
  o.server = "http://" + listen;
  o.token = token;
  o.timeout_seconds = 10;
  HttpClient admin(o);
  const std::string node = "hgx-r1-0";
  auto health = [&]() {
    auto r = admin.Do("GET", std::string(kApi) + "/nodes/" + node + "/health");
    return r.ok() && r->status == 200 ? json::parse(r->body, nullptr, false) : json();
  };
  while (health().is_null() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(health().value("state", ""), "available") << test::ReadFile(log);
  auto r = admin.Do("POST", std::string(kApi) + "/nodes/" + node + "/inject",
                    R"({"xid": 79, "gpu": 4})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 202) << r->body;
  // At 60x a reboot (5 min) and a burn-in (10 min) take 15 s of wall time.
  std::string history;
  const auto healed = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < healed) {
    json h = health();
    history = h.value("history", json::array()).dump();
    if (history.find("burn-in") != std::string::npos && h.value("state", "") == "available") {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  for (const char* step : {"\"cordoned\"", "\"draining\"", "\"repair\"", "\"burn-in\""}) {
    EXPECT_NE(history.find(step), std::string::npos) << step << " not in " << history;
  }
  EXPECT_EQ(health().value("state", ""), "available") << history;
  if (HasFailure()) {
    auto all = admin.Do("GET", std::string(kApi) + "/nodehealth");
    if (all.ok()) {
      for (const json& r : json::parse(all->body, nullptr, false).value("items", json::array())) {
        ADD_FAILURE() << r["metadata"].value("name", "") << ": " << r.value("state", "") << " "
                      << r.value("history", json::array()).dump();
      }
    }
    ADD_FAILURE() << test::ReadFile(log);
  }
}

}  // namespace
}  // namespace fabrica
