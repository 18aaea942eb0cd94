// The vGPU shim's configuration and the reader of its shared usage region.
//
// The node agent writes one ShimConfig per container (FormatShimConfig) to a file and starts the
// container's processes with FABRICA_VGPU_CONFIG=<file>, LD_PRELOAD=<dir>/libfabrica-vgpu.so and
// CUDA_VISIBLE_DEVICES=<uuids>. The shim parses it strictly (ParseShimConfig) and fails closed on
// any error. All processes of the container account their device memory and GPU busy time in one
// shared region file (region_path); the agent reads it with ReadShimRegion.
//
// This library has no dependencies beyond the C++ standard library and POSIX, because it is also
// compiled into libfabrica-vgpu.so. Functions are thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fabrica {

struct ShimConfig {
  std::string container;    // a name without whitespace, e.g. "team-a/job-7/0"
  std::string region_path;  // absolute path of the shared usage region, e.g. under /dev/shm
  struct Dev {
    // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or "MIG-..."), matched against the UUID the
    // driver reports; or a decimal ordinal ("0"), matched against the CUDA device ordinal the
    // process sees (after CUDA_VISIBLE_DEVICES). NVML queries match by UUID only.
    std::string uuid;
    int64_t memory_limit_bytes = 0;  // > 0
    int compute_permille = 1000;     // 1..1000: the share of the device's busy time
  };
  std::vector<Dev> devices;  // 1..16 entries
};

// The text form, one field per line:
//   fabrica-vgpu-config 1
//   container team-a/job-7
//   region /dev/shm/fabrica-vgpu/team-a-job-7
//   device GPU-... memory_bytes=10737418240 compute_permille=300
std::string FormatShimConfig(const ShimConfig& config);

// Strict: unknown keys, repeated keys, missing fields, bad numbers and out-of-range values are
// errors naming the line and field. Blank lines and lines starting with '#' are ignored.
bool ParseShimConfig(const std::string& text, ShimConfig* out, std::string* error);

// Reads `path` and parses it; the error names the file.
bool LoadShimConfig(const std::string& path, ShimConfig* out, std::string* error);

// What the container's processes use now, from the shared region.
struct ContainerUsage {
  std::string container;
  struct Dev {
    std::string uuid;  // as in the config
    int64_t memory_used_bytes = 0;
    // GPU busy time of the container's kernels on this device since the region was created, in
    // the shim's clock (CLOCK_MONOTONIC ns). Sample twice: share = delta busy / delta wall time.
    int64_t busy_ns = 0;
  };
  std::vector<Dev> devices;
  // Processes with a slot. Slots of dead processes are freed by the container's own processes
  // (pids are in the container's pid namespace), so a container with no live process keeps its
  // last count until the next one starts or the agent removes the file.
  int live_processes = 0;
};

// Takes a shared fcntl lock on the region for the copy; never modifies it.
bool ReadShimRegion(const std::string& path, ContainerUsage* out, std::string* error);

}  // namespace fabrica
