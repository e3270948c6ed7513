// Telling ThreadSanitizer about an order it cannot see.
//
// TSan sees only the synchronization done in instrumented code. Debian's libraries are not
// instrumented, so when one of them hands an object of ours from one thread to another (a
// reference count dropped in libthrift, a queue inside libzmq), TSan reports the hand-off as a
// race. HappensBefore(p) in the first thread, after its last use of *p, and HappensAfter(p) in
// the second, before its first, state the order the library already guarantees.
//
// Both do nothing outside a TSan build. Use them only where a library's own guarantee is the
// reason, and say which guarantee at the call.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZIPG_TSAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define ZIPG_TSAN_BUILD 1
#endif

#ifdef ZIPG_TSAN_BUILD
#include <sanitizer/tsan_interface.h>
#endif

namespace zipg {

inline void HappensBefore([[maybe_unused]] const void* p) {
#ifdef ZIPG_TSAN_BUILD
  __tsan_release(const_cast<void*>(p));
#endif
}

inline void HappensAfter([[maybe_unused]] const void* p) {
#ifdef ZIPG_TSAN_BUILD
  __tsan_acquire(const_cast<void*>(p));
#endif
}

}  // namespace zipg
