// Unit tests for src/health: every row of the XID table, every lifecycle transition (legal and
// illegal), the conditions' clearing rules, the remediation controller (per-GPU cordon, drain,
// escalation, the fleet-wide limit, burn-in before service), inspection, the burn-in parsers on
// recorded-format fixtures (tests/data/health/) and malformed inputs, and the NetBox export.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "health/burnin.h"
#include "health/conditions.h"
#include "health/inspection.h"
#include "health/lifecycle.h"
#include "health/netbox.h"
#include "health/remediation.h"
#include "health/xid.h"
#include "test_util.h"

namespace fabrica::health {
namespace {

constexpr int64_t kSec = 1000;
constexpr int64_t kMin = 60 * kSec;
constexpr int64_t kHour = 60 * kMin;

// Asserts that `st` is InvalidArgument and that its message contains `fragment`.
void ExpectInvalid(const Status& st, const std::string& fragment) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(fragment), std::string::npos)
      << "'" << fragment << "' not in: " << st.message();
}

std::string Fixture(const std::string& name) {
  return test::ReadFile(std::string(FABRICA_SOURCE_DIR) + "/tests/data/health/" + name);
}

// An HGX H100 node as the synthetic fleet builds it: 8 GPUs on NVSwitch, 8 NICs.
Node HgxNode(const std::string& name) {
  Node n;
  n.name = NodeId(name);
  n.cpu = MilliCpu(224000);
  n.memory = MemoryMib(2 * 1024 * 1024);
  n.rack = "rack-0";
  n.leaf = "leaf-0";
  for (int d = 0; d < 8; ++d) {
    Device dev;
    dev.uuid = "GPU-" + name + "-" + std::to_string(d);
    dev.model = "H100";
    dev.memory = MemoryMib(81920);
    dev.numa_node = d / 4;
    for (int p = 0; p < 8; ++p) {
      if (p != d) dev.nvlink_peers.push_back(p);
    }
    n.devices.push_back(dev);
    n.nics.push_back({"mlx5_" + std::to_string(d), d / 4, "leaf-0", 400});
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// XID table

struct ExpectedXid {
  int code;
  Severity severity;
  Action action;
  bool fails_gpu;
};

// Written out independently of xid.cc, so that changing a row there fails here.
const std::vector<ExpectedXid>& ExpectedXids() {
  using S = Severity;
  using A = Action;
  static const std::vector<ExpectedXid> k = {
      {13, S::kApplication, A::kRestartApp, false},
      {31, S::kApplication, A::kRestartApp, false},
      {43, S::kApplication, A::kNone, false},
      {45, S::kApplication, A::kNone, false},
      {46, S::kFatal, A::kResetGpu, true},
      {48, S::kFatal, A::kResetGpu, true},
      {62, S::kFatal, A::kResetGpu, true},
      {63, S::kWarning, A::kResetGpu, false},
      {64, S::kFatal, A::kResetGpu, true},
      {68, S::kApplication, A::kRestartApp, false},
      {74, S::kFatal, A::kResetGpu, true},
      {79, S::kFatal, A::kRebootNode, true},
      {92, S::kInfo, A::kNone, false},
      {94, S::kWarning, A::kRestartApp, false},
      {95, S::kFatal, A::kResetGpu, true},
      {109, S::kFatal, A::kResetGpu, true},
      {119, S::kFatal, A::kResetGpu, true},
      {120, S::kFatal, A::kResetGpu, true},
      {136, S::kFatal, A::kResetGpu, true},
      {140, S::kFatal, A::kResetGpu, true},
      {143, S::kFatal, A::kResetGpu, true},
      {144, S::kFatal, A::kResetGpu, true},
      {145, S::kFatal, A::kResetGpu, true},
      {146, S::kFatal, A::kResetGpu, true},
      {147, S::kFatal, A::kResetGpu, true},
      {148, S::kFatal, A::kResetGpu, true},
      {149, S::kFatal, A::kResetGpu, true},
      {150, S::kFatal, A::kResetGpu, true},
      {154, S::kWarning, A::kNone, false},
      {155, S::kFatal, A::kResetGpu, true},
      {156, S::kFatal, A::kResetGpu, true},
      {158, S::kFatal, A::kResetGpu, true},
  };
  return k;
}

class XidRow : public ::testing::TestWithParam<ExpectedXid> {};

TEST_P(XidRow, MatchesTheIssueAndTheReference) {
  const ExpectedXid& e = GetParam();
  const XidInfo info = LookupXid(e.code);
  EXPECT_TRUE(info.known) << e.code;
  EXPECT_EQ(info.code, e.code);
  EXPECT_EQ(info.severity, e.severity) << "XID " << e.code << ": " << SeverityName(info.severity);
  EXPECT_EQ(info.action, e.action) << "XID " << e.code << ": " << ActionName(info.action);
  EXPECT_EQ(info.fails_gpu, e.fails_gpu) << e.code;
  EXPECT_FALSE(info.mnemonic.empty());
  EXPECT_FALSE(info.meaning.empty());
}

// Each row also drives the health model the way the issue says it should.
TEST_P(XidRow, DrivesTheConditions) {
  const ExpectedXid& e = GetParam();
  NodeHealth h(8, HealthConfig{}, 0);
  h.ObserveXid(2, e.code, kSec);
  const Condition* c = h.Find(XidConditionType(e.code), 2);
  const bool raises = e.severity == Severity::kFatal || e.severity == Severity::kWarning;
  ASSERT_EQ(c != nullptr, raises) << "XID " << e.code;
  EXPECT_EQ(h.DeviceFatal(2), e.fails_gpu) << "XID " << e.code;
  EXPECT_EQ(h.NodeLevelFault(), e.action == Action::kRebootNode) << "XID " << e.code;
  ASSERT_EQ(h.events().size(), 1u);
  EXPECT_EQ(h.events().back().xid, e.code);
  if (c != nullptr) {
    EXPECT_TRUE(c->status);
    EXPECT_EQ(c->severity, e.severity);
    EXPECT_EQ(c->action, e.action);
    EXPECT_EQ(c->last_transition_ms, kSec);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, XidRow, ::testing::ValuesIn(ExpectedXids()),
                         [](const auto& info) { return "Xid" + std::to_string(info.param.code); });

TEST(Xid, TableHasExactlyTheExpectedRows) {
  std::set<int> expected, actual;
  for (const ExpectedXid& e : ExpectedXids()) expected.insert(e.code);
  for (const XidInfo& r : XidTable()) actual.insert(r.code);
  EXPECT_EQ(actual, expected);
  EXPECT_TRUE(std::is_sorted(XidTable().begin(), XidTable().end(),
                             [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; }));
}

TEST(Xid, UnknownCodeIsAWarning) {
  const XidInfo info = LookupXid(999);
  EXPECT_FALSE(info.known);
  EXPECT_EQ(info.severity, Severity::kWarning);
  EXPECT_FALSE(info.fails_gpu);
  EXPECT_NE(info.meaning.find("999"), std::string::npos);
}

TEST(Xid, EscalationLadder) {
  EXPECT_EQ(Escalate(Action::kRestartApp), Action::kResetGpu);
  EXPECT_EQ(Escalate(Action::kResetGpu), Action::kRebootNode);
  EXPECT_EQ(Escalate(Action::kRebootNode), Action::kRepair);
  EXPECT_EQ(Escalate(Action::kRepair), Action::kRepair);
  EXPECT_STREQ(ActionName(Action::kResetGpu), "COMPONENT_RESET");
  EXPECT_STREQ(ActionName(Action::kRebootNode), "RESTART_BM");
}

// ---------------------------------------------------------------------------------------------
// Conditions

TEST(Conditions, UnknownXidBecomesFatalWhenItRepeatsInTheWindow) {
  HealthConfig cfg;
  cfg.repeat_fatal_count = 3;
  cfg.repeat_window_ms = 10 * kMin;
  NodeHealth h(8, cfg, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h.ObserveXid(1, 777, i * kMin).severity, Severity::kWarning);
  }
  EXPECT_FALSE(h.DeviceFatal(1));
  const XidInfo fourth = h.ObserveXid(1, 777, 3 * kMin);
  EXPECT_EQ(fourth.severity, Severity::kFatal);
  EXPECT_EQ(fourth.action, Action::kResetGpu);
  EXPECT_TRUE(h.DeviceFatal(1));
  EXPECT_FALSE(h.DeviceFatal(0));
}

TEST(Conditions, RepeatsOutsideTheWindowStayWarnings) {
  HealthConfig cfg;
  cfg.repeat_fatal_count = 3;
  cfg.repeat_window_ms = 10 * kMin;
  cfg.warning_quiet_ms = 100 * kHour;
  NodeHealth h(8, cfg, 0);
  for (int i = 0; i < 10; ++i) h.ObserveXid(1, 777, i * 11 * kMin);
  EXPECT_FALSE(h.DeviceFatal(1));
  EXPECT_EQ(h.Find("Xid777", 1)->count, 10);
}

TEST(Conditions, HeartbeatIsALevelSignal) {
  HealthConfig cfg;
  cfg.heartbeat_timeout_ms = 40 * kSec;
  NodeHealth h(8, cfg, 0);
  h.Evaluate(40 * kSec);
  EXPECT_TRUE(h.ready());
  h.Evaluate(41 * kSec);
  EXPECT_FALSE(h.ready());
  EXPECT_EQ(h.Find(kReady, -1)->reason, "HeartbeatTimeout");
  EXPECT_EQ(h.Find(kReady, -1)->last_transition_ms, 41 * kSec);
  EXPECT_TRUE(h.NodeLevelFault());
  EXPECT_EQ(h.NodeAction(), Action::kRebootNode);
  h.ObserveHeartbeat(50 * kSec);
  EXPECT_TRUE(h.ready());
  EXPECT_EQ(h.Find(kReady, -1)->last_transition_ms, 50 * kSec);
  EXPECT_FALSE(h.NodeLevelFault());
  // A heartbeat whose lease the node declares longer holds that long (an agent that renews
  // every minute with a 10-minute lease is not dead after 40 s); a shorter one changes nothing.
  h.ObserveHeartbeat(100 * kSec, 600 * kSec);
  h.Evaluate(699 * kSec);
  EXPECT_TRUE(h.ready());
  h.Evaluate(701 * kSec);
  EXPECT_FALSE(h.ready());
  EXPECT_NE(h.Find(kReady, -1)->message.find("timeout 600s, the node's lease"), std::string::npos)
      << h.Find(kReady, -1)->message;
  h.ObserveHeartbeat(800 * kSec, 10 * kSec);
  h.Evaluate(839 * kSec);
  EXPECT_TRUE(h.ready());
  h.Evaluate(841 * kSec);
  EXPECT_FALSE(h.ready());
}

TEST(Conditions, LevelSignalsClearWhenTheSignalClears) {
  NodeHealth h(8, HealthConfig{}, 0);
  DeviceSample bad;
  bad.ecc_dbe_volatile = 2;
  bad.row_remap_pending = true;
  bad.temperature_c = 97;
  bad.power_w = 800;
  bad.power_limit_w = 700;
  h.ObserveSample(3, bad, kSec);
  EXPECT_TRUE(h.Find(kEccDoubleBit, 3)->status);
  EXPECT_TRUE(h.Find(kRowRemapPending, 3)->status);
  EXPECT_EQ(h.Find(kTemperature, 3)->severity, Severity::kFatal);
  EXPECT_TRUE(h.Find(kPower, 3)->status);
  EXPECT_TRUE(h.DeviceFatal(3));

  DeviceSample good;
  good.ecc_dbe_volatile = 0;
  good.row_remap_pending = false;
  good.temperature_c = 60;
  good.power_w = 500;
  good.power_limit_w = 700;
  h.ObserveSample(3, good, 2 * kSec);
  for (const char* type : {kEccDoubleBit, kRowRemapPending, kTemperature, kPower}) {
    EXPECT_FALSE(h.Find(type, 3)->status) << type;
    EXPECT_EQ(h.Find(type, 3)->last_transition_ms, 2 * kSec) << type;
  }
  EXPECT_FALSE(h.DeviceFatal(3));
}

TEST(Conditions, UnreportedFieldsChangeNothing) {
  NodeHealth h(8, HealthConfig{}, 0);
  DeviceSample bad;
  bad.ecc_dbe_volatile = 1;
  h.ObserveSample(0, bad, kSec);
  h.ObserveSample(0, DeviceSample{}, 2 * kSec);
  EXPECT_TRUE(h.Find(kEccDoubleBit, 0)->status);
}

TEST(Conditions, RowRemapFailureAsksForRepair) {
  NodeHealth h(8, HealthConfig{}, 0);
  h.ObserveXid(4, 64, kSec);
  EXPECT_EQ(h.DeviceAction(4, Severity::kFatal), Action::kResetGpu);
  EXPECT_FALSE(h.NodeLevelFault());
  DeviceSample s;
  s.row_remap_failure = true;
  h.ObserveSample(4, s, 2 * kSec);
  EXPECT_EQ(h.DeviceAction(4, Severity::kFatal), Action::kRepair);
  EXPECT_TRUE(h.NodeLevelFault());  // an RMA takes the node down
}

TEST(Conditions, TemperatureWarningThenCritical) {
  NodeHealth h(8, HealthConfig{}, 0);
  DeviceSample s;
  s.temperature_c = 88;
  h.ObserveSample(0, s, kSec);
  EXPECT_EQ(h.Find(kTemperature, 0)->severity, Severity::kWarning);
  EXPECT_FALSE(h.DeviceFatal(0));
  s.temperature_c = 96;
  h.ObserveSample(0, s, 2 * kSec);
  EXPECT_TRUE(h.DeviceFatal(0));
  EXPECT_EQ(h.Find(kTemperature, 0)->last_transition_ms, kSec);  // status did not change
}

TEST(Conditions, FatalEventClearsOnlyAfterRemediationAndBurnIn) {
  HealthConfig cfg;
  cfg.warning_quiet_ms = kHour;
  NodeHealth h(8, cfg, 0);
  h.ObserveXid(5, 48, 10 * kSec);
  h.ObserveHeartbeat(100 * kHour);
  h.Evaluate(100 * kHour);  // no quiet window for fatal events
  EXPECT_TRUE(h.Find("Xid48", 5)->status);
  // A remediation that started before the event was last seen did not fix it.
  h.ClearAfterRemediation(5, 5 * kSec, 100 * kHour);
  EXPECT_TRUE(h.Find("Xid48", 5)->status);
  // Another GPU's remediation leaves it alone.
  h.ClearAfterRemediation(4, 20 * kSec, 100 * kHour);
  EXPECT_TRUE(h.Find("Xid48", 5)->status);
  h.ClearAfterRemediation(5, 20 * kSec, 100 * kHour + 1);
  EXPECT_FALSE(h.Find("Xid48", 5)->status);
  EXPECT_EQ(h.Find("Xid48", 5)->reason, "Remediated");
  EXPECT_EQ(h.Find("Xid48", 5)->last_transition_ms, 100 * kHour + 1);
}

TEST(Conditions, WarningEventClearsAfterTheQuietWindow) {
  HealthConfig cfg;
  cfg.warning_quiet_ms = kHour;
  NodeHealth h(8, cfg, 0);
  h.ObserveXid(1, 94, 0);
  h.ObserveXid(1, 94, 30 * kMin);  // resets the quiet window
  h.ObserveHeartbeat(kHour + 29 * kMin);
  h.Evaluate(kHour + 29 * kMin);
  EXPECT_TRUE(h.Find("Xid94", 1)->status);
  h.ObserveHeartbeat(kHour + 30 * kMin);
  h.Evaluate(kHour + 30 * kMin);
  EXPECT_FALSE(h.Find("Xid94", 1)->status);
  EXPECT_EQ(h.Find("Xid94", 1)->reason, "QuietWindowPassed");
}

TEST(Conditions, ApplicationXidsRaiseNoConditionButAreRecorded) {
  NodeHealth h(8, HealthConfig{}, 0);
  for (int code : {13, 31, 43, 45, 68}) h.ObserveXid(0, code, kSec);
  EXPECT_EQ(h.events().size(), 5u);
  for (const Condition& c : h.conditions()) EXPECT_FALSE(c.problem()) << c.type;
  EXPECT_EQ(h.Summary(), "healthy");
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

// The legal edges, written out here independently of lifecycle.cc.
const std::set<std::pair<std::string, std::string>>& LegalNodeEdges() {
  static const std::set<std::pair<std::string, std::string>> k = {
      {"enroll", "inspecting"},
      {"enroll", "retired"},
      {"inspecting", "burn-in"},
      {"inspecting", "inspect failed"},
      {"inspect failed", "inspecting"},
      {"inspect failed", "retired"},
      {"burn-in", "available"},
      {"burn-in", "repair"},
      {"available", "cordoned"},
      {"available", "retired"},
      {"cordoned", "draining"},
      {"cordoned", "available"},
      {"cordoned", "retired"},
      {"draining", "repair"},
      {"repair", "burn-in"},
      {"repair", "inspecting"},
      {"repair", "retired"},
  };
  return k;
}

TEST(Lifecycle, EveryNodeTransitionLegalOrIllegal) {
  int legal = 0;
  for (int f = 0; f < kNodeStateCount; ++f) {
    for (int t = 0; t < kNodeStateCount; ++t) {
      const auto from = static_cast<NodeState>(f);
      const auto to = static_cast<NodeState>(t);
      const bool expected = LegalNodeEdges().count({NodeStateName(from), NodeStateName(to)}) > 0;
      EXPECT_EQ(IsLegalTransition(from, to), expected)
          << NodeStateName(from) << " -> " << NodeStateName(to);
      Lifecycle life(NodeId("n1"), 8, from, "test start", 0);
      const Status st = life.Transition(to, "because", 5 * kSec);
      if (expected) {
        ++legal;
        ASSERT_TRUE(st.ok()) << st.ToString();
        EXPECT_EQ(life.state(), to);
        EXPECT_EQ(life.state_since_ms(), 5 * kSec);
        ASSERT_EQ(life.history().size(), 2u);
        const TransitionRecord& rec = life.history().back();
        EXPECT_EQ(rec.from, NodeStateName(from));
        EXPECT_EQ(rec.to, NodeStateName(to));
        EXPECT_EQ(rec.reason, "because");
        EXPECT_EQ(rec.at_ms, 5 * kSec);
      } else {
        EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
        EXPECT_NE(st.message().find(std::string("from ") + NodeStateName(from) + " to " +
                                    NodeStateName(to)),
                  std::string::npos)
            << st.message();
        EXPECT_EQ(life.state(), from);
        EXPECT_EQ(life.history().size(), 1u);
      }
    }
  }
  EXPECT_EQ(legal, static_cast<int>(LegalNodeEdges().size()));
}

TEST(Lifecycle, EveryGpuTransitionLegalOrIllegal) {
  const std::set<std::pair<std::string, std::string>> edges = {
      {"in-service", "cordoned"}, {"cordoned", "draining"},  {"cordoned", "in-service"},
      {"draining", "repair"},     {"draining", "cordoned"},  {"repair", "burn-in"},
      {"repair", "cordoned"},     {"burn-in", "in-service"}, {"burn-in", "repair"},
      {"burn-in", "cordoned"},
  };
  // Walk each GPU state in on a legal path, then try every target.
  const std::map<GpuState, std::vector<GpuState>> path = {
      {GpuState::kInService, {}},
      {GpuState::kCordoned, {GpuState::kCordoned}},
      {GpuState::kDraining, {GpuState::kCordoned, GpuState::kDraining}},
      {GpuState::kRepair, {GpuState::kCordoned, GpuState::kDraining, GpuState::kRepair}},
      {GpuState::kBurnIn,
       {GpuState::kCordoned, GpuState::kDraining, GpuState::kRepair, GpuState::kBurnIn}},
  };
  for (const auto& [from, steps] : path) {
    for (int t = 0; t < kGpuStateCount; ++t) {
      const auto to = static_cast<GpuState>(t);
      Lifecycle life(NodeId("n1"), 8, NodeState::kAvailable, "start", 0);
      for (GpuState s : steps) ASSERT_TRUE(life.TransitionGpu(3, s, "walk", 0).ok());
      const bool expected = edges.count({GpuStateName(from), GpuStateName(to)}) > 0;
      EXPECT_EQ(IsLegalGpuTransition(from, to), expected);
      const Status st = life.TransitionGpu(3, to, "try", kSec);
      EXPECT_EQ(st.ok(), expected) << GpuStateName(from) << " -> " << GpuStateName(to);
      EXPECT_EQ(life.gpu_state(3), expected ? to : from);
      if (!expected) {
        EXPECT_NE(st.message().find(std::string("from ") + GpuStateName(from) + " to " +
                                    GpuStateName(to)),
                  std::string::npos);
      }
      // Only GPU 3 moved.
      EXPECT_EQ(life.gpu_state(2), GpuState::kInService);
    }
  }
}

TEST(Lifecycle, PerGpuCordonLeavesTheRestSchedulable) {
  Lifecycle life(NodeId("n1"), 8, NodeState::kAvailable, "start", 0);
  ASSERT_TRUE(life.TransitionGpu(6, GpuState::kCordoned, "xid 48", kSec).ok());
  EXPECT_TRUE(life.Schedulable());
  EXPECT_FALSE(life.GpuSchedulable(6));
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(life.GpuSchedulable(d), d != 6) << d;
  }
  ASSERT_TRUE(life.Transition(NodeState::kCordoned, "node fault", 2 * kSec).ok());
  for (int d = 0; d < 8; ++d) EXPECT_FALSE(life.GpuSchedulable(d)) << d;
}

TEST(Lifecycle, RejectsEmptyReasonAndBadGpu) {
  Lifecycle life(NodeId("n1"), 8, NodeState::kAvailable, "start", 0);
  EXPECT_EQ(life.Transition(NodeState::kCordoned, "", 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(life.TransitionGpu(8, GpuState::kCordoned, "x", 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(life.state(), NodeState::kAvailable);
}

TEST(Lifecycle, StateNamesRoundTrip) {
  for (int i = 0; i < kNodeStateCount; ++i) {
    const auto s = static_cast<NodeState>(i);
    auto parsed = ParseNodeState(NodeStateName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(NodeStateName(NodeState::kInspectFailed), "inspect failed");
  ExpectInvalid(ParseNodeState("active").status(), "unknown node state 'active'");
}

// ---------------------------------------------------------------------------------------------
// Inspection

TEST(Inspection, MatchingInventoryHasNoDifferences) {
  EXPECT_TRUE(CompareInventory(HgxNode("n1"), HgxNode("n1")).empty());
}

TEST(Inspection, MismatchListsEveryDifference) {
  const Node expected = HgxNode("n1");
  Node found = HgxNode("n1");
  found.devices.pop_back();                      // a GPU missing
  found.devices[1].model = "H200";               // wrong model
  found.devices[2].memory = MemoryMib(81559);    // memory short
  found.devices[3].ecc_enabled = false;          // ECC off
  found.devices[4].nvlink_peers = {0, 1, 2, 3};  // links down
  found.nics[0].gbps = 200;                      // slow NIC
  found.nics.pop_back();                         // NIC missing
  const std::vector<std::string> diffs = CompareInventory(expected, found);
  const std::vector<std::string> want = {
      "GPU count 7, expected 8",
      "GPU 1: model H200, expected H100",
      "GPU 2: memory 81559 MiB, expected 81920 MiB",
      "GPU 3: ECC disabled, expected enabled",
      "GPU 4: NVLink peers [0,1,2,3], expected [0,1,2,3,5,6,7]",
      "GPU 7: missing (expected H100)",
      "NIC count 7, expected 8",
      "NIC mlx5_0: 200 Gb/s, expected 400 Gb/s",
      "NIC mlx5_7: missing",
  };
  EXPECT_EQ(diffs, want);
}

TEST(Inspection, ParsesAnInventoryReport) {
  auto node = ParseInventoryReport(Fixture("inventory_n1.json"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->name.str(), "n1");
  EXPECT_TRUE(CompareInventory(HgxNode("n1"), *node).empty())
      << CompareInventory(HgxNode("n1"), *node).front();
}

TEST(Inspection, MalformedReportsNameTheProblem) {
  ExpectInvalid(ParseInventoryReport("{").status(), "not valid JSON");
  ExpectInvalid(ParseInventoryReport(R"({"node":"n1","gpus":[],"extra":1})").status(),
                "inventory.extra: unknown field");
  ExpectInvalid(ParseInventoryReport(R"({"node":"n1"})").status(), "inventory.gpus");
  ExpectInvalid(
      ParseInventoryReport(R"({"node":"n1","gpus":[{"uuid":"u","model":"H100","memoryMiB":"80"}]})")
          .status(),
      "inventory.gpus[0].memoryMiB: expected an integer");
  ExpectInvalid(
      ParseInventoryReport(R"({"node":"n1","gpus":[{"uuid":"u","model":"H100","memoryMiB":1,)"
                           R"("nvlinkPeers":[0]}]})")
          .status(),
      "inventory.gpus[0].nvlinkPeers[0]: 0 is not another GPU");
  ExpectInvalid(
      ParseInventoryReport(R"({"node":"n1","gpus":[],"nics":[{"name":"m","gbps":0}]})").status(),
      "inventory.nics[0].gbps: 0 is below 1");
}

// ---------------------------------------------------------------------------------------------
// Burn-in parsers

TEST(BurnIn, ParsesAPassingDcgmDiag) {
  auto report = ParseDcgmDiagJson(Fixture("dcgm_diag_r3_pass.json"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->results.size(), 15u * 8u);  // 15 tests x 8 GPUs
  const BurnInResult r = JudgeBurnIn(HgxNode("n1"), &*report, nullptr);
  EXPECT_TRUE(r.passed) << r.summary;
}

TEST(BurnIn, DcgmFailureNamesTheGpuAndTest) {
  auto report = ParseDcgmDiagJson(Fixture("dcgm_diag_r3_fail_gpu5.json"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const BurnInResult r = JudgeBurnIn(HgxNode("n1"), &*report, nullptr);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.failed_gpus, std::vector<int>{5});
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0],
            "dcgmi diag Hardware/GPU Memory failed on GPU 5: Memory test found 2 double-bit ECC "
            "errors on GPU 5");
}

TEST(BurnIn, DcgmNewerLayoutWithEntityIds) {
  const char* text = R"({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware",
      "tests": [{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 0,
      "status": "Pass"}, {"entity_group": "GPU", "entity_id": 1, "status": "Fail",
      "warnings": ["bad page"]}]}]}]}})";
  auto report = ParseDcgmDiagJson(text);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->results.size(), 2u);
  EXPECT_EQ(report->results[1].gpu, 1);
  EXPECT_EQ(report->results[1].warning, "bad page");
}

TEST(BurnIn, MalformedDcgmReports) {
  ExpectInvalid(ParseDcgmDiagJson("not json").status(), "not valid JSON");
  ExpectInvalid(ParseDcgmDiagJson("{}").status(), "no \"DCGM GPU Diagnostic\"");
  ExpectInvalid(ParseDcgmDiagJson(R"({"DCGM GPU Diagnostic": {"test_categories": []}})").status(),
                "test_categories: expected a non-empty list");
  ExpectInvalid(ParseDcgmDiagJson(R"({"DCGM GPU Diagnostic": {"test_categories": [
                    {"category": "Hardware", "tests": [{"name": "Memory", "results": [
                    {"gpu_id": "0", "status": "Maybe"}]}]}]}})")
                    .status(),
                "test_categories[0].tests[0].results[0].status: 'Maybe'");
  ExpectInvalid(ParseDcgmDiagJson(R"({"DCGM GPU Diagnostic": {"test_categories": [
                    {"category": "Hardware", "tests": [{"name": "Memory", "results": [
                    {"gpu_id": "x", "status": "Pass"}]}]}]}})")
                    .status(),
                "results[0].gpu_id: expected a GPU index");
  ExpectInvalid(ParseDcgmDiagJson(R"({"DCGM GPU Diagnostic": {"test_categories": [
                    {"tests": []}]}})")
                    .status(),
                "test_categories[0].category: missing");
}

TEST(BurnIn, ParsesAHealthyAllReduce) {
  auto report = ParseNcclAllReduce(Fixture("nccl_all_reduce_8xh100.txt"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->rows.size(), 31u);  // 8 B .. 8 GiB, doubling
  EXPECT_EQ(report->rows.front().bytes, 8);
  EXPECT_EQ(report->rows.back().bytes, int64_t{8589934592});
  EXPECT_EQ(report->rows.back().count, int64_t{2147483648});
  EXPECT_EQ(report->rows.back().type, "float");
  EXPECT_NEAR(report->rows.back().out_busbw_gbps, 481.26, 1e-9);
  EXPECT_NEAR(report->rows.back().in_busbw_gbps, 486.13, 1e-9);
  EXPECT_NEAR(report->avg_busbw_gbps, 103.8305, 1e-9);
  EXPECT_TRUE(report->out_of_bounds_ok);
  EXPECT_NEAR(report->peak_busbw_gbps(), 486.13, 1e-9);
  auto dcgm = ParseDcgmDiagJson(Fixture("dcgm_diag_r3_pass.json"));
  ASSERT_TRUE(dcgm.ok());
  const BurnInResult r = JudgeBurnIn(HgxNode("n1"), &*dcgm, &*report);
  EXPECT_TRUE(r.passed) << r.summary;
}

TEST(BurnIn, DegradedAllReduceFailsOnBandwidthAndWrongValues) {
  auto report = ParseNcclAllReduce(Fixture("nccl_all_reduce_8xh100_degraded.txt"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const BurnInResult r = JudgeBurnIn(HgxNode("n1"), nullptr, &*report);
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_EQ(r.failures[0], "all_reduce_perf: 3 wrong values");
  EXPECT_NE(r.failures[1].find("bus bandwidth 264.43 GB/s at the largest size, expected 370-480"),
            std::string::npos)
      << r.failures[1];
}

TEST(BurnIn, BandwidthIsNotJudgedWithoutAFigureForTheNodeType) {
  auto report = ParseNcclAllReduce(Fixture("nccl_all_reduce_8xh100_degraded.txt"));
  ASSERT_TRUE(report.ok());
  for (NcclSizeRow& row : report->rows) row.out_wrong = 0;
  Node gb = HgxNode("g1");
  gb.devices.resize(4);
  for (Device& d : gb.devices) d.model = "GB200";
  EXPECT_TRUE(JudgeBurnIn(gb, nullptr, &*report).passed);
  EXPECT_FALSE(ExpectedAllReduceBusBw("GB200", 4).has_value());
  EXPECT_TRUE(ExpectedAllReduceBusBw("H200", 8).has_value());
}

TEST(BurnIn, AllReduceWithoutRootColumnAndUncheckedValues) {
  const char* text =
      "#       size         count      type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "  1073741824     268435456     float     sum   4000.0  268.44  469.77    N/A   3990.0  "
      "269.11  470.95    N/A\n"
      "# Avg bus bandwidth    : 470.36\n";
  auto report = ParseNcclAllReduce(text);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->rows[0].out_wrong, -1);
  EXPECT_TRUE(JudgeBurnIn(HgxNode("n1"), nullptr, &*report).passed);
}

TEST(BurnIn, MalformedAllReduceOutputs) {
  ExpectInvalid(ParseNcclAllReduce("# nothing here\n").status(), "no result rows");
  ExpectInvalid(ParseNcclAllReduce("8 2 float sum -1 35.1 0.00 0.00 0 34.2 0.00 0.00 0\n").status(),
                "no 'Avg bus bandwidth' line");
  ExpectInvalid(
      ParseNcclAllReduce("8 2 float sum -1 35.1 0.00 0.00 0 34.2 0.00\n# Avg bus bandwidth : 1\n")
          .status(),
      "line 1: expected 12 or 13 columns, found 11");
  ExpectInvalid(ParseNcclAllReduce("# header\n8 2 float sum -1 35.1 fast 0.00 0 34.2 0.00 0.00 0\n"
                                   "# Avg bus bandwidth : 1\n")
                    .status(),
                "line 2: column algbw: 'fast' is not a number");
  ExpectInvalid(ParseNcclAllReduce("8 2 float sum -1 35.1 0.00 0.00 0 34.2 0.00 0.00 0\n"
                                   "# Avg bus bandwidth : lots\n")
                    .status(),
                "bad average bus bandwidth 'lots'");
  ExpectInvalid(ParseNcclAllReduce("8 2 float sum -1 35.1 0.00 0.00 0 34.2 0.00 0.00 0\n"
                                   "# Out of bounds values : 3 MAYBE\n# Avg bus bandwidth : 1\n")
                    .status(),
                "Out of bounds values");
}

TEST(BurnIn, SimulatedBurnIn) {
  EXPECT_TRUE(SimulatedBurnIn(HgxNode("n1"), {}).passed);
  const BurnInResult bad = SimulatedBurnIn(HgxNode("n1"), {2, 6});
  EXPECT_FALSE(bad.passed);
  EXPECT_EQ(bad.failed_gpus, (std::vector<int>{2, 6}));
}

// ---------------------------------------------------------------------------------------------
// Remediation controller

// Drives a RemediationController over a small fleet, recording the actions it returns.
class Fixture3 {
 public:
  explicit Fixture3(int nodes, RemediationConfig cfg = DefaultConfig()) : ctl(cfg) {
    for (int i = 0; i < nodes; ++i) {
      const Node n = HgxNode("n" + std::to_string(i));
      names.push_back(n.name);
      EXPECT_TRUE(ctl.AddNode(n, NodeState::kAvailable, 0).ok());
    }
  }
  static RemediationConfig DefaultConfig() {
    RemediationConfig cfg;
    cfg.health.heartbeat_timeout_ms = 40 * kSec;
    cfg.min_healthy_pct = 80;
    return cfg;
  }
  // Heartbeats from every node that is alive, then one reconcile.
  // Returns the actions as "kind node[/gpu] [workload]".
  std::vector<std::string> Tick(int64_t now_ms) {
    for (const NodeId& n : names) {
      if (!dead.count(n.str())) {
        EXPECT_TRUE(ctl.ObserveHeartbeat(n, now_ms).ok());
      }
    }
    last = ctl.Reconcile(now_ms, pods);
    return Kinds(last);
  }
  void Bind(const std::string& workload, const std::string& node, std::vector<int> gpus) {
    pods.push_back({WorkloadId(workload), NodeId(node), std::move(gpus)});
  }
  void Unbind(const std::string& workload) {
    pods.erase(std::remove_if(pods.begin(), pods.end(),
                              [&](const BoundPod& p) { return p.workload.str() == workload; }),
               pods.end());
  }
  NodeState State(const std::string& node) const { return ctl.lifecycle(NodeId(node))->state(); }
  GpuState Gpu(const std::string& node, int d) const {
    return ctl.lifecycle(NodeId(node))->gpu_state(d);
  }
  static std::vector<std::string> Kinds(const std::vector<ControllerAction>& actions) {
    std::vector<std::string> out;
    for (const ControllerAction& a : actions) {
      out.push_back(std::string(ActionKindName(a.kind)) + " " + a.node.str() +
                    (a.gpu >= 0 ? "/" + std::to_string(a.gpu) : "") +
                    (a.workload.empty() ? "" : " " + a.workload.str()));
    }
    return out;
  }

  RemediationController ctl;
  std::vector<NodeId> names;
  std::vector<BoundPod> pods;
  std::set<std::string> dead;
  std::vector<ControllerAction> last;
};

using Kinds = std::vector<std::string>;

TEST(Remediation, SingleBadGpuCordonsOnlyThatGpuThroughToService) {
  Fixture3 f(5);
  f.Bind("w-a", "n1", {3});
  f.Bind("w-b", "n1", {0, 1});
  f.Bind("gang", "n1", {4, 5, 6, 7});
  f.Bind("gang", "n2", {0, 1, 2, 3});
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 3, 48, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-gpu n1/3", "evict n1/3 w-a"}));
  EXPECT_EQ(f.State("n1"), NodeState::kAvailable);
  EXPECT_TRUE(f.ctl.Schedulable(NodeId("n1")));
  EXPECT_FALSE(f.ctl.GpuSchedulable(NodeId("n1"), 3));
  EXPECT_TRUE(f.ctl.GpuSchedulable(NodeId("n1"), 2));
  EXPECT_EQ(f.last[1].grace_ms, 30 * kSec);
  // The eviction is asked once, however long the workload takes to leave.
  EXPECT_TRUE(f.Tick(3 * kSec).empty());
  f.Unbind("w-a");
  EXPECT_EQ(f.Tick(40 * kSec), (Kinds{"reset-gpu n1/3"}));
  EXPECT_EQ(f.Gpu("n1", 3), GpuState::kRepair);
  EXPECT_EQ(f.ctl.InRemediation(), 0);  // a GPU repair takes no node slot
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), 3, Action::kResetGpu, true, 50 * kSec).ok());
  EXPECT_EQ(f.Tick(51 * kSec), (Kinds{"burn-in n1/3"}));
  EXPECT_FALSE(f.ctl.GpuSchedulable(NodeId("n1"), 3));  // not before burn-in passes
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), 3, SimulatedBurnIn(HgxNode("n1"), {}), 60 * kSec).ok());
  EXPECT_EQ(f.Tick(61 * kSec), (Kinds{"uncordon-gpu n1/3"}));
  EXPECT_TRUE(f.ctl.GpuSchedulable(NodeId("n1"), 3));
  EXPECT_FALSE(f.ctl.health(NodeId("n1"))->Find("Xid48", 3)->status);
}

TEST(Remediation, TwoBadGpusCordonTheNodeAndDrainGangsWhole) {
  Fixture3 f(5);
  f.Bind("w-a", "n1", {3});
  f.Bind("gang", "n1", {4, 5, 6, 7});
  f.Bind("gang", "n2", {0, 1, 2, 3});
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 3, 48, kSec).ok());
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 5, 95, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-node n1", "evict n1 gang", "evict n1 w-a"}));
  EXPECT_EQ(f.State("n1"), NodeState::kDraining);
  EXPECT_FALSE(f.ctl.Schedulable(NodeId("n1")));
  EXPECT_EQ(f.ctl.InRemediation(), 1);
  f.Unbind("w-a");
  EXPECT_TRUE(f.Tick(10 * kSec).empty());  // the gang is still leaving
  f.Unbind("gang");
  EXPECT_EQ(f.Tick(32 * kSec), (Kinds{"reset-gpu n1/3", "reset-gpu n1/5"}));
  EXPECT_EQ(f.State("n1"), NodeState::kRepair);
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), 3, Action::kResetGpu, true, 40 * kSec).ok());
  EXPECT_EQ(f.State("n1"), NodeState::kRepair);  // waits for GPU 5 too
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), 5, Action::kResetGpu, true, 41 * kSec).ok());
  EXPECT_EQ(f.State("n1"), NodeState::kBurnIn);
  EXPECT_EQ(f.Tick(42 * kSec), (Kinds{"burn-in n1"}));
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), -1, SimulatedBurnIn(HgxNode("n1"), {}), 50 * kSec).ok());
  EXPECT_EQ(f.Tick(51 * kSec), (Kinds{"uncordon-node n1"}));
  EXPECT_EQ(f.State("n1"), NodeState::kAvailable);
  EXPECT_EQ(f.ctl.InRemediation(), 0);
  // Every step is in the history with its reason.
  std::vector<std::string> steps;
  for (const TransitionRecord& t : f.ctl.lifecycle(NodeId("n1"))->history()) {
    if (t.device < 0) steps.push_back(t.to);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"available", "cordoned", "draining", "repair",
                                             "burn-in", "available"}));
}

TEST(Remediation, FallenOffTheBusRebootsTheNode) {
  Fixture3 f(5);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n0"), 2, 79, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-node n0", "reboot-node n0"}));
  EXPECT_EQ(f.ctl.CurrentAction(NodeId("n0")), Action::kRebootNode);
}

// The fault that started a remediation, reported again (late, or a retried report) while the
// node is still being repaired, is from before the fix: burn-in passing returns the node to
// service. The same XID after the repair finished is a new fault, and the node goes back.
TEST(Remediation, AFaultReportedAgainDuringTheRepairDoesNotOutliveIt) {
  Fixture3 f(5);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n0"), 2, 79, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-node n0", "reboot-node n0"}));
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n0"), 2, 79, 3 * kSec).ok());  // the repeat
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n0"), -1, Action::kRebootNode, true, 300 * kSec).ok());
  EXPECT_EQ(f.Tick(301 * kSec), (Kinds{"burn-in n0"}));
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n0"), -1, SimulatedBurnIn(HgxNode("n0"), {}), 900 * kSec).ok());
  EXPECT_EQ(f.State("n0"), NodeState::kAvailable);
  EXPECT_EQ(f.Tick(901 * kSec), (Kinds{"uncordon-node n0"}));

  // Again, but this time the XID comes back during burn-in: the reboot did not fix it.
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n0"), 2, 79, 1000 * kSec).ok());
  EXPECT_EQ(f.Tick(1001 * kSec), (Kinds{"cordon-node n0", "reboot-node n0"}));
  ASSERT_TRUE(
      f.ctl.ReportActionDone(NodeId("n0"), -1, Action::kRebootNode, true, 1300 * kSec).ok());
  EXPECT_EQ(f.Tick(1301 * kSec), (Kinds{"burn-in n0"}));
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n0"), 2, 79, 1400 * kSec).ok());
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n0"), -1, SimulatedBurnIn(HgxNode("n0"), {}), 1900 * kSec).ok());
  EXPECT_EQ(f.State("n0"), NodeState::kRepair);
}

TEST(Remediation, CordonIsNeverHeldBackButDrainingIsLimited) {
  RemediationConfig cfg = Fixture3::DefaultConfig();
  cfg.min_healthy_pct = 80;  // 10 nodes: at most 2 in remediation
  Fixture3 f(10, cfg);
  EXPECT_EQ(f.ctl.RemediationLimit(), 2);
  for (int i = 0; i < 5; ++i) {
    f.Bind("w" + std::to_string(i), "n" + std::to_string(i), {0});
    ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n" + std::to_string(i)), 0, 79, kSec).ok());
  }
  f.Tick(2 * kSec);
  int cordoned = 0, draining = 0;
  for (int i = 0; i < 5; ++i) {
    const NodeState s = f.State("n" + std::to_string(i));
    EXPECT_FALSE(f.ctl.Schedulable(NodeId("n" + std::to_string(i))));
    cordoned += s == NodeState::kCordoned;
    draining += s == NodeState::kDraining;
  }
  EXPECT_EQ(draining, 2);
  EXPECT_EQ(cordoned, 3);
  EXPECT_EQ(f.ctl.InRemediation(), 2);
  // Finishing one remediation frees a slot for the next node.
  f.Unbind("w0");
  f.Unbind("w1");
  f.Tick(3 * kSec);
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n0"), -1, Action::kRebootNode, true, 4 * kSec).ok());
  f.Tick(5 * kSec);
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n0"), -1, SimulatedBurnIn(HgxNode("n0"), {}), 6 * kSec).ok());
  f.Tick(7 * kSec);
  EXPECT_EQ(f.State("n0"), NodeState::kAvailable);
  EXPECT_EQ(f.State("n2"), NodeState::kDraining);
  EXPECT_EQ(f.ctl.InRemediation(), 2);
}

TEST(Remediation, DeadNodeWorkloadsAreEvictedAtOnceEvenWithoutASlot) {
  RemediationConfig cfg = Fixture3::DefaultConfig();
  cfg.min_healthy_pct = 90;  // 5 nodes: 1 slot
  Fixture3 f(5, cfg);
  f.Bind("w1", "n1", {0});
  f.Bind("w2", "n2", {0});
  // n1 takes the only slot.
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 0, 79, 0).ok());
  f.Tick(kSec);
  EXPECT_EQ(f.State("n1"), NodeState::kDraining);
  f.dead.insert("n2");                     // last heard at 1 s
  EXPECT_TRUE(f.Tick(41 * kSec).empty());  // 40 s is not past the timeout
  EXPECT_EQ(f.State("n2"), NodeState::kAvailable);
  EXPECT_EQ(f.Tick(42 * kSec), (Kinds{"cordon-node n2", "evict n2 w2"}));
  EXPECT_EQ(f.State("n2"), NodeState::kCordoned);  // waits for a slot, its work already gone
}

// A node cordoned for a fatal GPU fault that must wait for a remediation slot keeps its work,
// but for what runs on the failed GPU: that is evicted at once (a user-style review saw a gang
// hold a GPU that fell off the bus, and its quota, for minutes).
TEST(Remediation, WorkOnAFailedGpuIsEvictedWhileTheNodeWaitsForASlot) {
  RemediationConfig cfg = Fixture3::DefaultConfig();
  cfg.min_healthy_pct = 90;  // 5 nodes: 1 slot
  Fixture3 f(5, cfg);
  f.Bind("w2", "n2", {0});
  f.Bind("w3", "n2", {1});
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 0, 79, 0).ok());  // n1 takes the only slot
  f.Tick(kSec);
  ASSERT_EQ(f.ctl.InRemediation(), 1);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n2"), 0, 79, 2 * kSec).ok());
  EXPECT_EQ(f.Tick(3 * kSec), (Kinds{"cordon-node n2", "evict n2/0 w2"}));
  EXPECT_EQ(f.State("n2"), NodeState::kCordoned);
  EXPECT_TRUE(f.Tick(4 * kSec).empty());  // w3, on a sound GPU, runs until the drain
}

TEST(Remediation, NodeThatRecoveredWhileWaitingStillPassesBurnIn) {
  RemediationConfig cfg = Fixture3::DefaultConfig();
  cfg.min_healthy_pct = 90;  // 5 nodes: 1 slot
  Fixture3 f(5, cfg);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 0, 79, 0).ok());
  f.dead.insert("n3");
  f.Tick(41 * kSec);
  EXPECT_EQ(f.State("n1"), NodeState::kRepair);
  EXPECT_EQ(f.State("n3"), NodeState::kCordoned);
  f.dead.clear();
  f.Tick(42 * kSec);  // heartbeats are back
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), -1, Action::kRebootNode, true, 43 * kSec).ok());
  f.Tick(44 * kSec);
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), -1, SimulatedBurnIn(HgxNode("n1"), {}), 45 * kSec).ok());
  // n1 is back; n3 takes the slot. Nothing to repair, but burn-in still runs.
  EXPECT_EQ(f.Tick(46 * kSec), (Kinds{"uncordon-node n1", "burn-in n3"}));
  EXPECT_EQ(f.State("n3"), NodeState::kBurnIn);
  EXPECT_FALSE(f.ctl.Schedulable(NodeId("n3")));
  EXPECT_EQ(f.ctl.lifecycle(NodeId("n3"))->history().back().reason.rfind("no repair action", 0),
            0u);
}

TEST(Remediation, EscalatesWhenBurnInFailsAndRetiresWhenRepairDoesNotHold) {
  RemediationConfig cfg = Fixture3::DefaultConfig();
  cfg.max_repair_attempts = 1;
  Fixture3 f(5, cfg);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 0, 79, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-node n1", "reboot-node n1"}));
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), -1, Action::kRebootNode, true, 3 * kSec).ok());
  f.Tick(4 * kSec);
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), -1, SimulatedBurnIn(HgxNode("n1"), {0}), 5 * kSec).ok());
  EXPECT_EQ(f.State("n1"), NodeState::kRepair);
  EXPECT_EQ(f.ctl.CurrentAction(NodeId("n1")), Action::kRepair);
  EXPECT_EQ(f.Tick(6 * kSec), (Kinds{"repair n1"}));
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), -1, Action::kRepair, true, 7 * kSec).ok());
  f.Tick(8 * kSec);
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), -1, SimulatedBurnIn(HgxNode("n1"), {0}), 9 * kSec).ok());
  EXPECT_EQ(f.State("n1"), NodeState::kRetired);
  EXPECT_EQ(f.Tick(10 * kSec), (Kinds{"retire n1"}));
  EXPECT_EQ(f.ctl.InRemediation(), 0);
}

TEST(Remediation, EscalatesWhenAnActionTimesOut) {
  RemediationConfig cfg = Fixture3::DefaultConfig();
  cfg.reset_timeout_ms = 10 * kMin;
  Fixture3 f(5, cfg);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 2, 119, 0).ok());
  EXPECT_EQ(f.Tick(kSec), (Kinds{"cordon-gpu n1/2", "reset-gpu n1/2"}));
  EXPECT_TRUE(f.Tick(10 * kMin + kSec).empty());
  // The reset never came back: a GPU that a reset does not fix takes its node down.
  EXPECT_EQ(f.Tick(10 * kMin + 2 * kSec), (Kinds{}));
  EXPECT_EQ(f.Gpu("n1", 2), GpuState::kCordoned);
  EXPECT_EQ(f.Tick(10 * kMin + 3 * kSec), (Kinds{"cordon-node n1", "reboot-node n1"}));
  EXPECT_EQ(f.State("n1"), NodeState::kRepair);
}

TEST(Remediation, GpuThatAResetDoesNotFixGoesThroughTheNodeAndBack) {
  Fixture3 f(5);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 4, 119, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-gpu n1/4", "reset-gpu n1/4"}));
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), 4, Action::kResetGpu, true, 3 * kSec).ok());
  EXPECT_EQ(f.Tick(4 * kSec), (Kinds{"burn-in n1/4"}));
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), 4, SimulatedBurnIn(HgxNode("n1"), {4}), 5 * kSec).ok());
  EXPECT_EQ(f.Gpu("n1", 4), GpuState::kCordoned);
  EXPECT_EQ(f.Tick(6 * kSec), (Kinds{"cordon-node n1", "reboot-node n1"}));
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), -1, Action::kRebootNode, true, 7 * kSec).ok());
  EXPECT_EQ(f.Tick(8 * kSec), (Kinds{"burn-in n1"}));
  ASSERT_TRUE(
      f.ctl.ReportBurnIn(NodeId("n1"), -1, SimulatedBurnIn(HgxNode("n1"), {}), 9 * kSec).ok());
  // The reboot fixed it: back in service, GPU 4 included, nothing escalated further.
  EXPECT_EQ(f.Tick(10 * kSec), (Kinds{"uncordon-node n1"}));
  EXPECT_EQ(f.State("n1"), NodeState::kAvailable);
  EXPECT_TRUE(f.ctl.GpuSchedulable(NodeId("n1"), 4));
  EXPECT_EQ(f.ctl.InRemediation(), 0);
}

TEST(Remediation, WarningResetWaitsForAnIdleGpu) {
  Fixture3 f(5);
  f.Bind("w", "n1", {2});
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 2, 63, kSec).ok());  // row remap pending
  EXPECT_TRUE(f.Tick(2 * kSec).empty());
  EXPECT_TRUE(f.ctl.GpuSchedulable(NodeId("n1"), 2));
  f.Unbind("w");
  EXPECT_EQ(f.Tick(3 * kSec), (Kinds{"cordon-gpu n1/2", "reset-gpu n1/2"}));
}

TEST(Remediation, ApplicationErrorsRestartTheApplicationOnly) {
  Fixture3 f(5);
  f.Bind("w", "n1", {2});
  f.Bind("other", "n1", {3});
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 2, 94, kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"restart-app n1/2 w"}));
  EXPECT_TRUE(f.ctl.GpuSchedulable(NodeId("n1"), 2));
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 2, 13, 3 * kSec).ok());
  EXPECT_EQ(f.Tick(4 * kSec), (Kinds{"restart-app n1/2 w"}));
  EXPECT_TRUE(f.Tick(5 * kSec).empty());
}

TEST(Remediation, ReportsOutOfTurnChangeNothing) {
  Fixture3 f(5);
  EXPECT_EQ(f.ctl.ReportActionDone(NodeId("n1"), -1, Action::kRebootNode, true, kSec).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.ctl.ReportBurnIn(NodeId("n1"), -1, SimulatedBurnIn(HgxNode("n1"), {}), kSec).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.ctl.ReportInspection(NodeId("n1"), HgxNode("n1"), kSec).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.ctl.ObserveXid(NodeId("nope"), 0, 48, kSec).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.ctl.ObserveXid(NodeId("n1"), 8, 48, kSec).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.ctl.lifecycle(NodeId("n1"))->history().size(), 1u);
}

TEST(Remediation, ManualCordonAndUncordon) {
  Fixture3 f(5);
  ASSERT_TRUE(f.ctl.Cordon(NodeId("n1"), "maintenance", kSec).ok());
  EXPECT_EQ(f.Tick(2 * kSec), (Kinds{"cordon-node n1"}));
  EXPECT_EQ(f.State("n1"), NodeState::kCordoned);  // no drain for a manual cordon
  ASSERT_TRUE(f.ctl.Uncordon(NodeId("n1"), "done", 3 * kSec).ok());
  EXPECT_EQ(f.State("n1"), NodeState::kAvailable);
  // A node cordoned for a fault cannot be uncordoned by hand.
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n2"), 0, 79, 4 * kSec).ok());
  ASSERT_TRUE(f.ctl.Cordon(NodeId("n3"), "x", 4 * kSec).ok());
  f.Tick(5 * kSec);
  EXPECT_EQ(f.ctl.Uncordon(NodeId("n2"), "please", 6 * kSec).code(),
            StatusCode::kFailedPrecondition);
}

TEST(Remediation, EnrolmentInspectsThenBurnsIn) {
  RemediationController ctl(Fixture3::DefaultConfig());
  ASSERT_TRUE(ctl.AddNode(HgxNode("new"), NodeState::kEnroll, 0).ok());
  EXPECT_EQ(ctl.AddNode(HgxNode("new"), NodeState::kEnroll, 0).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ctl.AddNode(HgxNode("x"), NodeState::kRepair, 0).code(), StatusCode::kInvalidArgument);
  auto actions = ctl.Reconcile(kSec, std::vector<BoundPod>{});
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, ActionKind::kInspect);
  Node found = HgxNode("new");
  found.devices[0].memory = MemoryMib(40960);
  ASSERT_TRUE(ctl.ReportInspection(NodeId("new"), found, 2 * kSec).ok());
  const Lifecycle& life = *ctl.lifecycle(NodeId("new"));
  EXPECT_EQ(life.state(), NodeState::kInspectFailed);
  EXPECT_EQ(life.history().back().reason,
            "inventory mismatch: GPU 0: memory 40960 MiB, expected 81920 MiB");
  EXPECT_TRUE(ctl.Reconcile(3 * kSec, std::vector<BoundPod>{}).empty());  // held
  ASSERT_TRUE(ctl.Reinspect(NodeId("new"), "GPU 0 replaced", 4 * kSec).ok());
  actions = ctl.Reconcile(5 * kSec, std::vector<BoundPod>{});
  ASSERT_EQ(actions.size(), 1u);
  ASSERT_TRUE(ctl.ReportInspection(NodeId("new"), HgxNode("new"), 6 * kSec).ok());
  actions = ctl.Reconcile(7 * kSec, std::vector<BoundPod>{});
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, ActionKind::kBurnIn);
  ASSERT_TRUE(
      ctl.ReportBurnIn(NodeId("new"), -1, SimulatedBurnIn(HgxNode("new"), {}), 8 * kSec).ok());
  EXPECT_TRUE(ctl.Schedulable(NodeId("new")));
}

// A node out of service when an earlier controller stopped goes on from there (a review found
// every such node re-enrolled: a retired one returned to service, a cordoned one burnt in
// under its running work): retired stays retired; cordoned waits for its slot, drains its
// work, and is burnt in before it serves again.
TEST(Remediation, ANodeOutOfServiceAtAStartGoesOnFromThere) {
  RemediationConfig config = Fixture3::DefaultConfig();
  RemediationController ctl(config);
  ASSERT_TRUE(ctl.AddNode(HgxNode("old"), NodeState::kRetired, 0, "retired before").ok());
  ASSERT_TRUE(ctl.AddNode(HgxNode("busy"), NodeState::kCordoned, 0, "cordoned before").ok());
  EXPECT_EQ(ctl.lifecycle(NodeId("old"))->state(), NodeState::kRetired);
  EXPECT_FALSE(ctl.Schedulable(NodeId("old")));
  EXPECT_FALSE(ctl.Schedulable(NodeId("busy")));
  const std::vector<BoundPod> running = {{WorkloadId("job"), NodeId("busy"), {0, 1}}};
  auto actions = ctl.Reconcile(kSec, running);
  int cordons = 0, evictions = 0, burn_ins = 0;
  for (const auto& a : actions) {
    cordons += a.kind == ActionKind::kCordonNode;
    evictions += a.kind == ActionKind::kEvict && a.workload == WorkloadId("job");
    burn_ins += a.kind == ActionKind::kBurnIn;
  }
  EXPECT_EQ(cordons, 2);    // both cordons said again
  EXPECT_EQ(evictions, 1);  // its work drained first
  EXPECT_EQ(burn_ins, 0);   // not burnt in under it
  EXPECT_EQ(ctl.lifecycle(NodeId("busy"))->state(), NodeState::kDraining);
  actions = ctl.Reconcile(2 * kSec, std::vector<BoundPod>{});
  EXPECT_EQ(ctl.lifecycle(NodeId("busy"))->state(), NodeState::kBurnIn);
  ASSERT_TRUE(
      ctl.ReportBurnIn(NodeId("busy"), -1, SimulatedBurnIn(HgxNode("busy"), {}), 3 * kSec).ok());
  EXPECT_TRUE(ctl.Schedulable(NodeId("busy")));
  EXPECT_EQ(ctl.lifecycle(NodeId("old"))->state(), NodeState::kRetired);
}

TEST(Remediation, MalformedBurnInReportChangesNothing) {
  Fixture3 f(5);
  ASSERT_TRUE(f.ctl.ObserveXid(NodeId("n1"), 0, 79, kSec).ok());
  f.Tick(2 * kSec);
  ASSERT_TRUE(f.ctl.ReportActionDone(NodeId("n1"), -1, Action::kRebootNode, true, 3 * kSec).ok());
  f.Tick(4 * kSec);
  const size_t before = f.ctl.lifecycle(NodeId("n1"))->history().size();
  auto report = ParseNcclAllReduce("garbage\n");
  ASSERT_FALSE(report.ok());
  // The caller has nothing to report; the node stays in burn-in, unchanged.
  EXPECT_EQ(f.State("n1"), NodeState::kBurnIn);
  EXPECT_EQ(f.ctl.lifecycle(NodeId("n1"))->history().size(), before);
}

// ---------------------------------------------------------------------------------------------
// NetBox export

TEST(NetBox, ExportsDevicesTypesModulesAndInterfaces) {
  Fleet fleet;
  fleet.nodes.push_back(HgxNode("n1"));
  Node n2 = HgxNode("n2");
  n2.rack = "rack-1";
  fleet.nodes.push_back(n2);
  std::map<NodeId, std::string> status = {{NodeId("n1"), "available"}, {NodeId("n2"), "repair"}};
  const std::string text = ExportNetbox(fleet, status, "fabrica-site");
  const auto doc = nlohmann::json::parse(text);
  ASSERT_EQ(doc["device_types"]["count"], 1);
  EXPECT_EQ(doc["device_types"]["results"][0]["model"], "H100 8-GPU server");
  ASSERT_EQ(doc["devices"]["count"], 2);
  const auto& d1 = doc["devices"]["results"][0];
  EXPECT_EQ(d1["name"], "n1");
  EXPECT_EQ(d1["status"]["value"], "active");
  EXPECT_EQ(d1["site"]["slug"], "fabrica-site");
  EXPECT_EQ(d1["rack"]["name"], "rack-0");
  EXPECT_EQ(doc["devices"]["results"][1]["status"]["value"], "failed");
  EXPECT_EQ(doc["devices"]["results"][1]["custom_fields"]["fabrica_state"], "repair");
  ASSERT_EQ(doc["modules"]["count"], 16);
  const auto& m = doc["modules"]["results"][0];
  EXPECT_EQ(m["device"]["name"], "n1");
  EXPECT_EQ(m["serial"], "GPU-n1-0");
  EXPECT_EQ(m["module_type"]["model"], "H100");
  EXPECT_EQ(m["module_type"]["attributes"]["memory"], 80);
  ASSERT_EQ(doc["interfaces"]["count"], 16);
  EXPECT_EQ(doc["interfaces"]["results"][0]["name"], "mlx5_0");
  EXPECT_EQ(doc["interfaces"]["results"][0]["speed"], 400000000);
  EXPECT_EQ(doc["interfaces"]["results"][0]["type"]["value"], "400gbase-x-osfp");
}

}  // namespace
}  // namespace fabrica::health
