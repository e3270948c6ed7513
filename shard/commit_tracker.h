// CommitTracker: what makes a replica's reads of one node linearizable (docs/consistency.md,
// "Single-object operations"). A replica applies an update when the LogStore pushes it, before
// the write is committed: before every other replica of the shard has it and the LogStore has
// applied it to its own fragments. A read of a node with such an update waits until the LogStore
// says the update is committed; a read of any other node answers at once. So once any read has
// seen a write, every replica has it, and every later read, on any replica, sees it too.
//
// Per hosted shard: the committed id (commit notices, shard/update_channel.h) and each recently
// written node's newest update id. A read that began while one of its node's updates was applied
// but not committed reads again once it is (no update applies meanwhile), so what it returns is
// a committed state. Updates applied before the tracker existed (the delta file replayed at open)
// are covered by a floor: a read that began below it reads again once a commit reaches it.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <shared_mutex>
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

  // Updates just applied (ids ascending; unnumbered ones, id 0, are not tracked). Call with the
  // gate held exclusively.
  void Applied(const std::vector<engine::Update>& batch);
  // Every update with an id up to `id` is committed. Ids only grow; a smaller one is ignored.
  void Commit(uint64_t id);

  // A read of one node: BeginRead before it (the committed id then), EndRead after it, which
  // says whether the node has an update that was applied and not committed when the read began
  // (the read may have seen its pointer and not yet its data in the LogStore, or a state another
  // replica does not have). If so: AwaitNode, then take the gate shared (no update applies
  // meanwhile) and, if the node is Settled, read again under it; else release it and wait again.
  // Never wait for a commit with the gate held: the commit may come behind a batch that waits for
  // the gate.
  uint64_t BeginRead();
  bool EndRead(uint64_t began, int64_t node);
  // Every update applied to `node` (and the floor) is committed.
  bool Settled(int64_t node) const;
  // Returns once every update applied to `node` (and the floor) is committed; UNAVAILABLE if
  // that has not happened by `deadline` (the write's commit is held up: a replica that does not
  // confirm, a LogStore that cannot be reached; a retry elsewhere waits the same way).
  Status AwaitNode(int64_t node, Clock::time_point deadline);
  // Returns once every update up to `id` is committed (a read at snapshot `id` then reads a state
  // that no longer changes); DEADLINE_EXCEEDED if not by `deadline`.
  Status AwaitCommitted(uint64_t id, Clock::time_point deadline);
  // While withdrawn, no commit will come (the shard is no longer served here, so the LogStore
  // stops sending to it): waits end at once, AwaitNode and AwaitCommitted answer UNAVAILABLE,
  // and the router retries on another replica. Set when the shard is withdrawn, cleared when it
  // is served again.
  void SetWithdrawn(bool withdrawn);
  // Applying holds it exclusively, a read that reads again shared.
  std::shared_mutex& gate() { return gate_; }

  uint64_t committed() const;
  // Nodes with an update newer than a running read's start or the committed id; reads that
  // had to read again so far.
  size_t tracked() const;
  uint64_t rereads() const;
  // Reads refused because the committed state named a version the LogStore did not hold
  // (shard/server.cc ReadNode).
  void NoteDisagreement() { disagreements_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t disagreements() const { return disagreements_.load(std::memory_order_relaxed); }

 private:
  // Forgets updates that no running read can have missed the commit of.
  void Prune();
  // Waits (mu_ held by `lock`) until every update up to `id` is committed; false at `deadline`
  // or once withdrawn.
  bool WaitFor(std::unique_lock<std::mutex>& lock, uint64_t id, Clock::time_point deadline);

  std::shared_mutex gate_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t floor_;
  uint64_t committed_ = 0;
  // node -> its newest update's id, for every update above the prune point (the committed id,
  // or the oldest running read's start if lower).
  std::unordered_map<int64_t, uint64_t> newest_;
  std::deque<std::pair<uint64_t, int64_t>> order_;  // (id, node), ids ascending
  std::multiset<uint64_t> reads_;                   // running reads' starts
  uint64_t rereads_ = 0;
  std::atomic<uint64_t> disagreements_{0};
  int waiting_ = 0;
  bool withdrawn_ = false;
};

}  // namespace zipg::shard
