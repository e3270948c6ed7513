// The RPC interface of the ZipG-style graph store. Contract: ../shared/spec/interface.md;
// design and wire settings: docs/serving.md.
//
// GraphService is what clients call on an aggregator: every operation of the contract, with the
// contract's names. ShardService is what aggregators and shard servers call on a shard server: the
// same operations (answered for the nodes the server hosts) plus the sub-queries of function
// shipping. Every failure is a GraphError carrying one of the contract's error codes.
//
// Transport: framed, binary protocol. Thrift cannot return null, so optional results are wrapped
// in Maybe* structs whose single field is unset for "null".
// SPDX-License-Identifier: GPL-3.0-or-later

namespace cpp zipg.rpc
namespace py zipg.rpc

enum ErrorCode {
  INVALID_ARGUMENT = 1,
  NOT_FOUND = 2,
  ALREADY_EXISTS = 3,
  UNAVAILABLE = 4,          // a server or shard cannot be reached; retryable
  DEADLINE_EXCEEDED = 5,
  RESOURCE_EXHAUSTED = 6,   // request too large
  INTERNAL = 7,
  FAILED_PRECONDITION = 8,  // a snapshot (`at`) the store no longer holds
}

exception GraphError {
  1: ErrorCode code,
  2: string message,
}

// Property name -> value; both UTF-8.
typedef map<string, string> PropertyMap

struct Node {
  1: i64 id,
  2: PropertyMap properties,
}

struct Edge {
  1: i64 src,
  2: i64 type,
  3: i64 dst,
  4: i64 timestamp,
  5: PropertyMap properties,
}

struct EdgeRecord {
  1: i64 src,
  2: i64 type,
  3: i64 count,
}

// [begin, end) in TimeOrder.
struct EdgeRange {
  1: i64 begin_order,
  2: i64 end_order,
}

struct MaybeProperties {
  1: optional PropertyMap properties,
}

struct MaybeNode {
  1: optional Node node,
}

struct MaybeEdge {
  1: optional Edge edge,
}

// One write of a write_batch (docs/writes.md, "Write batches").
enum WriteKind {
  ASSOC_ADD = 1,     // id is the src; type, dst, timestamp, properties
  ASSOC_DELETE = 2,  // id is the src; type, dst
  OBJ_DELETE = 3,    // id
  OBJ_ADD = 4,       // id, properties
  OBJ_UPDATE = 5,    // id, properties
  ASSOC_UPDATE = 6,  // id is the src; type, dst, timestamp, properties
}

struct BatchedWrite {
  1: WriteKind kind,
  2: i64 id,
  3: i64 type,
  4: i64 dst,
  5: i64 timestamp,
  6: PropertyMap properties,
}

// bfs: the reached ids, ordered by (depth, id); depths[i] is ids[i]'s.
struct BfsResult {
  1: list<i64> ids,
  2: list<i32> depths,
}

// rpq: the pairs (srcs[i], dsts[i]) sorted by (src, dst); truncated: more exist.
struct RpqResult {
  1: list<i64> srcs,
  2: list<i64> dsts,
  3: bool truncated,
}

// A traversal's automaton, as a transition list (docs/traversal.md): from state `from_state`, an
// edge of type `type` (-1: any type) leads to state `to_state`. State 0 starts.
struct Transition {
  1: i32 from_state,
  2: i64 type,
  3: i32 to_state,
}

// Visits (tag, node, state) of a traversal, as three parallel lists.
struct Visits {
  1: list<i32> tags,
  2: list<i64> nodes,
  3: list<i32> states,
}

// search_node_ids's arguments (docs/search.md): `match` is "contains", "prefix", "suffix" or
// "exact"; any_property=true ignores `property`.
struct SearchRequest {
  1: string pattern,
  2: bool any_property,
  3: string property,
  4: string match,
  5: i64 limit,
}

// The first `limit` ids, ascending; truncated: more exist.
struct SearchAnswer {
  1: list<i64> ids,
  2: bool truncated,
}

struct WriteOutcome {
  1: optional GraphError error,  // unset: the write succeeded
  2: bool found,                 // obj_delete / assoc_delete: deleted; assoc_add: replaced
}

service GraphService {
  // Paper primitives (ZipG Table 1). all_properties=true ignores `properties`.
  MaybeProperties get_node_property(1: i64 id, 2: bool all_properties, 3: list<string> properties)
      throws (1: GraphError error),
  list<i64> get_node_ids(1: PropertyMap properties) throws (1: GraphError error),
  // Search inside values (docs/search.md).
  SearchAnswer search_node_ids(1: SearchRequest search) throws (1: GraphError error),
  // any_type=true ignores `type`.
  list<i64> get_neighbor_ids(1: i64 id, 2: bool any_type, 3: i64 type, 4: PropertyMap properties)
      throws (1: GraphError error),
  EdgeRecord get_edge_record(1: i64 id, 2: i64 type) throws (1: GraphError error),
  EdgeRange get_edge_range(1: i64 id, 2: i64 type, 3: i64 t_lo, 4: i64 t_hi)
      throws (1: GraphError error),
  MaybeEdge get_edge_data(1: i64 id, 2: i64 type, 3: i64 time_order) throws (1: GraphError error),

  // TAO / LinkBench.
  MaybeNode obj_get(1: i64 id) throws (1: GraphError error),
  void obj_add(1: i64 id, 2: PropertyMap properties) throws (1: GraphError error),
  void obj_update(1: i64 id, 2: PropertyMap properties) throws (1: GraphError error),
  bool obj_delete(1: i64 id) throws (1: GraphError error),
  // True if it replaced a live edge.
  bool assoc_add(1: i64 src, 2: i64 type, 3: i64 dst, 4: i64 timestamp, 5: PropertyMap properties)
      throws (1: GraphError error),
  void assoc_update(1: i64 src, 2: i64 type, 3: i64 dst, 4: i64 timestamp,
                    5: PropertyMap properties) throws (1: GraphError error),
  bool assoc_delete(1: i64 src, 2: i64 type, 3: i64 dst) throws (1: GraphError error),
  list<Edge> assoc_range(1: i64 id, 2: i64 type, 3: i64 pos, 4: i64 limit)
      throws (1: GraphError error),
  i64 assoc_count(1: i64 id, 2: i64 type) throws (1: GraphError error),
  list<Edge> assoc_get(1: i64 id, 2: i64 type, 3: list<i64> ids, 4: i64 low, 5: i64 high)
      throws (1: GraphError error),
  list<Edge> assoc_time_range(1: i64 id, 2: i64 type, 3: i64 low, 4: i64 high, 5: i64 limit)
      throws (1: GraphError error),

  // Traversals (docs/traversal.md). bfs: any_type=true ignores `types`. rpq: all_sources=true
  // ignores `sources` (every id with a node entry or a live edge is a source).
  BfsResult bfs(1: i64 id, 2: bool any_type, 3: list<i64> types, 4: i32 max_depth, 5: i64 limit)
      throws (1: GraphError error),
  RpqResult rpq(1: string expr, 2: bool all_sources, 3: list<i64> sources, 4: i64 limit)
      throws (1: GraphError error),

  // Consistency and snapshots (docs/consistency.md): a sequence covering every write
  // acknowledged before the call. Every read takes the snapshot it reads at from the call
  // context: an i64 field with id 32766 appended to its arguments ("at"; absent or 0: the latest
  // state), as the deadline is field 32767 (docs/limits.md). A sequence no longer held is
  // FAILED_PRECONDITION; one not yet reached is waited for within the call's deadline. An
  // embedded (read-only) store answers 0.
  i64 snapshot() throws (1: GraphError error),

  // The cluster as this server sees it, as a JSON document (docs/serving.md, "Status").
  string status() throws (1: GraphError error),
  // Compresses the LogStore's current generation into a new log shard now (docs/writes.md);
  // returns a JSON summary. Aggregators forward it to the LogStore.
  string admin_compact() throws (1: GraphError error),
  // The writes in order, one outcome each (not atomic: a failed write stops nothing). At most
  // 16 MiB of request.
  list<WriteOutcome> write_batch(1: list<BatchedWrite> writes) throws (1: GraphError error),
}

service ShardService extends GraphService {
  // The ids (all owned by shards this server hosts) whose node matches every pair; sorted.
  list<i64> filter_nodes(1: list<i64> ids, 2: PropertyMap properties) throws (1: GraphError error),
  // get_node_ids over the listed shards, all hosted by this server; sorted. Calls that list
  // shards number them as the caller's map does: `num_shards` is its shard count (0 or absent:
  // the server's own). A server split since answers shard r of a smaller count from its shards
  // t with t mod num_shards = r (docs/cluster-changes.md, step 4).
  list<i64> local_node_ids(1: list<i32> shards, 2: PropertyMap properties, 3: i32 num_shards)
      throws (1: GraphError error),
  // search_node_ids over the listed shards, all hosted by this server: the first limit + 1 ids,
  // sorted (the extra one says that more exist).
  list<i64> local_search_node_ids(1: list<i32> shards, 2: SearchRequest search,
                                  3: i32 num_shards) throws (1: GraphError error),
  // One traversal step (docs/traversal.md): the successors of `visits` (every node owned by a
  // shard hosted here) under `automaton`, distinct, in any order. Fails with DEADLINE_EXCEEDED
  // once `deadline_ms` milliseconds have passed, RESOURCE_EXHAUSTED if there would be more than
  // `max_visits` of them.
  Visits traverse_expand(1: list<Transition> automaton, 2: Visits visits, 3: i64 deadline_ms,
                         4: i64 max_visits) throws (1: GraphError error),
  // The ids with a node entry or a live outgoing edge in the listed shards (all hosted here),
  // and with include_dsts also every destination of their live edges; sorted, distinct.
  // DEADLINE_EXCEEDED after deadline_ms, RESOURCE_EXHAUSTED past max_ids of them.
  list<i64> traverse_sources(1: list<i32> shards, 2: bool include_dsts, 3: i64 deadline_ms,
                             4: i64 max_ids, 5: i32 num_shards) throws (1: GraphError error),
  // Splits every base shard in two (docs/cluster-changes.md, step 4); `shards` is the new count,
  // twice the current one. A shard server prepares: builds the halves of each hosted shard and
  // keeps them current. The LogStore leader switches the cluster to the new count (every shard
  // server prepared first). Returns a JSON summary.
  string admin_split(1: i32 shards) throws (1: GraphError error),
  // Rebuilds the listed shards hosted here (every hosted shard if none) now, folding their
  // writes into new compressed files (docs/writes.md, "Rebuilding a base shard"); with
  // from_member, adopts that replica's current version of each instead of building one. Returns
  // a JSON object of summaries by shard.
  string admin_rebuild(1: list<i32> shards, 2: string from_member) throws (1: GraphError error),
  // The current rebuilt version of hosted shard `shard`, for a replica that adopts it:
  // JSON {"version", "through", "files": [{"path", "bytes"}]}.
  string rebuilt_version(1: i32 shard) throws (1: GraphError error),
  // Up to `length` bytes (at most 16 MiB) of one of its files from `offset`.
  binary rebuilt_chunk(1: i32 shard, 2: i64 version, 3: string path, 4: i64 offset,
                       5: i32 length) throws (1: GraphError error),
  // Up to `length` bytes (at most 16 MiB) from `offset` of a base store file, for a shard server
  // that fetches a shard it has no files for (docs/cluster-changes.md): "MANIFEST", or a file the
  // MANIFEST lists under the directory of a shard hosted here; any other path is NOT_FOUND.
  binary store_chunk(1: string path, 2: i64 offset, 3: i32 length) throws (1: GraphError error),
  // Serves shard `shard` here too (docs/cluster-changes.md, step 2): fetches its files from a
  // serving replica if this store lacks them, opens them, and returns; the shard answers reads
  // once it has caught up with the LogStore's feed (its member entry lists it in catching_up
  // until then). Serving it already is not an error.
  void admin_serve(1: i32 shard) throws (1: GraphError error),
  // Stops serving shard `shard` here: FAILED_PRECONDITION if no other member serves it. Not
  // serving it is not an error; a server may be left with no shard (drained).
  void admin_unserve(1: i32 shard) throws (1: GraphError error),
}

// A node's live data in the LogStore's fragments (memtables and log shards, docs/writes.md).
struct NodeFragment {
  1: optional PropertyMap properties,  // unset: no live properties in these fragments
  2: list<Edge> edges,                  // any order
}

// A piece of the LogStore's update feed of one base shard (docs/replication.md, "Catching up").
struct UpdateFeedChunk {
  1: binary updates,  // engine/updates.h wire form, with ids: the feed's updates after `after`
  2: i64 head,        // the feed's last id when it was read
  3: bool included,   // the asking member was, before the read, one the shard's pushes go to
  // The LogStore's update sender (the id its pushes carry; 0: unknown): a replica whose
  // uncommitted updates came from another sender rolls them back first (docs/write-pipeline.md).
  4: i64 sender,
}

// One fragment_edges question, for fragment_edges_batch.
struct FragmentAsk {
  1: i64 id,
  2: i64 type,
  3: list<i64> generations,
  4: list<i64> dsts,
}

// The fragment calls' `applied_through`: the asking replica's committed id for the node's shard
// (docs/consistency.md, "Fragment reads"). A LogStore that has applied less (a leader since
// deposed, which the replica's view still names) answers UNAVAILABLE instead of an older state;
// 0 (or absent): no check.
service LogStoreService extends ShardService {
  // The live data of node `id` (edges of `type`, all types if any_type, none if type < 0) in the
  // listed generations (memtables or the log shards they became).
  NodeFragment fragment(1: i64 id, 2: bool any_type, 3: i64 type, 4: list<i64> generations,
                        5: i64 applied_through) throws (1: GraphError error),
  // The live edges of (id, type) to the listed dsts in those generations, any order.
  list<Edge> fragment_edges(1: i64 id, 2: i64 type, 3: list<i64> generations, 4: list<i64> dsts,
                            5: i64 applied_through) throws (1: GraphError error),
  // fragment_edges for each ask, one answer each (a shard rebuild reads every written node).
  list<list<Edge>> fragment_edges_batch(1: list<FragmentAsk> asks, 2: i64 applied_through)
      throws (1: GraphError error),
  // get_node_ids over the LogStore's fragments; sorted.
  list<i64> log_node_ids(1: PropertyMap properties) throws (1: GraphError error),
  // search_node_ids over the LogStore's fragments: the first limit + 1 ids, sorted.
  list<i64> log_search_node_ids(1: SearchRequest search) throws (1: GraphError error),
  // The update feed of base shard `shard` after id `after`, for replica `member` catching up.
  // `num_shards`: the count the member numbers its shards by (0: the LogStore's).
  UpdateFeedChunk updates_since(1: i32 shard, 2: i64 after, 3: string member, 4: i32 num_shards)
      throws (1: GraphError error),
}
