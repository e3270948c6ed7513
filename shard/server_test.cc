// The shard server's per-shard serving (docs/cluster-changes.md, step 2): a shard added with
// Serve answers reads only once it serves, and then as the store does (the embedded Graph over the
// same files is the reference); a push that finds one shard behind stops that shard alone; the
// refusals of Serve and Unserve; and shards added while reads and pushes run (for TSan). A split
// (step 4) prepared and switched while reads and pushes run (for TSan). A read at a snapshot this
// replica does not reach leaves the router time to ask another one. A cross-shard step (a filter
// of neighbors, a traversal's expansion) asks a serving replica for a shard still
// catching up here.

#include "shard/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cluster/membership.h"
#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/partition.h"
#include "rpc/server.h"
#include "util/call_deadline.h"
#include "util/scratch_dir.h"
#include "util/snapshot.h"

namespace zipg::shard {
namespace {

constexpr uint32_t kShards = 3;
constexpr int64_t kNodes = 300;

class ServerGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(11);
    graph::InputGraph input;
    input.node_property_names = {"name"};
    for (int64_t id = 0; id < kNodes; ++id) {
      input.nodes.push_back({id, {{0, "n" + std::to_string(rng() % 1000)}}});
      for (int k = 0; k < 3; ++k) {
        input.edges.push_back({id, static_cast<int64_t>(rng() % kNodes), 1, k, {}});
      }
    }
    graph::CompressOptions options;
    options.shards = kShards;
    ASSERT_TRUE(graph::CompressGraph(input, store(), options, {}, nullptr).ok());
    auto reference = Graph::Open(store());
    ASSERT_TRUE(reference.ok());
    reference_ = std::move(*reference);
  }

  std::string store() const { return dir_.File("store"); }

  std::unique_ptr<ServerGraph> Open(std::vector<uint32_t> shards) {
    auto g = ServerGraph::Open(store(), shards, {}, nullptr, &pools_, dir_.File("updates"));
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? std::move(*g) : nullptr;
  }

  // A node of shard `s`.
  static int64_t NodeOf(uint32_t s) {
    for (int64_t id = 0; id < kNodes; ++id) {
      if (ShardOf(id, kShards) == s) return id;
    }
    return -1;
  }

  // Whether `g` answers obj_get(id) as the reference does (an error is not an answer).
  ::testing::AssertionResult AnswersAsTheStore(ServerGraph& g, int64_t id) {
    auto got = g.ObjGet(id);
    if (!got.ok()) return ::testing::AssertionFailure() << got.status().ToString();
    auto want = reference_->ObjGet(id);
    if (!want.ok() || *got != *want) {
      return ::testing::AssertionFailure() << "node " << id << " differs from the store";
    }
    return ::testing::AssertionSuccess();
  }

  ScratchDir dir_;
  rpc::PoolSet pools_;
  std::unique_ptr<Graph> reference_;
};

TEST_F(ServerGraphTest, AnAddedShardAnswersOnlyOnceItServesAndThenAsTheStore) {
  auto g = Open({0});
  ASSERT_TRUE(g);
  int hosted_calls = 0, wakes = 0;
  g->OnHosted([&] { ++hosted_calls; });
  g->OnBehind([&] { ++wakes; });
  EXPECT_EQ(g->hosted(), std::vector<uint32_t>({0}));
  EXPECT_TRUE(g->serving());
  const int64_t on0 = NodeOf(0), on1 = NodeOf(1), on2 = NodeOf(2);
  EXPECT_EQ(g->ObjGet(on1).status().code(), StatusCode::kUnavailable);  // not served here

  ASSERT_TRUE(g->Serve(1).ok());
  EXPECT_EQ(g->hosted(), std::vector<uint32_t>({0, 1}));
  EXPECT_EQ(g->CatchingUp(), std::vector<uint32_t>({1}));
  EXPECT_FALSE(g->serving());
  EXPECT_EQ(hosted_calls, 1);
  EXPECT_EQ(wakes, 1);  // the catch-up thread is woken for it
  auto refused = g->ObjGet(on1);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("catching up"), std::string::npos);
  EXPECT_TRUE(AnswersAsTheStore(*g, on0));  // the other shard serves on

  ASSERT_TRUE(g->StartServing(1, g->refused(1)));
  EXPECT_TRUE(g->serving());
  EXPECT_TRUE(AnswersAsTheStore(*g, on1));
  for (int64_t id = 0; id < kNodes; ++id) {
    if (ShardOf(id, kShards) != 2) {
      EXPECT_TRUE(AnswersAsTheStore(*g, id)) << id;
    }
  }
  EXPECT_EQ(g->ObjGet(on2).status().code(), StatusCode::kUnavailable);

  // Serving it already: nothing happens.
  ASSERT_TRUE(g->Serve(1).ok());
  EXPECT_EQ(hosted_calls, 1);
  EXPECT_EQ(g->Serve(kShards).code(), StatusCode::kInvalidArgument);
}

TEST_F(ServerGraphTest, APushThatFindsOneShardBehindStopsThatShardAlone) {
  auto g = Open({0, 1});
  ASSERT_TRUE(g);
  int wakes = 0;
  g->OnBehind([&] { ++wakes; });
  const uint64_t last = g->LastId(1);
  auto behind = g->ApplyPush(1, last + 5, {});
  ASSERT_TRUE(behind.ok());
  EXPECT_TRUE(behind->behind);
  EXPECT_EQ(g->refused(1), 1u);
  EXPECT_EQ(g->refused(0), 0u);
  EXPECT_EQ(g->refused(), 1u);
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(g->CatchingUp(), std::vector<uint32_t>({1}));
  EXPECT_TRUE(AnswersAsTheStore(*g, NodeOf(0)));
  EXPECT_EQ(g->ObjGet(NodeOf(1)).status().code(), StatusCode::kUnavailable);
  // A push refused since the catch-up began keeps it from serving; a later start works.
  EXPECT_FALSE(g->StartServing(1, 0));
  EXPECT_TRUE(g->StartServing(1, 1));
  EXPECT_TRUE(AnswersAsTheStore(*g, NodeOf(1)));
  // A push in order applies, and refuses nothing.
  auto fine = g->ApplyPush(0, g->LastId(0), {});
  ASSERT_TRUE(fine.ok());
  EXPECT_FALSE(fine->behind);
  EXPECT_EQ(g->refused(), 1u);
}

// Provisional pointers (docs/write-pipeline.md): when the LogStore sender changes (NoteSender),
// a push not yet committed is undone and a committed one stays, while the first sender noted and
// the same one again undo nothing; the ids given back are applied again when reused by other
// updates, and only committed pushes reach the delta file (a reopened server has them and
// nothing else).
TEST_F(ServerGraphTest, AnUncommittedPushIsRolledBackAndItsIdsAreReused) {
  // Three nodes of shard 0 with base edges: one edge delete committed, a node delete left
  // uncommitted, and another edge delete that reuses the node delete's id.
  std::vector<int64_t> nodes;
  for (int64_t id = 0; id < kNodes && nodes.size() < 3; ++id) {
    if (ShardOf(id, kShards) != 0) continue;
    auto edges = reference_->AssocRange(id, 1, 0, 100);
    ASSERT_TRUE(edges.ok());
    if (!edges->empty()) nodes.push_back(id);
  }
  ASSERT_EQ(nodes.size(), 3u);
  const int64_t a = nodes[0], b = nodes[1], c = nodes[2];
  // The store's edges of `id`, less the one to `gone` (-1: none).
  auto want_edges = [&](int64_t id, int64_t gone) {
    auto edges = reference_->AssocRange(id, 1, 0, 100);
    EXPECT_TRUE(edges.ok());
    std::vector<Edge> out;
    for (const Edge& e : *edges) {
      if (e.dst != gone) out.push_back(e);
    }
    return out;
  };
  const int64_t a_dst = (*reference_->AssocRange(a, 1, 0, 1))[0].dst;
  const int64_t c_dst = (*reference_->AssocRange(c, 1, 0, 1))[0].dst;
  auto check = [&](ServerGraph& g, bool b_deleted, bool c_deleted, const std::string& what) {
    SCOPED_TRACE(what);
    auto got_a = g.AssocRange(a, 1, 0, 100);
    ASSERT_TRUE(got_a.ok()) << got_a.status().ToString();
    EXPECT_EQ(*got_a, want_edges(a, a_dst));
    auto got_c = g.AssocRange(c, 1, 0, 100);
    ASSERT_TRUE(got_c.ok());
    EXPECT_EQ(*got_c, want_edges(c, c_deleted ? c_dst : -1));
    auto got_b = g.ObjGet(b);
    ASSERT_TRUE(got_b.ok());
    if (b_deleted) {
      EXPECT_FALSE(got_b->has_value());
    } else {
      EXPECT_TRUE(AnswersAsTheStore(g, b));
    }
  };

  auto g = Open({0, 1});
  ASSERT_TRUE(g);
  const uint64_t first = g->LastId(0) + 1;
  constexpr uint64_t kSender = 0x5e1, kNext = 0x5e2;
  auto noted = g->NoteSender(0, kSender);  // the first: nothing came from another one
  ASSERT_TRUE(noted.ok());
  EXPECT_EQ(*noted, 0u);
  using engine::UpdateOp;
  auto push = [&](ServerGraph& on, engine::Update u) {
    auto r = on.ApplyPush(0, on.LastId(0), {u});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_FALSE(r->behind);
    EXPECT_EQ(r->found, std::vector<bool>{true});
  };
  push(*g, {UpdateOp::kDeleteEdge, a, 1, a_dst, 0, 0, first});
  g->ApplyCommit(0, 0, first);
  push(*g, {UpdateOp::kDeleteNode, b, 0, 0, 0, 0, first + 1});
  check(*g, /*b_deleted=*/true, /*c_deleted=*/false, "applied");
  EXPECT_EQ(g->LastId(0), first + 1);

  auto same = g->NoteSender(0, kSender);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, 0u);
  check(*g, true, false, "the same sender");
  auto undone = g->NoteSender(0, kNext);
  ASSERT_TRUE(undone.ok()) << undone.status().ToString();
  EXPECT_EQ(*undone, 1u);
  EXPECT_EQ(g->LastId(0), first);
  EXPECT_EQ(g->CommitStats()["0"]["rolled_back"], 1u);
  check(*g, false, false, "rolled back");
  auto again = g->NoteSender(0, kSender);  // back to the first: nothing left to undo
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0u);
  // A feed read from another sender than the pushes' (a deposed leader) applies nothing.
  const engine::Update feed_update{UpdateOp::kDeleteEdge, c, 1, c_dst, 0, 0, first + 1};
  EXPECT_EQ(g->ApplyFeed(0, {feed_update}, kNext).code(), StatusCode::kUnavailable);
  EXPECT_EQ(g->LastId(0), first);
  check(*g, false, false, "a feed read of another sender refused");

  // The id comes again with another update (a LogStore started again numbers from its log).
  push(*g, {UpdateOp::kDeleteEdge, c, 1, c_dst, 0, 0, first + 1});
  check(*g, false, true, "the id reused");
  g->ApplyCommit(0, 0, first + 1);
  // One more push, never committed: a restart does not keep it.
  push(*g, {UpdateOp::kDeleteNode, b, 0, 0, 0, 0, first + 2});
  g.reset();
  auto reopened = Open({0, 1});
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->LastId(0), first + 1);
  check(*reopened, false, true, "reopened");
}

// A read at a snapshot this replica has not reached (cut off from the commit notices) waits for
// it until the call's deadline, or only half of the time left while another replica serves the
// shard, so that the router's retry there (DEADLINE_EXCEEDED is retried elsewhere) fits.
TEST_F(ServerGraphTest, ASnapshotNotReachedWaitsHalfTheCallWhileAnotherReplicaServes) {
  const auto member = [](const std::string& name) {
    cluster::MemberInfo m;
    m.name = name;
    m.role = "shard";
    m.num_shards = kShards;
    m.shards = {0};
    return m;
  };
  for (const bool other : {false, true}) {
    std::vector<cluster::MemberInfo> members = {member("self")};
    if (other) members.push_back(member("other"));
    auto view = cluster::ClusterView::Fixed(cluster::ShardMap::Build(members, 1));
    auto opened = ServerGraph::Open(store(), {0}, {}, view.get(), &pools_,
                                    dir_.File(other ? "updates-b" : "updates-a"));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    ServerGraph& g = **opened;
    g.SetSelf("self");
    const int64_t node = NodeOf(0);
    const uint64_t at = g.LastId(0) + 10;  // committed nowhere yet
    {
      ReadAt::Scope snapshot(at);
      const auto start = std::chrono::steady_clock::now();
      CallDeadline::Scope deadline(start + std::chrono::seconds(2));
      auto got = g.ObjGet(node);
      const auto waited = std::chrono::steady_clock::now() - start;
      EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded) << got.status().ToString();
      EXPECT_NE(got.status().message().find("not reached yet by this replica"), std::string::npos);
      if (other) {
        EXPECT_GE(waited, std::chrono::milliseconds(1000)) << "half of the call's time";
        EXPECT_LT(waited, std::chrono::milliseconds(1900)) << "the rest is the router's";
      } else {
        EXPECT_GE(waited, std::chrono::milliseconds(1950)) << "the whole call's time";
      }
    }
    // Once a notice commits it, the read at it answers as the store (no update came meanwhile).
    g.ApplyCommit(0, 0, at);
    ReadAt::Scope snapshot(at);
    CallDeadline::Scope deadline(std::chrono::steady_clock::now() + std::chrono::seconds(2));
    EXPECT_TRUE(AnswersAsTheStore(g, node)) << (other ? "with" : "without") << " another replica";
  }
}

// Found by deploy_test's long variant: while a host's copies were re-made elsewhere, a
// get_neighbor_ids with a filter reached a server that serves shard 0 and was catching up a new
// copy of shard 1; it checked the neighbors on shard 1 on that copy (UNAVAILABLE), though another
// server served shard 1. Every cross-shard step now asks a serving replica for such a shard.
TEST_F(ServerGraphTest, ACrossShardStepAsksAServingReplicaForAShardCatchingUpHere) {
  // "other" serves shards 1 and 2 over RPC.
  auto other = ServerGraph::Open(store(), {1, 2}, {}, nullptr, &pools_, dir_.File("updates-o"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto handler = std::make_shared<ShardHandler>(
      other->get(), []() -> StatusOr<std::string> { return std::string("{}"); });
  auto server = rpc::RpcServer::Start(std::make_shared<rpc::ShardServiceProcessor>(handler), {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();

  // "self" serves shard 0 and catches up a new copy of shard 1.
  const auto member = [](const std::string& name, std::vector<uint32_t> shards, int port) {
    cluster::MemberInfo m;
    m.name = name;
    m.role = "shard";
    m.num_shards = kShards;
    m.shards = std::move(shards);
    m.endpoint = {"127.0.0.1", port};
    return m;
  };
  std::vector<cluster::MemberInfo> members = {member("self", {0, 1}, 1),
                                              member("other", {1, 2}, (*server)->port())};
  members[0].catching_up = {1};
  auto view = cluster::ClusterView::Fixed(cluster::ShardMap::Build(members, 1));
  auto self = ServerGraph::Open(store(), {0}, {}, view.get(), &pools_, dir_.File("updates-s"));
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  ServerGraph& g = **self;
  g.SetSelf("self");
  ASSERT_TRUE(g.Serve(1).ok());
  ASSERT_EQ(g.CatchingUp(), std::vector<uint32_t>({1}));

  int asked = 0;
  for (int64_t id = 0; id < kNodes; ++id) {
    if (ShardOf(id, kShards) != 0) continue;
    // Its neighbors (on every shard) with the name of node `id`'s first neighbor.
    auto all = reference_->GetNeighborIds(id, std::nullopt, {});
    ASSERT_TRUE(all.ok());
    if (all->empty()) continue;
    auto first = reference_->GetNodeProperty(all->front(), nullptr);
    ASSERT_TRUE(first.ok() && first->has_value());
    ASSERT_EQ((**first).size(), 1u);
    const Properties filter = {(**first)[0]};
    auto want = reference_->GetNeighborIds(id, std::nullopt, filter);
    auto got = g.GetNeighborIds(id, std::nullopt, filter);
    ASSERT_TRUE(got.ok()) << "node " << id << ": " << got.status().ToString();
    EXPECT_EQ(*got, *want) << "node " << id;

    auto bfs_want = reference_->Bfs(id, std::nullopt, 3, 1000);
    auto bfs_got = g.Bfs(id, std::nullopt, 3, 1000);
    ASSERT_TRUE(bfs_got.ok()) << "node " << id << ": " << bfs_got.status().ToString();
    EXPECT_EQ(*bfs_got, *bfs_want) << "node " << id;
    ++asked;
  }
  EXPECT_GT(asked, 50);
  EXPECT_EQ(g.ObjGet(NodeOf(1)).status().code(), StatusCode::kUnavailable);  // still catching up
}

TEST_F(ServerGraphTest, UnserveNeverLeavesAShardWithoutACopy) {
  auto g = Open({0, 1});
  ASSERT_TRUE(g);
  // No cluster view: no other member is known to serve either shard.
  Status s = g->Unserve(1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no other member serves shard 1"), std::string::npos) << s.message();
  EXPECT_EQ(g->hosted(), std::vector<uint32_t>({0, 1}));
  EXPECT_TRUE(AnswersAsTheStore(*g, NodeOf(1)));
  EXPECT_TRUE(g->Unserve(2).ok());  // not served here: nothing to do

  // Nor its last shard (a drained server may have none, once another serves it).
  auto alone = Open({2});
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->Unserve(2).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(alone->hosted(), std::vector<uint32_t>({2}));
}

// Shards added while readers read every shard and a pusher pushes to the first: every answer is
// the store's or UNAVAILABLE (a shard not served, or not serving yet), and once a shard serves,
// its reads answer.
TEST_F(ServerGraphTest, ShardsAddedWhileReadsAndPushesRun) {
  auto g = Open({0});
  ASSERT_TRUE(g);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> answered{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      while (!stop.load()) {
        const int64_t id = static_cast<int64_t>(rng() % kNodes);
        auto got = g->ObjGet(id);
        if (got.ok()) {
          ++answered;
          if (*got != *reference_->ObjGet(id)) ++wrong;
        } else if (got.status().code() != StatusCode::kUnavailable) {
          ++wrong;
        }
        (void)g->hosted();
        (void)g->CatchingUp();
      }
    });
  }
  std::thread pusher([&] {
    while (!stop.load()) {
      auto r = g->ApplyPush(0, g->LastId(0), {});
      if (!r.ok() || r->behind) ++wrong;
      g->ApplyCommit(0, 0, g->LastId(0));
    }
  });
  for (uint32_t s = 1; s < kShards; ++s) {
    ASSERT_TRUE(g->Serve(s).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(g->StartServing(s, g->refused(s)));
    EXPECT_TRUE(AnswersAsTheStore(*g, NodeOf(s)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  for (auto& t : readers) t.join();
  pusher.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(answered.load(), 0u);
  EXPECT_EQ(g->hosted(), std::vector<uint32_t>({0, 1, 2}));
  EXPECT_TRUE(g->serving());
}

// A split while readers count edges and a pusher deletes them (docs/cluster-changes.md, step 4):
// the halves are prepared under the pushes, the marks (one id on every lane, as the LogStore
// sends them) switch the server to 6 shards, and pushes go on in the new numbering. No read
// fails or answers outside what the deletes allow; at the end, and after a reopen from
// layout.json, every count is the store's less the deletes.
TEST_F(ServerGraphTest, ASplitSwitchesWhileReadsAndPushesRun) {
  auto g = Open({0, 1, 2});
  ASSERT_TRUE(g);
  std::map<int64_t, std::vector<int64_t>> live;  // src -> its base dsts not deleted yet
  std::map<int64_t, int64_t> initial;
  for (int64_t id = 0; id < kNodes; ++id) {
    auto edges = reference_->AssocRange(id, 1, 0, 1000);
    ASSERT_TRUE(edges.ok());
    for (const Edge& e : *edges) live[id].push_back(e.dst);
    initial[id] = static_cast<int64_t>(edges->size());
  }
  std::mutex mu;  // guards live, next_id, count
  uint64_t next_id = 1;
  uint32_t count = kShards;
  std::atomic<bool> stop{false}, pause{false};
  std::atomic<int> paused{0};
  std::atomic<uint64_t> reads{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      while (!stop.load()) {
        const int64_t id = static_cast<int64_t>(rng() % kNodes);
        auto got = g->AssocCount(id, 1);
        ++reads;
        if (!got.ok() || *got > initial[id]) ++wrong;
        (void)g->hosted();
      }
    });
  }
  // A searcher asks every shard as an aggregator does, numbered by the old count or (once this
  // server switched) the new one: the answer is the store's (the pushes delete edges only).
  std::atomic<uint64_t> searches{0};
  readers.emplace_back([&] {
    std::mt19937_64 rng(300);
    while (!stop.load()) {
      NodeSearch q;
      q.pattern = "n" + std::to_string(rng() % 10);
      auto want = reference_->SearchNodeIds(q);
      const uint32_t by = (rng() % 2 == 0) ? kShards : g->num_shards();
      std::vector<int32_t> all;
      for (uint32_t s = 0; s < by; ++s) all.push_back(static_cast<int32_t>(s));
      auto got = g->LocalSearchNodeIds(all, q, by);
      ++searches;
      if (!want.ok() || !got.ok() || *got != want->ids) {
        ++wrong;
        ADD_FAILURE() << "search " << q.pattern << " by " << by << ": "
                      << (got.ok() ? std::to_string(got->size()) + " ids" : got.status().ToString())
                      << ", want " << (want.ok() ? want->ids.size() : 0);
      }
    }
  });
  std::thread pusher([&] {
    std::mt19937_64 rng(7);
    while (!stop.load()) {
      if (pause.load()) {  // the LogStore's commit pause around the switch
        paused = 1;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      paused = 0;
      std::lock_guard lock(mu);
      const int64_t src = static_cast<int64_t>(rng() % kNodes);
      auto& dsts = live[src];
      if (dsts.empty()) continue;
      const int64_t dst = dsts.back();
      dsts.pop_back();
      engine::Update u{engine::UpdateOp::kDeleteEdge, src, 1, dst, 0, 0, next_id++};
      const uint32_t shard = ShardOf(src, count);
      auto r = g->ApplyPush(shard, g->LastId(shard), {u});
      if (!r.ok() || r->behind) ++wrong;
      g->ApplyCommit(shard, 0, u.id);  // the LogStore's commit notice
    }
  });
  auto finish = [&] {
    stop = true;
    for (auto& t : readers) t.join();
    pusher.join();
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  auto prepared = g->PrepareSplit(2 * kShards);
  if (!prepared.ok()) finish();
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ(g->num_shards(), kShards);  // prepared, not switched
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  pause = true;
  while (paused.load() == 0) std::this_thread::yield();
  uint64_t mark_id = 0;
  {
    std::lock_guard lock(mu);
    const engine::Update mark{engine::UpdateOp::kLayout, 2 * kShards, 0, 0, 0, 0, next_id++};
    mark_id = mark.id;
    for (uint32_t s = 0; s < kShards; ++s) {
      auto r = g->ApplyPush(s, g->LastId(s), {mark});
      if (!r.ok() || r->behind) ++wrong;
      if (s == 0) {
        // Every update up to the mark is committed (the LogStore posts it with no write in
        // flight): a read at it answers before the server switches, with no commit notice.
        ReadAt::Scope at(mark.id);
        CallDeadline::Scope deadline(std::chrono::steady_clock::now() +
                                     std::chrono::milliseconds(500));
        auto got = g->ObjGet(NodeOf(0));
        EXPECT_TRUE(got.ok()) << "before the switch: " << got.status().ToString();
      }
    }
    count = 2 * kShards;
  }
  for (int64_t id = 0; id < kNodes; ++id) {  // and so does every half after it
    ReadAt::Scope at(mark_id);
    CallDeadline::Scope deadline(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
    auto got = g->ObjGet(id);
    ASSERT_TRUE(got.ok()) << "node " << id << " at the mark: " << got.status().ToString();
  }
  EXPECT_EQ(g->num_shards(), 2 * kShards);
  EXPECT_EQ(g->hosted(), std::vector<uint32_t>({0, 1, 2, 3, 4, 5}));
  pause = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  finish();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(searches.load(), 0u);
  auto counts_right = [&](ServerGraph& graph, const std::string& when) {
    for (int64_t id = 0; id < kNodes; ++id) {
      auto got = graph.AssocCount(id, 1);
      ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
      ASSERT_EQ(*got, static_cast<int64_t>(live[id].size())) << when << ": node " << id;
    }
  };
  counts_right(*g, "after the switch");
  if (HasFatalFailure()) return;
  g.reset();
  auto reopened = Open({0, 1, 2});  // the command line of before the split
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->num_shards(), 2 * kShards);
  EXPECT_EQ(reopened->hosted(), std::vector<uint32_t>({0, 1, 2, 3, 4, 5}));
  counts_right(*reopened, "reopened");
}

}  // namespace
}  // namespace zipg::shard
