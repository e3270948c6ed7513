#include "util/phase_times.h"

#include <sys/resource.h>
#include <unistd.h>

#include <thread>

#include "gtest/gtest.h"

namespace zipg {
namespace {

// The calling thread's CPU seconds by getrusage, an independent clock.
double RusageSeconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void Spin(double seconds) {
  const double start = RusageSeconds();
  volatile uint64_t sink = 0;
  while (RusageSeconds() - start < seconds) {
    for (int i = 0; i < 10000; ++i) sink = sink + i;
  }
}

const PhaseTime* Find(const std::vector<PhaseTime>& times, const std::string& path) {
  for (const auto& t : times) {
    if (t.path == path) return &t;
  }
  return nullptr;
}

TEST(PhaseTimesTest, NestedPhasesAddTheirThreadsCpuToTheirPaths) {
  TakePhaseTimes();
  const double before = RusageSeconds();
  {
    ScopedPhase outer("outer");
    Spin(0.03);
    {
      ScopedPhase inner("inner");
      Spin(0.05);
    }
    ScopedPhase second("second");
    Spin(0.02);
    second.End();
    second.End();  // idempotent
  }
  const double spent = RusageSeconds() - before;
  const auto times = TakePhaseTimes();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].path, "outer");
  EXPECT_EQ(times[1].path, "outer/inner");
  EXPECT_EQ(times[2].path, "outer/second");
  for (const auto& t : times) EXPECT_EQ(t.count, 1u) << t.path;
  // getrusage ticks more coarsely than the thread clock: a few ms of slack.
  EXPECT_NEAR(times[0].cpu_seconds, spent, 0.01);
  EXPECT_NEAR(times[1].cpu_seconds, 0.05, 0.01);
  EXPECT_NEAR(times[2].cpu_seconds, 0.02, 0.01);
  EXPECT_GE(times[0].cpu_seconds, times[1].cpu_seconds + times[2].cpu_seconds);
  EXPECT_TRUE(TakePhaseTimes().empty()) << "Take starts over";
}

TEST(PhaseTimesTest, ThreadsOfOnePhaseAddUpAndSleepingCostsNothing) {
  TakePhaseTimes();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([] {
      ScopedPhase phase("work");
      Spin(0.03);
    });
  }
  for (auto& t : threads) t.join();
  {
    ScopedPhase idle("idle");
    usleep(100000);
  }
  const auto times = TakePhaseTimes();
  const PhaseTime* work = Find(times, "work");
  const PhaseTime* idle = Find(times, "idle");
  ASSERT_NE(work, nullptr);
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(work->count, 3u);
  EXPECT_NEAR(work->cpu_seconds, 0.09, 0.02);
  EXPECT_LT(idle->cpu_seconds, 0.01);
  // A thread's path starts empty: "work" was not nested under anything of this thread.
  EXPECT_EQ(Find(times, "idle/work"), nullptr);
}

}  // namespace
}  // namespace zipg
