#include "cli/devices_command.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/dcgm_exporter.h"
#include "agent/device_backend.h"
#include "control/sim_agent.h"

namespace fabrica::cli {
namespace {

using json = nlohmann::json;

struct DevicesArgs {
  std::string devices = "nvml";
  std::string node;
  std::string format = "text";
};

// Prints rows with each column as wide as its widest cell, two blanks apart.
void PrintTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

std::string OrDash(int64_t v, const std::string& unit = "") {
  return v < 0 ? "-" : std::to_string(v) + unit;
}

std::string Watts(double w) {
  if (w < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f W", w);
  return buf;
}

std::string Peers(const std::vector<int>& peers) {
  std::string s;
  for (int p : peers) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s.empty() ? "-" : s;
}

void PrintText(const Inventory& inv, const std::vector<GpuReading>& readings) {
  const Node& n = inv.node;
  const GpuDetails* first = inv.gpus.empty() ? nullptr : &inv.gpus.front();
  std::printf("node %s: %d GPUs, %s CPUs, %s memory, %d NUMA nodes", n.name.str().c_str(),
              n.gpu_count(), FormatMilliCpu(n.cpu).c_str(), FormatMemoryMib(n.memory).c_str(),
              n.numa_nodes);
  if (first != nullptr) {
    std::printf("; driver %s, CUDA %s", first->driver_version.c_str(),
                first->cuda_driver_version.c_str());
  }
  std::printf("\n\n");
  std::vector<std::vector<std::string>> rows = {{"GPU", "UUID", "NAME", "MODEL", "MEMORY", "PCI",
                                                 "ECC", "MIG", "NUMA", "CPUS", "NVLINK", "PEERS"}};
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    const GpuDetails& g = inv.gpus[i];
    const Device& d = n.devices[i];
    std::string mig = g.mig_mode ? "on" : d.mig_capable ? "off" : "n/a";
    for (const MigInstanceInfo& m : g.mig_instances) mig += " " + m.profile;
    std::string links = std::to_string(g.nvlink_links) + (g.nvswitch ? " (switch)" : "");
    rows.push_back({std::to_string(g.index), g.uuid, g.name, d.model, FormatMemoryMib(d.memory),
                    g.pci_bus_id, d.ecc_enabled ? "on" : "off", mig, std::to_string(d.numa_node),
                    g.cpu_affinity.empty() ? "-" : g.cpu_affinity, links, Peers(d.nvlink_peers)});
  }
  PrintTable(rows, "");

  std::vector<std::vector<std::string>> migs = {{"GPU", "GI", "CI", "PROFILE", "MEMORY", "UUID"}};
  for (const GpuDetails& g : inv.gpus) {
    for (const MigInstanceInfo& m : g.mig_instances) {
      migs.push_back({std::to_string(g.index), std::to_string(m.gpu_instance_id),
                      std::to_string(m.compute_instance_id), m.profile,
                      std::to_string(m.memory_mib) + "Mi", m.uuid});
    }
  }
  if (migs.size() > 1) {
    std::printf("\nMIG instances:\n");
    PrintTable(migs, "  ");
  }

  if (inv.gpus.size() > 1) {
    std::printf("\nTopology:\n");
    std::vector<std::vector<std::string>> topo = {{""}};
    for (const GpuDetails& g : inv.gpus) topo[0].push_back("GPU" + std::to_string(g.index));
    for (const GpuDetails& g : inv.gpus) {
      std::vector<std::string> row = {"GPU" + std::to_string(g.index)};
      for (const std::string& t : g.topology) row.push_back(t.empty() ? "X" : t);
      topo.push_back(row);
    }
    PrintTable(topo, "  ");
  }
  if (!n.nics.empty()) {
    std::printf("\nNICs:\n");
    std::vector<std::vector<std::string>> nics = {{"NAME", "NUMA", "GBPS"}};
    for (const Nic& nic : n.nics) {
      nics.push_back({nic.name, std::to_string(nic.numa_node), std::to_string(nic.gbps)});
    }
    PrintTable(nics, "  ");
  }

  std::printf("\nReadings:\n");
  std::vector<std::vector<std::string>> rs = {{"GPU", "GI", "UTIL", "GR", "FB USED", "FB FREE",
                                               "POWER", "TEMP", "SBE", "DBE", "DBE AGG", "XID"}};
  for (const GpuReading& r : readings) {
    if (r.lost) {
      rs.push_back({std::to_string(r.index), "-", "lost", "", "", "", "", "", "", "", "",
                    std::to_string(r.last_xid)});
      continue;
    }
    char gr[16] = "-";
    if (r.gr_engine_active >= 0) std::snprintf(gr, sizeof(gr), "%.2f", r.gr_engine_active);
    rs.push_back({std::to_string(r.index), OrDash(r.mig_gpu_instance_id),
                  OrDash(r.util_percent, "%"), gr, OrDash(r.fb_used_mib, "Mi"),
                  OrDash(r.fb_free_mib, "Mi"), Watts(r.power_watts), OrDash(r.temperature_c, "C"),
                  OrDash(r.ecc_sbe_volatile), OrDash(r.ecc_dbe_volatile),
                  OrDash(r.ecc_dbe_aggregate), std::to_string(r.last_xid)});
  }
  PrintTable(rs, "  ");
}

json ToJson(const Inventory& inv, const std::vector<GpuReading>& readings) {
  json node = json::parse(NodeSpecJson(inv.node));
  node["name"] = inv.node.name.str();
  json gpus = json::array();
  for (const GpuDetails& g : inv.gpus) {
    json migs = json::array();
    for (const MigInstanceInfo& m : g.mig_instances) {
      migs.push_back({{"gpuInstanceId", m.gpu_instance_id},
                      {"computeInstanceId", m.compute_instance_id},
                      {"profile", m.profile},
                      {"uuid", m.uuid},
                      {"memoryMiB", m.memory_mib}});
    }
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"pciBusId", g.pci_bus_id},
                    {"migMode", g.mig_mode},
                    {"migInstances", migs},
                    {"topology", g.topology},
                    {"cpuAffinity", g.cpu_affinity},
                    {"nvlinkLinks", g.nvlink_links},
                    {"nvswitch", g.nvswitch},
                    {"driverVersion", g.driver_version},
                    {"cudaDriverVersion", g.cuda_driver_version}});
  }
  json rs = json::array();
  for (const GpuReading& r : readings) {
    json j = {{"index", r.index}, {"uuid", r.uuid}, {"lost", r.lost}, {"lastXid", r.last_xid}};
    // -1 means "no value": left out, as on the metrics page.
    auto put = [&j](const char* key, double v) {
      if (v >= 0) j[key] = v;
    };
    put("migGpuInstanceId", r.mig_gpu_instance_id);
    put("utilPercent", r.util_percent);
    put("grEngineActive", r.gr_engine_active);
    put("fbUsedMiB", static_cast<double>(r.fb_used_mib));
    put("fbFreeMiB", static_cast<double>(r.fb_free_mib));
    put("powerWatts", r.power_watts);
    put("temperatureC", r.temperature_c);
    put("eccSbeVolatile", static_cast<double>(r.ecc_sbe_volatile));
    put("eccDbeVolatile", static_cast<double>(r.ecc_dbe_volatile));
    put("eccDbeAggregate", static_cast<double>(r.ecc_dbe_aggregate));
    rs.push_back(j);
  }
  return {{"node", node}, {"gpus", gpus}, {"readings", rs}};
}

// JSON values as YAML: block maps and lists, scalar lists in flow style.
void EmitYaml(YAML::Emitter& out, const json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      EmitYaml(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    const bool flat =
        std::none_of(j.begin(), j.end(), [](const json& e) { return e.is_structured(); });
    if (flat) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const json& e : j) EmitYaml(out, e);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    out << j.get<std::string>();
  } else if (j.is_boolean()) {
    out << j.get<bool>();
  } else if (j.is_number_integer()) {
    out << j.get<int64_t>();
  } else if (j.is_number()) {
    out << j.get<double>();
  } else {
    out << YAML::Null;
  }
}

// A fleet file with this one node, in the one fleet schema (ParseFleetYaml reads it back).
std::string FleetYaml(const Inventory& inv) {
  YAML::Emitter out;
  out << YAML::Comment("Discovered by `fabrica devices` on " + inv.node.name.str());
  out << YAML::BeginMap << YAML::Key << "apiVersion" << YAML::Value << "fabrica.dev/v1";
  out << YAML::Key << "kind" << YAML::Value << "Fleet";
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << inv.node.name.str();
  const json spec = json::parse(NodeSpecJson(inv.node));
  for (const auto& [k, v] : spec.items()) {
    out << YAML::Key << k << YAML::Value;
    EmitYaml(out, v);
  }
  out << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

int Run(DevicesArgs args) {
  auto fail = [](const Status& st) {
    std::cerr << "fabrica devices: " << st.message() << "\n";
    return 2;
  };
  if (args.node.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    args.node = host;
  }
  auto backend = OpenDeviceBackend(args.devices, args.node);
  if (!backend.ok()) return fail(backend.status());
  auto inv = (*backend)->Discover();
  if (!inv.ok()) return fail(inv.status());
  auto readings = (*backend)->Read();
  if (!readings.ok()) return fail(readings.status());
  if (args.format == "json") {
    std::printf("%s\n", ToJson(*inv, *readings).dump(2).c_str());
  } else if (args.format == "yaml") {
    std::printf("%s", FleetYaml(*inv).c_str());
  } else if (args.format == "metrics") {
    std::printf("%s", RenderDcgmExporterPage(*inv, *readings).c_str());
  } else {
    PrintText(*inv, *readings);
  }
  return 0;
}

}  // namespace

void AddDevicesCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DevicesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "Show this node's GPUs as the agent's device backend discovers and reads them");
  cmd->add_option("--devices", args->devices,
                  "nvml (libnvidia-ml.so.1, or $FABRICA_NVML_LIBRARY) or sim:FLEET_FILE");
  cmd->add_option("--node", args->node, "node name (default: the host name; for sim, its node)");
  cmd->add_option("--format", args->format,
                  "text (default), json, yaml (a fleet file) or metrics (a dcgm-exporter page)")
      ->check(CLI::IsMember({"text", "json", "yaml", "metrics"}));
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace fabrica::cli
