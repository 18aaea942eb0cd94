#include "control/meter_service.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "api/json_fields.h"
#include "api/replies.h"
#include "client/http_client.h"
#include "core/fleet.h"
#include "core/workload.h"
#include "core/yaml_reader.h"
#include "meter/dcgm.h"
#include "sched/cluster_state.h"

namespace fabrica {

using namespace jsonf;  // NOLINT(google-build-using-namespace): the typed JSON accessors

namespace {

using json = nlohmann::json;

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kDayMs = 86'400'000;
constexpr size_t kMaxTelemetryBody = 16 << 20;

HttpResponse JsonReply(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

// (A Status object, as every other route's error; its code and message are OpenCost's.)
HttpResponse ErrorReply(int status, const std::string& message) {
  return replies::Error(status, message);
}

HttpResponse ErrorReply(const Status& st) {
  return ErrorReply(HttpStatusFor(st.code()), st.message());
}

// "30m", "12h", "7d" -> ms; -1 when not a duration.
int64_t ParseDuration(const std::string& s) {
  if (s.size() < 2) return -1;
  auto n = ParseNonNegativeInt(s.substr(0, s.size() - 1));
  if (!n.ok() || *n > 100'000) return -1;
  switch (s.back()) {
    case 's':
      return *n * 1000;
    case 'm':
      return *n * 60'000;
    case 'h':
      return *n * kHourMs;
    case 'd':
      return *n * kDayMs;
  }
  return -1;
}

int64_t ParseInstant(const std::string& s) {
  auto unix_seconds = ParseNonNegativeInt(s);
  if (unix_seconds.ok()) return *unix_seconds * 1000;
  return ParseTimestamp(s);
}

}  // namespace

// OpenCost's window grammar: today, week, month, yesterday, lastweek, lastmonth; a duration
// ending now (30m, 12h, 7d); or "start,end" as RFC 3339 or Unix seconds.
Result<std::pair<int64_t, int64_t>> ParseWindow(const std::string& window, int64_t now_ms) {
  if (window.empty()) return InvalidArgument("window is required (e.g. 7d, today, or start,end)");
  const int64_t today = now_ms / kDayMs * kDayMs;
  if (window == "today") return std::make_pair(today, now_ms);
  if (window == "yesterday") return std::make_pair(today - kDayMs, today);
  if (window == "week" || window == "lastweek" || window == "month" || window == "lastmonth") {
    const bool last = window.rfind("last", 0) == 0;
    const std::string period = last ? window.substr(4) : window;
    ASSIGN_OR_RETURN(auto bounds, PeriodBounds(period, now_ms));
    if (!last) return std::make_pair(bounds.first, now_ms);
    ASSIGN_OR_RETURN(auto prev, PeriodBounds(period, bounds.first - 1));
    return prev;
  }
  if (const int64_t d = ParseDuration(window); d > 0) return std::make_pair(now_ms - d, now_ms);
  const size_t comma = window.find(',');
  if (comma != std::string::npos) {
    const int64_t a = ParseInstant(window.substr(0, comma));
    const int64_t b = ParseInstant(window.substr(comma + 1));
    if (a < 0 || b < 0) {
      return InvalidArgument("window '" + window +
                             "': start and end must be RFC 3339 times or Unix seconds");
    }
    if (b <= a) return InvalidArgument("window '" + window + "': end is not after start");
    return std::make_pair(a, std::min(b, now_ms));
  }
  return InvalidArgument("window '" + window +
                         "' is not one of today, yesterday, week, lastweek, month, lastmonth, a "
                         "duration such as 7d, or start,end");
}

MeterService::MeterService(Store& store, const Clock& clock, MeterServiceOptions options)
    : store_(store), clock_(clock), options_(std::move(options)), meter_(options_.config) {}

Result<std::unique_ptr<MeterService>> MeterService::Open(Store& store, const Clock& clock,
                                                         MeterServiceOptions options) {
  std::unique_ptr<MeterService> s(new MeterService(store, clock, std::move(options)));
  if (!s->options_.journal_path.empty()) {
    ASSIGN_OR_RETURN(s->journal_, MeterJournal::Open(s->options_.journal_path));
    ASSIGN_OR_RETURN(MeterSnapshot snap, s->journal_->Load());
    s->meter_.Restore(std::move(snap));
  }
  // Open bindings (from the journal) by workload, so a requeue seen after a restart ends them.
  s->open_binding_ = s->meter_.OpenBindings();
  s->refill_compute_ = !s->open_binding_.empty();
  return s;
}

Status MeterService::Sync() {
  const int64_t now = clock_.NowMs();
  ASSIGN_OR_RETURN(ListResult nodes, store_.List("/registry/nodes/", "", 0));
  ASSIGN_OR_RETURN(ListResult workloads, store_.List("/registry/workloads/", "", 0));
  ASSIGN_OR_RETURN(ListResult tenants, store_.List("/registry/tenants/", "", 0));
  std::lock_guard<std::mutex> lock(mu_);

  // The fleet's devices, and each node's devices by index for the bindings below.
  struct NodeDevice {
    std::string uuid, model;
    int64_t memory_mib = 0;  // 0: not given
  };
  std::map<std::string, std::vector<NodeDevice>> node_devices;
  std::set<std::string> present;
  for (const KeyValue& kv : nodes.items) {
    json n = json::parse(kv.value, nullptr, false);
    const std::string name = Str(Field(n, "metadata"), "name");
    int64_t since = ParseTimestamp(Str(Field(n, "metadata"), "creationTimestamp"));
    if (since < 0) since = now;
    auto& devs = node_devices[name];
    for (const json& d : List(Field(n, "spec"), "devices")) {
      const std::string uuid = Str(d, "uuid");
      const std::string model = Str(d, "model");
      auto memory = ParseMemoryMib(Str(d, "memory"));
      devs.push_back({uuid, model, memory.ok() ? memory->value() : 0});
      if (uuid.empty()) continue;
      present.insert(uuid);
      (void)meter_.AddDevice({uuid, name, model, since, kOpenEnd, "", 1000});
      const auto slices = List(d, "migSlices");
      for (size_t i = 0; i < slices.size(); ++i) {
        const MigProfile* p =
            FindMigProfile(model, slices[i].is_string() ? slices[i].get<std::string>() : "",
                           MemoryMib(memory.ok() ? memory->value() : 0));
        const int32_t milli = p ? MigSliceMilli(p->compute_slices) : 1000;
        (void)meter_.AddDevice(
            {uuid + "/" + std::to_string(i), name, model, since, kOpenEnd, uuid, milli});
      }
    }
  }
  for (const FleetDevice& d : meter_.devices()) {
    if (d.until_ms == kOpenEnd && d.parent_uuid.empty() && !present.count(d.uuid)) {
      (void)meter_.RemoveDevice(d.uuid, now);
    }
  }

  // The tenants, read once: untrusted ones (a GPU their fractions use is theirs alone:
  // FractionCharge) for the bindings, budgets below.
  std::vector<std::pair<const KeyValue*, Tenant>> tenant_specs;
  std::set<std::string> untrusted;
  for (const KeyValue& kv : tenants.items) {
    auto m = ParseManifestYaml(kv.value, kv.key);
    if (!m.ok() || m->tenants.empty()) continue;
    if (m->tenants.front().trust == TrustLevel::kUntrusted)
      untrusted.insert(m->tenants.front().name.str());
    tenant_specs.push_back({&kv, std::move(m->tenants.front())});
  }

  // Bindings.
  std::map<std::string, std::string> tenant_queue;  // default queue name per tenant
  std::set<std::string> seen;
  for (const KeyValue& kv : workloads.items) {
    json w = json::parse(kv.value, nullptr, false);
    if (!w.is_object()) continue;
    const json& meta = Field(w, "metadata");
    const std::string ns = Str(meta, "namespace");
    const std::string workload = ns + "/" + Str(meta, "name");
    seen.insert(workload);
    const json& status = Field(w, "status");
    const std::string phase = Str(status, "phase", "Pending");
    const int64_t scheduled = ParseTimestamp(Str(status, "scheduledTime"));
    const auto& assignments = List(status, "assignments");
    std::string current;
    // Grown (elastic growth) since it was bound: a binding of its own from then, the last one
    // ending there.
    const int64_t resized = ParseTimestamp(Str(status, "resizedTime"));
    const bool grown = scheduled >= 0 && resized >= scheduled;
    // Some of its pods completed while it runs on (status.finishedPods): they give their
    // devices back (the scheduler's reclaimablePods), so from the last one's completion it is a
    // binding of the others alone (of none, once all completed, until its phase says so).
    const bool terminal = phase == "Succeeded" || phase == "Failed";
    std::set<std::string> completed;
    int64_t completed_at = -1;
    if (const json& finished = Field(status, "finishedPods"); finished.is_object() && !terminal) {
      for (const json& a : assignments) {
        if (!finished.contains(Str(a, "pod"))) continue;
        completed.insert(Str(a, "pod"));
        const int64_t at = ParseTimestamp(Str(finished, Str(a, "pod").c_str()));
        completed_at = std::max(completed_at, at < 0 ? now : std::min(at, now));
      }
    }
    const int64_t bound_at = grown ? resized : scheduled;
    // Charged to another queue since it was bound (status.resourceUsage.since: its tenant
    // dropped from the queue it names, or let back): a binding of its own from then, billed to
    // the queue it has now.
    const int64_t moved = ParseTimestamp(Str(Field(status, "resourceUsage"), "since"));
    const bool charge_moved = scheduled >= 0 && moved > bound_at && moved <= now;
    int64_t start = completed.empty() ? bound_at : std::max(bound_at, completed_at);
    if (charge_moved) start = std::max(start, moved);
    const std::string binding = workload + "@" + Str(meta, "uid") + "@" + std::to_string(scheduled);
    // (The binding of its current size, before any change of the queue charged.)
    const std::string sized = binding + (grown ? "@" + std::to_string(resized) : "");
    std::string whole;  // the binding of all its pods
    if (!assignments.empty() && scheduled >= 0) {
      whole = sized + (charge_moved ? "~" + std::to_string(moved) : "");
      current = whole + (completed.empty() ? "" : "#" + std::to_string(completed.size()));
    }
    auto open = open_binding_.find(workload);
    // (This binding was metered: one of its sizes is open.)
    const bool metered =
        open != open_binding_.end() &&
        (open->second == binding || open->second.rfind(binding + "@", 0) == 0 ||
         open->second.rfind(binding + "#", 0) == 0 || open->second.rfind(binding + "~", 0) == 0);
    // (Ended, it closes the binding of its pods still running, if that is the one open.)
    if (open != open_binding_.end() && terminal && !whole.empty() &&
        open->second.rfind(whole + "#", 0) == 0)
      current = open->second;
    if (open != open_binding_.end() && open->second != current) {
      const bool resize =
          (grown || !completed.empty() || charge_moved) && !current.empty() && metered;
      const std::string why = resize ? (charge_moved && start == moved ? "queue-changed"
                                        : completed.empty()            ? "resized"
                                                                       : "pods-completed")
                              : phase == "Pending" ? "requeued"
                                                   : "rebound";
      // (A resize time before the open binding's start, from a status edited by hand: now.)
      if (!resize || !meter_.End({open->second, std::max<int64_t>(start, 0), why}).ok())
        (void)meter_.End({open->second, now, why});
      open_binding_.erase(open);
    }
    if (current.empty()) continue;
    // Ended, and metered already (with all its pods, or, once some completed, with the others:
    // `whole#n`): nothing more to bill. (Only one the meter never saw is bound, and ended, now.)
    if (terminal && !open_binding_.count(workload)) {
      bool seen_before = meter_.HasBinding(whole);
      for (size_t n = 1; n <= assignments.size() && !seen_before; ++n)
        seen_before = meter_.HasBinding(whole + "#" + std::to_string(n));
      if (seen_before) continue;
    }
    // What its pods (less those in `skip`) hold, as a binding `id` from `from`.
    const auto bind_event = [&](const std::string& id, int64_t from,
                                const std::set<std::string>& skip) {
      BindEvent b;
      b.id = id;
      b.workload = workload;
      b.tenant = ns;
      // The queue charged, as the scheduler wrote it (the tenant's, unqueued, ... where the
      // workload names none or may no longer use the one it names); none where no queue was
      // charged (no Queue exists), rather than a queue that does not exist.
      b.queue = Str(Field(Field(w, "status"), "resourceUsage"), "queue");
      b.start_ms = from;
      // CPU and memory per pod, from the pod set the assignment's pod name ("<set>-<i>") names.
      std::map<std::string, std::pair<int64_t, int64_t>> per_set;
      for (const json& ps : List(Field(w, "spec"), "podSets")) {
        auto text = [](const json& v) {
          return v.is_string() ? v.get<std::string>() : (v.is_number() ? v.dump() : "");
        };
        auto cpu = ParseMilliCpu(text(Field(ps, "cpu")));
        auto memory = ParseMemoryMib(text(Field(ps, "memory")));
        per_set[Str(ps, "name")] = {cpu.ok() ? cpu->value() : 0, memory.ok() ? memory->value() : 0};
      }
      for (const json& a : assignments) {
        const std::string node = Str(a, "node");
        const std::string pod = Str(a, "pod");
        if (skip.count(pod) || node.empty()) continue;  // (empty: completed before a requeue)
        const auto set = per_set.find(pod.substr(0, pod.rfind('-')));
        if (set != per_set.end()) b.pods.push_back({node, set->second.first, set->second.second});
        const auto& devs = node_devices[node];
        for (const json& d : List(a, "devices")) {
          const int64_t index = Int(d, "index", -1);
          BoundDevice bd;
          bd.node = node;
          bd.uuid = Str(d, "uuid");
          int64_t device_memory = 0;
          if (index >= 0 && index < static_cast<int64_t>(devs.size())) {
            const NodeDevice& dev = devs[static_cast<size_t>(index)];
            if (bd.uuid.empty()) bd.uuid = dev.uuid;
            bd.model = dev.model;
            device_memory = dev.memory_mib;
          }
          const int64_t slice = Int(d, "migSlice", -1);
          bd.mig_profile = Str(d, "migProfile");
          if (slice >= 0) {
            bd.uuid += "/" + std::to_string(slice);
            const MigProfile* p =
                FindMigProfile(bd.model, bd.mig_profile, MemoryMib(device_memory));
            bd.gpu_milli = p ? MigSliceMilli(p->compute_slices) : 1000;
            bd.compute_milli = bd.gpu_milli;
            if (bd.mig_profile.empty()) bd.mig_profile = "mig";
          } else {
            // A fraction holds what admission charges it on its GPU: the larger of its compute
            // and memory shares (what its memory takes, no one else may use), an untrusted
            // tenant's at least the GPU over how many such shares it holds. It runs on what
            // it asked (the shim's cap), by which the GPU's busy time is split.
            const int64_t compute = Int(d, "gpuMilli", 1000);
            int64_t milli = compute;
            if (milli < 1000)
              milli = FractionCharge(milli, Int(d, "memoryMiB", 0), device_memory,
                                     untrusted.count(ns) > 0);
            bd.gpu_milli = static_cast<int32_t>(std::clamp<int64_t>(milli, 1, 1000));
            bd.compute_milli = static_cast<int32_t>(std::clamp<int64_t>(compute, 0, 1000));
          }
          b.devices.push_back(bd);
        }
      }
      return b;
    };
    if (!open_binding_.count(workload)) {
      // Pods already completed when the meter first sees it: all its pods held their devices
      // until the last completion (none, if they completed before it was last requeued).
      if (!completed.empty() && !metered && completed_at > bound_at) {
        const BindEvent all = bind_event(whole, bound_at, {});
        if ((!all.devices.empty() || !all.pods.empty()) && meter_.Bind(all).ok())
          (void)meter_.End({whole, start, "pods-completed"});
      }
      // (Charged to another queue since it was bound, and first seen now — the meter missed
      // its binding before the change —: billed from when it was bound, to the queue it has,
      // rather than not at all.)
      const int64_t from = charge_moved && !metered && !meter_.HasBinding(sized)
                               ? (completed.empty() ? bound_at : std::max(bound_at, completed_at))
                               : start;
      const BindEvent b = bind_event(current, from, completed);
      if (b.devices.empty() && b.pods.empty()) {
        // (All its pods completed: nothing is held until its phase says it ended.)
        if (!completed.empty() && completed.size() == assignments.size())
          open_binding_[workload] = current;
        continue;
      }
      // (Work that asks for no GPU is bound too: its pods' CPU and memory are billed, as
      // OpenCost bills every pod's; before, it was billed nothing, and its budget spent none.)
      if (meter_.Bind(b).ok()) open_binding_[workload] = current;
    } else if (refill_compute_ && open_binding_.at(workload) == current) {
      // Restored from the journal, which keeps what it holds but not the compute its busy
      // time is split by: bound again, the binding gets them (and changes nothing else).
      (void)meter_.Bind(bind_event(current, start, completed));
    }
    if (terminal && open_binding_.count(workload)) {
      int64_t end = ParseTimestamp(Str(status, "completionTime"));
      if (end < scheduled) end = now;
      (void)meter_.End({current, end, phase == "Succeeded" ? "completed" : "failed"});
      open_binding_.erase(workload);
    }
  }
  refill_compute_ = false;
  for (auto it = open_binding_.begin(); it != open_binding_.end();) {
    if (!seen.count(it->first)) {
      (void)meter_.End({it->second, now, "deleted"});
      it = open_binding_.erase(it);
    } else {
      ++it;
    }
  }

  // Budgets of tenants and queues: the period's cost so far, alerts and holds, and the owner's
  // status conditions (written only when they change).
  budgets_.clear();
  std::map<std::string, const KeyValue*> owners;  // "tenant/x" or "queue/y" -> stored object
  for (const auto& [kv, tenant] : tenant_specs) {
    if (!tenant.budget) continue;
    const std::string key = "tenant/" + tenant.name.str();
    budgets_[key] = *tenant.budget;
    owners[key] = kv;
  }
  ASSIGN_OR_RETURN(ListResult queues, store_.List("/registry/queues/", "", 0));
  for (const KeyValue& kv : queues.items) {
    json q = json::parse(kv.value, nullptr, false);
    const json& spec = Field(q, "spec");
    if (!Field(spec, "budget").is_object()) continue;
    auto doc = LoadYaml(spec["budget"].dump(), kv.key);
    if (!doc.ok()) continue;
    YamlMap bm(*doc, "spec.budget", kv.key);
    auto budget = ParseBudget(bm);
    if (!budget.ok()) continue;
    const std::string key = "queue/" + Str(Field(q, "metadata"), "name");
    budgets_[key] = *budget;
    owners[key] = &kv;
  }
  budget_state_.clear();
  std::map<std::pair<std::string, int64_t>, std::map<std::string, int64_t>> spent_cache;
  for (const auto& [key, budget] : budgets_) {
    auto period = PeriodBounds(budget.period, now);
    if (!period.ok()) continue;
    const bool is_tenant = key.rfind("tenant/", 0) == 0;
    auto& spent_by = spent_cache[{is_tenant ? "tenant" : "queue", period->first}];
    if (spent_by.empty()) {
      ReportOptions opt;
      opt.from_ms = period->first;
      opt.to_ms = std::max(now, period->first + 1);
      opt.by = {is_tenant ? AggregateBy::kTenant : AggregateBy::kQueue};
      auto report = BuildReport(meter_, options_.prices, opt);
      if (report.ok()) {
        // (What it held, as billed: GPU time, and CPU and memory where the price book prices
        // them; the shared idle cost is not its own spending.)
        for (const ReportRow& r : (*report)[0].rows)
          spent_by[r.key] = r.cost_micros + r.cpu_cost_micros + r.ram_cost_micros;
      }
      spent_by[""] = 0;  // computed, even if empty
    }
    const std::string name = key.substr(key.find('/') + 1);
    BudgetState st =
        EvaluateBudget(budget, spent_by[name], (is_tenant ? "tenant " : "queue ") + name);
    budget_state_[key] = st;
    // On the owner: BudgetAlert (a threshold crossed) and BudgetExceeded conditions, and
    // status.budget, what it spent as of the last whole percent (so that `get queues -o wide`
    // shows it without a write each Sync). Written only when one of them changes; other
    // conditions and the rest of the status are kept.
    const KeyValue* kv = owners[key];
    json obj = json::parse(kv->value, nullptr, false);
    if (!obj.is_object()) continue;
    const std::string alert = st.highest_alert > 0 ? "True" : "False";
    const std::string exceeded = st.exceeded ? "True" : "False";
    const int64_t percent =
        st.amount_micros > 0
            ? static_cast<int64_t>(static_cast<__int128>(st.spent_micros) * 100 / st.amount_micros)
            : 0;
    const json spending = {{"amount", FormatMoneyMicros(st.amount_micros)},
                           {"currency", options_.prices.currency},
                           {"period", budget.period},
                           {"enforce", budget.enforce},
                           {"spent", FormatMoneyMicros(st.spent_micros)},
                           {"spentPercent", percent},
                           {"periodStart", FormatTimestamp(period->first)}};
    const json& was_spending = Field(Field(obj, "status"), "budget");
    std::string have_alert, have_exceeded, have_message, alert_since, exceeded_since;
    json others = json::array();
    for (const json& c : List(Field(obj, "status"), "conditions")) {
      if (Str(c, "type") == "BudgetAlert") {
        have_alert = Str(c, "status");
        have_message = Str(c, "message");
        alert_since = Str(c, "lastTransitionTime");
      } else if (Str(c, "type") == "BudgetExceeded") {
        have_exceeded = Str(c, "status");
        exceeded_since = Str(c, "lastTransitionTime");
      } else {
        others.push_back(c);
      }
    }
    const std::string reason = st.highest_alert > 0
                                   ? "Past" + std::to_string(st.highest_alert) + "Percent"
                                   : "WithinBudget";
    const bool same_spending = was_spending.is_object() &&
                               Field(was_spending, "spentPercent") == spending["spentPercent"] &&
                               Field(was_spending, "amount") == spending["amount"] &&
                               Field(was_spending, "period") == spending["period"] &&
                               Field(was_spending, "enforce") == spending["enforce"] &&
                               Field(was_spending, "periodStart") == spending["periodStart"];
    if (have_alert == alert && have_exceeded == exceeded &&
        (have_message.find(reason) != std::string::npos || alert == "False") && same_spending) {
      continue;
    }
    others.push_back(
        {{"type", "BudgetAlert"},
         {"status", alert},
         {"reason", reason},
         {"message", st.message + " [" + reason + "]"},
         {"lastTransitionTime",
          have_alert == alert && !alert_since.empty() ? alert_since : FormatTimestamp(now)}});
    others.push_back({{"type", "BudgetExceeded"},
                      {"status", exceeded},
                      {"reason", st.exceeded ? (budget.enforce ? "NewWorkHeld" : "NotEnforced")
                                             : "WithinBudget"},
                      {"message", st.message},
                      {"lastTransitionTime", have_exceeded == exceeded && !exceeded_since.empty()
                                                 ? exceeded_since
                                                 : FormatTimestamp(now)}});
    obj["status"]["conditions"] = std::move(others);
    obj["status"]["budget"] = spending;
    (void)store_.Put(kv->key, obj.dump(), kv->mod_revision);  // a conflict retries next Sync
  }

  // An owner whose budget was taken away loses its budget conditions and spending.
  auto strip = [&](const KeyValue& kv) {
    json obj = json::parse(kv.value, nullptr, false);
    json* status = obj.is_object() && obj.contains("status") && obj["status"].is_object()
                       ? &obj["status"]
                       : nullptr;
    if (!status) return;
    bool changed = status->erase("budget") > 0;
    if (status->contains("conditions") && (*status)["conditions"].is_array()) {
      json kept = json::array();
      for (const json& c : (*status)["conditions"]) {
        if (Str(c, "type") == "BudgetAlert" || Str(c, "type") == "BudgetExceeded") {
          changed = true;
        } else {
          kept.push_back(c);
        }
      }
      (*status)["conditions"] = std::move(kept);
    }
    if (changed) (void)store_.Put(kv.key, obj.dump(), kv.mod_revision);
  };
  for (const auto& [kv, tenant] : tenant_specs)
    if (!tenant.budget) strip(*kv);
  for (const KeyValue& kv : queues.items)
    if (!budgets_.count("queue/" +
                        Str(Field(json::parse(kv.value, nullptr, false), "metadata"), "name")))
      strip(kv);

  meter_.Advance(now);
  last_sync_ms_ = now;
  if (journal_) {
    const int64_t keep = meter_.sealed_until_ms() - 2 * options_.config.sample_interval_ms;
    RETURN_IF_ERROR(journal_->Commit(meter_.TakeChanges(), keep));
  } else {
    (void)meter_.TakeChanges();
  }
  return Status::Ok();
}

IngestStats MeterService::Ingest(std::vector<DeviceSample> samples) {
  std::lock_guard<std::mutex> lock(mu_);
  const IngestStats before = meter_.stats();
  meter_.Ingest(std::move(samples));
  IngestStats delta = meter_.stats();
  delta.samples_accepted -= before.samples_accepted;
  delta.samples_duplicate -= before.samples_duplicate;
  delta.samples_late -= before.samples_late;
  delta.samples_invalid -= before.samples_invalid;
  return delta;
}

Status MeterService::ScrapeOnce(const std::vector<ScrapeTarget>& targets) {
  std::string failures;
  for (const ScrapeTarget& t : targets) {
    // http[s]://host:port/path
    const size_t scheme_end = t.url.find("://");
    const size_t path_start =
        scheme_end == std::string::npos ? std::string::npos : t.url.find('/', scheme_end + 3);
    Status st = Status::Ok();
    if (scheme_end == std::string::npos) {
      st = InvalidArgument("'" + t.url + "' is not an http:// or https:// URL");
    } else {
      ClientOptions o;
      o.server = t.url.substr(0, path_start);
      o.ca_file = t.ca_file;
      o.timeout_seconds = 5;
      HttpClient client(o);
      const int64_t now = clock_.NowMs();
      auto r =
          client.Do("GET", path_start == std::string::npos ? "/metrics" : t.url.substr(path_start));
      if (!r.ok()) {
        st = r.status();
      } else if (r->status != 200) {
        st = Status(StatusCode::kUnavailable, "HTTP " + std::to_string(r->status));
      } else {
        auto samples = ParseDcgmExposition(r->body, now, t.node.empty() ? o.server : t.node);
        if (!samples.ok()) {
          st = samples.status();
        } else {
          Ingest(std::move(*samples));
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto& counts = scrapes_[t.url];
    if (st.ok()) {
      ++counts.first;
    } else {
      ++counts.second;
      failures += (failures.empty() ? "" : "; ") + t.url + ": " + st.message();
    }
  }
  if (!failures.empty()) {
    return Status(StatusCode::kUnavailable, "dcgm-exporter scrape failed: " + failures);
  }
  return Status::Ok();
}

Result<std::vector<ReportWindow>> MeterService::Report(const ReportOptions& options) const {
  std::lock_guard<std::mutex> lock(mu_);
  return BuildReport(meter_, options_.prices, options);
}

std::optional<std::string> MeterService::AdmissionHold(const std::string& tenant,
                                                       const std::string& queue) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& key : {"tenant/" + tenant, "queue/" + queue}) {
    auto b = budgets_.find(key);
    auto s = budget_state_.find(key);
    if (b != budgets_.end() && s != budget_state_.end() && b->second.enforce &&
        s->second.exceeded) {
      return "held: " + s->second.message;
    }
  }
  return std::nullopt;
}

std::map<std::string, BudgetState> MeterService::Budgets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return budget_state_;
}

std::string MeterService::MetricsText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = UsageMetricsText(meter_, options_.prices, clock_.NowMs(), &metric_floors_);
  const IngestStats& st = meter_.stats();
  out += "# HELP fabrica_meter_samples_total Utilization samples by outcome.\n";
  out += "# TYPE fabrica_meter_samples_total counter\n";
  out += "fabrica_meter_samples_total{outcome=\"accepted\"} " +
         std::to_string(st.samples_accepted) + "\n";
  out += "fabrica_meter_samples_total{outcome=\"duplicate\"} " +
         std::to_string(st.samples_duplicate) + "\n";
  out += "fabrica_meter_samples_total{outcome=\"late\"} " + std::to_string(st.samples_late) + "\n";
  out += "fabrica_meter_samples_total{outcome=\"invalid\"} " + std::to_string(st.samples_invalid) +
         "\n";
  out += "# HELP fabrica_meter_scrapes_total Reads of dcgm-exporter pages by target and outcome.\n";
  out += "# TYPE fabrica_meter_scrapes_total counter\n";
  for (const auto& [url, counts] : scrapes_) {
    out += "fabrica_meter_scrapes_total{target=\"" + url + "\",outcome=\"ok\"} " +
           std::to_string(counts.first) + "\n";
    out += "fabrica_meter_scrapes_total{target=\"" + url + "\",outcome=\"failed\"} " +
           std::to_string(counts.second) + "\n";
  }
  out +=
      "# HELP fabrica_budget_spent_ratio Cost this period over the budget of a tenant or queue.\n";
  out += "# TYPE fabrica_budget_spent_ratio gauge\n";
  for (const auto& [key, s] : budget_state_) {
    const size_t slash = key.find('/');
    out += "fabrica_budget_spent_ratio{" + key.substr(0, slash) + "=\"" + key.substr(slash + 1) +
           "\"} " +
           std::to_string(s.amount_micros ? static_cast<double>(s.spent_micros) / s.amount_micros
                                          : 0) +
           "\n";
  }
  return out;
}

namespace {

double Hours(int64_t milli_gpu_ms) { return static_cast<double>(milli_gpu_ms) / 3.6e9; }
double Money(int64_t micros) { return static_cast<double>(micros) / 1e6; }

// One row in the shape OpenCost's allocation API returns (GPU fields filled; the CPU, RAM,
// network and volume fields present and zero, so tools that read them find numbers).
json OpenCostAllocation(const ReportRow& r, const ReportWindow& w, bool idle) {
  const double minutes = static_cast<double>(w.to_ms - w.from_ms) / 60'000.0;
  const double window_hours = static_cast<double>(w.to_ms - w.from_ms) / 3.6e6;
  const double gpu_hours = Hours(r.held);
  const double cpu_hours = static_cast<double>(r.cpu_milli_ms) / 3.6e9;
  const double cpu_avg = window_hours > 0 ? cpu_hours / window_hours : 0;
  const double ram_byte_hours = static_cast<double>(r.memory_mib_ms) * 1048576.0 / 3.6e6;
  const double ram_avg = window_hours > 0 ? ram_byte_hours / window_hours : 0;
  const double request_avg = window_hours > 0 ? gpu_hours / window_hours : 0;
  const int64_t known = r.held - r.unknown;
  const double usage_avg = window_hours > 0 && known > 0 ? Hours(r.used) / window_hours *
                                                               (static_cast<double>(r.held) / known)
                                                         : 0;
  json props = json::object();
  for (const auto& [k, v] : r.properties) {
    if (v.empty()) continue;  // (a queue where none was charged: as OpenCost leaves it out)
    if (k == "tenant") props["namespace"] = v;
    props[k] = v;
  }
  props["cluster"] = kClusterName;
  json a = {
      {"name", r.key},
      {"properties", props},
      {"window", {{"start", FormatTimestamp(w.from_ms)}, {"end", FormatTimestamp(w.to_ms)}}},
      {"start", FormatTimestamp(w.from_ms)},
      {"end", FormatTimestamp(w.to_ms)},
      {"minutes", minutes},
      {"cpuCores", cpu_avg},
      {"cpuCoreRequestAverage", cpu_avg},
      {"cpuCoreUsageAverage", 0},
      {"cpuCoreHours", cpu_hours},
      {"cpuCost", Money(r.cpu_cost_micros)},
      {"cpuCostAdjustment", 0},
      {"cpuCostIdle", 0},
      {"cpuEfficiency", 0},
      {"gpuCount", request_avg},
      {"gpuRequestAverage", request_avg},
      {"gpuUsageAverage", usage_avg},
      {"gpuHours", gpu_hours},
      {"gpuCost", Money(r.cost_micros)},
      {"gpuCostAdjustment", 0},
      {"gpuCostIdle", Money(r.idle_cost_micros)},
      {"gpuEfficiency",
       idle ? 0.0
            : (r.held > r.unknown ? static_cast<double>(r.used) / (r.held - r.unknown) : 0.0)},
      {"gpuAllocation",
       {{"gpuRequestAverage", request_avg},
        {"gpuUsageAverage", usage_avg},
        {"isGPUShared", r.shared_gpu}}},
      {"networkTransferBytes", 0},
      {"networkReceiveBytes", 0},
      {"networkCost", 0},
      {"networkCostAdjustment", 0},
      {"loadBalancerCost", 0},
      {"loadBalancerCostAdjustment", 0},
      {"pvBytes", 0},
      {"pvByteHours", 0},
      {"pvCost", 0},
      {"pvCostAdjustment", 0},
      {"ramBytes", ram_avg},
      {"ramByteRequestAverage", ram_avg},
      {"ramByteUsageAverage", 0},
      {"ramByteHours", ram_byte_hours},
      {"ramCost", Money(r.ram_cost_micros)},
      {"ramCostAdjustment", 0},
      {"ramCostIdle", 0},
      {"ramEfficiency", 0},
      {"externalCost", 0},
      {"sharedCost", Money(r.idle_cost_micros)},
      {"totalCost", Money(r.total_cost_micros())},
      {"totalEfficiency",
       idle ? 0.0
            : (r.held > r.unknown ? static_cast<double>(r.used) / (r.held - r.unknown) : 0.0)},
      {"rawAllocationOnly", nullptr}};
  return a;
}

json FabricaUsageRow(const ReportRow& r) {
  return {
      {"key", r.key},
      {"properties", r.properties},
      {"gpuMilliMsHeld", r.held},
      {"gpuMilliMsUsed", r.used},
      {"gpuMilliMsUnknown", r.unknown},
      {"gpuHoursHeld", Hours(r.held)},
      {"gpuHoursUsed", Hours(r.used)},
      {"efficiency", r.held > r.unknown ? static_cast<double>(r.used) / (r.held - r.unknown) : 0.0},
      {"cpuMilliCoreMsHeld", r.cpu_milli_ms},
      {"memoryMiBMsHeld", r.memory_mib_ms},
      {"costMicros", r.cost_micros},
      {"cpuCostMicros", r.cpu_cost_micros},
      {"ramCostMicros", r.ram_cost_micros},
      {"idleCostMicros", r.idle_cost_micros},
      {"totalCostMicros", r.total_cost_micros()},
      {"totalCost", FormatMoneyMicros(r.total_cost_micros())}};
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

bool ParseBool(const std::map<std::string, std::string>& q, const std::string& key, bool def,
               std::string* error) {
  auto it = q.find(key);
  if (it == q.end()) return def;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0") return false;
  *error = key + ": '" + it->second + "' is not true or false";
  return def;
}

}  // namespace

ApiServer::Extension MeterService::Routes() {
  return [this](const HttpRequest& req, const Result<Principal>& principal,
                const std::vector<std::string>& tenants, bool all) -> std::optional<HttpResponse> {
    const std::string usage_path = "/apis/fabrica.dev/v1/usage";
    const std::string telemetry_path = "/apis/fabrica.dev/v1/telemetry";
    const bool allocation = req.path == "/allocation" || req.path == "/allocation/compute" ||
                            req.path == "/model/allocation";
    if (!allocation && req.path != usage_path && req.path != telemetry_path) return std::nullopt;
    if (!principal.ok()) return ErrorReply(principal.status());

    if (req.path == telemetry_path) {
      if (req.method != "POST") return ErrorReply(405, "telemetry: use POST");
      if (principal->node.empty() && !all) {
        return ErrorReply(403,
                          "telemetry: only node agents and platform admins may report samples");
      }
      if (req.body.size() > kMaxTelemetryBody) return ErrorReply(413, "telemetry: body too large");
      std::vector<DeviceSample> samples;
      const std::string type = req.Header("content-type");
      if (type.rfind("text/plain", 0) == 0) {
        // A dcgm-exporter page, as scraped.
        const std::string node = principal->node.empty() ? "unknown" : principal->node;
        auto parsed = ParseDcgmExposition(req.body, clock_.NowMs(), node);
        if (!parsed.ok()) return ErrorReply(400, parsed.status().message());
        samples = std::move(*parsed);
      } else {
        std::string why;
        json body = jsonf::ParseBody(req.body, &why);
        if (!why.empty()) return ErrorReply(400, "telemetry: " + why);
        if (!body.is_object() || !Field(body, "samples").is_array()) {
          return ErrorReply(
              400, "telemetry: expected {\"samples\": [...]} or a text/plain dcgm-exporter page");
        }
        const auto& list = body["samples"];
        for (size_t i = 0; i < list.size(); ++i) {
          const json& s = list[i];
          const std::string path = "samples[" + std::to_string(i) + "]";
          if (!s.is_object()) return ErrorReply(400, path + ": expected an object");
          std::string unknown;  // (every one at once)
          for (const auto& [k, v] : s.items()) {
            if (k != "node" && k != "uuid" && k != "time" && k != "utilPermille" &&
                k != "achievedPermille")
              unknown += (unknown.empty() ? "" : "; ") + path + "." + k + ": unknown field";
          }
          if (!unknown.empty()) return ErrorReply(400, unknown);
          DeviceSample d;
          d.node = Str(s, "node", principal->node);
          d.device_uuid = Str(s, "uuid");
          // Without a time the sample is stamped on receipt, in the server's clock (node
          // agents do so: their clocks may be skewed against the bindings' times).
          const json& t = Field(s, "time");
          d.time_ms = t.is_null()     ? clock_.NowMs()
                      : t.is_string() ? ParseTimestamp(t.get<std::string>())
                                      : (t.is_number_integer() ? t.get<int64_t>() : -1);
          const json& u = Field(s, "utilPermille");
          if (d.device_uuid.empty()) return ErrorReply(400, path + ".uuid: required");
          if (d.time_ms < 0) return ErrorReply(400, path + ".time: expected RFC 3339 or Unix ms");
          if (!u.is_number_integer() || u.get<int64_t>() < 0 || u.get<int64_t>() > 1000) {
            return ErrorReply(400, path + ".utilPermille: expected an integer 0..1000");
          }
          d.util_permille = u.get<int32_t>();
          if (Field(s, "achievedPermille").is_object()) {
            for (const auto& [k, v] : s["achievedPermille"].items()) {
              if (!v.is_number_integer())
                return ErrorReply(400, path + ".achievedPermille." + k + ": expected an integer");
              d.achieved_permille[k] = v.get<int32_t>();
            }
          }
          if (!principal->node.empty() && d.node != principal->node) {
            return ErrorReply(403, path + ".node: a node agent reports only its own devices");
          }
          samples.push_back(std::move(d));
        }
      }
      const IngestStats st = Ingest(std::move(samples));
      return JsonReply(200, {{"accepted", st.samples_accepted},
                             {"duplicate", st.samples_duplicate},
                             {"late", st.samples_late},
                             {"invalid", st.samples_invalid}});
    }

    if (req.method != "GET") return ErrorReply(405, req.path + ": use GET");
    if (!all && tenants.empty()) return ErrorReply(403, "usage: no tenant is readable by you");
    std::string error;
    ReportOptions opt;
    const auto& q = req.query;
    auto get = [&](const std::string& k, const std::string& def) {
      auto it = q.find(k);
      return it == q.end() ? def : it->second;
    };
    for (const auto& [k, v] : q) {
      static const std::set<std::string> known = {
          "window",      "aggregate", "by",         "step",   "resolution",       "accumulate",
          "includeIdle", "shareIdle", "idleByNode", "format", "filterNamespaces", "filter"};
      if (!known.count(k)) return ErrorReply(400, "unknown query parameter '" + k + "'");
    }
    auto window = ParseWindow(get("window", allocation ? "" : "7d"), clock_.NowMs());
    if (!window.ok()) return ErrorReply(window.status());
    opt.from_ms = window->first;
    opt.to_ms = window->second;
    if (opt.to_ms <= opt.from_ms) return ErrorReply(400, "window: it has not started yet");
    auto by =
        ParseAggregate(get(allocation ? "aggregate" : "by", allocation ? "namespace" : "tenant"));
    if (!by.ok()) return ErrorReply(by.status());
    opt.by = *by;
    const std::string step = get("step", "");
    const bool accumulate = ParseBool(q, "accumulate", false, &error);
    if (!step.empty() && !accumulate) {
      opt.step_ms = ParseDuration(step);
      if (opt.step_ms <= 0)
        return ErrorReply(400, "step '" + step + "' is not a duration such as 1h or 1d");
    }
    opt.share_idle = ParseBool(q, "shareIdle", false, &error);
    const bool include_idle = ParseBool(q, "includeIdle", allocation ? false : true, &error);
    if (!error.empty()) return ErrorReply(400, error);
    if (!all) opt.tenants = tenants;
    // OpenCost's filter language, for the namespaces alone: `namespace:"a","b"` (quotes
    // optional), read as filterNamespaces.
    std::string namespaces = q.count("filterNamespaces") ? q.at("filterNamespaces") : "";
    if (q.count("filterNamespaces") && q.count("filter"))
      return ErrorReply(400, "filter and filterNamespaces: give one of them");
    if (q.count("filterNamespaces") && namespaces.empty())
      return ErrorReply(403, "filterNamespaces: none of them is readable by you");
    if (auto f = q.find("filter"); f != q.end()) {
      if (f->second.rfind("namespace:", 0) != 0 ||
          f->second.find_first_of("+|()!") != std::string::npos)
        return ErrorReply(400, "filter: '" + f->second +
                                   "' is not one this server reads (only namespace:\"a\",\"b\"; "
                                   "or filterNamespaces=a,b)");
      std::string list;
      for (char c : f->second.substr(std::string("namespace:").size()))
        if (c != '"' && c != ' ') list += c;
      namespaces = list;
      if (namespaces.empty())
        return ErrorReply(400, "filter: '" + f->second + "' names no namespace");
    }
    if (!namespaces.empty()) {
      std::vector<std::string> wanted;
      const std::string list = namespaces;
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        const std::string t = list.substr(start, comma - start);
        if (all || std::find(tenants.begin(), tenants.end(), t) != tenants.end())
          wanted.push_back(t);
        start = comma + 1;
      }
      if (wanted.empty())
        return ErrorReply(403, "filterNamespaces: none of " + list + " is readable by you");
      opt.tenants = wanted;
    }
    auto report = Report(opt);
    if (!report.ok()) return ErrorReply(report.status());

    if (allocation) {
      json data = json::array();
      for (const ReportWindow& w : *report) {
        json sets = json::object();
        for (const ReportRow& r : w.rows) sets[r.key] = OpenCostAllocation(r, w, false);
        if (include_idle && opt.tenants.empty()) {
          ReportRow idle = w.idle;
          idle.properties = {};
          sets["__idle__"] = OpenCostAllocation(idle, w, true);
        }
        data.push_back(sets);
      }
      return JsonReply(200, {{"code", 200}, {"data", data}});
    }
    if (get("format", "json") == "csv") {
      HttpResponse r;
      r.content_type = "text/csv";
      r.body =
          "window_start,window_end,key,gpu_hours_held,gpu_hours_used,gpu_milli_ms_held,"
          "gpu_milli_ms_used,gpu_milli_ms_unknown,cost,idle_cost,cpu_cost,ram_cost,total_cost,"
          "currency\n";
      for (const ReportWindow& w : *report) {
        auto row = [&](const ReportRow& x) {
          char hours[64];
          std::snprintf(hours, sizeof hours, "%.6f,%.6f", Hours(x.held), Hours(x.used));
          r.body +=
              FormatTimestamp(w.from_ms) + "," + FormatTimestamp(w.to_ms) + "," + CsvField(x.key) +
              "," + hours + "," + std::to_string(x.held) + "," + std::to_string(x.used) + "," +
              std::to_string(x.unknown) + "," + FormatMoneyMicros(x.cost_micros) + "," +
              FormatMoneyMicros(x.idle_cost_micros) + "," + FormatMoneyMicros(x.cpu_cost_micros) +
              "," + FormatMoneyMicros(x.ram_cost_micros) + "," +
              FormatMoneyMicros(x.total_cost_micros()) + "," + options_.prices.currency + "\n";
        };
        for (const ReportRow& x : w.rows) row(x);
        if (include_idle && opt.tenants.empty()) row(w.idle);
      }
      return r;
    }
    if (get("format", "json") != "json") return ErrorReply(400, "format: expected json or csv");
    json windows = json::array();
    for (const ReportWindow& w : *report) {
      json rows = json::array();
      for (const ReportRow& r : w.rows) rows.push_back(FabricaUsageRow(r));
      json win = {
          {"start", FormatTimestamp(w.from_ms)}, {"end", FormatTimestamp(w.to_ms)}, {"rows", rows}};
      if (include_idle && opt.tenants.empty()) {
        win["idle"] = FabricaUsageRow(w.idle);
        win["capacityGpuMilliMs"] = w.capacity;
        win["fleetCostMicros"] = w.fleet_cost_micros;
        win["unattributedGpuMilliMsUsed"] = w.unattributed_used;
      }
      windows.push_back(win);
    }
    return JsonReply(200, {{"apiVersion", "fabrica.dev/v1"},
                           {"kind", "Usage"},
                           {"currency", options_.prices.currency},
                           {"windows", windows}});
  };
}

}  // namespace fabrica
