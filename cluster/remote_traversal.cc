// Traversal steps on remote shard servers (cluster/remote_traversal.h).

#include "cluster/remote_traversal.h"

#include <memory>

#include "graph/partition.h"
#include "rpc/remote_graph.h"

namespace zipg::cluster {

Status AddExpandCalls(const ClusterView& view, rpc::PoolSet* pools,
                      const graph::PathAutomaton& automaton,
                      const std::map<uint32_t, std::vector<graph::Visit>>& groups,
                      const graph::TraversalBudget& budget,
                      std::vector<rpc::ListCall<graph::Visit>>* calls) {
  if (groups.empty()) return Status::OK();
  auto map = view.Current();
  auto plan = std::make_shared<WorkPlan<graph::Visit>>();
  // Grouped again by the map's count: a shard server's groups are by its own, which differs
  // from the map's for a moment around a split (docs/cluster-changes.md, step 4).
  if (map->num_shards == 0) return Status::Unavailable("no shard server is registered");
  std::map<uint32_t, std::vector<graph::Visit>> by_map;
  for (const auto& [s, visits] : groups) {
    for (const graph::Visit& v : visits) by_map[ShardOf(v.node, map->num_shards)].push_back(v);
  }
  for (const auto& [s, visits] : by_map) ZIPG_RETURN_IF_ERROR(AddWork(*map, s, visits, plan.get()));
  auto shared_automaton = std::make_shared<const graph::PathAutomaton>(automaton);
  const auto deadline = budget.deadline();
  const uint64_t max_visits = budget.max_step_visits();
  const uint32_t num_shards = map->num_shards;
  for (const auto& [name, work] : *plan) {
    for (size_t first = 0; first < work.items.size(); first += kVisitsPerCall) {
      const size_t last = std::min(work.items.size(), first + kVisitsPerCall);
      calls->push_back([=, &view, name = name,
                        endpoint = work.endpoint]() -> StatusOr<std::vector<graph::Visit>> {
        const std::vector<graph::Visit> chunk(plan->at(name).items.begin() + first,
                                              plan->at(name).items.begin() + last);
        // The time left when the call is made (calls may wait for a fan-out thread).
        auto call = [&](const ServerWork<graph::Visit>& w) {
          return rpc::RemoteGraph(pools->Get(w.endpoint))
              .TraverseExpand(*shared_automaton, w.items,
                              graph::TraversalBudget::RemainingMs(deadline), max_visits);
        };
        auto got = call(ServerWork<graph::Visit>{endpoint, chunk});
        if (got.ok() || !RetryElsewhere(got.status()) ||
            graph::TraversalBudget::RemainingMs(deadline) == 0) {
          return got;
        }
        std::map<uint32_t, std::vector<graph::Visit>> by_shard;  // once more on other replicas
        for (const graph::Visit& v : chunk) by_shard[ShardOf(v.node, num_shards)].push_back(v);
        return RetryOnOthers<graph::Visit, graph::Visit>(view, name, by_shard, call);
      });
    }
  }
  return Status::OK();
}

Status AddSourcesCalls(const ClusterView& view, const ShardMap& map, rpc::PoolSet* pools,
                       const std::vector<uint32_t>& shards, bool include_dsts,
                       const graph::TraversalBudget& budget, std::vector<rpc::IdsCall>* calls) {
  const auto deadline = budget.deadline();
  const uint64_t max_ids = budget.memory_bytes() / sizeof(int64_t);
  ZIPG_ASSIGN_OR_RETURN(auto plan, PlanShards(map, shards));
  const uint32_t n = map.num_shards;  // the numbering of `shards`
  for (const auto& [name, work] : plan) {
    calls->push_back([=, &view, name = name, work = work]() -> StatusOr<std::vector<int64_t>> {
      auto call = [&](const ServerWork<int32_t>& w) {
        return rpc::RemoteGraph(pools->Get(w.endpoint))
            .TraverseSources(w.items, include_dsts, graph::TraversalBudget::RemainingMs(deadline),
                             max_ids, n);
      };
      auto got = call(work);
      if (got.ok() || !RetryElsewhere(got.status()) ||
          graph::TraversalBudget::RemainingMs(deadline) == 0) {
        return got;
      }
      std::map<uint32_t, std::vector<int32_t>> by_shard;
      for (int32_t s : work.items) by_shard[static_cast<uint32_t>(s)].push_back(s);
      return RetryOnOthers(view, name, by_shard, call);
    });
  }
  return Status::OK();
}

}  // namespace zipg::cluster
