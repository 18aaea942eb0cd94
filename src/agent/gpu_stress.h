// The built-in burn-in of one GPU, for nodes without DCGM or nccl-tests: a memory burn (fill a
// buffer with patterns, read it back, compare every word) and a compute burn (a kernel runs an
// integer xorshift chain per thread for a set time; every result is checked against the host's).
// It loads libcuda.so.1 with dlopen (no CUDA headers or toolkit needed; the kernel is PTX text the
// driver compiles), so a node without a driver gets a clear error, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica {

struct GpuStressOptions {
  std::string library;         // "" : $FABRICA_CUDA_LIBRARY, else libcuda.so.1
  int64_t memory_mib = 1024;   // buffer for the memory burn (capped at half the free memory)
  double seconds = 10;         // compute burn time per GPU
  uint32_t threads = 1 << 20;  // burn kernel threads, each checked
  uint32_t iterations = 4096;  // xorshift rounds per thread and kernel
};

struct GpuStressResult {
  int gpu = -1;  // CUDA ordinal
  bool passed = false;
  int64_t words_checked = 0;
  int64_t memory_errors = 0;
  int64_t kernels = 0;
  int64_t compute_errors = 0;
  std::string message;  // what failed, or a summary
};

// Burns each GPU in `gpus` (CUDA ordinals; empty: all), one after the other. The Status is an
// error only when the driver cannot be used at all; a GPU that fails its checks is a result
// with passed = false.
Result<std::vector<GpuStressResult>> StressGpus(const std::vector<int>& gpus,
                                                const GpuStressOptions& options);

// The value thread `tid` computes after `iterations` rounds (the host's side of the check).
uint32_t BurnValue(uint32_t tid, uint32_t iterations);

}  // namespace fabrica
