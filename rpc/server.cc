#include "rpc/server.h"

#include <thrift/TConfiguration.h>
#include <thrift/TProcessor.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/protocol/TProtocolDecorator.h>
#include <thrift/server/TThreadedServer.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSSLServerSocket.h>
#include <thrift/transport/TServerSocket.h>
#include <thrift/transport/TTransportException.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <map>
#include <mutex>

#include "rpc/connection_pool.h"
#include "rpc/convert.h"
#include "rpc/framed_transport.h"
#include "util/call_deadline.h"
#include "util/metrics.h"
#include "util/snapshot.h"

namespace zipg::rpc {

using apache::thrift::TConfiguration;
using apache::thrift::TException;
using apache::thrift::TProcessor;
using apache::thrift::protocol::TBinaryProtocolFactory;
using apache::thrift::server::TServerEventHandler;
using apache::thrift::server::TThreadedServer;
using apache::thrift::transport::TServerSocket;
using apache::thrift::transport::TSSLServerSocket;
using apache::thrift::transport::TTransport;
using apache::thrift::transport::TTransportException;
using apache::thrift::transport::TTransportFactory;

namespace {

// Framed transports with our frame limit (the stock factory takes no configuration).
class FramedFactory : public TTransportFactory {
 public:
  FramedFactory(int max_bytes, std::shared_ptr<Traffic> traffic)
      : config_(std::make_shared<TConfiguration>(max_bytes, max_bytes)),
        traffic_(std::move(traffic)) {}
  std::shared_ptr<TTransport> getTransport(std::shared_ptr<TTransport> trans) override {
    auto t = FramedOver(trans, config_);
    if (traffic_) t->CountInto(traffic_);
    return t;
  }

 private:
  std::shared_ptr<TConfiguration> config_;
  std::shared_ptr<Traffic> traffic_;
};

// Length fields inside a message are checked against these limits before anything is allocated:
// without them a 40-byte message claiming a 2^31-element list makes the server allocate 16 GiB.
std::shared_ptr<TBinaryProtocolFactory> LimitedProtocol(int max_request_bytes) {
  // A string's bytes and a container's elements (>= 1 byte each) all lie inside one frame.
  return std::make_shared<TBinaryProtocolFactory>(max_request_bytes, max_request_bytes,
                                                  /*strict_read=*/false, /*strict_write=*/true);
}

// Counts a call once its arguments are read, before the handler runs and so before the reply
// leaves: a client that has its answer sees the call counted. With metrics on, also records the
// call per operation: its code (OK, or the error ToError made) and its time from the start of
// reading its arguments to the end of writing the reply (docs/operations.md, "Metrics").
class CallObserver : public apache::thrift::TProcessorEventHandler {
 public:
  explicit CallObserver(std::shared_ptr<std::atomic<uint64_t>> calls) : calls_(std::move(calls)) {}

  void* getContext(const char* fn_name, void*) override {
    if (!metrics::Enabled()) return nullptr;
    TakeErrorCode();  // from before this call
    undeclared_error = false;
    call_start = std::chrono::steady_clock::now();
    return &call_start;
  }
  // An exception the service does not declare: the client gets a TApplicationException.
  void handlerError(void* ctx, const char*) override { undeclared_error = ctx != nullptr; }
  void postRead(void*, const char*, uint32_t) override {
    if (calls_) calls_->fetch_add(1, std::memory_order_relaxed);
  }
  void freeContext(void* ctx, const char* fn_name) override {
    if (ctx == nullptr) return;
    const double seconds = metrics::SecondsSince(call_start);
    const char* code = TakeErrorCode();
    if (undeclared_error) code = "INTERNAL";
    OpStats& m = ForOp(fn_name);
    m.latency.Observe(seconds);
    if (code == nullptr) {
      m.ok.fetch_add(1, std::memory_order_relaxed);
    } else {
      static auto& errors = metrics::Counters("zipg_rpc_calls_total", kCallsHelp);
      errors.Add({{"op", m.op}, {"code", code}}).Increment();
    }
  }

 private:
  static constexpr const char* kCallsHelp = "Thrift calls served, by operation and code.";
  // The calls of one operation that answered OK, and the time of all of them: relaxed atomics
  // (metrics::AtomicHistogram), since every call of the process records here. Errors, rarer, go
  // to a labelled counter of the same family.
  struct OpStats {
    explicit OpStats(std::string name) : op(std::move(name)) {}
    const std::string op;
    metrics::AtomicHistogram latency{metrics::LatencyBuckets()};
    std::atomic<uint64_t> ok{0};
  };
  // Every operation's stats in the process (never freed: threads cache pointers to them), and
  // the collector that exports them.
  struct AllOps {
    std::mutex mu;
    std::map<std::string, std::unique_ptr<OpStats>> ops;
    metrics::CollectorHandle collector;
  };
  static AllOps& All() {
    static auto* all = [] {
      auto* a = new AllOps();
      a->collector = metrics::AddCollector([a](metrics::Samples* out) {
        std::lock_guard lock(a->mu);
        for (const auto& [op, stats] : a->ops) {
          out->Counter("zipg_rpc_calls_total", kCallsHelp,
                       static_cast<double>(stats->ok.load(std::memory_order_relaxed)),
                       {{"op", op}, {"code", "OK"}});
          out->Histogram("zipg_rpc_call_duration_seconds",
                         "Time of Thrift calls served, from reading the request to the reply.",
                         stats->latency, {{"op", op}});
        }
      });
      return a;
    }();
    return *all;
  }
  // This thread's stats per operation, so that a call takes no lock to find them.
  static OpStats& ForOp(const char* fn_name) {
    thread_local std::vector<std::pair<const char*, OpStats*>> cache;  // by the literal's address
    for (const auto& [name, stats] : cache) {
      if (name == fn_name) return *stats;
    }
    std::string op = fn_name;
    if (const size_t dot = op.rfind('.'); dot != std::string::npos) op.erase(0, dot + 1);
    AllOps& all = All();
    std::lock_guard lock(all.mu);
    auto& slot = all.ops[op];
    if (!slot) slot = std::make_unique<OpStats>(op);
    cache.emplace_back(fn_name, slot.get());
    return *slot;
  }

  static thread_local std::chrono::steady_clock::time_point call_start;
  static thread_local bool undeclared_error;
  std::shared_ptr<std::atomic<uint64_t>> calls_;
};
thread_local std::chrono::steady_clock::time_point CallObserver::call_start;
thread_local bool CallObserver::undeclared_error = false;

// Refuses a request whose sequence id is not above the connection's last one (0: unnumbered, as
// Python and plain Thrift clients send): a request frame repeated on the way would otherwise run
// twice, a write too. Our C++ clients number their calls (rpc/connection_pool.cc). The connection
// is closed.
//
// It also reads the call context: the arguments' field kDeadlineFieldId, the milliseconds the
// client gives the call, becomes the thread's call deadline (util/call_deadline.h) while the call
// runs. A call without one has none: its sub-calls get the server's own call timeout. The field
// kSnapshotFieldId, if present, becomes the thread's snapshot (util/snapshot.h ReadAt).
class SequencedInput final : public apache::thrift::protocol::TProtocolDecorator {
 public:
  explicit SequencedInput(std::shared_ptr<apache::thrift::protocol::TProtocol> inner)
      : TProtocolDecorator(std::move(inner)) {}
  uint32_t readMessageBegin_virt(std::string& name, apache::thrift::protocol::TMessageType& type,
                                 int32_t& seqid) override {
    const uint32_t n = TProtocolDecorator::readMessageBegin_virt(name, type, seqid);
    depth_ = 0;
    CallDeadline::Set(std::nullopt);
    ReadAt::Set(0);
    if (seqid != 0) {
      if (seqid <= last_) {
        throw TTransportException(TTransportException::CORRUPTED_DATA,
                                  "request #" + std::to_string(seqid) + " after #" +
                                      std::to_string(last_) + ": a repeated frame");
      }
      last_ = seqid;
    }
    return n;
  }
  uint32_t readStructBegin_virt(std::string& name) override {
    ++depth_;
    return TProtocolDecorator::readStructBegin_virt(name);
  }
  uint32_t readStructEnd_virt() override {
    --depth_;
    return TProtocolDecorator::readStructEnd_virt();
  }
  uint32_t readFieldBegin_virt(std::string& name, apache::thrift::protocol::TType& type,
                               int16_t& id) override {
    uint32_t n = TProtocolDecorator::readFieldBegin_virt(name, type, id);
    if (depth_ == 1 && id == kDeadlineFieldId && type == apache::thrift::protocol::T_I64) {
      int64_t ms = 0;
      n += TProtocolDecorator::readI64_virt(ms);
      n += TProtocolDecorator::readFieldEnd_virt();
      // At most a day (the longest timeout our tools take); 0 or less: already passed, so
      // sub-calls fail at once.
      ms = std::clamp<int64_t>(ms, 0, int64_t{86400} * 1000);
      CallDeadline::Set(CallDeadline::Clock::now() + std::chrono::milliseconds(ms));
      n += TProtocolDecorator::readFieldBegin_virt(name, type,
                                                   id);  // the next field, for the caller
    }
    if (depth_ == 1 && id == kSnapshotFieldId && type == apache::thrift::protocol::T_I64) {
      int64_t at = 0;
      n += TProtocolDecorator::readI64_virt(at);
      n += TProtocolDecorator::readFieldEnd_virt();
      // Negative: not a snapshot; the read checks it (INVALID_ARGUMENT).
      ReadAt::Set(static_cast<uint64_t>(at));
      n += TProtocolDecorator::readFieldBegin_virt(name, type, id);
    }
    return n;
  }

 private:
  int32_t last_ = 0;
  int depth_ = 0;
};

// One per connection: runs the generated processor over SequencedInput and turns any exception
// that escapes it (e.g. bad_alloc while reading arguments) into closing that connection; Thrift
// would otherwise terminate the process.
//
// Its wrapper of the connection's input protocol is made with it, on the server's thread (from the
// connection's protocol, which every request of the connection is read from), and only used on
// the connection's thread: the processor is destroyed on the server's thread after the connection
// ends, and libthrift (not instrumented) hands it back through reference counts ThreadSanitizer
// cannot see, so a member written per call would be reported as a race with that destruction.
class GuardedProcessor : public TProcessor {
 public:
  GuardedProcessor(std::shared_ptr<TProcessor> inner,
                   std::shared_ptr<apache::thrift::protocol::TProtocol> in)
      : inner_(std::move(inner)), raw_in_(in), in_(std::make_shared<SequencedInput>(in)) {}
  bool process(std::shared_ptr<apache::thrift::protocol::TProtocol> in,
               std::shared_ptr<apache::thrift::protocol::TProtocol> out,
               void* connection_context) override {
    // Always the connection's protocol; a call on another one gets a wrapper of its own.
    const std::shared_ptr<apache::thrift::protocol::TProtocol> input =
        in == raw_in_ ? in_ : std::make_shared<SequencedInput>(in);
    // The call's deadline, read with its arguments, lasts until it has answered.
    CallDeadline::Scope deadline(std::nullopt);
    try {
      return inner_->process(input, out, connection_context);
    } catch (const apache::thrift::TException&) {
      throw;  // the server closes the connection and keeps running
    } catch (const std::exception& e) {
      std::cerr << "rpc: closing a connection after an unexpected error: " << e.what() << "\n";
      return false;
    }
  }

 private:
  const std::shared_ptr<TProcessor> inner_;
  const std::shared_ptr<apache::thrift::protocol::TProtocol> raw_in_, in_;
};

// A GuardedProcessor per connection, over one shared generated processor.
class GuardedFactory : public apache::thrift::TProcessorFactory {
 public:
  GuardedFactory(std::shared_ptr<TProcessor> inner, std::shared_ptr<std::atomic<uint64_t>> calls)
      : inner_(std::move(inner)) {
    inner_->setEventHandler(std::make_shared<CallObserver>(std::move(calls)));
  }
  std::shared_ptr<TProcessor> getProcessor(const apache::thrift::TConnectionInfo& info) override {
    return std::make_shared<GuardedProcessor>(inner_, info.input);
  }

 private:
  std::shared_ptr<TProcessor> inner_;
};

// Reports when the socket is listening, and counts the open connections.
class ListenSignal : public TServerEventHandler {
 public:
  explicit ListenSignal(std::shared_ptr<std::atomic<int64_t>> connections)
      : connections_(std::move(connections)) {}
  void preServe() override { listening_.set_value(); }
  void* createContext(std::shared_ptr<apache::thrift::protocol::TProtocol>,
                      std::shared_ptr<apache::thrift::protocol::TProtocol>) override {
    connections_->fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  void deleteContext(void*, std::shared_ptr<apache::thrift::protocol::TProtocol>,
                     std::shared_ptr<apache::thrift::protocol::TProtocol>) override {
    connections_->fetch_sub(1, std::memory_order_relaxed);
  }
  std::future<void> Future() { return listening_.get_future(); }

 private:
  std::promise<void> listening_;
  std::shared_ptr<std::atomic<int64_t>> connections_;
};

}  // namespace

StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(std::shared_ptr<TProcessor> processor,
                                                      const ServerOptions& options) {
  std::shared_ptr<TServerSocket> socket =
      options.tls ? std::make_shared<TSSLServerSocket>(options.host, options.port, options.tls)
                  : std::make_shared<TServerSocket>(options.host, options.port);
  std::unique_ptr<RpcServer> s(new RpcServer());
  s->server_ = std::make_shared<TThreadedServer>(
      std::make_shared<GuardedFactory>(std::move(processor), options.calls), socket,
      std::make_shared<FramedFactory>(options.max_request_bytes, options.traffic),
      LimitedProtocol(options.max_request_bytes));
  s->server_->setConcurrentClientLimit(options.max_connections);
  s->connections_ = std::make_shared<std::atomic<int64_t>>(0);
  auto signal = std::make_shared<ListenSignal>(s->connections_);
  auto listening = signal->Future();
  s->server_->setServerEventHandler(signal);
  auto failure = std::make_shared<std::promise<std::string>>();
  auto failed = failure->get_future();
  auto server = s->server_;
  auto started = std::make_shared<std::atomic<bool>>(false);
  s->started_ = started;
  auto on_failure = options.on_failure;
  s->thread_ = std::thread([server, failure, started, on_failure] {
    try {
      server->serve();
    } catch (const std::exception& e) {
      if (!started->load()) {
        failure->set_value(e.what());
      } else if (on_failure) {
        // The accept loop died after start-up (e.g. no thread could be created): the server
        // would keep its registration while accepting nothing, so its owner must stop it.
        on_failure(std::string("the server stopped accepting connections: ") + e.what());
      }
    }
  });
  // Whichever comes first: listening, or serve() failing (e.g. the port is taken).
  for (;;) {
    if (listening.wait_for(std::chrono::milliseconds(5)) == std::future_status::ready) break;
    if (failed.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) {
      s->thread_.join();
      return Status::Unavailable("cannot listen on " + options.host + ":" +
                                 std::to_string(options.port) + ": " + failed.get());
    }
  }
  s->port_ = socket->getPort();
  started->store(true);
  if (metrics::Enabled()) {
    s->collector_ = metrics::AddCollector(
        [connections = s->connections_, traffic = options.traffic](metrics::Samples* out) {
          out->Gauge("zipg_rpc_connections", "Open Thrift connections.", connections->load());
          if (traffic) {
            out->Counter("zipg_rpc_received_bytes_total", "Bytes of Thrift frames received.",
                         static_cast<double>(traffic->bytes_in.load()));
            out->Counter("zipg_rpc_sent_bytes_total", "Bytes of Thrift frames sent.",
                         static_cast<double>(traffic->bytes_out.load()));
          }
        });
  }
  return s;
}

void RpcServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

RpcServer::~RpcServer() { Stop(); }

std::string ServeBytes(std::shared_ptr<TProcessor> processor, const uint8_t* data, size_t size,
                       int max_request_bytes) {
  using apache::thrift::transport::TMemoryBuffer;
  auto in_buf = std::make_shared<TMemoryBuffer>(
      const_cast<uint8_t*>(data), static_cast<uint32_t>(size), TMemoryBuffer::OBSERVE);
  auto out_buf = std::make_shared<TMemoryBuffer>();
  FramedFactory framed(max_request_bytes, nullptr);
  auto in = framed.getTransport(in_buf), out = framed.getTransport(out_buf);
  auto protocols = LimitedProtocol(max_request_bytes);
  auto in_proto = protocols->getProtocol(in), out_proto = protocols->getProtocol(out);
  GuardedProcessor guarded(std::move(processor), in_proto);
  // As Thrift's TConnectedClient::run: stop at the end of the input or at any exception.
  try {
    while (guarded.process(in_proto, out_proto, nullptr) && in->peek()) {
    }
  } catch (const TException&) {
  }
  return out_buf->getBufferAsString();
}

}  // namespace zipg::rpc
