#include "rpc/connection_pool.h"

#include <sys/socket.h>
#include <thrift/TApplicationException.h>
#include <thrift/TConfiguration.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/protocol/TProtocolDecorator.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSSLSocket.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>

#include <algorithm>
#include <limits>

#include "rpc/convert.h"
#include "rpc/framed_transport.h"
#include "util/call_deadline.h"
#include "util/snapshot.h"
#include "zipg_rpc/LogStoreService.h"

namespace zipg::rpc {

using apache::thrift::TApplicationException;
using apache::thrift::TConfiguration;
using apache::thrift::TException;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::protocol::TProtocol;
using apache::thrift::transport::TSocket;
using apache::thrift::transport::TTransport;
using apache::thrift::transport::TTransportException;

namespace {

// Numbers each call on a connection and checks that the reply read is that call's: same method,
// same sequence id. The generated clients send sequence id 0 and skip a reply whose method does
// not match, reading the next frame as the answer; so a frame repeated or left over on a pooled
// connection (a duplicating network) would answer the next call with another call's result (found
// by tests/netfault_test.py). A reply of an earlier call is skipped; any other reply out of step
// is CORRUPTED_DATA: the connection is dropped and the call fails UNAVAILABLE. Servers refuse a
// numbered request not above the connection's last (docs/serving.md, "Sequence ids").
// It also appends the call context (kDeadlineFieldId: the milliseconds the server has; and
// kSnapshotFieldId: the snapshot the calling thread reads at, if any) to each call's arguments.
class CheckedProtocol final : public apache::thrift::protocol::TProtocolDecorator {
 public:
  explicit CheckedProtocol(std::shared_ptr<TProtocol> inner)
      : TProtocolDecorator(std::move(inner)) {}

  // False once the numbers are used up (2^31 - 1 calls): the connection must not be reused.
  bool reusable() const { return seqid_ < std::numeric_limits<int32_t>::max(); }
  // What the next call sends as its deadline.
  void set_deadline_ms(int64_t ms) { deadline_ms_ = ms; }

  uint32_t writeMessageBegin_virt(const std::string& name,
                                  const apache::thrift::protocol::TMessageType type,
                                  const int32_t) override {
    ++seqid_;  // 1 first: 0 means "unnumbered" to the servers
    name_ = name;
    depth_ = 0;
    return TProtocolDecorator::writeMessageBegin_virt(name, type, seqid_);
  }
  uint32_t writeStructBegin_virt(const char* name) override {
    ++depth_;
    return TProtocolDecorator::writeStructBegin_virt(name);
  }
  uint32_t writeStructEnd_virt() override {
    --depth_;
    return TProtocolDecorator::writeStructEnd_virt();
  }
  // The end of the arguments (depth 1; a struct argument's own fields are deeper).
  uint32_t writeFieldStop_virt() override {
    uint32_t n = 0;
    if (depth_ == 1) {
      n += TProtocolDecorator::writeFieldBegin_virt("deadline_ms", apache::thrift::protocol::T_I64,
                                                    kDeadlineFieldId);
      n += TProtocolDecorator::writeI64_virt(deadline_ms_);
      n += TProtocolDecorator::writeFieldEnd_virt();
      if (const uint64_t at = ReadAt::Current(); at != 0) {
        n += TProtocolDecorator::writeFieldBegin_virt("at", apache::thrift::protocol::T_I64,
                                                      kSnapshotFieldId);
        n += TProtocolDecorator::writeI64_virt(static_cast<int64_t>(at));
        n += TProtocolDecorator::writeFieldEnd_virt();
      }
    }
    return n + TProtocolDecorator::writeFieldStop_virt();
  }

  uint32_t readMessageBegin_virt(std::string& name, apache::thrift::protocol::TMessageType& type,
                                 int32_t& seqid) override {
    for (;;) {
      const uint32_t n = TProtocolDecorator::readMessageBegin_virt(name, type, seqid);
      if (seqid > 0 && seqid < seqid_) {  // a repeated reply of an earlier call
        skip_virt(apache::thrift::protocol::T_STRUCT);
        readMessageEnd_virt();
        getTransport()->readEnd();
        continue;
      }
      if (seqid != seqid_ || name != name_) {
        throw TTransportException(TTransportException::CORRUPTED_DATA,
                                  "reply out of step: got " + name + " #" + std::to_string(seqid) +
                                      ", expected " + name_ + " #" + std::to_string(seqid_));
      }
      return n;
    }
  }

 private:
  int32_t seqid_ = 0;
  std::string name_;
  int depth_ = 0;
  int64_t deadline_ms_ = 0;
};

}  // namespace

struct ConnectionPool::Connection {
  std::shared_ptr<TSocket> socket;
  std::shared_ptr<TTransport> transport;
  std::shared_ptr<CheckedProtocol> protocol;
  std::unique_ptr<LogStoreServiceClient> client;
  int timeout_ms = 0;  // the socket's send and receive timeouts
};

ConnectionPool::ConnectionPool(Endpoint endpoint, ConnectionOptions options)
    : endpoint_(std::move(endpoint)), options_(options) {}

ConnectionPool::~ConnectionPool() = default;

StatusOr<std::unique_ptr<ConnectionPool::Connection>> ConnectionPool::Connect(int timeout_ms) {
  auto config =
      std::make_shared<TConfiguration>(options_.max_reply_bytes, options_.max_reply_bytes);
  std::shared_ptr<TSocket> socket;
  if (options_.tls) {
    socket = options_.tls->createSocket(endpoint_.host, endpoint_.port);
    socket->setConfiguration(config);
  } else {
    socket = std::make_shared<TSocket>(endpoint_.host, endpoint_.port, config);
  }
  socket->setConnTimeout(std::min(options_.connect_timeout_ms, timeout_ms));
  socket->setRecvTimeout(timeout_ms);
  socket->setSendTimeout(timeout_ms);
  socket->setNoDelay(true);
  auto conn = std::make_unique<Connection>();
  conn->socket = socket;
  conn->timeout_ms = timeout_ms;
  conn->transport = FramedOver(socket, config);
  try {
    conn->transport->open();
  } catch (const TException& e) {
    return Status::Unavailable("cannot connect to " + endpoint_.ToString() + ": " + e.what());
  }
  conn->protocol =
      std::make_shared<CheckedProtocol>(std::make_shared<TBinaryProtocol>(conn->transport));
  conn->client = std::make_unique<LogStoreServiceClient>(conn->protocol);
  return conn;
}

void ConnectionPool::Clear() {
  std::vector<std::unique_ptr<Connection>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle.swap(idle_);
  }
  for (auto& c : idle) {
    try {
      c->transport->close();
    } catch (const TException&) {
    }
  }
}

void ConnectionPool::Interrupt() {
  Clear();
  std::lock_guard<std::mutex> lock(mu_);
  // The calls' own threads close the sockets; shutdown only wakes them (a blocked read returns).
  for (int fd : busy_) ::shutdown(fd, SHUT_RDWR);
}

Status ConnectionPool::Call(const std::function<void(LogStoreServiceClient&)>& call,
                            bool idempotent) {
  for (int attempt = 0;; ++attempt) {
    // The time this call has: the pool's timeout, or what the caller's deadline leaves.
    int timeout_ms = options_.call_timeout_ms;
    bool callers = false;
    if (const auto deadline = CallDeadline::Current()) {
      const int64_t left = CallDeadline::RemainingMs(*deadline);
      if (left <= 0) {
        return Status::DeadlineExceeded("the caller's deadline passed before the call to " +
                                        endpoint_.ToString());
      }
      if (left < timeout_ms) {
        timeout_ms = static_cast<int>(left);
        callers = true;
      }
    }
    std::unique_ptr<Connection> conn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    const bool reused = conn != nullptr;
    if (!conn) {
      ZIPG_ASSIGN_OR_RETURN(conn, Connect(timeout_ms));
    }
    if (conn->timeout_ms != timeout_ms) {
      conn->socket->setRecvTimeout(timeout_ms);
      conn->socket->setSendTimeout(timeout_ms);
      conn->timeout_ms = timeout_ms;
    }
    conn->protocol->set_deadline_ms(timeout_ms);

    Status failure;
    bool keep = false;
    const int fd = conn->socket->getSocketFD();
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_.insert(fd);
    }
    struct Unbusy {
      ConnectionPool* pool;
      int fd;
      ~Unbusy() {
        std::lock_guard<std::mutex> lock(pool->mu_);
        pool->busy_.erase(fd);
      }
    } unbusy{this, fd};
    try {
      call(*conn->client);
      keep = true;
    } catch (const GraphError& e) {
      keep = true;  // a declared error leaves the connection in a clean state
      failure = FromError(e);
    } catch (const TTransportException& e) {
      Clear();
      if (e.getType() == TTransportException::TIMED_OUT) {
        return Status::DeadlineExceeded(endpoint_.ToString() + " did not answer within " +
                                        std::to_string(timeout_ms) + " ms" +
                                        (callers ? " (what its caller had left)" : ""));
      }
      if (reused && idempotent && attempt == 0) continue;  // stale pooled connection: retry once
      return Status::Unavailable("server " + endpoint_.ToString() + " failed: " + e.what());
    } catch (const TApplicationException& e) {
      return Status::Internal("server " + endpoint_.ToString() + " rejected the call: " + e.what());
    } catch (const apache::thrift::protocol::TProtocolException& e) {
      // A reply that does not parse: the stream was damaged on the way. The connection is dropped.
      return Status::Unavailable("unreadable reply from " + endpoint_.ToString() + ": " + e.what());
    } catch (const TException& e) {
      return Status::Internal("call to " + endpoint_.ToString() + " failed: " + e.what());
    }
    if (keep && conn->protocol->reusable()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.size() < options_.max_idle) idle_.push_back(std::move(conn));
    }
    return failure;
  }
}

}  // namespace zipg::rpc
