#include "cli/sim_commands.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sched/policy.h"
#include "sim/bounds.h"
#include "sim/fault_sim.h"
#include "sim/openb.h"
#include "sim/replay.h"
#include "sim/synthetic.h"

namespace fabrica::cli {
namespace {

Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = part.find('-');
    if (dash == std::string::npos) {
      auto v = ParseNonNegativeInt(part);
      if (!v.ok()) return InvalidArgument("--seeds: " + v.status().message());
      seeds.push_back(static_cast<uint64_t>(*v));
    } else {
      auto lo = ParseNonNegativeInt(part.substr(0, dash));
      auto hi = ParseNonNegativeInt(part.substr(dash + 1));
      if (!lo.ok() || !hi.ok() || *hi < *lo || *hi - *lo > 10000) {
        return InvalidArgument("--seeds: bad range '" + part + "' (use e.g. 42-51)");
      }
      for (int64_t s = *lo; s <= *hi; ++s) seeds.push_back(static_cast<uint64_t>(s));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (seeds.empty()) return InvalidArgument("--seeds: no seed given");
  return seeds;
}

double JsonNumber(double v) { return std::isnan(v) ? 0.0 : std::round(v * 1000.0) / 1000.0; }

struct OpenbArgs {
  std::string nodes, pods, policy = "fabrica", seeds = "42-51", placements_out;
  double inflate = 1.3;
  bool json = false;
  bool bounds = false;
};

int RunOpenbCommand(const OpenbArgs& args) {
  auto fail = [](const Status& st) {
    std::cerr << "fabrica sim openb: " << st.message() << "\n";
    return 2;
  };
  auto seeds = ParseSeeds(args.seeds);
  if (!seeds.ok()) return fail(seeds.status());
  if (!args.placements_out.empty() && seeds->size() != 1) {
    return fail(InvalidArgument("--placements-out needs --seeds to name exactly one seed"));
  }
  if (!(args.inflate > 0 && args.inflate <= 10)) {
    return fail(InvalidArgument("--inflate must be in (0, 10]"));
  }
  bool known = false;
  for (const std::string& n : PolicyNames()) known |= n == args.policy;
  if (!known) return fail(MakePolicy(args.policy).status());
  auto node_text = sim::ReadFile(args.nodes);
  if (!node_text.ok()) return fail(node_text.status());
  auto fleet = sim::ParseOpenbNodes(*node_text, args.nodes);
  if (!fleet.ok()) return fail(fleet.status());
  auto pod_text = sim::ReadFile(args.pods);
  if (!pod_text.ok()) return fail(pod_text.status());
  auto pods = sim::ParseOpenbPods(*pod_text, args.pods);
  if (!pods.ok()) return fail(pods.status());

  std::ofstream placements;
  if (!args.placements_out.empty()) {
    placements.open(args.placements_out);
    if (!placements) return fail(InvalidArgument("cannot write '" + args.placements_out + "'"));
  }
  std::vector<sim::RunResult> runs;
  for (uint64_t seed : *seeds) {
    sim::RunOptions opt;
    opt.policy = args.policy;
    opt.seed = seed;
    opt.inflate = args.inflate;
    opt.pods_source = args.pods;
    opt.placements_out = placements.is_open() ? &placements : nullptr;
    auto r = sim::RunOpenb(*fleet, *pods, opt);
    if (!r.ok()) return fail(r.status());
    runs.push_back(*r);
  }
  sim::Summary s = sim::Summarize(args.policy, runs);
  // Bounds at 100% arrived, means over the seeds: the offline packing (lower bound on the
  // optimum) and the LP ceiling (upper bound), and the share of FGD-to-ceiling gap closed.
  double offline = 0, ceiling = 0;
  if (args.bounds) {
    for (uint64_t seed : *seeds) {
      auto b = sim::BoundsAt100(*fleet, *pods, seed, args.inflate, "fabrica");
      if (!b.ok()) return fail(b.status());
      offline += b->offline_allocated_pct / static_cast<double>(seeds->size());
      ceiling += b->ceiling_allocated_pct / static_cast<double>(seeds->size());
    }
  }
  if (args.json) {
    nlohmann::json j;
    j["policy"] = s.policy;
    j["seeds"] = s.seeds;
    j["unallocated_pct_at_100"] = JsonNumber(s.unalloc_100);
    j["unallocated_pct_at_130"] = JsonNumber(s.unalloc_130);
    j["unallocated_pct_sd_at_100"] = JsonNumber(s.sd_100);
    j["unallocated_pct_sd_at_130"] = JsonNumber(s.sd_130);
    nlohmann::json curve = nlohmann::json::array();
    for (int b = 0; b < sim::kBuckets; b += 5) {
      curve.push_back({{"arrived_pct", b}, {"unallocated_pct", JsonNumber(s.unalloc_curve[b])}});
    }
    j["curve"] = curve;
    j["pods_placed"] = s.pods_placed;
    j["pods_dropped"] = s.pods_dropped;
    j["placements_per_second"] = std::round(s.placements_per_second);
    j["nodes"] = args.nodes;
    j["pods"] = args.pods;
    j["inflate"] = args.inflate;
    if (args.bounds) {
      j["offline_unallocated_pct_at_100"] = JsonNumber(100.0 - offline);
      j["ceiling_unallocated_pct_at_100"] = JsonNumber(100.0 - ceiling);
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("policy %s, %zu seed(s), inflate %.2f\n", s.policy.c_str(), s.seeds.size(),
                args.inflate);
    std::printf("%12s %18s\n", "arrived %", "unallocated GPU %");
    for (int b = 0; b < sim::kBuckets; b += 10) std::printf("%12d %18.2f\n", b, s.unalloc_curve[b]);
    std::printf("at 100%%: %.2f (sd %.2f)   at 130%%: %.2f (sd %.2f)\n", s.unalloc_100, s.sd_100,
                s.unalloc_130, s.sd_130);
    if (args.bounds) {
      std::printf("bounds at 100%%: offline packing %.2f%% unallocated, ceiling %.2f%%\n",
                  100.0 - offline, 100.0 - ceiling);
    }
    std::printf("pods placed %lld, dropped %lld, %.0f placements/s\n",
                static_cast<long long>(s.pods_placed), static_cast<long long>(s.pods_dropped),
                s.placements_per_second);
  }
  return 0;
}

struct SyntheticArgs {
  int64_t gpus = 80000;
  std::string policy = "fabrica";
  uint64_t seed = 42;
  double load = 0.9;
  bool topology_blind = false;
  bool json = false;
};

int RunSyntheticCommand(const SyntheticArgs& args) {
  auto fail = [](const Status& st) {
    std::cerr << "fabrica sim synthetic: " << st.message() << "\n";
    return 2;
  };
  if (!(args.load > 0 && args.load <= 10)) {
    return fail(InvalidArgument("--load must be in (0, 10]"));
  }
  bool known = false;
  for (const std::string& n : PolicyNames()) known |= n == args.policy;
  if (!known) return fail(MakePolicy(args.policy).status());
  sim::SyntheticFleetOptions fleet_options;
  fleet_options.gpus = args.gpus;
  auto fleet = sim::MakeSyntheticFleet(fleet_options);
  if (!fleet.ok()) return fail(fleet.status());
  const std::vector<Workload> workloads = sim::MakeSyntheticWorkloads(*fleet, args.load, args.seed);
  sim::SyntheticRunOptions run_options;
  run_options.policy = args.policy;
  run_options.seed = args.seed;
  run_options.topology_blind = args.topology_blind;
  auto r = sim::RunSynthetic(*fleet, sim::SyntheticTenants(), workloads, run_options);
  if (!r.ok()) return fail(r.status());
  if (args.json) {
    nlohmann::json j;
    j["policy"] = r->policy;
    j["seed"] = args.seed;
    j["load"] = args.load;
    j["topology_blind"] = r->topology_blind;
    j["nodes"] = r->nodes;
    j["gpus"] = r->gpus;
    j["workloads"] = r->workloads;
    j["pods_arrived"] = r->pods_arrived;
    j["pods_placed"] = r->pods_placed;
    j["pods_dropped"] = r->pods_dropped;
    j["gangs_arrived"] = r->gangs_arrived;
    j["gangs_placed"] = r->gangs_placed;
    j["decisions"] = r->decisions;
    j["place_seconds"] = JsonNumber(r->place_seconds);
    j["placements_per_second"] = std::round(r->pods_per_second());
    j["decisions_per_second"] = std::round(r->decisions_per_second());
    j["place_cpu_seconds"] = JsonNumber(r->place_cpu_seconds);
    j["placements_per_cpu_second"] = std::round(r->pods_per_cpu_second());
    j["arrived_gpu_pct"] = JsonNumber(r->arrived_gpu_pct);
    j["allocated_gpu_pct"] = JsonNumber(r->allocated_gpu_pct);
    j["leaf_gangs_placed"] = r->leaf_gangs_placed;
    j["leaf_gangs_one_leaf_pct"] = JsonNumber(r->leaf_local_pct());
    j["leaf_gangs_one_rack_pct"] = JsonNumber(r->rack_local_pct());
    j["nvlink_gangs_placed"] = r->nvlink_gangs_placed;
    j["nvlink_gangs_one_domain_pct"] = JsonNumber(r->nvlink_local_pct());
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("synthetic fleet: %lld nodes, %lld GPUs; %lld workloads, seed %llu, load %.2f\n",
              static_cast<long long>(r->nodes), static_cast<long long>(r->gpus),
              static_cast<long long>(r->workloads), static_cast<unsigned long long>(args.seed),
              args.load);
  std::printf("policy %s%s\n", r->policy.c_str(), r->topology_blind ? ", topology-blind" : "");
  std::printf(
      "placement: %lld pods in %.3f s = %.0f placements/s (%.0f decisions/s); "
      "%.3f CPU s = %.0f placements per CPU second\n",
      static_cast<long long>(r->pods_arrived), r->place_seconds, r->pods_per_second(),
      r->decisions_per_second(), r->place_cpu_seconds, r->pods_per_cpu_second());
  std::printf("pods placed %lld, dropped %lld; gangs placed %lld of %lld\n",
              static_cast<long long>(r->pods_placed), static_cast<long long>(r->pods_dropped),
              static_cast<long long>(r->gangs_placed), static_cast<long long>(r->gangs_arrived));
  std::printf("GPU capacity: arrived %.2f%%, allocated %.2f%%\n", r->arrived_gpu_pct,
              r->allocated_gpu_pct);
  std::printf(
      "leaf-preferring gangs: %lld placed, %.1f%% in one InfiniBand leaf, %.1f%% in one rack\n",
      static_cast<long long>(r->leaf_gangs_placed), r->leaf_local_pct(), r->rack_local_pct());
  std::printf("NVLink-preferring gangs: %lld placed, %.1f%% in one NVLink domain\n",
              static_cast<long long>(r->nvlink_gangs_placed), r->nvlink_local_pct());
  return 0;
}

}  // namespace

struct ReplayArgs {
  std::string scenario, policy = "all", trace_dir, placement = "fabrica";
  double load = 0;
  bool load_given = false;  // --load on the command line (then 0 is no "none")
  bool json = false;
  std::string events_out;  // --events-out: the run's event log (JSON Lines), one policy
};

int RunReplayCommand(const ReplayArgs& args) {
  auto fail = [](const Status& st) {
    std::cerr << "fabrica sim replay: " << st.message() << "\n";
    return st.code() == StatusCode::kNotFound ? 3 : 2;
  };
  std::vector<std::string> policies;
  if (args.policy == "all") {
    policies = {"dedicated", "fifo", "fabrica"};
  } else if (args.policy == "dedicated" || args.policy == "fifo" || args.policy == "fabrica") {
    policies = {args.policy};
  } else {
    return fail(InvalidArgument("--policy: expected dedicated, fifo, fabrica or all, got '" +
                                args.policy + "'"));
  }
  if (!args.events_out.empty() && policies.size() != 1)
    return fail(InvalidArgument(
        "--events-out needs --policy to name exactly one policy (dedicated, fifo or fabrica)"));
  if (args.load_given && !(args.load > 0 && args.load <= 10)) {
    std::ostringstream given;
    given << args.load;
    return fail(InvalidArgument("--load: must be in (0, 10], got " + given.str()));
  }
  auto text = sim::ReadFile(args.scenario);
  if (!text.ok()) return fail(text.status());
  std::string base = ".";
  size_t slash = args.scenario.rfind('/');
  if (slash != std::string::npos) base = args.scenario.substr(0, slash);
  auto scenario = sim::ParseScenario(*text, args.scenario, base, args.trace_dir, args.load);
  if (!scenario.ok()) return fail(scenario.status());
  std::ofstream events;
  if (!args.events_out.empty()) {
    events.open(args.events_out, std::ios::out | std::ios::trunc);
    if (!events)
      return fail(InvalidArgument("--events-out: cannot write '" + args.events_out + "'"));
  }
  std::vector<sim::ReplayResult> results;
  for (const std::string& p : policies) {
    auto r = sim::RunReplay(*scenario, p, args.placement, events.is_open() ? &events : nullptr);
    if (!r.ok()) return fail(r.status());
    results.push_back(*r);
  }
  if (events.is_open()) {
    events.close();
    if (!events)
      return fail(InvalidArgument("--events-out: writing '" + args.events_out + "' failed"));
  }
  // (Work that can never run is left out of the measures: said here too, for --json.)
  for (const sim::ReplayResult& r : results)
    for (const sim::TeamResult& t : r.teams)
      if (!t.no_slice.empty() && t.workloads > 0)
        std::cerr << "fabrica sim replay: warning: policy " << r.policy << ", team " << t.name
                  << ": " << t.no_slice << "; its " << t.workloads
                  << " workload(s) wait to the end\n";
      else if (t.policy_blocked > 0)
        std::cerr << "fabrica sim replay: warning: policy " << r.policy << ", team " << t.name
                  << ": " << t.policy_blocked
                  << " workload(s) this policy can never start, though the whole fleet could, "
                     "wait to the end (last: "
                  << t.policy_blocked_reason << ")\n";
  for (const sim::ReplayResult& r : results)
    for (const sim::TeamResult& t : r.teams)
      if (t.infeasible > 0)
        std::cerr << "fabrica sim replay: warning: policy " << r.policy << ", team " << t.name
                  << ": " << t.infeasible
                  << " workload(s) can never run as they ask (last: " << t.infeasible_reason
                  << ")\n";
  if (args.json) {
    if (results.size() == 1) {
      sim::PrintReplayJson(results[0], std::cout);
    } else {
      std::cout << "[\n";
      for (size_t i = 0; i < results.size(); ++i) {
        sim::PrintReplayJson(results[i], std::cout);
        if (i + 1 < results.size()) std::cout << ",\n";
      }
      std::cout << "]\n";
    }
  } else {
    sim::PrintReplayTable(results, std::cout);
  }
  return 0;
}

namespace {

struct FaultArgs {
  int nodes = 200;
  double days = 1;
  uint64_t seed = 42;
  double load = 0.8;
  double fault_scale = 1;
};

int RunFaultsCommand(const FaultArgs& args) {
  sim::FaultSimOptions o;
  o.nodes = args.nodes;
  o.days = args.days;
  o.seed = args.seed;
  o.load = args.load;
  if (!(args.fault_scale >= 0)) {
    std::cerr << "fabrica sim faults: --fault-scale must be 0 or more\n";
    return 2;
  }
  for (double* rate : {&o.fatal_xid_rate, &o.warning_xid_rate, &o.app_xid_rate, &o.unknown_xid_rate,
                       &o.ecc_rate, &o.agent_death_rate}) {
    *rate *= args.fault_scale;
  }
  auto report = sim::RunFaultSim(o);
  if (!report.ok()) {
    std::cerr << "fabrica sim faults: " << report.status().message() << "\n";
    return 2;
  }
  report->Print(std::cout);
  return report->ok() ? 0 : 1;
}

}  // namespace

void AddSimCommands(CLI::App& app, int* exit_code) {
  CLI::App* sim = app.add_subcommand("sim", "Simulate placement on traces and synthetic fleets");
  sim->require_subcommand(1);
  auto args = std::make_shared<OpenbArgs>();
  CLI::App* openb =
      sim->add_subcommand("openb", "Replay the FGD paper's experiment on Alibaba's openb trace");
  openb->add_option("--nodes", args->nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required();
  openb->add_option("--pods", args->pods, "pod list CSV")->required();
  openb->add_option("--policy", args->policy,
                    "random|dotprod|clustering|packing|bestfit|fgd|fabrica");
  openb->add_option("--seeds", args->seeds, "seeds, e.g. 42-51 or 42,45");
  openb->add_option("--inflate", args->inflate,
                    "inflate the pod list to this multiple of capacity");
  openb->add_flag("--json", args->json, "print JSON");
  openb->add_flag("--bounds", args->bounds,
                  "also compute, at 100% arrived, an offline packing and an LP ceiling");
  openb->add_option("--placements-out", args->placements_out,
                    "write every decision as CSV (one seed)");
  openb->callback([args, exit_code] { *exit_code = RunOpenbCommand(*args); });

  auto syn = std::make_shared<SyntheticArgs>();
  CLI::App* synthetic = sim->add_subcommand(
      "synthetic", "Place a seeded synthetic workload mix on a generated HGX + GB200 fleet");
  synthetic->add_option("--gpus", syn->gpus, "fleet size in GPUs (default 80000)");
  synthetic->add_option("--policy", syn->policy,
                        "random|dotprod|clustering|packing|bestfit|fgd|fabrica");
  synthetic->add_option("--seed", syn->seed, "seed of the workload mix and the placer");
  synthetic->add_option("--load", syn->load,
                        "arrivals stop at this multiple of GPU capacity (default 0.9)");
  synthetic->add_flag("--topology-blind", syn->topology_blind,
                      "drop the gangs' topology constraints (a baseline for locality)");
  synthetic->add_flag("--json", syn->json, "print JSON");
  synthetic->callback([syn, exit_code] { *exit_code = RunSyntheticCommand(*syn); });

  auto rep = std::make_shared<ReplayArgs>();
  CLI::App* replay = sim->add_subcommand(
      "replay", "Replay a multi-team scenario in virtual time: dedicated vs fifo vs fabrica");
  replay->add_option("--scenario", rep->scenario, "scenario YAML (see scenarios/README.md)")
      ->required();
  replay->add_option("--policy", rep->policy, "dedicated|fifo|fabrica|all (default all)");
  CLI::Option* load_option =
      replay->add_option("--load", rep->load, "override the scenario's offered load, in (0, 10]");
  replay->add_option("--trace-dir", rep->trace_dir, "directory of the trace CSVs");
  {
    std::string names;
    for (const std::string& n : PolicyNames()) names += (names.empty() ? "" : "|") + n;
    replay
        ->add_option("--placement", rep->placement,
                     "placement policy: " + names + " (default fabrica)")
        ->check(CLI::IsMember(PolicyNames()));
  }
  replay->add_flag("--json", rep->json, "print JSON");
  replay->add_option("--events-out", rep->events_out,
                     "write every arrival, start, eviction and stop as JSON Lines to FILE "
                     "(one policy; scripts/verify_replay.py checks it)");
  replay->callback([rep, exit_code, load_option] {
    rep->load_given = load_option->count() > 0;
    *exit_code = RunReplayCommand(*rep);
  });

  auto faults = std::make_shared<FaultArgs>();
  CLI::App* fault = sim->add_subcommand(
      "faults",
      "Inject random XIDs, ECC errors and agent deaths into a synthetic fleet and check "
      "the health controller's invariants");
  fault->add_option("--nodes", faults->nodes, "HGX nodes of 8 GPUs (default 200)");
  fault->add_option("--days", faults->days, "virtual days (default 1)");
  fault->add_option("--seed", faults->seed, "seed of the faults and the workloads (default 42)");
  fault->add_option("--load", faults->load, "offered load, GPU-seconds / capacity (default 0.8)");
  fault->add_option("--fault-scale", faults->fault_scale,
                    "multiply every fault rate by this (default 1)");
  fault->callback([faults, exit_code] { *exit_code = RunFaultsCommand(*faults); });
}

}  // namespace fabrica::cli
