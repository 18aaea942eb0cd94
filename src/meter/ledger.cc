#include "meter/ledger.h"

#include <algorithm>
#include <set>

namespace fabrica {

namespace {

int64_t Overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return std::max<int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

std::vector<int64_t> LargestRemainderSplit(int64_t total, const std::vector<int64_t>& weights) {
  std::vector<int64_t> parts(weights.size(), 0);
  if (weights.empty()) return parts;
  __int128 sum = 0;
  for (int64_t w : weights) sum += w;
  if (sum == 0) {
    std::vector<int64_t> even(weights.size(), 1);
    return LargestRemainderSplit(total, even);
  }
  std::vector<std::pair<__int128, size_t>> remainders;
  remainders.reserve(weights.size());
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const __int128 exact = static_cast<__int128>(total) * weights[i];
    parts[i] = static_cast<int64_t>(exact / sum);
    remainders.push_back({exact % sum, i});
    given += parts[i];
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int64_t left = total - given, k = 0; left > 0; --left, ++k) {
    ++parts[remainders[static_cast<size_t>(k) % remainders.size()].second];
  }
  return parts;
}

int64_t Interval::HeldIn(int64_t from_ms, int64_t to_ms) const {
  return static_cast<int64_t>(device.gpu_milli) * Overlap(start_ms, end_ms, from_ms, to_ms);
}

int64_t PodHold::CpuHeldIn(int64_t from_ms, int64_t to_ms) const {
  return pod.cpu_milli * Overlap(start_ms, end_ms, from_ms, to_ms);
}

int64_t PodHold::MemoryHeldIn(int64_t from_ms, int64_t to_ms) const {
  return pod.memory_mib * Overlap(start_ms, end_ms, from_ms, to_ms);
}

std::vector<const PodHold*> Meter::PodsIn(int64_t from_ms, int64_t to_ms) const {
  std::vector<const PodHold*> out;
  for (const PodHold& p : pods_) {
    if (p.start_ms < to_ms && p.end_ms > from_ms) out.push_back(&p);
  }
  return out;
}

Meter::Meter(MeterConfig config) : config_(config) {
  CHECK(config_.bucket_ms > 0 && config_.sample_interval_ms > 0 && config_.lateness_ms >= 0);
}

int64_t Meter::BucketOf(int64_t time_ms) const {
  return FloorDiv(time_ms, config_.bucket_ms) * config_.bucket_ms;
}

int32_t Meter::CapacityMilli(const std::string& uuid) const {
  auto it = capacity_milli_.find(uuid);
  return it == capacity_milli_.end() ? 1000 : it->second;
}

Status Meter::Bind(const BindEvent& event) {
  if (event.id.empty()) return InvalidArgument("bind: id is required");
  if (event.workload.empty()) return InvalidArgument("bind " + event.id + ": workload is required");
  // (Work that asks for no GPU holds CPU and memory alone: billed by its pods.)
  if (event.devices.empty() && event.pods.empty())
    return InvalidArgument("bind " + event.id + ": no devices and no pods");
  for (size_t i = 0; i < event.devices.size(); ++i) {
    const BoundDevice& d = event.devices[i];
    const std::string path = "bind " + event.id + ": devices[" + std::to_string(i) + "]";
    if (d.uuid.empty()) return InvalidArgument(path + ".uuid is required");
    if (d.gpu_milli <= 0 || d.gpu_milli > 1000) {
      return InvalidArgument(path + ".gpuMilli " + std::to_string(d.gpu_milli) +
                             " is not in 1..1000");
    }
    if (d.compute_milli < 0 || d.compute_milli > 1000) {
      return InvalidArgument(path + ".computeMilli " + std::to_string(d.compute_milli) +
                             " is not in 0..1000");
    }
  }
  for (size_t i = 0; i < event.pods.size(); ++i) {
    if (event.pods[i].cpu_milli < 0 || event.pods[i].memory_mib < 0) {
      return InvalidArgument("bind " + event.id + ": pods[" + std::to_string(i) +
                             "] holds a negative amount");
    }
  }
  if (auto known = by_binding_.find(event.id); known != by_binding_.end()) {
    ++stats_.events_duplicate;
    // Restored from a journal written before intervals kept their compute shares: they come
    // with the binding sent again, device by device (a GPU its pods share twice, in turn), and
    // are journalled from then on.
    std::vector<bool> taken(event.devices.size(), false);
    for (size_t index : known->second) {
      BoundDevice& have = intervals_[index].device;
      for (size_t k = 0; k < event.devices.size(); ++k) {
        if (taken[k] || event.devices[k].uuid != have.uuid) continue;
        taken[k] = true;
        if (have.compute_milli == 0 && event.devices[k].compute_milli > 0) {
          have.compute_milli = event.devices[k].compute_milli;
          changed_intervals_.push_back(index);
        }
        break;
      }
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < event.pods.size(); ++i) {
    pods_by_binding_[event.id].push_back(pods_.size());
    changed_pods_.push_back(pods_.size());
    pods_.push_back({event.id, static_cast<int>(i), event.workload, event.tenant, event.queue,
                     event.pods[i], event.start_ms, kOpenEnd});
  }
  std::vector<size_t>& mine = by_binding_[event.id];
  for (const BoundDevice& d : event.devices) {
    Interval iv;
    iv.binding = event.id;
    iv.workload = event.workload;
    iv.tenant = event.tenant;
    iv.queue = event.queue;
    iv.device = d;
    iv.start_ms = event.start_ms;
    // A binding that starts before the seal point is late: its sealed time counts as unknown.
    for (int64_t b = BucketOf(iv.start_ms); b < sealed_until_ms_; b += config_.bucket_ms) {
      IntervalRollup r;
      r.unknown = iv.HeldIn(b, b + config_.bucket_ms);
      iv.sealed.push_back({b, r});
      iv.sealed_total.unknown += r.unknown;
      new_sealed_.push_back({intervals_.size(), iv.sealed.size() - 1});
    }
    if (!d.mig_profile.empty()) capacity_milli_.emplace(d.uuid, d.gpu_milli);
    const size_t index = intervals_.size();
    intervals_.push_back(std::move(iv));
    timelines_[d.uuid].intervals.push_back(index);
    mine.push_back(index);
    changed_intervals_.push_back(index);
  }
  return Status::Ok();
}

Status Meter::End(const EndEvent& event) {
  auto it = by_binding_.find(event.id);
  if (it == by_binding_.end()) return NotFound("end: no binding " + event.id);
  const std::vector<size_t>& pods = pods_by_binding_[event.id];
  for (size_t index : it->second) {
    if (event.end_ms < intervals_[index].start_ms) {
      return InvalidArgument("end " + event.id + ": end time is before the binding's start");
    }
  }
  for (size_t index : pods)
    if (event.end_ms < pods_[index].start_ms)
      return InvalidArgument("end " + event.id + ": end time is before the binding's start");
  // (Ended already: its devices' intervals, or the pods of one that holds no GPU.)
  if ((!it->second.empty() && intervals_[it->second.front()].end_ms != kOpenEnd) ||
      (it->second.empty() && !pods.empty() && pods_[pods.front()].end_ms != kOpenEnd)) {
    ++stats_.events_duplicate;
    return Status::Ok();
  }
  for (size_t index : pods_by_binding_[event.id]) {
    pods_[index].end_ms = event.end_ms;
    changed_pods_.push_back(index);
  }
  for (size_t index : it->second) {
    Interval& iv = intervals_[index];
    iv.end_ms = event.end_ms;
    iv.end_reason = event.reason;
    // An end reported after its time was sealed: drop the sealed buckets it no longer held.
    const size_t before = iv.sealed.size();
    while (!iv.sealed.empty() && iv.sealed.back().first >= iv.end_ms) {
      iv.sealed_total.used -= iv.sealed.back().second.used;
      iv.sealed_total.unknown -= iv.sealed.back().second.unknown;
      iv.sealed.pop_back();
    }
    if (iv.sealed.size() != before) {
      trimmed_.push_back({index, BucketOf(iv.end_ms - 1) + config_.bucket_ms});
      std::erase_if(new_sealed_, [&](const std::pair<size_t, size_t>& p) {
        return p.first == index && p.second >= iv.sealed.size();
      });
    }
    changed_intervals_.push_back(index);
  }
  return Status::Ok();
}

Status Meter::AddDevice(const FleetDevice& device) {
  if (device.uuid.empty()) return InvalidArgument("device: uuid is required");
  if (device.until_ms < device.since_ms) {
    return InvalidArgument("device " + device.uuid + ": until is before since");
  }
  auto it = device_index_.find(device.uuid);
  if (it != device_index_.end()) {
    FleetDevice& known = devices_[it->second];
    if (known.until_ms != kOpenEnd && device.until_ms == kOpenEnd) {
      known.until_ms = kOpenEnd;  // back in the fleet (the gap stays uncounted only if recorded)
      devices_changed_ = true;
    }
    // A MIG slice's share as the server now counts it (a journal from a build that rounded a
    // 1g slice to 143 milli, where quota charges 142: MigSliceMilli).
    if (!known.parent_uuid.empty() && device.parent_uuid == known.parent_uuid &&
        device.capacity_milli > 0 && device.capacity_milli <= 1000 &&
        device.capacity_milli != known.capacity_milli) {
      known.capacity_milli = device.capacity_milli;
      capacity_milli_[known.uuid] = device.capacity_milli;
      devices_changed_ = true;
    }
    return Status::Ok();
  }
  if (device.capacity_milli <= 0 || device.capacity_milli > 1000) {
    return InvalidArgument("device " + device.uuid + ": capacity is not in 1..1000 milli-GPU");
  }
  device_index_[device.uuid] = devices_.size();
  devices_.push_back(device);
  if (!device.parent_uuid.empty()) capacity_milli_[device.uuid] = device.capacity_milli;
  devices_changed_ = true;
  return Status::Ok();
}

Status Meter::RemoveDevice(const std::string& uuid, int64_t at_ms) {
  auto it = device_index_.find(uuid);
  if (it == device_index_.end()) return NotFound("device " + uuid + " is not in the fleet");
  FleetDevice& d = devices_[it->second];
  if (d.until_ms == kOpenEnd) {
    d.until_ms = std::max(at_ms, d.since_ms);
    devices_changed_ = true;
  }
  return Status::Ok();
}

void Meter::Ingest(std::vector<DeviceSample> samples) {
  for (DeviceSample& s : samples) {
    if (s.device_uuid.empty() || s.util_permille < 0 || s.util_permille > 1000) {
      ++stats_.samples_invalid;
      continue;
    }
    if (s.time_ms < sealed_until_ms_) {
      ++stats_.samples_late;
      continue;
    }
    std::vector<Sample>& v = timelines_[s.device_uuid].samples;
    Sample sample{
        s.time_ms, s.util_permille,
        s.achieved_permille.empty() ? std::map<std::string, int32_t>{} : s.achieved_permille};
    if (v.empty() || v.back().time_ms < s.time_ms) {
      v.push_back(std::move(sample));
    } else {
      auto pos = std::lower_bound(v.begin(), v.end(), s.time_ms,
                                  [](const Sample& a, int64_t t) { return a.time_ms < t; });
      if (pos != v.end() && pos->time_ms == s.time_ms) {
        ++stats_.samples_duplicate;
        continue;
      }
      v.insert(pos, std::move(sample));
    }
    ++stats_.samples_accepted;
    new_samples_.push_back(std::move(s));  // for the journal's next batch
  }
}

std::vector<int64_t> Meter::ActiveBuckets(const DeviceTimeline& tl, int64_t from_ms,
                                          int64_t to_ms) const {
  std::set<int64_t> buckets;
  auto add_span = [&](int64_t a, int64_t b) {
    a = std::max(a, from_ms);
    b = std::min(b, to_ms);
    for (int64_t x = BucketOf(a); x < b; x += config_.bucket_ms) buckets.insert(x);
  };
  const int64_t hold = 2 * config_.sample_interval_ms;
  for (size_t i = 0; i < tl.samples.size(); ++i) {
    int64_t end = tl.samples[i].time_ms + hold;
    if (i + 1 < tl.samples.size()) end = std::min(end, tl.samples[i + 1].time_ms);
    if (end > from_ms && tl.samples[i].time_ms < to_ms) add_span(tl.samples[i].time_ms, end);
  }
  for (size_t index : tl.intervals) {
    const Interval& iv = intervals_[index];
    if (iv.end_ms > from_ms && iv.start_ms < to_ms) add_span(iv.start_ms, iv.end_ms);
  }
  return {buckets.begin(), buckets.end()};
}

Meter::BucketResult Meter::ComputeSpan(const std::string& uuid, const DeviceTimeline& tl,
                                       int64_t from_ms, int64_t to_ms, int64_t carry_in) const {
  BucketResult out;
  out.carry_out = carry_in;
  if (to_ms <= from_ms) return out;
  const int64_t hold = 2 * config_.sample_interval_ms;
  const int32_t capacity = CapacityMilli(uuid);

  // The sample in force at from_ms (the last at or before it), then those inside the span.
  auto first = std::upper_bound(tl.samples.begin(), tl.samples.end(), from_ms,
                                [](int64_t t, const Sample& a) { return t < a.time_ms; });
  if (first != tl.samples.begin()) --first;
  auto last = std::lower_bound(tl.samples.begin(), tl.samples.end(), to_ms,
                               [](const Sample& a, int64_t t) { return a.time_ms < t; });

  std::vector<size_t> sharers;
  for (size_t index : tl.intervals) {
    const Interval& iv = intervals_[index];
    if (iv.start_ms < to_ms && iv.end_ms > from_ms) sharers.push_back(index);
  }

  std::vector<int64_t> cuts = {from_ms, to_ms};
  for (auto it = first; it != last; ++it) {
    cuts.push_back(it->time_ms);
    // The hold ends early only where no later sample takes over first.
    if (std::next(it) == tl.samples.end() || std::next(it)->time_ms > it->time_ms + hold) {
      cuts.push_back(it->time_ms + hold);
    }
  }
  for (size_t index : sharers) {
    cuts.push_back(intervals_[index].start_ms);
    cuts.push_back(intervals_[index].end_ms);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  auto in_force = first;  // advances with the sweep
  std::vector<size_t> now;
  std::vector<int64_t> weights;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const int64_t x = cuts[c], y = cuts[c + 1];
    if (x < from_ms || y > to_ms) continue;
    const int64_t len = y - x;
    while (in_force != last && std::next(in_force) != last && std::next(in_force)->time_ms <= x) {
      ++in_force;
    }
    const Sample* sample = nullptr;
    if (in_force != last && in_force->time_ms <= x && x < in_force->time_ms + hold) {
      sample = &*in_force;
    }
    now.clear();
    for (size_t index : sharers) {
      const Interval& iv = intervals_[index];
      if (iv.start_ms <= x && x < iv.end_ms) now.push_back(index);
    }
    // Sharers in a fixed order (start, then binding id), so that ties in the split do not depend
    // on the order in which events arrived.
    std::sort(now.begin(), now.end(), [&](size_t a, size_t b) {
      const Interval& p = intervals_[a];
      const Interval& q = intervals_[b];
      return p.start_ms != q.start_ms ? p.start_ms < q.start_ms : p.binding < q.binding;
    });
    if (sample == nullptr) {
      for (size_t index : now) {
        out.per_interval[index].unknown += int64_t{intervals_[index].device.gpu_milli} * len;
      }
      continue;
    }
    const int64_t exact = int64_t{sample->permille} * capacity * len + out.carry_out;
    const int64_t used = exact / 1000;
    out.carry_out = exact % 1000;
    if (now.empty()) {
      out.unattributed += used;
      continue;
    }
    weights.clear();
    bool any_achieved = false;
    if (!sample->achieved.empty()) {
      for (size_t index : now) {
        auto a = sample->achieved.find(intervals_[index].workload);
        weights.push_back(a == sample->achieved.end() ? 0 : a->second);
        any_achieved = any_achieved || weights.back() > 0;
      }
    }
    if (!any_achieved) {
      // By the compute each may use, not by what it is charged: a fraction's memory share
      // makes it hold more of the GPU, not run more on it.
      weights.clear();
      for (size_t index : now) weights.push_back(intervals_[index].device.ComputeMilli());
    }
    const std::vector<int64_t> parts = LargestRemainderSplit(used, weights);
    for (size_t k = 0; k < now.size(); ++k) out.per_interval[now[k]].used += parts[k];
  }
  return out;
}

void Meter::SealDevice(const std::string& uuid, DeviceTimeline& tl, int64_t until_ms) {
  const int64_t carry_before = tl.carry;
  for (int64_t b : ActiveBuckets(tl, sealed_until_ms_, until_ms)) {
    BucketResult r = ComputeSpan(uuid, tl, b, b + config_.bucket_ms, tl.carry);
    tl.carry = r.carry_out;
    if (r.unattributed) {
      tl.unattributed[b] += r.unattributed;
      new_unattributed_.push_back({uuid, b, r.unattributed});
    }
    for (const auto& [index, amounts] : r.per_interval) {
      Interval& iv = intervals_[index];
      iv.sealed.push_back({b, amounts});
      iv.sealed_total.used += amounts.used;
      iv.sealed_total.unknown += amounts.unknown;
      new_sealed_.push_back({index, iv.sealed.size() - 1});
    }
  }
  if (tl.carry != carry_before) changed_carries_[uuid] = tl.carry;
  // Fold the raw samples away, keeping the last one before the seal point (it may hold past it).
  auto keep = std::lower_bound(tl.samples.begin(), tl.samples.end(), until_ms,
                               [](const Sample& a, int64_t t) { return a.time_ms < t; });
  if (keep != tl.samples.begin()) --keep;
  tl.samples.erase(tl.samples.begin(), keep);
  std::erase_if(tl.intervals, [&](size_t index) { return intervals_[index].end_ms <= until_ms; });
}

void Meter::Advance(int64_t now_ms) {
  const int64_t until = BucketOf(now_ms - config_.lateness_ms);
  if (until <= sealed_until_ms_) return;
  for (auto& [uuid, tl] : timelines_) SealDevice(uuid, tl, until);
  sealed_until_ms_ = until;
}

std::vector<IntervalUsage> Meter::Usage(int64_t from_ms, int64_t to_ms) const {
  std::vector<IntervalUsage> out;
  if (to_ms <= from_ms) return out;
  std::unordered_map<size_t, size_t> row_of;  // interval index -> row
  for (size_t index = 0; index < intervals_.size(); ++index) {
    const Interval& iv = intervals_[index];
    if (iv.start_ms >= to_ms || iv.end_ms <= from_ms) continue;
    IntervalUsage u;
    u.interval = &iv;
    u.held = iv.HeldIn(from_ms, to_ms);
    if (!iv.sealed.empty()) {
      const int64_t first_bucket = iv.sealed.front().first;
      const int64_t last_end = iv.sealed.back().first + config_.bucket_ms;
      if (from_ms <= first_bucket && last_end <= to_ms) {
        u.used = iv.sealed_total.used;
        u.unknown = iv.sealed_total.unknown;
      } else {
        for (const auto& [b, r] : iv.sealed) {
          if (b + config_.bucket_ms <= from_ms) continue;
          if (b >= to_ms) break;
          const int64_t whole = Overlap(b, b + config_.bucket_ms, iv.start_ms, iv.end_ms);
          const int64_t part = Overlap(std::max(b, from_ms), std::min(b + config_.bucket_ms, to_ms),
                                       iv.start_ms, iv.end_ms);
          if (part == whole) {
            u.used += r.used;
            u.unknown += r.unknown;
          } else if (whole > 0) {
            u.used += static_cast<int64_t>(static_cast<__int128>(r.used) * part / whole);
            u.unknown += static_cast<int64_t>(static_cast<__int128>(r.unknown) * part / whole);
          }
        }
      }
    }
    row_of[index] = out.size();
    out.push_back(u);
  }
  // The unsealed part of the window, from the raw samples.
  const int64_t open_from = std::max(from_ms, sealed_until_ms_);
  if (open_from < to_ms) {
    for (const auto& [uuid, tl] : timelines_) {
      int64_t carry = tl.carry;
      for (int64_t b : ActiveBuckets(tl, sealed_until_ms_, to_ms)) {
        // Spans before the window only advance the carry.
        if (b + config_.bucket_ms <= open_from) {
          carry = ComputeSpan(uuid, tl, b, b + config_.bucket_ms, carry).carry_out;
          continue;
        }
        const int64_t x = std::max(b, open_from), y = std::min(b + config_.bucket_ms, to_ms);
        if (x > b) carry = ComputeSpan(uuid, tl, b, x, carry).carry_out;
        BucketResult r = ComputeSpan(uuid, tl, x, y, carry);
        carry = r.carry_out;
        for (const auto& [index, amounts] : r.per_interval) {
          auto row = row_of.find(index);
          if (row == row_of.end()) continue;
          out[row->second].used += amounts.used;
          out[row->second].unknown += amounts.unknown;
        }
      }
    }
  }
  return out;
}

int64_t Meter::UnattributedUsed(int64_t from_ms, int64_t to_ms) const {
  int64_t total = 0;
  for (const auto& [uuid, tl] : timelines_) {
    for (const auto& [b, amount] : tl.unattributed) {
      if (b >= from_ms && b + config_.bucket_ms <= to_ms) total += amount;
    }
    int64_t carry = tl.carry;
    const int64_t open_from = std::max(from_ms, sealed_until_ms_);
    if (open_from >= to_ms) continue;
    for (int64_t b : ActiveBuckets(tl, sealed_until_ms_, to_ms)) {
      const int64_t x = std::max(b, open_from), y = std::min(b + config_.bucket_ms, to_ms);
      if (x >= y) {
        carry = ComputeSpan(uuid, tl, b, b + config_.bucket_ms, carry).carry_out;
        continue;
      }
      if (x > b) carry = ComputeSpan(uuid, tl, b, x, carry).carry_out;
      BucketResult r = ComputeSpan(uuid, tl, x, y, carry);
      carry = r.carry_out;
      total += r.unattributed;
    }
  }
  return total;
}

std::map<std::string, std::string> Meter::OpenBindings() const {
  std::map<std::string, std::string> out;
  for (const Interval& iv : intervals_) {
    if (iv.end_ms == kOpenEnd) out[iv.workload] = iv.binding;
  }
  // (And those of pods alone, work that asks for no GPU: else one that ended while the server
  // was down would stay open, its CPU and memory billed for good.)
  for (const PodHold& p : pods_) {
    if (p.end_ms == kOpenEnd && by_binding_.count(p.binding) && by_binding_.at(p.binding).empty())
      out[p.workload] = p.binding;
  }
  return out;
}

size_t Meter::raw_sample_count() const {
  size_t n = 0;
  for (const auto& [uuid, tl] : timelines_) n += tl.samples.size();
  return n;
}

MeterChanges Meter::TakeChanges() {
  MeterChanges out;
  std::sort(changed_intervals_.begin(), changed_intervals_.end());
  changed_intervals_.erase(std::unique(changed_intervals_.begin(), changed_intervals_.end()),
                           changed_intervals_.end());
  for (size_t index : changed_intervals_) out.intervals.push_back(&intervals_[index]);
  changed_intervals_.clear();
  std::sort(changed_pods_.begin(), changed_pods_.end());
  changed_pods_.erase(std::unique(changed_pods_.begin(), changed_pods_.end()), changed_pods_.end());
  for (size_t index : changed_pods_) out.pods.push_back(&pods_[index]);
  changed_pods_.clear();
  out.sealed.reserve(new_sealed_.size());
  for (const auto& [index, pos] : new_sealed_) {
    const Interval& iv = intervals_[index];
    out.sealed.push_back({&iv, iv.sealed[pos].first, iv.sealed[pos].second});
  }
  new_sealed_.clear();
  for (const auto& [index, bucket] : trimmed_) out.trimmed.push_back({&intervals_[index], bucket});
  trimmed_.clear();
  out.samples = std::move(new_samples_);
  new_samples_.clear();
  if (devices_changed_) out.devices = devices_;
  devices_changed_ = false;
  out.carries = std::move(changed_carries_);
  changed_carries_.clear();
  out.unattributed = std::move(new_unattributed_);
  new_unattributed_.clear();
  out.sealed_until_ms = sealed_until_ms_;
  return out;
}

void Meter::Restore(MeterSnapshot snapshot) {
  *this = Meter(config_);
  sealed_until_ms_ = snapshot.sealed_until_ms;
  intervals_ = std::move(snapshot.intervals);
  for (size_t index = 0; index < intervals_.size(); ++index) {
    const Interval& iv = intervals_[index];
    by_binding_[iv.binding].push_back(index);
    if (!iv.device.mig_profile.empty())
      capacity_milli_.emplace(iv.device.uuid, iv.device.gpu_milli);
    if (iv.end_ms > sealed_until_ms_) timelines_[iv.device.uuid].intervals.push_back(index);
  }
  pods_ = std::move(snapshot.pods);
  for (size_t index = 0; index < pods_.size(); ++index) {
    pods_by_binding_[pods_[index].binding].push_back(index);
    by_binding_[pods_[index].binding];  // (a binding of pods alone is known too)
  }
  for (FleetDevice& d : snapshot.devices) {
    if (!d.parent_uuid.empty()) capacity_milli_[d.uuid] = d.capacity_milli;
    device_index_[d.uuid] = devices_.size();
    devices_.push_back(std::move(d));
  }
  for (const auto& [uuid, carry] : snapshot.carries) timelines_[uuid].carry = carry;
  for (const UnattributedRollup& u : snapshot.unattributed) {
    timelines_[u.uuid].unattributed[u.bucket_ms] += u.used;
  }
  // The samples are put back as they were, the one in force at the seal point included.
  std::stable_sort(snapshot.samples.begin(), snapshot.samples.end(),
                   [](const DeviceSample& a, const DeviceSample& b) {
                     return a.device_uuid != b.device_uuid ? a.device_uuid < b.device_uuid
                                                           : a.time_ms < b.time_ms;
                   });
  for (DeviceSample& s : snapshot.samples) {
    std::vector<Sample>& v = timelines_[s.device_uuid].samples;
    if (!v.empty() && v.back().time_ms == s.time_ms) continue;
    v.push_back({s.time_ms, s.util_permille, std::move(s.achieved_permille)});
  }
  for (auto& [uuid, tl] : timelines_) {
    auto keep = std::lower_bound(tl.samples.begin(), tl.samples.end(), sealed_until_ms_,
                                 [](const Sample& a, int64_t t) { return a.time_ms < t; });
    if (keep != tl.samples.begin()) --keep;
    tl.samples.erase(tl.samples.begin(), keep);
  }
}

}  // namespace fabrica
