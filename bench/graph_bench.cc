// graph_bench: size and in-process latency of the graph layout on a generated TAO-like graph.
//
// Generates (or reuses) nodes.csv / edges.csv in --dir, compresses them in a child process (wall
// time and peak RSS), prints raw vs stored bytes with the NodeFile / EdgeFile / metadata breakdown,
// then opens the store and measures p50/p99 of the operations on uniformly chosen ids,
// checking answers against the loaded CSV as it goes.
//
//   graph_bench [--nodes N] [--degree D] [--seed S] [--dir DIR] [--shards N] [--queries Q]
//               [--sa-rate N --isa-rate N --psi-block N --edge-sa-rate N ...] [--skip-build]

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "client/cli.h"
#include "datagen/random.h"
#include "datagen/tao.h"
#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/input.h"

namespace {

using namespace zipg;
using zipg::bench::Latency;
using zipg::bench::Measure;
using zipg::bench::RunInChild;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "graph_bench: %s\n", what.c_str());
  std::exit(1);
}
template <typename T>
T Check(StatusOr<T> v, const char* what) {
  if (!v.ok()) Die(std::string(what) + ": " + v.status().ToString());
  return std::move(v.value());
}

void PrintLatency(const char* name, const Latency& l) {
  std::printf("  %-34s p50 %9.1f us   p99 %9.1f us   mean %9.1f us\n", name, l.p50_us, l.p99_us,
              l.mean_us);
}

}  // namespace

int main(int argc, char** argv) {
  auto args_or = cli::Args::Parse(argc, argv, 1, {"skip-build"});
  if (!args_or.ok()) Die(args_or.status().message());
  const cli::Args& args = *args_or;
  auto uint = [&](const char* name, uint64_t fallback) {
    return Check(args.GetUint(name, fallback), name);
  };
  datagen::TaoGraphOptions gen;
  gen.nodes = uint("nodes", 100000);
  gen.seed = uint("seed", 1);
  gen.average_degree = static_cast<double>(uint("degree", 10));
  const std::string dir = args.Get("dir").value_or("/tmp/zipg-graph-bench");
  const uint64_t queries = uint("queries", 2000);
  graph::CompressOptions options;
  options.shards = static_cast<uint32_t>(uint("shards", 2));
  options.node_file.sa_sampling_rate = uint("sa-rate", options.node_file.sa_sampling_rate);
  options.node_file.isa_sampling_rate = uint("isa-rate", options.node_file.isa_sampling_rate);
  options.node_file.psi_block_size = uint("psi-block", options.node_file.psi_block_size);
  options.edge_file.sa_sampling_rate = uint("edge-sa-rate", options.edge_file.sa_sampling_rate);
  options.edge_file.isa_sampling_rate = uint("edge-isa-rate", options.edge_file.isa_sampling_rate);
  options.edge_file.psi_block_size = uint("edge-psi-block", options.edge_file.psi_block_size);
  options.overwrite = true;

  std::filesystem::create_directories(dir);
  const std::string nodes_csv = dir + "/nodes-" + std::to_string(gen.nodes) + ".csv";
  const std::string edges_csv = dir + "/edges-" + std::to_string(gen.nodes) + ".csv";
  const std::string store = dir + "/store";
  if (!std::filesystem::exists(nodes_csv) || !std::filesystem::exists(edges_csv)) {
    std::printf("generating %llu nodes into %s ...\n", static_cast<unsigned long long>(gen.nodes),
                dir.c_str());
    if (Status s = datagen::WriteTaoGraph(gen, nodes_csv, edges_csv); !s.ok()) Die(s.ToString());
  }

  if (!args.Has("skip-build")) {
    graph::CompressReport report;
    auto child = RunInChild([&] {
      graph::CompressInputs inputs{nodes_csv, edges_csv, graph::InputFormat::kCsv};
      Status s = graph::CompressFiles(inputs, store, options, {}, &report);
      if (!s.ok()) std::fprintf(stderr, "compress: %s\n", s.ToString().c_str());
      if (s.ok()) {
        std::printf("compress plan: %u parallel builds, planned peak %.0f MB of a %.0f MB budget\n",
                    report.parallel_builds, report.planned_peak / 1e6, report.memory_budget / 1e6);
        std::fflush(stdout);
      }
      return s.ok();
    });
    if (!child.ok) Die("compress failed");
    std::printf("compress: %.1f s, peak RSS %.0f MB (shards %u)\n", child.seconds, child.peak_mb,
                options.shards);
  }
  auto g = Check(Graph::Open(store, {}), "open");
  const auto& m = g->manifest();
  std::map<std::string, uint64_t> groups;
  uint64_t stored = 0;
  for (const auto& f : m.files) {
    const std::string name = f.path.substr(f.path.find('/') + 1);
    const std::string group = name == "nodes.zcf"   ? "NodeFile (compressed text)"
                              : name == "edges.zcf" ? "EdgeFile (compressed text)"
                              : name == "nodes.idx" ? "node id/offset tables"
                                                    : "metadata";
    groups[group] += f.bytes;
    stored += f.bytes;
  }
  const uint64_t manifest_bytes = std::filesystem::file_size(store + "/MANIFEST");
  groups["metadata"] += manifest_bytes;
  stored += manifest_bytes;
  const uint64_t raw = m.raw_bytes;
  std::printf(
      "graph: %llu nodes, %llu edges, %u shards; node file %s, edge file sa/isa/psi "
      "%u/%u/%u, edge file %u/%u/%u\n",
      static_cast<unsigned long long>(m.nodes), static_cast<unsigned long long>(m.edges), m.shards,
      "", m.node_file.sa_sampling_rate, m.node_file.isa_sampling_rate, m.node_file.psi_block_size,
      m.edge_file.sa_sampling_rate, m.edge_file.isa_sampling_rate, m.edge_file.psi_block_size);
  std::printf("raw CSV %llu bytes, stored %llu bytes, ratio %.3f\n",
              static_cast<unsigned long long>(raw), static_cast<unsigned long long>(stored),
              static_cast<double>(stored) / raw);
  for (const auto& [name, bytes] : groups) {
    std::printf("  %-30s %12llu bytes  %5.1f%%\n", name.c_str(),
                static_cast<unsigned long long>(bytes), 100.0 * bytes / stored);
  }
  {
    const uint32_t s = 0;  // one shard is representative: partitions are hash-balanced
    std::printf(
        "  shard 0 NodeFile text %llu -> %llu bytes (%.3f), EdgeFile text %llu -> %llu "
        "(%.3f)\n",
        static_cast<unsigned long long>(g->shard(s).nodes().text_size()),
        static_cast<unsigned long long>(g->shard(s).nodes().SizeInBytes()),
        static_cast<double>(g->shard(s).nodes().SizeInBytes()) / g->shard(s).nodes().text_size(),
        static_cast<unsigned long long>(g->shard(s).edges().text_size()),
        static_cast<unsigned long long>(g->shard(s).edges().SizeInBytes()),
        static_cast<double>(g->shard(s).edges().SizeInBytes()) / g->shard(s).edges().text_size());
  }

  // Reference answers from the CSV.
  graph::InputGraph input;
  if (Status s = graph::LoadNodesCsv(nodes_csv, &input); !s.ok()) Die(s.ToString());
  if (Status s = graph::LoadEdgesCsv(edges_csv, &input); !s.ok()) Die(s.ToString());
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;
  for (const auto& e : input.edges) ++counts[{e.src, e.type}];
  // Categorical properties: few distinct values, so equality filters find matches.
  std::vector<uint32_t> categorical;
  {
    std::vector<std::set<std::string>> distinct(input.node_property_names.size());
    for (size_t i = 0; i < input.nodes.size() && i < 20000; ++i) {
      for (const auto& [p, v] : input.nodes[i].properties) distinct[p].insert(v);
    }
    for (uint32_t p = 0; p < distinct.size(); ++p) {
      if (distinct[p].size() <= 3000) categorical.push_back(p);
    }
  }
  if (categorical.size() < 2) Die("the generated graph has fewer than 2 categorical properties");
  const int64_t ts_lo = datagen::TaoGraphOptions{}.epoch;
  const int64_t span = int64_t{gen.days} * 86400;

  datagen::Rng rng(42);
  const uint64_t n = input.nodes.size();
  std::vector<int64_t> ids(queries), types(queries), windows(queries);
  for (uint64_t i = 0; i < queries; ++i) {
    ids[i] = static_cast<int64_t>(rng.Uniform(n));
    types[i] = static_cast<int64_t>(rng.Uniform(gen.edge_types));
    windows[i] = ts_lo + static_cast<int64_t>(rng.Uniform(span));
  }
  auto name_of = [&](uint32_t p) { return input.node_property_names[p]; };
  auto value_of = [&](int64_t id, uint32_t p) -> const std::string* {
    for (const auto& [q, v] : input.nodes[id].properties)
      if (q == p) return &v;
    return nullptr;
  };
  uint64_t mismatches = 0, results = 0;

  std::printf("in-process latency, %llu queries each (uniform ids):\n",
              static_cast<unsigned long long>(queries));
  PrintLatency("obj_get", Measure(queries, [&](size_t i) {
                 auto node = Check(g->ObjGet(ids[i]), "obj_get");
                 Properties expected;
                 for (const auto& [p, v] : input.nodes[ids[i]].properties)
                   expected.emplace_back(name_of(p), v);
                 std::sort(expected.begin(), expected.end());
                 if (!node || node->properties != expected) ++mismatches;
               }));
  PrintLatency("assoc_range(limit 10)", Measure(queries, [&](size_t i) {
                 auto edges = Check(g->AssocRange(ids[i], types[i], 0, 10), "assoc_range");
                 auto it = counts.find({ids[i], types[i]});
                 const int64_t c = it == counts.end() ? 0 : it->second;
                 if (static_cast<int64_t>(edges.size()) != std::min<int64_t>(c, 10)) ++mismatches;
                 results += edges.size();
               }));
  // The same on records of at least 64 edges (they have a destination index, and their columns
  // lie too far apart for one read of the record's head).
  std::vector<std::pair<int64_t, int64_t>> large;
  for (const auto& [key, c] : counts) {
    if (c >= 64) large.push_back(key);
  }
  if (!large.empty()) {
    char name[64];
    std::snprintf(name, sizeof(name), "assoc_range(limit 10), %zu recs 64+", large.size());
    PrintLatency(name, Measure(queries, [&](size_t i) {
                   const auto& [id, type] = large[(i * 7919) % large.size()];
                   auto edges = Check(g->AssocRange(id, type, static_cast<int64_t>(i % 50), 10),
                                      "assoc_range");
                   if (edges.size() != 10) ++mismatches;
                   results += edges.size();
                 }));
  }
  PrintLatency("assoc_count", Measure(queries, [&](size_t i) {
                 auto c = Check(g->AssocCount(ids[i], types[i]), "assoc_count");
                 auto it = counts.find({ids[i], types[i]});
                 if (c != (it == counts.end() ? 0 : it->second)) ++mismatches;
               }));
  PrintLatency("assoc_time_range(5 days, limit 10)", Measure(queries, [&](size_t i) {
                 auto edges = Check(
                     g->AssocTimeRange(ids[i], types[i], windows[i], windows[i] + 5 * 86400, 10),
                     "assoc_time_range");
                 for (const auto& e : edges)
                   if (e.timestamp < windows[i] || e.timestamp > windows[i] + 5 * 86400)
                     ++mismatches;
               }));
  PrintLatency("get_neighbor_ids(1-property filter)", Measure(queries, [&](size_t i) {
                 const uint32_t p = categorical[i % categorical.size()];
                 const std::string* v = value_of(ids[(i + 1) % queries], p);
                 Properties filter{{name_of(p), v ? *v : std::string("x")}};
                 auto out = Check(g->GetNeighborIds(ids[i], std::nullopt, filter), "neighbors");
                 results += out.size();
               }));
  uint64_t node_id_hits = 0;
  PrintLatency("get_node_ids(2 properties)", Measure(queries, [&](size_t i) {
                 const int64_t id = ids[i];
                 const uint32_t p1 = categorical[i % categorical.size()];
                 const uint32_t p2 = categorical[(i + 1) % categorical.size()];
                 const std::string* v1 = value_of(id, p1);
                 const std::string* v2 = value_of(id, p2);
                 if (!v1 || !v2 || p1 == p2) return;
                 Properties match{{name_of(p1), *v1}, {name_of(p2), *v2}};
                 std::sort(match.begin(), match.end());
                 auto out = Check(g->GetNodeIds(match), "get_node_ids");
                 node_id_hits += out.size();
                 if (!std::binary_search(out.begin(), out.end(), id)) ++mismatches;
               }));
  std::printf("checked against the CSV: %llu mismatches (avg get_node_ids result %.1f ids)\n",
              static_cast<unsigned long long>(mismatches),
              static_cast<double>(node_id_hits) / queries);
  return mismatches == 0 ? 0 : 1;
}
