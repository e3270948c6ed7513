// CPU time by named phase of a pipeline (`zipg compress` shows its build's this way).
//
// A ScopedPhase adds the CPU time its thread spends between its construction and destruction to
// a process-wide total for its path. Phases nest per thread: a phase opened inside "nodes" on
// the same thread is "nodes/blocks", so the total of a path includes its children's. Threads
// that work for one phase each open it (the totals add up the CPU of all of them).
//
// Thread-safe. A phase costs two clock_gettime calls and one mutex acquisition at its end: meant
// for phases of milliseconds or more, not for per-record work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zipg {

struct PhaseTime {
  std::string path;  // "nodes/blocks/compress"
  double cpu_seconds = 0;
  uint64_t count = 0;  // how many times a phase of this path ended
};

// The totals so far in the order their paths were first seen, and starts over.
std::vector<PhaseTime> TakePhaseTimes();

class ScopedPhase {
 public:
  explicit ScopedPhase(const char* name);
  ~ScopedPhase() { End(); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

  // Ends the phase before the scope does (phases opened inside it must have ended). Idempotent.
  void End();

 private:
  bool ended_ = false;
  size_t parent_length_;  // the thread's path before this phase
  uint64_t start_ns_;
};

// The calling thread's CPU time in nanoseconds.
uint64_t ThreadCpuNanos();

}  // namespace zipg
