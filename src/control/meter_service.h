// MeterService: the metering controller of the server, around the pure Meter (meter/).
//
// Sync() reads the store and turns what it sees into the meter's events: a workload whose status
// carries assignments and a scheduledTime is a binding (id: namespace/name@uid@scheduledTime)
// that starts at scheduledTime; it ends at its completionTime when it Succeeded or Failed, and at
// the time of the Sync that finds it requeued (node loss, eviction) or deleted. Every Node's GPUs
// (and MIG instances) are the fleet's capacity from the Node's creation. Sync then seals what the
// lateness allows and commits the changes to the journal in one batch. Telemetry arrives through
// Ingest (agents push samples, or the server reads a dcgm-exporter page).
//
// Budgets: a Tenant's or Queue's spec.budget (amount, period, alertPercent, enforce) is evaluated
// on every Sync against its cost in the current calendar period (what it held: GPU time, and CPU
// and memory where the price book prices them; not its share of idle cost); the state is exported
// as the metric fabrica_budget_spent_ratio and as BudgetAlert / BudgetExceeded conditions in the
// owner's status, and AdmissionHold() tells the scheduler to hold new work whose tenant or queue
// has spent an enforced budget. All methods may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api/api_server.h"
#include "control/clock.h"
#include "meter/ledger.h"
#include "meter/report.h"
#include "store/meter_journal.h"
#include "store/store.h"

namespace fabrica {

// A dcgm-exporter endpoint the server reads itself ("pull"), e.g. http://gpu-node-7:9400/metrics.
// `node` names the node when the page carries no Hostname/hostname label.
struct ScrapeTarget {
  std::string url;
  std::string node;
  std::string ca_file;  // for https
};

struct MeterServiceOptions {
  MeterConfig config;
  PriceBook prices;
  std::string journal_path;  // empty: in memory only (tests)
};

class MeterService {
 public:
  static Result<std::unique_ptr<MeterService>> Open(Store& store, const Clock& clock,
                                                    MeterServiceOptions options);

  Status Sync();
  IngestStats Ingest(std::vector<DeviceSample> samples);
  // Reads every target's page once (stamped with the server's clock) and ingests it. A target
  // that fails is counted and named in the returned error; the others are still read.
  Status ScrapeOnce(const std::vector<ScrapeTarget>& targets);
  Result<std::vector<ReportWindow>> Report(const ReportOptions& options) const;
  // A reason to hold new work of this tenant and queue (an enforced budget is spent), or nothing.
  std::optional<std::string> AdmissionHold(const std::string& tenant,
                                           const std::string& queue) const;
  std::map<std::string, BudgetState> Budgets() const;
  const PriceBook& prices() const { return options_.prices; }
  std::string MetricsText() const;

  // The HTTP routes: GET /allocation (and /allocation/compute), GET .../v1/usage (JSON, or CSV
  // with format=csv), POST .../v1/telemetry (JSON samples or a dcgm-exporter page).
  ApiServer::Extension Routes();

 private:
  MeterService(Store& store, const Clock& clock, MeterServiceOptions options);

  Store& store_;
  const Clock& clock_;
  MeterServiceOptions options_;
  std::unique_ptr<MeterJournal> journal_;
  mutable std::mutex mu_;
  Meter meter_;
  std::map<std::string, std::string> open_binding_;  // workload -> its open binding id
  // The next Sync binds the open bindings again: restored from the journal, they lack the
  // compute shares their devices' busy time is split by (Meter::Bind).
  bool refill_compute_ = false;
  // The usage counters' last values by series, so that /metrics never reads one going down
  // (UsageMetricsText).
  mutable std::map<std::string, double> metric_floors_;
  std::map<std::string, Budget> budgets_;  // "tenant/x" or "queue/y"
  std::map<std::string, BudgetState> budget_state_;
  // Totals for the Prometheus counters, per (tenant, queue, model), over sealed time.
  int64_t last_sync_ms_ = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> scrapes_;  // url -> (ok, failed)
};

}  // namespace fabrica
