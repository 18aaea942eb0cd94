// A simulated node's GPUs for `--devices sim:FILE`: the inventory comes from the fleet file, the
// readings from settable busy fractions, and the faults from Inject and the file's `faults:`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>

#include "agent/device_backend.h"

namespace fabrica {
namespace {

// Bus numbers of the eight GPUs on an HGX H100/H200 baseboard, as the driver reports them.
constexpr int kHgxBuses[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

std::string PciBusId(int index) {
  const int bus = index < 8 ? kHgxBuses[index] : 0x10 + index;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "00000000:%02X:00.0", bus & 0xff);
  return buf;
}

// Board power in watts: at full load, and idle as a tenth of it.
double BoardPowerWatts(const std::string& model) {
  if (model == "H100" || model == "H200") return 700;
  if (model == "B200") return 1000;
  if (model == "GB200") return 1200;
  if (model == "A100") return 400;
  return 300;
}

struct SimMig {
  MigInstanceInfo info;
  int32_t busy_permille = -1;  // -1: the GPU's
  int64_t used_mib = 0;
};

struct SimGpu {
  GpuDetails details;
  int32_t busy_permille = 0;
  int64_t used_mib = 0;
  int32_t last_xid = 0;
  bool lost = false;
  int64_t ecc_sbe = 0, ecc_dbe = 0, ecc_dbe_aggregate = 0;
  std::vector<SimMig> migs;
};

class SimBackend : public SimDeviceBackend {
 public:
  SimBackend(const Node& node, std::vector<FaultInjection> schedule,
             std::function<int64_t()> now_ms);

  std::string Kind() const override { return "sim"; }
  Result<Inventory> Discover() override {
    ApplyDueFaults();
    Inventory inv{node_, {}};
    for (const SimGpu& g : gpus_) inv.gpus.push_back(g.details);
    return inv;
  }
  Result<std::vector<GpuReading>> Read() override;
  std::vector<XidEvent> PollXids() override {
    ApplyDueFaults();
    return std::exchange(pending_, {});
  }
  Status Inject(const FaultInjection& fault, int64_t now_ms) override;
  Status SetBusy(const std::string& uuid, int32_t permille) override {
    permille = std::clamp<int32_t>(permille, 0, 1000);
    return ForUuid(
        uuid, [&](SimGpu& g) { g.busy_permille = permille; },
        [&](SimMig& m) { m.busy_permille = permille; });
  }
  Status SetMemoryUsed(const std::string& uuid, int64_t mib) override {
    return ForUuid(
        uuid, [&](SimGpu& g) { g.used_mib = std::clamp<int64_t>(mib, 0, MemoryOf(g)); },
        [&](SimMig& m) { m.used_mib = std::clamp<int64_t>(mib, 0, m.info.memory_mib); });
  }
  bool Killed() override {
    ApplyDueFaults();
    return killed_;
  }
  Status Repair(int gpu) override {
    if (gpu < -1 || gpu >= static_cast<int>(gpus_.size())) {
      return InvalidArgument("gpu " + std::to_string(gpu) + ": node " + node_.name.str() + " has " +
                             std::to_string(gpus_.size()) + " GPUs");
    }
    for (SimGpu& g : gpus_) {
      if (gpu >= 0 && g.details.index != gpu) continue;
      g.lost = false;
      g.ecc_sbe = 0;
      g.ecc_dbe = 0;
      g.last_xid = 0;
    }
    return Status::Ok();
  }

 private:
  int64_t MemoryOf(const SimGpu& g) const { return node_.devices[g.details.index].memory.value(); }
  template <typename OnGpu, typename OnMig>
  Status ForUuid(const std::string& uuid, OnGpu on_gpu, OnMig on_mig) {
    for (SimGpu& g : gpus_) {
      if (g.details.uuid == uuid) {
        on_gpu(g);
        return Status::Ok();
      }
      for (SimMig& m : g.migs) {
        if (m.info.uuid == uuid) {
          on_mig(m);
          return Status::Ok();
        }
      }
    }
    return NotFound("node " + node_.name.str() + " has no GPU or MIG instance " + uuid);
  }
  // Fires the scheduled faults whose time has come, stamped with their scheduled time.
  void ApplyDueFaults() {
    const int64_t now = now_ms_();
    while (next_fault_ < schedule_.size() && start_ms_ + schedule_[next_fault_].at_ms <= now) {
      const FaultInjection& f = schedule_[next_fault_++];
      (void)Inject(f, start_ms_ + f.at_ms);  // checked against the fleet when it was parsed
    }
  }

  Node node_;
  std::vector<SimGpu> gpus_;
  std::vector<FaultInjection> schedule_;  // this node's, by at_ms
  size_t next_fault_ = 0;
  std::function<int64_t()> now_ms_;
  int64_t start_ms_;
  std::vector<XidEvent> pending_;
  bool killed_ = false;
};

SimBackend::SimBackend(const Node& node, std::vector<FaultInjection> schedule,
                       std::function<int64_t()> now_ms)
    : node_(node), schedule_(std::move(schedule)), now_ms_(std::move(now_ms)) {
  start_ms_ = now_ms_();
  std::stable_sort(
      schedule_.begin(), schedule_.end(),
      [](const FaultInjection& a, const FaultInjection& b) { return a.at_ms < b.at_ms; });
  const int n = node_.gpu_count();
  const int64_t cores = std::max<int64_t>(1, node_.cpu.value() / 1000);
  for (int i = 0; i < n; ++i) {
    const Device& dev = node_.devices[i];
    SimGpu g;
    GpuDetails& d = g.details;
    d.index = i;
    d.uuid = dev.uuid;
    d.name = "NVIDIA " + dev.model;
    d.pci_bus_id = PciBusId(i);
    d.mig_mode = dev.mig_enabled();
    d.driver_version = "570.133.20";
    d.cuda_driver_version = "12.8";
    const int64_t lo = dev.numa_node * cores / node_.numa_nodes;
    const int64_t hi = (dev.numa_node + 1) * cores / node_.numa_nodes - 1;
    d.cpu_affinity = hi > lo ? std::to_string(lo) + "-" + std::to_string(hi) : std::to_string(lo);
    d.nvlink_links = dev.nvlink_peers.empty() ? 0 : 18;  // NVLink4 on HGX H100/H200
    d.nvswitch = dev.nvlink_peers.size() > 1;
    d.topology.assign(n, "");
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const bool nvlink =
          std::find(dev.nvlink_peers.begin(), dev.nvlink_peers.end(), j) != dev.nvlink_peers.end();
      d.topology[j] = nvlink                                        ? "NVLINK"
                      : node_.devices[j].numa_node == dev.numa_node ? "NODE"
                                                                    : "SYSTEM";
    }
    const std::string tail = dev.uuid.compare(0, 4, "GPU-") == 0 ? dev.uuid.substr(4) : dev.uuid;
    for (size_t k = 0; k < dev.mig_slices.size(); ++k) {
      SimMig m;
      m.info.gpu_instance_id = static_cast<int>(k) + 1;
      m.info.compute_instance_id = 0;
      m.info.profile = dev.mig_slices[k];
      m.info.uuid = "MIG-" + tail + "-" + std::to_string(k + 1);
      const MigProfile* p = FindMigProfile(dev.model, dev.mig_slices[k], dev.memory);
      m.info.memory_mib = p != nullptr ? p->memory.value() : 0;
      d.mig_instances.push_back(m.info);
      g.migs.push_back(m);
    }
    gpus_.push_back(std::move(g));
  }
}

Status SimBackend::Inject(const FaultInjection& fault, int64_t now_ms) {
  if (!fault.node.str().empty() && fault.node != node_.name) {
    return InvalidArgument("fault for node " + fault.node.str() + ", this is " + node_.name.str());
  }
  if (fault.kill) {
    killed_ = true;
    return Status::Ok();
  }
  if (fault.gpu < 0 || fault.gpu >= static_cast<int>(gpus_.size())) {
    return InvalidArgument("gpu " + std::to_string(fault.gpu) + ": node " + node_.name.str() +
                           " has " + std::to_string(gpus_.size()) + " GPUs");
  }
  SimGpu& g = gpus_[fault.gpu];
  if (fault.xid > 0) {
    pending_.push_back(XidEvent{fault.gpu, fault.xid, now_ms});
    g.last_xid = fault.xid;
    if (fault.xid == 79) g.lost = true;
  }
  if (fault.ecc_double_bit >= 0) {
    g.ecc_dbe_aggregate += std::max<int64_t>(0, fault.ecc_double_bit - g.ecc_dbe);
    g.ecc_dbe = fault.ecc_double_bit;
  }
  return Status::Ok();
}

Result<std::vector<GpuReading>> SimBackend::Read() {
  ApplyDueFaults();
  std::vector<GpuReading> out;
  for (const SimGpu& g : gpus_) {
    GpuReading r;
    r.index = g.details.index;
    r.uuid = g.details.uuid;
    r.last_xid = g.last_xid;
    if (g.lost) {
      r.lost = true;
      out.push_back(r);
      continue;
    }
    const std::string& model = node_.devices[r.index].model;
    int64_t used = g.used_mib;
    int64_t busy_sum = g.busy_permille;
    for (const SimMig& m : g.migs) {
      used += m.used_mib;
      busy_sum += m.busy_permille >= 0 ? m.busy_permille : g.busy_permille;
    }
    // A MIG GPU warms and draws with the mean of its instances.
    const int32_t busy = static_cast<int32_t>(busy_sum / static_cast<int64_t>(1 + g.migs.size()));
    used = std::min(used, MemoryOf(g));
    if (g.migs.empty()) {  // as with DCGM, no device-level utilization in MIG mode
      r.util_percent = (g.busy_permille + 5) / 10;
      r.gr_engine_active = g.busy_permille / 1000.0;
    }
    r.fb_used_mib = used;
    r.fb_free_mib = MemoryOf(g) - used;
    const double watts = BoardPowerWatts(model);
    r.power_watts = std::round((0.1 * watts + 0.9 * watts * busy / 1000.0) * 1000) / 1000;
    r.temperature_c = 35 + 25 * busy / 1000;
    r.ecc_sbe_volatile = g.ecc_sbe;
    r.ecc_dbe_volatile = g.ecc_dbe;
    r.ecc_dbe_aggregate = g.ecc_dbe_aggregate;
    out.push_back(r);
    for (const SimMig& m : g.migs) {
      GpuReading mr{
          .index = r.index, .uuid = r.uuid, .mig_gpu_instance_id = m.info.gpu_instance_id};
      mr.gr_engine_active = (m.busy_permille >= 0 ? m.busy_permille : g.busy_permille) / 1000.0;
      mr.fb_used_mib = m.used_mib;
      mr.fb_free_mib = m.info.memory_mib - m.used_mib;
      out.push_back(mr);
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<SimDeviceBackend>> NewSimDeviceBackend(const Fleet& fleet,
                                                              const std::string& node_name,
                                                              std::function<int64_t()> now_ms) {
  const Node* node = fleet.Find(NodeId(node_name));
  if (node == nullptr) return NotFound("no node '" + node_name + "' in the fleet");
  std::vector<FaultInjection> schedule;
  for (const FaultInjection& f : fleet.faults) {
    if (f.node == node->name) schedule.push_back(f);
  }
  return std::unique_ptr<SimDeviceBackend>(
      std::make_unique<SimBackend>(*node, std::move(schedule), std::move(now_ms)));
}

Result<std::unique_ptr<SimDeviceBackend>> OpenSimDeviceBackend(const std::string& fleet_file,
                                                               const std::string& node_name,
                                                               std::function<int64_t()> now_ms) {
  std::ifstream in(fleet_file, std::ios::binary);
  if (!in) return NotFound("cannot open fleet file '" + fleet_file + "'");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSIGN_OR_RETURN(Fleet fleet, ParseFleetYaml(text, fleet_file));
  auto backend = NewSimDeviceBackend(fleet, node_name, std::move(now_ms));
  if (!backend.ok()) return backend.status().WithContext(fleet_file);
  return backend;
}

}  // namespace fabrica
