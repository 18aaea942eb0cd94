// libfabrica-vgpu.so: caps a container's device memory and compute share by interposing on the
// CUDA driver API (see README.md for the design and what it does not protect against).
//
// Every hooked entry point first calls Ready(): the configuration is loaded once per process
// (again after fork), and any problem makes every hooked call fail with
// CUDA_ERROR_NOT_INITIALIZED after one message on stderr — the shim fails closed.
//
// Threads: allocation and free paths take one process mutex (which also serialises the region's
// fcntl lock, since those locks belong to the process); the launch path takes only a short
// per-context mutex around event bookkeeping and updates the token bucket with atomics in the
// shared mapping.
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "shim/cuda_types.h"
#include "shim/shim_config.h"
#include "shim/shim_region.h"

#define FABRICA_EXPORT extern "C" __attribute__((visibility("default")))

// The exported hooks, declared from the table so every definition below must match it.
#define FABRICA_CU_HOOK(name, base, since, per_thread, params, args) \
  FABRICA_EXPORT CUresult name params;
#define FABRICA_NVML_HOOK(name, params, args) FABRICA_EXPORT nvmlReturn_t name params;
#include "shim/hooks.def"
FABRICA_EXPORT void* dlsym(void* handle, const char* symbol) noexcept;  // glibc: __THROW

namespace fabrica::shim {
namespace {

// Typed pointers to the real functions.
struct RealFunctions {
#define FABRICA_CU_HOOK(name, base, since, per_thread, params, args) \
  CUresult(*name) params = nullptr;
#define FABRICA_CU_REAL(name, params) CUresult(*name) params = nullptr;
#define FABRICA_NVML_HOOK(name, params, args) nvmlReturn_t(*name) params = nullptr;
#define FABRICA_NVML_REAL(name, params) nvmlReturn_t(*name) params = nullptr;
#include "shim/hooks.def"
};
RealFunctions real;

struct HookEntry {
  const char* name;
  const char* base;
  int since;
  bool per_thread;
  bool cuda;  // false: NVML
  void* hook;
  void** real;
};

const HookEntry kHooks[] = {
#define FABRICA_CU_HOOK(name, base, since, per_thread, params, args) \
  {#name,                                                            \
   #base,                                                            \
   since,                                                            \
   per_thread != 0,                                                  \
   true,                                                             \
   reinterpret_cast<void*>(&::name),                                 \
   reinterpret_cast<void**>(&real.name)},
#define FABRICA_NVML_HOOK(name, params, args) \
  {#name,                                     \
   #name,                                     \
   0,                                         \
   false,                                     \
   false,                                     \
   reinterpret_cast<void*>(&::name),          \
   reinterpret_cast<void**>(&real.name)},
#include "shim/hooks.def"
};

const HookEntry* FindHook(const char* symbol) {
  if (!symbol || (symbol[0] != 'c' && symbol[0] != 'n')) return nullptr;
  for (const HookEntry& entry : kHooks) {
    if (std::strcmp(entry.name, symbol) == 0) return &entry;
  }
  return nullptr;
}

// The real dlsym, found by version since the exported name is ours.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn RealDlsym() {
  static std::atomic<DlsymFn> fn{nullptr};
  DlsymFn f = fn.load(std::memory_order_acquire);
  if (f) return f;
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"}) {
    f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (f) break;
  }
  fn.store(f, std::memory_order_release);
  return f;
}

// ---------------------------------------------------------------------------------------------
// State.

enum InitState { kUninit = 0, kReady = 1, kFailed = 2 };

struct Clock {
  int64_t (*now_ns)() = nullptr;  // fake clock, or null for CLOCK_MONOTONIC
  void (*wait_until_ns)(int64_t) = nullptr;
};

struct Shim {
  std::mutex init_mu;
  std::atomic<int> state{kUninit};
  std::atomic<int> nvml_state{kUninit};
  std::string failure;  // why state is kFailed
  bool failure_printed = false;
  bool config_loaded = false;  // config parsed and a region slot claimed
  ShimConfig config;
  std::unique_ptr<Region> region;
  int slot = -1;
  void* libcuda = nullptr;
  void* libnvml = nullptr;
  Clock clock;
  std::atomic<uint32_t> generation{1};  // bumped after fork, invalidates per-thread caches

  // Allocation bookkeeping, under mu (which also serialises region->Lock()).
  std::mutex mu;
  std::map<std::pair<int, uint64_t>, std::pair<int, int64_t>>
      allocations;  // (kind, key) -> (dev, bytes)
  int64_t last_reap_ns = 0;

  // CUdevice ordinal -> config index; -2 unknown, -1 not in the config.
  std::atomic<int> device_index[64];
  std::atomic<bool> device_warned[64];
};

Shim& S() {
  static Shim* shim = [] {
    Shim* s = new Shim;  // never destroyed: hooks may run during exit
    for (auto& d : s->device_index) d.store(-2);
    for (auto& w : s->device_warned) w.store(false);
    return s;
  }();
  return *shim;
}

void Message(const std::string& text) {
  std::string line = "fabrica-vgpu: " + text + "\n";
  ssize_t ignored = write(2, line.data(), line.size());
  (void)ignored;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t Now() {
  const Clock& c = S().clock;
  return c.now_ns ? c.now_ns() : MonotonicNs();
}

void WaitUntil(int64_t t) {
  const Clock& c = S().clock;
  if (c.wait_until_ns) return c.wait_until_ns(t);
  timespec ts{static_cast<time_t>(t / 1000000000LL), static_cast<long>(t % 1000000000LL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

bool Fail(Shim& s, const std::string& why) {
  s.failure = why;
  s.state.store(kFailed, std::memory_order_release);
  return false;
}

// Loads the real driver and resolves the real functions; false when it cannot be loaded.
// REQUIRES: s.init_mu held.
bool OpenDriver(Shim& s) {
  if (s.libcuda) return true;
  DlsymFn sym = RealDlsym();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib || !sym) return false;
#define FABRICA_CU_HOOK(name, base, since, per_thread, params, args) \
  real.name = reinterpret_cast<decltype(real.name)>(sym(lib, #name));
#define FABRICA_CU_REAL(name, params) \
  real.name = reinterpret_cast<decltype(real.name)>(sym(lib, #name));
#include "shim/hooks.def"
  s.libcuda = lib;
  return true;
}

bool LoadDriver(Shim& s) {
  if (!OpenDriver(s)) return Fail(s, std::string("cannot load libcuda.so.1: ") + dlerror());
  DlsymFn sym = RealDlsym();
  const char* clock = getenv("FABRICA_VGPU_CLOCK");
  if (clock && *clock && std::strcmp(clock, "real") != 0) {
    if (std::strcmp(clock, "fake") != 0) {
      return Fail(s, std::string("FABRICA_VGPU_CLOCK='") + clock + "': expected 'real' or 'fake'");
    }
    s.clock.now_ns = reinterpret_cast<int64_t (*)()>(sym(s.libcuda, "fakecuda_now_ns"));
    s.clock.wait_until_ns =
        reinterpret_cast<void (*)(int64_t)>(sym(s.libcuda, "fakecuda_wait_until_ns"));
    if (!s.clock.now_ns || !s.clock.wait_until_ns) {
      return Fail(s, "FABRICA_VGPU_CLOCK=fake, but libcuda.so.1 is not the test fake");
    }
  }
  return true;
}

// Loads the configuration and joins the region. REQUIRES: s.init_mu held.
bool LoadConfig(Shim& s) {
  const char* path = getenv("FABRICA_VGPU_CONFIG");
  if (!path || !*path) {
    return Fail(s, "FABRICA_VGPU_CONFIG is not set (the node agent sets it for shared GPUs)");
  }
  std::string error;
  ShimConfig config;
  if (!LoadShimConfig(path, &config, &error)) return Fail(s, "bad config: " + error);
  auto region = std::make_unique<Region>();
  if (!region->Open(config, &error)) return Fail(s, error);
  char state = 0;
  uint64_t start_time = 0;
  if (!ReadProcessStat(getpid(), &state, &start_time))
    return Fail(s, "cannot read /proc/self/stat");
  region->Lock();
  s.slot = region->Claim(getpid(), start_time);
  region->Unlock();
  if (s.slot < 0) return Fail(s, "region " + config.region_path + ": no free process slot");
  s.config = std::move(config);
  s.region = std::move(region);
  s.config_loaded = true;
  return true;
}

// REQUIRES: s.init_mu held.
bool InitLocked(Shim& s) {
  if ((!s.config_loaded && !LoadConfig(s)) || !LoadDriver(s)) return false;
  s.state.store(kReady, std::memory_order_release);
  return true;
}

CUresult ReadySlow() {
  Shim& s = S();
  std::lock_guard<std::mutex> lock(s.init_mu);
  if (s.state.load() == kUninit) InitLocked(s);
  if (s.state.load() == kReady) return CUDA_SUCCESS;
  if (!s.failure_printed) {
    s.failure_printed = true;
    Message("refusing GPU access (fail closed): " + s.failure);
  }
  return CUDA_ERROR_NOT_INITIALIZED;
}

inline CUresult Ready() {
  if (S().state.load(std::memory_order_acquire) == kReady) return CUDA_SUCCESS;
  return ReadySlow();
}

void ResetPoolsAfterFork();

void AfterForkInChild() {
  // The child is a new process: it needs its own slot. Mappings and the parent's bookkeeping are
  // copies; drop them and initialise again on the next hooked call.
  Shim& s = S();
  new (&s.init_mu) std::mutex;
  new (&s.mu) std::mutex;
  (void)s.region.release();  // the parent's mapping stays valid; the child maps its own
  s.config_loaded = false;
  s.allocations.clear();
  s.slot = -1;
  s.nvml_state.store(kUninit);
  s.generation.fetch_add(1);
  if (s.state.load() == kReady) s.state.store(kUninit);
  ResetPoolsAfterFork();
}

__attribute__((constructor)) void RegisterFork() {
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
}

// ---------------------------------------------------------------------------------------------
// Devices.

void FormatUuid(const CUuuid& uuid, char* out) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
}

// The hex part of a configured UUID ("GPU-..." / "MIG-..." / bare), lower-cased.
std::string UuidHex(const std::string& uuid) {
  std::string hex = uuid;
  if (hex.size() > 4 && (hex.compare(0, 4, "GPU-") == 0 || hex.compare(0, 4, "MIG-") == 0)) {
    hex = hex.substr(4);
  }
  for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return hex;
}

bool IsOrdinal(const std::string& text, int ordinal) {
  if (text.empty() || text.size() > 4) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return std::atoi(text.c_str()) == ordinal;
}

int MatchConfig(const std::string& hex, int ordinal) {
  const ShimConfig& config = S().config;
  for (size_t i = 0; i < config.devices.size(); ++i) {
    if (!hex.empty() && UuidHex(config.devices[i].uuid) == hex) return static_cast<int>(i);
  }
  for (size_t i = 0; i < config.devices.size(); ++i) {
    if (ordinal >= 0 && IsOrdinal(config.devices[i].uuid, ordinal)) return static_cast<int>(i);
  }
  return -1;
}

// The config index of CUDA device `dev`, or -1 (with a message once) when it is not configured.
int ConfigIndex(CUdevice dev) {
  Shim& s = S();
  if (dev < 0 || dev >= 64) return -1;
  int index = s.device_index[dev].load(std::memory_order_acquire);
  if (index != -2) return index;
  CUuuid uuid = {};
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (real.cuDeviceGetUuid_v2) r = real.cuDeviceGetUuid_v2(&uuid, dev);
  if (r != CUDA_SUCCESS && real.cuDeviceGetUuid) r = real.cuDeviceGetUuid(&uuid, dev);
  char hex[40] = "";
  if (r == CUDA_SUCCESS) FormatUuid(uuid, hex);
  index = MatchConfig(hex, dev);
  if (r != CUDA_SUCCESS && index < 0) return -1;  // not cached: may work after cuInit
  s.device_index[dev].store(index, std::memory_order_release);
  if (index < 0 && !s.device_warned[dev].exchange(true)) {
    Message("device " + std::to_string(dev) + " (GPU-" + hex +
            ") is not in this container's config; refusing it");
  }
  return index;
}

// The config index of the current context's device, or an error to return.
CUresult CurrentIndex(int* index) {
  CUdevice dev = -1;
  if (!real.cuCtxGetDevice) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real.cuCtxGetDevice(&dev);
  if (r != CUDA_SUCCESS) return r;
  *index = ConfigIndex(dev);
  return *index < 0 ? CUDA_ERROR_NOT_PERMITTED : CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Memory.

enum AllocKind { kPointer = 0, kHandle = 1, kArray = 2, kMipmapped = 3 };

int64_t& SlotUsed(int index) { return S().region->layout()->slots[S().slot].used_bytes[index]; }

// Reserves `bytes` on config device `index` for this process, or fails when the container would
// pass its cap. Dead processes' slots are freed first when the cap would be passed (and at most
// once a second otherwise).
bool Reserve(int index, int64_t bytes) {
  Shim& s = S();
  const int64_t cap = s.config.devices[index].memory_limit_bytes;
  if (bytes < 0 || bytes > cap) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  Region& region = *s.region;
  region.Lock();
  const int64_t now = MonotonicNs();
  if (now - s.last_reap_ns > 1000000000LL) {
    region.ReapDead();
    s.last_reap_ns = now;
  }
  int64_t used = region.UsedBytes(index);
  if (used + bytes > cap && region.ReapDead() > 0) used = region.UsedBytes(index);
  const bool ok = used + bytes <= cap;
  if (ok) Add(SlotUsed(index), bytes);
  region.Unlock();
  return ok;
}

void Unreserve(int index, int64_t bytes) { Add(SlotUsed(index), -bytes); }

void Track(AllocKind kind, uint64_t key, int index, int64_t bytes) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto [it, inserted] =
      S().allocations.emplace(std::make_pair(kind, key), std::make_pair(index, bytes));
  if (!inserted) {
    // The driver reused a key we never saw freed: release the old record.
    Unreserve(it->second.first, it->second.second);
    it->second = {index, bytes};
  }
}

void Untrack(AllocKind kind, uint64_t key) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto it = S().allocations.find({kind, key});
  if (it == S().allocations.end()) return;
  Unreserve(it->second.first, it->second.second);
  S().allocations.erase(it);
}

// Reserve, allocate, record. `alloc` calls the driver; `key` reads the new allocation's key.
template <class Alloc, class Key>
CUresult CappedAlloc(AllocKind kind, int index, int64_t bytes, Alloc alloc, Key key) {
  if (!Reserve(index, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = alloc();
  if (r != CUDA_SUCCESS) {
    Unreserve(index, bytes);
    return r;
  }
  Track(kind, key(), index, bytes);
  return r;
}

template <class Alloc, class Key>
CUresult CappedAllocCurrent(AllocKind kind, int64_t bytes, Alloc alloc, Key key) {
  if (CUresult r = Ready()) return r;
  int index = -1;
  if (CUresult r = CurrentIndex(&index)) return r;
  return CappedAlloc(kind, index, bytes, alloc, key);
}

template <class Free>
CUresult TrackedFree(AllocKind kind, uint64_t key, Free free) {
  if (CUresult r = Ready()) return r;
  CUresult r = free();
  if (r == CUDA_SUCCESS) Untrack(kind, key);
  return r;
}

int64_t FormatBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    default:
      return 4;  // 32-bit formats; newer packed/compressed formats are estimated as 4 bytes
  }
}

int64_t ArrayBytes(uint64_t width, uint64_t height, uint64_t depth, CUarray_format format,
                   unsigned channels) {
  const uint64_t elements = width * std::max<uint64_t>(height, 1) * std::max<uint64_t>(depth, 1);
  return static_cast<int64_t>(elements * std::max(channels, 1u) * FormatBytes(format));
}

// Pitched rows are padded; reserve the widest plausible pitch, then settle on the real one.
constexpr uint64_t kMaxPitchAlign = 512;

uint64_t PitchBound(uint64_t width) {
  return (width + kMaxPitchAlign - 1) / kMaxPitchAlign * kMaxPitchAlign;
}

template <class Pitch, class Alloc, class Key>
CUresult PitchedAlloc(uint64_t width, uint64_t height, Pitch pitch, Alloc alloc, Key key) {
  if (CUresult r = Ready()) return r;
  int index = -1;
  if (CUresult r = CurrentIndex(&index)) return r;
  const int64_t bound = static_cast<int64_t>(PitchBound(width) * height);
  if (!Reserve(index, bound)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = alloc();
  if (r != CUDA_SUCCESS) {
    Unreserve(index, bound);
    return r;
  }
  const int64_t actual = static_cast<int64_t>(pitch() * height);
  Unreserve(index, bound - actual);
  Track(kPointer, key(), index, actual);
  return r;
}

// Fills in what the process may see of device `index` given the driver's numbers.
void CapMemory(int index, uint64_t real_free, uint64_t real_total, uint64_t* free, uint64_t* total,
               uint64_t* used) {
  const int64_t cap = S().config.devices[index].memory_limit_bytes;
  const int64_t in_use = S().region->UsedBytes(index);
  *total = std::min<uint64_t>(cap, real_total);
  *used = static_cast<uint64_t>(std::max<int64_t>(in_use, 0));
  *free = std::min<uint64_t>(real_free, static_cast<uint64_t>(std::max<int64_t>(cap - in_use, 0)));
}

// `real_fn` points at the real function's pointer, which is only set once Ready() has run.
template <class T>
CUresult MemGetInfo(T* free, T* total, CUresult (*const* real_fn)(T*, T*)) {
  if (CUresult r = Ready()) return r;
  int index = -1;
  if (CUresult r = CurrentIndex(&index)) return r;
  auto call = *real_fn;
  if (!call) return CUDA_ERROR_NOT_FOUND;
  T real_free = 0, real_total = 0;
  CUresult r = call(&real_free, &real_total);
  if (r != CUDA_SUCCESS) return r;
  uint64_t f, t, u;
  CapMemory(index, real_free, real_total, &f, &t, &u);
  if (free) *free = static_cast<T>(f);
  if (total) *total = static_cast<T>(t);
  return r;
}

template <class T>
CUresult DeviceTotalMem(T* bytes, CUdevice dev, CUresult (*const* real_fn)(T*, CUdevice)) {
  if (CUresult r = Ready()) return r;
  auto call = *real_fn;
  if (!call) return CUDA_ERROR_NOT_FOUND;
  CUresult r = call(bytes, dev);
  if (r != CUDA_SUCCESS) return r;
  const int index = ConfigIndex(dev);
  if (index < 0) return CUDA_ERROR_NOT_PERMITTED;
  *bytes = static_cast<T>(std::min<uint64_t>(*bytes, S().config.devices[index].memory_limit_bytes));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Compute: a token bucket per device in the region, charged with the busy time of each launch as
// measured by a pair of events around it.

constexpr int kPairs = 16;              // launches measured in flight per context
constexpr int64_t kBurstNs = 10000000;  // busy time a container may save up
constexpr int64_t kMaxRefillNs = 1000000000000LL;
constexpr int kMaxPools = 32;

enum SlotState { kFree = 0, kReserved = 1, kInFlight = 2, kVoid = 3 };

struct EventPool {
  std::mutex mu;
  CUcontext ctx = nullptr;
  uint32_t generation = 0;
  int index = -1;
  bool events_ok = false;
  CUevent start[kPairs] = {};
  CUevent end[kPairs] = {};
  int state[kPairs] = {};
  uint64_t head = 0, tail = 0;
};

EventPool g_pools[kMaxPools];
std::mutex g_pools_mu;
thread_local CUcontext t_ctx = nullptr;
thread_local EventPool* t_pool = nullptr;
thread_local uint32_t t_generation = 0;

RegionDevice& Bucket(int index) { return S().region->layout()->devices[index]; }

void Refill(int index, int permille, int64_t now) {
  RegionDevice& d = Bucket(index);
  const int64_t last = Load(d.last_refill_ns);
  if (last == 0) {
    Cas(d.last_refill_ns, 0, now);
    return;
  }
  if (now <= last || !Cas(d.last_refill_ns, last, now)) return;
  const int64_t tokens = Add(d.tokens_scaled, std::min(now - last, kMaxRefillNs) * permille);
  const int64_t burst = kBurstNs * permille;
  if (tokens > burst) Add(d.tokens_scaled, -(tokens - burst));
}

// Waits until the container's bucket holds tokens again. The first process to wake refills it;
// others see the time already credited and wait on, so sharing processes split the share.
void WaitForTokens(int index, int permille) {
  for (;;) {
    const int64_t now = Now();
    Refill(index, permille, now);
    const int64_t tokens = Load(Bucket(index).tokens_scaled);
    if (tokens >= 0) return;
    WaitUntil(now + (-tokens + permille - 1) / permille);
  }
}

void Charge(int index, int64_t busy_ns) {
  RegionDevice& d = Bucket(index);
  Add(d.tokens_scaled, -busy_ns * 1000);
  Add(d.busy_ns, busy_ns);
}

float ElapsedMs(CUevent start, CUevent end) {
  float ms = 0;
  if (real.cuEventElapsedTime_v2 && real.cuEventElapsedTime_v2(&ms, start, end) == CUDA_SUCCESS) {
    return ms;
  }
  if (real.cuEventElapsedTime && real.cuEventElapsedTime(&ms, start, end) == CUDA_SUCCESS)
    return ms;
  return 0;
}

// Charges completed launches, oldest first. REQUIRES: pool.mu held.
void Harvest(EventPool& pool) {
  while (pool.head < pool.tail) {
    const int i = static_cast<int>(pool.head % kPairs);
    if (pool.state[i] == kReserved) return;
    if (pool.state[i] == kInFlight) {
      const CUresult q = real.cuEventQuery(pool.end[i]);
      if (q == CUDA_ERROR_NOT_READY) return;
      if (q == CUDA_SUCCESS) {
        Charge(pool.index, static_cast<int64_t>(ElapsedMs(pool.start[i], pool.end[i]) * 1e6));
      }
    }
    pool.state[i] = kFree;
    ++pool.head;
  }
}

bool CreateEvents(EventPool& pool) {
  for (int i = 0; i < kPairs; ++i) {
    if (real.cuEventCreate(&pool.start[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        real.cuEventCreate(&pool.end[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      return false;
    }
    pool.state[i] = kFree;
  }
  pool.head = pool.tail = 0;
  return true;
}

// The pool of the current context (made on first use), or an error.
CUresult PoolFor(EventPool** out) {
  CUcontext ctx = nullptr;
  if (real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return CUDA_ERROR_INVALID_CONTEXT;
  const uint32_t generation = S().generation.load(std::memory_order_relaxed);
  if (ctx == t_ctx && t_generation == generation && t_pool) {
    *out = t_pool;
    return CUDA_SUCCESS;
  }
  int index = -1;
  if (CUresult r = CurrentIndex(&index)) return r;
  std::lock_guard<std::mutex> lock(g_pools_mu);
  EventPool* pool = nullptr;
  for (EventPool& p : g_pools) {
    if (p.ctx == ctx && p.generation == generation) pool = &p;
  }
  for (int i = 0; !pool && i < kMaxPools; ++i) {
    if (g_pools[i].ctx == nullptr || g_pools[i].generation != generation) pool = &g_pools[i];
  }
  if (!pool) pool = &g_pools[reinterpret_cast<uintptr_t>(ctx) % kMaxPools];  // evict one
  if (pool->ctx != ctx || pool->generation != generation) {
    std::lock_guard<std::mutex> pool_lock(pool->mu);
    pool->ctx = ctx;
    pool->generation = generation;
    pool->index = index;
    pool->events_ok = CreateEvents(*pool);
  }
  t_ctx = ctx;
  t_pool = pool;
  t_generation = generation;
  *out = pool;
  return CUDA_SUCCESS;
}

void ResetPoolsAfterFork() {
  new (&g_pools_mu) std::mutex;
  for (EventPool& pool : g_pools) new (&pool.mu) std::mutex;
}

// Throttles, launches through `call` on `stream`, and measures it.
template <class Call>
CUresult Launch(CUstream stream, bool per_thread, Call call) {
  if (CUresult r = Ready()) return r;
  EventPool* pool = nullptr;
  if (CUresult r = PoolFor(&pool)) return r == CUDA_ERROR_INVALID_CONTEXT ? call() : r;
  if (per_thread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (real.cuStreamIsCapturing && real.cuStreamIsCapturing(stream, &capture) == CUDA_SUCCESS &&
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    return call();  // recorded into a graph, not run: the graph's launch is throttled
  }
  const int index = pool->index;
  const int permille = S().config.devices[index].compute_permille;
  if (permille < 1000) WaitForTokens(index, permille);

  int slot = -1;
  {
    std::lock_guard<std::mutex> lock(pool->mu);
    Harvest(*pool);
    if (pool->tail - pool->head == kPairs && permille < 1000) {
      const int oldest = static_cast<int>(pool->head % kPairs);
      if (pool->state[oldest] == kInFlight) real.cuEventSynchronize(pool->end[oldest]);
      Harvest(*pool);
    }
    if (pool->events_ok && pool->tail - pool->head < kPairs) {
      slot = static_cast<int>(pool->tail % kPairs);
      if (real.cuEventRecord(pool->start[slot], stream) == CUDA_SUCCESS) {
        pool->state[slot] = kReserved;
        ++pool->tail;
      } else {
        slot = -1;
      }
    }
  }
  const CUresult r = call();
  if (slot >= 0) {
    std::lock_guard<std::mutex> lock(pool->mu);
    const bool recorded =
        r == CUDA_SUCCESS && real.cuEventRecord(pool->end[slot], stream) == CUDA_SUCCESS;
    pool->state[slot] = recorded ? kInFlight : kVoid;
    Harvest(*pool);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Lookups.

CUresult GetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status, bool v2) {
  {
    // Lookups may come before cuInit, and before (or without) a valid config: hooked names then
    // still resolve to hooks, which fail closed.
    std::lock_guard<std::mutex> lock(S().init_mu);
    OpenDriver(S());
  }
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;
  if (v2 && real.cuGetProcAddress_v2) {
    r = real.cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, status);
  } else if (real.cuGetProcAddress) {
    r = real.cuGetProcAddress(symbol, pfn, cuda_version, flags);
    if (v2 && status)
      *status =
          r == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  if (!symbol || !pfn) return r;
  if (r == CUDA_SUCCESS && *pfn) {
    for (const HookEntry& entry : kHooks) {
      if (entry.cuda && *entry.real == *pfn) {
        *pfn = entry.hook;
        return r;
      }
    }
  }
  // By name and version, for pointers the driver hands out that it does not export by name.
  const bool want_per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const HookEntry* best = nullptr;
  bool family = false;
  for (const HookEntry& entry : kHooks) {
    if (!entry.cuda || std::strcmp(entry.base, symbol) != 0) continue;
    family = true;
    if (entry.since > cuda_version) continue;
    const bool better =
        !best || (entry.per_thread == want_per_thread && best->per_thread != want_per_thread) ||
        (entry.per_thread == best->per_thread && entry.since > best->since);
    if (better) best = &entry;
  }
  if (!family) return r;
  // Failing closed, hooked names resolve to the hooks, which refuse; otherwise only what the
  // driver has.
  const bool failed = S().state.load() == kFailed || !S().libcuda;
  if (!failed && (r != CUDA_SUCCESS || !*pfn)) return r;
  if (failed && best) {
    *pfn = best->hook;
    if (v2 && status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (!best) {
    *pfn = nullptr;  // a version of a hooked function we do not cover: refuse, never bypass
    if (v2 && status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = best->hook;
  return r;
}

// ---------------------------------------------------------------------------------------------
// NVML.

nvmlReturn_t NvmlReady() {
  Shim& s = S();
  if (s.nvml_state.load(std::memory_order_acquire) == kReady) return NVML_SUCCESS;
  std::lock_guard<std::mutex> lock(s.init_mu);
  // The CUDA driver is loaded by the CUDA hooks; NVML needs only the config and the region.
  if (s.state.load() == kUninit && !s.config_loaded) LoadConfig(s);
  if (s.state.load() == kFailed) {
    if (!s.failure_printed) {
      s.failure_printed = true;
      Message("refusing GPU access (fail closed): " + s.failure);
    }
    return NVML_ERROR_NO_PERMISSION;
  }
  if (!s.libnvml) s.libnvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!s.libnvml) return NVML_ERROR_UNINITIALIZED;
  DlsymFn sym = RealDlsym();
#define FABRICA_NVML_HOOK(name, params, args) \
  real.name = reinterpret_cast<decltype(real.name)>(sym(s.libnvml, #name));
#define FABRICA_NVML_REAL(name, params) \
  real.name = reinterpret_cast<decltype(real.name)>(sym(s.libnvml, #name));
#include "shim/hooks.def"
  s.nvml_state.store(kReady, std::memory_order_release);
  return NVML_SUCCESS;
}

// The config index of an NVML device (by UUID), or -1.
int NvmlIndex(nvmlDevice_t device) {
  char uuid[96] = "";
  if (!real.nvmlDeviceGetUUID ||
      real.nvmlDeviceGetUUID(device, uuid, sizeof(uuid)) != NVML_SUCCESS) {
    return -1;
  }
  return MatchConfig(UuidHex(uuid), -1);
}

}  // namespace
}  // namespace fabrica::shim

using namespace fabrica::shim;  // NOLINT: the hooks below are the C interface

// ---------------------------------------------------------------------------------------------
// The hooks.

FABRICA_EXPORT void* dlsym(void* handle, const char* symbol) noexcept {
  if (const HookEntry* entry = FindHook(symbol)) return entry->hook;
  DlsymFn real_dlsym = RealDlsym();
  return real_dlsym ? real_dlsym(handle, symbol) : nullptr;
}

CUresult cuInit(unsigned int flags) {
  if (CUresult r = Ready()) return r;
  return real.cuInit ? real.cuInit(flags) : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  return GetProcAddress(symbol, pfn, cuda_version, flags, nullptr, false);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  return GetProcAddress(symbol, pfn, cuda_version, flags, status, true);
}

#define FABRICA_REAL_OR_MISSING(name, ...) \
  (real.name ? real.name(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  return CappedAllocCurrent(
      kPointer, bytesize, [&] { return FABRICA_REAL_OR_MISSING(cuMemAlloc, dptr, bytesize); },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return CappedAllocCurrent(
      kPointer, bytesize, [&] { return FABRICA_REAL_OR_MISSING(cuMemAlloc_v2, dptr, bytesize); },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int element_size) {
  return PitchedAlloc(
      width, height, [&] { return uint64_t{*pitch}; },
      [&] {
        return FABRICA_REAL_OR_MISSING(cuMemAllocPitch, dptr, pitch, width, height, element_size);
      },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_size) {
  return PitchedAlloc(
      width, height, [&] { return uint64_t{*pitch}; },
      [&] {
        return FABRICA_REAL_OR_MISSING(cuMemAllocPitch_v2, dptr, pitch, width, height,
                                       element_size);
      },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  return CappedAllocCurrent(
      kPointer, bytesize,
      [&] { return FABRICA_REAL_OR_MISSING(cuMemAllocManaged, dptr, bytesize, flags); },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return CappedAllocCurrent(
      kPointer, bytesize,
      [&] { return FABRICA_REAL_OR_MISSING(cuMemAllocAsync, dptr, bytesize, stream); },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return CappedAllocCurrent(
      kPointer, bytesize,
      [&] { return FABRICA_REAL_OR_MISSING(cuMemAllocAsync_ptsz, dptr, bytesize, stream); },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream stream) {
  return CappedAllocCurrent(
      kPointer, bytesize,
      [&] {
        return FABRICA_REAL_OR_MISSING(cuMemAllocFromPoolAsync, dptr, bytesize, pool, stream);
      },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream) {
  return CappedAllocCurrent(
      kPointer, bytesize,
      [&] {
        return FABRICA_REAL_OR_MISSING(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, stream);
      },
      [&] { return uint64_t{*dptr}; });
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  if (CUresult r = Ready()) return r;
  auto call = [&] { return FABRICA_REAL_OR_MISSING(cuMemCreate, handle, size, prop, flags); };
  if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return call();  // host memory
  const int index = ConfigIndex(prop->location.id);
  if (index < 0) return CUDA_ERROR_NOT_PERMITTED;
  return CappedAlloc(kHandle, index, size, call, [&] { return uint64_t{*handle}; });
}

CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  const int64_t bytes =
      desc ? ArrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels) : 0;
  return CappedAllocCurrent(
      kArray, bytes, [&] { return FABRICA_REAL_OR_MISSING(cuArrayCreate, array, desc); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  const int64_t bytes =
      desc ? ArrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels) : 0;
  return CappedAllocCurrent(
      kArray, bytes, [&] { return FABRICA_REAL_OR_MISSING(cuArrayCreate_v2, array, desc); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuArray3DCreate(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  const int64_t bytes =
      desc ? ArrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels)
           : 0;
  return CappedAllocCurrent(
      kArray, bytes, [&] { return FABRICA_REAL_OR_MISSING(cuArray3DCreate, array, desc); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  const int64_t bytes =
      desc ? ArrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels)
           : 0;
  return CappedAllocCurrent(
      kArray, bytes, [&] { return FABRICA_REAL_OR_MISSING(cuArray3DCreate_v2, array, desc); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) {
  int64_t bytes = 0;
  if (desc) {
    uint64_t w = desc->Width, h = desc->Height, d = desc->Depth;
    for (unsigned level = 0; level < std::max(levels, 1u); ++level) {
      bytes += ArrayBytes(w, h, d, desc->Format, desc->NumChannels);
      w = std::max<uint64_t>(w / 2, 1);
      h = h ? std::max<uint64_t>(h / 2, 1) : 0;
      d = d ? std::max<uint64_t>(d / 2, 1) : 0;
    }
  }
  return CappedAllocCurrent(
      kMipmapped, bytes,
      [&] { return FABRICA_REAL_OR_MISSING(cuMipmappedArrayCreate, array, desc, levels); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  return TrackedFree(kPointer, dptr, [&] { return FABRICA_REAL_OR_MISSING(cuMemFree, dptr); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return TrackedFree(kPointer, dptr, [&] { return FABRICA_REAL_OR_MISSING(cuMemFree_v2, dptr); });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return TrackedFree(kPointer, dptr,
                     [&] { return FABRICA_REAL_OR_MISSING(cuMemFreeAsync, dptr, stream); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return TrackedFree(kPointer, dptr,
                     [&] { return FABRICA_REAL_OR_MISSING(cuMemFreeAsync_ptsz, dptr, stream); });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return TrackedFree(kHandle, handle,
                     [&] { return FABRICA_REAL_OR_MISSING(cuMemRelease, handle); });
}

CUresult cuArrayDestroy(CUarray array) {
  return TrackedFree(kArray, reinterpret_cast<uint64_t>(array),
                     [&] { return FABRICA_REAL_OR_MISSING(cuArrayDestroy, array); });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  return TrackedFree(kMipmapped, reinterpret_cast<uint64_t>(array),
                     [&] { return FABRICA_REAL_OR_MISSING(cuMipmappedArrayDestroy, array); });
}

CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  return MemGetInfo(free, total, &real.cuMemGetInfo);
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  return MemGetInfo(free, total, &real.cuMemGetInfo_v2);
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  return DeviceTotalMem(bytes, dev, &real.cuDeviceTotalMem);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  return DeviceTotalMem(bytes, dev, &real.cuDeviceTotalMem_v2);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz,
                        unsigned int shared_bytes, CUstream stream, void** params, void** extra) {
  return Launch(stream, false, [&] {
    return FABRICA_REAL_OR_MISSING(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shared_bytes, stream,
                                   params, extra);
  });
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int shared_bytes, CUstream stream, void** params,
                             void** extra) {
  return Launch(stream, true, [&] {
    return FABRICA_REAL_OR_MISSING(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shared_bytes,
                                   stream, params, extra);
  });
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return Launch(config ? config->hStream : nullptr, false, [&] {
    return FABRICA_REAL_OR_MISSING(cuLaunchKernelEx, config, f, params, extra);
  });
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return Launch(config ? config->hStream : nullptr, true, [&] {
    return FABRICA_REAL_OR_MISSING(cuLaunchKernelEx_ptsz, config, f, params, extra);
  });
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared_bytes, CUstream stream, void** params) {
  return Launch(stream, false, [&] {
    return FABRICA_REAL_OR_MISSING(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz,
                                   shared_bytes, stream, params);
  });
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared_bytes, CUstream stream,
                                        void** params) {
  return Launch(stream, true, [&] {
    return FABRICA_REAL_OR_MISSING(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz,
                                   shared_bytes, stream, params);
  });
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  return Launch(stream, false,
                [&] { return FABRICA_REAL_OR_MISSING(cuGraphLaunch, exec, stream); });
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return Launch(stream, true,
                [&] { return FABRICA_REAL_OR_MISSING(cuGraphLaunch_ptsz, exec, stream); });
}

CUresult cuLaunch(CUfunction f) {
  return Launch(nullptr, false, [&] { return FABRICA_REAL_OR_MISSING(cuLaunch, f); });
}

CUresult cuLaunchGrid(CUfunction f, int gw, int gh) {
  return Launch(nullptr, false, [&] { return FABRICA_REAL_OR_MISSING(cuLaunchGrid, f, gw, gh); });
}

CUresult cuLaunchGridAsync(CUfunction f, int gw, int gh, CUstream stream) {
  return Launch(stream, false,
                [&] { return FABRICA_REAL_OR_MISSING(cuLaunchGridAsync, f, gw, gh, stream); });
}

template <class Memory>
static nvmlReturn_t NvmlMemory(nvmlDevice_t device, Memory* memory,
                               nvmlReturn_t (*const* real_fn)(nvmlDevice_t, Memory*)) {
  if (nvmlReturn_t r = NvmlReady()) return r;
  auto call = *real_fn;
  if (!call) return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t r = call(device, memory);
  if (r != NVML_SUCCESS || !memory) return r;
  const int index = NvmlIndex(device);
  if (index < 0) return r;  // another GPU of the node: its numbers give nothing away
  uint64_t free, total, used;
  CapMemory(index, memory->free, memory->total, &free, &total, &used);
  memory->total = total;
  memory->free = free;
  memory->used = used;
  return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return NvmlMemory(device, memory, &real.nvmlDeviceGetMemoryInfo);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return NvmlMemory(device, memory, &real.nvmlDeviceGetMemoryInfo_v2);
}
