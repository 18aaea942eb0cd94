// MeterJournal: the meter's durable state in its own SQLite file (WAL, synchronous=FULL).
//
// Commit writes one MeterChanges batch in one transaction: the intervals that changed (whole
// rows, their sealed rollups as a blob), the fleet's devices, each sealed device's carried
// remainder and unattributed use, the seal point, and the accepted samples as one compact blob
// row (raw samples are not rows: a batch of 100,000 is one insert). Samples older than the seal
// point minus their longest hold are dropped as batches age. Load rebuilds a MeterSnapshot, so a
// restarted server resumes exactly where the last commit left it; anything ingested after that
// commit is ingested again by its sender (agents resend, the server replays its workloads), and
// the meter's de-duplication makes that count once. Not thread-safe: the caller serialises.
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
