// Tests of SuffixIndex against a plain scan of the same (record, value) pairs (ValueMatches, whose
// own cases are checked against std::string's find / starts_with / ends_with / ==): every match
// kind, patterns cut from values and random ones, multi-byte UTF-8, empty values, values that are
// prefixes of each other, every sample rate; Count of occurrences; the hit bound; malformed
// encodings are CORRUPTION.

#include "layout/suffix_index.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "util/call_deadline.h"

namespace zipg::layout {
namespace {

struct Pair {
  uint32_t record;
  std::string value;
  uint32_t property = 0;
};

const SearchMatch kMatches[] = {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix,
                                SearchMatch::kExact};

// Values over a small alphabet (so patterns match often), with multi-byte characters, control
// bytes (NUL, newline, quote), empty values, and values that extend others.
std::vector<Pair> MakePairs(uint32_t records, uint64_t seed) {
  static const std::vector<std::string> kPieces = {
      "a",  "b", "ab",   "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x8E\xB7", std::string(1, '\0'), "\n",
      "\"", ",", "\x7F", "z"};
  std::mt19937_64 rng(seed);
  std::vector<Pair> pairs;
  std::vector<std::string> earlier;
  for (uint32_t r = 0; r < records; ++r) {
    const int values = static_cast<int>(rng() % 3);  // a record may hold 0, 1 or 2 values
    for (int i = 0; i < values; ++i) {
      std::string value;
      if (!earlier.empty() && rng() % 4 == 0) {
        value = earlier[rng() % earlier.size()];  // shared, or extended below
      }
      const size_t pieces = rng() % 10 == 0 ? 0 : rng() % (rng() % 8 == 0 ? 80 : 6);
      for (size_t k = 0; k < pieces; ++k) value += kPieces[rng() % kPieces.size()];
      earlier.push_back(value);
      // Property numbers up to 70 (3 digits), the same value often under several of them.
      const uint32_t property = rng() % 3 == 0 ? static_cast<uint32_t>(rng() % 70) : i;
      pairs.push_back({r, value, property});
    }
  }
  return pairs;
}

std::vector<uint32_t> Scan(const std::vector<Pair>& pairs, const std::string& pattern,
                           SearchMatch match, std::optional<uint32_t> property) {
  std::set<uint32_t> out;
  for (const Pair& p : pairs) {
    if ((!property || p.property == *property) && ValueMatches(p.value, pattern, match)) {
      out.insert(p.record);
    }
  }
  return {out.begin(), out.end()};
}

// Occurrences of `pattern` in the keys (distinct (value, property) pairs), counted as the index
// counts them: every position for contains (of any property), else the matching keys.
using Keys = std::set<std::pair<std::string, uint32_t>>;
Keys KeysOf(const std::vector<Pair>& pairs) {
  Keys keys;
  for (const Pair& p : pairs) keys.insert({p.value, p.property});
  return keys;
}
uint64_t Occurrences(const Keys& keys, const std::string& pattern, SearchMatch match,
                     std::optional<uint32_t> property) {
  uint64_t n = 0;
  for (const auto& [v, p] : keys) {
    if (match != SearchMatch::kContains) {
      n += (!property || p == *property) && ValueMatches(v, pattern, match) ? 1 : 0;
      continue;
    }
    for (size_t at = v.find(pattern); at != std::string::npos; at = v.find(pattern, at + 1)) ++n;
  }
  return n;
}

std::unique_ptr<SuffixIndex> Build(const std::vector<Pair>& pairs, uint32_t records, uint32_t rate,
                                   std::string* encoded = nullptr) {
  SuffixIndex::Builder builder;
  for (const Pair& p : pairs) builder.Add(p.property, p.value, p.record);
  auto bytes = builder.Finish(records, 70, SuffixIndexOptions{rate});
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (encoded) *encoded = *bytes;
  auto index = SuffixIndex::Decode(*bytes, records, "test");
  EXPECT_TRUE(index.ok()) << index.status().ToString();
  return std::move(*index);
}

TEST(ValueMatchesTest, FollowsTheStringOperations) {
  EXPECT_TRUE(ValueMatches("jazz club", "zz c", SearchMatch::kContains));
  EXPECT_FALSE(ValueMatches("jazz", "jazzy", SearchMatch::kContains));
  EXPECT_TRUE(ValueMatches("Alice", "Ali", SearchMatch::kPrefix));
  EXPECT_FALSE(ValueMatches("Alice", "lic", SearchMatch::kPrefix));
  EXPECT_TRUE(ValueMatches("a@cornell.edu", "@cornell.edu", SearchMatch::kSuffix));
  EXPECT_FALSE(ValueMatches("a@cornell.edu", "cornell", SearchMatch::kSuffix));
  EXPECT_TRUE(ValueMatches("x", "x", SearchMatch::kExact));
  EXPECT_FALSE(ValueMatches("xy", "x", SearchMatch::kExact));
  SearchMatch m;
  EXPECT_TRUE(ParseSearchMatch("suffix", &m));
  EXPECT_EQ(m, SearchMatch::kSuffix);
  EXPECT_FALSE(ParseSearchMatch("regex", &m));
  EXPECT_FALSE(ParseSearchMatch("", &m));
}

TEST(SuffixIndexTest, AnswersAsAScanOfTheValues) {
  for (uint32_t rate : {1u, 3u, 32u}) {
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      const uint32_t records = 400;
      const auto pairs = MakePairs(records, seed * 100 + rate);
      const auto index = Build(pairs, records, rate);
      ASSERT_NE(index, nullptr);
      const Keys keys = KeysOf(pairs);
      std::mt19937_64 rng(seed);
      for (int q = 0; q < 200; ++q) {
        std::string pattern;
        const std::string& from = pairs[rng() % pairs.size()].value;
        if (q % 3 != 0 && !from.empty()) {  // a piece of a stored value (on any byte boundary)
          const size_t at = rng() % from.size();
          pattern = from.substr(at, 1 + rng() % (from.size() - at));
          if (q % 7 == 0) pattern = from;  // a whole value
        } else {
          const char* kBytes = "ab\xC3\xA9z\n\"";
          for (size_t k = 1 + rng() % 4; k > 0; --k) pattern += kBytes[rng() % 7];
        }
        if (q % 50 == 0) pattern += "\xFF";  // a byte no UTF-8 value holds
        // Any property, the pattern's own value's, one of the shared ones, one beyond all.
        const std::optional<uint32_t> properties[] = {std::nullopt,
                                                      pairs[rng() % pairs.size()].property,
                                                      static_cast<uint32_t>(rng() % 70), 69u};
        for (SearchMatch match : kMatches) {
          for (const auto& property : properties) {
            std::vector<uint32_t> got;
            ASSERT_TRUE(index->Find(pattern, match, property, UINT64_MAX, &got).ok());
            EXPECT_EQ(got, Scan(pairs, pattern, match, property))
                << "rate " << rate << " seed " << seed << " match " << SearchMatchName(match)
                << " property " << (property ? std::to_string(*property) : "any") << " pattern '"
                << pattern << "'";
            EXPECT_EQ(index->Count(pattern, match, property),
                      Occurrences(keys, pattern, match, property))
                << SearchMatchName(match) << " '" << pattern << "'";
          }
        }
      }
    }
  }
}

TEST(SuffixIndexTest, EmptyAndSingleValues) {
  // No values at all.
  auto none = Build({}, 5, 32);
  std::vector<uint32_t> got = {7};
  ASSERT_TRUE(none->Find("a", SearchMatch::kContains, std::nullopt, 10, &got).ok());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(none->num_keys(), 0u);
  // Only the empty value: exact "" is not a valid request upstream, but the index answers it.
  auto empty = Build({{3, ""}}, 5, 32);
  ASSERT_TRUE(empty->Find("", SearchMatch::kExact, std::nullopt, 10, &got).ok());
  EXPECT_EQ(got, std::vector<uint32_t>{3});
  ASSERT_TRUE(empty->Find("a", SearchMatch::kPrefix, std::nullopt, 10, &got).ok());
  EXPECT_TRUE(got.empty());
  // A long value: hits deep inside walk to a sample, not past it.
  std::string long_value;
  for (int i = 0; i < 5000; ++i) long_value += static_cast<char>('a' + i % 26);
  long_value += "needle";
  for (uint32_t rate : {1u, 4u, 64u}) {
    auto one = Build({{0, long_value, 5}, {1, "needle", 6}, {2, "needles", 5}}, 3, rate);
    const auto any = std::nullopt;
    ASSERT_TRUE(one->Find("needle", SearchMatch::kContains, any, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{0, 1, 2}));
    ASSERT_TRUE(one->Find("needle", SearchMatch::kContains, 5u, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{0, 2}));
    ASSERT_TRUE(one->Find("needle", SearchMatch::kSuffix, any, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{0, 1}));
    ASSERT_TRUE(one->Find("needle", SearchMatch::kSuffix, 6u, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{1}));
    ASSERT_TRUE(one->Find("needle", SearchMatch::kExact, any, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{1}));
    ASSERT_TRUE(one->Find("needle", SearchMatch::kExact, 5u, 10, &got).ok());
    EXPECT_TRUE(got.empty());
    ASSERT_TRUE(one->Find("needle", SearchMatch::kPrefix, any, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{1, 2}));
    ASSERT_TRUE(one->Find("needle", SearchMatch::kPrefix, 5u, 10, &got).ok());
    EXPECT_EQ(got, (std::vector<uint32_t>{2}));
    EXPECT_EQ(one->Count("abc", SearchMatch::kContains), 193u);  // 5000 / 26, rounded up
  }
}

TEST(SuffixIndexTest, LocatingMoreThanTheBoundIsRefused) {
  std::vector<Pair> pairs;
  for (uint32_t r = 0; r < 100; ++r) pairs.push_back({r, "xx" + std::to_string(r)});
  auto index = Build(pairs, 100, 8);
  std::vector<uint32_t> got;
  const auto any = std::nullopt;
  EXPECT_EQ(index->Find("x", SearchMatch::kContains, any, 199, &got).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(index->Find("x", SearchMatch::kContains, any, 200, &got).ok());
  EXPECT_EQ(got.size(), 100u);
  EXPECT_EQ(index->Find("xx", SearchMatch::kPrefix, any, 99, &got).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(index->Find("xx", SearchMatch::kPrefix, any, 100, &got).ok());
}

// A search that locates past the call's deadline fails whole with DEADLINE_EXCEEDED (the deadline
// is looked at every 1024 occurrences); one within it answers.
TEST(SuffixIndexTest, LocatingStopsAtTheCallsDeadline) {
  std::vector<Pair> pairs;
  for (uint32_t r = 0; r < 3000; ++r) pairs.push_back({r, "ab" + std::to_string(r)});
  auto index = Build(pairs, 3000, 8);
  std::vector<uint32_t> got;
  {
    CallDeadline::Scope passed(CallDeadline::Clock::now() - std::chrono::milliseconds(1));
    EXPECT_EQ(index->Find("b", SearchMatch::kContains, std::nullopt, UINT64_MAX, &got).code(),
              StatusCode::kDeadlineExceeded);
    // Prefix and exact searches locate nothing: they answer.
    EXPECT_TRUE(index->Find("ab", SearchMatch::kPrefix, std::nullopt, UINT64_MAX, &got).ok());
    EXPECT_EQ(got.size(), 3000u);
  }
  CallDeadline::Scope later(CallDeadline::Clock::now() + std::chrono::seconds(60));
  EXPECT_TRUE(index->Find("b", SearchMatch::kContains, std::nullopt, UINT64_MAX, &got).ok());
  EXPECT_EQ(got.size(), 3000u);
}

TEST(SuffixIndexTest, RejectsValuesThatAreNotText) {
  SuffixIndex::Builder builder;
  builder.Add(0, "ok", 0);
  builder.Add(0, "bad\xF5", 1);
  EXPECT_EQ(builder.Finish(2, 1, {}).status().code(), StatusCode::kInvalidArgument);
  SuffixIndex::Builder out_of_range;
  out_of_range.Add(0, "ok", 5);
  EXPECT_EQ(out_of_range.Finish(2, 1, {}).status().code(), StatusCode::kInvalidArgument);
  SuffixIndex::Builder bad_property;
  bad_property.Add(3, "ok", 0);
  EXPECT_EQ(bad_property.Finish(2, 3, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SuffixIndexOptions{0}.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(SuffixIndexTest, MalformedEncodingsAreCorruption) {
  const auto pairs = MakePairs(200, 9);
  std::string bytes;
  Build(pairs, 200, 16, &bytes);
  // Every truncation, and fewer records than the postings name.
  for (size_t len = 0; len < bytes.size(); len += 1 + len / 8) {
    auto index = SuffixIndex::Decode(bytes.substr(0, len), 200, "t");
    EXPECT_EQ(index.status().code(), StatusCode::kCorruption) << len;
  }
  EXPECT_EQ(SuffixIndex::Decode(bytes + "x", 200, "t").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(SuffixIndex::Decode(bytes, 150, "t").status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace zipg::layout
