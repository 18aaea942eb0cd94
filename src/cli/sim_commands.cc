#include "cli/sim_commands.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "sched/policy.h"
#include "sim/openb.h"

namespace fabrica::cli {
namespace {

Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
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
    opt.placements_out = placements.is_open() ? &placements : nullptr;
    auto r = sim::RunOpenb(*fleet, *pods, opt);
    if (!r.ok()) return fail(r.status());
    runs.push_back(*r);
  }
  sim::Summary s = sim::Summarize(args.policy, runs);
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
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("policy %s, %zu seed(s), inflate %.2f\n", s.policy.c_str(), s.seeds.size(), args.inflate);
    std::printf("%12s %18s\n", "arrived %", "unallocated GPU %");
    for (int b = 0; b < sim::kBuckets; b += 10) std::printf("%12d %18.2f\n", b, s.unalloc_curve[b]);
    std::printf("at 100%%: %.2f (sd %.2f)   at 130%%: %.2f (sd %.2f)\n", s.unalloc_100, s.sd_100,
                s.unalloc_130, s.sd_130);
    std::printf("pods placed %lld, dropped %lld, %.0f placements/s\n",
                static_cast<long long>(s.pods_placed), static_cast<long long>(s.pods_dropped),
                s.placements_per_second);
  }
  return 0;
}

}  // namespace

void AddSimCommands(CLI::App& app, int* exit_code) {
  CLI::App* sim = app.add_subcommand("sim", "Simulate placement on traces and synthetic fleets");
  sim->require_subcommand(1);
  auto args = std::make_shared<OpenbArgs>();
  CLI::App* openb = sim->add_subcommand("openb", "Replay the FGD paper's experiment on Alibaba's openb trace");
  openb->add_option("--nodes", args->nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  openb->add_option("--pods", args->pods, "pod list CSV")->required();
  openb->add_option("--policy", args->policy, "random|dotprod|clustering|packing|bestfit|fgd|fabrica");
  openb->add_option("--seeds", args->seeds, "seeds, e.g. 42-51 or 42,45");
  openb->add_option("--inflate", args->inflate, "inflate the pod list to this multiple of capacity");
  openb->add_flag("--json", args->json, "print JSON");
  openb->add_option("--placements-out", args->placements_out, "write every decision as CSV (one seed)");
  openb->callback([args, exit_code] { *exit_code = RunOpenbCommand(*args); });
}

}  // namespace fabrica::cli
