#include "shard/server.h"

#include <algorithm>

#include "graph/partition.h"
#include "rpc/convert.h"
#include "rpc/fanout.h"
#include "rpc/remote_graph.h"

namespace zipg::shard {

StatusOr<std::unique_ptr<ServerGraph>> ServerGraph::Open(const std::string& dir,
                                                         const std::vector<uint32_t>& shards,
                                                         const GraphOpenOptions& options,
                                                         const cluster::ClusterView* view,
                                                         rpc::PoolSet* pools) {
  if (shards.empty()) return Status::InvalidArgument("a shard server needs at least one shard");
  std::unique_ptr<ServerGraph> g(new ServerGraph());
  ZIPG_ASSIGN_OR_RETURN(g->store_, OpenStore(dir, options, &shards));
  g->set_num_shards(g->store_.manifest.shards);
  g->hosted_ = shards;
  std::sort(g->hosted_.begin(), g->hosted_.end());
  g->hosted_.erase(std::unique(g->hosted_.begin(), g->hosted_.end()), g->hosted_.end());
  g->view_ = view;
  g->pools_ = pools;
  return g;
}

StatusOr<const shard::Shard*> ServerGraph::LocalShard(uint32_t index) {
  if (index < store_.shards.size() && store_.shards[index]) return store_.shards[index].get();
  return Status::Unavailable("shard " + std::to_string(index) + " is not served here");
}

StatusOr<std::vector<int64_t>> ServerGraph::LocalNodeIds(const std::vector<int32_t>& shards,
                                                         const Properties& properties) {
  if (properties.empty()) {
    return Status::InvalidArgument("get_node_ids needs at least one property");
  }
  std::vector<int64_t> ids;
  for (int32_t s : shards) {
    if (s < 0) return Status::InvalidArgument("negative shard number");
    ZIPG_ASSIGN_OR_RETURN(const shard::Shard* shard, LocalShard(static_cast<uint32_t>(s)));
    ZIPG_ASSIGN_OR_RETURN(auto part, shard->GetNodeIds(properties));
    ids.insert(ids.end(), part.begin(), part.end());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> ServerGraph::NodeIdsOnAllShards(const Properties& properties) {
  std::vector<int32_t> local;
  cluster::WorkPlan<int32_t> remote;
  auto map = view_ ? view_->Current() : nullptr;
  for (uint32_t s = 0; s < num_shards(); ++s) {
    if (store_.shards[s]) {
      local.push_back(static_cast<int32_t>(s));
      continue;
    }
    if (!map) return Status::Unavailable("shard " + std::to_string(s) + " is not served here");
    ZIPG_RETURN_IF_ERROR(cluster::AddWork(*map, s, {static_cast<int32_t>(s)}, &remote));
  }
  std::vector<rpc::IdsCall> calls;
  calls.push_back([&] { return LocalNodeIds(local, properties); });
  for (const auto& [name, work] : remote) {
    calls.push_back([this, &work, &properties] {
      return rpc::RemoteGraph(pools_->Get(work.endpoint)).LocalNodeIds(work.items, properties);
    });
  }
  return rpc::GatherIds(fanout_, calls);
}

StatusOr<std::vector<int64_t>> ServerGraph::FilterGroups(
    const std::map<uint32_t, std::vector<int64_t>>& groups, const Properties& properties) {
  std::vector<int64_t> local;
  cluster::WorkPlan<int64_t> remote;
  auto map = view_ ? view_->Current() : nullptr;
  for (const auto& [s, ids] : groups) {
    if (s < store_.shards.size() && store_.shards[s]) {
      local.insert(local.end(), ids.begin(), ids.end());
      continue;
    }
    if (!map) return Status::Unavailable("shard " + std::to_string(s) + " is not served here");
    ZIPG_RETURN_IF_ERROR(cluster::AddWork(*map, s, ids, &remote));
  }
  std::vector<rpc::IdsCall> calls;
  calls.push_back([&] { return FilterLocal(local, properties); });
  for (const auto& [name, work] : remote) {
    calls.push_back([this, &work, &properties] {
      return rpc::RemoteGraph(pools_->Get(work.endpoint)).FilterNodes(work.items, properties);
    });
  }
  return rpc::GatherIds(fanout_, calls);
}

void ShardHandler::filter_nodes(std::vector<int64_t>& _return, const std::vector<int64_t>& ids,
                                const std::map<std::string, std::string>& properties) {
  _return = rpc::ValueOrThrow(graph_->FilterLocal(ids, rpc::FromThrift(properties)));
}

void ShardHandler::local_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                                  const std::map<std::string, std::string>& properties) {
  _return = rpc::ValueOrThrow(graph_->LocalNodeIds(shards, rpc::FromThrift(properties)));
}

}  // namespace zipg::shard
