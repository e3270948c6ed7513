// HttpServer: an HTTP/1.1 server (cpp-httplib) in background threads, for the metrics endpoint of
// every server and the HTTP/JSON API of aggregators (docs/operations.md). Every request goes to
// one handler, which does all the routing (http/api.h), so that the routing can be tested and
// fuzzed without sockets.
//
// Bounds (docs/limits.md): a body over max_body_bytes is answered 413 before the handler runs; a
// client slower than read_timeout_ms to send its request is cut off; at most max_connections
// connections are served at once, and further ones wait in the listen queue (as the Thrift
// server's do); an idle keep-alive connection is closed after keep_alive_timeout_s, and any after
// keep_alive_max requests.
//
// TLS: with tls_ca, tls_cert and tls_key, the server speaks only TLS and only to clients with a
// certificate signed by tls_ca: the cluster's mutual TLS (rpc/tls.h), with the same files.
//
// Thread-safety: Start/Stop from one thread; the handler is called concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "util/status.h"

namespace httplib {
class Server;
}

namespace zipg::http {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // decoded, without the query string
  std::map<std::string, std::string> params;   // decoded query parameters (the first of a name)
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                           // 0: any free port (see HttpServer::port())
  std::string tls_ca, tls_cert, tls_key;  // all three or none
  size_t max_body_bytes = size_t{16} << 20;
  int read_timeout_ms = 10000;
  int max_connections = 64;
  int keep_alive_max = 100;
  int keep_alive_timeout_s = 5;
};

class HttpServer {
 public:
  // Binds and starts serving; UNAVAILABLE if the port cannot be bound, INVALID_ARGUMENT if the
  // TLS files cannot be loaded.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpOptions& options,
                                                     HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Stops accepting, finishes the requests being served and joins the threads. Idempotent.
  void Stop();

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace zipg::http
