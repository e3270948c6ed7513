// Tests of NodeFile::ForEachNode: one pass over the whole text, decoded at once or by chunks of
// records of any size (smaller than a record too), yields every node in ascending id with the
// properties it was built with, as Get reads them one at a time.

#include "layout/node_file.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "util/scratch_dir.h"

namespace zipg::layout {
namespace {

TEST(NodeFileTest, ForEachNodeVisitsEveryNodeAsBuilt) {
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
  ASSERT_TRUE(NodeFile::Build(base, names, nodes, {4, 8, 16, false}).ok());
  auto file = NodeFile::Open(base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
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

}  // namespace
}  // namespace zipg::layout
