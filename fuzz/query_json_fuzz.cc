// Fuzzes the JSON request layer of `zipg query --batch` (client/query_json.h) over an embedded
// store of a small fixed graph (cycles, self-loops, a hub, ids without node entries), every
// operation included. Property: every input line answers {"ok": ...} or {"error": {"code",
// "message"}} with one of the contract's codes, never INTERNAL, and the answer serializes.
// Traversal budgets are small so that no input runs long.

#include <cstdint>
#include <set>
#include <string>

#include "http/query_json.h"
#include "fuzz/fuzz_common.h"
#include "graph/graph.h"

namespace {

zipg::Graph* graph = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    // One request per operation of the contract, over the ids and types of SmallGraph().
    return std::vector<std::string>{
        R"({"op": "obj_get", "id": 3})",
        R"({"op": "get_node_property", "id": 2, "properties": ["name"]})",
        R"({"op": "get_node_ids", "properties": {"city": "red"}})",
        R"({"op": "search_node_ids", "pattern": "re", "match": "prefix", "limit": 3})",
        R"({"op": "search_node_ids", "pattern": "e\u0000\"", "property": "city"})",
        R"({"op": "get_neighbor_ids", "id": 0, "type": 5, "properties": {"city": "blue"}})",
        R"({"op": "get_edge_record", "id": 7, "type": 1})",
        R"({"op": "get_edge_range", "id": 7, "type": 1, "t_lo": 1000, "t_hi": 1010})",
        R"({"op": "get_edge_data", "id": 7, "type": 1, "time_order": 0})",
        R"({"op": "assoc_range", "id": 0, "type": 5, "pos": 3, "limit": 10})",
        R"({"op": "assoc_count", "id": 0, "type": 5})",
        R"({"op": "assoc_get", "id": 0, "type": 5, "ids": [100, 101, 5], "low": 0, "high": 1000})",
        R"({"op": "assoc_time_range", "id": 0, "type": 5, "low": 100, "high": 300, "limit": 5})",
        R"({"op": "bfs", "id": 7, "max_depth": 3, "types": [0, 1], "limit": 20})",
        R"({"op": "rpq", "expr": "0/(1|2)*", "sources": [7, 14]})",
        R"({"op": "rpq", "expr": "_+", "limit": 10})",
        R"({"op": "obj_add", "id": 1, "properties": {}})",
        R"({"op": "assoc_add", "src": 1, "type": 2, "dst": 3, "timestamp": 4})",
        R"({"op": "obj_delete", "id": 2})",
    };
  });
  graph = zipg::fuzz::OpenSmallGraph("query-json");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  nlohmann::json request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return 0;  // the CLI answers unparsable lines itself
  const nlohmann::json response = zipg::http::ExecuteJson(*graph, request);
  static const std::set<std::string> kCodes = {
      "INVALID_ARGUMENT",  "NOT_FOUND",          "ALREADY_EXISTS",     "UNAVAILABLE",
      "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION"};
  zipg::fuzz::Check(response.contains("ok") != response.contains("error"),
                    "an answer is either ok or error");
  if (response.contains("error")) {
    const auto& e = response["error"];
    zipg::fuzz::Check(e.contains("code") && e["code"].is_string() && kCodes.count(e["code"]) &&
                          e.contains("message") && e["message"].is_string(),
                      "an error has a contract code other than INTERNAL and a message");
  }
  (void)zipg::http::ResponseLine(response);
  return 0;
}
