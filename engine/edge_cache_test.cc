// Tests of EdgeCache (engine/edge_cache.h): every answer equals the edges the input graph holds,
// whether it came from the cache, from the shard, or from both in one call; a repeated ask is
// answered from the cache; the held bytes stay within the capacity; capacity 0 holds nothing; a
// scan that does not fill leaves the cache as it was; concurrent callers get right answers.
#include "engine/edge_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "graph/compress.h"
#include "graph/graph.h"
#include "util/scratch_dir.h"

namespace zipg::engine {
namespace {

constexpr int64_t kHot = 3;  // its type-1 record is large (it has a destination index)

struct Fixture {
  ScratchDir dir{"edge_cache_test"};
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, Edge>> model;  // (src, type) -> dst
  std::unique_ptr<layout::Shard> shard;

  void Build() {
    std::mt19937_64 rng(11);
    graph::InputGraph input;
    input.edge_property_names = {"w"};
    auto add = [&](int64_t src, int64_t type, int64_t dst, int64_t ts) {
      if (model[{src, type}].count(dst)) return;
      const std::string w = "v" + std::to_string(rng() % 100000) + std::string(rng() % 40, 'x');
      input.edges.push_back({src, dst, type, ts, {{0, w}}});
      model[{src, type}][dst] = Edge{src, type, dst, ts, {{"w", w}}};
    };
    for (int64_t src = 0; src < 30; ++src) {
      for (int k = 0; k < static_cast<int>(rng() % 10); ++k) {
        add(src, static_cast<int64_t>(rng() % 3), static_cast<int64_t>(rng() % 60),
            static_cast<int64_t>(rng() % 50));
      }
    }
    while (model[{kHot, 1}].size() < 2000) {
      add(kHot, 1, static_cast<int64_t>(rng() % 100000), static_cast<int64_t>(rng() % 5000));
    }
    graph::CompressOptions options;
    options.shards = 1;
    options.edge_file.blocks = {1024, 1, 4096};  // small blocks: records span them
    ASSERT_TRUE(graph::CompressGraph(input, dir.File("store"), options, {}, nullptr).ok());
    auto store = OpenStore(dir.File("store"), {}, nullptr);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    shard = std::move(store->shards[0]);
  }

  // A random ask: (src, type) and destinations, some present, some not, some repeated.
  std::tuple<int64_t, int64_t, std::vector<int64_t>> Ask(std::mt19937_64& rng) const {
    const bool hot = rng() % 3 == 0;
    const int64_t src = hot ? kHot : static_cast<int64_t>(rng() % 32);
    const int64_t type = hot ? 1 : static_cast<int64_t>(rng() % 3);
    std::vector<int64_t> dsts;
    auto it = model.find({src, type});
    for (int k = 0, n = 1 + static_cast<int>(rng() % (hot ? 12 : 5)); k < n; ++k) {
      if (it != model.end() && rng() % 4 != 0) {
        auto d = it->second.begin();
        std::advance(d, static_cast<long>(rng() % it->second.size()));
        dsts.push_back(d->first);
      } else {
        dsts.push_back(static_cast<int64_t>(rng() % 100000));
      }
    }
    if (rng() % 5 == 0) dsts.push_back(dsts.front());
    // A whole small record now and then (the path that reads every destination).
    if (!hot && it != model.end() && rng() % 4 == 0) {
      for (const auto& [dst, e] : it->second) dsts.push_back(dst);
    }
    return {src, type, dsts};
  }

  // The edges the input holds for the ask, by destination.
  std::map<int64_t, Edge> Expected(int64_t src, int64_t type,
                                   const std::vector<int64_t>& dsts) const {
    std::map<int64_t, Edge> out;
    auto it = model.find({src, type});
    if (it == model.end()) return out;
    for (int64_t d : dsts) {
      auto e = it->second.find(d);
      if (e != it->second.end()) out[d] = e->second;
    }
    return out;
  }

  static std::map<int64_t, Edge> ByDst(const std::vector<Edge>& edges) {
    std::map<int64_t, Edge> out;
    for (const Edge& e : edges) EXPECT_TRUE(out.emplace(e.dst, e).second) << "repeated " << e.dst;
    return out;
  }
};

TEST(EdgeCacheTest, AnswersEqualTheInputAndARepeatedAskIsAHit) {
  Fixture f;
  f.Build();
  if (testing::Test::HasFatalFailure()) return;
  EdgeCache cache(64 << 20);
  std::mt19937_64 rng(3);
  std::vector<std::tuple<int64_t, int64_t, std::vector<int64_t>>> asks;
  for (int i = 0; i < 300; ++i) asks.push_back(f.Ask(rng));
  for (const auto& [src, type, dsts] : asks) {
    auto got = cache.Get(*f.shard, src, type, dsts);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(Fixture::ByDst(*got), f.Expected(src, type, dsts)) << src << "/" << type;
  }
  const auto first = cache.stats();
  EXPECT_GT(first.misses, 0u);
  EXPECT_GT(first.entries, 0u);
  EXPECT_LE(first.bytes, first.capacity);
  // The same asks again: every destination is known now, present or absent.
  for (const auto& [src, type, dsts] : asks) {
    auto got = cache.Get(*f.shard, src, type, dsts);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Fixture::ByDst(*got), f.Expected(src, type, dsts));
  }
  const auto second = cache.stats();
  EXPECT_EQ(second.misses, first.misses);
  uint64_t asked = 0;
  for (const auto& [src, type, dsts] : asks) {
    asked += std::set<int64_t>(dsts.begin(), dsts.end()).size();
  }
  EXPECT_EQ(second.hits - first.hits, asked);
  // Known and unknown destinations of one record in one call.
  const auto& hot = f.model.at({kHot, 1});
  std::vector<int64_t> mixed;
  for (auto it = hot.begin(); mixed.size() < 40; ++it) mixed.push_back(it->first);
  auto part = cache.Get(*f.shard, kHot, 1, {mixed.begin(), mixed.begin() + 20});
  ASSERT_TRUE(part.ok());
  auto whole = cache.Get(*f.shard, kHot, 1, mixed);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(Fixture::ByDst(*whole), f.Expected(kHot, 1, mixed));
}

TEST(EdgeCacheTest, HeldBytesStayWithinTheCapacity) {
  Fixture f;
  f.Build();
  if (testing::Test::HasFatalFailure()) return;
  for (uint64_t capacity : {uint64_t{0}, uint64_t{256}, uint64_t{4096}, uint64_t{64} << 10}) {
    EdgeCache cache(capacity);
    std::mt19937_64 rng(capacity + 1);
    for (int i = 0; i < 400; ++i) {
      auto [src, type, dsts] = f.Ask(rng);
      auto got = cache.Get(*f.shard, src, type, dsts);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(Fixture::ByDst(*got), f.Expected(src, type, dsts)) << capacity;
      EXPECT_LE(cache.stats().bytes, capacity);
    }
    if (capacity <= 256) {  // not even a record's location fits in an eighth of it
      EXPECT_EQ(cache.stats().entries, 0u);
      EXPECT_EQ(cache.stats().hits, 0u);
    } else {
      EXPECT_GT(cache.stats().entries, 0u) << capacity;
    }
  }
}

TEST(EdgeCacheTest, AScanThatDoesNotFillLeavesTheCacheAsItWas) {
  Fixture f;
  f.Build();
  if (testing::Test::HasFatalFailure()) return;
  EdgeCache cache(64 << 20);
  std::mt19937_64 rng(9);
  auto [src, type, dsts] = f.Ask(rng);
  ASSERT_TRUE(cache.Get(*f.shard, src, type, dsts).ok());
  const auto before = cache.stats();
  // A scan of every record: right answers, nothing added; what was cached still answers.
  for (const auto& [key, edges] : f.model) {
    std::vector<int64_t> all;
    for (const auto& [dst, e] : edges) all.push_back(dst);
    auto got = cache.Get(*f.shard, key.first, key.second, all, /*fill=*/false);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Fixture::ByDst(*got), f.Expected(key.first, key.second, all));
  }
  EXPECT_EQ(cache.stats().entries, before.entries);
  EXPECT_EQ(cache.stats().bytes, before.bytes);
  EXPECT_EQ(cache.stats().hits, before.hits);  // nor counted
  EXPECT_EQ(cache.stats().misses, before.misses);
  const uint64_t hits = cache.stats().hits;
  ASSERT_TRUE(cache.Get(*f.shard, src, type, dsts).ok());
  EXPECT_EQ(cache.stats().hits - hits, std::set<int64_t>(dsts.begin(), dsts.end()).size());
}

TEST(EdgeCacheTest, ForgetDropsEveryEntryOfOneShard) {
  Fixture f;
  f.Build();
  if (testing::Test::HasFatalFailure()) return;
  EdgeCache cache(64 << 20);
  std::mt19937_64 rng(21);
  std::vector<std::tuple<int64_t, int64_t, std::vector<int64_t>>> asks;
  for (int i = 0; i < 50; ++i) asks.push_back(f.Ask(rng));
  for (const auto& [src, type, dsts] : asks) ASSERT_TRUE(cache.Get(*f.shard, src, type, dsts).ok());
  ASSERT_GT(cache.stats().entries, 0u);
  cache.Forget(nullptr);  // another shard: nothing of this one goes
  EXPECT_GT(cache.stats().entries, 0u);
  cache.Forget(f.shard.get());
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
  // Asked again: read anew, still right.
  const uint64_t misses = cache.stats().misses;
  for (const auto& [src, type, dsts] : asks) {
    auto got = cache.Get(*f.shard, src, type, dsts);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Fixture::ByDst(*got), f.Expected(src, type, dsts));
  }
  EXPECT_GT(cache.stats().misses, misses);
}

TEST(EdgeCacheTest, ConcurrentCallersGetRightAnswers) {
  Fixture f;
  f.Build();
  if (testing::Test::HasFatalFailure()) return;
  EdgeCache cache(32 << 10);  // small: entries come and go while others read them
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < 300; ++i) {
        auto [src, type, dsts] = f.Ask(rng);
        auto got = cache.Get(*f.shard, src, type, dsts);
        if (!got.ok() || Fixture::ByDst(*got) != f.Expected(src, type, dsts)) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
  EXPECT_GT(cache.stats().hits, 0u);
}

}  // namespace
}  // namespace zipg::engine
