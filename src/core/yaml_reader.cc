#include "core/yaml_reader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace fabrica {

YamlMap::YamlMap(Doc node, std::string path, std::string source)
    : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {}

std::string YamlMap::Where(const Doc& n) const {
  if (n.line() < 0) return source_;
  return source_ + ":" + std::to_string(n.line() + 1);
}

Status YamlMap::ErrorAt(const std::string& path, const std::string& message) const {
  // Walks "a.b[3].c": names and indexes, to the deepest node that exists.
  Doc n = node_, found = node_;
  size_t i = 0;
  while (n && i < path.size()) {
    if (path[i] == '.') ++i;
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string::npos) break;
      const std::string index = path.substr(i + 1, close - i - 1);
      if (index.empty() || index.size() > 9 ||
          index.find_first_not_of("0123456789") != std::string::npos)
        break;
      n = n.IsSequence() ? n[static_cast<size_t>(std::stoul(index))] : Doc();
      i = close + 1;
    } else {
      const size_t end = path.find_first_of(".[", i);
      n = n.IsMap() ? n[path.substr(i, end == std::string::npos ? end : end - i)] : Doc();
      i = end == std::string::npos ? path.size() : end;
    }
    if (n && n.line() >= 0) found = n;
  }
  return InvalidArgument(Where(found) + ": " + Path(path) + ": " + message);
}

std::string YamlMap::Path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

Status YamlMap::Error(const std::string& key, const std::string& message) const {
  // A misspelt field of a map read before is said instead: an error here is often its
  // consequence (a field "missing" that was misspelt). (Its own words are kept for Keep, which
  // says both.)
  Doc value = node_[key];
  const Doc& n = value ? value : node_;
  std::string own = Where(n) + ": " + Path(key) + ": " + message;
  if (!unknown_->empty()) {
    Status said = Unknowns();
    *last_error_ = {said.message(), std::move(own)};
    return said;
  }
  return InvalidArgument(own);
}

Status YamlMap::CheckIsMap() const {
  if (!node_.IsDefined() || node_.IsNull() || node_.IsMap()) return Status::Ok();  // absent = empty
  return InvalidArgument(Where(node_) + ": " + (path_.empty() ? "document" : path_) +
                         ": expected a mapping");
}

bool YamlMap::Has(const std::string& key) const {
  asked_.insert(key);
  return node_[key].IsDefined();
}

Doc YamlMap::Raw(const std::string& key) {
  read_.insert(key);
  return node_[key];
}

Result<std::string> YamlMap::Scalar(const std::string& key, bool* present) {
  read_.insert(key);
  *present = false;
  Doc n = node_[key];
  if (!n || n.IsNull()) return std::string();
  if (!n.IsScalar()) return Error(key, "expected a single value");
  *present = true;
  return n.Scalar();
}

Result<std::string> YamlMap::String(const std::string& key, std::optional<std::string> fallback) {
  bool present;
  ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));
  if (!present) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  return s;
}

Result<int64_t> YamlMap::Int(const std::string& key, std::optional<int64_t> fallback) {
  bool present;
  ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));
  if (!present) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  auto v = ParseNonNegativeInt(s);
  if (!v.ok()) return Error(key, v.status().message());
  return *v;
}

Result<int> YamlMap::Priority(const std::string& key, std::optional<int> fallback) {
  bool present;
  ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));
  if (!present) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  const bool negative = !s.empty() && s[0] == '-';
  auto v = ParseNonNegativeInt(std::string_view(s).substr(negative ? 1 : 0));
  if (!v.ok() || *v > 1'000'000'000)
    return Error(key, "expected an integer between -1000000000 and 1000000000, got '" + s + "'");
  return static_cast<int>(negative ? -*v : *v);
}

Result<double> YamlMap::Double(const std::string& key, std::optional<double> fallback) {
  bool present;
  ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));
  if (!present) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !std::isfinite(v)) {
    return Error(key, "expected a number, got '" + s + "'");
  }
  if (v < 0) return Error(key, "must not be negative, got " + s);
  return v;
}

Result<double> YamlMap::PositiveDouble(const std::string& key, std::optional<double> fallback) {
  bool present;
  ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));
  if (!present && fallback) return *fallback;
  if (!s.empty() && s[0] == '-') return Error(key, "must be greater than zero, got " + s);
  ASSIGN_OR_RETURN(double v, Double(key));
  if (v <= 0) return Error(key, "must be greater than zero, got " + s);
  return v;
}

Result<bool> YamlMap::Bool(const std::string& key, std::optional<bool> fallback) {
  bool present;
  ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));
  if (!present) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  if (s == "true") return true;
  if (s == "false") return false;
  return Error(key, "expected true or false, got '" + s + "'");
}

#define FABRICA_QUANTITY_READER(Method, Type, Parser)                                  \
  Result<Type> YamlMap::Method(const std::string& key, std::optional<Type> fallback) { \
    bool present;                                                                      \
    ASSIGN_OR_RETURN(std::string s, Scalar(key, &present));                            \
    if (!present) {                                                                    \
      if (fallback) return *fallback;                                                  \
      return Error(key, "required field is missing");                                  \
    }                                                                                  \
    auto v = Parser(s);                                                                \
    if (!v.ok()) return Error(key, v.status().message());                              \
    return *v;                                                                         \
  }
FABRICA_QUANTITY_READER(Cpu, MilliCpu, ParseMilliCpu)
FABRICA_QUANTITY_READER(Memory, MemoryMib, ParseMemoryMib)
FABRICA_QUANTITY_READER(Gpu, MilliGpu, ParseMilliGpu)
#undef FABRICA_QUANTITY_READER

Result<std::vector<std::string>> YamlMap::StringList(const std::string& key) {
  read_.insert(key);
  std::vector<std::string> out;
  Doc n = node_[key];
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return Error(key, "expected a list");
  for (const auto& item : n) {
    if (!item.IsScalar()) return Error(key, "expected a list of strings");
    out.push_back(item.Scalar());
  }
  return out;
}

Result<std::map<std::string, std::string>> YamlMap::StringMap(const std::string& key) {
  read_.insert(key);
  std::map<std::string, std::string> out;
  Doc n = node_[key];
  if (!n || n.IsNull()) return out;
  if (!n.IsMap()) return Error(key, "expected a mapping of strings");
  for (const auto& kv : n.entries()) {
    if (!kv.second.IsScalar()) return Error(key, "expected string values");
    out[kv.first.Scalar()] = kv.second.Scalar();
  }
  return out;
}

YamlMap YamlMap::Child(const std::string& key) { return Child(Raw(key), Path(key)); }

YamlMap YamlMap::Child(Doc node, std::string path) const {
  YamlMap child(std::move(node), std::move(path), source_);
  child.unknown_ = unknown_;
  child.kept_ = kept_;
  child.last_error_ = last_error_;
  child.outermost_ = false;
  return child;
}

std::string Misspelt(const std::string& key, const std::vector<std::string>& known) {
  const auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string k = lower(key);
  // What users of Kubernetes, Volcano and Slurm call a field Fabrica names otherwise (a trial
  // wrote `replicas:` and `gpus:`, with no hint), where the manifest's map has that field.
  static const std::map<std::string, std::string> kOtherNames = {
      {"replicas", "count"},
      {"parallelism", "count"},
      {"gpus", "devices"},
      {"gpu", "devices"},
      {"resources", "devices"},
      {"nvidia.com/gpu", "devices"},
      {"minavailable", "minCount"},
      {"minmember", "minCount"},
      {"queuename", "queue"},
      {"priorityclass", "priorityClassName"},
      {"activedeadlineseconds", "maxRuntimeSeconds"},
      {"timelimit", "maxRuntimeSeconds"},
      {"nodeaffinity", "affinity"},
      // Kueue's ClusterQueue names (a trial's `withinClusterQueue` was given no hint).
      {"withinclusterqueue", "withinQueue"},
      {"nominalquota", "guaranteed"},
      {"cohort", "parent"},
      {"resourcegroups", "quotas"},
      // A tenant's trust level (a trial wrote `trustLevel:`).
      {"trustlevel", "trust"},
      {"trustdomains", "trustDomain"},
  };
  const size_t most = std::max<size_t>(1, k.size() / 4);
  std::string best;
  size_t best_d = most + 1;
  bool tie = false;
  for (const std::string& name : known) {
    const std::string n = lower(name);
    if (n.size() > k.size() + most || k.size() > n.size() + most) continue;
    // Edit distance, two letters swapped counting as one edit ("wieght").
    std::vector<std::vector<size_t>> d(k.size() + 1, std::vector<size_t>(n.size() + 1));
    for (size_t i = 0; i <= k.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= n.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= k.size(); ++i)
      for (size_t j = 1; j <= n.size(); ++j) {
        d[i][j] = std::min(
            {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (k[i - 1] == n[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && k[i - 1] == n[j - 2] && k[i - 2] == n[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    const size_t dist = d[k.size()][n.size()];
    if (dist < best_d) {
      best_d = dist;
      best = name;
      tie = false;
    } else if (dist == best_d && name != best) {
      tie = true;
    }
  }
  if (best_d <= most && !tie) return best;
  // (A near spelling first: `gpu` where `gpus` is known is that, not `devices`.)
  if (auto other = kOtherNames.find(k);
      other != kOtherNames.end() &&
      std::find(known.begin(), known.end(), other->second) != known.end())
    return other->second;
  return "";
}

std::string UnknownFieldMessage(const std::string& key, const std::vector<std::string>& known) {
  const std::string guess = Misspelt(key, known);
  return guess.empty() ? "unknown field" : "unknown field (did you mean " + guess + "?)";
}

Status YamlMap::Finish() const {
  // Every unknown field, as strict Kubernetes decoding names them all: a file with two misspelt
  // keys is mended in one round, not two, even when they sit in different nested maps.
  for (const auto& kv : node_.entries()) {
    const std::string key = kv.first.Scalar();
    if (read_.count(key)) continue;
    std::vector<std::string> known(read_.begin(), read_.end());
    known.insert(known.end(), asked_.begin(), asked_.end());
    unknown_->push_back({kv.first.line(), Where(kv.first), Path(key), Misspelt(key, known)});
  }
  return outermost_ ? Unknowns() : Status::Ok();
}

bool YamlMap::Keep(const Status& s) {
  if (s.ok()) return true;
  std::string message = s.message();
  // An error Error replaced by the unknown fields is kept in its own words; one that is the
  // unknown fields (and the errors kept so far), as a child's parser returned them, is said.
  if (!unknown_->empty() && message == last_error_->first)
    message = last_error_->second;
  else if (!unknown_->empty() && message == Unknowns().message())
    return false;
  if (std::find(kept_->begin(), kept_->end(), message) == kept_->end()) kept_->push_back(message);
  return false;
}

Status YamlMap::Unknowns() const {
  if (unknown_->empty() && kept_->empty()) return Status::Ok();
  // Kept errors after the unknown fields; where each starts with the same source and no line
  // (a JSON body), that is said once.
  std::string kept;
  const std::string body = source_ + ": ";
  bool one_body = true;
  for (const std::string& k : *kept_) one_body = one_body && k.rfind(body, 0) == 0;
  for (const std::string& k : *kept_)
    kept += (kept.empty() ? "" : "; ") + (one_body ? k.substr(body.size()) : k);
  if (unknown_->empty()) return InvalidArgument((one_body ? body : "") + kept);
  // In file order (a JSON body has no lines: inner maps first, as they were read), each once
  // (a map read once per copy, as a node entry's gpus for each of its `count` nodes, says it
  // once) and with its line ("w.yaml:3: spec.a: unknown field; w.yaml:5: spec.b: unknown
  // field"); a JSON body's source is said once.
  std::vector<Unknown> unknown;
  std::set<std::pair<std::string, std::string>> said;
  for (const Unknown& u : *unknown_)
    if (said.insert({u.where, u.path}).second) unknown.push_back(u);
  std::stable_sort(unknown.begin(), unknown.end(),
                   [](const Unknown& a, const Unknown& b) { return a.line < b.line; });
  bool one_place = true;
  for (const Unknown& u : unknown) one_place = one_place && u.where == unknown.front().where;
  std::string msg = one_place ? unknown.front().where + ": " : "";
  for (size_t i = 0; i < unknown.size(); ++i) {
    msg += (i ? "; " : "") + (one_place ? "" : unknown[i].where + ": ") + unknown[i].path +
           ": unknown field" +
           (unknown[i].guess.empty() ? "" : " (did you mean " + unknown[i].guess + "?)");
  }
  if (!kept.empty())
    msg += "; " + (one_body && !(one_place && unknown.front().where == source_) ? body : "") + kept;
  return InvalidArgument(msg);
}

const char kYamlPastValueBudget[] =
    "its aliases repeat more values than the text could hold (an alias of an alias, nested?)";

size_t YamlValueBudget(const std::string& text) {
  return std::max<size_t>(size_t{1} << 18, 4 * text.size());
}

namespace {

// yaml-cpp's tree as a Doc, with the line each node starts on; `left` values more at most.
Doc ToDoc(const YAML::Node& n, size_t& left) {
  const int line = n.Mark().line;
  if (left-- == 0) throw YAML::ParserException(n.Mark(), kYamlPastValueBudget);
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      std::vector<Doc::Entry> entries;
      entries.reserve(n.size());
      std::set<std::string> keys;
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          throw YAML::ParserException(kv.first.Mark(),
                                      "a mapping key must be a plain value, not a list or a map");
        // (YAML forbids a key twice in one mapping; yaml-cpp keeps both, and the last read would
        // win silently.)
        if (!keys.insert(kv.first.Scalar()).second)
          throw YAML::ParserException(kv.first.Mark(),
                                      "mapping key \"" + kv.first.Scalar() +
                                          "\" is given twice (a missing \"---\" between two "
                                          "documents?)");
        entries.emplace_back(Doc::MakeScalar(kv.first.Scalar(), kv.first.Mark().line),
                             ToDoc(kv.second, left));
      }
      return Doc::MakeMap(std::move(entries), line);
    }
    case YAML::NodeType::Sequence: {
      std::vector<Doc> items;
      items.reserve(n.size());
      for (const auto& item : n) items.push_back(ToDoc(item, left));
      return Doc::MakeSequence(std::move(items), line);
    }
    case YAML::NodeType::Scalar:
      return Doc::MakeScalar(n.Scalar(), line);
    case YAML::NodeType::Null:
      return Doc::MakeNull(line);
    case YAML::NodeType::Undefined:
      break;
  }
  return Doc();
}

Status MalformedYaml(const YAML::Exception& e, const std::string& source) {
  return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) +
                         ": malformed YAML: " + e.msg);
}

}  // namespace

Result<Doc> LoadYaml(const std::string& text, const std::string& source) {
  try {
    size_t left = YamlValueBudget(text);
    return ToDoc(YAML::Load(text), left);
  } catch (const YAML::Exception& e) {
    return MalformedYaml(e, source);
  }
}

Result<std::vector<Doc>> LoadAllYaml(const std::string& text, const std::string& source) {
  try {
    std::vector<Doc> out;
    size_t left = YamlValueBudget(text);  // (for all its documents)
    for (const YAML::Node& doc : YAML::LoadAll(text)) out.push_back(ToDoc(doc, left));
    return out;
  } catch (const YAML::Exception& e) {
    return MalformedYaml(e, source);
  }
}

}  // namespace fabrica
