#include "meter/dcgm.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace fabrica {
namespace {

constexpr size_t kMaxLineBytes = size_t{64} * 1024;
constexpr uint64_t kInt64Blank = 0x7ffffffffffffff0ULL;  // DCGM_INT64_BLANK
constexpr uint64_t kInt32Blank = 0x7ffffff0;             // DCGM_INT32_BLANK
constexpr uint64_t kInt32Max = 0x7fffffff;
constexpr double kFp64Blank = 140737488355328.0;  // DCGM_FP64_BLANK
constexpr std::string_view kGrEngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
constexpr std::string_view kGpuUtil = "DCGM_FI_DEV_GPU_UTIL";

enum class ValueKind { kNumber, kBlank, kNonFinite };

// The labels Fabrica reads. Every other label is checked for syntax and dropped.
enum Slot { kUuid, kGpuInstance, kHostnameLower, kHostnameUpper, kModel, kGpu, kOther, kSlots };

// One sample line. The views point into the page or into the reader's scratch buffers (for values
// that had escapes) and are valid until the next line is read.
struct SampleLine {
  int line_no = 0;
  std::string_view metric;
  std::array<std::string_view, kSlots> labels;
  ValueKind kind = ValueKind::kNumber;
  double value = 0;
  bool has_timestamp = false;
  int64_t timestamp_ms = 0;
};

Slot SlotOf(std::string_view name) {
  switch (name.size()) {
    case 3:
      return name == "gpu" ? kGpu : kOther;
    case 4:
      return name == "UUID" || name == "uuid" ? kUuid : kOther;
    case 8:
      if (name == "GPU_I_ID") return kGpuInstance;
      if (name == "hostname") return kHostnameLower;
      return name == "Hostname" ? kHostnameUpper : kOther;
    case 9:
      return name == "modelName" ? kModel : kOther;
    default:
      return kOther;
  }
}

bool IsBlankOrTab(char c) { return c == ' ' || c == '\t'; }
bool IsLabelStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsLabelChar(char c) { return IsLabelStart(c) || (c >= '0' && c <= '9'); }
bool IsMetricStart(char c) { return IsLabelStart(c) || c == ':'; }
bool IsMetricChar(char c) { return IsLabelChar(c) || c == ':'; }

// Quotes a token for an error message, cut short so that a huge token does not make a huge one.
std::string Quote(std::string_view token) {
  constexpr size_t kMaxShown = 40;
  if (token.size() <= kMaxShown) return "'" + std::string(token) + "'";
  return "'" + std::string(token.substr(0, kMaxShown)) + "...'";
}

// The INT32 rule applied to any number, however written (Prometheus federation rewrites
// 2147483632 as 2.147483632e+09).
bool IsInt32Blank(double d) {
  return d >= static_cast<double>(kInt32Blank) && d <= static_cast<double>(kInt32Max);
}

enum class ValueSyntax { kOk, kNotANumber, kOutOfRange };

// Reads one token as a sample value and classifies it as a number, a DCGM blank or NaN/Inf
// (see dcgm.h for the blank rules).
ValueSyntax ReadValue(std::string_view token, ValueKind* kind, double* value) {
  if (!token.empty() && token.front() == '+') {
    token.remove_prefix(1);  // from_chars rejects '+'
    if (!token.empty() && token.front() == '-') return ValueSyntax::kNotANumber;
  }
  std::string_view digits = token;
  if (!digits.empty() && digits.front() == '-') digits.remove_prefix(1);
  if (digits.empty() || digits.front() == '+' || digits.front() == '-')
    return ValueSyntax::kNotANumber;
  const bool integer_text =
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (integer_text && digits.size() == token.size()) {
    // Non-negative integers are read exactly, so that the int64 sentinels, which all round to
    // 2^63 as doubles, are told apart from real values near them.
    uint64_t u = 0;
    const std::errc ec = std::from_chars(token.data(), token.data() + token.size(), u).ec;
    if (ec == std::errc::result_out_of_range || u >= kInt64Blank ||
        (u >= kInt32Blank && u <= kInt32Max)) {
      *kind = ValueKind::kBlank;
      return ValueSyntax::kOk;
    }
    *kind = ValueKind::kNumber;
    *value = static_cast<double>(u);
    return ValueSyntax::kOk;  // all digits, so from_chars read the whole token
  }
  double d = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), d);
  if (end != token.data() + token.size()) return ValueSyntax::kNotANumber;
  if (ec == std::errc::result_out_of_range) return ValueSyntax::kOutOfRange;
  if (ec != std::errc()) return ValueSyntax::kNotANumber;
  if (!std::isfinite(d)) {
    *kind = ValueKind::kNonFinite;
  } else if ((!integer_text && d >= kFp64Blank) || IsInt32Blank(d)) {
    *kind = ValueKind::kBlank;
  } else {
    *kind = ValueKind::kNumber;
    *value = d;
  }
  return ValueSyntax::kOk;
}

bool ReadTimestamp(std::string_view token, int64_t* ms) {
  if (!token.empty() && token.front() == '+') {
    token.remove_prefix(1);
    if (!token.empty() && (token.front() == '+' || token.front() == '-')) return false;
  }
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), *ms);
  return ec == std::errc() && end == token.data() + token.size();
}

// Splits the page into lines and the sample lines into their parts, one line at a time, with no
// allocation unless a label value we keep has escapes.
class ExpositionReader {
 public:
  explicit ExpositionReader(std::string_view text) : text_(text) {}

  // Advances to the next sample line. Sets *found to false at the end of the page.
  Status Next(SampleLine* out, bool* found) {
    while (pos_ < text_.size()) {
      const size_t newline = text_.find('\n', pos_);
      const size_t end = newline == std::string_view::npos ? text_.size() : newline;
      std::string_view line = text_.substr(pos_, end - pos_);
      pos_ = newline == std::string_view::npos ? text_.size() : newline + 1;
      ++line_no_;
      if (line.size() > kMaxLineBytes) {
        return Error("longer than " + std::to_string(kMaxLineBytes) + " bytes (" +
                     std::to_string(line.size()) + ")");
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      size_t i = 0;
      while (i < line.size() && IsBlankOrTab(line[i])) ++i;
      if (i == line.size() || line[i] == '#') continue;  // empty line, comment, HELP or TYPE
      RETURN_IF_ERROR(ParseSample(line, i, out));
      *found = true;
      return Status::Ok();
    }
    *found = false;
    return Status::Ok();
  }

  int lines() const { return line_no_; }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("dcgm exposition line " + std::to_string(line_no_) + ": " + what);
  }

  Status ParseSample(std::string_view line, size_t i, SampleLine* out) {
    const size_t n = line.size();
    *out = SampleLine();
    out->line_no = line_no_;
    const size_t name_start = i;
    if (!IsMetricStart(line[i]))
      return Error("expected a metric name, found " + Quote(line.substr(i)));
    while (i < n && IsMetricChar(line[i])) ++i;
    out->metric = line.substr(name_start, i - name_start);
    const std::string_view metric = out->metric;
    const size_t after_name = i;
    while (i < n && IsBlankOrTab(line[i])) ++i;
    if (i < n && line[i] == '{') {
      RETURN_IF_ERROR(ParseLabels(line, metric, &i, out));
      while (i < n && IsBlankOrTab(line[i])) ++i;
    } else if (i < n && i == after_name) {
      return Error(std::string(metric) + ": unexpected character " + Quote(line.substr(i, 1)) +
                   " after the metric name");
    }
    const size_t value_start = i;
    while (i < n && !IsBlankOrTab(line[i])) ++i;
    const std::string_view value = line.substr(value_start, i - value_start);
    if (value.empty()) return Error(std::string(metric) + ": missing value");
    switch (ReadValue(value, &out->kind, &out->value)) {
      case ValueSyntax::kOk:
        break;
      case ValueSyntax::kNotANumber:
        return Error(std::string(metric) + ": value " + Quote(value) + " is not a number");
      case ValueSyntax::kOutOfRange:
        return Error(std::string(metric) + ": value " + Quote(value) + " is out of range");
    }
    while (i < n && IsBlankOrTab(line[i])) ++i;
    if (i == n) return Status::Ok();
    const size_t stamp_start = i;
    while (i < n && !IsBlankOrTab(line[i])) ++i;
    const std::string_view stamp = line.substr(stamp_start, i - stamp_start);
    if (!ReadTimestamp(stamp, &out->timestamp_ms)) {
      return Error(std::string(metric) + ": timestamp " + Quote(stamp) + " is not an integer (ms)");
    }
    out->has_timestamp = true;
    while (i < n && IsBlankOrTab(line[i])) ++i;
    if (i < n)
      return Error(std::string(metric) +
                   ": unexpected text after the timestamp: " + Quote(line.substr(i)));
    return Status::Ok();
  }

  // REQUIRES: line[*i] == '{'. Leaves *i just past the closing '}'.
  Status ParseLabels(std::string_view line, std::string_view metric, size_t* pos, SampleLine* out) {
    const size_t n = line.size();
    size_t i = *pos + 1;
    while (true) {
      while (i < n && IsBlankOrTab(line[i])) ++i;
      if (i == n) return Error(std::string(metric) + ": missing '}' after the labels");
      if (line[i] == '}') break;
      const size_t name_start = i;
      if (!IsLabelStart(line[i])) {
        return Error(std::string(metric) + ": expected a label name, found " +
                     Quote(line.substr(i, 1)));
      }
      while (i < n && IsLabelChar(line[i])) ++i;
      const std::string_view name = line.substr(name_start, i - name_start);
      while (i < n && IsBlankOrTab(line[i])) ++i;
      if (i == n || line[i] != '=')
        return Error(std::string(metric) + ": expected '=' after label " + Quote(name));
      ++i;
      while (i < n && IsBlankOrTab(line[i])) ++i;
      if (i == n || line[i] != '"') {
        return Error(std::string(metric) + ": expected '\"' to open the value of label " +
                     Quote(name));
      }
      ++i;
      const Slot slot = SlotOf(name);
      std::string_view value;
      RETURN_IF_ERROR(ParseLabelValue(line, metric, name, slot, &i, &value));
      out->labels[slot] = value;
      while (i < n && IsBlankOrTab(line[i])) ++i;
      if (i < n && line[i] == ',') {
        ++i;
        continue;  // a trailing comma before '}' is allowed
      }
      if (i < n && line[i] == '}') break;
      if (i == n) return Error(std::string(metric) + ": missing '}' after the labels");
      return Error(std::string(metric) + ": expected ',' or '}' after label " + Quote(name));
    }
    *pos = i + 1;
    return Status::Ok();
  }

  // Reads a label value from just past its opening quote to just past its closing one. A value
  // without escapes is a view into the page; one with escapes is decoded into scratch_[slot].
  Status ParseLabelValue(std::string_view line, std::string_view metric, std::string_view name,
                         Slot slot, size_t* pos, std::string_view* value) {
    const size_t n = line.size();
    const size_t start = *pos;
    size_t i = start;
    while (i < n && line[i] != '"' && line[i] != '\\') ++i;
    if (i < n && line[i] == '"') {
      *value = line.substr(start, i - start);
      *pos = i + 1;
      return Status::Ok();
    }
    std::string& decoded = scratch_[slot];
    decoded.assign(line.substr(start, i - start));
    while (i < n && line[i] != '"') {
      if (line[i] != '\\') {
        decoded += line[i++];
        continue;
      }
      if (i + 1 == n) break;  // a backslash ending the line escapes nothing: unterminated
      switch (line[i + 1]) {
        case '\\':
          decoded += '\\';
          break;
        case '"':
          decoded += '"';
          break;
        case 'n':
          decoded += '\n';
          break;
        default:
          return Error(std::string(metric) + ": unknown escape " + Quote(line.substr(i, 2)) +
                       " in the value of label " + Quote(name) + " (only \\\\, \\\" and \\n)");
      }
      i += 2;
    }
    if (i == n || line[i] != '"') {
      return Error(std::string(metric) + ": unterminated value of label " + Quote(name));
    }
    *value = decoded;
    *pos = i + 1;
    return Status::Ok();
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_no_ = 0;
  std::array<std::string, kSlots> scratch_;
};

std::string_view NodeOf(const SampleLine& s, const std::string& default_node) {
  if (!s.labels[kHostnameLower].empty()) return s.labels[kHostnameLower];
  if (!s.labels[kHostnameUpper].empty()) return s.labels[kHostnameUpper];
  return default_node;
}

// "<UUID>" for a whole GPU, "<UUID>/<GPU_I_ID>" for a MIG instance.
void AppendDeviceId(const SampleLine& s, std::string* out) {
  out->append(s.labels[kUuid]);
  if (!s.labels[kGpuInstance].empty()) {
    *out += '/';
    out->append(s.labels[kGpuInstance]);
  }
}

// Devices in order of first appearance, found by (node, device id) without allocating once the
// device is known. Entry needs `node` and `device_uuid` members.
template <typename Entry>
class DeviceTable {
 public:
  // REQUIRES: the line has a UUID.
  Entry& Find(const SampleLine& s, const std::string& default_node) {
    const std::string_view node = NodeOf(s, default_node);
    // The node's length first keeps the key unambiguous whatever bytes the labels hold.
    key_.assign(std::to_string(node.size()));
    key_ += ':';
    key_.append(node);
    AppendDeviceId(s, &key_);
    auto [it, inserted] = index_.try_emplace(key_, entries_.size());
    if (inserted) {
      Entry& entry = entries_.emplace_back();
      entry.node = std::string(node);
      AppendDeviceId(s, &entry.device_uuid);
    }
    return entries_[it->second];
  }

  std::vector<Entry> TakeSorted() && {
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.node, a.device_uuid) < std::tie(b.node, b.device_uuid);
    });
    return std::move(entries_);
  }

 private:
  std::unordered_map<std::string, size_t> index_;
  std::vector<Entry> entries_;
  std::string key_;
};

struct UtilReading {
  bool present = false;
  double value = 0;
  int64_t time_ms = 0;

  // The largest value wins; repeats are per-pod copies of one DCGM reading.
  void Offer(double v, int64_t t) {
    if (!present || v > value) *this = {true, v, t};
  }
};

struct UtilDevice {
  std::string node;
  std::string device_uuid;
  UtilReading gr_engine_active;  // ratio 0..1
  UtilReading gpu_util;          // percent 0..100
};

// Rounds half up and clamps to 0..1000. The 1e-9 absorbs binary error in decimal inputs such as
// 0.2345 * 1000 = 234.49999999999997, which should round to 235.
int32_t ToPermille(double scaled) {
  const double rounded = std::floor(scaled + 0.5 + 1e-9);
  return static_cast<int32_t>(std::clamp(rounded, 0.0, 1000.0));
}

}  // namespace

Result<std::vector<DeviceSample>> ParseDcgmExposition(std::string_view text, int64_t scrape_time_ms,
                                                      const std::string& default_node,
                                                      DcgmParseStats* stats) {
  DcgmParseStats counts;
  DeviceTable<UtilDevice> devices;
  ExpositionReader reader(text);
  SampleLine s;
  while (true) {
    bool found = false;
    RETURN_IF_ERROR(reader.Next(&s, &found));
    if (!found) break;
    const bool is_gr_engine = s.metric == kGrEngineActive;
    if (!is_gr_engine && s.metric != kGpuUtil) {
      ++counts.ignored_metrics;
      continue;
    }
    if (s.labels[kUuid].empty()) {
      return InvalidArgument("dcgm exposition line " + std::to_string(s.line_no) + ": " +
                             std::string(s.metric) + " has no UUID or uuid label");
    }
    if (s.kind == ValueKind::kBlank) {
      ++counts.blanks_skipped;
      continue;
    }
    if (s.kind == ValueKind::kNonFinite) {
      ++counts.non_finite_skipped;
      continue;
    }
    const int64_t time_ms = s.has_timestamp ? s.timestamp_ms : scrape_time_ms;
    UtilDevice& device = devices.Find(s, default_node);
    (is_gr_engine ? device.gr_engine_active : device.gpu_util).Offer(s.value, time_ms);
  }

  std::vector<DeviceSample> samples;
  for (UtilDevice& d : std::move(devices).TakeSorted()) {
    DeviceSample sample;
    if (d.gr_engine_active.present) {
      sample.time_ms = d.gr_engine_active.time_ms;
      sample.util_permille = ToPermille(d.gr_engine_active.value * 1000.0);
    } else {
      sample.time_ms = d.gpu_util.time_ms;
      sample.util_permille = ToPermille(d.gpu_util.value * 10.0);
    }
    sample.node = std::move(d.node);
    sample.device_uuid = std::move(d.device_uuid);
    samples.push_back(std::move(sample));
  }
  counts.lines = reader.lines();
  counts.samples = static_cast<int>(samples.size());
  if (stats != nullptr) *stats = counts;
  return samples;
}

Result<std::vector<DeviceGauges>> ParseDcgmGauges(std::string_view text,
                                                  const std::string& default_node) {
  DeviceTable<DeviceGauges> devices;
  ExpositionReader reader(text);
  SampleLine s;
  while (true) {
    bool found = false;
    RETURN_IF_ERROR(reader.Next(&s, &found));
    if (!found) break;
    if (s.labels[kUuid].empty() || s.kind != ValueKind::kNumber) continue;
    DeviceGauges& device = devices.Find(s, default_node);
    if (device.model.empty()) device.model = std::string(s.labels[kModel]);
    const std::string_view gpu = s.labels[kGpu];
    if (device.gpu_index < 0 && !gpu.empty()) {
      int index = -1;
      auto [end, ec] = std::from_chars(gpu.data(), gpu.data() + gpu.size(), index);
      if (ec == std::errc() && end == gpu.data() + gpu.size() && index >= 0) {
        device.gpu_index = index;
      }
    }
    auto [it, inserted] = device.values.try_emplace(std::string(s.metric), s.value);
    if (!inserted) it->second = std::max(it->second, s.value);
  }
  return std::move(devices).TakeSorted();
}

}  // namespace fabrica
