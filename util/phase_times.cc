#include "util/phase_times.h"

#include <time.h>

#include <mutex>
#include <unordered_map>

namespace zipg {

namespace {

thread_local std::string current_path;

struct Registry {
  std::mutex mu;
  std::vector<PhaseTime> totals;                     // in the order first seen
  std::unordered_map<std::string, size_t> position;  // path -> index into totals
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: phases may end during exit
  return *r;
}

// The totals of `path`, added at the end of the list if new; r.mu held.
PhaseTime& TotalsOf(Registry& r, const std::string& path) {
  auto [it, added] = r.position.emplace(path, r.totals.size());
  if (added) r.totals.push_back(PhaseTime{path, 0, 0});
  return r.totals[it->second];
}

}  // namespace

uint64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

ScopedPhase::ScopedPhase(const char* name) : parent_length_(current_path.size()) {
  if (!current_path.empty()) current_path += '/';
  current_path += name;
  Registry& r = registry();
  {
    // Registered at the start, so a parent is listed before its children.
    std::lock_guard<std::mutex> lock(r.mu);
    TotalsOf(r, current_path);
  }
  start_ns_ = ThreadCpuNanos();
}

void ScopedPhase::End() {
  if (ended_) return;
  ended_ = true;
  const uint64_t spent = ThreadCpuNanos() - start_ns_;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    PhaseTime& t = TotalsOf(r, current_path);  // listed again if taken while running
    t.cpu_seconds += static_cast<double>(spent) / 1e9;
    ++t.count;
  }
  current_path.resize(parent_length_);
}

std::vector<PhaseTime> TakePhaseTimes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<PhaseTime> out;
  out.swap(r.totals);
  r.position.clear();
  return out;
}

}  // namespace zipg
