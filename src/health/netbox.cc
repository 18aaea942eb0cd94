#include "health/netbox.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace fabrica::health {

namespace {

using nlohmann::json;

json Page(const json& results) {
  return {
      {"count", results.size()}, {"next", nullptr}, {"previous", nullptr}, {"results", results}};
}

std::string Slug(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) c = '-';
  }
  return s;
}

json Brief(const char* path, int id, const std::string& display) {
  return {{"id", id},
          {"url", std::string("/api/") + path + std::to_string(id) + "/"},
          {"display", display}};
}

json Choice(const std::string& value, const std::string& label) {
  return {{"value", value}, {"label", label}};
}

json Status(const std::string& state) {
  if (state == "available" || state == "cordoned" || state == "draining") {
    return Choice("active", "Active");
  }
  if (state == "enroll" || state == "inspecting" || state == "burn-in") {
    return Choice("staged", "Staged");
  }
  if (state == "retired") return Choice("decommissioning", "Decommissioning");
  return Choice("failed", "Failed");
}

// NetBox interface type slugs by speed.
std::string InterfaceType(int gbps) {
  switch (gbps) {
    case 800:
      return "800gbase-x-osfp";
    case 400:
      return "400gbase-x-osfp";
    case 200:
      return "200gbase-x-qsfp56";
    case 100:
      return "100gbase-x-qsfp28";
    case 25:
      return "25gbase-x-sfp28";
    default:
      return "other";
  }
}

std::string NodeTypeModel(const Node& n) {
  if (n.gpu_count() == 0) return "CPU server";
  return n.gpu_model() + " " + std::to_string(n.gpu_count()) + "-GPU server";
}

}  // namespace

std::string ExportNetbox(const Fleet& fleet, const std::map<NodeId, std::string>& states,
                         const std::string& site_slug) {
  const json nvidia = {{"id", 1}, {"name", "NVIDIA"}, {"slug", "nvidia"}};
  json device_types = json::array();
  json module_types = json::array();
  json devices = json::array();
  json modules = json::array();
  json interfaces = json::array();
  std::map<std::string, int> type_ids;
  std::map<std::string, int> module_type_ids;
  std::map<std::string, int> rack_ids;
  for (const Node& n : fleet.nodes) {
    const std::string model = NodeTypeModel(n);
    auto [type_it, new_type] = type_ids.try_emplace(model, static_cast<int>(type_ids.size()) + 1);
    if (new_type) {
      json t = Brief("dcim/device-types/", type_it->second, model);
      t["manufacturer"] = nvidia;
      t["model"] = model;
      t["slug"] = Slug(model);
      t["u_height"] = n.gpu_model() == "GB200" ? 1 : 8;
      device_types.push_back(std::move(t));
    }
    const int device_id = static_cast<int>(devices.size()) + 1;
    auto it = states.find(n.name);
    const std::string state = it == states.end() ? "available" : it->second;
    json d = Brief("dcim/devices/", device_id, n.name.str());
    d["name"] = n.name.str();
    d["device_type"] = Brief("dcim/device-types/", type_it->second, model);
    d["device_type"]["model"] = model;
    d["role"] = {{"id", 1}, {"name", "GPU node"}, {"slug", "gpu-node"}};
    d["site"] = {{"id", 1}, {"name", site_slug}, {"slug", site_slug}};
    if (!n.rack.empty()) {
      auto [rack_it, unused] = rack_ids.try_emplace(n.rack, static_cast<int>(rack_ids.size()) + 1);
      d["rack"] = Brief("dcim/racks/", rack_it->second, n.rack);
      d["rack"]["name"] = n.rack;
    } else {
      d["rack"] = nullptr;
    }
    d["status"] = Status(state);
    d["custom_fields"] = {
        {"fabrica_state", state},
        {"infiniband_leaf", n.leaf},
        {"nvlink_domain", n.nvlink_domain.empty() ? n.name.str() : n.nvlink_domain},
        {"gpu_count", n.gpu_count()}};
    devices.push_back(d);
    const json device_ref = [&] {
      json r = Brief("dcim/devices/", device_id, n.name.str());
      r["name"] = n.name.str();
      return r;
    }();

    for (size_t g = 0; g < n.devices.size(); ++g) {
      const Device& dev = n.devices[g];
      auto [mt_it, new_mt] =
          module_type_ids.try_emplace(dev.model, static_cast<int>(module_type_ids.size()) + 1);
      const int64_t memory_gb = dev.memory.value() / 1024;
      json attributes = {{"gpu", dev.model}, {"memory", memory_gb}, {"interface", "PCIe 5.0 x16"}};
      if (new_mt) {
        json mt = Brief("dcim/module-types/", mt_it->second, dev.model);
        mt["manufacturer"] = nvidia;
        mt["model"] = dev.model;
        mt["profile"] = {{"id", 1}, {"name", "GPU"}};
        mt["attributes"] = attributes;
        module_types.push_back(std::move(mt));
      }
      json m = Brief("dcim/modules/", static_cast<int>(modules.size()) + 1,
                     n.name.str() + " GPU " + std::to_string(g));
      m["device"] = device_ref;
      m["module_bay"] = {{"name", "GPU " + std::to_string(g)}};
      m["module_type"] = Brief("dcim/module-types/", mt_it->second, dev.model);
      m["module_type"]["model"] = dev.model;
      m["module_type"]["attributes"] = attributes;
      m["serial"] = dev.uuid;
      m["status"] = Status(state);
      m["custom_fields"] = {{"numa_node", dev.numa_node},
                            {"mig_enabled", dev.mig_enabled()},
                            {"ecc_enabled", dev.ecc_enabled}};
      modules.push_back(std::move(m));
    }
    for (const Nic& nic : n.nics) {
      json i = Brief("dcim/interfaces/", static_cast<int>(interfaces.size()) + 1, nic.name);
      i["device"] = device_ref;
      i["name"] = nic.name;
      const std::string type = InterfaceType(nic.gbps);
      i["type"] = Choice(type, type);
      i["speed"] = static_cast<int64_t>(nic.gbps) * 1'000'000;  // NetBox speeds are in Kb/s
      i["enabled"] = true;
      i["mgmt_only"] = false;
      i["custom_fields"] = {{"numa_node", nic.numa_node},
                            {"infiniband_leaf", nic.leaf.empty() ? n.leaf : nic.leaf}};
      interfaces.push_back(std::move(i));
    }
  }
  json doc = {{"device_types", Page(device_types)},
              {"module_types", Page(module_types)},
              {"devices", Page(devices)},
              {"modules", Page(modules)},
              {"interfaces", Page(interfaces)}};
  return doc.dump(2);
}

}  // namespace fabrica::health
