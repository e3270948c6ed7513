// DeltaIndex: what a base shard knows of the writes to the nodes it owns (docs/writes.md, "The
// shard side"): per written node, which of its compressed data is deleted, and which of its edges
// live in the LogStore, in the contract's order. With it the shard server places every live edge
// of a node without reading the others, so reads of written hot nodes cost what their answer
// costs (shard/merged.h).
//
// Persisted as an append-only file with the WAL framing (logstore/wal.h): one record per applied
// batch, each update with the outcome of its lookup in the base, so replaying needs no lookup.
//
// Snapshots (docs/consistency.md): every numbered update's undo record (its inverse operations on
// the node's delta) is kept until Prune passes its id; a read at n (util/snapshot.h ReadAt) gets
// the current version with the undo records of the node's updates above n applied, newest first.
// Undo records, not the replaced versions: a version keeps its maps' path copies alive (about
// 1.3 KB per update under sustained writes; an undo record is about 100 bytes). They are kept
// from floor() on: what the file replays at open has none (a read below it is
// FAILED_PRECONDITION, decided by the caller).
//
// Uncommitted updates (docs/write-pipeline.md, "Provisional pointers"), when opened with
// `hold_uncommitted`: a batch is applied in memory at once but written to the file only once
// Commit passes its last id, so the file never holds an update that a LogStore leader posted
// before its record was durable and then lost. RollBackUncommitted undoes in memory, with their
// undo records (never pruned while uncommitted), every update not yet committed: last_id() falls
// back to the last committed batch's, and the updates are read again from the LogStore's feed.
//
// Thread-safety: Apply, Commit and RollBackUncommitted are serialized inside; Lookup may run
// concurrently with them and returns an immutable snapshot.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/updates.h"
#include "util/persistent_map.h"
#include "util/snapshot.h"
#include "util/status.h"

namespace zipg {
class Wal;
namespace layout {
class Shard;
}
}  // namespace zipg

namespace zipg::engine {

// An edge's place in the contract's order of its (node, type): timestamp descending, then dst.
struct EdgeKey {
  int64_t timestamp = 0;
  int64_t dst = 0;
  bool operator==(const EdgeKey&) const = default;
};
struct NewestFirstKey {
  bool operator()(const EdgeKey& a, const EdgeKey& b) const {
    return a.timestamp != b.timestamp ? a.timestamp > b.timestamp : a.dst < b.dst;
  }
};
struct EdgeKeyHash {
  size_t operator()(const EdgeKey& k) const {
    return std::hash<int64_t>()(k.timestamp) * 0x9E3779B97F4A7C15ull ^ std::hash<int64_t>()(k.dst);
  }
};
// One type's writes at one node.
struct TypeDelta {
  PersistentMap<uint64_t, Unit> dead;  // TimeOrders of the base record's deleted edges
  PersistentMap<EdgeKey, int64_t, NewestFirstKey, EdgeKeyHash> log;  // -> generation
  PersistentMap<int64_t, int64_t> log_dst;                           // dst -> timestamp
};

struct NodeDelta {
  bool props_dead = false;       // the base's properties of the node are deleted
  bool edges_dead = false;       // every base edge of the node is deleted
  int64_t props_generation = 0;  // the LogStore generation holding its live properties (0: none)
  std::map<int64_t, TypeDelta> types;

  // The type's delta, or null if no write touched it.
  const TypeDelta* Type(int64_t type) const {
    auto it = types.find(type);
    return it == types.end() ? nullptr : &it->second;
  }
};

class DeltaIndex {
 public:
  // Opens (creating) the file at `path` and replays it. `sync`: fdatasync each batch before Apply
  // returns; without, batches become durable on Sync() (or when the kernel writes them back).
  // `floor`: the id the base already holds every update up to (a rebuilt base,
  // engine/live_shard.h); last_id() is at least that.
  // `hold_uncommitted`: batches reach the file once committed (above).
  static StatusOr<std::unique_ptr<DeltaIndex>> Open(const std::string& path, bool sync = true,
                                                    uint64_t floor = 0,
                                                    bool hold_uncommitted = false);
  ~DeltaIndex();

  // Applies a batch from the LogStore to the base shard `base`, writes it to the file (synced
  // before returning if opened with `sync`, else on Sync()) and returns, per
  // update, whether the base held a live version of what it targets (node properties, any edge
  // of the node for DeleteNode, the edge key). An update whose id is not above last_id() was
  // applied before and is skipped (found: false); unnumbered updates (id 0) always apply.
  StatusOr<std::vector<bool>> Apply(const layout::Shard& base, const std::vector<Update>& batch);
  // The highest update id applied; 0 if none.
  uint64_t last_id() const { return last_id_.load(); }

  // Every update with an id up to `id` is committed (commit notices, docs/consistency.md): with
  // hold_uncommitted, writes the batches held up to it to the file, in order. A write error
  // leaves the rest held and is returned (the next Commit tries again).
  Status Commit(uint64_t id);
  // With hold_uncommitted: undoes every update applied and not yet committed (the batches still
  // held) and returns how many it undid; last_id() is then the last committed batch's.
  // INTERNAL (nothing changed) if an undo record is missing.
  StatusOr<size_t> RollBackUncommitted();
  // The largest id passed to Commit (0: none).
  uint64_t committed() const { return committed_.load(); }
  // Updates applied and not yet committed (held).
  size_t held() const;
  // Opened without `sync`: makes every batch applied so far durable (docs/replication.md,
  // "Durability on the shards"). A no-op if nothing was applied since the last call.
  Status Sync();
  // Batches applied but not yet durable.
  uint64_t unsynced() const;

  // The node's delta at this thread's snapshot (ReadAt; the current one at 0), or null if no
  // write touched it by then.
  std::shared_ptr<const NodeDelta> Lookup(int64_t node) const;
  // The lowest snapshot this index answers at: its last id when opened, or as set.
  uint64_t floor() const { return floor_.load(); }
  // Raises the floor to `id` (a rebuilt version answers from its swap on: engine/live_shard.h).
  void RaiseFloor(uint64_t id) {
    if (id > floor_.load()) floor_ = id;
  }
  // Forgets the versions replaced at or below `horizon`.
  void Prune(uint64_t horizon);
  // Earlier versions kept (their count).
  size_t versions() const;
  size_t size() const;  // written nodes
  // The written nodes' ids, sorted (a snapshot).
  std::vector<int64_t> Nodes() const;
  // Bytes the index holds in memory (the current versions of every node's delta).
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  static uint64_t Footprint(const NodeDelta& node);

 private:
  // An update and what its lookup in the base found.
  struct Resolved {
    Update update;
    bool found = false;
    std::optional<uint64_t> time_order;  // the base edge it deleted
  };
  DeltaIndex() = default;
  // What one numbered update changed in its node's delta (see above).
  struct Undo {
    uint64_t id = 0;
    bool absent = false;                     // the node had no delta before
    std::shared_ptr<const NodeDelta> whole;  // delete node: the version before
    bool props_dead = false;                 // put node: the fields before
    int64_t props_generation = 0;
    int64_t type = -1;                                      // edge ops: the type
    std::optional<std::pair<EdgeKey, int64_t>> erased_log;  // the log entry it replaced
    std::optional<EdgeKey> inserted_log;                    // put edge: the entry it added
    std::optional<uint64_t> inserted_dead;                  // the base edge it marked dead
  };
  // Applies r to `node`; with `undo`, records how to undo it (the caller sets id, absent, whole).
  static void Transition(const Resolved& r, NodeDelta* node, Undo* undo = nullptr);
  // Undoes one update on `node` (nullopt: no delta).
  static void ApplyUndo(const Undo& undo, std::optional<NodeDelta>* node);
  static StatusOr<Resolved> Resolve(const layout::Shard& base, const NodeDelta& node,
                                    const Update& u);
  Status Replay(std::string_view record);

  // A batch applied and not yet committed: its last id, its file record, and how many of its
  // updates have undo records (numbered, not a layout mark) or none (unnumbered).
  struct Held {
    uint64_t last = 0;
    std::string record;
    size_t undoable = 0;
    size_t unnumbered = 0;
  };

  mutable std::mutex apply_mu_;  // serializes Apply, Commit and RollBackUncommitted
  bool hold_ = false;
  std::deque<Held> held_;                // guarded by apply_mu_; ids ascending
  std::atomic<uint64_t> committed_{0};   // written under apply_mu_
  std::atomic<uint64_t> written_id_{0};  // the last id in the file; written under apply_mu_
  mutable std::shared_mutex mu_;
  std::unordered_map<int64_t, std::shared_ptr<const NodeDelta>> nodes_;
  ChangeLog<int64_t, Undo> history_;  // guarded by mu_
  std::atomic<uint64_t> floor_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> last_id_{0};
  std::unique_ptr<Wal> file_;
};

}  // namespace zipg::engine
