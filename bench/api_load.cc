// api_load: reads/s and durable writes/s of the Fabrica API against a local etcd, in one run.
//
// It starts a Fabrica API server in-process (SQLite store in a temporary directory, HTTPS with a
// generated CA) and an etcd 3.4 process (Debian's etcd-server; TLS with the same certificates,
// fsync on, as by default), then drives each with the same client code and concurrency:
//   reads:  GET of one ~1 KiB object by name (Fabrica: a Workload; etcd: /v3/kv/range);
//   writes: create of a new ~1 KiB object, acknowledged only once durable (Fabrica: POST of a
//           Workload; etcd: /v3/kv/put through its HTTP/JSON gateway).
// and prints throughput with p50/p99 latency for each. Loopback only; bounded in time.
//
//   api_load [--seconds 5] [--concurrency 32] [--etcd /usr/bin/etcd]
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/api_server.h"
#include "api/http_server.h"
#include "api/metrics.h"
#include "bench_workload.h"
#include "client/http_client.h"
#include "control/clock.h"
#include "store/store.h"

namespace {

using namespace fabrica;
using Clock = std::chrono::steady_clock;

struct Result_ {
  double per_second = 0, p50_ms = 0, p99_ms = 0;
  int64_t ok = 0, failed = 0;
};

// Runs `op(thread, i)` from `threads` threads for `seconds`; op returns true on success.
Result_ Drive(int threads, double seconds, const std::function<bool(int, int64_t)>& op) {
  std::vector<std::vector<double>> lat(threads);
  std::atomic<int64_t> ok{0}, failed{0};
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t i = 0; Clock::now() < end; ++i) {
        const auto t0 = Clock::now();
        const bool good = op(t, i);
        lat[t].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        (good ? ok : failed)++;
      }
    });
  }
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  Result_ r;
  r.ok = ok;
  r.failed = failed;
  r.per_second = static_cast<double>(ok) / elapsed;
  if (!all.empty()) {
    r.p50_ms = all[all.size() / 2];
    r.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return r;
}

std::string Base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -6;
  for (unsigned char c : in) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(t[(val >> bits) & 0x3F]);
      bits -= 6;
    }
  }
  if (bits > -6) out.push_back(t[((val << 8) >> (bits + 8)) & 0x3F]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

using bench::Workload;

void Print(const char* target, const char* what, int conc, const Result_& r) {
  std::printf(
      "%-8s %-7s concurrency %-3d %9.0f ops/s   p50 %6.2f ms   p99 %6.2f ms   (%lld ok, %lld "
      "failed)\n",
      target, what, conc, r.per_second, r.p50_ms, r.p99_ms, static_cast<long long>(r.ok),
      static_cast<long long>(r.failed));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int conc = 32;
  std::string etcd_bin = "/usr/bin/etcd";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--concurrency")
      conc = std::atoi(argv[i + 1]);
    else if (a == "--etcd")
      etcd_bin = argv[i + 1];
  }
  char tmpl[] = "/tmp/fabrica-load-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  Status certs = EnsureServerCertificates(dir, {"localhost", "127.0.0.1"});
  if (!certs.ok()) {
    std::fprintf(stderr, "certificates: %s\n", certs.message().c_str());
    return 1;
  }
  const std::string token = "bench-admin-token-0123456789";
  auto auth = Authorizer::Parse("tokens: [{token: " + token +
                                    ", user: admin}]\n"
                                    "bindings: [{role: platform-admin, user: admin}]\n",
                                "auth");
  auto store = OpenSqliteStore(dir + "/store.db");
  if (!auth.ok() || !store.ok()) {
    std::fprintf(stderr, "setup failed\n");
    return 1;
  }
  RealClock clock;
  Metrics metrics;
  ApiServer api(**store, *auth, clock, &metrics);
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  // Reads are served on the I/O threads; writes, which wait for their group commit, on a pool
  // large enough that every waiting writer joins the next commit.
  options.threads = 2;
  options.offload = ApiServer::MayBlock;
  options.offload_threads = 64;
  options.cert_file = dir + "/server.crt";
  options.key_file = dir + "/server.key";
  HttpServer server(options, [&api](const HttpRequest& r) { return api.Handle(r); });
  if (Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "server: %s\n", st.message().c_str());
    return 1;
  }
  ClientOptions co;
  co.server = "https://127.0.0.1:" + std::to_string(server.port());
  co.ca_file = dir + "/ca.crt";
  co.token = token;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < conc; ++i) clients.push_back(std::make_unique<HttpClient>(co));
  const std::string ns_path = "/apis/fabrica.dev/v1/namespaces/bench/workloads";
  (void)clients[0]->Do("POST", "/apis/fabrica.dev/v1/tenants",
                       R"({"metadata":{"name":"bench"},"spec":{"trust":"standard"}})");
  auto seeded = clients[0]->Do("POST", ns_path, Workload("read-me"));
  if (!seeded.ok() || seeded->status != 201) {
    std::fprintf(stderr, "cannot create the object to read: %s\n",
                 seeded.ok() ? seeded->body.c_str() : seeded.status().message().c_str());
    return 1;
  }
  std::printf("one ~%zu-byte object; %d client threads; %.0f s per measurement\n",
              Workload("read-me").size(), conc, seconds);
  Print("fabrica", "reads", conc, Drive(conc, seconds, [&](int t, int64_t) {
          auto r = clients[t]->Do("GET", ns_path + "/read-me");
          return r.ok() && r->status == 200;
        }));
  Print("fabrica", "writes", conc, Drive(conc, seconds, [&](int t, int64_t i) {
          auto r = clients[t]->Do("POST", ns_path,
                                  Workload("w-" + std::to_string(t) + "-" + std::to_string(i)));
          return r.ok() && r->status == 201;
        }));
  server.Stop();

  // etcd with TLS on both sides, fsync on (its default), on loopback ports.
  struct stat sb;
  if (stat(etcd_bin.c_str(), &sb) != 0) {
    std::printf("etcd: %s not found, skipped (apt-get install etcd-server)\n", etcd_bin.c_str());
    return 0;
  }
  const std::string etcd_url = "https://127.0.0.1:23790";
  pid_t pid = fork();
  if (pid == 0) {
    const std::string data = dir + "/etcd";
    execl(etcd_bin.c_str(), "etcd", "--data-dir", data.c_str(), "--listen-client-urls",
          etcd_url.c_str(), "--advertise-client-urls", etcd_url.c_str(), "--listen-peer-urls",
          "http://127.0.0.1:23800", "--initial-advertise-peer-urls", "http://127.0.0.1:23800",
          "--initial-cluster", "default=http://127.0.0.1:23800", "--cert-file",
          (dir + "/server.crt").c_str(), "--key-file", (dir + "/server.key").c_str(), "--log-level",
          "error", nullptr);
    _exit(127);
  }
  ClientOptions eo;
  eo.server = etcd_url;
  eo.ca_file = dir + "/ca.crt";
  std::vector<std::unique_ptr<HttpClient>> etcd;
  for (int i = 0; i < conc; ++i) etcd.push_back(std::make_unique<HttpClient>(eo));
  const std::string value = Base64(Workload("read-me"));
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    auto r =
        etcd[0]->Do("POST", "/v3/kv/put",
                    "{\"key\":\"" + Base64("/bench/read-me") + "\",\"value\":\"" + value + "\"}");
    up = r.ok() && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!up) {
    std::printf("etcd did not start\n");
  } else {
    const std::string range = "{\"key\":\"" + Base64("/bench/read-me") + "\"}";
    Print("etcd", "reads", conc, Drive(conc, seconds, [&](int t, int64_t) {
            auto r = etcd[t]->Do("POST", "/v3/kv/range", range);
            return r.ok() && r->status == 200;
          }));
    Print("etcd", "writes", conc, Drive(conc, seconds, [&](int t, int64_t i) {
            const std::string key =
                Base64("/bench/w-" + std::to_string(t) + "-" + std::to_string(i));
            auto r = etcd[t]->Do("POST", "/v3/kv/put",
                                 "{\"key\":\"" + key + "\",\"value\":\"" + value + "\"}");
            return r.ok() && r->status == 200;
          }));
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::string cleanup = "rm -rf '" + dir + "'";
  (void)std::system(cleanup.c_str());
  return 0;
}
