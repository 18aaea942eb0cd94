// SqliteStore: the durable Store, one SQLite file in WAL mode with synchronous=FULL.
//
// Writes go through one committer thread (group commit). Put and Delete queue their operation
// and block; the committer takes everything queued, applies it in one transaction (each op's
// condition checked in order against the state the earlier ops left, each successful op taking
// the next revision, a failed condition failing only its own op), commits, which fsyncs the WAL,
// and only then wakes the writers and hands the batch's events to the subscribers. One fsync thus
// covers every write queued while the previous commit ran, which is what makes durable writes
// from many threads fast.
//
// Reads run on a pool of separate connections, each with its statements prepared once; WAL lets
// them read a consistent snapshot while the committer writes. Get is served from a cache of
// recent keys (ReadCache) that the committer keeps current. Reads that need two statements
// (List, EventsSince) run them in one read transaction, so that the revision they report and
// the compaction point they check match the rows they return.
//
// Schema (PRAGMA user_version 1):
//   kv(key TEXT PRIMARY KEY, value BLOB, create_revision, mod_revision)
//   events(revision INTEGER PRIMARY KEY, key, type (1 put, 2 delete), value, create_revision);
//     a delete's event holds the value the key had.
//   meta(id = 1, revision, compact_revision): the current revision and the compaction point;
//     events up to compact_revision are gone.
// The committer trims the log inside a batch's transaction once it holds keep_events/16 more
// events than keep_events, so trimming costs one DELETE per keep_events/16 writes.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

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

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 5000;
constexpr int64_t kEventPut = 1;
constexpr int64_t kEventDelete = 2;

// A Status for SQLite result code `rc`: disk full and lock waits get their own codes, everything
// else is internal.
Status FromSqlite(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return Status(StatusCode::kResourceExhausted, std::move(message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status(StatusCode::kUnavailable, std::move(message));
    default:
      return Internal(std::move(message));
  }
}

// `what` failed on `db` with `rc`. SQLite keeps the message of the last call on a connection,
// so this is called right after the failing one.
Status SqliteError(sqlite3* db, int rc, const std::string& what) {
  return FromSqlite(rc, what + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

struct DbCloser {
  // close_v2 waits for outstanding statements to be finalized, so members may die in any order.
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;

// A prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  Status Prepare(sqlite3* db, const std::string& sql) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    int rc = sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db, rc, "cannot prepare '" + sql + "'");
    return Status::Ok();
  }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// One execution of a prepared statement: binds, steps, reads columns, and resets the statement
// on destruction, which makes it reusable and ends the read snapshot it holds. Bound strings
// are not copied: they must outlive the Run.
class Run {
 public:
  explicit Run(const Stmt& stmt) : stmt_(stmt.get()) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  ~Run() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  Run& Text(int i, const std::string& s) {
    Keep(sqlite3_bind_text64(stmt_, i, s.data(), s.size(), SQLITE_STATIC, SQLITE_UTF8));
    return *this;
  }
  Run& Blob(int i, const std::string& s) {
    // data() is never null, so an empty value binds an empty blob rather than NULL.
    Keep(sqlite3_bind_blob64(stmt_, i, s.data(), s.size(), SQLITE_STATIC));
    return *this;
  }
  Run& Int(int i, int64_t v) {
    Keep(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code (also that of a failed bind).
  int Step() { return bind_rc_ != SQLITE_OK ? bind_rc_ : sqlite3_step(stmt_); }

  // Steps a statement that returns no rows; the error names `what`.
  Status Exec(const std::string& what) {
    int rc = Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqliteError(db(), rc, what);
    return Status::Ok();
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string String(int col) const {
    // For text, ask for the bytes first so that the length is that of the stored encoding.
    const void* data = sqlite3_column_type(stmt_, col) == SQLITE_TEXT
                           ? static_cast<const void*>(sqlite3_column_text(stmt_, col))
                           : sqlite3_column_blob(stmt_, col);
    int size = sqlite3_column_bytes(stmt_, col);
    return data == nullptr ? std::string() : std::string(static_cast<const char*>(data), size);
  }
  sqlite3* db() const { return sqlite3_db_handle(stmt_); }

 private:
  void Keep(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

Result<Db> OpenConnection(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK)
    return FromSqlite(rc, raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  return db;
}

// Runs statements that return no rows; the error names `what`.
Status ExecSql(sqlite3* db, const std::string& sql, const std::string& what) {
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string message = what + ": " + (error != nullptr ? error : sqlite3_errstr(rc));
  sqlite3_free(error);
  return FromSqlite(rc, std::move(message));
}

// The result of a one-row, one-column query such as a PRAGMA.
Result<std::string> QueryOne(sqlite3* db, const std::string& sql) {
  Stmt stmt;
  RETURN_IF_ERROR(stmt.Prepare(db, sql));
  Run run(stmt);
  int rc = run.Step();
  if (rc != SQLITE_ROW) return SqliteError(db, rc, sql);
  return run.String(0);
}

KeyValue ReadKeyValue(const Run& row) {
  return KeyValue{row.String(0), row.String(1), row.Int(2), row.Int(3)};
}

// A read connection with its statements. Used by one thread at a time (it is leased from the
// pool), so its statements need no locking.
struct Reader {
  Db db;
  Stmt begin, commit, meta, get, events;
  Stmt list[2][2];  // [lower bound is strict][there is an upper bound]

  Status Prepare() {
    RETURN_IF_ERROR(begin.Prepare(db.get(), "BEGIN"));
    RETURN_IF_ERROR(commit.Prepare(db.get(), "COMMIT"));
    RETURN_IF_ERROR(
        meta.Prepare(db.get(), "SELECT revision, compact_revision FROM meta WHERE id = 1"));
    RETURN_IF_ERROR(get.Prepare(
        db.get(), "SELECT key, value, create_revision, mod_revision FROM kv WHERE key = ?1"));
    // The key filter is not used for the search (revision is), so one statement serves both a
    // prefix and none.
    RETURN_IF_ERROR(events.Prepare(db.get(),
                                   "SELECT revision, key, type, value, create_revision FROM events "
                                   "WHERE revision > ?1 AND key >= ?2 AND (?3 IS NULL OR key < ?3) "
                                   "ORDER BY revision LIMIT ?4"));
    // List gets one statement per shape of its key range, so that SQLite searches the index for
    // both ends of the range instead of filtering the rest of the table.
    for (int strict = 0; strict < 2; ++strict) {
      for (int bounded = 0; bounded < 2; ++bounded) {
        std::string sql = "SELECT key, value, create_revision, mod_revision FROM kv WHERE key ";
        sql += strict ? ">" : ">=";
        sql += " ?1";
        if (bounded) sql += " AND key < ?2";
        sql += " ORDER BY key LIMIT ?3";
        RETURN_IF_ERROR(list[strict][bounded].Prepare(db.get(), sql));
      }
    }
    return Status::Ok();
  }

  // Reads (revision, compact_revision).
  Result<std::pair<int64_t, int64_t>> ReadMeta() {
    Run run(meta);
    int rc = run.Step();
    if (rc != SQLITE_ROW) return SqliteError(db.get(), rc, "read the revision");
    return std::make_pair(run.Int(0), run.Int(1));
  }
};

// A read transaction on a reader: one snapshot for several statements. Ends on destruction.
class ReadTransaction {
 public:
  explicit ReadTransaction(Reader* reader) : reader_(reader) {}
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;
  ~ReadTransaction() {
    if (open_) Run(reader_->commit).Step();
  }
  Status Begin() {
    RETURN_IF_ERROR(Run(reader_->begin).Exec("begin a read transaction"));
    open_ = true;
    return Status::Ok();
  }

 private:
  Reader* reader_;
  bool open_ = false;
};

// The values of recently read or written keys, so that reading a hot key (the API's GET of one
// object) costs a hash lookup instead of a SQLite query. The committer applies every committed
// batch before it acknowledges the batch's writes, so a read after an acknowledged write sees
// it. A reader that missed fills the cache with what it read from the file only if no batch was
// applied since it looked: otherwise its row might predate a write the cache already holds.
// Bounded: when full, it starts again empty.
class ReadCache {
 public:
  explicit ReadCache(size_t max_entries) : max_entries_(max_entries) {}

  // The entry for `key`, or nullopt; `generation` gets the generation to pass to Fill.
  std::optional<KeyValue> Find(const std::string& key, uint64_t* generation) {
    std::lock_guard<std::mutex> lock(mu_);
    *generation = generation_;
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }

  void Fill(const KeyValue& kv, uint64_t generation) {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_) return;
    Insert(kv);
  }

  // A committed batch's events.
  void Apply(const std::vector<WatchEvent>& events) {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    for (const WatchEvent& e : events) {
      if (e.type == WatchEvent::Type::kDelete) {
        entries_.erase(e.kv.key);
      } else {
        Insert(e.kv);
      }
    }
  }

  // Forgets everything (after a failed commit, when what the file holds is uncertain).
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    entries_.clear();
  }

 private:
  void Insert(const KeyValue& kv) {
    if (entries_.size() >= max_entries_ && entries_.count(kv.key) == 0) entries_.clear();
    entries_[kv.key] = kv;
  }

  const size_t max_entries_;
  std::mutex mu_;
  uint64_t generation_ = 0;  // batches applied so far
  std::unordered_map<std::string, KeyValue> entries_;
};

// One queued Put or Delete. Lives on the writer's stack while the writer waits. The committer
// reads the request and fills in `result` without locking (the queue's mutex orders both), then
// sets `done` under the queue's mutex.
struct PendingWrite {
  const std::string* key = nullptr;
  const std::string* value = nullptr;  // null for a delete
  int64_t expected_revision = kAnyRevision;
  std::optional<Result<int64_t>> result;
  bool done = false;
  std::condition_variable cv;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, int64_t keep_events)
      : path_(std::move(path)), keep_events_(keep_events) {}

  ~SqliteStore() override {
    if (committer_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(queue_mu_);
        stopping_ = true;
      }
      queue_cv_.notify_one();
      committer_.join();
    }
  }

  // Opens the file, sets up the schema, and starts the committer.
  Status Init() {
    RETURN_IF_ERROR(lock_.Take(path_));
    ASSIGN_OR_RETURN(db_, OpenConnection(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
    ASSIGN_OR_RETURN(std::string mode, QueryOne(db_.get(), "PRAGMA journal_mode=WAL"));
    if (mode != "wal") return Internal("cannot use WAL mode (journal mode is '" + mode + "')");
    RETURN_IF_ERROR(ExecSql(db_.get(), "PRAGMA synchronous=FULL", "set synchronous=FULL"));
    RETURN_IF_ERROR(CreateSchema());
    RETURN_IF_ERROR(PrepareWriter());
    RETURN_IF_ERROR(LoadMeta());
    // Open one reader now, so that a file readers cannot use fails here rather than later.
    ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, NewReader());
    idle_readers_.push_back(std::move(reader));
    committer_ = std::thread([this] { CommitLoop(); });
    return Status::Ok();
  }

  Result<KeyValue> Get(const std::string& key) override {
    RETURN_IF_ERROR(ValidateKey(key));
    uint64_t generation = 0;
    if (std::optional<KeyValue> cached = cache_.Find(key, &generation)) return *std::move(cached);
    ASSIGN_OR_RETURN(Lease reader, Acquire());
    Run run(reader->get);
    int rc = run.Text(1, key).Step();
    if (rc == SQLITE_DONE) return NotFound("key '" + key + "' not found");
    if (rc != SQLITE_ROW) return SqliteError(run.db(), rc, "get key '" + key + "'");
    KeyValue kv = ReadKeyValue(run);
    cache_.Fill(kv, generation);
    return kv;
  }

  Result<int64_t> Put(const std::string& key, const std::string& value,
                      int64_t expected_revision) override {
    RETURN_IF_ERROR(ValidateWrite(key, expected_revision, /*is_delete=*/false));
    PendingWrite write;
    write.key = &key;
    write.value = &value;
    write.expected_revision = expected_revision;
    return Submit(&write);
  }

  std::vector<Result<int64_t>> PutAll(const std::vector<Write>& writes) override {
    std::vector<Result<int64_t>> out(writes.size(), Result<int64_t>(int64_t{0}));
    std::deque<PendingWrite> pending;  // stable addresses while the committer holds them
    std::vector<size_t> index;
    for (size_t i = 0; i < writes.size(); ++i) {
      const Write& w = writes[i];
      if (Status valid = ValidateWrite(w.key, w.expected_revision, /*is_delete=*/w.remove);
          !valid.ok()) {
        out[i] = valid;
        continue;
      }
      PendingWrite& p = pending.emplace_back();
      p.key = &w.key;
      p.value = w.remove ? nullptr : &w.value;
      p.expected_revision = w.expected_revision;
      index.push_back(i);
    }
    if (pending.empty()) return out;
    if (hub_->OnDeliveringThread()) {
      for (size_t i : index)
        out[i] = Internal("write of key '" + writes[i].key +
                          "' from inside a Subscribe callback; post it to another thread");
      return out;
    }
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (stopping_) {
      for (size_t i : index)
        out[i] = Status(StatusCode::kUnavailable, "store '" + path_ + "' is closing");
      return out;
    }
    for (PendingWrite& p : pending) queue_.push_back(&p);
    queue_cv_.notify_one();
    for (size_t k = 0; k < pending.size(); ++k) {
      PendingWrite& p = pending[k];
      p.cv.wait(lock, [&p] { return p.done; });
      out[index[k]] = std::move(*p.result);
    }
    return out;
  }

  Result<int64_t> Delete(const std::string& key, int64_t expected_revision) override {
    RETURN_IF_ERROR(ValidateWrite(key, expected_revision, /*is_delete=*/true));
    PendingWrite write;
    write.key = &key;
    write.expected_revision = expected_revision;
    return Submit(&write);
  }

  Result<ListResult> List(const std::string& prefix, const std::string& start_after,
                          int limit) override {
    RETURN_IF_ERROR(ValidateKeyRange(prefix, start_after, limit));
    const bool strict = !start_after.empty() && start_after >= prefix;
    const std::string& from = strict ? start_after : prefix;
    const std::optional<std::string> end = PrefixEnd(prefix);

    ASSIGN_OR_RETURN(Lease reader, Acquire());
    ReadTransaction transaction(reader.get());
    RETURN_IF_ERROR(transaction.Begin());
    ListResult result;
    ASSIGN_OR_RETURN(auto meta, reader->ReadMeta());
    result.revision = meta.first;
    Run run(reader->list[strict][end.has_value()]);
    run.Text(1, from);
    if (end) run.Text(2, *end);
    // One row more than asked for tells whether there are more.
    run.Int(3, limit > 0 ? int64_t{limit} + 1 : -1);
    int rc;
    while ((rc = run.Step()) == SQLITE_ROW) {
      if (limit > 0 && static_cast<int>(result.items.size()) == limit) {
        result.more = true;
        break;
      }
      result.items.push_back(ReadKeyValue(run));
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      return SqliteError(run.db(), rc, "list prefix '" + prefix + "'");
    }
    return result;
  }

  Result<std::vector<WatchEvent>> EventsSince(const std::string& prefix, int64_t after_revision,
                                              int limit) override {
    RETURN_IF_ERROR(ValidateEventsSince(prefix, after_revision, limit));
    const std::optional<std::string> end = PrefixEnd(prefix);

    ASSIGN_OR_RETURN(Lease reader, Acquire());
    ReadTransaction transaction(reader.get());
    RETURN_IF_ERROR(transaction.Begin());
    ASSIGN_OR_RETURN(auto meta, reader->ReadMeta());
    if (after_revision < meta.second) return CompactedError(after_revision, meta.second);
    Run run(reader->events);
    run.Int(1, after_revision).Text(2, prefix);
    if (end) run.Text(3, *end);  // unbound parameters are NULL
    run.Int(4, limit > 0 ? limit : -1);
    std::vector<WatchEvent> events;
    int rc;
    while ((rc = run.Step()) == SQLITE_ROW) {
      WatchEvent& e = events.emplace_back();
      e.type = run.Int(2) == kEventDelete ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
      e.kv = KeyValue{run.String(1), run.String(3), run.Int(4), run.Int(0)};
    }
    if (rc != SQLITE_DONE) {
      return SqliteError(run.db(), rc,
                         "read events after revision " + std::to_string(after_revision));
    }
    return events;
  }

  int64_t Revision() override { return published_revision_.load(); }

  std::unique_ptr<Subscription> Subscribe(
      std::function<void(const std::vector<WatchEvent>&)> fn) override {
    // published_revision_ is set before writers are woken and events delivered, as the hub
    // requires.
    return hub_->Subscribe(std::move(fn), [this] { return published_revision_.load(); });
  }

 private:
  // A reader taken from the pool and put back on destruction.
  class Lease {
   public:
    Lease(SqliteStore* store, std::unique_ptr<Reader> reader)
        : store_(store), reader_(std::move(reader)) {}
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (reader_ == nullptr) return;
      // A reader still inside a transaction (its COMMIT failed) would keep reading an old
      // snapshot; closing it rolls back, and the pool opens a fresh one when needed.
      if (sqlite3_get_autocommit(reader_->db.get()) == 0) return;
      std::lock_guard<std::mutex> lock(store_->readers_mu_);
      store_->idle_readers_.push_back(std::move(reader_));
    }
    Reader* get() const { return reader_.get(); }
    Reader* operator->() const { return reader_.get(); }

   private:
    SqliteStore* store_;
    std::unique_ptr<Reader> reader_;
  };

  Result<std::unique_ptr<Reader>> NewReader() {
    auto reader = std::make_unique<Reader>();
    ASSIGN_OR_RETURN(reader->db, OpenConnection(path_, SQLITE_OPEN_READWRITE));
    RETURN_IF_ERROR(ExecSql(reader->db.get(), "PRAGMA query_only=1", "set query_only"));
    RETURN_IF_ERROR(reader->Prepare());
    return reader;
  }

  // Readers are opened on demand and kept, so the pool grows to the number of concurrent reads.
  Result<Lease> Acquire() {
    {
      std::lock_guard<std::mutex> lock(readers_mu_);
      if (!idle_readers_.empty()) {
        std::unique_ptr<Reader> reader = std::move(idle_readers_.back());
        idle_readers_.pop_back();
        return Lease(this, std::move(reader));
      }
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, NewReader());
    return Lease(this, std::move(reader));
  }

  Status CreateSchema() {
    ASSIGN_OR_RETURN(std::string version, QueryOne(db_.get(), "PRAGMA user_version"));
    if (version == std::to_string(kSchemaVersion)) return Status::Ok();
    if (version != "0") {
      return FailedPrecondition("schema version " + version +
                                " is not the one this Fabrica reads (" +
                                std::to_string(kSchemaVersion) + ")");
    }
    RETURN_IF_ERROR(ExecSql(db_.get(), R"sql(
      BEGIN IMMEDIATE;
      CREATE TABLE kv (
        key TEXT PRIMARY KEY NOT NULL,
        value BLOB NOT NULL,
        create_revision INTEGER NOT NULL,
        mod_revision INTEGER NOT NULL);
      CREATE TABLE events (
        revision INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        type INTEGER NOT NULL,
        value BLOB NOT NULL,
        create_revision INTEGER NOT NULL);
      CREATE TABLE meta (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        revision INTEGER NOT NULL,
        compact_revision INTEGER NOT NULL);
      INSERT INTO meta (id, revision, compact_revision) VALUES (1, 0, 0);
      PRAGMA user_version = 1;  -- kSchemaVersion
      COMMIT;
    )sql",
                            "create the tables"));
    return Status::Ok();
  }

  Status PrepareWriter() {
    sqlite3* db = db_.get();
    RETURN_IF_ERROR(begin_.Prepare(db, "BEGIN IMMEDIATE"));
    RETURN_IF_ERROR(commit_.Prepare(db, "COMMIT"));
    RETURN_IF_ERROR(rollback_.Prepare(db, "ROLLBACK"));
    RETURN_IF_ERROR(
        read_meta_.Prepare(db, "SELECT revision, compact_revision FROM meta WHERE id = 1"));
    RETURN_IF_ERROR(write_meta_.Prepare(
        db, "UPDATE meta SET revision = ?1, compact_revision = ?2 WHERE id = 1"));
    RETURN_IF_ERROR(
        lookup_.Prepare(db, "SELECT value, create_revision, mod_revision FROM kv WHERE key = ?1"));
    RETURN_IF_ERROR(
        upsert_.Prepare(db,
                        "INSERT OR REPLACE INTO kv (key, value, create_revision, mod_revision) "
                        "VALUES (?1, ?2, ?3, ?4)"));
    RETURN_IF_ERROR(remove_.Prepare(db, "DELETE FROM kv WHERE key = ?1"));
    RETURN_IF_ERROR(
        append_event_.Prepare(db,
                              "INSERT INTO events (revision, key, type, value, create_revision) "
                              "VALUES (?1, ?2, ?3, ?4, ?5)"));
    RETURN_IF_ERROR(compact_.Prepare(db, "DELETE FROM events WHERE revision <= ?1"));
    return Status::Ok();
  }

  // Reads the committed revision and compaction point into the committer's copies.
  Status LoadMeta() {
    Run run(read_meta_);
    int rc = run.Step();
    if (rc != SQLITE_ROW) return SqliteError(db_.get(), rc, "read the revision");
    revision_ = run.Int(0);
    compact_revision_ = run.Int(1);
    published_revision_.store(revision_);
    return Status::Ok();
  }

  Result<int64_t> Submit(PendingWrite* write) {
    if (hub_->OnDeliveringThread()) {
      return Internal("write of key '" + *write->key +
                      "' from inside a Subscribe callback; post it to another thread");
    }
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "store '" + path_ + "' is closing");
    queue_.push_back(write);
    queue_cv_.notify_one();
    write->cv.wait(lock, [write] { return write->done; });
    return std::move(*write->result);
  }

  void CommitLoop() {
    std::vector<PendingWrite*> batch;
    std::vector<WatchEvent> events;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(queue_mu_);
        queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued is answered
        batch.swap(queue_);
      }
      events.clear();
      Status status = CommitBatch(batch, &events);
      if (status.ok()) {
        cache_.Apply(events);
      } else {
        cache_.Clear();
      }
      {
        // Notify under the lock: once `done` is visible the writer may return and destroy cv.
        std::lock_guard<std::mutex> lock(queue_mu_);
        for (PendingWrite* write : batch) {
          if (!status.ok()) write->result = status;
          write->done = true;
          write->cv.notify_one();
        }
      }
      batch.clear();
      hub_->Deliver(events);
    }
  }

  // Applies and commits one batch. Sets each write's result; returns an error that overrides
  // them all when the transaction failed (nothing of it committed).
  Status CommitBatch(const std::vector<PendingWrite*>& batch, std::vector<WatchEvent>* events) {
    RETURN_IF_ERROR(Run(begin_).Exec("begin a write transaction"));
    int64_t revision = revision_;
    int64_t compact_revision = compact_revision_;
    Status status = ApplyBatch(batch, &revision, &compact_revision, events);
    if (status.ok()) status = Run(commit_).Exec("commit");
    if (!status.ok()) {
      events->clear();
      if (sqlite3_get_autocommit(db_.get()) == 0) Run(rollback_).Step();
      // The file is the truth; after a failed COMMIT, re-read what it holds.
      Status reloaded = LoadMeta();
      (void)reloaded;  // on failure the old copies stand, which is what a rollback left
      return status;
    }
    revision_ = revision;
    compact_revision_ = compact_revision;
    published_revision_.store(revision);
    return Status::Ok();
  }

  Status ApplyBatch(const std::vector<PendingWrite*>& batch, int64_t* revision,
                    int64_t* compact_revision, std::vector<WatchEvent>* events) {
    const int64_t first_revision = *revision;
    for (PendingWrite* write : batch) {
      const std::string& key = *write->key;
      const bool is_delete = write->value == nullptr;
      bool exists = false;
      WatchEvent event;
      event.kv.key = key;
      {
        Run lookup(lookup_);
        int rc = lookup.Text(1, key).Step();
        if (rc == SQLITE_ROW) {
          exists = true;
          if (is_delete) event.kv.value = lookup.String(0);
          event.kv.create_revision = lookup.Int(1);
          event.kv.mod_revision = lookup.Int(2);
        } else if (rc != SQLITE_DONE) {
          return SqliteError(db_.get(), rc, "look up key '" + key + "'");
        }
      }
      Status condition =
          CheckCondition(key, exists, event.kv.mod_revision, write->expected_revision, is_delete);
      if (!condition.ok()) {
        write->result = condition;
        continue;
      }
      const int64_t r = ++*revision;
      event.kv.mod_revision = r;
      if (is_delete) {
        event.type = WatchEvent::Type::kDelete;
        RETURN_IF_ERROR(Run(remove_).Text(1, key).Exec("delete key '" + key + "'"));
      } else {
        event.type = WatchEvent::Type::kPut;
        event.kv.value = *write->value;
        if (!exists) event.kv.create_revision = r;
        RETURN_IF_ERROR(Run(upsert_)
                            .Text(1, key)
                            .Blob(2, event.kv.value)
                            .Int(3, event.kv.create_revision)
                            .Int(4, r)
                            .Exec("write key '" + key + "'"));
      }
      RETURN_IF_ERROR(Run(append_event_)
                          .Int(1, r)
                          .Text(2, key)
                          .Int(3, is_delete ? kEventDelete : kEventPut)
                          .Blob(4, event.kv.value)
                          .Int(5, event.kv.create_revision)
                          .Exec("log the event of revision " + std::to_string(r)));
      write->result = r;
      events->push_back(std::move(event));
    }
    if (*revision == first_revision) return Status::Ok();
    if (*revision - *compact_revision > keep_events_ + keep_events_ / 16) {
      *compact_revision = *revision - keep_events_;
      RETURN_IF_ERROR(
          Run(compact_)
              .Int(1, *compact_revision)
              .Exec("compact events up to revision " + std::to_string(*compact_revision)));
    }
    return Run(write_meta_)
        .Int(1, *revision)
        .Int(2, *compact_revision)
        .Exec("record revision " + std::to_string(*revision));
  }

  // One store per file: an exclusive flock(2) on PATH.lock, holding the pid of its process,
  // for the store's life (the kernel drops it when the process dies). A second store — a
  // second server on the same data, in this process or another — is refused, since each
  // keeps the revision and a cache of the file in memory and would overwrite the other's.
  class FileLock {
   public:
    FileLock() = default;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock() {
      if (fd_ >= 0) ::close(fd_);
    }
    Status Take(const std::string& db_path) {
      const std::string path = db_path + ".lock";
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      // (Left by another user who shares the data directory: locked read-only, without a pid.)
      if (fd_ < 0 && errno == EACCES) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) return Internal("cannot open '" + path + "': " + std::strerror(errno));
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
          // (The pid is for the message a second store gives; the lock holds without it.)
        }
        return Status::Ok();
      }
      const int error = errno;
      char held_by[32] = {};
      const ssize_t n = ::pread(fd_, held_by, sizeof(held_by) - 1, 0);
      std::string pid(held_by, n > 0 ? static_cast<size_t>(n) : 0);
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      ::close(fd_);
      fd_ = -1;
      if (error != EWOULDBLOCK)
        return Internal("cannot lock '" + path + "': " + std::strerror(error));
      return Status(StatusCode::kFailedPrecondition,
                    "in use by another store" +
                        (pid.empty() ? std::string() : " (process " + pid + ")") +
                        ": one server per data directory; stop that one first");
    }

   private:
    int fd_ = -1;
  };

  const std::string path_;
  const int64_t keep_events_;
  FileLock lock_;  // (Destroyed after every connection below is closed.)
  const std::shared_ptr<EventHub> hub_ = std::make_shared<EventHub>();

  // The write connection and its statements: used by Init, then only by the committer.
  Db db_;
  Stmt begin_, commit_, rollback_, read_meta_, write_meta_, lookup_, upsert_, remove_,
      append_event_, compact_;
  int64_t revision_ = 0;          // committed revision (committer's copy)
  int64_t compact_revision_ = 0;  // committed compaction point (committer's copy)

  std::atomic<int64_t> published_revision_{0};  // revision_, for Revision()

  std::mutex queue_mu_;  // guards queue_, stopping_, and each queued write's result and done
  std::condition_variable queue_cv_;
  std::vector<PendingWrite*> queue_;
  bool stopping_ = false;
  std::thread committer_;

  ReadCache cache_{20000};

  std::mutex readers_mu_;  // guards idle_readers_
  std::vector<std::unique_ptr<Reader>> idle_readers_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, int64_t keep_events) {
  const std::string context = "cannot open store '" + path + "'";
  if (keep_events < 0) {
    return InvalidArgument(context + ": keep_events " + std::to_string(keep_events) +
                           " is negative");
  }
  auto store = std::make_unique<SqliteStore>(path, keep_events);
  Status status = store->Init();
  if (!status.ok()) return status.WithContext(context);
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fabrica
