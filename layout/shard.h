// Shard: one hash partition of a store (a NodeFile with the properties of the nodes it owns and an
// EdgeFile with their outgoing EdgeRecords), answering the shard-local part of every read
// operation directly on the compressed files. Routing and cross-shard steps (neighbor filters,
// get_node_ids over all shards) belong to the caller: the embedded Graph or an aggregator.
//
// Directory: <dir>/nodes.{zcf,idx} and <dir>/edges.{zcf,meta}.
//
// Thread-safety: immutable once opened; all const methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "model/search.h"
#include "model/types.h"

namespace zipg::layout {

// The files of a shard directory whose NodeFile and EdgeFile have these formats, as listed in the
// store manifest.
inline std::vector<std::string> ShardFiles(uint32_t node_format, uint32_t edge_format) {
  std::vector<std::string> files = {"edges.meta", layout::EdgeFile::TextPath("edges", edge_format),
                                    "nodes.idx", layout::NodeFile::TextPath("nodes", node_format)};
  if (node_format >= 3) files.push_back("nodes.sfx");
  return files;
}

// The shard-local part of every read operation, for the nodes a shard owns. Implemented by the
// compressed Shard and by the shard server's MergedShard (shard/merged.h), which adds the writes.
class ShardReader {
 public:
  virtual ~ShardReader() = default;

  // Node reads, for nodes this shard owns.
  virtual StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) const = 0;
  virtual StatusOr<bool> NodeMatches(int64_t id, const Properties& filter) const = 0;
  virtual StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) const = 0;
  // Sorted ids of the nodes with a live value matching the search (all of them: q.limit is
  // the caller's to apply, after it merges).
  virtual StatusOr<std::vector<int64_t>> SearchNodeIds(const NodeSearch& q) const = 0;

  // Edge reads, for sources this shard owns. Arguments are validated by the caller.
  // Sorted distinct destinations of id's edges of `type` (or all types), unfiltered.
  virtual StatusOr<std::vector<int64_t>> NeighborIds(int64_t id,
                                                     std::optional<int64_t> type) const = 0;
  virtual StatusOr<int64_t> AssocCount(int64_t id, int64_t type) const = 0;
  virtual StatusOr<std::pair<int64_t, int64_t>> EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                          int64_t hi) const = 0;
  virtual StatusOr<std::optional<Edge>> EdgeData(int64_t id, int64_t type,
                                                 int64_t time_order) const = 0;
  virtual StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                                 int64_t limit) const = 0;
  virtual StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type,
                                               const std::vector<int64_t>& ids, int64_t low,
                                               int64_t high) const = 0;
  virtual StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                     int64_t high, int64_t limit) const = 0;

  // The ids with a node entry here or a live edge from here, and with `include_dsts` also the
  // destinations of those edges (the sources of an rpq without sources): sorted, distinct. Reads
  // every record: for whole-store queries only. DEADLINE_EXCEEDED past bounds.deadline,
  // RESOURCE_EXHAUSTED past bounds.max_ids distinct ids.
  struct ListBounds {
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    uint64_t max_ids = UINT64_MAX;
  };
  virtual StatusOr<std::vector<int64_t>> Sources(bool include_dsts,
                                                 const ListBounds& bounds) const = 0;
};

class Shard final : public ShardReader {
 public:
  static StatusOr<std::unique_ptr<Shard>> Open(const std::string& dir,
                                               const layout::OpenOptions& options = {});

  const layout::NodeFile& nodes() const { return *nodes_; }
  const layout::EdgeFile& edges() const { return *edges_; }

  // Every edge of id (of `type`, or of all types by ascending type), each type's edges in the
  // contract's order.
  StatusOr<std::vector<Edge>> AllEdges(int64_t id, std::optional<int64_t> type) const;

  // Node reads, for nodes this shard owns.
  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) const override;
  StatusOr<bool> NodeMatches(int64_t id, const Properties& filter) const override;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) const override;
  StatusOr<std::vector<int64_t>> SearchNodeIds(const NodeSearch& q) const override;

  // Edge reads, for sources this shard owns. Arguments are validated by the caller.
  // Sorted distinct destinations of id's edges of `type` (or all types), unfiltered.
  StatusOr<std::vector<int64_t>> NeighborIds(int64_t id,
                                             std::optional<int64_t> type) const override;
  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) const override;
  StatusOr<std::pair<int64_t, int64_t>> EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                  int64_t hi) const override;
  StatusOr<std::optional<Edge>> EdgeData(int64_t id, int64_t type,
                                         int64_t time_order) const override;
  StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                         int64_t limit) const override;
  StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type, const std::vector<int64_t>& ids,
                                       int64_t low, int64_t high) const override;
  StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low, int64_t high,
                                             int64_t limit) const override;
  StatusOr<std::vector<int64_t>> Sources(bool include_dsts,
                                         const ListBounds& bounds) const override;
  // Sources, leaving out the nodes in `skip` (sorted) and their edges.
  StatusOr<std::vector<int64_t>> SourcesExcept(bool include_dsts, const std::vector<int64_t>& skip,
                                               const ListBounds& bounds) const;
  // AssocGet within a record already found in this shard's EdgeFile: its edges to `wanted`
  // (sorted, distinct) with low <= timestamp <= high, newest first.
  StatusOr<std::vector<Edge>> EdgesTo(const layout::EdgeFile::Record& record,
                                      const std::vector<int64_t>& wanted, int64_t low,
                                      int64_t high) const;

 private:
  Shard() = default;
  // The node's EdgeRecord of `type`, or all of its EdgeRecords.
  StatusOr<std::vector<layout::EdgeFile::Record>> Records(int64_t id,
                                                          std::optional<int64_t> type) const;
  std::unique_ptr<layout::NodeFile> nodes_;
  std::unique_ptr<layout::EdgeFile> edges_;
};

}  // namespace zipg::layout
