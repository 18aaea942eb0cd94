#include "sched/queue_objects.h"

#include <algorithm>
#include <regex>
#include <set>
#include <tuple>

#include "core/doc.h"
#include "core/yaml_reader.h"

namespace fabrica {

using nlohmann::json;

namespace {

// metadata.name, or "" (read without throwing: a hand-edited record must not stop the
// scheduler).
std::string ObjectName(const json& o) {
  const auto meta = o.find("metadata");
  return meta != o.end() && meta->is_object() && meta->contains("name") &&
                 (*meta)["name"].is_string()
             ? (*meta)["name"].get<std::string>()
             : "";
}

json SpecWithName(const json& o) {
  json spec = o.contains("spec") && o["spec"].is_object() ? o["spec"] : json::object();
  spec["name"] = ObjectName(o);
  return spec;
}

}  // namespace

Result<FlavorSpec> FlavorFromObject(const json& flavor, const std::string& source) {
  YamlMap m(Doc::FromJson(SpecWithName(flavor)), "spec", source);
  return ParseFlavor(m);
}

Result<AdmissionConfig> QueueTreeFromObjects(const std::vector<json>& queues,
                                             const std::vector<json>& flavors) {
  json doc = {{"queues", json::array()}};
  if (!flavors.empty()) {
    // (specificity, how many it names, name, spec): MIG profiles named first, then models
    // named, fewer before more.
    std::vector<std::tuple<int, size_t, std::string, json>> order;
    bool has_default = false;
    for (const json& f : flavors) {
      if (!f.is_object()) continue;
      json spec = SpecWithName(f);
      const auto named = [&](const char* key) {
        return spec.contains(key) && spec[key].is_array() && !spec[key].empty();
      };
      const int rank = named("migProfiles") ? 0 : named("models") ? 1 : 2;
      const size_t names = rank == 0   ? spec["migProfiles"].size()
                           : rank == 1 ? spec["models"].size()
                                       : 0;
      has_default |= spec["name"] == kDefaultFlavor;
      order.emplace_back(rank, names, spec["name"].get<std::string>(), std::move(spec));
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
             std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    doc["flavors"] = json::array();
    for (auto& [rank, names, name, spec] : order) doc["flavors"].push_back(std::move(spec));
    if (!has_default) doc["flavors"].push_back({{"name", kDefaultFlavor}});
  }
  bool has_unqueued = false, best_effort = false;
  for (const json& q : queues) {
    if (!q.is_object()) continue;
    json spec = SpecWithName(q);
    spec.erase("budget");
    has_unqueued |= spec["name"] == kUnqueuedQueue;
    doc["queues"].push_back(spec);
  }
  if (!has_unqueued) {
    std::set<std::string> roots, parents;
    for (const json& q : doc["queues"]) {
      const std::string parent = q.contains("parent") && q["parent"].is_string() ? q["parent"] : "";
      if (parent.empty()) {
        roots.insert(q["name"].get<std::string>());
      } else {
        parents.insert(parent);
      }
    }
    json unqueued = {{"name", kUnqueuedQueue}};
    const bool under_root = roots.size() == 1 && parents.count(*roots.begin());
    if (under_root) unqueued["parent"] = *roots.begin();
    doc["queues"].push_back(unqueued);
    // Best effort: beside several trees a tree of its own, with no guarantee, taking what is
    // idle; under the one tree's root, a leaf whose work goes after its siblings' and is the
    // first reclaimed, by a sibling without a guarantee of its own too, for the root's (a
    // trial saw it take GPUs a sibling waited for and keep them).
    best_effort = true;
  }
  YamlMap m(Doc::FromJson(doc), "", "stored queues");
  Result<AdmissionConfig> tree = ParseAdmissionConfig(m);
  if (tree.ok()) {
    for (QueueSpec& q : tree->queues) {
      if (best_effort) q.best_effort = q.name == kUnqueuedQueue;
      if (!has_unqueued) q.no_fair_share = q.name == kUnqueuedQueue;
    }
    return tree;
  }
  // Said of the stored objects: "queues[1].quotas..." is Queue 'name''s spec.quotas....
  // (Each of them, where several errors are said at once: YamlMap::Keep.)
  const std::string message = tree.status().message();
  static const std::regex kAt(R"(queues\[(\d+)\](\.?))");
  const std::string source = "stored queues: ";
  std::string said;
  size_t from = 0;
  for (auto it = std::sregex_iterator(message.begin(), message.end(), kAt);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& at = *it;
    const size_t i = std::stoul(at[1].str());
    if (i >= doc["queues"].size()) continue;
    // (What came before the first, and the source before each, says nothing more.)
    std::string before = from == 0
                             ? std::string()
                             : message.substr(from, static_cast<size_t>(at.position(0)) - from);
    if (before.size() >= source.size() &&
        before.compare(before.size() - source.size(), source.size(), source) == 0)
      before.resize(before.size() - source.size());
    said += before + "Queue '" + doc["queues"][i]["name"].get<std::string>() +
            "': " + (at[2].length() ? "spec." : "spec");
    from = static_cast<size_t>(at.position(0) + at.length());
  }
  said = from == 0 ? message : said + message.substr(from);
  return Status(tree.status().code(), said);
}

std::set<std::string> LeafQueues(const AdmissionConfig& tree) {
  std::set<std::string> leaves, parents;
  for (const QueueSpec& q : tree.queues) {
    leaves.insert(q.name);
    parents.insert(q.parent);
  }
  for (const std::string& p : parents) leaves.erase(p);
  return leaves;
}

std::string WaitingQueue(const std::set<std::string>& leaves, const std::string& queue,
                         const std::string& tenant) {
  if (!queue.empty()) return queue;
  return leaves.count(tenant) ? tenant : kUnqueuedQueue;
}

Status TenantMayUse(const std::string& tenant, const std::string& leaf,
                    const std::function<const QueueSpec*(const std::string&)>& find) {
  if (leaf == tenant || leaf == kUnqueuedQueue || !find(leaf)) return Status();
  int depth = 0;  // a stored tree may have a cycle until the scheduler refuses it
  for (const QueueSpec* q = find(leaf); q && depth < 64; q = find(q->parent), ++depth) {
    // (The queue named after the tenant is its own, and so is every queue below it.)
    if (q->name == tenant) return Status();
    for (const std::string& t : q->tenants)
      if (t == tenant || t == "*") return Status();
    if (q->parent.empty()) break;
  }
  return Status(StatusCode::kPermissionDenied,
                "tenant " + tenant + " may not use queue " + leaf +
                    ": neither it nor a queue above it is named after the tenant or lists it in "
                    "spec.tenants");
}

std::set<std::string> StoppedQueues(const AdmissionConfig& tree) {
  std::set<std::string> out;
  for (const QueueSpec& q : tree.queues)
    if (q.stop_policy != StopPolicy::kNone)
      for (const std::string& below : Subtree(tree, q.name)) out.insert(below);
  return out;
}

std::vector<std::string> Subtree(const AdmissionConfig& tree, const std::string& name) {
  std::vector<std::string> out;
  std::set<std::string> in{name};
  for (const QueueSpec& q : tree.queues)
    if (q.name == name) out.push_back(name);
  if (out.empty()) return out;
  // Parents may be listed after their children: repeat until nothing is added.
  for (bool grew = true; grew;) {
    grew = false;
    for (const QueueSpec& q : tree.queues)
      if (!in.count(q.name) && in.count(q.parent)) {
        in.insert(q.name);
        out.push_back(q.name);
        grew = true;
      }
  }
  return out;
}

}  // namespace fabrica
