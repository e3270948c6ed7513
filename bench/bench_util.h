// Helpers shared by the benchmark programs: timing a child process (wall time and peak RSS) and
// latency percentiles of a repeated operation.
//
// Thread-safety: single-threaded helpers.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace zipg::bench {

using Clock = std::chrono::steady_clock;

struct ChildResult {
  double seconds = 0;
  double peak_mb = 0;
  bool ok = false;
};

// Runs `work` in a forked child process; reports its wall time and peak RSS.
inline ChildResult RunInChild(const std::function<bool()>& work) {
  auto start = Clock::now();
  std::fflush(nullptr);  // or the child would print what the parent had buffered
  pid_t pid = fork();
  if (pid == 0) _exit(work() ? 0 : 1);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  ChildResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.peak_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

struct Latency {
  double mean_us = 0, p50_us = 0, p99_us = 0;
};

// Calls op(0..n-1) and returns the latency distribution (n >= 1).
inline Latency Measure(size_t n, const std::function<void(size_t)>& op) {
  std::vector<double> t(n);
  for (size_t i = 0; i < n; ++i) {
    auto s = Clock::now();
    op(i);
    t[i] = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
  }
  Latency l;
  for (double x : t) l.mean_us += x;
  l.mean_us /= static_cast<double>(n);
  std::sort(t.begin(), t.end());
  l.p50_us = t[n / 2];
  l.p99_us = t[std::min(n - 1, n * 99 / 100)];
  return l;
}

}  // namespace zipg::bench
