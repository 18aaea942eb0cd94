// The fault-injection simulator (src/sim/fault_sim.h): the CI run of issue 7 (one day, 200 nodes)
// with its invariants, determinism for a seed, a tight remediation limit under a storm of agent
// deaths, and option checks.
#include "sim/fault_sim.h"

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

namespace fabrica::sim {
namespace {

std::string Text(const FaultSimReport& r) {
  std::ostringstream out;
  r.Print(out);
  return out.str();
}

TEST(FaultSim, OneDayTwoHundredNodesKeepsEveryInvariant) {
  FaultSimOptions o;
  o.nodes = 200;
  o.days = 1;
  o.seed = 42;
  // Ten times the default fault rates, so that one day exercises every path.
  o.fatal_xid_rate *= 10;
  o.warning_xid_rate *= 10;
  o.app_xid_rate *= 10;
  o.unknown_xid_rate *= 10;
  o.ecc_rate *= 10;
  o.agent_death_rate *= 10;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunFaultSim(o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::cout << Text(*r) << "  (" << seconds << " s)\n";
  EXPECT_TRUE(r->ok()) << Text(*r);
  EXPECT_EQ(r->nodes, 200);
  EXPECT_EQ(r->gpus, 1600);
  // Every kind of fault happened and the controller acted on each.
  EXPECT_GT(r->fatal_xids, 0);
  EXPECT_GT(r->warning_xids, 0);
  EXPECT_GT(r->app_xids, 0);
  EXPECT_GT(r->ecc_errors, 0);
  EXPECT_GT(r->agent_deaths, 0);
  EXPECT_GT(r->gpu_cordons, 0);
  EXPECT_GT(r->node_cordons, 0);
  EXPECT_GT(r->evictions, 0);
  EXPECT_GT(r->gpu_resets, 0);
  EXPECT_GT(r->reboots, 0);
  EXPECT_GT(r->burn_ins, 0);
  EXPECT_GT(r->app_restarts, 0);
  // The invariants, each also in r->violations.
  EXPECT_EQ(r->placements_on_cordoned, 0);
  EXPECT_LE(r->max_in_remediation, r->remediation_limit);
  EXPECT_LE(r->max_dead_bound_ms, r->dead_bound_limit_ms);
  EXPECT_GE(r->requeues, r->evictions - 100);  // the rest are still within their grace
  // Work got done and the loss is measured.
  EXPECT_GT(r->workloads_completed, 1000);
  EXPECT_GT(r->gpu_seconds_lost_evictions, 0);
  EXPECT_GT(r->gpu_seconds_lost_restarts, 0);
  EXPECT_GT(r->utilization_pct, 30);
}

TEST(FaultSim, SameSeedSameRun) {
  FaultSimOptions o;
  o.nodes = 40;
  o.days = 0.5;
  o.agent_death_rate = 0.2;
  o.fatal_xid_rate = 0.2;
  auto a = RunFaultSim(o);
  auto b = RunFaultSim(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Text(*a), Text(*b));
  o.seed = 7;
  auto c = RunFaultSim(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Text(*a), Text(*c));
}

TEST(FaultSim, TightLimitHoldsUnderAStormOfAgentDeaths) {
  FaultSimOptions o;
  o.nodes = 40;
  o.days = 0.5;
  o.agent_death_rate = 1.0;  // each node dies about once in the run
  o.agent_self_recovery = 0.5;
  o.remediation.min_healthy_pct = 95;  // 40 nodes: 2 at once
  auto r = RunFaultSim(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->remediation_limit, 2);
  EXPECT_EQ(r->max_in_remediation, 2) << Text(*r);
  EXPECT_TRUE(r->ok()) << Text(*r);
  EXPECT_GT(r->agent_deaths, 5);
  EXPECT_GT(r->max_dead_bound_ms, 0);
  EXPECT_LE(r->max_dead_bound_ms, r->dead_bound_limit_ms);
}

TEST(FaultSim, RejectsBadOptions) {
  FaultSimOptions o;
  o.nodes = 0;
  EXPECT_EQ(RunFaultSim(o).status().code(), StatusCode::kInvalidArgument);
  o = FaultSimOptions{};
  o.days = 0;
  EXPECT_EQ(RunFaultSim(o).status().code(), StatusCode::kInvalidArgument);
  o = FaultSimOptions{};
  o.load = 3;
  EXPECT_EQ(RunFaultSim(o).status().code(), StatusCode::kInvalidArgument);
  o = FaultSimOptions{};
  o.policy = "nope";
  EXPECT_FALSE(RunFaultSim(o).ok());
}

}  // namespace
}  // namespace fabrica::sim
