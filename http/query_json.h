// The JSON form of the contract's operations: one request object {"op": "...", named args} in,
// one response object out ({"ok": result} or {"error": {"code", "message"}}), for `zipg query`
// (single operation and --batch) and the HTTP API (http/api.h) over any GraphApi: the embedded
// store, a cluster through a client, or an aggregator's own ClusterGraph.
// Result shapes are listed in docs/graph-layout.md ("Query output").
//
// Thread-safety: stateless; safe to call concurrently if the GraphApi is.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/api.h"

namespace zipg::http {

// Executes one request. Never throws: malformed requests (unknown op, missing or extra or mistyped
// arguments) come back as INVALID_ARGUMENT errors.
// Writes go to `writer`; without one they fail with INVALID_ARGUMENT (embedded mode is read-only).
nlohmann::json ExecuteJson(GraphApi& graph, const nlohmann::json& request,
                           GraphWriteApi* writer = nullptr);

// True if `request` names a write operation.
bool IsWriteRequest(const nlohmann::json& request);
// Executes write requests as one GraphWriteApi::WriteBatch (a malformed one fails alone, without
// being sent); one response per request, in order, each as ExecuteJson would answer it.
std::vector<nlohmann::json> ExecuteWriteBatch(GraphApi& graph,
                                              const std::vector<nlohmann::json>& requests,
                                              GraphWriteApi* writer);

// Serializes a response as one line (invalid UTF-8 replaced, which valid stores never produce).
std::string ResponseLine(const nlohmann::json& response);

nlohmann::json ErrorJson(const Status& status);

// True when a request line holds nothing but spaces, tabs and carriage returns: such a line is
// skipped, and is no request (POST /v1/query counts requests with it).
bool IsBlankLine(const std::string& line);

// Runs JSON lines (`zipg query --batch`, POST /v1/query): one request per line, blank lines
// skipped (IsBlankLine), a trailing '\r' ignored; a line that is not JSON answers INVALID_ARGUMENT
// naming its line number. With write_batch > 1, up to that many consecutive write lines go as one
// write_batch. Calls `out` with each response line (no newline), in input order.
void RunJsonLines(GraphApi& graph, GraphWriteApi* writer, std::istream& in, uint64_t write_batch,
                  const std::function<void(const std::string& line)>& out);

}  // namespace zipg::http
