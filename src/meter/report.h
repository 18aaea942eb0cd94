// Usage and cost reports over the ledger: aggregation, prices, idle cost, budgets.
//
// Amounts stay integers to the end: GPU time in milli-GPU·ms, money in micro-units of the
// currency. CPU and memory held by bindings are priced per core-hour and GiB-hour when the price
// book has those prices; idle cost is GPU capacity only (CPU and memory idle are not metered).
// Costs are computed per GPU model: a row's cost is floor(held × price / 3.6e9) (price per
// GPU-hour); the fleet's cost of a model is its capacity priced the same way; idle cost is the
// difference, so rows plus idle add up exactly to the fleet's cost. With shareIdle, each model's
// idle cost is split among the rows by their cost of that model with the largest-remainder rule
// (OpenCost's proportional rule, made exact); a model nobody used keeps its idle cost in
// `__idle__`. MIG slices are priced by their compute fraction and fractional shares by their
// milli-GPU, since both are held amounts. A row keyed by a field its bindings lack (the queue
// of work no queue was charged for) has the key part `__unallocated__`, as OpenCost's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/workload.h"
#include "meter/ledger.h"

namespace fabrica {

struct PriceBook {
  std::string currency = "USD";
  std::map<std::string, int64_t> gpu_hour_micros;  // GPU model -> price of one GPU-hour
  int64_t default_gpu_hour_micros = 0;             // models not listed
  int64_t cpu_core_hour_micros = 0;                // optional: CPU held, per core-hour
  int64_t gib_hour_micros = 0;                     // optional: memory held, per GiB-hour

  int64_t PriceOf(const std::string& model) const;
};

// A price book in YAML: `currency: USD`, `gpuHour: {H100: "2.49", ...}`, `default: "1.00"`
// (the price of models not listed), and optionally `cpuCoreHour` and `gibHour` for the CPU and
// memory that bindings hold. Errors name the file, line and field.
Result<PriceBook> ParsePriceBook(const std::string& yaml, const std::string& source);

// kCluster keys every row by the one cluster's name (OpenCost's aggregate=cluster: totals).
enum class AggregateBy { kTenant, kQueue, kWorkload, kNode, kModel, kCluster };
Result<std::vector<AggregateBy>> ParseAggregate(const std::string& text);

// The model of the rows that hold the CPU and memory of bindings' pods when a report is
// aggregated by model (no GPU model: their GPU time is in their GPUs' models' rows).
inline constexpr char kCpuMemoryModel[] = "cpu-memory";
// The cluster's name in reports (OpenCost's `cluster` property).
inline constexpr char kClusterName[] = "fabrica";
// The key part of a row whose bindings lack the field aggregated by (OpenCost's).
inline constexpr char kUnallocated[] = "__unallocated__";

struct ReportOptions {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int64_t step_ms = 0;  // 0: one window
  std::vector<AggregateBy> by = {AggregateBy::kTenant};
  bool share_idle = false;
  // Only rows whose tenant is in this set (empty: all). Idle is then not reported.
  std::vector<std::string> tenants;
};

struct ReportRow {
  std::string key;
  std::map<std::string, std::string> properties;  // tenant, queue, workload, node, model
  int64_t held = 0;                               // milli-GPU·ms
  int64_t used = 0;                               // milli-GPU·ms
  int64_t unknown = 0;                            // held while utilization was unknown
  int64_t cost_micros = 0;                        // GPU time held
  int64_t idle_cost_micros = 0;                   // the row's part of the shared (GPU) idle cost
  int64_t cpu_milli_ms = 0;                       // CPU held, milli-core·ms
  int64_t memory_mib_ms = 0;                      // memory held, MiB·ms
  int64_t cpu_cost_micros = 0;
  int64_t ram_cost_micros = 0;
  bool shared_gpu = false;  // some of its devices were fractional shares
  bool mig = false;
  int64_t total_cost_micros() const {
    return cost_micros + idle_cost_micros + cpu_cost_micros + ram_cost_micros;
  }
};

struct ReportWindow {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::vector<ReportRow> rows;  // sorted by key
  ReportRow idle;               // key "__idle__": unallocated capacity and its cost not shared
  int64_t capacity = 0;         // milli-GPU·ms the fleet's devices offered
  int64_t fleet_cost_micros = 0;
  int64_t unattributed_used = 0;  // busy time on devices no binding held
};

Result<std::vector<ReportWindow>> BuildReport(const Meter& meter, const PriceBook& prices,
                                              const ReportOptions& options);

// The usage counters of /metrics in Prometheus' text format, over [0, now_ms), per tenant and
// queue charged (`queue=""` where none was: no Queue exists): GPU-seconds held and used and
// their cost per GPU model (fabrica_gpu_seconds_allocated_total, fabrica_gpu_seconds_used_total,
// fabrica_gpu_cost_total), and the CPU core-seconds and memory byte-seconds the bindings' pods
// held (fabrica_cpu_core_seconds_allocated_total, fabrica_memory_byte_seconds_allocated_total)
// with their cost (fabrica_cpu_cost_total, fabrica_memory_cost_total, where the price book
// prices them), so that the cost counters add up to what the report bills.
// `floors`, where given, keeps each series from going down between calls (its last value by
// series): an open binding is counted up to `now_ms`, and when its end is learnt later than it
// happened its time is cut back, which Prometheus would read as a counter reset (rate() and
// increase() counting the whole total again). The series holds until the total passes it again.
std::string UsageMetricsText(const Meter& meter, const PriceBook& prices, int64_t now_ms,
                             std::map<std::string, double>* floors = nullptr);

Result<std::pair<int64_t, int64_t>> PeriodBounds(const std::string& period, int64_t now_ms);

struct BudgetState {
  int64_t spent_micros = 0;
  int64_t amount_micros = 0;
  int highest_alert = 0;  // the highest threshold crossed, 0 if none
  bool exceeded = false;
  std::string message;
};

BudgetState EvaluateBudget(const Budget& budget, int64_t spent_micros, const std::string& who);

}  // namespace fabrica
