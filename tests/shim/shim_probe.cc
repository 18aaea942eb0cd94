// A CUDA "application" for the shim tests: linked against the fake libcuda.so.1, run with the
// shim preloaded, driven by one command per line on stdin, one answer per line on stdout. Built
// without sanitizers, since the (unsanitized) shim is loaded into it.
//
//   init | device N | alloc BYTES | alloc_via KIND BYTES | free | meminfo | totalmem | nvml |
//   lock_and_stop | launch API COUNT COST_US | gpa_check | exit
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "shim/cuda_types.h"
#include "shim/shim_config.h"
#include "shim/shim_region.h"

#define FABRICA_CU_HOOK(name, base, since, per_thread, params, args) \
  extern "C" CUresult name params;
#include "shim/hooks.def"
extern "C" {
CUresult cuDeviceGet(CUdevice* dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name);
CUresult cuGraphCreate(CUgraph* graph, unsigned int flags);
CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                 size_t count, const CUDA_KERNEL_NODE_PARAMS* params);
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
void fakecuda_detach();
}

namespace {

struct Allocation {
  std::string kind;
  uint64_t key;
};
std::vector<Allocation> g_allocations;

using MemAllocFn = CUresult (*)(CUdeviceptr*, size_t);

CUresult AllocVia(const std::string& kind, size_t bytes) {
  CUdeviceptr ptr = 0;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  uint64_t key = 0;
  if (kind == "v2") {
    r = cuMemAlloc_v2(&ptr, bytes);
  } else if (kind == "v1") {
    CUdeviceptr_v1 small = 0;
    r = cuMemAlloc(&small, static_cast<unsigned int>(bytes));
    ptr = small;
  } else if (kind == "pitch") {
    size_t pitch = 0;
    r = cuMemAllocPitch_v2(&ptr, &pitch, bytes / 1024, 1024, 4);
  } else if (kind == "managed") {
    r = cuMemAllocManaged(&ptr, bytes, 1);
  } else if (kind == "async") {
    r = cuMemAllocAsync(&ptr, bytes, nullptr);
  } else if (kind == "async_ptsz") {
    r = cuMemAllocAsync_ptsz(&ptr, bytes, nullptr);
  } else if (kind == "pool") {
    r = cuMemAllocFromPoolAsync(&ptr, bytes, nullptr, nullptr);
  } else if (kind == "pool_ptsz") {
    r = cuMemAllocFromPoolAsync_ptsz(&ptr, bytes, nullptr, nullptr);
  } else if (kind == "create") {
    CUmemAllocationProp prop = {};
    prop.type = 1;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle = 0;
    r = cuMemCreate(&handle, bytes, &prop, 0);
    ptr = handle;
  } else if (kind == "array") {
    CUDA_ARRAY_DESCRIPTOR desc = {bytes / 4096 / 4, 4096, CU_AD_FORMAT_FLOAT, 1};
    CUarray array = nullptr;
    r = cuArrayCreate_v2(&array, &desc);
    ptr = reinterpret_cast<uint64_t>(array);
  } else if (kind == "array3d") {
    CUDA_ARRAY3D_DESCRIPTOR desc = {bytes / (64 * 64 * 4), 64, 64, CU_AD_FORMAT_FLOAT, 1, 0};
    CUarray array = nullptr;
    r = cuArray3DCreate_v2(&array, &desc);
    ptr = reinterpret_cast<uint64_t>(array);
  } else if (kind == "mipmap") {
    // Two levels of a 2D float array: level 1 is a quarter of level 0.
    CUDA_ARRAY3D_DESCRIPTOR desc = {bytes / 4096 / 4, 4096, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUmipmappedArray array = nullptr;
    r = cuMipmappedArrayCreate(&array, &desc, 2);
    ptr = reinterpret_cast<uint64_t>(array);
  } else if (kind == "dlsym_default") {
    auto fn = reinterpret_cast<MemAllocFn>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    r = fn(&ptr, bytes);
  } else if (kind == "dlsym_handle") {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW);
    auto fn = reinterpret_cast<MemAllocFn>(dlsym(handle, "cuMemAlloc_v2"));
    r = fn(&ptr, bytes);
  } else if (kind == "gpa" || kind == "gpa_v2") {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult found = kind == "gpa" ? cuGetProcAddress("cuMemAlloc", &fn, 12000, 0)
                                   : cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &status);
    if (found != CUDA_SUCCESS || !fn) return 1000 + found;
    r = reinterpret_cast<MemAllocFn>(fn)(&ptr, bytes);
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  key = ptr;
  if (r == CUDA_SUCCESS) g_allocations.push_back({kind, key});
  return r;
}

CUresult FreeLast() {
  if (g_allocations.empty()) return CUDA_ERROR_INVALID_VALUE;
  Allocation a = g_allocations.back();
  g_allocations.pop_back();
  if (a.kind == "async" || a.kind == "pool") return cuMemFreeAsync(a.key, nullptr);
  if (a.kind == "async_ptsz" || a.kind == "pool_ptsz") return cuMemFreeAsync_ptsz(a.key, nullptr);
  if (a.kind == "create") return cuMemRelease(a.key);
  if (a.kind == "array" || a.kind == "array3d") {
    return cuArrayDestroy(reinterpret_cast<CUarray>(a.key));
  }
  if (a.kind == "mipmap") return cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(a.key));
  return cuMemFree_v2(a.key);
}

std::string Nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) return "nvml -1";
  auto init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto handle = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto info = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(
      dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto info2 = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>(
      dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"));
  init();
  nvmlDevice_t device = nullptr;
  handle(0, &device);
  nvmlMemory_t m = {};
  nvmlMemory_v2_t m2 = {};
  m2.version = NVML_MEMORY_V2_VERSION;
  const nvmlReturn_t r1 = info(device, &m);
  const nvmlReturn_t r2 = info2(device, &m2);
  std::ostringstream out;
  out << "nvml " << r1 << " " << m.total << " " << m.free << " " << m.used << " " << r2 << " "
      << m2.total << " " << m2.free << " " << m2.used;
  return out.str();
}

CUresult LaunchMany(const std::string& api, int count, int cost_us) {
  CUmodule module = nullptr;
  CUfunction f = nullptr;
  cuModuleLoadData(&module, "");
  const std::string name = "fake_kernel_" + std::to_string(cost_us);
  cuModuleGetFunction(&f, module, name.c_str());
  CUgraphExec exec = nullptr;
  if (api.rfind("graph", 0) == 0) {
    CUgraph graph = nullptr;
    CUgraphNode node = nullptr;
    CUDA_KERNEL_NODE_PARAMS params = {};
    params.func = f;
    cuGraphCreate(&graph, 0);
    cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &params);
    cuGraphInstantiateWithFlags(&exec, graph, 0);
  }
  CUlaunchConfig config = {1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, 0};
  CUresult r = CUDA_SUCCESS;
  for (int i = 0; i < count && r == CUDA_SUCCESS; ++i) {
    if (api == "kernel") {
      r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    } else if (api == "kernel_ptsz") {
      r = cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    } else if (api == "ex") {
      r = cuLaunchKernelEx(&config, f, nullptr, nullptr);
    } else if (api == "ex_ptsz") {
      r = cuLaunchKernelEx_ptsz(&config, f, nullptr, nullptr);
    } else if (api == "coop") {
      r = cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr);
    } else if (api == "coop_ptsz") {
      r = cuLaunchCooperativeKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr);
    } else if (api == "graph") {
      r = cuGraphLaunch(exec, nullptr);
    } else if (api == "graph_ptsz") {
      r = cuGraphLaunch_ptsz(exec, nullptr);
    } else {
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  fakecuda_detach();
  return r;
}

// cuGetProcAddress(_v2) with the per-thread flag gives the _ptsz hook; without it, the plain one.
std::string GpaCheck() {
  void* ptsz = nullptr;
  void* plain = nullptr;
  void* ex = nullptr;
  CUdriverProcAddressQueryResult status;
  cuGetProcAddress_v2("cuLaunchKernel", &ptsz, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &status);
  cuGetProcAddress("cuLaunchKernel", &plain, 12000, CU_GET_PROC_ADDRESS_DEFAULT);
  cuGetProcAddress_v2("cuGraphLaunch", &ex, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &status);
  const bool ok_ptsz = ptsz == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz");
  const bool ok_plain = plain == dlsym(RTLD_DEFAULT, "cuLaunchKernel");
  const bool ok_graph = ex == dlsym(RTLD_DEFAULT, "cuGraphLaunch_ptsz");
  // And those are the shim's, not the driver's.
  Dl_info info = {};
  dladdr(ptsz, &info);
  const bool in_shim = info.dli_fname && std::strstr(info.dli_fname, "fabrica-vgpu") != nullptr;
  std::ostringstream out;
  out << "gpa_check " << ok_ptsz << " " << ok_plain << " " << ok_graph << " " << in_shim;
  return out.str();
}

std::string LockAndStop() {
  fabrica::ShimConfig config;
  std::string error;
  if (!fabrica::LoadShimConfig(getenv("FABRICA_VGPU_CONFIG"), &config, &error)) {
    return "lock_and_stop " + error;
  }
  static fabrica::shim::Region region;  // kept open: closing the file would drop the lock
  if (!region.Open(config, &error)) return "lock_and_stop " + error;
  region.Lock();
  std::cout << "locked" << std::endl;
  raise(SIGSTOP);
  region.Unlock();
  return "unlocked";
}

}  // namespace

int main() {
  CUcontext contexts[8] = {};
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    std::ostringstream out;
    out << cmd << " ";
    if (cmd == "init") {
      CUresult r = cuInit(0);
      CUdevice dev = 0;
      if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
      if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&contexts[0], dev);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(contexts[0]);
      out << r;
    } else if (cmd == "device") {
      int n = 0;
      in >> n;
      CUresult r = cuDevicePrimaryCtxRetain(&contexts[n], n);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(contexts[n]);
      out << r;
    } else if (cmd == "alloc") {
      size_t bytes = 0;
      in >> bytes;
      out << AllocVia("v2", bytes);
    } else if (cmd == "alloc_via") {
      std::string kind;
      size_t bytes = 0;
      in >> kind >> bytes;
      out << AllocVia(kind, bytes);
    } else if (cmd == "free") {
      out << FreeLast();
    } else if (cmd == "meminfo") {
      size_t free = 0, total = 0;
      CUresult r = cuMemGetInfo_v2(&free, &total);
      out << r << " " << free << " " << total;
    } else if (cmd == "totalmem") {
      size_t bytes = 0;
      CUresult r = cuDeviceTotalMem_v2(&bytes, 0);
      out << r << " " << bytes;
    } else if (cmd == "nvml") {
      out.str(Nvml());
    } else if (cmd == "lock_and_stop") {
      out.str(LockAndStop());
    } else if (cmd == "launch") {
      std::string api;
      int count = 0, cost_us = 0;
      in >> api >> count >> cost_us;
      out << LaunchMany(api, count, cost_us);
    } else if (cmd == "gpa_check") {
      out.str(GpaCheck());
    } else if (cmd == "exit") {
      return 0;
    } else {
      out << "unknown";
    }
    std::cout << out.str() << std::endl;
  }
  return 0;
}
