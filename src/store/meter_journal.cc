#include "store/meter_journal.h"

#include <sqlite3.h>

#include <cstring>

namespace fabrica {

namespace {

// Little-endian varint-free encoding: fixed 8-byte integers and length-prefixed strings.
void PutInt(std::string& out, int64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}
void PutStr(std::string& out, const std::string& s) {
  PutInt(out, static_cast<int64_t>(s.size()));
  out += s;
}

struct Reader {
  const std::string& in;
  size_t pos = 0;
  bool ok = true;
  int64_t Int() {
    if (pos + 8 > in.size()) {
      ok = false;
      return 0;
    }
    int64_t v;
    std::memcpy(&v, in.data() + pos, 8);
    pos += 8;
    return v;
  }
  std::string Str() {
    const int64_t n = Int();
    if (!ok || n < 0 || pos + static_cast<size_t>(n) > in.size()) {
      ok = false;
      return {};
    }
    std::string s = in.substr(pos, static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return s;
  }
};

Status SqlError(sqlite3* db, const std::string& what) {
  return Internal("meter journal: " + what + ": " + sqlite3_errmsg(db));
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  bool ok() const { return stmt_ != nullptr; }
  void Int(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Blob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  int Step() { return sqlite3_step(stmt_); }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  int64_t ColInt(int c) { return sqlite3_column_int64(stmt_, c); }
  std::string ColStr(int c) {
    const void* p = sqlite3_column_blob(stmt_, c);
    return p == nullptr ? std::string()
                        : std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, c));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS intervals(
  binding TEXT NOT NULL, uuid TEXT NOT NULL, workload TEXT, tenant TEXT, queue TEXT, node TEXT,
  model TEXT, gpu_milli INTEGER, mig_profile TEXT, start_ms INTEGER, end_ms INTEGER,
  end_reason TEXT, sealed BLOB, PRIMARY KEY(binding, uuid));
CREATE TABLE IF NOT EXISTS devices(
  uuid TEXT PRIMARY KEY, node TEXT, model TEXT, since_ms INTEGER, until_ms INTEGER,
  parent TEXT, capacity_milli INTEGER);
CREATE TABLE IF NOT EXISTS carries(uuid TEXT PRIMARY KEY, carry INTEGER);
CREATE TABLE IF NOT EXISTS unattributed(uuid TEXT, bucket_ms INTEGER, used INTEGER);
CREATE TABLE IF NOT EXISTS sample_batches(id INTEGER PRIMARY KEY, max_time_ms INTEGER, data BLOB);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER);
)sql";

}  // namespace

std::string EncodeSamples(const std::vector<DeviceSample>& samples) {
  std::string out;
  out.reserve(samples.size() * 64);
  PutInt(out, static_cast<int64_t>(samples.size()));
  for (const DeviceSample& s : samples) {
    PutStr(out, s.node);
    PutStr(out, s.device_uuid);
    PutInt(out, s.time_ms);
    PutInt(out, s.util_permille);
    PutInt(out, static_cast<int64_t>(s.achieved_permille.size()));
    for (const auto& [w, v] : s.achieved_permille) {
      PutStr(out, w);
      PutInt(out, v);
    }
  }
  return out;
}

Result<std::vector<DeviceSample>> DecodeSamples(const std::string& blob) {
  Reader r{blob};
  const int64_t n = r.Int();
  if (!r.ok || n < 0 || static_cast<uint64_t>(n) > blob.size()) {
    return InvalidArgument("sample batch: bad count");
  }
  std::vector<DeviceSample> out(static_cast<size_t>(n));
  for (DeviceSample& s : out) {
    s.node = r.Str();
    s.device_uuid = r.Str();
    s.time_ms = r.Int();
    s.util_permille = static_cast<int32_t>(r.Int());
    const int64_t m = r.Int();
    if (!r.ok || m < 0 || static_cast<uint64_t>(m) > blob.size()) break;
    for (int64_t i = 0; i < m; ++i) {
      std::string w = r.Str();
      s.achieved_permille[w] = static_cast<int32_t>(r.Int());
    }
  }
  if (!r.ok || r.pos != blob.size()) return InvalidArgument("sample batch: truncated or corrupt");
  return out;
}

struct MeterJournal::Impl {
  sqlite3* db = nullptr;
  ~Impl() { sqlite3_close(db); }
};

MeterJournal::MeterJournal(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MeterJournal::~MeterJournal() = default;

Result<std::unique_ptr<MeterJournal>> MeterJournal::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  if (sqlite3_open_v2(path.c_str(), &impl->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    return Internal("meter journal: cannot open " + path + ": " +
                    (impl->db ? sqlite3_errmsg(impl->db) : "out of memory"));
  }
  sqlite3_busy_timeout(impl->db, 5000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", kSchema}) {
    if (sqlite3_exec(impl->db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqlError(impl->db, std::string("open ") + path);
    }
  }
  return std::unique_ptr<MeterJournal>(new MeterJournal(std::move(impl)));
}

Status MeterJournal::Commit(const MeterChanges& c, int64_t keep_samples_after_ms) {
  sqlite3* db = impl_->db;
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(db, "begin");
  }
  auto fail = [&](const std::string& what) {
    Status st = SqlError(db, what);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return st;
  };
  {
    Stmt put(db,
             "INSERT OR REPLACE INTO intervals VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)");
    if (!put.ok()) return fail("prepare intervals");
    for (const Interval* iv : c.intervals) {
      std::string sealed;
      for (const auto& [b, r] : iv->sealed) {
        PutInt(sealed, b);
        PutInt(sealed, r.used);
        PutInt(sealed, r.unknown);
      }
      put.Text(1, iv->binding);
      put.Text(2, iv->device.uuid);
      put.Text(3, iv->workload);
      put.Text(4, iv->tenant);
      put.Text(5, iv->queue);
      put.Text(6, iv->device.node);
      put.Text(7, iv->device.model);
      put.Int(8, iv->device.gpu_milli);
      put.Text(9, iv->device.mig_profile);
      put.Int(10, iv->start_ms);
      put.Int(11, iv->end_ms);
      put.Text(12, iv->end_reason);
      put.Blob(13, sealed);
      if (put.Step() != SQLITE_DONE) return fail("write interval " + iv->binding);
      put.Reset();
    }
  }
  if (!c.devices.empty()) {
    Stmt put(db, "INSERT OR REPLACE INTO devices VALUES(?1,?2,?3,?4,?5,?6,?7)");
    for (const FleetDevice& d : c.devices) {
      put.Text(1, d.uuid);
      put.Text(2, d.node);
      put.Text(3, d.model);
      put.Int(4, d.since_ms);
      put.Int(5, d.until_ms);
      put.Text(6, d.parent_uuid);
      put.Int(7, d.capacity_milli);
      if (put.Step() != SQLITE_DONE) return fail("write device " + d.uuid);
      put.Reset();
    }
  }
  {
    Stmt put(db, "INSERT OR REPLACE INTO carries VALUES(?1,?2)");
    for (const auto& [uuid, carry] : c.carries) {
      put.Text(1, uuid);
      put.Int(2, carry);
      if (put.Step() != SQLITE_DONE) return fail("write carry");
      put.Reset();
    }
    Stmt add(db, "INSERT INTO unattributed VALUES(?1,?2,?3)");
    for (const UnattributedRollup& u : c.unattributed) {
      add.Text(1, u.uuid);
      add.Int(2, u.bucket_ms);
      add.Int(3, u.used);
      if (add.Step() != SQLITE_DONE) return fail("write unattributed");
      add.Reset();
    }
  }
  if (!c.samples.empty()) {
    int64_t max_time = INT64_MIN;
    for (const DeviceSample& s : c.samples) max_time = std::max(max_time, s.time_ms);
    Stmt add(db, "INSERT INTO sample_batches(max_time_ms, data) VALUES(?1,?2)");
    add.Int(1, max_time);
    add.Blob(2, EncodeSamples(c.samples));
    if (add.Step() != SQLITE_DONE) return fail("write samples");
  }
  {
    Stmt prune(db, "DELETE FROM sample_batches WHERE max_time_ms < ?1");
    prune.Int(1, keep_samples_after_ms);
    if (prune.Step() != SQLITE_DONE) return fail("prune samples");
    Stmt meta(db, "INSERT OR REPLACE INTO meta VALUES('sealed_until_ms', ?1)");
    meta.Int(1, c.sealed_until_ms);
    if (meta.Step() != SQLITE_DONE) return fail("write seal point");
  }
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return fail("commit");
  return Status::Ok();
}

Result<MeterSnapshot> MeterJournal::Load() {
  sqlite3* db = impl_->db;
  MeterSnapshot snap;
  {
    Stmt q(db, "SELECT * FROM intervals");
    while (q.Step() == SQLITE_ROW) {
      Interval iv;
      iv.binding = q.ColStr(0);
      iv.device.uuid = q.ColStr(1);
      iv.workload = q.ColStr(2);
      iv.tenant = q.ColStr(3);
      iv.queue = q.ColStr(4);
      iv.device.node = q.ColStr(5);
      iv.device.model = q.ColStr(6);
      iv.device.gpu_milli = static_cast<int32_t>(q.ColInt(7));
      iv.device.mig_profile = q.ColStr(8);
      iv.start_ms = q.ColInt(9);
      iv.end_ms = q.ColInt(10);
      iv.end_reason = q.ColStr(11);
      const std::string sealed = q.ColStr(12);
      Reader r{sealed};
      while (r.ok && r.pos < sealed.size()) {
        const int64_t b = r.Int();
        IntervalRollup roll{r.Int(), r.Int()};
        iv.sealed.push_back({b, roll});
        iv.sealed_total.used += roll.used;
        iv.sealed_total.unknown += roll.unknown;
      }
      if (!r.ok) return Internal("meter journal: corrupt rollups of " + iv.binding);
      snap.intervals.push_back(std::move(iv));
    }
  }
  {
    Stmt q(db, "SELECT * FROM devices");
    while (q.Step() == SQLITE_ROW) {
      snap.devices.push_back({q.ColStr(0), q.ColStr(1), q.ColStr(2), q.ColInt(3), q.ColInt(4),
                              q.ColStr(5), static_cast<int32_t>(q.ColInt(6))});
    }
  }
  {
    Stmt q(db, "SELECT uuid, carry FROM carries");
    while (q.Step() == SQLITE_ROW) snap.carries[q.ColStr(0)] = q.ColInt(1);
    Stmt u(db, "SELECT uuid, bucket_ms, used FROM unattributed");
    while (u.Step() == SQLITE_ROW)
      snap.unattributed.push_back({u.ColStr(0), u.ColInt(1), u.ColInt(2)});
    Stmt m(db, "SELECT value FROM meta WHERE key = 'sealed_until_ms'");
    if (m.Step() == SQLITE_ROW) snap.sealed_until_ms = m.ColInt(0);
  }
  {
    Stmt q(db, "SELECT data FROM sample_batches ORDER BY id");
    while (q.Step() == SQLITE_ROW) {
      ASSIGN_OR_RETURN(std::vector<DeviceSample> batch, DecodeSamples(q.ColStr(0)));
      for (DeviceSample& s : batch) snap.samples.push_back(std::move(s));
    }
  }
  return snap;
}

}  // namespace fabrica
