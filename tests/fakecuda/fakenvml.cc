// A fake libnvidia-ml.so.1 for the shim's CPU tests: the devices of the fake libcuda.so.1 (same
// UUIDs), each with FAKECUDA_TOTAL_MEM bytes (default 80 GiB) of which 1 GiB is in use.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shim/cuda_types.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
struct FakeNvmlDevice {
  unsigned index;
};
FakeNvmlDevice g_devices[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
unsigned Count() {
  const char* n = getenv("FAKECUDA_DEVICE_COUNT");
  return n ? static_cast<unsigned>(atoi(n)) : 1;
}
unsigned long long Total() {
  const char* t = getenv("FAKECUDA_TOTAL_MEM");
  return t ? strtoull(t, nullptr, 10) : 80ull << 30;
}
}  // namespace

FAKE_EXPORT nvmlReturn_t nvmlInit_v2() { return NVML_SUCCESS; }
FAKE_EXPORT nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  *count = Count();
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  if (index >= Count() || index >= 8) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(&g_devices[index]);
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  snprintf(uuid, length, "GPU-face0000-0000-0000-0000-0000000000%02x",
           reinterpret_cast<FakeNvmlDevice*>(device)->index);
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned length) {
  snprintf(name, length, "Fabrica Fake GPU");
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t* memory) {
  memory->total = Total();
  memory->used = 1ull << 30;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t* memory) {
  if (memory->version != NVML_MEMORY_V2_VERSION) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = Total();
  memory->reserved = 0;
  memory->used = 1ull << 30;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}
