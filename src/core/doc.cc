#include "core/doc.h"

#include <nlohmann/json.hpp>

namespace fabrica {

struct Doc::Node {
  Type type = Type::kNull;
  int line = -1;
  std::string scalar;
  std::vector<Doc> items;
  std::vector<Entry> entries;
};

namespace {
const std::string kEmptyString;
const std::vector<Doc> kNoItems;
const std::vector<Doc::Entry> kNoEntries;
}  // namespace

Doc Doc::Wrap(Node node) { return Doc(std::make_shared<const Node>(std::move(node))); }

Doc Doc::MakeNull(int line) { return Wrap({Type::kNull, line, {}, {}, {}}); }

Doc Doc::MakeScalar(std::string value, int line) {
  return Wrap({Type::kScalar, line, std::move(value), {}, {}});
}

Doc Doc::MakeSequence(std::vector<Doc> items, int line) {
  return Wrap({Type::kSequence, line, {}, std::move(items), {}});
}

Doc Doc::MakeMap(std::vector<Entry> entries, int line) {
  return Wrap({Type::kMap, line, {}, {}, std::move(entries)});
}

Doc Doc::FromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      std::vector<Entry> entries;
      entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        entries.emplace_back(MakeScalar(it.key()), FromJson(it.value()));
      }
      return MakeMap(std::move(entries));
    }
    case nlohmann::json::value_t::array: {
      std::vector<Doc> items;
      items.reserve(j.size());
      for (const auto& value : j) items.push_back(FromJson(value));
      return MakeSequence(std::move(items));
    }
    case nlohmann::json::value_t::string:
      return MakeScalar(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return MakeNull();
    default:
      return MakeScalar(j.dump());
  }
}

Doc::Type Doc::type() const { return node_ ? node_->type : Type::kUndefined; }

const std::string& Doc::Scalar() const {
  return node_ && node_->type == Type::kScalar ? node_->scalar : kEmptyString;
}

size_t Doc::size() const {
  if (!node_) return 0;
  return node_->type == Type::kSequence ? node_->items.size()
         : node_->type == Type::kMap    ? node_->entries.size()
                                        : 0;
}

Doc Doc::operator[](size_t i) const {
  const std::vector<Doc>& all = items();
  return i < all.size() ? all[i] : Doc();
}

Doc Doc::operator[](const std::string& key) const {
  for (const Entry& e : entries()) {
    if (e.first.Scalar() == key) return e.second;
  }
  return Doc();
}

const std::vector<Doc>& Doc::items() const {
  return node_ && node_->type == Type::kSequence ? node_->items : kNoItems;
}

const std::vector<Doc::Entry>& Doc::entries() const {
  return node_ && node_->type == Type::kMap ? node_->entries : kNoEntries;
}

int Doc::line() const { return node_ ? node_->line : -1; }

}  // namespace fabrica
