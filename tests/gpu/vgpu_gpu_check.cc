// The programs of tests/gpu/check.sh: a CUDA driver-API client with no CUDA headers and no nvcc.
// It loads libcuda.so.1 (and libnvidia-ml.so.1) with dlopen and finds every function with
// dlsym, so under the shim it goes through the shim's dlsym hook; its kernel is a hand-written
// PTX busy loop. It runs the same way against the fake driver (CPU flow) and a real GPU.
//
//   vgpu_gpu_check probe                 exit 0 when a driver loads and cuInit succeeds
//   vgpu_gpu_check nvml                  the NVML inventory: name, UUID, memory per GPU
//   vgpu_gpu_check mem CAP_BYTES         cuMemGetInfo reports CAP; allocating past it fails
//   vgpu_gpu_check bench N               median cuMemAlloc / cuMemFree / cuLaunchKernel times
//   vgpu_gpu_check share MS KERNEL_US    launch KERNEL_US kernels back to back for MS ms of GPU
//                                        time; busy time from events around each kernel
#include <dlfcn.h>
#include <time.h>

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
  }

  CUresult Spin(uint64_t ns) {
    void* params[] = {&ns};
    return LaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
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

int Share(Cuda& cuda, int64_t ms, int64_t kernel_us) {
  cuda.LoadSpin();
  CUevent first = nullptr, start = nullptr, end = nullptr;
  CHECK_CU(cuda.EventCreate(&first, CU_EVENT_DEFAULT));
  CHECK_CU(cuda.EventCreate(&start, CU_EVENT_DEFAULT));
  CHECK_CU(cuda.EventCreate(&end, CU_EVENT_DEFAULT));
  CHECK_CU(cuda.EventRecord(first, nullptr));
  double busy_ms = 0, elapsed_ms = 0;
  int kernels = 0;
  while (elapsed_ms < ms) {
    CHECK_CU(cuda.EventRecord(start, nullptr));
    CHECK_CU(cuda.Spin(static_cast<uint64_t>(kernel_us) * 1000));
    CHECK_CU(cuda.EventRecord(end, nullptr));
    CHECK_CU(cuda.EventSynchronize(end));
    float kernel_ms = 0, total_ms = 0;
    CHECK_CU(cuda.EventElapsedTime(&kernel_ms, start, end));
    CHECK_CU(cuda.EventElapsedTime(&total_ms, first, end));
    busy_ms += kernel_ms;
    elapsed_ms = total_ms;
    ++kernels;
  }
  std::printf("share: kernels=%d busy_ms=%.1f elapsed_ms=%.1f fraction=%.3f\n", kernels, busy_ms,
              elapsed_ms, busy_ms / elapsed_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "nvml") return Nvml();
  Cuda cuda;
  if (!cuda.Open()) {
    std::printf("%s: no CUDA driver (libcuda.so.1 not loadable or cuInit failed)\n", mode.c_str());
    return mode == "probe" ? 1 : 2;
  }
  if (mode == "probe") return 0;
  if (mode == "mem" && argc == 3) return Mem(cuda, std::strtoull(argv[2], nullptr, 10));
  if (mode == "bench" && argc == 3) return Bench(cuda, std::atoi(argv[2]));
  if (mode == "share" && argc == 4) return Share(cuda, std::atoll(argv[2]), std::atoll(argv[3]));
  std::fprintf(stderr, "usage: vgpu_gpu_check probe|nvml|mem CAP|bench N|share MS KERNEL_US\n");
  return 2;
}
