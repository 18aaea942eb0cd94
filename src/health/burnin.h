// Burn-in: reading the reports of the tools that prove a node fit for work, and judging them.
//
// Two tools are read, from their recorded output formats:
//   - `dcgmi diag -r N -j`: DCGM's diagnostic ladder as JSON, test categories → tests → one
//     result per GPU ("Pass", "Fail", "Warn", "Skip", "Not Run") with warnings;
//   - nccl-tests' `all_reduce_perf` text output: the per-size table (size, count, type, redop,
//     root, then time / algbw / busbw / #wrong out of place and in place), the "Out of bounds
//     values" line and the "Avg bus bandwidth" footer.
// A malformed report is InvalidArgument naming what is wrong (field path, or line number and
// column); the parsers change nothing. JudgeBurnIn compares the reports with what the node type
// should reach: every DCGM test passed, no wrong values, and an all-reduce bus bandwidth at the
// largest message size inside the expected band (e.g. 370–480 GB/s on 8×H100/H200 NVSwitch).
// The largest size, not the average, is compared because the average over 8 B–8 GB is dominated
// by latency-bound small sizes and says little about the links. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"

namespace fabrica::health {

struct DcgmTestResult {
  std::string category;
  std::string test;
  int gpu = -1;
  std::string status;   // "Pass", "Fail", "Warn", "Skip", "Not Run"
  std::string warning;  // warnings joined with "; "
};

struct DcgmDiagReport {
  std::vector<DcgmTestResult> results;
};

// Accepts the top-level object "DCGM GPU Diagnostic" (DCGM 2.x/3.x) or "DCGM Diagnostic";
// a result names its GPU as "gpu_id" (string or integer) or "entity_id".
Result<DcgmDiagReport> ParseDcgmDiagJson(const std::string& text);

struct NcclSizeRow {
  int64_t bytes = 0;
  int64_t count = 0;
  std::string type;
  std::string redop;
  double out_time_us = 0, out_algbw_gbps = 0, out_busbw_gbps = 0;
  int64_t out_wrong = 0;  // -1 when the run did not check ("N/A")
  double in_time_us = 0, in_algbw_gbps = 0, in_busbw_gbps = 0;
  int64_t in_wrong = 0;
};

struct NcclReport {
  std::vector<NcclSizeRow> rows;  // in the order printed
  double avg_busbw_gbps = 0;
  bool out_of_bounds_ok = true;
  int64_t out_of_bounds = 0;

  // The better of out-of-place and in-place bus bandwidth at the largest size.
  double peak_busbw_gbps() const;
};

Result<NcclReport> ParseNcclAllReduce(const std::string& text);

struct BusBwBand {
  double min_gbps = 0;
  double max_gbps = 0;
};

// The all-reduce bus bandwidth a healthy node of this type reaches; nullopt where Fabrica has no
// measured figure (the NCCL part of burn-in is then skipped).
std::optional<BusBwBand> ExpectedAllReduceBusBw(const std::string& model, int gpus);

struct BurnInResult {
  bool passed = false;
  std::vector<int> failed_gpus;       // GPUs a DCGM test failed on
  std::vector<std::string> failures;  // one sentence each
  std::string summary;
};

// Judges a node's burn-in from whichever reports it has (either may be null, not both).
// REQUIRES: dcgm != nullptr || nccl != nullptr.
BurnInResult JudgeBurnIn(const Node& node, const DcgmDiagReport* dcgm, const NcclReport* nccl);

// A simulated node's burn-in: GPUs in `bad_gpus` fail DCGM's memory test; the rest pass, and the
// node's bus bandwidth is the middle of its band.
BurnInResult SimulatedBurnIn(const Node& node, const std::vector<int>& bad_gpus);

}  // namespace fabrica::health
