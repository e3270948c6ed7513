#include "aggregator/write_batcher.h"

#include <exception>
#include <string>

#include "rpc/remote_graph.h"

namespace zipg::aggregator {

StatusOr<bool> WriteBatcher::Write(rpc::BatchedWrite write) {
  Waiter self;
  self.write = std::move(write);
  std::unique_lock lock(mu_);
  queue_.push_back(&self);
  while (!self.done) {
    if (!queue_.empty() && queue_.front() == &self && in_flight_ < options_.max_in_flight) {
      SendBatch(lock, &self);
    } else {
      self.cv.wait(lock);
    }
  }
  return std::move(self.outcome);
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
  ++in_flight_;
  ++batches_;
  writes_ += batch.size();
  // The next writer may lead another batch while this one is in flight.
  if (!queue_.empty()) queue_.front()->cv.notify_one();
  lock.unlock();

  StatusOr<std::vector<StatusOr<bool>>> outcomes = Status::Internal("write batch not sent");
  try {
    outcomes = send_(writes);
  } catch (const std::exception& e) {  // the waiters must still be answered
    outcomes = Status::Internal(std::string("write batch: ") + e.what());
  }
  if (outcomes.ok() && outcomes->size() != batch.size()) {
    outcomes = Status::Internal("a write batch of " + std::to_string(batch.size()) +
                                " writes got " + std::to_string(outcomes->size()) + " outcomes");
  }

  lock.lock();
  --in_flight_;
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
