#include "health/conditions.h"

#include <algorithm>

#include "core/status.h"

namespace fabrica::health {

std::string XidConditionType(int code) { return "Xid" + std::to_string(code); }

bool Condition::problem() const { return type == kReady ? !status : status; }

namespace {

std::string Seconds(int64_t ms) { return std::to_string(ms / 1000) + "s"; }

std::string On(int device) {
  return device < 0 ? std::string("the node") : "GPU " + std::to_string(device);
}

}  // namespace

NodeHealth::NodeHealth(int gpus, const HealthConfig& config, int64_t now_ms)
    : gpus_(gpus), config_(config), last_heartbeat_ms_(now_ms) {
  Condition& ready = Get(-1, kReady);
  ready_ = &ready;
  ready.status = true;
  ready.reason = "HeartbeatFresh";
  ready.message = "the node agent is reporting";
  ready.last_transition_ms = now_ms;
  ready.severity = Severity::kFatal;
  ready.action = Action::kRebootNode;
}

Condition& NodeHealth::Get(int device, const std::string& type) {
  auto [it, inserted] = conditions_.try_emplace(Key{device, type});
  if (inserted) {
    it->second.type = type;
    it->second.device = device;
  }
  return it->second;
}

const Condition* NodeHealth::Find(const std::string& type, int device) const {
  auto it = conditions_.find(Key{device, type});
  return it == conditions_.end() ? nullptr : &it->second;
}

void NodeHealth::Set(Condition& c, bool status, const std::string& reason,
                     const std::string& message, int64_t now_ms) {
  // A condition set for the first time (no reason yet) records when it was first observed.
  if (c.status != status || c.reason.empty()) c.last_transition_ms = now_ms;
  const bool was_problem = c.problem();
  c.status = status;
  problems_ += (c.problem() ? 1 : 0) - (was_problem ? 1 : 0);
  c.reason = reason;
  c.message = message;
}

void NodeHealth::Record(HealthEvent e) {
  events_.push_back(std::move(e));
  while (events_.size() > config_.max_events) events_.pop_front();
}

void NodeHealth::ObserveHeartbeat(int64_t now_ms, int64_t lease_ms) {
  last_heartbeat_ms_ = std::max(last_heartbeat_ms_, now_ms);
  lease_ms_ = std::max<int64_t>(0, lease_ms);
  Condition& ready = *ready_;
  if (!ready.status) {
    Set(ready, true, "HeartbeatResumed", "the node agent is reporting again", now_ms);
  }
  ready.last_seen_ms = now_ms;
}

XidInfo NodeHealth::ObserveXid(int device, int code, int64_t now_ms) {
  CHECK(device >= 0 && device < gpus_);
  XidInfo info = LookupXid(code);
  std::deque<int64_t>& times = xid_times_[{device, code}];
  times.push_back(now_ms);
  while (!times.empty() && times.front() <= now_ms - config_.repeat_window_ms) times.pop_front();
  const bool repeated = info.severity == Severity::kWarning &&
                        static_cast<int>(times.size()) > config_.repeat_fatal_count;
  if (repeated) {
    info.severity = Severity::kFatal;
    info.fails_gpu = true;
    info.action = std::max(info.action, Action::kResetGpu);
  }

  std::string message = "XID " + std::to_string(code) + " (" + info.meaning + ") on " + On(device) +
                        "; action " + ActionName(info.action);
  if (repeated) {
    message += "; fatal: seen " + std::to_string(times.size()) + " times in " +
               Seconds(config_.repeat_window_ms);
  }
  Record({now_ms, device, code, info.severity, info.action, info.mnemonic, message});
  if (info.severity == Severity::kApplication || info.severity == Severity::kInfo) return info;

  Condition& c = Get(device, XidConditionType(code));
  if (c.status) {
    c.count += 1;
    c.severity = std::max(c.severity, info.severity);
    c.action = std::max(c.action, info.action);
    c.message = message;
  } else {
    Set(c, true, info.mnemonic, message, now_ms);
    c.count = 1;
    c.severity = info.severity;
    c.action = info.action;
  }
  c.event = true;
  c.last_seen_ms = now_ms;
  return info;
}

void NodeHealth::ObserveNodeProblem(const std::string& type, const std::string& reason,
                                    const std::string& message, Action action, int64_t now_ms) {
  Record({now_ms, -1, 0, Severity::kFatal, action, reason, message});
  Condition& c = Get(-1, type);
  if (!c.status) {
    Set(c, true, reason, message, now_ms);
    c.count = 0;
  }
  c.message = message;
  c.count += 1;
  c.severity = Severity::kFatal;
  c.action = std::max(c.action, action);
  c.event = true;
  c.last_seen_ms = now_ms;
}

namespace {

struct Level {
  bool bad = false;
  Severity severity = Severity::kWarning;
  Action action = Action::kNone;
  std::string reason;
  std::string message;
};

}  // namespace

void NodeHealth::ObserveSample(int device, const DeviceSample& s, int64_t now_ms) {
  CHECK(device >= 0 && device < gpus_);
  auto apply = [&](const char* type, const Level& level, const char* clear_reason,
                   const std::string& clear_message) {
    Condition& c = Get(device, type);
    if (level.bad) {
      Set(c, true, level.reason, level.message, now_ms);
      c.severity = level.severity;
      c.action = level.action;
      c.last_seen_ms = now_ms;
    } else if (c.status || c.reason.empty()) {
      Set(c, false, clear_reason, clear_message, now_ms);  // cleared, or first seen healthy
    }
  };
  const std::string on = On(device);
  if (s.ecc_dbe_volatile) {
    const int64_t n = *s.ecc_dbe_volatile;
    apply(kEccDoubleBit,
          {n > 0, Severity::kFatal, Action::kResetGpu, "VolatileDoubleBitEcc",
           std::to_string(n) + " double-bit ECC error(s) on " + on + " since the driver loaded"},
          "NoDoubleBitEcc", "no double-bit ECC errors on " + on);
  }
  if (s.row_remap_failure) {
    apply(kRowRemapFailure,
          {*s.row_remap_failure, Severity::kFatal, Action::kRepair, "RowRemapFailed",
           "row remapping failed on " + on + ": the GPU needs repair (RMA)"},
          "RowRemapOk", "row remapping works on " + on);
  }
  if (s.row_remap_pending) {
    apply(kRowRemapPending,
          {*s.row_remap_pending, Severity::kWarning, Action::kResetGpu, "RowRemapPending",
           "a row remap on " + on + " takes effect at the next GPU reset"},
          "NoRowRemapPending", "no row remap pending on " + on);
  }
  if (s.temperature_c) {
    const int t = *s.temperature_c;
    Level level;
    level.bad = t >= config_.temperature_warning_c;
    const bool fatal = t >= config_.temperature_fatal_c;
    level.severity = fatal ? Severity::kFatal : Severity::kWarning;
    level.action = fatal ? Action::kResetGpu : Action::kNone;
    level.reason = fatal ? "TemperatureCritical" : "TemperatureHigh";
    level.message = on + " at " + std::to_string(t) + " C (warning at " +
                    std::to_string(config_.temperature_warning_c) + " C, critical at " +
                    std::to_string(config_.temperature_fatal_c) + " C)";
    apply(kTemperature, level, "TemperatureNormal",
          on + " at " + std::to_string(t) + " C, below the warning threshold");
  }
  if (s.power_w && s.power_limit_w && *s.power_limit_w > 0) {
    const bool over = *s.power_w > *s.power_limit_w * config_.power_warning_ratio;
    apply(kPower,
          {over, Severity::kWarning, Action::kNone, "PowerOverLimit",
           on + " draws " + std::to_string(static_cast<int64_t>(*s.power_w)) + " W over its " +
               std::to_string(static_cast<int64_t>(*s.power_limit_w)) + " W limit"},
          "PowerNormal", on + " draws power within its limit");
  }
}

void NodeHealth::Evaluate(int64_t now_ms) {
  Condition& ready = *ready_;
  const int64_t age = now_ms - last_heartbeat_ms_;
  const int64_t timeout = std::max(config_.heartbeat_timeout_ms, lease_ms_);
  if (ready.status && age > timeout) {
    Set(ready, false, "HeartbeatTimeout",
        "no heartbeat for " + Seconds(age) + " (timeout " + Seconds(timeout) +
            (timeout > config_.heartbeat_timeout_ms ? ", the node's lease" : "") + ")",
        now_ms);
  }
  if (problems_ == 0) return;
  for (auto& [key, c] : conditions_) {
    if (c.event && c.status && c.severity == Severity::kWarning &&
        now_ms - c.last_seen_ms >= config_.warning_quiet_ms) {
      Set(c, false, "QuietWindowPassed",
          "no " + c.type + " on " + On(c.device) + " for " + Seconds(now_ms - c.last_seen_ms),
          now_ms);
    }
  }
}

void NodeHealth::ClearAfterRemediation(int device, int64_t fixed_ms, int64_t now_ms) {
  for (auto& [key, c] : conditions_) {
    if (!c.event || !c.status || (device >= 0 && c.device != device)) continue;
    if (c.last_seen_ms > fixed_ms) continue;
    Set(c, false, "Remediated", "remediation ran and burn-in passed on " + On(c.device), now_ms);
  }
  for (auto it = xid_times_.begin(); it != xid_times_.end();) {
    it = (device < 0 || it->first.first == device) ? xid_times_.erase(it) : std::next(it);
  }
}

std::vector<Condition> NodeHealth::conditions() const {
  std::vector<Condition> out;
  out.reserve(conditions_.size());
  for (const auto& [key, c] : conditions_) out.push_back(c);
  return out;
}

bool NodeHealth::DeviceFatal(int device) const {
  if (problems_ == 0) return false;
  for (const auto& [key, c] : conditions_) {
    if (c.device == device && c.problem() && c.severity == Severity::kFatal) return true;
  }
  return false;
}

Action NodeHealth::DeviceAction(int device, Severity min_severity) const {
  Action a = Action::kNone;
  if (problems_ == 0) return a;
  for (const auto& [key, c] : conditions_) {
    if (c.device == device && c.problem() && c.severity >= min_severity) {
      a = std::max(a, c.action);
    }
  }
  return a;
}

std::vector<int> NodeHealth::FatalDevices() const {
  std::vector<int> out;
  if (problems_ == 0) return out;
  for (int d = 0; d < gpus_; ++d) {
    if (DeviceFatal(d)) out.push_back(d);
  }
  return out;
}

bool NodeHealth::NodeLevelFault() const {
  if (problems_ == 0) return false;
  if (!ready()) return true;
  for (const auto& [key, c] : conditions_) {
    if (c.problem() && c.severity == Severity::kFatal && ActionNeedsNode(c.action)) return true;
  }
  return false;
}

Action NodeHealth::NodeAction() const {
  Action a = ready() ? Action::kNone : Action::kRebootNode;
  for (const auto& [key, c] : conditions_) {
    if (c.problem() && c.severity == Severity::kFatal) a = std::max(a, c.action);
  }
  return a;
}

std::string NodeHealth::Summary() const {
  std::string out;
  for (const auto& [key, c] : conditions_) {
    if (!c.problem()) continue;
    if (!out.empty()) out += "; ";
    out += c.type + "=" + c.StatusName() + " on " + On(c.device) + " (" + c.reason + ", " +
           SeverityName(c.severity) + ")";
  }
  return out.empty() ? "healthy" : out;
}

}  // namespace fabrica::health
