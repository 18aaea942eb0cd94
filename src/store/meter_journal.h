// MeterJournal: the meter's durable state in its own SQLite file (WAL, synchronous=FULL).
//
// Commit writes one MeterChanges batch in one transaction: new or ended intervals (one row
// each), the buckets sealed since the last batch (appended rows keyed by the interval's integer
// id, so a commit costs what it adds), the fleet's devices, changed carries, unattributed use,
// the seal point, and the accepted samples as one compact blob row (raw samples are not rows).
// Samples older than the seal point minus their longest hold are dropped as batches age. Load
// rebuilds a MeterSnapshot, so a restarted server resumes exactly where the last commit left it;
// anything ingested after that commit is ingested again by its sender (agents resend, the server
// replays its workloads), and the meter's de-duplication makes that count once. Not thread-safe:
// the caller serialises.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "meter/ledger.h"

namespace fabrica {

class MeterJournal {
 public:
  static Result<std::unique_ptr<MeterJournal>> Open(const std::string& path);
  ~MeterJournal();

  Status Commit(const MeterChanges& changes, int64_t keep_samples_after_ms);
  Result<MeterSnapshot> Load();

 private:
  struct Impl;
  explicit MeterJournal(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The blob format of a sample batch (exposed for tests and the benchmark).
std::string EncodeSamples(const std::vector<DeviceSample>& samples);
Result<std::vector<DeviceSample>> DecodeSamples(const std::string& blob);

}  // namespace fabrica
