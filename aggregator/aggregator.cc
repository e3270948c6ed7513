#include "aggregator/aggregator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "cluster/remote_search.h"
#include "cluster/remote_traversal.h"
#include "graph/partition.h"
#include "rpc/convert.h"
#include "rpc/fanout.h"
#include "util/snapshot.h"

namespace zipg::aggregator {

using nlohmann::json;

ClusterGraph::ClusterGraph(const cluster::ClusterView* view, rpc::PoolSet* pools,
                           size_t write_batches)
    : view_(view),
      pools_(pools),
      fanout_(8),
      batcher_(
          [this](const std::vector<rpc::BatchedWrite>& writes)
              -> StatusOr<std::vector<StatusOr<bool>>> {
            ZIPG_ASSIGN_OR_RETURN(rpc::RemoteGraph log, LogStore());
            return log.SendWriteBatch(writes);
          },
          WriteBatcher::Options{.max_in_flight = write_batches},
          [this] {
            auto map = view_->Current();
            auto logstore = map->LogStore();
            return logstore.ok() ? (*logstore)->endpoint.ToString() : std::string();
          }) {
  leader_watch_ = std::thread([this] { WatchLeader(); });
}

ClusterGraph::~ClusterGraph() {
  {
    std::lock_guard lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (leader_watch_.joinable()) leader_watch_.join();
}

void ClusterGraph::WatchLeader() {
  std::optional<rpc::Endpoint> last;
  std::unique_lock lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopping_; })) {
    auto map = view_->Current();
    auto logstore = map->LogStore();
    if (!logstore.ok()) continue;
    const rpc::Endpoint now = (*logstore)->endpoint;
    if (last && last->ToString() != now.ToString()) pools_->Get(*last)->Interrupt();
    last = now;
  }
}

StatusOr<uint32_t> ClusterGraph::ShardFor(int64_t id) const {
  if (id < 0) return Status::InvalidArgument("id must be >= 0");
  auto map = view_->Current();
  if (map->num_shards == 0) return Status::Unavailable("no shard server is registered");
  return ShardOf(id, map->num_shards);
}

StatusOr<rpc::RemoteGraph> ClusterGraph::LogStore() {
  auto map = view_->Current();
  ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* logstore, map->LogStore());
  return rpc::RemoteGraph(pools_->Get(logstore->endpoint));
}

Status ClusterGraph::ObjAdd(int64_t id, const Properties& properties) {
  ZIPG_ASSIGN_OR_RETURN(rpc::RemoteGraph log, LogStore());
  return log.ObjAdd(id, properties);
}
Status ClusterGraph::ObjUpdate(int64_t id, const Properties& properties) {
  ZIPG_ASSIGN_OR_RETURN(rpc::RemoteGraph log, LogStore());
  return log.ObjUpdate(id, properties);
}
StatusOr<bool> ClusterGraph::ObjDelete(int64_t id) {
  return Batched(rpc::WriteKind::OBJ_DELETE, id, 0, 0, 0, nullptr);
}
StatusOr<bool> ClusterGraph::AssocAdd(const Edge& edge) {
  ZIPG_RETURN_IF_ERROR(rpc::CheckRequestSize(0, &edge.properties, nullptr));
  return Batched(rpc::WriteKind::ASSOC_ADD, edge.src, edge.type, edge.dst, edge.timestamp,
                 &edge.properties);
}
Status ClusterGraph::AssocUpdate(const Edge& edge) {
  ZIPG_ASSIGN_OR_RETURN(rpc::RemoteGraph log, LogStore());
  return log.AssocUpdate(edge);
}
StatusOr<bool> ClusterGraph::AssocDelete(int64_t src, int64_t type, int64_t dst) {
  return Batched(rpc::WriteKind::ASSOC_DELETE, src, type, dst, 0, nullptr);
}
StatusOr<bool> ClusterGraph::Batched(rpc::WriteKind::type kind, int64_t id, int64_t type,
                                     int64_t dst, int64_t timestamp, const Properties* properties) {
  rpc::BatchedWrite w;
  w.kind = kind;
  w.id = id;
  w.type = type;
  w.dst = dst;
  w.timestamp = timestamp;
  if (properties) w.properties = rpc::ToThrift(*properties);
  return batcher_.Write(std::move(w));
}
std::vector<StatusOr<bool>> ClusterGraph::WriteBatch(const std::vector<Write>& writes) {
  StatusOr<rpc::RemoteGraph> log = LogStore();
  if (!log.ok()) return std::vector<StatusOr<bool>>(writes.size(), log.status());
  return log->WriteBatch(writes);
}

StatusOr<uint64_t> ClusterGraph::Snapshot() {
  ZIPG_ASSIGN_OR_RETURN(rpc::RemoteGraph log, LogStore());
  return log.Snapshot();
}

StatusOr<std::string> ClusterGraph::Compact() {
  ZIPG_ASSIGN_OR_RETURN(rpc::RemoteGraph log, LogStore());
  return log.Compact();
}

// Every node-keyed operation: forward the call whole to a replica of the owning shard, and once
// more to another replica if that one fails (docs/replication.md, "Reads").
#define FORWARD(id, call)                                                      \
  ZIPG_ASSIGN_OR_RETURN(uint32_t shard, ShardFor(id));                         \
  return cluster::CallShard(*view_, shard, [&](const cluster::MemberInfo& m) { \
    return rpc::RemoteGraph(pools_->Get(m.endpoint)).call;                     \
  })

StatusOr<std::optional<Properties>> ClusterGraph::GetNodeProperty(
    int64_t id, const std::vector<std::string>* names) {
  FORWARD(id, GetNodeProperty(id, names));
}

StatusOr<std::vector<int64_t>> ClusterGraph::GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                            const Properties& properties) {
  FORWARD(id, GetNeighborIds(id, type, properties));
}

StatusOr<EdgeRecordInfo> ClusterGraph::GetEdgeRecord(int64_t id, int64_t type) {
  FORWARD(id, GetEdgeRecord(id, type));
}

StatusOr<std::pair<int64_t, int64_t>> ClusterGraph::GetEdgeRange(int64_t id, int64_t type,
                                                                 int64_t t_lo, int64_t t_hi) {
  FORWARD(id, GetEdgeRange(id, type, t_lo, t_hi));
}

StatusOr<std::optional<Edge>> ClusterGraph::GetEdgeData(int64_t id, int64_t type,
                                                        int64_t time_order) {
  FORWARD(id, GetEdgeData(id, type, time_order));
}

StatusOr<std::optional<Node>> ClusterGraph::ObjGet(int64_t id) { FORWARD(id, ObjGet(id)); }

StatusOr<std::vector<Edge>> ClusterGraph::AssocRange(int64_t id, int64_t type, int64_t pos,
                                                     int64_t limit) {
  FORWARD(id, AssocRange(id, type, pos, limit));
}

StatusOr<int64_t> ClusterGraph::AssocCount(int64_t id, int64_t type) {
  FORWARD(id, AssocCount(id, type));
}

StatusOr<std::vector<Edge>> ClusterGraph::AssocGet(int64_t id, int64_t type,
                                                   const std::vector<int64_t>& ids, int64_t low,
                                                   int64_t high) {
  FORWARD(id, AssocGet(id, type, ids, low, high));
}

StatusOr<std::vector<Edge>> ClusterGraph::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                         int64_t high, int64_t limit) {
  FORWARD(id, AssocTimeRange(id, type, low, high, limit));
}
#undef FORWARD

StatusOr<SearchResult> ClusterGraph::SearchNodeIds(const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  // Every shard, on one server each, and the LogStore; each part is cut to limit + 1 ids.
  auto map = view_->Current();
  std::vector<uint32_t> shards(map->num_shards);
  for (uint32_t s = 0; s < map->num_shards; ++s) shards[s] = s;
  std::vector<rpc::IdsCall> calls;
  ZIPG_RETURN_IF_ERROR(cluster::AddSearchCalls(*view_, *map, pools_, shards, true, q, &calls));
  ZIPG_ASSIGN_OR_RETURN(auto ids, rpc::GatherIds(fanout_, calls));
  return FinishSearch(std::move(ids), q.limit);
}

StatusOr<std::vector<int64_t>> ClusterGraph::GetNodeIds(const Properties& properties) {
  if (properties.empty()) {
    return Status::InvalidArgument("get_node_ids needs at least one property");
  }
  auto map = view_->Current();
  if (map->num_shards == 0) return Status::Unavailable("no shard server is registered");
  // One server per shard; each server answers for all of its chosen shards in one call.
  cluster::WorkPlan<int32_t> plan;
  for (uint32_t s = 0; s < map->num_shards; ++s) {
    ZIPG_RETURN_IF_ERROR(cluster::AddWork(*map, s, {static_cast<int32_t>(s)}, &plan));
  }
  std::vector<rpc::IdsCall> calls;
  const uint32_t n = map->num_shards;  // the numbering of the plan's shards
  for (const auto& entry : plan) {     // not a structured binding: clang 14 cannot capture one
    const auto& name = entry.first;
    const auto& work = entry.second;
    calls.push_back([this, &name, &work, &properties, n]() -> StatusOr<std::vector<int64_t>> {
      auto got =
          rpc::RemoteGraph(pools_->Get(work.endpoint)).LocalNodeIds(work.items, properties, n);
      if (got.ok() || !cluster::RetryElsewhere(got.status())) return got;
      // That server failed: its shards once more, each on another replica.
      std::map<uint32_t, std::vector<int32_t>> by_shard;
      for (int32_t s : work.items) by_shard[static_cast<uint32_t>(s)].push_back(s);
      return cluster::RetryOnOthers(
          *view_, name, by_shard, [this, &properties, n](const cluster::ServerWork<int32_t>& w) {
            return rpc::RemoteGraph(pools_->Get(w.endpoint)).LocalNodeIds(w.items, properties, n);
          });
    });
  }
  // Nodes whose live properties were written since the load are the LogStore's to report.
  ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* logstore, map->LogStore());
  calls.push_back([this, logstore, &properties] {
    return rpc::RemoteGraph(pools_->Get(logstore->endpoint)).LogNodeIds(properties);
  });
  ZIPG_ASSIGN_OR_RETURN(auto ids, rpc::GatherIds(fanout_, calls));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// A traversal step: the frontier grouped by owning shard, sent to the shard servers.
class ClusterGraph::Expander final : public graph::FrontierExpander {
 public:
  Expander(ClusterGraph* g, uint32_t num_shards) : g_(g), num_shards_(num_shards) {}
  StatusOr<std::vector<graph::Visit>> Expand(const graph::PathAutomaton& automaton,
                                             const std::vector<graph::Visit>& frontier,
                                             const graph::TraversalBudget& budget) override {
    std::vector<rpc::ListCall<graph::Visit>> calls;
    ZIPG_RETURN_IF_ERROR(cluster::AddExpandCalls(*g_->view_, g_->pools_, automaton,
                                                 graph::GroupByShard(frontier, num_shards_), budget,
                                                 &calls));
    return rpc::Gather<graph::Visit>(g_->fanout_, calls);
  }

 private:
  ClusterGraph* g_;
  uint32_t num_shards_;
};

StatusOr<uint64_t> ClusterGraph::TraversalSnapshot() {
  if (const uint64_t at = ReadAt::Current(); at != 0) return at;
  StatusOr<uint64_t> seq = Snapshot();
  if (!seq.ok()) {
    return Status(seq.status().code(),
                  "a traversal runs at a snapshot taken when it starts: " + seq.status().message());
  }
  return seq;
}

StatusOr<std::vector<BfsEntry>> ClusterGraph::Bfs(int64_t id,
                                                  const std::optional<std::vector<int64_t>>& types,
                                                  int32_t max_depth, int64_t limit) {
  ZIPG_RETURN_IF_ERROR(graph::CheckBfsArgs(id, types, max_depth, limit));
  // Every round at one snapshot: the caller's, or one taken now (docs/consistency.md).
  ZIPG_ASSIGN_OR_RETURN(uint64_t at, TraversalSnapshot());
  ReadAt::Scope snapshot(at);
  auto map = view_->Current();
  if (map->num_shards == 0) return Status::Unavailable("no shard server is registered");
  Expander expander(this, map->num_shards);
  return graph::RunBfs(expander, id, types, max_depth, limit, traversal_limits_);
}

StatusOr<RpqResult> ClusterGraph::Rpq(const std::string& expr,
                                      const std::optional<std::vector<int64_t>>& sources,
                                      int64_t limit) {
  ZIPG_RETURN_IF_ERROR(graph::CheckRpqArgs(sources, limit));
  ZIPG_ASSIGN_OR_RETURN(auto automaton, graph::PathAutomaton::Parse(expr));
  ZIPG_ASSIGN_OR_RETURN(uint64_t at, TraversalSnapshot());
  ReadAt::Scope snapshot(at);
  auto map = view_->Current();
  if (map->num_shards == 0) return Status::Unavailable("no shard server is registered");
  const uint32_t num_shards = map->num_shards;
  Expander expander(this, num_shards);
  return graph::RunRpq(
      expander, automaton, sources,
      [&](bool include_dsts,
          const graph::TraversalBudget& budget) -> StatusOr<std::vector<int64_t>> {
        std::vector<uint32_t> all(num_shards);
        for (uint32_t s = 0; s < num_shards; ++s) all[s] = s;
        std::vector<rpc::IdsCall> calls;
        ZIPG_RETURN_IF_ERROR(
            cluster::AddSourcesCalls(*view_, *map, pools_, all, include_dsts, budget, &calls));
        return rpc::GatherIds(fanout_, calls);
      },
      limit, traversal_limits_);
}

nlohmann::json ClusterGraph::StatusJson(const std::string& self_name,
                                        const std::string& cluster) const {
  auto map = view_->Current();
  nlohmann::json servers = nlohmann::json::array();
  nlohmann::json store = nlohmann::json::object();
  for (const auto& m : map->members) {
    servers.push_back(m.ToJson());
    if (m.role == "shard" && store.empty()) {
      store = m.store_info;
      store["dir"] = m.store;
    }
  }
  const auto unserved = map->Unserved();
  const bool healthy =
      map->problem.empty() && map->num_shards > 0 && unserved.empty() && map->logstore;
  nlohmann::json j = {
      {"cluster", cluster},
      {"etcd", view_->etcd().endpoint()},
      {"aggregator", self_name},
      {"revision", map->revision},
      {"num_shards", map->num_shards},
      {"unserved_shards", unserved},
      {"logstore", map->logstore ? json(map->members[*map->logstore].name) : json(nullptr)},
      {"healthy", healthy},
      {"write_batches", {{"batches", batcher_.batches()}, {"writes", batcher_.writes()}}},
      {"servers", servers},
      {"store", store}};
  if (!map->problem.empty()) j["problem"] = map->problem;
  return j;
}

}  // namespace zipg::aggregator
