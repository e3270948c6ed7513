// ShardRouter: the contract's read operations over hash-partitioned shards (graph/partition.h):
// argument checks, routing each node-keyed operation to the shard that owns the node, and the two
// cross-shard steps, which subclasses may run elsewhere:
//   - get_node_ids asks every shard and merges (NodeIdsOnAllShards);
//   - get_neighbor_ids with a property filter groups the neighbors by owning shard and checks
//     each group where it lives (FilterGroups).
// The embedded Graph has every shard in-process; a shard server has some of them and ships the
// rest of the work to its peers (shard/server.h).
//
// Thread-safety: as the subclass's LocalShard and cross-shard steps; both in-tree subclasses are
// safe for concurrent use.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "graph/api.h"
#include "graph/traversal.h"
#include "layout/shard.h"

namespace zipg {

// The bounds of listing an rpq's sources within `budget` (8 bytes per id).
layout::ShardReader::ListBounds ListBoundsOf(const graph::TraversalBudget& budget);

class ShardRouter : public GraphApi {
 public:
  uint32_t num_shards() const { return num_shards_.load(std::memory_order_acquire); }

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) override;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) override;
  StatusOr<SearchResult> SearchNodeIds(const NodeSearch& q) override;
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

  StatusOr<std::vector<BfsEntry>> Bfs(int64_t id, const std::optional<std::vector<int64_t>>& types,
                                      int32_t max_depth, int64_t limit) override;
  StatusOr<RpqResult> Rpq(const std::string& expr,
                          const std::optional<std::vector<int64_t>>& sources,
                          int64_t limit) override;
  // The bounds of each traversal (default: graph::TraversalLimits()).
  void set_traversal_limits(const graph::TraversalLimits& limits) { traversal_limits_ = limits; }

  // A traversal step on shards open here: the successors of `visits` (each node owned by one of
  // them), sorted and distinct (graph::ExpandOnShard).
  StatusOr<std::vector<graph::Visit>> ExpandLocal(const graph::PathAutomaton& automaton,
                                                  std::vector<graph::Visit> visits,
                                                  int64_t deadline_ms, uint64_t max_visits);
  // The ids with a node entry or a live edge in the listed shards (open here), and with
  // `include_dsts` every destination of their live edges: sorted, distinct.
  StatusOr<std::vector<int64_t>> SourcesLocal(const std::vector<uint32_t>& shards,
                                              bool include_dsts,
                                              const layout::ShardReader::ListBounds& bounds);
  const graph::TraversalLimits& traversal_limits() const { return traversal_limits_; }

  // search_node_ids over the listed shards (open here): a part of the answer (CutSearchPart).
  StatusOr<std::vector<int64_t>> SearchLocal(const std::vector<uint32_t>& shards,
                                             const NodeSearch& q);

  // The ids (all owned by shards open here) whose node matches every pair, sorted.
  StatusOr<std::vector<int64_t>> FilterLocal(const std::vector<int64_t>& ids,
                                             const Properties& properties);

 protected:
  ShardRouter() = default;
  // A shard server's count changes once, at a split (shard/server.h).
  void set_num_shards(uint32_t n) { num_shards_.store(n, std::memory_order_release); }

  // A shard for one operation: it stays open (a shard server may swap in a rebuilt version
  // meanwhile, engine/live_shard.h) while the reference is held.
  using ShardRef = std::shared_ptr<const layout::ShardReader>;
  // Shard `index` if it is open in this process; UNAVAILABLE otherwise.
  virtual StatusOr<ShardRef> LocalShard(uint32_t index) = 0;
  // A read of node `id` on shard `shard`, one of the contract's single-object operations:
  // calls read with the shard, once or more; returns its status or the failure to read. A
  // replica makes it linearizable (docs/consistency.md). Default: LocalShard, then read.
  using NodeRead = std::function<Status(const layout::ShardReader&)>;
  virtual Status ReadNode(uint32_t shard, int64_t id, const NodeRead& read);
  // get_node_ids on every shard of the store (any order). Default: LocalShard for each.
  virtual StatusOr<std::vector<int64_t>> NodeIdsOnAllShards(const Properties& properties);
  // search_node_ids's parts from every shard of the store, concatenated (FinishSearch merges
  // them). Default: SearchLocal of every shard.
  virtual StatusOr<std::vector<int64_t>> SearchOnAllShards(const NodeSearch& q);
  // The ids of `groups` (shard -> ids it owns) whose node matches every pair (any order).
  // Default: FilterLocal on each group.
  virtual StatusOr<std::vector<int64_t>> FilterGroups(
      const std::map<uint32_t, std::vector<int64_t>>& groups, const Properties& properties);
  // ExpandLocal of visits already grouped by owning shard (all open here).
  StatusOr<std::vector<graph::Visit>> ExpandShards(
      const graph::PathAutomaton& automaton, std::map<uint32_t, std::vector<graph::Visit>> groups,
      int64_t deadline_ms, uint64_t max_visits);
  // A traversal step over `groups` (shard -> visits of nodes it owns): successors, any order,
  // duplicates allowed. Default: ExpandShards.
  virtual StatusOr<std::vector<graph::Visit>> ExpandGroups(
      const graph::PathAutomaton& automaton,
      const std::map<uint32_t, std::vector<graph::Visit>>& groups,
      const graph::TraversalBudget& budget);
  // SourcesLocal over every shard of the store (any order, duplicates allowed), within the
  // budget. Default: local.
  virtual StatusOr<std::vector<int64_t>> SourcesOnAllShards(bool include_dsts,
                                                            const graph::TraversalBudget& budget);

 private:
  class Expander;
  // read(shard) on the shard that owns node `id`, through ReadNode; read's answer.
  template <typename Read>
  auto ReadOwner(int64_t id, Read&& read)
      -> decltype(read(std::declval<const layout::ShardReader&>()));
  std::atomic<uint32_t> num_shards_{0};
  graph::TraversalLimits traversal_limits_;
};

}  // namespace zipg
