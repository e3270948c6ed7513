#include "shard/merged.h"

#include <algorithm>

namespace zipg::shard {

namespace {
bool TypeThenNewest(const Edge& a, const Edge& b) {
  if (a.type != b.type) return a.type < b.type;
  return NewestFirst(a, b);
}
}  // namespace

StatusOr<NodeData> MergedShard::Materialize(int64_t id, const NodeUpdates& entry, Want want,
                                            int64_t type) const {
  NodeData data;
  if (!entry.props_dead) {
    ZIPG_ASSIGN_OR_RETURN(data.properties, base_->GetNodeProperty(id, nullptr));
    if (data.properties) {
      std::sort(data.properties->begin(), data.properties->end());
    }
  }
  if (want != Want::kProperties && !entry.edges_dead) {
    ZIPG_ASSIGN_OR_RETURN(
        auto edges,
        base_->AllEdges(id, want == Want::kType ? std::optional<int64_t>(type) : std::nullopt));
    for (auto& e : edges) {
      if (!entry.EdgeDead(e.type, e.dst)) data.edges.push_back(std::move(e));
    }
  }
  if (!entry.generations.empty()) {
    if (log_ == nullptr) return Status::Unavailable("no LogStore to read written node from");
    ZIPG_ASSIGN_OR_RETURN(
        NodeData log,
        log_->Fragment(id, want == Want::kAllTypes, want == Want::kType ? type : -1,
                       entry.generations));
    if (log.properties) data.properties = std::move(log.properties);
    for (auto& e : log.edges) data.edges.push_back(std::move(e));
  }
  std::sort(data.edges.begin(), data.edges.end(), TypeThenNewest);
  return data;
}

StatusOr<std::optional<EdgeList>> MergedShard::TouchedEdges(int64_t id, int64_t type) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return std::optional<EdgeList>();
  ZIPG_ASSIGN_OR_RETURN(NodeData data, Materialize(id, *entry, Want::kType, type));
  return std::optional<EdgeList>(std::move(data.edges));
}

StatusOr<std::optional<Properties>> MergedShard::GetNodeProperty(
    int64_t id, const std::vector<std::string>* names) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return base_->GetNodeProperty(id, names);
  ZIPG_ASSIGN_OR_RETURN(NodeData data, Materialize(id, *entry, Want::kProperties, 0));
  if (!data.properties) return std::optional<Properties>();
  return std::optional<Properties>(SelectProperties(*data.properties, names));
}

StatusOr<bool> MergedShard::NodeMatches(int64_t id, const Properties& filter) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return base_->NodeMatches(id, filter);
  ZIPG_ASSIGN_OR_RETURN(NodeData data, Materialize(id, *entry, Want::kProperties, 0));
  if (!data.properties) return false;
  Properties sorted_filter = filter;
  std::sort(sorted_filter.begin(), sorted_filter.end());
  return MatchesAll(*data.properties, sorted_filter);
}

StatusOr<std::vector<int64_t>> MergedShard::GetNodeIds(const Properties& properties) const {
  // Live properties of a touched node are either still here (not props_dead) or in the LogStore,
  // which answers for its own fragments (log_node_ids).
  ZIPG_ASSIGN_OR_RETURN(auto ids, base_->GetNodeIds(properties));
  if (updates_->size() == 0) return ids;
  std::vector<int64_t> kept;
  for (int64_t id : ids) {
    auto entry = updates_->Lookup(id);
    if (!entry || !entry->props_dead) kept.push_back(id);
  }
  return kept;
}

StatusOr<std::vector<int64_t>> MergedShard::NeighborIds(int64_t id,
                                                        std::optional<int64_t> type) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return base_->NeighborIds(id, type);
  ZIPG_ASSIGN_OR_RETURN(NodeData data,
                        Materialize(id, *entry, type ? Want::kType : Want::kAllTypes,
                                    type.value_or(0)));
  std::vector<int64_t> ids;
  for (const auto& e : data.edges) ids.push_back(e.dst);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<int64_t> MergedShard::AssocCount(int64_t id, int64_t type) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return base_->AssocCount(id, type);
  // Fragments are disjoint: the count is the sum of each one's live count.
  ZIPG_ASSIGN_OR_RETURN(int64_t n, LiveCount(*base_, id, type, entry.get()));
  if (!entry->generations.empty()) {
    if (log_ == nullptr) return Status::Unavailable("no LogStore to read written node from");
    ZIPG_ASSIGN_OR_RETURN(int64_t logged, log_->FragmentCount(id, type, entry->generations));
    n += logged;
  }
  return n;
}

StatusOr<std::pair<int64_t, int64_t>> MergedShard::EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                             int64_t hi) const {
  ZIPG_ASSIGN_OR_RETURN(auto edges, TouchedEdges(id, type));
  if (!edges) return base_->EdgeRange(id, type, lo, hi);
  return ListEdgeRange(*edges, lo, hi);
}

StatusOr<std::optional<Edge>> MergedShard::EdgeData(int64_t id, int64_t type,
                                                    int64_t time_order) const {
  ZIPG_ASSIGN_OR_RETURN(auto edges, TouchedEdges(id, type));
  if (!edges) return base_->EdgeData(id, type, time_order);
  return ListEdgeData(*edges, time_order);
}

StatusOr<std::vector<Edge>> MergedShard::AssocRange(int64_t id, int64_t type, int64_t pos,
                                                    int64_t limit) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return base_->AssocRange(id, type, pos, limit);
  if (pos < 0 || limit < 0 || pos > kBoundedRange || limit > kBoundedRange - pos) {
    ZIPG_ASSIGN_OR_RETURN(NodeData data, Materialize(id, *entry, Want::kType, type));
    return ListAssocRange(data.edges, pos, limit);
  }
  // The first pos + limit edges of the merged list are among the first pos + limit live edges of
  // each fragment (fragments are disjoint: one live version per key). Base: its first pos + limit
  // + (deleted keys of this type) stored edges hold its first pos + limit live ones.
  if (limit == 0) return std::vector<Edge>();
  const int64_t k = pos + limit;
  EdgeList edges;
  if (!entry->edges_dead && k > 0) {
    ZIPG_ASSIGN_OR_RETURN(
        auto base, base_->AssocRange(id, type, 0, k + static_cast<int64_t>(entry->DeadCount(type))));
    for (auto& e : base) {
      if (!entry->EdgeDead(e.type, e.dst)) edges.push_back(std::move(e));
    }
  }
  if (!entry->generations.empty() && k > 0) {
    if (log_ == nullptr) return Status::Unavailable("no LogStore to read written node from");
    ZIPG_ASSIGN_OR_RETURN(NodeData log, log_->Fragment(id, false, type, entry->generations, k));
    for (auto& e : log.edges) edges.push_back(std::move(e));
  }
  std::sort(edges.begin(), edges.end(), NewestFirst);
  return ListAssocRange(edges, pos, limit);
}

StatusOr<std::vector<Edge>> MergedShard::AssocGet(int64_t id, int64_t type,
                                                  const std::vector<int64_t>& ids, int64_t low,
                                                  int64_t high) const {
  auto entry = updates_->Lookup(id);
  if (!entry) return base_->AssocGet(id, type, ids, low, high);
  // Only the keys asked for: each fragment's live version of them, merged, then the same
  // selection as on a materialized list.
  std::vector<int64_t> wanted = ids;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  EdgeList edges;
  if (!entry->edges_dead && !wanted.empty()) {
    ZIPG_ASSIGN_OR_RETURN(auto base, base_->AssocGet(id, type, wanted, low, high));
    for (auto& e : base) {
      if (!entry->EdgeDead(e.type, e.dst)) edges.push_back(std::move(e));
    }
  }
  if (!entry->generations.empty() && !wanted.empty()) {
    if (log_ == nullptr) return Status::Unavailable("no LogStore to read written node from");
    ZIPG_ASSIGN_OR_RETURN(auto logged, log_->FragmentEdges(id, type, entry->generations, wanted));
    for (auto& e : logged) edges.push_back(std::move(e));
  }
  std::sort(edges.begin(), edges.end(), NewestFirst);
  return ListAssocGet(edges, ids, low, high);
}

StatusOr<std::vector<Edge>> MergedShard::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                        int64_t high, int64_t limit) const {
  ZIPG_ASSIGN_OR_RETURN(auto edges, TouchedEdges(id, type));
  if (!edges) return base_->AssocTimeRange(id, type, low, high, limit);
  return ListAssocTimeRange(*edges, low, high, limit);
}

}  // namespace zipg::shard
