// Tests of util/metrics.h: the exposition against the Prometheus text format, read back by an
// independent parser here (name{labels} value per line).
#include "util/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace zipg::metrics {
namespace {

// Sample lines of the exposition: "name{labels}" -> value; comments are checked separately.
std::map<std::string, double> Parse(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

TEST(MetricsTest, CountersHistogramsAndCollectorsAppearInTheExposition) {
  auto& calls = Counters("zipg_test_calls_total", "Calls.");
  calls.Add({{"op", "obj_get"}, {"code", "OK"}}).Increment(3);
  calls.Add({{"op", "obj_get"}, {"code", "NOT_FOUND"}}).Increment();
  auto& latency = LatencyHistogram(Histograms("zipg_test_seconds", "Latency."), {{"op", "x"}});
  for (double v : {40e-6, 80e-6, 0.3, 20.0}) latency.Observe(v);

  CollectorHandle handle = AddCollector([](Samples* s) {
    s->Gauge("zipg_test_memtable_bytes", "Bytes.", 1234);
    s->Counter("zipg_test_lag_total", "Lag.", 7, {{"shard", "0"}});
    s->Counter("zipg_test_lag_total", "Lag.", 9, {{"shard", "1"}});
  });
  const std::string text = Exposition();
  const auto v = Parse(text);
  EXPECT_EQ(v.at("zipg_test_calls_total{code=\"OK\",op=\"obj_get\"}"), 3);
  EXPECT_EQ(v.at("zipg_test_calls_total{code=\"NOT_FOUND\",op=\"obj_get\"}"), 1);
  // Cumulative buckets: 40us <= 50us; 80us <= 100us; 0.3 <= 0.5; 20 only in +Inf.
  EXPECT_EQ(v.at("zipg_test_seconds_bucket{op=\"x\",le=\"5e-05\"}"), 1);
  EXPECT_EQ(v.at("zipg_test_seconds_bucket{op=\"x\",le=\"0.0001\"}"), 2);
  EXPECT_EQ(v.at("zipg_test_seconds_bucket{op=\"x\",le=\"0.25\"}"), 2);
  EXPECT_EQ(v.at("zipg_test_seconds_bucket{op=\"x\",le=\"0.5\"}"), 3);
  EXPECT_EQ(v.at("zipg_test_seconds_bucket{op=\"x\",le=\"10\"}"), 3);
  EXPECT_EQ(v.at("zipg_test_seconds_bucket{op=\"x\",le=\"+Inf\"}"), 4);
  EXPECT_EQ(v.at("zipg_test_seconds_count{op=\"x\"}"), 4);
  EXPECT_NEAR(v.at("zipg_test_seconds_sum{op=\"x\"}"), 20.30012, 1e-9);
  EXPECT_EQ(v.at("zipg_test_memtable_bytes"), 1234);
  EXPECT_EQ(v.at("zipg_test_lag_total{shard=\"0\"}"), 7);
  EXPECT_EQ(v.at("zipg_test_lag_total{shard=\"1\"}"), 9);
  // One TYPE line per family, even for a name two samples share.
  EXPECT_NE(text.find("# TYPE zipg_test_lag_total counter"), std::string::npos);
  EXPECT_EQ(text.find("# TYPE zipg_test_lag_total"), text.rfind("# TYPE zipg_test_lag_total"));
  EXPECT_NE(text.find("# TYPE zipg_test_memtable_bytes gauge"), std::string::npos);
  EXPECT_NE(text.find("# TYPE zipg_test_seconds histogram"), std::string::npos);

  // A removed collector's samples are gone.
  handle = CollectorHandle();
  EXPECT_EQ(Parse(Exposition()).count("zipg_test_memtable_bytes"), 0u);
}

TEST(MetricsTest, ConcurrentRecordingAndScrapesCountEveryIncrement) {
  auto& family = Counters("zipg_test_concurrent_total", "Concurrent.");
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop) (void)Exposition();
  });
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&family, t] {
      for (int i = 0; i < 10000; ++i) family.Add({{"t", std::to_string(t % 2)}}).Increment();
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  scraper.join();
  const auto v = Parse(Exposition());
  EXPECT_EQ(v.at("zipg_test_concurrent_total{t=\"0\"}"), 20000);
  EXPECT_EQ(v.at("zipg_test_concurrent_total{t=\"1\"}"), 20000);
}

TEST(MetricsTest, AtomicHistogramsExportAsHistogramsAndCountEveryObservation) {
  AtomicHistogram h({0.001, 0.01, 0.1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 10000; ++i) {
        h.Observe(0.0005);  // first bucket
        h.Observe(0.01);    // on a bound: that bucket (le)
        h.Observe(5.0);     // above every bound
      }
    });
  }
  for (auto& t : threads) t.join();
  CollectorHandle handle = AddCollector([&h](Samples* s) {
    s->Histogram("zipg_test_atomic_seconds", "Atomic.", h, {{"op", "a"}});
  });
  const std::string text = Exposition();
  const auto v = Parse(text);
  EXPECT_EQ(v.at("zipg_test_atomic_seconds_bucket{op=\"a\",le=\"0.001\"}"), 40000);
  EXPECT_EQ(v.at("zipg_test_atomic_seconds_bucket{op=\"a\",le=\"0.01\"}"), 80000);
  EXPECT_EQ(v.at("zipg_test_atomic_seconds_bucket{op=\"a\",le=\"0.1\"}"), 80000);
  EXPECT_EQ(v.at("zipg_test_atomic_seconds_bucket{op=\"a\",le=\"+Inf\"}"), 120000);
  EXPECT_EQ(v.at("zipg_test_atomic_seconds_count{op=\"a\"}"), 120000);
  EXPECT_NEAR(v.at("zipg_test_atomic_seconds_sum{op=\"a\"}"), 40000 * (0.0005 + 0.01 + 5.0), 1e-3);
  EXPECT_NE(text.find("# TYPE zipg_test_atomic_seconds histogram"), std::string::npos);
}

TEST(MetricsTest, DisabledUntilEnabled) {
  EXPECT_FALSE(Enabled());
  Enable();
  EXPECT_TRUE(Enabled());
}

}  // namespace
}  // namespace zipg::metrics
