#include "api/api_server.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <shared_mutex>
#include <thread>

#include "api/conceal.h"
#include "api/json_fields.h"
#include "api/metrics.h"
#include "api/replies.h"
#include "api/table.h"
#include "core/fleet.h"
#include "core/workload.h"
#include "core/yaml_reader.h"
#include "sched/admission.h"
#include "sched/queue_objects.h"

namespace fabrica {
namespace {

using json = nlohmann::json;

constexpr const char* kGroupVersion = "fabrica.dev/v1";
constexpr const char* kApiPrefix = "/apis/fabrica.dev/v1";

struct ResourceInfo {
  const char* plural;
  const char* kind;
  bool namespaced;
  // What discovery lists as its short name, so that `kubectl get wl` finds it as `fabctl get
  // wl` does (a trial's kubectl knew none); "" for none.
  const char* short_name = "";
};
constexpr ResourceInfo kResources[] = {
    {"tenants", "Tenant", false},
    {"queues", "Queue", false, "q"},
    {"nodes", "Node", false, "no"},
    {"leases", "Lease", false},
    {"workloads", "Workload", true, "wl"},
    {"priorityclasses", "PriorityClass", false, "pc"},
    {"resourceflavors", "ResourceFlavor", false, "rf"},
};

const ResourceInfo* FindResource(const std::string& plural) {
  for (const ResourceInfo& r : kResources) {
    if (plural == r.plural) return &r;
  }
  return nullptr;
}

std::string Prefix(const ResourceInfo& r, const std::string& ns) {
  std::string p = std::string("/registry/") + r.plural + "/";
  if (r.namespaced && !ns.empty()) p += ns + "/";
  return p;
}
std::string Key(const ResourceInfo& r, const std::string& ns, const std::string& name) {
  return Prefix(r, ns) + name;
}

HttpResponse StatusResponse(int code, const std::string& message, const std::string& field = "") {
  json j = replies::StatusBody(code, message);
  if (!field.empty()) j["details"] = {{"causes", {{{"field", field}, {"message", message}}}}};
  return replies::Json(code, j);
}

HttpResponse ErrorFromStatus(const Status& st, int invalid_code = 422) {
  int code = HttpStatusFor(st.code());
  if (st.code() == StatusCode::kInvalidArgument) code = invalid_code;
  if (st.code() == StatusCode::kFailedPrecondition) code = 409;
  return StatusResponse(code, st.message());
}

// An invalid object's error names it first ("Workload 'w1': spec.x: ..."), whichever check
// refused it (a trial read two wordings: some errors gave a bare field path).
HttpResponse NameInvalid(HttpResponse r, const ResourceInfo& info, const std::string& name) {
  if (r.status != 422 || name.empty()) return r;
  json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !jsonf::Field(j, "message").is_string()) return r;
  const std::string message = j["message"];
  if (message.rfind(std::string(info.kind) + " '", 0) == 0) return r;
  j["message"] = std::string(info.kind) + " '" + name + "': " + message;
  r.body = j.dump();
  return r;
}

HttpResponse JsonResponse(int code, const json& j) {
  HttpResponse r;
  r.status = code;
  r.body = j.dump();
  return r;
}

// What a request asks of a Table (server-side printing): its version ("" for none: plain
// JSON) and what each row carries (?includeObject=); a 400 for an includeObject that is none
// of the three.
std::optional<HttpResponse> TableAsked(const HttpRequest& req, std::string* version,
                                       RowObject* rows) {
  *version = TableVersion(req.Header("accept"));
  *rows = RowObject::kMetadata;
  if (auto it = req.query.find("includeObject");
      !version->empty() && it != req.query.end() && !ParseRowObject(it->second, rows))
    return StatusResponse(
        400, "includeObject: '" + it->second + "' is not one of None, Metadata or Object");
  return std::nullopt;
}

// The stored object with its resourceVersion filled in.
constexpr char kNodesPrefix[] = "/registry/nodes/";

// The labels Fabrica sets on every node (its name, its GPU model), as a node's metadata.labels
// shows them: kubelet's kubernetes.io/hostname is in a Kubernetes node's labels, where
// `-o jsonpath`, `--show-labels` and scripts read them. (Not stored: they follow the node.)
json BuiltinNodeLabels(const json& node) {
  json out = json::object();
  const json all = jsonf::NodeLabels(node);
  for (const char* k : {kHostnameLabel, kGpuModelLabel})
    if (all.contains(k)) out[k] = all[k];
  return out;
}

// A node as it is shown (its built-in labels in), other objects as they are.
json Shown(json obj) {
  if (jsonf::Str(obj, "kind") == "Node" && obj["metadata"].is_object()) {
    const json builtin = BuiltinNodeLabels(obj);
    for (const auto& [k, v] : builtin.items()) obj["metadata"]["labels"][k] = v;
  }
  return obj;
}

json Materialize(const KeyValue& kv) {
  json j = json::parse(kv.value, nullptr, false);
  if (j.is_discarded()) j = json::object();
  j["metadata"]["resourceVersion"] = std::to_string(kv.mod_revision);
  if (kv.key.rfind(kNodesPrefix, 0) == 0) j = Shown(std::move(j));
  return j;
}

// The stored text with its resourceVersion spliced in, without parsing: objects are stored as
// nlohmann dumps them (keys sorted), so the first `"metadata":{` is the top-level metadata
// (apiVersion and kind, which sort before it, are validated constants).
std::string MaterializeText(const KeyValue& kv) {
  static const std::string kMeta = "\"metadata\":{";
  if (kv.key.rfind(kNodesPrefix, 0) == 0) return Materialize(kv).dump();  // (its labels)
  std::string out = kv.value;
  const size_t pos = out.find(kMeta);
  if (pos == std::string::npos) return Materialize(kv).dump();
  const bool empty = out.size() > pos + kMeta.size() && out[pos + kMeta.size()] == '}';
  out.insert(pos + kMeta.size(),
             "\"resourceVersion\":\"" + std::to_string(kv.mod_revision) + (empty ? "\"" : "\","));
  return out;
}

using jsonf::Field;
using jsonf::Int;
using jsonf::Str;

// An amount of resource `r` (gpu, cpu or memory) as a queue's quota or status holds it (8, "8",
// "500m", "64Gi"), in its unit (milli-GPUs, milli-CPUs, MiB); nullopt where absent or not one.
std::optional<int64_t> AmountOf(const std::string& r, const json& v) {
  if (v.is_null()) return std::nullopt;
  const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  if (r == "cpu") {
    auto parsed = ParseMilliCpu(text);
    return parsed.ok() ? std::optional<int64_t>(parsed->value()) : std::nullopt;
  }
  if (r == "memory") {
    auto parsed = ParseMemoryMib(text);
    return parsed.ok() ? std::optional<int64_t>(parsed->value()) : std::nullopt;
  }
  auto parsed = ParseMilliGpu(text);
  return parsed.ok() ? std::optional<int64_t>(parsed->value()) : std::nullopt;
}

std::string AmountText(const std::string& r, int64_t v) {
  if (r == "cpu") return GpuAmount(v) + (v == 1000 ? " CPU core" : " CPU cores");
  if (r == "memory") return FormatMemoryMib(MemoryMib(v));
  return GpuAmount(v) + (v == kMilliPerGpu ? " GPU" : " GPUs");
}

// What a leaf queue's lowered quotas leave of the work it holds, by the scheduler's last count
// in the stored status: nothing running is evicted for an edit, which a user would not guess
// from an accepted write (a trial; the scheduler's status says so only a cycle later). Said only
// where the edit lowers a guarantee, or a guarantee + borrowing limit, below what the queue
// holds. As Kubernetes says an admission warning: in Warning headers, which kubectl and fabctl
// print. (Its caller leaves out queues with children: their guarantee is what their children's
// add up to, and they hold no work of their own.)
// `pinned_milli`: GPUs (milli) the queue's running work that may not be preempted holds.
std::vector<std::string> QueueEditWarnings(const json& stored, const json& updated,
                                           int64_t pinned_milli = 0) {
  std::vector<std::string> out;
  const json& status = Field(stored, "status");
  const json& quotas = Field(Field(updated, "spec"), "quotas");
  const json& had = Field(Field(stored, "spec"), "quotas");
  const std::string name = Str(Field(updated, "metadata"), "name");
  // (Quota key, its unit, what the queue holds: per GPU flavour where the status counts by
  // flavour, else the default one's GPUs; then CPU and memory where a quota names them.)
  std::vector<std::tuple<std::string, std::string, json>> used;
  const bool by_flavour = Field(status, "flavors").is_object() && !Field(status, "flavors").empty();
  if (const json& flavors = Field(status, "flavors"); by_flavour) {
    for (const auto& [flavor, f] : flavors.items())
      used.push_back({flavor, "gpu", Field(f, "usedGpus")});
  } else if (status.contains("usedGpus")) {
    used.push_back({"gpu", "gpu", status["usedGpus"]});
  }
  for (const char* r : {"cpu", "memory"})
    if (const json& st = Field(status, r); st.is_object())
      used.push_back({r, r, Field(st, "used")});
  for (const auto& [key, unit, amount] : used) {
    // (Of the one GPU flavour, a quota removed is a guarantee of 0, as a trial found it acts:
    // said as that is. Of several, it moves the flavour's work to another: not said here. Of
    // CPU or memory, it lifts the limit.)
    static const json kNone = {{"guaranteed", 0}};
    const json& was = Field(had, key.c_str());
    const json& now =
        !Field(quotas, key.c_str()).is_object() && was.is_object() && unit == "gpu" && !by_flavour
            ? kNone
            : Field(quotas, key.c_str());
    if (!now.is_object() || now == was) continue;
    const std::optional<int64_t> holds = AmountOf(unit, amount);
    if (!holds) continue;
    // A lending limit lowered below the guarantee the queue leaves unused: what other queues
    // borrow of it stays (a trial's edit said nothing, where a lowered borrowing limit warns).
    const std::optional<int64_t> lend = AmountOf(unit, Field(now, "lendingLimit"));
    const std::optional<int64_t> lend_was = AmountOf(unit, Field(was, "lendingLimit"));
    const int64_t kept_guarantee = AmountOf(unit, Field(now, "guaranteed")).value_or(0);
    // (Of a quota it had: a first one lends nothing yet.)
    if (lend && was.is_object() && (!lend_was || *lend < *lend_was) &&
        kept_guarantee - *holds > *lend)
      out.push_back("queue " + name + " leaves " + AmountText(unit, kept_guarantee - *holds) +
                    (unit == "gpu" ? " of " + key : std::string()) +
                    " of its guarantee unused, more than its new lendingLimit of " +
                    AmountText(unit, *lend) +
                    ": what other queues borrow of it now, if any, is not evicted for the edit; "
                    "it comes back as work of " +
                    name + " needs it");
    if (*holds <= 0) continue;
    const int64_t guaranteed = AmountOf(unit, Field(now, "guaranteed")).value_or(0);
    // (No CPU or memory quota before: those were not limited, so any is lower.)
    const bool first = !was.is_object() && unit != "gpu";
    const int64_t guaranteed_was = first ? std::numeric_limits<int64_t>::max()
                                         : AmountOf(unit, Field(was, "guaranteed")).value_or(0);
    const std::optional<int64_t> borrow = AmountOf(unit, Field(now, "borrowingLimit"));
    const std::optional<int64_t> borrow_was = AmountOf(unit, Field(was, "borrowingLimit"));
    // ("of cpu" after "48 CPU cores" says it twice: the flavour is said of GPUs alone.)
    const std::string head = "queue " + name + " holds " + AmountText(unit, *holds) +
                             (unit == "gpu" ? " of " + key : std::string()) + ", past its new ";
    if (borrow && *holds > guaranteed + *borrow &&
        (!borrow_was || guaranteed + *borrow < guaranteed_was + *borrow_was)) {
      out.push_back(head + "guaranteed " + AmountText(unit, guaranteed) + " + borrowingLimit " +
                    AmountText(unit, *borrow) +
                    ": nothing running is evicted for it; its new work there waits until it is "
                    "within");
    } else if (*holds > guaranteed && guaranteed < guaranteed_was) {
      // (Work that may not be preempted was admitted within the old guarantee; past the new
      // one, no reclaim takes it: said, as a trial read "may reclaim them" of such work and
      // another queue then waited below its guarantee with no word why.)
      const int64_t borrowed = std::min(*holds, guaranteed_was) - guaranteed;
      // (Only where the status counts GPUs as one flavour: the charge a workload's status
      // holds names no flavour.)
      const int64_t pinned =
          unit == "gpu" && !by_flavour
              ? std::min(borrowed, std::max<int64_t>(0, pinned_milli - guaranteed))
              : 0;
      out.push_back(
          head + "guarantee of " + AmountText(unit, guaranteed) +
          (first ? " (it had no " + unit + " quota)"
                 : " (was " + AmountText(unit, guaranteed_was) + ")") +
          ": " + AmountText(unit, borrowed) +
          " more of it count as borrowed from now on, and a queue below its guarantee may "
          "reclaim them" +
          (pinned > 0 ? " but for " + AmountText(unit, pinned) +
                            " held by work that may not be preempted (spec.preemptible: false), "
                            "which no queue can take back: they free only as that work ends, "
                            "and until then others' guarantees that need them are not met"
                      : std::string()));
    }
  }
  return out;
}

// `warnings` in `r` as Kubernetes sends them (RFC 7234's code 299), one header each.
void AddWarnings(HttpResponse& r, const std::vector<std::string>& warnings) {
  for (std::string w : warnings) {
    std::replace(w.begin(), w.end(), '"', '\'');
    r.headers.push_back({"Warning", "299 - \"" + w + "\""});
  }
}

// `v` without the nulls, empty lists and empty maps in its maps, at any depth (what they say
// is what an absent field says); null where nothing is left.
json Pruned(const json& v) {
  if (v.is_object()) {
    json out = json::object();
    for (const auto& [k, item] : v.items())
      if (json kept = Pruned(item); !kept.is_null()) out[k] = std::move(kept);
    return out.empty() ? json() : out;
  }
  if (v.is_array()) {
    json out = json::array();
    for (const json& item : v) out.push_back(Pruned(item));
    return out.empty() ? json() : out;
  }
  return v;
}

// A label selector as Kubernetes writes one: requirements joined by commas, each "k=v", "k==v",
// "k!=v", "k" (exists), "!k" (does not), "k in (a,b)", "k notin (a,b)", "k>5" or "k<5" (the
// label read as a whole number).
struct LabelRequirement {
  enum Op { kEq, kNe, kExists, kAbsent, kIn, kNotIn, kGt, kLt } op = kExists;
  std::string key;
  std::vector<std::string> values;
};

std::string Trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

Result<std::vector<LabelRequirement>> ParseSelector(const std::string& selector) {
  std::vector<LabelRequirement> out;
  // (Split on the commas outside parentheses.)
  std::vector<std::string> terms(1);
  int depth = 0;
  for (char c : selector) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (depth < 0 || depth > 1) return InvalidArgument("labelSelector: unbalanced parentheses");
    if (c == ',' && depth == 0) {
      terms.emplace_back();
    } else {
      terms.back() += c;
    }
  }
  if (depth != 0) return InvalidArgument("labelSelector: unbalanced parentheses");
  for (const std::string& raw : terms) {
    const std::string term = Trimmed(raw);
    if (term.empty()) continue;
    LabelRequirement r;
    if (const size_t open = term.find('('); open != std::string::npos) {
      const std::string head = Trimmed(term.substr(0, open));
      const size_t space = head.rfind(' ');
      const std::string op = space == std::string::npos ? "" : head.substr(space + 1);
      if ((op != "in" && op != "notin") || term.back() != ')')
        return InvalidArgument("labelSelector: '" + term +
                               "': expected KEY in (V1,V2) or KEY notin (V1,V2)");
      r.op = op == "in" ? LabelRequirement::kIn : LabelRequirement::kNotIn;
      r.key = Trimmed(head.substr(0, space));
      std::string inside = term.substr(open + 1, term.size() - open - 2);
      for (size_t at = 0; at <= inside.size();) {
        const size_t comma = inside.find(',', at);
        r.values.push_back(Trimmed(
            inside.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (term[0] == '!') {
      r.op = LabelRequirement::kAbsent;
      r.key = Trimmed(term.substr(1));
    } else if (const size_t ne = term.find("!="); ne != std::string::npos) {
      r.op = LabelRequirement::kNe;
      r.key = Trimmed(term.substr(0, ne));
      r.values = {Trimmed(term.substr(ne + 2))};
    } else if (const size_t cmp = term.find_first_of("<>"); cmp != std::string::npos) {
      r.op = term[cmp] == '>' ? LabelRequirement::kGt : LabelRequirement::kLt;
      r.key = Trimmed(term.substr(0, cmp));
      r.values = {Trimmed(term.substr(cmp + 1))};
      if (!WholeNumber(r.values[0]))
        return InvalidArgument("labelSelector: '" + term + "': KEY" + term[cmp] +
                               "N compares with a whole number N (there is no >= or <=)");
    } else if (const size_t eq = term.find('='); eq != std::string::npos) {
      r.op = LabelRequirement::kEq;
      r.key = Trimmed(term.substr(0, eq));
      r.values = {Trimmed(term.substr(eq + (eq + 1 < term.size() && term[eq + 1] == '=' ? 2 : 1)))};
    } else {
      r.key = term;
    }
    if (r.key.empty() || r.key.find(' ') != std::string::npos)
      return InvalidArgument("labelSelector: '" + term +
                             "': expected KEY=VALUE, KEY!=VALUE, KEY, !KEY, KEY in (V1,V2), "
                             "KEY notin (V1,V2), KEY>N or KEY<N");
    if (Status s = ValidateLabel(r.key, ""); !s.ok())
      return InvalidArgument("labelSelector: '" + term + "': " + s.message());
    // (Values as a label's: a trial's a===b read as the value "=b" and matched nothing, where
    // Kubernetes refuses it.)
    if (r.op != LabelRequirement::kGt && r.op != LabelRequirement::kLt)
      for (const std::string& v : r.values)
        if (Status s = ValidateLabel(r.key, v); !s.ok())
          return InvalidArgument("labelSelector: '" + term + "': " + s.message());
    out.push_back(std::move(r));
  }
  return out;
}

// A Node's labels are those a nodeSelector matches (jsonf::NodeLabels).
bool MatchesSelector(const json& obj, const std::vector<LabelRequirement>& selector) {
  if (selector.empty()) return true;
  const json node_labels = Str(obj, "kind") == "Node" ? jsonf::NodeLabels(obj) : json();
  const json& labels =
      node_labels.is_object() ? node_labels : Field(Field(obj, "metadata"), "labels");
  for (const LabelRequirement& r : selector) {
    const json& v = Field(labels, r.key.c_str());
    const bool has = v.is_string();
    const bool listed =
        has && std::find(r.values.begin(), r.values.end(), v.get<std::string>()) != r.values.end();
    switch (r.op) {
      case LabelRequirement::kEq:
      case LabelRequirement::kIn:
        if (!listed) return false;
        break;
      case LabelRequirement::kNe:
      case LabelRequirement::kNotIn:
        if (listed) return false;
        break;
      case LabelRequirement::kExists:
        if (!has) return false;
        break;
      case LabelRequirement::kAbsent:
        if (has) return false;
        break;
      case LabelRequirement::kGt:
      case LabelRequirement::kLt: {
        const std::optional<int64_t> label = has ? WholeNumber(v.get<std::string>()) : std::nullopt;
        const std::optional<int64_t> bound = WholeNumber(r.values[0]);
        if (!label || !bound) return false;
        if (r.op == LabelRequirement::kGt ? *label <= *bound : *label >= *bound) return false;
        break;
      }
    }
  }
  return true;
}

// A field selector as Kubernetes writes one: terms joined by commas, each FIELD=VALUE,
// FIELD==VALUE or FIELD!=VALUE, every one to hold. As in Kubernetes, a kind is selected by a few
// fields only (a pod by metadata.name, spec.nodeName, status.phase …), and any other is refused
// rather than quietly ignored: a list that ignored the filter would look like its answer.
struct FieldRequirement {
  std::string field, value;
  bool equal = true;
};

std::vector<std::string> SelectableFields(const ResourceInfo& info) {
  const std::string plural = info.plural;
  std::vector<std::string> fields = {"metadata.name"};
  if (info.namespaced) fields.push_back("metadata.namespace");
  if (plural == "workloads")
    fields.insert(fields.end(), {"spec.queue", "spec.priorityClassName", "status.phase",
                                 "status.reason", "status.assignments.node"});
  if (plural == "nodes") fields.push_back("spec.unschedulable");
  if (plural == "queues") fields.push_back("spec.parent");
  if (plural == "tenants") fields.push_back("spec.trust");
  return fields;
}

// The values `field` has in `obj`: one, or a workload's nodes (any one of them selects it, none
// of them for !=). A field not set reads as its default (a workload's phase Pending, a node
// schedulable, a tenant standard), or as "" as Kubernetes reads it: `status.assignments.node=`
// selects the workloads placed nowhere.
std::vector<std::string> FieldValues(const json& obj, const std::string& field) {
  if (field == "status.assignments.node") {
    std::vector<std::string> nodes;
    for (const json& a : jsonf::List(Field(obj, "status"), "assignments"))
      nodes.push_back(Str(a, "node"));
    if (nodes.empty()) nodes.push_back("");
    return nodes;
  }
  const size_t dot = field.find('.');
  const json& v = dot == std::string::npos ? Field(obj, field.c_str())
                                           : Field(Field(obj, field.substr(0, dot).c_str()),
                                                   field.substr(dot + 1).c_str());
  if (v.is_string()) return {v.get<std::string>()};
  if (v.is_boolean()) return {v.get<bool>() ? "true" : "false"};
  if (field == "status.phase") return {"Pending"};
  if (field == "spec.unschedulable") return {"false"};
  if (field == "spec.trust") return {"standard"};
  return {""};
}

// The terms of `selector`, each of a field among `known` (those `what` are selected by).
Result<std::vector<FieldRequirement>> ParseFieldTerms(const std::string& selector,
                                                      const std::vector<std::string>& known,
                                                      const std::string& what) {
  std::vector<FieldRequirement> out;
  for (size_t start = 0; start <= selector.size();) {
    const size_t comma = std::min(selector.find(',', start), selector.size());
    const std::string term = Trimmed(selector.substr(start, comma - start));
    start = comma + 1;
    if (term.empty()) continue;
    FieldRequirement r;
    const size_t ne = term.find("!="), eq = term.find('=');
    if (eq == std::string::npos)
      return InvalidArgument("fieldSelector: '" + term +
                             "': expected FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE");
    const size_t op = ne != std::string::npos && ne < eq ? ne : eq;
    r.equal = op == eq;
    r.field = Trimmed(term.substr(0, op));
    const size_t value_at = op + (!r.equal || term.compare(op, 2, "==") == 0 ? 2 : 1);
    r.value = Trimmed(term.substr(value_at));
    if (std::find(known.begin(), known.end(), r.field) == known.end()) {
      std::string list;
      for (const std::string& f : known) list += (list.empty() ? "" : ", ") + f;
      return InvalidArgument("fieldSelector: '" + term + "': " + what + " are not selected by '" +
                             r.field + "' (field label not supported; they are by " + list + ")");
    }
    // (A value the field can never have is a mistake, not a filter that selects nothing: a trial
    // of kubectl habits writes status.phase=running.)
    if (r.field == "status.phase" && r.value != "Pending" && r.value != "Scheduled" &&
        r.value != "Running" && r.value != "Succeeded" && r.value != "Failed") {
      // (fabctl's STATUS column shows some phases with their reasons: a trial selected by
      // what it read there.)
      const std::string hint =
          r.value == "Unschedulable" ? " (Unschedulable is status.reason=Unschedulable)"
          : r.value == "Inactive"    ? " (Inactive is status.reason=Inactive or Deactivated)"
          : r.value == "Evicting" || r.value == "Starting" || r.value == "Stopping"
              ? " (" + r.value + " is a Running workload as fabctl shows it)"
              : "";
      return InvalidArgument("fieldSelector: '" + term + "': status.phase is one of Pending, " +
                             "Scheduled, Running, Succeeded, Failed" + hint);
    }
    if (r.field == "spec.unschedulable" && r.value != "true" && r.value != "false")
      return InvalidArgument("fieldSelector: '" + term + "': spec.unschedulable is true or false");
    if (r.field == "spec.trust" && r.value != "trusted" && r.value != "standard" &&
        r.value != "untrusted")
      return InvalidArgument("fieldSelector: '" + term +
                             "': spec.trust is one of trusted, standard, untrusted");
    if (r.field == "type" && r.value != "Normal" && r.value != "Warning")
      return InvalidArgument("fieldSelector: '" + term + "': type is Normal or Warning");
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<FieldRequirement>> ParseFieldSelector(const ResourceInfo& info,
                                                         const std::string& selector) {
  return ParseFieldTerms(selector, SelectableFields(info), info.plural);
}

bool MatchesFields(const json& obj, const std::vector<FieldRequirement>& selector) {
  for (const FieldRequirement& r : selector) {
    const std::vector<std::string> values = FieldValues(obj, r.field);
    const bool any = std::find(values.begin(), values.end(), r.value) != values.end();
    if (any != r.equal) return false;
  }
  return true;
}

bool AssignedTo(const json& workload, const std::string& node) {
  const json& assignments = Field(Field(workload, "status"), "assignments");
  if (!assignments.is_array()) return false;
  for (const json& a : assignments) {
    if (Str(a, "node") == node) return true;
  }
  return false;
}

enum class JsonKind { kString, kInt, kBool, kObject, kList };

// "a: unknown field; b: unknown field": every unknown field at once, as strict decoding names
// them.
// `known`: the fields of the map(s) they were found in, for a guess at what each misspells.
Status UnknownFields(const std::vector<std::string>& paths,
                     const std::vector<std::string>& known = {}) {
  std::string msg;
  for (const std::string& p : paths)
    msg += (msg.empty() ? "" : "; ") + p + ": " +
           UnknownFieldMessage(p.substr(p.rfind('.') == std::string::npos ? 0 : p.rfind('.') + 1),
                               known);
  return InvalidArgument(msg);
}

// Checks that `j`, found at `path`, is an object whose fields are among `fields`, each of its
// kind.
Status CheckFields(const json& j, const std::string& path,
                   std::initializer_list<std::pair<const char*, JsonKind>> fields) {
  if (!j.is_object()) return InvalidArgument(path + ": expected an object");
  std::vector<std::string> unknown;
  for (const auto& [key, v] : j.items()) {
    const std::string& k = key;  // clang 14 cannot capture a structured binding
    if (std::none_of(fields.begin(), fields.end(), [&k](const auto& f) { return k == f.first; }))
      unknown.push_back(path + "." + k);
  }
  if (!unknown.empty()) {
    std::vector<std::string> known;
    for (const auto& f : fields) known.push_back(f.first);
    return UnknownFields(unknown, known);
  }
  for (const auto& [key, v] : j.items()) {
    const std::string& k = key;
    auto f =
        std::find_if(fields.begin(), fields.end(), [&k](const auto& f) { return k == f.first; });
    const bool ok = f->second == JsonKind::kString ? v.is_string()
                    : f->second == JsonKind::kInt  ? v.is_number_integer()
                    : f->second == JsonKind::kBool ? v.is_boolean()
                    : f->second == JsonKind::kList ? v.is_array()
                                                   : v.is_object();
    if (!ok) {
      const char* want = f->second == JsonKind::kString ? "a string"
                         : f->second == JsonKind::kInt  ? "an integer"
                         : f->second == JsonKind::kBool ? "true or false"
                         : f->second == JsonKind::kList ? "a list"
                                                        : "an object";
      return InvalidArgument(path + "." + k + ": expected " + want + ", got " + v.dump());
    }
  }
  return Status::Ok();
}

// A workload's status carries the scheduler's decision and the agents' reports, and both read it
// with typed accessors: every write must keep it to these types, whoever writes it.
Status ValidateWorkloadStatus(const json& status) {
  using K = JsonKind;
  RETURN_IF_ERROR(CheckFields(
      status, "status",
      {{"phase", K::kString},         {"message", K::kString},
       {"reason", K::kString},        {"isolation", K::kString},
       {"startTime", K::kString},     {"completionTime", K::kString},
       {"scheduledTime", K::kString}, {"exitCode", K::kInt},
       {"assignments", K::kList},     {"nomination", K::kList},
       {"nominatedCounts", K::kList}, {"admittedCounts", K::kList},
       {"resizedTime", K::kString},   {"startedPods", K::kObject},
       {"finishedPods", K::kObject},  {"growthRetryTime", K::kString},
       {"shrinks", K::kList},         {"shrink", K::kObject},  // (an earlier build's one mark)
       {"requeueState", K::kObject},  {"preemption", K::kObject},
       {"conditions", K::kList},      {"evictions", K::kObject},
       {"swap", K::kObject},          {"expectedStartTime", K::kString},
       {"resourceUsage", K::kObject}, {"growthBlocked", K::kString}}));
  const std::string phase = Str(status, "phase", "Pending");
  if (phase != "Pending" && phase != "Scheduled" && phase != "Running" && phase != "Succeeded" &&
      phase != "Failed") {
    return InvalidArgument("status.phase: '" + phase +
                           "' is not one of Pending, Scheduled, Running, Succeeded, Failed");
  }
  const json& conditions = Field(status, "conditions");
  for (size_t i = 0; i < conditions.size(); ++i) {
    if (!conditions[i].is_object()) {
      return InvalidArgument("status.conditions[" + std::to_string(i) + "]: expected an object");
    }
  }
  // Gang-timeout releases: how many, and when it may try again.
  if (status.contains("requeueState")) {
    RETURN_IF_ERROR(CheckFields(status["requeueState"], "status.requeueState",
                                {{"count", K::kInt}, {"requeueAt", K::kString}}));
    const json& count = Field(status["requeueState"], "count");
    if (count.is_number_integer() && (count < 0 || count > 1'000'000))
      return InvalidArgument("status.requeueState.count: must be between 0 and 1000000");
  }
  // A preemptor's swap past its queue's quota (Admitter::swap): the flavour and what its queue
  // held there when the preemption began; `held`: a held borrower's swap (HeldSwap).
  if (status.contains("swap")) {
    RETURN_IF_ERROR(
        CheckFields(status["swap"], "status.swap",
                    {{"flavor", K::kString}, {"ceilingMilli", K::kInt}, {"held", K::kBool}}));
    const json& ceiling = Field(status["swap"], "ceilingMilli");
    if (ceiling.is_number_integer() &&
        (ceiling.is_number_unsigned()
             ? ceiling.get<uint64_t>() > kMaxSwapCeilingMilli
             : ceiling.get<int64_t>() < 0 || ceiling.get<int64_t>() > kMaxSwapCeilingMilli))
      return InvalidArgument("status.swap.ceilingMilli: must be between 0 and " +
                             std::to_string(kMaxSwapCeilingMilli));
  }
  // How often it was stopped and put back in line, and the last time why.
  if (status.contains("evictions")) {
    const json& ev = status["evictions"];
    RETURN_IF_ERROR(
        CheckFields(ev, "status.evictions",
                    {{"count", K::kInt}, {"gpuSecondsLost", K::kInt}, {"last", K::kObject}}));
    const json& count = Field(ev, "count");
    if (count.is_number_integer() && (count < 0 || count > 1'000'000'000))
      return InvalidArgument("status.evictions.count: must be between 0 and 1000000000");
    const json& lost = Field(ev, "gpuSecondsLost");
    if (lost.is_number_integer() && (lost < 0 || lost > kMaxLostGpuSeconds))
      return InvalidArgument("status.evictions.gpuSecondsLost: must be between 0 and " +
                             std::to_string(kMaxLostGpuSeconds));
    if (ev.contains("last"))
      RETURN_IF_ERROR(
          CheckFields(ev["last"], "status.evictions.last",
                      {{"reason", K::kString}, {"message", K::kString}, {"time", K::kString}}));
  }
  // The pods of its binding that have started, and those that completed, each with when
  // (nodes report them).
  for (const char* key : {"startedPods", "finishedPods"})
    for (const auto& [pod, at] : Field(status, key).items())
      if (!at.is_string())
        return InvalidArgument("status." + std::string(key) + "." + pod +
                               ": expected a string, got " + at.dump());
  // Partial admission: the pods it was admitted with, or nominated for, per pod set.
  for (const char* key : {"admittedCounts", "nominatedCounts"}) {
    const json& counts = Field(status, key);
    for (size_t i = 0; i < counts.size(); ++i)
      if (!counts[i].is_number_integer() || counts[i] < 1)
        return InvalidArgument("status." + std::string(key) + "[" + std::to_string(i) +
                               "]: expected a positive integer");
  }
  // Elastic shrinks' marks (the scheduler's), oldest first: who takes which of its pods, why,
  // and when they stop (it runs on with the rest).
  const json& shrinks = Field(status, "shrinks");
  for (size_t m = 0; m < shrinks.size(); ++m) {
    const std::string at = "status.shrinks[" + std::to_string(m) + "]";
    if (!shrinks[m].is_object()) return InvalidArgument(at + ": expected an object");
    RETURN_IF_ERROR(CheckFields(shrinks[m], at,
                                {{"by", K::kString},
                                 {"reason", K::kString},
                                 {"deadline", K::kString},
                                 {"pods", K::kList},
                                 {"basis", K::kString}}));
    const json& pods = Field(shrinks[m], "pods");
    for (size_t i = 0; i < pods.size(); ++i)
      if (!pods[i].is_string())
        return InvalidArgument(at + ".pods[" + std::to_string(i) + "]: expected a string");
  }
  // A victim's mark (the scheduler's): who preempts it, why, and when it stops; `final`: it
  // then fails rather than waiting again (past its maximum runtime).
  if (status.contains("preemption")) {
    RETURN_IF_ERROR(CheckFields(status["preemption"], "status.preemption",
                                {{"by", K::kString},
                                 {"reason", K::kString},
                                 {"deadline", K::kString},
                                 {"final", K::kBool},
                                 {"evictor", K::kString},
                                 {"basis", K::kString}}));
  }
  // Where it runs, and where a waiting preemptor plans to (the same shape).
  for (const char* key : {"assignments", "nomination"}) {
    const json& assignments = Field(status, key);
    for (size_t i = 0; i < assignments.size(); ++i) {
      const std::string path = "status." + std::string(key) + "[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(CheckFields(assignments[i], path,
                                  {{"pod", K::kString},
                                   {"node", K::kString},
                                   {"devices", K::kList},
                                   {"numa", K::kInt},
                                   {"nic", K::kString}}));
      if (!assignments[i].contains("node")) return InvalidArgument(path + ".node: required");
      const json& devices = Field(assignments[i], "devices");
      for (size_t d = 0; d < devices.size(); ++d) {
        RETURN_IF_ERROR(CheckFields(devices[d], path + ".devices[" + std::to_string(d) + "]",
                                    {{"index", K::kInt},
                                     {"uuid", K::kString},
                                     {"gpuMilli", K::kInt},
                                     {"memoryMiB", K::kInt},
                                     {"migSlice", K::kInt},
                                     {"migProfile", K::kString}}));
        for (const char* count : {"index", "gpuMilli", "memoryMiB", "migSlice"}) {
          if (Field(devices[d], count).is_number_integer() && devices[d][count].get<int64_t>() < 0)
            return InvalidArgument(path + ".devices[" + std::to_string(d) + "]." + count +
                                   ": must not be negative");
        }
      }
    }
  }
  return Status::Ok();
}

// Fields whose JSON type the schema fixes (an integer, or a boolean). The manifests' parsers read
// YAML, where a scalar is a number or a boolean when its text spells one, so they accept "600"
// for a number; the stored object is JSON, and its readers (agents, fabctl) use typed accessors.
// "[]" stands for every element of a list.
struct TypedField {
  const char* kind;
  const char* path;
  bool boolean;
};
constexpr TypedField kTypedFields[] = {
    {"Workload", "spec.priority", false},
    {"Workload", "spec.gang", true},
    {"Workload", "spec.preemptible", true},
    {"Workload", "spec.active", true},
    {"Workload", "spec.minRuntimeSeconds", false},
    {"Workload", "spec.checkpointIntervalSeconds", false},
    {"Workload", "spec.maxRuntimeSeconds", false},
    {"Workload", "spec.run.durationSeconds", false},
    {"Workload", "spec.podSets[].count", false},
    {"Workload", "spec.podSets[].minCount", false},
    {"Workload", "spec.podSets[].devices.gpus", false},
    {"Tenant", "spec.exclusiveNodes", true},
    {"Node", "spec.unschedulable", true},
    {"Node", "spec.numaNodes", false},
    {"Node", "spec.gpus.count", false},
    {"Node", "spec.gpus.ecc", true},
    {"Node", "spec.gpus.nvswitch", true},
    {"Node", "spec.devices[].numa", false},
    {"Node", "spec.devices[].ecc", true},
    {"Node", "spec.nics[].numa", false},
    {"Node", "spec.nics[].gbps", false},
    {"Lease", "spec.leaseDurationSeconds", false},
};

// Checks the field at `path` below `j` (found at `at`) when it is there; other shapes are left to
// the parsers, which name them.
Status CheckTyped(const json& j, const std::string& path, const std::string& at, bool boolean) {
  const size_t dot = path.find('.');
  std::string key = path.substr(0, dot);
  const bool each = key.size() > 2 && key.compare(key.size() - 2, 2, "[]") == 0;
  if (each) key.resize(key.size() - 2);
  if (!j.is_object() || !j.contains(key)) return Status::Ok();
  const json& v = j[key];
  const std::string here = at.empty() ? key : at + "." + key;
  if (dot == std::string::npos) {
    if (boolean ? v.is_boolean() : v.is_number_integer()) return Status::Ok();
    return InvalidArgument(here + ": expected " + (boolean ? "true or false" : "an integer") +
                           ", got " + v.dump());
  }
  const std::string rest = path.substr(dot + 1);
  if (!each) return CheckTyped(v, rest, here, boolean);
  for (size_t i = 0; v.is_array() && i < v.size(); ++i) {
    RETURN_IF_ERROR(CheckTyped(v[i], rest, here + "[" + std::to_string(i) + "]", boolean));
  }
  return Status::Ok();
}

// Continue tokens are opaque to clients: the hex of the last returned item's key.
std::string HexEncode(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}
std::optional<std::string> HexDecode(const std::string& s) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (s.size() % 2) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) {
    const int hi = nibble(s[i]), lo = nibble(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::string RandomHex(int bytes) {
  static thread_local std::mt19937_64 gen(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < bytes; ++i) {
    const unsigned v = static_cast<unsigned>(gen() & 0xff);
    out += hex[v >> 4];
    out += hex[v & 15];
  }
  return out;
}

// Rewrites "nodes[0].x" paths of the fleet parser into the API object's "spec.x".
std::string SpecPath(std::string message) {
  for (const std::string from : {"nodes[0].", "doc0.", "doc1."}) {
    size_t pos;
    while ((pos = message.find(from)) != std::string::npos) {
      message.replace(pos, from.size(), from == "nodes[0]." ? "spec." : "");
    }
  }
  return message;
}

// A queue's quota amount as it is stored: GPUs a number (2, 0.5), CPU cores as Kubernetes
// writes them ("16", "500m"), memory in the largest binary unit that divides it ("64Gi").
json CanonicalQuantity(const std::string& resource, int64_t amount) {
  if (resource == kCpuQuota)
    return amount % 1000 == 0 ? std::to_string(amount / 1000) : std::to_string(amount) + "m";
  if (resource == kMemoryQuota) {
    if (amount != 0 && amount % (1024 * 1024) == 0)
      return std::to_string(amount / (1024 * 1024)) + "Ti";
    if (amount != 0 && amount % 1024 == 0) return std::to_string(amount / 1024) + "Gi";
    return std::to_string(amount) + "Mi";
  }
  if (amount % 1000 == 0) return amount / 1000;
  return static_cast<double>(amount) / 1000.0;
}

}  // namespace

// One watch stream: replays events after its resourceVersion, then forwards live ones.
class Watcher : public StreamSource, public std::enable_shared_from_this<Watcher> {
 public:
  // What a watcher makes of an object: not its principal's to read, readable but outside its
  // selectors, or selected.
  enum class Seen { kHidden, kUnselected, kSelected };
  using Filter = std::function<Seen(const WatchEvent&, json* object)>;
  // `shape`, where set, is what each event's object is sent as (a one-row Table, for kubectl).
  Watcher(Store& store, std::string prefix, int64_t after, Filter filter,
          std::function<void(Watcher*)> on_end, std::function<json(const json&)> shape = nullptr)
      : store_(store),
        prefix_(std::move(prefix)),
        after_(after),
        filter_(std::move(filter)),
        on_end_(std::move(on_end)),
        shape_(std::move(shape)) {}

  void Start(std::function<bool(std::string)> write, std::function<void()> finish) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_ = std::move(write);
      finish_ = std::move(finish);
    }
    // What this watcher would have shown as of `after_`, to report objects that later leave its
    // selection: objects unchanged since then are known from the current list; for those changed
    // since, the state at `after_` is unknown until their next event.
    auto listed = store_.List(prefix_, "", 0);
    // From the current state (a watch with no version, or version 0): what is there now, as
    // ADDED events, then what changes after it, as in Kubernetes.
    const bool from_now = after_ < 0;
    if (from_now && listed.ok()) after_ = listed->revision;
    auto events = store_.EventsSince(prefix_, std::max<int64_t>(after_, 0), 0);
    std::lock_guard<std::mutex> lock(mu_);
    if (!events.ok() || !listed.ok()) {
      const Status& st = events.ok() ? listed.status() : events.status();
      json err = {
          {"type", "ERROR"},
          {"object", json::parse(StatusResponse(events.ok() ? 500 : 410, st.message()).body)}};
      if (write_) write_(err.dump() + "\n");
      if (finish_) finish_();
      cancelled_ = true;
      return;
    }
    for (const KeyValue& kv : listed->items) {
      json obj;
      if (kv.mod_revision <= after_ &&
          Passes(WatchEvent{WatchEvent::Type::kPut, kv}, &obj) == Seen::kSelected) {
        shown_[kv.key] = obj.dump();
        if (from_now && write_) {
          json line = {{"type", "ADDED"}, {"object", shape_ ? shape_(obj) : obj}};
          if (!write_(line.dump() + "\n")) write_ = nullptr;
        }
      }
    }
    if (from_now) last_sent_ = after_;
    // (From the current state, the state at after_ is the list's, known: no key is unknown, or
    // one written between the list and now would read as leaving the selection.)
    for (const WatchEvent& e : *events) {
      if (!from_now && e.kv.create_revision <= after_) unknown_.insert(e.kv.key);
    }
    for (const WatchEvent& e : *events) SendLocked(e);
    replaying_ = false;
    for (const WatchEvent& e : pending_) SendLocked(e);
    pending_.clear();
  }

  void Cancel() override {
    std::function<void(Watcher*)> end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
      write_ = nullptr;
      finish_ = nullptr;
      end = on_end_;
    }
    if (end) end(this);
  }

  void Deliver(const std::vector<WatchEvent>& events) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    for (const WatchEvent& e : events) {
      if (e.kv.key.rfind(prefix_, 0) != 0) continue;
      if (replaying_)
        pending_.push_back(e);
      else
        SendLocked(e);
    }
  }

 private:
  // What the filter makes of the object of `e`; one it cannot read is hidden.
  Seen Passes(const WatchEvent& e, json* obj) {
    try {
      return filter_(e, obj);
    } catch (const std::exception&) {
      return Seen::kHidden;
    }
  }

  void SendLocked(const WatchEvent& e) {
    if (e.kv.mod_revision <= last_sent_ || !write_) return;
    last_sent_ = e.kv.mod_revision;
    // This runs on the store's committer thread: bad data must cost an event, not the process.
    try {
      json obj;
      const Seen seen = Passes(e, &obj);
      const bool visible = seen == Seen::kSelected;
      auto shown = shown_.find(e.kv.key);
      const bool was_shown = shown != shown_.end();
      const bool unknown = unknown_.erase(e.kv.key) > 0;
      const char* type;
      if (!visible && !was_shown && unknown && seen == Seen::kUnselected &&
          e.type == WatchEvent::Type::kPut) {
        // Outside the selection now, and maybe shown as of `after_` (the watch began, or opened
        // again, after the list it follows): said deleted, as its principal may read it, and a
        // client that never had it ignores the deletion.
        type = "DELETED";
      } else if (!visible) {
        if (!was_shown) return;
        // It left this watcher's selection (a label removed, a workload taken off this node):
        // as in Kubernetes the watcher sees a deletion, of the last state it was allowed to see.
        obj = json::parse(shown->second);
        obj["metadata"]["resourceVersion"] = std::to_string(e.kv.mod_revision);
        shown_.erase(shown);
        type = "DELETED";
      } else if (e.type == WatchEvent::Type::kDelete) {
        if (was_shown) shown_.erase(shown);
        type = "DELETED";
      } else {
        // New to this watcher (created, or it starts matching), unless the watch began too late
        // to know whether it was shown before.
        type = was_shown || unknown ? "MODIFIED" : "ADDED";
        shown_[e.kv.key] = obj.dump();
      }
      json line = {{"type", type}, {"object", shape_ ? shape_(obj) : obj}};
      if (!write_(line.dump() + "\n")) write_ = nullptr;
    } catch (const std::exception&) {
    }
  }

  Store& store_;
  std::string prefix_;
  int64_t after_;
  Filter filter_;
  std::function<void(Watcher*)> on_end_;
  std::function<json(const json&)> shape_;
  std::mutex mu_;
  std::function<bool(std::string)> write_;
  std::function<void()> finish_;
  bool replaying_ = true;
  bool cancelled_ = false;
  int64_t last_sent_ = 0;
  std::vector<WatchEvent> pending_;
  std::map<std::string, std::string> shown_;  // key -> the last state shown (JSON)
  std::set<std::string> unknown_;  // keys whose state at after_ is unknown (changed since)
};

// Events about workloads, as Kubernetes records them (what happened, when, why; a count where
// the same thing happens again), derived from each workload's stored status as it changes: the
// scheduler, the health controller and the nodes write the status, and whatever wrote it, the
// change is seen here once. The newest kMaxEvents (kPerWorkload of one), as Kubernetes keeps
// its events an hour: a history to debug with, not a record of truth (the status and the
// metering are that). The store's committer hands the writes over and goes on; a worker of its
// own reads them (a list reads what is left first, so it sees every write committed before
// it). With a store (Persist), each workload's events are kept there too, as one object under
// /registry/events/NS/NAME written at most once a second, so that a restarted server lists
// what happened before it.
class EventRecorder {
 public:
  static constexpr size_t kMaxEvents = 5000;
  static constexpr size_t kPerWorkload = 50;
  static constexpr size_t kAlikeWithin = 4;    // a workload's last events a new one may join
  static constexpr size_t kTombstones = 2000;  // drops a watch from an earlier version is told of
  static constexpr std::chrono::milliseconds kFlushEvery{1000};
  static constexpr const char* kStorePrefix = "/registry/events/";
  static constexpr uint64_t kMaxSequence = uint64_t{1} << 53;  // (exact in any JSON reader)
  static constexpr size_t kMaxMessage = 1024;                  // bytes, as Kubernetes cuts them
  // How long a deleted workload's events are kept (kube-apiserver's --event-ttl default).
  static constexpr int64_t kDeletedTtlMs = 3'600'000;

  EventRecorder() : worker_([this] { Work(); }) {}
  ~EventRecorder() {
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  // Keeps the events in `store` from now on, and reads those an earlier server kept there
  // (after SetVersionBase, before Seed): they are listed as before, counted on as before, with
  // versions of this server's (its first). An object that cannot be read, or none of whose
  // events can (a list of event objects, each with a sequence, type, reason and timestamps),
  // goes, and the log says so.
  void Persist(Store* store) {
    std::vector<Event> loaded;
    std::vector<std::string> listed;  // "ns/name" of each object kept
    std::map<std::string, std::string> uids;
    std::map<std::string, int64_t> deleted;  // "ns/name" -> deletedAt
    size_t unreadable = 0;
    auto stored = store->List(kStorePrefix, "", 0);
    if (!stored.ok())
      std::fprintf(stderr, "fabrica: events kept in the store not read (%s)\n",
                   stored.status().ToString().c_str());
    if (stored.ok())
      for (const KeyValue& kv : stored->items) {
        const std::string ns_name = kv.key.substr(std::strlen(kStorePrefix));
        listed.push_back(ns_name);
        const size_t slash = ns_name.find('/');
        const json obj = json::parse(kv.value, nullptr, false);
        const size_t before = loaded.size();
        if (slash != std::string::npos && obj.is_object())
          for (const json& j : jsonf::List(obj, "events")) {
            Event e;
            e.ns = ns_name.substr(0, slash);
            e.name = ns_name.substr(slash + 1);
            e.type = jsonf::Str(j, "type");
            e.reason = jsonf::Str(j, "reason");
            e.message = Clip(jsonf::Str(j, "message"));
            e.first = jsonf::Str(j, "firstTimestamp");
            e.last = jsonf::Str(j, "lastTimestamp");
            if (const json& c = jsonf::Field(j, "count"); c.is_number_integer())
              e.count = std::max<int64_t>(1, c.get<int64_t>());
            if (const json& q = jsonf::Field(j, "sequence"); q.is_number_unsigned())
              e.sequence = q.get<uint64_t>();
            e.waiting = jsonf::Field(j, "waiting") == true;
            e.shape = Shape(e.message);
            // (A sequence past what a clock gives is no event of ours: names go on from it.)
            if (e.sequence > 0 && e.sequence <= kMaxSequence && !e.reason.empty() &&
                (e.type == "Normal" || e.type == "Warning") && !e.first.empty() && !e.last.empty())
              loaded.push_back(std::move(e));
          }
        if (loaded.size() == before) {
          ++unreadable;
          continue;
        }
        if (std::string uid = jsonf::Str(obj, "uid"); !uid.empty()) uids[ns_name] = std::move(uid);
        if (const json& at = jsonf::Field(obj, "deletedAt"); at.is_number_integer())
          deleted[ns_name] = at.get<int64_t>();
      }
    if (unreadable > 0)
      std::fprintf(stderr, "fabrica: %zu stored event object(s) under %s unreadable; removed\n",
                   unreadable, kStorePrefix);
    // In the order they were recorded (the newest kMaxEvents are kept once Seed has dropped
    // those of workloads no longer stored).
    std::sort(loaded.begin(), loaded.end(),
              [](const Event& a, const Event& b) { return a.sequence < b.sequence; });
    std::lock_guard<std::mutex> lock(mu_);
    store_ = store;
    stored_.insert(listed.begin(), listed.end());
    stored_known_ = stored.ok();
    uids_ = std::move(uids);
    deleted_at_ = std::move(deleted);
    for (Event& e : loaded) {
      e.version = e.created = version_;
      events_.push_back(std::move(e));
      std::deque<Events::iterator>& mine =
          by_workload_[events_.back().ns + "/" + events_.back().name];
      mine.push_back(std::prev(events_.end()));
      if (mine.size() > kPerWorkload) {
        events_.erase(mine.front());
        mine.pop_front();
        MarkDirty(events_.back());
      }
    }
    // (An object none of whose events is left — past the limits, or unreadable — goes.)
    for (const std::string& ns_name : listed)
      if (!by_workload_.count(ns_name)) MarkDirty(ns_name);
  }

  // What each stored workload is now, so that only changes from here on are events. Events
  // kept of a workload no longer stored go, and so do those of one deleted and created again
  // by its name (another uid); then the newest kMaxEvents are kept. `complete`: `workloads`
  // is every one stored (else nothing is dropped: a failed list is no deletion).
  void Seed(const std::vector<KeyValue>& workloads, bool complete = true) {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::string> stored;  // "ns/name" -> uid
    for (const KeyValue& kv : workloads) {
      json obj = json::parse(kv.value, nullptr, false);
      if (obj.is_object()) last_[kv.key] = Summarize(obj);
      stored[kv.key.substr(std::strlen(kPrefix))] =
          jsonf::Str(jsonf::Field(obj, "metadata"), "uid");
    }
    for (auto it = by_workload_.begin(); complete && it != by_workload_.end();) {
      const auto now = stored.find(it->first);
      const auto kept = uids_.find(it->first);
      // (Deleted while this server ran before: kept for their time, Expire's.)
      if (now == stored.end() && deleted_at_.count(it->first)) {
        ++it;
        continue;
      }
      if (now != stored.end() &&
          (kept == uids_.end() || now->second.empty() || kept->second == now->second)) {
        // (An object an earlier build wrote without its uid gets it.)
        if (kept == uids_.end() && !now->second.empty()) {
          uids_[it->first] = now->second;
          MarkDirty(it->first);
        }
        ++it;
        continue;
      }
      for (const auto& e : it->second) {
        MarkDirty(*e);
        events_.erase(e);
      }
      uids_.erase(it->first);
      deleted_at_.erase(it->first);
      it = by_workload_.erase(it);
    }
    while (events_.size() > kMaxEvents) {
      const std::string key = events_.front().ns + "/" + events_.front().name;
      auto& theirs = by_workload_[key];
      theirs.pop_front();  // (the oldest of all is the oldest of its workload)
      if (theirs.empty()) by_workload_.erase(key);
      MarkDirty(key);
      events_.pop_front();
    }
    for (const Event& e : events_) sequence_ = std::max(sequence_, e.sequence);
  }

  // (On the store's committer thread: only a copy of the workloads' writes, for the worker.)
  void Observe(const std::vector<WatchEvent>& events, int64_t now_ms) {
    latest_ms_.store(now_ms, std::memory_order_relaxed);  // (Expire's clock: any write)
    std::vector<Write> writes;
    for (const WatchEvent& e : events)
      if (e.kv.key.rfind(kPrefix, 0) == 0)
        writes.push_back({e.type == WatchEvent::Type::kDelete, e.kv.key,
                          e.type == WatchEvent::Type::kDelete ? "" : e.kv.value, now_ms});
    if (writes.empty()) return;
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      for (Write& w : writes) pending_.push_back(std::move(w));
    }
    wake_.notify_one();
  }

  // One watch of the events (GET .../events?watch=true): told of each event recorded (ADDED)
  // or counted again (MODIFIED) that it selects, as a line of the stream.
  class Subscriber {
   public:
    virtual ~Subscriber() = default;
    // Whether the event (as ToJson) is one this watch shows.
    virtual bool Selects(const json& event) = 0;
    // One event of the stream: its type, the event (as ToJson) and the line that tells it
    // unchanged ({"type", "object"} and a newline).
    virtual void Send(const char* type, const json& event, const std::string& line) = 0;
  };

  // Versions begin at `base` (a new server's clock in ms × 1000), so that they keep rising
  // across restarts and a version an earlier server gave is told apart (Subscribe). Before Seed.
  // Events are named after their workload and a sequence number that starts there too, so
  // that a name is not given again after a restart (even to an event that was never kept).
  void SetVersionBase(uint64_t base) {
    std::lock_guard<std::mutex> lock(mu_);
    if (version_ == 0) version_ = base_ = sequence_ = base;
  }

  // Starts `s`: first the events recorded or counted after `after` (a version an earlier list or
  // watch reported; 0: all there are), oldest change first, then each as it happens (DELETED as
  // one is dropped: the oldest past the limits, or its workload's deleted); what was recorded
  // before and not counted since is not sent again, so a list and a watch from its version miss
  // nothing and say nothing twice. Where that cannot be kept — `after` is another server's (one
  // before a restart), or an event changed since was dropped meanwhile — the error Kubernetes
  // gives a watch from a version too old (410: list again) is returned, and `s` is not started.
  Status Subscribe(const std::shared_ptr<Subscriber>& s, uint64_t after) {
    std::lock_guard<std::mutex> lock(mu_);
    Drain();
    if (after != 0 && (after < base_ || after > version_))
      return Status(StatusCode::kFailedPrecondition,
                    "resourceVersion " + std::to_string(after) +
                        " is not one of this server's (it restarted since?): list again");
    if (after != 0 && after < forgotten_through_)
      return Status(StatusCode::kFailedPrecondition,
                    "too old resource version: " + std::to_string(after) +
                        " (events dropped since are no longer remembered): list again");
    // What changed since: events, and the drops of those it may have seen (DELETED).
    struct Change {
      uint64_t version;
      const char* type;
      json event;
    };
    std::vector<Change> changed;
    for (const Event& e : events_) {
      if (e.version <= after) continue;
      json j = ToJson(e);
      if (s->Selects(j))
        changed.push_back({e.version, e.created > after ? "ADDED" : "MODIFIED", std::move(j)});
    }
    for (const Tombstone& t : tombstones_)
      if (t.version > after && t.created <= after && s->Selects(t.event))
        changed.push_back({t.version, "DELETED", t.event});
    std::sort(changed.begin(), changed.end(),
              [](const Change& a, const Change& b) { return a.version < b.version; });
    for (const Change& c : changed) s->Send(c.type, c.event, Line(c.type, c.event));
    subscribers_.push_back(s);
    return Status::Ok();
  }
  void Unsubscribe(const Subscriber* s) {
    std::lock_guard<std::mutex> lock(mu_);
    subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                      [s](const auto& p) { return p.get() == s; }),
                       subscribers_.end());
  }

  // Events in namespace `ns` ("": all), of workload `name` ("": all), oldest first; `version`
  // (if given) is set to the recorder's version they are as of. Who may read which the caller
  // decides.
  json List(const std::string& ns, const std::string& name, uint64_t* version = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    Drain();
    if (version) *version = version_;
    json items = json::array();
    const auto add = [&](const Event& e) {
      if (ns.empty() || e.ns == ns) items.push_back(ToJson(e));
    };
    if (!name.empty() && !ns.empty()) {
      if (auto it = by_workload_.find(ns + "/" + name); it != by_workload_.end())
        for (const auto& e : it->second) add(*e);
    } else {
      for (const Event& e : events_)
        if (name.empty() || e.name == name) add(e);
    }
    return items;
  }

 private:
  static constexpr const char* kPrefix = "/registry/workloads/";
  struct Write {
    bool deleted = false;
    std::string key, value;
    int64_t at_ms = 0;
  };
  struct Summary {
    std::string phase, reason, message, resized;
    std::string charged;  // the queue charged (status.resourceUsage.queue)
    int64_t evictions = 0;
    bool marked = false;  // status.preemption: a victim stopping
    // status.shrinks: an elastic shrink's marks (pods taken, the rest run on), as the event
    // each new one gets says them.
    std::map<std::string, std::string> shrinks;  // identity -> message
    // Running with some pods not started yet (status.startedPods, as fabctl's "Starting"):
    // how many of how many are up.
    bool starting = false;
    int64_t up = 0, bound = 0;
  };
  struct Event {
    std::string ns, name, type, reason, message, first, last;
    int64_t count = 1;
    uint64_t sequence = 0;
    bool waiting = false;  // why a pending workload waits (alike ones merge: Record)
    uint64_t version = 0;  // the recorder's version when it was last recorded or counted
    uint64_t created = 0;  // ... when it was first recorded
    std::string shape;     // Shape of its message before Clip (of the message kept, if loaded)
  };
  using Events = std::list<Event>;

  void Work() {
    std::unique_lock<std::mutex> wait(pending_mu_);
    // Events to keep (Persist) are written at `due`, once a second at most. (Awake then even
    // with no writes handed over: a list may have read some, leaving events to keep.)
    auto due = std::chrono::steady_clock::now() + kFlushEvery;
    while (true) {
      wake_.wait_until(wait, due, [this] { return stop_ || !pending_.empty(); });
      const bool stop = stop_;
      wait.unlock();
      bool unflushed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Drain();
        unflushed = unflushed_;
      }
      const auto now = std::chrono::steady_clock::now();
      if (stop || (unflushed && now >= due)) Flush();
      if (now >= due) due = now + kFlushEvery;
      if (stop) return;
      wait.lock();
    }
  }
  // Writes each workload's events that changed since the last flush (all of them as one
  // object with its workload's uid; none left: the object deleted), under one group commit.
  // What fails to be written is tried again at the next flush. On the worker only, so writes
  // never cross.
  void Flush() {
    std::vector<Store::Write> writes;
    std::vector<std::string> names;  // "ns/name" of each write
    Store* store;
    {
      std::lock_guard<std::mutex> lock(mu_);
      store = store_;
      if (!store) {
        dirty_.clear();
        unflushed_ = false;
        return;
      }
      for (const std::string& ns_name : dirty_) {
        auto it = by_workload_.find(ns_name);
        if (it == by_workload_.end() || it->second.empty()) {
          // (None kept, none to delete: a workload deleted that had no events stored.)
          if (stored_.count(ns_name) || !stored_known_) {
            writes.push_back({kStorePrefix + ns_name, "", kAnyRevision, /*remove=*/true});
            names.push_back(ns_name);
          }
          continue;
        }
        json events = json::array();
        for (const auto& e : it->second)
          events.push_back({{"sequence", e->sequence},
                            {"type", e->type},
                            {"reason", e->reason},
                            {"message", e->message},
                            {"count", e->count},
                            {"firstTimestamp", e->first},
                            {"lastTimestamp", e->last},
                            {"waiting", e->waiting}});
        json obj{{"events", std::move(events)}};
        if (auto uid = uids_.find(ns_name); uid != uids_.end()) obj["uid"] = uid->second;
        if (auto at = deleted_at_.find(ns_name); at != deleted_at_.end())
          obj["deletedAt"] = at->second;
        // (Text that is not UTF-8 is replaced, not thrown on: this is the worker's thread.)
        writes.push_back({kStorePrefix + ns_name,
                          obj.dump(-1, ' ', false, json::error_handler_t::replace), kAnyRevision});
        names.push_back(ns_name);
      }
      dirty_.clear();
      unflushed_ = false;
    }
    if (writes.empty()) return;
    const std::vector<Result<int64_t>> done = store->PutAll(writes);
    std::lock_guard<std::mutex> lock(mu_);
    size_t failed = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      const bool gone =
          writes[i].remove && !done[i].ok() && done[i].status().code() == StatusCode::kNotFound;
      if (done[i].ok() || gone) {
        if (writes[i].remove) {
          stored_.erase(names[i]);
        } else {
          stored_.insert(names[i]);
        }
      } else if (!dirty_.count(names[i])) {
        // (Written again from what is kept then: a history to debug with, not worth a crash.)
        ++failed;
        MarkDirty(names[i]);
      }
    }
    if (failed > 0 && !failing_)
      for (const Result<int64_t>& r : done)
        if (!r.ok()) {
          std::fprintf(stderr, "fabrica: %zu event object(s) not stored (%s); tried again\n",
                       failed, r.status().ToString().c_str());
          break;
        }
    failing_ = failed > 0;
  }
  // (Under mu_: the writes handed over so far, in order.)
  void Drain() {
    std::vector<Write> writes;
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      writes.swap(pending_);
    }
    for (const Write& w : writes) Note(w);
    Expire(latest_ms_.load(std::memory_order_relaxed));
  }

  // (Under mu_.) Forgets the events of workloads deleted kDeletedTtlMs or more before now_ms.
  void Expire(int64_t now_ms) {
    for (auto it = deleted_at_.begin(); it != deleted_at_.end();) {
      if (now_ms - it->second < kDeletedTtlMs) {
        ++it;
        continue;
      }
      const std::string ns_name = it->first;
      it = deleted_at_.erase(it);
      Forget(ns_name);
    }
  }
  // (Under mu_.) Forgets workload ns_name's events (watches told), here and in the store.
  void Forget(const std::string& ns_name) {
    if (auto it = by_workload_.find(ns_name); it != by_workload_.end()) {
      for (const auto& e : it->second) Drop(e);
      by_workload_.erase(it);
    }
    // (Kept events of it go too, even where none is left here: dropped for the limits.)
    MarkDirty(ns_name);
    uids_.erase(ns_name);
    deleted_at_.erase(ns_name);
  }

  static Summary Summarize(const json& obj) {
    const json& status = jsonf::Field(obj, "status");
    Summary s;
    s.phase = jsonf::Str(status, "phase");
    s.reason = jsonf::Str(status, "reason");
    s.message = jsonf::Str(status, "message");
    s.resized = jsonf::Str(status, "resizedTime");
    s.charged = jsonf::Str(jsonf::Field(status, "resourceUsage"), "queue");
    const json& ev = jsonf::Field(status, "evictions");
    if (const json& count = jsonf::Field(ev, "count"); count.is_number_integer())
      s.evictions = count.get<int64_t>();
    s.marked = jsonf::Field(status, "preemption").is_object();
    for (const json& m : jsonf::List(status, "shrinks")) {
      std::string pods;
      for (const json& p : jsonf::List(m, "pods"))
        if (p.is_string()) pods += (pods.empty() ? "" : ", ") + p.get<std::string>();
      const std::string reason = jsonf::Str(m, "reason");
      s.shrinks[jsonf::Str(m, "by") + "|" + jsonf::Str(m, "deadline") + "|" + pods] =
          "pod(s) " + pods + " taken" +
          (reason.empty() ? " by " + jsonf::Str(m, "by", "?") : ": " + reason) + "; they stop at " +
          jsonf::Str(m, "deadline") + ", the rest run on";
    }
    if (const json& started = jsonf::Field(status, "startedPods");
        s.phase == "Running" && started.is_object()) {
      const json& finished = jsonf::Field(status, "finishedPods");
      for (const json& a : jsonf::List(status, "assignments")) {
        const std::string pod = jsonf::Str(a, "pod");
        ++s.bound;
        s.up += started.contains(pod) || (finished.is_object() && finished.contains(pod));
      }
      s.starting = s.up < s.bound;
    }
    return s;
  }

  void Note(const Write& w) {
    if (w.deleted) {
      last_.erase(w.key);
      // Its events stay for kDeletedTtlMs (as Kubernetes keeps a deleted pod's), the last
      // saying it was deleted; one created again by its name starts a history of its own.
      const std::string& key = w.key;
      const size_t slash = key.find('/', std::string(kPrefix).size());
      if (slash != std::string::npos) {
        const std::string ns_name = key.substr(std::string(kPrefix).size());
        Record(key.substr(std::string(kPrefix).size(), slash - std::string(kPrefix).size()),
               key.substr(slash + 1), "Normal", "Deleted", "deleted; its events are kept for 1 h",
               w.at_ms, /*similar=*/false);
        deleted_at_[ns_name] = w.at_ms;
        MarkDirty(ns_name);
      }
      return;
    }
    json obj = json::parse(w.value, nullptr, false);
    if (!obj.is_object()) return;
    const Summary now = Summarize(obj);
    auto it = last_.find(w.key);
    const bool known = it != last_.end();
    const Summary before = known ? it->second : Summary{};
    last_[w.key] = now;
    const json& meta = jsonf::Field(obj, "metadata");
    const std::string ns = jsonf::Str(meta, "namespace"), name = jsonf::Str(meta, "name");
    // Created again after a deletion: the old one's events go.
    if (!known && deleted_at_.count(ns + "/" + name)) Forget(ns + "/" + name);
    if (std::string uid = jsonf::Str(meta, "uid"); !uid.empty() && store_)
      uids_[ns + "/" + name] = std::move(uid);
    const json& status = jsonf::Field(obj, "status");
    const auto record = [&](const char* type, const std::string& reason,
                            const std::string& message) {
      Record(ns, name, type, reason, message, w.at_ms, /*similar=*/false);
    };
    if (!known && (now.phase.empty() || (now.phase == "Pending" && now.reason.empty()))) {
      record("Normal", "Created", jsonf::Str(status, "message", "created"));
      return;
    }
    if (now.marked && !before.marked) {
      // (A victim keeps its devices until the deadline; preempted, or a drain's.)
      const json& p = jsonf::Field(status, "preemption");
      const std::string reason = jsonf::Str(p, "reason");
      // (Its owner's stop is no eviction.)
      const bool own = reason == kDeactivatedWhy && jsonf::Str(p, "by").empty();
      record(own ? "Normal" : "Warning", own ? "Stopping" : "Evicting",
             (reason.empty() ? "by " + jsonf::Str(p, "by", "?") : reason) + "; stops at " +
                 jsonf::Str(p, "deadline"));
    }
    // An elastic shrink begins: said as its grace period starts, as an eviction's is (a trial
    // saw only "Resized" once the pod had stopped).
    for (const auto& [mark, message] : now.shrinks)
      if (!before.shrinks.count(mark)) record("Warning", "Shrinking", message);
    // Its mark lifted before its deadline, and it runs on.
    // (Or a shrink's marks lifted, its pods running on: a trial saw only "Shrinking".)
    const bool cancelled = now.message.rfind(kEvictionCancelled, 0) == 0;
    if (before.marked && !now.marked && cancelled)
      record("Normal", "EvictionCancelled", now.message.substr(std::strlen(kEvictionCancelled)));
    else if (now.shrinks.size() < before.shrinks.size() && cancelled &&
             now.message != before.message)
      record("Normal", "EvictionCancelled", now.message.substr(std::strlen(kEvictionCancelled)));
    const bool evicted = now.evictions > before.evictions;
    if (evicted) {
      const json& last = jsonf::Field(jsonf::Field(status, "evictions"), "last");
      record("Warning", jsonf::Str(last, "reason", "Evicted"),
             jsonf::Str(last, "message") +
                 (now.reason == "RequeuingLimitExceeded" ? "; stopped (eviction "
                                                         : "; stopped and put back in line "
                                                           "(eviction ") +
                 std::to_string(now.evictions) + ")");
    }
    if (now.resized != before.resized && !now.resized.empty())
      record("Normal", "Resized", jsonf::Str(status, "message"));
    // Running on, charged to another queue (its tenant dropped from the queue it names, the
    // queue deleted, or back again): said, as nothing else says it.
    if (known && !before.charged.empty() && !now.charged.empty() && now.charged != before.charged &&
        (now.phase == "Running" || now.phase == "Scheduled") && now.phase == before.phase)
      record(now.charged == kUnqueuedQueue ? "Warning" : "Normal", "QueueChanged",
             "now charged to queue " + now.charged + " (was " + before.charged + ")" +
                 (now.charged == kUnqueuedQueue
                      ? ": its tenant may no longer use queue " + before.charged + ", or it is gone"
                      : ""));
    // (Put back in line by an eviction: said once, above; deactivated by it, said next.)
    // (Why it waits, each time that changes: the reason, or what its message says.)
    // (A gang with pods not all started is Starting: Started once the last one is up, as
    // Kueue's PodsReady; a user-style trial saw "Started … on 4 nodes" for a gang whose fourth
    // pod never started.)
    const bool all_up =
        now.phase == "Running" && before.phase == "Running" && before.starting && !now.starting;
    // (More of its pods up, not all: its Starting event, counted, says the latest number, as
    // the workload's status does; a trial read "1 of 3" there beside the status's "2 of 3".)
    const bool more_up = now.phase == "Running" && before.phase == "Running" && before.starting &&
                         now.starting && now.up != before.up;
    if ((now.phase != before.phase || all_up || more_up ||
         (now.phase == "Pending" &&
          (now.reason != before.reason || now.message != before.message))) &&
        !(evicted && now.phase == "Pending" && now.reason != "RequeuingLimitExceeded")) {
      const std::string& phase = now.phase;
      std::string reason = phase == "Pending"     ? now.reason
                           : phase == "Scheduled" ? "Admitted"
                           : phase == "Running"   ? (now.starting ? "Starting" : "Started")
                           : phase == "Succeeded" ? "Completed"
                           : now.reason.empty()   ? phase
                                                  : now.reason;  // (MaxRuntimeExceeded …)
      if (reason.empty()) reason = phase;
      const bool warning = phase == "Failed" || reason == "Unschedulable" ||
                           reason == "QueueNotFound" || reason == "QueueNotAllowed" ||
                           reason == "QueueConfigInvalid" || reason == "Backoff" ||
                           reason == "RequeuingLimitExceeded" || reason == "BudgetExceeded";
      std::string message = jsonf::Str(status, "message");
      if (now.starting)
        message = std::to_string(now.up) + " of " + std::to_string(now.bound) +
                  " pods started; the rest wait for their nodes";
      // (Its last pods up after a growth: said so, not the growth's message again, which its
      // Resized event gave.)
      if (all_up && message.rfind("running on", 0) != 0)
        message = "all " + std::to_string(now.bound) + " pods started";
      if (message.empty() && phase == "Scheduled") {
        std::set<std::string> nodes;
        for (const json& a : jsonf::Field(status, "assignments"))
          if (const std::string node = jsonf::Str(a, "node"); !node.empty()) nodes.insert(node);
        message = "placed";
        for (const std::string& node : nodes)
          message += (node == *nodes.begin() ? " on " : ", ") + node;
      }
      // (Why it waits says it again with other numbers — a countdown, how many nodes lack
      // what — or goes back and forth: one event, counted, its message the latest. Not a
      // preemption's steps: each batch of victims chosen is news of its own, and a trial lost
      // the first batch's words to the second's; waiting for them to stop is a wait.)
      const bool step = reason == "Preempting" && (message.rfind("preempting ", 0) == 0 ||
                                                   message.rfind("consolidating", 0) == 0 ||
                                                   message.rfind("taking back", 0) == 0);
      Record(ns, name, warning ? "Warning" : "Normal", reason, message, w.at_ms,
             /*similar=*/(phase == "Pending" && !step) || more_up);
    }
  }

  // At most kMaxMessage bytes of `message`, cut before a character, not inside one.
  static std::string Clip(std::string message) {
    if (message.size() <= kMaxMessage) return message;
    size_t cut = kMaxMessage - std::strlen("...");
    while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
    message.resize(cut);
    return message + "...";
  }

  // The message with each run of digits as one '#' ("it may go in about 4 min" and "… 3 min"
  // are alike).
  static std::string Shape(const std::string& message) {
    std::string out;
    for (char c : message) {
      const bool digit = c >= '0' && c <= '9';
      if (!digit || out.empty() || out.back() != '#') out += digit ? '#' : c;
    }
    return out;
  }

  void Record(const std::string& ns, const std::string& name, const std::string& type,
              const std::string& reason, const std::string& full_message, int64_t at_ms,
              bool similar) {
    const std::string at = FormatTimestamp(at_ms);
    const std::string message = Clip(full_message);
    std::deque<Events::iterator>& mine = by_workload_[ns + "/" + name];
    // The same again as its last: counted, as Kubernetes does.
    if (!mine.empty() && mine.back()->reason == reason && mine.back()->message == message) {
      ++mine.back()->count;
      mine.back()->last = at;
      Changed(*mine.back(), "MODIFIED");
      return;
    }
    // Alike one of its last few (`similar`): that one, counted, says it as it is now.
    // (Shaped before it is cut: a number that grows a digit moves where a long one is cut.)
    const std::string shape = Shape(full_message);
    if (similar) {
      for (size_t back = 1; back <= std::min<size_t>(mine.size(), kAlikeWithin); ++back) {
        Event& e = *mine[mine.size() - back];
        const bool alike = e.reason == reason && e.shape == shape;
        // (Not past what happened since, as an admission: the wait now is said after it. Its
        // last event, though, alike, says it again as it is now: a Starting one's pods up.)
        if (!e.waiting && !(back == 1 && alike)) break;
        if (!alike) continue;
        ++e.count;
        e.last = at;
        e.message = message;
        Changed(e, "MODIFIED");
        return;
      }
    }
    events_.push_back(Event{ns, name, type, reason, message, at, at, 1, ++sequence_, similar});
    events_.back().shape = shape;
    mine.push_back(std::prev(events_.end()));
    Changed(events_.back(), "ADDED");
    if (mine.size() > kPerWorkload) {
      Drop(mine.front());
      mine.pop_front();
    }
    while (events_.size() > kMaxEvents) {
      const std::string key = events_.front().ns + "/" + events_.front().name;
      auto& theirs = by_workload_[key];
      theirs.pop_front();  // (the oldest of all is the oldest of its workload)
      if (theirs.empty()) by_workload_.erase(key);
      Drop(events_.begin());
    }
  }

  // (Under mu_.) A new version for `e`, and each watch that selects it told.
  void Changed(Event& e, const char* type) {
    MarkDirty(e);
    e.version = ++version_;
    if (e.created == 0) e.created = e.version;
    Tell(type, ToJson(e));
  }
  // (Under mu_.) Forgets the event at `it`; watches that select it are told DELETED, and so
  // are those that start from an earlier version, while its tombstone is remembered.
  void Drop(Events::iterator it) {
    MarkDirty(*it);
    json j = ToJson(*it);
    j["metadata"]["resourceVersion"] = std::to_string(++version_);
    Tell("DELETED", j);
    tombstones_.push_back({version_, it->created, std::move(j)});
    if (tombstones_.size() > kTombstones) {
      forgotten_through_ = tombstones_.front().version;
      tombstones_.pop_front();
    }
    events_.erase(it);
  }
  // (Under mu_.) Its workload's events are to be written again (Flush).
  void MarkDirty(const Event& e) { MarkDirty(e.ns + "/" + e.name); }
  void MarkDirty(const std::string& ns_name) {
    if (!store_) return;
    dirty_.insert(ns_name);
    unflushed_ = true;
  }
  void Tell(const char* type, const json& event) {
    if (subscribers_.empty()) return;
    // (On the recorder's worker, or a request's thread: bad data costs a line, not the server.)
    try {
      std::string line;
      for (const auto& s : subscribers_)
        if (s->Selects(event)) s->Send(type, event, line.empty() ? line = Line(type, event) : line);
    } catch (const std::exception&) {
    }
  }
  static std::string Line(const char* type, const json& event) {
    return json{{"type", type}, {"object", event}}.dump() + "\n";
  }

  static json ToJson(const Event& e) {
    return {{"apiVersion", kGroupVersion},
            {"kind", "Event"},
            {"metadata",
             {{"name", e.name + "." + std::to_string(e.sequence)},
              {"namespace", e.ns},
              {"creationTimestamp", e.first},
              {"resourceVersion", std::to_string(e.version)}}},
            {"involvedObject", {{"kind", "Workload"}, {"namespace", e.ns}, {"name", e.name}}},
            {"type", e.type},
            {"reason", e.reason},
            {"message", e.message},
            {"count", e.count},
            {"firstTimestamp", e.first},
            {"lastTimestamp", e.last},
            {"source", {{"component", "fabrica"}}}};
  }

  std::mutex mu_;                        // what follows, and Drain's order
  std::map<std::string, Summary> last_;  // by store key
  Events events_;
  std::map<std::string, std::deque<Events::iterator>> by_workload_;  // "ns/name"
  uint64_t sequence_ = 0;
  uint64_t version_ = 0;  // counts every event recorded, counted again or dropped
  uint64_t base_ = 0;     // the first version of this server (SetVersionBase)
  struct Tombstone {
    uint64_t version = 0, created = 0;
    json event;
  };
  std::deque<Tombstone> tombstones_;  // the latest drops, kTombstones of them
  uint64_t forgotten_through_ = 0;    // the version of the latest drop no longer remembered
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
  Store* store_ = nullptr;        // where events are kept too (Persist)
  std::set<std::string> dirty_;   // "ns/name": workloads whose events changed since Flush
  bool unflushed_ = false;        // dirty_ is not empty
  std::set<std::string> stored_;  // "ns/name": objects in the store, as last known
  bool stored_known_ = false;     // stored_ was listed (else every delete is tried)
  std::map<std::string, std::string> uids_;    // "ns/name" -> its workload's metadata.uid
  std::map<std::string, int64_t> deleted_at_;  // "ns/name" of a deleted workload -> when (ms)
  std::atomic<int64_t> latest_ms_{0};          // the newest store write's time (Observe)
  bool failing_ = false;                       // the last flush failed to write some (logged)
  std::mutex pending_mu_;
  std::condition_variable wake_;
  std::vector<Write> pending_;
  bool stop_ = false;
  std::thread worker_;  // (last: it starts once the rest is built)
};

// One watch of the events (GET .../events?watch=true), as a stream of {"type", "object"} lines.
class EventWatch : public StreamSource,
                   public EventRecorder::Subscriber,
                   public std::enable_shared_from_this<EventWatch> {
 public:
  // `shape`, where set, is what each event is sent as (a one-row Table, for kubectl).
  EventWatch(EventRecorder& recorder, uint64_t after, std::function<bool(const json&)> selects,
             std::function<json(const json&)> shape = nullptr)
      : recorder_(recorder),
        after_(after),
        selects_(std::move(selects)),
        shape_(std::move(shape)) {}

  void Start(std::function<bool(std::string)> write, std::function<void()> finish) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_ = std::move(write);
      finish_ = std::move(finish);
    }
    if (Status st = recorder_.Subscribe(shared_from_this(), after_); !st.ok()) {
      // (As the store's watch says a version it no longer has: a 410 on the stream, then its end.)
      std::lock_guard<std::mutex> lock(mu_);
      if (write_)
        write_(
            json{{"type", "ERROR"}, {"object", json::parse(StatusResponse(410, st.message()).body)}}
                .dump() +
            "\n");
      if (finish_) finish_();
      write_ = nullptr;
      finish_ = nullptr;
      cancelled_ = true;
    }
  }
  void Cancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
      write_ = nullptr;
      finish_ = nullptr;
    }
    recorder_.Unsubscribe(this);
  }
  // (Both under the recorder's lock, so one at a time.)
  bool Selects(const json& event) override {
    try {
      return selects_(event);
    } catch (const std::exception&) {
      return false;
    }
  }
  void Send(const char* type, const json& event, const std::string& line) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!write_) return;
    if (!shape_) {
      if (!write_(line)) write_ = nullptr;
      return;
    }
    // (Shaped from the event itself: a line is not parsed back.)
    if (!write_(json{{"type", type}, {"object", shape_(event)}}.dump() + "\n")) write_ = nullptr;
  }

 private:
  EventRecorder& recorder_;
  const uint64_t after_;
  std::function<bool(const json&)> selects_;
  std::function<json(const json&)> shape_;
  std::mutex mu_;
  std::function<bool(std::string)> write_;
  std::function<void()> finish_;
  bool cancelled_ = false;
};

struct ApiServer::Impl {
  Store& store;
  Authorizer& auth;
  const Clock& clock;
  Metrics* metrics;
  std::mutex watchers_mu;
  std::set<std::shared_ptr<Watcher>> watchers;
  // What happened to the workloads (GET .../events). (Before the subscription that feeds it,
  // which therefore ends first.)
  EventRecorder events;
  std::unique_ptr<Store::Subscription> subscription;
  std::mutex tokens_mu;
  std::map<std::string, std::string> node_tokens;  // token -> node
  // Held across a Queue write's flavour check and its write, and a ResourceFlavor deletion's
  // check and delete, so that neither slips between the other's check and write.
  std::mutex flavor_refs_mu;
  // Workload creates (shared) against a tenant's deletion (alone): TenantInUse.
  std::shared_mutex tenant_refs_mu;
  ApiServer::Extension extension;
  std::function<std::string()> metrics_extra;
  int64_t eviction_grace_ms = 30'000;  // an eviction's default grace period
  std::mutex eviction_mu;              // evictions one at a time (their budget check and write)

  Impl(Store& s, Authorizer& a, const Clock& c, Metrics* m)
      : store(s), auth(a), clock(c), metrics(m) {
    auto existing = store.List("/registry/nodetokens/", "", 0);
    if (existing.ok()) {
      for (const KeyValue& kv : existing->items) {
        node_tokens[kv.value] = kv.key.substr(std::string("/registry/nodetokens/").size());
      }
    }
    // (Versions from this start's clock on, so that they rise across restarts.)
    this->events.SetVersionBase(static_cast<uint64_t>(std::max<int64_t>(1, clock.NowMs())) * 1000);
    this->events.Persist(&store);
    auto stored = store.List("/registry/workloads/", "", 0);
    this->events.Seed(stored.ok() ? stored->items : std::vector<KeyValue>{}, stored.ok());
    subscription = store.Subscribe([this](const std::vector<WatchEvent>& events) {
      this->events.Observe(events, clock.NowMs());
      std::vector<std::shared_ptr<Watcher>> copy;
      {
        std::lock_guard<std::mutex> lock(watchers_mu);
        copy.assign(watchers.begin(), watchers.end());
      }
      for (auto& w : copy) w->Deliver(events);
    });
  }

  Result<Principal> Authenticate(const HttpRequest& req) {
    const std::string h = req.Header("authorization");
    if (h.empty())
      return Status(StatusCode::kUnauthenticated,
                    "no credentials: send Authorization: Bearer <token>");
    if (h.rfind("Bearer ", 0) != 0)
      return Status(StatusCode::kUnauthenticated, "only bearer tokens are accepted");
    const std::string token = h.substr(7);
    {
      std::lock_guard<std::mutex> lock(tokens_mu);
      auto it = node_tokens.find(token);
      if (it != node_tokens.end()) {
        Principal p;
        p.user = "system:node:" + it->second;
        p.groups = {"system:nodes"};
        p.node = it->second;
        return p;
      }
    }
    return auth.Authenticate(token, clock.NowMs() / 1000);
  }

  // Removes the members of `j`'s objects that are null, down through objects: not in lists
  // (a list's items are whole values, compared as stored), nor in maps of strings, where a
  // null is a value forgotten, refused as such (a review: `nodeSelector: {pool: null}` would
  // have confined nothing).
  static void DropNulls(json& j) {
    if (!j.is_object()) return;
    for (auto it = j.begin(); it != j.end();) {
      if (it->is_null()) {
        it = j.erase(it);
      } else {
        if (it.key() != "nodeSelector" && it.key() != "labels" && it.key() != "annotations")
          DropNulls(*it);
        ++it;
      }
    }
  }

  // Validates a decoded object of `info` and returns the canonical stored form (metadata the
  // server owns filled in from `existing` or fresh).
  Result<json> Validate(const ResourceInfo& info, json obj, const std::string& ns,
                        const std::string& name, const json& was = json()) {
    if (!obj.is_object()) return InvalidArgument("the body must be a JSON object");
    // A field of the spec given as null is not set, as Kubernetes reads it (YAML's "weight:"
    // left empty): a trial's was stored as null and shown as "weight null", and null elsewhere
    // was refused as a required field missing.
    if (obj.contains("spec")) DropNulls(obj["spec"]);
    const std::string kind = obj.contains("kind") ? Str(obj, "kind", "?") : info.kind;
    if (kind != info.kind)
      return InvalidArgument("kind: expected " + std::string(info.kind) + ", got " +
                             obj["kind"].dump());
    const std::string api =
        obj.contains("apiVersion") ? Str(obj, "apiVersion", "?") : kGroupVersion;
    if (api != kGroupVersion)
      return InvalidArgument("apiVersion: expected fabrica.dev/v1, got " +
                             obj["apiVersion"].dump());
    obj["kind"] = info.kind;
    obj["apiVersion"] = kGroupVersion;
    if (!obj.contains("metadata") || !obj["metadata"].is_object()) {
      return InvalidArgument("metadata: required, with a name");
    }
    json& meta = obj["metadata"];
    for (const char* key : {"name", "namespace"}) {
      if (meta.contains(key) && !meta[key].is_string()) {
        return InvalidArgument(std::string("metadata.") + key + ": expected a string, got " +
                               meta[key].dump());
      }
    }
    if (meta.contains("labels") && !meta["labels"].is_null()) {
      if (!meta["labels"].is_object())
        return InvalidArgument("metadata.labels: expected a map of label to value, got " +
                               meta["labels"].dump());
      for (const auto& [k, v] : meta["labels"].items()) {
        if (!v.is_string()) return InvalidArgument("metadata.labels." + k + ": expected a string");
        if (Status s = ValidateLabel(k, v.get<std::string>()); !s.ok())
          return InvalidArgument("metadata.labels." + k + ": " + s.message());
        // (What every node answers to is the node's own: a label that said otherwise would
        // send work pinned to one node, or one GPU model, to another. What a read showed is
        // taken back as it is: `get -o yaml`, edited and applied, carries them.)
        if (std::string(info.kind) == "Node" && (k == kHostnameLabel || k == kGpuModelLabel)) {
          json named = obj;
          if (!name.empty()) named["metadata"]["name"] = name;
          if (Field(BuiltinNodeLabels(named), k.c_str()) != v)
            return InvalidArgument("metadata.labels." + k + ": " + v.dump() +
                                   " is not this node's: set by Fabrica on every node (its "
                                   "name, its GPU model)");
        }
      }
      // (Not stored: they follow the node's name and GPUs.)
      if (std::string(info.kind) == "Node") {
        meta["labels"].erase(kHostnameLabel);
        meta["labels"].erase(kGpuModelLabel);
        if (meta["labels"].empty()) meta.erase("labels");
      }
    }
    // A node's registered labels are strings too (the fleet parser checks their syntax).
    if (std::string(info.kind) == "Node" && obj.contains("spec") && obj["spec"].is_object())
      if (const json& labels = Field(obj["spec"], "labels"); labels.is_object())
        for (const auto& [k, v] : labels.items())
          if (!v.is_string())
            return InvalidArgument("spec.labels." + k + ": expected a string, got " + v.dump());
    // A workload's (and a tenant's) nodeSelector and excludeNodes hold strings (as
    // Kubernetes' do): a number would be matched as its text, 1.5e3 as "1500.0".
    if (std::string(info.kind) == "Tenant" && obj.contains("spec") && obj["spec"].is_object())
      if (const json& sel = Field(obj["spec"], "nodeSelector"); sel.is_object())
        for (const auto& [k, v] : sel.items())
          if (!v.is_string())
            return InvalidArgument("spec.nodeSelector." + k + ": expected a string, got " +
                                   v.dump());
    if (std::string(info.kind) == "Workload" && obj.contains("spec") && obj["spec"].is_object()) {
      if (const json& sel = Field(obj["spec"], "nodeSelector"); sel.is_object())
        for (const auto& [k, v] : sel.items())
          if (!v.is_string())
            return InvalidArgument("spec.nodeSelector." + k + ": expected a string, got " +
                                   v.dump());
      if (const json& ex = Field(obj["spec"], "excludeNodes"); ex.is_array())
        for (size_t i = 0; i < ex.size(); ++i)
          if (!ex[i].is_string())
            return InvalidArgument("spec.excludeNodes[" + std::to_string(i) +
                                   "]: expected a node name, got " + ex[i].dump());
      // ... and its node affinity's keys, operators and values (a weight is a whole number).
      const json& na = Field(Field(obj["spec"], "affinity"), "nodeAffinity");
      const auto check_term = [](const json& term, const std::string& at) -> Status {
        for (const char* list : {"matchExpressions", "matchFields"}) {
          const json& reqs = Field(term, list);
          for (size_t i = 0; reqs.is_array() && i < reqs.size(); ++i) {
            const std::string here = at + "." + list + "[" + std::to_string(i) + "]";
            for (const char* f : {"key", "operator"})
              if (const json& v = Field(reqs[i], f); !v.is_null() && !v.is_string())
                return InvalidArgument(here + "." + f + ": expected a string, got " + v.dump());
            const json& values = Field(reqs[i], "values");
            for (size_t k = 0; values.is_array() && k < values.size(); ++k)
              if (!values[k].is_string())
                return InvalidArgument(here + ".values[" + std::to_string(k) +
                                       "]: expected a string, got " + values[k].dump());
          }
        }
        return Status::Ok();
      };
      const std::string na_at = "spec.affinity.nodeAffinity.";
      const json& terms =
          Field(Field(na, "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms");
      for (size_t i = 0; terms.is_array() && i < terms.size(); ++i)
        if (Status s = check_term(terms[i], na_at +
                                                "requiredDuringSchedulingIgnoredDuringExecution."
                                                "nodeSelectorTerms[" +
                                                std::to_string(i) + "]");
            !s.ok())
          return s;
      const json& prefs = Field(na, "preferredDuringSchedulingIgnoredDuringExecution");
      for (size_t i = 0; prefs.is_array() && i < prefs.size(); ++i) {
        const std::string at =
            na_at + "preferredDuringSchedulingIgnoredDuringExecution[" + std::to_string(i) + "]";
        if (const json& w = Field(prefs[i], "weight"); !w.is_null() && !w.is_number_integer())
          return InvalidArgument(at + ".weight: expected a whole number, got " + w.dump());
        if (Status s = check_term(Field(prefs[i], "preference"), at + ".preference"); !s.ok())
          return s;
      }
    }
    // So do a workload's tolerations and a node's taints (but tolerationSeconds, a whole
    // number; fields the parser does not know it names itself).
    std::vector<const char*> taint_lists;
    if (std::string(info.kind) == "Workload") taint_lists = {"tolerations"};
    if (std::string(info.kind) == "Tenant") taint_lists = {"tolerations", "allowedTolerations"};
    if (std::string(info.kind) == "Node") taint_lists = {"taints"};
    for (const char* taint_list : taint_lists) {
      if (!obj.contains("spec") || !obj["spec"].is_object()) break;
      const json& list = Field(obj["spec"], taint_list);
      for (size_t i = 0; list.is_array() && i < list.size(); ++i) {
        if (!list[i].is_object()) continue;
        const std::string at = "spec." + std::string(taint_list) + "[" + std::to_string(i) + "].";
        for (const char* k : {"key", "value", "effect", "operator", "timeAdded"})
          if (const json& v = Field(list[i], k); !v.is_null() && !v.is_string())
            return InvalidArgument(at + k + ": expected a string, got " + v.dump());
        if (const json& v = Field(list[i], "tolerationSeconds");
            !v.is_null() && !v.is_number_integer())
          return InvalidArgument(
              at + "tolerationSeconds: expected a whole number of seconds, got " + v.dump());
      }
    }
    // A NoExecute taint is dated by the server when set (timeAdded: what tolerationSeconds
    // count from), whatever a client says; an update keeps the date of a taint it keeps
    // (Update, after this). A date that does not read as one is refused all the same.
    if (std::string(info.kind) == "Node" && obj.contains("spec") && obj["spec"].is_object() &&
        obj["spec"].contains("taints") && obj["spec"]["taints"].is_array())
      for (size_t i = 0; i < obj["spec"]["taints"].size(); ++i) {
        json& t = obj["spec"]["taints"][i];
        if (!t.is_object()) continue;
        if (const json& at = Field(t, "timeAdded");
            !at.is_null() && ParseTimestamp(at.get<std::string>()) < 0)
          return InvalidArgument("spec.taints[" + std::to_string(i) +
                                 "].timeAdded: expected a time as 2026-01-31T12:00:00.000Z, got " +
                                 at.dump());
        t.erase("timeAdded");
        if (t.value("effect", json()) == "NoExecute")
          t["timeAdded"] = FormatTimestamp(clock.NowMs());
      }
    for (const TypedField& f : kTypedFields) {
      if (f.kind == std::string(info.kind)) RETURN_IF_ERROR(CheckTyped(obj, f.path, "", f.boolean));
    }
    // Status is the subresource's to change; whichever write brings it, it must stay readable.
    if (obj.contains("status")) {
      if (std::string(info.kind) == "Workload") {
        RETURN_IF_ERROR(ValidateWorkloadStatus(obj["status"]));
      } else if (!obj["status"].is_object()) {
        return InvalidArgument("status: expected an object");
      }
    }
    if (!name.empty() && meta.value("name", name) != name) {
      return InvalidArgument("metadata.name: '" + meta.value("name", "") +
                             "' does not match the URL's '" + name + "'");
    }
    if (info.namespaced) {
      if (meta.contains("namespace") && meta["namespace"] != ns) {
        return InvalidArgument("metadata.namespace: does not match the URL's tenant '" + ns + "'");
      }
      // The namespace is the tenant, which isolation is decided by; one that could not name a
      // tenant would leave the workload unaddressable.
      Status valid_ns = ValidateName(ns);
      if (!valid_ns.ok())
        return Status(StatusCode::kInvalidArgument, "metadata.namespace: " + valid_ns.message());
      meta["namespace"] = ns;
    }
    // (Errors name the object, as "Queue 'team-b': spec.stopPolicy: ...".)
    const json& named = meta.is_object() ? meta.value("name", json()) : json();
    const std::string source =
        std::string(info.kind) + (named.is_string() && !named.get<std::string>().empty()
                                      ? " '" + named.get<std::string>() + "'"
                                      : std::string());
    if (std::string(info.kind) == "Workload" || std::string(info.kind) == "Tenant") {
      json for_parse = obj;
      if (info.namespaced)
        for_parse["metadata"].erase("namespace"), for_parse["metadata"]["tenant"] = ns;
      auto m = ParseManifestJson(for_parse, source);
      if (!m.ok()) return Status(StatusCode::kInvalidArgument, SpecPath(m.status().message()));
      // (What the fleet could hold, of a workload written or whose pods changed: not of its
      // status writes, which an agent must be able to make whatever the fleet is now.)
      if (std::string(info.kind) == "Workload" &&
          (was.is_null() ||
           Field(Field(obj, "spec"), "podSets") != Field(Field(was, "spec"), "podSets"))) {
        RETURN_IF_ERROR(CheckPossible(m->workloads.front()));
      }
    } else if (std::string(info.kind) == "Node") {
      json spec = obj.value("spec", json::object());
      if (!spec.is_object()) return InvalidArgument("spec: expected an object");
      bool unschedulable = spec.value("unschedulable", false);
      spec.erase("unschedulable");
      spec["name"] = meta.value("name", "");
      json fleet = {{"nodes", json::array({spec})}};
      auto f = ParseFleetYaml(fleet.dump(), source);
      if (!f.ok()) return Status(StatusCode::kInvalidArgument, SpecPath(f.status().message()));
      (void)unschedulable;
    } else if (std::string(info.kind) == "Lease") {
      json spec = obj.value("spec", json::object());
      if (!spec.is_object()) return InvalidArgument("spec: expected an object");
      std::vector<std::string> unknown;
      for (const auto& [k, v] : spec.items()) {
        if (k != "holderIdentity" && k != "renewTime" && k != "leaseDurationSeconds")
          unknown.push_back("spec." + k);
      }
      if (!unknown.empty())
        return UnknownFields(unknown, {"holderIdentity", "renewTime", "leaseDurationSeconds"});
      // It keeps a silent node Ready as long: bounded, so that no agent keeps a dead node's
      // work from being requeued for longer than an hour.
      if (spec.contains("leaseDurationSeconds")) {
        const json& d = spec["leaseDurationSeconds"];
        if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > 3600)
          return InvalidArgument(
              "spec.leaseDurationSeconds: must be a whole number of seconds "
              "from 1 to 3600");
      }
      // Heartbeats are stamped on receipt, in the server's clock, never the sender's.
      obj["spec"]["renewTime"] = FormatTimestamp(clock.NowMs());
    } else if (std::string(info.kind) == "PriorityClass") {
      // A named priority (Kueue's WorkloadPriorityClass): workloads name it in
      // spec.priorityClassName and take its value when the scheduler reads them.
      json spec = obj.value("spec", json::object());
      if (!spec.is_object()) return InvalidArgument("spec: expected an object");
      if (!spec.contains("value")) return InvalidArgument("spec.value: required");
      const json& value = spec["value"];
      if (!value.is_number_integer() || value < -1'000'000'000 || value > 1'000'000'000)
        return InvalidArgument("spec.value: must be an integer between -1000000000 and 1000000000");
      const std::vector<std::string> known = {"value", "description", "tenants", "preemptionPolicy",
                                              "globalDefault"};
      std::vector<std::string> unknown;
      for (const auto& [k, v] : spec.items())
        if (std::find(known.begin(), known.end(), k) == known.end()) unknown.push_back("spec." + k);
      if (!unknown.empty()) return UnknownFields(unknown, known);
      for (const auto& [k, v] : spec.items()) {
        if (k == "description" && !v.is_string())
          return InvalidArgument("spec.description: expected a string");
        // As Kubernetes' PriorityClass: Never waits ahead of lower priorities but evicts
        // nothing; globalDefault gives its value to workloads created without a class.
        if (k == "preemptionPolicy" && v != "PreemptLowerPriority" && v != "Never")
          return InvalidArgument(
              "spec.preemptionPolicy: must be PreemptLowerPriority or Never, got " +
              (v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump()));
        if (k == "globalDefault" && !v.is_boolean())
          return InvalidArgument("spec.globalDefault: expected true or false");
        if (k == "tenants") {
          // Who may name it (as a Slurm QOS is allowed per account, or a Kubernetes
          // ResourceQuota scopes a PriorityClass to namespaces); absent: every tenant.
          if (!v.is_array()) return InvalidArgument("spec.tenants: expected a list of tenants");
          std::set<std::string> seen;
          for (size_t i = 0; i < v.size(); ++i) {
            const std::string at = "spec.tenants[" + std::to_string(i) + "]";
            if (!v[i].is_string()) return InvalidArgument(at + ": expected a tenant's name");
            if (Status st = ValidateName(v[i].get<std::string>()); !st.ok())
              return InvalidArgument(at + ": " + st.message());
            if (!seen.insert(v[i].get<std::string>()).second)
              return InvalidArgument(at + ": '" + v[i].get<std::string>() + "' is named twice");
          }
        }
      }
    } else if (std::string(info.kind) == "ResourceFlavor") {
      // The GPUs a queue's quota names (Kueue's ResourceFlavor): a device kind, models, MIG
      // profiles, as a scenario's `flavors` entry.
      if (obj.contains("spec") && !obj["spec"].is_object())
        return InvalidArgument("spec: expected an object");
      if (obj.contains("spec") && obj["spec"].contains("name"))
        return InvalidArgument("spec.name: unknown field (the name is metadata.name)");
      if (const std::string flavor = meta.value("name", "");
          flavor == kCpuQuota || flavor == kMemoryQuota)
        return InvalidArgument("metadata.name: '" + flavor +
                               "' is reserved for the pods' CPU and memory quotas");
      // (A stored `gpu` replaced the built-in catch-all: narrowed, it left every GPU it no
      // longer took charged to no flavour, so no quota limited work there; a trial's `gpu` of
      // L4s let a queue of 12 hold 28 H100s. One stored before stays, and may be deleted.)
      if (const std::string flavor = meta.value("name", "");
          flavor == kDefaultFlavor && !store.Get(Key(info, "", flavor)).ok())
        return InvalidArgument(
            "metadata.name: '" + flavor +
            "' is the built-in flavour that takes every GPU no other flavour takes; name yours "
            "otherwise (a flavour that names models or a kind takes those GPUs from it)");
      json named = obj;
      named["metadata"]["name"] = meta.value("name", "");
      RETURN_IF_ERROR(FlavorFromObject(named, source).status());
    } else if (std::string(info.kind) == "Queue") {
      // (A queue with no spec, a cohort-style parent, is stored with an empty one.)
      if (!obj.contains("spec") || obj["spec"].is_null()) obj["spec"] = json::object();
      // (Only the scheduler's built-in unqueued says it is built in.)
      if (json& meta_w = obj["metadata"];
          meta_w.is_object() && meta_w.contains("annotations") && meta_w["annotations"].is_object())
        meta_w["annotations"].erase("fabrica.dev/built-in");
      json spec = obj.value("spec", json::object());
      if (!spec.is_object()) return InvalidArgument("spec: expected an object");
      // The budget, and the rest: the queue's place in the tree and its quotas, as in a
      // scenario's admission.queues (the tree as a whole is checked by the scheduler every
      // cycle). Unknown fields of both are named together.
      json queue = spec;
      queue.erase("budget");
      queue["name"] = meta.value("name", "");
      YamlMap q(Doc::FromJson(queue), "spec", source);
      if (spec.contains("budget")) {
        YamlMap b = q.Child(Doc::FromJson(spec["budget"]), "spec.budget");
        RETURN_IF_ERROR(ParseBudget(b).status());
      }
      ASSIGN_OR_RETURN(QueueSpec parsed, ParseQueueSpec(q));
      // Quantities are stored in one canonical form (as Kubernetes stores "2000m" as "2"), so
      // that 2, 2.0, "2" and "2000m" are the same spec: re-applying any of them changes nothing.
      // (Likewise the disruption budget and reclaimMinRuntimeSeconds: "3" is 3.)
      if (obj["spec"].contains("disruptionBudget"))
        obj["spec"]["disruptionBudget"] = parsed.disruption_budget;
      if (obj["spec"].contains("reclaimMinRuntimeSeconds"))
        obj["spec"]["reclaimMinRuntimeSeconds"] =
            static_cast<int64_t>(parsed.reclaim_min_runtime_s);
      if (obj["spec"].contains("priority")) obj["spec"]["priority"] = parsed.priority;
      // (A weight as a number: "0", 0.0 and 0e0 are 0, which fabctl and kubectl read as such.)
      if (!Field(obj["spec"], "weight").is_null()) {
        if (parsed.weight == std::floor(parsed.weight) && parsed.weight < 1e15)
          obj["spec"]["weight"] = static_cast<int64_t>(parsed.weight);
        else
          obj["spec"]["weight"] = parsed.weight;
      }
      if (obj["spec"].contains("preemptMinRuntimeSeconds"))
        obj["spec"]["preemptMinRuntimeSeconds"] =
            static_cast<int64_t>(parsed.preempt_min_runtime_s);
      for (const auto& [flavor, quota] : parsed.quotas) {
        json& stored = obj["spec"]["quotas"][flavor];
        if (!quota.guaranteed_unset)
          stored["guaranteed"] = CanonicalQuantity(flavor, quota.guaranteed_milli);
        if (quota.borrowing_limit_milli)
          stored["borrowingLimit"] = CanonicalQuantity(flavor, *quota.borrowing_limit_milli);
        if (quota.lending_limit_milli)
          stored["lendingLimit"] = CanonicalQuantity(flavor, *quota.lending_limit_milli);
      }
    }
    Status valid_name = ValidateName(meta.value("name", ""));
    if (!valid_name.ok())
      return Status(StatusCode::kInvalidArgument, "metadata.name: " + valid_name.message());
    static const std::set<std::string> known_meta = {"name",
                                                     "namespace",
                                                     "labels",
                                                     "annotations",
                                                     "uid",
                                                     "resourceVersion",
                                                     "creationTimestamp",
                                                     "generation"};
    static const std::set<std::string> known_top = {"kind", "apiVersion", "metadata", "spec",
                                                    "status"};
    // Each named, with a guess from its own map's fields, or where it belongs when it is the
    // other map's ("labels" at the top, "spec" under metadata).
    std::string unknown;
    const auto say = [&unknown](const std::string& path, const std::string& key,
                                const std::set<std::string>& known,
                                const std::set<std::string>& other, const char* belongs) {
      unknown += (unknown.empty() ? "" : "; ") + path + ": " +
                 (other.count(key) ? std::string("unknown field (it belongs ") + belongs + ")"
                                   : UnknownFieldMessage(key, {known.begin(), known.end()}));
    };
    for (const auto& [k, v] : obj.items())
      if (!known_top.count(k)) say(k, k, known_top, known_meta, "in metadata");
    for (const auto& [k, v] : meta.items())
      if (!known_meta.count(k)) say("metadata." + k, k, known_meta, known_top, "at the top level");
    if (!unknown.empty()) return InvalidArgument(unknown);
    return obj;
  }

  // Rejects what no node of the registered fleet could ever run.
  // The most GPUs, CPU and memory any registered node has, and the GPU models there are;
  // recomputed after the nodes change (the store's revision of the node prefix is not tracked,
  // so any write through the API to a node marks them stale; nodes are written only through the
  // API).
  struct FleetFacts {
    int64_t gpus = 0, cpu_milli = 0, memory_mib = 0;
    std::set<std::string> models;
  };
  std::mutex fleet_facts_mu;
  std::optional<FleetFacts> fleet_facts;  // (guarded by fleet_facts_mu; unset: stale)
  void ForgetFleetFacts() {
    std::lock_guard<std::mutex> lock(fleet_facts_mu);
    fleet_facts.reset();
  }

  // A workload's tolerations, its own and those its tenant gave it, must be among its tenant's
  // allowedTolerations where the tenant has them (a taint that keeps nodes for one tenant must
  // not be tolerated by another's work at will).
  // Asked of spec writes alone (a create, or an update that changes them), never of the status
  // writes of work a tenant's later allowedTolerations would not admit.
  Status CheckTolerationsAllowed(const json& workload, const std::string& ns) {
    const json& list = Field(Field(workload, "spec"), "tolerations");
    if (!list.is_array() || list.empty()) return Status::Ok();
    const std::optional<Tenant> tenant = StoredTenant(ns);
    if (!tenant || !tenant->allowed_tolerations) return Status::Ok();
    // (Read as a tenant's are: the workload's were checked as such already.)
    auto read = ParseManifestJson(json{{"apiVersion", "fabrica.dev/v1"},
                                       {"kind", "Tenant"},
                                       {"metadata", {{"name", ns}}},
                                       {"spec", {{"tolerations", list}}}},
                                  "Workload");
    if (!read.ok() || read->tenants.empty()) return Status::Ok();
    const std::vector<Toleration>& tolerations = read->tenants.front().tolerations;
    for (size_t i = 0; i < tolerations.size(); ++i)
      if (!ToleratesAllowed(*tenant->allowed_tolerations, tolerations[i]))
        return Status(StatusCode::kPermissionDenied,
                      "spec.tolerations[" + std::to_string(i) + "]: tenant " + ns +
                          " may not tolerate " + tolerations[i].ToString() +
                          " (not among its spec.allowedTolerations)");
    return Status::Ok();
  }

  // A tenant's nodeSelector (Kubernetes' PodNodeSelector) merged into a workload's spec as it
  // is written: the pairs it lacks are added; one it gives another value is refused (403), so
  // that a tenant kept to its nodes cannot leave them by a workload's selector.
  Status GiveTenantNodeSelector(json& workload, const std::string& ns) {
    if (!workload.is_object() || !workload.contains("spec") || !workload["spec"].is_object())
      return Status::Ok();
    const std::optional<Tenant> tenant = StoredTenant(ns);
    if (!tenant || tenant->node_selector.empty()) return Status::Ok();
    json& sel = workload["spec"]["nodeSelector"];
    if (sel.is_null()) sel = json::object();
    if (!sel.is_object()) return Status::Ok();  // (the validation's to refuse)
    for (const auto& [key, value] : tenant->node_selector) {
      const json& has = Field(sel, key.c_str());
      if (has.is_null()) {
        sel[key] = value;
      } else if (has.is_string() && has != value) {  // (another type: the validation's)
        return Status(
            StatusCode::kPermissionDenied,
            "spec.nodeSelector." + key + ": tenant " + ns + " keeps its work on nodes with " + key +
                "=" + value + " (its spec.nodeSelector); the workload has " + key + "=" +
                has.get<std::string>() + " (set it to " + value + ", or drop it to be given it)");
      }
    }
    return Status::Ok();
  }

  // A queue's spec.tenants naming a tenant that does not exist (a misspelling, or one not
  // created yet): written, as Kubernetes writes a reference to what is not there yet, and
  // warned of.
  // What a queue written changes for work that names no queue: its tenant's leaf made (that
  // work leaves unqueued for it), or that leaf given its first child (the work goes back to
  // unqueued). `stored`: the queue as it was (null: new).
  std::vector<std::string> QueueRoutingWarnings(const json& queue, const json& stored) {
    std::vector<std::string> out;
    const std::string name = Str(Field(queue, "metadata"), "name");
    const std::string parent = Str(Field(queue, "spec"), "parent");
    auto before = QueueTreeWith(json());
    if (!before.ok()) return out;
    const std::set<std::string> leaves = LeafQueues(*before);
    if (stored.is_null() && !leaves.count(name)) {
      if (auto tenant = store.Get(Key(*FindResource("tenants"), "", name)); tenant.ok()) {
        auto after = QueueTreeWith(queue);
        auto running = after.ok() ? RunningIn(name, *after) : Result<std::string>(std::string());
        if (running.ok() && !running->empty())
          out.push_back("tenant " + name +
                        "'s work that names no queue is charged to this queue from now on, its "
                        "tenant's leaf: " +
                        *running + "; until now it ran in unqueued");
      }
    }
    if (!parent.empty() && parent != Str(Field(stored, "spec"), "parent") && leaves.count(parent)) {
      auto running = RunningIn(parent, *before, false, Named::kByTenant);
      auto waiting = RunningIn(parent, *before, /*pending=*/true, Named::kByTenant);
      std::string what;
      if (running.ok() && !running->empty()) what = *running;
      if (waiting.ok() && !waiting->empty()) what += (what.empty() ? "" : ", and ") + *waiting;
      if (!what.empty())
        out.push_back("queue " + parent + " is no longer a leaf: tenant " + parent +
                      "'s work that names no queue, charged to it until now (" + what +
                      "), is charged to unqueued from now on; name one of its leaves in their "
                      "spec.queue to keep them in its tree");
    }
    return out;
  }

  // A queue moved under another parent, or its tenants changed, so that tenants whose work
  // waits or runs in it may no longer use it (access to a queue is inherited down the tree):
  // their running work goes on in unqueued, best-effort and reclaimed first, and their pending
  // work waits, until they are let back (a trial's re-parenting answered only "patched").
  std::vector<std::string> QueueAccessWarnings(const json& queue, const json& stored) {
    if (stored.is_null() ||
        (Field(Field(queue, "spec"), "parent") == Field(Field(stored, "spec"), "parent") &&
         Field(Field(queue, "spec"), "tenants") == Field(Field(stored, "spec"), "tenants")))
      return {};
    auto before = QueueTreeWith(json());
    auto after = QueueTreeWith(queue);
    auto workloads = ReadAll(Prefix(*FindResource("workloads"), ""));
    if (!before.ok() || !after.ok() || !workloads.ok()) return {};
    const std::string name = Str(Field(queue, "metadata"), "name");
    const auto lookup = [](const AdmissionConfig& tree) {
      return [&tree](const std::string& q) -> const QueueSpec* {
        for (const QueueSpec& spec : tree.queues)
          if (spec.name == q) return &spec;
        return nullptr;
      };
    };
    const std::set<std::string> leaves = LeafQueues(*before);
    // (Its leaves, itself where it is one: access is inherited by every queue below it.)
    const std::vector<std::string> below = Subtree(*before, name);
    const std::set<std::string> in(below.begin(), below.end());
    std::map<std::string, std::pair<int, int>> lost;  // tenant -> running, pending
    for (const KeyValue& kv : *workloads) {
      const json w = Materialize(kv);
      const std::string tenant = Str(Field(w, "metadata"), "namespace");
      const std::string leaf = WaitingQueue(leaves, Str(Field(w, "spec"), "queue"), tenant);
      if (!in.count(leaf)) continue;
      const std::string phase = Str(Field(w, "status"), "phase", "Pending");
      const bool running = phase == "Scheduled" || phase == "Running";
      if (!running && phase != "Pending") continue;
      if (!TenantMayUse(tenant, leaf, lookup(*before)).ok() ||
          TenantMayUse(tenant, leaf, lookup(*after)).ok())
        continue;
      ++(running ? lost[tenant].first : lost[tenant].second);
    }
    std::vector<std::string> out;
    for (const auto& [tenant, n] : lost)
      out.push_back("tenant " + tenant + " may no longer use queue " + name +
                    (in.size() > 1 ? " or the queues below it" : "") +
                    " (it was let in above the queue's old place, or by its old tenants): " +
                    std::to_string(n.first) +
                    " running workload(s) of it go on in unqueued (best-effort, reclaimed first) "
                    "and " +
                    std::to_string(n.second) +
                    " pending wait until it is let back; list it in the queue's spec.tenants to "
                    "keep them");
    return out;
  }

  // A disruption budget set to 0 (`stored`: the queue before): the evictions of its work now
  // under way are called off by the scheduler, their preemptors left waiting, and what it
  // borrows stays until its work ends — said at the write (a trial read only "patched", and
  // the warning a cycle later in `get queues`).
  std::vector<std::string> QueueBudgetWarnings(const json& queue, const json& stored) {
    const json& budget = Field(Field(queue, "spec"), "disruptionBudget");
    if (budget != 0 || Field(Field(stored, "spec"), "disruptionBudget") == 0) return {};
    auto tree = QueueTreeWith(queue);
    auto workloads = ReadAll(Prefix(*FindResource("workloads"), ""));
    if (!tree.ok() || !workloads.ok()) return {};
    const std::set<std::string> leaves = LeafQueues(*tree);
    const std::string name = Str(Field(queue, "metadata"), "name");
    std::string stopping;
    int count = 0;
    for (const KeyValue& kv : *workloads) {
      if (kv.value.find("\"preemption\"") == std::string::npos) continue;
      const json w = Materialize(kv);
      const json& mark = Field(Field(w, "status"), "preemption");
      if (Str(mark, "by").empty()) continue;  // (a drain or a deactivation: not a preemptor's)
      const json& meta = Field(w, "metadata");
      if (WaitingQueue(leaves, Str(Field(w, "spec"), "queue"), Str(meta, "namespace")) != name)
        continue;
      if (++count <= 3)
        stopping +=
            (stopping.empty() ? "" : ", ") + Str(meta, "namespace") + "/" + Str(meta, "name");
    }
    std::string said =
        "spec.disruptionBudget: 0 lets no work of queue " + name +
        " be evicted for others: what it borrows stays until its work ends, and a queue below its "
        "guarantee waits for it";
    if (count > 0)
      said += "; the eviction of " + std::to_string(count) + " workload(s) now stopping (" +
              stopping + (count > 3 ? ", ..." : "") +
              ") is called off at the next cycle, and their preemptors wait";
    return {said};
  }

  // A queue write that lifts the queue trees' guarantees, every GPU flavour together, past the
  // GPUs the fleet's nodes hold: said at the write. (The scheduler's status says it a cycle
  // later, and on every root that guarantees any: a trial saw it only on a later `get queues`,
  // beside a queue it had not touched.)
  std::vector<std::string> QueueGuaranteeWarnings(const json& queue) {
    std::vector<std::string> out;
    // A lendingLimit beside no guarantee, on a queue without children: it is guaranteed
    // nothing, so lends nothing until children are guaranteed some (accepted, so that a tree's
    // file may be applied parents first; with `guaranteed: 0` it is refused: a trial saw one
    // accepted and the other refused with no word why).
    const std::string name = Str(Field(queue, "metadata"), "name");
    if (const json& quotas = Field(Field(queue, "spec"), "quotas"); quotas.is_object())
      for (const auto& [flavor, q] : quotas.items())
        if (q.is_object() && q.contains("lendingLimit") && !q.contains("guaranteed"))
          if (auto children = ChildrenOf(name); children.ok() && children->empty())
            out.push_back("spec.quotas." + flavor + ".lendingLimit: queue " + name +
                          " has no children and no guarantee of its own, so it is guaranteed "
                          "nothing and lends nothing until children below it are guaranteed "
                          "some");
    for (std::string& w : TreeGuaranteeWarnings(queue)) out.push_back(std::move(w));
    return out;
  }

  // What the scheduler's status would say of the trees' guarantees against the fleet (each
  // flavour's GPUs, MIG slices and whole GPUs, then every flavour together) that it did not
  // before the write. (A trial read only the total here, and the flavour a cycle later.)
  std::vector<std::string> TreeGuaranteeWarnings(const json& queue) {
    auto before = QueueTreeWith(json());
    auto after = QueueTreeWith(queue);
    auto nodes = ReadAll(Prefix(*FindResource("nodes"), ""));
    if (!before.ok() || !after.ok() || !nodes.ok()) return {};
    Fleet fleet;
    for (const KeyValue& kv : *nodes) {
      const json n = Materialize(kv);
      json spec = Field(n, "spec");
      if (!spec.is_object()) continue;
      spec.erase("unschedulable");
      spec["name"] = Str(Field(n, "metadata"), "name");
      auto parsed = ParseFleetYaml(json{{"nodes", json::array({spec})}}.dump(), kv.key);
      if (parsed.ok()) fleet.nodes.push_back(parsed->nodes.front());
    }
    // (No node yet: nothing to compare with.)
    if (fleet.nodes.empty()) return {};
    auto policy = MakePolicy("bestfit");
    if (!policy.ok()) return {};
    // By flavour name ("" for all together): what is guaranteed past the fleet, and the words.
    const auto warnings = [&](const AdmissionConfig& config) {
      std::vector<std::tuple<std::string, int64_t, std::string>> out;
      if (auto admitter = Admitter::Create(fleet, {}, config, **policy); admitter.ok())
        for (auto& [f, sum, text] : (*admitter)->CapacityWarnings())
          out.emplace_back(f < 0 ? "" : (*admitter)->flavor_name(f), sum, std::move(text));
      return out;
    };
    // (Said where the write raises what is past; one that lowers it, still past, says nothing
    // more.)
    std::map<std::string, int64_t> was;
    for (const auto& [flavor, sum, text] : warnings(*before)) was[flavor] = sum;
    std::vector<std::string> out;
    for (auto& [flavor, sum, text] : warnings(*after))
      if (auto it = was.find(flavor); it == was.end() || it->second < sum)
        out.push_back(std::move(text));
    return out;
  }

  // A flavour naming GPU models no node has (a typo, or models yet to come): accepted, and
  // said (a trial's `models: [A100]` took 0 GPUs without a word).
  std::vector<std::string> FlavorWarnings(const json& flavor) {
    const FleetFacts fleet = Facts();
    if (fleet.models.empty()) return {};
    std::string missing;
    for (const json& m : jsonf::List(Field(flavor, "spec"), "models"))
      if (m.is_string() && !fleet.models.count(m.get<std::string>()))
        missing += (missing.empty() ? "" : ", ") + m.get<std::string>();
    if (missing.empty()) return {};
    std::string have;
    for (const std::string& m : fleet.models) have += (have.empty() ? "" : ", ") + m;
    return {"spec.models: no node of the fleet has " + missing + " (the fleet has " + have +
            "); accepted, the flavour takes such GPUs when they join"};
  }

  // A node whose NICs are all cabled to leaves other than its own (a leaf changed in an edit,
  // its NICs' left as they were): placement takes it as in its spec.leaf, its links say
  // otherwise (a trial moved one so, unwarned).
  static std::vector<std::string> NodeWarnings(const json& node) {
    const json& spec = Field(node, "spec");
    const std::string leaf = Str(spec, "leaf");
    std::set<std::string> cabled;
    for (const json& nic : jsonf::List(spec, "nics"))
      cabled.insert(Str(nic, "leaf").empty() ? leaf : Str(nic, "leaf"));
    if (leaf.empty() || cabled.empty() || cabled.count(leaf)) return {};
    std::string list;
    for (const std::string& l : cabled) list += (list.empty() ? "" : ", ") + l;
    return {"spec.leaf: " + leaf + ", but no NIC of the node is cabled to it (spec.nics[].leaf: " +
            list + "): gangs that need one leaf take it as in " + leaf};
  }

  // spec.tenants naming tenants that do not exist, of a Queue or a PriorityClass (a trial's
  // PriorityClass for a tenant that did not exist was created without a word); none for other
  // kinds.
  std::vector<std::string> TenantListWarnings(const json& obj, const std::string& kind) {
    std::vector<std::string> out;
    if (kind != "Queue" && kind != "PriorityClass") return out;
    for (const json& t : jsonf::List(Field(obj, "spec"), "tenants")) {
      if (!t.is_string() || t == "*") continue;
      auto kv = store.Get(Key(*FindResource("tenants"), "", t.get<std::string>()));
      if (!kv.ok() && kv.status().code() == StatusCode::kNotFound)
        out.push_back("spec.tenants: tenant '" + t.get<std::string>() + "' does not exist; " +
                      (kind == "Queue"
                           ? "no work reaches this queue through it until it does"
                           : "no work may use this priority class through it until it does"));
    }
    return out;
  }

  // A tenant's trust lowered (or trust domain changed) while its pods share GPUs with other
  // tenants' that the isolation table no longer allows: nothing running is moved, and no new
  // sharer joins such a GPU (ClusterState::kClosed) — said to whoever wrote it, kubectl or
  // curl too (a trial's PATCH answered nothing; fabctl had warned on its own).
  std::vector<std::string> TrustWarnings(const json& o, const json& stored) {
    const json& spec = Field(o, "spec");
    const std::string name = Str(Field(o, "metadata"), "name");
    if (Str(spec, "trust", "standard") == Str(Field(stored, "spec"), "trust", "standard") &&
        Str(spec, "trustDomain", name) == Str(Field(stored, "spec"), "trustDomain", name))
      return {};
    auto tenants = store.List("/registry/tenants/", "", 0);
    auto workloads = store.List("/registry/workloads/", "", 0);
    if (!tenants.ok() || !workloads.ok()) return {};
    std::map<std::string, std::pair<std::string, std::string>> trust;  // level, domain
    for (const KeyValue& kv : tenants->items) {
      const json t = json::parse(kv.value, nullptr, false);
      const std::string n = Str(Field(t, "metadata"), "name");
      trust[n] = {Str(Field(t, "spec"), "trust", "standard"),
                  Str(Field(t, "spec"), "trustDomain", n)};
    }
    trust[name] = {Str(spec, "trust", "standard"), Str(spec, "trustDomain", name)};
    // "node GPU i" -> the tenants on it, and whether one holds a share (not a MIG slice).
    std::map<std::string, std::pair<std::set<std::string>, bool>> gpus;
    for (const KeyValue& kv : workloads->items) {
      const json w = json::parse(kv.value, nullptr, false);
      const std::string phase = Str(Field(w, "status"), "phase");
      if (phase != "Scheduled" && phase != "Running") continue;
      const std::string ns = Str(Field(w, "metadata"), "namespace");
      for (const json& a : jsonf::List(Field(w, "status"), "assignments"))
        for (const json& d : jsonf::List(a, "devices")) {
          auto& gpu = gpus[Str(a, "node") + " GPU " + std::to_string(Int(d, "index", -1))];
          gpu.first.insert(ns);
          gpu.second |= !d.contains("migSlice");
        }
    }
    const auto allowed = [&](const std::string& a, const std::string& b, bool share) {
      const auto& x = trust[a];
      const auto& y = trust[b];
      if (x.first == "untrusted" || y.first == "untrusted") return false;
      return !share || (x.first == "trusted" && y.first == "trusted" && x.second == y.second);
    };
    std::string shared;
    int count = 0;
    for (const auto& [gpu, on] : gpus) {
      if (!on.first.count(name)) continue;
      bool ok = true;
      for (const std::string& other : on.first)
        if (other != name && !allowed(name, other, on.second)) ok = false;
      if (!ok && count++ < 5) shared += (shared.empty() ? "" : ", ") + gpu;
    }
    if (count == 0) return {};
    const auto& t = trust[name];
    return {"tenant " + name + " (" + t.first +
            (t.first == "trusted" ? ", trust domain " + t.second : "") + ") shares " +
            std::to_string(count) + " GPU(s) with other tenants' pods that its trust no longer " +
            "allows (" + shared + (count > 5 ? ", ..." : "") +
            "): nothing running is moved, and no new sharer joins those GPUs until the pods " +
            "placed under the other trust have gone"};
  }

  // A trust domain given to a tenant that is not trusted: only trusted tenants share GPUs by
  // domain, so it reads as sharing that never happens. (Said, not refused: a tenant stored with
  // one stays writable, and the domain counts again once it is made trusted.)
  std::vector<std::string> TrustDomainWarnings(const json& o) {
    const json& spec = Field(o, "spec");
    const std::string trust = Str(spec, "trust", "standard");
    if (trust == "trusted" || !spec.contains("trustDomain")) return {};
    const std::string name = Str(Field(o, "metadata"), "name");
    if (Str(spec, "trustDomain") == name) return {};  // (its default)
    return {"tenant " + name + ": spec.trustDomain " + Str(spec, "trustDomain") +
            " is ignored while it is " + trust +
            ": only trusted tenants share GPUs by trust domain"};
  }

  // The stored Tenant `ns`, parsed; nullopt where there is none (or it does not parse).
  std::optional<Tenant> StoredTenant(const std::string& ns) {
    auto kv = store.Get(Key(*FindResource("tenants"), "", ns));
    if (!kv.ok()) return std::nullopt;
    const json t = json::parse(kv->value, nullptr, false);
    if (!t.is_object()) return std::nullopt;
    auto m = ParseManifestJson(t, "Tenant '" + ns + "'");
    if (!m.ok() || m->tenants.empty()) return std::nullopt;
    return m->tenants.front();
  }

  Status CheckPossible(const Workload& w) {
    const FleetFacts fleet = Facts();
    if (fleet.gpus == 0) return Status::Ok();  // no fleet registered yet: nothing to compare with
    for (size_t i = 0; i < w.pod_sets.size(); ++i) {
      const PodSet& ps = w.pod_sets[i];
      const std::string at = "spec.podSets[" + std::to_string(i) + "].";
      if (ps.device.kind == DeviceKind::kWhole && ps.device.gpus > fleet.gpus) {
        return InvalidArgument(at + "devices.gpus: " + std::to_string(ps.device.gpus) +
                               " GPUs per pod, but the largest node has " +
                               std::to_string(fleet.gpus));
      }
      // (CPU and memory alike: a trial's 300 cores and 4Ti were accepted, then Unschedulable,
      // beside 16 GPUs refused here.)
      if (fleet.cpu_milli > 0 && ps.cpu.value() > fleet.cpu_milli)
        return InvalidArgument(at + "cpu: " + FormatMilliCpu(ps.cpu) +
                               (ps.cpu.value() % 1000 == 0 ? " CPU cores" : " CPU") +
                               " per pod, but the largest node has " +
                               FormatMilliCpu(MilliCpu(fleet.cpu_milli)));
      if (fleet.memory_mib > 0 && ps.memory.value() > fleet.memory_mib)
        return InvalidArgument(at + "memory: " + FormatMemoryMib(ps.memory) +
                               " per pod, but the largest node has " +
                               FormatMemoryMib(MemoryMib(fleet.memory_mib)));
    }
    return Status::Ok();
  }

  FleetFacts Facts() {
    std::lock_guard<std::mutex> lock(fleet_facts_mu);
    if (fleet_facts) return *fleet_facts;
    FleetFacts f;
    auto nodes = store.List("/registry/nodes/", "", 0);
    if (!nodes.ok()) return f;  // (not kept: read again next time)
    for (const KeyValue& kv : nodes->items) {
      json n = json::parse(kv.value, nullptr, false);
      if (n.is_discarded()) continue;
      const json& spec = Field(n, "spec");
      f.gpus = std::max(f.gpus, NodeGpus(spec));
      const json& cpu = Field(spec, "cpu");
      if (auto c = ParseMilliCpu(cpu.is_string() ? cpu.get<std::string>() : cpu.dump()); c.ok())
        f.cpu_milli = std::max(f.cpu_milli, c->value());
      const json& memory = Field(spec, "memory");  // (a number: MiB)
      if (auto m = ParseMemoryMib(memory.is_string() ? memory.get<std::string>() : memory.dump());
          m.ok())
        f.memory_mib = std::max(f.memory_mib, m->value());
      if (const std::string model = Str(Field(spec, "gpus"), "model"); !model.empty())
        f.models.insert(model);
      for (const json& d : jsonf::List(spec, "devices"))
        if (const std::string model = Str(d, "model"); !model.empty()) f.models.insert(model);
    }
    fleet_facts = f;
    return f;
  }

  // A node spec's GPUs: its devices, or the count of its `gpus` shorthand.
  static int64_t NodeGpus(const json& spec) {
    if (Field(spec, "devices").is_array()) return static_cast<int64_t>(spec["devices"].size());
    return Int(Field(spec, "gpus"), "count");
  }

  HttpResponse Handle(const HttpRequest& req, std::string* resource_label,
                      std::string* verb_label) {
    if (req.path == "/healthz" || req.path == "/readyz" || req.path == "/livez") {
      HttpResponse r;
      r.content_type = "text/plain";
      r.body = "ok";
      return r;
    }
    auto principal = Authenticate(req);
    if (req.path == "/metrics") {
      *resource_label = "metrics";
      if (!principal.ok()) return ErrorFromStatus(principal.status());
      // Every tenant's usage and cost are there: for those who may read every tenant (a
      // platform admin, a viewer: Prometheus's token), as Kubernetes keeps /metrics from
      // tenants (a trial's tenant admin read every other tenant's spend).
      if (bool all = false; (auth.ReadableTenants(*principal, &all), !all))
        return StatusResponse(403, "user '" + principal->user +
                                       "' may not read /metrics: it carries every tenant's usage "
                                       "and cost (a platform admin or a viewer may; a tenant "
                                       "reads its own with fabctl usage or /allocation)");
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics ? metrics->Render() : "";
      if (metrics_extra) r.body += metrics_extra();
      return r;
    }
    // (The extension's routes — node tokens, fault injection, repairs — take no dry runs: a
    // dry-run write is not handed to them, so it writes nothing and is answered below.)
    if (extension && !(req.method != "GET" && req.query.count("dryRun"))) {
      bool all = false;
      std::vector<std::string> tenants;
      if (principal.ok()) tenants = auth.ReadableTenants(*principal, &all);
      std::optional<HttpResponse> r = extension(req, principal, tenants, all);
      if (r) {
        *resource_label = "usage";
        return *r;
      }
    }
    // A tenant read as kubectl reads a namespace: after a 404 of a namespaced object kubectl
    // asks for its namespace, to tell a missing namespace from a missing object (a trial's
    // kubectl, answered 404 here, said "no such path: /api/v1/namespaces/team-a").
    if (req.path.rfind("/api/v1/namespaces", 0) == 0) {
      if (!principal.ok()) return ErrorFromStatus(principal.status());
      if (req.method != "GET") return StatusResponse(405, "namespaces are read: use GET");
      const std::string rest = req.path.substr(std::string("/api/v1/namespaces").size());
      const std::string name = rest.size() > 1 && rest[0] == '/' ? rest.substr(1) : "";
      if ((!rest.empty() && name.empty()) || name.find('/') != std::string::npos)
        return StatusResponse(404, "no such path: " + req.path);
      bool all = false;
      const std::vector<std::string> readable = auth.ReadableTenants(*principal, &all);
      const auto shown = [](const json& tenant) {
        json meta = {{"name", Str(Field(tenant, "metadata"), "name")}};
        for (const char* k : {"uid", "creationTimestamp", "resourceVersion"})
          if (const json& v = Field(Field(tenant, "metadata"), k); v.is_string()) meta[k] = v;
        return json{{"kind", "Namespace"},
                    {"apiVersion", "v1"},
                    {"metadata", meta},
                    {"status", {{"phase", "Active"}}}};
      };
      const auto may_read = [&](const std::string& t) {
        return all || std::find(readable.begin(), readable.end(), t) != readable.end();
      };
      if (!name.empty()) {
        auto kv = store.Get(Key(*FindResource("tenants"), "", name));
        if (!kv.ok() && kv.status().code() != StatusCode::kNotFound)
          return ErrorFromStatus(kv.status());
        if (!kv.ok() || !may_read(name)) {
          HttpResponse r = StatusResponse(404, "namespaces \"" + name + "\" not found");
          json body = json::parse(r.body);
          body["details"] = {{"name", name}, {"kind", "namespaces"}};
          r.body = body.dump();
          return r;
        }
        return JsonResponse(200, shown(Materialize(*kv)));
      }
      auto listed = ReadAll("/registry/tenants/");
      if (!listed.ok()) return ErrorFromStatus(listed.status());
      json items = json::array();
      for (const KeyValue& kv : *listed)
        if (json t = Materialize(kv); may_read(Str(Field(t, "metadata"), "name")))
          items.push_back(shown(t));
      return JsonResponse(200,
                          {{"kind", "NamespaceList"},
                           {"apiVersion", "v1"},
                           {"metadata", {{"resourceVersion", std::to_string(store.Revision())}}},
                           {"items", items}});
    }
    if (req.path == "/apis" || req.path == "/apis/") {
      return JsonResponse(
          200, {{"kind", "APIGroupList"},
                {"apiVersion", "v1"},
                {"groups",
                 {{{"name", "fabrica.dev"},
                   {"versions", {{{"groupVersion", kGroupVersion}, {"version", "v1"}}}},
                   {"preferredVersion", {{"groupVersion", kGroupVersion}, {"version", "v1"}}}}}}});
    }
    if (req.path.rfind(kApiPrefix, 0) != 0) return StatusResponse(404, "no such path: " + req.path);
    if (!principal.ok()) return ErrorFromStatus(principal.status());
    // Split /apis/fabrica.dev/v1/[namespaces/NS/]RESOURCE[/NAME[/status]]
    std::vector<std::string> parts;
    {
      std::string rest = req.path.substr(std::string(kApiPrefix).size());
      size_t start = 0;
      while (start < rest.size()) {
        size_t slash = rest.find('/', start);
        std::string part =
            rest.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (!part.empty()) parts.push_back(part);
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
    }
    if (parts.empty()) {
      json list = json::array();
      for (const ResourceInfo& r : kResources) {
        std::string singular = r.kind;
        for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        list.push_back(
            {{"name", r.plural},
             {"singularName", singular},
             {"kind", r.kind},
             {"namespaced", r.namespaced},
             {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}});
        if (*r.short_name) list.back()["shortNames"] = {r.short_name};
      }
      list.push_back({{"name", "events"},
                      {"singularName", "event"},
                      {"kind", "Event"},
                      {"namespaced", true},
                      {"shortNames", {"ev"}},
                      {"verbs", {"list", "watch"}}});
      list.push_back({{"name", "nodeallocations"},
                      {"kind", "NodeAllocation"},
                      {"namespaced", false},
                      {"verbs", {"get", "list"}}});
      return JsonResponse(200, {{"kind", "APIResourceList"},
                                {"apiVersion", "v1"},
                                {"groupVersion", kGroupVersion},
                                {"resources", list}});
    }
    std::string ns;
    if (parts[0] == "namespaces") {
      if (parts.size() < 3) return StatusResponse(404, "expected /namespaces/<tenant>/<resource>");
      ns = parts[1];
      parts.erase(parts.begin(), parts.begin() + 2);
    }
    if (parts[0] == "events") {
      *resource_label = "events";
      *verb_label = "list";
      const bool watch = req.query.count("watch") && req.query.at("watch") != "false";
      if (watch) *verb_label = "watch";
      if (req.method != "GET" || parts.size() > 1)
        return StatusResponse(405,
                              "events are read as a list or a watch: GET .../events"
                              "[?fieldSelector=involvedObject.name=NAME][&watch=true]");
      return Events(ns, req, *principal, watch);
    }
    if (parts[0] == "nodeallocations") {
      *resource_label = "nodeallocations";
      *verb_label = parts.size() > 1 ? "get" : "list";
      if (parts.size() > 2 || !ns.empty())
        return StatusResponse(404, "no such path: " + req.path +
                                       " (node allocations are at .../nodeallocations[/NODE])");
      if (req.method != "GET")
        return StatusResponse(405, "node allocations are read: GET .../nodeallocations[/NODE]");
      if (req.query.count("watch") && req.query.at("watch") != "false")
        return StatusResponse(400, "node allocations are read as a list, not watched");
      Status allowed = auth.Check(*principal, Verb::kList, "nodes", "", "", false);
      if (!allowed.ok()) return ErrorFromStatus(allowed);
      if (parts.size() > 1 && !store.Get(Key(*FindResource("nodes"), "", parts[1])).ok())
        return StatusResponse(404, "Node '" + parts[1] + "' not found");
      HttpResponse r = NodeAllocations(parts.size() > 1 ? parts[1] : "", *principal);
      std::string table;
      RowObject row_object;
      if (std::optional<HttpResponse> bad = TableAsked(req, &table, &row_object)) return *bad;
      if (table.empty() || r.status != 200) return r;
      // (kubectl's: a row a node, with what it holds, not NAME and AGE "<unknown>".)
      const json answer = json::parse(r.body, nullptr, false);
      const json items = answer.contains("items") ? answer["items"] : json::array({answer});
      return JsonResponse(
          200, ObjectTable("NodeAllocation", items.get<std::vector<json>>(), clock.NowMs(), table,
                           row_object, Str(Field(answer, "metadata"), "resourceVersion"), {}));
    }
    const ResourceInfo* info = FindResource(parts[0]);
    if (!info) return StatusResponse(404, "unknown resource '" + parts[0] + "'");
    *resource_label = info->plural;
    if (!ns.empty() && !info->namespaced) {
      return StatusResponse(404, std::string(info->plural) + " are not namespaced");
    }
    std::string name = parts.size() > 1 ? parts[1] : "";
    if (std::string(info->plural) == "queues" && parts.size() == 3 &&
        parts[2] == "pendingworkloads") {
      *verb_label = "get";
      if (req.method != "GET") return StatusResponse(405, "pendingworkloads: use GET");
      Status allowed = auth.Check(*principal, Verb::kGet, info->plural, "", name, false);
      if (!allowed.ok()) return ErrorFromStatus(allowed);
      return PendingWorkloads(name, req, *principal);
    }
    if (std::string(info->plural) == "workloads" && parts.size() == 3 && parts[2] == "eviction") {
      *verb_label = "create";
      if (req.method != "POST") return StatusResponse(405, "eviction: use POST");
      if (ns.empty())
        return StatusResponse(404, "a workload is evicted in its tenant's namespace: POST " +
                                       std::string(kApiPrefix) +
                                       "/namespaces/<tenant>/workloads/<name>/eviction");
      Status allowed = auth.Check(*principal, Verb::kUpdate, info->plural, ns, name, false);
      if (!allowed.ok()) return ErrorFromStatus(allowed);
      return Evict(*info, ns, name, req, *principal);
    }
    const bool status_sub = parts.size() > 2 && parts[2] == "status";
    if (parts.size() > 3 || (parts.size() == 3 && !status_sub)) {
      // (An action on an object, as a fault injection, was not handed on for a dry run.)
      if (req.method != "GET" && req.query.count("dryRun"))
        return StatusResponse(400, "dryRun: " + req.method + " " + req.path +
                                       " takes no dry run (only an object's create, update, "
                                       "patch or delete do)");
      return StatusResponse(404, "no such path: " + req.path);
    }
    if (info->namespaced && !name.empty() && ns.empty()) {
      return StatusResponse(404,
                            "workloads are addressed as /namespaces/<tenant>/workloads/<name>");
    }

    Verb verb;
    if (req.method == "GET") {
      verb = name.empty()
                 ? (req.query.count("watch") && req.query.at("watch") != "false" ? Verb::kWatch
                                                                                 : Verb::kList)
                 : Verb::kGet;
    } else if (req.method == "POST") {
      verb = Verb::kCreate;
    } else if (req.method == "PUT") {
      verb = Verb::kUpdate;
    } else if (req.method == "PATCH") {
      verb = Verb::kPatch;
    } else if (req.method == "DELETE") {
      verb = Verb::kDelete;
    } else {
      return StatusResponse(405, "method " + req.method + " is not supported");
    }
    *verb_label = VerbName(verb);
    if ((verb == Verb::kCreate && !name.empty()) ||
        (verb != Verb::kCreate && verb != Verb::kList && verb != Verb::kWatch && name.empty())) {
      return StatusResponse(405, std::string(VerbName(verb)) + " needs " +
                                     (name.empty() ? "a name in the URL" : "the collection URL"));
    }
    // A create names its object in the body; authorization needs that name (a node may create
    // only its own Node and Lease).
    std::string auth_name = name;
    if (verb == Verb::kCreate) {
      json body = json::parse(req.body, nullptr, false);
      if (body.is_object() && body.contains("metadata") && body["metadata"].is_object() &&
          body["metadata"].contains("name") && body["metadata"]["name"].is_string()) {
        auth_name = body["metadata"]["name"];
      }
    }
    Status allowed = auth.Check(*principal, verb, info->plural, ns, auth_name, status_sub);
    if (!allowed.ok()) return ErrorFromStatus(allowed);
    if (verb == Verb::kCreate && info->namespaced && ns.empty()) {
      return StatusResponse(
          405, std::string("a workload is created in its tenant's namespace: POST ") + kApiPrefix +
                   "/namespaces/<tenant>/workloads");
    }

    // A dry run (kubectl's --dry-run=server) checks and answers as the write would, and
    // writes nothing.
    if (auto dry = req.query.find("dryRun"); dry != req.query.end() && dry->second != "All")
      return StatusResponse(400, "dryRun: '" + dry->second +
                                     "' is not a dry run mode (the only one is All: ?dryRun=All)");
    // kubectl asks for a Table (server-side printing): fabctl's columns, ages on this clock.
    std::string table;
    RowObject row_object = RowObject::kMetadata;
    if (std::optional<HttpResponse> bad = TableAsked(req, &table, &row_object)) return *bad;
    switch (verb) {
      case Verb::kGet: {
        HttpResponse r = Get(*info, ns, name, *principal);
        if (table.empty() || r.status != 200) return r;
        json obj = json::parse(r.body, nullptr, false);
        return JsonResponse(200, ObjectTable(info->kind, {obj}, clock.NowMs(), table, row_object,
                                             jsonf::Str(Field(obj, "metadata"), "resourceVersion"),
                                             TableContextFor(info->kind)));
      }
      case Verb::kList:
      case Verb::kWatch:
        return List(*info, ns, req, *principal, verb == Verb::kWatch);
      case Verb::kCreate: {
        HttpResponse r = Create(*info, ns, req, *principal);
        if (r.status != 422) return r;  // (the body read again for its name only then)
        std::string twice, named;
        if (const json body = jsonf::ParseNoDuplicateKeys(req.body, &twice); body.is_object())
          named = Str(Field(body, "metadata"), "name");
        return NameInvalid(std::move(r), *info, named);
      }
      case Verb::kUpdate:
      case Verb::kPatch:
        return NameInvalid(
            Update(*info, ns, name, req, *principal, status_sub, verb == Verb::kPatch), *info,
            name);
      case Verb::kDelete:
        return Delete(*info, ns, name, req);
    }
    return StatusResponse(500, "unreachable");
  }

  HttpResponse Get(const ResourceInfo& info, const std::string& ns, const std::string& name,
                   const Principal& p) {
    auto kv = store.Get(Key(info, ns, name));
    // (The built-in unqueued, as the scheduler keeps it, where no queue of its name is stored.)
    if (!kv.ok() && kv.status().code() == StatusCode::kNotFound &&
        std::string(info.kind) == "Queue" && name == kUnqueuedQueue)
      if (auto builtin = store.Get(kBuiltinQueueKey); builtin.ok()) kv = std::move(builtin);
    if (!kv.ok()) {
      if (kv.status().code() == StatusCode::kNotFound) {
        return StatusResponse(404, std::string(info.kind) + " '" + name + "' not found");
      }
      return ErrorFromStatus(kv.status());
    }
    if (!p.node.empty() && std::string(info.plural) == "workloads" &&
        !AssignedTo(Materialize(*kv), p.node)) {
      return StatusResponse(403, "node " + p.node + " may only read workloads assigned to it");
    }
    HttpResponse r;
    if (auto readable = std::string(info.plural) == "workloads" ? NamesReadable(p) : nullptr) {
      json obj = Materialize(*kv);
      ConcealStatus(obj, readable);
      r.body = obj.dump();
      return r;
    }
    r.body = MaterializeText(*kv);
    return r;
  }

  // What a Table's cells of `kind` read beyond their objects (TableContext): the nodes' health
  // records, or the queue tree's leaves. Unreadable: left out (the cells read as without).
  TableContext TableContextFor(const std::string& kind) {
    TableContext context;
    if (kind == "Node") {
      if (auto records = ReadAll("/registry/nodehealth/"); records.ok())
        for (const KeyValue& kv : *records)
          if (json r = json::parse(kv.value, nullptr, false); r.is_object())
            context.node_health[kv.key.substr(kv.key.rfind('/') + 1)] = std::move(r);
    } else if (kind == "Workload") {
      if (auto queues = ReadAll(Prefix(*FindResource("queues"), "")); queues.ok()) {
        std::set<std::string> parents;
        for (const KeyValue& kv : *queues)
          if (json q = json::parse(kv.value, nullptr, false); q.is_object()) {
            context.leaves.insert(Str(Field(q, "metadata"), "name"));
            parents.insert(Str(Field(q, "spec"), "parent"));
          }
        // (The built-in unqueued too, as a list shows it to fabctl.)
        if (store.Get(kBuiltinQueueKey).ok()) context.leaves.insert(kUnqueuedQueue);
        for (const std::string& p : parents) context.leaves.erase(p);
      }
    }
    return context;
  }

  // Every stored object under `prefix`.
  Result<std::vector<KeyValue>> ReadAll(const std::string& prefix) {
    std::vector<KeyValue> out;
    std::string after;
    while (true) {
      ASSIGN_OR_RETURN(ListResult page, store.List(prefix, after, 10000));
      for (KeyValue& kv : page.items) out.push_back(std::move(kv));
      if (!page.more || out.empty()) return out;
      after = out.back().key;
    }
  }

  // GET .../queues/NAME/pendingworkloads (as Kueue's visibility API): the workloads waiting in
  // the queue's subtree in the order admission takes them within each leaf — priority, then
  // creation — with their place in their leaf (`positionInQueue`) and in this list
  // (`position`), 0 first; `limit` (default 1000) and `offset` page it. A tenant sees its own
  // workloads, placed among all. Work the scheduler found it can never admit as it is comes
  // last, `inadmissible`, with no place in its queue (positionInQueue -1).
  // POST .../namespaces/T/workloads/W/eviction (kubectl's pods/eviction, which `fabctl drain`
  // uses): marks a running workload to stop after a grace period, keeping its devices until
  // then, and puts it back in line (reason Evicted), as a preemption does — unless its queue's
  // disruption budget allows no more evictions now: 429, try again, as a PodDisruptionBudget
  // answers. Body (optional): {"gracePeriodSeconds": N, "reason": "..."}.
  HttpResponse Evict(const ResourceInfo& info, const std::string& ns, const std::string& name,
                     const HttpRequest& req, const Principal& p) {
    json body = json::object();
    if (!req.body.empty()) {
      std::string why;
      body = jsonf::ParseBody(req.body, &why);
      if (!why.empty()) return StatusResponse(400, "eviction: " + why);
      if (!body.is_object())
        return StatusResponse(400,
                              "eviction: the body must be a JSON object, as "
                              "{\"gracePeriodSeconds\": 30, \"reason\": \"...\"}");
      body.erase("apiVersion");
      body.erase("kind");
      body.erase("metadata");
      if (Status s =
              CheckFields(body, "eviction",
                          {{"gracePeriodSeconds", JsonKind::kInt}, {"reason", JsonKind::kString}});
          !s.ok())
        return ErrorFromStatus(s);
    }
    // (In milliseconds: the server's grace period may be a fraction of a second.) Longer than
    // the server's only for a platform admin: a marked workload is no victim for anyone, so a
    // tenant's long grace would shield it from reclaim.
    const bool admin =
        auth.Check(p, Verb::kUpdate, "queues", "", "", /*status_subresource=*/false).ok();
    const int64_t grace_ms = body.contains("gracePeriodSeconds")
                                 ? Int(body, "gracePeriodSeconds") * 1000
                                 : eviction_grace_ms;
    const int64_t most_ms = admin ? kMaxRunSeconds * 1000 : eviction_grace_ms;
    if (grace_ms < 0 || grace_ms > most_ms)
      return StatusResponse(422, "eviction.gracePeriodSeconds: must be between 0 and " +
                                     std::to_string(most_ms / 1000) +
                                     (admin ? "" : " (the server's grace period; longer: admins)"));
    if (auto dry = req.query.find("dryRun"); dry != req.query.end() && dry->second != "All")
      return StatusResponse(400, "dryRun: '" + dry->second +
                                     "' is not a dry run mode (the only one is All: ?dryRun=All)");
    const bool dry_run = req.query.count("dryRun") > 0;
    // (One at a time, so that two evictions cannot both pass a budget that has room for one.)
    std::lock_guard<std::mutex> lock(eviction_mu);
    auto kv = store.Get(Key(info, ns, name));
    if (!kv.ok()) {
      if (kv.status().code() == StatusCode::kNotFound)
        return StatusResponse(404, "Workload '" + name + "' not found in " + ns);
      return ErrorFromStatus(kv.status());
    }
    json w = json::parse(kv->value, nullptr, false);
    if (!w.is_object())
      return StatusResponse(500, "stored workload " + ns + "/" + name + " is unreadable");
    const json& status = Field(w, "status");
    const std::string phase = Str(status, "phase");
    if (phase != "Running" && phase != "Scheduled")
      return StatusResponse(409, "workload " + ns + "/" + name + " is " +
                                     (phase.empty() ? "Pending" : phase) +
                                     ": it holds no devices, nothing to evict");
    const std::string deadline = FormatTimestamp(clock.NowMs() + grace_ms);
    if (const json& mark = Field(status, "preemption"); mark.is_object()) {
      // (A shorter grace brings its stop forward, as a second kubectl eviction may.)
      const int64_t at = ParseTimestamp(Str(mark, "deadline"));
      if (at >= 0 && clock.NowMs() + grace_ms < at && !dry_run) {
        w["status"]["preemption"]["deadline"] = deadline;
        w["status"]["message"] = Str(mark, "reason") + "; stops at " + deadline;
        if (auto put = store.Put(kv->key, w.dump(), kv->mod_revision); !put.ok())
          return StatusResponse(
              409, "workload " + ns + "/" + name + " changed while it was evicted; try again");
        return StatusResponse(200, "workload " + ns + "/" + name + " is already stopping (" +
                                       Str(mark, "reason") + "), now at " + deadline);
      }
      return StatusResponse(200, "workload " + ns + "/" + name + " is already stopping (" +
                                     Str(mark, "reason") + "), at " + Str(mark, "deadline"));
    }
    // Its queue's disruption budget: how many of the queue's workloads may be stopping at once
    // (each elastic shrink's pods count as one, as the scheduler counts them). (The scheduler's
    // own victims written meanwhile are not seen: a budget may be passed by one for a cycle.)
    auto tree = QueueTreeWith(json());
    if (!tree.ok() && tree.status().code() != StatusCode::kInvalidArgument)
      return ErrorFromStatus(tree.status());
    if (tree.ok()) {
      const std::set<std::string> leaves = LeafQueues(*tree);
      const std::string leaf = WaitingQueue(leaves, Str(Field(w, "spec"), "queue"), ns);
      // Each budget on its way up: a department's counts what stops in its whole subtree.
      std::map<std::string, const QueueSpec*> spec_of;
      for (const QueueSpec& q : tree->queues) spec_of[q.name] = &q;
      const auto path = [&](const std::string& from) {
        std::vector<const QueueSpec*> up;
        for (auto it = spec_of.find(from); it != spec_of.end() && up.size() <= spec_of.size();
             it = spec_of.find(it->second->parent))
          up.push_back(it->second);
        return up;
      };
      const std::vector<const QueueSpec*> mine = path(leaf);
      std::map<std::string, int> stopping;  // by queue on its path
      if (std::any_of(mine.begin(), mine.end(),
                      [](const QueueSpec* q) { return q->disruption_budget >= 0; })) {
        auto all = ReadAll(Prefix(info, ""));
        if (!all.ok()) return ErrorFromStatus(all.status());
        for (const KeyValue& other : *all) {
          if (other.value.find("\"preemption\"") == std::string::npos &&
              other.value.find("\"shrinks\"") == std::string::npos)
            continue;
          const json o = json::parse(other.value, nullptr, false);
          const json& st = Field(o, "status");
          const std::string ph = Str(st, "phase");
          if (ph != "Running" && ph != "Scheduled") continue;
          const int n = (Field(st, "preemption").is_object() ? 1 : 0) +
                        static_cast<int>(jsonf::List(st, "shrinks").size());
          if (n == 0) continue;
          for (const QueueSpec* q : path(WaitingQueue(leaves, Str(Field(o, "spec"), "queue"),
                                                      Str(Field(o, "metadata"), "namespace"))))
            stopping[q->name] += n;
        }
      }
      for (const QueueSpec* q : mine) {
        if (q->disruption_budget < 0) continue;
        const int now = stopping[q->name];
        const std::string whose =
            q->name == leaf ? "its workloads" : "the workloads of the queues below it";
        // (A budget of 0 never frees: waiting for stops would wait forever.)
        if (now >= q->disruption_budget)
          return StatusResponse(
              429, "Cannot evict workload " + ns + "/" + name + ": queue " + q->name +
                       "'s disruptionBudget of " + std::to_string(q->disruption_budget) +
                       (q->disruption_budget == 0
                            ? " allows no evictions until an administrator raises it"
                            : " allows no more evictions now (" + std::to_string(now) + " of " +
                                  whose + " stopping); try again when they have stopped"));
      }
    }
    std::string why = "evicted by " + (p.user.empty() ? std::string("?") : p.user);
    if (const std::string given = Str(body, "reason"); !given.empty()) why += ": " + given;
    w["status"]["preemption"] = {
        {"by", ""}, {"reason", why}, {"deadline", deadline}, {"evictor", "api"}};
    w["status"]["message"] = why + "; stops at " + deadline;
    if (dry_run)
      return StatusResponse(
          201, "workload " + ns + "/" + name + " " + why + "; stops at " + deadline + " (dry run)");
    auto put = store.Put(kv->key, w.dump(), kv->mod_revision);
    if (!put.ok()) {
      if (put.status().code() == StatusCode::kFailedPrecondition)
        return StatusResponse(
            409, "workload " + ns + "/" + name + " changed while it was evicted; try again");
      return ErrorFromStatus(put.status());
    }
    return StatusResponse(201,
                          "workload " + ns + "/" + name + " " + why + "; stops at " + deadline);
  }

  // GET .../nodeallocations[/NODE]: what the work placed on each node holds of its GPUs, and the
  // room planned there for pending work (a preemptor's while its victims stop, a reservation's),
  // with no workload named. Anyone who may list nodes reads it, as Kubernetes' node metrics, so
  // a tenant sees how loaded a node is though not others' work (a trial's tenant read a node
  // with 4 GPUs busy as idle); `unreadGpuMilli` is the part held by work the caller cannot read.
  // A GPU whose free room isolation keeps for some tenants only (DESIGN.md's table: a share's
  // rest for its sharers, an untrusted tenant's MIG GPU for it, a standard one's closed to
  // untrusted tenants, an exclusive node for its owner) says for whom in `openTo` (a trial read
  // such room as free to all).
  HttpResponse NodeAllocations(const std::string& only, const Principal& p) {
    auto listed = store.List(Prefix(*FindResource("workloads"), ""), "", 0);
    if (!listed.ok()) return ErrorFromStatus(listed.status());
    auto tenant_list = store.List("/registry/tenants/", "", 0);
    if (!tenant_list.ok()) return ErrorFromStatus(tenant_list.status());
    bool all = false;
    const std::vector<std::string> tenants = auth.ReadableTenants(p, &all);
    struct Trust {
      std::string level = "standard", domain;
      bool exclusive = false;
    };
    std::map<std::string, Trust> trust;
    for (const KeyValue& kv : tenant_list->items) {
      const json t = json::parse(kv.value, nullptr, false);
      const std::string n = Str(Field(t, "metadata"), "name");
      const json& spec = Field(t, "spec");
      trust[n] = {Str(spec, "trust", "standard"), Str(spec, "trustDomain", n),
                  Field(spec, "exclusiveNodes") == true};
    }
    const auto trust_of = [&trust](const std::string& tenant) {
      auto it = trust.find(tenant);
      return it == trust.end() ? Trust{"standard", tenant, false} : it->second;
    };
    struct Gpu {
      int64_t used = 0, held = 0;
      std::set<std::string> sharers, mig;  // tenants holding a share of it, a MIG slice
    };
    struct Node {
      std::map<int64_t, Gpu> gpus;
      int64_t memory_mib = 0, unread = 0;
      std::set<std::string> tenants;  // with work running there
    };
    std::map<std::string, Node> nodes;
    for (const KeyValue& kv : listed->items) {
      const json w = json::parse(kv.value, nullptr, false);
      const json& status = Field(w, "status");
      const std::string phase = Str(status, "phase", "Pending");
      const bool pending = phase == "Pending";
      if (!pending && phase != "Scheduled" && phase != "Running") continue;
      const bool readable = Visible(*FindResource("workloads"), w, p, tenants, all);
      const json& finished = Field(status, "finishedPods");
      for (const json& a : jsonf::List(status, pending ? "nomination" : "assignments")) {
        // (A pod that completed gave its devices back.)
        if (!pending && finished.is_object() && finished.contains(Str(a, "pod"))) continue;
        const std::string node = Str(a, "node");
        if (node.empty() || (!only.empty() && node != only)) continue;
        const std::string tenant = Str(Field(w, "metadata"), "namespace");
        if (!pending) nodes[node].tenants.insert(tenant);
        for (const json& d : jsonf::List(a, "devices")) {
          const int64_t milli = Int(d, "gpuMilli");
          Gpu& gpu = nodes[node].gpus[Int(d, "index")];
          (pending ? gpu.held : gpu.used) += milli;
          if (pending) continue;
          if (d.contains("migSlice") || d.contains("migProfile"))
            gpu.mig.insert(tenant);
          else if (milli < 1000)
            gpu.sharers.insert(tenant);
          nodes[node].memory_mib += jsonf::HeldGpuMemoryMib(d);
          if (!readable) nodes[node].unread += milli;
        }
      }
    }
    // Who may use a GPU's free room, in words the caller may read ("" for anyone): a tenant
    // or trust domain the caller cannot read is "another".
    const auto readable_tenant = [&](const std::string& t) {
      return all || std::find(tenants.begin(), tenants.end(), t) != tenants.end();
    };
    const auto tenant_words = [&](const std::string& t) {
      return readable_tenant(t) ? "tenant " + t : std::string("another tenant");
    };
    const auto open_to = [&](const Node& n, const Gpu& g) -> std::string {
      if (!g.mig.empty()) {
        for (const std::string& t : g.mig)
          if (trust_of(t).level == "untrusted") return tenant_words(t) + " (untrusted)";
        return "tenants that are not untrusted";
      }
      if (g.sharers.empty()) return "";
      // (Pods placed under different trusts, a trust changed under them: closed to new ones.)
      std::set<std::string> keys;
      for (const std::string& t : g.sharers) {
        const Trust x = trust_of(t);
        keys.insert(x.level == "trusted" ? "domain:" + x.domain : "tenant:" + t);
      }
      if (keys.size() > 1) return "no one new (its sharers' trust changed under them)";
      const std::string key = *keys.begin();
      if (key.rfind("tenant:", 0) == 0) return tenant_words(key.substr(7));
      const std::string domain = key.substr(7);
      bool known = all;
      for (const auto& [t, x] : trust)
        if (x.level == "trusted" && x.domain == domain && readable_tenant(t)) known = true;
      return known ? "trust domain " + domain : std::string("another trust domain");
    };
    json items = json::array();
    for (const auto& [name, n] : nodes) {
      json gpus = json::array();
      for (const auto& [index, g] : n.gpus) {
        json gpu = {{"index", index}, {"gpuMilli", g.used}, {"heldMilli", g.held}};
        if (g.used < 1000)
          if (std::string to = open_to(n, g); !to.empty()) gpu["openTo"] = std::move(to);
        gpus.push_back(std::move(gpu));
      }
      std::string exclusive;  // (a node whose every free GPU is for its owner)
      for (const std::string& t : n.tenants)
        if (trust_of(t).exclusive) exclusive = tenant_words(t) + " (its exclusive node)";
      items.push_back({{"kind", "NodeAllocation"},
                       {"apiVersion", kGroupVersion},
                       {"metadata", {{"name", name}}},
                       {"gpus", std::move(gpus)},
                       {"gpuMemoryMiB", n.memory_mib},
                       {"unreadGpuMilli", n.unread}});
      if (!exclusive.empty()) items.back()["openTo"] = exclusive;
    }
    // (One node's, as a get of one object: nothing held there is all zeros.)
    if (!only.empty())
      return JsonResponse(200, items.empty() ? json{{"kind", "NodeAllocation"},
                                                    {"apiVersion", kGroupVersion},
                                                    {"metadata", {{"name", only}}},
                                                    {"gpus", json::array()},
                                                    {"gpuMemoryMiB", 0},
                                                    {"unreadGpuMilli", 0}}
                                             : items[0]);
    return JsonResponse(200, {{"kind", "NodeAllocationList"},
                              {"apiVersion", kGroupVersion},
                              {"metadata", {{"resourceVersion", std::to_string(listed->revision)}}},
                              {"items", std::move(items)}});
  }

  HttpResponse PendingWorkloads(const std::string& queue, const HttpRequest& req,
                                const Principal& p) {
    const auto readable = NamesReadable(p);
    int64_t limit = 1000, offset = 0;
    for (auto [key, out] : {std::pair{"limit", &limit}, std::pair{"offset", &offset}}) {
      if (!req.query.count(key)) continue;
      auto v = ParseNonNegativeInt(req.query.at(key));
      if (!v.ok() || *v > 100000)
        return StatusResponse(400, std::string(key) + ": expected an integer up to 100000");
      *out = *v;
    }
    auto queues = ReadAll(Prefix(*FindResource("queues"), ""));
    if (!queues.ok()) return ErrorFromStatus(queues.status());
    auto stored_flavors = ReadAll(Prefix(*FindResource("resourceflavors"), ""));
    if (!stored_flavors.ok()) return ErrorFromStatus(stored_flavors.status());
    std::vector<json> objects, flavors;
    for (const KeyValue& kv : *queues) objects.push_back(Materialize(kv));
    for (const KeyValue& kv : *stored_flavors) flavors.push_back(Materialize(kv));
    auto tree = QueueTreeFromObjects(objects, flavors);
    if (!tree.ok())
      return StatusResponse(409, "the queue tree is invalid: " + tree.status().message());
    std::map<std::string, const QueueSpec*> spec_of;
    for (const QueueSpec& q : tree->queues) spec_of[q.name] = &q;
    const auto find = [&](const std::string& name) -> const QueueSpec* {
      auto it = spec_of.find(name);
      return it == spec_of.end() ? nullptr : it->second;
    };
    const std::vector<std::string> subtree = Subtree(*tree, queue);
    if (subtree.empty()) return StatusResponse(404, "Queue '" + queue + "' not found");
    const std::set<std::string> in(subtree.begin(), subtree.end());
    const std::set<std::string> leaves = LeafQueues(*tree);

    auto workloads = ReadAll(Prefix(*FindResource("workloads"), ""));
    if (!workloads.ok()) return ErrorFromStatus(workloads.status());
    struct Waiting {
      // Work the scheduler found it could never admit as it is (status.reason Unschedulable):
      // listed last, with no place in its queue (Kueue keeps such work apart as inadmissible).
      bool inadmissible;
      int64_t priority, created, revision;
      std::string leaf;
      json obj;
    };
    std::vector<Waiting> waiting;
    for (const KeyValue& kv : *workloads) {
      // Most stored workloads run or have ended: skip them before parsing (objects are stored
      // as nlohmann dumps them, without spaces).
      if (kv.value.find("\"phase\":\"Pending\"") == std::string::npos &&
          kv.value.find("\"phase\":") != std::string::npos)
        continue;
      json obj = json::parse(kv.value, nullptr, false);
      // As the scheduler reads it: no phase is Pending.
      if (jsonf::Str(jsonf::Field(obj, "status"), "phase", "Pending") != "Pending") continue;
      const json& spec = jsonf::Field(obj, "spec");
      const json& meta = jsonf::Field(obj, "metadata");
      std::string leaf =
          WaitingQueue(leaves, jsonf::Str(spec, "queue"), jsonf::Str(meta, "namespace"));
      // Only leaves hold work: a workload naming an inner queue waits nowhere. One whose tenant
      // may not use the queue it names (any longer) is listed with no place, as inadmissible
      // work is, until the tenant is let back (its message says why).
      if (!in.count(leaf) || !leaves.count(leaf)) continue;
      const bool not_allowed = !TenantMayUse(jsonf::Str(meta, "namespace"), leaf, find).ok();
      if (jsonf::Field(spec, "active") == false) continue;  // deactivated: not in line
      const int64_t created = ParseTimestamp(jsonf::Str(meta, "creationTimestamp"));
      waiting.push_back(
          {not_allowed || jsonf::Str(jsonf::Field(obj, "status"), "reason") == "Unschedulable",
           jsonf::Int(spec, "priority"),
           created >= 0 ? created : std::numeric_limits<int64_t>::max(), kv.create_revision,
           std::move(leaf), std::move(obj)});
    }
    std::sort(waiting.begin(), waiting.end(), [](const Waiting& a, const Waiting& b) {
      return std::tuple(a.inadmissible, -a.priority, a.created, a.revision) <
             std::tuple(b.inadmissible, -b.priority, b.created, b.revision);
    });
    bool all = false;
    const std::vector<std::string> tenants = auth.ReadableTenants(p, &all);
    std::map<std::string, int64_t> in_leaf;
    json items = json::array();
    int64_t shown = 0, unread = 0;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const Waiting& w = waiting[i];
      const int64_t place = w.inadmissible ? -1 : in_leaf[w.leaf]++;
      const json& meta = jsonf::Field(w.obj, "metadata");
      const std::string ns = jsonf::Str(meta, "namespace");
      if (!all && std::find(tenants.begin(), tenants.end(), ns) == tenants.end()) {
        ++unread;  // (counted in the positions, and said to be there: a tenant's view has gaps)
        continue;
      }
      if (shown++ < offset || static_cast<int64_t>(items.size()) >= limit) continue;
      items.push_back(
          {{"namespace", ns},
           {"name", jsonf::Str(meta, "name")},
           {"queue", w.leaf},
           {"priority", w.priority},
           {"position", static_cast<int64_t>(i)},
           {"positionInQueue", place},
           {"inadmissible", w.inadmissible},
           {"creationTimestamp", jsonf::Str(meta, "creationTimestamp")},
           {"message",
            readable ? ConcealText(jsonf::Str(jsonf::Field(w.obj, "status"), "message"), readable)
                     : jsonf::Str(jsonf::Field(w.obj, "status"), "message")}});
    }
    return JsonResponse(200, {{"kind", "PendingWorkloadList"},
                              {"apiVersion", kGroupVersion},
                              {"queue", queue},
                              {"total", shown},
                              {"unreadTotal", unread},
                              {"items", items}});
  }

  // The events about workloads that `p` may read (those of namespaces whose workloads it may
  // list), in namespace `ns` ("": all), of one workload where a fieldSelector names it.
  HttpResponse Events(const std::string& ns, const HttpRequest& req, const Principal& p,
                      bool watch) {
    // (A node reads the workloads assigned to it, not others' histories.)
    if (!p.node.empty()) return StatusResponse(403, "nodes do not read events");
    std::string table;
    RowObject row_object = RowObject::kMetadata;
    if (std::optional<HttpResponse> bad = TableAsked(req, &table, &row_object)) return *bad;
    std::string name, in_ns = ns;
    std::vector<FieldRequirement> terms;
    bool contradicts = false;
    if (auto it = req.query.find("fieldSelector"); it != req.query.end() && !it->second.empty()) {
      // As kubectl writes it; every term must hold.
      auto parsed =
          ParseFieldTerms(it->second,
                          {"metadata.name", "metadata.namespace", "involvedObject.name",
                           "involvedObject.namespace", "involvedObject.kind", "reason", "type"},
                          "events");
      if (!parsed.ok()) return StatusResponse(400, parsed.status().message());
      terms = std::move(*parsed);
      // (One workload's, or one namespace's, are read as such; another namespace than the
      // path's selects nothing.)
      for (const FieldRequirement& t : terms) {
        if (t.field == "involvedObject.kind" && t.value != "Workload")
          return StatusResponse(400, "fieldSelector: '" + t.field + (t.equal ? "=" : "!=") +
                                         t.value + "': events are about Workloads alone");
        if (!t.equal) continue;
        if (t.field == "involvedObject.name") {
          if (!name.empty() && name != t.value) contradicts = true;
          name = t.value;
        }
        if (t.field == "involvedObject.namespace" || t.field == "metadata.namespace") {
          if (!in_ns.empty() && in_ns != t.value) contradicts = true;
          if (in_ns.empty()) in_ns = t.value;
        }
      }
    }
    // (Denied, it says events: that is what was asked for; a trial read "may not list
    // workloads" as an answer to another request.)
    if (!in_ns.empty())
      if (Status allowed = auth.Check(p, Verb::kList, "workloads", in_ns, "", false); !allowed.ok())
        return ErrorFromStatus(Status(allowed.code(), "user '" + p.user +
                                                          "' may not list events in tenant " +
                                                          in_ns + " (nor its workloads)"));
    const auto readable = NamesReadable(p);
    // What the list or the watch shows: every term of the selector, in namespaces `p` may read.
    // (A watch calls it under the recorder's lock only: the cache needs no lock of its own.)
    auto seen = std::make_shared<std::map<std::string, bool>>();
    auto selects = [this, p, in_ns, terms, contradicts, seen](const json& e) {
      if (contradicts) return false;
      const json& about = e["involvedObject"];
      const std::string e_ns = Str(about, "namespace");
      if ((!in_ns.empty() && e_ns != in_ns) || !MatchesFields(e, terms)) return false;
      auto v = seen->find(e_ns);
      if (v == seen->end())
        v = seen->emplace(e_ns, auth.Check(p, Verb::kList, "workloads", e_ns, "", false).ok())
                .first;
      return v->second;
    };
    if (watch) {
      uint64_t after = 0;
      if (auto rv = req.query.find("resourceVersion");
          rv != req.query.end() && !rv->second.empty()) {
        auto v = ParseNonNegativeInt(rv->second);
        if (!v.ok()) return StatusResponse(400, "resourceVersion: " + v.status().message());
        after = static_cast<uint64_t>(*v);
      }
      // (A one-row Table each, where kubectl asked for tables; other tenants' names concealed,
      // where its reader may not read them.)
      std::function<json(const json&)> shape;
      if (!table.empty() || readable)
        shape = [this, table, row_object, readable](const json& e) {
          json shown = e;
          if (readable) ConcealEvent(shown, readable);
          if (table.empty()) return shown;
          return ObjectTable("Event", {shown}, clock.NowMs(), table, row_object,
                             jsonf::Str(Field(shown, "metadata"), "resourceVersion"), {});
        };
      HttpResponse r;
      r.stream = std::make_shared<EventWatch>(events, after, selects, std::move(shape));
      return r;
    }
    uint64_t version = 0;
    json items = json::array();
    if (!contradicts)
      for (json& e : events.List(in_ns, name, &version))
        if (selects(e)) {
          if (readable) ConcealEvent(e, readable);
          items.push_back(std::move(e));
        }
    if (!table.empty())  // (kubectl's columns of events: LAST SEEN, TYPE, REASON, ...)
      return JsonResponse(200, ObjectTable("Event", items.get<std::vector<json>>(), clock.NowMs(),
                                           table, row_object, std::to_string(version), {}));
    return JsonResponse(200, {{"kind", "EventList"},
                              {"apiVersion", kGroupVersion},
                              {"metadata", {{"resourceVersion", std::to_string(version)}}},
                              {"items", std::move(items)}});
  }

  // Whose workload names `p` may read in what the scheduler wrote (Conceal): nullptr where it
  // reads every tenant's (or is a node, which reads no messages).
  std::function<bool(const std::string&)> NamesReadable(const Principal& p) {
    bool all = false;
    std::vector<std::string> tenants = auth.ReadableTenants(p, &all);
    if (all || !p.node.empty()) return nullptr;
    return [set = std::set<std::string>(tenants.begin(), tenants.end())](const std::string& t) {
      return set.count(t) > 0;
    };
  }
  // A workload as `readable` lets its reader see it: other tenants' names in its status told as
  // "another tenant's workload".
  static void ConcealStatus(json& obj, const std::function<bool(const std::string&)>& readable) {
    if (readable && obj.is_object() && obj.contains("status")) Conceal(obj["status"], readable);
  }

  // An event as its reader sees it: what it says (message, note), not whom it is about.
  static void ConcealEvent(json& e, const std::function<bool(const std::string&)>& readable) {
    if (!e.is_object()) return;
    for (const char* field : {"message", "note", "related"})
      if (e.contains(field)) Conceal(e[field], readable);
  }

  // Whether principal `p` may see this object in a list or watch.
  bool Visible(const ResourceInfo& info, const json& obj, const Principal& p,
               const std::vector<std::string>& tenants, bool all) {
    if (std::string(info.plural) != "workloads") return true;
    if (!p.node.empty()) return AssignedTo(obj, p.node);
    if (all) return true;
    const std::string ns = Str(Field(obj, "metadata"), "namespace");
    return std::find(tenants.begin(), tenants.end(), ns) != tenants.end();
  }

  HttpResponse List(const ResourceInfo& info, const std::string& ns, const HttpRequest& req,
                    const Principal& p, bool watch) {
    auto parsed_selector =
        ParseSelector(req.query.count("labelSelector") ? req.query.at("labelSelector") : "");
    if (!parsed_selector.ok()) return StatusResponse(400, parsed_selector.status().message());
    const std::vector<LabelRequirement> selector = std::move(*parsed_selector);
    auto parsed_fields = ParseFieldSelector(
        info, req.query.count("fieldSelector") ? req.query.at("fieldSelector") : "");
    if (!parsed_fields.ok()) return StatusResponse(400, parsed_fields.status().message());
    const std::vector<FieldRequirement> fields = std::move(*parsed_fields);
    bool all = false;
    std::vector<std::string> tenants = auth.ReadableTenants(p, &all);
    if (!ns.empty()) {
      all = false;
      tenants = {ns};
    }
    const std::string prefix = Prefix(info, ns);
    if (watch) {
      // No version, or 0: from the current state (sent first as ADDED events; Watcher takes -1
      // so); a version: what changed after it.
      int64_t after = -1;
      if (req.query.count("resourceVersion") && !req.query.at("resourceVersion").empty()) {
        auto rv = ParseNonNegativeInt(req.query.at("resourceVersion"));
        if (!rv.ok()) return StatusResponse(400, "resourceVersion: " + rv.status().message());
        if (*rv > 0) after = *rv;
      }
      auto filter = [this, info, p, tenants, all, selector, fields,
                     readable = std::string(info.plural) == "workloads"
                                    ? NamesReadable(p)
                                    : nullptr](const WatchEvent& e, json* obj) {
        *obj = Materialize(e.kv);
        if (!Visible(info, *obj, p, tenants, all)) return Watcher::Seen::kHidden;
        if (!MatchesSelector(*obj, selector) || !MatchesFields(*obj, fields))
          return Watcher::Seen::kUnselected;
        ConcealStatus(*obj, readable);  // (what is sent only)
        return Watcher::Seen::kSelected;
      };
      // (As a one-row Table each, where kubectl asked for tables: it prints a row an event.)
      std::function<json(const json&)> shape;
      std::string table;
      RowObject row_object;
      TableAsked(req, &table, &row_object);  // (checked before)
      if (!table.empty()) {
        // (Its context as the watch opens: health records and queues change seldom, and the
        // rows are made on the store's committer thread, which must not read the store.)
        shape = [this, kind = std::string(info.kind), table, row_object,
                 context = TableContextFor(info.kind)](const json& obj) {
          return ObjectTable(kind, {obj}, clock.NowMs(), table, row_object,
                             jsonf::Str(Field(obj, "metadata"), "resourceVersion"), context);
        };
      }
      auto w = std::make_shared<Watcher>(
          store, prefix, after, filter,
          [this](Watcher* self) {
            std::lock_guard<std::mutex> lock(watchers_mu);
            for (auto it = watchers.begin(); it != watchers.end(); ++it) {
              if (it->get() == self) {
                watchers.erase(it);
                break;
              }
            }
          },
          std::move(shape));
      {
        std::lock_guard<std::mutex> lock(watchers_mu);
        watchers.insert(w);
      }
      HttpResponse r;
      r.stream = w;
      return r;
    }
    int limit = 0;
    if (req.query.count("limit")) {
      auto l = ParseNonNegativeInt(req.query.at("limit"));
      if (!l.ok() || *l > 100000)
        return StatusResponse(400, "limit: expected an integer up to 100000");
      limit = static_cast<int>(*l);
    }
    std::string after;
    if (req.query.count("continue") && !req.query.at("continue").empty()) {
      auto key = HexDecode(req.query.at("continue"));
      if (!key || key->rfind(prefix, 0) != 0)
        return StatusResponse(400, "continue: not a token of this list");
      after = *key;
    }
    // A page holds `limit` items the principal may see, so the store is read on until it has
    // them; the token names the last item returned, never one that was filtered out (another
    // tenant's workload).
    json items = json::array();
    std::string last_returned;
    bool more = false;
    int64_t revision = -1;
    const auto readable = std::string(info.plural) == "workloads" ? NamesReadable(p) : nullptr;
    for (bool full = false; !full;) {
      auto listed = store.List(prefix, after, limit);
      if (!listed.ok()) return ErrorFromStatus(listed.status());
      if (revision < 0) revision = listed->revision;
      for (size_t i = 0; i < listed->items.size() && !full; ++i) {
        const KeyValue& kv = listed->items[i];
        after = kv.key;
        json obj = Materialize(kv);
        if (!Visible(info, obj, p, tenants, all) || !MatchesSelector(obj, selector) ||
            !MatchesFields(obj, fields))
          continue;
        ConcealStatus(obj, readable);
        items.push_back(std::move(obj));
        last_returned = kv.key;
        full = limit > 0 && items.size() == static_cast<size_t>(limit);
        more = full && (i + 1 < listed->items.size() || listed->more);
      }
      if (!listed->more || listed->items.empty()) break;
    }
    // The built-in unqueued, last on the last page, where the scheduler keeps it (no stored
    // queue has its name).
    // (Not beside a stored one the scheduler has not yet seen; on a page already full, the
    // next page, empty of stored queues, has it.)
    if (std::string(info.kind) == "Queue" && !more &&
        !store.Get(Key(info, "", kUnqueuedQueue)).ok())
      if (auto builtin = store.Get(kBuiltinQueueKey); builtin.ok()) {
        json obj = Materialize(*builtin);
        if (!MatchesSelector(obj, selector) || !MatchesFields(obj, fields)) {
        } else if (limit > 0 && items.size() >= static_cast<size_t>(limit)) {
          more = !last_returned.empty();
        } else {
          items.push_back(std::move(obj));
        }
      }
    json meta = {{"resourceVersion", std::to_string(revision)}};
    if (more) meta["continue"] = HexEncode(last_returned);
    std::string table;
    RowObject row_object;
    TableAsked(req, &table, &row_object);  // (checked before)
    if (!table.empty()) {
      json shown = ObjectTable(info.kind, items.get<std::vector<json>>(), clock.NowMs(), table,
                               row_object, std::to_string(revision), TableContextFor(info.kind));
      if (more) shown["metadata"]["continue"] = meta["continue"];
      return JsonResponse(200, shown);
    }
    return JsonResponse(200, {{"kind", std::string(info.kind) + "List"},
                              {"apiVersion", kGroupVersion},
                              {"metadata", meta},
                              {"items", items}});
  }

  Result<json> DecodeBody(const HttpRequest& req, bool patch) {
    std::string type = req.Header("content-type");
    type = type.substr(0, type.find(';'));
    if (patch) {
      if (type != "application/merge-patch+json") {
        return Status(StatusCode::kInvalidArgument,
                      "415:PATCH needs Content-Type application/merge-patch+json");
      }
    } else if (type != "application/json" && !type.empty()) {
      return Status(StatusCode::kInvalidArgument,
                    "415:unsupported media type '" + type + "': send application/json");
    }
    // (A key given twice in one object is refused, as the Kubernetes API's strict field
    // validation refuses it: the last would win silently.)
    // (Where, and what: a trial's 1e400 read as a bare "malformed JSON body".)
    std::string why;
    json j = jsonf::ParseBody(req.body, &why);
    if (j.is_discarded()) return Status(StatusCode::kInvalidArgument, "400:" + why);
    return j;
  }

  static HttpResponse BodyError(const Status& st) {
    const std::string& m = st.message();
    if (m.size() > 4 && m[3] == ':') return StatusResponse(std::stoi(m.substr(0, 3)), m.substr(4));
    return ErrorFromStatus(st);
  }

  // A workload that names a PriorityClass takes its value into spec.priority when it is
  // written, as Kubernetes does for pods: later changes to the class do not move it. The class
  // must exist, and a priority given beside it must be the class's.
  // A workload naming a queue its tenant may not use (the queues' spec.tenants) is refused
  // when written; the scheduler checks again each cycle, as queues change.
  // What a workload's spec names new (`stored`: what it was, or null for a create): a queue name
  // no queue could take would be waited for forever, and a MIG profile past a GPU's 7 compute
  // slices could never be placed. (Asked of new specs only: a workload stored by an older
  // server still parses, and its status can still be written.)
  static Status CheckNewSpec(const json& obj, const json* stored) {
    const json& spec = Field(obj, "spec");
    const json* was = stored ? &Field(*stored, "spec") : nullptr;
    if (const std::string queue = Str(spec, "queue");
        !queue.empty() && (!was || Field(*was, "queue") != Field(spec, "queue")))
      if (Status s = ValidateName(queue); !s.ok())
        return Status(StatusCode::kInvalidArgument, "spec.queue: " + s.message());
    if (!was || Field(*was, "podSets") != Field(spec, "podSets")) {
      const json& sets = Field(spec, "podSets");
      for (size_t i = 0; sets.is_array() && i < sets.size(); ++i)
        if (const std::string mig = Str(Field(sets[i], "devices"), "mig"); !mig.empty())
          if (Status s = ValidateMigProfileName(mig); !s.ok())
            return Status(StatusCode::kInvalidArgument,
                          "spec.podSets[" + std::to_string(i) + "].devices.mig: " + s.message());
    }
    return Status::Ok();
  }

  Status CheckQueueAccess(const json& obj) {
    const std::string queue = jsonf::Str(jsonf::Field(obj, "spec"), "queue");
    const std::string tenant = jsonf::Str(jsonf::Field(obj, "metadata"), "namespace");
    if (queue.empty()) return Status::Ok();
    std::map<std::string, QueueSpec> read;  // the queues on its path, as far as they exist
    Status failed = Status::Ok();           // a queue that could not be read: refuse
    auto find = [&](const std::string& name) -> const QueueSpec* {
      if (auto it = read.find(name); it != read.end()) return &it->second;
      auto kv = store.Get(Key(*FindResource("queues"), "", name));
      if (!kv.ok()) {
        if (kv.status().code() != StatusCode::kNotFound && failed.ok()) failed = kv.status();
        return nullptr;
      }
      json q = json::parse(kv->value, nullptr, false);
      json spec = jsonf::Field(q, "spec").is_object() ? q["spec"] : json::object();
      spec.erase("budget");
      spec["name"] = name;
      YamlMap m(Doc::FromJson(spec), "spec", "stored queue " + name);
      auto parsed = ParseQueueSpec(m);
      if (!parsed.ok()) {
        if (failed.ok()) failed = Status(StatusCode::kInternal, parsed.status().message());
        return nullptr;
      }
      return &(read[name] = std::move(*parsed));
    };
    // Work waits in leaves (as Kueue's in LocalQueues): an inner queue is refused now rather
    // than waited in nowhere (said first: no tenant may wait there, whoever it is).
    ASSIGN_OR_RETURN(std::string children, ChildrenOf(queue));
    if (!children.empty())
      return InvalidArgument("spec.queue: queue " + queue + " has child queues (" + children +
                             "); work waits in a leaf queue");
    Status may = TenantMayUse(tenant, queue, find);
    if (!failed.ok()) return Status(failed.code(), "spec.queue: " + failed.message());
    if (!may.ok()) return Status(may.code(), "spec.queue: " + may.message());
    return Status::Ok();
  }

  // A queue's quotas name stored ResourceFlavors (or the built-in catch-all): one that names
  // none is refused when written, as one cannot be deleted while a queue names it.
  // Its flavorOrder likewise.
  Status CheckQuotaFlavors(const json& queue) {
    std::vector<std::pair<std::string, std::string>> named;  // (field, flavour)
    const json& quotas = Field(Field(queue, "spec"), "quotas");
    if (quotas.is_object())
      for (const auto& [flavor, quota] : quotas.items())
        if (flavor != kCpuQuota && flavor != kMemoryQuota)
          named.push_back({"spec.quotas." + flavor, flavor});
    const json& order = Field(Field(queue, "spec"), "flavorOrder");
    if (order.is_array())
      for (size_t i = 0; i < order.size(); ++i) {
        const std::string field = "spec.flavorOrder[" + std::to_string(i) + "]";
        if (!order[i].is_string())
          return InvalidArgument(field + ": expected a flavour name (a string), got " +
                                 order[i].dump());
        named.push_back({field, order[i]});
      }
    for (const auto& [field, flavor] : named) {
      if (flavor == kDefaultFlavor) continue;
      auto kv = store.Get(Key(*FindResource("resourceflavors"), "", flavor));
      if (kv.ok()) continue;
      if (kv.status().code() != StatusCode::kNotFound) return kv.status();
      return InvalidArgument(field + ": ResourceFlavor '" + flavor +
                             "' does not exist (create it first, or use '" + kDefaultFlavor +
                             "', every GPU no other flavour takes)");
    }
    return Status::Ok();
  }

  // The stored queue tree as the scheduler reads it, with `queue` written in place of its
  // stored version (null: as stored, less `removed`).
  Result<AdmissionConfig> QueueTreeWith(const json& queue, const std::string& removed = "") {
    ASSIGN_OR_RETURN(std::vector<KeyValue> queues, ReadAll(Prefix(*FindResource("queues"), "")));
    ASSIGN_OR_RETURN(std::vector<KeyValue> flavors,
                     ReadAll(Prefix(*FindResource("resourceflavors"), "")));
    const std::string name = queue.is_null() ? removed : Str(Field(queue, "metadata"), "name");
    std::vector<json> objects, stored_flavors;
    if (!queue.is_null()) objects.push_back(queue);
    for (const KeyValue& kv : queues) {
      json o = Materialize(kv);
      if (Str(Field(o, "metadata"), "name") != name) objects.push_back(std::move(o));
    }
    for (const KeyValue& kv : flavors) stored_flavors.push_back(Materialize(kv));
    return QueueTreeFromObjects(objects, stored_flavors);
  }

  // A queue write that would leave the tree invalid (a cycle, an unknown parent, a lending
  // limit above the guarantee, children guaranteed more than their parent) is refused, since
  // the scheduler admits nothing anywhere while its tree is invalid; so is one that gives
  // children to a leaf with work running in it (that work would be charged to no queue). (A
  // tree already invalid is not made an obstacle to other writes: only one whose error is this
  // queue's or its parent's is refused.)
  Status CheckQueueTree(const json& queue) {
    auto after = QueueTreeWith(queue);
    const std::string name = Str(Field(queue, "metadata"), "name");
    if (!after.ok()) {
      if (after.status().code() != StatusCode::kInvalidArgument) return after.status();
      // (Refused if the tree was valid, or if the error is this queue's or its parent's — a
      // parent's guarantee is checked against its children's.)
      const std::string& message = after.status().message();
      const bool mine = message.rfind("Queue '" + name + "'", 0) == 0;
      const std::string parent = Str(Field(queue, "spec"), "parent");
      const bool parents = !parent.empty() && message.rfind("Queue '" + parent + "'", 0) == 0;
      if (!mine && !parents && !QueueTreeWith(json()).ok()) return Status::Ok();
      // A child's guarantee that takes its siblings past the parent's is said of the child's
      // field, which is the one written (a user-style review found the parent's named).
      const std::string over = "': spec.quotas.";
      const std::string children = ".guaranteed: its children are ";
      if (const size_t at = message.find(over), is = message.find(children);
          parents && at != std::string::npos && is != std::string::npos && is > at) {
        std::string tail =
            message.substr(is + children.size());  // "guaranteed 64, more than its 32"
        if (const size_t its = tail.find("more than its "); its != std::string::npos)
          tail.replace(its, std::string("more than its ").size(), "more than " + parent + "'s ");
        // (Moved there from another parent, the move is what is refused.)
        if (auto stored = store.Get(Key(*FindResource("queues"), "", name)); stored.ok()) {
          const json was = json::parse(stored->value, nullptr, false);
          if (Str(Field(was, "spec"), "parent") != parent)
            return InvalidArgument("Queue '" + name + "': spec.parent: moved under queue '" +
                                   parent + "', its children would be " + tail);
        }
        // (Named as the queue's own errors are: "Queue 'x': spec...".)
        return InvalidArgument("Queue '" + name + "': spec.quotas." +
                               message.substr(at + over.size(), is - at - over.size()) +
                               ".guaranteed: with it, the children of queue '" + parent + "' are " +
                               tail);
      }
      return InvalidArgument(mine ? message : "it would make the queue tree invalid: " + message);
    }
    const std::string parent = Str(Field(queue, "spec"), "parent");
    if (parent.empty()) return Status::Ok();
    auto before = QueueTreeWith(json());
    if (!before.ok() || !LeafQueues(*before).count(parent)) return Status::Ok();
    // (Work there only because its tenant is named so goes back to unqueued, where it ran
    // before that queue was made: a trial's hierarchy file, applied parents first, made its
    // tenant's queue a leaf that took its running work, and could then neither give it a child
    // nor be deleted. QueueParentWarnings says so.)
    ASSIGN_OR_RETURN(std::string running, RunningIn(parent, *before, false, Named::kNamed));
    // (Nor work waiting that names it: it would wait on a queue with children for good.)
    ASSIGN_OR_RETURN(std::string waiting, RunningIn(parent, *before, true, Named::kNamed));
    if (running.empty() && !waiting.empty())
      return FailedPrecondition("spec.parent: queue '" + parent +
                                "' is a leaf with work: " + waiting +
                                " and name it (a queue with children holds no work of its own); "
                                "set their spec.queue to another queue, or delete them, first");
    if (running.empty()) return Status::Ok();
    return FailedPrecondition("spec.parent: queue '" + parent + "' is a leaf with work: " +
                              running + " (a queue with children holds no work of its own)");
  }

  // The stored queues that name `name` as their parent (but not those above it in a cycle a
  // store written by hand may hold: deleting it breaks the cycle).
  Result<std::string> ChildrenOf(const std::string& name) {
    ASSIGN_OR_RETURN(std::vector<KeyValue> queues, ReadAll(Prefix(*FindResource("queues"), "")));
    std::map<std::string, std::string> parent_of;
    for (const KeyValue& kv : queues) {
      const json q = Materialize(kv);
      parent_of[Str(Field(q, "metadata"), "name")] = Str(Field(q, "spec"), "parent");
    }
    std::set<std::string> above;
    for (std::string q = parent_of[name]; !q.empty() && above.insert(q).second; q = parent_of[q]) {
    }
    std::string children;
    for (const auto& [q, parent] : parent_of)
      if (parent == name && !above.count(q)) children += (children.empty() ? "" : ", ") + q;
    return children;
  }

  // The work that holds devices charged to leaf `name` of `tree` (the first few, "N
  // workload(s) ... hold devices"; empty: none), or (`pending`) the work that waits in it.
  // `named`: only work whose spec.queue names it (kNamed), or only work there because its
  // tenant has that name and it names no queue (kByTenant).
  enum class Named { kAny, kNamed, kByTenant };
  Result<std::string> RunningIn(const std::string& name, const AdmissionConfig& tree,
                                bool pending = false, Named named = Named::kAny) {
    const std::set<std::string> leaves = LeafQueues(tree);
    ASSIGN_OR_RETURN(std::vector<KeyValue> workloads,
                     ReadAll(Prefix(*FindResource("workloads"), "")));
    std::string running;
    int count = 0;
    for (const KeyValue& kv : workloads) {
      // (Most stored workloads are of other phases: skipped before parsing.)
      if (pending ? kv.value.find("\"phase\":\"Pending\"") == std::string::npos
                  : kv.value.find("\"phase\":\"Running\"") == std::string::npos &&
                        kv.value.find("\"phase\":\"Scheduled\"") == std::string::npos)
        continue;
      const json w = Materialize(kv);
      const std::string phase = Str(Field(w, "status"), "phase");
      if (pending ? phase != "Pending" : phase != "Running" && phase != "Scheduled") continue;
      const json& meta = Field(w, "metadata");
      const std::string queue = Str(Field(w, "spec"), "queue");
      if (WaitingQueue(leaves, queue, Str(meta, "namespace")) != name ||
          (named == Named::kNamed && queue != name) ||
          (named == Named::kByTenant && !queue.empty()))
        continue;
      if (++count <= 3)
        running += (running.empty() ? "" : ", ") + Str(meta, "namespace") + "/" + Str(meta, "name");
    }
    if (count == 0) return std::string();
    return std::to_string(count) +
           (pending ? " pending workload(s) wait in it ("
                    : " workload(s) charged to it hold devices (") +
           running + (count > 3 ? ", ..." : "") + ")";
  }

  // Why a queue may not be deleted now (empty: it may): queues below it, work running charged
  // to it (it stays while they hold devices, as Kueue holds a ClusterQueue with a finalizer
  // while it has admitted workloads), or work waiting in it: deleted, the queue's pending work
  // would move to `unqueued` (its tenant's queue gone) and run there, past its quota and a
  // stopPolicy's hold, or wait on a queue that does not exist.
  Result<std::string> QueueInUse(const std::string& name) {
    ASSIGN_OR_RETURN(std::string children, ChildrenOf(name));
    if (!children.empty()) return "it is the parent of queue(s) " + children;
    auto tree = QueueTreeWith(json());
    if (!tree.ok()) return std::string();  // (nothing runs through an invalid tree's queues)
    // (Both said, so that one answer lists all that holds it.)
    ASSIGN_OR_RETURN(std::string running, RunningIn(name, *tree));
    ASSIGN_OR_RETURN(std::string waiting, RunningIn(name, *tree, /*pending=*/true));
    if (!running.empty() && !waiting.empty())
      return running + ", and " + waiting +
             "; let the first finish or delete them, and move or delete the others, first";
    if (!running.empty()) return running + "; delete them or let them finish first";
    if (!waiting.empty())
      return waiting + "; delete them, or set their spec.queue to another queue, first";
    return std::string();
  }

  // Why Tenant `name` may not be deleted: the workloads it holds ("" if none). Its work would
  // be left in the store with no tenant to charge or isolate it by (stopped by the scheduler,
  // and started again should a tenant of that name come back), so, as a queue in use, it
  // stays until they are gone (Kubernetes deletes a namespace's objects with it; Fabrica asks
  // for that to be done first, so no one loses work by deleting a tenant object).
  Result<std::string> TenantInUse(const std::string& name) {
    ASSIGN_OR_RETURN(ListResult work, store.List(Prefix(*FindResource("workloads"), name), "", 0));
    if (work.items.empty()) return std::string();
    std::string list;
    int shown = 0;
    for (const KeyValue& kv : work.items) {
      if (++shown > 5) {
        list += ", ...";
        break;
      }
      const json w = json::parse(kv.value, nullptr, false);
      list += (list.empty() ? "" : ", ") + Str(Field(w, "metadata"), "name");
    }
    return "it holds " + std::to_string(work.items.size()) + " workload(s) (" + list +
           "); delete them first (fabctl delete workloads --all -n " + name + ")";
  }

  // The queues whose quotas or flavorOrder name a flavour, for refusing its deletion.
  Result<std::vector<std::string>> QueuesNaming(const std::string& flavor) {
    ASSIGN_OR_RETURN(ListResult queues, store.List(Prefix(*FindResource("queues"), ""), "", 0));
    std::vector<std::string> out;
    for (const KeyValue& kv : queues.items) {
      const json q = json::parse(kv.value, nullptr, false);
      const json& quotas = Field(Field(q, "spec"), "quotas");
      const json& order = Field(Field(q, "spec"), "flavorOrder");
      if ((quotas.is_object() && quotas.contains(flavor)) ||
          (order.is_array() && std::find(order.begin(), order.end(), flavor) != order.end()))
        out.push_back(Str(Field(q, "metadata"), "name"));
    }
    return out;
  }

  // The PriorityClass with spec.globalDefault true ("" where none), other than `except`.
  Result<std::string> GlobalDefaultClass(const std::string& except = "") {
    ASSIGN_OR_RETURN(std::vector<KeyValue> classes,
                     ReadAll(Prefix(*FindResource("priorityclasses"), "")));
    for (const KeyValue& kv : classes) {
      const json c = Materialize(kv);
      const std::string name = Str(Field(c, "metadata"), "name");
      if (name != except && Field(Field(c, "spec"), "globalDefault") == true) return name;
    }
    return std::string();
  }

  // One PriorityClass at most is the global default (as Kubernetes'): a second is refused.
  Status CheckOneGlobalDefault(const json& cls) {
    if (Field(Field(cls, "spec"), "globalDefault") != true) return Status::Ok();
    ASSIGN_OR_RETURN(std::string other, GlobalDefaultClass(Str(Field(cls, "metadata"), "name")));
    if (other.empty()) return Status::Ok();
    return InvalidArgument("spec.globalDefault: priority class '" + other +
                           "' is the global default already; set its globalDefault to false "
                           "first");
  }

  // `creating`: a workload created without a class or a priority takes the globalDefault
  // class's, where its tenant may use it (as Kubernetes' Priority admission).
  Status ResolvePriorityClass(json& obj, bool creating = false) {
    json& spec = obj["spec"];
    // An empty name is no class, as in Kubernetes (templates write `priorityClassName: ""`;
    // a user-style trial's was refused as a class '' that does not exist).
    if (spec.is_object() && spec.contains("priorityClassName") && spec["priorityClassName"] == "")
      spec.erase("priorityClassName");
    if (creating && spec.is_object() && !spec.contains("priorityClassName") &&
        !spec.contains("priority")) {
      ASSIGN_OR_RETURN(std::string fallback, GlobalDefaultClass());
      if (!fallback.empty()) {
        json with = obj;
        with["spec"]["priorityClassName"] = fallback;
        if (ResolvePriorityClass(with).ok()) obj = std::move(with);
      }
      return Status::Ok();
    }
    if (!spec.is_object() || !spec.contains("priorityClassName")) return Status::Ok();
    const std::string name = Str(spec, "priorityClassName");
    auto kv = store.Get(Key(*FindResource("priorityclasses"), "", name));
    if (!kv.ok() && kv.status().code() == StatusCode::kNotFound)
      return InvalidArgument("spec.priorityClassName: priority class '" + name +
                             "' does not exist");
    if (!kv.ok()) return kv.status();
    const json cls = json::parse(kv->value, nullptr, false);
    const json& value = Field(Field(cls, "spec"), "value");
    if (!value.is_number_integer())
      return Status(StatusCode::kInternal, "priority class " + name + " has no value");
    if (const json& allowed = Field(Field(cls, "spec"), "tenants"); allowed.is_array()) {
      const std::string tenant = Str(Field(obj, "metadata"), "namespace");
      if (std::find(allowed.begin(), allowed.end(), tenant) == allowed.end()) {
        std::string list;
        for (const json& t : allowed) list += (list.empty() ? "" : ", ") + t.get<std::string>();
        return Status(StatusCode::kPermissionDenied,
                      "spec.priorityClassName: tenant " + tenant + " may not use priority class '" +
                          name + "' (its spec.tenants: " + (list.empty() ? "none" : list) + ")");
      }
    }
    const json& given = Field(spec, "priority");
    if (!given.is_null() && given != value)
      return InvalidArgument("spec.priority: " + given.dump() + " differs from priority class '" +
                             name + "' (" + value.dump() +
                             "): set spec.priorityClassName to null with it to lower a priority "
                             "without a class");
    spec["priority"] = value;
    // Its preemption policy too, where the class sets one (a workload may ask Never of itself).
    if (const json& policy = Field(Field(cls, "spec"), "preemptionPolicy"); policy.is_string()) {
      const json& asked = Field(spec, "preemptionPolicy");
      if (!asked.is_null() && asked != policy && policy == "Never")
        return InvalidArgument("spec.preemptionPolicy: " + asked.dump() +
                               " differs from priority class '" + name + "' (Never)");
      if (asked.is_null() || policy == "Never") spec["preemptionPolicy"] = policy;
    }
    return Status::Ok();
  }

  // A workload's priority comes from a PriorityClass: only those who may create priority
  // classes (platform admins) set spec.priority directly, as Kubernetes' Priority admission
  // takes it from the class (a user-style review gave a tenant's work priority 1000000, past
  // every class, to preempt other queues' work). 0 or below, no more than it had (`stored`'s)
  // and a value its class gave pass.
  // Whether `p` administers the platform (may create PriorityClasses).
  bool PlatformAdmin(const Principal& p) const {
    return auth.Check(p, Verb::kCreate, "priorityclasses", "", "").ok();
  }

  Status CheckRawPriority(const json& obj, const json* stored, const Principal& p) const {
    const json& spec = Field(obj, "spec");
    const json& given = Field(spec, "priority");
    // (Lowering one's own work takes nothing from anyone: 0 or below, or below what it had.)
    if (spec.contains("priorityClassName") || !given.is_number_integer() || given <= 0)
      return Status::Ok();
    if (stored)
      if (const json& had = Field(Field(*stored, "spec"), "priority");
          had.is_number_integer() && given <= had)
        return Status::Ok();
    if (PlatformAdmin(p)) return Status::Ok();
    return Status(StatusCode::kPermissionDenied,
                  "spec.priority: " + given.dump() + " set directly; only a platform admin " +
                      "sets a priority without a class: name one in spec.priorityClassName " +
                      "(fabctl get priorityclasses)");
  }

  // The GPUs (milli) charged to queue `name` by its running work that may not be preempted.
  int64_t PinnedGpuMilli(const std::string& name) {
    auto list = store.List("/registry/workloads/", "", 0);
    if (!list.ok()) return 0;
    int64_t held = 0;
    for (const KeyValue& kv : list->items) {
      if (kv.value.find("\"preemptible\":false") == std::string::npos) continue;
      const json w = json::parse(kv.value, nullptr, false);
      const json& status = Field(w, "status");
      const std::string phase = Str(status, "phase");
      if ((phase != "Scheduled" && phase != "Running") ||
          Field(Field(w, "spec"), "preemptible") != false ||
          Str(Field(status, "resourceUsage"), "queue") != name)
        continue;
      held += AmountOf("gpu", Field(Field(status, "resourceUsage"), "gpu")).value_or(0);
    }
    return held;
  }

  // `stored` with the CPU and memory the queue's bound workloads hold in its status, where a
  // quota of `updated` names them and the status does not count them yet (the scheduler counts
  // them once a quota names them: a first CPU quota set below what runs is warned of too).
  json WithCpuAndMemoryHeld(const json& stored, const json& updated) {
    const json& quotas = Field(Field(updated, "spec"), "quotas");
    std::vector<std::string> missing;
    for (const char* r : {"cpu", "memory"})
      if (Field(quotas, r).is_object() && !Field(Field(stored, "status"), r).is_object())
        missing.push_back(r);
    if (missing.empty()) return stored;
    auto list = store.List("/registry/workloads/", "", 0);
    if (!list.ok()) return stored;
    const std::string name = Str(Field(stored, "metadata"), "name");
    std::map<std::string, int64_t> held;
    for (const KeyValue& kv : list->items) {
      const json w = json::parse(kv.value, nullptr, false);
      const std::string phase = Str(Field(w, "status"), "phase");
      if (Str(Field(w, "spec"), "queue") != name || (phase != "Scheduled" && phase != "Running"))
        continue;
      const json& counts = Field(Field(w, "status"), "admittedCounts");
      const json& sets = jsonf::List(Field(w, "spec"), "podSets");
      for (size_t i = 0; i < sets.size(); ++i) {
        const int64_t pods = counts.is_array() && i < counts.size() && counts[i].is_number()
                                 ? counts[i].get<int64_t>()
                                 : Int(sets[i], "count", 1);
        for (const std::string& r : missing)
          held[r] += pods * AmountOf(r, Field(sets[i], r.c_str())).value_or(0);
      }
    }
    json out = stored;
    if (!out["status"].is_object()) out["status"] = json::object();
    for (const auto& [r, amount] : held)
      out["status"][r] = {{"used", r == "cpu" ? FormatMilliCpu(MilliCpu(amount))
                                              : FormatMemoryMib(MemoryMib(amount))}};
    return out;
  }

  // What a workload write is warned of: node names no node has, in spec.excludeNodes and in
  // its node affinity (matchFields metadata.name, or kubernetes.io/hostname): a typo would
  // exclude or ask for nothing; accepted, as nodes come and go. Looked up for the first 20 names
  // of each field, and only where the field changed.
  std::vector<std::string> WorkloadWarnings(const json& o, const json& was) {
    std::vector<std::string> out;
    const auto unknown_of = [&](const json& names) {
      std::string unknown;
      for (size_t i = 0; names.is_array() && i < names.size() && i < 20; ++i)
        if (names[i].is_string() &&
            store.Get(Key(*FindResource("nodes"), "", names[i].get<std::string>()))
                    .status()
                    .code() == StatusCode::kNotFound)
          unknown += (unknown.empty() ? "'" : ", '") + names[i].get<std::string>() + "'";
      return unknown;
    };
    // A queue that does not exist (a typo): the work is written and waits (QueueNotFound)
    // until one of that name is created; said at once rather than only in its status.
    if (const json& queue = Field(Field(o, "spec"), "queue");
        queue.is_string() && !queue.get<std::string>().empty() &&
        queue != Field(Field(was, "spec"), "queue") &&
        queue != kUnqueuedQueue &&  // (built in, whether or not a queue of its name is stored)
        store.Get(Key(*FindResource("queues"), "", queue.get<std::string>())).status().code() ==
            StatusCode::kNotFound)
      out.push_back("spec.queue: queue '" + queue.get<std::string>() +
                    "' does not exist; the workload waits until it does");
    const json& ex = Field(Field(o, "spec"), "excludeNodes");
    if (ex != Field(Field(was, "spec"), "excludeNodes"))
      if (std::string names = unknown_of(ex); !names.empty())
        out.push_back("spec.excludeNodes names no node of the fleet: " + names +
                      " (accepted: a node of that name is kept off should it join)");
    // GPU models no node has (a typo, or a model yet to come): accepted, as nodes come and go,
    // and said (a trial's `models: H900` was taken without a word, then Unschedulable).
    const json& sets = Field(Field(o, "spec"), "podSets");
    if (sets != Field(Field(was, "spec"), "podSets"))
      if (const FleetFacts fleet = Facts(); !fleet.models.empty())
        for (size_t i = 0; sets.is_array() && i < sets.size(); ++i) {
          const json& models = Field(Field(sets[i], "devices"), "models");
          std::vector<std::string> asked;
          if (models.is_string()) {
            std::string text = models.get<std::string>();
            for (size_t at = 0; at <= text.size();) {
              const size_t bar = std::min(text.find('|', at), text.size());
              if (bar > at) asked.push_back(text.substr(at, bar - at));
              at = bar + 1;
            }
          }
          for (const json& m : jsonf::List(Field(sets[i], "devices"), "models"))
            if (m.is_string()) asked.push_back(m.get<std::string>());
          if (asked.empty() || std::any_of(asked.begin(), asked.end(), [&](const std::string& m) {
                return fleet.models.count(m) > 0;
              }))
            continue;
          std::string have;
          for (const std::string& m : fleet.models) have += (have.empty() ? "" : ", ") + m;
          out.push_back("spec.podSets[" + std::to_string(i) +
                        "].devices.models: no node of the fleet has a GPU of the model(s) it "
                        "names (the fleet has " +
                        have + "); accepted, it waits Unschedulable until one joins");
        }
    const json& affinity = Field(Field(Field(o, "spec"), "affinity"), "nodeAffinity");
    if (affinity.is_null() ||
        affinity == Field(Field(Field(was, "spec"), "affinity"), "nodeAffinity"))
      return out;
    std::vector<const json*> terms;
    for (const json& t :
         jsonf::List(Field(affinity, "requiredDuringSchedulingIgnoredDuringExecution"),
                     "nodeSelectorTerms"))
      terms.push_back(&t);
    for (const json& p : jsonf::List(affinity, "preferredDuringSchedulingIgnoredDuringExecution"))
      terms.push_back(&Field(p, "preference"));
    json names = json::array();
    for (const json* t : terms)
      for (const char* list : {"matchFields", "matchExpressions"})
        for (const json& r : jsonf::List(*t, list))
          if (Str(r, "key") ==
              (std::string(list) == "matchFields" ? "metadata.name" : kHostnameLabel))
            for (const json& n : jsonf::List(r, "values")) names.push_back(n);
    if (std::string unknown = unknown_of(names); !unknown.empty())
      out.push_back("spec.affinity names no node of the fleet: " + unknown +
                    " (accepted, as nodes come and go: a node of that name is matched should it "
                    "join)");
    return out;
  }

  HttpResponse Create(const ResourceInfo& info, const std::string& ns, const HttpRequest& req,
                      const Principal& p) {
    std::unique_lock<std::mutex> refs(flavor_refs_mu, std::defer_lock);
    if (std::string(info.kind) == "Queue") refs.lock();
    auto body = DecodeBody(req, false);
    if (!body.ok()) return BodyError(body.status());
    // The status to store, decided before validation so that only what is stored is checked.
    if (body->is_object()) {
      json& b = *body;
      if (std::string(info.kind) == "Workload") {
        b["status"] = {{"phase", "Pending"}, {"message", "waiting for the scheduler"}};
        // Its tenant's tolerations are given it as it is created (a namespace's default
        // tolerations, in Kubernetes), after its own.
        if (b.contains("spec") && b["spec"].is_object())
          if (auto t = store.Get(Key(*FindResource("tenants"), "", ns)); t.ok()) {
            const json tenant = json::parse(t->value, nullptr, false);
            for (const json& given : jsonf::List(Field(tenant, "spec"), "tolerations")) {
              json& own = b["spec"]["tolerations"];
              if (!own.is_array() && !own.is_null()) break;  // (the validation's to refuse)
              if (own.is_null() || std::find(own.begin(), own.end(), given) == own.end())
                own.push_back(given);
            }
          }
        // ... and kept to the nodes its tenant's nodeSelector names.
        if (Status s = GiveTenantNodeSelector(b, ns); !s.ok()) return ErrorFromStatus(s);
      } else if (std::string(info.kind) == "Node" && !p.node.empty()) {
        // An agent registers its node; status (conditions) is its to report.
      } else {
        b.erase("status");
      }
    }
    auto obj = Validate(info, std::move(*body), ns, "");
    if (obj.ok() && std::string(info.kind) == "Workload")
      if (Status allowed = CheckTolerationsAllowed(*obj, ns); !allowed.ok())
        return ErrorFromStatus(allowed);
    if (!obj.ok()) return ErrorFromStatus(obj.status());
    json& o = *obj;
    if (std::string(info.kind) == "Workload") {
      if (Status s = ResolvePriorityClass(o, /*creating=*/true); !s.ok()) return ErrorFromStatus(s);
      if (Status s = CheckRawPriority(o, nullptr, p); !s.ok()) return ErrorFromStatus(s);
      if (Status s = CheckNewSpec(o, nullptr); !s.ok()) return ErrorFromStatus(s);
      if (Status s = CheckQueueAccess(o); !s.ok()) return ErrorFromStatus(s);
    }
    if (std::string(info.kind) == "Queue") {
      if (Status s = CheckQuotaFlavors(o); !s.ok()) return ErrorFromStatus(s);
      if (Status s = CheckQueueTree(o); !s.ok()) return ErrorFromStatus(s);
    }
    if (std::string(info.kind) == "PriorityClass")
      if (Status s = CheckOneGlobalDefault(o); !s.ok()) return ErrorFromStatus(s);
    const std::string name = o["metadata"]["name"];
    // A new tenant's name must read as no other word of a message (ValidateTenantName); one
    // stored before that rule stays usable.
    if (std::string(info.kind) == "Tenant")
      if (Status s = ValidateTenantName(name); !s.ok())
        return StatusResponse(422, "metadata.name: " + s.message(), "metadata.name");
    // (Held shared from the tenant's check to the write, so that a tenant's deletion, which
    // holds it alone, never passes between them and leaves work with no tenant.)
    std::shared_lock<std::shared_mutex> tenant_ref(tenant_refs_mu, std::defer_lock);
    if (info.namespaced) {
      tenant_ref.lock();
      auto tenant = store.Get(Key(*FindResource("tenants"), "", ns));
      if (!tenant.ok() && tenant.status().code() == StatusCode::kNotFound) {
        return StatusResponse(422, "metadata.namespace: tenant '" + ns + "' does not exist",
                              "metadata.namespace");
      }
      if (!tenant.ok()) return ErrorFromStatus(tenant.status());
    }
    o["metadata"]["uid"] = RandomHex(16);
    o["metadata"]["creationTimestamp"] = FormatTimestamp(clock.NowMs());
    o["metadata"]["generation"] = 1;
    o["metadata"].erase("resourceVersion");
    std::vector<std::string> warnings = std::string(info.kind) == "Workload"
                                            ? WorkloadWarnings(o, json())
                                            : TenantListWarnings(o, info.kind);
    if (std::string(info.kind) == "Queue") {
      for (std::string& w : QueueRoutingWarnings(o, json())) warnings.push_back(std::move(w));
      for (std::string& w : QueueGuaranteeWarnings(o)) warnings.push_back(std::move(w));
    }
    if (std::string(info.kind) == "Node") warnings = NodeWarnings(o);
    if (std::string(info.kind) == "ResourceFlavor") warnings = FlavorWarnings(o);
    if (std::string(info.kind) == "Tenant")
      for (std::string& w : TrustDomainWarnings(o)) warnings.push_back(std::move(w));
    if (DryRun(req)) {
      if (store.Get(Key(info, ns, name)).ok())
        return StatusResponse(409, std::string(info.kind) + " '" + name + "' already exists");
      HttpResponse r = JsonResponse(201, Shown(std::move(o)));
      AddWarnings(r, warnings);
      return r;
    }
    KeyValue stored{Key(info, ns, name), o.dump(), 0, 0};
    auto rev = store.Put(stored.key, stored.value, kMustNotExist);
    if (!rev.ok()) {
      if (rev.status().code() == StatusCode::kAlreadyExists) {
        return StatusResponse(409, std::string(info.kind) + " '" + name + "' already exists");
      }
      return ErrorFromStatus(rev.status());
    }
    if (std::string(info.plural) == "nodes") ForgetFleetFacts();
    stored.create_revision = stored.mod_revision = *rev;
    HttpResponse created;
    created.status = 201;
    created.body = MaterializeText(stored);
    AddWarnings(created, warnings);
    return created;
  }

  HttpResponse Update(const ResourceInfo& info, const std::string& ns, const std::string& name,
                      const HttpRequest& req, const Principal& p, bool status_sub, bool patch) {
    // (A workload as its writer reads it: other tenants' names in its status concealed.)
    const auto shown_to_writer = [&](json obj) {
      if (std::string(info.plural) == "workloads") ConcealStatus(obj, NamesReadable(p));
      return Shown(std::move(obj));
    };
    std::unique_lock<std::mutex> refs(flavor_refs_mu, std::defer_lock);
    if (std::string(info.kind) == "Queue") refs.lock();
    auto body = DecodeBody(req, patch);
    if (!body.ok()) return BodyError(body.status());
    if (!body->is_object()) return StatusResponse(400, "the body must be a JSON object");
    const std::string key = Key(info, ns, name);
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto current = store.Get(key);
      if (!current.ok()) {
        // The built-in unqueued, read and written back (`fabctl apply` of what `get` showed,
        // or a patch of it): an admin's queue of that name is created from it, and the
        // scheduler drops the built-in.
        if (current.status().code() == StatusCode::kNotFound && BuiltinQueue(info, name)) {
          auto builtin = store.Get(kBuiltinQueueKey);
          if (status_sub || !builtin.ok()) return StatusResponse(405, kBuiltinQueueSays);
          json next = patch ? Materialize(*builtin) : *body;
          if (patch) next.merge_patch(*body);
          if (!next.is_object()) return StatusResponse(400, "the body must be a JSON object");
          next.erase("status");
          if (next.contains("metadata") && next["metadata"].is_object()) {
            json& meta = next["metadata"];
            for (const char* k : {"resourceVersion", "uid", "creationTimestamp", "generation"})
              meta.erase(k);
            if (meta.contains("annotations") && meta["annotations"].is_object())
              meta["annotations"].erase("fabrica.dev/built-in");
          }
          HttpRequest create = req;
          create.method = "POST";
          create.body = next.dump();
          create.headers["content-type"] = "application/json";
          if (refs.owns_lock()) refs.unlock();  // (Create takes it)
          return Create(info, ns, create, p);
        }
        if (current.status().code() == StatusCode::kNotFound) {
          return StatusResponse(404, std::string(info.kind) + " '" + name + "' not found");
        }
        return ErrorFromStatus(current.status());
      }
      json stored = json::parse(current->value, nullptr, false);
      if (!p.node.empty() && std::string(info.plural) == "workloads" &&
          !AssignedTo(stored, p.node)) {
        return StatusResponse(403, "node " + p.node + " may only update workloads assigned to it");
      }
      json next;
      int64_t expected = current->mod_revision;
      // A resourceVersion in the body, of a replace or of a patch, is a precondition: the write
      // is refused (409) unless the object is still at that version, as Kubernetes refuses it
      // (a trial's merge patch with a stale one overwrote a newer change; kubectl's
      // --resource-version sends one).
      const json& given = Field(Field(*body, "metadata"), "resourceVersion");
      if (!given.is_null() && !given.is_string())
        return StatusResponse(400, "metadata.resourceVersion: expected a string");
      if (const std::string rv = Str(Field(*body, "metadata"), "resourceVersion"); !rv.empty()) {
        auto parsed = ParseNonNegativeInt(rv);
        if (!parsed.ok()) return StatusResponse(400, "metadata.resourceVersion: not a number");
        expected = *parsed;
      }
      if (patch) {
        next = stored;
        next["metadata"]["resourceVersion"] = std::to_string(current->mod_revision);
        next.merge_patch(*body);
      } else {
        next = *body;
      }
      // (A spec write that changes the nodeSelector of work not yet bound keeps its tenant's in
      // it, or is refused; one that leaves it be is not checked, so that work stored before the
      // tenant's selector changed can still be stopped or reprioritised.)
      const bool bound = Str(Field(stored, "status"), "phase") == "Scheduled" ||
                         Str(Field(stored, "status"), "phase") == "Running";
      if (!status_sub && std::string(info.kind) == "Workload" && !bound &&
          Pruned(Field(Field(next, "spec"), "nodeSelector")) !=
              Pruned(Field(Field(stored, "spec"), "nodeSelector")))
        if (Status s = GiveTenantNodeSelector(next, ns); !s.ok()) return ErrorFromStatus(s);
      // (Bound work whose write leaves out what its tenant gave it, a replace from a manifest,
      // keeps what is stored: its selector may not change while it holds devices.)
      if (!status_sub && std::string(info.kind) == "Workload" && bound &&
          Field(next, "spec").is_object())
        if (const std::optional<Tenant> tenant = StoredTenant(ns))
          for (const auto& [key, value] : tenant->node_selector) {
            const json& was = Field(Field(Field(stored, "spec"), "nodeSelector"), key.c_str());
            const json& now = Field(next["spec"], "nodeSelector");
            if (was.is_null() || !(now.is_null() || now.is_object()) || now.contains(key)) continue;
            next["spec"]["nodeSelector"][key] = was;
          }
      // The subresource decides what may change: /status only the status, the main resource
      // only the rest.
      if (status_sub) {
        json status = next.value("status", json::object());
        next = stored;
        next["status"] = status;
      } else if (stored.contains("status")) {
        next["status"] = stored["status"];
        // Pods that completed under other pod sets or another run are not this spec's: a
        // workload whose podSets or run change runs all its pods again.
        if (std::string(info.kind) == "Workload" && next["status"].is_object() &&
            (Field(Field(next, "spec"), "podSets") != Field(Field(stored, "spec"), "podSets") ||
             Field(Field(next, "spec"), "run") != Field(Field(stored, "spec"), "run")))
          next["status"].erase("finishedPods");
        // A preemptor's plan and swap were made for its queue and pods as they were: moved to
        // another queue (whose quota the swap's ceiling does not speak for) or reshaped, it
        // waits for its victims without them and is placed afresh.
        if (std::string(info.kind) == "Workload" && next["status"].is_object() &&
            (Field(Field(next, "spec"), "queue") != Field(Field(stored, "spec"), "queue") ||
             Field(Field(next, "spec"), "podSets") != Field(Field(stored, "spec"), "podSets") ||
             Field(Field(next, "spec"), "nodeSelector") !=
                 Field(Field(stored, "spec"), "nodeSelector") ||
             Field(Field(next, "spec"), "excludeNodes") !=
                 Field(Field(stored, "spec"), "excludeNodes") ||
             Pruned(Field(Field(next, "spec"), "affinity")) !=
                 Pruned(Field(Field(stored, "spec"), "affinity")) ||
             Field(Field(next, "spec"), "tolerations") !=
                 Field(Field(stored, "spec"), "tolerations"))) {
          next["status"].erase("nomination");
          next["status"].erase("nominatedCounts");
          next["status"].erase("swap");
        }
      } else {
        next.erase("status");
      }
      // A node's built-in labels as a read of the stored node showed them are no change,
      // whatever the body's spec now says (a spec's GPUs changed through `fabctl apply`, or an
      // edit of what `get -o yaml` showed, carries the old model's label back).
      if (std::string(info.kind) == "Node" &&
          Field(Field(next, "metadata"), "labels").is_object()) {
        json& labels = next["metadata"]["labels"];
        const json shown = BuiltinNodeLabels(stored);
        for (const char* k : {kHostnameLabel, kGpuModelLabel})
          if (labels.contains(k) && labels[k] == Field(shown, k)) labels.erase(k);
      }
      auto valid = Validate(info, next, ns, name, stored);
      if (!valid.ok()) return ErrorFromStatus(valid.status());
      json& o = *valid;
      // (Labels absent, null or empty are one: a node written back as read is no change.)
      if (std::string(info.kind) == "Node") {
        const auto none = [](const json& l) { return l.is_null() || (l.is_object() && l.empty()); };
        if (none(Field(Field(o, "metadata"), "labels")) &&
            none(Field(Field(stored, "metadata"), "labels"))) {
          if (Field(stored, "metadata").contains("labels"))
            o["metadata"]["labels"] = stored["metadata"]["labels"];
          else
            o["metadata"].erase("labels");
        }
      }
      if (!status_sub && std::string(info.kind) == "Workload" &&
          Field(Field(o, "spec"), "tolerations") != Field(Field(stored, "spec"), "tolerations"))
        if (Status allowed = CheckTolerationsAllowed(o, ns); !allowed.ok())
          return ErrorFromStatus(allowed);
      // A NoExecute taint kept keeps the date it was set (Validate dates it now).
      if (std::string(info.kind) == "Node" && Field(Field(o, "spec"), "taints").is_array())
        for (json& t : o["spec"]["taints"])
          for (const json& was : jsonf::List(Field(stored, "spec"), "taints"))
            if (t.is_object() && t.contains("timeAdded") && Str(was, "key") == Str(t, "key") &&
                Str(was, "value") == Str(t, "value") && Str(was, "effect") == Str(t, "effect") &&
                was.contains("timeAdded"))
              t["timeAdded"] = was["timeAdded"];
      // A spec write that names another class (or gives a priority) is resolved again; status
      // writes and untouched specs keep the value taken when the class was named (a manifest
      // applied again, naming the same class and no priority, even once the class is gone).
      if (!status_sub && std::string(info.kind) == "Workload" && o["spec"].is_object() &&
          !o["spec"].contains("priority") && Field(o["spec"], "priorityClassName").is_string() &&
          Field(o["spec"], "priorityClassName") ==
              Field(Field(stored, "spec"), "priorityClassName") &&
          !Field(Field(stored, "spec"), "priority").is_null())
        o["spec"]["priority"] = stored["spec"]["priority"];
      // A switch to another class (or from a raw priority to a class) with the old value
      // carried along (a patch or a re-applied manifest that names only the class) takes the
      // new class's value. (A value equal to the old one cannot be told from one carried.)
      if (!status_sub && std::string(info.kind) == "Workload" && o["spec"].is_object() &&
          Field(o["spec"], "priorityClassName").is_string() &&
          Field(o["spec"], "priorityClassName") !=
              Field(Field(stored, "spec"), "priorityClassName") &&
          Field(o["spec"], "priority") == Field(Field(stored, "spec"), "priority")) {
        o["spec"].erase("priority");
        // (Its preemption policy, carried the same way, is the new class's too.)
        if (Field(o["spec"], "preemptionPolicy") ==
            Field(Field(stored, "spec"), "preemptionPolicy"))
          o["spec"].erase("preemptionPolicy");
      }
      if (!status_sub && std::string(info.kind) == "Workload" &&
          (Field(o["spec"], "priorityClassName") !=
               Field(Field(stored, "spec"), "priorityClassName") ||
           Field(o["spec"], "priority") != Field(Field(stored, "spec"), "priority")))
        if (Status s = ResolvePriorityClass(o); !s.ok()) return ErrorFromStatus(s);
      if (!status_sub && std::string(info.kind) == "Workload") {
        if (Status s = CheckRawPriority(o, &stored, p); !s.ok()) return ErrorFromStatus(s);
        // What it was admitted as stays while it holds devices (as Kueue keeps an admitted
        // workload's queue): the queue charged, what runs, and what protects it from eviction.
        const std::string phase = Str(Field(stored, "status"), "phase");
        if (phase == "Scheduled" || phase == "Running")
          for (const char* key :
               {"queue", "podSets", "gang", "topology", "preemptible", "minRuntimeSeconds",
                "nodeSelector", "excludeNodes", "affinity", "tolerations"}) {
            // (An empty selector or list says what an absent one does; in an affinity, at
            // any depth.)
            // (Nor does a null in a map: one stored before nulls were dropped on writes.)
            const auto said = [&](const json& spec) {
              json v = Field(spec, key);
              if (std::string(key) == "affinity") return Pruned(v);
              DropNulls(v);
              return v.empty() && (v.is_object() || v.is_array()) ? json() : v;
            };
            // Tolerations may be added, as Kubernetes lets a running pod's be (to keep it
            // where a NoExecute taint would evict it); none taken away or changed.
            if (std::string(key) == "tolerations") {
              const json& now = Field(o["spec"], key);
              bool kept = true;
              for (const json& t : jsonf::List(Field(stored, "spec"), key))
                kept = kept && now.is_array() && std::find(now.begin(), now.end(), t) != now.end();
              if (kept) continue;
              return StatusResponse(422,
                                    "spec.tolerations: may only be added to while the workload "
                                    "is " +
                                        phase + " (delete it and create it again)",
                                    "spec.tolerations");
            }
            if (said(o["spec"]) != said(Field(stored, "spec")))
              return StatusResponse(422,
                                    "spec." + std::string(key) + ": may not change while the " +
                                        "workload is " + phase + " (delete it and create it again)",
                                    "spec." + std::string(key));
          }
        // Its time limit may be lowered, not raised or lifted, but by a platform admin (as Slurm
        // lets users lower theirs and operators raise them): the admitter lets work into held
        // room by the limits of what runs there.
        if ((phase == "Scheduled" || phase == "Running") && !PlatformAdmin(p)) {
          const int64_t was = Int(Field(stored, "spec"), "maxRuntimeSeconds", 0);
          const json& now = Field(o["spec"], "maxRuntimeSeconds");
          // (Raised, or lifted — removed or 0; a value of another kind or below 0 is the
          // validation's to refuse, 422, as for anyone.)
          if (was > 0 && (now.is_null() || (now.is_number_integer() &&
                                            (now.get<int64_t>() == 0 || now.get<int64_t>() > was))))
            return StatusResponse(403,
                                  "spec.maxRuntimeSeconds: only a platform admin may raise or "
                                  "lift the time limit of a " +
                                      phase + " workload (it is " + std::to_string(was) +
                                      " s; it may be lowered)",
                                  "spec.maxRuntimeSeconds");
        }
        if (Status s = CheckNewSpec(o, &stored); !s.ok()) return ErrorFromStatus(s);
        if (Field(o["spec"], "queue") != Field(Field(stored, "spec"), "queue"))
          if (Status s = CheckQueueAccess(o); !s.ok()) return ErrorFromStatus(s);
      }
      // A person's cordon is stamped with who set it, even over the health controller's
      // cordon, so that the end of a repair does not lift it: a node made unschedulable, or a
      // patch that says so of one already (`fabctl cordon`). A whole object written back
      // (apply, with the controller's cordon in it) keeps the stored stamp, or none; an
      // uncordon removes it. (Decided from before and after, not from what the body names.)
      // What keeps work off a node is an admin's: its own agent may not lift it (as
      // Kubernetes' NodeRestriction keeps a kubelet from changing its node's taints).
      if (!status_sub && std::string(info.kind) == "Node" && !p.node.empty())
        for (const char* key : {"taints", "unschedulable"})
          if (Field(Field(o, "spec"), key) != Field(Field(stored, "spec"), key))
            return StatusResponse(403, "node " + p.node + " may not change its own spec." + key +
                                           " (an admin's: fabctl taint, fabctl cordon)");
      if (!status_sub && std::string(info.kind) == "Node" && p.node.empty()) {
        const bool now_off = Field(Field(o, "spec"), "unschedulable") == true;
        const bool was_off = Field(Field(stored, "spec"), "unschedulable") == true;
        const bool said = patch && Field(*body, "spec").is_object() &&
                          Field(body->at("spec"), "unschedulable") == true;
        const json& had =
            Field(Field(Field(stored, "metadata"), "annotations"), kCordonedByAnnotation);
        json& meta = o["metadata"];
        if (!meta.contains("annotations") || !meta["annotations"].is_object())
          meta["annotations"] = json::object();
        if (now_off && (!was_off || said)) {
          meta["annotations"][kCordonedByAnnotation] = p.user.empty() ? "?" : p.user;
        } else if (now_off && had.is_string()) {
          meta["annotations"][kCordonedByAnnotation] = had;
        } else {
          meta["annotations"].erase(kCordonedByAnnotation);
        }
        // An uncordon (a patch that says unschedulable: false, or null as kubectl's does) is
        // dated, cordoned or not: it lifts the scheduler's hold on a node whose pods did not
        // start (kUncordonedAtAnnotation).
        if (const json& spec_said = Field(*body, "spec");
            patch && spec_said.is_object() && spec_said.contains("unschedulable") &&
            (spec_said["unschedulable"] == false || spec_said["unschedulable"].is_null()))
          meta["annotations"][kUncordonedAtAnnotation] = FormatTimestamp(clock.NowMs());
        if (meta["annotations"].empty()) meta.erase("annotations");
      }
      if (!status_sub && std::string(info.kind) == "Queue" &&
          (Field(o["spec"], "quotas") != Field(Field(stored, "spec"), "quotas") ||
           Field(o["spec"], "flavorOrder") != Field(Field(stored, "spec"), "flavorOrder")))
        if (Status s = CheckQuotaFlavors(o); !s.ok()) return ErrorFromStatus(s);
      if (!status_sub && std::string(info.kind) == "Queue" &&
          Field(o, "spec") != Field(stored, "spec"))
        if (Status s = CheckQueueTree(o); !s.ok()) return ErrorFromStatus(s);
      // A class's value may not change, as a Kubernetes PriorityClass's may not: workloads took
      // the old one when written and keep it, so the class would no longer say what they run
      // at (a trial's patch was taken without a word).
      if (!status_sub && std::string(info.kind) == "PriorityClass" &&
          Field(Field(o, "spec"), "value") != Field(Field(stored, "spec"), "value"))
        return StatusResponse(
            422,
            "spec.value: may not be changed (workloads that name the class took its value " +
                Field(Field(stored, "spec"), "value").dump() +
                " when written and keep it); create a class with the new value instead",
            "spec.value");
      // Nor its preemptionPolicy (immutable in Kubernetes too): workloads copy it as they copy
      // the value, so two of one class would preempt differently (a trial's patch was taken).
      if (!status_sub && std::string(info.kind) == "PriorityClass" &&
          Str(Field(o, "spec"), "preemptionPolicy", "PreemptLowerPriority") !=
              Str(Field(stored, "spec"), "preemptionPolicy", "PreemptLowerPriority"))
        return StatusResponse(
            422,
            "spec.preemptionPolicy: may not be changed (workloads that name the class took " +
                Str(Field(stored, "spec"), "preemptionPolicy", "PreemptLowerPriority") +
                " when written and keep it); create a class with the new policy instead",
            "spec.preemptionPolicy");
      if (!status_sub && std::string(info.kind) == "PriorityClass")
        if (Status s = CheckOneGlobalDefault(o); !s.ok()) return ErrorFromStatus(s);
      if (status_sub && !p.node.empty() && std::string(info.plural) == "workloads") {
        // (Written from an older read, a difference below may be the scheduler's since: stale,
        // not forbidden.)
        if (expected != current->mod_revision)
          return StatusResponse(409, "the object has been modified (resourceVersion " +
                                         std::to_string(expected) + " is stale); read it again");
        // A node reports on the pods it runs (phase, messages, times, conditions); where they
        // run is the scheduler's decision.
        for (const char* owned :
             {"assignments", "isolation", "scheduledTime", "nomination", "nominatedCounts",
              "preemption", "admittedCounts", "resizedTime", "growthRetryTime", "shrinks", "shrink",
              "requeueState", "evictions", "swap", "resourceUsage", "growthBlocked"}) {
          if (Field(o["status"], owned) != Field(Field(stored, "status"), owned)) {
            return StatusResponse(403, "node " + p.node + " may not change status." + owned +
                                           " (the scheduler's decision)");
          }
        }
        // A node adds the pods it started, and those that completed, only its own, and takes
        // none away; each is stamped on receipt (below).
        for (const char* key : {"startedPods", "finishedPods"}) {
          const json& had = Field(Field(stored, "status"), key);
          for (const auto& [pod, at] : had.items()) {
            if (Field(o["status"], key).contains(pod)) continue;
            // (A stale write was answered 409 above: this one removes what was there.)
            return StatusResponse(403, "node " + p.node + " may not remove status." + key + "." +
                                           pod + " (what a pod did stays done)");
          }
          if (!o["status"].contains(key)) continue;
          for (auto& [pod, at] : o["status"][key].items()) {
            if (had.contains(pod)) {
              at = had[pod];
              continue;
            }
            bool mine = false;
            for (const json& a : jsonf::List(Field(stored, "status"), "assignments"))
              mine = mine || (Str(a, "node") == p.node && Str(a, "pod", "0") == pod);
            if (!mine)
              return StatusResponse(
                  403, "node " + p.node + " may not report pod " + pod +
                           (std::string(key) == "startedPods" ? " started" : " completed") +
                           ": it is not assigned to the node");
            at = FormatTimestamp(clock.NowMs());
          }
        }
        // A node's phase changes are stamped on receipt, in the server's clock (as lease
        // renewals are): metering reads these times against the scheduler's, and a node's
        // clock may be skewed.
        const std::string before = Str(Field(stored, "status"), "phase");
        const std::string after = Str(o["status"], "phase");
        if (after != before) {
          if (after == "Running") o["status"]["startTime"] = FormatTimestamp(clock.NowMs());
          if (after == "Succeeded" || after == "Failed") {
            o["status"]["completionTime"] = FormatTimestamp(clock.NowMs());
          }
        }
      }
      for (const char* owned : {"uid", "creationTimestamp"}) {
        if (stored["metadata"].contains(owned)) o["metadata"][owned] = stored["metadata"][owned];
      }
      // generation is the server's: it counts changes of the spec, whatever the body says.
      o["metadata"]["generation"] = Int(Field(stored, "metadata"), "generation", 1) +
                                    (Field(o, "spec") != Field(stored, "spec") ? 1 : 0);
      o["metadata"].erase("resourceVersion");
      if (expected == current->mod_revision && o == stored) {
        // Nothing changes: nothing is written, and the version stays (as Kubernetes does), so
        // watchers see no event and `fabctl apply` can say "unchanged".
        o["metadata"]["resourceVersion"] = std::to_string(current->mod_revision);
        return JsonResponse(200, shown_to_writer(std::move(o)));
      }
      std::vector<std::string> warnings;
      if (!status_sub && std::string(info.kind) == "Queue") {
        if (auto children = ChildrenOf(name); children.ok() && children->empty())
          warnings = QueueEditWarnings(WithCpuAndMemoryHeld(stored, o), o, PinnedGpuMilli(name));
        for (std::string& w : QueueRoutingWarnings(o, stored)) warnings.push_back(std::move(w));
        for (std::string& w : QueueGuaranteeWarnings(o)) warnings.push_back(std::move(w));
        for (std::string& w : QueueBudgetWarnings(o, stored)) warnings.push_back(std::move(w));
        for (std::string& w : QueueAccessWarnings(o, stored)) warnings.push_back(std::move(w));
      }
      if (!status_sub &&
          Field(Field(o, "spec"), "tenants") != Field(Field(stored, "spec"), "tenants"))
        for (std::string& w : TenantListWarnings(o, info.kind)) warnings.push_back(std::move(w));
      if (!status_sub && std::string(info.kind) == "Workload")
        warnings = WorkloadWarnings(o, stored);
      if (!status_sub && std::string(info.kind) == "Tenant")
        for (std::string& w : TrustWarnings(o, stored)) warnings.push_back(std::move(w));
      if (!status_sub && std::string(info.kind) == "Tenant")
        for (std::string& w : TrustDomainWarnings(o)) warnings.push_back(std::move(w));
      if (!status_sub && std::string(info.kind) == "ResourceFlavor" &&
          Field(Field(o, "spec"), "models") != Field(Field(stored, "spec"), "models"))
        warnings = FlavorWarnings(o);
      if (!status_sub && std::string(info.kind) == "Node" &&
          (Field(Field(o, "spec"), "leaf") != Field(Field(stored, "spec"), "leaf") ||
           Field(Field(o, "spec"), "nics") != Field(Field(stored, "spec"), "nics")))
        warnings = NodeWarnings(o);
      if (DryRun(req)) {
        // (As the write would answer, but for the version, which no write moved on.)
        if (expected != current->mod_revision)
          return StatusResponse(409, "the object has been modified (resourceVersion " +
                                         std::to_string(expected) + " is stale); read it again");
        HttpResponse r = JsonResponse(200, shown_to_writer(std::move(o)));
        AddWarnings(r, warnings);
        return r;
      }
      auto rev = store.Put(key, o.dump(), expected);
      if (!rev.ok()) {
        if (rev.status().code() == StatusCode::kFailedPrecondition && patch) continue;  // retry
        if (rev.status().code() == StatusCode::kFailedPrecondition) {
          return StatusResponse(409, "the object has been modified (resourceVersion " +
                                         std::to_string(expected) + " is stale); read it again");
        }
        return ErrorFromStatus(rev.status());
      }
      if (std::string(info.plural) == "nodes") ForgetFleetFacts();
      o["metadata"]["resourceVersion"] = std::to_string(*rev);
      HttpResponse r = JsonResponse(200, shown_to_writer(std::move(o)));
      AddWarnings(r, warnings);
      return r;
    }
    return StatusResponse(409, "too many concurrent changes; try again");
  }

  // The built-in unqueued, shown while no queue of its name is stored (kBuiltinQueueKey), is
  // the scheduler's: it is neither changed nor deleted through the API.
  static constexpr const char* kBuiltinQueueSays =
      "Queue 'unqueued' is built in: the scheduler keeps it; to set its place or quotas, create "
      "a Queue named unqueued (fabctl apply -f)";
  static bool DryRun(const HttpRequest& req) { return req.query.count("dryRun") > 0; }

  bool BuiltinQueue(const ResourceInfo& info, const std::string& name) {
    return std::string(info.kind) == "Queue" && name == kUnqueuedQueue &&
           store.Get(kBuiltinQueueKey).ok();
  }

  HttpResponse Delete(const ResourceInfo& info, const std::string& ns, const std::string& name,
                      const HttpRequest& req) {
    std::unique_lock<std::mutex> refs(flavor_refs_mu, std::defer_lock);
    if (std::string(info.kind) == "ResourceFlavor" && name != kDefaultFlavor) {
      // In use, it stays (Kueue holds it with a finalizer): the queues' quotas would name
      // nothing and the scheduler would refuse the whole tree. (A stored `gpu` gives way to
      // the built-in one.)
      refs.lock();
      auto users = QueuesNaming(name);
      if (!users.ok()) return ErrorFromStatus(users.status());
      if (!users->empty()) {
        std::string list;
        for (const std::string& q : *users) list += (list.empty() ? "" : ", ") + q;
        return StatusResponse(409, "ResourceFlavor '" + name + "' is in use: the quotas or " +
                                       "flavorOrder of queue(s) " + list + " name it");
      }
    }
    if (std::string(info.kind) == "Queue" && !store.Get(Key(info, ns, name)).ok() &&
        BuiltinQueue(info, name))
      return StatusResponse(405, kBuiltinQueueSays);
    if (std::string(info.kind) == "Queue" &&
        store.Get(Key(info, ns, name)).ok()) {  // (else: 404 below)
      refs.lock();
      auto why = QueueInUse(name);
      if (!why.ok()) return ErrorFromStatus(why.status());
      if (!why->empty()) return StatusResponse(409, "Queue '" + name + "' is in use: " + *why);
    }
    std::unique_lock<std::shared_mutex> tenant_alone(tenant_refs_mu, std::defer_lock);
    if (std::string(info.kind) == "Tenant" && store.Get(Key(info, ns, name)).ok()) {
      tenant_alone.lock();  // (held through the deletion below)
      auto why = TenantInUse(name);
      if (!why.ok()) return ErrorFromStatus(why.status());
      if (!why->empty()) return StatusResponse(409, "Tenant '" + name + "' is in use: " + *why);
    }
    if (DryRun(req)) {
      if (!store.Get(Key(info, ns, name)).ok())
        return StatusResponse(404, std::string(info.kind) + " '" + name + "' not found");
      return StatusResponse(200, std::string(info.kind) + " '" + name + "' deleted (dry run)");
    }
    auto rev = store.Delete(Key(info, ns, name), kAnyRevision);
    if (std::string(info.plural) == "nodes") ForgetFleetFacts();
    if (!rev.ok()) {
      if (rev.status().code() == StatusCode::kNotFound) {
        return StatusResponse(404, std::string(info.kind) + " '" + name + "' not found");
      }
      return ErrorFromStatus(rev.status());
    }
    return StatusResponse(200, std::string(info.kind) + " '" + name + "' deleted");
  }
};

ApiServer::ApiServer(Store& store, Authorizer& auth, const Clock& clock, Metrics* metrics)
    : impl_(std::make_unique<Impl>(store, auth, clock, metrics)) {}

ApiServer::~ApiServer() = default;

HttpResponse ApiServer::Handle(const HttpRequest& req) {
  const auto start = std::chrono::steady_clock::now();
  std::string resource = "other", verb = "other";
  HttpResponse r;
  try {
    r = impl_->Handle(req, &resource, &verb);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type that the typed parsers let through (a number as a string).
    r = StatusResponse(422, std::string("a field has the wrong type: ") + e.what());
  }
  if (impl_->metrics && !r.stream) {
    impl_->metrics->ObserveRequest(
        verb, resource, r.status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return r;
}

void ApiServer::SetExtension(Extension extension) { impl_->extension = std::move(extension); }

void ApiServer::SetMetricsExtra(std::function<std::string()> extra) {
  impl_->metrics_extra = std::move(extra);
}

void ApiServer::SetEvictionGrace(int64_t ms) { impl_->eviction_grace_ms = ms; }

Result<std::string> ApiServer::IssueNodeToken(const std::string& node) {
  RETURN_IF_ERROR(ValidateName(node));
  const std::string token = "node." + RandomHex(24);
  RETURN_IF_ERROR(impl_->store.Put("/registry/nodetokens/" + node, token, kAnyRevision).status());
  std::lock_guard<std::mutex> lock(impl_->tokens_mu);
  for (auto it = impl_->node_tokens.begin(); it != impl_->node_tokens.end();) {
    if (it->second == node)
      it = impl_->node_tokens.erase(it);
    else
      ++it;
  }
  impl_->node_tokens[token] = node;
  return token;
}

}  // namespace fabrica
