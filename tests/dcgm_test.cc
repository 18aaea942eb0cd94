// Tests for the dcgm-exporter exposition reader (meter/dcgm.h), on hand-written pages in the
// format dcgm-exporter serves (tests/data/dcgm/*.prom) and on inline corner cases.
#include "meter/dcgm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace fabrica {
namespace {

using test::ExpectInvalid;

constexpr int64_t kScrapeMs = 1764510009999;

std::string Fixture(const std::string& name) {
  const std::string path = std::string(FABRICA_SOURCE_DIR) + "/tests/data/dcgm/" + name;
  std::string text = test::ReadFile(path);
  EXPECT_FALSE(text.empty()) << "missing fixture " << path;
  return text;
}

std::vector<DeviceSample> ParseOk(std::string_view text, DcgmParseStats* stats = nullptr,
                                  const std::string& default_node = "fallback-node") {
  Result<std::vector<DeviceSample>> r = ParseDcgmExposition(text, kScrapeMs, default_node, stats);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<DeviceSample>{};
}

// One GPU_UTIL line for device "GPU-x" with the given value text.
std::string UtilLine(const std::string& value) {
  return "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-x\"} " + value + "\n";
}

TEST(DcgmExposition, OlderHostnameLabelAndGrEnginePreferred) {
  DcgmParseStats stats;
  std::vector<DeviceSample> s = ParseOk(Fixture("hostname_upper.prom"), &stats);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].node, "dgx-a17.fleet.internal");
  EXPECT_EQ(s[0].device_uuid, "GPU-5d1e2f3a-8b7c-4e6d-9a0b-1c2d3e4f5a6b");
  // GPU_UTIL says 100 %; GR_ENGINE_ACTIVE 0.823456 wins, with its own timestamp.
  EXPECT_EQ(s[0].util_permille, 823);
  EXPECT_EQ(s[0].time_ms, 1764510000123);
  EXPECT_EQ(s[1].node, "dgx-a17.fleet.internal");
  EXPECT_EQ(s[1].device_uuid, "GPU-a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d");
  // No GR_ENGINE_ACTIVE line for GPU 1: GPU_UTIL 7 % is used, at the scrape time.
  EXPECT_EQ(s[1].util_permille, 70);
  EXPECT_EQ(s[1].time_ms, kScrapeMs);
  EXPECT_EQ(stats.lines, 35);
  EXPECT_EQ(stats.samples, 2);
  EXPECT_EQ(stats.blanks_skipped, 0);
  EXPECT_EQ(stats.non_finite_skipped, 0);
  EXPECT_EQ(stats.ignored_metrics, 12);  // SM_CLOCK, MEMORY_TEMP, GPU_TEMP, POWER, ENERGY, FB_USED
}

TEST(DcgmExposition, NewerHostnameLabelAndBlankGrEngineFallsBack) {
  DcgmParseStats stats;
  std::vector<DeviceSample> s = ParseOk(Fixture("hostname_lower.prom"), &stats);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].node, "gpu-node-042");
  EXPECT_EQ(s[0].device_uuid, "GPU-0f1e2d3c-4b5a-4697-8877-665544332211");
  // Its GR_ENGINE_ACTIVE is the FP64 blank, so GPU_UTIL (0 %) is used.
  EXPECT_EQ(s[0].util_permille, 0);
  EXPECT_EQ(s[0].time_ms, kScrapeMs);
  EXPECT_EQ(s[1].node, "gpu-node-042");
  EXPECT_EQ(s[1].device_uuid, "GPU-7c6b5a49-3827-4165-a0f1-e2d3c4b5a697");
  EXPECT_EQ(s[1].util_permille, 540);
  EXPECT_EQ(s[1].time_ms, 1764510000456);
  EXPECT_EQ(stats.blanks_skipped, 1);
  EXPECT_EQ(stats.ignored_metrics, 11);
}

TEST(DcgmExposition, BothLabelSpellingsOnOnePageAttributeToTheirNodes) {
  const std::string page =
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\",Hostname=\"old-node\"} 10\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-b\",hostname=\"new-node\"} 20\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-c\"} 30\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-d\",Hostname=\"\"} 40\n";
  std::vector<DeviceSample> s = ParseOk(page, nullptr, "agent-node");
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].node, "agent-node");
  EXPECT_EQ(s[0].device_uuid, "GPU-c");
  EXPECT_EQ(s[1].node, "agent-node");  // an empty Hostname names no node
  EXPECT_EQ(s[1].device_uuid, "GPU-d");
  EXPECT_EQ(s[2].node, "new-node");
  EXPECT_EQ(s[2].device_uuid, "GPU-b");
  EXPECT_EQ(s[3].node, "old-node");
  EXPECT_EQ(s[3].device_uuid, "GPU-a");
}

TEST(DcgmExposition, OldNamespaceUuidLabelAndDefaultNode) {
  std::vector<DeviceSample> s = ParseOk(Fixture("old_namespace.prom"), nullptr, "t4-box");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].node, "t4-box");
  EXPECT_EQ(s[0].device_uuid, "GPU-9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a");
  EXPECT_EQ(s[0].util_permille, 330);
}

TEST(DcgmExposition, MigInstancesAreSeparateDevices) {
  DcgmParseStats stats;
  std::vector<DeviceSample> s = ParseOk(Fixture("mig.prom"), &stats);
  ASSERT_EQ(s.size(), 4u);
  const std::string gpu0 = "GPU-c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b";
  const std::string gpu1 = "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d";  // sorts first
  EXPECT_EQ(s[0].device_uuid, gpu1 + "/7");
  EXPECT_EQ(s[0].util_permille, 251);  // 0.2505 rounds half up
  EXPECT_EQ(s[0].time_ms, kScrapeMs);
  EXPECT_EQ(s[1].device_uuid, gpu1 + "/8");
  EXPECT_EQ(s[1].util_permille, 499);
  EXPECT_EQ(s[2].device_uuid, gpu0 + "/1");
  EXPECT_EQ(s[2].util_permille, 912);
  EXPECT_EQ(s[2].time_ms, 1764510001000);
  EXPECT_EQ(s[3].device_uuid, gpu0 + "/2");
  EXPECT_EQ(s[3].util_permille, 0);
  EXPECT_EQ(s[3].time_ms, 1764510001000);
  for (const DeviceSample& d : s) EXPECT_EQ(d.node, "dgx-h100-mig-03");
  // Four GPU_UTIL blanks (two parents, two instances) and instance 9's FP64 blank; no parent
  // GPU becomes a device of its own.
  EXPECT_EQ(stats.blanks_skipped, 5);
  EXPECT_EQ(stats.ignored_metrics, 2);
  EXPECT_EQ(stats.samples, 4);
}

TEST(DcgmExposition, EveryBlankSentinelIsSkippedAndCounted) {
  const std::vector<std::string> blanks = {
      "9223372036854775792",     // DCGM_INT64_BLANK
      "9223372036854775793",     // NOT_FOUND
      "9223372036854775794",     // NOT_SUPPORTED
      "9223372036854775795",     // NOT_PERMISSIONED
      "9223372036854775807",     // INT64_MAX
      "18446744073709551616",    // past 64 bits
      "2147483632",              // DCGM_INT32_BLANK
      "2147483635",              // INT32 NOT_PERMISSIONED
      "140737488355328.0",       // DCGM_FP64_BLANK
      "140737488355331.000000",  // FP64 NOT_PERMISSIONED
      "1.40737488355328e+14",    // the FP64 blank as Prometheus re-exposes it
      "9.223372036854776e+18",   // the INT64 blank re-exposed as a float
  };
  for (const std::string& blank : blanks) {
    DcgmParseStats stats;
    std::vector<DeviceSample> s = ParseOk(UtilLine(blank), &stats);
    EXPECT_TRUE(s.empty()) << blank;
    EXPECT_EQ(stats.blanks_skipped, 1) << blank;
  }
  // Real values next to the sentinels are kept (clamped to 1000 per-mille).
  for (const char* value : {"2147483631", "9223372036854775791", "140737488355327.0"}) {
    DcgmParseStats stats;
    std::vector<DeviceSample> s = ParseOk(UtilLine(value), &stats);
    ASSERT_EQ(s.size(), 1u) << value;
    EXPECT_EQ(s[0].util_permille, 1000) << value;
    EXPECT_EQ(stats.blanks_skipped, 0) << value;
  }
}

TEST(DcgmExposition, NanAndInfAreSkippedAndCounted) {
  const std::string page = UtilLine("NaN") +
                           "DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=\"GPU-y\"} +Inf\n"
                           "DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=\"GPU-z\"} -Inf\n";
  DcgmParseStats stats;
  EXPECT_TRUE(ParseOk(page, &stats).empty());
  EXPECT_EQ(stats.non_finite_skipped, 3);
  EXPECT_EQ(stats.blanks_skipped, 0);
}

TEST(DcgmExposition, NanGrEngineFallsBackToGpuUtil) {
  const std::string page = "DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=\"GPU-x\"} NaN\n" + UtilLine("61");
  std::vector<DeviceSample> s = ParseOk(page);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].util_permille, 610);
}

TEST(DcgmExposition, PerMilleRoundsHalfUpAndClamps) {
  struct Case {
    std::string metric;
    std::string value;
    int32_t permille;
  };
  const std::vector<Case> cases = {
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.2345", 235},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.2344999", 234},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.0005", 1},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.9995", 1000},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1.2", 1000},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "-0.1", 0},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1e-1", 100},
      {"DCGM_FI_DEV_GPU_UTIL", "45.55", 456},
      {"DCGM_FI_DEV_GPU_UTIL", "45.54", 455},
      {"DCGM_FI_DEV_GPU_UTIL", "100", 1000},
      {"DCGM_FI_DEV_GPU_UTIL", "250", 1000},
      {"DCGM_FI_DEV_GPU_UTIL", "-3", 0},
      {"DCGM_FI_DEV_GPU_UTIL", "+7", 70},
  };
  for (const Case& c : cases) {
    std::vector<DeviceSample> s = ParseOk(c.metric + "{UUID=\"GPU-x\"} " + c.value + "\n");
    ASSERT_EQ(s.size(), 1u) << c.value;
    EXPECT_EQ(s[0].util_permille, c.permille) << c.metric << " " << c.value;
  }
}

TEST(DcgmExposition, RepeatedLinesPerPodKeepTheLargestValue) {
  const std::string page =
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-x\",pod=\"a\"} 40 1000\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-x\",pod=\"b\"} 42 2000\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-x\",pod=\"c\"} 41 3000\n";
  std::vector<DeviceSample> s = ParseOk(page);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].util_permille, 420);
  EXPECT_EQ(s[0].time_ms, 2000);
}

TEST(DcgmExposition, LineTimestampsAreHonoured) {
  const std::string page =
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 10 1764510000001\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-b\"} 10\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-c\"} 10 -5\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-d\"} 10 \t +17  \n";
  std::vector<DeviceSample> s = ParseOk(page);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].time_ms, 1764510000001);
  EXPECT_EQ(s[1].time_ms, kScrapeMs);
  EXPECT_EQ(s[2].time_ms, -5);
  EXPECT_EQ(s[3].time_ms, 17);
}

TEST(DcgmExposition, EscapedLabelValuesAndSyntaxCorners) {
  DcgmParseStats stats;
  std::vector<DeviceSample> s = ParseOk(Fixture("escapes.prom"), &stats);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].node, "rack-7\\node-1\nspare");
  EXPECT_EQ(s[0].device_uuid, "GPU-e1e2e3e4-f5f6-4a7b-8c8d-9e9f0a0b0c0d");
  EXPECT_EQ(s[0].util_permille, 125);
  EXPECT_EQ(s[0].time_ms, 1764510002000);
  EXPECT_EQ(stats.lines, 12);
  EXPECT_EQ(stats.ignored_metrics, 5);  // two fabrica_scrape_info, POWER, GPU_TEMP, MEM_CLOCK
}

TEST(DcgmExposition, EscapedQuoteInAKeptLabelDoesNotEndIt) {
  const std::string page =
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-\\\"q\\\"\",hostname=\"a\\\\\",x=\"\\n\"} 5\n";
  std::vector<DeviceSample> s = ParseOk(page);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].device_uuid, "GPU-\"q\"");
  EXPECT_EQ(s[0].node, "a\\");
}

TEST(DcgmExposition, CrLfLineEndsAndNoFinalNewline) {
  std::vector<DeviceSample> s = ParseOk(
      "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\r\nDCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 10 77\r\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-b\"} 20");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].time_ms, 77);
  EXPECT_EQ(s[1].util_permille, 200);
}

TEST(DcgmExposition, EmptyAndCommentOnlyPagesGiveNoSamples) {
  for (const std::string page : {"", "\n\n", "# HELP x y\n# TYPE x gauge\n\n  \t\n"}) {
    DcgmParseStats stats;
    stats.samples = 99;
    EXPECT_TRUE(ParseOk(page, &stats).empty());
    EXPECT_EQ(stats.samples, 0);
    EXPECT_EQ(stats.ignored_metrics, 0);
  }
}

TEST(DcgmExposition, UnknownMetricsAreIgnoredAndCounted) {
  DcgmParseStats stats;
  std::vector<DeviceSample> s = ParseOk(
      "go_goroutines 12\nDCGM_FI_DEV_SM_CLOCK{UUID=\"GPU-a\"} 1400\n"
      "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu_uuid=\"GPU-a\",nvlink=\"3\"} 1e12\n" +
          UtilLine("3"),
      &stats);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(stats.ignored_metrics, 3);
}

TEST(DcgmExposition, UtilizationWithoutUuidIsAnError) {
  ExpectInvalid(ParseDcgmExposition("\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",gpu_uuid=\"GPU-a\"} 5\n",
                                    kScrapeMs, "n"),
                {"line 2", "DCGM_FI_DEV_GPU_UTIL", "UUID"});
}

TEST(DcgmExposition, MalformedLinesNameTheLineAndTheFault) {
  struct Case {
    std::string line;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a} 5", {"unterminated", "UUID"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\\\"} 5", {"unterminated", "UUID"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\\", {"unterminated", "UUID"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"}", {"missing value", "DCGM_FI_DEV_GPU_UTIL"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"}   ", {"missing value"}},
      {"DCGM_FI_DEV_GPU_UTIL", {"missing value"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} fast", {"'fast' is not a number"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 5x", {"'5x' is not a number"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} +-5", {"is not a number"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 0x10", {"is not a number"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 1e999", {"'1e999' is out of range"}},
      {"DCGM_FI_DEV_SM_CLOCK{UUID=\"GPU-a\"} -", {"is not a number"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\\t\"} 5", {"unknown escape", "UUID"}},
      {"DCGM_FI_DEV_SM_CLOCK{err_msg=\"bad \\x\"} 5", {"unknown escape", "err_msg"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 5 later", {"timestamp 'later'"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 5 1.5", {"timestamp '1.5'"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 5 10 11", {"after the timestamp"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"", {"missing '}'"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\" gpu=\"0\"} 5", {"expected ',' or '}'"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID} 5", {"expected '='", "UUID"}},
      {"DCGM_FI_DEV_GPU_UTIL{UUID=GPU-a} 5", {"expected '\"'", "UUID"}},
      {"DCGM_FI_DEV_GPU_UTIL{,} 5", {"expected a label name"}},
      {"DCGM_FI_DEV_GPU_UTIL{0gpu=\"0\"} 5", {"expected a label name"}},
      {"DCGM-FI 5", {"unexpected character '-'"}},
      {"9lives 5", {"expected a metric name"}},
      {"{UUID=\"GPU-a\"} 5", {"expected a metric name"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    // The fault is on line 3, after a valid line, so no partial result may leak out.
    const std::string page =
        "# HELP DCGM_FI_DEV_GPU_UTIL x\n" + UtilLine("5") + c.line + "\n" + UtilLine("6");
    std::vector<std::string> fragments = c.fragments;
    fragments.push_back("line 3");
    ExpectInvalid(ParseDcgmExposition(page, kScrapeMs, "n"), fragments);
    ExpectInvalid(ParseDcgmGauges(page, "n"), fragments);
  }
}

TEST(DcgmExposition, OverlongLineIsAnError) {
  constexpr size_t kLimit = size_t{64} * 1024;
  const std::string long_value(kLimit, 'a');
  const std::string page =
      UtilLine("5") + "DCGM_FI_DEV_SM_CLOCK{junk=\"" + long_value + "\"} 1\n" + UtilLine("6");
  ExpectInvalid(ParseDcgmExposition(page, kScrapeMs, "n"), {"line 2", "longer than 65536 bytes"});
  // Exactly 64 KiB is still a line.
  const std::string prefix = "DCGM_FI_DEV_SM_CLOCK{junk=\"";
  const std::string suffix = "\"} 1";
  const std::string fits =
      prefix + std::string(kLimit - prefix.size() - suffix.size(), 'b') + suffix;
  ASSERT_EQ(fits.size(), kLimit);
  EXPECT_TRUE(ParseDcgmExposition(fits + "\n", kScrapeMs, "n").ok());
}

TEST(DcgmGauges, EveryFieldPerDeviceWithBlanksLeftOut) {
  Result<std::vector<DeviceGauges>> r = ParseDcgmGauges(Fixture("hostname_upper.prom"), "n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const DeviceGauges& g0 = (*r)[0];
  EXPECT_EQ(g0.node, "dgx-a17.fleet.internal");
  EXPECT_EQ(g0.device_uuid, "GPU-5d1e2f3a-8b7c-4e6d-9a0b-1c2d3e4f5a6b");
  EXPECT_EQ(g0.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g0.gpu_index, 0);
  EXPECT_EQ(g0.values.count("DCGM_FI_DEV_MEMORY_TEMP"), 0u);  // NOT_SUPPORTED
  EXPECT_DOUBLE_EQ(g0.values.at("DCGM_FI_DEV_SM_CLOCK"), 1980);
  EXPECT_DOUBLE_EQ(g0.values.at("DCGM_FI_DEV_POWER_USAGE"), 612.457);
  // An int64 counter past 2^47 is a value, not the FP64 blank.
  EXPECT_DOUBLE_EQ(g0.values.at("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), 183350912776.0);
  EXPECT_DOUBLE_EQ(g0.values.at("DCGM_FI_DEV_GPU_UTIL"), 100);
  EXPECT_DOUBLE_EQ(g0.values.at("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), 0.823456);
  EXPECT_EQ(g0.values.size(), 7u);
  EXPECT_EQ((*r)[1].gpu_index, 1);
  EXPECT_EQ((*r)[1].values.size(), 6u);
}

TEST(DcgmGauges, RepeatedFieldsKeepTheWorstAndFp64BlanksAreLeftOut) {
  Result<std::vector<DeviceGauges>> r = ParseDcgmGauges(Fixture("hostname_lower.prom"), "n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const DeviceGauges& idle = (*r)[0];
  const DeviceGauges& busy = (*r)[1];
  EXPECT_EQ(busy.device_uuid, "GPU-7c6b5a49-3827-4165-a0f1-e2d3c4b5a697");
  EXPECT_EQ(busy.node, "gpu-node-042");
  EXPECT_DOUBLE_EQ(busy.values.at("DCGM_EXP_GPU_HEALTH_STATUS"), 10);  // MEM warns
  EXPECT_DOUBLE_EQ(busy.values.at("DCGM_EXP_XID_ERRORS_COUNT"), 3);
  EXPECT_DOUBLE_EQ(busy.values.at("DCGM_FI_DEV_XID_ERRORS"), 13);
  EXPECT_EQ(busy.values.count("DCGM_FI_DEV_ENC_UTIL"), 0u);  // INT32 blank
  EXPECT_DOUBLE_EQ(busy.values.at("DCGM_FI_DEV_POWER_USAGE"), 301.5);
  EXPECT_EQ(idle.values.count("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), 0u);  // FP64 blank
  EXPECT_EQ(idle.values.count("DCGM_FI_DEV_POWER_USAGE"), 0u);
  EXPECT_DOUBLE_EQ(idle.values.at("DCGM_FI_DEV_ENC_UTIL"), 0);
}

TEST(DcgmGauges, MigInstancesAndParentsAreSeparateDevices) {
  Result<std::vector<DeviceGauges>> r = ParseDcgmGauges(Fixture("mig.prom"), "n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> ids;
  for (const DeviceGauges& g : *r) ids.push_back(g.device_uuid);
  // Parents report only blanks here, so only instances with a value appear; instance 9 has none.
  EXPECT_EQ(ids, (std::vector<std::string>{"GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d/7",
                                           "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d/8",
                                           "GPU-c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b/1",
                                           "GPU-c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b/2"}));
  const DeviceGauges& gi1 = (*r)[2];
  EXPECT_DOUBLE_EQ(gi1.values.at("DCGM_FI_DEV_FB_USED"), 30125);
  EXPECT_DOUBLE_EQ(gi1.values.at("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), 0.912);
  EXPECT_EQ(gi1.values.count("DCGM_FI_DEV_GPU_UTIL"), 0u);
  EXPECT_EQ(gi1.gpu_index, 0);
}

TEST(DcgmGauges, EscapedModelNameAndNonFiniteLeftOut) {
  Result<std::vector<DeviceGauges>> r = ParseDcgmGauges(Fixture("escapes.prom"), "n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);  // the unlabelled fabrica_scrape_info lines name no device
  const DeviceGauges& g = (*r)[0];
  EXPECT_EQ(g.model, "Acme \"Quasar\" 9000\\XL");
  EXPECT_EQ(g.node, "rack-7\\node-1\nspare");
  EXPECT_DOUBLE_EQ(g.values.at("DCGM_FI_DEV_GPU_TEMP"), 45);
  EXPECT_DOUBLE_EQ(g.values.at("DCGM_FI_DEV_GPU_UTIL"), 12.5);
  EXPECT_EQ(g.values.count("DCGM_FI_DEV_POWER_USAGE"), 0u);  // +Inf
  EXPECT_EQ(g.values.count("DCGM_FI_DEV_MEM_CLOCK"), 0u);    // NaN
  EXPECT_EQ(g.values.size(), 2u);
}

TEST(DcgmGauges, EmptyPage) {
  Result<std::vector<DeviceGauges>> r = ParseDcgmGauges("", "n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace fabrica
