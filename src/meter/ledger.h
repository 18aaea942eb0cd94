// The meter's ledger: who held which device when, and how busy the device was meanwhile.
//
// Inputs are allocation events (a workload bound to devices; the binding ended by completion,
// eviction, node loss or deletion), utilization samples per device, and the fleet's devices (for
// capacity and idle cost). Every amount is an integer in milli-GPU·ms.
//
// Integration rule (documented in ARCHITECTURE.md, tested against an independent sweep):
//  - A sample's per-mille value holds from its time until the device's next sample, for at most
//    twice the nominal sample interval. Time covered by no sample is *unknown*: reported as such,
//    never as busy or idle.
//  - A device's used amount on a span is util_permille × capacity_milli / 1000 × span_ms, where a
//    whole GPU's capacity is 1000 and a MIG instance's is its compute slices / 7. The division is
//    carried along the device's timeline (the running total is floored once), so any prefix of it
//    is exact to the milli-GPU·ms.
//  - A span's used amount is split among the bindings sharing the device by their achieved share
//    when the shim reports one, else by their compute shares (BoundDevice::compute_milli: what
//    the shim lets each run, not what quota charges it, which counts a fraction's memory too),
//    with the largest-remainder rule, so the parts add up exactly to the device's used amount.
//    Used time on a device that no binding holds is the device's *unattributed* use.
//  - Spans are cut at samples, at binding starts and ends, and at rollup bucket boundaries.
//
// Rollups: each (binding, device) interval keeps its used and unknown amounts per bucket
// (`bucket_ms`, five minutes by default). A bucket is sealed once the caller's clock has passed
// its end by `lateness_ms`; its raw samples are then folded away. A sample for a sealed bucket
// is refused as late (counted). Unsealed buckets are computed on demand, so queries see the
// latest samples. Held amounts are exact for any window; used amounts are exact for windows on
// bucket boundaries and prorated by time inside a bucket that a window cuts.
//
// Ingest is idempotent: a binding or end event with an id already seen, or a sample for a
// (device, time) already seen, changes nothing (but for a binding's compute shares that its
// intervals lack: a journal written before they were kept). Not thread-safe: the caller serialises.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "meter/telemetry.h"

namespace fabrica {

inline constexpr int64_t kOpenEnd = INT64_MAX;

struct MeterConfig {
  int64_t sample_interval_ms = 30'000;  // the nominal interval; a sample holds at most twice it
  int64_t bucket_ms = 300'000;
  int64_t lateness_ms = 600'000;
};

// One device of a binding.
struct BoundDevice {
  std::string node;
  std::string uuid;  // a MIG instance is "<GPU UUID>/<GPU instance id>"
  std::string model;
  // What it holds (held time, cost): the share its queue is charged; for a MIG slice its
  // compute slices / 7, for a fraction the larger of its compute and memory shares.
  int32_t gpu_milli = 1000;
  std::string mig_profile;  // "" unless a MIG slice
  // The compute it may use (the shim's cap: a fraction's gpuMilli), by which the device's busy
  // time is split among its sharers; 0: not known (a journal written before it was kept),
  // gpu_milli.
  int32_t compute_milli = 0;

  int32_t ComputeMilli() const { return compute_milli > 0 ? compute_milli : gpu_milli; }
};

// A pod of a binding: where it runs and the CPU and memory it holds (priced per core-hour and
// GiB-hour when the price book has those prices).
struct BoundPod {
  std::string node;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};

// A workload's pods bound to devices at `start_ms`. `id` is unique per binding (a workload
// bound again after eviction is a new binding).
struct BindEvent {
  std::string id;
  std::string workload;  // "tenant/name"
  std::string tenant;
  std::string queue;
  int64_t start_ms = 0;
  std::vector<BoundDevice> devices;  // may be empty (work that asks for no GPU)
  std::vector<BoundPod> pods;        // may be empty (GPU time only); not both
};

struct EndEvent {
  std::string id;  // the binding's id
  int64_t end_ms = 0;
  std::string reason;  // completed, failed, evicted, node-lost, deleted
};

// A device of the fleet, present from `since_ms` until `until_ms`: capacity for idle cost. A
// MIG instance names its GPU as parent and its compute fraction as capacity; it adds nothing to
// the fleet's capacity (its GPU does) but fixes how its utilization converts to milli-GPU.
struct FleetDevice {
  std::string uuid;
  std::string node;
  std::string model;
  int64_t since_ms = 0;
  int64_t until_ms = kOpenEnd;
  std::string parent_uuid;
  int32_t capacity_milli = 1000;
};

// Per-bucket amounts of one interval, in milli-GPU·ms.
struct IntervalRollup {
  int64_t used = 0;
  int64_t unknown = 0;  // held while the device's utilization was unknown
};

// One (binding, device) interval.
struct Interval {
  std::string binding;
  std::string workload;
  std::string tenant;
  std::string queue;
  BoundDevice device;
  int64_t start_ms = 0;
  int64_t end_ms = kOpenEnd;
  std::string end_reason;
  // Sealed buckets in time order (bucket start, amounts) and their sum.
  std::vector<std::pair<int64_t, IntervalRollup>> sealed;
  IntervalRollup sealed_total;

  int64_t HeldIn(int64_t from_ms, int64_t to_ms) const;
};

// The CPU and memory one pod of a binding held from its start to its end.
struct PodHold {
  std::string binding;
  int index = 0;  // its position among the binding's pods
  std::string workload;
  std::string tenant;
  std::string queue;
  BoundPod pod;
  int64_t start_ms = 0;
  int64_t end_ms = kOpenEnd;

  int64_t CpuHeldIn(int64_t from_ms, int64_t to_ms) const;     // milli-core·ms
  int64_t MemoryHeldIn(int64_t from_ms, int64_t to_ms) const;  // MiB·ms
};

// What a query needs per interval: held, used and unknown inside a window.
struct IntervalUsage {
  const Interval* interval = nullptr;
  int64_t held = 0;
  int64_t used = 0;
  int64_t unknown = 0;
};

struct IngestStats {
  int64_t samples_accepted = 0;
  int64_t samples_duplicate = 0;
  int64_t samples_late = 0;
  int64_t samples_invalid = 0;
  int64_t events_duplicate = 0;
};

// What changed since the last TakeChanges(), for a durable journal to commit in one batch.
struct UnattributedRollup {
  std::string uuid;
  int64_t bucket_ms = 0;
  int64_t used = 0;
};

// What a journal keeps to rebuild a Meter: intervals with their sealed rollups, the fleet's
// devices, the seal point, each device's carried remainder and unattributed use, and the samples
// that still matter (at or after the seal point, and the one in force at it).
struct MeterSnapshot {
  std::vector<Interval> intervals;
  std::vector<PodHold> pods;
  std::vector<FleetDevice> devices;
  int64_t sealed_until_ms = 0;
  std::map<std::string, int64_t> carries;
  std::vector<UnattributedRollup> unattributed;
  std::vector<DeviceSample> samples;
};

// A bucket of one interval, sealed since the last batch.
struct SealedRollup {
  const Interval* interval = nullptr;
  int64_t bucket_ms = 0;
  IntervalRollup amounts;
};

// What changed since the last TakeChanges(), for a durable journal to commit in one batch.
// Sealed buckets are appended, never rewritten, so a batch costs what it adds.
struct MeterChanges {
  std::vector<const Interval*> intervals;  // new or ended (their fields, not their rollups)
  std::vector<const PodHold*> pods;        // new or ended
  std::vector<SealedRollup> sealed;
  // Intervals whose end arrived after buckets were sealed: drop their buckets from here on.
  std::vector<std::pair<const Interval*, int64_t>> trimmed;
  std::vector<DeviceSample> samples;       // accepted since the last batch
  std::vector<FleetDevice> devices;        // the whole list when it changed, else empty
  std::map<std::string, int64_t> carries;  // devices sealed since the last batch
  std::vector<UnattributedRollup> unattributed;
  int64_t sealed_until_ms = 0;
};

class Meter {
 public:
  explicit Meter(MeterConfig config = {});

  const MeterConfig& config() const { return config_; }

  // REQUIRES for each: well-formed input (ids non-empty, end ≥ start); otherwise InvalidArgument
  // naming the field, and nothing changes. A binding bound again changes nothing, but gives its
  // intervals the compute shares they lack (restored from a journal written before they were
  // kept).
  Status Bind(const BindEvent& event);
  Status End(const EndEvent& event);
  Status AddDevice(const FleetDevice& device);
  Status RemoveDevice(const std::string& uuid, int64_t at_ms);

  // Accepts a batch of samples: duplicates, late and invalid ones are counted and skipped.
  // Takes the batch by value: accepted samples move on into the next journal batch.
  void Ingest(std::vector<DeviceSample> samples);

  // Seals every bucket that ends at or before now_ms − lateness_ms.
  void Advance(int64_t now_ms);

  // Held, used and unknown per interval overlapping [from_ms, to_ms).
  std::vector<IntervalUsage> Usage(int64_t from_ms, int64_t to_ms) const;

  // The pods' holds overlapping [from_ms, to_ms).
  std::vector<const PodHold*> PodsIn(int64_t from_ms, int64_t to_ms) const;

  // The device's used amount in [from, to) that no binding held (bucket resolution as above).
  int64_t UnattributedUsed(int64_t from_ms, int64_t to_ms) const;

  // The bindings not yet ended: workload -> binding id.
  std::map<std::string, std::string> OpenBindings() const;
  // Whether a binding with this id was ever bound (open or ended).
  bool HasBinding(const std::string& id) const { return by_binding_.count(id) > 0; }

  const std::vector<FleetDevice>& devices() const { return devices_; }
  const IngestStats& stats() const { return stats_; }
  int64_t sealed_until_ms() const { return sealed_until_ms_; }
  size_t interval_count() const { return intervals_.size(); }
  size_t raw_sample_count() const;

  MeterChanges TakeChanges();

  // Rebuilds the state a journal kept (what TakeChanges() handed out, folded).
  void Restore(MeterSnapshot snapshot);

 private:
  struct Sample {
    int64_t time_ms;
    int32_t permille;
    std::map<std::string, int32_t> achieved;
  };
  struct DeviceTimeline {
    std::vector<Sample> samples;              // sorted by time, unique
    std::vector<size_t> intervals;            // indexes into intervals_
    int64_t carry = 0;                        // sub-milli remainder carried along sealed spans
    std::map<int64_t, int64_t> unattributed;  // sealed bucket -> used with no binding
  };
  struct BucketResult {
    std::map<size_t, IntervalRollup> per_interval;
    int64_t unattributed = 0;
    int64_t carry_out = 0;
  };

  // The amounts of [from_ms, to_ms), a span inside one bucket, from the raw samples.
  BucketResult ComputeSpan(const std::string& uuid, const DeviceTimeline& timeline, int64_t from_ms,
                           int64_t to_ms, int64_t carry_in) const;
  // The buckets in [from_ms, to_ms) where the device had a sample's hold or a binding.
  std::vector<int64_t> ActiveBuckets(const DeviceTimeline& timeline, int64_t from_ms,
                                     int64_t to_ms) const;
  void SealDevice(const std::string& uuid, DeviceTimeline& timeline, int64_t until_ms);
  int64_t BucketOf(int64_t time_ms) const;
  int32_t CapacityMilli(const std::string& uuid) const;

  MeterConfig config_;
  std::vector<Interval> intervals_;
  std::unordered_map<std::string, std::vector<size_t>> by_binding_;
  std::vector<PodHold> pods_;
  std::unordered_map<std::string, std::vector<size_t>> pods_by_binding_;
  std::vector<size_t> changed_pods_;
  std::unordered_map<std::string, DeviceTimeline> timelines_;
  std::vector<FleetDevice> devices_;
  std::unordered_map<std::string, size_t> device_index_;
  std::map<std::string, int32_t> capacity_milli_;  // uuid -> capacity (MIG instances < 1000)
  int64_t sealed_until_ms_ = 0;
  IngestStats stats_;
  // Change tracking for TakeChanges().
  std::vector<size_t> changed_intervals_;
  std::vector<std::pair<size_t, size_t>> new_sealed_;  // (interval, position in its sealed list)
  std::vector<std::pair<size_t, int64_t>> trimmed_;
  std::vector<DeviceSample> new_samples_;
  bool devices_changed_ = false;
  std::map<std::string, int64_t> changed_carries_;
  std::vector<UnattributedRollup> new_unattributed_;
};

// Splits `total` into parts proportional to `weights` so that they add up exactly to `total`:
// each part gets the floor of its exact share, and the units left over go one each to the
// largest fractional remainders (ties to the lower index). All weights zero: even split.
std::vector<int64_t> LargestRemainderSplit(int64_t total, const std::vector<int64_t>& weights);

}  // namespace fabrica
