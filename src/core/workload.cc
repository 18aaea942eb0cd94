#include "core/workload.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/fleet.h"
#include "core/yaml_reader.h"

namespace fabrica {

const char* TrustLevelName(TrustLevel t) {
  switch (t) {
    case TrustLevel::kUntrusted:
      return "untrusted";
    case TrustLevel::kStandard:
      return "standard";
    case TrustLevel::kTrusted:
      return "trusted";
  }
  return "?";
}

Result<TrustLevel> ParseTrustLevel(const std::string& s) {
  if (s == "untrusted") return TrustLevel::kUntrusted;
  if (s == "standard") return TrustLevel::kStandard;
  if (s == "trusted") return TrustLevel::kTrusted;
  return InvalidArgument("trust must be untrusted, standard or trusted, got '" + s + "'");
}

const char* TopologyLevelName(TopologyLevel l) {
  switch (l) {
    case TopologyLevel::kNone:
      return "none";
    case TopologyLevel::kNvlinkDomain:
      return "nvlink";
    case TopologyLevel::kLeaf:
      return "leaf";
    case TopologyLevel::kRack:
      return "rack";
  }
  return "?";
}

MilliGpu DeviceRequest::TotalMilli() const {
  switch (kind) {
    case DeviceKind::kNone:
      return MilliGpu(0);
    case DeviceKind::kWhole:
      return MilliGpu(int64_t{gpus} * kMilliPerGpu);
    case DeviceKind::kFraction:
      return gpu_milli;
    case DeviceKind::kMig: {
      // Every MIG profile is named "<compute slices>g.<memory>"; a GPU has 7 compute slices.
      const int slices = mig_profile.empty() ? 0 : mig_profile[0] - '0';
      return MilliGpu(MigSliceMilli(slices));
    }
  }
  return MilliGpu(0);
}

int Workload::pod_count() const {
  int n = 0;
  for (const PodSet& ps : pod_sets) n += ps.count;
  return n;
}

Status ValidateMigProfileName(const std::string& p) {
  // "<compute slices>g.<memory>gb", and what a driver adds after it ("+me", "-me", "+gfx", …);
  // a GPU has 7 compute slices, and MIG profiles take 1, 2, 3, 4 or all 7 of them.
  size_t digits = 0;
  for (size_t i = 3; i < p.size() && p[i] >= '0' && p[i] <= '9'; ++i) ++digits;
  const std::string rest = p.size() >= 3 + digits ? p.substr(3 + digits) : "";
  // (The compute slices first, where they read as such: '9g.1tb' is told of its 9.)
  const bool slices_said = p.size() >= 2 && p[0] >= '0' && p[0] <= '9' && p[1] == 'g';
  if (!slices_said || p.size() < 3 || p[2] != '.' || digits == 0 || rest.rfind("gb", 0) != 0 ||
      (rest.size() > 2 && rest[2] != '+' && rest[2] != '-')) {
    if (!slices_said || std::string("12347").find(p[0]) != std::string::npos)
      return InvalidArgument("mig profile must look like '3g.40gb', got '" + p + "'");
  }
  if (std::string("12347").find(p[0]) == std::string::npos)
    return InvalidArgument("mig profile '" + p +
                           "' takes 1, 2, 3, 4 or 7 of a GPU's 7 compute slices, not " +
                           p.substr(0, 1));
  return Status::Ok();
}

namespace {

bool LabelName(const std::string& s) {
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s)
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

}  // namespace

Status ValidateLabel(const std::string& key, const std::string& value) {
  const size_t slash = key.rfind('/');
  const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  if (slash != std::string::npos) {
    const std::string prefix = key.substr(0, slash);
    bool ok = !prefix.empty() && prefix.size() <= 253;
    for (char c : prefix)
      ok = ok && (std::islower(static_cast<unsigned char>(c)) ||
                  std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.');
    if (!ok)
      return InvalidArgument("label key '" + key +
                             "': its prefix must be a DNS subdomain (lower-case letters, digits, "
                             "'-' and '.', at most 253)");
  }
  if (!LabelName(name))
    return InvalidArgument("label key '" + key +
                           "': the name must be 1-63 characters of letters, digits, '-', '_' "
                           "and '.', starting and ending with a letter or digit");
  if (!value.empty() && !LabelName(value))
    return InvalidArgument("label value '" + value +
                           "': must be empty or 1-63 characters of letters, digits, '-', '_' "
                           "and '.', starting and ending with a letter or digit");
  return Status::Ok();
}

Status ValidateName(const std::string& name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (name.empty() || name.size() > 63)
    return InvalidArgument("a name must have 1 to 63 characters");
  for (char c : name) {
    if (!alnum(c) && c != '-') {
      return InvalidArgument("'" + name +
                             "' is not a valid name: use lower-case letters, digits and '-'");
    }
  }
  if (!alnum(name.front()) || !alnum(name.back())) {
    return InvalidArgument("'" + name + "' must start and end with a letter or digit");
  }
  return Status::Ok();
}

Status ValidateTenantName(const std::string& name) {
  RETURN_IF_ERROR(ValidateName(name));
  if (name.find_first_not_of("0123456789") == std::string::npos)
    return InvalidArgument("'" + name + "' is not a valid tenant name: it needs a letter");
  for (const char* kind : {"workload", "node", "queue"})
    if (name == kind)
      return InvalidArgument("'" + name + "' is reserved: messages use it as a kind");
  return Status::Ok();
}

Result<std::vector<std::string>> ParseModelList(const std::string& spec) {
  std::vector<std::string> out;
  if (spec.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t bar = spec.find('|', start);
    std::string part =
        spec.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (part.empty()) return InvalidArgument("empty GPU model in '" + spec + "'");
    out.push_back(part);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

Status ValidateDeviceRequest(const DeviceRequest& r) {
  switch (r.kind) {
    case DeviceKind::kNone:
      return Status::Ok();
    case DeviceKind::kWhole:
      if (r.gpus < 1 || r.gpus > 64) return InvalidArgument("gpus must be between 1 and 64");
      return Status::Ok();
    case DeviceKind::kFraction:
      if (r.gpu_milli.IsNegative() || r.gpu_milli.value() >= kMilliPerGpu) {
        return InvalidArgument("a GPU fraction must be between 1m and 999m, got " +
                               std::to_string(r.gpu_milli.value()) + "m");
      }
      if (r.gpu_memory.IsNegative()) return InvalidArgument("gpuMemory must not be negative");
      if (r.gpu_milli.IsZero() && r.gpu_memory.IsZero()) {
        return InvalidArgument("a GPU fraction needs gpuMilli or gpuMemory");
      }
      return Status::Ok();
    case DeviceKind::kMig:
      if (r.mig_profile.size() < 3 || r.mig_profile[1] != 'g') {
        return InvalidArgument("mig profile must look like '3g.40gb', got '" + r.mig_profile + "'");
      }
      return Status::Ok();
  }
  return Status::Ok();
}

Result<DeviceRequest> DeviceRequestFromTrace(int64_t num_gpu, int64_t gpu_milli,
                                             const std::string& gpu_spec) {
  DeviceRequest r;
  ASSIGN_OR_RETURN(r.models, ParseModelList(gpu_spec));
  if (num_gpu < 0) return InvalidArgument("num_gpu must not be negative");
  if (gpu_milli < 0 || gpu_milli > kMilliPerGpu) {
    return InvalidArgument("gpu_milli must be between 0 and 1000, got " +
                           std::to_string(gpu_milli));
  }
  if (num_gpu == 0) {
    r.kind = DeviceKind::kNone;
  } else if (gpu_milli == kMilliPerGpu) {
    r.kind = DeviceKind::kWhole;
    r.gpus = static_cast<int>(num_gpu);
  } else {
    if (num_gpu != 1) return InvalidArgument("a fractional gpu_milli needs num_gpu == 1");
    if (gpu_milli == 0) return InvalidArgument("gpu_milli is 0 for a GPU pod");
    r.kind = DeviceKind::kFraction;
    r.gpu_milli = MilliGpu(gpu_milli);
  }
  RETURN_IF_ERROR(ValidateDeviceRequest(r));
  return r;
}

Result<TopologyConstraint> ParseTopologyConstraint(YamlMap& t) {
  RETURN_IF_ERROR(t.CheckIsMap());
  TopologyConstraint c;
  ASSIGN_OR_RETURN(std::string level, t.String("level"));
  Status bad_level = Status::Ok();
  if (level == "nvlink") {
    c.level = TopologyLevel::kNvlinkDomain;
  } else if (level == "leaf") {
    c.level = TopologyLevel::kLeaf;
  } else if (level == "rack") {
    c.level = TopologyLevel::kRack;
  } else if (level != "none") {
    bad_level = t.Error("level", "expected nvlink, leaf, rack or none, got '" + level + "'");
  }
  ASSIGN_OR_RETURN(std::string mode, t.String("mode", "preferred"));
  // (Both said at once, as unknown fields are: a trial's `{level: pod, mode: maybe}` was told
  // of its level alone.)
  if (mode != "required" && mode != "preferred") {
    Status bad_mode = t.Error("mode", "expected required or preferred, got '" + mode + "'");
    if (!bad_level.ok()) return InvalidArgument(bad_level.message() + "; " + bad_mode.message());
    return bad_mode;
  }
  RETURN_IF_ERROR(bad_level);
  c.required = mode == "required";
  RETURN_IF_ERROR(t.Finish());
  return c;
}

Result<DeviceRequest> ParseDeviceRequest(YamlMap& m) {
  DeviceRequest r;
  ASSIGN_OR_RETURN(int64_t gpus, m.Int("gpus", 0));
  const bool has_fraction = m.Has("gpuMilli") || m.Has("gpuMemory");
  const bool has_mig = m.Has("mig");
  ASSIGN_OR_RETURN(r.gpu_milli, m.Gpu("gpuMilli", MilliGpu(0)));
  ASSIGN_OR_RETURN(r.gpu_memory, m.Memory("gpuMemory", MemoryMib(0)));
  ASSIGN_OR_RETURN(r.mig_profile, m.String("mig", ""));
  // (A list with bars, or a YAML list: `models: [H100, H200]` reads as H100|H200, as a
  // ResourceFlavor's does; a trial's was refused as "expected a single value".)
  std::string models;
  if (m.Has("models") && m.Raw("models").IsSequence()) {
    ASSIGN_OR_RETURN(std::vector<std::string> each, m.StringList("models"));
    for (const std::string& one : each) models += (models.empty() ? "" : "|") + one;
    if (each.empty()) return m.Error("models", "an empty list: name a model, or leave it out");
  } else {
    ASSIGN_OR_RETURN(models, m.String("models", ""));
  }
  auto list = ParseModelList(models);
  if (!list.ok()) return m.Error("models", list.status().message());
  r.models = *list;
  RETURN_IF_ERROR(m.Finish());
  if ((gpus > 0) + has_fraction + has_mig > 1) {
    // (Named by a field the user set: a trial's `mig` with `gpuMemory` was told of `gpus`.)
    return m.Error(gpus > 0            ? "gpus"
                   : m.Has("gpuMilli") ? "gpuMilli"
                                       : "gpuMemory",
                   "give one of gpus, gpuMilli/gpuMemory or mig");
  }
  if (gpus > 0) {
    r.kind = DeviceKind::kWhole;
    r.gpus = static_cast<int>(std::min<int64_t>(gpus, 1000));
  } else if (has_fraction) {
    r.kind = DeviceKind::kFraction;
  } else if (has_mig) {
    r.kind = DeviceKind::kMig;
  }
  if (r.kind == DeviceKind::kNone && !r.models.empty()) {
    return m.Error("models",
                   "names GPU models for a pod that asks for no GPU (give gpus, "
                   "gpuMilli/gpuMemory or mig)");
  }
  Status st = ValidateDeviceRequest(r);
  if (!st.ok())
    return m.Error(r.kind == DeviceKind::kMig     ? "mig"
                   : r.kind == DeviceKind::kWhole ? "gpus"
                                                  : "gpuMilli",
                   st.message());
  return r;
}

bool Toleration::Tolerates(const Taint& taint) const {
  if (effect >= 0 && effect != static_cast<int>(taint.effect)) return false;
  if (key.empty()) return exists;  // (an empty key with Exists: every taint)
  return key == taint.key && (exists || value == taint.value);
}

bool Toleration::Covers(const Toleration& t) const {
  if (effect >= 0 && effect != t.effect) return false;
  if (!key.empty() && key != t.key) return false;
  if (key.empty() && !exists) return false;
  if (!exists && (t.exists || value != t.value)) return false;
  // (A toleration for a while is covered by one for as long or longer, or for good.)
  return seconds < 0 || (t.seconds >= 0 && t.seconds <= seconds);
}

std::string Toleration::ToString() const {
  std::string out = key.empty() ? "every taint" : key + (exists ? "" : "=" + value);
  if (effect >= 0) out += ":" + std::string(TaintEffectName(static_cast<TaintEffect>(effect)));
  if (seconds >= 0) out += " for " + std::to_string(seconds) + " s";
  return out;
}

bool ToleratesAllowed(const std::vector<Toleration>& allowed, const Toleration& t) {
  for (const Toleration& a : allowed)
    if (a.Covers(t)) return true;
  return false;
}

bool Tolerated(const std::vector<Toleration>& tolerations, const Taint& taint) {
  for (const Toleration& t : tolerations)
    if (t.Tolerates(taint)) return true;
  return false;
}

const char* SelectorOpName(SelectorOp op) {
  switch (op) {
    case SelectorOp::kIn:
      return "In";
    case SelectorOp::kNotIn:
      return "NotIn";
    case SelectorOp::kExists:
      return "Exists";
    case SelectorOp::kDoesNotExist:
      return "DoesNotExist";
    case SelectorOp::kGt:
      return "Gt";
    case SelectorOp::kLt:
      return "Lt";
  }
  return "?";
}

std::optional<int64_t> WholeNumber(const std::string& text) {
  int64_t v = 0;
  // (A sign '+' before a digit, as Go's ParseInt takes it.)
  const bool plus =
      text.size() > 1 && text[0] == '+' && std::isdigit(static_cast<unsigned char>(text[1]));
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data() + (plus ? 1 : 0), end, v);
  if (ec != std::errc() || at != end || text.empty()) return std::nullopt;
  return v;
}

bool NodeRequirement::Matches(const Node& node) const {
  const std::string* has = field ? &node.name.str() : node.Label(key);
  const auto in = [&] { return has && std::binary_search(values.begin(), values.end(), *has); };
  switch (op) {
    case SelectorOp::kIn:
      return in();
    case SelectorOp::kNotIn:
      return !in();
    case SelectorOp::kExists:
      return has != nullptr;
    case SelectorOp::kDoesNotExist:
      return has == nullptr;
    case SelectorOp::kGt:
    case SelectorOp::kLt: {
      const std::optional<int64_t> label = has ? WholeNumber(*has) : std::nullopt;
      const std::optional<int64_t> bound =
          values.size() == 1 ? WholeNumber(values[0]) : std::nullopt;
      if (!label || !bound) return false;
      return op == SelectorOp::kGt ? *label > *bound : *label < *bound;
    }
  }
  return false;
}

std::string NodeRequirement::ToString() const {
  std::string out = key + " " + SelectorOpName(op);
  if (op == SelectorOp::kGt || op == SelectorOp::kLt) return out + " " + values.at(0);
  if (op == SelectorOp::kIn || op == SelectorOp::kNotIn) {
    out += " (";
    for (size_t i = 0; i < values.size() && i < 5; ++i) out += (i ? "," : "") + values[i];
    out += values.size() > 5 ? ",...)" : ")";
  }
  return out;
}

bool NodeTerm::Matches(const Node& node) const {
  for (const NodeRequirement& r : requirements)
    if (!r.Matches(node)) return false;
  return !requirements.empty();  // (an empty term matches no node, as Kubernetes')
}

std::string NodeTerm::ToString() const {
  std::string out;
  for (size_t i = 0; i < requirements.size() && i < 5; ++i)
    out += (i ? ", " : "") + requirements[i].ToString();
  return out + (requirements.size() > 5 ? ", ..." : "");
}

int NodeSelector::Preference(const Node& node) const {
  int sum = 0;
  for (const PreferredTerm& p : preferred)
    if (p.term.Matches(node)) sum += p.weight;
  return sum;
}

bool NodeSelector::MatchesLabels(const Node& node) const {
  for (const auto& [key, value] : labels) {
    const std::string* has = node.Label(key);
    if (!has || *has != value) return false;
  }
  if (std::binary_search(exclude.begin(), exclude.end(), node.name.str())) return false;
  if (required.empty()) return true;
  for (const NodeTerm& t : required)
    if (t.Matches(node)) return true;
  return false;
}

const Taint* NodeSelector::Untolerated(const Node& node) const {
  for (const Taint& t : node.taints)
    if (t.effect != TaintEffect::kPreferNoSchedule && !Tolerated(tolerations, t)) return &t;
  return nullptr;
}

int NodeSelector::SoftUntolerated(const Node& node) const {
  int count = 0;
  for (const Taint& t : node.taints)
    count += t.effect == TaintEffect::kPreferNoSchedule && !Tolerated(tolerations, t);
  return count;
}

bool NodeSelector::Matches(const Node& node) const {
  return MatchesLabels(node) && !Untolerated(node);
}

std::string NodeSelector::Describe() const {
  std::string out;
  if (!labels.empty()) {
    out = "nodeSelector ";
    bool first = true;
    for (const auto& [k, v] : labels) {
      out += (first ? "" : ",") + k + "=" + v;
      first = false;
    }
  }
  if (!exclude.empty()) {
    out += std::string(out.empty() ? "" : ", ") + "excludeNodes ";
    for (size_t i = 0; i < exclude.size() && i < 5; ++i) out += (i ? "," : "") + exclude[i];
    if (exclude.size() > 5) out += ",...";
  }
  if (!required.empty()) {
    out += std::string(out.empty() ? "" : ", ") + "nodeAffinity ";
    for (size_t i = 0; i < required.size() && i < 3; ++i)
      out += (i ? " or (" : "(") + required[i].ToString() + ")";
    if (required.size() > 3) out += " or ...";
  }
  return out;
}

namespace {

// Reads the common metadata: the name (validated), labels, and the fields the server sets
// (accepted on input so that a read-modify-write round trip works, and ignored).
Result<std::string> ReadObjectMeta(YamlMap& meta, std::map<std::string, std::string>* labels) {
  ASSIGN_OR_RETURN(std::string name, meta.String("name"));
  Status valid = ValidateName(name);
  if (!valid.ok()) return meta.Error("name", valid.message());
  ASSIGN_OR_RETURN(*labels, meta.StringMap("labels"));
  for (const auto& [k, v] : *labels) {
    if (k.empty() || k.size() > 253 || v.size() > 63) {
      return meta.Error("labels", "label '" + k + "' is empty or too long");
    }
  }
  for (const char* server_set : {"resourceVersion", "uid", "creationTimestamp", "generation",
                                 "annotations", "deletionTimestamp"}) {
    meta.Raw(server_set);
  }
  return name;
}

// spec.tolerations: a list of {key, operator, value, effect, tolerationSeconds}, as a
// Kubernetes pod's; checked as Kubernetes checks them.
Result<std::vector<Toleration>> ParseTolerations(YamlMap& spec,
                                                 const std::string& field = "tolerations") {
  Doc list = spec.Raw(field);
  std::vector<Toleration> out;
  if (!list || list.IsNull()) return out;
  if (!list.IsSequence()) return spec.Error(field, "expected a list");
  if (list.size() > 100) return spec.Error(field, "at most 100 tolerations");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = spec.Path(field) + "[" + std::to_string(i) + "]";
    YamlMap t = spec.Child(list[i], path);
    RETURN_IF_ERROR(t.CheckIsMap());
    Toleration tol;
    ASSIGN_OR_RETURN(tol.key, t.String("key", ""));
    ASSIGN_OR_RETURN(std::string op, t.String("operator", "Equal"));
    ASSIGN_OR_RETURN(tol.value, t.String("value", ""));
    ASSIGN_OR_RETURN(std::string effect, t.String("effect", ""));
    // (null, as absent: for good.)
    const Doc secs = t.Raw("tolerationSeconds");
    const bool timed = secs && !secs.IsNull();
    if (timed) {
      ASSIGN_OR_RETURN(tol.seconds, t.Int("tolerationSeconds"));
    }
    RETURN_IF_ERROR(t.Finish());
    if (op != "Equal" && op != "Exists")
      return t.Error("operator", "'" + op + "' is not Equal or Exists");
    tol.exists = op == "Exists";
    if (!tol.key.empty())
      if (Status s = ValidateLabel(tol.key, tol.value); !s.ok())
        return t.Error(s.message().rfind("label value", 0) == 0 ? "value" : "key", s.message());
    if (tol.key.empty() && !tol.exists)
      return t.Error("operator", "must be Exists when key is empty (it tolerates every taint)");
    if (tol.exists && !tol.value.empty())
      return t.Error("value", "must be empty when operator is Exists");
    if (!effect.empty()) {
      Result<TaintEffect> e = ParseTaintEffect(effect);
      if (!e.ok()) return t.Error("effect", e.status().message());
      tol.effect = static_cast<int>(*e);
    }
    if (timed) {
      if (tol.effect != static_cast<int>(TaintEffect::kNoExecute))
        return t.Error("tolerationSeconds", "only a NoExecute toleration has seconds");
      // (Kubernetes reads 0 and below as "evict at once": 0 says so.)
      if (tol.seconds < 0 || tol.seconds > kMaxRunSeconds)
        return t.Error("tolerationSeconds", "must be 0 to one year (0: evicted at once)");
    }
    out.push_back(tol);
  }
  // (In their order: a taint is tolerated by the first that matches it, whose seconds count.)
  return out;
}

// A node selector term's matchExpressions and matchFields (`t`): at least one requirement,
// unless `may_be_empty` (a preferred term's, which Kubernetes skips when empty).
Result<NodeTerm> ParseNodeTerm(YamlMap& t, bool may_be_empty = false) {
  RETURN_IF_ERROR(t.CheckIsMap());
  NodeTerm term;
  for (const char* list_name : {"matchExpressions", "matchFields"}) {
    const bool field = std::string(list_name) == "matchFields";
    Doc list = t.Raw(list_name);
    if (!list || list.IsNull()) continue;
    if (!list.IsSequence()) return t.Error(list_name, "expected a list");
    if (list.size() > 100) return t.Error(list_name, "at most 100 requirements");
    for (size_t i = 0; i < list.size(); ++i) {
      YamlMap e = t.Child(list[i], t.Path(list_name) + "[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(e.CheckIsMap());
      NodeRequirement r;
      r.field = field;
      ASSIGN_OR_RETURN(r.key, e.String("key"));
      ASSIGN_OR_RETURN(std::string op, e.String("operator"));
      ASSIGN_OR_RETURN(r.values, e.StringList("values"));
      RETURN_IF_ERROR(e.Finish());
      static const SelectorOp kOps[] = {SelectorOp::kIn,     SelectorOp::kNotIn,
                                        SelectorOp::kExists, SelectorOp::kDoesNotExist,
                                        SelectorOp::kGt,     SelectorOp::kLt};
      bool known = false;
      for (SelectorOp o : kOps)
        if (op == SelectorOpName(o)) {
          r.op = o;
          known = true;
        }
      if (!known)
        return e.Error("operator", "'" + op + "' is not In, NotIn, Exists, DoesNotExist, Gt or Lt");
      if (field) {
        // (Kubernetes' matchFields: the node's name, In or NotIn a list of names.)
        if (r.key != "metadata.name")
          return e.Error("key",
                         "'" + r.key + "' is not a field a node is matched by (metadata.name)");
        if (r.op != SelectorOp::kIn && r.op != SelectorOp::kNotIn)
          return e.Error("operator", "a matchFields entry is In or NotIn");
      } else if (Status s = ValidateLabel(r.key, ""); !s.ok()) {
        return e.Error("key", s.message());
      }
      switch (r.op) {
        case SelectorOp::kIn:
        case SelectorOp::kNotIn:
          if (r.values.empty() || r.values.size() > 1000)
            return e.Error("values", "In and NotIn need 1 to 1000 values");
          for (const std::string& v : r.values) {
            const Status s = field ? (v.empty() || v.size() > 253
                                          ? InvalidArgument("'" + v + "' is not a node name")
                                          : Status::Ok())
                                   : ValidateLabel(r.key, v);
            if (!s.ok()) return e.Error("values", s.message());
          }
          break;
        case SelectorOp::kExists:
        case SelectorOp::kDoesNotExist:
          if (!r.values.empty())
            return e.Error("values", std::string("must be empty for ") + SelectorOpName(r.op));
          break;
        case SelectorOp::kGt:
        case SelectorOp::kLt:
          if (r.values.size() != 1 || !WholeNumber(r.values[0]))
            return e.Error("values", std::string(SelectorOpName(r.op)) +
                                         " needs exactly one value, a whole number");
          break;
      }
      std::sort(r.values.begin(), r.values.end());
      r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
      term.requirements.push_back(std::move(r));
    }
  }
  RETURN_IF_ERROR(t.Finish());
  if (term.requirements.empty() && !may_be_empty)
    return t.Error("matchExpressions",
                   "a term needs at least one requirement (an empty term matches no node)");
  return term;
}

// spec.affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:
// {nodeSelectorTerms: [...]}, preferredDuringSchedulingIgnoredDuringExecution: [{weight,
// preference}]}}, as a Kubernetes pod's.
Status ParseAffinity(YamlMap& spec, NodeSelector* nodes) {
  YamlMap affinity = spec.Child("affinity");
  RETURN_IF_ERROR(affinity.CheckIsMap());
  // (A null field is an absent one, as in Kubernetes.)
  for (const char* pod : {"podAffinity", "podAntiAffinity"})
    if (Doc d = affinity.Raw(pod); d && !d.IsNull())
      return affinity.Error(pod, "not supported: Fabrica places by node affinity only");
  if (!affinity.Has("nodeAffinity")) return affinity.Finish();
  YamlMap na = affinity.Child("nodeAffinity");
  RETURN_IF_ERROR(na.CheckIsMap());
  const char* kRequired = "requiredDuringSchedulingIgnoredDuringExecution";
  const char* kPreferred = "preferredDuringSchedulingIgnoredDuringExecution";
  if (Doc d = na.Raw(kRequired); d && !d.IsNull()) {
    YamlMap req = na.Child(kRequired);
    RETURN_IF_ERROR(req.CheckIsMap());
    Doc terms = req.Raw("nodeSelectorTerms");
    if (!terms || !terms.IsSequence() || terms.size() == 0 || terms.size() > 100) {
      RETURN_IF_ERROR(req.Finish());  // (a misspelt nodeSelectorTerms is named as one)
      return req.Error("nodeSelectorTerms", "expected a list of 1 to 100 terms (any may match)");
    }
    for (size_t i = 0; i < terms.size(); ++i) {
      YamlMap t =
          req.Child(terms[i], req.Path("nodeSelectorTerms") + "[" + std::to_string(i) + "]");
      ASSIGN_OR_RETURN(NodeTerm term, ParseNodeTerm(t));
      nodes->required.push_back(std::move(term));
    }
    RETURN_IF_ERROR(req.Finish());
  }
  Doc prefs = na.Raw(kPreferred);
  if (prefs && !prefs.IsNull()) {
    if (!prefs.IsSequence() || prefs.size() > 100)
      return na.Error(kPreferred, "expected a list of at most 100 weighted terms");
    for (size_t i = 0; i < prefs.size(); ++i) {
      YamlMap p = na.Child(prefs[i], na.Path(kPreferred) + "[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(p.CheckIsMap());
      PreferredTerm pref;
      // (Both are needed; read first, so that a misspelt one is named as one.)
      ASSIGN_OR_RETURN(int64_t weight, p.Int("weight", 0));
      const bool has_preference = p.Has("preference");
      YamlMap t = p.Child("preference");
      if (has_preference) {
        ASSIGN_OR_RETURN(pref.term, ParseNodeTerm(t, /*may_be_empty=*/true));
      }
      RETURN_IF_ERROR(p.Finish());
      if (weight < 1 || weight > 100)
        return p.Error("weight", "a whole number between 1 and 100 is needed");
      pref.weight = static_cast<int>(weight);
      if (!has_preference) return p.Error("preference", "required (the term it prefers)");
      // (An empty preference prefers no node: Kubernetes skips it.)
      if (!pref.term.requirements.empty()) nodes->preferred.push_back(std::move(pref));
    }
  }
  RETURN_IF_ERROR(na.Finish());
  return affinity.Finish();
}

Result<Workload> ParseOneWorkload(YamlMap& m) {
  Workload w;
  ASSIGN_OR_RETURN(std::string kind, m.String("kind", "Workload"));
  if (kind != "Workload") {
    return m.Error("kind", "expected Workload or WorkloadList, got '" + kind + "'");
  }
  ASSIGN_OR_RETURN(std::string api, m.String("apiVersion", "fabrica.dev/v1"));
  if (api != "fabrica.dev/v1") return m.Error("apiVersion", "expected fabrica.dev/v1");
  YamlMap meta = m.Child("metadata");
  RETURN_IF_ERROR(meta.CheckIsMap());
  ASSIGN_OR_RETURN(std::string name, ReadObjectMeta(meta, &w.labels));
  ASSIGN_OR_RETURN(std::string tenant, meta.String("tenant", ""));
  ASSIGN_OR_RETURN(std::string ns, meta.String("namespace", ""));
  if (!tenant.empty() && !ns.empty() && tenant != ns) {
    return meta.Error("namespace", "differs from metadata.tenant '" + tenant + "'");
  }
  RETURN_IF_ERROR(meta.Finish());
  w.name = WorkloadId(name);
  w.tenant = TenantId(tenant.empty() ? ns : tenant);
  m.Raw("status");  // written by the server; accepted and ignored on input

  const Doc spec_node = m.Raw("spec");
  YamlMap spec = m.Child(spec_node, m.Path("spec"));
  RETURN_IF_ERROR(spec.CheckIsMap());
  ASSIGN_OR_RETURN(std::string queue, spec.String("queue", ""));
  w.queue = QueueId(queue);
  ASSIGN_OR_RETURN(w.priority, spec.Priority("priority", 0));
  ASSIGN_OR_RETURN(w.priority_class, spec.String("priorityClassName", ""));
  if (!w.priority_class.empty())
    if (Status s = ValidateName(w.priority_class); !s.ok())
      return spec.Error("priorityClassName", s.message());
  ASSIGN_OR_RETURN(w.gang, spec.Bool("gang", false));
  ASSIGN_OR_RETURN(w.preemptible, spec.Bool("preemptible", true));
  ASSIGN_OR_RETURN(std::string preemption_policy,
                   spec.String("preemptionPolicy", "PreemptLowerPriority"));
  if (preemption_policy != "PreemptLowerPriority" && preemption_policy != "Never")
    return spec.Error("preemptionPolicy",
                      "must be PreemptLowerPriority or Never, got '" + preemption_policy + "'");
  w.preempts = preemption_policy != "Never";
  ASSIGN_OR_RETURN(w.active, spec.Bool("active", true));
  ASSIGN_OR_RETURN(w.min_runtime_seconds, spec.Int("minRuntimeSeconds", 0));
  if (w.min_runtime_seconds > kMaxRunSeconds)
    return spec.Error("minRuntimeSeconds", "must be at most one year");
  ASSIGN_OR_RETURN(w.max_runtime_seconds, spec.Int("maxRuntimeSeconds", 0));
  if (w.max_runtime_seconds > kMaxRunSeconds)
    return spec.Error("maxRuntimeSeconds", "must be at most one year");
  if (w.max_runtime_seconds > 0 && w.max_runtime_seconds < w.min_runtime_seconds)
    return spec.Error("maxRuntimeSeconds", "must not be below minRuntimeSeconds (" +
                                               std::to_string(w.min_runtime_seconds) + ")");
  ASSIGN_OR_RETURN(w.checkpoint_interval_seconds, spec.Int("checkpointIntervalSeconds", 0));
  if (w.checkpoint_interval_seconds > kMaxRunSeconds)
    return spec.Error("checkpointIntervalSeconds", "must be at most one year");
  if (spec.Has("run")) {
    YamlMap run = spec.Child("run");
    RETURN_IF_ERROR(run.CheckIsMap());
    ASSIGN_OR_RETURN(w.run.command, run.StringList("command"));
    ASSIGN_OR_RETURN(w.run.duration_seconds, run.Int("durationSeconds", 0));
    RETURN_IF_ERROR(run.Finish());
  }
  if (spec.Has("topology")) {
    YamlMap t = spec.Child("topology");
    ASSIGN_OR_RETURN(w.topology, ParseTopologyConstraint(t));
  }
  NodeSelector nodes;
  ASSIGN_OR_RETURN(nodes.labels, spec.StringMap("nodeSelector"));
  for (const auto& [k, v] : nodes.labels)
    if (Status s = ValidateLabel(k, v); !s.ok()) return spec.Error("nodeSelector", s.message());
  if (spec.Has("excludeNodes")) {
    ASSIGN_OR_RETURN(nodes.exclude, spec.StringList("excludeNodes"));
    if (nodes.exclude.size() > 1000) return spec.Error("excludeNodes", "at most 1000 nodes");
    for (const std::string& n : nodes.exclude)
      if (n.empty() || n.size() > 253)
        return spec.Error("excludeNodes", "'" + n + "' is not a node name");
    std::sort(nodes.exclude.begin(), nodes.exclude.end());
    nodes.exclude.erase(std::unique(nodes.exclude.begin(), nodes.exclude.end()),
                        nodes.exclude.end());
  }
  if (spec.Has("tolerations")) {
    ASSIGN_OR_RETURN(nodes.tolerations, ParseTolerations(spec));
  }
  if (spec.Has("affinity")) RETURN_IF_ERROR(ParseAffinity(spec, &nodes));
  Doc sets = spec.Raw("podSets");
  if (!sets || !sets.IsSequence() || sets.size() == 0) {
    // (A misspelt key names itself: "podsets" is not a field.)
    if (!sets && spec_node && spec_node.IsMap())
      for (const auto& [k, v] : spec_node.entries()) {
        const std::string& key = k.Scalar();
        std::string lower = key;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "podsets" || lower == "pod_sets" || lower == "pods")
          return spec.Error(key, "unknown field (did you mean podSets?)");
      }
    return spec.Error("podSets", "expected a non-empty list of pod sets");
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    YamlMap ps = spec.Child(sets[i], spec.Path("podSets") + "[" + std::to_string(i) + "]");
    RETURN_IF_ERROR(ps.CheckIsMap());
    PodSet set;
    ASSIGN_OR_RETURN(set.name, ps.String("name", "main"));
    // (Its pods are named after it, "main-0", "main-1" ...: one name per set.)
    if (Status s = ValidateName(set.name); !s.ok()) return ps.Error("name", s.message());
    for (const PodSet& other : w.pod_sets)
      if (other.name == set.name)
        return ps.Error("name", "'" + set.name + "' names another pod set too (pods are named " +
                                    "after their set, so each set needs its own name)");
    ASSIGN_OR_RETURN(int64_t count, ps.Int("count", 1));
    if (count < 1 || count > 100000) return ps.Error("count", "must be between 1 and 100000");
    set.count = static_cast<int>(count);
    if (ps.Has("minCount")) {
      ASSIGN_OR_RETURN(int64_t least, ps.Int("minCount"));
      if (least < 1 || least > count)
        return ps.Error("minCount", "must be between 1 and count (" + std::to_string(count) + ")");
      set.min_count = least < count ? static_cast<int>(least) : 0;
    }
    ASSIGN_OR_RETURN(set.cpu, ps.Cpu("cpu", MilliCpu(0)));
    ASSIGN_OR_RETURN(set.memory, ps.Memory("memory", MemoryMib(0)));
    if (ps.Has("devices")) {
      YamlMap dm = ps.Child("devices");
      RETURN_IF_ERROR(dm.CheckIsMap());
      ASSIGN_OR_RETURN(set.device, ParseDeviceRequest(dm));
    }
    RETURN_IF_ERROR(ps.Finish());
    set.nodes = nodes;
    w.pod_sets.push_back(std::move(set));
  }
  RETURN_IF_ERROR(spec.Finish());
  RETURN_IF_ERROR(m.Finish());
  return w;
}

// `kind: WorkloadList`: an `items:` list of Workloads, each read as a document of its own (an
// item may repeat `kind: Workload`), so that errors name `items[i]....`.
Status ParseWorkloadList(YamlMap& m, std::vector<Workload>& out) {
  ASSIGN_OR_RETURN(std::string api, m.String("apiVersion", "fabrica.dev/v1"));
  if (api != "fabrica.dev/v1") return m.Error("apiVersion", "expected fabrica.dev/v1");
  Doc items = m.Raw("items");
  if (!items || !items.IsSequence()) return m.Error("items", "expected a list of workloads");
  for (size_t i = 0; i < items.size(); ++i) {
    YamlMap item = m.Child(items[i], m.Path("items") + "[" + std::to_string(i) + "]");
    RETURN_IF_ERROR(item.CheckIsMap());
    ASSIGN_OR_RETURN(Workload w, ParseOneWorkload(item));
    out.push_back(std::move(w));
  }
  return m.Finish();
}

}  // namespace

Result<Budget> ParseBudget(YamlMap& b) {
  RETURN_IF_ERROR(b.CheckIsMap());
  Budget budget;
  ASSIGN_OR_RETURN(std::string amount, b.String("amount"));
  auto micros = ParseMoneyMicros(amount);
  if (!micros.ok()) return b.Error("amount", micros.status().message());
  budget.amount_micros = *micros;
  if (budget.amount_micros <= 0) return b.Error("amount", "must be more than zero");
  ASSIGN_OR_RETURN(budget.period, b.String("period", "month"));
  if (budget.period != "day" && budget.period != "week" && budget.period != "month") {
    return b.Error("period", "'" + budget.period + "' is not one of day, week, month");
  }
  if (b.Has("alertPercent")) {
    Doc alerts = b.Raw("alertPercent");
    if (!alerts.IsSequence()) return b.Error("alertPercent", "expected a list of percentages");
    budget.alert_percent.clear();
    for (const Doc& a : alerts) {
      auto v = ParseNonNegativeInt(a.IsScalar() ? a.Scalar() : "");
      if (!v.ok() || *v < 1 || *v > 1000) {
        return b.Error("alertPercent", "each entry must be a whole percentage 1..1000");
      }
      budget.alert_percent.push_back(static_cast<int>(*v));
    }
  }
  ASSIGN_OR_RETURN(budget.enforce, b.Bool("enforce", false));
  RETURN_IF_ERROR(b.Finish());
  return budget;
}

namespace {

Result<Tenant> ParseTenant(YamlMap& m) {
  ASSIGN_OR_RETURN(std::string api, m.String("apiVersion", "fabrica.dev/v1"));
  if (api != "fabrica.dev/v1") return m.Error("apiVersion", "expected fabrica.dev/v1");
  YamlMap meta = m.Child("metadata");
  RETURN_IF_ERROR(meta.CheckIsMap());
  Tenant t;
  std::map<std::string, std::string> labels;
  ASSIGN_OR_RETURN(std::string name, ReadObjectMeta(meta, &labels));
  t.name = TenantId(name);
  RETURN_IF_ERROR(meta.Finish());
  m.Raw("status");
  YamlMap spec = m.Child("spec");
  RETURN_IF_ERROR(spec.CheckIsMap());
  ASSIGN_OR_RETURN(std::string trust, spec.String("trust", "standard"));
  auto level = ParseTrustLevel(trust);
  if (!level.ok()) return spec.Error("trust", level.status().message());
  t.trust = *level;
  ASSIGN_OR_RETURN(t.trust_domain, spec.String("trustDomain", name));
  ASSIGN_OR_RETURN(t.exclusive_nodes, spec.Bool("exclusiveNodes", false));
  if (t.exclusive_nodes && t.trust != TrustLevel::kUntrusted) {
    return spec.Error("exclusiveNodes", "only an untrusted tenant may ask for nodes of its own");
  }
  if (spec.Has("budget")) {
    YamlMap b = spec.Child("budget");
    ASSIGN_OR_RETURN(Budget budget, ParseBudget(b));
    t.budget = budget;
  }
  ASSIGN_OR_RETURN(t.node_selector, spec.StringMap("nodeSelector"));
  for (const auto& [k, v] : t.node_selector)
    if (Status s = ValidateLabel(k, v); !s.ok()) return spec.Error("nodeSelector", s.message());
  ASSIGN_OR_RETURN(t.tolerations, ParseTolerations(spec, "tolerations"));
  if (spec.Has("allowedTolerations")) {
    ASSIGN_OR_RETURN(t.allowed_tolerations, ParseTolerations(spec, "allowedTolerations"));
    // (Its own workloads' given tolerations must be allowed too, or none of them could start.)
    for (size_t i = 0; i < t.tolerations.size(); ++i)
      if (!ToleratesAllowed(*t.allowed_tolerations, t.tolerations[i]))
        return spec.Error("tolerations", "tolerations[" + std::to_string(i) + "] (" +
                                             t.tolerations[i].ToString() +
                                             ") is not among its allowedTolerations");
  }
  RETURN_IF_ERROR(spec.Finish());
  RETURN_IF_ERROR(m.Finish());
  return t;
}

// Adds one Tenant, Workload or WorkloadList document to `out`.
Status AddManifestDocument(const Doc& doc, const std::string& prefix, const std::string& source,
                           Manifest* out) {
  YamlMap m(doc, prefix, source);
  RETURN_IF_ERROR(m.CheckIsMap());
  ASSIGN_OR_RETURN(std::string kind, m.String("kind", "Workload"));
  if (kind == "WorkloadList") return ParseWorkloadList(m, out->workloads);
  if (kind == "Tenant") {
    ASSIGN_OR_RETURN(Tenant t, ParseTenant(m));
    for (const Tenant& other : out->tenants) {
      if (other.name == t.name) {
        return m.Error("metadata", "duplicate tenant '" + t.name.str() + "'");
      }
    }
    out->tenants.push_back(std::move(t));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Workload w, ParseOneWorkload(m));
  out->workloads.push_back(std::move(w));
  return Status::Ok();
}

}  // namespace

Result<Manifest> ParseManifestYaml(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(std::vector<Doc> docs, LoadAllYaml(text, source));
  Manifest out;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (docs[d].IsNull()) continue;
    const std::string prefix = docs.size() > 1 ? "doc" + std::to_string(d) : "";
    RETURN_IF_ERROR(AddManifestDocument(docs[d], prefix, source, &out));
  }
  return out;
}

Result<Manifest> ParseManifestJson(const nlohmann::json& doc, const std::string& source) {
  Manifest out;
  RETURN_IF_ERROR(AddManifestDocument(Doc::FromJson(doc), "", source, &out));
  return out;
}

Result<std::vector<Workload>> ParseWorkloadYaml(const std::string& text,
                                                const std::string& source) {
  ASSIGN_OR_RETURN(Manifest m, ParseManifestYaml(text, source));
  if (!m.tenants.empty()) {
    return InvalidArgument(source + ": Tenant documents are not allowed here, only workloads");
  }
  if (m.workloads.empty()) return InvalidArgument(source + ": no workload in the file");
  return m.workloads;
}

}  // namespace fabrica
