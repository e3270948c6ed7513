// Tests of the shard map (membership.h), replica placement (placement.h) and members' JSON.
#include "cluster/membership.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/placement.h"

namespace zipg::cluster {
namespace {

MemberInfo Shard(std::string name, std::vector<uint32_t> shards, uint32_t n = 4) {
  MemberInfo m;
  m.name = std::move(name);
  m.role = "shard";
  m.endpoint = rpc::Endpoint{"127.0.0.1", 1000 + static_cast<int>(m.name.size())};
  m.num_shards = n;
  m.shards = std::move(shards);
  return m;
}

TEST(ShardMapTest, RoutesEveryShardAndReportsGaps) {
  MemberInfo agg;
  agg.name = "agg";
  agg.role = "aggregator";
  agg.endpoint = rpc::Endpoint{"127.0.0.1", 9};
  auto map = ShardMap::Build({Shard("s1", {1, 3}), agg, Shard("s0", {0})}, 5);
  EXPECT_EQ(map->num_shards, 4u);
  EXPECT_EQ(map->Unserved(), std::vector<uint32_t>{2});
  EXPECT_EQ((*map->Pick(0))->name, "s0");
  EXPECT_EQ((*map->Pick(3))->name, "s1");
  auto missing = map->Pick(2);
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("shard 2"), std::string::npos);
  EXPECT_EQ(map->Pick(7).status().code(), StatusCode::kUnavailable);
}

TEST(ShardMapTest, ReplicasAreTakenInTurn) {
  auto map = ShardMap::Build({Shard("a", {0, 1, 2, 3}), Shard("bb", {0})}, 1);
  std::map<std::string, int> seen;
  for (int i = 0; i < 10; ++i) seen[(*map->Pick(0))->name]++;
  EXPECT_EQ(seen["a"], 5);
  EXPECT_EQ(seen["bb"], 5);
}

TEST(ShardMapTest, OnlyServingReplicasTakeReadsAndAvoidPicksAnother) {
  auto catching_up = Shard("c", {0, 1});
  catching_up.serving = false;
  auto map = ShardMap::Build({Shard("a", {0}), Shard("bb", {0, 2, 3}), catching_up}, 1);
  EXPECT_EQ(map->replicas[0].size(), 3u);                // updates go to all three
  EXPECT_EQ(map->owners[0].size(), 2u);                  // reads to the two serving ones
  EXPECT_EQ(map->Unserved(), std::vector<uint32_t>{1});  // only a catching-up replica
  for (int i = 0; i < 6; ++i) {
    EXPECT_NE((*map->Pick(0))->name, "c");
    EXPECT_EQ((*map->Pick(0, "a"))->name, "bb");
    EXPECT_EQ((*map->Pick(0, "bb"))->name, "a");
  }
  auto only = map->Pick(2, "bb");
  EXPECT_EQ(only.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(only.status().message().find("no other live server"), std::string::npos);
  // "serving" survives the etcd entry's JSON; entries without it (older servers) serve.
  auto back = MemberInfo::FromJson(catching_up.ToJson().dump());
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->serving);
  auto j = Shard("d", {0}).ToJson();
  j.erase("serving");
  EXPECT_TRUE(MemberInfo::FromJson(j.dump())->serving);
}

TEST(PlacementTest, ReplicasOfAShardAreOnDifferentServersAndLoadsAreEven) {
  for (uint32_t shards : {1u, 4u, 7u, 16u}) {
    for (uint32_t servers = 1; servers <= 6; ++servers) {
      for (uint32_t r = 1; r <= 3; ++r) {
        auto placed = PlaceReplicas(shards, servers, r);
        if (r > servers) {
          EXPECT_EQ(placed.status().code(), StatusCode::kInvalidArgument);
          continue;
        }
        ASSERT_TRUE(placed.ok());
        std::map<uint32_t, int> copies;
        size_t lo = SIZE_MAX, hi = 0;
        for (const auto& held : *placed) {
          EXPECT_TRUE(std::adjacent_find(held.begin(), held.end()) == held.end())
              << "two copies of a shard on one server";
          for (uint32_t s : held) copies[s]++;
          lo = std::min(lo, held.size());
          hi = std::max(hi, held.size());
        }
        for (uint32_t s = 0; s < shards; ++s) EXPECT_EQ(copies[s], static_cast<int>(r));
        EXPECT_LE(hi - lo, 1u) << shards << " shards, " << servers << " servers, R " << r;
      }
    }
  }
}

TEST(ShardMapTest, DisagreeingShardCountsMakeEveryRouteUnavailable) {
  // 3 is no split of 2: no layout has both.
  auto map = ShardMap::Build({Shard("a", {0, 1}, 2), Shard("b", {0, 1, 2}, 3)}, 1);
  EXPECT_FALSE(map->problem.empty());
  EXPECT_EQ(map->Pick(0).status().code(), StatusCode::kUnavailable);
  auto empty = ShardMap::Build({}, 1);
  EXPECT_EQ(empty->Pick(0).status().code(), StatusCode::kUnavailable);
}

// Around a split (docs/cluster-changes.md, step 4): before the layout key, the map has the
// smallest count and a member that switched covers each of its shards whose every part it hosts;
// after it, the map has the key's count and a member that has not switched is left out.
TEST(ShardMapTest, MembersThatSwitchedCoverTheShardsOfTheOldCountUntilTheLayoutKey) {
  const std::vector<MemberInfo> members = {Shard("a", {0, 1}, 2), Shard("b", {0, 1, 2, 3}, 4),
                                           Shard("c", {1, 3}, 4), Shard("d", {0, 2, 3}, 4)};
  auto before = ShardMap::Build(members, 1);
  EXPECT_TRUE(before->problem.empty()) << before->problem;
  ASSERT_EQ(before->num_shards, 2u);
  auto names = [&](const ShardMap& m, const std::vector<size_t>& list) {
    std::vector<std::string> out;
    for (size_t i : list) out.push_back(m.members[i].name);
    return out;
  };
  // Shard 0 of 2 is 0 and 2 of 4; shard 1 is 1 and 3.
  EXPECT_EQ(names(*before, before->owners[0]), (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_EQ(names(*before, before->owners[1]), (std::vector<std::string>{"a", "b", "c"}));
  auto after = ShardMap::Build(members, 1, /*layout=*/4);
  EXPECT_TRUE(after->problem.empty()) << after->problem;
  ASSERT_EQ(after->num_shards, 4u);
  EXPECT_EQ(names(*after, after->owners[0]), (std::vector<std::string>{"b", "d"}));
  EXPECT_EQ(names(*after, after->owners[1]), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(names(*after, after->replicas[3]), (std::vector<std::string>{"b", "c", "d"}));
}

// A shard being added to a serving server (docs/cluster-changes.md, step 2) gets updates but no
// reads until it has caught up; its other shards serve meanwhile.
TEST(ShardMapTest, AShardCatchingUpOnAServingServerTakesUpdatesButNoReads) {
  auto adding = Shard("c", {0, 1});
  adding.catching_up = {0};
  auto map = ShardMap::Build({Shard("a", {0}), adding}, 1);
  EXPECT_EQ(map->replicas[0].size(), 2u);  // updates go to both
  ASSERT_EQ(map->owners[0].size(), 1u);    // reads only to a
  EXPECT_EQ(map->members[map->owners[0][0]].name, "a");
  ASSERT_EQ(map->owners[1].size(), 1u);  // c serves its other shard
  EXPECT_EQ(map->members[map->owners[1][0]].name, "c");
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*map->Pick(0))->name, "a");
  EXPECT_EQ(map->Pick(0, "a").status().code(), StatusCode::kUnavailable);
  // The field survives the entry's JSON, and is absent (none catching up) when empty.
  auto back = MemberInfo::FromJson(adding.ToJson().dump());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->catching_up, std::vector<uint32_t>{0});
  EXPECT_FALSE(Shard("d", {0}).ToJson().contains("catching_up"));
  EXPECT_TRUE(MemberInfo::FromJson(Shard("d", {0}).ToJson().dump())->catching_up.empty());
  // Once caught up it takes reads too.
  adding.catching_up.clear();
  map = ShardMap::Build({Shard("a", {0}), adding}, 2);
  EXPECT_EQ(map->owners[0].size(), 2u);
}

TEST(MemberInfoTest, JsonRoundTripAndBadEntries) {
  auto m = Shard("s", {2, 0});
  m.store = "/x";
  m.pid = 42;
  auto back = MemberInfo::FromJson(m.ToJson().dump());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, "s");
  EXPECT_EQ(back->shards, (std::vector<uint32_t>{2, 0}));
  EXPECT_EQ(back->endpoint.ToString(), m.endpoint.ToString());
  EXPECT_EQ(back->pid, 42);
  for (const char* bad : {"", "[]", "{}", "{\"name\":\"a\",\"role\":\"shard\",\"endpoint\":\"x\"}",
                          "{\"name\":1,\"role\":\"shard\",\"endpoint\":\"h:1\"}"}) {
    EXPECT_FALSE(MemberInfo::FromJson(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace zipg::cluster
