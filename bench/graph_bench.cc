// graph_bench: size and in-process latency of the graph layouts on a generated TAO-like graph.
//
// Generates (or reuses) nodes.csv / edges.csv in --dir and, for each layout asked for (--layouts,
// default both), compresses them in a child process (wall time and peak RSS), prints raw vs stored
// bytes with the NodeFile / EdgeFile / metadata breakdown, then opens the store and measures
// p50/p99 of the operations on uniformly chosen ids, checking answers against the loaded
// CSV as it goes. The layouts are printed side by side, with the ratio v2 / v1:
//   v1  the layout before issue 15: NodeFile format 1 and EdgeFile format 3 (suffix structures,
//       sa/isa/psi 32/32/32 and 64/64/128)
//   v2  today's defaults: NodeFile format 2 (zstd blocks and a value index), EdgeFile format 4
//       (zstd blocks and a record index)
// The options below change both layouts where they apply (e.g. --edge-psi-block only v1's).
//
//   graph_bench [--nodes N] [--degree D] [--seed S] [--dir DIR] [--shards N] [--queries Q]
//               [--layouts v1,v2] [--node-block N --node-level N --sa-rate N ...]
//               [--edge-block N --edge-level N --edge-sa-rate N ...] [--skip-build]

#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
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

// The answers the benchmark checks against, from the CSV, and the queries it asks.
struct Reference {
  graph::InputGraph input;
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;  // edges per (src, type)
  std::vector<uint32_t> categorical;  // properties with few distinct values (filters match)
  std::vector<int64_t> ids, types, windows;
  std::vector<std::pair<int64_t, int64_t>> large;  // (src, type) of records of 64+ edges
  std::string name_of(uint32_t p) const { return input.node_property_names[p]; }
  const std::string* value_of(int64_t id, uint32_t p) const {
    for (const auto& [q, v] : input.nodes[id].properties)
      if (q == p) return &v;
    return nullptr;
  }
};

// What one layout measured.
struct LayoutRun {
  std::string label;
  double compress_seconds = 0, peak_mb = 0;
  uint64_t raw = 0, stored = 0;
  std::map<std::string, uint64_t> groups;
  uint64_t node_text = 0, node_bytes = 0, edge_text = 0, edge_bytes = 0;  // shard 0
  std::vector<std::pair<std::string, Latency>> latencies;
  uint64_t mismatches = 0;
  double node_id_hits = 0;
};

// Compresses the CSV into `store` in a child process: its wall time and peak RSS. Runs before the
// reference answers are loaded, so that the child's RSS holds nothing of the parent's.
void BuildLayout(const std::string& label, const graph::CompressOptions& options,
                 const std::string& nodes_csv, const std::string& edges_csv,
                 const std::string& store, LayoutRun* out) {
  graph::CompressReport report;
  auto child = RunInChild([&] {
    graph::CompressInputs inputs{nodes_csv, edges_csv, graph::InputFormat::kCsv};
    Status s = graph::CompressFiles(inputs, store, options, {}, &report);
    if (!s.ok()) std::fprintf(stderr, "compress: %s\n", s.ToString().c_str());
    if (s.ok()) {
      std::printf(
          "%s compress plan: %u parallel builds, planned peak %.0f MB of a %.0f MB budget\n",
          label.c_str(), report.parallel_builds, report.planned_peak / 1e6,
          report.memory_budget / 1e6);
      std::fflush(stdout);
    }
    return s.ok();
  });
  if (!child.ok) Die(label + ": compress failed");
  out->compress_seconds = child.seconds;
  out->peak_mb = child.peak_mb;
}

// Opens `store` and measures its sizes and every operation's latency, checking the answers.
void MeasureLayout(const std::string& store, const Reference& ref, uint64_t queries,
                   LayoutRun* out) {
  LayoutRun& run = *out;
  const std::string& label = run.label;
  auto g = Check(Graph::Open(store, {}), "open");
  const auto& m = g->manifest();
  for (const auto& f : m.files) {
    const std::string name = f.path.substr(f.path.find('/') + 1);
    const std::string group = name == "nodes.zcf" || name == "nodes.zbk"   ? "NodeFile text"
                              : name == "edges.zcf" || name == "edges.zbk" ? "EdgeFile text"
                              : name == "nodes.idx"                        ? "node id/offset tables"
                                                                           : "metadata";
    run.groups[group] += f.bytes;
    run.stored += f.bytes;
  }
  const uint64_t manifest_bytes = std::filesystem::file_size(store + "/MANIFEST");
  run.groups["metadata"] += manifest_bytes;
  run.stored += manifest_bytes;
  run.raw = m.raw_bytes;
  std::printf(
      "%s: %llu nodes, %llu edges, %u shards; node file format %u (blocks %u B, level %d; "
      "sa/isa/psi %u/%u/%u); edge file format %u (blocks %u B, level %d; sa/isa/psi %u/%u/%u)\n",
      label.c_str(), static_cast<unsigned long long>(m.nodes),
      static_cast<unsigned long long>(m.edges), m.shards, m.node_file.format,
      m.node_file.blocks.block_bytes, m.node_file.blocks.level, m.node_file.suffix.sa_sampling_rate,
      m.node_file.suffix.isa_sampling_rate, m.node_file.suffix.psi_block_size, m.edge_file.format,
      m.edge_file.blocks.block_bytes, m.edge_file.blocks.level, m.edge_file.suffix.sa_sampling_rate,
      m.edge_file.suffix.isa_sampling_rate, m.edge_file.suffix.psi_block_size);
  // One shard is representative: partitions are hash-balanced.
  run.node_text = g->shard(0).nodes().text_size();
  run.node_bytes = g->shard(0).nodes().SizeInBytes();
  run.edge_text = g->shard(0).edges().text_size();
  run.edge_bytes = g->shard(0).edges().SizeInBytes();

  const auto& input = ref.input;
  auto measure = [&](const std::string& name, const std::function<void(size_t)>& op) {
    run.latencies.emplace_back(name, Measure(queries, op));
  };
  measure("obj_get", [&](size_t i) {
    auto node = Check(g->ObjGet(ref.ids[i]), "obj_get");
    Properties expected;
    for (const auto& [p, v] : input.nodes[ref.ids[i]].properties)
      expected.emplace_back(ref.name_of(p), v);
    std::sort(expected.begin(), expected.end());
    if (!node || node->properties != expected) ++run.mismatches;
  });
  measure("assoc_range(limit 10)", [&](size_t i) {
    auto edges = Check(g->AssocRange(ref.ids[i], ref.types[i], 0, 10), "assoc_range");
    auto it = ref.counts.find({ref.ids[i], ref.types[i]});
    const int64_t c = it == ref.counts.end() ? 0 : it->second;
    if (static_cast<int64_t>(edges.size()) != std::min<int64_t>(c, 10)) ++run.mismatches;
  });
  // The same on records of at least 64 edges (they have a destination index, and their columns
  // lie too far apart for one read of the record's head).
  if (!ref.large.empty()) {
    char name[64];
    std::snprintf(name, sizeof(name), "assoc_range(10), %zu recs 64+", ref.large.size());
    measure(name, [&](size_t i) {
      const auto& [id, type] = ref.large[(i * 7919) % ref.large.size()];
      auto edges = Check(g->AssocRange(id, type, static_cast<int64_t>(i % 50), 10), "assoc_range");
      if (edges.size() != 10) ++run.mismatches;
    });
  }
  measure("assoc_get(1 dst)", [&](size_t i) {
    auto it = ref.counts.lower_bound({ref.ids[i], ref.types[i]});
    if (it == ref.counts.end()) return;
    // The record's newest edge, found by its destination.
    auto first = Check(g->AssocRange(it->first.first, it->first.second, 0, 1), "assoc_range");
    if (first.empty()) {
      ++run.mismatches;
      return;
    }
    auto got =
        Check(g->AssocGet(it->first.first, it->first.second, {first[0].dst},
                          std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()),
              "assoc_get");
    if (got.size() != 1) ++run.mismatches;
  });
  measure("assoc_count", [&](size_t i) {
    auto c = Check(g->AssocCount(ref.ids[i], ref.types[i]), "assoc_count");
    auto it = ref.counts.find({ref.ids[i], ref.types[i]});
    if (c != (it == ref.counts.end() ? 0 : it->second)) ++run.mismatches;
  });
  measure("assoc_time_range(5 days, 10)", [&](size_t i) {
    auto edges = Check(
        g->AssocTimeRange(ref.ids[i], ref.types[i], ref.windows[i], ref.windows[i] + 5 * 86400, 10),
        "assoc_time_range");
    for (const auto& e : edges)
      if (e.timestamp < ref.windows[i] || e.timestamp > ref.windows[i] + 5 * 86400)
        ++run.mismatches;
  });
  measure("get_neighbor_ids(1 filter)", [&](size_t i) {
    const uint32_t p = ref.categorical[i % ref.categorical.size()];
    const std::string* v = ref.value_of(ref.ids[(i + 1) % queries], p);
    Properties filter{{ref.name_of(p), v ? *v : std::string("x")}};
    Check(g->GetNeighborIds(ref.ids[i], std::nullopt, filter), "neighbors");
  });
  uint64_t hits = 0;
  measure("get_node_ids(2 properties)", [&](size_t i) {
    const int64_t id = ref.ids[i];
    const uint32_t p1 = ref.categorical[i % ref.categorical.size()];
    const uint32_t p2 = ref.categorical[(i + 1) % ref.categorical.size()];
    const std::string* v1 = ref.value_of(id, p1);
    const std::string* v2 = ref.value_of(id, p2);
    if (!v1 || !v2 || p1 == p2) return;
    Properties match{{ref.name_of(p1), *v1}, {ref.name_of(p2), *v2}};
    std::sort(match.begin(), match.end());
    auto out = Check(g->GetNodeIds(match), "get_node_ids");
    hits += out.size();
    if (!std::binary_search(out.begin(), out.end(), id)) ++run.mismatches;
  });
  run.node_id_hits = static_cast<double>(hits) / queries;
}

// One line of the side-by-side table: a value per layout and, for two, their ratio.
void PrintRow(const std::string& name, const std::vector<double>& values, const char* unit,
              int decimals = 1) {
  std::printf("  %-34s", name.c_str());
  for (double v : values) std::printf(" %12.*f %-2s", decimals, v, unit);
  if (values.size() == 2 && values[0] > 0) std::printf("   %6.3f", values[1] / values[0]);
  std::printf("\n");
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
  auto& node = options.node_file;
  node.blocks.block_bytes = uint("node-block", node.blocks.block_bytes);
  node.blocks.level =
      static_cast<int>(uint("node-level", static_cast<uint32_t>(node.blocks.level)));
  node.blocks.dictionary_bytes = uint("node-dict", node.blocks.dictionary_bytes);
  node.suffix.sa_sampling_rate = uint("sa-rate", node.suffix.sa_sampling_rate);
  node.suffix.isa_sampling_rate = uint("isa-rate", node.suffix.isa_sampling_rate);
  node.suffix.psi_block_size = uint("psi-block", node.suffix.psi_block_size);
  auto& edge = options.edge_file;
  edge.blocks.block_bytes = uint("edge-block", edge.blocks.block_bytes);
  edge.blocks.level =
      static_cast<int>(uint("edge-level", static_cast<uint32_t>(edge.blocks.level)));
  edge.blocks.dictionary_bytes = uint("edge-dict", edge.blocks.dictionary_bytes);
  edge.suffix.sa_sampling_rate = uint("edge-sa-rate", edge.suffix.sa_sampling_rate);
  edge.suffix.isa_sampling_rate = uint("edge-isa-rate", edge.suffix.isa_sampling_rate);
  edge.suffix.psi_block_size = uint("edge-psi-block", edge.suffix.psi_block_size);
  options.overwrite = true;
  std::vector<std::string> labels;
  {
    const std::string list = args.Get("layouts").value_or("v1,v2");
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      labels.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
    for (const auto& l : labels)
      if (l != "v1" && l != "v2") Die("--layouts: v1, v2 or both, not '" + l + "'");
  }

  std::filesystem::create_directories(dir);
  const std::string nodes_csv = dir + "/nodes-" + std::to_string(gen.nodes) + ".csv";
  const std::string edges_csv = dir + "/edges-" + std::to_string(gen.nodes) + ".csv";
  if (!std::filesystem::exists(nodes_csv) || !std::filesystem::exists(edges_csv)) {
    std::printf("generating %llu nodes into %s ...\n", static_cast<unsigned long long>(gen.nodes),
                dir.c_str());
    if (Status s = datagen::WriteTaoGraph(gen, nodes_csv, edges_csv); !s.ok()) Die(s.ToString());
  }

  std::vector<LayoutRun> runs(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    runs[i].label = labels[i];
    if (args.Has("skip-build")) continue;
    graph::CompressOptions o = options;
    o.edge_file.format = labels[i] == "v1" ? 3 : layout::kEdgeFileFormat;
    o.node_file.format = labels[i] == "v1" ? 1 : layout::kNodeFileFormat;
    BuildLayout(labels[i], o, nodes_csv, edges_csv, dir + "/store-" + labels[i], &runs[i]);
  }

  // Reference answers from the CSV, and the queries.
  Reference ref;
  if (Status s = graph::LoadNodesCsv(nodes_csv, &ref.input); !s.ok()) Die(s.ToString());
  if (Status s = graph::LoadEdgesCsv(edges_csv, &ref.input); !s.ok()) Die(s.ToString());
  for (const auto& e : ref.input.edges) ++ref.counts[{e.src, e.type}];
  for (const auto& [key, c] : ref.counts) {
    if (c >= 64) ref.large.push_back(key);
  }
  {
    std::vector<std::set<std::string>> distinct(ref.input.node_property_names.size());
    for (size_t i = 0; i < ref.input.nodes.size() && i < 20000; ++i) {
      for (const auto& [p, v] : ref.input.nodes[i].properties) distinct[p].insert(v);
    }
    for (uint32_t p = 0; p < distinct.size(); ++p) {
      if (distinct[p].size() <= 3000) ref.categorical.push_back(p);
    }
  }
  if (ref.categorical.size() < 2)
    Die("the generated graph has fewer than 2 categorical properties");
  const int64_t ts_lo = datagen::TaoGraphOptions{}.epoch;
  const int64_t span = int64_t{gen.days} * 86400;
  datagen::Rng rng(42);
  const uint64_t n = ref.input.nodes.size();
  for (uint64_t i = 0; i < queries; ++i) {
    ref.ids.push_back(static_cast<int64_t>(rng.Uniform(n)));
    ref.types.push_back(static_cast<int64_t>(rng.Uniform(gen.edge_types)));
    ref.windows.push_back(ts_lo + static_cast<int64_t>(rng.Uniform(span)));
  }

  for (auto& run : runs) MeasureLayout(dir + "/store-" + run.label, ref, queries, &run);

  auto column = [&](const std::function<double(const LayoutRun&)>& f) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(f(r));
    return v;
  };
  std::printf("\n  %-34s", "");
  for (const auto& r : runs) std::printf(" %15s", r.label.c_str());
  if (runs.size() == 2) std::printf("   %6s", "ratio");
  std::printf("\n");
  PrintRow("raw CSV", column([](const LayoutRun& r) { return r.raw / 1e6; }), "MB");
  PrintRow("stored", column([](const LayoutRun& r) { return r.stored / 1e6; }), "MB");
  PrintRow("stored / CSV", column([](const LayoutRun& r) { return 1.0 * r.stored / r.raw; }), "",
           3);
  std::set<std::string> groups;
  for (const auto& r : runs)
    for (const auto& [name, bytes] : r.groups) groups.insert(name);
  for (const auto& name : groups) {
    PrintRow("  " + name, column([&](const LayoutRun& r) {
               auto it = r.groups.find(name);
               return it == r.groups.end() ? 0.0 : it->second / 1e6;
             }),
             "MB");
  }
  PrintRow("shard 0 NodeFile bytes / text",
           column([](const LayoutRun& r) { return 1.0 * r.node_bytes / r.node_text; }), "", 3);
  PrintRow("shard 0 EdgeFile bytes / text",
           column([](const LayoutRun& r) { return 1.0 * r.edge_bytes / r.edge_text; }), "", 3);
  if (!args.Has("skip-build")) {
    PrintRow("compress wall time", column([](const LayoutRun& r) { return r.compress_seconds; }),
             "s");
    PrintRow("compress peak RSS", column([](const LayoutRun& r) { return r.peak_mb; }), "MB", 0);
  }
  std::printf("in-process latency, %llu queries each (uniform ids), p50 / p99:\n",
              static_cast<unsigned long long>(queries));
  for (size_t i = 0; i < runs[0].latencies.size(); ++i) {
    const std::string& name = runs[0].latencies[i].first;
    PrintRow(name + " p50",
             column([&](const LayoutRun& r) { return r.latencies[i].second.p50_us; }), "us");
    PrintRow(name + " p99",
             column([&](const LayoutRun& r) { return r.latencies[i].second.p99_us; }), "us");
  }
  uint64_t mismatches = 0;
  for (const auto& r : runs) {
    std::printf("%s checked against the CSV: %llu mismatches (avg get_node_ids result %.1f ids)\n",
                r.label.c_str(), static_cast<unsigned long long>(r.mismatches), r.node_id_hits);
    mismatches += r.mismatches;
  }
  return mismatches == 0 ? 0 : 1;
}
