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
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/status.h"

namespace zipg::logstore {
class Wal;
}

namespace zipg::shard {

class Shard;

// The four unconditional write operations of the log (docs/writes.md), as they reach a fragment.
enum class UpdateOp : uint8_t { kPutNode = 1, kDeleteNode = 2, kPutEdge = 3, kDeleteEdge = 4 };

struct Update {
  UpdateOp op = UpdateOp::kPutNode;
  int64_t node = 0;
  int64_t type = 0;        // edge ops
  int64_t dst = 0;         // edge ops
  int64_t generation = 0;  // put ops: the generation now holding the data (0: none)
  int64_t timestamp = 0;   // PutEdge: the new edge's timestamp
  bool operator==(const Update&) const = default;
};

// Wire/disk form of a batch (little endian): u32 count | 0x80000000, then per update u8 op |
// i64 node | i64 type | i64 dst | i64 generation | i64 timestamp. `flags`, if given, adds one
// byte per update after the batch. The first version had no timestamps and no high bit; it is
// still decoded (timestamps 0).
std::string EncodeUpdates(const std::vector<Update>& updates, const std::vector<uint8_t>* flags);
// INVALID_ARGUMENT / corruption if malformed.
Status DecodeUpdates(std::string_view data, std::vector<Update>* updates,
                     std::vector<uint8_t>* flags);

struct NodeUpdates {
  bool props_dead = false;                        // the properties stored here are deleted
  bool edges_dead = false;                        // every edge stored here is deleted
  std::set<std::pair<int64_t, int64_t>> dead_edges;  // (type, dst) deleted here

  bool EdgeDead(int64_t type, int64_t dst) const {
    return edges_dead || dead_edges.count({type, dst}) > 0;
  }
  // The dsts of `type` in dead_edges, ascending.
  std::vector<int64_t> DeadDsts(int64_t type) const {
    std::vector<int64_t> out;
    for (auto it = dead_edges.lower_bound({type, std::numeric_limits<int64_t>::min()});
         it != dead_edges.end() && it->first == type; ++it) {
      out.push_back(it->second);
    }
    return out;
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

  // The node's entry (an immutable snapshot: later batches copy on write); null if the node was
  // never touched by a write.
  std::shared_ptr<const NodeUpdates> Lookup(int64_t node) const;
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

  mutable std::shared_mutex mu_;
  std::unordered_map<int64_t, std::shared_ptr<NodeUpdates>> nodes_;
  std::unique_ptr<logstore::Wal> file_;
};

// Bytes a map of entries holds in memory (an estimate from their sizes).
uint64_t NodeUpdatesBytes(const std::unordered_map<int64_t, NodeUpdates>& entries);

// Whether `data` holds a live version (given the node's current entry, may be null) of what `u`
// targets: the node's properties (put/delete node; delete node also counts live edges) or the
// edge key.
StatusOr<bool> FoundLive(const Shard& data, const NodeUpdates* entry, const Update& u);

// How many edges of (id, type) in `data` are live, given the node's deletes there (may be null):
// the stored count minus the deleted keys actually stored (a dead key may have no version here).
StatusOr<int64_t> LiveCount(const Shard& data, int64_t id, int64_t type, const NodeUpdates* entry);

}  // namespace zipg::shard
