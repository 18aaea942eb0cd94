#include "shim/shim_region.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace fabrica::shim {
namespace {

bool LockFile(int fd, short type) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;  // the whole file
  while (fcntl(fd, F_SETLKW, &lock) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

bool Error(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

}  // namespace

bool ReadProcessStat(int pid, char* state, uint64_t* start_time) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[1024];
  ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  if (n <= 0) return false;
  buffer[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses; fields resume after the last ')'.
  const char* p = std::strrchr(buffer, ')');
  if (!p || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  // Field 3 is the state; the start time is field 22, 19 fields further on.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return false;
    ++p;
  }
  *start_time = std::strtoull(p, nullptr, 10);
  return true;
}

Region::~Region() {
  if (map_) munmap(map_, sizeof(RegionLayout));
  if (fd_ >= 0) close(fd_);
}

bool Region::Map(bool writable, std::string* error) {
  void* map = mmap(nullptr, sizeof(RegionLayout), writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) return Error(error, "region " + path_ + ": mmap: " + strerror(errno));
  map_ = static_cast<RegionLayout*>(map);
  return true;
}

bool Region::Open(const ShimConfig& config, std::string* error) {
  path_ = config.region_path;
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0660);
  if (fd_ < 0) return Error(error, "region " + path_ + ": " + strerror(errno));
  Lock();
  struct stat st;
  bool ok = fstat(fd_, &st) == 0;
  if (ok && st.st_size == 0 && ftruncate(fd_, sizeof(RegionLayout)) != 0) ok = false;
  if (!ok) {
    Unlock();
    return Error(error, "region " + path_ + ": " + strerror(errno));
  }
  if (st.st_size != 0 && st.st_size != static_cast<off_t>(sizeof(RegionLayout))) {
    Unlock();
    return Error(error, "region " + path_ + ": size " + std::to_string(st.st_size) + ", expected " +
                            std::to_string(sizeof(RegionLayout)) + " (another layout version?)");
  }
  if (!Map(true, error)) {
    Unlock();
    return false;
  }
  RegionLayout& r = *map_;
  if (__atomic_load_n(&r.magic, __ATOMIC_ACQUIRE) == 0) {
    // New (or left half-made by a creator that died under the lock): initialise.
    std::memset(&r, 0, sizeof(r));
    r.version = kRegionVersion;
    r.size = sizeof(RegionLayout);
    std::snprintf(r.container, sizeof(r.container), "%s", config.container.c_str());
    r.num_devices = static_cast<uint32_t>(config.devices.size());
    for (size_t d = 0; d < config.devices.size(); ++d) {
      std::snprintf(r.devices[d].uuid, kRegionUuidBytes, "%s", config.devices[d].uuid.c_str());
    }
    __atomic_store_n(&r.magic, kRegionMagic, __ATOMIC_RELEASE);
  }
  std::string problem;
  if (r.magic != kRegionMagic) {
    problem = "not a fabrica-vgpu region (bad magic)";
  } else if (r.version != kRegionVersion || r.size != sizeof(RegionLayout)) {
    problem = "layout version " + std::to_string(r.version) + ", this shim speaks " +
              std::to_string(kRegionVersion);
  } else if (config.container != r.container) {
    problem =
        "belongs to container '" + std::string(r.container) + "', not '" + config.container + "'";
  } else if (r.num_devices != config.devices.size()) {
    problem = "has " + std::to_string(r.num_devices) + " devices, the config " +
              std::to_string(config.devices.size());
  } else {
    for (size_t d = 0; d < config.devices.size(); ++d) {
      if (config.devices[d].uuid != r.devices[d].uuid) {
        problem = "device " + std::to_string(d) + " is " + r.devices[d].uuid + ", the config's " +
                  config.devices[d].uuid;
      }
    }
  }
  Unlock();
  if (!problem.empty()) return Error(error, "region " + path_ + ": " + problem);
  return true;
}

bool Region::OpenForRead(const std::string& path, std::string* error) {
  path_ = path;
  fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return Error(error, "region " + path_ + ": " + strerror(errno));
  struct stat st;
  if (fstat(fd_, &st) != 0) return Error(error, "region " + path_ + ": " + strerror(errno));
  if (st.st_size != static_cast<off_t>(sizeof(RegionLayout))) {
    return Error(error, "region " + path_ + ": size " + std::to_string(st.st_size) + ", expected " +
                            std::to_string(sizeof(RegionLayout)));
  }
  if (!Map(false, error)) return false;
  LockShared();
  bool ok = map_->magic == kRegionMagic && map_->version == kRegionVersion;
  uint32_t version = map_->version;
  Unlock();
  if (!ok) {
    return Error(error,
                 "region " + path_ + ": bad magic or layout version " + std::to_string(version));
  }
  return true;
}

void Region::Lock() { LockFile(fd_, F_WRLCK); }
void Region::LockShared() { LockFile(fd_, F_RDLCK); }
void Region::Unlock() { LockFile(fd_, F_UNLCK); }

int Region::ReapDead() {
  int freed = 0;
  for (RegionSlot& slot : map_->slots) {
    const int pid = Load32(slot.pid);
    if (pid == 0) continue;
    bool dead = kill(pid, 0) != 0 && errno == ESRCH;
    char state = 0;
    uint64_t start_time = 0;
    if (!dead && ReadProcessStat(pid, &state, &start_time)) {
      dead = state == 'Z' || state == 'X' || start_time != slot.start_time;
    }
    if (!dead) continue;
    for (int64_t& used : slot.used_bytes) Store(used, 0);
    __atomic_store_n(&slot.pid, 0, __ATOMIC_RELEASE);
    ++freed;
  }
  return freed;
}

int Region::Claim(int pid, uint64_t start_time) {
  ReapDead();
  for (int i = 0; i < kRegionMaxSlots; ++i) {
    RegionSlot& slot = map_->slots[i];
    if (Load32(slot.pid) != 0) continue;
    slot.start_time = start_time;
    for (int64_t& used : slot.used_bytes) Store(used, 0);
    __atomic_store_n(&slot.pid, pid, __ATOMIC_RELEASE);
    return i;
  }
  return -1;
}

int64_t Region::UsedBytes(int d) const {
  int64_t sum = 0;
  for (const RegionSlot& slot : map_->slots) {
    if (Load32(slot.pid) != 0) sum += Load(slot.used_bytes[d]);
  }
  return sum;
}

}  // namespace fabrica::shim
