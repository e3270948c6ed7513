#include "util/metrics.h"

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <sstream>

namespace zipg::metrics {
namespace {

std::atomic<bool> enabled{false};

prometheus::Registry& TheRegistry() {
  static auto* registry = new prometheus::Registry();  // never destroyed: used until exit
  return *registry;
}

struct CollectorSet {
  std::mutex mu;  // held while collectors run, so that removing one waits for a running scrape
  uint64_t next_id = 1;
  std::map<uint64_t, Collector> collectors;
};

CollectorSet& Collectors() {
  static auto* set = new CollectorSet();
  return *set;
}

void RemoveCollector(uint64_t id) {
  if (id == 0) return;
  CollectorSet& set = Collectors();
  std::lock_guard lock(set.mu);
  set.collectors.erase(id);
}

}  // namespace

bool Enabled() { return enabled.load(std::memory_order_relaxed); }
void Enable() { enabled.store(true, std::memory_order_relaxed); }

prometheus::Family<prometheus::Counter>& Counters(const std::string& name,
                                                  const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(TheRegistry());
}

prometheus::Family<prometheus::Gauge>& Gauges(const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(TheRegistry());
}

prometheus::Family<prometheus::Histogram>& Histograms(const std::string& name,
                                                      const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(TheRegistry());
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> buckets = {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3,
                                              5e-3,  10e-3,  25e-3,  50e-3,  0.1,  0.25,
                                              0.5,   1,      2.5,    5,      10};
  return buckets;
}

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> buckets = {0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5, 5,
                                              10,   30,   60,  120,  300, 600, 1800};
  return buckets;
}

prometheus::Histogram& LatencyHistogram(prometheus::Family<prometheus::Histogram>& family,
                                        const Labels& labels) {
  return family.Add(labels, LatencyBuckets());
}

prometheus::Histogram& DurationHistogram(prometheus::Family<prometheus::Histogram>& family,
                                         const Labels& labels) {
  return family.Add(labels, DurationBuckets());
}

AtomicHistogram::AtomicHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void AtomicHistogram::Observe(double value) {
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  if (value > 0) {
    sum_ns_.fetch_add(static_cast<uint64_t>(value * 1e9 + 0.5), std::memory_order_relaxed);
  }
}

void AtomicHistogram::Read(std::vector<uint64_t>* counts, double* sum) const {
  counts->resize(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    (*counts)[i] = counts_[i].load(std::memory_order_relaxed);
  }
  *sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
}

void Samples::Histogram(const std::string& name, const std::string& help, const AtomicHistogram& h,
                        const Labels& labels) {
  Sample s{name, help, false, 0, labels};
  s.histogram = &h;
  samples_.push_back(std::move(s));
}

void Samples::Counter(const std::string& name, const std::string& help, double value,
                      const Labels& labels) {
  samples_.push_back({name, help, true, value, labels});
}

void Samples::Gauge(const std::string& name, const std::string& help, double value,
                    const Labels& labels) {
  samples_.push_back({name, help, false, value, labels});
}

CollectorHandle& CollectorHandle::operator=(CollectorHandle&& other) noexcept {
  if (this != &other) {
    RemoveCollector(id_);
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

CollectorHandle::~CollectorHandle() { RemoveCollector(id_); }

CollectorHandle AddCollector(Collector collector) {
  CollectorSet& set = Collectors();
  std::lock_guard lock(set.mu);
  const uint64_t id = set.next_id++;
  set.collectors.emplace(id, std::move(collector));
  return CollectorHandle(id);
}

std::string Exposition() {
  std::vector<prometheus::MetricFamily> families = TheRegistry().Collect();
  Samples samples;
  {
    CollectorSet& set = Collectors();
    std::lock_guard lock(set.mu);
    for (const auto& [id, collector] : set.collectors) collector(&samples);
  }
  std::map<std::string, size_t> index;  // name -> position in families
  for (size_t i = 0; i < families.size(); ++i) index[families[i].name] = i;
  for (const auto& s : samples.samples()) {
    auto [it, added] = index.try_emplace(s.name, families.size());
    if (added) {
      prometheus::MetricFamily family;
      family.name = s.name;
      family.help = s.help;
      family.type = s.histogram ? prometheus::MetricType::Histogram
                    : s.counter ? prometheus::MetricType::Counter
                                : prometheus::MetricType::Gauge;
      families.push_back(std::move(family));
    }
    prometheus::ClientMetric metric;
    for (const auto& [k, v] : s.labels) metric.label.push_back({k, v});
    if (s.histogram) {
      std::vector<uint64_t> counts;
      double sum = 0;
      s.histogram->Read(&counts, &sum);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < counts.size(); ++i) {
        cumulative += counts[i];
        const double bound = i < s.histogram->bounds().size()
                                 ? s.histogram->bounds()[i]
                                 : std::numeric_limits<double>::infinity();
        metric.histogram.bucket.push_back({cumulative, bound});
      }
      metric.histogram.sample_count = cumulative;
      metric.histogram.sample_sum = sum;
    } else if (s.counter) {
      metric.counter.value = s.value;
    } else {
      metric.gauge.value = s.value;
    }
    families[it->second].metric.push_back(std::move(metric));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace zipg::metrics
