#include "health/inspection.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

namespace fabrica::health {

namespace {

std::string Peers(std::vector<int> peers) {
  std::sort(peers.begin(), peers.end());
  std::string out = "[";
  for (size_t i = 0; i < peers.size(); ++i) out += (i ? "," : "") + std::to_string(peers[i]);
  return out + "]";
}

}  // namespace

std::vector<std::string> CompareInventory(const Node& expected, const Node& discovered) {
  std::vector<std::string> diffs;
  if (expected.gpu_count() != discovered.gpu_count()) {
    diffs.push_back("GPU count " + std::to_string(discovered.gpu_count()) + ", expected " +
                    std::to_string(expected.gpu_count()));
  }
  const int gpus = std::min(expected.gpu_count(), discovered.gpu_count());
  for (int d = 0; d < gpus; ++d) {
    const Device& e = expected.devices[d];
    const Device& g = discovered.devices[d];
    const std::string gpu = "GPU " + std::to_string(d) + ": ";
    if (e.model != g.model) {
      diffs.push_back(gpu + "model " + g.model + ", expected " + e.model);
    }
    if (e.memory != g.memory) {
      diffs.push_back(gpu + "memory " + std::to_string(g.memory.value()) + " MiB, expected " +
                      std::to_string(e.memory.value()) + " MiB");
    }
    if (e.ecc_enabled != g.ecc_enabled) {
      diffs.push_back(gpu + "ECC " + (g.ecc_enabled ? "enabled" : "disabled") + ", expected " +
                      (e.ecc_enabled ? "enabled" : "disabled"));
    }
    if (Peers(e.nvlink_peers) != Peers(g.nvlink_peers)) {
      diffs.push_back(gpu + "NVLink peers " + Peers(g.nvlink_peers) + ", expected " +
                      Peers(e.nvlink_peers));
    }
  }
  for (int d = gpus; d < expected.gpu_count(); ++d) {
    diffs.push_back("GPU " + std::to_string(d) + ": missing (expected " +
                    expected.devices[d].model + ")");
  }
  for (int d = gpus; d < discovered.gpu_count(); ++d) {
    diffs.push_back("GPU " + std::to_string(d) + ": not in the inventory (" +
                    discovered.devices[d].model + ")");
  }
  if (expected.nics.size() != discovered.nics.size()) {
    diffs.push_back("NIC count " + std::to_string(discovered.nics.size()) + ", expected " +
                    std::to_string(expected.nics.size()));
  }
  std::set<std::string> found;
  for (const Nic& n : discovered.nics) found.insert(n.name);
  for (const Nic& e : expected.nics) {
    auto it = std::find_if(discovered.nics.begin(), discovered.nics.end(),
                           [&](const Nic& n) { return n.name == e.name; });
    if (it == discovered.nics.end()) {
      diffs.push_back("NIC " + e.name + ": missing");
    } else if (it->gbps != e.gbps) {
      diffs.push_back("NIC " + e.name + ": " + std::to_string(it->gbps) + " Gb/s, expected " +
                      std::to_string(e.gbps) + " Gb/s");
    }
    found.erase(e.name);
  }
  for (const std::string& name : found) diffs.push_back("NIC " + name + ": not in the inventory");
  return diffs;
}

namespace {

using nlohmann::json;

Status CheckFields(const json& obj, const std::string& path, std::set<std::string> allowed) {
  if (!obj.is_object()) return InvalidArgument(path + ": expected an object");
  for (const auto& [key, value] : obj.items()) {
    if (!allowed.count(key)) return InvalidArgument(path + "." + key + ": unknown field");
  }
  return Status::Ok();
}

Result<int64_t> Integer(const json& obj, const std::string& key, const std::string& path,
                        int64_t min) {
  if (!obj.contains(key)) return InvalidArgument(path + "." + key + ": missing");
  const json& v = obj.at(key);
  if (!v.is_number_integer()) return InvalidArgument(path + "." + key + ": expected an integer");
  const int64_t n = v.get<int64_t>();
  if (n < min) {
    return InvalidArgument(path + "." + key + ": " + std::to_string(n) + " is below " +
                           std::to_string(min));
  }
  return n;
}

Result<std::string> String(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.contains(key)) return InvalidArgument(path + "." + key + ": missing");
  const json& v = obj.at(key);
  if (!v.is_string() || v.get<std::string>().empty()) {
    return InvalidArgument(path + "." + key + ": expected a non-empty string");
  }
  return v.get<std::string>();
}

}  // namespace

Result<Node> ParseInventoryReport(const std::string& json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("inventory report: not valid JSON");
  RETURN_IF_ERROR(CheckFields(doc, "inventory", {"node", "gpus", "nics"}));
  Node node;
  ASSIGN_OR_RETURN(std::string name, String(doc, "node", "inventory"));
  node.name = NodeId(name);
  if (!doc.contains("gpus") || !doc["gpus"].is_array()) {
    return InvalidArgument("inventory.gpus: expected a list");
  }
  const int gpus = static_cast<int>(doc["gpus"].size());
  for (int i = 0; i < gpus; ++i) {
    const json& g = doc["gpus"][i];
    const std::string path = "inventory.gpus[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(
        CheckFields(g, path, {"uuid", "model", "memoryMiB", "eccEnabled", "nvlinkPeers"}));
    Device d;
    ASSIGN_OR_RETURN(d.uuid, String(g, "uuid", path));
    ASSIGN_OR_RETURN(d.model, String(g, "model", path));
    ASSIGN_OR_RETURN(int64_t memory, Integer(g, "memoryMiB", path, 1));
    d.memory = MemoryMib(memory);
    if (g.contains("eccEnabled")) {
      if (!g["eccEnabled"].is_boolean()) {
        return InvalidArgument(path + ".eccEnabled: expected true or false");
      }
      d.ecc_enabled = g["eccEnabled"].get<bool>();
    }
    if (g.contains("nvlinkPeers")) {
      const json& peers = g["nvlinkPeers"];
      if (!peers.is_array()) return InvalidArgument(path + ".nvlinkPeers: expected a list");
      for (size_t p = 0; p < peers.size(); ++p) {
        const std::string where = path + ".nvlinkPeers[" + std::to_string(p) + "]";
        if (!peers[p].is_number_integer()) return InvalidArgument(where + ": expected an integer");
        const int peer = peers[p].get<int>();
        if (peer < 0 || peer >= gpus || peer == i) {
          return InvalidArgument(where + ": " + std::to_string(peer) +
                                 " is not another GPU of this node");
        }
        d.nvlink_peers.push_back(peer);
      }
    }
    node.devices.push_back(std::move(d));
  }
  if (doc.contains("nics")) {
    if (!doc["nics"].is_array()) return InvalidArgument("inventory.nics: expected a list");
    for (size_t i = 0; i < doc["nics"].size(); ++i) {
      const json& n = doc["nics"][i];
      const std::string path = "inventory.nics[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(CheckFields(n, path, {"name", "gbps"}));
      Nic nic;
      ASSIGN_OR_RETURN(nic.name, String(n, "name", path));
      ASSIGN_OR_RETURN(int64_t gbps, Integer(n, "gbps", path, 1));
      nic.gbps = static_cast<int>(gbps);
      node.nics.push_back(std::move(nic));
    }
  }
  return node;
}

}  // namespace fabrica::health
