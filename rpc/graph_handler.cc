#include "rpc/graph_handler.h"

#include "rpc/convert.h"
#include "rpc/limits.h"
#include "util/snapshot.h"

namespace zipg::rpc {

void GraphHandler::get_node_property(MaybeProperties& _return, int64_t id, bool all_properties,
                                     const std::vector<std::string>& properties) {
  if (!all_properties) {
    ThrowIfError(CheckRequestCount("get_node_property", "property names", properties.size(),
                                   kMaxNamesPerCall));
  }
  auto props = ValueOrThrow(graph_->GetNodeProperty(id, all_properties ? nullptr : &properties));
  if (props) _return.__set_properties(ToThrift(*props));
}

void GraphHandler::get_node_ids(std::vector<int64_t>& _return,
                                const std::map<std::string, std::string>& properties) {
  ThrowIfError(
      CheckRequestCount("get_node_ids", "properties", properties.size(), kMaxNamesPerCall));
  _return = ValueOrThrow(graph_->GetNodeIds(FromThrift(properties)));
  ThrowIfError(CheckIdAnswer("get_node_ids", _return.size(), "add properties to the filter"));
}

void GraphHandler::search_node_ids(SearchAnswer& _return, const SearchRequest& search) {
  auto result = ValueOrThrow(graph_->SearchNodeIds(ValueOrThrow(FromThrift(search))));
  _return.ids = std::move(result.ids);
  _return.truncated = result.truncated;
}

void GraphHandler::get_neighbor_ids(std::vector<int64_t>& _return, int64_t id, bool any_type,
                                    int64_t type,
                                    const std::map<std::string, std::string>& properties) {
  ThrowIfError(
      CheckRequestCount("get_neighbor_ids", "properties", properties.size(), kMaxNamesPerCall));
  _return = ValueOrThrow(graph_->GetNeighborIds(
      id, any_type ? std::nullopt : std::optional<int64_t>(type), FromThrift(properties)));
  ThrowIfError(CheckIdAnswer("get_neighbor_ids", _return.size(),
                             "ask by type, or page through assoc_range"));
}

void GraphHandler::bfs(BfsResult& _return, int64_t id, bool any_type,
                       const std::vector<int64_t>& types, int32_t max_depth, int64_t limit) {
  const auto entries = ValueOrThrow(graph_->Bfs(
      id, any_type ? std::nullopt : std::optional<std::vector<int64_t>>(types), max_depth, limit));
  _return.ids.reserve(entries.size());
  _return.depths.reserve(entries.size());
  for (const zipg::BfsEntry& e : entries) {
    _return.ids.push_back(e.id);
    _return.depths.push_back(e.depth);
  }
}

void GraphHandler::rpq(RpqResult& _return, const std::string& expr, bool all_sources,
                       const std::vector<int64_t>& sources, int64_t limit) {
  if (!all_sources) {
    ThrowIfError(CheckRequestCount("rpq", "sources", sources.size(), kMaxIdsPerCall));
  }
  const auto result = ValueOrThrow(graph_->Rpq(
      expr, all_sources ? std::nullopt : std::optional<std::vector<int64_t>>(sources), limit));
  _return.srcs.reserve(result.pairs.size());
  _return.dsts.reserve(result.pairs.size());
  for (const auto& [src, dst] : result.pairs) {
    _return.srcs.push_back(src);
    _return.dsts.push_back(dst);
  }
  _return.truncated = result.truncated;
}

void GraphHandler::get_edge_record(EdgeRecord& _return, int64_t id, int64_t type) {
  const auto rec = ValueOrThrow(graph_->GetEdgeRecord(id, type));
  _return.src = rec.src;
  _return.type = rec.type;
  _return.count = rec.count;
}

void GraphHandler::get_edge_range(EdgeRange& _return, int64_t id, int64_t type, int64_t t_lo,
                                  int64_t t_hi) {
  const auto range = ValueOrThrow(graph_->GetEdgeRange(id, type, t_lo, t_hi));
  _return.begin_order = range.first;
  _return.end_order = range.second;
}

void GraphHandler::get_edge_data(MaybeEdge& _return, int64_t id, int64_t type, int64_t time_order) {
  auto edge = ValueOrThrow(graph_->GetEdgeData(id, type, time_order));
  if (edge) _return.__set_edge(ToThrift(*edge));
}

void GraphHandler::obj_get(MaybeNode& _return, int64_t id) {
  auto node = ValueOrThrow(graph_->ObjGet(id));
  if (!node) return;
  rpc::Node n;
  n.id = node->id;
  n.properties = ToThrift(node->properties);
  _return.__set_node(std::move(n));
}

GraphWriteApi& GraphHandler::Writer() {
  // A write's checks (exists? live?) and everything it calls read the latest state, whatever
  // snapshot the call's context carried (a client writing inside a ReadAt scope).
  ReadAt::Set(0);
  if (writer_ == nullptr) {
    throw ToError(Status::InvalidArgument(
        "this server does not take writes; send them to an aggregator or the LogStore"));
  }
  return *writer_;
}

namespace {
void CheckWriteProperties(const char* op, const std::map<std::string, std::string>& properties) {
  ThrowIfError(CheckRequestCount(op, "properties", properties.size(), kMaxNamesPerCall));
}
}  // namespace

void GraphHandler::obj_add(int64_t id, const std::map<std::string, std::string>& properties) {
  CheckWriteProperties("obj_add", properties);
  ThrowIfError(Writer().ObjAdd(id, FromThrift(properties)));
}
void GraphHandler::obj_update(int64_t id, const std::map<std::string, std::string>& properties) {
  CheckWriteProperties("obj_update", properties);
  ThrowIfError(Writer().ObjUpdate(id, FromThrift(properties)));
}
bool GraphHandler::obj_delete(int64_t id) { return ValueOrThrow(Writer().ObjDelete(id)); }
bool GraphHandler::assoc_add(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                             const std::map<std::string, std::string>& properties) {
  CheckWriteProperties("assoc_add", properties);
  return ValueOrThrow(
      Writer().AssocAdd(zipg::Edge{src, type, dst, timestamp, FromThrift(properties)}));
}
void GraphHandler::assoc_update(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                                const std::map<std::string, std::string>& properties) {
  CheckWriteProperties("assoc_update", properties);
  ThrowIfError(Writer().AssocUpdate(zipg::Edge{src, type, dst, timestamp, FromThrift(properties)}));
}
bool GraphHandler::assoc_delete(int64_t src, int64_t type, int64_t dst) {
  return ValueOrThrow(Writer().AssocDelete(src, type, dst));
}
int64_t GraphHandler::snapshot() { return static_cast<int64_t>(ValueOrThrow(graph_->Snapshot())); }
void GraphHandler::admin_compact(std::string& _return) {
  _return = ValueOrThrow(Writer().Compact());
}
void GraphHandler::write_batch(std::vector<WriteOutcome>& _return,
                               const std::vector<BatchedWrite>& writes) {
  GraphWriteApi& writer = Writer();
  ThrowIfError(CheckRequestCount("write_batch", "writes", writes.size(), kMaxWritesPerCall));
  _return.resize(writes.size());
  std::vector<zipg::Write> batch;
  std::vector<size_t> index;  // positions of `batch` in `writes`
  for (size_t i = 0; i < writes.size(); ++i) {
    StatusOr<zipg::Write> w = writes[i].properties.size() > kMaxNamesPerCall
                                  ? StatusOr<zipg::Write>(CheckRequestCount(
                                        "write_batch", "properties in a write",
                                        writes[i].properties.size(), kMaxNamesPerCall))
                                  : FromThrift(writes[i]);
    if (!w.ok()) {
      _return[i] = ToOutcome(w.status());
      continue;
    }
    batch.push_back(std::move(*w));
    index.push_back(i);
  }
  const std::vector<StatusOr<bool>> outcomes = writer.WriteBatch(batch);
  for (size_t k = 0; k < outcomes.size(); ++k) _return[index[k]] = ToOutcome(outcomes[k]);
}

void GraphHandler::assoc_range(std::vector<Edge>& _return, int64_t id, int64_t type, int64_t pos,
                               int64_t limit) {
  const auto edges = ValueOrThrow(graph_->AssocRange(id, type, pos, EngineLimit(limit)));
  ThrowIfError(CheckEdgeAnswer("assoc_range", edges, "page with a smaller limit"));
  _return = ToThrift(edges);
}

int64_t GraphHandler::assoc_count(int64_t id, int64_t type) {
  return ValueOrThrow(graph_->AssocCount(id, type));
}

void GraphHandler::assoc_get(std::vector<Edge>& _return, int64_t id, int64_t type,
                             const std::vector<int64_t>& ids, int64_t low, int64_t high) {
  ThrowIfError(CheckRequestCount("assoc_get", "ids", ids.size(), kMaxIdsPerCall));
  const auto edges = ValueOrThrow(graph_->AssocGet(id, type, ids, low, high));
  ThrowIfError(CheckEdgeAnswer("assoc_get", edges, "ask for fewer ids"));
  _return = ToThrift(edges);
}

void GraphHandler::assoc_time_range(std::vector<Edge>& _return, int64_t id, int64_t type,
                                    int64_t low, int64_t high, int64_t limit) {
  const auto edges = ValueOrThrow(graph_->AssocTimeRange(id, type, low, high, EngineLimit(limit)));
  ThrowIfError(CheckEdgeAnswer("assoc_time_range", edges, "page with a smaller limit"));
  _return = ToThrift(edges);
}

void GraphHandler::status(std::string& _return) { _return = ValueOrThrow(status_()); }

}  // namespace zipg::rpc
