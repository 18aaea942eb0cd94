// DeviceBackend: what the node agent knows about its GPUs, from NVML or from a simulation.
//
// `fabrica agent --devices nvml` loads libnvidia-ml.so.1 with dlopen and the project's own
// declarations of the functions it needs (agent/nvml.h); `--devices sim:FILE` simulates the
// node of that name in a fleet file (the one fleet schema) and can inject faults. Both serve
// this interface; the agent, its /metrics page and its reports to the server see nothing else.
// Not thread-safe: the agent calls a backend from one thread.
#pragma once

#include <cstdint>
#include <functional>
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
  // Topology to every other GPU of the node, by index: "NVLINK", "SINGLE", "MULTIPLE",
  // "HOSTBRIDGE", "NODE", "SYSTEM" (NVML's common-ancestor levels), or "" for itself.
  std::vector<std::string> topology;
  std::string cpu_affinity;  // CPU list this GPU is closest to, e.g. "0-47,96-143"
  int nvlink_links = 0;      // active NVLink links
  bool nvswitch = false;     // at least one active link ends at an NVSwitch
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
  int32_t util_percent = -1;       // DCGM_FI_DEV_GPU_UTIL
  double gr_engine_active = -1;    // DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0..1
  int64_t fb_used_mib = -1;        // DCGM_FI_DEV_FB_USED
  int64_t fb_free_mib = -1;        // DCGM_FI_DEV_FB_FREE
  double power_watts = -1;         // DCGM_FI_DEV_POWER_USAGE
  int32_t temperature_c = -1;      // DCGM_FI_DEV_GPU_TEMP
  int64_t ecc_sbe_volatile = -1;   // DCGM_FI_DEV_ECC_SBE_VOL_TOTAL
  int64_t ecc_dbe_volatile = -1;   // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
  int64_t ecc_dbe_aggregate = -1;  // DCGM_FI_DEV_ECC_DBE_AGG_TOTAL
  int32_t last_xid = 0;            // DCGM_FI_DEV_XID_ERRORS: the last XID seen, 0 none
  bool lost = false;               // fallen off the bus (NVML_ERROR_GPU_IS_LOST)
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
// nvml, the name given to the node). A sim fleet's scheduled faults count from this call, on the
// wall clock (Unix ms), which also stamps XID events.
Result<std::unique_ptr<DeviceBackend>> OpenDeviceBackend(const std::string& spec,
                                                         const std::string& node_name);

// The NVML backend over `library_path` (empty: $FABRICA_NVML_LIBRARY, else libnvidia-ml.so.1).
// Unavailable, naming the library, when it cannot be loaded; FailedPrecondition when nvmlInit
// fails. Discovery is read-only: it never changes MIG mode, instances, clocks or ECC.
Result<std::unique_ptr<DeviceBackend>> OpenNvmlDeviceBackend(const std::string& node_name,
                                                             const std::string& library_path = "");

// A simulated node, with the knobs a test or `fabrica up` turns. Readings follow the busy
// fraction: util and GR engine activity, temperature 35..60 C, power from idle to the model's
// board power. Scheduled faults of the fleet file for this node fire when `now_ms()` reaches
// their at_ms after the backend was made (checked on every call); an XID 79 makes the GPU fall
// off the bus for good (Read reports it lost, with no values, and no MIG rows).
class SimDeviceBackend : public DeviceBackend {
 public:
  // How busy a GPU, or one MIG instance (by its MIG UUID), is, in per-mille (0..1000); a GPU's
  // value also stands for its MIG instances that have none of their own. NotFound for an
  // unknown UUID.
  virtual Status SetBusy(const std::string& uuid, int32_t permille) = 0;
  // Framebuffer in use on a GPU or MIG instance, clamped to its memory.
  virtual Status SetMemoryUsed(const std::string& uuid, int64_t mib) = 0;
  // Whether a `kill: true` fault has fired: the agent should then stop as a crashed node would.
  virtual bool Killed() = 0;
  // The simulated hardware's side of a GPU reset (`gpu`) or a reboot (-1, every GPU): volatile
  // ECC counters are cleared and a GPU that fell off the bus is back. InvalidArgument for a GPU
  // the node does not have.
  virtual Status Repair(int gpu) = 0;
};

// Simulates node `node_name` of `fleet`. `now_ms` is the clock of scheduled faults and event
// stamps. NotFound when the fleet has no such node.
Result<std::unique_ptr<SimDeviceBackend>> NewSimDeviceBackend(const Fleet& fleet,
                                                              const std::string& node_name,
                                                              std::function<int64_t()> now_ms);
// The same, from a fleet file (ParseFleetYaml's format and errors).
Result<std::unique_ptr<SimDeviceBackend>> OpenSimDeviceBackend(const std::string& fleet_file,
                                                               const std::string& node_name,
                                                               std::function<int64_t()> now_ms);

// The fleet schema's model for a driver product name: "NVIDIA H200" -> "H200", "NVIDIA H100
// 80GB HBM3" -> "H100", "NVIDIA A100-SXM4-80GB" -> "A100", "Tesla V100-SXM2-32GB" -> "V100",
// "NVIDIA GeForce RTX 4090" -> "RTX4090". A MIG device's " MIG ..." suffix is ignored.
std::string GpuModelFromName(const std::string& product_name);

}  // namespace fabrica
