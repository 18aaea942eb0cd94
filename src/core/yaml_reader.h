// Strict reading of YAML (or JSON) mappings into Fabrica's value types.
//
// A YamlMap wraps one mapping node of a Doc with its path ("nodes[3].gpus") and the source file
// name, so that every error names file, line and field. Reading a key marks it as known;
// Finish() rejects any key that was not read, which is how unknown (often misspelt) fields are
// caught. yaml-cpp stays inside yaml_reader.cc: LoadYaml turns its tree into a Doc.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/doc.h"
#include "core/quantity.h"
#include "core/status.h"

namespace fabrica {

class YamlMap {
 public:
  YamlMap(Doc node, std::string path, std::string source);

  // OK when the node is a mapping (or null, treated as empty).
  Status CheckIsMap() const;

  bool Has(const std::string& key) const;
  Doc Raw(const std::string& key);
  std::string Path(const std::string& key) const;
  // "FILE:LINE: PATH.KEY: message"; or, where a child of the same outermost map found unknown
  // fields before (Unknowns), those.
  Status Error(const std::string& key, const std::string& message) const;
  // An error at `path` below this map ("queues[1].parent", as a check made after reading
  // names it): "FILE:LINE: PATH: message", LINE that of the deepest node of the path found.
  Status ErrorAt(const std::string& path, const std::string& message) const;

  Result<std::string> String(const std::string& key, std::optional<std::string> fallback = {});
  Result<int64_t> Int(const std::string& key, std::optional<int64_t> fallback = {});
  // A priority: an integer from -1000000000 to 1000000000 (negative values allowed, as for
  // Kubernetes PriorityClasses).
  Result<int> Priority(const std::string& key, std::optional<int> fallback = {});
  // A finite number >= 0 ("0.5", "3", "1e3").
  Result<double> Double(const std::string& key, std::optional<double> fallback = {});
  // A finite number > 0 (a weight: 0 and below are refused alike).
  Result<double> PositiveDouble(const std::string& key, std::optional<double> fallback = {});
  Result<bool> Bool(const std::string& key, std::optional<bool> fallback = {});
  Result<MilliCpu> Cpu(const std::string& key, std::optional<MilliCpu> fallback = {});
  Result<MemoryMib> Memory(const std::string& key, std::optional<MemoryMib> fallback = {});
  Result<MilliGpu> Gpu(const std::string& key, std::optional<MilliGpu> fallback = {});
  Result<std::vector<std::string>> StringList(const std::string& key);
  Result<std::map<std::string, std::string>> StringMap(const std::string& key);

  // A mapping inside this one: the value of `key`, or any node found under it (an item of a
  // list, a value of a map) with its path. A child's Finish() keeps its unknown fields for the
  // outermost map's Finish(), so that misspellings in two nested maps are named in one round.
  YamlMap Child(const std::string& key);
  YamlMap Child(Doc node, std::string path) const;

  // A bad value's error kept for the outermost map's Finish, which says it after the unknown
  // fields and beside every other kept one, instead of returned at once: a spec with three bad
  // values is mended in one round, as strict Kubernetes validation lists every field error.
  // True where `r` holds a value (then moved to *out); Keep(Status) is false on an error.
  template <typename T>
  bool Keep(Result<T> r, T* out) {
    if (!r.ok()) return Keep(r.status());
    *out = std::move(*r);
    return true;
  }
  bool Keep(const Status& s);

  // Rejects keys that were never read: this map's and, for the outermost map, its children's
  // (a child's are kept until then), with every kept error (Keep).
  Status Finish() const;
  // The unknown fields the children of this map's outermost one have found so far (their
  // Finish), and the errors kept so far, as Finish would report them: for a caller about to
  // check what they read against something else, or to act on it. (Error says them too,
  // instead of its own message, where there are unknown fields.)
  Status Unknowns() const;

  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

 private:
  Result<std::string> Scalar(const std::string& key, bool* present);
  std::string Where(const Doc& n) const;

  struct Unknown {
    int line;
    std::string where, path;
    std::string guess;  // the field it may misspell (Misspelt), or ""
  };

  Doc node_;
  std::string path_;
  std::string source_;
  std::set<std::string> read_;
  mutable std::set<std::string> asked_;  // keys Has was asked of: known, if absent
  // The unknown fields children have found, shared by a map and every map below it; only the
  // outermost map (the one not made by Child) reports them.
  std::shared_ptr<std::vector<Unknown>> unknown_ = std::make_shared<std::vector<Unknown>>();
  // The errors Keep kept, shared as unknown_ is; and the last error Error replaced by the
  // unknown fields: what it said, and its own words.
  std::shared_ptr<std::vector<std::string>> kept_ = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::pair<std::string, std::string>> last_error_ =
      std::make_shared<std::pair<std::string, std::string>>();
  bool outermost_ = true;
};

// The one of `known` that `key` most likely misspells (case aside, a few letters added,
// dropped or changed: at most a quarter of its length, and at least one), "" where none is close
// or two are equally close. For "unknown field (did you mean …?)".
std::string Misspelt(const std::string& key, const std::vector<std::string>& known);
// "unknown field", with Misspelt's guess where it has one.
std::string UnknownFieldMessage(const std::string& key, const std::vector<std::string>& known);

// How many values a YAML text may read as, once its aliases are expanded. An alias repeats
// what it names, so a few hundred bytes of nested aliases can name billions (a trial's 452-byte
// file took every byte of memory); without aliases a value takes a byte or two of the text, so
// this leaves room for aliases used as meant (a shared block repeated a few times).
size_t YamlValueBudget(const std::string& text);
// What is said of a text past it (fabctl's own YAML reading says the same).
extern const char kYamlPastValueBudget[];

// Parses a YAML document, turning yaml-cpp's exceptions into a Status naming file and line (and
// one whose aliases expand past YamlValueBudget into an error).
Result<Doc> LoadYaml(const std::string& text, const std::string& source);
// Every document of a multi-document YAML stream ("---" separated).
Result<std::vector<Doc>> LoadAllYaml(const std::string& text, const std::string& source);

}  // namespace fabrica
