// The virtual GPU shared by every process that loads the fake libcuda.so.1 with
// FAKECUDA_DEVICE_FILE set: one device that runs one "kernel" at a time, on a virtual clock.
//
// It is a small conservative discrete-event simulation. Each client process has a local virtual
// time; it blocks in the device either to run a kernel (synchronously) or to wait until a
// virtual time (the shim's throttle, through fakecuda_wait_until_ns). Only when every live client
// is blocked does the device act, and then on the earliest event: the kernel that can start
// first (at max(submit time, device free time)) or the earliest wake-up. Time spent on the CPU
// counts as zero, so the outcome does not depend on how the OS schedules the processes, and the
// clock jumps over idle time when everyone waits. FAKECUDA_CLIENTS=N holds the device until N
// clients have joined, so runs that start processes one by one still begin together.
//
// Every kernel is logged (who, which launch API, start, end) for the tests to measure shares.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace fakecuda {

constexpr uint32_t kDeviceMagic = 0x464b4456;  // "VDKF"
constexpr int kMaxClients = 32;
constexpr int kMaxLog = 65536;

enum ClientState : int32_t { kAbsent = 0, kRunning = 1, kLaunching = 2, kWaiting = 3 };

// Launch APIs as logged; kPerThread is or'ed in for the _ptsz forms.
enum Api : int32_t { kKernel = 0, kKernelEx = 1, kCooperative = 2, kGraph = 3, kLegacy = 4 };
constexpr int32_t kPerThread = 8;

struct Client {
  int32_t pid;
  int32_t state;
  int32_t tag;  // FAKECUDA_TAG of the process, e.g. a container number
  int32_t api;
  int64_t local_ns;
  int64_t cost_ns;
  int64_t until_ns;
  int64_t start_ns;  // of the kernel just run
};

struct LogEntry {
  int32_t tag;
  int32_t api;
  int32_t pid;
  int32_t client;
  int64_t start_ns;
  int64_t end_ns;
};

struct DeviceFile {
  uint32_t magic;
  int32_t expected_clients;
  int32_t joined_total;
  int32_t reserved;
  pthread_mutex_t mu;  // process-shared, robust
  pthread_cond_t cv;   // process-shared
  int64_t device_free_ns;
  int64_t now_ns;  // time of the last event processed (non-decreasing)
  Client clients[kMaxClients];
  int64_t log_count;
  LogEntry log[kMaxLog];
};

}  // namespace fakecuda
