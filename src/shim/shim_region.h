// The shared usage region of one container: a small file (normally under /dev/shm) mapped by
// every process of the container that loaded the shim, and read by the node agent.
//
// Layout: a versioned header, one RegionDevice per configured device (token bucket and
// accumulated busy time) and fixed per-process slots (pid, process start time, memory in use per
// device). Changes that must be consistent across processes — claiming a slot, checking an
// allocation against the cap, freeing dead processes' slots — happen under an fcntl write lock on
// the file, which the kernel releases when the holder dies, so a killed process never wedges the
// others. Counters are also updated with atomic operations so that a process may lower its own
// usage, charge busy time and refill the token bucket without the lock.
//
// fcntl locks belong to a process, not a thread: callers serialise Lock()..Unlock() within a
// process themselves (the shim holds a mutex around it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shim/shim_config.h"

namespace fabrica::shim {

constexpr uint32_t kRegionMagic = 0x50475646;  // "FVGP"
constexpr uint32_t kRegionVersion = 1;
constexpr int kRegionMaxDevices = 16;
constexpr int kRegionMaxSlots = 256;
constexpr size_t kRegionUuidBytes = 64;
constexpr size_t kRegionContainerBytes = 128;

struct RegionDevice {
  char uuid[kRegionUuidBytes];
  // Token bucket: busy nanoseconds the container may still spend, times its compute_permille
  // (kept scaled so that many small refills lose nothing to rounding).
  int64_t tokens_scaled;
  int64_t last_refill_ns;  // shim clock at the last refill; 0 before the first
  int64_t busy_ns;         // accumulated busy-time estimate of the container's kernels
  int64_t reserved[5];
};

struct RegionSlot {
  int32_t pid;  // 0: free
  uint32_t reserved;
  uint64_t start_time;  // /proc/<pid>/stat field 22, to tell a reused pid from the original
  int64_t used_bytes[kRegionMaxDevices];
};

struct RegionLayout {
  uint32_t magic;
  uint32_t version;
  uint64_t size;
  char container[kRegionContainerBytes];
  uint32_t num_devices;
  uint32_t reserved;
  RegionDevice devices[kRegionMaxDevices];
  RegionSlot slots[kRegionMaxSlots];
};

inline int64_t Load(const int64_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
inline int32_t Load32(const int32_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
inline void Store(int64_t& v, int64_t x) { __atomic_store_n(&v, x, __ATOMIC_RELEASE); }
inline int64_t Add(int64_t& v, int64_t x) { return __atomic_add_fetch(&v, x, __ATOMIC_ACQ_REL); }
inline bool Cas(int64_t& v, int64_t expected, int64_t desired) {
  return __atomic_compare_exchange_n(&v, &expected, desired, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

// Facts about a process from /proc/<pid>/stat. Returns false when it cannot be read.
bool ReadProcessStat(int pid, char* state, uint64_t* start_time);

class Region {
 public:
  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region();

  // Opens config.region_path for writing, creating and initialising the region when the file is
  // new or empty. Fails (naming the reason) when the file holds another layout version, another
  // container or other devices than `config`.
  bool Open(const ShimConfig& config, std::string* error);
  // Opens an existing region read-only (the agent's view).
  bool OpenForRead(const std::string& path, std::string* error);

  RegionLayout* layout() const { return map_; }

  void Lock();        // exclusive, waits
  void LockShared();  // shared, waits
  void Unlock();

  // REQUIRES: Lock(). Frees the slots of processes that no longer exist: kill(pid, 0) fails with
  // ESRCH, the process is a zombie, or its start time differs from the slot's (pid reuse).
  // Returns the number of slots freed.
  int ReapDead();
  // REQUIRES: Lock(). Reaps, then claims a free slot for `pid`; -1 when all are taken.
  int Claim(int pid, uint64_t start_time);
  // The container's memory in use on device `d` (a snapshot; exact under Lock()).
  int64_t UsedBytes(int d) const;

 private:
  bool Map(bool writable, std::string* error);

  std::string path_;
  int fd_ = -1;
  RegionLayout* map_ = nullptr;
};

}  // namespace fabrica::shim
