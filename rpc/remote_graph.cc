#include "rpc/remote_graph.h"

#include "rpc/convert.h"
#include "zipg_rpc/LogStoreService.h"

namespace zipg::rpc {

Status CheckRequestSize(size_t ids, const Properties* properties,
                        const std::vector<std::string>* names) {
  size_t bytes = 9 * ids;  // one i64 each (8 B) plus slack for the list header
  if (properties) {
    for (const auto& [name, value] : *properties) bytes += 8 + name.size() + value.size();
  }
  if (names) {
    for (const auto& name : *names) bytes += 4 + name.size();
  }
  if (bytes > kMaxRequestBytes) {
    return Status::ResourceExhausted("request of ~" + std::to_string(bytes) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(kMaxRequestBytes));
  }
  return Status::OK();
}

StatusOr<std::optional<Properties>> RemoteGraph::GetNodeProperty(
    int64_t id, const std::vector<std::string>* names) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, nullptr, names));
  MaybeProperties r;
  static const std::vector<std::string> kNone;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.get_node_property(r, id, names == nullptr, names ? *names : kNone);
  }));
  if (!r.__isset.properties) return std::optional<Properties>();
  return std::optional<Properties>(FromThrift(r.properties));
}

StatusOr<std::vector<int64_t>> RemoteGraph::GetNodeIds(const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &properties, nullptr));
  std::vector<int64_t> ids;
  const auto props = ToThrift(properties);
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { c.get_node_ids(ids, props); }));
  return ids;
}

StatusOr<SearchResult> RemoteGraph::SearchNodeIds(const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  SearchAnswer answer;
  const auto request = ToThrift(q);
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.search_node_ids(answer, request); }));
  return SearchResult{std::move(answer.ids), answer.truncated};
}

StatusOr<std::vector<int64_t>> RemoteGraph::LocalSearchNodeIds(const std::vector<int32_t>& shards,
                                                               const NodeSearch& q,
                                                               uint32_t num_shards) {
  std::vector<int64_t> ids;
  const auto request = ToThrift(q);
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.local_search_node_ids(ids, shards, request, static_cast<int32_t>(num_shards));
  }));
  return ids;
}

StatusOr<std::vector<int64_t>> RemoteGraph::LogSearchNodeIds(const NodeSearch& q) {
  std::vector<int64_t> ids;
  const auto request = ToThrift(q);
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.log_search_node_ids(ids, request); }));
  return ids;
}

StatusOr<std::vector<int64_t>> RemoteGraph::GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                           const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &properties, nullptr));
  std::vector<int64_t> ids;
  const auto props = ToThrift(properties);
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.get_neighbor_ids(ids, id, !type.has_value(), type.value_or(0), props);
  }));
  return ids;
}

StatusOr<std::vector<zipg::BfsEntry>> RemoteGraph::Bfs(
    int64_t id, const std::optional<std::vector<int64_t>>& types, int32_t max_depth,
    int64_t limit) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(types ? types->size() : 0, nullptr, nullptr));
  BfsResult r;
  static const std::vector<int64_t> kNone;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.bfs(r, id, !types.has_value(), types ? *types : kNone, max_depth, limit);
  }));
  if (r.ids.size() != r.depths.size()) return Status::Internal("bfs: malformed reply");
  std::vector<zipg::BfsEntry> out(r.ids.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = {r.ids[i], r.depths[i]};
  return out;
}

StatusOr<zipg::RpqResult> RemoteGraph::Rpq(const std::string& expr,
                                           const std::optional<std::vector<int64_t>>& sources,
                                           int64_t limit) {
  ZIPG_RETURN_IF_ERROR(
      CheckRequestSize((sources ? sources->size() : 0) + expr.size() / 8, nullptr, nullptr));
  rpc::RpqResult r;
  static const std::vector<int64_t> kNone;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.rpq(r, expr, !sources.has_value(), sources ? *sources : kNone, limit);
  }));
  if (r.srcs.size() != r.dsts.size()) return Status::Internal("rpq: malformed reply");
  zipg::RpqResult out;
  out.pairs.resize(r.srcs.size());
  for (size_t i = 0; i < r.srcs.size(); ++i) out.pairs[i] = {r.srcs[i], r.dsts[i]};
  out.truncated = r.truncated;
  return out;
}

StatusOr<std::vector<graph::Visit>> RemoteGraph::TraverseExpand(
    const graph::PathAutomaton& automaton, const std::vector<graph::Visit>& visits,
    int64_t deadline_ms, uint64_t max_visits) {
  ZIPG_RETURN_IF_ERROR(
      CheckRequestSize(2 * visits.size() + 4 * automaton.transitions.size(), nullptr, nullptr));
  Visits r;
  const auto transitions = ToThrift(automaton);
  const Visits request = ToThrift(visits);
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.traverse_expand(r, transitions, request, deadline_ms, static_cast<int64_t>(max_visits));
  }));
  auto out = FromThrift(r);
  if (!out.ok()) {
    return Status::Internal("traverse_expand: malformed reply: " + out.status().message());
  }
  return out;
}

StatusOr<std::vector<int64_t>> RemoteGraph::TraverseSources(const std::vector<int32_t>& shards,
                                                            bool include_dsts, int64_t deadline_ms,
                                                            uint64_t max_ids, uint32_t num_shards) {
  std::vector<int64_t> r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.traverse_sources(r, shards, include_dsts, deadline_ms, static_cast<int64_t>(max_ids),
                       static_cast<int32_t>(num_shards));
  }));
  return r;
}

StatusOr<std::string> RemoteGraph::Split(uint32_t num_shards) {
  std::string r;
  ZIPG_RETURN_IF_ERROR(pool_->Call(
      [&](LogStoreServiceClient& c) { c.admin_split(r, static_cast<int32_t>(num_shards)); },
      false));
  return r;
}

StatusOr<EdgeRecordInfo> RemoteGraph::GetEdgeRecord(int64_t id, int64_t type) {
  EdgeRecord r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.get_edge_record(r, id, type); }));
  return EdgeRecordInfo{r.src, r.type, r.count};
}

StatusOr<std::pair<int64_t, int64_t>> RemoteGraph::GetEdgeRange(int64_t id, int64_t type,
                                                                int64_t t_lo, int64_t t_hi) {
  EdgeRange r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.get_edge_range(r, id, type, t_lo, t_hi); }));
  return std::make_pair(r.begin_order, r.end_order);
}

StatusOr<std::optional<zipg::Edge>> RemoteGraph::GetEdgeData(int64_t id, int64_t type,
                                                             int64_t time_order) {
  MaybeEdge r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.get_edge_data(r, id, type, time_order); }));
  if (!r.__isset.edge) return std::optional<zipg::Edge>();
  return std::optional<zipg::Edge>(FromThrift(r.edge));
}

StatusOr<std::optional<zipg::Node>> RemoteGraph::ObjGet(int64_t id) {
  MaybeNode r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { c.obj_get(r, id); }));
  if (!r.__isset.node) return std::optional<zipg::Node>();
  return std::optional<zipg::Node>(zipg::Node{r.node.id, FromThrift(r.node.properties)});
}

StatusOr<std::vector<zipg::Edge>> RemoteGraph::AssocRange(int64_t id, int64_t type, int64_t pos,
                                                          int64_t limit) {
  std::vector<rpc::Edge> r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.assoc_range(r, id, type, pos, limit); }));
  return FromThrift(r);
}

StatusOr<int64_t> RemoteGraph::AssocCount(int64_t id, int64_t type) {
  int64_t count = 0;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { count = c.assoc_count(id, type); }));
  return count;
}

StatusOr<std::vector<zipg::Edge>> RemoteGraph::AssocGet(int64_t id, int64_t type,
                                                        const std::vector<int64_t>& ids,
                                                        int64_t low, int64_t high) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(ids.size(), nullptr, nullptr));
  std::vector<rpc::Edge> r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.assoc_get(r, id, type, ids, low, high); }));
  return FromThrift(r);
}

StatusOr<std::vector<zipg::Edge>> RemoteGraph::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                              int64_t high, int64_t limit) {
  std::vector<rpc::Edge> r;
  ZIPG_RETURN_IF_ERROR(pool_->Call(
      [&](LogStoreServiceClient& c) { c.assoc_time_range(r, id, type, low, high, limit); }));
  return FromThrift(r);
}

StatusOr<std::string> RemoteGraph::ServerStatus() {
  std::string r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { c.status(r); }));
  return r;
}

StatusOr<std::vector<int64_t>> RemoteGraph::FilterNodes(const std::vector<int64_t>& ids,
                                                        const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(ids.size(), &properties, nullptr));
  std::vector<int64_t> r;
  const auto props = ToThrift(properties);
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.filter_nodes(r, ids, props); }));
  return r;
}

StatusOr<std::vector<int64_t>> RemoteGraph::LocalNodeIds(const std::vector<int32_t>& shards,
                                                         const Properties& properties,
                                                         uint32_t num_shards) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &properties, nullptr));
  std::vector<int64_t> r;
  const auto props = ToThrift(properties);
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.local_node_ids(r, shards, props, static_cast<int32_t>(num_shards));
  }));
  return r;
}

// Writes are not retried on a stale connection (idempotent = false): a retry could apply twice.
Status RemoteGraph::ObjAdd(int64_t id, const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &properties, nullptr));
  const auto props = ToThrift(properties);
  return pool_->Call([&](LogStoreServiceClient& c) { c.obj_add(id, props); }, false);
}

Status RemoteGraph::ObjUpdate(int64_t id, const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &properties, nullptr));
  const auto props = ToThrift(properties);
  return pool_->Call([&](LogStoreServiceClient& c) { c.obj_update(id, props); }, false);
}

StatusOr<bool> RemoteGraph::ObjDelete(int64_t id) {
  bool deleted = false;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { deleted = c.obj_delete(id); }, false));
  return deleted;
}

StatusOr<bool> RemoteGraph::AssocAdd(const zipg::Edge& edge) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &edge.properties, nullptr));
  const auto props = ToThrift(edge.properties);
  bool replaced = false;
  ZIPG_RETURN_IF_ERROR(pool_->Call(
      [&](LogStoreServiceClient& c) {
        replaced = c.assoc_add(edge.src, edge.type, edge.dst, edge.timestamp, props);
      },
      false));
  return replaced;
}

Status RemoteGraph::AssocUpdate(const zipg::Edge& edge) {
  ZIPG_RETURN_IF_ERROR(CheckRequestSize(0, &edge.properties, nullptr));
  const auto props = ToThrift(edge.properties);
  return pool_->Call(
      [&](LogStoreServiceClient& c) {
        c.assoc_update(edge.src, edge.type, edge.dst, edge.timestamp, props);
      },
      false);
}

StatusOr<bool> RemoteGraph::AssocDelete(int64_t src, int64_t type, int64_t dst) {
  bool deleted = false;
  ZIPG_RETURN_IF_ERROR(pool_->Call(
      [&](LogStoreServiceClient& c) { deleted = c.assoc_delete(src, type, dst); }, false));
  return deleted;
}

StatusOr<std::string> RemoteGraph::Rebuild(const std::vector<int32_t>& shards,
                                           const std::string& from) {
  std::string r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.admin_rebuild(r, shards, from); }, false));
  return r;
}

Status RemoteGraph::Serve(int32_t shard) {
  return pool_->Call([&](LogStoreServiceClient& c) { c.admin_serve(shard); }, true);
}

Status RemoteGraph::Unserve(int32_t shard) {
  return pool_->Call([&](LogStoreServiceClient& c) { c.admin_unserve(shard); }, true);
}

StatusOr<std::string> RemoteGraph::RebuiltVersion(int32_t shard) {
  std::string r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { c.rebuilt_version(r, shard); }));
  return r;
}

StatusOr<std::string> RemoteGraph::StoreChunk(const std::string& path, int64_t offset,
                                              int32_t length) {
  std::string r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.store_chunk(r, path, offset, length); }));
  return r;
}

StatusOr<std::string> RemoteGraph::RebuiltChunk(int32_t shard, int64_t version,
                                                const std::string& path, int64_t offset,
                                                int32_t length) {
  std::string r;
  ZIPG_RETURN_IF_ERROR(pool_->Call(
      [&](LogStoreServiceClient& c) { c.rebuilt_chunk(r, shard, version, path, offset, length); }));
  return r;
}

StatusOr<uint64_t> RemoteGraph::Snapshot() {
  int64_t r = 0;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { r = c.snapshot(); }));
  return static_cast<uint64_t>(r);
}

StatusOr<std::string> RemoteGraph::Compact() {
  std::string r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { c.admin_compact(r); }, false));
  return r;
}

StatusOr<NodeData> RemoteGraph::Fragment(int64_t id, bool any_type, int64_t type,
                                         const std::vector<int64_t>& generations,
                                         uint64_t applied_through) {
  NodeFragment r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.fragment(r, id, any_type, type, generations, static_cast<int64_t>(applied_through));
  }));
  NodeData data;
  if (r.__isset.properties) data.properties = FromThrift(r.properties);
  data.edges = FromThrift(r.edges);
  return data;
}

StatusOr<std::vector<zipg::Edge>> RemoteGraph::FragmentEdges(
    int64_t id, int64_t type, const std::vector<int64_t>& generations,
    const std::vector<int64_t>& dsts, uint64_t applied_through) {
  std::vector<rpc::Edge> r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.fragment_edges(r, id, type, generations, dsts, static_cast<int64_t>(applied_through));
  }));
  return FromThrift(r);
}

StatusOr<std::vector<std::vector<zipg::Edge>>> RemoteGraph::FragmentEdgesBatch(
    const std::vector<FragmentAsk>& asks, uint64_t applied_through) {
  std::vector<std::vector<rpc::Edge>> r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.fragment_edges_batch(r, asks, static_cast<int64_t>(applied_through));
  }));
  if (r.size() != asks.size()) {
    return Status::Internal("fragment_edges_batch: " + std::to_string(r.size()) + " answers to " +
                            std::to_string(asks.size()) + " asks");
  }
  std::vector<std::vector<zipg::Edge>> out;
  out.reserve(r.size());
  for (const auto& edges : r) out.push_back(FromThrift(edges));
  return out;
}

StatusOr<std::vector<int64_t>> RemoteGraph::LogNodeIds(const Properties& properties) {
  std::vector<int64_t> r;
  const auto props = ToThrift(properties);
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) { c.log_node_ids(r, props); }));
  return r;
}

StatusOr<UpdateFeedChunk> RemoteGraph::UpdatesSince(uint32_t shard, uint64_t after,
                                                    const std::string& member,
                                                    uint32_t num_shards) {
  UpdateFeedChunk r;
  ZIPG_RETURN_IF_ERROR(pool_->Call([&](LogStoreServiceClient& c) {
    c.updates_since(r, static_cast<int32_t>(shard), static_cast<int64_t>(after), member,
                    static_cast<int32_t>(num_shards));
  }));
  return r;
}

size_t RequestBytes(const BatchedWrite& write) {
  size_t bytes = 48;  // kind, id, type, dst, timestamp and field headers
  for (const auto& [name, value] : write.properties) bytes += 8 + name.size() + value.size();
  return bytes;
}

std::vector<StatusOr<bool>> RemoteGraph::WriteBatch(const std::vector<zipg::Write>& writes) {
  std::vector<StatusOr<bool>> out;
  out.reserve(writes.size());
  std::vector<BatchedWrite> chunk;
  size_t bytes = 0;
  auto send = [&] {
    if (chunk.empty()) return;
    StatusOr<std::vector<StatusOr<bool>>> outcomes = SendWriteBatch(chunk);
    for (size_t i = 0; i < chunk.size(); ++i) {
      out.push_back(outcomes.ok() ? std::move((*outcomes)[i]) : StatusOr<bool>(outcomes.status()));
    }
    chunk.clear();
    bytes = 0;
  };
  for (const zipg::Write& w : writes) {
    BatchedWrite b = ToThrift(w);
    const size_t size = RequestBytes(b);
    if (!chunk.empty() && (chunk.size() == kBatchWrites || bytes + size > kMaxRequestBytes / 2)) {
      send();
    }
    bytes += size;
    chunk.push_back(std::move(b));
  }
  send();
  return out;
}

StatusOr<std::vector<StatusOr<bool>>> RemoteGraph::SendWriteBatch(
    const std::vector<BatchedWrite>& writes) {
  size_t bytes = 0;
  for (const BatchedWrite& w : writes) bytes += RequestBytes(w);
  if (bytes > kMaxRequestBytes) {
    return Status::ResourceExhausted("write batch of ~" + std::to_string(bytes) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(kMaxRequestBytes));
  }
  std::vector<WriteOutcome> r;
  ZIPG_RETURN_IF_ERROR(
      pool_->Call([&](LogStoreServiceClient& c) { c.write_batch(r, writes); }, false));
  if (r.size() != writes.size()) {
    return Status::Internal("write_batch answered " + std::to_string(r.size()) + " outcomes for " +
                            std::to_string(writes.size()) + " writes");
  }
  std::vector<StatusOr<bool>> out;
  out.reserve(r.size());
  for (const WriteOutcome& o : r) out.push_back(FromOutcome(o));
  return out;
}

}  // namespace zipg::rpc
