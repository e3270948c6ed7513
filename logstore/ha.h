// A LogStore process's part in the election (docs/logstore-ha.md, "Election and takeover"): the
// role it starts in, the cluster's in-sync set, the takeover when the leader's key goes, and the
// standby its leader ships to. etcd keys under <prefix>logstore/:
//
//   leader  {"name", "epoch"}, under the leader's lease (cluster::Election; epoch = its create
//           revision)
//   insync  {"epoch", "members": [names]}: the LogStores that hold every acknowledged write; put
//           only by the leader of that epoch (guarded by its leader key), never under a lease
//
// Only a member of `insync` (or anyone, while no `insync` exists: a new cluster) may lead, and a
// candidate that won checks it again after winning, when the old leader can no longer change it.
//
// Thread-safety: every method may be called concurrently; the callbacks run on the coordinator's
// thread (or, for on_lost, the election's).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/election.h"
#include "cluster/etcd.h"
#include "util/status.h"

namespace zipg::logstore {

class HaCoordinator {
 public:
  struct Callbacks {
    // Standby -> leader with this epoch (LogStore::Promote, then registration); a failure ends
    // the term (the key is given up).
    std::function<Status(uint64_t epoch)> promote;
    // Leader: the registered standby (name, ship endpoint; "" for none), and shipping to one
    // (called when the endpoint changes; a standby that left the map stays attached).
    std::function<std::pair<std::string, std::string>()> find_standby;
    std::function<void(const std::string& endpoint)> attach;
    // The leadership is lost (the lease is gone): stop taking writes at once.
    std::function<void()> on_lost;
    // No lease renewal for half the TTL (true): take no write until one succeeds (false), which
    // proves no other leader existed meanwhile (cluster/election.h).
    std::function<void(bool)> on_suspend;
  };
  // `prefix`: the cluster's etcd prefix; `ttl_seconds`: the leader key's lease.
  HaCoordinator(std::shared_ptr<cluster::EtcdClient> etcd, const std::string& prefix,
                std::string name, int64_t ttl_seconds);
  ~HaCoordinator();

  // At start: campaigns once if eligible. The epoch if this process leads now, 0 if another
  // does or it may not lead (then it is a standby; Run watches for the leader's key to go).
  StatusOr<uint64_t> Start(Callbacks callbacks);
  // Starts the watch thread (after the LogStore is open in the role Start gave).
  void Run();

  // LogStoreOptions::on_sync of a leader: "degraded" -> insync = {epoch, [self]}, "in_sync" ->
  // {epoch, [self, standby]}. Fails if the leader key is no longer this epoch's.
  Status RecordSync(const std::string& state);
  uint64_t epoch() const { return static_cast<uint64_t>(election_.epoch()); }
  bool leading() const { return election_.held(); }

 private:
  // Whether `insync` allows this process to lead (absent, or naming it).
  StatusOr<bool> Eligible() const;
  // One campaign; 0 if not won (or won but not eligible: given up again).
  StatusOr<uint64_t> TryLead();
  Status PutInSync(const std::vector<std::string>& members);
  void Loop();

  const std::shared_ptr<cluster::EtcdClient> etcd_;
  const std::string insync_key_;
  const std::string name_;
  cluster::Election election_;
  Callbacks callbacks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;       // guarded by mu_
  std::string standby_name_;    // guarded by mu_: the standby attached now
  std::string standby_endpoint_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace zipg::logstore
