// zipg bench --mix search: search_node_ids latency and throughput (docs/search.md).
//
// Patterns come from the store's own values: the values of random nodes (obj_get), and from each
// a piece of 4..12 bytes (contains), its first 4..12 bytes (prefix), its last 4..12 (suffix), or
// the whole value (exact), cut at code-point boundaries. Each candidate's number of matching nodes
// (search_node_ids at the largest limit) puts it in a class: 1, 2-10 ("10"), 11-100 ("100"),
// 1,001-10,000 ("10k"); up to --patterns of each class and match kind are kept. A candidate
// that takes over --sample-ms (300) to count is skipped (a common piece of text that occurs
// millions of times: its cost is its occurrences, whatever its hits).
//
//   --embedded --store DIR   each pattern --repeat times in this process, one at a time: p50 /
//                            p99 latency and CPU per search, per class and match kind; with
//                            --scan-store DIR2 (the same graph built with --search-index none)
//                            the same patterns on it too, and the ratio (the scan fallback).
//   --connect H:P | --store  through a cluster: the same latency table on one connection, then
//                            --connections clients for --duration s over the patterns with at
//                            most 100 hits: searches/s, p50 / p99, and the CPU the cluster's
//                            processes used per search.
// --json FILE (- : stdout) writes the report; its throughput part also has the searches completed
// per second and their latency histogram (client/bench_report.h).

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "client/bench_report.h"
#include "client/bench_util.h"
#include "client/cli.h"
#include "client/client.h"
#include "datagen/random.h"
#include "graph/graph.h"
#include "util/call_deadline.h"

namespace zipg::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double SelfCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The largest hits of each class, and its name.
const std::pair<uint64_t, const char*> kClasses[] = {
    {1, "1"}, {10, "10"}, {100, "100"}, {10000, "10k"}};
const SearchMatch kKinds[] = {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix,
                              SearchMatch::kExact};

int ClassOf(uint64_t hits) {
  if (hits == 1) return 0;
  if (hits >= 2 && hits <= 10) return 1;
  if (hits >= 11 && hits <= 100) return 2;
  if (hits >= 1001 && hits <= 10000) return 3;
  return -1;
}

// A code-point boundary at or before `at`.
size_t Boundary(const std::string& s, size_t at) {
  while (at > 0 && at < s.size() && (static_cast<uint8_t>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

// A pattern of `kind` from `value`, or "" if the value gives none.
std::string Cut(const std::string& value, SearchMatch kind, datagen::Rng& rng) {
  if (kind == SearchMatch::kExact) return value;
  if (value.size() < 4) return "";
  const size_t len = std::min<size_t>(value.size(), 4 + rng.Uniform(9));
  size_t begin = 0;
  if (kind == SearchMatch::kSuffix) begin = value.size() - len;
  if (kind == SearchMatch::kContains) begin = rng.Uniform(value.size() - len + 1);
  begin = Boundary(value, begin);
  const size_t end = Boundary(value, std::min(value.size(), begin + len));
  if (kind == SearchMatch::kSuffix && end != value.size()) return "";
  return end > begin ? value.substr(begin, end - begin) : "";
}

struct Pattern {
  NodeSearch search;
  uint64_t hits = 0;
};

struct Timing {
  double p50_us = 0, p99_us = 0, cpu_us = 0;
  uint64_t searches = 0;
};

// Runs every pattern `repeat` times on `graph`, one at a time; `cpu` reads the CPU seconds the
// work used so far (this process, or the cluster's processes).
template <typename CpuFn>
StatusOr<Timing> TimePatterns(GraphApi& graph, const std::vector<Pattern>& patterns,
                              uint64_t repeat, CpuFn cpu) {
  std::vector<double> us;
  const double cpu0 = cpu();
  for (uint64_t r = 0; r < repeat; ++r) {
    for (const Pattern& p : patterns) {
      const auto start = Clock::now();
      auto got = graph.SearchNodeIds(p.search);
      us.push_back(Ms(Clock::now() - start) * 1000);
      if (!got.ok()) return got.status();
      if (got->ids.size() != std::min<uint64_t>(p.hits, p.search.limit)) {
        return Status::Internal("search_node_ids '" + p.search.pattern + "' found " +
                                std::to_string(got->ids.size()) + " ids, not " +
                                std::to_string(p.hits));
      }
    }
  }
  Timing t;
  t.searches = us.size();
  t.cpu_us = us.empty() ? 0 : (cpu() - cpu0) * 1e6 / static_cast<double>(us.size());
  t.p50_us = Percentile(us, 0.5);
  t.p99_us = Percentile(us, 0.99);
  return t;
}

}  // namespace

int RunSearchBench(const Args& args) {
  Status known =
      args.CheckKnown(WithTls({"connect", "store", "mix", "embedded", "scan-store", "patterns",
                               "repeat", "connections", "duration", "seed", "sample-ms", "json"}));
  if (!known.ok()) return Fail(known);
  auto per_class = args.GetUint("patterns", 20);
  auto repeat = args.GetUint("repeat", 5);
  auto connections = args.GetUint("connections", 4);
  auto duration = args.GetUint("duration", 10);
  auto seed = args.GetUint("seed", 1);
  auto sample_ms = args.GetUint("sample-ms", 300);
  for (const auto* v : {&per_class, &repeat, &connections, &duration, &seed, &sample_ms}) {
    if (!v->ok()) return Fail(v->status());
  }
  if (*per_class == 0 || *repeat == 0 || *connections == 0 || *connections > 256) {
    return Fail(Status::InvalidArgument("--patterns, --repeat >= 1; --connections 1..256"));
  }

  // The graph, and how to read the CPU the searches cost.
  const bool embedded = args.Has("embedded");
  std::unique_ptr<GraphApi> graph;
  std::unique_ptr<GraphApi> scan_graph;
  std::unique_ptr<GraphApi> sampling_client;  // through a cluster: the sampler's timeout
  std::string endpoint;
  json status;
  uint64_t nodes = 0;
  if (embedded) {
    auto store = args.Get("store");
    if (!store) return Fail(Status::InvalidArgument("--embedded needs --store DIR"));
    GraphOpenOptions open_options;
    open_options.verify_checksums = false;
    auto g = Graph::Open(*store, open_options);
    if (!g.ok()) return Fail(g.status());
    nodes = (*g)->manifest().nodes;
    graph = std::move(*g);
    if (auto scan = args.Get("scan-store")) {
      auto s = Graph::Open(*scan, open_options);
      if (!s.ok()) return Fail(s.status());
      scan_graph = std::move(*s);
    }
  } else {
    if (args.Has("scan-store")) {
      return Fail(Status::InvalidArgument("--scan-store goes with --embedded"));
    }
    auto address = ClusterAddress(args);
    if (!address.ok()) return Fail(address.status());
    if (!*address) {
      return Fail(Status::InvalidArgument("bench needs --connect HOST:PORT or --store DIR"));
    }
    endpoint = (*address)->substr(0, (*address)->find(','));
    ClientOptions options;
    options.timeout_ms = 60000;
    auto c = Connect(endpoint, options);
    if (!c.ok()) return Fail(c.status());
    auto text = (*c)->ServerStatus();
    if (!text.ok()) return Fail(text.status());
    status = json::parse(*text, nullptr, false);
    nodes = status.value("store", json::object()).value("nodes", 0);
    graph = std::move(*c);
    options.timeout_ms = static_cast<int>(*sample_ms);
    auto s = Connect(endpoint, options);
    if (!s.ok()) return Fail(s.status());
    sampling_client = std::move(*s);
  }
  if (nodes == 0) return Fail(Status::InvalidArgument("the store has no nodes"));
  auto cluster_cpu = [&] {
    const auto now = SampleProcesses(status);
    double total = 0;
    for (const auto& [name, s] : now) total += s.cpu_seconds;
    return total;
  };
  std::function<double()> cpu = embedded ? std::function<double()>(SelfCpu) : cluster_cpu;

  GraphApi* sampler = sampling_client ? sampling_client.get() : graph.get();
  // Patterns from the store's values, by class and kind.
  datagen::Rng rng(*seed);
  std::map<std::pair<int, int>, std::vector<Pattern>> found;  // (class, kind) -> patterns
  const size_t wanted = std::size(kClasses) * std::size(kKinds) * *per_class;
  size_t kept = 0;
  const auto sample_start = Clock::now();
  for (uint64_t tries = 0; kept < wanted && tries < 200 * wanted; ++tries) {
    auto node = graph->ObjGet(static_cast<int64_t>(rng.Uniform(nodes)));
    if (!node.ok()) return Fail(node.status());
    if (!*node || (*node)->properties.empty()) continue;
    const auto& [name, value] = (*node)->properties[rng.Uniform((*node)->properties.size())];
    const int k = static_cast<int>(rng.Uniform(std::size(kKinds)));
    Pattern p;
    p.search.pattern = Cut(value, kKinds[k], rng);
    p.search.match = kKinds[k];
    p.search.limit = kMaxSearchLimit;
    if (p.search.pattern.empty()) continue;
    // A candidate that takes over --sample-ms to count (millions of occurrences to locate) is
    // skipped: embedded, by a call deadline; through a cluster, by the sampling client's timeout.
    CallDeadline::Scope sampling(CallDeadline::Clock::now() +
                                 std::chrono::milliseconds(*sample_ms));
    auto all = sampler->SearchNodeIds(p.search);
    if (!all.ok()) continue;  // too many occurrences to locate in time: not a pattern of the mix
    p.hits = all->ids.size();
    const int c = ClassOf(p.hits);
    if (c < 0) continue;
    auto& list = found[{c, k}];
    if (list.size() >= *per_class) continue;
    p.search.limit = kDefaultSearchLimit;
    list.push_back(std::move(p));
    ++kept;
  }
  std::printf("search bench (%s): %llu nodes, %zu patterns sampled in %.1f s, %llu repeats\n",
              embedded ? "embedded" : ("through " + endpoint).c_str(),
              static_cast<unsigned long long>(nodes), kept, Ms(Clock::now() - sample_start) / 1000,
              static_cast<unsigned long long>(*repeat));
  std::printf("%-6s %-9s %8s %10s %10s %10s", "hits", "match", "patterns", "p50 us", "p99 us",
              "cpu us");
  if (scan_graph) std::printf(" %12s %12s %8s", "scan p50 us", "scan cpu us", "speedup");
  std::printf("\n");
  json report = {
      {"mode", embedded ? "embedded" : "cluster"}, {"nodes", nodes}, {"rows", json::array()}};
  std::vector<Pattern> mix;  // at most 100 hits
  std::vector<Pattern> small_mix;
  for (const auto& [key, patterns] : found) {
    const auto [c, k] = key;
    if (c <= 2) mix.insert(mix.end(), patterns.begin(), patterns.end());
    auto t = TimePatterns(*graph, patterns, *repeat, cpu);
    if (!t.ok()) return Fail(t.status());
    json row = {{"hits", kClasses[c].second},  {"match", SearchMatchName(kKinds[k])},
                {"patterns", patterns.size()}, {"p50_us", t->p50_us},
                {"p99_us", t->p99_us},         {"cpu_us", t->cpu_us}};
    std::printf("%-6s %-9s %8zu %10.1f %10.1f %10.1f", kClasses[c].second,
                SearchMatchName(kKinds[k]), patterns.size(), t->p50_us, t->p99_us, t->cpu_us);
    if (scan_graph) {
      auto s = TimePatterns(*scan_graph, patterns, 1, cpu);
      if (!s.ok()) return Fail(s.status());
      std::printf(" %12.0f %12.0f %7.0fx", s->p50_us, s->cpu_us, s->p50_us / t->p50_us);
      row["scan_p50_us"] = s->p50_us;
      row["scan_cpu_us"] = s->cpu_us;
    }
    std::printf("\n");
    report["rows"].push_back(row);
  }
  {
    auto t = TimePatterns(*graph, mix, *repeat, cpu);
    if (!t.ok()) return Fail(t.status());
    std::printf("%-6s %-9s %8zu %10.1f %10.1f %10.1f", "<=100", "all", mix.size(), t->p50_us,
                t->p99_us, t->cpu_us);
    report["mix"] = {{"patterns", mix.size()},
                     {"p50_us", t->p50_us},
                     {"p99_us", t->p99_us},
                     {"cpu_us", t->cpu_us}};
    if (scan_graph) {
      auto s = TimePatterns(*scan_graph, mix, 1, cpu);
      if (!s.ok()) return Fail(s.status());
      std::printf(" %12.0f %12.0f %7.0fx", s->p50_us, s->cpu_us, s->p50_us / t->p50_us);
      report["mix"]["scan_p50_us"] = s->p50_us;
      report["mix"]["scan_cpu_us"] = s->cpu_us;
    }
    std::printf("\n");
  }

  // Throughput through the cluster: --connections clients over the mix.
  if (!embedded && !mix.empty()) {
    std::atomic<bool> stop{false};
    std::mutex mu;
    LatencyRecorder all(*duration);
    Status first_error;
    const double cpu0 = cpu();
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (uint64_t i = 0; i < *connections; ++i) {
      threads.emplace_back([&, i] {
        ClientOptions options;
        options.timeout_ms = 60000;
        auto c = Connect(endpoint, options);
        datagen::Rng local(*seed * 1000 + i);
        LatencyRecorder mine(*duration);
        Status error = c.ok() ? Status::OK() : c.status();
        while (error.ok() && !stop.load()) {
          const Pattern& p = mix[local.Uniform(mix.size())];
          const auto t0 = Clock::now();
          auto got = (*c)->SearchNodeIds(p.search);
          const auto t1 = Clock::now();
          mine.Add(Ms(t1 - t0) * 1000, IntervalOf(t1, start, std::chrono::seconds(1)));
          if (!got.ok()) error = got.status();
        }
        std::lock_guard lock(mu);
        all.Merge(mine);
        if (!error.ok() && first_error.ok()) first_error = error;
      });
    }
    std::this_thread::sleep_for(std::chrono::seconds(*duration));
    stop = true;
    for (auto& t : threads) t.join();
    if (!first_error.ok()) return Fail(first_error);
    const double seconds = Ms(Clock::now() - start) / 1000;
    const uint64_t done = all.count();
    const double cpu_us = done ? (cpu() - cpu0) * 1e6 / static_cast<double>(done) : 0;
    const double p50 = all.Quantile(0.5), p99 = all.Quantile(0.99);
    std::printf(
        "throughput: %llu connections, %.0f searches/s (%llu in %.1f s), p50 %.0f us, "
        "p99 %.0f us, cluster CPU %.0f us per search\n",
        static_cast<unsigned long long>(*connections), done / seconds,
        static_cast<unsigned long long>(done), seconds, p50, p99, cpu_us);
    report["throughput"] = {{"connections", *connections},
                            {"duration_s", *duration},
                            {"count", done},
                            {"per_second", done / seconds},
                            {"p50_us", p50},
                            {"p99_us", p99},
                            {"cpu_us", cpu_us}};
    const NamedRecorders named = {{"search_node_ids", &all}};
    report["throughput"]["intervals"] = IntervalsJson(1, named);
    report["throughput"]["latency"] = LatencyJson(named);
  }
  if (auto target = JsonTarget(args); target.ok() && *target) {
    std::fflush(stdout);
    Status w = WriteJsonReport(**target, report);
    if (!w.ok()) return Fail(w);
  }
  return kExitOk;
}

}  // namespace zipg::cli
