#include "health/xid.h"

#include <algorithm>

namespace fabrica::health {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kApplication:
      return "application";
    case Severity::kWarning:
      return "warning";
    case Severity::kFatal:
      return "fatal";
  }
  return "?";
}

const char* ActionName(Action a) {
  switch (a) {
    case Action::kNone:
      return "NONE";
    case Action::kRestartApp:
      return "RESTART_APP";
    case Action::kResetGpu:
      return "COMPONENT_RESET";
    case Action::kRebootNode:
      return "RESTART_BM";
    case Action::kRepair:
      return "REPAIR";
  }
  return "?";
}

Action Escalate(Action a) {
  switch (a) {
    case Action::kNone:
    case Action::kRestartApp:
      return static_cast<Action>(static_cast<int>(a) + 1);
    case Action::kResetGpu:
      return Action::kRebootNode;
    case Action::kRebootNode:
    case Action::kRepair:
      return Action::kRepair;
  }
  return Action::kRepair;
}

bool ActionNeedsNode(Action a) { return a == Action::kRebootNode || a == Action::kRepair; }

namespace {

XidInfo Row(int code, const char* mnemonic, const char* meaning, Severity severity, Action action) {
  XidInfo r;
  r.code = code;
  r.mnemonic = mnemonic;
  r.meaning = meaning;
  r.severity = severity;
  r.action = action;
  r.fails_gpu = severity == Severity::kFatal;
  r.known = true;
  return r;
}

std::vector<XidInfo> BuildTable() {
  using S = Severity;
  using A = Action;
  std::vector<XidInfo> t = {
      // Application errors: the process faulted, the GPU is fine (the device plugin's list).
      Row(13, "GraphicsEngineException", "graphics engine exception (application fault)",
          S::kApplication, A::kRestartApp),
      Row(31, "MmuFault", "GPU memory page fault (application fault)", S::kApplication,
          A::kRestartApp),
      Row(43, "GpuStoppedProcessing", "GPU stopped processing a faulting application",
          S::kApplication, A::kNone),
      Row(45, "PreemptiveCleanup", "preemptive cleanup after an earlier error", S::kApplication,
          A::kNone),
      Row(68, "VideoProcessorException", "video processor exception (application fault)",
          S::kApplication, A::kRestartApp),
      // Fatal: cordon, drain, then the action.
      Row(46, "GpuTimeout", "GPU stopped responding (timeout)", S::kFatal, A::kResetGpu),
      Row(48, "DoubleBitEcc", "double-bit ECC error", S::kFatal, A::kResetGpu),
      Row(62, "MicrocontrollerHalt", "internal micro-controller halt", S::kFatal, A::kResetGpu),
      Row(64, "RowRemapFailure", "page retirement or row remap failed", S::kFatal, A::kResetGpu),
      Row(74, "NvlinkError", "NVLink error", S::kFatal, A::kResetGpu),
      Row(79, "FallenOffBus", "GPU has fallen off the bus", S::kFatal, A::kRebootNode),
      Row(95, "UncontainedEcc", "uncontained ECC error", S::kFatal, A::kResetGpu),
      Row(109, "ContextSwitchTimeout", "context switch timeout", S::kFatal, A::kResetGpu),
      Row(119, "GspRpcTimeout", "GSP RPC timeout", S::kFatal, A::kResetGpu),
      Row(120, "GspError", "GSP error", S::kFatal, A::kResetGpu),
      Row(136, "NvlinkTrainingFailure", "NVLink ALI training failed", S::kFatal, A::kResetGpu),
      Row(140, "UnrecoveredEccEscape", "unrecovered ECC error escape", S::kFatal, A::kResetGpu),
      Row(143, "GpuInitFailure", "GPU initialization failure", S::kFatal, A::kResetGpu),
      Row(155, "NvlinkSwDefinedError", "NVLink software-defined error", S::kFatal, A::kResetGpu),
      Row(156, "ResourceRetirement", "resource retirement event", S::kFatal, A::kResetGpu),
      Row(158, "GpuFatalTimeout", "GPU fatal timeout", S::kFatal, A::kResetGpu),
      // Warnings: the GPU keeps running.
      Row(63, "RowRemapPending", "row remap recorded; takes effect at the next GPU reset",
          S::kWarning, A::kResetGpu),
      Row(94, "ContainedEcc", "contained ECC error; only the affected application is hit",
          S::kWarning, A::kRestartApp),
      Row(154, "RecoveryActionChanged", "GPU recovery action changed; see the linked XID",
          S::kWarning, A::kNone),
      // Information only.
      Row(92, "HighSingleBitEccRate", "high single-bit ECC error rate", S::kInfo, A::kNone),
  };
  // NVLink5 errors 144-150 share one meaning and action.
  const char* kNvlink5[] = {"NvlinkSaw",   "NvlinkRlw",   "NvlinkTlw", "NvlinkTrex",
                            "NvlinkNvlpw", "NvlinkNetir", "NvlinkMse"};
  for (int code = 144; code <= 150; ++code) {
    t.push_back(Row(code, kNvlink5[code - 144], "NVLink5 error", S::kFatal, A::kResetGpu));
  }
  std::sort(t.begin(), t.end(), [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; });
  return t;
}

}  // namespace

const std::vector<XidInfo>& XidTable() {
  static const std::vector<XidInfo> kTable = BuildTable();
  return kTable;
}

XidInfo LookupXid(int code) {
  const std::vector<XidInfo>& t = XidTable();
  auto it = std::lower_bound(t.begin(), t.end(), code,
                             [](const XidInfo& r, int c) { return r.code < c; });
  if (it != t.end() && it->code == code) return *it;
  XidInfo unknown;
  unknown.code = code;
  unknown.mnemonic = "UnknownXid";
  unknown.meaning = "XID " + std::to_string(code) + " is not in Fabrica's table";
  unknown.severity = Severity::kWarning;
  unknown.action = Action::kNone;
  return unknown;
}

}  // namespace fabrica::health
