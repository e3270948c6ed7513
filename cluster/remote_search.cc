#include "cluster/remote_search.h"

#include <map>

#include "rpc/remote_graph.h"

namespace zipg::cluster {

Status AddSearchCalls(const ClusterView& view, const ShardMap& map, rpc::PoolSet* pools,
                      const std::vector<uint32_t>& shards, bool logstore, const NodeSearch& q,
                      std::vector<rpc::IdsCall>* calls) {
  if (map.num_shards == 0) return Status::Unavailable("no shard server is registered");
  ZIPG_ASSIGN_OR_RETURN(auto plan, PlanShards(map, shards));
  const uint32_t n = map.num_shards;  // the numbering of `shards`
  for (const auto& [name, work] : plan) {
    calls->push_back([=, &view, name = name, work = work]() -> StatusOr<std::vector<int64_t>> {
      auto call = [&](const ServerWork<int32_t>& w) {
        return rpc::RemoteGraph(pools->Get(w.endpoint)).LocalSearchNodeIds(w.items, q, n);
      };
      auto got = call(work);
      if (got.ok() || !RetryElsewhere(got.status())) return got;
      std::map<uint32_t, std::vector<int32_t>> by_shard;  // once more on other replicas
      for (int32_t s : work.items) by_shard[static_cast<uint32_t>(s)].push_back(s);
      return RetryOnOthers(view, name, by_shard, call);
    });
  }
  if (logstore) {
    ZIPG_ASSIGN_OR_RETURN(const MemberInfo* member, map.LogStore());
    calls->push_back([pools, endpoint = member->endpoint, q] {
      return rpc::RemoteGraph(pools->Get(endpoint)).LogSearchNodeIds(q);
    });
  }
  return Status::OK();
}

}  // namespace zipg::cluster
