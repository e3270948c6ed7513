// Tests of the EdgeFile's destination index (format version 2), its key filter (version 3) and of
// reading version 1 and 2 files: records of every size around the index threshold, with
// destinations at the int64 extremes, answer Find / FindDst / Edges / TimeRange / MayContain like
// a sorted reference.

#include "layout/edge_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "layout/record_coding.h"
#include "layout/side_file.h"
#include "util/coding.h"
#include "util/file.h"
#include "util/scratch_dir.h"

namespace zipg::layout {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct RefEdge {
  int64_t dst, ts;
  std::string value;
};

// Records (src -> edges newest first) of the sizes asked for, with distinct destinations drawn
// from small ids, huge ids and both ends of the range.
std::map<int64_t, std::vector<RefEdge>> MakeRecords(const std::vector<size_t>& sizes,
                                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<int64_t, std::vector<RefEdge>> records;
  int64_t src = 1;
  for (size_t n : sizes) {
    std::set<int64_t> dsts;
    if (n >= 2) dsts.insert({0, kMax});
    while (dsts.size() < n) {
      dsts.insert(rng() % 4 == 0 ? static_cast<int64_t>(rng() >> 1)
                                 : static_cast<int64_t>(rng() % (3 * n + 10)));
    }
    std::vector<RefEdge> edges;
    for (int64_t d : dsts) {
      edges.push_back({d, static_cast<int64_t>(rng() % 50) - 20, std::string(rng() % 5, 'x')});
    }
    std::sort(edges.begin(), edges.end(), [](const RefEdge& a, const RefEdge& b) {
      return a.ts != b.ts ? a.ts > b.ts : a.dst < b.dst;
    });
    records[src] = std::move(edges);
    src += 1 + static_cast<int64_t>(rng() % 3);
  }
  return records;
}

std::string BuildFile(const std::map<int64_t, std::vector<RefEdge>>& records,
                      const std::string& base, uint32_t format) {
  std::string text;
  std::vector<std::string> lists;
  for (const auto& [src, edges] : records) {
    lists.clear();
    for (const auto& e : edges) {
      std::string list;
      size_t bad;
      if (!e.value.empty()) AppendPropertyList({{0, e.value}}, 1, &list, &bad);
      lists.push_back(list);
    }
    std::vector<EncodedEdge> encoded;
    for (size_t i = 0; i < edges.size(); ++i) {
      encoded.push_back({edges[i].dst, edges[i].ts, lists[i]});
    }
    EdgeFile::AppendRecord(src, 7, encoded, &text, format);
  }
  // Format 4 in small blocks, so that records span blocks and lookups walk across them.
  EdgeFileOptions options{format, {1024, 3, 4096}, {4, 8, 16, false}};
  const Status s = EdgeFile::BuildFromRecords(base, {"v"}, text, options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return text;
}

void CheckFile(const std::map<int64_t, std::vector<RefEdge>>& records, const std::string& base,
               uint32_t format, uint64_t seed) {
  auto file = EdgeFile::Open(base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->format_version(), format);
  // One pass over the whole text: every record in (src, type) order, each edge as stored; in
  // big chunks, and in chunks smaller than a record.
  for (uint64_t chunk : {uint64_t{0}, uint64_t{4} << 20, uint64_t{61}}) {  // 0: whole text
    std::vector<int64_t> want_sources, seen;
    for (const auto& [src, edges] : records) want_sources.push_back(src);
    Status scanned = (*file)->ForEachRecord(
        [&](const EdgeFile::Record& r, std::vector<Edge> got) {
          seen.push_back(r.src);
          EXPECT_EQ(r.type, 7);
          const auto& want = records.at(r.src);
          EXPECT_EQ(got.size(), want.size()) << "src " << r.src;
          for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
            EXPECT_EQ(got[i].dst, want[i].dst);
            EXPECT_EQ(got[i].timestamp, want[i].ts);
            EXPECT_EQ(got[i].properties.empty() ? "" : got[i].properties[0].second, want[i].value);
          }
          return Status::OK();
        },
        chunk == 0 ? uint64_t{1} << 30 : 0, std::max<uint64_t>(chunk, 1));
    ASSERT_TRUE(scanned.ok()) << scanned.ToString();
    EXPECT_EQ(seen, want_sources) << "chunk " << chunk;
  }
  // The key filter: every stored key may be there; absent keys mostly are not (a file without
  // a filter says "may" to everything).
  EXPECT_EQ((*file)->has_key_filter(), format >= 3);
  uint64_t absent = 0, passed = 0;
  for (const auto& [src, edges] : records) {
    std::set<int64_t> present;
    for (const auto& e : edges) {
      ASSERT_TRUE((*file)->MayContain(src, 7, e.dst)) << src << " -> " << e.dst;
      present.insert(e.dst);
    }
    for (const auto& e : edges) {
      std::vector<int64_t> near;  // the neighbours of dst, within int64
      if (e.dst < kMax) near.push_back(e.dst + 1);
      if (e.dst > std::numeric_limits<int64_t>::min()) near.push_back(e.dst - 1);
      for (int64_t d : near) {
        if (present.count(d)) continue;
        ++absent;
        passed += (*file)->MayContain(src, 7, d);
      }
      ++absent;
      passed += (*file)->MayContain(src, 8, e.dst);  // another type
    }
  }
  if (format >= 3) {
    EXPECT_LT(passed, absent / 25 + 3) << passed << " of " << absent << " absent keys pass";
  } else {
    EXPECT_EQ(passed, absent);
  }
  std::mt19937_64 rng(seed);
  for (const auto& [src, edges] : records) {
    auto r = (*file)->Find(src, 7);
    ASSERT_TRUE(r.ok() && r->has_value()) << src;
    const auto& rec = **r;
    ASSERT_EQ(rec.count, edges.size());
    const bool indexed = format >= 2 && edges.size() >= EdgeFile::kIndexedRecordEdges;
    EXPECT_EQ(rec.order_width > 0, indexed) << "record of " << edges.size();
    // Every destination is found at its TimeOrder; absent ones are not.
    for (size_t i = 0; i < edges.size(); ++i) {
      auto at = (*file)->FindDst(rec, edges[i].dst);
      ASSERT_TRUE(at.ok()) << at.status().ToString();
      ASSERT_EQ(*at, std::optional<uint64_t>(i)) << "dst " << edges[i].dst;
    }
    std::set<int64_t> present;
    for (const auto& e : edges) present.insert(e.dst);
    for (int probe = 0; probe < 50; ++probe) {
      int64_t d = probe % 2 ? static_cast<int64_t>(rng() >> 1)
                            : static_cast<int64_t>(rng() % (3 * edges.size() + 12));
      if (probe == 0) d = -1;
      if (present.count(d)) continue;
      auto at = (*file)->FindDst(rec, d);
      ASSERT_TRUE(at.ok());
      EXPECT_FALSE(at->has_value()) << "absent dst " << d << " found";
    }
    // Reads by TimeOrder and time are unaffected by the index columns.
    auto all = (*file)->Edges(rec, 0, rec.count);
    ASSERT_TRUE(all.ok());
    for (size_t i = 0; i < edges.size(); ++i) {
      ASSERT_EQ((*all)[i].dst, edges[i].dst);
      ASSERT_EQ((*all)[i].timestamp, edges[i].ts);
      const std::string value =
          (*all)[i].properties.empty() ? "" : (*all)[i].properties[0].second;
      ASSERT_EQ(value, edges[i].value);
    }
    auto range = (*file)->TimeRange(rec, -5, 5);
    ASSERT_TRUE(range.ok());
    size_t begin = 0, end = 0;
    for (const auto& e : edges) {
      begin += e.ts > 5;
      end += e.ts >= -5;
    }
    const std::pair<uint64_t, uint64_t> want(begin, std::max(begin, end));
    EXPECT_EQ(*range, want);
  }
}

TEST(EdgeFileTest, DestinationIndexFindsEveryEdge) {
  ScratchDir dir("edge_file_test");
  const std::vector<size_t> sizes = {1, 2, 5, 63, 64, 65, 130, 1000, 4096};
  const auto records = MakeRecords(sizes, 1);
  BuildFile(records, dir.File("v2"), 2);
  CheckFile(records, dir.File("v2"), 2, 2);
  BuildFile(records, dir.File("v4"), 4);
  CheckFile(records, dir.File("v4"), 4, 2);
}

TEST(EdgeFileTest, KeyFilterPassesEveryStoredKeyAndFewOthers) {
  ScratchDir dir("edge_file_test");
  const std::vector<size_t> sizes = {1, 2, 5, 63, 64, 65, 130, 1000, 4096, 9000};
  const auto records = MakeRecords(sizes, 5);
  BuildFile(records, dir.File("v3"), 3);
  CheckFile(records, dir.File("v3"), 3, 6);
  BuildFile(records, dir.File("v4"), 4);
  CheckFile(records, dir.File("v4"), 4, 6);
  // And version 2 files (no filter) still open and answer.
  BuildFile(records, dir.File("v2"), 2);
  CheckFile(records, dir.File("v2"), 2, 6);
}

TEST(EdgeFileTest, AMalformedKeyFilterIsCorruption) {
  ScratchDir dir("edge_file_test");
  const auto records = MakeRecords({3, 64, 700}, 7);
  BuildFile(records, dir.File("v3"), 3);
  const std::string meta = dir.File("v3") + ".meta";
  auto payload = ReadSideFile(meta, "ZIPGEMET", 3);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  // Names: Fixed32 count 1, then Fixed32 length 1 and "v"; the filter follows.
  const size_t filter_at = 4 + 4 + 1;
  ASSERT_GT(payload->size(), filter_at + 12);
  std::string wrong_probes = *payload;
  wrong_probes[filter_at] = 7;
  for (const std::string& bad : {payload->substr(0, payload->size() - 1), wrong_probes,
                                 payload->substr(0, filter_at + 6), *payload + "x"}) {
    ASSERT_TRUE(WriteSideFile(meta, "ZIPGEMET", 3, bad).ok());
    auto file = EdgeFile::Open(dir.File("v3"));
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), StatusCode::kCorruption) << file.status().ToString();
    EXPECT_NE(file.status().message().find(meta), std::string::npos) << file.status().ToString();
  }
  ASSERT_TRUE(WriteSideFile(meta, "ZIPGEMET", 3, *payload).ok());
  EXPECT_TRUE(EdgeFile::Open(dir.File("v3")).ok());
  // A version this build does not know is refused by version, not misread.
  ASSERT_TRUE(WriteSideFile(meta, "ZIPGEMET", 5, *payload).ok());
  EXPECT_FALSE(EdgeFile::Open(dir.File("v3")).ok());
}

TEST(EdgeFileTest, VersionOneFilesStillAnswerByScanning) {
  ScratchDir dir("edge_file_test");
  const auto records = MakeRecords({3, 64, 700}, 3);
  const std::string v1 = BuildFile(records, dir.File("v1"), 1);
  const std::string v2 = BuildFile(records, dir.File("v2"), 2);
  EXPECT_LT(v1.size(), v2.size()) << "version 2 adds the index columns";
  CheckFile(records, dir.File("v1"), 1, 4);
}

// Many sources with several types each, most records small and some spanning several blocks:
// format 4's sparse record index finds every record, every source's records and nothing else,
// exactly as format 3's key search does, including keys below the first record, between records
// and past the last.
TEST(EdgeFileTest, FormatFourFindsEveryRecordThroughItsIndex) {
  ScratchDir dir("edge_file_test");
  std::mt19937_64 rng(11);
  std::vector<EdgeRecordInput> records;
  std::map<std::pair<int64_t, int64_t>, size_t> want;  // key -> edges
  for (int64_t src = 3; src < 3000; src += 1 + static_cast<int64_t>(rng() % 4)) {
    for (int64_t type = 0; type < 6; ++type) {
      // The first source has only type 2: FindAll(3) starts below the first record's key.
      if (src == 3 ? type != 2 : rng() % 3 != 0) continue;
      const size_t n = rng() % 40 == 0 ? 200 + rng() % 2000 : 1 + rng() % 6;
      EdgeRecordInput r{src, type, {}};
      for (size_t i = 0; i < n; ++i) {
        const int64_t dst = static_cast<int64_t>(i * 7 + rng() % 7);
        const int64_t ts = static_cast<int64_t>(rng() % 1000);
        std::string value;
        for (uint64_t k = rng() % 30; k > 0; --k) value.push_back(static_cast<char>('a' + k % 26));
        r.edges.push_back({dst, ts, {{0, value}}});
      }
      want[{src, type}] = n;
      records.push_back(std::move(r));
    }
  }
  for (uint32_t format : {3u, 4u}) {
    SCOPED_TRACE("format " + std::to_string(format));
    const std::string base = dir.File("f" + std::to_string(format));
    ASSERT_TRUE(
        EdgeFile::Build(base, {"v"}, records, {format, {1024, 3, 4096}, {8, 8, 16, false}}).ok());
    auto file = EdgeFile::Open(base);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ASSERT_EQ((*file)->format_version(), format);
    for (int64_t src = -1; src < 3005; ++src) {
      std::vector<int64_t> types;
      for (int64_t type = -1; type < 7; ++type) {
        auto r = (*file)->Find(src, type);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        auto it = want.find({src, type});
        ASSERT_EQ(r->has_value(), it != want.end()) << src << " " << type;
        if (it == want.end()) continue;
        types.push_back(type);
        EXPECT_EQ((*r)->src, src);
        EXPECT_EQ((*r)->type, type);
        EXPECT_EQ((*r)->count, it->second);
        auto edges = (*file)->Edges(**r, 0, (*r)->count);
        ASSERT_TRUE(edges.ok());
        ASSERT_EQ(edges->size(), it->second);
      }
      auto all = (*file)->FindAll(src);
      ASSERT_TRUE(all.ok());
      std::vector<int64_t> got;
      for (const auto& r : *all) got.push_back(r.type);
      EXPECT_EQ(got, types) << "src " << src;
    }
  }
}

TEST(EdgeFileTest, FormatFourDamageIsCorruption) {
  ScratchDir dir("edge_file_test");
  const auto records = MakeRecords({3, 64, 700, 5, 2000, 1}, 9);
  BuildFile(records, dir.File("v4"), 4);
  const std::string meta = dir.File("v4") + ".meta";
  auto payload = ReadSideFile(meta, "ZIPGEMET", 4);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  // The record index ends the payload: Fixed64 entries, Fixed32 length, then that many bytes.
  size_t index_len = 1;
  while (index_len + 12 < payload->size() &&
         DecodeFixed32(payload->data() + payload->size() - index_len - 4) != index_len) {
    ++index_len;
  }
  const size_t entries_at = payload->size() - index_len - 12;
  const uint64_t entries = DecodeFixed64(payload->data() + entries_at);
  ASSERT_GE(entries, 2u);
  std::string more = *payload, fewer = *payload;
  EncodeFixed64(more.data() + entries_at, entries + 1);
  EncodeFixed64(fewer.data() + entries_at, entries - 1);
  // The side file's checksum catches damage on disk; these are payloads written with a valid
  // checksum, so that the record index's own checks are what refuses them.
  for (const std::string& bad :
       {payload->substr(0, payload->size() - 1), *payload + "x", more, fewer}) {
    ASSERT_TRUE(WriteSideFile(meta, "ZIPGEMET", 4, bad).ok());
    auto file = EdgeFile::Open(dir.File("v4"));
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), StatusCode::kCorruption) << file.status().ToString();
  }
  ASSERT_TRUE(WriteSideFile(meta, "ZIPGEMET", 4, *payload).ok());
  ASSERT_TRUE(EdgeFile::Open(dir.File("v4")).ok());
  // The text file itself: missing, or damaged.
  const std::string text = dir.File("v4") + ".zbk";
  auto bytes = ReadFileToString(text);
  ASSERT_TRUE(bytes.ok());
  std::filesystem::remove(text);
  auto missing = EdgeFile::Open(dir.File("v4"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find(text), std::string::npos)
      << missing.status().ToString();
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 1;
  dir.Write("v4.zbk", damaged);
  auto corrupt = EdgeFile::Open(dir.File("v4"));
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), StatusCode::kCorruption) << corrupt.status().ToString();
}

}  // namespace
}  // namespace zipg::layout
