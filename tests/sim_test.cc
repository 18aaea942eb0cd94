// Unit tests for src/sim: the openb CSV readers, the tuning of the arrival list, RunOpenb on a
// tiny fleet, the summary over seeds, and one run on the real trace when it is present.
//
// The CSV texts are inline; the header is line 1, so the i-th data row is on line i + 1.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sched/policy.h"
#include "sim/openb.h"
#include "test_util.h"

namespace fabrica::sim {
namespace {

using test::ExpectInvalid;

constexpr char kNodeHeader[] = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr char kPodHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

// Four GPU nodes (18 GPUs) and a CPU-only node, which the experiment leaves out.
constexpr char kNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "node-0,32000,131072,2,T4\n"
    "node-cpu,96000,393216,0,\n"
    "node-1,64000,262144,4,V100M16\n"
    "node-2,64000,262144,4,V100M16\n"
    "node-3,96000,393216,8,G2\n";

// A mix like the trace's: whole GPUs, fractions, a multi-GPU pod, CPU-only pods, model limits.
constexpr char kPods[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "pod-00,8000,16384,1,1000,,LS,Running,0,500,0\n"
    "pod-01,4000,8192,1,500,,LS,Running,10,600,10\n"
    "pod-02,6000,12288,1,460,,BE,Running,20,,20\n"
    "pod-03,2000,4096,0,0,,LS,Running,30,700,30\n"
    "pod-04,16000,32768,4,1000,,LS,Running,40,800,40\n"
    "pod-05,4000,8192,1,250,T4,LS,Running,50,900,50\n"
    "pod-06,12000,24576,2,1000,V100M16,LS,Running,60,1000,60\n"
    "pod-07,3000,6144,1,300,,LS,Running,70,1100,70\n"
    "pod-08,8000,16384,1,1000,G2,LS,Running,80,1200,80\n"
    "pod-09,1000,2048,0,0,,BE,Running,90,1300,90\n"
    "pod-10,6000,12288,1,700,,LS,Running,100,1400,100\n"
    "pod-11,4000,8192,1,200,,LS,Pending,110,,\n";

Fleet TinyFleet() {
  Result<Fleet> f = ParseOpenbNodes(kNodes, "nodes.csv");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : Fleet{};
}

std::vector<TracePod> TinyPods() {
  Result<std::vector<TracePod>> p = ParseOpenbPods(kPods, "pods.csv");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : std::vector<TracePod>{};
}

// `count` pods named p00.. that each ask for `gpu_milli` of one GPU.
std::vector<TracePod> UniformPods(int count, int64_t gpu_milli) {
  std::vector<TracePod> out;
  for (int i = 0; i < count; ++i) {
    TracePod p;
    p.name = (i < 10 ? "p0" : "p") + std::to_string(i);
    p.cpu_milli = 1000;
    p.num_gpu = 1;
    p.gpu_milli = gpu_milli;
    out.push_back(p);
  }
  return out;
}

int64_t TotalMilli(const std::vector<TracePod>& pods) {
  int64_t t = 0;
  for (const TracePod& p : pods) t += p.total_gpu_milli();
  return t;
}

std::vector<std::string> Names(const std::vector<TracePod>& pods) {
  std::vector<std::string> out;
  for (const TracePod& p : pods) out.push_back(p.name);
  return out;
}

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',') {
      out.emplace_back();
    } else {
      out.back().push_back(c);
    }
  }
  return out;
}

// Bucket arrays hold NaN where no event is near; NaN equals NaN here.
bool SameCurve(const std::array<double, kBuckets>& a, const std::array<double, kBuckets>& b) {
  for (int i = 0; i < kBuckets; ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return false;
    if (!std::isnan(a[i]) && a[i] != b[i]) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// CSV readers

TEST(ParseOpenbNodes, ReadsGpuNodesOnly) {
  Fleet fleet = TinyFleet();
  ASSERT_EQ(fleet.nodes.size(), 4u);
  EXPECT_EQ(fleet.total_gpus(), 18);
  const Node& n0 = fleet.nodes[0];
  EXPECT_EQ(n0.name.str(), "node-0");
  EXPECT_EQ(n0.cpu.value(), 32000);
  EXPECT_EQ(n0.memory.value(), 131072);
  EXPECT_EQ(n0.gpu_count(), 2);
  EXPECT_EQ(n0.gpu_model(), "T4");
  EXPECT_EQ(n0.devices[1].uuid, "GPU-node-0-1");
  EXPECT_EQ(fleet.nodes[3].gpu_model(), "G2");
  EXPECT_EQ(fleet.Find(NodeId("node-cpu")), nullptr);
  EXPECT_EQ(fleet.Models(), (std::vector<std::string>{"G2", "T4", "V100M16"}));
}

TEST(ParseOpenbNodes, ErrorsNameFileLineAndField) {
  ExpectInvalid(
      ParseOpenbNodes(std::string(kNodeHeader) + "a,1000,1024,1,T4\nb,1000,1024,1\n", "nodes.csv"),
      {"nodes.csv:3", "expected 5 fields, got 4"});
  ExpectInvalid(ParseOpenbNodes(std::string(kNodeHeader) + "a,abc,1024,1,T4\n", "nodes.csv"),
                {"nodes.csv:2", "field 'cpu_milli'", "'abc'"});
  ExpectInvalid(ParseOpenbNodes(std::string(kNodeHeader) + "a,1000,-5,1,T4\n", "nodes.csv"),
                {"nodes.csv:2", "field 'memory_mib'", "negative"});
  ExpectInvalid(ParseOpenbNodes(std::string(kNodeHeader) + "a,1000,1024,65,T4\n", "nodes.csv"),
                {"nodes.csv:2", "field 'gpu'", "64"});
  ExpectInvalid(ParseOpenbNodes(std::string(kNodeHeader) + "a,1000,1024,2,\n", "nodes.csv"),
                {"nodes.csv:2", "field 'model'"});
  ExpectInvalid(ParseOpenbNodes(std::string(kNodeHeader) + "a,1000,1024,1,T4\na,1000,1024,1,T4\n",
                                "nodes.csv"),
                {"nodes.csv", "duplicate name"});
  ExpectInvalid(ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu\na,1,1,1\n", "nodes.csv"),
                {"nodes.csv:1", "missing column 'model'"});
  ExpectInvalid(ParseOpenbNodes(std::string(kNodeHeader) + "c,1000,1024,0,\n", "nodes.csv"),
                {"nodes.csv", "no GPU node"});
  ExpectInvalid(ParseOpenbNodes("", "nodes.csv"), {"nodes.csv", "no header"});
}

TEST(ParseOpenbPods, ReadsTheTraceColumns) {
  std::vector<TracePod> pods = TinyPods();
  ASSERT_EQ(pods.size(), 12u);
  const TracePod& p2 = pods[2];
  EXPECT_EQ(p2.name, "pod-02");
  EXPECT_EQ(p2.cpu_milli, 6000);
  EXPECT_EQ(p2.memory_mib, 12288);
  EXPECT_EQ(p2.num_gpu, 1);
  EXPECT_EQ(p2.gpu_milli, 460);
  EXPECT_EQ(p2.total_gpu_milli(), 460);
  EXPECT_EQ(p2.creation_s, 20);
  EXPECT_EQ(p2.deletion_s, -1);  // empty: the pod had not ended
  EXPECT_EQ(p2.line, 4);
  EXPECT_EQ(pods[4].total_gpu_milli(), 4000);
  EXPECT_EQ(pods[6].gpu_spec, "V100M16");
  EXPECT_EQ(pods[11].scheduled_s, -1);
  EXPECT_EQ(pods[3].total_gpu_milli(), 0);
}

TEST(ParseOpenbPods, FiveColumnListsHaveNoSpecOrTimes) {
  // The multigpu lists of the trace carry only the five resource columns.
  Result<std::vector<TracePod>> r = ParseOpenbPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1000,1024,8,1000\n"
      "y,500,512,0,300\n",
      "multi.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].total_gpu_milli(), 8000);
  EXPECT_EQ((*r)[0].gpu_spec, "");
  EXPECT_EQ((*r)[0].creation_s, -1);
  // A CPU-only row's gpu_milli is meaningless and is cleared, so it cannot count as GPU demand.
  EXPECT_EQ((*r)[1].gpu_milli, 0);
  EXPECT_EQ((*r)[1].total_gpu_milli(), 0);
}

TEST(ParseOpenbPods, ErrorsNameFileLineAndField) {
  const std::string h = kPodHeader;
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,1,1000,,LS,Running,0,1,0\n"
                                   "b,1000,1024,1,1000,,LS,Running,0,1\n",
                               "pods.csv"),
                {"pods.csv:3", "expected 11 fields, got 10"});
  ExpectInvalid(ParseOpenbPods(h + "a,abc,1024,1,1000,,LS,Running,0,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'cpu_milli'", "'abc'"});
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,-1,1000,,LS,Running,0,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'num_gpu'", "negative"});
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,1,1500,,LS,Running,0,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'gpu_milli'", "1500"});
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,2,500,,LS,Running,0,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'gpu_milli'", "num_gpu == 1"});
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,1,500,T4||P100,LS,Running,0,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'gpu_spec'"});
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,1,500,,LS,Running,x,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'creation_time'"});
  ExpectInvalid(ParseOpenbPods(h + ",1000,1024,1,500,,LS,Running,0,1,0\n", "pods.csv"),
                {"pods.csv:2", "field 'name'"});
  ExpectInvalid(ParseOpenbPods(h, "pods.csv"), {"pods.csv", "no pod"});
  ExpectInvalid(ParseOpenbPods(h + "a,1000,1024,1,500,,LS,Running,0,1,0\n"
                                   "b,1000,1024,1,500,,LS,Running,0,1,0\n"
                                   "a,1000,1024,1,500,,LS,Running,0,1,0\n",
                               "pods.csv"),
                {"pods.csv:4", "field 'name'", "'a' is listed twice (first at line 2)"});
}

TEST(ReadFile, MissingFileIsNotFound) {
  Result<std::string> r = ReadFile("/nonexistent/fabrica/nodes.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/fabrica/nodes.csv"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// TunePods

TEST(TunePods, InflatesUpToTheTargetAndNoFurther) {
  // Three one-GPU pods (3000 milli) on 4 GPUs at 1.3x: the target is 5200 milli.
  std::vector<TracePod> pods = UniformPods(3, 1000);
  std::vector<TracePod> list = TunePods(pods, 4000, 1.3, 42, nullptr, 0);
  // Copies of 1000 are appended while the total stays within 5200: 5000, and a sixth would
  // exceed it.
  EXPECT_EQ(TotalMilli(list), 5000);
  EXPECT_EQ(list.size(), 5u);
  // The originals come first, each once, shuffled; the copies follow.
  std::vector<std::string> head = Names(list);
  head.resize(3);
  std::sort(head.begin(), head.end());
  EXPECT_EQ(head, (std::vector<std::string>{"p00", "p01", "p02"}));
}

TEST(TunePods, MixedSizesStopAtTheFirstCopyThatWouldExceed) {
  std::vector<TracePod> pods = TinyPods();
  const int64_t capacity = 18000;
  int64_t largest = 0;
  for (const TracePod& p : pods) largest = std::max(largest, p.total_gpu_milli());
  for (uint64_t seed : {1, 2, 3, 42, 1000}) {
    std::vector<TracePod> list = TunePods(pods, capacity, 1.3, seed, nullptr, 0);
    const int64_t total = TotalMilli(list);
    EXPECT_LE(total, 1.3 * capacity) << seed;
    // The copy that stopped the growth did not fit, so the gap is less than the largest pod.
    EXPECT_GT(total + largest, 1.3 * capacity) << seed;
    EXPECT_GT(list.size(), pods.size()) << seed;
    // Every entry is a copy of a trace pod.
    std::set<std::string> names;
    for (const TracePod& p : pods) names.insert(p.name);
    for (const TracePod& p : list) EXPECT_TRUE(names.count(p.name)) << p.name;
  }
}

TEST(TunePods, ShufflesDeterministicallyPerSeed) {
  std::vector<TracePod> pods = UniformPods(20, 100);
  std::vector<int> order_a, order_b, order_c;
  std::vector<TracePod> a = TunePods(pods, 10000, 1.3, 7, &order_a, 6);
  std::vector<TracePod> b = TunePods(pods, 10000, 1.3, 7, &order_b, 6);
  std::vector<TracePod> c = TunePods(pods, 10000, 1.3, 8, &order_c, 6);
  EXPECT_EQ(Names(a), Names(b));
  EXPECT_EQ(order_a, order_b);
  EXPECT_NE(Names(a), Names(c));
  // The input order does not matter: pods are sorted by name before the shuffle.
  std::vector<TracePod> reversed(pods.rbegin(), pods.rend());
  EXPECT_EQ(Names(TunePods(reversed, 10000, 1.3, 7, nullptr, 0)), Names(a));
  // The node order is a permutation.
  std::vector<int> sorted = order_a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  // And the originals are shuffled, not left in name order.
  std::vector<std::string> head = Names(a);
  head.resize(pods.size());
  EXPECT_NE(head, Names(pods));
}

TEST(TunePods, ListOverTargetLosesPods) {
  std::vector<TracePod> pods = UniformPods(10, 1000);  // 10000 milli against a 5200 target
  std::vector<TracePod> list = TunePods(pods, 4000, 1.3, 42, nullptr, 0);
  EXPECT_EQ(list.size(), 5u);
  EXPECT_EQ(TotalMilli(list), 5000);
  std::set<std::string> distinct;
  for (const TracePod& p : list) distinct.insert(p.name);
  EXPECT_EQ(distinct.size(), 5u);  // removed, never duplicated
}

TEST(TunePods, CpuOnlyListIsOnlyShuffled) {
  std::vector<TracePod> pods = UniformPods(4, 0);
  for (TracePod& p : pods) p.num_gpu = 0;
  EXPECT_EQ(TunePods(pods, 4000, 1.3, 42, nullptr, 0).size(), 4u);
}

// ---------------------------------------------------------------------------------------------
// RunOpenb

TEST(RunOpenb, AccountsForEveryPodUnderEveryPolicy) {
  const Fleet fleet = TinyFleet();
  const std::vector<TracePod> pods = TinyPods();
  const size_t tuned = TunePods(pods, 18000, 1.3, 42, nullptr, 0).size();
  for (const std::string& policy : PolicyNames()) {
    RunOptions opt;
    opt.policy = policy;
    opt.seed = 42;
    Result<RunResult> r = RunOpenb(fleet, pods, opt);
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
    EXPECT_EQ(r->seed, 42u);
    EXPECT_EQ(static_cast<size_t>(r->pods_placed + r->pods_dropped), tuned) << policy;
    EXPECT_EQ(static_cast<size_t>(r->decisions), tuned) << policy;
    EXPECT_GT(r->pods_placed, 0) << policy;
    EXPECT_GT(r->arrived_at_100, 0) << policy;
    EXPECT_LE(r->arrived_at_100, r->decisions) << policy;
    int defined = 0;
    for (int b = 0; b < kBuckets; ++b) {
      if (std::isnan(r->allocated_pct[b])) continue;
      ++defined;
      // Each event's allocated % is at most its arrived %, which rounds to b (or, for a bucket
      // filled from its neighbours, to b +- 1).
      EXPECT_LE(r->allocated_pct[b], b + 1.5) << policy << " bucket " << b;
      EXPECT_GE(r->allocated_pct[b], 0) << policy;
      EXPECT_LE(r->allocated_pct[b], 100) << policy;
    }
    EXPECT_GT(defined, 5) << policy;
  }
}

TEST(RunOpenb, SameSeedSameResult) {
  const Fleet fleet = TinyFleet();
  const std::vector<TracePod> pods = TinyPods();
  for (const char* policy : {"random", "fgd", "fabrica"}) {
    RunOptions opt;
    opt.policy = policy;
    opt.seed = 7;
    std::ostringstream csv_a, csv_b;
    opt.placements_out = &csv_a;
    Result<RunResult> a = RunOpenb(fleet, pods, opt);
    opt.placements_out = &csv_b;
    Result<RunResult> b = RunOpenb(fleet, pods, opt);
    ASSERT_TRUE(a.ok() && b.ok()) << policy;
    EXPECT_EQ(a->pods_placed, b->pods_placed) << policy;
    EXPECT_EQ(a->pods_dropped, b->pods_dropped) << policy;
    EXPECT_EQ(a->arrived_at_100, b->arrived_at_100) << policy;
    EXPECT_TRUE(SameCurve(a->allocated_pct, b->allocated_pct)) << policy;
    EXPECT_EQ(csv_a.str(), csv_b.str()) << policy;
  }
}

TEST(RunOpenb, PlacementsCsvMatchesTheRun) {
  const Fleet fleet = TinyFleet();
  const std::vector<TracePod> pods = TinyPods();
  RunOptions opt;
  opt.policy = "fgd";
  opt.seed = 42;
  std::ostringstream csv;
  opt.placements_out = &csv;
  Result<RunResult> r = RunOpenb(fleet, pods, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<TracePod> list = TunePods(pods, 18000, 1.3, 42, nullptr, 0);

  std::istringstream in(csv.str());
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "seq,pod,node,gpu_index,gpu_milli");
  // Replays the CSV: per pod, whether it was placed and how much GPU it got.
  std::map<int64_t, int64_t> milli_by_seq;
  std::set<int64_t> seen, placed;
  while (std::getline(in, line)) {
    std::vector<std::string> f = SplitCsvLine(line);
    ASSERT_EQ(f.size(), 5u) << line;
    const int64_t seq = std::stoll(f[0]);
    ASSERT_LT(static_cast<size_t>(seq), list.size()) << line;
    EXPECT_EQ(f[1], list[seq].name) << line;
    seen.insert(seq);
    if (f[2].empty()) continue;  // dropped
    placed.insert(seq);
    EXPECT_NE(fleet.Find(NodeId(f[2])), nullptr) << line;
    if (!f[3].empty()) milli_by_seq[seq] += std::stoll(f[4]);
  }
  EXPECT_EQ(seen.size(), list.size());
  EXPECT_EQ(static_cast<int64_t>(placed.size()), r->pods_placed);
  // A placed pod got exactly what it asked for, and after every arrival the allocated total
  // stays within what has arrived.
  int64_t arrived = 0, allocated = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    arrived += list[i].total_gpu_milli();
    if (placed.count(i)) {
      EXPECT_EQ(milli_by_seq[i], list[i].total_gpu_milli()) << list[i].name;
      allocated += milli_by_seq[i];
    }
    EXPECT_LE(allocated, arrived) << "after pod " << i;
    EXPECT_LE(allocated, 18000);
  }
}

TEST(RunOpenb, UnknownGpuSpecModelIsNamed) {
  std::vector<TracePod> pods = TinyPods();
  pods[5].gpu_spec = "A100";
  RunOptions opt;
  Result<RunResult> r = RunOpenb(TinyFleet(), pods, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("A100"), std::string::npos) << r.status().message();
}

TEST(RunOpenb, BadPolicyAndEmptyFleet) {
  RunOptions opt;
  opt.policy = "nope";
  Result<RunResult> r = RunOpenb(TinyFleet(), TinyPods(), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'nope'"), std::string::npos) << r.status().message();
  Result<RunResult> empty = RunOpenb(Fleet{}, TinyPods(), RunOptions{});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no GPU"), std::string::npos);
}

TEST(Summarize, MeanAndSpreadOfUnallocated) {
  RunResult a, b, c;
  a.allocated_pct.fill(std::nan(""));
  b.allocated_pct.fill(std::nan(""));
  c.allocated_pct.fill(std::nan(""));
  a.seed = 1, b.seed = 2, c.seed = 3;
  a.allocated_pct[100] = 90;  // 10% unallocated
  b.allocated_pct[100] = 94;  // 6%
  a.allocated_pct[130] = 80;
  b.allocated_pct[130] = 84;
  c.allocated_pct[130] = 82;  // c has no event near 100% and is left out there
  a.pods_placed = 10, b.pods_placed = 20, c.pods_placed = 30;
  a.pods_dropped = 1;
  a.decisions = 100, b.decisions = 100, c.decisions = 100;
  a.place_seconds = b.place_seconds = c.place_seconds = 0.5;
  Summary s = Summarize("fgd", {a, b, c});
  EXPECT_EQ(s.policy, "fgd");
  EXPECT_EQ(s.seeds, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(s.unalloc_100, 8);
  EXPECT_DOUBLE_EQ(s.sd_100, 2);
  EXPECT_DOUBLE_EQ(s.unalloc_130, 18);
  EXPECT_NEAR(s.sd_130, std::sqrt(8.0 / 3), 1e-9);
  EXPECT_DOUBLE_EQ(s.unalloc_curve[100], 8);
  EXPECT_TRUE(std::isnan(s.unalloc_curve[50]));
  EXPECT_EQ(s.pods_placed, 60);
  EXPECT_EQ(s.pods_dropped, 1);
  EXPECT_DOUBLE_EQ(s.placements_per_second, 200);
}

// ---------------------------------------------------------------------------------------------
// The real trace (skipped where /work/shared/traces is not present)

std::string TraceCsv(const std::string& file) {
  return std::string(FABRICA_SHARED_DIR) + "/traces/alibaba-gpu-2023/csv/" + file;
}

bool HaveTrace() {
  return std::filesystem::exists(TraceCsv("openb_node_list_gpu_node.csv")) &&
         std::filesystem::exists(TraceCsv("openb_pod_list_default.csv"));
}

TEST(RealTrace, ParsesTheOpenbFiles) {
  if (!HaveTrace()) {
    GTEST_SKIP() << "trace not found under " << FABRICA_SHARED_DIR
                 << "/traces/alibaba-gpu-2023/csv (the shared folder is absent)";
  }
  Result<std::string> nodes_text = ReadFile(TraceCsv("openb_node_list_gpu_node.csv"));
  ASSERT_TRUE(nodes_text.ok()) << nodes_text.status().ToString();
  Result<Fleet> fleet = ParseOpenbNodes(*nodes_text, "openb_node_list_gpu_node.csv");
  ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
  // The counts the trace's README gives.
  EXPECT_EQ(fleet->nodes.size(), 1213u);
  EXPECT_EQ(fleet->total_gpus(), 6212);
  Result<std::string> pods_text = ReadFile(TraceCsv("openb_pod_list_default.csv"));
  ASSERT_TRUE(pods_text.ok()) << pods_text.status().ToString();
  Result<std::vector<TracePod>> pods = ParseOpenbPods(*pods_text, "openb_pod_list_default.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->size(), 8152u);
}

// Unallocated % at 100% arrived on the default list, seed 42, under `policy` (NaN on failure).
double DefaultListSeed42Unallocated(const std::string& policy) {
  Result<Fleet> fleet =
      ParseOpenbNodes(*ReadFile(TraceCsv("openb_node_list_gpu_node.csv")), "nodes.csv");
  Result<std::vector<TracePod>> pods =
      ParseOpenbPods(*ReadFile(TraceCsv("openb_pod_list_default.csv")), "pods.csv");
  EXPECT_TRUE(fleet.ok() && pods.ok());
  if (!fleet.ok() || !pods.ok()) return std::nan("");
  RunOptions opt;
  opt.policy = policy;
  opt.seed = 42;
  Result<RunResult> r = RunOpenb(*fleet, *pods, opt);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? 100.0 - r->allocated_pct[100] : std::nan("");
}

TEST(RealTrace, FgdSeed42MatchesThePaper) {
  if (!HaveTrace()) {
    GTEST_SKIP() << "trace not found under " << FABRICA_SHARED_DIR
                 << "/traces/alibaba-gpu-2023/csv (the shared folder is absent)";
  }
  // The reference simulator's mean over ten seeds is 4.77% unallocated at 100% arrived; one seed
  // lands within about a point of it.
  const double unallocated = DefaultListSeed42Unallocated("fgd");
  ASSERT_FALSE(std::isnan(unallocated));
  EXPECT_GE(unallocated, 4.0);
  EXPECT_LE(unallocated, 5.6);
}

// The quality target on one seed: `fabrica` leaves at most 4.0% of the GPUs unallocated
// at 100% arrived on the default list (3.92% on seed 42; mean 3.90% over seeds 42-51) and less
// than `fgd` on the same arrival order.
TEST(RealTrace, FabricaSeed42LeavesUnderFourPercent) {
  if (!HaveTrace()) {
    GTEST_SKIP() << "trace not found under " << FABRICA_SHARED_DIR
                 << "/traces/alibaba-gpu-2023/csv (the shared folder is absent)";
  }
  const double fabrica = DefaultListSeed42Unallocated("fabrica");
  const double fgd = DefaultListSeed42Unallocated("fgd");
  ASSERT_FALSE(std::isnan(fabrica) || std::isnan(fgd));
  EXPECT_LE(fabrica, 4.0);
  EXPECT_LT(fabrica, fgd - 0.5);
}

}  // namespace
}  // namespace fabrica::sim
