// The RPC glue against an in-process server: values round-trip unchanged through Thrift, every
// error code survives the trip, transport failures map to UNAVAILABLE / DEADLINE_EXCEEDED, a
// restarted server is used again without a failed call (reads) or with exactly one failed call and
// no retry (writes), and oversized requests are refused locally. Writes: a handler without a writer
// refuses them; with one, every write and admin_compact carries its arguments and its result or
// error unchanged. Mutual TLS: members of the cluster's CA talk, anyone else (no certificate,
// another CA's certificate, plaintext) is refused and the server keeps serving. Also the shard
// map's routing rules.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSSLSocket.h>
#include <thrift/transport/TSocket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "rpc/convert.h"
#include "rpc/graph_handler.h"
#include "rpc/limits.h"
#include "rpc/remote_graph.h"
#include "rpc/server.h"
#include "rpc/tls.h"
#include "rpc/tls_test_files.h"
#include "util/call_deadline.h"
#include "util/thread_pool.h"
#include "zipg_rpc/LogStoreService.h"

namespace zipg::rpc {
namespace {

// A GraphApi that answers from fixed data, can be told to fail or to stall, and counts calls.
class FakeGraph : public GraphApi {
 public:
  Status fail;                   // returned by every call when not OK
  std::atomic<int> stall_ms{0};  // sleep before answering (set while a call may run)
  std::atomic<int> calls{0};
  // The milliseconds the last call had left by its call deadline when it came in (-1: none).
  std::atomic<int64_t> deadline_left_ms{0};
  std::atomic<size_t> neighbors{0};  // if set, GetNeighborIds answers this many ids

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    if (id != 7) return std::optional<Properties>();
    Properties p = kProps;
    if (names) {
      Properties kept;
      for (const auto& kv : p) {
        if (std::find(names->begin(), names->end(), kv.first) != names->end()) kept.push_back(kv);
      }
      p = kept;
    }
    return std::optional<Properties>(p);
  }
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return std::vector<int64_t>{1, static_cast<int64_t>(properties.size()), INT64_MAX};
  }
  // Keeps the search it was sent and answers with its limit and a truncation.
  StatusOr<SearchResult> SearchNodeIds(const NodeSearch& q) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    std::lock_guard lock(search_mu);
    last_search = q;
    return SearchResult{{0, q.limit, INT64_MAX}, true};
  }
  std::mutex search_mu;
  NodeSearch last_search;
  StatusOr<std::vector<int64_t>> GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                const Properties& properties) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    if (neighbors) return std::vector<int64_t>(neighbors, 1);
    return std::vector<int64_t>{id, type.value_or(-1), static_cast<int64_t>(properties.size())};
  }
  StatusOr<EdgeRecordInfo> GetEdgeRecord(int64_t id, int64_t type) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return EdgeRecordInfo{id, type, 3};
  }
  StatusOr<std::pair<int64_t, int64_t>> GetEdgeRange(int64_t, int64_t, int64_t t_lo,
                                                     int64_t t_hi) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return std::make_pair(t_lo, t_hi);
  }
  StatusOr<std::optional<zipg::Edge>> GetEdgeData(int64_t id, int64_t type,
                                                  int64_t time_order) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    if (time_order != 0) return std::optional<zipg::Edge>();
    return std::optional<zipg::Edge>(kEdge);
  }
  StatusOr<std::optional<zipg::Node>> ObjGet(int64_t id) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    if (id != 7) return std::optional<zipg::Node>();
    return std::optional<zipg::Node>(zipg::Node{7, kProps});
  }
  StatusOr<std::vector<zipg::Edge>> AssocRange(int64_t, int64_t, int64_t, int64_t limit) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return std::vector<zipg::Edge>(static_cast<size_t>(limit), kEdge);
  }
  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return id * 10 + type;
  }
  StatusOr<std::vector<zipg::Edge>> AssocGet(int64_t, int64_t, const std::vector<int64_t>& ids,
                                             int64_t, int64_t) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return std::vector<zipg::Edge>(ids.size(), kEdge);
  }
  StatusOr<std::vector<zipg::Edge>> AssocTimeRange(int64_t, int64_t, int64_t, int64_t,
                                                   int64_t limit) override {
    ZIPG_RETURN_IF_ERROR(Enter());
    return std::vector<zipg::Edge>(static_cast<size_t>(limit), kEdge);
  }

  inline static const Properties kProps = {{"", "empty name"},
                                           {"a", std::string("nul\0byte", 8)},
                                           {"city", "Z\xc3\xbcrich \xf4\x8f\xbf\xbf"},
                                           {"z", ""}};
  inline static const zipg::Edge kEdge = {INT64_MAX, 3, 0, INT64_MIN, {{"w", "1,\"2\"\n"}}};

 private:
  Status Enter() {
    const auto deadline = CallDeadline::Current();
    deadline_left_ms = deadline ? CallDeadline::RemainingMs(*deadline) : -1;
    ++calls;
    if (stall_ms) std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
    return fail;
  }
};

// A GraphWriteApi that records every call and answers with programmed results, or with `fail`.
class FakeWriter final : public GraphWriteApi {
 public:
  // One call as received: obj_*: a = id; assoc_*: a = src, b = type, c = dst, d = timestamp.
  struct Call {
    std::string op;
    int64_t a = 0, b = 0, c = 0, d = 0;
    Properties properties;
    friend bool operator==(const Call&, const Call&) = default;
  };

  Status fail;           // returned by every call when not OK
  bool deleted = false;  // ObjDelete / AssocDelete / AssocAdd (replaced) answer this
  std::string compacted = "{}";

  Status ObjAdd(int64_t id, const Properties& properties) override {
    return Record({"obj_add", id, 0, 0, 0, properties});
  }
  Status ObjUpdate(int64_t id, const Properties& properties) override {
    return Record({"obj_update", id, 0, 0, 0, properties});
  }
  StatusOr<bool> ObjDelete(int64_t id) override {
    ZIPG_RETURN_IF_ERROR(Record({"obj_delete", id, 0, 0, 0, {}}));
    return deleted;
  }
  StatusOr<bool> AssocAdd(const zipg::Edge& e) override {
    ZIPG_RETURN_IF_ERROR(Record({"assoc_add", e.src, e.type, e.dst, e.timestamp, e.properties}));
    return deleted;
  }
  Status AssocUpdate(const zipg::Edge& e) override {
    return Record({"assoc_update", e.src, e.type, e.dst, e.timestamp, e.properties});
  }
  StatusOr<bool> AssocDelete(int64_t src, int64_t type, int64_t dst) override {
    ZIPG_RETURN_IF_ERROR(Record({"assoc_delete", src, type, dst, 0, {}}));
    return deleted;
  }
  StatusOr<std::string> Compact() override {
    ZIPG_RETURN_IF_ERROR(Record({"admin_compact", 0, 0, 0, 0, {}}));
    return compacted;
  }

  std::vector<Call> Calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  size_t NumCalls() {
    std::lock_guard lock(mu_);
    return calls_.size();
  }

 private:
  Status Record(Call call) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(call));
    return fail;
  }
  std::mutex mu_;
  std::vector<Call> calls_;
};

void PrintTo(const FakeWriter::Call& c, std::ostream* os) {
  *os << c.op << "(" << c.a << ", " << c.b << ", " << c.c << ", " << c.d << ", "
      << c.properties.size() << " properties)";
}

// Every write operation of RemoteGraph, reduced to its Status (results are checked elsewhere).
std::vector<std::pair<std::string, std::function<Status(RemoteGraph&)>>> EveryWrite() {
  const zipg::Edge e{1, 2, 3, 4, {{"p", "v"}}};
  return {
      {"obj_add",
       [](RemoteGraph& c) {
         return c.ObjAdd(1, {{"p", "v"}});
       }},
      {"obj_update",
       [](RemoteGraph& c) {
         return c.ObjUpdate(1, {{"p", "v"}});
       }},
      {"obj_delete", [](RemoteGraph& c) { return c.ObjDelete(1).status(); }},
      {"assoc_add", [e](RemoteGraph& c) { return c.AssocAdd(e).status(); }},
      {"assoc_update", [e](RemoteGraph& c) { return c.AssocUpdate(e); }},
      {"assoc_delete", [](RemoteGraph& c) { return c.AssocDelete(1, 2, 3).status(); }},
      {"admin_compact", [](RemoteGraph& c) { return c.Compact().status(); }},
  };
}

class RpcTest : public ::testing::Test {
 protected:
  void StartServer(int port = 0, int max_request_bytes = 64 << 20) {
    auto handler = std::make_shared<GraphHandler>(
        &fake_, []() -> StatusOr<std::string> { return std::string("{\"fake\":true}"); }, writer_);
    ServerOptions options;
    options.port = port;
    options.max_request_bytes = max_request_bytes;
    options.max_connections = max_connections_;
    if (server_tls_.enabled()) {
      auto tls = MakeTlsFactory(server_tls_, /*server=*/true);
      ASSERT_TRUE(tls.ok()) << tls.status().ToString();
      options.tls = *tls;
    }
    auto server = RpcServer::Start(std::make_shared<GraphServiceProcessor>(handler), options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  RemoteGraph Client(int timeout_ms = 5000) {
    if (!pool_) {
      ConnectionOptions options;
      options.call_timeout_ms = timeout_ms;
      pool_ = std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", server_->port()}, options);
    }
    return RemoteGraph(pool_);
  }

  FakeGraph fake_;
  GraphWriteApi* writer_ = nullptr;  // set before StartServer to take writes
  TlsOptions server_tls_;            // set before StartServer for a TLS server
  int64_t max_connections_ = 1024;   // set before StartServer
  std::unique_ptr<RpcServer> server_;
  std::shared_ptr<ConnectionPool> pool_;
};

TEST_F(RpcTest, ValuesRoundTrip) {
  StartServer();
  RemoteGraph c = Client();
  auto props = c.GetNodeProperty(7, nullptr);
  ASSERT_TRUE(props.ok());
  ASSERT_TRUE(props->has_value());
  EXPECT_EQ(**props, FakeGraph::kProps);
  std::vector<std::string> names = {"a", "missing"};
  EXPECT_EQ(**c.GetNodeProperty(7, &names), (Properties{FakeGraph::kProps[1]}));
  std::vector<std::string> none;
  EXPECT_EQ(**c.GetNodeProperty(7, &none), Properties());  // [] is not "all"
  EXPECT_FALSE(c.GetNodeProperty(8, nullptr)->has_value());
  EXPECT_EQ(*c.GetNodeIds({{"a", "b"}, {"c", "d"}}), (std::vector<int64_t>{1, 2, INT64_MAX}));
  EXPECT_EQ(*c.GetNeighborIds(5, std::nullopt, {}), (std::vector<int64_t>{5, -1, 0}));
  EXPECT_EQ(*c.GetNeighborIds(5, 0, {{"x", "y"}}), (std::vector<int64_t>{5, 0, 1}));
  EXPECT_EQ(*c.GetEdgeRecord(4, 9), (EdgeRecordInfo{4, 9, 3}));
  EXPECT_EQ(*c.GetEdgeRange(1, 1, INT64_MIN, INT64_MAX), std::make_pair(INT64_MIN, INT64_MAX));
  EXPECT_EQ(**c.GetEdgeData(1, 1, 0), FakeGraph::kEdge);
  EXPECT_FALSE(c.GetEdgeData(1, 1, 1)->has_value());
  EXPECT_EQ(**c.ObjGet(7), (zipg::Node{7, FakeGraph::kProps}));
  EXPECT_FALSE(c.ObjGet(6)->has_value());
  EXPECT_EQ(c.AssocRange(1, 1, 0, 3)->size(), 3u);
  EXPECT_EQ(*c.AssocCount(4, 2), 42);
  EXPECT_EQ(c.AssocGet(1, 1, {1, 2}, 0, 1)->size(), 2u);
  EXPECT_EQ(*c.AssocTimeRange(1, 1, 0, 1, 0), std::vector<zipg::Edge>());
  EXPECT_EQ(*c.ServerStatus(), "{\"fake\":true}");
}

// search_node_ids: every argument arrives as sent (bytes no UTF-8 text holds, a NUL, any
// property or none, every match kind), and the answer comes back with its truncation; arguments
// the contract refuses never leave the client.
TEST_F(RpcTest, SearchArgumentsAndAnswersRoundTrip) {
  StartServer();
  RemoteGraph c = Client();
  const std::string pattern("a\0\xFF\xF5\"\n", 6);
  for (SearchMatch match :
       {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix, SearchMatch::kExact}) {
    for (std::optional<std::string> property :
         {std::optional<std::string>(), std::optional<std::string>(""),
          std::optional<std::string>("name")}) {
      const NodeSearch q{pattern, property, match, 77};
      auto got = c.SearchNodeIds(q);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, (SearchResult{{0, 77, INT64_MAX}, true}));
      std::lock_guard lock(fake_.search_mu);
      EXPECT_EQ(fake_.last_search.pattern, pattern);
      EXPECT_EQ(fake_.last_search.property, property);
      EXPECT_EQ(fake_.last_search.match, match);
      EXPECT_EQ(fake_.last_search.limit, 77);
    }
  }
  fake_.last_search = {};
  for (const NodeSearch& bad : {NodeSearch{"", std::nullopt, SearchMatch::kContains, 5},
                                NodeSearch{"a", std::nullopt, SearchMatch::kContains, 0}}) {
    EXPECT_EQ(c.SearchNodeIds(bad).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(fake_.last_search.limit, kDefaultSearchLimit) << "a refused search reached the server";
  // A server receiving an unknown match refuses it by name.
  SearchRequest raw;
  raw.pattern = "a";
  raw.any_property = true;
  raw.match = "regexp";
  raw.limit = 5;
  auto decoded = FromThrift(raw);
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("regexp"), std::string::npos);
}

TEST_F(RpcTest, EveryErrorCodeSurvivesTheTrip) {
  StartServer();
  RemoteGraph c = Client();
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kUnavailable, StatusCode::kDeadlineExceeded, StatusCode::kResourceExhausted,
        StatusCode::kInternal}) {
    fake_.fail = Status(code, "why");
    auto r = c.ObjGet(7);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code);
    EXPECT_EQ(r.status().message(), "why");
  }
  // Engine-internal codes are INTERNAL for clients, with the original code in the message.
  fake_.fail = Status::Corruption("bad block");
  auto r = c.AssocCount(1, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), "CORRUPTION: bad block");
  // A declared error leaves the connection usable: the next call works.
  fake_.fail = Status::OK();
  EXPECT_EQ(*c.AssocCount(1, 1), 11);
}

TEST_F(RpcTest, WritesAreRefusedWithoutAWriter) {
  StartServer();  // a shard server's handler: no writer
  RemoteGraph c = Client();
  const int reads = fake_.calls;
  for (auto& [op, write] : EveryWrite()) {
    Status s = write(c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << op << ": " << s.ToString();
    EXPECT_NE(s.message().find("does not take writes"), std::string::npos)
        << op << ": " << s.ToString();
  }
  EXPECT_EQ(fake_.calls, reads) << "a write must not reach the reader";
  // The raw client call reports the declared error as a Status, never as an exception.
  try {
    Status s = c.pool().Call([](LogStoreServiceClient& raw) { raw.obj_add(1, {}); }, false);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  } catch (...) {
    FAIL() << "Call must not throw";
  }
  // A refused write leaves the connection usable.
  EXPECT_EQ(*c.AssocCount(1, 1), 11);
}

TEST_F(RpcTest, WritesRoundTripArgumentsAndResults) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer();
  RemoteGraph c = Client();
  const int reads = fake_.calls;
  using Call = FakeWriter::Call;
  const Properties& props = FakeGraph::kProps;  // "" name, U+0000, non-ASCII, "" value
  std::vector<Call> want;

  ASSERT_TRUE(c.ObjAdd(INT64_MAX, props).ok());
  want.push_back({"obj_add", INT64_MAX, 0, 0, 0, props});
  ASSERT_TRUE(c.ObjAdd(0, {}).ok());
  want.push_back({"obj_add", 0, 0, 0, 0, {}});
  ASSERT_TRUE(c.ObjUpdate(INT64_MIN, props).ok());  // the writer, not the wire, checks ids
  want.push_back({"obj_update", INT64_MIN, 0, 0, 0, props});
  ASSERT_TRUE(c.ObjUpdate(-1, {{"", ""}}).ok());
  want.push_back({"obj_update", -1, 0, 0, 0, {{"", ""}}});

  for (bool deleted : {true, false}) {
    writer.deleted = deleted;
    auto r = c.ObjDelete(deleted ? INT64_MAX : INT64_MIN);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, deleted);
    want.push_back({"obj_delete", deleted ? INT64_MAX : INT64_MIN, 0, 0, 0, {}});
    auto a = c.AssocDelete(INT64_MIN, INT64_MAX, deleted ? 0 : INT64_MIN);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(*a, deleted);
    want.push_back({"assoc_delete", INT64_MIN, INT64_MAX, deleted ? 0 : INT64_MIN, 0, {}});
  }

  const zipg::Edge extremes{INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX, props};
  const zipg::Edge other{INT64_MAX, 0, INT64_MAX, INT64_MIN, {}};
  for (const zipg::Edge& e : {extremes, other, FakeGraph::kEdge}) {
    writer.deleted = e.src == extremes.src;
    auto replaced = c.AssocAdd(e);
    ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
    EXPECT_EQ(*replaced, writer.deleted);
    want.push_back({"assoc_add", e.src, e.type, e.dst, e.timestamp, e.properties});
    ASSERT_TRUE(c.AssocUpdate(e).ok());
    want.push_back({"assoc_update", e.src, e.type, e.dst, e.timestamp, e.properties});
  }

  for (const std::string& result : {std::string("{\"compacted\":true,\"generation\":7}"),
                                    std::string(), std::string("nul\0inside \xc3\xbc", 13)}) {
    writer.compacted = result;
    auto r = c.Compact();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, result);
    want.push_back({"admin_compact", 0, 0, 0, 0, {}});
  }

  EXPECT_EQ(writer.Calls(), want);
  EXPECT_EQ(fake_.calls, reads) << "writes must go to the writer only";
}

// write_batch carries every kind of write, in order, with each one's own outcome, and is split
// into several calls when it is large; an unknown kind fails alone.
TEST_F(RpcTest, WriteBatchesRoundTripEachWriteAndItsOutcome) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer();
  RemoteGraph c = Client();
  using Call = FakeWriter::Call;
  const Properties& props = FakeGraph::kProps;
  std::vector<zipg::Write> batch = {
      {zipg::Write::Op::kObjAdd, INT64_MAX, 0, 0, 0, props},
      {zipg::Write::Op::kAssocAdd, 1, 2, INT64_MIN, INT64_MAX, props},
      {zipg::Write::Op::kObjUpdate, 5, 0, 0, 0, {{"", ""}}},
      {zipg::Write::Op::kAssocDelete, 1, 2, 3, 0, {}},
      {zipg::Write::Op::kAssocUpdate, 7, 8, 9, -4, {}},
      {zipg::Write::Op::kObjDelete, 11, 0, 0, 0, {}},
  };
  std::vector<Call> want = {
      {"obj_add", INT64_MAX, 0, 0, 0, props}, {"assoc_add", 1, 2, INT64_MIN, INT64_MAX, props},
      {"obj_update", 5, 0, 0, 0, {{"", ""}}}, {"assoc_delete", 1, 2, 3, 0, {}},
      {"assoc_update", 7, 8, 9, -4, {}},      {"obj_delete", 11, 0, 0, 0, {}}};
  writer.deleted = true;
  std::vector<StatusOr<bool>> got = c.WriteBatch(batch);
  ASSERT_EQ(got.size(), batch.size());
  const bool answers[] = {false, true, false, true, false, true};
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(*got[i], answers[i]) << i;
  }
  EXPECT_EQ(writer.Calls(), want);

  // Every write fails on its own with the writer's error.
  writer.fail = Status::NotFound("no such edge");
  got = c.WriteBatch(batch);
  for (const auto& o : got) EXPECT_EQ(o.status().code(), StatusCode::kNotFound);
  writer.fail = Status::OK();

  // A large batch goes as several calls, still in order.
  std::vector<zipg::Write> large;
  for (int64_t i = 0; i < static_cast<int64_t>(RemoteGraph::kBatchWrites) * 2 + 5; ++i) {
    large.push_back({zipg::Write::Op::kAssocAdd, i, 0, i, i, {}});
  }
  const size_t before = writer.NumCalls();
  got = c.WriteBatch(large);
  ASSERT_EQ(got.size(), large.size());
  const std::vector<Call> calls = writer.Calls();
  ASSERT_EQ(calls.size(), before + large.size());
  for (size_t i = 0; i < large.size(); ++i) {
    ASSERT_EQ(calls[before + i].a, static_cast<int64_t>(i)) << "out of order at " << i;
  }

  // An unknown kind (a newer client) fails alone.
  std::vector<BatchedWrite> raw(2);
  raw[0].kind = static_cast<WriteKind::type>(99);
  raw[1].kind = WriteKind::OBJ_DELETE;
  raw[1].id = 42;
  auto sent = c.SendWriteBatch(raw);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_EQ((*sent)[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*sent)[1].ok());
  EXPECT_EQ(writer.Calls().back(), (Call{"obj_delete", 42, 0, 0, 0, {}}));
}

TEST_F(RpcTest, EveryErrorCodeOfAWriteSurvivesTheTrip) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer();
  RemoteGraph c = Client();
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kUnavailable, StatusCode::kDeadlineExceeded, StatusCode::kResourceExhausted,
        StatusCode::kInternal}) {
    writer.fail = Status(code, "why \xe2\x98\x83");
    for (auto& [op, write] : EveryWrite()) {
      Status s = write(c);
      EXPECT_EQ(s.code(), code) << op << ": " << s.ToString();
      EXPECT_EQ(s.message(), "why \xe2\x98\x83") << op;
    }
  }
  // Engine-internal codes are INTERNAL for clients, with the original code in the message.
  writer.fail = Status::IOError("disk full");
  for (auto& [op, write] : EveryWrite()) {
    Status s = write(c);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << op << ": " << s.ToString();
    EXPECT_EQ(s.message(), "IO_ERROR: disk full") << op;
  }
  // The results of a failed call are not taken for answers, and the connection stays usable.
  writer.fail = Status::OK();
  writer.deleted = true;
  EXPECT_EQ(*c.ObjDelete(5), true);
  EXPECT_EQ(*c.AssocDelete(5, 0, 6), true);
  EXPECT_EQ(writer.NumCalls(), 8 * EveryWrite().size() + 2);
}

// A write is sent with idempotent=false: a stale pooled connection fails it (UNAVAILABLE) instead
// of resending it, and the server never sees it; the next call connects again and goes through
// once.
TEST_F(RpcTest, WritesAreNotRetriedOnAStaleConnection) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer();
  RemoteGraph c = Client();
  const int port = server_->port();
  for (auto& [op, write] : EveryWrite()) {
    ASSERT_TRUE(c.ObjGet(7).ok()) << op;  // leaves an idle pooled connection
    server_->Stop();
    StartServer(port);  // the pooled connection now points at a closed socket
    const size_t before = writer.NumCalls();
    Status s = write(c);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << op << ": " << s.ToString();
    EXPECT_EQ(writer.NumCalls(), before) << op << " reached the server on a stale connection";
    Status again = write(c);
    EXPECT_TRUE(again.ok()) << op << ": " << again.ToString();
    EXPECT_EQ(writer.NumCalls(), before + 1) << op;
  }
  // The same situation with idempotent=true (what reads use) is retried on a fresh connection and
  // reaches the server once: the stale connection above really was stale.
  ASSERT_TRUE(c.ObjGet(7).ok());
  server_->Stop();
  StartServer(port);
  const size_t before = writer.NumCalls();
  Status retried = c.pool().Call([](LogStoreServiceClient& raw) { raw.obj_add(9, {}); }, true);
  EXPECT_TRUE(retried.ok()) << retried.ToString();
  EXPECT_EQ(writer.NumCalls(), before + 1);
}

TEST_F(RpcTest, OversizedWritesAreRefusedBeforeSending) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer();
  RemoteGraph c = Client();
  const Properties big = {{"p", std::string(kMaxRequestBytes, 'x')}};
  const zipg::Edge e{1, 0, 2, 3, big};
  EXPECT_EQ(c.ObjAdd(1, big).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(c.ObjUpdate(1, big).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(c.AssocAdd(e).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(c.AssocUpdate(e).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(writer.NumCalls(), 0u);
  // Just under the limit goes through, whole.
  const Properties fine = {{"p", std::string(kMaxRequestBytes / 2, 'y')}};
  ASSERT_TRUE(c.ObjAdd(1, fine).ok());
  ASSERT_EQ(writer.NumCalls(), 1u);
  EXPECT_EQ(writer.Calls()[0].properties, fine);
}

TEST_F(RpcTest, DeadServerIsUnavailableFastAndRestartIsPickedUp) {
  StartServer();
  RemoteGraph c = Client();
  ASSERT_TRUE(c.ObjGet(7).ok());  // leaves an idle pooled connection
  const int port = server_->port();
  server_->Stop();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.ObjGet(7);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  EXPECT_LT(elapsed, std::chrono::milliseconds(500));
  EXPECT_EQ(c.ObjGet(7).status().code(), StatusCode::kUnavailable);

  StartServer(port);  // same port: the pool reconnects with no failed call
  const int before = fake_.calls;
  auto again = c.ObjGet(7);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(fake_.calls, before + 1);
}

TEST_F(RpcTest, StaleIdleConnectionIsRetriedOnce) {
  StartServer();
  RemoteGraph c = Client();
  ASSERT_TRUE(c.ObjGet(7).ok());
  const int port = server_->port();
  server_->Stop();
  StartServer(port);  // the pooled connection now points at a closed socket
  auto r = c.ObjGet(7);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(RpcTest, SlowServerIsDeadlineExceededAndTheNextCallWorks) {
  StartServer();
  RemoteGraph c = Client(/*timeout_ms=*/200);
  fake_.stall_ms = 600;
  auto r = c.AssocCount(1, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  fake_.stall_ms = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the stalled call finish
  auto ok = c.AssocCount(1, 2);  // must not read the late reply of the timed-out call
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, 12);
}

TEST_F(RpcTest, OversizedRequestsAreRefusedBeforeSending) {
  StartServer();
  RemoteGraph c = Client();
  const int before = fake_.calls;
  std::vector<int64_t> ids(kMaxRequestBytes / 8, 1);
  EXPECT_EQ(c.AssocGet(1, 1, ids, 0, 1).status().code(), StatusCode::kResourceExhausted);
  Properties big = {{"p", std::string(kMaxRequestBytes, 'x')}};
  EXPECT_EQ(c.GetNodeIds(big).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fake_.calls, before);
  // Just under the limit goes through.
  std::vector<int64_t> fine(100000, 1);
  EXPECT_EQ(c.AssocGet(1, 1, fine, 0, 1)->size(), fine.size());
}

// Requests adding up to far more than the request size limit go through one connection: the
// limit bounds each message, not the connection's lifetime (rpc/framed_transport.h).
TEST_F(RpcTest, ALongConnectionCarriesManyTimesTheRequestLimit) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer(0, 64 << 10);
  RemoteGraph c = Client();
  std::vector<zipg::Write> batch;
  for (int i = 0; i < 40; ++i) {
    batch.push_back({zipg::Write::Op::kAssocAdd, i, 0, i, i, {{"p", std::string(200, 'x')}}});
  }
  for (int round = 0; round < 200; ++round) {  // ~10 KB each, 2 MB in all
    for (const auto& o : c.WriteBatch(batch)) {
      ASSERT_TRUE(o.ok()) << "round " << round << ": " << o.status().ToString();
    }
  }
  EXPECT_EQ(writer.NumCalls(), 200u * batch.size());
}

TEST_F(RpcTest, ManyThreadsShareOnePool) {
  StartServer();
  RemoteGraph c = Client();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto r = c.AssocCount(t, i);
        if (!r.ok() || *r != t * 10 + i) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, 0);
}

// A TCP forwarder to `port` that sends every reply frame of the server twice, as a duplicating
// network would. One connection at a time; stops when destroyed.
class DuplicatingProxy {
 public:
  explicit DuplicatingProxy(int port) : target_(port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(listen_, 8), 0);
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~DuplicatingProxy() {
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  static bool ReadAll(int fd, char* p, size_t n) {
    while (n > 0) {
      const ssize_t r = ::read(fd, p, n);
      if (r <= 0) return false;
      p += r, n -= static_cast<size_t>(r);
    }
    return true;
  }
  static bool WriteAll(int fd, const std::string& s) {
    return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Forwards frames from `from` to `to`, each `copies` times, until either side closes.
  static void Pump(int from, int to, int copies) {
    for (;;) {
      char header[4];
      if (!ReadAll(from, header, 4)) break;
      uint32_t be = 0;
      std::memcpy(&be, header, 4);
      const uint32_t n = ntohl(be);
      std::string frame(header, 4);
      frame.resize(4 + n);
      if (!ReadAll(from, frame.data() + 4, n)) break;
      for (int i = 0; i < copies; ++i) {
        if (!WriteAll(to, frame)) return;
      }
    }
    ::shutdown(to, SHUT_RDWR);
  }
  void Run() {
    for (;;) {
      const int client = ::accept(listen_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(target_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
        std::thread up([&] { Pump(client, server, 1); });
        Pump(server, client, 2);
        ::shutdown(client, SHUT_RDWR);
        up.join();
      }
      ::close(server);
      ::close(client);
    }
  }

  int target_;
  int listen_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A reply left over on a pooled connection (here: every reply arrives twice) must never answer
// the next call: the client numbers its calls and drops a connection whose reply is out of step
// (found by tests/netfault_test.py: a duplicating network made reads return other calls' data).
TEST_F(RpcTest, ARepeatedReplyNeverAnswersAnotherCall) {
  StartServer();
  DuplicatingProxy proxy(server_->port());
  ConnectionOptions options;
  options.call_timeout_ms = 5000;
  RemoteGraph c(std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", proxy.port()}, options));
  int answered = 0;
  for (int64_t i = 0; i < 20; ++i) {
    // Consecutive calls of one method: a generated client skips a reply of another method, so
    // only a stale reply of the same method would be taken.
    auto count = c.AssocCount(i, 3);
    if (count.ok()) {
      EXPECT_EQ(*count, i * 10 + 3) << "call " << i << " got another call's answer";
      ++answered;
    } else {
      EXPECT_EQ(count.status().code(), StatusCode::kUnavailable) << count.status().ToString();
    }
    if (i % 5 == 4) {
      auto node = c.ObjGet(7);
      ASSERT_TRUE(node.ok()) << node.status().ToString();
      EXPECT_TRUE(node->has_value());
    }
  }
  // Reads are retried once on a fresh connection, whose first reply is in step.
  EXPECT_EQ(answered, 20);
}

// A request frame that arrives twice runs once: the server refuses a numbered request whose
// sequence id is not above the connection's last one, by closing the connection.
TEST_F(RpcTest, ARepeatedRequestIsRefused) {
  StartServer();
  using apache::thrift::protocol::T_CALL;
  auto socket = std::make_shared<apache::thrift::transport::TSocket>("127.0.0.1", server_->port());
  socket->setRecvTimeout(5000);
  socket->setSendTimeout(5000);
  auto transport = std::make_shared<apache::thrift::transport::TFramedTransport>(socket);
  apache::thrift::protocol::TBinaryProtocol proto(transport);
  transport->open();
  // assoc_count(1: i64 id, 2: i64 type), written by hand to choose the sequence id.
  const auto send = [&](int32_t seqid) {
    proto.writeMessageBegin("assoc_count", T_CALL, seqid);
    proto.writeStructBegin("assoc_count_args");
    proto.writeFieldBegin("id", apache::thrift::protocol::T_I64, 1);
    proto.writeI64(4);
    proto.writeFieldEnd();
    proto.writeFieldBegin("type", apache::thrift::protocol::T_I64, 2);
    proto.writeI64(2);
    proto.writeFieldEnd();
    proto.writeFieldStop();
    proto.writeStructEnd();
    proto.writeMessageEnd();
    transport->flush();
  };
  const auto reply_seqid = [&] {
    std::string name;
    apache::thrift::protocol::TMessageType type;
    int32_t seqid = -1;
    proto.readMessageBegin(name, type, seqid);
    proto.skip(apache::thrift::protocol::T_STRUCT);
    proto.readMessageEnd();
    transport->readEnd();
    return seqid;
  };
  send(0), send(0), send(5), send(6);  // unnumbered calls are not checked
  EXPECT_EQ(reply_seqid(), 0);
  EXPECT_EQ(reply_seqid(), 0);
  EXPECT_EQ(reply_seqid(), 5);
  EXPECT_EQ(reply_seqid(), 6);
  EXPECT_EQ(fake_.calls.load(), 4);
  const int before = fake_.calls.load();
  send(6);  // again
  EXPECT_THROW(reply_seqid(), apache::thrift::transport::TTransportException);
  EXPECT_EQ(fake_.calls.load(), before) << "the repeated request ran";
}

// RESOURCE_EXHAUSTED with `what` in its message.
void ExpectExhausted(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
}

// Every request bound of docs/limits.md is RESOURCE_EXHAUSTED before the engine sees the call;
// just under each bound goes through.
TEST_F(RpcTest, RequestsOverABoundAreRefusedBeforeAnyWork) {
  FakeWriter writer;
  writer_ = &writer;
  StartServer();
  RemoteGraph c = Client();
  const int before = fake_.calls;
  std::vector<int64_t> ids(kMaxIdsPerCall + 1, 1);  // ~9 MB: under the 16 MiB frame limit
  ExpectExhausted(c.AssocGet(1, 1, ids, 0, 1).status(), "1000001 ids in one call; at most 1000000");
  ExpectExhausted(c.Rpq("1", ids, 10).status(), "1000001 sources");
  std::vector<std::string> names(kMaxNamesPerCall + 1);
  for (size_t i = 0; i < names.size(); ++i) names[i] = "p" + std::to_string(i);
  ExpectExhausted(c.GetNodeProperty(1, &names).status(), "1025 property names");
  Properties props;
  for (const auto& n : names) props.emplace_back(n, "v");
  ExpectExhausted(c.GetNodeIds(props).status(), "1025 properties");
  ExpectExhausted(c.GetNeighborIds(1, std::nullopt, props).status(), "1025 properties");
  EXPECT_EQ(fake_.calls, before) << "a refused read reached the engine";
  ExpectExhausted(c.ObjAdd(1, props), "obj_add: 1025 properties");
  ExpectExhausted(c.ObjUpdate(1, props), "obj_update: 1025 properties");
  ExpectExhausted(c.AssocAdd({1, 1, 2, 3, props}).status(), "assoc_add: 1025 properties");
  ExpectExhausted(c.AssocUpdate({1, 1, 2, 3, props}), "assoc_update: 1025 properties");
  // A batch of too many writes is refused whole; a write with too many properties alone.
  std::vector<BatchedWrite> batch(kMaxWritesPerCall + 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].kind = WriteKind::ASSOC_DELETE;
    batch[i].id = static_cast<int64_t>(i);
  }
  ExpectExhausted(c.SendWriteBatch(batch).status(), "4097 writes in one call; at most 4096");
  batch.resize(2);
  batch[0].kind = WriteKind::OBJ_ADD;
  batch[0].properties = ToThrift(props);
  auto outcomes = c.SendWriteBatch(batch);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  ASSERT_EQ(outcomes->size(), 2u);
  ExpectExhausted((*outcomes)[0].status(), "1025 properties in a write");
  EXPECT_TRUE((*outcomes)[1].ok()) << (*outcomes)[1].status().ToString();
  EXPECT_EQ(writer.NumCalls(), 1u) << "only the good write may reach the writer";
  // At the bounds, calls go through.
  names.pop_back();
  props.pop_back();
  EXPECT_TRUE(c.GetNodeProperty(7, &names).ok());
  EXPECT_TRUE(c.GetNodeIds(props).ok());
  EXPECT_TRUE(c.ObjAdd(1, props).ok());
}

// Answers over a bound are RESOURCE_EXHAUSTED, not sent; a range's limit reaches the engine
// clipped to one past the bound (the fake builds `limit` edges: INT64_MAX would not fit).
TEST_F(RpcTest, AnswersOverABoundAreRefused) {
  StartServer();
  RemoteGraph c = Client(/*timeout_ms=*/60000);
  auto full = c.AssocRange(1, 1, 0, kMaxAnswerEdges);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->size(), kMaxAnswerEdges);
  ExpectExhausted(c.AssocRange(1, 1, 0, kMaxAnswerEdges + 1).status(),
                  "more than 100000 edges; page with a smaller limit");
  ExpectExhausted(c.AssocRange(1, 1, 0, INT64_MAX).status(), "more than 100000 edges");
  ExpectExhausted(c.AssocTimeRange(1, 1, 0, 1, INT64_MAX).status(), "more than 100000 edges");
  EXPECT_EQ(c.AssocTimeRange(1, 1, 0, 1, 5)->size(), 5u);
  std::vector<int64_t> ids(kMaxAnswerEdges + 1, 1);  // the fake answers one edge per id
  ExpectExhausted(c.AssocGet(1, 1, ids, 0, 1).status(), "more than 100000 edges; ask for fewer");
  fake_.neighbors = kMaxAnswerIds + 1;  // 128 MiB built by the fake, and refused
  ExpectExhausted(c.GetNeighborIds(1, std::nullopt, {}).status(), "more than 16777216");
  fake_.neighbors = 0;
}

// The answer checks themselves, at and past their bounds (without building 256 MiB answers).
TEST(LimitsTest, AnswerChecksAtAndPastTheirBounds) {
  const std::vector<zipg::Edge> edges(3, zipg::Edge{1, 2, 3, 4, {{"p", std::string(1000, 'v')}}});
  // 48 + 8 + 1 + 1000 bytes each: 3171 in all.
  EXPECT_TRUE(CheckEdgeAnswer("op", edges, "hint", 3, 3171).ok());
  ExpectExhausted(CheckEdgeAnswer("op", edges, "hint", 3, 3170), "op: the answer of ~3171 bytes");
  ExpectExhausted(CheckEdgeAnswer("op", edges, "hint", 2, 1 << 20), "more than 2 edges; hint");
  EXPECT_TRUE(CheckEdgeAnswer("op", edges, "hint").ok());
  EXPECT_TRUE(CheckIdAnswer("op", kMaxAnswerIds, "hint").ok());
  ExpectExhausted(CheckIdAnswer("op", kMaxAnswerIds + 1, "hint"), "16777217 ids");
  EXPECT_EQ(EngineLimit(5), 5);
  EXPECT_EQ(EngineLimit(INT64_MAX), static_cast<int64_t>(kMaxAnswerEdges) + 1);
}

// Every call carries the time its client gives it; the server sees at most that much left, and
// a call without a deadline field has none (docs/limits.md, "Deadlines").
TEST_F(RpcTest, ACallTellsTheServerHowLongItsClientWaits) {
  StartServer();
  RemoteGraph c = Client(/*timeout_ms=*/3000);
  ASSERT_TRUE(c.AssocCount(1, 1).ok());
  EXPECT_GT(fake_.deadline_left_ms.load(), 0);
  EXPECT_LE(fake_.deadline_left_ms.load(), 3000);
  // A caller with less time left sends that instead of the pool's timeout.
  {
    CallDeadline::Scope scope(CallDeadline::Clock::now() + std::chrono::milliseconds(700));
    ASSERT_TRUE(c.AssocCount(1, 1).ok());
    EXPECT_GT(fake_.deadline_left_ms.load(), 0);
    EXPECT_LE(fake_.deadline_left_ms.load(), 700);
  }
  // A caller whose deadline has passed does not send at all.
  {
    const int before = fake_.calls;
    CallDeadline::Scope scope(CallDeadline::Clock::now() - std::chrono::milliseconds(1));
    auto r = c.AssocCount(1, 1);
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
    EXPECT_NE(r.status().message().find("the caller's deadline passed before the call"),
              std::string::npos)
        << r.status().ToString();
    EXPECT_EQ(fake_.calls, before);
  }
  // By hand: no field, the field, the field with another type (skipped as unknown), then the
  // field with 0 (already passed); each on the same connection.
  auto socket = std::make_shared<apache::thrift::transport::TSocket>("127.0.0.1", server_->port());
  socket->setRecvTimeout(5000);
  auto transport = std::make_shared<apache::thrift::transport::TFramedTransport>(socket);
  apache::thrift::protocol::TBinaryProtocol proto(transport);
  transport->open();
  const auto call = [&](std::optional<int64_t> ms, bool as_string = false) {
    proto.writeMessageBegin("assoc_count", apache::thrift::protocol::T_CALL, 0);
    proto.writeStructBegin("assoc_count_args");
    proto.writeFieldBegin("id", apache::thrift::protocol::T_I64, 1);
    proto.writeI64(4);
    proto.writeFieldEnd();
    if (ms && as_string) {
      proto.writeFieldBegin("deadline_ms", apache::thrift::protocol::T_STRING, kDeadlineFieldId);
      proto.writeString(std::string("soon"));
      proto.writeFieldEnd();
    } else if (ms) {
      proto.writeFieldBegin("deadline_ms", apache::thrift::protocol::T_I64, kDeadlineFieldId);
      proto.writeI64(*ms);
      proto.writeFieldEnd();
    }
    proto.writeFieldBegin("type", apache::thrift::protocol::T_I64, 2);  // after it: still read
    proto.writeI64(2);
    proto.writeFieldEnd();
    proto.writeFieldStop();
    proto.writeStructEnd();
    proto.writeMessageEnd();
    transport->flush();
    std::string name;
    apache::thrift::protocol::TMessageType type;
    int32_t seqid = -1;
    proto.readMessageBegin(name, type, seqid);
    GraphService_assoc_count_presult result;
    int64_t count = -1;
    result.success = &count;
    result.read(&proto);
    proto.readMessageEnd();
    transport->readEnd();
    return count;
  };
  EXPECT_EQ(call(std::nullopt), 42);
  EXPECT_EQ(fake_.deadline_left_ms.load(), -1);
  EXPECT_EQ(call(1234), 42);
  EXPECT_GT(fake_.deadline_left_ms.load(), 0);
  EXPECT_LE(fake_.deadline_left_ms.load(), 1234);
  EXPECT_EQ(call(1234, /*as_string=*/true), 42);
  EXPECT_EQ(fake_.deadline_left_ms.load(), -1);
  EXPECT_EQ(call(0), 42);
  EXPECT_LE(fake_.deadline_left_ms.load(), 0);
}

// Two hops: a client with 300 ms calls a forwarding server (an aggregator's role) whose own call
// timeout is 20 s, and the next server stalls 1.5 s. The forwarding server's sub-call is cut
// when its client's 300 ms are over, not after 20 s, and the last server was told so.
TEST_F(RpcTest, ASubCallNeverOutlivesItsClientsDeadline) {
  StartServer();  // the last hop
  ConnectionOptions inner;
  inner.call_timeout_ms = 20000;
  auto to_last = std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", server_->port()}, inner);
  // The forwarding server's graph: assoc_count goes to the last hop, and each sub-call's end is
  // recorded.
  class Forwarder final : public FakeGraph {
   public:
    explicit Forwarder(std::shared_ptr<ConnectionPool> pool) : remote_(std::move(pool)) {}
    StatusOr<int64_t> AssocCount(int64_t id, int64_t type) override {
      auto r = remote_.AssocCount(id, type);
      std::lock_guard lock(mu);
      ended.push_back(r.status());
      return r;
    }
    std::mutex mu;
    std::vector<Status> ended;

   private:
    RemoteGraph remote_;
  } forwarder(to_last);
  auto handler = std::make_shared<GraphHandler>(
      &forwarder, []() -> StatusOr<std::string> { return std::string("{}"); });
  auto middle = RpcServer::Start(std::make_shared<GraphServiceProcessor>(handler), {});
  ASSERT_TRUE(middle.ok()) << middle.status().ToString();
  ConnectionOptions outer;
  outer.call_timeout_ms = 300;
  RemoteGraph client(
      std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", (*middle)->port()}, outer));

  fake_.stall_ms = 1500;
  auto r = client.AssocCount(1, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  // The sub-call ends by itself (well before the 1.5 s stall, were it not cut it would succeed).
  Status sub;
  for (auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);;) {
    {
      std::lock_guard lock(forwarder.mu);
      if (!forwarder.ended.empty()) {
        sub = forwarder.ended[0];
        break;
      }
    }
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the sub-call never ended";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(sub.code(), StatusCode::kDeadlineExceeded) << sub.ToString();
  EXPECT_NE(sub.message().find("(what its caller had left)"), std::string::npos) << sub.ToString();
  EXPECT_LE(fake_.deadline_left_ms.load(), 300) << "the last hop was given more than the client";
  fake_.stall_ms = 0;
  (*middle)->Stop();
}

// Fanned-out sub-calls run on a pool's threads under the deadline of the thread that asked.
TEST(CallDeadlineTest, PoolTasksRunUnderTheSubmittersDeadline) {
  ThreadPool pool(2);
  EXPECT_FALSE(pool.Submit([] { return CallDeadline::Current(); }).get().has_value());
  const auto deadline = CallDeadline::Clock::now() + std::chrono::seconds(7);
  {
    CallDeadline::Scope scope(deadline);
    EXPECT_EQ(pool.Submit([] { return CallDeadline::Current(); }).get(), deadline);
    {
      CallDeadline::Scope none(std::nullopt);
      EXPECT_FALSE(CallDeadline::Current().has_value());
    }
    EXPECT_EQ(CallDeadline::Current(), deadline);
  }
  EXPECT_FALSE(CallDeadline::Current().has_value());
  EXPECT_FALSE(pool.Submit([] { return CallDeadline::Current(); }).get().has_value())
      << "a task kept an earlier task's deadline";
}

// A server takes at most max_connections at once; another connection waits in the listen queue,
// so its call fails DEADLINE_EXCEEDED, and goes through once a connection has closed.
TEST_F(RpcTest, ConnectionsBeyondTheLimitWaitForOneToClose) {
  max_connections_ = 2;
  StartServer();
  std::vector<std::unique_ptr<RemoteGraph>> held;
  std::vector<std::shared_ptr<ConnectionPool>> pools;
  for (int i = 0; i < 2; ++i) {
    pools.push_back(std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", server_->port()}));
    held.push_back(std::make_unique<RemoteGraph>(pools.back()));
    ASSERT_TRUE(held.back()->AssocCount(1, 1).ok());  // its connection stays open, idle
  }
  RemoteGraph third = Client(/*timeout_ms=*/300);
  auto r = third.AssocCount(1, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  pools[0]->Clear();  // closes one held connection
  Status last;
  for (auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);;) {
    auto again = third.AssocCount(1, 1);
    if (again.ok()) break;
    last = again.status();
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << last.ToString();
  }
}

TEST(EndpointTest, Parse) {
  EXPECT_EQ(Endpoint::Parse("127.0.0.1:9000")->ToString(), "127.0.0.1:9000");
  EXPECT_EQ(Endpoint::Parse("host:1")->port, 1);
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:x1", "h:-1"}) {
    EXPECT_FALSE(Endpoint::Parse(bad).ok()) << bad;
  }
}

TEST_F(RpcTest, MutualTlsLetsOnlyHoldersOfACertificateFromTheClusterCaIn) {
  signal(SIGPIPE, SIG_IGN);  // as zipg's main does (rpc/tls.h)
  TlsFiles files;
  ASSERT_TRUE(files.ok()) << "could not make certificates with the openssl command";
  server_tls_ = files.Of("ca", "server");
  StartServer();
  auto pool_with = [&](const TlsOptions& tls) {
    ConnectionOptions options;
    options.call_timeout_ms = 2000;
    if (tls.enabled()) {
      auto factory = MakeTlsFactory(tls, /*server=*/false);
      EXPECT_TRUE(factory.ok()) << factory.status().ToString();
      if (factory.ok()) options.tls = *factory;
    }
    return std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", server_->port()}, options);
  };
  RemoteGraph member(pool_with(files.Of("ca", "client")));
  auto got = member.ObjGet(7);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(**got, (zipg::Node{7, FakeGraph::kProps}));

  const int before = fake_.calls;
  // A certificate from another CA; plaintext; TLS without a client certificate.
  RemoteGraph stranger(pool_with(files.Of("other", "stranger")));
  EXPECT_EQ(stranger.ObjGet(7).status().code(), StatusCode::kUnavailable);
  RemoteGraph plain(pool_with(TlsOptions{}));
  EXPECT_EQ(plain.ObjGet(7).status().code(), StatusCode::kUnavailable);
  {
    ConnectionOptions options;
    options.call_timeout_ms = 2000;
    auto anonymous = std::make_shared<apache::thrift::transport::TSSLSocketFactory>();
    anonymous->loadTrustedCertificates(files.Of("ca", "client").ca.c_str());
    anonymous->authenticate(true);
    options.tls = anonymous;
    RemoteGraph no_cert(
        std::make_shared<ConnectionPool>(Endpoint{"127.0.0.1", server_->port()}, options));
    EXPECT_EQ(no_cert.ObjGet(7).status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(fake_.calls, before) << "a refused client reached the handler";

  // The server keeps serving members, on their pooled and on new connections.
  EXPECT_TRUE(member.ObjGet(7).ok());
  RemoteGraph again(pool_with(files.Of("ca", "client")));
  EXPECT_EQ(*again.AssocCount(4, 2), 42);

  // Options must be whole and readable.
  EXPECT_EQ(TlsOptions({"", files.Of("ca", "client").cert, ""}).Validate().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeTlsFactory({"/nonexistent/ca.pem", files.Of("ca", "client").cert,
                            files.Of("ca", "client").key},
                           false)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zipg::rpc
