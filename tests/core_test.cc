// Unit tests for src/core: quantities, Status/Result, typed ids, the fleet and workload YAML.
//
// The YAML texts are inline and start on their first line, so that the line numbers the parser
// reports can be read off the literal.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/fleet.h"
#include "core/ids.h"
#include "core/quantity.h"
#include "core/status.h"
#include "core/workload.h"
#include "known_bug.h"
#include "test_util.h"

namespace fabrica {
namespace {

using test::ExpectInvalid;

// ---------------------------------------------------------------------------------------------
// Quantities

TEST(ParseMilliGpu, AcceptsGpusFractionsAndMilli) {
  struct Case {
    const char* text;
    int64_t milli;
  };
  for (const Case& c :
       {Case{"0.25", 250}, Case{"250m", 250}, Case{"2", 2000}, Case{"0", 0}, Case{"1.5", 1500},
        Case{"0.001", 1}, Case{"1000m", 1000}, Case{".5", 500}}) {
    Result<MilliGpu> r = ParseMilliGpu(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(r->value(), c.milli) << c.text;
  }
}

TEST(ParseMilliGpu, RejectsNegativesExcessPrecisionAndGarbage) {
  ExpectInvalid(ParseMilliGpu("-1"), {"negative", "'-1'"});
  ExpectInvalid(ParseMilliGpu("-250m"), {"negative", "'-250m'"});
  // 0.0001 GPU is a tenth of a milli-GPU: rounding it would silently change the request.
  ExpectInvalid(ParseMilliGpu("0.0001"), {"precision", "'0.0001'"});
  ExpectInvalid(ParseMilliGpu("0.5m"), {"precision"});
  // (How a large JSON number arrives: said so, not only "not a number"; and one past what a
  // quantity holds, however written, is too large — a trial's 99999999999999999999 was told to
  // write the number out.)
  ExpectInvalid(ParseMilliGpu("1e+15"), {"'1e+15'", "exponent notation is not taken"});
  ExpectInvalid(ParseMilliGpu("1e3"), {"write the number out as 1000)"});
  ExpectInvalid(ParseMilliGpu("1.5e+15"), {"write the number out in digits)"});
  ExpectInvalid(ParseMilliGpu("1.5e+15"), {"exponent notation is not taken"});
  ExpectInvalid(ParseMilliGpu("1e+20"), {"GPU quantity too large: '1e+20'"});
  ExpectInvalid(ParseMilliGpu("1e+16"), {"too large"});
  ExpectInvalid(ParseMilliGpu("1e+400"), {"too large"});
  ExpectInvalid(ParseMilliGpu("1e-400"), {"exponent notation is not taken"});
  for (const char* bad : {"abc", "1x", "1.2.3", " 1", "1 ", "m", "", ".", "1e3", "0x10"}) {
    EXPECT_FALSE(ParseMilliGpu(bad).ok()) << "'" << bad << "' was accepted";
  }
}

TEST(ParseMilliCpu, AcceptsCoresAndMilliCores) {
  EXPECT_EQ(ParseMilliCpu("4")->value(), 4000);
  EXPECT_EQ(ParseMilliCpu("0.5")->value(), 500);
  EXPECT_EQ(ParseMilliCpu("500m")->value(), 500);
  EXPECT_EQ(ParseMilliCpu("1.125")->value(), 1125);
  ExpectInvalid(ParseMilliCpu("-4"), {"negative"});
  ExpectInvalid(ParseMilliCpu("1.2345"), {"precision"});
  ExpectInvalid(ParseMilliCpu("four"), {"not a number", "'four'"});
  EXPECT_FALSE(ParseMilliCpu("").ok());
}

TEST(ParseMemoryMib, AcceptsBinarySuffixesAndBareMib) {
  EXPECT_EQ(ParseMemoryMib("80Gi")->value(), 80 * 1024);
  EXPECT_EQ(ParseMemoryMib("512Mi")->value(), 512);
  EXPECT_EQ(ParseMemoryMib("1Ti")->value(), 1024 * 1024);
  EXPECT_EQ(ParseMemoryMib("2048")->value(), 2048);
  EXPECT_EQ(ParseMemoryMib("0")->value(), 0);
  ExpectInvalid(ParseMemoryMib("-1Gi"), {"negative", "'-1Gi'"});  // the unit kept
  // Decimal suffixes are not the binary ones; accepting "80G" as 80Gi would over-count by 7%.
  for (const char* bad : {"80G", "80GB", "Gi", "1.5Gi", "12x", ""}) {
    EXPECT_FALSE(ParseMemoryMib(bad).ok()) << "'" << bad << "' was accepted";
  }
}

TEST(ParseNonNegativeInt, ParsesIntegersOnly) {
  EXPECT_EQ(*ParseNonNegativeInt("0"), 0);
  EXPECT_EQ(*ParseNonNegativeInt("123456"), 123456);
  EXPECT_FALSE(ParseNonNegativeInt("1.5").ok());
  EXPECT_FALSE(ParseNonNegativeInt("-3").ok());
  EXPECT_FALSE(ParseNonNegativeInt("99999999999999999999999").ok());
}

TEST(ParseNonNegativeInt, AcceptsEveryValueThatFitsInt64) {
  Result<int64_t> big = ParseNonNegativeInt("10000000000000");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(*big, int64_t{10000000000000});
  Result<int64_t> max = ParseNonNegativeInt("9223372036854775807");
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  EXPECT_EQ(*max, INT64_MAX);
  EXPECT_FALSE(ParseNonNegativeInt("9223372036854775808").ok());
  EXPECT_FALSE(ParseNonNegativeInt("18446744073709551616").ok());
  // Scaled quantities reach int64's limit exactly too, and no further.
  Result<MilliGpu> max_gpu = ParseMilliGpu("9223372036854775.807");
  ASSERT_TRUE(max_gpu.ok()) << max_gpu.status().ToString();
  EXPECT_EQ(max_gpu->value(), INT64_MAX);
  EXPECT_FALSE(ParseMilliGpu("9223372036854775.808").ok());
  EXPECT_FALSE(ParseMilliGpu("9223372036854776").ok());
}

TEST(Quantity, ArithmeticAndFormatting) {
  MilliGpu a(250), b(1750);
  EXPECT_EQ((a + b).value(), 2000);
  EXPECT_EQ((b - a).value(), 1500);
  EXPECT_EQ((a * 4).value(), 1000);
  EXPECT_TRUE(MilliGpu(0).IsZero());
  EXPECT_TRUE((a - b).IsNegative());
  EXPECT_LT(a, b);
  EXPECT_EQ(FormatMilliGpu(MilliGpu(2000)), "2");
  EXPECT_EQ(FormatMilliGpu(MilliGpu(250)), "250m");
  EXPECT_EQ(FormatMemoryMib(MemoryMib(81920)), "80Gi");
  EXPECT_EQ(FormatMemoryMib(MemoryMib(512)), "512Mi");
  EXPECT_EQ(FormatMemoryMib(MemoryMib(2 * 1024 * 1024)), "2Ti");
  EXPECT_EQ(FormatMemoryMib(MemoryMib(1536 * 1024)), "1536Gi");
  EXPECT_EQ(FormatMemoryMib(MemoryMib(0)), "0Mi");
  EXPECT_EQ(FormatMilliCpu(MilliCpu(4000)), "4");
  EXPECT_EQ(FormatMilliCpu(MilliCpu(500)), "500m");
  // What is formatted parses back to the same amount.
  for (int64_t v : {0, 1, 250, 999, 1000, 7000}) {
    EXPECT_EQ(ParseMilliGpu(FormatMilliGpu(MilliGpu(v)))->value(), v);
  }
}

// ---------------------------------------------------------------------------------------------
// Status, Result and the macros

Status FailIfNegative(int v) {
  if (v < 0) return InvalidArgument("negative: " + std::to_string(v));
  return Status::Ok();
}

Result<int> Half(int v) {
  if (v % 2 != 0) return FailedPrecondition("odd: " + std::to_string(v));
  return v / 2;
}

// Uses both macros, twice each, so that the generated temporaries must not collide.
Result<int> Quarter(int v) {
  RETURN_IF_ERROR(FailIfNegative(v));
  ASSIGN_OR_RETURN(int half, Half(v));
  RETURN_IF_ERROR(FailIfNegative(half));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(Status, CodesNamesAndContext) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.ToString(), "OK");
  Status st = NotFound("no node 'a'");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.ToString(), "NotFound: no node 'a'");
  EXPECT_EQ(st.WithContext("fleet.yaml").message(), "fleet.yaml: no node 'a'");
  EXPECT_EQ(st.WithContext("fleet.yaml").code(), StatusCode::kNotFound);
  // Context on OK must not turn it into an error.
  EXPECT_TRUE(ok.WithContext("x").ok());
  EXPECT_EQ(HttpStatusFor(StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_STREQ(StatusCodeName(StatusCode::kFailedPrecondition), "FailedPrecondition");
}

TEST(Result, HoldsValueOrError) {
  Result<std::string> v = std::string("abc");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(*v, "abc");
  EXPECT_EQ(v->size(), 3u);
  Result<std::string> e = InvalidArgument("bad");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "bad");
  // An OK status carries no value, so a Result built from one must still be an error.
  Result<int> odd = Status::Ok();
  EXPECT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kInternal);
}

TEST(Result, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(12), 3);
  Result<int> neg = Quarter(-4);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(neg.status().message(), "negative: -4");
  Result<int> odd = Quarter(6);  // 6 halves to 3, which is odd
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(odd.status().message(), "odd: 3");
}

TEST(Ids, TypedOrderedAndHashable) {
  NodeId a("a"), b("b");
  EXPECT_LT(a, b);
  EXPECT_EQ(a, NodeId("a"));
  EXPECT_TRUE(NodeId().empty());
  std::unordered_set<NodeId> set = {a, b, NodeId("a")};
  EXPECT_EQ(set.size(), 2u);
  static_assert(!std::is_convertible_v<NodeId, TenantId>, "ids of different kinds must not mix");
  static_assert(!std::is_convertible_v<std::string, NodeId>, "construction must be explicit");
}

// ---------------------------------------------------------------------------------------------
// Fleet YAML

constexpr char kFleetYaml[] = R"(kind: Fleet
apiVersion: fabrica.dev/v1
nodes:
  - name: hgx
    count: 3
    cpu: "64"
    memory: 512Gi
    rack: r1
    leaf: l1
    numaNodes: 2
    labels: {zone: a}
    gpus: {count: 8, model: H100, memory: 80Gi}
    nics:
      - {name: ib0, numa: 0}
      - {name: ib1, numa: 1, leaf: l2, gbps: 200}
  - name: mig
    cpu: 32
    memory: 256Gi
    gpus: {count: 2, model: A100, memory: 40Gi, mig: [3g.20gb, 2g.10gb, 2g.10gb]}
  - name: custom
    cpu: 16
    memory: 64Gi
    nvlinkDomain: rack-7
    devices:
      - {model: V100M32, memory: 32Gi, nvlinkPeers: [1]}
      - {model: V100M32, memory: 32Gi, nvlinkPeers: [0], uuid: GPU-abc, ecc: false}
)";

TEST(FleetYaml, ParsesShorthandReplicationDevicesNicsAndPeers) {
  Result<Fleet> r = ParseFleetYaml(kFleetYaml, "fleet.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Fleet& fleet = *r;
  ASSERT_EQ(fleet.nodes.size(), 5u);
  EXPECT_EQ(fleet.total_gpus(), 3 * 8 + 2 + 2);
  EXPECT_EQ(fleet.Models(), (std::vector<std::string>{"A100", "H100", "V100M32"}));

  // `count: 3` replicates the entry as hgx-0, hgx-1, hgx-2.
  for (int i = 0; i < 3; ++i) {
    const Node& n = fleet.nodes[i];
    EXPECT_EQ(n.name.str(), "hgx-" + std::to_string(i));
    EXPECT_EQ(n.cpu.value(), 64000);
    EXPECT_EQ(n.memory.value(), 512 * 1024);
    EXPECT_EQ(n.rack, "r1");
    EXPECT_EQ(n.leaf, "l1");
    EXPECT_EQ(n.nvlink_domain, n.name.str());  // HGX: the node is its own NVLink domain
    EXPECT_EQ(n.labels.at("zone"), "a");
    EXPECT_EQ(n.gpu_model(), "H100");
    ASSERT_EQ(n.gpu_count(), 8);
  }
  const Node& hgx1 = fleet.nodes[1];
  EXPECT_EQ(hgx1.devices[0].uuid, "GPU-hgx-1-0");
  EXPECT_EQ(hgx1.devices[0].memory.value(), 80 * 1024);
  EXPECT_TRUE(hgx1.devices[0].mig_capable);
  EXPECT_FALSE(hgx1.devices[0].mig_enabled());
  // Eight GPUs over two NUMA nodes: 0..3 on NUMA 0, 4..7 on NUMA 1.
  for (int d = 0; d < 8; ++d) EXPECT_EQ(hgx1.devices[d].numa_node, d < 4 ? 0 : 1) << d;
  // An NVSwitch connects every GPU to all the others.
  EXPECT_EQ(hgx1.devices[3].nvlink_peers, (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));
  ASSERT_EQ(hgx1.nics.size(), 2u);
  EXPECT_EQ(hgx1.nics[0].name, "ib0");
  EXPECT_EQ(hgx1.nics[0].leaf, "l1");  // inherits the node's leaf
  EXPECT_EQ(hgx1.nics[0].gbps, 400);
  EXPECT_EQ(hgx1.nics[1].numa_node, 1);
  EXPECT_EQ(hgx1.nics[1].leaf, "l2");
  EXPECT_EQ(hgx1.nics[1].gbps, 200);

  const Node& mig = fleet.nodes[3];
  EXPECT_EQ(mig.name.str(), "mig");  // a single entry keeps its name
  ASSERT_EQ(mig.gpu_count(), 2);
  EXPECT_TRUE(mig.devices[1].mig_enabled());
  EXPECT_EQ(mig.devices[1].mig_slices, (std::vector<std::string>{"3g.20gb", "2g.10gb", "2g.10gb"}));

  const Node& custom = *fleet.Find(NodeId("custom"));
  EXPECT_EQ(custom.nvlink_domain, "rack-7");
  ASSERT_EQ(custom.gpu_count(), 2);
  EXPECT_EQ(custom.devices[0].uuid, "GPU-custom-0");
  EXPECT_EQ(custom.devices[1].uuid, "GPU-abc");
  EXPECT_EQ(custom.devices[0].nvlink_peers, std::vector<int>{1});
  EXPECT_TRUE(custom.devices[0].ecc_enabled);
  EXPECT_FALSE(custom.devices[1].ecc_enabled);
  EXPECT_FALSE(custom.devices[0].mig_capable);
  EXPECT_EQ(fleet.Find(NodeId("nope")), nullptr);
}

// A one-node fleet whose node entry is `node_body` (lines indented by four spaces). The node
// entry starts on line 2, so a field on the i-th line of `node_body` is on line i + 2.
std::string OneNodeFleet(const std::string& node_body) {
  return "nodes:\n  - name: a\n" + node_body;
}

TEST(FleetYaml, PodLocalityIsTheNumaNodeOfMostGpusAndItsNic) {
  Result<Fleet> r = ParseFleetYaml(kFleetYaml, "fleet.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Node& hgx = r->nodes[0];
  ASSERT_EQ(hgx.devices[0].numa_node, 0);
  ASSERT_EQ(hgx.devices[7].numa_node, 1);
  PodLocality one = LocalityOf(hgx, {0});
  EXPECT_EQ(one.numa, 0);
  EXPECT_EQ(one.nic, "ib0");
  PodLocality far = LocalityOf(hgx, {6, 7}, "l1");
  EXPECT_EQ(far.numa, 1);
  EXPECT_EQ(far.nic, "ib1");  // the only NIC on NUMA 1, though cabled to another leaf
  PodLocality mixed = LocalityOf(hgx, {0, 6, 7});
  EXPECT_EQ(mixed.numa, 1);  // most of its GPUs
  EXPECT_EQ(LocalityOf(hgx, {}).numa, -1);
  ASSERT_EQ(r->nodes[3].name.str(), "mig");
  EXPECT_EQ(LocalityOf(r->nodes[3], {0}).nic, "");  // a node without NICs
}

TEST(FleetYaml, UnknownFieldIsRejectedWithFileLineAndPath) {
  const std::string text = OneNodeFleet(
      "    cpu: 8\n"
      "    memory: 64Gi\n"
      "    gpus: {count: 2, model: H100, modle: H100}\n");
  ExpectInvalid(ParseFleetYaml(text, "fleet.yaml"),
                {"fleet.yaml:5", "nodes[0].gpus.modle", "unknown field"});
  ExpectInvalid(
      ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n    cpus: 8\n"), "f.yaml"),
      {"f.yaml:5", "nodes[0].cpus", "unknown field"});
  // A node entry with a count reads its gpus once per node, but a misspelling there is named
  // once, beside the entry's own.
  const auto unknown =
      ParseFleetYaml(OneNodeFleet("    count: 3\n"
                                  "    cpu: 8\n"
                                  "    memory: 64Gi\n"
                                  "    gpus: {count: 2, model: H100, modle: H100}\n"
                                  "    cpus: 8\n"),
                     "f.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "f.yaml:6: nodes[0].gpus.modle: unknown field (did you mean model?); f.yaml:7: "
            "nodes[0].cpus: unknown field");  // (cpu or gpus: no guess)
  // A misspelling is said before what it leads to (here gpu is "required" as it is misspelt).
  const auto fault = ParseFleetYaml(OneNodeFleet("    cpu: 8\n"
                                                 "    memory: 64Gi\n"
                                                 "    gpus: {count: 2, model: H100}\n"
                                                 "faults:\n"
                                                 "  - {node: a, atSeconds: 6, xid: 79, gpuu: 1}\n"),
                                    "f.yaml");
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().message(),
            "f.yaml:7: faults[0].gpuu: unknown field (did you mean gpu?)");
}

TEST(FleetYaml, MisspeltRequiredFieldIsReportedAsMissing) {
  // With only the misspelt key present, the parser reports the missing `model` first. It still
  // names file, line and path, which is what a user needs to find the typo.
  const std::string text = OneNodeFleet(
      "    cpu: 8\n"
      "    memory: 64Gi\n"
      "    gpus: {count: 2, modle: H100}\n");
  ExpectInvalid(ParseFleetYaml(text, "fleet.yaml"), {"fleet.yaml:5", "nodes[0].gpus.model"});
}

TEST(FleetYaml, NegativeCpuIsRejected) {
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: -4\n    memory: 1Gi\n"), "fleet.yaml"),
                {"fleet.yaml:3", "nodes[0].cpu", "negative"});
}

TEST(FleetYaml, MigGeometryOverSevenSlicesIsRejected) {
  const std::string text = OneNodeFleet(
      "    cpu: 8\n"
      "    memory: 64Gi\n"
      "    gpus: {count: 1, model: A100, mig: [4g.20gb, 4g.20gb]}\n");
  ExpectInvalid(ParseFleetYaml(text, "fleet.yaml"),
                {"fleet.yaml:5", "nodes[0].gpus.mig", "8/7 compute"});
}

TEST(FleetYaml, UnknownMigProfileIsRejected) {
  // 3g.40gb is an H100 profile; an A100 has 3g.20gb.
  const std::string text = OneNodeFleet(
      "    cpu: 8\n"
      "    memory: 64Gi\n"
      "    gpus: {count: 1, model: A100, mig: [3g.40gb]}\n");
  ExpectInvalid(ParseFleetYaml(text, "fleet.yaml"),
                {"fleet.yaml:5", "nodes[0].gpus.mig", "unknown profile '3g.40gb' for A100"});
  const std::string no_mig = OneNodeFleet(
      "    cpu: 8\n"
      "    memory: 64Gi\n"
      "    gpus: {count: 1, model: V100M32, mig: [1g.5gb]}\n");
  ExpectInvalid(ParseFleetYaml(no_mig, "fleet.yaml"), {"nodes[0].gpus.mig", "has no MIG"});
  // The `devices:` form reports the device's own path.
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n"
                                            "    devices: [{model: A100, mig: [7g.80gb]}]\n"),
                               "f.yaml"),
                {"f.yaml:5", "nodes[0].devices[0].mig", "unknown profile '7g.80gb'"});
}

// An A100 of 80 GB has its own profiles (NVIDIA's MIG user guide): those of the 40 GB card are
// refused on it and its own accepted, and its slices hold their own memory (a trial's A100 80GB
// layout was refused, and its 7g.40gb accepted).
TEST(FleetYaml, AnA100Of80GbHasItsOwnMigProfiles) {
  const auto fleet = [](const std::string& gpus) {
    return ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 64Gi\n    gpus: " + gpus + "\n"),
                          "fleet.yaml");
  };
  auto ok =
      fleet("{count: 1, model: A100, memory: 80Gi, mig: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ExpectInvalid(fleet("{count: 1, model: A100, memory: 80Gi, mig: [7g.40gb]}"),
                {"nodes[0].gpus.mig", "unknown profile '7g.40gb' for A100 80GB", "7g.80gb"});
  ExpectInvalid(fleet("{count: 1, model: A100, memory: 40Gi, mig: [3g.40gb]}"),
                {"nodes[0].gpus.mig", "unknown profile '3g.40gb' for A100 40GB", "3g.20gb"});
  const MigProfile* p = FindMigProfile("A100", "3g.40gb", MemoryMib(80 * 1024));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->memory.value(), 40 * 1024);
  EXPECT_EQ(FindMigProfile("A100", "3g.40gb"), nullptr);  // (no memory given: the 40 GB card)
}

TEST(FleetYaml, DuplicateNodeNameIsRejected) {
  const std::string text =
      "nodes:\n"
      "  - {name: a, cpu: 8, memory: 1Gi}\n"
      "  - {name: a, cpu: 8, memory: 1Gi}\n";
  ExpectInvalid(ParseFleetYaml(text, "fleet.yaml"),
                {"fleet.yaml:3", "nodes[1].name", "node a", "duplicate name"});
  // Replication names can collide with a literal name too.
  const std::string replicated =
      "nodes:\n"
      "  - {name: a, count: 2, cpu: 8, memory: 1Gi}\n"
      "  - {name: a-1, cpu: 8, memory: 1Gi}\n";
  ExpectInvalid(ParseFleetYaml(replicated, "fleet.yaml"),
                {"fleet.yaml:3", "node a-1", "duplicate name"});
}

TEST(FleetYaml, ValidationErrorsNameTheLine) {
  const std::string text = OneNodeFleet(
      "    cpu: 8\n"
      "    memory: 64Gi\n"
      "    gpus: {count: 1, model: A100, mig: [4g.20gb, 4g.20gb]}\n");
  ExpectInvalid(ParseFleetYaml(text, "fleet.yaml"), {"fleet.yaml:5", "nodes[0].gpus.mig"});
}

TEST(FleetYaml, NodeWithMoreThan64DevicesIsRejected) {
  std::string devices = "    devices:\n";
  for (int i = 0; i < 65; ++i) devices += "      - {model: H100}\n";
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n" + devices), "f.yaml"),
                {"f.yaml", "64"});
}

// Fleets built in code never pass through the parser, so ValidateFleet must catch everything the
// scheduler relies on, naming node and field.
TEST(ValidateFleet, ChecksFleetsBuiltInCode) {
  auto node = [](const std::string& name, int gpus, const std::string& model) {
    Node n;
    n.name = NodeId(name);
    n.nvlink_domain = name;
    for (int i = 0; i < gpus; ++i) {
      Device d;
      d.model = model;
      d.mig_capable = !MigProfilesFor(model).empty();
      n.devices.push_back(d);
    }
    return n;
  };
  Fleet big;
  big.nodes = {node("big", 65, "H100")};
  Status st = ValidateFleet(big);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node big: devices"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("at most 64"), std::string::npos) << st.message();
  big.nodes = {node("big", 64, "H100")};
  EXPECT_TRUE(ValidateFleet(big).ok());

  Fleet many_models;
  for (int i = 0; i < 65; ++i) {
    many_models.nodes.push_back(node("n" + std::to_string(i), 1, "M" + std::to_string(i)));
  }
  st = ValidateFleet(many_models);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("65 GPU models"), std::string::npos) << st.message();
  many_models.nodes.pop_back();
  EXPECT_TRUE(ValidateFleet(many_models).ok());

  Fleet mig;
  mig.nodes = {node("m", 1, "A100")};
  mig.nodes[0].devices[0].mig_slices = {"4g.20gb", "4g.20gb"};
  st = ValidateFleet(mig);
  EXPECT_NE(st.message().find("node m: devices[0].mig"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("8/7 compute"), std::string::npos) << st.message();
}

TEST(FleetYaml, MalformedYamlNamesFileAndLine) {
  const std::string text =
      "nodes:\n"
      "  - name: a\n"
      "    cpu: [8\n";
  Result<Fleet> r = ParseFleetYaml(text, "broken.yaml");
  ExpectInvalid(r, {"broken.yaml:", "malformed YAML"});
  // A key twice in one mapping (two documents with no "---" between them, say): refused, not
  // the last read.
  ExpectInvalid(ParseFleetYaml("nodes:\n  - name: a\n    gpus: 8\n    gpus: 4\n", "twice.yaml"),
                {"twice.yaml:4: malformed YAML: mapping key \"gpus\" is given twice"});
  ExpectInvalid(ParseFleetYaml("nodes:\n  - name: a\n    ? [gpus]\n    : 8\n", "key.yaml"),
                {"key.yaml:3: malformed YAML: a mapping key must be a plain value"});
}

// Aliases repeat what they name: nested, a few hundred bytes name billions of values (a trial's
// file took every byte of memory). Refused, naming file and line; a shared block repeated a few
// times, as aliases are meant, is read.
TEST(FleetYaml, AliasesThatRepeatPastWhatTheTextCouldHoldAreRefused) {
  std::string bomb = "kind: Fleet\nnodes: []\nx0: &x0 [a, b, c, d, e, f, g, h, i, j]\n";
  for (int k = 1; k < 9; ++k) {
    const std::string prev = "*x" + std::to_string(k - 1);
    bomb += "x" + std::to_string(k) + ": &x" + std::to_string(k) + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", " : "") + prev;
    bomb += "]\n";
  }
  ExpectInvalid(ParseFleetYaml(bomb, "bomb.yaml"),
                {"bomb.yaml:", "malformed YAML: its aliases repeat more values"});
  const std::string shared =
      "nodes:\n"
      "  - {name: a, cpu: 8, memory: 64Gi, gpus: &g {count: 2, model: H100}}\n"
      "  - {name: b, cpu: 8, memory: 64Gi, gpus: *g}\n"
      "  - {name: c, cpu: 8, memory: 64Gi, gpus: *g}\n";
  Result<Fleet> ok = ParseFleetYaml(shared, "shared.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->nodes.size(), 3u);
  EXPECT_EQ(ok->nodes[2].devices.size(), 2u);
}

TEST(FleetYaml, OtherStructuralErrors) {
  ExpectInvalid(ParseFleetYaml("kind: Workload\nnodes: []\n", "f.yaml"),
                {"f.yaml:1", "kind", "expected Fleet"});
  ExpectInvalid(ParseFleetYaml("kind: Fleet\n", "f.yaml"), {"nodes", "expected a list"});
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n"), "f.yaml"),
                {"nodes[0].memory", "required field is missing"});
  ExpectInvalid(
      ParseFleetYaml(
          OneNodeFleet("    cpu: 8\n    memory: 1Gi\n    gpus: {count: 65, model: H100}\n"),
          "f.yaml"),
      {"nodes[0].gpus.count", "at most 64"});
  ExpectInvalid(
      ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n    count: 0\n"), "f.yaml"),
      {"nodes[0].count", "between 1 and 100000"});
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n"
                                            "    gpus: {count: 1, model: H100}\n"
                                            "    devices: [{model: H100}]\n"),
                               "f.yaml"),
                {"nodes[0].devices", "either gpus or devices"});
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n"
                                            "    devices: [{model: H100, numa: 1}]\n"),
                               "f.yaml"),
                {"f.yaml:5", "devices[0].numa", "not below numaNodes 1"});
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n"
                                            "    devices: [{model: H100, nvlinkPeers: [0]}]\n"),
                               "f.yaml"),
                {"f.yaml:5", "devices[0].nvlinkPeers", "bad device index 0"});
  ExpectInvalid(ParseFleetYaml(
                    OneNodeFleet("    cpu: 8\n    memory: 1Gi\n"
                                 "    devices: [{model: H100}, {model: H100, nvlinkPeers: [2]}]\n"),
                    "f.yaml"),
                {"f.yaml:5", "devices[1].nvlinkPeers", "bad device index 2"});
  ExpectInvalid(
      ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n    numaNodes: 0\n"), "f.yaml"),
      {"f.yaml:5", "nodes[0].numaNodes"});
  ExpectInvalid(ParseFleetYaml(OneNodeFleet("    cpu: 8\n    memory: 1Gi\n"
                                            "    devices: [{model: H100}, {model: A100}]\n"),
                               "f.yaml"),
                {"devices[1].model", "one model"});
}

TEST(Mig, ProfilesOfKnownModels) {
  const MigProfile* p = FindMigProfile("H100", "3g.40gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->compute_slices, 3);
  EXPECT_EQ(p->memory_slices, 4);
  EXPECT_EQ(p->memory.value(), 40 * 1024);
  EXPECT_EQ(FindMigProfile("A100", "3g.40gb"), nullptr);
  EXPECT_TRUE(MigProfilesFor("V100M32").empty());
  EXPECT_EQ(MigProfilesFor("H200").size(), 6u);
}

// ---------------------------------------------------------------------------------------------
// Workload YAML

// Parses a single-document workload whose `devices:` mapping is `devices` (flow style).
Result<std::vector<Workload>> WorkloadWithDevices(const std::string& devices) {
  return ParseWorkloadYaml(
      "kind: Workload\n"
      "metadata: {name: w, tenant: acme}\n"
      "spec:\n"
      "  podSets:\n"
      "    - devices: " +
          devices + "\n",
      "w.yaml");
}

TEST(WorkloadYaml, ParsesGangWithRequiredLeafTopology) {
  const char* text = R"(kind: Workload
apiVersion: fabrica.dev/v1
metadata: {name: train, tenant: acme}
spec:
  queue: research
  priority: 5
  gang: true
  topology: {level: leaf, mode: required}
  podSets:
    - name: worker
      count: 4
      cpu: "16"
      memory: 128Gi
      devices: {gpus: 8, models: "H100|H200"}
    - name: driver
      cpu: 500m
      memory: 2Gi
)";
  Result<std::vector<Workload>> r = ParseWorkloadYaml(text, "train.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const Workload& w = r->front();
  EXPECT_EQ(w.name.str(), "train");
  EXPECT_EQ(w.tenant.str(), "acme");
  EXPECT_EQ(w.queue.str(), "research");
  EXPECT_EQ(w.priority, 5);
  EXPECT_TRUE(w.gang);
  EXPECT_EQ(w.topology.level, TopologyLevel::kLeaf);
  EXPECT_TRUE(w.topology.required);
  ASSERT_EQ(w.pod_sets.size(), 2u);
  EXPECT_EQ(w.pod_count(), 5);
  const PodSet& worker = w.pod_sets[0];
  EXPECT_EQ(worker.name, "worker");
  EXPECT_EQ(worker.count, 4);
  EXPECT_EQ(worker.cpu.value(), 16000);
  EXPECT_EQ(worker.memory.value(), 128 * 1024);
  EXPECT_EQ(worker.device.kind, DeviceKind::kWhole);
  EXPECT_EQ(worker.device.gpus, 8);
  EXPECT_EQ(worker.device.models, (std::vector<std::string>{"H100", "H200"}));
  EXPECT_EQ(worker.device.TotalMilli().value(), 8000);
  const PodSet& driver = w.pod_sets[1];
  EXPECT_EQ(driver.name, "driver");
  EXPECT_EQ(driver.count, 1);
  EXPECT_EQ(driver.cpu.value(), 500);
  EXPECT_EQ(driver.device.kind, DeviceKind::kNone);
}

TEST(WorkloadYaml, TopologyDefaultsToPreferred) {
  Result<std::vector<Workload>> r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  topology: {level: nvlink}\n  podSets: [{cpu: 1}]\n", "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->front().topology.level, TopologyLevel::kNvlinkDomain);
  EXPECT_FALSE(r->front().topology.required);
  EXPECT_FALSE(r->front().gang);
  EXPECT_TRUE(r->front().tenant.empty());
}

// spec.nodeSelector and spec.excludeNodes reach every pod set (the excluded names sorted, once
// each); a Node matches by its labels and the well-known ones every node has.
TEST(WorkloadYaml, NodeSelectorAndExcludedNodes) {
  Result<std::vector<Workload>> r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  nodeSelector: {zone: b, fabrica.dev/gpu-model: H100}\n"
      "  excludeNodes: [n9, n2, n9]\n  podSets: [{cpu: 1}, {name: two, cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const PodSet& ps : r->front().pod_sets) {
    EXPECT_EQ(ps.nodes.labels.size(), 2u);
    EXPECT_EQ(ps.nodes.exclude, (std::vector<std::string>{"n2", "n9"}));
  }
  const NodeSelector& sel = r->front().pod_sets[0].nodes;
  EXPECT_EQ(sel.Describe(), "nodeSelector fabrica.dev/gpu-model=H100,zone=b, excludeNodes n2,n9");
  Node node;
  node.name = NodeId("n1");
  node.devices.push_back(Device{});
  node.devices[0].model = "H100";
  EXPECT_FALSE(sel.Matches(node));  // (no zone)
  node.labels["zone"] = "b";
  EXPECT_TRUE(sel.Matches(node));
  node.name = NodeId("n2");
  EXPECT_FALSE(sel.Matches(node));  // (excluded)
  NodeSelector host;
  host.labels[kHostnameLabel] = "n2";
  EXPECT_TRUE(host.Matches(node));
  ExpectInvalid(ParseWorkloadYaml("metadata: {name: w}\nspec:\n  nodeSelector: [zone]\n"
                                  "  podSets: [{cpu: 1}]\n",
                                  "w.yaml"),
                {"spec.nodeSelector"});
  ExpectInvalid(ParseWorkloadYaml("metadata: {name: w}\nspec:\n  excludeNodes: n1\n"
                                  "  podSets: [{cpu: 1}]\n",
                                  "w.yaml"),
                {"spec.excludeNodes"});
}

// Tolerations read as Kubernetes' (Equal and Exists, an empty key with Exists for every taint,
// an effect or all, seconds for NoExecute alone); taints in a fleet entry, one per key and
// effect; a selector matches a node only where its tolerations cover every taint there.
TEST(WorkloadYaml, TolerationsAndTaints) {
  Result<std::vector<Workload>> r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  tolerations:\n"
      "  - {key: dedicated, value: team-b, effect: NoSchedule}\n"
      "  - {key: gpu, operator: Exists, effect: NoExecute, tolerationSeconds: 300}\n"
      "  podSets: [{cpu: 1}, {name: two, cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NodeSelector& sel = r->front().pod_sets[1].nodes;
  ASSERT_EQ(sel.tolerations.size(), 2u);
  EXPECT_TRUE(sel.empty());  // (tolerations alone restrict nothing)
  Result<Fleet> f = ParseFleetYaml(
      "nodes:\n- name: n\n  cpu: 8\n  memory: 8Gi\n  taints:\n"
      "  - {key: dedicated, value: team-b, effect: NoSchedule}\n",
      "f.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Node node = f->nodes[0];
  ASSERT_EQ(node.taints.size(), 1u);
  EXPECT_EQ(node.taints[0].ToString(), "dedicated=team-b:NoSchedule");
  EXPECT_TRUE(sel.Matches(node));
  EXPECT_FALSE(NodeSelector().Matches(node));
  EXPECT_EQ(NodeSelector().Untolerated(node), &node.taints[0]);
  node.taints[0].value = "team-c";  // (Equal: another value is another taint)
  EXPECT_FALSE(sel.Matches(node));
  node.taints[0] = {"gpu", "xid-79", TaintEffect::kNoExecute, ""};
  EXPECT_TRUE(sel.Matches(node));  // (Exists: any value)
  node.taints[0].effect = TaintEffect::kNoSchedule;
  EXPECT_FALSE(sel.Matches(node));  // (its toleration is of NoExecute alone)
  EXPECT_TRUE(Toleration{.exists = true}.Tolerates(node.taints[0]));
  EXPECT_TRUE((Toleration{.key = "gpu", .exists = true}.Tolerates(node.taints[0])));
  EXPECT_EQ(sel.tolerations[1].ToString(), "gpu:NoExecute for 300 s");

  const auto workload = [](const std::string& tolerations) {
    return ParseWorkloadYaml(
        "metadata: {name: w}\nspec:\n  tolerations: [" + tolerations + "]\n  podSets: [{cpu: 1}]\n",
        "w.yaml");
  };
  ExpectInvalid(workload("{key: a, effect: NoSchedule, tolerationSeconds: 5}"),
                {"tolerations[0].tolerationSeconds", "only a NoExecute toleration"});
  ExpectInvalid(workload("{key: a, effect: Sometimes}"),
                {"tolerations[0].effect", "'Sometimes' is not NoSchedule, PreferNoSchedule"});
  // PreferNoSchedule keeps nothing off: it is counted apart.
  Node soft = node;
  soft.taints = {{"spot", "", TaintEffect::kPreferNoSchedule, ""}};
  EXPECT_TRUE(NodeSelector().Matches(soft));
  EXPECT_EQ(NodeSelector().SoftUntolerated(soft), 1);
  EXPECT_EQ(sel.SoftUntolerated(soft), 1);  // (its tolerations are of other keys)
  Result<std::vector<Workload>> prefers = workload("{key: spot, effect: PreferNoSchedule}");
  ASSERT_TRUE(prefers.ok()) << prefers.status().ToString();
  EXPECT_EQ(prefers->front().pod_sets[0].nodes.SoftUntolerated(soft), 0);
  ExpectInvalid(workload("{key: a, operator: Exists, value: b}"),
                {"tolerations[0].value", "must be empty"});
  ExpectInvalid(workload("{operator: Equal, value: b}"), {"tolerations[0].operator"});
  ExpectInvalid(workload("{key: a, operator: In}"), {"tolerations[0].operator", "'In'"});
  ExpectInvalid(workload("{key: 'a b'}"), {"tolerations[0].key", "label key 'a b'"});
  ExpectInvalid(workload("{key: a, value: 'b@d'}"), {"tolerations[0].value", "label value 'b@d'"});
  Result<std::vector<Workload>> forever =
      workload("{key: a, effect: NoExecute, tolerationSeconds: null}");
  ASSERT_TRUE(forever.ok()) << forever.status().ToString();
  EXPECT_EQ(forever->front().pod_sets[0].nodes.tolerations[0].seconds, -1);  // (for good)
  ExpectInvalid(workload("{key: a, efect: NoSchedule}"), {"tolerations[0].efect", "unknown"});
  const auto fleet = [](const std::string& taints) {
    return ParseFleetYaml(
        "nodes:\n- name: n\n  cpu: 8\n  memory: 8Gi\n  taints: [" + taints + "]\n", "f.yaml");
  };
  ExpectInvalid(fleet("{key: a}"), {"taints[0]", "effect"});
  ExpectInvalid(fleet("{key: a, effect: Sometimes}"), {"taints[0].effect", "'Sometimes'"});
  ExpectInvalid(fleet("{key: a, effect: NoSchedule}, {key: a, value: b, effect: NoSchedule}"),
                {"taints[1].key", "a second 'a' taint"});
  EXPECT_TRUE(fleet("{key: a, effect: NoSchedule}, {key: a, effect: NoExecute}").ok());
}

TEST(WorkloadYaml, NodeAffinity) {
  Result<std::vector<Workload>> r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  affinity:\n    nodeAffinity:\n"
      "      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
      "        - matchExpressions:\n"
      "          - {key: zone, operator: In, values: [b, a, a]}\n"
      "          - {key: gpus, operator: Gt, values: ['4']}\n"
      "        - matchFields: [{key: metadata.name, operator: In, values: [spare]}]\n"
      "      preferredDuringSchedulingIgnoredDuringExecution:\n"
      "      - {weight: 30, preference: {matchExpressions: [{key: fast, operator: Exists}]}}\n"
      "      - weight: 5\n        preference:\n"
      "          matchExpressions: [{key: zone, operator: NotIn, values: [a]}]\n"
      "  podSets: [{cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NodeSelector& sel = r->front().pod_sets[0].nodes;
  ASSERT_EQ(sel.required.size(), 2u);
  ASSERT_EQ(sel.preferred.size(), 2u);
  EXPECT_FALSE(sel.empty());
  EXPECT_EQ(sel.Describe(),
            "nodeAffinity (zone In (a,b), gpus Gt 4) or (metadata.name In (spare))");
  Node node;
  node.name = NodeId("n1");
  node.labels = {{"zone", "a"}, {"gpus", "8"}};
  EXPECT_TRUE(sel.Matches(node));
  EXPECT_EQ(sel.Preference(node), 0);
  node.labels["fast"] = "";
  EXPECT_EQ(sel.Preference(node), 30);  // (Exists: any value, the empty one too)
  node.labels["zone"] = "c";
  EXPECT_FALSE(sel.Matches(node));      // (c is not In (a,b))
  EXPECT_EQ(sel.Preference(node), 35);  // (... and NotIn (a))
  node.labels = {{"zone", "b"}, {"gpus", "4"}};
  EXPECT_FALSE(sel.Matches(node));  // (4 is not Gt 4)
  node.labels["gpus"] = "x8";
  EXPECT_FALSE(sel.Matches(node));  // (Gt never matches a label that is no number)
  node.name = NodeId("spare");
  EXPECT_TRUE(sel.Matches(node));  // (the second term: ORed)
  node.labels.clear();
  EXPECT_EQ(sel.Preference(node), 5);  // (NotIn matches a node without the label)
  NodeSelector preferring;
  preferring.preferred = sel.preferred;
  EXPECT_TRUE(preferring.empty());  // (preferences alone restrict nothing)

  const auto workload = [](const std::string& affinity) {
    return ParseWorkloadYaml(
        "metadata: {name: w}\nspec:\n  affinity: " + affinity + "\n  podSets: [{cpu: 1}]\n",
        "w.yaml");
  };
  const auto required = [&](const std::string& exprs) {
    return workload(
        "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
        "[{matchExpressions: [" +
        exprs + "]}]}}}");
  };
  ExpectInvalid(required("{key: a, operator: Near, values: [b]}"),
                {"matchExpressions[0].operator", "'Near'"});
  ExpectInvalid(required("{key: a, operator: In}"), {"values", "In and NotIn need 1"});
  ExpectInvalid(required("{key: a, operator: Exists, values: [b]}"),
                {"values", "must be empty for Exists"});
  ExpectInvalid(required("{key: a, operator: Gt, values: ['1', '2']}"),
                {"values", "Gt needs exactly one value, a whole number"});
  ExpectInvalid(required("{key: a, operator: Lt, values: [x]}"), {"values", "whole number"});
  ExpectInvalid(required("{key: 'a b', operator: Exists}"), {"matchExpressions[0].key", "'a b'"});
  ExpectInvalid(required("{key: a, operator: In, values: ['b c']}"), {"values", "'b c'"});
  ExpectInvalid(required("{key: a, operator: Exists, valuse: []}"), {"valuse", "unknown"});
  ExpectInvalid(workload("{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                         "{nodeSelectorTerms: []}}}"),
                {"nodeSelectorTerms", "1 to 100 terms"});
  ExpectInvalid(workload("{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                         "{nodeSelectorTerms: [{}]}}}"),
                {"nodeSelectorTerms[0].matchExpressions", "at least one requirement"});
  ExpectInvalid(workload("{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                         "{nodeSelectorTerms: [{matchFields: [{key: spec.unschedulable, "
                         "operator: In, values: ['true']}]}]}}}"),
                {"matchFields[0].key", "metadata.name"});
  ExpectInvalid(workload("{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
                         "[{weight: 0, preference: {matchExpressions: [{key: a, operator: "
                         "Exists}]}}]}}"),
                {"[0].weight", "between 1 and 100"});
  ExpectInvalid(workload("{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
                         "[{wieght: 5, preference: {}}]}}"),
                {"wieght", "did you mean weight"});
  ExpectInvalid(workload("{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                         "{nodeSelectorTerm: []}}}"),
                {"nodeSelectorTerm", "did you mean nodeSelectorTerms"});
  // Null is absent, and an empty preference is skipped, as in Kubernetes.
  Result<std::vector<Workload>> nulls = workload(
      "{podAffinity: null, nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: null, "
      "preferredDuringSchedulingIgnoredDuringExecution: [{weight: 5, preference: {}}]}}");
  ASSERT_TRUE(nulls.ok()) << nulls.status().ToString();
  EXPECT_TRUE(nulls->front().pod_sets[0].nodes.required.empty());
  EXPECT_TRUE(nulls->front().pod_sets[0].nodes.preferred.empty());
  Result<std::vector<Workload>> plus =
      required("{key: a, operator: Gt, values: ['+5']}");  // (as Go's ParseInt)
  ASSERT_TRUE(plus.ok()) << plus.status().ToString();
  ExpectInvalid(workload("{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
                         "[{weight: 1}]}}"),
                {"[0].preference", "required"});
  ExpectInvalid(workload("{podAntiAffinity: {}}"), {"affinity.podAntiAffinity", "not supported"});
  ExpectInvalid(workload("{nodeAfinity: {}}"), {"nodeAfinity", "unknown"});
}

TEST(WorkloadYaml, PriorityClassName) {
  Result<std::vector<Workload>> r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  priorityClassName: urgent\n  podSets: [{cpu: 1}]\n", "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->front().priority_class, "urgent");
  // Both: the API server checks that they agree when it stores the workload.
  r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  priority: 5\n"
      "  priorityClassName: urgent\n  podSets: [{cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->front().priority, 5);
  ExpectInvalid(ParseWorkloadYaml("metadata: {name: w}\nspec:\n  priorityClassName: Not_A_Name\n"
                                  "  podSets: [{cpu: 1}]\n",
                                  "w.yaml"),
                {"spec.priorityClassName"});
  // Negative priorities exist (a PriorityClass may have value -100), within +-1e9.
  r = ParseWorkloadYaml("metadata: {name: w}\nspec:\n  priority: -100\n  podSets: [{cpu: 1}]\n",
                        "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->front().priority, -100);
  ExpectInvalid(
      ParseWorkloadYaml(
          "metadata: {name: w}\nspec:\n  priority: 2000000000\n  podSets: [{cpu: 1}]\n", "w.yaml"),
      {"spec.priority", "between -1000000000 and 1000000000"});
  ExpectInvalid(
      ParseWorkloadYaml("metadata: {name: w}\nspec:\n  priority: -x\n  podSets: [{cpu: 1}]\n",
                        "w.yaml"),
      {"spec.priority"});
}

// A MIG profile no GPU has is refused where a new workload names it (the API asks
// ValidateMigProfileName of new specs; a user-style review saw 9g.99gb accepted, charged 9/7
// GPU, then Unschedulable). A workload stored by an older server still parses, whatever its
// queue's name or profile, so that its status can still be written and its devices counted.
TEST(WorkloadYaml, MigProfilesThatCannotExist) {
  for (const char* bad : {"9g.99gb", "5g.40gb", "6g.70gb", "9g.1tb"})
    EXPECT_NE(ValidateMigProfileName(bad).message().find("1, 2, 3, 4 or 7"), std::string::npos)
        << bad;
  for (const char* bad : {"3g", "3g.40", "3g.gb", "3x.40gb", "3g.40gbx"})
    EXPECT_NE(ValidateMigProfileName(bad).message().find("must look like '3g.40gb'"),
              std::string::npos)
        << bad;
  for (const char* ok :
       {"1g.10gb", "1g.10gb+me", "3g.40gb", "7g.141gb", "1g.24gb+gfx", "1g.24gb-me", "4g.71gb"})
    EXPECT_TRUE(ValidateMigProfileName(ok).ok())
        << ok << ": " << ValidateMigProfileName(ok).message();
  const auto parse = [](const std::string& spec) {
    return ParseWorkloadYaml("metadata: {name: w}\nspec:\n" + spec, "w.yaml");
  };
  EXPECT_TRUE(parse("  queue: Old_Name\n  podSets: [{cpu: 1, devices: {mig: 9g.99gb}}]\n").ok());
}

TEST(WorkloadYaml, PreemptibleAndMinimumRuntime) {
  Result<std::vector<Workload>> r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  preemptible: false\n  minRuntimeSeconds: 600\n"
      "  podSets: [{cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->front().preemptible);
  EXPECT_EQ(r->front().min_runtime_seconds, 600);
  r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  checkpointIntervalSeconds: 1800\n  podSets: [{cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->front().checkpoint_interval_seconds, 1800);
  ExpectInvalid(ParseWorkloadYaml("metadata: {name: w}\nspec:\n  checkpointIntervalSeconds: -1\n"
                                  "  podSets: [{cpu: 1}]\n",
                                  "w.yaml"),
                {"w.yaml:3", "spec.checkpointIntervalSeconds", "must not be negative"});
  r = ParseWorkloadYaml(
      "metadata: {name: w}\nspec:\n  minRuntimeSeconds: 60\n  maxRuntimeSeconds: 3600\n"
      "  podSets: [{cpu: 1}]\n",
      "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->front().max_runtime_seconds, 3600);
  ExpectInvalid(ParseWorkloadYaml("metadata: {name: w}\nspec:\n  minRuntimeSeconds: 60\n"
                                  "  maxRuntimeSeconds: 30\n  podSets: [{cpu: 1}]\n",
                                  "w.yaml"),
                {"spec.maxRuntimeSeconds", "must not be below minRuntimeSeconds (60)"});
  r = ParseWorkloadYaml("metadata: {name: w}\nspec:\n  podSets: [{cpu: 1}]\n", "w.yaml");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->front().preemptible);
  EXPECT_EQ(r->front().min_runtime_seconds, 0);
  EXPECT_EQ(r->front().max_runtime_seconds, 0);
  EXPECT_TRUE(r->front().active);
  r = ParseWorkloadYaml("metadata: {name: w}\nspec:\n  active: false\n  podSets: [{cpu: 1}]\n",
                        "w.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->front().active);
  EXPECT_EQ(r->front().checkpoint_interval_seconds, 0);
  ExpectInvalid(
      ParseWorkloadYaml(
          "metadata: {name: w}\nspec:\n  minRuntimeSeconds: -5\n  podSets: [{cpu: 1}]\n", "w.yaml"),
      {"w.yaml:3", "spec.minRuntimeSeconds", "must not be negative"});
  ExpectInvalid(ParseWorkloadYaml(
                    "metadata: {name: w}\nspec:\n  preemptible: sometimes\n  podSets: [{cpu: 1}]\n",
                    "w.yaml"),
                {"spec.preemptible"});
}

TEST(WorkloadYaml, FractionWholeMigAndModels) {
  Result<std::vector<Workload>> frac = WorkloadWithDevices("{gpuMilli: \"0.25\", gpuMemory: 10Gi}");
  ASSERT_TRUE(frac.ok()) << frac.status().ToString();
  const DeviceRequest& f = frac->front().pod_sets[0].device;
  EXPECT_EQ(f.kind, DeviceKind::kFraction);
  EXPECT_EQ(f.gpu_milli.value(), 250);
  EXPECT_EQ(f.gpu_memory.value(), 10 * 1024);
  EXPECT_EQ(f.TotalMilli().value(), 250);

  Result<std::vector<Workload>> milli = WorkloadWithDevices("{gpuMilli: 300m}");
  ASSERT_TRUE(milli.ok()) << milli.status().ToString();
  EXPECT_EQ(milli->front().pod_sets[0].device.gpu_milli.value(), 300);

  // A memory-only share is a fraction too; its compute share is decided against the fleet.
  Result<std::vector<Workload>> mem_only = WorkloadWithDevices("{gpuMemory: 20Gi}");
  ASSERT_TRUE(mem_only.ok()) << mem_only.status().ToString();
  EXPECT_EQ(mem_only->front().pod_sets[0].device.kind, DeviceKind::kFraction);
  EXPECT_EQ(mem_only->front().pod_sets[0].device.gpu_milli.value(), 0);

  Result<std::vector<Workload>> whole =
      WorkloadWithDevices("{gpus: 2, models: \"V100M16|V100M32\"}");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const DeviceRequest& w = whole->front().pod_sets[0].device;
  EXPECT_EQ(w.kind, DeviceKind::kWhole);
  EXPECT_EQ(w.gpus, 2);
  EXPECT_EQ(w.models, (std::vector<std::string>{"V100M16", "V100M32"}));
  // A YAML list of models is the same (a trial's `models: [L4]` was refused).
  Result<std::vector<Workload>> listed =
      WorkloadWithDevices("{gpus: 2, models: [V100M16, V100M32]}");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->front().pod_sets[0].device.models,
            (std::vector<std::string>{"V100M16", "V100M32"}));
  ExpectInvalid(WorkloadWithDevices("{gpus: 1, models: []}"), {"devices.models", "an empty list"});

  Result<std::vector<Workload>> mig = WorkloadWithDevices("{mig: 3g.40gb}");
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  const DeviceRequest& m = mig->front().pod_sets[0].device;
  EXPECT_EQ(m.kind, DeviceKind::kMig);
  EXPECT_EQ(m.mig_profile, "3g.40gb");
  EXPECT_EQ(m.TotalMilli().value(), 3 * 1000 / 7);  // 3 of 7 compute slices
}

TEST(WorkloadYaml, TwoDeviceKindsAtOnceAreRejected) {
  ExpectInvalid(WorkloadWithDevices("{gpus: 1, gpuMilli: 500m}"),
                {"w.yaml:5", "spec.podSets[0].devices.gpus", "give one of"});
  ExpectInvalid(WorkloadWithDevices("{gpuMilli: 500m, mig: 1g.10gb}"), {"give one of"});
  // (Named by a field the user set: a trial's `mig` with `gpuMemory` was told of `gpus`.)
  ExpectInvalid(WorkloadWithDevices("{mig: 1g.10gb, gpuMemory: 5Gi}"),
                {"spec.podSets[0].devices.gpuMemory", "give one of"});
}

TEST(WorkloadYaml, WholeGpuAsFractionIsRejected) {
  // A fraction of 1000m is a whole GPU: the user must ask for `gpus: 1` so that it is not shared.
  ExpectInvalid(WorkloadWithDevices("{gpuMilli: 1000m}"),
                {"w.yaml:5", "spec.podSets[0].devices.gpuMilli", "between 1m and 999m", "1000m"});
  ExpectInvalid(WorkloadWithDevices("{gpuMilli: \"1\"}"), {"devices.gpuMilli", "1000m"});
  ExpectInvalid(WorkloadWithDevices("{gpuMilli: \"0.0005\"}"), {"devices.gpuMilli", "precision"});
  ExpectInvalid(WorkloadWithDevices("{gpus: 65}"), {"devices.gpus", "between 1 and 64"});
  // 0 GPUs is none, as in a Kubernetes limit, but not with models named (they meant nothing).
  ExpectInvalid(WorkloadWithDevices("{gpus: -2}"), {"w.yaml:5", "devices.gpus", "negative"});
  Result<std::vector<Workload>> none = WorkloadWithDevices("{gpus: 0}");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->front().pod_sets[0].device.kind, DeviceKind::kNone);
  ExpectInvalid(WorkloadWithDevices("{gpus: 0, models: H100}"),
                {"devices.models", "asks for no GPU"});
  ExpectInvalid(WorkloadWithDevices("{models: H100}"), {"devices.models", "asks for no GPU"});
  ExpectInvalid(WorkloadWithDevices("{mig: big}"), {"devices.mig", "look like"});
  ExpectInvalid(WorkloadWithDevices("{gpus: 1, models: \"A||B\"}"),
                {"devices.models", "empty GPU model"});
}

TEST(WorkloadYaml, UnknownTopologyLevelIsRejected) {
  const char* text =
      "metadata: {name: w}\n"
      "spec:\n"
      "  topology: {level: zone, mode: required}\n"
      "  podSets: [{cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(text, "w.yaml"),
                {"w.yaml:3", "spec.topology.level", "got 'zone'"});
  const char* mode =
      "metadata: {name: w}\n"
      "spec:\n"
      "  topology: {level: rack, mode: must}\n"
      "  podSets: [{cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(mode, "w.yaml"), {"spec.topology.mode", "got 'must'"});
  // Both wrong: both said.
  const char* both =
      "metadata: {name: w}\n"
      "spec:\n"
      "  topology: {level: pod, mode: maybe}\n"
      "  podSets: [{cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(both, "w.yaml"),
                {"spec.topology.level", "got 'pod'", "spec.topology.mode", "got 'maybe'"});
}

// Pods are named after their set ("main-0"): two sets of one name, or a name that is no valid
// name, are refused.
TEST(WorkloadYaml, PodSetNamesAreValidAndDistinct) {
  const char* twice =
      "metadata: {name: w}\n"
      "spec:\n"
      "  podSets: [{name: w, cpu: 1}, {name: w, cpu: 2}]\n";
  ExpectInvalid(ParseWorkloadYaml(twice, "w.yaml"),
                {"spec.podSets[1].name", "'w' names another pod set too"});
  const char* bad =
      "metadata: {name: w}\n"
      "spec:\n"
      "  podSets: [{name: Main, cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(bad, "w.yaml"), {"spec.podSets[0].name", "not a valid name"});
  const char* good =
      "metadata: {name: w}\n"
      "spec:\n"
      "  podSets: [{name: leader, cpu: 1}, {name: workers, cpu: 2}]\n";
  EXPECT_TRUE(ParseWorkloadYaml(good, "w.yaml").ok());
  // A misspelt podSets names itself, not the missing field.
  const char* misspelt =
      "metadata: {name: w}\n"
      "spec:\n"
      "  podsets: [{name: main, cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(misspelt, "w.yaml"),
                {"spec.podsets", "unknown field (did you mean podSets?)"});
}

TEST(WorkloadYaml, UnknownFieldIsRejected) {
  const char* text =
      "metadata: {name: w}\n"
      "spec:\n"
      "  priorty: 3\n"
      "  podSets: [{cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(text, "w.yaml"), {"w.yaml:3", "spec.priorty", "unknown field"});
  ExpectInvalid(WorkloadWithDevices("{gpu: 1}"),
                {"w.yaml:5", "spec.podSets[0].devices.gpu", "unknown field"});
  // Every unknown field of a map is named at once, each with its line.
  const char* two =
      "metadata: {name: w}\n"
      "spec:\n"
      "  priorty: 3\n"
      "  podSets: [{cpu: 1}]\n"
      "  queu: q\n";
  ExpectInvalid(ParseWorkloadYaml(two, "w.yaml"),
                {"w.yaml:3: spec.priorty: unknown field (did you mean priority?); w.yaml:5: "
                 "spec.queu: unknown field (did you mean queue?)"});
  // Other systems' names for a field are pointed to Fabrica's (a trial's `replicas:` and
  // `gpus:` got no hint), where that map has it.
  const char* others =
      "metadata: {name: w}\n"
      "spec:\n"
      "  queueName: q\n"
      "  podSets: [{replicas: 2, gpus: 1, cpu: 1}]\n";
  ExpectInvalid(ParseWorkloadYaml(others, "w.yaml"),
                {"spec.queueName: unknown field (did you mean queue?)",
                 "spec.podSets[0].replicas: unknown field (did you mean count?)",
                 "spec.podSets[0].gpus: unknown field (did you mean devices?)"});
  // And so is every one of the nested maps, in file order: the run, each pod set and its
  // devices, the document itself.
  const char* nested =
      "metadata: {name: w, lable: x}\n"
      "spec:\n"
      "  run: {comand: [sleep]}\n"
      "  podSets:\n"
      "  - {name: a, devices: {gpus: 1, modle: H100}}\n"
      "  - {name: b, cnt: 2}\n"
      "  queu: q\n"
      "stauts: {}\n";
  ExpectInvalid(
      ParseWorkloadYaml(nested, "w.yaml"),
      {"w.yaml:1: metadata.lable: unknown field; w.yaml:3: spec.run.comand: unknown "
       "field (did you mean command?); w.yaml:5: spec.podSets[0].devices.modle: unknown field; "
       "w.yaml:6: spec.podSets[1].cnt: unknown field; w.yaml:7: spec.queu: unknown field (did "
       "you mean queue?); w.yaml:8: stauts: unknown field (did you mean status?)"});
}

TEST(WorkloadYaml, MultipleDocumentsAndTheirPaths) {
  const char* text =
      "metadata: {name: a}\n"
      "spec: {podSets: [{cpu: 1}]}\n"
      "---\n"
      "metadata: {name: b}\n"
      "spec: {podSets: [{cpu: 2, count: 3}]}\n";
  Result<std::vector<Workload>> r = ParseWorkloadYaml(text, "two.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].name.str(), "b");
  EXPECT_EQ((*r)[1].pod_count(), 3);
  const char* bad =
      "metadata: {name: a}\n"
      "spec: {podSets: [{cpu: 1}]}\n"
      "---\n"
      "metadata: {name: b}\n"
      "spec: {podSets: [{cpu: -2}]}\n";
  ExpectInvalid(ParseWorkloadYaml(bad, "two.yaml"), {"two.yaml:5", "doc1.spec.podSets[0].cpu"});
  ExpectInvalid(ParseWorkloadYaml("", "empty.yaml"), {"empty.yaml", "no workload"});
  ExpectInvalid(ParseWorkloadYaml("metadata: {name: a}\nspec: {podSets: []}\n", "w.yaml"),
                {"spec.podSets", "non-empty list"});
  // A missing `metadata` is reported as "expected a mapping"; the test pins only the path.
  ExpectInvalid(ParseWorkloadYaml("spec: {podSets: [{cpu: 1}]}\n", "w.yaml"),
                {"w.yaml", "metadata"});
  ExpectInvalid(ParseWorkloadYaml("metadata: {tenant: t}\nspec: {podSets: [{cpu: 1}]}\n", "w.yaml"),
                {"w.yaml:1", "metadata.name", "required field is missing"});
}

TEST(WorkloadYaml, WorkloadListKind) {
  const char* text =
      "kind: WorkloadList\n"
      "items:\n"
      "  - metadata: {name: a}\n"
      "    spec: {podSets: [{cpu: 1}]}\n"
      "  - metadata: {name: b}\n"
      "    spec: {podSets: [{cpu: 1}]}\n";
  Result<std::vector<Workload>> r = ParseWorkloadYaml(text, "list.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].name.str(), "b");
  const char* bad =
      "kind: WorkloadList\n"
      "items:\n"
      "  - metadata: {name: a}\n"
      "    spec: {podSets: [{cpu: 1}]}\n"
      "  - metadata: {name: b}\n"
      "    spec: {podSets: [{cpu: -1}]}\n";
  ExpectInvalid(ParseWorkloadYaml(bad, "list.yaml"),
                {"list.yaml:6", "items[1].spec.podSets[0].cpu"});
  ExpectInvalid(ParseWorkloadYaml("kind: WorkloadList\n", "list.yaml"),
                {"list.yaml", "items", "expected a list"});
  ExpectInvalid(ParseWorkloadYaml("kind: WorkloadList\nitems: []\nextra: 1\n", "list.yaml"),
                {"list.yaml:3", "extra", "unknown field"});
}

// ---------------------------------------------------------------------------------------------
// Trace requests

TEST(DeviceRequestFromTrace, MapsTheTraceTriple) {
  Result<DeviceRequest> cpu_only = DeviceRequestFromTrace(0, 0, "");
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_EQ(cpu_only->kind, DeviceKind::kNone);
  EXPECT_EQ(cpu_only->TotalMilli().value(), 0);

  Result<DeviceRequest> whole = DeviceRequestFromTrace(4, 1000, "");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->kind, DeviceKind::kWhole);
  EXPECT_EQ(whole->gpus, 4);
  EXPECT_TRUE(whole->models.empty());
  EXPECT_EQ(whole->TotalMilli().value(), 4000);

  Result<DeviceRequest> frac = DeviceRequestFromTrace(1, 460, "V100M16|V100M32");
  ASSERT_TRUE(frac.ok());
  EXPECT_EQ(frac->kind, DeviceKind::kFraction);
  EXPECT_EQ(frac->gpu_milli.value(), 460);
  EXPECT_EQ(frac->models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(frac->TotalMilli().value(), 460);
}

TEST(DeviceRequestFromTrace, RejectsImpossibleRows) {
  ExpectInvalid(DeviceRequestFromTrace(1, 1500, ""), {"gpu_milli", "1500"});
  ExpectInvalid(DeviceRequestFromTrace(1, -1, ""), {"gpu_milli"});
  ExpectInvalid(DeviceRequestFromTrace(-1, 1000, ""), {"num_gpu", "negative"});
  ExpectInvalid(DeviceRequestFromTrace(2, 500, ""), {"num_gpu == 1"});
  ExpectInvalid(DeviceRequestFromTrace(1, 0, ""), {"gpu_milli is 0"});
  ExpectInvalid(DeviceRequestFromTrace(65, 1000, ""), {"between 1 and 64"});
  ExpectInvalid(DeviceRequestFromTrace(1, 500, "A||B"), {"empty GPU model"});
}

TEST(ParseModelList, SplitsOnBars) {
  EXPECT_TRUE(ParseModelList("")->empty());
  EXPECT_EQ(*ParseModelList("T4"), std::vector<std::string>{"T4"});
  EXPECT_EQ(*ParseModelList("A|B|C"), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_FALSE(ParseModelList("A|").ok());
  EXPECT_FALSE(ParseModelList("|A").ok());
}

TEST(TrustLevel, ParsesTheThreeLevels) {
  EXPECT_EQ(*ParseTrustLevel("untrusted"), TrustLevel::kUntrusted);
  EXPECT_EQ(*ParseTrustLevel("standard"), TrustLevel::kStandard);
  EXPECT_EQ(*ParseTrustLevel("trusted"), TrustLevel::kTrusted);
  ExpectInvalid(ParseTrustLevel("Trusted"), {"got 'Trusted'"});
  EXPECT_STREQ(TrustLevelName(TrustLevel::kUntrusted), "untrusted");
  EXPECT_STREQ(TopologyLevelName(TopologyLevel::kLeaf), "leaf");
}

}  // namespace
}  // namespace fabrica

// The shipped examples are the first thing a new user runs; they must stay valid.
std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(FABRICA_SOURCE_DIR) + "/" + relative);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Examples, FleetAndManifestParse) {
  auto fleet = fabrica::ParseFleetYaml(ReadSourceFile("examples/fleet.yaml"), "fleet.yaml");
  ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
  EXPECT_EQ(fleet->nodes.size(), 5u);
  EXPECT_EQ(fleet->total_gpus(), 3 * 8 + 2 * 4);
  // The GB200 trays share their rack's NVLink domain; HGX nodes are their own.
  EXPECT_EQ(fleet->Find(fabrica::NodeId("gb200-r2-1"))->nvlink_domain, "nvl72-rack-2");
  EXPECT_EQ(fleet->Find(fabrica::NodeId("hgx-a-0"))->nvlink_domain, "hgx-a-0");
  auto manifest = fabrica::ParseManifestYaml(ReadSourceFile("examples/workloads.yaml"), "w.yaml");
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->tenants.size(), 4u);
  EXPECT_EQ(manifest->workloads.size(), 5u);
  EXPECT_EQ(manifest->tenants[3].trust, fabrica::TrustLevel::kUntrusted);
  EXPECT_EQ(manifest->tenants[0].trust_domain, "research");
}

// The API validates request bodies already decoded as JSON through ParseManifestJson; it must
// read them exactly as the text parser reads the same document, and reject what it rejects.
TEST(Manifest, JsonDocumentsParseAsTheirText) {
  const std::string text =
      R"({"kind":"Workload","metadata":{"name":"w","tenant":"t","labels":{"a":"1","b":"x"}},)"
      R"("spec":{"priority":7,"podSets":[{"name":"s","count":2,"cpu":"8","memory":"64Gi",)"
      R"("devices":{"gpuMilli":"500m","gpuMemory":"38Gi"}},{"name":"g","count":1,)"
      R"("devices":{"gpus":2}}],"run":{"command":["a","b"],"durationSeconds":60},)"
      R"("gang":true}})";
  auto from_text = fabrica::ParseManifestYaml(text, "w.json");
  auto from_json = fabrica::ParseManifestJson(nlohmann::json::parse(text), "w.json");
  ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  ASSERT_EQ(from_json->workloads.size(), 1u);
  const fabrica::Workload& a = from_text->workloads[0];
  const fabrica::Workload& b = from_json->workloads[0];
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.tenant, b.tenant);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(b.priority, 7);
  EXPECT_EQ(a.run.command, b.run.command);
  EXPECT_EQ(b.run.duration_seconds, 60);
  ASSERT_EQ(b.pod_sets.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a.pod_sets[i].count, b.pod_sets[i].count);
    EXPECT_EQ(a.pod_sets[i].cpu, b.pod_sets[i].cpu);
    EXPECT_EQ(a.pod_sets[i].memory, b.pod_sets[i].memory);
    EXPECT_EQ(a.pod_sets[i].device.kind, b.pod_sets[i].device.kind);
    EXPECT_EQ(a.pod_sets[i].device.gpus, b.pod_sets[i].device.gpus);
    EXPECT_EQ(a.pod_sets[i].device.gpu_milli, b.pod_sets[i].device.gpu_milli);
    EXPECT_EQ(a.pod_sets[i].device.gpu_memory, b.pod_sets[i].device.gpu_memory);
  }
  EXPECT_EQ(b.pod_sets[1].device.gpus, 2);
  // Errors name the field; numbers and booleans where strings are due are read as their text.
  nlohmann::json bad = nlohmann::json::parse(text);
  bad["spec"]["podSets"][0]["devices"]["gpuMili"] = "1";
  auto unknown = fabrica::ParseManifestJson(bad, "body");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("spec.podSets[0].devices.gpuMili: unknown field"),
            std::string::npos)
      << unknown.status().message();
  bad = nlohmann::json::parse(text);
  bad["spec"]["podSets"][0]["count"] = "two";
  EXPECT_FALSE(fabrica::ParseManifestJson(bad, "body").ok());
  bad["spec"]["podSets"][0]["count"] = nullptr;
  EXPECT_EQ(fabrica::ParseManifestJson(bad, "body").ok(),
            fabrica::ParseManifestYaml(bad.dump(), "body").ok());
}

TEST(Manifest, TenantErrorsNameTheField) {
  auto bad_trust = fabrica::ParseManifestYaml(
      "kind: Tenant\nmetadata: {name: t}\nspec: {trust: sorta}\n", "t.yaml");
  ASSERT_FALSE(bad_trust.ok());
  EXPECT_NE(bad_trust.status().message().find("t.yaml:3: spec.trust"), std::string::npos)
      << bad_trust.status().message();
  auto exclusive = fabrica::ParseManifestYaml(
      "kind: Tenant\nmetadata: {name: t}\nspec: {trust: standard, exclusiveNodes: true}\n",
      "t.yaml");
  ASSERT_FALSE(exclusive.ok());
  EXPECT_NE(exclusive.status().message().find("exclusiveNodes"), std::string::npos);
  // Budgets: parsed into micro-units, every bad field named.
  auto budget = fabrica::ParseManifestYaml(
      "kind: Tenant\nmetadata: {name: t}\nspec:\n  budget: {amount: \"2500.50\", period: week, "
      "alertPercent: [75, 100], enforce: true}\n",
      "t.yaml");
  ASSERT_TRUE(budget.ok()) << budget.status().message();
  ASSERT_TRUE(budget->tenants[0].budget.has_value());
  EXPECT_EQ(budget->tenants[0].budget->amount_micros, 2'500'500'000);
  EXPECT_EQ(budget->tenants[0].budget->period, "week");
  EXPECT_EQ(budget->tenants[0].budget->alert_percent, (std::vector<int>{75, 100}));
  EXPECT_TRUE(budget->tenants[0].budget->enforce);
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"{amount: \"1.2345678\"}", "spec.budget.amount"},
           {"{amount: \"0\"}", "spec.budget.amount"},
           {"{amount: \"5\", period: year}", "spec.budget.period"},
           {"{amount: \"5\", alertPercent: [0]}", "spec.budget.alertPercent"},
           {"{amount: \"5\", colour: red}", "spec.budget.colour"},
           {"{period: day}", "spec.budget.amount"}}) {
    auto bad = fabrica::ParseManifestYaml(
        "kind: Tenant\nmetadata: {name: t}\nspec:\n  budget: " + text + "\n", "t.yaml");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(field), std::string::npos)
        << text << ": " << bad.status().message();
  }
  auto dup = fabrica::ParseManifestYaml(
      "kind: Tenant\nmetadata: {name: t}\n---\nkind: Tenant\nmetadata: {name: t}\n", "t.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate tenant 't'"), std::string::npos)
      << dup.status().message();
  // Workload-only parsing refuses tenants rather than dropping them silently.
  auto only = fabrica::ParseWorkloadYaml("kind: Tenant\nmetadata: {name: t}\n", "w.yaml");
  EXPECT_FALSE(only.ok());
}
