// WriteBatcher: every writer gets its own write's outcome, however the writes were grouped;
// batches form only while max_in_flight batches are outstanding; a failed batch fails each of its
// writes; the size limits split batches.

#include "aggregator/write_batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/call_deadline.h"

namespace zipg::aggregator {
namespace {

rpc::BatchedWrite Add(int64_t id, size_t value_bytes = 0) {
  rpc::BatchedWrite w;
  w.kind = rpc::WriteKind::ASSOC_ADD;
  w.id = id;
  w.dst = id + 1;
  if (value_bytes > 0) w.properties["v"] = std::string(value_bytes, 'x');
  return w;
}

// The reference outcome of one write, computed from the write alone: ids < 0 fail, odd ids were
// "found".
StatusOr<bool> Expected(const rpc::BatchedWrite& w) {
  if (w.id < 0) return Status::InvalidArgument("bad id " + std::to_string(w.id));
  return w.id % 2 == 1;
}

// A LogStore stand-in: records each batch's ids, answers Expected per write, and can hold the
// sends until released.
class FakeLogStore {
 public:
  StatusOr<std::vector<StatusOr<bool>>> Send(const std::vector<rpc::BatchedWrite>& writes) {
    std::unique_lock lock(mu_);
    std::vector<int64_t> ids;
    for (const auto& w : writes) ids.push_back(w.id);
    batches_.push_back(ids);
    deadlines_.push_back(CallDeadline::Current());
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    cv_.notify_all();
    if (delay_us_ > 0) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
      lock.lock();
    }
    cv_.wait(lock, [&] { return !hold_; });
    --in_flight_;
    if (fail_) return Status::Unavailable("LogStore is down");
    std::vector<StatusOr<bool>> out;
    for (const auto& w : writes) out.push_back(Expected(w));
    if (drop_one_) out.pop_back();
    return out;
  }
  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  // Waits until `n` sends are blocked in Send.
  void AwaitInFlight(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ >= n; });
  }
  std::vector<std::vector<int64_t>> batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }
  int max_in_flight() {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }
  // The call deadline each batch was sent under.
  std::vector<std::optional<CallDeadline::TimePoint>> deadlines() {
    std::lock_guard lock(mu_);
    return deadlines_;
  }
  bool fail_ = false;
  bool drop_one_ = false;
  int delay_us_ = 0;  // each send takes this long

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::vector<std::vector<int64_t>> batches_;
  std::vector<std::optional<CallDeadline::TimePoint>> deadlines_;
};

WriteBatcher::SendFn SendTo(FakeLogStore* log) {
  return [log](const std::vector<rpc::BatchedWrite>& w) { return log->Send(w); };
}

// Waits until `n` writes are queued (not yet sent).
void AwaitQueued(const WriteBatcher& batcher, size_t n) {
  while (batcher.queued() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void ExpectSame(const StatusOr<bool>& got, const StatusOr<bool>& want, int64_t id) {
  ASSERT_EQ(got.ok(), want.ok()) << "write " << id << ": " << got.status().ToString();
  if (want.ok()) {
    EXPECT_EQ(*got, *want) << "write " << id;
  } else {
    EXPECT_EQ(got.status().code(), want.status().code()) << "write " << id;
  }
}

// Sends writes[0] and holds it at the LogStore, queues the others behind it one at a time (so
// the queue order is theirs), calls `before_release`, then lets the LogStore answer. Each write's
// outcome, in order. The batcher must have max_in_flight 1. With `deadlines`, write k is made
// under call deadline deadlines[k].
std::vector<StatusOr<bool>> BehindAHeldBatch(
    FakeLogStore& log, WriteBatcher& batcher, const std::vector<rpc::BatchedWrite>& writes,
    const std::function<void()>& before_release = {},
    const std::vector<std::optional<CallDeadline::TimePoint>>& deadlines = {}) {
  std::vector<StatusOr<bool>> got(writes.size(), StatusOr<bool>(false));
  std::vector<std::thread> threads;
  log.Hold();
  for (size_t k = 0; k < writes.size(); ++k) {
    threads.emplace_back([&, k] {
      CallDeadline::Scope scope(k < deadlines.size() ? deadlines[k] : std::nullopt);
      got[k] = batcher.Write(writes[k]);
    });
    if (k == 0) {
      log.AwaitInFlight(1);
    } else {
      AwaitQueued(batcher, k);
    }
  }
  if (before_release) before_release();
  log.Release();
  for (auto& t : threads) t.join();
  return got;
}

TEST(WriteBatcherTest, ALoneWriterSendsItsWriteAtOnce) {
  FakeLogStore log;
  WriteBatcher batcher(SendTo(&log), {});
  for (int64_t id : {1, 2, -3}) ExpectSame(batcher.Write(Add(id)), Expected(Add(id)), id);
  EXPECT_EQ(log.batches(), (std::vector<std::vector<int64_t>>{{1}, {2}, {-3}}));
  EXPECT_EQ(batcher.batches(), 3u);
  EXPECT_EQ(batcher.writes(), 3u);
}

// With the one in-flight slot taken, the writers that arrive queue up and go as one batch, and
// each gets the outcome of its own write (some fail, some were found, some not).
TEST(WriteBatcherTest, WritersQueuedBehindAFullPipeShareOneBatch) {
  FakeLogStore log;
  WriteBatcher::Options options;
  options.max_in_flight = 1;
  options.stuck_after = std::chrono::hours(1);  // held batches are not stuck here
  WriteBatcher batcher(SendTo(&log), options);
  const auto id_of = [](int i) { return i % 7 == 3 ? -int64_t{i} : int64_t{i}; };
  std::vector<rpc::BatchedWrite> writes;
  for (int i = 0; i < 20; ++i) writes.push_back(Add(id_of(i)));
  const std::vector<StatusOr<bool>> got = BehindAHeldBatch(log, batcher, writes);
  for (int i = 0; i < 20; ++i) ExpectSame(got[i], Expected(Add(id_of(i))), id_of(i));
  const auto batches = log.batches();
  ASSERT_EQ(batches.size(), 2u) << "the 19 queued writers should have gone as one batch";
  EXPECT_EQ(batches[0], std::vector<int64_t>{id_of(0)});
  std::vector<int64_t> want;
  for (int i = 1; i < 20; ++i) want.push_back(id_of(i));
  EXPECT_EQ(batches[1], want);
  EXPECT_EQ(log.max_in_flight(), 1);
  EXPECT_EQ(batcher.writes(), 20u);
}

// A batch is sent for the most patient of its writers: under the latest of their call deadlines,
// or under none if one of them has none.
TEST(WriteBatcherTest, ABatchIsSentUnderItsMostPatientWritersDeadline) {
  FakeLogStore log;
  WriteBatcher::Options options;
  options.max_in_flight = 1;
  options.stuck_after = std::chrono::hours(1);
  WriteBatcher batcher(SendTo(&log), options);
  const auto now = CallDeadline::Clock::now();
  const auto soon = now + std::chrono::hours(1), later = now + std::chrono::hours(2),
             latest = now + std::chrono::hours(3);
  BehindAHeldBatch(log, batcher, {Add(1), Add(2), Add(3), Add(4)}, {}, {soon, later, latest, soon});
  BehindAHeldBatch(log, batcher, {Add(5), Add(6), Add(7)}, {}, {latest, soon, std::nullopt});
  ExpectSame(batcher.Write(Add(8)), Expected(Add(8)), 8);
  EXPECT_EQ(log.batches(), (std::vector<std::vector<int64_t>>{{1}, {2, 3, 4}, {5}, {6, 7}, {8}}));
  EXPECT_EQ(log.deadlines(), (std::vector<std::optional<CallDeadline::TimePoint>>{
                                 soon, latest, latest, std::nullopt, std::nullopt}));
}

TEST(WriteBatcherTest, NeverMoreThanMaxInFlightBatches) {
  FakeLogStore log;
  log.delay_us_ = 300;
  WriteBatcher::Options options;
  options.max_in_flight = 3;
  options.stuck_after = std::chrono::hours(1);  // held batches are not stuck here
  WriteBatcher batcher(SendTo(&log), options);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int64_t id = t * 1000 + i;
        auto got = batcher.Write(Add(id));
        if (!got.ok() || *got != (id % 2 == 1)) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(log.max_in_flight(), 3);  // reached, never exceeded
  EXPECT_EQ(batcher.writes(), 12u * 200);
  EXPECT_LT(batcher.batches(), batcher.writes() / 2) << "12 writers over 3 slots: batches form";
  size_t total = 0;
  for (const auto& b : log.batches()) total += b.size();
  EXPECT_EQ(total, 12u * 200);
}

TEST(WriteBatcherTest, AFailedBatchFailsEachOfItsWrites) {
  FakeLogStore log;
  WriteBatcher::Options options;
  options.max_in_flight = 1;
  options.stuck_after = std::chrono::hours(1);  // held batches are not stuck here
  WriteBatcher batcher(SendTo(&log), options);
  // One held batch; five writes queue behind it; then the LogStore goes down.
  std::vector<rpc::BatchedWrite> writes;
  for (int i = 0; i < 6; ++i) writes.push_back(Add(i));
  const std::vector<StatusOr<bool>> got =
      BehindAHeldBatch(log, batcher, writes, [&] { log.fail_ = true; });
  EXPECT_EQ(log.batches().size(), 2u);
  for (int i = 0; i < 6; ++i) {
    ASSERT_FALSE(got[i].ok()) << "write " << i;
    EXPECT_EQ(got[i].status().code(), StatusCode::kUnavailable) << "write " << i;
  }
  log.fail_ = false;
  log.drop_one_ = true;  // an answer with too few outcomes is a bug, not a success
  auto short_answer = batcher.Write(Add(5));
  ASSERT_FALSE(short_answer.ok());
  EXPECT_EQ(short_answer.status().code(), StatusCode::kInternal);
  // A send that throws still answers its writers, and the batcher keeps working.
  WriteBatcher throwing(
      [](const std::vector<rpc::BatchedWrite>&) -> StatusOr<std::vector<StatusOr<bool>>> {
        throw std::runtime_error("boom");
      },
      {});
  EXPECT_EQ(throwing.Write(Add(1)).status().code(), StatusCode::kInternal);
  EXPECT_EQ(throwing.Write(Add(2)).status().code(), StatusCode::kInternal);
}

TEST(WriteBatcherTest, SizeLimitsSplitBatches) {
  FakeLogStore log;
  WriteBatcher::Options options;
  options.max_in_flight = 1;
  options.stuck_after = std::chrono::hours(1);  // held batches are not stuck here
  options.max_writes = 4;
  options.max_bytes = 3000;  // two 1 KB writes fit, three do not
  WriteBatcher batcher(SendTo(&log), options);
  // Held: one small write. Queued in this order: six small writes, then three of 1 KB and one of
  // 5 KB (alone: larger than max_bytes, still sent).
  std::vector<rpc::BatchedWrite> writes;
  for (int i = 0; i <= 6; ++i) writes.push_back(Add(i));
  for (int i = 7; i <= 9; ++i) writes.push_back(Add(i, 1000));
  writes.push_back(Add(10, 5000));
  for (const auto& got : BehindAHeldBatch(log, batcher, writes)) EXPECT_TRUE(got.ok());
  const auto batches = log.batches();
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0}, {1, 2, 3, 4}, {5, 6, 7, 8}, {9}, {10}}));
}

// A batch that does not return (its LogStore paused) stops counting against max_in_flight after
// stuck_after: the writes behind it are sent and answered meanwhile; at most 4 x max_in_flight
// batches are in flight to one target; once the target changes (a new LogStore leader), the
// batches stuck at the old one do not count; a stuck one is answered when its call returns.
TEST(WriteBatcherTest, AStuckBatchDoesNotHoldBackTheWritesBehindIt) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int in_flight = 0, max_in_flight = 0;
  std::mutex target_mu;
  std::string target = "a";
  auto current = [&] {
    std::lock_guard lock(target_mu);
    return target;
  };
  WriteBatcher::Options options;
  options.max_in_flight = 1;
  options.stuck_after = std::chrono::milliseconds(50);
  WriteBatcher batcher(
      [&](const std::vector<rpc::BatchedWrite>& writes) -> StatusOr<std::vector<StatusOr<bool>>> {
        const bool to_a = current() == "a";
        std::unique_lock lock(mu);
        ++in_flight;
        max_in_flight = std::max(max_in_flight, in_flight);
        // At target "a", writes with ids >= 100 are held until released (a paused LogStore).
        if (to_a && writes.front().id >= 100) cv.wait(lock, [&] { return released; });
        --in_flight;
        std::vector<StatusOr<bool>> out;
        for (const auto& w : writes) out.push_back(Expected(w));
        return out;
      },
      options, current);
  std::vector<std::thread> stuck;
  std::vector<StatusOr<bool>> stuck_got(6, StatusOr<bool>(false));
  // Writers arriving one after the other: each finds the batches before it stuck and goes (once
  // the newest is 50 ms old), until 4 are in flight; the last two wait.
  for (int k = 0; k < 6; ++k) {
    stuck.emplace_back([&, k] { stuck_got[k] = batcher.Write(Add(101 + 2 * k)); });
    for (int wait = 0; k < 4 && wait < 20000; ++wait) {
      {
        std::lock_guard lock(mu);
        if (in_flight == k + 1) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(in_flight, 4) << "4 x max_in_flight stuck batches, the other writers queued";
  }
  // A new target: the two queued writers go to it (as one batch) and are answered, while the 4
  // batches at "a" are still held.
  {
    std::lock_guard lock(target_mu);
    target = "b";
  }
  stuck[5].join();
  stuck[4].join();
  for (int k = 4; k < 6; ++k) ExpectSame(stuck_got[k], Expected(Add(101 + 2 * k)), 101 + 2 * k);
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(in_flight, 4);
    released = true;
  }
  cv.notify_all();
  for (int k = 0; k < 4; ++k) stuck[k].join();
  for (int k = 0; k < 4; ++k) ExpectSame(stuck_got[k], Expected(Add(101 + 2 * k)), 101 + 2 * k);
  EXPECT_EQ(max_in_flight, 5);
  {
    std::lock_guard lock(target_mu);
    target = "a";
  }

  // One stuck batch: a later writer's batch goes past it and is answered while it is held.
  {
    std::lock_guard lock(mu);
    released = false;
  }
  StatusOr<bool> held = false;
  std::thread holder([&] { held = batcher.Write(Add(201)); });
  while (true) {
    std::lock_guard lock(mu);
    if (in_flight == 1) break;
  }
  ExpectSame(batcher.Write(Add(3)), Expected(Add(3)), 3);
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(in_flight, 1) << "the held batch is still in flight";
    released = true;
  }
  cv.notify_all();
  holder.join();
  ExpectSame(held, Expected(Add(201)), 201);
}

}  // namespace
}  // namespace zipg::aggregator
