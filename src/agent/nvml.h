// The slice of NVML the node agent uses, loaded at run time with dlopen.
//
// No NVML header is installed where Fabrica builds, and the agent must start (and say why it
// cannot use NVML) on machines without a driver, so the library is never linked. This header
// declares the few types and constants Fabrica needs, laid out as NVML's C ABI has them on
// Linux x86_64/aarch64 (the sizes are checked below), and NvmlLibrary resolves typed function
// pointers by their versioned symbol names. Optional functions that an older driver lacks stay
// null: that feature is then absent, not an error.
//
// Only queries are declared. Nothing here can change MIG mode or instances, clocks, ECC or
// persistence: discovery must never reconfigure a GPU that is running someone's work.
//
// An NvmlLibrary is one nvmlInit_v2 .. nvmlShutdown session; NVML itself is thread-safe, but
// the agent uses a library from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace fabrica::nvml {

// Opaque handles, as in nvml.h.
struct DeviceSt;
struct EventSetSt;
using Device = DeviceSt*;
using EventSet = EventSetSt*;

// nvmlReturn_t (a C enum, int-sized).
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorUnknown = 999;

// Buffer sizes (the _V2 sizes, which are the larger).
inline constexpr unsigned kUuidBufferSize = 96;
inline constexpr unsigned kNameBufferSize = 96;
inline constexpr unsigned kDriverVersionBufferSize = 80;
// NVML_NVLINK_MAX_LINKS in current headers; older drivers answer links past theirs with an error.
inline constexpr unsigned kNvLinkMaxLinks = 36;

// nvmlPciInfo_t (filled by nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2).
struct PciInfo {
  char bus_id_legacy[16];  // "0000:18:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_sub_system_id;
  char bus_id[32];  // "00000000:18:00.0"
};
static_assert(sizeof(PciInfo) == 68);

// nvmlMemory_t, in bytes.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlMemory_v2_t: `used` excludes the driver's reserved memory, as dcgm-exporter's FB_USED does.
struct MemoryV2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(MemoryV2) == 40);
inline constexpr unsigned int kMemoryV2Version = sizeof(MemoryV2) | (2u << 24);

// nvmlUtilization_t: percent of the last sample period.
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

// nvmlEventData_t; for an XID event, event_data is the XID.
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(EventData) == 32);

// nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2), used on MIG device handles.
struct DeviceAttributes {
  unsigned int multiprocessor_count;
  unsigned int shared_copy_engine_count;
  unsigned int shared_decoder_count;
  unsigned int shared_encoder_count;
  unsigned int shared_jpeg_count;
  unsigned int shared_ofa_count;
  unsigned int gpu_instance_slice_count;
  unsigned int compute_instance_slice_count;
  unsigned long long memory_size_mb;
};
static_assert(sizeof(DeviceAttributes) == 40);

// Enum values passed as int / unsigned int.
inline constexpr int kFeatureEnabled = 1;             // nvmlEnableState_t
inline constexpr unsigned kMigEnabled = 1;            // NVML_DEVICE_MIG_ENABLE
inline constexpr int kTemperatureGpu = 0;             // NVML_TEMPERATURE_GPU
inline constexpr int kMemoryErrorCorrected = 0;       // single-bit
inline constexpr int kMemoryErrorUncorrected = 1;     // double-bit
inline constexpr int kVolatileEcc = 0;                // since the driver loaded
inline constexpr int kAggregateEcc = 1;               // lifetime of the board
inline constexpr unsigned kAffinityScopeNode = 0;     // NVML_AFFINITY_SCOPE_NODE
inline constexpr int kNvLinkDeviceTypeGpu = 0;        // nvmlIntNvLinkDeviceType_t
inline constexpr int kNvLinkDeviceTypeSwitch = 2;     //
inline constexpr unsigned long long kEventXid = 0x8;  // nvmlEventTypeXidCriticalError
// nvmlGpuTopologyLevel_t
inline constexpr int kTopologyInternal = 0;
inline constexpr int kTopologySingle = 10;
inline constexpr int kTopologyMultiple = 20;
inline constexpr int kTopologyHostbridge = 30;
inline constexpr int kTopologyNode = 40;
inline constexpr int kTopologySystem = 50;

// "SINGLE", "NODE", ... for an nvmlGpuTopologyLevel_t; "UNKNOWN" for other values.
const char* TopologyLevelName(int level);

// Typed entry points. Required ones are never null in an opened library; optional ones are null
// when this driver's library lacks the symbol.
struct Api {
  // Required.
  Return (*init)() = nullptr;  // nvmlInit_v2 (or nvmlInit)
  Return (*shutdown)() = nullptr;
  Return (*device_get_count)(unsigned int*) = nullptr;
  Return (*device_get_handle_by_index)(unsigned int, Device*) = nullptr;
  Return (*device_get_uuid)(Device, char*, unsigned int) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned int) = nullptr;
  // Optional: system.
  const char* (*error_string)(Return) = nullptr;
  Return (*system_get_driver_version)(char*, unsigned int) = nullptr;
  Return (*system_get_cuda_driver_version)(int*) = nullptr;
  // Optional: identity, memory, placement.
  Return (*device_get_pci_info)(Device, PciInfo*) = nullptr;
  Return (*device_get_memory_info)(Device, Memory*) = nullptr;
  Return (*device_get_memory_info_v2)(Device, MemoryV2*) = nullptr;
  Return (*device_get_ecc_mode)(Device, int*, int*) = nullptr;
  Return (*device_get_cpu_affinity)(Device, unsigned int, unsigned long*) = nullptr;
  Return (*device_get_memory_affinity)(Device, unsigned int, unsigned long*, unsigned) = nullptr;
  Return (*device_get_topology_common_ancestor)(Device, Device, int*) = nullptr;
  // Optional: NVLink.
  Return (*device_get_nvlink_state)(Device, unsigned int, int*) = nullptr;
  Return (*device_get_nvlink_remote_pci_info)(Device, unsigned int, PciInfo*) = nullptr;
  Return (*device_get_nvlink_remote_device_type)(Device, unsigned int, int*) = nullptr;
  // Optional: MIG, read-only.
  Return (*device_get_mig_mode)(Device, unsigned int*, unsigned int*) = nullptr;
  Return (*device_get_max_mig_device_count)(Device, unsigned int*) = nullptr;
  Return (*device_get_mig_device_handle_by_index)(Device, unsigned int, Device*) = nullptr;
  Return (*device_get_gpu_instance_id)(Device, unsigned int*) = nullptr;
  Return (*device_get_compute_instance_id)(Device, unsigned int*) = nullptr;
  Return (*device_get_attributes)(Device, DeviceAttributes*) = nullptr;
  // Optional: telemetry.
  Return (*device_get_utilization_rates)(Device, Utilization*) = nullptr;
  Return (*device_get_power_usage)(Device, unsigned int*) = nullptr;  // mW
  Return (*device_get_temperature)(Device, int, unsigned int*) = nullptr;
  Return (*device_get_total_ecc_errors)(Device, int, int, unsigned long long*) = nullptr;
  // Optional: events.
  Return (*event_set_create)(EventSet*) = nullptr;
  Return (*device_get_supported_event_types)(Device, unsigned long long*) = nullptr;
  Return (*device_register_events)(Device, unsigned long long, EventSet) = nullptr;
  Return (*event_set_wait)(EventSet, EventData*, unsigned int) = nullptr;  // nvmlEventSetWait_v2
  Return (*event_set_free)(EventSet) = nullptr;
};

// The default library name, and the environment variable that overrides it (tests point it at a
// fake).
inline constexpr const char kLibraryName[] = "libnvidia-ml.so.1";
inline constexpr const char kLibraryEnv[] = "FABRICA_NVML_LIBRARY";

class Library {
 public:
  // Loads `path` (empty: $FABRICA_NVML_LIBRARY, else libnvidia-ml.so.1), resolves the API and
  // calls nvmlInit. Unavailable when the library cannot be loaded or lacks a required symbol,
  // FailedPrecondition when nvmlInit fails (e.g. the driver is not loaded); both say which.
  static Result<std::unique_ptr<Library>> Open(const std::string& path = "");
  ~Library();  // nvmlShutdown, then dlclose
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const Api& api() const { return api_; }
  const std::string& path() const { return path_; }
  // NVML's text for `r` ("GPU is lost"), or "NVML error <r>" without nvmlErrorString.
  std::string ErrorString(Return r) const;

 private:
  Library(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
  Api api_;
  bool initialized_ = false;
};

}  // namespace fabrica::nvml
