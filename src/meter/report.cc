#include "meter/report.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>

#include "core/yaml_reader.h"

namespace fabrica {

namespace {

constexpr int64_t kMilliGpuMsPerGpuHour = 1000LL * 3'600'000LL;
constexpr int64_t kDayMs = 86'400'000;

int64_t CostOf(int64_t held_milli_ms, int64_t price_micros) {
  return static_cast<int64_t>(static_cast<__int128>(held_milli_ms) * price_micros /
                              kMilliGpuMsPerGpuHour);
}

// What a row is keyed by: an interval's or a pod's tenant, queue, workload, node and model.
struct RowFields {
  const std::string& tenant;
  const std::string& queue;
  const std::string& workload;
  const std::string& node;
  const std::string& model;
};

std::string KeyPart(const RowFields& f, AggregateBy by) {
  switch (by) {
    case AggregateBy::kTenant:
      return f.tenant;
    case AggregateBy::kQueue:
      return f.queue;
    case AggregateBy::kWorkload:
      return f.workload;
    case AggregateBy::kNode:
      return f.node;
    case AggregateBy::kModel:
      return f.model;
    case AggregateBy::kCluster:
      return kClusterName;
  }
  return "";
}

const char* AggregateName(AggregateBy by) {
  switch (by) {
    case AggregateBy::kTenant:
      return "tenant";
    case AggregateBy::kQueue:
      return "queue";
    case AggregateBy::kWorkload:
      return "workload";
    case AggregateBy::kNode:
      return "node";
    case AggregateBy::kModel:
      return "model";
    case AggregateBy::kCluster:
      return "cluster";
  }
  return "";
}

// The row these fields aggregate into, made on first use with its key and properties.
ReportRow& RowFor(std::map<std::string, ReportRow>& rows, const std::vector<AggregateBy>& by,
                  const RowFields& f) {
  std::string key;
  for (size_t i = 0; i < by.size(); ++i) {
    const std::string part = KeyPart(f, by[i]);
    key += (i > 0 ? "/" : "") + (part.empty() ? std::string(kUnallocated) : part);
  }
  ReportRow& row = rows[key];
  if (row.key.empty()) {
    row.key = key;
    for (AggregateBy b : by) row.properties[AggregateName(b)] = KeyPart(f, b);
  }
  return row;
}

// Days since 1970-01-01 to a civil date and back (proleptic Gregorian, UTC).
void CivilFromDays(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

int64_t PriceBook::PriceOf(const std::string& model) const {
  auto it = gpu_hour_micros.find(model);
  return it == gpu_hour_micros.end() ? default_gpu_hour_micros : it->second;
}

Result<PriceBook> ParsePriceBook(const std::string& yaml, const std::string& source) {
  ASSIGN_OR_RETURN(Doc doc, LoadYaml(yaml, source));
  YamlMap m(doc, "", source);
  RETURN_IF_ERROR(m.CheckIsMap());
  PriceBook book;
  ASSIGN_OR_RETURN(book.currency, m.String("currency", "USD"));
  ASSIGN_OR_RETURN(std::string fallback, m.String("default", "0"));
  auto d = ParseMoneyMicros(fallback);
  if (!d.ok()) return m.Error("default", d.status().message());
  book.default_gpu_hour_micros = *d;
  for (const auto& [key, field] :
       {std::pair<const char*, int64_t*>{"cpuCoreHour", &book.cpu_core_hour_micros},
        {"gibHour", &book.gib_hour_micros}}) {
    ASSIGN_OR_RETURN(std::string text, m.String(key, "0"));
    auto v = ParseMoneyMicros(text);
    if (!v.ok()) return m.Error(key, v.status().message());
    *field = *v;
  }
  ASSIGN_OR_RETURN(auto per_model, m.StringMap("gpuHour"));
  for (const auto& [model, price] : per_model) {
    auto p = ParseMoneyMicros(price);
    if (!p.ok()) return m.Error("gpuHour." + model, p.status().message());
    book.gpu_hour_micros[model] = *p;
  }
  RETURN_IF_ERROR(m.Finish());
  return book;
}

Result<std::vector<AggregateBy>> ParseAggregate(const std::string& text) {
  std::vector<AggregateBy> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    // OpenCost's names for the same groupings are accepted too.
    if (part == "tenant" || part == "namespace") {
      out.push_back(AggregateBy::kTenant);
    } else if (part == "queue") {
      out.push_back(AggregateBy::kQueue);
    } else if (part == "workload" || part == "pod" || part == "controller") {
      out.push_back(AggregateBy::kWorkload);
    } else if (part == "node") {
      out.push_back(AggregateBy::kNode);
    } else if (part == "model" || part == "gpuModel") {
      out.push_back(AggregateBy::kModel);
    } else if (part == "cluster") {
      out.push_back(AggregateBy::kCluster);
    } else {
      return InvalidArgument("aggregate: '" + part +
                             "' is not one of tenant (namespace), queue, workload (pod), node, "
                             "model, cluster");
    }
    start = comma + 1;
  }
  return out;
}

Result<std::vector<ReportWindow>> BuildReport(const Meter& meter, const PriceBook& prices,
                                              const ReportOptions& options) {
  if (options.to_ms <= options.from_ms) return InvalidArgument("window: end is not after start");
  if (options.by.empty()) return InvalidArgument("aggregate: empty");
  if (options.step_ms < 0) return InvalidArgument("step: negative");
  const int64_t step = options.step_ms == 0 ? options.to_ms - options.from_ms : options.step_ms;
  if ((options.to_ms - options.from_ms) / step > 10'000) {
    return InvalidArgument("step: more than 10000 windows; use a larger step");
  }
  const bool filtered = !options.tenants.empty();
  std::vector<ReportWindow> out;
  for (int64_t from = options.from_ms; from < options.to_ms; from += step) {
    ReportWindow w;
    w.from_ms = from;
    w.to_ms = std::min(from + step, options.to_ms);
    std::map<std::string, ReportRow> rows;
    std::map<std::string, std::map<std::string, int64_t>> held_by_model;  // key -> model -> held
    for (const IntervalUsage& u : meter.Usage(w.from_ms, w.to_ms)) {
      const Interval& iv = *u.interval;
      if (filtered && std::find(options.tenants.begin(), options.tenants.end(), iv.tenant) ==
                          options.tenants.end()) {
        continue;
      }
      ReportRow& row = RowFor(rows, options.by,
                              {iv.tenant, iv.queue, iv.workload, iv.device.node, iv.device.model});
      row.held += u.held;
      row.used += u.used;
      row.unknown += u.unknown;
      row.shared_gpu =
          row.shared_gpu || (iv.device.gpu_milli < 1000 && iv.device.mig_profile.empty());
      row.mig = row.mig || !iv.device.mig_profile.empty();
      held_by_model[row.key][iv.device.model] += u.held;
    }
    // CPU and memory the bindings' pods held.
    for (const PodHold* p : meter.PodsIn(w.from_ms, w.to_ms)) {
      if (filtered && std::find(options.tenants.begin(), options.tenants.end(), p->tenant) ==
                          options.tenants.end()) {
        continue;
      }
      static const std::string kCpuMemory = kCpuMemoryModel;  // not a GPU model
      ReportRow& row =
          RowFor(rows, options.by, {p->tenant, p->queue, p->workload, p->pod.node, kCpuMemory});
      row.cpu_milli_ms += p->CpuHeldIn(w.from_ms, w.to_ms);
      row.memory_mib_ms += p->MemoryHeldIn(w.from_ms, w.to_ms);
    }
    for (auto& [key, row] : rows) {
      row.cpu_cost_micros =
          static_cast<int64_t>(static_cast<__int128>(row.cpu_milli_ms) *
                               prices.cpu_core_hour_micros / (1000LL * 3'600'000));
      row.ram_cost_micros = static_cast<int64_t>(static_cast<__int128>(row.memory_mib_ms) *
                                                 prices.gib_hour_micros / (1024LL * 3'600'000));
    }
    // Costs per model, then the fleet's cost of each model and its idle part.
    std::map<std::string, int64_t> model_cost, model_capacity;
    std::map<std::string, std::vector<std::pair<std::string, int64_t>>> model_rows;
    for (auto& [key, by_model] : held_by_model) {
      for (const auto& [model, held] : by_model) {
        const int64_t cost = CostOf(held, prices.PriceOf(model));
        rows[key].cost_micros += cost;
        model_cost[model] += cost;
        model_rows[model].push_back({key, cost});
      }
    }
    for (const FleetDevice& d : meter.devices()) {
      if (!d.parent_uuid.empty()) continue;  // a MIG instance: its GPU counts
      const int64_t ms =
          std::max<int64_t>(0, std::min(d.until_ms, w.to_ms) - std::max(d.since_ms, w.from_ms));
      model_capacity[d.model] += 1000 * ms;
    }
    int64_t total_held = 0;
    for (const auto& [key, row] : rows) total_held += row.held;
    w.capacity = 0;
    for (const auto& [model, capacity] : model_capacity) w.capacity += capacity;
    w.idle.key = "__idle__";
    w.idle.held = std::max<int64_t>(0, w.capacity - total_held);
    std::set<std::string> models;
    for (const auto& [m, c] : model_capacity) models.insert(m);
    for (const auto& [m, c] : model_cost) models.insert(m);
    for (const std::string& model : models) {
      const int64_t fleet =
          std::max(CostOf(model_capacity[model], prices.PriceOf(model)), model_cost[model]);
      w.fleet_cost_micros += fleet;
      const int64_t idle = fleet - model_cost[model];
      if (filtered) continue;
      const auto& sharers = model_rows[model];
      bool any = false;
      for (const auto& [key, cost] : sharers) any = any || cost > 0;
      if (!options.share_idle || !any) {
        w.idle.cost_micros += idle;
        continue;
      }
      std::vector<int64_t> weights;
      for (const auto& [key, cost] : sharers) weights.push_back(cost);
      const std::vector<int64_t> parts = LargestRemainderSplit(idle, weights);
      for (size_t i = 0; i < sharers.size(); ++i) {
        rows[sharers[i].first].idle_cost_micros += parts[i];
      }
    }
    if (!filtered) w.unattributed_used = meter.UnattributedUsed(w.from_ms, w.to_ms);
    for (auto& [key, row] : rows) w.rows.push_back(std::move(row));
    out.push_back(std::move(w));
  }
  return out;
}

std::string UsageMetricsText(const Meter& meter, const PriceBook& prices, int64_t now_ms,
                             std::map<std::string, double>* floors) {
  ReportOptions opt;
  opt.from_ms = 0;
  opt.to_ms = std::max<int64_t>(now_ms, 1);
  opt.by = {AggregateBy::kTenant, AggregateBy::kQueue, AggregateBy::kModel};
  auto report = BuildReport(meter, prices, opt);
  std::vector<const ReportRow*> gpu, pods;  // GPU time by model; CPU and memory
  if (report.ok()) {
    for (const ReportRow& r : (*report)[0].rows) {
      (r.properties.at("model") == kCpuMemoryModel ? pods : gpu).push_back(&r);
    }
  }
  std::string out;
  auto family = [&](const char* name, const char* help, const std::vector<const ReportRow*>& rows,
                    bool by_model, const std::function<double(const ReportRow&)>& value) {
    out += std::string("# HELP ") + name + " " + help + "\n";
    out += std::string("# TYPE ") + name + " counter\n";
    for (const ReportRow* r : rows) {
      const std::string series = std::string(name) + "{tenant=\"" + r->properties.at("tenant") +
                                 "\",queue=\"" + r->properties.at("queue") + "\"" +
                                 (by_model ? ",model=\"" + r->properties.at("model") + "\"" : "") +
                                 "}";
      double v = value(*r);
      if (floors) {
        double& floor = (*floors)[series];
        v = std::max(v, floor);
        floor = v;
      }
      out += series + " " + std::to_string(v) + "\n";
    }
  };
  family("fabrica_gpu_seconds_allocated_total", "GPU-seconds held by bindings.", gpu, true,
         [](const ReportRow& r) { return static_cast<double>(r.held) / 1e6; });
  family("fabrica_gpu_seconds_used_total", "GPU-seconds busy, attributed to bindings.", gpu, true,
         [](const ReportRow& r) { return static_cast<double>(r.used) / 1e6; });
  family("fabrica_gpu_cost_total", "Cost of GPU time held, in the price book's currency.", gpu,
         true, [](const ReportRow& r) { return static_cast<double>(r.cost_micros) / 1e6; });
  // CPU and memory: a series for those who held some, a cost where the price book has a price.
  std::vector<const ReportRow*> cpu, memory;
  for (const ReportRow* r : pods) {
    if (r->cpu_milli_ms > 0) cpu.push_back(r);
    if (r->memory_mib_ms > 0) memory.push_back(r);
  }
  family("fabrica_cpu_core_seconds_allocated_total", "CPU core-seconds held by bindings' pods.",
         cpu, false, [](const ReportRow& r) { return static_cast<double>(r.cpu_milli_ms) / 1e6; });
  family("fabrica_memory_byte_seconds_allocated_total",
         "Memory byte-seconds held by bindings' pods.", memory, false,
         [](const ReportRow& r) { return static_cast<double>(r.memory_mib_ms) * 1048576.0 / 1e3; });
  if (prices.cpu_core_hour_micros > 0) {
    family("fabrica_cpu_cost_total", "Cost of CPU held, in the price book's currency.", cpu, false,
           [](const ReportRow& r) { return static_cast<double>(r.cpu_cost_micros) / 1e6; });
  }
  if (prices.gib_hour_micros > 0) {
    family("fabrica_memory_cost_total", "Cost of memory held, in the price book's currency.",
           memory, false,
           [](const ReportRow& r) { return static_cast<double>(r.ram_cost_micros) / 1e6; });
  }
  return out;
}

Result<std::pair<int64_t, int64_t>> PeriodBounds(const std::string& period, int64_t now_ms) {
  const int64_t day = FloorDiv(now_ms, kDayMs);
  if (period == "day") return std::make_pair(day * kDayMs, (day + 1) * kDayMs);
  if (period == "week") {
    // 1970-01-01 was a Thursday; weeks start on Monday.
    const int64_t monday = day - ((day % 7 + 7 + 3) % 7);
    return std::make_pair(monday * kDayMs, (monday + 7) * kDayMs);
  }
  if (period == "month") {
    int64_t y;
    int m, d;
    CivilFromDays(day, &y, &m, &d);
    const int64_t first = DaysFromCivil(y, m, 1);
    const int64_t next = m == 12 ? DaysFromCivil(y + 1, 1, 1) : DaysFromCivil(y, m + 1, 1);
    return std::make_pair(first * kDayMs, next * kDayMs);
  }
  return InvalidArgument("budget period: '" + period + "' is not one of day, week, month");
}

BudgetState EvaluateBudget(const Budget& budget, int64_t spent_micros, const std::string& who) {
  BudgetState s;
  s.spent_micros = spent_micros;
  s.amount_micros = budget.amount_micros;
  for (int percent : budget.alert_percent) {
    if (static_cast<__int128>(spent_micros) * 100 >=
        static_cast<__int128>(budget.amount_micros) * percent) {
      s.highest_alert = std::max(s.highest_alert, percent);
    }
  }
  s.exceeded = spent_micros >= budget.amount_micros;
  s.message = who + " spent " + FormatMoneyMicros(spent_micros) + " of its " +
              FormatMoneyMicros(budget.amount_micros) + " " +
              (budget.period == "day" ? std::string("daily") : budget.period + "ly") + " budget";
  if (s.highest_alert > 0) s.message += " (past " + std::to_string(s.highest_alert) + "%)";
  return s;
}

}  // namespace fabrica
