// MemHistory: what one LogStore generation's memtable held before each change, for snapshot reads
// (docs/consistency.md, "Snapshots"). The memtable changes in place (a put replaces a node's
// properties or an edge's version, a delete removes them), so each change with an update id
// records the key's value before it: node properties, or the edge to (type, dst). A read at n
// takes, for every key changed after n, the value before its oldest change after n, and the
// stored value for every other key. The history outlives its memtable: a compacted log shard
// holds exactly the table's last state, and reads at n correct it the same way.
//
// Thread-safety: every method may be called concurrently (a reader-writer lock inside): reads of
// a log shard run without the LogStore's data lock while Prune runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "model/types.h"
#include "util/snapshot.h"

namespace zipg::logstore {

// A node's keys that changed after a snapshot, with their values at it.
struct NodeAt {
  bool props_changed = false;
  std::optional<Properties> props;  // if props_changed: the properties at the snapshot
  std::map<std::pair<int64_t, int64_t>, std::optional<Edge>> edges;  // (type, dst) -> the edge

  // Replaces, in `edges` (the stored edges of every type if any_type, else of `type`), those whose
  // key changed with their versions at the snapshot; sorted by type, then the contract's order.
  void FixEdges(std::vector<Edge>* edges, bool any_type, int64_t type) const;
};

class MemHistory {
 public:
  void RecordProps(int64_t node, uint64_t id, std::optional<Properties> before);
  void RecordEdge(int64_t node, uint64_t id, int64_t type, int64_t dst, std::optional<Edge> before);

  // Whether the node changed after `at` (at > 0).
  bool ChangedAfter(int64_t node, uint64_t at) const;
  // The node's keys changed after `at`, with their values at it.
  NodeAt At(int64_t node, uint64_t at) const;
  // The nodes whose properties changed after `at`, sorted.
  std::vector<int64_t> PropsChangedAfter(uint64_t at) const;
  // Forgets the changes at or below `horizon`.
  void Prune(uint64_t horizon);
  size_t changes() const;
  // Bytes the kept values take (an estimate).
  uint64_t bytes() const;

 private:
  struct Change {
    uint64_t id = 0;
    int64_t type = -1;  // -1: the node's properties
    int64_t dst = 0;
    std::optional<Properties> props;
    std::optional<Edge> edge;
  };
  static uint64_t Bytes(const Change& c);
  void Record(int64_t node, Change change);

  mutable std::shared_mutex mu_;
  ChangeLog<int64_t, Change> log_;  // by node
  uint64_t bytes_ = 0;
};

}  // namespace zipg::logstore
