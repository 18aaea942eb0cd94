// fabctl: the command-line client of a Fabrica control plane.
//
// Configuration, later sources winning: the config file ($FABRICA_CONFIG, else
// ~/.fabrica/config, else ./fabrica-data/fabctl.yaml, as `fabrica up` writes it), the
// FABRICA_SERVER / FABRICA_TOKEN environment variables, then the --server/--token/--ca flags.
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "api/json_fields.h"
#include "client/columns.h"
#include "client/http_client.h"
#include "client/jsonpath.h"
#include "core/fleet.h"
#include "core/quantity.h"
#include "core/workload.h"
#include "core/yaml_reader.h"
#include "sched/queue_objects.h"
#include "sim/openb.h"

namespace {

using json = nlohmann::json;
using fabrica::ClientOptions;
using fabrica::HttpClient;

struct Resource {
  const char* plural;
  const char* kind;
  bool namespaced;
};
const Resource kResources[] = {{"workloads", "Workload", true},
                               {"tenants", "Tenant", false},
                               {"nodes", "Node", false},
                               {"queues", "Queue", false},
                               {"leases", "Lease", false},
                               {"priorityclasses", "PriorityClass", false},
                               {"resourceflavors", "ResourceFlavor", false}};

const Resource* ResourceByName(const std::string& name) {
  for (const Resource& r : kResources) {
    const std::string p = r.plural;
    const std::string singular =
        p.ends_with("classes") ? p.substr(0, p.size() - 2) : p.substr(0, p.size() - 1);
    if (name == p || name == singular || name == r.kind) return &r;
  }
  // (Short names, as kubectl's `no` and `pc`.)
  static const std::map<std::string, std::string> kShort = {{"wl", "workloads"},
                                                            {"q", "queues"},
                                                            {"no", "nodes"},
                                                            {"pc", "priorityclasses"},
                                                            {"rf", "resourceflavors"}};
  if (auto s = kShort.find(name); s != kShort.end()) return ResourceByName(s->second);
  return nullptr;
}
const Resource* ResourceByKind(const std::string& kind) {
  for (const Resource& r : kResources) {
    if (kind == r.kind) return &r;
  }
  return nullptr;
}

// YAML to JSON, typing plain scalars as numbers, booleans or null where they read as such. A
// key given twice in one mapping is an error (YAML forbids it; yaml-cpp keeps both and the last
// would win silently — two manifests with no "---" between them, say), as kubectl refuses it.
// At most `left` values more (aliases expanded; see fabrica::YamlValueBudget).
json YamlToJson(const YAML::Node& n, size_t& left) {
  if (left-- == 0) throw YAML::ParserException(n.Mark(), fabrica::kYamlPastValueBudget);
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          throw YAML::ParserException(kv.first.Mark(),
                                      "a mapping key must be a plain value, not a list or a map");
        const std::string& key = kv.first.Scalar();
        if (j.contains(key))
          throw YAML::ParserException(kv.first.Mark(),
                                      "mapping key \"" + key +
                                          "\" is given twice (a missing \"---\" between two "
                                          "documents?)");
        j[key] = YamlToJson(kv.second, left);
      }
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& item : n) j.push_back(YamlToJson(item, left));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: always a string
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~") return nullptr;
      if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 18) {
        return std::stoll(s);
      }
      if (!s.empty() && s[0] == '-' && s.size() > 1 &&
          s.find_first_not_of("0123456789", 1) == std::string::npos && s.size() < 18) {
        return std::stoll(s);
      }
      return s;
    }
    default:
      return nullptr;
  }
}

void PrintYaml(const json& j, int indent, std::ostream& out);
std::string Scalar(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.empty() || s.find_first_of(":#{}[],&*!|>'\"%@`") != std::string::npos || s == "true" ||
        s == "false" || s.find_first_not_of("0123456789.-") == std::string::npos) {
      return json(s).dump();
    }
    return s;
  }
  return v.dump();
}
void PrintYaml(const json& j, int indent, std::ostream& out) {
  const std::string pad(indent, ' ');
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if ((v.is_object() && !v.empty()) || (v.is_array() && !v.empty())) {
        out << pad << k << ":\n";
        PrintYaml(v, indent + 2, out);
      } else {
        out << pad << k << ": " << (v.is_object() ? "{}" : v.is_array() ? "[]" : Scalar(v)) << "\n";
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (v.is_object() && !v.empty()) {
        std::ostringstream inner;
        PrintYaml(v, indent + 2, inner);
        std::string s = inner.str();
        s.replace(indent, 2, "- ");
        out << s;
      } else {
        out << pad << "- " << Scalar(v) << "\n";
      }
    }
  }
}

struct Globals {
  std::string server, token, ca, config, ns, output, selector;
  std::string field_selector;  // -- field-selector: sent to the server, which checks it
  std::string sort_by;         // --sort-by: a JSONPath the items are ordered by
  bool all_namespaces = false;
  bool watch = false;
  // apply and delete: "none", "client" (say what would be written, write nothing) or "server"
  // (the server checks it all and writes nothing: ?dryRun=All), as kubectl's --dry-run.
  std::string dry_run = "none";
  int request_timeout = 30;  // seconds a request (or a quiet watch, before it reopens) waits
};

bool ReadConfig(Globals& g, ClientOptions& o) {
  std::string path = g.config;
  if (path.empty() && std::getenv("FABRICA_CONFIG")) path = std::getenv("FABRICA_CONFIG");
  struct stat sb;
  if (path.empty() && std::getenv("HOME")) {
    std::string home = std::string(std::getenv("HOME")) + "/.fabrica/config";
    if (stat(home.c_str(), &sb) == 0) path = home;
  }
  if (path.empty() && stat("fabrica-data/fabctl.yaml", &sb) == 0) path = "fabrica-data/fabctl.yaml";
  if (!path.empty()) {
    try {
      YAML::Node c = YAML::LoadFile(path);
      if (c["server"]) o.server = c["server"].Scalar();
      if (c["token"]) o.token = c["token"].Scalar();
      if (c["ca"]) o.ca_file = c["ca"].Scalar();
    } catch (const YAML::Exception& e) {
      std::cerr << "fabctl: cannot read config '" << path << "': " << e.what() << "\n";
      return false;
    }
  }
  if (std::getenv("FABRICA_SERVER")) o.server = std::getenv("FABRICA_SERVER");
  if (std::getenv("FABRICA_TOKEN")) o.token = std::getenv("FABRICA_TOKEN");
  if (!g.server.empty()) o.server = g.server;
  if (!g.token.empty()) o.token = g.token;
  if (!g.ca.empty()) o.ca_file = g.ca;
  o.timeout_seconds = g.request_timeout;
  return true;
}

std::string CollectionPath(const Resource& r, const std::string& ns) {
  std::string p = "/apis/fabrica.dev/v1/";
  if (r.namespaced && !ns.empty()) p += "namespaces/" + ns + "/";
  return p + r.plural;
}

// Prints the server's Status message for a failed call; returns the exit code.
// `about`, where given, names the object the request was for (a file applies many).
int Failed(const fabrica::Result<fabrica::ClientResponse>& r, const std::string& about = "") {
  const std::string prefix = about.empty() ? "" : about + ": ";
  if (!r.ok()) {
    std::cerr << "fabctl: " << prefix << r.status().message() << "\n";
    return 1;
  }
  json j = json::parse(r->body, nullptr, false);
  std::string msg =
      j.is_object() && j.contains("message") ? j["message"].get<std::string>() : r->body;
  std::cerr << "Error from server (" << r->status << "): " << prefix << msg << "\n";
  return 1;
}

// A scalar for a table cell: strings without quotes.
std::string Plain(const json& v) { return fabrica::CellText(v); }

// o[key] where o is an object and it is one (an array): else an empty one, so that a stored
// `"spec": null` or an odd type reads as empty rather than throwing.
json Obj(const json& o, const char* key) {
  if (!o.is_object()) return json::object();
  auto it = o.find(key);
  return it != o.end() && it->is_object() ? *it : json::object();
}
json Arr(const json& o, const char* key) {
  if (!o.is_object()) return json::array();
  auto it = o.find(key);
  return it != o.end() && it->is_array() ? *it : json::array();
}
// A Node spec's GPUs: its devices, or the shorthand's `gpus: {count: N}`.
size_t NodeGpus(const json& spec) {
  if (const json devices = Arr(spec, "devices"); !devices.empty()) return devices.size();
  const json gpus = Obj(spec, "gpus");
  const auto count = gpus.find("count");
  return count != gpus.end() && count->is_number_unsigned() ? count->get<size_t>() : 0;
}
// A Node spec's GPU memory in all, in MiB (0 where its GPUs' memory is not given).
int64_t NodeGpuMemoryMib(const json& spec) {
  const auto mib = [](const json& o) -> int64_t {
    const json m = o.value("memory", json());
    if (!m.is_string()) return 0;
    auto parsed = fabrica::ParseMemoryMib(m.get<std::string>());
    return parsed.ok() ? parsed->value() : 0;
  };
  if (const json devices = Arr(spec, "devices"); !devices.empty()) {
    int64_t sum = 0;
    for (const json& d : devices) sum += d.is_object() ? mib(d) : 0;
    return sum;
  }
  return static_cast<int64_t>(NodeGpus(spec)) * mib(Obj(spec, "gpus"));
}
// GPU memory as a person reads it: "41Gi", "20.5Gi", "512Mi".
std::string GpuMemory(int64_t mib) {
  char out[32];
  if (mib < 1024 && mib > 0) {
    std::snprintf(out, sizeof(out), "%lldMi", static_cast<long long>(mib));
  } else if (mib % 1024 == 0) {
    std::snprintf(out, sizeof(out), "%lldGi", static_cast<long long>(mib / 1024));
  } else {
    std::snprintf(out, sizeof(out), "%.1fGi", static_cast<double>(mib) / 1024.0);
  }
  return out;
}

// A timestamp as the server writes them ("2026-12-03T17:04:57.169Z") `seconds` later, in the
// same form; "" where it cannot be read.
// Milli-GPUs as GPUs: 513 -> "0.513", 2000 -> "2".
std::string GpusOfMilli(int64_t milli) {
  char g[32];
  std::snprintf(g, sizeof(g), "%g", static_cast<double>(milli) / 1000.0);
  return g;
}

std::string AddSeconds(const std::string& at, int64_t seconds) {
  std::tm tm{};
  int ms = 0;
  char zone = 0;
  if (std::sscanf(at.c_str(), "%d-%d-%dT%d:%d:%d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7 &&
      std::sscanf(at.c_str(), "%d-%d-%dT%d:%d:%d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &zone) != 7)
    return "";
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t t = timegm(&tm) + static_cast<std::time_t>(seconds);
  std::tm out{};
  gmtime_r(&t, &out);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", out.tm_year + 1900,
                out.tm_mon + 1, out.tm_mday, out.tm_hour, out.tm_min, out.tm_sec, ms);
  return buf;
}

std::string Age(const json& obj) { return obj["metadata"].value("creationTimestamp", ""); }

// Columns padded to their widest cell; `skip_first` leaves the first column out. A watch
// prints later rows under the first table: `width` keeps the columns' widths from one call to
// the next, and `header` false leaves the first row (the header) out.
// `get --no-headers` (kubectl's): tables print their rows without the header line, for scripts.
bool g_no_headers = false;

void PrintRows(const std::vector<std::vector<std::string>>& rows, bool skip_first = false,
               std::vector<size_t>* kept = nullptr, bool header = true) {
  header &= !g_no_headers;
  std::vector<size_t> width = kept ? *kept : std::vector<size_t>();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  }
  if (kept) *kept = width;
  for (size_t r = header ? 0 : 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    for (size_t i = 0; i < row.size(); ++i) {
      if (i == 0 && skip_first) continue;
      // (The last column unpadded: no trailing blanks.)
      const bool last = i + 1 == row.size();
      std::printf("%-*s%s", last ? 0 : static_cast<int>(width[i]), row[i].c_str(),
                  last ? "\n" : "   ");
    }
  }
}

// A watch's table (`fabctl get -w`): each row starts with the event that brought it (ADDED for
// the first listing), later events print rows only, in the first table's columns.
struct WatchTable {
  std::string event;
  bool header = true;
  std::vector<size_t> width;
};

using fabrica::ShownPhase;
using fabrica::StartHold;

// -o wide (`leaves` given: the queue tree's leaves, empty without queues): workloads add the
// QUEUE they wait or run in (spec.queue, else their tenant's when it is a leaf, else unqueued,
// as the scheduler picks it; "-" without queues), PRIORITY and CREATED before the message.
// The nodes' health records (GET .../nodehealth) by node, for the node tables: a node under
// repair, or GPUs out of service, are shown there. Empty without a health controller.
std::map<std::string, json> node_health;
void ReadNodeHealth(HttpClient& http) {
  auto resp = http.Do("GET", "/apis/fabrica.dev/v1/nodehealth");
  if (!resp.ok() || resp->status != 200) return;
  const json list = json::parse(resp->body, nullptr, false);
  for (const json& rec : Arr(list, "items"))
    node_health[Obj(rec, "metadata").value("name", "")] = rec;
}
// ",GPU 3 out of service (repair)"-style words for a node's STATUS, and its lifecycle state
// where the health controller holds it.
// A node's taints, "key=value:Effect" each, with `since` when each NoExecute one was added;
// "-" for none.
std::string TaintList(const json& spec, bool since) {
  std::string out;
  for (const json& t : fabrica::jsonf::List(spec, "taints")) {
    out += std::string(out.empty() ? ""
                       : since     ? ", "
                                   : ",") +
           t.value("key", "") + (t.value("value", "").empty() ? "" : "=" + t.value("value", "")) +
           ":" + t.value("effect", "");
    if (since && t.contains("timeAdded")) out += " (since " + t.value("timeAdded", "") + ")";
  }
  return out.empty() ? "-" : out;
}

std::string HealthWords(const std::string& node) {
  auto it = node_health.find(node);
  return it == node_health.end() ? "" : fabrica::NodeHealthWords(it->second);
}

void PrintTable(const Resource& r, const std::vector<json>& items, bool with_ns,
                const std::set<std::string>* leaves, WatchTable* watch = nullptr) {
  const bool wide = leaves != nullptr;
  std::vector<std::vector<std::string>> rows;
  std::string kind = r.kind;
  if (kind == "Workload") {
    rows.push_back({"NAMESPACE", "NAME", "PHASE", "PODS", "GPUS", "NODES", "MESSAGE"});
    if (wide) rows.back().insert(rows.back().end() - 1, {"QUEUE", "PRIORITY", "CREATED"});
  } else if (kind == "Node") {
    rows.push_back({"NAME", "STATUS", "GPUS", "MODEL", "CPU", "MEMORY", "LEAF"});
    if (wide) rows.back().push_back("TAINTS");
  } else if (kind == "Tenant") {
    rows.push_back({"NAME", "TRUST", "TRUST-DOMAIN", "CREATED"});
    if (wide) rows.back().insert(rows.back().end() - 1, "COST-BUDGET");
  } else if (kind == "Queue") {
    rows.push_back({"NAME", "PARENT", "WEIGHT", "GUARANTEED", "USED", "SHARE", "PENDING", "ACTIVE",
                    "CREATED"});
    // (-o wide: PRIORITY, the over-quota priority, beside the weight it goes before.)
    if (wide) {
      rows.back().insert(rows.back().begin() + 5, {"BORROWED", "BORROWING-LIMIT", "LENDING-LIMIT",
                                                   "DISRUPTION-BUDGET", "COST-BUDGET"});
      rows.back().insert(rows.back().begin() + 3, "PRIORITY");
    }
  } else if (kind == "PriorityClass") {
    rows.push_back(
        {"NAME", "VALUE", "TENANTS", "GLOBAL-DEFAULT", "PREEMPTION", "DESCRIPTION", "CREATED"});
  } else if (kind == "ResourceFlavor") {
    rows.push_back({"NAME", "KIND", "MODELS", "MIG-PROFILES", "GPUS", "CREATED"});
  } else {
    rows.push_back({"NAME", "CREATED"});
  }
  for (const json& o : items) {
    const json meta = Obj(o, "metadata");
    const json spec = Obj(o, "spec");
    const json status = Obj(o, "status");
    if (kind == "Workload") {
      const fabrica::WorkloadCells cells = fabrica::WorkloadColumns(o);
      rows.push_back({meta.value("namespace", ""), meta.value("name", ""), cells.phase, cells.pods,
                      cells.gpus, cells.nodes, status.value("message", "")});
      // (The scheduler's rule, where queues exist.)
      std::string queue = spec.value("queue", "");
      if (wide && !leaves->empty())
        queue = fabrica::WaitingQueue(*leaves, queue, meta.value("namespace", ""));
      if (wide)
        rows.back().insert(rows.back().end() - 1, {fabrica::WorkloadQueue(o, queue),
                                                   Plain(spec.value("priority", json(0))), Age(o)});
    } else if (kind == "Node") {
      const json devs = Arr(spec, "devices");
      std::string ready = fabrica::NodeStatusWords(o);
      ready += HealthWords(meta.value("name", ""));
      rows.push_back({meta.value("name", ""), ready, std::to_string(devs.size()),
                      devs.empty() ? "-" : devs[0].value("model", ""),
                      Plain(spec.value("cpu", json(""))), Plain(spec.value("memory", json(""))),
                      spec.value("leaf", "")});
      if (wide) rows.back().push_back(TaintList(spec, false));
    } else if (kind == "Tenant") {
      rows.push_back({meta.value("name", ""), spec.value("trust", "standard"),
                      spec.value("trustDomain", meta.value("name", "")), Age(o)});
      if (wide) rows.back().insert(rows.back().end() - 1, fabrica::BudgetCell(status));
    } else if (kind == "Queue") {
      // GPUs as the scheduler last wrote them, "<pending>" before its first cycle: the sum, or by
      // flavour ("h100:8,a100-mig:1.284") where more than one has some (a trial read 8 H100s and
      // three 3g.40gb slices summed as 9.284).
      // (One flavour alone but the built-in gpu, named too: a trial read h200:2 as "2".)
      // (Both columns in one form, and BORROWED too: a trial read USED "3" beside GUARANTEED
      // "gpu:4,h200:2".)
      const json flavors = Obj(status, "flavors");
      const bool flavored = fabrica::QueueFlavored(status);
      const auto by_flavor = [&](const char* key) {
        return fabrica::QueueGpus(status, key, flavored);
      };
      const std::string share = fabrica::QueueShare(status);
      rows.push_back({meta.value("name", ""), spec.value("parent", "-"),
                      Plain(spec.value("weight", json(1))), by_flavor("guaranteedGpus"),
                      by_flavor("usedGpus"), share,
                      fabrica::QueueStatusCell(status, "pendingWorkloads"),
                      fabrica::QueueStatusCell(status, "active"), Age(o)});
      if (wide) {
        // BORROWED, the limits, DISRUPTION-BUDGET and COST-BUDGET: as kubectl's wide table
        // (fabrica::QueueBorrowed, fabrica::QueueLimits).
        rows.back().insert(
            rows.back().begin() + 5,
            {fabrica::QueueBorrowed(status), fabrica::QueueLimits(spec, "borrowingLimit"),
             fabrica::QueueLimits(spec, "lendingLimit"),
             Plain(spec.value("disruptionBudget", json("-"))), fabrica::BudgetCell(status)});
        rows.back().insert(rows.back().begin() + 3, Plain(spec.value("priority", json(0))));
      }
    } else if (kind == "PriorityClass") {
      // TENANTS: those who may name it; * every tenant.
      std::string tenants = spec.contains("tenants") ? "" : "*";
      for (const json& t : Arr(spec, "tenants"))
        if (t.is_string()) tenants += (tenants.empty() ? "" : ",") + t.get<std::string>();
      rows.push_back({meta.value("name", ""), Plain(spec.value("value", json("-"))),
                      tenants.empty() ? "<none>" : tenants,
                      spec.value("globalDefault", false) ? "true" : "false",
                      spec.value("preemptionPolicy", "PreemptLowerPriority"),
                      spec.value("description", ""), Age(o)});
    } else if (kind == "ResourceFlavor") {
      const auto joined = [&](const char* key) {
        std::string out;
        for (const json& v : spec.value(key, json::array()))
          out += (out.empty() ? "" : ",") + Plain(v);
        return out.empty() ? std::string("*") : out;
      };
      // GPUS: the fleet's GPUs charged to it, as the scheduler last counted them.
      rows.push_back({meta.value("name", ""), spec.value("kind", "*"), joined("models"),
                      joined("migProfiles"), Plain(status.value("gpus", json("-"))), Age(o)});
    } else {
      rows.push_back({meta.value("name", ""), Age(o)});
    }
  }
  const bool skip_ns = kind == "Workload" && !with_ns;
  if (!watch) {
    PrintRows(rows, skip_ns);
    // A queue's warning (its tree's guarantees past the fleet), as kubectl prints the server's;
    // one the roots share (the trees' guarantees together), once, naming them.
    if (kind == "Queue") {
      std::vector<std::pair<std::string, std::string>> said;  // (warning, queues), in order
      for (const json& o : items)
        if (const json st = Obj(o, "status");
            st.is_object() && st.contains("warning") && st["warning"].is_string()) {
          const std::string warning = st["warning"].get<std::string>();
          const std::string name = o["metadata"].value("name", "");
          auto same = std::find_if(said.begin(), said.end(),
                                   [&](const auto& w) { return w.first == warning; });
          if (same == said.end()) {
            said.push_back({warning, name});
          } else {
            same->second += ", " + name;
          }
        }
      for (const auto& [warning, queues] : said)
        std::cerr << "Warning: queue" << (queues.find(',') == std::string::npos ? " " : "s ")
                  << queues << ": " << warning << "\n";
    }
    return;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (skip_ns) rows[i].erase(rows[i].begin());
    rows[i].insert(rows[i].begin(), i == 0 ? "EVENT" : watch->event);
  }
  PrintRows(rows, false, &watch->width, watch->header);
}

// `s` as a URL's query value: everything but unreserved characters percent-encoded (a
// selector's spaces, parentheses, '!' and '=' travel intact).
std::string QueryEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

void PrintObject(const json& o, const std::string& output) {
  if (output == "json") {
    std::cout << o.dump(2) << "\n";
  } else {
    PrintYaml(o, 0, std::cout);
  }
}

// -o name: kind/name, the kind in lower case, as kubectl prints `clusterqueue.kueue.x-k8s.io/a`.
void PrintName(const Resource& r, const json& o) {
  std::string kind = r.kind;
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const json meta = o.is_object() ? Obj(o, "metadata") : json::object();
  std::cout << kind << "/" << (meta.is_object() ? meta.value("name", "") : "") << "\n";
}

// kubectl's templated outputs: -o jsonpath=TEMPLATE (the template applied to the list, or to
// the one object named) and -o custom-columns=HEADER:PATH,... (a column a path, each item a row;
// <none> where the path selects nothing).
bool Templated(const std::string& output) {
  return output.rfind("jsonpath=", 0) == 0 || output.rfind("custom-columns=", 0) == 0;
}

fabrica::Result<std::vector<std::pair<std::string, std::string>>> Columns(
    const std::string& output) {
  std::vector<std::pair<std::string, std::string>> columns;
  const std::string spec = output.substr(std::string("custom-columns=").size());
  for (size_t at = 0; at <= spec.size();) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string column = spec.substr(at, comma - at);
    at = comma + 1;
    const size_t colon = column.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == column.size())
      return fabrica::InvalidArgument("custom-columns: '" + column +
                                      "': expected HEADER:PATH, as NAME:.metadata.name");
    RETURN_IF_ERROR(fabrica::jsonpath::Select(json::object(), column.substr(colon + 1)).status());
    columns.emplace_back(column.substr(0, colon), column.substr(colon + 1));
  }
  return columns;
}

// What -o and --sort-by say, read before anything is fetched: one that cannot be read is a
// usage error that names what is wrong in it.
bool OutputReadable(const Globals& g) {
  fabrica::Status bad;
  std::string which = "-o";
  if (g.output == "jsonpath=")
    bad = fabrica::InvalidArgument(
        "jsonpath= is given no template, as jsonpath='{.items[*]"
        ".metadata.name}'");
  if (g.output.rfind("jsonpath=", 0) == 0 && bad.ok())
    bad = fabrica::jsonpath::Render(g.output.substr(9), json::object()).status();
  if (g.output.rfind("custom-columns=", 0) == 0) bad = Columns(g.output).status();
  if (bad.ok() && !g.sort_by.empty()) {
    bad = fabrica::jsonpath::Select(json::object(), g.sort_by).status();
    which = "--sort-by";
  }
  if (bad.ok()) return true;
  std::cerr << "fabctl: " << which << ": " << bad.message() << "\n";
  return false;
}

// `doc` (a list, or the one object named) printed by -o jsonpath=, or `items` by
// -o custom-columns= (`header`: with its header line; `width`: the columns' widths, kept from one
// call to the next as a watch prints its rows under the first). False, said, where the template
// fails on `doc` (an index past an array's end, as kubectl's).
bool PrintTemplated(const Globals& g, const json& doc, const std::vector<json>& items,
                    bool header = true, std::vector<size_t>* width = nullptr) {
  if (g.output.rfind("jsonpath=", 0) == 0) {
    auto text = fabrica::jsonpath::Render(g.output.substr(9), doc);
    if (!text.ok()) {
      std::cout << std::flush;
      std::cerr << "fabctl: -o: " << text.status().message() << "\n";
      return false;
    }
    std::cout << *text;
    return true;
  }
  auto columns = Columns(g.output);
  if (!columns.ok()) return false;
  std::vector<std::vector<std::string>> rows(1);
  for (const auto& [head, path] : *columns) rows.front().push_back(head);
  for (const json& o : items) {
    rows.emplace_back();
    for (const auto& [head, path] : *columns) {
      auto found = fabrica::jsonpath::Select(o, path);
      std::string cell;
      for (const json& v : found.ok() ? *found : std::vector<json>()) {
        if (!cell.empty()) cell += ',';
        cell += fabrica::jsonpath::Text(v);
      }
      rows.back().push_back(found.ok() && !found->empty() ? cell : "<none>");
    }
  }
  PrintRows(rows, false, width, header);
  return true;
}

// --sort-by: items in the order of the value the path selects in each (the first, where it
// selects several): numbers as numbers, quantities by their amount as kubectl sorts them ("32"
// before "224" cores, "80Gi" before "141Gi"), the rest as their text (RFC 3339 times sort by
// it); items where it selects nothing first, as kubectl puts them. A stable sort: ties keep the
// server's order. False, said, where it selects nothing in any item: a misspelt path, as kubectl
// refuses it, not the server's order passed off as sorted.
bool SortItems(const Globals& g, std::vector<json>& items) {
  if (g.sort_by.empty()) return true;
  bool any = items.empty();
  struct Key {
    int rank = 0;  // 0: nothing selected; 1: a number or count of cores; 2: memory; 3: text
    double amount = 0;
    std::string text;
    bool operator<(const Key& o) const {
      if (rank != o.rank) return rank < o.rank;
      return rank == 3 ? text < o.text : amount < o.amount;
    }
  };
  std::vector<std::pair<Key, json>> keyed;
  for (json& o : items) {
    Key k;
    auto found = fabrica::jsonpath::Select(o, g.sort_by);
    if (found.ok() && !found->empty()) {
      any = true;
      const json& v = found->front();
      if (v.is_object() || v.is_array()) {
        // (As kubectl's "unsortable type": a list or an object has no order of its own.)
        std::cerr << "fabctl: --sort-by: " << g.sort_by
                  << " selects a list or an object, which does not sort: name a field in it\n";
        return false;
      }
      k.text = fabrica::jsonpath::Text(v);
      if (v.is_number()) {
        k = {1, v.get<double>(), k.text};
      } else if (auto cpu = fabrica::ParseMilliCpu(k.text); v.is_string() && cpu.ok()) {
        k = {1, static_cast<double>(cpu->value()) / 1000.0, k.text};
      } else if (auto mib = fabrica::ParseMemoryMib(k.text); v.is_string() && mib.ok()) {
        k = {2, static_cast<double>(mib->value()), k.text};
      } else {
        k.rank = 3;
      }
    }
    keyed.emplace_back(std::move(k), std::move(o));
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < items.size(); ++i) items[i] = std::move(keyed[i].second);
  if (!any)
    std::cerr << "fabctl: --sort-by: no item has a value at " << g.sort_by
              << " (fabctl get -o json shows the fields there are)\n";
  return any;
}

// Events about workloads (what happened to them, when, why), oldest first, as kubectl get
// events prints them; of one workload where `name` is given.
// The events' field selector: one workload's (`name`), and --field-selector's terms.
std::string EventSelector(const Globals& g, const std::string& name) {
  std::string terms = name.empty() ? "" : "involvedObject.name=" + name;
  if (!g.field_selector.empty()) terms += (terms.empty() ? "" : ",") + g.field_selector;
  return terms.empty() ? "" : "fieldSelector=" + QueryEscape(terms);
}

fabrica::Result<json> FetchEvents(const Globals& g, HttpClient& http, const std::string& ns,
                                  const std::string& name) {
  std::string path =
      std::string("/apis/fabrica.dev/v1") + (ns.empty() ? "" : "/namespaces/" + ns) + "/events";
  if (const std::string selector = EventSelector(g, name); !selector.empty())
    path += "?" + selector;
  auto resp = http.Do("GET", path);
  if (!resp.ok()) return resp.status();
  if (resp->status != 200) {
    // (Said as every other command says a server's refusal.)
    const json j = json::parse(resp->body, nullptr, false);
    const std::string message = j.is_object() && j.contains("message") && j["message"].is_string()
                                    ? j["message"].get<std::string>()
                                    : resp->body;
    return fabrica::Status(fabrica::StatusCode::kUnavailable,
                           "Error from server (" + std::to_string(resp->status) + "): " + message);
  }
  json list = json::parse(resp->body, nullptr, false);
  if (!list.is_object())
    return fabrica::Status(fabrica::StatusCode::kUnavailable, "events: not a JSON object");
  return list;
}

using fabrica::EventMessage;

// Events by when they were last seen, oldest first (kubectl events' order); ties keep the
// server's order. RFC 3339 times in UTC compare as strings.
json ByLastSeen(json items) {
  if (!items.is_array()) return json::array();
  std::stable_sort(items.begin(), items.end(), [](const json& a, const json& b) {
    return a.value("lastTimestamp", "") < b.value("lastTimestamp", "");
  });
  return items;
}

int GetEvents(Globals& g, HttpClient& http, const std::string& name) {
  const std::string ns = g.all_namespaces ? "" : g.ns;
  if (!OutputReadable(g)) return 1;
  fabrica::Result<json> list = FetchEvents(g, http, ns, name);
  if (!list.ok()) {
    const std::string& m = list.status().message();
    std::cerr << (m.rfind("Error from server", 0) == 0 ? "" : "fabctl: ") << m << "\n";
    return 1;
  }
  json items = ByLastSeen(Arr(*list, "items"));
  std::vector<size_t> width;  // the table's columns, kept for a watch's later rows
  if (!g.sort_by.empty()) {
    std::vector<json> sorted(items.begin(), items.end());
    if (!SortItems(g, sorted)) return 1;
    items = sorted;
  }
  if (Templated(g.output)) {
    // (A watch's: each event's object as it comes, the custom columns' header once.)
    json doc = *list;
    doc["items"] = items;
    if (!g.watch) return PrintTemplated(g, doc, items) ? 0 : 1;
    if (g.output.rfind("custom-columns=", 0) == 0) {
      PrintTemplated(g, doc, {items.begin(), items.end()}, true, &width);
    } else {
      for (const json& e : items) PrintTemplated(g, e, {e});
    }
  } else if (g.watch && g.output == "json") {
    // (One event a line, what is there first as ADDED: as `get -w -o json` of other kinds.)
    for (const json& e : items)
      std::cout << json{{"type", "ADDED"}, {"object", e}}.dump() << std::endl;
  } else if (g.output == "json" || g.output == "yaml") {
    PrintObject(*list, g.output);
    if (!g.watch) return 0;
  } else if (items.empty() && !g.watch) {
    std::cerr << "No events found.\n";
    return 0;
  }
  const auto row = [](const json& e) {
    const json about = Obj(e, "involvedObject");
    return std::vector<std::string>{
        about.value("namespace", ""), e.value("lastTimestamp", ""),          e.value("type", ""),
        e.value("reason", ""),        "workload/" + about.value("name", ""), EventMessage(e)};
  };
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"});
  for (const json& e : items) rows.push_back(row(e));
  if (g.output != "json" && g.output != "yaml" && !Templated(g.output))
    PrintRows(rows, /*skip_first=*/!ns.empty(), &width);
  if (!g.watch) return 0;
  // `get events -w` (kubectl's): each event recorded or counted again after the list, as it
  // happens; a watch quiet for the client's timeout opens again from the last version it saw.
  std::fflush(stdout);
  std::string rv = Obj(*list, "metadata").value("resourceVersion", "0");
  std::string path =
      std::string("/apis/fabrica.dev/v1") + (ns.empty() ? "" : "/namespaces/" + ns) + "/events";
  path += "?watch=true";
  if (const std::string selector = EventSelector(g, name); !selector.empty())
    path += "&" + selector;
  const auto show = [&](const json& e) {
    if (Templated(g.output)) {
      PrintTemplated(g, e["object"], {e["object"]}, false, &width);
    } else if (g.output == "json") {
      std::cout << e.dump() << std::endl;
    } else if (g.output == "yaml") {
      std::cout << "---\n";
      PrintObject(e, "yaml");
    } else {
      PrintRows({rows.front(), row(e["object"])}, !ns.empty(), &width, /*header=*/false);
    }
    std::fflush(stdout);
  };
  const auto version_of = [](const json& o) {
    const std::string v = Obj(o, "metadata").value("resourceVersion", "0");
    return v.find_first_not_of("0123456789") == std::string::npos && !v.empty() && v.size() < 20
               ? std::stoull(v)
               : 0ULL;
  };
  while (true) {
    bool gone = false;  // the server no longer has what changed since `rv` (410)
    std::string error;  // an ERROR line's message, or a refusal's
    auto status = http.Stream(path + "&resourceVersion=" + rv, [&](const std::string& line) {
      json e = json::parse(line, nullptr, false);
      if (!e.is_object()) return true;
      if (e.value("kind", "") == "Status") {  // (a refused watch's body)
        error = e.value("message", line);
        return true;
      }
      if (!e.contains("object") || !e["object"].is_object()) return true;
      const json& o = e["object"];
      if (e.value("type", "") == "ERROR") {
        gone = o.value("code", 0) == 410;
        error = o.value("message", line);
        return false;
      }
      rv = Obj(o, "metadata").value("resourceVersion", rv);
      show(e);
      return true;
    });
    if (gone) {
      // As a reflector does: list again, and show what changed since the last version seen.
      fabrica::Result<json> again = FetchEvents(g, http, ns, name);
      if (!again.ok()) {
        std::cerr << "fabctl: " << again.status().message() << "\n";
        return 1;
      }
      const uint64_t seen = version_of({{"metadata", {{"resourceVersion", rv}}}});
      for (const json& e : ByLastSeen(Arr(*again, "items")))
        if (version_of(e) > seen)
          show({{"type", e.value("count", 1) > 1 ? "MODIFIED" : "ADDED"}, {"object", e}});
      rv = Obj(*again, "metadata").value("resourceVersion", "0");
      continue;
    }
    if (status.ok() && *status == 200 && error.empty()) return 0;
    if (!status.ok() && status.status().message().find(": no data for ") != std::string::npos)
      continue;
    std::cerr << (status.ok() && *status != 200
                      ? "Error from server (" + std::to_string(*status) + "): " + error
                      : "fabctl: " + (error.empty() ? status.status().message() : error))
              << "\n";
    return 1;
  }
}

// Workloads named without -n: the tenant of the one workload of each name among those the
// user may read, where that is one tenant for them all (a trial's tenant user could list its
// work but not name one; kubectl takes its context's namespace). False, with the usage error
// said, where a name is in no tenant or several, or the names are in different tenants.
bool TakeTenantOf(Globals& g, HttpClient& http, const std::vector<std::string>& names) {
  if (!g.ns.empty() || g.all_namespaces || names.empty()) return true;
  std::map<std::string, std::set<std::string>> in;  // name -> tenants with one of that name
  auto all = http.Do("GET", "/apis/fabrica.dev/v1/workloads");
  if (all.ok() && all->status == 200) {
    const json list = json::parse(all->body, nullptr, false);
    for (const json& w : list.is_object() ? Arr(list, "items") : json::array()) {
      const json meta = Obj(w, "metadata");
      const std::string name = meta.value("name", "");
      if (std::find(names.begin(), names.end(), name) != names.end())
        in[name].insert(meta.value("namespace", ""));
    }
  }
  std::set<std::string> tenants;
  std::string several;
  for (const std::string& name : names) {
    for (const std::string& t : in[name]) tenants.insert(t);
    if (in[name].size() > 1) {
      several = name + " is in";
      for (const std::string& t : in[name]) several += " " + t;
    }
  }
  if (tenants.size() == 1 && several.empty() && !tenants.begin()->empty()) {
    g.ns = *tenants.begin();
    return true;
  }
  std::cerr << "fabctl: a workload is named within its tenant: give -n TENANT"
            << (several.empty() ? "" : " (" + several + ")") << "\n";
  return false;
}
bool TakeTenantOf(Globals& g, HttpClient& http, const std::string& name) {
  return TakeTenantOf(g, http, std::vector<std::string>{name});
}

int Get(Globals& g, HttpClient& http, const std::string& what,
        const std::vector<std::string>& names) {
  const std::string name = names.empty() ? "" : names.front();
  if (what == "events" || what == "event" || what == "ev") {
    if (names.size() > 1) {
      std::cerr << "fabctl: get events takes one workload's name or none\n";
      return 2;
    }
    return GetEvents(g, http, name);
  }
  if (!OutputReadable(g)) return 1;
  if (!name.empty() && (!g.selector.empty() || !g.field_selector.empty())) {
    // (As kubectl: a selector picks from a list; names pick for themselves.)
    std::cerr << "fabctl: -l and --field-selector select from a list: give no name with them\n";
    return 2;
  }
  const Resource* r = ResourceByName(what);
  if (!r) {
    std::cerr << "fabctl: unknown resource type '" << what
              << "' (workloads, tenants, nodes, queues, leases, priorityclasses, "
                 "resourceflavors, events)\n";
    return 2;
  }
  if (r->namespaced && !name.empty() && !TakeTenantOf(g, http, names)) return 2;
  const std::string ns = g.all_namespaces ? "" : g.ns;
  // -o wide: the queue tree's leaves, for the queue each workload waits in (none readable: as
  // without queues).
  std::optional<std::set<std::string>> leaves;
  if (g.output == "wide" && (std::string(r->kind) == "Queue" || std::string(r->kind) == "Node"))
    leaves.emplace();  // (wide)
  if (g.output == "wide" && std::string(r->kind) == "Workload") {
    leaves.emplace();
    if (auto q = http.Do("GET", "/apis/fabrica.dev/v1/queues"); q.ok() && q->status == 200) {
      const json list = json::parse(q->body, nullptr, false);
      std::set<std::string> parents;
      for (const json& o : list.is_object() ? Arr(list, "items") : json::array())
        if (o.is_object()) {
          leaves->insert(Obj(o, "metadata").value("name", ""));
          parents.insert(Obj(o, "spec").value("parent", ""));
        }
      for (const std::string& p : parents) leaves->erase(p);
    }
  }
  const std::set<std::string>* wide = leaves ? &*leaves : nullptr;
  if (std::string(r->kind) == "Node") ReadNodeHealth(http);
  if (names.size() > 1 && g.watch) {
    std::cerr << "fabctl: -w watches one object or a list: give one name or none\n";
    return 2;
  }
  // One name with -w: its tenant's list watched, its events alone shown (as kubectl's `get
  // pod NAME -w`; before, it printed the object once and returned).
  const std::string only = g.watch ? name : "";
  if (!name.empty() && only.empty()) {
    // Several names, as kubectl takes them: those found are shown (in one table, or a List
    // in JSON or YAML), each one not found is an error, and the exit status is 1 if any was.
    std::vector<json> found;
    int rc = 0;
    for (const std::string& n : names) {
      auto resp = http.Do("GET", CollectionPath(*r, ns) + "/" + n);
      if (!resp.ok() || resp->status != 200) {
        rc = Failed(resp);
        continue;
      }
      found.push_back(json::parse(resp->body));
    }
    if (found.empty()) return rc;
    if (!SortItems(g, found)) return 1;
    if (Templated(g.output)) {
      if (!PrintTemplated(g,
                          names.size() == 1
                              ? found.front()
                              : json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", found}},
                          found))
        return 1;
    } else if (g.output == "json" || g.output == "yaml") {
      if (names.size() == 1)
        PrintObject(found.front(), g.output);
      else
        PrintObject({{"apiVersion", "v1"}, {"kind", "List"}, {"items", found}}, g.output);
    } else if (g.output == "name") {
      for (const json& o : found) PrintName(*r, o);
    } else {
      PrintTable(*r, found, r->namespaced && g.all_namespaces, wide);
    }
    return rc;
  }
  std::string path = CollectionPath(*r, ns);
  if (!g.selector.empty()) path += "?labelSelector=" + QueryEscape(g.selector);
  if (!g.field_selector.empty())
    path += std::string(path.find('?') == std::string::npos ? "?" : "&") +
            "fieldSelector=" + QueryEscape(g.field_selector);
  auto resp = http.Do("GET", path);
  if (!resp.ok() || resp->status != 200) return Failed(resp);
  json list = json::parse(resp->body);
  const auto named = [&](const json& o) {
    return only.empty() || Obj(o, "metadata").value("name", "") == only;
  };
  std::vector<json> items;
  for (const json& o : list["items"])
    if (named(o)) items.push_back(o);
  if (!SortItems(g, items)) return 1;
  if (!g.sort_by.empty() && only.empty()) list["items"] = items;
  if (!only.empty() && items.empty()) {
    std::cerr << "Error from server (404): " << r->kind << " '" << only << "' not found\n";
    return 1;
  }
  WatchTable table{"ADDED", true, {std::string("MODIFIED").size()}};
  std::vector<size_t> columns;  // -o custom-columns' widths, kept for a watch's later rows
  // What the watch has shown (tenant/name), as an informer keeps it: a DELETED for anything else
  // is none of its business (the server says so of what left the selection while the watch was
  // reopened, not knowing whether it was shown).
  std::set<std::string> shown;
  const auto key_of = [](const json& o) {
    const json meta = Obj(o, "metadata");
    return meta.value("namespace", "") + "/" + meta.value("name", "");
  };
  for (const json& o : items) shown.insert(key_of(o));
  if (Templated(g.output) && !g.watch) {
    if (!PrintTemplated(g, list, items)) return 1;
  } else if (Templated(g.output)) {
    // (A watch's: each object as it comes, the custom columns' header once.)
    if (g.output.rfind("custom-columns=", 0) == 0) {
      PrintTemplated(g, list, items, true, &columns);
    } else {
      for (const json& o : items) PrintTemplated(g, o, {o});
    }
  } else if (g.watch && g.output == "json") {
    // A watch in JSON is one stream of events, one a line (jq reads it as it comes): what is
    // there first as ADDED, as a watch from version 0 would say it.
    for (const json& o : items)
      std::cout << json{{"type", "ADDED"}, {"object", o}}.dump() << std::endl;
  } else if (g.watch && g.output == "yaml") {
    // ... and in YAML one document an event from the start, as the later ones (a trial saw a
    // WorkloadList first, then {object, type} documents).
    for (const json& o : items) {
      std::cout << "---\n";
      PrintObject(json{{"type", "ADDED"}, {"object", o}}, "yaml");
    }
  } else if (g.output == "json" || g.output == "yaml") {
    PrintObject(list, g.output);
  } else if (g.output == "name") {
    for (const json& o : items) PrintName(*r, o);
  } else if (items.empty() && !g.watch) {
    // (As kubectl: no header over nothing.)
    std::cerr << "No resources found" << (r->namespaced && !ns.empty() ? " in tenant " + ns : "")
              << ".\n";
  } else {
    PrintTable(*r, items, r->namespaced && ns.empty(), wide, g.watch ? &table : nullptr);
  }
  if (!g.watch) return 0;
  // (What is there now goes out at once, to a pipe or file too, not with the first change: a
  // trial's `get wl -w | grep` stayed silent on a quiet fleet.)
  std::cout << std::flush;
  std::fflush(stdout);
  table.header = false;
  std::string rv = list["metadata"].value("resourceVersion", "0");
  // A watch that hears nothing for the client's timeout is opened again from the last version
  // it saw, so that it stays open as kubectl's does on a quiet fleet.
  while (true) {
    auto status =
        http.Stream(path + (path.find('?') == std::string::npos ? "?" : "&") +
                        "watch=true&resourceVersion=" + rv,
                    [&](const std::string& line) {
                      json e = json::parse(line, nullptr, false);
                      if (e.is_discarded()) return true;
                      if (const json o = Obj(e, "object");
                          o.is_object() && o.contains("metadata") && o["metadata"].is_object() &&
                          o["metadata"].contains("resourceVersion") &&
                          o["metadata"]["resourceVersion"].is_string())
                        rv = o["metadata"]["resourceVersion"].get<std::string>();
                      if (!named(Obj(e, "object"))) return true;  // (another object's)
                      if (e.value("type", "") == "DELETED") {
                        if (!shown.erase(key_of(Obj(e, "object")))) return true;
                      } else {
                        shown.insert(key_of(Obj(e, "object")));
                      }
                      if (Templated(g.output)) {
                        PrintTemplated(g, e["object"], {e["object"]}, false, &columns);
                      } else if (g.output == "json") {
                        std::cout << e.dump() << std::endl;
                      } else if (g.output == "yaml") {
                        std::cout << "---\n";
                        PrintObject(e, "yaml");
                      } else if (g.output == "name") {
                        PrintName(*r, Obj(e, "object"));
                        std::cout << std::flush;
                      } else {
                        table.event = e.value("type", "");
                        PrintTable(*r, {e["object"]}, r->namespaced && ns.empty(), wide, &table);
                      }
                      std::fflush(stdout);
                      return true;
                    });
    if (status.ok()) return 0;
    if (status.status().message().find(": no data for ") != std::string::npos) continue;
    std::cerr << "fabctl: " << status.status().message() << "\n";
    return 1;
  }
}

fabrica::Result<std::vector<json>> ReadManifestText(const std::string& file,
                                                    const std::string& text);

// The objects of a manifest file, of every .yaml, .yml and .json file of a directory (in name
// order, as kubectl reads one), or of standard input ("-"). None at all is an error.
fabrica::Result<std::vector<json>> ReadManifests(const std::string& file) {
  std::vector<json> out;
  std::error_code ec;
  if (file == "-") {
    std::ostringstream in;
    in << std::cin.rdbuf();
    ASSIGN_OR_RETURN(out, ReadManifestText("<stdin>", in.str()));
  } else if (std::filesystem::is_directory(file, ec)) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(file, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json"))
        files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      auto text = fabrica::sim::ReadFile(f);
      if (!text.ok()) return text.status();
      ASSIGN_OR_RETURN(std::vector<json> docs, ReadManifestText(f, *text));
      out.insert(out.end(), docs.begin(), docs.end());
    }
  } else {
    auto text = fabrica::sim::ReadFile(file);
    if (!text.ok()) return text.status();
    ASSIGN_OR_RETURN(out, ReadManifestText(file, *text));
  }
  if (out.empty())
    return fabrica::InvalidArgument((file == "-" ? std::string("<stdin>") : file) +
                                    ": no objects in it (a YAML or JSON document with apiVersion, "
                                    "kind, metadata)");
  return out;
}

fabrica::Result<std::vector<json>> ReadManifestText(const std::string& file,
                                                    const std::string& text) {
  std::vector<json> out;
  // A JSON document is read as JSON, so that an error in it is told as one, where it is (YAML's
  // reader would call it malformed YAML, at another line). A flow-style YAML map that is not
  // JSON is read as YAML.
  std::string json_error;
  if (const size_t first = text.find_first_not_of(" \t\r\n");
      first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    std::string twice;
    json j = fabrica::jsonf::ParseNoDuplicateKeys(text, &twice);
    if (!twice.empty())
      return fabrica::InvalidArgument(file + ": key \"" + twice +
                                      "\" is given twice in one JSON object");
    if (!j.is_discarded()) {
      if (!j.is_object())
        return fabrica::InvalidArgument(file +
                                        ": a document must be an object (apiVersion, kind, "
                                        "metadata, spec)");
      if (!j.contains("kind") || !j["kind"].is_string()) j["kind"] = "";
      if (j["kind"] != "WorkloadList" && j["kind"] != "List") return std::vector<json>{j};
      for (json item : j.contains("items") && j["items"].is_array() ? j["items"] : json::array()) {
        if (!item.is_object())
          return fabrica::InvalidArgument(file +
                                          ": items: each must be an object (apiVersion, "
                                          "kind, metadata, spec)");
        if (!item.contains("kind") || !item["kind"].is_string()) item["kind"] = "";
        out.push_back(std::move(item));
      }
      return out;
    }
    // (Only where it is one document: in a YAML stream the error may be in another.)
    const bool one_document = text.rfind("---", 0) != 0 && text.find("\n---") == std::string::npos;
    try {
      if (one_document) {
        const json again = json::parse(text);  // (throws: it was discarded)
        (void)again;
      }
    } catch (const json::parse_error& e) {
      const std::string what = e.what();
      const size_t at = what.find("parse error");
      json_error = file + ": malformed JSON: " + (at == std::string::npos ? what : what.substr(at));
    }
  }
  try {
    size_t left = fabrica::YamlValueBudget(text);  // (for all its documents)
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      if (doc.IsNull()) continue;
      // (Each an object with a string kind, so that what reads them cannot throw.)
      const auto object = [&](json o) -> fabrica::Result<json> {
        if (!o.is_object())
          return fabrica::InvalidArgument(file + ":" + std::to_string(doc.Mark().line + 1) +
                                          ": a document must be an object (apiVersion, kind, "
                                          "metadata, spec)");
        if (!o.contains("kind") || !o["kind"].is_string()) o["kind"] = "";
        return o;
      };
      ASSIGN_OR_RETURN(json j, object(YamlToJson(doc, left)));
      if (j["kind"] == "WorkloadList" || j["kind"] == "List") {
        const json items = j.contains("items") && j["items"].is_array() ? j["items"] : json();
        for (const json& item : items) {
          ASSIGN_OR_RETURN(json o, object(item));
          out.push_back(std::move(o));
        }
      } else {
        out.push_back(std::move(j));
      }
    }
  } catch (const YAML::Exception& e) {
    if (!json_error.empty()) return fabrica::InvalidArgument(json_error);
    return fabrica::InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) +
                                    ": malformed YAML: " + e.msg);
  }
  return out;
}

// obj[object][key] when it is a string, else "" (read without throwing: a malformed document
// is the server's to refuse, naming the field).
std::string StringAt(const json& obj, const char* object, const char* key) {
  if (!obj.is_object()) return "";
  const auto o = obj.find(object);
  if (o == obj.end() || !o->is_object()) return "";
  const auto v = o->find(key);
  return v != o->end() && v->is_string() ? v->get<std::string>() : std::string();
}

// The annotation in which `fabctl apply` keeps the manifest it applied (kubectl's
// last-applied-configuration).
constexpr const char* kLastApplied = "fabrica.dev/last-applied-configuration";

// As kubectl's apply, at any depth of an object: a field of `current` that the manifest `put`
// lacks stays where the last apply (`last`, its part at this depth; null where it set nothing
// here) did not set it either, as another writer did (an admin's patched lendingLimit under
// quotas.gpu, which a trial saw a re-apply of the tree's file drop). Lists are replaced whole.
// The paths kept go to `kept`.
void KeepUnapplied(const json& current, const json& last, const std::string& path, json& put,
                   std::vector<std::string>& kept) {
  for (const auto& [key, value] : current.items()) {
    const bool applied_before = last.is_object() && last.contains(key);
    if (!put.contains(key)) {
      if (applied_before) continue;  // (the file dropped it: it goes)
      put[key] = value;
      kept.push_back(path + "." + key);
    } else if (put[key].is_object() && value.is_object()) {
      KeepUnapplied(value, applied_before ? last[key] : json(), path + "." + key, put[key], kept);
    }
  }
}

std::string NamespaceOf(const json& obj, const std::string& fallback) {
  if (std::string ns = StringAt(obj, "metadata", "namespace"); !ns.empty()) return ns;
  if (std::string ns = StringAt(obj, "metadata", "tenant"); !ns.empty()) return ns;
  return fallback;
}

// What kubectl says when -n names one tenant and a file's object another: nothing is written to
// a tenant the command did not name. "" when they agree or either is unsaid.
std::string NamespaceMismatch(const json& obj, const std::string& flag) {
  const std::string own = NamespaceOf(obj, "");
  if (flag.empty() || own.empty() || own == flag) return "";
  return StringAt(obj, "metadata", "name") + ": the tenant of the object, '" + own +
         "', is not the tenant -n names, '" + flag + "'; pass -n " + own + " (or leave -n out)";
}

// The order a file's objects are applied in: ResourceFlavors first (queues' quotas name
// them), then Tenants, then Queues, each after the parent the file also holds (the server
// refuses a queue whose parent does not exist yet), then the rest; otherwise as written.
// Delete -f reverses it.
std::vector<json> ApplyOrder(const std::vector<json>& docs) {
  std::vector<json> flavors, queues, tenants, rest;
  for (const json& d : docs) {
    const std::string kind = d.is_object() ? d.value("kind", "") : "";
    (kind == "ResourceFlavor" ? flavors
     : kind == "Queue"        ? queues
     : kind == "Tenant"       ? tenants
                              : rest)
        .push_back(d);
  }

  const auto name_of = [](const json& q) { return StringAt(q, "metadata", "name"); };
  const auto parent_of = [](const json& q) { return StringAt(q, "spec", "parent"); };
  std::set<std::string> in_file, placed;
  for (const json& q : queues) in_file.insert(name_of(q));
  // Tenants next (queues' spec.tenants name them, and their workloads need them: delete -f
  // takes the workloads first, as the server refuses to delete a tenant that holds any).
  std::vector<json> out = flavors;
  out.insert(out.end(), tenants.begin(), tenants.end());
  // (Each pass places the queues whose parent is placed or not in the file; a cycle is left
  // for the server to refuse, in file order.)
  for (bool progress = true; progress;) {
    progress = false;
    for (json& q : queues) {
      if (q.is_null()) continue;
      const std::string parent = parent_of(q);
      if (!parent.empty() && in_file.count(parent) && !placed.count(parent)) continue;
      placed.insert(name_of(q));
      out.push_back(std::move(q));
      q = json();
      progress = true;
    }
  }
  for (json& q : queues)
    if (!q.is_null()) out.push_back(std::move(q));
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The server's warnings about a write it accepted, as kubectl prints them.
void PrintWarnings(const fabrica::ClientResponse& resp) {
  std::fflush(stdout);  // (after the line that says what was written)
  for (const std::string& w : resp.warnings) std::cerr << "Warning: " << w << "\n";
}

// A tenant given exclusiveNodes while its pods already run beside other tenants' pods: those
// stay (nothing running is moved), which a user would not guess from the flag (a trial).
// Nothing where its caller may not list every tenant's workloads.
void WarnSharedNodes(HttpClient& http, const std::string& tenant, bool newly) {
  auto resp = http.Do("GET", "/apis/fabrica.dev/v1/workloads");
  if (!resp.ok() || resp->status != 200) return;
  const json list = json::parse(resp->body, nullptr, false);
  std::map<std::string, std::pair<bool, bool>> nodes;  // node -> (its pods, others')
  int running = 0;                                     // its workloads that hold GPUs
  for (const json& w : Arr(list, "items")) {
    const std::string phase = Obj(w, "status").value("phase", "");
    if (phase != "Scheduled" && phase != "Running") continue;
    const bool own = Obj(w, "metadata").value("namespace", "") == tenant;
    if (own)
      for (const json& a : Arr(Obj(w, "status"), "assignments"))
        if (!Arr(a, "devices").empty()) {
          ++running;
          break;
        }
    for (const json& a : Arr(Obj(w, "status"), "assignments"))
      if (const std::string n = a.value("node", ""); !n.empty())
        (own ? nodes[n].first : nodes[n].second) = true;
  }
  // Its running work is charged as exclusiveNodes counts it from the scheduler's next cycle,
  // which may take its queues past a guarantee or borrowing limit (a trial's queue went past
  // its borrowing limit with only the line below said).
  if (newly && running > 0)
    std::cerr << "Warning: tenant " << tenant << "'s " << running
              << " running workload(s) are charged as exclusiveNodes counts them from the next "
                 "scheduling cycle (each pod its node's GPUs over how many such pods one node "
                 "holds): nothing running is stopped, but a queue pushed past its borrowing limit "
                 "admits no more of its work until within (fabctl get queues)\n";
  std::string shared;
  int count = 0;
  for (const auto& [n, who] : nodes)
    if (who.first && who.second && count++ < 5) shared += (shared.empty() ? "" : ", ") + n;
  if (count == 0) return;
  std::cerr << "Warning: tenant " << tenant << "'s pods already run beside other tenants' on "
            << count << " node(s) (" << shared << (count > 5 ? ", ..." : "")
            << "): exclusiveNodes keeps others off the nodes its pods land on from now on; "
               "nothing running is moved\n";
}

int Apply(Globals& g, HttpClient& http, const std::string& file) {
  auto docs = ReadManifests(file);
  // (How a failure names where the object came from: a trial read "queues/bad1 (-)".)
  const std::string from = file == "-" ? "standard input" : file;
  if (!docs.ok()) {
    std::cerr << "fabctl: " << docs.status().message() << "\n";
    return 2;
  }
  int rc = 0;
  for (json obj : ApplyOrder(*docs)) {
    if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) {
      std::cerr << "fabctl: " << file
                << ": a document is not an object with metadata: " << obj.dump().substr(0, 80)
                << "\n";
      rc = 1;
      continue;
    }
    // (As kubectl's validation: a manifest says what it is; a trial's file without apiVersion
    // was created.)
    // (ReadManifests gives every document a kind, empty where it has none.)
    const bool versioned = obj.contains("apiVersion"), kinded = !obj.value("kind", "").empty();
    for (const auto& [field, set] : {std::pair{"apiVersion", versioned}, {"kind", kinded}})
      if (!set) {
        std::cerr << "fabctl: " << from << ": " << StringAt(obj, "metadata", "name") << ": "
                  << field << " not set\n";
        rc = 1;
      }
    if (!versioned || !kinded) continue;
    const Resource* r = ResourceByKind(obj.value("kind", ""));
    if (!r) {
      std::cerr << "fabctl: " << from << ": " << StringAt(obj, "metadata", "name")
                << ": unknown kind '" << obj.value("kind", "") << "'\n";
      rc = 1;
      continue;
    }
    if (std::string m = r->namespaced ? NamespaceMismatch(obj, g.ns) : ""; !m.empty()) {
      std::cerr << "fabctl: " << from << ": " << m << "\n";
      rc = 1;
      continue;
    }
    const std::string ns = r->namespaced ? NamespaceOf(obj, g.ns) : "";
    if (r->namespaced && ns.empty()) {
      std::cerr << "fabctl: " << StringAt(obj, "metadata", "name")
                << ": no tenant (metadata.namespace or -n)\n";
      rc = 1;
      continue;
    }
    if (r->namespaced) {
      obj["metadata"].erase("tenant");
      obj["metadata"]["namespace"] = ns;
    }
    const std::string name = StringAt(obj, "metadata", "name");
    // (Checked here too: what is no valid name is no valid URL path either.)
    std::string bad;
    if (fabrica::Status st = fabrica::ValidateName(name); !st.ok()) {
      bad = "metadata.name: " + st.message();
    } else if (r->namespaced) {
      if (st = fabrica::ValidateName(ns); !st.ok()) bad = "metadata.namespace: " + st.message();
    }
    if (!bad.empty()) {
      std::cerr << "fabctl: " << from << ": " << r->kind << " " << bad << "\n";
      rc = 1;
      continue;
    }
    const std::string path = CollectionPath(*r, ns);
    // As kubectl's client-side apply: the manifest as applied is kept in an annotation, so that
    // a later apply leaves alone the spec fields, labels and annotations it never set (one a
    // controller or an admin set: spec.active after a gang's requeue limit, a queue's
    // stopPolicy, a label added by patch) and removes only those an earlier apply did.
    json applied = obj;
    if (applied["metadata"].contains("annotations") &&
        applied["metadata"]["annotations"].is_object())
      applied["metadata"]["annotations"].erase(kLastApplied);
    // (Not what the server owns, where the file is a `get -o yaml`: a trial found a version,
    // a uid and a whole status kept as if the user had set them.)
    applied.erase("status");
    for (const char* owned : {"resourceVersion", "uid", "creationTimestamp", "generation"})
      applied["metadata"].erase(owned);
    if (!obj["metadata"].contains("annotations") || !obj["metadata"]["annotations"].is_object())
      obj["metadata"]["annotations"] = json::object();
    obj["metadata"]["annotations"][kLastApplied] = applied.dump();
    auto existing = http.Do("GET", path + "/" + name);
    fabrica::Result<fabrica::ClientResponse> resp = existing;
    std::string verb;
    const std::string dry = g.dry_run == "server" ? "?dryRun=All" : "";
    if (g.dry_run == "client") {
      if (!existing.ok() || (existing->status != 200 && existing->status != 404)) {
        rc = Failed(existing, std::string(r->plural) + "/" + name + " (" + from + ")");
        continue;
      }
      std::printf("%s/%s %s (dry run)\n", std::string(r->plural).c_str(), name.c_str(),
                  existing->status == 200 ? "configured" : "created");
      continue;
    }
    // (Not found, or not readable by this user: a create says what it may not do.)
    if (existing.ok() && (existing->status == 404 || existing->status == 403)) {
      resp = http.Do("POST", path + dry, obj.dump());
      verb = "created";
      // (It exists and this user may not read it: the read's refusal says more.)
      if (resp.ok() && resp->status == 409 && existing->status == 403 &&
          resp->body.find("already exists") != std::string::npos)
        resp = existing;
    } else if (existing.ok() && existing->status == 200) {
      // Against the version just read; a controller's status write in between (the scheduler
      // rewrites queues' and workloads' status every cycle) makes it stale: read it again.
      // A manifest that gives its resourceVersion (`get -o yaml`, edited) is written against
      // that one, as kubectl's apply: stale, it is refused (409), not applied over what changed
      // since (a trial's second edit of an old copy undid the first).
      const json& given_rv = Obj(obj, "metadata").contains("resourceVersion")
                                 ? obj["metadata"]["resourceVersion"]
                                 : json();
      const bool pinned = given_rv.is_string() && !given_rv.get<std::string>().empty();
      for (int attempt = 0; attempt < 5; ++attempt) {
        if (attempt > 0) {
          existing = http.Do("GET", path + "/" + name);
          if (!existing.ok() || existing->status != 200) {
            resp = existing;
            break;
          }
        }
        json current = json::parse(existing->body);
        json put = obj;
        if (!pinned) put["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"];
        const json last = json::parse(
            StringAt(Obj(current, "metadata"), "annotations", kLastApplied), nullptr, false);
        // (A manifest without a spec sets none of its fields.)
        if (!put.contains("spec") || put["spec"].is_null()) put["spec"] = json::object();
        std::vector<std::string> kept;
        if (current.contains("spec") && current["spec"].is_object() && put["spec"].is_object())
          KeepUnapplied(current["spec"], last.is_object() ? Obj(last, "spec") : json(), "spec",
                        put["spec"], kept);
        // Labels and annotations alike: one another writer added (fabctl patch, an admin's
        // tool) stays; one an earlier apply set and the file dropped goes.
        for (const char* map : {"labels", "annotations"}) {
          json now = Obj(Obj(current, "metadata"), map);
          // (A node's built-in labels, which every read shows, are Fabrica's, not another
          // writer's: kept, a changed GPU model would carry its old label back.)
          if (r->kind == std::string("Node") && std::string(map) == "labels" && now.is_object())
            for (const char* builtin : {"kubernetes.io/hostname", "fabrica.dev/gpu-model"})
              now.erase(builtin);
          if (!now.is_object() || now.empty()) continue;
          json& mine = put["metadata"][map];
          if (mine.is_null()) mine = json::object();
          if (!mine.is_object()) continue;  // (the server's to refuse)
          KeepUnapplied(now, last.is_object() ? Obj(Obj(last, "metadata"), map) : json(),
                        std::string("metadata.") + map, mine, kept);
          if (mine.empty()) put["metadata"].erase(map);
        }
        // As kubectl warns: without the annotation nothing tells a field the file dropped from
        // one another writer set.
        if (!last.is_object() && !kept.empty() && attempt == 0) {
          std::string list;
          for (const std::string& k : kept) list += (list.empty() ? "" : ", ") + k;
          std::cerr << "Warning: " << r->plural << "/" << name << " was not written by fabctl "
                    << "apply (no " << kLastApplied << " annotation): kept " << list
                    << ", which the file does not set\n";
        }
        obj["metadata"]["resourceVersion"] = put["metadata"]["resourceVersion"];
        resp = http.Do("PUT", path + "/" + name + dry, put.dump());
        if (!resp.ok() || resp->status != 409 || pinned) break;
      }
      // The server writes nothing, and keeps the version, when nothing changes. (A dry run
      // keeps it either way: what it would write is compared with what is stored.)
      verb = "configured";
      if (resp.ok() && resp->status == 200) {
        json written = json::parse(resp->body, nullptr, false);
        if (written.is_object() && dry.empty() &&
            written["metadata"].value("resourceVersion", "") ==
                obj["metadata"].value("resourceVersion", "-"))
          verb = "unchanged";
        if (json current = json::parse(existing->body, nullptr, false);
            written.is_object() && !dry.empty() && current.is_object()) {
          written["metadata"].erase("resourceVersion");
          current["metadata"].erase("resourceVersion");
          if (written == current) verb = "unchanged";
        }
      }
    }
    if (!resp.ok() || resp->status >= 300) {
      rc = Failed(resp, std::string(r->plural) + "/" + name + " (" + from + ")");
      // (A wrong or expired token fails every later document the same way: once is enough.)
      if (resp.ok() && resp->status == 401) break;
      continue;
    }
    std::printf("%s/%s %s%s\n", std::string(r->plural).c_str(), name.c_str(), verb.c_str(),
                dry.empty() ? "" : " (server dry run)");
    PrintWarnings(*resp);
    if (std::string(r->kind) == "Tenant" && verb != "unchanged" &&
        Obj(obj, "spec").value("exclusiveNodes", false) == true) {
      // (Turned on now, not kept: its running work's charge changes.)
      bool was = false;
      if (verb != "created" && existing.ok() && existing->status == 200)
        was =
            Obj(json::parse(existing->body, nullptr, false), "spec").value("exclusiveNodes", false);
      WarnSharedNodes(http, name, /*newly=*/!was);
    }
  }
  return rc;
}

// Deletes the objects `file` lists, or those of resource `what` named in `names` (several
// names at once, as kubectl takes them).
int Delete(Globals& g, HttpClient& http, const std::string& what,
           const std::vector<std::string>& names, const std::string& file, bool all) {
  std::vector<std::pair<const Resource*, std::pair<std::string, std::string>>> targets;
  if (all && !file.empty()) {
    std::cerr << "fabctl: delete: --all and -f are either-or\n";
    return 2;
  }
  if (!file.empty()) {
    auto docs = ReadManifests(file);
    if (!docs.ok()) {
      std::cerr << "fabctl: " << docs.status().message() << "\n";
      return 2;
    }
    // (Queues below others first, and flavours after the queues that name them.)
    std::vector<json> order = ApplyOrder(*docs);
    std::reverse(order.begin(), order.end());
    for (const json& obj : order) {
      if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) continue;
      const Resource* r = ResourceByKind(obj.value("kind", ""));
      if (!r) continue;
      if (std::string m = r->namespaced ? NamespaceMismatch(obj, g.ns) : ""; !m.empty()) {
        std::cerr << "fabctl: " << file << ": " << m << "\n";
        return 1;
      }
      targets.push_back(
          {r, {r->namespaced ? NamespaceOf(obj, g.ns) : "", StringAt(obj, "metadata", "name")}});
    }
  } else {
    const Resource* r = ResourceByName(what);
    if (!r || names.empty() == !all) {
      std::cerr
          << "fabctl: usage: fabctl delete RESOURCE (NAME... | --all) [-n TENANT] | -f FILE\n";
      return 2;
    }
    if (all) {
      // Every one of the tenant's (as kubectl's --all in a namespace; a tenant must be named, so
      // that no one deletes every tenant's work by leaving it out).
      if (r->namespaced && g.ns.empty()) {
        std::cerr << "fabctl: delete " << r->plural << " --all: name the tenant (-n TENANT)\n";
        return 2;
      }
      auto list = http.Do("GET", CollectionPath(*r, g.ns));
      if (!list.ok() || list->status != 200) return Failed(list);
      // (Queues below others first: a queue with children is refused.)
      std::map<std::string, std::string> parent;
      const json items = Arr(json::parse(list->body, nullptr, false), "items");
      for (const json& item : items)
        parent[Obj(item, "metadata").value("name", "")] = Obj(item, "spec").value("parent", "");
      const auto depth = [&parent](std::string q) {
        int d = 0;
        for (; d < 64 && parent.count(q) && !parent[q].empty(); ++d) q = parent[q];
        return d;
      };
      std::vector<std::pair<int, std::string>> names_by_depth;
      for (const auto& [name, unused] : parent) names_by_depth.push_back({-depth(name), name});
      std::stable_sort(names_by_depth.begin(), names_by_depth.end());
      for (const auto& [unused, name] : names_by_depth) targets.push_back({r, {g.ns, name}});
      if (targets.empty()) {
        std::cerr << "No resources found" << (r->namespaced ? " in tenant " + g.ns : "") << ".\n";
        return 0;
      }
    }
    for (const std::string& name : names) targets.push_back({r, {g.ns, name}});
  }
  int rc = 0;
  for (const auto& [r, nn] : targets) {
    const std::string path = CollectionPath(*r, nn.first) + "/" + nn.second;
    auto resp = g.dry_run == "client"   ? http.Do("GET", path)
                : g.dry_run == "server" ? http.Do("DELETE", path + "?dryRun=All")
                                        : http.Do("DELETE", path);
    // (--all leaves what is built in, the unqueued queue: the server keeps it, 405.)
    if (all && resp.ok() && resp->status == 405) {
      std::printf("%s/%s kept (built in)\n", r->plural, nn.second.c_str());
      continue;
    }
    // (Listed, then gone before its turn: the built-in unqueued goes with the last queue.)
    if (all && resp.ok() && resp->status == 404) {
      std::printf("%s/%s already gone\n", r->plural, nn.second.c_str());
      continue;
    }
    if (!resp.ok() || resp->status >= 300) {
      rc = Failed(resp);
      continue;
    }
    std::printf("%s/%s deleted%s\n", r->plural, nn.second.c_str(),
                g.dry_run == "client"   ? " (dry run)"
                : g.dry_run == "server" ? " (server dry run)"
                                        : "");
  }
  return rc;
}

// The work on a node and what it holds of the node's `gpus` GPUs and their memory, as kubectl
// describe node's pods and allocated resources (nothing for one who may not list every tenant's
// workloads).
void DescribeNodeWorkloads(HttpClient& http, const std::string& node, size_t gpus,
                           int64_t gpu_memory_mib) {
  auto resp = http.Do("GET", "/apis/fabrica.dev/v1/workloads");
  if (!resp.ok() || resp->status != 200) return;
  const json list = json::parse(resp->body, nullptr, false);
  std::vector<std::vector<std::string>> rows = {
      {"  TENANT", "NAME", "PHASE", "PODS", "GPUS", "GPU-MEMORY"}};
  int64_t total = 0, total_memory = 0;
  for (const json& w : Arr(list, "items")) {
    const json status = Obj(w, "status");
    const std::string phase = status.value("phase", "");
    if (phase != "Scheduled" && phase != "Running") continue;
    const json finished = Obj(status, "finishedPods");
    int pods = 0;
    int64_t milli = 0, memory = 0;
    for (const json& a : Arr(status, "assignments")) {
      // (A pod that completed gave its devices back.)
      if (a.value("node", "") != node ||
          (finished.is_object() && finished.contains(a.value("pod", ""))))
        continue;
      ++pods;
      for (const json& d : Arr(a, "devices")) {
        milli += d.value("gpuMilli", int64_t{0});
        memory += fabrica::jsonf::HeldGpuMemoryMib(d);
      }
    }
    if (pods == 0) continue;
    total += milli;
    total_memory += memory;
    const json meta = Obj(w, "metadata");
    rows.push_back({"  " + meta.value("namespace", ""), meta.value("name", ""), ShownPhase(status),
                    std::to_string(pods), GpusOfMilli(milli),
                    memory > 0 ? GpuMemory(memory) : "-"});
  }
  // (The node's load whoever's work it is: a tenant reads other tenants' as one line.)
  std::vector<std::string> kept;  // free room isolation keeps for some tenants only
  if (auto a = http.Do("GET", "/apis/fabrica.dev/v1/nodeallocations/" + node);
      a.ok() && a->status == 200) {
    const json n = json::parse(a->body, nullptr, false);
    if (n.is_object() && n.contains("openTo"))
      kept.push_back("every free GPU: " + n.value("openTo", ""));
    for (const json& g : Arr(n, "gpus"))
      if (g.contains("openTo") && !n.contains("openTo"))
        kept.push_back("gpu" + std::to_string(g.value("index", -1)) + " (" +
                       GpusOfMilli(1000 - g.value("gpuMilli", int64_t{0})) +
                       " free): " + g.value("openTo", ""));
    if (n.is_object() && n.value("unreadGpuMilli", int64_t{0}) > 0) {
      int64_t all = 0;
      for (const json& g : Arr(n, "gpus")) all += g.value("gpuMilli", int64_t{0});
      const int64_t others = n.value("unreadGpuMilli", int64_t{0});
      const int64_t others_memory = n.value("gpuMemoryMiB", int64_t{0}) - total_memory;
      rows.push_back({"  (others)", "(not yours to read)", "", "", GpusOfMilli(others),
                      others_memory > 0 ? GpuMemory(others_memory) : "-"});
      total = all;
      total_memory = n.value("gpuMemoryMiB", int64_t{0});
    }
  }
  std::printf("Workloads:%s\n", rows.size() == 1 ? "  <none>" : "");
  if (rows.size() > 1) PrintRows(rows);
  std::printf("Allocated:  %s of %zu GPU%s", GpusOfMilli(total).c_str(), gpus,
              gpus == 1 ? "" : "s");
  if (gpu_memory_mib > 0)
    std::printf(", %s of %s of GPU memory", GpuMemory(total_memory).c_str(),
                GpuMemory(gpu_memory_mib).c_str());
  std::printf("\n");
  if (!kept.empty()) std::printf("Open only to (isolation by trust):\n");
  for (const std::string& line : kept) std::printf("  %s\n", line.c_str());
}

// The node's health record (lifecycle state, conditions per node and GPU, transitions), printed
// after its spec; nothing when the server has no health controller.
void DescribeNodeHealth(HttpClient& http, const std::string& name) {
  auto resp = http.Do("GET", "/apis/fabrica.dev/v1/nodes/" + name + "/health");
  if (!resp.ok() || resp->status != 200) return;
  json h = json::parse(resp->body, nullptr, false);
  if (!h.is_object()) return;
  std::printf("Lifecycle:  %s since %s%s\n", h.value("state", "").c_str(),
              h.value("stateSince", "").c_str(),
              h.value("schedulable", false) ? "" : " (takes no new work)");
  if (h.value("action", "NONE") != "NONE")
    std::printf("Action:     %s\n", h.value("action", "").c_str());
  std::printf("GPUs:\n");
  for (const json& g : Arr(h, "gpus")) {
    std::printf("  gpu%-3d %s\n", g.value("index", -1), g.value("state", "").c_str());
  }
  std::printf("Conditions:\n  %-6s %-18s %-6s %-20s %-25s %s\n", "GPU", "TYPE", "STATUS", "REASON",
              "LAST TRANSITION", "MESSAGE");
  for (const json& c : Arr(h, "conditions")) {
    const std::string gpu = c.contains("gpu") ? std::to_string(c.value("gpu", -1)) : "node";
    std::printf("  %-6s %-18s %-6s %-20s %-25s %s\n", gpu.c_str(), c.value("type", "").c_str(),
                c.value("status", "").c_str(), c.value("reason", "").c_str(),
                c.value("lastTransitionTime", "").c_str(), c.value("message", "").c_str());
  }
  const json events = Arr(h, "events");
  if (!events.empty()) std::printf("Events:\n");
  for (const json& e : events) {
    std::printf("  %s gpu%d XID %d %s %s: %s\n", e.value("time", "").c_str(), e.value("gpu", -1),
                e.value("xid", 0), e.value("severity", "").c_str(), e.value("action", "").c_str(),
                e.value("message", "").c_str());
  }
  const json tasks = Arr(h, "tasks");
  if (!tasks.empty()) std::printf("Tasks (for the node's agent; repair for people):\n");
  for (const json& t : tasks) {
    const std::string gpu = t.contains("gpu") ? " gpu" + std::to_string(t.value("gpu", -1)) : "";
    std::printf("  #%lld %s%s since %s\n", static_cast<long long>(t.value("id", int64_t{0})),
                t.value("kind", "").c_str(), gpu.c_str(), t.value("since", "").c_str());
  }
  const json burn_ins = Arr(h, "burnIns");
  if (!burn_ins.empty()) std::printf("Burn-in:\n");
  for (const json& b : burn_ins) {
    std::printf("  %s %s (%s): %s\n", b.value("time", "").c_str(),
                b.value("passed", false) ? "passed" : "FAILED", b.value("source", "").c_str(),
                b.value("summary", "").c_str());
  }
  std::printf("History:\n");
  for (const json& t : Arr(h, "history")) {
    const std::string what =
        t.contains("gpu") ? "gpu" + std::to_string(t.value("gpu", -1)) + " " : std::string();
    std::printf("  %s  %s%s -> %s: %s\n", t.value("time", "").c_str(), what.c_str(),
                t.value("from", "").c_str(), t.value("to", "").c_str(),
                t.value("reason", "").c_str());
  }
}

// A queue as its admin reads it (`kubectl describe clusterqueue`'s facts, in words): where it
// sits in the tree, its policies with their defaults, per resource its quota beside what it
// holds and borrows, and its standing as the scheduler last wrote it.
void DescribeQueue(HttpClient& http, const json& o) {
  const json spec = Obj(o, "spec");
  const json status = Obj(o, "status");
  const std::string name = StringAt(o, "metadata", "name");
  const std::string parent = spec.value("parent", "");
  // The tree: its root and children, from the stored queues.
  std::map<std::string, std::string> parent_of;
  std::map<std::string, std::string> listed_of;  // queue -> its spec.tenants, as words
  std::map<std::string, json> spec_of;
  std::vector<std::string> children;
  const json priority = spec.value("priority", json(0));
  std::vector<std::string> ranked_siblings;  // siblings of another over-quota priority
  if (auto list = http.Do("GET", "/apis/fabrica.dev/v1/queues"); list.ok() && list->status == 200) {
    const json all = json::parse(list->body, nullptr, false);
    for (const json& q : all.is_object() ? Arr(all, "items") : json::array()) {
      const std::string n = StringAt(q, "metadata", "name");
      const json qs = Obj(q, "spec");
      const std::string p = qs.is_object() ? qs.value("parent", "") : "";
      parent_of[n] = p;
      spec_of[n] = qs;
      for (const json& t : Arr(qs, "tenants"))
        listed_of[n] += (listed_of[n].empty() ? "" : ", ") + Plain(t);
      if (!p.empty() && p == name) children.push_back(n);
      if (n != name && p == parent && qs.is_object() && qs.value("priority", json(0)) != priority)
        ranked_siblings.push_back(n + " " + Plain(qs.value("priority", json(0))));
    }
  }
  std::string root = name;
  for (int depth = 0; depth < 64 && !parent_of[root].empty(); ++depth) root = parent_of[root];
  std::printf("Parent:     %s\n",
              parent.empty() ? "(none: the root of its tree)"
                             : (parent + (root != parent ? " (tree " + root + ")" : "")).c_str());
  if (!children.empty()) {
    std::string list;
    for (const std::string& c : children) list += (list.empty() ? "" : ", ") + c;
    std::printf("Children:   %s\n", list.c_str());
  }
  std::string tenants;
  for (const json& t : Arr(spec, "tenants")) tenants += (tenants.empty() ? "" : ", ") + Plain(t);
  // (Who may wait in it or below it: the tenant named after it, and those spec.tenants lists;
  // the built-in unqueued takes everyone's work that names no queue.)
  const json annotations = Obj(Obj(o, "metadata"), "annotations");
  if (annotations.contains("fabrica.dev/built-in")) {
    std::printf("Built in:   %s\n", Plain(annotations["fabrica.dev/built-in"]).c_str());
    std::printf("Tenants:    every tenant (its work that names no queue)\n");
  } else {
    // (The tenant named after it only where one exists: a trial read of a tenant there was
    // none of.)
    auto named = http.Do("GET", "/apis/fabrica.dev/v1/tenants/" + name);
    // (Not known, as to one who may not read tenants: said as before.)
    const bool exists = !named.ok() || named->status != 404;
    std::string who = exists ? "tenant " + name + " (named after it)" : "";
    if (!tenants.empty()) who += (who.empty() ? "listed: " : "; listed: ") + tenants;
    // (And those of the queues above it: a tenant may use any leaf below its queue, or below
    // one that lists it. A trial read "none" of a leaf its tenant's work ran in.)
    int depth = 0;  // (a cycle, as a store written by hand may hold, ends it)
    for (std::string a = parent_of[name]; !a.empty() && a != name && depth < 64;
         a = parent_of[a], ++depth) {
      auto above = http.Do("GET", "/apis/fabrica.dev/v1/tenants/" + a);
      if (above.ok() && above->status == 200)
        who +=
            (who.empty() ? "" : "; ") + ("tenant " + a + " (named after queue " + a + " above it)");
      if (!listed_of[a].empty())
        who += (who.empty() ? "" : "; ") + ("listed by queue " + a + ": " + listed_of[a]);
    }
    std::printf("Tenants:    %s\n",
                who.empty() ? ("none (no tenant is named " + name + ", none is listed)").c_str()
                            : who.c_str());
  }
  std::printf("Weight:     %s%s\n", Plain(spec.value("weight", json(1))).c_str(),
              spec.value("weight", json(1)) == json(0)
                  ? " (it takes idle GPUs past its guarantee only after its siblings of the same "
                    "over-quota priority with a weight)"
                  : "");
  // (Also at 0 where a sibling's differs: a trial read no Priority line for a queue whose
  // sibling of priority 1 went first.)
  if (priority != json(0) || !ranked_siblings.empty()) {
    std::string others;
    for (const std::string& s : ranked_siblings) others += (others.empty() ? "" : ", ") + s;
    std::printf(
        "Priority:   %s over quota (among its siblings, a higher priority takes idle GPUs past "
        "its guarantee first%s)\n",
        Plain(priority).c_str(), others.empty() ? "" : ("; siblings: " + others).c_str());
  }
  // A policy it does not set is its nearest ancestor's that does (the admitter's Build): the
  // spec that holds `key` for it, and ", from queue X above it" where that is an ancestor's.
  const auto in_force = [&](const char* key) -> std::pair<json, std::string> {
    if (spec.contains(key)) return {spec, ""};
    int depth = 0;
    for (std::string a = parent_of[name]; !a.empty() && a != name && depth < 64;
         a = parent_of[a], ++depth)
      if (spec_of[a].is_object() && spec_of[a].contains(key))
        return {spec_of[a], " (from queue " + a + " above it)"};
    return {spec, ""};
  };
  const auto [strategy, strategy_from] = in_force("queueingStrategy");
  std::printf("Strategy:   %s%s\n", strategy.value("queueingStrategy", "BestEffortFIFO").c_str(),
              strategy_from.c_str());
  const auto [preempting, preemption_from] = in_force("preemption");
  const json pre = Obj(preempting, "preemption");
  const json borrow = pre.is_object() ? Obj(pre, "borrowWithinCohort") : json();
  std::string borrow_text = borrow.is_object() ? borrow.value("policy", "Never") : "Never";
  if (borrow.is_object() && borrow.contains("maxPriorityThreshold"))
    borrow_text += " (priority at most " + Plain(borrow["maxPriorityThreshold"]) + ")";
  std::printf("Preemption: withinQueue %s, reclaimWithinCohort %s, borrowWithinCohort %s%s\n",
              pre.is_object() ? pre.value("withinQueue", "LowerPriority").c_str() : "LowerPriority",
              pre.is_object() ? pre.value("reclaimWithinCohort", "Any").c_str() : "Any",
              borrow_text.c_str(), preemption_from.c_str());
  // (A department's counts its whole subtree's: the admitter's BudgetSpent.)
  std::printf("Disruption: %s\n",
              spec.contains("disruptionBudget")
                  ? ("at most " + Plain(spec["disruptionBudget"]) + " of " +
                     (children.empty() ? "its workloads" : "the workloads of the queues below it") +
                     " evicted at once")
                        .c_str()
                  : "no budget");
  const std::string stop = spec.value("stopPolicy", "None");
  std::string why_stopped = stop == "None" ? "" : " (stopPolicy " + stop + ")";
  if (stop == "None" && status.value("active", json()) == json(false)) {
    // Stopped by an ancestor's stopPolicy: which one (a trial saw "false" and no reason).
    std::string parent = spec.value("parent", "");
    for (int depth = 0; !parent.empty() && depth < 32; ++depth) {
      auto up = http.Do("GET", "/apis/fabrica.dev/v1/queues/" + parent);
      if (!up.ok() || up->status != 200) break;
      const json q = json::parse(up->body, nullptr, false);
      const std::string its = Obj(q, "spec").value("stopPolicy", "None");
      if (its != "None") {
        why_stopped = " (its ancestor " + parent + "'s stopPolicy " + its + ")";
        break;
      }
      parent = Obj(q, "spec").value("parent", "");
    }
  }
  std::printf("Active:     %s\n", (Plain(status.value("active", json("-"))) + why_stopped).c_str());
  if (spec.contains("flavorOrder")) {
    std::string order;
    for (const json& f : spec["flavorOrder"]) order += (order.empty() ? "" : ", ") + Plain(f);
    std::printf("Flavours:   tried in order %s\n", order.c_str());
  }
  // Per resource: the guarantee in force (its own, or its children's), the limits its spec
  // sets, what it holds and what of that is past its guarantee (borrowed).
  const json quotas = Obj(spec, "quotas");
  std::vector<std::vector<std::string>> rows = {
      {"RESOURCE", "GUARANTEED", "BORROWING-LIMIT", "LENDING-LIMIT", "USED", "BORROWED"}};
  const auto limit = [&](const std::string& resource, const char* key) {
    return quotas.is_object() && quotas.contains(resource) && quotas[resource].is_object() &&
                   quotas[resource].contains(key)
               ? Plain(quotas[resource][key])
               : std::string("-");
  };
  const auto borrowed = [](const json& used, const json& guaranteed) {
    try {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g",
                    std::max(0.0, std::stod(Plain(used)) - std::stod(Plain(guaranteed))));
      return std::string(buf);
    } catch (const std::exception&) {
      return std::string("-");  // (not a plain number, as 512Gi)
    }
  };
  const json flavors = Obj(status, "flavors");
  if (flavors.is_object() && !flavors.empty()) {
    for (const auto& [flavor, f] : flavors.items()) {
      const json used = f.value("usedGpus", json("-")),
                 guaranteed = f.value("guaranteedGpus", json("-"));
      rows.push_back({flavor + " (GPUs)", Plain(guaranteed), limit(flavor, "borrowingLimit"),
                      limit(flavor, "lendingLimit"), Plain(used), borrowed(used, guaranteed)});
    }
  } else if (status.contains("usedGpus")) {
    const json used = status["usedGpus"], guaranteed = status.value("guaranteedGpus", json("-"));
    rows.push_back({"gpu (GPUs)", Plain(guaranteed), limit("gpu", "borrowingLimit"),
                    limit("gpu", "lendingLimit"), Plain(used), borrowed(used, guaranteed)});
  }
  for (const char* r : {"cpu", "memory"}) {
    const json st = status.value(r, json::object());
    if (!st.is_object() || st.empty()) continue;
    const json used = st.value("used", json("-")), guaranteed = st.value("guaranteed", json("-"));
    // (Memory's too, as a quantity: a trial's 500Gi borrowed read "-".)
    std::string past = fabrica::ResourceBorrowedOf(status, r);
    if (past.empty()) past = "0";
    rows.push_back({std::string(r) + (std::string(r) == "cpu" ? " (cores)" : ""), Plain(guaranteed),
                    limit(r, "borrowingLimit"), limit(r, "lendingLimit"), Plain(used), past});
  }
  if (rows.size() > 1) {
    std::printf("Quotas:\n");
    // A root that borrows GPUs has no lender above it: they are GPUs no tree is guaranteed,
    // taken by a queue within its own guarantee rather than reclaim (a trial read "BORROWED 8"
    // of a root as a contradiction).
    bool root_borrows = false;
    for (size_t i = 1; i < rows.size(); ++i)
      root_borrows |=
          rows[i][0].find("GPUs") != std::string::npos && rows[i][5] != "-" && rows[i][5] != "0";
    root_borrows &= spec.value("parent", "").empty();
    for (auto& row : rows) row.front() = "  " + row.front();
    PrintRows(rows);
    if (root_borrows)
      std::printf(
          "  (a root borrows from no queue above it: these are GPUs no tree is guaranteed, "
          "or, with --lend-across-trees, that other trees leave unused)\n");
  } else {
    std::printf("Quotas:     (the scheduler has not written its standing yet)\n");
  }
  if (status.contains("pendingWorkloads"))
    std::printf("Pending:    %s workload(s) (fabctl pending %s)\n",
                Plain(status["pendingWorkloads"]).c_str(), name.c_str());
  if (status.contains("weightedShare")) {
    std::printf("Fair share: weighted share %s, usage history %s\n",
                Plain(status["weightedShare"]).c_str(),
                Plain(status.value("usageHistory", json("-"))).c_str());
    // How it is made, where the scheduler says (a trial could not check 0.05 from what it saw).
    if (const json beta = status.value("historyWeight", json()),
        share = status.value("dominantShare", json());
        beta.is_number() && share.is_number()) {
      const double b = beta.get<double>();
      char blend[32];
      std::snprintf(blend, sizeof(blend), "%g", 1 - b);
      const std::string made = b > 0 ? "(" + std::string(blend) + " × share now " + Plain(share) +
                                           " + " + Plain(beta) + " × usage history) / weight "
                                     : "share now " + Plain(share) + " / weight ";
      std::printf(
          "            = %s%s (its share now: the largest of its GPUs', CPU's and memory's "
          "share of the fleet); work that fits within its queue's guarantee goes first, then, "
          "among siblings of the same over-quota priority, the lowest share\n",
          made.c_str(), Plain(Obj(o, "spec").value("weight", json(1))).c_str());
    }
  }
  if (status.contains("reclaimMinRuntimeSeconds"))
    std::printf(
        "Reclaim:    a workload's minimum runtime keeps other queues from taking it for at "
        "most %ss%s\n",
        Plain(status["reclaimMinRuntimeSeconds"]).c_str(),
        status.contains("lastReclaimTime")
            ? ("; it last reclaimed at " + Plain(status["lastReclaimTime"])).c_str()
            : "");
  if (status.value("preemptMinRuntimeSeconds", json(0)) != json(0))
    std::printf(
        "Preempt:    its work runs at least %ss before its own queue's work may preempt it\n",
        Plain(status["preemptMinRuntimeSeconds"]).c_str());
  if (status.contains("warning")) std::printf("Warning:    %s\n", Plain(status["warning"]).c_str());
}

int Describe(Globals& g, HttpClient& http, const std::string& what, const std::string& name) {
  const Resource* r = ResourceByName(what);
  if (!r || name.empty()) {
    std::cerr << "fabctl: usage: fabctl describe RESOURCE NAME [-n TENANT]\n";
    return 2;
  }
  if (r->namespaced && !TakeTenantOf(g, http, name)) return 2;
  auto resp = http.Do("GET", CollectionPath(*r, g.ns) + "/" + name);
  if (!resp.ok() || resp->status != 200) return Failed(resp);
  json o = json::parse(resp->body);
  const json status = Obj(o, "status");
  std::printf("Name:       %s\n", o["metadata"].value("name", "").c_str());
  if (r->namespaced) std::printf("Tenant:     %s\n", o["metadata"].value("namespace", "").c_str());
  std::printf("Created:    %s\n", Age(o).c_str());
  // A node's labels, as a workload's nodeSelector matches them (jsonf::NodeLabels).
  if (std::string(r->kind) == "Node") {
    const json labels = fabrica::jsonf::NodeLabels(o);
    std::string line;
    for (const auto& [k, v] : labels.items())
      line += (line.empty() ? "" : ",") + k + "=" + v.get<std::string>();
    std::printf("Labels:     %s\n", line.c_str());
    line = TaintList(Obj(o, "spec"), true);
    std::printf("Taints:     %s\n", line == "-" ? "<none>" : line.c_str());
  }
  // Who keeps new work off it: a person (the API stamps kubectl's or fabctl's cordon), or the
  // health controller through a repair.
  if (std::string(r->kind) == "Node" && Obj(o, "spec").value("unschedulable", false)) {
    const json by =
        Obj(Obj(o, "metadata"), "annotations").value(fabrica::kCordonedByAnnotation, json());
    std::printf("Cordoned:   %s\n",
                by.is_string()
                    ? ("by " + by.get<std::string>() + " (fabctl uncordon " + name + ")").c_str()
                    : "by the health controller (until its repair and burn-in pass)");
  }
  // Held by the scheduler: pods did not start there (status.conditions PodsStarting). (An
  // uncordon lifts it, but not while the health controller's cordon refuses the uncordon.)
  if (const json c = StartHold(status); std::string(r->kind) == "Node" && !c.is_null()) {
    const bool health_cordon =
        Obj(o, "spec").value("unschedulable", false) &&
        !Obj(Obj(o, "metadata"), "annotations").contains(fabrica::kCordonedByAnnotation);
    std::printf("Held:       %s (since %s%s)\n", c.value("message", "").c_str(),
                c.value("lastTransitionTime", "").c_str(),
                health_cordon ? "" : ("; fabctl uncordon " + name + " lifts it").c_str());
  }
  if (std::string(r->kind) == "Workload") {
    // (As `get` shows it; status.phase beside it where the two differ.)
    const std::string shown = ShownPhase(status), stored = status.value("phase", "");
    std::printf("Phase:      %s\n",
                (shown == stored ? shown : shown + " (status.phase " + stored + ")").c_str());
    if (status.contains("message"))
      std::printf("Message:    %s\n", status.value("message", "").c_str());
    if (status.contains("reason"))
      std::printf("Reason:     %s\n", status.value("reason", "").c_str());
    // Waiting for room: the nodes that take no new work now, which its message does not count
    // (a trial read "the most free in one leaf is 8" beside a node that looked empty, held as
    // pods had not started there). Said here rather than in the status, which every waiting
    // workload would have rewritten whenever a node came or went.
    if (const std::string message = status.value("message", "");
        stored == "Pending" && (message.find("most free in one") != std::string::npos ||
                                message.find("lack a free") != std::string::npos ||
                                message.find("room for") != std::string::npos ||
                                message.find("no node can take it") != std::string::npos)) {
      if (auto nodes = http.Do("GET", "/apis/fabrica.dev/v1/nodes");
          nodes.ok() && nodes->status == 200) {
        std::string off;
        for (const json& n : Arr(json::parse(nodes->body, nullptr, false), "items")) {
          const json spec = Obj(n, "spec"), st = Obj(n, "status");
          std::string why;
          for (const json& c : Arr(st, "conditions"))
            if (c.value("type", "") == "Ready" && c.value("status", "") != "True")
              why = "not ready";
          if (why.empty() && !StartHold(st).is_null()) why = "held: pods did not start there";
          if (why.empty() && spec.value("unschedulable", false)) why = "cordoned";
          if (!why.empty())
            off +=
                (off.empty() ? "" : ", ") + Obj(n, "metadata").value("name", "") + " (" + why + ")";
        }
        if (!off.empty())
          std::printf("Not counted: %s — nodes that take no new work now\n", off.c_str());
      }
    }
    if (status.contains("isolation"))
      std::printf("Isolation:  %s\n", status.value("isolation", "").c_str());
    // Admitted: what its queue is charged for its GPUs (status.resourceUsage), beside the
    // compute its pods hold where the two differ.
    if (const json usage = Obj(status, "resourceUsage").value("gpu", json());
        usage.is_string() && (stored == "Scheduled" || stored == "Running")) {
      if (auto charge = fabrica::ParseMilliGpu(usage.get<std::string>()); charge.ok()) {
        int64_t held = 0;
        const json finished = Obj(status, "finishedPods");
        for (const json& a : Arr(status, "assignments"))
          for (const json& d : Arr(a, "devices"))
            if (!a.value("node", "").empty() && !finished.contains(a.value("pod", "")) &&
                d.contains("gpuMilli") && d["gpuMilli"].is_number_integer())
              held += d["gpuMilli"].get<int64_t>();
        std::string why;
        if (charge->value() > held) {
          // The rules that apply: by what its pods ask and what its tenant is.
          bool memory = false, share = false;
          for (const json& ps : Arr(Obj(o, "spec"), "podSets")) {
            const json dev = Obj(ps, "devices");
            memory |= dev.contains("gpuMemory");
            share |= dev.contains("gpuMemory") || dev.contains("gpuMilli");
          }
          bool untrusted = false, exclusive = false;
          if (auto t = http.Do("GET", "/apis/fabrica.dev/v1/tenants/" +
                                          Obj(o, "metadata").value("namespace", ""));
              t.ok() && t->status == 200) {
            const json spec = Obj(json::parse(t->body, nullptr, false), "spec");
            untrusted = spec.value("trust", "") == "untrusted";
            exclusive = spec.value("exclusiveNodes", false) == true;
          }
          std::vector<std::string> rules;
          if (exclusive)
            rules.push_back(
                "its tenant has exclusiveNodes: a pod counts its node's GPUs over how many such "
                "pods one node holds");
          if (memory)
            rules.push_back(
                "a share counts its GPU memory's share of its GPU where that is larger");
          if (untrusted && share)
            rules.push_back(
                "an untrusted tenant's share counts the GPU over how many such "
                "shares fit on one");
          if (rules.empty())
            rules.push_back(
                "a share counts its GPU memory's share where larger, an untrusted "
                "tenant's the GPU no one else may share, a tenant with exclusiveNodes "
                "the nodes it keeps others off");
          why = " (its pods hold " + GpusOfMilli(held) + " of compute: ";
          for (size_t i = 0; i < rules.size(); ++i) why += (i ? "; " : "") + rules[i];
          why += ")";
        }
        // Which queue: the one it names, unless its tenant may no longer use that one (or it
        // is gone): then the built-in unqueued, where what it holds is borrowed.
        const json spec = Obj(o, "spec");
        const std::string queue = Obj(status, "resourceUsage").value("queue", ""),
                          named = spec.value("queue", "");
        const std::string whose = queue.empty() ? "its queue's" : "queue " + queue + "'s";
        std::string moved;
        if (queue == "unqueued" && !named.empty() && named != queue) {
          auto q = http.Do("GET", "/apis/fabrica.dev/v1/queues/" + named);
          const std::string tenant = Obj(o, "metadata").value("namespace", "");
          moved =
              !q.ok() || (q->status != 200 && q->status != 404)
                  ? " (tenant " + tenant + " may no longer use queue " + named + ", or it is gone"
              : q->status == 404 ? " (queue " + named + " is gone"
                                 : " (tenant " + tenant + " may no longer use queue " + named;
          moved += ": it runs on in unqueued)";
        }
        // (Since when, where the queue charged changed while it ran: each is billed its part.)
        const std::string since = Obj(status, "resourceUsage").value("since", "");
        std::printf("Charged:    %s GPUs of %s quota%s%s%s\n", GpusOfMilli(charge->value()).c_str(),
                    whose.c_str(), since.empty() ? "" : (" since " + since).c_str(), moved.c_str(),
                    why.c_str());
      }
    }
    // Reserving room: when it frees by the time limits of the work there.
    if (status.contains("expectedStartTime"))
      std::printf("Starts by:  %s (by the time limits of the work on its planned nodes)\n",
                  status.value("expectedStartTime", "").c_str());
    // Admitted with a time limit: when it reaches it (squeue's end time), counted from its
    // admission.
    if (const int64_t limit = Obj(o, "spec").value("maxRuntimeSeconds", int64_t{0});
        limit > 0 && (stored == "Scheduled" || stored == "Running"))
      if (const std::string ends = AddSeconds(status.value("scheduledTime", ""), limit);
          !ends.empty())
        std::printf("Ends by:    %s (its time limit, %lld s from its admission)\n", ends.c_str(),
                    static_cast<long long>(limit));
    // Started with fewer pods than it asks for (partial admission), and its gang-timeout
    // releases.
    if (const json counts = Arr(status, "admittedCounts"); !counts.empty()) {
      std::string list;
      for (const json& c : counts) list += (list.empty() ? "" : ", ") + Plain(c);
      // (Resized: grown as room freed, or shrunk for others' work, since it started.)
      std::printf("Admitted:   %s pod(s) per pod set (%s)\n", list.c_str(),
                  status.contains("resizedTime") ? "elastic: resized since it started"
                                                 : "partial admission");
    }
    // Pods its nodes report started, while some have not; pods that completed while others of
    // it run (their devices are free for other work, but while pods an elastic shrink took
    // stop), or before it was requeued (listed with no node).
    {
      const json started = Obj(status, "startedPods");
      const json finished = Obj(status, "finishedPods");
      size_t pods = 0, up = 0, done = 0;
      for (const json& a : Arr(status, "assignments")) {
        ++pods;
        const std::string pod = a.value("pod", "");
        if (finished.is_object() && finished.contains(pod)) {
          ++done;
        } else if (started.is_object() && started.contains(pod)) {
          ++up;
        }
      }
      if (started.is_object() && up + done < pods)
        std::printf("Started:    %zu of %zu pods\n", up, pods - done);
      if (done > 0 && done < pods)
        std::printf("Completed:  %zu of %zu pods%s\n", done, pods,
                    status.contains("shrinks") || status.value("phase", "") != "Running"
                        ? ""
                        : " (their devices are free for other work)");
    }
    for (const json& shrink : Arr(status, "shrinks")) {
      if (!shrink.is_object()) continue;
      std::string pods;
      for (const json& p : Arr(shrink, "pods")) pods += (pods.empty() ? "" : ", ") + Plain(p);
      std::printf("Shrinking:  pod(s) %s stop at %s (%s)\n", pods.c_str(),
                  shrink.value("deadline", "").c_str(), shrink.value("reason", "").c_str());
    }
    // (One line: why it does not grow now, which the server keeps current; its last growth
    // undone only where that is not already what it says. A trial read two lines, the retry
    // time of one long past. What never changes, "even empty", is said so.)
    const std::string blocked = status.value("growthBlocked", "");
    if (status.contains("growthBlocked") && status.contains("admittedCounts") &&
        status.value("phase", "") == "Running")
      std::printf("Growth:     %s: %s%s\n",
                  blocked.find("even empty") != std::string::npos ? "never" : "not now",
                  blocked.c_str(),
                  status.contains("growthRetryTime") && blocked.find("undone") == std::string::npos
                      ? " (its last growth was undone: new pods did not start in time)"
                      : "");
    else if (status.contains("growthRetryTime"))
      std::printf("Growth:     undone (new pods did not start in time); may grow again at %s\n",
                  status.value("growthRetryTime", "").c_str());
    if (status.contains("resizedTime"))
      std::printf("Resized:    at %s (elastic: pods added as room freed, or given back)\n",
                  status.value("resizedTime", "").c_str());
    if (status.contains("requeueState")) {
      const json rs = status["requeueState"];
      // (A gang's start timeout, or its pods' where it is no gang; the next try only while it
      // waits: a trial read a past one on a running workload.)
      const std::string phase = status.value("phase", "");
      const std::string what =
          Obj(o, "spec").value("gang", false) ? "gang timeout(s)" : "start timeout(s) of its pods";
      std::printf("Requeued:   %s %s%s\n", Plain(rs.value("count", json(0))).c_str(), what.c_str(),
                  phase == "Running" || phase == "Scheduled" ? ""
                  : rs.contains("requeueAt")
                      ? ("; next try at " + rs.value("requeueAt", "")).c_str()
                      : "; deactivated at the limit");
    }
    // Stopped and put back in line before (preempted, its node lost, its gang timed out).
    if (const json ev = Obj(status, "evictions"); ev.is_object() && ev.contains("count")) {
      const json last = Obj(ev, "last");
      const std::string lost = ev.contains("gpuSecondsLost")
                                   ? ", " + Plain(ev["gpuSecondsLost"]) + " GPU-seconds lost"
                                   : "";
      std::printf("Evicted:    %s time(s)%s; last %s at %s: %s\n",
                  Plain(ev.value("count", json(0))).c_str(), lost.c_str(),
                  last.value("reason", "").c_str(), last.value("time", "").c_str(),
                  last.value("message", "").c_str());
    }
    // A victim's mark, and a waiting preemptor's planned place.
    if (status.contains("preemption")) {
      const json p = status["preemption"];
      const std::string by = p.value("by", "");
      std::printf("Preempted:  %s, stops at %s\n",
                  (by.empty() ? p.value("reason", "") : "by " + by).c_str(),
                  p.value("deadline", "").c_str());
    }
    for (const char* key : {"assignments", "nomination"}) {
      const json as = status.value(key, json::array());
      // (Nominated for fewer pods than it asks for: a reclaim for what its guarantee holds.)
      const json cut = Arr(status, "nominatedCounts");
      if (!as.empty())
        std::printf("%s\n", std::string(key) == "assignments" ? "Assignments:"
                            : cut.empty()                     ? "Nominated:"
                                          : ("Nominated (" + std::to_string(as.size()) +
                                             " pods, partial admission):")
                                                .c_str());
      for (const json& a : as) {
        // (A pod that completed before a requeue is listed with no node: it is not run again.)
        if (a.value("node", "").empty()) {
          std::printf("  %-12s completed earlier\n", a.value("pod", "").c_str());
          continue;
        }
        std::printf("  %-12s on %-10s", a.value("pod", "").c_str(), a.value("node", "").c_str());
        for (const json& d : Arr(a, "devices")) {
          std::printf(" gpu%d %s %dm%s%s", d.value("index", 0), d.value("uuid", "").c_str(),
                      d.value("gpuMilli", 0), d.contains("migProfile") ? " MIG " : "",
                      d.contains("migProfile") ? d.value("migProfile", "").c_str() : "");
        }
        std::printf("\n");
      }
    }
  }
  if (std::string(r->kind) == "Queue") {
    DescribeQueue(http, o);
    return 0;
  }
  std::printf("Spec:\n");
  PrintYaml(Obj(o, "spec"), 2, std::cout);
  // A flavour's standing as the scheduler last wrote it (its GPUs).
  if (std::string(r->kind) == "ResourceFlavor") {
    std::printf("Status:\n");
    PrintYaml(status, 2, std::cout);
  }
  if (std::string(r->kind) == "Node") {
    DescribeNodeHealth(http, name);
    DescribeNodeWorkloads(http, name, NodeGpus(Obj(o, "spec")), NodeGpuMemoryMib(Obj(o, "spec")));
  }
  if (std::string(r->kind) == "Workload") {
    // What happened to it, by when it was last seen (as kubectl describe ends with its events):
    // a wait repeated since is counted into its first event and listed where it now stands.
    if (fabrica::Result<json> events = FetchEvents(g, http, g.ns, name); events.ok()) {
      const json items = ByLastSeen(Arr(*events, "items"));
      std::printf("Events:%s\n", items.empty() ? "     <none>" : "");
      std::vector<std::vector<std::string>> rows;
      if (!items.empty()) rows.push_back({"  TYPE", "REASON", "LAST SEEN", "MESSAGE"});
      for (const json& e : items)
        rows.push_back({"  " + e.value("type", ""), e.value("reason", ""),
                        e.value("lastTimestamp", ""), EventMessage(e)});
      PrintRows(rows);
    }
  }
  return 0;
}

// A repair done by people: the node's pending repair task is reported done (or failed), and the
// health controller goes on with burn-in (or escalates).
int NodeRepaired(HttpClient& http, const std::string& node, bool failed,
                 const std::string& message) {
  auto resp = http.Do("GET", "/apis/fabrica.dev/v1/nodes/" + node + "/health");
  if (!resp.ok() || resp->status != 200) return Failed(resp);
  json h = json::parse(resp->body, nullptr, false);
  int64_t id = 0;
  for (const json& t : Arr(h, "tasks")) {
    if (t.value("kind", "") == "repair") id = t.value("id", int64_t{0});
  }
  if (id == 0) {
    std::cerr << "fabctl: node " << node << " is not waiting for a repair (state "
              << h.value("state", "?") << ")\n";
    return 1;
  }
  json body = {{"succeeded", !failed}, {"message", message}};
  resp = http.Do("POST", "/apis/fabrica.dev/v1/nodes/" + node + "/tasks/" + std::to_string(id),
                 body.dump());
  if (!resp.ok() || resp->status >= 300) return Failed(resp);
  std::printf("node/%s repair %s; burn-in follows\n", node.c_str(),
              failed ? "reported failed" : "reported done");
  return 0;
}

// POST .../nodes/N/inject: a fault for a simulated node (platform admins).
int DebugInject(HttpClient& http, const std::string& node, std::optional<int> xid,
                std::optional<int> gpu, std::optional<int64_t> ecc, bool kill, bool stall) {
  json body = json::object();
  if (xid) body["xid"] = *xid;
  if (gpu) body["gpu"] = *gpu;
  if (ecc) body["eccDoubleBit"] = *ecc;
  if (kill) body["kill"] = true;
  if (stall) body["stall"] = true;
  auto resp = http.Do("POST", "/apis/fabrica.dev/v1/nodes/" + node + "/inject", body.dump());
  if (!resp.ok() || resp->status >= 300) return Failed(resp);
  std::printf("injected into %s: %s\n", node.c_str(), body.dump().c_str());
  return 0;
}

int ExportNodes(HttpClient& http, const std::string& format) {
  if (format != "netbox") {
    std::cerr << "fabctl: --format: only netbox is supported\n";
    return 2;
  }
  auto resp = http.Do("GET", "/apis/fabrica.dev/v1/inventory?format=netbox");
  if (!resp.ok() || resp->status != 200) return Failed(resp);
  json j = json::parse(resp->body, nullptr, false);
  std::printf("%s\n", j.is_discarded() ? resp->body.c_str() : j.dump(2).c_str());
  return 0;
}

// What waits in a queue (and below it), in the order admission takes it in each leaf.
int Pending(Globals& g, HttpClient& http, const std::string& queue, int limit) {
  // No queue named: every tree's, root by root (positions are within a tree).
  std::vector<std::string> roots = {queue};
  if (queue.empty()) {
    auto all = http.Do("GET", "/apis/fabrica.dev/v1/queues");
    if (!all.ok() || all->status != 200) return Failed(all);
    roots.clear();
    for (const json& q : Arr(json::parse(all->body, nullptr, false), "items")) {
      const json spec = Obj(q, "spec"), meta = Obj(q, "metadata");
      const bool root = !spec.contains("parent") || spec["parent"] == "";
      if (root && meta.contains("name") && meta["name"].is_string()) roots.push_back(meta["name"]);
    }
  }
  // No queue at all: the scheduler admits by fair share among the tenants, in no one line;
  // what waits is listed as it is (a user-style trial saw only a header here).
  if (queue.empty() && roots.empty()) {
    auto all = http.Do("GET", "/apis/fabrica.dev/v1/workloads");
    if (!all.ok() || all->status != 200) return Failed(all);
    std::vector<std::vector<std::string>> rows = {
        {"NAMESPACE", "NAME", "PRIORITY", "CREATED", "MESSAGE"}};
    json items = json::array();
    for (const json& w : Arr(json::parse(all->body, nullptr, false), "items")) {
      const json st = Obj(w, "status"), meta = Obj(w, "metadata");
      if (st.value("phase", json("")) != "Pending") continue;
      rows.push_back({Plain(meta.value("namespace", json(""))), Plain(meta.value("name", json(""))),
                      Plain(Obj(w, "spec").value("priority", json(0))),
                      Plain(meta.value("creationTimestamp", json(""))),
                      Plain(st.value("message", json("")))});
      items.push_back({{"namespace", rows.back()[0]},
                       {"name", rows.back()[1]},
                       {"priority", Obj(w, "spec").value("priority", json(0))},
                       {"creationTimestamp", rows.back()[3]},
                       {"message", rows.back()[4]}});
    }
    if (g.output == "json" || g.output == "yaml") {
      const int64_t total = static_cast<int64_t>(items.size());
      if (total > limit) items.erase(items.begin() + limit, items.end());
      PrintObject({{"kind", "PendingWorkloadList"}, {"items", items}, {"total", total}}, g.output);
      return 0;
    }
    std::printf(
        "No queues exist: work is admitted by fair share among tenants, not in one order "
        "(fabctl apply -f examples/queues.yaml makes a queue tree).\n");
    if (rows.size() == 1) {
      std::printf("Nothing waits.\n");
      return 0;
    }
    if (static_cast<int>(rows.size()) - 1 > limit) rows.resize(limit + 1);
    PrintRows(rows);
    return 0;
  }
  json list = {{"kind", "PendingWorkloadList"}, {"items", json::array()}, {"total", 0}};
  for (const std::string& root : roots) {
    auto resp = http.Do("GET", "/apis/fabrica.dev/v1/queues/" + root +
                                   "/pendingworkloads?limit=" + std::to_string(limit));
    if (!resp.ok() || resp->status != 200) return Failed(resp);
    const json one = json::parse(resp->body, nullptr, false);
    if (roots.size() == 1) {
      list = one;
      break;
    }
    for (const json& w : Arr(one, "items"))
      if (static_cast<int>(list["items"].size()) < limit) list["items"].push_back(w);
    list["total"] = list["total"].get<int64_t>() + one.value("total", int64_t{0});
    list["unreadTotal"] =
        list.value("unreadTotal", int64_t{0}) + one.value("unreadTotal", int64_t{0});
  }
  if (g.output == "json" || g.output == "yaml") {
    PrintObject(list, g.output);
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"POSITION", "QUEUE", "IN-QUEUE", "NAMESPACE", "NAME", "PRIORITY", "CREATED", "MESSAGE"}};
  for (const json& w : Arr(list, "items"))
    rows.push_back({Plain(w.value("position", json(0))), w.value("queue", ""),
                    // (Inadmissible as it is: no place in its queue.)
                    w.value("inadmissible", false) ? std::string("-")
                                                   : Plain(w.value("positionInQueue", json(0))),
                    w.value("namespace", ""), w.value("name", ""),
                    Plain(w.value("priority", json(0))), w.value("creationTimestamp", ""),
                    w.value("message", "")});
  if (rows.size() == 1) {
    // (As kubectl says of an empty list, no header over nothing; a trial saw a bare header
    // for another team's queue, whose work it may not read.)
    const int64_t unread = list.value("unreadTotal", int64_t{0});
    std::cerr << (unread > 0 ? std::to_string(unread) +
                                   " workload(s) wait, none of a tenant you may read.\n"
                             : std::string("Nothing waits in ") +
                                   (queue.empty() ? "any queue tree" : "queue " + queue) + ".\n");
  } else {
    PrintRows(rows);
    if (const int64_t unread = list.value("unreadTotal", int64_t{0}); unread > 0)
      std::printf("(and %lld waiting of tenants you may not read: POSITION counts them)\n",
                  static_cast<long long>(unread));
  }
  if (rows.size() > 1 && list.value("total", 0) > static_cast<int64_t>(rows.size() - 1))
    std::printf("(%d of %d shown; --limit N for more)\n", static_cast<int>(rows.size() - 1),
                list.value("total", 0));
  // No queue named: work that names a queue no tree has waits in none; said after them (as far
  // as the caller may list workloads).
  if (queue.empty())
    if (auto all = http.Do("GET", "/apis/fabrica.dev/v1/workloads"); all.ok() && all->status == 200)
      for (const json& w : Arr(json::parse(all->body, nullptr, false), "items"))
        if (const json st = Obj(w, "status"); st.value("reason", json("")) == "QueueNotFound")
          std::printf("waits for queue %s, which does not exist: %s/%s\n",
                      Plain(Obj(w, "spec").value("queue", json(""))).c_str(),
                      Plain(Obj(w, "metadata").value("namespace", json(""))).c_str(),
                      Plain(Obj(w, "metadata").value("name", json(""))).c_str());
  return 0;
}

// `fabctl patch RESOURCE NAME -p PATCH`: a JSON merge patch (RFC 7386; JSON or YAML, as
// kubectl's --type merge takes it) of the object or (`--subresource status`) its status.
int Patch(Globals& g, HttpClient& http, const std::string& what, const std::string& name,
          const std::string& patch, const std::string& type, const std::string& subresource) {
  const Resource* r = ResourceByName(what);
  if (!r) {
    std::cerr << "fabctl: unknown resource '" << what << "'\n";
    return 1;
  }
  if (type != "merge") {
    std::cerr << "fabctl: --type " << type
              << " is not supported: Fabrica's objects take merge patches (--type merge)\n";
    return 1;
  }
  std::string twice;
  json body = fabrica::jsonf::ParseNoDuplicateKeys(patch, &twice);
  if (!twice.empty()) {
    std::cerr << "fabctl: the patch gives key \"" << twice << "\" twice\n";
    return 1;
  }
  if (body.is_discarded()) {
    try {
      size_t left = fabrica::YamlValueBudget(patch);
      body = YamlToJson(YAML::Load(patch), left);
    } catch (const YAML::Exception& e) {
      std::cerr << "fabctl: the patch is neither JSON nor YAML: " << e.what() << "\n";
      return 1;
    }
  }
  if (!body.is_object()) {
    std::cerr << "fabctl: the patch must be an object, as {\"spec\": {...}}\n";
    return 1;
  }
  const std::string path =
      CollectionPath(*r, g.ns) + "/" + name + (subresource.empty() ? "" : "/" + subresource);
  // (Its version before and after: a patch that changes nothing says so, as kubectl's.)
  auto before = http.Do("GET", CollectionPath(*r, g.ns) + "/" + name);
  if (!before.ok() || before->status != 200) return Failed(before);
  // A client dry run merges the patch here (RFC 7386) and writes nothing; a server dry run
  // has the server check the patched object as it would write it.
  fabrica::Result<fabrica::ClientResponse> resp = *before;
  if (g.dry_run == "client") {
    json merged = json::parse(before->body, nullptr, false);
    if (merged.is_object()) {
      if (subresource.empty()) {
        merged.merge_patch(body);
      } else {
        json sub = merged.value(subresource, json::object());
        sub.merge_patch(body.value(subresource, json::object()));
        merged[subresource] = sub;
      }
      resp->body = merged.dump();
    }
  } else {
    resp = http.Do("PATCH", path + (g.dry_run == "server" ? "?dryRun=All" : ""), body.dump(),
                   "application/merge-patch+json");
  }
  if (!resp.ok() || resp->status >= 300) return Failed(resp);
  // (What the patch addresses, before and after: the status the scheduler rewrites meanwhile,
  // and the versions, do not count.)
  const auto part = [&](const std::string& text) {
    json o = json::parse(text, nullptr, false);
    if (!o.is_object()) return json();
    if (!subresource.empty()) return o.value(subresource, json());
    o.erase("status");
    if (o.contains("metadata") && o["metadata"].is_object())
      for (const char* k : {"resourceVersion", "generation"}) o["metadata"].erase(k);
    return o;
  };
  const bool same = part(before->body) == part(resp->body);
  std::printf("%s/%s patched%s%s\n", r->plural, name.c_str(), same ? " (no change)" : "",
              g.dry_run == "client"   ? " (dry run)"
              : g.dry_run == "server" ? " (server dry run)"
                                      : "");
  PrintWarnings(*resp);
  // (As apply warns; the server itself warns of GPUs a lowered trust no longer allows.)
  if (std::string(r->kind) == "Tenant" && !same && subresource.empty() &&
      Obj(json::parse(resp->body, nullptr, false), "spec").value("exclusiveNodes", false) == true &&
      !Obj(json::parse(before->body, nullptr, false), "spec").value("exclusiveNodes", false))
    WarnSharedNodes(http, name, /*newly=*/true);
  return 0;
}

int Cordon(HttpClient& http, const std::string& node, bool cordon) {
  // The health controller cordons nodes too, and keeps them so through repair and burn-in: an
  // uncordon then lifts the admin's own cordon, if any (before, none was lifted and the node
  // stayed out of service after its burn-in: a trial), and says that the node stays cordoned
  // until then (exit 1).
  if (!cordon) {
    auto health = http.Do("GET", "/apis/fabrica.dev/v1/nodes/" + node + "/health");
    const json h =
        health.ok() && health->status == 200 ? json::parse(health->body, nullptr, false) : json();
    if (h.is_object() && h.value("schedulable", true) == false) {
      bool lifted = false;
      auto got = http.Do("GET", "/apis/fabrica.dev/v1/nodes/" + node);
      if (!got.ok() || got->status != 200) return Failed(got);
      const json n = json::parse(got->body, nullptr, false);
      // (Only an admin's: the health controller cordons by spec.unschedulable too, and the API
      // stamps an admin's with the cordoned-by annotation.)
      if (n.is_object() && Obj(n, "spec").value("unschedulable", false) &&
          Obj(Obj(n, "metadata"), "annotations").contains(fabrica::kCordonedByAnnotation)) {
        auto resp = http.Do("PATCH", "/apis/fabrica.dev/v1/nodes/" + node,
                            json{{"spec", {{"unschedulable", false}}}}.dump(),
                            "application/merge-patch+json");
        if (!resp.ok() || resp->status >= 300) return Failed(resp);
        lifted = true;
      }
      // (`nodes repaired` only where a repair by people is awaited: a trial was told to run it
      // during an automatic one, and it answered that the node awaits none.)
      bool awaits_repair = false;
      for (const json& t : Arr(h, "tasks")) awaits_repair |= t.value("kind", "") == "repair";
      std::cerr << "fabctl: node/" << node << " stays cordoned: the health controller holds it ("
                << h.value("state", "") << " since " << h.value("stateSince", "") << ")"
                << (lifted ? "; the admin's cordon is lifted, so" : ";")
                << " it takes new work again once its repair and burn-in pass (fabctl describe "
                   "node "
                << node
                << (awaits_repair ? "; fabctl nodes repaired " + node + " once repaired"
                                  : std::string())
                << ")\n";
      return 1;
    }
  }
  json patch = {{"spec", {{"unschedulable", cordon}}}};
  auto resp = http.Do("PATCH", "/apis/fabrica.dev/v1/nodes/" + node, patch.dump(),
                      "application/merge-patch+json");
  if (!resp.ok() || resp->status >= 300) return Failed(resp);
  // (The scheduler lifts its hold for pods that did not start there at an uncordon.)
  const json after = json::parse(resp->body, nullptr, false);
  const bool held = !cordon && after.is_object() && !StartHold(Obj(after, "status")).is_null();
  std::printf("node/%s %s%s\n", node.c_str(), cordon ? "cordoned" : "uncordoned",
              held ? " (the scheduler's hold for pods that did not start there ends with it)" : "");

  return 0;
}

// `fabctl taint node NODE key[=value]:Effect ... [key[:Effect]-]`, as kubectl's: adds taints
// (one of the same key and effect only with --overwrite) and removes those ending in '-' (of
// one effect, or of every effect without one). A read-modify-write on the Node's revision.
int Taint(HttpClient& http, const std::string& what, const std::string& node,
          const std::vector<std::string>& specs, bool overwrite) {
  if (what != "node" && what != "nodes") {
    std::cerr << "fabctl: taint works on nodes: fabctl taint node NAME key=value:NoSchedule\n";
    return 2;
  }
  const std::string path = "/apis/fabrica.dev/v1/nodes/" + node;
  // (A write of the node's status between the read and the write, the scheduler's or its
  // agent's, is a conflict: read it again and redo the change, a few times.)
  for (int attempt = 0;; ++attempt) {
    auto resp = http.Do("GET", path);
    if (!resp.ok() || resp->status != 200) return Failed(resp);
    json o = json::parse(resp->body, nullptr, false);
    if (!o.is_object() || !o["spec"].is_object()) {
      std::cerr << "fabctl: node/" << node << " has no spec to taint\n";
      return 1;
    }
    json taints = fabrica::jsonf::List(o["spec"], "taints");
    std::vector<std::string> done;
    for (const std::string& spec : specs) {
      const bool remove = !spec.empty() && spec.back() == '-';
      const std::string body = remove ? spec.substr(0, spec.size() - 1) : spec;
      const size_t colon = body.rfind(':');
      const std::string kv = colon == std::string::npos ? body : body.substr(0, colon);
      const std::string effect = colon == std::string::npos ? "" : body.substr(colon + 1);
      const size_t eq = kv.find('=');
      const std::string key = kv.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : kv.substr(eq + 1);
      if (key.empty() || (!remove && effect.empty()) || value.find('=') != std::string::npos ||
          key.find(':') != std::string::npos) {
        std::cerr
            << "fabctl: '" << spec
            << "' is not KEY[=VALUE]:EFFECT (EFFECT NoSchedule, PreferNoSchedule or NoExecute) or "
               "KEY[:EFFECT]- to remove\n";
        return 2;
      }
      json kept = json::array();
      bool found = false;
      for (const json& t : taints) {
        const bool same =
            t.value("key", "") == key && (effect.empty() || t.value("effect", "") == effect);
        if (!same) {
          kept.push_back(t);
          continue;
        }
        found = true;
        if (!remove && std::find(done.begin(), done.end(), key + ":" + effect) != done.end()) {
          std::cerr << "fabctl: the taint " << key << ":" << effect << " is given twice\n";
          return 2;
        }
        if (!remove && !overwrite) {
          std::cerr << "fabctl: node/" << node << " already has a taint " << key << ":" << effect
                    << " (--overwrite replaces it)\n";
          return 1;
        }
      }
      if (remove && !found) {
        std::cerr << "fabctl: node/" << node << " has no taint " << body << " to remove\n";
        return 1;
      }
      if (!remove) {
        json t = {{"key", key}, {"effect", effect}};
        if (!value.empty()) t["value"] = value;
        kept.push_back(t);
        done.push_back(key + ":" + effect);
      }
      taints = kept;
    }
    o["spec"]["taints"] = taints;
    if (taints.empty()) o["spec"].erase("taints");
    auto put = http.Do("PUT", path, o.dump());
    if (put.ok() && put->status == 409 && attempt < 4) continue;
    if (!put.ok() || put->status >= 300) return Failed(put);
    std::printf("node/%s %s\n", node.c_str(),
                std::all_of(specs.begin(), specs.end(),
                            [](const std::string& x) { return !x.empty() && x.back() == '-'; })
                    ? "untainted"
                    : "tainted");
    return 0;
  }
}

// `fabctl drain NODE`, as kubectl's: cordons the node, evicts each workload that holds devices
// there (POST .../eviction: it keeps them through its grace period, then waits in its queue
// again), retrying those whose queue's disruption budget allows no eviction now (429), and waits
// until nothing runs there. `timeout_s` 0: no limit; `grace_s` < 0: the server's grace period.
int Drain(HttpClient& http, const std::string& node, int64_t grace_s, int64_t timeout_s,
          const std::string& reason) {
  if (int rc = Cordon(http, node, true); rc != 0) return rc;
  const auto start = std::chrono::steady_clock::now();
  const auto out_of_time = [&] {
    return timeout_s > 0 &&
           std::chrono::steady_clock::now() - start > std::chrono::seconds(timeout_s);
  };
  std::set<std::string> evicted, told;  // "tenant/name"
  // (A failure the server or the network may get over is retried until the timeout.)
  const auto transient = [](const auto& resp) {
    return !resp.ok() || resp->status >= 500 || resp->status == 409;
  };
  while (true) {
    auto list = http.Do("GET", "/apis/fabrica.dev/v1/workloads");
    const json listed =
        list.ok() && list->status == 200 ? json::parse(list->body, nullptr, false) : json();
    if (!listed.is_object()) {
      if (!transient(list) && list.ok() && list->status != 200) return Failed(list);
      if (out_of_time()) return Failed(list);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    std::vector<std::pair<std::string, std::string>> here;  // (tenant, name) holding devices
    std::set<std::string> stopping;                         // of those, the ones marked to stop
    for (const json& w : Arr(listed, "items")) {
      const json status = Obj(w, "status");
      const std::string phase =
          status.value("phase", json("")).is_string() ? status.value("phase", "") : std::string();
      if (phase != "Running" && phase != "Scheduled") continue;
      bool on = false;
      for (const json& a : Arr(status, "assignments"))
        on |= a.is_object() && a.value("node", json("")) == node;
      if (!on) continue;
      const json meta = Obj(w, "metadata");
      here.push_back({meta.value("namespace", ""), meta.value("name", "")});
      if (status.contains("preemption") && status["preemption"].is_object())
        stopping.insert(meta.value("namespace", "") + "/" + meta.value("name", ""));
    }
    if (here.empty()) break;
    bool waiting_on_budget = false;
    for (const auto& [ns, name] : here) {
      const std::string id = ns + "/" + name;
      // (Marked already, its stop is under way; one whose mark was lifted since, a preemption
      // called off, is evicted again.)
      if (stopping.count(id)) continue;
      json body = {{"reason", reason.empty() ? "drain of node " + node : reason}};
      if (grace_s >= 0) body["gracePeriodSeconds"] = grace_s;
      auto resp = http.Do(
          "POST", "/apis/fabrica.dev/v1/namespaces/" + ns + "/workloads/" + name + "/eviction",
          body.dump());
      if (transient(resp)) continue;  // (tried again next round)
      if (resp->status == 429) {
        // (Said once per workload: the budget frees as others stop.)
        if (told.insert(id).second) {
          const json j = json::parse(resp->body, nullptr, false);
          std::printf("workload/%s waits: %s\n", id.c_str(),
                      j.is_object() ? j.value("message", "").c_str() : resp->body.c_str());
        }
        waiting_on_budget = true;
        continue;
      }
      if (resp->status == 404 || resp->status == 409) continue;  // gone or stopped meanwhile
      if (resp->status >= 300) return Failed(resp);
      if (evicted.insert(id).second) std::printf("evicting workload/%s\n", id.c_str());
    }
    if (out_of_time()) {
      std::cerr << "fabctl: drain of node/" << node << " timed out: " << here.size()
                << " workload(s) still there" << (waiting_on_budget ? " (disruption budgets)" : "")
                << "\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(waiting_on_budget ? 5 : 1));
  }
  std::printf("node/%s drained\n", node.c_str());
  return 0;
}

// POST .../nodes/N/token: a bearer token for node N's agent (platform admins).
int NodeToken(HttpClient& http, const std::string& node) {
  auto resp = http.Do("POST", "/apis/fabrica.dev/v1/nodes/" + node + "/token", "{}");
  if (!resp.ok() || resp->status >= 300) return Failed(resp);
  json j = json::parse(resp->body, nullptr, false);
  std::printf("%s\n", j.value("token", "").c_str());
  return 0;
}

// GET .../workloads/W/log: a pod's output as the node agent shipped it. With --follow it polls
// from the offset it has printed up to, until interrupted or the workload has ended.
int Logs(Globals& g, HttpClient& http, const std::string& name, const std::string& pod,
         int64_t tail, bool follow) {
  if (!TakeTenantOf(g, http, name)) return 2;
  const std::string base = "/apis/fabrica.dev/v1/namespaces/" + g.ns + "/workloads/" + name;
  const std::string pod_query = pod.empty() ? "" : "&pod=" + pod;
  int64_t offset = 0;
  for (bool first = true;; first = false) {
    auto resp = http.Do("GET", base + "/log?offset=" + std::to_string(offset) + pod_query);
    if (!resp.ok() || resp->status != 200) return Failed(resp);
    std::string text = resp->body;
    offset += static_cast<int64_t>(text.size());
    if (first && tail >= 0) {
      // The last `tail` lines of what there is so far.
      size_t pos = text.size();
      if (pos > 0 && text[pos - 1] == '\n') --pos;
      for (int64_t n = 0; pos > 0; --pos) {
        if (text[pos - 1] == '\n' && ++n == tail) break;
      }
      text = tail == 0 ? "" : text.substr(pos);
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!follow) return 0;
    auto w = http.Do("GET", base);
    if (w.ok() && w->status == 200) {
      json obj = json::parse(w->body, nullptr, false);
      const std::string phase =
          obj.is_object() && obj["status"].is_object() ? obj["status"].value("phase", "") : "";
      if (phase == "Succeeded" || phase == "Failed") follow = false;  // one last read
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int TopNodes(HttpClient& http, const std::vector<std::string>& names, const std::string& sort_by) {
  // As kubectl top's --sort-by (cpu, memory): the most held first; `free`, the most room first.
  if (!sort_by.empty() && sort_by != "gpu" && sort_by != "memory" && sort_by != "free") {
    std::cerr << "fabctl: --sort-by '" << sort_by << "' is not one of gpu, memory, free\n";
    return 2;
  }
  const std::set<std::string> only(names.begin(), names.end());  // (none: every node)
  const auto shown = [&only](const std::string& node) { return only.empty() || only.count(node); };
  auto nodes = http.Do("GET", "/apis/fabrica.dev/v1/nodes");
  if (!nodes.ok() || nodes->status != 200) return Failed(nodes);
  // What each node's GPUs hold, whoever's work holds it (the server's sum: a tenant reads the
  // load of a node shared with others, though not their work), and the room planned there for
  // pending work (status.nomination): a preemptor's while its victims stop, a reservation's while
  // what runs there ends. What of it is free is held (shown as +held): no other work starts
  // there, but work with a time limit that ends before a reservation could start (backfill).
  auto allocations = http.Do("GET", "/apis/fabrica.dev/v1/nodeallocations");
  if (!allocations.ok() || allocations->status != 200) return Failed(allocations);
  std::map<std::string, std::map<int, int>> used, held;  // node -> gpu -> milli
  std::map<std::string, int64_t> used_memory;            // node -> GPU memory held, MiB
  // Free room isolation keeps for some tenants only (node -> gpu -> for whom; a node's own
  // for all its GPUs, an exclusive node's): marked `~`, not counted by --sort-by free.
  std::map<std::string, std::map<int, std::string>> open_to;
  std::map<std::string, std::string> node_open_to;
  int64_t unread = 0;  // milli-GPUs held by work the user cannot read, on the nodes shown
  for (const json& n : Arr(json::parse(allocations->body, nullptr, false), "items")) {
    const std::string name = Obj(n, "metadata").value("name", "");
    if (!shown(name)) continue;
    for (const json& g : Arr(n, "gpus")) {
      used[name][g.value("index", 0)] += g.value("gpuMilli", 0);
      held[name][g.value("index", 0)] += g.value("heldMilli", 0);
      if (g.contains("openTo")) open_to[name][g.value("index", 0)] = g.value("openTo", "");
    }
    if (n.contains("openTo")) node_open_to[name] = n.value("openTo", "");
    used_memory[name] = n.value("gpuMemoryMiB", int64_t{0});
    unread += n.value("unreadGpuMilli", int64_t{0});
  }
  auto workloads = http.Do("GET", "/apis/fabrica.dev/v1/workloads");
  std::vector<std::string> holders;  // a line for each pending workload that holds room there
  if (workloads.ok() && workloads->status == 200) {
    const json list = json::parse(workloads->body);
    for (const json& w : list["items"]) {
      const json status = Obj(w, "status");
      const std::string phase = status.value("phase", "");
      if (phase == "Pending" && !Arr(status, "nomination").empty()) {
        std::map<std::string, std::set<int>> gpus;  // node -> its devices held
        for (const json& a : Arr(status, "nomination"))
          for (const json& d : Arr(a, "devices"))
            if (shown(a.value("node", ""))) gpus[a.value("node", "")].insert(d.value("index", 0));
        if (gpus.empty()) continue;
        const json meta = Obj(w, "metadata");
        std::string line = "  " + meta.value("namespace", "") + "/" + meta.value("name", "") +
                           " (" + status.value("reason", "") +
                           (status.contains("expectedStartTime")
                                ? ", starts by " + status.value("expectedStartTime", "")
                                : "") +
                           "):";
        for (const auto& [node, devices] : gpus) {
          std::string list;
          for (int d : devices) list += (list.empty() ? "" : ",") + std::to_string(d);
          line += " " + node + " GPU " + list;
        }
        holders.push_back(std::move(line) + " (held as they free)");
      }
    }
  }
  ReadNodeHealth(http);
  const json node_list = json::parse(nodes->body);
  // (Nodes named that do not exist are errors, as kubectl's; the others are shown.)
  std::set<std::string> missing = only;
  for (const json& n : node_list["items"]) missing.erase(n["metadata"].value("name", ""));
  for (const std::string& name : missing)
    std::cerr << "Error from server (404): Node '" << name << "' not found\n";
  if (!missing.empty() && missing.size() == only.size()) return 1;
  if (!g_no_headers)
    std::printf("%-12s %-6s %-8s %-8s %-14s %s\n", "NODE", "GPUS", "ALLOC", "HELD", "GPU-MEMORY",
                "PER-GPU (milli-GPU used, +free room held for pending work, ~ kept for some)");
  struct Row {
    int64_t key = 0;  // what --sort-by orders by, the most first
    std::string line;
  };
  std::vector<Row> rows;
  std::map<std::string, std::vector<std::string>> kept_for;  // for whom -> "node GPU i"
  for (const json& n : node_list["items"]) {
    const std::string name = n["metadata"].value("name", "");
    if (!shown(name)) continue;
    const size_t gpus = NodeGpus(Obj(n, "spec"));
    int total = 0, total_held = 0;
    int64_t free_milli = 0;  // (--sort-by free: of GPUs in service on a node taking work)
    const bool cordoned = Obj(n, "spec").value("unschedulable", false) == true;
    std::string per;
    // (A GPU out of service shows its state: repair, cordoned, burn-in.)
    std::map<int, std::string> out;
    if (auto h = node_health.find(name); h != node_health.end())
      for (const json& g : Arr(h->second, "gpus"))
        if (g.value("schedulable", true) == false) out[g.value("index", -1)] = g.value("state", "");
    for (size_t i = 0; i < gpus; ++i) {
      const int m = used[name][static_cast<int>(i)];
      // (What of the planned share is free now: the rest is in use until it frees.)
      const int h = std::min(held[name][static_cast<int>(i)], std::max(0, 1000 - m));
      total += m;
      total_held += h;
      auto o = out.find(static_cast<int>(i));
      std::string kept = node_open_to.count(name) ? node_open_to[name] : "";
      if (auto k = open_to[name].find(static_cast<int>(i)); k != open_to[name].end())
        kept = k->second;
      const bool closed = !kept.empty() && m + h < 1000;
      if (closed) kept_for[kept].push_back(name + " GPU " + std::to_string(i));
      if (!cordoned && o == out.end() && !closed) free_milli += std::max(0, 1000 - m - h);
      per += std::to_string(m) + (h > 0 ? "+" + std::to_string(h) : "") + (closed ? "~" : "") +
             (o == out.end() ? "" : "(" + o->second + ")") + (i + 1 < gpus ? " " : "");
    }
    char alloc[32], held_gpus[32];
    std::snprintf(alloc, sizeof(alloc), "%.2f", total / 1000.0);
    std::snprintf(held_gpus, sizeof(held_gpus), "%.2f", total_held / 1000.0);
    // GPU memory held of the node's: a share's own (12Gi of an H200 is little compute but
    // what others cannot use), a whole GPU's all of it.
    const int64_t memory = NodeGpuMemoryMib(Obj(n, "spec"));
    const std::string mem =
        memory > 0 ? GpuMemory(used_memory[name]) + "/" + GpuMemory(memory) : "-";
    char line[512];
    std::snprintf(line, sizeof(line), "%-12s %-6zu %-8s %-8s %-14s ", name.c_str(), gpus, alloc,
                  held_gpus, mem.c_str());
    const int64_t key = sort_by == "gpu"      ? total
                        : sort_by == "memory" ? used_memory[name]
                        : sort_by == "free"   ? free_milli
                                              : 0;
    // (A node taking no work says so: idle, it would read as room.)
    rows.push_back({key, line + per + (cordoned ? " (cordoned)" : "")});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.key > b.key; });
  for (const Row& r : rows) std::printf("%s\n", r.line.c_str());
  if (!kept_for.empty()) {
    std::printf("\n~ isolation keeps the free room of that GPU for some tenants only:\n");
    for (const auto& [whom, where] : kept_for) {
      std::string list;
      for (size_t i = 0; i < where.size() && i < 8; ++i) list += (i ? ", " : "") + where[i];
      if (where.size() > 8) list += " and " + std::to_string(where.size() - 8) + " more";
      std::printf("  %s: %s\n", whom.c_str(), list.c_str());
    }
  }
  if (!holders.empty()) {
    std::printf("\nHeld for pending work (fabctl describe workload says why):\n");
    for (const std::string& line : holders) std::printf("%s\n", line.c_str());
  }
  if (unread > 0)
    std::printf(
        "\nOther tenants' work, which you cannot read, holds %s GPUs of these (counted, "
        "not named).\n",
        GpusOfMilli(unread).c_str());
  return missing.empty() ? 0 : 1;
}

// `fabctl usage --window 7d --by tenant`: GPU-hours held and used, efficiency and cost per row,
// from the server's usage resource (--csv prints the invoice CSV as the server writes it).
int Usage(HttpClient& http, const std::string& window, const std::string& by,
          const std::string& step, bool share_idle, bool csv) {
  std::string path = "/apis/fabrica.dev/v1/usage?window=" + window + "&by=" + by +
                     (step.empty() ? "" : "&step=" + step) + (share_idle ? "&shareIdle=true" : "");
  if (csv) path += "&format=csv";
  auto resp = http.Do("GET", path);
  if (!resp.ok() || resp->status != 200) return Failed(resp);
  if (csv) {
    std::fwrite(resp->body.data(), 1, resp->body.size(), stdout);
    return 0;
  }
  const json u = json::parse(resp->body);
  const std::string currency = u.value("currency", "");
  for (const json& w : u["windows"]) {
    std::printf("%s .. %s\n", w.value("start", "").c_str(), w.value("end", "").c_str());
    // (Headers of one word each, upper case, as every other table's: a trial read
    // "tenant  GPU-H HELD ..." as eight columns.)
    std::string key_header = by;
    for (char& c : key_header) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::printf("%-28s %15s %15s %10s %14s\n", key_header.c_str(), "GPU-HOURS-HELD",
                "GPU-HOURS-USED", "EFFICIENCY", ("COST-" + currency).c_str());
    auto row = [&](const json& r, const std::string& key) {
      const double held = r.value("gpuHoursHeld", 0.0);
      const double used = r.value("gpuHoursUsed", 0.0);
      const int64_t unknown = r.value("gpuMilliMsUnknown", int64_t{0});
      char eff[16];
      if (r.value("gpuMilliMsHeld", int64_t{0}) > unknown) {
        std::snprintf(eff, sizeof eff, "%.0f%%", 100 * r.value("efficiency", 0.0));
      } else {
        std::snprintf(eff, sizeof eff, "-");
      }
      // (In cents, as an invoice reads; the CSV keeps the server's six decimals.)
      const std::string cost = r.value("totalCost", std::string("0"));
      char cents[32];
      std::snprintf(cents, sizeof cents, "%.2f", std::strtod(cost.c_str(), nullptr));
      std::printf("%-28s %15.2f %15.2f %10s %14s\n", key.c_str(), held, used, eff, cents);
    };
    for (const json& r : w["rows"]) row(r, r.value("key", ""));
    if (w.contains("idle")) row(w["idle"], "(idle)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fabctl: the client of a Fabrica control plane"};
  app.require_subcommand(1);
  // (--server, --token … also after the subcommand, as kubectl takes them.)
  app.fallthrough();
  Globals g;
  app.add_option("--server", g.server, "https://host:port");
  app.add_option("--token", g.token, "bearer token");
  app.add_option("--ca", g.ca, "CA certificate (PEM) to verify the server");
  app.add_option("--config", g.config, "config file");
  app.add_option("--request-timeout", g.request_timeout,
                 "seconds to wait for a response (a watch reopens after this long without one)")
      ->check(CLI::Range(1, 3600));
  std::string what, name, file;
  std::vector<std::string> names;  // get's and delete's
  int rc = 0;
  auto client = [&]() -> std::unique_ptr<HttpClient> {
    ClientOptions o;
    if (!ReadConfig(g, o)) return nullptr;
    return std::make_unique<HttpClient>(o);
  };
  CLI::App* get = app.add_subcommand("get", "List or show resources");
  get->add_option("resource", what,
                  "workloads (wl), queues (q), nodes (no), tenants, leases, priorityclasses "
                  "(pc), resourceflavors (rf), events (ev)")
      ->required();
  get->add_option("name", names, "one or more names (none: all)");
  get->add_option("-n,--namespace,--tenant", g.ns, "tenant");
  get->add_flag("-A,--all-namespaces", g.all_namespaces, "all tenants you may read");
  get->add_option("-o,--output", g.output,
                  "json|yaml|wide|name|jsonpath=TEMPLATE|custom-columns=HEADER:PATH,...")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v == "json" || v == "yaml" || v == "wide" || v == "name" || Templated(v)
                       ? std::string()
                       : "'" + v +
                             "' is not one of json, yaml, wide, name, jsonpath=TEMPLATE, "
                             "custom-columns=HEADER:PATH,...";
          },
          "OUTPUT"));
  get->add_option("-l,--selector", g.selector, "label selector");
  get->add_option("--field-selector", g.field_selector,
                  "field selector, e.g. status.phase=Pending,spec.queue=research (the server "
                  "names the fields each kind is selected by)");
  get->add_option("--sort-by", g.sort_by,
                  "JSONPath to order the items by, e.g. "
                  ".metadata.creationTimestamp");
  get->add_flag("-w,--watch", g.watch, "watch for changes");
  get->add_flag("--no-headers", g_no_headers, "print tables without their header line");
  get->callback([&] {
    auto h = client();
    rc = h ? Get(g, *h, what, names) : 2;
  });
  CLI::App* apply = app.add_subcommand("apply", "Create or update resources from a file");
  apply
      ->add_option("-f,--filename", file,
                   "YAML or JSON, several documents allowed; a directory (its .yaml, .yml and "
                   ".json files), or - for standard input")
      ->required();
  apply->add_option("-n,--namespace,--tenant", g.ns, "tenant for workloads without one");
  const auto dry_run_option = [&](CLI::App* cmd) {
    cmd->add_option("--dry-run", g.dry_run,
                    "none (default); client: say what would change, change nothing; server: the "
                    "server checks each object as it would write it, and writes nothing")
        ->check(CLI::IsMember({"none", "client", "server"}));
  };
  dry_run_option(apply);
  apply->callback([&] {
    auto h = client();
    rc = h ? Apply(g, *h, file) : 2;
  });
  CLI::App* del = app.add_subcommand("delete", "Delete resources");
  del->add_option("resource", what);
  del->add_option("name", names, "one or more names");
  del->add_option("-f,--filename", file);
  del->add_option("-n,--namespace,--tenant", g.ns, "tenant");
  bool delete_all = false;
  del->add_flag("--all", delete_all, "every one of the resource (in the tenant -n names)");
  dry_run_option(del);
  del->callback([&] {
    auto h = client();
    rc = h ? Delete(g, *h, what, names, file, delete_all) : 2;
  });
  CLI::App* describe = app.add_subcommand("describe", "Show a resource, and why a workload waits");
  describe->add_option("resource", what)->required();
  describe->add_option("name", name)->required();
  describe->add_option("-n,--namespace,--tenant", g.ns, "tenant");
  describe->callback([&] {
    auto h = client();
    rc = h ? Describe(g, *h, what, name) : 2;
  });
  CLI::App* pending = app.add_subcommand(
      "pending", "What waits in a queue and its subtree, with each one's place in its own queue");
  pending->add_option("queue", name, "a queue (default: every queue tree, root by root)");
  int pending_limit = 100;
  pending->add_option("--limit", pending_limit, "at most this many (default 100)")
      ->check(CLI::Range(1, 100000));
  pending->add_option("-o,--output", g.output, "json|yaml")->check(CLI::IsMember({"json", "yaml"}));
  pending->callback([&] {
    auto h = client();
    rc = h ? Pending(g, *h, name, pending_limit) : 2;
  });
  CLI::App* patch = app.add_subcommand("patch", "Change fields of a resource (a merge patch)");
  std::string patch_body, patch_type = "merge", subresource;
  patch->add_option("resource", what)->required();
  patch->add_option("name", name)->required();
  patch->add_option("-p,--patch", patch_body, "the patch, JSON or YAML: {\"spec\": {...}}")
      ->required();
  patch->add_option("--type", patch_type, "merge (the only kind Fabrica's objects take)");
  patch->add_option("--subresource", subresource, "status: patch the object's status (admins)")
      ->check(CLI::IsMember({"status"}));
  patch->add_option("-n,--namespace,--tenant", g.ns, "tenant");
  dry_run_option(patch);
  patch->callback([&] {
    auto h = client();
    rc = h ? Patch(g, *h, what, name, patch_body, patch_type, subresource) : 2;
  });
  CLI::App* cordon = app.add_subcommand("cordon", "Stop new work landing on a node");
  cordon->add_option("node", name)->required();
  cordon->callback([&] {
    auto h = client();
    rc = h ? Cordon(*h, name, true) : 2;
  });
  CLI::App* uncordon = app.add_subcommand("uncordon", "Let new work land on a node again");
  uncordon->add_option("node", name)->required();
  uncordon->callback([&] {
    auto h = client();
    rc = h ? Cordon(*h, name, false) : 2;
  });
  std::vector<std::string> taint_specs;
  bool overwrite = false;
  CLI::App* taint = app.add_subcommand(
      "taint",
      "Taint a node (KEY[=VALUE]:NoSchedule keeps off work that does not tolerate it; "
      ":NoExecute also evicts it; :PreferNoSchedule sends it elsewhere while it can), or remove "
      "a taint (KEY[:EFFECT]-)");
  taint->add_option("kind", what, "node")->required();
  taint->add_option("node", name)->required();
  taint->add_option("taints", taint_specs, "KEY[=VALUE]:EFFECT, or KEY[:EFFECT]- to remove")
      ->required();
  taint->add_flag("--overwrite", overwrite, "Replace a taint of the same key and effect");
  taint->callback([&] {
    auto h = client();
    rc = h ? Taint(*h, what, name, taint_specs, overwrite) : 2;
  });
  CLI::App* drain = app.add_subcommand(
      "drain",
      "Cordon a node and evict its work (each keeps it through a grace period, then "
      "waits in its queue again), respecting disruption budgets");
  drain->add_option("node", name)->required();
  int64_t drain_grace = -1, drain_timeout = 0;
  std::string drain_reason;
  drain
      ->add_option("--grace-period", drain_grace,
                   "seconds each workload keeps its devices (default: the server's grace "
                   "period)")
      ->check(CLI::Range(int64_t{-1}, int64_t{365} * 24 * 3600));
  drain->add_option("--timeout", drain_timeout, "give up after this many seconds (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{365} * 24 * 3600));
  drain->add_option("--reason", drain_reason, "why, as the workloads' events say it");
  drain->callback([&] {
    auto h = client();
    rc = h ? Drain(*h, name, drain_grace, drain_timeout, drain_reason) : 2;
  });
  CLI::App* debug = app.add_subcommand("debug", "Debugging aids for simulated factories");
  debug->require_subcommand(1);
  CLI::App* inject = debug->add_subcommand("inject", "Inject a fault into a simulated node");
  int inject_xid = 0, inject_gpu = -1;
  int64_t inject_ecc = -1;
  bool inject_kill = false, inject_stall = false;
  inject->add_option("node", name)->required();
  // (What is given is sent as given, for the server to judge: a trial's --xid -5, dropped
  // here, was answered about stall.)
  CLI::Option* xid_given = inject->add_option("--xid", inject_xid, "an XID on --gpu");
  CLI::Option* gpu_given = inject->add_option("--gpu", inject_gpu, "GPU index");
  CLI::Option* ecc_given =
      inject->add_option("--ecc", inject_ecc, "double-bit ECC count to report on --gpu");
  inject->add_flag("--kill", inject_kill, "stop the node's agent (a crash)");
  inject->add_flag("--stall", inject_stall,
                   "the node's agent renews its lease but starts no pod (a wedged runtime, "
                   "until a reboot repairs it)");
  inject->callback([&] {
    auto h = client();
    rc = h ? DebugInject(*h, name,
                         xid_given->count() ? std::optional<int>(inject_xid) : std::nullopt,
                         gpu_given->count() ? std::optional<int>(inject_gpu) : std::nullopt,
                         ecc_given->count() ? std::optional<int64_t>(inject_ecc) : std::nullopt,
                         inject_kill, inject_stall)
           : 2;
  });
  CLI::App* nodes = app.add_subcommand("nodes", "Fleet inventory");
  nodes->require_subcommand(1);
  CLI::App* export_cmd = nodes->add_subcommand("export", "Print the inventory (NetBox JSON)");
  std::string format = "netbox";
  export_cmd->add_option("--format", format, "netbox");
  export_cmd->callback([&] {
    auto h = client();
    rc = h ? ExportNodes(*h, format) : 2;
  });
  CLI::App* repaired_cmd =
      nodes->add_subcommand("repaired", "Report a node's repair done by people (admins)");
  std::string repaired_node, repaired_message = "repaired";
  bool repaired_failed = false;
  repaired_cmd->add_option("node", repaired_node)->required();
  repaired_cmd->add_flag("--failed", repaired_failed, "the repair did not fix it");
  repaired_cmd->add_option("-m,--message", repaired_message, "what was done");
  repaired_cmd->callback([&] {
    auto h = client();
    rc = h ? NodeRepaired(*h, repaired_node, repaired_failed, repaired_message) : 2;
  });
  CLI::App* token_cmd =
      nodes->add_subcommand("token", "Issue a bearer token for a node's agent (admins)");
  std::string token_node;
  token_cmd->add_option("node", token_node)->required();
  token_cmd->callback([&] {
    auto h = client();
    rc = h ? NodeToken(*h, token_node) : 2;
  });
  CLI::App* top = app.add_subcommand("top", "Allocation per node and GPU");
  std::vector<std::string> top_names;
  top->add_option("what", what)->required();
  top->add_option("name", top_names, "nodes to show (none: all)");
  top->add_flag("--no-headers", g_no_headers, "print the table without its header line");
  std::string top_sort;
  top->add_option("--sort-by", top_sort,
                  "gpu (GPUs allocated), memory (GPU memory held) or free (GPUs free, not held, "
                  "in service, on a node taking work): the most first");
  top->callback([&] {
    if (what != "nodes" && what != "node" && what != "no") {
      std::cerr << "fabctl: only `top nodes` exists\n";
      rc = 2;
      return;
    }
    auto h = client();
    rc = h ? TopNodes(*h, top_names, top_sort) : 2;
  });
  CLI::App* usage = app.add_subcommand("usage", "GPU-hours held and used, and their cost");
  std::string window = "7d", by = "tenant", step;
  bool share_idle = false, csv = false;
  usage->add_option("--window", window, "today, week, month, 7d, 12h, or start,end");
  usage->add_option("--by", by, "tenant, queue, workload, node, model, cluster (comma list)");
  usage->add_option("--step", step, "one row set per step, e.g. 1d");
  usage->add_flag("--share-idle", share_idle, "share idle cost out in proportion to cost");
  usage->add_flag("--csv", csv, "print CSV for invoices");
  usage->callback([&] {
    auto h = client();
    rc = h ? Usage(*h, window, by, step, share_idle, csv) : 2;
  });
  CLI::App* logs = app.add_subcommand("logs", "Output of a workload's pod, as its node shipped it");
  std::string pod;
  int64_t tail = -1;
  bool follow = false;
  logs->add_option("name", name)->required();
  logs->add_option("-n,--namespace,--tenant", g.ns, "tenant");
  logs->add_option("--pod", pod, "pod, e.g. worker-1 (default: the first)");
  logs->add_option("--tail", tail, "only the last N lines");
  logs->add_flag("-f,--follow", follow, "keep printing new output until the workload ends");
  logs->callback([&] {
    auto h = client();
    rc = h ? Logs(g, *h, name, pod, tail, follow) : 2;
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A first word that is no command is named, as kubectl's `unknown command "foo"` (CLI11
    // says only that a subcommand is required).
    if (e.get_exit_code() != 0 && argc > 1 && argv[1][0] != '-') {
      bool known = false;
      for (const CLI::App* sub :
           std::as_const(app).get_subcommands(std::function<bool(const CLI::App*)>()))
        known |= sub->check_name(argv[1]);
      if (!known) {
        std::fprintf(stderr, "fabctl: unknown command \"%s\" (fabctl --help lists the commands)\n",
                     argv[1]);
        return 1;
      }
    }
    // (Help is 0; a usage error is 1, as kubectl's, whatever CLI11 numbers it.)
    return app.exit(e) == 0 ? 0 : 1;
  }
  return rc;
}
