// server_admission: end-to-end admissions per second through the server (issue 3).
//
// In one process: the SQLite store (WAL, synchronous=FULL, group commit), the API over HTTPS and
// the scheduler with queues, on the real clock. Through the API, as an admin would: `--nodes`
// nodes of 8 H100 register (Node and Lease objects), `--queues` tenants each get a leaf queue
// under one root with an equal guarantee (borrowing allowed), and `--workloads` workloads (1, 2,
// 4 or 8 GPUs, spread over the tenants) are created by `--clients` client threads. Then
// scheduler cycles run back to back until one admits nothing. Printed: creates/s, each cycle's
// time and admissions, admissions/s over the cycles that admitted, and the time from the first
// create to the last admission being durable.
//
//   server_admission [--nodes 500] [--queues 10] [--workloads 5000] [--clients 8]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_server.h"
#include "control/scheduler.h"

namespace {

using namespace fabrica;
using Steady = std::chrono::steady_clock;

double Since(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

std::string Node(int i) {
  return R"({"apiVersion":"fabrica.dev/v1","kind":"Node","metadata":{"name":"node-)" +
         std::to_string(i) + R"("},"spec":{"cpu":"224","memory":"2Ti","leaf":"leaf-)" +
         std::to_string(i / 32) + R"(","gpus":{"count":8,"model":"H100","memory":"80Gi"}}})";
}

std::string Lease(int i) {
  return R"({"apiVersion":"fabrica.dev/v1","kind":"Lease","metadata":{"name":"node-)" +
         std::to_string(i) + R"("},"spec":{"holderIdentity":"node-)" + std::to_string(i) +
         R"(","leaseDurationSeconds":40}})";
}

// Workload i: 1 GPU (6 in 10), 2 (2 in 10), 4 or 8 (1 in 10 each).
std::string Workload(int i, const std::string& ns) {
  static const int kGpus[10] = {1, 1, 1, 1, 1, 1, 2, 2, 4, 8};
  const int gpus = kGpus[(i * 7) % 10];
  return R"({"apiVersion":"fabrica.dev/v1","kind":"Workload","metadata":{"name":"w-)" +
         std::to_string(i) + R"(","namespace":")" + ns + R"("},"spec":{"priority":)" +
         std::to_string(i % 3) + R"(,"podSets":[{"name":"main","count":1,"cpu":")" +
         std::to_string(8 * gpus) + R"(","memory":"64Gi","devices":{"gpus":)" +
         std::to_string(gpus) + R"(}}],"run":{"durationSeconds":3600}}})";
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 500, queues = 10, workloads = 5000, clients = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--nodes") nodes = v;
    if (a == "--queues") queues = v;
    if (a == "--workloads") workloads = v;
    if (a == "--clients") clients = v;
  }
  bench::BenchServer server("fabrica-admission", 32);
  if (!server.ok()) return 1;
  const ClientOptions& co = server.client();

  // Runs `count` calls of `body(i)` to `path(i)` from the client threads; returns the failures.
  auto post_all = [&](int count, auto path, auto body) {
    std::atomic<int> next{0}, failed{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < clients; ++t) {
      pool.emplace_back([&] {
        HttpClient client(co);
        for (int i; (i = next++) < count;) {
          auto r = client.Do("POST", path(i), body(i));
          if (!r.ok() || r->status != 201) {
            if (failed++ == 0)
              std::fprintf(stderr, "POST %s: %s\n", path(i).c_str(),
                           r.ok() ? r->body.c_str() : r.status().message().c_str());
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    return failed.load();
  };
  const std::string api_root = "/apis/fabrica.dev/v1/";
  int bad = post_all(
      nodes, [&](int) { return api_root + "nodes"; }, Node);
  bad += post_all(
      nodes, [&](int) { return api_root + "leases"; }, Lease);
  const int64_t fleet_milli = int64_t{nodes} * 8 * 1000;
  const int64_t each = fleet_milli / queues / 1000;
  bad += post_all(
      1, [&](int) { return api_root + "queues"; },
      [](int) {
        return std::string(
            R"({"apiVersion":"fabrica.dev/v1","kind":"Queue","metadata":{"name":"org"},"spec":{}})");
      });
  bad += post_all(
      queues, [&](int) { return api_root + "tenants"; },
      [](int q) {
        return R"({"apiVersion":"fabrica.dev/v1","kind":"Tenant","metadata":{"name":"team-)" +
               std::to_string(q) + R"("},"spec":{"trust":"standard"}})";
      });
  bad += post_all(
      queues, [&](int) { return api_root + "queues"; },
      [&](int q) {
        return R"({"apiVersion":"fabrica.dev/v1","kind":"Queue","metadata":{"name":"team-)" +
               std::to_string(q) + R"("},"spec":{"parent":"org","quotas":{"gpu":{"guaranteed":)" +
               std::to_string(each) + "}}}}";
      });
  if (bad) {
    std::fprintf(stderr, "setup failed (%d calls)\n", bad);
    return 1;
  }

  const auto t0 = Steady::now();
  bad = post_all(
      workloads,
      [&](int i) {
        return api_root + "namespaces/team-" + std::to_string(i % queues) + "/workloads";
      },
      [&](int i) { return Workload(i, "team-" + std::to_string(i % queues)); });
  const double create_s = Since(t0);
  std::printf(
      "%d nodes (%d GPUs), %d queues, %d workloads created by %d clients in %.2f s: "
      "%.0f creates/s (%d failed)\n",
      nodes, nodes * 8, queues, workloads, clients, create_s, workloads / create_s, bad);

  SchedulerOptions so;
  so.node_grace_ms = 3'600'000;  // no agents renew leases here
  Scheduler scheduler(server.store(), server.clock(), so, nullptr);
  int admitted = 0;
  double admitting_s = 0;
  std::vector<double> cycle_s;
  for (int cycle = 1; cycle <= 50; ++cycle) {
    const auto c0 = Steady::now();
    auto stats = scheduler.RunOnce();
    const double s = Since(c0);
    if (!stats.ok()) {
      std::fprintf(stderr, "cycle %d: %s\n", cycle, stats.status().message().c_str());
      return 1;
    }
    cycle_s.push_back(s);
    std::printf("cycle %2d: %7.1f ms, %5d admitted, %5d pending, %5d bound before\n", cycle,
                s * 1000, stats->scheduled, stats->pending, stats->running);
    if (stats->scheduled == 0) break;
    admitted += stats->scheduled;
    admitting_s += s;
  }
  const double end_to_end = Since(t0);
  std::sort(cycle_s.begin(), cycle_s.end());
  std::printf(
      "admitted %d in %.2f s of admitting cycles: %.0f admissions/s; median cycle %.1f ms; "
      "first create to last admission %.2f s (%.0f admissions/s)\n",
      admitted, admitting_s, admitted / std::max(admitting_s, 1e-9),
      cycle_s[cycle_s.size() / 2] * 1000, end_to_end, admitted / end_to_end);
  return 0;
}
