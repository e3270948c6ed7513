// Tests of the compress pipeline's first half and its memory plan: the partitioner's footprints
// against the files a shard build really writes, repartitioning against partitioning directly,
// and PlanBuilds / ShardsToFit against hand-computed expectations.

#include "graph/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "graph/manifest.h"
#include "graph/partitioner.h"
#include "graph/shard_build.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "util/memory.h"
#include "util/scratch_dir.h"

namespace zipg::graph {
namespace {

namespace fs = std::filesystem;

struct Row {
  bool node = false;
  int64_t id = 0, dst = 0, type = 0, timestamp = 0;
  std::vector<std::pair<uint32_t, std::string>> properties;
};

// Random rows: nodes with some of 3 properties, edges with some of 2 and repeated keys.
std::vector<Row> RandomRows(uint64_t seed, size_t nodes, size_t edges) {
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return static_cast<int64_t>(rng() % n); };
  auto value = [&]() {
    std::string v(static_cast<size_t>(1 + below(40)), 'a');
    for (char& c : v) c = static_cast<char>('a' + below(26));
    return v;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < nodes; ++i) {
    Row r;
    r.node = true;
    r.id = static_cast<int64_t>(i * 7 + 3);
    for (uint32_t p = 0; p < 3; ++p) {
      if (below(3) != 0) r.properties.emplace_back(p, value());
    }
    rows.push_back(r);
  }
  for (size_t i = 0; i < edges; ++i) {
    Row r;
    r.id = below(static_cast<int64_t>(nodes)) * 7 + 3;
    r.dst = below(5000);
    r.type = below(3);
    r.timestamp = 1'600'000'000 + below(5'000'000);
    if (below(10) == 0 && !rows.empty()) {  // an upsert of an earlier edge key
      const Row& old = rows[static_cast<size_t>(below(static_cast<int64_t>(rows.size())))];
      if (!old.node) {
        r.id = old.id;
        r.dst = old.dst;
        r.type = old.type;
      }
    }
    for (uint32_t p = 0; p < 2; ++p) {
      if (below(2) != 0) r.properties.emplace_back(p, value());
    }
    rows.push_back(r);
  }
  return rows;
}

Status Feed(const std::vector<Row>& rows, InputSink* sink) {
  ZIPG_RETURN_IF_ERROR(sink->NodeHeader({"name", "city", "age"}));
  ZIPG_RETURN_IF_ERROR(sink->EdgeHeader({"data", "weight"}));
  PropertyRefs refs;
  for (const Row& r : rows) {
    refs.assign(r.properties.begin(), r.properties.end());
    if (r.node) {
      ZIPG_RETURN_IF_ERROR(sink->Node(r.id, refs));
    } else {
      ZIPG_RETURN_IF_ERROR(sink->Edge(r.id, r.dst, r.type, r.timestamp, refs));
    }
  }
  return Status::OK();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Builds every shard of `p` under `dir` (shard-0000, ...).
void BuildAll(const Partitioner& p, const std::string& dir) {
  for (uint32_t s = 0; s < p.shards(); ++s) {
    ShardBuildInput input;
    input.node_spill = p.NodeSpill(s);
    input.edge_spill = p.EdgeSpill(s);
    input.node_names = &p.node_names();
    input.edge_names = &p.edge_names();
    uint64_t edges = 0;
    const Status st = BuildShard(input, dir + "/" + ShardDirName(s), &edges);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

TEST(PartitionerTest, FootprintsMatchWhatTheBuildsWrite) {
  // Dense records listed in any order, dense records listed by source, and sparse records (about
  // one edge each, where record headers weigh most).
  struct Case {
    bool grouped;
    size_t nodes, edges;
  };
  for (const Case& c : {Case{false, 400, 6000}, Case{true, 400, 6000}, Case{true, 9000, 3000}}) {
    const bool grouped = c.grouped;
    ScratchDir dir("memory_plan_test");
    std::vector<Row> rows = RandomRows(grouped ? 2 : 1, c.nodes, c.edges);
    if (grouped) {  // edges listed source by source, as most input files are
      std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        return std::tuple(!a.node, a.id, a.type) < std::tuple(!b.node, b.id, b.type);
      });
    }
    fs::create_directories(dir.File("spill"));
    Partitioner p(dir.File("spill"), 3);
    ASSERT_TRUE(Feed(rows, &p).ok());
    ASSERT_TRUE(p.Flush().ok());
    const std::vector<ShardFootprint> footprints = p.footprints();
    BuildAll(p, dir.path());
    if (HasFatalFailure()) return;
    uint64_t nodes = 0, edges = 0;
    for (uint32_t s = 0; s < 3; ++s) {
      const std::string shard = dir.File(ShardDirName(s));
      auto node_file = layout::NodeFile::Open(shard + "/nodes");
      auto edge_file = layout::EdgeFile::Open(shard + "/edges");
      ASSERT_TRUE(node_file.ok() && edge_file.ok());
      const ShardFootprint& f = footprints[s];
      nodes += f.nodes;
      edges += f.edges;
      EXPECT_EQ(f.node_text, (*node_file)->text_size()) << "shard " << s;
      EXPECT_EQ((*node_file)->num_nodes(), f.nodes);
      EXPECT_GE(f.EdgeTextBound(), (*edge_file)->text_size()) << "shard " << s;
      if (grouped) {  // one run per record: the bound is close
        EXPECT_LE(f.EdgeTextBound(), (*edge_file)->text_size() * 13 / 10) << "shard " << s;
      }
    }
    EXPECT_EQ(nodes, c.nodes);
    EXPECT_EQ(edges, c.edges);
  }
}

TEST(PartitionerTest, RepartitionBuildsTheSameShardsAsPartitioningDirectly) {
  const std::vector<Row> rows = RandomRows(3, 300, 4000);
  ScratchDir direct("memory_plan_test"), moved("memory_plan_test");
  fs::create_directories(direct.File("spill"));
  fs::create_directories(moved.File("spill"));
  Partitioner a(direct.File("spill"), 5);
  Partitioner b(moved.File("spill"), 2);
  ASSERT_TRUE(Feed(rows, &a).ok());
  ASSERT_TRUE(a.Flush().ok());
  ASSERT_TRUE(Feed(rows, &b).ok());
  ASSERT_TRUE(b.Flush().ok());
  // What the rows would weigh in 5 (and 4) partitions, without moving them.
  auto at = b.FootprintsAt({4, 5});
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  ASSERT_EQ((*at)[0].size(), 4u);
  ASSERT_EQ((*at)[1].size(), 5u);
  for (uint32_t s = 0; s < 5; ++s) {
    EXPECT_EQ((*at)[1][s].nodes, a.footprints()[s].nodes);
    EXPECT_EQ((*at)[1][s].node_text, a.footprints()[s].node_text);
    EXPECT_EQ((*at)[1][s].edges, a.footprints()[s].edges);
    EXPECT_EQ((*at)[1][s].edge_spill, a.footprints()[s].edge_spill);
  }
  ASSERT_TRUE(b.Repartition(5).ok());
  ASSERT_EQ(b.shards(), 5u);
  for (uint32_t s = 0; s < 5; ++s) {
    EXPECT_EQ(a.footprints()[s].nodes, b.footprints()[s].nodes);
    EXPECT_EQ(a.footprints()[s].node_text, b.footprints()[s].node_text);
    EXPECT_EQ(a.footprints()[s].edges, b.footprints()[s].edges);
    EXPECT_EQ(a.footprints()[s].edge_property_bytes, b.footprints()[s].edge_property_bytes);
  }
  // The spill files of the first partitioning are gone.
  for (const auto& e : fs::directory_iterator(moved.File("spill"))) {
    EXPECT_EQ(e.path().filename().string().find("-0-"), std::string::npos) << e.path();
  }
  BuildAll(a, direct.path());
  BuildAll(b, moved.path());
  if (HasFatalFailure()) return;
  for (uint32_t s = 0; s < 5; ++s) {
    for (const char* file : {"nodes.zbk", "nodes.idx", "edges.zbk", "edges.meta"}) {
      const std::string name = ShardDirName(s) + "/" + file;
      EXPECT_EQ(ReadAll(direct.File(name)), ReadAll(moved.File(name))) << name;
    }
  }
}

TEST(PartitionerTest, BadRowsAreRefusedWithTheirKey) {
  ScratchDir dir("memory_plan_test");
  Partitioner p(dir.path(), 2);
  ASSERT_TRUE(p.NodeHeader({"b", "a"}).ok());
  ASSERT_TRUE(p.EdgeHeader({"w"}).ok());
  EXPECT_EQ(p.Node(-1, {}).message(), "node id -1 is negative");
  EXPECT_EQ(p.Node(5, {{2, "x"}}).message(), "node 5: property index out of range");
  EXPECT_EQ(p.Node(5, {{0, "bad\xF5"}}).message(), "node 5: the value of 'b' is not valid UTF-8");
  EXPECT_EQ(p.Edge(1, -2, 0, 0, {}).message(), "edge (1, 0, -2): src, dst and type must be >= 0");
  EXPECT_EQ(p.Edge(1, 2, 3, 0, {{0, "\xFF"}}).message(),
            "edge (1, 3, 2): the value of 'w' is not valid UTF-8");
  std::vector<std::string> too_many(layout::kMaxProperties + 1);
  for (size_t i = 0; i < too_many.size(); ++i) too_many[i] = "p" + std::to_string(i);
  EXPECT_EQ(p.NodeHeader(too_many).code(), StatusCode::kInvalidArgument);
}

ShardFootprint Footprint(uint64_t node_text, uint64_t edge_bytes) {
  ShardFootprint f;
  f.nodes = node_text / 100;
  f.node_text = f.node_spill = node_text;
  f.edges = edge_bytes / 100;
  f.edge_property_bytes = edge_bytes;
  f.edge_spill = edge_bytes + f.edges * 36;
  f.edge_runs = f.edges / 10;
  f.ts_min = 0;
  f.ts_max = 1000;
  f.dst_max = 100000;
  f.src_max = 100000;
  return f;
}

TEST(MemoryPlanTest, CompressedFileBuildPeakIsTextAndSuffixArray) {
  const layout::CompressedFileOptions o{32, 32, 64, false};
  const uint64_t n = 100 << 20;
  EXPECT_GE(CompressedFileBuildPeak(n, o), 5 * n);
  EXPECT_LE(CompressedFileBuildPeak(n, o), 5 * n + n / 2);
  const uint64_t big = uint64_t{3} << 30;  // past 2^31 - 1: 8-byte suffix array
  EXPECT_GE(CompressedFileBuildPeak(big, o), 9 * big);
  layout::CompressedFileOptions wide = o;
  wide.force_64bit_construction = true;
  EXPECT_GE(CompressedFileBuildPeak(n, wide), 9 * n);
}

TEST(MemoryPlanTest, ParallelBuildsFollowTheBudget) {
  const layout::CompressedFileOptions o{32, 32, 64, false};
  const layout::EdgeFileOptions e{3, {}, o};
  const layout::NodeFileOptions no{1, {}, o};
  const std::vector<ShardFootprint> shards = {Footprint(50 << 20, 100 << 20),
                                              Footprint(60 << 20, 110 << 20),
                                              Footprint(40 << 20, 90 << 20)};
  std::vector<uint64_t> peaks;
  for (const auto& f : shards) peaks.push_back(ShardBuildPeak(f, no, e));
  std::sort(peaks.rbegin(), peaks.rend());
  // Room for the two largest, not three.
  const uint64_t two = kProcessBaseline + peaks[0] + peaks[1];
  auto plan = PlanBuilds(shards, no, e, two + peaks[2] - 1, 8);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->parallel, 2u);
  EXPECT_EQ(plan->peak, two);
  EXPECT_EQ(plan->largest, peaks[0]);
  plan = PlanBuilds(shards, no, e, two + peaks[2], 8);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->parallel, 3u);
  plan = PlanBuilds(shards, no, e, uint64_t{1} << 50, 2);  // capped by the threads
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->parallel, 2u);
  plan = PlanBuilds(shards, no, e, kProcessBaseline + peaks[0], 8);  // exactly one fits
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->parallel, 1u);
}

TEST(MemoryPlanTest, TooSmallABudgetNamesTheShardCountThatFits) {
  const layout::CompressedFileOptions o{32, 32, 64, false};
  const layout::EdgeFileOptions e{3, {}, o};
  const layout::NodeFileOptions no{1, {}, o};
  const std::vector<ShardFootprint> shards(2, Footprint(200 << 20, 400 << 20));
  const uint64_t peak = ShardBuildPeak(shards[0], no, e);
  const uint64_t budget = kProcessBaseline + peak / 3;
  auto plan = PlanBuilds(shards, no, e, budget, 2);
  ASSERT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(plan.status().message(),
            "the largest of 2 shards needs about " + FormatBytes(peak + kProcessBaseline) +
                " of memory to build, more than the " + FormatBytes(budget) + " budget");
  const uint32_t fit = ShardsToFit(shards, no, e, budget);
  EXPECT_GE(fit, 6u);   // a third of the peak needs three times the shards
  EXPECT_LE(fit, 10u);  // and not wildly more
  // The suggested count fits once the shards shrink in proportion; one fewer does not.
  std::vector<ShardFootprint> smaller(fit, Footprint((200 << 20) * 2 / fit, (400 << 20) * 2 / fit));
  EXPECT_TRUE(PlanBuilds(smaller, no, e, budget, 1).ok());
  EXPECT_GT(
      ShardBuildPeak(Footprint((200 << 20) * 2 / (fit - 2), (400 << 20) * 2 / (fit - 2)), no, e) +
          kProcessBaseline,
      budget);
  // Nothing fits when the budget leaves nothing beyond the baseline.
  EXPECT_EQ(ShardsToFit(shards, no, e, kProcessBaseline), 4097u);
}

}  // namespace
}  // namespace zipg::graph
