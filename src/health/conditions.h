// Signals to conditions: what one node's heartbeats, XIDs and GPU telemetry say about its health.
//
// NodeHealth keeps Kubernetes-style conditions (type, status, reason, message, lastTransitionTime)
// for the node and for each of its GPUs. Two kinds of signal feed them, and they clear differently:
//   - level signals (heartbeat age, ECC double-bit counter, row-remap flags, temperature, power)
//     set their condition while the signal is bad and clear it when a reading is good again —
//     unlike Node Problem Detector's sticky log conditions, which someone must clear by hand;
//   - event signals (XIDs) raise a condition that stays until remediation has run and burn-in has
//     passed (ClearAfterRemediation), or, for warning-level events only, until no new event came
//     for a quiet window (Evaluate).
// Application XIDs (13, 31, 43, 45, 68) and info XIDs raise no condition; they are kept as events.
// A warning-level XID that repeats more than `repeat_fatal_count` times inside `repeat_window_ms`
// on one GPU becomes fatal with an action of at least COMPONENT_RESET; this is how an XID missing
// from the table, which starts as a warning, becomes fatal.
//
// Problem conditions read True while the problem is present; `Ready` reads True while the node is
// healthy, as in Kubernetes. Time is always a parameter (milliseconds on the caller's clock); the
// class never reads a clock. Not thread-safe; one owner drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "health/xid.h"

namespace fabrica::health {

struct HealthConfig {
  int64_t heartbeat_timeout_ms = 40'000;  // the node is NotReady after this long without one
  int64_t warning_quiet_ms = 3'600'000;   // a warning-level event clears after this long quiet
  int repeat_fatal_count = 3;             // a warning XID seen more often than this ...
  int64_t repeat_window_ms = 3'600'000;   // ... inside this window becomes fatal
  int temperature_warning_c = 85;
  int temperature_fatal_c = 95;
  double power_warning_ratio = 1.05;  // power above this × the GPU's limit is a warning
  size_t max_events = 64;             // events kept for `describe` (oldest dropped)
};

// The types of condition NodeHealth sets.
inline constexpr char kReady[] = "Ready";
inline constexpr char kEccDoubleBit[] = "EccDoubleBit";
inline constexpr char kRowRemapFailure[] = "RowRemapFailure";
inline constexpr char kRowRemapPending[] = "RowRemapPending";
inline constexpr char kTemperature[] = "Temperature";
inline constexpr char kPower[] = "Power";
inline constexpr char kPodsNotStarting[] = "PodsNotStarting";
// XID conditions are typed "Xid<code>", e.g. "Xid48".
std::string XidConditionType(int code);

struct Condition {
  std::string type;
  int device = -1;      // GPU index on the node; -1 for a node condition
  bool status = false;  // True: the problem is present (Ready: the node is healthy)
  std::string reason;   // one CamelCase word, e.g. "DoubleBitEcc"
  std::string message;  // a sentence for people
  int64_t last_transition_ms = 0;
  Severity severity = Severity::kInfo;  // of the problem while status says it is present
  Action action = Action::kNone;        // the recommended action while present
  bool event = false;                   // raised by an event signal (clears by the event rules)
  int64_t last_seen_ms = 0;             // the latest signal that kept it set
  int count = 0;                        // events seen since it was last raised

  // Whether this condition reports a problem now.
  bool problem() const;
  std::string StatusName() const { return status ? "True" : "False"; }
};

// A recorded event: every XID, including those that raise no condition.
struct HealthEvent {
  int64_t at_ms = 0;
  int device = -1;
  int xid = 0;
  Severity severity = Severity::kInfo;
  Action action = Action::kNone;
  std::string reason;
  std::string message;
};

// One telemetry reading of one GPU; a field that was not reported is left unset and changes
// nothing.
struct DeviceSample {
  std::optional<int64_t> ecc_dbe_volatile;  // double-bit ECC errors since the driver loaded
  std::optional<bool> row_remap_failure;
  std::optional<bool> row_remap_pending;
  std::optional<int> temperature_c;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
};

class NodeHealth {
 public:
  // The node is taken as heard from at `now_ms`.
  NodeHealth(int gpus, const HealthConfig& config, int64_t now_ms);

  int gpus() const { return gpus_; }
  const HealthConfig& config() const { return config_; }

  // `lease_ms`, when positive: how long this heartbeat holds, as the node declares it (its
  // lease's duration); the node is NotReady after the longer of that and the configured
  // timeout.
  void ObserveHeartbeat(int64_t now_ms, int64_t lease_ms = 0);
  // Records an XID on GPU `device` and returns the verdict used: the table's row, made fatal
  // (with an action of at least COMPONENT_RESET) when a warning code repeats past the limit.
  // REQUIRES: 0 <= device < gpus().
  XidInfo ObserveXid(int device, int code, int64_t now_ms);
  // REQUIRES: 0 <= device < gpus().
  void ObserveSample(int device, const DeviceSample& sample, int64_t now_ms);
  // A problem of the node that its own telemetry does not report but others see (the
  // scheduler: its pods did not start there, again and again): a fatal node condition of
  // `type` asking for `action`, cleared by the remediation that follows, as an event's.
  void ObserveNodeProblem(const std::string& type, const std::string& reason,
                          const std::string& message, Action action, int64_t now_ms);
  // Applies the rules that depend only on time: heartbeat age and warning quiet windows.
  void Evaluate(int64_t now_ms);
  // Remediation of `device` (-1: the whole node) ran, its repair finishing at `fixed_ms`, and
  // burn-in has passed: its event conditions clear, except those seen after `fixed_ms` (they
  // happened on the repaired hardware, which therefore is not fixed).
  void ClearAfterRemediation(int device, int64_t fixed_ms, int64_t now_ms);

  bool ready() const { return ready_->status; }
  // No condition reports a problem (the common case, answered without a scan).
  bool healthy() const { return problems_ == 0; }
  int64_t last_heartbeat_ms() const { return last_heartbeat_ms_; }
  // Every condition ever set, node conditions first, then by device and type.
  std::vector<Condition> conditions() const;
  const Condition* Find(const std::string& type, int device) const;
  const std::deque<HealthEvent>& events() const { return events_; }

  // Summaries the remediation controller reads.
  bool DeviceFatal(int device) const;
  // The most disruptive action among present problems of `device` at `min_severity` or above.
  Action DeviceAction(int device, Severity min_severity) const;
  std::vector<int> FatalDevices() const;
  // A present problem of the node itself (not Ready) or a fatal one whose action needs the
  // whole node (reboot, repair).
  bool NodeLevelFault() const;
  // The most disruptive action a fatal problem anywhere on the node asks for (RESTART_BM for a
  // node that is not Ready).
  Action NodeAction() const;
  // A short text of the present problems, for reasons and messages.
  std::string Summary() const;

 private:
  using Key = std::pair<int, std::string>;  // (device, type)
  Condition& Get(int device, const std::string& type);
  void Set(Condition& c, bool status, const std::string& reason, const std::string& message,
           int64_t now_ms);
  void Record(HealthEvent e);

  int gpus_;
  HealthConfig config_;
  int64_t last_heartbeat_ms_;
  int64_t lease_ms_ = 0;  // the last heartbeat's declared duration (0: none)
  std::map<Key, Condition> conditions_;
  Condition* ready_ = nullptr;  // conditions_'s Ready entry (map nodes do not move)
  int problems_ = 0;            // conditions whose problem() is true
  std::map<std::pair<int, int>, std::deque<int64_t>> xid_times_;  // (device, code) → recent times
  std::deque<HealthEvent> events_;
};

}  // namespace fabrica::health
