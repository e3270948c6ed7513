// GraphApi: the read operations of the user-facing contract (../shared/spec/interface.md), one
// virtual function per operation, with the contract's names and argument order. The embedded store
// (graph/graph.h) implements it today; the RPC client will implement the same interface, so the
// CLI's JSON layer and the tests run unchanged against either.
//
// Thread-safety: implementations document their own; the embedded Graph is safe for concurrent use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/search.h"
#include "model/types.h"
#include "util/status.h"

namespace zipg {

struct EdgeRecordInfo {
  int64_t src = 0;
  int64_t type = 0;
  int64_t count = 0;
  friend bool operator==(const EdgeRecordInfo&, const EdgeRecordInfo&) = default;
};

// bfs: an id and its depth.
struct BfsEntry {
  int64_t id = 0;
  int32_t depth = 0;
  friend bool operator==(const BfsEntry&, const BfsEntry&) = default;
};
// rpq: the (src, dst) pairs, sorted; `truncated` if more exist.
struct RpqResult {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  bool truncated = false;
  friend bool operator==(const RpqResult&, const RpqResult&) = default;
};

class GraphApi {
 public:
  virtual ~GraphApi() = default;

  // Paper primitives (ZipG Table 1).
  // `names` null = every present property. nullopt if there is no node `id`.
  virtual StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) = 0;
  // Sorted ids of the nodes matching all pairs; INVALID_ARGUMENT for an empty map.
  virtual StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) = 0;
  // Search inside values (docs/search.md): the first q.limit ascending ids of the live nodes with
  // a value (of q.property, or any) that matches q.pattern as q.match says; INVALID_ARGUMENT for
  // the arguments model/search.h refuses.
  virtual StatusOr<SearchResult> SearchNodeIds(const NodeSearch& q) = 0;
  // Sorted distinct dst of id's edges (of `type`, or all types), kept if the dst node matches all
  // of `properties` (a missing node matches no non-empty filter).
  virtual StatusOr<std::vector<int64_t>> GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                        const Properties& properties) = 0;
  virtual StatusOr<EdgeRecordInfo> GetEdgeRecord(int64_t id, int64_t type) = 0;
  // [begin, end) TimeOrder range of the edges with t_lo <= timestamp <= t_hi.
  virtual StatusOr<std::pair<int64_t, int64_t>> GetEdgeRange(int64_t id, int64_t type, int64_t t_lo,
                                                             int64_t t_hi) = 0;
  virtual StatusOr<std::optional<Edge>> GetEdgeData(int64_t id, int64_t type,
                                                    int64_t time_order) = 0;

  // TAO / LinkBench reads.
  virtual StatusOr<std::optional<Node>> ObjGet(int64_t id) = 0;
  virtual StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                                 int64_t limit) = 0;
  virtual StatusOr<int64_t> AssocCount(int64_t id, int64_t type) = 0;
  virtual StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type,
                                               const std::vector<int64_t>& ids, int64_t low,
                                               int64_t high) = 0;
  virtual StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                     int64_t high, int64_t limit) = 0;

  // Traversals (docs/traversal.md). `types` nullopt: any type; `sources` nullopt: every id with a
  // node entry or a live edge. These defaults run them through GetNeighborIds, one call per
  // (node, type) (graph/traversal.h, PulledExpander), under default limits; a default Rpq cannot
  // list every id, so without sources it is INVALID_ARGUMENT. The stores override both.
  virtual StatusOr<std::vector<BfsEntry>> Bfs(int64_t id,
                                              const std::optional<std::vector<int64_t>>& types,
                                              int32_t max_depth, int64_t limit);
  // The contract's `snapshot`: a sequence covering every write acknowledged before the call;
  // reads at it (util/snapshot.h ReadAt) answer as of exactly the writes up to it. A store that
  // never changes (embedded) answers 0, the latest state.
  virtual StatusOr<uint64_t> Snapshot() { return uint64_t{0}; }
  virtual StatusOr<RpqResult> Rpq(const std::string& expr,
                                  const std::optional<std::vector<int64_t>>& sources,
                                  int64_t limit);
};

// One write of a batch: any write operation of the contract, with its arguments (`id` is the node,
// or the edge's src; the fields an operation does not take are ignored).
struct Write {
  enum class Op { kObjAdd, kObjUpdate, kObjDelete, kAssocAdd, kAssocUpdate, kAssocDelete };
  Op op = Op::kAssocAdd;
  int64_t id = 0;
  int64_t type = 0;
  int64_t dst = 0;
  int64_t timestamp = 0;
  Properties properties;
  friend bool operator==(const Write&, const Write&) = default;
};

// The write operations of the contract (docs/writes.md). Implemented by the LogStore and, by
// forwarding to it, by aggregators and the RPC client.
class GraphWriteApi {
 public:
  virtual ~GraphWriteApi() = default;
  // ALREADY_EXISTS if the node is live.
  virtual Status ObjAdd(int64_t id, const Properties& properties) = 0;
  // Replaces the whole property list; NOT_FOUND if the node is not live.
  virtual Status ObjUpdate(int64_t id, const Properties& properties) = 0;
  // Deletes the node and its outgoing edges; false if there was nothing to delete.
  virtual StatusOr<bool> ObjDelete(int64_t id) = 0;
  // Upsert of (src, type, dst); true if it replaced a live edge.
  virtual StatusOr<bool> AssocAdd(const Edge& edge) = 0;
  // NOT_FOUND if (src, type, dst) is not live.
  virtual Status AssocUpdate(const Edge& edge) = 0;
  virtual StatusOr<bool> AssocDelete(int64_t src, int64_t type, int64_t dst) = 0;
  // Compresses the LogStore's current generation now; a JSON summary.
  virtual StatusOr<std::string> Compact() = 0;

  // The writes in order, each as its single call would do it, with one outcome each: its error,
  // or its answer (obj_delete / assoc_delete: whether something was deleted; assoc_add: whether
  // it replaced an edge; false for the others). Not atomic: a failed write does not undo or stop
  // the others. This default makes the calls one by one.
  virtual std::vector<StatusOr<bool>> WriteBatch(const std::vector<Write>& writes);
};

// One write through the single calls of `g`.
StatusOr<bool> ApplyWrite(GraphWriteApi& g, const Write& w);

}  // namespace zipg
