#include "shard/commit_tracker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace zipg::shard {
namespace {

using Clock = CommitTracker::Clock;

engine::Update Put(int64_t node, uint64_t id) {
  engine::Update u;
  u.op = engine::UpdateOp::kPutNode;
  u.node = node;
  u.id = id;
  return u;
}

Clock::time_point In(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

TEST(CommitTrackerTest, AReadAgainOnlyForANodeWithAnUpdateUncommittedWhenItBegan) {
  CommitTracker t(/*floor=*/0);
  t.Applied({Put(1, 10), Put(2, 11), Put(1, 12)});
  uint64_t began = t.BeginRead();
  EXPECT_EQ(began, 0u);
  EXPECT_FALSE(t.EndRead(began, 3));  // never written
  began = t.BeginRead();
  EXPECT_TRUE(t.EndRead(began, 1));
  EXPECT_EQ(t.AwaitNode(1, In(20)).code(), StatusCode::kUnavailable);
  t.Commit(11);  // node 2's only update; node 1's newest is 12
  EXPECT_TRUE(t.AwaitNode(2, In(0)).ok());
  EXPECT_EQ(t.AwaitNode(1, In(10)).code(), StatusCode::kUnavailable);
  began = t.BeginRead();
  EXPECT_EQ(began, 11u);
  EXPECT_FALSE(t.EndRead(began, 2));
  EXPECT_TRUE(t.EndRead(t.BeginRead(), 1));
  t.Commit(12);
  EXPECT_TRUE(t.AwaitNode(1, In(0)).ok());
  EXPECT_FALSE(t.EndRead(t.BeginRead(), 1));
  EXPECT_EQ(t.tracked(), 0u);
  t.Commit(5);  // ids only grow
  EXPECT_EQ(t.committed(), 12u);
  t.Applied({Put(4, 9)});  // already committed: nothing to wait for
  EXPECT_FALSE(t.EndRead(t.BeginRead(), 4));
  EXPECT_EQ(t.rereads(), 2u);
}

// The race a check before the read would miss: the update is applied and committed while the
// read runs; the read may have seen its pointer before the LogStore applied its data.
TEST(CommitTrackerTest, AnUpdateAppliedAndCommittedDuringTheReadStillMeansReadAgain) {
  CommitTracker t(0);
  const uint64_t began = t.BeginRead();
  t.Applied({Put(7, 20)});
  t.Commit(20);  // the running read holds the prune point: node 7 is still known
  EXPECT_EQ(t.tracked(), 1u);
  EXPECT_TRUE(t.EndRead(began, 7));
  EXPECT_EQ(t.tracked(), 0u);  // no read running: forgotten
  EXPECT_TRUE(t.AwaitNode(7, In(0)).ok());
  EXPECT_TRUE(t.Settled(7));
  EXPECT_FALSE(t.EndRead(t.BeginRead(), 7));
  t.Applied({Put(7, 21)});
  EXPECT_FALSE(t.Settled(7));
  EXPECT_TRUE(t.Settled(8));
}

TEST(CommitTrackerTest, TheFloorMakesEveryEarlierReadReadAgain) {
  CommitTracker t(/*floor=*/100);
  EXPECT_TRUE(t.EndRead(t.BeginRead(), 7));
  EXPECT_EQ(t.AwaitNode(7, In(10)).code(), StatusCode::kUnavailable);
  t.Commit(99);
  EXPECT_EQ(t.AwaitNode(7, In(10)).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(t.Settled(8));
  t.Commit(100);
  EXPECT_TRUE(t.Settled(8));
  EXPECT_TRUE(t.AwaitNode(7, In(0)).ok());
  EXPECT_FALSE(t.EndRead(t.BeginRead(), 7));
}

TEST(CommitTrackerTest, AWaitingReadReturnsWhenTheCommitArrives) {
  CommitTracker t(0);
  t.Applied({Put(5, 3)});
  std::atomic<bool> done{false};
  std::thread reader([&] {
    EXPECT_TRUE(t.AwaitNode(5, In(10000)).ok());
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load());
  t.Commit(3);
  reader.join();
  EXPECT_TRUE(done.load());
}

// A shard withdrawn from a server gets no more commits: reads waiting for one end at once with
// UNAVAILABLE (the router retries elsewhere) instead of at their deadline (a move under load
// stalled reads for the whole call timeout before this), and so does a new wait; served again,
// waits last until the commit as before.
TEST(CommitTrackerTest, WithdrawingTheShardEndsTheWaits) {
  CommitTracker t(0);
  t.Applied({Put(5, 3)});
  const auto start = std::chrono::steady_clock::now();
  Status node, snapshot;
  std::thread a([&] { node = t.AwaitNode(5, In(10000)); });
  std::thread b([&] { snapshot = t.AwaitCommitted(3, In(10000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  t.SetWithdrawn(true);
  a.join();
  b.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(node.code(), StatusCode::kUnavailable) << node.ToString();
  EXPECT_EQ(snapshot.code(), StatusCode::kUnavailable) << snapshot.ToString();
  EXPECT_NE(node.message().find("no longer served here"), std::string::npos);
  EXPECT_EQ(t.AwaitNode(5, In(10000)).code(), StatusCode::kUnavailable);
  // Served again: a wait lasts until the commit; a committed node needs none.
  t.SetWithdrawn(false);
  EXPECT_EQ(t.AwaitNode(5, In(30)).code(), StatusCode::kUnavailable);  // its deadline
  t.Commit(3);
  EXPECT_TRUE(t.AwaitNode(5, In(10000)).ok());
  EXPECT_TRUE(t.AwaitCommitted(3, In(10000)).ok());
}

}  // namespace
}  // namespace zipg::shard
