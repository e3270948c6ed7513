// The JSON form of the contract's operations: one request object {"op": "...", named args} in,
// one response object out ({"ok": result} or {"error": {"code", "message"}}), for `zipg query`
// (single operation and --batch) over any GraphApi: the embedded store now, a cluster later.
// Result shapes are listed in docs/graph-layout.md ("Query output").
//
// Thread-safety: stateless; safe to call concurrently if the GraphApi is.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "graph/api.h"

namespace zipg::cli {

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

}  // namespace zipg::cli
