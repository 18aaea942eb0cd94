// Utilization samples, the meter's input from the device layer.
//
// A sample says how busy one device (a whole GPU or one MIG instance) was at one instant, as
// per-mille of its compute (0..1000). It comes from Fabrica's node agents or is read from any
// dcgm-exporter `/metrics` page (meter/dcgm.h). Samples are identified by (device, time): the
// meter counts a sample seen twice once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fabrica {

struct DeviceSample {
  std::string node;           // the Hostname / hostname label, or the agent's node name
  std::string device_uuid;    // GPU UUID; a MIG instance is "<GPU UUID>/<GPU instance id>"
  int64_t time_ms = 0;        // when the value was measured (Unix ms)
  int32_t util_permille = 0;  // 0..1000
  // Optional, from the shim: the fraction of the device's busy time each sharing workload used
  // (per-mille, keyed by "tenant/workload"). Empty when unknown.
  std::map<std::string, int32_t> achieved_permille;
};

// Other per-device gauges read from the same page (for health and dashboards); the meter itself
// uses only DeviceSample.
struct DeviceGauges {
  std::string node;
  std::string device_uuid;
  std::string model;  // modelName label
  int gpu_index = -1;
  std::map<std::string, double> values;  // DCGM field name -> value, blanks left out
};

}  // namespace fabrica
