// Store: Fabrica's versioned key-value store with watch, the one interface behind every durable
// piece of control-plane state (the design follows etcd v3's data model).
//
// Every successful write (put or delete) gets the next value of one global, strictly increasing
// revision, starting at 1. Each key remembers the revision that created it and the one that last
// modified it. Writes are conditional on the key's current mod_revision, which is how API updates
// with a stale resourceVersion get a conflict. A write returns only after it is durable: on disk
// and fsynced (implementations may group-commit concurrent writes, fsyncing once before any of
// them is acknowledged).
//
// Watching: every write also appends an event to a log; EventsSince replays events after a
// revision (for clients that resume a watch), and Subscribe delivers new events as they commit.
// The log may be compacted: EventsSince then fails with kFailedPrecondition ("compacted") when the
// requested revision is older than what is kept, and the client must list again.
//
// Thread-safety: all methods may be called concurrently from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  // For a put: the new value, its create and mod revisions. For a delete: the key, the value it
  // had, and mod_revision = the revision of the delete.
  KeyValue kv;
};

struct ListResult {
  std::vector<KeyValue> items;  // ordered by key
  int64_t revision = 0;         // the store's revision when the list was read
  bool more = false;            // true when `limit` cut the list short
};

// Conditions for Put and Delete.
inline constexpr int64_t kAnyRevision = -1;  // unconditional
inline constexpr int64_t kMustNotExist = 0;  // create only

class Store {
 public:
  virtual ~Store() = default;

  // kNotFound when the key is absent.
  virtual Result<KeyValue> Get(const std::string& key) = 0;

  // Writes the value if the key's mod_revision equals `expected_revision` (kMustNotExist: the key
  // must be absent; kAnyRevision: no condition). Returns the new revision. Errors:
  // kAlreadyExists (create of an existing key), kNotFound (update of an absent key),
  // kFailedPrecondition (revision mismatch; the message gives the current revision).
  virtual Result<int64_t> Put(const std::string& key, const std::string& value,
                              int64_t expected_revision) = 0;

  // Several independent conditional Puts (Deletes, those with `remove`), submitted together so
  // that a store with group commit makes them durable with one sync: each succeeds or fails on
  // its own, as Put or Delete would, and the results come back in order once every one is
  // decided. Not atomic as a whole.
  struct Write {
    std::string key;
    std::string value;
    int64_t expected_revision = kAnyRevision;
    bool remove = false;  // a Delete (value unused)
  };
  virtual std::vector<Result<int64_t>> PutAll(const std::vector<Write>& writes) {
    std::vector<Result<int64_t>> out;
    out.reserve(writes.size());
    for (const Write& w : writes)
      out.push_back(w.remove ? Delete(w.key, w.expected_revision)
                             : Put(w.key, w.value, w.expected_revision));
    return out;
  }

  // Deletes the key if its mod_revision equals `expected_revision` (or kAnyRevision). Returns the
  // revision of the delete. kNotFound when absent, kFailedPrecondition on mismatch.
  virtual Result<int64_t> Delete(const std::string& key, int64_t expected_revision) = 0;

  // Keys that start with `prefix`, in key order, strictly after `start_after` (pagination; "" =
  // from the start), at most `limit` (0 = no limit).
  virtual Result<ListResult> List(const std::string& prefix, const std::string& start_after,
                                  int limit) = 0;

  // Events with revision > `after_revision` on keys starting with `prefix`, in revision order,
  // at most `limit` (0 = no limit). kFailedPrecondition if the log no longer reaches back there.
  virtual Result<std::vector<WatchEvent>> EventsSince(const std::string& prefix,
                                                      int64_t after_revision, int limit) = 0;

  // The current revision (0 for an empty, never written store).
  virtual int64_t Revision() = 0;

  // Calls `fn` with every event committed from now on, in revision order, from a store thread,
  // after the write is durable. Keep `fn` short (post work elsewhere); writes to this store from
  // inside `fn` fail with kInternal, since they would wait for the thread that runs `fn`.
  // Destroying the returned handle unsubscribes; after it is destroyed `fn` is never called
  // again (destroying it on another thread waits for a call in progress). The handle may
  // outlive the store.
  class Subscription {
   public:
    virtual ~Subscription() = default;
  };
  virtual std::unique_ptr<Subscription> Subscribe(
      std::function<void(const std::vector<WatchEvent>&)> fn) = 0;
};

// SQLite in WAL mode with synchronous=FULL and group commit. Creates the file if needed; keeps
// the last `keep_events` events for EventsSince. One store per file: while it is open, another
// store of the same file, in this process or another, is refused (kFailedPrecondition naming
// the process that holds it; a flock on PATH.lock — on NFS, where Linux makes flock a lock of
// the whole process, only another process is refused).
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               int64_t keep_events = 100000);

// An in-memory twin with the same semantics, for tests of code above the store. Keeps the last
// `keep_events` events. REQUIRES: keep_events >= 0.
std::unique_ptr<Store> NewMemoryStore(int64_t keep_events = 100000);

}  // namespace fabrica
