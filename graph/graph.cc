// The embedded Graph: argument checks, routing by hash partition, cross-shard merging.

#include "graph/graph.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "graph/partition.h"

namespace zipg {

namespace {
Status CheckId(int64_t id, const char* what) {
  if (id < 0) return Status::InvalidArgument(std::string(what) + " must be >= 0");
  return Status::OK();
}
Status CheckEdgeArgs(int64_t id, int64_t type) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  return CheckId(type, "type");
}
}  // namespace

StatusOr<std::unique_ptr<Graph>> Graph::Open(const std::string& dir,
                                             const GraphOpenOptions& options) {
  std::unique_ptr<Graph> g(new Graph());
  ZIPG_ASSIGN_OR_RETURN(g->manifest_, graph::ReadManifest(dir));
  if (g->manifest_.partition != kPartitionFunction) {
    return Status::Corruption(dir + ": unknown partition function '" + g->manifest_.partition +
                              "'");
  }
  // The file list must be exactly the shards' files: a shard count that disagrees with it would
  // route ids with the wrong modulus and answer wrongly without any error.
  std::vector<std::string> expected, listed;
  for (uint32_t i = 0; i < g->manifest_.shards; ++i) {
    for (const char* name : shard::kShardFiles) {
      expected.push_back(graph::ShardDirName(i) + "/" + name);
    }
  }
  for (const auto& file : g->manifest_.files) listed.push_back(file.path);
  std::sort(expected.begin(), expected.end());
  std::sort(listed.begin(), listed.end());
  if (expected != listed) {
    return Status::Corruption(dir + "/" + graph::kManifestName + ": " +
                              std::to_string(g->manifest_.shards) +
                              " shards do not match the listed files");
  }
  for (const auto& file : g->manifest_.files) {
    const std::string path = dir + "/" + file.path;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return Status::Corruption(path + ": listed in the manifest but missing");
    if (size != file.bytes) {
      return Status::Corruption(path + ": size " + std::to_string(size) +
                                " differs from the manifest's " + std::to_string(file.bytes));
    }
    if (options.verify_checksums) {
      ZIPG_ASSIGN_OR_RETURN(uint64_t sum, graph::FileChecksum(path));
      if (sum != file.xxh3) return Status::Corruption(path + ": checksum mismatch");
    }
  }
  // Whole-file checksums above cover every byte; the per-section pass would read it all again.
  layout::OpenOptions open_options;
  open_options.verify_checksums = false;
  for (uint32_t i = 0; i < g->manifest_.shards; ++i) {
    ZIPG_ASSIGN_OR_RETURN(auto shard,
                          shard::Shard::Open(dir + "/" + graph::ShardDirName(i), open_options));
    g->shards_.push_back(std::move(shard));
  }
  return g;
}

const shard::Shard& Graph::Owner(int64_t id) const { return *shards_[ShardOf(id, num_shards())]; }

StatusOr<std::optional<Properties>> Graph::GetNodeProperty(int64_t id,
                                                           const std::vector<std::string>* names) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  return Owner(id).GetNodeProperty(id, names);
}

StatusOr<std::vector<int64_t>> Graph::GetNodeIds(const Properties& properties) {
  if (properties.empty()) {
    return Status::InvalidArgument("get_node_ids needs at least one property");
  }
  std::vector<int64_t> ids;
  for (const auto& shard : shards_) {
    ZIPG_ASSIGN_OR_RETURN(auto part, shard->GetNodeIds(properties));
    ids.insert(ids.end(), part.begin(), part.end());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> Graph::GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                     const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  if (type) ZIPG_RETURN_IF_ERROR(CheckId(*type, "type"));
  ZIPG_ASSIGN_OR_RETURN(auto neighbors, Owner(id).NeighborIds(id, type));
  if (properties.empty()) return neighbors;
  // Ship the filter to the shards that own the neighbors (one group per shard).
  std::map<uint32_t, std::vector<int64_t>> groups;
  for (int64_t dst : neighbors) groups[ShardOf(dst, num_shards())].push_back(dst);
  std::vector<int64_t> kept;
  for (const auto& [shard, group] : groups) {
    for (int64_t dst : group) {
      ZIPG_ASSIGN_OR_RETURN(bool ok, shards_[shard]->NodeMatches(dst, properties));
      if (ok) kept.push_back(dst);
    }
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

StatusOr<EdgeRecordInfo> Graph::GetEdgeRecord(int64_t id, int64_t type) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  ZIPG_ASSIGN_OR_RETURN(int64_t count, Owner(id).AssocCount(id, type));
  return EdgeRecordInfo{id, type, count};
}

StatusOr<std::pair<int64_t, int64_t>> Graph::GetEdgeRange(int64_t id, int64_t type, int64_t t_lo,
                                                          int64_t t_hi) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  return Owner(id).EdgeRange(id, type, t_lo, t_hi);
}

StatusOr<std::optional<Edge>> Graph::GetEdgeData(int64_t id, int64_t type, int64_t time_order) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  if (time_order < 0) return std::optional<Edge>();
  return Owner(id).EdgeData(id, type, time_order);
}

StatusOr<std::optional<Node>> Graph::ObjGet(int64_t id) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  ZIPG_ASSIGN_OR_RETURN(auto props, Owner(id).GetNodeProperty(id, nullptr));
  if (!props) return std::optional<Node>();
  return std::optional<Node>(Node{id, std::move(*props)});
}

StatusOr<std::vector<Edge>> Graph::AssocRange(int64_t id, int64_t type, int64_t pos,
                                              int64_t limit) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  ZIPG_RETURN_IF_ERROR(CheckId(pos, "pos"));
  ZIPG_RETURN_IF_ERROR(CheckId(limit, "limit"));
  return Owner(id).AssocRange(id, type, pos, limit);
}

StatusOr<int64_t> Graph::AssocCount(int64_t id, int64_t type) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  return Owner(id).AssocCount(id, type);
}

StatusOr<std::vector<Edge>> Graph::AssocGet(int64_t id, int64_t type,
                                            const std::vector<int64_t>& ids, int64_t low,
                                            int64_t high) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  return Owner(id).AssocGet(id, type, ids, low, high);
}

StatusOr<std::vector<Edge>> Graph::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                  int64_t high, int64_t limit) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  ZIPG_RETURN_IF_ERROR(CheckId(limit, "limit"));
  return Owner(id).AssocTimeRange(id, type, low, high, limit);
}

}  // namespace zipg
