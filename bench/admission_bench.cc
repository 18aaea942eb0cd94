// Admission-cycle latency (issue 3, "admission speed"): one Admitter::Cycle with 1,000 queues
// and 50,000 pending workloads on the synthetic 80,000-GPU fleet (10,999 nodes) that starts 80%
// full, admitting up to 1,000 workloads. Run:
//   build/release/bench/admission_bench --benchmark_counters_tabular=true
//
// The queue tree is 10 organisations x 10 teams x 10 projects; every project is guaranteed an
// equal 1/1000 of the fleet's GPUs (borrowing allowed), tenants are spread over the projects.
// Workloads are the synthetic mix (sim/synthetic.h). Two states are measured, each cycle on a
// fresh copy of the same prepared Admitter (the copy is not timed):
//   cold   — the 50,000 pending workloads have never been tried: the cycle meets them all fresh
//            (the worst case, right after a restart);
//   steady — the same after one earlier cycle parked what did not fit, with 1,000 running
//            workloads finished and 1,000 new ones arrived since: what a cycle meets in service.
// Each runs once with the one built-in flavour and once (`flavoured`) with four: MIG slices,
// GB200, H200 and the catch-all `gpu`, each project guaranteed its share of each, so every
// request is charged through the flavour tables; and once (`selective`) with the one flavour,
// the nodes labelled zone=z0..z9 in turn and every tenth waiting workload asking one zone by
// spec.nodeSelector (those are placed over their own nodes one by one, not by state class); and
// once (`tainted`) with every hundredth node tainted NoSchedule and no workload tolerating it,
// so that every request may use only the other 99% (a NodeSet each, placed over the classes);
// and once (`preferring`) with the zones of `selective` and every tenth waiting workload
// preferring, by node affinity, one zone (weight 50) and the next (weight 10): it is tried on
// its zone, then on the two, then anywhere (the preferred tiers are placed node by node); and
// once (`soft_tainted`) with every hundredth node tainted PreferNoSchedule, so that every
// request tries the other 99% first (one preferred tier each, placed over the classes); and
// once (`held`) with a leaf `org-K-hold` under each organisation, guaranteed 48 GPUs, whose
// gang of 6 x 8 GPUs needs one leaf among the first 64 nodes (labelled pool=small, 80% full
// like the rest): each waits within its guarantee, so every organisation's borrowers are held
// back from the leaves that could take it and tried on the other nodes (the hold's regions,
// Admitter::HoldRegion; at most 1,024 such tries a cycle).
// Counters: admitted (workloads admitted by the cycle), attempts (placement attempts),
// fleet_pct (allocated GPUs before the cycle), and for `held` gangs_waiting (of the 10, still
// pending after the cycle: the hold was on).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "sched/admission.h"
#include "sched/frag.h"
#include "sched/policy.h"
#include "sim/synthetic.h"

namespace fabrica {
namespace {

struct Prepared {
  Fleet fleet;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Admitter> cold, steady;
  double fill_pct = 0, steady_fill_pct = 0;
  std::vector<int> held_gangs;  // (`held`) the gangs waiting within their guarantees
};

AdmissionConfig Tree(int64_t capacity_milli, bool flavoured, bool held) {
  AdmissionConfig c;
  c.usage_half_life_s = 3600;
  int64_t each = capacity_milli / 1000 / 1000 * 1000;
  if (flavoured)
    c.flavors = {FlavorSpec{"mig", DeviceKind::kMig, {}, {}},
                 FlavorSpec{"gb200", {}, {"GB200"}, {}}, FlavorSpec{"h200", {}, {"H200"}, {}},
                 FlavorSpec{"gpu", {}, {}, {}}};
  for (int o = 0; o < 10; ++o) {
    std::string org = "org-" + std::to_string(o);
    c.queues.push_back(QueueSpec{org, "", 1, {}, -1});
    if (held)
      c.queues.push_back(QueueSpec{
          org + "-hold", org, 1, {{"gpu", QuotaSpec{48000, std::nullopt, std::nullopt}}}, -1});
    for (int t = 0; t < 10; ++t) {
      std::string team = org + "-team-" + std::to_string(t);
      c.queues.push_back(QueueSpec{team, org, 1, {}, -1});
      for (int p = 0; p < 10; ++p) {
        QueueSpec q{team + "-p" + std::to_string(p), team, 1, {}, -1};
        if (!flavoured) {
          q.quotas["gpu"] = QuotaSpec{each, std::nullopt, std::nullopt};
        } else {
          // Shares near the synthetic fleet's: a tenth each of MIG and GB200, a third H200.
          q.quotas["mig"] = QuotaSpec{each / 10, std::nullopt, std::nullopt};
          q.quotas["gb200"] = QuotaSpec{each / 10, std::nullopt, std::nullopt};
          q.quotas["h200"] = QuotaSpec{each / 3, std::nullopt, std::nullopt};
          q.quotas["gpu"] =
              QuotaSpec{each - 2 * (each / 10) - each / 3, std::nullopt, std::nullopt};
        }
        c.queues.push_back(q);
      }
    }
  }
  return c;
}

std::string LeafName(int i) {
  return "org-" + std::to_string(i / 100) + "-team-" + std::to_string(i / 10 % 10) + "-p" +
         std::to_string(i % 10);
}

enum Variant { kPlain, kFlavoured, kSelective, kTainted, kPreferring, kSoftTainted, kHeld };

const Prepared& Prepare(Variant variant) {
  static Prepared* prepared[7] = {};
  Prepared*& p = prepared[variant];
  if (p) return *p;
  p = [variant] {
    const bool flavoured = variant == kFlavoured;
    auto* out = new Prepared;
    out->fleet = *sim::MakeSyntheticFleet(sim::SyntheticFleetOptions{});
    if (variant == kSelective || variant == kPreferring)
      for (size_t n = 0; n < out->fleet.nodes.size(); ++n)
        out->fleet.nodes[n].labels["zone"] = "z" + std::to_string(n % 10);
    if (variant == kTainted)
      for (size_t n = 0; n < out->fleet.nodes.size(); n += 100)
        out->fleet.nodes[n].taints.push_back({"reserved", "ops", TaintEffect::kNoSchedule, ""});
    if (variant == kSoftTainted)
      for (size_t n = 0; n < out->fleet.nodes.size(); n += 100)
        out->fleet.nodes[n].taints.push_back({"spot", "", TaintEffect::kPreferNoSchedule, ""});
    if (variant == kHeld)
      for (size_t n = 0; n < 64; ++n) out->fleet.nodes[n].labels["pool"] = "small";
    std::vector<Tenant> tenants = sim::SyntheticTenants();
    // Running work to 80% of the GPUs, then 50,000 more to wait.
    std::vector<Workload> running = sim::MakeSyntheticWorkloads(out->fleet, 0.8, 1);
    std::vector<Workload> waiting;
    for (uint64_t seed = 2; waiting.size() < 51000; ++seed) {
      std::vector<Workload> more = sim::MakeSyntheticWorkloads(out->fleet, 0.9, seed);
      waiting.insert(waiting.end(), more.begin(), more.end());
    }
    waiting.resize(51000);
    if (variant == kSelective)
      for (size_t k = 0; k < waiting.size(); k += 10)
        for (PodSet& ps : waiting[k].pod_sets)
          ps.nodes.labels["zone"] = "z" + std::to_string(k / 10 % 10);
    if (variant == kPreferring)
      for (size_t k = 0; k < waiting.size(); k += 10)
        for (PodSet& ps : waiting[k].pod_sets)
          for (auto [weight, zone] : {std::pair{50, k / 10 % 10}, {10, (k / 10 + 1) % 10}})
            ps.nodes.preferred.push_back(PreferredTerm{
                weight, NodeTerm{{NodeRequirement{
                            "zone", SelectorOp::kIn, {"z" + std::to_string(zone)}}}}});
    ClusterState probe(out->fleet, tenants);
    std::vector<PodRequest> reqs;
    for (const Workload& w : running)
      for (const PodSet& ps : w.pod_sets)
        if (auto r = probe.MakeRequest(ps, w.tenant); r.ok()) reqs.push_back(*r);
    auto policy = MakePolicy("fabrica", TypicalMix(reqs, 0.95), &probe);
    out->policy = std::move(*policy);
    AdmissionConfig config = Tree(probe.total_gpu_milli(), flavoured, variant == kHeld);
    auto created = Admitter::Create(out->fleet, tenants, config, *out->policy, 1);
    std::unique_ptr<Admitter> admitter = std::move(*created);
    int i = 0;
    std::vector<int> ran;
    for (Workload& w : running) {
      w.queue = QueueId(LeafName(i++ % 1000));
      ran.push_back(*admitter->Submit(w, 0));
    }
    // Admit the running set with the fleet as the only limit, in big cycles.
    for (int c = 0; c < 50; ++c) {
      CycleResult r = admitter->Cycle(c, 100000);
      if (r.admitted.empty()) break;
    }
    for (int id : ran)
      if (admitter->phase(id) == Phase::kPending) admitter->Finish(id, 60);  // drop leftovers
    for (int k = 0; k < 50000; ++k) {
      Workload w = waiting[k];
      w.queue = QueueId(LeafName(i++ % 1000));
      (void)admitter->Submit(w, 100);
    }
    if (variant == kHeld)
      for (int o = 0; o < 10; ++o) {
        Workload gang = waiting[0];
        gang.name = WorkloadId("held-gang-" + std::to_string(o));
        gang.queue = QueueId("org-" + std::to_string(o) + "-hold");
        gang.gang = true;
        gang.topology = {TopologyLevel::kLeaf, /*required=*/true};
        PodSet ps;
        ps.name = "main";
        ps.count = 6;
        ps.cpu = MilliCpu(32000);
        ps.memory = MemoryMib(256 * 1024);
        ps.device.kind = DeviceKind::kWhole;
        ps.device.gpus = 8;
        ps.nodes.labels["pool"] = "small";
        gang.pod_sets = {ps};
        if (auto id = admitter->Submit(gang, 99); id.ok()) out->held_gangs.push_back(*id);
      }
    out->fill_pct =
        100.0 * admitter->state().allocated_gpu_milli() / admitter->state().total_gpu_milli();
    out->cold = std::make_unique<Admitter>(*admitter);
    // Steady: one cycle has parked what did not fit; then 1,000 finish and 1,000 arrive.
    admitter->Cycle(101, 1000);
    int finished = 0;
    for (int id : ran) {
      if (finished >= 1000) break;
      if (admitter->phase(id) == Phase::kAdmitted) {
        admitter->Finish(id, 150);
        ++finished;
      }
    }
    for (int k = 50000; k < 51000; ++k) {
      Workload w = waiting[k];
      w.queue = QueueId(LeafName(i++ % 1000));
      (void)admitter->Submit(w, 150);
    }
    out->steady_fill_pct =
        100.0 * admitter->state().allocated_gpu_milli() / admitter->state().total_gpu_milli();
    out->steady = std::move(admitter);
    return out;
  }();
  return *p;
}

void BM_AdmissionCycle(benchmark::State& state, bool steady, Variant variant) {
  const Prepared& p = Prepare(variant);
  const Admitter& base = steady ? *p.steady : *p.cold;
  int64_t admitted = 0, attempts = 0, cycles = 0, gangs_waiting = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto a = std::make_unique<Admitter>(base);
    state.ResumeTiming();
    CycleResult r = a->Cycle(200, 1000);
    benchmark::DoNotOptimize(r);
    state.PauseTiming();
    admitted += static_cast<int64_t>(r.admitted.size());
    attempts += r.attempts;
    for (int g : p.held_gangs) gangs_waiting += a->phase(g) == Phase::kPending;
    ++cycles;
    a.reset();
    state.ResumeTiming();
  }
  state.counters["admitted"] = static_cast<double>(admitted) / cycles;
  state.counters["attempts"] = static_cast<double>(attempts) / cycles;
  state.counters["queues"] = base.queue_count();
  state.counters["fleet_pct"] = steady ? p.steady_fill_pct : p.fill_pct;
  state.counters["nodes"] = static_cast<double>(p.fleet.nodes.size());
  if (!p.held_gangs.empty())
    state.counters["gangs_waiting"] = static_cast<double>(gangs_waiting) / cycles;
}

BENCHMARK_CAPTURE(BM_AdmissionCycle, cold, false, kPlain)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady, true, kPlain)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, cold_flavoured, false, kFlavoured)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady_flavoured, true, kFlavoured)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, cold_selective, false, kSelective)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady_selective, true, kSelective)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, cold_tainted, false, kTainted)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady_tainted, true, kTainted)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, cold_preferring, false, kPreferring)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady_preferring, true, kPreferring)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, cold_soft_tainted, false, kSoftTainted)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady_soft_tainted, true, kSoftTainted)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, cold_held, false, kHeld)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_AdmissionCycle, steady_held, true, kHeld)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

}  // namespace
}  // namespace fabrica

BENCHMARK_MAIN();
