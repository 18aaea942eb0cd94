// The device layer (issue 5): the NVML backend end to end against a fake libnvidia-ml.so.1
// (tests/fakenvml), the simulated backend with an injected clock, and the dcgm-exporter page read
// back by the meter's parser.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../test_util.h"
#include "agent/dcgm_exporter.h"
#include "agent/device_backend.h"
#include "meter/dcgm.h"

namespace fabrica {
namespace {

// The fake's test controls, resolved from the same library the backend loads.
class FakeNvml {
 public:
  FakeNvml() : handle_(dlopen(FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL)) {
    CHECK(handle_ != nullptr);
  }
  ~FakeNvml() { dlclose(handle_); }
  void LoseGpu(int index) { Fn<void (*)(int)>("fake_nvml_lose_gpu")(index); }
  void PushXid(int index, unsigned long long xid) {
    Fn<void (*)(int, unsigned long long)>("fake_nvml_push_xid")(index, xid);
  }
  void SetNvLink(bool up) { Fn<void (*)(int)>("fake_nvml_set_nvlink")(up ? 1 : 0); }
  int OpenSessions() { return Fn<int (*)()>("fake_nvml_open_sessions")(); }

 private:
  template <typename F>
  F Fn(const char* name) {
    void* sym = dlsym(handle_, name);
    CHECK(sym != nullptr);
    return reinterpret_cast<F>(sym);
  }
  void* handle_;
};

std::unique_ptr<DeviceBackend> OpenFake() {
  auto b = OpenNvmlDeviceBackend("gpu-node-1", FAKE_NVML_LIBRARY);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(b).value() : nullptr;
}

template <typename T>
T Ok(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  CHECK(r.ok());
  return std::move(r).value();
}

const GpuReading* Row(const std::vector<GpuReading>& rs, int gpu, int gi = -1) {
  for (const GpuReading& r : rs) {
    if (r.index == gpu && r.mig_gpu_instance_id == gi) return &r;
  }
  return nullptr;
}

constexpr const char* kUuid0 = "GPU-6f2a1c55-0b1e-4b61-9d4f-6b3b0a0e0001";
constexpr const char* kUuid1 = "GPU-6f2a1c55-0b1e-4b61-9d4f-6b3b0a0e0002";

TEST(NvmlBackend, DiscoversGpusMigNvLinkAndPlacement) {
  FakeNvml fake;
  auto backend = OpenFake();
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->Kind(), "nvml");
  Inventory inv = Ok(backend->Discover());
  const Node& node = inv.node;
  EXPECT_EQ(node.name.str(), "gpu-node-1");
  EXPECT_GT(node.cpu.value(), 0);
  EXPECT_GT(node.memory.value(), 0);
  EXPECT_GE(node.numa_nodes, 2);
  ASSERT_EQ(node.gpu_count(), 2);
  ASSERT_EQ(inv.gpus.size(), 2u);

  const Device& d0 = node.devices[0];
  const GpuDetails& g0 = inv.gpus[0];
  EXPECT_EQ(d0.uuid, kUuid0);
  EXPECT_EQ(d0.model, "H200");
  EXPECT_EQ(d0.memory.value(), 143771);
  EXPECT_TRUE(d0.ecc_enabled);
  EXPECT_TRUE(d0.mig_capable);
  EXPECT_TRUE(d0.mig_slices.empty());
  EXPECT_EQ(d0.numa_node, 0);
  EXPECT_EQ(d0.nvlink_peers, std::vector<int>{1});
  EXPECT_EQ(g0.name, "NVIDIA H200");
  EXPECT_EQ(g0.pci_bus_id, "00000000:18:00.0");
  EXPECT_FALSE(g0.mig_mode);
  EXPECT_EQ(g0.cpu_affinity, "0-3,8");
  EXPECT_EQ(g0.nvlink_links, 4);
  EXPECT_FALSE(g0.nvswitch);
  EXPECT_EQ(g0.topology, (std::vector<std::string>{"", "NVLINK"}));
  EXPECT_EQ(g0.driver_version, "570.133.20");
  EXPECT_EQ(g0.cuda_driver_version, "12.8");

  const Device& d1 = node.devices[1];
  const GpuDetails& g1 = inv.gpus[1];
  EXPECT_EQ(d1.uuid, kUuid1);
  EXPECT_EQ(d1.numa_node, 1);
  EXPECT_EQ(g1.cpu_affinity, "64-71");
  EXPECT_EQ(d1.nvlink_peers, std::vector<int>{0});
  EXPECT_TRUE(g1.mig_mode);
  EXPECT_EQ(d1.mig_slices, (std::vector<std::string>{"3g.71gb", "1g.18gb"}));
  ASSERT_EQ(g1.mig_instances.size(), 2u);
  EXPECT_EQ(g1.mig_instances[0].gpu_instance_id, 1);
  EXPECT_EQ(g1.mig_instances[0].compute_instance_id, 0);
  EXPECT_EQ(g1.mig_instances[0].uuid, "MIG-2b0c7e4a-93d1-5c6e-8a47-1f0e5d3c0001");
  EXPECT_EQ(g1.mig_instances[0].memory_mib, 71424);
  EXPECT_EQ(g1.mig_instances[1].gpu_instance_id, 5);
  EXPECT_EQ(g1.mig_instances[1].profile, "1g.18gb");
  // Different sockets: different PCIe roots.
  EXPECT_NE(d0.pcie_root, d1.pcie_root);

  // What NVML found is a valid node of the one fleet schema.
  Fleet fleet;
  fleet.nodes.push_back(node);
  EXPECT_TRUE(ValidateFleet(fleet).ok()) << ValidateFleet(fleet).ToString();
}

TEST(NvmlBackend, ReadsTelemetryPerGpuAndMigInstance) {
  FakeNvml fake;
  auto backend = OpenFake();
  ASSERT_NE(backend, nullptr);
  std::vector<GpuReading> rs = Ok(backend->Read());
  ASSERT_EQ(rs.size(), 4u);  // two GPUs, two MIG instances
  const GpuReading* r0 = Row(rs, 0);
  ASSERT_NE(r0, nullptr);
  EXPECT_EQ(r0->uuid, kUuid0);
  EXPECT_EQ(r0->util_percent, 37);
  EXPECT_EQ(r0->fb_used_mib, 1024);
  EXPECT_EQ(r0->fb_free_mib, 143771 - 1024 - 512);  // v2: reserved memory is neither
  EXPECT_DOUBLE_EQ(r0->power_watts, 250.123);
  EXPECT_EQ(r0->temperature_c, 41);
  EXPECT_EQ(r0->ecc_sbe_volatile, 3);
  EXPECT_EQ(r0->ecc_dbe_volatile, 0);
  EXPECT_EQ(r0->last_xid, 0);
  EXPECT_FALSE(r0->lost);

  const GpuReading* r1 = Row(rs, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->util_percent, -1);  // NVML has no device utilization in MIG mode
  EXPECT_EQ(r1->ecc_sbe_volatile, 7);
  EXPECT_EQ(r1->ecc_dbe_volatile, 2);
  EXPECT_EQ(r1->ecc_dbe_aggregate, 5);
  EXPECT_EQ(r1->last_xid, 48);  // the XID waiting in the event set

  const GpuReading* m1 = Row(rs, 1, 1);
  ASSERT_NE(m1, nullptr);
  EXPECT_EQ(m1->uuid, kUuid1);
  EXPECT_EQ(m1->fb_used_mib, 2048);
  EXPECT_EQ(m1->fb_free_mib, 71424 - 2048);
  EXPECT_EQ(m1->temperature_c, -1);
  const GpuReading* m5 = Row(rs, 1, 5);
  ASSERT_NE(m5, nullptr);
  EXPECT_EQ(m5->fb_used_mib, 0);

  // Read took the event off NVML's queue; PollXids still hands it over, once.
  std::vector<XidEvent> xids = backend->PollXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].gpu, 1);
  EXPECT_EQ(xids[0].xid, 48);
  EXPECT_GT(xids[0].time_ms, 0);
  EXPECT_TRUE(backend->PollXids().empty());
  fake.PushXid(0, 31);
  xids = backend->PollXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].gpu, 0);
  EXPECT_EQ(xids[0].xid, 31);
}

TEST(NvmlBackend, LostGpuReadsLostAndTheOthersGoOn) {
  FakeNvml fake;
  auto backend = OpenFake();
  ASSERT_NE(backend, nullptr);
  ASSERT_TRUE(backend->Discover().ok());
  EXPECT_EQ(backend->PollXids().size(), 1u);  // the fake's XID 48
  fake.LoseGpu(0);
  std::vector<XidEvent> xids = backend->PollXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].xid, 79);
  std::vector<GpuReading> rs = Ok(backend->Read());
  const GpuReading* r0 = Row(rs, 0);
  ASSERT_NE(r0, nullptr);
  EXPECT_TRUE(r0->lost);
  EXPECT_EQ(r0->last_xid, 79);
  EXPECT_EQ(r0->util_percent, -1);
  EXPECT_EQ(r0->fb_used_mib, -1);
  const GpuReading* r1 = Row(rs, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_FALSE(r1->lost);
  EXPECT_EQ(r1->temperature_c, 55);
  // Discovery still lists the lost GPU under its UUID.
  Inventory inv = Ok(backend->Discover());
  ASSERT_EQ(inv.gpus.size(), 2u);
  EXPECT_EQ(inv.gpus[0].uuid, kUuid0);
  rs = Ok(backend->Read());
  EXPECT_TRUE(Row(rs, 0)->lost);
}

TEST(NvmlBackend, WithoutNvLinkTopologyIsThePcieLevel) {
  FakeNvml fake;
  auto backend = OpenFake();
  ASSERT_NE(backend, nullptr);
  fake.SetNvLink(false);
  Inventory inv = Ok(backend->Discover());
  EXPECT_TRUE(inv.node.devices[0].nvlink_peers.empty());
  EXPECT_EQ(inv.gpus[0].nvlink_links, 0);
  EXPECT_EQ(inv.gpus[0].topology, (std::vector<std::string>{"", "SYSTEM"}));
  EXPECT_EQ(inv.gpus[1].topology, (std::vector<std::string>{"SYSTEM", ""}));
}

TEST(NvmlBackend, RefusesInjectionAndShutsDownNvml) {
  FakeNvml fake;
  {
    auto backend = OpenFake();
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(fake.OpenSessions(), 1);
    FaultInjection f;
    f.xid = 79;
    f.gpu = 0;
    EXPECT_EQ(backend->Inject(f, 1).code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(fake.OpenSessions(), 0);
}

TEST(NvmlBackend, MissingLibraryIsNamed) {
  auto b = OpenNvmlDeviceBackend("n", "/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("NVML library not found"), std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);

  // OpenDeviceBackend("nvml") takes the library from FABRICA_NVML_LIBRARY.
  const char* old = getenv("FABRICA_NVML_LIBRARY");
  const std::string saved = old != nullptr ? old : "";
  setenv("FABRICA_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  EXPECT_EQ(OpenDeviceBackend("nvml", "n").status().code(), StatusCode::kUnavailable);
  setenv("FABRICA_NVML_LIBRARY", FAKE_NVML_LIBRARY, 1);
  auto fake = OpenDeviceBackend("nvml", "n");
  EXPECT_TRUE(fake.ok()) << fake.status().ToString();
  if (old != nullptr) {
    setenv("FABRICA_NVML_LIBRARY", saved.c_str(), 1);
  } else {
    unsetenv("FABRICA_NVML_LIBRARY");
  }
  EXPECT_EQ(OpenDeviceBackend("cuda", "n").status().code(), StatusCode::kInvalidArgument);
}

TEST(GpuModelFromName, ShortNamesOfDriverProductNames) {
  EXPECT_EQ(GpuModelFromName("NVIDIA H200"), "H200");
  EXPECT_EQ(GpuModelFromName("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(GpuModelFromName("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(GpuModelFromName("Tesla V100-SXM2-32GB"), "V100");
  EXPECT_EQ(GpuModelFromName("NVIDIA GB200"), "GB200");
  EXPECT_EQ(GpuModelFromName("NVIDIA H200 MIG 1g.18gb"), "H200");
  EXPECT_EQ(GpuModelFromName("NVIDIA GeForce RTX 4090"), "RTX4090");
}

constexpr const char* kFleet = R"(
nodes:
  - name: hgx-1
    cpu: 96
    memory: 1Ti
    numaNodes: 2
    gpus: {count: 4, model: H200, memory: 141Gi}
  - name: mig-1
    cpu: 32
    memory: 256Gi
    devices:
      - {model: H100, memory: 80Gi, mig: [3g.40gb, 1g.10gb]}
      - {model: H100, memory: 80Gi}
faults:
  - {node: hgx-1, atSeconds: 60, xid: 79, gpu: 2}
  - {node: hgx-1, atSeconds: 30, gpu: 1, eccDoubleBit: 4}
  - {node: mig-1, atSeconds: 10, kill: true}
)";

struct SimFixture {
  int64_t now = 1'000'000;
  Fleet fleet = Ok(ParseFleetYaml(kFleet, "fleet.yaml"));
  std::unique_ptr<SimDeviceBackend> Open(const std::string& node) {
    return Ok(NewSimDeviceBackend(fleet, node, [this] { return now; }));
  }
};

TEST(SimBackend, InventoryIsTheFleetNode) {
  SimFixture s;
  auto sim = s.Open("hgx-1");
  EXPECT_EQ(sim->Kind(), "sim");
  Inventory inv = Ok(sim->Discover());
  const Node& want = *s.fleet.Find(NodeId("hgx-1"));
  ASSERT_EQ(inv.node.gpu_count(), 4);
  EXPECT_EQ(inv.node.name, want.name);
  EXPECT_EQ(inv.node.cpu, want.cpu);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(inv.node.devices[i].uuid, want.devices[i].uuid);
    EXPECT_EQ(inv.node.devices[i].nvlink_peers, want.devices[i].nvlink_peers);
    EXPECT_EQ(inv.gpus[i].uuid, want.devices[i].uuid);
    EXPECT_EQ(inv.gpus[i].name, "NVIDIA H200");
  }
  EXPECT_EQ(inv.gpus[0].pci_bus_id, "00000000:18:00.0");
  EXPECT_NE(inv.gpus[1].pci_bus_id, inv.gpus[0].pci_bus_id);
  EXPECT_EQ(inv.gpus[0].topology, (std::vector<std::string>{"", "NVLINK", "NVLINK", "NVLINK"}));
  EXPECT_EQ(inv.gpus[0].cpu_affinity, "0-47");
  EXPECT_EQ(inv.gpus[3].cpu_affinity, "48-95");

  auto mig = s.Open("mig-1");
  inv = Ok(mig->Discover());
  EXPECT_EQ(inv.gpus[0].topology, (std::vector<std::string>{"", "NODE"}));
  EXPECT_TRUE(inv.gpus[0].mig_mode);
  ASSERT_EQ(inv.gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(inv.gpus[0].mig_instances[0].profile, "3g.40gb");
  EXPECT_EQ(inv.gpus[0].mig_instances[0].memory_mib, 40 * 1024);
  EXPECT_EQ(GpuModelFromName(inv.gpus[1].name), "H100");

  EXPECT_EQ(NewSimDeviceBackend(s.fleet, "nope", [] { return 0; }).status().code(),
            StatusCode::kNotFound);
}

TEST(SimBackend, ScheduledFaultsFireAtTheirTime) {
  SimFixture s;
  const int64_t start = s.now;
  auto sim = s.Open("hgx-1");
  s.now = start + 29'999;
  std::vector<GpuReading> rs = Ok(sim->Read());
  EXPECT_EQ(Row(rs, 1)->ecc_dbe_volatile, 0);
  EXPECT_TRUE(sim->PollXids().empty());

  s.now = start + 30'000;
  rs = Ok(sim->Read());
  EXPECT_EQ(Row(rs, 1)->ecc_dbe_volatile, 4);
  EXPECT_EQ(Row(rs, 1)->ecc_dbe_aggregate, 4);
  EXPECT_TRUE(sim->PollXids().empty());

  s.now = start + 75'000;  // past the XID 79 at 60 s
  std::vector<XidEvent> xids = sim->PollXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].gpu, 2);
  EXPECT_EQ(xids[0].xid, 79);
  EXPECT_EQ(xids[0].time_ms, start + 60'000);
  rs = Ok(sim->Read());
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_TRUE(Row(rs, 2)->lost);
  EXPECT_EQ(Row(rs, 2)->last_xid, 79);
  EXPECT_EQ(Row(rs, 2)->temperature_c, -1);
  EXPECT_FALSE(Row(rs, 0)->lost);
  EXPECT_FALSE(sim->Killed());

  // A GPU reset brings the lost GPU back and clears the volatile ECC count, not the lifetime one.
  ASSERT_TRUE(sim->Repair(2).ok());
  ASSERT_TRUE(sim->Repair(-1).ok());
  rs = Ok(sim->Read());
  EXPECT_FALSE(Row(rs, 2)->lost);
  EXPECT_EQ(Row(rs, 2)->last_xid, 0);
  EXPECT_EQ(Row(rs, 1)->ecc_dbe_volatile, 0);
  EXPECT_EQ(Row(rs, 1)->ecc_dbe_aggregate, 4);
  EXPECT_EQ(sim->Repair(4).code(), StatusCode::kInvalidArgument);

  auto mig = s.Open("mig-1");
  s.now += 9'999;
  EXPECT_FALSE(mig->Killed());
  s.now += 1;
  EXPECT_TRUE(mig->Killed());
}

TEST(SimBackend, BusyDrivesReadingsAndInjectedFaults) {
  SimFixture s;
  auto sim = s.Open("hgx-1");
  const std::string uuid0 = s.fleet.Find(NodeId("hgx-1"))->devices[0].uuid;
  ASSERT_TRUE(sim->SetBusy(uuid0, 500).ok());
  ASSERT_TRUE(sim->SetMemoryUsed(uuid0, 10 * 1024).ok());
  std::vector<GpuReading> rs = Ok(sim->Read());
  const GpuReading* r0 = Row(rs, 0);
  EXPECT_EQ(r0->util_percent, 50);
  EXPECT_DOUBLE_EQ(r0->gr_engine_active, 0.5);
  EXPECT_EQ(r0->fb_used_mib, 10 * 1024);
  EXPECT_EQ(r0->fb_free_mib, 131 * 1024);
  EXPECT_EQ(r0->temperature_c, 47);
  EXPECT_DOUBLE_EQ(r0->power_watts, 385);
  const GpuReading* r1 = Row(rs, 1);
  EXPECT_EQ(r1->util_percent, 0);
  EXPECT_EQ(r1->temperature_c, 35);
  EXPECT_EQ(sim->SetBusy("GPU-nope", 1).code(), StatusCode::kNotFound);

  FaultInjection f;
  f.gpu = 3;
  f.xid = 48;
  ASSERT_TRUE(sim->Inject(f, 1234).ok());
  f.xid = 0;
  f.ecc_double_bit = 2;
  ASSERT_TRUE(sim->Inject(f, 1235).ok());
  std::vector<XidEvent> xids = sim->PollXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].time_ms, 1234);
  rs = Ok(sim->Read());
  EXPECT_EQ(Row(rs, 3)->last_xid, 48);
  EXPECT_EQ(Row(rs, 3)->ecc_dbe_volatile, 2);
  EXPECT_FALSE(Row(rs, 3)->lost);
  f.gpu = 4;
  EXPECT_EQ(sim->Inject(f, 1).code(), StatusCode::kInvalidArgument);

  // MIG instances read on their own rows; an instance's busy overrides its GPU's.
  auto mig = s.Open("mig-1");
  Inventory inv = Ok(mig->Discover());
  ASSERT_TRUE(mig->SetBusy(inv.gpus[0].mig_instances[1].uuid, 1000).ok());
  rs = Ok(mig->Read());
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(Row(rs, 0)->util_percent, -1);
  EXPECT_DOUBLE_EQ(Row(rs, 0, 1)->gr_engine_active, 0);
  EXPECT_DOUBLE_EQ(Row(rs, 0, 2)->gr_engine_active, 1);
  EXPECT_EQ(Row(rs, 0, 2)->fb_free_mib, 10 * 1024);
}

TEST(SimBackend, OpensFromAFleetFile) {
  test::TempDir dir;
  const std::string path = dir.File("fleet.yaml");
  std::ofstream(path) << kFleet;
  auto b = OpenDeviceBackend("sim:" + path, "hgx-1");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->Kind(), "sim");
  EXPECT_EQ(Ok((*b)->Discover()).node.gpu_count(), 4);
  auto missing = OpenDeviceBackend("sim:" + path, "hgx-9");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
  EXPECT_EQ(OpenDeviceBackend("sim:" + dir.File("none.yaml"), "x").status().code(),
            StatusCode::kNotFound);
}

// The page reads back through the meter's parser into the values it was rendered from.
void ExpectRoundTrip(const Inventory& inv, const std::vector<GpuReading>& rs,
                     const DeviceLabels& labels) {
  const std::string page = RenderDcgmExporterPage(inv, rs, labels);
  std::vector<DeviceGauges> gauges = Ok(ParseDcgmGauges(page, "other-node"));
  std::map<std::string, const DeviceGauges*> by_device;
  for (const DeviceGauges& g : gauges) by_device[g.device_uuid] = &g;
  size_t live = 0;
  for (const GpuReading& r : rs) {
    const std::string key =
        r.mig_gpu_instance_id < 0 ? r.uuid : r.uuid + "/" + std::to_string(r.mig_gpu_instance_id);
    if (r.lost) {
      EXPECT_EQ(by_device.count(key), 0u) << key;
      EXPECT_EQ(page.find(r.uuid), std::string::npos) << "lost GPU on the page";
      continue;
    }
    ++live;
    ASSERT_EQ(by_device.count(key), 1u) << key << "\n" << page;
    const DeviceGauges& g = *by_device[key];
    EXPECT_EQ(g.node, inv.node.name.str());
    EXPECT_EQ(g.gpu_index, r.index);
    EXPECT_EQ(g.model, inv.gpus[r.index].name);
    const std::map<std::string, double> want = {
        {"DCGM_FI_DEV_GPU_UTIL", r.util_percent},
        {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", r.gr_engine_active},
        {"DCGM_FI_DEV_FB_USED", r.fb_used_mib},
        {"DCGM_FI_DEV_FB_FREE", r.fb_free_mib},
        {"DCGM_FI_DEV_POWER_USAGE", r.power_watts},
        {"DCGM_FI_DEV_GPU_TEMP", r.temperature_c},
        {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", r.ecc_sbe_volatile},
        {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", r.ecc_dbe_volatile},
        {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", r.ecc_dbe_aggregate},
        {"DCGM_FI_DEV_XID_ERRORS", r.mig_gpu_instance_id < 0 ? r.last_xid : -1}};
    for (const auto& [field, value] : want) {
      if (value < 0) {
        EXPECT_EQ(g.values.count(field), 0u) << key << " " << field;
      } else {
        ASSERT_EQ(g.values.count(field), 1u) << key << " " << field;
        EXPECT_DOUBLE_EQ(g.values.at(field), value) << key << " " << field;
      }
    }
  }
  EXPECT_EQ(gauges.size(), live);
  // The meter's utilization samples: GR engine activity where present, else GPU_UTIL.
  std::vector<DeviceSample> samples = Ok(ParseDcgmExposition(page, 1000, "other-node"));
  for (const DeviceSample& s : samples) EXPECT_EQ(s.node, inv.node.name.str());
}

TEST(DcgmExporterPage, SimReadingsRoundTripWithEscapedLabels) {
  SimFixture s;
  auto sim = s.Open("mig-1");
  Inventory inv = Ok(sim->Discover());
  ASSERT_TRUE(sim->SetBusy(inv.gpus[1].uuid, 731).ok());
  ASSERT_TRUE(sim->SetBusy(inv.gpus[0].mig_instances[0].uuid, 250).ok());
  ASSERT_TRUE(sim->SetMemoryUsed(inv.gpus[0].mig_instances[0].uuid, 1234).ok());
  std::vector<GpuReading> rs = Ok(sim->Read());
  DeviceLabels labels;
  labels[inv.gpus[0].uuid + "/1"] = WorkloadLabels("team \"a\"", "train\\x", "pod\n1");
  labels[inv.gpus[1].uuid] = {{"fabrica_tenant", "b"}, {"bad-name", "v"}, {"UUID", "spoof"}};
  ExpectRoundTrip(inv, rs, labels);

  const std::string page = RenderDcgmExporterPage(inv, rs, labels);
  EXPECT_NE(page.find("# HELP DCGM_FI_DEV_GPU_UTIL "), std::string::npos);
  EXPECT_NE(page.find("# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter"), std::string::npos);
  EXPECT_NE(page.find("namespace=\"team \\\"a\\\"\""), std::string::npos) << page;
  EXPECT_NE(page.find("fabrica_workload=\"train\\\\x\""), std::string::npos);
  EXPECT_NE(page.find("pod=\"pod\\n1\""), std::string::npos);
  EXPECT_NE(page.find("GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\""), std::string::npos);
  EXPECT_NE(page.find("device=\"nvidia1\""), std::string::npos);
  EXPECT_NE(page.find("Hostname=\"mig-1\""), std::string::npos);
  EXPECT_NE(page.find("bad_name=\"v\""), std::string::npos);
  EXPECT_EQ(page.find("spoof"), std::string::npos);
  std::vector<DeviceSample> samples = Ok(ParseDcgmExposition(page, 1000, "x"));
  std::map<std::string, int32_t> util;
  for (const DeviceSample& d : samples) util[d.device_uuid] = d.util_permille;
  EXPECT_EQ(util[inv.gpus[1].uuid], 731);
  EXPECT_EQ(util[inv.gpus[0].uuid + "/1"], 250);
}

TEST(DcgmExporterPage, NvmlReadingsRoundTripAndLostGpusAreLeftOut) {
  FakeNvml fake;
  auto backend = OpenFake();
  ASSERT_NE(backend, nullptr);
  Inventory inv = Ok(backend->Discover());
  ExpectRoundTrip(inv, Ok(backend->Read()), {});
  fake.LoseGpu(1);
  std::vector<GpuReading> rs = Ok(backend->Read());
  ASSERT_TRUE(Row(rs, 1)->lost);
  ExpectRoundTrip(inv, rs, {});

  SimFixture s;
  auto sim = s.Open("hgx-1");
  s.now += 3'600'000;  // every scheduled fault has fired: GPU 2 is lost
  ExpectRoundTrip(Ok(sim->Discover()), Ok(sim->Read()), {});
}

}  // namespace
}  // namespace fabrica
