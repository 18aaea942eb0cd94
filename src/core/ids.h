// Typed identifiers. A NodeId and a TenantId are both names, but one can never be passed where
// the other is expected. Values are plain, ordered and hashable.
#pragma once

#include <compare>
#include <functional>
#include <string>

namespace fabrica {

template <typename Tag>
class Id {
 public:
  Id() = default;
  explicit Id(std::string name) : name_(std::move(name)) {}
  const std::string& str() const { return name_; }
  bool empty() const { return name_.empty(); }
  auto operator<=>(const Id&) const = default;

 private:
  std::string name_;
};

using NodeId = Id<struct NodeIdTag>;
using TenantId = Id<struct TenantIdTag>;
using QueueId = Id<struct QueueIdTag>;
using WorkloadId = Id<struct WorkloadIdTag>;

}  // namespace fabrica

template <typename Tag>
struct std::hash<fabrica::Id<Tag>> {
  size_t operator()(const fabrica::Id<Tag>& id) const { return std::hash<std::string>()(id.str()); }
};
