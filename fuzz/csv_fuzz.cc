// Fuzzes the CSV loaders (graph/input.h): the input is a nodes CSV and an edges CSV separated by
// the first byte 0xFF (which valid UTF-8 never holds). Properties: loading never crashes; a
// refused file's error names the file; a pair that loads, written back as RFC 4180 CSV (every
// property field quoted), loads to the same graph.

#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "graph/input.h"

namespace {

using zipg::fuzz::Check;

std::string dir;

// A field in double quotes, quotes doubled.
std::string Quoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Header(std::string first, const std::vector<std::string>& names) {
  for (const auto& n : names) first += "," + Quoted(n);
  return first + "\n";
}

// Properties as fields 1..n of a row; absent ones stay empty.
std::string Fields(const zipg::graph::IndexedProperties& props, size_t n) {
  std::vector<std::string> fields(n);
  for (const auto& [i, v] : props) fields[i] = Quoted(v);
  std::string out;
  for (const auto& f : fields) out += "," + f;
  return out + "\n";
}

std::string NodesCsv(const zipg::graph::InputGraph& g) {
  std::string out = Header("id", g.node_property_names);
  for (const auto& n : g.nodes) {
    out += std::to_string(n.id) + Fields(n.properties, g.node_property_names.size());
  }
  return out;
}

std::string EdgesCsv(const zipg::graph::InputGraph& g) {
  std::string out = Header("src,dst,type,timestamp", g.edge_property_names);
  for (const auto& e : g.edges) {
    out += std::to_string(e.src) + "," + std::to_string(e.dst) + "," + std::to_string(e.type) +
           "," + std::to_string(e.timestamp) + Fields(e.properties, g.edge_property_names.size());
  }
  return out;
}

bool SameGraph(const zipg::graph::InputGraph& a, const zipg::graph::InputGraph& b) {
  if (a.node_property_names != b.node_property_names ||
      a.edge_property_names != b.edge_property_names || a.nodes.size() != b.nodes.size() ||
      a.edges.size() != b.edges.size()) {
    return false;
  }
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].id != b.nodes[i].id || a.nodes[i].properties != b.nodes[i].properties) {
      return false;
    }
  }
  for (size_t i = 0; i < a.edges.size(); ++i) {
    const auto &x = a.edges[i], &y = b.edges[i];
    if (x.src != y.src || x.dst != y.dst || x.type != y.type || x.timestamp != y.timestamp ||
        x.properties != y.properties) {
      return false;
    }
  }
  return true;
}

// Loads both files; OK only if both loaded. Checks that errors name their file.
bool Load(std::string_view nodes_text, std::string_view edges_text,
          zipg::graph::InputGraph* graph) {
  const std::string nodes = dir + "/nodes.csv", edges = dir + "/edges.csv";
  zipg::fuzz::WriteFile(nodes, nodes_text);
  zipg::fuzz::WriteFile(edges, edges_text);
  const zipg::Status n = zipg::graph::LoadNodesCsv(nodes, graph);
  Check(n.ok() || n.message().find("nodes.csv") != std::string::npos,
        "a refused nodes CSV's error names the file");
  const zipg::Status e = zipg::graph::LoadEdgesCsv(edges, graph);
  Check(e.ok() || e.message().find("edges.csv") != std::string::npos,
        "a refused edges CSV's error names the file");
  return n.ok() && e.ok();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    const zipg::graph::InputGraph g = zipg::fuzz::SmallGraph();
    std::vector<std::string> seeds = {
        NodesCsv(g) + "\xFF" + EdgesCsv(g),
        "id,name,city\n1,a,\"x,y\"\n2,,b\n\xFFsrc,dst,type,timestamp,w\n1,2,0,5,\"q\"\n"
        "2,1,3,-7,\n",
        "id,\"say "
        "\"\"hi\"\"\",b\r\n7,\"two\r\nlines\",\r\n\xFFsrc,dst,type,timestamp\r\n7,7,0,0\r\n",
        "\xEF\xBB\xBFid\n0\n9223372036854775807\n\xFFsrc,dst,type,timestamp\n",
    };
    return seeds;
  });
  dir = zipg::fuzz::TempDir("csv");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t cut = all.find('\xFF');
  const std::string_view nodes = all.substr(0, cut);
  const std::string_view edges = cut == std::string_view::npos
                                     ? std::string_view("src,dst,type,timestamp\n")
                                     : all.substr(cut + 1);
  zipg::graph::InputGraph graph;
  if (!Load(nodes, edges, &graph)) return 0;
  zipg::graph::InputGraph again;
  Check(Load(NodesCsv(graph), EdgesCsv(graph), &again), "a loaded graph written back loads");
  Check(SameGraph(graph, again), "a loaded graph written back loads to the same graph");
  return 0;
}
