// MemoryStore: the in-memory twin of the SQLite store, for tests of the code above the store.
//
// It gives the same answers as the SQLite store (the checks and messages come from
// store_common.h) and keeps its event log the same way, trimmed to the last `keep_events`
// events. One mutex guards the state. Writes are additionally serialized by write_mu_ through
// their delivery, so that subscribers, which run on the writing thread after the state is
// updated, see events in revision order while readers are not held up by slow callbacks.
#include <algorithm>
#include <deque>
#include <map>
#include <mutex>

#include "store/store.h"
#include "store/store_common.h"

namespace fabrica {
namespace {

using store_internal::CheckCondition;
using store_internal::CompactedError;
using store_internal::EventHub;
using store_internal::PrefixEnd;
using store_internal::ValidateEventsSince;
using store_internal::ValidateKey;
using store_internal::ValidateKeyRange;
using store_internal::ValidateWrite;

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(int64_t keep_events) : keep_events_(keep_events) {}

  Result<KeyValue> Get(const std::string& key) override {
    RETURN_IF_ERROR(ValidateKey(key));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kvs_.find(key);
    if (it == kvs_.end()) return NotFound("key '" + key + "' not found");
    return it->second;
  }

  Result<int64_t> Put(const std::string& key, const std::string& value,
                      int64_t expected_revision) override {
    return Write(key, &value, expected_revision);
  }

  Result<int64_t> Delete(const std::string& key, int64_t expected_revision) override {
    return Write(key, nullptr, expected_revision);
  }

  Result<ListResult> List(const std::string& prefix, const std::string& start_after,
                          int limit) override {
    RETURN_IF_ERROR(ValidateKeyRange(prefix, start_after, limit));
    std::optional<std::string> end = PrefixEnd(prefix);
    std::lock_guard<std::mutex> lock(mu_);
    ListResult result;
    result.revision = revision_;
    auto it = !start_after.empty() && start_after >= prefix ? kvs_.upper_bound(start_after)
                                                            : kvs_.lower_bound(prefix);
    for (; it != kvs_.end() && (!end || it->first < *end); ++it) {
      if (limit > 0 && static_cast<int>(result.items.size()) == limit) {
        result.more = true;
        break;
      }
      result.items.push_back(it->second);
    }
    return result;
  }

  Result<std::vector<WatchEvent>> EventsSince(const std::string& prefix, int64_t after_revision,
                                              int limit) override {
    RETURN_IF_ERROR(ValidateEventsSince(prefix, after_revision, limit));
    std::lock_guard<std::mutex> lock(mu_);
    if (after_revision < compact_revision_)
      return CompactedError(after_revision, compact_revision_);
    std::vector<WatchEvent> events;
    // events_ holds revisions compact_revision_+1 ... revision_, one event each.
    int64_t first = std::max<int64_t>(after_revision - compact_revision_, 0);
    for (auto it = events_.begin() + std::min<int64_t>(first, events_.size()); it != events_.end();
         ++it) {
      if (limit > 0 && static_cast<int>(events.size()) == limit) break;
      if (it->kv.key.compare(0, prefix.size(), prefix) == 0) events.push_back(*it);
    }
    return events;
  }

  int64_t Revision() override {
    std::lock_guard<std::mutex> lock(mu_);
    return revision_;
  }

  std::unique_ptr<Subscription> Subscribe(
      std::function<void(const std::vector<WatchEvent>&)> fn) override {
    return hub_->Subscribe(std::move(fn), [this] { return Revision(); });
  }

 private:
  // `value` is null for a delete.
  Result<int64_t> Write(const std::string& key, const std::string* value,
                        int64_t expected_revision) {
    const bool is_delete = value == nullptr;
    RETURN_IF_ERROR(ValidateWrite(key, expected_revision, is_delete));
    if (hub_->OnDeliveringThread()) {
      return Internal("write of key '" + key +
                      "' from inside a Subscribe callback; post it to another thread");
    }
    std::lock_guard<std::mutex> writing(write_mu_);
    std::vector<WatchEvent> events(1);
    WatchEvent& event = events.front();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = kvs_.find(key);
      const bool exists = it != kvs_.end();
      RETURN_IF_ERROR(CheckCondition(key, exists, exists ? it->second.mod_revision : 0,
                                     expected_revision, is_delete));
      const int64_t revision = ++revision_;
      if (is_delete) {
        event.type = WatchEvent::Type::kDelete;
        event.kv = std::move(it->second);
        event.kv.mod_revision = revision;
        kvs_.erase(it);
      } else {
        KeyValue& kv = kvs_[key];
        kv.key = key;
        kv.value = *value;
        if (!exists) kv.create_revision = revision;
        kv.mod_revision = revision;
        event.kv = kv;
      }
      events_.push_back(event);
      while (static_cast<int64_t>(events_.size()) > keep_events_) {
        events_.pop_front();
        ++compact_revision_;
      }
    }
    hub_->Deliver(events);
    return event.kv.mod_revision;
  }

  const int64_t keep_events_;
  const std::shared_ptr<EventHub> hub_ = std::make_shared<EventHub>();

  std::mutex write_mu_;  // serializes writes with their delivery; taken before mu_
  std::mutex mu_;        // guards the state below
  std::map<std::string, KeyValue> kvs_;
  std::deque<WatchEvent> events_;  // revisions compact_revision_+1 ... revision_
  int64_t revision_ = 0;
  int64_t compact_revision_ = 0;  // events up to here have been dropped
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore(int64_t keep_events) {
  CHECK(keep_events >= 0);
  return std::make_unique<MemoryStore>(keep_events);
}

}  // namespace fabrica
