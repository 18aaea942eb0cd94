// Typed reads of stored JSON objects that never throw: a missing field, or one of another type,
// reads as the fallback. The API validates what it stores, but no reader (the scheduler, an
// agent, a watch filter running on the store's committer thread) may die of a record that
// slipped past: an older server, a hand-edited database. Include only in .cc files that already
// use nlohmann/json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

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
// The list at j[key], or an empty one.
inline const nlohmann::json& List(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  const nlohmann::json& v = Field(j, key);
  return v.is_array() ? v : kEmpty;
}

}  // namespace fabrica::jsonf
