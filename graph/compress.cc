// The compress pipeline (graph/compress.h).

#include "graph/compress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "graph/manifest.h"
#include "graph/partition.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "layout/record_coding.h"
#include "shard/shard.h"

namespace zipg::graph {

namespace fs = std::filesystem;

namespace {

uint32_t HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

// Rank of each header position in sorted name order: the property numbers the layout uses.
std::vector<uint32_t> SortedRanks(const std::vector<std::string>& names,
                                  std::vector<std::string>* sorted) {
  std::vector<uint32_t> order(names.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return names[a] < names[b]; });
  std::vector<uint32_t> rank(names.size());
  sorted->clear();
  for (uint32_t r = 0; r < order.size(); ++r) {
    rank[order[r]] = r;
    sorted->push_back(names[order[r]]);
  }
  return rank;
}

layout::NumberedProperties Renumber(IndexedProperties props, const std::vector<uint32_t>& rank) {
  layout::NumberedProperties out;
  out.reserve(props.size());
  for (auto& [index, value] : props) out.emplace_back(rank[index], std::move(value));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

struct ShardInput {
  std::vector<layout::NodeInput> nodes;
  std::vector<InputEdge> edges;
  uint64_t weight = 0;  // input bytes, for progress
};

Status BuildShard(ShardInput input, const std::string& dir, const CompressOptions& options,
                  const std::vector<std::string>& node_names,
                  const std::vector<std::string>& edge_names,
                  const std::vector<uint32_t>& edge_rank, uint64_t* edge_count) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(dir + ": " + ec.message());
  std::sort(input.nodes.begin(), input.nodes.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  ZIPG_RETURN_IF_ERROR(
      layout::NodeFile::Build(dir + "/nodes", node_names, input.nodes, options.node_file));
  std::vector<layout::NodeInput>().swap(input.nodes);

  // Group by (src, type); a repeated (src, type, dst) keeps its last row (stable sort).
  auto& edges = input.edges;
  std::stable_sort(edges.begin(), edges.end(), [](const InputEdge& a, const InputEdge& b) {
    return std::tie(a.src, a.type, a.dst) < std::tie(b.src, b.type, b.dst);
  });
  std::vector<layout::EdgeRecordInput> records;
  for (size_t i = 0; i < edges.size(); ++i) {
    InputEdge& e = edges[i];
    if (i + 1 < edges.size() && edges[i + 1].src == e.src && edges[i + 1].type == e.type &&
        edges[i + 1].dst == e.dst) {
      continue;  // superseded by a later row
    }
    if (records.empty() || records.back().src != e.src || records.back().type != e.type) {
      records.push_back({e.src, e.type, {}});
    }
    records.back().edges.push_back(
        {e.dst, e.timestamp, Renumber(std::move(e.properties), edge_rank)});
    ++*edge_count;
  }
  std::vector<InputEdge>().swap(edges);
  return layout::EdgeFile::Build(dir + "/edges", edge_names, std::move(records), options.edge_file);
}

}  // namespace

Status CompressOptions::Validate() const {
  if (Status s = node_file.Validate(); !s.ok()) {
    return Status::InvalidArgument("node file options: " + s.message());
  }
  if (Status s = edge_file.Validate(); !s.ok()) {
    return Status::InvalidArgument("edge file options: " + s.message());
  }
  if (shards > 4096) return Status::InvalidArgument("at most 4096 shards");
  return Status::OK();
}

namespace {
// A store directory can be replaced only if it is empty or holds a manifest.
Status CheckOutput(const std::string& out_dir, bool overwrite) {
  if (!fs::exists(out_dir)) return Status::OK();
  if (fs::is_directory(out_dir) && fs::is_empty(out_dir)) return Status::OK();
  if (!fs::exists(fs::path(out_dir) / kManifestName)) {
    return Status::AlreadyExists(out_dir + " exists and is not a zipg store; refusing to touch it");
  }
  if (!overwrite) {
    return Status::AlreadyExists(out_dir + " already holds a store (use --force to replace it)");
  }
  return Status::OK();
}
}  // namespace

Status CompressFiles(const CompressInputs& inputs, const std::string& out_dir,
                     const CompressOptions& options, const CompressProgress& progress,
                     CompressReport* report) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(CheckOutput(out_dir, options.overwrite));
  InputGraph graph;
  auto phase = [&](const char* name) -> LoadProgress {
    if (!progress) return {};
    return [&progress, name](uint64_t done, uint64_t total) { progress(name, done, total); };
  };
  if (!inputs.nodes_path.empty()) {
    ZIPG_RETURN_IF_ERROR(LoadNodesCsv(inputs.nodes_path, &graph, phase("load nodes")));
  }
  if (inputs.edges_path.empty()) return Status::InvalidArgument("an edges file is required");
  if (inputs.format == InputFormat::kSnap) {
    ZIPG_RETURN_IF_ERROR(LoadSnapEdges(inputs.edges_path, &graph, phase("load edges")));
  } else {
    ZIPG_RETURN_IF_ERROR(LoadEdgesCsv(inputs.edges_path, &graph, phase("load edges")));
  }
  return CompressGraph(std::move(graph), out_dir, options, progress, report);
}

Status CompressGraph(InputGraph graph, const std::string& out_dir, const CompressOptions& options,
                     const CompressProgress& progress, CompressReport* report) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(CheckOutput(out_dir, options.overwrite));
  const uint32_t num_shards = options.shards ? options.shards : HardwareThreads();
  for (const auto* names : {&graph.node_property_names, &graph.edge_property_names}) {
    if (names->size() > layout::kMaxProperties) {
      return Status::InvalidArgument(std::to_string(names->size()) +
                                     " property columns; the layout supports at most " +
                                     std::to_string(layout::kMaxProperties));
    }
  }
  Manifest manifest;
  manifest.shards = num_shards;
  manifest.partition = kPartitionFunction;
  manifest.node_file = options.node_file;
  manifest.edge_file = options.edge_file;
  manifest.raw_bytes = graph.raw_bytes;
  manifest.nodes = graph.nodes.size();
  const auto node_rank = SortedRanks(graph.node_property_names, &manifest.node_properties);
  const auto edge_rank = SortedRanks(graph.edge_property_names, &manifest.edge_properties);

  // Partition: a node's properties and its outgoing edges go to the shard that owns its id.
  if (progress) progress("partition", 0, graph.raw_bytes);
  // Ids and property indexes come from the loaders or from library callers: check them here.
  for (const auto& node : graph.nodes) {
    if (node.id < 0) {
      return Status::InvalidArgument("node id " + std::to_string(node.id) + " is negative");
    }
    for (const auto& [p, value] : node.properties) {
      if (p >= graph.node_property_names.size()) {
        return Status::InvalidArgument("node " + std::to_string(node.id) +
                                       ": property index out of range");
      }
    }
  }
  for (const auto& edge : graph.edges) {
    if (edge.src < 0 || edge.dst < 0 || edge.type < 0) {
      return Status::InvalidArgument("edge (" + std::to_string(edge.src) + ", " +
                                     std::to_string(edge.type) + ", " + std::to_string(edge.dst) +
                                     "): src, dst and type must be >= 0");
    }
    for (const auto& [p, value] : edge.properties) {
      if (p >= graph.edge_property_names.size()) {
        return Status::InvalidArgument("edge from " + std::to_string(edge.src) +
                                       ": property index out of range");
      }
    }
  }
  std::vector<ShardInput> inputs(num_shards);
  for (auto& node : graph.nodes) {
    ShardInput& in = inputs[ShardOf(node.id, num_shards)];
    for (const auto& [p, value] : node.properties) in.weight += value.size() + 3;
    in.nodes.push_back({node.id, Renumber(std::move(node.properties), node_rank)});
  }
  std::vector<InputNode>().swap(graph.nodes);
  for (auto& edge : graph.edges) {
    ShardInput& in = inputs[ShardOf(edge.src, num_shards)];
    in.weight += 24;
    for (const auto& [p, value] : edge.properties) in.weight += value.size() + 3;
    in.edges.push_back(std::move(edge));
  }
  std::vector<InputEdge>().swap(graph.edges);
  uint64_t total_weight = 0;
  for (const auto& in : inputs) total_weight += in.weight;

  // Build every shard in a temporary directory next to the destination.
  fs::path out = fs::absolute(out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "DIR/" names DIR
  const std::string tmp = out.string() + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return Status::IOError(tmp + ": " + ec.message());
  auto fail = [&](Status s) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return s;
  };

  const uint32_t threads =
      std::min(num_shards, options.threads ? options.threads : HardwareThreads());
  std::atomic<uint32_t> next{0};
  std::atomic<uint64_t> edges{0}, done_weight{0};
  std::mutex mu;
  Status first_error;
  if (progress) progress("build", 0, total_weight);
  auto worker = [&] {
    for (uint32_t s; (s = next++) < num_shards;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok()) return;
      }
      uint64_t count = 0;
      const uint64_t weight = inputs[s].weight;
      Status st = BuildShard(std::move(inputs[s]), tmp + "/" + ShardDirName(s), options,
                             manifest.node_properties, manifest.edge_properties, edge_rank, &count);
      edges += count;
      const uint64_t done = done_weight += weight;
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok() && first_error.ok()) {
        first_error = Status(st.code(), ShardDirName(s) + ": " + st.message());
      }
      if (progress) progress("build", done, total_weight);
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!first_error.ok()) return fail(first_error);
  manifest.edges = edges;

  // Checksums, size report, manifest, then publish with one rename.
  if (progress) progress("finish", 0, 1);
  std::map<std::string, uint64_t> breakdown;
  for (uint32_t s = 0; s < num_shards; ++s) {
    const std::string dir = tmp + "/" + ShardDirName(s);
    for (const char* name : shard::kShardFiles) {
      ManifestFile file;
      file.path = ShardDirName(s) + "/" + name;
      file.bytes = fs::file_size(dir + "/" + name, ec);
      if (ec) return fail(Status::IOError(dir + "/" + name + ": " + ec.message()));
      auto sum = FileChecksum(dir + "/" + name);
      if (!sum.ok()) return fail(sum.status());
      file.xxh3 = *sum;
      manifest.files.push_back(file);
    }
    layout::OpenOptions no_verify;
    no_verify.verify_checksums = false;
    auto nodes = layout::NodeFile::Open(dir + "/nodes", no_verify);
    if (!nodes.ok()) return fail(nodes.status());
    for (const auto& part : (*nodes)->Breakdown()) breakdown["nodes." + part.name] += part.bytes;
    auto edge_file = layout::EdgeFile::Open(dir + "/edges", no_verify);
    if (!edge_file.ok()) return fail(edge_file.status());
    for (const auto& part : (*edge_file)->Breakdown()) {
      breakdown["edges." + part.name] += part.bytes;
    }
  }
  if (Status s = WriteManifest(tmp, manifest); !s.ok()) return fail(s);
  breakdown["manifest"] = fs::file_size(tmp + "/" + kManifestName, ec);

  if (fs::exists(out)) {
    // Replace an existing store (CheckOutput allowed it): move it aside, publish, delete it.
    const std::string old = out.string() + ".old-" + std::to_string(::getpid());
    fs::rename(out, old, ec);
    if (ec) return fail(Status::IOError(out.string() + ": " + ec.message()));
    fs::rename(tmp, out, ec);
    if (ec) {
      std::error_code ignored;
      fs::rename(old, out, ignored);
      return fail(Status::IOError(out.string() + ": " + ec.message()));
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp, out, ec);
    if (ec) return fail(Status::IOError(out.string() + ": " + ec.message()));
  }
  if (progress) progress("finish", 1, 1);

  if (report) {
    report->raw_bytes = manifest.raw_bytes;
    report->nodes = manifest.nodes;
    report->edges = manifest.edges;
    report->shards = num_shards;
    report->stored_bytes = 0;
    report->breakdown.assign(breakdown.begin(), breakdown.end());
    for (const auto& [name, bytes] : breakdown) report->stored_bytes += bytes;
  }
  return Status::OK();
}

}  // namespace zipg::graph
