#include "graph/router.h"

#include <algorithm>

#include "graph/partition.h"

namespace zipg {

namespace {
Status CheckId(int64_t id, const char* what) {
  if (id < 0) return Status::InvalidArgument(std::string(what) + " must be >= 0");
  return Status::OK();
}
Status CheckEdgeArgs(int64_t id, int64_t type) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  return CheckId(type, "type");
}
}  // namespace

Status ShardRouter::ReadNode(uint32_t shard, int64_t, const NodeRead& read) {
  ZIPG_ASSIGN_OR_RETURN(ShardRef ref, LocalShard(shard));
  return read(*ref);
}

template <typename Read>
auto ShardRouter::ReadOwner(int64_t id, Read&& read)
    -> decltype(read(std::declval<const layout::ShardReader&>())) {
  std::optional<decltype(read(std::declval<const layout::ShardReader&>()))> answer;
  ZIPG_RETURN_IF_ERROR(ReadNode(ShardOf(id, num_shards()), id, [&](const layout::ShardReader& s) {
    answer.emplace(read(s));
    return answer->status();
  }));
  return std::move(*answer);
}

StatusOr<std::vector<int64_t>> ShardRouter::NodeIdsOnAllShards(const Properties& properties) {
  std::vector<int64_t> ids;
  for (uint32_t i = 0; i < num_shards(); ++i) {
    ZIPG_ASSIGN_OR_RETURN(ShardRef shard, LocalShard(i));
    ZIPG_ASSIGN_OR_RETURN(auto part, shard->GetNodeIds(properties));
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

StatusOr<std::vector<int64_t>> ShardRouter::SearchLocal(const std::vector<uint32_t>& shards,
                                                        const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  std::vector<int64_t> ids;
  for (uint32_t s : shards) {
    ZIPG_ASSIGN_OR_RETURN(ShardRef shard, LocalShard(s));
    ZIPG_ASSIGN_OR_RETURN(auto part, shard->SearchNodeIds(q));
    ids.insert(ids.end(), part.begin(), part.end());
  }
  CutSearchPart(&ids, q.limit);
  return ids;
}

StatusOr<std::vector<int64_t>> ShardRouter::SearchOnAllShards(const NodeSearch& q) {
  std::vector<uint32_t> all(num_shards());
  for (uint32_t i = 0; i < num_shards(); ++i) all[i] = i;
  return SearchLocal(all, q);
}

StatusOr<SearchResult> ShardRouter::SearchNodeIds(const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  ZIPG_ASSIGN_OR_RETURN(auto ids, SearchOnAllShards(q));
  return FinishSearch(std::move(ids), q.limit);
}

StatusOr<std::vector<int64_t>> ShardRouter::FilterLocal(const std::vector<int64_t>& ids,
                                                        const Properties& properties) {
  std::vector<int64_t> kept;
  for (int64_t id : ids) {
    ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
    // A filter reads many nodes and is not a single-object operation: no commit wait.
    ZIPG_ASSIGN_OR_RETURN(ShardRef shard, LocalShard(ShardOf(id, num_shards())));
    ZIPG_ASSIGN_OR_RETURN(bool ok, shard->NodeMatches(id, properties));
    if (ok) kept.push_back(id);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

StatusOr<std::vector<int64_t>> ShardRouter::FilterGroups(
    const std::map<uint32_t, std::vector<int64_t>>& groups, const Properties& properties) {
  std::vector<int64_t> kept;
  for (const auto& [shard, group] : groups) {
    ZIPG_ASSIGN_OR_RETURN(auto part, FilterLocal(group, properties));
    kept.insert(kept.end(), part.begin(), part.end());
  }
  return kept;
}

StatusOr<std::optional<Properties>> ShardRouter::GetNodeProperty(
    int64_t id, const std::vector<std::string>* names) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  return ReadOwner(
      id, [&](const layout::ShardReader& shard) { return shard.GetNodeProperty(id, names); });
}

StatusOr<std::vector<int64_t>> ShardRouter::GetNodeIds(const Properties& properties) {
  if (properties.empty()) {
    return Status::InvalidArgument("get_node_ids needs at least one property");
  }
  ZIPG_ASSIGN_OR_RETURN(auto ids, NodeIdsOnAllShards(properties));
  std::sort(ids.begin(), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> ShardRouter::GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                           const Properties& properties) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  if (type) ZIPG_RETURN_IF_ERROR(CheckId(*type, "type"));
  ZIPG_ASSIGN_OR_RETURN(auto neighbors, ReadOwner(id, [&](const layout::ShardReader& shard) {
                          return shard.NeighborIds(id, type);
                        }));
  if (properties.empty()) return neighbors;
  std::map<uint32_t, std::vector<int64_t>> groups;
  for (int64_t dst : neighbors) groups[ShardOf(dst, num_shards())].push_back(dst);
  ZIPG_ASSIGN_OR_RETURN(auto kept, FilterGroups(groups, properties));
  std::sort(kept.begin(), kept.end());
  return kept;
}

StatusOr<EdgeRecordInfo> ShardRouter::GetEdgeRecord(int64_t id, int64_t type) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  ZIPG_ASSIGN_OR_RETURN(int64_t count, ReadOwner(id, [&](const layout::ShardReader& shard) {
                          return shard.AssocCount(id, type);
                        }));
  return EdgeRecordInfo{id, type, count};
}

StatusOr<std::pair<int64_t, int64_t>> ShardRouter::GetEdgeRange(int64_t id, int64_t type,
                                                                int64_t t_lo, int64_t t_hi) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  return ReadOwner(
      id, [&](const layout::ShardReader& shard) { return shard.EdgeRange(id, type, t_lo, t_hi); });
}

StatusOr<std::optional<Edge>> ShardRouter::GetEdgeData(int64_t id, int64_t type,
                                                       int64_t time_order) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  if (time_order < 0) return std::optional<Edge>();
  return ReadOwner(
      id, [&](const layout::ShardReader& shard) { return shard.EdgeData(id, type, time_order); });
}

StatusOr<std::optional<Node>> ShardRouter::ObjGet(int64_t id) {
  ZIPG_RETURN_IF_ERROR(CheckId(id, "id"));
  ZIPG_ASSIGN_OR_RETURN(auto props, ReadOwner(id, [&](const layout::ShardReader& shard) {
                          return shard.GetNodeProperty(id, nullptr);
                        }));
  if (!props) return std::optional<Node>();
  return std::optional<Node>(Node{id, std::move(*props)});
}

StatusOr<std::vector<Edge>> ShardRouter::AssocRange(int64_t id, int64_t type, int64_t pos,
                                                    int64_t limit) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  ZIPG_RETURN_IF_ERROR(CheckId(pos, "pos"));
  ZIPG_RETURN_IF_ERROR(CheckId(limit, "limit"));
  return ReadOwner(
      id, [&](const layout::ShardReader& shard) { return shard.AssocRange(id, type, pos, limit); });
}

StatusOr<int64_t> ShardRouter::AssocCount(int64_t id, int64_t type) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  return ReadOwner(id,
                   [&](const layout::ShardReader& shard) { return shard.AssocCount(id, type); });
}

StatusOr<std::vector<Edge>> ShardRouter::AssocGet(int64_t id, int64_t type,
                                                  const std::vector<int64_t>& ids, int64_t low,
                                                  int64_t high) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  return ReadOwner(id, [&](const layout::ShardReader& shard) {
    return shard.AssocGet(id, type, ids, low, high);
  });
}

StatusOr<std::vector<Edge>> ShardRouter::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                        int64_t high, int64_t limit) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeArgs(id, type));
  ZIPG_RETURN_IF_ERROR(CheckId(limit, "limit"));
  return ReadOwner(id, [&](const layout::ShardReader& shard) {
    return shard.AssocTimeRange(id, type, low, high, limit);
  });
}

}  // namespace zipg

namespace zipg {

layout::ShardReader::ListBounds ListBoundsOf(const graph::TraversalBudget& budget) {
  return {budget.deadline(), budget.memory_bytes() / sizeof(int64_t)};
}

// The router's traversal step: the frontier grouped by owning shard, then ExpandGroups.
class ShardRouter::Expander final : public graph::FrontierExpander {
 public:
  explicit Expander(ShardRouter* router) : router_(router) {}
  StatusOr<std::vector<graph::Visit>> Expand(const graph::PathAutomaton& automaton,
                                             const std::vector<graph::Visit>& frontier,
                                             const graph::TraversalBudget& budget) override {
    return router_->ExpandGroups(automaton, graph::GroupByShard(frontier, router_->num_shards()),
                                 budget);
  }

 private:
  ShardRouter* router_;
};

StatusOr<std::vector<graph::Visit>> ShardRouter::ExpandLocal(const graph::PathAutomaton& automaton,
                                                             std::vector<graph::Visit> visits,
                                                             int64_t deadline_ms,
                                                             uint64_t max_visits) {
  for (const graph::Visit& v : visits) ZIPG_RETURN_IF_ERROR(CheckId(v.node, "node"));
  return ExpandShards(automaton, graph::GroupByShard(visits, num_shards()), deadline_ms,
                      max_visits);
}

StatusOr<std::vector<graph::Visit>> ShardRouter::ExpandShards(
    const graph::PathAutomaton& automaton, std::map<uint32_t, std::vector<graph::Visit>> groups,
    int64_t deadline_ms, uint64_t max_visits) {
  std::vector<graph::Visit> out;
  for (auto& [s, group] : groups) {
    ZIPG_ASSIGN_OR_RETURN(ShardRef shard, LocalShard(s));
    ZIPG_ASSIGN_OR_RETURN(auto part, graph::ExpandOnShard(*shard, automaton, std::move(group),
                                                          deadline_ms, max_visits - out.size()));
    out.insert(out.end(), part.begin(), part.end());
  }
  if (groups.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

StatusOr<std::vector<int64_t>> ShardRouter::SourcesLocal(
    const std::vector<uint32_t>& shards, bool include_dsts,
    const layout::ShardReader::ListBounds& bounds) {
  std::vector<int64_t> out;
  for (uint32_t s : shards) {
    if (s >= num_shards()) {
      return Status::InvalidArgument("no shard " + std::to_string(s) + " in a store of " +
                                     std::to_string(num_shards()));
    }
    ZIPG_ASSIGN_OR_RETURN(ShardRef shard, LocalShard(s));
    ZIPG_ASSIGN_OR_RETURN(auto part, shard->Sources(include_dsts, bounds));
    out.insert(out.end(), part.begin(), part.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

StatusOr<std::vector<graph::Visit>> ShardRouter::ExpandGroups(
    const graph::PathAutomaton& automaton,
    const std::map<uint32_t, std::vector<graph::Visit>>& groups,
    const graph::TraversalBudget& budget) {
  return ExpandShards(automaton, groups, budget.remaining_ms(), budget.max_step_visits());
}

StatusOr<std::vector<int64_t>> ShardRouter::SourcesOnAllShards(
    bool include_dsts, const graph::TraversalBudget& budget) {
  std::vector<uint32_t> all(num_shards());
  for (uint32_t s = 0; s < num_shards(); ++s) all[s] = s;
  return SourcesLocal(all, include_dsts, ListBoundsOf(budget));
}

StatusOr<std::vector<BfsEntry>> ShardRouter::Bfs(int64_t id,
                                                 const std::optional<std::vector<int64_t>>& types,
                                                 int32_t max_depth, int64_t limit) {
  ZIPG_RETURN_IF_ERROR(graph::CheckBfsArgs(id, types, max_depth, limit));
  Expander expander(this);
  return graph::RunBfs(expander, id, types, max_depth, limit, traversal_limits_);
}

StatusOr<RpqResult> ShardRouter::Rpq(const std::string& expr,
                                     const std::optional<std::vector<int64_t>>& sources,
                                     int64_t limit) {
  ZIPG_RETURN_IF_ERROR(graph::CheckRpqArgs(sources, limit));
  ZIPG_ASSIGN_OR_RETURN(auto automaton, graph::PathAutomaton::Parse(expr));
  Expander expander(this);
  return graph::RunRpq(
      expander, automaton, sources,
      [this](bool include_dsts, const graph::TraversalBudget& budget) {
        return SourcesOnAllShards(include_dsts, budget);
      },
      limit, traversal_limits_);
}

}  // namespace zipg
