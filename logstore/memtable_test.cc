// The memtable's history (logstore/history.h): reads at a snapshot answer as the table stood
// then. The reference is independent of the table: the same writes replayed on plain maps up to
// the snapshot.

#include "logstore/memtable.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "graph/edge_list.h"
#include "util/snapshot.h"

namespace zipg::logstore {
namespace {

using engine::Update;
using engine::UpdateOp;

struct Model {
  std::map<int64_t, Properties> props;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Edge> edges;  // (src, type, dst)

  void Apply(const LogRecord& r) {
    switch (r.op) {
      case UpdateOp::kPutNode:
        props[r.node] = r.properties;
        break;
      case UpdateOp::kDeleteNode:
        props.erase(r.node);
        std::erase_if(edges, [&](const auto& e) { return std::get<0>(e.first) == r.node; });
        break;
      case UpdateOp::kPutEdge:
        edges[{r.node, r.type, r.dst}] = Edge{r.node, r.type, r.dst, r.timestamp, r.properties};
        break;
      case UpdateOp::kDeleteEdge:
        edges.erase({r.node, r.type, r.dst});
        break;
      case UpdateOp::kLayout:  // never a log record
        break;
    }
  }
  // The node's edges (of `type`, or all if type < 0): by type, then the contract's order.
  std::vector<Edge> Edges(int64_t node, int64_t type) const {
    std::vector<Edge> out;
    for (const auto& [key, e] : edges) {
      if (std::get<0>(key) == node && (type < 0 || std::get<1>(key) == type)) out.push_back(e);
    }
    std::sort(out.begin(), out.end(), [](const Edge& a, const Edge& b) {
      return a.type != b.type ? a.type < b.type : NewestFirst(a, b);
    });
    return out;
  }
};

std::vector<Edge> Sorted(std::vector<Edge> edges) {
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.type != b.type ? a.type < b.type : NewestFirst(a, b);
  });
  return edges;
}

// Random writes on a few nodes, as the LogStore applies them (remove the old version, then put),
// each with an id; reads at every tenth id and at random ones, before and after pruning, against
// the writes replayed up to there.
TEST(MemtableTest, ReadsAtASnapshotAnswerAsTheWritesUpToItLeftTheTable) {
  std::mt19937_64 rng(11);
  Memtable table;
  std::vector<std::pair<uint64_t, LogRecord>> log;
  const std::vector<std::string> values = {"red", "blue", "green", "redder"};
  uint64_t id = 100;
  for (int i = 0; i < 3000; ++i) {
    LogRecord r;
    r.node = static_cast<int64_t>(rng() % 12);
    const uint64_t dice = rng() % 20;
    if (dice < 4) {
      r.op = UpdateOp::kPutNode;
      r.properties = {{"c", values[rng() % values.size()]}, {"n", std::to_string(rng() % 5)}};
    } else if (dice < 5) {
      r.op = UpdateOp::kDeleteNode;
    } else if (dice < 15) {
      r.op = UpdateOp::kPutEdge;
      r.type = static_cast<int64_t>(rng() % 3);
      r.dst = static_cast<int64_t>(rng() % 8);
      r.timestamp = static_cast<int64_t>(rng() % 20);
      r.properties = {{"w", std::to_string(i)}};
    } else {
      r.op = UpdateOp::kDeleteEdge;
      r.type = static_cast<int64_t>(rng() % 3);
      r.dst = static_cast<int64_t>(rng() % 8);
    }
    id += 1 + rng() % 3;  // ids need not be consecutive
    Update u = r.ToUpdate(0);
    u.id = id;
    table.Remove(u);
    if (r.is_put()) table.Put(r, id);
    log.emplace_back(id, r);
  }

  auto check_at = [&](uint64_t at) {
    Model model;
    for (const auto& [i, r] : log) {
      if (i <= at) model.Apply(r);
    }
    ReadAt::Scope scope(at);
    for (int64_t node = 0; node < 12; ++node) {
      NodeData all;
      table.Collect(node, /*any_type=*/true, 0, nullptr, &all);
      auto p = model.props.find(node);
      ASSERT_EQ(all.properties, p == model.props.end() ? std::nullopt : std::optional(p->second))
          << "node " << node << " at " << at;
      ASSERT_EQ(Sorted(all.edges), model.Edges(node, -1)) << "node " << node << " at " << at;
      for (int64_t type = 0; type < 3; ++type) {
        NodeData one;
        table.Collect(node, false, type, nullptr, &one);
        ASSERT_EQ(Sorted(one.edges), model.Edges(node, type))
            << node << "/" << type << " at " << at;
        std::vector<Edge> keys;
        table.CollectKeys(node, type, {0, 2, 3, 5, 7}, nullptr, &keys);
        std::vector<Edge> want;
        for (const Edge& e : model.Edges(node, type)) {
          if (e.dst == 0 || e.dst == 2 || e.dst == 3 || e.dst == 5 || e.dst == 7) want.push_back(e);
        }
        ASSERT_EQ(Sorted(keys), want) << node << "/" << type << " keys at " << at;
      }
    }
    for (const std::string& v : values) {
      std::vector<int64_t> got, want;
      table.NodeIds({{"c", v}}, nullptr, &got);
      std::sort(got.begin(), got.end());
      for (const auto& [node, p] : model.props) {
        if (p[0].second == v) want.push_back(node);
      }
      ASSERT_EQ(got, want) << "c = " << v << " at " << at;
      got.clear();
      want.clear();
      table.SearchNodeIds(NodeSearch{"red", std::string("c"), SearchMatch::kPrefix}, nullptr, &got);
      std::sort(got.begin(), got.end());
      for (const auto& [node, p] : model.props) {
        if (p[0].second.starts_with("red")) want.push_back(node);
      }
      ASSERT_EQ(got, want) << "search at " << at;
    }
  };
  for (size_t k = 0; k < log.size(); k += 10) check_at(log[k].first);
  check_at(log.back().first);
  check_at(log.front().first - 1);  // before any write: an empty table
  // Pruned below the middle: every snapshot from there on still answers, in less memory.
  const uint64_t middle = log[log.size() / 2].first;
  const size_t before = table.history()->changes();
  table.history()->Prune(middle);
  EXPECT_LT(table.history()->changes(), before);
  for (size_t k = log.size() / 2; k < log.size(); k += 7) check_at(log[k].first);
}

}  // namespace
}  // namespace zipg::logstore
