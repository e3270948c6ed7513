#include "util/call_deadline.h"

#include "util/snapshot.h"

namespace zipg {

thread_local std::optional<CallDeadline::TimePoint> CallDeadline::current_;
thread_local uint64_t ReadAt::current_ = 0;

}  // namespace zipg
