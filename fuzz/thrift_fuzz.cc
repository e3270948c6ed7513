// Fuzzes a Thrift service's processor and handler with raw bytes, as a connection would send
// them (rpc/server.h, ServeBytes: frames, size limits, the guard). Built three times, one per
// service, by ZIPG_FUZZ_SERVICE:
//   0 thrift_graph:    GraphService, GraphHandler over an embedded store, writes to a LogStore
//   1 thrift_shard:    ShardService, ShardHandler over a ServerGraph hosting every shard
//   2 thrift_logstore: LogStoreService, LogStoreHandler over a LogStore
// The store is the small fixed graph in 3 shards; nothing else runs (no etcd, no peers), so calls
// that need a peer fail UNAVAILABLE. Properties: the process survives every input; every reply is
// a result, a declared GraphError with a contract code other than INTERNAL, or an
// UNKNOWN_METHOD application exception (a handler that throws anything else is a bug).

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/fuzz_common.h"
#include "graph/graph.h"
#include "logstore/logstore.h"
#include "logstore/server.h"
#include "rpc/connection_pool.h"
#include "rpc/graph_handler.h"
#include "rpc/server.h"
#include "shard/server.h"
#include "shard/update_channel.h"
#include "zipg_rpc/LogStoreService.h"

#if !defined(ZIPG_FUZZ_SERVICE) || ZIPG_FUZZ_SERVICE < 0 || ZIPG_FUZZ_SERVICE > 2
#error "ZIPG_FUZZ_SERVICE must be 0 (GraphService), 1 (ShardService) or 2 (LogStoreService)"
#endif

namespace {

using apache::thrift::TApplicationException;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::protocol::TMessageType;
using apache::thrift::protocol::TType;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TMemoryBuffer;
using zipg::fuzz::Check;

constexpr int kMaxRequestBytes = 1 << 20;

std::shared_ptr<apache::thrift::TProcessor> processor;

// Everything the handler uses; never freed (the process ends with the fuzzer).
struct Backend {
  std::unique_ptr<zipg::Graph> graph;
  std::unique_ptr<zipg::shard::UpdateSender> sender;
  std::unique_ptr<zipg::logstore::LogStore> log;
  std::unique_ptr<zipg::rpc::PoolSet> pools;
  std::unique_ptr<zipg::shard::ServerGraph> server;
};

Backend* backend = nullptr;  // a global, so that LeakSanitizer sees it is still in use

zipg::StatusOr<std::string> Status() { return std::string("{}"); }

void Start() {
  const std::string dir = zipg::fuzz::TempDir("thrift-" + std::to_string(ZIPG_FUZZ_SERVICE));
  zipg::fuzz::CompressSmallGraph(dir + "/store", 3);
  backend = new Backend;
  Backend* b = backend;
  auto g = zipg::Graph::Open(dir + "/store");
  Check(g.ok(), "the small store opens");
  b->graph = std::move(*g);
  zipg::graph::TraversalLimits limits;
  limits.deadline = std::chrono::milliseconds(200);
  limits.memory_bytes = 1 << 20;
  b->graph->set_traversal_limits(limits);
  if (ZIPG_FUZZ_SERVICE == 1) {
    b->pools = std::make_unique<zipg::rpc::PoolSet>();
    auto s = zipg::shard::ServerGraph::Open(dir + "/store", {0, 1, 2}, {}, nullptr, b->pools.get(),
                                            dir + "/updates");
    Check(s.ok(), "the shard server's graph opens");
    b->server = std::move(*s);
    b->server->set_traversal_limits(limits);
    processor = std::make_shared<zipg::rpc::ShardServiceProcessor>(
        std::make_shared<zipg::shard::ShardHandler>(b->server.get(), Status));
    return;
  }
  // No replica is registered: a write is logged, then its update pointer fails UNAVAILABLE.
  b->sender = std::make_unique<zipg::shard::UpdateSender>(
      3, [](uint32_t) { return std::vector<zipg::shard::UpdateTarget>{}; });
  zipg::logstore::LogStoreOptions options;
  options.dir = dir + "/log";
  options.sync = false;
  options.memtable_bytes = 1 << 20;
  options.compaction_memory_bytes = 64 << 20;
  options.update_timeout_ms = 20;
  auto log = zipg::logstore::LogStore::Open(options, b->graph.get(), b->sender.get(),
                                            [](std::vector<int64_t>) {});
  Check(log.ok(), "the LogStore opens");
  b->log = std::move(*log);
  if (ZIPG_FUZZ_SERVICE == 0) {  // what an aggregator serves, over an embedded store
    processor = std::make_shared<zipg::rpc::GraphServiceProcessor>(
        std::make_shared<zipg::rpc::GraphHandler>(b->graph.get(), Status, b->log.get()));
  } else {
    processor = std::make_shared<zipg::rpc::LogStoreServiceProcessor>(
        std::make_shared<zipg::logstore::LogStoreHandler>(b->graph.get(), b->log.get(), Status));
  }
}

// Checks one reply message (see the file comment).
void CheckReply(TBinaryProtocol& in) {
  std::string name;
  TMessageType type;
  int32_t seq = 0;
  in.readMessageBegin(name, type, seq);
  if (type == apache::thrift::protocol::T_EXCEPTION) {
    TApplicationException e;
    e.read(&in);
    Check(e.getType() == TApplicationException::UNKNOWN_METHOD,
          "an application exception is only ever UNKNOWN_METHOD");
    return;
  }
  Check(type == apache::thrift::protocol::T_REPLY, "a reply is T_REPLY or T_EXCEPTION");
  std::string ignored;
  in.readStructBegin(ignored);
  for (;;) {
    TType field_type;
    int16_t id = 0;
    in.readFieldBegin(ignored, field_type, id);
    if (field_type == apache::thrift::protocol::T_STOP) break;
    if (id == 1 && field_type == apache::thrift::protocol::T_STRUCT) {
      zipg::rpc::GraphError error;
      error.read(&in);
      Check(error.code >= zipg::rpc::ErrorCode::INVALID_ARGUMENT &&
                error.code < zipg::rpc::ErrorCode::INTERNAL,
            "a GraphError carries a contract code other than INTERNAL");
    } else {
      in.skip(field_type);
    }
    in.readFieldEnd();
  }
}

// Seeds: calls of every method, written by the generated client.
std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  auto buffer = std::make_shared<TMemoryBuffer>();
  auto proto = std::make_shared<TBinaryProtocol>(std::make_shared<TFramedTransport>(buffer));
  zipg::rpc::LogStoreServiceClient c(proto);
  const std::map<std::string, std::string> red = {{"city", "red"}};
  const auto take = [&] {
    seeds.push_back(buffer->getBufferAsString());
    buffer->resetBuffer();
  };
  c.send_get_node_property(1, true, {}), take();
  c.send_get_node_property(2, false, {"name", "nope"}), take();
  c.send_get_node_ids(red), take();
  zipg::rpc::SearchRequest search;
  search.pattern = "re", search.any_property = true, search.match = "contains", search.limit = 5;
  c.send_search_node_ids(search), take();
  search.any_property = false, search.property = "city", search.match = "suffix";
  c.send_search_node_ids(search), take();
  c.send_get_neighbor_ids(0, true, 0, {}), take();
  c.send_get_neighbor_ids(1, false, 1, red), take();
  c.send_get_edge_record(0, 5), take();
  c.send_get_edge_range(0, 5, 100, 200), take();
  c.send_get_edge_data(0, 5, 3), take();
  c.send_obj_get(3), take();
  c.send_obj_add(1000, red), take();
  c.send_obj_update(1, {{"name", "x"}}), take();
  c.send_obj_delete(2), take();
  c.send_assoc_add(1, 1, 2, 77, {{"w", "9"}}), take();
  c.send_assoc_update(1, 1, 2, 78, {}), take();
  c.send_assoc_delete(0, 5, 100), take();
  c.send_assoc_range(0, 5, 10, 20), take();
  c.send_assoc_count(0, 5), take();
  c.send_assoc_get(0, 5, {100, 101, 5000}, 0, 1000), take();
  c.send_assoc_time_range(0, 5, 150, 250, 10), take();
  c.send_bfs(1, true, {}, 3, 100), take();
  c.send_rpq("(0|1)/2+/5?", false, {1, 2, 3}, 100), take();
  c.send_rpq("0/1", true, {}, 100), take();
  c.send_status(), take();
  c.send_snapshot(), take();
  c.send_admin_compact(), take();
  zipg::rpc::BatchedWrite w;
  w.kind = zipg::rpc::WriteKind::ASSOC_ADD, w.id = 3, w.type = 2, w.dst = 4, w.timestamp = 5;
  w.properties = red;
  c.send_write_batch({w, w}), take();
  c.send_filter_nodes({1, 2, 3, 4}, red), take();
  c.send_local_node_ids({0, 1, 2}, red, 3), take();
  c.send_local_search_node_ids({0, 1, 2}, search, 0), take();
  zipg::rpc::Transition t;
  t.from_state = 0, t.type = 1, t.to_state = 1;
  zipg::rpc::Visits v;
  v.tags = {0, 0}, v.nodes = {1, 2}, v.states = {0, 0};
  c.send_traverse_expand({t}, v, 100, 1000), take();
  c.send_traverse_sources({0, 1, 2}, true, 100, 1000, 3), take();
  c.send_admin_rebuild({0}, ""), take();
  c.send_rebuilt_version(0), take();
  c.send_rebuilt_chunk(0, 1, "manifest.json", 0, 100), take();
  c.send_store_chunk("MANIFEST", 0, 100), take();
  c.send_store_chunk("../shard-0000/nodes.idx", 0, 100), take();
  c.send_fragment(1, true, 0, {1}, 0), take();
  c.send_fragment_edges(1, 1, {1}, {2}, 0), take();
  zipg::rpc::FragmentAsk ask;
  ask.id = 1, ask.type = 1, ask.generations = {1}, ask.dsts = {2};
  c.send_fragment_edges_batch({ask}, 0), take();
  c.send_log_node_ids(red), take();
  c.send_log_search_node_ids(search), take();
  c.send_updates_since(0, 0, "shard-a", 0), take();
  // Two calls on one connection.
  c.send_obj_get(1), c.send_assoc_count(0, 5), take();
  // The call context (docs/limits.md, "Deadlines"): a deadline among the arguments, and one
  // already passed, as our clients write them.
  for (int64_t ms : {int64_t{250}, int64_t{0}}) {
    using apache::thrift::protocol::T_I64;
    proto->writeMessageBegin("assoc_count", apache::thrift::protocol::T_CALL, 0);
    proto->writeStructBegin("assoc_count_args");
    proto->writeFieldBegin("id", T_I64, 1);
    proto->writeI64(0);
    proto->writeFieldEnd();
    proto->writeFieldBegin("deadline_ms", T_I64, zipg::rpc::kDeadlineFieldId);
    proto->writeI64(ms);
    proto->writeFieldEnd();
    proto->writeFieldBegin("type", T_I64, 2);
    proto->writeI64(5);
    proto->writeFieldEnd();
    proto->writeFieldStop();
    proto->writeStructEnd();
    proto->writeMessageEnd();
    proto->getTransport()->writeEnd();
    proto->getTransport()->flush();
    take();
  }
  // A read at a snapshot (docs/consistency.md, "Snapshots"): the call context's field 32766, a
  // sequence the fuzzed server never reached (its wait is bounded by the deadline before it) and
  // a negative one.
  for (int64_t at : {int64_t{1} << 40, int64_t{-1}, int64_t{1}}) {
    using apache::thrift::protocol::T_I64;
    proto->writeMessageBegin("obj_get", apache::thrift::protocol::T_CALL, 0);
    proto->writeStructBegin("obj_get_args");
    proto->writeFieldBegin("id", T_I64, 1);
    proto->writeI64(1);
    proto->writeFieldEnd();
    proto->writeFieldBegin("deadline_ms", T_I64, zipg::rpc::kDeadlineFieldId);
    proto->writeI64(20);
    proto->writeFieldEnd();
    proto->writeFieldBegin("at", T_I64, zipg::rpc::kSnapshotFieldId);
    proto->writeI64(at);
    proto->writeFieldEnd();
    proto->writeFieldStop();
    proto->writeStructEnd();
    proto->writeMessageEnd();
    proto->getTransport()->writeEnd();
    proto->getTransport()->flush();
    take();
  }
  return seeds;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds(Seeds);
  Start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Thrift's TMemoryBuffer does pointer arithmetic on a null buffer when given none (UBSan
  // reports it); a connection never reads from an empty buffer.
  if (size == 0) return 0;
  const std::string replies = zipg::rpc::ServeBytes(processor, data, size, kMaxRequestBytes);
  if (replies.empty()) return 0;
  auto buffer = std::make_shared<TMemoryBuffer>(
      reinterpret_cast<uint8_t*>(const_cast<char*>(replies.data())),
      static_cast<uint32_t>(replies.size()), TMemoryBuffer::OBSERVE);
  auto framed = std::make_shared<TFramedTransport>(buffer);
  TBinaryProtocol in(framed);
  while (framed->peek()) {
    CheckReply(in);
    in.readMessageEnd();
  }
  return 0;
}
