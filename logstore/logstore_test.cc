// LogStore commit groups, in-process: concurrent writers to the same keys must leave a state that
// recovery rebuilds exactly (log order = apply order), and a freeze in the middle of a stream of
// writes must lose nothing. The base shard is a stand-in UpdateReceiver that owns no data (every
// update finds nothing there); the real shard side is covered by tests/writes_test.py.

#include "logstore/logstore.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <latch>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "graph/memory_plan.h"
#include "graph/partition.h"
#include "shard/fence.h"
#include "shard/update_channel.h"
#include "util/call_deadline.h"
#include "util/scratch_dir.h"
#include "util/snapshot.h"

namespace zipg::logstore {
namespace {

using engine::UpdateOp;
using json = nlohmann::json;

// A LogStore on `dir` whose one base shard accepts every update and holds nothing. `reader`
// answers the conditional writes' checks (none: they must not be used).
class Harness {
 public:
  // `base`: the base shard's update endpoint, if not this harness's own.
  explicit Harness(const std::string& dir, GraphApi* reader = nullptr,
                   uint64_t compaction_memory_bytes = 0,
                   const std::function<void(LogStoreOptions*)>& adjust = {},
                   const std::string& base = "") {
    std::string endpoint = base;
    if (endpoint.empty()) {
      auto receiver = shard::UpdateReceiver::Start(
          "127.0.0.1", 0, [this](uint32_t, uint64_t, const std::vector<engine::Update>& updates) {
            received_ += updates.size();
            return StatusOr<shard::PushAnswer>(
                shard::PushAnswer{false, std::vector<bool>(updates.size(), false)});
          });
      EXPECT_TRUE(receiver.ok()) << receiver.status().ToString();
      receiver_ = std::move(*receiver);
      endpoint = receiver_->endpoint();
    }
    sender_ = std::make_unique<shard::UpdateSender>(1, [endpoint](uint32_t) {
      return std::vector<shard::UpdateTarget>{{"base", endpoint}};
    });
    LogStoreOptions options;
    options.dir = dir;
    options.memtable_bytes = 0;
    options.compaction_memory_bytes = compaction_memory_bytes;
    if (adjust) adjust(&options);
    auto store = LogStore::Open(options, reader, sender_.get(), [](std::vector<int64_t>) {});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  LogStore& store() { return *store_; }
  uint64_t received() const { return received_.load(); }

 private:
  std::atomic<uint64_t> received_{0};
  std::unique_ptr<shard::UpdateReceiver> receiver_;
  std::unique_ptr<shard::UpdateSender> sender_;
  std::unique_ptr<LogStore> store_;
};

// Contract order within a type; types ascending.
bool ByTypeNewestFirst(const Edge& a, const Edge& b) {
  if (a.type != b.type) return a.type < b.type;
  return NewestFirst(a, b);
}

// Every live edge of `srcs` in the LogStore's live generations and log shards, sorted by
// ByTypeNewestFirst (Fragment returns them unmerged).
// Every generation so far: a read at a snapshot names the generation that held a key then (the
// base shard's delta at the snapshot), which may be merged away, or frozen, since.
std::vector<int64_t> AllGenerations(LogStore& store) {
  std::vector<int64_t> generations;
  const int64_t live = store.StatusJson()["generation"].get<int64_t>();
  for (int64_t g = 1; g <= live; ++g) generations.push_back(g);
  return generations;
}

std::map<int64_t, std::vector<Edge>> Snapshot(LogStore& store, const std::vector<int64_t>& srcs) {
  const std::vector<int64_t> generations = AllGenerations(store);
  std::map<int64_t, std::vector<Edge>> out;
  for (int64_t src : srcs) {
    auto data = store.Fragment(src, /*any_type=*/true, 0, generations);
    EXPECT_TRUE(data.ok()) << data.status().ToString();
    if (!data.ok()) continue;
    std::sort(data->edges.begin(), data->edges.end(), ByTypeNewestFirst);
    out[src] = data->edges;
  }
  return out;
}

void WaitForCompaction(LogStore& store, int64_t generation) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto status = store.StatusJson();
    ASSERT_FALSE(status.contains("last_error")) << status.dump();
    const auto& last = status["last_compaction"];
    if (!last.is_null() && last.value("generation", int64_t{0}) >= generation) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "compaction of generation " << generation << " did not finish";
}

// A log shipping receiver on `port` (0: any) that hands every request to `store` (a standby).
std::unique_ptr<ShipReceiver> ServeShipping(LogStore* store, int port = 0) {
  auto r = ShipReceiver::Start("127.0.0.1", port,
                               [store](const ShipRequest& q) { return store->ApplyShipped(q); });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

// True once `leader` says its standby is in sync, false after `seconds`.
bool InSyncWithin(LogStore& leader, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (leader.StatusJson()["standby"]["sync"] != "in_sync") {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// 16 writers race on a few keys of two hot nodes (upserts with distinct versions, deletes). The
// state after the race must be exactly what recovery rebuilds from the log: two writes of one key
// in one group, or in consecutive groups, were applied in the order they were logged.
TEST(LogStoreTest, RacingWritersLeaveTheStateRecoveryRebuilds) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  const std::vector<int64_t> hot = {7, 1031};  // 1031 % 1024 == 7: the same stripe as node 7
  constexpr int kThreads = 16;
  constexpr int kOps = 300;
  std::map<int64_t, std::vector<Edge>> before;
  uint64_t writes = 0, groups = 0;
  {
    Harness h(dir.path());
    std::latch start(kThreads);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
        start.arrive_and_wait();
        for (int i = 0; i < kOps; ++i) {
          const int64_t src = hot[rng() % hot.size()];
          const int64_t type = static_cast<int64_t>(rng() % 2);
          const int64_t dst = static_cast<int64_t>(rng() % 3);
          if (rng() % 5 == 0) {
            if (!h.store().AssocDelete(src, type, dst).ok()) ++failures;
          } else {
            // Equal timestamps across writers on purpose: ties order by dst, versions by props.
            Edge e{src,
                   type,
                   dst,
                   static_cast<int64_t>(rng() % 4),
                   {{"writer", std::to_string(t)}, {"op", std::to_string(i)}}};
            if (!h.store().AssocAdd(e).ok()) ++failures;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    before = Snapshot(h.store(), hot);
    const auto status = h.store().StatusJson();
    writes = status["writes"].get<uint64_t>();
    groups = status["commit"]["groups"].get<uint64_t>();
    EXPECT_EQ(h.received(), writes);  // every write's update reached the base shard once
  }
  EXPECT_EQ(writes, uint64_t{kThreads} * kOps);
  EXPECT_LT(groups, writes) << "no commit group ever held two writes";
  size_t live = 0;
  for (const auto& [src, edges] : before) {
    live += edges.size();
    std::set<std::pair<int64_t, int64_t>> keys;
    for (const Edge& e : edges) {
      EXPECT_TRUE(keys.insert({e.type, e.dst}).second)
          << "two live versions of (" << src << ", " << e.type << ", " << e.dst << ")";
    }
  }
  EXPECT_GT(live, 0u);

  Harness reopened(dir.path());
  EXPECT_EQ(Snapshot(reopened.store(), hot), before);
}

// Writers keep going while a compaction freezes the log. Each writer owns its keys, so the final
// state is known exactly: every acknowledged write is there, in the live memtable or in the new
// log shard, before and after a restart.
TEST(LogStoreTest, FreezeDuringConcurrentWritesLosesNothing) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  constexpr int kThreads = 8;
  constexpr int kOps = 400;
  std::vector<int64_t> srcs;
  for (int t = 0; t < kThreads; ++t) srcs.push_back(100 + t);
  std::map<int64_t, std::map<std::tuple<int64_t, int64_t>, Edge>> model;  // by src, (type, dst)
  {
    Harness h(dir.path());
    std::atomic<int> done{0};
    std::vector<std::map<std::tuple<int64_t, int64_t>, Edge>> mine(kThreads);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(static_cast<uint64_t>(t) + 100);
        for (int i = 0; i < kOps; ++i) {
          const int64_t type = static_cast<int64_t>(rng() % 3);
          const int64_t dst = static_cast<int64_t>(rng() % 40);
          if (rng() % 4 == 0) {
            auto deleted = h.store().AssocDelete(srcs[t], type, dst);
            if (!deleted.ok()) {
              ++failures;
            } else {
              EXPECT_EQ(*deleted, mine[t].erase({type, dst}) == 1) << "thread " << t << " op " << i;
            }
          } else {
            Edge e{srcs[t], type, dst, static_cast<int64_t>(i), {{"v", std::to_string(i)}}};
            if (!h.store().AssocAdd(e).ok()) {
              ++failures;
            } else {
              mine[t][{type, dst}] = e;
            }
          }
        }
        ++done;
      });
    }
    while (done.load() < kThreads / 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto started = h.store().Compact();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    WaitForCompaction(h.store(), 1);
    for (int t = 0; t < kThreads; ++t) model[srcs[t]] = mine[t];
    auto check = [&](LogStore& store, const char* when) {
      auto got = Snapshot(store, srcs);
      for (int64_t src : srcs) {
        std::vector<Edge> want;
        for (const auto& [key, e] : model[src]) want.push_back(e);
        std::sort(want.begin(), want.end(), ByTypeNewestFirst);
        EXPECT_EQ(got[src], want) << "node " << src << " " << when;
      }
    };
    check(h.store(), "after the compaction");
    EXPECT_EQ(h.store().LogShards(), std::vector<int64_t>{1});
  }
  Harness reopened(dir.path());
  auto got = Snapshot(reopened.store(), srcs);
  for (int64_t src : srcs) {
    std::vector<Edge> want;
    for (const auto& [key, e] : model[src]) want.push_back(e);
    std::sort(want.begin(), want.end(), ByTypeNewestFirst);
    EXPECT_EQ(got[src], want) << "node " << src << " after a restart";
  }
}

// FragmentEdges (the base shards' reads of single edges) agrees with the whole fragment, with
// the node's edges spread over a log shard (some of them deleted since, some overwritten) and the
// live memtable.
TEST(LogStoreTest, FragmentEdgesAgreeWithTheWholeFragment) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  Harness h(dir.path());
  LogStore& store = h.store();
  std::mt19937_64 rng(5);
  const std::vector<int64_t> srcs = {3, 4};
  auto write_some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Edge e{srcs[rng() % 2],
             static_cast<int64_t>(rng() % 2),
             static_cast<int64_t>(rng() % 60),
             static_cast<int64_t>(rng() % 20),
             {{"i", std::to_string(rng() % 1000)}}};
      ASSERT_TRUE(store.AssocAdd(e).ok());
    }
  };
  write_some(300);
  ASSERT_TRUE(store.Compact().ok());
  WaitForCompaction(store, 1);
  for (int i = 0; i < 40; ++i) {  // deletes of keys now in the log shard
    ASSERT_TRUE(store
                    .AssocDelete(srcs[rng() % 2], static_cast<int64_t>(rng() % 2),
                                 static_cast<int64_t>(rng() % 60))
                    .ok());
  }
  write_some(150);
  const std::vector<int64_t> generations = {1, 2};
  auto compare = [&](const std::string& when) {
    for (int64_t src : srcs) {
      for (int64_t type : {0, 1, 2}) {
        auto full = store.Fragment(src, false, type, generations);
        ASSERT_TRUE(full.ok()) << full.status().ToString();
        std::sort(full->edges.begin(), full->edges.end(), NewestFirst);
        if (type < 2) {
          EXPECT_GT(full->edges.size(), 20u);
        }
        for (int round = 0; round < 5; ++round) {
          std::vector<int64_t> dsts;
          for (int k = 0; k < round * 7; ++k) dsts.push_back(static_cast<int64_t>(rng() % 70));
          if (!dsts.empty()) dsts.push_back(dsts[0]);  // a duplicate
          auto got = store.FragmentEdges(src, type, generations, dsts);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          std::sort(got->begin(), got->end(), NewestFirst);
          std::vector<Edge> want;
          for (const Edge& e : full->edges) {
            if (std::find(dsts.begin(), dsts.end(), e.dst) != dsts.end()) want.push_back(e);
          }
          EXPECT_EQ(*got, want) << "node " << src << " type " << type << " round " << round << " "
                                << when;
        }
      }
    }
  };
  compare("first");
  // Keys of the log shard read (and cached) above, deleted and overwritten now: the cache of the
  // log shard's edges must not hide that.
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(store
                    .AssocDelete(srcs[rng() % 2], static_cast<int64_t>(rng() % 2),
                                 static_cast<int64_t>(rng() % 60))
                    .ok());
  }
  write_some(100);
  compare("after more deletes and writes");
  const json cache = store.StatusJson()["edge_cache"];
  EXPECT_GT(cache["hits"].get<uint64_t>(), 0u) << cache.dump();
  EXPECT_GT(cache["entries"].get<uint64_t>(), 0u) << cache.dump();
}

// Writes that delete edges of a log shard (upserts and deletes of its keys, in write batches): the
// outcomes and the fragments agree with a model; each commit group persists its deletes on the log
// shard as one record of the deletion file, holding exactly the keys that were live there; a node
// whose log-shard edges are all deleted has none live (obj_delete finds nothing); a restart reads
// the same and, finding every key already dead, appends nothing.
TEST(LogStoreTest, LogShardDeletesAgreeWithAModelAndAreOneRecordPerGroup) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  auto h = std::make_unique<Harness>(dir.path());
  using Key = std::pair<int64_t, int64_t>;  // (type, dst)
  std::map<int64_t, std::map<Key, Edge>> model;
  std::map<int64_t, std::set<Key>> in_shard;  // keys with a live version in the log shard
  auto add = [&](const Edge& e) {
    auto replaced = h->store().AssocAdd(e);
    ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
    model[e.src][{e.type, e.dst}] = e;
  };
  for (int64_t dst = 0; dst < 400; ++dst) add({5, 0, dst, dst % 50, {{"d", std::to_string(dst)}}});
  for (int64_t dst = 0; dst < 100; ++dst) add({5, 1, dst, dst, {}});
  for (int64_t dst = 0; dst < 3; ++dst) add({6, 0, dst, 7, {}});
  ASSERT_TRUE(h->store().Compact().ok());
  WaitForCompaction(h->store(), 1);
  for (const auto& [src, edges] : model) {
    for (const auto& [key, e] : edges) in_shard[src].insert(key);
  }
  const std::string deletes = dir.path() + "/shard-1.deletes";
  ASSERT_TRUE(std::filesystem::exists(deletes));

  std::mt19937_64 rng(23);
  for (int round = 0; round < 6; ++round) {
    std::vector<LogRecord> batch;
    std::vector<bool> want;
    uint64_t live_here = 0;  // writes whose key had a live version in the log shard
    for (int i = 0; i < 150; ++i) {
      LogRecord r;
      r.node = 5;
      r.type = static_cast<int64_t>(rng() % 2);
      r.dst = static_cast<int64_t>(rng() % 450);
      if (round == 0 && i < 3) r = LogRecord{UpdateOp::kDeleteEdge, 6, 0, i, 0, {}};
      const Key key{r.type, r.dst};
      auto& edges = model[r.node];
      want.push_back(edges.count(key) > 0);
      if (in_shard[r.node].erase(key) > 0) ++live_here;
      if (r.node == 5 && rng() % 3 != 0) {
        r.op = UpdateOp::kPutEdge;
        r.timestamp = static_cast<int64_t>(rng() % 60);
        r.properties = {{"r", std::to_string(round)}};
        edges[key] = Edge{r.node, r.type, r.dst, r.timestamp, r.properties};
      } else {
        r.op = UpdateOp::kDeleteEdge;
        edges.erase(key);
      }
      batch.push_back(r);
    }
    const uint64_t size_before = std::filesystem::file_size(deletes);
    std::vector<StatusOr<bool>> got = h->store().CommitUnconditional(batch);
    ASSERT_EQ(got.size(), batch.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
      EXPECT_EQ(*got[i], want[i]) << "round " << round << " write " << i;
    }
    // One record: framing, the count, 41 bytes, an id (snapshots) and a found flag per update.
    const uint64_t record = live_here == 0 ? 0 : kWalHeaderSize + 4 + live_here * (41 + 8 + 1);
    EXPECT_EQ(std::filesystem::file_size(deletes) - size_before, record) << "round " << round;
  }
  auto expect_model = [&](LogStore& store) {
    const auto snapshot = Snapshot(store, {5, 6});
    for (int64_t src : {5, 6}) {
      std::vector<Edge> want;
      for (const auto& [key, e] : model[src]) want.push_back(e);
      std::sort(want.begin(), want.end(), ByTypeNewestFirst);
      EXPECT_EQ(snapshot.at(src), want) << "node " << src;
    }
  };
  expect_model(h->store());
  ASSERT_TRUE(model[6].empty());
  const uint64_t size = std::filesystem::file_size(deletes);
  h.reset();
  h = std::make_unique<Harness>(dir.path());
  expect_model(h->store());
  EXPECT_EQ(std::filesystem::file_size(deletes), size) << "the replay found every key dead already";
  // Node 6's three log-shard edges are dead (the count of live ones is 0); node 5 has live ones.
  auto gone = h->store().ObjDelete(6);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_FALSE(*gone);
  auto deleted = h->store().ObjDelete(5);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_TRUE(*deleted);
  model[5].clear();
  expect_model(h->store());
}

// A compaction whose generation cannot be built as one partition within the memory budget builds
// a log shard of several hash partitions; every node reads the same from it, after a restart
// too, and deletes find their keys in the right partition.
TEST(LogStoreTest, CompactionUnderAMemoryBudgetBuildsSeveralPartitions) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  // About 700 KB of edge text: its one-partition build needs ~4 MB above the baseline.
  const uint64_t budget = graph::kProcessBaseline + (uint64_t{1} << 20);
  std::vector<int64_t> srcs;
  for (int64_t s = 0; s < 500; ++s) srcs.push_back(s * 13 + 1);
  std::map<int64_t, std::vector<Edge>> before;
  {
    Harness h(dir.path(), nullptr, budget);
    LogStore& store = h.store();
    std::mt19937_64 rng(11);
    for (int i = 0; i < 3000; ++i) {
      Edge e{srcs[rng() % srcs.size()],
             static_cast<int64_t>(rng() % 3),
             static_cast<int64_t>(rng() % 1000),
             static_cast<int64_t>(rng() % 100000),
             {{"data", std::string(200, static_cast<char>('a' + rng() % 26))}}};
      ASSERT_TRUE(store.AssocAdd(e).ok());
    }
    before = Snapshot(store, srcs);
    ASSERT_TRUE(store.Compact().ok());
    WaitForCompaction(store, 1);
    const auto status = store.StatusJson();
    const auto& last = status["last_compaction"];
    EXPECT_GE(last["partitions"].get<uint32_t>(), 2u) << last.dump();
    // Merges are on: a compaction plans within the baseline plus half of the rest.
    EXPECT_EQ(last["memory_budget"].get<uint64_t>(),
              graph::kProcessBaseline + (budget - graph::kProcessBaseline) / 2);
    EXPECT_LE(last["planned_peak"].get<uint64_t>(), budget);
    EXPECT_EQ(status["log_shards"][0]["partitions"], last["partitions"]) << status.dump();
    EXPECT_EQ(Snapshot(store, srcs), before) << "reads changed by the compaction";
    // Delete one edge of every tenth source: each is found in its own partition.
    for (size_t i = 0; i < srcs.size(); i += 10) {
      auto& edges = before[srcs[i]];
      if (edges.empty()) continue;
      auto deleted = store.AssocDelete(edges[0].src, edges[0].type, edges[0].dst);
      ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
      EXPECT_TRUE(*deleted) << "not found: " << edges[0].src;
      edges.erase(edges.begin());
    }
    EXPECT_EQ(Snapshot(store, srcs), before);
  }
  Harness reopened(dir.path(), nullptr, budget);
  EXPECT_EQ(Snapshot(reopened.store(), srcs), before) << "after a restart";
}

// The cluster's read path for the checks of conditional writes, as far as the LogStore's own
// fragments go (the stand-in base shard holds nothing): obj_get and assoc_get.
class FragmentReader final : public GraphApi {
 public:
  void set_store(LogStore* store) { store_ = store; }

  // The checks' reads so far (obj_get and assoc_get).
  uint64_t reads() const { return reads_.load(); }

  StatusOr<std::optional<Node>> ObjGet(int64_t id) override {
    ++reads_;
    ZIPG_ASSIGN_OR_RETURN(NodeData data, store_->Fragment(id, false, -1, Generations()));
    if (!data.properties) return std::optional<Node>();
    return std::optional<Node>(Node{id, *data.properties});
  }
  StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type, const std::vector<int64_t>& ids,
                                       int64_t low, int64_t high) override {
    ++reads_;
    ZIPG_ASSIGN_OR_RETURN(std::vector<Edge> edges,
                          store_->FragmentEdges(id, type, Generations(), ids));
    std::erase_if(edges, [&](const Edge& e) { return e.timestamp < low || e.timestamp > high; });
    return edges;
  }
  StatusOr<std::optional<Properties>> GetNodeProperty(int64_t,
                                                      const std::vector<std::string>*) override {
    return Unused();
  }
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties&) override { return Unused(); }
  StatusOr<SearchResult> SearchNodeIds(const NodeSearch&) override { return Unused(); }
  StatusOr<std::vector<int64_t>> GetNeighborIds(int64_t, std::optional<int64_t>,
                                                const Properties&) override {
    return Unused();
  }
  StatusOr<EdgeRecordInfo> GetEdgeRecord(int64_t, int64_t) override { return Unused(); }
  StatusOr<std::pair<int64_t, int64_t>> GetEdgeRange(int64_t, int64_t, int64_t, int64_t) override {
    return Unused();
  }
  StatusOr<std::optional<Edge>> GetEdgeData(int64_t, int64_t, int64_t) override { return Unused(); }
  StatusOr<std::vector<Edge>> AssocRange(int64_t, int64_t, int64_t, int64_t) override {
    return Unused();
  }
  StatusOr<int64_t> AssocCount(int64_t, int64_t) override { return Unused(); }
  StatusOr<std::vector<Edge>> AssocTimeRange(int64_t, int64_t, int64_t, int64_t, int64_t) override {
    return Unused();
  }

 private:
  static Status Unused() { return Status::Internal("not used by the LogStore's checks"); }
  std::vector<int64_t> Generations() {
    std::vector<int64_t> g = store_->LogShards();
    const int64_t live = store_->StatusJson()["generation"].get<int64_t>();
    g.push_back(live);
    g.push_back(live - 1);
    return g;
  }
  LogStore* store_ = nullptr;
  std::atomic<uint64_t> reads_{0};
};

// Properties and edges of `ids`, as the LogStore holds them.
std::map<int64_t, std::pair<std::optional<Properties>, std::vector<Edge>>> NodeSnapshot(
    LogStore& store, const std::vector<int64_t>& ids) {
  std::map<int64_t, std::pair<std::optional<Properties>, std::vector<Edge>>> out;
  const auto edges = Snapshot(store, ids);
  const std::vector<int64_t> generations = AllGenerations(store);
  for (int64_t id : ids) {
    auto data = store.Fragment(id, false, -1, generations);
    EXPECT_TRUE(data.ok()) << data.status().ToString();
    out[id] = {data.ok() ? data->properties : std::nullopt, edges.at(id)};
  }
  return out;
}

bool SameOutcome(const StatusOr<bool>& a, const StatusOr<bool>& b) {
  if (a.ok() != b.ok()) return false;
  return a.ok() ? *a == *b : a.status().code() == b.status().code();
}

std::string Show(const StatusOr<bool>& v) {
  return v.ok() ? (*v ? "found" : "not found") : v.status().ToString();
}

// Merges (docs/logstore-ha.md, "Merges"): one writer runs random writes (checked against a model)
// while compactions add log shards and merges of two at a time fold them into one; the writer
// goes on during each merge's build, so its deletes hit the shards being merged. The merged
// shard must read as the shards it replaced did: the same live data, found through any
// generation it covers, and the same after a restart, with the merged shards' files gone.
// Snapshots (docs/consistency.md): the writer takes one every 97 writes and keeps a copy of the
// model then; reads at each, after every compaction and merge, answer as that copy.
// `budget`: the compaction memory budget (0: the default); `value_bytes`: each edge's value.
void MergeAgainstTheModel(uint64_t budget, size_t value_bytes) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  std::atomic<uint64_t> done{0};
  // The writer stops at `allowed` writes. Rounds of 400 writes each, so that each generation
  // holds about 400 writes however fast the writer is against compaction: a writer far ahead
  // leaves only dead rows in the older log shards, and no delete would hit a merge.
  std::atomic<uint64_t> allowed{400};
  std::atomic<bool> stop{false}, failed{false};
  auto adjust = [&](LogStoreOptions* o) {
    o->sync = false;
    o->merge_width = 2;
    o->merge_ratio = 1000;  // sizes vary: merge any two
    // Let the writer run 150 writes into each merge's build.
    o->before_merge_build = [&] {
      const uint64_t until = done.load() + 150;
      allowed += 150;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < until && !stop && !failed &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
  };
  FragmentReader reader;
  auto h = std::make_unique<Harness>(dir.path(), &reader, budget, adjust);
  reader.set_store(&h->store());

  using Key = std::pair<int64_t, int64_t>;  // (type, dst)
  std::map<int64_t, Properties> props;
  std::map<int64_t, std::map<Key, Edge>> edges;
  std::vector<int64_t> ids;
  for (int64_t id = 1; id <= 40; ++id) ids.push_back(id * 7);
  std::string failure;  // the writer's first mismatch (read once it is joined)
  struct Taken {
    uint64_t seq;
    std::map<int64_t, Properties> props;
    std::map<int64_t, std::map<Key, Edge>> edges;
  };
  std::vector<Taken> taken;  // the writer's snapshots (read once it is joined)
  std::thread writer([&] {
    std::mt19937_64 rng(41);
    auto fail = [&](const std::string& what) {
      if (failure.empty()) failure = what;
      failed = true;
    };
    while (!stop && !failed) {
      if (done.load() >= allowed.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      const int64_t id = ids[rng() % ids.size()];
      const uint64_t dice = rng() % 100;
      const std::string v = std::to_string(rng() % 1000);
      if (dice < 55) {
        const Edge e{id,
                     static_cast<int64_t>(rng() % 3),
                     static_cast<int64_t>(rng() % 80),
                     static_cast<int64_t>(rng() % 500),
                     {{"v", v + std::string(value_bytes, static_cast<char>('a' + rng() % 26))}}};
        auto got = h->store().AssocAdd(e);
        const bool had = edges[id].count({e.type, e.dst}) > 0;
        if (!got.ok() || *got != had) fail("assoc_add " + std::to_string(id) + " " + Show(got));
        edges[id][{e.type, e.dst}] = e;
      } else if (dice < 85) {
        const int64_t type = static_cast<int64_t>(rng() % 3),
                      dst = static_cast<int64_t>(rng() % 80);
        auto got = h->store().AssocDelete(id, type, dst);
        const bool had = edges[id].erase({type, dst}) > 0;
        if (!got.ok() || *got != had) fail("assoc_delete " + std::to_string(id) + " " + Show(got));
      } else if (dice < 95) {
        const Properties p = {{"a", v}, {"b", "x" + v}};
        const bool had = props.count(id) > 0;
        const Status s = had ? h->store().ObjUpdate(id, p) : h->store().ObjAdd(id, p);
        if (!s.ok()) fail("obj_add/update " + std::to_string(id) + " " + s.ToString());
        props[id] = p;
      } else {
        auto got = h->store().ObjDelete(id);
        const bool had = props.count(id) > 0 || !edges[id].empty();
        props.erase(id);
        edges.erase(id);
        if (!got.ok() || *got != had) fail("obj_delete " + std::to_string(id) + " " + Show(got));
      }
      if (++done % 97 == 0) {
        auto seq = h->store().Snapshot();
        if (!seq.ok()) fail("snapshot " + seq.status().ToString());
        if (seq.ok()) taken.push_back(Taken{*seq, props, edges});
      }
    }
  });
  for (int round = 1; round <= 10; ++round) {
    while (done.load() < allowed.load() && !failed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    auto started = h->store().Compact();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    allowed += 400;  // the next round's writes go on during this compaction
    const json j = json::parse(*started);
    if (j.value("started", false)) WaitForCompaction(h->store(), j["generation"].get<int64_t>());
  }
  stop = true;
  writer.join();
  ASSERT_EQ(failure, "");
  // Everything into log shards, then let the merges fold them into one.
  auto started = h->store().Compact();
  ASSERT_TRUE(started.ok());
  WaitForCompaction(h->store(), json::parse(*started)["generation"].get<int64_t>());
  json status;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
    status = h->store().StatusJson();
    ASSERT_FALSE(status.contains("last_error")) << status.dump();
    if (status["log_shards"].size() == 1 && status["frozen"].is_null()) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << status.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(status["merges"].get<uint64_t>(), 10u) << status.dump();
  EXPECT_GT(status["merge_deletes_moved"].get<uint64_t>(), 0u)
      << "no delete hit a shard while it was being merged: " << status.dump();
  const json& merged = status["log_shards"][0];
  const int64_t first = merged.value("first_generation", int64_t{0});
  const int64_t last = merged["generation"].get<int64_t>();
  EXPECT_EQ(first, 1) << status.dump();

  auto expect_state = [&](LogStore& store, const std::map<int64_t, Properties>& props,
                          const std::map<int64_t, std::map<Key, Edge>>& edges,
                          const std::string& when, int searches) {
    const auto got = NodeSnapshot(store, ids);
    for (int64_t id : ids) {
      std::vector<Edge> want;
      if (auto e = edges.find(id); e != edges.end()) {
        for (const auto& [key, edge] : e->second) want.push_back(edge);
      }
      std::sort(want.begin(), want.end(), ByTypeNewestFirst);
      auto it = props.find(id);
      EXPECT_EQ(got.at(id).first, it == props.end() ? std::nullopt : std::optional(it->second))
          << "node " << id << " " << when;
      EXPECT_EQ(got.at(id).second, want) << "node " << id << " " << when;
    }
    // search_node_ids over the log shards (their search indexes) and the deletes that hide
    // replaced and deleted nodes, against the model's live values ("a" = v, "b" = "x" + v).
    std::mt19937_64 rng(7);
    const SearchMatch kinds[] = {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix,
                                 SearchMatch::kExact};
    for (int q = 0; q < searches; ++q) {
      NodeSearch search;
      const std::string v = std::to_string(rng() % 1000);
      search.pattern = q % 3 == 0 ? "x" + v : v.substr(0, 1 + rng() % v.size());
      search.match = kinds[q % 4];
      if (q % 2 == 0) search.property = q % 4 == 0 ? "a" : "b";
      search.limit = q % 5 == 0 ? 3 : kDefaultSearchLimit;
      std::vector<int64_t> want;
      for (const auto& [id, p] : props) {
        for (const auto& [name, value] : p) {
          if ((!search.property || name == *search.property) &&
              ValueMatches(value, search.pattern, search.match)) {
            want.push_back(id);
            break;
          }
        }
      }
      CutSearchPart(&want, search.limit);
      auto got = store.SearchNodeIds(search);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, want) << SearchMatchName(search.match) << " '" << search.pattern << "' in "
                            << search.property.value_or("any") << " " << when;
    }
  };
  auto expect_model = [&](LogStore& store, const std::string& when) {
    expect_state(store, props, edges, when, 200);
  };
  // Reads at each snapshot the writer took answer as the model did then.
  auto expect_snapshots = [&](LogStore& store, const std::string& when) {
    for (const Taken& t : taken) {
      ReadAt::Scope at(t.seq);
      expect_state(store, t.props, t.edges, when + " at snapshot " + std::to_string(t.seq), 20);
    }
  };
  expect_model(h->store(), "after the merges");
  ASSERT_GE(taken.size(), 40u);
  expect_snapshots(h->store(), "after the merges");
  // Every key is found through any one generation the merged shard covers.
  for (int64_t id : ids) {
    for (int64_t type = 0; type < 3; ++type) {
      std::vector<int64_t> dsts;
      std::vector<Edge> want;
      for (const auto& [key, e] : edges[id]) {
        if (key.first != type) continue;
        dsts.push_back(key.second);
        want.push_back(e);
      }
      const int64_t g = first + (id + type) % (last - first + 1);
      auto got = h->store().FragmentEdges(id, type, {g}, dsts);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      std::sort(got->begin(), got->end(),
                [](const Edge& a, const Edge& b) { return a.dst < b.dst; });
      EXPECT_EQ(*got, want) << "node " << id << " type " << type << " through generation " << g;
    }
  }
  if (budget > 0) {
    // The shard the merges left, not "last_merge": a merge publishes its shard before it records
    // its summary, so the status read above may still hold the merge before it (a failed run
    // showed a 4-partition shard of generations 1-11 beside a last_merge of 1-10).
    EXPECT_GE(merged["partitions"].get<uint32_t>(), 2u)
        << "the budget did not split the merged shard: " << status.dump();
  }
  h.reset();
  h = std::make_unique<Harness>(dir.path(), &reader, budget, adjust);
  reader.set_store(&h->store());
  expect_model(h->store(), "after a restart");
  {
    // The merged shard's inputs were not reopened: the snapshots before the restart are gone.
    ReadAt::Scope at(taken.back().seq);
    EXPECT_EQ(h->store().Fragment(ids[0], true, 0, {first}).status().code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(h->store().SearchNodeIds(NodeSearch{"1", std::nullopt}).status().code(),
              StatusCode::kFailedPrecondition);
  }
  {
    auto seq = h->store().Snapshot();
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    ReadAt::Scope at(*seq);
    expect_model(h->store(), "after a restart, at a new snapshot");
  }
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) == 0) names.insert(name);
  }
  const std::string shard = "shard-" + std::to_string(first) + "-" + std::to_string(last);
  EXPECT_EQ(names, (std::set<std::string>{shard, shard + ".deletes"}));
}

TEST(LogStoreTest, MergedLogShardsAnswerAsTheShardsTheyReplace) { MergeAgainstTheModel(0, 0); }

// The same with a memory budget that builds the merged shard as several hash partitions (a merge
// plans within the baseline plus half of the rest: 1 MiB here).
TEST(LogStoreTest, AMergeUnderAMemoryBudgetBuildsSeveralPartitions) {
  MergeAgainstTheModel(graph::kProcessBaseline + (uint64_t{2} << 20), 2000);
}

// Merges that fall behind cannot let log shards pile up: at the cap (max_log_shards) the merge
// thread merges the smallest run whatever its sizes, and the memtable is not compacted on its
// threshold until a merge has made room; writes go on meanwhile, and at 4 times the threshold the
// memtable is compacted anyway (memory stays bounded while merges cannot run). The merge is held
// in its build until the test has seen both.
TEST(LogStoreTest, AtTheCapOnLogShardsTheMemtableWaitsForAMerge) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  constexpr uint64_t kThreshold = 16 << 10;
  std::atomic<bool> hold_merges{true};
  auto adjust = [&](LogStoreOptions* o) {
    o->sync = false;
    o->memtable_bytes = kThreshold;
    o->merge_width = 2;
    o->merge_ratio = 1.0;  // shards never match exactly: every merge here is taken at the cap
    o->max_log_shards = 3;
    o->before_merge_build = [&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (hold_merges && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
  };
  Harness h(dir.path(), nullptr, 0, adjust);
  std::vector<int64_t> srcs;
  for (int64_t s = 1; s <= 30; ++s) srcs.push_back(s * 5);
  std::map<int64_t, std::vector<Edge>> model;
  size_t most_shards = 0;
  auto status = [&] {
    json j = h.store().StatusJson();
    EXPECT_FALSE(j.contains("last_error")) << j.dump();
    most_shards = std::max(most_shards, j["log_shards"].size());
    return j;
  };
  int64_t next = 0;
  auto write = [&] {
    const int64_t i = next++;
    const Edge e{srcs[i % srcs.size()], 1, i, 1000 + i, {{"v", std::string(100, 'a' + i % 26)}}};
    auto added = h.store().AssocAdd(e);
    ASSERT_TRUE(added.ok() && !*added) << Show(added);
    model[e.src].push_back(e);
  };
  // Write, keeping the memtable near its threshold (so that only a held compaction lets it
  // grow), until the log shards reach the cap and the next compaction is held.
  bool held = false;
  for (int n = 0; n < 20000 && !held; ++n) {
    write();
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);;) {
      const json j = status();
      held = j["held"].get<bool>();
      if (held || j["memtable"]["bytes"].get<uint64_t>() < kThreshold) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no compaction: " << j.dump();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ASSERT_TRUE(held) << status().dump();
  // The merge thread, woken by the compaction that reached the cap, takes its forced run.
  json j = status();
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       j["merging"].is_null() && std::chrono::steady_clock::now() < deadline; j = status()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(j["log_shards"].size(), 3u) << j.dump();
  EXPECT_GE(j["held_compactions"].get<uint64_t>(), 1u) << j.dump();
  EXPECT_EQ(j["merges"].get<uint64_t>(), 0u) << j.dump();
  EXPECT_FALSE(j["merging"].is_null()) << "the forced merge is not under way: " << j.dump();
  // Writes go on while the memtable waits (100 of them stay below 4 times the threshold).
  for (int n = 0; n < 100; ++n) write();
  j = status();
  EXPECT_TRUE(j["held"].get<bool>()) << j.dump();
  EXPECT_EQ(j["log_shards"].size(), 3u) << j.dump();
  EXPECT_LE(most_shards, 3u) << "the log shards passed the cap";
  // On to 4 times the threshold, the merge still held: the memtable is compacted anyway.
  while (status()["memtable"]["bytes"].get<uint64_t>() < 4 * kThreshold) write();
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
    j = status();
    if (j["log_shards"].size() == 4 && !j["held"].get<bool>() && j["frozen"].is_null()) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no compaction at 4x: " << j.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(j["merges"].get<uint64_t>(), 0u) << j.dump();
  // Let the merges go: at the cap they go on until they have made room.
  hold_merges = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
    j = status();
    if (j["merges"].get<uint64_t>() >= 1 && j["log_shards"].size() < 3 && j["merging"].is_null() &&
        !j["held"].get<bool>() && j["frozen"].is_null()) {
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << j.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(j["forced_merges"].get<uint64_t>(), 2u) << j.dump();
  for (auto& [src, edges] : model) std::sort(edges.begin(), edges.end(), ByTypeNewestFirst);
  EXPECT_EQ(Snapshot(h.store(), srcs), model);
}

// Node writes in a batch (a bulk node load: LinkBench's addBulkNodes as obj_add batches): the same
// random obj_add / obj_update / obj_delete / assoc_add writes (repeated ids, ids sharing a stripe,
// bad ids among them) go to one LogStore as single calls and to another as write batches of 1-16.
// Every outcome and message, and the final state (also after a restart), must be the same; a
// batch of node writes only is one commit group.
TEST(LogStoreTest, NodeWritesInABatchAnswerAsTheSingleCallsInOneGroup) {
  ScratchDir dir_single("logstore_test"), dir_batch("logstore_test");
  ASSERT_TRUE(dir_single.ok() && dir_batch.ok());
  const std::vector<int64_t> nodes = {1, 2, 3, 1025, 2049};  // 1, 1025 and 2049 share a stripe
  std::mt19937_64 rng(23);
  std::vector<zipg::Write> ops;
  for (int i = 0; i < 800; ++i) {
    zipg::Write w;
    w.id = nodes[rng() % nodes.size()];
    const int kind = static_cast<int>(rng() % 20);
    if (kind < 9) {
      w.op = zipg::Write::Op::kObjAdd;
    } else if (kind < 16) {
      w.op = zipg::Write::Op::kObjUpdate;
    } else if (kind < 17) {
      w.op = zipg::Write::Op::kObjDelete;
    } else if (kind < 18) {
      w.op = zipg::Write::Op::kAssocAdd;
      w.type = 1;
      w.dst = 7;
    } else {
      w.op = rng() % 2 == 0 ? zipg::Write::Op::kObjAdd : zipg::Write::Op::kObjUpdate;
      w.id = -static_cast<int64_t>(1 + rng() % 3);
    }
    if (w.op != zipg::Write::Op::kObjDelete) {
      w.properties = {{"i", std::to_string(i)}, {"e", rng() % 3 == 0 ? "" : "x"}};
    }
    ops.push_back(w);
  }
  // The checks read through the cluster's read path; here the LogStore's own fragments.
  FragmentReader single_reader, batched_reader;
  auto single = std::make_unique<Harness>(dir_single.path(), &single_reader);
  single_reader.set_store(&single->store());
  auto batched = std::make_unique<Harness>(dir_batch.path(), &batched_reader);
  batched_reader.set_store(&batched->store());
  std::vector<StatusOr<bool>> want, got;
  for (const zipg::Write& w : ops) {
    switch (w.op) {
      case zipg::Write::Op::kObjAdd: {
        Status st = single->store().ObjAdd(w.id, w.properties);
        want.push_back(st.ok() ? StatusOr<bool>(false) : StatusOr<bool>(st));
        break;
      }
      case zipg::Write::Op::kObjUpdate: {
        Status st = single->store().ObjUpdate(w.id, w.properties);
        want.push_back(st.ok() ? StatusOr<bool>(false) : StatusOr<bool>(st));
        break;
      }
      case zipg::Write::Op::kObjDelete:
        want.push_back(single->store().ObjDelete(w.id));
        break;
      default:
        want.push_back(single->store().AssocAdd({w.id, w.type, w.dst, 0, w.properties}));
    }
  }
  auto groups = [&] { return batched->store().StatusJson()["commit"]["groups"].get<uint64_t>(); };
  size_t node_batches = 0;
  for (size_t at = 0; at < ops.size();) {
    const size_t n = std::min<size_t>(ops.size() - at, 1 + rng() % 16);
    const std::vector<zipg::Write> batch(ops.begin() + at, ops.begin() + at + n);
    const uint64_t groups_before = groups();
    std::vector<StatusOr<bool>> outcomes = batched->store().WriteBatch(batch);
    ASSERT_EQ(outcomes.size(), n);
    const bool nodes_only = std::all_of(batch.begin(), batch.end(), [](const zipg::Write& w) {
      return w.op == zipg::Write::Op::kObjAdd || w.op == zipg::Write::Op::kObjUpdate;
    });
    const bool any_valid =
        std::any_of(want.begin() + at, want.begin() + at + n, [](const auto& w) { return w.ok(); });
    if (nodes_only) {
      ++node_batches;
      EXPECT_EQ(groups() - groups_before, any_valid ? 1u : 0u)
          << "a batch of node writes is one commit group (writes " << at << ".." << at + n - 1
          << ")";
    }
    for (auto& o : outcomes) got.push_back(std::move(o));
    at += n;
  }
  EXPECT_GT(node_batches, 5u);
  size_t refused = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_TRUE(SameOutcome(got[i], want[i]))
        << "write " << i << ": batch " << Show(got[i]) << ", single call " << Show(want[i]);
    if (!got[i].ok() && !want[i].ok()) {
      EXPECT_EQ(got[i].status().message(), want[i].status().message()) << "write " << i;
    }
    if (!want[i].ok()) ++refused;
  }
  EXPECT_GT(refused, 100u);  // ALREADY_EXISTS, NOT_FOUND and bad ids are all exercised
  const auto reference = NodeSnapshot(single->store(), nodes);
  EXPECT_EQ(NodeSnapshot(batched->store(), nodes), reference);
  batched.reset();
  Harness reopened(dir_batch.path());
  EXPECT_EQ(NodeSnapshot(reopened.store(), nodes), reference);
}

// A reference for WriteBatch: the same random writes (bad ones among them) go to one LogStore as
// single calls and to another as batches of 1-12. Every outcome, and the final state (also after
// a restart), must be the same.
TEST(LogStoreTest, AWriteBatchAnswersAsTheSingleCallsWould) {
  ScratchDir dir_single("logstore_test"), dir_batch("logstore_test");
  ASSERT_TRUE(dir_single.ok() && dir_batch.ok());
  const std::vector<int64_t> nodes = {1, 2, 1025};  // 1025 shares node 1's stripe
  std::mt19937_64 rng(11);
  std::vector<LogRecord> ops;
  for (int i = 0; i < 600; ++i) {
    LogRecord r;
    r.node = nodes[rng() % nodes.size()];
    r.type = static_cast<int64_t>(rng() % 2);
    r.dst = static_cast<int64_t>(rng() % 8);
    const int kind = static_cast<int>(rng() % 20);
    if (kind < 12) {
      r.op = UpdateOp::kPutEdge;
      r.timestamp = static_cast<int64_t>(rng() % 5);
      // An empty value is stored as absent (normalized), as the single call does.
      r.properties = {{"i", std::to_string(i)}, {"e", rng() % 3 == 0 ? "" : "x"}};
    } else if (kind < 17) {
      r.op = UpdateOp::kDeleteEdge;
    } else if (kind < 18) {
      r.op = UpdateOp::kDeleteNode;
    } else if (kind < 19) {
      r.op = rng() % 2 == 0 ? UpdateOp::kPutEdge : UpdateOp::kDeleteEdge;  // bad: a negative key
      if (rng() % 2 == 0) {
        r.dst = -1;
      } else {
        r.type = -3;
      }
    } else {
      r.op = UpdateOp::kPutNode;  // not batchable: obj_add / obj_update are conditional
      r.properties = {{"name", "n"}};
    }
    ops.push_back(r);
  }

  auto single = std::make_unique<Harness>(dir_single.path());
  auto batched = std::make_unique<Harness>(dir_batch.path());
  std::vector<StatusOr<bool>> want, got;
  for (const LogRecord& r : ops) {
    switch (r.op) {
      case UpdateOp::kPutEdge:
        want.push_back(
            single->store().AssocAdd({r.node, r.type, r.dst, r.timestamp, r.properties}));
        break;
      case UpdateOp::kDeleteEdge:
        want.push_back(single->store().AssocDelete(r.node, r.type, r.dst));
        break;
      case UpdateOp::kDeleteNode:
        want.push_back(single->store().ObjDelete(r.node));
        break;
      default:
        want.push_back(Status::InvalidArgument("not batchable"));
    }
  }
  auto groups = [&] { return batched->store().StatusJson()["commit"]["groups"].get<uint64_t>(); };
  for (size_t at = 0; at < ops.size();) {
    const size_t n = std::min<size_t>(ops.size() - at, 1 + rng() % 12);
    std::vector<LogRecord> batch(ops.begin() + at, ops.begin() + at + n);
    const uint64_t groups_before = groups();
    std::vector<StatusOr<bool>> outcomes = batched->store().CommitUnconditional(batch);
    ASSERT_EQ(outcomes.size(), n);
    const bool any_valid =
        std::any_of(want.begin() + at, want.begin() + at + n, [](const auto& w) { return w.ok(); });
    EXPECT_EQ(groups() - groups_before, any_valid ? 1u : 0u)
        << "a batch is one commit group (writes " << at << ".." << at + n - 1 << ")";
    for (auto& o : outcomes) got.push_back(std::move(o));
    at += n;
  }
  size_t failed = 0, found = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const StatusOr<bool>& g = got[i];
    EXPECT_TRUE(SameOutcome(g, want[i]))
        << "write " << i << ": batch " << Show(g) << ", single call " << Show(want[i]);
    if (!g.ok() && !want[i].ok() && ops[i].op != UpdateOp::kPutNode) {
      EXPECT_EQ(g.status().message(), want[i].status().message()) << "write " << i;
    }
    if (!want[i].ok()) ++failed;
    if (want[i].ok() && *want[i] && ops[i].op != UpdateOp::kPutEdge) ++found;
  }
  EXPECT_GT(failed, 20u);
  EXPECT_GT(found, 20u);
  const auto reference = NodeSnapshot(single->store(), nodes);
  EXPECT_EQ(NodeSnapshot(batched->store(), nodes), reference);
  EXPECT_EQ(single->store().StatusJson()["writes"], batched->store().StatusJson()["writes"]);
  batched.reset();
  Harness reopened(dir_batch.path());
  EXPECT_EQ(NodeSnapshot(reopened.store(), nodes), reference);
}

// Batches race with single unconditional writes and with conditional ones (exclusive stripes,
// checks through the reader), on nodes that share stripes. Nothing deadlocks (batches take their
// stripes in order), every successful write is applied once, and the state is what recovery
// rebuilds.
TEST(LogStoreTest, BatchesRaceWithSingleAndConditionalWrites) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  const std::vector<int64_t> nodes = {7, 1031, 2055, 8, 1032};  // stripes 7, 7, 7, 8, 8
  std::map<int64_t, std::pair<std::optional<Properties>, std::vector<Edge>>> before;
  {
    FragmentReader reader;
    Harness h(dir.path(), &reader);
    reader.set_store(&h.store());
    std::atomic<uint64_t> ok_writes{0};
    std::atomic<int> unexpected{0};
    std::latch start(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(static_cast<uint64_t>(t) + 50);
        start.arrive_and_wait();
        auto node = [&] { return nodes[rng() % nodes.size()]; };
        for (int i = 0; i < 150; ++i) {
          const int64_t type = static_cast<int64_t>(rng() % 2);
          const int64_t dst = static_cast<int64_t>(rng() % 4);
          if (t < 4) {  // batches
            std::vector<LogRecord> batch;
            for (size_t k = 1 + rng() % 6; k > 0; --k) {
              const int x = static_cast<int>(rng() % 10);
              const UpdateOp op = x < 7   ? UpdateOp::kPutEdge
                                  : x < 9 ? UpdateOp::kDeleteEdge
                                          : UpdateOp::kDeleteNode;
              batch.push_back({op, node(), type, static_cast<int64_t>(rng() % 4),
                               op == UpdateOp::kPutEdge ? static_cast<int64_t>(i) : 0,
                               op == UpdateOp::kPutEdge
                                   ? Properties{{"b", std::to_string(t * 1000 + i)}}
                                   : Properties{}});
            }
            for (const auto& o : h.store().CommitUnconditional(batch)) {
              if (o.ok()) {
                ++ok_writes;
              } else {
                ++unexpected;
              }
            }
          } else if (t < 6) {  // single unconditional writes
            Status s = rng() % 3 == 0
                           ? h.store().AssocDelete(node(), type, dst).status()
                           : h.store()
                                 .AssocAdd({node(), type, dst, i, {{"s", std::to_string(i)}}})
                                 .status();
            s.ok() ? ++ok_writes : ++unexpected;
          } else if (t == 7 && rng() % 2 == 0) {
            // Node writes in a batch: exclusive stripes, several, taken in increasing order.
            std::vector<zipg::Write> batch;
            for (size_t k = 2 + rng() % 3; k > 0; --k) {
              zipg::Write w;
              w.op = rng() % 2 == 0 ? zipg::Write::Op::kObjAdd : zipg::Write::Op::kObjUpdate;
              w.id = node();
              w.properties = {{"name", std::to_string(200 + i)}};
              batch.push_back(w);
            }
            for (const auto& o : h.store().WriteBatch(batch)) {
              if (o.ok()) {
                ++ok_writes;
              } else if (o.status().code() != StatusCode::kAlreadyExists &&
                         o.status().code() != StatusCode::kNotFound) {
                ++unexpected;
              }
            }
          } else {  // conditional writes: each may be refused by its check, nothing else
            Status s;
            const int x = static_cast<int>(rng() % 3);
            if (x == 0) {
              s = h.store().ObjAdd(node(), {{"name", std::to_string(t)}});
            } else if (x == 1) {
              s = h.store().ObjUpdate(node(), {{"name", std::to_string(100 + i)}});
            } else {
              s = h.store().AssocUpdate({node(), type, dst, i, {{"u", std::to_string(i)}}});
            }
            if (s.ok()) {
              ++ok_writes;
            } else if (s.code() != StatusCode::kAlreadyExists &&
                       s.code() != StatusCode::kNotFound) {
              ++unexpected;
            }
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(unexpected.load(), 0);
    const auto status = h.store().StatusJson();
    EXPECT_EQ(status["writes"].get<uint64_t>(), ok_writes.load());
    EXPECT_LT(status["commit"]["groups"].get<uint64_t>(), ok_writes.load());
    EXPECT_EQ(h.received(), ok_writes.load());
    before = NodeSnapshot(h.store(), nodes);
  }
  size_t live = 0;
  for (const auto& [id, data] : before) live += data.second.size() + (data.first ? 1 : 0);
  EXPECT_GT(live, 5u);
  Harness reopened(dir.path());
  EXPECT_EQ(NodeSnapshot(reopened.store(), nodes), before);
}

// A standby (docs/logstore-ha.md) holds exactly what its leader acknowledged: every group is
// shipped before it is acknowledged, a compaction of the leader is one of the standby, and the
// standby recovers the same state from its own log. Without the standby the leader goes on
// alone and says so; the standby itself takes no writes.
TEST(LogStoreTest, AStandbyHoldsWhatItsLeaderAcknowledged) {
  ScratchDir dir("logstore_standby_test");
  ASSERT_TRUE(dir.ok());
  const std::string leader_dir = dir.path() + "/leader", standby_dir = dir.path() + "/standby";
  auto standby = std::make_unique<Harness>(standby_dir, nullptr, 0,
                                           [](LogStoreOptions* o) { o->standby = true; });
  LogStore* standby_store = &standby->store();
  auto receiver = ShipReceiver::Start(
      "127.0.0.1", 0, [&](const ShipRequest& q) { return standby_store->ApplyShipped(q); });
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  const std::string endpoint = (*receiver)->endpoint();
  Harness leader(leader_dir, nullptr, 0, [&](LogStoreOptions* o) {
    o->standby_endpoint = endpoint;
    o->ship_timeout_ms = 1000;
    o->epoch = 4;
  });
  ASSERT_EQ(leader.store().StatusJson()["standby"]["sync"], "in_sync")
      << leader.store().StatusJson().dump();

  std::vector<int64_t> srcs;
  for (int64_t n = 1; n <= 40; ++n) srcs.push_back(n);
  auto write_some = [&](int rounds, uint64_t seed) {
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(seed + static_cast<uint64_t>(t));
        for (int i = 0; i < rounds; ++i) {
          const int64_t src = srcs[rng() % srcs.size()];
          const uint64_t x = rng() % 10;
          Status s;
          if (x < 7) {
            s = leader.store()
                    .AssocAdd(Edge{src,
                                   static_cast<int64_t>(rng() % 3),
                                   static_cast<int64_t>(rng() % 9),
                                   static_cast<int64_t>(rng() % 100),
                                   {{"v", std::to_string(rng() % 50)}}})
                    .status();
          } else if (x < 9) {
            s = leader.store()
                    .AssocDelete(src, static_cast<int64_t>(rng() % 3),
                                 static_cast<int64_t>(rng() % 9))
                    .status();
          } else {
            s = leader.store().ObjDelete(src).status();
          }
          if (!s.ok()) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
  };
  write_some(150, 1);
  auto compacted = leader.store().Compact();
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  const int64_t frozen = nlohmann::json::parse(*compacted)["generation"].get<int64_t>();
  write_some(150, 100);  // while both compact generation `frozen`
  WaitForCompaction(leader.store(), frozen);
  WaitForCompaction(*standby_store, frozen);
  write_some(100, 200);

  const auto leader_status = leader.store().StatusJson();
  EXPECT_EQ(leader_status["standby"]["sync"], "in_sync") << leader_status.dump();
  EXPECT_GT(leader_status["standby"]["shipped_groups"].get<uint64_t>(), 0u);
  EXPECT_EQ(standby_store->StatusJson()["standby"]["applied_groups"],
            leader_status["standby"]["shipped_groups"]);
  EXPECT_EQ(standby_store->StatusJson()["standby"]["epoch"], 4u);
  EXPECT_EQ(standby_store->LogShards(), leader.store().LogShards());
  EXPECT_EQ(standby_store->StatusJson()["generation"], leader_status["generation"]);
  EXPECT_EQ(standby_store->StatusJson()["writes"], leader_status["writes"]);
  const auto want = Snapshot(leader.store(), srcs);
  EXPECT_EQ(Snapshot(*standby_store, srcs), want);

  // The standby takes no writes, and an older epoch cannot ship to it.
  EXPECT_EQ(standby_store->AssocAdd(Edge{1, 0, 1, 1, {}}).status().code(),
            StatusCode::kUnavailable);
  ShipRequest old;
  old.kind = ShipKind::kProbe;
  old.epoch = 3;
  EXPECT_EQ(standby_store->ApplyShipped(old).code, ShipCode::kFenced);

  // It recovers the same state from its own directory.
  receiver->reset();
  standby.reset();
  standby = std::make_unique<Harness>(standby_dir, nullptr, 0,
                                      [](LogStoreOptions* o) { o->standby = true; });
  EXPECT_EQ(Snapshot(standby->store(), srcs), want);

  // With the standby gone, the leader acknowledges alone once its ship times out, and says so.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(leader.store().AssocAdd(Edge{1, 0, 1000, 5, {}}).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  const auto alone = leader.store().StatusJson();
  EXPECT_EQ(alone["standby"]["sync"], "degraded") << alone.dump();
  EXPECT_NE(alone["standby"]["reason"].get<std::string>().find("did not answer"),
            std::string::npos);
  ASSERT_TRUE(leader.store().AssocAdd(Edge{1, 0, 1001, 5, {}}).ok());
  EXPECT_NE(Snapshot(leader.store(), {1}), Snapshot(standby->store(), {1}));
}

// A split (docs/cluster-changes.md, step 4): the layout mark in every feed, each feed read
// across it in either numbering, the writes after it fanned out by the new count; the layout is
// kept by a recovery, and reaches a standby: at once, and, for one away during the split, when the
// leader catches it up.
TEST(LogStoreTest, ASplitReachesTheFeedsARecoveryAndTheStandby) {
  ScratchDir dir("logstore_split_test");
  ASSERT_TRUE(dir.ok());
  const std::string leader_dir = dir.path() + "/leader";
  auto standby = std::make_unique<Harness>(dir.path() + "/standby", nullptr, 0,
                                           [](LogStoreOptions* o) { o->standby = true; });
  LogStore* standby_store = &standby->store();
  auto receiver = ServeShipping(standby_store);
  ASSERT_NE(receiver, nullptr);
  const std::string endpoint = receiver->endpoint();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  auto open_leader = [&] {
    return std::make_unique<Harness>(leader_dir, nullptr, 0, [&](LogStoreOptions* o) {
      o->standby_endpoint = endpoint;
      o->ship_timeout_ms = 2000;
      o->epoch = 4;
    });
  };
  auto leader = open_leader();
  ASSERT_TRUE(InSyncWithin(leader->store(), 10));
  constexpr int64_t kNodes = 40;
  for (int64_t src = 0; src < kNodes; ++src) {
    ASSERT_TRUE(leader->store().AssocAdd(Edge{src, 0, 1, 1, {}}).ok());
  }
  auto split = leader->store().Split(2, nullptr);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  const uint64_t z = (*split)["mark"].get<uint64_t>();
  const std::vector<std::pair<uint32_t, uint64_t>> layout = {{1, 0}, {2, z}};
  EXPECT_EQ(leader->store().Layout(), layout);
  EXPECT_EQ(standby_store->Layout(), layout);
  EXPECT_EQ(leader->store().StatusJson()["base_shards"], 2);
  for (int64_t src = 0; src < kNodes; ++src) {
    ASSERT_TRUE(leader->store().AssocAdd(Edge{src, 0, 2, 1, {}}).ok());
  }
  // Reads every chunk of `shard`'s feed after `after`, numbered by `count`.
  auto read_all = [](LogStore& store, uint32_t shard, uint64_t after, uint32_t count) {
    std::vector<engine::Update> out;
    for (;;) {
      auto chunk = store.UpdatesSince(shard, after, "m", count);
      EXPECT_TRUE(chunk.ok()) << chunk.status().ToString();
      if (!chunk.ok() || chunk->updates.empty()) return out;
      out.insert(out.end(), chunk->updates.begin(), chunk->updates.end());
      after = chunk->updates.back().id;
      // A split past `count`: the asker switches before it reads on.
      const auto& u = out.back();
      if (u.op == UpdateOp::kLayout && static_cast<uint32_t>(u.node) > count) return out;
    }
  };
  auto check_feeds = [&](LogStore& store, const std::string& when) {
    for (uint32_t t = 0; t < 2; ++t) {
      // Half t from the start: its writes before the split, the mark, its writes after.
      const auto got = read_all(store, t, 0, 2);
      int before = 0, marks = 0, after = 0;
      uint64_t last = 0;
      for (const auto& u : got) {
        EXPECT_GT(u.id, last) << when;
        last = u.id;
        if (u.op == UpdateOp::kLayout) {
          EXPECT_EQ(u.id, z) << when;
          EXPECT_EQ(u.node, 2) << when;
          ++marks;
          continue;
        }
        EXPECT_EQ(ShardOf(u.node, 2), t) << when << ": node " << u.node << " in half " << t;
        ++(u.id < z ? before : after);
      }
      int mine = 0;
      for (int64_t src = 0; src < kNodes; ++src) mine += ShardOf(src, 2) == t;
      EXPECT_EQ(before, mine) << when << ", half " << t;
      EXPECT_EQ(marks, 1) << when << ", half " << t;
      EXPECT_EQ(after, mine) << when << ", half " << t;
    }
    // Shard 0 of 1 (a server that has not switched): every write before the split, the mark;
    // past the mark it must switch first.
    const auto old = read_all(store, 0, 0, 1);
    ASSERT_EQ(old.size(), static_cast<size_t>(kNodes) + 1) << when;
    EXPECT_EQ(old.back().op, UpdateOp::kLayout) << when;
    EXPECT_EQ(store.UpdatesSince(0, z, "m", 1).status().code(), StatusCode::kFailedPrecondition);
  };
  check_feeds(leader->store(), "the leader");
  if (HasFatalFailure()) return;
  // A recovery: the layout from STATE, the feeds (the mark appended again if its generation is
  // replayed) answer the same.
  leader.reset();
  leader = open_leader();
  EXPECT_EQ(leader->store().Layout(), layout);
  check_feeds(leader->store(), "recovered");
  if (HasFatalFailure()) return;
  ASSERT_TRUE(InSyncWithin(leader->store(), 10));
  // A standby away during the next split gets it when the leader catches it up.
  receiver.reset();
  auto second = leader->store().Split(4, nullptr);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(leader->store().StatusJson()["standby"]["sync"], "degraded");
  ASSERT_TRUE(leader->store().AssocAdd(Edge{3, 0, 3, 1, {}}).ok());
  EXPECT_EQ(standby_store->Layout(), layout);
  receiver = ServeShipping(standby_store, port);
  ASSERT_NE(receiver, nullptr);
  ASSERT_TRUE(InSyncWithin(leader->store(), 20));
  EXPECT_EQ(standby_store->Layout(), leader->store().Layout());
  EXPECT_EQ(standby_store->Layout().size(), 3u);
  EXPECT_EQ(standby_store->StatusJson()["base_shards"], 4);
}

// Snapshots (docs/consistency.md): a standby applies what its leader ships with the same ids and
// keeps the same versions, so after a takeover it answers reads at the snapshots its leader
// handed out, across a compaction before the takeover, as the model stood at each.
TEST(LogStoreTest, APromotedStandbyAnswersAtItsLeadersSnapshots) {
  ScratchDir dir("logstore_snapshot_promote_test");
  ASSERT_TRUE(dir.ok());
  auto standby = std::make_unique<Harness>(dir.path() + "/standby", nullptr, 0,
                                           [](LogStoreOptions* o) { o->standby = true; });
  LogStore* standby_store = &standby->store();
  auto receiver = ServeShipping(standby_store);
  ASSERT_NE(receiver, nullptr);
  FragmentReader reader;
  Harness leader(dir.path() + "/leader", &reader, 0, [&](LogStoreOptions* o) {
    o->standby_endpoint = receiver->endpoint();
    o->ship_timeout_ms = 2000;
    o->epoch = 4;
  });
  reader.set_store(&leader.store());
  ASSERT_TRUE(InSyncWithin(leader.store(), 10));

  using Key = std::pair<int64_t, int64_t>;  // (type, dst)
  struct State {
    std::map<int64_t, Properties> props;
    std::map<int64_t, std::map<Key, Edge>> edges;
  };
  State model;
  std::vector<std::pair<uint64_t, State>> taken;
  const std::vector<int64_t> ids = {3, 10, 17, 24};
  std::mt19937_64 rng(5);
  auto write_some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const int64_t id = ids[rng() % ids.size()];
      const uint64_t dice = rng() % 10;
      const std::string v = std::to_string(rng() % 100);
      if (dice < 5) {
        const Edge e{id,
                     static_cast<int64_t>(rng() % 2),
                     static_cast<int64_t>(rng() % 6),
                     static_cast<int64_t>(rng() % 50),
                     {{"v", v}}};
        ASSERT_TRUE(leader.store().AssocAdd(e).ok());
        model.edges[id][{e.type, e.dst}] = e;
      } else if (dice < 7) {
        const int64_t type = static_cast<int64_t>(rng() % 2), dst = static_cast<int64_t>(rng() % 6);
        ASSERT_TRUE(leader.store().AssocDelete(id, type, dst).ok());
        model.edges[id].erase({type, dst});
      } else if (dice < 9) {
        const Properties p = {{"a", v}};
        ASSERT_TRUE(
            (model.props.count(id) ? leader.store().ObjUpdate(id, p) : leader.store().ObjAdd(id, p))
                .ok());
        model.props[id] = p;
      } else {
        ASSERT_TRUE(leader.store().ObjDelete(id).ok());
        model.props.erase(id);
        model.edges.erase(id);
      }
      if (i % 10 == 9) {
        auto seq = leader.store().Snapshot();
        ASSERT_TRUE(seq.ok()) << seq.status().ToString();
        taken.emplace_back(*seq, model);
      }
    }
  };
  write_some(120);
  auto compacted = leader.store().Compact();
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  const int64_t frozen = nlohmann::json::parse(*compacted)["generation"].get<int64_t>();
  write_some(120);  // deletes and overwrites of what the compaction holds
  WaitForCompaction(leader.store(), frozen);
  WaitForCompaction(*standby_store, frozen);
  write_some(80);
  ASSERT_EQ(standby_store->StatusJson()["writes"], leader.store().StatusJson()["writes"]);

  ASSERT_TRUE(standby_store->Promote(5).ok());
  ASSERT_GE(taken.size(), 30u);
  for (const auto& [seq, state] : taken) {
    ReadAt::Scope at(seq);
    const auto got = NodeSnapshot(*standby_store, ids);
    for (int64_t id : ids) {
      std::vector<Edge> want;
      if (auto e = state.edges.find(id); e != state.edges.end()) {
        for (const auto& [key, edge] : e->second) want.push_back(edge);
      }
      std::sort(want.begin(), want.end(), ByTypeNewestFirst);
      auto p = state.props.find(id);
      EXPECT_EQ(got.at(id).first, p == state.props.end() ? std::nullopt : std::optional(p->second))
          << "node " << id << " at " << seq;
      EXPECT_EQ(got.at(id).second, want) << "node " << id << " at " << seq;
    }
    for (const std::string& v : {"1", "2", "5"}) {
      auto got_ids = standby_store->NodeIds({{"a", v}});
      ASSERT_TRUE(got_ids.ok()) << got_ids.status().ToString();
      std::vector<int64_t> want_ids;
      for (const auto& [id, p] : state.props) {
        if (p == Properties{{"a", v}}) want_ids.push_back(id);
      }
      EXPECT_EQ(*got_ids, want_ids) << "a = " << v << " at " << seq;
    }
  }
}

// A read at a snapshot older than the retention is FAILED_PRECONDITION once the horizon passed
// it (the LogStore's progress `retention` ago); one not yet applied waits within the deadline.
TEST(LogStoreTest, SnapshotsPastTheRetentionAreFailedPrecondition) {
  ScratchDir dir("logstore_snapshot_retention_test");
  ASSERT_TRUE(dir.ok());
  Harness h(dir.path(), nullptr, 0, [](LogStoreOptions* o) {
    o->sync = false;
    o->snapshot_retention_ms = 300;
  });
  const std::vector<int64_t> generations = {1};
  ASSERT_TRUE(h.store().AssocAdd(Edge{1, 0, 2, 10, {{"v", "old"}}}).ok());
  auto first = h.store().Snapshot();
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(h.store().AssocAdd(Edge{1, 0, 2, 10, {{"v", "new"}}}).ok());
  {
    ReadAt::Scope at(*first);
    auto edges = h.store().FragmentEdges(1, 0, generations, {2});
    ASSERT_TRUE(edges.ok()) << edges.status().ToString();
    EXPECT_EQ(*edges, (std::vector<Edge>{{1, 0, 2, 10, {{"v", "old"}}}}));
  }
  // Writes go on past the retention: the horizon moves past the first snapshot.
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(h.store().AssocAdd(Edge{5, 0, i, 1, {}}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  EXPECT_GT(h.store().SnapshotFloor(), *first);
  {
    ReadAt::Scope at(*first);
    EXPECT_EQ(h.store().FragmentEdges(1, 0, generations, {2}).status().code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(h.store().Fragment(1, true, 0, generations).status().code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(h.store().NodeIds({{"a", "b"}}).status().code(), StatusCode::kFailedPrecondition);
  }
  auto second = h.store().Snapshot();
  ASSERT_TRUE(second.ok());
  {
    ReadAt::Scope at(*second);
    auto edges = h.store().FragmentEdges(1, 0, generations, {2});
    ASSERT_TRUE(edges.ok()) << edges.status().ToString();
    EXPECT_EQ(*edges, (std::vector<Edge>{{1, 0, 2, 10, {{"v", "new"}}}}));
  }
  {
    // Not applied yet: waited for until the call's deadline.
    ReadAt::Scope at(*second + (uint64_t{1} << 40));
    CallDeadline::Scope deadline(CallDeadline::Clock::now() + std::chrono::milliseconds(100));
    EXPECT_EQ(h.store().FragmentEdges(1, 0, generations, {2}).status().code(),
              StatusCode::kDeadlineExceeded);
  }
}

// A fragment read names the reading replica's committed id (applied_through): a LogStore that
// has applied less refuses it, so that a replica whose view still names a deposed leader never
// reads an older state of a node than its committed pointers name (docs/consistency.md,
// "Fragment reads").
TEST(LogStoreTest, AFragmentReadPastWhatThisLogStoreAppliedIsRefused) {
  ScratchDir dir("logstore_applied_through_test");
  ASSERT_TRUE(dir.ok());
  Harness h(dir.path(), nullptr, 0, [](LogStoreOptions* o) { o->sync = false; });
  EXPECT_TRUE(h.store().CheckAppliedThrough(0).ok());
  EXPECT_TRUE(h.store().CheckAppliedThrough(-5).ok());  // not a check (an old caller's 0)
  const uint64_t opened = h.store().applied_id();       // (generation << 32) at an empty start
  EXPECT_EQ(h.store().CheckAppliedThrough(static_cast<int64_t>(opened + 1)).code(),
            StatusCode::kUnavailable);
  ASSERT_TRUE(h.store().AssocAdd(Edge{1, 0, 2, 10, {}}).ok());
  const uint64_t first = h.store().applied_id();
  ASSERT_GT(first, 0u);
  ASSERT_TRUE(h.store().AssocAdd(Edge{1, 0, 3, 11, {}}).ok());
  const uint64_t second = h.store().applied_id();
  ASSERT_GT(second, first);
  EXPECT_TRUE(h.store().CheckAppliedThrough(static_cast<int64_t>(first)).ok());
  EXPECT_TRUE(h.store().CheckAppliedThrough(static_cast<int64_t>(second)).ok());
  const Status past = h.store().CheckAppliedThrough(static_cast<int64_t>(second + 1));
  EXPECT_EQ(past.code(), StatusCode::kUnavailable);
  EXPECT_NE(past.message().find(std::to_string(second)), std::string::npos) << past.ToString();
}

// A standby that was down catches up from the leader's log (docs/logstore-ha.md, "Catch-up") and
// is shipped every group again once it has; one that missed a generation the leader has
// compacted is re-seeded with a copy of the leader's directory, then caught up.
TEST(LogStoreTest, AStandbyThatWasDownCatchesUpFromTheLeadersLogs) {
  ScratchDir dir("logstore_catch_up_test");
  ASSERT_TRUE(dir.ok());
  const std::string leader_dir = dir.path() + "/leader", standby_dir = dir.path() + "/standby";
  auto as_standby = [](LogStoreOptions* o) { o->standby = true; };
  auto standby = std::make_unique<Harness>(standby_dir, nullptr, 0, as_standby);
  auto serve = [&](int port) { return ServeShipping(&standby->store(), port); };
  auto receiver = serve(0);
  const std::string endpoint = receiver->endpoint();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  Harness leader(leader_dir, nullptr, 0, [&](LogStoreOptions* o) {
    o->standby_endpoint = endpoint;
    o->ship_timeout_ms = 1000;
  });
  std::vector<int64_t> srcs = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t dst = 0;
  auto write = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const int64_t src = srcs[static_cast<size_t>(i) % srcs.size()];
      ASSERT_TRUE(
          leader.store().AssocAdd(Edge{src, i % 2, ++dst, i, {{"i", std::to_string(i)}}}).ok());
      if (i % 7 == 0) {
        ASSERT_TRUE(leader.store().AssocDelete(src, 0, std::max<int64_t>(dst - 3, 0)).ok());
      }
    }
  };
  auto wait_for = [&](const std::string& state) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (leader.store().StatusJson()["standby"]["sync"] == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "not " << state << ": " << leader.store().StatusJson().dump();
    return false;
  };
  write(50);
  // Down: the leader goes on alone.
  receiver.reset();
  standby.reset();
  write(30);
  ASSERT_TRUE(wait_for("degraded"));
  write(40);
  // Back: within a resync interval it has everything, and groups are shipped again.
  standby = std::make_unique<Harness>(standby_dir, nullptr, 0, as_standby);
  receiver = serve(port);
  ASSERT_TRUE(wait_for("in_sync"));
  write(25);
  EXPECT_EQ(Snapshot(standby->store(), srcs), Snapshot(leader.store(), srcs));
  EXPECT_EQ(leader.store().StatusJson()["standby"]["caught_up"], 1u);

  // Down again, and the leader compacts the generation the standby is in: the standby gets a copy
  // of the leader's directory (re-seeding), then the records logged since, and is in sync again.
  receiver.reset();
  standby.reset();
  write(10);
  ASSERT_TRUE(wait_for("degraded"));
  auto compacted = leader.store().Compact();
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  WaitForCompaction(leader.store(), nlohmann::json::parse(*compacted)["generation"].get<int64_t>());
  write(15);
  // A writer goes on through the re-seed: the live log is copied while it grows.
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::thread writer([&] {
    for (int64_t d = 1; !stop; ++d) {
      if (!leader.store().AssocAdd(Edge{9, 1, d, d, {}}).ok()) ++failed;
    }
  });
  standby = std::make_unique<Harness>(standby_dir, nullptr, 0, as_standby);
  receiver = serve(port);
  const bool in_sync = wait_for("in_sync");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  writer.join();
  ASSERT_TRUE(in_sync);
  EXPECT_EQ(failed.load(), 0);
  srcs.push_back(9);
  write(5);
  const auto status = leader.store().StatusJson();
  EXPECT_EQ(status["standby"]["reseeded"], 1u) << status.dump();
  EXPECT_EQ(status["standby"]["caught_up"], 2u) << status.dump();
  EXPECT_EQ(standby->store().LogShards(), leader.store().LogShards());
  EXPECT_EQ(standby->store().StatusJson()["generation"], status["generation"]);
  const auto want = Snapshot(leader.store(), srcs);
  EXPECT_EQ(Snapshot(standby->store(), srcs), want);
  EXPECT_FALSE(std::filesystem::exists(standby_dir + ".reseed"));
  EXPECT_FALSE(std::filesystem::exists(standby_dir + ".old"));
  // The installed directory is the standby's own from now on: a restart recovers the same.
  receiver.reset();
  standby.reset();
  standby = std::make_unique<Harness>(standby_dir, nullptr, 0, as_standby);
  EXPECT_EQ(Snapshot(standby->store(), srcs), want);
}

// Takeover (docs/logstore-ha.md, "Election and takeover"): the in-sync standby promoted with a
// larger epoch holds every acknowledged write, reaches the base shard with its epoch, and fences
// the old leader (its next group fails and reaches no shard). The old leader, restarted as the
// standby with a tail it logged but never shipped, drops that tail and catches up.
// A standby learns the property names of what it applies (log shards and live log alike), so
// once promoted it holds the same bound as its leader did.
TEST(LogStoreTest, APromotedStandbyKnowsItsLeadersPropertyNames) {
  ScratchDir dir("logstore_takeover_test");
  ASSERT_TRUE(dir.ok());
  auto base = shard::UpdateReceiver::Start(
      "127.0.0.1", 0, [](uint32_t, uint64_t, const std::vector<engine::Update>& updates) {
        return StatusOr<shard::PushAnswer>(
            shard::PushAnswer{false, std::vector<bool>(updates.size(), false)});
      });
  ASSERT_TRUE(base.ok());
  auto b = std::make_unique<Harness>(
      dir.path() + "/b", nullptr, 0, [](LogStoreOptions* o) { o->standby = true; },
      (*base)->endpoint());
  auto b_ship = ServeShipping(&b->store());
  auto a = std::make_unique<Harness>(
      dir.path() + "/a", nullptr, 0,
      [&](LogStoreOptions* o) {
        o->standby_endpoint = b_ship->endpoint();
        o->ship_timeout_ms = 2000;
        o->epoch = 1;
      },
      (*base)->endpoint());
  ASSERT_EQ(a->store().StatusJson()["standby"]["sync"], "in_sync");
  auto add = [](LogStore& store, int i) {
    return store.AssocAdd(Edge{1, 0, i, 0, {{"p" + std::to_string(i), "v"}}}).status();
  };
  for (int i = 0; i < 600; ++i) ASSERT_TRUE(add(a->store(), i).ok()) << i;
  auto frozen = a->store().Compact();  // these names in a log shard, the rest in the live log
  ASSERT_TRUE(frozen.ok());
  WaitForCompaction(a->store(), nlohmann::json::parse(*frozen)["generation"].get<int64_t>());
  for (int i = 600; i < 1024; ++i) ASSERT_TRUE(add(a->store(), i).ok()) << i;
  EXPECT_EQ(add(a->store(), 1024).code(), StatusCode::kResourceExhausted);
  a.reset();
  ASSERT_TRUE(b->store().Promote(2).ok());
  Status s = add(b->store(), 1025);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(add(b->store(), 7).ok()) << "a known name";
}

TEST(LogStoreTest, APromotedStandbyFencesTheOldLeaderWhichRejoinsWithoutItsTail) {
  ScratchDir dir("logstore_takeover_test");
  ASSERT_TRUE(dir.ok());
  const std::string a_dir = dir.path() + "/a", b_dir = dir.path() + "/b";
  // The base shard: a fence, and every edge it was sent.
  auto fence = shard::Fence::Open(dir.path() + "/fence.json");
  ASSERT_TRUE(fence.ok());
  std::mutex base_mu;
  std::set<int64_t> base_dsts;
  auto base = shard::UpdateReceiver::Start(
      "127.0.0.1", 0,
      [&](uint32_t, uint64_t, const std::vector<engine::Update>& updates) {
        std::lock_guard lock(base_mu);
        for (const auto& u : updates) base_dsts.insert(u.dst);
        return StatusOr<shard::PushAnswer>(
            shard::PushAnswer{false, std::vector<bool>(updates.size(), false)});
      },
      {}, fence->get());
  ASSERT_TRUE(base.ok());
  const std::string base_endpoint = (*base)->endpoint();
  auto as_standby = [](LogStoreOptions* o) { o->standby = true; };
  auto b = std::make_unique<Harness>(b_dir, nullptr, 0, as_standby, base_endpoint);
  auto b_ship = ServeShipping(&b->store());
  auto a = std::make_unique<Harness>(
      a_dir, nullptr, 0,
      [&](LogStoreOptions* o) {
        o->standby_endpoint = b_ship->endpoint();
        o->ship_timeout_ms = 500;
        o->epoch = 1;
      },
      base_endpoint);
  ASSERT_EQ(a->store().StatusJson()["standby"]["sync"], "in_sync");
  const std::vector<int64_t> srcs = {1, 2, 3, 4, 5};
  int64_t dst = 0;
  auto write = [&](LogStore& store, int n) {
    for (int i = 0; i < n; ++i) {
      const int64_t src = srcs[static_cast<size_t>(i) % srcs.size()];
      ASSERT_TRUE(store.AssocAdd(Edge{src, 0, ++dst, i, {}}).ok()) << dst;
    }
  };
  write(a->store(), 60);
  auto frozen = a->store().Compact();  // a generation in a log shard, one live
  ASSERT_TRUE(frozen.ok());
  WaitForCompaction(a->store(), nlohmann::json::parse(*frozen)["generation"].get<int64_t>());
  write(a->store(), 40);
  const auto acknowledged = Snapshot(a->store(), srcs);
  const int64_t a_generation = a->store().StatusJson()["generation"].get<int64_t>();

  // B takes over with epoch 2: everything A acknowledged, a new generation, the base fenced.
  ASSERT_TRUE(b->store().Promote(2).ok());
  EXPECT_FALSE(b->store().standby());
  EXPECT_EQ(fence->get()->epoch(0), 2u);
  EXPECT_EQ(b->store().StatusJson()["generation"].get<int64_t>(), a_generation + 1);
  EXPECT_EQ(Snapshot(b->store(), srcs), acknowledged);
  EXPECT_EQ(b->store().Promote(3).code(), StatusCode::kInvalidArgument);  // not a standby now

  // A, paused through the takeover, wakes up: its next write is fenced by B and reaches no one.
  const size_t base_before = [&] {
    std::lock_guard lock(base_mu);
    return base_dsts.size();
  }();
  auto late = a->store().AssocAdd(Edge{1, 0, 9999, 1, {}});
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
  EXPECT_NE(late.status().message().find("fenced"), std::string::npos) << late.status().ToString();
  EXPECT_EQ(a->store().AssocAdd(Edge{1, 0, 9998, 1, {}}).status().code(), StatusCode::kUnavailable);
  {
    std::lock_guard lock(base_mu);
    EXPECT_EQ(base_dsts.size(), base_before);
    EXPECT_EQ(base_dsts.count(9999), 0u);
  }
  EXPECT_EQ(Snapshot(b->store(), srcs), acknowledged);
  write(b->store(), 30);  // B acknowledges alone (no standby yet)

  // A stops; its log gains a tail it never shipped (as if it had logged a group and died before
  // the standby answered). Restarted as the standby, it must drop that tail and catch up.
  a.reset();
  {
    auto wal = Wal::Open(a_dir + "/wal-" + std::to_string(a_generation) + ".log", {});
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    for (int64_t d : {7001, 7002, 7003}) {
      const std::string payload = EncodeRecord(LogRecord{UpdateOp::kPutEdge, 2, 0, d, 1, {}});
      ASSERT_TRUE((*wal)->Append(payload).ok());
    }
  }
  a = std::make_unique<Harness>(a_dir, nullptr, 0, as_standby, base_endpoint);
  ASSERT_EQ(Snapshot(a->store(), {2})[2].size(), acknowledged.at(2).size() + 3);  // the tail
  auto a_ship = ServeShipping(&a->store());
  b->store().AttachStandby(a_ship->endpoint());
  ASSERT_TRUE(InSyncWithin(b->store(), 20)) << b->store().StatusJson().dump();
  write(b->store(), 20);  // shipped to A
  const auto want = Snapshot(b->store(), srcs);
  EXPECT_EQ(Snapshot(a->store(), srcs), want);
  for (const auto& [src, edges] : want) {
    for (const Edge& e : edges) EXPECT_LT(e.dst, 7001) << "a dropped tail came back";
  }
  EXPECT_EQ(a->store().StatusJson()["generation"], b->store().StatusJson()["generation"]);
  {
    std::lock_guard lock(base_mu);
    for (int64_t d : {7001, 7002, 7003, 9998, 9999}) EXPECT_EQ(base_dsts.count(d), 0u) << d;
  }
}

// A takeover right after a compaction ends an empty generation (Promote freezes the live one even
// if it is empty). The old leader, rejoining as the standby in that empty generation, must
// follow the freeze and catch up.
TEST(LogStoreTest, AStandbyFollowsTheEmptyGenerationATakeoverEnded) {
  ScratchDir dir("logstore_takeover_test");
  ASSERT_TRUE(dir.ok());
  const std::string a_dir = dir.path() + "/a", b_dir = dir.path() + "/b";
  // Each LogStore posts to its own stand-in base shard (fencing is not what this test checks).
  auto as_standby = [](LogStoreOptions* o) { o->standby = true; };
  auto b = std::make_unique<Harness>(b_dir, nullptr, 0, as_standby);
  auto b_ship = ServeShipping(&b->store());
  auto a = std::make_unique<Harness>(a_dir, nullptr, 0, [&](LogStoreOptions* o) {
    o->standby_endpoint = b_ship->endpoint();
    o->epoch = 1;
  });
  const std::vector<int64_t> srcs = {1, 2, 3};
  int64_t dst = 0;
  auto write = [&](LogStore& store, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(store.AssocAdd(Edge{srcs[static_cast<size_t>(i) % 3], 0, ++dst, i, {}}).ok());
    }
  };
  write(a->store(), 30);
  auto frozen = a->store().Compact();
  ASSERT_TRUE(frozen.ok());
  WaitForCompaction(a->store(), json::parse(*frozen)["generation"].get<int64_t>());
  const int64_t empty_generation = a->store().StatusJson()["generation"].get<int64_t>();
  a.reset();  // A stops with its live generation empty
  ASSERT_TRUE(b->store().Promote(2).ok());
  EXPECT_EQ(b->store().StatusJson()["generation"].get<int64_t>(), empty_generation + 1);
  write(b->store(), 10);
  a = std::make_unique<Harness>(a_dir, nullptr, 0, as_standby);
  auto a_ship = ServeShipping(&a->store());
  b->store().AttachStandby(a_ship->endpoint());
  ASSERT_TRUE(InSyncWithin(b->store(), 20)) << b->store().StatusJson().dump();
  write(b->store(), 10);
  EXPECT_EQ(a->store().StatusJson()["generation"], b->store().StatusJson()["generation"]);
  EXPECT_EQ(Snapshot(a->store(), srcs), Snapshot(b->store(), srcs));
}

// A layout file holds at most 1024 property names of each kind, and a compaction, a merge or a
// base rebuild writes the names of all its inputs into one: so the LogStore takes at most 1024
// distinct names of each kind (counting the base store's), refusing the write that would bring
// one more with RESOURCE_EXHAUSTED, and remembers them across restarts. (Before, the 1025th name
// made every compaction of its generation fail: "1100 property columns; the layout supports at
// most 1024", the memtable frozen for good.)
TEST(LogStoreTest, DistinctPropertyNamesStayWithinWhatALayoutFileHolds) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  auto with_base = [](LogStoreOptions* o) {
    for (int i = 0; i < 1000; ++i) o->base_node_names.push_back("base" + std::to_string(i));
    o->base_edge_names = {"w"};
  };
  auto name = [](int i) { return "name" + std::to_string(i); };
  {
    FragmentReader reader;
    Harness h(dir.path(), &reader, 0, with_base);
    reader.set_store(&h.store());
    for (int i = 0; i < 24; ++i) {  // 1000 base names + 24 = 1024
      ASSERT_TRUE(h.store().ObjAdd(1000 + i, {{name(i), "v"}, {"base7", "b"}}).ok()) << i;
    }
    Status s = h.store().ObjAdd(2000, {{"base1", "b"}, {name(24), "v"}});
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_NE(s.message().find("at most 1024 distinct node property names"), std::string::npos)
        << s.ToString();
    auto none = h.store().Fragment(2000, false, -1, {1});
    ASSERT_TRUE(none.ok()) << none.status().ToString();
    EXPECT_FALSE(none->properties.has_value()) << "a refused write was applied";
    // Known names go on being taken, and edges count their own names.
    EXPECT_TRUE(h.store().ObjUpdate(1000, {{name(3), "x"}, {"base999", "y"}}).ok());
    for (int i = 0; i < 1023; ++i) {
      auto added = h.store().AssocAdd({1, 0, i, 0, {{"e" + std::to_string(i), "v"}}});
      ASSERT_TRUE(added.ok()) << i << ": " << added.status().ToString();
    }
    // The batch path too: one write refused, its neighbours taken.
    const auto outcomes =
        h.store().WriteBatch({{zipg::Write::Op::kAssocAdd, 2, 0, 1, 0, {{"w", "1"}}},
                              {zipg::Write::Op::kAssocAdd, 2, 0, 2, 0, {{"one too many", "1"}}},
                              {zipg::Write::Op::kAssocAdd, 2, 0, 3, 0, {{"e5", "1"}}}});
    ASSERT_EQ(outcomes.size(), 3u);
    EXPECT_TRUE(outcomes[0].ok()) << outcomes[0].status().ToString();
    EXPECT_EQ(outcomes[1].status().code(), StatusCode::kResourceExhausted)
        << outcomes[1].status().ToString();
    EXPECT_TRUE(outcomes[2].ok()) << outcomes[2].status().ToString();
    // Everything taken compacts.
    auto started = h.store().Compact();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    WaitForCompaction(h.store(), json::parse(*started)["generation"].get<int64_t>());
    EXPECT_FALSE(h.store().StatusJson().contains("last_error")) << h.store().StatusJson().dump();
  }
  // After a restart (without the base names: the LogStore kept them), the names are still
  // known, and the bound still holds.
  FragmentReader reader;
  Harness h(dir.path(), &reader);
  reader.set_store(&h.store());
  EXPECT_TRUE(h.store().ObjAdd(3000, {{"base5", "v"}, {name(20), "v"}}).ok());
  EXPECT_EQ(h.store().ObjAdd(3001, {{name(24), "v"}}).code(), StatusCode::kResourceExhausted);
  auto edge = h.store().AssocAdd({3, 0, 1, 0, {{"e1", "v"}}});
  EXPECT_TRUE(edge.ok()) << edge.status().ToString();
  EXPECT_EQ(h.store().AssocAdd({3, 0, 2, 0, {{"brand new", "v"}}}).status().code(),
            StatusCode::kResourceExhausted);
  auto started = h.store().Compact();
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  WaitForCompaction(h.store(), json::parse(*started)["generation"].get<int64_t>());
}

// Conditional writes (docs/writes.md, "Conditional writes: the live generation first"): a target
// live in the live generation decides the check without a read; anything else (new, deleted
// there, or only in an older generation) reads. The outcomes are the contract's either way.
TEST(LogStoreTest, ConditionalWritesReadOnlyWhatTheLiveGenerationCannotDecide) {
  ScratchDir dir("logstore_conditional_test");
  ASSERT_TRUE(dir.ok());
  FragmentReader reader;
  Harness h(dir.path(), &reader);
  reader.set_store(&h.store());
  LogStore& store = h.store();
  const uint64_t r0 = reader.reads();
  // New everywhere: obj_add reads (the base may hold the node).
  ASSERT_TRUE(store.ObjAdd(5, {{"a", "1"}}).ok());
  EXPECT_EQ(reader.reads(), r0 + 1);
  // Live here: an update, and a second add, decide without a read.
  EXPECT_TRUE(store.ObjUpdate(5, {{"a", "2"}}).ok());
  EXPECT_EQ(store.ObjAdd(5, {{"a", "3"}}).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(store.AssocAdd(Edge{5, 1, 9, 10, {}}).ok());
  EXPECT_TRUE(store.AssocUpdate(Edge{5, 1, 9, 11, {{"p", "q"}}}).ok());
  EXPECT_EQ(reader.reads(), r0 + 1);
  // Deleted here: the memtable keeps no tombstone, so the check reads, and the read says absent.
  ASSERT_TRUE(store.AssocDelete(5, 1, 9).ok());
  EXPECT_EQ(store.AssocUpdate(Edge{5, 1, 9, 12, {}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(reader.reads(), r0 + 2);
  // A node delete takes its properties and edges out of the memtable too.
  ASSERT_TRUE(store.AssocAdd(Edge{5, 2, 7, 10, {}}).ok());
  ASSERT_TRUE(store.ObjDelete(5).ok());
  EXPECT_EQ(store.AssocUpdate(Edge{5, 2, 7, 13, {}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(store.ObjUpdate(5, {{"a", "4"}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(reader.reads(), r0 + 4);

  // Live only in an older generation: only the read can say so.
  ASSERT_TRUE(store.ObjAdd(6, {{"b", "1"}}).ok());
  ASSERT_TRUE(store.AssocAdd(Edge{6, 1, 3, 10, {}}).ok());
  auto started = store.Compact();
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  WaitForCompaction(store, json::parse(*started)["generation"].get<int64_t>());
  const uint64_t r1 = reader.reads();
  EXPECT_TRUE(store.ObjUpdate(6, {{"b", "2"}}).ok());
  EXPECT_TRUE(store.AssocUpdate(Edge{6, 1, 3, 14, {}}).ok());
  EXPECT_EQ(reader.reads(), r1 + 2);
  EXPECT_EQ(store.ObjAdd(6, {{"b", "x"}}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(reader.reads(), r1 + 2);  // rewritten: live here again

  // A batch of node writes (CommitNodeWrites) asks the same way: 6 is live here, 8 is new.
  std::vector<zipg::Write> batch(3);
  batch[0].op = zipg::Write::Op::kObjUpdate;
  batch[0].id = 6;
  batch[0].properties = {{"b", "3"}};
  batch[1].op = zipg::Write::Op::kObjAdd;
  batch[1].id = 8;
  batch[1].properties = {{"c", "1"}};
  batch[2].op = zipg::Write::Op::kObjUpdate;
  batch[2].id = 5;
  batch[2].properties = {{"a", "5"}};
  const auto out = store.WriteBatch(batch);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].ok()) << out[0].status().ToString();
  EXPECT_TRUE(out[1].ok()) << out[1].status().ToString();
  EXPECT_EQ(out[2].status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reader.reads(), r1 + 4);

  // What the store holds is what the contract says.
  const auto got = NodeSnapshot(store, {5, 6, 8});
  EXPECT_EQ(got.at(5).first, std::nullopt);
  EXPECT_TRUE(got.at(5).second.empty());
  EXPECT_EQ(got.at(6).first, std::optional<Properties>(Properties{{"b", "3"}}));
  ASSERT_EQ(got.at(6).second.size(), 1u);
  EXPECT_EQ(got.at(6).second[0].timestamp, 14);
  EXPECT_EQ(got.at(8).first, std::optional<Properties>(Properties{{"c", "1"}}));
}

}  // namespace
}  // namespace zipg::logstore
