// Pieces shared by the SQLite store and its in-memory twin, so that both give the same answers:
// argument checks, the revision condition of a write, prefix ranges, and EventHub, which runs
// Subscribe for both.
//
// Internal to src/store; code above the store includes store.h only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace fabrica::store_internal {

// Keys are non-empty and hold no NUL byte (SQLite leaves comparisons of TEXT with embedded NULs
// undefined, and the memory store must agree with it).
Status ValidateKey(const std::string& key);

// A prefix or a start_after may be empty but holds no NUL byte either.
Status ValidateKeyRange(const std::string& prefix, const std::string& start_after, int limit);

// The arguments of EventsSince: a prefix as above, after_revision >= 0, limit >= 0.
Status ValidateEventsSince(const std::string& prefix, int64_t after_revision, int limit);

// Checks what Put/Delete accept as `expected_revision` before anything is queued.
Status ValidateWrite(const std::string& key, int64_t expected_revision, bool is_delete);

// Whether a write may proceed given the key's state. `exists` says whether the key is present;
// `mod_revision` is its mod_revision when it is. The error names the key and both revisions.
Status CheckCondition(const std::string& key, bool exists, int64_t mod_revision,
                      int64_t expected_revision, bool is_delete);

// The error EventsSince returns when `after_revision` is older than the log reaches.
Status CompactedError(int64_t after_revision, int64_t compact_revision);

// The smallest string greater than every string that starts with `prefix`, or nullopt when
// there is none (prefix empty or all 0xff bytes). Keys in [prefix, PrefixEnd(prefix)) are
// exactly those starting with `prefix` under byte-wise order, which is how both stores order
// keys (std::string compares as unsigned char, SQLite's BINARY collation uses memcmp).
std::optional<std::string> PrefixEnd(const std::string& prefix);

// The subscribers of one store. Deliver is called by the store with each batch of committed
// events, from one thread at a time and in revision order; each subscriber's function is called
// on that thread. A Subscription handle may be destroyed on any thread, also inside a callback;
// once its destructor returns, its function is never called again (on another thread it waits
// for a delivery in flight to end). The hub is shared with the handles, so a handle may outlive
// its store.
//
// A store may acknowledge a write before delivering its events (the SQLite store wakes writers
// first), so a subscriber added in between would see events committed before it subscribed.
// Subscribe therefore records the store's revision and the subscriber gets only later events.
// That is exact if the store makes a revision readable through `current_revision` before it
// calls Deliver for it: a delivery that missed the new subscriber then carries only revisions
// the subscriber recorded as seen.
class EventHub : public std::enable_shared_from_this<EventHub> {
 public:
  std::unique_ptr<Store::Subscription> Subscribe(
      std::function<void(const std::vector<WatchEvent>&)> fn,
      const std::function<int64_t()>& current_revision);

  void Deliver(const std::vector<WatchEvent>& events);

  // True inside a callback, i.e. on the thread that is delivering now. Writes from there would
  // wait for the very thread that runs them (the SQLite committer), so stores refuse them.
  bool OnDeliveringThread() const;

 private:
  struct Subscriber {
    std::function<void(const std::vector<WatchEvent>&)> fn;
    int64_t after_revision = 0;  // events up to here were committed before Subscribe
    std::atomic<bool> active{true};
  };
  class Handle;

  void Unsubscribe(const std::shared_ptr<Subscriber>& subscriber);

  std::mutex deliver_mu_;  // held through a whole delivery; Unsubscribe waits on it
  std::atomic<std::thread::id> delivering_thread_{};
  std::mutex mu_;  // guards subscribers_
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
};

}  // namespace fabrica::store_internal
