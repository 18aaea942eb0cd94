// DeviceBackend: what the node agent knows about its GPUs, from NVML or from a simulation.
//
// `fabrica agent --devices nvml` loads libnvidia-ml.so.1 with dlopen and the project's own
// declarations of the functions it needs (agent/nvml.h); `--devices sim:FILE` simulates the
// node of that name in a fleet file (the one fleet schema) and can inject faults. Both serve
// this interface; the agent, its /metrics page and its reports to the server see nothing else.
// Not thread-safe: the agent calls a backend from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"

namespace fabrica {

// One MIG instance of a GPU in MIG mode (read-only discovery).
struct MigInstanceInfo {
  int gpu_instance_id = -1;      // GPU_I_ID in dcgm-exporter's labels
  int compute_instance_id = -1;  // GPU_CI_ID
  std::string profile;           // e.g. "1g.18gb"
  std::string uuid;              // MIG-... UUID
  int64_t memory_mib = 0;
};

// Discovery facts beyond the fleet schema's Device, index-aligned with Node::devices.
struct GpuDetails {
  int index = 0;
  std::string uuid;
  std::string name;        // the driver's product name, e.g. "NVIDIA H200"
  std::string pci_bus_id;  // e.g. "00000000:18:00.0"
  bool mig_mode = false;
  std::vector<MigInstanceInfo> mig_instances;
  // Topology to every other GPU of the node, by index: "NVLINK", "SINGLE", "MULTIPLE", "HOSTBRIDGE",
  // "NODE", "SYSTEM" (NVML's common-ancestor levels), or "" for itself.
  std::vector<std::string> topology;
  std::string cpu_affinity;  // CPU list this GPU is closest to, e.g. "0-47,96-143"
  std::string driver_version;
  std::string cuda_driver_version;  // e.g. "13.0"
};

struct Inventory {
  Node node;  // the fleet schema's node: name, cpu, memory, numa nodes, devices, nics
  std::vector<GpuDetails> gpus;
};

// A reading of one GPU (or one MIG instance, with mig_gpu_instance_id >= 0). Fields NVML cannot
// give on this device are -1.
struct GpuReading {
  int index = 0;
  std::string uuid;
  int mig_gpu_instance_id = -1;
  int32_t util_percent = -1;             // DCGM_FI_DEV_GPU_UTIL
  double gr_engine_active = -1;          // DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0..1
  int64_t fb_used_mib = -1;              // DCGM_FI_DEV_FB_USED
  int64_t fb_free_mib = -1;              // DCGM_FI_DEV_FB_FREE
  double power_watts = -1;               // DCGM_FI_DEV_POWER_USAGE
  int32_t temperature_c = -1;            // DCGM_FI_DEV_GPU_TEMP
  int64_t ecc_sbe_volatile = -1;         // DCGM_FI_DEV_ECC_SBE_VOL_TOTAL
  int64_t ecc_dbe_volatile = -1;         // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
  int64_t ecc_dbe_aggregate = -1;        // DCGM_FI_DEV_ECC_DBE_AGG_TOTAL
  int32_t last_xid = 0;                  // DCGM_FI_DEV_XID_ERRORS: the last XID seen, 0 none
  bool lost = false;                     // fallen off the bus (NVML_ERROR_GPU_IS_LOST)
};

struct XidEvent {
  int gpu = -1;
  int xid = 0;
  int64_t time_ms = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // "nvml" or "sim".
  virtual std::string Kind() const = 0;
  // The node's inventory. `node_name` names it (the agent's --node).
  virtual Result<Inventory> Discover() = 0;
  // One reading per GPU (and per MIG instance). A lost GPU reads with lost = true.
  virtual Result<std::vector<GpuReading>> Read() = 0;
  // XID events since the last call (NVML event set, or injected); never blocks.
  virtual std::vector<XidEvent> PollXids() = 0;
  // Injects a fault (simulated backends only; NVML answers FailedPrecondition). An XID 79
  // makes the GPU fall off the bus. `now_ms` stamps events.
  virtual Status Inject(const FaultInjection& fault, int64_t now_ms) = 0;
};

// "nvml" or "sim:FILE". `node_name` is the node to discover (for sim, its entry in FILE; for
// nvml, the name given to the node). `now_ms` fixes the start of a sim fleet's scheduled faults.
Result<std::unique_ptr<DeviceBackend>> OpenDeviceBackend(const std::string& spec,
                                                         const std::string& node_name);

}  // namespace fabrica
