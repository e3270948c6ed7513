// Request/reply frames over plain TCP connections, for the cluster's internal channels that are
// not Thrift calls: the update channel (shard/update_channel.h) and log shipping
// (logstore/ship.h). docs/write-pipeline.md says why they left ZeroMQ: its background I/O thread
// cost two thread hand-offs and an eventfd signal per message on each side.
//
// On the wire a frame is u32 length (little-endian) | length bytes. A client writes a request on
// its own thread and reads the reply on its own thread; a server runs one thread per connection
// that reads a request, calls the handler and writes the handler's reply (a handler may answer
// nothing: a one-way frame). With TLS (rpc/tls.h) both ends are the cluster's mutual TLS, the
// same certificates as its Thrift connections: a peer without a certificate of the cluster's CA
// gets no frame through.
//
// Thread-safety: a FrameConnection is used by one thread at a time. A FrameServer's handler is
// called from its connection threads, concurrently when several peers send at once: a handler
// that needs one request at a time serializes itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "rpc/endpoint.h"
#include "rpc/tls.h"
#include "util/status.h"

namespace apache::thrift::transport {
class TSocket;
class TSSLSocketFactory;
}  // namespace apache::thrift::transport

namespace zipg::rpc {

// The largest frame either end accepts (a re-seed's file chunk is the largest sent).
constexpr uint32_t kMaxFrameBytes = 256u << 20;

// A random id for a request sender: its replies carry it, so that a restarted sender never takes
// an answer meant for its predecessor.
uint64_t RandomSenderId();

// How the cluster's internal frame channels are secured: plaintext (the default), or mutual TLS
// with the cluster's certificates. Cheap to copy; made once per process.
class FrameSecurity {
 public:
  FrameSecurity() = default;
  // Plaintext when `tls` is not enabled; INVALID_ARGUMENT when its files do not make a TLS set-up.
  static StatusOr<FrameSecurity> Make(const TlsOptions& tls);
  bool tls() const { return client_ != nullptr; }

 private:
  friend class FrameConnection;
  friend class FrameServer;
  std::shared_ptr<apache::thrift::transport::TSSLSocketFactory> client_;
  std::shared_ptr<apache::thrift::transport::TSSLSocketFactory> server_;
};

// Reads length-prefixed frames from a socket through a read-ahead buffer: a small frame's length
// and body come from one read, and bytes past a frame are kept for the next one. Reads may stop
// short or time out: what was read so far is kept for the next Read. One per connection.
class FrameReader {
 public:
  enum class Step { kMore, kFrame, kClosed, kTooLarge };
  // A whole frame into *frame from what is buffered, else one read from `socket` (its timeouts and
  // errors are thrown, as TSocket throws them) and then a whole frame if that completed one.
  Step Read(apache::thrift::transport::TSocket& socket, std::string* frame);

 private:
  // A whole frame from the buffer (kFrame), a length over the limit (kTooLarge), or kMore.
  Step Take(std::string* frame);

  std::string buffer_;  // bytes read and not yet taken start at pos_
  size_t pos_ = 0;
};

class FrameConnection {
 public:
  // Connects to `endpoint` ("tcp://host:port" or "host:port") within timeout_ms.
  static StatusOr<std::unique_ptr<FrameConnection>> Connect(const std::string& endpoint,
                                                            const FrameSecurity& security,
                                                            int timeout_ms);
  ~FrameConnection();

  // Writes one frame; UNAVAILABLE when the peer is gone or takes more than timeout_ms to accept
  // it (the connection is then unusable).
  Status Send(std::string_view frame, int timeout_ms);
  // Reads one frame, waiting until `deadline`: UNAVAILABLE after it, or when the peer closed or
  // sent a frame over kMaxFrameBytes (the connection is then unusable).
  Status Receive(std::string* frame, std::chrono::steady_clock::time_point deadline);

 private:
  FrameConnection() = default;

  std::shared_ptr<apache::thrift::transport::TSocket> socket_;
  std::string endpoint_;
  FrameReader reader_;
  int send_timeout_ms_ = 0;  // what the socket has now
  int recv_timeout_ms_ = 0;  // what the socket has now
};

// Sends `frame` on *connection, connecting it first when it is null. A kept connection whose
// peer went away (a restart) is replaced at once, once. On failure *connection is null.
Status SendReconnecting(std::unique_ptr<FrameConnection>* connection, const std::string& endpoint,
                        const FrameSecurity& security, std::string_view frame, int timeout_ms);

class FrameServer {
 public:
  // Returns the reply frame, or nothing for a one-way request.
  using Handler = std::function<std::optional<std::string>(std::string_view request)>;

  // Listens on host:port (port 0: any free port) and serves every connection with `handler`.
  // `what` names the endpoint in errors ("the update socket").
  static StatusOr<std::unique_ptr<FrameServer>> Start(const std::string& host, int port,
                                                      const FrameSecurity& security,
                                                      Handler handler, const std::string& what);
  // Stops accepting, closes every connection and joins their threads.
  ~FrameServer();

  // "tcp://host:port", the port the server got.
  const std::string& endpoint() const { return endpoint_; }
  // Connections that failed the TLS handshake (a peer without a certificate of the cluster's CA).
  uint64_t refused_clients() const { return refused_clients_.load(); }

 private:
  struct Connection {
    std::shared_ptr<apache::thrift::transport::TSocket> socket;  // a TSSLSocket with TLS
    std::thread thread;
    std::atomic<bool> done{false};
  };

  FrameServer() = default;
  void Accept();
  void Serve(Connection* connection);

  Handler handler_;
  std::string endpoint_;
  std::string what_;
  int listen_fd_ = -1;
  std::shared_ptr<apache::thrift::transport::TSSLSocketFactory> tls_;  // null: plaintext
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_clients_{0};
  std::mutex mu_;
  std::list<Connection> connections_;  // guarded by mu_
  std::thread accept_thread_;
};

}  // namespace zipg::rpc
