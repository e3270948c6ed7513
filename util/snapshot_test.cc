// util/snapshot.h: the version log against a plain history of values, the retention clock's
// horizon, and the pins that hold pruning back.

#include "util/snapshot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace zipg {
namespace {

// Random changes of a few keys; the value at every id, after every prune, is the value the
// plain history had then.
TEST(VersionLogTest, TheValueAtASnapshotIsTheOneBeforeItsOldestLaterChange) {
  std::mt19937_64 rng(3);
  VersionLog<int, int> log;
  std::map<int, std::shared_ptr<const int>> current;
  std::vector<std::pair<uint64_t, std::map<int, std::shared_ptr<const int>>>> states;
  states.emplace_back(0, current);
  std::vector<std::pair<uint64_t, int>> changes;  // (id, key)
  uint64_t id = 10;
  for (int i = 0; i < 2000; ++i) {
    const int key = static_cast<int>(rng() % 6);
    id += 1 + rng() % 4;
    log.Record(key, id, current[key]);
    changes.emplace_back(id, key);
    current[key] = rng() % 5 == 0 ? nullptr : std::make_shared<const int>(i);
    states.emplace_back(id, current);
  }
  auto value = [](const std::shared_ptr<const int>& v) { return v ? *v : -1; };
  auto check_from = [&](size_t first) {
    for (size_t s = first; s < states.size(); ++s) {
      const uint64_t at = states[s].first;  // not a structured binding: clang 14 cannot capture one
      const auto& state = states[s].second;
      for (int key = 0; key < 6; ++key) {
        auto it = state.find(key);
        const int want = it == state.end() ? -1 : value(it->second);
        ASSERT_EQ(value(log.At(key, at == 0 ? 1 : at, current[key])), want)
            << "key " << key << " at " << at;
        const bool changed = std::any_of(changes.begin(), changes.end(), [&](const auto& c) {
          return c.second == key && c.first > at;
        });
        EXPECT_EQ(log.ChangedAfter(key, at), changed) << "key " << key << " at " << at;
      }
    }
  };
  check_from(1);
  // Latest reads (at 0) are the current values.
  for (int key = 0; key < 6; ++key) EXPECT_EQ(log.At(key, 0, current[key]), current[key]);
  const size_t half = states.size() / 2;
  const size_t before = log.changes();
  log.Prune(states[half].first);
  EXPECT_LT(log.changes(), before);
  check_from(half);
  log.Prune(states.back().first);
  EXPECT_TRUE(log.empty());
  EXPECT_TRUE(log.KeysChangedAfter(0).empty());
}

TEST(RetentionClockTest, TheHorizonIsTheProgressOneRetentionAgo) {
  RetentionClock clock(std::chrono::milliseconds(200));
  clock.Note(5);
  EXPECT_EQ(clock.Horizon(), 0u);  // less than a retention since the first sample
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  clock.Note(9);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  // 240 ms after 5 and 120 ms after 9: the progress 200 ms ago was 5.
  EXPECT_EQ(clock.Horizon(), 5u);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(clock.Horizon(), 9u);
  clock.Note(7);  // ids never go back
  EXPECT_EQ(clock.Horizon(), 9u);
}

TEST(SnapshotPinsTest, TheOldestRunningReadHoldsPruningBack) {
  SnapshotPins pins;
  EXPECT_EQ(pins.Oldest(), UINT64_MAX);
  {
    SnapshotPins::Scope a(&pins, 40);
    {
      SnapshotPins::Scope b(&pins, 30), c(&pins, 30), latest(&pins, 0);
      EXPECT_EQ(pins.Oldest(), 30u);
    }
    EXPECT_EQ(pins.Oldest(), 40u);
  }
  EXPECT_EQ(pins.Oldest(), UINT64_MAX);
}

TEST(ReadAtTest, ScopesNestAndRestore) {
  EXPECT_EQ(ReadAt::Current(), 0u);
  {
    ReadAt::Scope a(7);
    EXPECT_EQ(ReadAt::Current(), 7u);
    {
      ReadAt::Scope b(0);
      EXPECT_EQ(ReadAt::Current(), 0u);
    }
    EXPECT_EQ(ReadAt::Current(), 7u);
    std::thread([] { EXPECT_EQ(ReadAt::Current(), 0u); }).join();  // per thread
  }
  EXPECT_EQ(ReadAt::Current(), 0u);
}

}  // namespace
}  // namespace zipg
