// The synthetic simulator: a modern AI-factory fleet and workload mix, generated from a seed,
// driven through Fabrica's placement engine to measure speed, packing and topology locality at
// a scale no public trace has (80,000 GPUs, ~11,000 nodes).
//
// The fleet (MakeSyntheticFleet) is built the way such fleets are bought and cabled:
//   - HGX H100 and H200 nodes: 8 GPUs on NVSwitch (the NVLink domain is the node itself),
//     224 CPU threads, 2 TiB of memory, 2 NUMA nodes with GPUs 0-3 and 4-7, 8 ConnectX-7 NICs at
//     400 Gb/s (one per GPU, 4 per NUMA node), one PCIe switch per GPU pair. Liquid-cooled racks
//     hold 8 such nodes (~100 kW); 4 racks, i.e. 32 nodes or 256 GPUs, form one InfiniBand
//     leaf group, the size of a DGX SuperPOD scalable unit whose rail leaves every node of the
//     unit reaches in one hop. We model the unit as one `leaf`.
//   - A share of the H100 racks (10% by default) is MIG-partitioned as operators do it, whole
//     racks at a time, every GPU of a node carved (geometries in synthetic.cc, sized to the
//     mix's demand for 1g.10gb, 2g.20gb and 3g.40gb slices).
//   - GB200 NVL72 racks: 18 compute trays of 4 GB200 GPUs (186 GiB each), 144 Grace cores,
//     960 GiB of LPDDR5X, 2 NUMA nodes, 4 NICs; all trays of a rack share one NVLink domain.
//     8 racks (576 GPUs) form one leaf group, again the scalable unit of the reference design.
// Nodes are listed leaf by leaf, rack by rack, so the Placer's lowest-index tie-break packs
// toward the front of the fleet the way a locality-minded operator would.
//
// The workload mix (MakeSyntheticWorkloads) is drawn with sched/rng.h's Rng, the same on every
// platform: fractional inference pods (0.25 or 0.5 GPU with a memory cap), whole-GPU pods of
// 1/2/4/8 GPUs, MIG-slice pods, multi-node training gangs on HGX (2-16 pods of 8 GPUs, preferring
// one InfiniBand leaf) and on GB200 (4-18 pods of 4 GPUs, preferring one NVL72 rack), sized so
// each pool (HGX, MIG, GB200) is asked for about its share of the fleet. Workloads are generated
// until the requested GPUs reach `load` x capacity; one that would overshoot is skipped.
//
// RunSynthetic places the workloads one at a time, arrival only (nothing ever leaves); a pod or
// gang that fits nowhere is dropped. All functions are pure apart from RunSynthetic reading a
// steady clock around the placement calls; none is shared between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/status.h"
#include "core/workload.h"

namespace fabrica::sim {

struct SyntheticFleetOptions {
  int64_t gpus = 80000;           // the target; GB200 rounds to whole racks of 72
  double gb200_share = 0.10;      // of GPUs, in NVL72 racks
  double h200_share = 1.0 / 3.0;  // of the HGX nodes; the rest are H100
  double mig_share = 0.10;        // of the H100 racks
  int hgx_nodes_per_rack = 8;
  int hgx_racks_per_leaf = 4;
  int gb200_racks_per_leaf = 8;
};

// REQUIRES nothing; returns InvalidArgument for shares outside [0, 1] or sizes below 1. The
// result passes ValidateFleet.
Result<Fleet> MakeSyntheticFleet(const SyntheticFleetOptions& options);

// The tenants the mix uses: two trusted inference teams of one trust domain (they may share
// GPUs fractionally), standard research, evaluation and training teams, and one untrusted
// partner that gets whole GPUs, its own MIG GPUs and fractions shared only with itself.
std::vector<Tenant> SyntheticTenants();

// Workloads until the requested GPUs reach `load` x the fleet's; a workload that would overshoot
// is skipped, and 100 skips in a row end the list.
// Gang pods of HGX gangs ask for 8 GPUs; GB200 gangs ask for model GB200.
std::vector<Workload> MakeSyntheticWorkloads(const Fleet& fleet, double load, uint64_t seed);

struct SyntheticRunOptions {
  std::string policy = "fabrica";
  uint64_t seed = 42;           // the Placer's generator (random-fit and device choice)
  bool topology_blind = false;  // strip the gangs' topology constraints: the baseline
};

struct SyntheticRunResult {
  std::string policy;
  bool topology_blind = false;
  int64_t nodes = 0;
  int64_t gpus = 0;
  int64_t workloads = 0;
  int64_t pods_arrived = 0;  // every pod, gang pods included
  int64_t pods_placed = 0;
  int64_t pods_dropped = 0;
  int64_t gangs_arrived = 0;
  int64_t gangs_placed = 0;
  int64_t decisions = 0;     // Place and PlaceGang calls
  double place_seconds = 0;  // time inside Place and PlaceGang only, by the steady clock
  // Process CPU time inside the same calls: what the placements cost on a machine that other
  // work shares, where wall time also counts the waits for a core.
  double place_cpu_seconds = 0;
  double arrived_gpu_pct = 0;
  double allocated_gpu_pct = 0;
  // Placed gangs that asked for one InfiniBand leaf (HGX training): how many landed in one
  // leaf and in one rack. Classified by what the gang asked for, also in a topology-blind run,
  // so both runs count the same gangs.
  int64_t leaf_gangs_placed = 0;
  int64_t leaf_gangs_one_leaf = 0;
  int64_t leaf_gangs_one_rack = 0;
  // Placed gangs that asked for one NVLink domain (GB200): how many landed in one.
  int64_t nvlink_gangs_placed = 0;
  int64_t nvlink_gangs_one_domain = 0;
  // Placed GPU pods, and those whose GPUs and CPUs are all on one NUMA node.
  int64_t gpu_pods_placed = 0;
  int64_t gpu_pods_numa_local = 0;

  double pods_per_second() const;  // pods decided (placed or dropped) per placement second
  double pods_per_cpu_second() const;
  double decisions_per_second() const;
  double leaf_local_pct() const;  // of leaf_gangs_placed
  double rack_local_pct() const;
  double nvlink_local_pct() const;
  double numa_local_pct() const;  // of gpu_pods_placed
};

// REQUIRES: `fleet` passes ValidateFleet and every workload's tenant is in `tenants`.
// The typical pod mix that fgd and fabrica need is derived from `workloads` themselves.
Result<SyntheticRunResult> RunSynthetic(const Fleet& fleet, const std::vector<Tenant>& tenants,
                                        const std::vector<Workload>& workloads,
                                        const SyntheticRunOptions& options);

}  // namespace fabrica::sim
