// Metrics: the process's Prometheus metrics (docs/operations.md, "Metrics"), over prometheus-cpp's
// core library (counters, gauges, histograms, label families, the text exposition format).
//
// Two sources, so that nothing is counted twice:
//  * recorded where it happens, through the families below (per call, per commit group, per
//    compaction); every recording point first checks Enabled(), which is false until a process
//    that serves metrics calls Enable(): "metrics off" costs one relaxed load per point;
//  * read at scrape time by collectors (AddCollector) from the counters the servers already keep
//    for their status documents.
//
// Names follow Prometheus' conventions: zipg_ prefix, _total counters, _seconds and _bytes units,
// labels (not names) for the operation and the code.
//
// Thread-safety: every function may be called concurrently. A family's reference stays valid for
// the life of the process.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zipg::metrics {

using Labels = std::map<std::string, std::string>;

// False until Enable(): recording points skip their work.
bool Enabled();
void Enable();

// The families of the process, created on first use (same name: same family; a name must keep
// one type and help text).
prometheus::Family<prometheus::Counter>& Counters(const std::string& name, const std::string& help);
prometheus::Family<prometheus::Gauge>& Gauges(const std::string& name, const std::string& help);
prometheus::Family<prometheus::Histogram>& Histograms(const std::string& name,
                                                      const std::string& help);

// Bucket upper bounds in seconds for latencies: 50 us to 10 s, about 2.5x apart.
const std::vector<double>& LatencyBuckets();
// Bucket upper bounds in seconds for background work (compactions, merges, rebuilds): 10 ms to
// 30 min.
const std::vector<double>& DurationBuckets();

// A histogram of `family` with `labels` and the latency (or `buckets`) bounds.
prometheus::Histogram& LatencyHistogram(prometheus::Family<prometheus::Histogram>& family,
                                        const Labels& labels = {});
prometheus::Histogram& DurationHistogram(prometheus::Family<prometheus::Histogram>& family,
                                         const Labels& labels = {});

// Seconds since `start`, for Observe.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A histogram recorded with relaxed atomics, for per-call paths: Observe is a binary search of
// the bounds and two fetch_adds, with no lock (prometheus-cpp's Histogram takes a mutex and its
// counters a compare-and-swap loop per call, which contend across a server's threads). The sum
// is kept in nanoseconds (values in seconds), exact to 1 ns per observation.
class AtomicHistogram {
 public:
  explicit AtomicHistogram(std::vector<double> bounds);
  void Observe(double value);
  // Counts per bucket (not cumulative; the last is above every bound), and the sum.
  void Read(std::vector<uint64_t>* counts, double* sum) const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<uint64_t> sum_ns_{0};
};

// Samples a collector adds at scrape time. Samples of one name must have one type; a name seen
// twice in one scrape gets one family with both samples.
class Samples {
 public:
  void Counter(const std::string& name, const std::string& help, double value,
               const Labels& labels = {});
  void Gauge(const std::string& name, const std::string& help, double value,
             const Labels& labels = {});
  void Histogram(const std::string& name, const std::string& help, const AtomicHistogram& h,
                 const Labels& labels = {});

  struct Sample {
    std::string name, help;
    bool counter = false;
    double value = 0;
    Labels labels;
    const AtomicHistogram* histogram = nullptr;  // a histogram sample (read at serialization)
  };
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  std::vector<Sample> samples_;
};

using Collector = std::function<void(Samples*)>;

// Runs `collector` at every scrape until the returned handle is destroyed (which waits for a
// scrape running it to finish).
class CollectorHandle {
 public:
  CollectorHandle() = default;
  explicit CollectorHandle(uint64_t id) : id_(id) {}
  CollectorHandle(CollectorHandle&& other) noexcept : id_(other.id_) { other.id_ = 0; }
  CollectorHandle& operator=(CollectorHandle&& other) noexcept;
  ~CollectorHandle();

 private:
  uint64_t id_ = 0;
};
[[nodiscard]] CollectorHandle AddCollector(Collector collector);

// The text exposition (format 0.0.4) of every family and every collector's samples.
std::string Exposition();

}  // namespace zipg::metrics
