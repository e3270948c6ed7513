// LogStore commit groups, in-process: concurrent writers to the same keys must leave a state that
// recovery rebuilds exactly (log order = apply order), and a freeze in the middle of a stream of
// writes must lose nothing. The base shard is a stand-in UpdateReceiver that owns no data (every
// update finds nothing there); the real shard side is covered by tests/writes_test.py.

#include "logstore/logstore.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

#include "shard/update_channel.h"
#include "util/scratch_dir.h"

namespace zipg::logstore {
namespace {

// A LogStore on `dir` whose one base shard accepts every update and holds nothing.
class Harness {
 public:
  explicit Harness(const std::string& dir) {
    auto receiver = shard::UpdateReceiver::Start(
        "127.0.0.1", 0, [this](uint32_t, const std::vector<shard::Update>& updates) {
          received_ += updates.size();
          return StatusOr<std::vector<bool>>(std::vector<bool>(updates.size(), false));
        });
    EXPECT_TRUE(receiver.ok()) << receiver.status().ToString();
    receiver_ = std::move(*receiver);
    const std::string endpoint = receiver_->endpoint();
    sender_ = std::make_unique<shard::UpdateSender>(
        1, [endpoint](uint32_t) { return StatusOr<std::string>(endpoint); });
    LogStoreOptions options;
    options.dir = dir;
    options.memtable_bytes = 0;
    auto store = LogStore::Open(options, nullptr, sender_.get(), [](std::vector<int64_t>) {});
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
std::map<int64_t, std::vector<Edge>> Snapshot(LogStore& store, const std::vector<int64_t>& srcs) {
  std::vector<int64_t> generations = store.LogShards();
  const int64_t live = store.StatusJson()["generation"].get<int64_t>();
  generations.push_back(live);
  generations.push_back(live - 1);  // a frozen generation, if any
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
            Edge e{src, type, dst, static_cast<int64_t>(rng() % 4),
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

// The bounded fragment reads agree with the full fragment, with the node's edges spread over a log
// shard (some of them deleted since, some overwritten) and the live memtable: Fragment with a
// limit is its first `limit` edges, FragmentEdges its edges to the asked dsts, FragmentCount its
// size.
TEST(LogStoreTest, BoundedFragmentReadsAgreeWithTheFullOne) {
  ScratchDir dir("logstore_test");
  ASSERT_TRUE(dir.ok());
  Harness h(dir.path());
  LogStore& store = h.store();
  std::mt19937_64 rng(5);
  const std::vector<int64_t> srcs = {3, 4};
  auto write_some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Edge e{srcs[rng() % 2], static_cast<int64_t>(rng() % 2), static_cast<int64_t>(rng() % 60),
             static_cast<int64_t>(rng() % 20), {{"i", std::to_string(rng() % 1000)}}};
      ASSERT_TRUE(store.AssocAdd(e).ok());
    }
  };
  write_some(300);
  ASSERT_TRUE(store.Compact().ok());
  WaitForCompaction(store, 1);
  for (int i = 0; i < 40; ++i) {  // deletes of keys now in the log shard
    ASSERT_TRUE(store.AssocDelete(srcs[rng() % 2], static_cast<int64_t>(rng() % 2),
                                  static_cast<int64_t>(rng() % 60))
                    .ok());
  }
  write_some(150);
  const std::vector<int64_t> generations = {1, 2};
  for (int64_t src : srcs) {
    for (int64_t type : {0, 1, 2}) {
      auto full = store.Fragment(src, false, type, generations);
      ASSERT_TRUE(full.ok()) << full.status().ToString();
      std::sort(full->edges.begin(), full->edges.end(), NewestFirst);
      if (type < 2) {
        EXPECT_GT(full->edges.size(), 20u);
      }
      for (int64_t limit : std::vector<int64_t>{0, 1, 2, 7, 30, 1000,
                                                std::numeric_limits<int64_t>::max()}) {
        auto bounded = store.Fragment(src, false, type, generations, limit);
        ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
        const size_t n = std::min<size_t>(full->edges.size(), static_cast<size_t>(limit));
        EXPECT_EQ(bounded->edges, std::vector<Edge>(full->edges.begin(), full->edges.begin() + n))
            << "node " << src << " type " << type << " limit " << limit;
        EXPECT_FALSE(bounded->properties.has_value());
      }
      auto count = store.FragmentCount(src, type, generations);
      ASSERT_TRUE(count.ok()) << count.status().ToString();
      EXPECT_EQ(*count, static_cast<int64_t>(full->edges.size())) << src << " " << type;
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
        EXPECT_EQ(*got, want) << "node " << src << " type " << type << " round " << round;
      }
    }
  }
  EXPECT_EQ(store.Fragment(3, true, 0, generations, 5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Fragment(3, false, -1, generations, 5).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zipg::logstore
