// Answers to the contract's per-node operations over data held in memory: one node's edges of one
// type as a vector sorted in the contract's order (timestamp descending, ties by dst ascending).
// The LogStore's memtables and the shard servers' merged reads of written nodes
// (docs/writes.md) both answer through these, so they agree with each other by construction and
// with the compressed Shard by test.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/types.h"

namespace zipg {

// The contract's order of an EdgeRecord.
inline bool NewestFirst(const Edge& a, const Edge& b) {
  if (a.timestamp != b.timestamp) return a.timestamp > b.timestamp;
  return a.dst < b.dst;
}

// A node's live data in some fragments (docs/writes.md).
struct NodeData {
  std::optional<Properties> properties;  // sorted by name; nullopt: no live properties here
  std::vector<Edge> edges;
};

// Edges sorted by NewestFirst (one type).
using EdgeList = std::vector<Edge>;

// [begin, end): the TimeOrder range of the edges with lo <= timestamp <= hi.
std::pair<int64_t, int64_t> ListEdgeRange(const EdgeList& edges, int64_t lo, int64_t hi);
std::optional<Edge> ListEdgeData(const EdgeList& edges, int64_t time_order);
EdgeList ListAssocRange(const EdgeList& edges, int64_t pos, int64_t limit);
EdgeList ListAssocGet(const EdgeList& edges, const std::vector<int64_t>& ids, int64_t low,
                      int64_t high);
EdgeList ListAssocTimeRange(const EdgeList& edges, int64_t low, int64_t high, int64_t limit);

// The requested properties (all if `names` is null) of a property list sorted by name.
Properties SelectProperties(const Properties& all, const std::vector<std::string>* names);
// True if every (name, value) of `filter` is in `all` (both sorted by name).
bool MatchesAll(const Properties& all, const Properties& filter);
// Sorts by name, drops empty values (a write stores an empty value as absent, like the CSV loader)
// and keeps the last of repeated names.
Properties NormalizeProperties(Properties properties);

}  // namespace zipg
