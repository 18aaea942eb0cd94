// Server-side printing: the API's objects as a meta.k8s.io Table, which kubectl asks for
// (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`) and prints cell by cell. The
// cells are fabctl's (client/columns.h), and AGE is counted on the server's clock, which runs
// ahead of the wall clock under a time scale (a kubectl counting it itself read "<invalid>").
// Internal to fabrica_api: include only in .cc files that already use nlohmann/json.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace fabrica {

// The Table version `accept` asks for ("v1" or "v1beta1", as its first Table media type names
// it); "" where it asks for none (plain JSON).
std::string TableVersion(const std::string& accept);

// What each row carries of its object (`?includeObject=`): None, Metadata (the default, a
// PartialObjectMetadata), or the whole Object.
enum class RowObject { kNone, kMetadata, kObject };
// The query's value read; false for one that is none of the three.
bool ParseRowObject(const std::string& text, RowObject* out);

// What some cells need beyond their object, as fabctl reads it too: the nodes' health records
// by node (a node in repair), and the queue tree's leaves (the queue a workload waits in; empty
// without queues).
struct TableContext {
  std::map<std::string, nlohmann::json> node_health;
  std::set<std::string> leaves;
};

// The Table of `objects`, all of kind `kind` (Workload, Node, Queue, ...), their ages counted
// to `now_ms`. Columns of priority 1 are the ones kubectl shows only with -o wide. Events read
// as kubectl's own table of them: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE.
nlohmann::json ObjectTable(const std::string& kind, const std::vector<nlohmann::json>& objects,
                           int64_t now_ms, const std::string& version, RowObject row_object,
                           const std::string& resource_version, const TableContext& context);

}  // namespace fabrica
