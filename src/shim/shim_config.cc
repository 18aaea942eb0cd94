#include "shim/shim_config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shim/shim_region.h"

namespace fabrica {
namespace {

constexpr const char* kHeader = "fabrica-vgpu-config 1";

std::vector<std::string> SplitWords(const std::string& line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

bool ParseInt64(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    if (value > (INT64_MAX - (c - '0')) / 10) return false;
    value = value * 10 + (c - '0');
  }
  *out = value;
  return true;
}

bool Fail(std::string* error, int line, const std::string& message) {
  if (error) *error = "line " + std::to_string(line) + ": " + message;
  return false;
}

// "key=value" with the expected key.
bool ParseField(const std::string& word, const char* key, int line, int64_t* value,
                std::string* error) {
  const size_t key_len = std::strlen(key);
  if (word.size() <= key_len || word.compare(0, key_len, key) != 0 || word[key_len] != '=') {
    return Fail(error, line, std::string("device: expected ") + key + "=N, got '" + word + "'");
  }
  if (!ParseInt64(word.substr(key_len + 1), value)) {
    return Fail(error, line,
                std::string("device: ") + key + ": not a non-negative integer: '" +
                    word.substr(key_len + 1) + "'");
  }
  return true;
}

}  // namespace

std::string FormatShimConfig(const ShimConfig& config) {
  std::string text = std::string(kHeader) + "\n";
  text += "container " + config.container + "\n";
  text += "region " + config.region_path + "\n";
  for (const ShimConfig::Dev& dev : config.devices) {
    text += "device " + dev.uuid + " memory_bytes=" + std::to_string(dev.memory_limit_bytes) +
            " compute_permille=" + std::to_string(dev.compute_permille) + "\n";
  }
  return text;
}

bool ParseShimConfig(const std::string& text, ShimConfig* out, std::string* error) {
  ShimConfig config;
  bool seen_header = false, seen_container = false, seen_region = false;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> words = SplitWords(line);
    if (words.empty() || words[0][0] == '#') continue;
    if (!seen_header) {
      if (words.size() != 2 || words[0] != "fabrica-vgpu-config") {
        return Fail(error, line_no, "expected the header '" + std::string(kHeader) + "'");
      }
      if (words[1] != "1") {
        return Fail(error, line_no, "unsupported config version '" + words[1] + "' (expected 1)");
      }
      seen_header = true;
      continue;
    }
    const std::string& key = words[0];
    if (key == "container" || key == "region") {
      bool& seen = key == "container" ? seen_container : seen_region;
      if (seen) return Fail(error, line_no, key + ": given twice");
      if (words.size() != 2) return Fail(error, line_no, key + ": expected exactly one value");
      seen = true;
      if (key == "container") {
        if (words[1].size() >= shim::kRegionContainerBytes) {
          return Fail(error, line_no, "container: name longer than 127 bytes");
        }
        config.container = words[1];
      } else {
        if (words[1][0] != '/') return Fail(error, line_no, "region: not an absolute path");
        config.region_path = words[1];
      }
    } else if (key == "device") {
      if (words.size() != 4) {
        return Fail(error, line_no,
                    "device: expected 'device UUID memory_bytes=N compute_permille=N'");
      }
      ShimConfig::Dev dev;
      dev.uuid = words[1];
      if (dev.uuid.size() >= shim::kRegionUuidBytes)
        return Fail(error, line_no, "device: uuid too long");
      int64_t permille = 0;
      if (!ParseField(words[2], "memory_bytes", line_no, &dev.memory_limit_bytes, error) ||
          !ParseField(words[3], "compute_permille", line_no, &permille, error)) {
        return false;
      }
      if (dev.memory_limit_bytes <= 0) {
        return Fail(error, line_no, "device: memory_bytes must be positive");
      }
      if (permille < 1 || permille > 1000) {
        return Fail(error, line_no, "device: compute_permille must be in 1..1000");
      }
      dev.compute_permille = static_cast<int>(permille);
      for (const ShimConfig::Dev& other : config.devices) {
        if (other.uuid == dev.uuid) return Fail(error, line_no, "device: " + dev.uuid + " twice");
      }
      if (config.devices.size() >= static_cast<size_t>(shim::kRegionMaxDevices)) {
        return Fail(error, line_no, "device: more than 16 devices");
      }
      config.devices.push_back(dev);
    } else {
      return Fail(error, line_no, "unknown key '" + key + "'");
    }
  }
  if (!seen_header) return Fail(error, line_no, "empty config (no header)");
  if (!seen_container) return Fail(error, line_no, "missing 'container'");
  if (!seen_region) return Fail(error, line_no, "missing 'region'");
  if (config.devices.empty()) return Fail(error, line_no, "no 'device' line");
  *out = std::move(config);
  return true;
}

bool LoadShimConfig(const std::string& path, ShimConfig* out, std::string* error) {
  FILE* file = std::fopen(path.c_str(), "re");
  if (!file) {
    if (error) *error = path + ": " + std::strerror(errno);
    return false;
  }
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    text.append(buffer, n);
    if (text.size() > (1 << 20)) break;
  }
  std::fclose(file);
  if (!ParseShimConfig(text, out, error)) {
    if (error) *error = path + ": " + *error;
    return false;
  }
  return true;
}

bool ReadShimRegion(const std::string& path, ContainerUsage* out, std::string* error) {
  shim::Region region;
  if (!region.OpenForRead(path, error)) return false;
  region.LockShared();
  const shim::RegionLayout& r = *region.layout();
  ContainerUsage usage;
  usage.container.assign(r.container, strnlen(r.container, sizeof(r.container)));
  for (uint32_t d = 0; d < r.num_devices && d < shim::kRegionMaxDevices; ++d) {
    ContainerUsage::Dev dev;
    dev.uuid.assign(r.devices[d].uuid, strnlen(r.devices[d].uuid, sizeof(r.devices[d].uuid)));
    dev.busy_ns = shim::Load(r.devices[d].busy_ns);
    usage.devices.push_back(dev);
  }
  for (const shim::RegionSlot& slot : r.slots) {
    if (shim::Load32(slot.pid) == 0) continue;
    ++usage.live_processes;
    for (size_t d = 0; d < usage.devices.size(); ++d) {
      usage.devices[d].memory_used_bytes += shim::Load(slot.used_bytes[d]);
    }
  }
  region.Unlock();
  *out = std::move(usage);
  return true;
}

}  // namespace fabrica
