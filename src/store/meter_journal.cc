#include "store/meter_journal.h"

#include <sqlite3.h>

#include <cstring>
#include <map>
#include <unordered_map>

namespace fabrica {

namespace {

// Integers as LEB128 varints of their zigzag form, strings length-prefixed: a sample batch
// stores about ten bytes a sample.
void PutInt(std::string& out, int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out += static_cast<char>((z & 0x7f) | 0x80);
    z >>= 7;
  }
  out += static_cast<char>(z);
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
    uint64_t z = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= in.size()) break;
      const auto byte = static_cast<uint8_t>(in[pos++]);
      z |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
    }
    ok = false;
    return 0;
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
  id INTEGER PRIMARY KEY, binding TEXT NOT NULL, uuid TEXT NOT NULL, workload TEXT, tenant TEXT,
  queue TEXT, node TEXT, model TEXT, gpu_milli INTEGER, mig_profile TEXT, start_ms INTEGER,
  end_ms INTEGER, end_reason TEXT, compute_milli INTEGER NOT NULL DEFAULT 0,
  UNIQUE(binding, uuid));
CREATE TABLE IF NOT EXISTS rollups(
  bucket_ms INTEGER NOT NULL, interval_id INTEGER NOT NULL, used INTEGER, unknown INTEGER,
  PRIMARY KEY(bucket_ms, interval_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pods(
  binding TEXT NOT NULL, idx INTEGER NOT NULL, workload TEXT, tenant TEXT, queue TEXT, node TEXT,
  cpu_milli INTEGER, memory_mib INTEGER, start_ms INTEGER, end_ms INTEGER,
  PRIMARY KEY(binding, idx));
CREATE TABLE IF NOT EXISTS devices(
  uuid TEXT PRIMARY KEY, node TEXT, model TEXT, since_ms INTEGER, until_ms INTEGER,
  parent TEXT, capacity_milli INTEGER);
CREATE TABLE IF NOT EXISTS carries(uuid TEXT PRIMARY KEY, carry INTEGER);
CREATE TABLE IF NOT EXISTS unattributed(uuid TEXT, bucket_ms INTEGER, used INTEGER);
CREATE TABLE IF NOT EXISTS sample_batches(id INTEGER PRIMARY KEY, max_time_ms INTEGER, data BLOB);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER);
)sql";

}  // namespace

// A batch: a table of the strings it uses (nodes, UUIDs, workloads), then per sample the indexes
// of its node and UUID, time, per-mille and achieved shares. A scrape round names each device
// once, so the table keeps the blob small.
std::string EncodeSamples(const std::vector<DeviceSample>& samples) {
  std::unordered_map<std::string_view, int64_t> ids;
  std::vector<std::string_view> table;
  auto id = [&](const std::string& s) {
    auto [it, added] = ids.emplace(s, static_cast<int64_t>(table.size()));
    if (added) table.push_back(s);
    return it->second;
  };
  std::string body;
  body.reserve(samples.size() * 12);
  int64_t previous_ms = 0;  // times are stored as the difference from the previous sample's
  for (const DeviceSample& s : samples) {
    PutInt(body, id(s.node));
    PutInt(body, id(s.device_uuid));
    PutInt(body, s.time_ms - previous_ms);
    previous_ms = s.time_ms;
    PutInt(body, s.util_permille);
    PutInt(body, static_cast<int64_t>(s.achieved_permille.size()));
    for (const auto& [w, v] : s.achieved_permille) {
      PutInt(body, id(w));
      PutInt(body, v);
    }
  }
  std::string out;
  PutInt(out, static_cast<int64_t>(table.size()));
  for (std::string_view t : table) PutStr(out, std::string(t));
  PutInt(out, static_cast<int64_t>(samples.size()));
  return out + body;
}

Result<std::vector<DeviceSample>> DecodeSamples(const std::string& blob) {
  Reader r{blob};
  const int64_t strings = r.Int();
  if (!r.ok || strings < 0 || static_cast<uint64_t>(strings) > blob.size()) {
    return InvalidArgument("sample batch: bad string table");
  }
  std::vector<std::string> table(static_cast<size_t>(strings));
  for (std::string& t : table) t = r.Str();
  auto str = [&](int64_t i) -> const std::string& {
    static const std::string empty;
    if (i < 0 || i >= strings) {
      r.ok = false;
      return empty;
    }
    return table[static_cast<size_t>(i)];
  };
  const int64_t n = r.Int();
  if (!r.ok || n < 0 || static_cast<uint64_t>(n) > blob.size()) {
    return InvalidArgument("sample batch: bad count");
  }
  std::vector<DeviceSample> out(static_cast<size_t>(n));
  int64_t previous_ms = 0;
  for (DeviceSample& s : out) {
    s.node = str(r.Int());
    s.device_uuid = str(r.Int());
    s.time_ms = previous_ms + r.Int();
    previous_ms = s.time_ms;
    s.util_permille = static_cast<int32_t>(r.Int());
    const int64_t m = r.Int();
    if (!r.ok || m < 0 || static_cast<uint64_t>(m) > blob.size()) break;
    for (int64_t i = 0; i < m; ++i) {
      std::string w = str(r.Int());
      s.achieved_permille[w] = static_cast<int32_t>(r.Int());
    }
  }
  if (!r.ok || r.pos != blob.size()) return InvalidArgument("sample batch: truncated or corrupt");
  return out;
}

struct MeterJournal::Impl {
  sqlite3* db = nullptr;
  // (binding, uuid) -> the interval's row id, so rollups are keyed by an integer.
  std::map<std::pair<std::string, std::string>, int64_t> ids;

  Result<int64_t> IdOf(const std::string& binding, const std::string& uuid) {
    auto it = ids.find({binding, uuid});
    if (it != ids.end()) return it->second;
    Stmt q(db, "SELECT id FROM intervals WHERE binding = ?1 AND uuid = ?2");
    q.Text(1, binding);
    q.Text(2, uuid);
    if (q.Step() != SQLITE_ROW) return Internal("meter journal: no interval " + binding);
    const int64_t id = q.ColInt(0);
    ids[{binding, uuid}] = id;
    return id;
  }
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
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                          "PRAGMA cache_size=-65536", kSchema}) {
    if (sqlite3_exec(impl->db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqlError(impl->db, std::string("open ") + path);
    }
  }
  // A journal written before intervals kept their compute share (0 there: split by charge until
  // the binding is sent again, as before).
  bool has_compute = false;
  {
    Stmt cols(impl->db, "PRAGMA table_info(intervals)");
    while (cols.Step() == SQLITE_ROW) has_compute |= cols.ColStr(1) == "compute_milli";
  }
  if (!has_compute &&
      sqlite3_exec(impl->db,
                   "ALTER TABLE intervals ADD COLUMN compute_milli INTEGER NOT NULL DEFAULT 0",
                   nullptr, nullptr, nullptr) != SQLITE_OK)
    return SqlError(impl->db, std::string("open ") + path + ": add intervals.compute_milli");
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
    // An interval's fields; its rollups are rows of their own, appended as buckets are sealed.
    Stmt put(
        db,
        "INSERT INTO intervals(binding, uuid, workload, tenant, queue, node, model, gpu_milli,"
        " mig_profile, start_ms, end_ms, end_reason, compute_milli) VALUES(?1,?2,?3,?4,?5,?6,?7,"
        "?8,?9,?10,?11,?12,?13) ON CONFLICT(binding, uuid) DO UPDATE SET end_ms = ?11,"
        " end_reason = ?12, compute_milli = max(compute_milli, ?13)");
    if (!put.ok()) return fail("prepare intervals");
    for (const Interval* iv : c.intervals) {
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
      put.Int(13, iv->device.compute_milli);
      if (put.Step() != SQLITE_DONE) return fail("write interval " + iv->binding);
      put.Reset();
    }
    // Pods: the binding's pods in order; an end updates them all.
    Stmt pod(db,
             "INSERT INTO pods VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) ON CONFLICT(binding, idx) DO "
             "UPDATE SET end_ms = ?10");
    for (const PodHold* p : c.pods) {
      pod.Text(1, p->binding);
      pod.Int(2, p->index);
      pod.Text(3, p->workload);
      pod.Text(4, p->tenant);
      pod.Text(5, p->queue);
      pod.Text(6, p->pod.node);
      pod.Int(7, p->pod.cpu_milli);
      pod.Int(8, p->pod.memory_mib);
      pod.Int(9, p->start_ms);
      pod.Int(10, p->end_ms);
      if (pod.Step() != SQLITE_DONE) return fail("write pod of " + p->binding);
      pod.Reset();
    }
    Stmt trim(db, "DELETE FROM rollups WHERE interval_id = ?1 AND bucket_ms >= ?2");
    for (const auto& [iv, from] : c.trimmed) {
      auto id = impl_->IdOf(iv->binding, iv->device.uuid);
      if (!id.ok()) return fail(id.status().message());
      trim.Int(1, *id);
      trim.Int(2, from);
      if (trim.Step() != SQLITE_DONE) return fail("trim rollups of " + iv->binding);
      trim.Reset();
    }
    // Keyed by bucket first: sealing moves forward in time, so each batch appends at the end of
    // the table's B-tree instead of inserting all over it.
    Stmt add(db, "INSERT OR REPLACE INTO rollups VALUES(?1,?2,?3,?4)");
    for (const SealedRollup& r : c.sealed) {
      auto id = impl_->IdOf(r.interval->binding, r.interval->device.uuid);
      if (!id.ok()) return fail(id.status().message());
      add.Int(1, r.bucket_ms);
      add.Int(2, *id);
      add.Int(3, r.amounts.used);
      add.Int(4, r.amounts.unknown);
      if (add.Step() != SQLITE_DONE) return fail("write rollup of " + r.interval->binding);
      add.Reset();
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
    std::map<int64_t, size_t> index;
    Stmt q(db,
           "SELECT binding, uuid, workload, tenant, queue, node, model, gpu_milli, mig_profile,"
           " start_ms, end_ms, end_reason, id, compute_milli FROM intervals ORDER BY id");
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
      iv.device.compute_milli = static_cast<int32_t>(q.ColInt(13));
      index[q.ColInt(12)] = snap.intervals.size();
      impl_->ids[{iv.binding, iv.device.uuid}] = q.ColInt(12);
      snap.intervals.push_back(std::move(iv));
    }
    Stmt r(db,
           "SELECT interval_id, bucket_ms, used, unknown FROM rollups ORDER BY interval_id,"
           " bucket_ms");
    while (r.Step() == SQLITE_ROW) {
      auto it = index.find(r.ColInt(0));
      if (it == index.end()) {
        return Internal("meter journal: a rollup of unknown interval " +
                        std::to_string(r.ColInt(0)));
      }
      Interval& iv = snap.intervals[it->second];
      IntervalRollup roll{r.ColInt(2), r.ColInt(3)};
      iv.sealed.push_back({r.ColInt(1), roll});
      iv.sealed_total.used += roll.used;
      iv.sealed_total.unknown += roll.unknown;
    }
  }
  {
    Stmt q(db,
           "SELECT binding, workload, tenant, queue, node, cpu_milli, memory_mib, start_ms, end_ms,"
           " idx FROM pods ORDER BY binding, idx");
    while (q.Step() == SQLITE_ROW) {
      PodHold p;
      p.binding = q.ColStr(0);
      p.workload = q.ColStr(1);
      p.tenant = q.ColStr(2);
      p.queue = q.ColStr(3);
      p.pod.node = q.ColStr(4);
      p.pod.cpu_milli = q.ColInt(5);
      p.pod.memory_mib = q.ColInt(6);
      p.start_ms = q.ColInt(7);
      p.end_ms = q.ColInt(8);
      p.index = static_cast<int>(q.ColInt(9));
      snap.pods.push_back(std::move(p));
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
