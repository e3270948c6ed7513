#include "shard/commit_tracker.h"

#include <algorithm>
#include <string>

namespace zipg::shard {

void CommitTracker::Applied(const std::vector<engine::Update>& batch) {
  std::lock_guard lock(mu_);
  for (const engine::Update& u : batch) {
    if (u.id == 0 || u.id <= committed_) continue;
    uint64_t& newest = pending_[u.node];
    newest = std::max(newest, u.id);
    order_.emplace_back(u.id, u.node);
  }
}

void CommitTracker::Commit(uint64_t id) {
  std::lock_guard lock(mu_);
  if (id <= committed_) return;
  committed_ = id;
  while (!order_.empty() && order_.front().first <= id) {
    auto it = pending_.find(order_.front().second);
    if (it != pending_.end() && it->second <= id) pending_.erase(it);
    order_.pop_front();
  }
  if (waiting_ > 0) cv_.notify_all();
}

Status CommitTracker::Await(int64_t node, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  uint64_t needed = floor_;
  if (auto it = pending_.find(node); it != pending_.end()) needed = std::max(needed, it->second);
  if (needed <= committed_) return Status::OK();
  ++waits_;
  ++waiting_;
  const bool done = cv_.wait_until(lock, deadline, [&] { return committed_ >= needed; });
  --waiting_;
  if (done) return Status::OK();
  return Status::Unavailable("a write to node " + std::to_string(node) +
                             " is not yet confirmed by every replica of its shard");
}

uint64_t CommitTracker::committed() const {
  std::lock_guard lock(mu_);
  return committed_;
}

size_t CommitTracker::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

uint64_t CommitTracker::waits() const {
  std::lock_guard lock(mu_);
  return waits_;
}

}  // namespace zipg::shard
