#include "aggregator/write_batcher.h"

#include <algorithm>
#include <exception>
#include <string>

#include "rpc/remote_graph.h"
#include "util/call_deadline.h"

namespace zipg::aggregator {

StatusOr<bool> WriteBatcher::Write(rpc::BatchedWrite write) {
  Waiter self;
  self.write = std::move(write);
  self.deadline = CallDeadline::Current();
  std::unique_lock lock(mu_);
  queue_.push_back(&self);
  while (!self.done) {
    const bool front = !queue_.empty() && queue_.front() == &self;
    if (front && HasRoom()) {
      SendBatch(lock, &self);
    } else if (front) {
      // Until a batch returns, or the oldest one counts as stuck (or the target changes: checked
      // again then too).
      self.cv.wait_until(lock, std::min(in_flight_.begin()->first + options_.stuck_after,
                                        Clock::now() + std::chrono::milliseconds(100)));
    } else {
      self.cv.wait(lock);
    }
  }
  return std::move(self.outcome);
}

bool WriteBatcher::HasRoom() const {
  if (in_flight_.size() < options_.max_in_flight) return true;
  const std::string target = target_ ? target_() : "";
  const auto stuck_before = Clock::now() - options_.stuck_after;
  size_t mine = 0, fresh = 0;
  for (const auto& [sent, to] : in_flight_) {
    if (to != target) continue;
    ++mine;
    fresh += sent >= stuck_before;
  }
  return fresh < options_.max_in_flight && mine < 4 * options_.max_in_flight;
}

void WriteBatcher::SendBatch(std::unique_lock<std::mutex>& lock, Waiter* self) {
  std::vector<Waiter*> batch;
  std::vector<rpc::BatchedWrite> writes;
  size_t bytes = 0;
  while (!queue_.empty() && batch.size() < options_.max_writes) {
    Waiter* w = queue_.front();
    const size_t b = rpc::RequestBytes(w->write);
    if (!batch.empty() && bytes + b > options_.max_bytes) break;
    bytes += b;
    queue_.pop_front();
    writes.push_back(std::move(w->write));
    batch.push_back(w);
  }
  // The batch is sent for the most patient of its writers: under the latest of their call
  // deadlines, or under none (the LogStore client's own timeout) if one has none.
  std::optional<CallDeadline::TimePoint> deadline;
  bool unbounded = false;
  for (const Waiter* w : batch) {
    if (!w->deadline) unbounded = true;
    if (w->deadline && (!deadline || *w->deadline > *deadline)) deadline = w->deadline;
  }
  if (unbounded) deadline.reset();
  const auto sent = in_flight_.emplace(Clock::now(), target_ ? target_() : "");
  ++batches_;
  writes_ += batch.size();
  // The next writer may lead another batch while this one is in flight.
  if (!queue_.empty()) queue_.front()->cv.notify_one();
  lock.unlock();

  StatusOr<std::vector<StatusOr<bool>>> outcomes = Status::Internal("write batch not sent");
  try {
    CallDeadline::Scope scope(deadline);
    outcomes = send_(writes);
  } catch (const std::exception& e) {  // the waiters must still be answered
    outcomes = Status::Internal(std::string("write batch: ") + e.what());
  }
  if (outcomes.ok() && outcomes->size() != batch.size()) {
    outcomes = Status::Internal("a write batch of " + std::to_string(batch.size()) +
                                " writes got " + std::to_string(outcomes->size()) + " outcomes");
  }

  lock.lock();
  in_flight_.erase(sent);
  for (size_t i = 0; i < batch.size(); ++i) {
    Waiter* w = batch[i];
    w->outcome = outcomes.ok() ? std::move((*outcomes)[i]) : StatusOr<bool>(outcomes.status());
    w->done = true;
    // Under mu_: a woken writer destroys its Waiter.
    if (w != self) w->cv.notify_one();
  }
  if (!queue_.empty()) queue_.front()->cv.notify_one();  // may now send
}

size_t WriteBatcher::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

uint64_t WriteBatcher::batches() const {
  std::lock_guard lock(mu_);
  return batches_;
}

uint64_t WriteBatcher::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

}  // namespace zipg::aggregator
