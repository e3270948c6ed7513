// How much memory this process may use, and how much it uses: the inputs of memory planning
// (graph/memory_plan.h).
//
// Available memory is the smaller of the system's MemAvailable (/proc/meminfo) and, for every
// cgroup this process is in, from its own up to the root (v1 memory controller or v2), the limit
// minus what the cgroup uses that cannot simply be reclaimed (usage minus inactive file pages).
//
// Thread-safety: functions are reentrant.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "util/status.h"

namespace zipg {

struct AvailableMemory {
  uint64_t bytes = 0;
  std::string source;  // "MemAvailable" or "cgroup v1 limit of /a/b" / "cgroup v2 limit of /a/b"
};

// Reads the files under `proc` (default /proc) and `cgroup` (default /sys/fs/cgroup); the roots
// are parameters so that tests can point them at fake trees. IO_ERROR if /proc/meminfo cannot be
// read; cgroup files that are missing are skipped.
StatusOr<AvailableMemory> DetectAvailableMemory(const std::string& proc = "/proc",
                                                const std::string& cgroup = "/sys/fs/cgroup");

// This process's resident set now and its peak so far (VmRSS / VmHWM), in bytes; 0 if unknown.
uint64_t CurrentRss();
uint64_t PeakRss();
// The resident set now, split into anonymous memory (heap, stacks: what requests allocate) and
// file pages (mapped store files: the page cache, which the kernel can take back).
struct ResidentMemory {
  uint64_t total = 0, anon = 0, file = 0;
};
ResidentMemory CurrentResident();
// The status documents' "memory" object: rss_bytes, anon_bytes, file_bytes, accounted_bytes.
std::string MemoryJson(uint64_t accounted_bytes);
// Lowers the peak to the current resident set (/proc/self/clear_refs), so that PeakRss measures
// from now on; false if the kernel refused.
bool ResetPeakRss();

// Allocator settings for the long-running servers, called once at start: blocks of 1 MiB and more
// are mapped and unmapped directly (glibc's default raises that threshold as large blocks are
// freed, after which they come from the heap and their memory stays with the process), and at
// most 4 malloc arenas (a thread-per-connection server would otherwise keep one per thread).
void TuneAllocatorForServers();

// Hands free heap memory back to the system every `period` (malloc_trim), on its own thread,
// for as long as it lives: memory a burst of requests used returns once they are done.
class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(std::chrono::milliseconds period);
  ~MemoryTrimmer();
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// "1073741824", "512M", "4G", "1.5GiB", "300MB", "64k": a byte count with an optional binary unit
// (K, M, G, T; an optional "i" and "B" are accepted: every unit is a power of 1024).
// INVALID_ARGUMENT naming the text otherwise.
StatusOr<uint64_t> ParseByteSize(std::string_view text);

// Bytes as "1.5 GiB", "300.0 MiB", "12.0 KiB" or "17 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace zipg
