// Cluster membership in etcd (docs/serving.md, "Membership"):
//   <prefix>servers/<name> -> a JSON MemberInfo, attached to the server's lease.
// A Registration puts a server's entry and keeps its lease alive; a ClusterView reads every entry
// under the prefix, watches for changes, and keeps the current ShardMap (which server serves which
// shard). A server whose lease expires (crash, hang, partition) disappears from every view within
// the lease TTL; a clean shutdown revokes the lease, so it disappears at once.
//
// Thread-safety: Registration and ClusterView run their own background thread; all public methods
// may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/etcd.h"
#include "rpc/connection_pool.h"

namespace zipg::cluster {

// The key prefix of a cluster: "/zipg/<name>/".
std::string ClusterPrefix(const std::string& cluster);
// The cluster's shard layout after a split, under `prefix`: {"shards": N}, written by the LogStore
// leader (docs/cluster-changes.md, step 4).
std::string LayoutKey(const std::string& prefix);

struct MemberInfo {
  std::string name;
  std::string role;  // "shard", "aggregator" or "logstore"
  rpc::Endpoint endpoint;
  uint32_t num_shards = 0;               // shard servers: shards in the whole store
  std::vector<uint32_t> shards;          // shard servers: the shards served here
  std::string store;                     // shard servers: the store directory
  nlohmann::json store_info;             // shard servers: counts from the store manifest
  std::string update_endpoint;           // shard servers: the update channel (tcp://host:port)
  std::string metrics_url;               // with --metrics-port: http(s)://HOST:PORT/metrics
  std::string http_url;                  // aggregators with --http-port: http(s)://HOST:PORT/
  bool serving = true;                   // shard servers: caught up and answering reads
                                         // (docs/replication.md)
  std::vector<uint32_t> catching_up;     // shard servers: shards of `shards` added while it
                                         // serves the others, not caught up yet: they get
                                         // updates but no reads (docs/cluster-changes.md)
  std::map<uint32_t, int64_t> versions;  // shard servers: each hosted shard's rebuilt version
                                         // (docs/writes.md, "Rebuilding a base shard")
  std::vector<int64_t> generations;      // LogStore: the published log shards
  bool leader = true;                    // LogStore: takes the writes (false: a standby,
                                         // docs/logstore-ha.md)
  std::string ship_endpoint;             // standby LogStore: where its leader ships the log
  std::string sync;                      // leader LogStore with a standby: "in_sync" or "degraded"
  int64_t epoch = 0;                     // LogStore leader: its election epoch (0: not elected);
                                         // the map's leader is the one with the largest
  int64_t pid = 0;

  nlohmann::json ToJson() const;
  static StatusOr<MemberInfo> FromJson(const std::string& text);
};

// A snapshot of the cluster. Immutable once built.
struct ShardMap {
  std::vector<MemberInfo> members;  // every registered server, by name
  uint32_t num_shards = 0;          // 0 if no shard server is registered
  // owners[s]: indexes into members of the shard servers serving shard s (several = replicas):
  // serving, and s not in their catching_up;
  // replicas[s]: every registered server of shard s, serving or catching up (updates go to all).
  std::vector<std::vector<size_t>> owners;
  std::vector<std::vector<size_t>> replicas;
  std::optional<size_t> logstore;  // index into members of the leader LogStore, if registered
  std::optional<size_t> standby;   // index into members of a standby LogStore, if registered
  std::string problem;  // non-empty if the shard servers disagree on the store (e.g. shard count)
  int64_t revision = 0;

  // `layout`: the count of the cluster's layout key (0: none).
  static std::shared_ptr<const ShardMap> Build(std::vector<MemberInfo> members, int64_t revision,
                                               uint32_t layout = 0);
  // The LogStore, or UNAVAILABLE.
  StatusOr<const MemberInfo*> LogStore() const;
  // Shards with no live server.
  std::vector<uint32_t> Unserved() const;
  // A serving server for shard s (replicas in turn), other than the member named `avoid`, or
  // UNAVAILABLE naming the shard.
  StatusOr<const MemberInfo*> Pick(uint32_t shard, const std::string& avoid = "") const;

 private:
  mutable std::atomic<uint64_t> turn_{0};
};

// Whether a failed call to one replica is retried on another (docs/replication.md, "Reads"):
// UNAVAILABLE (refused, reset, not served there, catching up) or DEADLINE_EXCEEDED.
bool RetryElsewhere(const Status& s);

// Work for one server: where it listens and the items (shard numbers, node ids) it answers for.
template <typename T>
struct ServerWork {
  rpc::Endpoint endpoint;
  std::vector<T> items;
};
// Work by member name, so that each server gets one call for all of its items.
template <typename T>
using WorkPlan = std::map<std::string, ServerWork<T>>;

// Adds `items`, all belonging to shard `shard`, to the work of the server Pick(shard) chooses.
template <typename T>
Status AddWork(const ShardMap& map, uint32_t shard, const std::vector<T>& items,
               WorkPlan<T>* plan) {
  ZIPG_ASSIGN_OR_RETURN(const MemberInfo* owner, map.Pick(shard));
  ServerWork<T>& work = (*plan)[owner->name];
  work.endpoint = owner->endpoint;
  work.items.insert(work.items.end(), items.begin(), items.end());
  return Status::OK();
}

// One server for each of `shards`, each shard its own item: the plan of a call made once per
// server for the shards it is picked for (searches, traversal sources).
inline StatusOr<WorkPlan<int32_t>> PlanShards(const ShardMap& map,
                                              const std::vector<uint32_t>& shards) {
  WorkPlan<int32_t> plan;
  for (uint32_t s : shards) {
    ZIPG_RETURN_IF_ERROR(AddWork(map, s, {static_cast<int32_t>(s)}, &plan));
  }
  return plan;
}

class Registration {
 public:
  // Grants a lease of ttl_seconds, puts the entry with it and starts keeping it alive (a refresh
  // every ttl/3). If the lease is lost anyway, a new one is granted and the entry put again.
  static StatusOr<std::unique_ptr<Registration>> Start(std::shared_ptr<EtcdClient> etcd,
                                                       const std::string& prefix,
                                                       const MemberInfo& info, int64_t ttl_seconds);
  // Replaces the entry's value (same key, same lease).
  Status Update(const MemberInfo& info);
  // Whether the lease is surely still alive in etcd: its last refresh was sent less than the TTL
  // ago (etcd counts the TTL from when the refresh arrived, which is later). A member that
  // stalled past it may have been dropped from the map meanwhile, and writes committed without
  // it (docs/consistency.md).
  bool LeaseValid() const;
  // Called (on the keep-alive thread) when the lease turns out to have expired, before the entry
  // is put again under a new lease: the callback may Update the entry (a shard server says it is
  // not serving, and catches up first).
  void OnLost(std::function<void()> f);
  // Stops the keep-alive and revokes the lease: the entry disappears at once.
  ~Registration();

 private:
  Registration() = default;
  void KeepAlive();
  // Puts the entry under `lease` unless it is there already (or lease_ has moved on).
  Status PutIfMissing(int64_t lease);
  // A refresh (or the grant) sent at `sent_at` succeeded.
  void Refreshed(std::chrono::steady_clock::time_point sent_at);

  std::shared_ptr<EtcdClient> etcd_;
  std::string key_;
  std::string value_;
  int64_t ttl_ = 0;
  int64_t lease_ = 0;
  std::atomic<int64_t> valid_until_ns_{0};  // steady clock
  std::function<void()> on_lost_;           // guarded by mu_
  // Whether the entry is in etcd under lease_ (false from a new lease until a put succeeds under
  // it). Guarded by mu_.
  bool entry_put_ = true;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

class ClusterView {
 public:
  // Reads the current members (fails if etcd cannot be read) and starts watching.
  static StatusOr<std::unique_ptr<ClusterView>> Start(std::shared_ptr<EtcdClient> etcd,
                                                      const std::string& prefix);
  // A view that always shows `map` and watches nothing (tests; etcd() must not be called).
  static std::unique_ptr<ClusterView> Fixed(std::shared_ptr<const ShardMap> map);
  ~ClusterView();

  std::shared_ptr<const ShardMap> Current() const;
  const EtcdClient& etcd() const { return *etcd_; }

 private:
  ClusterView() = default;
  Status Reload();
  void WatchLoop();

  std::shared_ptr<EtcdClient> etcd_;
  std::string prefix_;
  mutable std::mutex mu_;
  std::shared_ptr<const ShardMap> current_;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

// Runs call(member) on a serving replica of `shard`; if that fails with RetryElsewhere, or with
// FAILED_PRECONDITION (a replica that restarted no longer holds a snapshot its peer may hold:
// docs/consistency.md, "Snapshots"), once more on another replica, picked from the view's map at
// that moment; without one, the first answer stands.
template <typename Fn>
auto CallShard(const ClusterView& view, uint32_t shard, Fn&& call)
    -> decltype(call(std::declval<const MemberInfo&>())) {
  auto map = view.Current();
  auto first = map->Pick(shard);
  if (!first.ok()) return first.status();
  const std::string tried = (*first)->name;
  auto result = call(**first);
  if (result.ok() || (!RetryElsewhere(result.status()) &&
                      result.status().code() != StatusCode::kFailedPrecondition)) {
    return result;
  }
  map = view.Current();
  auto second = map->Pick(shard, tried);
  if (!second.ok()) return result;
  return call(**second);
}

// The retry of a fan-out call that failed on server `failed`: its items, by shard, go to other
// replicas (grouped per server); every call's results are concatenated.
template <typename T, typename Out = int64_t, typename Fn>
StatusOr<std::vector<Out>> RetryOnOthers(const ClusterView& view, const std::string& failed,
                                         const std::map<uint32_t, std::vector<T>>& by_shard,
                                         Fn&& call) {
  auto map = view.Current();
  WorkPlan<T> plan;
  for (const auto& [shard, items] : by_shard) {
    ZIPG_ASSIGN_OR_RETURN(const MemberInfo* m, map->Pick(shard, failed));
    ServerWork<T>& work = plan[m->name];
    work.endpoint = m->endpoint;
    work.items.insert(work.items.end(), items.begin(), items.end());
  }
  std::vector<Out> out;
  for (const auto& [name, work] : plan) {
    ZIPG_ASSIGN_OR_RETURN(std::vector<Out> got, call(work));
    out.insert(out.end(), got.begin(), got.end());
  }
  return out;
}

}  // namespace zipg::cluster
