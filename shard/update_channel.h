// The update-pointer channel from the LogStore to the shard servers over the frame link
// (rpc/frame_link.h; docs/writes.md, "The update channel"; docs/replication.md, "Pushing"). The
// LogStore's UpdateSender runs one lane per base shard: a queue of updates that concurrent writers
// share, sent as one batch per round trip to every registered replica of the shard (a connection
// each, written and read by the lane's thread). Each shard server's UpdateReceiver listens,
// applies each batch (persisted once committed) and replies, one request at a time.
//
// Request frame: u64 sender | u64 batch | u32 shard | u64 prev | u64 epoch | u64 committed |
//                updates (EncodeUpdates with ids, no flags); prev: the id of the feed's last
//                update before this batch; epoch: the sending LogStore leader's
//                (docs/logstore-ha.md); committed: every update of this shard with an id up to it
//                is committed (docs/consistency.md, "Commit notices").
// Commit notice: the same header with batch 0 and no updates (prev: the feed's last id sent);
//                no reply. Sent when the shard's committed id grows and no batch is queued to carry
//                it, and every kNoticeIntervalMs to every replica (one that restarted learns it).
// Reply frame:   u64 sender | u64 batch | u8 code | 1 (ok): one "found" byte per update;
//                2 (behind: the replica has not applied `prev`, applied nothing); 3 (fenced:
//                the replica has seen a larger epoch, applied nothing): a message; 0: an error
//                message.
// A replica that does not answer within the lane's retry interval gets the batch again on a new
// connection; receivers answer a repeated (sender, shard, batch) from a reply cache, and skip
// updates they applied before (by id), so every update is applied once. A lane waits for every
// replica in the current map (re-read every retry interval: a replica that left it is not waited
// for).
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/updates.h"
#include "rpc/frame_link.h"
#include "shard/fence.h"
#include "util/status.h"

namespace zipg::shard {

// A replica to send to: its member name and update endpoint ("tcp://host:port").
struct UpdateTarget {
  std::string name;
  std::string endpoint;
};

// What a replica did with a pushed batch.
struct PushAnswer {
  bool behind = false;      // it has not applied `prev`: nothing applied, it will catch up
  std::vector<bool> found;  // not behind: per update, whether it held a live version
};

class UpdateSender {
 public:
  // Every registered replica of `shard` now (serving or catching up).
  using Locate = std::function<std::vector<UpdateTarget>(uint32_t shard)>;

  UpdateSender(uint32_t num_shards, Locate locate, int retry_ms = 1000,
               rpc::FrameSecurity security = {});
  ~UpdateSender();

  uint32_t num_shards() const { return count_.load(std::memory_order_acquire); }
  // Adds lanes up to `num_shards` (a split, docs/cluster-changes.md step 4; at most kMaxLanes).
  // Their `prev` starts at 0: SetPrev before their first Post.
  Status Grow(uint32_t num_shards);
  static constexpr uint32_t kMaxLanes = 1 << 14;

  // Delivers the updates (all for base shard `shard`, ids ascending) and waits up to timeout_ms
  // for the replicas' answer: whether the base held a live version of what each targets. On
  // timeout, UNAVAILABLE; the lane keeps retrying in the background. UNAVAILABLE too when no
  // replica answered ok (none registered, or all behind): the updates are in the feed, and
  // replicas catch up from it.
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

  // The id of the last update sent before (the feed's last id); the next batch's `prev`. Call
  // before the first Post of the shard.
  void SetPrev(uint32_t shard, uint64_t id);
  // Whether `member` is a replica of `shard` that batches are sent to now.
  bool IsTarget(uint32_t shard, const std::string& member) const;
  // The epoch every batch carries from now on (0 until a leader election sets it).
  void SetEpoch(uint64_t epoch) { epoch_ = epoch; }
  // Every update with an id up to `id` is applied in the LogStore's own fragments (a leader's
  // commit pipeline, in id order). A shard's updates up to min(id, what every replica of the
  // shard confirmed) are committed: the lane tells the replicas (docs/consistency.md).
  void SetApplied(uint64_t id);
  // The committed id of `shard` (what its replicas were or are about to be told).
  uint64_t Committed(uint32_t shard) const;
  // Has every lane with nothing queued or in flight tell its replicas, now, that they hold every
  // update up to the applied id (a snapshot's reads then need not wait for a heartbeat). An idle
  // lane counts as delivered up to the applied id: every update up to it was posted before it
  // was applied, and the lane has sent them all.
  void NotifyIdle();
  static constexpr int kNoticeIntervalMs = 500;
  uint64_t notices() const { return notices_.load(); }
  // The id every request of this sender carries (random per sender).
  uint64_t sender_id() const { return sender_id_; }

  // A replica answered that it has seen a larger epoch: a newer leader exists. Every batch since,
  // and every later Post, fails with UNAVAILABLE ("fenced: ...").
  bool fenced() const { return fenced_.load(); }

  uint64_t batches() const { return batches_.load(); }
  uint64_t behind_answers() const { return behind_.load(); }

 private:
  struct Pending {
    std::vector<engine::Update> updates;
    std::promise<std::pair<Status, std::vector<bool>>> done;
  };
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Pending>> queue;
    std::atomic<uint64_t> prev{0};
    // The last id every replica in the map confirmed (or the lane moved past: no replica, all
    // behind; they catch up before they serve).
    std::atomic<uint64_t> delivered{0};
    // The committed id last sent (written by the lane's thread; SetApplied reads it).
    std::atomic<uint64_t> told{0};
    bool poke = false;  // (mu) NotifyIdle asked for a notice
    // Its connection to each replica, by endpoint (the lane's thread only): kept across batches,
    // replaced after a timeout.
    std::map<std::string, std::unique_ptr<rpc::FrameConnection>> connections;
    std::thread thread;
  };
  void Run(uint32_t shard);
  // The frame header every request of the shard's lane starts with (batch 0: a notice).
  std::string Header(uint32_t shard, uint64_t batch, uint64_t committed) const;
  // Sends a commit notice to every replica of the shard (no reply awaited).
  void Notify(uint32_t shard, uint64_t committed);
  // Sends one request to every replica of the shard until each answered or left the map;
  // returns the combined outcome for the batch's n updates.
  std::pair<Status, std::vector<bool>> Deliver(uint32_t shard, uint64_t batch_id,
                                               const std::string& request, size_t n);

  const Locate locate_;
  const int retry_ms_;
  const rpc::FrameSecurity security_;
  const uint64_t sender_id_;
  // kMaxLanes slots, the first count_ of them made (a lane is never removed before the
  // destructor), so that Grow does not move the lanes other threads use.
  std::unique_ptr<std::unique_ptr<Lane>[]> lanes_;
  std::atomic<uint32_t> count_{0};
  std::mutex grow_mu_;  // serializes Grow
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> behind_{0};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> fenced_{false};
  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> notices_{0};
};

class UpdateReceiver {
 public:
  // Applies a pushed batch whose predecessor in the feed is `prev`.
  using Apply = std::function<StatusOr<PushAnswer>(uint32_t shard, uint64_t prev,
                                                   const std::vector<engine::Update>&)>;
  // Takes a committed id (from a batch's header, after the batch is applied or found behind, or
  // a notice) whose sender's feed ended at `prev`.
  using Commit = std::function<void(uint32_t shard, uint64_t prev, uint64_t committed)>;
  // Called with the sender of every admitted request for the shard, before its committed id or
  // batch is taken: a new sender (a new LogStore leader, or the same LogStore started again) may
  // not hold the records of the uncommitted updates another one posted (ServerGraph::NoteSender;
  // docs/write-pipeline.md, "Provisional pointers").
  using NewSender = std::function<void(uint32_t shard, uint64_t sender)>;
  // Listens on host:port (port 0: any free port) and starts applying batches. With TLS in
  // `security`, only holders of a certificate from the cluster's CA get through. With `fence`
  // (which must outlive the receiver), a batch is applied only if its epoch is admitted.
  static StatusOr<std::unique_ptr<UpdateReceiver>> Start(
      const std::string& host, int port, Apply apply, rpc::FrameSecurity security = {},
      Fence* fence = nullptr, Commit commit = nullptr, NewSender new_sender = nullptr);
  ~UpdateReceiver();

  const std::string& endpoint() const { return server_->endpoint(); }
  uint64_t batches() const { return batches_.load(); }
  // Connections that failed the TLS handshake (a peer without the cluster's certificate).
  uint64_t refused_clients() const { return server_->refused_clients(); }
  // Batches refused by the fence (an old leader's).
  uint64_t fenced_batches() const { return fenced_batches_.load(); }

 private:
  UpdateReceiver() = default;
  // Answers one request (nothing for a commit notice). One at a time: under mu_.
  std::optional<std::string> Handle(std::string_view request);
  // Admits the request of `sender` at `epoch` for the shard (the fence's answer; OK without a
  // fence), then calls new_sender_ (mu_ held).
  Status Admit(uint32_t shard, uint64_t sender, uint64_t epoch);

  Apply apply_;
  Commit commit_;
  NewSender new_sender_;
  Fence* fence_ = nullptr;
  std::mutex mu_;
  // Last reply per (sender, shard): a lane sends one batch at a time, so a repeat is always of
  // the latest. Guarded by mu_.
  std::map<std::pair<uint64_t, uint32_t>, std::pair<uint64_t, std::string>> replies_;
  std::atomic<uint64_t> fenced_batches_{0};
  std::atomic<uint64_t> batches_{0};
  std::unique_ptr<rpc::FrameServer> server_;  // last: stopped first
};

}  // namespace zipg::shard
