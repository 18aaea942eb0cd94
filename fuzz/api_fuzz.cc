// Fuzzes the API's request decoding end to end (ApiServer::Handle on an in-memory store): the
// first byte picks the verb and resource, the rest is the body. Whatever comes in, the server
// answers with a status code, and a refused write leaves the store exactly as it was.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "api/api_server.h"
#include "api/metrics.h"

namespace {

struct World {
  std::unique_ptr<fabrica::Store> store = fabrica::NewMemoryStore();
  fabrica::Authorizer auth = *fabrica::Authorizer::Parse(
      "tokens: [{token: fuzz-admin-token-0123, user: admin}]\n"
      "bindings: [{role: platform-admin, user: admin}]\n",
      "auth");
  fabrica::ManualClock clock;
  fabrica::Metrics metrics;
  fabrica::ApiServer api{*store, auth, clock, &metrics};
  World() {
    fabrica::HttpRequest r;
    r.method = "POST";
    r.path = "/apis/fabrica.dev/v1/tenants";
    r.headers["authorization"] = "Bearer fuzz-admin-token-0123";
    r.headers["content-type"] = "application/json";
    r.body = R"({"metadata":{"name":"team-a"},"spec":{"trust":"trusted"}})";
    (void)api.Handle(r);
    r.path = "/apis/fabrica.dev/v1/namespaces/team-a/workloads";
    r.body = R"({"metadata":{"name":"w"},"spec":{"podSets":[{"devices":{"gpus":1}}]}})";
    (void)api.Handle(r);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  if (size == 0) return 0;
  static const char* kMethods[] = {"POST", "PUT", "PATCH", "GET", "DELETE"};
  static const char* kPaths[] = {"/apis/fabrica.dev/v1/namespaces/team-a/workloads",
                                 "/apis/fabrica.dev/v1/namespaces/team-a/workloads/w",
                                 "/apis/fabrica.dev/v1/namespaces/team-a/workloads/w/status",
                                 "/apis/fabrica.dev/v1/tenants",
                                 "/apis/fabrica.dev/v1/nodes",
                                 "/apis/fabrica.dev/v1/queues",
                                 "/apis/fabrica.dev/v1/leases",
                                 "/apis/fabrica.dev/v1/tenants/team-a",
                                 "/apis/fabrica.dev/v1/resourceflavors"};
  fabrica::HttpRequest r;
  r.method = kMethods[data[0] % 5];
  // (The top of the byte's range was added later, so older corpus entries keep their paths.)
  r.path = kPaths[data[0] >= 240 ? 8 : (data[0] / 5) % 8];
  r.headers["authorization"] = "Bearer fuzz-admin-token-0123";
  r.headers["content-type"] =
      r.method == "PATCH" ? "application/merge-patch+json" : "application/json";
  r.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  // Never delete the seeded objects: the other inputs need them.
  if (r.method == "DELETE") return 0;
  const int64_t before = world->store->Revision();
  fabrica::HttpResponse resp = world->api.Handle(r);
  if (resp.status < 100 || resp.status > 599) std::abort();
  if (resp.status >= 300 && world->store->Revision() != before) std::abort();
  if (resp.stream) resp.stream->Cancel();
  return 0;
}
