// The programs of tests/gpu/check.sh: a CUDA driver-API client with no CUDA headers and no nvcc.
// It loads libcuda.so.1 (and libnvidia-ml.so.1) with dlopen and finds every function with
// dlsym, so under the shim it goes through the shim's dlsym hook; its kernel is a hand-written
// PTX busy loop. It runs the same way against the fake driver (CPU flow) and a real GPU.
//
//   vgpu_gpu_check probe                 exit 0 when a driver loads and cuInit succeeds
//   vgpu_gpu_check nvml                  the NVML inventory: name, UUID, memory per GPU
//   vgpu_gpu_check mem CAP_BYTES         cuMemGetInfo reports CAP; allocating past it fails
//   vgpu_gpu_check bench N               median cuMemAlloc / cuMemFree / cuLaunchKernel times
//   vgpu_gpu_check procutil MS           NVML's per-process SM utilisation samples over the next
//                                        MS ms: their mean per pid
//   vgpu_gpu_check calibrate KERNEL_US  how many iterations of the work kernel take KERNEL_US on
//                                        a GPU no one else uses: "iterations=N alone_us=T"
//   vgpu_gpu_check share MS N T          launch work kernels of N iterations (T us each, alone)
//                                        back to back, a few in flight, for MS ms; the share as
//                                        busy time from events around each kernel, and as work
//                                        done (kernels x T / elapsed)
//
// Two shares, because they part on a real GPU: processes without MPS take turns on it by time
// slices, and an event pair around a kernel then also spans the slices other processes ran
// while that kernel was resident. Work done is the share of the GPU's throughput received.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shim/cuda_types.h"

namespace {

// A busy loop on %globaltimer for as many nanoseconds as its parameter.
const char kSpinPtx[] = R"(
.version 8.0
.target sm_90
.address_size 64

.visible .entry spin(
  .param .u64 spin_param_0
)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;

  ld.param.u64 %rd1, [spin_param_0];
  mov.u64 %rd2, %globaltimer;
$L_spin:
  mov.u64 %rd3, %globaltimer;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $L_spin;
  ret;
}

// A fixed amount of work: as many xorshift steps as its first parameter, stored where the second
// points when that is not null (so the loop cannot be left out). The fake driver runs any such
// function for as many nanoseconds as its first parameter.
.visible .entry work(
  .param .u64 work_param_0,
  .param .u64 work_param_1
)
{
  .reg .pred %p<3>;
  .reg .b64 %rd<7>;

  ld.param.u64 %rd1, [work_param_0];
  ld.param.u64 %rd5, [work_param_1];
  mov.u64 %rd2, 0;
  mov.u64 %rd3, 88172645463325252;
$L_work:
  setp.ge.u64 %p1, %rd2, %rd1;
  @%p1 bra $L_store;
  shl.b64 %rd4, %rd3, 13;
  xor.b64 %rd3, %rd3, %rd4;
  shr.b64 %rd4, %rd3, 7;
  xor.b64 %rd3, %rd3, %rd4;
  shl.b64 %rd4, %rd3, 17;
  xor.b64 %rd3, %rd3, %rd4;
  add.u64 %rd2, %rd2, 1;
  bra $L_work;
$L_store:
  setp.eq.u64 %p2, %rd5, 0;
  @%p2 bra $L_done;
  st.global.u64 [%rd5], %rd3;
$L_done:
  ret;
}
)";

void* g_cuda = nullptr;

template <class Fn>
Fn Sym(const char* name, bool required = true) {
  void* fn = dlsym(g_cuda, name);
  if (!fn && required) {
    std::fprintf(stderr, "vgpu_gpu_check: libcuda.so.1 has no %s\n", name);
    std::exit(2);
  }
  return reinterpret_cast<Fn>(fn);
}

#define CHECK_CU(call)                                                         \
  do {                                                                         \
    CUresult check_r = (call);                                                 \
    if (check_r != CUDA_SUCCESS) {                                             \
      std::fprintf(stderr, "vgpu_gpu_check: %s failed: %d\n", #call, check_r); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Cuda {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)();
  CUresult (*MemGetInfo)(size_t*, size_t*);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void**, void**);
  CUresult (*EventCreate)(CUevent*, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float*, CUevent, CUevent);
  CUfunction spin = nullptr;
  CUfunction work = nullptr;

  // Loads the driver and makes device 0's primary context current.
  bool Open() {
    g_cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!g_cuda) return false;
    Init = Sym<decltype(Init)>("cuInit");
    if (Init(0) != CUDA_SUCCESS) return false;
    DeviceGet = Sym<decltype(DeviceGet)>("cuDeviceGet");
    PrimaryCtxRetain = Sym<decltype(PrimaryCtxRetain)>("cuDevicePrimaryCtxRetain");
    CtxSetCurrent = Sym<decltype(CtxSetCurrent)>("cuCtxSetCurrent");
    CtxSynchronize = Sym<decltype(CtxSynchronize)>("cuCtxSynchronize");
    MemGetInfo = Sym<decltype(MemGetInfo)>("cuMemGetInfo_v2");
    MemAlloc = Sym<decltype(MemAlloc)>("cuMemAlloc_v2");
    MemFree = Sym<decltype(MemFree)>("cuMemFree_v2");
    ModuleLoadData = Sym<decltype(ModuleLoadData)>("cuModuleLoadData");
    ModuleGetFunction = Sym<decltype(ModuleGetFunction)>("cuModuleGetFunction");
    LaunchKernel = Sym<decltype(LaunchKernel)>("cuLaunchKernel");
    EventCreate = Sym<decltype(EventCreate)>("cuEventCreate");
    EventRecord = Sym<decltype(EventRecord)>("cuEventRecord");
    EventSynchronize = Sym<decltype(EventSynchronize)>("cuEventSynchronize");
    EventElapsedTime = Sym<decltype(EventElapsedTime)>("cuEventElapsedTime_v2", false);
    if (!EventElapsedTime) EventElapsedTime = Sym<decltype(EventElapsedTime)>("cuEventElapsedTime");
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    CHECK_CU(DeviceGet(&dev, 0));
    CHECK_CU(PrimaryCtxRetain(&ctx, dev));
    CHECK_CU(CtxSetCurrent(ctx));
    return true;
  }

  void LoadSpin() {
    CUmodule module = nullptr;
    CHECK_CU(ModuleLoadData(&module, kSpinPtx));
    CHECK_CU(ModuleGetFunction(&spin, module, "spin"));
    CHECK_CU(ModuleGetFunction(&work, module, "work"));
  }

  CUresult Spin(uint64_t ns) {
    void* params[] = {&ns};
    return LaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  }

  CUresult Work(uint64_t iterations) {
    uint64_t out = 0;
    void* params[] = {&iterations, &out};
    return LaunchKernel(work, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  }

  // The median time of `n` work kernels of `iterations`, one at a time, in microseconds.
  double TimeWork(uint64_t iterations, int n) {
    CUevent start = nullptr, end = nullptr;
    CHECK_CU(EventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_CU(EventCreate(&end, CU_EVENT_DEFAULT));
    std::vector<int64_t> ns;
    for (int i = 0; i < n; ++i) {
      CHECK_CU(EventRecord(start, nullptr));
      CHECK_CU(Work(iterations));
      CHECK_CU(EventRecord(end, nullptr));
      CHECK_CU(EventSynchronize(end));
      float ms = 0;
      CHECK_CU(EventElapsedTime(&ms, start, end));
      ns.push_back(static_cast<int64_t>(ms * 1e6));
    }
    return static_cast<double>(Median(ns)) / 1000;
  }
};

int Nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    std::printf("nvml: libnvidia-ml.so.1 not loadable\n");
    return 1;
  }
  auto init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<nvmlReturn_t (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(
      dlsym(lib, "nvmlDeviceGetName"));
  auto uuid = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(
      dlsym(lib, "nvmlDeviceGetUUID"));
  auto memory = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(
      dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  if (!init || !count || !handle || !name || !uuid || !memory || init() != NVML_SUCCESS) {
    std::printf("nvml: cannot initialise\n");
    return 1;
  }
  unsigned n = 0;
  count(&n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t device = nullptr;
    char device_name[96] = "", device_uuid[96] = "";
    nvmlMemory_t m = {};
    handle(i, &device);
    name(device, device_name, sizeof(device_name));
    uuid(device, device_uuid, sizeof(device_uuid));
    memory(device, &m);
    std::printf("gpu %u: %s %s memory total=%llu used=%llu free=%llu\n", i, device_name,
                device_uuid, m.total, m.used, m.free);
  }
  return 0;
}

// nvml.h's nvmlProcessUtilizationSample_t.
struct ProcessSample {
  unsigned pid;
  unsigned long long time_stamp;  // microseconds since the epoch
  unsigned sm_util, mem_util, enc_util, dec_util;
};

// What NVML says each process used of GPU 0 over the next `ms` milliseconds: whether the driver
// attributes SM time per process on this machine, which a share enforced from outside the
// processes (by the node agent) would need.
int ProcUtil(int64_t ms) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  auto init = lib ? reinterpret_cast<nvmlReturn_t (*)()>(dlsym(lib, "nvmlInit_v2")) : nullptr;
  auto handle = lib ? reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
                          dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))
                    : nullptr;
  using Fn = nvmlReturn_t (*)(nvmlDevice_t, ProcessSample*, unsigned*, unsigned long long);
  auto samples_of =
      lib ? reinterpret_cast<Fn>(dlsym(lib, "nvmlDeviceGetProcessUtilization")) : nullptr;
  nvmlDevice_t device = nullptr;
  if (!init || !handle || !samples_of || init() != NVML_SUCCESS ||
      handle(0, &device) != NVML_SUCCESS) {
    std::printf("procutil: NVML or nvmlDeviceGetProcessUtilization not available\n");
    return 1;
  }
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const unsigned long long since = now.tv_sec * 1000000ull + now.tv_nsec / 1000;
  timespec pause = {static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  nanosleep(&pause, nullptr);
  unsigned count = 0;
  nvmlReturn_t r = samples_of(device, nullptr, &count, since);
  std::vector<ProcessSample> samples(count + 16);
  count = static_cast<unsigned>(samples.size());
  r = samples_of(device, samples.data(), &count, since);
  if (r != NVML_SUCCESS) {
    std::printf("procutil: nvmlDeviceGetProcessUtilization returned %d\n", r);
    return 1;
  }
  std::vector<unsigned> pids;
  for (unsigned i = 0; i < count; ++i) pids.push_back(samples[i].pid);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  for (unsigned pid : pids) {
    int n = 0;
    double sum = 0;
    for (unsigned i = 0; i < count; ++i) {
      if (samples[i].pid != pid) continue;
      ++n;
      sum += samples[i].sm_util;
    }
    std::printf("procutil: pid=%u samples=%d sm_util_mean=%.1f%%\n", pid, n, sum / n);
  }
  if (pids.empty()) std::printf("procutil: no samples\n");
  return 0;
}

int Mem(Cuda& cuda, uint64_t cap) {
  size_t free = 0, total = 0;
  CHECK_CU(cuda.MemGetInfo(&free, &total));
  std::printf("mem: cuMemGetInfo free=%zu total=%zu (cap %llu)\n", free, total,
              static_cast<unsigned long long>(cap));
  bool ok = total == cap;
  const size_t chunk = 1ull << 30;
  std::vector<CUdeviceptr> held;
  CUresult r = CUDA_SUCCESS;
  uint64_t allocated = 0;
  while (allocated <= cap + chunk) {
    CUdeviceptr p = 0;
    r = cuda.MemAlloc(&p, chunk);
    if (r != CUDA_SUCCESS) break;
    held.push_back(p);
    allocated += chunk;
  }
  std::printf("mem: allocated %llu bytes in 1 GiB pieces, then error %d\n",
              static_cast<unsigned long long>(allocated), r);
  ok = ok && allocated <= cap && r == CUDA_ERROR_OUT_OF_MEMORY && allocated + chunk > cap;
  for (CUdeviceptr p : held) cuda.MemFree(p);
  std::printf("mem: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int Bench(Cuda& cuda, int n) {
  cuda.LoadSpin();
  std::vector<int64_t> alloc_ns, free_ns, launch_ns;
  for (int i = 0; i < n; ++i) {
    CUdeviceptr p = 0;
    int64_t t0 = NowNs();
    CHECK_CU(cuda.MemAlloc(&p, 1 << 20));
    int64_t t1 = NowNs();
    CHECK_CU(cuda.MemFree(p));
    int64_t t2 = NowNs();
    alloc_ns.push_back(t1 - t0);
    free_ns.push_back(t2 - t1);
  }
  for (int i = 0; i < n; ++i) {
    int64_t t0 = NowNs();
    CHECK_CU(cuda.Spin(0));
    launch_ns.push_back(NowNs() - t0);
    if (i % 64 == 63) CHECK_CU(cuda.CtxSynchronize());
  }
  CHECK_CU(cuda.CtxSynchronize());
  std::printf(
      "bench: median over %d calls: cuMemAlloc_v2(1 MiB) %lld ns, cuMemFree_v2 %lld ns, "
      "cuLaunchKernel %lld ns\n",
      n, static_cast<long long>(Median(alloc_ns)), static_cast<long long>(Median(free_ns)),
      static_cast<long long>(Median(launch_ns)));
  return 0;
}

int Calibrate(Cuda& cuda, int64_t kernel_us) {
  cuda.LoadSpin();
  uint64_t iterations = 1000;
  double us = cuda.TimeWork(iterations, 5);
  // Grow the trial until it is long enough to time well, then scale to the target.
  while (us < 200 && iterations < (1ull << 40)) {
    iterations *= 4;
    us = cuda.TimeWork(iterations, 5);
  }
  iterations = std::max<uint64_t>(1, static_cast<uint64_t>(iterations * (kernel_us / us)));
  us = cuda.TimeWork(iterations, 21);
  std::printf("calibrate: iterations=%llu alone_us=%.1f\n",
              static_cast<unsigned long long>(iterations), us);
  return 0;
}

int Share(Cuda& cuda, int64_t ms, uint64_t iterations, double alone_us) {
  cuda.LoadSpin();
  constexpr int kInFlight = 4;
  CUevent first = nullptr, start[kInFlight] = {}, end[kInFlight] = {};
  CHECK_CU(cuda.EventCreate(&first, CU_EVENT_DEFAULT));
  for (int i = 0; i < kInFlight; ++i) {
    CHECK_CU(cuda.EventCreate(&start[i], CU_EVENT_DEFAULT));
    CHECK_CU(cuda.EventCreate(&end[i], CU_EVENT_DEFAULT));
  }
  CHECK_CU(cuda.EventRecord(first, nullptr));
  double busy_ms = 0, elapsed_ms = 0;
  int launched = 0, kernels = 0;
  // Keeps kInFlight kernels queued; each finished one is timed, and the next is launched.
  auto finish = [&](int slot) {
    CHECK_CU(cuda.EventSynchronize(end[slot]));
    float kernel_ms = 0, total_ms = 0;
    CHECK_CU(cuda.EventElapsedTime(&kernel_ms, start[slot], end[slot]));
    CHECK_CU(cuda.EventElapsedTime(&total_ms, first, end[slot]));
    busy_ms += kernel_ms;
    elapsed_ms = total_ms;
    ++kernels;
  };
  while (elapsed_ms < ms) {
    const int slot = launched % kInFlight;
    if (launched >= kInFlight) finish(slot);
    CHECK_CU(cuda.EventRecord(start[slot], nullptr));
    CHECK_CU(cuda.Work(iterations));
    CHECK_CU(cuda.EventRecord(end[slot], nullptr));
    ++launched;
  }
  for (int i = kernels; i < launched; ++i) finish(i % kInFlight);
  std::printf("share: pid=%d kernels=%d busy_ms=%.1f elapsed_ms=%.1f fraction=%.3f work=%.3f\n",
              static_cast<int>(getpid()), kernels, busy_ms, elapsed_ms, busy_ms / elapsed_ms,
              kernels * alone_us / 1000 / elapsed_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "nvml") return Nvml();
  if (mode == "procutil" && argc == 3) return ProcUtil(std::atoll(argv[2]));
  Cuda cuda;
  if (!cuda.Open()) {
    std::printf("%s: no CUDA driver (libcuda.so.1 not loadable or cuInit failed)\n", mode.c_str());
    return mode == "probe" ? 1 : 2;
  }
  if (mode == "probe") return 0;
  if (mode == "mem" && argc == 3) return Mem(cuda, std::strtoull(argv[2], nullptr, 10));
  if (mode == "bench" && argc == 3) return Bench(cuda, std::atoi(argv[2]));
  if (mode == "calibrate" && argc == 3) return Calibrate(cuda, std::atoll(argv[2]));
  if (mode == "share" && argc == 5) {
    return Share(cuda, std::atoll(argv[2]), std::strtoull(argv[3], nullptr, 10),
                 std::atof(argv[4]));
  }
  std::fprintf(stderr,
               "usage: vgpu_gpu_check probe|nvml|procutil MS|mem CAP|bench N|calibrate "
               "KERNEL_US|share MS N T\n");
  return 2;
}
