// CallDeadline: the deadline of the call a thread is working for, so that no sub-call outlives
// its client's deadline (docs/limits.md, "Deadlines"). A server sets it from the request's call
// context for the duration of the call (rpc/server.cc); the connection pool gives a sub-call only
// the time left and sends that on (rpc/connection_pool.cc); ThreadPool tasks run under the
// deadline of the thread that submitted them; traversals stop at it (graph/traversal.cc).
//
// Thread-safety: the deadline is per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace zipg {

class CallDeadline {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  // This thread's deadline; none if it works for no call that has one.
  static std::optional<TimePoint> Current() { return current_; }

  // Milliseconds left before `deadline` (negative once passed).
  static int64_t RemainingMs(TimePoint deadline) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  }

  // Sets this thread's deadline to `deadline` (none: clears it) until the scope ends, then
  // restores the one before. A server's call, a pool task, a write sent for several callers.
  class Scope {
   public:
    explicit Scope(std::optional<TimePoint> deadline) : saved_(current_) { current_ = deadline; }
    ~Scope() { current_ = saved_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::optional<TimePoint> saved_;
  };

  // Sets this thread's deadline with no scope: the server's input protocol, which learns a call's
  // deadline while reading its arguments, inside the scope that the call runs in.
  static void Set(std::optional<TimePoint> deadline) { current_ = deadline; }

 private:
  static thread_local std::optional<TimePoint> current_;
};

}  // namespace zipg
