// Snapshot reads (docs/consistency.md, "Snapshots"): the pieces every layer shares.
//
// ReadAt: the snapshot a thread reads at, like CallDeadline: 0 reads the latest state; n > 0 reads
// as of exactly the writes with update id <= n. A server sets it from the request's call context
// (rpc/server.cc), the connection pool sends it on (rpc/connection_pool.cc), ThreadPool tasks run
// under the submitter's, and every versioned structure (VersionLog below, the LogStore's memtable
// history) answers at it.
//
// RetentionClock: which ids a component must still answer at: those that were its progress less
// than `retention` ago. Each component samples its own progress (the LogStore its applied id, a
// replica its applied id); since a replica's progress never passes the LogStore's, a snapshot the
// LogStore handed out less than `retention` ago is at or above every component's horizon.
//
// VersionLog<K, T>: for each key, the values (shared, immutable) it had before each change with
// an id above the horizon, so that the value at n is the one before the oldest change above n;
// ChangeLog<K, C>, under it, keeps any kind of change record (engine/delta.h keeps undo records).
//
// Thread-safety: ReadAt is per thread; RetentionClock and SnapshotPins are thread-safe;
// ChangeLog and VersionLog have none (their owner's lock guards them).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zipg {

class ReadAt {
 public:
  // This thread's snapshot; 0: the latest state.
  static uint64_t Current() { return current_; }
  class Scope {
   public:
    explicit Scope(uint64_t at) : saved_(current_) { current_ = at; }
    ~Scope() { current_ = saved_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    uint64_t saved_;
  };
  // With no scope: the server's input protocol, which learns it while reading the arguments.
  static void Set(uint64_t at) { current_ = at; }

 private:
  static thread_local uint64_t current_;
};

class RetentionClock {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RetentionClock(std::chrono::milliseconds retention) : retention_(retention) {}

  // Records that the component's progress is `id` now (ids never go back).
  void Note(uint64_t id) {
    const auto now = Clock::now();
    std::lock_guard lock(mu_);
    if (!samples_.empty() && samples_.back().second >= id) return;
    // One sample per 50 ms is enough: the horizon lags by at most that much more.
    if (!samples_.empty() && now - samples_.back().first < std::chrono::milliseconds(50)) {
      samples_.back().second = id;
      return;
    }
    samples_.emplace_back(now, id);
  }
  // The oldest id the component must still answer at: its progress `retention` ago (0 before
  // that long has passed since the first sample).
  uint64_t Horizon() const {
    const auto cut = Clock::now() - retention_;
    std::lock_guard lock(mu_);
    while (samples_.size() > 1 && samples_[1].first <= cut) samples_.pop_front();
    return !samples_.empty() && samples_.front().first <= cut ? samples_.front().second : 0;
  }
  std::chrono::milliseconds retention() const { return retention_; }

 private:
  const std::chrono::milliseconds retention_;
  mutable std::mutex mu_;
  mutable std::deque<std::pair<Clock::time_point, uint64_t>> samples_;  // old ones dropped
};

// The snapshots of the reads running now: versions they need are not pruned while they run.
// A reader pins its snapshot, then checks it against the floor; a pruner prunes up to
// min(horizon, Oldest()). Either the pruner saw the pin, or it computed its horizon before the
// reader's check passed, so at or below the snapshot (horizons only grow).
class SnapshotPins {
 public:
  void Pin(uint64_t at) {
    std::lock_guard lock(mu_);
    pins_.insert(at);
  }
  void Unpin(uint64_t at) {
    std::lock_guard lock(mu_);
    auto it = pins_.find(at);
    if (it != pins_.end()) pins_.erase(it);
  }
  // The oldest pinned snapshot; UINT64_MAX if none.
  uint64_t Oldest() const {
    std::lock_guard lock(mu_);
    return pins_.empty() ? UINT64_MAX : *pins_.begin();
  }
  // Pins `at` (if not 0) for its life.
  class Scope {
   public:
    Scope(SnapshotPins* pins, uint64_t at) : pins_(pins), at_(at) {
      if (at_ != 0) pins_->Pin(at_);
    }
    ~Scope() {
      if (at_ != 0) pins_->Unpin(at_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    SnapshotPins* pins_;
    uint64_t at_;
  };

 private:
  mutable std::mutex mu_;
  std::multiset<uint64_t> pins_;
};

// The FAILED_PRECONDITION message of a read at `at` below `floor`.
inline std::string SnapshotGoneMessage(uint64_t at, uint64_t floor, const char* where) {
  return "snapshot " + std::to_string(at) + " is no longer held by " + where +
         " (it holds snapshots from " + std::to_string(floor) + " on)";
}

// ChangeLog<K, C>: per key, the changes C (each with a member `uint64_t id`, increasing across
// Record calls) made above the horizon, oldest first; Prune forgets those at or below it.
template <typename K, typename C, typename Hash = std::hash<K>>
class ChangeLog {
 public:
  void Record(const K& key, C change) {
    order_.emplace_back(change.id, key);
    keys_[key].push_back(std::move(change));
  }
  // The key's changes, oldest first (null if none).
  const std::deque<C>* Changes(const K& key) const {
    auto it = keys_.find(key);
    return it == keys_.end() ? nullptr : &it->second;
  }
  bool ChangedAfter(const K& key, uint64_t at) const {
    const std::deque<C>* changes = Changes(key);
    return changes != nullptr && !changes->empty() && changes->back().id > at;
  }
  // The keys changed after `at` (each once, sorted).
  std::vector<K> KeysChangedAfter(uint64_t at) const {
    std::vector<K> out;
    for (auto it = order_.rbegin(); it != order_.rend() && it->first > at; ++it) {
      out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  // Forgets the changes at or below `horizon` (no read at or above it undoes them), calling
  // `dropped` (if given) with each.
  template <typename F = void (*)(const C&)>
  void Prune(uint64_t horizon, F dropped = nullptr) {
    while (!order_.empty() && order_.front().first <= horizon) {
      auto it = keys_.find(order_.front().second);
      if (it != keys_.end()) {
        auto& changes = it->second;
        while (!changes.empty() && changes.front().id <= horizon) {
          if constexpr (!std::is_pointer_v<F>) {
            dropped(changes.front());
          } else if (dropped != nullptr) {
            dropped(changes.front());
          }
          changes.pop_front();
        }
        if (changes.empty()) keys_.erase(it);
      }
      order_.pop_front();
    }
  }
  // How many changes are above `id`.
  size_t CountAbove(uint64_t id) const {
    size_t n = 0;
    for (auto it = order_.rbegin(); it != order_.rend() && it->first > id; ++it) ++n;
    return n;
  }
  // Forgets the changes above `id`, newest first, calling `popped(key, change)` with each (the
  // rollback of updates that were never committed: engine/delta.h).
  template <typename F>
  void PopAbove(uint64_t id, F popped) {
    while (!order_.empty() && order_.back().first > id) {
      auto it = keys_.find(order_.back().second);
      if (it != keys_.end() && !it->second.empty()) {
        popped(it->first, it->second.back());
        it->second.pop_back();
        if (it->second.empty()) keys_.erase(it);
      }
      order_.pop_back();
    }
  }
  void Clear() {
    keys_.clear();
    order_.clear();
  }
  size_t changes() const { return order_.size(); }
  bool empty() const { return order_.empty(); }

 private:
  std::unordered_map<K, std::deque<C>, Hash> keys_;
  std::deque<std::pair<uint64_t, K>> order_;
};

// VersionLog<K, T>: a ChangeLog of the values (shared, immutable) each change replaced.
template <typename K, typename T, typename Hash = std::hash<K>>
class VersionLog {
 public:
  // Before `current` (null: absent) changes with update `id` (increasing across calls).
  void Record(const K& key, uint64_t id, std::shared_ptr<const T> before) {
    log_.Record(key, Change{id, std::move(before)});
  }
  // The key's value at `at`, given its current value: the value before its oldest change above
  // `at`; `current` if none (or at == 0).
  std::shared_ptr<const T> At(const K& key, uint64_t at, std::shared_ptr<const T> current) const {
    if (at == 0 || log_.empty()) return current;
    if (const auto* changes = log_.Changes(key)) {
      for (const Change& c : *changes) {
        if (c.id > at) return c.before;
      }
    }
    return current;
  }
  bool ChangedAfter(const K& key, uint64_t at) const { return log_.ChangedAfter(key, at); }
  std::vector<K> KeysChangedAfter(uint64_t at) const { return log_.KeysChangedAfter(at); }
  void Prune(uint64_t horizon) { log_.Prune(horizon); }
  void Clear() { log_.Clear(); }
  size_t changes() const { return log_.changes(); }
  bool empty() const { return log_.empty(); }

 private:
  struct Change {
    uint64_t id;
    std::shared_ptr<const T> before;
  };
  ChangeLog<K, Change, Hash> log_;
};

}  // namespace zipg
