// The agent's /metrics page in dcgm-exporter's format, so that whatever scrapes dcgm-exporter
// (Fabrica's meter, Prometheus dashboards, OpenCost) reads a node agent unchanged.
//
// Series use dcgm-exporter's field names and its labels: `gpu`, `UUID`, `pci_bus_id`, `device`
// ("nvidia<gpu>"), `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, and `GPU_I_PROFILE` /
// `GPU_I_ID` on a MIG instance's rows. Each device may carry extra labels, as dcgm-exporter's
// Kubernetes mapping adds `namespace` / `pod` / `container`; Fabrica adds `fabrica_tenant` and
// `fabrica_workload` too. Fields a reading lacks (-1) and lost GPUs are left out: a missing
// series is how Prometheus says "no value". Pure; safe to call from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/device_backend.h"

namespace fabrica {

// Extra labels per device: keyed by GPU UUID, or by "<GPU UUID>/<GPU_I_ID>" for a MIG instance
// (the meter's device identity). Label names that Prometheus does not accept have their other
// characters replaced by '_'.
using DeviceLabels = std::map<std::string, std::map<std::string, std::string>>;

// The labels dcgm-exporter's pod mapping would give a device a pod of `tenant`'s workload runs on
// (the tenant is the namespace), plus Fabrica's own.
std::map<std::string, std::string> WorkloadLabels(const std::string& tenant,
                                                  const std::string& workload,
                                                  const std::string& pod);

// One exposition page (text format 0.0.4) for `readings` of the devices in `inventory`, grouped
// by metric with `# HELP` and `# TYPE` lines. `Hostname` is the inventory's node name.
std::string RenderDcgmExporterPage(const Inventory& inventory,
                                   const std::vector<GpuReading>& readings,
                                   const DeviceLabels& labels = {});

}  // namespace fabrica
