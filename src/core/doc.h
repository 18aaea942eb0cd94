// Doc: one node of a parsed YAML or JSON document, as a small immutable tree.
//
// Fabrica's strict readers (YamlMap, and through it the manifest, fleet and config parsers) work
// on Docs, so that one parser serves YAML files and JSON request bodies alike. A YAML file is
// parsed by yaml-cpp and converted once (keeping line numbers for error messages); a JSON body
// already decoded by nlohmann/json becomes a Doc directly, which costs a few small allocations
// per node instead of yaml-cpp's node graph (the API validates every write this way, so this is
// on the write path). Copies are cheap and share the tree.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace fabrica {

class Doc {
 public:
  enum class Type { kUndefined, kNull, kScalar, kSequence, kMap };
  using Entry = std::pair<Doc, Doc>;  // a map's key (a scalar) and value

  Doc() = default;  // undefined: what looking up an absent key gives

  // `line` is 0-based, -1 when unknown.
  static Doc MakeNull(int line = -1);
  static Doc MakeScalar(std::string value, int line = -1);
  static Doc MakeSequence(std::vector<Doc> items, int line = -1);
  static Doc MakeMap(std::vector<Entry> entries, int line = -1);
  // Numbers and booleans become their JSON text, as a YAML parser would read them.
  static Doc FromJson(const nlohmann::json& j);

  Type type() const;
  bool IsDefined() const { return node_ != nullptr; }
  explicit operator bool() const { return IsDefined(); }
  bool IsNull() const { return type() == Type::kNull; }
  bool IsScalar() const { return type() == Type::kScalar; }
  bool IsSequence() const { return type() == Type::kSequence; }
  bool IsMap() const { return type() == Type::kMap; }

  const std::string& Scalar() const;             // "" unless a scalar
  size_t size() const;                           // a sequence's items or a map's entries; else 0
  Doc operator[](size_t i) const;                // a sequence's item, or undefined
  Doc operator[](const std::string& key) const;  // a map's value for `key`, or undefined
  const std::vector<Doc>& items() const;         // a sequence's items; else empty
  const std::vector<Entry>& entries() const;     // a map's entries in order; else empty
  std::vector<Doc>::const_iterator begin() const { return items().begin(); }
  std::vector<Doc>::const_iterator end() const { return items().end(); }
  int line() const;

 private:
  struct Node;
  explicit Doc(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static Doc Wrap(Node node);
  std::shared_ptr<const Node> node_;
};

}  // namespace fabrica
