// Strong fixed-point quantities: milli-GPU, MiB of memory, milli-CPU.
//
// Every amount the scheduler compares or adds is an integer in its smallest unit, wrapped in its
// own type so that a milli-GPU can never be added to a MiB by mistake and no double ever
// truncates a request silently. Construction from a raw integer is explicit; parsing from text is
// checked and names what is wrong. Values are plain and thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace fabrica {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t value) : value_(value) {}

  constexpr int64_t value() const { return value_; }
  constexpr auto operator<=>(const Quantity&) const = default;

  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }
  constexpr Quantity operator*(int64_t k) const { return Quantity(value_ * k); }
  constexpr bool IsZero() const { return value_ == 0; }
  constexpr bool IsNegative() const { return value_ < 0; }

 private:
  int64_t value_ = 0;
};

struct MilliGpuTag {};
struct MemoryMibTag {};
struct MilliCpuTag {};

// One GPU is 1000 milli-GPU; a fractional share is 1..999.
using MilliGpu = Quantity<MilliGpuTag>;
using MemoryMib = Quantity<MemoryMibTag>;
using MilliCpu = Quantity<MilliCpuTag>;

inline constexpr int64_t kMilliPerGpu = 1000;

// Parses "2" (GPUs), "0.25" (GPUs), "250m" (milli-GPU). Rejects negatives, more than three
// decimals and trailing garbage.
Result<MilliGpu> ParseMilliGpu(std::string_view text);
// Parses "4" (cores), "0.5", "500m" (milli-cores).
Result<MilliCpu> ParseMilliCpu(std::string_view text);
// Parses "80Gi", "512Mi", "1Ti", or a bare integer meaning MiB.
Result<MemoryMib> ParseMemoryMib(std::string_view text);
// Parses a non-negative decimal integer that fits in int64.
Result<int64_t> ParseNonNegativeInt(std::string_view text);

// Money in micro-units of a currency: parses a decimal such as "2.49" (at most six decimals,
// non-negative); formats with at least two decimals ("2.49", "0.000001").
Result<int64_t> ParseMoneyMicros(const std::string& text);
std::string FormatMoneyMicros(int64_t micros);

std::string FormatMilliGpu(MilliGpu q);
std::string FormatMemoryMib(MemoryMib q);
std::string FormatMilliCpu(MilliCpu q);

}  // namespace fabrica
