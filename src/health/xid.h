// The XID table: what each NVIDIA driver error code (XID) means for a GPU and what to do about it.
//
// An XID is an event the driver logs ("NVRM: Xid (PCI:...): 48, ..."). Each known code has a
// severity and a recommended action, taken from NVIDIA's XID catalog and the lists that NVSentinel,
// the k8s device plugin and AWS's node agent keep (../shared/reference/telemetry-nvml-xid.md):
//   - fatal: the GPU cannot be trusted; cordon at once, drain, then run the action;
//   - warning: the GPU keeps working; the action runs at the next chance (e.g. a GPU reset when
//     the GPU is next idle) and the condition clears after a quiet window;
//   - application: the application's own fault (13, 31, 43, 45, 68); the GPU stays healthy;
//   - info: worth a metric, nothing else.
// A code missing from the table is a warning that becomes fatal when it repeats more than a
// configured count inside a window (HealthConfig in conditions.h). The table is constant data;
// every function here is pure and safe to call from any thread.
#pragma once

#include <string>
#include <vector>

namespace fabrica::health {

enum class Severity { kInfo, kApplication, kWarning, kFatal };
const char* SeverityName(Severity s);

// Ordered from the least to the most disruptive, so escalation is "the next one up". The names
// follow NVSentinel's RecommendedAction where it has one (REPAIR is its CONTACT_SUPPORT: RMA).
enum class Action { kNone, kRestartApp, kResetGpu, kRebootNode, kRepair };
const char* ActionName(Action a);  // NONE, RESTART_APP, COMPONENT_RESET, RESTART_BM, REPAIR
// The next rung of the ladder restart app → reset GPU → reboot → repair; kRepair stays kRepair.
Action Escalate(Action a);

// Which part of the node an action takes out of service: a GPU reset needs only that GPU
// drained, a reboot or a repair the whole node.
bool ActionNeedsNode(Action a);

struct XidInfo {
  int code = 0;
  std::string mnemonic;  // short name, used as the condition's reason
  std::string meaning;
  Severity severity = Severity::kWarning;
  Action action = Action::kNone;
  bool fails_gpu = false;  // the device is unhealthy until remediated (true for fatal rows only)
  bool known = false;      // false for a code the table does not list
};

// Every row of the table, sorted by code.
const std::vector<XidInfo>& XidTable();

// The row for `code`, or for a code the table lacks: warning, action NONE, known = false. Whether
// a repeating unknown code is escalated is decided by NodeHealth, which knows the history.
XidInfo LookupXid(int code);

}  // namespace fabrica::health
