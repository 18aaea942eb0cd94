#include "control/clock.h"

#include <cstdio>
#include <ctime>

namespace fabrica {

RealClock::RealClock(double scale, int64_t start_epoch_ms)
    : scale_(scale),
      start_epoch_ms_(start_epoch_ms >= 0 ? start_epoch_ms
                                          : std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count()),
      start_(std::chrono::steady_clock::now()) {}

int64_t RealClock::NowMs() const {
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  return start_epoch_ms_ + static_cast<int64_t>(elapsed_ms * scale_);
}

std::string FormatTimestamp(int64_t epoch_ms) {
  const time_t secs = static_cast<time_t>(epoch_ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(epoch_ms % 1000));
  return buf;
}

int64_t ParseTimestamp(const std::string& text) {
  struct tm tm {};
  int ms = 0;
  int n = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                      &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms);
  if (n < 6) return -1;
  if (n == 6) ms = 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

}  // namespace fabrica
