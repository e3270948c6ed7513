// zipg bench: a closed-loop load driver against a running cluster. N connections (one thread
// each, spread over the cluster's aggregators) issue a query mix for a fixed duration; the report
// gives the dataset and settings, throughput, and p50/p95/p99 latency per operation and overall.
//
// Mixes (ZipG paper Tables 2 and 3; the TAO and read-only LinkBench mixes leave out their
// writes, which are rare in TAO, and renormalize the reads):
//   tao          assoc_range 40.8, obj_get 28.8, assoc_get 15.7, assoc_count 11.7,
//                assoc_time_range 2.8
//   linkbench    assoc_range 50.6, obj_get 12.9, assoc_count 4.9, assoc_get 0.52,
//                assoc_time_range 0.15
//   linkbench-rw the whole LinkBench column of Table 2: the reads above plus assoc_add 9.0,
//                assoc_update 8.0, obj_update 7.4, assoc_delete 3.0, obj_add 2.6, obj_delete 1.0
//   write        assoc_add only (durable write throughput)
// Writes: assoc_add links a Zipf id to a uniform id with a fresh timestamp and a 128-byte
// property (LinkBench's median); obj_add uses fresh ids above the loaded ones; deletes and
// assoc_update prefer what the same connection added. NOT_FOUND / ALREADY_EXISTS answers of the
// conditional writes are counted as "misses", not errors (LinkBench does the same).
//   graphsearch  GS1..GS5 in equal shares: get_neighbor_ids(id), get_neighbor_ids(id, {p1}),
//                get_node_ids({p1, p2}), get_neighbor_ids(id, type), assoc_range(id, type, 0, 1000)
// Node ids are drawn from 0..nodes-1 with a Zipf law (--zipf, hot ids scattered by a fixed
// permutation), as in TAO. Property pairs, edge lists and time windows come from a warm-up sample
// of real nodes and edges, so filters and assoc_get hit existing data.
// --embedded --store DIR runs the read mixes in this process on the store (each connection a
// thread on one shared Graph), without the serving layer. --json FILE writes the report with
// throughput per second and latency histograms (client/bench_report.h, docs/serving.md).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/bench_report.h"
#include "client/bench_util.h"
#include "client/cli.h"
#include "client/client.h"
#include "datagen/random.h"
#include "graph/graph.h"

namespace zipg::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using datagen::Rng;
using datagen::ZipfSampler;

const char kUsage[] =
    "usage:\n"
    "  zipg bench (--connect HOST:PORT[,HOST:PORT...] | --store DIR [--embedded]) [options]\n"
    "options:\n"
    "  --mix tao|linkbench|linkbench-rw|write|graphsearch   query mix (default tao;\n"
    "                    linkbench-rw and write change the data)\n"
    "  --connections N   concurrent connections, one thread each (default 1)\n"
    "  --duration S      measured seconds (default 10)\n"
    "  --warmup S        unmeasured seconds first (default 1)\n"
    "  --types T         edge types 0..T-1 to query (default 5, as zipg gen graph)\n"
    "  --limit L         assoc_range / assoc_time_range limit (default 10)\n"
    "  --zipf E          Zipf exponent of the id choice (default 0.99)\n"
    "  --seed S          (default 1)\n"
    "  --embedded        run in this process on the store of --store DIR, no cluster (read\n"
    "                    mixes only: tao, linkbench, graphsearch)\n"
    "  --json FILE       also write the report as JSON to FILE (- : stdout, one line): the\n"
    "                    table's figures, ops per 1 s interval, latency histograms (buckets\n"
    "                    1 us .. 62 s, 24 per decade) per operation and overall (docs/serving.md)\n"
    "  zipg bench (--connect ... | --store DIR) --mix hot [--node 0] [--type 5] [--queries 200]\n"
    "             [--writes 20000] [--write-batch 100] [--no-compact]\n"
    "      every read of one high-degree node, compressed, after writes to it, after their\n"
    "      compaction and after writes to the compacted edges: p50 / p99 per operation and phase\n"
    "  zipg bench (--connect ... | --store DIR) --mix load [--nodes 0] [--links 1000000]\n"
    "             [--write-batch 100] [--connections 1]\n"
    "      a LinkBench-style bulk load through write batches, nodes (obj_add) then links\n"
    "      (assoc_add): writes/s, batch latency, cluster CPU per write\n"
    "  zipg bench (--connect ... | --store DIR [--embedded]) --mix traversal [--depths 2,3,5]\n"
    "             [--starts 100] [--pulled-starts 10]\n"
    "  zipg bench (--connect ... | --store DIR [--embedded]) --mix rpq --queries FILE\n"
    "             [--starts 100] [--pulled-starts 10]\n"
    "      bfs from random starts at each depth, or each path expression of FILE (one per line)\n"
    "      from random sources: latency, answer size, calls and bytes between processes and\n"
    "      CPU per query, shipped (the operation) vs pulled (get_neighbor_ids per node and\n"
    "      type); --embedded runs in-process on the store (docs/traversal.md)\n"
    "  zipg bench (--connect ... | --store DIR [--embedded [--scan-store DIR2]]) --mix search\n"
    "             [--patterns 20] [--repeat 5] [--connections 4] [--duration 10]\n"
    "             [--sample-ms 300]\n"
    "      search_node_ids with patterns cut from stored values, by hits (1, 10, 100, 10k) and\n"
    "      match: p50 / p99 and CPU per search; through a cluster also searches/s over the\n"
    "      patterns of at most 100 hits; --scan-store: the same on a store built with\n"
    "      --search-index none, and the ratio (docs/search.md)\n"
    "  --json FILE (- : stdout) writes the report of the traversal, rpq and search mixes too;\n"
    "  the search mix's throughput part has the intervals and histogram of the others\n";

struct Op {
  const char* name;
  double share;
};

const std::map<std::string, std::vector<Op>>& Mixes() {
  static const std::map<std::string, std::vector<Op>> mixes = {
      {"tao",
       {{"assoc_range", 40.8},
        {"obj_get", 28.8},
        {"assoc_get", 15.7},
        {"assoc_count", 11.7},
        {"assoc_time_range", 2.8}}},
      {"linkbench",
       {{"assoc_range", 50.6},
        {"obj_get", 12.9},
        {"assoc_count", 4.9},
        {"assoc_get", 0.52},
        {"assoc_time_range", 0.15}}},
      {"linkbench-rw",
       {{"assoc_range", 50.6},
        {"obj_get", 12.9},
        {"assoc_count", 4.9},
        {"assoc_get", 0.52},
        {"assoc_time_range", 0.15},
        {"assoc_add", 9.0},
        {"assoc_update", 8.0},
        {"obj_update", 7.4},
        {"assoc_delete", 3.0},
        {"obj_add", 2.6},
        {"obj_delete", 1.0}}},
      {"write", {{"assoc_add", 1}}},
      {"graphsearch", {{"GS1", 1}, {"GS2", 1}, {"GS3", 1}, {"GS4", 1}, {"GS5", 1}}},
  };
  return mixes;
}

// What the warm-up learned about the data.
struct Sample {
  std::vector<Properties> nodes;                     // property lists of sampled nodes (non-empty)
  std::vector<std::pair<int64_t, int64_t>> records;  // (id, type) with at least one edge
  std::vector<std::vector<int64_t>> record_dsts;     // up to 10 dsts of each record
  std::vector<int64_t> timestamps;
};

struct Settings {
  std::vector<std::string> endpoints;  // empty: embedded
  std::string mix = "tao";
  uint64_t connections = 1, duration = 10, warmup = 1, types = 5, limit = 10, seed = 1;
  double zipf = 0.99;
  uint64_t nodes = 0;
};

class IdChooser {
 public:
  IdChooser(uint64_t nodes, double exponent, uint64_t seed) : zipf_(nodes, exponent), perm_(nodes) {
    Rng rng(seed);
    for (uint64_t i = 0; i < nodes; ++i) perm_[i] = static_cast<int64_t>(i);
    for (uint64_t i = nodes; i > 1; --i) std::swap(perm_[i - 1], perm_[rng.Uniform(i)]);
  }
  int64_t Next(Rng& rng) const { return perm_[zipf_.Next(rng)]; }

 private:
  ZipfSampler zipf_;
  std::vector<int64_t> perm_;
};

struct ThreadResult {
  std::vector<LatencyRecorder> per_op;     // by the op's index in the mix, measured phase only
  std::map<std::string, uint64_t> errors;  // "op CODE" -> count
  uint64_t misses = 0;                     // NOT_FOUND / ALREADY_EXISTS of conditional writes
  std::string first_error;
};

// What one connection wrote, so that its deletes and updates mostly hit live data.
struct WriteState {
  int64_t next_id = 0;  // fresh node ids for obj_add
  std::vector<int64_t> added_nodes;
  std::vector<Edge> added_edges;
  int64_t clock = 0;
};

bool IsConditionalWrite(const std::string& op) {
  return op == "obj_add" || op == "obj_update" || op == "assoc_update";
}

bool IsWrite(const std::string& op) {
  return (op.rfind("obj_", 0) == 0 && op != "obj_get") || op == "assoc_add" ||
         op == "assoc_update" || op == "assoc_delete";
}

class Driver {
 public:
  Driver(const Settings& s, const Sample& sample, const IdChooser& ids)
      : s_(s), sample_(sample), ids_(ids) {
    const auto& ops = Mixes().at(s.mix);
    double total = 0;
    for (const auto& op : ops) total += op.share;
    double acc = 0;
    for (const auto& op : ops) {
      acc += op.share / total;
      cdf_.push_back({acc, op.name});
    }
  }

  const std::vector<std::pair<double, const char*>>& ops() const { return cdf_; }

  // One connection's closed loop on `reads` (and `writes`, null if the mix has none) until
  // `stop`, recording what started from `measure_from` on.
  void Run(size_t thread, GraphApi& reads, GraphWriteApi* writes_to, Clock::time_point measure_from,
           Clock::time_point stop, ThreadResult* out) {
    out->per_op.assign(cdf_.size(), LatencyRecorder(s_.duration));
    Rng rng(s_.seed * 7919 + thread);
    WriteState writes;
    writes.next_id = static_cast<int64_t>(s_.nodes) +
                     (static_cast<int64_t>(thread) + 1) * 1000000000LL +
                     static_cast<int64_t>(s_.seed) * 100000000LL;
    writes.clock = 2000000000LL + static_cast<int64_t>(thread) * 1000000LL;
    for (;;) {
      const double u = rng.NextDouble();
      size_t index = cdf_.size() - 1;
      for (size_t i = 0; i < cdf_.size(); ++i) {
        if (u < cdf_[i].first) {
          index = i;
          break;
        }
      }
      const char* op = cdf_[index].second;
      const auto t0 = Clock::now();
      if (t0 >= stop) break;
      Status st = Execute(reads, writes_to, op, rng, &writes);
      const auto t1 = Clock::now();
      if (t0 < measure_from) continue;
      if ((st.code() == StatusCode::kNotFound || st.code() == StatusCode::kAlreadyExists) &&
          IsConditionalWrite(op)) {
        ++out->misses;
        st = Status::OK();
      }
      if (!st.ok()) {
        out->errors[std::string(op) + " " + std::string(StatusCodeName(st.code()))]++;
        if (out->first_error.empty()) out->first_error = st.ToString();
        continue;
      }
      out->per_op[index].Add(std::chrono::duration<double, std::micro>(t1 - t0).count(),
                             IntervalOf(t1, measure_from, std::chrono::seconds(1)));
    }
  }

 private:
  int64_t Type(Rng& rng) const { return static_cast<int64_t>(rng.Uniform(s_.types)); }
  std::pair<int64_t, int64_t> Window(Rng& rng) const {
    // A 5-day window ending at a sampled timestamp (TAO's recent-edges queries).
    const int64_t hi = sample_.timestamps[rng.Uniform(sample_.timestamps.size())];
    constexpr int64_t kSpan = 5 * 86400;
    // Saturated: a store may hold timestamps near INT64_MIN.
    const int64_t lo = hi < std::numeric_limits<int64_t>::min() + kSpan
                           ? std::numeric_limits<int64_t>::min()
                           : hi - kSpan;
    return {lo, hi};
  }
  const std::pair<std::string, std::string>& Pair(const Properties& p, Rng& rng) const {
    return p[rng.Uniform(p.size())];
  }

  static std::string Payload(Rng& rng) {
    std::string v(128, 'a');
    for (auto& ch : v) ch = static_cast<char>('a' + rng.Uniform(26));
    return v;
  }

  Status Write(GraphWriteApi& c, const std::string& op, int64_t id, Rng& rng, WriteState* w) const {
    if (op == "assoc_add") {
      Edge e{id,
             Type(rng),
             static_cast<int64_t>(rng.Uniform(s_.nodes)),
             ++w->clock,
             {{"data", Payload(rng)}}};
      ZIPG_RETURN_IF_ERROR(c.AssocAdd(e).status());
      if (w->added_edges.size() < 100000) w->added_edges.push_back(std::move(e));
      return Status::OK();
    }
    if (op == "assoc_update") {
      if (w->added_edges.empty()) {
        const size_t r = rng.Uniform(sample_.records.size());
        const auto& dsts = sample_.record_dsts[r];
        return c.AssocUpdate(Edge{sample_.records[r].first,
                                  sample_.records[r].second,
                                  dsts[rng.Uniform(dsts.size())],
                                  ++w->clock,
                                  {{"data", Payload(rng)}}});
      }
      Edge e = w->added_edges[rng.Uniform(w->added_edges.size())];
      e.timestamp = ++w->clock;
      e.properties = {{"data", Payload(rng)}};
      return c.AssocUpdate(e);
    }
    if (op == "assoc_delete") {
      if (w->added_edges.empty()) return c.AssocDelete(id, Type(rng), id).status();
      const size_t k = rng.Uniform(w->added_edges.size());
      const Edge e = w->added_edges[k];
      w->added_edges[k] = w->added_edges.back();
      w->added_edges.pop_back();
      return c.AssocDelete(e.src, e.type, e.dst).status();
    }
    if (op == "obj_add") {
      const int64_t fresh = w->next_id++;
      ZIPG_RETURN_IF_ERROR(c.ObjAdd(fresh, {{"data", Payload(rng)}}));
      w->added_nodes.push_back(fresh);
      return Status::OK();
    }
    if (op == "obj_update") return c.ObjUpdate(id, {{"data", Payload(rng)}});
    if (op == "obj_delete") {
      if (w->added_nodes.empty()) return c.ObjDelete(w->next_id++).status();
      const int64_t victim = w->added_nodes.back();
      w->added_nodes.pop_back();
      return c.ObjDelete(victim).status();
    }
    return Status::Internal("unknown op " + op);
  }

  Status Execute(GraphApi& c, GraphWriteApi* writes, const std::string& op, Rng& rng,
                 WriteState* w) const {
    const int64_t id = ids_.Next(rng);
    if (IsWrite(op)) {
      if (writes == nullptr) return Status::InvalidArgument("embedded mode is read-only");
      return Write(*writes, op, id, rng, w);
    }
    if (op == "obj_get") return c.ObjGet(id).status();
    if (op == "assoc_range") return c.AssocRange(id, Type(rng), 0, s_.limit).status();
    if (op == "assoc_count") return c.AssocCount(id, Type(rng)).status();
    if (op == "assoc_time_range") {
      auto [lo, hi] = Window(rng);
      return c.AssocTimeRange(id, Type(rng), lo, hi, s_.limit).status();
    }
    if (op == "assoc_get") {
      // An existing record and 1-3 of its destinations, over all time.
      const size_t r = rng.Uniform(sample_.records.size());
      const auto& dsts = sample_.record_dsts[r];
      std::vector<int64_t> want;
      for (uint64_t k = 1 + rng.Uniform(3); k > 0; --k)
        want.push_back(dsts[rng.Uniform(dsts.size())]);
      std::sort(want.begin(), want.end());
      want.erase(std::unique(want.begin(), want.end()), want.end());
      return c
          .AssocGet(sample_.records[r].first, sample_.records[r].second, want, INT64_MIN, INT64_MAX)
          .status();
    }
    if (op == "GS1") return c.GetNeighborIds(id, std::nullopt, {}).status();
    if (op == "GS2") {
      const auto& node = sample_.nodes[rng.Uniform(sample_.nodes.size())];
      return c.GetNeighborIds(id, std::nullopt, {Pair(node, rng)}).status();
    }
    if (op == "GS3") {
      // Two properties of one real node: a non-empty answer.
      const auto& node = sample_.nodes[rng.Uniform(sample_.nodes.size())];
      Properties p = {Pair(node, rng), Pair(node, rng)};
      std::sort(p.begin(), p.end());
      p.erase(std::unique(p.begin(), p.end(), [](auto& a, auto& b) { return a.first == b.first; }),
              p.end());
      return c.GetNodeIds(p).status();
    }
    if (op == "GS4") return c.GetNeighborIds(id, Type(rng), {}).status();
    if (op == "GS5") return c.AssocRange(id, Type(rng), 0, 1000).status();
    return Status::Internal("unknown op " + op);
  }

  const Settings& s_;
  const Sample& sample_;
  const IdChooser& ids_;
  std::vector<std::pair<double, const char*>> cdf_;
};

StatusOr<Sample> WarmUpSample(GraphApi& c, const Settings& s, const IdChooser& ids) {
  Sample sample;
  Rng rng(s.seed);
  for (int i = 0; i < 2000 && (sample.nodes.size() < 500 || sample.records.size() < 500); ++i) {
    const int64_t id = ids.Next(rng);
    ZIPG_ASSIGN_OR_RETURN(auto node, c.ObjGet(id));
    if (node && !node->properties.empty()) sample.nodes.push_back(node->properties);
    const int64_t type = static_cast<int64_t>(rng.Uniform(s.types));
    ZIPG_ASSIGN_OR_RETURN(auto edges, c.AssocRange(id, type, 0, 10));
    if (edges.empty()) continue;
    sample.records.push_back({id, type});
    std::vector<int64_t> dsts;
    for (const auto& e : edges) {
      dsts.push_back(e.dst);
      sample.timestamps.push_back(e.timestamp);
    }
    sample.record_dsts.push_back(std::move(dsts));
  }
  if (sample.nodes.empty() || sample.records.empty()) {
    return Status::NotFound("the warm-up found no nodes with properties or no edges of types 0.." +
                            std::to_string(s.types - 1) + " among ids 0.." +
                            std::to_string(s.nodes - 1));
  }
  return sample;
}

size_t ShardServers(const json& status) {
  size_t n = 0;
  for (const auto& m : status.value("servers", json::array())) n += m.value("role", "") == "shard";
  return n;
}

}  // namespace

int RunBench(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"no-compact", "embedded"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  auto json_target = JsonTarget(*args);
  if (!json_target.ok()) return UsageError(json_target.status().message(), kUsage);
  if (auto tls = ApplyTlsArgs(*args); !tls.ok()) return UsageError(tls.status().message(), kUsage);
  if (auto mix = args->Get("mix"); mix && (*mix == "traversal" || *mix == "rpq")) {
    return RunTraversalBench(*args);
  }
  if (args->Get("mix") == "search") return RunSearchBench(*args);
  Settings s;
  const bool embedded = args->Has("embedded");
  if (embedded) {
    if (!args->Has("store")) return UsageError("--embedded needs --store DIR", kUsage);
  } else if (auto connect = args->Get("connect")) {
    std::string list = *connect;
    for (size_t pos = 0; pos <= list.size();) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      s.endpoints.push_back(list.substr(pos, comma - pos));
      pos = comma + 1;
    }
  } else if (auto store = args->Get("store")) {
    auto aggregators = LocalAggregators(*store);
    if (!aggregators.ok()) return Fail(aggregators.status());
    s.endpoints = std::move(*aggregators);
  } else {
    return UsageError("bench needs --connect HOST:PORT or --store DIR", kUsage);
  }
  s.mix = args->Get("mix").value_or("tao");
  if ((s.mix == "hot" || s.mix == "load") && embedded) {
    return UsageError("--mix " + s.mix + " runs against a cluster, not --embedded", kUsage);
  }
  if (s.mix == "hot") return RunHotBench(s.endpoints, *args);
  if (s.mix == "load") return RunLoadBench(s.endpoints, *args);
  if (!Mixes().count(s.mix)) return UsageError("unknown mix '" + s.mix + "'", kUsage);
  for (const Op& op : Mixes().at(s.mix)) {
    if (embedded && IsWrite(op.name)) {
      return UsageError("--mix " + s.mix + " writes; the embedded store is read-only", kUsage);
    }
  }
  Status known =
      args->CheckKnown(WithTls({"connect", "store", "embedded", "mix", "connections", "duration",
                                "warmup", "types", "limit", "zipf", "seed", "json"}));
  if (!known.ok()) return UsageError(known.message(), kUsage);
  for (auto [name, field, lo, hi] : {std::tuple{"connections", &s.connections, 1, 1024},
                                     {"duration", &s.duration, 1, 86400},
                                     {"warmup", &s.warmup, 0, 3600},
                                     {"types", &s.types, 1, 1 << 20},
                                     {"limit", &s.limit, 1, 1 << 20},
                                     {"seed", &s.seed, 0, INT32_MAX}}) {
    auto v = args->GetUint(name, *field);
    if (!v.ok() || *v < static_cast<uint64_t>(lo) || *v > static_cast<uint64_t>(hi)) {
      return UsageError(
          std::string("--") + name + " must be " + std::to_string(lo) + ".." + std::to_string(hi),
          kUsage);
    }
    *field = *v;
  }
  if (auto z = args->Get("zipf")) {
    char* end = nullptr;
    s.zipf = std::strtod(z->c_str(), &end);
    if (end == z->c_str() || *end != '\0' || s.zipf < 0 || s.zipf > 5) {
      return UsageError("--zipf must be a number in 0..5", kUsage);
    }
  }

  // The graph: the store in this process, or the cluster (one connection per thread, later).
  std::unique_ptr<Graph> local;
  std::unique_ptr<Client> client;
  json dataset;  // dir, nodes, edges, shards
  std::string servers;
  if (embedded) {
    GraphOpenOptions open_options;
    open_options.verify_checksums = false;
    auto g = Graph::Open(*args->Get("store"), open_options);
    if (!g.ok()) return Fail(g.status());
    local = std::move(*g);
    const auto& m = local->manifest();
    dataset = {
        {"dir", *args->Get("store")}, {"nodes", m.nodes}, {"edges", m.edges}, {"shards", m.shards}};
    servers = "in this process";
  } else {
    auto c = Connect(s.endpoints[0]);
    if (!c.ok()) return Fail(c.status());
    client = std::move(*c);
    auto status_text = client->ServerStatus();
    if (!status_text.ok()) return Fail(status_text.status());
    const json status = json::parse(*status_text, nullptr, false);
    if (status.is_discarded() || !status.value("healthy", false)) {
      return Fail(Status::Unavailable("the cluster is not healthy (zipg status --connect " +
                                      s.endpoints[0] + ")"));
    }
    const json store = status.value("store", json::object());
    dataset = {{"dir", store.value("dir", "?")},
               {"nodes", store.value("nodes", uint64_t{0})},
               {"edges", store.value("edges", uint64_t{0})},
               {"shards", status.value("num_shards", 0)}};
    servers = "on " + std::to_string(ShardServers(status)) + " shard servers";
  }
  GraphApi& graph = local ? static_cast<GraphApi&>(*local) : *client;
  s.nodes = dataset["nodes"].get<uint64_t>();
  if (s.nodes == 0) return Fail(Status::NotFound("the store has no nodes"));
  const IdChooser ids(s.nodes, s.zipf, s.seed);
  auto sample = WarmUpSample(graph, s, ids);
  if (!sample.ok()) return Fail(sample.status());

  std::cout << "zipg bench: mix " << s.mix << ", " << s.connections
            << (embedded
                    ? " threads on the embedded store"
                    : " connections over " + std::to_string(s.endpoints.size()) + " aggregators")
            << ", " << s.duration << " s (+" << s.warmup << " s warm-up)\n"
            << "dataset: " << dataset["dir"].get<std::string>() << ", " << s.nodes << " nodes, "
            << dataset["edges"] << " edges, " << dataset["shards"] << " shards " << servers
            << "; ids 0.." << s.nodes - 1 << " Zipf " << s.zipf << ", types 0.." << s.types - 1
            << ", limit " << s.limit << "\n"
            << "warm-up sample: " << sample->nodes.size() << " nodes, " << sample->records.size()
            << " edge records\n"
            << std::flush;  // std::cout is not synced with printf (zipg_main.cc)

  Driver driver(s, *sample, ids);
  std::vector<ThreadResult> results(s.connections);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const auto measure_from = start + std::chrono::seconds(s.warmup);
  const auto stop = measure_from + std::chrono::seconds(s.duration);
  // CPU over the measured seconds: this process (the clients) and, through a cluster, every
  // server the status document names on this machine, from /proc.
  struct CpuSample {
    double own = 0;
    std::map<std::string, ProcessSample> servers;
    std::map<std::string, std::string> roles;
    bool ok = false;
  } cpu_before, cpu_after;
  auto take_cpu = [&](CpuSample* out) {
    out->own = OwnCpuSeconds();
    if (!client) {
      out->ok = true;
      return;
    }
    auto text = client->ServerStatus();
    if (!text.ok()) return;
    const json status = json::parse(*text, nullptr, false);
    if (status.is_discarded()) return;
    out->servers = SampleProcesses(status);
    out->roles = RolesOf(status);
    out->ok = true;
  };
  std::thread cpu_monitor([&] {
    std::this_thread::sleep_until(measure_from);
    take_cpu(&cpu_before);
    std::this_thread::sleep_until(stop);
    take_cpu(&cpu_after);
  });
  for (size_t t = 0; t < s.connections; ++t) {
    threads.emplace_back([&, t] {
      if (local) {
        driver.Run(t, *local, nullptr, measure_from, stop, &results[t]);
        return;
      }
      auto c = Connect(s.endpoints[t % s.endpoints.size()]);
      if (!c.ok()) {
        results[t].errors["connect " + std::string(StatusCodeName(c.status().code()))]++;
        results[t].first_error = c.status().ToString();
        return;
      }
      driver.Run(t, **c, c->get(), measure_from, stop, &results[t]);
    });
  }
  for (auto& t : threads) t.join();
  cpu_monitor.join();
  const double seconds = static_cast<double>(s.duration);

  // Merged per operation and overall.
  std::map<std::string, LatencyRecorder> per_op;
  LatencyRecorder all(s.duration);
  std::map<std::string, uint64_t> errors;
  std::string first_error;
  uint64_t misses = 0;
  for (auto& r : results) {
    misses += r.misses;
    for (size_t i = 0; i < r.per_op.size(); ++i) {
      if (r.per_op[i].count() == 0) continue;
      per_op[driver.ops()[i].second].Merge(r.per_op[i]);
      all.Merge(r.per_op[i]);
    }
    for (auto& [k, n] : r.errors) errors[k] += n;
    if (first_error.empty()) first_error = r.first_error;
  }
  json report = {{"mix", s.mix},
                 {"mode", embedded ? "embedded" : "cluster"},
                 {"connections", s.connections},
                 {"duration_s", s.duration},
                 {"warmup_s", s.warmup},
                 {"nodes", s.nodes},
                 {"dataset", dataset},
                 {"zipf", s.zipf},
                 {"seed", s.seed},
                 {"ops", json::object()}};
  std::printf("%-18s %10s %10s %10s %10s %10s\n", "operation", "ops/s", "p50 us", "p95 us",
              "p99 us", "share");
  NamedRecorders named;
  auto line = [&](const std::string& name, LatencyRecorder& r) {
    const double rate = static_cast<double>(r.count()) / seconds;
    const double p50 = r.Quantile(0.50), p95 = r.Quantile(0.95), p99 = r.Quantile(0.99);
    std::printf("%-18s %10.0f %10.0f %10.0f %10.0f %9.1f%%\n", name.c_str(), rate, p50, p95, p99,
                all.count() == 0
                    ? 0.0
                    : 100.0 * static_cast<double>(r.count()) / static_cast<double>(all.count()));
    report["ops"][name] = {{"ops_per_s", rate}, {"p50_us", p50},      {"p95_us", p95},
                           {"p99_us", p99},     {"count", r.count()}, {"max_us", r.Max()}};
    named.push_back({name, &r});
  };
  for (auto& [op, r] : per_op) line(op, r);
  line("overall", all);
  // Reads and writes apart, when the mix has both (no share column: not operations).
  LatencyRecorder reads(s.duration), writes(s.duration);
  for (auto& [op, r] : per_op) (IsWrite(op) ? writes : reads).Merge(r);
  if (reads.count() > 0 && writes.count() > 0) {
    report["kinds"] = json::object();
    for (auto [name, r] : {std::pair<const char*, LatencyRecorder*>{"reads", &reads},
                           {"writes", &writes}}) {
      const double rate = static_cast<double>(r->count()) / seconds;
      const double p50 = r->Quantile(0.50), p95 = r->Quantile(0.95), p99 = r->Quantile(0.99);
      std::printf("%-18s %10.0f %10.0f %10.0f %10.0f   (all %s)\n", name, rate, p50, p95, p99,
                  name);
      report["kinds"][name] = {{"ops_per_s", rate}, {"p50_us", p50},        {"p95_us", p95},
                               {"p99_us", p99},     {"count", r->count()}, {"max_us", r->Max()}};
    }
  }
  // CPU per operation, by role and by process.
  if (cpu_before.ok && cpu_after.ok && all.count() > 0) {
    const double ops = static_cast<double>(all.count());
    auto per_op_us = [&](double cpu_seconds) { return cpu_seconds / ops * 1e6; };
    std::map<std::string, double> by_role, by_process;
    double cluster = 0;
    for (const auto& [name, after] : cpu_after.servers) {
      auto it = cpu_before.servers.find(name);
      if (it == cpu_before.servers.end()) continue;
      const double used = after.cpu_seconds - it->second.cpu_seconds;
      by_process[name] = per_op_us(used);
      by_role[cpu_after.roles.count(name) ? cpu_after.roles.at(name) : "?"] += per_op_us(used);
      cluster += per_op_us(used);
    }
    const double own = per_op_us(cpu_after.own - cpu_before.own);
    std::printf("cpu us per operation: client %.1f", own);
    for (const auto& [role, us] : by_role) std::printf(" | %s %.1f", role.c_str(), us);
    if (client) std::printf(" | cluster %.1f", cluster);
    std::printf("\n");
    if (!by_process.empty()) {
      std::printf("  by process:");
      for (const auto& [name, us] : by_process) std::printf(" %s %.1f", name.c_str(), us);
      std::printf("  (servers on this machine; /proc, 10 ms ticks)\n");
    }
    report["cpu_us_per_op"] = {{"client", own},
                               {"cluster", cluster},
                               {"by_role", by_role},
                               {"by_process", by_process}};
  }
  std::fflush(stdout);
  uint64_t error_count = 0;
  for (const auto& [k, n] : errors) {
    std::cout << "errors: " << k << " x" << n << "\n";
    error_count += n;
  }
  if (!first_error.empty()) std::cout << "first error: " << first_error << "\n";
  report["errors"] = error_count;
  report["misses"] = misses;
  if (misses > 0) {
    std::cout << "conditional writes that missed (NOT_FOUND/ALREADY_EXISTS): " << misses << "\n";
  }
  if (*json_target) {
    report["intervals"] = IntervalsJson(1, named);
    report["latency"] = LatencyJson(named);
    std::cout << std::flush;
    if (Status w = WriteJsonReport(**json_target, report); !w.ok()) return Fail(w);
  }
  return error_count == 0 ? kExitOk : kExitFailure;
}

}  // namespace zipg::cli
