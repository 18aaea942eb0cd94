// api_handler_bench: the CPU cost of the API's request handling alone, without HTTP, TLS or
// disk: ApiServer::Handle on an in-memory store, one thread. It tells how much of a create's
// cost in api_load is the server's own work (decoding, validation, serialisation) rather than
// the network, the group commit or the client.
//
//   api_handler_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "api/api_server.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "bench_workload.h"
#include "control/clock.h"
#include "store/store.h"

namespace {

using namespace fabrica;

constexpr char kToken[] = "bench-admin-token-0123456789";

using bench::Workload;

struct Fixture {
  std::unique_ptr<Store> store = NewMemoryStore(1000);
  Authorizer auth = *Authorizer::Parse(std::string("tokens: [{token: ") + kToken +
                                           ", user: admin}]\n"
                                           "bindings: [{role: platform-admin, user: admin}]\n",
                                       "auth");
  RealClock clock;
  ApiServer api{*store, auth, clock, nullptr};

  Fixture() {
    HttpResponse r = api.Handle(Request("POST", "/apis/fabrica.dev/v1/tenants",
                                        R"({"metadata":{"name":"bench"},"spec":{}})"));
    if (r.status != 201) {
      std::fprintf(stderr, "cannot create the tenant: %s\n", r.body.c_str());
      std::abort();
    }
  }

  static HttpRequest Request(const std::string& method, const std::string& path,
                             std::string body = "") {
    HttpRequest r;
    r.method = method;
    r.target = r.path = path;
    r.headers["authorization"] = std::string("Bearer ") + kToken;
    if (!body.empty()) r.headers["content-type"] = "application/json";
    r.body = std::move(body);
    r.peer = "127.0.0.1:1";
    return r;
  }
};

const std::string kWorkloads = "/apis/fabrica.dev/v1/namespaces/bench/workloads";

void BM_CreateWorkload(benchmark::State& state) {
  Fixture f;
  int64_t i = 0;
  for (auto _ : state) {
    HttpResponse r =
        f.api.Handle(Fixture::Request("POST", kWorkloads, Workload("w-" + std::to_string(i++))));
    if (r.status != 201) state.SkipWithError(r.body.c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CreateWorkload)->Unit(benchmark::kMicrosecond);

void BM_GetWorkload(benchmark::State& state) {
  Fixture f;
  if (f.api.Handle(Fixture::Request("POST", kWorkloads, Workload("read-me"))).status != 201) {
    state.SkipWithError("seed failed");
  }
  const HttpRequest get = Fixture::Request("GET", kWorkloads + "/read-me");
  for (auto _ : state) {
    HttpResponse r = f.api.Handle(get);
    if (r.status != 200) state.SkipWithError(r.body.c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GetWorkload)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
