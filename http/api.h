// Api: the routes of an aggregator's HTTP port (docs/operations.md, "HTTP/JSON API"): the
// contract's operations as JSON (POST /v1/query, and GET shortcuts for a node and its edges), the
// cluster's status, this process's metrics, and the web explorer's files. Requests run in the
// aggregator's process through the same JSON layer as `zipg query --batch` (http/query_json.h),
// so a line answers byte for byte what the CLI prints for it.
//
// Thread-safety: Handle may be called concurrently if the GraphApi and the status function may.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "graph/api.h"
#include "http/server.h"

namespace zipg::http {

struct ApiOptions {
  // Each request's calls end by this (DEADLINE_EXCEEDED: 504), or sooner with a shorter
  // X-Zipg-Timeout-Ms header.
  int64_t call_timeout_ms = 10000;
  // Request lines in one POST /v1/query (413 past it).
  size_t max_lines = 4096;
  // Writes of consecutive write lines sent as one write_batch (1: each alone, as `--batch`).
  uint64_t write_batch = 1;
};

// The HTTP status of a contract error code ("OK" for a success): docs/operations.md.
int HttpStatusOf(const std::string& code);

class Api {
 public:
  // `status` returns the status document of GET /v1/status (null: the route answers 404).
  // `writer` may be null (writes answer INVALID_ARGUMENT, as an embedded store does).
  Api(GraphApi* graph, GraphWriteApi* writer, std::function<nlohmann::json()> status,
      ApiOptions options = {});

  HttpResponse Handle(const HttpRequest& request) const;

 private:
  // Handle without the metrics; names the route in *route (if not null).
  HttpResponse Route(const HttpRequest& request, const char** route) const;
  HttpResponse Query(const HttpRequest& request) const;
  // One request made from a GET route, answered as a single POST of it would be.
  HttpResponse One(const nlohmann::json& request, bool missing_is_404) const;

  GraphApi* graph_;
  GraphWriteApi* writer_;
  std::function<nlohmann::json()> status_;
  ApiOptions options_;
};

// The explorer's files, compiled into the binary (http/assets.cc): the body and content type of
// `path` ("/" is index.html; "/static/..." the rest); false if there is none.
bool FindAsset(const std::string& path, std::string* body, std::string* content_type);

}  // namespace zipg::http
