// WriteBatcher: forwards concurrent unconditional writes to the LogStore as one write_batch call
// (docs/writes.md, "Write batches"). A writer queues its write; the first writer in the queue
// sends every write queued at that moment (up to max_writes / max_bytes) as one batch, as soon as
// fewer than max_in_flight batches are outstanding, and hands each writer its own outcome. A lone
// writer's batch is its own write, sent at once; under load, batches grow while the previous ones
// are in flight (the leader pattern of the LogStore's commit groups). A batch still in flight
// after stuck_after no longer counts against max_in_flight (up to 4 x max_in_flight per target),
// and batches sent to an earlier target (`target` names the LogStore leader batches go to now)
// do not count at all: a leader that stopped answering (paused, partitioned) holds its calls
// until their timeout, and the writes queued behind them go to its successor meanwhile. A batch
// is sent under the latest call deadline of its writers (none if one has none).
//
// Thread-safety: Write may be called concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"
#include "zipg_rpc/zipg_types.h"

namespace zipg::aggregator {

class WriteBatcher {
 public:
  // Sends one batch: one outcome per write, in order, or an error for the whole batch.
  using SendFn =
      std::function<StatusOr<std::vector<StatusOr<bool>>>(const std::vector<rpc::BatchedWrite>&)>;
  struct Options {
    size_t max_in_flight = 8;
    size_t max_writes = 256;
    // Approximate request size; a larger write goes alone. Well under rpc::kMaxRequestBytes.
    size_t max_bytes = 4u << 20;
    std::chrono::milliseconds stuck_after{500};
  };

  // max_in_flight and max_writes below 1 are taken as 1.
  WriteBatcher(SendFn send, Options options, std::function<std::string()> target = {})
      : send_(std::move(send)), options_(Clamp(options)), target_(std::move(target)) {}

  // The write's outcome (deletes: whether a live version was found).
  StatusOr<bool> Write(rpc::BatchedWrite write);

  // Writes waiting to be sent.
  size_t queued() const;
  // Batches sent and the writes they carried.
  uint64_t batches() const;
  uint64_t writes() const;

 private:
  struct Waiter {
    rpc::BatchedWrite write;
    std::optional<std::chrono::steady_clock::time_point> deadline;  // its caller's, if any
    StatusOr<bool> outcome = false;
    bool done = false;  // guarded by mu_
    std::condition_variable cv;
  };
  static Options Clamp(Options o) {
    if (o.max_in_flight < 1) o.max_in_flight = 1;
    if (o.max_writes < 1) o.max_writes = 1;
    return o;
  }
  using Clock = std::chrono::steady_clock;
  // Sends the writes at the front of the queue (mu_ held by `lock` on entry and on return).
  void SendBatch(std::unique_lock<std::mutex>& lock, Waiter* self);
  // Whether another batch may be sent now (mu_ held).
  bool HasRoom() const;

  const SendFn send_;
  const Options options_;
  const std::function<std::string()> target_;
  mutable std::mutex mu_;
  std::deque<Waiter*> queue_;
  // Each batch in flight: when it was sent, and to which target.
  std::multiset<std::pair<Clock::time_point, std::string>> in_flight_;
  uint64_t batches_ = 0;
  uint64_t writes_ = 0;
};

}  // namespace zipg::aggregator
