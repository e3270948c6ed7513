#include "util/call_deadline.h"

namespace zipg {

thread_local std::optional<CallDeadline::TimePoint> CallDeadline::current_;

}  // namespace zipg
