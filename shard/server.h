// The shard server: hosts some shards of a store (mmap'd, opened read-only) and answers
// ShardService calls for the nodes they own, merged with the writes (docs/writes.md): each hosted
// shard is read through a MergedShard whose delta index (<store>/updates/shard-<s>.delta) the
// LogStore fills over the update channel. Cross-shard work that reaches it is shipped on to the
// servers holding the data (multi-level function shipping, docs/serving.md):
//   - get_neighbor_ids with a filter: the neighbors are grouped by owning shard; groups on shards
//     hosted here are checked in-process, the others go to their servers as filter_nodes calls,
//     concurrently;
//   - get_node_ids (if a client asks a shard server directly): local_node_ids on every server.
// Peers are found through the ClusterView; calls to them use pooled connections and a fan-out
// thread pool.
//
// Thread-safety: every operation may be called concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/membership.h"
#include "engine/live_shard.h"
#include "engine/merged.h"
#include "graph/graph.h"
#include "graph/router.h"
#include "rpc/connection_pool.h"
#include "rpc/graph_handler.h"
#include "rpc/remote_graph.h"
#include "shard/commit_tracker.h"
#include "shard/update_channel.h"
#include "util/thread_pool.h"
#include "zipg_rpc/ShardService.h"

namespace zipg::shard {

// When the hosted shards are rebuilt (docs/writes.md, "Rebuilding a base shard").
struct RebuildOptions {
  // A shard is rebuilt when its delta holds this many bytes in memory; 0: only when asked
  // (zipg admin rebuild).
  uint64_t delta_bytes = uint64_t{64} << 20;
  // Memory one rebuild may use; 0: graph::Compress's default share of the memory available.
  uint64_t memory = 0;
  // How long the hosted shards keep the versions reads at a snapshot need (docs/consistency.md).
  int snapshot_retention_ms = 60000;
};

class ServerGraph final : public ShardRouter {
 public:
  // Opens the listed shards of the store at `dir`. `view` and `pools` reach the peers; both
  // must outlive the ServerGraph. `view` may be null (then no peer can be reached).
  // Its applied updates live in `updates_dir` (empty: <dir>/updates), one delta file per shard.
  // Applied updates are acknowledged once written; a background thread makes them durable
  // within kSyncIntervalMs (docs/replication.md, "Durability on the shards").
  static StatusOr<std::unique_ptr<ServerGraph>> Open(
      const std::string& dir, const std::vector<uint32_t>& shards, const GraphOpenOptions& options,
      const cluster::ClusterView* view, rpc::PoolSet* pools, const std::string& updates_dir = "",
      const RebuildOptions& rebuild = {});
  ~ServerGraph() override;
  static constexpr int kSyncIntervalMs = 50;

  const graph::Manifest& manifest() const { return store_.manifest; }
  const std::vector<uint32_t>& hosted() const { return hosted_; }

  // Applies a batch of update pointers / deletions pushed by the LogStore to hosted shard
  // `shard` (docs/replication.md, "Pushing"): behind, applying nothing, if `prev` is newer than
  // the shard's last applied id; a serving server then stops serving and calls on_behind.
  StatusOr<PushAnswer> ApplyPush(uint32_t shard, uint64_t prev,
                                 const std::vector<engine::Update>& batch);
  // A commit notice (shard/update_channel.h): every update of `shard` up to `committed` is
  // committed. `prev` (0: none) is the sender's last update; a serving replica that has not
  // applied it stops serving and catches up, as for a push.
  void ApplyCommit(uint32_t shard, uint64_t prev, uint64_t committed);
  // Reads of one node return only committed states (docs/consistency.md): one that began while
  // the node had an uncommitted update reads again once it is committed. Reads are refused while
  // `lease_valid` says this server's membership lease may have expired. Off (the default): reads
  // see whatever this replica has applied (read-your-writes only).
  void SetLinearizable(bool on, std::function<bool()> lease_valid = nullptr);
  // Per hosted shard: the committed id, recently written nodes tracked, reads read again.
  nlohmann::json CommitStats() const;
  // Applies updates read from the LogStore's feed (catching up); already applied ones are skipped.
  Status ApplyFeed(uint32_t shard, const std::vector<engine::Update>& batch);
  // The last update id applied to hosted shard `shard`.
  uint64_t LastId(uint32_t shard) const;
  // Pushes answered "behind" so far.
  uint64_t refused() const { return refused_.load(); }
  // Whether reads are answered (a replica catching up answers them UNAVAILABLE). True after Open.
  bool serving() const { return serving_.load(); }
  void StopServing();
  // Serves again unless a push was refused since refused() was `refused_before`.
  bool StartServing(uint64_t refused_before);
  // Called (on the update thread) when a push finds this server behind. Set before serving.
  void OnBehind(std::function<void()> f) { on_behind_ = std::move(f); }
  // Nodes touched by writes, per hosted shard.
  nlohmann::json UpdateStats() const;
  // Rebuilds hosted shard `shard` now (engine/live_shard.h); its summary.
  StatusOr<nlohmann::json> Rebuild(uint32_t shard);
  // Adopts replica `from`'s current version of `shard` (fetches its files, then
  // LiveShard::Adopt with the LogStore's feed); its summary. A shard's rebuild is built once, by
  // its first serving replica by name (the builder), whose threshold starts it; the others adopt
  // it when they see it in the builder's registration (checked every second).
  StatusOr<nlohmann::json> Adopt(uint32_t shard, const std::string& from);
  // This server's member name (set before serving), for the builder choice and feed reads.
  void SetSelf(const std::string& name) { self_ = name; }
  // Called after a hosted shard changed version (to re-register with Versions()).
  void OnVersions(std::function<void()> f) { on_versions_ = std::move(f); }
  std::map<uint32_t, int64_t> Versions() const;
  // For a replica that adopts: the current version's listing (JSON) and a piece of a file.
  StatusOr<std::string> RebuiltVersion(uint32_t shard) const;
  StatusOr<std::string> RebuiltChunk(uint32_t shard, int64_t version, const std::string& path,
                                     uint64_t offset, uint64_t length) const;
  static constexpr int32_t kFetchChunk = 4 << 20;
  // For a server that fetches a shard (shard/fetch.h): a piece of a base store file, if
  // shard::Fetchable says it may be handed out.
  StatusOr<std::string> StoreChunk(const std::string& path, uint64_t offset, uint64_t length) const;
  // Per hosted shard, its version and rebuilds (LiveShard::Stats).
  nlohmann::json RebuildStats() const;
  // Bytes the hosted shards' delta indexes hold in memory.
  uint64_t AccountedBytes() const;

  // get_node_ids on the listed shards, all hosted here; sorted.
  StatusOr<std::vector<int64_t>> LocalNodeIds(const std::vector<int32_t>& shards,
                                              const Properties& properties);
  // search_node_ids on the listed shards, all hosted here: the first q.limit + 1 ids, sorted.
  StatusOr<std::vector<int64_t>> LocalSearchNodeIds(const std::vector<int32_t>& shards,
                                                    const NodeSearch& q);
  // Snapshots are handed out by the LogStore, through aggregators.
  StatusOr<uint64_t> Snapshot() override {
    return Status::InvalidArgument(
        "snapshot: ask an aggregator (shard servers do not hand out "
        "snapshots)");
  }

 protected:
  StatusOr<ShardRef> LocalShard(uint32_t index) override;
  Status ReadNode(uint32_t shard, int64_t id, const NodeRead& read) override;
  StatusOr<std::vector<int64_t>> NodeIdsOnAllShards(const Properties& properties) override;
  StatusOr<std::vector<int64_t>> SearchOnAllShards(const NodeSearch& q) override;
  StatusOr<std::vector<int64_t>> FilterGroups(
      const std::map<uint32_t, std::vector<int64_t>>& groups,
      const Properties& properties) override;
  StatusOr<std::vector<graph::Visit>> ExpandGroups(
      const graph::PathAutomaton& automaton,
      const std::map<uint32_t, std::vector<graph::Visit>>& groups,
      const graph::TraversalBudget& budget) override;
  StatusOr<std::vector<int64_t>> SourcesOnAllShards(bool include_dsts,
                                                    const graph::TraversalBudget& budget) override;

 private:
  ServerGraph() : fanout_(8) {}

  // Reads a written node's data from the LogStore (through the cluster view). Each read names
  // the committed id of the node's shard here (`committed`), so that a LogStore that has applied
  // less refuses it (thrift/zipg.thrift, applied_through).
  class LogStoreSource final : public engine::FragmentSource {
   public:
    LogStoreSource(const cluster::ClusterView* view, rpc::PoolSet* pools,
                   std::function<uint64_t(int64_t node)> committed)
        : view_(view), pools_(pools), committed_(std::move(committed)) {}
    StatusOr<std::optional<Properties>> FragmentProperties(
        int64_t id, const std::vector<int64_t>& generations) override;
    StatusOr<std::vector<Edge>> FragmentEdges(int64_t id, int64_t type,
                                              const std::vector<int64_t>& generations,
                                              const std::vector<int64_t>& dsts) override;
    StatusOr<std::vector<std::vector<Edge>>> FragmentEdgesBatch(
        const std::vector<Ask>& asks) override;

   private:
    StatusOr<rpc::RemoteGraph> Remote() const;

    const cluster::ClusterView* view_;
    rpc::PoolSet* pools_;
    std::function<uint64_t(int64_t node)> committed_;
  };

  OpenedStore store_;
  std::string store_dir_;
  std::unique_ptr<LogStoreSource> log_;
  std::vector<std::unique_ptr<engine::LiveShard>> live_;  // null for shards not hosted
  std::vector<uint32_t> hosted_;
  // Per shard: serializes the prev check with the apply, so pushes and feed reads apply in order.
  std::vector<std::unique_ptr<std::mutex>> apply_mu_;
  // Per shard (null if not hosted): which nodes wait for a commit (linearizable reads).
  std::vector<std::unique_ptr<CommitTracker>> commits_;
  std::atomic<bool> linearizable_{false};
  std::function<bool()> lease_valid_;
  // How long a read waits for a commit when its call has no deadline.
  static constexpr int kCommitWaitMs = 10000;
  std::mutex serving_mu_;  // orders refusals with StartServing
  std::atomic<bool> serving_{true};
  std::atomic<uint64_t> refused_{0};
  std::function<void()> on_behind_;
  const cluster::ClusterView* view_ = nullptr;
  rpc::PoolSet* pools_ = nullptr;
  ThreadPool fanout_;
  // Makes the hosted shards' applied updates durable every kSyncIntervalMs.
  void SyncLoop();
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool stop_sync_ = false;  // guarded by sync_mu_
  std::thread syncer_;

  // Rebuilds a hosted shard whose delta passed RebuildOptions::delta_bytes (checked every
  // second, at nice 10).
  void RebuildLoop();
  // OK while this replica answers reads: serving, and (linearizable) its lease surely held.
  Status Answering() const;
  // A push or notice found this replica behind: it stops serving and catches up (on_behind).
  // `count`: add to refused() even if it was not serving (a push; a notice only when serving).
  void FellBehind(bool count);
  // Hosted shard `shard`, or INVALID_ARGUMENT.
  StatusOr<engine::LiveShard*> Hosted(uint32_t shard) const;
  bool IsBuilder(uint32_t shard, const cluster::ShardMap* map) const;
  // The serving replica of `shard` with the newest version newer than this one's ("" if none).
  std::string NewerPeer(uint32_t shard, const cluster::ShardMap* map) const;
  void VersionsChanged(uint32_t shard);
  RebuildOptions rebuild_;
  std::string updates_dir_;
  std::string self_;
  std::function<void()> on_versions_;
  std::vector<std::unique_ptr<std::mutex>> shard_rebuild_mu_;  // one rebuild or adoption at a time
  mutable std::mutex rebuild_mu_;                              // guards rebuild_errors_
  std::vector<std::string> rebuild_errors_;                    // per shard: the last failure
  std::thread rebuilder_;
};

// The Thrift handler: GraphService through the ServerGraph, plus the shipped sub-queries.
class ShardHandler final : public rpc::ShardServiceIf, public rpc::GraphHandler {
 public:
  ShardHandler(ServerGraph* graph, std::function<StatusOr<std::string>()> status)
      : rpc::GraphHandler(graph, std::move(status)), graph_(graph) {}

  void filter_nodes(std::vector<int64_t>& _return, const std::vector<int64_t>& ids,
                    const std::map<std::string, std::string>& properties) override;
  void local_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                      const std::map<std::string, std::string>& properties) override;
  void local_search_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                             const rpc::SearchRequest& search) override;
  void traverse_expand(rpc::Visits& _return, const std::vector<rpc::Transition>& automaton,
                       const rpc::Visits& visits, int64_t deadline_ms, int64_t max_visits) override;
  void traverse_sources(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                        bool include_dsts, int64_t deadline_ms, int64_t max_ids) override;
  void admin_rebuild(std::string& _return, const std::vector<int32_t>& shards,
                     const std::string& from_member) override;
  void rebuilt_version(std::string& _return, int32_t shard) override;
  void store_chunk(std::string& _return, const std::string& path, int64_t offset,
                   int32_t length) override;
  void rebuilt_chunk(std::string& _return, int32_t shard, int64_t version, const std::string& path,
                     int64_t offset, int32_t length) override;

 private:
  ServerGraph* graph_;
};

}  // namespace zipg::shard
