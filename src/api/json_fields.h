// Typed reads of stored JSON objects that never throw: a missing field, or one of another type,
// reads as the fallback. The API validates what it stores, but no reader (the scheduler, an
// agent, a watch filter running on the store's committer thread) may die of a record that
// slipped past: an older server, a hand-edited database. Include only in .cc files that already
// use nlohmann/json.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/fleet.h"

namespace fabrica::jsonf {

inline const nlohmann::json& Field(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}
inline std::string Str(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  const nlohmann::json& v = Field(j, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}
inline int64_t Int(const nlohmann::json& j, const char* key, int64_t fallback = 0) {
  const nlohmann::json& v = Field(j, key);
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}
// The object at j[key], or an empty one.
inline const nlohmann::json& Object(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json& v = Field(j, key);
  return v.is_object() ? v : kEmpty;
}
// The list at j[key], or an empty one.
inline const nlohmann::json& List(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  const nlohmann::json& v = Field(j, key);
  return v.is_array() ? v : kEmpty;
}

// The GPU memory one assigned device holds, in MiB: its memoryMiB (a whole GPU's, a share's),
// or a MIG slice's by its profile's name ("3g.40gb": 40 GiB).
inline int64_t HeldGpuMemoryMib(const nlohmann::json& device) {
  if (const nlohmann::json& m = Field(device, "memoryMiB"); m.is_number_integer())
    return std::max<int64_t>(0, m.get<int64_t>());
  const std::string profile = Str(device, "migProfile");
  const size_t dot = profile.find('.'), gb = profile.rfind("gb");
  if (dot == std::string::npos || gb == std::string::npos || gb <= dot + 1) return 0;
  const std::string n = profile.substr(dot + 1, gb - dot - 1);
  if (n.empty() || n.size() > 6 ||
      !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0;
  return std::stoll(n) * 1024;
}

// How deeply a body's objects and arrays may nest. Ours nest a few levels; what reads them
// recursively (Doc::FromJson) must not run out of stack on a body nested thousands deep (a
// trial's crashed the server).
inline constexpr int kMaxJsonDepth = 100;

// `text` parsed (discarded if it is not JSON, or nests deeper than kMaxJsonDepth: then
// `*too_deep`, where given, is set), and in `*twice` the first key given twice in one object
// ("" if none): the last would win silently, so callers refuse it, as the Kubernetes API's
// strict field validation does. Where `*error` is given, a text that is not JSON sets it to
// where and what (the parser's words, less its "[json.exception.parse_error.101] "), from the
// one parse.
inline nlohmann::json ParseNoDuplicateKeys(const std::string& text, std::string* twice,
                                           bool* too_deep = nullptr, std::string* error = nullptr) {
  std::vector<std::set<std::string>> keys;  // of each object open, innermost last
  int depth = 0;
  bool deep = false;
  twice->clear();
  // (A number past a double's range throws out_of_range: malformed too, as the caller says.)
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(
        text,
        [&](int, nlohmann::json::parse_event_t event, nlohmann::json& value) {
          using Event = nlohmann::json::parse_event_t;
          if (event == Event::object_start || event == Event::array_start) {
            deep |= ++depth > kMaxJsonDepth;
            if (event == Event::object_start) keys.emplace_back();
          } else if (event == Event::object_end || event == Event::array_end) {
            --depth;
            if (event == Event::object_end && !keys.empty()) keys.pop_back();
          } else if (event == Event::key && !keys.empty() && value.is_string() &&
                     !keys.back().insert(value.get<std::string>()).second && twice->empty()) {
            *twice = value.get<std::string>();
          }
          return true;
        },
        true);
  } catch (const nlohmann::json::exception& e) {
    if (too_deep) *too_deep = deep;
    if (error) {
      const std::string what = e.what();
      const size_t words = what.find("] ");
      // (Bytes that are not printable ASCII, as the parser quotes them, escaped: a body's
      // invalid UTF-8 byte, quoted raw, made the reply itself fail to serialise.)
      error->clear();
      for (const unsigned char c : words == std::string::npos ? what : what.substr(words + 2)) {
        if (c >= 0x20 && c < 0x7f) {
          error->push_back(static_cast<char>(c));
        } else {
          static constexpr char kHex[] = "0123456789ABCDEF";
          *error += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
        }
      }
    }
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  if (too_deep) *too_deep = deep;
  if (deep) return nlohmann::json(nlohmann::json::value_t::discarded);
  return parsed;
}

// A request's body parsed as JSON (ParseNoDuplicateKeys), or discarded with `*why` saying what
// is wrong: "malformed JSON body: " and where the parser stopped and why, that it nests too
// deep, or which key it gives twice. (Every endpoint that reads a JSON body says the same: a
// trial's telemetry and inject bodies read only "expected an object".)
inline nlohmann::json ParseBody(const std::string& text, std::string* why) {
  std::string twice, error;
  bool too_deep = false;
  nlohmann::json j = ParseNoDuplicateKeys(text, &twice, &too_deep, &error);
  if (too_deep) {
    *why = "malformed JSON body: it nests objects and arrays deeper than " +
           std::to_string(kMaxJsonDepth) + " levels";
  } else if (j.is_discarded()) {
    *why = "malformed JSON body" + (error.empty() ? "" : ": " + error);
  } else if (!twice.empty()) {
    *why = "malformed JSON body: key \"" + twice + "\" is given twice in one object";
  } else {
    why->clear();
    return j;
  }
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

// A Node object's labels as a workload's nodeSelector reads them (Node::Label): those its agent
// registered (spec.labels), those set on the object, which win, and the two every node has
// (kHostnameLabel, kGpuModelLabel), whatever a label says. For the API's label selectors and
// fabctl's describe alike.
inline nlohmann::json NodeLabels(const nlohmann::json& node) {
  nlohmann::json labels = nlohmann::json::object();
  for (const nlohmann::json* from :
       {&Field(Field(node, "spec"), "labels"), &Field(Field(node, "metadata"), "labels")})
    if (from->is_object())
      for (const auto& [k, v] : from->items())
        if (v.is_string()) labels[k] = v;
  labels[kHostnameLabel] = Str(Field(node, "metadata"), "name");
  labels.erase(kGpuModelLabel);
  // (Its GPUs listed one by one, or as a count of one model.)
  const nlohmann::json& spec = Field(node, "spec");
  if (const nlohmann::json& devices = Field(spec, "devices");
      devices.is_array() && !devices.empty() && Field(devices[0], "model").is_string())
    labels[kGpuModelLabel] = devices[0]["model"];
  else if (const nlohmann::json& gpus = Field(spec, "gpus"); Field(gpus, "model").is_string())
    labels[kGpuModelLabel] = gpus["model"];
  return labels;
}

}  // namespace fabrica::jsonf
