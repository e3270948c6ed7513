// Tests of reads of written nodes (shard/merged.h over shard/delta.h), in-process: a one-shard
// compressed base with small records and a 3000-edge one (which has a destination index), a
// stand-in LogStore holding the written edges, and a model of the live graph. Random writes
// (upserts of base and new keys, deletes, node deletes and re-adds) go to the base shard as the
// LogStore would send them; after every round each read operation, with random arguments and
// the edge cases, must equal the model's answer, and so must a DeltaIndex reopened from its file.

#include "engine/merged.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "engine/live_shard.h"
#include "graph/compress.h"
#include "graph/edge_list.h"
#include "graph/graph.h"
#include "graph/partition.h"
#include "util/scratch_dir.h"
#include "util/snapshot.h"

namespace zipg::engine {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kHot = 5;  // the node with the big record (type 1)

using Key = std::tuple<int64_t, int64_t, int64_t>;  // src, type, dst

// The LogStore's side: the live versions of written edges and properties, by generation.
class FakeLogStore final : public FragmentSource {
 public:
  StatusOr<std::optional<Properties>> FragmentProperties(
      int64_t id, const std::vector<int64_t>& generations) override {
    ++calls;
    const auto& props = At().second;
    auto it = props.find(id);
    if (it == props.end() ||
        std::find(generations.begin(), generations.end(), it->second.first) == generations.end()) {
      return std::optional<Properties>();
    }
    return std::optional<Properties>(it->second.second);
  }
  StatusOr<std::vector<Edge>> FragmentEdges(int64_t id, int64_t type,
                                            const std::vector<int64_t>& generations,
                                            const std::vector<int64_t>& dsts) override {
    ++calls;
    const auto& edges = At().first;
    std::vector<Edge> out;
    for (int64_t d : dsts) {
      auto it = edges.find({id, type, d});
      if (it == edges.end()) continue;
      if (std::find(generations.begin(), generations.end(), it->second.first) ==
          generations.end()) {
        continue;
      }
      out.push_back(it->second.second);
    }
    return out;
  }

  using Edges = std::map<Key, std::pair<int64_t, Edge>>;            // -> generation, edge
  using Props = std::map<int64_t, std::pair<int64_t, Properties>>;  // -> generation, properties
  Edges edges;
  Props props;
  int calls = 0;

  // Snapshots: keeps a copy of the data as of update `id`, for reads at it (ReadAt).
  void Keep(uint64_t id) { kept[id] = {edges, props}; }

 private:
  // The data at this thread's snapshot: the copy kept at it (the latest without one).
  const std::pair<Edges, Props>& At() {
    latest = {edges, props};
    const uint64_t at = ReadAt::Current();
    if (at == 0) return latest;
    auto it = kept.find(at);
    EXPECT_NE(it, kept.end()) << "no copy kept at " << at;
    return it == kept.end() ? latest : it->second;
  }
  std::map<uint64_t, std::pair<Edges, Props>> kept;
  std::pair<Edges, Props> latest;
};

// The live graph: every (src, type)'s edges by dst, and node properties.
struct Model {
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, Edge>> edges;
  std::map<int64_t, Properties> props;

  EdgeList List(int64_t src, int64_t type) const {
    EdgeList out;
    auto it = edges.find({src, type});
    if (it != edges.end()) {
      for (const auto& [d, e] : it->second) out.push_back(e);
    }
    std::sort(out.begin(), out.end(), NewestFirst);
    return out;
  }
};

struct Fixture {
  ScratchDir dir{"merged_test"};
  graph::InputGraph input;
  Model model;
  std::unique_ptr<layout::Shard> base;

  void Build(uint64_t seed) {
    std::mt19937_64 rng(seed);
    input.node_property_names = {"name"};
    input.edge_property_names = {"w"};
    for (int64_t id = 0; id < 40; ++id) {
      if (id % 7 == 6) continue;  // some sources have no node row
      input.nodes.push_back({id, {{0, "n" + std::to_string(id)}}});
      model.props[id] = {{"name", "n" + std::to_string(id)}};
    }
    auto add = [&](int64_t src, int64_t type, int64_t dst, int64_t ts) {
      const std::string w = "v" + std::to_string(rng() % 1000);
      input.edges.push_back({src, dst, type, ts, {{0, w}}});
      model.edges[{src, type}][dst] = Edge{src, type, dst, ts, {{"w", w}}};
    };
    for (int64_t src = 0; src < 40; ++src) {
      for (int k = 0; k < static_cast<int>(rng() % 8); ++k) {
        add(src, static_cast<int64_t>(rng() % 3), static_cast<int64_t>(rng() % 50),
            static_cast<int64_t>(rng() % 30));
      }
    }
    // The hot record: distinct destinations, timestamps with many ties, both int64 extremes.
    std::set<int64_t> dsts = {0, kMax};
    while (dsts.size() < 3000) dsts.insert(static_cast<int64_t>(rng() % 1000000));
    const int64_t times[] = {kMin, 7, 7, 8, 100, 101, 5000, kMax};
    for (int64_t d : dsts) {
      const int64_t ts = rng() % 5 == 0 ? times[rng() % 8] : static_cast<int64_t>(rng() % 10000);
      add(kHot, 1, d, ts);
    }
    graph::CompressOptions options;
    options.shards = 1;
    options.edge_file.blocks = {1024, 1, 4096};  // small blocks: records span them
    ASSERT_TRUE(graph::CompressGraph(input, dir.File("store"), options, {}, nullptr).ok());
    auto store = OpenStore(dir.File("store"), {}, nullptr);
    ASSERT_TRUE(store.ok());
    base = std::move(store->shards[0]);
  }
};

// Random writes as the LogStore sends them to the base shard, applied to the model and the
// stand-in LogStore, with what each one finds in the base: the keys and properties whose live
// version the base holds (all of them after a load or a rebuild, less what was written since).
struct Writer {
  Writer(Model* m, FakeLogStore* l) : model(m), log(l) { Reset(); }

  // The base holds every live version (just loaded, or just rebuilt).
  void Reset() {
    base_keys.clear();
    base_props.clear();
    for (const auto& [key, edges] : model->edges) {
      for (const auto& [dst, e] : edges) base_keys.insert({key.first, key.second, dst});
    }
    for (const auto& [id, p] : model->props) base_props.insert(id);
  }

  // Whether u found a live version in the base; the base's version is dead from now on.
  bool Forget(const Update& u) {
    switch (u.op) {
      case UpdateOp::kPutEdge:
      case UpdateOp::kDeleteEdge:
        return base_keys.erase({u.node, u.type, u.dst}) > 0;
      case UpdateOp::kPutNode:
        return base_props.erase(u.node) > 0;
      case UpdateOp::kDeleteNode: {
        bool found = base_props.erase(u.node) > 0;
        auto it = base_keys.lower_bound({u.node, kMin, kMin});
        while (it != base_keys.end() && std::get<0>(*it) == u.node) {
          it = base_keys.erase(it);
          found = true;
        }
        return found;
      }
      case UpdateOp::kLayout:
        return false;
    }
    return false;
  }

  // 60 random writes (upserts of base and new keys, deletes, node updates, deletes and re-adds),
  // numbered after the last ones; *want_found: what each finds in the base.
  std::vector<Update> Round(std::mt19937_64& rng, std::vector<bool>* want_found) {
    std::vector<Update> batch;
    want_found->clear();
    for (int k = 0; k < 60; ++k) {
      const int64_t src = rng() % 3 == 0 ? kHot : static_cast<int64_t>(rng() % 42);
      const int64_t type = src == kHot && rng() % 4 != 0 ? 1 : static_cast<int64_t>(rng() % 4);
      auto& live = model->edges[{src, type}];
      const uint32_t kind = rng() % 20;
      if (kind < 12) {  // assoc_add: an existing key (upsert) or a new one
        int64_t dst = static_cast<int64_t>(rng() % 1000000);
        if (!live.empty() && rng() % 2 == 0) {
          auto it = live.begin();
          std::advance(it, rng() % live.size());
          dst = it->first;
        }
        const int64_t ts = rng() % 3 == 0 ? 7 : static_cast<int64_t>(rng() % 12000) - 1000;
        const Edge e{src, type, dst, ts, {{"w", "x" + std::to_string(rng() % 100)}}};
        batch.push_back({UpdateOp::kPutEdge, src, type, dst, generation, ts});
        live[dst] = e;
        log->edges[{src, type, dst}] = {generation, e};
      } else if (kind < 18) {  // assoc_delete of a live or absent key
        int64_t dst = static_cast<int64_t>(rng() % 1000000);
        if (!live.empty() && rng() % 4 != 0) {
          auto it = live.begin();
          std::advance(it, rng() % live.size());
          dst = it->first;
        }
        batch.push_back({UpdateOp::kDeleteEdge, src, type, dst, 0, 0});
        live.erase(dst);
        log->edges.erase({src, type, dst});
      } else if (kind == 18 && src != kHot) {  // obj_update, sometimes with a new property name
        Properties p = {{"name", "w" + std::to_string(rng() % 100)}};
        if (rng() % 3 == 0) p.insert(p.begin(), {"extra", "e" + std::to_string(rng() % 10)});
        batch.push_back({UpdateOp::kPutNode, src, 0, 0, generation, 0});
        model->props[src] = p;
        log->props[src] = {generation, p};
      } else if (src != kHot) {  // obj_delete: properties and every edge
        for (auto& [key, edges] : model->edges) {
          if (key.first != src) continue;
          for (const auto& [d, e] : edges) log->edges.erase({src, key.second, d});
          edges.clear();
        }
        batch.push_back({UpdateOp::kDeleteNode, src, 0, 0, 0, 0});
        model->props.erase(src);
        log->props.erase(src);
      } else {
        continue;
      }
      want_found->push_back(Forget(batch.back()));
    }
    for (Update& u : batch) u.id = ++last_id;  // their places in the LogStore's log
    return batch;
  }

  Model* model;
  FakeLogStore* log;
  std::set<Key> base_keys;
  std::set<int64_t> base_props;
  int64_t generation = 1;
  uint64_t last_id = 0;
};

// Every read of (src, type) against the model, with random and edge-case arguments.
void CheckNode(const MergedShard& g, const Model& model, int64_t src, int64_t type,
               std::mt19937_64& rng, const std::string& what) {
  const EdgeList list = model.List(src, type);
  const int64_t n = static_cast<int64_t>(list.size());
  auto count = g.AssocCount(src, type);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  ASSERT_EQ(*count, n) << what << " assoc_count " << src << "/" << type;
  std::vector<int64_t> positions = {0, 1, n / 2, n - 1, n, n + 5, kMax};
  for (int i = 0; i < 6; ++i) positions.push_back(static_cast<int64_t>(rng() % (n + 2)));
  for (int64_t pos : positions) {
    if (pos < 0) continue;
    for (int64_t limit : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{10}, n + 1, kMax}) {
      if (limit < 0) continue;
      auto got = g.AssocRange(src, type, pos, limit);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(*got, ListAssocRange(list, pos, limit))
          << what << " assoc_range " << src << "/" << type << " pos " << pos << " limit " << limit;
    }
    auto data = g.EdgeData(src, type, pos);
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(*data, ListEdgeData(list, pos)) << what << " get_edge_data " << pos;
  }
  std::vector<int64_t> stamps = {kMin, kMax, -1, 7, 8, 100, 5000};
  for (int i = 0; i < 4 && n > 0; ++i) stamps.push_back(list[rng() % n].timestamp);
  for (int i = 0; i < 10; ++i) {
    const int64_t lo = stamps[rng() % stamps.size()], hi = stamps[rng() % stamps.size()];
    auto range = g.EdgeRange(src, type, lo, hi);
    ASSERT_TRUE(range.ok());
    ASSERT_EQ(*range, ListEdgeRange(list, lo, hi))
        << what << " get_edge_range " << lo << ".." << hi;
    for (int64_t limit : {int64_t{1}, int64_t{4}, kMax}) {
      auto got = g.AssocTimeRange(src, type, lo, hi, limit);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(*got, ListAssocTimeRange(list, lo, hi, limit))
          << what << " assoc_time_range " << lo << ".." << hi << " limit " << limit;
    }
    std::vector<int64_t> ids = {static_cast<int64_t>(rng() % 1000000), kMax, -1};
    for (int k = 0; k < 4 && n > 0; ++k) ids.push_back(list[rng() % n].dst);
    if (!ids.empty()) ids.push_back(ids.back());  // a repeated id
    auto got = g.AssocGet(src, type, ids, lo, hi);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(*got, ListAssocGet(list, ids, lo, hi)) << what << " assoc_get " << lo << ".." << hi;
  }
  std::vector<int64_t> dsts;
  for (const auto& e : list) dsts.push_back(e.dst);
  std::sort(dsts.begin(), dsts.end());
  auto neighbors = g.NeighborIds(src, type);
  ASSERT_TRUE(neighbors.ok());
  ASSERT_EQ(*neighbors, dsts) << what << " get_neighbor_ids " << src << "/" << type;
}

// `every`: check every `every`-th source only (from a random one), and the hot node (k5).
void CheckAll(const MergedShard& g, const Model& model, std::mt19937_64& rng,
              const std::string& what, int64_t every = 1) {
  const int64_t offset = every > 1 ? static_cast<int64_t>(rng() % every) : 0;
  for (int64_t src = 0; src < 42; ++src) {
    if (src != kHot && (src + offset) % every != 0) continue;
    for (int64_t type = 0; type < 4; ++type) {
      CheckNode(g, model, src, type, rng, what);
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Untyped neighbors and properties.
    std::set<int64_t> all;
    for (int64_t type = 0; type < 4; ++type) {
      for (const auto& e : model.List(src, type)) all.insert(e.dst);
    }
    auto neighbors = g.NeighborIds(src, std::nullopt);
    ASSERT_TRUE(neighbors.ok());
    ASSERT_EQ(*neighbors, std::vector<int64_t>(all.begin(), all.end())) << what << " " << src;
    auto props = g.GetNodeProperty(src, nullptr);
    ASSERT_TRUE(props.ok());
    auto it = model.props.find(src);
    ASSERT_EQ(*props, it == model.props.end() ? std::optional<Properties>()
                                              : std::optional<Properties>(it->second))
        << what << " obj_get " << src;
  }
}

TEST(MergedShardTest, RandomWritesReadLikeTheModel) {
  Fixture f;
  f.Build(1);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  const std::string delta_path = f.dir.File("delta");
  auto delta = DeltaIndex::Open(delta_path);
  ASSERT_TRUE(delta.ok());
  auto g = std::make_unique<MergedShard>(f.base.get(), std::move(*delta), &log);
  std::mt19937_64 rng(2);
  CheckAll(*g, f.model, rng, "before writes");
  if (HasFatalFailure()) return;
  Writer w(&f.model, &log);
  Model& model = f.model;
  for (int round = 0; round < 12; ++round) {
    if (round % 4 == 3) ++w.generation;  // a compaction: the LogStore's data keeps its generation
    std::vector<bool> want_found;
    const std::vector<Update> batch = w.Round(rng, &want_found);
    const uint64_t last_id = w.last_id;
    auto found = g->Apply(batch);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    ASSERT_EQ(*found, want_found) << "round " << round;
    ASSERT_EQ(g->delta().last_id(), last_id);
    // The same updates again (a resend after a LogStore restart, or a feed read overlapping a
    // push): skipped by id, so nothing changes.
    auto again = g->Apply(batch);
    ASSERT_TRUE(again.ok());
    ASSERT_EQ(*again, std::vector<bool>(batch.size(), false));
    CheckAll(*g, model, rng, "round " + std::to_string(round));
    if (HasFatalFailure()) return;
  }
  // Reopened from its file, the index answers the same.
  g.reset();
  auto reopened = DeltaIndex::Open(delta_path);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  g = std::make_unique<MergedShard>(f.base.get(), std::move(*reopened), &log);
  EXPECT_EQ(g->delta().last_id(), w.last_id);
  CheckAll(*g, model, rng, "reopened");
}

// Held uncommitted (a shard server's replicas; docs/write-pipeline.md, "Provisional pointers"):
// a rollback undoes exactly the rounds applied since the last commit (reads equal that commit's
// model, even after a prune asked to forget everything), the ids it gave back are reused by other
// writes (a LogStore started again) and applied, not skipped, and the file holds only committed
// rounds: reopened, the index reads as the model of the last commit.
TEST(MergedShardTest, UncommittedRoundsRollBackToTheLastCommittedOne) {
  Fixture f;
  f.Build(3);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  const std::string delta_path = f.dir.File("delta");
  auto delta = DeltaIndex::Open(delta_path, /*sync=*/false, /*floor=*/0, /*hold_uncommitted=*/true);
  ASSERT_TRUE(delta.ok());
  auto g = std::make_unique<MergedShard>(f.base.get(), std::move(*delta), &log);
  Writer w(&f.model, &log);
  struct Committed {
    Model model;
    FakeLogStore::Edges edges;
    FakeLogStore::Props props;
    std::set<Key> base_keys;
    std::set<int64_t> base_props;
    uint64_t last_id;
  };
  auto take = [&] {
    return Committed{f.model, log.edges, log.props, w.base_keys, w.base_props, w.last_id};
  };
  auto restore = [&](const Committed& c) {
    f.model = c.model;
    log.edges = c.edges;
    log.props = c.props;
    w.base_keys = c.base_keys;
    w.base_props = c.base_props;
    w.last_id = c.last_id;  // the ids rolled back are given out again
  };
  Committed committed = take();
  std::mt19937_64 rng(4);
  int rollbacks = 0, commits = 0;
  for (int round = 0; round < 30; ++round) {
    const std::string what = "round " + std::to_string(round);
    const Committed prior = take();
    std::vector<bool> want_found;
    const std::vector<Update> batch = w.Round(rng, &want_found);
    auto found = g->Apply(batch);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    ASSERT_EQ(*found, want_found) << what;  // ids reused after a rollback are applied
    ASSERT_EQ(g->delta().last_id(), w.last_id) << what;
    switch (rng() % 4) {
      case 0:  // committed up to the round before: this one stays held
        ASSERT_TRUE(g->mutable_delta().Commit(prior.last_id).ok());
        EXPECT_EQ(g->delta().held(), batch.size()) << what;
        committed = prior;
        break;
      case 1:
        ASSERT_TRUE(g->mutable_delta().Commit(w.last_id).ok());
        EXPECT_EQ(g->delta().held(), 0u) << what;
        committed = take();
        ++commits;
        break;
      case 2: {
        g->mutable_delta().Prune(std::numeric_limits<uint64_t>::max());  // spares the held ones
        auto undone = g->mutable_delta().RollBackUncommitted();
        ASSERT_TRUE(undone.ok()) << undone.status().ToString();
        EXPECT_EQ(*undone, w.last_id - committed.last_id) << what;
        EXPECT_EQ(g->delta().last_id(), committed.last_id) << what;
        EXPECT_EQ(g->delta().held(), 0u);
        restore(committed);
        ++rollbacks;
        break;
      }
      default:  // left held
        break;
    }
    CheckAll(*g, f.model, rng, what, /*every=*/3);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(rollbacks, 3);
  EXPECT_GE(commits, 3);
  // One more round, not committed: the file does not hold it.
  std::vector<bool> want_found;
  ASSERT_TRUE(g->Apply(w.Round(rng, &want_found)).ok());
  ASSERT_GT(g->delta().held(), 0u);
  g.reset();
  auto reopened = DeltaIndex::Open(delta_path, false, 0, true);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  g = std::make_unique<MergedShard>(f.base.get(), std::move(*reopened), &log);
  restore(committed);
  EXPECT_EQ(g->delta().last_id(), committed.last_id);
  CheckAll(*g, f.model, rng, "reopened");
}

TEST(MergedShardTest, ReadsOfTheHotNodeFetchOnlyTheirAnswerFromTheLogStore) {
  Fixture f;
  f.Build(3);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  auto delta = DeltaIndex::Open(f.dir.File("delta"));
  ASSERT_TRUE(delta.ok());
  MergedShard g(f.base.get(), std::move(*delta), &log);
  // 500 new edges of the hot node, older than the base's edges but those at the int64 minimum.
  std::vector<Update> batch;
  for (int64_t k = 0; k < 500; ++k) {
    const Edge e{kHot, 1, 2000000 + k, -100 - k, {}};
    batch.push_back({UpdateOp::kPutEdge, kHot, 1, e.dst, 1, e.timestamp});
    log.edges[{kHot, 1, e.dst}] = {1, e};
    f.model.edges[{kHot, 1}][e.dst] = e;
  }
  ASSERT_TRUE(g.Apply(batch).ok());
  log.calls = 0;
  auto count = g.AssocCount(kHot, 1);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 3500);
  auto top = g.AssocRange(kHot, 1, 0, 10);  // all from the base
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->size(), 10u);
  EXPECT_EQ(log.calls, 0) << "count and a base-only range need no LogStore call";
  const EdgeList list = f.model.List(kHot, 1);
  const int64_t first_new =
      std::find_if(list.begin(), list.end(),
                   [](const Edge& e) { return e.dst >= 2000000 && e.dst < 2000500; }) -
      list.begin();
  ASSERT_GT(first_new, 2500);
  auto tail = g.AssocRange(kHot, 1, first_new - 3, 10);  // 3 base edges, 7 new ones
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, ListAssocRange(list, first_new - 3, 10));
  EXPECT_EQ(log.calls, 1) << "one LogStore call for the 7 edges that live there";
}

// A version the delta names and the LogStore does not hold (not applied there yet, or replaced
// there by a write this replica has not applied) is left out of the answer, never replaced by
// another, and counted in the reading thread's MissedVersions (which ServerGraph::ReadNode turns
// into a refusal for a node whose updates are all committed).
TEST(MergedShardTest, VersionsTheLogStoreDoesNotHoldAreLeftOutAndCounted) {
  Fixture f;
  f.Build(5);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  auto delta = DeltaIndex::Open(f.dir.File("delta"));
  ASSERT_TRUE(delta.ok());
  MergedShard g(f.base.get(), std::move(*delta), &log);
  const Edge e{1, 0, 9000000, 50, {{"w", "new"}}};
  const Properties p = {{"name", "written"}};
  ASSERT_TRUE(g.Apply({{UpdateOp::kPutEdge, 1, 0, e.dst, 1, e.timestamp},
                       {UpdateOp::kPutNode, 2, 0, 0, 1, 0}})
                  .ok());
  f.model.edges[{1, 0}][e.dst] = e;
  f.model.props[2] = p;
  const EdgeList with = f.model.List(1, 0);
  EdgeList without = with;
  without.erase(std::find(without.begin(), without.end(), e));
  auto range = [&](uint64_t* missed) {
    MissedVersions scope;
    auto got = g.AssocRange(1, 0, 0, 100);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    *missed = scope.count();
    return got.ok() ? *got : EdgeList{};
  };
  auto props = [&](uint64_t* missed) {
    MissedVersions scope;
    auto got = g.GetNodeProperty(2, nullptr);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    *missed = scope.count();
    return got.ok() ? *got : std::nullopt;
  };
  uint64_t missed = 99;
  // Not applied in the LogStore yet.
  EXPECT_EQ(range(&missed), without);
  EXPECT_EQ(missed, 1u);
  EXPECT_EQ(props(&missed), std::nullopt);  // absent: the base's are dead
  EXPECT_EQ(missed, 1u);
  // Applied: the answer is whole and nothing is missed.
  log.edges[{1, 0, e.dst}] = {1, e};
  log.props[2] = {1, p};
  EXPECT_EQ(range(&missed), with);
  EXPECT_EQ(missed, 0u);
  EXPECT_EQ(props(&missed), p);
  EXPECT_EQ(missed, 0u);
  // The LogStore moved on (a newer timestamp, newer properties in a later generation) without
  // this replica: the old version is left out, the newer one never takes its place.
  log.edges[{1, 0, e.dst}] = {2, Edge{1, 0, e.dst, 60, {{"w", "newer"}}}};
  log.props[2] = {2, {{"name", "newer"}}};
  EXPECT_EQ(range(&missed), without);
  EXPECT_EQ(missed, 1u);
  EXPECT_EQ(props(&missed), std::nullopt);
  EXPECT_EQ(missed, 1u);
  // Scopes nest (the innermost counts); reads outside any scope count nowhere.
  {
    MissedVersions outer;
    uint64_t inner = 0;
    range(&inner);
    EXPECT_EQ(inner, 1u);
    EXPECT_EQ(outer.count(), 0u);
    ASSERT_TRUE(g.AssocRange(1, 0, 0, 100).ok());
    EXPECT_EQ(outer.count(), 1u);
  }
  EXPECT_TRUE(g.AssocRange(1, 0, 0, 100).ok());
}

// Rebuilds of a written base shard (engine/live_shard.h): every third round of random writes
// the shard is rebuilt, with a round applied after its snapshot (seen by the build) and one
// after the build (not seen); each update must find in the base what the model says, before
// and after the swap, and every read must equal the model. A reader holding the old version
// reads it to the end; the superseded files go when it lets go; a reopen finds the last version
// and removes an interrupted build's files.
TEST(LiveShardTest, RebuiltVersionsReadLikeTheModelUnderWrites) {
  Fixture f;
  f.Build(5);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  Writer w(&f.model, &log);
  std::mt19937_64 rng(6);
  const std::string prefix = f.dir.File("shard-0");
  LiveShard* target = nullptr;
  // The base's live versions as the build reads them, and the updates applied since the
  // snapshot: the new version's base holds the former less what the latter touch.
  std::unique_ptr<Writer> next;
  std::vector<Update> since;
  auto apply_round = [&](const std::string& what) {
    std::vector<bool> want;
    const std::vector<Update> batch = w.Round(rng, &want);
    auto found = target->Apply(batch);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, want) << what;
    since.insert(since.end(), batch.begin(), batch.end());
  };
  LiveShardOptions options;
  options.rebuild_memory = 256 << 20;
  options.snapshot_retention_ms = 1;  // replaced versions go at the first prune after a rebuild
  options.rebuild_hook = [&](int stage) {
    apply_round(stage == 0 ? "after the snapshot" : "after the build");
    if (stage == 0) {
      next = std::make_unique<Writer>(&f.model, &log);  // what the build will read
      for (const Update& u : since) next->Forget(u);
    }
  };
  auto live = LiveShard::Open(f.base.get(), prefix, &log, options);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  target = live->get();
  std::shared_ptr<const MergedShard> held;
  for (int round = 0; round < 10; ++round) {
    if (round % 4 == 3) ++w.generation;
    apply_round("round " + std::to_string(round));
    if (HasFatalFailure()) return;
    if (round % 3 != 2) continue;
    if (!held) held = target->Current();  // a reader of version 0 across the first rebuilds
    const uint64_t through = w.last_id;
    const int64_t version = target->Stats()["version"].get<int64_t>() + 1;
    since.clear();
    auto summary = target->Rebuild();
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ((*summary)["through"].get<uint64_t>(), through);
    EXPECT_EQ((*summary)["replayed"].get<size_t>(), since.size());
    for (const Update& u : since) next->Forget(u);
    w.base_keys = next->base_keys;
    w.base_props = next->base_props;
    const nlohmann::json stats = target->Stats();
    EXPECT_EQ(stats["version"].get<int64_t>(), version);
    EXPECT_EQ(stats["through"].get<uint64_t>(), through);
    EXPECT_EQ(target->last_id(), w.last_id);
    // The delta holds only the nodes written since the snapshot.
    std::set<int64_t> touched;
    for (const Update& u : since) touched.insert(u.node);
    EXPECT_LE(target->written_nodes(), touched.size());
    EXPECT_TRUE(std::filesystem::exists(prefix + ".v" + std::to_string(version)));
    CheckAll(*target->Current(), f.model, rng, "after rebuild " + std::to_string(version));
    if (HasFatalFailure()) return;
  }
  // The held reader still reads version 0 (the base as loaded, with its delta) to the end.
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->AssocCount(kHot, 1).ok());
  EXPECT_TRUE(std::filesystem::exists(prefix + ".delta"));
  // Past the retention, the next applied batch lets go of the replaced versions (kept until
  // then for reads at snapshots before the rebuilds).
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  apply_round("past the retention");
  held.reset();
  EXPECT_FALSE(std::filesystem::exists(prefix + ".delta")) << "version 0's delta outlived it";
  const int64_t last = target->Stats()["version"].get<int64_t>();
  ASSERT_EQ(last, 3);
  EXPECT_FALSE(std::filesystem::exists(prefix + ".v2"));
  // Reopened (with a crashed build's leftovers beside it): the last version and its delta.
  live->reset();
  std::filesystem::create_directories(prefix + ".v4/shard-0000");
  { std::ofstream(prefix + ".v4.delta") << "partial"; }
  options.rebuild_hook = nullptr;
  auto reopened = LiveShard::Open(f.base.get(), prefix, &log, options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->Stats()["version"].get<int64_t>(), 3);
  EXPECT_EQ((*reopened)->last_id(), w.last_id);
  EXPECT_FALSE(std::filesystem::exists(prefix + ".v4"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".v4.delta"));
  CheckAll(*(*reopened)->Current(), f.model, rng, "reopened");
  if (HasFatalFailure()) return;
  // Writes go on after the reopen, and a second reopen finds the same version with them.
  target = reopened->get();
  apply_round("after the reopen");
  CheckAll(*target->Current(), f.model, rng, "written after the reopen");
  if (HasFatalFailure()) return;
  reopened->reset();
  auto again = LiveShard::Open(f.base.get(), prefix, &log, options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->Stats()["version"].get<int64_t>(), 3);
  EXPECT_EQ((*again)->last_id(), w.last_id);
  CheckAll(*(*again)->Current(), f.model, rng, "reopened twice");
  if (HasFatalFailure()) return;
  // A damaged version file is an error naming it, not a silent return to version 0.
  again->reset();
  { std::ofstream(prefix + ".version") << "{\"version\": 0}"; }
  auto damaged = LiveShard::Open(f.base.get(), prefix, &log, options);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().ToString().find(prefix + ".version"), std::string::npos);
}

// A split (docs/cluster-changes.md, step 4): the two halves, built from a snapshot with writes
// applied during the build and after it (forwarded to the halves, filtered), read like the model
// restricted to their nodes; the layout mark gives both halves its id; detached, they take
// their own writes, and reopened from their files they read the same.
TEST(LiveShardTest, ASplitsHalvesReadLikeTheModelOfTheirNodes) {
  Fixture f;
  f.Build(13);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  Writer w(&f.model, &log);
  std::mt19937_64 rng(14);
  LiveShardOptions options;
  options.rebuild_memory = 256 << 20;
  LiveShard* target = nullptr;
  auto apply_round = [&](const std::string& what) {
    std::vector<bool> want;
    auto found = target->Apply(w.Round(rng, &want));
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, want) << what;
  };
  options.rebuild_hook = [&](int stage) {
    apply_round(stage == 0 ? "after the snapshot" : "after the builds");
  };
  auto live = LiveShard::Open(f.base.get(), f.dir.File("shard-0"), &log, options);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  target = live->get();
  for (int round = 0; round < 4; ++round) apply_round("before the split");
  if (HasFatalFailure()) return;
  EXPECT_FALSE(target->PreparedSplit());
  std::filesystem::create_directories(f.dir.File("split-2"));
  const std::array<std::string, 2> prefixes = {f.dir.File("split-2/shard-0"),
                                               f.dir.File("split-2/shard-1")};
  auto summary = target->Split(2, {0, 1}, prefixes);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GT((*summary)["replayed"].get<size_t>(), 0u) << summary->dump();
  auto prepared = target->PreparedSplit();
  ASSERT_TRUE(prepared);
  EXPECT_EQ(prepared->first, 2u);
  for (int round = 0; round < 3; ++round) apply_round("after the split");
  if (HasFatalFailure()) return;
  // The model restricted to one half's nodes.
  auto half_model = [&](uint32_t half) {
    Model m;
    for (const auto& [key, edges] : f.model.edges) {
      if (ShardOf(key.first, 2) == half) m.edges[key] = edges;
    }
    for (const auto& [id, p] : f.model.props) {
      if (ShardOf(id, 2) == half) m.props[id] = p;
    }
    return m;
  };
  // The layout mark: no data, its id reaches both halves.
  const Update mark{UpdateOp::kLayout, 2, 0, 0, 0, 0, ++w.last_id};
  ASSERT_TRUE(target->Apply({mark}).ok());
  auto halves = target->TakeHalves();
  ASSERT_TRUE(halves[0] && halves[1]);
  EXPECT_FALSE(target->PreparedSplit());
  for (uint32_t h = 0; h < 2; ++h) {
    EXPECT_EQ(halves[h]->last_id(), mark.id) << "half " << h;
    EXPECT_EQ(halves[h]->version(), 1);
    CheckAll(*halves[h]->Current(), half_model(h), rng, "half " + std::to_string(h));
    if (HasFatalFailure()) return;
  }
  // Each half now takes the writes of its own nodes.
  for (int round = 0; round < 3; ++round) {
    std::vector<bool> want;
    const std::vector<Update> batch = w.Round(rng, &want);
    for (uint32_t h = 0; h < 2; ++h) {
      std::vector<Update> mine;
      for (const Update& u : batch) {
        if (ShardOf(u.node, 2) == h) mine.push_back(u);
      }
      ASSERT_TRUE(halves[h]->Apply(mine).ok());
    }
  }
  for (uint32_t h = 0; h < 2; ++h) {
    CheckAll(*halves[h]->Current(), half_model(h), rng, "half " + std::to_string(h) + " written");
    if (HasFatalFailure()) return;
  }
  // Reopened from their files alone (no base of the store).
  for (uint32_t h = 0; h < 2; ++h) {
    const uint64_t last = halves[h]->last_id();
    halves[h].reset();
    options.rebuild_hook = nullptr;
    auto reopened = LiveShard::Open(nullptr, prefixes[h], &log, options);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    EXPECT_EQ((*reopened)->last_id(), last);
    CheckAll(*(*reopened)->Current(), half_model(h), rng,
             "half " + std::to_string(h) + " reopened");
    if (HasFatalFailure()) return;
  }
  // Without a version file, a shard the store does not hold cannot open.
  auto none = LiveShard::Open(nullptr, f.dir.File("split-2/shard-7"), &log, options);
  EXPECT_FALSE(none.ok());
}

// Snapshots (docs/consistency.md): reads at the id after each round of random writes, across
// rebuilds (the replaced versions answer reads before their successor's start), equal the model
// as it was then; a reopened shard answers from the ids it replayed on, and refuses older ones.
TEST(LiveShardTest, ReadsAtASnapshotAnswerAsTheModelThenAcrossRebuilds) {
  Fixture f;
  f.Build(9);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  Writer w(&f.model, &log);
  std::mt19937_64 rng(10);
  LiveShardOptions options;
  options.rebuild_memory = 256 << 20;
  const std::string prefix = f.dir.File("shard-0");
  std::map<uint64_t, Model> models;  // the model at each round's last id
  models[0] = f.model;
  LiveShard* target = nullptr;
  auto round = [&] {
    std::vector<bool> want;
    const std::vector<Update> batch = w.Round(rng, &want);
    ASSERT_TRUE(target->Apply(batch).ok());
    log.Keep(w.last_id);
    models[w.last_id] = f.model;
  };
  // Rounds applied during each rebuild: after its snapshot (the build reads them: its base is
  // newer than its `through`) and after its build.
  options.rebuild_hook = [&](int) { round(); };
  auto live = LiveShard::Open(f.base.get(), prefix, &log, options);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  target = live->get();
  for (int r = 0; r < 9; ++r) {
    if (r % 4 == 3) ++w.generation;
    round();
    if (HasFatalFailure()) return;
    if (r % 3 == 1) {
      auto summary = (*live)->Rebuild();
      ASSERT_TRUE(summary.ok()) << summary.status().ToString();
      w.Reset();  // the new base holds every live version
    }
  }
  EXPECT_EQ((*live)->Stats()["version"].get<int64_t>(), 3);
  EXPECT_EQ((*live)->SnapshotFloor(), 0u);  // every version kept (the retention is 60 s)
  for (const auto& [id, model] : models) {
    if (id == 0) continue;  // 0 reads the latest state
    ReadAt::Scope at(id);
    auto version = (*live)->CurrentAt(id);
    ASSERT_TRUE(version.ok()) << version.status().ToString();
    // A third of the sources per snapshot (a different third each time): the whole check of 15
    // snapshots took 47 s under ASan.
    CheckAll(**version, model, rng, "at " + std::to_string(id), 3);
    if (HasFatalFailure()) return;
  }
  // Reopened: the replayed updates have no versions, so it answers from its last id on.
  live->reset();
  auto reopened = LiveShard::Open(f.base.get(), prefix, &log, options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->SnapshotFloor(), w.last_id);
  EXPECT_EQ((*reopened)->CurrentAt(models.begin()->first + 1).status().code(),
            StatusCode::kFailedPrecondition);
  ReadAt::Scope at(w.last_id);
  auto version = (*reopened)->CurrentAt(w.last_id);
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  CheckAll(**version, f.model, rng, "reopened, at its last id");
}

// Copies version `number` of `from` into directory `to` through VersionFiles / ReadVersionFile
// (as a replica fetches it from a peer), in chunks of 1000 bytes.
void CopyVersion(const LiveShard& from, const std::string& to) {
  auto listing = from.VersionFiles();
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  const int64_t number = (*listing)["version"].get<int64_t>();
  for (const auto& f : (*listing)["files"]) {
    const std::string path = f["path"].get<std::string>();
    std::filesystem::create_directories(std::filesystem::path(to + "/" + path).parent_path());
    {
      std::ofstream out(to + "/" + path, std::ios::binary);
      for (uint64_t at = 0;; at += 1000) {
        auto chunk = from.ReadVersionFile(number, path, at, 1000);
        ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
        out << *chunk;
        if (chunk->size() < 1000) break;
      }
    }
    ASSERT_EQ(std::filesystem::file_size(to + "/" + path), f["bytes"].get<uint64_t>());
  }
}

// A replica adopts the version a peer built (engine/live_shard.h, Adopt): two LiveShards over
// the same base take the same writes; one rebuilds; the other, which has applied more writes
// since, adopts the files (copied through VersionFiles / ReadVersionFile) and reads the updates
// after the version's snapshot again from the feed. Both then answer every read like the model
// and find in their base what the model says; refusals for an older version, a replica that is
// behind the version, and paths outside it.
TEST(LiveShardTest, AReplicaAdoptsThePeersVersionAndCatchesUpFromTheFeed) {
  Fixture f;
  f.Build(7);
  if (::testing::Test::HasFatalFailure()) return;
  FakeLogStore log;
  Writer w(&f.model, &log);
  std::mt19937_64 rng(8);
  LiveShardOptions options;
  options.rebuild_memory = 256 << 20;
  auto a = LiveShard::Open(f.base.get(), f.dir.File("a"), &log, options);
  auto b = LiveShard::Open(f.base.get(), f.dir.File("b"), &log, options);
  auto c = LiveShard::Open(f.base.get(), f.dir.File("c"), &log, options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<Update> feed;  // every update, in id order: the LogStore's feed of this shard
  auto round = [&](std::vector<LiveShard*> replicas, const std::string& what) {
    std::vector<bool> want;
    const std::vector<Update> batch = w.Round(rng, &want);
    feed.insert(feed.end(), batch.begin(), batch.end());
    for (LiveShard* r : replicas) {
      auto found = r->Apply(batch);
      EXPECT_TRUE(found.ok() && *found == want) << what;
    }
    return batch;
  };
  auto feed_after = [&](uint64_t after) -> StatusOr<std::vector<Update>> {
    std::vector<Update> out;  // 7 at a time: the catch-up reads it in several calls
    for (const Update& u : feed) {
      if (u.id > after && out.size() < 7) out.push_back(u);
    }
    return out;
  };
  for (int k = 0; k < 3; ++k) round({a->get(), b->get()}, "before the rebuild");
  const std::vector<Update> late = round({a->get()}, "b and c have not seen this round yet");
  auto rebuilt = (*a)->Rebuild();
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  const uint64_t through = (*rebuilt)["through"].get<uint64_t>();
  w.Reset();  // the new base holds every live version; b's still holds the old ones
  // b gets the round it had not seen (c never does); then two more rounds: b leads a's snapshot.
  ASSERT_TRUE((*b)->Apply(late).ok());
  ASSERT_EQ((*b)->last_id(), through);
  for (int k = 0; k < 2; ++k) {
    std::vector<bool> want;
    const std::vector<Update> batch = w.Round(rng, &want);
    feed.insert(feed.end(), batch.begin(), batch.end());
    auto found = (*a)->Apply(batch);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, want) << "a, after its rebuild";
    ASSERT_TRUE((*b)->Apply(batch).ok());  // b's outcomes are against the old base
  }
  const std::string fetched = f.dir.File("fetched");
  CopyVersion(**a, fetched);
  if (HasFatalFailure()) return;
  // c has not applied every update the version holds: refused, and its files left in place.
  auto early = (*c)->Adopt(1, through, fetched, feed_after);
  EXPECT_EQ(early.status().code(), StatusCode::kUnavailable) << early.status().ToString();
  auto adopted = (*b)->Adopt(1, through, fetched, feed_after, {{"from", "a"}});
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  EXPECT_EQ((*adopted)["feed_updates"].get<uint64_t>(), w.last_id - through);
  EXPECT_EQ((*adopted)["from"], "a");
  EXPECT_EQ((*b)->LastRebuild(), *adopted);
  EXPECT_EQ((*b)->version(), 1);
  EXPECT_EQ((*b)->last_id(), w.last_id);
  EXPECT_FALSE(std::filesystem::exists(fetched));
  CheckAll(*(*b)->Current(), f.model, rng, "b adopted");
  if (HasFatalFailure()) return;
  // From here both find the same things in their (equal) bases.
  for (int k = 0; k < 2; ++k) round({a->get(), b->get()}, "after the adoption");
  CheckAll(*(*a)->Current(), f.model, rng, "a");
  CheckAll(*(*b)->Current(), f.model, rng, "b");
  // Refusals.
  auto again = (*b)->Adopt(1, through, fetched, feed_after);
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*a)->ReadVersionFile(1, "../a.version", 0, 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*a)->ReadVersionFile(0, "MANIFEST", 0, 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*c)->VersionFiles().status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace zipg::engine
