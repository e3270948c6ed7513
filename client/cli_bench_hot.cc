// Two drivers of `zipg bench` for issue 19 (docs/writes.md, "Reads of a written node"):
//
// --mix hot: the latency of every read of one high-degree node (e.g. `zipg gen graph
//   --hot-edges 1000000`'s node 0, type 5), measured as the node is compressed, after writes to
//   it (new edges, upserts and deletes, sent as write batches), after those writes are
//   compacted into a log shard, and after more writes that upsert and delete that log shard's
//   edges. One connection, queries one after the other; p50 / p99 per operation and phase, and
//   the cluster processes' CPU and resident memory.
// --mix load: a LinkBench-style bulk load: `--links` assoc_adds (fresh sources, 10 links each,
//   uniform destinations, a 128-byte payload) sent as write batches of `--write-batch` through
//   `--connections` connections; links per second (durable: each batch is acknowledged only
//   once logged with fsync), batch latency and CPU per link.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <thread>

#include "client/bench_util.h"
#include "client/cli.h"
#include "datagen/random.h"

namespace zipg::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using datagen::Rng;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

StatusOr<json> Status_(Client& c) {
  ZIPG_ASSIGN_OR_RETURN(std::string text, c.ServerStatus());
  json status = json::parse(text, nullptr, false);
  if (status.is_discarded()) return Status::Internal("status is not JSON");
  return status;
}

// LinkBench's node data: 1024 random bytes, as a client would send them in a UTF-8 value
// (base64: 1368 characters).
std::string NodeData(Rng& rng) {
  static constexpr char kBase64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string v(1368, 'A');
  for (auto& ch : v) ch = kBase64[rng.Uniform(64)];
  return v;
}

std::string Payload(Rng& rng) {
  std::string v(128, 'a');
  for (auto& ch : v) ch = static_cast<char>('a' + rng.Uniform(26));
  return v;
}

// What the hot driver knows of the node: sampled edges and the time span.
struct HotSample {
  int64_t count = 0;
  std::vector<Edge> edges;  // spread over the whole record
  int64_t newest = 0, oldest = 0;
};

StatusOr<HotSample> SampleHot(Client& c, int64_t node, int64_t type, Rng& rng) {
  HotSample h;
  ZIPG_ASSIGN_OR_RETURN(h.count, c.AssocCount(node, type));
  if (h.count == 0) {
    return Status::NotFound("node " + std::to_string(node) + " has no edges of type " +
                            std::to_string(type));
  }
  for (int i = 0; i < 200; ++i) {
    const int64_t pos = static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(h.count)));
    ZIPG_ASSIGN_OR_RETURN(auto e, c.AssocRange(node, type, pos, 1));
    if (!e.empty()) h.edges.push_back(e[0]);
  }
  ZIPG_ASSIGN_OR_RETURN(auto first, c.AssocRange(node, type, 0, 1));
  ZIPG_ASSIGN_OR_RETURN(auto last, c.AssocRange(node, type, h.count - 1, 1));
  if (first.empty() || last.empty()) return Status::Internal("the node's edges moved");
  h.newest = first[0].timestamp;
  h.oldest = last[0].timestamp;
  return h;
}

struct HotOp {
  std::string name;
  bool target;  // under the 5 ms target (narrow windows, small limits)
  std::function<Status(Client&, Rng&)> run;
};

std::vector<HotOp> HotOps(int64_t node, int64_t type, const HotSample& h) {
  std::vector<HotOp> ops;
  ops.push_back({"assoc_count", true, [=](Client& c, Rng&) { return c.AssocCount(node, type).status(); }});
  for (int64_t pos : {int64_t{0}, int64_t{10000}, int64_t{500000}}) {
    const int64_t at = std::min(pos, std::max<int64_t>(0, h.count - 10));
    ops.push_back({"assoc_range pos " + std::to_string(at) + " limit 10", true,
                   [=](Client& c, Rng&) { return c.AssocRange(node, type, at, 10).status(); }});
  }
  ops.push_back({"assoc_time_range 1 hour limit 10", true, [=](Client& c, Rng& rng) {
                   const Edge& e = h.edges[rng.Uniform(h.edges.size())];
                   return c.AssocTimeRange(node, type, e.timestamp - 3600, e.timestamp, 10)
                       .status();
                 }});
  ops.push_back({"assoc_time_range all limit 10", true, [=](Client& c, Rng&) {
                   return c.AssocTimeRange(node, type, kMin, kMax, 10).status();
                 }});
  ops.push_back({"assoc_time_range 1 day limit 1000", false, [=](Client& c, Rng& rng) {
                   const Edge& e = h.edges[rng.Uniform(h.edges.size())];
                   return c.AssocTimeRange(node, type, e.timestamp - 86400, e.timestamp, 1000)
                       .status();
                 }});
  ops.push_back({"assoc_get 1 id", true, [=](Client& c, Rng& rng) {
                   const Edge& e = h.edges[rng.Uniform(h.edges.size())];
                   return c.AssocGet(node, type, {e.dst}, kMin, kMax).status();
                 }});
  ops.push_back({"get_edge_range 1 hour", true, [=](Client& c, Rng& rng) {
                   const Edge& e = h.edges[rng.Uniform(h.edges.size())];
                   return c.GetEdgeRange(node, type, e.timestamp - 3600, e.timestamp).status();
                 }});
  return ops;
}

// p50 / p99 in ms of each op, `queries` runs each, one after the other.
StatusOr<std::vector<std::pair<double, double>>> MeasureHot(Client& c, std::vector<HotOp>& ops,
                                                            uint64_t queries, Rng& rng) {
  std::vector<std::pair<double, double>> out;
  for (auto& op : ops) {
    std::vector<double> ms;
    for (uint64_t q = 0; q < queries; ++q) {
      const auto t0 = Clock::now();
      ZIPG_RETURN_IF_ERROR(op.run(c, rng));
      ms.push_back(Ms(Clock::now() - t0));
    }
    out.push_back({Percentile(ms, 0.5), Percentile(ms, 0.99)});
  }
  return out;
}

}  // namespace

int RunHotBench(const std::vector<std::string>& endpoints, const Args& args) {
  Status known = args.CheckKnown({"connect", "store", "mix", "node", "type", "queries", "writes",
                                  "write-batch", "seed", "no-compact"});
  if (!known.ok()) return Fail(known);
  auto node = args.GetUint("node", 0);
  auto type = args.GetUint("type", 5);
  auto queries = args.GetUint("queries", 200);
  auto writes = args.GetUint("writes", 20000);
  auto batch = args.GetUint("write-batch", 100);
  auto seed = args.GetUint("seed", 1);
  for (const auto* v : {&node, &type, &queries, &writes, &batch, &seed}) {
    if (!v->ok()) return Fail(v->status());
  }
  if (*queries == 0 || *batch == 0) return Fail(Status::InvalidArgument("--queries and --write-batch must be >= 1"));
  ClientOptions options;
  options.timeout_ms = 600000;
  auto client = Connect(endpoints[0], options);
  if (!client.ok()) return Fail(client.status());
  Client& c = **client;
  Rng rng(*seed);
  const int64_t id = static_cast<int64_t>(*node), t = static_cast<int64_t>(*type);
  auto sample = SampleHot(c, id, t, rng);
  if (!sample.ok()) return Fail(sample.status());
  std::vector<HotOp> ops = HotOps(id, t, *sample);
  std::printf("zipg bench --mix hot: node %lld type %lld, %lld edges, timestamps %lld..%lld; %llu "
              "queries per operation and phase, one connection\n",
              static_cast<long long>(id), static_cast<long long>(t),
              static_cast<long long>(sample->count), static_cast<long long>(sample->oldest),
              static_cast<long long>(sample->newest), static_cast<unsigned long long>(*queries));

  std::vector<std::string> phases;
  std::vector<std::vector<std::pair<double, double>>> results;
  auto measure = [&](const std::string& phase) -> Status {
    ZIPG_ASSIGN_OR_RETURN(json before, Status_(c));
    const auto procs0 = SampleProcesses(before);
    const auto t0 = Clock::now();
    ZIPG_ASSIGN_OR_RETURN(auto r, MeasureHot(c, ops, *queries, rng));
    const double seconds = Ms(Clock::now() - t0) / 1000;
    ZIPG_ASSIGN_OR_RETURN(json after, Status_(c));
    const auto procs1 = SampleProcesses(after);
    uint64_t rss = 0;
    for (const auto& [name, p] : procs1) rss = std::max(rss, p.rss_bytes);
    const double reads = static_cast<double>(*queries * ops.size());
    std::printf("  phase \"%s\": %.0f reads in %.1f s, cluster CPU %.0f us per read, largest "
                "server RSS %.0f MiB\n",
                phase.c_str(), reads, seconds, CpuSince(procs0, procs1) / reads * 1e6,
                static_cast<double>(rss) / (1 << 20));
    phases.push_back(phase);
    results.push_back(std::move(r));
    return Status::OK();
  };
  if (Status s = measure("compressed"); !s.ok()) return Fail(s);

  // `count` writes to the node: new edges, upserts (new timestamps) and deletes of edges of
  // `pool`; the new edges' dsts (from `next_dst` on) are appended to `created`.
  auto write_round = [&](std::vector<int64_t> pool, int64_t next_dst,
                         std::vector<int64_t>* created) -> Status {
    std::vector<Write> all;
    const int64_t span = std::max<int64_t>(1, sample->newest - sample->oldest);
    for (uint64_t k = 0; k < *writes; ++k) {
      const uint64_t x = rng.Uniform(100);
      const int64_t ts = sample->oldest + static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(span)));
      if (x < 60 || pool.empty()) {
        all.push_back({Write::Op::kAssocAdd, id, t, next_dst, ts, {{"data", Payload(rng)}}});
        created->push_back(next_dst++);
      } else if (x < 85) {
        const int64_t dst = pool[rng.Uniform(pool.size())];
        all.push_back({Write::Op::kAssocAdd, id, t, dst, ts, {{"data", Payload(rng)}}});
      } else {
        const size_t i = rng.Uniform(pool.size());
        all.push_back({Write::Op::kAssocDelete, id, t, pool[i], 0, {}});
        pool[i] = pool.back();
        pool.pop_back();
      }
    }
    const auto t0 = Clock::now();
    uint64_t failed = 0;
    for (size_t at = 0; at < all.size(); at += *batch) {
      const std::vector<Write> chunk(all.begin() + static_cast<long>(at),
                                     all.begin() + static_cast<long>(std::min(all.size(), at + *batch)));
      for (const auto& o : c.WriteBatch(chunk)) failed += !o.ok();
    }
    const double seconds = Ms(Clock::now() - t0) / 1000;
    std::printf("  %zu writes to the node (60%% new, 25%% upserts, 15%% deletes) in batches of "
                "%llu: %.1f s, %.0f writes/s, %llu failed\n",
                all.size(), static_cast<unsigned long long>(*batch), seconds,
                static_cast<double>(all.size()) / seconds, static_cast<unsigned long long>(failed));
    if (failed > 0) return Status::Internal("writes failed");
    ZIPG_ASSIGN_OR_RETURN(sample, SampleHot(c, id, t, rng));
    ops = HotOps(id, t, *sample);
    return Status::OK();
  };
  if (*writes > 0) {
    // Round one upserts and deletes sampled edges (mostly compressed ones).
    std::vector<int64_t> pool, created;
    for (const Edge& e : sample->edges) pool.push_back(e.dst);
    if (Status s = write_round(pool, int64_t{1} << 40, &created); !s.ok()) return Fail(s);
    if (Status s = measure("after writes"); !s.ok()) return Fail(s);
    if (!args.Has("no-compact")) {
      const auto c0 = Clock::now();
      auto summary = CompactAndWait(c, options);
      if (!summary.ok()) return Fail(summary.status());
      std::printf("  compaction: %.1f s: %s\n", Ms(Clock::now() - c0) / 1000,
                  summary->dump().c_str());
      if (Status s = measure("after compaction"); !s.ok()) return Fail(s);
      // Round two upserts and deletes round one's new edges, now in a log shard (recent edges
      // are the hot ones, as in LinkBench), so the log shard's deletion set grows too.
      std::vector<int64_t> more;
      if (Status s = write_round(created, (int64_t{1} << 40) + static_cast<int64_t>(*writes), &more);
          !s.ok()) {
        return Fail(s);
      }
      if (Status s = measure("after more writes"); !s.ok()) return Fail(s);
    }
  }

  std::printf("\n%-36s", "operation (ms, p50 / p99)");
  for (const auto& p : phases) std::printf(" %22s", p.c_str());
  std::printf("\n");
  bool met = true;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::printf("%-36s", ops[i].name.c_str());
    for (const auto& r : results) {
      const bool ok = !ops[i].target || r[i].second < 5.0;
      met = met && ok;
      std::printf(" %9.2f / %8.2f %s", r[i].first, r[i].second, ops[i].target ? (ok ? "ok" : "!!") : "  ");
    }
    std::printf("\n");
  }
  std::printf("target (p99 < 5 ms for narrow windows and small limits, marked ok / !!): %s\n",
              met ? "met" : "NOT met");
  return kExitOk;
}

int RunLoadBench(const std::vector<std::string>& endpoints, const Args& args) {
  Status known = args.CheckKnown({"connect", "store", "mix", "links", "nodes", "write-batch",
                                  "connections", "seed"});
  if (!known.ok()) return Fail(known);
  auto links = args.GetUint("links", 1000000);
  auto node_count = args.GetUint("nodes", 0);
  auto batch = args.GetUint("write-batch", 100);
  auto connections = args.GetUint("connections", 1);
  auto seed = args.GetUint("seed", 1);
  for (const auto* v : {&links, &node_count, &batch, &connections, &seed}) {
    if (!v->ok()) return Fail(v->status());
  }
  if (*batch == 0 || *connections == 0 || *connections > 1024) {
    return Fail(Status::InvalidArgument("--write-batch must be >= 1, --connections 1..1024"));
  }
  auto probe = Connect(endpoints[0]);
  if (!probe.ok()) return Fail(probe.status());
  auto status = Status_(**probe);
  if (!status.ok()) return Fail(status.status());
  const uint64_t nodes = std::max<uint64_t>(1, status->value("store", json::object()).value("nodes", uint64_t{1}));
  std::printf("zipg bench --mix load: %llu nodes (1368-byte data), then %llu links (128-byte "
              "payloads), in batches "
              "of %llu through %llu connection(s)\n",
              static_cast<unsigned long long>(*node_count), static_cast<unsigned long long>(*links),
              static_cast<unsigned long long>(*batch),
              static_cast<unsigned long long>(*connections));

  // One phase: `count` writes, write i made by make(i, rng), each connection sending its share
  // in batches. Prints its line; the number of failed writes.
  auto phase = [&](const char* what, uint64_t count,
                   const std::function<Write(uint64_t, uint64_t, Rng&)>& make) -> StatusOr<uint64_t> {
    ZIPG_ASSIGN_OR_RETURN(json before, Status_(**probe));
    const auto procs0 = SampleProcesses(before);
    std::vector<std::vector<double>> latency(*connections);
    std::vector<uint64_t> failed(*connections, 0);
    std::vector<std::string> first_error(*connections);
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (uint64_t k = 0; k < *connections; ++k) {
      threads.emplace_back([&, k] {
        auto c = Connect(endpoints[k % endpoints.size()]);
        if (!c.ok()) {
          failed[k] = count;
          first_error[k] = c.status().ToString();
          return;
        }
        Rng rng(*seed * 7919 + k);
        std::vector<Write> chunk;
        for (uint64_t i = k; i < count; i += *connections) {
          chunk.push_back(make(k, i, rng));
          if (chunk.size() == *batch || i + *connections >= count) {
            const auto b0 = Clock::now();
            for (const auto& o : (*c)->WriteBatch(chunk)) {
              if (!o.ok()) {
                ++failed[k];
                if (first_error[k].empty()) first_error[k] = o.status().ToString();
              }
            }
            latency[k].push_back(Ms(Clock::now() - b0));
            chunk.clear();
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    const double seconds = Ms(Clock::now() - t0) / 1000;
    ZIPG_ASSIGN_OR_RETURN(json after, Status_(**probe));
    const double cpu = CpuSince(procs0, SampleProcesses(after));
    std::vector<double> all;
    uint64_t failures = 0;
    for (uint64_t k = 0; k < *connections; ++k) {
      all.insert(all.end(), latency[k].begin(), latency[k].end());
      failures += failed[k];
    }
    std::printf("  %s: %llu in %.1f s: %.0f/s; batch latency p50 %.2f ms, p99 %.2f ms; cluster "
                "CPU %.1f us each; %llu failed\n",
                what, static_cast<unsigned long long>(count), seconds,
                static_cast<double>(count) / seconds, Percentile(all, 0.5), Percentile(all, 0.99),
                cpu / static_cast<double>(std::max<uint64_t>(count, 1)) * 1e6,
                static_cast<unsigned long long>(failures));
    for (const auto& e : first_error) {
      if (!e.empty()) {
        std::printf("  first error: %s\n", e.c_str());
        break;
      }
    }
    return failures;
  };
  uint64_t failures = 0;
  if (*node_count > 0) {
    // LinkBench's node load (its NodeLoader): fresh ids (LinkBench's store assigns them; here
    // each connection numbers its own range), type 2048, version 1, a time and 1024 bytes of
    // data.
    auto made = phase("nodes", *node_count, [&](uint64_t k, uint64_t i, Rng& rng) {
      const int64_t id = (int64_t{1} << 41) + static_cast<int64_t>(k) * (int64_t{1} << 36) +
                         static_cast<int64_t>(i);
      return Write{Write::Op::kObjAdd, id, 0, 0, 0,
                   {{"type", "2048"},
                    {"version", "1"},
                    {"time", std::to_string(1500000000 + i)},
                    {"data", NodeData(rng)}}};
    });
    if (!made.ok()) return Fail(made.status());
    failures += *made;
  }
  if (*links > 0) {
    // Each connection loads its own range of fresh sources, 10 links each.
    auto made = phase("links", *links, [&](uint64_t k, uint64_t i, Rng& rng) {
      const int64_t base = (int64_t{1} << 42) + static_cast<int64_t>(k) * (int64_t{1} << 36);
      return Write{Write::Op::kAssocAdd, base + static_cast<int64_t>(i / 10), 0,
                   static_cast<int64_t>(rng.Uniform(nodes)), 1500000000 + static_cast<int64_t>(i),
                   {{"data", Payload(rng)}}};
    });
    if (!made.ok()) return Fail(made.status());
    failures += *made;
  }
  return failures == 0 ? kExitOk : kExitFailure;
}

}  // namespace zipg::cli
