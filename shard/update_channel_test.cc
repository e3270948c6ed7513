// Tests of the update channel with replicas (shard/update_channel.h, docs/replication.md): a
// batch goes to every replica in the map and is answered once all have answered or left the map;
// a replica that has not applied `prev` answers behind and applies nothing; with no replica that
// answered ok the updates fail with UNAVAILABLE; with a fence, a sender of an older epoch than one
// the shard has seen applies nothing, even after the shard's restart.
#include "shard/update_channel.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "rpc/tls_test_files.h"

namespace zipg::shard {
namespace {

using engine::Update;
using engine::UpdateOp;

// A stand-in replica: applies pushes in order by id, like ServerGraph::ApplyPush; found is a
// function of the update, so replicas agree.
class Replica {
 public:
  explicit Replica(std::string name, uint64_t last = 0, Fence* fence = nullptr)
      : name_(std::move(name)), last_(last) {
    auto r = UpdateReceiver::Start(
        "127.0.0.1", 0,
        [this](uint32_t, uint64_t prev, const std::vector<Update>& batch) {
          std::lock_guard lock(mu_);
          PushAnswer answer;
          if (prev > last_) {
            answer.behind = true;
            ++behind_;
            return StatusOr<PushAnswer>(answer);
          }
          if (!batch.empty()) events_.push_back("apply " + std::to_string(batch.front().id));
          for (const Update& u : batch) {
            answer.found.push_back(u.node % 2 == 0);
            if (u.id <= last_) continue;
            applied_.push_back(u);
            last_ = u.id;
          }
          return StatusOr<PushAnswer>(answer);
        },
        rpc::FrameSecurity{}, fence,
        [this](uint32_t, uint64_t, uint64_t committed) {
          std::lock_guard lock(mu_);
          committed_ = std::max(committed_, committed);
          events_.push_back("commit");
        },
        [this](uint32_t, uint64_t sender) {
          std::lock_guard lock(mu_);
          if (sender != sender_) events_.push_back("sender");
          sender_ = sender;
        });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    receiver_ = std::move(*r);
  }
  UpdateTarget target() const { return {name_, receiver_->endpoint()}; }
  std::vector<Update> applied() const {
    std::lock_guard lock(mu_);
    return applied_;
  }
  int behind() const {
    std::lock_guard lock(mu_);
    return behind_;
  }
  uint64_t committed() const {
    std::lock_guard lock(mu_);
    return committed_;
  }
  // Waits up to 3 s for the committed id to reach `id`; the id it reached.
  uint64_t AwaitCommitted(uint64_t id) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (committed() < id && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return committed();
  }
  void Stop() { receiver_.reset(); }
  uint64_t fenced_batches() const { return receiver_->fenced_batches(); }
  // What the receiver called, in order: "sender" (a new sender), "commit", "apply <first id>".
  std::vector<std::string> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::vector<std::string> events_;
  uint64_t sender_ = 0;
  const std::string name_;
  mutable std::mutex mu_;
  uint64_t last_;
  uint64_t committed_ = 0;
  int behind_ = 0;
  std::vector<Update> applied_;
  std::unique_ptr<UpdateReceiver> receiver_;
};

std::vector<Update> Updates(uint64_t first_id, size_t n) {
  std::vector<Update> out;
  for (size_t i = 0; i < n; ++i) {
    Update u{UpdateOp::kPutEdge, static_cast<int64_t>(first_id + i), 1, 2, 1, 3};
    u.id = first_id + i;
    out.push_back(u);
  }
  return out;
}

// The map, changeable while the sender runs.
struct Map {
  std::mutex mu;
  std::vector<UpdateTarget> targets;
  UpdateSender::Locate locate() {
    return [this](uint32_t) {
      std::lock_guard lock(mu);
      return targets;
    };
  }
  void Set(std::vector<UpdateTarget> t) {
    std::lock_guard lock(mu);
    targets = std::move(t);
  }
};

TEST(UpdateChannelTest, EveryReplicaGetsEveryBatchInOrder) {
  Replica a("a"), b("b");
  Map map;
  map.Set({a.target(), b.target()});
  UpdateSender sender(1, map.locate(), 200);
  EXPECT_TRUE(sender.IsTarget(0, "a"));
  EXPECT_FALSE(sender.IsTarget(0, "c"));
  std::vector<Update> all;
  for (uint64_t k = 0; k < 20; ++k) {
    auto batch = Updates(1 + k * 3, 3);
    all.insert(all.end(), batch.begin(), batch.end());
    auto found = sender.Send(0, batch, 5000);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, (std::vector<bool>{batch[0].node % 2 == 0, batch[1].node % 2 == 0,
                                         batch[2].node % 2 == 0}));
  }
  EXPECT_EQ(a.applied(), all);
  EXPECT_EQ(b.applied(), all);
  EXPECT_EQ(sender.behind_answers(), 0u);
}

// docs/consistency.md, "Commit notices": a shard's committed id is the smaller of what the
// LogStore applied and what every replica in the map confirmed, and reaches every replica.
TEST(UpdateChannelTest, ReplicasLearnTheCommittedIdOnlyOnceEveryReplicaHasTheUpdates) {
  Replica a("a"), b("b");
  Map map;
  map.Set({a.target(), b.target()});
  UpdateSender sender(1, map.locate(), 200);
  ASSERT_TRUE(sender.Send(0, Updates(1, 3), 5000).ok());
  EXPECT_EQ(sender.Committed(0), 0u);  // nothing applied by the LogStore yet
  sender.SetApplied(2);
  EXPECT_EQ(sender.Committed(0), 2u);
  EXPECT_EQ(a.AwaitCommitted(2), 2u);
  EXPECT_EQ(b.AwaitCommitted(2), 2u);
  // Applied past what the lane was given: every update up to an applied id was posted before it
  // was applied (the LogStore's order), so an idle lane has delivered all of this shard's, and
  // the committed id follows the applied one (a snapshot's reads need not wait).
  sender.SetApplied(10);
  EXPECT_EQ(a.AwaitCommitted(10), 10u);
  EXPECT_EQ(b.AwaitCommitted(10), 10u);

  // b stops answering: updates 11 and 12 reach a only, so they are not committed.
  b.Stop();
  auto sent = sender.Send(0, Updates(11, 2), 100);
  EXPECT_EQ(sent.status().code(), StatusCode::kUnavailable);
  sender.SetApplied(20);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(sender.Committed(0), 10u);  // the lane is still delivering 11 and 12
  EXPECT_EQ(a.committed(), 10u);
  EXPECT_EQ(a.applied().size(), 5u);
  // b leaves the map (its lease expired): the lane is done with 11 and 12, then idle, and a
  // learns that everything up to the applied id is committed.
  map.Set({a.target()});
  EXPECT_EQ(a.AwaitCommitted(20), 20u);
  EXPECT_EQ(sender.Committed(0), 20u);
  EXPECT_GT(sender.notices(), 0u);
}

TEST(UpdateChannelTest, ABehindReplicaAppliesNothingAndTheOthersAnswer) {
  Replica a("a"), late("late");
  Map map;
  map.Set({a.target()});
  UpdateSender sender(1, map.locate(), 200);
  ASSERT_TRUE(sender.Send(0, Updates(1, 2), 5000).ok());
  // `late` joins after the first batch: the next one's prev (2) is ahead of it.
  map.Set({a.target(), late.target()});
  auto found = sender.Send(0, Updates(3, 2), 5000);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(a.applied(), [] {
    auto v = Updates(1, 2);
    auto w = Updates(3, 2);
    v.insert(v.end(), w.begin(), w.end());
    return v;
  }());
  EXPECT_TRUE(late.applied().empty());
  EXPECT_EQ(late.behind(), 1);
  EXPECT_EQ(sender.behind_answers(), 1u);
  // With only the behind replica, the updates are not confirmed.
  map.Set({late.target()});
  auto alone = sender.Send(0, Updates(5, 1), 5000);
  EXPECT_EQ(alone.status().code(), StatusCode::kUnavailable) << alone.status().ToString();
  EXPECT_NE(alone.status().message().find("catching up"), std::string::npos);
}

TEST(UpdateChannelTest, NoReplicaFailsUnavailableAndTheLaneGoesOn) {
  Map map;
  UpdateSender sender(1, map.locate(), 100);
  const auto t0 = std::chrono::steady_clock::now();
  auto none = sender.Send(0, Updates(1, 1), 5000);
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("no live replica"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // A replica that comes back with what it had (nothing) is behind: prev is now 1.
  Replica a("a");
  map.Set({a.target()});
  auto behind = sender.Send(0, Updates(2, 1), 5000);
  EXPECT_EQ(behind.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.behind(), 1);
  // One that had applied id 1 (from the feed) takes the next batch.
  Replica b("b", 2);
  map.Set({b.target()});
  EXPECT_TRUE(sender.Send(0, Updates(3, 1), 5000).ok());
  EXPECT_EQ(b.applied(), Updates(3, 1));
}

TEST(UpdateChannelTest, AReplicaThatLeavesTheMapIsNotWaitedFor) {
  Replica a("a"), dead("dead");
  Map map;
  map.Set({a.target(), dead.target()});
  UpdateSender sender(1, map.locate(), 100);
  ASSERT_TRUE(sender.Send(0, Updates(1, 1), 5000).ok());
  dead.Stop();  // killed: no answers, until its lease expires and it leaves the map
  auto reply = sender.Post(0, Updates(2, 1));
  ASSERT_TRUE(reply.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(reply->wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "a registered replica is waited for";
  map.Set({a.target()});
  auto found =
      UpdateSender::Await(&*reply, 0, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(a.applied().size(), 2u);
}

std::string TempDir() {
  char dir[] = "/tmp/zipg_fence_test.XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return dir;
}

TEST(UpdateChannelTest, AnOldLeaderIsFencedOnceANewerOneReachedTheShard) {
  const std::string dir = TempDir();
  auto fence = Fence::Open(dir + "/fence.json");
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  auto replica = std::make_unique<Replica>("a", 0, fence->get());
  Map map;
  map.Set({replica->target()});
  UpdateSender old_leader(1, map.locate(), 200);
  old_leader.SetEpoch(7);
  ASSERT_TRUE(old_leader.Send(0, Updates(1, 2), 5000).ok());
  UpdateSender new_leader(1, map.locate(), 200);
  new_leader.SetEpoch(9);
  new_leader.SetPrev(0, 2);
  ASSERT_TRUE(new_leader.Send(0, Updates(3, 1), 5000).ok());
  EXPECT_EQ((*fence)->epoch(0), 9u);

  // The old leader wakes up: its batch is refused whole, and it refuses further writes itself.
  old_leader.SetPrev(0, 2);
  auto late = old_leader.Send(0, Updates(4, 2), 5000);
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("fenced"), std::string::npos) << late.status().message();
  EXPECT_TRUE(old_leader.fenced());
  EXPECT_FALSE(new_leader.fenced());
  EXPECT_EQ(replica->applied().size(), 3u);
  EXPECT_EQ(replica->fenced_batches(), 1u);
  auto post = old_leader.Post(0, Updates(6, 1));
  EXPECT_EQ(post.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(replica->fenced_batches(), 1u);  // refused before sending
  // The same epoch as the newest is admitted.
  ASSERT_TRUE(new_leader.Send(0, Updates(4, 1), 5000).ok());
  EXPECT_EQ(replica->applied().size(), 4u);

  // After the shard's restart, the epoch it had seen still holds.
  replica.reset();
  fence->reset();
  auto reopened = Fence::Open(dir + "/fence.json");
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->epoch(0), 9u);
  EXPECT_EQ((*reopened)->epoch(1), 0u);
  Replica again("a", 4, reopened->get());
  map.Set({again.target()});
  UpdateSender older(1, map.locate(), 200);
  older.SetEpoch(8);
  older.SetPrev(0, 4);
  EXPECT_EQ(older.Send(0, Updates(5, 1), 5000).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(again.applied().empty());
  UpdateSender newer(1, map.locate(), 200);
  newer.SetEpoch(10);
  newer.SetPrev(0, 4);
  ASSERT_TRUE(newer.Send(0, Updates(5, 1), 5000).ok());
  EXPECT_EQ(again.applied().size(), 1u);
  EXPECT_EQ((*reopened)->epoch(0), 10u);
  std::filesystem::remove_all(dir);
}

// Every admitted request names its sender before its committed id or its batch is taken (the
// stand-in notes each change of sender), and a fenced one does not: the shard server rolls back
// its uncommitted updates when the sender changes (ServerGraph::NoteSender;
// docs/write-pipeline.md, "Provisional pointers").
TEST(UpdateChannelTest, ANewSenderIsAnnouncedBeforeItsCommitsAndBatches) {
  const std::string dir = TempDir();
  auto fence = Fence::Open(dir + "/fence.json");
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  Replica replica("a", 0, fence->get());
  Map map;
  map.Set({replica.target()});
  auto without_commits = [&] {
    std::vector<std::string> out;
    for (const std::string& e : replica.events()) {
      if (e != "commit") out.push_back(e);
    }
    return out;
  };
  UpdateSender first(1, map.locate(), 200);
  first.SetEpoch(7);
  ASSERT_TRUE(first.Send(0, Updates(1, 2), 5000).ok());
  ASSERT_TRUE(first.Send(0, Updates(3, 1), 5000).ok());
  first.SetApplied(3);
  EXPECT_EQ(replica.AwaitCommitted(3), 3u);
  EXPECT_EQ(without_commits(), (std::vector<std::string>{"sender", "apply 1", "apply 3"}));

  auto second = std::make_unique<UpdateSender>(1, map.locate(), 200);
  second->SetEpoch(9);
  second->SetPrev(0, 3);
  ASSERT_TRUE(second->Send(0, Updates(4, 1), 5000).ok());
  first.SetPrev(0, 4);
  EXPECT_EQ(first.Send(0, Updates(5, 1), 5000).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(second->Send(0, Updates(5, 1), 5000).ok());
  EXPECT_EQ(without_commits(), (std::vector<std::string>{"sender", "apply 1", "apply 3", "sender",
                                                         "apply 4", "apply 5"}));

  // A third sender whose first request is a commit notice: announced before the commit.
  second.reset();
  const size_t before = replica.events().size();
  UpdateSender third(1, map.locate(), 200);
  third.SetEpoch(9);
  third.SetPrev(0, 5);
  third.SetApplied(6);
  EXPECT_EQ(replica.AwaitCommitted(6), 6u);
  const std::vector<std::string> events = replica.events();
  ASSERT_GE(events.size(), before + 2);
  EXPECT_EQ(events[before], "sender");
  EXPECT_EQ(events[before + 1], "commit");
  EXPECT_EQ(std::count(events.begin(), events.end(), "sender"), 3);
  std::filesystem::remove_all(dir);
}

TEST(FenceTest, ABrokenFileIsRefusedWithItsName) {
  const std::string dir = TempDir();
  for (const char* text : {"[1, 2]", "{\"x\": 3}", "{\"0\": -1}", "not json"}) {
    std::ofstream(dir + "/fence.json") << text;
    auto fence = Fence::Open(dir + "/fence.json");
    ASSERT_FALSE(fence.ok()) << text;
    EXPECT_EQ(fence.status().code(), StatusCode::kCorruption) << text;
    EXPECT_NE(fence.status().message().find(dir + "/fence.json"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

// With the cluster's TLS certificates, updates flow; a sender with a certificate of another CA,
// or none, gets no answer at all, and the receiver counts the refused handshakes.
TEST(UpdateChannelTest, TlsLetsOnlyHoldersOfTheClusterCertificateIn) {
  signal(SIGPIPE, SIG_IGN);  // as zipg's main does (rpc/tls.h)
  rpc::TlsFiles files;
  const rpc::FrameParties parties(files);
  ASSERT_TRUE(parties.ok) << "could not make certificates with the openssl command";
  std::atomic<int> applied{0};
  auto receiver = UpdateReceiver::Start(
      "127.0.0.1", 0,
      [&](uint32_t, uint64_t, const std::vector<Update>& batch) {
        applied += static_cast<int>(batch.size());
        return StatusOr<PushAnswer>(PushAnswer{false, std::vector<bool>(batch.size(), true)});
      },
      parties.server);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  const UpdateTarget target{"r", (*receiver)->endpoint()};
  auto locate = [target](uint32_t) { return std::vector<UpdateTarget>{target}; };
  {
    UpdateSender sender(1, locate, 200, parties.member);
    auto found = sender.Send(0, Updates(1, 2), 5000);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, std::vector<bool>(2, true));
  }
  EXPECT_EQ(applied.load(), 2);
  for (const rpc::FrameSecurity& security : {parties.stranger, rpc::FrameSecurity{}}) {
    UpdateSender outsider(1, locate, 200, security);
    auto found = outsider.Send(0, Updates(3, 1), 1000);
    EXPECT_EQ(found.status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(applied.load(), 2) << "an outsider's update was applied";
  EXPECT_GE((*receiver)->refused_clients(), 2u);
}

}  // namespace
}  // namespace zipg::shard
