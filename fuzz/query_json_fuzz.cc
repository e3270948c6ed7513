// Fuzzes the JSON request layer of `zipg query --batch` (client/query_json.h) over an embedded
// store of a small fixed graph (cycles, self-loops, a hub, ids without node entries), every
// operation included. Property: every input line answers {"ok": ...} or {"error": {"code",
// "message"}} with one of the contract's codes, never INTERNAL, and the answer serializes.
// Traversal budgets are small so that no input runs long.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "client/query_json.h"
#include "graph/compress.h"
#include "graph/graph.h"

namespace {

zipg::Graph* graph = nullptr;

zipg::Graph* OpenGraph() {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("zipg-query-json-fuzz-" + std::to_string(getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  zipg::graph::InputGraph input;
  input.node_property_names = {"name", "city"};
  input.edge_property_names = {"w"};
  for (int64_t i = 0; i < 40; ++i) {
    if (i % 5 == 4) continue;  // ids without a node entry
    input.nodes.push_back({i, {{0, "n" + std::to_string(i)}, {1, i % 3 ? "red" : "blue"}}});
  }
  std::set<std::tuple<int64_t, int64_t, int64_t>> keys;
  for (int64_t i = 0; i < 200; ++i) {
    const int64_t src = (i * 7) % 43, dst = i % 9 == 0 ? src : (i * 13 + 5) % 47, type = i % 3;
    if (!keys.insert({src, type, dst}).second) continue;
    input.edges.push_back({src, dst, type, 1000 + i % 17, {{0, std::to_string(i)}}});
  }
  for (int64_t d = 100; d < 400; ++d) input.edges.push_back({0, d, 5, d, {}});  // a hub
  zipg::graph::CompressOptions options;
  options.shards = 3;
  options.threads = 1;
  zipg::graph::CompressReport report;
  if (!zipg::graph::CompressGraph(std::move(input), dir, options, nullptr, &report).ok()) abort();
  auto g = zipg::Graph::Open(dir);
  if (!g.ok()) abort();
  zipg::graph::TraversalLimits limits;
  limits.deadline = std::chrono::milliseconds(200);
  limits.memory_bytes = 1 << 20;
  (*g)->set_traversal_limits(limits);
  return g->release();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  graph = OpenGraph();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  nlohmann::json request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return 0;  // the CLI answers unparsable lines itself
  const nlohmann::json response = zipg::cli::ExecuteJson(*graph, request);
  static const std::set<std::string> kCodes = {"INVALID_ARGUMENT",  "NOT_FOUND",
                                               "ALREADY_EXISTS",    "UNAVAILABLE",
                                               "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"};
  if (response.contains("ok") == response.contains("error")) abort();
  if (response.contains("error")) {
    const auto& e = response["error"];
    if (!e.contains("code") || !e["code"].is_string() || !kCodes.count(e["code"]) ||
        !e.contains("message") || !e["message"].is_string()) {
      abort();
    }
  }
  (void)zipg::cli::ResponseLine(response);
  return 0;
}
