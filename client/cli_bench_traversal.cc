// zipg bench --mix traversal | rpq: traversal latency (docs/traversal.md), shipped vs pulled.
//
//   traversal  bfs (any type) from --starts random start nodes at each depth of --depths
//   rpq        each expression of --queries FILE (one per line, '#' comments) from --starts
//              random sources, one source per query
//
// Each case runs one query at a time on one connection, shipped over every start, then shipped
// and pulled over the first --pulled-starts of them (the same answers):
//   shipped  the operation itself: the aggregator coordinates and each round's frontier goes to
//            the shard servers owning it (with --embedded: the in-process store does the same);
//   pulled   the same search run by this client (graph::RunBfs / RunRpq), one get_neighbor_ids
//            call per (node, type) of each frontier: what a traversal costs without shipping.
//            At most --pulled-starts starts (default 10): it is slow by design.
// Through a cluster it reports, per query, the calls and the bytes of frames every cluster
// process served (the members' status counters, less what sampling them costs), and the CPU the
// cluster's processes used; embedded, the CPU of this process.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "client/bench_report.h"
#include "client/bench_util.h"
#include "client/cli.h"
#include "client/client.h"
#include "datagen/random.h"
#include "graph/graph.h"
#include "graph/traversal.h"

namespace zipg::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// What the cluster's processes have served so far, and their CPU.
struct ClusterSample {
  uint64_t calls = 0, bytes = 0;
  std::map<std::string, ProcessSample> procs;
};

// Reads every member's own status (calls, bytes_in, bytes_out).
class ClusterMeter {
 public:
  static StatusOr<ClusterMeter> Open(Client& aggregator) {
    ClusterMeter m;
    ZIPG_ASSIGN_OR_RETURN(std::string text, aggregator.ServerStatus());
    m.status_ = json::parse(text, nullptr, false);
    if (m.status_.is_discarded()) return Status::Internal("status is not JSON");
    for (const auto& member : m.status_.value("servers", json::array())) {
      ClientOptions options;
      options.timeout_ms = 60000;
      ZIPG_ASSIGN_OR_RETURN(auto c, Connect(member.value("endpoint", ""), options));
      m.members_.push_back(std::move(c));
    }
    // What one sample costs the counters (its own status calls), to subtract.
    ZIPG_ASSIGN_OR_RETURN(ClusterSample a, m.Sample());
    ZIPG_ASSIGN_OR_RETURN(ClusterSample b, m.Sample());
    m.sample_calls_ = b.calls - a.calls;
    m.sample_bytes_ = b.bytes - a.bytes;
    return m;
  }
  StatusOr<ClusterSample> Sample() {
    ClusterSample s;
    for (auto& c : members_) {
      ZIPG_ASSIGN_OR_RETURN(std::string text, c->ServerStatus());
      json j = json::parse(text, nullptr, false);
      if (j.is_discarded()) return Status::Internal("status is not JSON");
      s.calls += j.value("calls", uint64_t{0});
      s.bytes += j.value("bytes_in", uint64_t{0}) + j.value("bytes_out", uint64_t{0});
    }
    s.procs = SampleProcesses(status_);
    return s;
  }
  uint64_t sample_calls() const { return sample_calls_; }
  uint64_t sample_bytes() const { return sample_bytes_; }

 private:
  json status_;
  std::vector<std::unique_ptr<Client>> members_;
  uint64_t sample_calls_ = 0, sample_bytes_ = 0;
};

struct CaseResult {
  std::vector<double> ms;
  double answers = 0;  // ids or pairs, summed
  uint64_t errors = 0;
  std::string first_error;
  double calls = 0, bytes = 0, cpu_seconds = 0;
};

// One query: its answer's size.
using Query = std::function<StatusOr<size_t>(int64_t start)>;

StatusOr<CaseResult> RunCase(const Query& query, const std::vector<int64_t>& starts,
                             ClusterMeter* meter) {
  CaseResult r;
  ClusterSample before;
  if (meter) {
    ZIPG_ASSIGN_OR_RETURN(before, meter->Sample());
  }
  const double cpu0 = SelfCpuSeconds();
  for (int64_t start : starts) {
    const auto t0 = Clock::now();
    auto got = query(start);
    r.ms.push_back(Ms(Clock::now() - t0));
    if (got.ok()) {
      r.answers += static_cast<double>(*got);
    } else {
      if (r.errors++ == 0) r.first_error = got.status().ToString();
    }
  }
  if (meter) {
    ZIPG_ASSIGN_OR_RETURN(ClusterSample after, meter->Sample());
    r.calls = static_cast<double>(after.calls - before.calls - meter->sample_calls());
    r.bytes = static_cast<double>(after.bytes - before.bytes - meter->sample_bytes());
    r.cpu_seconds = CpuSince(before.procs, after.procs);
  } else {
    r.cpu_seconds = SelfCpuSeconds() - cpu0;
  }
  return r;
}

void Print(const std::string& label, const char* mode, CaseResult r, json* report) {
  const double n = static_cast<double>(r.ms.size());
  double sum = 0;
  for (double x : r.ms) sum += x;
  const double p50 = Percentile(r.ms, 0.5), p99 = Percentile(r.ms, 0.99);
  std::printf(
      "  %-22s %-11s %5.0f %9.2f %9.2f %9.2f %10.1f %9.1f %10.1f %10.0f%s\n", label.c_str(), mode,
      n, sum / n, p50, p99, r.answers / n, r.calls / n, r.bytes / n / 1024, r.cpu_seconds / n * 1e6,
      r.errors ? ("  errors " + std::to_string(r.errors) + ": " + r.first_error).c_str() : "");
  report->push_back({{"case", label},
                     {"mode", mode},
                     {"queries", n},
                     {"mean_ms", sum / n},
                     {"p50_ms", p50},
                     {"p99_ms", p99},
                     {"answers", r.answers / n},
                     {"calls", r.calls / n},
                     {"bytes", r.bytes / n},
                     {"cpu_us", r.cpu_seconds / n * 1e6},
                     {"errors", r.errors}});
}

StatusOr<std::vector<std::string>> ReadQueries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read --queries " + path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.pop_back();
    }
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    out.push_back(line.substr(first));
  }
  if (out.empty()) return Status::InvalidArgument(path + " holds no expression");
  return out;
}

}  // namespace

int RunTraversalBench(const Args& args) {
  Status known =
      args.CheckKnown(WithFlags(WithTls({"connect", "store", "mix", "embedded", "starts",
                                         "pulled-starts", "depths", "queries", "seed", "json"}),
                                kTraversalFlags));
  if (!known.ok()) return Fail(known);
  const std::string mix = args.Get("mix").value_or("traversal");
  auto starts_n = args.GetUint("starts", 100);
  auto pulled_n = args.GetUint("pulled-starts", 10);
  auto seed = args.GetUint("seed", 1);
  for (const auto* v : {&starts_n, &pulled_n, &seed}) {
    if (!v->ok()) return Fail(v->status());
  }
  if (*starts_n == 0) return Fail(Status::InvalidArgument("--starts must be >= 1"));
  auto limits = TraversalLimitsFromArgs(args);
  if (!limits.ok()) return Fail(limits.status());

  // The graph: embedded, or a cluster's aggregator.
  std::unique_ptr<GraphApi> graph;
  std::unique_ptr<ClusterMeter> meter;
  uint64_t nodes = 0;
  const bool embedded = args.Has("embedded");
  if (embedded) {
    auto store = args.Get("store");
    if (!store) return Fail(Status::InvalidArgument("--embedded needs --store DIR"));
    GraphOpenOptions open_options;
    open_options.verify_checksums = false;
    auto g = Graph::Open(*store, open_options);
    if (!g.ok()) return Fail(g.status());
    (*g)->set_traversal_limits(*limits);
    nodes = (*g)->manifest().nodes;
    graph = std::move(*g);
  } else {
    std::string endpoint;
    if (auto connect = args.Get("connect")) {
      endpoint = connect->substr(0, connect->find(','));
    } else if (auto store = args.Get("store")) {
      auto aggregators = LocalAggregators(*store);
      if (!aggregators.ok()) return Fail(aggregators.status());
      endpoint = aggregators->front();
    } else {
      return Fail(Status::InvalidArgument("bench needs --connect HOST:PORT or --store DIR"));
    }
    ClientOptions options;
    options.timeout_ms = 600000;
    auto c = Connect(endpoint, options);
    if (!c.ok()) return Fail(c.status());
    auto m = ClusterMeter::Open(**c);
    if (!m.ok()) return Fail(m.status());
    meter = std::make_unique<ClusterMeter>(std::move(*m));
    auto text = (*c)->ServerStatus();
    if (!text.ok()) return Fail(text.status());
    nodes = json::parse(*text, nullptr, false).value("store", json::object()).value("nodes", 0);
    graph = std::move(*c);
  }
  if (nodes == 0) return Fail(Status::InvalidArgument("the store has no nodes"));

  datagen::Rng rng(*seed);
  std::vector<int64_t> starts(*starts_n);
  for (auto& s : starts) s = static_cast<int64_t>(rng.Uniform(nodes));
  const std::vector<int64_t> pulled_starts(
      starts.begin(), starts.begin() + static_cast<long>(std::min(*pulled_n, *starts_n)));
  // The pulled search runs in this process, with generous limits: it measures, it does not serve.
  graph::TraversalLimits pulled_limits;
  pulled_limits.deadline = std::chrono::milliseconds(600000);
  pulled_limits.memory_bytes = uint64_t{4} << 30;

  struct Case {
    std::string label;
    Query shipped, pulled;
  };
  std::vector<Case> cases;
  GraphApi& g = *graph;
  if (mix == "traversal") {
    std::vector<int32_t> depths;
    const std::string list = args.Get("depths").value_or("2,3,5");
    for (size_t pos = 0; pos <= list.size();) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      auto d = ParseUint(list.substr(pos, comma - pos), "--depths");
      if (!d.ok() || *d > graph::kMaxBfsDepth) {
        return Fail(Status::InvalidArgument("--depths: a list of depths 0..10"));
      }
      depths.push_back(static_cast<int32_t>(*d));
      pos = comma + 1;
    }
    for (int32_t d : depths) {
      cases.push_back(
          {"bfs depth " + std::to_string(d),
           [&g, d](int64_t s) -> StatusOr<size_t> {
             ZIPG_ASSIGN_OR_RETURN(auto r, g.Bfs(s, std::nullopt, d, graph::kMaxTraversalLimit));
             return r.size();
           },
           [&g, d, pulled_limits](int64_t s) -> StatusOr<size_t> {
             graph::PulledExpander pulled(&g);
             ZIPG_ASSIGN_OR_RETURN(auto r, graph::RunBfs(pulled, s, std::nullopt, d,
                                                         graph::kMaxTraversalLimit, pulled_limits));
             return r.size();
           }});
    }
  } else if (mix == "rpq") {
    auto path = args.Get("queries");
    if (!path) return Fail(Status::InvalidArgument("--mix rpq needs --queries FILE"));
    auto exprs = ReadQueries(*path);
    if (!exprs.ok()) return Fail(exprs.status());
    for (const std::string& e : *exprs) {
      auto automaton = graph::PathAutomaton::Parse(e);
      if (!automaton.ok()) return Fail(automaton.status());
      cases.push_back(
          {e,
           [&g, e](int64_t s) -> StatusOr<size_t> {
             ZIPG_ASSIGN_OR_RETURN(auto r,
                                   g.Rpq(e, std::vector<int64_t>{s}, graph::kMaxTraversalLimit));
             return r.pairs.size();
           },
           [&g, a = *automaton, pulled_limits](int64_t s) -> StatusOr<size_t> {
             graph::PulledExpander pulled(&g);
             ZIPG_ASSIGN_OR_RETURN(auto r,
                                   graph::RunRpq(pulled, a, std::vector<int64_t>{s}, nullptr,
                                                 graph::kMaxTraversalLimit, pulled_limits));
             return r.pairs.size();
           }});
    }
  } else {
    return Fail(Status::InvalidArgument("unknown traversal mix '" + mix + "'"));
  }

  std::printf(
      "zipg bench --mix %s: %s, %llu nodes; %zu starts (pulled: %zu), one query at a "
      "time\n",
      mix.c_str(), embedded ? "embedded" : "through a cluster",
      static_cast<unsigned long long>(nodes), starts.size(), pulled_starts.size());
  std::printf("  %-22s %-11s %5s %9s %9s %9s %10s %9s %10s %10s\n", "case", "mode", "n", "mean ms",
              "p50 ms", "p99 ms", "answer", "calls/q", "KiB/q", "CPU us/q");
  json report = json::array();
  for (const Case& c : cases) {
    // Shipped over every start, then both over the pulled starts (same answers, compared).
    using Run = std::tuple<std::string, const Query*, const std::vector<int64_t>*>;
    const std::string subset = "shipped/" + std::to_string(pulled_starts.size());
    for (auto [mode, query, from] :
         {Run{"shipped", &c.shipped, &starts}, Run{subset, &c.shipped, &pulled_starts},
          Run{"pulled", &c.pulled, &pulled_starts}}) {
      if (from->empty() || (mode == subset && from->size() == starts.size())) continue;
      auto r = RunCase(*query, *from, meter.get());
      if (!r.ok()) return Fail(r.status());
      Print(c.label, mode.c_str(), std::move(*r), &report);
      std::fflush(stdout);
    }
  }
  if (auto target = JsonTarget(args); target.ok() && *target) {
    std::fflush(stdout);
    Status w = WriteJsonReport(**target, json({{"mix", mix}, {"cases", report}}));
    if (!w.ok()) return Fail(w);
  }
  return 0;
}

}  // namespace zipg::cli
