// Graph: a compressed store opened in-process (embedded mode). It routes each operation to the
// shard that owns the node (graph/partition.h) and does the cross-shard steps itself: get_node_ids
// asks every shard and merges, get_neighbor_ids checks a property filter on the shards that own
// the neighbors. The aggregator of the serving layer does the same over RPC.
//
// Thread-safety: immutable once opened; every operation may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/api.h"
#include "graph/manifest.h"
#include "shard/shard.h"

namespace zipg {

struct GraphOpenOptions {
  // Check every file against the manifest's checksum and every compressed section's checksum
  // (reads the whole store once). Default true; false opens in about a millisecond per shard.
  bool verify_checksums = true;
};

class Graph final : public GraphApi {
 public:
  static StatusOr<std::unique_ptr<Graph>> Open(const std::string& dir,
                                               const GraphOpenOptions& options = {});

  const graph::Manifest& manifest() const { return manifest_; }
  const shard::Shard& shard(uint32_t i) const { return *shards_[i]; }
  uint32_t num_shards() const { return static_cast<uint32_t>(shards_.size()); }

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) override;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) override;
  StatusOr<std::vector<int64_t>> GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                const Properties& properties) override;
  StatusOr<EdgeRecordInfo> GetEdgeRecord(int64_t id, int64_t type) override;
  StatusOr<std::pair<int64_t, int64_t>> GetEdgeRange(int64_t id, int64_t type, int64_t t_lo,
                                                     int64_t t_hi) override;
  StatusOr<std::optional<Edge>> GetEdgeData(int64_t id, int64_t type, int64_t time_order) override;
  StatusOr<std::optional<Node>> ObjGet(int64_t id) override;
  StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                         int64_t limit) override;
  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) override;
  StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type, const std::vector<int64_t>& ids,
                                       int64_t low, int64_t high) override;
  StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low, int64_t high,
                                             int64_t limit) override;

 private:
  Graph() = default;
  const shard::Shard& Owner(int64_t id) const;

  graph::Manifest manifest_;
  std::vector<std::unique_ptr<shard::Shard>> shards_;
};

}  // namespace zipg
