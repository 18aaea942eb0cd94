// Metering benchmarks (Google Benchmark):
//  - Ingest: samples/s for ingest as issue 6 defines it: de-duplicate, fold into rollups (the
//    meter seals buckets as time passes) and commit the batch to the SQLite journal. Fleet of
//    1,000 GPUs sampled every 30 s, batches of one scrape round of every device; bindings keep
//    every GPU held by 1-4 sharers. `parse` adds reading the samples from dcgm-exporter text.
//  - Query30d: a 30-day allocation report by tenant over 100,000 workloads on 1,000 GPUs.
// Run: build/release/bench/meter_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "meter/dcgm.h"
#include "meter/ledger.h"
#include "meter/report.h"
#include "store/meter_journal.h"

namespace fabrica {
namespace {

constexpr int kGpus = 1000;
constexpr int64_t kT0 = 1'796'000'000'000;

std::string Uuid(int g) { return "GPU-" + std::to_string(100000 + g); }

void AddFleet(Meter& m) {
  for (int g = 0; g < kGpus; ++g) {
    (void)m.AddDevice({Uuid(g), "node-" + std::to_string(g / 8), "H100", kT0, kOpenEnd, "", 1000});
  }
}

void BM_Ingest(benchmark::State& state) {
  const bool journal = state.range(0) != 0;
  const bool parse = state.range(1) != 0;
  Meter meter;
  AddFleet(meter);
  for (int g = 0; g < kGpus; ++g) {
    const int sharers = 1 + g % 4;
    BindEvent b;
    b.id = "b" + std::to_string(g);
    b.workload = "t" + std::to_string(g % 20) + "/w" + std::to_string(g);
    b.tenant = "t" + std::to_string(g % 20);
    b.queue = b.tenant;
    b.start_ms = kT0;
    b.devices.push_back({"node-" + std::to_string(g / 8), Uuid(g), "H100",
                         static_cast<int32_t>(1000 / sharers), ""});
    (void)meter.Bind(b);
  }
  std::unique_ptr<MeterJournal> j;
  const std::string path = "/tmp/fabrica_meter_bench.db";
  if (journal) {
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    auto opened = MeterJournal::Open(path);
    if (!opened.ok()) {
      state.SkipWithError(opened.status().message().c_str());
      return;
    }
    j = std::move(opened).value();
  }
  std::mt19937 rng(1);
  int64_t t = kT0;
  int64_t samples = 0;
  // Ten dcgm-exporter pages of the whole fleet, made before timing; each scrape parses one.
  std::vector<std::string> pages(parse ? 10 : 0);
  for (std::string& page : pages) {
    for (int g = 0; g < kGpus; ++g) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\","
                    "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-%d\"} %.3f\n",
                    g % 8, Uuid(g).c_str(), g % 8, g / 8, (rng() % 1000) / 1000.0);
      page += line;
    }
  }
  for (auto _ : state) {
    // One batch: 10 scrape rounds of every GPU (a 5-minute commit interval at 30 s).
    std::vector<DeviceSample> batch;
    batch.reserve(10 * kGpus);
    for (int round = 0; round < 10; ++round) {
      t += 30'000;
      if (parse) {
        auto parsed = ParseDcgmExposition(pages[static_cast<size_t>(round)], t, "node");
        for (auto& s : *parsed) batch.push_back(std::move(s));
      } else {
        for (int g = 0; g < kGpus; ++g) {
          batch.push_back({"node-" + std::to_string(g / 8),
                           Uuid(g),
                           t,
                           static_cast<int32_t>(rng() % 1001),
                           {}});
        }
      }
    }
    const size_t n = batch.size();
    meter.Ingest(std::vector<DeviceSample>(batch.begin(), batch.begin() + 100));  // resent below
    meter.Ingest(std::move(batch));  // the first 100 are duplicates now
    meter.Advance(t);
    MeterChanges changes = meter.TakeChanges();
    if (j) {
      Status st = j->Commit(changes, meter.sealed_until_ms() - 60'000);
      if (!st.ok()) state.SkipWithError(st.message().c_str());
    }
    samples += static_cast<int64_t>(n);
  }
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  state.counters["raw_kept"] = static_cast<double>(meter.raw_sample_count());
}
BENCHMARK(BM_Ingest)
    ->ArgNames({"journal", "parse"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({1, 1})
    ->UseRealTime()  // the rate counts wall time, fsyncs included
    ->Unit(benchmark::kMillisecond);

// 100,000 workloads over 30 days on 1,000 GPUs: each GPU runs a sequence of bindings (1-4
// sharers of random lengths); samples every 30 s for the whole month, sealed as they go.
Meter& MonthOfHistory() {
  static Meter* meter = [] {
    auto* m = new Meter();
    AddFleet(*m);
    std::mt19937_64 rng(7);
    const int64_t month = 30LL * 86'400'000;
    const int per_gpu = 100'000 / kGpus;  // 100 workloads per GPU, so ~7 h each
    std::vector<std::vector<std::pair<BindEvent, int64_t>>> plan(kGpus);
    int n = 0;
    for (int g = 0; g < kGpus; ++g) {
      int64_t t = kT0;
      for (int k = 0; k < per_gpu; ++k, ++n) {
        const int64_t len = month / per_gpu;
        BindEvent b;
        b.id = "b" + std::to_string(n);
        b.tenant = "tenant-" + std::to_string(rng() % 50);
        b.workload = b.tenant + "/w" + std::to_string(n);
        b.queue = b.tenant + "-q";
        b.start_ms = t;
        b.devices.push_back({"node-" + std::to_string(g / 8), Uuid(g), "H100",
                             static_cast<int32_t>(k % 3 == 0 ? 500 : 1000), ""});
        plan[g].push_back({b, t + len - 1000});
        t += len;
      }
    }
    // Replay in time order, one day at a time (binds, ends, samples, then sealing).
    std::vector<size_t> next(kGpus, 0);
    for (int64_t day = 0; day < 30; ++day) {
      const int64_t from = kT0 + day * 86'400'000, to = from + 86'400'000;
      for (int g = 0; g < kGpus; ++g) {
        while (next[g] < plan[g].size() && plan[g][next[g]].first.start_ms < to) {
          (void)m->Bind(plan[g][next[g]].first);
          (void)m->End({plan[g][next[g]].first.id, plan[g][next[g]].second, "completed"});
          ++next[g];
        }
      }
      std::vector<DeviceSample> batch;
      for (int64_t t = from; t < to; t += 30'000) {
        for (int g = 0; g < kGpus; ++g) {
          batch.push_back({"n", Uuid(g), t, static_cast<int32_t>(rng() % 1001), {}});
        }
        if (batch.size() > 200'000) {
          m->Ingest(batch);
          batch.clear();
        }
      }
      m->Ingest(batch);
      m->Advance(to);
      (void)m->TakeChanges();
    }
    return m;
  }();
  return *meter;
}

void BM_Query30dByTenant(benchmark::State& state) {
  Meter& m = MonthOfHistory();
  PriceBook prices;
  prices.gpu_hour_micros["H100"] = 2'490'000;
  ReportOptions opt;
  opt.from_ms = kT0;
  opt.to_ms = kT0 + 30LL * 86'400'000;
  opt.share_idle = true;
  size_t rows = 0;
  for (auto _ : state) {
    auto r = BuildReport(m, prices, opt);
    rows = (*r)[0].rows.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["intervals"] = static_cast<double>(m.interval_count());
  state.counters["rows"] = static_cast<double>(rows);
}
BENCHMARK(BM_Query30dByTenant)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace fabrica

BENCHMARK_MAIN();
