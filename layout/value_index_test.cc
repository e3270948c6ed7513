// Tests of ValueIndex against a std::map of (property, value) -> records: frequent keys answer
// exactly, the others with a superset that holds every true record and few others; absent keys
// find few candidates; malformed encodings are CORRUPTION.

#include "layout/value_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace zipg::layout {
namespace {

using Reference = std::map<std::pair<uint32_t, std::string>, std::set<uint32_t>>;

// Records with 6 properties: two categorical (a few values, skewed), the others mostly unique.
Reference MakeKeys(uint32_t records, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Reference ref;
  for (uint32_t r = 0; r < records; ++r) {
    for (uint32_t p = 0; p < 6; ++p) {
      if (rng() % 10 == 0) continue;  // absent
      std::string value;
      if (p < 2) {
        const uint64_t x = rng() % 1000;
        value = "c" + std::to_string(x * x / 20000);  // 50 values, skewed towards the small ones
      } else if (p == 2) {
        value = "v" + std::to_string(rng() % (records / 8 + 1));  // around kFrequent per value
      } else {
        value = "u" + std::to_string(rng());
      }
      if (rng() % 50 == 0) value.clear();  // empty values are values too
      ref[{p, value}].insert(r);
    }
  }
  return ref;
}

std::string Build(const Reference& ref, uint32_t records) {
  ValueIndex::Builder builder;
  for (const auto& [key, rs] : ref) {
    for (uint32_t r : rs) builder.Add(key.first, key.second, r);
  }
  return builder.Finish(records);
}

TEST(ValueIndexTest, FrequentKeysAreExactAndRareOnesASmallSuperset) {
  for (uint32_t records : {1u, 20u, 3000u, 40000u}) {
    SCOPED_TRACE("records " + std::to_string(records));
    const Reference ref = MakeKeys(records, records);
    auto index = ValueIndex::Decode(Build(ref, records), records, "test");
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    uint64_t exact = 0, extra = 0, candidates = 0;
    for (const auto& [key, rs] : ref) {
      const auto found = (*index)->Find(key.first, key.second);
      ASSERT_TRUE(std::is_sorted(found.records.begin(), found.records.end()));
      ASSERT_EQ(std::adjacent_find(found.records.begin(), found.records.end()),
                found.records.end());
      const std::set<uint32_t> got(found.records.begin(), found.records.end());
      EXPECT_EQ(found.exact, rs.size() >= ValueIndex::kFrequent) << key.second;
      if (found.exact) {
        ++exact;
        ASSERT_EQ(got, rs) << key.first << "=" << key.second;
      } else {
        ASSERT_TRUE(std::includes(got.begin(), got.end(), rs.begin(), rs.end()))
            << key.first << "=" << key.second;
        extra += got.size() - rs.size();
        candidates += got.size();
      }
    }
    EXPECT_EQ(exact, (*index)->num_frequent());
    EXPECT_LE(extra, candidates / 50 + 2) << "fingerprints collide too often";
    // Absent keys: a value nobody has, a property nobody has.
    uint64_t absent_candidates = 0;
    for (int i = 0; i < 2000; ++i) {
      auto found = (*index)->Find(i % 9, "absent" + std::to_string(i));
      EXPECT_FALSE(found.exact);
      absent_candidates += found.records.size();
    }
    EXPECT_LE(absent_candidates, 40u);
  }
}

TEST(ValueIndexTest, MalformedEncodingsAreCorruption) {
  const Reference ref = MakeKeys(5000, 3);
  const std::string good = Build(ref, 5000);
  ASSERT_TRUE(ValueIndex::Decode(good, 5000, "idx").ok());
  for (size_t cut : {size_t{0}, size_t{1}, good.size() / 3, good.size() - 1}) {
    auto index = ValueIndex::Decode(good.substr(0, cut), 5000, "idx");
    ASSERT_FALSE(index.ok()) << "cut at " << cut;
    EXPECT_EQ(index.status().code(), StatusCode::kCorruption);
    EXPECT_NE(index.status().ToString().find("idx"), std::string::npos);
  }
  EXPECT_FALSE(ValueIndex::Decode(good + "x", 5000, "idx").ok());
  // Fields out of range under an intact length: an index of rare keys only starts with varints
  // 0 (frequent keys), fingerprint bits, record bits.
  ValueIndex::Builder rare_only;
  std::vector<std::string> values;  // Add keeps views of them until Finish
  for (uint32_t r = 0; r < 100; ++r) values.push_back("u" + std::to_string(r));
  for (uint32_t r = 0; r < 100; ++r) rare_only.Add(0, values[r], r);
  const std::string rare = rare_only.Finish(100);
  ASSERT_TRUE(ValueIndex::Decode(rare, 100, "idx").ok());
  ASSERT_EQ(rare[0], 0);
  std::string no_fingerprint = rare, wide_records = rare;
  no_fingerprint[1] = 0;
  wide_records[2] = 40;
  EXPECT_EQ(ValueIndex::Decode(no_fingerprint, 100, "idx").status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ValueIndex::Decode(wide_records, 100, "idx").status().code(), StatusCode::kCorruption);
  // More records than the record numbers can address.
  EXPECT_FALSE(ValueIndex::Decode(good, 1u << 30, "idx").ok());
}

}  // namespace
}  // namespace zipg::layout
