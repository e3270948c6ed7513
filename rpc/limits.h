// The bounds every server puts on one call at its Thrift boundary (docs/limits.md has the table
// of all bounds): how many ids, property names and writes a request may carry, and how large an
// answer may be. A request over a bound fails with RESOURCE_EXHAUSTED (the contract's "request
// too large") before any work is done; an answer over a bound fails with RESOURCE_EXHAUSTED
// instead of being sent, saying how to ask for less. Ranges that take a `limit` are read only up
// to one past the bound, so a huge limit costs no more than the bound.
//
// Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/api.h"
#include "util/status.h"

namespace zipg::rpc {

// Ids in one request: assoc_get's dsts, rpq's sources.
inline constexpr size_t kMaxIdsPerCall = 1000000;
// Property names in one request: get_node_property's names, a filter, a write's properties (the
// layout's limit on one node's or edge's properties, layout::kMaxProperties).
inline constexpr size_t kMaxNamesPerCall = 1024;
// Writes in one write_batch call (what our clients send at most: rpc::RemoteGraph::kBatchWrites).
inline constexpr size_t kMaxWritesPerCall = 4096;
// Edges in one answer: assoc_range, assoc_get, assoc_time_range.
inline constexpr size_t kMaxAnswerEdges = 100000;
// Ids in one answer: get_neighbor_ids, get_node_ids.
inline constexpr size_t kMaxAnswerIds = size_t{1} << 24;
// One answer's estimated encoded size (clients accept frames of up to 1 GiB).
inline constexpr size_t kMaxAnswerBytes = size_t{256} << 20;

// RESOURCE_EXHAUSTED if `count` exceeds `bound`: "<op>: <count> <what> in one call; at most
// <bound>".
Status CheckRequestCount(const char* op, const char* what, size_t count, size_t bound);

// A range's limit as asked of the engine: at most one past kMaxAnswerEdges.
inline int64_t EngineLimit(int64_t limit) {
  return limit > static_cast<int64_t>(kMaxAnswerEdges) ? static_cast<int64_t>(kMaxAnswerEdges) + 1
                                                       : limit;
}

// RESOURCE_EXHAUSTED if the edges exceed `max_edges` or `max_bytes` (estimated encoded size);
// `hint` says how to ask for less.
Status CheckEdgeAnswer(const char* op, const std::vector<zipg::Edge>& edges, const char* hint,
                       size_t max_edges = kMaxAnswerEdges, size_t max_bytes = kMaxAnswerBytes);
// RESOURCE_EXHAUSTED past kMaxAnswerIds ids.
Status CheckIdAnswer(const char* op, size_t ids, const char* hint);

}  // namespace zipg::rpc
