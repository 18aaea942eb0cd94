// A fake libnvidia-ml.so.1 for the NVML backend's tests: two H200s on NUMA nodes 0 and 1, joined
// by four NVLinks. GPU 0 is whole (37% busy, 3 corrected ECC errors); GPU 1 is in MIG mode with a
// 3g.71gb and a 1g.18gb instance, has double-bit ECC errors and an XID 48 waiting in the event
// stream. It answers as NVML does where the backend depends on it: NOT_SUPPORTED for device
// utilization in MIG mode, NOT_FOUND for empty MIG slots, GPU_IS_LOST from every call on a lost
// GPU, TIMEOUT from an empty event set. nvmlDeviceGetAttributes_v2 is missing on purpose (an
// optional function). It exports no function that changes anything on a GPU.
//
// Tests steer it through the fake_nvml_* functions at the end (dlsym them from the same path).
// State is reset by the first nvmlInit after the last nvmlShutdown.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iterator>
#include <utility>

#include "agent/nvml.h"

namespace {

using fabrica::nvml::Device;
using fabrica::nvml::EventData;
using fabrica::nvml::EventSet;
using fabrica::nvml::Return;
namespace nv = fabrica::nvml;

struct FakeMig {
  unsigned gpu_instance_id, compute_instance_id;
  const char* uuid;
  const char* name;
  unsigned long long total_mib, used_mib;
};

struct FakeGpu {
  const char* uuid = nullptr;
  unsigned bus = 0;
  unsigned long long total_mib = 0, used_mib = 0;
  unsigned util_percent = 0, power_mw = 0, temperature_c = 0;
  bool mig = false;
  FakeMig migs[2] = {};
  unsigned long long sbe = 0, dbe_volatile = 0, dbe_aggregate = 0;
  int numa = 0;
  unsigned long cpu_mask[2] = {};
  bool lost = false;
  bool registered = false;
};

constexpr int kGpus = 2;
constexpr unsigned kMaxMigs = 7;
constexpr unsigned kLinks = 18;
constexpr unsigned kLinksUp = 4;
constexpr unsigned long long kMib = 1024ULL * 1024;

const FakeGpu kInitial[kGpus] = {
    {.uuid = "GPU-6f2a1c55-0b1e-4b61-9d4f-6b3b0a0e0001",
     .bus = 0x18,
     .total_mib = 143771,
     .used_mib = 1024,
     .util_percent = 37,
     .power_mw = 250123,
     .temperature_c = 41,
     .mig = false,
     .sbe = 3,
     .numa = 0,
     .cpu_mask = {0x10FUL, 0}},  // CPUs 0-3 and 8
    {.uuid = "GPU-6f2a1c55-0b1e-4b61-9d4f-6b3b0a0e0002",
     .bus = 0x2a,
     .total_mib = 143771,
     .used_mib = 2048,
     .power_mw = 400000,
     .temperature_c = 55,
     .mig = true,
     .migs = {{1, 0, "MIG-2b0c7e4a-93d1-5c6e-8a47-1f0e5d3c0001", "NVIDIA H200 MIG 3g.71gb", 71424,
               2048},
              {5, 0, "MIG-2b0c7e4a-93d1-5c6e-8a47-1f0e5d3c0005", "NVIDIA H200 MIG 1g.18gb", 16384,
               0}},
     .sbe = 7,
     .dbe_volatile = 2,
     .dbe_aggregate = 5,
     .numa = 1,
     .cpu_mask = {0, 0xFFUL}},  // CPUs 64-71
};

// A handle is the address of one of these: a whole GPU (mig < 0) or one MIG device.
struct Handle {
  int gpu;
  int mig;
};
const Handle kHandles[kGpus * 3] = {{0, -1}, {1, -1}, {0, 0}, {0, 1}, {1, 0}, {1, 1}};

FakeGpu g_gpus[kGpus];
std::deque<std::pair<int, unsigned long long>> g_events;  // (gpu, XID)
int g_inits = 0;
bool g_nvlink_up = true;
int g_event_set;  // its address is the one event set handle

const Handle* Find(Device d) {
  for (const Handle& h : kHandles) {
    if (reinterpret_cast<Device>(const_cast<Handle*>(&h)) == d) return &h;
  }
  return nullptr;
}

Device HandleOf(int gpu, int mig) {
  for (const Handle& h : kHandles) {
    if (h.gpu == gpu && h.mig == mig) return reinterpret_cast<Device>(const_cast<Handle*>(&h));
  }
  return nullptr;
}

// The handle's state, with the answer NVML would give: success, invalid, or the GPU lost.
Return Resolve(Device d, FakeGpu** gpu, const FakeMig** mig = nullptr) {
  if (g_inits == 0) return nv::kErrorUninitialized;
  const Handle* h = Find(d);
  if (h == nullptr) return nv::kErrorInvalidArgument;
  *gpu = &g_gpus[h->gpu];
  if (mig != nullptr) *mig = h->mig >= 0 ? &g_gpus[h->gpu].migs[h->mig] : nullptr;
  return (*gpu)->lost ? nv::kErrorGpuIsLost : nv::kSuccess;
}

Return CopyText(const char* text, char* out, unsigned length) {
  if (out == nullptr) return nv::kErrorInvalidArgument;
  if (std::strlen(text) + 1 > length) return nv::kErrorInsufficientSize;
  std::strcpy(out, text);
  return nv::kSuccess;
}

void FillPci(const FakeGpu& g, nv::PciInfo* pci) {
  std::memset(pci, 0, sizeof(*pci));
  pci->bus = g.bus;
  pci->pci_device_id = 0x233510de;
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", g.bus);
  std::snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "0000:%02X:00.0", g.bus);
}

// A MIG device's GPU or compute instance id; NOT_SUPPORTED on a whole GPU.
Return MigId(Device d, unsigned FakeMig::*field, unsigned* id) {
  FakeGpu* g;
  const FakeMig* m;
  if (Return r = Resolve(d, &g, &m); r != nv::kSuccess) return r;
  if (m == nullptr) return nv::kErrorNotSupported;
  *id = m->*field;
  return nv::kSuccess;
}

}  // namespace

#define FAKE_API extern "C" __attribute__((visibility("default")))

FAKE_API Return nvmlInit_v2() {
  if (g_inits++ == 0) {
    std::copy(std::begin(kInitial), std::end(kInitial), g_gpus);
    g_events.assign({{1, 48}});
    g_nvlink_up = true;
  }
  return nv::kSuccess;
}

FAKE_API Return nvmlShutdown() {
  if (g_inits == 0) return nv::kErrorUninitialized;
  --g_inits;
  return nv::kSuccess;
}

FAKE_API const char* nvmlErrorString(Return r) {
  switch (r) {
    case nv::kSuccess:
      return "Success";
    case nv::kErrorGpuIsLost:
      return "GPU is lost";
    case nv::kErrorNotSupported:
      return "Not Supported";
    default:
      return "Unknown Error";
  }
}

FAKE_API Return nvmlSystemGetDriverVersion(char* version, unsigned length) {
  return CopyText("570.133.20", version, length);
}

FAKE_API Return nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 12080;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetCount_v2(unsigned* count) {
  if (g_inits == 0) return nv::kErrorUninitialized;
  *count = kGpus;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetHandleByIndex_v2(unsigned index, Device* device) {
  if (g_inits == 0) return nv::kErrorUninitialized;
  if (index >= kGpus) return nv::kErrorInvalidArgument;
  *device = HandleOf(static_cast<int>(index), -1);
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetUUID(Device d, char* uuid, unsigned length) {
  FakeGpu* g;
  const FakeMig* m;
  if (Return r = Resolve(d, &g, &m); r != nv::kSuccess) return r;
  return CopyText(m != nullptr ? m->uuid : g->uuid, uuid, length);
}

FAKE_API Return nvmlDeviceGetName(Device d, char* name, unsigned length) {
  FakeGpu* g;
  const FakeMig* m;
  if (Return r = Resolve(d, &g, &m); r != nv::kSuccess) return r;
  return CopyText(m != nullptr ? m->name : "NVIDIA H200", name, length);
}

FAKE_API Return nvmlDeviceGetPciInfo_v3(Device d, nv::PciInfo* pci) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  FillPci(*g, pci);
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetMemoryInfo(Device d, nv::Memory* mem) {
  FakeGpu* g;
  const FakeMig* m;
  if (Return r = Resolve(d, &g, &m); r != nv::kSuccess) return r;
  const unsigned long long total = m != nullptr ? m->total_mib : g->total_mib;
  const unsigned long long used = m != nullptr ? m->used_mib : g->used_mib;
  *mem = {total * kMib, (total - used) * kMib, used * kMib};
  return nv::kSuccess;
}

// As NVML: `used` without the reserved memory, which v1 counts as used.
FAKE_API Return nvmlDeviceGetMemoryInfo_v2(Device d, nv::MemoryV2* mem) {
  if (mem->version != nv::kMemoryV2Version) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  nv::Memory v1;
  if (Return r = nvmlDeviceGetMemoryInfo(d, &v1); r != nv::kSuccess) return r;
  mem->total = v1.total;
  mem->used = v1.used;
  mem->reserved = Find(d)->mig < 0 ? 512 * kMib : 0;
  mem->free = v1.free - mem->reserved;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetEccMode(Device d, int* current, int* pending) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  *current = *pending = nv::kFeatureEnabled;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetCpuAffinity(Device d, unsigned size, unsigned long* set) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (size < 2) return nv::kErrorInsufficientSize;
  std::memset(set, 0, size * sizeof(unsigned long));
  set[0] = g->cpu_mask[0];
  set[1] = g->cpu_mask[1];
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetMemoryAffinity(Device d, unsigned size, unsigned long* set,
                                            unsigned scope) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (size < 1 || scope != nv::kAffinityScopeNode) return nv::kErrorInvalidArgument;
  set[0] = 1UL << g->numa;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetTopologyCommonAncestor(Device a, Device b, int* level) {
  FakeGpu *ga, *gb;
  if (Return r = Resolve(a, &ga); r != nv::kSuccess) return r;
  if (Return r = Resolve(b, &gb); r != nv::kSuccess) return r;
  *level = ga == gb ? nv::kTopologyInternal : nv::kTopologySystem;  // one per socket
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkState(Device d, unsigned link, int* active) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (link >= kLinks) return nv::kErrorInvalidArgument;
  *active = g_nvlink_up && link < kLinksUp ? nv::kFeatureEnabled : 0;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned link, nv::PciInfo* pci) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (link >= kLinks) return nv::kErrorInvalidArgument;
  FillPci(g_gpus[g == &g_gpus[0] ? 1 : 0], pci);
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkRemoteDeviceType(Device d, unsigned link, int* type) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (link >= kLinks) return nv::kErrorInvalidArgument;
  *type = nv::kNvLinkDeviceTypeGpu;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetMigMode(Device d, unsigned* current, unsigned* pending) {
  FakeGpu* g;
  const FakeMig* m;
  if (Return r = Resolve(d, &g, &m); r != nv::kSuccess) return r;
  if (m != nullptr) return nv::kErrorNotSupported;
  *current = *pending = g->mig ? nv::kMigEnabled : 0;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetMaxMigDeviceCount(Device d, unsigned* count) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  *count = kMaxMigs;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetMigDeviceHandleByIndex(Device d, unsigned index, Device* mig) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (!g->mig || index >= kMaxMigs) return nv::kErrorInvalidArgument;
  if (index >= 2) return nv::kErrorNotFound;
  *mig = HandleOf(Find(d)->gpu, static_cast<int>(index));
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuInstanceId(Device d, unsigned* id) {
  return MigId(d, &FakeMig::gpu_instance_id, id);
}

FAKE_API Return nvmlDeviceGetComputeInstanceId(Device d, unsigned* id) {
  return MigId(d, &FakeMig::compute_instance_id, id);
}

FAKE_API Return nvmlDeviceGetUtilizationRates(Device d, nv::Utilization* util) {
  FakeGpu* g;
  const FakeMig* m;
  if (Return r = Resolve(d, &g, &m); r != nv::kSuccess) return r;
  if (g->mig || m != nullptr) return nv::kErrorNotSupported;
  *util = {g->util_percent, g->util_percent / 2};
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetPowerUsage(Device d, unsigned* mw) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  *mw = g->power_mw;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetTemperature(Device d, int sensor, unsigned* temp) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (sensor != nv::kTemperatureGpu) return nv::kErrorInvalidArgument;
  *temp = g->temperature_c;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetTotalEccErrors(Device d, int type, int counter,
                                            unsigned long long* count) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (type == nv::kMemoryErrorCorrected) {
    *count = counter == nv::kVolatileEcc ? g->sbe : g->sbe + 10;
  } else {
    *count = counter == nv::kVolatileEcc ? g->dbe_volatile : g->dbe_aggregate;
  }
  return nv::kSuccess;
}

FAKE_API Return nvmlEventSetCreate(EventSet* set) {
  if (g_inits == 0) return nv::kErrorUninitialized;
  *set = reinterpret_cast<EventSet>(&g_event_set);
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceGetSupportedEventTypes(Device d, unsigned long long* types) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  *types = 0x1 | 0x2 | nv::kEventXid;
  return nv::kSuccess;
}

FAKE_API Return nvmlDeviceRegisterEvents(Device d, unsigned long long types, EventSet set) {
  FakeGpu* g;
  if (Return r = Resolve(d, &g); r != nv::kSuccess) return r;
  if (set != reinterpret_cast<EventSet>(&g_event_set)) return nv::kErrorInvalidArgument;
  if ((types & nv::kEventXid) != 0) g->registered = true;
  return nv::kSuccess;
}

FAKE_API Return nvmlEventSetWait_v2(EventSet set, EventData* data, unsigned timeout_ms) {
  if (set != reinterpret_cast<EventSet>(&g_event_set)) return nv::kErrorInvalidArgument;
  for (auto it = g_events.begin(); it != g_events.end(); ++it) {
    if (!g_gpus[it->first].registered) continue;
    *data = EventData{HandleOf(it->first, -1), nv::kEventXid, it->second, 0xFFFFFFFF, 0xFFFFFFFF};
    g_events.erase(it);
    return nv::kSuccess;
  }
  return nv::kErrorTimeout;
}

FAKE_API Return nvmlEventSetFree(EventSet set) {
  return set == reinterpret_cast<EventSet>(&g_event_set) ? nv::kSuccess : nv::kErrorInvalidArgument;
}

// ---- Test controls ----

// GPU `index` falls off the bus: an XID 79 event, then GPU_IS_LOST from every call on it.
FAKE_API void fake_nvml_lose_gpu(int index) {
  g_gpus[index].lost = true;
  g_events.emplace_back(index, 79);
}

FAKE_API void fake_nvml_push_xid(int index, unsigned long long xid) {
  g_events.emplace_back(index, xid);
}

FAKE_API void fake_nvml_set_nvlink(int up) { g_nvlink_up = up != 0; }

// nvmlInit calls not yet matched by nvmlShutdown.
FAKE_API int fake_nvml_open_sessions() { return g_inits; }
