#include "agent/dcgm_exporter.h"

#include <charconv>
#include <set>

namespace fabrica {
namespace {

// One series: its dcgm-exporter name, type, help, and the reading's value as text ("" to leave
// the row out).
struct Field {
  const char* name;
  const char* type;
  const char* help;
  std::string (*value)(const GpuReading&);
};

std::string Int(int64_t v) { return v < 0 ? "" : std::to_string(v); }

std::string Real(double v) {
  if (v < 0) return "";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : "";
}

const Field kFields[] = {
    {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
     [](const GpuReading& r) { return Int(r.temperature_c); }},
    {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
     [](const GpuReading& r) { return Real(r.power_watts); }},
    {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
     [](const GpuReading& r) { return Int(r.util_percent); }},
    {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
     [](const GpuReading& r) { return Int(r.fb_free_mib); }},
    {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
     [](const GpuReading& r) { return Int(r.fb_used_mib); }},
    {"DCGM_FI_DEV_XID_ERRORS", "gauge", "The last XID error seen (0: none).",
     [](const GpuReading& r) { return r.mig_gpu_instance_id >= 0 ? "" : Int(r.last_xid); }},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit ECC errors since the driver loaded.",
     [](const GpuReading& r) { return Int(r.ecc_sbe_volatile); }},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit ECC errors since the driver loaded.",
     [](const GpuReading& r) { return Int(r.ecc_dbe_volatile); }},
    {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Double-bit ECC errors over the board's life.",
     [](const GpuReading& r) { return Int(r.ecc_dbe_aggregate); }},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
     "Ratio of time the graphics or compute engine was active.",
     [](const GpuReading& r) { return Real(r.gr_engine_active); }},
};

// The labels every row has; extra labels may not take these names.
const std::set<std::string>& StandardLabels() {
  static const std::set<std::string> kNames = {"gpu",      "UUID",      "pci_bus_id",
                                               "device",   "modelName", "GPU_I_PROFILE",
                                               "GPU_I_ID", "Hostname",  "DCGM_FI_DRIVER_VERSION"};
  return kNames;
}

std::string LabelName(const std::string& name) {
  std::string out = name.empty() ? "_" : name;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) out[i] = '_';
  }
  return out;
}

void AppendLabel(std::string& out, const std::string& name, const std::string& value) {
  if (out.size() > 1) out += ',';
  out += name;
  out += "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
}

std::string LabelsOf(const Inventory& inv, const GpuReading& r, const DeviceLabels& extra) {
  const GpuDetails* d = nullptr;
  for (const GpuDetails& g : inv.gpus) {
    if (g.index == r.index) d = &g;
  }
  std::string out = "{";
  AppendLabel(out, "gpu", std::to_string(r.index));
  AppendLabel(out, "UUID", r.uuid);
  if (d != nullptr) AppendLabel(out, "pci_bus_id", d->pci_bus_id);
  AppendLabel(out, "device", "nvidia" + std::to_string(r.index));
  if (d != nullptr) AppendLabel(out, "modelName", d->name);
  std::string key = r.uuid;
  if (r.mig_gpu_instance_id >= 0) {
    key += "/" + std::to_string(r.mig_gpu_instance_id);
    std::string profile;
    for (size_t k = 0; d != nullptr && k < d->mig_instances.size(); ++k) {
      if (d->mig_instances[k].gpu_instance_id == r.mig_gpu_instance_id) {
        profile = d->mig_instances[k].profile;
      }
    }
    AppendLabel(out, "GPU_I_PROFILE", profile);
    AppendLabel(out, "GPU_I_ID", std::to_string(r.mig_gpu_instance_id));
  }
  AppendLabel(out, "Hostname", inv.node.name.str());
  if (d != nullptr && !d->driver_version.empty()) {
    AppendLabel(out, "DCGM_FI_DRIVER_VERSION", d->driver_version);
  }
  auto it = extra.find(key);
  if (it != extra.end()) {
    for (const auto& [name, value] : it->second) {
      const std::string label = LabelName(name);
      if (StandardLabels().count(label) == 0) AppendLabel(out, label, value);
    }
  }
  out += '}';
  return out;
}

}  // namespace

std::map<std::string, std::string> WorkloadLabels(const std::string& tenant,
                                                  const std::string& workload,
                                                  const std::string& pod) {
  return {{"namespace", tenant},
          {"pod", pod},
          {"container", ""},
          {"fabrica_tenant", tenant},
          {"fabrica_workload", workload}};
}

std::string RenderDcgmExporterPage(const Inventory& inventory,
                                   const std::vector<GpuReading>& readings,
                                   const DeviceLabels& labels) {
  std::vector<std::string> label_text;
  label_text.reserve(readings.size());
  for (const GpuReading& r : readings) {
    label_text.push_back(r.lost ? "" : LabelsOf(inventory, r, labels));
  }
  std::string page;
  for (const Field& f : kFields) {
    std::string rows;
    for (size_t i = 0; i < readings.size(); ++i) {
      if (readings[i].lost) continue;
      const std::string value = f.value(readings[i]);
      if (value.empty()) continue;
      rows += f.name + label_text[i] + " " + value + "\n";
    }
    if (rows.empty()) continue;
    page += std::string("# HELP ") + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.type +
            "\n" + rows;
  }
  return page;
}

}  // namespace fabrica
