#include "sim/fault_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <iomanip>
#include <map>
#include <memory>
#include <queue>
#include <unordered_map>

#include "health/burnin.h"
#include "sched/placer.h"
#include "sched/policy.h"
#include "sched/rng.h"
#include "sim/synthetic.h"

namespace fabrica::sim {

namespace {

using health::Action;
using health::ActionKind;
using health::ControllerAction;

constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kDayMs = 86'400'000;

// The workloads' view of time: a stream of arrivals, each a set of pods run for a duration.
struct SimWorkload {
  enum class State { kPending, kRunning, kEvicting, kDone };
  WorkloadId id;
  std::vector<PodRequest> pods;
  bool gang = false;
  TopologyConstraint topology;
  int64_t milli = 0;  // all pods together
  int64_t duration_ms = 0;
  State state = State::kPending;
  std::vector<Assignment> placed;  // one per pod while bound
  int64_t start_ms = 0;
  int epoch = 0;         // bumps on every (re)start, so stale completions are ignored
  bool stalled = false;  // its GPU or node died: it makes no progress until evicted
  bool started = false;
  int evictions = 0;
  int requeues = 0;
};

struct SimNode {
  bool alive = true;
  int64_t last_heartbeat_ms = 0;
  int death_epoch = 0;
  std::vector<Action> broken;  // hidden truth per GPU: what fixes it (kNone = healthy)
  std::vector<bool> remap_pending;
  std::vector<int64_t> ecc_dbe;
  std::map<int, int> workloads;                   // workload index → pods bound here
  std::vector<std::map<int, int>> gpu_workloads;  // per GPU
  std::vector<std::vector<Assignment>> blockers;  // per GPU: capacity held while cordoned
};

struct Event {
  enum class Kind { kComplete, kRelease, kActionDone, kBurnInDone, kRevive, kFault };
  int64_t at_ms = 0;
  int64_t seq = 0;
  Kind kind = Kind::kComplete;
  int node = -1;
  int gpu = -1;
  int workload = -1;
  int epoch = 0;
  Action action = Action::kNone;
  int fault = 0;  // kFault: which FaultKind
  bool operator>(const Event& o) const { return at_ms != o.at_ms ? at_ms > o.at_ms : seq > o.seq; }
};

enum FaultKind { kFatalXid, kWarningXid, kAppXid, kUnknownXid, kEcc, kAgentDeath, kFaultKinds };

double Exponential(Rng& rng, double rate_per_ms) {
  return -std::log(1.0 - rng.UniformDouble()) / rate_per_ms;
}

template <typename T>
const T& Pick(Rng& rng, const std::vector<T>& v) {
  return v[rng.Uniform(v.size())];
}

class FaultSim : public health::BindingView {
 public:
  FaultSim(const FaultSimOptions& o, Fleet fleet, std::vector<Tenant> tenants,
           std::vector<Workload> shapes, std::unique_ptr<Policy> policy)
      : o_(o),
        fleet_(std::move(fleet)),
        tenants_(std::move(tenants)),
        shapes_(std::move(shapes)),
        state_(fleet_, tenants_),
        policy_(std::move(policy)),
        placer_(*policy_),
        ctl_(o.remediation),
        rng_(o.seed),
        place_rng_(o.seed ^ 0x5eedfa17ULL) {
    placer_.set_explain(false);
  }

  Status Run(FaultSimReport& r);

  // BindingView.
  std::vector<WorkloadId> OnNode(const NodeId& node) const override {
    std::vector<WorkloadId> out;
    for (const auto& [w, pods] : nodes_[Index(node)].workloads) out.push_back(workloads_[w].id);
    return out;
  }
  std::vector<WorkloadId> OnGpu(const NodeId& node, int gpu) const override {
    std::vector<WorkloadId> out;
    for (const auto& [w, pods] : nodes_[Index(node)].gpu_workloads[gpu]) {
      out.push_back(workloads_[w].id);
    }
    return out;
  }
  bool Bound(const WorkloadId& workload) const override {
    const SimWorkload& w = workloads_[WorkloadIndex(workload)];
    return !w.placed.empty();
  }

 private:
  int Index(const NodeId& node) const { return node_index_.at(node.str()); }
  static int WorkloadIndex(const WorkloadId& id) { return std::stoi(id.str().substr(1)); }
  const NodeId& Name(int n) const { return fleet_.nodes[n].name; }

  void Push(Event e) {
    e.seq = seq_++;
    events_.push(e);
  }
  Status Setup(FaultSimReport& r);
  void ScheduleFaults();
  void NewArrival(int64_t now_ms);
  void Handle(const Event& e, int64_t now_ms);
  void InjectFault(int kind, int64_t now_ms);
  void Act(const ControllerAction& a, int64_t now_ms);
  void Bind(SimWorkload& w, int wi, const std::vector<Assignment>& pods, int64_t now_ms);
  void Unbind(SimWorkload& w, int wi);
  void Stall(int node, int gpu);
  void SyncBlocks(int n);
  // Node n's schedulability or free capacity changed: its reservations are synced before the
  // next scheduling pass.
  void MarkDirty(int n) {
    if (dirty_[n]) return;
    dirty_[n] = true;
    dirty_list_.push_back(n);
  }
  void ScheduleCompletion(int wi, int64_t now_ms) {
    Event e;
    e.kind = Event::Kind::kComplete;
    e.at_ms = now_ms + workloads_[wi].duration_ms;
    e.workload = wi;
    e.epoch = workloads_[wi].epoch;
    Push(e);
  }
  void Schedule(int64_t now_ms);
  void CheckDeadBound(const SimWorkload& w, int64_t now_ms);
  void Report(Status st) {
    if (!st.ok()) r_->stale_reports += 1;
  }

  FaultSimOptions o_;
  Fleet fleet_;
  std::vector<Tenant> tenants_;
  std::vector<Workload> shapes_;
  ClusterState state_;
  std::unique_ptr<Policy> policy_;
  Placer placer_;
  health::RemediationController ctl_;
  Rng rng_;
  Rng place_rng_;
  FaultSimReport* r_ = nullptr;

  std::unordered_map<std::string, int> node_index_;
  std::vector<SimNode> nodes_;
  std::vector<SimWorkload> workloads_;
  std::deque<int> pending_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t seq_ = 0;
  std::vector<bool> dirty_;
  std::vector<int> dirty_list_;
  int64_t held_milli_ = 0;     // by workloads
  int64_t blocked_milli_ = 0;  // by cordon reservations
  int64_t end_ms_ = 0;
  double arrival_rate_per_ms_ = 0;
  int64_t next_arrival_ms_ = 0;
  int prev_in_remediation_ = 0;
  // Set when capacity was freed or work arrived: only then can a scheduling pass place anything.
  bool schedule_needed_ = true;
  const PodRequest block_request_{};  // a reservation: no CPU, no memory, no tenant
};

Status FaultSim::Setup(FaultSimReport& r) {
  r_ = &r;
  end_ms_ = static_cast<int64_t>(o_.days * kDayMs);
  r.nodes = static_cast<int>(fleet_.nodes.size());
  r.gpus = fleet_.total_gpus();
  r.days = o_.days;
  r.seed = o_.seed;
  nodes_.resize(fleet_.nodes.size());
  dirty_.assign(fleet_.nodes.size(), false);
  for (size_t n = 0; n < fleet_.nodes.size(); ++n) {
    const Node& node = fleet_.nodes[n];
    node_index_[node.name.str()] = static_cast<int>(n);
    SimNode& s = nodes_[n];
    const size_t gpus = node.devices.size();
    s.broken.assign(gpus, Action::kNone);
    s.remap_pending.assign(gpus, false);
    s.ecc_dbe.assign(gpus, 0);
    s.gpu_workloads.resize(gpus);
    s.blockers.resize(gpus);
    RETURN_IF_ERROR(ctl_.AddNode(node, health::NodeState::kAvailable, 0));
  }
  r.remediation_limit = ctl_.RemediationLimit();
  r.dead_bound_limit_ms =
      o_.remediation.health.heartbeat_timeout_ms + o_.remediation.eviction_grace_ms + o_.tick_ms;

  // Arrival rate from the mix's mean size and the durations' mean (log-uniform).
  double milli_sum = 0;
  for (const Workload& w : shapes_) {
    for (const PodSet& ps : w.pod_sets) milli_sum += ps.device.TotalMilli().value() * ps.count;
  }
  const double mean_milli = milli_sum / static_cast<double>(shapes_.size());
  const double lo = o_.duration_min_s, hi = o_.duration_max_s;
  const double mean_s = hi > lo ? (hi - lo) / std::log(hi / lo) : lo;
  const double capacity_milli = static_cast<double>(state_.total_gpu_milli());
  arrival_rate_per_ms_ = o_.load * capacity_milli / (mean_milli * mean_s * 1000.0);
  ScheduleFaults();
  return Status::Ok();
}

void FaultSim::ScheduleFaults() {
  const double per_node_day[kFaultKinds] = {o_.fatal_xid_rate, o_.warning_xid_rate,
                                            o_.app_xid_rate,   o_.unknown_xid_rate,
                                            o_.ecc_rate,       o_.agent_death_rate};
  for (int kind = 0; kind < kFaultKinds; ++kind) {
    const double rate = per_node_day[kind] * static_cast<double>(nodes_.size()) / kDayMs;
    if (!(rate > 0)) continue;
    for (double t = Exponential(rng_, rate); t < static_cast<double>(end_ms_);
         t += Exponential(rng_, rate)) {
      Event e;
      e.kind = Event::Kind::kFault;
      e.at_ms = static_cast<int64_t>(t);
      e.fault = kind;
      Push(e);
    }
  }
}

void FaultSim::NewArrival(int64_t now_ms) {
  const Workload& shape = shapes_[rng_.Uniform(shapes_.size())];
  SimWorkload w;
  const int index = static_cast<int>(workloads_.size());
  w.id = WorkloadId("w" + std::to_string(index));
  w.gang = shape.gang;
  w.topology = shape.topology;
  for (const PodSet& ps : shape.pod_sets) {
    auto req = state_.MakeRequest(ps, shape.tenant);
    if (!req.ok()) return;  // a shape this fleet cannot hold; the mix has none on HGX
    for (int i = 0; i < ps.count; ++i) w.pods.push_back(*req);
    w.milli += ps.device.TotalMilli().value() * ps.count;
  }
  const double lo = std::log(o_.duration_min_s), hi = std::log(o_.duration_max_s);
  w.duration_ms = static_cast<int64_t>(std::exp(lo + (hi - lo) * rng_.UniformDouble()) * 1000.0);
  workloads_.push_back(std::move(w));
  pending_.push_back(index);
  schedule_needed_ = true;
  r_->workloads_arrived += 1;
  (void)now_ms;
}

void FaultSim::Bind(SimWorkload& w, int wi, const std::vector<Assignment>& pods, int64_t now_ms) {
  w.placed = pods;
  for (const Assignment& a : pods) {
    SimNode& s = nodes_[a.node];
    s.workloads[wi] += 1;
    for (const DeviceShare& d : a.devices) {
      s.gpu_workloads[d.device][wi] += 1;
      // Issue 7: no new work lands on a cordoned node or GPU. Checked against the controller,
      // independently of the reservations that are meant to make it impossible.
      if (!ctl_.GpuSchedulable(Name(a.node), d.device)) {
        r_->placements_on_cordoned += 1;
        if (r_->violations.size() < 20) {
          r_->violations.push_back(w.id.str() + " placed on cordoned " + Name(a.node).str() +
                                   " GPU " + std::to_string(d.device));
        }
      }
    }
    if (!s.alive) w.stalled = true;
  }
  held_milli_ += w.milli;
  w.state = SimWorkload::State::kRunning;
  w.start_ms = now_ms;
  w.epoch += 1;
  if (!w.started) r_->workloads_started += 1;
  w.started = true;
  if (!w.stalled) ScheduleCompletion(wi, now_ms);
}

void FaultSim::Unbind(SimWorkload& w, int wi) {
  for (size_t p = 0; p < w.placed.size(); ++p) {
    const Assignment& a = w.placed[p];
    state_.Release(a, w.pods[p]);
    SimNode& s = nodes_[a.node];
    if (--s.workloads[wi] == 0) s.workloads.erase(wi);
    for (const DeviceShare& d : a.devices) {
      if (--s.gpu_workloads[d.device][wi] == 0) s.gpu_workloads[d.device].erase(wi);
    }
    MarkDirty(a.node);
  }
  w.placed.clear();
  held_milli_ -= w.milli;
  schedule_needed_ = true;
}

// Workloads using GPU `gpu` of node `node` (all of the node's for gpu -1) lose their device:
// they make no more progress until the controller evicts them.
void FaultSim::Stall(int node, int gpu) {
  const SimNode& s = nodes_[node];
  const std::map<int, int>& on = gpu < 0 ? s.workloads : s.gpu_workloads[gpu];
  for (const auto& [wi, pods] : on) {
    SimWorkload& w = workloads_[wi];
    if (w.state == SimWorkload::State::kRunning) {
      w.stalled = true;
      w.epoch += 1;  // its completion will not come
    }
  }
}

void FaultSim::CheckDeadBound(const SimWorkload& w, int64_t now_ms) {
  for (const Assignment& a : w.placed) {
    const SimNode& s = nodes_[a.node];
    if (s.alive) continue;
    const int64_t bound = now_ms - s.last_heartbeat_ms;
    r_->max_dead_bound_ms = std::max(r_->max_dead_bound_ms, bound);
  }
}

void FaultSim::InjectFault(int kind, int64_t now_ms) {
  const int n = static_cast<int>(rng_.Uniform(nodes_.size()));
  SimNode& s = nodes_[n];
  const NodeId& name = Name(n);
  const int gpu = static_cast<int>(rng_.Uniform(s.broken.size()));
  if (ctl_.lifecycle(name)->state() == health::NodeState::kRetired) return;
  auto xid = [&](int code) { Report(ctl_.ObserveXid(name, gpu, code, now_ms).status()); };
  switch (kind) {
    case kFatalXid: {
      if (!s.alive) return;  // a dead agent reports nothing
      const int code = Pick(rng_, std::vector<int>{48, 95, 119, 120, 46, 62, 74, 79, 64});
      Action fix = code == 79 ? Action::kRebootNode : Action::kResetGpu;
      if (fix == Action::kResetGpu && rng_.UniformDouble() < o_.reset_insufficient) {
        fix = Action::kRebootNode;
      }
      if (fix == Action::kRebootNode && rng_.UniformDouble() < o_.reboot_insufficient) {
        fix = Action::kRepair;
      }
      s.broken[gpu] = std::max(s.broken[gpu], fix);
      r_->fatal_xids += 1;
      Stall(n, gpu);
      xid(code);
      break;
    }
    case kWarningXid: {
      if (!s.alive) return;
      r_->warning_xids += 1;
      if (rng_.Uniform(2) == 0) {
        s.remap_pending[gpu] = true;
        health::DeviceSample sample;
        sample.row_remap_pending = true;
        Report(ctl_.ObserveSample(name, gpu, sample, now_ms));
        xid(63);
      } else {
        xid(94);
      }
      break;
    }
    case kAppXid:
      if (!s.alive) return;
      r_->app_xids += 1;
      xid(Pick(rng_, std::vector<int>{13, 31, 43}));
      break;
    case kUnknownXid:
      if (!s.alive) return;
      r_->unknown_xids += 1;
      xid(Pick(rng_, std::vector<int>{160, 170, 999}));
      break;
    case kEcc: {
      if (!s.alive) return;
      r_->ecc_errors += 1;
      s.ecc_dbe[gpu] += 1 + static_cast<int64_t>(rng_.Uniform(2));
      s.broken[gpu] = std::max(s.broken[gpu], Action::kResetGpu);
      Stall(n, gpu);
      health::DeviceSample sample;
      sample.ecc_dbe_volatile = s.ecc_dbe[gpu];
      Report(ctl_.ObserveSample(name, gpu, sample, now_ms));
      break;
    }
    case kAgentDeath: {
      if (!s.alive) return;
      r_->agent_deaths += 1;
      s.alive = false;
      s.death_epoch += 1;
      Stall(n, -1);
      if (rng_.UniformDouble() < o_.agent_self_recovery) {
        Event e;
        e.kind = Event::Kind::kRevive;
        e.at_ms = now_ms + (2 + static_cast<int64_t>(rng_.Uniform(19))) * kMinuteMs;
        e.node = n;
        e.epoch = s.death_epoch;
        Push(e);
      }
      break;
    }
    default:
      break;
  }
}

void FaultSim::Handle(const Event& e, int64_t now_ms) {
  switch (e.kind) {
    case Event::Kind::kFault:
      InjectFault(e.fault, now_ms);
      return;
    case Event::Kind::kComplete: {
      SimWorkload& w = workloads_[e.workload];
      if (w.epoch != e.epoch || w.state != SimWorkload::State::kRunning || w.stalled) return;
      Unbind(w, e.workload);
      w.state = SimWorkload::State::kDone;
      r_->workloads_completed += 1;
      r_->gpu_seconds_useful +=
          static_cast<double>(w.milli) / 1000.0 * static_cast<double>(w.duration_ms) / 1000.0;
      return;
    }
    case Event::Kind::kRelease: {
      SimWorkload& w = workloads_[e.workload];
      if (w.state != SimWorkload::State::kEvicting || w.epoch != e.epoch) return;
      CheckDeadBound(w, now_ms);
      r_->gpu_seconds_lost_evictions +=
          static_cast<double>(w.milli) / 1000.0 * static_cast<double>(now_ms - w.start_ms) / 1000.0;
      Unbind(w, e.workload);
      w.state = SimWorkload::State::kPending;
      w.stalled = false;
      w.requeues += 1;
      r_->requeues += 1;
      pending_.push_back(e.workload);
      return;
    }
    case Event::Kind::kRevive: {
      SimNode& s = nodes_[e.node];
      if (!s.alive && s.death_epoch == e.epoch) s.alive = true;
      return;
    }
    case Event::Kind::kActionDone: {
      SimNode& s = nodes_[e.node];
      const NodeId& name = Name(e.node);
      auto fix = [&](int g) {
        if (s.broken[g] != Action::kNone && s.broken[g] <= e.action) s.broken[g] = Action::kNone;
        // Any reset (a reboot resets every GPU) activates pending remaps and clears the
        // volatile ECC counters.
        health::DeviceSample sample;
        if (s.remap_pending[g]) {
          s.remap_pending[g] = false;
          sample.row_remap_pending = false;
        }
        if (s.ecc_dbe[g] > 0) {
          s.ecc_dbe[g] = 0;
          sample.ecc_dbe_volatile = 0;
        }
        if (s.alive) Report(ctl_.ObserveSample(name, g, sample, now_ms));
      };
      if (e.action == Action::kResetGpu) {
        fix(e.gpu);
      } else {
        s.alive = true;  // a reboot or a repair brings the agent back
        s.death_epoch += 1;
        for (size_t g = 0; g < s.broken.size(); ++g) fix(static_cast<int>(g));
      }
      Report(ctl_.ReportActionDone(name, e.gpu, e.action, true, now_ms));
      MarkDirty(e.node);
      return;
    }
    case Event::Kind::kBurnInDone: {
      const SimNode& s = nodes_[e.node];
      std::vector<int> bad;
      for (size_t g = 0; g < s.broken.size(); ++g) {
        if (s.broken[g] != Action::kNone && (e.gpu < 0 || e.gpu == static_cast<int>(g))) {
          bad.push_back(static_cast<int>(g));
        }
      }
      const health::BurnInResult result = health::SimulatedBurnIn(fleet_.nodes[e.node], bad);
      if (!result.passed) r_->burn_in_failures += 1;
      Report(ctl_.ReportBurnIn(Name(e.node), e.gpu, result, now_ms));
      MarkDirty(e.node);
      return;
    }
  }
}

void FaultSim::Act(const ControllerAction& a, int64_t now_ms) {
  const int n = Index(a.node);
  MarkDirty(n);
  auto later = [&](Event::Kind kind, int64_t after_ms, Action action) {
    Event e;
    e.kind = kind;
    e.at_ms = now_ms + after_ms;
    e.node = n;
    e.gpu = a.gpu;
    e.action = action;
    Push(e);
  };
  switch (a.kind) {
    case ActionKind::kCordonNode:
      r_->node_cordons += 1;
      return;
    case ActionKind::kCordonGpu:
      r_->gpu_cordons += 1;
      return;
    case ActionKind::kUncordonNode:
    case ActionKind::kUncordonGpu:
    case ActionKind::kInspect:
      return;
    case ActionKind::kEvict: {
      const int wi = WorkloadIndex(a.workload);
      SimWorkload& w = workloads_[wi];
      if (w.state != SimWorkload::State::kRunning) return;
      w.state = SimWorkload::State::kEvicting;
      w.evictions += 1;
      w.epoch += 1;
      r_->evictions += 1;
      Event e;
      e.kind = Event::Kind::kRelease;
      e.at_ms = now_ms + a.grace_ms;
      e.workload = wi;
      e.epoch = w.epoch;
      Push(e);
      return;
    }
    case ActionKind::kRestartApp: {
      const int wi = WorkloadIndex(a.workload);
      SimWorkload& w = workloads_[wi];
      if (w.state != SimWorkload::State::kRunning || w.stalled) return;
      r_->app_restarts += 1;
      r_->gpu_seconds_lost_restarts +=
          static_cast<double>(w.milli) / 1000.0 * static_cast<double>(now_ms - w.start_ms) / 1000.0;
      w.start_ms = now_ms;
      w.epoch += 1;
      ScheduleCompletion(wi, now_ms);
      return;
    }
    case ActionKind::kResetGpu:
      r_->gpu_resets += 1;
      later(Event::Kind::kActionDone, o_.reset_ms, Action::kResetGpu);
      return;
    case ActionKind::kRebootNode:
      r_->reboots += 1;
      later(Event::Kind::kActionDone, o_.reboot_ms, Action::kRebootNode);
      return;
    case ActionKind::kRepair:
      r_->repairs += 1;
      later(Event::Kind::kActionDone, o_.repair_ms, Action::kRepair);
      return;
    case ActionKind::kBurnIn:
      r_->burn_ins += 1;
      later(Event::Kind::kBurnInDone, o_.burn_in_ms, Action::kNone);
      return;
    case ActionKind::kRetire:
      r_->retired += 1;
      return;
  }
}

// Holds the free capacity of every GPU the controller does not let take work, and gives it back
// when the GPU returns to service.
void FaultSim::SyncBlocks(int n) {
  const NodeId& name = Name(n);
  SimNode& s = nodes_[n];
  for (int d = 0; d < static_cast<int>(s.blockers.size()); ++d) {
    if (ctl_.GpuSchedulable(name, d)) {
      for (const Assignment& a : s.blockers[d]) {
        state_.Release(a, block_request_);
        blocked_milli_ -= a.devices[0].milli;
        schedule_needed_ = true;
      }
      s.blockers[d].clear();
      continue;
    }
    const DeviceState& ds = state_.devices(n)[d];
    if (ds.free_milli <= 0 && ds.free_memory_mib <= 0) continue;
    Assignment a;
    a.node = n;
    a.devices.push_back({d, ds.free_milli, ds.free_memory_mib, -1});
    state_.Apply(a, block_request_);
    blocked_milli_ += a.devices[0].milli;
    s.blockers[d].push_back(std::move(a));
  }
}

void FaultSim::Schedule(int64_t now_ms) {
  // Arrival order, skipping what does not fit now; a long run of failures ends the pass (the
  // fleet is full), as a real scheduler's backoff would.
  constexpr int kMaxFailures = 64;
  int failures = 0;
  std::deque<int> still;
  while (!pending_.empty()) {
    const int wi = pending_.front();
    pending_.pop_front();
    if (failures >= kMaxFailures) {
      still.push_back(wi);
      continue;
    }
    SimWorkload& w = workloads_[wi];
    std::vector<Assignment> pods;
    if (w.pods.size() == 1 && !w.gang) {
      PodPlacement p = placer_.Place(state_, w.pods[0], place_rng_);
      if (p.outcome == Outcome::kPlaced) {
        state_.Apply(p.assignment, w.pods[0]);
        pods.push_back(std::move(p.assignment));
      }
    } else {
      GangPlacement g = placer_.PlaceGang(state_, w.pods, w.topology, place_rng_);
      if (g.outcome == Outcome::kPlaced) pods = std::move(g.pods);
    }
    if (pods.empty()) {
      ++failures;
      still.push_back(wi);
      continue;
    }
    failures = 0;
    Bind(w, wi, pods, now_ms);
  }
  pending_ = std::move(still);
}

Status FaultSim::Run(FaultSimReport& r) {
  RETURN_IF_ERROR(Setup(r));
  next_arrival_ms_ = static_cast<int64_t>(Exponential(rng_, arrival_rate_per_ms_));
  double held_ms = 0, blocked_ms = 0;
  for (int64_t now = 0; now <= end_ms_; now += o_.tick_ms) {
    while (!events_.empty() && events_.top().at_ms <= now) {
      const Event e = events_.top();
      events_.pop();
      Handle(e, now);
    }
    while (next_arrival_ms_ <= now) {
      NewArrival(now);
      next_arrival_ms_ +=
          std::max<int64_t>(1, static_cast<int64_t>(Exponential(rng_, arrival_rate_per_ms_)));
    }
    for (size_t n = 0; n < nodes_.size(); ++n) {
      SimNode& s = nodes_[n];
      if (!s.alive) continue;
      s.last_heartbeat_ms = now;
      Report(ctl_.ObserveHeartbeat(Name(static_cast<int>(n)), now));
    }
    for (const ControllerAction& a : ctl_.Reconcile(now, *this)) Act(a, now);

    const int in_remediation = ctl_.InRemediation();
    const int limit = ctl_.RemediationLimit();
    r.max_in_remediation = std::max(r.max_in_remediation, in_remediation);
    if (in_remediation > limit && in_remediation > prev_in_remediation_) {
      r.violations.push_back("at " + std::to_string(now / 1000) +
                             " s: " + std::to_string(in_remediation) +
                             " nodes in remediation, limit " + std::to_string(limit));
    }
    prev_in_remediation_ = in_remediation;

    for (int n : dirty_list_) {
      dirty_[n] = false;
      SyncBlocks(n);
    }
    dirty_list_.clear();
    if (schedule_needed_) {
      schedule_needed_ = false;
      Schedule(now);
    }
    held_ms += static_cast<double>(held_milli_) / 1000.0 * static_cast<double>(o_.tick_ms);
    blocked_ms += static_cast<double>(blocked_milli_) / 1000.0 * static_cast<double>(o_.tick_ms);
  }

  for (const SimWorkload& w : workloads_) {
    CheckDeadBound(w, end_ms_);
    const int expected_requeues = w.evictions - (w.state == SimWorkload::State::kEvicting ? 1 : 0);
    if (w.requeues != expected_requeues && r.violations.size() < 40) {
      r.violations.push_back(w.id.str() + " evicted " + std::to_string(w.evictions) +
                             " times, requeued " + std::to_string(w.requeues) + " times");
    }
  }
  if (r.max_dead_bound_ms > r.dead_bound_limit_ms) {
    r.violations.push_back("a workload stayed bound to a dead node for " +
                           std::to_string(r.max_dead_bound_ms / 1000) + " s (limit " +
                           std::to_string(r.dead_bound_limit_ms / 1000) + " s)");
  }
  r.workloads_pending_at_end = static_cast<int64_t>(pending_.size());
  const double capacity_gpu_ms = static_cast<double>(r.gpus) * static_cast<double>(end_ms_);
  r.final_in_remediation = ctl_.InRemediation();
  r.utilization_pct = capacity_gpu_ms > 0 ? 100.0 * held_ms / capacity_gpu_ms : 0;
  r.gpu_seconds_out_of_service = blocked_ms / 1000.0;
  return Status::Ok();
}

}  // namespace

void FaultSimReport::Print(std::ostream& out) const {
  out << std::fixed << std::setprecision(1);
  out << "fault simulation: " << nodes << " nodes (" << gpus << " GPUs), " << days << " days, seed "
      << seed << "\n";
  out << "  workloads: " << workloads_arrived << " arrived, " << workloads_started << " started, "
      << workloads_completed << " completed, " << workloads_pending_at_end
      << " pending at the end\n";
  out << "  GPU utilization: " << utilization_pct << "%\n";
  out << "  faults: " << fatal_xids << " fatal XIDs, " << warning_xids << " warning XIDs, "
      << app_xids << " application XIDs, " << unknown_xids << " unknown XIDs, " << ecc_errors
      << " double-bit ECC, " << agent_deaths << " agent deaths\n";
  out << "  controller: " << node_cordons << " node cordons, " << gpu_cordons << " GPU cordons, "
      << evictions << " evictions, " << requeues << " requeues, " << app_restarts
      << " app restarts\n";
  out << "  repairs: " << gpu_resets << " GPU resets, " << reboots << " reboots, " << repairs
      << " repairs/RMA, " << burn_ins << " burn-ins (" << burn_in_failures << " failed), "
      << retired << " retired, " << stale_reports << " stale reports\n";
  const double lost = gpu_seconds_lost();
  out << "  goodput lost to faults: " << lost << " GPU-s (" << lost / 3600.0 << " GPU-h: evictions "
      << gpu_seconds_lost_evictions / 3600.0 << ", application restarts "
      << gpu_seconds_lost_restarts / 3600.0 << ")\n";
  out << "  useful work completed: " << gpu_seconds_useful / 3600.0
      << " GPU-h; idle capacity held out of service by cordons: "
      << gpu_seconds_out_of_service / 3600.0 << " GPU-h\n";
  out << "  in remediation at once: max " << max_in_remediation << " (limit " << remediation_limit
      << ")\n";
  out << "  bound to a dead node: max " << max_dead_bound_ms / 1000 << " s (limit "
      << dead_bound_limit_ms / 1000 << " s = heartbeat timeout + grace + one tick)\n";
  out << "  placements on a cordoned node or GPU: " << placements_on_cordoned << "\n";
  out << "  invariants: " << (ok() ? "all held" : "VIOLATED") << "\n";
  for (const std::string& v : violations) out << "    " << v << "\n";
}

Result<FaultSimReport> RunFaultSim(const FaultSimOptions& o) {
  if (o.nodes < 1) return InvalidArgument("nodes must be at least 1");
  if (!(o.days > 0)) return InvalidArgument("days must be above 0");
  if (!(o.load > 0 && o.load <= 2)) return InvalidArgument("load must be in (0, 2]");
  if (o.tick_ms < 1) return InvalidArgument("tick must be at least 1 ms");
  if (!(o.duration_min_s > 0 && o.duration_max_s >= o.duration_min_s)) {
    return InvalidArgument("workload durations must be positive and min <= max");
  }
  SyntheticFleetOptions fo;
  fo.gpus = static_cast<int64_t>(o.nodes) * 8;
  fo.gb200_share = 0;
  fo.mig_share = 0;
  ASSIGN_OR_RETURN(Fleet fleet, MakeSyntheticFleet(fo));
  std::vector<Tenant> tenants = SyntheticTenants();
  // A pool of shapes: the synthetic mix at one fleet's worth of demand.
  std::vector<Workload> shapes = MakeSyntheticWorkloads(fleet, 1.0, o.seed);
  if (shapes.empty()) return InvalidArgument("the synthetic mix produced no workloads");
  ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(o.policy));
  FaultSimReport report;
  FaultSim sim(o, std::move(fleet), std::move(tenants), std::move(shapes), std::move(policy));
  RETURN_IF_ERROR(sim.Run(report));
  return report;
}

}  // namespace fabrica::sim
