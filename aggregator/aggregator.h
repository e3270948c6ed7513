// The aggregator: the client-facing GraphService of a cluster. It holds no data. Each
// node-keyed operation goes whole to the shard server that owns the node (hash partition of
// graph/partition.h, shard map from etcd), so neighborhood work runs where the data is and only
// the result travels back; get_neighbor_ids with a filter is shipped whole as well, and its owner
// ships the filter checks on (shard/server.h). get_node_ids fans out local_node_ids to one server
// per shard group and log_node_ids to the LogStore, concurrently, and merges. Writes go to the
// LogStore (docs/writes.md); concurrent unconditional ones go together, as one write_batch
// (aggregator/write_batcher.h).
//
// Thread-safety: every operation may be called concurrently.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "aggregator/write_batcher.h"
#include "cluster/membership.h"
#include "graph/api.h"
#include "graph/traversal.h"
#include "rpc/connection_pool.h"
#include "rpc/remote_graph.h"
#include "util/thread_pool.h"

namespace zipg::aggregator {

class ClusterGraph final : public GraphApi, public GraphWriteApi {
 public:
  // `view` and `pools` must outlive the ClusterGraph. At most `write_batches` write_batch calls
  // are in flight to the LogStore (aggregator/write_batcher.h).
  ClusterGraph(const cluster::ClusterView* view, rpc::PoolSet* pools, size_t write_batches = 8);
  ~ClusterGraph() override;

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

  // Traversals: this aggregator coordinates; each step goes to the shard servers owning the
  // frontier (docs/traversal.md).
  StatusOr<std::vector<BfsEntry>> Bfs(int64_t id, const std::optional<std::vector<int64_t>>& types,
                                      int32_t max_depth, int64_t limit) override;
  StatusOr<RpqResult> Rpq(const std::string& expr,
                          const std::optional<std::vector<int64_t>>& sources,
                          int64_t limit) override;
  void set_traversal_limits(const graph::TraversalLimits& limits) { traversal_limits_ = limits; }

  // Writes (and compaction) go to the LogStore.
  Status ObjAdd(int64_t id, const Properties& properties) override;
  Status ObjUpdate(int64_t id, const Properties& properties) override;
  StatusOr<bool> ObjDelete(int64_t id) override;
  StatusOr<bool> AssocAdd(const Edge& edge) override;
  Status AssocUpdate(const Edge& edge) override;
  StatusOr<bool> AssocDelete(int64_t src, int64_t type, int64_t dst) override;
  StatusOr<std::string> Compact() override;
  // Asks the LogStore leader (LogStore::Snapshot).
  StatusOr<uint64_t> Snapshot() override;
  // A client's batch, forwarded to the LogStore as it came (in order; see rpc::RemoteGraph).
  std::vector<StatusOr<bool>> WriteBatch(const std::vector<Write>& writes) override;

  // The status document: this aggregator, the cluster's members and shard map, health.
  nlohmann::json StatusJson(const std::string& self_name, const std::string& cluster) const;

 private:
  // The shard that owns `id`; INVALID_ARGUMENT for a negative id, UNAVAILABLE if no shard server
  // is registered.
  StatusOr<uint32_t> ShardFor(int64_t id) const;
  StatusOr<rpc::RemoteGraph> LogStore();
  // An unconditional write, through the batcher.
  StatusOr<bool> Batched(rpc::WriteKind::type kind, int64_t id, int64_t type, int64_t dst,
                         int64_t timestamp, const Properties* properties);

  // When the map names a new LogStore leader, the calls still in flight to the old one fail at
  // once (rpc::ConnectionPool::Interrupt) instead of after their timeout: a paused old leader
  // would otherwise hold its writers for the whole call timeout (docs/logstore-ha.md).
  void WatchLeader();
  // The snapshot a bfs or rpq runs at: the caller's, else a new one.
  StatusOr<uint64_t> TraversalSnapshot();

  class Expander;

  const cluster::ClusterView* view_;
  rpc::PoolSet* pools_;
  graph::TraversalLimits traversal_limits_;
  ThreadPool fanout_;
  WriteBatcher batcher_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;  // guarded by watch_mu_
  std::thread leader_watch_;
};

}  // namespace zipg::aggregator
