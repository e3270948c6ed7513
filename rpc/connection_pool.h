// ConnectionPool: reusable Thrift connections to one server (framed transport, binary protocol),
// and the one place where transport failures become Status codes:
//   - cannot connect, connection reset/closed      -> UNAVAILABLE (retryable; names the server)
//   - no reply within the call timeout              -> DEADLINE_EXCEEDED
//   - GraphError thrown by the server               -> its code
//   - a reply that does not parse, or answers another call   -> UNAVAILABLE (the stream was
//     damaged on the way: calls are numbered per connection and each reply is checked)
//   - an application error from the server (a bug or a version mismatch) -> INTERNAL
// A connection that saw any transport error is closed, and so are the idle ones (the server has
// probably restarted); the next call connects again, so a server that comes back is used again
// without any action. An idempotent call that fails on a reused idle connection is retried once
// on a fresh one, so a restart costs no failed reads.
//
// Deadlines (docs/limits.md): a call gets the pool's call timeout, or less if the calling thread
// works for a call whose deadline is nearer (util/call_deadline.h); past that deadline it fails
// DEADLINE_EXCEEDED without being sent. Every call tells the server how long it has, as field
// kDeadlineFieldId of its arguments, so the server's own sub-calls stop when its caller does.
//
// Thread-safety: all methods may be called concurrently; each call has a connection to itself.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "rpc/endpoint.h"
#include "util/status.h"

namespace apache::thrift::transport {
class TSSLSocketFactory;
}

namespace zipg::rpc {

class LogStoreServiceClient;  // generated; has every method (LogStore > Shard > Graph service)

// The call context: an i64 field with this id, appended to the arguments of every call our clients
// send, holds the milliseconds the callee has to answer. Generated servers skip it as an unknown
// field; ours read it (rpc/server.cc). docs/limits.md, "Deadlines".
inline constexpr int16_t kDeadlineFieldId = 32767;
// A second field of the call context: the snapshot the call reads at (util/snapshot.h ReadAt; the
// contract's `at`), sent when the calling thread reads at one. docs/consistency.md.
inline constexpr int16_t kSnapshotFieldId = 32766;

struct ConnectionOptions {
  // Set: every connection is TLS with this factory (rpc/tls.h); null: plaintext.
  std::shared_ptr<apache::thrift::transport::TSSLSocketFactory> tls;
  int connect_timeout_ms = 1000;
  // Send and receive timeout of one call.
  int call_timeout_ms = 10000;
  // Idle connections kept for reuse.
  size_t max_idle = 64;
  // Largest reply accepted (replies such as get_node_ids can be large).
  int max_reply_bytes = 1 << 30;
};

class ConnectionPool {
 public:
  ConnectionPool(Endpoint endpoint, ConnectionOptions options = {});
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }

  // Runs `call` with a connected client and maps every failure to a Status (above).
  Status Call(const std::function<void(LogStoreServiceClient&)>& call, bool idempotent = true);

  // Closes the idle connections.
  void Clear();
  // Closes every connection, also those of calls in flight: they fail at once with UNAVAILABLE
  // instead of waiting for their timeout (the server is known to be gone, e.g. a deposed LogStore
  // leader that is paused).
  void Interrupt();

 private:
  struct Connection;
  // A new connection whose calls time out after `timeout_ms`.
  StatusOr<std::unique_ptr<Connection>> Connect(int timeout_ms);

  const Endpoint endpoint_;
  const ConnectionOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::set<int> busy_;  // sockets of the calls in flight (guarded by mu_)
};

}  // namespace zipg::rpc

namespace zipg::rpc {

// One ConnectionPool per endpoint, created on first use and kept for the life of the set.
//
// Thread-safety: Get may be called concurrently.
class PoolSet {
 public:
  explicit PoolSet(ConnectionOptions options = {}) : options_(options) {}
  std::shared_ptr<ConnectionPool> Get(const Endpoint& endpoint) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& pool = pools_[endpoint.ToString()];
    if (!pool) pool = std::make_shared<ConnectionPool>(endpoint, options_);
    return pool;
  }

 private:
  const ConnectionOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ConnectionPool>> pools_;
};

}  // namespace zipg::rpc
