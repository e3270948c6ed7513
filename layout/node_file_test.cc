// Tests of NodeFile in both formats: ForEachNode (one pass over the whole text, decoded at once or
// by chunks of records of any size, smaller than a record too) yields every node in ascending id
// with the properties it was built with, as Get reads them one at a time; FindIds answers like a
// scan of the nodes, for frequent and rare values, one or several terms.

#include "layout/node_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "util/call_deadline.h"
#include "util/scratch_dir.h"

namespace zipg::layout {
namespace {

class NodeFileTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  // 1, 2, 3: that format with its defaults; 4: format 3 with a search index on some properties.
  NodeFileOptions Options() const {
    if (GetParam() == 1) return NodeFileOptions{1, {}, {4, 8, 16, false}};
    NodeFileOptions o{Format(), {1024, 1, 4096}, {}};
    o.search_options.sample_rate = GetParam() == 3 ? 4 : 32;
    if (GetParam() == 4) o.search = SearchIndexSpec{false, {"city", "name", "tag"}};
    return o;
  }
  uint32_t Format() const { return std::min(GetParam(), 3u); }
};

INSTANTIATE_TEST_SUITE_P(Formats, NodeFileTest, ::testing::Values(1u, 2u, 3u, 4u));

TEST_P(NodeFileTest, ForEachNodeVisitsEveryNodeAsBuilt) {
  ScratchDir dir("node_file_test");
  std::mt19937_64 rng(11);
  const std::vector<std::string> names = {"a", "b", "name"};
  std::map<int64_t, Properties> want;
  std::vector<NodeInput> nodes;
  int64_t id = 0;
  for (int i = 0; i < 3000; ++i) {
    id += 1 + static_cast<int64_t>(rng() % (i % 100 == 0 ? 1000000 : 4));
    NodeInput n{id, {}};
    Properties props;
    for (uint32_t p = 0; p < names.size(); ++p) {
      if (rng() % 3 == 0) continue;  // some nodes have no properties at all
      const std::string value(rng() % (i % 500 == 0 ? 3000 : 12), static_cast<char>('a' + p));
      n.properties.emplace_back(p, value);
      props.emplace_back(names[p], value);
    }
    nodes.push_back(std::move(n));
    want[id] = std::move(props);
  }
  const std::string base = dir.File("nodes");
  ASSERT_TRUE(NodeFile::Build(base, names, nodes, Options()).ok());
  auto file = NodeFile::Open(base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->format_version(), Format());
  // memory, chunk: the whole text at once; big chunks; chunks smaller than most records.
  for (auto [memory, chunk] : {std::pair<uint64_t, uint64_t>{uint64_t{1} << 30, 1},
                               {0, uint64_t{4} << 20},
                               {0, 61},
                               {0, 1}}) {
    auto next = want.begin();
    Status s = (*file)->ForEachNode(
        [&](int64_t got_id, Properties props) {
          if (next == want.end()) return Status::Internal("more nodes than were built");
          EXPECT_EQ(got_id, next->first);
          EXPECT_EQ(props, next->second) << "node " << got_id;
          auto one = (*file)->Get(got_id);
          EXPECT_TRUE(one.ok() && *one && **one == props) << "Get of node " << got_id;
          ++next;
          return Status::OK();
        },
        memory, chunk);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(next == want.end()) << "memory " << memory << " chunk " << chunk;
  }
  // An error from visit stops the scan and is returned.
  int visited = 0;
  Status stopped = (*file)->ForEachNode([&](int64_t, Properties) {
    return ++visited == 10 ? Status::Unavailable("stop") : Status::OK();
  });
  EXPECT_EQ(stopped.code(), StatusCode::kUnavailable);
  EXPECT_EQ(visited, 10);
}

TEST_P(NodeFileTest, FindIdsMatchesAScan) {
  ScratchDir dir("node_file_test");
  std::mt19937_64 rng(GetParam() + 5);
  const std::vector<std::string> names = {"city", "id", "kind", "tag"};
  std::vector<NodeInput> nodes;
  for (int64_t id = 0; id < 5000; ++id) {
    NodeInput n{id * 3, {}};
    if (rng() % 4) n.properties.emplace_back(0, "c" + std::to_string(rng() % 40));  // frequent
    if (rng() % 4) n.properties.emplace_back(1, "u" + std::to_string(id));          // unique
    if (rng() % 4) n.properties.emplace_back(2, std::to_string(rng() % 1000));      // a few each
    if (rng() % 9 == 0) n.properties.emplace_back(3, "");                           // empty
    nodes.push_back(std::move(n));
  }
  const std::string base = dir.File("nodes");
  ASSERT_TRUE(NodeFile::Build(base, names, nodes, Options()).ok());
  auto file = NodeFile::Open(base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto scan = [&](const std::vector<std::pair<uint32_t, std::string>>& match) {
    std::vector<int64_t> ids;
    for (const auto& n : nodes) {
      bool all = true;
      for (const auto& term : match) {
        all =
            all && std::find(n.properties.begin(), n.properties.end(), term) != n.properties.end();
      }
      if (all) ids.push_back(n.id);
    }
    return ids;
  };
  auto value_of = [&](uint32_t p) -> std::string {
    switch (p) {
      case 0:
        return "c" + std::to_string(rng() % 42);  // 40 and 41: absent
      case 1:
        return "u" + std::to_string(rng() % 5100);
      case 2:
        return std::to_string(rng() % 1010);
      default:
        return "";
    }
  };
  for (int q = 0; q < 600; ++q) {
    std::vector<std::pair<uint32_t, std::string>> match;
    const size_t terms = 1 + rng() % 3;
    for (uint32_t p : {0u, 1u, 2u, 3u}) {
      if (match.size() < terms && rng() % 2) match.emplace_back(p, value_of(p));
    }
    if (match.empty()) match.emplace_back(0, value_of(0));
    Properties named;
    for (const auto& [p, v] : match) named.emplace_back(names[p], v);
    auto got = (*file)->FindIds(named);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(*got, scan(match)) << "query " << q;
  }
  // Absent values: a rare key's candidates share its fingerprint with other keys (about 1 in 256
  // lookups here find some), and every one of them must be refused by reading the record.
  for (int64_t u = 5000; u < 25000; ++u) {
    auto got = (*file)->FindIds({{"id", "u" + std::to_string(u)}});
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(got->empty()) << "u" << u << " matched " << got->size() << " nodes";
  }
  // Unknown properties and values no UTF-8 text holds match nothing; an empty match is an error.
  EXPECT_TRUE((*file)->FindIds({{"nope", "c1"}})->empty());
  EXPECT_TRUE((*file)->FindIds({{"city", "c1\xff"}})->empty());
  EXPECT_EQ((*file)->FindIds({}).status().code(), StatusCode::kInvalidArgument);
}

// SearchValues, through the search index where the property has one and by reading the records
// where it has none (formats 1 and 2, and the unindexed properties of configuration 4), against a
// scan of the values as built: every match kind, with and without a property.
TEST_P(NodeFileTest, SearchValuesMatchesAScan) {
  ScratchDir dir("node_file_test");
  std::mt19937_64 rng(GetParam() + 17);
  const std::vector<std::string> names = {"city", "id", "name", "note"};
  const std::vector<std::string> words = {"jazz", "Ali",         "alice",       "\xC3\xA9t\xC3\xA9",
                                          "a,b",  "\"q\"",       "line\nbreak", "z",
                                          "",     "@cornell.edu"};
  std::vector<NodeInput> nodes;
  for (int64_t id = 0; id < 3000; ++id) {
    NodeInput n{id * 7 + 1, {}};
    for (uint32_t p = 0; p < names.size(); ++p) {
      if (rng() % 3 == 0) continue;
      std::string value;
      for (size_t k = rng() % 4; k > 0; --k) value += words[rng() % words.size()];
      if (p == 1) value = "u" + std::to_string(id);
      n.properties.emplace_back(p, value);
    }
    nodes.push_back(std::move(n));
  }
  const std::string base = dir.File("nodes");
  ASSERT_TRUE(NodeFile::Build(base, names, nodes, Options()).ok());
  auto file = NodeFile::Open(base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->HasSearchIndex("city"), GetParam() >= 3);
  EXPECT_EQ((*file)->HasSearchIndex("note"), GetParam() == 3);
  const SearchMatch kinds[] = {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix,
                               SearchMatch::kExact};
  // Every query scans the records of the properties without an index (all of them in formats 1
  // and 2): fewer queries there, fewest where a scan walks Psi (format 1).
  const int queries = GetParam() == 1 ? 20 : GetParam() == 3 ? 200 : 60;
  for (int q = 0; q < queries; ++q) {
    std::string pattern;
    const auto& from = nodes[rng() % nodes.size()].properties;
    if (!from.empty() && !from[0].second.empty() && q % 4 != 0) {
      const std::string& v = from[rng() % from.size()].second;
      if (v.empty()) continue;
      const size_t at = rng() % v.size();
      pattern = v.substr(at, 1 + rng() % (v.size() - at));
    } else {
      pattern = words[rng() % (words.size() - 2)] + (q % 8 == 0 ? "\xF8" : "");
    }
    for (SearchMatch match : kinds) {
      for (int which = -1; which < static_cast<int>(names.size()); ++which) {
        std::vector<int64_t> want;
        for (const auto& n : nodes) {
          for (const auto& [p, value] : n.properties) {
            if ((which < 0 || static_cast<int>(p) == which) &&
                ValueMatches(value, pattern, match)) {
              want.push_back(n.id);
              break;
            }
          }
        }
        const std::string* property = which < 0 ? nullptr : &names[which];
        auto got = (*file)->SearchValues(pattern, match, property, UINT64_MAX);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(*got, want) << SearchMatchName(match) << " '" << pattern << "' in "
                              << (property ? *property : "any");
      }
    }
  }
  const std::string unknown = "nope";
  EXPECT_TRUE((*file)->SearchValues("a", SearchMatch::kContains, &unknown, 10)->empty());
  // Reading records for a property without an index stops at the call's deadline.
  if (GetParam() <= 2) {
    CallDeadline::Scope passed(CallDeadline::Clock::now() - std::chrono::milliseconds(1));
    EXPECT_EQ((*file)->SearchValues("a", SearchMatch::kContains, nullptr, 10).status().code(),
              StatusCode::kDeadlineExceeded);
  }
}

}  // namespace
}  // namespace zipg::layout
