// Tests for src/api/api_server and src/api/auth: ApiServer::Handle driven directly with
// HttpRequest values (no network) over the in-memory store and a manual clock.
//
// The principals are those of a small factory: a platform admin, alice (tenant-admin of team-a),
// bob (tenant-member of team-b), vera (fleet-wide viewer) and node n1 with an issued node token.
// The authorization matrix runs every verb on every resource for every principal, each case on
// a freshly seeded world so that one case's writes cannot change another's answer. Expected
// answers come from the role descriptions in auth.h, not from the implementation.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/api_server.h"
#include "api/auth.h"
#include "api/conceal.h"
#include "client/columns.h"
#include "control/clock.h"
#include "store/store.h"

namespace fabrica {
namespace {

using json = nlohmann::json;

constexpr char kApi[] = "/apis/fabrica.dev/v1";
constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-01234567890";
constexpr char kVera[] = "vera-token-0123456789";

constexpr char kAuthYaml[] = R"(tokens:
  - {token: admin-token-0123456789, user: admin}
  - {token: alice-token-0123456789, user: alice}
  - {token: bob-token-01234567890, user: bob}
  - {token: vera-token-0123456789, user: vera}
bindings:
  - {role: platform-admin, user: admin}
  - {role: tenant-admin, tenant: team-a, user: alice}
  - {role: tenant-member, tenant: team-b, user: bob}
  - {role: viewer, user: vera}
)";

constexpr char kMergePatch[] = "application/merge-patch+json";

// An HttpRequest as the server would decode it. `target` may carry a query ("?a=b&c=d"); its
// values are taken literally (tests use no percent-encoding).
HttpRequest MakeRequest(const std::string& method, const std::string& target,
                        const std::string& token, const std::string& body = "",
                        const std::string& content_type = "application/json") {
  HttpRequest r;
  r.method = method;
  r.target = target;
  const size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) {
    std::string rest = target.substr(q + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t amp = rest.find('&', start);
      std::string kv = rest.substr(start, amp == std::string::npos ? amp : amp - start);
      size_t eq = kv.find('=');
      if (!kv.empty()) {
        r.query[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
      }
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
  }
  if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
  if (!body.empty() && !content_type.empty()) r.headers["content-type"] = content_type;
  r.body = body;
  r.peer = "127.0.0.1:40000";
  return r;
}

json Parse(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

// j[key] when j is an object and that is a string, else "" (never throws).
std::string Str(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

std::string Message(const HttpResponse& r) { return Str(Parse(r), "message"); }

// Paths.
std::string Collection(const std::string& resource, const std::string& ns = "") {
  return std::string(kApi) + (ns.empty() ? "" : "/namespaces/" + ns) + "/" + resource;
}
std::string Item(const std::string& resource, const std::string& ns, const std::string& name) {
  return Collection(resource, ns) + "/" + name;
}

// Objects.
json TenantObject(const std::string& name, const std::string& trust = "trusted",
                  const std::string& domain = "research") {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Tenant"},
          {"metadata", {{"name", name}}},
          {"spec", {{"trust", trust}, {"trustDomain", domain}}}};
}
json QueueObject(const std::string& name) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Queue"},
          {"metadata", {{"name", name}}},
          {"spec", {{"weight", 1}}}};
}
json PriorityClassObject(const std::string& name, json value = 100) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "PriorityClass"},
          {"metadata", {{"name", name}}},
          {"spec", {{"value", value}, {"description", "for tests"}}}};
}
json FlavorObject(const std::string& name, json spec = {{"models", {"H100"}}}) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}
json NodeObject(const std::string& name, int gpus = 8) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"cpu", "64"},
            {"memory", "512Gi"},
            {"leaf", "leaf-1"},
            {"gpus", {{"count", gpus}, {"model", "H100"}, {"memory", "80Gi"}}}}}};
}
// The Warning headers of a response, in order.
std::vector<std::string> WarningsOf(const HttpResponse& r) {
  std::vector<std::string> out;
  for (const auto& [name, value] : r.headers)
    if (name == "Warning") out.push_back(value);
  return out;
}
json LeaseObject(const std::string& name) {
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", name}}},
          {"spec", {{"holderIdentity", name}, {"leaseDurationSeconds", 40}}}};
}
json WorkloadObject(const std::string& ns, const std::string& name, const json& labels = {},
                    int gpus = 1) {
  json meta = {{"name", name}, {"namespace", ns}};
  if (!labels.is_null()) meta["labels"] = labels;
  return {{"apiVersion", "fabrica.dev/v1"},
          {"kind", "Workload"},
          {"metadata", meta},
          {"spec",
           {{"podSets",
             {{{"name", "main"},
               {"count", 1},
               {"cpu", "4"},
               {"memory", "16Gi"},
               {"devices", {{"gpus", gpus}}}}}},
            {"run", {{"command", {"train"}}, {"durationSeconds", 600}}}}}};
}
json Assignment(const std::string& node) {
  return {{"pod", "main-0"},
          {"node", node},
          {"devices", {{{"index", 0}, {"uuid", "GPU-" + node + "-0"}, {"gpuMilli", 1000}}}}};
}

// One API server over a fresh in-memory store, with the principals above and a node token for
// n1 (node_token).
class World {
 public:
  explicit World(int64_t keep_events = 100000) : store_(NewMemoryStore(keep_events)) {
    auto a = Authorizer::Parse(kAuthYaml, "inline auth");
    CHECK(a.ok());
    auth_ = std::make_unique<Authorizer>(std::move(*a));
    api_ = std::make_unique<ApiServer>(*store_, *auth_, clock_, nullptr);
    auto t = api_->IssueNodeToken("n1");
    CHECK(t.ok());
    node_token = *t;
  }

  HttpResponse Do(const std::string& method, const std::string& target, const std::string& token,
                  const std::string& body = "",
                  const std::string& content_type = "application/json") {
    return api_->Handle(MakeRequest(method, target, token, body, content_type));
  }
  HttpResponse Get(const std::string& target, const std::string& token = kAdmin) {
    return Do("GET", target, token);
  }
  // Creates as admin; fails the test unless 201.
  json MustCreate(const std::string& collection, const json& obj) {
    HttpResponse r = Do("POST", collection, kAdmin, obj.dump());
    EXPECT_EQ(r.status, 201) << collection << ": " << r.body;
    return Parse(r);
  }
  // Writes status as admin through the /status subresource.
  void MustSetStatus(const std::string& item, const json& status) {
    json obj = Parse(Get(item));
    obj["status"] = status;
    HttpResponse r = Do("PUT", item + "/status", kAdmin, obj.dump());
    EXPECT_EQ(r.status, 200) << item << ": " << r.body;
  }

  // The seeded world of the matrix: tenants team-a and team-b, queue q1, nodes and leases n1 and
  // n2, workloads team-a/wa (on n1), team-a/wa2, team-b/wb (on n1) and team-b/wb2.
  void Seed() {
    MustCreate(Collection("tenants"), TenantObject("team-a"));
    MustCreate(Collection("tenants"), TenantObject("team-b"));
    MustCreate(Collection("queues"), QueueObject("q1"));
    MustCreate(Collection("priorityclasses"), PriorityClassObject("pc1"));
    MustCreate(Collection("resourceflavors"), FlavorObject("rf1"));
    for (const char* n : {"n1", "n2"}) {
      MustCreate(Collection("nodes"), NodeObject(n));
      MustCreate(Collection("leases"), LeaseObject(n));
    }
    for (const auto& [ns, name] : std::vector<std::pair<std::string, std::string>>{
             {"team-a", "wa"}, {"team-a", "wa2"}, {"team-b", "wb"}, {"team-b", "wb2"}}) {
      MustCreate(Collection("workloads", ns), WorkloadObject(ns, name));
    }
    for (const auto& [ns, name] :
         std::vector<std::pair<std::string, std::string>>{{"team-a", "wa"}, {"team-b", "wb"}}) {
      MustSetStatus(Item("workloads", ns, name),
                    {{"phase", "Scheduled"}, {"assignments", {Assignment("n1")}}});
    }
  }

  Store& store() { return *store_; }
  ManualClock& clock() { return clock_; }
  ApiServer& api() { return *api_; }
  // The API server stops and a new one starts on the same store, a minute later.
  void Restart() {
    api_.reset();
    clock_.AdvanceMs(60'000);
    api_ = std::make_unique<ApiServer>(*store_, *auth_, clock_, nullptr);
  }

  std::string node_token;

 private:
  std::unique_ptr<Store> store_;
  ManualClock clock_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<ApiServer> api_;
};

// Names of the items of a list response.
std::set<std::string> ItemNames(const HttpResponse& r) {
  std::set<std::string> out;
  for (const json& i : Parse(r).value("items", json::array())) {
    out.insert(i["metadata"].value("namespace", std::string()) + "/" +
               i["metadata"].value("name", std::string()));
  }
  return out;
}

// Collects the lines a watch writes, as the HTTP server would send them.
class WatchDriver {
 public:
  explicit WatchDriver(std::shared_ptr<StreamSource> source) : source_(std::move(source)) {
    CHECK(source_ != nullptr);
    source_->Start(
        [this](std::string line) {
          std::lock_guard<std::mutex> lock(mu_);
          lines_.push_back(std::move(line));
          return true;
        },
        [this] {
          std::lock_guard<std::mutex> lock(mu_);
          finished_ = true;
        });
  }
  ~WatchDriver() { source_->Cancel(); }

  // The events so far, each parsed ({"type", "object"}).
  std::vector<json> Events() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<json> out;
    for (const std::string& l : lines_) {
      EXPECT_TRUE(!l.empty() && l.back() == '\n') << "a watch line ends with a newline: " << l;
      out.push_back(json::parse(l, nullptr, false));
    }
    return out;
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }

 private:
  std::shared_ptr<StreamSource> source_;
  std::mutex mu_;
  std::vector<std::string> lines_;
  bool finished_ = false;
};

// "TYPE ns/name" of each event.
std::vector<std::string> Summaries(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) {
    const json& m = e["object"]["metadata"];
    out.push_back(e.value("type", std::string()) + " " + m.value("namespace", std::string()) + "/" +
                  m.value("name", std::string()));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Authentication.

TEST(ApiAuthTest, MissingOrWrongTokenIs401WithAClearMessage) {
  World w;
  w.Seed();
  const int64_t rev = w.store().Revision();
  for (const std::string& path :
       {Collection("workloads"), Item("workloads", "team-a", "wa"), Collection("nodes")}) {
    HttpResponse none = w.Do("GET", path, "");
    EXPECT_EQ(none.status, 401) << path;
    EXPECT_EQ(Parse(none).value("reason", ""), "Unauthorized");
    EXPECT_NE(Message(none).find("Authorization: Bearer"), std::string::npos) << none.body;

    HttpResponse wrong = w.Do("GET", path, "not-a-token-0123456789");
    EXPECT_EQ(wrong.status, 401) << path;
    EXPECT_NE(Message(wrong).find("invalid bearer token"), std::string::npos) << wrong.body;

    HttpRequest basic = MakeRequest("GET", path, "");
    basic.headers["authorization"] = "Basic YWRtaW46YWRtaW4=";
    HttpResponse b = w.api().Handle(basic);
    EXPECT_EQ(b.status, 401);
    EXPECT_NE(Message(b).find("bearer"), std::string::npos) << b.body;
  }
  // Writes without credentials change nothing.
  EXPECT_EQ(
      w.Do("POST", Collection("workloads", "team-a"), "", WorkloadObject("team-a", "x").dump())
          .status,
      401);
  EXPECT_EQ(w.Do("DELETE", Item("workloads", "team-a", "wa"), "wrong-token-0123456789").status,
            401);
  EXPECT_EQ(w.store().Revision(), rev);
  // Health endpoints need no token.
  EXPECT_EQ(w.Do("GET", "/healthz", "").status, 200);
}

// ---------------------------------------------------------------------------------------------
// The authorization matrix.

enum class Want { kAllow, kDeny };

struct Actor {
  std::string who;  // admin, alice, bob, vera, n1
  std::string tenant;
};

struct Target {
  std::string resource;
  std::string ns;    // workloads only
  std::string name;  // "" for a collection
};

bool IsRead(const std::string& verb) { return verb == "get" || verb == "list" || verb == "watch"; }

// What the roles of auth.h allow.
Want Expected(const Actor& p, const std::string& verb, const Target& t) {
  const bool read = IsRead(verb);
  if (p.who == "admin") return Want::kAllow;
  if (p.who == "vera") return read ? Want::kAllow : Want::kDeny;
  if (p.who == "n1") {
    if (t.resource == "tenants") return read ? Want::kAllow : Want::kDeny;  // trust levels
    if (t.resource == "nodes" || t.resource == "leases") {
      return t.name == "n1" && verb != "delete" && verb != "list" && verb != "watch" ? Want::kAllow
                                                                                     : Want::kDeny;
    }
    if (t.resource == "workloads") {
      if (t.name.empty()) return Want::kAllow;  // list and watch, filtered to its workloads
      const bool assigned = t.name == "wa" || t.name == "wb";
      return verb == "status" && assigned ? Want::kAllow : Want::kDeny;
    }
    return Want::kDeny;  // queues
  }
  // alice and bob: tenant roles.
  if (t.resource == "workloads") {
    if (t.name.empty() && t.ns.empty()) return Want::kAllow;  // list across tenants, filtered
    if (t.ns != p.tenant) return Want::kDeny;
    // Status is the scheduler's decision: see TenantUsersCannotWriteWorkloadStatus below.
    return verb == "status" ? Want::kDeny : Want::kAllow;
  }
  if (t.resource == "tenants")
    return verb == "get" && t.name == p.tenant ? Want::kAllow : Want::kDeny;
  if (t.resource == "queues" || t.resource == "nodes" || t.resource == "priorityclasses" ||
      t.resource == "resourceflavors")
    return read ? Want::kAllow : Want::kDeny;
  return Want::kDeny;  // leases
}

std::string TokenOf(const std::string& who, const World& w) {
  if (who == "admin") return kAdmin;
  if (who == "alice") return kAlice;
  if (who == "bob") return kBob;
  if (who == "vera") return kVera;
  return w.node_token;
}

json FreshObject(const Target& t) {
  if (t.resource == "tenants") return TenantObject(t.name);
  if (t.resource == "queues") return QueueObject(t.name);
  if (t.resource == "priorityclasses") return PriorityClassObject(t.name);
  if (t.resource == "resourceflavors") return FlavorObject(t.name);
  if (t.resource == "nodes") return NodeObject(t.name);
  if (t.resource == "leases") return LeaseObject(t.name);
  return WorkloadObject(t.ns, t.name);
}

// Runs the cases of the matrix, each on a freshly seeded world: a world is reused only while
// nothing has written to it since it was seeded (denied requests must not write at all).
class MatrixRunner {
 public:
  // Returns the status code and fills *why with the body.
  int Run(const std::string& who, const std::string& verb, const Target& t, std::string* why) {
    World& w = Fresh();
    const std::string token = TokenOf(who, w);
    const std::string item = Item(t.resource, t.ns, t.name);
    HttpResponse r;
    if (verb == "list") {
      r = w.Do("GET", Collection(t.resource, t.ns), token);
    } else if (verb == "watch") {
      r = w.Do("GET", Collection(t.resource, t.ns) + "?watch=true", token);
      if (r.stream) r.stream->Cancel();
      if (r.status == 200 && !r.stream) r.status = 599;  // a watch must stream
    } else if (verb == "get") {
      r = w.Do("GET", item, token);
    } else if (verb == "create") {
      // A node may create only its own Node and Lease, so those keep their names (and are
      // deleted first); other objects are created under a new name.
      Target fresh = t;
      if (t.resource == "nodes" || t.resource == "leases") {
        EXPECT_EQ(w.Do("DELETE", item, kAdmin).status, 200) << item;
      } else {
        fresh.name += "-new";
      }
      r = w.Do("POST", Collection(t.resource, t.ns), token, FreshObject(fresh).dump());
    } else if (verb == "update") {
      json obj = Parse(w.Get(item));
      obj["metadata"]["labels"]["touched"] = "yes";
      r = w.Do("PUT", item, token, obj.dump());
    } else if (verb == "patch") {
      r = w.Do("PATCH", item, token, R"({"metadata":{"labels":{"touched":"yes"}}})", kMergePatch);
    } else if (verb == "delete") {
      r = w.Do("DELETE", item, token);
    } else if (verb == "status") {
      json obj = Parse(w.Get(item));
      if (t.resource == "workloads") {
        obj["status"]["message"] = "reported by " + who;
      } else {
        obj["status"] = {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
      }
      r = w.Do("PUT", item + "/status", token, obj.dump());
    }
    *why = r.body;
    if (r.status == 403 && verb != "create") {
      EXPECT_EQ(w.store().Revision(), seeded_revision_)
          << who << " " << verb << " " << item << " was denied but wrote";
    }
    return r.status;
  }

 private:
  World& Fresh() {
    if (!world_ || world_->store().Revision() != seeded_revision_) {
      world_ = std::make_unique<World>();
      world_->Seed();
      seeded_revision_ = world_->store().Revision();
    }
    return *world_;
  }

  std::unique_ptr<World> world_;
  int64_t seeded_revision_ = 0;
};

TEST(ApiAuthTest, EveryVerbOnEveryResourceForEveryPrincipal) {
  const std::vector<Actor> principals = {
      {"admin", ""}, {"alice", "team-a"}, {"bob", "team-b"}, {"vera", ""}, {"n1", ""}};
  const std::vector<Target> objects = {{"tenants", "", "team-a"},
                                       {"tenants", "", "team-b"},
                                       {"queues", "", "q1"},
                                       {"priorityclasses", "", "pc1"},
                                       {"resourceflavors", "", "rf1"},
                                       {"nodes", "", "n1"},
                                       {"nodes", "", "n2"},
                                       {"leases", "", "n1"},
                                       {"leases", "", "n2"},
                                       {"workloads", "team-a", "wa"},
                                       {"workloads", "team-a", "wa2"},
                                       {"workloads", "team-b", "wb"},
                                       {"workloads", "team-b", "wb2"}};
  const std::vector<Target> collections = {
      {"tenants", "", ""},         {"queues", "", ""},          {"priorityclasses", "", ""},
      {"nodes", "", ""},           {"leases", "", ""},          {"workloads", "", ""},
      {"workloads", "team-a", ""}, {"workloads", "team-b", ""}, {"resourceflavors", "", ""}};
  int cases = 0;
  MatrixRunner runner;
  for (const Actor& p : principals) {
    auto check = [&](const std::string& verb, const Target& t) {
      const Want want = Expected(p, verb, t);
      ++cases;
      std::string body;
      const int code = runner.Run(p.who, verb, t, &body);
      const std::string what =
          p.who + " " + verb + " " + t.resource + " " + (t.ns.empty() ? "" : t.ns + "/") + t.name;
      if (want == Want::kAllow && verb == "delete" && t.resource == "tenants") {
        // (Authorised; the seeded tenants hold workloads, so the deletion is refused.)
        EXPECT_EQ(code, 409) << what << ": " << body;
      } else if (want == Want::kAllow) {
        EXPECT_EQ(code, verb == "create" ? 201 : 200) << what << ": " << body;
      } else {
        EXPECT_EQ(code, 403) << what << ": " << body;
        json j = json::parse(body, nullptr, false);
        if (code == 403 && !j.is_discarded()) {
          EXPECT_EQ(j.value("kind", ""), "Status") << what;
          EXPECT_EQ(j.value("reason", ""), "Forbidden") << what;
          EXPECT_FALSE(j.value("message", "").empty()) << what;
        }
      }
    };
    for (const Target& t : objects) {
      for (const char* verb : {"create", "get", "update", "patch", "delete", "status"}) {
        check(verb, t);
      }
    }
    for (const Target& t : collections) {
      for (const char* verb : {"list", "watch"}) check(verb, t);
    }
  }
  EXPECT_GT(cases, 350);
}

TEST(ApiAuthTest, NoCrossTenantWorkloadAccess) {
  World w;
  w.Seed();
  const int64_t rev = w.store().Revision();
  const std::string wb = Item("workloads", "team-b", "wb");
  json wb_obj = Parse(w.Get(wb));

  EXPECT_EQ(w.Do("GET", wb, kAlice).status, 403);
  EXPECT_EQ(w.Do("GET", wb + "/status", kAlice).status, 403);
  EXPECT_EQ(w.Do("PUT", wb, kAlice, wb_obj.dump()).status, 403);
  EXPECT_EQ(w.Do("PATCH", wb, kAlice, R"({"spec":{"priority":9}})", kMergePatch).status, 403);
  EXPECT_EQ(w.Do("DELETE", wb, kAlice).status, 403);
  EXPECT_EQ(w.Do("POST", Collection("workloads", "team-b"), kAlice,
                 WorkloadObject("team-b", "sneaky").dump())
                .status,
            403);
  EXPECT_EQ(w.Do("GET", Collection("workloads", "team-b"), kAlice).status, 403);
  // Through her own namespace with the other's in the body: the URL decides, the body must agree.
  HttpResponse mismatch = w.Do("POST", Collection("workloads", "team-a"), kAlice,
                               WorkloadObject("team-b", "sneaky").dump());
  EXPECT_EQ(mismatch.status, 422) << mismatch.body;
  // Across all tenants, with no namespace in the URL: writes are refused.
  EXPECT_EQ(
      w.Do("POST", Collection("workloads"), kAlice, WorkloadObject("team-b", "x").dump()).status,
      403);
  EXPECT_EQ(w.store().Revision(), rev);

  // Lists and watches across tenants show only her tenant's workloads.
  EXPECT_EQ(ItemNames(w.Get(Collection("workloads"), kAlice)),
            (std::set<std::string>{"team-a/wa", "team-a/wa2"}));
  EXPECT_EQ(ItemNames(w.Get(Collection("workloads"), kBob)),
            (std::set<std::string>{"team-b/wb", "team-b/wb2"}));
  EXPECT_EQ(ItemNames(w.Get(Collection("workloads"), kVera)),
            (std::set<std::string>{"team-a/wa", "team-a/wa2", "team-b/wb", "team-b/wb2"}));

  HttpResponse watch =
      w.Do("GET", Collection("workloads") + "?watch=true&resourceVersion=0", kAlice);
  ASSERT_EQ(watch.status, 200);
  WatchDriver d(watch.stream);
  for (const std::string& item :
       {Item("workloads", "team-a", "wa2"), Item("workloads", "team-b", "wb2")}) {
    EXPECT_EQ(
        w.Do("PATCH", item, kAdmin, R"({"metadata":{"labels":{"x":"y"}}})", kMergePatch).status,
        200);
  }
  for (const std::string& s : Summaries(d.Events())) {
    EXPECT_NE(s.find("team-a/"), std::string::npos) << "alice's watch showed " << s;
  }
  EXPECT_FALSE(d.Events().empty());
}

TEST(ApiAuthTest, ViewerReadsButCannotWrite) {
  World w;
  w.Seed();
  const int64_t rev = w.store().Revision();
  for (const char* r : {"tenants", "queues", "nodes", "leases", "workloads"}) {
    EXPECT_EQ(w.Get(Collection(r), kVera).status, 200) << r;
  }
  EXPECT_EQ(w.Get(Item("workloads", "team-b", "wb"), kVera).status, 200);
  EXPECT_EQ(
      w.Do("POST", Collection("workloads", "team-a"), kVera, WorkloadObject("team-a", "v").dump())
          .status,
      403);
  EXPECT_EQ(w.Do("POST", Collection("tenants"), kVera, TenantObject("team-v").dump()).status, 403);
  EXPECT_EQ(w.Do("PATCH", Item("nodes", "", "n1"), kVera, R"({"spec":{"unschedulable":true}})",
                 kMergePatch)
                .status,
            403);
  EXPECT_EQ(w.Do("DELETE", Item("leases", "", "n1"), kVera).status, 403);
  EXPECT_EQ(w.store().Revision(), rev);
}

TEST(ApiAuthTest, NodeSeesAndReportsOnlyItsOwnWorkloads) {
  World w;
  w.Seed();
  const std::string& node = w.node_token;
  // Its own Node and Lease, and no other. The lease's renewTime is the server's clock at
  // receipt, whatever the node claims.
  json lease = LeaseObject("n1");
  lease["spec"]["renewTime"] = "2099-01-01T00:00:00.000Z";
  w.clock().AdvanceMs(5000);
  HttpResponse renewed = w.Do("PUT", Item("leases", "", "n1"), node, lease.dump());
  EXPECT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_EQ(Parse(w.Get(Item("leases", "", "n1")))["spec"].value("renewTime", ""),
            FormatTimestamp(w.clock().NowMs()));
  EXPECT_EQ(w.Do("PUT", Item("leases", "", "n2"), node, LeaseObject("n2").dump()).status, 403);
  EXPECT_EQ(w.Do("POST", Collection("nodes"), node, NodeObject("n3").dump()).status, 403);
  EXPECT_EQ(w.Do("POST", Collection("leases"), node, LeaseObject("n3").dump()).status, 403);
  EXPECT_EQ(w.Do("DELETE", Item("nodes", "", "n1"), node).status, 403);

  // Lists and watches show only the workloads assigned to n1, in any tenant.
  EXPECT_EQ(ItemNames(w.Get(Collection("workloads"), node)),
            (std::set<std::string>{"team-a/wa", "team-b/wb"}));
  EXPECT_EQ(ItemNames(w.Get(Collection("workloads", "team-a"), node)),
            (std::set<std::string>{"team-a/wa"}));
  HttpResponse watch = w.Do("GET", Collection("workloads") + "?watch=true&resourceVersion=0", node);
  ASSERT_EQ(watch.status, 200);
  {
    WatchDriver d(watch.stream);
    std::set<std::string> seen;
    for (const std::string& s : Summaries(d.Events())) seen.insert(s.substr(s.find(' ') + 1));
    EXPECT_EQ(seen, (std::set<std::string>{"team-a/wa", "team-b/wb"}));
  }

  // Status of assigned workloads: yes; of others: no; their spec: never.
  const std::string wa = Item("workloads", "team-a", "wa");
  EXPECT_EQ(w.Do("GET", wa + "/status", node).status, 200);
  EXPECT_EQ(w.Do("GET", Item("workloads", "team-a", "wa2") + "/status", node).status, 403);
  HttpResponse running =
      w.Do("PATCH", wa + "/status", node,
           R"({"status":{"phase":"Running","message":"running on n1"}})", kMergePatch);
  ASSERT_EQ(running.status, 200) << running.body;
  json now = Parse(w.Get(wa));
  EXPECT_EQ(now["status"].value("phase", ""), "Running");
  EXPECT_EQ(now["status"]["assignments"].size(), 1u) << "a merge patch keeps the assignments";

  const json spec_before = now["spec"];
  EXPECT_EQ(w.Do("PATCH", wa, node, R"({"spec":{"priority":1000}})", kMergePatch).status, 403);
  json obj = now;
  obj["spec"]["priority"] = 1000;
  EXPECT_EQ(w.Do("PUT", wa, node, obj.dump()).status, 403);
  // A spec change smuggled into a status write is ignored.
  HttpResponse smuggled =
      w.Do("PATCH", wa + "/status", node, R"({"spec":{"priority":1000},"status":{"message":"m"}})",
           kMergePatch);
  EXPECT_EQ(smuggled.status, 200) << smuggled.body;
  EXPECT_EQ(Parse(w.Get(wa))["spec"], spec_before);

  for (const std::string& other :
       {Item("workloads", "team-a", "wa2"), Item("workloads", "team-b", "wb2")}) {
    EXPECT_EQ(
        w.Do("PATCH", other + "/status", node, R"({"status":{"phase":"Running"}})", kMergePatch)
            .status,
        403)
        << other;
  }
}

// Status carries the scheduler's decision (assignments, phase): a tenant user who could write it
// would place its own workloads on any GPU, past the scheduler and its isolation rules.
TEST(ApiAuthTest, TenantUsersCannotWriteWorkloadStatus) {
  World w;
  w.Seed();
  const std::string wa2 = Item("workloads", "team-a", "wa2");
  json obj = Parse(w.Get(wa2));
  obj["status"] = {{"phase", "Running"}, {"assignments", {Assignment("n2")}}};
  HttpResponse r = w.Do("PUT", wa2 + "/status", kAlice, obj.dump());
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Parse(w.Get(wa2))["status"].value("phase", ""), "Pending");
}

// A node may report on the workloads it runs, not move them: the assignments are the
// scheduler's.
TEST(ApiAuthTest, NodeCannotRewriteAssignments) {
  World w;
  w.Seed();
  const std::string wa = Item("workloads", "team-a", "wa");
  HttpResponse r =
      w.Do("PATCH", wa + "/status", w.node_token,
           json{{"status", {{"assignments", {Assignment("n2")}}}}}.dump(), kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Parse(w.Get(wa))["status"]["assignments"][0].value("node", ""), "n1");
}

// A node's status write made from an older read is stale, not forbidden: 409, and nothing
// changes (the scheduler may have rewritten the status since: its decision stands). Nor may a
// node change status.evictions, the scheduler's record of its stops.
TEST(ApiAuthTest, StaleNodeStatusWritesAreConflictsAndEvictionsAreTheSchedulers) {
  World w;
  w.Seed();
  const std::string wa = Item("workloads", "team-a", "wa");
  json read = Parse(w.Get(wa));
  // The scheduler writes meanwhile.
  json newer = read;
  newer["status"]["message"] = "written by the scheduler";
  ASSERT_EQ(w.Do("PUT", wa + "/status", kAdmin, newer.dump()).status, 200);
  json report = read;
  report["status"]["phase"] = "Running";
  HttpResponse r = w.Do("PUT", wa + "/status", w.node_token, report.dump());
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("is stale); read it again"), std::string::npos) << r.body;
  json now = Parse(w.Get(wa));
  EXPECT_EQ(now["status"].value("message", ""), "written by the scheduler") << now.dump();
  EXPECT_NE(now["status"].value("phase", ""), "Running") << now.dump();
  // Read again, the same report goes through; one that rewrites its eviction record does not.
  report = now;
  report["status"]["evictions"] = {{"count", 0}};
  r = w.Do("PUT", wa + "/status", w.node_token, report.dump());
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not change status.evictions"), std::string::npos) << r.body;
  report = now;
  report["status"]["phase"] = "Running";
  EXPECT_EQ(w.Do("PUT", wa + "/status", w.node_token, report.dump()).status, 200);
  // The record itself is checked, field by field, whoever writes it.
  for (const json& bad :
       {json{{"count", 1}, {"gpuSecondsLost", -1}}, json{{"count", 1}, {"gpuSecondsLost", "lots"}},
        json{{"count", 1}, {"gpuSeconds", 5}}}) {
    json write = Parse(w.Get(wa));
    write["status"]["evictions"] = bad;
    r = w.Do("PUT", wa + "/status", kAdmin, write.dump());
    EXPECT_EQ(r.status, 422) << bad.dump() << ": " << r.body;
    EXPECT_NE(r.body.find("status.evictions"), std::string::npos) << r.body;
  }
  json good = Parse(w.Get(wa));
  good["status"]["evictions"] = {{"count", 2}, {"gpuSecondsLost", 1200}};
  EXPECT_EQ(w.Do("PUT", wa + "/status", kAdmin, good.dump()).status, 200);
  // A preemptor's swap (status.swap) likewise; a node may not change it.
  for (const json& bad : {json{{"flavor", "gpu"}, {"ceilingMilli", -1}},
                          json{{"flavor", "gpu"}, {"ceilingMilli", "lots"}},
                          json{{"flavor", 3}, {"ceilingMilli", 8000}},
                          json{{"flavor", "gpu"}, {"ceilingMilli", 8000}, {"floor", 1}}}) {
    json write = Parse(w.Get(wa));
    write["status"]["swap"] = bad;
    r = w.Do("PUT", wa + "/status", kAdmin, write.dump());
    EXPECT_EQ(r.status, 422) << bad.dump() << ": " << r.body;
    EXPECT_NE(r.body.find("status.swap"), std::string::npos) << r.body;
  }
  good = Parse(w.Get(wa));
  good["status"]["swap"] = {{"flavor", "gpu"}, {"ceilingMilli", 24000}};
  EXPECT_EQ(w.Do("PUT", wa + "/status", kAdmin, good.dump()).status, 200);
  report = Parse(w.Get(wa));
  report["status"].erase("swap");
  r = w.Do("PUT", wa + "/status", w.node_token, report.dump());
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not change status.swap"), std::string::npos) << r.body;
  // A waiting preemptor's plan and swap go with a change of its queue or pods (the swap's
  // ceiling is its old queue's), not with another change of its spec.
  const std::string wa2 = Item("workloads", "team-a", "wa2");
  json waiting = Parse(w.Get(wa2));
  waiting["status"] = {{"phase", "Pending"},
                       {"nomination", {Assignment("n1")}},
                       {"swap", {{"flavor", "gpu"}, {"ceilingMilli", 24000}}}};
  ASSERT_EQ(w.Do("PUT", wa2 + "/status", kAdmin, waiting.dump()).status, 200);
  r = w.Do("PATCH", wa2, kAdmin, R"({"spec":{"priority":5}})", "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Parse(r)["status"].contains("swap")) << r.body;
  EXPECT_TRUE(Parse(r)["status"].contains("nomination")) << r.body;
  r = w.Do("PATCH", wa2, kAdmin, R"({"spec":{"queue":"unqueued"}})",
           "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(Parse(r)["status"].contains("swap")) << r.body;
  EXPECT_FALSE(Parse(r)["status"].contains("nomination")) << r.body;
  EXPECT_EQ(Parse(r)["status"].value("phase", ""), "Pending") << r.body;
}

// A node reports the pods it started (status.startedPods): only pods assigned to it, stamped
// with the server's time whatever the node sent, and none taken away once reported; the types
// are checked whoever writes.
TEST(ApiAuthTest, NodesReportTheirOwnStartedPods) {
  World w;
  w.Seed();
  const std::string wa = Item("workloads", "team-a", "wa");
  HttpResponse r =
      w.Do("PATCH", wa + "/status", w.node_token,
           R"({"status":{"phase":"Running","startedPods":{"main-0":"1999-01-01T00:00:00Z"}}})",
           kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  json st = Parse(w.Get(wa))["status"];
  ASSERT_TRUE(st["startedPods"].contains("main-0")) << st.dump();
  const std::string stamped = st["startedPods"].value("main-0", "");
  EXPECT_NE(stamped, "1999-01-01T00:00:00Z");
  EXPECT_EQ(stamped, st.value("startTime", "")) << st.dump();  // the same receipt time
  // Again: the first stamp stays.
  r = w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"startedPods":{"main-0":""}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Parse(w.Get(wa))["status"]["startedPods"].value("main-0", ""), stamped);
  // A pod not assigned to it, or taking one away: refused, naming it.
  r = w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"startedPods":{"main-1":""}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not report pod main-1 started"), std::string::npos) << r.body;
  r = w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"startedPods":{"main-0":null}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not remove status.startedPods.main-0"), std::string::npos) << r.body;
  r = w.Do("PATCH", wa + "/status", kAdmin, R"({"status":{"startedPods":{"main-0":7}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("status.startedPods.main-0: expected a string"), std::string::npos)
      << r.body;
  EXPECT_EQ(Parse(w.Get(wa))["status"]["startedPods"].value("main-0", ""), stamped);
  // A report on a binding replaced since (it names the scheduledTime it saw) is refused.
  r = w.Do("PATCH", wa + "/status", w.node_token,
           R"({"status":{"scheduledTime":"2020-01-01T00:00:00Z","startedPods":{"main-0":""}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("status.scheduledTime"), std::string::npos) << r.body;
  // Completed pods (status.finishedPods) under the same rules.
  r = w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"finishedPods":{"main-1":""}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not report pod main-1 completed"), std::string::npos) << r.body;
  r = w.Do("PATCH", wa + "/status", w.node_token,
           R"({"status":{"finishedPods":{"main-0":"1999-01-01T00:00:00Z"}}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string finished = Parse(w.Get(wa))["status"]["finishedPods"].value("main-0", "");
  EXPECT_NE(finished, "1999-01-01T00:00:00Z");
  EXPECT_FALSE(finished.empty());
  r = w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"finishedPods":{"main-0":null}}})",
           kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not remove status.finishedPods.main-0"), std::string::npos) << r.body;
}

// A disruption budget set to 0 says at the write what it does: evictions of the queue's work
// under way are called off, and what it borrows stays (a trial read only "patched").
TEST(ApiAuthTest, ADisruptionBudgetOfZeroSaysWhatItCallsOff) {
  World w;
  w.Seed();
  ASSERT_EQ(w.Do("POST", Collection("queues"), kAdmin, QueueObject("team-a").dump()).status, 201);
  const std::string key = "/registry/workloads/team-a/wa";
  auto kv = w.store().Get(key);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  json obj = json::parse(kv->value);
  obj["status"]["phase"] = "Running";
  obj["status"]["preemption"] = {
      {"by", "team-b/wb2"}, {"reason", "preempted"}, {"deadline", "2026-12-01T00:00:30Z"}};
  ASSERT_TRUE(w.store().Put(key, obj.dump(), kv->mod_revision).ok());
  const auto budget = [&](int b) {
    return w.Do("PATCH", Item("queues", "", "team-a"), kAdmin,
                json{{"spec", {{"disruptionBudget", b}}}}.dump(), kMergePatch);
  };
  HttpResponse r = budget(0);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WarningsOf(r),
            (std::vector<std::string>{
                "299 - \"spec.disruptionBudget: 0 lets no work of queue team-a be evicted for "
                "others: what it borrows stays until its work ends, and a queue below its "
                "guarantee waits for it; the eviction of 1 workload(s) now stopping (team-a/wa) "
                "is called off at the next cycle, and their preemptors wait\""}));
  // Already 0, or raised: nothing said.
  EXPECT_TRUE(WarningsOf(budget(0)).empty());
  EXPECT_TRUE(WarningsOf(budget(2)).empty());
}

// A queue moved from under its tenant's queue (which let the tenant in) strands the tenant's
// work there: said at the write, with what runs and waits (a trial's re-parenting answered
// "patched" while its running work went on in unqueued).
TEST(ApiAuthTest, AQueueMovedAwayFromItsTenantSaysWhoseWorkItStrands) {
  World w;
  w.Seed();
  w.MustCreate(Collection("queues"), QueueObject("team-a"));
  json proj = QueueObject("proj");
  proj["spec"]["parent"] = "team-a";
  w.MustCreate(Collection("queues"), proj);
  json in_proj = WorkloadObject("team-a", "wp");
  in_proj["spec"]["queue"] = "proj";
  w.MustCreate(Collection("workloads", "team-a"), in_proj);
  w.MustSetStatus(Item("workloads", "team-a", "wp"),
                  {{"phase", "Running"}, {"assignments", {Assignment("n2")}}});
  json later = WorkloadObject("team-a", "wp2");
  later["spec"]["queue"] = "proj";
  w.MustCreate(Collection("workloads", "team-a"), later);
  HttpResponse r =
      w.Do("PATCH", Item("queues", "", "proj"), kAdmin, R"({"spec":{"parent":"q1"}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WarningsOf(r),
            (std::vector<std::string>{
                "299 - \"tenant team-a may no longer use queue proj (it was let in above the "
                "queue's old place, or by its old tenants): 1 running workload(s) of it go on in "
                "unqueued (best-effort, reclaimed first) and 1 pending wait until it is let back; "
                "list it in the queue's spec.tenants to keep them\""}));
  // Let back by its own list: nothing said of it (moving back under team-a, a leaf, says
  // what that does to team-a's own work).
  const auto strands = [](const HttpResponse& r) {
    for (const std::string& warning : WarningsOf(r))
      if (warning.find("may no longer use queue") != std::string::npos) return true;
    return false;
  };
  r = w.Do("PATCH", Item("queues", "", "proj"), kAdmin,
           R"({"spec":{"parent":"team-a","tenants":["team-a"]}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(strands(r));
  r = w.Do("PATCH", Item("queues", "", "proj"), kAdmin, R"({"spec":{"parent":"q1"}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(strands(r));
  EXPECT_TRUE(WarningsOf(r).empty());
  // A department's tenants changed: the work in the leaves below it is said too.
  json lab = QueueObject("lab");
  lab["spec"]["tenants"] = {"team-b"};
  w.MustCreate(Collection("queues"), lab);
  json lab_p = QueueObject("lab-p");
  lab_p["spec"]["parent"] = "lab";
  w.MustCreate(Collection("queues"), lab_p);
  json in_lab = WorkloadObject("team-b", "wl");
  in_lab["spec"]["queue"] = "lab-p";
  w.MustCreate(Collection("workloads", "team-b"), in_lab);
  r = w.Do("PATCH", Item("queues", "", "lab"), kAdmin, R"({"spec":{"tenants":["team-a"]}})",
           kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(strands(r));
  EXPECT_NE(WarningsOf(r)[0].find("tenant team-b may no longer use queue lab or the queues below "
                                  "it (it was let in above the queue's old place, or by its old "
                                  "tenants): 0 running workload(s) of it go on in unqueued "
                                  "(best-effort, reclaimed first) and 1 pending"),
            std::string::npos)
      << WarningsOf(r)[0];
}

// The scheduler marks a victim (status.preemption) and keeps a waiting preemptor's planned
// place (status.nomination) in the status it writes to the store. The node running the victim
// must still be able to report on it (before status.preemption was a known field, its report
// was refused, so a victim that finished during its grace period was requeued and ran again),
// and may not change the mark. (A node cannot reach a pending preemptor's status at all, so the
// same guard on status.nomination is defensive.)
TEST(ApiAuthTest, NodesReportOnVictimsButNotTheSchedulersMarks) {
  World w;
  w.Seed();
  const std::string wa = Item("workloads", "team-a", "wa");
  const std::string key = "/registry/workloads/team-a/wa";
  auto kv = w.store().Get(key);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  json obj = json::parse(kv->value);
  obj["status"]["preemption"] = {
      {"by", "team-b/wb2"}, {"reason", "preempted"}, {"deadline", "2026-12-01T00:00:30Z"}};
  ASSERT_TRUE(w.store().Put(key, obj.dump(), kv->mod_revision).ok());
  json waiting = json::parse(w.store().Get("/registry/workloads/team-b/wb2")->value);
  waiting["status"] = {{"phase", "Pending"}, {"nomination", {Assignment("n1")}}};
  ASSERT_TRUE(
      w.Do("PUT", Item("workloads", "team-b", "wb2") + "/status", kAdmin, waiting.dump()).status ==
      200);

  HttpResponse running =
      w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"phase":"Running"}})", kMergePatch);
  EXPECT_EQ(running.status, 200) << running.body;
  json now = Parse(w.Get(wa));
  EXPECT_EQ(now["status"].value("phase", ""), "Running");
  EXPECT_EQ(now["status"]["preemption"].value("by", ""), "team-b/wb2");
  now["status"]["phase"] = "Succeeded";
  HttpResponse done = w.Do("PUT", wa + "/status", w.node_token, now.dump());
  EXPECT_EQ(done.status, 200) << done.body;

  HttpResponse unmark =
      w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"preemption":null}})", kMergePatch);
  EXPECT_EQ(unmark.status, 403) << unmark.body;
  HttpResponse bad =
      w.Do("PUT", Item("workloads", "team-b", "wb2") + "/status", kAdmin,
           json{{"status", {{"nomination", {{{"devices", json::array()}}}}}}}.dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("status.nomination[0].node: required"), std::string::npos) << bad.body;
  // Elastic shrinks' marks: a list of {by, reason, deadline, pods}; the node may not change them.
  now = Parse(w.Get(wa));
  now["status"]["shrinks"] = json::array(
      {{{"by", "team-b/wb2"}, {"reason", "r"}, {"deadline", "2026-12-01T00:00:30Z"}, {"pods", 3}}});
  bad = w.Do("PUT", wa + "/status", kAdmin, now.dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("status.shrinks[0].pods"), std::string::npos) << bad.body;
  now["status"]["shrinks"][0]["pods"] = json::array({"main-1", 7});
  bad = w.Do("PUT", wa + "/status", kAdmin, now.dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("status.shrinks[0].pods[1]: expected a string"), std::string::npos)
      << bad.body;
  now["status"]["shrinks"][0]["pods"] = json::array({"main-1"});
  HttpResponse marked = w.Do("PUT", wa + "/status", kAdmin, now.dump());
  ASSERT_EQ(marked.status, 200) << marked.body;
  HttpResponse drop =
      w.Do("PATCH", wa + "/status", w.node_token, R"({"status":{"shrinks":null}})", kMergePatch);
  EXPECT_EQ(drop.status, 403) << drop.body;
  EXPECT_NE(drop.body.find("status.shrinks"), std::string::npos) << drop.body;
}

// ---------------------------------------------------------------------------------------------
// CRUD semantics.

class ApiCrudTest : public testing::Test {
 protected:
  void SetUp() override { w_.MustCreate(Collection("tenants"), TenantObject("team-a")); }
  World w_;
};

TEST_F(ApiCrudTest, CreateGetConflictAndDelete) {
  const std::string path = Collection("workloads", "team-a");
  HttpResponse created = w_.Do("POST", path, kAlice, WorkloadObject("team-a", "w1").dump());
  ASSERT_EQ(created.status, 201) << created.body;
  json obj = Parse(created);
  EXPECT_EQ(obj["metadata"].value("resourceVersion", ""), std::to_string(w_.store().Revision()));
  EXPECT_EQ(obj["metadata"].value("generation", 0), 1);
  EXPECT_EQ(obj["metadata"].value("creationTimestamp", ""), FormatTimestamp(w_.clock().NowMs()));
  EXPECT_EQ(obj["metadata"].value("uid", "").size(), 32u);
  EXPECT_EQ(obj["metadata"].value("namespace", ""), "team-a");
  EXPECT_EQ(obj["status"].value("phase", ""), "Pending");
  EXPECT_EQ(obj.value("kind", ""), "Workload");
  EXPECT_EQ(obj.value("apiVersion", ""), "fabrica.dev/v1");

  // GET returns what the create returned.
  HttpResponse got = w_.Get(Item("workloads", "team-a", "w1"), kAlice);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(Parse(got), obj);

  // Create again: 409, nothing written.
  const int64_t rev = w_.store().Revision();
  HttpResponse again = w_.Do("POST", path, kAlice, WorkloadObject("team-a", "w1").dump());
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(Parse(again).value("reason", ""), "Conflict");
  EXPECT_EQ(w_.store().Revision(), rev);

  // Absent objects.
  HttpResponse missing = w_.Get(Item("workloads", "team-a", "nope"), kAlice);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(Parse(missing).value("reason", ""), "NotFound");
  EXPECT_NE(Message(missing).find("nope"), std::string::npos);
  EXPECT_EQ(w_.Get(Item("tenants", "", "nope")).status, 404);

  // Delete: 200, then 404 on get and on a second delete.
  HttpResponse del = w_.Do("DELETE", Item("workloads", "team-a", "w1"), kAlice);
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(w_.Get(Item("workloads", "team-a", "w1"), kAlice).status, 404);
  EXPECT_EQ(w_.Do("DELETE", Item("workloads", "team-a", "w1"), kAlice).status, 404);
  EXPECT_EQ(w_.Do("PUT", Item("workloads", "team-a", "w1"), kAlice, obj.dump()).status, 404);
}

TEST_F(ApiCrudTest, UpdateWithStaleResourceVersionConflicts) {
  const std::string item = Item("workloads", "team-a", "w1");
  json v1 = w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "w1"));
  json v2 = v1;
  v2["spec"]["priority"] = 5;  // (a priority without a class: the platform admin's to set)
  HttpResponse ok = w_.Do("PUT", item, kAdmin, v2.dump());
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(Parse(ok)["metadata"].value("resourceVersion", ""),
            v1["metadata"].value("resourceVersion", ""));

  // Writing from the first version again is stale.
  const int64_t rev = w_.store().Revision();
  json stale = v1;
  stale["spec"]["priority"] = 7;
  HttpResponse conflict = w_.Do("PUT", item, kAdmin, stale.dump());
  EXPECT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_NE(Message(conflict).find("resourceVersion"), std::string::npos) << conflict.body;
  EXPECT_EQ(w_.store().Revision(), rev);
  EXPECT_EQ(Parse(w_.Get(item))["spec"].value("priority", 0), 5);

  // So is a stale /status write.
  stale["status"] = {{"phase", "Running"}};
  EXPECT_EQ(w_.Do("PUT", item + "/status", kAdmin, stale.dump()).status, 409);
  EXPECT_EQ(w_.store().Revision(), rev);

  // And a merge patch that names the version it was made from (kubectl --resource-version):
  // refused when stale, applied when current.
  const json old_version = {
      {"metadata", {{"resourceVersion", v1["metadata"].value("resourceVersion", "")}}},
      {"spec", {{"priority", 7}}}};
  HttpResponse patched = w_.Do("PATCH", item, kAdmin, old_version.dump(), kMergePatch);
  EXPECT_EQ(patched.status, 409) << patched.body;
  EXPECT_EQ(Parse(patched).value("reason", ""), "Conflict") << patched.body;
  EXPECT_EQ(w_.store().Revision(), rev);
  const json current = {
      {"metadata", {{"resourceVersion", Parse(ok)["metadata"].value("resourceVersion", "")}}},
      {"spec", {{"priority", 7}}}};
  patched = w_.Do("PATCH", item, kAdmin, current.dump(), kMergePatch);
  EXPECT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(Parse(w_.Get(item))["spec"].value("priority", 0), 7);
}

TEST_F(ApiCrudTest, AnUpdateThatChangesNothingWritesNothing) {
  // As in Kubernetes: the version stays, so a watcher sees no event and `fabctl apply` can say
  // "unchanged".
  const std::string item = Item("workloads", "team-a", "w1");
  json v1 = w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "w1"));
  const int64_t rev = w_.store().Revision();
  HttpResponse same = w_.Do("PUT", item, kAlice, v1.dump());
  ASSERT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(Parse(same)["metadata"].value("resourceVersion", ""),
            v1["metadata"].value("resourceVersion", ""));
  EXPECT_EQ(w_.store().Revision(), rev);
  EXPECT_EQ(Parse(same)["metadata"].value("generation", 0), 1);
  json unversioned = v1;
  unversioned["metadata"].erase("resourceVersion");
  EXPECT_EQ(w_.Do("PUT", item, kAlice, unversioned.dump()).status, 200);
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"spec":{"run":{"durationSeconds":600}}})", kMergePatch)
                .status,
            200);
  EXPECT_EQ(w_.store().Revision(), rev);

  // A change is written.
  json v2 = v1;
  v2["metadata"]["labels"] = {{"app", "chat"}};
  HttpResponse changed = w_.Do("PUT", item, kAlice, v2.dump());
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(w_.store().Revision(), rev + 1);
  EXPECT_EQ(Parse(changed)["metadata"].value("resourceVersion", ""), std::to_string(rev + 1));
  // And a write from the old version is stale even when it would change nothing now.
  v1["metadata"]["labels"] = {{"app", "chat"}};
  EXPECT_EQ(w_.Do("PUT", item, kAlice, v1.dump()).status, 409);
}

TEST_F(ApiCrudTest, ADryRunChecksAndAnswersAsTheWriteWouldAndWritesNothing) {
  // kubectl's --dry-run=server: ?dryRun=All.
  const std::string path = Collection("workloads", "team-a");
  const std::string item = Item("workloads", "team-a", "w1");
  const int64_t empty = w_.store().Revision();
  HttpResponse created =
      w_.Do("POST", path + "?dryRun=All", kAlice, WorkloadObject("team-a", "w1").dump());
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Parse(created)["status"].value("phase", ""), "Pending");
  EXPECT_EQ(Parse(created)["metadata"].value("generation", 0), 1);
  EXPECT_EQ(w_.store().Revision(), empty);
  EXPECT_EQ(w_.Get(item, kAlice).status, 404);
  // What the write would refuse, it refuses.
  json bad = WorkloadObject("team-a", "w1");
  bad["spec"]["bogus"] = 1;
  HttpResponse refused = w_.Do("POST", path + "?dryRun=All", kAlice, bad.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(Message(refused).find("spec.bogus"), std::string::npos) << refused.body;
  EXPECT_EQ(w_.Do("DELETE", item + "?dryRun=All", kAlice).status, 404);
  EXPECT_EQ(w_.Do("POST", Collection("workloads", "team-z") + "?dryRun=All", kAdmin,
                  WorkloadObject("team-z", "w1").dump())
                .status,
            422);

  json v1 = w_.MustCreate(path, WorkloadObject("team-a", "w1"));
  const int64_t rev = w_.store().Revision();
  EXPECT_EQ(
      w_.Do("POST", path + "?dryRun=All", kAlice, WorkloadObject("team-a", "w1").dump()).status,
      409);
  json v2 = v1;
  v2["metadata"]["labels"] = {{"app", "chat"}};
  HttpResponse updated = w_.Do("PUT", item + "?dryRun=All", kAlice, v2.dump());
  ASSERT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(Parse(updated)["metadata"]["labels"].value("app", ""), "chat");
  HttpResponse patched = w_.Do("PATCH", item + "?dryRun=All", kAlice,
                               R"({"spec":{"run":{"durationSeconds":7}}})", kMergePatch);
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(Parse(patched)["spec"]["run"].value("durationSeconds", 0), 7);
  EXPECT_EQ(Parse(patched)["metadata"].value("generation", 0), 2);
  HttpResponse deleted = w_.Do("DELETE", item + "?dryRun=All", kAlice);
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_NE(Message(deleted).find("dry run"), std::string::npos) << deleted.body;
  EXPECT_EQ(w_.store().Revision(), rev);
  EXPECT_EQ(Parse(w_.Get(item)), v1);
  // A stale version is a conflict in a dry run too; a mode other than All is refused.
  v1["metadata"]["resourceVersion"] = std::to_string(rev - 1);
  EXPECT_EQ(w_.Do("PUT", item + "?dryRun=All", kAlice, v1.dump()).status, 409);
  HttpResponse mode = w_.Do("DELETE", item + "?dryRun=true", kAlice);
  EXPECT_EQ(mode.status, 400) << mode.body;
  EXPECT_NE(Message(mode).find("dryRun"), std::string::npos) << mode.body;
  EXPECT_EQ(w_.store().Revision(), rev);
  // And it asks the same permission as the write.
  EXPECT_EQ(w_.Do("DELETE", item + "?dryRun=All", kBob).status, 403);
}

TEST_F(ApiCrudTest, MergePatchChangesOnlyTheGivenFields) {
  const std::string item = Item("workloads", "team-a", "w1");
  json before = w_.MustCreate(Collection("workloads", "team-a"),
                              WorkloadObject("team-a", "w1", {{"app", "chat"}, {"tier", "gold"}}));
  HttpResponse r = w_.Do("PATCH", item, kAdmin,
                         R"({"metadata":{"labels":{"tier":null,"owner":"alice"}},)"
                         R"("spec":{"priority":3}})",
                         kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  json after = Parse(w_.Get(item));
  EXPECT_EQ(after["metadata"]["labels"], (json{{"app", "chat"}, {"owner", "alice"}}));
  EXPECT_EQ(after["spec"].value("priority", 0), 3);
  json spec_without_priority = after["spec"];
  spec_without_priority.erase("priority");
  EXPECT_EQ(spec_without_priority, before["spec"]);
  EXPECT_EQ(after["status"], before["status"]);
  EXPECT_EQ(after["metadata"]["uid"], before["metadata"]["uid"]);
  EXPECT_EQ(after["metadata"]["creationTimestamp"], before["metadata"]["creationTimestamp"]);
  EXPECT_EQ(after["metadata"].value("generation", 0), 2);

  // A patch of the main resource does not touch status, even when it names it.
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"status":{"phase":"Running"}})", kMergePatch).status,
            200);
  EXPECT_EQ(Parse(w_.Get(item))["status"].value("phase", ""), "Pending");

  // The server's own fields cannot be patched away.
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"metadata":{"uid":"forged"}})", kMergePatch).status,
            200);
  EXPECT_EQ(Parse(w_.Get(item))["metadata"]["uid"], before["metadata"]["uid"]);
}

TEST_F(ApiCrudTest, StatusSubresourceChangesOnlyStatus) {
  const std::string item = Item("workloads", "team-a", "w1");
  json v1 = w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "w1"));
  json body = v1;
  body["spec"]["priority"] = 99;
  body["metadata"]["labels"] = {{"sneaky", "yes"}};
  body["status"] = {{"phase", "Scheduled"}, {"assignments", {Assignment("n1")}}};
  HttpResponse r = w_.Do("PUT", item + "/status", kAdmin, body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json after = Parse(w_.Get(item));
  EXPECT_EQ(after["status"].value("phase", ""), "Scheduled");
  EXPECT_EQ(after["spec"], v1["spec"]);
  EXPECT_FALSE(after["metadata"].contains("labels"));
  EXPECT_EQ(after["metadata"].value("generation", 0), 1);

  // And the main resource changes everything but status.
  json main = after;
  main["spec"]["priority"] = 4;
  main["status"] = {{"phase", "Succeeded"}};
  r = w_.Do("PUT", item, kAdmin, main.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  after = Parse(w_.Get(item));
  EXPECT_EQ(after["status"].value("phase", ""), "Scheduled");
  EXPECT_EQ(after["spec"].value("priority", 0), 4);
}

TEST_F(ApiCrudTest, GenerationCountsSpecChanges) {
  const std::string item = Item("workloads", "team-a", "w1");
  json obj = w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "w1"));
  EXPECT_EQ(obj["metadata"].value("generation", 0), 1);
  auto generation = [&] { return Parse(w_.Get(item))["metadata"].value("generation", -1); };

  // Labels and status are not the spec.
  ASSERT_EQ(
      w_.Do("PATCH", item, kAdmin, R"({"metadata":{"labels":{"a":"b"}}})", kMergePatch).status,
      200);
  EXPECT_EQ(generation(), 1);
  w_.MustSetStatus(item, {{"phase", "Running"}});
  EXPECT_EQ(generation(), 1);

  ASSERT_EQ(w_.Do("PATCH", item, kAdmin, R"({"spec":{"priority":1}})", kMergePatch).status, 200);
  EXPECT_EQ(generation(), 2);
  json cur = Parse(w_.Get(item));
  cur["spec"]["priority"] = 2;
  ASSERT_EQ(w_.Do("PUT", item, kAdmin, cur.dump()).status, 200);
  EXPECT_EQ(generation(), 3);
}

// generation is the server's: a PUT that leaves it out (or makes it up) and keeps the spec must
// not change it.
TEST_F(ApiCrudTest, GenerationIsServerOwned) {
  const std::string item = Item("workloads", "team-a", "w1");
  json obj = w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "w1"));
  obj["metadata"].erase("generation");
  obj["metadata"]["labels"] = {{"a", "b"}};
  ASSERT_EQ(w_.Do("PUT", item, kAdmin, obj.dump()).status, 200);
  EXPECT_EQ(Parse(w_.Get(item))["metadata"].value("generation", -1), 1);
  json forged = Parse(w_.Get(item));
  forged["metadata"]["generation"] = 42;
  ASSERT_EQ(w_.Do("PUT", item, kAdmin, forged.dump()).status, 200);
  EXPECT_EQ(Parse(w_.Get(item))["metadata"].value("generation", -1), 1);
}

// The main resource "changes everything but status" for every kind, also those created without a
// status.
TEST_F(ApiCrudTest, MainResourceNeverWritesStatus) {
  json t = Parse(w_.Get(Item("tenants", "", "team-a")));
  t["status"] = {{"note", "written through the main resource"}};
  ASSERT_EQ(w_.Do("PUT", Item("tenants", "", "team-a"), kAdmin, t.dump()).status, 200);
  EXPECT_FALSE(Parse(w_.Get(Item("tenants", "", "team-a"))).contains("status"));
}

TEST_F(ApiCrudTest, ListWithLabelSelectorAndPagination) {
  const std::string path = Collection("workloads", "team-a");
  w_.MustCreate(path, WorkloadObject("team-a", "a1", {{"app", "chat"}, {"tier", "gold"}}));
  w_.MustCreate(path, WorkloadObject("team-a", "a2", {{"app", "chat"}}));
  w_.MustCreate(path, WorkloadObject("team-a", "a3", {{"app", "train"}}));
  w_.MustCreate(path, WorkloadObject("team-a", "a4"));
  w_.MustCreate(path, WorkloadObject("team-a", "a5", {{"tier", "gold"}}));

  auto names = [&](const std::string& query) {
    HttpResponse r = w_.Get(path + query, kAlice);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    return ItemNames(r);
  };
  EXPECT_EQ(names("?labelSelector=app=chat"), (std::set<std::string>{"team-a/a1", "team-a/a2"}));
  EXPECT_EQ(names("?labelSelector=app==train"), (std::set<std::string>{"team-a/a3"}));
  EXPECT_EQ(names("?labelSelector=app!=chat"),
            (std::set<std::string>{"team-a/a3", "team-a/a4", "team-a/a5"}));
  EXPECT_EQ(names("?labelSelector=tier"), (std::set<std::string>{"team-a/a1", "team-a/a5"}));
  EXPECT_EQ(names("?labelSelector=app=chat,tier=gold"), (std::set<std::string>{"team-a/a1"}));
  EXPECT_EQ(names("?labelSelector=app=none").size(), 0u);
  HttpResponse all = w_.Get(path, kAlice);
  EXPECT_EQ(Parse(all).value("kind", ""), "WorkloadList");
  EXPECT_EQ(Parse(all)["metadata"].value("resourceVersion", ""),
            std::to_string(w_.store().Revision()));

  // Pages of two, in name order, until no continue token is returned.
  std::vector<std::string> seen;
  std::string cont;
  int pages = 0;
  for (; pages < 10; ++pages) {
    HttpRequest req = MakeRequest("GET", path + "?limit=2", kAlice);
    if (!cont.empty()) req.query["continue"] = cont;
    HttpResponse r = w_.api().Handle(req);
    ASSERT_EQ(r.status, 200) << r.body;
    json page = Parse(r);
    EXPECT_LE(page["items"].size(), 2u);
    for (const json& i : page["items"]) seen.push_back(i["metadata"].value("name", ""));
    cont = page["metadata"].value("continue", "");
    if (cont.empty()) break;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a1", "a2", "a3", "a4", "a5"}));
  EXPECT_EQ(pages, 2);

  // Bad paging input is a 400, not a crash.
  EXPECT_EQ(w_.Get(path + "?limit=many", kAlice).status, 400);
  HttpRequest bad = MakeRequest("GET", path + "?limit=2", kAlice);
  bad.query["continue"] = "/registry/tenants/x";
  EXPECT_EQ(w_.api().Handle(bad).status, 400);
}

// kubectl's --field-selector: a list or watch filtered by the fields a kind is selected by, and
// any other field, or a value its field can never have, refused by name (before, the selector
// was ignored and the whole list came back, as if it were the answer).
TEST_F(ApiCrudTest, ListAndWatchWithFieldSelector) {
  const std::string path = Collection("workloads", "team-a");
  json queued = WorkloadObject("team-a", "a1", {{"app", "x"}});
  queued["spec"]["queue"] = "research";
  w_.MustCreate(path, queued);
  w_.MustCreate(path, WorkloadObject("team-a", "a2"));
  w_.MustCreate(path, WorkloadObject("team-a", "a3"));
  w_.MustCreate(Collection("tenants"), TenantObject("team-b"));
  w_.MustCreate(Collection("workloads", "team-b"), WorkloadObject("team-b", "wb"));
  w_.MustCreate(Collection("nodes"), NodeObject("n1"));
  w_.MustSetStatus(Item("workloads", "team-a", "a2"),
                   {{"phase", "Running"}, {"assignments", {Assignment("n1")}}});
  auto names = [&](const std::string& query) {
    HttpResponse r = w_.Get(path + query, kAlice);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    return ItemNames(r);
  };
  EXPECT_EQ(names("?fieldSelector=status.phase=Pending"),
            (std::set<std::string>{"team-a/a1", "team-a/a3"}));
  EXPECT_EQ(names("?fieldSelector=status.phase!=Pending"), (std::set<std::string>{"team-a/a2"}));
  EXPECT_EQ(names("?fieldSelector=status.assignments.node==n1"),
            (std::set<std::string>{"team-a/a2"}));
  EXPECT_EQ(names("?fieldSelector=status.assignments.node="),
            (std::set<std::string>{"team-a/a1", "team-a/a3"}));
  EXPECT_EQ(names("?fieldSelector=spec.queue=research,metadata.name=a1"),
            (std::set<std::string>{"team-a/a1"}));
  EXPECT_EQ(names("?fieldSelector=spec.queue=research,metadata.name=a3").size(), 0u);
  // (Both selectors hold at once.)
  EXPECT_EQ(names("?fieldSelector=status.phase=Pending&labelSelector=app"),
            (std::set<std::string>{"team-a/a1"}));
  EXPECT_EQ(names("?fieldSelector=status.phase=Running&labelSelector=app").size(), 0u);
  // (Across tenants, another tenant's workloads stay unseen whatever the selector says.)
  EXPECT_EQ(
      ItemNames(w_.Get(Collection("workloads") + "?fieldSelector=metadata.namespace!=x", kAlice)),
      (std::set<std::string>{"team-a/a1", "team-a/a2", "team-a/a3"}));
  EXPECT_EQ(ItemNames(w_.Get(Collection("workloads") + "?fieldSelector=metadata.namespace=team-b"))
                .size(),
            1u);

  for (const auto& [query, words] : std::vector<std::pair<std::string, std::string>>{
           {"spec.gpus=1", "not selected by 'spec.gpus'"},
           {"status.phase=running", "status.phase is one of Pending"},
           {"status.phase=Unschedulable", "(Unschedulable is status.reason=Unschedulable)"},
           {"status.phase", "expected FIELD=VALUE"}}) {
    HttpResponse r = w_.Get(path + "?fieldSelector=" + query, kAlice);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_NE(r.body.find(words), std::string::npos) << query << ": " << r.body;
  }
  HttpResponse nodes = w_.Get(Collection("nodes") + "?fieldSelector=spec.unschedulable=false");
  EXPECT_EQ(nodes.status, 200) << nodes.body;
  EXPECT_FALSE(ItemNames(nodes).empty());
  EXPECT_EQ(w_.Get(Collection("nodes") + "?fieldSelector=status.phase=Running").status, 400);

  // A watch shows what is selected now (a2 runs), what enters the selection, and reports what
  // leaves it.
  HttpResponse watch = w_.Get(path + "?watch=true&fieldSelector=status.phase=Running", kAlice);
  ASSERT_EQ(watch.status, 200) << watch.body;
  WatchDriver d(watch.stream);
  w_.MustSetStatus(Item("workloads", "team-a", "a3"),
                   {{"phase", "Running"}, {"assignments", {Assignment("n2")}}});
  w_.MustSetStatus(Item("workloads", "team-a", "a3"), {{"phase", "Succeeded"}});
  w_.MustSetStatus(Item("workloads", "team-a", "a1"), {{"phase", "Failed"}});
  EXPECT_EQ(Summaries(d.Events()),
            (std::vector<std::string>{"ADDED team-a/a2", "ADDED team-a/a3", "DELETED team-a/a3"}));

  // A watch from a list's version reports what left the selection between the list and the
  // watch (a reflector's list, then watch; a watch opened again).
  w_.MustCreate(path, WorkloadObject("team-a", "a4"));
  HttpResponse listed = w_.Get(path + "?fieldSelector=status.phase=Pending", kAlice);
  ASSERT_EQ(ItemNames(listed), (std::set<std::string>{"team-a/a4"}));
  const std::string version = Parse(listed)["metadata"].value("resourceVersion", "");
  w_.MustSetStatus(Item("workloads", "team-a", "a4"), {{"phase", "Running"}});
  HttpResponse rewatch = w_.Get(
      path + "?watch=true&fieldSelector=status.phase=Pending&resourceVersion=" + version, kAlice);
  ASSERT_EQ(rewatch.status, 200) << rewatch.body;
  EXPECT_EQ(Summaries(WatchDriver(rewatch.stream).Events()),
            (std::vector<std::string>{"DELETED team-a/a4"}));
}

// A queue's columns from its status read "<pending>" until the scheduler first writes it (a
// trial read "-" under GUARANTEED as no guarantee); then its numbers.
TEST_F(ApiCrudTest, AQueuesStatusColumnsArePendingUntilTheFirstCycle) {
  json q = QueueObject("fresh");
  q["spec"]["quotas"] = {{"gpu", {{"guaranteed", 8}}}};
  w_.MustCreate(Collection("queues"), q);
  const auto cells = [&] {
    HttpRequest req = MakeRequest("GET", Item("queues", "", "fresh"), kAdmin, "", "");
    req.headers["accept"] = "application/json;as=Table;v=v1;g=meta.k8s.io";
    HttpResponse r = w_.api().Handle(req);
    EXPECT_EQ(r.status, 200) << r.body;
    return Parse(r)["rows"][0]["cells"];
  };
  json before = cells();
  EXPECT_EQ(before[3], "<pending>") << before.dump();  // (Guaranteed)
  EXPECT_EQ(before[4], "<pending>") << before.dump();  // (Used)
  EXPECT_EQ(before[5], "<pending>") << before.dump();  // (Pending)
  // (Priority, after Age: -o wide; a number, as its column is an integer's, as is Pending.)
  EXPECT_EQ(before[7], 0) << before.dump();
  w_.MustSetStatus(Item("queues", "", "fresh"),
                   {{"guaranteedGpus", "8"}, {"usedGpus", "0"}, {"pendingWorkloads", 0}});
  json after = cells();
  EXPECT_EQ(after[3], "8") << after.dump();
  EXPECT_EQ(after[4], "0") << after.dump();
  EXPECT_EQ(after[5], 0) << after.dump();
}

// kubectl asks for a Table (server-side printing) and prints its cells as sent: fabctl's
// columns, and AGE counted on the server's clock (kubectl counting it from the timestamps read
// "<invalid>" under a time scale, the server's clock ahead of the wall clock). A list, a single
// get and a watch (a one-row Table each event); what each row carries (includeObject).
TEST_F(ApiCrudTest, KubectlGetsATableOfFabctlsColumns) {
  const std::string path = Collection("workloads", "team-a");
  w_.MustCreate(path, WorkloadObject("team-a", "w1", {}, 2));
  w_.MustSetStatus(Item("workloads", "team-a", "w1"),
                   {{"phase", "Running"}, {"assignments", {Assignment("n1")}}});
  w_.clock().AdvanceMs((4 * 60 + 12) * 1000);
  const std::string accept =
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
      "g=meta.k8s.io,application/json";
  const auto get = [&](const std::string& target, const std::string& with = "",
                       const std::string& token = kAlice) {
    HttpRequest req = MakeRequest("GET", target, token, "", "");
    req.headers["accept"] = with.empty() ? accept : with;
    return w_.api().Handle(req);
  };
  const auto names = [](const json& table) {
    std::vector<std::string> out;
    for (const json& c : table.value("columnDefinitions", json::array()))
      out.push_back(c.value("name", "") + (c.value("priority", 0) == 0 ? "" : "*"));
    return out;
  };
  HttpResponse r = get(path);
  ASSERT_EQ(r.status, 200) << r.body;
  json table = Parse(r);
  EXPECT_EQ(table["kind"], "Table") << r.body;
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(table["metadata"]["resourceVersion"], std::to_string(w_.store().Revision()));
  EXPECT_EQ(names(table), (std::vector<std::string>{"Name", "Phase", "Pods", "GPUs", "Nodes", "Age",
                                                    "Queue*", "Priority*", "Message*"}));
  ASSERT_EQ(table["rows"].size(), 1u) << r.body;
  // (One pod of two GPUs, one of them placed: what it holds.)
  EXPECT_EQ(table["rows"][0]["cells"],
            json({"w1", "Running", "1", "1", "n1", "4m12s", "-", 0, ""}));
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(table["rows"][0]["object"]["metadata"]["namespace"], "team-a");
  EXPECT_FALSE(table["rows"][0]["object"].contains("spec"));

  // A single get is a one-row table; v1beta1 where only that is asked for; plain JSON without.
  r = get(Item("workloads", "team-a", "w1"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Parse(r)["rows"].size(), 1u);
  r = get(path, "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json");
  EXPECT_EQ(Parse(r)["apiVersion"], "meta.k8s.io/v1beta1") << r.body;
  r = get(path, "application/json");
  EXPECT_EQ(Parse(r)["kind"], "WorkloadList") << r.body;
  // (In the client's order: plain JSON asked first is what it gets; a Table in protobuf is
  // passed over for the JSON one after it.)
  r = get(path, "application/json, application/json;as=Table;v=v1;g=meta.k8s.io");
  EXPECT_EQ(Parse(r)["kind"], "WorkloadList") << r.body;
  r = get(path,
          "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, "
          "application/json;as=Table;v=v1;g=meta.k8s.io");
  EXPECT_EQ(Parse(r)["kind"], "Table") << r.body;
  EXPECT_EQ(Parse(get(Item("workloads", "team-a", "nope")))["reason"], "NotFound");

  // What each row carries.
  r = get(path + "?includeObject=Object");
  EXPECT_EQ(Parse(r)["rows"][0]["object"]["spec"]["podSets"][0]["count"], 1) << r.body;
  r = get(path + "?includeObject=None");
  EXPECT_FALSE(Parse(r)["rows"][0].contains("object")) << r.body;
  r = get(path + "?includeObject=All");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Message(r).find("includeObject: 'All' is not one of None, Metadata or Object"),
            std::string::npos)
      << r.body;

  // Other kinds: their own columns (a tenant's trust; a node's status and GPUs).
  r = get(Collection("tenants"), accept, kAdmin);
  table = Parse(r);
  EXPECT_EQ(names(table),
            (std::vector<std::string>{"Name", "Trust", "Trust-Domain", "Age", "Cost-Budget*"}));
  w_.MustCreate(Collection("nodes"), NodeObject("n1"));
  table = Parse(get(Collection("nodes"), accept, kAdmin));
  EXPECT_EQ(names(table), (std::vector<std::string>{"Name", "Status", "GPUs", "Model", "Leaf",
                                                    "Age", "CPU*", "Memory*", "Taints*"}));
  ASSERT_EQ(table["rows"].size(), 1u);
  EXPECT_EQ(table["rows"][0]["cells"][0], "n1");
  EXPECT_EQ(table["rows"][0]["cells"][5], "0s");

  // A watch: each event's object a one-row table.
  HttpRequest watch_req = MakeRequest("GET", path + "?watch=true", kAlice, "", "");
  watch_req.headers["accept"] = accept;
  HttpResponse watch = w_.api().Handle(watch_req);
  ASSERT_EQ(watch.status, 200) << watch.body;
  WatchDriver d(watch.stream);
  w_.MustCreate(path, WorkloadObject("team-a", "w2"));
  const std::vector<json> events = d.Events();
  ASSERT_EQ(events.size(), 2u);  // (w1, as it is now; then w2)
  EXPECT_EQ(events[0]["object"]["rows"][0]["cells"][0], "w1");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["kind"], "Table");
  EXPECT_EQ(events[1]["object"]["rows"][0]["cells"][0], "w2");
  EXPECT_EQ(events[1]["object"]["rows"][0]["cells"][1], "Pending");
}

// A tenant reads as a namespace where kubectl asks for one (after a namespaced 404, to word its
// error): a tenant's user sees its own, a 404 of kind namespaces for any other, or none.
TEST_F(ApiCrudTest, TenantsReadAsNamespaces) {
  w_.MustCreate(Collection("tenants"), TenantObject("team-b"));
  HttpResponse r = w_.Get("/api/v1/namespaces/team-a", kAlice);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Parse(r)["kind"], "Namespace");
  EXPECT_EQ(Parse(r)["metadata"]["name"], "team-a");
  EXPECT_EQ(Parse(r)["status"]["phase"], "Active");
  for (const char* other : {"team-b", "nope"}) {
    r = w_.Get(std::string("/api/v1/namespaces/") + other, kAlice);
    EXPECT_EQ(r.status, 404) << other;
    EXPECT_EQ(Parse(r)["details"]["kind"], "namespaces") << r.body;
    EXPECT_EQ(Message(r), std::string("namespaces \"") + other + "\" not found");
  }
  EXPECT_EQ(w_.Get("/api/v1/namespaces/team-b", kAdmin).status, 200);
  std::set<std::string> names;
  const HttpResponse listed = w_.Get("/api/v1/namespaces", kAlice);
  const json listed_json = Parse(listed);
  for (const json& ns : listed_json["items"]) names.insert(ns["metadata"].value("name", ""));
  EXPECT_EQ(names, std::set<std::string>{"team-a"}) << listed.body;
  EXPECT_EQ(w_.Get("/api/v1/namespaces/team-a", "").status, 401);
  EXPECT_EQ(w_.Do("DELETE", "/api/v1/namespaces/team-a", kAdmin).status, 405);
}

// /metrics carries every tenant's usage and cost: a platform admin and a viewer read it (a
// Prometheus job's token), a tenant's user is refused (403), as is a node; none, 401.
TEST_F(ApiCrudTest, MetricsAreForThoseWhoReadEveryTenant) {
  EXPECT_EQ(w_.Get("/metrics", kAdmin).status, 200);
  EXPECT_EQ(w_.Get("/metrics", kVera).status, 200);
  const HttpResponse alice = w_.Get("/metrics", kAlice);
  EXPECT_EQ(alice.status, 403);
  EXPECT_NE(Message(alice).find("user 'alice' may not read /metrics"), std::string::npos)
      << alice.body;
  EXPECT_EQ(w_.Get("/metrics", w_.node_token).status, 403);
  EXPECT_EQ(w_.Get("/metrics", "").status, 401);
}

// AGE as kubectl's own tables write it: two units while the larger is small.
// Other tenants' workload names in text the scheduler wrote: told as another tenant's workload;
// the reader's own, numbers ("20/16 GPUs"), kinds ("workload/a4") and words with capitals or
// within paths are left.
TEST(ConcealTest, OtherTenantsNamesAreToldAsAnotherTenantsWorkload) {
  const auto mine = [](const std::string& t) { return t == "team-a"; };
  EXPECT_EQ(ConcealText("preempted by team-b/b1 (queue team-b reclaims its guarantee)", mine),
            "preempted by another tenant's workload (queue team-b reclaims its guarantee)");
  EXPECT_EQ(ConcealText("4 possible victims (team-b/x-1, team-a/y, team-b/z-2 and 1 more).", mine),
            "4 possible victims (another tenant's workload, team-a/y, another tenant's workload "
            "and 1 more).");
  EXPECT_EQ(ConcealText("queue team-a over its borrowing limit for H100: 64/48; 0.5/1", mine),
            "queue team-a over its borrowing limit for H100: 64/48; 0.5/1");
  EXPECT_EQ(ConcealText("moved workload/a4 off GPU-b-1/3 and /registry/x/y", mine),
            "moved workload/a4 off GPU-b-1/3 and /registry/x/y");
  EXPECT_EQ(ConcealText("team-b/b1", mine), "another tenant's workload");
  // (Label and taint keys are no tenant's: a review saw node selectors garbled.)
  EXPECT_EQ(ConcealText("on the nodes its nodeSelector fabrica.dev/gpu-model=H100 leaves it; "
                        "taint nvidia.com/gpu:NoSchedule",
                        mine),
            "on the nodes its nodeSelector fabrica.dev/gpu-model=H100 leaves it; taint "
            "nvidia.com/gpu:NoSchedule");
  nlohmann::json status = {{"message", "by team-c/w"},
                           {"preemption", {{"by", "team-c/w"}, {"count", 2}}},
                           {"list", {"team-a/mine", "team-c/theirs"}}};
  Conceal(status, mine);
  EXPECT_EQ(status["message"], "by another tenant's workload");
  EXPECT_EQ(status["preemption"]["by"], "another tenant's workload");
  EXPECT_EQ(status["preemption"]["count"], 2);
  EXPECT_EQ(status["list"][0], "team-a/mine");
  EXPECT_EQ(status["list"][1], "another tenant's workload");
}

TEST(TableTest, AgesReadAsKubectls) {
  const int64_t s = 1000, m = 60 * s, h = 60 * m, d = 24 * h;
  const std::vector<std::pair<int64_t, std::string>> cases = {{-5 * s, "<invalid>"},
                                                              {-500, "0s"},
                                                              {0, "0s"},
                                                              {119 * s, "119s"},
                                                              {2 * m, "2m"},
                                                              {4 * m + 12 * s, "4m12s"},
                                                              {17 * m + 5 * s, "17m"},
                                                              {5 * h + 3 * m, "5h3m"},
                                                              {30 * h, "30h"},
                                                              {3 * d + 4 * h, "3d4h"},
                                                              {40 * d, "40d"},
                                                              {(2 * 365 + 10) * d, "2y10d"},
                                                              {9 * 365 * d, "9y"}};
  for (const auto& [ms, want] : cases) EXPECT_EQ(HumanAge(ms), want) << ms;
}

// A queue's wide columns name CPU and memory limits and what it borrows of them, after its GPU
// flavours' (a trial's cpu borrowingLimit, memory lendingLimit and 50 cores and 500Gi borrowed
// all read "-" or "0").
TEST(TableTest, QueueColumnsNameCpuAndMemoryLimitsAndBorrowing) {
  const nlohmann::json spec = nlohmann::json::parse(R"({"quotas": {
      "gpu": {"guaranteed": 4, "borrowingLimit": 2},
      "cpu": {"guaranteed": 40, "borrowingLimit": 10},
      "memory": {"guaranteed": "256Gi", "lendingLimit": "64Gi"}}})");
  EXPECT_EQ(QueueLimits(spec, "borrowingLimit"), "gpu:2,cpu:10");
  EXPECT_EQ(QueueLimits(spec, "lendingLimit"), "memory:64Gi");
  nlohmann::json status = nlohmann::json::parse(R"({"usedGpus": 0, "guaranteedGpus": 4,
      "cpu": {"used": 50, "guaranteed": 40}, "memory": {"used": "500Gi", "guaranteed": "0Mi"}})");
  EXPECT_EQ(QueueBorrowed(status), "cpu:10,memory:500Gi");
  EXPECT_EQ(ResourceBorrowedOf(status, "memory"), "500Gi");
  status["usedGpus"] = 6;
  EXPECT_EQ(QueueBorrowed(status), "2,cpu:10,memory:500Gi");
  status["cpu"]["used"] = 20;
  status["memory"]["used"] = "0Mi";
  EXPECT_EQ(QueueBorrowed(status), "2");
  status["usedGpus"] = 1;
  EXPECT_EQ(QueueBorrowed(status), "0");
  EXPECT_EQ(ResourceBorrowed(status), "");
}

// A node's load, whoever's work it is: a tenant reads the GPUs others' work holds on a shared
// node as a sum, never their workloads (a trial's tenant read a busy node as idle); room planned
// for pending work is counted apart.
TEST(ApiListTest, NodeAllocationsSumEveryonesWorkAndNameNone) {
  World w;
  w.Seed();  // team-a/wa and team-b/wb on n1's GPU 0
  json waiting = Parse(w.Get(Item("workloads", "team-b", "wb2")));
  waiting["status"] = {{"phase", "Pending"}, {"nomination", {Assignment("n2")}}};
  ASSERT_EQ(
      w.Do("PUT", Item("workloads", "team-b", "wb2") + "/status", kAdmin, waiting.dump()).status,
      200);
  HttpResponse r = w.Get(Collection("nodeallocations"), kAlice);
  ASSERT_EQ(r.status, 200) << r.body;
  const json list = Parse(r);
  ASSERT_EQ(list["items"].size(), 2u) << r.body;
  const json& n1 = list["items"][0];
  EXPECT_EQ(n1["metadata"].value("name", ""), "n1");
  EXPECT_EQ(n1["gpus"][0].value("gpuMilli", 0), 2000);  // (both tenants' pods on GPU 0)
  EXPECT_EQ(n1.value("unreadGpuMilli", 0), 1000);       // team-b's, which alice cannot read
  const json& n2 = list["items"][1];
  EXPECT_EQ(n2["gpus"][0].value("gpuMilli", 0), 0);
  EXPECT_EQ(n2["gpus"][0].value("heldMilli", 0), 1000);
  EXPECT_EQ(r.body.find("wb"), std::string::npos) << "a workload named: " << r.body;
  // An admin reads it all; one node alone; only GET.
  EXPECT_EQ(
      Parse(w.Get(Collection("nodeallocations"), kAdmin))["items"][0].value("unreadGpuMilli", -1),
      0);
  const json one = Parse(w.Get(Collection("nodeallocations") + "/n2", kAlice));
  EXPECT_EQ(one.value("kind", ""), "NodeAllocation");
  EXPECT_EQ(one["metadata"].value("name", ""), "n2");
  EXPECT_EQ(one["gpus"][0].value("heldMilli", 0), 1000);
  EXPECT_EQ(w.Do("DELETE", Collection("nodeallocations") + "/n1", kAdmin).status, 405);
  EXPECT_EQ(w.Get(Collection("nodeallocations") + "/nosuch", kAlice).status, 404);
  EXPECT_EQ(w.Get(Collection("nodeallocations") + "/n1/x", kAlice).status, 404);
  EXPECT_EQ(w.Get(Collection("nodeallocations") + "?watch=true", kAlice).status, 400);
  EXPECT_EQ(w.Get(Collection("nodeallocations"), "no-such-token").status, 401);
}

// Free room isolation keeps for some tenants says for whom (a trial read a share's rest as free
// to all): a trusted share's for its trust domain, a standard one's for its tenant, an untrusted
// tenant's MIG GPU for it, another MIG GPU for tenants not untrusted, an exclusive node for its
// owner; a tenant or domain the caller cannot read is "another".
TEST(ApiListTest, NodeAllocationsSayWhomIsolationKeepsFreeRoomFor) {
  World w;
  w.MustCreate(Collection("tenants"), TenantObject("team-a", "trusted", "serving"));
  w.MustCreate(Collection("tenants"), TenantObject("team-b", "standard", "team-b"));
  w.MustCreate(Collection("tenants"), TenantObject("team-c", "untrusted", "team-c"));
  json exclusive = TenantObject("team-d", "untrusted", "team-d");
  exclusive["spec"]["exclusiveNodes"] = true;
  w.MustCreate(Collection("tenants"), exclusive);
  w.MustCreate(Collection("queues"), QueueObject("q1"));
  for (const char* n : {"n1", "n2", "n3"}) w.MustCreate(Collection("nodes"), NodeObject(n));
  const auto device = [](int index, int milli, const std::string& mig = "") {
    json d = {{"index", index}, {"gpuMilli", milli}};
    if (!mig.empty()) d["migSlice"] = 0, d["migProfile"] = mig;
    return d;
  };
  const auto run = [&](const std::string& ns, const std::string& name, const std::string& node,
                       const json& d) {
    w.MustCreate(Collection("workloads", ns), WorkloadObject(ns, name));
    w.MustSetStatus(Item("workloads", ns, name),
                    {{"phase", "Running"},
                     {"assignments", {{{"pod", "main-0"}, {"node", node}, {"devices", {d}}}}}});
  };
  run("team-a", "share", "n1", device(0, 250));
  run("team-b", "share", "n1", device(1, 500));
  run("team-b", "whole", "n1", device(2, 1000));
  run("team-c", "slice", "n2", device(0, 142, "1g.10gb"));
  run("team-b", "slice", "n2", device(1, 142, "1g.10gb"));
  run("team-d", "whole", "n3", device(0, 1000));
  const auto gpus = [](const json& node) {
    std::map<int, std::string> to;
    for (const json& g : node["gpus"]) to[g.value("index", -1)] = g.value("openTo", "");
    return to;
  };
  const json admin = Parse(w.Get(Collection("nodeallocations"), kAdmin));
  ASSERT_EQ(admin["items"].size(), 3u) << admin.dump();
  EXPECT_EQ(
      gpus(admin["items"][0]),
      (std::map<int, std::string>{
          {0, "trust domain serving"}, {1, "tenant team-b"}, {2, ""},  // (full: no room to keep)
      }));
  EXPECT_EQ(gpus(admin["items"][1]), (std::map<int, std::string>{
                                         {0, "tenant team-c (untrusted)"},
                                         {1, "tenants that are not untrusted"},
                                     }));
  EXPECT_FALSE(admin["items"][0].contains("openTo"));
  EXPECT_EQ(admin["items"][2].value("openTo", ""), "tenant team-d (its exclusive node)");
  // alice reads team-a only: the others are "another".
  const json alice = Parse(w.Get(Collection("nodeallocations"), kAlice));
  ASSERT_EQ(alice["items"].size(), 3u);
  EXPECT_EQ(gpus(alice["items"][0]), (std::map<int, std::string>{
                                         {0, "trust domain serving"},
                                         {1, "another tenant"},
                                         {2, ""},
                                     }));
  EXPECT_EQ(gpus(alice["items"][1])[0], "another tenant (untrusted)");
  EXPECT_EQ(alice["items"][2].value("openTo", ""), "another tenant (its exclusive node)");
  // bob reads team-b only: serving is another trust domain.
  const json bob = Parse(w.Get(Collection("nodeallocations") + "/n1", kBob));
  EXPECT_EQ(gpus(bob)[0], "another trust domain");
  EXPECT_EQ(gpus(bob)[1], "tenant team-b");
  EXPECT_EQ(bob.dump().find("serving"), std::string::npos) << bob.dump();
}

// A tenant user's list across tenants pages through every tenant's keys; the continue token must
// not name another tenant's workload ("workloads of other tenants are never readable").
TEST(ApiListTest, ContinueTokensDoNotLeakOtherTenantsNames) {
  World w;
  w.Seed();
  std::string cont;
  std::vector<std::string> seen;
  for (int pages = 0; pages < 10; ++pages) {
    HttpRequest req = MakeRequest("GET", Collection("workloads") + "?limit=1", kAlice);
    if (!cont.empty()) req.query["continue"] = cont;
    HttpResponse r = w.api().Handle(req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json page = Parse(r);
    for (const json& i : page["items"]) seen.push_back(i["metadata"].value("name", ""));
    cont = page["metadata"].value("continue", "");
    EXPECT_EQ(cont.find("team-b"), std::string::npos) << "alice got continue token " << cont;
    EXPECT_EQ(cont.find("wb"), std::string::npos) << "alice got continue token " << cont;
    if (cont.empty()) break;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"wa", "wa2"}));
}

// ---------------------------------------------------------------------------------------------
// Watch.

TEST(ApiWatchTest, ReplaysFromResourceVersionThenStreamsInOrder) {
  World w;
  const std::string path = Collection("workloads", "team-a");
  w.MustCreate(Collection("tenants"), TenantObject("team-a"));
  w.MustCreate(path, WorkloadObject("team-a", "old"));
  const int64_t r = w.store().Revision();

  // History after R: ADDED b, MODIFIED old, DELETED b.
  w.MustCreate(path, WorkloadObject("team-a", "b"));
  ASSERT_EQ(w.Do("PATCH", Item("workloads", "team-a", "old"), kAdmin,
                 R"({"metadata":{"labels":{"v":"2"}}})", kMergePatch)
                .status,
            200);
  ASSERT_EQ(w.Do("DELETE", Item("workloads", "team-a", "b"), kAdmin).status, 200);

  HttpResponse resp =
      w.Do("GET", path + "?watch=true&resourceVersion=" + std::to_string(r), kAlice);
  ASSERT_EQ(resp.status, 200) << resp.body;
  ASSERT_NE(resp.stream, nullptr);
  WatchDriver d(resp.stream);
  EXPECT_EQ(
      Summaries(d.Events()),
      (std::vector<std::string>{"ADDED team-a/b", "MODIFIED team-a/old", "DELETED team-a/b"}));

  // Live: the same three kinds, after the replay.
  w.MustCreate(path, WorkloadObject("team-a", "c"));
  w.MustSetStatus(Item("workloads", "team-a", "c"), {{"phase", "Running"}});
  ASSERT_EQ(w.Do("DELETE", Item("workloads", "team-a", "c"), kAdmin).status, 200);
  const std::vector<json> events = d.Events();
  EXPECT_EQ(Summaries(events),
            (std::vector<std::string>{"ADDED team-a/b", "MODIFIED team-a/old", "DELETED team-a/b",
                                      "ADDED team-a/c", "MODIFIED team-a/c", "DELETED team-a/c"}));
  // Each event carries its resourceVersion, strictly increasing, all after R.
  int64_t last = r;
  for (const json& e : events) {
    const int64_t rv = std::stoll(e["object"]["metadata"].value("resourceVersion", "0"));
    EXPECT_GT(rv, last) << e.dump();
    last = rv;
  }
  EXPECT_EQ(last, w.store().Revision());
  EXPECT_EQ(events[4]["object"]["status"].value("phase", ""), "Running");
  EXPECT_FALSE(d.finished());
}

// As in Kubernetes, a watch with no version (or version 0) starts from the current state: what
// is there now, once, as ADDED events (never its past versions, nor what was deleted: a trial's
// `kubectl get wl NAME -w`, which asks for version 0, replayed a running workload's history),
// then each change; a watch from a version sends what changed after it only.
TEST(ApiWatchTest, WithoutResourceVersionStartsFromTheCurrentStateAndFiltersBySelector) {
  for (const char* version : {"", "&resourceVersion=", "&resourceVersion=0"}) {
    SCOPED_TRACE(version);
    World w;
    const std::string path = Collection("workloads", "team-a");
    w.MustCreate(Collection("tenants"), TenantObject("team-a"));
    w.MustCreate(path, WorkloadObject("team-a", "before", {{"app", "chat"}}));
    w.MustSetStatus(Item("workloads", "team-a", "before"), {{"phase", "Scheduled"}});
    w.MustSetStatus(Item("workloads", "team-a", "before"), {{"phase", "Running"}});
    w.MustCreate(path, WorkloadObject("team-a", "gone", {{"app", "chat"}}));
    ASSERT_EQ(w.Do("DELETE", Item("workloads", "team-a", "gone"), kAlice).status, 200);
    w.MustCreate(path, WorkloadObject("team-a", "other", {{"app", "train"}}));
    const int64_t then = w.store().Revision();
    HttpResponse resp = w.Do("GET", path + "?watch=true&labelSelector=app=chat" + version, kAlice);
    ASSERT_EQ(resp.status, 200);
    WatchDriver d(resp.stream);
    w.MustCreate(path, WorkloadObject("team-a", "chat2", {{"app", "chat"}}));
    w.MustCreate(path, WorkloadObject("team-a", "train", {{"app", "train"}}));
    const std::vector<json> events = d.Events();
    EXPECT_EQ(Summaries(events),
              (std::vector<std::string>{"ADDED team-a/before", "ADDED team-a/chat2"}));
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events[0]["object"]["status"].value("phase", ""), "Running");

    // Cancel stops delivery.
    resp.stream->Cancel();
    w.MustCreate(path, WorkloadObject("team-a", "chat3", {{"app", "chat"}}));
    EXPECT_EQ(d.Events().size(), 2u);

    // From a version: what changed after it, nothing before.
    HttpResponse since = w.Do(
        "GET", path + "?watch=true&labelSelector=app=chat&resourceVersion=" + std::to_string(then),
        kAlice);
    ASSERT_EQ(since.status, 200);
    EXPECT_EQ(Summaries(WatchDriver(since.stream).Events()),
              (std::vector<std::string>{"ADDED team-a/chat2", "ADDED team-a/chat3"}));
  }
}

// A watcher that was shown an object must learn when it leaves its selection (Kubernetes sends
// DELETED): a node whose workload was taken away from it (requeued elsewhere), or a selector
// watch whose object lost the label. Otherwise a real agent keeps running what it no longer owns.
TEST(ApiWatchTest, ObjectLeavingTheSelectionIsReported) {
  World w;
  w.Seed();
  HttpResponse node_watch = w.Do("GET", Collection("workloads") + "?watch=true", w.node_token);
  HttpResponse label_watch =
      w.Do("GET", Collection("workloads", "team-b") + "?watch=true&labelSelector=app=x", kAdmin);
  ASSERT_EQ(node_watch.status, 200);
  ASSERT_EQ(label_watch.status, 200);
  WatchDriver by_node(node_watch.stream);
  WatchDriver by_label(label_watch.stream);
  const std::string wb = Item("workloads", "team-b", "wb");
  ASSERT_EQ(w.Do("PATCH", wb, kAdmin, R"({"metadata":{"labels":{"app":"x"}}})", kMergePatch).status,
            200);
  ASSERT_EQ(
      w.Do("PATCH", wb, kAdmin, R"({"metadata":{"labels":{"app":null}}})", kMergePatch).status,
      200);
  w.MustSetStatus(wb, {{"phase", "Pending"}, {"reason", "NodeLost"}});
  const std::vector<std::string> label_events = Summaries(by_label.Events());
  ASSERT_EQ(label_events.size(), 2u);
  EXPECT_EQ(label_events.back(), "DELETED team-b/wb");
  const std::vector<std::string> node_events = Summaries(by_node.Events());
  ASSERT_FALSE(node_events.empty());
  EXPECT_EQ(node_events.back(), "DELETED team-b/wb");
}

// The same for an object the watch showed no event of, only knew from before it began: an agent
// restarted with its workload running must still learn that the workload was taken away.
TEST(ApiWatchTest, ObjectVisibleWhenTheWatchBeganThatLeavesIsReported) {
  World w;
  w.Seed();
  // (From the version of a list the agent read before: an object that changed since.)
  const int64_t listed = w.store().Revision();
  HttpResponse watch =
      w.Do("GET", Collection("workloads") + "?watch=true&resourceVersion=" + std::to_string(listed),
           w.node_token);
  ASSERT_EQ(watch.status, 200);
  WatchDriver d(watch.stream);
  w.MustSetStatus(Item("workloads", "team-a", "wa"), {{"phase", "Pending"}});
  const std::vector<json> events = d.Events();
  ASSERT_EQ(Summaries(events), (std::vector<std::string>{"DELETED team-a/wa"}));
  // The last state the node could see, at the revision of the change.
  EXPECT_EQ(events[0]["object"]["status"].value("phase", ""), "Scheduled");
  EXPECT_EQ(events[0]["object"]["metadata"].value("resourceVersion", ""),
            std::to_string(w.store().Revision()));
}

TEST(ApiWatchTest, CompactedResourceVersionGets410) {
  World w(/*keep_events=*/3);
  const std::string path = Collection("workloads", "team-a");
  w.MustCreate(Collection("tenants"), TenantObject("team-a"));
  for (int i = 0; i < 6; ++i) w.MustCreate(path, WorkloadObject("team-a", "w" + std::to_string(i)));
  HttpResponse resp = w.Do("GET", path + "?watch=true&resourceVersion=1", kAdmin);
  ASSERT_EQ(resp.status, 200);
  WatchDriver d(resp.stream);
  std::vector<json> events = d.Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value("type", ""), "ERROR");
  EXPECT_EQ(events[0]["object"].value("code", 0), 410);
  EXPECT_TRUE(d.finished());
  EXPECT_EQ(w.Do("GET", path + "?watch=true&resourceVersion=x", kAdmin).status, 400);
}

// ---------------------------------------------------------------------------------------------
// Bad input: the right code, a Status naming the field, and nothing stored changes.

class ApiBadInputTest : public testing::Test {
 protected:
  void SetUp() override {
    w_.MustCreate(Collection("tenants"), TenantObject("team-a"));
    w_.MustCreate(Collection("nodes"), NodeObject("big", 8));
    w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "existing"));
    existing_ = w_.Get(Item("workloads", "team-a", "existing")).body;
  }

  // Sends the request as alice and checks code, Status body and that nothing changed.
  void ExpectRejected(const std::string& method, const std::string& target, const std::string& body,
                      const std::string& content_type, int code, const std::string& names) {
    SCOPED_TRACE(method + " " + target + " " + body);
    const int64_t rev = w_.store().Revision();
    HttpResponse r = w_.Do(method, target, kAlice, body, content_type);
    EXPECT_EQ(r.status, code) << r.body;
    json j = Parse(r);
    EXPECT_EQ(Str(j, "kind"), "Status") << r.body;
    EXPECT_EQ(j.is_object() && j.contains("code") ? j["code"] : json(), code) << r.body;
    EXPECT_EQ(Str(j, "status"), "Failure") << r.body;
    EXPECT_NE(Str(j, "message").find(names), std::string::npos)
        << "the message should name '" << names << "': " << r.body;
    EXPECT_EQ(w_.store().Revision(), rev);
    EXPECT_EQ(w_.Get(Item("workloads", "team-a", "existing")).body, existing_);
    EXPECT_EQ(w_.Get(Item("workloads", "team-a", "new")).status, 404);
  }
  // Sends `obj` as the admin and checks the code, that the message holds `fragment` and that
  // nothing was stored.
  void ExpectAdminRefused(const std::string& method, const std::string& target, const json& obj,
                          int code, const std::string& fragment) {
    SCOPED_TRACE(method + " " + target + " " + obj.dump());
    const int64_t rev = w_.store().Revision();
    HttpResponse r = w_.Do(method, target, kAdmin, obj.dump(),
                           method == "PATCH" ? kMergePatch : "application/json");
    EXPECT_EQ(r.status, code) << r.body;
    EXPECT_NE(r.body.find(fragment), std::string::npos) << fragment << " not in " << r.body;
    EXPECT_EQ(w_.store().Revision(), rev);
  }
  void ExpectCreateRejected(const json& obj, int code, const std::string& names) {
    ExpectRejected("POST", Collection("workloads", "team-a"), obj.dump(), "application/json", code,
                   names);
  }

  json New() { return WorkloadObject("team-a", "new"); }

  World w_;
  std::string existing_;
};

TEST_F(ApiBadInputTest, MalformedJson) {
  ExpectRejected("POST", Collection("workloads", "team-a"), R"({"metadata": {"name": "new")",
                 "application/json", 400, "JSON");
  ExpectRejected("PUT", Item("workloads", "team-a", "existing"), "{not json", "application/json",
                 400, "JSON");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"), "{", kMergePatch, 400, "JSON");
  // Where and what (a trial's 1e400 read as a bare "malformed JSON body").
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"),
                 R"({"spec": {"maxRuntimeSeconds": 1e400}})", kMergePatch, 400,
                 "malformed JSON body: number overflow parsing '1e400'");
  ExpectRejected("POST", Collection("workloads", "team-a"), R"({"metadata": {"name": 1x}})",
                 "application/json", 400, "malformed JSON body: parse error at line 1, column ");
  // ... on an eviction's body too (a re-trial's read only "must be a JSON object").
  ExpectRejected("POST", Item("workloads", "team-a", "existing") + "/eviction",
                 R"({"reason": "x",})", "application/json", 400,
                 "eviction: malformed JSON body: parse error at line 1, column ");
  // An invalid UTF-8 byte: where, the byte escaped (quoted raw, it made the reply itself fail).
  ExpectRejected("POST", Collection("workloads", "team-a"), "{\"metadata\": \"\xff\"}",
                 "application/json", 400,
                 "malformed JSON body: parse error at line 1, column 15: syntax error while "
                 "parsing value - invalid string: ill-formed UTF-8 byte; last read: '\"\\xFF'");
  // A key twice in one object (the last would win silently), at any depth.
  const std::string spec = WorkloadObject("team-a", "new")["spec"].dump();
  ExpectRejected("POST", Collection("workloads", "team-a"),
                 R"({"apiVersion": "fabrica.dev/v1", "kind": "Workload", "metadata": {"name": "new",
                     "namespace": "team-a"}, "spec": )" +
                     spec + R"(, "spec": {}})",
                 "application/json", 400, "key \"spec\" is given twice in one object");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"),
                 R"({"spec": {"maxRuntimeSeconds": 100, "maxRuntimeSeconds": 5000}})", kMergePatch,
                 400, "key \"maxRuntimeSeconds\" is given twice");
  // Nested deeper than any object of ours, refused before anything reads it recursively (a
  // trial's body, 20 KB nested 10,000 deep, crashed the server); 100 levels are still read.
  const auto nested = [](int depth) {
    return R"({"apiVersion": "fabrica.dev/v1", "kind": "Workload", "metadata": {"name": "new",
              "namespace": "team-a"}, "spec": {"x": )" +
           std::string(depth, '[') + std::string(depth, ']') + "}}";
  };
  ExpectRejected("POST", Collection("workloads", "team-a"), nested(20000), "application/json", 400,
                 "malformed JSON body: it nests objects and arrays deeper than 100 levels");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"),
                 R"({"spec": {"x": )" + std::string(20000, '[') + std::string(20000, ']') + "}}",
                 kMergePatch, 400, "deeper than 100 levels");
  json shallower = json::array();
  for (int i = 1; i < 97; ++i) shallower = json::array({shallower});
  json obj = New();
  obj["spec"]["x"] = shallower;
  ExpectCreateRejected(obj, 422, "spec.x: unknown field");
}

// Names users of other systems give a tenant's trust are pointed to Fabrica's (a trial's
// `trustLevel` got no hint).
TEST_F(ApiBadInputTest, ATenantsTrustLevelIsPointedToTrust) {
  json tenant = TenantObject("team-z");
  tenant["spec"] = {{"trustLevel", "trusted"}};
  const uint64_t rev = w_.store().Revision();
  HttpResponse r = w_.Do("POST", Collection("tenants"), kAdmin, tenant.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.trustLevel: unknown field (did you mean trust?)"), std::string::npos)
      << r.body;
  EXPECT_EQ(w_.store().Revision(), rev);
}

TEST_F(ApiBadInputTest, PriorityClassesNeedAnIntegerValueAndNothingElse) {
  auto refused = [&](const json& obj, const std::string& fragment) {
    HttpResponse r = w_.Do("POST", Collection("priorityclasses"), kAdmin, obj.dump());
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find(fragment), std::string::npos) << fragment << " not in " << r.body;
  };
  for (const json& value : {json("high"), json(1.5), json(2'000'000'000)})
    refused(PriorityClassObject("bad", value), "spec.value: must be an integer");
  json missing = PriorityClassObject("bad");
  missing["spec"].erase("value");
  refused(missing, "spec.value: required");
  // Kubernetes' preemptionPolicy and globalDefault are taken, with their values checked.
  json extra = PriorityClassObject("bad");
  extra["spec"]["preemptionPolicy"] = "Sometimes";
  refused(extra, "spec.preemptionPolicy: must be PreemptLowerPriority or Never, got 'Sometimes'");
  extra["spec"]["preemptionPolicy"] = "Never";
  extra["spec"]["globalDefault"] = "yes";
  refused(extra, "spec.globalDefault: expected true or false");
  extra["spec"].erase("globalDefault");
  extra["spec"]["preemptPolicy"] = "Never";
  refused(extra, "spec.preemptPolicy: unknown field");
  json misspelt = PriorityClassObject("bad");
  misspelt["descripton"] = "x";
  misspelt["metadata"]["lables"] = json::object();
  refused(misspelt, "descripton: unknown field; metadata.lables: unknown field");
  json tenants = PriorityClassObject("bad");
  tenants["spec"]["tenants"] = "team-a";
  refused(tenants, "spec.tenants: expected a list");
  tenants["spec"]["tenants"] = json::array({"team-a", 3});
  refused(tenants, "spec.tenants[1]: expected a tenant's name");
  tenants["spec"]["tenants"] = json::array({"team-a", "Team B"});
  refused(tenants, "spec.tenants[1]:");
  tenants["spec"]["tenants"] = json::array({"team-a", "team-a"});
  refused(tenants, "spec.tenants[1]: 'team-a' is named twice");
  // Nothing was stored; a good one is.
  EXPECT_EQ(w_.Get(Item("priorityclasses", "", "bad")).status, 404);
  EXPECT_EQ(
      w_.Do("POST", Collection("priorityclasses"), kAdmin, PriorityClassObject("ok").dump()).status,
      201);
}

// ResourceFlavors are checked like a scenario's flavours; a queue's quotas may name only stored
// ones (or the built-in `gpu`), and a flavour a queue names cannot be deleted. A refused write
// changes nothing.
TEST_F(ApiBadInputTest, ResourceFlavorsAreCheckedAndQuotasNameThem) {
  const auto refused = [&](const std::string& method, const std::string& target, const json& obj,
                           int code, const std::string& fragment) {
    ExpectAdminRefused(method, target, obj, code, fragment);
  };
  const std::string flavors = Collection("resourceflavors");
  refused("POST", flavors, FlavorObject("bad", {{"nodeLabels", {{"a", "b"}}}}), 422,
          "spec.nodeLabels");
  refused("POST", flavors, FlavorObject("bad", {{"kind", "tpu"}}), 422, "spec.kind");
  refused("POST", flavors, FlavorObject("bad", {{"kind", "whole"}, {"migProfiles", {"1g.10gb"}}}),
          422, "spec.migProfiles");
  refused("POST", flavors, FlavorObject("bad", {{"models", "H100"}}), 422, "spec.models");
  refused("POST", flavors, FlavorObject("Bad"), 422, "metadata.name");
  refused("POST", flavors, FlavorObject("bad", {{"name", "other"}}), 422, "spec.name");
  refused("POST", flavors, FlavorObject("cpu"), 422, "metadata.name: 'cpu' is reserved");
  EXPECT_EQ(w_.Get(Item("resourceflavors", "", "bad")).status, 404);
  // Models no node has: accepted, and said.
  HttpResponse future =
      w_.Do("POST", flavors, kAdmin, FlavorObject("later", {{"models", {"H100", "B300"}}}).dump());
  ASSERT_EQ(future.status, 201) << future.body;
  EXPECT_EQ(WarningsOf(future),
            (std::vector<std::string>{
                "299 - \"spec.models: no node of the fleet has B300 (the fleet has H100); "
                "accepted, the flavour takes such GPUs when they join\""}));
  EXPECT_EQ(w_.Do("DELETE", Item("resourceflavors", "", "later"), kAdmin).status, 200);

  json queue = QueueObject("qa");
  queue["spec"]["quotas"] = {{"h100", {{"guaranteed", 4}}},
                             {"gpu", {{"guaranteed", 2}}},
                             {"cpu", {{"guaranteed", "64"}}},
                             {"memory", {{"guaranteed", "512Gi"}}}};
  refused("POST", Collection("queues"), queue, 422, "spec.quotas.h100");
  w_.MustCreate(flavors, FlavorObject("h100", {{"kind", "whole"}, {"models", {"H100"}}}));
  w_.MustCreate(Collection("queues"), queue);
  refused("PATCH", Item("queues", "", "qa"),
          {{"spec", {{"quotas", {{"a100", {{"guaranteed", 1}}}}}}}}, 422, "spec.quotas.a100");
  refused("DELETE", Item("resourceflavors", "", "h100"), json::object(), 409, "qa");
  // A flavorOrder names stored flavours too, each once, and holds them as quotas do.
  refused("PATCH", Item("queues", "", "qa"), {{"spec", {{"flavorOrder", {"h100", "a100"}}}}}, 422,
          "spec.flavorOrder[1]: ResourceFlavor 'a100' does not exist");
  refused("PATCH", Item("queues", "", "qa"), {{"spec", {{"flavorOrder", {"gpu", "gpu"}}}}}, 422,
          "spec.flavorOrder: 'gpu' is listed twice");
  refused("PATCH", Item("queues", "", "qa"), {{"spec", {{"flavorOrder", {"gpu", 5}}}}}, 422,
          "spec.flavorOrder[1]: expected a flavour name (a string), got 5");
  json ordered = QueueObject("qo");
  ordered["spec"]["flavorOrder"] = {"h100", "gpu"};
  w_.MustCreate(Collection("queues"), ordered);
  // A flavour's own changes are free; once no queue names it, it may go.
  json flavor = Parse(w_.Get(Item("resourceflavors", "", "h100")));
  flavor["spec"]["models"] = {"H100", "H200"};
  EXPECT_EQ(w_.Do("PUT", Item("resourceflavors", "", "h100"), kAdmin, flavor.dump()).status, 200);
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "qa"), kAdmin).status, 200);
  refused("DELETE", Item("resourceflavors", "", "h100"), json::object(), 409,
          "flavorOrder of queue(s) qo");
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "qo"), kAdmin).status, 200);
  EXPECT_EQ(w_.Do("DELETE", Item("resourceflavors", "", "h100"), kAdmin).status, 200);
  // `gpu` is the built-in catch-all: a flavour of that name is refused (a trial's `gpu` of L4s
  // left the H100s charged to no flavour, and a queue of 12 held 28 of them).
  refused("POST", Collection("resourceflavors"), FlavorObject("gpu", {{"models", {"L4"}}}), 422,
          "metadata.name: 'gpu' is the built-in flavour that takes every GPU no other flavour "
          "takes; name yours otherwise");
  // One stored before may still go while quotas name it: the built-in takes its place.
  json stored = FlavorObject("gpu", {{"kind", "whole"}});
  stored["metadata"]["uid"] = "old";
  ASSERT_TRUE(w_.store().Put("/registry/resourceflavors/gpu", stored.dump(), kMustNotExist).ok());
  json on_gpu = QueueObject("qg");
  on_gpu["spec"]["quotas"] = {{"gpu", {{"guaranteed", 1}}}};
  w_.MustCreate(Collection("queues"), on_gpu);
  EXPECT_EQ(w_.Do("DELETE", Item("resourceflavors", "", "gpu"), kAdmin).status, 200);
}

// A queue that would make the tree invalid is refused when written, naming the queue (the
// scheduler admits nothing while its tree is invalid); a queue with queues below it, or with
// work running charged to it, cannot be deleted. A refused write changes nothing.
TEST_F(ApiBadInputTest, QueueWritesKeepTheTreeValidAndQueuesInUseStay) {
  const auto refused = [&](const std::string& method, const std::string& target, const json& obj,
                           int code, const std::string& fragment) {
    ExpectAdminRefused(method, target, obj, code, fragment);
  };
  // A queue made as the admin: its Warning headers, one string.
  const auto warned = [&](const json& queue) {
    HttpResponse made = w_.Do("POST", Collection("queues"), kAdmin, queue.dump());
    EXPECT_EQ(made.status, 201) << made.body;
    std::string said;
    for (const auto& [k, v] : made.headers)
      if (k == "Warning") said += v;
    return said;
  };
  const std::string queues = Collection("queues");
  json org = QueueObject("org");
  org["spec"]["quotas"] = {{"gpu", {{"guaranteed", 8}}}};
  w_.MustCreate(queues, org);
  json team = QueueObject("team-a");
  team["spec"]["parent"] = "org";
  team["spec"]["quotas"] = {{"gpu", {{"guaranteed", 6}}}};
  w_.MustCreate(queues, team);
  json lend = QueueObject("lend");
  lend["spec"]["quotas"] = {{"gpu", {{"guaranteed", 4}, {"lendingLimit", 10}}}};
  refused("POST", queues, lend, 422,
          "Queue 'lend': spec.quotas.gpu.lendingLimit: above the guarantee (10 > 4)");
  // A budget past 32 bits was once narrowed to 0 (2^32) or called negative (2^31).
  for (const int64_t budget : {int64_t{4294967296}, int64_t{2147483648}}) {
    json wide = QueueObject("wide");
    wide["spec"]["disruptionBudget"] = budget;
    refused("POST", queues, wide, 422, "spec.disruptionBudget: must be at most 1000000");
  }
  json negative = QueueObject("negative");
  negative["spec"]["disruptionBudget"] = -2;
  refused("POST", queues, negative, 422, "spec.disruptionBudget: integer must not be negative");
  // A weight below 0 is refused; 0 is a queue with no part of what lies past the guarantees
  // (KAI's overQuotaWeight 0), and an over-quota priority is a whole number, stored as one.
  json weightless = QueueObject("weightless");
  weightless["spec"]["weight"] = -1;
  refused("POST", queues, weightless, 422, "spec.weight: must not be negative, got -1");
  weightless["spec"]["weight"] = "0.0";
  weightless["spec"]["priority"] = "100";
  const json stored = w_.MustCreate(queues, weightless);
  EXPECT_EQ(stored["spec"]["priority"], 100);
  EXPECT_EQ(stored["spec"]["weight"], 0) << stored.dump();
  json halved = QueueObject("halved");
  halved["spec"]["weight"] = "1.5";
  EXPECT_EQ(w_.MustCreate(queues, halved)["spec"]["weight"], 1.5);
  json unranked = QueueObject("unranked");
  unranked["spec"]["priority"] = 1.5;
  refused("POST", queues, unranked, 422,
          "spec.priority: expected an integer between -1000000000 and 1000000000, got '1.5'");
  // A weight given as null is the default (1), as before.
  json null_weight = QueueObject("null-weight");
  null_weight["spec"]["weight"] = nullptr;
  w_.MustCreate(queues, null_weight);
  // Misspellings in the budget, a quota and the spec are named together.
  json misspelt = QueueObject("misspelt");
  misspelt["spec"]["budget"] = {{"amount", "100"}, {"perod", "day"}};
  misspelt["spec"]["quotas"] = {{"gpu", {{"guarantee", 4}}}};
  misspelt["spec"]["wieght"] = 2;
  refused("POST", queues, misspelt, 422,
          "spec.budget.perod: unknown field (did you mean period?); spec.quotas.gpu.guarantee: "
          "unknown field (did you mean guaranteed?); spec.wieght: unknown field (did you mean "
          "weight?)");
  // Bad values are named together too, after any unknown field, and nothing is stored.
  json bad = QueueObject("bad-values");
  bad["spec"]["weight"] = -1;
  bad["spec"]["disruptionBudget"] = "x";
  bad["spec"]["preemption"] = {{"withinQueue", "Sometimes"}};
  bad["spec"]["quotas"] = {{"gpu", {{"guaranteed", "lots"}, {"lendingLimit", -2}}}};
  refused("POST", queues, bad, 422,
          "Queue 'bad-values': spec.weight: must not be negative, got -1; "
          "spec.disruptionBudget: not a number for integer: 'x'; spec.preemption.withinQueue: "
          "must be Never, LowerPriority or LowerOrNewerEqualPriority, got 'Sometimes'; "
          "spec.quotas.gpu.guaranteed: not a number for GPU quantity: 'lots'; "
          "spec.quotas.gpu.lendingLimit: GPU quantity must not be negative: '-2'");
  bad["spec"]["wieght"] = 2;
  refused("POST", queues, bad, 422,
          "spec.wieght: unknown field (did you mean weight?); spec.weight: must not be "
          "negative");
  EXPECT_EQ(w_.Do("GET", Item("queues", "", "bad-values"), kAdmin, "").status, 404);
  // ... also those read after a nested map found an unknown field.
  json nested = QueueObject("nested-misspelt");
  nested["spec"]["preemption"] = {{"withinQueu", "Never"}};
  nested["spec"]["stopPolicy"] = "Paused";
  refused("POST", queues, nested, 422,
          "spec.preemption.withinQueu: unknown field (did you mean withinQueue?); "
          "spec.stopPolicy: must be None, Hold or HoldAndDrain, got 'Paused'");
  // A field of the other map is said to belong there, not guessed at.
  json misplaced = QueueObject("misplaced");
  misplaced["labels"] = {{"a", "b"}};
  misplaced["metadata"]["spec"] = json::object();
  refused("POST", queues, misplaced, 422,
          "labels: unknown field (it belongs in metadata); metadata.spec: unknown field (it "
          "belongs at the top level)");
  json orphan = QueueObject("orphan");
  orphan["spec"]["parent"] = "nowhere";
  refused("POST", queues, orphan, 422, "Queue 'orphan': spec.parent: unknown queue");
  refused("PATCH", Item("queues", "", "org"), {{"spec", {{"parent", "team-a"}}}}, 422,
          "cycle in the queue hierarchy");
  refused("PATCH", Item("queues", "", "team-a"), {{"spec", {{"parent", "team-a"}}}}, 422,
          "Queue 'team-a': spec.parent");
  refused("PATCH", Item("queues", "", "team-a"),
          {{"spec", {{"quotas", {{"gpu", {{"guaranteed", 10}}}}}}}}, 422,
          "Queue 'team-a': spec.quotas.gpu.guaranteed: with it, the children of queue 'org' are "
          "guaranteed 10, more than org's 8");
  // Moved under a parent too small for it: the move is what is refused (a user-style review
  // found its guarantee named).
  json solo = QueueObject("solo");
  solo["spec"]["quotas"] = {{"gpu", {{"guaranteed", 4}}}};
  w_.MustCreate(queues, solo);
  refused("PATCH", Item("queues", "", "solo"), {{"spec", {{"parent", "org"}}}}, 422,
          "Queue 'solo': spec.parent: moved under queue 'org', its children would be guaranteed "
          "10, more than org's 8");
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "solo"), kAdmin).status, 200);
  // In use: a parent, and a leaf whose workload holds devices.
  refused("DELETE", Item("queues", "", "org"), json::object(), 409,
          "Queue 'org' is in use: it is the parent of queue(s) team-a");
  w_.MustSetStatus(Item("workloads", "team-a", "existing"),
                   {{"phase", "Running"}, {"assignments", {Assignment("big")}}});
  refused("DELETE", Item("queues", "", "team-a"), json::object(), 409,
          "1 workload(s) charged to it hold devices (team-a/existing); delete them");
  // What waits there is said with what runs (a user-style review was told of one, then the
  // other).
  w_.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "waiting"));
  w_.MustSetStatus(Item("workloads", "team-a", "waiting"), {{"phase", "Pending"}});
  refused("DELETE", Item("queues", "", "team-a"), json::object(), 409,
          "1 workload(s) charged to it hold devices (team-a/existing), and 1 pending workload(s) "
          "wait in it (team-a/waiting); let the first finish");
  EXPECT_EQ(w_.Do("DELETE", Item("workloads", "team-a", "waiting"), kAdmin).status, 200);
  // A leaf that runs work only as its tenant's queue (the work names no queue) may take a
  // child: that work goes back to unqueued, and the write says so (a trial's hierarchy file,
  // applied parents first, made team-c a leaf that took its tenant's running work, then could
  // neither give it a child nor delete it).
  json child = QueueObject("team-a-sub");
  child["spec"]["parent"] = "team-a";
  std::string said = warned(child);
  EXPECT_NE(said.find("queue team-a is no longer a leaf: tenant team-a's work that names no "
                      "queue, charged to it until now (1 workload(s) charged to it hold devices "
                      "(team-a/existing)), is charged to unqueued from now on"),
            std::string::npos)
      << said;
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "team-a-sub"), kAdmin).status, 200);
  // Nor may a leaf with work running that names it take children (its work would be charged
  // to no queue).
  json named = WorkloadObject("team-a", "named");
  named["spec"]["queue"] = "team-a";
  w_.MustCreate(Collection("workloads", "team-a"), named);
  w_.MustSetStatus(Item("workloads", "team-a", "named"),
                   {{"phase", "Running"}, {"assignments", {Assignment("big")}}});
  refused("POST", queues, child, 409,
          "spec.parent: queue 'team-a' is a leaf with work: 1 workload(s) charged to it hold "
          "devices (team-a/named)");
  // Nor one that work waiting names (it would wait on a queue with children for good).
  w_.MustSetStatus(Item("workloads", "team-a", "named"), {{"phase", "Pending"}});
  refused("POST", queues, child, 409,
          "spec.parent: queue 'team-a' is a leaf with work: 1 pending workload(s) wait in it "
          "(team-a/named) and name it");
  w_.MustSetStatus(Item("workloads", "team-a", "named"), {{"phase", "Succeeded"}});
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "unqueued"), kAdmin).status, 404);
  w_.MustSetStatus(Item("workloads", "team-a", "existing"), {{"phase", "Succeeded"}});
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "team-a"), kAdmin).status, 200);
  EXPECT_EQ(w_.Do("DELETE", Item("queues", "", "org"), kAdmin).status, 200);
  // A leaf made with its tenant's name takes that tenant's running work that names no queue
  // from unqueued: the write says so.
  w_.MustSetStatus(Item("workloads", "team-a", "existing"),
                   {{"phase", "Running"}, {"assignments", {Assignment("big")}}});
  said = warned(QueueObject("team-a"));
  EXPECT_NE(said.find("tenant team-a's work that names no queue is charged to this queue from "
                      "now on, its tenant's leaf: 1 workload(s) charged to it hold devices "
                      "(team-a/existing); until now it ran in unqueued"),
            std::string::npos)
      << said;
}

// Quota amounts are stored in one form, so that the same quota written another way (2, 2.0,
// "2", "2000m") is no change: no new generation, no watch event, `fabctl apply` says
// "unchanged" (a user-style review saw each of them counted a change, and "2.0" stored as a
// string).
TEST_F(ApiBadInputTest, QueueQuotasAreStoredInOneForm) {
  const std::string queues = Collection("queues");
  json q = QueueObject("canon");
  q["spec"]["quotas"] = {{"gpu", {{"guaranteed", "2000m"}, {"borrowingLimit", 0.5}}},
                         {"cpu", {{"guaranteed", "16000m"}, {"lendingLimit", "1500m"}}},
                         {"memory", {{"guaranteed", "65536Mi"}}}};
  q["spec"]["disruptionBudget"] = "3";
  q["spec"]["reclaimMinRuntimeSeconds"] = "1800";
  q["spec"]["preemptMinRuntimeSeconds"] = "600";
  json created = w_.MustCreate(queues, q);
  EXPECT_EQ(created["spec"]["preemptMinRuntimeSeconds"], json(600)) << created.dump();
  EXPECT_EQ(created["spec"]["disruptionBudget"], json(3)) << created.dump();
  EXPECT_EQ(created["spec"]["reclaimMinRuntimeSeconds"], json(1800)) << created.dump();
  const json& quotas = created["spec"]["quotas"];
  EXPECT_EQ(quotas["gpu"]["guaranteed"], json(2)) << quotas.dump();
  EXPECT_TRUE(quotas["gpu"]["guaranteed"].is_number_integer()) << quotas.dump();
  EXPECT_EQ(quotas["gpu"]["borrowingLimit"], json(0.5)) << quotas.dump();
  EXPECT_EQ(quotas["cpu"]["guaranteed"], json("16")) << quotas.dump();
  EXPECT_EQ(quotas["cpu"]["lendingLimit"], json("1500m")) << quotas.dump();
  EXPECT_EQ(quotas["memory"]["guaranteed"], json("64Gi")) << quotas.dump();
  const std::string item = Item("queues", "", "canon");
  for (const json& same : {json(2), json(2.0), json("2"), json("2000m")}) {
    json again = Parse(w_.Get(item));
    const std::string rv = again["metadata"].value("resourceVersion", "");
    again["spec"]["quotas"]["gpu"]["guaranteed"] = same;
    HttpResponse r = w_.Do("PUT", item, kAdmin, again.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    json written = Parse(r);
    EXPECT_EQ(written["metadata"].value("resourceVersion", ""), rv) << same.dump();
    EXPECT_EQ(written["metadata"].value("generation", 0), 1) << same.dump();
  }
}

// A spec field given as null is not set, as Kubernetes reads it (YAML's "weight:" left empty):
// a trial's was stored as null and shown as "weight null", and a null disruptionBudget or
// borrowingLimit was refused as "required field is missing".
TEST_F(ApiBadInputTest, ASpecFieldGivenAsNullIsNotSet) {
  json q = QueueObject("nulls");
  q["spec"]["weight"] = nullptr;
  q["spec"]["disruptionBudget"] = nullptr;
  q["spec"]["quotas"] = {{"gpu", {{"guaranteed", 2}, {"borrowingLimit", nullptr}}}};
  HttpResponse r = w_.Do("POST", Collection("queues"), kAdmin, q.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const json stored = Parse(w_.Get(Item("queues", "", "nulls")));
  EXPECT_FALSE(stored["spec"].contains("weight")) << stored.dump();
  EXPECT_FALSE(stored["spec"].contains("disruptionBudget")) << stored.dump();
  EXPECT_EQ(stored["spec"]["quotas"]["gpu"], json({{"guaranteed", 2}})) << stored.dump();
  // (A null in a list is no field left unset: still refused; nor is one in a map of strings,
  // a value forgotten, which dropped would confine nothing.)
  json listed = QueueObject("listed");
  listed["spec"]["tenants"] = {nullptr};
  EXPECT_EQ(w_.Do("POST", Collection("queues"), kAdmin, listed.dump()).status, 422);
  json selected = WorkloadObject("team-a", "selected");
  selected["spec"]["nodeSelector"] = {{"pool", nullptr}};
  HttpResponse refused = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, selected.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.nodeSelector.pool: expected a string, got null"),
            std::string::npos)
      << refused.body;
}

// A queue's spec.tenants naming a tenant that does not exist, or a workload's spec.queue a queue,
// is written and warned of (a typo would keep the work out of it without a word); "*" and
// existing tenants and queues say nothing.
TEST_F(ApiBadInputTest, NamingATenantOrQueueThatDoesNotExistIsWarnedOf) {
  const auto warnings = WarningsOf;
  json q = QueueObject("named");
  q["spec"]["tenants"] = {"team-a", "tema-b", "*"};
  HttpResponse created = w_.Do("POST", Collection("queues"), kAdmin, q.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(warnings(created),
            (std::vector<std::string>{"299 - \"spec.tenants: tenant 'tema-b' does not exist; no "
                                      "work reaches this queue through it until it does\""}));
  const std::string item = Item("queues", "", "named");
  HttpResponse fixed =
      w_.Do("PATCH", item, kAdmin, R"({"spec": {"tenants": ["team-a"]}})", kMergePatch);
  ASSERT_EQ(fixed.status, 200) << fixed.body;
  EXPECT_TRUE(warnings(fixed).empty());
  // A workload naming a queue that does not exist, likewise; one naming a stored queue says
  // nothing.
  json w = WorkloadObject("team-a", "typo");
  w["spec"]["queue"] = "nmaed";
  HttpResponse typo = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, w.dump());
  ASSERT_EQ(typo.status, 201) << typo.body;
  EXPECT_EQ(warnings(typo), (std::vector<std::string>{
                                "299 - \"spec.queue: queue 'nmaed' does not exist; the workload "
                                "waits until it does\""}));
  w["metadata"]["name"] = "right";
  w["spec"]["queue"] = "named";
  HttpResponse right = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, w.dump());
  ASSERT_EQ(right.status, 201) << right.body;
  EXPECT_TRUE(warnings(right).empty());
  // A PriorityClass's spec.tenants likewise (a trial's was created without a word).
  json pc = PriorityClassObject("for-some");
  pc["spec"]["tenants"] = {"nosuch-tenant"};
  HttpResponse made = w_.Do("POST", Collection("priorityclasses"), kAdmin, pc.dump());
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(warnings(made), (std::vector<std::string>{
                                "299 - \"spec.tenants: tenant 'nosuch-tenant' does not exist; no "
                                "work may use this priority class through it until it does\""}));
  HttpResponse mended = w_.Do("PATCH", Item("priorityclasses", "", "for-some"), kAdmin,
                              R"({"spec": {"tenants": ["team-a"]}})", kMergePatch);
  ASSERT_EQ(mended.status, 200) << mended.body;
  EXPECT_TRUE(warnings(mended).empty());
}

// A queue edit that leaves it holding more than its new quotas is accepted (nothing running is
// evicted for it) with a warning that says so, in a Warning header as Kubernetes sends one; an
// edit of anything else, or one its use is within, says nothing.
TEST_F(ApiBadInputTest, AQueueEditBelowWhatItHoldsIsAcceptedWithAWarning) {
  json q = QueueObject("busy");
  q["spec"]["quotas"] = {{"gpu", {{"guaranteed", 8}}}, {"cpu", {{"guaranteed", 64}}}};
  w_.MustCreate(Collection("queues"), q);
  const std::string item = Item("queues", "", "busy");
  // (The scheduler's standing, as it writes it each cycle.)
  w_.MustSetStatus(item, {{"usedGpus", "6.5"},
                          {"guaranteedGpus", "8"},
                          {"cpu", {{"used", "48"}, {"guaranteed", "64"}}}});
  const auto patch = [&](const json& gpu, const std::string& query = "") {
    HttpResponse r = w_.Do("PATCH", item + query, kAdmin,
                           json{{"spec", {{"quotas", {{"gpu", gpu}}}}}}.dump(), kMergePatch);
    EXPECT_EQ(r.status, 200) << r.body;
    return WarningsOf(r);
  };
  EXPECT_TRUE(patch({{"guaranteed", 7}}).empty());  // (still within)
  std::vector<std::string> said = patch({{"guaranteed", 4}}, "?dryRun=All");
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "299 - \"queue busy holds 6.5 GPUs of gpu, past its new guarantee of 4 GPUs (was 7 "
            "GPUs): 2.5 GPUs more of it count as borrowed from now on, and a queue below its "
            "guarantee may reclaim them\"");
  EXPECT_EQ(Parse(w_.Get(item))["spec"]["quotas"]["gpu"]["guaranteed"], json(7));  // (dry run)
  {
    // Work that may not be preempted holds 6 of its GPUs: past the new guarantee, no reclaim
    // takes those 2 back, which is said (a trial read "may reclaim them" of such work).
    // (Charged to busy, as the scheduler writes it.)
    json pinned = WorkloadObject("team-a", "pinned", {}, 6);
    pinned["spec"]["preemptible"] = false;
    w_.MustCreate(Collection("workloads", "team-a"), pinned);
    w_.MustSetStatus(Item("workloads", "team-a", "pinned"),
                     {{"phase", "Running"},
                      {"assignments", {Assignment("big")}},
                      {"resourceUsage", {{"gpu", "6000m"}, {"queue", "busy"}}}});
    said = patch({{"guaranteed", 4}}, "?dryRun=All");
    ASSERT_EQ(said.size(), 1u);
    EXPECT_NE(said[0].find("2.5 GPUs more of it count as borrowed from now on, and a queue below "
                           "its guarantee may reclaim them but for 2 GPUs held by work that may "
                           "not be preempted (spec.preemptible: false), which no queue can take "
                           "back"),
              std::string::npos)
        << said[0];
    ASSERT_EQ(w_.Do("DELETE", Item("workloads", "team-a", "pinned"), kAdmin).status, 200);
  }
  said = patch({{"guaranteed", 4}, {"borrowingLimit", 2}});
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("holds 6.5 GPUs of gpu, past its new guaranteed 4 GPUs + borrowingLimit "
                         "2 GPUs: nothing running is evicted for it"),
            std::string::npos)
      << said[0];
  EXPECT_EQ(Parse(w_.Get(item))["spec"]["quotas"]["gpu"]["borrowingLimit"], json(2));
  // An edit that lowers nothing says nothing, however far past its guarantee the queue is.
  EXPECT_TRUE(patch({{"guaranteed", 5}}).empty());            // (raised: 5 + 2 hold 6.5)
  EXPECT_TRUE(patch({{"lendingLimit", 1}}).empty());          // (no limit of its own lowered)
  EXPECT_TRUE(patch({{"borrowingLimit", nullptr}}).empty());  // (lifted)
  said = patch({{"borrowingLimit", 1}});                      // (5 + 1, below the 6.5 it holds)
  ASSERT_EQ(said.size(), 1u) << said.size();
  // CPU too, in its own unit.
  HttpResponse r =
      w_.Do("PATCH", item, kAdmin,
            json{{"spec", {{"quotas", {{"cpu", {{"guaranteed", 30}}}}}}}}.dump(), kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_NE(r.headers[0].second.find("queue busy holds 48 CPU cores, past its new guarantee of 30 "
                                     "CPU cores (was 64 CPU cores): 18 CPU cores more of it count "
                                     "as borrowed"),
            std::string::npos)
      << r.headers[0].second;
  // A lending limit lowered below the guarantee it leaves unused (5 - 2), and its one GPU
  // quota removed, which acts as a guarantee of 0: said as the edits they are (a trial's were
  // taken without a word).
  w_.MustSetStatus(item, {{"usedGpus", "2"}});
  said = patch({{"lendingLimit", 0}});
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("queue busy leaves 3 GPUs of gpu of its guarantee unused, more than its "
                         "new lendingLimit of 0 GPUs: what other queues borrow of it now, if "
                         "any, is not evicted for the edit"),
            std::string::npos)
      << said[0];
  said = patch(nullptr);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("queue busy holds 2 GPUs of gpu, past its new guarantee of 0 GPUs (was 5 "
                         "GPUs)"),
            std::string::npos)
      << said[0];
  // By flavour where the status counts by flavour.
  w_.MustSetStatus(item,
                   {{"usedGpus", "6.5"},
                    {"flavors", {{"gpu", {{"usedGpus", "1"}}}, {"h100", {{"usedGpus", "3"}}}}}});
  said = patch({{"guaranteed", 1}, {"borrowingLimit", 0}});
  EXPECT_TRUE(said.empty()) << said[0];  // (1 of gpu, within 1 + 0)
  said = patch({{"guaranteed", 0}, {"borrowingLimit", 0}, {"lendingLimit", nullptr}});
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("holds 1 GPU of gpu"), std::string::npos) << said[0];
  // A first memory quota, which the status does not count yet: what the queue's bound
  // workloads ask is summed (two pods of 16Gi running; one pending, not counted).
  json q2 = QueueObject("fresh");
  q2["spec"]["tenants"] = {"team-a"};
  w_.MustCreate(Collection("queues"), q2);
  for (const char* name : {"run", "wait"}) {
    json w = WorkloadObject("team-a", std::string("fresh-") + name);
    w["spec"]["queue"] = "fresh";
    w["spec"]["podSets"][0]["count"] = 2;
    w_.MustCreate(Collection("workloads", "team-a"), w);
  }
  w_.MustSetStatus(Item("workloads", "team-a", "fresh-run"),
                   {{"phase", "Running"}, {"assignments", {Assignment("n1"), Assignment("n2")}}});
  r = w_.Do("PATCH", Item("queues", "", "fresh"), kAdmin,
            json{{"spec", {{"quotas", {{"memory", {{"guaranteed", "20Gi"}}}}}}}}.dump(),
            kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.headers.size(), 1u) << r.body;
  EXPECT_NE(r.headers[0].second.find("queue fresh holds 32Gi, past its new guarantee of 20Gi (it "
                                     "had no memory quota): 12Gi more of it count as borrowed"),
            std::string::npos)
      << r.headers[0].second;
}

// A pod no registered node could hold by its GPUs, CPU or memory is refused, naming the field
// and the largest node's; GPU models no node has are accepted with a warning (nodes may join).
// (A trial's 300 cores and 4Ti were accepted, then Unschedulable, beside 16 GPUs refused.)
TEST_F(ApiBadInputTest, PodsNoNodeCouldHoldAreRefusedAndUnknownModelsWarned) {
  json w = New();
  w["spec"]["podSets"][0]["devices"] = {{"gpus", 16}};
  ExpectCreateRejected(w, 422,
                       "spec.podSets[0].devices.gpus: 16 GPUs per pod, but the largest node has 8");
  w = New();
  w["spec"]["podSets"][0]["cpu"] = "300";
  ExpectCreateRejected(w, 422,
                       "spec.podSets[0].cpu: 300 CPU cores per pod, but the largest node has 64");
  w = New();
  w["spec"]["podSets"][0]["memory"] = "4Ti";
  ExpectCreateRejected(w, 422,
                       "spec.podSets[0].memory: 4Ti per pod, but the largest node has 512Gi");
  // A larger node joins: the facts are read again.
  w_.MustCreate(Collection("nodes"), NodeObject("bigger", 16));
  w = New();
  w["spec"]["podSets"][0]["devices"] = {{"gpus", 16}, {"models", "H900|B300"}};
  HttpResponse r = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, w.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(WarningsOf(r),
            (std::vector<std::string>{
                "299 - \"spec.podSets[0].devices.models: no node of the fleet has a GPU of "
                "the model(s) it names (the fleet has H100); accepted, it waits "
                "Unschedulable until one joins\""}));
  // Its status may still be written, and its spec but its pods changed, when the fleet no
  // longer holds what it asks (a review: an agent's status writes were refused once the large
  // node went).
  json fits = WorkloadObject("team-a", "fits");
  fits["spec"]["podSets"][0]["cpu"] = "60";
  w_.MustCreate(Collection("workloads", "team-a"), fits);
  for (const char* node : {"big", "bigger"})
    ASSERT_EQ(
        w_.Do("PATCH", Item("nodes", "", node), kAdmin, R"({"spec": {"cpu": "32"}})", kMergePatch)
            .status,
        200);
  w_.MustSetStatus(Item("workloads", "team-a", "fits"), {{"phase", "Running"}});
  r = w_.Do("PATCH", Item("workloads", "team-a", "fits"), kAdmin,
            R"({"metadata": {"labels": {"team": "x"}}})", kMergePatch);
  EXPECT_EQ(r.status, 200) << r.body;
  // A node's memory given as a number (MiB) counts.
  ASSERT_EQ(w_.Do("PATCH", Item("nodes", "", "bigger"), kAdmin, R"({"spec": {"memory": 2097152}})",
                  kMergePatch)
                .status,
            200);
  json large = WorkloadObject("team-a", "large");
  large["spec"]["podSets"][0]["memory"] = "1Ti";
  r = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, large.dump());
  EXPECT_EQ(r.status, 201) << r.body;
  // A model the fleet has, in a list: nothing said.
  json known = WorkloadObject("team-a", "known");
  known["spec"]["podSets"][0]["devices"] = {{"gpus", 1}, {"models", {"B300", "H100"}}};
  r = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, known.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  for (const auto& [name, value] : r.headers) EXPECT_NE(name, "Warning") << value;
}

// A queue write that lifts the trees' guarantees of a flavour, or of every flavour together,
// past the fleet's GPUs is accepted with a warning at the write, as the scheduler's status would
// say it (a trial saw it only on a later `get queues`, on a queue it had not touched, and only
// the total at the write); one that lowers them, or stays within, says nothing.
TEST_F(ApiBadInputTest, GuaranteesPastTheFleetAreSaidAtTheWrite) {
  const auto warnings = WarningsOf;
  w_.MustCreate(Collection("resourceflavors"), FlavorObject("h100"));
  json a = QueueObject("qa");
  a["spec"]["quotas"] = {{"gpu", {{"guaranteed", 6}}}};
  HttpResponse r = w_.Do("POST", Collection("queues"), kAdmin, a.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  // (6 of the node's 8: the h100 flavour, named by no quota yet, leaves them to gpu.)
  EXPECT_TRUE(warnings(r).empty()) << warnings(r)[0];
  // A tree: the root guaranteed what its children add up to. Its quota of h100 gives that
  // flavour the node's H100s, whole or in fractions: gpu is left none.
  json org = QueueObject("org");
  w_.MustCreate(Collection("queues"), org);
  json b = QueueObject("qb");
  b["spec"]["parent"] = "org";
  b["spec"]["quotas"] = {{"h100", {{"guaranteed", 1}}}, {"cpu", {{"guaranteed", 64}}}};
  r = w_.Do("POST", Collection("queues"), kAdmin, b.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(warnings(r), (std::vector<std::string>{
                             "299 - \"the queue trees' guarantees of gpu add up to 6 GPUs, past "
                             "the fleet's 0: they cannot all be met at once\""}));
  json c = QueueObject("qc");
  c["spec"]["parent"] = "org";
  c["spec"]["quotas"] = {{"gpu", {{"guaranteed", 2.5}}}};
  r = w_.Do("POST", Collection("queues"), kAdmin, c.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(warnings(r), (std::vector<std::string>{
                             "299 - \"the queue trees' guarantees of gpu add up to 8.5 GPUs, past "
                             "the fleet's 0: they cannot all be met at once\"",
                             "299 - \"the queue trees' guarantees of all GPU flavours add up to "
                             "9.5 GPUs, past the fleet's 8: they cannot all be met at once\""}));
  // Lowered, still past: nothing more said; within: nothing.
  const auto patch = [&](const std::string& q, double g) {
    return w_.Do("PATCH", Item("queues", "", q), kAdmin,
                 json{{"spec", {{"quotas", {{"gpu", {{"guaranteed", g}}}}}}}}.dump(), kMergePatch);
  };
  r = patch("qc", 2);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(warnings(r).empty()) << warnings(r)[0];
  r = patch("qa", 7);  // (raised again: 10)
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(warnings(r).size(), 2u);
  EXPECT_NE(warnings(r)[1].find("all GPU flavours add up to 10 GPUs"), std::string::npos)
      << warnings(r)[1];
  r = patch("qa", 5);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(warnings(r).empty()) << warnings(r)[0];
  // The h100 flavour narrowed to another model gives the H100s back to gpu: 7 of its 8.
  r = w_.Do("PATCH", Item("resourceflavors", "", "h100"), kAdmin,
            json{{"spec", {{"models", {"A100"}}}}}.dump(), kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  r = patch("qa", 6);  // (8 of gpu, 9 of all)
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(warnings(r), (std::vector<std::string>{
                             "299 - \"the queue trees' guarantees of all GPU flavours add up to 9 "
                             "GPUs, past the fleet's 8: they cannot all be met at once\""}));
  // A lendingLimit beside no guarantee, on a queue without children, lends nothing: said.
  json lender = QueueObject("lender");
  lender["spec"]["quotas"] = {{"gpu", {{"lendingLimit", 3}}}};
  r = w_.Do("POST", Collection("queues"), kAdmin, lender.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(warnings(r), (std::vector<std::string>{
                             "299 - \"spec.quotas.gpu.lendingLimit: queue lender has no children "
                             "and no guarantee of its own, so it is guaranteed nothing and lends "
                             "nothing until children below it are guaranteed some\""}));
  // With children: nothing said (theirs is its guarantee).
  json child = QueueObject("lender-child");
  child["spec"]["parent"] = "lender";
  w_.MustCreate(Collection("queues"), child);
  r = w_.Do("PATCH", Item("queues", "", "lender"), kAdmin,
            json{{"spec", {{"quotas", {{"gpu", {{"lendingLimit", 2}}}}}}}}.dump(), kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(warnings(r).empty()) << warnings(r)[0];
}

// Labels are maps of strings in the Kubernetes syntax; a node's kubernetes.io/hostname and
// fabrica.dev/gpu-model are its own; a workload's nodeSelector holds strings. A label selector
// over nodes sees what a nodeSelector matches: registered labels, set ones, the well-known two.
TEST_F(ApiBadInputTest, LabelsAndNodeSelectorsAreCheckedAndNodesListedByThem) {
  const std::string node = Item("nodes", "", "big");
  const auto patch = [&](const std::string& target, const json& body) {
    return w_.Do("PATCH", target, kAdmin, body.dump(), kMergePatch);
  };
  for (const auto& [labels, names] : std::vector<std::pair<json, std::string>>{
           {json("zone=b"), "metadata.labels: expected a map"},
           {json::array({"zone"}), "metadata.labels: expected a map"},
           {json{{"", "x"}}, "metadata.labels.: label key ''"},
           {json{{"bad key!", "x"}}, "label key 'bad key!'"},
           {json{{"zone", "no spaces"}}, "label value 'no spaces'"},
           {json{{"kubernetes.io/hostname", "other"}}, "set by Fabrica on every node"},
           {json{{"fabrica.dev/gpu-model", "H200"}}, "set by Fabrica on every node"}}) {
    HttpResponse r = patch(node, {{"metadata", {{"labels", labels}}}});
    EXPECT_EQ(r.status, 422) << labels.dump() << ": " << r.body;
    EXPECT_NE(r.body.find(names), std::string::npos) << names << " not in " << r.body;
  }
  json spec = Parse(w_.Get(node))["spec"];
  spec["labels"] = {{"pool", "training"}};
  ASSERT_EQ(
      patch(node, {{"spec", spec}, {"metadata", {{"labels", {{"zone", "b"}, {"rank", "5"}}}}}})
          .status,
      200);
  const auto listed = [&](const std::string& selector) {
    std::set<std::string> out;
    const json list = Parse(w_.Get(Collection("nodes") + "?labelSelector=" + selector));
    for (const json& n : list["items"]) out.insert(n["metadata"].value("name", ""));
    return out;
  };
  const std::set<std::string> big = {"big"};
  EXPECT_EQ(listed("pool=training"), big);
  EXPECT_EQ(listed("zone=b"), big);
  EXPECT_EQ(listed("kubernetes.io/hostname=big"), big);
  EXPECT_EQ(listed("fabrica.dev/gpu-model=H100"), big);
  EXPECT_TRUE(listed("fabrica.dev/gpu-model=H200").empty());
  // A read shows the two in its metadata.labels, as a Kubernetes node shows kubelet's (a trial's
  // jsonpath found no hostname there); they are not stored, and what a read showed is taken
  // back as it is (kubectl's get, edit, replace).
  const json read = Parse(w_.Get(node));
  EXPECT_EQ(read["metadata"]["labels"], json({{"kubernetes.io/hostname", "big"},
                                              {"fabrica.dev/gpu-model", "H100"},
                                              {"zone", "b"},
                                              {"rank", "5"}}))
      << read.dump();
  EXPECT_EQ(Parse(w_.Get(Collection("nodes")))["items"][0]["metadata"]["labels"].value(
                "kubernetes.io/hostname", ""),
            Parse(w_.Get(Collection("nodes")))["items"][0]["metadata"].value("name", "?"));
  HttpResponse put = w_.Do("PUT", node, kAdmin, read.dump());
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Parse(put)["metadata"]["labels"], read["metadata"]["labels"]) << put.body;
  EXPECT_EQ(patch(node, {{"metadata", {{"labels", {{"kubernetes.io/hostname", "big"}}}}}}).status,
            200);
  const std::string stored = w_.store().Get("/registry/nodes/big")->value;
  EXPECT_EQ(stored.find("kubernetes.io/hostname"), std::string::npos) << stored;
  EXPECT_EQ(stored.find("fabrica.dev/gpu-model"), std::string::npos) << stored;
  EXPECT_NE(stored.find("\"zone\":\"b\""), std::string::npos) << stored;
  {
    // Its GPUs changed in what a read showed (an edit, `fabctl apply`): the old model's label
    // it carries is no change, and the new model's is shown.
    json edited = Parse(w_.Get(node));
    edited["spec"]["gpus"]["model"] = "H200";
    HttpResponse r = w_.Do("PUT", node, kAdmin, edited.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Parse(r)["metadata"]["labels"].value("fabrica.dev/gpu-model", ""), "H200") << r.body;
    edited = Parse(r);
    edited["spec"]["gpus"]["model"] = "H100";
    ASSERT_EQ(w_.Do("PUT", node, kAdmin, edited.dump()).status, 200);
    // A node whose labels were all taken away, written back as read, is no change.
    ASSERT_EQ(
        patch(node, {{"metadata", {{"labels", {{"zone", nullptr}, {"rank", nullptr}}}}}}).status,
        200);
    const json bare = Parse(w_.Get(node));
    HttpResponse same = w_.Do("PUT", node, kAdmin, bare.dump());
    ASSERT_EQ(same.status, 200) << same.body;
    EXPECT_EQ(Parse(same)["metadata"]["resourceVersion"], bare["metadata"]["resourceVersion"])
        << w_.store().Get("/registry/nodes/big")->value;
    ASSERT_EQ(patch(node, {{"metadata", {{"labels", {{"zone", "b"}, {"rank", "5"}}}}}}).status,
              200);
    // Moved to a leaf none of its NICs is cabled to: written, and warned of (a trial moved one
    // so, unwarned); its NICs moved too, nothing is said.
    const auto warned = [&](const json& spec) {
      HttpResponse r = w_.Do("PATCH", node, kAdmin, json{{"spec", spec}}.dump(), kMergePatch);
      EXPECT_EQ(r.status, 200) << r.body;
      std::string said;
      for (const auto& [k, v] : r.headers)
        if (k == "Warning") said += v;
      return said;
    };
    json cabled = Parse(w_.Get(node))["spec"];
    cabled["nics"] = {{{"name", "ib0"}, {"leaf", "leaf-1"}}};
    EXPECT_EQ(warned(cabled), "");
    cabled["leaf"] = "leaf-2";
    EXPECT_NE(warned(cabled).find("spec.leaf: leaf-2, but no NIC of the node is cabled to it "
                                  "(spec.nics[].leaf: leaf-1)"),
              std::string::npos);
    cabled["nics"][0]["leaf"] = "leaf-2";
    EXPECT_EQ(warned(cabled), "");
    cabled["leaf"] = "leaf-1";
    cabled["nics"] = nullptr;
    EXPECT_EQ(warned(cabled), "");
  }
  // Set-based requirements, as Kubernetes'.
  EXPECT_EQ(listed("pool in (training,other)"), big);
  EXPECT_TRUE(listed("pool notin (training)").empty());
  EXPECT_TRUE(listed("!pool").empty());
  EXPECT_EQ(listed("!nothing,zone"), big);
  EXPECT_EQ(listed("rank>4"), big);  // (Gt and Lt read the label as a whole number)
  EXPECT_EQ(listed("rank<6"), big);
  EXPECT_EQ(listed("rank>+4"), big);
  EXPECT_TRUE(listed("rank>5").empty());
  EXPECT_TRUE(listed("rank<5").empty());
  EXPECT_TRUE(listed("zone>4").empty());
  for (const auto& [selector, says] : std::vector<std::pair<std::string, std::string>>{
           {"rank>=4", "compares with a whole number N (there is no >= or <=)"},
           {"rank>x", "compares with a whole number"},
           {"a_b.com/x", "its prefix must be a DNS subdomain"},
           {"a===b", "label value '=b': must be empty or 1-63 characters"},
           {"pool in (x,y z)", "label value 'y z'"}}) {
    HttpResponse r = w_.Get(Collection("nodes") + "?labelSelector=" + selector);
    EXPECT_EQ(r.status, 400) << selector << ": " << r.body;
    EXPECT_NE(r.body.find(says), std::string::npos) << says << " not in " << r.body;
  }
  HttpResponse bad = w_.Get(Collection("nodes") + "?labelSelector=pool in training");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("expected KEY=VALUE, KEY!=VALUE, KEY, !KEY, KEY in (V1,V2)"),
            std::string::npos)
      << bad.body;
  // A node's registered labels: strings, in the syntax, not the two every node has.
  for (const auto& [labels, names] : std::vector<std::pair<json, std::string>>{
           {json{{"zone", 5}}, "spec.labels.zone: expected a string, got 5"},
           {json{{"kubernetes.io/hostname", "x"}}, "is set by Fabrica on every node"},
           {json{{"bad key!", "x"}}, "label key 'bad key!'"}}) {
    json changed = spec;
    changed["labels"] = labels;
    HttpResponse r = patch(node, {{"spec", changed}});
    EXPECT_EQ(r.status, 422) << labels.dump() << ": " << r.body;
    EXPECT_NE(r.body.find(names), std::string::npos) << names << " not in " << r.body;
  }
  json w = WorkloadObject("team-a", "new");
  w["spec"]["nodeSelector"] = {{"zone", 5}};
  ExpectCreateRejected(w, 422, "spec.nodeSelector.zone: expected a string, got 5");
  w["spec"]["nodeSelector"] = {{"zone!", "b"}};
  ExpectCreateRejected(w, 422, "spec.nodeSelector: label key 'zone!'");
  w["spec"].erase("nodeSelector");
  w["spec"]["excludeNodes"] = {"n1", 2};
  ExpectCreateRejected(w, 422, "spec.excludeNodes[1]: expected a node name, got 2");
  // Names no node has are accepted with a warning (a typo would exclude nothing); once stored,
  // an update that leaves them be says nothing again.
  w["spec"]["excludeNodes"] = {"big", "bgi"};
  HttpResponse r = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, w.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  std::vector<std::string> warnings = WarningsOf(r);
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "299 - \"spec.excludeNodes names no node of the fleet: 'bgi' (accepted: "
                          "a node of that name is kept off should it join)\""}));
  r = patch(Item("workloads", "team-a", "new"), {{"spec", {{"priority", -1}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  for (const auto& [name, value] : r.headers) EXPECT_NE(name, "Warning") << value;
  // So are node names in its node affinity, by name or by hostname label.
  const json ghost = {{"key", "metadata.name"}, {"operator", "In"}, {"values", {"big", "ghost"}}};
  const json host = {
      {"key", "kubernetes.io/hostname"}, {"operator", "NotIn"}, {"values", {"gohst"}}};
  r = patch(Item("workloads", "team-a", "new"),
            {{"spec",
              {{"affinity",
                {{"nodeAffinity",
                  {{"requiredDuringSchedulingIgnoredDuringExecution",
                    {{"nodeSelectorTerms", {{{"matchFields", {ghost}}}}}}},
                   {"preferredDuringSchedulingIgnoredDuringExecution",
                    {{{"weight", 1}, {"preference", {{"matchExpressions", {host}}}}}}}}}}}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  warnings = WarningsOf(r);
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "299 - \"spec.affinity names no node of the fleet: 'ghost', 'gohst' "
                          "(accepted, as nodes come and go: a node of that name is matched "
                          "should it join)\""}));
}

// A tenant's tolerations are given to each workload it creates (after its own); where it has
// allowedTolerations, a workload may carry no other (given or its own, at create and update),
// as Kubernetes' namespace toleration defaults and whitelist; the tenant's own defaults must be
// allowed.
TEST_F(ApiBadInputTest, ATenantGivesItsWorkloadsTolerationsAndLimitsThem) {
  json t = TenantObject("team-p");
  t["spec"]["tolerations"] = json::array({{{"key", "dedicated"}, {"value", "team-p"}}});
  t["spec"]["allowedTolerations"] = json::array({{{"key", "dedicated"}, {"value", "team-p"}},
                                                 {{"key", "gpu"},
                                                  {"operator", "Exists"},
                                                  {"effect", "NoExecute"},
                                                  {"tolerationSeconds", 300}}});
  w_.MustCreate(Collection("tenants"), t);
  json w = WorkloadObject("team-p", "mine");
  w["spec"]["tolerations"] = json::array({{{"key", "gpu"},
                                           {"operator", "Exists"},
                                           {"effect", "NoExecute"},
                                           {"tolerationSeconds", 60}}});
  HttpResponse r = w_.Do("POST", Collection("workloads", "team-p"), kAdmin, w.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const json stored = Parse(w_.Get(Item("workloads", "team-p", "mine")));
  ASSERT_EQ(stored["spec"]["tolerations"].size(), 2u) << stored.dump();
  EXPECT_EQ(stored["spec"]["tolerations"][1], (json{{"key", "dedicated"}, {"value", "team-p"}}));
  // Longer than allowed, or another key: refused, naming it.
  for (const json& bad :
       {json{{"key", "gpu"},
             {"operator", "Exists"},
             {"effect", "NoExecute"},
             {"tolerationSeconds", 600}},
        json{{"key", "gpu"}, {"operator", "Exists"}, {"effect", "NoExecute"}},
        json{{"operator", "Exists"}}, json{{"key", "dedicated"}, {"value", "team-q"}}}) {
    json other = WorkloadObject("team-p", "other");
    other["spec"]["tolerations"] = json::array({bad});
    r = w_.Do("POST", Collection("workloads", "team-p"), kAdmin, other.dump());
    EXPECT_EQ(r.status, 403) << bad.dump() << ": " << r.body;
    EXPECT_NE(r.body.find("spec.tolerations[0]: tenant team-p may not tolerate"), std::string::npos)
        << r.body;
  }
  EXPECT_EQ(w_.Get(Item("workloads", "team-p", "other")).status, 404);
  r = w_.Do("PATCH", Item("workloads", "team-p", "mine"), kAdmin,
            json{{"spec", {{"tolerations", json::array({{{"operator", "Exists"}}})}}}}.dump(),
            kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  // Allowing fewer later refuses no status write of work stored before (the scheduler's).
  ASSERT_EQ(w_.Do("PATCH", Item("tenants", "", "team-p"), kAdmin,
                  json{{"spec", {{"tolerations", nullptr}, {"allowedTolerations", json::array()}}}}
                      .dump(),
                  kMergePatch)
                .status,
            200);
  w_.MustSetStatus(Item("workloads", "team-p", "mine"), {{"phase", "Scheduled"}});
  // A tenant whose given tolerations it does not allow is refused, naming the field.
  json wrong = TenantObject("team-w");
  wrong["spec"]["tolerations"] = json::array({{{"key", "a"}, {"operator", "Exists"}}});
  wrong["spec"]["allowedTolerations"] = json::array({{{"key", "b"}, {"operator", "Exists"}}});
  r = w_.Do("POST", Collection("tenants"), kAdmin, wrong.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.tolerations: tolerations[0] (a) is not among its "
                        "allowedTolerations"),
            std::string::npos)
      << r.body;
}

// A tenant's nodeSelector keeps each of its workloads to its nodes (Kubernetes' PodNodeSelector):
// merged in at create and at every spec write, so an update cannot drop it; a workload asking
// another value of one of its keys is refused, naming it; status writes are left alone.
TEST_F(ApiBadInputTest, ATenantKeepsItsWorkloadsToItsNodes) {
  json t = TenantObject("team-n");
  t["spec"]["nodeSelector"] = {{"pool", "team-n"}};
  w_.MustCreate(Collection("tenants"), t);
  json w = WorkloadObject("team-n", "mine");
  w["spec"]["nodeSelector"] = {{"zone", "b"}};
  HttpResponse r = w_.Do("POST", Collection("workloads", "team-n"), kAdmin, w.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const auto selector = [&] {
    return Parse(w_.Get(Item("workloads", "team-n", "mine")))["spec"]["nodeSelector"];
  };
  EXPECT_EQ(selector(), (json{{"pool", "team-n"}, {"zone", "b"}}));
  // Dropped by an update: given back.
  r = w_.Do("PATCH", Item("workloads", "team-n", "mine"), kAdmin,
            json{{"spec", {{"nodeSelector", nullptr}}}}.dump(), kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(selector(), (json{{"pool", "team-n"}}));
  // Another value: refused, at create and update.
  r = w_.Do("PATCH", Item("workloads", "team-n", "mine"), kAdmin,
            json{{"spec", {{"nodeSelector", {{"pool", "shared"}}}}}}.dump(), kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("spec.nodeSelector.pool: tenant team-n keeps its work on nodes with "
                        "pool=team-n (its spec.nodeSelector); the workload has pool=shared (set "
                        "it to team-n, or drop it to be given it)"),
            std::string::npos)
      << r.body;
  json other = WorkloadObject("team-n", "other");
  other["spec"]["nodeSelector"] = {{"pool", "shared"}};
  EXPECT_EQ(w_.Do("POST", Collection("workloads", "team-n"), kAdmin, other.dump()).status, 403);
  EXPECT_EQ(selector(), (json{{"pool", "team-n"}}));
  // Once the tenant's selector has changed: a write that leaves the selector be is not refused
  // (work stored before may still be stopped), nor is the scheduler's status write, nor a
  // running workload's update; a pending one's selector change must take the new value.
  ASSERT_EQ(w_.Do("PATCH", Item("tenants", "", "team-n"), kAdmin,
                  json{{"spec", {{"nodeSelector", {{"pool", "moved"}}}}}}.dump(), kMergePatch)
                .status,
            200);
  r = w_.Do("PATCH", Item("workloads", "team-n", "mine"), kAdmin,
            json{{"spec", {{"active", false}, {"nodeSelector", json::object()}}}}.dump(),
            kMergePatch);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(selector(), (json{{"pool", "team-n"}}));
  r = w_.Do("PATCH", Item("workloads", "team-n", "mine"), kAdmin,
            json{{"spec", {{"nodeSelector", {{"zone", "c"}}}}}}.dump(), kMergePatch);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("the workload has pool=team-n (set it to moved"), std::string::npos)
      << r.body;
  w_.MustSetStatus(Item("workloads", "team-n", "mine"), {{"phase", "Running"}});
  json put = Parse(w_.Get(Item("workloads", "team-n", "mine")));
  put["spec"]["priority"] = 5;
  r = w_.Do("PUT", Item("workloads", "team-n", "mine"), kAdmin, put.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(selector(), (json{{"pool", "team-n"}}));
  // ... a replace that leaves out what the tenant gave it too (a manifest's own spec).
  put = Parse(w_.Get(Item("workloads", "team-n", "mine")));
  put["spec"].erase("nodeSelector");
  r = w_.Do("PUT", Item("workloads", "team-n", "mine"), kAdmin, put.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(selector(), (json{{"pool", "team-n"}}));
  // A tenant's selector is checked as a workload's.
  json bad = TenantObject("team-x");
  bad["spec"]["nodeSelector"] = {{"pool", 5}};
  r = w_.Do("POST", Collection("tenants"), kAdmin, bad.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.nodeSelector.pool: expected a string, got 5"), std::string::npos)
      << r.body;
  bad["spec"]["nodeSelector"] = {{"pool!", "a"}};
  r = w_.Do("POST", Collection("tenants"), kAdmin, bad.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("label key 'pool!'"), std::string::npos) << r.body;
}

// A workload that names a PriorityClass takes its value into spec.priority when it is stored;
// a missing class or a disagreeing priority is refused, naming the field.
TEST_F(ApiBadInputTest, PriorityClassNamesAreResolvedWhenAWorkloadIsWritten) {
  ASSERT_EQ(
      w_.Do("POST", Collection("priorityclasses"), kAdmin, PriorityClassObject("urgent").dump())
          .status,
      201);
  json missing = New();
  missing["spec"]["priorityClassName"] = "ghost";
  ExpectCreateRejected(missing, 422,
                       "spec.priorityClassName: priority class 'ghost' does not exist");
  json disagrees = New();
  disagrees["spec"]["priorityClassName"] = "urgent";
  disagrees["spec"]["priority"] = 5;
  ExpectCreateRejected(disagrees, 422,
                       "spec.priority: 5 differs from priority class 'urgent' (100): set "
                       "spec.priorityClassName to null with it to lower a priority");
  // An empty name is no class, as in Kubernetes (Helm templates write it; a trial's was refused).
  json empty = WorkloadObject("team-a", "unclassed");
  empty["spec"]["priorityClassName"] = "";
  HttpResponse taken = w_.Do("POST", Collection("workloads", "team-a"), kAlice, empty.dump());
  ASSERT_EQ(taken.status, 201) << taken.body;
  EXPECT_FALSE(Parse(taken)["spec"].contains("priorityClassName")) << taken.body;
  json good = New();
  good["spec"]["priorityClassName"] = "urgent";
  ASSERT_EQ(w_.Do("POST", Collection("workloads", "team-a"), kAlice, good.dump()).status, 201);
  json stored = Parse(w_.Get(Item("workloads", "team-a", "new")));
  EXPECT_EQ(stored["spec"].value("priority", -1), 100) << stored.dump();
  // The class's value may not change later (as a Kubernetes PriorityClass's may not: its
  // workloads keep the value they took), named in the error as every invalid object is (a
  // trial's patch was taken without a word, and class errors gave a bare field path).
  json changed = PriorityClassObject("urgent", 7);
  changed["metadata"]["resourceVersion"] =
      Parse(w_.Get(Item("priorityclasses", "", "urgent")))["metadata"]["resourceVersion"];
  HttpResponse refused =
      w_.Do("PUT", Item("priorityclasses", "", "urgent"), kAdmin, changed.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(Parse(refused).value("message", ""),
            "PriorityClass 'urgent': spec.value: may not be changed (workloads that name the class "
            "took its value 100 when written and keep it); create a class with the new value "
            "instead");
  json described = Parse(w_.Get(Item("priorityclasses", "", "urgent")));
  described["spec"]["description"] = "urgent work";
  EXPECT_EQ(w_.Do("PUT", Item("priorityclasses", "", "urgent"), kAdmin, described.dump()).status,
            200);
  // Nor its preemption policy, which workloads copy too (a trial's patch to Never was taken,
  // and two workloads of the class then preempted differently); the default said explicitly
  // is no change.
  refused = w_.Do("PATCH", Item("priorityclasses", "", "urgent"), kAdmin,
                  R"({"spec":{"preemptionPolicy":"Never"}})", kMergePatch);
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(Parse(refused).value("message", ""),
            "PriorityClass 'urgent': spec.preemptionPolicy: may not be changed (workloads that "
            "name the class took PreemptLowerPriority when written and keep it); create a class "
            "with the new policy instead");
  EXPECT_EQ(w_.Do("PATCH", Item("priorityclasses", "", "urgent"), kAdmin,
                  R"({"spec":{"preemptionPolicy":"PreemptLowerPriority"}})", kMergePatch)
                .status,
            200);
  json bad_policy = PriorityClassObject("odd", 7);
  bad_policy["spec"]["preemptionPolicy"] = "Sometimes";
  refused = w_.Do("POST", Collection("priorityclasses"), kAdmin, bad_policy.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(
      Parse(refused)
          .value("message", "")
          .rfind("PriorityClass 'odd': spec.preemptionPolicy: must be PreemptLowerPriority", 0),
      0u)
      << refused.body;
  stored = Parse(w_.Get(Item("workloads", "team-a", "new")));
  EXPECT_EQ(stored["spec"].value("priority", -1), 100) << stored.dump();
  // Nor does its deletion: the same manifest applied again (no priority, the class named)
  // keeps the value taken (a user-style review found it refused); naming it anew is refused.
  ASSERT_EQ(w_.Do("DELETE", Item("priorityclasses", "", "urgent"), kAdmin).status, 200);
  json again = good;
  again["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"];
  again["metadata"]["labels"] = {{"applied", "twice"}};
  HttpResponse reapplied = w_.Do("PUT", Item("workloads", "team-a", "new"), kAlice, again.dump());
  ASSERT_EQ(reapplied.status, 200) << reapplied.body;
  EXPECT_EQ(Parse(reapplied)["spec"].value("priority", -1), 100) << reapplied.body;
  json renamed = Parse(reapplied);
  renamed["spec"]["priorityClassName"] = "gone";
  renamed["spec"].erase("priority");
  EXPECT_EQ(w_.Do("PUT", Item("workloads", "team-a", "new"), kAlice, renamed.dump()).status, 422);
}

// A class's preemptionPolicy is taken with its value, and follows a switch to another class:
// a patch that names only the new class carries the old policy along, and the new class's is
// taken instead (a review found Never kept after a switch to a class that preempts, though
// both classes give the same value).
TEST_F(ApiBadInputTest, APriorityClassSwitchTakesTheNewClasssPreemptionPolicy) {
  json quiet = PriorityClassObject("quiet", 100);
  quiet["spec"]["preemptionPolicy"] = "Never";
  json loud = PriorityClassObject("loud", 100);
  loud["spec"]["preemptionPolicy"] = "PreemptLowerPriority";
  ASSERT_EQ(w_.Do("POST", Collection("priorityclasses"), kAdmin, quiet.dump()).status, 201);
  ASSERT_EQ(w_.Do("POST", Collection("priorityclasses"), kAdmin, loud.dump()).status, 201);
  json good = New();
  good["spec"]["priorityClassName"] = "quiet";
  ASSERT_EQ(w_.Do("POST", Collection("workloads", "team-a"), kAlice, good.dump()).status, 201);
  const std::string item = Item("workloads", "team-a", "new");
  EXPECT_EQ(Str(Parse(w_.Get(item))["spec"], "preemptionPolicy"), "Never");
  HttpResponse r =
      w_.Do("PATCH", item, kAlice, R"({"spec":{"priorityClassName":"loud"}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Str(Parse(w_.Get(item))["spec"], "preemptionPolicy"), "PreemptLowerPriority");
  EXPECT_EQ(Parse(w_.Get(item))["spec"].value("priority", -1), 100);
  // And back: Never again.
  r = w_.Do("PATCH", item, kAlice, R"({"spec":{"priorityClassName":"quiet"}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Str(Parse(w_.Get(item))["spec"], "preemptionPolicy"), "Never");
}

// A class that names its tenants is theirs to use alone (as a Slurm QOS is allowed per
// account): another tenant's workload naming it is refused, at creation and when a workload
// switches to it; what already took its value keeps it.
TEST_F(ApiBadInputTest, APriorityClassThatNamesItsTenantsIsTheirsAlone) {
  json oncall = PriorityClassObject("on-call", 1000);
  oncall["spec"]["tenants"] = json::array({"team-b"});
  ASSERT_EQ(w_.Do("POST", Collection("priorityclasses"), kAdmin, oncall.dump()).status, 201);
  json mine = New();
  mine["spec"]["priorityClassName"] = "on-call";
  ExpectCreateRejected(mine, 403,
                       "spec.priorityClassName: tenant team-a may not use priority class "
                       "'on-call' (its spec.tenants: team-b)");
  // Not even by a platform admin's hand: the class speaks for the tenant's work.
  HttpResponse admin = w_.Do("POST", Collection("workloads", "team-a"), kAdmin, mine.dump());
  EXPECT_EQ(admin.status, 403) << admin.body;
  // Switching to it is refused too.
  json existing = Parse(w_.Get(Item("workloads", "team-a", "existing")));
  existing["spec"]["priorityClassName"] = "on-call";
  HttpResponse moved =
      w_.Do("PUT", Item("workloads", "team-a", "existing"), kAlice, existing.dump());
  EXPECT_EQ(moved.status, 403) << moved.body;
  EXPECT_EQ(Parse(w_.Get(Item("workloads", "team-a", "existing")))["spec"].value("priority", 0), 0);
  // Once team-a is named, it may.
  oncall["spec"]["tenants"] = json::array({"team-b", "team-a"});
  ASSERT_EQ(w_.Do("PUT", Item("priorityclasses", "", "on-call"), kAdmin, oncall.dump()).status,
            200);
  HttpResponse ok = w_.Do("POST", Collection("workloads", "team-a"), kAlice, mine.dump());
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(Parse(ok)["spec"].value("priority", 0), 1000);
  // A class taken from it later leaves the work that took its value alone, but a rewrite
  // naming it again (the same manifest re-applied) keeps that value too.
  oncall["spec"]["tenants"] = json::array();
  ASSERT_EQ(w_.Do("PUT", Item("priorityclasses", "", "on-call"), kAdmin, oncall.dump()).status,
            200);
  json again = Parse(w_.Get(Item("workloads", "team-a", "new")));
  again["metadata"]["labels"] = {{"applied", "twice"}};
  HttpResponse reapplied = w_.Do("PUT", Item("workloads", "team-a", "new"), kAlice, again.dump());
  EXPECT_EQ(reapplied.status, 200) << reapplied.body;
  json other = New();
  other["metadata"]["name"] = "other";
  other["spec"]["priorityClassName"] = "on-call";
  HttpResponse none = w_.Do("POST", Collection("workloads", "team-a"), kAlice, other.dump());
  EXPECT_EQ(none.status, 403) << none.body;
  EXPECT_NE(none.body.find("(its spec.tenants: none)"), std::string::npos) << none.body;
}

// A tenant takes a priority from a class, not by number (a user-style review gave its work
// priority 1000000, past every class, to preempt other queues' work): a raw spec.priority
// other than 0 is a platform admin's to set, and a tenant's rewrite that keeps it passes.
TEST_F(ApiBadInputTest, OnlyAPlatformAdminSetsAPriorityWithoutAClass) {
  json raw = New();
  raw["spec"]["priority"] = 1000000;
  HttpResponse r = w_.Do("POST", Collection("workloads", "team-a"), kAlice, raw.dump());
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("spec.priority: 1000000 set directly; only a platform admin sets a "
                        "priority without a class"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(w_.Get(Item("workloads", "team-a", "new")).status, 404) << "stored anyway";
  json zero = New();
  zero["spec"]["priority"] = 0;
  ASSERT_EQ(w_.Do("POST", Collection("workloads", "team-a"), kAlice, zero.dump()).status, 201);
  const std::string item = Item("workloads", "team-a", "new");
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"spec":{"priority":50}})", kMergePatch).status, 403);
  ASSERT_EQ(w_.Do("PATCH", item, kAdmin, R"({"spec":{"priority":50}})", kMergePatch).status, 200);
  // The tenant's own later writes keep what the admin set.
  HttpResponse relabel =
      w_.Do("PATCH", item, kAlice, R"({"metadata":{"labels":{"x":"y"}}})", kMergePatch);
  EXPECT_EQ(relabel.status, 200) << relabel.body;
  EXPECT_EQ(Parse(w_.Get(item))["spec"].value("priority", -1), 50);
  // Lowering its own work takes nothing from anyone: to 10, or below 0; not back up.
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"spec":{"priority":10}})", kMergePatch).status, 200);
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"spec":{"priority":-5}})", kMergePatch).status, 200);
  EXPECT_EQ(w_.Do("PATCH", item, kAlice, R"({"spec":{"priority":10}})", kMergePatch).status, 403);
  EXPECT_EQ(Parse(w_.Get(item))["spec"].value("priority", 0), -5);
}

TEST_F(ApiBadInputTest, UnknownFields) {
  json top = New();
  top["spek"] = json::object();
  ExpectCreateRejected(top, 422, "spek: unknown field (did you mean spec?)");
  json meta = New();
  meta["metadata"]["lables"] = {{"a", "b"}};
  ExpectCreateRejected(meta, 422, "metadata.lables");
  meta["metadata"]["anotations"] = json::object();
  ExpectCreateRejected(meta, 422,
                       "Workload 'new': metadata.anotations: unknown field (did you mean "
                       "annotations?); metadata.lables: unknown field (did you mean labels?)");
  json spec = New();
  spec["spec"]["podSets"][0]["devices"]["gpuz"] = 1;
  ExpectCreateRejected(spec, 422, "spec.podSets[0].devices.gpuz");
  // The same through an update and a patch of an existing object.
  json existing = json::parse(existing_);
  existing["spec"]["podSets"][0]["devices"]["gpuz"] = 1;
  ExpectRejected("PUT", Item("workloads", "team-a", "existing"), existing.dump(),
                 "application/json", 422, "spec.podSets[0].devices.gpuz");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"), R"({"spec":{"retries":3}})",
                 kMergePatch, 422, "spec.retries");
}

TEST_F(ApiBadInputTest, WrongTypes) {
  json count = New();
  count["spec"]["podSets"][0]["count"] = "two";
  ExpectCreateRejected(count, 422, "spec.podSets[0].count");
  json podsets = New();
  podsets["spec"]["podSets"] = "many";
  ExpectCreateRejected(podsets, 422, "spec.podSets");
  json spec = New();
  spec["spec"] = json::array({1, 2});
  ExpectCreateRejected(spec, 422, "spec");
  json gang = New();
  gang["spec"]["gang"] = "sometimes";
  ExpectCreateRejected(gang, 422, "spec.gang");
  json labels = New();
  labels["metadata"]["labels"] = "app=chat";
  ExpectCreateRejected(labels, 422, "metadata.labels");
}

// JSON types matter even where the YAML-based parser would read a scalar of another type: the
// stored object is JSON, and its readers (scheduler, agents) read it with typed accessors.
TEST_F(ApiBadInputTest, WrongJsonTypesOfScalars) {
  json duration = New();
  duration["spec"]["run"]["durationSeconds"] = "600";
  ExpectCreateRejected(duration, 422, "spec.run.durationSeconds");
  json name = New();
  name["metadata"]["name"] = 5;
  ExpectCreateRejected(name, 422, "metadata.name");
}

// Status is read with typed accessors by the scheduler and the agents: a write of the wrong types
// is refused, naming the field, whoever writes it.
TEST_F(ApiBadInputTest, StatusOfWrongTypes) {
  const std::string item = Item("workloads", "team-a", "existing");
  auto expect_rejected = [&](const json& status, const std::string& names) {
    SCOPED_TRACE(status.dump());
    const int64_t rev = w_.store().Revision();
    json obj = json::parse(existing_);
    obj["status"] = status;
    HttpResponse r = w_.Do("PUT", item + "/status", kAdmin, obj.dump());
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(Message(r).find(names), std::string::npos) << r.body;
    EXPECT_EQ(w_.store().Revision(), rev);
  };
  expect_rejected({{"phase", 5}}, "status.phase");
  expect_rejected({{"phase", "Sleeping"}}, "status.phase");
  expect_rejected({{"message", json::array()}}, "status.message");
  expect_rejected({{"assignments", "n1"}}, "status.assignments");
  json index = Assignment("n1");
  index["devices"][0]["index"] = "0";
  expect_rejected({{"assignments", {index}}}, "status.assignments[0].devices[0].index");
  expect_rejected({{"assignments", {{{"pod", "main-0"}}}}}, "status.assignments[0].node");
  expect_rejected({{"conditions", {"Ready"}}}, "status.conditions[0]");
  expect_rejected({{"phase", "Running"}, {"colour", "green"}}, "status.colour");
}

TEST_F(ApiBadInputTest, WorkloadsNeedAnExistingTenant) {
  const int64_t rev = w_.store().Revision();
  HttpResponse r = w_.Do("POST", Collection("workloads", "team-z"), kAdmin,
                         WorkloadObject("team-z", "new").dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(Message(r).find("metadata.namespace"), std::string::npos) << r.body;
  EXPECT_NE(Message(r).find("team-z"), std::string::npos) << r.body;
  EXPECT_EQ(w_.store().Revision(), rev);
}

// A tenant named like the words messages put before a slash ("node/n1", "20/16 GPUs") could
// not be concealed from other tenants: such names are refused.
TEST_F(ApiBadInputTest, TenantNamesThatReadAsKindsOrNumbersAreRefused) {
  for (const std::string name : {"node", "workload", "queue", "2024"}) {
    SCOPED_TRACE(name);
    const int64_t rev = w_.store().Revision();
    HttpResponse r = w_.Do("POST", Collection("tenants"), kAdmin, TenantObject(name).dump());
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(Message(r).find("metadata.name"), std::string::npos) << r.body;
    EXPECT_NE(Message(r).find("'" + name + "'"), std::string::npos) << r.body;
    EXPECT_EQ(w_.store().Revision(), rev);
  }
  EXPECT_EQ(w_.Do("POST", Collection("tenants"), kAdmin, TenantObject("node-7").dump()).status,
            201);
}

// A trust domain counts only for a trusted tenant: given to another it is said to be ignored,
// at creation and on an update, and not refused (a stored one stays writable).
TEST_F(ApiBadInputTest, ATrustDomainOnATenantNotTrustedIsSaidToBeIgnored) {
  HttpResponse r = w_.Do("POST", Collection("tenants"), kAdmin,
                         TenantObject("lab-x", "standard", "research").dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(WarningsOf(r),
            (std::vector<std::string>{
                "299 - \"tenant lab-x: spec.trustDomain research is ignored while "
                "it is standard: only trusted tenants share GPUs by trust domain\""}));
  r = w_.Do("PATCH", Item("tenants", "", "lab-x"), kAdmin,
            json{{"spec", {{"trust", "untrusted"}}}}.dump(), kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(WarningsOf(r).size(), 1u);
  EXPECT_NE(WarningsOf(r)[0].find("ignored while it is untrusted"), std::string::npos);
  // Trusted, or its own name (the default): nothing said.
  r = w_.Do("PATCH", Item("tenants", "", "lab-x"), kAdmin,
            json{{"spec", {{"trust", "trusted"}}}}.dump(), kMergePatch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(WarningsOf(r).empty());
  r = w_.Do("POST", Collection("tenants"), kAdmin,
            TenantObject("lab-y", "standard", "lab-y").dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(WarningsOf(r).empty());
}

TEST_F(ApiBadInputTest, NamesAndQuantities) {
  json name = New();
  name["metadata"]["name"] = "Bad_Name";
  ExpectCreateRejected(name, 422, "metadata.name");
  json long_name = New();
  long_name["metadata"]["name"] = std::string(64, 'a');
  ExpectCreateRejected(long_name, 422, "metadata.name");
  json cpu = New();
  cpu["spec"]["podSets"][0]["cpu"] = "4 cores";
  ExpectCreateRejected(cpu, 422, "spec.podSets[0].cpu");
  json memory = New();
  memory["spec"]["podSets"][0]["memory"] = "16 gigs";
  ExpectCreateRejected(memory, 422, "spec.podSets[0].memory");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"),
                 R"({"spec":{"podSets":[{"name":"main","cpu":"lots"}]}})", kMergePatch, 422,
                 "spec.podSets[0].cpu");
  // Other kinds name their fields too.
  const int64_t rev = w_.store().Revision();
  HttpResponse tenant =
      w_.Do("POST", Collection("tenants"), kAdmin, TenantObject("team-z", "very-trusted").dump());
  EXPECT_EQ(tenant.status, 422);
  EXPECT_NE(Message(tenant).find("spec.trust"), std::string::npos) << tenant.body;
  json node = NodeObject("n9");
  node["spec"]["cpu"] = "many";
  HttpResponse n = w_.Do("POST", Collection("nodes"), kAdmin, node.dump());
  EXPECT_EQ(n.status, 422);
  EXPECT_NE(Message(n).find("spec.cpu"), std::string::npos) << n.body;
  HttpResponse lease = w_.Do("POST", Collection("leases"), kAdmin,
                             R"({"metadata":{"name":"l1"},"spec":{"holder":"x"}})");
  EXPECT_EQ(lease.status, 422);
  EXPECT_NE(Message(lease).find("spec.holder"), std::string::npos) << lease.body;
  EXPECT_EQ(w_.store().Revision(), rev);
}

TEST_F(ApiBadInputTest, MoreGpusPerPodThanAnyNodeHas) {
  json big = New();
  big["spec"]["podSets"][0]["devices"]["gpus"] = 16;
  ExpectCreateRejected(big, 422, "spec.podSets[0].devices.gpus");
  EXPECT_NE(Message(w_.Do("POST", Collection("workloads", "team-a"), kAlice, big.dump())).find("8"),
            std::string::npos);
  // Eight fit.
  json fits = New();
  fits["spec"]["podSets"][0]["devices"]["gpus"] = 8;
  EXPECT_EQ(w_.Do("POST", Collection("workloads", "team-a"), kAlice, fits.dump()).status, 201);
}

TEST_F(ApiBadInputTest, ContentTypes) {
  ExpectRejected("POST", Collection("workloads", "team-a"), New().dump(), "text/yaml", 415,
                 "application/json");
  ExpectRejected("PUT", Item("workloads", "team-a", "existing"), existing_, "text/plain", 415,
                 "application/json");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"), R"({"spec":{"priority":1}})",
                 "application/json", 415, "merge-patch");
  ExpectRejected("PATCH", Item("workloads", "team-a", "existing"), R"({"spec":{"priority":1}})", "",
                 415, "merge-patch");
  // Parameters after the media type are fine.
  HttpResponse ok = w_.Do("POST", Collection("workloads", "team-a"), kAlice, New().dump(),
                          "application/json; charset=utf-8");
  EXPECT_EQ(ok.status, 201) << ok.body;
}

TEST_F(ApiBadInputTest, NamespaceAndNameMismatch) {
  json other = WorkloadObject("team-b", "new");
  ExpectCreateRejected(other, 422, "metadata.namespace");
  json existing = json::parse(existing_);
  existing["metadata"]["namespace"] = "team-b";
  ExpectRejected("PUT", Item("workloads", "team-a", "existing"), existing.dump(),
                 "application/json", 422, "metadata.namespace");
  json renamed = json::parse(existing_);
  renamed["metadata"]["name"] = "other";
  ExpectRejected("PUT", Item("workloads", "team-a", "existing"), renamed.dump(), "application/json",
                 422, "metadata.name");
  json kind = New();
  kind["kind"] = "Tenant";
  ExpectCreateRejected(kind, 422, "kind");
}

// A workload lives in its tenant's namespace: one created with no namespace, or in a namespace
// whose name breaks the naming rules, could never be addressed (GET needs a namespace) and has
// no tenant for isolation.
TEST_F(ApiBadInputTest, WorkloadsNeedAValidNamespace) {
  const int64_t rev = w_.store().Revision();
  json no_ns = New();
  no_ns["metadata"].erase("namespace");
  HttpResponse r = w_.Do("POST", Collection("workloads"), kAdmin, no_ns.dump());
  EXPECT_GE(r.status, 400) << r.body;
  HttpResponse bad = w_.Do("POST", Collection("workloads", "Bad_NS"), kAdmin,
                           WorkloadObject("Bad_NS", "new").dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_EQ(w_.store().Revision(), rev);
}

// Events: why a workload waits, said again with other numbers (a countdown, how many nodes
// lack what) or back and forth, is one event counted, its message the latest (a review: a
// preemptor's countdown, rewritten each minute, pushed its other events out); what differs
// in words is an event of its own; a field selector's terms must all hold.
// POST .../workloads/W/eviction (kubectl's pods/eviction; fabctl drain uses it): a running
// workload is marked to stop after its grace period, saying who and why; its queue's
// disruption budget is respected (429, as a PodDisruptionBudget answers); bad input, work that
// holds nothing and another tenant's work are refused, and nothing is written for them.
TEST(ApiEvictionTest, AnEvictionMarksRunningWorkWithinItsQueuesBudget) {
  World w;
  w.Seed();
  json budgeted = QueueObject("team-a");
  budgeted["spec"]["disruptionBudget"] = 1;
  w.MustCreate(Collection("queues"), budgeted);
  w.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "wa3"));
  w.MustSetStatus(Item("workloads", "team-a", "wa3"),
                  {{"phase", "Running"}, {"assignments", {Assignment("n2")}}});
  const auto evict = [&](const std::string& ns, const std::string& name, const std::string& token,
                         const std::string& body = "") {
    return w.Do("POST", Item("workloads", ns, name) + "/eviction", token, body);
  };
  const auto marked = [&](const std::string& ns, const std::string& name) {
    return Parse(w.Get(Item("workloads", ns, name)))["status"].contains("preemption");
  };
  HttpResponse r = evict("team-a", "wa", kAdmin, "{bad");
  EXPECT_EQ(r.status, 400) << r.body;
  r = evict("team-a", "wa", kAdmin, R"({"reason": "a", "reason": "b"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Parse(r).value("message", ""),
            "eviction: malformed JSON body: key \"reason\" is given twice in one object")
      << r.body;
  EXPECT_FALSE(marked("team-a", "wa"));
  r = evict("team-a", "wa", kAdmin, R"({"gracePeriod": 5})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("eviction.gracePeriod: unknown field"), std::string::npos) << r.body;
  r = evict("team-a", "wa", kAdmin, R"({"gracePeriodSeconds": -1})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("eviction.gracePeriodSeconds"), std::string::npos) << r.body;
  EXPECT_EQ(w.Do("GET", Item("workloads", "team-a", "wa") + "/eviction", kAdmin).status, 405);
  r = evict("team-a", "wa2", kAdmin);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("it holds no devices, nothing to evict"), std::string::npos) << r.body;
  EXPECT_EQ(evict("team-a", "nope", kAdmin).status, 404);
  EXPECT_EQ(evict("team-b", "wb", kAlice).status, 403);
  for (const char* name : {"wa", "wa2"}) EXPECT_FALSE(marked("team-a", name)) << name;
  EXPECT_FALSE(marked("team-b", "wb"));

  // A dry run answers and writes nothing; a tenant may not give a grace period past the
  // server's (its marked work would be no one's victim meanwhile).
  r = w.Do("POST", Item("workloads", "team-a", "wa") + "/eviction?dryRun=All", kAdmin);
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_NE(r.body.find("(dry run)"), std::string::npos) << r.body;
  EXPECT_FALSE(marked("team-a", "wa"));
  r = evict("team-a", "wa", kAlice, R"({"gracePeriodSeconds": 86400})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("longer: admins"), std::string::npos) << r.body;
  EXPECT_FALSE(marked("team-a", "wa"));
  r = evict("team-a", "wa", kAdmin, R"({"gracePeriodSeconds": 10, "reason": "maintenance"})");
  EXPECT_EQ(r.status, 201) << r.body;
  const json st = Parse(w.Get(Item("workloads", "team-a", "wa")))["status"];
  EXPECT_EQ(st["preemption"].value("reason", ""), "evicted by admin: maintenance") << st.dump();
  EXPECT_EQ(st["preemption"].value("deadline", ""), FormatTimestamp(w.clock().NowMs() + 10'000));
  EXPECT_EQ(st["preemption"].value("evictor", ""), "api") << st.dump();
  EXPECT_EQ(st.value("phase", ""), "Scheduled") << st.dump();  // (it keeps its devices till then)
  r = evict("team-a", "wa", kAdmin, R"({"gracePeriodSeconds": 20})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("already stopping"), std::string::npos) << r.body;
  // A shorter grace brings the stop forward.
  r = evict("team-a", "wa", kAdmin, R"({"gracePeriodSeconds": 2})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(
      Parse(w.Get(Item("workloads", "team-a", "wa")))["status"]["preemption"].value("deadline", ""),
      FormatTimestamp(w.clock().NowMs() + 2'000));
  // Queue team-a's budget of 1 is spent while wa stops: wa3 waits, unmarked.
  r = evict("team-a", "wa3", kAdmin);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find("queue team-a's disruptionBudget of 1 allows no more evictions now"),
            std::string::npos)
      << r.body;
  EXPECT_FALSE(marked("team-a", "wa3"));
  // A budget of 0 frees never: not "try again" (a user-style trial's drain said so).
  ASSERT_EQ(w.Do("PATCH", Item("queues", "", "team-a"), kAdmin,
                 R"({"spec":{"disruptionBudget":0}})", kMergePatch)
                .status,
            200);
  r = evict("team-a", "wa3", kAdmin);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find("queue team-a's disruptionBudget of 0 allows no evictions until an "
                        "administrator raises it"),
            std::string::npos)
      << r.body;
  // Another queue's work (no budget) goes.
  EXPECT_EQ(evict("team-b", "wb", kAdmin).status, 201);
  EXPECT_TRUE(marked("team-b", "wb"));
}

// kubectl asks events for a Table too: its own columns of them (LAST SEEN on the server's clock,
// TYPE, REASON, OBJECT, MESSAGE with how often), as `fabctl get events` prints; `ev` is their
// short name. Before, kubectl printed NAME and AGE "<unknown>" (events had no creation time).
TEST(ApiEventsTest, KubectlGetsEventsAsATable) {
  World w;
  w.Seed();
  const std::string item = Item("workloads", "team-a", "wa2");
  w.MustSetStatus(item, {{"phase", "Pending"}, {"reason", "Queued"}, {"message", "no room"}});
  w.clock().AdvanceMs(90'000);
  const std::string events = std::string(kApi) + "/namespaces/team-a/events";
  const auto get = [&](const std::string& target) {
    HttpRequest req = MakeRequest("GET", target, kAdmin, "", "");
    req.headers["accept"] = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    return w.api().Handle(req);
  };
  const json plain = Parse(w.Get(events + "?fieldSelector=involvedObject.name=wa2"));
  ASSERT_FALSE(plain["items"].empty()) << plain.dump();
  EXPECT_EQ(plain["items"][0]["metadata"]["creationTimestamp"],
            plain["items"][0]["firstTimestamp"]);
  const json table = Parse(get(events + "?fieldSelector=involvedObject.name=wa2"));
  ASSERT_EQ(table.value("kind", ""), "Table") << table.dump();
  std::vector<std::string> names;
  for (const json& c : table["columnDefinitions"]) names.push_back(c.value("name", ""));
  EXPECT_EQ(names, (std::vector<std::string>{"Last Seen", "Type", "Reason", "Object", "Message"}));
  ASSERT_EQ(table["rows"].size(), plain["items"].size());
  EXPECT_EQ(table["rows"].back()["cells"],
            json({"90s", "Normal", "Queued", "workload/wa2", "no room"}));

  // A watch's events, a row each.
  HttpResponse watch =
      get(events + "?watch=true&resourceVersion=" + plain["metadata"].value("resourceVersion", ""));
  ASSERT_EQ(watch.status, 200) << watch.body;
  WatchDriver d(watch.stream);
  w.MustSetStatus(item, {{"phase", "Pending"}, {"reason", "Preempting"}, {"message", "soon"}});
  for (int i = 0; i < 200 && d.Events().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::vector<json> seen = d.Events();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back()["object"]["kind"], "Table");
  EXPECT_EQ(seen.back()["object"]["rows"][0]["cells"][2], "Preempting");

  // The short name.
  const json discovery = Parse(w.Get(kApi));
  bool ev = false;
  for (const json& r : discovery["resources"])
    ev |= r.value("name", "") == "events" && r.value("shortNames", json()) == json({"ev"});
  EXPECT_TRUE(ev) << discovery.dump();
}

TEST(ApiEventsTest, AWaitSaidAgainWithOtherNumbersIsOneEventCounted) {
  World w;
  w.Seed();
  const std::string item = Item("workloads", "team-a", "wa2");
  const auto wait = [&](const std::string& reason, const std::string& message) {
    w.MustSetStatus(item, {{"phase", "Pending"}, {"reason", reason}, {"message", message}});
  };
  for (int minutes = 60; minutes >= 1; --minutes)
    wait("Preempting", "waiting for 1 preempted workload(s) to stop (it may go in about " +
                           std::to_string(minutes) + " min)");
  wait("Queued", "no node can take it now: 3 lack CPU");
  wait("Preempting", "waiting for 1 preempted workload(s) to stop (it may go in about 1 min)");
  wait("Queued", "no node can take it now: 4 lack CPU");
  wait("Preempting", "preempting 2 workload(s)");
  const json list = Parse(
      w.Get(std::string(kApi) + "/namespaces/team-a/events?fieldSelector=involvedObject.name=wa2"));
  std::vector<std::string> seen;
  for (const json& e : list["items"])
    seen.push_back(e.value("reason", "") + " x" + std::to_string(e.value("count", 0)) + ": " +
                   e.value("message", ""));
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "Created x1: waiting for the scheduler",
                      "Preempting x61: waiting for 1 preempted workload(s) to stop (it may go "
                      "in about 1 min)",
                      "Queued x2: no node can take it now: 4 lack CPU",
                      "Preempting x1: preempting 2 workload(s)"}))
      << list.dump();
  // A gang put back at its requeue limit is deactivated, not put back in line: its eviction
  // says it stopped, and RequeuingLimitExceeded follows (a review found neither).
  w.MustSetStatus(item, {{"phase", "Pending"},
                         {"reason", "RequeuingLimitExceeded"},
                         {"message", "deactivated: its gang timed out 3 times"},
                         {"evictions",
                          {{"count", 3},
                           {"gpuSecondsLost", 0},
                           {"last",
                            {{"reason", "GangTimeout"},
                             {"message", "not all pods were ready"},
                             {"time", "2026-12-01T00:00:00Z"}}}}}});
  const json after = Parse(
      w.Get(std::string(kApi) + "/namespaces/team-a/events?fieldSelector=involvedObject.name=wa2"));
  ASSERT_GE(after["items"].size(), 2u) << after.dump();
  const json& evicted = after["items"][after["items"].size() - 2];
  const json& limit = after["items"].back();
  EXPECT_EQ(evicted.value("message", ""), "not all pods were ready; stopped (eviction 3)")
      << after.dump();
  EXPECT_EQ(limit.value("reason", ""), "RequeuingLimitExceeded") << after.dump();
  EXPECT_EQ(limit.value("type", ""), "Warning") << after.dump();
  // A wait after it ran again is said after that, not merged into one before it (a review:
  // the history read Queued ×2, Admitted, Started, Preempted, with nothing to say it waits).
  w.MustSetStatus(item, {{"phase", "Running"}});
  wait("Queued", "no node can take it now: 5 lack CPU");
  const json again = Parse(
      w.Get(std::string(kApi) + "/namespaces/team-a/events?fieldSelector=involvedObject.name=wa2"));
  ASSERT_GE(again["items"].size(), 2u) << again.dump();
  EXPECT_EQ(again["items"].back().value("message", ""), "no node can take it now: 5 lack CPU")
      << again.dump();
  EXPECT_EQ(again["items"].back().value("count", 0), 1) << again.dump();
  EXPECT_EQ(again["items"][2].value("message", ""), "no node can take it now: 4 lack CPU")
      << again.dump();
  // Every term of a selector holds: a field asked two values selects nothing.
  const auto count = [&](const std::string& selector,
                         const std::string& in = "/namespaces/team-a") {
    HttpResponse r = w.Get(std::string(kApi) + in + "/events?fieldSelector=" + selector);
    EXPECT_EQ(r.status, 200) << selector << ": " << r.body;
    return Parse(r).value("items", json::array()).size();
  };
  EXPECT_EQ(count("reason=Queued"), 2u);
  EXPECT_EQ(count("reason=RequeuingLimitExceeded"), 1u);
  EXPECT_EQ(count("reason=Queued,reason=Preempting"), 0u);
  EXPECT_EQ(count("reason=Queued,reason=Queued"), 2u);
  EXPECT_EQ(count("involvedObject.name=wa2,involvedObject.name=wa"), 0u);
  // kubectl's other forms: !=, and blanks after the commas.
  EXPECT_EQ(count("reason!=Queued,reason=RequeuingLimitExceeded"), 1u);
  EXPECT_EQ(count("involvedObject.name=wa2, reason=Queued"), 2u);
  EXPECT_EQ(count("involvedObject.name!=wa2,reason=Queued"), 0u);
  // kubectl's fields every kind has: an event's own name and namespace (a trial's
  // `--field-selector metadata.name=…` was refused).
  const json first = Parse(w.Get(std::string(kApi) + "/namespaces/team-a/events"))["items"][0];
  EXPECT_EQ(count("metadata.name=" + first["metadata"].value("name", "")), 1u) << first.dump();
  EXPECT_EQ(count("metadata.name=nothing.1"), 0u);
  EXPECT_EQ(count("metadata.namespace=team-a,reason=Queued"), 2u);
  EXPECT_EQ(count("metadata.namespace=team-b"), 0u);
  // Across namespaces it selects one (team-a's, none of team-b's).
  const size_t all = count("", ""), team_a = count("");
  EXPECT_GT(team_a, 0u);
  EXPECT_GT(all, team_a);
  EXPECT_EQ(count("metadata.namespace=team-a", ""), team_a);
  EXPECT_EQ(count("metadata.namespace!=team-a", ""), all - team_a);
  EXPECT_EQ(
      w.Get(std::string(kApi) + "/namespaces/team-a/events?fieldSelector=involvedObject.kind=Pod")
          .status,
      400);
}

// Events are kept in the store too, each workload's as one object, so that a restarted server
// lists what happened before it, counts on where it left off, and keeps nothing of a workload
// deleted.
// A gang running with some pods not started yet is Starting (how many are up), and Started once
// the last is up (a user-style trial saw "Started … on 4 nodes" for a gang whose fourth pod
// never started).
TEST(ApiEventsTest, AGangIsStartedOnceAllItsPodsAre) {
  World w;
  w.Seed();
  const std::string item = Item("workloads", "team-a", "wa2");
  const json assignments = {{{"pod", "main-0"}, {"node", "n0"}, {"devices", json::array()}},
                            {{"pod", "main-1"}, {"node", "n1"}, {"devices", json::array()}},
                            {{"pod", "main-2"}, {"node", "n2"}, {"devices", json::array()}}};
  const auto running = [&](const json& started) {
    w.MustSetStatus(item, {{"phase", "Running"},
                           {"message", "running on 3 nodes: n0, n1, n2"},
                           {"assignments", assignments},
                           {"startedPods", started}});
  };
  json started = {{"main-0", "2026-12-01T00:00:00Z"}};
  running(started);
  // (A second pod up: the Starting event says 2 of 3, counted, as the status does; a trial
  // read "1 of 3" there.)
  started["main-1"] = "2026-12-01T00:00:05Z";
  running(started);
  started["main-2"] = "2026-12-01T00:00:09Z";
  running(started);
  const json list = Parse(
      w.Get(std::string(kApi) + "/namespaces/team-a/events?fieldSelector=involvedObject.name=wa2"));
  std::vector<std::string> seen;
  for (const json& e : list["items"])
    seen.push_back(e.value("reason", "") + ": " + e.value("message", "") + " (" +
                   std::to_string(e.value("count", 0)) + ")");
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "Created: waiting for the scheduler (1)",
                      "Starting: 2 of 3 pods started; the rest wait for their nodes (2)",
                      "Started: running on 3 nodes: n0, n1, n2 (1)"}))
      << list.dump();
}

TEST(ApiEventsTest, EventsOutliveARestartAndGoWithTheirWorkload) {
  World w;
  w.Seed();
  const std::string item = Item("workloads", "team-a", "wa2");
  const auto wait = [&](int minutes) {
    w.MustSetStatus(item, {{"phase", "Pending"},
                           {"reason", "Preempting"},
                           {"message",
                            "waiting for 1 preempted workload(s) to stop (it may go in "
                            "about " +
                                std::to_string(minutes) + " min)"}});
  };
  wait(3);
  wait(2);
  w.MustSetStatus(Item("workloads", "team-a", "wa"), {{"phase", "Running"}});
  const std::string events = std::string(kApi) + "/namespaces/team-a/events";
  // What a list shows, but its versions (this server's own).
  const auto shown = [&] {
    json items = Parse(w.Get(events)).value("items", json::array());
    for (json& e : items) e["metadata"].erase("resourceVersion");
    return items;
  };
  const json before = shown();
  ASSERT_EQ(before.size(), 5u) << before.dump();  // wa: Created, Admitted, Started; wa2: 2
  ASSERT_EQ(w.Do("DELETE", Item("workloads", "team-b", "wb2"), kAdmin).status, 200);
  w.Restart();
  EXPECT_EQ(shown(), before);
  // Counted on: the same wait again is the event before it, counted.
  wait(1);
  const json after = shown();
  ASSERT_EQ(after.size(), before.size()) << after.dump();
  const auto preempting = [](const json& items) {
    for (const json& e : items)
      if (e.value("reason", "") == "Preempting") return e;
    return json();
  };
  EXPECT_EQ(preempting(after)["metadata"], preempting(before)["metadata"]);
  EXPECT_EQ(preempting(before).value("count", 0), 2) << before.dump();
  EXPECT_EQ(preempting(after).value("count", 0), 3) << after.dump();
  EXPECT_NE(preempting(after).value("message", "").find("about 1 min"), std::string::npos);
  // A new event is named apart from those before the restart.
  w.MustSetStatus(item, {{"phase", "Running"}});
  std::set<std::string> names;
  for (const json& e : shown()) names.insert(e["metadata"].value("name", ""));
  EXPECT_EQ(names.size(), before.size() + 1);
  // A workload deleted (before the restart, or while it runs) keeps its events for an hour, as
  // Kubernetes keeps a deleted pod's, the last saying it was deleted; across a restart too.
  EXPECT_TRUE(w.store().Get("/registry/events/team-b/wb2").ok());
  ASSERT_EQ(w.Do("DELETE", item, kAdmin).status, 200);
  w.Restart();
  const auto of_wa2 = [&] {
    return Parse(w.Get(events + "?fieldSelector=involvedObject.name=wa2"))
        .value("items", json::array());
  };
  const json kept = of_wa2();
  ASSERT_GE(kept.size(), 3u) << kept.dump();  // Created, Preempting, Started, Deleted
  EXPECT_EQ(kept.back().value("reason", ""), "Deleted") << kept.dump();
  EXPECT_EQ(kept.front().value("reason", ""), "Created") << kept.dump();
  // Created again by its name, it starts a history of its own.
  w.MustCreate(Collection("workloads", "team-a"), WorkloadObject("team-a", "wa2"));
  const json fresh = of_wa2();
  ASSERT_EQ(fresh.size(), 1u) << fresh.dump();
  EXPECT_EQ(fresh[0].value("reason", ""), "Created");
  // An hour after its deletion, the next write forgets wb2's, here and in the store.
  const auto of_wb2 = [&] {
    return Parse(w.Get(std::string(kApi) +
                       "/namespaces/team-b/events?fieldSelector=involvedObject.name=wb2"))
        .value("items", json::array());
  };
  ASSERT_FALSE(of_wb2().empty());
  w.clock().AdvanceMs(3'600'000);
  w.MustSetStatus(Item("workloads", "team-a", "wa"), {{"phase", "Running"}, {"message", "on"}});
  EXPECT_TRUE(of_wb2().empty()) << of_wb2().dump();
  w.Restart();
  EXPECT_FALSE(w.store().Get("/registry/events/team-b/wb2").ok());
  EXPECT_TRUE(of_wb2().empty());
  EXPECT_EQ(of_wa2().size(), 1u);
}

// Each batch of a preemption's victims is an event of its own, even where only its numbers
// differ from the batch before (a trial's first batch was folded into the second, its words
// lost); the waits between them are counted as one.
TEST(ApiEventsTest, EachBatchOfAPreemptionIsAnEventOfItsOwn) {
  World w;
  w.Seed();
  const std::string item = Item("workloads", "team-a", "wa2");
  const auto batch = [&](int left, int lost) {
    w.MustSetStatus(
        item, {{"phase", "Pending"},
               {"reason", "Preempting"},
               {"message",
                "preempting 1 workload(s) for higher-priority work in "
                "queue qa, " +
                    std::to_string(lost) + " GPU-seconds lost so far; " + std::to_string(left) +
                    " more to go as the disruption budget of queue qa "
                    "allows"}});
  };
  batch(2, 1200);
  batch(1, 2360);
  json items = Parse(w.Get(std::string(kApi) +
                           "/namespaces/team-a/events?fieldSelector=involvedObject.name=wa2"))
                   .value("items", json::array());
  std::vector<std::string> said;
  for (const json& e : items)
    if (e.value("reason", "") == "Preempting") said.push_back(e.value("message", ""));
  ASSERT_EQ(said.size(), 2u) << items.dump();
  EXPECT_NE(said[0].find("2 more to go"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("1 more to go"), std::string::npos) << said[1];
}

// What the store keeps of events is written within seconds, with the workload's uid; a
// restarted server leaves out what is not its workload's (an object of another uid, of a
// workload not stored, one it cannot read) and names new events after what it kept, and a
// message is cut at 1 KiB.
TEST(ApiEventsTest, StoredEventsThatAreNotTheWorkloadsAreLeftOut) {
  World w;
  w.Seed();
  const std::string wa2 = Item("workloads", "team-a", "wa2");
  w.MustSetStatus(wa2, {{"phase", "Pending"}, {"reason", "Preempting"}, {"message", "waiting"}});
  // Kept without a restart, once a second.
  Result<KeyValue> kept = NotFound("not yet");
  for (int i = 0; i < 100 && !kept.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kept = w.store().Get("/registry/events/team-a/wa2");
  }
  ASSERT_TRUE(kept.ok()) << "the events of wa2 were not written within 10 s";
  const std::string uid = Parse(w.Get(wa2))["metadata"].value("uid", "");
  ASSERT_FALSE(uid.empty());
  EXPECT_EQ(json::parse(kept->value).value("uid", ""), uid) << kept->value;
  // What an earlier server, or a hand, left behind.
  const json stray_event = {{"sequence", 18446744073709551615ull},
                            {"type", "Normal"},
                            {"reason", "Stray"},
                            {"message", "not ours"},
                            {"count", 1},
                            {"firstTimestamp", "2026-01-01T00:00:00Z"},
                            {"lastTimestamp", "2026-01-01T00:00:00Z"}};
  ASSERT_TRUE(w.store()
                  .Put("/registry/events/team-a/ghost", json{{"events", {stray_event}}}.dump(),
                       kAnyRevision)
                  .ok());
  json other = stray_event;
  other["sequence"] = 5;
  ASSERT_TRUE(w.store()
                  .Put("/registry/events/team-a/wa",
                       json{{"uid", "another"}, {"events", {other}}}.dump(), kAnyRevision)
                  .ok());
  ASSERT_TRUE(
      w.store()
          .Put("/registry/events/team-b/wb", R"({"events":{"a":{"sequence":5}}})", kAnyRevision)
          .ok());
  w.Restart();
  // (Removed at the first flush, within a second or two.)
  for (const char* gone : {"team-a/ghost", "team-a/wa", "team-b/wb"}) {
    const std::string key = std::string("/registry/events/") + gone;
    for (int i = 0; i < 100 && w.store().Get(key).ok(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(w.store().Get(key).ok()) << gone;
  }
  const auto names = [&](const std::string& ns) {
    std::vector<std::string> out;
    for (const json& e : Parse(w.Get(std::string(kApi) + "/namespaces/" + ns + "/events"))
                             .value("items", json::array())) {
      EXPECT_NE(e.value("reason", ""), "Stray") << e.dump();
      out.push_back(e["metadata"].value("name", ""));
    }
    return out;
  };
  const std::vector<std::string> before = names("team-a");
  ASSERT_EQ(before.size(), 2u);  // wa2: Created, Preempting
  const auto sequence = [](const std::string& name) {
    return std::stoull(name.substr(name.rfind('.') + 1));
  };
  // (A long wait said again with a number a digit longer is still the same wait, counted.)
  for (const char* minutes : {"9", "10"})
    w.MustSetStatus(wa2, {{"phase", "Pending"},
                          {"reason", "QuotaReserved"},
                          {"message", std::string("xxxx in about ") + minutes + " min; " +
                                          std::string(3000, 'x')}});
  const json items =
      Parse(w.Get(std::string(kApi) + "/namespaces/team-a/events")).value("items", json::array());
  ASSERT_EQ(items.size(), 3u) << items.dump();
  EXPECT_EQ(items[2].value("count", 0), 2);
  const std::string latest = items[2]["metadata"].value("name", "");
  EXPECT_GT(sequence(latest), sequence(before[1]));
  EXPECT_LT(sequence(latest), uint64_t{1} << 53);
  EXPECT_LE(items[2].value("message", "").size(), 1024u);
  EXPECT_EQ(items[2].value("message", "").substr(0, 4), "xxxx");
}

// A watch of the events (kubectl get events -w) from a list's resourceVersion sends what is
// recorded or counted after it, once each and in order, only to those who may read it.
TEST(ApiEventsTest, AWatchFromAListsVersionSendsEachChangeOnce) {
  World w;
  w.Seed();
  const std::string item = Item("workloads", "team-a", "wa2");
  const auto wait = [&](const std::string& reason, const std::string& message) {
    w.MustSetStatus(item, {{"phase", "Pending"}, {"reason", reason}, {"message", message}});
  };
  const std::string events = std::string(kApi) + "/namespaces/team-a/events";
  const std::string of_wa2 = "fieldSelector=involvedObject.name=wa2";
  const auto preempting = [&](int minutes) {
    wait("Preempting", "waiting for 1 preempted workload(s) to stop (it may go in about " +
                           std::to_string(minutes) + " min)");
  };
  preempting(3);
  // (Recorded apart from the write: a list waits for what was written before it.)
  const json list = Parse(w.Get(events + "?" + of_wa2));
  const std::string version = list["metadata"].value("resourceVersion", "");
  ASSERT_FALSE(version.empty()) << list.dump();
  ASSERT_EQ(list["items"].size(), 2u) << list.dump();  // Created, Preempting
  const std::string counted = list["items"][1]["metadata"].value("name", "");

  HttpResponse alice =
      w.Do("GET", events + "?watch=true&resourceVersion=" + version + "&" + of_wa2, kAlice);
  ASSERT_EQ(alice.status, 200) << alice.body;
  WatchDriver seen(alice.stream);
  HttpResponse bob = w.Do("GET", std::string(kApi) + "/events?watch=true", kBob);
  ASSERT_EQ(bob.status, 200) << bob.body;
  WatchDriver bobs(bob.stream);
  EXPECT_TRUE(seen.Events().empty()) << "nothing changed after the list";

  preempting(2);                                  // the same wait again: counted
  w.MustSetStatus(item, {{"phase", "Running"}});  // new
  w.MustSetStatus(Item("workloads", "team-a", "wa"),
                  {{"phase", "Pending"}, {"reason", "Queued"}, {"message", "not this one's"}});
  for (int i = 0; i < 500 && seen.Events().size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::vector<json> got = seen.Events();
  ASSERT_GE(got.size(), 2u) << json(got).dump();
  EXPECT_EQ(got[0].value("type", ""), "MODIFIED");
  EXPECT_EQ(got[0]["object"]["metadata"].value("name", ""), counted);
  EXPECT_EQ(got[0]["object"].value("count", 0), 2);
  EXPECT_NE(got[0]["object"].value("message", "").find("about 2 min"), std::string::npos);
  const auto rv = [](const json& e) {
    return std::stoull(e["object"]["metadata"].value("resourceVersion", "0"));
  };
  EXPECT_LT(std::stoull(version), rv(got[0]));
  for (size_t i = 1; i < got.size(); ++i) {
    EXPECT_EQ(got[i].value("type", ""), "ADDED") << got[i].dump();
    EXPECT_EQ(got[i]["object"]["involvedObject"].value("name", ""), "wa2") << got[i].dump();
    EXPECT_LT(rv(got[i - 1]), rv(got[i]));
  }
  // bob (team-b) sees none of team-a's.
  for (const json& e : bobs.Events())
    EXPECT_NE(e["object"]["involvedObject"].value("namespace", ""), "team-a") << e.dump();

  // From the last version seen, nothing again; from 0, every event there is, as ADDED.
  HttpResponse again =
      w.Do("GET",
           events + "?watch=true&resourceVersion=" + std::to_string(rv(got.back())) + "&" + of_wa2,
           kAlice);
  WatchDriver none(again.stream);
  EXPECT_TRUE(none.Events().empty()) << json(none.Events()).dump();
  HttpResponse all = w.Do("GET", events + "?watch=true&resourceVersion=0&" + of_wa2, kAlice);
  WatchDriver from_zero(all.stream);
  const std::vector<json> replay = from_zero.Events();
  ASSERT_EQ(replay.size(), 1 + got.size()) << json(replay).dump();  // Created and the rest
  for (const json& e : replay) EXPECT_EQ(e.value("type", ""), "ADDED") << e.dump();
  EXPECT_EQ(w.Get(events + "?watch=true&resourceVersion=x").status, 400);
  // A version this server never gave (one from before a restart) is refused on the stream with
  // Kubernetes' 410, so that the client lists again instead of missing what changed.
  HttpResponse foreign = w.Do("GET", events + "?watch=true&resourceVersion=5", kAlice);
  WatchDriver refused(foreign.stream);
  const std::vector<json> said = refused.Events();
  ASSERT_EQ(said.size(), 1u) << json(said).dump();
  EXPECT_EQ(said[0].value("type", ""), "ERROR");
  EXPECT_EQ(said[0]["object"].value("code", 0), 410) << said[0].dump();
  EXPECT_TRUE(refused.finished());
  // The workload deleted: a watch is told it was (Deleted, ADDED); an hour later its events
  // go with the next write, and the watch is told (DELETED), as is one that starts from a
  // version before that (of those it may have seen).
  ASSERT_EQ(w.Do("DELETE", item, kAdmin).status, 200);
  const size_t deleted = replay.size() + 1;
  for (int i = 0; i < 500 && from_zero.Events().size() < deleted; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(from_zero.Events().size(), deleted) << json(from_zero.Events()).dump();
  EXPECT_EQ(from_zero.Events().back()["object"].value("reason", ""), "Deleted");
  w.clock().AdvanceMs(3'600'000);
  w.MustSetStatus(Item("workloads", "team-a", "wa"), {{"phase", "Running"}});
  for (int i = 0; i < 500 && from_zero.Events().size() < deleted * 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::vector<json> after = from_zero.Events();
  ASSERT_EQ(after.size(), deleted * 2) << json(after).dump();
  for (size_t i = deleted; i < after.size(); ++i)
    EXPECT_EQ(after[i].value("type", ""), "DELETED") << after[i].dump();
  HttpResponse later =
      w.Do("GET",
           events + "?watch=true&" + of_wa2 + "&resourceVersion=" + std::to_string(rv(got.back())),
           kAlice);
  WatchDriver told(later.stream);
  const std::vector<json> gone = told.Events();
  ASSERT_EQ(gone.size(), replay.size()) << json(gone).dump();
  for (const json& e : gone) EXPECT_EQ(e.value("type", ""), "DELETED") << e.dump();
}

// ---------------------------------------------------------------------------------------------
// Paths and methods.

TEST(ApiPathTest, UnknownPathsAndMethods) {
  World w;
  w.Seed();
  EXPECT_EQ(w.Get(std::string(kApi) + "/gadgets").status, 404);
  EXPECT_EQ(w.Get(std::string(kApi) + "/namespaces/team-a/nodes").status, 404);
  EXPECT_EQ(w.Get(std::string(kApi) + "/workloads/wa").status, 404);
  EXPECT_EQ(w.Get(Item("workloads", "team-a", "wa") + "/logs").status, 404);
  EXPECT_EQ(w.Do("POST", Item("workloads", "team-a", "wa"), kAdmin, "{}").status, 405);
  EXPECT_EQ(w.Do("DELETE", Collection("workloads", "team-a"), kAdmin).status, 405);
  EXPECT_EQ(w.Do("OPTIONS", Collection("nodes"), kAdmin).status, 405);
  // Events: a list, read by those who may list a namespace's workloads; not by nodes (a node
  // reads the workloads assigned to it, not other tenants' histories).
  EXPECT_EQ(w.Get(std::string(kApi) + "/events").status, 200);
  EXPECT_EQ(w.Get(std::string(kApi) + "/namespaces/team-a/events", w.node_token).status, 403);
  EXPECT_EQ(w.Get(std::string(kApi) + "/events", w.node_token).status, 403);
  // A tenant's events denied say events, not workloads (what was asked for).
  HttpResponse others = w.Do("GET", std::string(kApi) + "/namespaces/team-b/events", kAlice);
  EXPECT_EQ(others.status, 403);
  EXPECT_NE(others.body.find("may not list events in tenant team-b"), std::string::npos)
      << others.body;
  EXPECT_EQ(w.Do("POST", std::string(kApi) + "/namespaces/team-a/events", kAdmin, "{}").status,
            405);
  HttpResponse discovery = w.Get(kApi);
  EXPECT_EQ(discovery.status, 200);
  EXPECT_EQ(Parse(discovery)["resources"].size(), 9u);  // (events: list and watch; nodeallocations)
  // Short names, as fabctl takes them, for kubectl too (a trial's `kubectl get wl` found none).
  std::map<std::string, json> by_name;
  const json resources = Parse(discovery)["resources"];
  for (const json& r : resources) by_name[r.value("name", "")] = r;
  EXPECT_EQ(by_name["workloads"]["shortNames"], json::array({"wl"})) << discovery.body;
  EXPECT_EQ(by_name["queues"]["shortNames"], json::array({"q"}));
  EXPECT_EQ(by_name["priorityclasses"].value("singularName", ""), "priorityclass");
  EXPECT_FALSE(by_name["tenants"].contains("shortNames"));
}

}  // namespace
}  // namespace fabrica
