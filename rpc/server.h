// RpcServer: a Thrift server (framed transport, binary protocol) running in background threads:
// one thread per open connection (callers pool their connections, so these threads are reused),
// at most max_connections at once. Frames larger than max_request_bytes, and length fields
// inside a message larger than that, are refused by closing that connection; so is a request whose
// handling throws anything but a declared error. The server keeps running.
//
// Thread-safety: Start/Stop from one thread; the processor's handler must be thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "util/metrics.h"
#include "util/status.h"

namespace apache::thrift {
class TProcessor;
namespace server {
class TThreadedServer;
}
}  // namespace apache::thrift

namespace apache::thrift::transport {
class TSSLSocketFactory;
}

namespace zipg::rpc {

struct Traffic;  // rpc/framed_transport.h

struct ServerOptions {
  // Set: the server speaks only TLS, and only to clients with a certificate from the cluster's CA
  // (rpc/tls.h); null: plaintext.
  std::shared_ptr<apache::thrift::transport::TSSLSocketFactory> tls;
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see RpcServer::port())
  int max_request_bytes = 64 << 20;
  int64_t max_connections = 1024;
  // Called (from the server's thread) if serving fails after Start returned; the owner should shut
  // the process down, since the server no longer accepts connections.
  std::function<void(const std::string&)> on_failure;
  // If set, counts the calls served (for status documents and tests that count RPCs).
  std::shared_ptr<std::atomic<uint64_t>> calls;
  // If set, counts the bytes of the frames served (rpc/framed_transport.h).
  std::shared_ptr<Traffic> traffic;
};

class RpcServer {
 public:
  // Binds and starts serving; returns once the socket listens (or the bind failed: UNAVAILABLE).
  static StatusOr<std::unique_ptr<RpcServer>> Start(
      std::shared_ptr<apache::thrift::TProcessor> processor, const ServerOptions& options);
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  int port() const { return port_; }
  // Stops accepting, closes open connections and joins the threads. Idempotent.
  void Stop();

 private:
  RpcServer() = default;
  std::shared_ptr<apache::thrift::server::TThreadedServer> server_;
  std::thread thread_;
  std::shared_ptr<std::atomic<bool>> started_;
  std::shared_ptr<std::atomic<int64_t>> connections_;
  metrics::CollectorHandle collector_;  // with metrics on: connections and bytes
  int port_ = 0;
};

// Serves the requests in `data` as one connection of an RpcServer with `max_request_bytes` would
// (frames, size limits, the guard against unexpected exceptions), until the input ends or the
// server would close the connection; returns the bytes of the replies. For the fuzz targets of the
// processors (fuzz/thrift_fuzz.cc), which need no sockets.
std::string ServeBytes(std::shared_ptr<apache::thrift::TProcessor> processor, const uint8_t* data,
                       size_t size, int max_request_bytes);

}  // namespace zipg::rpc
