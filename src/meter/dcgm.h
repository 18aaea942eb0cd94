// Reading dcgm-exporter's `/metrics` page (Prometheus text exposition 0.0.4) into Fabrica's
// utilization samples and per-device gauges.
//
// The parser is hand-written and works on the page as one string: it allocates per device, not
// per line, and never reads a clock, a file or the network (the caller fetches the page and says
// when). It accepts what dcgm-exporter releases emit: `Hostname` (up to 4.5.x) or `hostname`
// (newer) for the node, `UUID` or `uuid` (--use-old-namespace) for the device, `GPU_I_ID` for a
// MIG instance, blanks after commas inside `{}`, trailing commas, escaped label values and
// optional per-line timestamps. HELP, TYPE and other `#` lines are read as comments: Fabrica keys
// on the field names, not on the declared types. Any syntax error fails the whole page with
// InvalidArgument naming the line, so a caller never meters half a scrape.
//
// DCGM reports "no value" with sentinels, which are never used as values:
//   - an integer value >= 9223372036854775792 (DCGM_INT64_BLANK and the NOT_FOUND,
//     NOT_SUPPORTED and NOT_PERMISSIONED codes after it), or too large for 64 bits;
//   - a value in 2147483632..2147483647 (DCGM_INT32_BLANK and the codes after it, up to the
//     largest int32): the rare real int64 counter that lands there is dropped for one scrape;
//   - a value written as a float (with '.', 'e' or 'E') >= 140737488355328.0 (DCGM_FP64_BLANK).
//     The FP64 rule is not applied to integer text, because int64 counters such as NVLink
//     bandwidth or energy legitimately grow past 2^47.
//
// Both functions are pure and thread-compatible: they may run concurrently on different pages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "meter/telemetry.h"

namespace fabrica {

// What one ParseDcgmExposition call read. Every sample line falls in exactly one of: a
// utilization candidate (DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL with a usable
// value), blanks_skipped, non_finite_skipped or ignored_metrics.
struct DcgmParseStats {
  int lines = 0;               // every line of the page, comments and empty lines included
  int samples = 0;             // DeviceSample values returned
  int blanks_skipped = 0;      // utilization lines whose value was a DCGM blank sentinel
  int ignored_metrics = 0;     // sample lines of any other metric (read for syntax, not used)
  int non_finite_skipped = 0;  // utilization lines whose value was NaN or +/-Inf
};

// Parses one scrape into one DeviceSample per device that has a usable utilization value.
//
// Utilization of a device is DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio 0..1) when the page has a
// usable value of it for that device, else DCGM_FI_DEV_GPU_UTIL (percent 0..100, absent or blank
// on MIG instances). It becomes per-mille, rounded half up and clamped to 0..1000. A line's own
// timestamp (Unix ms) is the sample's time; `scrape_time_ms` stands in for lines without one.
// A field that appears more than once for one device (one line per pod under Kubernetes
// mapping) keeps its largest value.
//
// Identity: the device is the `UUID` (or `uuid`) label, and "<UUID>/<GPU_I_ID>" for a MIG
// instance (a non-empty `GPU_I_ID` label). The node is the non-empty `hostname` or `Hostname`
// label (`hostname` first), else `default_node`. A utilization line without a UUID is an error,
// because metering it would mean guessing the device.
//
// Samples come out sorted by (node, device_uuid). `stats`, when given, is overwritten on
// success only.
Result<std::vector<DeviceSample>> ParseDcgmExposition(std::string_view text, int64_t scrape_time_ms,
                                                      const std::string& default_node,
                                                      DcgmParseStats* stats = nullptr);

// Every numeric series per device (field name -> value), for health checks and dashboards, with
// the same identity rules. Blank sentinels, NaN and Inf are left out. A field that appears more
// than once for one device keeps its largest value: for DCGM_EXP_GPU_HEALTH_STATUS (one line per
// health watch; 0 pass, 10 warn, 20 fail) that is the worst result. Lines without a `UUID` or
// `uuid` label (NVLink and NVSwitch series, which use `gpu_uuid` or `nvswitch` per link or per
// switch) are skipped. `model` is the `modelName` label and `gpu_index` the `gpu` label (-1 when
// absent or not an integer). Sorted by (node, device_uuid).
Result<std::vector<DeviceGauges>> ParseDcgmGauges(std::string_view text,
                                                  const std::string& default_node);

}  // namespace fabrica
