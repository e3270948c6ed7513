#include "http/api.h"

#include <charconv>
#include <sstream>
#include <string_view>
#include <vector>

#include "http/query_json.h"
#include "util/call_deadline.h"
#include "util/metrics.h"

namespace zipg::http {
namespace {

using nlohmann::json;

constexpr const char* kLines = "application/x-ndjson";

HttpResponse Error(int status, const Status& error) {
  return {status, "application/json", ResponseLine(ErrorJson(error)) + "\n"};
}

// A whole decimal int64 (no sign, spaces or trailing text: ids and types are >= 0 in routes;
// the operation checks the rest).
bool ParseInt(std::string_view text, int64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// The segments of an absolute path: "/v1/nodes/7" -> {v1, nodes, 7}. Empty segments are kept
// ("/v1//status" is not a route).
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path[0] != '/') return out;
  size_t i = 1;
  for (;;) {
    const size_t j = std::min(path.find('/', i), path.size());
    out.push_back(path.substr(i, j - i));
    if (j == path.size()) return out;
    i = j + 1;
  }
}

std::string CodeOf(const json& response) {
  if (!response.contains("error")) return "OK";
  return response["error"].value("code", "INTERNAL");
}

// The deadline of one HTTP request's calls: the server's call timeout, or a shorter one the
// client asks for.
CallDeadline::TimePoint DeadlineOf(const HttpRequest& request, int64_t call_timeout_ms) {
  int64_t ms = call_timeout_ms;
  if (auto it = request.headers.find("x-zipg-timeout-ms"); it != request.headers.end()) {
    int64_t asked = 0;
    if (ParseInt(it->second, &asked)) ms = std::min(ms, asked);
  }
  return CallDeadline::Clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

int HttpStatusOf(const std::string& code) {
  if (code == "OK") return 200;
  if (code == "INVALID_ARGUMENT") return 400;
  if (code == "NOT_FOUND") return 404;
  if (code == "ALREADY_EXISTS") return 409;
  if (code == "FAILED_PRECONDITION") return 412;
  if (code == "RESOURCE_EXHAUSTED") return 413;
  if (code == "UNAVAILABLE") return 503;
  if (code == "DEADLINE_EXCEEDED") return 504;
  return 500;
}

Api::Api(GraphApi* graph, GraphWriteApi* writer, std::function<json()> status, ApiOptions options)
    : graph_(graph), writer_(writer), status_(std::move(status)), options_(options) {}

HttpResponse Api::Handle(const HttpRequest& request) const {
  if (!metrics::Enabled()) return Route(request, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const char* route = "none";
  HttpResponse response = Route(request, &route);
  static auto& seconds =
      metrics::Histograms("zipg_http_request_duration_seconds",
                          "Time of HTTP API requests, from the request read to the answer.");
  static auto& requests =
      metrics::Counters("zipg_http_requests_total", "HTTP API requests, by route and status.");
  metrics::LatencyHistogram(seconds, {{"route", route}}).Observe(metrics::SecondsSince(start));
  requests.Add({{"route", route}, {"status", std::to_string(response.status)}}).Increment();
  return response;
}

HttpResponse Api::Route(const HttpRequest& request, const char** route) const {
  auto name = [route](const char* r) {
    if (route) *route = r;
  };
  const std::vector<std::string_view> parts = Segments(request.path);
  const bool get = request.method == "GET" || request.method == "HEAD";
  auto wrong_method = [] {
    return Error(405, Status::InvalidArgument("method not allowed on this route"));
  };
  if (parts.size() >= 1 && parts[0] == "v1") {
    if (parts.size() == 2 && parts[1] == "query") {
      name("query");
      if (request.method != "POST") return wrong_method();
      CallDeadline::Scope deadline(DeadlineOf(request, options_.call_timeout_ms));
      return Query(request);
    }
    if (parts.size() == 2 && parts[1] == "status") {
      name("status");
      if (!get) return wrong_method();
      if (!status_) return Error(404, Status::NotFound("no status here"));
      CallDeadline::Scope deadline(DeadlineOf(request, options_.call_timeout_ms));
      return {200, "application/json", status_().dump() + "\n"};
    }
    if (parts.size() >= 3 && parts[1] == "nodes") {
      name(parts.size() == 3 ? "node" : "edges");
      if (!get) return wrong_method();
      int64_t id = 0;
      if (!ParseInt(parts[2], &id)) {
        return Error(400, Status::InvalidArgument("a node id is a non-negative integer"));
      }
      json r;
      if (parts.size() == 3) {
        r = {{"op", "obj_get"}, {"id", id}};
      } else if (parts.size() == 5 && parts[3] == "edges") {
        int64_t type = 0, pos = 0, limit = 100;
        if (!ParseInt(parts[4], &type)) {
          return Error(400, Status::InvalidArgument("an edge type is a non-negative integer"));
        }
        for (auto [name, field] : {std::pair{"pos", &pos}, std::pair{"limit", &limit}}) {
          if (auto it = request.params.find(name); it != request.params.end()) {
            if (!ParseInt(it->second, field)) {
              return Error(
                  400, Status::InvalidArgument(std::string(name) + " is a non-negative integer"));
            }
          }
        }
        r = {{"op", "assoc_range"}, {"id", id}, {"type", type}, {"pos", pos}, {"limit", limit}};
      } else {
        return Error(404, Status::NotFound("no such route: " + request.path));
      }
      if (auto it = request.params.find("at"); it != request.params.end()) {
        int64_t at = 0;
        if (!ParseInt(it->second, &at)) {
          return Error(400, Status::InvalidArgument("at is a snapshot's seq"));
        }
        r["at"] = at;
      }
      CallDeadline::Scope deadline(DeadlineOf(request, options_.call_timeout_ms));
      return One(r, parts.size() == 3);
    }
    return Error(404, Status::NotFound("no such route: " + request.path));
  }
  if (parts.size() == 1 && parts[0] == "metrics") {
    name("metrics");
    if (!get) return wrong_method();
    return {200, "text/plain; version=0.0.4", metrics::Exposition()};
  }
  HttpResponse asset;
  if (FindAsset(request.path, &asset.body, &asset.content_type)) {
    name("asset");
    if (!get) return wrong_method();
    return asset;
  }
  return Error(404, Status::NotFound("no such route: " + request.path));
}

HttpResponse Api::Query(const HttpRequest& request) const {
  // One JSON value (possibly over several lines): answered with the status of its code. Else
  // JSON lines: 200, each line with its own outcome.
  const json whole = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!whole.is_discarded()) {
    const json response = ExecuteJson(*graph_, whole, writer_);
    return {HttpStatusOf(CodeOf(response)), kLines, ResponseLine(response) + "\n"};
  }
  size_t lines = 0;  // request lines: those RunJsonLines does not skip
  {
    std::istringstream body(request.body);
    std::string line;
    while (std::getline(body, line)) lines += !IsBlankLine(line);
  }
  if (lines == 0) return Error(400, Status::InvalidArgument("the body has no request"));
  if (lines > options_.max_lines) {
    return Error(413, Status::ResourceExhausted("more than " + std::to_string(options_.max_lines) +
                                                " request lines in one body"));
  }
  std::istringstream in(request.body);
  std::string out;
  RunJsonLines(*graph_, writer_, in, options_.write_batch, [&out](const std::string& line) {
    out += line;
    out += '\n';
  });
  if (lines == 1) {  // one request that is not JSON: its error's status
    const json response = json::parse(out, nullptr, false);
    return {HttpStatusOf(response.is_discarded() ? "INTERNAL" : CodeOf(response)), kLines,
            std::move(out)};
  }
  return {200, kLines, std::move(out)};
}

HttpResponse Api::One(const json& request, bool missing_is_404) const {
  const json response = ExecuteJson(*graph_, request, writer_);
  int status = HttpStatusOf(CodeOf(response));
  if (missing_is_404 && status == 200 && response["ok"].is_null()) status = 404;
  return {status, "application/json", ResponseLine(response) + "\n"};
}

}  // namespace zipg::http
