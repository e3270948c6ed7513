// Tests of the update feed (logstore/feed.h): what goes in comes out after any id, across
// reopening; a torn tail is cut; records of replayed generations are dropped at open; ids must
// ascend.
#include "logstore/feed.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "util/scratch_dir.h"

namespace zipg::logstore {
namespace {

using engine::Update;
using engine::UpdateOp;

uint64_t Id(int64_t generation, uint64_t index) {
  return static_cast<uint64_t>(generation) << 32 | (index + 1);
}

// Batch k of generation g: k+1 updates with consecutive ids from `first`.
std::vector<Update> Batch(int64_t generation, uint64_t first, size_t n) {
  std::vector<Update> out;
  for (size_t i = 0; i < n; ++i) {
    Update u{UpdateOp::kPutEdge, static_cast<int64_t>(first + i), 1, 2, generation,
             static_cast<int64_t>(i)};
    u.id = Id(generation, first + i);
    out.push_back(u);
  }
  return out;
}

std::vector<Update> After(const std::vector<Update>& all, uint64_t after) {
  std::vector<Update> out;
  for (const auto& u : all) {
    if (u.id > after) out.push_back(u);
  }
  return out;
}

TEST(UpdateFeedTest, SinceReturnsEveryUpdateAfterAnIdAcrossReopen) {
  ScratchDir dir("feed");
  const std::string path = dir.File("feed.log");
  std::vector<Update> all;
  {
    auto feed = UpdateFeed::Open(path, UINT64_MAX);
    ASSERT_TRUE(feed.ok()) << feed.status().ToString();
    EXPECT_EQ((*feed)->last_id(), 0u);
    uint64_t index = 0;
    for (int64_t g = 1; g <= 3; ++g) {
      index = 0;
      for (size_t k = 0; k < 20; ++k) {
        auto batch = Batch(g, index, 1 + k % 4);
        index += batch.size() + 3;  // other shards' records in between
        ASSERT_TRUE((*feed)->Append(batch).ok());
        all.insert(all.end(), batch.begin(), batch.end());
      }
    }
    EXPECT_EQ((*feed)->last_id(), all.back().id);
  }
  auto feed = UpdateFeed::Open(path, UINT64_MAX);
  ASSERT_TRUE(feed.ok());
  EXPECT_EQ((*feed)->last_id(), all.back().id);
  // From every id in the feed, ids between them, and the ends.
  std::vector<uint64_t> probes = {0, 1, Id(2, 0), Id(2, 0) + 1, all.back().id, UINT64_MAX};
  for (const auto& u : all) probes.push_back(u.id);
  for (uint64_t after : probes) {
    auto got = (*feed)->Since(after, 1 << 20);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, After(all, after)) << "after " << after;
  }
  // A small limit cuts at whole records, but always returns at least one.
  auto some = (*feed)->Since(0, 1);
  ASSERT_TRUE(some.ok());
  ASSERT_FALSE(some->empty());
  EXPECT_EQ(some->front(), all.front());
  EXPECT_LE(some->size(), 4u);
  uint64_t at = 0;
  std::vector<Update> paged;
  while (true) {
    auto page = (*feed)->Since(at, 7);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    EXPECT_LE(page->size(), 7u);
    paged.insert(paged.end(), page->begin(), page->end());
    at = page->back().id;
  }
  EXPECT_EQ(paged, all);
}

TEST(UpdateFeedTest, OpenCutsATornTailAndTheReplayedGenerations) {
  ScratchDir dir("feed");
  const std::string path = dir.File("feed.log");
  std::vector<Update> g1, g2;
  {
    auto feed = UpdateFeed::Open(path, UINT64_MAX);
    ASSERT_TRUE(feed.ok());
    for (uint64_t k = 0; k < 5; ++k) {
      auto b = Batch(1, k * 2, 2);
      ASSERT_TRUE((*feed)->Append(b).ok());
      g1.insert(g1.end(), b.begin(), b.end());
    }
    for (uint64_t k = 0; k < 5; ++k) {
      auto b = Batch(2, k * 2, 2);
      ASSERT_TRUE((*feed)->Append(b).ok());
      g2.insert(g2.end(), b.begin(), b.end());
    }
  }
  // A torn last record: the feed ends before it.
  const auto full = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, full - 5);
  {
    auto feed = UpdateFeed::Open(path, UINT64_MAX);
    ASSERT_TRUE(feed.ok());
    auto got = (*feed)->Since(0, 1 << 20);
    ASSERT_TRUE(got.ok());
    std::vector<Update> want = g1;
    want.insert(want.end(), g2.begin(), g2.end() - 2);
    EXPECT_EQ(*got, want);
    EXPECT_EQ((*feed)->last_id(), want.back().id);
    // Appends continue after the cut.
    auto b = Batch(2, 8, 2);
    ASSERT_TRUE((*feed)->Append(b).ok());
  }
  // Generation 2 is replayed from the WAL: its records go at open, generation 1's stay.
  {
    auto feed = UpdateFeed::Open(path, Id(2, 0));
    ASSERT_TRUE(feed.ok());
    auto got = (*feed)->Since(0, 1 << 20);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, g1);
    EXPECT_EQ((*feed)->last_id(), g1.back().id);
    ASSERT_TRUE((*feed)->Append(Batch(2, 0, 3)).ok());
    ASSERT_TRUE((*feed)->Sync().ok());
  }
  auto feed = UpdateFeed::Open(path, UINT64_MAX);
  ASSERT_TRUE(feed.ok());
  auto got = (*feed)->Since(g1.back().id, 1 << 20);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, Batch(2, 0, 3));
}

TEST(UpdateFeedTest, IdsMustAscend) {
  ScratchDir dir("feed");
  auto feed = UpdateFeed::Open(dir.File("feed.log"), UINT64_MAX);
  ASSERT_TRUE(feed.ok());
  ASSERT_TRUE((*feed)->Append(Batch(1, 5, 2)).ok());
  EXPECT_FALSE((*feed)->Append(Batch(1, 5, 1)).ok());  // not above the last id
  auto unnumbered = Batch(1, 10, 1);
  unnumbered[0].id = 0;
  EXPECT_FALSE((*feed)->Append(unnumbered).ok());
  auto descending = Batch(1, 20, 2);
  std::swap(descending[0], descending[1]);
  EXPECT_FALSE((*feed)->Append(descending).ok());
  auto got = (*feed)->Since(0, 100);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, Batch(1, 5, 2));  // the refused batches left nothing behind
}

}  // namespace
}  // namespace zipg::logstore
