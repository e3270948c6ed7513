// CommitTracker: what makes a replica's reads of one node linearizable (docs/consistency.md,
// "Single-object operations"). A replica applies an update when the LogStore pushes it, before
// the write is committed: before every other replica of the shard has it and the LogStore has
// applied it to its own fragments. A read of a node with such an update waits until the LogStore
// says the update is committed; a read of any other node answers at once. So once any read has
// seen a write, every replica has it, and every later read, on any replica, sees it too.
//
// Per hosted shard: the nodes whose newest applied update is above the committed id, and that id
// (commit notices, shard/update_channel.h). Updates applied before the tracker existed (the delta
// file replayed at open) are covered by a floor: every read waits until the committed id reaches
// it.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/updates.h"
#include "util/status.h"

namespace zipg::shard {

class CommitTracker {
 public:
  using Clock = std::chrono::steady_clock;

  // `floor`: the last update id applied before the tracker existed.
  explicit CommitTracker(uint64_t floor) : floor_(floor) {}

  // Updates just applied (ids ascending; unnumbered ones, id 0, are not tracked).
  void Applied(const std::vector<engine::Update>& batch);
  // Every update with an id up to `id` is committed. Ids only grow; a smaller one is ignored.
  void Commit(uint64_t id);
  // Returns once every update applied to `node` (and the floor) is committed; UNAVAILABLE if
  // that has not happened by `deadline` (the write's commit is held up: a replica that does not
  // confirm, a LogStore that cannot be reached; a retry elsewhere waits the same way).
  Status Await(int64_t node, Clock::time_point deadline);

  uint64_t committed() const;
  // Nodes waiting for a commit now; reads that had to wait so far.
  size_t pending() const;
  uint64_t waits() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t floor_;
  uint64_t committed_ = 0;
  std::unordered_map<int64_t, uint64_t> pending_;  // node -> its newest uncommitted update's id
  std::deque<std::pair<uint64_t, int64_t>> order_;  // (id, node), ids ascending
  uint64_t waits_ = 0;
  int waiting_ = 0;
};

}  // namespace zipg::shard
