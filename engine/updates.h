// The update records the LogStore sends to fragments (Update, their wire form), and the
// UpdateIndex: the deletions on one of the LogStore's own fragments (a log shard, or the frozen
// memtable's overlay), by key: per node, its deletion set (the paper's deletion bitmap).
// Base shards keep a richer index (shard/delta.h). docs/writes.md, "The update channel".
//
// Persisted as an append-only file with the WAL framing (logstore/wal.h), one record per batch,
// replayed at open.
//
// Thread-safety: Record and Lookup may be called concurrently (a reader-writer lock inside).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

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

// The four unconditional write operations of the log (docs/writes.md), as they reach a fragment,
// and the layout mark of a split (docs/cluster-changes.md, step 4): no data, `node` holds the new
// shard count; a base shard's delta records only its id.
enum class UpdateOp : uint8_t {
  kPutNode = 1,
  kDeleteNode = 2,
  kPutEdge = 3,
  kDeleteEdge = 4,
  kLayout = 5
};

struct Update {
  UpdateOp op = UpdateOp::kPutNode;
  int64_t node = 0;
  int64_t type = 0;        // edge ops
  int64_t dst = 0;         // edge ops
  int64_t generation = 0;  // put ops: the generation now holding the data (0: none)
  int64_t timestamp = 0;   // PutEdge: the new edge's timestamp
  // Its place in the LogStore's log, generation << 32 | record index + 1 (docs/replication.md);
  // 0: unnumbered.
  uint64_t id = 0;
  bool operator==(const Update&) const = default;
};

// Wire/disk form of a batch (little endian): u32 count | 0x80000000 (| 0x40000000 with ids),
// then per update u8 op | i64 node | i64 type | i64 dst | i64 generation | i64 timestamp
// (| u64 id). `flags`, if given, adds one byte per update after the batch. The first version had
// no timestamps and no high bit; it is still decoded (timestamps 0). Without ids, ids decode as 0.
std::string EncodeUpdates(const std::vector<Update>& updates, const std::vector<uint8_t>* flags,
                          bool with_ids = false);
// INVALID_ARGUMENT / corruption if malformed.
Status DecodeUpdates(std::string_view data, std::vector<Update>* updates,
                     std::vector<uint8_t>* flags);

// An empty value: a PersistentMap<K, Unit> is a persistent set.
struct Unit {};

struct NodeUpdates {
  bool props_dead = false;  // the properties stored here are deleted
  bool edges_dead = false;  // every edge stored here is deleted
  // Per type, the dsts of the edges stored here that are deleted. Only keys that were live here
  // are recorded (Record's `found`), so each is stored here once. Persistent sets: a copy of the
  // entry (copy on write, while a reader holds the old one) costs O(types), not O(deletes).
  std::map<int64_t, PersistentMap<int64_t, Unit>> dead_edges;

  bool EdgeDead(int64_t type, int64_t dst) const {
    if (edges_dead) return true;
    auto it = dead_edges.find(type);
    return it != dead_edges.end() && it->second.Find(dst) != nullptr;
  }
  // How many of the type's stored edges are deleted (edges_dead aside).
  size_t DeadCount(int64_t type) const {
    auto it = dead_edges.find(type);
    return it == dead_edges.end() ? 0 : it->second.size();
  }
};

class UpdateIndex {
 public:
  // Opens (creating) the file at `path` and replays it. `sync`: fdatasync each batch.
  static StatusOr<std::unique_ptr<UpdateIndex>> Open(const std::string& path, bool sync = true);
  ~UpdateIndex();

  // Persists and applies a batch whose outcomes the caller decided: found[i] = whether this
  // fragment held a live version of what update i targets.
  Status Record(const std::vector<Update>& batch, const std::vector<bool>& found);

  // Applies one update that found a live version here, in memory only, and queues it for Flush.
  // The LogStore applies a commit group's writes one at a time (each must see those before it)
  // and persists them with one Flush before it acknowledges any: until then they are durable only
  // in its WAL, whose replay applies them again.
  void Apply(const Update& u);
  // Persists what Apply queued, as one record (nothing if nothing is queued).
  Status Flush();

  // The node's entry at this thread's snapshot (util/snapshot.h ReadAt; the current one at 0: an
  // immutable copy, later batches copy on write); null if no write had touched the node by then.
  // The entries numbered updates replaced are kept until Prune passes their ids.
  std::shared_ptr<const NodeUpdates> Lookup(int64_t node) const;
  // Forgets the entries replaced at or below `horizon`.
  void Prune(uint64_t horizon);
  size_t versions() const;
  // True if the node has an entry (cheap; the fast-path test).
  bool Touched(int64_t node) const;
  // Bytes the entries hold in memory (an estimate from their sizes; walks them).
  uint64_t bytes() const;
  // Nodes with an entry.
  size_t size() const;

  // Applies one update to `entry` given `found` (no I/O).
  static void ApplyTo(const Update& u, bool found, NodeUpdates* entry);

 private:
  UpdateIndex() = default;
  Status Replay(std::string_view record);
  // Applies u to its node's entry, copying the entry first if a reader holds it. mu_ held.
  void ApplyLocked(const Update& u, bool found);

  mutable std::shared_mutex mu_;
  std::unordered_map<int64_t, std::shared_ptr<NodeUpdates>> nodes_;
  VersionLog<int64_t, NodeUpdates> history_;  // guarded by mu_
  std::vector<Update> pending_;               // applied by Apply, not yet persisted
  std::unique_ptr<Wal> file_;
};

// Bytes a map of entries holds in memory (an estimate from their sizes).
uint64_t NodeUpdatesBytes(const std::unordered_map<int64_t, NodeUpdates>& entries);

// Whether `data` holds a live version (given the node's current entry, may be null) of what `u`
// targets: the node's properties (put/delete node; delete node also counts live edges) or the
// edge key.
StatusOr<bool> FoundLive(const layout::Shard& data, const NodeUpdates* entry, const Update& u);

// How many edges of (id, type) in `data` are live, given the node's deletes there (may be null):
// the stored count minus the dead keys (each of which is stored here: see NodeUpdates).
StatusOr<int64_t> LiveCount(const layout::Shard& data, int64_t id, int64_t type,
                            const NodeUpdates* entry);

}  // namespace zipg::engine
