// Fuzzes the SNAP edge-list loader (graph/input.h). Properties: loading never crashes; a refused
// file's error names the file; a list that loads, written back as "src dst" lines, loads to the
// same edges (type 0, timestamp 0, no properties).

#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "graph/input.h"

namespace {

using zipg::fuzz::Check;

std::string path;

zipg::Status Load(std::string_view text, zipg::graph::InputGraph* graph) {
  zipg::fuzz::WriteFile(path, text);
  return zipg::graph::LoadSnapEdges(path, graph);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    std::string list = "# Directed graph\n# FromNodeId\tToNodeId\n";
    for (const auto& e : zipg::fuzz::SmallGraph().edges) {
      list += std::to_string(e.src) + "\t" + std::to_string(e.dst) + "\n";
    }
    return std::vector<std::string>{list, "1 2\r\n\n  3\t4  \n# c\n5 5", "0 9223372036854775807\n"};
  });
  path = zipg::fuzz::TempDir("snap") + "/edges.txt";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zipg::graph::InputGraph graph;
  const zipg::Status s = Load(std::string_view(reinterpret_cast<const char*>(data), size), &graph);
  if (!s.ok()) {
    Check(s.message().find("edges.txt") != std::string::npos, "a refused file's error names it");
    return 0;
  }
  std::string text;
  for (const auto& e : graph.edges) {
    Check(e.type == 0 && e.timestamp == 0 && e.properties.empty(),
          "SNAP edges have type 0, timestamp 0 and no properties");
    text += std::to_string(e.src) + " " + std::to_string(e.dst) + "\n";
  }
  zipg::graph::InputGraph again;
  Check(Load(text, &again).ok(), "a loaded list written back loads");
  Check(again.edges.size() == graph.edges.size(), "written back: as many edges");
  for (size_t i = 0; i < graph.edges.size(); ++i) {
    Check(again.edges[i].src == graph.edges[i].src && again.edges[i].dst == graph.edges[i].dst,
          "written back: the same edges in the same order");
  }
  return 0;
}
