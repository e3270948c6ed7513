// Tests of util/persistent_map.h against std::map: random inserts and erases with every query
// checked after each step, old versions unchanged by later ones, readers on snapshots while a
// writer changes the map, and every node freed when the last version goes.

#include "util/persistent_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace zipg {
namespace {

// A value that counts its live instances, to find leaked or doubly freed nodes.
struct Counted {
  static std::atomic<int64_t> live;
  int64_t v = 0;
  Counted(int64_t x = 0) : v(x) { ++live; }  // NOLINT: implicit on purpose (tests)
  Counted(const Counted& o) : v(o.v) { ++live; }
  Counted& operator=(const Counted& o) = default;
  ~Counted() { --live; }
  bool operator==(const Counted& o) const { return v == o.v; }
};
std::atomic<int64_t> Counted::live{0};

using Map = PersistentMap<int64_t, Counted>;

// Every query of `m` against the reference.
void ExpectSame(const Map& m, const std::map<int64_t, int64_t>& ref, std::mt19937_64& rng) {
  ASSERT_EQ(m.size(), ref.size());
  ASSERT_EQ(m.empty(), ref.empty());
  size_t i = 0;
  for (const auto& [k, v] : ref) {
    auto [key, value] = m.At(i);
    ASSERT_EQ(key, k) << "rank " << i;
    ASSERT_EQ(value.v, v);
    ++i;
  }
  for (int probe = 0; probe < 20; ++probe) {
    const int64_t k = static_cast<int64_t>(rng() % 400) - 100;
    const Counted* found = m.Find(k);
    auto it = ref.find(k);
    ASSERT_EQ(found != nullptr, it != ref.end()) << k;
    if (found) {
      ASSERT_EQ(found->v, it->second);
    }
    ASSERT_EQ(m.Rank(k), static_cast<size_t>(std::distance(ref.begin(), ref.lower_bound(k))));
  }
  // Visit any window, including ones past the end, and one that stops early.
  const size_t first = ref.empty() ? 0 : rng() % (ref.size() + 2);
  const size_t last = first + rng() % 30;
  std::vector<int64_t> got, want;
  m.Visit(first, last, [&](int64_t k, const Counted&) {
    got.push_back(k);
    return true;
  });
  auto it = ref.begin();
  for (size_t r = 0; r < ref.size(); ++r, ++it) {
    if (r >= first && r < last) want.push_back(it->first);
  }
  ASSERT_EQ(got, want) << "visit [" << first << ", " << last << ")";
  size_t calls = 0;
  m.Visit(0, m.size(), [&](int64_t, const Counted&) { return ++calls < 3; });
  ASSERT_EQ(calls, std::min<size_t>(3, ref.size()));
}

TEST(PersistentMapTest, RandomOperationsMatchAStdMap) {
  std::mt19937_64 rng(1);
  {
    Map m;
    std::map<int64_t, int64_t> ref;
    for (int step = 0; step < 3000; ++step) {
      const int64_t k = static_cast<int64_t>(rng() % 300) - 50;
      if (rng() % 3 == 0) {
        m = m.Erase(k);
        ref.erase(k);
      } else {
        const int64_t v = static_cast<int64_t>(rng());
        m = m.Insert(k, v);
        ref[k] = v;
      }
      ExpectSame(m, ref, rng);
      if (HasFatalFailure()) return;
    }
    EXPECT_GT(Counted::live.load(), 0);
  }
  EXPECT_EQ(Counted::live.load(), 0) << "nodes leaked or freed twice";
}

TEST(PersistentMapTest, OldVersionsAreUnchangedByLaterOnes) {
  std::mt19937_64 rng(2);
  {
    std::vector<Map> versions(1);
    std::vector<std::map<int64_t, int64_t>> refs(1);
    for (int step = 0; step < 400; ++step) {
      // Change a random earlier version (a branch), not only the newest.
      const size_t from = rng() % versions.size();
      Map m = versions[from];
      auto ref = refs[from];
      const int64_t k = static_cast<int64_t>(rng() % 100);
      if (rng() % 4 == 0) {
        m = m.Erase(k);
        ref.erase(k);
      } else {
        m = m.Insert(k, step);
        ref[k] = step;
      }
      versions.push_back(m);
      refs.push_back(ref);
    }
    for (size_t i = 0; i < versions.size(); ++i) {
      ExpectSame(versions[i], refs[i], rng);
      if (HasFatalFailure()) return;
    }
    // Dropping versions in any order frees exactly what no other version shares.
    std::shuffle(versions.begin(), versions.end(), rng);
    while (versions.size() > 1) versions.pop_back();
  }
  EXPECT_EQ(Counted::live.load(), 0);
}

TEST(PersistentMapTest, ReadersOfSnapshotsRunWhileAWriterChangesTheMap) {
  // The writer publishes versions holding the keys 0..k-1 with value k; readers take snapshots
  // and check that each is whole: size k, every value k.
  std::atomic<bool> stop{false};
  std::mutex mu;
  Map published;
  std::atomic<uint64_t> checked{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        Map snapshot;
        {
          std::lock_guard lock(mu);
          snapshot = published;
        }
        const int64_t k = static_cast<int64_t>(snapshot.size());
        snapshot.Visit(0, snapshot.size(), [&](int64_t key, const Counted& v) {
          if (v.v != k || key < 0 || key >= k) ++bad;
          return true;
        });
        ++checked;
      }
    });
  }
  Map m;
  for (int64_t k = 1; k <= 400; ++k) {
    Map next;
    for (int64_t key = 0; key < k; ++key) next = next.Insert(key, k);
    m = next;
    std::lock_guard lock(mu);
    published = m;
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(checked.load(), 0u);
}

TEST(PersistentMapTest, CompositeKeysWithTheirOwnOrder) {
  struct Key {
    int64_t ts, dst;
    bool operator==(const Key&) const = default;
  };
  struct NewestFirst {
    bool operator()(const Key& a, const Key& b) const {
      return a.ts != b.ts ? a.ts > b.ts : a.dst < b.dst;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<int64_t>()(k.ts) * 31 + std::hash<int64_t>()(k.dst);
    }
  };
  PersistentMap<Key, int, NewestFirst, KeyHash> m;
  m = m.Insert({5, 2}, 1).Insert({5, 1}, 2).Insert({9, 7}, 3).Insert({1, 0}, 4);
  std::vector<Key> order;
  m.Visit(0, m.size(), [&](const Key& k, int) {
    order.push_back(k);
    return true;
  });
  EXPECT_EQ(order, (std::vector<Key>{{9, 7}, {5, 1}, {5, 2}, {1, 0}}));
  EXPECT_EQ(m.Rank({5, 0}), 1u);  // after ts 9, before (5, 1)
  EXPECT_EQ(m.Rank({5, 3}), 3u);
}

TEST(PersistentMapTest, AMillionKeysStayShallow) {
  PersistentMap<uint64_t, uint64_t> m;
  for (uint64_t k = 0; k < 1000000; ++k) m = m.Insert(k * 7919 % 1000003, k);
  EXPECT_EQ(m.size(), 1000000u);
  // Every rank and select agree on a sample.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const size_t r = rng() % m.size();
    EXPECT_EQ(m.Rank(m.At(r).first), r);
  }
}

}  // namespace
}  // namespace zipg
