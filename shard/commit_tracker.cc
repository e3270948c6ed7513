#include "shard/commit_tracker.h"

#include <algorithm>
#include <string>

namespace zipg::shard {

void CommitTracker::Applied(const std::vector<engine::Update>& batch) {
  std::lock_guard lock(mu_);
  for (const engine::Update& u : batch) {
    if (u.id == 0 || u.id <= committed_) continue;
    uint64_t& newest = newest_[u.node];
    newest = std::max(newest, u.id);
    order_.emplace_back(u.id, u.node);
  }
}

void CommitTracker::Commit(uint64_t id) {
  std::lock_guard lock(mu_);
  if (id <= committed_) return;
  committed_ = id;
  Prune();
  if (waiting_ > 0) cv_.notify_all();
}

void CommitTracker::Prune() {
  const uint64_t upto = reads_.empty() ? committed_ : std::min(committed_, *reads_.begin());
  while (!order_.empty() && order_.front().first <= upto) {
    auto it = newest_.find(order_.front().second);
    if (it != newest_.end() && it->second <= upto) newest_.erase(it);
    order_.pop_front();
  }
}

uint64_t CommitTracker::BeginRead() {
  std::lock_guard lock(mu_);
  reads_.insert(committed_);
  return committed_;
}

bool CommitTracker::EndRead(uint64_t began, int64_t node) {
  std::lock_guard lock(mu_);
  reads_.erase(reads_.find(began));
  bool again = floor_ > began;
  if (auto it = newest_.find(node); it != newest_.end()) again |= it->second > began;
  if (again) ++rereads_;
  Prune();  // it may have held the prune point
  return again;
}

bool CommitTracker::Settled(int64_t node) const {
  std::lock_guard lock(mu_);
  if (floor_ > committed_) return false;
  auto it = newest_.find(node);
  return it == newest_.end() || it->second <= committed_;
}

bool CommitTracker::WaitFor(std::unique_lock<std::mutex>& lock, uint64_t id,
                            Clock::time_point deadline) {
  if (id <= committed_) return true;
  ++waiting_;
  const bool done = cv_.wait_until(lock, deadline, [&] {
    return withdrawn_ || committed_ >= id;
  }) && committed_ >= id;
  --waiting_;
  return done;
}

void CommitTracker::SetWithdrawn(bool withdrawn) {
  std::lock_guard lock(mu_);
  withdrawn_ = withdrawn;
  cv_.notify_all();
}

Status CommitTracker::AwaitNode(int64_t node, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  uint64_t needed = floor_;
  if (auto it = newest_.find(node); it != newest_.end()) needed = std::max(needed, it->second);
  if (WaitFor(lock, needed, deadline)) return Status::OK();
  if (withdrawn_) return Status::Unavailable("this shard is no longer served here");
  return Status::Unavailable("a write to node " + std::to_string(node) +
                             " is not yet confirmed by every replica of its shard");
}

Status CommitTracker::AwaitCommitted(uint64_t id, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (WaitFor(lock, id, deadline)) return Status::OK();
  if (withdrawn_) return Status::Unavailable("this shard is no longer served here");
  return Status::DeadlineExceeded("snapshot " + std::to_string(id) +
                                  " is not reached yet by this replica (it holds up to " +
                                  std::to_string(committed_) + ")");
}

uint64_t CommitTracker::committed() const {
  std::lock_guard lock(mu_);
  return committed_;
}

size_t CommitTracker::tracked() const {
  std::lock_guard lock(mu_);
  return newest_.size();
}

uint64_t CommitTracker::rereads() const {
  std::lock_guard lock(mu_);
  return rereads_;
}

}  // namespace zipg::shard
