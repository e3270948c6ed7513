// Leadership of one role through etcd (docs/logstore-ha.md, "Election and takeover"). The leader
// is the candidate that created `key` (create-if-absent) under its own lease; the key's create
// revision is its epoch, larger than every earlier leader's because etcd revisions only grow.
// The holder renews its lease every ttl/3; if no renewal has succeeded for ttl/2 (etcd may then
// be about to let the key expire), it must stop acting as the leader: a new leader can only be
// elected after the key is gone, which is later. With on_suspend, it is suspended
// (on_suspend(true)) and keeps renewing: a renewal that succeeds later proves the lease, and so
// the key, never went away (an expired lease cannot be renewed), so no one else led meanwhile,
// and it resumes (on_suspend(false)); etcd losing its own leader for a second or two costs a
// pause, not the term. Without on_suspend, or once etcd says the lease is gone, it calls on_lost
// once and the term is over.
//
// Thread-safety: every method may be called concurrently; on_lost runs on the election's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster/etcd.h"
#include "util/status.h"

namespace zipg::cluster {

class Election {
 public:
  Election(std::shared_ptr<EtcdClient> etcd, std::string key, int64_t ttl_seconds);
  ~Election();  // resigns if it holds the key
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  // One attempt: creates the key with `value` under a new lease if nobody holds it. The epoch if
  // this candidate holds it now (on_lost is then armed), nullopt if another candidate does.
  StatusOr<std::optional<int64_t>> Campaign(const std::string& value,
                                            std::function<void()> on_lost,
                                            std::function<void(bool)> on_suspend = nullptr);
  // Stops renewing and revokes the lease: the key is gone at once. No-op if not held.
  void Resign();
  // The key as etcd has it now (nullopt: no leader).
  StatusOr<std::optional<KeyValue>> Holder() const;
  bool held() const { return held_.load(); }
  int64_t epoch() const { return epoch_.load(); }
  const std::string& key() const { return key_; }

 private:
  void KeepAlive(int64_t lease);

  const std::shared_ptr<EtcdClient> etcd_;
  const std::string key_;
  const int64_t ttl_seconds_;
  std::atomic<bool> held_{false};
  std::atomic<int64_t> epoch_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  int64_t lease_ = 0;      // guarded by mu_
  std::function<void()> on_lost_;
  std::function<void(bool)> on_suspend_;
  std::thread thread_;
};

}  // namespace zipg::cluster
