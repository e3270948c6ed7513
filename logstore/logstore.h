// LogStore: the cluster's single write-optimized store (ZipG section 3.5; design in
// docs/writes.md). It takes every write, logs it durably (WAL with group commit), fans the update
// pointer out to the base shard that owns the node (UpdateSender, acknowledged before the write
// is), and keeps the data query-optimized in a memtable. Past a memory threshold, or on
// Compact(), the current generation is frozen and compressed into a new log shard, which it
// serves itself; shard servers fetch a written node's data from it with Fragment().
//
// Directory (options.dir): STATE, wal-<G>.log, shard-<G>/ (a store of one or more hash
// partitions), shard-<G>.deletes, shard-<F>-<G>/ and shard-<F>-<G>.deletes (a merge of the log
// shards of generations F..G, docs/logstore-ha.md "Merges"), feed/shard-<s>.log
// (docs/replication.md).
//
// Thread-safety: every public method may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/edge_cache.h"
#include "engine/updates.h"
#include "graph/api.h"
#include "graph/edge_list.h"
#include "layout/shard.h"
#include "logstore/feed.h"
#include "logstore/history.h"
#include "logstore/memtable.h"
#include "logstore/property_names.h"
#include "logstore/record.h"
#include "logstore/ship.h"
#include "shard/update_channel.h"
#include "util/snapshot.h"
#include "util/wal.h"

namespace zipg::logstore {

struct LogStoreOptions {
  std::string dir;
  // Memtable size (approximate bytes) that triggers a compaction. 0: only on Compact().
  uint64_t memtable_bytes = 256ull << 20;
  // Edges read from log shards kept decoded for later reads (engine/edge_cache.h). 0: none.
  uint64_t edge_cache_bytes = 64ull << 20;
  // fdatasync every commit (false only in benchmarks of the non-durable path).
  bool sync = true;
  // How long a write waits for its base shard to confirm the update pointer.
  int update_timeout_ms = 10000;
  // Memory a compaction may use to build its log shard, in bytes. 0 (default) = 80% of the memory
  // available when it starts (graph/memory_plan.h). A generation too large to build in one
  // partition within it is built as several (a log shard is a small hash-partitioned store).
  // With merges on, a compaction and a merge may run at once: each gets the process baseline
  // (graph/memory_plan.h) plus half of the rest.
  uint64_t compaction_memory_bytes = 0;
  // Merges (docs/logstore-ha.md, "Merges"): after a compaction, the oldest run of merge_width
  // consecutive log shards whose sizes are within merge_ratio of each other is built into one,
  // so that a read of a written node asks a number of log shards logarithmic in the log's size.
  // merge_width < 2: never merge.
  uint32_t merge_width = 4;
  double merge_ratio = 2.0;
  // The cap on log shards, with merges on (at least merge_width + 1): at the cap, the merge
  // thread merges the smallest run of merge_width even if its sizes differ by more than
  // merge_ratio, and the memtable is not compacted on its threshold (it grows; writes go on)
  // until a merge makes room, or until it holds 4 times the threshold. So a read of a written
  // node asks at most this many log shards plus the two memtables, however far merges fall
  // behind (docs/logstore-ha.md, "The bound").
  uint32_t max_log_shards = 12;
  // Tests: called on the merge thread after a merge took its snapshot, before its build.
  std::function<void()> before_merge_build;
  // The base store's property names (from the shard servers' registrations): they count towards
  // the bound on distinct names (logstore/property_names.h), as a base shard's rebuild writes
  // them in one file with the LogStore's.
  std::vector<std::string> base_node_names, base_edge_names;
  // Snapshots (docs/consistency.md): reads at a snapshot taken less than this long ago are
  // answered (older ones may be FAILED_PRECONDITION).
  int snapshot_retention_ms = 60000;

  // Standby (docs/logstore-ha.md): the LogStore takes no writes and posts nothing to the shards;
  // it applies the groups its leader ships (ApplyShipped) and compacts when the leader does.
  bool standby = false;
  // Leader with a standby: every commit group is shipped to this endpoint ("tcp://host:port")
  // and acknowledged only once the standby has it durably. A standby that does not answer in
  // ship_timeout_ms, or is not where the leader is, makes the leader go on alone ("degraded").
  std::string standby_endpoint;
  int ship_timeout_ms = 1000;
  rpc::FrameSecurity ship_security;  // the cluster's TLS, when on
  // The leader's epoch (docs/logstore-ha.md, "Election"); shipped with every group and carried
  // by every update batch.
  uint64_t epoch = 0;
  // Called when the leader goes on without its standby ("degraded", with the reason), before it
  // acknowledges anything alone, and when the standby has caught up ("in_sync"). If it fails
  // to record "degraded" (the cluster's in-sync set could not be written), the group fails and
  // the next one tries again: a write is never acknowledged alone unless that was recorded.
  std::function<Status(const std::string& state, const std::string& reason)> on_sync;
};

class LogStore final : public GraphWriteApi {
 public:
  // Recovers the directory (docs/writes.md, "Recovery"), resends the live logs' updates through
  // `sink` and starts the compaction thread. `reader` answers the conditional writes' checks (the
  // cluster's read path); `publish` is called with the log shard generations after each
  // compaction. All three must outlive the LogStore.
  static StatusOr<std::unique_ptr<LogStore>> Open(
      const LogStoreOptions& options, GraphApi* reader, shard::UpdateSender* sink,
      std::function<void(std::vector<int64_t>)> publish);
  ~LogStore() override;

  Status ObjAdd(int64_t id, const Properties& properties) override;
  Status ObjUpdate(int64_t id, const Properties& properties) override;
  StatusOr<bool> ObjDelete(int64_t id) override;
  StatusOr<bool> AssocAdd(const Edge& edge) override;
  Status AssocUpdate(const Edge& edge) override;
  StatusOr<bool> AssocDelete(int64_t src, int64_t type, int64_t dst) override;
  // The writes in order: each run of unconditional ones (assoc_add, assoc_delete, obj_delete)
  // as one commit group (CommitUnconditional), each run of node writes (obj_add, obj_update) as
  // one commit group too (CommitNodeWrites), assoc_update one by one.
  std::vector<StatusOr<bool>> WriteBatch(const std::vector<zipg::Write>& writes) override;
  // obj_add / obj_update writes (a bulk node load: LinkBench's addBulkNodes), each checked in
  // order as its own call would be (against the stores and the writes of the run before it),
  // under every stripe they touch held exclusively, taken in increasing order; the valid ones
  // committed together in one commit group. One outcome each (false), in order; a write refused
  // by its check fails alone.
  std::vector<StatusOr<bool>> CommitNodeWrites(std::span<const zipg::Write> writes);
  // Unconditional writes (kPutEdge = assoc_add, kDeleteEdge = assoc_delete, kDeleteNode =
  // obj_delete; properties normalized here), committed together in one commit group (docs/
  // writes.md, "Write batches"). One outcome per record, in order, as the single call would
  // return it; a bad record fails alone.
  std::vector<StatusOr<bool>> CommitUnconditional(const std::vector<LogRecord>& records);
  // Freezes the live generation and has the compaction thread compress it; returns at once with
  // {"started", "generation"}. StatusJson's "last_compaction" reports it when published.
  StatusOr<std::string> Compact() override;

  // A fragment read's `applied_through` (thrift/zipg.thrift): OK if every update up to `id` is
  // applied here (0: no check); else UNAVAILABLE. A replica learns that an update is committed
  // only after the leader that committed it applied it, so only a LogStore that is no longer the
  // leader (or never was) has applied less than a replica's committed id: its fragments would
  // answer an older state of the node than the replica's pointers name (docs/consistency.md,
  // "Fragment reads").
  Status CheckAppliedThrough(int64_t id) const;
  // The node's live data in `generations` (edges of every type, of `type`, or none if type < 0).
  StatusOr<NodeData> Fragment(int64_t id, bool any_type, int64_t type,
                              const std::vector<int64_t>& generations);
  // The live edges of (id, type) to `dsts` in `generations`, any order. `fill_cache` false: what
  // is read from log shards is not kept in the edge cache (a rebuild's one-time scan of every
  // written edge must not push out what the reads use).
  StatusOr<std::vector<Edge>> FragmentEdges(int64_t id, int64_t type,
                                            const std::vector<int64_t>& generations,
                                            const std::vector<int64_t>& dsts,
                                            bool fill_cache = true);
  // get_node_ids over the LogStore's fragments; sorted.
  StatusOr<std::vector<int64_t>> NodeIds(const Properties& properties);
  // search_node_ids over the fragments: the first q.limit + 1 ids, sorted (CutSearchPart).
  StatusOr<std::vector<int64_t>> SearchNodeIds(const NodeSearch& q);
  // Every read above answers at the calling thread's snapshot (util/snapshot.h ReadAt): as of
  // exactly the writes with id <= it. One not yet applied here is waited for (within the call's
  // deadline); one below SnapshotFloor() is FAILED_PRECONDITION.

  // The id of the last write applied here (0: none since the store began). Every acknowledged
  // write's id is at or below it.
  uint64_t applied_id() const { return applied_id_.load(); }
  // The contract's `snapshot`: applied_id(), once the lanes of shards with no update in flight
  // have been told it (so that reads at it need not wait for a heartbeat).
  StatusOr<uint64_t> Snapshot();
  // The lowest snapshot this LogStore answers at: its retention horizon, or what it could not
  // keep (the live logs' start when it opened; a merge's swap).
  uint64_t SnapshotFloor() const;

  // A piece of base shard `shard`'s update feed after id `after`, for replica `member` catching
  // up (docs/replication.md): `included` (checked first) says whether pushes go to it now.
  struct FeedChunk {
    std::vector<engine::Update> updates;
    uint64_t head = 0;
    bool included = false;
    uint64_t sender = 0;  // the update sender's id (shard::UpdateSender::sender_id)
  };
  // `count`: the shard count the asker numbers shards by (0: the current one); across a split
  // the feed of a half is read from its parent's (docs/cluster-changes.md, step 4).
  StatusOr<FeedChunk> UpdatesSince(uint32_t shard, uint64_t after, const std::string& member,
                                   uint32_t count = 0);
  static constexpr size_t kFeedChunkUpdates = 1 << 16;

  // Splits every base shard in two (docs/cluster-changes.md, step 4): `count` must be twice the
  // current count, and every shard server must have prepared the split (admin_split). Under the
  // commit pause of a freeze: the layout [count from Z] goes into STATE and to the standby, the
  // layout mark (id Z) into every feed and to every old lane, new lanes and feeds start at Z,
  // then `publish` (the cluster's layout key, the wait for the servers) runs before writes go
  // on, fanned out by `count`. Returns a JSON summary. Leader only.
  StatusOr<nlohmann::json> Split(uint32_t count,
                                 const std::function<Status(uint32_t count)>& publish);
  // The shard layout: (count, the id of its layout mark; 0 for the first), oldest first.
  std::vector<std::pair<uint32_t, uint64_t>> Layout() const;
  // The mark a layout change numbers Z (no record has it: Z ends generation Z >> 32).
  static constexpr uint64_t kLayoutIndex = 0xFFFFFFFEull;

  // Standby: applies one request of the leader's log shipping (logstore/ship.h): an append is
  // logged (with fdatasync) and applied if it starts where this standby is; a freeze switches
  // to the next generation after the leader's last record of this one and compacts it.
  // An append or freeze of a lower epoch than one seen is refused (fenced), whatever the role.
  // A freeze that ends the generation before this standby's last record (its tail was never
  // acknowledged: it was logged by a leader that lost its leadership) discards that tail first.
  ShipReply ApplyShipped(const ShipRequest& request);

  // Standby -> leader once this process holds the leadership of `epoch` (docs/logstore-ha.md,
  // "Election and takeover"): shipments of lower epochs are refused from now on; the live logs
  // are replayed and re-sent to the base shards with the new epoch (an empty batch to the
  // others), so that every shard fences the old leader; then a new generation starts, so that
  // nothing is ever logged after the old leader's last shipped record. Writes are taken once it
  // returns OK.
  Status Promote(uint64_t epoch);
  // Leader: ships every group to the standby at `endpoint` from now on, once it has caught up
  // (until then it counts as degraded, and on_sync says "in_sync" when it is). "" stops shipping.
  void AttachStandby(const std::string& endpoint);
  // Every write fails from now on with UNAVAILABLE(reason): this LogStore lost its leadership.
  void StopWrites(const std::string& reason);
  // While suspended, every write fails with UNAVAILABLE (not logged): the leader cannot renew its
  // term now (etcd unreachable or electing its own leader), and may resume.
  void SuspendWrites(bool suspended) { writes_suspended_ = suspended; }
  bool standby() const { return standby_.load(); }
  uint64_t epoch() const { return epoch_.load(); }

  std::vector<int64_t> LogShards() const;
  nlohmann::json StatusJson() const;
  // Bytes the LogStore's in-memory data holds: the live and frozen memtables, and the deletion
  // sets of its frozen memtable and log shards.
  uint64_t AccountedBytes() const;

 private:
  struct LogShard {
    // It holds the live data of generations first_generation..generation (one, unless merged).
    int64_t first_generation = 0;
    int64_t generation = 0;
    uint64_t bytes = 0;    // its files' size on disk
    bool merging = false;  // (data lock) its deletes are also logged in merge_log_
    std::vector<std::unique_ptr<layout::Shard>> parts;  // hash partitions, one or more
    std::unique_ptr<engine::UpdateIndex> deletes;       // of all parts
    // A compacted generation's memtable history (null for a merged shard).
    std::shared_ptr<const MemHistory> history;
    // A merged shard: the applied id at its swap, and the shards it replaced (in retired_),
    // which answer reads at snapshots before it (docs/consistency.md, "Snapshots").
    uint64_t merged_at = 0;
    std::vector<const LogShard*> inputs;
    const layout::Shard* PartFor(int64_t id) const;
    bool Covers(int64_t g) const { return first_generation <= g && g <= generation; }
  };
  struct Frozen {
    int64_t generation = 0;
    std::shared_ptr<const Memtable> table;
    std::unordered_map<int64_t, engine::NodeUpdates> overlay;  // deletes since the freeze
    // Snapshots: the overlay's entries before each numbered delete, and those deletes in order
    // (the log shard's deletion set records them with their ids).
    VersionLog<int64_t, engine::NodeUpdates> overlay_history;
    std::vector<engine::Update> overlay_log;
  };

  explicit LogStore(const LogStoreOptions& options)
      : options_(options),
        standby_(options.standby),
        epoch_(options.epoch),
        edge_cache_(options.edge_cache_bytes) {}
  // `post`: send the live logs' updates to the base shards (a leader; a standby's leader does).
  Status Recover(bool post);
  // Drops the in-memory state and recovers it from the directory again (compact_mu_ held, no
  // commit group in flight). Log shards stay alive in retired_: readers may hold pointers.
  // `post`: re-send the live logs' updates to the shards (a promotion); `keep_live_records`: first
  // cut the live log after that many records (a standby dropping a tail).
  Status Reload(bool post, std::optional<uint64_t> keep_live_records = std::nullopt,
                const std::function<Status()>& before_recover = {});
  // A log shard's generations, first to last.
  using Range = std::pair<int64_t, int64_t>;
  // STATE's text for these log shards and live logs (and ends_).
  std::string StateText(const std::vector<Range>& shards, const std::vector<int64_t>& logs) const;
  // The log shards' ranges and the live logs (frozen, live) now (data lock not held).
  std::vector<Range> ShardRanges() const;
  std::vector<int64_t> LiveLogs() const;
  std::vector<int64_t> LiveLogsLocked() const;  // the data lock held
  // Leader (compact_mu_ held): copies this LogStore's directory to the standby (log shards,
  // deletion sets, feeds, the frozen and live logs as they are now), then has it install them
  // with this STATE. Returns the standby's position after the install.
  StatusOr<ShipReply> ReseedStandby();
  // Standby: a re-seed's file chunk, and its install.
  Status ReceiveFile(const ShipRequest& q);
  Status InstallReseed(const ShipRequest& q);
  std::string ReseedDir() const { return options_.dir + ".reseed"; }
  static constexpr size_t kReseedChunk = 4 << 20;
  uint64_t reseeds_ = 0;  // guarded by stats_mu_
  // Why a write cannot be taken now ("" if it can): a standby, or writes stopped.
  std::string Refusal() const;
  std::string WalPath(int64_t generation) const;
  // How a generation's log is opened: synced per commit group (unless options_.sync is off) and
  // preallocated 1 MiB ahead, so that a group's fdatasync flushes its data and not the file's size.
  WalOptions LogOptions() const;
  std::string FeedPath(uint32_t shard) const;
  // The shard count in force for update `id` (layout_).
  uint32_t CountAt(uint64_t id) const;
  // Records a layout change to `count` at mark `z` (compact_mu_ held, no commit group in
  // flight): layout_ and STATE, the sink's lanes, the new feeds, the mark in every feed that
  // lacks it. Leader and standby.
  Status ApplyLayout(uint32_t count, uint64_t z);
  // Opens the feeds of shards [feeds_.size(), count), prev set from their last ids.
  Status OpenFeeds(uint32_t count, uint64_t drop_from);
  // The layout changes whose mark ends generation `g` (count, mark id).
  std::vector<std::pair<uint32_t, uint64_t>> SplitsEnding(int64_t g) const;
  // Appends the mark of each layout change in generation `g` to every feed that lacks it (after
  // the feeds are cut back and the live logs re-appended at Recover).
  Status AppendMarks(int64_t g);
  // "shard-G", or "shard-F-G" for a merged shard; ShardDir is the directory.
  static std::string ShardName(const Range& range);
  std::string ShardDir(const Range& range) const;
  // The id of record `index` (from 0) of wal-<generation> (docs/replication.md).
  static uint64_t UpdateId(int64_t generation, uint64_t index) {
    return static_cast<uint64_t>(generation) << 32 | (index + 1);
  }
  // Record `index` of wal-<generation> as the update the shards get, numbered with its id.
  static engine::Update NumberedUpdate(const LogRecord& record, int64_t generation,
                                       uint64_t index) {
    engine::Update u = record.ToUpdate(generation);
    u.id = UpdateId(generation, index);
    return u;
  }
  Status WriteState(const std::vector<Range>& shards, const std::vector<int64_t>& logs);
  // Per generation frozen here: how many records its log ended with (STATE "ends"; compact_mu_
  // held or no other thread yet). The leader ends a rejoining standby's generation there, also
  // once that log is compacted; the last kKeptEnds generations are kept.
  std::map<int64_t, uint64_t> ends_;
  static constexpr size_t kKeptEnds = 64;

  // Per-node ordering of writes. A stripe is held shared by unconditional writes (assoc_add and
  // the deletes) from their check-free decision until they are applied, and exclusively by
  // conditional ones (obj_add, obj_update, assoc_update) from their check until they are
  // applied: a check sees every earlier acknowledged write to its node, and no write slips
  // between a check and the write it decides. (A write that timed out at its base shard is
  // applied here but may not be visible through the shard until its lane delivers it.) Waiting
  // conditional writes hold back new shared holders, so a hot node's stream of assoc_adds cannot
  // starve them.
  struct Stripe {
    std::mutex mu;
    std::condition_variable cv;
    int shared = 0;
    int exclusive_waiting = 0;
    bool exclusive = false;
  };
  class StripeLock;
  Stripe& StripeOf(int64_t node) { return stripes_[static_cast<uint64_t>(node) % kStripes]; }

  // The thread waiting for some writes of the commit queue: one write (Write) or a batch
  // (WriteBatch). Shared, so that a thread that wakes it can do so after releasing commit_mu_
  // (a waiter woken under it would only block on it again): the waker's reference keeps the
  // condition variable alive after the waiter, finding its writes done, has returned.
  struct Waiter {
    size_t pending = 0;  // its writes not yet done; guarded by commit_mu_
    std::condition_variable cv;
  };
  // One write in the commit queue (see Commit).
  struct Commit {
    Commit(const LogRecord* r, std::string p, std::shared_ptr<Waiter> w)
        : record(r), payload(std::move(p)), waiter(std::move(w)) {}
    const LogRecord* record;
    std::string payload;  // the encoded record, as logged
    std::shared_ptr<Waiter> waiter;
    Status status;       // set when done
    bool found = false;  // a live version was found anywhere
  };
  // Logs each of `commits` (queued contiguously, so they are in one group), fans its update out
  // and applies it; sets each one's status and found. Concurrent writes form commit groups
  // (docs/writes.md, "Commit groups"): the first queued writer leads, and commits every write
  // queued behind it with one log append (one fdatasync), one update batch per base shard and
  // one pass under the data lock. Two groups overlap: one is logged while the one before it
  // waits for its shards. Log order, shard order and apply order agree.
  void CommitAll(std::vector<Commit>* commits);
  // Commits `records` (with their encoded `payloads`, moved from) as one group: on failure sets
  // (*out)[index[k]] to record k's status, else, with `report_found`, to its `found`.
  void CommitRecords(const std::vector<LogRecord>& records, std::vector<std::string>* payloads,
                     const std::vector<size_t>& index, bool report_found,
                     std::vector<StatusOr<bool>>* out);
  // Leads one group: every write queued now, this thread's all among them (commit_mu_ held by
  // `lock` on entry, released on return, when this thread's writes are done).
  void LeadGroup(std::unique_lock<std::mutex>& lock, Waiter* self);
  // Encodes `record`, or says why it cannot be logged (too large; a put whose new property names
  // do not fit under the bound, which admits them otherwise).
  StatusOr<std::string> Encode(const LogRecord& record) const;
  // names_->Learn; a failure to keep the names is only reported (Recover learns them again from
  // the data: log shard headers, replayed records). The record form: a put's names, for records
  // this LogStore did not admit itself (replayed, shipped).
  void LearnNames(PropertyNames::Kind kind, const std::vector<std::string>& names);
  void LearnNames(const LogRecord& record);
  static PropertyNames::Kind NamesKind(const LogRecord& record) {
    return record.op == engine::UpdateOp::kPutEdge ? PropertyNames::kEdge : PropertyNames::kNode;
  }
  // One write: Encode + CommitAll.
  StatusOr<bool> Write(const LogRecord& record);
  // Whether the live generation holds a live version of what the put `record` targets (the
  // node's properties, or the edge key). If so it exists in the cluster's view as well, and a
  // conditional write's check needs no read of it (docs/writes.md, "Conditional writes"):
  // nothing is newer than the live memtable, and the caller holds the target's stripe
  // exclusively, so every earlier write to it is applied here. False says nothing either way.
  bool LiveHere(const LogRecord& record) const;
  // Whether node `id` exists: LiveHere, else the cluster's read.
  StatusOr<bool> NodeExists(int64_t id);
  struct GroupFanout {
    std::vector<std::vector<size_t>> members;  // per base shard: indexes into the group
    std::vector<std::optional<StatusOr<shard::UpdateSender::Reply>>> replies;  // per base shard
    std::vector<Status> status;  // per write: its base shard's answer
    std::vector<bool> found;     // per write: the base held a live version
    // Per write of an edge: (the log shard's deletion set, whether that log shard stores the
    // key) per log shard.
    // A log shard never changes, so this is looked up while the base shards work, without the
    // exclusive data lock; ApplyLocal adds the deletes made since.
    std::vector<std::vector<std::pair<const engine::UpdateIndex*, bool>>> stored;
    uint64_t last_id = 0;  // the id of the group's last record
  };
  // Appends the group to `wal` and posts its updates (commit_mu_ not held; one group at a time).
  // The updates are posted before the append, so that the shards' round trip overlaps the log's
  // fdatasync and the standby's (docs/write-pipeline.md, "Provisional pointers"); if the group
  // then fails to be logged, this LogStore takes no more writes.
  Status LogGroup(const std::vector<Commit*>& group, Wal* wal, int64_t generation,
                  GroupFanout* fanout);
  // Numbers the group's records from `first`, puts each base shard's updates in its feed and
  // posts them (LogGroup).
  void PostGroup(const std::vector<Commit*>& group, int64_t generation, uint64_t first,
                 GroupFanout* fanout);
  // Fills fanout->stored for the group's edge writes (the data lock held only to list the parts).
  void LookupStored(const std::vector<Commit*>& group, GroupFanout* fanout);
  // Waits for the base shards' answers to the group's batches (until the update timeout).
  void AwaitGroup(GroupFanout* fanout);
  // Applies the group locally and sets each write's outcome (groups in log order).
  void ApplyGroup(const std::vector<Commit*>& group, int64_t generation, const GroupFanout& fanout);
  // Applies a logged record to the LogStore's own fragments (data lock held exclusively). Deletes
  // on log shards are applied in memory; FlushDeletes persists them. `stored`, if given, says
  // which log shards store the edge key (GroupFanout::stored); others are looked up here.
  // `id`: the record's update id (what it replaces is kept for snapshots before it).
  StatusOr<bool> ApplyLocal(
      const LogRecord& record, int64_t generation, uint64_t id,
      const std::vector<std::pair<const engine::UpdateIndex*, bool>>* stored = nullptr);
  // Persists the deletes ApplyLocal queued on each log shard (data lock not held).
  Status FlushDeletes();
  // Calls `visit` with each memtable of `generations` (live, frozen) and the node's deletes there,
  // under the data lock; returns the log shards of `generations` to read after it, and counts the
  // read in fragment_reads.
  using MemtableVisitor = std::function<void(const Memtable&, const engine::NodeUpdates*)>;
  // A log shard part to read, with its deletion set and its generation's memtable history.
  struct ShardRef {
    const layout::Shard* shard;
    const engine::UpdateIndex* deletes;
    const MemHistory* history;  // may be null
    uint32_t part, parts;       // which hash partition of the log shard
  };
  std::vector<ShardRef> ReadFragments(int64_t id, const std::vector<int64_t>& generations,
                                      const MemtableVisitor& visit);
  // The log shards (of `generations`, or all if null) as stable pointers (data lock held): for
  // node `id` the part holding it, or with no id every part.
  std::vector<ShardRef> ShardsIn(const std::vector<int64_t>* generations,
                                 std::optional<int64_t> id) const;
  // ShardsIn for one log shard: itself, or at a snapshot before its merge, its inputs.
  void AddShardRefs(const LogShard& ls, const std::vector<int64_t>* generations,
                    std::optional<int64_t> id, uint64_t at, std::vector<ShardRef>* out) const;
  // The frozen overlay's entry for `id` at this thread's snapshot (data lock held); may be null.
  std::shared_ptr<const engine::NodeUpdates> OverlayEntry(int64_t id) const;
  // A read at this thread's snapshot: waits until it is applied here (within the call's
  // deadline), or says why it cannot be answered; OK for reads of the latest state.
  Status CheckSnapshot();
  // OK unless `at` (not 0) is below SnapshotFloor(): FAILED_PRECONDITION.
  Status Held(uint64_t at) const;
  // The corrections of a log shard's memtable history to node `id` at snapshot `at` (none at 0
  // or if the node did not change after it).
  static std::optional<NodeAt> HistoryAt(const ShardRef& ref, int64_t id, uint64_t at);
  // Snapshots: notes the applied id, and every so often forgets the versions below the horizon
  // (data lock held exclusively).
  void NoteApplied(uint64_t id);
  // The nodes whose live written properties answer a node query (get_node_ids,
  // search_node_ids), any order: in_table's from the memtables (minus the frozen one's
  // overlay), in_shard's from every log shard minus its generation's deletes.
  using TableIds =
      std::function<void(const Memtable&, const Memtable::PropsDead&, std::vector<int64_t>*)>;
  using ShardIds = std::function<StatusOr<std::vector<int64_t>>(const layout::Shard&)>;
  // `match` decides a node's properties as a snapshot saw them (those a log shard's history
  // restores).
  StatusOr<std::vector<int64_t>> WrittenNodeIds(
      const TableIds& in_table, const ShardIds& in_shard,
      const std::function<bool(const Properties&)>& match);

  // Compaction: freeze the live generation (false if it is empty), then build its log shard.
  // `force`: a new generation even if the live log is empty (a takeover).
  // `in_pause`, if given, runs after the switch to the new generation (and its shipping) with
  // the commit pause still held, with the frozen generation.
  StatusOr<bool> Freeze(bool force = false,
                        const std::function<Status(int64_t frozen)>& in_pause = nullptr);
  Status BuildFrozen(nlohmann::json* summary);
  // The compaction thread's step: build the frozen generation, or, with none frozen, freeze and
  // build the memtable if it is (still) past the memory threshold.
  StatusOr<std::string> CompactNow();
  void CompactionLoop();
  // A background thread's loop: runs `step` whenever *wake is set (under loop_mu_, signalled on
  // cv) until stopping_, at nice 10; step returns whether to run again at once.
  void BackgroundLoop(std::condition_variable* cv, bool* wake, const std::function<bool()>& step);
  // Merges one run of log shards if the policy finds one (false if not); see merge_width. Runs
  // on the merge thread, beside compactions: the build holds no lock (log shards are immutable
  // and readers go on), deletes that hit the merging shards meanwhile are logged in merge_log_,
  // and the swap (under compact_mu_ and the data lock) moves them to the merged shard's deletion
  // set, writes STATE and retires the merged shards. A Reload during the build discards it.
  StatusOr<bool> MergeNow();
  void MergeLoop();
  // Indexes [begin, end) into log_shards_ of the run to merge, or begin == end (data lock held);
  // *forced: the run was taken at the cap, outside merge_ratio.
  std::pair<size_t, size_t> PickMergeRun(bool* forced) const;
  // Whether the log shards are at the cap (max_log_shards, merges on; data lock held).
  bool AtShardCap() const;
  // Has the compaction thread look for work (a frozen generation, a full memtable).
  void WakeCompactor();
  // Has the merge thread look for a run to merge (after each compaction).
  void WakeMerger();
  // The memory one build (a compaction's or a merge's) may plan for: compaction_memory_bytes,
  // or 80% of what is available now if that is 0; with merges on, a compaction and a merge may
  // run at once, and each gets the process baseline plus half of the rest.
  uint64_t BuildBudget() const;

  const LogStoreOptions options_;
  std::atomic<bool> standby_;
  std::atomic<uint64_t> epoch_;
  std::atomic<bool> writes_stopped_{false};
  std::atomic<bool> writes_suspended_{false};
  std::string stop_reason_;  // guarded by stats_mu_
  // ApplyShipped, Promote and AttachStandby, one at a time.
  std::mutex role_mu_;
  GraphApi* reader_ = nullptr;
  shard::UpdateSender* sink_ = nullptr;
  std::function<void(std::vector<int64_t>)> publish_;

  static constexpr size_t kStripes = 1024;
  std::array<Stripe, kStripes> stripes_;

  // The commit pipeline, guarded by commit_mu_.
  std::mutex commit_mu_;
  std::deque<Commit*> commits_;  // writes waiting for a group; the front leads the next one
  bool logging_ = false;         // a group is in stage 1 (logging, posting)
  bool freezing_ = false;        // Freeze holds back new groups
  uint64_t next_ticket_ = 0;     // groups started
  uint64_t applied_ticket_ = 0;  // groups applied; they apply in ticket order
  static constexpr uint64_t kGroupsInFlight = 2;  // one logging, one waiting for its shards
  std::condition_variable order_cv_;

  // The live log and its generation: changed only by Recover and by Freeze, with no commit group
  // in flight.
  // Both are atomic because ApplyShipped reads them (Position) on a leader too, where a stale
  // request from an old leader meets a group in flight (found by the TSan build); Freeze changes
  // the pair under data_mu_, under which Position reads it.
  std::unique_ptr<Wal> wal_;
  WalStats retired_wal_;  // of the logs before wal_ since Open (guarded by data_mu_)
  std::atomic<int64_t> generation_ = 1;
  // Records in wal-<generation_> so far: the next record's id is generation_ << 32 | this + 1.
  // Changed only by the group in stage 1 (and by Freeze, with no group in flight).
  std::atomic<uint64_t> records_in_generation_ = 0;
  // Per base shard: every update sent to it (docs/replication.md, "The feed"). Grown by a split
  // (with no commit group in flight) under feeds_mu_, which readers outside the commit
  // pipeline (UpdatesSince, StatusJson) hold shared.
  std::vector<std::unique_ptr<UpdateFeed>> feeds_;
  mutable std::shared_mutex feeds_mu_;
  // The shard layout (Layout()), from STATE; guarded by feeds_mu_.
  std::vector<std::pair<uint32_t, uint64_t>> layout_;

  // Guards the fragments below.
  mutable std::shared_mutex data_mu_;
  std::unique_ptr<Memtable> memtable_;
  std::unique_ptr<PropertyNames> names_;  // opened by the first Recover
  std::optional<Frozen> frozen_;
  std::vector<LogShard> log_shards_;
  // Edges read from log shards (which never change; their deletes are applied after it).
  engine::EdgeCache edge_cache_;
  // Dropped by Reload and merges; kept until destruction (a deque: merged shards point at their
  // inputs here).
  std::deque<LogShard> retired_;
  // Each compacted generation's memtable history, kept across Reload (a takeover keeps the
  // snapshots its standby could answer).
  std::map<int64_t, std::shared_ptr<MemHistory>> histories_;
  // Updates applied to a merging log shard's deletion set since the merge took its snapshot.
  std::vector<engine::Update> merge_log_;
  // Reloads so far (compact_mu_): a merge whose inputs were reloaded away is discarded.
  uint64_t reloads_ = 0;
  std::atomic<bool> stop_merge_{false};  // the destructor cuts a merge short
  std::atomic<uint64_t> merges_{0};
  std::atomic<uint64_t> forced_merges_{0};     // runs merged at the cap, outside merge_ratio
  std::atomic<uint64_t> held_compactions_{0};  // threshold compactions put off at the cap
  std::atomic<bool> held_{false};              // the memtable waits for a merge now
  // A held memtable is compacted anyway once it holds this many times its threshold.
  static constexpr uint64_t kHeldMemtableFactor = 4;
  std::atomic<uint64_t> merge_deletes_moved_{0};  // logged during builds, moved at swaps

  std::mutex compact_mu_;  // one compaction at a time

  // Log shipping. Leader: ship_ (null without a standby), degraded_ once it goes on alone.
  std::unique_ptr<ShipSender> ship_;
  std::atomic<bool> degraded_{false};
  std::atomic<uint64_t> shipped_groups_{0};
  std::string degraded_reason_;  // guarded by stats_mu_
  std::string ship_endpoint_;    // guarded by stats_mu_
  // Marks the standby out of sync: the leader acknowledges alone from now on. Fails (and stays
  // in sync) if on_sync could not record it.
  Status Degrade(const std::string& reason);
  // Degraded: ships the standby what it lacks from this LogStore's logs (older generations still
  // logged, then the live one, its last records with new groups held back), then ships every
  // group again. UNAVAILABLE if the standby is unreachable or behind a generation compacted here.
  Status CatchUpStandby();
  void ResyncLoop();  // CatchUpStandby every kResyncIntervalMs while degraded
  static constexpr int kResyncIntervalMs = 1000;
  std::thread resync_;
  std::condition_variable resync_cv_;  // with loop_mu_ and stopping_
  bool resync_now_ = false;            // guarded by loop_mu_: a standby was attached
  uint64_t resyncs_ = 0;               // guarded by stats_mu_
  // Holds back new commit groups and waits for those in flight to be applied (Freeze, the end of
  // a catch-up); they resume when it is destroyed.
  class CommitPause {
   public:
    explicit CommitPause(LogStore* store);
    ~CommitPause();

   private:
    LogStore* store_;
  };
  // Standby: the largest epoch shipped to it (one request at a time, on the receiver's thread).
  std::atomic<uint64_t> shipped_epoch_{0};
  std::atomic<uint64_t> applied_groups_{0};
  ShipReply Position(ShipCode code) const;
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  bool wake_ = false;
  bool merge_wake_ = false;  // guarded by loop_mu_
  std::condition_variable merge_cv_;
  std::thread compactor_;
  std::thread merger_;

  // Snapshots (docs/consistency.md, "Snapshots").
  RetentionClock retention_{std::chrono::milliseconds(options_.snapshot_retention_ms)};
  std::atomic<uint64_t> applied_id_{0};
  std::atomic<uint64_t> floor_{0};                    // what could not be kept (see SnapshotFloor)
  std::chrono::steady_clock::time_point last_prune_;  // guarded by data_mu_

  std::atomic<uint64_t> writes_{0};
  // Commit groups, and the time they spent logging, waiting for the base shards and applying.
  std::atomic<uint64_t> commit_groups_{0};
  std::atomic<uint64_t> commit_log_us_{0};
  std::atomic<uint64_t> commit_fanout_us_{0};
  std::atomic<uint64_t> commit_apply_us_{0};
  std::atomic<uint64_t> compactions_{0};
  mutable std::mutex stats_mu_;
  std::map<int64_t, uint64_t> fragment_reads_;  // by generation
  nlohmann::json last_compaction_ = nullptr;
  nlohmann::json last_merge_ = nullptr;
  std::string last_error_;
};

}  // namespace zipg::logstore
