#include "sched/queue_objects.h"

#include <set>

#include "core/doc.h"
#include "core/yaml_reader.h"

namespace fabrica {

using nlohmann::json;

Result<AdmissionConfig> QueueTreeFromObjects(const std::vector<json>& queues) {
  json doc = {{"queues", json::array()}};
  bool has_unqueued = false;
  for (const json& q : queues) {
    if (!q.is_object()) continue;
    json spec = q.contains("spec") && q["spec"].is_object() ? q["spec"] : json::object();
    spec.erase("budget");
    // Read without throwing: a hand-edited record must not stop the scheduler.
    const auto meta = q.find("metadata");
    const bool named = meta != q.end() && meta->is_object() && meta->contains("name") &&
                       (*meta)["name"].is_string();
    spec["name"] = named ? (*meta)["name"].get<std::string>() : "";
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
    if (roots.size() == 1 && parents.count(*roots.begin())) unqueued["parent"] = *roots.begin();
    doc["queues"].push_back(unqueued);
  }
  YamlMap m(Doc::FromJson(doc), "", "stored queues");
  return ParseAdmissionConfig(m);
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
    for (const std::string& t : q->tenants)
      if (t == tenant || t == "*") return Status();
    if (q->parent.empty()) break;
  }
  return Status(StatusCode::kPermissionDenied,
                "tenant " + tenant + " may not use queue " + leaf +
                    ": neither it nor a queue above it lists the tenant in spec.tenants");
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
