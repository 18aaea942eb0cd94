// End-to-end tests of the control plane.
//
// FactoryTest runs the whole factory in this process: the SQLite store, the API over HTTPS with
// generated certificates, the scheduler and a simulated fleet whose agents talk to the server
// through the real client. Time is a ManualClock and the loop is driven by hand (agents tick,
// the scheduler runs a cycle, agents tick again), so the tests are deterministic and fast.
// Users act through HttpClient with an admin token, as fabctl would.
//
// DurabilityTest runs the real `fabrica server` binary, SIGKILLs it while four clients create
// workloads, restarts it on the same data directory and checks that every acknowledged create
// survived intact.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/api_server.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "api/metrics.h"
#include "client/columns.h"
#include "client/http_client.h"
#include "control/clock.h"
#include "control/eviction_record.h"
#include "control/meter_service.h"
#include "control/scheduler.h"
#include "control/sim_agent.h"
#include "core/fleet.h"
#include "sched/queue_objects.h"
#include "store/store.h"
#include "test_net.h"
#include "test_util.h"

namespace fabrica {
namespace {

using test::ReadFile;
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("e2e_test") {}
};

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kApi[] = "/apis/fabrica.dev/v1";
constexpr char kAdminToken[] = "admin-token-e2e-0123456789";
constexpr char kAuthYaml[] = R"(tokens:
  - {token: admin-token-e2e-0123456789, user: admin}
  - {token: alice-token-e2e-0123456789, user: alice}
bindings:
  - {role: platform-admin, user: admin}
  - {role: tenant-member, tenant: team-a, user: alice}
)";

// Two leaves of two 8-GPU H100 nodes each, and a MIG node under the second leaf: room for the
// demo's gang (two whole nodes under one leaf) next to everything else.
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

// YAML as the manifests write it, to the JSON the API takes: plain scalars that read as integers
// or booleans become numbers and booleans, everything else (and every quoted scalar) a string.
json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) a.push_back(YamlToJson(item));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;
      if (s == "true" || s == "false") return s == "true";
      int64_t v = 0;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return v;
      return s;
    }
    default:
      return nullptr;
  }
}

std::string WorkloadPath(const std::string& ns, const std::string& name = "") {
  return std::string(kApi) + "/namespaces/" + ns + "/workloads" + (name.empty() ? "" : "/" + name);
}

json WholeGpuWorkload(const std::string& ns, const std::string& name, int gpus, int pods = 1) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Workload"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"podSets",
             {{{"name", "main"},
               {"count", pods},
               {"cpu", "16"},
               {"memory", "64Gi"},
               {"devices", {{"gpus", gpus}}}}}},
            {"run", {{"command", {"train"}}, {"durationSeconds", 36000}}}}}};
}

// ---------------------------------------------------------------------------------------------
// The factory in one process.

class FactoryTest : public testing::Test {
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
    ClientOptions admin = client_options_;
    admin.token = kAdminToken;
    admin_ = std::make_unique<HttpClient>(admin);

    auto fleet = ParseFleetYaml(kFleetYaml, "inline fleet");
    ASSERT_TRUE(fleet.ok()) << fleet.status().message();
    fleet_ = *fleet;
    for (const Node& n : fleet_.nodes) {
      auto token = api_->IssueNodeToken(n.name.str());
      ASSERT_TRUE(token.ok()) << token.status().message();
      node_tokens_[n.name.str()] = *token;
      leaf_of_[n.name.str()] = n.leaf;
    }
    sim_ = std::make_unique<SimulatedFleet>(fleet_, client_options_, node_tokens_, clock_);
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, SchedulerOptions{}, nullptr);

    // Example tenants, then the nodes register and heartbeat.
    CreateTenant("team-a", "trusted", "research");
    CreateTenant("team-b", "trusted", "research");
    CreateTenant("team-c", "standard", "team-c");
    CreateTenant("partner-x", "untrusted", "partner-x");
    Status first = sim_->Tick();
    ASSERT_TRUE(first.ok()) << first.message();
  }

  void TearDown() override {
    sim_.reset();
    if (server_) server_->Stop();
  }

  ClientResponse Call(const std::string& method, const std::string& path,
                      const std::string& body = "",
                      const std::string& content_type = "application/json") {
    auto r = admin_->Do(method, path, body, content_type);
    EXPECT_TRUE(r.ok()) << method << " " << path << ": " << r.status().message();
    return r.ok() ? *r : ClientResponse{};
  }
  json CallJson(const std::string& method, const std::string& path, const std::string& body = "") {
    ClientResponse r = Call(method, path, body);
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json() : j;
  }

  void CreateTenant(const std::string& name, const std::string& trust, const std::string& domain) {
    json t = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Tenant"},
              {"metadata", {{"name", name}}},
              {"spec", {{"trust", trust}, {"trustDomain", domain}}}};
    trust_domain_[name] = domain;
    ClientResponse r = Call("POST", std::string(kApi) + "/tenants", t.dump());
    EXPECT_EQ(r.status, 201) << r.body;
  }
  void CreateQueue(const std::string& name, const json& spec) {
    json q = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Queue"},
              {"metadata", {{"name", name}}},
              {"spec", spec}};
    ClientResponse r = Call("POST", std::string(kApi) + "/queues", q.dump());
    EXPECT_EQ(r.status, 201) << r.body;
  }
  // The scheduler under test, with this eviction grace period.
  // A scheduler with `grace_ms` of preemption grace and, as `set` leaves them, other options.
  void StartScheduler(int64_t grace_ms,
                      const std::function<void(SchedulerOptions&)>& set = nullptr) {
    SchedulerOptions so;
    so.preemption_grace_ms = grace_ms;
    if (set) set(so);
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  }
  // Deletes every workload whose "ns/name" key in `w` starts with one of `tenants`' "ns/".
  void DeleteWorkloads(const std::map<std::string, json>& w, std::vector<std::string> tenants) {
    for (const auto& [key, obj] : w)
      for (const std::string& t : tenants)
        if (key.rfind(t + "/", 0) == 0)
          Call("DELETE", WorkloadPath(t) + "/" + key.substr(t.size() + 1));
  }
  // Queue team-b, at most 16 GPUs (guaranteed, none borrowed) and a disruption budget of 1,
  // runs four 4-GPU workloads v-0 … v-3; then team-b/hot (8 GPUs, priority 100) is created.
  // False if the four did not start.
  bool UrgentWorkNeedsTwoVictimsUnderABudgetOfOne(int64_t grace_ms) {
    StartScheduler(grace_ms);
    CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 16}, {"borrowingLimit", 0}}}}},
                           {"disruptionBudget", 1}});
    for (int i = 0; i < 4; ++i) {
      CreateWorkload(WholeGpuWorkload("team-b", "v-" + std::to_string(i), 4));
      Cycle();
    }
    if (!CycleUntilAll("Running")) return false;
    json hot = WholeGpuWorkload("team-b", "hot", 8);
    hot["spec"]["priority"] = 100;
    CreateWorkload(hot);
    return true;
  }
  // Cycles past the grace period of UrgentWorkNeedsTwoVictimsUnderABudgetOfOne's victims,
  // expecting all four still running, unmarked: the workloads then.
  std::map<std::string, json> VictimsRunOnPastTheGrace() {
    Cycle();
    Cycle(40'000);
    Cycle();
    std::map<std::string, json> w = Workloads();
    for (int i = 0; i < 4; ++i) {
      const json& status = w["team-b/v-" + std::to_string(i)]["status"];
      EXPECT_EQ(status.value("phase", ""), "Running") << Describe(w);
      EXPECT_FALSE(status.contains("preemption")) << Describe(w);
      EXPECT_FALSE(status.contains("evictions")) << Describe(w);
    }
    return w;
  }
  // VictimsRunOnPastTheGrace's `w`: team-b/v-3's eviction was called off because team-b/hot
  // may not start now.
  void ExpectCalledOffForHot(const std::map<std::string, json>& w) {
    EXPECT_NE(w.at("team-b/v-3")["status"]
                  .value("message", "")
                  .find("eviction cancelled: its preemptor team-b/hot may not start now: "),
              std::string::npos)
        << Describe(w);
  }
  // A scheduler with `so` over agents that start nothing, queue team-a guaranteed 32 GPUs, and
  // a gang of two 8-GPU pods for it (not yet created).
  json GangThatNeverStarts(SchedulerOptions so) {
    so.node_grace_ms = 3'600'000;  // the stopped agents' nodes stay Ready for the test
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
    CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
    for (const Node& n : fleet_.nodes) sim_->StopNode(n.name.str());
    json gang = WholeGpuWorkload("team-a", "gang", 8, 2);
    gang["spec"]["gang"] = true;
    return gang;
  }
  // The meter bills tenant `ns` `before` GPUs from `bound` (ms) until `resized` and `after`
  // from then until now.
  void ExpectGpuHoursAcrossResize(const std::string& ns, int64_t bound, int64_t resized,
                                  double before, double after) {
    const int64_t t1 = clock_.NowMs() / 1000 * 1000;
    const json alloc = CallJson("GET", "/allocation?window=" + std::to_string(bound / 1000) + "," +
                                           std::to_string(t1 / 1000) + "&aggregate=namespace");
    ASSERT_EQ(alloc.value("code", 0), 200) << alloc.dump();
    const double want_hours =
        (before * (resized - bound / 1000 * 1000) + after * (t1 - resized)) / 3.6e6;
    EXPECT_NEAR(alloc["data"][0][ns].value("gpuHours", 0.0), want_hours, 1e-6) << alloc.dump();
  }
  // Queues team-a (no guarantee) and team-b (guaranteed 32); team-a's elastic gang of four
  // 8-GPU pods (one needed) runs on the 32 whole GPUs; then team-b asks for 8 (b-0). Returns
  // the gang's status before that (null on failure).
  json StartElasticBesideReclaim(bool shrink, Metrics* metrics, int64_t grace_ms = 5'000) {
    SchedulerOptions so;
    so.preemption_grace_ms = grace_ms;
    so.elastic_shrink = shrink;
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, metrics);
    CreateTeamQueues(0, 32);
    CreateWorkload(ElasticGang());
    if (!CycleUntilAll("Running")) return json();
    Cycle();
    json before = Workloads()["team-a/elastic"]["status"];
    if (before["assignments"].size() != 4u) return json();
    CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
    return before;
  }
  // Cycles 10 s apart (at most six) until the gang team-a/elastic holds fewer than its four
  // pods, checking that nothing was requeued meanwhile: its status then, or null.
  json StatusOnceShrunkWithoutRequeue() {
    int requeued = 0;
    for (int i = 0; i < 6; ++i) {
      requeued += Cycle(10'000).requeued;
      const json st = Workloads()["team-a/elastic"]["status"];
      if (st["assignments"].size() != 4u) {
        EXPECT_EQ(requeued, 0) << Describe(Workloads());
        return st;
      }
    }
    return json();
  }
  // The meter, journaled in the test's directory, serving its routes through the API.
  Result<std::unique_ptr<MeterService>> OpenMeter() {
    MeterServiceOptions mo;
    mo.journal_path = dir_.File("meter.db");
    auto meter = MeterService::Open(*store_, clock_, mo);
    if (meter.ok()) api_->SetExtension((*meter)->Routes());
    return meter;
  }
  // A meter with options `mo` (no journal) whose enforced budgets hold new work: the
  // scheduler asks it (SchedulerOptions::admission_hold).
  Result<std::unique_ptr<MeterService>> OpenMeterHoldingAdmission(const MeterServiceOptions& mo) {
    auto meter = MeterService::Open(*store_, clock_, mo);
    if (!meter.ok()) return meter;
    api_->SetExtension((*meter)->Routes());
    SchedulerOptions so;
    so.admission_hold = [m = meter->get()](const std::string& t, const std::string& q) {
      return m->AdmissionHold(t, q);
    };
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
    return meter;
  }
  // Gang team-a/elastic: four 8-GPU pods that may start with one.
  json ElasticGang() {
    json elastic = WholeGpuWorkload("team-a", "elastic", 8, 4);
    elastic["spec"]["gang"] = true;
    elastic["spec"]["podSets"][0]["minCount"] = 1;
    return elastic;
  }
  // Queue team-a (32 GPUs guaranteed, none borrowed) runs ElasticGang; then team-a/urgent (8
  // GPUs, priority 100) shrinks it (grace 5 s). True once one shrink is marked.
  bool UrgentWorkShrinksTheElasticGang() {
    StartScheduler(5'000);
    CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}, {"borrowingLimit", 0}}}}}});
    CreateWorkload(ElasticGang());
    if (!CycleUntilAll("Running")) return false;
    json urgent = WholeGpuWorkload("team-a", "urgent", 8);
    urgent["spec"]["priority"] = 100;
    CreateWorkload(urgent);
    return Cycle().shrinks == 1 && Workloads()["team-a/elastic"]["status"].contains("shrinks");
  }
  // The next cycle calls ElasticGang's shrink off, its message starting `said`; past the grace
  // period, it still has its four pods.
  void ExpectTheGangKeepsItsPods(const std::string& said) {
    auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
    Cycle();
    EXPECT_FALSE(gang().contains("shrinks")) << gang().dump();
    EXPECT_EQ(gang().value("message", "").rfind(said, 0), 0u) << gang().dump();
    Cycle(10'000);  // past the grace period
    Cycle();
    EXPECT_EQ(gang()["assignments"].size(), 4u) << gang().dump();
  }
  // Queue team-a guaranteed 16 GPUs and, in it, gang `elastic` of four 8-GPU pods that may
  // start with one.
  void CreateElasticGang() {
    CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
    CreateWorkload(ElasticGang());
  }
  void SetGpuGuarantee(const std::string& queue, int gpus) {
    ClientResponse r = Call("PATCH", std::string(kApi) + "/queues/" + queue,
                            json{{"spec", {{"quotas", {{"gpu", {{"guaranteed", gpus}}}}}}}}.dump(),
                            "application/merge-patch+json");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // Queue org with leaves team-a and team-b, guaranteed `a` and `b` GPUs.
  void CreateTeamQueues(int a, int b) {
    CreateQueue("org", json::object());
    CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", a}}}}}});
    CreateQueue("team-b", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", b}}}}}});
  }
  void CreateWorkload(const json& w) {
    const std::string ns = w["metadata"].value("namespace", "");
    ClientResponse r = Call("POST", WorkloadPath(ns), w.dump());
    EXPECT_EQ(r.status, 201) << w["metadata"].value("name", "") << ": " << r.body;
  }

  // team-a runs four 8-GPU workloads, 16 of them borrowed from team-b (16 each guaranteed),
  // then team-b/b-0 (8 GPUs) reclaims: true if that marked one victim (grace 5 s).
  // Team-b's guarantee patched (`quota`, a merge patch of spec.quotas) below what its
  // preemptor b-0 asks while `victim` stops for it, then a cycle `after_ms` on: the reclaim is
  // called off, and both say so, with what b-0 asks and the guarantee now (`short_by`).
  void ExpectReclaimCalledOff(const std::string& victim, const std::string& quota, int64_t after_ms,
                              const std::string& short_by) {
    ClientResponse r = Call("PATCH", std::string(kApi) + "/queues/team-b",
                            R"({"spec":{"quotas":)" + quota + "}}", "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
    Cycle(after_ms);
    const json st = Workloads()[victim]["status"];
    EXPECT_FALSE(st.contains("preemption")) << st.dump();
    EXPECT_EQ(st.value("message", "")
                  .rfind("eviction cancelled: queue team-b's guarantee no longer "
                         "holds its preemptor team-b/b-0 (" +
                             short_by +
                             "): nothing is taken back for it; "
                             "running on ",
                         0),
              0u)
        << st.dump();
    EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("message", ""),
              "its preemption is called off: queue team-b's guarantee no longer holds it (" +
                  short_by + ")");
  }
  // Team-a (its CPU guaranteed 224 cores) fills the fleet's 1,120 cores with ten CPU-only pods
  // of 112 while team-b (896) is idle; a grace period of 5 s. True once all ten run.
  bool TeamAFillsTheCores(Metrics* metrics) {
    SchedulerOptions so;
    so.preemption_grace_ms = 5'000;
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, metrics);
    CreateQueue("org", json::object());
    CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"cpu", {{"guaranteed", 224}}}}}});
    CreateQueue("team-b", {{"parent", "org"}, {"quotas", {{"cpu", {{"guaranteed", 896}}}}}});
    for (int i = 0; i < 10; ++i)
      CreateWorkload(CpuOnlyWorkload("team-a", "a-" + std::to_string(i)));
    return CycleUntilAll("Running");
  }
  static json CpuOnlyWorkload(const std::string& ns, const std::string& name) {
    json w = WholeGpuWorkload(ns, name, 1);
    w["spec"]["podSets"][0].erase("devices");
    w["spec"]["podSets"][0]["cpu"] = "112";
    return w;
  }
  bool TeamBReclaimsFromTeamA() {
    StartScheduler(5'000);
    CreateTeamQueues(16, 16);
    for (int i = 0; i < 4; ++i)
      CreateWorkload(WholeGpuWorkload("team-a", "a-" + std::to_string(i), 8));
    if (!CycleUntilAll("Running")) return false;
    CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
    return Cycle().preempted == 1;
  }
  // Workload `key` ("ns/name") waits for queue "later" (QueueNotFound), and runs once an admin
  // creates it.
  void WaitsForQueueLaterThenRuns(const std::string& key) {
    std::map<std::string, json> w = Workloads();
    EXPECT_EQ(w[key]["status"].value("reason", ""), "QueueNotFound") << Describe(w);
    EXPECT_NE(w[key]["status"]
                  .value("message", "")
                  .find("unknown queue \"later\"; it waits until the queue is created"),
              std::string::npos)
        << Describe(w);
    CreateQueue("later", {{"tenants", {"team-a"}}, {"quotas", {{"gpu", {{"guaranteed", 1}}}}}});
    Cycle();
    Cycle();
    EXPECT_EQ(Workloads()[key]["status"].value("phase", ""), "Running") << Describe(Workloads());
  }
  // How many workloads are Running.
  int CountRunning() {
    int running = 0;
    for (const auto& [name, obj] : Workloads())
      running += obj["status"].value("phase", "") == "Running";
    return running;
  }
  // Every workload, keyed "ns/name".
  std::map<std::string, json> Workloads() {
    std::map<std::string, json> out;
    json list = CallJson("GET", std::string(kApi) + "/workloads");
    for (const json& w : list.value("items", json::array())) {
      out[w["metadata"].value("namespace", "") + "/" + w["metadata"].value("name", "")] = w;
    }
    return out;
  }

  // One round of the factory: agents heartbeat and report, the scheduler places, agents start
  // what was placed. Virtual time moves on by `advance_ms`.
  // A scheduler cycle `ms` on, then the meter reads the bindings.
  void CycleAndSync(MeterService& meter, int64_t ms) {
    Cycle(ms);
    Status st = meter.Sync();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  CycleStats Cycle(int64_t advance_ms = 1000) {
    clock_.AdvanceMs(advance_ms);
    Status st = sim_->Tick();
    EXPECT_TRUE(st.ok()) << st.message();
    auto stats = scheduler_->RunOnce();
    EXPECT_TRUE(stats.ok()) << stats.status().message();
    st = sim_->Tick();
    EXPECT_TRUE(st.ok()) << st.message();
    return stats.ok() ? *stats : CycleStats{};
  }

  // Cycles until every workload is in `phase` with assignments (at most `max_cycles`).
  bool CycleUntilAll(const std::string& phase, int max_cycles = 10) {
    for (int i = 0; i < max_cycles; ++i) {
      Cycle();
      bool all = true;
      for (const auto& [name, w] : Workloads()) {
        const json status = w.value("status", json::object());
        if (status.value("phase", "") != phase ||
            status.value("assignments", json::array()).empty()) {
          all = false;
        }
      }
      if (all) return true;
    }
    return false;
  }

  // The one node workload `key` ("tenant/name") was placed on, or "(its status message)".
  static std::string OnlyNodeOf(std::map<std::string, json>& workloads, const std::string& key) {
    const json& st = workloads[key]["status"];
    return st.contains("assignments") && st["assignments"].size() == 1
               ? st["assignments"][0].value("node", "")
               : "(" + st.value("message", "") + ")";
  }

  static std::string Describe(const std::map<std::string, json>& workloads) {
    std::string out;
    for (const auto& [name, w] : workloads)
      out += name + ": " + w.value("status", json()).dump() + "\n";
    return out;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Authorizer> auth_;
  ManualClock clock_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HttpServer> server_;
  ClientOptions client_options_;
  std::unique_ptr<HttpClient> admin_;
  Fleet fleet_;
  std::map<std::string, std::string> node_tokens_;
  std::map<std::string, std::string> leaf_of_;
  std::map<std::string, std::string> trust_domain_;
  std::unique_ptr<SimulatedFleet> sim_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(FactoryTest, DemoRunsIsolatedAndFreesItsGpus) {
  // The workloads of examples/demo.yaml, through the API as fabctl apply would send them.
  const std::string demo = ReadFile(std::string(FABRICA_SOURCE_DIR) + "/examples/demo.yaml");
  ASSERT_FALSE(demo.empty());
  std::vector<YAML::Node> docs = YAML::LoadAll(demo);
  ASSERT_EQ(docs.size(), 5u);
  for (const YAML::Node& d : docs) CreateWorkload(YamlToJson(d));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());

  std::map<std::string, json> w = Workloads();
  ASSERT_EQ(w.size(), 5u);
  // Who uses which GPU: "node/index" -> tenants.
  std::map<std::string, std::set<std::string>> tenants_on_gpu;
  for (const auto& [name, obj] : w) {
    const std::string tenant = obj["metadata"].value("namespace", "");
    for (const json& a : obj["status"]["assignments"]) {
      ASSERT_FALSE(a["devices"].empty()) << name;
      for (const json& d : a["devices"]) {
        tenants_on_gpu[a.value("node", "") + "/" + std::to_string(d.value("index", -1))].insert(
            tenant);
      }
    }
  }
  for (const auto& [gpu, tenants] : tenants_on_gpu) {
    std::set<std::string> domains;
    for (const std::string& t : tenants) domains.insert(trust_domain_[t]);
    EXPECT_EQ(domains.size(), 1u) << gpu << " is shared across trust domains";
    if (tenants.count("partner-x")) {
      EXPECT_EQ(tenants.size(), 1u) << "untrusted partner-x shares " << gpu;
    }
  }

  // The chat servers get fractional shares (and may share a GPU: one trust domain).
  for (const char* chat : {"team-a/llama-chat", "team-b/mistral-chat"}) {
    const json& status = w[chat]["status"];
    EXPECT_EQ(status.value("isolation", ""),
              "fractional share within trust domain " +
                  trust_domain_[w[chat]["metadata"].value("namespace", "")])
        << chat;
    ASSERT_EQ(status["assignments"].size(), 1u) << chat;
    ASSERT_EQ(status["assignments"][0]["devices"].size(), 1u) << chat;
    EXPECT_EQ(status["assignments"][0]["devices"][0].value("gpuMilli", 0), 500) << chat;
  }
  // partner-x: one whole GPU.
  const json& partner = w["partner-x/partner-inference"]["status"];
  EXPECT_EQ(partner.value("isolation", ""), "whole GPUs");
  ASSERT_EQ(partner["assignments"].size(), 1u);
  EXPECT_EQ(partner["assignments"][0]["devices"].size(), 1u);
  // The gang: two pods of eight GPUs on two nodes under one leaf.
  const json& gang = w["team-a/llama-finetune"]["status"];
  ASSERT_EQ(gang["assignments"].size(), 2u);
  const std::string n0 = gang["assignments"][0].value("node", "");
  const std::string n1 = gang["assignments"][1].value("node", "");
  EXPECT_NE(n0, n1);
  EXPECT_EQ(leaf_of_[n0], leaf_of_[n1]) << n0 << " and " << n1;
  EXPECT_EQ(gang["assignments"][0]["devices"].size(), 8u);
  EXPECT_EQ(gang["assignments"][1]["devices"].size(), 8u);
  // The evaluation: a 1g.10gb MIG slice.
  const json& eval = w["team-c/eval-suite"]["status"];
  ASSERT_EQ(eval["assignments"].size(), 1u);
  EXPECT_EQ(eval["assignments"][0].value("node", ""), "hgx-mig");
  EXPECT_EQ(eval["assignments"][0]["devices"][0].value("migProfile", ""), "1g.10gb");

  // Delete everything; the GPUs come back: an 8-GPU pod fits on each of the four whole-GPU nodes
  // again, and four 1g.10gb pods (every such slice of the MIG node) fit too.
  for (const auto& [name, obj] : w) {
    ClientResponse r = Call("DELETE", WorkloadPath(obj["metadata"].value("namespace", ""),
                                                   obj["metadata"].value("name", "")));
    EXPECT_EQ(r.status, 200) << name << ": " << r.body;
  }
  EXPECT_TRUE(Workloads().empty());
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "full-" + std::to_string(i), 8));
  json slices = WholeGpuWorkload("team-c", "all-slices", 0, 4);
  slices["spec"]["podSets"][0]["devices"] = {{"mig", "1g.10gb"}};
  CreateWorkload(slices);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  std::set<std::string> full_nodes;
  for (const auto& [name, obj] : Workloads()) {
    if (name.rfind("team-b/full-", 0) != 0) continue;
    full_nodes.insert(obj["status"]["assignments"][0].value("node", ""));
  }
  EXPECT_EQ(full_nodes, (std::set<std::string>{"hgx-a-0", "hgx-a-1", "hgx-b-0", "hgx-b-1"}));
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.pending, 0);
  EXPECT_EQ(stats.running, 5);
}

// Metering end to end: the demo runs for an hour of virtual time with the meter synced every
// cycle; /allocation?aggregate=namespace must give each tenant the GPU-hours and cost that the
// workloads' own status (scheduledTime..completionTime × share) says, and the journal must
// restore the same numbers after a restart.
// A fraction whose memory takes more of its GPU than its compute is billed that larger share,
// as admission charges it: 10m of compute with 41Gi of an 80Gi H100 held for an hour is 0.5125
// GPU-hours (512.5 rounded down to 512 milli), not 0.01.
TEST_F(FactoryTest, AFractionIsBilledTheLargerOfItsComputeAndMemoryShares) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  const int64_t t0 = clock_.NowMs() / 1000 * 1000;
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  json w = WholeGpuWorkload("team-a", "small-compute", 1);
  w["spec"]["podSets"][0]["devices"] = {{"gpuMilli", "10m"}, {"gpuMemory", "41Gi"}};
  CreateWorkload(w);
  for (int i = 0; i < 60; ++i) {  // an hour, one cycle a minute
    Cycle(60'000);
    ASSERT_TRUE((*meter)->Sync().ok());
  }
  const json status = Workloads()["team-a/small-compute"]["status"];
  ASSERT_EQ(status["assignments"].size(), 1u) << status.dump();
  EXPECT_EQ(status["assignments"][0]["devices"][0].value("gpuMilli", 0), 10) << status.dump();
  // Its status says what its queue is charged (as Kueue's resourceUsage).
  EXPECT_EQ(status["resourceUsage"].value("gpu", ""), "512m") << status.dump();
  EXPECT_EQ(status["resourceUsage"].value("queue", ""), "team-a") << status.dump();
  const int64_t from = ParseTimestamp(status.value("scheduledTime", ""));
  const int64_t t1 = t0 + 3'600'000;
  const json alloc = CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                                         std::to_string(t1 / 1000) + "&aggregate=namespace");
  ASSERT_EQ(alloc.value("code", 0), 200) << alloc.dump();
  EXPECT_NEAR(alloc["data"][0]["team-a"].value("gpuHours", 0.0), 512.0 * (t1 - from) / 3.6e9, 1e-9)
      << alloc.dump();
}

TEST_F(FactoryTest, AllocationMatchesTheWorkloadsGpuHoursAndCosts) {
  MeterServiceOptions mo;
  mo.journal_path = dir_.File("meter.db");
  mo.prices.gpu_hour_micros = {{"H100", 2'490'000}};
  auto meter = MeterService::Open(*store_, clock_, mo);
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  api_->SetExtension((*meter)->Routes());
  const int64_t t0 = clock_.NowMs() / 1000 * 1000;
  const std::string demo = ReadFile(std::string(FABRICA_SOURCE_DIR) + "/examples/demo.yaml");
  for (const YAML::Node& d : YAML::LoadAll(demo)) CreateWorkload(YamlToJson(d));
  for (int i = 0; i < 62; ++i) {  // an hour and two minutes, one cycle a minute
    Cycle(60'000);
    Status st = (*meter)->Sync();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const int64_t t1 = t0 + 3'600'000;

  // What the workloads' status says each tenant held in [t0, t1), in milli-GPU·ms.
  std::map<std::string, int64_t> want;
  int succeeded = 0;
  for (const auto& [name, w] : Workloads()) {
    const json& status = w["status"];
    const int64_t from = std::max(t0, ParseTimestamp(status.value("scheduledTime", "")));
    int64_t to = t1;
    if (status.contains("completionTime")) {
      to = std::min(to, ParseTimestamp(status.value("completionTime", "")));
      ++succeeded;
    }
    int64_t milli = 0;
    for (const json& a : status["assignments"]) {
      for (const json& d : a["devices"]) {
        milli += d.contains("migSlice") ? 1000 / 7 : d.value("gpuMilli", 1000);
      }
    }
    want[w["metadata"].value("namespace", "")] += milli * std::max<int64_t>(0, to - from);
  }
  EXPECT_GE(succeeded, 2) << Describe(Workloads());  // the eval (10 min) and partner (30 min)

  const std::string query = "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                            std::to_string(t1 / 1000) + "&aggregate=namespace&includeIdle=true";
  auto check = [&](const json& alloc) {
    ASSERT_EQ(alloc.value("code", 0), 200) << alloc.dump();
    ASSERT_EQ(alloc["data"].size(), 1u);
    const json& sets = alloc["data"][0];
    for (const auto& [tenant, held] : want) {
      ASSERT_TRUE(sets.contains(tenant)) << tenant << " missing: " << alloc.dump();
      const json& a = sets[tenant];
      EXPECT_NEAR(a.value("gpuHours", 0.0), held / 3.6e9, 1e-9) << tenant;
      const double cost =
          static_cast<double>(static_cast<__int128>(held) * 2'490'000 / 3'600'000'000LL) / 1e6;
      EXPECT_NEAR(a.value("gpuCost", 0.0), cost, 1e-9) << tenant;
      EXPECT_EQ(a["properties"].value("namespace", ""), tenant);
      // The simulated devices are 80% busy for what their workloads hold.
      EXPECT_GT(a.value("gpuEfficiency", 0.0), 0.5) << tenant << ": " << a.dump();
      EXPECT_LE(a.value("gpuEfficiency", 0.0), 1.0) << tenant;
    }
    ASSERT_TRUE(sets.contains("__idle__"));
    // 4 whole-GPU nodes of 8 GPUs and the MIG node of 2, for the hour, at 2.49 per GPU-hour.
    double total = 0;
    for (const auto& [k, a] : sets.items()) total += a.value("totalCost", 0.0);
    EXPECT_NEAR(total, 34 * 2.49, 1e-6) << alloc.dump();
  };
  check(CallJson("GET", query));
  // aggregate=cluster (OpenCost dashboards' totals): one row of the cluster holding every
  // tenant's GPU time, beside the idle row.
  {
    const json by_namespace = CallJson("GET", query);
    const json cluster =
        CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                            std::to_string(t1 / 1000) + "&aggregate=cluster&includeIdle=true");
    ASSERT_EQ(cluster.value("code", 0), 200) << cluster.dump();
    const json& sets = cluster["data"][0];
    ASSERT_EQ(sets.size(), 2u) << cluster.dump();
    ASSERT_TRUE(sets.contains("fabrica")) << cluster.dump();
    EXPECT_EQ(sets["fabrica"]["properties"].value("cluster", ""), "fabrica");
    double hours = 0;
    for (const auto& [k, a] : by_namespace["data"][0].items()) {
      if (k != "__idle__") hours += a.value("gpuHours", 0.0);
    }
    EXPECT_GT(hours, 0);
    EXPECT_NEAR(sets["fabrica"].value("gpuHours", 0.0), hours, 1e-9) << cluster.dump();
    EXPECT_NEAR(sets["__idle__"].value("gpuCost", 0.0),
                by_namespace["data"][0]["__idle__"].value("gpuCost", 0.0), 1e-6);
  }

  // A tenant member sees only its tenant, and no idle.
  ClientOptions alice = client_options_;
  alice.token = "alice-token-e2e-0123456789";
  HttpClient alice_client(alice);
  auto mine = alice_client.Do("GET", query);
  ASSERT_TRUE(mine.ok());
  json mine_json = json::parse(mine->body);
  EXPECT_EQ(mine_json["data"][0].size(), 1u) << mine->body;
  EXPECT_TRUE(mine_json["data"][0].contains("team-a"));
  // Namespaces picked: filterNamespaces, or OpenCost's filter language for them; none the
  // caller may read, 403; another filter, 400 naming it.
  for (const std::string& pick :
       {std::string("&filterNamespaces=team-b"), std::string("&filter=namespace:%22team-b%22")}) {
    const json picked = CallJson("GET", query + pick);
    EXPECT_EQ(picked["data"][0].size(), 1u) << pick << ": " << picked.dump();
    EXPECT_TRUE(picked["data"][0].contains("team-b")) << pick << ": " << picked.dump();
    auto theirs = alice_client.Do("GET", query + pick);
    ASSERT_TRUE(theirs.ok());
    EXPECT_EQ(theirs->status, 403) << pick << ": " << theirs->body;
  }
  for (const std::string& bad_filter : {std::string("&filter=cluster:%22one%22"),
                                        std::string("&filter=namespace:%22a%22|x:%22y%22")}) {
    ClientResponse other = Call("GET", query + bad_filter);
    EXPECT_EQ(other.status, 400) << bad_filter << ": " << other.body;
    EXPECT_NE(other.body.find("only namespace:"), std::string::npos) << other.body;
  }
  EXPECT_EQ(Call("GET", query + "&filter=namespace:%22team-b%22&filterNamespaces=team-a").status,
            400);
  EXPECT_EQ(Call("GET", query + "&filterNamespaces=").status, 403);
  // Bad queries name what is wrong.
  auto bad = alice_client.Do("GET", "/allocation?window=7x&aggregate=namespace");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("window '7x'"), std::string::npos) << bad->body;
  test::ExpectStatusObject(bad->body, 400);
  bad = alice_client.Do("POST", "/apis/fabrica.dev/v1/telemetry", R"({"samples": []})");
  EXPECT_EQ(bad->status, 403) << bad->body;
  // A malformed body says where (a re-trial's read only "expected {"samples": [...]}").
  ClientResponse truncated = Call("POST", "/apis/fabrica.dev/v1/telemetry", R"({"samples": [)");
  EXPECT_EQ(truncated.status, 400) << truncated.body;
  EXPECT_NE(truncated.body.find("telemetry: malformed JSON body: parse error at line 1, column 14"),
            std::string::npos)
      << truncated.body;
  // Every error is a Status object (code and message, OpenCost's, among its fields): a review
  // found the meter's routes answering {code, message} alone.
  test::ExpectStatusObject(truncated.body, 400);
  test::ExpectStatusObject(bad->body, 403);
  // CSV for invoices.
  ClientResponse csv =
      Call("GET", "/apis/fabrica.dev/v1/usage?window=" + std::to_string(t0 / 1000) + "," +
                      std::to_string(t1 / 1000) + "&by=tenant&format=csv");
  EXPECT_EQ(csv.status, 200);
  EXPECT_NE(csv.body.find("team-a,"), std::string::npos) << csv.body;

  // Restart: a new service from the journal answers the same.
  api_->SetExtension(nullptr);
  meter->reset();
  auto again = MeterService::Open(*store_, clock_, mo);
  ASSERT_TRUE(again.ok()) << again.status().message();
  api_->SetExtension((*again)->Routes());
  ASSERT_TRUE((*again)->Sync().ok());
  check(CallJson("GET", query));
}

// Budgets: a tenant whose enforced daily budget is spent has its new work held with a reason,
// its status says so, and the metric shows it; a malformed budget is rejected naming the field.
TEST_F(FactoryTest, EnforcedBudgetHoldsNewWork) {
  MeterServiceOptions mo;
  mo.prices.gpu_hour_micros = {{"H100", 3'600'000}};  // 3.60 per GPU-hour: 0.001 a GPU-second
  auto meter = OpenMeterHoldingAdmission(mo);
  ASSERT_TRUE(meter.ok()) << meter.status().message();

  const std::string tenant_path = std::string(kApi) + "/tenants/team-c";
  json tenant = CallJson("GET", tenant_path);
  tenant["spec"]["budget"] = {{"amount", "abc"}};
  ClientResponse bad = Call("PUT", tenant_path, tenant.dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("spec.budget.amount"), std::string::npos) << bad.body;
  // 0.50 at 3.60 per GPU-hour: one GPU spends it in 500 s.
  tenant["spec"]["budget"] = {
      {"amount", "0.50"}, {"period", "day"}, {"enforce", true}, {"alertPercent", {50, 100}}};
  ClientResponse ok = Call("PUT", tenant_path, tenant.dump());
  ASSERT_EQ(ok.status, 200) << ok.body;

  CreateWorkload(WholeGpuWorkload("team-c", "first", 1));
  for (int i = 0; i < 12; ++i) {  // twelve minutes
    Cycle(60'000);
    ASSERT_TRUE((*meter)->Sync().ok());
  }
  CreateWorkload(WholeGpuWorkload("team-c", "second", 1));
  CreateWorkload(WholeGpuWorkload("team-b", "other", 1));
  Cycle(1000);
  ASSERT_TRUE((*meter)->Sync().ok());
  Cycle(1000);
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-c/first"]["status"].value("phase", ""), "Running");  // never evicted
  EXPECT_EQ(w["team-c/second"]["status"].value("phase", ""), "Pending");
  EXPECT_EQ(w["team-c/second"]["status"].value("reason", ""), "BudgetExceeded");
  EXPECT_NE(w["team-c/second"]["status"].value("message", "").find("tenant team-c spent"),
            std::string::npos)
      << w["team-c/second"]["status"].dump();
  EXPECT_EQ(w["team-b/other"]["status"].value("phase", ""), "Running");  // others unaffected
  json after = CallJson("GET", tenant_path);
  bool exceeded = false;
  for (const json& c : after["status"]["conditions"]) {
    if (c.value("type", "") == "BudgetExceeded") exceeded = c.value("status", "") == "True";
  }
  EXPECT_TRUE(exceeded) << after.dump();
  auto metrics = (*meter)->MetricsText();
  EXPECT_NE(metrics.find("fabrica_budget_spent_ratio{tenant=\"team-c\"} 1."), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("fabrica_cpu_core_seconds_allocated_total{tenant=\"team-c\""),
            std::string::npos)
      << metrics;
  // Its usage row: CPU held, no GPU.
  const json usage = CallJson("GET", "/allocation?window=1d&aggregate=namespace");
  EXPECT_NE(usage.dump().find("team-c"), std::string::npos) << usage.dump();
}

// Without Queue objects an elastic pod set starts with all its pods or none: its wait says that
// its minCount applies only where queues exist (a trial expected it to start with fewer).
TEST_F(FactoryTest, WithoutQueuesAnElasticWaitSaysMinCountNeedsThem) {
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "fill" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  json elastic = WholeGpuWorkload("team-b", "elastic", 1, 4);
  elastic["spec"]["podSets"][0]["minCount"] = 2;
  CreateWorkload(elastic);
  Cycle(1000);
  const json status = Workloads()["team-b/elastic"]["status"];
  EXPECT_EQ(status.value("phase", ""), "Pending");
  EXPECT_NE(
      status.value("message", "")
          .find("pod set main's minCount (2 of 4) applies only where Queue objects exist: without "
                "them it waits to start all its pods"),
      std::string::npos)
      << status.dump();
  // Its pods placed together, as a required topology asks, are not called a gang where it is
  // none, and the note is said where it can never start too (a trial saw "gang needs" alone).
  json together = WholeGpuWorkload("team-b", "together", 4, 4);
  together["spec"]["podSets"][0]["minCount"] = 2;
  together["spec"]["topology"] = {{"level", "nvlink"}, {"mode", "required"}};
  CreateWorkload(together);
  Cycle(1000);
  const json refused = Workloads()["team-b/together"]["status"];
  EXPECT_EQ(refused.value("phase", ""), "Pending") << refused.dump();
  EXPECT_EQ(refused.value("reason", ""), "Unschedulable") << refused.dump();
  const std::string said = refused.value("message", "");
  EXPECT_EQ(said.rfind("its pods together need 16 GPUs in one nvlink domain", 0), 0u) << said;
  EXPECT_NE(said.find("minCount (2 of 4) applies only where Queue objects exist"),
            std::string::npos)
      << said;
}

// A budget counts what its owner is billed for: the CPU and memory its work holds too, where the
// price book prices them (before, GPU time alone: work priced by its CPU spent nothing), and
// work that asks for no GPU is billed by its pods (before, it was billed nothing at all: a
// trial ran 200 cores past an enforced budget).
TEST_F(FactoryTest, BudgetsCountCpuAndMemoryCost) {
  MeterServiceOptions mo;
  mo.prices.cpu_core_hour_micros = 360'000;  // 16 cores: 0.0016 a second; GPUs cost nothing
  auto meter = OpenMeterHoldingAdmission(mo);
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  const std::string tenant_path = std::string(kApi) + "/tenants/team-c";
  json tenant = CallJson("GET", tenant_path);
  tenant["spec"]["budget"] = {{"amount", "0.50"}, {"period", "day"}, {"enforce", true}};
  ASSERT_EQ(Call("PUT", tenant_path, tenant.dump()).status, 200);
  json cpu_only = WholeGpuWorkload("team-c", "first", 1);
  cpu_only["spec"]["podSets"][0].erase("devices");
  CreateWorkload(cpu_only);
  for (int i = 0; i < 8; ++i) {  // eight minutes, less its start: about 0.68
    Cycle(60'000);
    ASSERT_TRUE((*meter)->Sync().ok());
  }
  CreateWorkload(WholeGpuWorkload("team-c", "second", 1));
  Cycle(1000);
  ASSERT_TRUE((*meter)->Sync().ok());
  Cycle(1000);
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-c/first"]["status"].value("phase", ""), "Running");
  EXPECT_EQ(w["team-c/second"]["status"].value("reason", ""), "BudgetExceeded")
      << w["team-c/second"]["status"].dump();
  auto metrics = (*meter)->MetricsText();
  EXPECT_NE(metrics.find("fabrica_budget_spent_ratio{tenant=\"team-c\"} 1."), std::string::npos)
      << metrics;
}

// A queue's budget: its conditions stay through the scheduler's cycles, its status shows what it
// spent (status.budget, rewritten as the whole percent moves), and an idle cycle writes nothing
// (a review: the scheduler rewrote a queue's status whole, dropping the meter's conditions,
// which the meter then put back: the queue was written twice a cycle and its conditions
// flapped).
TEST_F(FactoryTest, AQueuesBudgetConditionsAndSpendingStayThroughCycles) {
  MeterServiceOptions mo;
  mo.prices.gpu_hour_micros = {{"H100", 3'600'000}};  // 0.001 a GPU-second
  auto meter = OpenMeterHoldingAdmission(mo);
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  CreateQueue("team-c", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}},
                         {"budget", {{"amount", "0.50"}, {"period", "day"}, {"enforce", true}}}});
  CreateWorkload(WholeGpuWorkload("team-c", "first", 1));
  auto step = [&](int64_t ms) { CycleAndSync(**meter, ms); };
  for (int i = 0; i < 4; ++i) step(60'000);  // about 0.24 spent
  const std::string path = std::string(kApi) + "/queues/team-c";
  json q = CallJson("GET", path);
  ASSERT_TRUE(q["status"].contains("budget")) << q.dump();
  const json& b = q["status"]["budget"];
  EXPECT_EQ(b.value("amount", ""), "0.50") << b.dump();
  EXPECT_EQ(b.value("period", ""), "day") << b.dump();
  const int percent = b.value("spentPercent", -1);
  EXPECT_GE(percent, 30) << b.dump();
  EXPECT_LE(percent, 50) << b.dump();
  EXPECT_TRUE(q["status"].contains("usedGpus")) << q.dump();  // the scheduler's part kept
  EXPECT_EQ(BudgetCell(q["status"]), std::to_string(percent) + "% of 0.50 USD/day");
  // Nothing moves within a few seconds: the queue is not written again.
  const std::string revision = q["metadata"].value("resourceVersion", "");
  for (int i = 0; i < 3; ++i) step(1000);
  q = CallJson("GET", path);
  EXPECT_EQ(q["metadata"].value("resourceVersion", ""), revision) << q.dump();
  for (int i = 0; i < 6; ++i) step(60'000);  // past 0.50
  CreateWorkload(WholeGpuWorkload("team-c", "second", 1));
  for (int i = 0; i < 3; ++i) step(1000);
  q = CallJson("GET", path);
  bool exceeded = false;
  for (const json& c : q["status"]["conditions"])
    if (c.value("type", "") == "BudgetExceeded") exceeded = c.value("status", "") == "True";
  EXPECT_TRUE(exceeded) << q.dump();
  EXPECT_GE(q["status"]["budget"].value("spentPercent", 0), 100) << q.dump();
  const std::string cell = BudgetCell(q["status"]);
  EXPECT_NE(cell.find("% of 0.50 USD/day, new work held"), std::string::npos) << cell;
  EXPECT_TRUE(q["status"].contains("usedGpus")) << q.dump();
  EXPECT_EQ(Workloads()["team-c/second"]["status"].value("reason", ""), "BudgetExceeded");
  // The budget taken away: its conditions and spending go, the held work starts.
  ClientResponse r = Call("PATCH", path, json{{"spec", {{"budget", nullptr}}}}.dump(),
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 3; ++i) step(1000);
  q = CallJson("GET", path);
  EXPECT_FALSE(q["status"].contains("budget")) << q.dump();
  for (const json& c : q["status"].value("conditions", json::array()))
    EXPECT_EQ(c.value("type", "").rfind("Budget", 0), std::string::npos) << q.dump();
  EXPECT_TRUE(q["status"].contains("usedGpus")) << q.dump();
  EXPECT_EQ(Workloads()["team-c/second"]["status"].value("phase", ""), "Running");
}

// Work without GPUs deleted while the meter is down is ended when it comes back: its binding of
// pods alone is known open from the journal (a review: only bindings with GPUs were, and its CPU
// was billed for good).
TEST_F(FactoryTest, AGpuLessBindingOpenAtARestartIsEnded) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  json cpu_only = WholeGpuWorkload("team-c", "etl", 1);
  cpu_only["spec"]["podSets"][0].erase("devices");
  CreateWorkload(cpu_only);
  for (int i = 0; i < 3; ++i) {
    Cycle(60'000);
    ASSERT_TRUE((*meter)->Sync().ok());
  }
  ASSERT_EQ(Workloads()["team-c/etl"]["status"].value("phase", ""), "Running");
  api_->SetExtension(nullptr);
  meter->reset();  // (the meter is down)
  ASSERT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-c/workloads/etl").status, 200);
  Cycle(60'000);
  auto again = OpenMeter();
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_TRUE((*again)->Sync().ok());
  const auto cpu_hours = [&]() {
    const json a = CallJson("GET", "/allocation?window=1d&aggregate=namespace");
    return a["data"][0]["team-c"].value("cpuCoreHours", 0.0);
  };
  const double ended = cpu_hours();
  EXPECT_GT(ended, 0);
  for (int i = 0; i < 5; ++i) {
    Cycle(60'000);
    ASSERT_TRUE((*again)->Sync().ok());
  }
  EXPECT_EQ(cpu_hours(), ended);  // (no longer growing)
}

// A tenant holding workloads may not be deleted (their work would be stopped as if its node
// were lost and left in the store with no tenant); once they are gone, it may.
TEST_F(FactoryTest, ATenantWithWorkloadsIsNotDeleted) {
  const std::string tenant_path = std::string(kApi) + "/tenants/team-c";
  CreateWorkload(WholeGpuWorkload("team-c", "first", 1));
  Cycle(1000);
  ClientResponse refused = Call("DELETE", tenant_path);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("Tenant 'team-c' is in use: it holds 1 workload(s) (first); "
                              "delete them first"),
            std::string::npos)
      << refused.body;
  EXPECT_EQ(Call("DELETE", tenant_path + "?dryRun=All").status, 409);
  EXPECT_EQ(Call("GET", tenant_path).status, 200);
  EXPECT_EQ(Workloads()["team-c/first"]["status"].value("phase", ""), "Running");
  ASSERT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-c/workloads/first").status, 200);
  ClientResponse deleted = Call("DELETE", tenant_path);
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Call("GET", tenant_path).status, 404);
}

// Queues through the API: guarantees, a borrowing limit, and reclaim by preemption with a
// grace period, decided by the server's scheduler in one pass with placement.
TEST_F(FactoryTest, QueuesEnforceQuotasAndReclaimBorrowedGpus) {
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  so.reclaim_min_runtime_s = 1200;
  Metrics metrics;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, &metrics);
  // A quota that does not parse is refused, naming the field; nothing is stored.
  json bad = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Queue"},
              {"metadata", {{"name", "team-a"}}},
              {"spec", {{"quotas", {{"gpu", {{"guaranteed", "lots"}}}}}}}};
  ClientResponse refused = Call("POST", std::string(kApi) + "/queues", bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.quotas.gpu.guaranteed"), std::string::npos) << refused.body;
  bad["spec"] = {{"queueingStrategy", "LIFO"}};
  refused = Call("POST", std::string(kApi) + "/queues", bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.queueingStrategy"), std::string::npos) << refused.body;
  bad["spec"] = {{"reclaimMinRuntimeSeconds", 40'000'000}};
  refused = Call("POST", std::string(kApi) + "/queues", bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.reclaimMinRuntimeSeconds: must be between 0 and 31536000"),
            std::string::npos)
      << refused.body;

  // Queues named after the tenants, so workloads that name no queue wait in them.
  CreateQueue("org", {{"preemptMinRuntimeSeconds", 300}});
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  CreateQueue("team-b", {{"parent", "org"},
                         {"reclaimMinRuntimeSeconds", 1800},
                         {"quotas", {{"gpu", {{"guaranteed", 16}, {"borrowingLimit", 8}}}}}});

  // team-b asks for all 32 whole GPUs: it gets its 16 and borrows 8, no more. b-0 may not be
  // evicted (without that it would be the first victim: equal cost, lowest id).
  for (int i = 0; i < 4; ++i) {
    json b = WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8);
    if (i == 0) b["spec"]["preemptible"] = false;
    CreateWorkload(b);
  }
  // (An inactive workload waits in no queue: the metric counts it not, as the queue's status
  // does not — a trial's dashboard read 1 where fabctl said 0.)
  json parked = WholeGpuWorkload("team-a", "parked", 8);
  parked["spec"]["active"] = false;
  CreateWorkload(parked);
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  int b_running = 0;
  std::string b_waiting;
  for (int i = 0; i < 4; ++i) {
    const json& st = w["team-b/b-" + std::to_string(i)]["status"];
    if (st.value("phase", "") == "Running") {
      ++b_running;
    } else {
      b_waiting = "team-b/b-" + std::to_string(i);
      EXPECT_EQ(st.value("reason", ""), "Queued") << st.dump();
      EXPECT_NE(st.value("message", "").find("borrowing limit"), std::string::npos) << st.dump();
    }
  }
  EXPECT_EQ(b_running, 3) << Describe(w);
  // Each queue's standing is in its status, and fabctl's table shows it.
  json qb = CallJson("GET", std::string(kApi) + "/queues/team-b");
  EXPECT_EQ(qb["status"].value("usedGpus", ""), "24") << qb.dump();
  EXPECT_EQ(qb["status"].value("guaranteedGpus", ""), "16") << qb.dump();
  EXPECT_EQ(qb["status"].value("pendingWorkloads", -1), 1) << qb.dump();
  // How long a minimum runtime shields its work from other queues: its own 1,800 s; team-a's,
  // the server's (--reclaim-min-runtime).
  EXPECT_EQ(qb["status"].value("reclaimMinRuntimeSeconds", -1), 1800) << qb.dump();
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value(
                "reclaimMinRuntimeSeconds", -1),
            1200);
  // ... and how long against its own queue's work at least: its parent's 300 s.
  EXPECT_EQ(qb["status"].value("preemptMinRuntimeSeconds", -1), 300) << qb.dump();
  const std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("fabrica_queue_used_gpus{queue=\"team-b\"} 24"), std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("fabrica_queue_guaranteed_gpus{queue=\"team-b\"} 16"), std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("fabrica_pending_workloads{queue=\"team-b\"} 1"), std::string::npos)
      << rendered;
  // (A leaf with nothing waiting has its series, at 0.)
  EXPECT_NE(rendered.find("fabrica_pending_workloads{queue=\"team-a\"} 0"), std::string::npos)
      << rendered;
  EXPECT_EQ(
      CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("pendingWorkloads", -1),
      0);
  ASSERT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-a/workloads/parked").status, 200);
  json org = CallJson("GET", std::string(kApi) + "/queues/org");
  EXPECT_EQ(org["status"].value("usedGpus", ""), "24") << org.dump();
  EXPECT_EQ(org["status"].value("pendingWorkloads", -1), 1) << org.dump();

  // team-a, within its guarantee, wants 16: 8 are free, the other 8 are reclaimed from team-b.
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  CreateWorkload(WholeGpuWorkload("team-a", "a-1", 8));
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.preempted, 1);
  w = Workloads();
  std::string victim, preemptor;
  for (const auto& [name, obj] : w) {
    const json& st = obj["status"];
    if (st.contains("preemption")) victim = name;
    if (name.rfind("team-a/", 0) == 0 && st.value("phase", "") == "Pending") preemptor = name;
  }
  ASSERT_FALSE(victim.empty()) << Describe(w);
  ASSERT_FALSE(preemptor.empty()) << Describe(w);
  EXPECT_EQ(victim.rfind("team-b/", 0), 0u) << victim;
  EXPECT_NE(victim, "team-b/b-0");
  const json& vs = w[victim]["status"];
  EXPECT_EQ(vs.value("phase", ""), "Running") << vs.dump();  // keeps running through its grace
  EXPECT_EQ(vs["preemption"].value("by", ""), preemptor) << vs.dump();
  EXPECT_NE(vs["preemption"].value("reason", "").find("reclaims its guarantee"), std::string::npos)
      << vs.dump();
  EXPECT_EQ(w[preemptor]["status"].value("reason", ""), "Preempting") << Describe(w);
  // The reclaim is kept in the queue's status (it holds the queue's unused guarantee for
  // --reclaim-hold, 0 here), so each cycle's Admitter knows of it.
  json qa = CallJson("GET", std::string(kApi) + "/queues/team-a");
  EXPECT_FALSE(qa["status"].value("lastReclaimTime", "").empty()) << qa.dump();

  // Within the grace period nothing else is evicted and the preemptor waits for its victim.
  stats = Cycle(2'000);
  EXPECT_EQ(stats.preempted, 0);
  w = Workloads();
  EXPECT_EQ(w[victim]["status"].value("phase", ""), "Running");
  EXPECT_NE(w[preemptor]["status"].value("message", "").find("waiting for 1 preempted"),
            std::string::npos)
      << Describe(w);

  // After it, the victim is back in its queue and team-a runs its 16.
  Cycle(4'000);
  Cycle();
  w = Workloads();
  EXPECT_EQ(w[victim]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(w[victim]["status"].value("reason", ""), "Queued") << Describe(w);
  EXPECT_EQ(w["team-a/a-0"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/a-1"]["status"].value("phase", ""), "Running") << Describe(w);
  int gpus_b = 0;
  for (const auto& [name, obj] : w) {
    if (name.rfind("team-b/", 0) == 0 && obj["status"].value("phase", "") == "Running") gpus_b += 8;
  }
  EXPECT_EQ(gpus_b, 16) << Describe(w);
  EXPECT_EQ(w[b_waiting]["status"].value("phase", ""), "Pending");
}

// Two root queues, as two departments: with the server's --lend-across-trees, one tree
// borrows the GPUs the other leaves idle and what neither is guaranteed, and the other takes
// its guarantee back by reclaim; without it, a root's guarantee is the most its tree holds.
TEST_F(FactoryTest, QueueTreesLendEachOtherWithLendAcrossTrees) {
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across);
    StartScheduler(5'000, [&](SchedulerOptions& so) { so.lend_across_trees = across; });
    if (!across) {
      CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
      CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
      for (int i = 0; i < 4; ++i)
        CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
    }
    Cycle();
    Cycle();
    // (All 32 GPUs lending; team-b's own 8 apart.)
    EXPECT_EQ(CountRunning(), across ? 4 : 1) << Describe(Workloads());
  }
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  EXPECT_EQ(Cycle().preempted, 1);
  std::map<std::string, json> w = Workloads();
  std::string victim;
  for (const auto& [name, obj] : w)
    if (obj["status"].contains("preemption")) victim = name;
  ASSERT_EQ(victim.rfind("team-b/", 0), 0u) << Describe(w);
  EXPECT_NE(w[victim]["status"]["preemption"]
                .value("reason", "")
                .find("queue team-a reclaims its guarantee"),
            std::string::npos)
      << w[victim]["status"].dump();
  Cycle(6'000);
  Cycle();
  EXPECT_EQ(Workloads()["team-a/a-0"]["status"].value("phase", ""), "Running")
      << Describe(Workloads());
}

// The same under the one tree's root, where the leaf is short of the tree's quota (unqueued
// under it holds it all): it still says whose guarantee it takes back (a user-style trial read
// "queue qa reclaims its guarantee" of a queue guaranteed nothing).
TEST_F(FactoryTest, ALeafShortOfItsTreesQuotaSaysWhoseGuaranteeItReclaims) {
  StartScheduler(5'000);
  CreateQueue("org", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  CreateQueue("qa", {{"parent", "org"}, {"tenants", {"team-a"}}});
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-c", "c-" + std::to_string(i), 8));  // no queue
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  json a = WholeGpuWorkload("team-a", "a-0", 8);
  a["spec"]["queue"] = "qa";
  CreateWorkload(a);
  EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  std::string reason;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption"))
      reason = obj["status"]["preemption"].value("reason", "");
  EXPECT_NE(reason.find("queue qa reclaims queue org's guarantee (it has none of its own)"),
            std::string::npos)
      << reason;
}

// Lending across trees, the GPUs of cordoned nodes are not lent: team-a lends none of its 8
// GPUs, and the 16 nobody is guaranteed sit on the two cordoned nodes. Counted, they would let
// team-b take team-a's 8.
TEST_F(FactoryTest, CordonedGpusAreNotLentAcrossTrees) {
  StartScheduler(5'000, [&](SchedulerOptions& so) { so.lend_across_trees = true; });
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}, {"lendingLimit", 0}}}}}});
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  for (const std::string name : {fleet_.nodes[0].name.str(), fleet_.nodes[1].name.str()}) {
    ClientResponse r = Call("PATCH", std::string(kApi) + "/nodes/" + name,
                            R"({"spec":{"unschedulable":true}})", "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  for (int i = 0; i < 2; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  Cycle();
  Cycle();
  EXPECT_EQ(CountRunning(), 1) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  EXPECT_EQ(Cycle().preempted, 0);
  Cycle();
  EXPECT_EQ(Workloads()["team-a/a-0"]["status"].value("phase", ""), "Running")
      << Describe(Workloads());
}

// The health controller stops the work it marks (evictor "health") itself at the deadline: the
// scheduler leaves it, but for a mark the health controller lost (a restart), stopped a minute
// past its deadline, as an eviction.
TEST_F(FactoryTest, AHealthEvictionIsLeftToTheHealthControllerUnlessItLostIt) {
  CreateWorkload(WholeGpuWorkload("team-a", "w", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const std::string key = "/registry/workloads/team-a/w";
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  obj["status"]["preemption"] = {{"by", ""},
                                 {"reason", "node x is draining"},
                                 {"deadline", FormatTimestamp(clock_.NowMs() + 1'000)},
                                 {"evictor", "health"}};
  ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  for (int i = 0; i < 5; ++i) Cycle(10'000);  // 49 s past its deadline
  EXPECT_EQ(Workloads()["team-a/w"]["status"].value("phase", ""), "Running");
  Cycle(15'000);
  const json status = Workloads()["team-a/w"]["status"];
  EXPECT_EQ(
      status.value("evictions", json::object()).value("last", json::object()).value("reason", ""),
      "Evicted")
      << status.dump();
  EXPECT_EQ(status.value("message", "").find("evicted: node x is draining"),
            std::string("requeued: ").size())
      << status.dump();
}

// With fair-share preemption a queue's borrowWithinCohort is set aside with a warning in its
// status, not the whole tree refused (a user-style review: examples/queues.yaml stopped every
// queue's admission on a --fair-share-preemption server).
TEST_F(FactoryTest, FairSharePreemptionSetsBorrowWithinCohortAside) {
  StartScheduler(5'000, [&](SchedulerOptions& so) { so.fair_share_preemption = true; });
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}},
                         {"preemption", {{"borrowWithinCohort", {{"policy", "LowerPriority"}}}}}});
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const json q = json::parse(Call("GET", std::string(kApi) + "/queues/team-b").body);
  EXPECT_NE(
      q["status"].value("warning", "").find("spec.preemption.borrowWithinCohort is set aside"),
      std::string::npos)
      << q.dump();
}

// With fair-share preemption the built-in unqueued takes only what is idle: it never evicts
// the queues' running work for a share of its own (a user-style review saw team-a and team-b
// evicted "for queue unqueued's fair share").
TEST_F(FactoryTest, UnqueuedTakesNoFairShare) {
  StartScheduler(5'000, [&](SchedulerOptions& so) { so.fair_share_preemption = true; });
  CreateQueue("org", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  CreateQueue("team-a", {{"parent", "org"}});
  CreateQueue("team-b", {{"parent", "org"}});
  for (int i = 0; i < 2; ++i) {
    CreateWorkload(WholeGpuWorkload("team-a", "a-" + std::to_string(i), 8));
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  }
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-c", "c-0", 8));  // team-c has no queue
  EXPECT_EQ(Cycle().preempted, 0) << Describe(Workloads());
  EXPECT_EQ(Cycle().preempted, 0) << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-c/c-0"]["status"].value("phase", ""), "Pending");
}

// A leaf with no guarantee of its own, under a department that has one, takes back from
// best-effort work (unqueued beside several trees) what its department is guaranteed (a
// user-style review: team-a waited for good while unqueued held 48 GPUs and research used 8 of
// its 48).
TEST_F(FactoryTest, ALeafWithoutAGuaranteeReclaimsItsDepartmentsFromBestEffortWork) {
  StartScheduler(5'000);
  CreateQueue("research", {{"quotas", {{"gpu", {{"guaranteed", 24}}}}}});
  CreateQueue("team-a", {{"parent", "research"}});
  CreateQueue("team-b", {{"parent", "research"}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  CreateQueue("ops", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-c", "c-" + std::to_string(i), 8));  // no queue
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  std::string reason;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption"))
      reason = obj["status"]["preemption"].value("reason", "");
  EXPECT_NE(
      reason.find("queue team-a reclaims queue research's guarantee (it has none of its own)"),
      std::string::npos)
      << reason;
  Cycle(6'000);
  Cycle();
  EXPECT_EQ(Workloads()["team-a/a-0"]["status"].value("phase", ""), "Running")
      << Describe(Workloads());
}

// A victim whose preemptor planned to land on a node that is cordoned meanwhile is not
// evicted after all (its room there could not be used: a user-style review saw the eviction
// wasted); the preemptor plans again elsewhere.
class PlanCordonTest : public FactoryTest, public testing::WithParamInterface<bool> {};
TEST_P(PlanCordonTest, ACordonOnThePlannedNodeReleasesItsVictims) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());
  std::string victim, node;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption")) {
      victim = name;
      node = obj["status"]["assignments"][0].value("node", "");
    }
  ASSERT_FALSE(node.empty());
  ASSERT_EQ(Workloads()["team-b/b-0"]["status"]["nomination"][0].value("node", ""), node);
  // (With the parameter, only one GPU of the plan is cordoned, as the health controller records
  // it.)
  if (GetParam()) {
    const int gpu =
        Workloads()["team-b/b-0"]["status"]["nomination"][0]["devices"][0].value("index", -1);
    const json record = {{"metadata", {{"name", node}}},
                         {"schedulable", true},
                         {"gpus", {{{"index", gpu}, {"schedulable", false}}}}};
    ASSERT_TRUE(store_->Put("/registry/nodehealth/" + node, record.dump(), kAnyRevision).ok());
  } else {
    ClientResponse r = Call("PATCH", std::string(kApi) + "/nodes/" + node,
                            R"({"spec":{"unschedulable":true}})", "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  Cycle();
  const json released = Workloads()[victim]["status"];
  EXPECT_FALSE(released.contains("preemption")) << released.dump();
  EXPECT_EQ(released.value("phase", ""), "Running");
  // Cycles later, within the grace period: it was not chosen again (a trial's victim was
  // called off and evicted again every cycle, its stop time moving on for ever), and the
  // preemptor evicts work on another node instead.
  for (int i = 0; i < 4; ++i) Cycle(500);
  std::map<std::string, json> w = Workloads();
  EXPECT_FALSE(w[victim]["status"].contains("preemption")) << Describe(w);
  int evicting = 0;
  for (const auto& [name, obj] : w) {
    if (!obj["status"].contains("preemption")) continue;
    ++evicting;
    EXPECT_NE(obj["status"]["assignments"][0].value("node", ""), node) << Describe(w);
  }
  EXPECT_EQ(evicting, 1) << Describe(w);
  int evictions = 0;
  const std::string name = victim.substr(victim.find('/') + 1);
  const json events = CallJson("GET", std::string(kApi) +
                                          "/namespaces/team-a/events?fieldSelector="
                                          "involvedObject.name%3D" +
                                          name);
  for (const json& e : events.value("items", json::array()))
    if (e.value("reason", "") == "Evicting") evictions += e.value("count", 1);
  EXPECT_EQ(evictions, 1) << events.dump();
}
INSTANTIATE_TEST_SUITE_P(NodeOrGpu, PlanCordonTest, testing::Bool());

// A tenant does not read another tenant's workload names in what the scheduler wrote of its own
// work: team-a's victim, preempted for team-b's work, reads "preempted by another tenant's
// workload" in its status, its list and its events; an admin reads the name (a trial's tenant
// read the names of another tenant's workloads it could not list).
TEST_F(FactoryTest, ATenantReadsNoOtherTenantsWorkloadNames) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());
  std::string victim;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption")) victim = name;
  ASSERT_FALSE(victim.empty());
  const std::string name = victim.substr(victim.find('/') + 1);
  ClientOptions alice = client_options_;
  alice.token = "alice-token-e2e-0123456789";
  HttpClient alice_client(alice);
  const auto read = [&](const std::string& path) {
    auto r = alice_client.Do("GET", path);
    EXPECT_TRUE(r.ok() && r->status == 200) << path;
    return r.ok() ? r->body : std::string();
  };
  const std::string one = read(WorkloadPath("team-a") + "/" + name);
  const std::string all = read(WorkloadPath("team-a"));
  const std::string events = read(
      std::string(kApi) + "/namespaces/team-a/events?fieldSelector=involvedObject.name%3D" + name);
  for (const std::string* body : {&one, &all, &events}) {
    EXPECT_EQ(body->find("team-b/"), std::string::npos) << *body;
    EXPECT_NE(body->find("preempted by another tenant's workload"), std::string::npos) << *body;
  }
  EXPECT_NE(one.find("\"namespace\":\"team-a\""), std::string::npos) << one;
  const json admin = Workloads()[victim];
  EXPECT_NE(admin["status"].value("message", "").find("preempted by team-b/b-0"), std::string::npos)
      << admin.dump();
}

// A queue with work waiting in it is not deleted (its tenant's work would move to `unqueued`
// and run there, past the queue's hold: a user-style review), and work naming a queue that does
// not exist waits for it (reason QueueNotFound, not Unschedulable), then runs once it exists.
TEST_F(FactoryTest, QueuesWithWaitingWorkStayAndWorkWaitsForItsQueue) {
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}, {"stopPolicy", "Hold"}});
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  json lost = WholeGpuWorkload("team-a", "lost", 1);
  lost["spec"]["queue"] = "later";
  CreateWorkload(lost);
  Cycle();
  ClientResponse r = Call("DELETE", std::string(kApi) + "/queues/team-b");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("Queue 'team-b' is in use: 1 pending workload(s) wait in it "
                        "(team-b/b-0); delete them, or set their spec.queue to another queue, "
                        "first"),
            std::string::npos)
      << r.body;
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-b/b-0"]["status"].value("phase", ""), "Pending") << Describe(w);
  WaitsForQueueLaterThenRuns("team-a/lost");
}

// What happened to a workload is kept as events, as Kubernetes keeps them (a user-style review:
// `describe` showed only the last eviction, and there were no events to debug with): team-b's
// reclaim shows on the victim as Created, Started, Preempted and its eviction, and on b-0 as
// Preempting, then Started. A tenant reads its own events only.
TEST_F(FactoryTest, EventsTellWhatHappenedToAWorkload) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());
  std::string victim;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption")) victim = obj["metadata"].value("name", "");
  ASSERT_FALSE(victim.empty());
  for (int i = 0; i < 8 && Workloads()["team-b/b-0"]["status"].value("phase", "") != "Running"; ++i)
    Cycle(2'000);
  const auto reasons = [&](const std::string& ns, const std::string& name) {
    std::vector<std::string> out;
    const json list = CallJson("GET", std::string(kApi) + "/namespaces/" + ns +
                                          "/events?fieldSelector=involvedObject.name%3D" + name);
    for (const json& e : list.value("items", json::array())) {
      EXPECT_EQ(e["involvedObject"].value("name", ""), name) << e.dump();
      out.push_back(e.value("type", "") + " " + e.value("reason", "") + ": " +
                    e.value("message", ""));
    }
    return out;
  };
  const std::vector<std::string> mine = reasons("team-a", victim);
  const auto has = [](const std::vector<std::string>& events, const std::string& what) {
    return std::any_of(events.begin(), events.end(),
                       [&](const std::string& e) { return e.find(what) != std::string::npos; });
  };
  std::string all;
  for (const std::string& e : mine) all += e + "\n";
  EXPECT_TRUE(has(mine, "Normal Created")) << all;
  EXPECT_TRUE(has(mine, "Normal Started")) << all;
  EXPECT_TRUE(has(mine, "Normal Admitted: placed on hgx-")) << all;
  EXPECT_TRUE(has(mine,
                  "Warning Evicting: preempted by team-b/b-0 (queue team-b reclaims its "
                  "guarantee); stops at "))
      << all;
  EXPECT_TRUE(has(mine,
                  "Warning Preempted: preempted by team-b/b-0 (queue team-b reclaims its "
                  "guarantee); stopped and put back in line (eviction 1)"))
      << all;
  // The eviction is said once (not again as the phase it was put back in).
  EXPECT_EQ(
      std::count_if(mine.begin(), mine.end(),
                    [](const std::string& e) { return e.find("Preempted") != std::string::npos; }),
      1)
      << all;
  // kubectl's form of the selector; a field it cannot select by is refused.
  EXPECT_EQ(
      CallJson("GET", std::string(kApi) + "/namespaces/team-a/events?fieldSelector=" +
                          "involvedObject.name%3D" + victim + "%2CinvolvedObject.kind%3DWorkload")
          .value("items", json::array())
          .size(),
      mine.size());
  EXPECT_EQ(Call("GET", std::string(kApi) + "/events?fieldSelector=source%3Dx").status, 400);
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/namespaces/team-a/events?fieldSelector=" +
                                "involvedObject.name%3D%3D" + victim + "%2Creason%3DEvicting")
                .value("items", json::array())
                .size(),
            1u);
  // (Its Started event is recorded as the store's watch delivers the change, on another
  // thread: looked for a little while, a loaded machine's recorder a step behind.)
  std::vector<std::string> theirs = reasons("team-b", "b-0");
  for (int i = 0; i < 50 && !has(theirs, "Normal Started"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    theirs = reasons("team-b", "b-0");
  }
  all.clear();
  for (const std::string& e : theirs) all += e + "\n";
  EXPECT_TRUE(has(theirs, "Normal Preempting")) << all;
  // Waiting, each change of what it waits for: its victim chosen, then stopping.
  EXPECT_TRUE(has(theirs, "Normal Preempting: preempting 1 workload(s)")) << all;
  // (Its victims by name: a trial had to search for them.)
  EXPECT_TRUE(has(theirs, "Normal Preempting: waiting for 1 preempted workload(s) (team-a/a-"))
      << all;
  EXPECT_TRUE(has(theirs, "Normal Started")) << all;
  // All namespaces: both; a tenant's member: its own only.
  const json every = CallJson("GET", std::string(kApi) + "/events");
  std::set<std::string> namespaces;
  for (const json& e : every.value("items", json::array()))
    namespaces.insert(e["involvedObject"].value("namespace", ""));
  EXPECT_TRUE(namespaces.count("team-a") && namespaces.count("team-b")) << every.dump();
  ClientOptions alice = client_options_;
  alice.token = "alice-token-e2e-0123456789";
  HttpClient alice_client(alice);
  auto own = alice_client.Do("GET", std::string(kApi) + "/events");
  ASSERT_TRUE(own.ok());
  for (const json& e : json::parse(own->body).value("items", json::array()))
    EXPECT_EQ(e["involvedObject"].value("namespace", ""), "team-a") << own->body;
  auto other = alice_client.Do("GET", std::string(kApi) + "/namespaces/team-b/events");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 403) << other->body;
  EXPECT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-a/events").status, 405);
  // Deleted, its history stays (for an hour), saying so; one created again by its name starts
  // afresh.
  ASSERT_EQ(Call("DELETE", WorkloadPath("team-a", victim)).status, 200);
  Cycle();
  ASSERT_FALSE(reasons("team-a", victim).empty());
  EXPECT_EQ(reasons("team-a", victim).back().rfind("Normal Deleted: deleted", 0), 0u)
      << reasons("team-a", victim).back();
  CreateWorkload(WholeGpuWorkload("team-a", victim, 1));
  // (Events follow the store's writes a moment after they commit, as Kubernetes' do: under
  // load the creation may not be noted yet when the POST returns.)
  std::vector<std::string> anew = reasons("team-a", victim);
  for (int i = 0; i < 100 && anew.size() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    anew = reasons("team-a", victim);
  }
  ASSERT_EQ(anew.size(), 1u) << anew.back();
  EXPECT_EQ(anew[0].rfind("Normal Created", 0), 0u) << anew[0];
}

// With no queue at all, work naming one waits for it too (before, it ran at once, past the
// limits its queue would set, and moved to unqueued once any queue existed: a user-style
// review); a name no queue could take is refused, naming spec.queue.
TEST_F(FactoryTest, WithNoQueuesWorkNamingAQueueWaitsForIt) {
  json later = WholeGpuWorkload("team-a", "later-0", 1);
  later["spec"]["queue"] = "later";
  CreateWorkload(later);
  CreateWorkload(WholeGpuWorkload("team-a", "plain", 1));
  json builtin = WholeGpuWorkload("team-a", "builtin", 1);
  builtin["spec"]["queue"] = "unqueued";  // (the built-in, which every tenant may name)
  CreateWorkload(builtin);
  json bad = WholeGpuWorkload("team-a", "bad", 1);
  bad["spec"]["queue"] = "Bad_Name!";
  ClientResponse r = Call("POST", WorkloadPath("team-a"), bad.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.queue"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("'Bad_Name!' is not a valid name"), std::string::npos) << r.body;
  // A MIG profile no GPU has, likewise.
  json mig = WholeGpuWorkload("team-a", "mig", 1);
  mig["spec"]["podSets"][0]["devices"] = {{"mig", "9g.99gb"}};
  r = Call("POST", WorkloadPath("team-a"), mig.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.podSets[0].devices.mig: mig profile '9g.99gb' takes 1, 2, 3, 4 or 7"),
            std::string::npos)
      << r.body;
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w.count("team-a/bad"), 0u);
  EXPECT_EQ(w["team-a/plain"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/builtin"]["status"].value("phase", ""), "Running") << Describe(w);
  WaitsForQueueLaterThenRuns("team-a/later-0");
}

// A workload whose tenant has no queue waits in the built-in `unqueued`, which sits under the
// tree's root: it borrows what the queues leave idle, and is the first reclaimed.
TEST_F(FactoryTest, UnqueuedWorkBorrowsWhatTheQueuesLeaveIdle) {
  CreateTeamQueues(16, 16);
  CreateWorkload(WholeGpuWorkload("team-c", "c-0", 8));  // team-c has no queue
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  // It is listed and shown beside the stored queues, with its place and standing, and is not
  // the API's to change or delete.
  const json list = json::parse(Call("GET", std::string(kApi) + "/queues").body);
  json builtin;
  for (const json& q : list["items"])
    if (q["metadata"]["name"] == "unqueued") builtin = q;
  ASSERT_TRUE(builtin.is_object()) << list.dump();
  EXPECT_EQ(builtin["spec"].value("parent", ""), "org") << builtin.dump();
  EXPECT_EQ(builtin["status"].value("usedGpus", ""), "8") << builtin.dump();
  EXPECT_EQ(json::parse(Call("GET", std::string(kApi) + "/queues/unqueued").body), builtin);
  ClientResponse r = Call("DELETE", std::string(kApi) + "/queues/unqueued");
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_NE(r.body.find("Queue 'unqueued' is built in"), std::string::npos) << r.body;
  // A page of queues counts it (three stored queues fill a page of 3; the next has it).
  const json page = json::parse(Call("GET", std::string(kApi) + "/queues?limit=3").body);
  EXPECT_EQ(page["items"].size(), 3u) << page.dump();
  const std::string token = page["metadata"].value("continue", "");
  ASSERT_FALSE(token.empty()) << page.dump();
  const json next =
      json::parse(Call("GET", std::string(kApi) + "/queues?limit=3&continue=" + token).body);
  ASSERT_EQ(next["items"].size(), 1u) << next.dump();
  EXPECT_EQ(next["items"][0]["metadata"]["name"], "unqueued");
  // Written back by an admin (a patch, or an apply of what `get` showed), it is theirs: a
  // stored queue, no longer marked built in, and the built-in's record goes.
  r = Call("PATCH", std::string(kApi) + "/queues/unqueued", R"({"spec": {"weight": 2}})",
           "application/merge-patch+json");
  EXPECT_EQ(r.status, 201) << r.body;
  auto stored = store_->Get("/registry/queues/unqueued");
  ASSERT_TRUE(stored.ok());
  const json mine = json::parse(stored->value);
  EXPECT_EQ(mine["spec"].value("weight", 0.0), 2.0) << mine.dump();
  EXPECT_EQ(mine["spec"].value("parent", ""), "org") << mine.dump();
  EXPECT_FALSE(
      mine["metadata"].value("annotations", json::object()).contains("fabrica.dev/built-in"))
      << mine.dump();
  Cycle();
  int named = 0;
  const json after = json::parse(Call("GET", std::string(kApi) + "/queues").body);
  for (const json& q : after["items"]) named += q["metadata"]["name"] == "unqueued";
  EXPECT_EQ(named, 1) << after.dump();
  EXPECT_FALSE(store_->Get(kBuiltinQueueKey).ok());
}

// Under the one tree's root, unqueued is best effort too: work there goes after its siblings'
// for room they both wait for, and a sibling with no guarantee of its own takes back the room
// it holds of the root's guarantee (a user-style trial: unqueued work, its share the lower, took
// the GPUs a queue waited for, and that queue waited on "queue ml has no unused gpu").
TEST_F(FactoryTest, UnqueuedWorkUnderTheOneRootGoesLastAndIsReclaimedFirst) {
  StartScheduler(5'000);
  CreateQueue("ml", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  CreateQueue("qa", {{"parent", "ml"}, {"weight", 3}, {"tenants", {"team-a"}}});
  CreateQueue("qb", {{"parent", "ml"}, {"weight", 1}, {"tenants", {"team-b"}}});
  const auto in = [](json w, const std::string& queue) {
    w["spec"]["queue"] = queue;
    return w;
  };
  CreateWorkload(in(WholeGpuWorkload("team-a", "a-0", 4), "qa"));
  CreateWorkload(in(WholeGpuWorkload("team-b", "b-0", 4), "qb"));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  // Both wait for the root's room: qa's takes it when b-0 ends (best-effort queues are tried
  // last in a cycle, and a sibling reclaims from them).
  CreateWorkload(in(WholeGpuWorkload("team-a", "a-1", 4), "qa"));
  Cycle();
  CreateWorkload(WholeGpuWorkload("team-c", "c-0", 4));  // (team-c has no queue: unqueued)
  Cycle();
  ASSERT_EQ(Call("DELETE", WorkloadPath("team-b", "b-0")).status, 200);
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/a-1"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-c/c-0"]["status"].value("phase", ""), "Pending") << Describe(w);
  // (Never admitted to be taken back at once.)
  EXPECT_FALSE(w["team-c/c-0"]["status"].contains("preemption")) << Describe(w);
  EXPECT_FALSE(w["team-c/c-0"]["status"].contains("evictions")) << Describe(w);
  // Room for unqueued alone: it runs; then qa's next takes it back for the root's guarantee.
  ASSERT_EQ(Call("DELETE", WorkloadPath("team-a", "a-1")).status, 200);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(in(WholeGpuWorkload("team-a", "a-2", 4), "qa"));
  EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  const json marked = Workloads()["team-c/c-0"]["status"];
  EXPECT_NE(marked.value("preemption", json::object())
                .value("reason", "")
                .find("preempted by team-a/a-2"),
            std::string::npos)
      << marked.dump();
  for (int i = 0; i < 4; ++i) Cycle(2'000);
  w = Workloads();
  EXPECT_EQ(w["team-a/a-2"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-c/c-0"]["status"].value("phase", ""), "Pending") << Describe(w);
}

// With the server's --fair-share-preemption, weights rebalance running work (KAI's over-quota
// reclaim by weight): team-a, which took the whole of org's 32 GPUs while team-b had nothing to
// run, gives one job back when team-b comes, though neither is guaranteed any; without it,
// team-b waits for team-a's runs to end. With team-b's weight raised to 3, team-a gives back
// until the two hold 3:1.
TEST_F(FactoryTest, FairSharePreemptionRebalancesRunningWork) {
  for (const bool fair : {false, true}) {
    SCOPED_TRACE(fair);
    StartScheduler(5'000, [&](SchedulerOptions& so) { so.fair_share_preemption = fair; });
    const std::string suffix = fair ? "-f" : "";
    if (!fair) {
      CreateQueue("org", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
      CreateQueue("team-a", {{"parent", "org"}});
      CreateQueue("team-b", {{"parent", "org"}});
    }
    for (int i = 0; i < 4; ++i)
      CreateWorkload(WholeGpuWorkload("team-a", "a-" + std::to_string(i) + suffix, 8));
    ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
    CreateWorkload(WholeGpuWorkload("team-b", "b0" + suffix, 8));
    EXPECT_EQ(Cycle().preempted, fair ? 1 : 0) << Describe(Workloads());
    Cycle(6'000);
    Cycle();
    std::map<std::string, json> w = Workloads();
    EXPECT_EQ(w["team-b/b0" + suffix]["status"].value("phase", ""), fair ? "Running" : "Pending")
        << Describe(w);
    if (!fair) {
      // Its wait says how fair share orders it, and that nothing running moves for it.
      EXPECT_NE(
          w["team-b/b0"]["status"]
              .value("message", "")
              .find(
                  "; as room frees, its siblings' work goes first where it fits within their "
                  "queues' guarantees, then by weighted share, lowest first (fabctl describe queue "
                  "shows each one's); fair-share preemption is off: running work is not moved "
                  "for it"),
          std::string::npos)
          << Describe(w);
      DeleteWorkloads(w, {"team-a", "team-b"});
      Cycle();
      continue;
    }
    bool said = false;
    for (const auto& [name, obj] : w)
      said |= obj["status"].dump().find("for queue team-b's fair share") != std::string::npos;
    EXPECT_TRUE(said) << Describe(w);
    ClientResponse r = Call("PATCH", std::string(kApi) + "/queues/team-b",
                            json{{"spec", {{"weight", 3}}}}.dump(), "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
    for (int i = 1; i < 4; ++i)
      CreateWorkload(WholeGpuWorkload("team-b", "b" + std::to_string(i) + suffix, 8));
    for (int i = 0; i < 6; ++i) Cycle(3'000);
    w = Workloads();
    int a = 0, b = 0;
    for (const auto& [name, obj] : w) {
      if (obj["status"].value("phase", "") != "Running") continue;
      (name.rfind("team-a/", 0) == 0 ? a : b) += 8;
    }
    EXPECT_EQ(a, 8) << Describe(w);
    EXPECT_EQ(b, 24) << Describe(w);
    // The one left waiting is told what fair-share preemption would move for it.
    int told = 0;
    for (const auto& [name, obj] : w)
      if (name.rfind("team-b/", 0) == 0 && obj["status"].value("phase", "") == "Pending")
        told += obj["status"]
                    .value("message", "")
                    .find(
                        "; fair-share preemption moves running work for it only from what another "
                        "queue borrows past its guarantee, and only while that queue's current "
                        "share (its dominant share now over its weight: usage history orders "
                        "admission, not preemption) would stay at or above its own") !=
                std::string::npos;
    EXPECT_EQ(told, 1) << Describe(w);
  }
}

// Beside several trees (whether or not they lend each other), `unqueued` is a tree of its own
// with no guarantee: work naming no queue runs on what is idle, and goes back when a tree's
// work within its guarantee needs the room (a user-style review saw it Unschedulable, "may
// hold at most 0", with most of the fleet idle).
TEST_F(FactoryTest, UnqueuedWorkBesideSeveralTreesRunsOnIdleGpus) {
  for (const bool across : {false, true}) {
    SCOPED_TRACE(across);
    StartScheduler(5'000, [&](SchedulerOptions& so) { so.lend_across_trees = across; });
    const std::string suffix = across ? "-x" : "";
    if (!across) {
      CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
      CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
      CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
    }
    for (int i = 0; i < 3; ++i)
      CreateWorkload(WholeGpuWorkload("team-c", "c-" + std::to_string(i) + suffix, 8));
    Cycle();
    Cycle();
    std::map<std::string, json> w = Workloads();
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(w["team-c/c-" + std::to_string(i) + suffix]["status"].value("phase", ""), "Running")
          << Describe(w);
    // team-a comes for its guarantee: a job of unqueued's makes way.
    CreateWorkload(WholeGpuWorkload("team-a", "a-0" + suffix, 8));
    EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
    Cycle(6'000);
    Cycle();
    w = Workloads();
    EXPECT_EQ(w["team-a/a-0" + suffix]["status"].value("phase", ""), "Running") << Describe(w);
    int c_running = 0;
    for (const auto& [name, obj] : w)
      c_running += name.rfind("team-c/", 0) == 0 && obj["status"].value("phase", "") == "Running";
    EXPECT_EQ(c_running, 2) << Describe(w);
    // (The next round starts from what this one left: team-c's evicted job waits again.)
    DeleteWorkloads(w, {"team-a", "team-c"});
    Cycle();
  }
}

// A borrower held back for another queue's work within its guarantee swaps out its own queue's
// lower-priority work through the server, whose admitter is rebuilt every cycle: the swap is
// kept as held in the preemptor's status (status.swap.held) while its victim stops, and it is
// admitted as that swap (its queue holding no more than before), while team-c's work, which
// never reclaims, keeps waiting.
TEST_F(FactoryTest, AHeldBorrowerSwapsOutItsOwnLowerPriorityWorkAcrossRebuiltCycles) {
  StartScheduler(5'000);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  CreateQueue("team-b", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  CreateQueue("team-c", {{"parent", "org"},
                         {"quotas", {{"gpu", {{"guaranteed", 8}}}}},
                         {"preemption", {{"reclaimWithinCohort", "Never"}}}});
  for (int i = 0; i < 3; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "low-" + std::to_string(i), 8));
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  // team-c's 8 GPUs wait for room (team-a borrows them; team-c takes none back): the hold.
  CreateWorkload(WholeGpuWorkload("team-c", "c-0", 8));
  json urgent = WholeGpuWorkload("team-a", "urgent", 8);
  urgent["spec"]["priority"] = 100;
  CreateWorkload(urgent);
  CycleStats stats = Cycle();
  std::map<std::string, json> w = Workloads();
  ASSERT_EQ(stats.preempted, 1) << Describe(w);
  const json& waiting = w["team-a/urgent"]["status"];
  EXPECT_EQ(waiting.value("reason", ""), "Preempting") << waiting.dump();
  EXPECT_EQ(waiting["swap"], (json{{"flavor", "gpu"}, {"ceilingMilli", 24000}, {"held", true}}))
      << waiting.dump();
  int preempted = stats.preempted;
  for (int i = 0; i < 10 && w["team-a/urgent"]["status"].value("phase", "") != "Running"; ++i) {
    preempted += Cycle(2'000).preempted;
    w = Workloads();
  }
  EXPECT_EQ(w["team-a/urgent"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(preempted, 1) << Describe(w);
  int running_a = 0;
  for (const auto& [name, obj] : w)
    if (name.rfind("team-a/", 0) == 0 && obj["status"].value("phase", "") == "Running") ++running_a;
  EXPECT_EQ(running_a, 3) << Describe(w);
  EXPECT_EQ(w["team-c/c-0"]["status"].value("phase", ""), "Pending") << Describe(w);
}

// A queue past a quota that shrank under it (team-b borrowed team-a's unused guarantee; team-a
// then started within its guarantee on a node no tree is guaranteed: team-c's tree is guaranteed
// 2 of the 10 GPUs that team-a's tree is not) gets urgent work
// in by a swap: one of its jobs makes way, not the two that would bring it within its quota
// now, which would only leave GPUs idle. The Admitter is rebuilt every cycle, so the swap is
// kept in the preemptor's status (status.swap) while its victim stops.
TEST_F(FactoryTest, UrgentWorkPastAShrunkQuotaSwapsInOneVictimAtATime) {
  StartScheduler(5'000);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  CreateQueue("team-b", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  CreateQueue("team-c", {{"quotas", {{"gpu", {{"guaranteed", 2}}}}}});
  for (int i = 0; i < 3; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "fill-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  json urgent = WholeGpuWorkload("team-b", "urgent", 8);
  urgent["spec"]["priority"] = 100;
  CreateWorkload(urgent);
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.preempted, 1) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  const json& waiting = w["team-b/urgent"]["status"];
  EXPECT_EQ(waiting.value("reason", ""), "Preempting") << waiting.dump();
  EXPECT_EQ(waiting["swap"], (json{{"flavor", "gpu"}, {"ceilingMilli", 24000}})) << waiting.dump();
  // The stored status does not stop its owner changing it meanwhile.
  ClientResponse patched =
      Call("PATCH", WorkloadPath("team-b") + "/urgent", json{{"spec", {{"priority", 90}}}}.dump(),
           "application/merge-patch+json");
  EXPECT_EQ(patched.status, 200) << patched.body;
  int preempted = stats.preempted;
  for (int i = 0; i < 8 && w["team-b/urgent"]["status"].value("phase", "") != "Running"; ++i) {
    preempted += Cycle(2'000).preempted;
    w = Workloads();
  }
  EXPECT_EQ(w["team-b/urgent"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_FALSE(w["team-b/urgent"]["status"].contains("swap")) << Describe(w);
  EXPECT_EQ(preempted, 1) << Describe(w);
  int running_b = 0;
  for (const auto& [name, obj] : w)
    if (name.rfind("team-b/", 0) == 0 && obj["status"].value("phase", "") == "Running") ++running_b;
  EXPECT_EQ(running_b, 3) << Describe(w);
  // The trees' guarantees (24 + 2) fit the fleet's 34 GPUs; another root's 14 do not: each root
  // guaranteed some says so in its status (fabctl get queues prints it as a warning).
  EXPECT_FALSE(CallJson("GET", std::string(kApi) + "/queues/org")["status"].contains("warning"));
  CreateQueue("team-d", {{"quotas", {{"gpu", {{"guaranteed", 14}}}}}});
  Cycle();
  const json org = CallJson("GET", std::string(kApi) + "/queues/org");
  EXPECT_EQ(org["status"].value("warning", ""),
            "the queue trees' guarantees of gpu add up to 40 GPUs, past the fleet's 34: they "
            "cannot all be met at once")
      << org.dump();
  ASSERT_EQ(Call("DELETE", std::string(kApi) + "/queues/team-d").status, 200);
  Cycle();
  EXPECT_FALSE(CallJson("GET", std::string(kApi) + "/queues/org")["status"].contains("warning"));
}

// Where trees do not lend each other, team-a coming back for the guarantee its sibling team-b
// borrowed takes it back from team-b, not from team-c's idle tree: team-c's work then starts at
// once. (Before, a-0 started on team-c's GPUs, org held 24 of its 16, and team-c reclaimed.)
TEST_F(FactoryTest, ATreeTakesBackWhatItLentBeforeAnotherTreesIdleGpus) {
  StartScheduler(5'000);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  CreateQueue("team-b", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  CreateQueue("team-c", {{"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  for (int i = 0; i < 2; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "fill-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  int preempted = Cycle().preempted;
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(preempted, 1) << Describe(w);
  EXPECT_EQ(w["team-a/a-0"]["status"].value("reason", ""), "Preempting") << Describe(w);
  for (int i = 0; i < 8 && w["team-a/a-0"]["status"].value("phase", "") != "Running"; ++i) {
    preempted += Cycle(2'000).preempted;
    w = Workloads();
  }
  EXPECT_EQ(w["team-a/a-0"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(preempted, 1) << Describe(w);
  for (int i = 0; i < 2; ++i)
    CreateWorkload(WholeGpuWorkload("team-c", "c-" + std::to_string(i), 8));
  EXPECT_EQ(Cycle().preempted, 0);
  w = Workloads();
  for (const char* c : {"team-c/c-0", "team-c/c-1"})
    EXPECT_EQ(w[c]["status"].value("phase", ""), "Running") << Describe(w);
}

// Named priorities: a workload naming PriorityClass "urgent" (value 100) takes that value when
// it is stored, so it preempts lower-priority work of its own queue; naming a class that does
// not exist is refused at once.
TEST_F(FactoryTest, PriorityClassesNameTheValueAWorkloadRunsAt) {
  StartScheduler(5'000);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "low-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  json ghost = WholeGpuWorkload("team-a", "ghost", 8);
  ghost["spec"]["priorityClassName"] = "later";
  ClientResponse refused = Call("POST", WorkloadPath("team-a"), ghost.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("priority class 'later' does not exist"), std::string::npos)
      << refused.body;
  json pc = {{"apiVersion", "fabrica.dev/v1"},
             {"kind", "PriorityClass"},
             {"metadata", {{"name", "urgent"}}},
             {"spec", {{"value", 100}, {"description", "pages someone"}}}};
  ClientResponse r = Call("POST", std::string(kApi) + "/priorityclasses", pc.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  json urgent = WholeGpuWorkload("team-a", "urgent", 8);
  urgent["spec"]["priorityClassName"] = "urgent";
  CreateWorkload(urgent);
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.preempted, 1) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/urgent"]["spec"].value("priority", -1), 100);
  EXPECT_NE(w["team-a/urgent"]["status"].value("message", "").find("for higher-priority work"),
            std::string::npos)
      << Describe(w);
  // Switched to another class by a patch that names only the class (as a re-applied manifest
  // does, the old value carried along), it takes the new class's value.
  pc["metadata"]["name"] = "high";
  pc["spec"]["value"] = 50;
  ASSERT_EQ(Call("POST", std::string(kApi) + "/priorityclasses", pc.dump()).status, 201);
  ClientResponse switched =
      Call("PATCH", WorkloadPath("team-a") + "/urgent",
           json{{"spec", {{"priorityClassName", "high"}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(switched.status, 200) << switched.body;
  EXPECT_EQ(json::parse(switched.body)["spec"].value("priority", -1), 50) << switched.body;
  // So does one that had a raw priority (an admin's) when it is given a class.
  json raw = WholeGpuWorkload("team-a", "raw", 8);
  raw["spec"]["priority"] = 5;
  CreateWorkload(raw);
  ClientResponse classed =
      Call("PATCH", WorkloadPath("team-a") + "/raw",
           json{{"spec", {{"priorityClassName", "high"}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(classed.status, 200) << classed.body;
  EXPECT_EQ(json::parse(classed.body)["spec"].value("priority", -1), 50) << classed.body;
  // A value that is neither the class's nor the one it had, given with it, is still refused.
  ClientResponse mismatch =
      Call("PATCH", WorkloadPath("team-a") + "/urgent",
           json{{"spec", {{"priorityClassName", "urgent"}, {"priority", 7}}}}.dump(),
           "application/merge-patch+json");
  EXPECT_EQ(mismatch.status, 422) << mismatch.body;
}

// A queue's preemption policy through the API: team-a runs all 32 GPUs at a negative priority
// (PriorityClass "background", -10), borrowing 16; team-b, guaranteed nothing, waits for
// quota to lend until its queue is changed to borrowWithinCohort: LowerPriority, after which
// its priority-0 workload evicts one of team-a's borrowed ones.
TEST_F(FactoryTest, BorrowWithinCohortEvictsLowerPriorityBorrowedWork) {
  StartScheduler(5'000);
  json bad = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Queue"},
              {"metadata", {{"name", "team-b"}}},
              {"spec", {{"parent", "org"}, {"preemption", {{"withinQueue", "Sometimes"}}}}}};
  ClientResponse refused = Call("POST", std::string(kApi) + "/queues", bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.preemption.withinQueue"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("LowerOrNewerEqualPriority"), std::string::npos) << refused.body;

  json pc = {{"apiVersion", "fabrica.dev/v1"},
             {"kind", "PriorityClass"},
             {"metadata", {{"name", "background"}}},
             {"spec", {{"value", -10}}}};
  ASSERT_EQ(Call("POST", std::string(kApi) + "/priorityclasses", pc.dump()).status, 201);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  CreateQueue("team-b", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 0}}}}}});
  CreateQueue("team-c", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  for (int i = 0; i < 4; ++i) {
    json w = WholeGpuWorkload("team-a", "a-" + std::to_string(i), 8);
    w["spec"]["priorityClassName"] = "background";
    CreateWorkload(w);
  }
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-a/a-0"]["spec"].value("priority", 0), -10);

  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  EXPECT_EQ(Cycle().preempted, 0) << Describe(Workloads());
  EXPECT_NE(Workloads()["team-b/b-0"]["status"].value("message", "").find("no unused gpu to lend"),
            std::string::npos)
      << Describe(Workloads());

  const std::string path = std::string(kApi) + "/queues/team-b";
  json queue = CallJson("GET", path);
  queue["spec"]["preemption"] = {{"borrowWithinCohort", {{"policy", "LowerPriority"}}}};
  ClientResponse put = Call("PUT", path, queue.dump());
  ASSERT_EQ(put.status, 200) << put.body;
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.preempted, 1) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  EXPECT_NE(w["team-b/b-0"]["status"]
                .value("message", "")
                .find("for higher-priority work borrowing in queue team-b"),
            std::string::npos)
      << Describe(w);
}

// stopPolicy through the API: HoldAndDrain evicts what team-a runs (after the grace period,
// for no preemptor, and the mark is not taken back while it stops) and admits nothing more;
// the queue's status says it is not active; back to None, its work runs again.
TEST_F(FactoryTest, StopPolicyDrainsAQueueUntilItIsResumed) {
  StartScheduler(5'000);
  CreateTeamQueues(16, 16);
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const std::string path = std::string(kApi) + "/queues/team-a";
  EXPECT_EQ(CallJson("GET", path)["status"].value("active", false), true);

  json queue = CallJson("GET", path);
  queue["spec"]["stopPolicy"] = "Drain";
  ClientResponse put = Call("PUT", path, queue.dump());
  EXPECT_EQ(put.status, 422) << put.body;
  EXPECT_NE(put.body.find("spec.stopPolicy"), std::string::npos) << put.body;
  queue["spec"]["stopPolicy"] = "HoldAndDrain";
  put = Call("PUT", path, queue.dump());
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "a-1", 8));
  Cycle();  // within the grace period: a-0 stays marked, a-1 waits
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/a-0"]["status"]["preemption"].value("reason", ""),
            "queue team-a is draining (stopPolicy: HoldAndDrain)")
      << Describe(w);
  EXPECT_EQ(w["team-a/a-1"]["status"].value("message", ""),
            "queue team-a is stopped (stopPolicy: HoldAndDrain)")
      << Describe(w);
  EXPECT_EQ(CallJson("GET", path)["status"].value("active", true), false);
  Cycle(5'000);
  Cycle();
  w = Workloads();
  EXPECT_EQ(w["team-a/a-0"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(w["team-a/a-1"]["status"].value("phase", ""), "Pending") << Describe(w);

  queue = CallJson("GET", path);
  queue["spec"]["stopPolicy"] = "None";
  ASSERT_EQ(Call("PUT", path, queue.dump()).status, 200);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  Cycle();
  EXPECT_EQ(CallJson("GET", path)["status"].value("active", false), true);
}

// A preemptor whose queue is stopped while its victims stop no longer waits to start, so the
// mark on its victim is taken off and the victim keeps running.
TEST_F(FactoryTest, StoppingAPreemptorsQueueSparesItsVictims) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());

  const std::string path = std::string(kApi) + "/queues/team-b";
  json queue = CallJson("GET", path);
  queue["spec"]["stopPolicy"] = "Hold";
  ASSERT_EQ(Call("PUT", path, queue.dump()).status, 200);
  Cycle();
  Cycle(5'000);  // past the grace period the victim would have stopped
  std::map<std::string, json> w = Workloads();
  for (int i = 0; i < 4; ++i) {
    const json& status = w["team-a/a-" + std::to_string(i)]["status"];
    EXPECT_EQ(status.value("phase", ""), "Running") << Describe(w);
    EXPECT_FALSE(status.contains("preemption")) << Describe(w);
  }
  EXPECT_EQ(w["team-b/b-0"]["status"].value("message", ""),
            "queue team-b is stopped (stopPolicy: Hold)")
      << Describe(w);
}

// A preemptor short of its queue's quota, whose victims a disruption budget of 1 lets go one
// at a time, keeps the quota each one frees: the victims, waiting again at lower priority, do
// not take it back (a user-style review watched an 8-GPU preemptor evict one 4-GPU victim after
// another for an hour and a half of virtual time, never starting).
TEST_F(FactoryTest, QuotaAPreemptorsVictimsFreeIsKeptForIt) {
  ASSERT_TRUE(UrgentWorkNeedsTwoVictimsUnderABudgetOfOne(5'000));
  int preempted = 0;
  std::string phase;
  for (int i = 0; i < 12 && phase != "Running"; ++i) {
    preempted += Cycle(3'000).preempted;
    phase = Workloads()["team-b/hot"]["status"].value("phase", "");
  }
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(phase, "Running") << Describe(w);
  EXPECT_EQ(preempted, 2) << Describe(w);
  int running = 0, evicted = 0;
  for (int i = 0; i < 4; ++i) {
    const json& status = w["team-b/v-" + std::to_string(i)]["status"];
    running += status.value("phase", "") == "Running";
    // Each victim, waiting again, keeps the record of its eviction.
    if (const json ev = status.value("evictions", json()); ev.is_object()) {
      ++evicted;
      EXPECT_EQ(ev.value("count", 0), 1) << ev.dump();
      EXPECT_EQ(ev["last"].value("reason", ""), "Preempted") << ev.dump();
      EXPECT_NE(ev["last"].value("message", "").find("preempted by team-b/hot ("),
                std::string::npos)
          << ev.dump();
      // ... and what its stopped run lost: 4 GPUs for at least the grace period (the clock
      // moves in whole seconds).
      const int64_t lost = ev.value("gpuSecondsLost", int64_t{-1});
      EXPECT_GE(lost, 4 * 5) << ev.dump();
      EXPECT_LE(lost, 4 * 120) << ev.dump();
      EXPECT_EQ(lost % 4, 0) << ev.dump();
    }
  }
  EXPECT_EQ(running, 2) << Describe(w);
  EXPECT_EQ(evicted, 2) << Describe(w);
}

// What a stopped run lost, read from its stored spec and status as admission reads a restored
// workload: only the pods that still run, from the start of the run or its last checkpoint,
// at its least size until it grew.
TEST(EvictionRecordTest, TheWorkARunLosesIsReadAsAdmissionReadsIt) {
  const int64_t t0 = ParseTimestamp("2026-12-02T10:00:00Z");
  auto at = [&](int64_t s) { return FormatTimestamp(t0 + s * 1000); };
  auto pod = [](const std::string& name, int gpus) {
    json devices = json::array();
    for (int d = 0; d < gpus; ++d) devices.push_back({{"index", d}, {"gpuMilli", 1000}});
    return json{{"pod", name}, {"node", "n-" + name}, {"devices", devices}};
  };
  json spec = {{"podSets", {{{"count", 4}, {"minCount", 1}}}}};
  json status = {{"startTime", at(0)},
                 {"assignments", {pod("main-0", 2), pod("main-1", 2), pod("main-2", 2)}}};
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(spec, status, t0 + 100'000), 6 * 100);
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(spec, json{{"assignments", status["assignments"]}}, t0), 0)
      << "not started: nothing lost";
  // Grown at 1,000 s from its least (main-0: 2 GPUs) to 6 GPUs, stopped at 1,100 s.
  json grown = status;
  grown["resizedTime"] = at(1000);
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(spec, grown, t0 + 1'100'000), 2 * 1000 + 6 * 100);
  // A checkpoint every 1,050 s: only the 50 s since the last one, all at 6 GPUs.
  json checkpoints = spec;
  checkpoints["checkpointIntervalSeconds"] = 1050;
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(checkpoints, grown, t0 + 1'100'000), 6 * 50);
  // A completed pod, and the pods an elastic shrink takes, lose nothing (and with a pod
  // completed the run counts at its size from its start, as admission restores it).
  json partly = grown;
  partly["finishedPods"] = {{"main-2", at(500)}};
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(spec, partly, t0 + 1'100'000), 4 * 1100);
  json shrinking = status;
  shrinking["shrinks"] = {{{"by", "hot"}, {"pods", {"main-2"}}}};
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(spec, shrinking, t0 + 100'000), 4 * 100);
  // A gang with a pod its node never reported started did no work as a gang: nothing lost;
  // once all have started, its run counts.
  json gang = spec;
  gang["gang"] = true;
  json waiting = status;
  waiting["startedPods"] = {{"main-0", at(0)}, {"main-1", at(0)}};
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(gang, waiting, t0 + 100'000), 0);
  waiting["startedPods"]["main-2"] = at(10);
  EXPECT_DOUBLE_EQ(RunGpuSecondsLost(gang, waiting, t0 + 100'000), 6 * 100);
  // The record sums the losses, counts the evictions and keeps the last.
  json next;
  NoteEviction(json::object(), next, "Preempted", "preempted by hot", t0, 600.4);
  json after;
  NoteEviction(next, after, "NodeLost", "its node stopped renewing its lease", t0 + 5000, 99.6);
  EXPECT_EQ(after["evictions"]["count"], 2);
  EXPECT_EQ(after["evictions"]["gpuSecondsLost"], 700);
  EXPECT_EQ(after["evictions"]["last"]["reason"], "NodeLost");
  json huge;
  NoteEviction(after, huge, "Preempted", "again", t0, 1e18);
  EXPECT_EQ(huge["evictions"]["gpuSecondsLost"], kMaxLostGpuSeconds);
}

// A workload restarted after an eviction is not the cheapest victim again by its new run alone:
// the server gives admission what its earlier evictions lost (status.evictions.gpuSecondsLost),
// so an urgent workload evicts the one that has run 100 s rather than the one that has just
// started again after losing 10,000 GPU-seconds.
TEST_F(FactoryTest, AWorkloadEvictedBeforeCountsWhatItLostAsAVictim) {
  StartScheduler(5'000);
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}, {"borrowingLimit", 0}}}}}});
  CreateWorkload(WholeGpuWorkload("team-b", "long", 4));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  Cycle(100'000);
  CreateWorkload(WholeGpuWorkload("team-b", "restarted", 4));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  ClientResponse r =
      Call("PATCH", WorkloadPath("team-b", "restarted") + "/status",
           json{{"status", {{"evictions", {{"count", 1}, {"gpuSecondsLost", 10'000}}}}}}.dump(),
           "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  json hot = WholeGpuWorkload("team-b", "hot", 4);
  hot["spec"]["priority"] = 100;
  CreateWorkload(hot);
  ASSERT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  EXPECT_TRUE(w["team-b/long"]["status"].contains("preemption")) << Describe(w);
  EXPECT_FALSE(w["team-b/restarted"]["status"].contains("preemption")) << Describe(w);
}

// The quota a preemptor keeps while its victims stop is its plan less what they still hold:
// a second preemptor of the queue evicts only what it needs (the server links each victim to
// its preemptor when it rebuilds the Admitter).
TEST_F(FactoryTest, QuotaKeptForAPreemptorIsNotCountedTwice) {
  StartScheduler(30'000);
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 8}, {"borrowingLimit", 0}}}}}});
  for (int i = 0; i < 8; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "v-" + std::to_string(i), 1));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  for (const char* name : {"hot", "hot2"}) {
    json hot = WholeGpuWorkload("team-b", name, 2);
    hot["spec"]["priority"] = 100;
    CreateWorkload(hot);
    EXPECT_EQ(Cycle().preempted, 2) << name << "\n" << Describe(Workloads());
  }
  EXPECT_EQ(Cycle().preempted, 0) << Describe(Workloads());
}

// A queue whose disruption budget an admin sets to 0 while one of its workloads is being
// evicted keeps that workload: stopped, it would only start again, its preemptor unable to
// evict the rest it needs (a user-style review saw it stopped and started again, its work
// lost for nothing).
TEST_F(FactoryTest, ABudgetSetToZeroSparesTheVictimsInTheirGracePeriod) {
  ASSERT_TRUE(UrgentWorkNeedsTwoVictimsUnderABudgetOfOne(30'000));
  ASSERT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  // What the budget leaves for later is said, and still said in the cycles while the first
  // victim stops (the server carries it into "waiting for … to stop").
  const std::string more = "; 1 more to go as the disruption budget of queue team-b allows";
  EXPECT_NE(Workloads()["team-b/hot"]["status"].value("message", "").find(more), std::string::npos)
      << Describe(Workloads());
  Cycle();
  EXPECT_EQ(Workloads()["team-b/hot"]["status"].value("message", ""),
            "waiting for 1 preempted workload(s) (team-b/v-3) to stop" + more)
      << Describe(Workloads());
  ClientResponse r =
      Call("PATCH", std::string(kApi) + "/queues/team-b",
           json{{"spec", {{"disruptionBudget", 0}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<std::string, json> w = VictimsRunOnPastTheGrace();
  const json& waits = w["team-b/hot"]["status"];
  EXPECT_EQ(waits.value("phase", ""), "Pending") << Describe(w);
  // (Past its guarantee, its queue's work no longer borrows: nothing could take it back.)
  EXPECT_NE(waits.value("message", "").find("disruptionBudget of 0 lets none of it be evicted"),
            std::string::npos)
      << Describe(w);
}

// A preemptor that may not start now whatever is freed (here its request no node can take;
// a hold on its tenant's spending likewise) keeps no victims: they run on (a review found them
// evicted for a preemptor held over its budget).
TEST_F(FactoryTest, APreemptorThatMayNotStartKeepsNoVictims) {
  ASSERT_TRUE(UrgentWorkNeedsTwoVictimsUnderABudgetOfOne(30'000));
  ASSERT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  json hot = CallJson("GET", WorkloadPath("team-b", "hot"));
  hot["spec"]["podSets"][0]["devices"]["models"] = "B200";  // (no node has one)
  ClientResponse r = Call("PUT", WorkloadPath("team-b", "hot"), hot.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<std::string, json> w = VictimsRunOnPastTheGrace();
  ExpectCalledOffForHot(w);
  EXPECT_EQ(w["team-b/hot"]["status"].value("reason", ""), "Unschedulable") << Describe(w);
}

// A workload whose mark is lifted in a cycle (here: active again before its grace period ended)
// may be chosen as a victim in that same cycle: the mark is written then, from what the lift
// wrote (a review found such later writes refused, on the revision read, and made a cycle late).
TEST_F(FactoryTest, AWorkloadRunningOnAgainMayBePreemptedInTheSameCycle) {
  StartScheduler(30'000);
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 32}, {"borrowingLimit", 0}}}}}});
  CreateWorkload(WholeGpuWorkload("team-b", "w", 8, 4));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const auto active = [&](bool on) {
    ClientResponse r =
        Call("PATCH", WorkloadPath("team-b", "w"), json{{"spec", {{"active", on}}}}.dump(),
             "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  };
  active(false);
  Cycle();
  ASSERT_TRUE(Workloads()["team-b/w"]["status"].contains("preemption")) << Describe(Workloads());
  active(true);
  json hot = WholeGpuWorkload("team-b", "hot", 8);
  hot["spec"]["priority"] = 100;
  CreateWorkload(hot);
  EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  const json st = Workloads()["team-b/w"]["status"];
  EXPECT_EQ(st["preemption"].value("by", ""), "team-b/hot") << st.dump();
}

// ... nor one its queue may now never hold: its guarantee lowered past what it asks.
TEST_F(FactoryTest, APreemptorItsQueueMayNoLongerHoldKeepsNoVictims) {
  ASSERT_TRUE(UrgentWorkNeedsTwoVictimsUnderABudgetOfOne(30'000));
  ASSERT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  ClientResponse r = Call("PATCH", std::string(kApi) + "/queues/team-b",
                          json{{"spec", {{"quotas", {{"gpu", {{"guaranteed", 4}}}}}}}}.dump(),
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<std::string, json> w = VictimsRunOnPastTheGrace();
  ExpectCalledOffForHot(w);
}

// GET .../queues/NAME/pendingworkloads lists what waits in a queue's subtree in the order
// admission takes it in each leaf (priority, then creation), with places; a tenant member sees
// its own tenant's workloads, placed among all.
TEST_F(FactoryTest, PendingWorkloadsShowTheirPlaceInTheQueue) {
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, SchedulerOptions{}, nullptr);
  CreateQueue("org", json::object());
  for (const char* team : {"team-a", "team-b"})
    CreateQueue(team, {{"parent", "org"},
                       {"quotas", {{"gpu", {{"guaranteed", 16}, {"borrowingLimit", 0}}}}}});
  // 8-GPU workloads (tenant, name, priority), created in this order.
  const auto create = [&](std::vector<std::tuple<std::string, std::string, int>> list) {
    for (const auto& [team, name, priority] : list) {
      json w = WholeGpuWorkload(team, name, 8);
      w["spec"]["priority"] = priority;
      CreateWorkload(w);
    }
  };
  create({{"team-a", "a-0", 0}, {"team-a", "a-1", 0}, {"team-b", "b-0", 0}, {"team-b", "b-1", 0}});
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  create({{"team-a", "a-2", 0}, {"team-a", "a-3", 5}, {"team-b", "b-2", 0}, {"team-a", "a-4", 0}});
  Cycle();
  const json all = CallJson("GET", std::string(kApi) + "/queues/org/pendingworkloads");
  ASSERT_EQ(all.value("total", 0), 4) << all.dump();
  std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> got;
  for (const json& i : all["items"])
    got.emplace_back(i.value("name", ""), i.value("queue", ""), i.value("position", int64_t{-1}),
                     i.value("positionInQueue", int64_t{-1}));
  EXPECT_EQ(got, (std::vector<std::tuple<std::string, std::string, int64_t, int64_t>>{
                     {"a-3", "team-a", 0, 0},
                     {"a-2", "team-a", 1, 1},
                     {"b-2", "team-b", 2, 0},
                     {"a-4", "team-a", 3, 2}}))
      << all.dump();
  // Each says why it waits: a-3 preempts one of its queue's lower-priority workloads.
  EXPECT_NE(all["items"][0].value("message", "").find("preempting 1"), std::string::npos)
      << all.dump();
  EXPECT_NE(all["items"][1].value("message", "").find("borrowing limit"), std::string::npos)
      << all.dump();
  const json b = CallJson("GET", std::string(kApi) + "/queues/team-b/pendingworkloads");
  ASSERT_EQ(b["items"].size(), 1u) << b.dump();
  EXPECT_EQ(b["items"][0].value("name", ""), "b-2");
  const json page =
      CallJson("GET", std::string(kApi) + "/queues/org/pendingworkloads?offset=1&limit=2");
  ASSERT_EQ(page["items"].size(), 2u) << page.dump();
  EXPECT_EQ(page["items"][0].value("name", ""), "a-2");

  ClientOptions alice = client_options_;
  alice.token = "alice-token-e2e-0123456789";
  HttpClient alice_client(alice);
  auto mine = alice_client.Do("GET", std::string(kApi) + "/queues/org/pendingworkloads");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->status, 200) << mine->body;
  const json mine_json = json::parse(mine->body);
  ASSERT_EQ(mine_json["items"].size(), 3u) << mine->body;
  EXPECT_EQ(mine_json["items"][2].value("name", ""), "a-4");
  EXPECT_EQ(mine_json["items"][2].value("position", 0), 3);
  // (The gap in alice's positions is said: one waits there that is not hers to read.)
  EXPECT_EQ(mine_json.value("unreadTotal", -1), 1) << mine->body;
  EXPECT_EQ(all.value("unreadTotal", -1), 0) << all.dump();

  EXPECT_EQ(Call("GET", std::string(kApi) + "/queues/ghost/pendingworkloads").status, 404);
  EXPECT_EQ(Call("POST", std::string(kApi) + "/queues/org/pendingworkloads", "{}").status, 405);
  EXPECT_EQ(Call("GET", std::string(kApi) + "/queues/org/pendingworkloads?limit=x").status, 400);

  // A queue's status counts what waits in it as its pending list does: work that can never
  // start (a GPU model the fleet lacks) too, as Kueue counts inadmissible work; inactive work
  // is not queued.
  json b200 = WholeGpuWorkload("team-b", "b200", 8);
  b200["spec"]["podSets"][0]["devices"]["models"] = "B200";
  b200["spec"]["priority"] = 10;
  CreateWorkload(b200);
  json idle = WholeGpuWorkload("team-b", "idle", 8);
  idle["spec"]["active"] = false;
  CreateWorkload(idle);
  Cycle();
  const json listed = CallJson("GET", std::string(kApi) + "/queues/team-b/pendingworkloads");
  EXPECT_EQ(listed.value("total", 0), 2) << listed.dump();
  // ... listed last, with no place in its queue, though of higher priority than b-2: it never
  // starts as it is (Kueue keeps such work apart as inadmissible).
  ASSERT_EQ(listed["items"].size(), 2u) << listed.dump();
  EXPECT_EQ(listed["items"][0].value("name", ""), "b-2");
  EXPECT_EQ(listed["items"][0].value("inadmissible", true), false);
  EXPECT_EQ(listed["items"][1].value("name", ""), "b200");
  EXPECT_EQ(listed["items"][1].value("inadmissible", false), true);
  EXPECT_EQ(listed["items"][1].value("positionInQueue", 0), -1);
  const json team_b = CallJson("GET", std::string(kApi) + "/queues/team-b");
  EXPECT_EQ(team_b["status"].value("pendingWorkloads", -1), 2) << team_b.dump();
  EXPECT_EQ(
      CallJson("GET", std::string(kApi) + "/queues/org")["status"].value("pendingWorkloads", -1),
      5);
}

// spec.active: false stops a running workload after the grace period and keeps it (and a
// pending one) from starting, without deleting it; true again, it runs.
// A reservation through the server (--reserve-after): an 8-GPU workload waits while 1-GPU work
// fills the fleet and more keeps coming; once it has waited 20 s the scheduler reserves a node
// for it (status reason Reserved, the node in status.nomination), keeps that node across
// cycles (each cycle's Admitter is rebuilt from the store) even when another node is made
// freer, holds what frees there, and starts it where room is first.
TEST_F(FactoryTest, AReservationHoldsANodeUntilTheWorkThatWaitedFits) {
  StartScheduler(5'000, [](SchedulerOptions& so) { so.reserve_after_s = 20; });
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 64}}}}}});
  const auto small = [&](const std::string& name, int seconds) {
    json w = WholeGpuWorkload("team-a", name, 1);
    w["spec"]["run"]["durationSeconds"] = seconds;
    CreateWorkload(w);
  };
  for (int i = 0; i < 32; ++i) small("s-" + std::to_string(i), 40 + (i % 8) * 10);
  ASSERT_TRUE(CycleUntilAll("Running"));
  CreateWorkload(WholeGpuWorkload("team-a", "big", 8));
  std::string reserved_on;
  std::string freer;  // a node made freer than the reserved one
  bool moved = false;
  std::string ran_on;
  for (int t = 0; t < 200 && ran_on.empty(); ++t) {
    small("more-" + std::to_string(t), 60);  // smaller work keeps coming
    Cycle();
    const json status = Workloads()["team-a/big"].value("status", json::object());
    if (status.value("phase", "") == "Running") {
      ran_on = status["assignments"][0].value("node", "");
      break;
    }
    if (status.value("reason", "") != "Reserved") continue;
    EXPECT_EQ(status.value("message", "").rfind("reserving room on ", 0), 0u) << status.dump();
    const json plan = status.value("nomination", json::array());
    ASSERT_FALSE(plan.empty()) << status.dump();
    const std::string node = plan[0].value("node", "");
    if (!reserved_on.empty() && node != reserved_on) moved = true;
    if (reserved_on.empty()) {
      // Another node is made freer than the reserved one: the reservation stays where it is
      // (its plan comes back from status.nomination each cycle and is tried first).
      int deleted = 0;
      for (const auto& [key, w] : Workloads()) {
        const json& st = w["status"];
        if (deleted < 6 && key != "team-a/big" && st.value("phase", "") == "Running" &&
            st["assignments"][0].value("node", "") != node) {
          const std::string other = st["assignments"][0].value("node", "");
          if (deleted > 0 && other != freer) continue;
          freer = other;
          Call("DELETE", WorkloadPath("team-a") + "/" + key.substr(std::string("team-a/").size()));
          ++deleted;
        }
      }
      ASSERT_GT(deleted, 0) << Describe(Workloads());
    }
    reserved_on = node;
  }
  ASSERT_FALSE(reserved_on.empty()) << Describe(Workloads());
  EXPECT_FALSE(moved) << "a reservation stays on the node it chose";
  // It starts where room is first: its reserved node, or the one made freer.
  ASSERT_FALSE(ran_on.empty()) << Describe(Workloads());
  EXPECT_TRUE(ran_on == reserved_on || ran_on == freer) << ran_on << "\n" << Describe(Workloads());
}

// Through the store: work with a time limit starts in a reservation's held room when it ends
// before the reservation could start by the limits of the work on its node (Slurm's backfill),
// while work without a limit never does; the reservation stays.
TEST_F(FactoryTest, WorkWithATimeLimitBackfillsIntoAReservationsRoom) {
  StartScheduler(5'000, [](SchedulerOptions& so) { so.reserve_after_s = 20; });
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 64}}}}}});
  const auto one_gpu = [&](const std::string& name, int seconds, int limit) {
    json w = WholeGpuWorkload("team-a", name, 1);
    w["spec"]["run"]["durationSeconds"] = seconds;
    if (limit > 0) w["spec"]["maxRuntimeSeconds"] = limit;
    CreateWorkload(w);
  };
  for (int i = 0; i < 32; ++i) one_gpu("s-" + std::to_string(i), 30 + (i % 8) * 10, 600);
  ASSERT_TRUE(CycleUntilAll("Running"));
  CreateWorkload(WholeGpuWorkload("team-a", "big", 8));
  std::string reserved_on;
  bool quick_created = false;
  for (int t = 0; t < 120; ++t) {
    one_gpu("open-" + std::to_string(t), 3600, 0);  // work without a limit keeps coming
    Cycle();
    std::map<std::string, json> w = Workloads();
    const json big = w["team-a/big"].value("status", json::object());
    if (quick_created) {
      const json quick = w["team-a/quick"].value("status", json::object());
      if (quick.value("phase", "") != "Running") continue;
      EXPECT_EQ(quick["assignments"][0].value("node", ""), reserved_on) << Describe(w);
      EXPECT_EQ(big.value("reason", ""), "Reserved") << Describe(w);
      // It says when it starts by the limits: 600 s after the last of the s- work still on
      // its node was admitted (quick ends before that).
      int64_t last_admitted = -1;
      for (const auto& [key, obj] : w)
        if (key.rfind("team-a/s-", 0) == 0 && obj["status"].contains("assignments") &&
            obj["status"]["assignments"][0].value("node", "") == reserved_on &&
            (obj["status"].value("phase", "") == "Running" ||
             obj["status"].value("phase", "") == "Scheduled"))
          last_admitted =
              std::max(last_admitted, ParseTimestamp(obj["status"].value("scheduledTime", "")));
      EXPECT_GE(last_admitted, 0) << Describe(w);
      EXPECT_EQ(ParseTimestamp(big.value("expectedStartTime", "")), last_admitted + 600'000)
          << Describe(w);
      for (const auto& [key, obj] : w)
        if (key.rfind("team-a/open-", 0) == 0 && obj["status"].contains("assignments"))
          EXPECT_NE(obj["status"]["assignments"][0].value("node", ""), reserved_on)
              << key << " has no limit: it may run past when big could start";
      return;
    }
    if (big.value("reason", "") != "Reserved") continue;
    reserved_on = big["nomination"][0].value("node", "");
    int running_there = 0;
    for (const auto& [key, obj] : w)
      if (obj["status"].value("phase", "") == "Running" &&
          obj["status"]["assignments"][0].value("node", "") == reserved_on)
        ++running_there;
    if (running_there < 8) {  // room held there: a short workload with a limit arrives
      one_gpu("quick", 20, 120);
      quick_created = true;
    }
  }
  FAIL() << (quick_created ? "quick never started" : "no room was held") << "\n"
         << Describe(Workloads());
}

TEST_F(FactoryTest, InactiveWorkloadsWaitUntilActivated) {
  StartScheduler(5'000);
  CreateTeamQueues(16, 16);
  CreateWorkload(WholeGpuWorkload("team-a", "a-run", 8));
  json parked = WholeGpuWorkload("team-a", "a-parked", 8);
  parked["spec"]["active"] = false;
  CreateWorkload(parked);
  // (Stopped, it is Inactive, not Unschedulable, though no node matches its selector.)
  json nowhere = WholeGpuWorkload("team-a", "a-nowhere", 1);
  nowhere["spec"]["active"] = false;
  nowhere["spec"]["nodeSelector"] = {{"zone", "none"}};
  CreateWorkload(nowhere);
  for (int i = 0; i < 3; ++i) Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/a-run"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/a-parked"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(w["team-a/a-parked"]["status"].value("reason", ""), "Inactive") << Describe(w);
  EXPECT_EQ(w["team-a/a-nowhere"]["status"].value("reason", ""), "Inactive") << Describe(w);
  ASSERT_EQ(Call("DELETE", WorkloadPath("team-a", "a-nowhere")).status, 200);
  EXPECT_TRUE(
      CallJson("GET", std::string(kApi) + "/queues/team-a/pendingworkloads")["items"].empty());
  // A string is not a boolean, even one that reads like one.
  ClientResponse bad =
      Call("PATCH", WorkloadPath("team-a", "a-run"), json{{"spec", {{"active", "false"}}}}.dump(),
           "application/merge-patch+json");
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("spec.active"), std::string::npos) << bad.body;

  auto set_active = [&](const std::string& name, bool active) {
    ClientResponse r =
        Call("PATCH", WorkloadPath("team-a", name), json{{"spec", {{"active", active}}}}.dump(),
             "application/merge-patch+json");
    EXPECT_EQ(r.status, 200) << r.body;
  };
  // Made inactive and active again within its grace period, it runs on (kubectl's drain
  // cancelled before the pod stopped).
  set_active("a-run", false);
  Cycle();
  EXPECT_EQ(Workloads()["team-a/a-run"]["status"]["preemption"].value("reason", ""),
            "deactivated (spec.active is false)");
  set_active("a-run", true);
  Cycle();
  Cycle(5'000);
  w = Workloads();
  EXPECT_EQ(w["team-a/a-run"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_FALSE(w["team-a/a-run"]["status"].contains("preemption")) << Describe(w);
  EXPECT_EQ(w["team-a/a-run"]["status"]
                .value("message", "")
                .rfind("eviction cancelled: active again (spec.active is true); running on ", 0),
            0u)
      << Describe(w);

  set_active("a-run", false);
  Cycle();
  w = Workloads();
  EXPECT_EQ(w["team-a/a-run"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/a-run"]["status"]["preemption"].value("reason", ""),
            "deactivated (spec.active is false)")
      << Describe(w);
  Cycle(5'000);
  w = Workloads();
  // Stopped as its owner asked: no preemption, no eviction counted (a user-style review saw
  // "Preempted … put back in line" and an eviction for it).
  EXPECT_EQ(w["team-a/a-run"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(w["team-a/a-run"]["status"].value("reason", ""), "Deactivated") << Describe(w);
  EXPECT_FALSE(w["team-a/a-run"]["status"].contains("evictions")) << Describe(w);
  Cycle();
  w = Workloads();
  EXPECT_EQ(w["team-a/a-run"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(w["team-a/a-run"]["status"].value("reason", ""), "Inactive") << Describe(w);
  std::vector<std::string> said;
  const json events =
      CallJson("GET", std::string(kApi) +
                          "/namespaces/team-a/events?fieldSelector=involvedObject.name%3Da-run");
  for (const json& e : events.value("items", json::array()))
    said.push_back(e.value("type", "") + " " + e.value("reason", ""));
  const std::vector<std::string> expected = {
      "Normal Created",           "Normal Admitted", "Normal Started",     "Normal Stopping",
      "Normal EvictionCancelled", "Normal Stopping", "Normal Deactivated", "Normal Inactive"};
  EXPECT_EQ(said, expected);

  set_active("a-run", true);
  set_active("a-parked", true);
  EXPECT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());

  // Deactivating a run just before its maximum runtime does not restart its clock: past its
  // limit when the grace period ends, it fails.
  json capped = WholeGpuWorkload("team-b", "b-capped", 8);
  capped["spec"]["maxRuntimeSeconds"] = 60;
  CreateWorkload(capped);
  EXPECT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  Cycle(56'000);
  ClientResponse off =
      Call("PATCH", WorkloadPath("team-b", "b-capped"), json{{"spec", {{"active", false}}}}.dump(),
           "application/merge-patch+json");
  ASSERT_EQ(off.status, 200) << off.body;
  Cycle();
  EXPECT_EQ(Workloads()["team-b/b-capped"]["status"]["preemption"].value("reason", ""),
            "deactivated (spec.active is false)");
  Cycle(5'000);
  w = Workloads();
  EXPECT_EQ(w["team-b/b-capped"]["status"].value("phase", ""), "Failed") << Describe(w);
  EXPECT_EQ(w["team-b/b-capped"]["status"].value("reason", ""), "MaxRuntimeExceeded");
}

// spec.maxRuntimeSeconds: a run longer than that is marked, keeps its GPUs through the grace
// period, then fails for good (reason MaxRuntimeExceeded) and its GPUs go to waiting work.
TEST_F(FactoryTest, MaxRuntimeStopsARunForGood) {
  StartScheduler(5'000);
  json bad = WholeGpuWorkload("team-a", "bad", 8);
  bad["spec"]["minRuntimeSeconds"] = 120;
  bad["spec"]["maxRuntimeSeconds"] = 60;
  ClientResponse refused = Call("POST", WorkloadPath("team-a"), bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.maxRuntimeSeconds"), std::string::npos) << refused.body;

  json capped = WholeGpuWorkload("team-a", "capped", 8, 3);
  capped["spec"]["maxRuntimeSeconds"] = 60;
  CreateWorkload(capped);
  // The fourth whole-GPU node: a run that ends on its own during the grace period succeeds
  // (its agent's report is accepted over the mark).
  json finisher = WholeGpuWorkload("team-a", "finisher", 8);
  finisher["spec"]["maxRuntimeSeconds"] = 60;
  finisher["spec"]["run"]["durationSeconds"] = 63;
  CreateWorkload(finisher);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-b", "next", 8));
  Cycle(30'000);
  EXPECT_EQ(Workloads()["team-a/capped"]["status"].value("phase", ""), "Running");
  Cycle(31'000);
  std::map<std::string, json> w = Workloads();
  const json& status = w["team-a/capped"]["status"];
  EXPECT_EQ(status.value("phase", ""), "Running") << Describe(w);  // through the grace period
  EXPECT_EQ(status["preemption"].value("reason", ""), "ran past its maximum runtime of 60 s")
      << Describe(w);
  EXPECT_NE(w["team-b/next"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(Cycle(5'000).timed_out, 1) << Describe(Workloads());
  w = Workloads();
  EXPECT_EQ(w["team-a/capped"]["status"].value("phase", ""), "Failed") << Describe(w);
  EXPECT_EQ(w["team-a/capped"]["status"].value("reason", ""), "MaxRuntimeExceeded");
  EXPECT_EQ(w["team-a/finisher"]["status"].value("phase", ""), "Succeeded") << Describe(w);
  auto next_phase = [&] { return Workloads()["team-b/next"]["status"].value("phase", ""); };
  for (int i = 0; i < 5 && next_phase() != "Running"; ++i) Cycle();
  EXPECT_EQ(next_phase(), "Running") << Describe(Workloads());
}

// A time limit counts from the admission (scheduledTime), as Slurm's from the allocation and
// Kueue's from the admission, so that work whose pods never start is stopped at it too (the
// admitter lets work into a reservation's room by these limits); while it holds devices it
// may be lowered, not raised or lifted.
TEST_F(FactoryTest, ATimeLimitCountsFromTheAdmissionAndMayOnlyBeLowered) {
  SchedulerOptions so;
  so.node_grace_ms = 3'600'000;  // the stopped agents' nodes stay Ready for the test
  so.preemption_grace_ms = 5'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  for (const Node& n : fleet_.nodes) sim_->StopNode(n.name.str());
  json slow = WholeGpuWorkload("team-a", "slow", 8);
  slow["spec"]["maxRuntimeSeconds"] = 60;
  CreateWorkload(slow);
  Cycle();
  EXPECT_EQ(Workloads()["team-a/slow"]["status"].value("phase", ""), "Scheduled");
  ClientOptions alice = client_options_;  // (a member of team-a, not a platform admin)
  alice.token = "alice-token-e2e-0123456789";
  HttpClient alice_client(alice);
  const auto limit = [&](const json& value) {
    auto r = alice_client.Do("PATCH", WorkloadPath("team-a", "slow"),
                             json{{"spec", {{"maxRuntimeSeconds", value}}}}.dump(),
                             "application/merge-patch+json");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ClientResponse{};
  };
  for (const json& more : {json(120), json(0), json(nullptr)}) {
    ClientResponse r = limit(more);
    EXPECT_EQ(r.status, 403) << more << ": " << r.body;
    EXPECT_NE(r.body.find("spec.maxRuntimeSeconds: only a platform admin may raise or lift the "
                          "time limit of a Scheduled workload (it is 60 s; it may be lowered)"),
              std::string::npos)
        << r.body;
  }
  // (A value no one may give is the validation's to refuse, for a tenant as for an admin.)
  for (const json& bad : {json(-5), json("120")}) {
    ClientResponse r = limit(bad);
    EXPECT_EQ(r.status, 422) << bad << ": " << r.body;
    EXPECT_NE(r.body.find("spec.maxRuntimeSeconds"), std::string::npos) << r.body;
  }
  // (A platform admin may raise it, as a Slurm operator may.)
  ClientResponse raised =
      Call("PATCH", WorkloadPath("team-a", "slow"),
           json{{"spec", {{"maxRuntimeSeconds", 90}}}}.dump(), "application/merge-patch+json");
  EXPECT_EQ(raised.status, 200) << raised.body;
  ClientResponse lowered = limit(30);
  EXPECT_EQ(lowered.status, 200) << lowered.body;
  Cycle(30'000);
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/slow"]["status"].value("phase", ""), "Scheduled") << Describe(w);
  EXPECT_EQ(w["team-a/slow"]["status"]["preemption"].value("reason", ""),
            "ran past its maximum runtime of 30 s")
      << Describe(w);
  Cycle(6'000);
  w = Workloads();
  EXPECT_EQ(w["team-a/slow"]["status"].value("phase", ""), "Failed") << Describe(w);
  EXPECT_EQ(w["team-a/slow"]["status"].value("reason", ""), "MaxRuntimeExceeded");
}

// examples/queues.yaml, as fabctl apply sends it, is accepted whole and the scheduler admits
// through its tree (the README's first step with queues).
TEST_F(FactoryTest, ExampleQueuesApplyAndAdmit) {
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, SchedulerOptions{}, nullptr);
  const std::string text = ReadFile(std::string(FABRICA_SOURCE_DIR) + "/examples/queues.yaml");
  ASSERT_FALSE(text.empty());
  int queues = 0;
  for (const YAML::Node& d : YAML::LoadAll(text)) {
    const json obj = YamlToJson(d);
    const std::string plural = obj.value("kind", "") == "Queue" ? "queues" : "priorityclasses";
    queues += plural == "queues";
    ClientResponse r = Call("POST", std::string(kApi) + "/" + plural, obj.dump());
    EXPECT_EQ(r.status, 201) << obj.dump() << ": " << r.body;
  }
  EXPECT_EQ(queues, 5);
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  Cycle();
  const json b = CallJson("GET", std::string(kApi) + "/queues/team-b");
  EXPECT_EQ(b["status"].value("usedGpus", ""), "8") << b.dump();
  EXPECT_EQ(b["status"].value("active", false), true) << b.dump();
}

// A queue's spec.tenants says who else may wait in it or below it: a tenant naming a queue it
// may not use is refused when it writes the workload, and the scheduler keeps out one whose
// permission went away while it waited.
TEST_F(FactoryTest, QueuesNameTheTenantsThatMayUseThem) {
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, SchedulerOptions{}, nullptr);
  CreateQueue("org", {{"tenants", {"team-c"}}});
  CreateQueue("team-a", {{"parent", "org"}});
  CreateQueue("pool", {{"parent", "org"}, {"tenants", {"team-a", "team-b"}}});
  json bad = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Queue"},
              {"metadata", {{"name", "odd"}}},
              {"spec", {{"tenants", {"Not A Name"}}}}};
  ClientResponse refused = Call("POST", std::string(kApi) + "/queues", bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.tenants"), std::string::npos) << refused.body;

  auto submit = [&](const std::string& tenant, const std::string& name, const std::string& queue) {
    json w = WholeGpuWorkload(tenant, name, 1);
    w["spec"]["queue"] = queue;
    return Call("POST", WorkloadPath(tenant), w.dump());
  };
  EXPECT_EQ(submit("team-a", "a-pool", "pool").status, 201);  // listed
  EXPECT_EQ(submit("team-c", "c-a", "team-a").status, 201);   // listed above it, on org
  ClientResponse denied = submit("team-b", "b-a", "team-a");
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_NE(denied.body.find("spec.queue: tenant team-b may not use queue team-a"),
            std::string::npos)
      << denied.body;
  EXPECT_EQ(submit("team-b", "b-pool", "pool").status, 201);

  // team-b is taken off pool before its workload starts: it waits, using no quota.
  const std::string path = std::string(kApi) + "/queues/pool";
  json pool = CallJson("GET", path);
  pool["spec"]["tenants"] = {"team-a"};
  pool["spec"]["quotas"] = {{"gpu", {{"guaranteed", 8}}}};
  ASSERT_EQ(Call("PUT", path, pool.dump()).status, 200);
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-b/b-pool"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(w["team-b/b-pool"]["status"].value("reason", ""), "QueueNotAllowed") << Describe(w);
  EXPECT_EQ(w["team-a/a-pool"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-c/c-a"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/a-pool"]["status"]["resourceUsage"].value("queue", ""), "pool");
  EXPECT_EQ(CallJson("GET", path)["status"].value("usedGpus", ""), "1");
  // It is counted, and listed last with no place, as inadmissible work is (a trial saw it vanish
  // from every pending view while it waited).
  EXPECT_EQ(CallJson("GET", path)["status"].value("pendingWorkloads", -1), 1);
  const json listed = CallJson("GET", path + "/pendingworkloads");
  ASSERT_EQ(listed["items"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["items"][0].value("name", ""), "b-pool") << listed.dump();
  EXPECT_EQ(listed["items"][0].value("positionInQueue", 0), -1) << listed.dump();
  EXPECT_EQ(listed["items"][0].value("inadmissible", false), true) << listed.dump();

  // Renaming the queue is checked as creating it is; a running workload keeps its queue.
  const auto patch = [&](const std::string& tenant, const std::string& name, const json& spec) {
    return Call("PATCH", WorkloadPath(tenant, name), json{{"spec", spec}}.dump(),
                "application/merge-patch+json");
  };
  ClientResponse moved = patch("team-b", "b-pool", {{"queue", "team-a"}});
  EXPECT_EQ(moved.status, 403) << moved.body;
  ClientResponse running = patch("team-a", "a-pool", {{"queue", "team-a"}});
  EXPECT_EQ(running.status, 422) << running.body;
  EXPECT_NE(running.body.find("spec.queue: may not change while the workload is Running"),
            std::string::npos)
      << running.body;
  EXPECT_EQ(patch("team-a", "a-pool", {{"preemptible", false}}).status, 422);
  // What does not change what it was admitted as still may: labels, or the same spec again.
  ClientResponse labelled =
      Call("PATCH", WorkloadPath("team-a", "a-pool"),
           json{{"metadata", {{"labels", {{"run", "7"}}}}}}.dump(), "application/merge-patch+json");
  EXPECT_EQ(labelled.status, 200) << labelled.body;
  json same = CallJson("GET", WorkloadPath("team-a", "a-pool"));
  ClientResponse reapplied = Call("PUT", WorkloadPath("team-a", "a-pool"), same.dump());
  EXPECT_EQ(reapplied.status, 200) << reapplied.body;

  // team-a loses pool too: a-pool keeps running, charged to the built-in queue instead.
  pool = CallJson("GET", path);
  pool["spec"]["tenants"] = json::array();
  ASSERT_EQ(Call("PUT", path, pool.dump()).status, 200);
  Cycle();
  Cycle();
  EXPECT_EQ(Workloads()["team-a/a-pool"]["status"].value("phase", ""), "Running");
  EXPECT_EQ(CallJson("GET", path)["status"].value("usedGpus", ""), "0");
  // (Its status says so: the queue charged is no longer the one it names; and an event.)
  EXPECT_EQ(Workloads()["team-a/a-pool"]["status"]["resourceUsage"].value("gpu", ""), "1000m");
  EXPECT_EQ(Workloads()["team-a/a-pool"]["status"]["resourceUsage"].value("queue", ""), "unqueued");
  std::string said;
  for (int i = 0; i < 100 && said.find("QueueChanged") == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    said =
        CallJson("GET", std::string(kApi) +
                            "/namespaces/team-a/events?fieldSelector=involvedObject.name%3Da-pool")
            .dump();
  }
  EXPECT_NE(said.find("now charged to queue unqueued (was pool): its tenant may no longer use "
                      "queue pool, or it is gone"),
            std::string::npos)
      << said;

  // A queue below team-b's own is team-b's too; with it, team-b's queue is no leaf, and work
  // that names no queue waits in `unqueued`, which its message says (a user-style review found
  // the move silent and the child refused).
  CreateQueue("team-b", {{"parent", "org"}});
  CreateQueue("team-b-sub", {{"parent", "team-b"}});
  EXPECT_EQ(submit("team-b", "b-sub", "team-b-sub").status, 201);
  EXPECT_EQ(submit("team-a", "a-sub", "team-b-sub").status, 403);
  // Naming the inner queue itself is refused when written (as Kueue's LocalQueue must name a
  // ClusterQueue that admits work), not left to wait nowhere.
  ClientResponse inner = submit("team-b", "b-inner", "team-b");
  EXPECT_EQ(inner.status, 422) << inner.body;
  EXPECT_NE(inner.body.find("spec.queue: queue team-b has child queues (team-b-sub)"),
            std::string::npos)
      << inner.body;
  // Said so to another tenant too, before whether it may use the queue (no one waits there).
  inner = submit("team-a", "a-inner", "team-b");
  EXPECT_EQ(inner.status, 422) << inner.body;
  json plain = WholeGpuWorkload("team-b", "b-plain", 8, 100);  // (more than fits: it waits)
  ASSERT_EQ(Call("POST", WorkloadPath("team-b"), plain.dump()).status, 201);
  Cycle();
  Cycle();
  w = Workloads();
  EXPECT_EQ(w["team-b/b-sub"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-b/b-plain"]["status"]
                .value("message", "")
                .rfind("waits in queue unqueued: queue team-b has child queues (name one in "
                       "spec.queue); ",
                       0),
            0u)
      << Describe(w);
}

// Reclaim through the server picks the victim that loses the least work, counting from the
// run's start (status.startTime) and from its last checkpoint (spec.checkpointIntervalSeconds):
// team-b's oldest run checkpoints every 60 s and has just saved its state, so it is evicted
// rather than one of the three that started ~100 s later and never checkpoint (without the
// checkpoint it would be the most expensive: the oldest).
TEST_F(FactoryTest, ReclaimEvictsTheRunThatJustCheckpointed) {
  StartScheduler(5'000);
  CreateTeamQueues(16, 16);
  json saver = WholeGpuWorkload("team-b", "b-saves", 8);
  saver["spec"]["checkpointIntervalSeconds"] = 60;
  CreateWorkload(saver);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  Cycle(100'000);
  for (int i = 1; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  // Just past b-saves's second checkpoint: 1-2 s lost against ~20 s for each of the others.
  const int64_t started =
      ParseTimestamp(Workloads()["team-b/b-saves"]["status"].value("startTime", ""));
  ASSERT_GE(started, 0);
  clock_.AdvanceMs(started + 120'500 - clock_.NowMs() - 1'000);
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  CycleStats stats = Cycle();
  ASSERT_EQ(stats.preempted, 1) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  EXPECT_TRUE(w["team-b/b-saves"]["status"].contains("preemption")) << Describe(w);
  EXPECT_NE(w["team-a/a-0"]["status"].value("message", "").find("GPU-seconds lost"),
            std::string::npos)
      << Describe(w);
}

// A store that, when armed, rewrites one key (same value, new revision) just before the next
// batch of writes, as someone editing that object while a scheduler cycle runs would: the
// cycle's conditional write of it then fails.
class EditingStore : public Store {
 public:
  explicit EditingStore(Store& inner) : inner_(inner) {}
  void EditBeforeNextWrites(std::string key) { key_ = std::move(key); }

  Result<KeyValue> Get(const std::string& key) override { return inner_.Get(key); }
  Result<int64_t> Put(const std::string& key, const std::string& value,
                      int64_t expected_revision) override {
    return inner_.Put(key, value, expected_revision);
  }
  std::vector<Result<int64_t>> PutAll(const std::vector<Write>& writes) override {
    if (!key_.empty()) {
      auto kv = inner_.Get(key_);
      EXPECT_TRUE(kv.ok() && inner_.Put(key_, kv->value, kv->mod_revision).ok()) << key_;
      key_.clear();
    }
    return inner_.PutAll(writes);
  }
  Result<int64_t> Delete(const std::string& key, int64_t expected_revision) override {
    return inner_.Delete(key, expected_revision);
  }
  Result<ListResult> List(const std::string& prefix, const std::string& start_after,
                          int limit) override {
    return inner_.List(prefix, start_after, limit);
  }
  Result<std::vector<WatchEvent>> EventsSince(const std::string& prefix, int64_t after_revision,
                                              int limit) override {
    return inner_.EventsSince(prefix, after_revision, limit);
  }
  int64_t Revision() override { return inner_.Revision(); }
  std::unique_ptr<Subscription> Subscribe(
      std::function<void(const std::vector<WatchEvent>&)> fn) override {
    return inner_.Subscribe(std::move(fn));
  }

 private:
  Store& inner_;
  std::string key_;
};

// The reclaim hold outlives a failed write of the reclaiming queue's status: team-a reclaims an
// 8-GPU workload for 4 GPUs while someone edits its queue, so the status write that records the
// reclaim fails; the scheduler still keeps the other 4 GPUs from team-b for the hold, and writes
// the record in its next cycle.
TEST_F(FactoryTest, ReclaimHoldSurvivesAFailedQueueStatusWrite) {
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  so.reclaim_hold_s = 600;
  EditingStore editing(*store_);
  scheduler_ = std::make_unique<Scheduler>(editing, clock_, so, nullptr);
  CreateTeamQueues(16, 16);
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());

  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 4));
  editing.EditBeforeNextWrites("/registry/queues/team-a");
  CycleStats stats = Cycle();
  ASSERT_EQ(stats.preempted, 1) << Describe(Workloads());
  json qa = CallJson("GET", std::string(kApi) + "/queues/team-a");
  ASSERT_TRUE(qa["status"].value("lastReclaimTime", "").empty())
      << "the edit did not make the status write fail: " << qa.dump();

  Cycle();
  qa = CallJson("GET", std::string(kApi) + "/queues/team-a");
  EXPECT_FALSE(qa["status"].value("lastReclaimTime", "").empty()) << qa.dump();
  EXPECT_EQ(qa["status"].value("reclaimedRoomMilli", json::object()).value("gpu", 0), 4000)
      << qa.dump();

  // After the grace period team-a runs; the 4 GPUs its reclaim freed beyond its need stay
  // unlent, so team-b (above its guarantee) does not get them back.
  Cycle(5'000);
  Cycle();
  CreateWorkload(WholeGpuWorkload("team-b", "b-small", 4));
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/a-0"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-b/b-small"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_NE(w["team-b/b-small"]["status"].value("message", "").find("no unused gpu to lend"),
            std::string::npos)
      << Describe(w);
}

// Fair share's usage history builds up across cycles although each cycle rebuilds its Admitter,
// is kept in the queues' status, and a restarted scheduler takes it up from there.
TEST_F(FactoryTest, QueueUsageHistoryOutlivesCyclesAndRestarts) {
  SchedulerOptions so;
  so.usage_half_life_s = 60;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateTeamQueues(16, 16);
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  CreateWorkload(WholeGpuWorkload("team-a", "a-1", 8));
  auto history = [&](const std::string& q) {
    json obj = CallJson("GET", std::string(kApi) + "/queues/" + q);
    return obj["status"].value("usageHistory", -1.0);
  };
  for (int i = 0; i < 6; ++i) Cycle(60'000);  // six half-lives
  const double a = history("team-a");
  // team-a holds 16 of the 34 GPUs: its history approaches that share; team-b's stays 0.
  EXPECT_GT(a, 0.4);
  EXPECT_LT(a, 0.48);
  EXPECT_EQ(history("team-b"), 0.0);
  // Its weighted share (what fair share orders by) is in its status too: near its use of the
  // fleet, team-b's none.
  const auto share = [&](const std::string& q) {
    return CallJson("GET", std::string(kApi) + "/queues/" + q)["status"].value("weightedShare",
                                                                               -1.0);
  };
  EXPECT_GT(share("team-a"), 0.4);
  EXPECT_LT(share("team-a"), 0.48);
  EXPECT_EQ(share("team-b"), 0.0);
  // A cycle that moves them by less than a visible step writes nothing (a watch would hear it).
  const auto version = [&] {
    return CallJson("GET", std::string(kApi) + "/queues/team-a")["metadata"].value(
        "resourceVersion", "");
  };
  const std::string before = version();
  Cycle(10'000);
  EXPECT_EQ(version(), before);

  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);  // a restart
  Cycle(60'000);
  EXPECT_GT(history("team-a"), 0.4) << "the restarted scheduler began from nothing";
}

// ResourceFlavors through the API: a queue's quota on a stored flavour (here every whole GPU)
// limits only what that flavour is charged for; MIG slices fall to the built-in catch-all,
// which no quota names and so does not limit. The queue's status shows each flavour, the
// flavour's the GPUs charged to it, and a flavour in use cannot be deleted.
TEST_F(FactoryTest, ResourceFlavorsQuotaOnlyWhatTheyTake) {
  Metrics metrics;
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, &metrics);
  json flavor = {{"apiVersion", "fabrica.dev/v1"},
                 {"kind", "ResourceFlavor"},
                 {"metadata", {{"name", "whole"}}},
                 {"spec", {{"kind", "whole"}, {"models", {"H100"}}}}};
  ASSERT_EQ(Call("POST", std::string(kApi) + "/resourceflavors", flavor.dump()).status, 201);
  CreateQueue("team-a", {{"quotas", {{"whole", {{"guaranteed", 8}, {"borrowingLimit", 0}}}}}});
  CreateWorkload(WholeGpuWorkload("team-a", "first", 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "second", 8));
  json slices = WholeGpuWorkload("team-a", "slices", 1, 2);
  slices["spec"]["podSets"][0]["devices"] = {{"mig", "1g.10gb"}};
  CreateWorkload(slices);
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/slices"]["status"].value("phase", ""), "Running") << Describe(w);
  const json& second = w["team-a/second"]["status"];
  EXPECT_EQ(second.value("phase", ""), "Pending") << Describe(w);
  EXPECT_NE(second.value("message", "").find("over its borrowing limit for whole"),
            std::string::npos)
      << Describe(w);

  const json queue = CallJson("GET", std::string(kApi) + "/queues/team-a");
  EXPECT_EQ(queue["status"]["flavors"]["whole"], (json{{"guaranteedGpus", "8"}, {"usedGpus", "8"}}))
      << queue.dump();
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/resourceflavors/whole")["status"],
            (json{{"gpus", 32}}));
  const std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("fabrica_queue_flavor_used_gpus{queue=\"team-a\",flavor=\"whole\"} 8"),
            std::string::npos)
      << rendered;
  EXPECT_NE(
      rendered.find("fabrica_queue_flavor_guaranteed_gpus{queue=\"team-a\",flavor=\"whole\"} 8"),
      std::string::npos)
      << rendered;
  ClientResponse del = Call("DELETE", std::string(kApi) + "/resourceflavors/whole");
  EXPECT_EQ(del.status, 409) << del.body;
  EXPECT_NE(del.body.find("team-a"), std::string::npos) << del.body;

  // A larger guarantee lets the second one run.
  json q = CallJson("GET", std::string(kApi) + "/queues/team-a");
  q["spec"]["quotas"]["whole"]["guaranteed"] = 16;
  ASSERT_EQ(Call("PUT", std::string(kApi) + "/queues/team-a", q.dump()).status, 200);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
}

// Partial admission through the API: an elastic gang of four 8-GPU pods (minCount 1) whose
// queue may hold 16 GPUs starts with 2 pods; its status says how many (admittedCounts), its
// assignments name 2 pods, and later cycles restore it with that many (it stays Running). A
// minCount outside 1..count is refused naming the field.
TEST_F(FactoryTest, ElasticGangStartsWithThePodsItsQuotaAllows) {
  StartScheduler(5'000);
  json bad = WholeGpuWorkload("team-a", "bad", 8, 4);
  bad["spec"]["podSets"][0]["minCount"] = 5;
  ClientResponse refused = Call("POST", WorkloadPath("team-a"), bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.podSets[0].minCount"), std::string::npos) << refused.body;

  CreateElasticGang();
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  for (int i = 0; i < 3; ++i) Cycle();
  const json status = Workloads()["team-a/elastic"]["status"];
  EXPECT_EQ(status.value("phase", ""), "Running") << status.dump();
  EXPECT_EQ(status["admittedCounts"], json::array({2})) << status.dump();
  ASSERT_EQ(status["assignments"].size(), 2u) << status.dump();
  EXPECT_EQ(status["assignments"][1].value("pod", ""), "main-1");
  const json queue = CallJson("GET", std::string(kApi) + "/queues/team-a");
  EXPECT_EQ(queue["status"].value("usedGpus", json()), "16") << queue.dump();
}

// Partial admission reclaims through the server: team-b borrows all of team-a's 16 GPUs;
// team-a's elastic gang asks for 32 (past its guarantee) and may start with one pod. It takes
// back its 16 for two pods, keeps that cut (status.nominatedCounts) while the victims stop, as
// the scheduler rebuilds its Admitter every cycle, and starts with those two.
TEST_F(FactoryTest, PartialAdmissionReclaimsTheGuaranteeForTheCut) {
  StartScheduler(5'000);
  CreateTeamQueues(16, 16);
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(ElasticGang());
  EXPECT_EQ(Cycle().preempted, 2) << Describe(Workloads());
  for (int i = 0; i < 2; ++i) {  // (the second within the grace period: the cut is kept)
    const json st = Workloads()["team-a/elastic"]["status"];
    EXPECT_EQ(st.value("reason", ""), "Preempting") << st.dump();
    EXPECT_EQ(st["nominatedCounts"], json::array({2})) << st.dump();
    EXPECT_EQ(st["nomination"].size(), 2u) << st.dump();
    EXPECT_NE(st.value("message", "").find("for 2 of its 4 pods (partial admission"),
              std::string::npos)
        << st.dump();
    if (i == 0) EXPECT_EQ(Cycle().preempted, 0);
  }
  Cycle(6'000);
  json st = json::object();
  for (int i = 0; i < 5 && st.value("phase", "") != "Running"; ++i) {
    Cycle();
    st = Workloads()["team-a/elastic"]["status"];
  }
  ASSERT_EQ(st.value("phase", ""), "Running") << Describe(Workloads());
  EXPECT_EQ(st["admittedCounts"], json::array({2})) << st.dump();
  EXPECT_EQ(st["assignments"].size(), 2u) << st.dump();
  EXPECT_FALSE(st.contains("nominatedCounts")) << st.dump();
  EXPECT_EQ(CountRunning(), 3) << Describe(Workloads());  // two of team-b's still run
}

// A preemptor admitted where it was nominated keeps each pod on the node planned for it: the
// places of a set move between its names (a trial saw main-0 planned on n1 start on n2, and
// main-1 planned on n2 start on n1); pods that completed, and the other sets, keep theirs.
TEST(KeepNominatedNodesTest, PodsKeepTheirPlannedNodes) {
  const auto pod = [](const std::string& name, const std::string& node, int gpu) {
    return json{{"pod", name}, {"node", node}, {"devices", {{{"index", gpu}, {"gpuMilli", 1000}}}}};
  };
  const json placed = {pod("main-0", "n2", 3), pod("main-1", "n1", 0), pod("main-2", "", 0),
                       pod("main-3", "n3", 1), pod("launcher-0", "n9", 0)};
  const json planned = {pod("main-0", "n1", 5), pod("main-1", "n2", 6), pod("main-3", "n4", 0),
                        pod("launcher-0", "n8", 0)};
  const json kept = KeepNominatedNodes(placed, planned);
  ASSERT_EQ(kept.size(), placed.size());
  std::vector<std::string> got;
  for (const json& a : kept)
    got.push_back(a.value("pod", "") + "@" + a.value("node", "") + "/" +
                  std::to_string(a["devices"][0].value("index", -1)));
  EXPECT_EQ(got, (std::vector<std::string>{"main-0@n1/0", "main-1@n2/3", "main-2@/0", "main-3@n3/1",
                                           "launcher-0@n9/0"}));
  EXPECT_EQ(KeepNominatedNodes(placed, json::array()), placed);
}

// A launcher without GPUs beside GPU workers: its isolation is the workers' (a trial saw
// "no GPU" for a workload holding 20 GPUs, from its first pod set).
TEST_F(FactoryTest, AWorkloadsIsolationIsItsGpuPods) {
  json w = WholeGpuWorkload("team-a", "mpi", 8, 2);
  w["spec"]["podSets"].insert(
      w["spec"]["podSets"].begin(),
      json{{"name", "launcher"}, {"count", 1}, {"cpu", "1"}, {"memory", "1Gi"}});
  CreateWorkload(w);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-a/mpi"]["status"].value("isolation", ""), "whole GPUs");
}

// Who may share a fractional share's GPU is said by its tenant's trust (a trial read "within one
// trust domain" on an untrusted tenant's share, whose GPU is closed to every other tenant).
TEST_F(FactoryTest, AShareIsolationSaysWhoMayShareItsGpu) {
  auto share = [](const std::string& ns, const std::string& name) {
    return json{{"apiVersion", "fabrica.dev/v1"},
                {"kind", "Workload"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec",
                 {{"podSets",
                   {{{"name", "server"},
                     {"count", 1},
                     {"cpu", "2"},
                     {"memory", "8Gi"},
                     {"devices", {{"gpuMilli", "250m"}}}}}},
                  {"run", {{"command", {"serve"}}, {"durationSeconds", 600}}}}}};
  };
  CreateWorkload(share("partner-x", "p-share"));
  CreateWorkload(share("team-a", "a-share"));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["partner-x/p-share"]["status"].value("isolation", ""),
            "fractional share, its GPU closed to other tenants (untrusted)");
  EXPECT_EQ(w["team-a/a-share"]["status"].value("isolation", ""),
            "fractional share within trust domain " + trust_domain_["team-a"]);
}

// A preemptor for all its pods is no partial admission, however many cycles its victims take
// (a review: the scheduler wrote every waiting preemptor's full counts as nominatedCounts).
TEST_F(FactoryTest, APreemptorForAllItsPodsHasNoNominatedCounts) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());
  for (int i = 0; i < 3; ++i) {
    Cycle();
    const json st = Workloads()["team-b/b-0"]["status"];
    ASSERT_EQ(st.value("reason", ""), "Preempting") << st.dump();
    EXPECT_FALSE(st.contains("nominatedCounts")) << st.dump();
    EXPECT_EQ(st.value("message", "").find("partial admission"), std::string::npos) << st.dump();
  }
}

// Elastic growth through the server: the elastic gang runs with 2 of its 4 pods while team-a
// may hold 16 GPUs; raised to 32, the next cycle adds the other two (the two running keep
// their names and nodes), and metering bills 16 GPUs until then and 32 after.
TEST_F(FactoryTest, ElasticGangGrowsWhenItsQuotaRises) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  Metrics metrics;
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, &metrics);
  CreateElasticGang();
  auto step = [&](int64_t ms) { CycleAndSync(**meter, ms); };
  for (int i = 0; i < 3; ++i) step(1'000);
  json before = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(before.value("phase", ""), "Running") << before.dump();
  ASSERT_EQ(before["admittedCounts"], json::array({2})) << before.dump();
  const int64_t bound = ParseTimestamp(before.value("scheduledTime", ""));
  for (int i = 0; i < 10; ++i) step(60'000);  // ten minutes at 16 GPUs
  EXPECT_EQ(Workloads()["team-a/elastic"]["status"]["admittedCounts"], json::array({2}));

  SetGpuGuarantee("team-a", 32);
  step(1'000);
  const json after = Workloads()["team-a/elastic"]["status"];
  EXPECT_EQ(after.value("phase", ""), "Running") << after.dump();
  EXPECT_FALSE(after.contains("admittedCounts")) << after.dump();  // all its pods run
  ASSERT_EQ(after["assignments"].size(), 4u) << after.dump();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(after["assignments"][i]["pod"], before["assignments"][i]["pod"]);
    EXPECT_EQ(after["assignments"][i]["node"], before["assignments"][i]["node"]);
  }
  EXPECT_EQ(after["assignments"][3].value("pod", ""), "main-3");
  EXPECT_EQ(after.value("scheduledTime", ""), before.value("scheduledTime", ""));
  EXPECT_NE(after.value("message", "").find("all 4 pods admitted"), std::string::npos)
      << after.dump();
  // Its Scheduled condition says so too (a trial read "admitted 2 of 4 pods" there), True
  // since it was first admitted.
  for (const json& c : after["conditions"])
    if (c.value("type", "") == "Scheduled") {
      EXPECT_EQ(c.value("message", ""), after.value("message", "")) << after.dump();
      EXPECT_EQ(c.value("lastTransitionTime", ""),
                before["conditions"][0].value("lastTransitionTime", ""));
    }
  const int64_t resized = ParseTimestamp(after.value("resizedTime", ""));
  ASSERT_GT(resized, bound) << after.dump();
  EXPECT_NE(metrics.Render().find("fabrica_scheduler_elastic_growths 1"), std::string::npos)
      << metrics.Render();
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("usedGpus", ""),
            "32");
  for (int i = 0; i < 10; ++i) step(60'000);
  ExpectGpuHoursAcrossResize("team-a", bound, resized, 16, 32);
  // Cycles later the per-cycle gauge is 0 again; the counter keeps the growth for rate().
  const std::string later = metrics.Render();
  EXPECT_NE(later.find("fabrica_scheduler_elastic_growths 0"), std::string::npos) << later;
  EXPECT_NE(later.find("# TYPE fabrica_scheduler_elastic_growths_total counter\n"
                       "fabrica_scheduler_elastic_growths_total 1\n"),
            std::string::npos)
      << later;
  EXPECT_NE(later.find("fabrica_scheduler_admissions_total 1\n"), std::string::npos) << later;
  // Its events: Resized with the growth's message, then Started once its new pods are up,
  // saying that (a trial saw Started repeat the growth's message).
  std::string said;
  for (int i = 0; i < 100; ++i) {
    said.clear();
    const json events = CallJson("GET", std::string(kApi) +
                                            "/namespaces/team-a/events?fieldSelector="
                                            "involvedObject.name%3Delastic");
    for (const json& e : events.value("items", json::array()))
      said += e.value("reason", "") + ": " + e.value("message", "") + "\n";
    if (said.find("Resized: all 4 pods admitted") != std::string::npos &&
        said.find("Started: all 4 pods started") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // (Its added pods up one by one, the Starting event between says how many.)
  EXPECT_TRUE(said.find("Resized: all 4 pods admitted (2 added as room freed)\nStarted: all 4 "
                        "pods started\n") != std::string::npos ||
              said.find("Resized: all 4 pods admitted (2 added as room freed)\nStarting: 3 of 4 "
                        "pods started; the rest wait for their nodes\nStarted: all 4 pods "
                        "started\n") != std::string::npos)
      << said;
  // ... and its message, once they are, says where it runs, not how it grew.
  std::string message;
  for (int i = 0; i < 50 && message.rfind("running on ", 0) != 0; ++i) {
    step(1'000);
    message = Workloads()["team-a/elastic"]["status"].value("message", "");
  }
  EXPECT_EQ(message.rfind("running on ", 0), 0u) << message;
}

// A partial admission grown, but not to all its pods, says so until its new pod starts, then
// keeps its size beside where it runs.
TEST_F(FactoryTest, APartlyGrownWorkloadSaysItsSizeOnceItsNewPodsRun) {
  CreateElasticGang();  // 2 of 4 pods within 16 GPUs
  for (int i = 0; i < 3; ++i) Cycle(1'000);
  ASSERT_EQ(Workloads()["team-a/elastic"]["status"]["admittedCounts"], json::array({2}));
  SetGpuGuarantee("team-a", 24);
  Cycle(1'000);
  json st = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(st["admittedCounts"], json::array({3})) << st.dump();
  EXPECT_EQ(st.value("message", ""),
            "admitted 3 of 4 pods (1 added as room freed; partial "
            "admission)");
  for (int i = 0; i < 50; ++i) {
    Cycle(1'000);
    st = Workloads()["team-a/elastic"]["status"];
    if (st.value("message", "").find("running on") != std::string::npos) break;
  }
  EXPECT_EQ(
      st.value("message", "").rfind("admitted 3 of 4 pods (partial admission); running on ", 0), 0u)
      << st.dump();
  // Why it grows no more is said (describe's Growth line), and goes once it runs whole.
  EXPECT_EQ(st.value("growthBlocked", "").rfind("its queue's GPU quota holds no more", 0), 0u)
      << st.dump();
  SetGpuGuarantee("team-a", 32);
  for (int i = 0; i < 20 && st.contains("admittedCounts"); ++i) {
    Cycle(1'000);
    st = Workloads()["team-a/elastic"]["status"];
  }
  EXPECT_FALSE(st.contains("admittedCounts")) << st.dump();
  EXPECT_FALSE(st.contains("growthBlocked")) << st.dump();
}

// An elastic workload whose tenant its queue drops runs on in unqueued, and grows there as room
// frees, as any work there takes what is idle (a trial saw one shrunk to 4 of 8 pods stay so
// beside an idle node until its tenant was let back).
TEST_F(FactoryTest, AnElasticWorkloadMovedToUnqueuedGrowsThere) {
  CreateQueue("pool", {{"tenants", {"team-a"}}, {"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  json elastic = ElasticGang();
  elastic["spec"]["queue"] = "pool";
  CreateWorkload(elastic);
  for (int i = 0; i < 3; ++i) Cycle(1'000);
  json st = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Running") << st.dump();
  ASSERT_EQ(st["admittedCounts"], json::array({2})) << st.dump();
  ClientResponse r =
      Call("PATCH", std::string(kApi) + "/queues/pool",
           json{{"spec", {{"tenants", json::array()}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 4; ++i) Cycle(1'000);
  st = Workloads()["team-a/elastic"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Running") << st.dump();
  EXPECT_FALSE(st.contains("admittedCounts")) << st.dump();  // all four pods
  EXPECT_EQ(st["resourceUsage"].value("gpu", ""), "32000m") << st.dump();
  EXPECT_EQ(st["resourceUsage"].value("queue", ""), "unqueued") << st.dump();
}

// A running workload whose tenant is dropped from its queue is charged to unqueued from then
// (status.resourceUsage.since), and billed so: the meter gives the queue it named the time
// before, unqueued the time after, and nothing twice (the open binding kept the queue it was
// bound with for the rest of its run before).
TEST_F(FactoryTest, AQueueChangeMidRunBillsEachQueueItsPart) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  CreateQueue("pool", {{"tenants", {"team-a"}}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  json w = WholeGpuWorkload("team-a", "job", 2);
  w["spec"]["queue"] = "pool";
  CreateWorkload(w);
  const int64_t t0 = clock_.NowMs() / 1000 * 1000;
  auto step = [&](int64_t ms) { CycleAndSync(**meter, ms); };
  for (int i = 0; i < 10; ++i) step(60'000);
  json st = Workloads()["team-a/job"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Running") << st.dump();
  EXPECT_FALSE(st["resourceUsage"].contains("since")) << st.dump();
  const int64_t bound = ParseTimestamp(st.value("scheduledTime", ""));
  ClientResponse r =
      Call("PATCH", std::string(kApi) + "/queues/pool",
           json{{"spec", {{"tenants", json::array()}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 20; ++i) step(60'000);
  st = Workloads()["team-a/job"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Running") << st.dump();
  EXPECT_EQ(st["resourceUsage"].value("queue", ""), "unqueued") << st.dump();
  const int64_t moved = ParseTimestamp(st["resourceUsage"].value("since", ""));
  ASSERT_GT(moved, bound) << st.dump();
  const int64_t t1 = clock_.NowMs() / 1000 * 1000;
  const json alloc = CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                                         std::to_string(t1 / 1000) + "&aggregate=queue");
  ASSERT_EQ(alloc.value("code", 0), 200) << alloc.dump();
  const json& sets = alloc["data"][0];
  ASSERT_TRUE(sets.contains("pool") && sets.contains("unqueued")) << alloc.dump();
  EXPECT_NEAR(sets["pool"].value("gpuHours", 0.0), 2.0 * (moved - bound) / 3.6e6, 1e-6)
      << alloc.dump();
  EXPECT_NEAR(sets["unqueued"].value("gpuHours", 0.0), 2.0 * (t1 - moved) / 3.6e6, 1e-6)
      << alloc.dump();
  // Let back in: charged to pool again from then, a third binding.
  r = Call("PATCH", std::string(kApi) + "/queues/pool",
           json{{"spec", {{"tenants", {"team-a"}}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 10; ++i) step(60'000);
  st = Workloads()["team-a/job"]["status"];
  EXPECT_EQ(st["resourceUsage"].value("queue", ""), "pool") << st.dump();
  const int64_t back = ParseTimestamp(st["resourceUsage"].value("since", ""));
  ASSERT_GT(back, moved) << st.dump();
  const int64_t t2 = clock_.NowMs() / 1000 * 1000;
  const json again = CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                                         std::to_string(t2 / 1000) + "&aggregate=queue");
  const json& sets2 = again["data"][0];
  EXPECT_NEAR(sets2["pool"].value("gpuHours", 0.0), 2.0 * (moved - bound + t2 - back) / 3.6e6, 1e-6)
      << again.dump();
  EXPECT_NEAR(sets2["unqueued"].value("gpuHours", 0.0), 2.0 * (back - moved) / 3.6e6, 1e-6)
      << again.dump();
}

// Work that runs before any queue exists is charged to its tenant's queue once one is created,
// and billed so from then: the time before to no queue, the time after to the queue (a trial's
// stayed billed to no queue for good).
TEST_F(FactoryTest, WorkRunningWhenItsQueueIsCreatedIsBilledToItFromThen) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  CreateWorkload(WholeGpuWorkload("team-a", "job", 2));
  const int64_t t0 = clock_.NowMs() / 1000 * 1000;
  auto step = [&](int64_t ms) { CycleAndSync(**meter, ms); };
  for (int i = 0; i < 5; ++i) step(60'000);
  json st = Workloads()["team-a/job"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Running") << st.dump();
  const int64_t bound = ParseTimestamp(st.value("scheduledTime", ""));
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  for (int i = 0; i < 5; ++i) step(60'000);
  st = Workloads()["team-a/job"]["status"];
  EXPECT_EQ(st["resourceUsage"].value("queue", ""), "team-a") << st.dump();
  const int64_t moved = ParseTimestamp(st["resourceUsage"].value("since", ""));
  ASSERT_GT(moved, bound) << st.dump();
  const int64_t t1 = clock_.NowMs() / 1000 * 1000;
  const json alloc = CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                                         std::to_string(t1 / 1000) + "&aggregate=queue");
  const json& sets = alloc["data"][0];
  ASSERT_TRUE(sets.contains("team-a")) << alloc.dump();
  EXPECT_NEAR(sets["team-a"].value("gpuHours", 0.0), 2.0 * (t1 - moved) / 3.6e6, 1e-6)
      << alloc.dump();
  ASSERT_TRUE(sets.contains("__unallocated__")) << alloc.dump();
  EXPECT_NEAR(sets["__unallocated__"].value("gpuHours", 0.0), 2.0 * (moved - bound) / 3.6e6, 1e-6)
      << alloc.dump();
}

// Elastic shrink through the server: team-a (no guarantee) runs an elastic gang of four 8-GPU
// pods on the fleet's 32 whole GPUs; team-b, guaranteed them all, asks for 8. The gang's last
// pod is marked (status.shrinks) and stops after the grace period while the other three run on;
// team-b's work then starts. A second reclaim whose preemptor is deleted meanwhile leaves the
// gang its pod. (ElasticShrinkOffEvictsWhole: the same with --no-elastic-shrink.)
// A shrink is called off where a whole victim's eviction would be: its queue's disruption
// budget set to 0 in its grace period keeps the pods taken (a review found the shrink went
// ahead where the whole eviction was called off), and its preemptor is told.
TEST_F(FactoryTest, ABudgetSetToZeroSparesThePodsAShrinkTook) {
  const json before = StartElasticBesideReclaim(true, nullptr);
  ASSERT_FALSE(before.is_null());
  auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  ASSERT_TRUE(gang().contains("shrinks")) << gang().dump();
  EXPECT_EQ(gang()["shrinks"][0].value("basis", ""), "Reclaim") << gang().dump();
  ClientResponse r =
      Call("PATCH", std::string(kApi) + "/queues/team-a",
           json{{"spec", {{"disruptionBudget", 0}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  EXPECT_FALSE(gang().contains("shrinks")) << gang().dump();
  EXPECT_EQ(gang()
                .value("message", "")
                .rfind("eviction cancelled: its queue's disruption budget is now 0; ", 0),
            0u)
      << gang().dump();
  EXPECT_NE(
      Workloads()["team-b/b-0"]["status"]
          .value("message", "")
          .find("its shrink of team-a/elastic is called off: queue team-a's disruptionBudget is "
                "now 0"),
      std::string::npos)
      << Describe(Workloads());
  Cycle(10'000);  // past the grace period
  Cycle();
  EXPECT_EQ(gang()["assignments"].size(), 4u) << gang().dump();
  EXPECT_FALSE(gang().contains("shrinks")) << gang().dump();
}

// ... and where its preemptor in its own queue no longer outranks it.
TEST_F(FactoryTest, AShrinkForWorkThatNoLongerOutranksItIsCalledOff) {
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}, {"borrowingLimit", 0}}}}}});
  CreateWorkload(ElasticGang());
  ASSERT_TRUE(CycleUntilAll("Running"));
  json urgent = WholeGpuWorkload("team-a", "urgent", 8);
  urgent["spec"]["priority"] = 100;
  CreateWorkload(urgent);
  auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  ASSERT_TRUE(gang().contains("shrinks")) << gang().dump();
  EXPECT_EQ(gang()["shrinks"][0].value("basis", ""), "Priority") << gang().dump();
  ClientResponse r =
      Call("PATCH", WorkloadPath("team-a", "elastic"), json{{"spec", {{"priority", 200}}}}.dump(),
           "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  EXPECT_FALSE(gang().contains("shrinks")) << gang().dump();
  EXPECT_EQ(gang()
                .value("message", "")
                .rfind("eviction cancelled: its preemptor team-a/urgent no longer outranks it "
                       "(priority 100 to its 200); ",
                       0),
            0u)
      << gang().dump();
  Cycle(10'000);  // past the grace period
  Cycle();
  EXPECT_EQ(gang()["assignments"].size(), 4u) << gang().dump();
  EXPECT_EQ(Workloads()["team-a/urgent"]["status"].value("phase", ""), "Pending");
}

// ... and where its reclaim's guarantee no longer holds its preemptor (lowered below what it
// asks in the grace period: a re-trial's pods were taken at the deadline for a preemptor that
// could then not start), as the whole victims' evictions are.
TEST_F(FactoryTest, AReclaimsShrinkIsCalledOffOnceItsGuaranteeNoLongerHoldsIt) {
  const json before = StartElasticBesideReclaim(true, nullptr);
  ASSERT_FALSE(before.is_null());
  auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  ASSERT_TRUE(gang().contains("shrinks")) << gang().dump();
  // (The tree still holds 8: b-0 may start, by borrowing, not by taking back.)
  SetGpuGuarantee("team-a", 4);
  SetGpuGuarantee("team-b", 4);
  Cycle();
  EXPECT_FALSE(gang().contains("shrinks")) << gang().dump();
  EXPECT_EQ(gang()
                .value("message", "")
                .rfind("eviction cancelled: queue team-b's guarantee no longer holds its "
                       "preemptor team-b/b-0 (it asks 8 GPUs",
                       0),
            0u)
      << gang().dump();
  EXPECT_EQ(
      Workloads()["team-b/b-0"]["status"]
          .value("message", "")
          .rfind("its preemption is called off: queue team-b's guarantee no longer holds it", 0),
      0u)
      << Describe(Workloads());
  Cycle(10'000);  // past the grace period
  Cycle();
  EXPECT_EQ(gang()["assignments"].size(), 4u) << gang().dump();
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("phase", ""), "Pending");
}

// ... and where its preemptor may not start now (a request no node takes, or one its queue may
// no longer hold), saying so: not "no longer waits", as it still does.
// ... also where a newer shrink of the same workload, for another preemptor, stays: that one
// goes with it, as its pods come before the older one's, and its preemptor plans anew (a
// re-trial's older preemptor, unable to start, had its pods stopped for nothing).
TEST_F(FactoryTest, AnOlderShrinkIsCalledOffBehindANewerOne) {
  ASSERT_FALSE(StartElasticBesideReclaim(true, nullptr).is_null());
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-b", "b-1", 8));
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
  ASSERT_EQ(gang()["shrinks"].size(), 2u) << gang().dump();
  json b0 = CallJson("GET", WorkloadPath("team-b", "b-0"));
  b0["spec"]["podSets"][0]["devices"]["models"] = "B200";  // (no node has one)
  ClientResponse r = Call("PUT", WorkloadPath("team-b", "b-0"), b0.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  for (const json& mark : gang().value("shrinks", json::array()))
    EXPECT_EQ(mark.value("by", ""), "team-b/b-1") << gang().dump();
  for (int i = 0; i < 4; ++i) Cycle(5'000);  // past the grace periods
  EXPECT_EQ(gang()["assignments"].size(), 3u) << gang().dump();
  EXPECT_EQ(Workloads()["team-b/b-1"]["status"].value("phase", ""), "Running")
      << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("phase", ""), "Pending");
}

TEST_F(FactoryTest, AShrinkForAPreemptorNoNodeTakesIsCalledOff) {
  ASSERT_TRUE(UrgentWorkShrinksTheElasticGang());
  json urgent = CallJson("GET", WorkloadPath("team-a", "urgent"));
  urgent["spec"]["podSets"][0]["devices"]["models"] = "B200";  // (no node has one)
  ClientResponse r = Call("PUT", WorkloadPath("team-a", "urgent"), urgent.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ExpectTheGangKeepsItsPods("eviction cancelled: its preemptor team-a/urgent may not start now: ");
}

TEST_F(FactoryTest, AShrinkForAPreemptorItsQueueMayNoLongerHoldIsCalledOff) {
  ASSERT_TRUE(UrgentWorkShrinksTheElasticGang());
  SetGpuGuarantee("team-a", 4);
  ExpectTheGangKeepsItsPods("eviction cancelled: its preemptor team-a/urgent may not start now: ");
}

TEST_F(FactoryTest, ElasticWorkIsShrunkNotEvicted) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  Metrics metrics;
  const json before = StartElasticBesideReclaim(true, &metrics);
  ASSERT_FALSE(before.is_null());
  // Each cycle, then the meter reads the bindings.
  auto step = [&](int64_t ms = 1000) {
    CycleStats stats = Cycle(ms);
    Status st = (*meter)->Sync();
    EXPECT_TRUE(st.ok()) << st.message();
    return stats;
  };
  ASSERT_TRUE((*meter)->Sync().ok());
  auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
  CycleStats stats = step();
  EXPECT_EQ(stats.shrinks, 1) << Describe(Workloads());
  EXPECT_EQ(stats.preempted, 0);
  json marked = gang();
  ASSERT_TRUE(marked.contains("shrinks")) << marked.dump();
  EXPECT_EQ(marked["shrinks"][0]["pods"], json::array({"main-3"})) << marked.dump();
  EXPECT_EQ(marked["shrinks"][0].value("by", ""), "team-b/b-0");
  EXPECT_FALSE(marked.contains("preemption"));
  EXPECT_EQ(marked["assignments"].size(), 4u);  // it keeps the pod through the grace period
  EXPECT_NE(metrics.Render().find("fabrica_scheduler_elastic_shrinks 1"), std::string::npos);
  // Its event says so as the grace period starts, not only once the pod stopped.
  std::string said;
  for (int i = 0; i < 100 && said.find("Shrinking") == std::string::npos; ++i) {
    said.clear();
    const json events = CallJson("GET", std::string(kApi) +
                                            "/namespaces/team-a/events?fieldSelector="
                                            "involvedObject.name%3Delastic");
    for (const json& e : events.value("items", json::array()))
      said +=
          e.value("type", "") + " " + e.value("reason", "") + ": " + e.value("message", "") + "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(said.find("Warning Shrinking: pod(s) main-3 taken"), std::string::npos) << said;
  EXPECT_NE(said.find("the rest run on"), std::string::npos) << said;
  const json waiting = Workloads()["team-b/b-0"]["status"];
  EXPECT_NE(waiting.value("message", "").find("preempting 1 pod(s) of 1 elastic workload(s)"),
            std::string::npos)
      << waiting.dump();
  // While it stops the gang does not grow (nor, with no other preemptor, shrink again), and the
  // preemptor waits for the pod taken, not for a preempted workload.
  step(2'000);
  EXPECT_EQ(gang()["shrinks"][0]["pods"], json::array({"main-3"}));
  EXPECT_EQ(gang().value("growthBlocked", ""), "pods it gave up are still stopping")
      << gang().dump();
  // (Said once, not taken away and said again each other cycle while the pod stops.)
  step(500);
  EXPECT_EQ(gang().value("growthBlocked", ""), "pods it gave up are still stopping");
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("message", ""),
            "waiting for the pods taken from 1 workload(s) (team-a/elastic) to stop")
      << Describe(Workloads());
  // After the grace period: three pods, on their nodes, and b-0 starts where main-3 ran.
  step(4'000);
  step();
  const json after = gang();
  EXPECT_EQ(after.value("phase", ""), "Running") << after.dump();
  EXPECT_FALSE(after.contains("shrinks")) << after.dump();
  ASSERT_EQ(after["assignments"].size(), 3u) << after.dump();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(after["assignments"][i], before["assignments"][i]);
  EXPECT_EQ(after["admittedCounts"], json::array({3}));
  EXPECT_EQ(after["startedPods"].size(), 3u) << after.dump();
  EXPECT_TRUE(after.contains("resizedTime"));
  EXPECT_NE(after.value("message", "").find("shrunk to 3 of 4 pods"), std::string::npos)
      << after.dump();
  const json b0 = Workloads()["team-b/b-0"]["status"];
  ASSERT_EQ(b0["assignments"].size(), 1u) << b0.dump();
  EXPECT_EQ(b0["assignments"][0]["node"], before["assignments"][3]["node"]);
  // Another reclaim, its preemptor deleted before the pod stops: the gang keeps its pod.
  CreateWorkload(WholeGpuWorkload("team-b", "b-1", 8));
  step();
  ASSERT_EQ(gang()["shrinks"][0]["pods"], json::array({"main-2"})) << gang().dump();
  ClientResponse r = Call("DELETE", WorkloadPath("team-b", "b-1"));
  ASSERT_EQ(r.status, 200) << r.body;
  step();
  step(6'000);
  EXPECT_FALSE(gang().contains("shrinks")) << gang().dump();
  EXPECT_EQ(gang()["assignments"].size(), 3u);
  // ... and its events say so, as a whole victim's do (a trial saw "Shrinking" last).
  std::string last_event;
  for (int i = 0; i < 100 && last_event.rfind("EvictionCancelled", 0) != 0; ++i) {
    const json events = CallJson("GET", std::string(kApi) +
                                            "/namespaces/team-a/events?fieldSelector="
                                            "involvedObject.name%3Delastic");
    const json items = events.value("items", json::array());
    if (!items.empty())
      last_event = items.back().value("reason", "") + ": " + items.back().value("message", "");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(last_event.rfind("EvictionCancelled: the preemptor its shrink was for no longer "
                             "waits; running on ",
                             0),
            0u)
      << last_event;
  // Metering bills 32 GPUs until the shrink was done (resizedTime), 24 from then.
  for (int i = 0; i < 5; ++i) step(60'000);
  const int64_t bound = ParseTimestamp(before.value("scheduledTime", ""));
  const int64_t resized = ParseTimestamp(after.value("resizedTime", ""));
  ASSERT_GT(resized, bound);
  ExpectGpuHoursAcrossResize("team-a", bound, resized, 32, 24);
}

// Two reclaims a cycle apart: the second shrinks the gang again while the first's pod still
// stops (two marks, each with its preemptor and deadline) rather than evicting it whole; each
// pod stops at its own deadline and each preemptor starts where its pod ran.
TEST_F(FactoryTest, ASecondReclaimShrinksAgainWhileTheFirstPodStops) {
  const json before = StartElasticBesideReclaim(true, nullptr);
  ASSERT_FALSE(before.is_null());
  auto gang = [&] { return Workloads()["team-a/elastic"]["status"]; };
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-b", "b-1", 8));
  const CycleStats second = Cycle(2'000);
  EXPECT_EQ(second.shrinks, 1) << Describe(Workloads());
  EXPECT_EQ(second.preempted, 0) << Describe(Workloads());
  const json marked = gang();
  EXPECT_FALSE(marked.contains("preemption")) << marked.dump();
  ASSERT_EQ(marked["shrinks"].size(), 2u) << marked.dump();
  EXPECT_EQ(marked["shrinks"][0]["pods"], json::array({"main-3"}));
  EXPECT_EQ(marked["shrinks"][0].value("by", ""), "team-b/b-0");
  EXPECT_EQ(marked["shrinks"][1]["pods"], json::array({"main-2"}));
  EXPECT_EQ(marked["shrinks"][1].value("by", ""), "team-b/b-1");
  // The first pod stops at its deadline; the second mark stays until its own.
  Cycle(3'500);
  const json first = gang();
  ASSERT_EQ(first["assignments"].size(), 3u) << first.dump();
  ASSERT_EQ(first["shrinks"].size(), 1u) << first.dump();
  EXPECT_EQ(first["shrinks"][0]["pods"], json::array({"main-2"}));
  for (int i = 0; i < 3; ++i) Cycle(1'000);
  const json after = gang();
  EXPECT_EQ(after.value("phase", ""), "Running") << after.dump();
  EXPECT_FALSE(after.contains("shrinks")) << after.dump();
  ASSERT_EQ(after["assignments"].size(), 2u) << after.dump();
  EXPECT_EQ(after["admittedCounts"], json::array({2}));
  const json b0 = Workloads()["team-b/b-0"]["status"];
  const json b1 = Workloads()["team-b/b-1"]["status"];
  ASSERT_EQ(b0["assignments"].size(), 1u) << b0.dump();
  ASSERT_EQ(b1["assignments"].size(), 1u) << b1.dump();
  EXPECT_EQ(b0["assignments"][0]["node"], before["assignments"][3]["node"]);
  EXPECT_EQ(b1["assignments"][0]["node"], before["assignments"][2]["node"]);
}

// Two reclaims in one cycle both shrink the gang (two marks in one write), and both pods stop
// together at the deadline.
TEST_F(FactoryTest, TwoReclaimsInOneCycleBothShrink) {
  ASSERT_FALSE(StartElasticBesideReclaim(true, nullptr).is_null());
  CreateWorkload(WholeGpuWorkload("team-b", "b-1", 8));
  const CycleStats stats = Cycle();
  EXPECT_EQ(stats.shrinks, 2) << Describe(Workloads());
  EXPECT_EQ(stats.preempted, 0) << Describe(Workloads());
  const json marked = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(marked["shrinks"].size(), 2u) << marked.dump();
  EXPECT_EQ(marked["shrinks"][0]["pods"], json::array({"main-3"}));
  EXPECT_EQ(marked["shrinks"][1]["pods"], json::array({"main-2"}));
  EXPECT_NE(marked["shrinks"][0].value("by", ""), marked["shrinks"][1].value("by", ""));
  for (int i = 0; i < 3; ++i) Cycle(3'000);
  const json after = Workloads()["team-a/elastic"]["status"];
  EXPECT_FALSE(after.contains("shrinks")) << after.dump();
  EXPECT_EQ(after["admittedCounts"], json::array({2})) << after.dump();
  for (const char* b : {"team-b/b-0", "team-b/b-1"})
    EXPECT_EQ(Workloads()[b]["status"].value("phase", ""), "Running") << b;
  // Its message, and so its Resized event, gives both marks' reasons, not the last one's alone.
  for (const json& mark : marked["shrinks"])
    EXPECT_NE(after.value("message", "").find(mark.value("reason", "?")), std::string::npos)
        << after.dump();
}

TEST_F(FactoryTest, ElasticShrinkOffEvictsWhole) {
  ASSERT_FALSE(StartElasticBesideReclaim(false, nullptr).is_null());
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.preempted, 1) << Describe(Workloads());
  EXPECT_EQ(stats.shrinks, 0);
  const json gang = Workloads()["team-a/elastic"]["status"];
  EXPECT_TRUE(gang.contains("preemption")) << gang.dump();
  EXPECT_FALSE(gang.contains("shrinks")) << gang.dump();
}

// A node lost while the pods a shrink takes stop there, holding only such pods: the shrink is
// done then (the workload runs on with its other pods) rather than the whole workload put back
// in its queue as for a lost node.
TEST_F(FactoryTest, AShrinksPodsOnALostNodeEndTheShrinkNotTheWorkload) {
  const json before = StartElasticBesideReclaim(true, nullptr, 600'000);
  ASSERT_FALSE(before.is_null());
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  const json marked = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(marked["shrinks"][0]["pods"], json::array({"main-3"})) << marked.dump();
  const std::string lost = marked["assignments"][3].value("node", "");
  for (int i = 0; i < 3; ++i) ASSERT_NE(marked["assignments"][i].value("node", ""), lost);
  sim_->StopNode(lost);
  // (The cycle that finds the node lost does the shrink, and b-0, its room lost with the node,
  // may take another pod in it: its Resized event says the shrink.)
  const json after = StatusOnceShrunkWithoutRequeue();
  ASSERT_FALSE(after.is_null()) << Describe(Workloads());
  EXPECT_EQ(after.value("phase", ""), "Running") << after.dump();
  ASSERT_EQ(after["assignments"].size(), 3u) << after.dump();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(after["assignments"][i], before["assignments"][i]);
  std::string said;
  for (int i = 0; i < 100 && said.find("shrunk to 3 of 4 pods") == std::string::npos; ++i) {
    said = CallJson("GET", std::string(kApi) +
                               "/namespaces/team-a/events?fieldSelector="
                               "involvedObject.name%3Delastic%2Creason%3DResized")
               .dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(said.find("shrunk to 3 of 4 pods"), std::string::npos) << said;
}

// Two marks, the older one's pod on a node that is lost: that shrink is done at once, the
// newer one's pod stops at its deadline, and nothing is requeued.
TEST_F(FactoryTest, ALostNodeEndsTheShrinkWhosePodsItHeld) {
  ASSERT_FALSE(StartElasticBesideReclaim(true, nullptr, 600'000).is_null());
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-b", "b-1", 8));
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  const json marked = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(marked["shrinks"].size(), 2u) << marked.dump();
  sim_->StopNode(marked["assignments"][3].value("node", ""));
  const json after = StatusOnceShrunkWithoutRequeue();
  ASSERT_FALSE(after.is_null()) << Describe(Workloads());
  EXPECT_EQ(after.value("phase", ""), "Running") << after.dump();
  EXPECT_EQ(after["assignments"].size(), 3u) << after.dump();
  // (b-0, whose room went with the node, may shrink it again in that cycle: a newer mark.)
  ASSERT_GE(after["shrinks"].size(), 1u) << after.dump();
  ASSERT_LE(after["shrinks"].size(), 2u) << after.dump();
  EXPECT_EQ(after["shrinks"][0]["pods"], json::array({"main-2"}));
  EXPECT_EQ(after["shrinks"][0].value("by", ""), "team-b/b-1");
  if (after["shrinks"].size() == 2u)
    EXPECT_EQ(after["shrinks"][1].value("by", ""), "team-b/b-0") << after.dump();
}

// A mark an earlier build wrote (status.shrink, one object) is read as a list of one: its pod
// stops at its deadline and the mark is gone.
TEST_F(FactoryTest, AnEarlierBuildsShrinkMarkIsStillHonoured) {
  ASSERT_FALSE(StartElasticBesideReclaim(true, nullptr).is_null());
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  const std::string key = "/registry/workloads/team-a/elastic";
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  obj["status"]["shrink"] = obj["status"]["shrinks"][0];
  obj["status"].erase("shrinks");
  ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  for (int i = 0; i < 3; ++i) Cycle(2'000);
  const json after = Workloads()["team-a/elastic"]["status"];
  EXPECT_FALSE(after.contains("shrink")) << after.dump();
  EXPECT_FALSE(after.contains("shrinks")) << after.dump();
  EXPECT_EQ(after["assignments"].size(), 3u) << after.dump();
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("phase", ""), "Running");
}

// A workload created after a cycle read the clock (here: a creation time ahead of the
// scheduler's clock) is decided no earlier than it was created.
TEST_F(FactoryTest, DecisionsAreNoEarlierThanCreation) {
  CreateWorkload(WholeGpuWorkload("team-a", "late", 1));
  CreateWorkload(WholeGpuWorkload("team-a", "waits", 8, 40));  // (more than the fleet)
  for (const char* name : {"late", "waits"}) {
    const std::string key = std::string("/registry/workloads/team-a/") + name;
    auto kv = store_->Get(key);
    ASSERT_TRUE(kv.ok());
    json obj = json::parse(kv->value);
    obj["metadata"]["creationTimestamp"] = FormatTimestamp(clock_.NowMs() + 1'500);
    ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  }
  ASSERT_TRUE(scheduler_->RunOnce().ok());
  for (const char* name : {"late", "waits"}) {
    const json w = Workloads()[std::string("team-a/") + name];
    const int64_t created = ParseTimestamp(w["metadata"].value("creationTimestamp", ""));
    const json& st = w["status"];
    ASSERT_FALSE(st["conditions"].empty()) << st.dump();
    EXPECT_GE(ParseTimestamp(st["conditions"][0].value("lastTransitionTime", "")), created)
        << name << ": " << st.dump();
    if (st.contains("scheduledTime")) {
      EXPECT_GE(ParseTimestamp(st.value("scheduledTime", "")), created) << st.dump();
    }
  }
}

// A bound workload every pod of which its nodes have listed as completed has succeeded, even
// if no node says so (here the last report was lost; after a shrink the pods it keeps may all
// have finished): the scheduler ends it and frees its GPUs.
TEST_F(FactoryTest, AWorkloadWhosePodsAllCompletedHasSucceeded) {
  CreateWorkload(WholeGpuWorkload("team-a", "pair", 8, 2));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const std::string key = "/registry/workloads/team-a/pair";
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  obj["status"]["finishedPods"] = {{"main-0", "2026-01-01T00:00:00Z"},
                                   {"main-1", "2026-01-01T00:00:00Z"}};
  ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  Cycle();
  const json st = Workloads()["team-a/pair"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Succeeded") << st.dump();
  EXPECT_EQ(st.value("message", ""), "all 2 pods completed") << st.dump();
  EXPECT_TRUE(st.contains("completionTime")) << st.dump();
}

// Pods that completed while others run on give their GPUs back (Kueue's reclaimablePods): a
// sweep of two 8-GPU pods fills its queue's 16 GPUs, and team-b's work the fleet's other 16;
// once one pod completes, the queue's next 8-GPU workload starts where it ran, and the meter
// bills the sweep 8 GPUs from the completion. A node lost after its pod completed does not
// requeue the sweep.
TEST_F(FactoryTest, CompletedPodsGiveTheirGpusBack) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  auto step = [&](int64_t ms = 1000) {
    CycleStats stats = Cycle(ms);
    Status st = (*meter)->Sync();
    EXPECT_TRUE(st.ok()) << st.message();
    return stats;
  };
  SchedulerOptions so;
  so.node_grace_ms = 20'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 16}, {"borrowingLimit", 0}}}}}});
  CreateQueue("team-b", {{"quotas", {{"gpu", {{"guaranteed", 16}}}}}});
  CreateWorkload(WholeGpuWorkload("team-b", "fill", 8, 2));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "sweep", 8, 2));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  ASSERT_TRUE((*meter)->Sync().ok());
  const json running = Workloads()["team-a/sweep"]["status"];
  const int64_t bound = ParseTimestamp(running.value("scheduledTime", ""));
  CreateWorkload(WholeGpuWorkload("team-a", "next", 8));
  for (int i = 0; i < 3; ++i) step();
  ASSERT_EQ(Workloads()["team-a/next"]["status"].value("phase", ""), "Pending");

  // main-1 completes (as its node reports it, stamped).
  const std::string key = "/registry/workloads/team-a/sweep";
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  const int64_t done = clock_.NowMs();
  obj["status"]["finishedPods"] = {{"main-1", FormatTimestamp(done)}};
  ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  step();
  step();
  const json next = Workloads()["team-a/next"]["status"];
  ASSERT_EQ(next.value("phase", ""), "Running") << Describe(Workloads());
  const json sweep = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(sweep.value("phase", ""), "Running") << sweep.dump();
  EXPECT_EQ(sweep["assignments"].size(), 2u);  // (it still lists the pod that completed)
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("usedGpus", ""),
            "16");

  // (The fleet's only free GPUs were main-1's.)
  const std::string gone = sweep["assignments"][1].value("node", "");
  EXPECT_EQ(next["assignments"][0].value("node", ""), gone) << next.dump();
  // main-1's node stops renewing its lease: nothing of the sweep runs there, so it runs on.
  ASSERT_NE(gone, sweep["assignments"][0].value("node", ""));
  sim_->StopNode(gone);
  for (int i = 0; i < 4; ++i) step(10'000);
  const json after = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(after.value("phase", ""), "Running") << after.dump();
  EXPECT_EQ(after.value("scheduledTime", ""), sweep.value("scheduledTime", "")) << after.dump();
  for (int i = 0; i < 5; ++i) step(60'000);
  const int64_t t1 = clock_.NowMs() / 1000 * 1000;
  const json alloc = CallJson("GET", "/allocation?window=" + std::to_string(bound / 1000) + "," +
                                         std::to_string(t1 / 1000) + "&aggregate=workload");
  ASSERT_EQ(alloc.value("code", 0), 200) << alloc.dump();
  const double want_hours =
      (16.0 * (done / 1000 * 1000 - bound / 1000 * 1000) + 8.0 * (t1 - done / 1000 * 1000)) / 3.6e6;
  EXPECT_NEAR(alloc["data"][0]["team-a/sweep"].value("gpuHours", 0.0), want_hours, 1e-6)
      << alloc.dump();
}

// A sweep preempted after some of its pods completed does not run them again (a Job's
// succeeded pods stay succeeded): it waits for the others alone, is admitted with those (the
// completed ones listed with no node), and succeeds when they complete.
TEST_F(FactoryTest, APreemptedSweepDoesNotRunItsCompletedPodsAgain) {
  auto meter = OpenMeter();
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  StartScheduler(5'000);
  CreateTeamQueues(0, 32);
  CreateWorkload(WholeGpuWorkload("team-a", "sweep", 8, 4));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const std::string key = "/registry/workloads/team-a/sweep";
  auto finish = [&](const std::vector<std::string>& pods) {
    auto kv = store_->Get(key);
    ASSERT_TRUE(kv.ok());
    json obj = json::parse(kv->value);
    for (const std::string& pod : pods)
      obj["status"]["finishedPods"][pod] = FormatTimestamp(clock_.NowMs());
    ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  };
  finish({"main-0", "main-2"});
  Cycle();
  // team-b takes back 24 of its 32 GPUs: the 16 the completed pods gave back are not enough,
  // so the sweep is preempted; it waits again for its two other pods only.
  json b0 = WholeGpuWorkload("team-b", "b-0", 8, 3);
  CreateWorkload(b0);
  int preempted = 0;
  for (int i = 0; i < 10 && Workloads()["team-a/sweep"]["status"].value("phase", "") != "Pending";
       ++i)
    preempted += Cycle(2'000).preempted;
  EXPECT_EQ(preempted, 1);
  ASSERT_EQ(Workloads()["team-a/sweep"]["status"].value("phase", ""), "Pending")
      << Describe(Workloads());
  Cycle();
  const json waiting = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(waiting.value("phase", ""), "Pending") << waiting.dump();
  ASSERT_TRUE(waiting.contains("finishedPods")) << waiting.dump();
  EXPECT_EQ(waiting["finishedPods"].size(), 2u) << waiting.dump();
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("phase", ""), "Running");

  // b-0 ends and team-b's b-1 asks for 16: the sweep's two pods left fit beside it (four
  // would not).
  ClientResponse r = Call("DELETE", WorkloadPath("team-b", "b-0"));
  ASSERT_EQ(r.status, 200) << r.body;
  CreateWorkload(WholeGpuWorkload("team-b", "b-1", 8, 2));
  Cycle();
  Cycle();
  EXPECT_EQ(Workloads()["team-b/b-1"]["status"].value("phase", ""), "Running")
      << Describe(Workloads());
  const json again = Workloads()["team-a/sweep"]["status"];
  ASSERT_EQ(again.value("phase", ""), "Running") << again.dump();
  ASSERT_EQ(again["assignments"].size(), 4u) << again.dump();
  int placed = 0;
  for (const json& a : again["assignments"]) {
    const std::string pod = a.value("pod", "");
    if (pod == "main-0" || pod == "main-2") {
      EXPECT_EQ(a.value("node", "x"), "") << again.dump();
      EXPECT_TRUE(a["devices"].empty()) << again.dump();
    } else {
      EXPECT_FALSE(a.value("node", "").empty()) << again.dump();
      ++placed;
    }
  }
  EXPECT_EQ(placed, 2);
  EXPECT_FALSE(again.contains("admittedCounts")) << again.dump();
  EXPECT_NE(again["conditions"][0]
                .value("message", "")
                .find("admitted its 2 pods that have not completed (2 completed before"),
            std::string::npos)
      << again.dump();
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("usedGpus", ""),
            "16");
  // Its agents start the two (reported started), and it succeeds once they complete.
  Cycle();
  EXPECT_EQ(Workloads()["team-a/sweep"]["status"].value("phase", ""), "Running");
  // The meter bills the two pods it runs, 16 GPUs, on their nodes and nowhere else.
  ASSERT_TRUE((*meter)->Sync().ok());
  const int64_t t0 = clock_.NowMs() / 1000 * 1000;
  for (int i = 0; i < 5; ++i) {
    Cycle(60'000);
    ASSERT_TRUE((*meter)->Sync().ok());
  }
  const int64_t t1 = clock_.NowMs() / 1000 * 1000;
  const json alloc = CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                                         std::to_string(t1 / 1000) + "&aggregate=workload,node");
  ASSERT_EQ(alloc.value("code", 0), 200) << alloc.dump();
  double hours = 0;
  for (const auto& [key, row] : alloc["data"][0].items()) {
    if (key.rfind("team-a/sweep", 0) != 0) continue;
    EXPECT_NE(key, "team-a/sweep/") << alloc.dump();
    EXPECT_NEAR(row.value("gpuHours", 0.0), 8.0 * (t1 - t0) / 3.6e6, 1e-6) << key;
    hours += row.value("gpuHours", 0.0);
  }
  EXPECT_NEAR(hours, 16.0 * (t1 - t0) / 3.6e6, 1e-6) << alloc.dump();
  finish({"main-1", "main-3"});
  Cycle();
  const json done = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(done.value("phase", ""), "Succeeded") << done.dump();
  EXPECT_EQ(done.value("message", ""), "all 4 pods completed") << done.dump();
  // Ended, it is billed once: 16 GPUs until its completion, nothing after (the meter reads it
  // again each pass; a review found an ended binding billed a second time).
  for (int i = 0; i < 3; ++i) {
    Cycle(60'000);
    ASSERT_TRUE((*meter)->Sync().ok());
  }
  const int64_t t2 = clock_.NowMs() / 1000 * 1000;
  const int64_t ended = ParseTimestamp(done.value("completionTime", ""));
  const json all = CallJson("GET", "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                                       std::to_string(t2 / 1000) + "&aggregate=workload");
  ASSERT_EQ(all.value("code", 0), 200) << all.dump();
  EXPECT_NEAR(all["data"][0]["team-a/sweep"].value("gpuHours", 0.0), 16.0 * (ended - t0) / 3.6e6,
              1e-6)
      << all.dump();
}

// A pending elastic sweep that lists completed pods (as a requeue leaves it) asks only for the
// others: its queue's 8 GPUs admit one of its two 8-GPU pods left, named after the pods that
// did not complete, the completed ones listed with no node. Once that one completes it waits
// again for the last (a Job's completions all run), then succeeds with all four.
TEST_F(FactoryTest, APendingSweepAsksOnlyForThePodsThatDidNotComplete) {
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}, {"borrowingLimit", 0}}}}}});
  json sweep = WholeGpuWorkload("team-a", "sweep", 8, 4);
  sweep["spec"]["podSets"][0]["minCount"] = 1;
  sweep["spec"]["active"] = false;
  CreateWorkload(sweep);
  Cycle();
  const std::string key = "/registry/workloads/team-a/sweep";
  auto finish = [&](const std::string& pod) {
    auto kv = store_->Get(key);
    ASSERT_TRUE(kv.ok());
    json obj = json::parse(kv->value);
    obj["spec"]["active"] = true;
    obj["status"]["finishedPods"][pod] = FormatTimestamp(clock_.NowMs());
    ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  };
  finish("main-0");
  finish("main-2");
  Cycle();
  const json st = Workloads()["team-a/sweep"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Running") << st.dump();
  ASSERT_EQ(st["assignments"].size(), 3u) << st.dump();
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(st["assignments"][k].value("pod", ""), "main-" + std::to_string(k));
    EXPECT_EQ(st["assignments"][k].value("node", "").empty(), k != 1) << st.dump();
  }
  EXPECT_EQ(st["admittedCounts"], json::array({3})) << st.dump();
  EXPECT_NE(st["conditions"][0].value("message", "").find("admitted 1 of 2 pods"),
            std::string::npos)
      << st.dump();
  EXPECT_EQ(st["finishedPods"].size(), 2u);
  // Accounted as the one pod it runs (its queue's 8 GPUs), not requeued.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Cycle().requeued, 0);
  EXPECT_EQ(Workloads()["team-a/sweep"]["status"].value("phase", ""), "Running");
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("usedGpus", ""),
            "8");
  // main-1 completes: not Succeeded, as main-3 has not run; it waits again for main-3 alone.
  finish("main-1");
  EXPECT_EQ(Cycle().requeued, 1);
  const json left = Workloads()["team-a/sweep"]["status"];
  EXPECT_NE(left.value("phase", ""), "Succeeded") << left.dump();
  EXPECT_EQ(left["finishedPods"].size(), 3u) << left.dump();
  Cycle();
  const json last = Workloads()["team-a/sweep"]["status"];
  ASSERT_EQ(last.value("phase", ""), "Running") << last.dump();
  ASSERT_EQ(last["assignments"].size(), 4u) << last.dump();
  EXPECT_FALSE(last["assignments"][3].value("node", "").empty()) << last.dump();
  finish("main-3");
  Cycle();
  const json done = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(done.value("phase", ""), "Succeeded") << done.dump();
  EXPECT_EQ(done.value("message", ""), "all 4 pods completed") << done.dump();

  // Pods that completed under other pod sets are not the new ones': an edit of spec.podSets
  // while it waits drops them; one that leaves the pod sets keeps them.
  json other = WholeGpuWorkload("team-a", "other", 8, 4);
  other["spec"]["active"] = false;
  CreateWorkload(other);
  const std::string other_key = "/registry/workloads/team-a/other";
  auto kv = store_->Get(other_key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  obj["status"]["finishedPods"] = {{"main-0", "2026-01-01T00:00:00.000Z"}};
  ASSERT_TRUE(store_->Put(other_key, obj.dump(), kv->mod_revision).ok());
  auto patch = [&](const json& spec) {
    ClientResponse r = Call("PATCH", WorkloadPath("team-a", "other"), json{{"spec", spec}}.dump(),
                            "application/merge-patch+json");
    EXPECT_EQ(r.status, 200) << r.body;
    return Workloads()["team-a/other"]["status"];
  };
  EXPECT_TRUE(patch({{"priority", 1}}).contains("finishedPods"));
  json sets = other["spec"]["podSets"];
  sets[0]["count"] = 2;
  EXPECT_FALSE(patch({{"podSets", sets}}).contains("finishedPods"));
}

// Work that is no gang is shrunk too, where a pod costs less than evicting it whole: its pods
// are pieces of work, so a pod taken runs again later (PodsLeft), and the GPU-seconds its run
// loses are said (a user-style trial saw a sweep evicted whole, all its pods' runs lost, where
// one pod would do).
TEST_F(FactoryTest, WorkThatIsNoGangIsShrunkAndItsPodTakenRunsAgain) {
  StartScheduler(5'000);
  CreateTeamQueues(0, 32);
  json sweep = WholeGpuWorkload("team-a", "sweep", 8, 4);
  sweep["spec"]["podSets"][0]["minCount"] = 1;
  sweep["spec"]["run"]["durationSeconds"] = 60;
  CreateWorkload(sweep);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  Cycle();
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  const CycleStats stats = Cycle();
  EXPECT_EQ(stats.shrinks, 1);
  EXPECT_EQ(stats.preempted, 0);
  const json marked = Workloads()["team-a/sweep"]["status"];
  ASSERT_TRUE(marked.contains("shrinks")) << marked.dump();
  EXPECT_FALSE(marked.contains("preemption")) << marked.dump();
  EXPECT_NE(marked.value("message", "").find("they run again later"), std::string::npos)
      << marked.dump();
  // The three pods it kept complete; the one taken has not run, and it waits to run it.
  for (int i = 0; i < 12 && Workloads()["team-a/sweep"]["status"].value("reason", "") != "PodsLeft";
       ++i)
    Cycle(10'000);
  const json left = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(left.value("reason", ""), "PodsLeft") << left.dump();
  EXPECT_NE(left.value("message", "").find("1 of its 4 pods has not run"), std::string::npos)
      << left.dump();
}

// The simulated nodes of `fabrica up` report each pod as it completes, as agents do: a sweep
// its quota admits in part is not "succeeded" when its admitted pods complete, but waits again
// and runs the pod that never ran (a user-style review found it marked Succeeded 2/3).
TEST_F(FactoryTest, ASimulatedSweepAdmittedInPartRunsItsOtherPodsAfterwards) {
  StartScheduler(5'000);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}, {"borrowingLimit", 0}}}}}});
  json sweep = WholeGpuWorkload("team-a", "sweep", 4, 3);
  sweep["spec"]["podSets"][0]["minCount"] = 1;
  sweep["spec"]["run"]["durationSeconds"] = 60;
  CreateWorkload(sweep);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  ASSERT_EQ(Workloads()["team-a/sweep"]["status"]["admittedCounts"], json::array({2}));
  Cycle(61'000);
  json st = Workloads()["team-a/sweep"]["status"];
  EXPECT_NE(st.value("phase", ""), "Succeeded") << st.dump();
  EXPECT_EQ(st["finishedPods"].size(), 2u) << st.dump();
  for (int i = 0; i < 5 && Workloads()["team-a/sweep"]["status"].value("phase", "") != "Running";
       ++i)
    Cycle();
  st = Workloads()["team-a/sweep"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Running") << st.dump();
  Cycle(61'000);
  st = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Succeeded") << st.dump();
  EXPECT_EQ(st["finishedPods"].size(), 3u) << st.dump();
  EXPECT_TRUE(st["finishedPods"].contains("main-2")) << st.dump();
}

// Work admitted with fewer pods that runs past its maximum runtime fails as marked, though its
// pods completed with others left, rather than wait again for those.
TEST_F(FactoryTest, PodsLeftPastTheMaximumRuntimeFail) {
  StartScheduler(5'000);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 8}, {"borrowingLimit", 0}}}}}});
  json sweep = WholeGpuWorkload("team-a", "sweep", 8, 4);
  sweep["spec"]["podSets"][0]["minCount"] = 1;
  sweep["spec"]["maxRuntimeSeconds"] = 60;
  CreateWorkload(sweep);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  ASSERT_EQ(Workloads()["team-a/sweep"]["status"]["admittedCounts"], json::array({1}));
  Cycle(61'000);  // past its maximum runtime: marked to stop for good
  const std::string key = "/registry/workloads/team-a/sweep";
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  ASSERT_EQ(obj["status"]["preemption"].value("final", false), true) << obj.dump();
  obj["status"]["finishedPods"] = {{"main-0", FormatTimestamp(clock_.NowMs())}};
  ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  int requeued = 0;
  for (int i = 0; i < 4; ++i) requeued += Cycle(2'000).requeued;
  EXPECT_EQ(requeued, 0);
  const json st = Workloads()["team-a/sweep"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Failed") << st.dump();
  EXPECT_EQ(st.value("reason", ""), "MaxRuntimeExceeded") << st.dump();
}

// A gang's pods are the ranks of one job: after a requeue it starts again whole, its completed
// pods not kept.
TEST_F(FactoryTest, AGangRequeuedAfterSomeRanksCompletedStartsWhole) {
  StartScheduler(5'000);
  CreateTeamQueues(0, 32);
  json gang = WholeGpuWorkload("team-a", "ranks", 8, 2);
  gang["spec"]["gang"] = true;
  CreateWorkload(gang);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  // (Its message names both nodes, not the one whose report came first.)
  EXPECT_EQ(
      Workloads()["team-a/ranks"]["status"].value("message", "").rfind("running on 2 nodes: ", 0),
      0u)
      << Describe(Workloads());
  const std::string key = "/registry/workloads/team-a/ranks";
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json obj = json::parse(kv->value);
  obj["status"]["finishedPods"] = {{"main-0", FormatTimestamp(clock_.NowMs())}};
  ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8, 4));
  for (int i = 0; i < 10 && Workloads()["team-a/ranks"]["status"].value("phase", "") != "Pending";
       ++i)
    Cycle(2'000);
  const json st = Workloads()["team-a/ranks"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Pending") << Describe(Workloads());
  EXPECT_FALSE(st.contains("finishedPods")) << st.dump();
}

// A shrink whose stopping pods are on two nodes, one of them lost: the pod on the live node
// still runs, so the shrink is not done early (its preemptor must not take that pod's GPUs
// while it runs); the workload goes back to its queue as for any lost node (and starts again
// with the pods its queue allows).
TEST_F(FactoryTest, AShrinkWithAStoppingPodOnALiveNodeIsNotDoneEarly) {
  SchedulerOptions so;
  so.preemption_grace_ms = 600'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateTeamQueues(0, 32);
  CreateWorkload(ElasticGang());
  ASSERT_TRUE(CycleUntilAll("Running"));
  Cycle();
  json pair = WholeGpuWorkload("team-b", "b-0", 8, 2);
  pair["spec"]["gang"] = true;
  CreateWorkload(pair);
  ASSERT_EQ(Cycle().shrinks, 1) << Describe(Workloads());
  const json marked = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(marked["shrinks"][0]["pods"], json::array({"main-2", "main-3"})) << marked.dump();
  sim_->StopNode(marked["assignments"][3].value("node", ""));
  int requeued = 0;
  for (int i = 0; i < 6; ++i) {
    requeued += Cycle(10'000).requeued;
    const json st = Workloads()["team-a/elastic"]["status"];
    EXPECT_EQ(st.value("message", "").find("shrunk to 2"), std::string::npos) << st.dump();
    if (st.value("phase", "") == "Running") {
      // Until then b-0 is not bound to main-2's GPUs.
      const json b0 = Workloads()["team-b/b-0"]["status"];
      for (const json& a : b0.value("assignments", json::array()))
        EXPECT_NE(a.value("node", ""), marked["assignments"][2].value("node", "")) << b0.dump();
    }
  }
  EXPECT_EQ(requeued, 1) << Describe(Workloads());
}

// A workload whose pods have not all started is not shrunk (a shrink would restart its gang
// timeout): a reclaim evicts it whole.
TEST_F(FactoryTest, AGangNotFullyStartedIsNotShrunk) {
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  so.node_grace_ms = 3'600'000;  // the stopped agent's node stays Ready for the test
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateTeamQueues(0, 32);
  CreateWorkload(ElasticGang());
  ASSERT_TRUE(scheduler_->RunOnce().ok());
  const json bound = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(bound["assignments"].size(), 4u) << bound.dump();
  sim_->StopNode(bound["assignments"][1].value("node", ""));  // main-1 never starts
  for (int i = 0; i < 3; ++i) Cycle();
  const json running = Workloads()["team-a/elastic"]["status"];
  ASSERT_EQ(running.value("phase", ""), "Running") << running.dump();
  ASSERT_EQ(running["startedPods"].size(), 3u) << running.dump();
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 8));
  const CycleStats stats = Cycle();
  EXPECT_EQ(stats.shrinks, 0) << Describe(Workloads());
  EXPECT_EQ(stats.preempted, 1) << Describe(Workloads());
  const json after = Workloads()["team-a/elastic"]["status"];
  EXPECT_FALSE(after.contains("shrinks")) << after.dump();
  EXPECT_TRUE(after.contains("preemption")) << after.dump();
}

// Elastic growth waits for the pods it added: a workload grows again only once every pod of
// its binding has started (status.startedPods, which nodes report), and pods that do not start
// within the gang timeout are taken back (growth undone) while the pods that run keep running;
// it grows again after the backoff.
TEST_F(FactoryTest, GrowthWaitsForItsNewPodsAndIsUndoneWhenTheyDoNotStart) {
  Metrics metrics;
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  so.gang_requeue_backoff_s = 30;
  so.node_grace_ms = 3'600'000;  // the stopped agents' nodes stay Ready for the test
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, &metrics);
  CreateElasticGang();
  for (int i = 0; i < 3; ++i) Cycle();
  auto status = [&] { return Workloads()["team-a/elastic"]["status"]; };
  const json first = status();
  ASSERT_EQ(first["admittedCounts"], json::array({2})) << first.dump();
  ASSERT_EQ(first["startedPods"].size(), 2u) << first.dump();
  EXPECT_TRUE(first["startedPods"].contains("main-0")) << first.dump();
  // The nodes it does not run on stop running anything new.
  std::set<std::string> used;
  for (const json& a : first["assignments"]) used.insert(a.value("node", ""));
  std::vector<std::string> idle;
  for (const Node& n : fleet_.nodes)
    if (!used.count(n.name.str()) && n.name.str().rfind("hgx-mig", 0) != 0) {
      idle.push_back(n.name.str());
      sim_->StopNode(n.name.str());
    }
  ASSERT_EQ(idle.size(), 2u);
  SetGpuGuarantee("team-a", 24);
  Cycle();
  json grown = status();
  ASSERT_EQ(grown["assignments"].size(), 3u) << grown.dump();
  EXPECT_EQ(grown["startedPods"].size(), 2u) << grown.dump();  // main-2's node runs nothing
  // Room for its fourth pod: it does not grow while main-2 has not started.
  SetGpuGuarantee("team-a", 32);
  for (int i = 0; i < 5; ++i) Cycle(2'000);
  EXPECT_EQ(status()["assignments"].size(), 3u) << status().dump();
  EXPECT_EQ(status()["admittedCounts"], json::array({3})) << status().dump();
  // Past the gang timeout: back to the two pods that run, on the same nodes.
  Cycle(12'000);
  const json undone = status();
  EXPECT_EQ(undone.value("phase", ""), "Running") << undone.dump();
  ASSERT_EQ(undone["assignments"].size(), 2u) << undone.dump();
  EXPECT_EQ(undone["assignments"], first["assignments"]) << undone.dump();
  EXPECT_EQ(undone["admittedCounts"], json::array({2})) << undone.dump();
  EXPECT_NE(undone.value("message", "")
                .find("growth undone: pod(s) main-2 did not start within "
                      "the gang timeout of 20 s"),
            std::string::npos)
      << undone.dump();
  ASSERT_TRUE(undone.contains("growthRetryTime")) << undone.dump();
  // The node where main-2 did not start, while its other pods ran, takes no new work for a
  // while (a trial's growth went back to a wedged node every minute).
  const std::string main2_node = grown["assignments"][2].value("node", "");
  EXPECT_NE(undone.value("message", "")
                .find("; node(s) " + main2_node + " take no new work until a pod starts there"),
            std::string::npos)
      << undone.dump();
  EXPECT_NE(metrics.Render().find("fabrica_scheduler_elastic_growths_undone 1"), std::string::npos)
      << metrics.Render();
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("usedGpus", ""),
            "16");
  // The agents come back, and an admin uncordons their nodes (which lifts the hold); within
  // the backoff it still does not grow, after it it takes all four pods, which start.
  for (const std::string& n : idle) {
    sim_->Repaired(n, -1);
    ASSERT_EQ(Call("PATCH", std::string(kApi) + "/nodes/" + n,
                   R"({"spec":{"unschedulable":false}})", "application/merge-patch+json")
                  .status,
              200);
  }
  Cycle(20'000);
  EXPECT_EQ(status()["assignments"].size(), 2u) << status().dump();
  Cycle(11'000);
  Cycle();
  const json whole = status();
  EXPECT_EQ(whole["assignments"].size(), 4u) << whole.dump();
  EXPECT_FALSE(whole.contains("admittedCounts")) << whole.dump();
  EXPECT_EQ(whole["startedPods"].size(), 4u) << whole.dump();
}

// A gang counts as started only when all its pods have: one whose pods start on some of its
// nodes but not on another (an agent that runs nothing) is released at the gang timeout, as
// Kueue's waitForPodsReady does, though it was already Running. With queues or without (the
// parameter; before, without any queue no gang was ever released: a user-style review).
class GangTimeoutTest : public FactoryTest, public testing::WithParamInterface<bool> {};
TEST_P(GangTimeoutTest, GangWhosePodsDoNotAllStartIsReleased) {
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  so.node_grace_ms = 3'600'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  if (GetParam()) CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  json gang = WholeGpuWorkload("team-a", "gang", 8, 2);
  gang["spec"]["gang"] = true;
  CreateWorkload(gang);
  ASSERT_TRUE(scheduler_->RunOnce().ok());
  json st = Workloads()["team-a/gang"]["status"];
  ASSERT_EQ(st["assignments"].size(), 2u) << st.dump();
  const std::string stopped = st["assignments"][1].value("node", "");
  sim_->StopNode(stopped);
  Cycle(2'000);  // (said from a tenth of the timeout on)
  st = Workloads()["team-a/gang"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Running") << st.dump();
  EXPECT_EQ(st["startedPods"].size(), 1u) << st.dump();
  // Its message says which pod it waits for and when it is released (a trial read "running on
  // 2 nodes" while one had not started).
  const std::string released =
      FormatTimestamp(ParseTimestamp(st.value("scheduledTime", "")) + 20'000);
  EXPECT_EQ(st.value("message", ""), "1 of 2 pods started; waiting for main-1 on " + stopped +
                                         " (released to wait again at " + released +
                                         " if not all have started: the pods-ready timeout of "
                                         "20 s)")
      << st.dump();
  Cycle(8'000);
  EXPECT_EQ(Workloads()["team-a/gang"]["status"].value("phase", ""), "Running");
  Cycle(10'000);
  st = Workloads()["team-a/gang"]["status"];
  EXPECT_EQ(st.value("reason", ""), "GangTimeout") << st.dump();
  EXPECT_NE(st.value("message", "").find("(not started: main-1 on " + stopped + ")"),
            std::string::npos)
      << st.dump();
  EXPECT_EQ(st["requeueState"].value("count", 0), 1) << st.dump();
  EXPECT_FALSE(st.contains("startedPods")) << st.dump();
  // As a gang, it did no work: none lost (its one started pod ran 20 s on 8 GPUs).
  EXPECT_EQ(st["evictions"].value("gpuSecondsLost", -1), 0) << st.dump();
}
INSTANTIATE_TEST_SUITE_P(WithQueuesOrNone, GangTimeoutTest, testing::Bool());

// Any workload, not only a gang: one pod bound to a node whose agent never starts it holds its
// GPUs and quota until the pods-ready timeout releases it (a trial's sat Scheduled for good,
// with no message); meanwhile it says what it waits for. With its pod started, the nodes'
// message again.
TEST_F(FactoryTest, APodThatNeverStartsIsReleasedByThePodsReadyTimeout) {
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  CreateWorkload(WholeGpuWorkload("team-a", "one", 8));
  CreateWorkload(WholeGpuWorkload("team-a", "fine", 8));
  ASSERT_TRUE(scheduler_->RunOnce().ok());
  json st = Workloads()["team-a/one"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Scheduled") << st.dump();
  const std::string stopped = st["assignments"][0].value("node", "");
  ASSERT_NE(Workloads()["team-a/fine"]["status"]["assignments"][0].value("node", ""), stopped);
  sim_->StallNode(stopped);  // (its lease renewed, no pod started)
  // (A condition someone else wrote on the node outlives the scheduler's own.)
  ClientResponse other =
      Call("PATCH", std::string(kApi) + "/nodes/" + stopped + "/status",
           json{{"status",
                 {{"conditions",
                   {{{"type", "Ready"}, {"status", "True"}, {"reason", "LeaseRenewed"}},
                    {{"type", "DiskPressure"}, {"status", "False"}, {"reason", "Checked"}}}}}}}
               .dump(),
           "application/merge-patch+json");
  ASSERT_EQ(other.status, 200) << other.body;
  Cycle();
  // (Not said at once: pods mostly start within seconds.)
  EXPECT_EQ(Workloads()["team-a/one"]["status"].value("message", ""), "");
  Cycle();
  st = Workloads()["team-a/one"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Scheduled") << st.dump();
  const std::string released =
      FormatTimestamp(ParseTimestamp(st.value("scheduledTime", "")) + 20'000);
  EXPECT_EQ(st.value("message", ""),
            "waiting for its pod to start: main-0 on " + stopped + " (released to wait again at " +
                released + " if not all have started: the pods-ready timeout of 20 s)")
      << st.dump();
  // The one whose pod started says where it runs, as its node wrote.
  EXPECT_EQ(Workloads()["team-a/fine"]["status"].value("message", "").rfind("running on ", 0), 0u)
      << Describe(Workloads());
  Cycle(9'000);
  EXPECT_EQ(Workloads()["team-a/one"]["status"].value("phase", ""), "Scheduled");
  Cycle(10'000);
  st = Workloads()["team-a/one"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Pending") << st.dump();
  EXPECT_EQ(st.value("reason", ""), "PodsReadyTimeout") << st.dump();
  EXPECT_NE(st.value("message", "")
                .find("requeued: its pod did not start within the pods-ready "
                      "timeout of 20 s (--gang-timeout) (not started: main-0 "
                      "on " +
                      stopped + ")"),
            std::string::npos)
      << st.dump();
  EXPECT_EQ(st["requeueState"].value("count", 0), 1) << st.dump();
  EXPECT_EQ(Workloads()["team-a/fine"]["status"].value("phase", ""), "Running");
  // Its node, which renewed its lease but started nothing, takes no new work for a while
  // (unstarted_node_hold_s, 30 min by default): tried again, it starts elsewhere (a trial's
  // gang went back to the same node three times while 16 GPUs idled).
  const int64_t hold_until = clock_.NowMs() + 1'800'000 - 1'000;  // (this cycle's now)
  EXPECT_NE(
      st.value("message", "")
          .find("; node(s) " + stopped + " take no new work until a pod starts there, or until "),
      std::string::npos)
      << st.dump();
  const json node = CallJson("GET", std::string(kApi) + "/nodes/" + stopped);
  json held = json::object();
  for (const json& c : node["status"]["conditions"])
    if (c.value("type", "") == "PodsStarting") held = c;
  EXPECT_EQ(held.value("status", ""), "False") << node.dump();
  EXPECT_EQ(held.value("reason", ""), "PodsNotStarted") << node.dump();
  EXPECT_NE(held.value("message", "").find("pods of team-a/one (main-0) did not start here"),
            std::string::npos)
      << node.dump();
  bool kept = false;
  for (const json& c : node["status"]["conditions"]) kept |= c.value("type", "") == "DiskPressure";
  EXPECT_TRUE(kept) << node.dump();
  Cycle(60'000);  // past its backoff
  Cycle();
  st = Workloads()["team-a/one"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Running") << st.dump();
  ASSERT_EQ(st["assignments"].size(), 1u) << st.dump();
  EXPECT_NE(st["assignments"][0].value("node", ""), stopped) << st.dump();
  // The hold ends at its time: the condition goes.
  Cycle(hold_until - clock_.NowMs() + 1'000);
  bool still = false;
  const json after = CallJson("GET", std::string(kApi) + "/nodes/" + stopped);
  for (const json& c : after["status"]["conditions"])
    still |= c.value("type", "") == "PodsStarting";
  EXPECT_FALSE(still);
}

// A node held for pods that did not start there (unstarted_node_hold_s), with a second
// workload bound there after the held-for one and not started either.
class StartHoldTest : public FactoryTest {
 protected:
  // Binds "team-a/one" (4 GPUs, a pods-ready timeout of 30 s) to a node whose agent then
  // starts nothing, 5 s on; returns the node's name.
  std::string StallANode() {
    SchedulerOptions so;
    so.gang_timeout_s = 30;
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
    CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 40}}}}}});
    // (Not preemptible: else a consolidation for work pinned to its node moves it elsewhere.)
    json one = WholeGpuWorkload("team-a", "one", 4);
    one["spec"]["preemptible"] = false;
    CreateWorkload(one);
    CreateWorkload(WholeGpuWorkload("team-a", "fine", 8));
    EXPECT_TRUE(scheduler_->RunOnce().ok());
    const std::string node =
        Workloads()["team-a/one"]["status"]["assignments"][0].value("node", "");
    sim_->StallNode(node);  // (its lease renewed, no pod started)
    Cycle(5'000);
    return node;
  }
  // Holds a node and returns its name; "team-a/two" is bound there, not started.
  std::string HoldANode() {
    const std::string node = StallANode();
    CreateWorkload(WholeGpuWorkload("team-a", "two", 4));
    Cycle();
    EXPECT_EQ(Workloads()["team-a/two"]["status"]["assignments"][0].value("node", ""), node)
        << Describe(Workloads());
    Cycle(25'000);  // "one" released at 30 s
    EXPECT_EQ(Workloads()["team-a/one"]["status"].value("reason", ""), "PodsReadyTimeout")
        << Describe(Workloads());
    // (Saved in the cycle that set it: a restart right after finds it.)
    EXPECT_FALSE(Hold(node).empty()) << node;
    return node;
  }

  // The node's PodsStarting condition, or null.
  json Hold(const std::string& node) {
    const json n = CallJson("GET", std::string(kApi) + "/nodes/" + node);
    for (const json& c : n["status"]["conditions"])
      if (c.value("type", "") == "PodsStarting") return c;
    return json();
  }
};

// The hold is the scheduler's memory, saved in the Node's status: a restart keeps it (it was
// lost), and an uncordon lifts it (it could not be lifted by hand).
TEST_F(StartHoldTest, AHoldOutlivesARestartAndAnUncordonLiftsIt) {
  const std::string node = HoldANode();
  const json saved = CallJson("GET", std::string(kApi) + "/nodes/" + node)["status"]["startHold"];
  ASSERT_TRUE(saved.is_object()) << node;
  EXPECT_NE(saved.value("message", "").find("pods of team-a/one (main-0) did not start here"),
            std::string::npos)
      << saved.dump();
  SchedulerOptions so;
  so.gang_timeout_s = 30;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  // (Down for two minutes, past every lease: the node's lapsed lease, which no one could renew
  // meanwhile, does not end the hold before its agent has had a grace to renew it.)
  clock_.AdvanceMs(120'000);
  ASSERT_TRUE(scheduler_->RunOnce().ok());
  EXPECT_EQ(Hold(node).value("status", ""), "False") << node;
  Cycle();
  Cycle();
  EXPECT_EQ(Hold(node).value("status", ""), "False") << node;
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/nodes/" + node)["status"]["startHold"], saved);
  // (An uncordon of a node that is not cordoned: fabctl uncordon's patch.)
  ClientResponse r =
      Call("PATCH", std::string(kApi) + "/nodes/" + node,
           json{{"spec", {{"unschedulable", false}}}}.dump(), "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  const json after = CallJson("GET", std::string(kApi) + "/nodes/" + node);
  EXPECT_TRUE(Hold(node).is_null()) << after.dump();
  EXPECT_FALSE(after["status"].contains("startHold")) << after.dump();
  EXPECT_TRUE(after["metadata"]["annotations"].contains(kUncordonedAtAnnotation)) << after.dump();
}

// Work already waiting when a hold begins does not go to the held node in that cycle (a trial's
// went there 70 ms after the release, did not start either, and was released a timeout later).
TEST_F(StartHoldTest, WorkWaitingWhenAHoldBeginsIsNotPlacedThereInThatCycle) {
  const std::string node = StallANode();
  // Waiting for the whole node: its 4 GPUs free when "one" is released.
  json next = WholeGpuWorkload("team-a", "next", 8);
  next["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", node}};
  CreateWorkload(next);
  Cycle();
  ASSERT_EQ(Workloads()["team-a/next"]["status"].value("phase", ""), "Pending");
  Cycle(25'000);  // "one" released at 30 s, and the node held
  ASSERT_EQ(Workloads()["team-a/one"]["status"].value("reason", ""), "PodsReadyTimeout")
      << Describe(Workloads());
  ASSERT_FALSE(Hold(node).empty()) << node;
  const json st = Workloads()["team-a/next"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Pending") << st.dump();
  EXPECT_FALSE(st.contains("assignments") && !st["assignments"].empty()) << st.dump();
}

// A pod that starts on the held node, of work bound there after the held-for work, lifts the
// hold: the node has shown it starts pods.
TEST_F(StartHoldTest, APodStartingOnTheNodeLiftsItsHold) {
  const std::string node = HoldANode();
  // Waiting for the node's 4 free GPUs: placed there in the cycle that sees the start, not a
  // cycle later (a review found the lifted hold still kept the node for its cycle).
  json three = WholeGpuWorkload("team-a", "three", 4);
  three["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", node}};
  CreateWorkload(three);
  Cycle();
  ASSERT_EQ(Workloads()["team-a/three"]["status"].value("phase", ""), "Pending");
  sim_->Repaired(node, -1);  // (its agent back)
  Cycle();
  EXPECT_EQ(Workloads()["team-a/two"]["status"].value("phase", ""), "Running");
  EXPECT_NE(Workloads()["team-a/three"]["status"].value("phase", ""), "Pending")
      << Describe(Workloads());
  Cycle();
  EXPECT_TRUE(Hold(node).is_null()) << node;
  const json st = Workloads()["team-a/two"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Running") << st.dump();
}

// Without queues, a workload no usable node takes counts the nodes that take no new work
// (cordoned here) as having no room, not as "refused by policy" (a trial's held node read so).
TEST_F(FactoryTest, NodesThatTakeNoNewWorkAreSaidToHaveNoRoom) {
  for (const char* node : {"hgx-a-0", "hgx-a-1", "hgx-b-0", "hgx-b-1"}) {
    ClientResponse r =
        Call("PATCH", std::string(kApi) + "/nodes/" + node,
             json{{"spec", {{"unschedulable", true}}}}.dump(), "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  CreateWorkload(WholeGpuWorkload("team-a", "big", 8));
  Cycle();
  const std::string why = Workloads()["team-a/big"]["status"].value("message", "");
  EXPECT_NE(why.find("4 have no room at all (full, cordoned, held, not ready or out of service)"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("refused by policy"), std::string::npos) << why;
}

// A gang that requires one leaf keeps to one while some node takes no new work, with or
// without queues (a trial's, without queues, was spread over two leaves once an unrelated node
// was cordoned: placement on the usable nodes went pod by pod, its topology forgotten).
TEST_F(FactoryTest, ACordonElsewhereLeavesAGangsRequiredLeafRequired) {
  for (bool queues : {false, true}) {
    SCOPED_TRACE(queues ? "with queues" : "without queues");
    const std::string suffix = queues ? "-q" : "";
    if (queues) CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 40}}}}}});
    ClientResponse r = Call("PATCH", std::string(kApi) + "/nodes/hgx-mig",
                            R"({"spec":{"unschedulable":true}})", "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
    // One node taken in each leaf: leaf-1 and leaf-2 have 8 whole GPUs free each.
    for (const std::string node : {"hgx-a-0", "hgx-b-0"}) {
      json filler = WholeGpuWorkload("team-a", "f-" + node + suffix, 8);
      filler["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", node}};
      CreateWorkload(filler);
    }
    json gang = WholeGpuWorkload("team-a", "gang" + suffix, 8, /*pods=*/2);
    gang["spec"]["gang"] = true;
    gang["spec"]["topology"] = {{"level", "leaf"}, {"mode", "required"}};
    CreateWorkload(gang);
    Cycle();
    Cycle();
    std::map<std::string, json> w = Workloads();
    const json& status = w["team-a/gang" + suffix]["status"];
    EXPECT_EQ(status.value("phase", ""), "Pending") << Describe(w);
    EXPECT_NE(status.value("message", "").find("gang needs 16 GPUs in one leaf domain"),
              std::string::npos)
        << Describe(w);
    // The leaf-1 filler ends: the gang takes leaf-1.
    ASSERT_EQ(Call("DELETE", WorkloadPath("team-a") + "/f-hgx-a-0" + suffix).status, 200);
    Cycle();
    Cycle();
    w = Workloads();
    ASSERT_EQ(w["team-a/gang" + suffix]["status"].value("phase", ""), "Running") << Describe(w);
    for (const json& a : w["team-a/gang" + suffix]["status"]["assignments"])
      EXPECT_EQ(a.value("node", "").rfind("hgx-a-", 0), 0u) << Describe(w);
    for (const std::string name : {"f-hgx-b-0" + suffix, "gang" + suffix})
      ASSERT_EQ(Call("DELETE", WorkloadPath("team-a") + "/" + name).status, 200);
    Cycle();
  }
}

// A label an admin sets on a Node object (metadata.labels, as `kubectl label node`) is what a
// workload's nodeSelector matches, beside the well-known kubernetes.io/hostname; excludeNodes
// keeps work off the nodes it names. With and without queues.
TEST_F(FactoryTest, ANodeSelectorPlacesWorkOnTheLabelledNode) {
  for (bool queues : {false, true}) {
    SCOPED_TRACE(queues ? "with queues" : "without queues");
    const std::string suffix = queues ? "-q" : "";
    if (queues) CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
    ClientResponse r = Call("PATCH", std::string(kApi) + "/nodes/hgx-b-1",
                            json{{"metadata", {{"labels", {{"zone", "b"}}}}}}.dump(),
                            "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
    json pinned = WholeGpuWorkload("team-a", "pinned" + suffix, 2);
    pinned["spec"]["nodeSelector"] = {{"zone", "b"}};
    CreateWorkload(pinned);
    json host = WholeGpuWorkload("team-a", "host" + suffix, 1);
    host["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "hgx-a-1"}};
    CreateWorkload(host);
    json avoid = WholeGpuWorkload("team-a", "avoid" + suffix, 1);
    // (Left to itself, a packing policy puts it beside pinned or host.)
    avoid["spec"]["excludeNodes"] = {"hgx-a-0", "hgx-a-1", "hgx-b-1"};
    CreateWorkload(avoid);
    json nowhere = WholeGpuWorkload("team-a", "nowhere" + suffix, 1);
    nowhere["spec"]["nodeSelector"] = {{"zone", "z"}};
    CreateWorkload(nowhere);
    Cycle();
    std::map<std::string, json> w = Workloads();
    const auto node_of = [&](const std::string& name) {
      return OnlyNodeOf(w, "team-a/" + name + suffix);
    };
    EXPECT_EQ(node_of("pinned"), "hgx-b-1") << Describe(w);
    EXPECT_EQ(node_of("host"), "hgx-a-1") << Describe(w);
    EXPECT_EQ(node_of("avoid"), "hgx-b-0") << Describe(w);
    EXPECT_EQ(node_of("nowhere"), "(its nodeSelector zone=z leaves it no node of the fleet)")
        << Describe(w);
    // What runs stays where it runs: its selector may not change meanwhile, and a node
    // relabelled under it moves nothing.
    r = Call("PATCH", std::string(kApi) + "/namespaces/team-a/workloads/pinned" + suffix,
             json{{"spec", {{"nodeSelector", {{"zone", "c"}}}}}}.dump(),
             "application/merge-patch+json");
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("spec.nodeSelector: may not change while the workload is"),
              std::string::npos)
        << r.body;
    r = Call("PATCH", std::string(kApi) + "/nodes/hgx-b-1",
             json{{"metadata", {{"labels", {{"zone", nullptr}}}}}}.dump(),
             "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
    Cycle();
    w = Workloads();
    EXPECT_EQ(node_of("pinned"), "hgx-b-1") << Describe(w);
    EXPECT_EQ(w["team-a/pinned" + suffix]["status"].value("phase", ""), "Running") << Describe(w);
    for (const char* name : {"pinned", "host", "avoid", "nowhere"})
      ASSERT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-a/workloads/" + name + suffix)
                    .status,
                200);
    Cycle();
  }
}

// Node affinity through the API, as a Kubernetes pod's spec.affinity.nodeAffinity: required
// terms keep work to the nodes one of them matches; preferred terms send it to the nodes they
// weigh most that have room. With and without queues.
TEST_F(FactoryTest, NodeAffinityRequiresAndPrefersNodes) {
  for (const auto& [node, tier] : {std::pair{"hgx-b-1", "gold"}, {"hgx-a-1", "silver"}}) {
    ClientResponse r = Call("PATCH", std::string(kApi) + "/nodes/" + node,
                            json{{"metadata", {{"labels", {{"tier", tier}}}}}}.dump(),
                            "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const auto expr = [](const std::string& key, const std::string& op, const json& values) {
    json e = {{"key", key}, {"operator", op}};
    if (!values.is_null()) e["values"] = values;
    return e;
  };
  const auto required = [](const json& terms) {
    return json{
        {"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution", {{"nodeSelectorTerms", terms}}}}}};
  };
  for (bool queues : {false, true}) {
    SCOPED_TRACE(queues ? "with queues" : "without queues");
    const std::string suffix = queues ? "-q" : "";
    if (queues) CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
    json prefers = WholeGpuWorkload("team-a", "prefers" + suffix, 1);
    prefers["spec"]["affinity"] = {
        {"nodeAffinity",
         {{"preferredDuringSchedulingIgnoredDuringExecution",
           {{{"weight", 80},
             {"preference", {{"matchExpressions", {expr("tier", "In", {"gold"})}}}}},
            {{"weight", 20},
             {"preference", {{"matchExpressions", {expr("tier", "In", {"silver"})}}}}}}}}}};
    CreateWorkload(prefers);
    Cycle();
    json kept = WholeGpuWorkload("team-a", "kept" + suffix, 2);
    // (Left to itself, a packing policy puts it beside prefers.)
    kept["spec"]["affinity"] = required(
        {{{"matchExpressions",
           {expr("tier", "DoesNotExist", nullptr), expr("fabrica.dev/gpu-model", "In", {"H100"})}},
          {"matchFields", {expr("metadata.name", "NotIn", {"hgx-a-0"})}}}});
    CreateWorkload(kept);
    json nowhere = WholeGpuWorkload("team-a", "nowhere" + suffix, 1);
    nowhere["spec"]["affinity"] =
        required({{{"matchExpressions", {expr("tier", "In", {"bronze"})}}},
                  {{"matchExpressions", {expr("tier", "Gt", {"3"})}}}});
    CreateWorkload(nowhere);
    Cycle();
    std::map<std::string, json> w = Workloads();
    const auto node_of = [&](const std::string& name) {
      return OnlyNodeOf(w, "team-a/" + name + suffix);
    };
    EXPECT_EQ(node_of("prefers"), "hgx-b-1") << Describe(w);
    EXPECT_EQ(node_of("kept"), "hgx-b-0") << Describe(w);
    EXPECT_EQ(node_of("nowhere"),
              "(its nodeAffinity (tier In (bronze)) or (tier Gt 3) leaves it no node of the "
              "fleet)")
        << Describe(w);
    // What runs keeps its affinity; a value that is not a string, or an unknown operator, is
    // refused by name.
    ClientResponse r = Call(
        "PATCH", std::string(kApi) + "/namespaces/team-a/workloads/kept" + suffix,
        json{
            {"spec",
             {{"affinity", required({{{"matchExpressions", {expr("tier", "Exists", nullptr)}}}})}}}}
            .dump(),
        "application/merge-patch+json");
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("spec.affinity: may not change while the workload is"), std::string::npos)
        << r.body;
    // (An empty list says what an absent one does: no change.)
    r = Call("PATCH", std::string(kApi) + "/namespaces/team-a/workloads/kept" + suffix,
             json{{"spec",
                   {{"affinity",
                     {{"podAffinity", nullptr},
                      {"nodeAffinity",
                       {{"preferredDuringSchedulingIgnoredDuringExecution", json::array()}}}}}}}}
                 .dump(),
             "application/merge-patch+json");
    EXPECT_EQ(r.status, 200) << r.body;
    json bad = WholeGpuWorkload("team-a", "bad" + suffix, 1);
    bad["spec"]["affinity"] = required({{{"matchExpressions", {expr("tier", "Gt", {3})}}}});
    r = Call("POST", std::string(kApi) + "/namespaces/team-a/workloads", bad.dump());
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                          "Execution.nodeSelectorTerms[0].matchExpressions[0].values[0]: "
                          "expected a string, got 3"),
              std::string::npos)
        << r.body;
    bad["spec"]["affinity"] = required({{{"matchExpressions", {expr("tier", "Near", {"3"})}}}});
    r = Call("POST", std::string(kApi) + "/namespaces/team-a/workloads", bad.dump());
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("matchExpressions[0].operator: 'Near' is not In, NotIn"),
              std::string::npos)
        << r.body;
    for (const char* name : {"prefers", "kept", "nowhere"})
      ASSERT_EQ(Call("DELETE", std::string(kApi) + "/namespaces/team-a/workloads/" + name + suffix)
                    .status,
                200);
    Cycle();
  }
}

// Taints through the API: a NoSchedule taint keeps new work that does not tolerate it off its
// node, what runs there stays; a NoExecute one also evicts what runs there without tolerating it
// (after the grace period; at once for none of its seconds, after them for a toleration with
// tolerationSeconds, counted from the taint's timeAdded, which the API stamps); untainted, the
// node takes work again.
TEST_F(FactoryTest, TaintsKeepWorkOffANodeAndNoExecuteEvictsIt) {
  StartScheduler(5'000);
  const std::string node = std::string(kApi) + "/nodes/hgx-a-0";
  const auto taint = [&](const json& taints) {
    return Call("PATCH", node, json{{"spec", {{"taints", taints}}}}.dump(),
                "application/merge-patch+json");
  };
  const auto on_a0 = [&](const std::string& name, const json& tolerations) {
    json w = WholeGpuWorkload("team-a", name, 1);
    w["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "hgx-a-0"}};
    if (!tolerations.is_null()) w["spec"]["tolerations"] = tolerations;
    CreateWorkload(w);
  };
  on_a0("stay", json());
  on_a0("brief", json::array({{{"key", "gpu"},
                               {"operator", "Exists"},
                               {"effect", "NoExecute"},
                               {"tolerationSeconds", 30}}}));
  on_a0("keep", json::array({{{"operator", "Exists"}}}));
  on_a0("saved", json());
  ASSERT_TRUE(CycleUntilAll("Running"));
  Cycle(60'000);  // (a minute before the taint: brief's 30 s count from the taint, not its start)

  // NoSchedule: what runs stays; new work without a toleration goes elsewhere, or waits.
  ClientResponse r =
      taint(json::array({{{"key", "gpu"}, {"value", "suspect"}, {"effect", "NoSchedule"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  on_a0("new", json());
  // (Left to itself, a packing policy puts it beside the three, in the five GPUs left there.)
  CreateWorkload(WholeGpuWorkload("team-a", "big", 5));
  Cycle();
  std::map<std::string, json> w = Workloads();
  const auto status = [&](const std::string& name) { return w["team-a/" + name]["status"]; };
  for (const char* name : {"stay", "brief", "keep", "saved"})
    EXPECT_EQ(status(name).value("phase", ""), "Running") << name << ": " << Describe(w);
  EXPECT_EQ(status("new").value("message", ""),
            "its nodeSelector kubernetes.io/hostname=hgx-a-0 and want of a toleration for taint "
            "gpu=suspect:NoSchedule leaves it no node of the fleet")
      << Describe(w);
  ASSERT_EQ(status("big").value("assignments", json::array()).size(), 1u) << Describe(w);
  EXPECT_NE(status("big")["assignments"][0].value("node", ""), "hgx-a-0");

  // NoExecute: "stay" is marked at once, "brief" once its 30 s have passed, "keep" never.
  r = taint(json::array({{{"key", "gpu"}, {"value", "xid-79"}, {"effect", "NoExecute"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json stored = json::parse(r.body);
  ASSERT_TRUE(stored["spec"]["taints"][0].contains("timeAdded")) << r.body;
  Cycle();
  w = Workloads();
  EXPECT_EQ(status("stay")["preemption"].value("reason", ""),
            "its node hgx-a-0 has taint gpu=xid-79:NoExecute, which it does not tolerate")
      << Describe(w);
  EXPECT_FALSE(status("brief").contains("preemption")) << Describe(w);
  EXPECT_TRUE(status("saved").contains("preemption")) << Describe(w);
  // A toleration added to a running workload (as Kubernetes allows) cancels its eviction; one
  // taken away is refused.
  r = Call(
      "PATCH", WorkloadPath("team-a", "saved"),
      json{{"spec", {{"tolerations", json::array({{{"key", "gpu"}, {"operator", "Exists"}}})}}}}
          .dump(),
      "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  w = Workloads();
  EXPECT_FALSE(status("saved").contains("preemption")) << status("saved").dump();
  EXPECT_EQ(
      status("saved")
          .value("message", "")
          .rfind("eviction cancelled: the NoExecute taint is gone or tolerated; running on", 0),
      0u)
      << status("saved").dump();
  Cycle(4'000);
  w = Workloads();
  EXPECT_EQ(status("stay").value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(status("stay").value("reason", ""), "Evicted") << Describe(w);
  EXPECT_EQ(status("brief").value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(status("saved").value("phase", ""), "Running") << Describe(w);
  // (A patch that keeps the taint keeps its date: the 30 s still count from the first.)
  r = taint(json::array({{{"key", "gpu"}, {"value", "xid-79"}, {"effect", "NoExecute"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["spec"]["taints"][0]["timeAdded"],
            stored["spec"]["taints"][0]["timeAdded"]);
  Cycle(25'000);
  w = Workloads();
  EXPECT_EQ(status("brief")["preemption"].value("reason", ""),
            "its node hgx-a-0 has taint gpu=xid-79:NoExecute, which it tolerates for 30 s only")
      << Describe(w);
  // Evicted, it may start there again (it tolerates the taint), and stays its 30 s again,
  // counted from its new start.
  Cycle(5'000);
  w = Workloads();
  EXPECT_EQ(status("brief")["evictions"].value("count", 0), 1) << status("brief").dump();
  EXPECT_EQ(status("brief").value("reason", ""), "Evicted") << status("brief").dump();
  Cycle();
  Cycle(20'000);
  w = Workloads();
  EXPECT_EQ(status("brief").value("phase", ""), "Running") << status("brief").dump();
  EXPECT_FALSE(status("brief").contains("preemption")) << status("brief").dump();
  EXPECT_EQ(status("keep").value("phase", ""), "Running") << Describe(w);
  EXPECT_FALSE(status("keep").contains("preemption")) << Describe(w);

  // Untainted: the work that waited for it starts there again.
  r = taint(nullptr);
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  Cycle();
  w = Workloads();
  for (const char* name : {"stay", "new"}) {
    ASSERT_EQ(status(name).value("assignments", json::array()).size(), 1u)
        << name << ": " << Describe(w);
    EXPECT_EQ(status(name)["assignments"][0].value("node", ""), "hgx-a-0");
  }
  // Packing puts the next one beside them; with a PreferNoSchedule taint there, work that does
  // not tolerate it goes elsewhere while it can.
  CreateWorkload(WholeGpuWorkload("team-a", "packed", 1));
  Cycle();
  w = Workloads();
  ASSERT_EQ(status("packed").value("assignments", json::array()).size(), 1u) << Describe(w);
  EXPECT_EQ(status("packed")["assignments"][0].value("node", ""), "hgx-a-0");
  r = taint(json::array({{{"key", "gpu"}, {"effect", "PreferNoSchedule"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  CreateWorkload(WholeGpuWorkload("team-a", "soft", 1));
  Cycle();
  w = Workloads();
  ASSERT_EQ(status("soft").value("assignments", json::array()).size(), 1u) << Describe(w);
  EXPECT_NE(status("soft")["assignments"][0].value("node", ""), "hgx-a-0");
  EXPECT_EQ(status("packed").value("phase", ""), "Running") << Describe(w);  // (it stays,
  EXPECT_FALSE(status("packed").contains("preemption")) << Describe(w);      // unmarked)

  // Bad taints and tolerations are refused, naming the field; nothing is stored.
  r = taint(json::array({{{"key", "gpu"}, {"effect", "Sometimes"}}}));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.taints[0].effect: 'Sometimes' is not NoSchedule, PreferNoSchedule "
                        "or NoExecute"),
            std::string::npos)
      << r.body;
  r = taint(json::array({{{"key", "gpu"}, {"value", 79}, {"effect", "NoSchedule"}}}));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.taints[0].value: expected a string, got 79"), std::string::npos)
      << r.body;
  json bad = WholeGpuWorkload("team-a", "bad", 1);
  bad["spec"]["tolerations"] = json::array({{{"key", "gpu"}, {"tolerationSeconds", 5}}});
  r = Call("POST", std::string(kApi) + "/namespaces/team-a/workloads", bad.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("tolerations[0].tolerationSeconds: only a NoExecute toleration has "
                        "seconds"),
            std::string::npos)
      << r.body;
  // ... and a running workload's tolerations may not change.
  r = Call("PATCH", WorkloadPath("team-a", "keep"),
           json{{"spec", {{"tolerations", nullptr}}}}.dump(), "application/merge-patch+json");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.tolerations: may only be added to while the workload is"),
            std::string::npos)
      << r.body;
  r = taint(json::array({{{"key", "gpu"}, {"effect", "NoExecute"}, {"timeAdded", "yesterday"}}}));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.taints[0].timeAdded: expected a time"), std::string::npos) << r.body;
  // The date is the server's: one a client gives (that would keep tolerating work for good) is
  // not taken.
  r = taint(json::array(
      {{{"key", "late"}, {"effect", "NoExecute"}, {"timeAdded", "2099-01-01T00:00:00.000Z"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["spec"]["taints"][0]["timeAdded"], FormatTimestamp(clock_.NowMs()));
  ASSERT_EQ(taint(nullptr).status, 200);
  // A node's own agent may not lift what an admin set on it.
  ClientOptions as_node = client_options_;
  as_node.token = node_tokens_["hgx-a-0"];
  HttpClient agent(as_node);
  auto lifted = agent.Do(
      "PATCH", node,
      json{{"spec", {{"taints", json::array({{{"key", "a"}, {"effect", "NoSchedule"}}})}}}}.dump(),
      "application/merge-patch+json");
  ASSERT_TRUE(lifted.ok());
  EXPECT_EQ(lifted->status, 403) << lifted->body;
  EXPECT_NE(lifted->body.find("may not change its own spec.taints"), std::string::npos)
      << lifted->body;
  EXPECT_TRUE(CallJson("GET", node)["spec"].value("taints", json()).is_null());
}

// A gang waiting for its last pods to start (within its gang timeout) has done no work as a
// gang, so preempting it loses none: it goes before running work that would lose some (a
// review: it was costed as if it had run since its first pod started, and the running job,
// younger and as large, was evicted instead).
TEST_F(FactoryTest, AGangWaitingForItsPodsIsTheCheapestVictim) {
  SchedulerOptions so;
  so.gang_timeout_s = 600;
  so.node_grace_ms = 3'600'000;
  so.preemption_grace_ms = 5'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 34}}}}}});
  json gang = WholeGpuWorkload("team-a", "gang", 8, 2);
  gang["spec"]["gang"] = true;
  CreateWorkload(gang);
  ASSERT_TRUE(scheduler_->RunOnce().ok());
  json st = Workloads()["team-a/gang"]["status"];
  ASSERT_EQ(st["assignments"].size(), 2u) << st.dump();
  sim_->StopNode(st["assignments"][1].value("node", ""));
  Cycle(5'000);
  CreateWorkload(WholeGpuWorkload("team-a", "job", 8, 2));
  Cycle(10'000);
  std::map<std::string, json> w = Workloads();
  ASSERT_EQ(w["team-a/gang"]["status"].value("phase", ""), "Running") << Describe(w);
  ASSERT_EQ(w["team-a/gang"]["status"]["startedPods"].size(), 1u) << Describe(w);
  ASSERT_EQ(w["team-a/job"]["status"].value("phase", ""), "Running") << Describe(w);
  json urgent = WholeGpuWorkload("team-a", "urgent", 8);
  urgent["spec"]["priority"] = 100;
  CreateWorkload(urgent);
  Cycle();
  w = Workloads();
  EXPECT_TRUE(w["team-a/gang"]["status"].contains("preemption")) << Describe(w);
  EXPECT_FALSE(w["team-a/job"]["status"].contains("preemption")) << Describe(w);
  EXPECT_NE(w["team-a/urgent"]["status"].value("message", "").find("0 GPU-seconds lost"),
            std::string::npos)
      << Describe(w);
}

// CPU quotas through the API: team-a may hold 32 cores, so of three 16-core workloads two run
// and the third waits, saying why; the queue's status shows the cores guaranteed and used.
TEST_F(FactoryTest, CpuQuotaLimitsWhatAQueueRuns) {
  Metrics metrics;
  SchedulerOptions so;
  so.preemption_grace_ms = 5'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, &metrics);
  CreateQueue("team-a",
              {{"quotas", {{"gpu", {{"guaranteed", 16}}}, {"cpu", {{"guaranteed", 32}}}}}});
  for (int i = 0; i < 3; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "w" + std::to_string(i), 1));
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  int running = 0;
  std::string waiting;
  for (const auto& [name, obj] : w) {
    const std::string phase = obj["status"].value("phase", "");
    if (phase == "Running" || phase == "Scheduled") ++running;
    if (phase == "Pending") waiting = obj["status"].value("message", "");
  }
  EXPECT_EQ(running, 2) << Describe(w);
  EXPECT_NE(waiting.find("queue team-a is at its guarantee of cpu (at the top of its tree, it "
                         "borrows from no one): it would hold 48/32 cores"),
            std::string::npos)
      << Describe(w);
  const json queue = CallJson("GET", std::string(kApi) + "/queues/team-a");
  EXPECT_EQ(queue["status"]["cpu"], (json{{"guaranteed", "32"}, {"used", "32"}})) << queue.dump();
  EXPECT_NE(metrics.Render().find("fabrica_queue_used_cpu_cores{queue=\"team-a\"} 32"),
            std::string::npos)
      << metrics.Render();
}

// A queue's CPU guarantee is taken back from the queue that borrowed it, through the server as
// for GPUs: team-a fills the fleet's 1,120 cores with CPU-only work while team-b is idle; team-b
// then asks for 224 of its 896 and reclaims two of team-a's pods, with the grace period.
TEST_F(FactoryTest, CpuGuaranteeIsReclaimedThroughTheServer) {
  Metrics metrics;
  ASSERT_TRUE(TeamAFillsTheCores(&metrics)) << Describe(Workloads());
  CreateWorkload(CpuOnlyWorkload("team-b", "b-0"));
  CreateWorkload(CpuOnlyWorkload("team-b", "b-1"));
  CycleStats stats = Cycle();
  EXPECT_EQ(stats.preempted, 2) << Describe(Workloads());
  std::map<std::string, json> w = Workloads();
  for (const auto& [name, obj] : w) {
    if (!obj["status"].contains("preemption")) continue;
    EXPECT_EQ(name.rfind("team-a/", 0), 0u) << name;
    EXPECT_NE(obj["status"]["preemption"]
                  .value("reason", "")
                  .find("queue team-b reclaims its guarantee of cpu"),
              std::string::npos)
        << obj.dump();
  }
  // A cycle within the grace period keeps the marks (a review: the re-check of a reclaim
  // called off every CPU-only one at the next cycle, and it began again).
  Cycle(1'000);
  int marked = 0;
  for (const auto& [name, obj] : Workloads()) marked += obj["status"].contains("preemption");
  EXPECT_EQ(marked, 2) << Describe(Workloads());
  Cycle(4'000);
  Cycle();
  w = Workloads();
  EXPECT_EQ(w["team-b/b-0"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-b/b-1"]["status"].value("phase", ""), "Running") << Describe(w);
  const json qa = CallJson("GET", std::string(kApi) + "/queues/team-a");
  EXPECT_EQ(qa["status"]["cpu"], (json{{"guaranteed", "224"}, {"used", "896"}})) << qa.dump();
}

// ... and called off, as a GPU reclaim is, when the guarantee is lowered past what the
// preemptor asks during the grace period: both say which resource (a review: a called-off CPU
// reclaim's message named no resource at all).
TEST_F(FactoryTest, ACpuReclaimIsCalledOffWhenTheCpuGuaranteeIsLowered) {
  ASSERT_TRUE(TeamAFillsTheCores(nullptr)) << Describe(Workloads());
  CreateWorkload(CpuOnlyWorkload("team-b", "b-0"));
  EXPECT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  std::string victim;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption")) victim = name;
  ASSERT_FALSE(victim.empty()) << Describe(Workloads());
  ExpectReclaimCalledOff(victim, R"({"cpu":{"guaranteed":"64"}})", 1'000,
                         "it asks 112 cpu; the guarantee is 64");
  Cycle(5'000);
  Cycle();
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(Workloads()["team-a/a-" + std::to_string(i)]["status"].value("phase", ""), "Running")
        << Describe(Workloads());
}

// A queue tree that does not hold together (here a cycle) stops admission with a message naming
// the problem; nothing crashes, running work keeps running, and fixing the tree resumes
// admission. (The API refuses a write that would break the tree, api_test
// `QueueWritesKeepTheTreeValidAndQueuesInUseStay`, so the cycle is written to the store as a
// store written by hand or by an earlier build might hold it.)
TEST_F(FactoryTest, BrokenQueueTreeHoldsAdmissionWithAReason) {
  CreateWorkload(WholeGpuWorkload("team-a", "running", 1));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  for (const auto& [name, parent] : {std::pair{"loop-a", "loop-b"}, std::pair{"loop-b", "loop-a"}})
    ASSERT_TRUE(store_
                    ->Put(std::string("/registry/queues/") + name,
                          json{{"apiVersion", "fabrica.dev/v1"},
                               {"kind", "Queue"},
                               {"metadata", {{"name", name}}},
                               {"spec", {{"parent", parent}}}}
                              .dump(),
                          kAnyRevision)
                    .ok());
  CreateWorkload(WholeGpuWorkload("team-a", "waits", 1));
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/running"]["status"].value("phase", ""), "Running");
  const json& st = w["team-a/waits"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Pending") << st.dump();
  EXPECT_EQ(st.value("reason", ""), "QueueConfigInvalid") << st.dump();
  EXPECT_NE(st.value("message", "").find("cycle"), std::string::npos) << st.dump();

  EXPECT_NE(st.value("message", "").find("Queue 'loop-"), std::string::npos) << st.dump();

  // (A broken tree does not stop its own repair.)
  ClientResponse r = Call("DELETE", std::string(kApi) + "/queues/loop-a");
  EXPECT_EQ(r.status, 200) << r.body;
  r = Call("DELETE", std::string(kApi) + "/queues/loop-b");
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
}

// A gang admitted through queues whose pods do not start within the gang timeout (here: no
// agent runs them) gives its GPUs back and waits again, with the reason.
TEST_F(FactoryTest, GangThatDoesNotStartInTimeIsReleased) {
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  json gang = GangThatNeverStarts(so);
  gang["spec"]["preemptible"] = false;
  CreateWorkload(gang);
  Cycle();
  EXPECT_EQ(Workloads()["team-a/gang"]["status"].value("phase", ""), "Scheduled");
  // Higher-priority work that needs all 32 GPUs waits: it may not preempt the gang.
  json urgent = WholeGpuWorkload("team-a", "urgent", 8, 4);
  urgent["spec"]["priority"] = 10;
  CreateWorkload(urgent);
  Cycle(10'000);
  EXPECT_EQ(Workloads()["team-a/gang"]["status"].value("phase", ""), "Scheduled");
  EXPECT_EQ(Workloads()["team-a/urgent"]["status"].value("phase", ""), "Pending");
  // 26 s after admission the gang's pods have still not started: it gives its GPUs back, the
  // urgent work takes them, and the gang waits with the reason.
  Cycle(15'000);
  std::map<std::string, json> w = Workloads();
  const json& st = w["team-a/gang"]["status"];
  EXPECT_EQ(st.value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(st.value("reason", ""), "GangTimeout") << st.dump();
  EXPECT_NE(st.value("message", "").find("gang timeout of 20 s"), std::string::npos) << st.dump();
  EXPECT_EQ(w["team-a/urgent"]["status"].value("phase", ""), "Scheduled") << Describe(w);
}

// Nodes that do not report started pods (agents from before status.startedPods): a Running
// gang counts as started and is not released, even one that grew; and a gang marked to stop
// (past its maximum runtime) stops as marked, failing, rather than being released by the gang
// timeout while one of its pods has not started.
TEST_F(FactoryTest, GangTimeoutSparesUnreportedGangsAndMarkedOnes) {
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  so.preemption_grace_ms = 30'000;
  json gang = GangThatNeverStarts(so);
  CreateWorkload(gang);
  json limited = WholeGpuWorkload("team-a", "limited", 8, 2);
  limited["spec"]["gang"] = true;
  limited["spec"]["maxRuntimeSeconds"] = 10;
  CreateWorkload(limited);
  Cycle();
  const std::string now = FormatTimestamp(clock_.NowMs());
  for (const char* name : {"gang", "limited"}) {
    json running = {{"status", {{"phase", "Running"}, {"startTime", now}}}};
    if (name == std::string("gang")) running["status"]["resizedTime"] = now;
    if (name == std::string("limited")) running["status"]["startedPods"] = {{"main-0", now}};
    ClientResponse r = Call("PATCH", WorkloadPath("team-a", name) + "/status", running.dump(),
                            "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  Cycle(12'000);  // limited passes its 10 s: marked to stop 30 s later
  EXPECT_TRUE(Workloads()["team-a/limited"]["status"].contains("preemption"));
  Cycle(13'000);  // past the gang timeout
  std::map<std::string, json> w = Workloads();
  EXPECT_EQ(w["team-a/gang"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/limited"]["status"].value("phase", ""), "Running") << Describe(w);
  Cycle(20'000);
  w = Workloads();
  EXPECT_EQ(w["team-a/limited"]["status"].value("phase", ""), "Failed") << Describe(w);
  EXPECT_EQ(w["team-a/limited"]["status"].value("reason", ""), "MaxRuntimeExceeded");
  EXPECT_EQ(w["team-a/gang"]["status"].value("phase", ""), "Running") << Describe(w);
}

// A gang the timeout keeps releasing backs off, twice as long each time, and past the limit
// is deactivated (Kueue's waitForPodsReady requeuing strategy); set active again, it starts
// counting afresh.
TEST_F(FactoryTest, GangReleasesBackOffAndStopAtTheLimit) {
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  so.gang_requeue_backoff_s = 30;
  so.gang_requeue_limit = 2;
  CreateWorkload(GangThatNeverStarts(so));
  auto status = [&] { return Workloads()["team-a/gang"]["status"]; };
  Cycle();
  ASSERT_EQ(status().value("phase", ""), "Scheduled");
  // Released: it waits 30 s, then 60 s, before it is admitted again.
  for (int release = 1; release <= 2; ++release) {
    SCOPED_TRACE("release " + std::to_string(release));
    Cycle(21'000);
    EXPECT_EQ(status()["requeueState"].value("count", 0), release) << status().dump();
    const int64_t backoff_ms = 30'000LL << (release - 1);
    Cycle(backoff_ms - 2'000);
    EXPECT_EQ(status().value("phase", ""), "Pending") << status().dump();
    EXPECT_EQ(status().value("reason", ""), "Backoff") << status().dump();
    EXPECT_EQ(
        status()
            .value("message", "")
            .rfind("backing off: its gang timed out " + std::to_string(release) + " time(s)", 0),
        0u)
        << status().dump();
    EXPECT_NE(status().value("message", "").find("tries again at"), std::string::npos);
    Cycle(3'000);
    ASSERT_EQ(status().value("phase", ""), "Scheduled") << status().dump();
    EXPECT_EQ(status()["requeueState"].value("count", 0), release) << status().dump();
  }
  // The third release passes the limit of 2: deactivated, and it says why.
  Cycle(21'000);
  Cycle();
  json w = Workloads()["team-a/gang"];
  EXPECT_EQ(w["spec"].value("active", true), false) << w.dump();
  EXPECT_EQ(w["status"].value("reason", ""), "RequeuingLimitExceeded") << w.dump();
  EXPECT_NE(w["status"].value("message", "").find("timed out 3 times"), std::string::npos)
      << w.dump();
  Cycle(600'000);  // (it stays deactivated)
  EXPECT_EQ(status().value("reason", ""), "RequeuingLimitExceeded");
  // Active again: admitted at once, the count cleared.
  ClientResponse r = Call("PATCH", WorkloadPath("team-a", "gang"), R"({"spec":{"active":true}})",
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  EXPECT_EQ(status().value("phase", ""), "Scheduled") << status().dump();
  EXPECT_FALSE(status().contains("requeueState")) << status().dump();
}

// Deactivated by its user while it backs off, a gang starts counting afresh when set active
// again: no backoff, no count.
TEST_F(FactoryTest, DeactivatingABackingOffGangClearsItsCount) {
  SchedulerOptions so;
  so.gang_timeout_s = 20;
  so.gang_requeue_limit = 1;
  CreateWorkload(GangThatNeverStarts(so));
  auto status = [&] { return Workloads()["team-a/gang"]["status"]; };
  auto set_active = [&](bool active) {
    ClientResponse r =
        Call("PATCH", WorkloadPath("team-a", "gang"), json{{"spec", {{"active", active}}}}.dump(),
             "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  };
  Cycle();
  Cycle(21'000);
  ASSERT_EQ(status()["requeueState"].value("count", 0), 1) << status().dump();
  set_active(false);
  Cycle();
  EXPECT_EQ(status().value("reason", ""), "Inactive") << status().dump();
  EXPECT_FALSE(status().contains("requeueState")) << status().dump();
  set_active(true);
  Cycle();
  EXPECT_EQ(status().value("phase", ""), "Scheduled") << status().dump();
  // Its next release is its first again: it backs off rather than being deactivated.
  Cycle(21'000);
  Cycle();
  EXPECT_EQ(status().value("reason", ""), "Backoff") << status().dump();
  EXPECT_EQ(Workloads()["team-a/gang"]["spec"].value("active", false), true);
}

// preemptionPolicy Never (Kubernetes' non-preempting priority), on the workload or from its
// class: it waits ahead of lower priorities but evicts nothing. A globalDefault class gives its
// value to work created without one; there is one at most (a trial found both refused as
// unknown fields).
TEST_F(FactoryTest, NonPreemptingPriorityEvictsNothingAndADefaultClassIsTaken) {
  StartScheduler(30'000);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 34}}}}}});
  const auto create_class = [&](const std::string& name, const json& spec) {
    return Call("POST", std::string(kApi) + "/priorityclasses",
                json{{"apiVersion", "fabrica.dev/v1"},
                     {"kind", "PriorityClass"},
                     {"metadata", {{"name", name}}},
                     {"spec", spec}}
                    .dump());
  };
  ClientResponse r = create_class("batch", {{"value", -10}, {"globalDefault", true}});
  ASSERT_EQ(r.status, 201) << r.body;
  r = create_class("other", {{"value", -5}, {"globalDefault", true}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.globalDefault: priority class 'batch' is the global default"),
            std::string::npos)
      << r.body;
  r = create_class("urgent", {{"value", 100}, {"preemptionPolicy", "Never"}});
  ASSERT_EQ(r.status, 201) << r.body;
  r = create_class("bad", {{"value", 1}, {"preemptionPolicy", "Sometimes"}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.preemptionPolicy: must be PreemptLowerPriority or Never"),
            std::string::npos)
      << r.body;
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "low-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  // (Created without a class: the default's.)
  const json low = Workloads()["team-a/low-0"]["spec"];
  EXPECT_EQ(low.value("priorityClassName", ""), "batch") << low.dump();
  EXPECT_EQ(low.value("priority", 0), -10) << low.dump();
  json hot = WholeGpuWorkload("team-a", "hot", 8);
  hot["spec"]["priorityClassName"] = "urgent";
  CreateWorkload(hot);
  json self = WholeGpuWorkload("team-a", "self", 8);
  self["spec"]["preemptionPolicy"] = "Never";
  CreateWorkload(self);
  EXPECT_EQ(Workloads()["team-a/hot"]["spec"].value("preemptionPolicy", ""), "Never");
  EXPECT_EQ(Workloads()["team-a/self"]["spec"].value("priority", 0), -10);
  EXPECT_EQ(Cycle().preempted, 0) << Describe(Workloads());
  Cycle();
  for (const auto& [name, obj] : Workloads())
    EXPECT_FALSE(obj["status"].contains("preemption")) << name << ": " << obj.dump();
  EXPECT_NE(Workloads()["team-a/hot"]["status"]
                .value("message", "")
                .find("its preemptionPolicy is Never: no work is evicted for it"),
            std::string::npos)
      << Describe(Workloads());
  // Room freed: the non-preempting work goes first, ahead of the lower priority.
  r = Call("DELETE", WorkloadPath("team-a", "low-3"));
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  EXPECT_NE(Workloads()["team-a/hot"]["status"].value("phase", ""), "Pending")
      << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-a/self"]["status"].value("phase", ""), "Pending");
}

// A victim of a priority preemption in its queue runs on when, during the grace period, the
// preemptor no longer outranks it (a trial lowered the preemptor's priority: the victim was
// evicted all the same, and on its return evicted the preemptor in turn).
TEST_F(FactoryTest, APriorityPreemptionIsCalledOffWhenThePreemptorNoLongerOutranks) {
  // The preemptor lowered, or the victim raised (a write to a workload being evicted: a trial
  // found every one refused, its status.preemption.basis unknown to the API).
  for (const bool raise_victim : {false, true}) {
    SCOPED_TRACE(raise_victim ? "victim raised" : "preemptor lowered");
    DeleteWorkloads(Workloads(), {"team-a"});
    Cycle();
    StartScheduler(30'000);
    if (!raise_victim) {
      CreateQueue("org", json::object());
      CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 34}}}}}});
    }
    for (int i = 0; i < 4; ++i) {
      json w = WholeGpuWorkload("team-a", "low-" + std::to_string(i), 8);
      w["spec"]["priority"] = -10;
      CreateWorkload(w);
    }
    ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
    CreateWorkload(WholeGpuWorkload("team-a", "hot", 8));
    Cycle();
    std::string victim;
    for (const auto& [name, obj] : Workloads())
      if (obj["status"].contains("preemption")) victim = name;
    ASSERT_FALSE(victim.empty()) << Describe(Workloads());
    EXPECT_EQ(Workloads()[victim]["status"]["preemption"].value("basis", ""), "Priority");
    const std::string target = raise_victim ? victim.substr(victim.find('/') + 1) : "hot";
    ClientResponse r =
        Call("PATCH", WorkloadPath("team-a", target),
             raise_victim ? R"({"spec":{"priority":0}})" : R"({"spec":{"priority":-20}})",
             "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
    Cycle();
    const json st = Workloads()[victim]["status"];
    EXPECT_FALSE(st.contains("preemption")) << st.dump();
    EXPECT_EQ(
        st.value("message", "")
            .rfind(std::string("eviction cancelled: its preemptor team-a/hot no longer outranks it "
                               "(priority ") +
                       (raise_victim ? "0 to its 0" : "-20 to its -10") + "); running on ",
                   0),
        0u)
        << st.dump();
    // The preemptor is told, unless it preempts another instead (the victim raised: one of
    // the others it still outranks).
    const std::string said = Workloads()["team-a/hot"]["status"].value("message", "");
    if (!raise_victim)
      EXPECT_EQ(said.rfind("its preemption of " + victim +
                               " is called off: it no longer outranks it (priority -20 to its "
                               "-10); ",
                           0),
                0u)
          << said;
    else
      EXPECT_EQ(said.rfind("preempting", 0), 0u) << said;
    // Past the grace period: the victim runs on. (Lowered, the preemptor outranks none and
    // waits; the victim raised, it goes on to preempt one of the others it still outranks.)
    Cycle(31'000);
    Cycle();
    EXPECT_EQ(Workloads()[victim]["status"].value("phase", ""), "Running") << Describe(Workloads());
    if (!raise_victim) {
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(Workloads()["team-a/low-" + std::to_string(i)]["status"].value("phase", ""),
                  "Running")
            << Describe(Workloads());
      EXPECT_EQ(Workloads()["team-a/hot"]["status"].value("phase", ""), "Pending");
    }
  }
}

// A reclaim's victims run on when, during the grace period, the preemptor's queue may no
// longer reclaim for it (a trial lowered its guarantee: all its victims were evicted, and then
// the preemptor, past its queue's guarantee, was never placed).
TEST_F(FactoryTest, AReclaimIsCalledOffWhenItsQueueNoLongerHasTheGuarantee) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());
  std::string victim;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption")) victim = name;
  ASSERT_FALSE(victim.empty()) << Describe(Workloads());
  EXPECT_EQ(Workloads()[victim]["status"]["preemption"].value("basis", ""), "Reclaim");
  ExpectReclaimCalledOff(victim, R"({"gpu":{"guaranteed":0}})", 1'000,
                         "it asks 8 GPUs; the guarantee is 0 in flavour gpu");
  // Past the grace period: nothing was evicted, and b-0 waits.
  Cycle(6'000);
  Cycle();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(Workloads()["team-a/a-" + std::to_string(i)]["status"].value("phase", ""), "Running")
        << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"].value("phase", ""), "Pending");
}

// Work a consolidation moves keeps the place it was moved to (a user-style trial: a newer job
// took that room in the grace period, and the moved work waited for good): held while it
// stops, and it is pending again in the cycle it stops, so it is placed before newer work.
// Eight 4-GPU workloads fill the four nodes; one leaves each of two nodes; `big` (8 GPUs)
// needs one moved.
TEST_F(FactoryTest, WorkAConsolidationMovesKeepsThePlaceItWasMovedTo) {
  StartScheduler(5'000);
  CreateQueue("team-a", {{"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  for (int i = 0; i < 8; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "a-" + std::to_string(i), 4));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  std::set<std::string> freed;
  for (const auto& [key, obj] : Workloads()) {
    const std::string node = obj["status"]["assignments"][0].value("node", "");
    if (freed.size() == 2 || freed.count(node)) continue;
    freed.insert(node);
    ClientResponse r = Call("DELETE", WorkloadPath("team-a", key.substr(key.find('/') + 1)));
    ASSERT_LT(r.status, 300) << r.body;
  }
  Cycle();
  CreateWorkload(WholeGpuWorkload("team-a", "big", 8));
  ASSERT_EQ(Cycle().preempted, 1) << Describe(Workloads());
  std::string mover;
  for (const auto& [key, obj] : Workloads())
    if (obj["status"].contains("preemption")) mover = key;
  ASSERT_FALSE(mover.empty()) << Describe(Workloads());
  EXPECT_EQ(Workloads()[mover]["status"]["preemption"].value("basis", ""), "Move");
  CreateWorkload(WholeGpuWorkload("team-a", "z", 4));
  Cycle();
  EXPECT_EQ(Workloads()["team-a/z"]["status"].value("phase", ""), "Pending")
      << Describe(Workloads());
  Cycle(5'000);  // past the grace period
  Cycle();
  EXPECT_EQ(Workloads()["team-a/big"]["status"].value("phase", ""), "Running")
      << Describe(Workloads());
  EXPECT_EQ(Workloads()[mover]["status"].value("phase", ""), "Running") << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-a/z"]["status"].value("phase", ""), "Pending")
      << Describe(Workloads());
}

// A preemptor whose reclaim is called off holds nothing for the rest of that cycle: work of
// its queue that the lowered guarantee still holds reclaims in the same cycle (the called-off
// preemptor had stayed nominated, its plan held, until the next).
TEST_F(FactoryTest, APreemptorWhoseReclaimIsCalledOffHoldsNothingThatCycle) {
  ASSERT_TRUE(TeamBReclaimsFromTeamA()) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-b", "b-small", 4));
  SetGpuGuarantee("team-b", 4);
  const CycleStats stats = Cycle(1'000);
  EXPECT_EQ(Workloads()["team-b/b-0"]["status"]
                .value("message", "")
                .rfind("its preemption is called off", 0),
            0u)
      << Describe(Workloads());
  EXPECT_EQ(stats.preempted, 1) << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-b/b-small"]["status"].value("message", "").rfind("preempting 1", 0),
            0u)
      << Describe(Workloads());
  EXPECT_FALSE(Workloads()["team-b/b-small"]["status"].contains("swap")) << Describe(Workloads());
}

// A preemptor whose eviction of one victim is called off gives the others up too, and plans
// anew: its plan was made for them all (a re-trial lowered a preemptor below one of its two
// victims; the other was evicted all the same, and the preemptor, short of room, never ran).
TEST_F(FactoryTest, APreemptorThatLosesOneVictimGivesUpTheOthers) {
  StartScheduler(30'000);
  CreateQueue("org", json::object());
  CreateQueue("team-a", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 32}}}}}});
  for (const auto& [name, priority] :
       std::vector<std::pair<std::string, int>>{{"l1", 5}, {"l2", 8}, {"f1", 20}, {"f2", 20}}) {
    json w = WholeGpuWorkload("team-a", name, 8);
    w["spec"]["priority"] = priority;
    CreateWorkload(w);
  }
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  json h2 = WholeGpuWorkload("team-a", "h2", 8, 2);
  h2["spec"]["priority"] = 10;
  CreateWorkload(h2);
  Cycle();
  ASSERT_TRUE(Workloads()["team-a/l1"]["status"].contains("preemption")) << Describe(Workloads());
  ASSERT_TRUE(Workloads()["team-a/l2"]["status"].contains("preemption")) << Describe(Workloads());
  ClientResponse r = Call("PATCH", WorkloadPath("team-a", "h2"), R"({"spec":{"priority":6}})",
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  std::map<std::string, json> w = Workloads();
  EXPECT_FALSE(w["team-a/l2"]["status"].contains("preemption")) << Describe(w);
  EXPECT_FALSE(w["team-a/l1"]["status"].contains("preemption")) << Describe(w);
  EXPECT_EQ(w["team-a/l1"]["status"]
                .value("message", "")
                .rfind("eviction cancelled: its preemptor team-a/h2 plans anew: its eviction of "
                       "another was called off; running on ",
                       0),
            0u)
      << Describe(w);
  EXPECT_EQ(
      w["team-a/h2"]["status"]
          .value("message", "")
          .rfind("its preemption of team-a/l2 is called off: it no longer outranks it (priority 6 "
                 "to its 8); so is its preemption of team-a/l1, made with it; ",
                 0),
      0u)
      << Describe(w);
  // Past the grace period all four run on, and h2 waits.
  Cycle(31'000);
  Cycle();
  for (const char* name : {"team-a/l1", "team-a/l2", "team-a/f1", "team-a/f2"})
    EXPECT_EQ(Workloads()[name]["status"].value("phase", ""), "Running") << Describe(Workloads());
  EXPECT_EQ(Workloads()["team-a/h2"]["status"].value("phase", ""), "Pending");
  // ... still saying what was called off, and when (a re-trial read only why it waits, a cycle
  // on).
  const std::string later = Workloads()["team-a/h2"]["status"].value("message", "");
  EXPECT_EQ(later.rfind("at 20", 0), 0u) << later;
  EXPECT_NE(later.find("Z, its preemption of team-a/l2 is called off: it no longer outranks it"),
            std::string::npos)
      << later;
}

// Reclaims called off when, together, the lowered guarantee no longer holds them, though each
// alone is within it (a re-trial: two reclaims of 1 and 2 GPUs went on after the guarantee
// went from 4 to 2, and the queue ended at 3 of its 2).
TEST_F(FactoryTest, ReclaimsTogetherPastALoweredGuaranteeAreCalledOff) {
  StartScheduler(5'000);
  CreateTeamQueues(16, 16);
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  CreateWorkload(WholeGpuWorkload("team-a", "a-1", 8));
  CreateWorkload(WholeGpuWorkload("team-a", "a-2", 8));
  ASSERT_EQ(Cycle().preempted, 2) << Describe(Workloads());
  ClientResponse r =
      Call("PATCH", std::string(kApi) + "/queues/team-a",
           R"({"spec":{"quotas":{"gpu":{"guaranteed":8}}}})", "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  std::map<std::string, json> w = Workloads();
  int marked = 0;
  for (int i = 0; i < 4; ++i)
    marked += w["team-b/b-" + std::to_string(i)]["status"].contains("preemption");
  EXPECT_EQ(marked, 1) << Describe(w);
  EXPECT_EQ(w["team-a/a-2"]["status"].value("message", ""),
            "its preemption is called off: queue team-a's guarantee no longer holds it (it asks 8 "
            "GPUs, beside the 8 its queue's other reclaims ask; the guarantee is 8 in flavour "
            "gpu)")
      << Describe(w);
  // Past the grace period: a-1 runs, team-a at its 8; a-2 waits.
  Cycle(5'000);
  Cycle();
  w = Workloads();
  EXPECT_EQ(w["team-a/a-1"]["status"].value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(w["team-a/a-2"]["status"].value("phase", ""), "Pending") << Describe(w);
  EXPECT_EQ(CallJson("GET", std::string(kApi) + "/queues/team-a")["status"].value("usedGpus", ""),
            "8");
}

// A victim whose preemptor is deleted during the grace period is not evicted after all.
TEST_F(FactoryTest, PreemptionIsCalledOffWhenThePreemptorGoes) {
  SchedulerOptions so;
  so.preemption_grace_ms = 30'000;
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, so, nullptr);
  CreateTeamQueues(16, 8);
  // team-b borrows up to the root's 24 guaranteed GPUs: three of its four run.
  for (int i = 0; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  Cycle();
  Cycle();
  // team-a asks for its 16: 8 are free, 8 must be reclaimed.
  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8, 2));
  Cycle();
  std::string victim;
  for (const auto& [name, obj] : Workloads())
    if (obj["status"].contains("preemption")) victim = name;
  ASSERT_FALSE(victim.empty()) << Describe(Workloads());
  ClientResponse r = Call("DELETE", WorkloadPath("team-a", "a-0"));
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  const json st = Workloads()[victim]["status"];
  EXPECT_FALSE(st.contains("preemption")) << st.dump();
  for (const json& c : st.value("conditions", json::array()))
    EXPECT_NE(c.value("type", ""), "Preempted") << st.dump();
  // Its message no longer says it stops (a user-style review found "preempted by ...; stops at"
  // long past that time), but why it runs on; and its events say so (a user-style review: the
  // last event said Evicting while it ran on).
  EXPECT_EQ(st.value("message", ""),
            "eviction cancelled: its preemptor team-a/a-0 no longer waits for it; running on " +
                st["assignments"][0].value("node", ""))
      << st.dump();
  const size_t slash = victim.find('/');
  const json events = CallJson("GET", std::string(kApi) + "/namespaces/" + victim.substr(0, slash) +
                                          "/events?fieldSelector=involvedObject.name%3D" +
                                          victim.substr(slash + 1));
  ASSERT_FALSE(events.value("items", json::array()).empty()) << events.dump();
  const json& last = events["items"].back();
  EXPECT_EQ(last.value("reason", ""), "EvictionCancelled") << events.dump();
  EXPECT_EQ(last.value("type", ""), "Normal") << events.dump();
  EXPECT_EQ(last.value("message", "").rfind("its preemptor team-a/a-0 no longer waits", 0), 0u)
      << events.dump();
  Cycle(40'000);  // past the old deadline: still running
  EXPECT_EQ(Workloads()[victim]["status"].value("phase", ""), "Running");
}

// The server rebuilds its Admitter every cycle, so a preemptor's plan lives in its status
// (status.nomination): while its victim stops, the free part of the planned node is held for it,
// and once the victim has gone it takes that node. Here team-a's 8-GPU workload plans on the node
// where team-b's 6-GPU workload runs beside 2 free GPUs; team-c, within its guarantee, then asks
// for 2 GPUs. Without the held room it took those two, and team-a evicted a second workload.
TEST_F(FactoryTest, PreemptorsPlannedRoomIsHeldAcrossCycles) {
  CreateTeamQueues(16, 8);
  CreateQueue("team-c", {{"parent", "org"}, {"quotas", {{"gpu", {{"guaranteed", 8}}}}}});
  for (int i = 1; i < 4; ++i)
    CreateWorkload(WholeGpuWorkload("team-b", "b-" + std::to_string(i), 8));
  Cycle();
  CreateWorkload(WholeGpuWorkload("team-b", "b-0", 6));  // the newest, the cheapest victim
  Cycle();
  Cycle();
  std::map<std::string, json> w = Workloads();
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(w["team-b/b-" + std::to_string(i)]["status"].value("phase", ""), "Running")
        << Describe(w);
  }
  const std::string x = w["team-b/b-0"]["status"]["assignments"][0].value("node", "");

  CreateWorkload(WholeGpuWorkload("team-a", "a-0", 8));
  Cycle();
  w = Workloads();
  ASSERT_TRUE(w["team-b/b-0"]["status"].contains("preemption")) << Describe(w);
  ASSERT_EQ(w["team-b/b-0"]["status"]["preemption"].value("by", ""), "team-a/a-0") << Describe(w);
  const json& nomination = w["team-a/a-0"]["status"]["nomination"];
  ASSERT_EQ(nomination.size(), 1u) << Describe(w);
  EXPECT_EQ(nomination[0].value("node", ""), x);

  CreateWorkload(WholeGpuWorkload("team-c", "c-0", 2));
  Cycle();
  Cycle(31'000);  // past the victim's grace period
  Cycle();
  Cycle();
  w = Workloads();
  const json& a = w["team-a/a-0"]["status"];
  ASSERT_EQ(a.value("phase", ""), "Running") << Describe(w);
  EXPECT_EQ(a["assignments"][0].value("node", ""), x) << Describe(w);
  int evicted_for_a = 0;
  for (const auto& [name, obj] : w) {
    const json& st = obj["status"];
    if (st.contains("preemption") && st["preemption"].value("by", "") == "team-a/a-0")
      ++evicted_for_a;
    if (name == "team-c/c-0" && st.contains("assignments")) {
      EXPECT_NE(st["assignments"][0].value("node", ""), x) << Describe(w);
    }
  }
  EXPECT_EQ(evicted_for_a, 0) << Describe(w);
  // The victim waits in its queue (team-c's reclaim freed more than it needed, which the
  // reclaim hold keeps from team-b for a while), and not on x.
  const json& b0 = w["team-b/b-0"]["status"];
  if (b0.contains("assignments")) {
    EXPECT_NE(b0["assignments"][0].value("node", ""), x) << Describe(w);
  }
}

// A node whose agent declares a longer lease than the server's grace (renewing rarely) stays
// Ready, and keeps its work, until that lease runs out (a user-style review found an agent with
// a 600 s lease sent to repair after 40 s).
TEST_F(FactoryTest, ANodesOwnLongerLeaseKeepsItReady) {
  CreateWorkload(WholeGpuWorkload("team-a", "job", 2));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const std::string node = Workloads()["team-a/job"]["status"]["assignments"][0].value("node", "");
  ASSERT_FALSE(node.empty());
  sim_->StopNode(node);
  const std::string key = "/registry/leases/" + node;
  auto kv = store_->Get(key);
  ASSERT_TRUE(kv.ok());
  json lease = json::parse(kv->value);
  lease["spec"]["leaseDurationSeconds"] = 600;
  ASSERT_TRUE(store_->Put(key, lease.dump(), kv->mod_revision).ok());
  int requeued = 0;
  for (int i = 0; i < 5; ++i) requeued += Cycle(100'000).requeued;  // 500 s
  EXPECT_EQ(requeued, 0);
  EXPECT_EQ(Workloads()["team-a/job"]["status"].value("phase", ""), "Running");
  for (int i = 0; i < 3; ++i) requeued += Cycle(50'000).requeued;  // past 600 s
  EXPECT_EQ(requeued, 1);
}

// An admin relays out a MIG GPU under a running slice: the workload is requeued for that, not
// told its node was lost (a trial's node stayed Ready throughout).
TEST_F(FactoryTest, ASliceWhoseMigLayoutChangedUnderItIsRequeuedSayingSo) {
  json slice = WholeGpuWorkload("team-c", "slice", 1);
  slice["spec"]["podSets"][0]["devices"] = {{"mig", "1g.10gb"}};
  CreateWorkload(slice);
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const json held = Workloads()["team-c/slice"]["status"]["assignments"][0];
  const std::string node = held.value("node", "");
  const int gpu = held["devices"][0].value("index", -1);
  json n = CallJson("GET", std::string(kApi) + "/nodes/" + node);
  ASSERT_TRUE(n["spec"]["devices"].is_array()) << n.dump();
  n["spec"]["devices"][gpu]["mig"] = {"4g.40gb", "3g.40gb"};
  ClientResponse r = Call("PATCH", std::string(kApi) + "/nodes/" + node,
                          json{{"spec", {{"devices", n["spec"]["devices"]}}}}.dump(),
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Cycle();
  const json status = Workloads()["team-c/slice"]["status"];
  EXPECT_EQ(status.value("reason", ""), "DevicesChanged") << status.dump();
  EXPECT_NE(status.value("message", "")
                .find("the MIG layout of GPU " + std::to_string(gpu) + " of node " + node +
                      " changed under it"),
            std::string::npos)
      << status.dump();
}

TEST_F(FactoryTest, LostNodesWorkloadsAreRequeued) {
  for (int i = 0; i < 3; ++i)
    CreateWorkload(WholeGpuWorkload("team-a", "job-" + std::to_string(i), 2));
  CreateWorkload(WholeGpuWorkload("partner-x", "partner", 1));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());

  // Stop the node that runs the most.
  std::map<std::string, std::set<std::string>> on_node;
  for (const auto& [name, obj] : Workloads()) {
    on_node[obj["status"]["assignments"][0].value("node", "")].insert(name);
  }
  std::string lost;
  for (const auto& [node, names] : on_node) {
    if (lost.empty() || names.size() > on_node[lost].size()) lost = node;
  }
  ASSERT_FALSE(lost.empty());
  const std::set<std::string> victims = on_node[lost];
  sim_->StopNode(lost);

  // Within the grace period (40 s) nothing moves.
  for (int i = 0; i < 2; ++i) Cycle(10'000);
  for (const auto& [name, obj] : Workloads()) {
    EXPECT_EQ(obj["status"].value("phase", ""), "Running") << name;
  }

  // Past it, the scheduler requeues what ran there (Pending, NodeLost) and leaves the rest.
  clock_.AdvanceMs(25'000);
  ASSERT_TRUE(sim_->Tick().ok());
  auto stats = scheduler_->RunOnce();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->requeued, static_cast<int>(victims.size()));
  // The lost node's Ready condition turned False; a live one stays True.
  auto ready_of = [&](const std::string& node) {
    json n = CallJson("GET", std::string(kApi) + "/nodes/" + node);
    for (const json& c : n["status"]["conditions"]) {
      if (c.value("type", "") == "Ready") return c.value("status", "");
    }
    return std::string("missing");
  };
  EXPECT_EQ(ready_of(lost), "False");
  for (const auto& [node, names] : on_node) {
    if (node != lost) {
      EXPECT_EQ(ready_of(node), "True") << node;
    }
  }
  for (const auto& [name, obj] : Workloads()) {
    const json& status = obj["status"];
    if (victims.count(name)) {
      EXPECT_EQ(status.value("phase", ""), "Pending") << name;
      EXPECT_EQ(status.value("reason", ""), "NodeLost") << name;
    } else {
      EXPECT_EQ(status.value("phase", ""), "Running") << name;
    }
  }

  // The next cycles place them elsewhere, and the live nodes start them.
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  for (const auto& [name, obj] : Workloads()) {
    for (const json& a : obj["status"]["assignments"]) {
      EXPECT_NE(a.value("node", ""), lost) << name << " is still on the lost node";
    }
    // What happened to it stays in its status once it runs again (status.evictions).
    const json evictions = obj["status"].value("evictions", json());
    if (!victims.count(name)) {
      EXPECT_TRUE(evictions.is_null()) << name << ": " << evictions.dump();
      continue;
    }
    EXPECT_EQ(evictions.value("count", 0), 1) << name << ": " << evictions.dump();
    EXPECT_EQ(evictions["last"].value("reason", ""), "NodeLost") << evictions.dump();
  }
}

// A node writes its workloads' status; whatever it writes must neither crash the scheduler nor
// hide every workload from every other node.
TEST_F(FactoryTest, MalformedStatusIsRejectedAndHarmless) {
  CreateWorkload(WholeGpuWorkload("team-a", "job", 1));
  ASSERT_TRUE(CycleUntilAll("Running")) << Describe(Workloads());
  const std::string node = Workloads()["team-a/job"]["status"]["assignments"][0].value("node", "");
  ClientOptions as_node = client_options_;
  as_node.token = node_tokens_[node];
  HttpClient agent(as_node);
  auto r = agent.Do("PATCH", WorkloadPath("team-a", "job") + "/status",
                    R"({"status":{"assignments":[{"node":5,"devices":[]}]}})",
                    "application/merge-patch+json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 422) << r->body;
  EXPECT_NO_THROW((void)scheduler_->RunOnce());
  EXPECT_TRUE(sim_->Tick().ok());
}

// durationSeconds is a number; the simulated agents read it as one.
TEST_F(FactoryTest, AgentsSurviveADurationGivenAsAString) {
  json w = WholeGpuWorkload("team-a", "job", 1);
  w["spec"]["run"]["durationSeconds"] = "600";
  ClientResponse r = Call("POST", WorkloadPath("team-a"), w.dump());
  if (r.status != 201) {
    EXPECT_EQ(r.status, 422) << r.body;
    return;
  }
  EXPECT_NO_THROW({
    for (int i = 0; i < 3; ++i) Cycle();
  });
}

// ---------------------------------------------------------------------------------------------
// Durability of acknowledged writes across a SIGKILL of the real server.

using test::FreePort;

// `fabrica server` as a child process, plain HTTP on a free port.
class ServerProcess {
 public:
  ServerProcess(std::string data, std::string auth_file, std::vector<std::string> extra = {})
      : data_(std::move(data)), auth_file_(std::move(auth_file)), extra_(std::move(extra)) {}
  ~ServerProcess() { Kill(SIGKILL); }

  // Starts the server and waits until /healthz answers; retries on another port when the chosen
  // one was taken meanwhile.
  bool Start() {
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreePort();
      const std::string listen = "127.0.0.1:" + std::to_string(port_);
      const std::string log = data_ + "/server-" + std::to_string(starts_++) + ".log";
      std::vector<std::string> args = {"server", "--data",       data_,    "--listen",
                                       listen,   "--plain-http", "--auth", auth_file_};
      args.insert(args.end(), extra_.begin(), extra_.end());
      child_.Start(FABRICA_BIN, args, log);
      HttpClient probe(Options(""));
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (std::chrono::steady_clock::now() < deadline) {
        auto r = probe.Do("GET", "/healthz");
        if (r.ok() && r->status == 200) return true;
        if (!child_.Alive()) break;  // exited: most likely the port was taken
        std::this_thread::sleep_for(20ms);
      }
      Kill(SIGKILL);
    }
    return false;
  }

  // Sends `signal` and reaps the process; returns its wait status (or -1 if none ran).
  int Kill(int signal) { return child_.Kill(signal); }
  // Whether the process is still running (reaps it if not).
  bool Alive() { return child_.Alive(); }

  ClientOptions Options(const std::string& token) const {
    ClientOptions o;
    o.server = "http://127.0.0.1:" + std::to_string(port_);
    o.token = token;
    o.timeout_seconds = 10;
    return o;
  }

 private:
  std::string data_;
  std::string auth_file_;
  std::vector<std::string> extra_;
  int port_ = 0;
  test::ChildProcess child_;
  int starts_ = 0;
};

// Every workload's spec is derived from its name, so that the check after the restart needs
// nothing but the names.
json DurableWorkload(const std::string& name, int thread, int i) {
  json w = WholeGpuWorkload("team-a", name, 1 + i % 8);
  w["metadata"]["labels"] = {{"writer", "t" + std::to_string(thread)}};
  w["spec"]["priority"] = i;
  w["spec"]["run"]["command"] = {"job", name, std::to_string(i * 7919)};
  return w;
}

TEST(RunningMessageTest, NamesTheNodesItsPodsRunOn) {
  auto status = [](std::vector<std::string> nodes) {
    json a = json::array();
    for (size_t i = 0; i < nodes.size(); ++i)
      a.push_back({{"pod", "main-" + std::to_string(i)}, {"node", nodes[i]}});
    return json{{"assignments", a}};
  };
  EXPECT_EQ(RunningMessage(status({"n-0"})), "running on n-0");
  EXPECT_EQ(RunningMessage(status({"n-0", "n-0", ""})), "running on n-0");
  EXPECT_EQ(RunningMessage(status({"n-1", "n-0", "n-1"})), "running on 2 nodes: n-1, n-0");
  EXPECT_EQ(RunningMessage(status({"a", "b", "c", "d", "e"})), "running on 5 nodes: a, b, c, ...");
  EXPECT_EQ(RunningMessage(json::object()), "running");
}

TEST(DurabilityTest, AcknowledgedCreatesSurviveSigkill) {
  TempDir dir;
  const std::string auth_file = dir.File("auth.yaml");
  {
    std::ofstream out(auth_file);
    out << kAuthYaml;
  }
  const std::string data = dir.File("data");
  ServerProcess server(data, auth_file);
  ASSERT_TRUE(server.Start()) << ReadFile(data + "/server-0.log");
  {
    HttpClient admin(server.Options(kAdminToken));
    json t = {{"apiVersion", "fabrica.dev/v1"},
              {"kind", "Tenant"},
              {"metadata", {{"name", "team-a"}}},
              {"spec", {{"trust", "trusted"}}}};
    auto r = admin.Do("POST", std::string(kApi) + "/tenants", t.dump());
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->status, 201) << r->body;
  }

  // Four writers as fast as they can; each records the names the server acknowledged (201).
  std::mutex mu;
  std::map<std::string, json> acknowledged;  // name -> the object sent
  std::atomic<int> count{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      HttpClient client(server.Options(kAdminToken));
      for (int i = 0; !stop; ++i) {
        const std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        const json w = DurableWorkload(name, t, i);
        auto r = client.Do("POST", WorkloadPath("team-a"), w.dump());
        if (!r.ok()) break;  // the server is gone
        if (r->status != 201) {
          ADD_FAILURE() << name << ": " << r->status << " " << r->body;
          break;
        }
        std::lock_guard<std::mutex> lock(mu);
        acknowledged[name] = w;
        ++count;
      }
    });
  }
  // Kill at a random moment after about two hundred creations.
  std::mt19937 rng(std::random_device{}());
  const int kill_after = 200 + static_cast<int>(rng() % 60);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (count < kill_after && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 800));
  }
  const int status = server.Kill(SIGKILL);
  stop = true;
  for (std::thread& t : writers) t.join();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_GE(count.load(), kill_after) << "the writers were too slow";

  // Restart on the same data directory: every acknowledged workload is there, spec intact.
  ASSERT_TRUE(server.Start()) << ReadFile(data + "/server-1.log");
  HttpClient admin(server.Options(kAdminToken));
  auto r = admin.Do("GET", WorkloadPath("team-a"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->status, 200) << r->body;
  json list = json::parse(r->body, nullptr, false);
  ASSERT_FALSE(list.is_discarded());
  std::map<std::string, json> stored;
  for (const json& item : list["items"]) stored[item["metadata"].value("name", "")] = item;
  int missing = 0;
  for (const auto& [name, sent] : acknowledged) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      ++missing;
      ADD_FAILURE() << name << " was acknowledged but is gone after the restart";
      continue;
    }
    EXPECT_EQ(it->second["spec"], sent["spec"]) << name;
    EXPECT_EQ(it->second["metadata"]["labels"], sent["metadata"]["labels"]) << name;
  }
  EXPECT_EQ(missing, 0);
  // At most the creates in flight at the kill (one per writer) may exist unacknowledged.
  EXPECT_LE(stored.size(), acknowledged.size() + 4);
  std::cout << "acknowledged " << acknowledged.size() << " creates before SIGKILL (planned at "
            << kill_after << "); " << stored.size() << " stored after restart\n";

  // A clean shutdown this time.
  const int clean = server.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(clean) && WEXITSTATUS(clean) == 0) << "status " << clean << "\n"
                                                           << ReadFile(data + "/server-1.log");
}

}  // namespace
}  // namespace fabrica

namespace fabrica {
namespace {

// An auth file with the e2e admin and alice, team-a's tenant admin; returns its path.
std::string WriteE2eAuth(const TempDir& dir) {
  const std::string auth_file = dir.File("auth.yaml");
  std::ofstream out(auth_file);
  out << "tokens:\n"
         "  - {token: admin-token-e2e-0123456789, user: admin}\n"
         "  - {token: alice-token-e2e-0123456789, user: alice}\n"
         "bindings:\n"
         "  - {role: platform-admin, user: admin}\n"
         "  - {role: tenant-admin, tenant: team-a, user: alice}\n";
  return auth_file;
}

// Whatever a user writes to a workload's status, the server's scheduler must not die of it.
TEST(ServerProcessTest, StatusWritesCannotCrashTheServer) {
  TempDir dir;
  const std::string auth_file = WriteE2eAuth(dir);
  const std::string data = dir.File("data");
  ServerProcess server(data, auth_file);
  ASSERT_TRUE(server.Start()) << ReadFile(data + "/server-0.log");
  HttpClient admin(server.Options(kAdminToken));
  auto tenant = admin.Do("POST", std::string(kApi) + "/tenants",
                         R"({"metadata":{"name":"team-a"},"spec":{"trust":"trusted"}})");
  ASSERT_TRUE(tenant.ok());
  ASSERT_EQ(tenant->status, 201) << tenant->body;
  HttpClient alice(server.Options("alice-token-e2e-0123456789"));
  auto created =
      alice.Do("POST", WorkloadPath("team-a"), WholeGpuWorkload("team-a", "w", 1).dump());
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->status, 201) << created->body;
  json obj = json::parse(created->body);
  obj["status"] = {{"phase", 5}};
  // Neither a tenant user (who may not write status at all) nor the admin gets it stored.
  for (HttpClient* client : {&alice, &admin}) {
    auto r = client->Do("PUT", WorkloadPath("team-a", "w") + "/status", obj.dump());
    ASSERT_TRUE(r.ok());
    EXPECT_LT(r->status, 500) << r->body;
    EXPECT_GE(r->status, 400) << r->body;
  }
  // The scheduler runs every second at time scale 1.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(server.Alive()) << ReadFile(data + "/server-0.log");
}

// A server on virtual time (--time-scale, as `fabrica up` runs) carries its clock on across a
// restart, even one that kills it: nothing it stamps afterwards is earlier than what it stamped
// before (a review acting as a user saw a restarted factory's clock go back 40 minutes).
TEST(ServerProcessTest, VirtualTimeCarriesOnAcrossARestart) {
  TempDir dir;
  const std::string auth_file = WriteE2eAuth(dir);
  const std::string data = dir.File("data");
  ServerProcess server(data, auth_file, {"--time-scale", "600"});
  ASSERT_TRUE(server.Start()) << ReadFile(data + "/server-0.log");
  auto created_at = [&](const std::string& name) -> int64_t {
    HttpClient admin(server.Options(kAdminToken));
    auto r =
        admin.Do("POST", std::string(kApi) + "/tenants",
                 json{{"metadata", {{"name", name}}}, {"spec", {{"trust", "trusted"}}}}.dump());
    if (!r.ok() || r->status != 201) return -1;
    return ParseTimestamp(json::parse(r->body)["metadata"].value("creationTimestamp", ""));
  };
  const int64_t first = created_at("a");
  std::this_thread::sleep_for(1500ms);  // 15 virtual minutes
  const int64_t before = created_at("b");
  ASSERT_GE(before, first + 600'000);
  server.Kill(SIGKILL);
  ASSERT_TRUE(server.Start()) << ReadFile(data + "/server-1.log");
  const int64_t resumed = created_at("c");
  EXPECT_GE(resumed, before);
  // Started again in real time (scale 1) it carries on from there too, twice, rather than go
  // back to the wall clock behind every time it stamped (a user-style review found it did).
  server.Kill(SIGKILL);
  for (const char* name : {"d", "e"}) {
    ServerProcess real_time(data, auth_file, {});
    ASSERT_TRUE(real_time.Start()) << ReadFile(data + "/server-0.log");
    HttpClient admin(real_time.Options(kAdminToken));
    auto r =
        admin.Do("POST", std::string(kApi) + "/tenants",
                 json{{"metadata", {{"name", name}}}, {"spec", {{"trust", "trusted"}}}}.dump());
    ASSERT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().message());
    EXPECT_GE(ParseTimestamp(json::parse(r->body)["metadata"].value("creationTimestamp", "")),
              resumed)
        << name;
    std::this_thread::sleep_for(1200ms);  // (the clock is saved each wall second)
    real_time.Kill(SIGKILL);
  }
}

// The local factory as users run it: `fabrica up --time-scale 100` (simulated nodes, example
// tenants, embedded prices) runs the demo for an hour of virtual time, and
// /allocation?aggregate=namespace gives each tenant the GPU-hours and cost that the workloads'
// own status says (scheduledTime..completionTime × share, priced per GPU model).
TEST(FactoryProcessTest, UpMetersAnHourOfTheDemo) {
  TempDir dir;
  const std::string data = dir.File("data");
  const int port = FreePort();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a test that crashed
    const int fd = ::open(dir.File("up.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    ::execl(FABRICA_BIN, "fabrica", "up", "--data", data.c_str(), "--listen", listen.c_str(),
            "--plain-http", "--time-scale", "100", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
    }
  } reaper{pid};
  ClientOptions o;
  o.server = "http://127.0.0.1:" + std::to_string(port);
  o.timeout_seconds = 10;
  // The admin token `up` wrote into its auth file.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (o.token.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    if (!std::filesystem::exists(data + "/fabctl.yaml")) continue;
    YAML::Node cfg = YAML::LoadFile(data + "/fabctl.yaml");
    if (cfg["token"]) o.token = cfg["token"].as<std::string>();
  }
  ASSERT_FALSE(o.token.empty()) << ReadFile(dir.File("up.log"));
  HttpClient admin(o);
  // The server's virtual clock, read from what it stamps: a lease's renewTime.
  auto server_now = [&]() -> int64_t {
    auto r = admin.Do("GET", std::string(kApi) + "/leases");
    if (!r.ok() || r->status != 200) return -1;
    int64_t latest = -1;
    const json leases = json::parse(r->body);
    for (const json& l : leases["items"]) {
      latest = std::max(latest, ParseTimestamp(l["spec"].value("renewTime", "")));
    }
    return latest;
  };
  const std::string demo = ReadFile(std::string(FABRICA_SOURCE_DIR) + "/examples/demo.yaml");
  for (const YAML::Node& d : YAML::LoadAll(demo)) {
    json w = YamlToJson(d);
    auto r = admin.Do(
        "POST",
        std::string(kApi) + "/namespaces/" + w["metadata"].value("namespace", "") + "/workloads",
        w.dump());
    ASSERT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().message());
  }
  int64_t t0 = -1;
  while (t0 < 0 && std::chrono::steady_clock::now() < deadline) {
    t0 = server_now();
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GT(t0, 0);
  t0 = t0 / 1000 * 1000;
  const int64_t t1 = t0 + 3'600'000;
  // Until the server's clock is two virtual minutes past the hour (the meter syncs every cycle).
  while (server_now() < t1 + 120'000 && std::chrono::steady_clock::now() < deadline + 90s) {
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_GE(server_now(), t1 + 120'000) << "the factory's clock did not advance";

  const std::string query = "/allocation?window=" + std::to_string(t0 / 1000) + "," +
                            std::to_string(t1 / 1000) + "&aggregate=namespace";
  auto alloc = admin.Do("GET", query);
  ASSERT_TRUE(alloc.ok() && alloc->status == 200) << (alloc.ok() ? alloc->body : "");
  const json sets = json::parse(alloc->body)["data"][0];

  // The expectation, from the workloads and nodes as the API shows them.
  std::map<std::string, std::string> model_of;  // "node/index" -> model
  const json nodes = json::parse(admin.Do("GET", std::string(kApi) + "/nodes")->body);
  for (const json& n : nodes["items"]) {
    int i = 0;
    for (const json& d : n["spec"]["devices"]) {
      model_of[n["metadata"].value("name", "") + "/" + std::to_string(i++)] = d.value("model", "");
    }
  }
  const std::map<std::string, int64_t> price = {{"H100", 2'490'000}, {"H200", 3'190'000}};
  std::map<std::string, std::map<std::string, int64_t>> held;  // tenant -> model -> milli·ms
  std::map<std::string, int64_t> cpu_milli_ms;                 // tenant -> milli-core·ms
  auto workloads = json::parse(admin.Do("GET", std::string(kApi) + "/workloads")->body);
  for (const json& w : workloads["items"]) {
    const json& st = w["status"];
    if (!st.contains("scheduledTime")) continue;
    const int64_t from = std::max(t0, ParseTimestamp(st.value("scheduledTime", "")));
    int64_t to = t1;
    if (st.contains("completionTime")) {
      to = std::min(to, ParseTimestamp(st.value("completionTime", "")));
    }
    for (const json& a : st["assignments"]) {
      // The pod's CPU, from its pod set (examples/demo.yaml writes whole cores).
      const std::string pod = a.value("pod", "");
      for (const json& ps : w["spec"]["podSets"]) {
        if (ps.value("name", "") + "-" == pod.substr(0, pod.rfind('-') + 1)) {
          const json& cpu = ps["cpu"];
          const int64_t cores =
              cpu.is_number() ? cpu.get<int64_t>() : std::stoll(cpu.get<std::string>());
          cpu_milli_ms[w["metadata"].value("namespace", "")] +=
              cores * 1000 * std::max<int64_t>(0, to - from);
        }
      }
      for (const json& d : a["devices"]) {
        const int64_t milli = d.contains("migSlice") ? 1000 / 7 : d.value("gpuMilli", 1000);
        const std::string model =
            model_of[a.value("node", "") + "/" + std::to_string(d.value("index", 0))];
        held[w["metadata"].value("namespace", "")][model] +=
            milli * std::max<int64_t>(0, to - from);
      }
    }
  }
  ASSERT_FALSE(held.empty()) << workloads.dump() << "\n" << ReadFile(dir.File("up.log"));
  for (const auto& [tenant, by_model] : held) {
    int64_t total = 0, cost = 0;
    for (const auto& [model, h] : by_model) {
      total += h;
      cost += static_cast<int64_t>(static_cast<__int128>(h) * price.at(model) / 3'600'000'000LL);
    }
    ASSERT_TRUE(sets.contains(tenant)) << tenant << ": " << alloc->body;
    EXPECT_NEAR(sets[tenant].value("gpuHours", 0.0), total / 3.6e9, 1e-9) << tenant;
    EXPECT_NEAR(sets[tenant].value("gpuCost", 0.0), cost / 1e6, 1e-9) << tenant;
    // CPU held, priced at the embedded 0.03 per core-hour.
    EXPECT_NEAR(sets[tenant].value("cpuCoreHours", 0.0), cpu_milli_ms[tenant] / 3.6e9, 1e-9);
    EXPECT_NEAR(sets[tenant].value("cpuCost", 0.0),
                static_cast<double>(cpu_milli_ms[tenant] * 30'000 / 3'600'000'000LL) / 1e6, 1e-9);
  }
}

// The server reads a dcgm-exporter endpoint itself (pull): a page served over HTTP is scraped
// twice, 30 s apart, and its utilization is attributed to the binding on that GPU; the GPU
// nobody holds shows as unattributed use; a dead target or a malformed page is an error that
// names it and ingests nothing.
TEST(MeterScrape, ReadsADcgmExporterEndpointAndAttributesIt) {
  std::unique_ptr<Store> store = NewMemoryStore();
  ManualClock clock;
  const int64_t t0 = clock.NowMs();
  json node = {
      {"apiVersion", "fabrica.dev/v1"},
      {"kind", "Node"},
      {"metadata", {{"name", "dgx-1"}, {"creationTimestamp", FormatTimestamp(t0)}}},
      {"spec",
       {{"devices",
         {{{"uuid", "GPU-aaa"}, {"model", "H100"}}, {{"uuid", "GPU-bbb"}, {"model", "H100"}}}}}}};
  ASSERT_TRUE(store->Put("/registry/nodes/dgx-1", node.dump(), kMustNotExist).ok());
  json w = {{"apiVersion", "fabrica.dev/v1"},
            {"kind", "Workload"},
            {"metadata", {{"name", "job"}, {"namespace", "team-a"}, {"uid", "u1"}}},
            {"spec", {{"queue", "qa"}}},
            {"status",
             {{"phase", "Running"},
              {"scheduledTime", FormatTimestamp(t0)},
              {"assignments",
               {{{"pod", "job-0"},
                 {"node", "dgx-1"},
                 {"devices", {{{"index", 0}, {"uuid", "GPU-aaa"}, {"gpuMilli", 1000}}}}}}}}}};
  ASSERT_TRUE(store->Put("/registry/workloads/team-a/job", w.dump(), kMustNotExist).ok());
  MeterServiceOptions mo;
  mo.prices.gpu_hour_micros = {{"H100", 2'000'000}};
  auto meter = MeterService::Open(*store, clock, mo);
  ASSERT_TRUE(meter.ok());
  ASSERT_TRUE((*meter)->Sync().ok());

  std::atomic<bool> malformed{false};
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  options.tls = false;
  HttpServer exporter(options, [&](const HttpRequest& r) {
    HttpResponse out;
    out.content_type = "text/plain; version=0.0.4";
    out.body = malformed
                   ? "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-aaa\" 5\n"
                   : "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine "
                     "is active.\n# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
                     "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"GPU-aaa\",Hostname=\"dgx-1\"}"
                     " 0.625\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"1\",UUID=\"GPU-bbb\","
                     "Hostname=\"dgx-1\"} 0.25\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-aaa\","
                     "Hostname=\"dgx-1\"} 9223372036854775794\n";
    return out;
  });
  ASSERT_TRUE(exporter.Start().ok());
  const std::vector<ScrapeTarget> targets = {
      {"http://127.0.0.1:" + std::to_string(exporter.port()) + "/metrics", "", ""}};
  ASSERT_TRUE((*meter)->ScrapeOnce(targets).ok());
  clock.AdvanceMs(30'000);
  ASSERT_TRUE((*meter)->ScrapeOnce(targets).ok());
  clock.AdvanceMs(30'000);
  // Errors name the target and change nothing.
  Status dead = (*meter)->ScrapeOnce({{"http://127.0.0.1:1/metrics", "", ""}});
  EXPECT_FALSE(dead.ok());
  EXPECT_NE(dead.message().find("127.0.0.1:1"), std::string::npos) << dead.message();
  malformed = true;
  Status bad = (*meter)->ScrapeOnce(targets);
  EXPECT_NE(bad.message().find("line 1"), std::string::npos) << bad.message();
  ASSERT_TRUE((*meter)->Sync().ok());

  ReportOptions opt;
  opt.from_ms = t0;
  opt.to_ms = t0 + 60'000;
  auto report = (*meter)->Report(opt);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ((*report)[0].rows.size(), 1u);
  const ReportRow& row = (*report)[0].rows[0];
  EXPECT_EQ(row.key, "team-a");
  EXPECT_EQ(row.held, 1000 * 60'000);
  EXPECT_EQ(row.used, 625 * 60'000);
  EXPECT_EQ(row.unknown, 0);
  EXPECT_EQ((*report)[0].unattributed_used, 250 * 60'000);
  const std::string metrics = (*meter)->MetricsText();
  EXPECT_NE(metrics.find("outcome=\"failed\"} 1"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace fabrica
