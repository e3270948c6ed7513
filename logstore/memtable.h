// Memtable: one LogStore generation's data in memory, query-optimized: node properties by id and,
// per (src, type), the edges in the contract's order (timestamp descending, dst ascending), so the
// LogStore answers a node's reads with the same list operations as the shard servers' merged reads
// (graph/edge_list.h). docs/writes.md.
//
// Snapshots: Remove and Put of a numbered update record what they replace in the table's history
// (logstore/history.h); every read answers at this thread's snapshot (util/snapshot.h ReadAt).
//
// Thread-safety: none; the LogStore guards it with its data lock (the history has its own).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "engine/updates.h"
#include "graph/edge_list.h"
#include "graph/input.h"
#include "logstore/history.h"
#include "logstore/record.h"
#include "model/search.h"

namespace zipg::logstore {

class Memtable {
 public:
  // Whether a version of what `u` targets is live here (and not deleted by `dead`, may be null):
  // the node's properties (put/delete node; delete node also counts edges) or the edge key.
  bool FoundLive(const engine::Update& u, const engine::NodeUpdates* dead) const;
  // Removes the live version of what `u` targets; true if there was one.
  bool Remove(const engine::Update& u);
  // Stores a put record's data (the caller removed the old version first); `id`: its update id.
  void Put(const LogRecord& record, uint64_t id = 0);
  // What the table held before each numbered change (shared with the log shard it becomes).
  const std::shared_ptr<MemHistory>& history() const { return history_; }

  // Adds the node's live data (minus `dead`) to `out`: properties, and edges of every type
  // (any_type), of `type`, or none (type < 0).
  void Collect(int64_t id, bool any_type, int64_t type, const engine::NodeUpdates* dead,
               NodeData* out) const;
  // Adds the live edges of (id, type) to `dsts` (minus `dead`) to `out`.
  void CollectKeys(int64_t id, int64_t type, const std::vector<int64_t>& dsts,
                   const engine::NodeUpdates* dead, std::vector<Edge>* out) const;
  // Whether a node's properties stored here are deleted (null: none are).
  using PropsDead = std::function<bool(int64_t)>;
  // Appends the ids of nodes whose live properties match every pair of `filter` (sorted by name).
  void NodeIds(const Properties& filter, const PropsDead& dead, std::vector<int64_t>* out) const;

  // Appends the ids of nodes with a live property value matching the search (q.limit aside).
  void SearchNodeIds(const NodeSearch& q, const PropsDead& dead, std::vector<int64_t>* out) const;

  // Hands the table's live rows to the compress pipeline (graph/compress.h): the headers (the
  // sorted property names in use), the nodes with properties, the edges.
  Status Feed(graph::InputSink* sink) const;

  bool empty() const { return nodes_.empty(); }
  // Bytes of memory the table's data takes, as malloc hands them out (measured against the
  // process's resident memory in bench/compaction_bench).
  uint64_t bytes() const { return bytes_; }
  uint64_t num_nodes() const { return props_; }
  uint64_t num_edges() const { return edges_; }

 private:
  // Appends the ids of nodes whose live properties satisfy `match`, minus those `dead` marks.
  void NodeIdsWhere(const std::function<bool(const Properties&)>& match, const PropsDead& dead,
                    std::vector<int64_t>* out) const;

  // One (src, type)'s edges: a tree in contract order, and each dst's timestamp to find its
  // version, so that an upsert on a hot node is O(log n), not a scan and a shift of its list.
  struct ByNewestFirst {
    bool operator()(const Edge& a, const Edge& b) const { return NewestFirst(a, b); }
  };
  struct EdgeSet {
    std::set<Edge, ByNewestFirst> ordered;
    std::unordered_map<int64_t, int64_t> timestamp_of;  // by dst
    // The live edge to `dst`, or ordered.end().
    std::set<Edge, ByNewestFirst>::const_iterator Find(int64_t src, int64_t type,
                                                       int64_t dst) const;
  };
  struct Entry {
    std::optional<Properties> props;
    std::map<int64_t, EdgeSet> edges;  // by type
  };
  // Heap bytes of a property list (its vector and the strings too long to live inline).
  static uint64_t Size(const Properties& p);
  static const uint64_t kNodeOverhead, kTypeOverhead, kEdgeOverhead;

  // The node's data as the snapshot `at` saw it: its stored properties and edges (of every type
  // if any_type, else of `type`, none if type < 0) corrected by the history.
  void CollectAt(int64_t id, uint64_t at, bool any_type, int64_t type, NodeData* out) const;

  std::unordered_map<int64_t, Entry> nodes_;
  std::shared_ptr<MemHistory> history_ = std::make_shared<MemHistory>();
  uint64_t bytes_ = 0;
  uint64_t props_ = 0;  // nodes with live properties
  uint64_t edges_ = 0;
};

}  // namespace zipg::logstore
