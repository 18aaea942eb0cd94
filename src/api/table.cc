#include "api/table.h"

#include <cstdio>
#include <functional>
#include <utility>

#include "api/json_fields.h"
#include "client/columns.h"
#include "control/clock.h"
#include "sched/queue_objects.h"

namespace fabrica {
namespace {

using json = nlohmann::json;
using jsonf::Field;
using jsonf::List;
using jsonf::Object;
using jsonf::Str;

struct Column {
  const char* name;
  const char* type;  // OpenAPI: string, integer, number, date
  const char* description;
  int priority;  // 1: shown by kubectl with -o wide only
  std::function<std::string(const json& obj, const TableContext& context)> cell;
};

std::string Or(const std::string& s, const char* none) { return s.empty() ? none : s; }
std::string Scalar(const json& obj, const char* part, const char* key, const char* none) {
  const json& v = Field(Object(obj, part), key);
  return v.is_null() ? none : CellText(v);
}
std::string Joined(const json& list, const char* none) {
  std::string out;
  for (const json& v : list) out += (out.empty() ? "" : ",") + CellText(v);
  return out.empty() ? none : out;
}

// Kubectl's columns of events: no name, no age (LAST SEEN is theirs).
std::vector<Column> EventColumns() {
  return {
      // (Its cell is made by ObjectTable, which knows the time: nullptr.)
      {"Last Seen", "string", "time since lastTimestamp", 0, nullptr},
      {"Type", "string", "Normal or Warning", 0,
       [](const json& e, const TableContext&) { return Str(e, "type"); }},
      {"Reason", "string", "reason", 0,
       [](const json& e, const TableContext&) { return Str(e, "reason"); }},
      {"Object", "string", "involvedObject", 0,
       [](const json& e, const TableContext&) {
         return "workload/" + Str(Object(e, "involvedObject"), "name");
       }},
      {"Message", "string", "message, and how often", 0,
       [](const json& e, const TableContext&) { return EventMessage(e); }},
  };
}

std::vector<Column> ColumnsOf(const std::string& kind) {
  const auto name = [](const json& o, const TableContext&) {
    return Str(Object(o, "metadata"), "name");
  };
  std::vector<Column> cols = {{"Name", "string", "metadata.name", 0, name}};
  if (kind == "Workload") {
    // (Each cell computes the workload's cells afresh: a few map lookups; a table of thousands
    // of workloads is cheap next to its JSON.)
    const auto cell = [](std::string WorkloadCells::*part) {
      return [part](const json& o, const TableContext&) { return WorkloadColumns(o).*part; };
    };
    cols.push_back(
        {"Phase", "string", "status.phase as fabctl shows it", 0, cell(&WorkloadCells::phase)});
    cols.push_back(
        {"Pods", "string", "pods running of those asked", 0, cell(&WorkloadCells::pods)});
    cols.push_back({"GPUs", "string", "GPUs its running pods hold", 0, cell(&WorkloadCells::gpus)});
    cols.push_back({"Nodes", "string", "nodes its pods run on", 0, cell(&WorkloadCells::nodes)});
    cols.push_back({"Queue", "string", "the queue it waits in, or is charged", 1,
                    [](const json& o, const TableContext& c) {
                      // (The scheduler's rule, where queues exist.)
                      std::string waiting = Str(Object(o, "spec"), "queue");
                      if (!c.leaves.empty())
                        waiting = WaitingQueue(c.leaves, waiting,
                                               Str(Object(o, "metadata"), "namespace"));
                      return WorkloadQueue(o, waiting);
                    }});
    cols.push_back(
        {"Priority", "integer", "spec.priority", 1,
         [](const json& o, const TableContext&) { return Scalar(o, "spec", "priority", "0"); }});
    cols.push_back(
        {"Message", "string", "status.message: why it waits, or where it runs", 1,
         [](const json& o, const TableContext&) { return Str(Object(o, "status"), "message"); }});
  } else if (kind == "Node") {
    cols.push_back({"Status", "string", "Ready condition, cordon, start hold and health", 0,
                    [](const json& o, const TableContext& c) {
                      auto health = c.node_health.find(Str(Object(o, "metadata"), "name"));
                      return NodeStatusWords(o) +
                             (health == c.node_health.end() ? "" : NodeHealthWords(health->second));
                    }});
    cols.push_back({"GPUs", "integer", "spec.devices", 0, [](const json& o, const TableContext&) {
                      const json& spec = Object(o, "spec");
                      size_t n = List(spec, "devices").size();
                      if (n == 0)
                        n = static_cast<size_t>(jsonf::Int(Object(spec, "gpus"), "count"));
                      return std::to_string(n);
                    }});
    cols.push_back(
        {"Model", "string", "its GPUs' model", 0, [](const json& o, const TableContext&) {
           const json& devices = List(Object(o, "spec"), "devices");
           return devices.empty() ? std::string("-") : Or(Str(devices[0], "model"), "-");
         }});
    cols.push_back({"Leaf", "string", "spec.leaf: its rack or InfiniBand leaf", 0,
                    [](const json& o, const TableContext&) {
                      return Or(Str(Object(o, "spec"), "leaf"), "-");
                    }});
    cols.push_back({"CPU", "string", "spec.cpu", 1, [](const json& o, const TableContext&) {
                      return Scalar(o, "spec", "cpu", "-");
                    }});
    cols.push_back({"Memory", "string", "spec.memory", 1, [](const json& o, const TableContext&) {
                      return Scalar(o, "spec", "memory", "-");
                    }});
    cols.push_back({"Taints", "string", "spec.taints", 1, [](const json& o, const TableContext&) {
                      std::string out;
                      for (const json& t : List(Object(o, "spec"), "taints")) {
                        const std::string value = Str(t, "value");
                        out += (out.empty() ? "" : ",") + Str(t, "key") +
                               (value.empty() ? "" : "=" + value) + ":" + Str(t, "effect");
                      }
                      return Or(out, "-");
                    }});
  } else if (kind == "Queue") {
    const auto gpus = [](const char* key) {
      return [key](const json& o, const TableContext&) {
        const json& status = Object(o, "status");
        return QueueGpus(status, key, QueueFlavored(status));
      };
    };
    cols.push_back({"Parent", "string", "spec.parent", 0, [](const json& o, const TableContext&) {
                      return Or(Str(Object(o, "spec"), "parent"), "-");
                    }});
    cols.push_back({"Weight", "string", "spec.weight", 0, [](const json& o, const TableContext&) {
                      return Scalar(o, "spec", "weight", "1");
                    }});
    cols.push_back(
        {"Guaranteed", "string", "GPUs guaranteed, by flavour", 0, gpus("guaranteedGpus")});
    cols.push_back({"Used", "string", "GPUs held, by flavour", 0, gpus("usedGpus")});
    cols.push_back(
        {"Pending", "integer", "workloads waiting", 0, [](const json& o, const TableContext&) {
           return QueueStatusCell(Object(o, "status"), "pendingWorkloads");
         }});
    cols.push_back(
        {"Priority", "integer", "spec.priority: the over-quota priority", 1,
         [](const json& o, const TableContext&) { return Scalar(o, "spec", "priority", "0"); }});
    cols.push_back(
        {"Share", "string", "weighted dominant share", 1,
         [](const json& o, const TableContext&) { return QueueShare(Object(o, "status")); }});
    cols.push_back({"Active", "boolean",
                    "whether it admits work (false: stopped by its stopPolicy)", 1,
                    [](const json& o, const TableContext&) {
                      return QueueStatusCell(Object(o, "status"), "active");
                    }});
    cols.push_back(
        {"Borrowed", "string", "GPUs held past its guarantee, by flavour", 1,
         [](const json& o, const TableContext&) { return QueueBorrowed(Object(o, "status")); }});
    cols.push_back({"Borrowing-Limit", "string", "spec.quotas.FLAVOUR.borrowingLimit", 1,
                    [](const json& o, const TableContext&) {
                      return QueueLimits(Object(o, "spec"), "borrowingLimit");
                    }});
    cols.push_back({"Lending-Limit", "string", "spec.quotas.FLAVOUR.lendingLimit", 1,
                    [](const json& o, const TableContext&) {
                      return QueueLimits(Object(o, "spec"), "lendingLimit");
                    }});
    cols.push_back({"Disruption-Budget", "string", "spec.disruptionBudget", 1,
                    [](const json& o, const TableContext&) {
                      return Scalar(o, "spec", "disruptionBudget", "-");
                    }});
    cols.push_back(
        {"Cost-Budget", "string", "what it spent of its cost budget", 1,
         [](const json& o, const TableContext&) { return BudgetCell(Object(o, "status")); }});
  } else if (kind == "Tenant") {
    cols.push_back({"Trust", "string", "spec.trust", 0, [](const json& o, const TableContext&) {
                      return Or(Str(Object(o, "spec"), "trust"), "standard");
                    }});
    cols.push_back(
        {"Trust-Domain", "string", "spec.trustDomain", 0, [](const json& o, const TableContext&) {
           const std::string d = Str(Object(o, "spec"), "trustDomain");
           return d.empty() ? Str(Object(o, "metadata"), "name") : d;
         }});
    cols.push_back(
        {"Cost-Budget", "string", "what it spent of its cost budget", 1,
         [](const json& o, const TableContext&) { return BudgetCell(Object(o, "status")); }});
  } else if (kind == "PriorityClass") {
    cols.push_back({"Value", "integer", "spec.value", 0, [](const json& o, const TableContext&) {
                      return Scalar(o, "spec", "value", "-");
                    }});
    cols.push_back({"Global-Default", "string", "spec.globalDefault", 0,
                    [](const json& o, const TableContext&) {
                      return Scalar(o, "spec", "globalDefault", "false");
                    }});
    cols.push_back({"Preemption", "string", "spec.preemptionPolicy", 0,
                    [](const json& o, const TableContext&) {
                      return Or(Str(Object(o, "spec"), "preemptionPolicy"), "PreemptLowerPriority");
                    }});
    cols.push_back({"Tenants", "string", "spec.tenants: who may name it (* every tenant)", 1,
                    [](const json& o, const TableContext&) {
                      const json& spec = Object(o, "spec");
                      return spec.contains("tenants") ? Joined(List(spec, "tenants"), "<none>")
                                                      : std::string("*");
                    }});
    cols.push_back(
        {"Description", "string", "spec.description", 1,
         [](const json& o, const TableContext&) { return Str(Object(o, "spec"), "description"); }});
  } else if (kind == "NodeAllocation") {
    // (As `fabctl top nodes` sums them: GPUs allocated, room held for pending work.)
    const auto sum = [](const char* key) {
      return [key](const json& o, const TableContext&) {
        int64_t milli = 0;
        for (const json& g : List(o, "gpus")) milli += jsonf::Int(g, key);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", static_cast<double>(milli) / 1000.0);
        return std::string(buf);
      };
    };
    cols.push_back({"GPUs-Allocated", "string", "GPUs its workloads hold", 0, sum("gpuMilli")});
    cols.push_back({"GPUs-Held", "string", "room held for pending work (preemptors, reservations)",
                    0, sum("heldMilli")});
    cols.push_back({"GPU-Memory-MiB", "integer", "GPU memory its workloads hold", 0,
                    [](const json& o, const TableContext&) {
                      return std::to_string(jsonf::Int(o, "gpuMemoryMiB"));
                    }});
  } else if (kind == "ResourceFlavor") {
    cols.push_back({"Kind", "string", "spec.kind", 0, [](const json& o, const TableContext&) {
                      return Or(Str(Object(o, "spec"), "kind"), "*");
                    }});
    cols.push_back({"Models", "string", "spec.models", 0, [](const json& o, const TableContext&) {
                      return Joined(List(Object(o, "spec"), "models"), "*");
                    }});
    cols.push_back(
        {"MIG-Profiles", "string", "spec.migProfiles", 0, [](const json& o, const TableContext&) {
           return Joined(List(Object(o, "spec"), "migProfiles"), "*");
         }});
    cols.push_back(
        {"GPUs", "string", "the fleet's GPUs charged to it", 0,
         [](const json& o, const TableContext&) { return Scalar(o, "status", "gpus", "-"); }});
  }
  return cols;
}

// A cell as its column's type says, as Kubernetes' tables send them: a whole number as a
// number, true or false as a boolean; anything else ("<pending>", "-") as the text it is.
json Typed(const char* type, const std::string& text) {
  if (std::string(type) == "boolean" && (text == "true" || text == "false")) return text == "true";
  if (std::string(type) == "integer" && !text.empty() && text.size() < 19 &&
      text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) == std::string::npos &&
      text != "-")
    return std::stoll(text);
  return text;
}

// Where the wide columns begin: Age goes before them, as kubectl's built-in tables have it.
size_t FirstWide(const std::vector<Column>& cols) {
  size_t i = 0;
  while (i < cols.size() && cols[i].priority == 0) ++i;
  return i;
}

}  // namespace

std::string TableVersion(const std::string& accept) {
  // Media types, comma-separated, each with ;-separated parameters.
  size_t start = 0;
  while (start <= accept.size()) {
    size_t end = accept.find(',', start);
    if (end == std::string::npos) end = accept.size();
    const std::string type = accept.substr(start, end - start);
    std::string as, group, version;
    size_t p = type.find(';');
    while (p != std::string::npos) {
      const size_t next = type.find(';', p + 1);
      std::string param = type.substr(p + 1, next == std::string::npos ? next : next - p - 1);
      while (!param.empty() && param.front() == ' ') param.erase(0, 1);
      while (!param.empty() && param.back() == ' ') param.pop_back();
      if (param.rfind("as=", 0) == 0) as = param.substr(3);
      if (param.rfind("g=", 0) == 0) group = param.substr(2);
      if (param.rfind("v=", 0) == 0) version = param.substr(2);
      p = next;
    }
    std::string media = type.substr(0, type.find(';'));
    while (!media.empty() && media.front() == ' ') media.erase(0, 1);
    while (!media.empty() && media.back() == ' ') media.pop_back();
    // In the client's order: a JSON Table first; plain JSON (or anything) first, the object.
    // (A Table in another encoding, protobuf, is passed over: this server writes JSON.)
    const bool json_media = media == "application/json";
    if (json_media && as == "Table" && group == "meta.k8s.io" &&
        (version == "v1" || version == "v1beta1"))
      return version;
    if (as.empty() && (json_media || media == "*/*" || media == "application/*")) return "";
    start = end + 1;
  }
  return "";
}

bool ParseRowObject(const std::string& text, RowObject* out) {
  if (text == "None")
    *out = RowObject::kNone;
  else if (text == "Metadata" || text.empty())
    *out = RowObject::kMetadata;
  else if (text == "Object")
    *out = RowObject::kObject;
  else
    return false;
  return true;
}

json ObjectTable(const std::string& kind, const std::vector<json>& objects, int64_t now_ms,
                 const std::string& version, RowObject row_object,
                 const std::string& resource_version, const TableContext& context) {
  const bool events = kind == "Event";
  const std::vector<Column> cols = events ? EventColumns() : ColumnsOf(kind);
  // (Events and node allocations, which are not stored objects, have no Age: npos.)
  const size_t wide = events || kind == "NodeAllocation" ? std::string::npos : FirstWide(cols);

  const std::string api_version = "meta.k8s.io/" + version;
  json defs = json::array();
  const auto def = [&](const Column& c) {
    defs.push_back({{"name", c.name},
                    {"type", c.type},
                    {"format", std::string(c.name) == "Name" ? "name" : ""},
                    {"description", c.description},
                    {"priority", c.priority}});
  };
  for (size_t i = 0; i < cols.size(); ++i) {
    if (i == wide) def({"Age", "string", "time since metadata.creationTimestamp", 0, nullptr});
    def(cols[i]);
  }
  if (wide == cols.size())
    def({"Age", "string", "time since metadata.creationTimestamp", 0, nullptr});
  json rows = json::array();
  for (const json& o : objects) {
    json cells = json::array();
    const auto since = [&](const std::string& at) {
      const int64_t t = ParseTimestamp(at);
      return t < 0 ? std::string("<unknown>") : HumanAge(now_ms - t);
    };
    const auto age = [&]() { return since(Str(Object(o, "metadata"), "creationTimestamp")); };
    const auto last_seen = [&]() { return since(Str(o, "lastTimestamp")); };
    for (size_t i = 0; i < cols.size(); ++i) {
      if (i == wide) cells.push_back(age());
      cells.push_back(Typed(cols[i].type, cols[i].cell ? cols[i].cell(o, context) : last_seen()));
    }
    if (wide == cols.size()) cells.push_back(age());
    json row = {{"cells", std::move(cells)}};
    if (row_object == RowObject::kObject) {
      row["object"] = o;
    } else if (row_object == RowObject::kMetadata) {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", api_version},
                       {"metadata", Object(o, "metadata")}};
    }
    rows.push_back(std::move(row));
  }
  return {{"kind", "Table"},
          {"apiVersion", api_version},
          {"metadata", {{"resourceVersion", resource_version}}},
          {"columnDefinitions", std::move(defs)},
          {"rows", std::move(rows)}};
}

}  // namespace fabrica
