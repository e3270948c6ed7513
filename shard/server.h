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
#include <set>
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
  // The shards served here now, sorted (Serve and Unserve change it).
  std::vector<uint32_t> hosted() const;
  bool Hosts(uint32_t shard) const { return Slot(shard) != nullptr; }

  // Applies a batch of update pointers / deletions pushed by the LogStore to hosted shard
  // `shard` (docs/replication.md, "Pushing"): behind, applying nothing, if `prev` is newer than
  // the shard's last applied id; a serving shard then stops serving and on_behind is called.
  StatusOr<PushAnswer> ApplyPush(uint32_t shard, uint64_t prev,
                                 const std::vector<engine::Update>& batch);
  // A commit notice (shard/update_channel.h): every update of `shard` up to `committed` is
  // committed. `prev` (0: none) is the sender's last update; a serving shard that has not
  // applied it stops serving and catches up, as for a push.
  void ApplyCommit(uint32_t shard, uint64_t prev, uint64_t committed);
  // Reads of one node return only committed states (docs/consistency.md): one that began while
  // the node had an uncommitted update reads again once it is committed. Reads are refused while
  // `lease_valid` says this server's membership lease may have expired. Off (the default): reads
  // see whatever this replica has applied (read-your-writes only).
  void SetLinearizable(bool on, std::function<bool()> lease_valid = nullptr);
  // Per hosted shard: the committed id, recently written nodes tracked, reads read again.
  nlohmann::json CommitStats() const;
  // The LogStore update sender that `shard`'s pushes or feed now come from (its id; 0: unknown,
  // ignored). If another sender came before, every update of the shard applied here and not yet
  // committed is undone (engine/live_shard.h RollBackUncommitted; docs/write-pipeline.md,
  // "Provisional pointers"): a LogStore leader posts a group's pointers while its log syncs, and
  // the next sender (a new leader, or the same one started again) may not hold their records.
  // The updates undone come again from the new sender: its first batch resends them or finds
  // the shard behind, and the receiver takes its commits only after that batch. Called by the
  // update receiver before each request is taken (the same sender again costs an atomic load);
  // the receiver is the only one that changes the sender once noted, since the fence admits only
  // the newest leader's requests there. Returns how many updates were undone.
  StatusOr<size_t> NoteSender(uint32_t shard, uint64_t sender);
  // Applies updates read from the feed of the LogStore whose update sender is `sender` (catching
  // up); already applied ones are skipped. If the shard has noted another sender (NoteSender),
  // nothing is applied: UNAVAILABLE, the catch-up reads again once the pushes have settled which
  // LogStore leads (a deposed leader may still answer feed reads). `sender` 0: not checked.
  Status ApplyFeed(uint32_t shard, const std::vector<engine::Update>& batch, uint64_t sender = 0);
  // For an adoption's feed reads: OK if `sender` is the shard's noted sender (noting it if none
  // was), else UNAVAILABLE.
  Status FeedFromCurrentSender(uint32_t shard, uint64_t sender);
  // The last update id applied to hosted shard `shard`.
  uint64_t LastId(uint32_t shard) const;

  // Serving is per shard (docs/cluster-changes.md, step 2): a shard answers reads once it has
  // caught up with the LogStore's feed, and stops (alone) when a push finds it behind.
  // Pushes answered "behind" so far, by every shard and by `shard`.
  uint64_t refused() const { return refused_.load(); }
  uint64_t refused(uint32_t shard) const;
  // Whether every hosted shard answers reads (a shard catching up answers them UNAVAILABLE).
  bool serving() const;
  // The hosted shards that do not answer reads (catching up), sorted.
  std::vector<uint32_t> CatchingUp() const;
  // Every hosted shard stops answering reads (a lost lease; shutting down).
  void StopServing();
  // Shard `shard` serves again unless a push to it was refused since refused(shard) was
  // `refused_before`.
  bool StartServing(uint32_t shard, uint64_t refused_before);
  // Called (on the update thread) when a push finds a serving shard behind, and when a shard is
  // added. Set before serving.
  void OnBehind(std::function<void()> f) { on_behind_ = std::move(f); }

  // Adds shard `shard` to the shards served here, not answering reads until it caught up (on
  // the catch-up thread, which on_behind wakes): fetches its files first if the store lacks
  // them (`fetch`, set by SetFetcher), opens them and its delta file. Then on_hosted is called,
  // to publish the new list. A shard served already is OK. Blocks while another Serve or
  // Unserve runs.
  Status Serve(uint32_t shard);
  // Stops serving `shard`: its reads are refused at once, it leaves hosted() and on_hosted is
  // called. FAILED_PRECONDITION if no other member serves it (etcd's view): a copy leaves only
  // after another serves. Its last shard may leave a server (a drained host), which then serves
  // none until Serve. Its objects stay until the server closes (calls running on them finish);
  // its files and delta file stay on disk.
  Status Unserve(uint32_t shard);
  // Fetches `shard`'s files into the store (shard/fetch.h) when they are missing; its report
  // (null if nothing was fetched).
  using Fetcher = std::function<StatusOr<nlohmann::json>(uint32_t shard)>;
  void SetFetcher(Fetcher f) { fetch_ = std::move(f); }
  void OnHosted(std::function<void()> f) { on_hosted_ = std::move(f); }
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

  // get_node_ids on the listed shards, all hosted here; sorted. `count`: the shard count the
  // list is numbered by (Resolve).
  StatusOr<std::vector<int64_t>> LocalNodeIds(const std::vector<int32_t>& shards,
                                              const Properties& properties, uint32_t count = 0);
  // search_node_ids on the listed shards, all hosted here: the first q.limit + 1 ids, sorted.
  StatusOr<std::vector<int64_t>> LocalSearchNodeIds(const std::vector<int32_t>& shards,
                                                    const NodeSearch& q, uint32_t count = 0);
  // traverse_sources on the listed shards (numbered by `count`, Resolve), all hosted here.
  StatusOr<std::vector<int64_t>> LocalSources(const std::vector<int32_t>& shards, uint32_t count,
                                              bool include_dsts,
                                              const layout::ShardReader::ListBounds& bounds);
  // filter_nodes: the ids (owned by shards served here) whose node matches every pair, sorted.
  StatusOr<std::vector<int64_t>> LocalFilter(const std::vector<int64_t>& ids,
                                             const Properties& properties);
  // traverse_expand: a traversal step on visits of nodes owned by shards served here.
  StatusOr<std::vector<graph::Visit>> LocalExpand(const graph::PathAutomaton& automaton,
                                                  const std::vector<graph::Visit>& visits,
                                                  int64_t deadline_ms, uint64_t max_visits);
  // The shards of this server that make up the listed shards of a store of `count` shards (0:
  // this server's count): the same ones, or after a split here, shard r of `count` is shards
  // t with t mod count = r (docs/cluster-changes.md, step 4). UNAVAILABLE if `count` is larger
  // than this server's (it has not switched yet: the caller tries another replica).
  StatusOr<std::vector<uint32_t>> Resolve(const std::vector<int32_t>& shards, uint32_t count) const;

  // Splits (docs/cluster-changes.md, step 4). Prepares the split to `count` (twice this server's
  // count) of every hosted shard: its halves are built and kept current (engine/live_shard.h
  // Split). Returns summaries by shard.
  StatusOr<nlohmann::json> PrepareSplit(uint32_t count);
  // A server that hosts nothing yet (an added host) takes the cluster's count after a split: its
  // shards are then fetched from replicas as versions (Serve).
  Status JoinLayout(uint32_t count);
  // After a split: <updates dir>/layout.json, {"shards", "dir", "hosted"} (atomically).
  Status WriteLayoutFile() const;
  // {"shards": count, "prepared": {shard: count}, "marked": [...]}.
  nlohmann::json SplitStats() const;
  // Whether hosted shard `shard` has applied a split's layout mark and waits for the marks of
  // the other hosted shards before the switch (a catch-up moves on to them).
  bool AwaitingSwitch(uint32_t shard) const;
  // Snapshots are handed out by the LogStore, through aggregators.
  StatusOr<uint64_t> Snapshot() override {
    return Status::InvalidArgument(
        "snapshot: ask an aggregator (shard servers do not hand out "
        "snapshots)");
  }

 protected:
  StatusOr<ShardRef> LocalShard(uint32_t index) override;
  // Whether the cluster map has a serving replica of shard `index` other than this server.
  bool OthersServe(uint32_t index) const;
  Status ReadNode(uint32_t shard, int64_t id, const NodeRead& read) override;
  Status ReadNodeOnce(int64_t id, const NodeRead& read);
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

  // One shard served here: its files, its writes, and whether it answers reads.
  struct Hosting {
    std::unique_ptr<layout::Shard> base;  // null for a split's half (its versions only)
    std::unique_ptr<engine::LiveShard> live;
    // Serializes the prev check with the apply, so pushes and feed reads apply in order.
    std::mutex apply_mu;
    // Which nodes wait for a commit (linearizable reads).
    std::unique_ptr<CommitTracker> commits;
    std::mutex rebuild_mu;  // one rebuild or adoption at a time
    std::atomic<bool> serving{false};
    std::atomic<uint64_t> refused{0};      // pushes refused as behind
    std::atomic<uint64_t> rolled_back{0};  // uncommitted updates undone (NoteSender)
    std::atomic<uint64_t> sender{0};       // the update sender last noted (set under apply_mu)
    // The id of the split's layout mark once applied here (every update up to it is committed).
    std::atomic<uint64_t> layout_mark{0};
    std::string rebuild_error;  // the last failure; guarded by ServerGraph::rebuild_mu_
  };
  // ApplyFeed's check (apply_mu held): OK if `sender` is 0, the noted sender, or the first one.
  static Status FromSenderLocked(Hosting& h, uint64_t sender);
  // Builds a Hosting from files on disk: `base` (null for a split's shard) and the delta and
  // versions at `prefix`.
  StatusOr<std::unique_ptr<Hosting>> OpenHosting(std::unique_ptr<layout::Shard> base,
                                                 const std::string& prefix);
  // A split to `count` shards: its directory in the updates dir ("split-<count>"), made; and
  // the halves of hosted shard `shard` built there and attached (LiveShard::Split).
  static std::string SplitDir(uint32_t count);
  Status MakeSplitDir(uint32_t count) const;
  StatusOr<nlohmann::json> SplitHosted(Hosting& h, uint32_t shard, uint32_t count);
  // Where shard `shard`'s delta and versions live: <updates dir>/shard-<s>, or after a split
  // <updates dir>/<layout dir>/shard-<s>.
  std::string ShardPrefix(uint32_t shard) const;
  // Shard `shard`'s Hosting if it is served here now, else null. A pointer read stays valid
  // until the ServerGraph closes.
  Hosting* Slot(uint32_t shard) const {
    return shard < kMaxSlots ? slots_[shard].load(std::memory_order_acquire) : nullptr;
  }
  // The Hosting that owns node `id` now (null if not hosted), consistent with a split's switch
  // (which publishes the high halves, then the count, then the low halves).
  Hosting* NodeSlot(int64_t id, uint32_t* shard = nullptr) const;
  // After an applied batch: a layout mark of a split to twice this count (the LogStore's
  // switch) is noted for `shard`; once every hosted shard has its mark, SwitchLayout.
  void NoteLayoutMark(uint32_t shard, const std::vector<engine::Update>& batch);
  // Each hosted shard's halves replace it (built now if they were not prepared), the count
  // becomes `count`, layout.json is written, and on_hosted is called.
  Status SwitchLayout(uint32_t count);
  static constexpr uint32_t kMaxSlots = UpdateSender::kMaxLanes;
  // Runs `op`, a read of several shards by a shard count it takes from num_shards() (a
  // listing, a search, a filter, an expansion, a node read), again if a split switched while it
  // ran. A switch publishes the high halves, then the count, then the low halves: a read that
  // finds the count unchanged afterwards read no low half in place of its parent (which would
  // lack the nodes of the high half, docs/cluster-changes.md step 4).
  template <typename Op>
  auto OnStableCount(Op&& op) const -> decltype(op()) {
    for (;;) {
      const uint32_t before = num_shards();
      auto result = op();
      if (num_shards() == before) return result;
    }
  }
  // Whether shard `shard` is hosted here and answers reads. The cross-shard steps (filters,
  // expansions, listings, searches) run a shard here only then: one still catching up here is
  // asked of a replica that serves it, as if it were not hosted here.
  bool ServesHere(uint32_t shard) const;
  // Whether every part of shard `shard` of a store of `count` shards serves here (ServesHere).
  bool ServesAll(uint32_t shard, uint32_t count) const;
  // The shards of `map` (this server's count without one) into those served here whole and the
  // others; the count they are numbered by.
  uint32_t SplitByHost(const cluster::ShardMap* map, std::vector<int32_t>* local,
                       std::vector<uint32_t>* remote) const;

  OpenedStore store_;  // its manifest (each shard's files live in its Hosting)
  std::string store_dir_;
  GraphOpenOptions open_options_;
  std::unique_ptr<LogStoreSource> log_;
  // By shard: the Hosting of a shard served here now (null: not served here). Published with
  // release once built; never freed before the destructor. kMaxSlots of them.
  std::unique_ptr<std::atomic<Hosting*>[]> slots_;
  // After a split: the directory (in the updates dir) of the shards' files ("" before any).
  std::string layout_dir_;       // guarded by hosting_mu_ (read unlocked only before serving)
  mutable std::mutex split_mu_;  // guards marked_
  std::set<uint32_t> marked_;    // hosted shards whose layout mark has been applied
  std::vector<std::unique_ptr<Hosting>> retired_;  // split parents (guarded by kept_mu_)
  std::mutex hosting_mu_;       // serializes Serve and Unserve (held while a shard is fetched)
  mutable std::mutex kept_mu_;  // guards kept_
  std::vector<std::unique_ptr<Hosting>> kept_;  // by shard: every Hosting made, until closing
  std::shared_ptr<const std::vector<uint32_t>> hosted_;  // swapped whole (std::atomic_load)
  Fetcher fetch_;
  std::function<void()> on_hosted_;
  std::atomic<bool> linearizable_{false};
  std::function<bool()> lease_valid_;
  // How long a read waits for a commit when its call has no deadline.
  static constexpr int kCommitWaitMs = 10000;
  std::mutex serving_mu_;  // orders refusals with StartServing
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
  // OK while shard `h` answers reads here: serving, and (linearizable) the lease surely held.
  Status Answering(const Hosting& h) const;
  // A push or notice found shard `h` behind: it stops serving and catches up (on_behind).
  // `count`: add to refused() even if it was not serving (a push; a notice only when serving).
  void FellBehind(Hosting& h, bool count);
  // Hosted shard `shard`, or INVALID_ARGUMENT.
  StatusOr<Hosting*> Hosted(uint32_t shard) const;
  bool IsBuilder(uint32_t shard, const cluster::ShardMap* map) const;
  // The serving replica of `shard` with the newest version newer than this one's ("" if none).
  std::string NewerPeer(uint32_t shard, const cluster::ShardMap* map) const;
  void VersionsChanged(uint32_t shard);
  // The listing of `peer`'s current version of `shard` ({"version", "through", "files"}).
  StatusOr<nlohmann::json> PeerVersion(uint32_t shard, const cluster::MemberInfo& peer) const;
  // Fetches its files into directory `into` (synced; removed on failure); the bytes fetched.
  StatusOr<uint64_t> FetchVersion(uint32_t shard, const cluster::MemberInfo& peer,
                                  const nlohmann::json& listing, const std::string& into) const;
  // After a split, a shard not held here: a serving replica's current version at
  // ShardPrefix(shard) (its delta catches up from the feed after the version's `through`).
  Status FetchSplitShard(uint32_t shard);
  RebuildOptions rebuild_;
  std::string updates_dir_;
  std::string self_;
  std::function<void()> on_versions_;
  mutable std::mutex rebuild_mu_;  // guards Hosting::rebuild_error
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
                      const std::map<std::string, std::string>& properties,
                      int32_t num_shards) override;
  void local_search_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                             const rpc::SearchRequest& search, int32_t num_shards) override;
  void traverse_expand(rpc::Visits& _return, const std::vector<rpc::Transition>& automaton,
                       const rpc::Visits& visits, int64_t deadline_ms, int64_t max_visits) override;
  void traverse_sources(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                        bool include_dsts, int64_t deadline_ms, int64_t max_ids,
                        int32_t num_shards) override;
  void admin_rebuild(std::string& _return, const std::vector<int32_t>& shards,
                     const std::string& from_member) override;
  void admin_split(std::string& _return, int32_t shards) override;
  void admin_serve(int32_t shard) override;
  void admin_unserve(int32_t shard) override;
  void rebuilt_version(std::string& _return, int32_t shard) override;
  void store_chunk(std::string& _return, const std::string& path, int64_t offset,
                   int32_t length) override;
  void rebuilt_chunk(std::string& _return, int32_t shard, int64_t version, const std::string& path,
                     int64_t offset, int32_t length) override;

 private:
  ServerGraph* graph_;
};

}  // namespace zipg::shard
