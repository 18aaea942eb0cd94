// Clock: the one source of time for the server, its controllers and the simulated agents.
//
// The pure core never reads a clock; everything above it takes time from a Clock. RealClock runs
// `scale` times faster than the wall clock from the moment it is made (scale 1 = real time), so
// that an hour of factory life — workload durations, heartbeats, timeouts — passes in seconds in
// tests and demos. ManualClock is advanced by hand in tests. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace fabrica {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch, in this clock's time.
  virtual int64_t NowMs() const = 0;
  // How much faster than the wall clock this clock runs.
  virtual double scale() const { return 1.0; }
};

class RealClock : public Clock {
 public:
  // `start_epoch_ms`: the time it reads now (a virtual clock carried on from where it
  // stopped); -1: the wall clock's.
  explicit RealClock(double scale = 1.0, int64_t start_epoch_ms = -1);
  int64_t NowMs() const override;
  double scale() const override { return scale_; }

 private:
  double scale_;
  int64_t start_epoch_ms_;
  std::chrono::steady_clock::time_point start_;
};

class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void AdvanceMs(int64_t ms) { now_ms_ += ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

// How long a lease of `seconds` holds in this clock's milliseconds: its holder (a node agent)
// counts wall seconds, so a clock `scale` times faster sees it last `scale` times longer.
// (At most an hour: what the API accepts.)
inline int64_t LeaseMs(int64_t seconds, const Clock& clock) {
  if (seconds <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(std::min<int64_t>(seconds, 3600)) * 1000.0 *
                              clock.scale());
}

// RFC 3339 UTC with milliseconds, e.g. 2026-11-30T08:40:18.123Z.
std::string FormatTimestamp(int64_t epoch_ms);
// Parses what FormatTimestamp writes (and the same without milliseconds); -1 when malformed.
int64_t ParseTimestamp(const std::string& text);

}  // namespace fabrica
