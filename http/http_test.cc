// Tests of the HTTP API's routes (http/api.h) over an embedded store, against a model of the
// graph built here; of the HTTP server's bounds (http/server.h) over real sockets; and of the
// metrics read from status documents (http/status_metrics.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "graph/compress.h"
#include "graph/graph.h"
#include "http/api.h"
#include "http/assets.h"
#include "http/query_json.h"
#include "http/server.h"
#include "http/status_metrics.h"
#include "util/scratch_dir.h"

namespace zipg::http {
namespace {

using nlohmann::json;

// A small graph and its model: node id -> properties; (src, type) -> edges newest first.
struct Fixture {
  ScratchDir dir{"http_test"};
  std::map<int64_t, std::map<std::string, std::string>> nodes;
  std::map<std::pair<int64_t, int64_t>, std::vector<json>> edges;
  std::unique_ptr<Graph> graph;

  Fixture() {
    graph::InputGraph input;
    input.node_property_names = {"name", "city"};
    input.edge_property_names = {"w"};
    for (int64_t id = 0; id < 40; ++id) {
      const std::string name = "n" + std::to_string(id * 7 % 13);
      const std::string city = id % 3 == 0 ? "Paris" : "Oslo";
      input.nodes.push_back({id, {{0, name}, {1, city}}});
      nodes[id] = {{"name", name}, {"city", city}};
    }
    for (int64_t src = 0; src < 40; ++src) {
      for (int64_t k = 0; k < src % 5; ++k) {
        const int64_t dst = (src * 11 + k * 3) % 45;  // some destinations have no node
        const int64_t type = k % 2;
        const int64_t ts = 1000 + (src * k) % 17;
        const std::string w = "w" + std::to_string(k);
        input.edges.push_back({src, dst, type, ts, {{0, w}}});
        edges[{src, type}].push_back({{"src", src},
                                      {"type", type},
                                      {"dst", dst},
                                      {"timestamp", ts},
                                      {"properties", {{"w", w}}}});
      }
    }
    for (auto& [key, list] : edges) {  // newest first, ties by dst ascending
      std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
        if (a["timestamp"] != b["timestamp"]) return a["timestamp"] > b["timestamp"];
        return a["dst"] < b["dst"];
      });
    }
    graph::CompressOptions options;
    options.shards = 2;
    const Status s = graph::CompressGraph(input, dir.File("store"), options, {}, nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto g = Graph::Open(dir.File("store"));
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (g.ok()) graph = std::move(*g);
  }
};

Fixture& Shared() {
  static Fixture* f = new Fixture();
  return *f;
}

HttpRequest Post(const std::string& body, std::map<std::string, std::string> headers = {}) {
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/query";
  r.body = body;
  r.headers = std::move(headers);
  return r;
}

HttpRequest Get(const std::string& path, std::map<std::string, std::string> params = {}) {
  HttpRequest r;
  r.method = "GET";
  r.path = path;
  r.params = std::move(params);
  return r;
}

std::vector<json> Lines(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

TEST(ApiTest, QueryLinesAnswerAsTheModelInOrder) {
  Fixture& f = Shared();
  ASSERT_TRUE(f.graph);
  Api api(f.graph.get(), nullptr, nullptr);
  std::string body;
  std::vector<std::pair<std::string, json>> expected;  // (what, expected "ok")
  for (int64_t id : {0, 7, 39, 44}) {                  // 44: no node
    body += json{{"op", "obj_get"}, {"id", id}}.dump() + "\n";
    json want = nullptr;
    if (f.nodes.count(id)) want = {{"id", id}, {"properties", f.nodes[id]}};
    expected.push_back({"obj_get " + std::to_string(id), want});
  }
  for (const auto& [key, list] : f.edges) {
    body += json{{"op", "assoc_range"},
                 {"id", key.first},
                 {"type", key.second},
                 {"pos", 1},
                 {"limit", 2}}
                .dump() +
            "\r\n\n";  // CR LF and a blank line: both ignored, as by `zipg query --batch`
    json want = json::array();
    for (size_t i = 1; i < std::min<size_t>(3, list.size()); ++i) want.push_back(list[i]);
    expected.push_back({"assoc_range " + std::to_string(key.first), want});
  }
  body += "{\"op\": \"assoc_count\", \"id\": 3, \"type\": 1}\n";
  expected.push_back({"assoc_count", static_cast<int64_t>(f.edges[{3, 1}].size())});
  const HttpResponse r = api.Handle(Post(body));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/x-ndjson");
  const std::vector<json> got = Lines(r.body);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], json({{"ok", expected[i].second}})) << expected[i].first;
  }
}

TEST(ApiTest, StatusCodesFollowTheContractCode) {
  Fixture& f = Shared();
  ASSERT_TRUE(f.graph);
  Api api(f.graph.get(), nullptr, nullptr);
  struct Case {
    std::string body;
    int status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {R"({"op": "obj_get", "id": 1})", 200, ""},
      {"{\n  \"op\": \"obj_get\",\n  \"id\": 1\n}\n", 200, ""},  // one request over lines
      {R"({"op": "obj_get"})", 400, "INVALID_ARGUMENT"},
      {R"({"op": "no_such_op"})", 400, "INVALID_ARGUMENT"},
      {"{not json", 400, "INVALID_ARGUMENT"},
      {R"({"op": "obj_add", "id": 1, "properties": {}})", 400, "INVALID_ARGUMENT"},  // read-only
      {R"({"op": "rpq", "expr": "0/("})", 400, "INVALID_ARGUMENT"},
      {R"({"op": "bfs", "id": 1, "max_depth": 11})", 400, "INVALID_ARGUMENT"},
  };
  for (const auto& c : cases) {
    const HttpResponse r = api.Handle(Post(c.body));
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    const std::vector<json> lines = Lines(r.body);
    ASSERT_EQ(lines.size(), 1u) << c.body;
    if (c.code.empty()) {
      EXPECT_TRUE(lines[0].contains("ok")) << r.body;
    } else {
      EXPECT_EQ(lines[0]["error"]["code"], c.code) << r.body;
    }
  }
  // Several lines: 200, each line its own outcome.
  const HttpResponse mixed = api.Handle(Post("{bad\n{\"op\": \"obj_get\", \"id\": 2}\n"));
  EXPECT_EQ(mixed.status, 200);
  const std::vector<json> lines = Lines(mixed.body);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_EQ(lines[0]["error"]["message"], "line 1: malformed JSON request");
  EXPECT_EQ(lines[1]["ok"]["id"], 2);
  EXPECT_EQ(api.Handle(Post("")).status, 400);
  EXPECT_EQ(api.Handle(Post(" \n\n")).status, 400);
  EXPECT_EQ(api.Handle(Post("\r\r\n \t\r\n")).status, 400);
  // A line of carriage returns is blank for the count of requests as for their run (found by
  // fuzz_http: one bad line then "\r\r" answered one line but was counted as two, then 500).
  const HttpResponse crs = api.Handle(Post("{\"op\": \"rp\x01=}\r\n\r\r\n"));
  EXPECT_EQ(crs.status, 400) << crs.body;
  ASSERT_EQ(Lines(crs.body).size(), 1u);
  EXPECT_EQ(Lines(crs.body)[0]["error"]["code"], "INVALID_ARGUMENT");
  // A call past its deadline: 504.
  const HttpResponse late =
      api.Handle(Post(R"({"op": "bfs", "id": 1, "max_depth": 3})", {{"x-zipg-timeout-ms", "0"}}));
  EXPECT_EQ(late.status, 504) << late.body;
  EXPECT_EQ(Lines(late.body)[0]["error"]["code"], "DEADLINE_EXCEEDED");
}

TEST(ApiTest, TooManyLinesAre413AndNothingRuns) {
  Fixture& f = Shared();
  ASSERT_TRUE(f.graph);
  ApiOptions options;
  options.max_lines = 3;
  Api api(f.graph.get(), nullptr, nullptr, options);
  const std::string line = R"({"op": "obj_get", "id": 1})";
  EXPECT_EQ(api.Handle(Post(line + "\n" + line + "\n" + line + "\n")).status, 200);
  const HttpResponse r = api.Handle(Post(line + "\n" + line + "\n\n" + line + "\n" + line));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Lines(r.body)[0]["error"]["code"], "RESOURCE_EXHAUSTED");
}

TEST(ApiTest, GetRoutesAnswerAsTheirOperation) {
  Fixture& f = Shared();
  ASSERT_TRUE(f.graph);
  Api api(f.graph.get(), nullptr, [] { return json{{"healthy", true}}; });
  for (int64_t id : {0, 12, 39}) {
    const HttpResponse r = api.Handle(Get("/v1/nodes/" + std::to_string(id)));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(json::parse(r.body), json({{"ok", {{"id", id}, {"properties", f.nodes[id]}}}}));
  }
  const HttpResponse missing = api.Handle(Get("/v1/nodes/44"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body), json({{"ok", nullptr}}));
  for (const auto& [key, list] : f.edges) {
    const std::string path =
        "/v1/nodes/" + std::to_string(key.first) + "/edges/" + std::to_string(key.second);
    const HttpResponse all = api.Handle(Get(path));
    EXPECT_EQ(json::parse(all.body), json({{"ok", list}})) << path;
    const HttpResponse page = api.Handle(Get(path, {{"pos", "1"}, {"limit", "1"}}));
    json want = json::array();
    if (list.size() > 1) want.push_back(list[1]);
    EXPECT_EQ(json::parse(page.body), json({{"ok", want}})) << path;
    // Byte for byte the line of the same request in JSON lines.
    const HttpResponse same = api.Handle(Post(json{
        {"op", "assoc_range"}, {"id", key.first}, {"type", key.second}, {"pos", 1}, {"limit", 1}}
                                                  .dump()));
    EXPECT_EQ(page.body, same.body);
  }
  EXPECT_EQ(api.Handle(Get("/v1/nodes/x")).status, 400);
  EXPECT_EQ(api.Handle(Get("/v1/nodes/-1")).status, 400);
  EXPECT_EQ(api.Handle(Get("/v1/nodes/99999999999999999999")).status, 400);
  EXPECT_EQ(api.Handle(Get("/v1/nodes/1/edges/0", {{"limit", "many"}})).status, 400);
  EXPECT_EQ(api.Handle(Get("/v1/nodes/1/edges")).status, 404);
  EXPECT_EQ(api.Handle(Get("/v1/nope")).status, 404);
  EXPECT_EQ(api.Handle(Get("/v1//status")).status, 404);
  EXPECT_EQ(api.Handle(Get("/v1/status/")).status, 404);
  EXPECT_EQ(api.Handle(Get("/v1/nodes/3/")).status, 404);
  EXPECT_EQ(api.Handle(Get("/v1/query")).status, 405);
  HttpRequest post_status = Get("/v1/status");
  post_status.method = "POST";
  EXPECT_EQ(api.Handle(post_status).status, 405);
  const HttpResponse status = api.Handle(Get("/v1/status"));
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(json::parse(status.body), json({{"healthy", true}}));
  EXPECT_EQ(Api(f.graph.get(), nullptr, nullptr).Handle(Get("/v1/status")).status, 404);
}

TEST(ApiTest, EveryAssetIsServedAsItsFile) {
  Fixture& f = Shared();
  Api api(f.graph.get(), nullptr, nullptr);
  ASSERT_FALSE(Assets().empty());
  for (const Asset& a : Assets()) {
    std::ifstream file(std::string(ZIPG_ASSETS_DIR) + "/" + a.path, std::ios::binary);
    ASSERT_TRUE(file) << a.path;
    const std::string bytes((std::istreambuf_iterator<char>(file)), {});
    const HttpResponse r = api.Handle(Get("/static/" + std::string(a.path)));
    EXPECT_EQ(r.status, 200) << a.path;
    EXPECT_EQ(r.body, bytes) << a.path;
  }
  const HttpResponse index = api.Handle(Get("/"));
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(api.Handle(Get("/static/nope.js")).status, 404);
  EXPECT_EQ(api.Handle(Get("/static/../CMakeLists.txt")).status, 404);
}

// A raw TCP connection to 127.0.0.1:port.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What the server sends first (empty if it closes, or sends nothing for `wait_ms`).
std::string ReadSome(int fd, int wait_ms) {
  timeval tv{wait_ms / 1000, (wait_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf));
  return n <= 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

TEST(HttpServerTest, BoundsOnBodiesSlowClientsAndConnections) {
  Fixture& f = Shared();
  ASSERT_TRUE(f.graph);
  Api api(f.graph.get(), nullptr, nullptr);
  HttpOptions options;
  options.max_body_bytes = 1024;
  options.read_timeout_ms = 300;
  options.max_connections = 2;
  options.keep_alive_timeout_s = 1;  // an idle connection holds a worker this long
  auto server = HttpServer::Start(options, [&api](const HttpRequest& r) { return api.Handle(r); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  httplib::Client client("127.0.0.1", port);
  auto ok = client.Post("/v1/query", R"({"op": "obj_get", "id": 3})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["ok"]["id"], 3);
  auto big = client.Post("/v1/query", std::string(2000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto node = client.Get("/v1/nodes/5");
  ASSERT_TRUE(node);
  EXPECT_EQ(node->status, 200);

  // A client that sends half a request and stops is cut off after the read timeout.
  const int slow = Connect(port);
  ASSERT_GE(slow, 0);
  const std::string half = "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{";
  ASSERT_EQ(write(slow, half.data(), half.size()), static_cast<ssize_t>(half.size()));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string answer = ReadSome(slow, 5000);
  const auto waited = std::chrono::steady_clock::now() - t0;
  close(slow);
  EXPECT_LT(waited, std::chrono::seconds(3));
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 408") << answer;

  // Two idle connections take both workers: a third request waits until one is cut off.
  const int a = Connect(port), b = Connect(port);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t1 = std::chrono::steady_clock::now();
  httplib::Client third("127.0.0.1", port);
  auto late = third.Get("/v1/nodes/6");
  const auto third_waited = std::chrono::steady_clock::now() - t1;
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 200);
  EXPECT_GE(third_waited, std::chrono::milliseconds(150));
  close(a);
  close(b);
  (*server)->Stop();
}

TEST(HttpServerTest, AnUnusablePortOrHalfATlsSetupIsAClearError) {
  auto first = HttpServer::Start({}, [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_TRUE(first.ok());
  HttpOptions same;
  same.port = (*first)->port();
  auto second = HttpServer::Start(same, [](const HttpRequest&) { return HttpResponse{}; });
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  HttpOptions half;
  half.tls_cert = "/nonexistent.pem";
  EXPECT_EQ(
      HttpServer::Start(half, [](const HttpRequest&) { return HttpResponse{}; }).status().code(),
      StatusCode::kInvalidArgument);
  HttpOptions missing;
  missing.tls_ca = missing.tls_cert = missing.tls_key = "/nonexistent.pem";
  EXPECT_EQ(
      HttpServer::Start(missing, [](const HttpRequest&) { return HttpResponse{}; }).status().code(),
      StatusCode::kInvalidArgument);
}

// The samples StatusMetrics makes of `status`: "name,label=value,..." -> value.
std::map<std::string, double> SamplesOf(const json& status) {
  metrics::Samples out;
  StatusMetrics(status, &out);
  std::map<std::string, double> v;
  for (const auto& s : out.samples()) {
    std::string key = s.name;
    for (const auto& [k, l] : s.labels) key += "," + k + "=" + l;
    v[key] = s.value;
  }
  return v;
}

TEST(StatusMetricsTest, LogStoreShardAndAggregatorDocumentsBecomeSamples) {
  const json logstore = json::parse(R"({
    "role": "logstore", "name": "logstore", "leader": true,
    "memory": {"rss_bytes": 1000, "file_bytes": 300, "accounted_bytes": 5},
    "logstore": {"writes": 20, "commit": {"groups": 4, "log_us": 1500000, "fanout_us": 20, "apply_us": 3},
                 "wal": {"records": 4, "syncs": 3, "bytes": 99},
                 "memtable": {"bytes": 77, "nodes": 2, "edges": 5},
                 "log_shards": [{"bytes": 10}, {"bytes": 32}],
                 "compactions": 2, "merges": 1, "epoch": 9, "commit_notices": 11,
                 "snapshots": {"applied": 4294967297},
                 "fragment_reads": {"1": 3, "2": 4},
                 "edge_cache": {"hits": 6, "misses": 1, "bytes": 8},
                 "standby": {"sync": "degraded", "shipped_groups": 4, "reseeded": 0}}})");
  const std::map<std::string, double> v = SamplesOf(logstore);
  EXPECT_EQ(v.at("zipg_logstore_writes_total"), 20);
  EXPECT_EQ(v.at("zipg_logstore_commit_groups_total"), 4);
  EXPECT_DOUBLE_EQ(v.at("zipg_logstore_commit_stage_seconds_total,stage=log"), 1.5);
  EXPECT_EQ(v.at("zipg_logstore_wal_syncs_total"), 3);
  EXPECT_EQ(v.at("zipg_logstore_memtable_entries"), 7);
  EXPECT_EQ(v.at("zipg_logstore_log_shards"), 2);
  EXPECT_EQ(v.at("zipg_logstore_log_shard_bytes"), 42);
  EXPECT_EQ(v.at("zipg_logstore_fragment_reads_total"), 7);
  EXPECT_EQ(v.at("zipg_logstore_commit_notices_total"), 11);
  EXPECT_EQ(v.at("zipg_logstore_standby_in_sync"), 0);
  EXPECT_EQ(v.at("zipg_logstore_epoch"), 9);
  EXPECT_EQ(v.at("zipg_logstore_leader"), 1);
  EXPECT_EQ(v.at("zipg_process_resident_memory_bytes"), 1000);
  EXPECT_EQ(v.at("zipg_build_info,name=logstore,role=logstore"), 1);

  const json shard = json::parse(R"({
    "role": "shard", "name": "shard-0", "serving": false, "update_batches": 12,
    "commits": {"0": {"committed": 4294967300, "rereads": 3, "disagreements": 2},
                "2": {"committed": 5}},
    "rebuilds": {"0": {"rebuilds": 1, "delta_bytes": 10, "version": 1}}})");
  const std::map<std::string, double> w = SamplesOf(shard);
  EXPECT_EQ(w.at("zipg_shard_serving"), 0);
  EXPECT_EQ(w.at("zipg_shard_update_batches_total"), 12);
  EXPECT_EQ(w.at("zipg_shard_committed_id,shard=0"), 4294967300.0);
  EXPECT_EQ(w.at("zipg_shard_committed_id,shard=2"), 5);
  EXPECT_EQ(w.at("zipg_shard_commit_rereads_total,shard=0"), 3);
  EXPECT_EQ(w.at("zipg_shard_read_disagreements_total,shard=0"), 2);
  EXPECT_EQ(w.at("zipg_shard_read_disagreements_total,shard=2"), 0);
  EXPECT_EQ(w.at("zipg_shard_rebuilds_total,shard=0"), 1);
  EXPECT_EQ(w.count("zipg_logstore_writes_total"), 0u);

  metrics::Samples none;
  StatusMetrics(json("not an object"), &none);
  EXPECT_TRUE(none.samples().empty());
}

}  // namespace
}  // namespace zipg::http
