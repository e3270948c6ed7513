// Fuzzes the routes of the HTTP API (http/api.h) over an embedded store of a small fixed graph:
// the method, the path, its query parameters, the headers and the body (one JSON request, JSON
// lines, or anything). Input: "METHOD PATH[?k=v&...]\n" then "name: value\n" header lines up to a
// blank line, then the body. Properties: every answer has a status of the table in
// docs/operations.md, never 500; a /v1/query answer is JSON lines, one per request line, each
// {"ok": ...} or {"error": {"code", "message"}} with a contract code other than INTERNAL, and a
// body of one request answers with its code's status.

#include <cstdint>
#include <set>
#include <sstream>
#include <string>

#include "fuzz/fuzz_common.h"
#include "graph/graph.h"
#include "http/api.h"

namespace {

zipg::Graph* graph = nullptr;
zipg::http::Api* api = nullptr;

zipg::http::HttpRequest Parse(const std::string& input) {
  zipg::http::HttpRequest r;
  const size_t head_end = input.find("\n\n");
  const std::string head = input.substr(0, head_end);
  r.body = head_end == std::string::npos ? "" : input.substr(head_end + 2);
  std::istringstream lines(head);
  std::string first;
  std::getline(lines, first);
  const size_t space = first.find(' ');
  r.method = first.substr(0, space);
  std::string target = space == std::string::npos ? "/" : first.substr(space + 1);
  const size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) {
    std::istringstream params(target.substr(q + 1));
    std::string kv;
    while (std::getline(params, kv, '&')) {
      const size_t eq = kv.find('=');
      r.params.emplace(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
    }
  }
  std::string header;
  while (std::getline(lines, header)) {
    const size_t colon = header.find(':');
    if (colon == std::string::npos) continue;
    std::string value = header.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    r.headers.emplace(header.substr(0, colon), value);
  }
  return r;
}

void CheckAnswerLine(const nlohmann::json& answer) {
  static const std::set<std::string> kCodes = {
      "INVALID_ARGUMENT",  "NOT_FOUND",          "ALREADY_EXISTS",     "UNAVAILABLE",
      "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION"};
  zipg::fuzz::Check(answer.is_object() && answer.contains("ok") != answer.contains("error"),
                    "an answer line is either ok or error");
  if (answer.contains("error")) {
    const auto& e = answer["error"];
    zipg::fuzz::Check(e.is_object() && e.contains("code") && e["code"].is_string() &&
                          kCodes.count(e["code"]) && e.contains("message"),
                      "an error has a contract code other than INTERNAL and a message");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    return std::vector<std::string>{
        "POST /v1/query\n\n{\"op\": \"obj_get\", \"id\": 3}",
        "POST /v1/query\nX-Zipg-Timeout-Ms: 100\n\n{\"op\": \"bfs\", \"id\": 7, \"max_depth\": 2}\n"
        "{\"op\": \"assoc_range\", \"id\": 0, \"type\": 5, \"pos\": 0, \"limit\": 3}\n{bad\n",
        "POST /v1/query\n\n{\"op\": \"rpq\", \"expr\": \"0/(1|2)*\"}\r\n\r\n",
        "GET /v1/nodes/7\n\n",
        "GET /v1/nodes/0/edges/5?pos=1&limit=2&at=0\n\n",
        "GET /v1/status\n\n",
        "GET /static/index.html\n\n",
        "DELETE /v1/query\n\n",
    };
  });
  graph = zipg::fuzz::OpenSmallGraph("http");
  zipg::http::ApiOptions options;
  options.max_lines = 64;
  api = new zipg::http::Api(graph, nullptr, [] { return nlohmann::json{{"healthy", true}}; },
                            options);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const zipg::http::HttpRequest request =
      Parse(std::string(reinterpret_cast<const char*>(data), size));
  const zipg::http::HttpResponse response = api->Handle(request);
  static const std::set<int> kStatuses = {200, 400, 404, 405, 409, 412, 413, 503, 504};
  zipg::fuzz::Check(kStatuses.count(response.status) == 1, "a status of the table, never 500");
  if (request.path.rfind("/v1/", 0) != 0 || response.content_type.rfind("application/", 0) != 0) {
    return 0;
  }
  std::istringstream lines(response.body);
  std::string line;
  int count = 0;
  std::string first_code = "OK";
  while (std::getline(lines, line)) {
    if (request.path == "/v1/status") break;
    const nlohmann::json answer = nlohmann::json::parse(line, nullptr, false);
    zipg::fuzz::Check(!answer.is_discarded(), "every answer line is JSON");
    CheckAnswerLine(answer);
    if (count++ == 0 && answer.contains("error")) first_code = answer["error"]["code"];
  }
  // A GET of a missing node is 404 with "ok": null; a wrong method 405 with its error line.
  if (count == 1 && response.status != 404 && response.status != 405) {
    zipg::fuzz::Check(response.status == zipg::http::HttpStatusOf(first_code),
                      "one answer: the status of its code");
  }
  return 0;
}
