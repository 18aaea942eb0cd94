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
// The load comes from Debian's wrk when it is installed (one event-loop thread holding all the
// connections, so the client takes little of the two cores from the server under test), else
// from `concurrency` blocking client threads of Fabrica's own HttpClient. Either way the same
// client drives Fabrica and etcd.
//
//   api_load [--seconds 5] [--concurrency 32] [--etcd /usr/bin/etcd] [--wrk /usr/bin/wrk|none]
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

#include "api/metrics.h"
#include "bench_server.h"
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

// One wrk run: `wrk -t1 -c<conc> -d<seconds>s --latency -s <script> <url>`. The script sets the
// method, headers and body (and, for writes, a fresh name per request). Requests answered with
// a status other than 2xx/3xx, and socket errors, count as failed.
Result_ RunWrk(const std::string& wrk, const std::string& dir, const std::string& tag,
               const std::string& script, const std::string& url, int conc, double seconds) {
  const std::string path = dir + "/" + tag + ".lua";
  {
    std::ofstream f(path);
    f << script;
  }
  const std::string cmd = "'" + wrk + "' -t1 -c" + std::to_string(conc) + " -d" +
                          std::to_string(static_cast<int>(seconds + 0.5)) + "s --latency -s '" +
                          path + "' '" + url + "' 2>&1";
  Result_ r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  // The token after `key` in `text` ("" when `key` is absent).
  auto number_after = [](const std::string& text, const std::string& key) -> std::string {
    const size_t at = text.find(key);
    if (at == std::string::npos) return "";
    const size_t b = text.find_first_not_of(' ', at + key.size());
    if (b == std::string::npos) return "";
    return text.substr(b, text.find_first_of(" \n,", b) - b);
  };
  auto millis = [](const std::string& v) {
    const double x = std::atof(v.c_str());
    if (v.ends_with("us")) return x / 1000;
    if (v.ends_with("ms")) return x;
    if (v.ends_with("s")) return x * 1000;
    return x;
  };
  const size_t req_at = out.find(" requests in ");
  if (req_at == std::string::npos) {
    std::fprintf(stderr, "wrk gave no result:\n%s\n", out.c_str());
    return r;
  }
  const size_t line = out.rfind('\n', req_at);
  const int64_t requests = std::atoll(out.c_str() + line + 1);
  int64_t bad = std::atoll(number_after(out, "Non-2xx or 3xx responses:").c_str());
  if (const size_t at = out.find("Socket errors:"); at != std::string::npos) {
    const std::string errors = out.substr(at, out.find('\n', at) - at);
    for (const char* k : {"connect", "read", "write", "timeout"})
      bad += std::atoll(number_after(errors, k).c_str());
  }
  r.ok = requests - std::min(bad, requests);
  r.failed = bad;
  r.per_second = std::atof(number_after(out, "Requests/sec:").c_str()) * static_cast<double>(r.ok) /
                 static_cast<double>(std::max<int64_t>(1, requests));
  r.p50_ms = millis(number_after(out, "     50%"));
  r.p99_ms = millis(number_after(out, "     99%"));
  return r;
}

// A wrk script that sends one fixed request.
std::string FixedRequest(const std::string& method, const std::string& body,
                         const std::string& auth) {
  std::string s = "wrk.method = \"" + method + "\"\n";
  if (!auth.empty()) s += "wrk.headers[\"Authorization\"] = \"Bearer " + auth + "\"\n";
  if (!body.empty())
    s += "wrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [==[" + body + "]==]\n";
  return s;
}

// A wrk script that POSTs `body` with @NAME@ replaced by `name`, a Lua expression over the wrk
// thread number `tid` and the request number `n` that is unique across threads and requests.
std::string CreatingRequests(const std::string& body, const std::string& auth,
                             const std::string& name) {
  std::string s =
      "local next_thread = 0\n"
      "function setup(thread) thread:set(\"tid\", next_thread); next_thread = next_thread + 1 "
      "end\n"
      "local n = 0\n"
      "local template = [==[" +
      body +
      "]==]\n"
      "local headers = {[\"Content-Type\"] = \"application/json\"";
  if (!auth.empty()) s += ", [\"Authorization\"] = \"Bearer " + auth + "\"";
  s += "}\n"
       "function request()\n"
       "  n = n + 1\n"
       "  local name = " +
       name +
       "\n"
       "  return wrk.format(\"POST\", nil, headers, (template:gsub(\"@NAME@\", name)))\n"
       "end\n";
  return s;
}

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
  std::string wrk = "/usr/bin/wrk";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--concurrency")
      conc = std::atoi(argv[i + 1]);
    else if (a == "--etcd")
      etcd_bin = argv[i + 1];
    else if (a == "--wrk")
      wrk = argv[i + 1];
  }
  struct stat sb;
  const bool use_wrk = stat(wrk.c_str(), &sb) == 0;
  Metrics metrics;
  bench::BenchServer server("fabrica-load", 64, &metrics);
  if (!server.ok()) return 1;
  const std::string& dir = server.dir();
  const ClientOptions& co = server.client();
  const std::string& token = co.token;
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
  std::printf("one ~%zu-byte object; %d connections from %s; %.0f s per measurement\n",
              Workload("read-me").size(), conc,
              use_wrk ? "one wrk thread" : "as many HttpClient threads", seconds);
  if (use_wrk) {
    const std::string url = co.server + ns_path;
    Print("fabrica", "reads", conc,
          RunWrk(wrk, dir, "fabrica-reads", FixedRequest("GET", "", token), url + "/read-me", conc,
                 seconds));
    Print("fabrica", "writes", conc,
          RunWrk(wrk, dir, "fabrica-writes",
                 CreatingRequests(Workload("@NAME@"), token,
                                  "\"w\" .. tostring(tid) .. \"-\" .. tostring(n)"),
                 url, conc, seconds));
  } else {
    Print("fabrica", "reads", conc, Drive(conc, seconds, [&](int t, int64_t) {
            auto r = clients[t]->Do("GET", ns_path + "/read-me");
            return r.ok() && r->status == 200;
          }));
    Print("fabrica", "writes", conc, Drive(conc, seconds, [&](int t, int64_t i) {
            auto r = clients[t]->Do("POST", ns_path,
                                    Workload("w-" + std::to_string(t) + "-" + std::to_string(i)));
            return r.ok() && r->status == 201;
          }));
  }
  server.Stop();

  // etcd with TLS on both sides, fsync on (its default), on loopback ports.
  if (stat(etcd_bin.c_str(), &sb) != 0) {
    std::printf("etcd: %s not found, skipped (apt-get install etcd-server)\n", etcd_bin.c_str());
    return 0;
  }
  const std::string etcd_url = "https://127.0.0.1:23790";
  pid_t pid = fork();
  if (pid == 0) {
    const std::string data = dir + "/etcd";
    // etcd's own logging goes to a file, so that the results stay readable.
    const std::string log = dir + "/etcd.log";
    if (FILE* f = std::fopen(log.c_str(), "w")) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
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
  const std::string range = "{\"key\":\"" + Base64("/bench/read-me") + "\"}";
  if (!up) {
    std::printf("etcd did not start\n");
  } else if (use_wrk) {
    Print("etcd", "reads", conc,
          RunWrk(wrk, dir, "etcd-reads", FixedRequest("POST", range, ""), etcd_url + "/v3/kv/range",
                 conc, seconds));
    // Keys are "/bench/w/" (9 bytes, so its base64 ends on a group boundary) followed by the
    // bytes that 16 base64 digits decode to: unique per thread and request.
    Print("etcd", "writes", conc,
          RunWrk(wrk, dir, "etcd-writes",
                 CreatingRequests(
                     "{\"key\":\"" + Base64("/bench/w/") + "@NAME@\",\"value\":\"" + value + "\"}",
                     "", "string.format(\"%03d%013d\", tid, n)"),
                 etcd_url + "/v3/kv/put", conc, seconds));
  } else {
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
  return 0;
}
