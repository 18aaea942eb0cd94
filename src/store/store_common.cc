#include "store/store_common.h"

#include <algorithm>
#include <utility>

namespace fabrica::store_internal {

Status ValidateKey(const std::string& key) {
  if (key.empty()) return InvalidArgument("empty key");
  if (key.find('\0') != std::string::npos) {
    return InvalidArgument("key '" + key.substr(0, key.find('\0')) + "...' contains a NUL byte");
  }
  return Status::Ok();
}

Status ValidateKeyRange(const std::string& prefix, const std::string& start_after, int limit) {
  if (prefix.find('\0') != std::string::npos) {
    return InvalidArgument("prefix '" + prefix.substr(0, prefix.find('\0')) +
                           "...' contains a NUL byte");
  }
  if (start_after.find('\0') != std::string::npos) {
    return InvalidArgument("start_after '" + start_after.substr(0, start_after.find('\0')) +
                           "...' contains a NUL byte");
  }
  if (limit < 0) return InvalidArgument("limit " + std::to_string(limit) + " is negative");
  return Status::Ok();
}

Status ValidateEventsSince(const std::string& prefix, int64_t after_revision, int limit) {
  RETURN_IF_ERROR(ValidateKeyRange(prefix, "", limit));
  if (after_revision < 0) {
    return InvalidArgument("after_revision " + std::to_string(after_revision) + " is negative");
  }
  return Status::Ok();
}

Status ValidateWrite(const std::string& key, int64_t expected_revision, bool is_delete) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (expected_revision < kAnyRevision) {
    return InvalidArgument("expected revision " + std::to_string(expected_revision) + " for key '" +
                           key + "' is neither a revision nor kAnyRevision (-1)");
  }
  if (is_delete && expected_revision == kMustNotExist) {
    return InvalidArgument("delete of key '" + key +
                           "' with expected revision 0 (must not exist) can never succeed");
  }
  return Status::Ok();
}

Status CheckCondition(const std::string& key, bool exists, int64_t mod_revision,
                      int64_t expected_revision, bool is_delete) {
  if (expected_revision == kAnyRevision) {
    if (is_delete && !exists) return NotFound("key '" + key + "' not found");
    return Status::Ok();
  }
  if (expected_revision == kMustNotExist) {
    if (exists) {
      return Status(StatusCode::kAlreadyExists, "key '" + key + "' already exists (revision " +
                                                    std::to_string(mod_revision) + ")");
    }
    return Status::Ok();
  }
  if (!exists) {
    return NotFound("key '" + key + "' not found (expected revision " +
                    std::to_string(expected_revision) + ")");
  }
  if (mod_revision != expected_revision) {
    return FailedPrecondition("revision mismatch on key '" + key + "': expected " +
                              std::to_string(expected_revision) + ", current " +
                              std::to_string(mod_revision));
  }
  return Status::Ok();
}

Status CompactedError(int64_t after_revision, int64_t compact_revision) {
  return FailedPrecondition("events up to revision " + std::to_string(compact_revision) +
                            " are compacted; cannot replay events after revision " +
                            std::to_string(after_revision) + " (list again)");
}

std::optional<std::string> PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::nullopt;
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

// ---------------------------------------------------------------------------------------------
// EventHub

class EventHub::Handle : public Store::Subscription {
 public:
  Handle(std::shared_ptr<EventHub> hub, std::shared_ptr<Subscriber> subscriber)
      : hub_(std::move(hub)), subscriber_(std::move(subscriber)) {}
  ~Handle() override { hub_->Unsubscribe(subscriber_); }

 private:
  std::shared_ptr<EventHub> hub_;
  std::shared_ptr<Subscriber> subscriber_;
};

std::unique_ptr<Store::Subscription> EventHub::Subscribe(
    std::function<void(const std::vector<WatchEvent>&)> fn,
    const std::function<int64_t()>& current_revision) {
  CHECK(fn != nullptr);
  auto subscriber = std::make_shared<Subscriber>();
  subscriber->fn = std::move(fn);
  {
    // Reading the revision under mu_ orders it against Deliver's snapshot of the subscribers:
    // a delivery whose snapshot precedes this one was made readable before, so its revisions
    // are <= after_revision.
    std::lock_guard<std::mutex> lock(mu_);
    subscriber->after_revision = current_revision();
    subscribers_.push_back(subscriber);
  }
  return std::make_unique<Handle>(shared_from_this(), std::move(subscriber));
}

void EventHub::Unsubscribe(const std::shared_ptr<Subscriber>& subscriber) {
  // Clearing `active` stops a delivery on this very thread (a callback that drops a handle);
  // waiting on deliver_mu_ lets a delivery on another thread that may already have read
  // `active` finish before the destructor returns.
  subscriber->active.store(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    subscribers_.erase(std::remove(subscribers_.begin(), subscribers_.end(), subscriber),
                       subscribers_.end());
  }
  if (!OnDeliveringThread()) {
    std::lock_guard<std::mutex> wait_for_delivery(deliver_mu_);
  }
}

void EventHub::Deliver(const std::vector<WatchEvent>& events) {
  if (events.empty()) return;
  std::lock_guard<std::mutex> delivering(deliver_mu_);
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (subscribers_.empty()) return;
    subscribers = subscribers_;
  }
  delivering_thread_.store(std::this_thread::get_id());
  for (const std::shared_ptr<Subscriber>& s : subscribers) {
    if (!s->active.load() || events.back().kv.mod_revision <= s->after_revision) continue;
    if (events.front().kv.mod_revision > s->after_revision) {
      s->fn(events);
      continue;
    }
    // A batch that straddles the subscription: only the part after it.
    auto first = std::find_if(events.begin(), events.end(), [&](const WatchEvent& e) {
      return e.kv.mod_revision > s->after_revision;
    });
    s->fn(std::vector<WatchEvent>(first, events.end()));
  }
  delivering_thread_.store(std::thread::id());
}

bool EventHub::OnDeliveringThread() const {
  return delivering_thread_.load() == std::this_thread::get_id();
}

}  // namespace fabrica::store_internal
