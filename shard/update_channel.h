// The update-pointer channel from the LogStore to the shard servers over ZeroMQ (docs/writes.md,
// "Update pointers and the shard side"). The LogStore's UpdateSender runs one lane per base
// shard: a DEALER socket to the shard's current server and a queue of updates that concurrent
// writers share, sent as one batch per round trip. Each shard server's UpdateReceiver binds a
// ROUTER socket, applies each batch (persisted) and replies with one "found" flag per update.
//
// Request frame: u64 sender | u64 batch | u32 shard | updates (EncodeUpdates, no flags).
// Reply frame:   u64 sender | u64 batch | u8 ok | flags (ok) or an error message (not ok).
// A batch without a reply within the lane's retry interval is sent again on a new socket (the
// owner may have moved); receivers answer a repeated (sender, shard, batch) from a reply cache,
// so every update is applied once.
//
// Thread-safety: Send may be called concurrently; each side runs its own threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/updates.h"
#include "util/status.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace zipg::shard {

class UpdateSender {
 public:
  // The update endpoint ("tcp://host:port") of the server currently hosting `shard`.
  using Locate = std::function<StatusOr<std::string>(uint32_t shard)>;

  UpdateSender(uint32_t num_shards, Locate locate, int retry_ms = 1000);
  ~UpdateSender();

  uint32_t num_shards() const { return static_cast<uint32_t>(lanes_.size()); }

  // Delivers the updates (all for base shard `shard`) and waits up to timeout_ms for the
  // server's answer: whether the base held a live version of what each targets. On timeout,
  // UNAVAILABLE; the lane keeps retrying in the background.
  StatusOr<std::vector<bool>> Send(uint32_t shard, std::vector<engine::Update> updates,
                                   int timeout_ms);

  // Send in two steps, so that one caller can have batches for several shards in flight: Post
  // queues the updates on the shard's lane, Await waits for that lane's answer until `deadline`
  // (UNAVAILABLE after it; the lane keeps retrying). Updates posted to one shard are applied
  // there in the order of the Post calls.
  using Reply = std::future<std::pair<Status, std::vector<bool>>>;
  StatusOr<Reply> Post(uint32_t shard, std::vector<engine::Update> updates);
  static StatusOr<std::vector<bool>> Await(Reply* reply, uint32_t shard,
                                           std::chrono::steady_clock::time_point deadline);

  uint64_t batches() const { return batches_.load(); }

 private:
  struct Pending {
    std::vector<engine::Update> updates;
    std::promise<std::pair<Status, std::vector<bool>>> done;
  };
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Pending>> queue;
    std::thread thread;
  };
  void Run(uint32_t shard);

  const Locate locate_;
  const int retry_ms_;
  const uint64_t sender_id_;
  std::unique_ptr<zmq::context_t> context_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> batches_{0};
};

class UpdateReceiver {
 public:
  using Apply = std::function<StatusOr<std::vector<bool>>(uint32_t shard,
                                                          const std::vector<engine::Update>&)>;
  // Binds tcp://host:port (port 0: any free port) and starts applying batches.
  static StatusOr<std::unique_ptr<UpdateReceiver>> Start(const std::string& host, int port,
                                                         Apply apply);
  ~UpdateReceiver();

  const std::string& endpoint() const { return endpoint_; }
  uint64_t batches() const { return batches_.load(); }

 private:
  UpdateReceiver() = default;
  void Run();

  Apply apply_;
  std::string endpoint_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> batches_{0};
  std::thread thread_;
};

}  // namespace zipg::shard
