#include "agent/gpu_stress.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <memory>

namespace fabrica {
namespace {

// The driver API subset the burn needs (values and signatures of cuda.h).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;

struct Driver {
  void* handle = nullptr;
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuCtxCreate_v2)(CUcontext*, unsigned int, CUdevice);
  CUresult (*cuCtxDestroy_v2)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemGetInfo_v2)(size_t*, size_t*);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemsetD32_v2)(CUdeviceptr, unsigned int, size_t);
  CUresult (*cuMemcpyDtoH_v2)(void*, CUdeviceptr, size_t);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, void*, void**, void**);
};

// out[tid] = xorshift32 applied `iters` times to tid * 0x9E3779B1 + 1, for tid < n.
constexpr char kBurnPtx[] = R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry fabrica_burn(.param .u64 out, .param .u32 iters, .param .u32 n)
{
  .reg .pred %p<3>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r6, %r2;
  @%p1 bra DONE;
  mul.lo.u32 %r7, %r6, 0x9E3779B1;
  add.u32 %r7, %r7, 1;
  mov.u32 %r8, 0;
LOOP:
  setp.ge.u32 %p2, %r8, %r1;
  @%p2 bra STORE;
  shl.b32 %r9, %r7, 13;
  xor.b32 %r7, %r7, %r9;
  shr.u32 %r9, %r7, 17;
  xor.b32 %r7, %r7, %r9;
  shl.b32 %r9, %r7, 5;
  xor.b32 %r7, %r7, %r9;
  add.u32 %r8, %r8, 1;
  bra LOOP;
STORE:
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r6, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r7;
DONE:
  ret;
}
)";

template <typename F>
bool Resolve(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

Result<std::unique_ptr<Driver>> LoadDriver(const std::string& library) {
  std::string path = library;
  if (path.empty()) {
    const char* env = std::getenv("FABRICA_CUDA_LIBRARY");
    path = env && *env ? env : "libcuda.so.1";
  }
  auto d = std::make_unique<Driver>();
  d->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d->handle) {
    return Status(StatusCode::kUnavailable,
                  "CUDA driver library not found: " + path + " (" + std::string(dlerror()) + ")");
  }
  const bool ok = Resolve(d->handle, "cuInit", &d->cuInit) &&
                  Resolve(d->handle, "cuDeviceGetCount", &d->cuDeviceGetCount) &&
                  Resolve(d->handle, "cuDeviceGet", &d->cuDeviceGet) &&
                  Resolve(d->handle, "cuCtxCreate_v2", &d->cuCtxCreate_v2) &&
                  Resolve(d->handle, "cuCtxDestroy_v2", &d->cuCtxDestroy_v2) &&
                  Resolve(d->handle, "cuCtxSynchronize", &d->cuCtxSynchronize) &&
                  Resolve(d->handle, "cuMemGetInfo_v2", &d->cuMemGetInfo_v2) &&
                  Resolve(d->handle, "cuMemAlloc_v2", &d->cuMemAlloc_v2) &&
                  Resolve(d->handle, "cuMemFree_v2", &d->cuMemFree_v2) &&
                  Resolve(d->handle, "cuMemsetD32_v2", &d->cuMemsetD32_v2) &&
                  Resolve(d->handle, "cuMemcpyDtoH_v2", &d->cuMemcpyDtoH_v2) &&
                  Resolve(d->handle, "cuModuleLoadData", &d->cuModuleLoadData) &&
                  Resolve(d->handle, "cuModuleUnload", &d->cuModuleUnload) &&
                  Resolve(d->handle, "cuModuleGetFunction", &d->cuModuleGetFunction) &&
                  Resolve(d->handle, "cuLaunchKernel", &d->cuLaunchKernel);
  if (!ok) return FailedPrecondition(path + " lacks a driver API function the burn needs");
  if (CUresult r = d->cuInit(0)) {
    return FailedPrecondition("cuInit failed with CUDA error " + std::to_string(r));
  }
  return d;
}

GpuStressResult StressOne(Driver& d, int ordinal, const GpuStressOptions& o) {
  GpuStressResult res;
  res.gpu = ordinal;
  auto fail = [&](const std::string& what, CUresult r) {
    res.message = "GPU " + std::to_string(ordinal) + ": " + what + " failed (CUDA error " +
                  std::to_string(r) + ")";
    return res;
  };
  CUdevice dev = 0;
  if (CUresult r = d.cuDeviceGet(&dev, ordinal)) return fail("cuDeviceGet", r);
  CUcontext ctx = nullptr;
  if (CUresult r = d.cuCtxCreate_v2(&ctx, 0, dev)) return fail("cuCtxCreate", r);
  struct CtxGuard {
    Driver& d;
    CUcontext c;
    ~CtxGuard() { d.cuCtxDestroy_v2(c); }
  } guard{d, ctx};

  // Memory: patterns written by the device, read back and compared word by word.
  size_t free_bytes = 0, total_bytes = 0;
  if (CUresult r = d.cuMemGetInfo_v2(&free_bytes, &total_bytes)) return fail("cuMemGetInfo", r);
  size_t bytes = static_cast<size_t>(o.memory_mib) << 20;
  if (bytes > free_bytes / 2) bytes = free_bytes / 2;
  bytes &= ~size_t{3};
  if (bytes == 0) return fail("finding free memory", 2);
  CUdeviceptr buf = 0;
  if (CUresult r = d.cuMemAlloc_v2(&buf, bytes)) return fail("cuMemAlloc", r);
  struct MemGuard {
    Driver& d;
    CUdeviceptr p;
    ~MemGuard() { d.cuMemFree_v2(p); }
  } mem_guard{d, buf};
  const size_t words = bytes / 4;
  const size_t chunk_words = std::min<size_t>(words, 16 << 20);  // 64 MiB of host buffer at most
  std::vector<uint32_t> host(chunk_words);
  for (uint32_t pattern : {0xA5A5A5A5u, 0x5A5A5A5Au, 0xFFFFFFFFu, 0x00000000u}) {
    if (CUresult r = d.cuMemsetD32_v2(buf, pattern, words)) return fail("cuMemsetD32", r);
    if (CUresult r = d.cuCtxSynchronize()) return fail("cuCtxSynchronize", r);
    for (size_t at = 0; at < words; at += chunk_words) {
      const size_t n = std::min(chunk_words, words - at);
      if (CUresult r = d.cuMemcpyDtoH_v2(host.data(), buf + at * 4, n * 4)) {
        return fail("cuMemcpyDtoH", r);
      }
      for (size_t i = 0; i < n; ++i) res.memory_errors += host[i] != pattern;
      res.words_checked += static_cast<int64_t>(n);
    }
  }

  // Compute: the xorshift kernel until the time is up, every result checked.
  CUmodule module = nullptr;
  if (CUresult r = d.cuModuleLoadData(&module, kBurnPtx)) return fail("loading the burn kernel", r);
  struct ModGuard {
    Driver& d;
    CUmodule m;
    ~ModGuard() { d.cuModuleUnload(m); }
  } mod_guard{d, module};
  CUfunction burn = nullptr;
  if (CUresult r = d.cuModuleGetFunction(&burn, module, "fabrica_burn")) {
    return fail("cuModuleGetFunction", r);
  }
  uint32_t n = static_cast<uint32_t>(std::min<size_t>(words, o.threads));
  uint32_t iterations = o.iterations;
  const unsigned int threads = 256;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, o.seconds));
  std::vector<uint32_t> expected(n);
  for (uint32_t t = 0; t < n; ++t) expected[t] = BurnValue(t, iterations);
  std::vector<uint32_t> got(n);
  do {
    void* params[] = {&buf, &iterations, &n};
    if (CUresult r = d.cuLaunchKernel(burn, (n + threads - 1) / threads, 1, 1, threads, 1, 1, 0,
                                      nullptr, params, nullptr)) {
      return fail("cuLaunchKernel", r);
    }
    if (CUresult r = d.cuCtxSynchronize()) return fail("the burn kernel", r);
    ++res.kernels;
    if (CUresult r = d.cuMemcpyDtoH_v2(got.data(), buf, n * 4)) return fail("cuMemcpyDtoH", r);
    for (uint32_t t = 0; t < n; ++t) res.compute_errors += got[t] != expected[t];
  } while (std::chrono::steady_clock::now() < until && res.compute_errors == 0);

  res.passed = res.memory_errors == 0 && res.compute_errors == 0;
  res.message = "GPU " + std::to_string(ordinal) + ": " + std::to_string(res.words_checked) +
                " words checked (" + std::to_string(res.memory_errors) + " wrong), " +
                std::to_string(res.kernels) + " burn kernels (" +
                std::to_string(res.compute_errors) + " wrong results)";
  return res;
}

}  // namespace

uint32_t BurnValue(uint32_t tid, uint32_t iterations) {
  uint32_t x = tid * 0x9E3779B1u + 1;
  for (uint32_t i = 0; i < iterations; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
  }
  return x;
}

Result<std::vector<GpuStressResult>> StressGpus(const std::vector<int>& gpus,
                                                const GpuStressOptions& options) {
  // CUDA ordinals in PCI bus order, as NVML numbers GPUs (CUDA's default puts the fastest first).
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/0);
  ASSIGN_OR_RETURN(std::unique_ptr<Driver> d, LoadDriver(options.library));
  std::vector<int> ordinals = gpus;
  if (ordinals.empty()) {
    int count = 0;
    if (CUresult r = d->cuDeviceGetCount(&count)) {
      return FailedPrecondition("cuDeviceGetCount failed with CUDA error " + std::to_string(r));
    }
    for (int i = 0; i < count; ++i) ordinals.push_back(i);
  }
  std::vector<GpuStressResult> out;
  for (int g : ordinals) out.push_back(StressOne(*d, g, options));
  return out;  // the library stays loaded: unloading a driver mid-process is not safe
}

}  // namespace fabrica
