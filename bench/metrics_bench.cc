// What recording a call's metrics costs (docs/operations.md, "Overhead"): the work the RPC
// server does per call with metrics on (rpc/server.cc CallObserver: two clock reads, a latency
// histogram's Observe and a counter's increment through pointers cached per operation), timed in
// a loop on 1 and 2 threads on the same operation (the contended case), against the same loop
// with metrics off (the one relaxed load the recording points make); with the server's lock-free
// metrics::AtomicHistogram and an atomic counter, and with prometheus-cpp's Histogram and Counter
// (a mutex, a compare-and-swap loop) for comparison. Prints ns per call and the share of a TAO
// operation's measured CPU (`--op-cpu-us`, default 100 us per operation over every process, two
// calls per operation: aggregator and shard server).
//
//   metrics_bench [--calls N] [--op-cpu-us US]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "util/metrics.h"

namespace {

using Clock = std::chrono::steady_clock;

// ns per call of `calls` calls on each of `threads` threads, the server's way (lock-free).
double RunAtomic(int threads, long calls) {
  static zipg::metrics::AtomicHistogram latency(zipg::metrics::LatencyBuckets());
  static std::atomic<uint64_t> ok{0};
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (long i = 0; i < calls; ++i) {
        if (zipg::metrics::Enabled()) {
          const auto start = Clock::now();
          latency.Observe(zipg::metrics::SecondsSince(start));
          ok.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
}

// The same with prometheus-cpp's types (`on`), or metrics off.
double Run(int threads, long calls, bool on) {
  auto& family = zipg::metrics::Histograms("zipg_bench_seconds", "Bench.");
  prometheus::Histogram& latency = zipg::metrics::LatencyHistogram(family, {{"op", "obj_get"}});
  prometheus::Counter& ok = zipg::metrics::Counters("zipg_bench_total", "Bench.")
                                .Add({{"op", "obj_get"}, {"code", "OK"}});
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, on] {
      double sink = 0;
      for (long i = 0; i < calls; ++i) {
        if (on && zipg::metrics::Enabled()) {
          const auto start = Clock::now();
          latency.Observe(zipg::metrics::SecondsSince(start));
          ok.Increment();
        } else if (zipg::metrics::Enabled()) {
          sink += 1;
        }
      }
      if (sink < 0) std::printf("%f", sink);
    });
  }
  for (auto& t : pool) t.join();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 5'000'000;
  double op_cpu_us = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls")) calls = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--op-cpu-us")) op_cpu_us = std::atof(argv[i + 1]);
  }
  const double off = Run(1, calls, false);
  zipg::metrics::Enable();
  std::printf(
      "| threads | off ns/call | lock-free ns/call | prometheus-cpp ns/call | lock-free cost, "
      "share of %.0f us CPU/op (2 calls) |\n",
      op_cpu_us);
  std::printf("|---|---|---|---|---|\n");
  for (int threads : {1, 2}) {
    const double atomic = RunAtomic(threads, calls);
    const double prom = Run(threads, calls, true);
    std::printf("| %d | %.1f | %.1f | %.1f | %.3f%% |\n", threads, off, atomic, prom,
                100.0 * 2 * (atomic - off) / (op_cpu_us * 1000));
  }
  return 0;
}
