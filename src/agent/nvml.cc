#include "agent/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <utility>

namespace fabrica::nvml {
namespace {

// Points `*fn` at the first of `names` the library has; null when it has none of them.
template <typename Fn>
bool Bind(void* handle, Fn* fn, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* sym = dlsym(handle, name)) {
      *fn = reinterpret_cast<Fn>(sym);
      return true;
    }
  }
  *fn = nullptr;
  return false;
}

}  // namespace

const char* TopologyLevelName(int level) {
  switch (level) {
    case kTopologyInternal:
      return "INTERNAL";
    case kTopologySingle:
      return "SINGLE";
    case kTopologyMultiple:
      return "MULTIPLE";
    case kTopologyHostbridge:
      return "HOSTBRIDGE";
    case kTopologyNode:
      return "NODE";
    case kTopologySystem:
      return "SYSTEM";
    default:
      return "UNKNOWN";
  }
}

Result<std::unique_ptr<Library>> Library::Open(const std::string& path) {
  std::string file = path;
  if (file.empty()) {
    const char* env = std::getenv(kLibraryEnv);
    file = env != nullptr && *env != '\0' ? env : kLibraryName;
  }
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::kUnavailable,
                  "NVML library not found: cannot load " + file + " (" +
                      (why != nullptr ? why : "dlopen failed") +
                      "); is the NVIDIA driver installed? Use --devices sim:FILE to simulate");
  }
  std::unique_ptr<Library> lib(new Library(handle, file));
  Api& a = lib->api_;
  // The versioned names first: nvml.h maps the plain names to them, and the plain symbols are the
  // old ABI kept for old binaries.
  struct Required {
    const char* what;
    bool bound;
  };
  const Required required[] = {
      {"nvmlInit_v2", Bind(handle, &a.init, {"nvmlInit_v2", "nvmlInit"})},
      {"nvmlShutdown", Bind(handle, &a.shutdown, {"nvmlShutdown"})},
      {"nvmlDeviceGetCount_v2",
       Bind(handle, &a.device_get_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"})},
      {"nvmlDeviceGetHandleByIndex_v2",
       Bind(handle, &a.device_get_handle_by_index,
            {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"})},
      {"nvmlDeviceGetUUID", Bind(handle, &a.device_get_uuid, {"nvmlDeviceGetUUID"})},
      {"nvmlDeviceGetName", Bind(handle, &a.device_get_name, {"nvmlDeviceGetName"})},
  };
  for (const Required& r : required) {
    if (!r.bound) {
      return Status(StatusCode::kUnavailable, file + " has no " + r.what + ": not a usable NVML");
    }
  }
  Bind(handle, &a.error_string, {"nvmlErrorString"});
  Bind(handle, &a.system_get_driver_version, {"nvmlSystemGetDriverVersion"});
  Bind(handle, &a.system_get_cuda_driver_version,
       {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  Bind(handle, &a.device_get_pci_info, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"});
  Bind(handle, &a.device_get_memory_info, {"nvmlDeviceGetMemoryInfo"});
  Bind(handle, &a.device_get_memory_info_v2, {"nvmlDeviceGetMemoryInfo_v2"});
  Bind(handle, &a.device_get_ecc_mode, {"nvmlDeviceGetEccMode"});
  Bind(handle, &a.device_get_cpu_affinity, {"nvmlDeviceGetCpuAffinity"});
  Bind(handle, &a.device_get_memory_affinity, {"nvmlDeviceGetMemoryAffinity"});
  Bind(handle, &a.device_get_topology_common_ancestor, {"nvmlDeviceGetTopologyCommonAncestor"});
  Bind(handle, &a.device_get_nvlink_state, {"nvmlDeviceGetNvLinkState"});
  Bind(handle, &a.device_get_nvlink_remote_pci_info,
       {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"});
  Bind(handle, &a.device_get_nvlink_remote_device_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});
  Bind(handle, &a.device_get_mig_mode, {"nvmlDeviceGetMigMode"});
  Bind(handle, &a.device_get_max_mig_device_count, {"nvmlDeviceGetMaxMigDeviceCount"});
  Bind(handle, &a.device_get_mig_device_handle_by_index, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  Bind(handle, &a.device_get_gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
  Bind(handle, &a.device_get_compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
  Bind(handle, &a.device_get_attributes, {"nvmlDeviceGetAttributes_v2"});
  Bind(handle, &a.device_get_utilization_rates, {"nvmlDeviceGetUtilizationRates"});
  Bind(handle, &a.device_get_power_usage, {"nvmlDeviceGetPowerUsage"});
  Bind(handle, &a.device_get_temperature, {"nvmlDeviceGetTemperature"});
  Bind(handle, &a.device_get_total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
  Bind(handle, &a.event_set_create, {"nvmlEventSetCreate"});
  Bind(handle, &a.device_get_supported_event_types, {"nvmlDeviceGetSupportedEventTypes"});
  Bind(handle, &a.device_register_events, {"nvmlDeviceRegisterEvents"});
  Bind(handle, &a.event_set_wait, {"nvmlEventSetWait_v2"});
  Bind(handle, &a.event_set_free, {"nvmlEventSetFree"});

  const Return r = a.init();
  if (r != kSuccess) {
    return FailedPrecondition("nvmlInit failed in " + file + ": " + lib->ErrorString(r));
  }
  lib->initialized_ = true;
  return lib;
}

Library::~Library() {
  if (initialized_) api_.shutdown();
  dlclose(handle_);
}

std::string Library::ErrorString(Return r) const {
  const char* s = api_.error_string != nullptr ? api_.error_string(r) : nullptr;
  return s != nullptr ? std::string(s) + " (" + std::to_string(r) + ")"
                      : "NVML error " + std::to_string(r);
}

}  // namespace fabrica::nvml
