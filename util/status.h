// Status and StatusOr: how every engine function reports failure.
//
// Codes match the user-facing contract (../shared/spec/interface.md) one-to-one, plus two
// engine-internal codes (kCorruption, kIOError) that the RPC boundary reports as INTERNAL. Expected
// failures are values, never exceptions; assertions are only for programmer errors.
//
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace zipg {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kUnavailable,
  kDeadlineExceeded,
  kResourceExhausted,
  kInternal,
  kFailedPrecondition,  // a snapshot no longer held (docs/consistency.md)
  kCorruption,          // a stored file fails its checks (reported as INTERNAL to clients)
  kIOError,             // the operating system refused a file operation (reported as INTERNAL)
};

// The stable name of a code, as clients see it ("INVALID_ARGUMENT", ...).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(T value) : value_(std::move(value)) {}                                  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace zipg

#define ZIPG_CONCAT_INNER(a, b) a##b
#define ZIPG_CONCAT(a, b) ZIPG_CONCAT_INNER(a, b)

// Returns from the calling function if `expr` yields a non-OK Status.
#define ZIPG_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::zipg::Status _zipg_status = (expr);        \
    if (!_zipg_status.ok()) return _zipg_status; \
  } while (0)

// ZIPG_ASSIGN_OR_RETURN(auto x, StatusOrExpr): binds the value or returns the error.
#define ZIPG_ASSIGN_OR_RETURN(lhs, expr) \
  ZIPG_ASSIGN_OR_RETURN_IMPL(ZIPG_CONCAT(_zipg_statusor_, __LINE__), lhs, expr)
#define ZIPG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
