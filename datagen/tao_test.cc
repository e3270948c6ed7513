// Tests of the TAO-like graph generator: determinism, and the shape of the generated CSV read back
// with a small RFC 4180 reader written here (independent of the engine's loader).

#include "datagen/tao.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace zipg::datagen {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// Parses RFC 4180 CSV with LF or CRLF row ends. Sets *quoted_fields to the number of quoted fields.
Rows ParseCsv(const std::string& text, int* quoted_fields = nullptr) {
  Rows rows;
  std::vector<std::string> row;
  std::string field;
  size_t i = 0;
  int quoted = 0;
  while (i < text.size()) {
    if (text[i] == '"') {
      ++quoted;
      ++i;
      while (true) {
        EXPECT_LT(i, text.size()) << "unterminated quote";
        if (i >= text.size()) break;
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field.push_back(text[i++]);
      }
    }
    while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
      EXPECT_NE(text[i], '"') << "quote inside an unquoted field at byte " << i;
      field.push_back(text[i++]);
    }
    row.push_back(std::move(field));
    field.clear();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == '\r') ++i;
    EXPECT_TRUE(i < text.size() && text[i] == '\n') << "row not ended by a newline";
    ++i;
    rows.push_back(std::move(row));
    row.clear();
  }
  if (quoted_fields != nullptr) *quoted_fields = quoted;
  return rows;
}

struct Generated {
  std::string nodes, edges;
  TaoGraphStats stats;
};

Generated Generate(const TaoGraphOptions& o) {
  Generated g;
  auto into = [](std::string* out) {
    return [out](std::string_view chunk) {
      out->append(chunk);
      return Status::OK();
    };
  };
  EXPECT_TRUE(GenerateTaoNodes(o, into(&g.nodes), &g.stats).ok());
  EXPECT_TRUE(GenerateTaoEdges(o, into(&g.edges), &g.stats).ok());
  return g;
}

TaoGraphOptions Small(uint64_t nodes, uint64_t seed = 7) {
  TaoGraphOptions o;
  o.nodes = nodes;
  o.seed = seed;
  return o;
}

TEST(TaoGraphTest, ValidateRejectsOutOfRangeOptions) {
  EXPECT_TRUE(Small(1000).Validate().ok());
  std::vector<TaoGraphOptions> bad(9, Small(1000));
  bad[0].nodes = 0;
  bad[1].properties = 0;
  bad[2].value_bytes = 100;  // < 16 * 40
  bad[3].presence = 0;
  bad[4].presence = 1.5;
  bad[5].average_degree = -1;
  bad[6].average_degree = 2000;  // > 1000 * 5 / 4
  bad[7].edge_types = 0;
  bad[8].days = 0;
  for (const auto& o : bad) {
    Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    std::string sink_calls;
    EXPECT_FALSE(GenerateTaoNodes(o, [&](std::string_view c) {
                   sink_calls.append(c);
                   return Status::OK();
                 }).ok());
    EXPECT_TRUE(sink_calls.empty());
  }
}

TEST(TaoGraphTest, SameSeedSameBytesOtherSeedOtherBytes) {
  const Generated a = Generate(Small(1500, 3));
  const Generated b = Generate(Small(1500, 3));
  const Generated c = Generate(Small(1500, 4));
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.edges, b.edges);
  EXPECT_NE(a.nodes, c.nodes);
  EXPECT_NE(a.edges, c.edges);
}

TEST(TaoGraphTest, WritesBothFilesAndReportsTheirSizes) {
  const std::string dir = ::testing::TempDir() + "/tao_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const TaoGraphOptions o = Small(800, 11);
  TaoGraphStats stats;
  ASSERT_TRUE(WriteTaoGraph(o, dir + "/nodes.csv", dir + "/edges.csv", &stats).ok());
  const Generated g = Generate(o);
  auto nodes = ReadFileToString(dir + "/nodes.csv");
  auto edges = ReadFileToString(dir + "/edges.csv");
  ASSERT_TRUE(nodes.ok() && edges.ok());
  EXPECT_EQ(*nodes, g.nodes);
  EXPECT_EQ(*edges, g.edges);
  EXPECT_EQ(stats.node_file_bytes, nodes->size());
  EXPECT_EQ(stats.edge_file_bytes, edges->size());
  EXPECT_EQ(stats.nodes, 800u);
  EXPECT_EQ(stats.edges, g.stats.edges);
  // Nothing else left in the directory (no temporary files).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 2);
  std::filesystem::remove_all(dir);
}

TEST(TaoGraphTest, NodesLookLikeProfiles) {
  const TaoGraphOptions o = Small(3000);
  const Generated g = Generate(o);
  int quoted = 0;
  const Rows rows = ParseCsv(g.nodes, &quoted);
  ASSERT_EQ(rows.size(), o.nodes + 1);
  ASSERT_EQ(rows[0].size(), 41u);
  EXPECT_EQ(rows[0][0], "id");
  EXPECT_EQ(rows[0][1], "p00");
  EXPECT_EQ(rows[0][40], "p39");

  uint64_t present = 0, value_bytes = 0;
  bool comma = false, quote = false, newline = false;
  std::vector<std::map<std::string, int>> counts(40);
  for (uint64_t id = 0; id < o.nodes; ++id) {
    const auto& row = rows[id + 1];
    ASSERT_EQ(row.size(), 41u) << "row " << id;
    EXPECT_EQ(row[0], std::to_string(id));
    for (int p = 0; p < 40; ++p) {
      const std::string& v = row[p + 1];
      if (v.empty()) continue;
      ++present;
      value_bytes += v.size();
      ++counts[p][v];
      comma |= v.find(',') != std::string::npos;
      quote |= v.find('"') != std::string::npos;
      newline |= v.find('\n') != std::string::npos;
      EXPECT_NE(v.front(), ' ');
      EXPECT_NE(v.back(), ' ');
    }
  }
  EXPECT_EQ(present, g.stats.present_values);
  EXPECT_EQ(value_bytes, g.stats.node_value_bytes);
  EXPECT_EQ(g.stats.node_file_bytes, g.nodes.size());
  const double rate = static_cast<double>(present) / (40.0 * o.nodes);
  EXPECT_NEAR(rate, 0.9, 0.01);
  const double mean_bytes = static_cast<double>(value_bytes) / o.nodes;
  EXPECT_NEAR(mean_bytes, 640, 640 * 0.03);
  // Quoting is exercised, but rarely.
  EXPECT_TRUE(comma && quote && newline);
  EXPECT_GT(quoted, 0);
  EXPECT_LT(quoted, static_cast<int>(o.nodes) / 5);
  // Categorical properties (p00, p02, p05, ...) repeat values: the most common value of p00 is held
  // by many nodes, and p01 (free text) has mostly distinct values.
  int top = 0;
  for (const auto& [v, c] : counts[0]) top = std::max(top, c);
  EXPECT_GT(top, static_cast<int>(o.nodes) / 20);
  EXPECT_LE(counts[0].size(), 50u);
  EXPECT_GT(counts[1].size(), o.nodes / 2);
}

TEST(TaoGraphTest, EdgesHavePowerLawDegreesTypesAndTimestamps) {
  const TaoGraphOptions o = Small(5000);
  const Generated g = Generate(o);
  int quoted = 0;
  const Rows rows = ParseCsv(g.edges, &quoted);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"src", "dst", "type", "timestamp", "data"}));

  std::vector<uint64_t> degree(o.nodes);
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> triples;
  std::map<std::tuple<uint64_t, uint64_t, int64_t>, int> same_time;  // (src, type, ts)
  std::set<uint64_t> types;
  const int64_t end = o.epoch + int64_t{o.days} * 86400;
  uint64_t data_bytes = 0, last_src = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& r = rows[i];
    ASSERT_EQ(r.size(), 5u) << "row " << i;
    const uint64_t src = std::stoull(r[0]), dst = std::stoull(r[1]), type = std::stoull(r[2]);
    const int64_t ts = std::stoll(r[3]);
    ASSERT_LT(src, o.nodes);
    ASSERT_LT(dst, o.nodes);
    EXPECT_GE(src, last_src) << "rows grouped by ascending src";
    last_src = src;
    ++degree[src];
    types.insert(type);
    EXPECT_GE(ts, o.epoch);
    EXPECT_LT(ts, end);
    EXPECT_TRUE(triples.insert({src, type, dst}).second) << "duplicate " << src << "," << dst;
    ++same_time[{src, type, ts}];
    EXPECT_FALSE(r[4].empty());
    data_bytes += r[4].size();
  }
  const uint64_t edges = rows.size() - 1;
  EXPECT_EQ(edges, g.stats.edges);
  EXPECT_EQ(edges, 10 * o.nodes);  // round(average_degree * nodes), exactly
  EXPECT_EQ(data_bytes, g.stats.edge_data_bytes);
  EXPECT_NEAR(static_cast<double>(data_bytes) / edges, 128, 128 * 0.03);
  EXPECT_EQ(types, (std::set<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_GT(quoted, 0);

  const uint64_t max_degree = *std::max_element(degree.begin(), degree.end());
  const auto zeros = std::count(degree.begin(), degree.end(), 0);
  EXPECT_EQ(max_degree, g.stats.max_out_degree);
  EXPECT_EQ(static_cast<uint64_t>(zeros), g.stats.zero_out_degree_nodes);
  EXPECT_GE(max_degree, 20u * 10);  // a heavy tail: hubs far above the mean
  EXPECT_GT(zeros, static_cast<long>(o.nodes / 20));
  EXPECT_LT(zeros, static_cast<long>(o.nodes / 3));
  // Equal timestamps occur within one node's edges of one type (and so in the whole file).
  int ties = 0;
  for (const auto& [key, c] : same_time) ties += c > 1;
  EXPECT_GT(ties, 100);
}

TEST(TaoGraphTest, DenseTinyGraphsStillHaveDistinctTriples) {
  // 8 nodes, one type: a node can have at most 4 of the 8 possible (type, dst) slots.
  TaoGraphOptions o = Small(8);
  o.edge_types = 1;
  o.average_degree = 2;
  o.properties = 3;
  o.value_bytes = 48;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    const Generated g = Generate(o);
    const Rows rows = ParseCsv(g.edges);
    std::set<std::pair<std::string, std::string>> pairs;
    for (size_t i = 1; i < rows.size(); ++i) {
      EXPECT_TRUE(pairs.insert({rows[i][0], rows[i][1]}).second);
    }
    EXPECT_LE(rows.size() - 1, 16u);
    EXPECT_EQ(ParseCsv(g.nodes).size(), 9u);
  }
}

TEST(TaoGraphTest, NamesWidenPastOneHundredProperties) {
  TaoGraphOptions o = Small(20);
  o.properties = 150;
  o.value_bytes = 16 * 150;
  const Generated g = Generate(o);
  const Rows rows = ParseCsv(g.nodes);
  ASSERT_EQ(rows[0].size(), 151u);
  EXPECT_EQ(rows[0][1], "p000");
  EXPECT_EQ(rows[0][150], "p149");
  for (const auto& r : rows) EXPECT_EQ(r.size(), 151u);
}

TEST(TaoGraphTest, HotNodeGetsItsOwnTypeAndLeavesTheRestAlone) {
  TaoGraphOptions o = Small(300);
  const Generated plain = Generate(o);
  o.hot_edges = 5000;
  const Generated hot = Generate(o);
  EXPECT_EQ(hot.nodes, plain.nodes);
  EXPECT_EQ(hot.stats.edges, plain.stats.edges + 5000);
  const Rows rows = ParseCsv(hot.edges), plain_rows = ParseCsv(plain.edges);
  Rows rest;
  std::set<std::string> dsts;
  std::map<std::string, int> timestamps;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i][0] == "0" && rows[i][2] == std::to_string(o.edge_types)) {
      dsts.insert(rows[i][1]);
      ++timestamps[rows[i][3]];
      EXPECT_GE(rows[i][4].size(), 50u) << "a data property like the others";
    } else {
      rest.push_back(rows[i]);
    }
  }
  EXPECT_EQ(rest, plain_rows) << "the regular edges changed";
  ASSERT_EQ(dsts.size(), 5000u) << "destinations are distinct";
  EXPECT_EQ(*dsts.begin(), "0");
  EXPECT_TRUE(dsts.count("4999"));
  size_t repeated = 0;
  for (const auto& [ts, n] : timestamps) repeated += n > 1 ? n : 0;
  EXPECT_GT(repeated, 200u) << "bursts of equal timestamps";
  // Grouped by source: the hot edges follow node 0's regular ones.
  for (size_t i = 1; i + 1 < rows.size(); ++i) {
    EXPECT_LE(std::stoll(rows[i][0]), std::stoll(rows[i + 1][0])) << "row " << i;
  }
  o.hot_edges = (uint64_t{1} << 28) + 1;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zipg::datagen
