// What `zipg bench --json FILE` adds to a load driver's report (docs/serving.md, "The JSON
// report"): throughput per interval and a latency histogram, per operation and overall, and the
// writing of the report to FILE or, for "-", to stdout as one line.
//
// The measuring loop only appends a latency and bumps its interval's counter (LatencyRecorder::
// Add, one per thread and operation); sorting, bucketing and merging happen after the run.
//
// Thread-safety: a LatencyRecorder belongs to one thread until the run ends; the rest are pure
// functions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/cli.h"
#include "util/status.h"

namespace zipg::cli {

// Upper bounds of the latency buckets in microseconds: the E24 series (24 per decade, 7-15%
// apart: 1, 1.1, 1.2, 1.3, 1.5, 1.6, ... 8.2, 9.1, 10, 11, ...) from 1 us to 62 s, 188 bounds.
// Bucket i counts latencies in (bounds[i-1], bounds[i]] (bucket 0: up to 1 us); one more bucket,
// counts[bounds.size()], counts those over 62 s.
inline const std::vector<double>& LatencyBoundsUs() {
  static const std::vector<double> bounds = [] {
    static constexpr int64_t kE24[] = {10, 11, 12, 13, 15, 16, 18, 20, 22, 24, 27, 30,
                                       33, 36, 39, 43, 47, 51, 56, 62, 68, 75, 82, 91};
    std::vector<double> b;
    for (int64_t decade = 1;; decade *= 10) {
      for (int64_t m : kE24) {
        const double us = static_cast<double>(m * decade) / 10;
        if (us > 6.2e7) return b;
        b.push_back(us);
      }
    }
  }();
  return bounds;
}

// The latencies of one operation (or of several, merged), and how many completed in each
// interval of the measured phase.
class LatencyRecorder {
 public:
  explicit LatencyRecorder(size_t intervals = 0) : intervals_(intervals) {}

  // One operation that took `us` and completed in interval `interval` (past the last interval:
  // counted in the last, e.g. a call started just before the end).
  void Add(double us, size_t interval) {
    samples_.push_back(us);
    if (!intervals_.empty()) ++intervals_[std::min(interval, intervals_.size() - 1)];
  }
  void Merge(const LatencyRecorder& other) {
    samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
    if (intervals_.size() < other.intervals_.size()) intervals_.resize(other.intervals_.size());
    for (size_t i = 0; i < other.intervals_.size(); ++i) intervals_[i] += other.intervals_[i];
    sorted_ = false;
  }

  uint64_t count() const { return samples_.size(); }
  const std::vector<uint64_t>& intervals() const { return intervals_; }
  // The q-quantile: the k-th smallest latency, k = min(count - 1, floor(q * count)), as
  // Percentile (bench_util.h); 0 without samples.
  double Quantile(double q) {
    if (samples_.empty()) return 0;
    Sort();
    const size_t k = std::min(samples_.size() - 1,
                              static_cast<size_t>(q * static_cast<double>(samples_.size())));
    return samples_[k];
  }
  double Max() {
    Sort();
    return samples_.empty() ? 0 : samples_.back();
  }
  // {"count", "counts" (one per bucket of LatencyBoundsUs, and the one past it), "p50_us",
  // "p95_us", "p99_us", "max_us"}.
  nlohmann::json Histogram() {
    Sort();
    const auto& bounds = LatencyBoundsUs();
    std::vector<uint64_t> counts(bounds.size() + 1);
    size_t b = 0;
    for (double us : samples_) {
      while (b < bounds.size() && us > bounds[b]) ++b;
      ++counts[b];
    }
    return {{"count", count()},         {"counts", counts},         {"p50_us", Quantile(0.50)},
            {"p95_us", Quantile(0.95)}, {"p99_us", Quantile(0.99)}, {"max_us", Max()}};
  }

 private:
  void Sort() {
    if (!sorted_) std::sort(samples_.begin(), samples_.end());
    sorted_ = true;
  }

  std::vector<double> samples_;
  std::vector<uint64_t> intervals_;
  bool sorted_ = false;
};

using NamedRecorders = std::vector<std::pair<std::string, LatencyRecorder*>>;

// {"seconds": S, "start_s": [0, S, 2S, ...], "ops": {name: [completed per interval]},
//  "ops_per_s": {name: [ops / S per interval]}}.
inline nlohmann::json IntervalsJson(double seconds, const NamedRecorders& recorders) {
  nlohmann::json out = {{"seconds", seconds},
                        {"start_s", nlohmann::json::array()},
                        {"ops", nlohmann::json::object()},
                        {"ops_per_s", nlohmann::json::object()}};
  size_t n = 0;
  for (const auto& [name, r] : recorders) n = std::max(n, r->intervals().size());
  for (size_t i = 0; i < n; ++i) out["start_s"].push_back(static_cast<double>(i) * seconds);
  for (const auto& [name, r] : recorders) {
    std::vector<uint64_t> ops = r->intervals();
    ops.resize(n);
    std::vector<double> rate;
    for (uint64_t c : ops) rate.push_back(static_cast<double>(c) / seconds);
    out["ops"][name] = ops;
    out["ops_per_s"][name] = rate;
  }
  return out;
}

// {"bounds_us": LatencyBoundsUs(), "ops": {name: LatencyRecorder::Histogram()}}.
inline nlohmann::json LatencyJson(const NamedRecorders& recorders) {
  nlohmann::json out = {{"bounds_us", LatencyBoundsUs()}, {"ops", nlohmann::json::object()}};
  for (const auto& [name, r] : recorders) out["ops"][name] = r->Histogram();
  return out;
}

// The interval of the measured phase (from `from`, `width` long) that `t` falls in.
inline size_t IntervalOf(std::chrono::steady_clock::time_point t,
                         std::chrono::steady_clock::time_point from,
                         std::chrono::steady_clock::duration width) {
  return t <= from ? 0 : static_cast<size_t>((t - from) / width);
}

// --json FILE ("-": stdout): nullopt without the option; INVALID_ARGUMENT for an empty value or
// one that is an option (the old boolean `--json` followed by another option).
inline StatusOr<std::optional<std::string>> JsonTarget(const Args& args) {
  auto target = args.Get("json");
  if (!target) return std::optional<std::string>();
  if (target->empty() || target->rfind("--", 0) == 0) {
    return Status::InvalidArgument("--json needs a file name, or - for stdout");
  }
  return target;
}

// Writes `report` to `target`: "-" prints it on stdout as one line, anything else is a file
// (replaced).
inline Status WriteJsonReport(const std::string& target, const nlohmann::json& report) {
  if (target == "-") {
    std::fflush(stdout);  // after what printf wrote (std::cout is not synced with it)
    std::cout << report.dump() << "\n" << std::flush;
    return Status::OK();
  }
  std::ofstream out(target, std::ios::trunc);
  out << report.dump() << "\n";
  out.close();
  if (!out) return Status::IOError("cannot write the JSON report to " + target);
  return Status::OK();
}

}  // namespace zipg::cli
