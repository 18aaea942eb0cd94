// DeviceBackend over NVML (agent/nvml.h), and OpenDeviceBackend's choice between it and the
// simulation.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "agent/device_backend.h"
#include "agent/nvml.h"

namespace fabrica {
namespace {

constexpr int64_t kMib = int64_t{1024} * 1024;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "0-3,8,64-71" from the set bits of an NVML CPU mask.
std::string FormatCpuList(const std::vector<unsigned long>& mask) {
  constexpr int kBits = 8 * sizeof(unsigned long);
  std::string out;
  int start = -1;
  const int total = static_cast<int>(mask.size()) * kBits;
  for (int cpu = 0; cpu <= total; ++cpu) {
    const bool set = cpu < total && ((mask[cpu / kBits] >> (cpu % kBits)) & 1UL) != 0;
    if (set && start < 0) start = cpu;
    if (!set && start >= 0) {
      if (!out.empty()) out += ",";
      out += std::to_string(start);
      if (cpu - 1 > start) out += "-" + std::to_string(cpu - 1);
      start = -1;
    }
  }
  return out;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The sysfs name of a PCI function: "0000:18:00.0".
std::string SysfsPciName(const nvml::PciInfo& pci) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
  return buf;
}

int CountNumaNodes() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
        std::all_of(name.begin() + 4, name.end(), [](char c) { return std::isdigit(c) != 0; })) {
      ++n;
    }
  }
  return n;
}

// InfiniBand / RoCE adapters, with their NUMA node and the first port's rate.
std::vector<Nic> DiscoverNics(const std::string& leaf) {
  std::vector<Nic> nics;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    Nic nic;
    nic.name = e.path().filename().string();
    nic.leaf = leaf;
    nic.numa_node = std::max(0, std::atoi(ReadFirstLine(e.path() / "device/numa_node").c_str()));
    const int gbps = std::atoi(ReadFirstLine(e.path() / "ports/1/rate").c_str());  // "400 Gb/sec"
    if (gbps > 0) nic.gbps = gbps;
    nics.push_back(nic);
  }
  std::sort(nics.begin(), nics.end(), [](const Nic& a, const Nic& b) { return a.name < b.name; });
  return nics;
}

// The MIG profile of a MIG device: the driver names MIG devices "<product> MIG 1g.18gb"; without
// that suffix, the model's profile with the instance's compute slices and nearest memory.
std::string MigProfileOf(const std::string& model, MemoryMib gpu_memory,
                         const std::string& mig_name, const nvml::DeviceAttributes* attrs,
                         int64_t memory_mib) {
  const size_t at = mig_name.find(" MIG ");
  if (at != std::string::npos) return mig_name.substr(at + 5);
  const int64_t mib = attrs != nullptr ? static_cast<int64_t>(attrs->memory_size_mb) : memory_mib;
  const MigProfile* best = nullptr;
  for (const MigProfile& p : MigProfilesFor(model, gpu_memory)) {
    if (attrs != nullptr && p.compute_slices != static_cast<int>(attrs->gpu_instance_slice_count)) {
      continue;
    }
    if (best == nullptr ||
        std::llabs(p.memory.value() - mib) < std::llabs(best->memory.value() - mib)) {
      best = &p;
    }
  }
  if (best != nullptr) return best->name;
  const std::string gb = std::to_string((mib + 512) / 1024) + "gb";
  return attrs != nullptr ? std::to_string(attrs->gpu_instance_slice_count) + "g." + gb : gb;
}

struct MigHandle {
  nvml::Device handle = nullptr;
  MigInstanceInfo info;
};

struct Gpu {
  nvml::Device handle = nullptr;
  int index = 0;
  std::string uuid;
  std::vector<MigHandle> migs;
  int32_t last_xid = 0;
  bool lost = false;
};

class NvmlDeviceBackend : public DeviceBackend {
 public:
  NvmlDeviceBackend(std::unique_ptr<nvml::Library> lib, std::string node_name)
      : lib_(std::move(lib)), api_(lib_->api()), node_name_(std::move(node_name)) {}
  ~NvmlDeviceBackend() override {
    if (events_ != nullptr && api_.event_set_free != nullptr) api_.event_set_free(events_);
  }

  std::string Kind() const override { return "nvml"; }
  Result<Inventory> Discover() override;
  Result<std::vector<GpuReading>> Read() override;
  std::vector<XidEvent> PollXids() override {
    DrainEvents();
    return std::exchange(pending_, {});
  }
  Status Inject(const FaultInjection&, int64_t) override {
    return FailedPrecondition(
        "faults can be injected only into simulated devices (--devices sim:FILE)");
  }

 private:
  // Finds the GPUs and their MIG devices again, and registers new GPUs for XID events.
  Status Enumerate();
  // Moves events waiting in the event set to pending_, noting each GPU's last XID.
  void DrainEvents();
  // True on success; notes a lost GPU.
  bool Ok(Gpu& gpu, nvml::Return r) {
    if (r == nvml::kErrorGpuIsLost) gpu.lost = true;
    return r == nvml::kSuccess;
  }
  std::string Text(nvml::Device d, nvml::Return (*fn)(nvml::Device, char*, unsigned int),
                   unsigned size) {
    std::string buf(size, '\0');
    if (fn == nullptr || fn(d, buf.data(), size) != nvml::kSuccess) return "";
    buf.resize(buf.find('\0') == std::string::npos ? size : buf.find('\0'));
    return buf;
  }
  // Memory of a device or MIG device in bytes: total, used, free (-1 each when unknown).
  bool MemoryInfo(Gpu& gpu, nvml::Device d, int64_t* total, int64_t* used, int64_t* free);

  std::unique_ptr<nvml::Library> lib_;
  const nvml::Api& api_;
  std::string node_name_;
  std::vector<Gpu> gpus_;
  bool enumerated_ = false;
  nvml::EventSet events_ = nullptr;
  std::set<nvml::Device> registered_;
  std::vector<XidEvent> pending_;
};

bool NvmlDeviceBackend::MemoryInfo(Gpu& gpu, nvml::Device d, int64_t* total, int64_t* used,
                                   int64_t* free) {
  *total = *used = *free = -1;
  if (api_.device_get_memory_info_v2 != nullptr) {
    nvml::MemoryV2 m{};
    m.version = nvml::kMemoryV2Version;
    if (Ok(gpu, api_.device_get_memory_info_v2(d, &m))) {
      *total = static_cast<int64_t>(m.total);
      *used = static_cast<int64_t>(m.used);
      *free = static_cast<int64_t>(m.free);
      return true;
    }
  }
  nvml::Memory m{};
  if (api_.device_get_memory_info != nullptr && Ok(gpu, api_.device_get_memory_info(d, &m))) {
    *total = static_cast<int64_t>(m.total);
    *used = static_cast<int64_t>(m.used);
    *free = static_cast<int64_t>(m.free);
    return true;
  }
  return false;
}

Status NvmlDeviceBackend::Enumerate() {
  unsigned int count = 0;
  nvml::Return r = api_.device_get_count(&count);
  if (r != nvml::kSuccess) return Internal("nvmlDeviceGetCount: " + lib_->ErrorString(r));
  std::vector<Gpu> before = std::exchange(gpus_, {});
  for (unsigned int i = 0; i < count; ++i) {
    Gpu gpu;
    gpu.index = static_cast<int>(i);
    r = api_.device_get_handle_by_index(i, &gpu.handle);
    if (r != nvml::kSuccess) {
      return Internal("nvmlDeviceGetHandleByIndex(" + std::to_string(i) +
                      "): " + lib_->ErrorString(r));
    }
    gpu.uuid = Text(gpu.handle, api_.device_get_uuid, nvml::kUuidBufferSize);
    const Gpu* old = i < before.size() ? &before[i] : nullptr;
    if (gpu.uuid.empty() && old != nullptr && old->lost) gpu.uuid = old->uuid;  // still lost
    if (gpu.uuid.empty()) return Internal("GPU " + std::to_string(i) + ": no UUID from NVML");
    if (old != nullptr && old->uuid == gpu.uuid) gpu.last_xid = old->last_xid;
    unsigned int current = 0, pending = 0, max_migs = 0;
    const bool mig = api_.device_get_mig_mode != nullptr &&
                     api_.device_get_mig_mode(gpu.handle, &current, &pending) == nvml::kSuccess &&
                     current == nvml::kMigEnabled;
    if (mig && api_.device_get_max_mig_device_count != nullptr &&
        api_.device_get_mig_device_handle_by_index != nullptr &&
        api_.device_get_max_mig_device_count(gpu.handle, &max_migs) == nvml::kSuccess) {
      for (unsigned int m = 0; m < max_migs; ++m) {
        MigHandle mh;
        // Slots without an instance answer NOT_FOUND.
        if (api_.device_get_mig_device_handle_by_index(gpu.handle, m, &mh.handle) !=
            nvml::kSuccess) {
          continue;
        }
        unsigned int id = 0;
        if (api_.device_get_gpu_instance_id != nullptr &&
            api_.device_get_gpu_instance_id(mh.handle, &id) == nvml::kSuccess) {
          mh.info.gpu_instance_id = static_cast<int>(id);
        }
        if (api_.device_get_compute_instance_id != nullptr &&
            api_.device_get_compute_instance_id(mh.handle, &id) == nvml::kSuccess) {
          mh.info.compute_instance_id = static_cast<int>(id);
        }
        mh.info.uuid = Text(mh.handle, api_.device_get_uuid, nvml::kUuidBufferSize);
        gpu.migs.push_back(std::move(mh));
      }
    }
    gpus_.push_back(std::move(gpu));
  }
  enumerated_ = true;
  // XID events: registered once per handle, for the GPUs that support them.
  if (events_ == nullptr && api_.event_set_create != nullptr && api_.event_set_wait != nullptr &&
      api_.device_register_events != nullptr) {
    if (api_.event_set_create(&events_) != nvml::kSuccess) events_ = nullptr;
  }
  if (events_ != nullptr) {
    for (const Gpu& g : gpus_) {
      if (registered_.count(g.handle) != 0) continue;
      unsigned long long supported = nvml::kEventXid;
      if (api_.device_get_supported_event_types != nullptr &&
          api_.device_get_supported_event_types(g.handle, &supported) != nvml::kSuccess) {
        supported = 0;
      }
      if ((supported & nvml::kEventXid) != 0 &&
          api_.device_register_events(g.handle, nvml::kEventXid, events_) == nvml::kSuccess) {
        registered_.insert(g.handle);
      }
    }
  }
  return Status::Ok();
}

void NvmlDeviceBackend::DrainEvents() {
  if (events_ == nullptr) return;
  // Bounded so that a storm of events cannot hold the agent's loop.
  for (int n = 0; n < 4096; ++n) {
    nvml::EventData data{};
    if (api_.event_set_wait(events_, &data, 0) != nvml::kSuccess) break;
    if ((data.event_type & nvml::kEventXid) == 0) continue;
    XidEvent e;
    e.xid = static_cast<int>(data.event_data);
    e.time_ms = WallMs();
    for (Gpu& g : gpus_) {
      bool mine = g.handle == data.device;
      for (const MigHandle& m : g.migs) mine = mine || m.handle == data.device;
      if (!mine) continue;
      e.gpu = g.index;
      g.last_xid = e.xid;
      if (e.xid == 79) g.lost = true;  // fallen off the bus; NVML answers GPU_IS_LOST from now on
    }
    pending_.push_back(e);
  }
}

Result<Inventory> NvmlDeviceBackend::Discover() {
  RETURN_IF_ERROR(Enumerate());
  Inventory inv;
  Node& node = inv.node;
  node.name = NodeId(node_name_);
  node.nvlink_domain = node_name_;
  node.cpu = MilliCpu(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)) * 1000);
  node.memory = MemoryMib(static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<int64_t>(sysconf(_SC_PAGE_SIZE)) / kMib);
  node.nics = DiscoverNics(node.leaf);

  std::string driver, cuda;
  char buf[nvml::kDriverVersionBufferSize] = {};
  if (api_.system_get_driver_version != nullptr &&
      api_.system_get_driver_version(buf, sizeof(buf)) == nvml::kSuccess) {
    driver = buf;
  }
  int cuda_version = 0;
  if (api_.system_get_cuda_driver_version != nullptr &&
      api_.system_get_cuda_driver_version(&cuda_version) == nvml::kSuccess) {
    cuda = std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
  }

  const size_t n = gpus_.size();
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
  std::vector<nvml::PciInfo> pci(n);
  std::vector<bool> has_pci(n, false);
  for (size_t i = 0; i < n; ++i) {
    Gpu& g = gpus_[i];
    GpuDetails d;
    Device dev;
    d.index = g.index;
    d.uuid = dev.uuid = g.uuid;
    d.name = Text(g.handle, api_.device_get_name, nvml::kNameBufferSize);
    dev.model = GpuModelFromName(d.name);
    d.driver_version = driver;
    d.cuda_driver_version = cuda;
    if (api_.device_get_pci_info != nullptr && Ok(g, api_.device_get_pci_info(g.handle, &pci[i]))) {
      has_pci[i] = true;
      d.pci_bus_id = pci[i].bus_id;
    }
    int64_t total = -1, used = -1, free = -1;
    if (MemoryInfo(g, g.handle, &total, &used, &free)) dev.memory = MemoryMib(total / kMib);
    int ecc = 0, ecc_pending = 0;
    dev.ecc_enabled = api_.device_get_ecc_mode != nullptr &&
                      Ok(g, api_.device_get_ecc_mode(g.handle, &ecc, &ecc_pending)) &&
                      ecc == nvml::kFeatureEnabled;
    unsigned int mig_current = 0, mig_pending = 0;
    dev.mig_capable =
        api_.device_get_mig_mode != nullptr &&
        api_.device_get_mig_mode(g.handle, &mig_current, &mig_pending) == nvml::kSuccess;
    d.mig_mode = dev.mig_capable && mig_current == nvml::kMigEnabled;
    for (MigHandle& m : g.migs) {
      int64_t mtotal = -1, mused = -1, mfree = -1;
      if (MemoryInfo(g, m.handle, &mtotal, &mused, &mfree)) m.info.memory_mib = mtotal / kMib;
      nvml::DeviceAttributes attrs{};
      const bool has_attrs = api_.device_get_attributes != nullptr &&
                             api_.device_get_attributes(m.handle, &attrs) == nvml::kSuccess;
      m.info.profile = MigProfileOf(dev.model, dev.memory,
                                    Text(m.handle, api_.device_get_name, nvml::kNameBufferSize),
                                    has_attrs ? &attrs : nullptr, m.info.memory_mib);
      d.mig_instances.push_back(m.info);
      dev.mig_slices.push_back(m.info.profile);
    }
    std::vector<unsigned long> mask((std::max(cpus, 1024L) + 63) / 64, 0);
    if (api_.device_get_cpu_affinity != nullptr &&
        Ok(g, api_.device_get_cpu_affinity(g.handle, mask.size(), mask.data()))) {
      d.cpu_affinity = FormatCpuList(mask);
    }
    unsigned long nodes = 0;
    if (api_.device_get_memory_affinity != nullptr &&
        Ok(g, api_.device_get_memory_affinity(g.handle, 1, &nodes, nvml::kAffinityScopeNode)) &&
        nodes != 0) {
      dev.numa_node = __builtin_ctzl(nodes);
    } else if (has_pci[i]) {
      dev.numa_node = std::max(
          0, std::atoi(ReadFirstLine("/sys/bus/pci/devices/" + SysfsPciName(pci[i]) + "/numa_node")
                           .c_str()));
    }
    inv.gpus.push_back(std::move(d));
    node.devices.push_back(std::move(dev));
  }

  // NVLink: a link to a GPU makes it a peer; links to NVSwitches make every GPU on a switch a
  // peer of every other (HGX boards).
  std::vector<std::set<int>> peers(n);
  for (size_t i = 0; i < n && api_.device_get_nvlink_state != nullptr; ++i) {
    Gpu& g = gpus_[i];
    for (unsigned int link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
      int active = 0;
      const nvml::Return r = api_.device_get_nvlink_state(g.handle, link, &active);
      if (!Ok(g, r)) {
        if (r == nvml::kErrorNotSupported && link == 0) break;  // no NVLink on this GPU
        continue;
      }
      if (active != nvml::kFeatureEnabled) continue;
      ++inv.gpus[i].nvlink_links;
      int type = -1;
      if (api_.device_get_nvlink_remote_device_type != nullptr &&
          api_.device_get_nvlink_remote_device_type(g.handle, link, &type) == nvml::kSuccess &&
          type == nvml::kNvLinkDeviceTypeSwitch) {
        inv.gpus[i].nvswitch = true;
        continue;
      }
      nvml::PciInfo remote{};
      if (api_.device_get_nvlink_remote_pci_info == nullptr ||
          api_.device_get_nvlink_remote_pci_info(g.handle, link, &remote) != nvml::kSuccess) {
        continue;
      }
      bool found = false;
      for (size_t j = 0; j < n; ++j) {
        if (j != i && has_pci[j] && pci[j].domain == remote.domain && pci[j].bus == remote.bus &&
            pci[j].device == remote.device) {
          peers[i].insert(static_cast<int>(j));
          found = true;
        }
      }
      // Without the remote's type, a link that ends at no GPU of this node ends at a switch.
      if (!found && type != nvml::kNvLinkDeviceTypeGpu) inv.gpus[i].nvswitch = true;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j && inv.gpus[i].nvswitch && inv.gpus[j].nvswitch) {
        peers[i].insert(static_cast<int>(j));
      }
    }
    node.devices[i].nvlink_peers.assign(peers[i].begin(), peers[i].end());
  }

  // Topology matrix, and PCIe roots: GPUs under one PCIe switch (or a chain of them) share one.
  std::vector<int> root(n);
  std::iota(root.begin(), root.end(), 0);
  for (size_t i = 0; i < n; ++i) {
    inv.gpus[i].topology.assign(n, "");
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      int level = -1;
      const bool has_level = api_.device_get_topology_common_ancestor != nullptr &&
                             Ok(gpus_[i], api_.device_get_topology_common_ancestor(
                                              gpus_[i].handle, gpus_[j].handle, &level));
      if (has_level && level <= nvml::kTopologyMultiple && j < i) {
        root[i] = std::min(root[i], root[j]);
      }
      inv.gpus[i].topology[j] = peers[i].count(static_cast<int>(j)) != 0 ? "NVLINK"
                                : has_level ? nvml::TopologyLevelName(level)
                                            : "UNKNOWN";
    }
  }
  std::map<int, int> root_names;
  for (size_t i = 0; i < n; ++i) {
    const int id = root_names.emplace(root[i], static_cast<int>(root_names.size())).first->second;
    node.devices[i].pcie_root = "pcie" + std::to_string(id);
  }

  int numa = std::max(1, CountNumaNodes());
  for (const Device& dev : node.devices) numa = std::max(numa, dev.numa_node + 1);
  for (const Nic& nic : node.nics) numa = std::max(numa, nic.numa_node + 1);
  node.numa_nodes = numa;
  return inv;
}

Result<std::vector<GpuReading>> NvmlDeviceBackend::Read() {
  if (!enumerated_) RETURN_IF_ERROR(Enumerate());
  DrainEvents();
  std::vector<GpuReading> out;
  for (Gpu& g : gpus_) {
    GpuReading r;
    r.index = g.index;
    r.uuid = g.uuid;
    r.last_xid = g.last_xid;
    if (!g.lost) {
      nvml::Utilization util{};
      if (api_.device_get_utilization_rates != nullptr &&
          Ok(g, api_.device_get_utilization_rates(g.handle, &util))) {
        r.util_percent = static_cast<int32_t>(util.gpu);
      }
      int64_t total = -1, used = -1, free = -1;
      if (MemoryInfo(g, g.handle, &total, &used, &free)) {
        r.fb_used_mib = used / kMib;
        r.fb_free_mib = free / kMib;
      }
      unsigned int mw = 0, temp = 0;
      if (api_.device_get_power_usage != nullptr &&
          Ok(g, api_.device_get_power_usage(g.handle, &mw))) {
        r.power_watts = mw / 1000.0;
      }
      if (api_.device_get_temperature != nullptr &&
          Ok(g, api_.device_get_temperature(g.handle, nvml::kTemperatureGpu, &temp))) {
        r.temperature_c = static_cast<int32_t>(temp);
      }
      if (api_.device_get_total_ecc_errors != nullptr) {
        const struct {
          int type, counter;
          int64_t* field;
        } ecc[] = {{nvml::kMemoryErrorCorrected, nvml::kVolatileEcc, &r.ecc_sbe_volatile},
                   {nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc, &r.ecc_dbe_volatile},
                   {nvml::kMemoryErrorUncorrected, nvml::kAggregateEcc, &r.ecc_dbe_aggregate}};
        for (const auto& e : ecc) {
          unsigned long long v = 0;
          if (Ok(g, api_.device_get_total_ecc_errors(g.handle, e.type, e.counter, &v))) {
            *e.field = static_cast<int64_t>(v);
          }
        }
      }
    }
    if (g.lost) {
      out.push_back(
          GpuReading{.index = g.index, .uuid = g.uuid, .last_xid = g.last_xid, .lost = true});
      continue;
    }
    out.push_back(r);
    for (const MigHandle& m : g.migs) {
      GpuReading mr{
          .index = g.index, .uuid = g.uuid, .mig_gpu_instance_id = m.info.gpu_instance_id};
      int64_t total = -1, used = -1, free = -1;
      if (MemoryInfo(g, m.handle, &total, &used, &free)) {
        mr.fb_used_mib = used / kMib;
        mr.fb_free_mib = free / kMib;
      }
      out.push_back(mr);
    }
  }
  return out;
}

}  // namespace

std::string GpuModelFromName(const std::string& product_name) {
  std::string name = product_name.substr(0, product_name.find(" MIG "));
  for (const char* prefix : {"NVIDIA ", "Tesla ", "GeForce ", "Quadro "}) {
    const std::string p = prefix;
    if (name.compare(0, p.size(), p) == 0) name = name.substr(p.size());
  }
  std::string model;
  for (char c : name) {
    if (c == ' ' || c == '-') {
      // "RTX 4090", "RTX A6000": the family name alone says too little.
      if (model == "RTX" && c == ' ') continue;
      break;
    }
    model += c;
  }
  return model.empty() ? product_name : model;
}

Result<std::unique_ptr<DeviceBackend>> OpenNvmlDeviceBackend(const std::string& node_name,
                                                             const std::string& library_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<nvml::Library> lib, nvml::Library::Open(library_path));
  auto backend = std::make_unique<NvmlDeviceBackend>(std::move(lib), node_name);
  return std::unique_ptr<DeviceBackend>(std::move(backend));
}

Result<std::unique_ptr<DeviceBackend>> OpenDeviceBackend(const std::string& spec,
                                                         const std::string& node_name) {
  if (spec == "nvml") return OpenNvmlDeviceBackend(node_name);
  if (spec.compare(0, 4, "sim:") == 0 && spec.size() > 4) {
    ASSIGN_OR_RETURN(std::unique_ptr<SimDeviceBackend> sim,
                     OpenSimDeviceBackend(spec.substr(4), node_name, &WallMs));
    return std::unique_ptr<DeviceBackend>(std::move(sim));
  }
  return InvalidArgument("devices '" + spec + "': expected nvml or sim:FILE");
}

}  // namespace fabrica
