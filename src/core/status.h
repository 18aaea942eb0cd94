// Status and Result<T>: how every Fabrica component reports failure without exceptions.
//
// A Status is either OK or carries a code and a message that names what is wrong (a file, line
// and field where there is one). Codes are few and map one-to-one to HTTP statuses so that the
// API layer never has to invent a mapping. Result<T> holds a T or a non-OK Status, shaped like
// std::expected (which g++ 12 lacks). Both are plain values: safe to copy and to pass between
// threads, not to mutate from two threads at once.
#pragma once

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace fabrica {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // 400: the caller's input is malformed or impossible
  kNotFound,            // 404
  kAlreadyExists,       // 409
  kFailedPrecondition,  // 409/412: the state does not allow it (revision mismatch, cordoned)
  kResourceExhausted,   // 429/507: does not fit now
  kUnauthenticated,     // 401
  kPermissionDenied,    // 403
  kInternal,            // 500
  kUnavailable,         // 503
};

const char* StatusCodeName(StatusCode code);
int HttpStatusFor(StatusCode code);
// The Kubernetes StatusReason of an HTTP status code ("NotFound", "Invalid", ...), for the
// `reason` of a Status object.
const char* HttpReasonFor(int code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `, e.g. a file name or a field path.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit like std::expected
  Result(Status status) : value_(std::move(status)) {  // NOLINT
    if (std::get<Status>(value_).ok()) {
      value_ = Status(StatusCode::kInternal, "Result constructed from an OK status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace fabrica

#define FABRICA_CONCAT_INNER(a, b) a##b
#define FABRICA_CONCAT(a, b) FABRICA_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)       \
  do {                              \
    ::fabrica::Status _st = (expr); \
    if (!_st.ok()) return _st;      \
  } while (0)

// NOLINTBEGIN(bugprone-macro-parentheses): lhs may be a declaration such as `int x`.
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(FABRICA_CONCAT(_result_, __LINE__), lhs, expr)
// NOLINTEND(bugprone-macro-parentheses)

// CHECK guards invariants whose violation is a bug in Fabrica, never bad input.
#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::cerr << __FILE__ << ":" << __LINE__ << ": CHECK failed: " #cond << std::endl; \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
