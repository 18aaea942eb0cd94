#include "core/quantity.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace fabrica {
namespace {

// `shown` is no number: `at`, the first character that is not a digit, after digits (`digits`)
// as an 'e' is exponent notation (how a JSON number as large as 1e16 arrives), said so.
Status NotANumber(const char* what, const std::string& shown, char at, bool digits) {
  const bool exponent = (at == 'e' || at == 'E') && digits;
  // (The number written out where it is a whole one of a few digits: a trial's 1e3 was told
  // "as 10000".)
  std::string as = "in digits";
  char* end = nullptr;
  const double v = std::strtod(shown.c_str(), &end);
  if (exponent && end != nullptr && *end == '\0' && std::isfinite(v) && v >= 0 && v < 1e15 &&
      v == std::floor(v))
    as = "as " + std::to_string(static_cast<int64_t>(v));
  return InvalidArgument(
      std::string("not a number for ") + what + ": '" + shown + "'" +
      (exponent ? " (exponent notation is not taken: write the number out " + as + ")" : ""));
}

// Parses "<int>[.<frac>]" scaled by 10^scale_digits; the fraction may have at most that many
// digits so that nothing is rounded away. `unit` is the suffix the caller took off `text`: an
// error shows the value as written ('-5Gi', not '-5').
Result<int64_t> ParseScaledDecimal(std::string_view text, int scale_digits, const char* what,
                                   std::string_view unit = "") {
  const std::string shown = std::string(text) + std::string(unit);
  if (text.empty()) return InvalidArgument(std::string("empty ") + what);
  if (text[0] == '-')
    return InvalidArgument(std::string(what) + " must not be negative: '" + shown + "'");
  // A JSON number past int64 arrives in exponent notation however it was written (a trial's
  // 99999999999999999999 was told to write the number out): too large, said so.
  if (const size_t e = text.find_first_of("eE"); e != std::string_view::npos) {
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    // (Out of range with a negative exponent is too small, not too large: 1e-400.)
    const bool negative = e + 1 < text.size() && text[e + 1] == '-';
    if ((ec == std::errc() && end == text.data() + text.size() &&
         v * std::pow(10.0, scale_digits) >= 9.2e18) ||
        (ec == std::errc::result_out_of_range && !negative))
      return InvalidArgument(std::string(what) + " too large: '" + shown + "'");
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t whole = 0;
  size_t i = 0;
  bool any_digit = false;
  for (; i < text.size() && text[i] != '.'; ++i) {
    if (text[i] < '0' || text[i] > '9') return NotANumber(what, shown, text[i], any_digit);
    // Exact check: every int64 must parse, and nothing beyond it may wrap around.
    const int digit = text[i] - '0';
    if (whole > (kMax - digit) / 10) {
      return InvalidArgument(std::string(what) + " too large: '" + shown + "'");
    }
    whole = whole * 10 + digit;
    any_digit = true;
  }
  int64_t frac = 0;
  int frac_digits = 0;
  if (i < text.size()) {
    ++i;  // '.'
    for (; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9') return NotANumber(what, shown, text[i], any_digit);
      if (++frac_digits > scale_digits) {
        return InvalidArgument(std::string(what) + " has more precision than its unit allows: '" +
                               shown + "'");
      }
      frac = frac * 10 + (text[i] - '0');
      any_digit = true;
    }
  }
  if (!any_digit)
    return InvalidArgument(std::string("not a number for ") + what + ": '" + shown + "'");
  int64_t scale = 1;
  for (int d = 0; d < scale_digits; ++d) scale *= 10;
  for (int d = frac_digits; d < scale_digits; ++d) frac *= 10;
  if (whole > (kMax - frac) / scale) {
    return InvalidArgument(std::string(what) + " too large: '" + shown + "'");
  }
  return whole * scale + frac;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Result<int64_t> ParseNonNegativeInt(std::string_view text) {
  return ParseScaledDecimal(text, 0, "integer");
}

Result<MilliGpu> ParseMilliGpu(std::string_view text) {
  if (EndsWith(text, "m")) {
    ASSIGN_OR_RETURN(int64_t v,
                     ParseScaledDecimal(text.substr(0, text.size() - 1), 0, "milli-GPU", "m"));
    return MilliGpu(v);
  }
  ASSIGN_OR_RETURN(int64_t v, ParseScaledDecimal(text, 3, "GPU quantity"));
  return MilliGpu(v);
}

Result<MilliCpu> ParseMilliCpu(std::string_view text) {
  if (EndsWith(text, "m")) {
    ASSIGN_OR_RETURN(int64_t v,
                     ParseScaledDecimal(text.substr(0, text.size() - 1), 0, "milli-CPU", "m"));
    return MilliCpu(v);
  }
  ASSIGN_OR_RETURN(int64_t v, ParseScaledDecimal(text, 3, "CPU quantity"));
  return MilliCpu(v);
}

Result<MemoryMib> ParseMemoryMib(std::string_view text) {
  struct Unit {
    const char* suffix;
    int64_t mib;
  };
  static constexpr Unit kUnits[] = {{"Ti", 1024 * 1024}, {"Gi", 1024}, {"Mi", 1}};
  for (const Unit& u : kUnits) {
    if (EndsWith(text, u.suffix)) {
      ASSIGN_OR_RETURN(int64_t v,
                       ParseScaledDecimal(text.substr(0, text.size() - 2), 0, "memory", u.suffix));
      if (v > std::numeric_limits<int64_t>::max() / u.mib) {
        return InvalidArgument("memory too large: '" + std::string(text) + "'");
      }
      return MemoryMib(v * u.mib);
    }
  }
  ASSIGN_OR_RETURN(int64_t v, ParseScaledDecimal(text, 0, "memory (MiB, or with Mi/Gi/Ti)"));
  return MemoryMib(v);
}

std::string FormatMilliGpu(MilliGpu q) {
  if (q.value() % kMilliPerGpu == 0) return std::to_string(q.value() / kMilliPerGpu);
  return std::to_string(q.value()) + "m";
}
std::string FormatMemoryMib(MemoryMib q) {
  if (q.value() != 0 && q.value() % (1024 * 1024) == 0)
    return std::to_string(q.value() / (1024 * 1024)) + "Ti";
  if (q.value() != 0 && q.value() % 1024 == 0) return std::to_string(q.value() / 1024) + "Gi";
  return std::to_string(q.value()) + "Mi";
}
std::string FormatMilliCpu(MilliCpu q) {
  if (q.value() % 1000 == 0) return std::to_string(q.value() / 1000);
  return std::to_string(q.value()) + "m";
}

Result<int64_t> ParseMoneyMicros(const std::string& text) {
  const std::string bad = "price '" + text + "': ";
  if (text.empty()) return InvalidArgument(bad + "empty");
  const size_t dot = text.find('.');
  const std::string whole = text.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (whole.empty() && frac.empty()) return InvalidArgument(bad + "not a number");
  if (frac.size() > 6) return InvalidArgument(bad + "more than six decimals");
  for (char c : whole + frac) {
    if (c < '0' || c > '9') return InvalidArgument(bad + "not a non-negative decimal number");
  }
  int64_t units = 0;
  if (!whole.empty()) {
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), units);
    if (ec != std::errc() || units > 1'000'000'000'000LL) return InvalidArgument(bad + "too large");
  }
  frac.resize(6, '0');
  int64_t micros = 0;
  std::from_chars(frac.data(), frac.data() + frac.size(), micros);
  return units * 1'000'000 + micros;
}

std::string FormatMoneyMicros(int64_t micros) {
  const bool negative = micros < 0;
  const uint64_t v = negative ? -static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  std::string frac = std::to_string(v % 1'000'000);
  frac.insert(0, 6 - frac.size(), '0');
  while (frac.size() > 2 && frac.back() == '0') frac.pop_back();
  return (negative ? "-" : "") + std::to_string(v / 1'000'000) + "." + frac;
}

}  // namespace fabrica
