// Tests for src/store: every behaviour test runs against both the SQLite store and the memory
// store (they must agree), followed by SQLite-only tests of reopening and of durability after
// a crash.
//
// SQLite stores live in a fresh directory under testing::TempDir() per test.
#include "store/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "test_util.h"

namespace fabrica {
namespace {

// Asserts that `r` failed with `code` and that its message contains `fragment`.
template <typename T>
void ExpectError(const Result<T>& r, StatusCode code, const std::string& fragment) {
  ASSERT_FALSE(r.ok()) << "expected " << StatusCodeName(code) << " containing '" << fragment << "'";
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos)
      << "'" << fragment << "' not in: " << r.status().message();
}

// A fresh directory, removed with everything in it at the end of the scope.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("fabrica_store") {}
};

// A 1 KiB value that names its key, so that a torn or misplaced value shows.
std::string ValueFor(const std::string& key) {
  std::string value = key + "=";
  while (value.size() < 1024) value += static_cast<char>('a' + value.size() % 26);
  return value;
}

// Collects what a subscription delivers and lets a test wait for it.
class EventCollector {
 public:
  void Add(const std::vector<WatchEvent>& events) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.insert(events_.end(), events.begin(), events.end());
    cv_.notify_all();
  }
  // Waits until at least `n` events arrived (or 10 s passed) and returns all of them.
  std::vector<WatchEvent> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return events_.size() >= n; });
    return events_;
  }
  // Waits until the event of revision `revision` arrived (or 10 s passed) and returns all.
  std::vector<WatchEvent> WaitForRevision(int64_t revision) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10),
                 [&] { return !events_.empty() && events_.back().kv.mod_revision >= revision; });
    return events_;
  }
  std::vector<WatchEvent> Now() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WatchEvent> events_;
};

// ---------------------------------------------------------------------------------------------
// Both stores

enum class Kind { kMemory, kSqlite };

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  // Opens (or, for SQLite, reopens) the store under test.
  Store& Open(int64_t keep_events = 100000) {
    store_.reset();
    if (GetParam() == Kind::kMemory) {
      store_ = NewMemoryStore(keep_events);
    } else {
      Result<std::unique_ptr<Store>> opened =
          OpenSqliteStore(dir_.path() + "/store.db", keep_events);
      CHECK(opened.ok());
      store_ = std::move(opened).value();
    }
    return *store_;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Both, StoreTest, ::testing::Values(Kind::kMemory, Kind::kSqlite),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param == Kind::kMemory ? "Memory" : "Sqlite";
                         });

TEST_P(StoreTest, CreateGetAndUpdateWithRevision) {
  Store& store = Open();
  EXPECT_EQ(store.Revision(), 0);
  ExpectError(store.Get("/a"), StatusCode::kNotFound, "'/a'");

  Result<int64_t> created = store.Put("/a", "one", kMustNotExist);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(*created, 1);
  Result<KeyValue> got = store.Get("/a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->key, "/a");
  EXPECT_EQ(got->value, "one");
  EXPECT_EQ(got->create_revision, 1);
  EXPECT_EQ(got->mod_revision, 1);

  ExpectError(store.Put("/a", "again", kMustNotExist), StatusCode::kAlreadyExists, "'/a'");
  ExpectError(store.Put("/missing", "x", 5), StatusCode::kNotFound, "'/missing'");

  ASSERT_TRUE(store.Put("/b", "other", kAnyRevision).ok());  // revision 2
  Result<int64_t> updated = store.Put("/a", "two", 1);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(*updated, 3);
  got = store.Get("/a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->value, "two");
  EXPECT_EQ(got->create_revision, 1);
  EXPECT_EQ(got->mod_revision, 3);

  // A stale revision: the message gives the expected and the current one.
  Result<int64_t> stale = store.Put("/a", "three", 1);
  ExpectError(stale, StatusCode::kFailedPrecondition, "revision mismatch on key '/a'");
  ExpectError(stale, StatusCode::kFailedPrecondition, "expected 1, current 3");
  EXPECT_EQ(store.Get("/a")->value, "two");

  // Unconditional writes; empty and binary values survive.
  std::string binary("\0\xff\x01", 3);
  ASSERT_TRUE(store.Put("/a", binary, kAnyRevision).ok());
  EXPECT_EQ(store.Get("/a")->value, binary);
  ASSERT_TRUE(store.Put("/a", "", kAnyRevision).ok());
  EXPECT_EQ(store.Get("/a")->value, "");
  EXPECT_EQ(store.Revision(), 5);
}

// PutAll: each write decided on its own, as Put would, in order; the good ones survive reopen.
TEST_P(StoreTest, PutAllDecidesEachWriteOnItsOwn) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/a", "one", kMustNotExist).ok());           // revision 1
  std::vector<Store::Write> writes = {{"/a", "two", 1},              // ok
                                      {"/b", "new", kMustNotExist},  // ok
                                      {"/a", "stale", 1},            // mismatch: /a moved on
                                      {"", "bad key", kAnyRevision},
                                      {"/c", "x", 7}};  // update of an absent key
  std::vector<Result<int64_t>> out = store.PutAll(writes);
  ASSERT_EQ(out.size(), writes.size());
  ASSERT_TRUE(out[0].ok()) << out[0].status().ToString();
  ASSERT_TRUE(out[1].ok()) << out[1].status().ToString();
  EXPECT_NE(*out[0], *out[1]);
  ExpectError(out[2], StatusCode::kFailedPrecondition, "revision mismatch on key '/a'");
  EXPECT_FALSE(out[3].ok());
  ExpectError(out[4], StatusCode::kNotFound, "'/c'");
  EXPECT_EQ(store.Revision(), 3);
  EXPECT_TRUE(store.PutAll({}).empty());
  Store& again = GetParam() == Kind::kSqlite ? Open() : store;
  EXPECT_EQ(again.Get("/a")->value, "two");
  EXPECT_EQ(again.Get("/b")->value, "new");
  ExpectError(again.Get("/c"), StatusCode::kNotFound, "'/c'");
}

// A write marked `remove` is a Delete, decided on its own beside the Puts.
TEST_P(StoreTest, PutAllDeletesTheWritesMarkedRemove) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/a", "one", kMustNotExist).ok());                            // revision 1
  ASSERT_TRUE(store.Put("/b", "two", kMustNotExist).ok());                            // revision 2
  std::vector<Store::Write> writes = {{"/a", "", kAnyRevision, /*remove=*/true},      // ok
                                      {"/b", "", 1, /*remove=*/true},                 // mismatch
                                      {"/c", "new", kMustNotExist},                   // ok
                                      {"/none", "", kAnyRevision, /*remove=*/true}};  // absent
  std::vector<Result<int64_t>> out = store.PutAll(writes);
  ASSERT_EQ(out.size(), writes.size());
  ASSERT_TRUE(out[0].ok()) << out[0].status().ToString();
  ExpectError(out[1], StatusCode::kFailedPrecondition, "'/b'");
  ASSERT_TRUE(out[2].ok()) << out[2].status().ToString();
  ExpectError(out[3], StatusCode::kNotFound, "'/none'");
  Store& again = GetParam() == Kind::kSqlite ? Open() : store;
  ExpectError(again.Get("/a"), StatusCode::kNotFound, "'/a'");
  EXPECT_EQ(again.Get("/b")->value, "two");
  EXPECT_EQ(again.Get("/c")->value, "new");
}

TEST_P(StoreTest, DeleteWithRevision) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/a", "v", kMustNotExist).ok());  // 1
  ASSERT_TRUE(store.Put("/a", "w", 1).ok());              // 2

  ExpectError(store.Delete("/a", 1), StatusCode::kFailedPrecondition, "expected 1, current 2");
  ExpectError(store.Delete("/nope", kAnyRevision), StatusCode::kNotFound, "'/nope'");
  ExpectError(store.Delete("/nope", 7), StatusCode::kNotFound, "'/nope'");

  Result<int64_t> deleted = store.Delete("/a", 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 3);
  ExpectError(store.Get("/a"), StatusCode::kNotFound, "'/a'");
  ExpectError(store.Delete("/a", kAnyRevision), StatusCode::kNotFound, "'/a'");

  // A re-created key starts a new life: create_revision is that of the new create.
  ASSERT_TRUE(store.Put("/a", "x", kMustNotExist).ok());
  EXPECT_EQ(store.Get("/a")->create_revision, 4);
  Result<int64_t> unconditional = store.Delete("/a", kAnyRevision);
  ASSERT_TRUE(unconditional.ok());
  EXPECT_EQ(*unconditional, 5);
  EXPECT_EQ(store.Revision(), 5);
}

TEST_P(StoreTest, RejectsBadArguments) {
  Store& store = Open();
  ExpectError(store.Put("", "v", kAnyRevision), StatusCode::kInvalidArgument, "empty key");
  ExpectError(store.Put(std::string("/a\0b", 4), "v", kAnyRevision), StatusCode::kInvalidArgument,
              "NUL");
  ExpectError(store.Put("/a", "v", -2), StatusCode::kInvalidArgument, "expected revision -2");
  ExpectError(store.Delete("/a", kMustNotExist), StatusCode::kInvalidArgument, "can never");
  ExpectError(store.List("/", "", -1), StatusCode::kInvalidArgument, "limit -1");
  ExpectError(store.EventsSince("/", -1, 0), StatusCode::kInvalidArgument, "after_revision -1");
  EXPECT_EQ(store.Revision(), 0);  // nothing was written
}

TEST_P(StoreTest, ListsByPrefixWithPagination) {
  Store& store = Open();
  for (const char* key : {"/pods/c", "/pods/a", "/nodes/x", "/pods/b", "/podsX", "/pods/d"}) {
    ASSERT_TRUE(store.Put(key, std::string("v") + key, kMustNotExist).ok());
  }
  auto keys = [](const ListResult& r) {
    std::vector<std::string> out;
    for (const KeyValue& kv : r.items) out.push_back(kv.key);
    return out;
  };

  Result<ListResult> all = store.List("/pods/", "", 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(keys(*all), (std::vector<std::string>{"/pods/a", "/pods/b", "/pods/c", "/pods/d"}));
  EXPECT_FALSE(all->more);
  EXPECT_EQ(all->revision, 6);
  EXPECT_EQ(all->items[0].value, "v/pods/a");
  EXPECT_EQ(all->items[0].create_revision, 2);

  // Pages of two: the caller passes the last key it saw.
  Result<ListResult> page = store.List("/pods/", "", 2);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(keys(*page), (std::vector<std::string>{"/pods/a", "/pods/b"}));
  EXPECT_TRUE(page->more);
  page = store.List("/pods/", "/pods/b", 2);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(keys(*page), (std::vector<std::string>{"/pods/c", "/pods/d"}));
  EXPECT_FALSE(page->more);  // exactly `limit` left is not "more"
  page = store.List("/pods/", "/pods/d", 2);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->items.empty());
  EXPECT_FALSE(page->more);

  // start_after before the prefix starts at the prefix; after it, nothing.
  EXPECT_EQ(keys(*store.List("/pods/", "/a", 1)), (std::vector<std::string>{"/pods/a"}));
  EXPECT_TRUE(store.List("/pods/", "/q", 0)->items.empty());
  // The empty prefix lists everything; a prefix that matches nothing lists nothing.
  EXPECT_EQ(store.List("", "", 0)->items.size(), 6u);
  EXPECT_EQ(keys(*store.List("/pods", "/pods/c", 0)),
            (std::vector<std::string>{"/pods/d", "/podsX"}));
  EXPECT_TRUE(store.List("/zzz", "", 0)->items.empty());
  // Byte order, also past 0x7f; a prefix of 0xff bytes has no upper bound.
  ASSERT_TRUE(store.Put("/\xff\xff", "hi", kMustNotExist).ok());
  ASSERT_TRUE(store.Put("/\xff\x01", "lo", kMustNotExist).ok());
  EXPECT_EQ(keys(*store.List("/\xff", "", 0)),
            (std::vector<std::string>{"/\xff\x01", "/\xff\xff"}));
  EXPECT_EQ(keys(*store.List("/\xff\xff", "", 0)), (std::vector<std::string>{"/\xff\xff"}));
}

TEST_P(StoreTest, RevisionsIncreaseByOnePerSuccessfulWrite) {
  Store& store = Open();
  int64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    std::string key = "/k" + std::to_string(i % 5);
    Result<int64_t> r = i % 7 == 6 ? store.Delete(key, kAnyRevision)
                                   : store.Put(key, std::to_string(i), kAnyRevision);
    if (!r.ok()) {
      // A failed write consumes no revision.
      EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
      EXPECT_EQ(store.Revision(), last);
      continue;
    }
    EXPECT_EQ(*r, last + 1);
    last = *r;
    EXPECT_EQ(store.Revision(), last);
  }
  ASSERT_TRUE(store.Put("/k0", "x", kMustNotExist).status().code() == StatusCode::kAlreadyExists);
  EXPECT_EQ(store.Revision(), last);
}

TEST_P(StoreTest, EventsSinceReplaysPutsAndDeletes) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/pods/a", "1", kMustNotExist).ok());   // 1
  ASSERT_TRUE(store.Put("/nodes/n", "n", kMustNotExist).ok());  // 2
  ASSERT_TRUE(store.Put("/pods/a", "2", 1).ok());               // 3
  ASSERT_TRUE(store.Delete("/pods/a", 3).ok());                 // 4
  ASSERT_TRUE(store.Put("/pods/b", "b", kAnyRevision).ok());    // 5

  Result<std::vector<WatchEvent>> all = store.EventsSince("", 0, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ((*all)[i].kv.mod_revision, i + 1);

  Result<std::vector<WatchEvent>> pods = store.EventsSince("/pods/", 1, 0);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);
  const WatchEvent& update = (*pods)[0];
  EXPECT_EQ(update.type, WatchEvent::Type::kPut);
  EXPECT_EQ(update.kv.key, "/pods/a");
  EXPECT_EQ(update.kv.value, "2");
  EXPECT_EQ(update.kv.create_revision, 1);
  EXPECT_EQ(update.kv.mod_revision, 3);
  const WatchEvent& deleted = (*pods)[1];
  EXPECT_EQ(deleted.type, WatchEvent::Type::kDelete);
  EXPECT_EQ(deleted.kv.key, "/pods/a");
  EXPECT_EQ(deleted.kv.value, "2");  // the value it had
  EXPECT_EQ(deleted.kv.create_revision, 1);
  EXPECT_EQ(deleted.kv.mod_revision, 4);
  EXPECT_EQ((*pods)[2].kv.key, "/pods/b");
  EXPECT_EQ((*pods)[2].kv.create_revision, 5);

  Result<std::vector<WatchEvent>> limited = store.EventsSince("/pods/", 0, 2);
  ASSERT_TRUE(limited.ok());
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[1].kv.mod_revision, 3);
  EXPECT_TRUE(store.EventsSince("", 5, 0)->empty());
  EXPECT_TRUE(store.EventsSince("", 99, 0)->empty());
  EXPECT_TRUE(store.EventsSince("/none/", 0, 0)->empty());
}

TEST_P(StoreTest, CompactedEventsAreAnErrorAndLatestAreKept) {
  Store& store = Open(/*keep_events=*/10);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(store.Put("/k", std::to_string(i), kAnyRevision).ok());

  // The last 10 events (21..30) are kept; asking from before them fails.
  Result<std::vector<WatchEvent>> kept = store.EventsSince("", 20, 0);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  ASSERT_EQ(kept->size(), 10u);
  EXPECT_EQ(kept->front().kv.mod_revision, 21);
  EXPECT_EQ(kept->back().kv.value, "29");
  ExpectError(store.EventsSince("", 0, 0), StatusCode::kFailedPrecondition, "compacted");
  ExpectError(store.EventsSince("/k", 19, 1), StatusCode::kFailedPrecondition, "compacted");
  // Keys are untouched by compaction.
  EXPECT_EQ(store.Get("/k")->value, "29");
}

TEST_P(StoreTest, SubscribeDeliversInOrderAndStopsWhenDropped) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/before", "x", kAnyRevision).ok());
  EventCollector collector;
  std::unique_ptr<Store::Subscription> sub =
      store.Subscribe([&](const std::vector<WatchEvent>& events) { collector.Add(events); });

  ASSERT_TRUE(store.Put("/a", "1", kMustNotExist).ok());  // 2
  ASSERT_TRUE(store.Put("/a", "2", 2).ok());              // 3
  ASSERT_TRUE(store.Put("/a", "3", 2).status().code() == StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store.Delete("/a", 3).ok());  // 4
  std::vector<WatchEvent> events = collector.WaitFor(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kv.mod_revision, 2);
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[1].kv.mod_revision, 3);
  EXPECT_EQ(events[2].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[2].kv.mod_revision, 4);

  sub.reset();
  ASSERT_TRUE(store.Put("/after", "y", kAnyRevision).ok());
  ASSERT_TRUE(store.Put("/after", "z", kAnyRevision).ok());
  EXPECT_EQ(collector.Now().size(), 3u);
}

TEST_P(StoreTest, SubscribersSeeConcurrentWritesInRevisionOrder) {
  Store& store = Open();
  EventCollector collector;
  auto sub = store.Subscribe([&](const std::vector<WatchEvent>& e) { collector.Add(e); });
  constexpr int kThreads = 4, kWrites = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < kWrites; ++i) {
        CHECK(store.Put("/t" + std::to_string(t), std::to_string(i), kAnyRevision).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<WatchEvent> events = collector.WaitFor(static_cast<size_t>(kThreads) * kWrites);
  ASSERT_EQ(events.size(), static_cast<size_t>(kThreads) * kWrites);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].kv.mod_revision, int64_t(i) + 1);
}

// Subscribing while writes commit: each subscriber gets every event committed after it
// subscribed, once, in order, and none from before (the SQLite store acknowledges writes before
// it delivers their events, so this needs care).
TEST_P(StoreTest, SubscribingDuringWritesGetsExactlyTheLaterEvents) {
  Store& store = Open();
  constexpr int kWrites = 300, kSubscribers = 20;
  std::thread writer([&store] {
    for (int i = 0; i < kWrites; ++i) CHECK(store.Put("/k", std::to_string(i), kAnyRevision).ok());
  });
  struct Watcher {
    int64_t before = 0, after = 0;  // Revision() around Subscribe
    EventCollector collector;
    std::unique_ptr<Store::Subscription> sub;
  };
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kSubscribers; ++i) {
    auto w = std::make_unique<Watcher>();
    w->before = store.Revision();
    w->sub = store.Subscribe([c = &w->collector](const std::vector<WatchEvent>& e) { c->Add(e); });
    w->after = store.Revision();
    watchers.push_back(std::move(w));
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  writer.join();
  for (const std::unique_ptr<Watcher>& w : watchers) {
    // It gets every event after the revision at which it subscribed, which lies between
    // `before` and `after`: wait for the last one rather than for a count.
    if (w->after == kWrites) {
      // It may have subscribed after the last write; then nothing comes.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (w->collector.Now().empty()) continue;
    }
    std::vector<WatchEvent> events = w->collector.WaitForRevision(kWrites);
    ASSERT_FALSE(events.empty());
    EXPECT_GT(events.front().kv.mod_revision, w->before);
    EXPECT_LE(events.front().kv.mod_revision, w->after + 1);
    for (size_t i = 1; i < events.size(); ++i) {
      ASSERT_EQ(events[i].kv.mod_revision, events[i - 1].kv.mod_revision + 1);
    }
    EXPECT_EQ(events.back().kv.mod_revision, kWrites);
  }
}

TEST_P(StoreTest, CallbacksMayUnsubscribeButNotWrite) {
  Store& store = Open();
  std::unique_ptr<Store::Subscription> self;
  std::atomic<int> calls{0};
  Status write_from_callback;
  self = store.Subscribe([&](const std::vector<WatchEvent>&) {
    write_from_callback = store.Put("/from-callback", "x", kAnyRevision).status();
    self.reset();  // dropping its own handle inside the callback must not deadlock
    ++calls;
  });
  ASSERT_TRUE(store.Put("/a", "1", kAnyRevision).ok());
  ASSERT_TRUE(store.Put("/a", "2", kAnyRevision).ok());
  // The SQLite store calls back after waking the writer; the second write's batch comes after
  // the first's delivery, so by now the first callback has run.
  for (int i = 0; i < 1000 && calls.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(write_from_callback.code(), StatusCode::kInternal);
  EXPECT_NE(write_from_callback.message().find("Subscribe callback"), std::string::npos);
  ExpectError(store.Get("/from-callback"), StatusCode::kNotFound, "from-callback");
}

TEST_P(StoreTest, SubscriptionMayOutliveTheStore) {
  Store& store = Open();
  auto sub = store.Subscribe([](const std::vector<WatchEvent>&) {});
  ASSERT_TRUE(store.Put("/a", "1", kAnyRevision).ok());
  store_.reset();
  sub.reset();
}

TEST_P(StoreTest, ConcurrentWritersAllSucceedWithUniqueRevisions) {
  Store& store = Open();
  constexpr int kThreads = 8, kWrites = 200;
  std::vector<std::vector<int64_t>> revisions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kWrites; ++i) {
        std::string key = "/w/" + std::to_string(t) + "/" + std::to_string(i);
        Result<int64_t> r = store.Put(key, ValueFor(key), kMustNotExist);
        if (!r.ok()) {
          ADD_FAILURE() << r.status().ToString();
          return;
        }
        revisions[t].push_back(*r);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  std::set<int64_t> unique;
  for (const std::vector<int64_t>& rs : revisions) {
    ASSERT_EQ(rs.size(), size_t{kWrites});
    for (size_t i = 1; i < rs.size(); ++i) EXPECT_LT(rs[i - 1], rs[i]);  // per writer, in order
    unique.insert(rs.begin(), rs.end());
  }
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads) * kWrites);
  EXPECT_EQ(*unique.begin(), 1);
  EXPECT_EQ(*unique.rbegin(), kThreads * kWrites);
  EXPECT_EQ(store.Revision(), kThreads * kWrites);
  Result<ListResult> listed = store.List("/w/", "", 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->items.size(), static_cast<size_t>(kThreads) * kWrites);
  for (const KeyValue& kv : listed->items) EXPECT_EQ(kv.value, ValueFor(kv.key));
}

// Read-modify-write with the revision as the guard: every increment lands exactly once, which
// needs conditions checked in order inside a batch (several writers with the same expected
// revision often share one).
TEST_P(StoreTest, ConcurrentCompareAndSwapLosesNoUpdate) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/counter", "0", kMustNotExist).ok());
  constexpr int kThreads = 8, kIncrements = 25;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int done = 0; done < kIncrements;) {
        Result<KeyValue> kv = store.Get("/counter");
        CHECK(kv.ok());
        std::string next = std::to_string(std::stoi(kv->value) + 1);
        Result<int64_t> r = store.Put("/counter", next, kv->mod_revision);
        if (r.ok()) {
          ++done;
        } else {
          CHECK(r.status().code() == StatusCode::kFailedPrecondition);
          ++conflicts;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(store.Get("/counter")->value, std::to_string(kThreads * kIncrements));
  EXPECT_EQ(store.Revision(), 1 + kThreads * kIncrements);
  RecordProperty("conflicts", conflicts.load());
}

TEST_P(StoreTest, ReadsRunConcurrentlyWithWrites) {
  Store& store = Open();
  ASSERT_TRUE(store.Put("/r", "0", kAnyRevision).ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      int64_t last = 0;
      while (!stop.load()) {
        Result<KeyValue> kv = store.Get("/r");
        CHECK(kv.ok());
        CHECK(kv->mod_revision >= last);  // never goes back
        last = kv->mod_revision;
        Result<ListResult> list = store.List("/", "", 0);
        CHECK(list.ok());
        CHECK(list->items.size() == 1 && list->items[0].mod_revision <= list->revision);
      }
    });
  }
  for (int i = 1; i <= 100; ++i) ASSERT_TRUE(store.Put("/r", std::to_string(i), kAnyRevision).ok());
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(store.Get("/r")->value, "100");
}

// Reads after an acknowledged write see it, whatever readers race with the writes (the SQLite
// store serves Get from a cache that readers fill and commits update), and a deleted key reads
// as absent at once. Many keys, so that readers fill the cache while commits change it.
TEST_P(StoreTest, GetSeesEveryAcknowledgedWrite) {
  Store& store = Open();
  constexpr int kKeys = 8;
  std::atomic<int> acked[kKeys];
  for (int k = 0; k < kKeys; ++k) {
    acked[k] = 0;
    ASSERT_TRUE(store.Put("/c/" + std::to_string(k), "0", kAnyRevision).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> stale{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (int i = t; !stop.load(); ++i) {
        const int k = i % kKeys;
        const int floor = acked[k].load();
        Result<KeyValue> kv = store.Get("/c/" + std::to_string(k));
        if (!kv.ok() || std::stoi(kv->value) < floor) stale++;
      }
    });
  }
  for (int i = 1; i <= 300; ++i) {
    const int k = i % kKeys;
    ASSERT_TRUE(store.Put("/c/" + std::to_string(k), std::to_string(i), kAnyRevision).ok());
    acked[k].store(i);
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(stale.load(), 0);
  ASSERT_TRUE(store.Delete("/c/3", kAnyRevision).ok());
  EXPECT_EQ(store.Get("/c/3").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.Put("/c/3", "again", kMustNotExist).ok());
  EXPECT_EQ(store.Get("/c/3")->value, "again");
}

// ---------------------------------------------------------------------------------------------
// SQLite only

TEST(SqliteStore, RevisionAndDataSurviveReopen) {
  TempDir dir;
  const std::string path = dir.path() + "/store.db";
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(path, /*keep_events=*/5);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < 12; ++i) {
      ASSERT_TRUE(
          (*store)->Put("/k" + std::to_string(i % 3), "v" + std::to_string(i), kAnyRevision).ok());
    }
    ASSERT_TRUE((*store)->Delete("/k0", kAnyRevision).ok());  // 13
  }
  Result<std::unique_ptr<Store>> reopened = OpenSqliteStore(path, /*keep_events=*/5);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  Store& store = **reopened;
  EXPECT_EQ(store.Revision(), 13);
  ExpectError(store.Get("/k0"), StatusCode::kNotFound, "/k0");
  Result<KeyValue> k1 = store.Get("/k1");
  ASSERT_TRUE(k1.ok());
  EXPECT_EQ(k1->value, "v10");
  EXPECT_EQ(k1->create_revision, 2);
  EXPECT_EQ(k1->mod_revision, 11);
  Result<int64_t> next = store.Put("/k1", "new", 11);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next, 14);
  // The compaction point persisted too: the log still reaches back exactly keep_events.
  ExpectError(store.EventsSince("", 0, 0), StatusCode::kFailedPrecondition, "compacted");
  Result<std::vector<WatchEvent>> tail = store.EventsSince("", 9, 0);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(tail->size(), 5u);
  EXPECT_EQ(tail->back().kv.mod_revision, 14);
}

TEST(SqliteStore, OpenErrorsNameTheFile) {
  TempDir dir;
  const std::string missing_dir = dir.path() + "/no/such/dir/store.db";
  ExpectError(OpenSqliteStore(missing_dir), StatusCode::kInternal,
              "cannot open store '" + missing_dir + "'");

  const std::string garbage = dir.path() + "/garbage.db";
  std::ofstream(garbage) << std::string(4096, 'x');
  ExpectError(OpenSqliteStore(garbage), StatusCode::kInternal, "cannot open store '" + garbage);

  ExpectError(OpenSqliteStore(dir.path() + "/ok.db", -1), StatusCode::kInvalidArgument,
              "keep_events -1");
}

// One store per file: a second one (a second server on the same data directory) is refused,
// naming the process that holds it, and nothing the first wrote is touched; once the first is
// closed the file opens again.
TEST(SqliteStore, ASecondStoreOfTheSameFileIsRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/store.db";
  Result<std::unique_ptr<Store>> first = OpenSqliteStore(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE((*first)->Put("/a", "one", kMustNotExist).ok());
  ExpectError(OpenSqliteStore(path), StatusCode::kFailedPrecondition,
              "cannot open store '" + path + "': in use by another store (process " +
                  std::to_string(getpid()) + "): one server per data directory");
  ASSERT_TRUE((*first)->Put("/a", "two", 1).ok());
  first->reset();
  Result<std::unique_ptr<Store>> again = OpenSqliteStore(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->Get("/a")->value, "two");
  EXPECT_EQ((*again)->Revision(), 2);
}

// The child writes from four threads as fast as it can and reports each acknowledged key on a
// pipe. Never returns.
[[noreturn]] void CrashChild(const std::string& path, int ack_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  if (!store.ok()) {
    std::string line = "E " + store.status().ToString() + "\n";
    (void)!write(ack_fd, line.data(), line.size());
    _exit(2);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, ack_fd, t] {
      for (int i = 0; i < 1000000; ++i) {
        std::string key = "/crash/" + std::to_string(t) + "/" + std::to_string(i);
        Result<int64_t> r = (*store)->Put(key, ValueFor(key), kMustNotExist);
        // One write per line keeps lines whole (below PIPE_BUF, pipe writes are atomic).
        std::string line = r.ok() ? key + " " + std::to_string(*r) + "\n"
                                  : "E " + key + ": " + r.status().ToString() + "\n";
        if (write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
          _exit(3);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  _exit(0);
}

TEST(SqliteStore, AcknowledgedWritesSurviveSigkill) {
  TempDir dir;
  const std::string path = dir.path() + "/store.db";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    CrashChild(path, fds[1]);
  }
  close(fds[1]);
  // If an assertion returns early, the child must not outlive the test.
  bool reaped = false;
  struct ChildGuard {
    pid_t pid;
    bool* reaped;
    ~ChildGuard() {
      if (*reaped) return;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } guard{child, &reaped};

  std::mt19937 rng(std::random_device{}());
  const size_t kill_after = 100 + rng() % 400;
  std::map<std::string, int64_t> acked;  // key -> revision
  std::string buffer;
  bool killed = false;
  char chunk[4096];
  for (;;) {
    ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child is gone and the pipe drained
    buffer.append(chunk, n);
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      ASSERT_NE(line.rfind("E ", 0), 0u) << "child failed: " << line;
      size_t space = line.find(' ');
      acked[line.substr(0, space)] = std::stoll(line.substr(space + 1));
    }
    if (!killed && acked.size() >= kill_after) {
      ASSERT_EQ(kill(child, SIGKILL), 0);
      killed = true;
    }
  }
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  reaped = true;
  ASSERT_TRUE(killed) << "the child exited before " << kill_after << " acks";
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  EXPECT_TRUE(buffer.empty()) << "torn line: " << buffer;

  Result<std::unique_ptr<Store>> reopened = OpenSqliteStore(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  Store& store = **reopened;
  std::set<int64_t> revisions;
  for (const auto& [key, revision] : acked) {
    Result<KeyValue> kv = store.Get(key);
    ASSERT_TRUE(kv.ok()) << "acknowledged key lost: " << key << ": " << kv.status().ToString();
    EXPECT_EQ(kv->value, ValueFor(key));
    EXPECT_EQ(kv->mod_revision, revision);
    EXPECT_LE(revision, store.Revision());
    revisions.insert(revision);
  }
  EXPECT_EQ(revisions.size(), acked.size());
  // Writes that were committed but not yet acknowledged may be there too; the store continues
  // from the last committed revision.
  Result<int64_t> next = store.Put("/after-crash", "x", kMustNotExist);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next, store.Revision());
  EXPECT_GT(*next, *revisions.rbegin());
  RecordProperty("acked_before_kill", static_cast<int>(acked.size()));
}

}  // namespace
}  // namespace fabrica
