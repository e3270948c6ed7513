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

// Samples a collector adds at scrape time. Samples of one name must have one type; a name seen
// twice in one scrape gets one family with both samples.
class Samples {
 public:
  void Counter(const std::string& name, const std::string& help, double value,
               const Labels& labels = {});
  void Gauge(const std::string& name, const std::string& help, double value,
             const Labels& labels = {});

  struct Sample {
    std::string name, help;
    bool counter = false;
    double value = 0;
    Labels labels;
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
