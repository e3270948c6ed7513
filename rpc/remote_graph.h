// RemoteGraph: the GraphApi over RPC to one server (an aggregator, or a shard server for the
// aggregators' and shard servers' own sub-queries), through a ConnectionPool. This is the C++
// client library's engine (client/client.h) and the stub the serving layer uses between servers.
//
// Requests larger than kMaxRequestBytes are refused locally with RESOURCE_EXHAUSTED before anything
// is sent; servers refuse larger frames too (docs/serving.md, "Limits").
//
// Thread-safety: safe for concurrent use (the pool gives each call its own connection).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/api.h"
#include "graph/edge_list.h"
#include "graph/traversal.h"
#include "rpc/connection_pool.h"
#include "zipg_rpc/zipg_types.h"

namespace zipg::rpc {

class BatchedWrite;  // generated (thrift/zipg.thrift)

// The largest request a client sends and a server accepts.
inline constexpr size_t kMaxRequestBytes = 16u << 20;

class RemoteGraph final : public GraphApi, public GraphWriteApi {
 public:
  explicit RemoteGraph(std::shared_ptr<ConnectionPool> pool) : pool_(std::move(pool)) {}

  ConnectionPool& pool() { return *pool_; }

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) override;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) override;
  StatusOr<SearchResult> SearchNodeIds(const NodeSearch& q) override;
  StatusOr<std::vector<int64_t>> GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                const Properties& properties) override;
  StatusOr<EdgeRecordInfo> GetEdgeRecord(int64_t id, int64_t type) override;
  StatusOr<std::pair<int64_t, int64_t>> GetEdgeRange(int64_t id, int64_t type, int64_t t_lo,
                                                     int64_t t_hi) override;
  StatusOr<std::optional<zipg::Edge>> GetEdgeData(int64_t id, int64_t type,
                                                  int64_t time_order) override;
  StatusOr<std::optional<zipg::Node>> ObjGet(int64_t id) override;
  StatusOr<std::vector<zipg::Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                               int64_t limit) override;
  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) override;
  StatusOr<std::vector<zipg::Edge>> AssocGet(int64_t id, int64_t type,
                                             const std::vector<int64_t>& ids, int64_t low,
                                             int64_t high) override;
  StatusOr<std::vector<zipg::Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                   int64_t high, int64_t limit) override;

  StatusOr<std::vector<zipg::BfsEntry>> Bfs(int64_t id,
                                            const std::optional<std::vector<int64_t>>& types,
                                            int32_t max_depth, int64_t limit) override;
  StatusOr<zipg::RpqResult> Rpq(const std::string& expr,
                                const std::optional<std::vector<int64_t>>& sources,
                                int64_t limit) override;

  Status ObjAdd(int64_t id, const Properties& properties) override;
  Status ObjUpdate(int64_t id, const Properties& properties) override;
  StatusOr<bool> ObjDelete(int64_t id) override;
  StatusOr<bool> AssocAdd(const zipg::Edge& edge) override;
  Status AssocUpdate(const zipg::Edge& edge) override;
  StatusOr<bool> AssocDelete(int64_t src, int64_t type, int64_t dst) override;
  StatusOr<std::string> Compact() override;
  StatusOr<uint64_t> Snapshot() override;
  // Sends the writes as write_batch calls of at most kBatchWrites writes and about
  // kMaxRequestBytes / 2 bytes each, one after the other; a call that fails (transport) fails
  // each of its writes with its error.
  std::vector<StatusOr<bool>> WriteBatch(const std::vector<zipg::Write>& writes) override;
  static constexpr size_t kBatchWrites = 4096;

  // LogStore calls (LogStoreService): a node's live data in the listed generations (type -1 and
  // no any_type: properties only), and get_node_ids over the LogStore's fragments.
  // `applied_through`: UNAVAILABLE unless the LogStore has applied every update up to it
  // (thrift/zipg.thrift; 0: no check).
  StatusOr<NodeData> Fragment(int64_t id, bool any_type, int64_t type,
                              const std::vector<int64_t>& generations,
                              uint64_t applied_through = 0);
  StatusOr<std::vector<zipg::Edge>> FragmentEdges(int64_t id, int64_t type,
                                                  const std::vector<int64_t>& generations,
                                                  const std::vector<int64_t>& dsts,
                                                  uint64_t applied_through = 0);
  // fragment_edges_batch: one answer per ask, in order.
  StatusOr<std::vector<std::vector<zipg::Edge>>> FragmentEdgesBatch(
      const std::vector<FragmentAsk>& asks, uint64_t applied_through = 0);
  StatusOr<std::vector<int64_t>> LogNodeIds(const Properties& properties);
  // search_node_ids over the LogStore's fragments: the first q.limit + 1 ids, sorted.
  StatusOr<std::vector<int64_t>> LogSearchNodeIds(const NodeSearch& q);
  // The LogStore's update feed of a base shard after id `after`, for replica `member`.
  // `num_shards`: the count `shard` is numbered by (0: the LogStore's).
  StatusOr<UpdateFeedChunk> UpdatesSince(uint32_t shard, uint64_t after, const std::string& member,
                                         uint32_t num_shards = 0);
  // One write_batch call: one outcome per write, in order (docs/writes.md, "Write batches"); a
  // transport failure fails the whole call.
  StatusOr<std::vector<StatusOr<bool>>> SendWriteBatch(const std::vector<BatchedWrite>& writes);

  // The server's status document (JSON text).
  StatusOr<std::string> ServerStatus();

  // Shard-server sub-queries (ShardService).
  StatusOr<std::vector<int64_t>> FilterNodes(const std::vector<int64_t>& ids,
                                             const Properties& properties);
  // Calls that list shards number them by `num_shards` (the caller's map's count).
  StatusOr<std::vector<int64_t>> LocalNodeIds(const std::vector<int32_t>& shards,
                                              const Properties& properties, uint32_t num_shards);
  // search_node_ids over the listed shards of a shard server: the first q.limit + 1 ids, sorted.
  StatusOr<std::vector<int64_t>> LocalSearchNodeIds(const std::vector<int32_t>& shards,
                                                    const NodeSearch& q, uint32_t num_shards);
  // One traversal step on a shard server (traverse_expand) and its sources (traverse_sources).
  StatusOr<std::vector<graph::Visit>> TraverseExpand(const graph::PathAutomaton& automaton,
                                                     const std::vector<graph::Visit>& visits,
                                                     int64_t deadline_ms, uint64_t max_visits);
  StatusOr<std::vector<int64_t>> TraverseSources(const std::vector<int32_t>& shards,
                                                 bool include_dsts, int64_t deadline_ms,
                                                 uint64_t max_ids, uint32_t num_shards);
  // admin_split: a shard server prepares the split to `num_shards`; the LogStore switches to it.
  StatusOr<std::string> Split(uint32_t num_shards);
  // admin_rebuild: the listed shards of a shard server (all if empty), built there or adopted
  // from replica `from` (if not empty); JSON summaries.
  StatusOr<std::string> Rebuild(const std::vector<int32_t>& shards, const std::string& from = "");
  // admin_serve / admin_unserve: a shard server starts or stops serving `shard`.
  Status Serve(int32_t shard);
  Status Unserve(int32_t shard);
  // A shard server's current rebuilt version of `shard` (JSON), and a piece of one of its files.
  StatusOr<std::string> RebuiltVersion(int32_t shard);
  StatusOr<std::string> StoreChunk(const std::string& path, int64_t offset, int32_t length);
  StatusOr<std::string> RebuiltChunk(int32_t shard, int64_t version, const std::string& path,
                                     int64_t offset, int32_t length);

 private:
  std::shared_ptr<ConnectionPool> pool_;
};

// The approximate bytes one write adds to a write_batch request.
size_t RequestBytes(const BatchedWrite& write);

// RESOURCE_EXHAUSTED if a request carrying these would exceed kMaxRequestBytes.
Status CheckRequestSize(size_t ids, const Properties* properties,
                        const std::vector<std::string>* names);

}  // namespace zipg::rpc
