// Shard: one hash partition of a store (a NodeFile with the properties of the nodes it owns and an
// EdgeFile with their outgoing EdgeRecords), answering the shard-local part of every read
// operation directly on the compressed files. Routing and cross-shard steps (neighbor filters,
// get_node_ids over all shards) belong to the caller: the embedded Graph or an aggregator.
//
// Directory: <dir>/nodes.{zcf,idx} and <dir>/edges.{zcf,meta}.
//
// Thread-safety: immutable once opened; all const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/types.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"

namespace zipg::shard {

// The files of a shard directory, as listed in the store manifest.
inline constexpr const char* kShardFiles[] = {"edges.meta", "edges.zcf", "nodes.idx", "nodes.zcf"};

class Shard {
 public:
  static StatusOr<std::unique_ptr<Shard>> Open(const std::string& dir,
                                               const layout::OpenOptions& options = {});

  const layout::NodeFile& nodes() const { return *nodes_; }
  const layout::EdgeFile& edges() const { return *edges_; }

  // Node reads, for nodes this shard owns.
  StatusOr<std::optional<Properties>> GetNodeProperty(int64_t id,
                                                      const std::vector<std::string>* names) const;
  StatusOr<bool> NodeMatches(int64_t id, const Properties& filter) const;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) const;

  // Edge reads, for sources this shard owns. Arguments are validated by the caller.
  // Sorted distinct destinations of id's edges of `type` (or all types), unfiltered.
  StatusOr<std::vector<int64_t>> NeighborIds(int64_t id, std::optional<int64_t> type) const;
  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) const;
  StatusOr<std::pair<int64_t, int64_t>> EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                  int64_t hi) const;
  StatusOr<std::optional<Edge>> EdgeData(int64_t id, int64_t type, int64_t time_order) const;
  StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                         int64_t limit) const;
  StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type, const std::vector<int64_t>& ids,
                                       int64_t low, int64_t high) const;
  StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low, int64_t high,
                                             int64_t limit) const;

 private:
  Shard() = default;
  std::unique_ptr<layout::NodeFile> nodes_;
  std::unique_ptr<layout::EdgeFile> edges_;
};

}  // namespace zipg::shard
