#include "cluster/election.h"

#include <iostream>

namespace zipg::cluster {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kRetry(200);  // between renewals while suspended

Election::Election(std::shared_ptr<EtcdClient> etcd, std::string key, int64_t ttl_seconds)
    : etcd_(std::move(etcd)), key_(std::move(key)), ttl_seconds_(std::max<int64_t>(ttl_seconds, 1)) {}

Election::~Election() { Resign(); }

StatusOr<std::optional<int64_t>> Election::Campaign(const std::string& value,
                                                    std::function<void()> on_lost,
                                                    std::function<void(bool)> on_suspend) {
  if (held_) return std::optional<int64_t>(epoch_.load());
  if (auto holder = etcd_->Get(key_); !holder.ok() || holder->has_value()) {
    if (!holder.ok()) return holder.status();
    return std::optional<int64_t>();
  }
  ZIPG_ASSIGN_OR_RETURN(int64_t lease, etcd_->LeaseGrant(ttl_seconds_));
  auto created = etcd_->PutIfAbsent(key_, value, lease);
  if (!created.ok() || !*created) {
    (void)etcd_->LeaseRevoke(lease);
    if (!created.ok()) return created.status();
    return std::optional<int64_t>();
  }
  // The epoch is the key's create revision; read it back (the key is ours: our lease holds it).
  auto got = etcd_->Get(key_);
  if (!got.ok() || !got->has_value() || (*got)->lease != lease) {
    (void)etcd_->LeaseRevoke(lease);
    if (!got.ok()) return got.status();
    return Status::Unavailable("election " + key_ + ": the key changed right after it was created");
  }
  if (thread_.joinable()) thread_.join();  // a keep-alive of an earlier term that has ended
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
    lease_ = lease;
    on_lost_ = std::move(on_lost);
    on_suspend_ = std::move(on_suspend);
  }
  epoch_ = (*got)->create_revision;
  held_ = true;
  thread_ = std::thread([this, lease] { KeepAlive(lease); });
  return std::optional<int64_t>(epoch_.load());
}

void Election::KeepAlive(int64_t lease) {
  // Renewals every ttl/3, each bounded by the etcd client's timeouts. Once none has succeeded for
  // ttl/2 (checked between attempts and while waiting) the holder is suspended, or its term is
  // over without on_suspend; it is over at once when etcd says the lease is gone.
  const auto period = std::chrono::milliseconds(ttl_seconds_ * 1000 / 3);
  const auto limit = std::chrono::milliseconds(ttl_seconds_ * 1000 / 2);
  auto last_ok = Clock::now();
  bool suspended = false;
  std::unique_lock lock(mu_);
  auto suspend = [&](bool on) {  // called with the lock held; runs the callback without it
    suspended = on;
    auto f = on_suspend_;
    lock.unlock();
    std::cerr << "election " << key_ << ": epoch " << epoch_.load()
              << (on ? ": no lease renewal for " + std::to_string(limit.count()) +
                           " ms; suspended until one succeeds"
                     : ": lease renewed; resumed")
              << "\n";
    f(on);
    lock.lock();
  };
  for (;;) {
    // Suspended: try again soon, so that the holder resumes as soon as etcd answers (and before
    // the lease it still holds runs out).
    const auto deadline = suspended ? Clock::now() + std::min<Clock::duration>(period, kRetry)
                                    : std::min(Clock::now() + period, last_ok + limit);
    if (cv_.wait_until(lock, deadline, [this] { return stopping_; })) return;
    bool lost = false;
    if (!suspended && Clock::now() - last_ok >= limit) {
      if (!on_suspend_) {
        lost = true;
      } else {
        suspend(true);
        if (stopping_) return;
      }
    }
    if (!lost) {
      lock.unlock();
      const auto sent = Clock::now();
      Status s = etcd_->LeaseKeepAlive(lease);
      lock.lock();
      if (stopping_) return;
      if (s.ok()) {
        last_ok = sent;
        if (suspended) {
          suspend(false);
          if (stopping_) return;
        }
      } else {
        std::cerr << "election " << key_ << ": lease renewal: " << s.ToString() << "\n";
        lost = s.code() == StatusCode::kNotFound ||
               (!on_suspend_ && Clock::now() - last_ok >= limit);
      }
    }
    if (lost) {
      held_ = false;
      auto on_lost = std::move(on_lost_);
      lock.unlock();
      std::cerr << "election " << key_ << ": leadership of epoch " << epoch_.load()
                << " lost (" << (on_suspend_ ? "the lease is gone" : "no lease renewal for " +
                                 std::to_string(limit.count()) + " ms") << ")\n";
      if (on_lost) on_lost();
      return;
    }
  }
}

void Election::Resign() {
  int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    lease = lease_;
    lease_ = 0;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  if (held_.exchange(false) && lease != 0) (void)etcd_->LeaseRevoke(lease);
}

StatusOr<std::optional<KeyValue>> Election::Holder() const { return etcd_->Get(key_); }

}  // namespace zipg::cluster
