// A fake libcuda.so.1 for the shim's CPU tests: enough of the driver API for the shim and the
// test programs, with device memory that is only bookkeeping and kernels that run on the shared
// virtual device of fake_device.h (or on a process-local clock without FAKECUDA_DEVICE_FILE).
//
// Environment: FAKECUDA_DEVICE_COUNT (default 1), FAKECUDA_TOTAL_MEM (bytes per device, default
// 80 GiB), FAKECUDA_DEVICE_FILE, FAKECUDA_CLIENTS, FAKECUDA_TAG.
//
// Kernels: a function named "fake_kernel_<us>" runs for <us> virtual microseconds; any other
// function runs for as many nanoseconds as its first parameter (a uint64, like the GPU check's
// spin kernel). Devices are "GPU-face0000-0000-0000-0000-0000000000NN" for ordinal NN.
//
// Linked with -Bsymbolic, as the real driver behaves: its calls to itself never reach the shim.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fake_device.h"
#include "shim/cuda_types.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using fakecuda::Client;
using fakecuda::DeviceFile;

constexpr int kMaxDevices = 8;

struct FakeFunction {
  int64_t cost_ns;    // -1: from the first kernel parameter
  bool burn = false;  // "fabrica_burn": the agent's burn-in kernel, computed on the host
};
struct FakeGraph {
  int64_t cost_ns = 0;
};
struct FakeEvent {
  int64_t t = 0;
  bool pending = false;
};
struct FakeContext {
  int device;
};

struct Fake {
  std::mutex mu;
  bool initialized = false;
  int device_count = 1;
  uint64_t total_bytes = 80ull << 30;
  uint64_t used_bytes[kMaxDevices] = {};
  uint64_t next_address = 0x7f0000000000ull;
  std::vector<std::pair<uint64_t, std::pair<int, uint64_t>>>
      allocations;  // address -> (dev, bytes)
  // Contents of allocations that were written (memset, the burn kernel), by base address;
  // words never written read as zero. FAKECUDA_CORRUPT_WORD=N flips word N of every read.
  std::map<uint64_t, std::vector<uint32_t>> contents;
  FakeContext contexts[kMaxDevices];
  std::vector<FakeEvent*> pending_events;
  // The virtual device.
  DeviceFile* device = nullptr;
  int client = -1;
  int64_t local_ns = 0;  // without a device file
};

Fake& F() {
  static Fake* fake = [] {
    Fake* f = new Fake;
    if (const char* n = getenv("FAKECUDA_DEVICE_COUNT")) {
      f->device_count = std::clamp(atoi(n), 0, kMaxDevices);
    }
    if (const char* t = getenv("FAKECUDA_TOTAL_MEM")) f->total_bytes = strtoull(t, nullptr, 10);
    for (int i = 0; i < kMaxDevices; ++i) f->contexts[i].device = i;
    return f;
  }();
  return *fake;
}

thread_local FakeContext* t_current = nullptr;

// ---------------------------------------------------------------------------------------------
// The virtual device.

void LockDevice(DeviceFile* d) {
  if (pthread_mutex_lock(&d->mu) == EOWNERDEAD) pthread_mutex_consistent(&d->mu);
}

DeviceFile* OpenDevice() {
  Fake& f = F();
  if (f.device) return f.device;
  const char* path = getenv("FAKECUDA_DEVICE_FILE");
  if (!path || !*path) return nullptr;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    perror("fakecuda: FAKECUDA_DEVICE_FILE");
    abort();
  }
  flock(fd, LOCK_EX);
  struct stat st;
  fstat(fd, &st);
  if (st.st_size == 0 && ftruncate(fd, sizeof(DeviceFile)) != 0) abort();
  void* map = mmap(nullptr, sizeof(DeviceFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) abort();
  auto* d = static_cast<DeviceFile*>(map);
  if (d->magic != fakecuda::kDeviceMagic) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&d->mu, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    d->magic = fakecuda::kDeviceMagic;
  }
  flock(fd, LOCK_UN);
  close(fd);
  f.device = d;
  return d;
}

bool Dead(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[64], buffer[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* file = fopen(path, "r");
  if (!file) return false;
  size_t n = fread(buffer, 1, sizeof(buffer) - 1, file);
  fclose(file);
  buffer[n] = '\0';
  const char* p = strrchr(buffer, ')');
  return p && (p[2] == 'Z' || p[2] == 'X');
}

// Processes the earliest event once every present client is blocked. REQUIRES: d->mu held.
void Step(DeviceFile* d) {
  for (;;) {
    if (d->joined_total < d->expected_clients) return;
    int best = -1;
    int64_t best_t = 0, best_local = 0;
    for (int i = 0; i < fakecuda::kMaxClients; ++i) {
      Client& c = d->clients[i];
      if (c.state == fakecuda::kAbsent) continue;
      if (c.state == fakecuda::kRunning) return;  // it may still submit something earlier
      const int64_t t =
          c.state == fakecuda::kLaunching ? std::max(c.local_ns, d->device_free_ns) : c.until_ns;
      if (best < 0 || t < best_t || (t == best_t && c.local_ns < best_local)) {
        best = i;
        best_t = t;
        best_local = c.local_ns;
      }
    }
    if (best < 0) return;
    Client& c = d->clients[best];
    d->now_ns = best_t;
    if (c.state == fakecuda::kLaunching) {
      const int64_t end = best_t + c.cost_ns;
      d->device_free_ns = end;
      c.start_ns = best_t;
      c.local_ns = end;
      if (d->log_count < fakecuda::kMaxLog) {
        d->log[d->log_count] = {c.tag, c.api, c.pid, best, best_t, end};
        ++d->log_count;
      }
    } else {
      c.local_ns = std::max(c.local_ns, c.until_ns);
    }
    c.state = fakecuda::kRunning;
    pthread_cond_broadcast(&d->cv);
  }
}

void ReapClients(DeviceFile* d) {
  for (int i = 0; i < fakecuda::kMaxClients; ++i) {
    Client& c = d->clients[i];
    if (c.state != fakecuda::kAbsent && Dead(c.pid)) c.state = fakecuda::kAbsent;
  }
}

// This process's client slot, joining on first use. REQUIRES: d->mu held.
int Join(DeviceFile* d) {
  Fake& f = F();
  if (f.client >= 0) return f.client;
  ReapClients(d);
  for (int i = 0; i < fakecuda::kMaxClients; ++i) {
    Client& c = d->clients[i];
    if (c.state != fakecuda::kAbsent) continue;
    c = {};
    c.pid = getpid();
    c.state = fakecuda::kRunning;
    const char* tag = getenv("FAKECUDA_TAG");
    c.tag = tag ? atoi(tag) : 0;
    c.local_ns = d->now_ns;
    const char* expected = getenv("FAKECUDA_CLIENTS");
    if (expected) d->expected_clients = std::max(d->expected_clients, atoi(expected));
    ++d->joined_total;
    f.client = i;
    return i;
  }
  fprintf(stderr, "fakecuda: too many clients\n");
  abort();
}

// Blocks this client until the device has processed its request.
void Block(DeviceFile* d, Client& c) {
  Step(d);
  while (c.state != fakecuda::kRunning) {
    timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += 50 * 1000 * 1000;
    if (deadline.tv_nsec >= 1000000000) {
      deadline.tv_nsec -= 1000000000;
      ++deadline.tv_sec;
    }
    int r = pthread_cond_timedwait(&d->cv, &d->mu, &deadline);
    if (r == EOWNERDEAD) pthread_mutex_consistent(&d->mu);
    if (r == ETIMEDOUT) {
      ReapClients(d);
      Step(d);
    }
  }
}

// Runs a kernel of `cost_ns`; returns its start time.
int64_t RunOnDevice(int64_t cost_ns, int api) {
  Fake& f = F();
  DeviceFile* d = OpenDevice();
  if (!d) {
    std::lock_guard<std::mutex> lock(f.mu);
    const int64_t start = f.local_ns;
    f.local_ns += cost_ns;
    return start;
  }
  LockDevice(d);
  Client& c = d->clients[Join(d)];
  c.state = fakecuda::kLaunching;
  c.cost_ns = cost_ns;
  c.api = api;
  Block(d, c);
  const int64_t start = c.start_ns;
  pthread_mutex_unlock(&d->mu);
  return start;
}

int64_t LocalNow() {
  Fake& f = F();
  DeviceFile* d = OpenDevice();
  if (!d) return f.local_ns;
  LockDevice(d);
  const int64_t now = d->clients[Join(d)].local_ns;
  pthread_mutex_unlock(&d->mu);
  return now;
}

// ---------------------------------------------------------------------------------------------
// Helpers.

CUresult Launch(CUfunction function, void** params, int api) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  auto* fn = reinterpret_cast<FakeFunction*>(function);
  int64_t cost = fn->cost_ns;
  if (cost < 0)
    cost = params && params[0] ? static_cast<int64_t>(*static_cast<uint64_t*>(params[0])) : 0;
  const int64_t start = RunOnDevice(cost, api);
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  for (FakeEvent* event : f.pending_events) {
    event->t = start;
    event->pending = false;
  }
  f.pending_events.clear();
  return CUDA_SUCCESS;
}

// An event stays pending until it is looked at (then it is complete at its record time) or a
// kernel starts (then it took the kernel's start time): a context's events are written when the
// device serves the context, so waiting for another context's kernel is not counted.
void Settle(FakeEvent* event) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  if (!event->pending) return;
  event->pending = false;
  f.pending_events.erase(std::remove(f.pending_events.begin(), f.pending_events.end(), event),
                         f.pending_events.end());
}

// The base address of the allocation holding `address`, or 0.
uint64_t BaseOf(uint64_t address) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  for (const auto& [base, what] : f.allocations) {
    if (address >= base && address < base + what.second) return base;
  }
  return 0;
}

// The words of the allocation holding [address, address + bytes), created on first use; null if
// the range is not inside one allocation (or the allocation is over 1 GiB).
std::vector<uint32_t>* Contents(uint64_t address, uint64_t bytes) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  for (const auto& [base, what] : f.allocations) {
    if (address < base || address + bytes > base + what.second) continue;
    if (what.second > (1ull << 30)) return nullptr;
    std::vector<uint32_t>& words = f.contents[base];
    if (words.empty()) words.assign(what.second / 4, 0);
    return &words;
  }
  return nullptr;
}

CUresult Alloc(unsigned long long* out, uint64_t bytes) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  const int dev = t_current->device;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (f.used_bytes[dev] + bytes > f.total_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  f.used_bytes[dev] += bytes;
  *out = f.next_address;
  f.next_address += (bytes + 0xfff) & ~0xfffull;
  f.allocations.push_back({*out, {dev, bytes}});
  return CUDA_SUCCESS;
}

CUresult Free(uint64_t address) {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu);
  for (size_t i = 0; i < f.allocations.size(); ++i) {
    if (f.allocations[i].first != address) continue;
    f.used_bytes[f.allocations[i].second.first] -= f.allocations[i].second.second;
    f.allocations.erase(f.allocations.begin() + static_cast<long>(i));
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CheckDevice(CUdevice dev) {
  if (!F().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return dev >= 0 && dev < F().device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The driver API.

FAKE_EXPORT CUresult cuInit(unsigned int) {
  F().initialized = true;
  return F().device_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (!F().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = F().device_count;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (CUresult r = CheckDevice(ordinal)) return r;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  uuid->bytes[0] = static_cast<char>(0xfa);
  uuid->bytes[1] = static_cast<char>(0xce);
  uuid->bytes[15] = static_cast<char>(dev);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid(uuid, dev);
}
FAKE_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  snprintf(name, length, "Fabrica Fake GPU");
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  *bytes = F().total_bytes;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  *bytes = static_cast<unsigned int>(std::min<uint64_t>(F().total_bytes, 0xffffffffu));
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  *ctx = reinterpret_cast<CUcontext>(&F().contexts[dev]);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return CheckDevice(dev); }
FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) {
  if (CUresult r = cuDevicePrimaryCtxRetain(ctx, dev)) return r;
  t_current = reinterpret_cast<FakeContext*>(*ctx);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  t_current = reinterpret_cast<FakeContext*>(ctx);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(t_current);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = t_current->device;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuCtxDestroy_v2(CUcontext) {
  t_current = nullptr;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }

FAKE_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  std::vector<uint32_t>* words = Contents(dst, uint64_t{count} * 4);
  if (!words) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t first = (dst - BaseOf(dst)) / 4;
  std::fill(words->begin() + static_cast<long>(first),
            words->begin() + static_cast<long>(first + count), value);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  std::vector<uint32_t>* words = Contents(src, bytes);
  if (!words || bytes % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t first = (src - BaseOf(src)) / 4;
  std::memcpy(dst, words->data() + first, bytes);
  if (const char* bad = getenv("FAKECUDA_CORRUPT_WORD")) {
    const uint64_t word = strtoull(bad, nullptr, 10);
    if (word >= first && word < first + bytes / 4) static_cast<uint32_t*>(dst)[word - first] ^= 1;
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(F().mu);
  *total = F().total_bytes;
  *free = F().total_bytes - F().used_bytes[t_current->device];
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  size_t f = 0, t = 0;
  if (CUresult r = cuMemGetInfo_v2(&f, &t)) return r;
  *free = static_cast<unsigned int>(std::min<size_t>(f, 0xffffffffu));
  *total = static_cast<unsigned int>(std::min<size_t>(t, 0xffffffffu));
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) { return Alloc(dptr, bytes); }
FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytes) {
  unsigned long long address = 0;
  if (CUresult r = Alloc(&address, bytes)) return r;
  *dptr = static_cast<CUdeviceptr_v1>(address);  // truncated, as a 32-bit pointer would be
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                        size_t height, unsigned int) {
  *pitch = (width + 255) / 256 * 256;
  return Alloc(dptr, *pitch * height);
}
FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int) {
  return Alloc(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return Alloc(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return Alloc(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool,
                                             CUstream) {
  return Alloc(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool,
                                                  CUstream) {
  return Alloc(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                 const CUmemAllocationProp* prop, unsigned long long) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  FakeContext* saved = t_current;
  t_current = &F().contexts[std::clamp(prop->location.id, 0, kMaxDevices - 1)];
  CUresult r = Alloc(handle, size);
  t_current = saved;
  return r;
}
FAKE_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  unsigned long long address = 0;
  CUresult r =
      Alloc(&address, desc->Width * std::max<size_t>(desc->Height, 1) * 4 * desc->NumChannels);
  *array = reinterpret_cast<CUarray>(address);
  return r;
}
FAKE_EXPORT CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  unsigned long long address = 0;
  CUresult r = Alloc(&address, desc->Width * std::max<size_t>(desc->Height, 1) *
                                   std::max<size_t>(desc->Depth, 1) * 4 * desc->NumChannels);
  *array = reinterpret_cast<CUarray>(address);
  return r;
}
FAKE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* array,
                                            const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int) {
  unsigned long long address = 0;
  CUresult r = Alloc(&address, desc->Width * std::max<size_t>(desc->Height, 1) * 8);
  *array = reinterpret_cast<CUmipmappedArray>(address);
  return r;
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return Free(dptr); }
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) { return Free(dptr); }
FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) { return Free(dptr); }
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return Free(handle); }
FAKE_EXPORT CUresult cuArrayDestroy(CUarray array) {
  return Free(reinterpret_cast<uint64_t>(array));
}
FAKE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  return Free(reinterpret_cast<uint64_t>(array));
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void*) {
  static int dummy;
  *module = reinterpret_cast<CUmodule>(&dummy);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  // One function object per name, kept for the process (modules are never really unloaded).
  static std::mutex mu;
  static std::map<std::string, FakeFunction*>* functions = new std::map<std::string, FakeFunction*>;
  std::lock_guard<std::mutex> lock(mu);
  FakeFunction*& known = (*functions)[name];
  if (known) {
    *function = reinterpret_cast<CUfunction>(known);
    return CUDA_SUCCESS;
  }
  auto* fn = known = new FakeFunction{-1};
  if (std::strncmp(name, "fake_kernel_", 12) == 0) fn->cost_ns = atoll(name + 12) * 1000;
  if (std::strcmp(name, "fabrica_burn") == 0) {
    fn->cost_ns = 1000;
    fn->burn = true;
  }
  *function = reinterpret_cast<CUfunction>(fn);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int, unsigned int, unsigned int,
                                    unsigned int, unsigned int, unsigned int, unsigned int,
                                    CUstream, void** params, void**) {
  auto* fn = reinterpret_cast<FakeFunction*>(f);
  if (fn && fn->burn && params) {
    // fabrica_burn(out, iters, n): what the PTX computes, computed here.
    const uint64_t out = *static_cast<uint64_t*>(params[0]);
    const uint32_t iters = *static_cast<uint32_t*>(params[1]);
    const uint32_t n = *static_cast<uint32_t*>(params[2]);
    std::vector<uint32_t>* words = Contents(out, uint64_t{n} * 4);
    if (!words) return CUDA_ERROR_INVALID_VALUE;
    for (uint32_t t = 0; t < n; ++t) {
      uint32_t x = t * 0x9E3779B1u + 1;
      for (uint32_t i = 0; i < iters; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
      }
      (*words)[(out - BaseOf(out)) / 4 + t] = x;
    }
  }
  return Launch(f, params, fakecuda::kKernel);
}
FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int,
                                         unsigned int, unsigned int, unsigned int, unsigned int,
                                         CUstream, void** params, void**) {
  return Launch(f, params, fakecuda::kKernel | fakecuda::kPerThread);
}
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction f, void** params, void**) {
  return Launch(f, params, fakecuda::kKernelEx);
}
FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction f, void** params,
                                           void**) {
  return Launch(f, params, fakecuda::kKernelEx | fakecuda::kPerThread);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int, unsigned int,
                                               unsigned int, unsigned int, unsigned int,
                                               unsigned int, unsigned int, CUstream,
                                               void** params) {
  return Launch(f, params, fakecuda::kCooperative);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int, unsigned int,
                                                    unsigned int, unsigned int, unsigned int,
                                                    unsigned int, unsigned int, CUstream,
                                                    void** params) {
  return Launch(f, params, fakecuda::kCooperative | fakecuda::kPerThread);
}

FAKE_EXPORT CUresult cuGraphCreate(CUgraph* graph, unsigned int) {
  *graph = reinterpret_cast<CUgraph>(new FakeGraph);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode*,
                                             size_t, const CUDA_KERNEL_NODE_PARAMS* params) {
  auto* fn = reinterpret_cast<FakeFunction*>(params->func);
  reinterpret_cast<FakeGraph*>(graph)->cost_ns += std::max<int64_t>(fn->cost_ns, 0);
  *node = reinterpret_cast<CUgraphNode>(graph);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                 unsigned long long) {
  *exec = reinterpret_cast<CUgraphExec>(new FakeGraph(*reinterpret_cast<FakeGraph*>(graph)));
  return CUDA_SUCCESS;
}
static CUresult LaunchGraph(CUgraphExec exec, int api) {
  static FakeFunction fn;
  fn.cost_ns = reinterpret_cast<FakeGraph*>(exec)->cost_ns;
  return Launch(reinterpret_cast<CUfunction>(&fn), nullptr, api);
}
FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream) {
  return LaunchGraph(exec, fakecuda::kGraph);
}
FAKE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream) {
  return LaunchGraph(exec, fakecuda::kGraph | fakecuda::kPerThread);
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }

FAKE_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new FakeEvent);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  Settle(reinterpret_cast<FakeEvent*>(event));
  delete reinterpret_cast<FakeEvent*>(event);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  auto* e = reinterpret_cast<FakeEvent*>(event);
  Settle(e);
  e->t = LocalNow();
  e->pending = true;
  std::lock_guard<std::mutex> lock(F().mu);
  F().pending_events.push_back(e);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventQuery(CUevent event) {
  Settle(reinterpret_cast<FakeEvent*>(event));
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) { return cuEventQuery(event); }
FAKE_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  auto* s = reinterpret_cast<FakeEvent*>(start);
  auto* e = reinterpret_cast<FakeEvent*>(end);
  Settle(s);
  Settle(e);
  *ms = static_cast<float>(e->t - s->t) / 1e6f;
  return CUDA_SUCCESS;
}

// The fake clock the shim uses under FABRICA_VGPU_CLOCK=fake.
FAKE_EXPORT int64_t fakecuda_now_ns() { return LocalNow(); }

FAKE_EXPORT void fakecuda_wait_until_ns(int64_t t) {
  Fake& f = F();
  DeviceFile* d = OpenDevice();
  if (!d) {
    std::lock_guard<std::mutex> lock(f.mu);
    f.local_ns = std::max(f.local_ns, t);
    return;
  }
  LockDevice(d);
  Client& c = d->clients[Join(d)];
  if (t > c.local_ns) {
    c.state = fakecuda::kWaiting;
    c.until_ns = t;
    Block(d, c);
  }
  pthread_mutex_unlock(&d->mu);
}

// Leaves the virtual device, so that the others need not wait for this process.
FAKE_EXPORT void fakecuda_detach() {
  Fake& f = F();
  if (!f.device || f.client < 0) return;
  DeviceFile* d = f.device;
  LockDevice(d);
  d->clients[f.client].state = fakecuda::kAbsent;
  d->clients[f.client].pid = 0;
  f.client = -1;
  Step(d);
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

__attribute__((destructor)) static void DetachAtExit() { fakecuda_detach(); }

// Entry points by name: the newest version for `cuda_version`, the per-thread one when asked.
struct Entry {
  const char* name;
  void* fn;
};
#define FAKE_ENTRY(name) \
  { #name, reinterpret_cast < void*>(&name) }
static const Entry kEntries[] = {
    FAKE_ENTRY(cuInit),
    FAKE_ENTRY(cuDriverGetVersion),
    FAKE_ENTRY(cuDeviceGetCount),
    FAKE_ENTRY(cuDeviceGet),
    FAKE_ENTRY(cuDeviceGetUuid),
    FAKE_ENTRY(cuDeviceGetUuid_v2),
    FAKE_ENTRY(cuDeviceTotalMem),
    FAKE_ENTRY(cuDeviceTotalMem_v2),
    FAKE_ENTRY(cuMemGetInfo),
    FAKE_ENTRY(cuMemGetInfo_v2),
    FAKE_ENTRY(cuMemAlloc),
    FAKE_ENTRY(cuMemAlloc_v2),
    FAKE_ENTRY(cuMemFree_v2),
    FAKE_ENTRY(cuMemAllocManaged),
    FAKE_ENTRY(cuMemAllocAsync),
    FAKE_ENTRY(cuMemAllocAsync_ptsz),
    FAKE_ENTRY(cuLaunchKernel),
    FAKE_ENTRY(cuLaunchKernel_ptsz),
    FAKE_ENTRY(cuLaunchKernelEx),
    FAKE_ENTRY(cuLaunchKernelEx_ptsz),
    FAKE_ENTRY(cuGraphLaunch),
    FAKE_ENTRY(cuGraphLaunch_ptsz),
    FAKE_ENTRY(cuCtxGetCurrent),
    FAKE_ENTRY(cuCtxSetCurrent),
    FAKE_ENTRY(cuDevicePrimaryCtxRetain),
    FAKE_ENTRY(cuEventRecord),
    FAKE_ENTRY(cuEventCreate),
};

static void* FindEntry(const std::string& name) {
  for (const Entry& e : kEntries) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  std::vector<std::string> candidates;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
    candidates.push_back(std::string(symbol) + "_ptsz");
  }
  if (cuda_version >= 3020) candidates.push_back(std::string(symbol) + "_v2");
  candidates.push_back(symbol);
  for (const std::string& name : candidates) {
    if (void* fn = FindEntry(name)) {
      *pfn = fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                      cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, nullptr);
}
