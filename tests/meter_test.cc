// The meter against an independent millisecond-by-millisecond oracle, on generated histories:
// random bindings (whole GPUs, fractional shares, MIG slices), node loss, samples with gaps,
// duplicates and out-of-order arrival, achieved shares, and a restart from the journal stream.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "meter/dcgm.h"
#include "meter/ledger.h"
#include "meter/report.h"
#include "store/meter_journal.h"
#include "test_util.h"

namespace fabrica {
namespace {

TEST(LargestRemainder, AddsUpExactly) {
  EXPECT_EQ(LargestRemainderSplit(10, {1, 1, 1}), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(LargestRemainderSplit(7, {250, 500}), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(LargestRemainderSplit(5, {0, 0}), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(LargestRemainderSplit(0, {3, 4}), (std::vector<int64_t>{0, 0}));
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    const int64_t total = static_cast<int64_t>(rng() % 1'000'000'000'000ULL);
    std::vector<int64_t> weights(1 + rng() % 9);
    for (auto& w : weights) w = static_cast<int64_t>(rng() % 1000);
    const auto parts = LargestRemainderSplit(total, weights);
    int64_t sum = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      sum += parts[i];
      int64_t wsum = 0;
      for (int64_t w : weights) wsum += w;
      if (wsum > 0) {  // each part within one unit of its exact share
        const long double exact = static_cast<long double>(total) * weights[i] / wsum;
        EXPECT_LE(std::abs(static_cast<long double>(parts[i]) - exact), 1.0L);
      }
    }
    EXPECT_EQ(sum, total);
  }
}

TEST(Money, ParsesAndFormats) {
  EXPECT_EQ(*ParseMoneyMicros("2.49"), 2'490'000);
  EXPECT_EQ(*ParseMoneyMicros("0.000001"), 1);
  EXPECT_EQ(*ParseMoneyMicros("12"), 12'000'000);
  EXPECT_FALSE(ParseMoneyMicros("1.0000001").ok());
  EXPECT_FALSE(ParseMoneyMicros("-1").ok());
  EXPECT_FALSE(ParseMoneyMicros("abc").ok());
  EXPECT_NE(ParseMoneyMicros("1e3").status().message().find("price '1e3'"), std::string::npos);
  EXPECT_EQ(FormatMoneyMicros(2'490'000), "2.49");
  EXPECT_EQ(FormatMoneyMicros(1), "0.000001");
}

TEST(Budget, CalendarPeriodsAndThresholds) {
  // 2026-11-30T13:00:00Z is a Monday.
  const int64_t now = 1'796'043'600'000;
  auto month = *PeriodBounds("month", now);
  EXPECT_EQ(month.first, 1'793'491'200'000);   // 2026-11-01
  EXPECT_EQ(month.second, 1'796'083'200'000);  // 2026-12-01
  auto week = *PeriodBounds("week", now);
  EXPECT_EQ(week.first, 1'795'996'800'000);  // Monday 2026-11-30
  EXPECT_FALSE(PeriodBounds("fortnight", now).ok());
  Budget b;
  b.amount_micros = 100'000'000;
  BudgetState s = EvaluateBudget(b, 85'000'000, "tenant a");
  EXPECT_EQ(s.highest_alert, 80);
  EXPECT_FALSE(s.exceeded);
  EXPECT_NE(s.message.find("tenant a spent 85.00 of its 100.00 monthly budget"), std::string::npos)
      << s.message;
  EXPECT_TRUE(EvaluateBudget(b, 100'000'000, "a").exceeded);
}

TEST(Meter, RejectsBadEventsAndChangesNothing) {
  Meter m;
  BindEvent bad{"b1", "t/w", "t", "q", 0, {{"n", "", "H100", 1000, ""}}};
  Status st = m.Bind(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("devices[0].uuid"), std::string::npos) << st.message();
  bad.devices[0] = {"n", "GPU-1", "H100", 1500, ""};
  st = m.Bind(bad);
  EXPECT_NE(st.message().find("gpuMilli 1500"), std::string::npos) << st.message();
  EXPECT_EQ(m.interval_count(), 0u);
  ASSERT_TRUE(m.Bind({"b1", "t/w", "t", "q", 1000, {{"n", "GPU-1", "H100", 1000, ""}}}).ok());
  EXPECT_FALSE(m.End({"b1", 500, "completed"}).ok());  // before its start
  EXPECT_FALSE(m.End({"nope", 5000, "completed"}).ok());
  ASSERT_TRUE(m.End({"b1", 5000, "completed"}).ok());
  ASSERT_TRUE(m.End({"b1", 9000, "completed"}).ok());  // a repeat changes nothing
  auto usage = m.Usage(0, 100'000);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].held, 4000 * 1000);
  m.Ingest({{"n", "GPU-1", 1000, 1200, {}}, {"n", "", 2000, 10, {}}});
  EXPECT_EQ(m.stats().samples_invalid, 2);
}

// ---- The oracle ------------------------------------------------------------------------------

struct History {
  MeterConfig config;
  int64_t horizon_ms = 0;
  std::vector<FleetDevice> devices;
  std::vector<BindEvent> binds;
  std::vector<EndEvent> ends;
  std::vector<DeviceSample> samples;  // as delivered (with duplicates and disorder)
  std::vector<int64_t> deliver_at;    // wall time each sample is delivered
  std::set<size_t> late;              // samples delivered after their bucket was sealed
};

// Per device and millisecond: the sample in force and the bindings holding it; spans are the
// maximal runs where those and the bucket do not change. Totals are kept per bucket, so windows
// on bucket boundaries sum them.
struct OracleTotals {
  std::map<int64_t, std::map<std::string, int64_t>> used;     // bucket -> workload -> amount
  std::map<int64_t, std::map<std::string, int64_t>> unknown;  // bucket -> workload -> amount
  std::map<int64_t, int64_t> unattributed;                    // bucket -> amount
  std::map<int64_t, int64_t> device_used;                     // bucket -> amount

  template <typename T>
  static int64_t Sum(const std::map<int64_t, T>& m, int64_t from, int64_t to,
                     const std::function<int64_t(const T&)>& f) {
    int64_t s = 0;
    for (const auto& [b, v] : m) {
      if (b >= from && b < to) s += f(v);
    }
    return s;
  }
};

OracleTotals Oracle(const History& h, int64_t to) {
  OracleTotals out;
  const int64_t hold = 2 * h.config.sample_interval_ms;
  std::map<std::string, std::map<int64_t, const DeviceSample*>> samples;  // first one wins
  for (size_t i = 0; i < h.samples.size(); ++i) {
    if (h.late.count(i)) continue;
    samples[h.samples[i].device_uuid].emplace(h.samples[i].time_ms, &h.samples[i]);
  }
  std::map<std::string, int64_t> end_of;
  for (const EndEvent& e : h.ends) end_of.emplace(e.id, e.end_ms);
  struct Holder {
    std::string workload;
    int64_t start, end;
    int32_t milli;    // held (unknown time counts it)
    int32_t compute;  // what it may run: busy time is split by it
  };
  std::map<std::string, std::vector<Holder>> holders;
  std::map<std::string, int32_t> capacity;
  // Sharers split ties in the order of their start, then binding id.
  std::vector<BindEvent> binds = h.binds;
  std::sort(binds.begin(), binds.end(), [](const BindEvent& a, const BindEvent& b) {
    return a.start_ms != b.start_ms ? a.start_ms < b.start_ms : a.id < b.id;
  });
  for (const BindEvent& b : binds) {
    const int64_t end = end_of.count(b.id) ? end_of[b.id] : kOpenEnd;
    for (const BoundDevice& d : b.devices) {
      holders[d.uuid].push_back({b.workload, b.start_ms, end, d.gpu_milli,
                                 d.compute_milli > 0 ? d.compute_milli : d.gpu_milli});
      if (!d.mig_profile.empty()) capacity[d.uuid] = d.gpu_milli;
    }
  }
  std::set<std::string> uuids;
  for (auto& [u, v] : samples) uuids.insert(u);
  for (auto& [u, v] : holders) uuids.insert(u);
  for (const std::string& uuid : uuids) {
    const auto& s = samples[uuid];
    const auto& hs = holders[uuid];
    const int32_t cap = capacity.count(uuid) ? capacity[uuid] : 1000;
    // The state of every millisecond.
    std::vector<const DeviceSample*> in_force(static_cast<size_t>(to), nullptr);
    for (auto it = s.begin(); it != s.end(); ++it) {
      const int64_t next = std::next(it) == s.end() ? to : std::next(it)->first;
      for (int64_t t = it->first; t < std::min({next, it->first + hold, to}); ++t) {
        in_force[static_cast<size_t>(t)] = it->second;
      }
    }
    std::vector<uint64_t> mask(static_cast<size_t>(to), 0);
    for (size_t i = 0; i < hs.size(); ++i) {
      for (int64_t t = hs[i].start; t < std::min(hs[i].end, to); ++t) {
        mask[static_cast<size_t>(t)] |= uint64_t{1} << i;
      }
    }
    int64_t carry = 0;
    for (int64_t t = 0; t < to;) {
      const size_t i = static_cast<size_t>(t);
      const int64_t bucket = t / h.config.bucket_ms * h.config.bucket_ms;
      int64_t end = t + 1;
      while (end < std::min(to, bucket + h.config.bucket_ms) &&
             in_force[static_cast<size_t>(end)] == in_force[i] &&
             mask[static_cast<size_t>(end)] == mask[i]) {
        ++end;
      }
      const int64_t len = end - t;
      std::vector<size_t> who;
      for (size_t k = 0; k < hs.size(); ++k) {
        if (mask[i] >> k & 1) who.push_back(k);
      }
      const DeviceSample* sample = in_force[i];
      if (sample == nullptr) {
        for (size_t k : who) out.unknown[bucket][hs[k].workload] += hs[k].milli * len;
      } else {
        const int64_t exact = int64_t{sample->util_permille} * cap * len + carry;
        const int64_t used = exact / 1000;
        carry = exact % 1000;
        out.device_used[bucket] += used;
        if (who.empty()) {
          out.unattributed[bucket] += used;
        } else {
          std::vector<int64_t> w;
          bool any = false;
          for (size_t k : who) {
            auto a = sample->achieved_permille.find(hs[k].workload);
            w.push_back(a == sample->achieved_permille.end() ? 0 : a->second);
            any = any || w.back() > 0;
          }
          if (!any) {
            w.clear();
            for (size_t k : who) w.push_back(hs[k].compute);
          }
          auto parts = LargestRemainderSplit(used, w);
          for (size_t k = 0; k < who.size(); ++k) out.used[bucket][hs[who[k]].workload] += parts[k];
        }
      }
      t = end;
    }
  }
  return out;
}

// A small fleet: three whole GPUs (one of them shared by fractions), one MIG GPU with two
// instances. Times in ms from 0; the sample interval is 1 s, buckets 10 s.
History Generate(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  History h;
  h.config.sample_interval_ms = 1000;
  h.config.bucket_ms = 10'000;
  h.config.lateness_ms = 20'000;
  h.horizon_ms = 120'000;
  const std::vector<std::string> gpus = {"GPU-a", "GPU-b", "GPU-c", "GPU-m"};
  for (const auto& g : gpus)
    h.devices.push_back({g, g == "GPU-c" ? "n2" : "n1", "H100", 0, kOpenEnd, "", 1000});
  for (const char* gi : {"GPU-m/1", "GPU-m/2"}) {
    h.devices.push_back({gi, "n1", "H100", 0, kOpenEnd, "GPU-m", 429});
  }
  const std::vector<std::string> sample_devices = {"GPU-a", "GPU-b", "GPU-c", "GPU-m/1", "GPU-m/2"};
  const std::vector<std::string> tenants = {"alpha", "beta", "gamma"};
  int n = 0;
  for (int i = 0; i < 40; ++i) {
    BindEvent b;
    b.id = "bind-" + std::to_string(n);
    const std::string tenant = tenants[rng() % tenants.size()];
    b.tenant = tenant;
    b.queue = tenant + "-q";
    b.workload = tenant + "/w" + std::to_string(n++);
    b.start_ms = uniform(0, h.horizon_ms - 20'000);
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {
      b.devices.push_back({"n1", "GPU-a", "H100", 1000, ""});
    } else if (kind == 1) {
      // A fraction charged more than its compute (its memory share is the larger), or as much.
      const auto charge = static_cast<int32_t>(uniform(100, 700));
      const auto compute = static_cast<int32_t>(rng() % 2 ? uniform(10, charge) : charge);
      b.devices.push_back({"n1", "GPU-b", "H100", charge, "", compute});
    } else if (kind == 2) {
      b.devices.push_back({"n1", rng() % 2 ? "GPU-m/1" : "GPU-m/2", "H100", 429, "3g.40gb"});
    } else {
      b.devices.push_back({"n2", "GPU-c", "H100", 1000, ""});
      b.devices.push_back({"n1", "GPU-a", "H100", 250, ""});
    }
    h.binds.push_back(b);
    if (rng() % 5 != 0) {  // some stay open to the end
      const char* reason = rng() % 4 == 0 ? "node-lost" : "completed";
      h.ends.push_back({b.id, b.start_ms + uniform(1, 60'000), reason});
    }
  }
  for (const std::string& dev : sample_devices) {
    int64_t t = uniform(0, 3000);
    while (t < h.horizon_ms) {
      DeviceSample s{dev.substr(0, 5) == "GPU-c" ? "n2" : "n1",
                     dev,
                     t,
                     static_cast<int32_t>(uniform(0, 1000)),
                     {}};
      if (dev == "GPU-b" && rng() % 2) {
        for (const BindEvent& b : h.binds) {
          if (b.devices[0].uuid == "GPU-b" && rng() % 2) {
            s.achieved_permille[b.workload] = static_cast<int32_t>(uniform(0, 1000));
          }
        }
      }
      h.samples.push_back(s);
      h.deliver_at.push_back(t + uniform(0, 8000));  // out of order, within lateness
      if (rng() % 10 == 0) {  // a duplicate (same time, another value: the first one counts)
        DeviceSample dup = s;
        dup.util_permille = static_cast<int32_t>(uniform(0, 1000));
        h.samples.push_back(dup);
        h.deliver_at.push_back(h.deliver_at.back() + uniform(1, 5000));
      }
      t += rng() % 12 == 0 ? uniform(2500, 9000) : uniform(700, 1300);  // a gap: unknown time
    }
  }
  // A few samples arriving long after their bucket was sealed.
  for (int i = 0; i < 3; ++i) {
    DeviceSample s{"n1", "GPU-a", uniform(0, 50'000) * 2 + 1, 500, {}};
    h.samples.push_back(s);
    h.deliver_at.push_back(s.time_ms + h.config.lateness_ms + 2 * h.config.bucket_ms);
    h.late.insert(h.samples.size() - 1);
  }
  return h;
}

// A journal in memory that folds the change stream the way the SQLite one does; `old`: as one
// written before intervals kept their compute shares (a binding sent again after a restart
// gives them back).
struct Journal {
  bool old = false;
  std::map<std::pair<std::string, std::string>, Interval> intervals;
  std::map<std::pair<std::string, std::string>, std::map<int64_t, IntervalRollup>> rollups;
  std::map<std::pair<std::string, int>, PodHold> pods;
  MeterSnapshot snap;

  void Commit(const MeterChanges& c) {
    for (const Interval* iv : c.intervals) {
      Interval fields = *iv;
      fields.sealed.clear();
      fields.sealed_total = {};
      if (old) fields.device.compute_milli = 0;
      intervals[{iv->binding, iv->device.uuid}] = fields;
    }
    for (const PodHold* p : c.pods) pods[{p->binding, p->index}] = *p;
    for (const auto& [iv, from] : c.trimmed) {
      auto& m = rollups[{iv->binding, iv->device.uuid}];
      m.erase(m.lower_bound(from), m.end());
    }
    for (const SealedRollup& r : c.sealed) {
      rollups[{r.interval->binding, r.interval->device.uuid}][r.bucket_ms] = r.amounts;
    }
    for (const auto& s : c.samples) snap.samples.push_back(s);
    if (!c.devices.empty()) snap.devices = c.devices;
    for (const auto& [u, carry] : c.carries) snap.carries[u] = carry;
    for (const auto& u : c.unattributed) snap.unattributed.push_back(u);
    snap.sealed_until_ms = c.sealed_until_ms;
  }
  MeterSnapshot Snapshot() const {
    MeterSnapshot s = snap;
    for (const auto& [k, p] : pods) s.pods.push_back(p);
    for (const auto& [k, iv] : intervals) {
      Interval full = iv;
      auto it = rollups.find(k);
      if (it != rollups.end()) {
        for (const auto& [b, r] : it->second) {
          full.sealed.push_back({b, r});
          full.sealed_total.used += r.used;
          full.sealed_total.unknown += r.unknown;
        }
      }
      s.intervals.push_back(full);
    }
    return s;
  }
};

void Replay(const History& h, Meter& meter, Journal* journal, int64_t restart_at) {
  struct Ev {
    int64_t at;
    int kind;  // 0 bind, 1 end, 2 sample
    size_t index;
  };
  std::vector<Ev> evs;
  for (size_t i = 0; i < h.binds.size(); ++i) evs.push_back({h.binds[i].start_ms, 0, i});
  for (size_t i = 0; i < h.ends.size(); ++i) evs.push_back({h.ends[i].end_ms, 1, i});
  for (size_t i = 0; i < h.samples.size(); ++i) evs.push_back({h.deliver_at[i], 2, i});
  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.at != b.at ? a.at < b.at : a.kind < b.kind;
  });
  for (const FleetDevice& d : h.devices) ASSERT_TRUE(meter.AddDevice(d).ok());
  bool restarted = false;
  for (const Ev& e : evs) {
    if (!restarted && e.at >= restart_at && journal != nullptr) {
      journal->Commit(meter.TakeChanges());
      meter = Meter(h.config);
      meter.Restore(journal->Snapshot());
      restarted = true;
      // After a restart the agents resend what they may not have seen acknowledged.
      std::vector<DeviceSample> resend;
      for (size_t i = 0; i < h.samples.size(); ++i) {
        if (h.deliver_at[i] < e.at && h.deliver_at[i] >= e.at - 3000 && !h.late.count(i)) {
          resend.push_back(h.samples[i]);
        }
      }
      meter.Ingest(resend);
      for (const BindEvent& b : h.binds) {
        if (b.start_ms < e.at) {
          // Replayed events: no-ops, but for the compute shares the journal does not keep.
          ASSERT_TRUE(meter.Bind(b).ok());
        }
      }
    }
    meter.Advance(e.at);
    if (e.kind == 0) {
      ASSERT_TRUE(meter.Bind(h.binds[e.index]).ok());
    } else if (e.kind == 1) {
      ASSERT_TRUE(meter.End(h.ends[e.index]).ok());
    } else {
      meter.Ingest({h.samples[e.index]});
    }
    if (journal != nullptr && e.index % 7 == 0) journal->Commit(meter.TakeChanges());
  }
}

class MeterExactness : public ::testing::TestWithParam<uint64_t> {};

TEST_P(MeterExactness, EveryAggregateEqualsTheOracle) {
  const History h = Generate(GetParam());
  Meter meter(h.config);
  Journal journal;
  Replay(h, meter, &journal, h.horizon_ms / 2 + 3337);
  // Seal part of the history and leave the rest open, so both paths are compared.
  const int64_t now = h.horizon_ms + 15'000;
  meter.Advance(now);
  const OracleTotals oracle = Oracle(h, now);
  for (auto [from, to] : std::vector<std::pair<int64_t, int64_t>>{
           {0, now}, {0, 50'000}, {40'000, 100'000}, {h.horizon_ms - 20'000, now}}) {
    SCOPED_TRACE("window " + std::to_string(from) + ".." + std::to_string(to));
    std::map<std::string, int64_t> want_used, want_unknown;
    for (const auto& [b, m] : oracle.used) {
      for (const auto& [w, v] : m) {
        if (b >= from && b < to) want_used[w] += v;
      }
    }
    for (const auto& [b, m] : oracle.unknown) {
      for (const auto& [w, v] : m) {
        if (b >= from && b < to) want_unknown[w] += v;
      }
    }
    const std::function<int64_t(const int64_t&)> id = [](const int64_t& v) { return v; };
    const int64_t want_unattributed = OracleTotals::Sum(oracle.unattributed, from, to, id);
    const int64_t want_device_used = OracleTotals::Sum(oracle.device_used, from, to, id);
    std::map<std::string, int64_t> used, unknown, held;
    int64_t total_used = 0;
    for (const IntervalUsage& u : meter.Usage(from, to)) {
      used[u.interval->workload] += u.used;
      unknown[u.interval->workload] += u.unknown;
      held[u.interval->workload] += u.held;
      total_used += u.used;
    }
    for (const auto& [w, v] : want_used) EXPECT_EQ(used[w], v) << w;
    for (const auto& [w, v] : used) EXPECT_EQ(want_used[w], v) << w;
    for (const auto& [w, v] : want_unknown) EXPECT_EQ(unknown[w], v) << w;
    for (const auto& [w, v] : unknown) EXPECT_EQ(want_unknown[w], v) << w;
    EXPECT_EQ(meter.UnattributedUsed(from, to), want_unattributed);
    EXPECT_EQ(total_used + want_unattributed, want_device_used);
    // Held is exact for any window: the sum of milli × overlap.
    std::map<std::string, int64_t> want_held;
    std::map<std::string, int64_t> end_of;
    for (const EndEvent& e : h.ends) end_of.emplace(e.id, e.end_ms);
    for (const BindEvent& b : h.binds) {
      const int64_t end = std::min(end_of.count(b.id) ? end_of[b.id] : kOpenEnd, to);
      for (const BoundDevice& d : b.devices) {
        want_held[b.workload] +=
            d.gpu_milli * std::max<int64_t>(0, end - std::max(b.start_ms, from));
      }
    }
    for (const auto& [w, v] : want_held) EXPECT_EQ(held[w], v) << w;
  }

  // A restart in the middle changes nothing: the same history without one gives the same report.
  Meter straight(h.config);
  Replay(h, straight, nullptr, kOpenEnd);
  straight.Advance(now);
  EXPECT_EQ(straight.stats().samples_late, static_cast<int64_t>(h.late.size()));
  EXPECT_GT(straight.stats().samples_duplicate, 0);
  PriceBook prices;
  prices.gpu_hour_micros["H100"] = 2'490'000;
  ReportOptions opt;
  opt.from_ms = 0;
  opt.to_ms = now;
  opt.share_idle = true;
  auto a = BuildReport(meter, prices, opt);
  auto b = BuildReport(straight, prices, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 1u);
  ASSERT_EQ((*a)[0].rows.size(), (*b)[0].rows.size());
  int64_t cost_sum = (*a)[0].idle.cost_micros;
  for (size_t i = 0; i < (*a)[0].rows.size(); ++i) {
    const ReportRow& x = (*a)[0].rows[i];
    const ReportRow& y = (*b)[0].rows[i];
    EXPECT_EQ(x.key, y.key);
    EXPECT_EQ(x.held, y.held);
    EXPECT_EQ(x.used, y.used);
    EXPECT_EQ(x.unknown, y.unknown);
    EXPECT_EQ(x.total_cost_micros(), y.total_cost_micros());
    cost_sum += x.total_cost_micros();
  }
  // Idle sharing adds up to the fleet's cost: 4 GPUs for the whole window at the H100 price.
  // (The generated history over-commits some GPUs, so the rows may cost more than capacity.)
  EXPECT_GE((*a)[0].fleet_cost_micros, static_cast<int64_t>(static_cast<__int128>(4 * 1000 * now) *
                                                            2'490'000 / 3'600'000'000));
  EXPECT_EQ(cost_sum, (*a)[0].fleet_cost_micros);
}

INSTANTIATE_TEST_SUITE_P(Seeds, MeterExactness, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8));

TEST(Report, StepsTenantsAndIdleStayBehindWhenNothingUsedAModel) {
  Meter m;
  ASSERT_TRUE(m.AddDevice({"GPU-1", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.AddDevice({"GPU-2", "n1", "A100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.Bind({"b1", "a/w1", "a", "qa", 0, {{"n1", "GPU-1", "H100", 500, ""}}}).ok());
  ASSERT_TRUE(
      m.Bind({"b2", "b/w2", "b", "qb", 1'800'000, {{"n1", "GPU-1", "H100", 500, ""}}}).ok());
  PriceBook prices;
  prices.gpu_hour_micros = {{"H100", 3'000'000}, {"A100", 1'000'000}};
  ReportOptions opt;
  opt.from_ms = 0;
  opt.to_ms = 3'600'000;
  opt.step_ms = 1'800'000;
  opt.share_idle = true;
  auto r = BuildReport(m, prices, opt);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  // First half hour: a holds half an H100 (0.25 GPU-h = 0.75), the other half and the A100 idle.
  const ReportWindow& w0 = (*r)[0];
  ASSERT_EQ(w0.rows.size(), 1u);
  EXPECT_EQ(w0.rows[0].held, 500LL * 1'800'000);
  EXPECT_EQ(w0.rows[0].cost_micros, 750'000);
  EXPECT_EQ(w0.rows[0].idle_cost_micros, 750'000);  // all of the H100's idle half
  EXPECT_EQ(w0.idle.cost_micros, 500'000);          // nobody used the A100: it stays idle
  EXPECT_EQ(w0.fleet_cost_micros, 2'000'000);
  // Second half: a and b split the H100's cost evenly.
  const ReportWindow& w1 = (*r)[1];
  ASSERT_EQ(w1.rows.size(), 2u);
  EXPECT_EQ(w1.rows[0].total_cost_micros(), 750'000);
  EXPECT_EQ(w1.rows[1].total_cost_micros(), 750'000);
  opt.tenants = {"b"};
  opt.step_ms = 0;
  r = BuildReport(m, prices, opt);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)[0].rows.size(), 1u);
  EXPECT_EQ((*r)[0].rows[0].key, "b");
  EXPECT_EQ((*r)[0].idle.cost_micros, 0);  // a tenant never sees the fleet's idle
  EXPECT_FALSE(ParseAggregate("tenant,colour").ok());
  EXPECT_EQ(ParseAggregate("namespace,pod")->size(), 2u);
}

// A real-format dcgm-exporter page (MIG instances, blanks, pod labels), scraped twice, attributed
// to the bindings on its devices: a whole-GPU binding and a 1g.10gb instance's binding get
// per-mille × capacity × time, the idle instance's use is unattributed, blanks count nothing.
TEST(Meter, AttributesADcgmExporterPage) {
  std::ifstream in(std::string(FABRICA_SOURCE_DIR) + "/tests/data/dcgm/mig.prom");
  std::stringstream page;
  page << in.rdbuf();
  const int64_t t = 1'764'510'030'000;
  auto first = ParseDcgmExposition(page.str(), t, "fallback");
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::map<std::string, int32_t> permille;
  for (const DeviceSample& s : *first) permille[s.device_uuid] = s.util_permille;
  const std::string gi7 = "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d/7";
  const std::string gi1 = "GPU-c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b/1";
  ASSERT_TRUE(permille.count(gi7) && permille.count(gi1));
  EXPECT_EQ((*first)[0].node, "dgx-h100-mig-03");

  Meter m;
  ASSERT_TRUE(m.AddDevice({gi7, "dgx-h100-mig-03", "H100", 0, kOpenEnd,
                           "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", 142})
                  .ok());
  ASSERT_TRUE(m.AddDevice({gi1, "dgx-h100-mig-03", "H100", 0, kOpenEnd,
                           "GPU-c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b", 428})
                  .ok());
  // Lines without their own timestamp are stamped with the scrape time.
  const int64_t start = t - 60'000;
  ASSERT_TRUE(
      m.Bind({"b7", "team-b/tok", "team-b", "qb", start, {{"n", gi7, "H100", 142, "1g.10gb"}}})
          .ok());
  ASSERT_TRUE(
      m.Bind({"b1", "team-a/bert", "team-a", "qa", start, {{"n", gi1, "H100", 428, "3g.40gb"}}})
          .ok());
  m.Ingest(*first);
  auto second = ParseDcgmExposition(page.str(), t + 30'000, "fallback");
  ASSERT_TRUE(second.ok());
  m.Ingest(*second);
  m.Ingest(*second);  // the same scrape twice counts once
  std::map<std::string, IntervalUsage> by;
  for (const IntervalUsage& u : m.Usage(start, t + 60'000)) by[u.interval->workload] = u;
  // gi7 has no line timestamps: samples at t and t+30 s hold 30 s each; before t it is unknown.
  EXPECT_EQ(by["team-b/tok"].used, int64_t{permille[gi7]} * 142 * 60'000 / 1000);
  EXPECT_EQ(by["team-b/tok"].unknown, 142LL * 60'000);
  // gi1's lines carry their own timestamp (the same in both scrapes, 31 s after the start): one
  // sample, held its 60 s; the rest of the window is unknown.
  EXPECT_EQ(by["team-a/bert"].used, int64_t{permille[gi1]} * 428 * 60'000 / 1000);
  EXPECT_EQ(by["team-a/bert"].unknown, 428LL * (120'000 - 60'000));
  EXPECT_GT(m.stats().samples_duplicate, 0);
  // A slice registered again with another share (a journal of a build that counted a 1g slice
  // 143 milli) takes the share the server gives now; a whole GPU's is not changed so.
  ASSERT_TRUE(m.AddDevice({gi7, "dgx-h100-mig-03", "H100", 0, kOpenEnd,
                           "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", 143})
                  .ok());
  ASSERT_TRUE(m.AddDevice({"GPU-whole", "n", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.AddDevice({"GPU-whole", "n", "H100", 0, kOpenEnd, "", 500}).ok());
  for (const FleetDevice& d : m.devices()) {
    if (d.uuid == gi7) EXPECT_EQ(d.capacity_milli, 143);
    if (d.uuid == "GPU-whole") EXPECT_EQ(d.capacity_milli, 1000);
  }
}

// CPU and memory held by a binding's pods, priced per core-hour and GiB-hour, survive a restart
// through the journal stream, and keep GPU idle sharing exact.
TEST(Report, CpuAndMemoryHeldArePriced) {
  Meter m;
  ASSERT_TRUE(m.AddDevice({"GPU-1", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  BindEvent b{"b1",
              "a/w1",
              "a",
              "qa",
              0,
              {{"n1", "GPU-1", "H100", 1000, ""}},
              {{"n1", 8000, 65536}, {"n2", 4000, 1024}}};
  ASSERT_TRUE(m.Bind(b).ok());
  EXPECT_FALSE(
      m.Bind({"b2", "a/w2", "a", "qa", 0, {{"n1", "GPU-1", "H100", 1000, ""}}, {{"n1", -1, 0}}})
          .ok());
  ASSERT_TRUE(m.End({"b1", 1'800'000, "completed"}).ok());
  Journal journal;
  journal.Commit(m.TakeChanges());
  Meter restored;
  restored.Restore(journal.Snapshot());
  PriceBook prices;
  prices.gpu_hour_micros["H100"] = 2'000'000;
  prices.cpu_core_hour_micros = 30'000;  // 0.03 per core-hour
  prices.gib_hour_micros = 4'000;        // 0.004 per GiB-hour
  ReportOptions opt;
  opt.from_ms = 0;
  opt.to_ms = 3'600'000;
  opt.share_idle = true;
  for (const Meter* meter : {&m, &restored}) {
    auto r = BuildReport(*meter, prices, opt);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ((*r)[0].rows.size(), 1u);
    const ReportRow& row = (*r)[0].rows[0];
    EXPECT_EQ(row.cpu_milli_ms, 12'000LL * 1'800'000);   // 12 cores for half an hour
    EXPECT_EQ(row.memory_mib_ms, 66'560LL * 1'800'000);  // 65 GiB for half an hour
    EXPECT_EQ(row.cpu_cost_micros, 180'000);             // 6 core-hours at 0.03
    EXPECT_EQ(row.ram_cost_micros, 130'000);             // 32.5 GiB-hours at 0.004
    EXPECT_EQ(row.cost_micros, 1'000'000);
    // GPU idle (the other half hour) is shared to the only user; CPU and memory add on top.
    EXPECT_EQ(row.total_cost_micros(), 2'000'000 + 180'000 + 130'000);
    EXPECT_EQ((*r)[0].fleet_cost_micros, 2'000'000);
  }
  opt.by = {AggregateBy::kNode};
  auto by_node = BuildReport(m, prices, opt);
  ASSERT_TRUE(by_node.ok());
  ASSERT_EQ((*by_node)[0].rows.size(), 2u);
  EXPECT_EQ((*by_node)[0].rows[1].key, "n2");
  EXPECT_EQ((*by_node)[0].rows[1].cpu_milli_ms, 4000LL * 1'800'000);
  EXPECT_EQ((*by_node)[0].rows[1].held, 0);
}

// Two fractions share a GPU with the same compute (100m) but different memory: one is charged
// 0.1, the other 0.5 (its 40Gi are half the GPU). The GPU's busy time is theirs by compute, so
// each uses what its twin does and no more than its 0.1 cap allows; held stays by charge. A whole
// GPU and a MIG slice, whose compute is what they hold, are attributed as before. Restored from
// a journal, the split is by compute still; from one written before intervals kept their
// compute shares, by charge until the bindings are sent again, then by compute once more, in
// sealed buckets and open ones alike.
TEST(Meter, FractionsSharingAGpuSplitItsBusyTimeByComputeNotByCharge) {
  MeterConfig config;  // 30 s samples, 5 min buckets, 10 min lateness
  Meter m(config);
  ASSERT_TRUE(m.AddDevice({"GPU-1", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.AddDevice({"GPU-2", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.AddDevice({"GPU-3", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.AddDevice({"GPU-3/0", "n1", "H100", 0, kOpenEnd, "GPU-3", 428}).ok());
  const std::vector<BindEvent> binds = {
      {"b-small", "team-a/small", "team-a", "qa", 0, {{"n1", "GPU-1", "H100", 100, "", 100}}},
      {"b-mem", "team-b/memheavy", "team-b", "qb", 0, {{"n1", "GPU-1", "H100", 500, "", 100}}},
      {"b-whole", "team-a/whole", "team-a", "qa", 0, {{"n1", "GPU-2", "H100", 1000, "", 1000}}},
      {"b-mig", "team-a/mig", "team-a", "qa", 0, {{"n1", "GPU-3/0", "H100", 428, "3g.40gb", 428}}},
  };
  for (const BindEvent& b : binds) ASSERT_TRUE(m.Bind(b).ok());
  // An hour of samples: GPU-1 16% busy (each pod 80% of its 10%), GPU-2 80%, the slice 50%.
  const int64_t hour = 3'600'000;
  for (int64_t t = 0; t < hour; t += 30'000) {
    m.Ingest(
        {{"n1", "GPU-1", t, 160, {}}, {"n1", "GPU-2", t, 800, {}}, {"n1", "GPU-3/0", t, 500, {}}});
  }
  Journal journal, old_journal;
  old_journal.old = true;
  m.Advance(hour / 2);  // the first 20 minutes sealed, the rest open
  const MeterChanges changes = m.TakeChanges();
  journal.Commit(changes);
  old_journal.Commit(changes);
  auto check = [&](const Meter& meter, bool by_compute) {
    std::map<std::string, IntervalUsage> by;
    for (const IntervalUsage& u : meter.Usage(0, hour)) by[u.interval->workload] = u;
    const IntervalUsage& small = by["team-a/small"];
    const IntervalUsage& mem = by["team-b/memheavy"];
    EXPECT_EQ(small.held, 100 * hour);
    EXPECT_EQ(mem.held, 500 * hour);
    EXPECT_EQ(small.used + mem.used, 160 * hour);  // the GPU's busy time, all of it
    if (by_compute) {
      EXPECT_EQ(mem.used, small.used);
      EXPECT_EQ(mem.used, 80 * hour);
      EXPECT_LE(mem.used, 100 * hour);  // within its compute cap
    } else {
      EXPECT_GT(mem.used, small.used);  // its open buckets by charge (the sealed by compute)
    }
    EXPECT_EQ(by["team-a/whole"].used, 800 * hour);
    EXPECT_EQ(by["team-a/mig"].used, 500LL * 428 * hour / 1000);
  };
  {
    SCOPED_TRACE("live");
    check(m, true);
  }
  {
    SCOPED_TRACE("restored from a journal");
    Meter from_journal(config);
    from_journal.Restore(journal.Snapshot());
    check(from_journal, true);
  }
  Meter restored(config);
  restored.Restore(old_journal.Snapshot());  // (the old journal drops the compute shares)
  {
    SCOPED_TRACE("restored from an old journal, not bound again");
    check(restored, false);
  }
  for (const BindEvent& b : binds) ASSERT_TRUE(restored.Bind(b).ok());
  {
    SCOPED_TRACE("restored and bound again");
    check(restored, true);
  }
  EXPECT_EQ(restored.stats().events_duplicate, 4);
  EXPECT_EQ(restored.interval_count(), 4u);
  restored.Advance(2 * hour);  // sealed from the compute shares too
  {
    SCOPED_TRACE("restored and sealed");
    check(restored, true);
  }
  BindEvent bad = binds[0];
  bad.id = "b-bad";
  bad.devices[0].compute_milli = 1001;
  const Status st = m.Bind(bad);
  EXPECT_NE(st.message().find("computeMilli 1001"), std::string::npos) << st.message();
}

// Work that asks for no GPU is a binding of pods alone: its CPU and memory are held from its
// start to its end, an end said twice counts once, and restored from a journal it is known (a
// binding sent again adds nothing). Before, such a binding was refused, and the work billed
// nothing.
TEST(Meter, ABindingOfPodsAloneHoldsTheirCpuAndMemory) {
  MeterConfig config;
  Meter m(config);
  const BindEvent cpu_only{"b-cpu", "team-a/etl", "team-a", "qa", 0, {}, {{"n1", 16000, 65536}}};
  ASSERT_TRUE(m.Bind(cpu_only).ok());
  const int64_t hour = 3'600'000;
  ASSERT_TRUE(m.End({"b-cpu", hour, "completed"}).ok());
  ASSERT_TRUE(m.End({"b-cpu", 2 * hour, "completed"}).ok());  // (said again: no change)
  EXPECT_EQ(m.stats().events_duplicate, 1);
  const auto held = [&](const Meter& meter) {
    int64_t cpu = 0;
    for (const PodHold* p : meter.PodsIn(0, 3 * hour)) cpu += p->CpuHeldIn(0, 3 * hour);
    return cpu;
  };
  EXPECT_EQ(held(m), 16000 * hour);
  EXPECT_TRUE(m.Usage(0, 3 * hour).empty());  // (no GPU interval)
  Journal journal;
  journal.Commit(m.TakeChanges());
  Meter restored(config);
  restored.Restore(journal.Snapshot());
  EXPECT_TRUE(restored.HasBinding("b-cpu"));
  ASSERT_TRUE(restored.Bind(cpu_only).ok());  // (sent again after a restart)
  EXPECT_EQ(held(restored), 16000 * hour);
  const Status none = m.Bind({"b-none", "team-a/x", "team-a", "qa", 0, {}, {}});
  EXPECT_NE(none.message().find("no devices and no pods"), std::string::npos) << none.message();
}

// The SQLite journal keeps each interval's compute share, so that fractions that ended before a
// restart (never sent again) still split their open buckets' busy time by compute; a journal
// written before the column existed gains it on open and reads 0 there (by charge).
TEST(MeterJournalTest, KeepsComputeSharesAcrossARestart) {
  test::TempDir dir("fabrica_meter");
  const std::string path = dir.File("meter.db");
  {  // An old journal: intervals without compute_milli.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE intervals(id INTEGER PRIMARY KEY, binding TEXT NOT NULL,"
                           " uuid TEXT NOT NULL, workload TEXT, tenant TEXT, queue TEXT, node TEXT,"
                           " model TEXT, gpu_milli INTEGER, mig_profile TEXT, start_ms INTEGER,"
                           " end_ms INTEGER, end_reason TEXT, UNIQUE(binding, uuid));"
                           "INSERT INTO intervals(binding, uuid, workload, gpu_milli, start_ms,"
                           " end_ms) VALUES('old', 'GPU-9', 'team-a/old', 250, 0, 1000);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  MeterConfig config;  // 30 s samples, 5 min buckets, 10 min lateness
  const int64_t minute = 60'000;
  Meter m(config);
  ASSERT_TRUE(m.AddDevice({"GPU-1", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(
      m.Bind(
           {"b-small", "team-a/small", "team-a", "qa", 0, {{"n1", "GPU-1", "H100", 100, "", 100}}})
          .ok());
  ASSERT_TRUE(
      m.Bind({"b-mem", "team-b/mem", "team-b", "qb", 0, {{"n1", "GPU-1", "H100", 500, "", 100}}})
          .ok());
  for (int64_t t = 0; t < 20 * minute; t += 30'000) m.Ingest({{"n1", "GPU-1", t, 160, {}}});
  ASSERT_TRUE(m.End({"b-small", 20 * minute, "completed"}).ok());
  ASSERT_TRUE(m.End({"b-mem", 20 * minute, "completed"}).ok());
  m.Advance(25 * minute);  // the first buckets sealed, the last ones open (lateness)
  {
    auto journal = MeterJournal::Open(path);
    ASSERT_TRUE(journal.ok()) << journal.status().message();
    ASSERT_TRUE((*journal)->Commit(m.TakeChanges(), 0).ok());
  }
  auto journal = MeterJournal::Open(path);
  ASSERT_TRUE(journal.ok()) << journal.status().message();
  auto snapshot = (*journal)->Load();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().message();
  Meter restored(config);
  restored.Restore(std::move(*snapshot));
  std::map<std::string, IntervalUsage> by;
  for (const IntervalUsage& u : restored.Usage(0, 25 * minute)) by[u.interval->workload] = u;
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ(by["team-a/small"].interval->device.compute_milli, 100);
  EXPECT_EQ(by["team-b/mem"].interval->device.compute_milli, 100);
  EXPECT_EQ(by["team-a/old"].interval->device.compute_milli, 0);
  EXPECT_EQ(by["team-a/small"].used + by["team-b/mem"].used, 160 * 20 * minute);
  EXPECT_EQ(by["team-a/small"].used, by["team-b/mem"].used);  // by compute, not by charge
}

// The value of one series in a Prometheus text page; -1 when the page has no such series.
double MetricValue(const std::string& page, const std::string& series) {
  const size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + series.size() + 2));
}

// The usage counters never go down between scrapes: an open binding is counted up to now, and
// when its end is learnt later than it happened its time is cut back, which Prometheus reads as
// a counter reset (a trial saw 14 drops in 300 scrapes). With floors, the series holds until
// its total passes it again.
TEST(Report, UsageCountersNeverGoDown) {
  MeterConfig config;
  Meter m(config);
  ASSERT_TRUE(m.AddDevice({"GPU-1", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(
      m.Bind({"b1", "team-a/w", "team-a", "qa", 0, {{"n1", "GPU-1", "H100", 1000, "", 1000}}})
          .ok());
  PriceBook prices;
  std::map<std::string, double> floors;
  const std::string series =
      "fabrica_gpu_seconds_allocated_total{tenant=\"team-a\",queue=\"qa\","
      "model=\"H100\"}";
  EXPECT_EQ(MetricValue("\n" + UsageMetricsText(m, prices, 60'000, &floors), series), 60);
  ASSERT_TRUE(m.End({"b1", 30'000, "completed"}).ok());  // (learnt late)
  EXPECT_EQ(MetricValue("\n" + UsageMetricsText(m, prices, 61'000), series), 30);
  EXPECT_EQ(MetricValue("\n" + UsageMetricsText(m, prices, 61'000, &floors), series), 60);
  ASSERT_TRUE(
      m.Bind({"b2", "team-a/w2", "team-a", "qa", 61'000, {{"n1", "GPU-1", "H100", 1000, "", 1000}}})
          .ok());
  EXPECT_EQ(MetricValue("\n" + UsageMetricsText(m, prices, 101'000, &floors), series), 70);
}

// /metrics carries CPU and memory as their own counters (held and cost, per tenant and queue),
// so its cost counters add up to what the report bills; no GPU counter has a `cpu-memory` model
// (zero by construction); and work no queue was charged for has `queue=""` (`__unallocated__`
// in a report by queue), not a queue that does not exist.
TEST(Report, MetricsCarryCpuAndMemoryAndNameOnlyQueuesCharged) {
  Meter m;
  ASSERT_TRUE(m.AddDevice({"GPU-1", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  ASSERT_TRUE(m.AddDevice({"GPU-2", "n1", "H100", 0, kOpenEnd, "", 1000}).ok());
  // 48 cores and 400Gi beside one GPU, charged to no queue; and 4 cores, 16Gi in queue qb.
  ASSERT_TRUE(m.Bind({"b1",
                      "team-a/cpuheavy",
                      "team-a",
                      "",
                      0,
                      {{"n1", "GPU-1", "H100", 1000, ""}},
                      {{"n1", 48'000, 400 * 1024}}})
                  .ok());
  ASSERT_TRUE(m.Bind({"b2",
                      "team-b/small",
                      "team-b",
                      "qb",
                      0,
                      {{"n1", "GPU-2", "H100", 1000, ""}},
                      {{"n1", 4'000, 16 * 1024}}})
                  .ok());
  const int64_t now = 1'200'000;  // 20 minutes
  PriceBook prices;
  prices.gpu_hour_micros["H100"] = 2'490'000;
  prices.cpu_core_hour_micros = 30'000;
  prices.gib_hour_micros = 4'000;
  const std::string page = UsageMetricsText(m, prices, now);
  EXPECT_EQ(page.find("cpu-memory"), std::string::npos) << page;
  // 48 cores for 1200 s; 400 GiB for 1200 s; 0.03 × 16 core-hours; 0.004 × 133.3 GiB-hours.
  const std::string a = "{tenant=\"team-a\",queue=\"\"}";
  EXPECT_DOUBLE_EQ(MetricValue(page, "fabrica_cpu_core_seconds_allocated_total" + a), 57'600);
  EXPECT_DOUBLE_EQ(MetricValue(page, "fabrica_memory_byte_seconds_allocated_total" + a),
                   400.0 * (1 << 30) * 1200);
  EXPECT_DOUBLE_EQ(MetricValue(page, "fabrica_cpu_cost_total" + a), 0.48);
  EXPECT_NEAR(MetricValue(page, "fabrica_memory_cost_total" + a), 0.533333, 1e-6);
  EXPECT_GT(MetricValue(page,
                        "fabrica_gpu_cost_total{tenant=\"team-a\",queue=\"\","
                        "model=\"H100\"}"),
            0)
      << page;
  EXPECT_GT(MetricValue(page, "fabrica_cpu_cost_total{tenant=\"team-b\",queue=\"qb\"}"), 0);
  // The cost counters add up to the report's bill (idle aside).
  ReportOptions opt;
  opt.from_ms = 0;
  opt.to_ms = now;
  opt.by = {AggregateBy::kQueue};
  auto report = BuildReport(m, prices, opt);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ((*report)[0].rows.size(), 2u);
  EXPECT_EQ((*report)[0].rows[0].key, "__unallocated__");
  EXPECT_EQ((*report)[0].rows[0].properties.at("queue"), "");
  int64_t billed = 0;
  for (const ReportRow& r : (*report)[0].rows) billed += r.total_cost_micros();
  double counted = 0;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("fabrica_", 0) == 0 && line.find("_cost_total{") != std::string::npos)
      counted += std::stod(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_NEAR(counted, static_cast<double>(billed) / 1e6, 1e-5) << page;
  // Without CPU and memory prices, no cost series that could only be zero.
  prices.cpu_core_hour_micros = prices.gib_hour_micros = 0;
  const std::string unpriced = UsageMetricsText(m, prices, now);
  EXPECT_EQ(unpriced.find("fabrica_cpu_cost_total"), std::string::npos) << unpriced;
  EXPECT_EQ(unpriced.find("fabrica_memory_cost_total"), std::string::npos) << unpriced;
  EXPECT_NE(unpriced.find("fabrica_cpu_core_seconds_allocated_total"), std::string::npos);
}

}  // namespace
}  // namespace fabrica
