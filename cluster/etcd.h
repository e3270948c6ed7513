// EtcdClient: a small etcd v3 client over etcd's JSON gRPC gateway (POST http://HOST:PORT/v3/...),
// enough for cluster membership: leases, plain and create-if-absent puts, point and prefix reads,
// deletes, and a prefix watch. Keys and values are arbitrary bytes (base64 on the wire).
//
// Thread-safety: every method may be called concurrently from any number of threads. Unary calls
// borrow an HTTP handle from a mutex-protected pool (so connections are reused); each Watch owns
// its own connection for as long as it runs.
//
// Errors (never exceptions):
//   UNAVAILABLE        etcd cannot be reached (connection refused, reset, stream broken), an HTTP
//                      5xx, or etcd itself reports UNAVAILABLE (no leader, ...); the message names
//                      the endpoint and the operation. Callers may retry.
//   DEADLINE_EXCEEDED  a unary request took longer than the client's timeout.
//   NOT_FOUND          LeaseKeepAlive on an expired or unknown lease; Put with such a lease.
//   INVALID_ARGUMENT   arguments rejected here or by etcd (empty key, TTL <= 0, a watch start
//                      revision that has been compacted away).
//   INTERNAL           a reply that does not parse as what the gateway should send (the message
//                      holds an excerpt of the body).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace zipg::cluster {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: no lease
};

struct WatchEvent {
  enum class Type { kPut, kDelete } type = Type::kPut;
  // For kDelete only key and mod_revision (the revision of the delete) are set.
  KeyValue kv;
};

// A member of the etcd cluster (its member API, /v3/cluster/member/*).
struct EtcdMember {
  uint64_t id = 0;
  std::string name;  // empty for a member added but not started yet
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;  // empty until it has started
};

// Files for https endpoints: the CA that signed etcd's certificate, and this client's certificate
// and key (etcd --client-cert-auth). Empty: the system's CA store, no client certificate.
struct EtcdTls {
  std::string ca;
  std::string cert;
  std::string key;
};

class EtcdClient {
 public:
  // endpoints: one or more, comma-separated: "http://127.0.0.1:2379", "127.0.0.1:2379",
  // "https://a:2379,https://b:2379". A unary call goes to the current endpoint and, if that one
  // cannot answer (UNAVAILABLE, DEADLINE_EXCEEDED), to the next ones in turn; the one that
  // answered becomes current; while members answer but cannot serve (a leader election), the
  // round is repeated for up to 5 s. A watch that breaks moves to the next endpoint for the
  // caller's retry. timeout bounds each unary request per endpoint (connect included) and the
  // connect phase of a Watch.
  explicit EtcdClient(std::string endpoints,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The current endpoint, normalized: scheme included, no trailing '/'.
  std::string endpoint() const { return endpoints_[current_.load() % endpoints_.size()]; }
  // All of them, comma-separated.
  std::string endpoints() const;
  // Call before any request.
  void SetTls(EtcdTls tls);

  // A new lease of ttl_seconds (> 0). etcd raises a TTL below its minimum (1.5 election timeouts
  // rounded up to whole seconds: 2 s with default settings) to that minimum; *granted_ttl (if
  // non-null) receives the TTL in force.
  StatusOr<int64_t> LeaseGrant(int64_t ttl_seconds, int64_t* granted_ttl = nullptr);
  // One refresh of the lease's TTL. NOT_FOUND if the lease has expired or is unknown.
  Status LeaseKeepAlive(int64_t lease);
  // Revokes the lease and deletes its keys. OK also if the lease is already gone.
  Status LeaseRevoke(int64_t lease);

  Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Creates key only if it does not exist (txn on create_revision == 0); true if created.
  StatusOr<bool> PutIfAbsent(const std::string& key, const std::string& value, int64_t lease = 0);
  // Puts key only while guard_key exists with create revision guard_revision (txn); true if put.
  // A leader writes its records this way: once its leadership key is gone or re-created by
  // another candidate, its writes are refused.
  StatusOr<bool> PutIfGuard(const std::string& key, const std::string& value,
                            const std::string& guard_key, int64_t guard_revision);
  StatusOr<std::optional<KeyValue>> Get(const std::string& key);
  // Every key starting with prefix (all keys if empty), in key (byte) order; *revision (if
  // non-null) = the store revision of the read, a good start_revision - 1 for a following Watch.
  StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix, int64_t* revision = nullptr);
  // OK also if the key does not exist.
  Status Delete(const std::string& key);
  Status DeletePrefix(const std::string& prefix);

  // The cluster's members, in etcd's order.
  StatusOr<std::vector<EtcdMember>> MemberList();
  // Adds a member that will listen for peers on `peer_urls`; it is then started with
  // --initial-cluster-state existing and an --initial-cluster of every member. Until it has
  // started, the quorum counts it: add one member at a time. Returns the new member (no name yet).
  StatusOr<EtcdMember> MemberAdd(const std::vector<std::string>& peer_urls);
  // Removes member `id`; a running member that is removed stops. NOT_FOUND if there is none.
  Status MemberRemove(uint64_t id);

  // Streams changes under prefix from start_revision (0 = from now on) and calls on_events with
  // each batch, in revision order, on the calling thread. Returns OK when `cancel` becomes true
  // (checked at least every 100 ms even when nothing happens) or when on_events returns false;
  // UNAVAILABLE if the stream cannot be opened or breaks (callers retry from the last revision
  // seen + 1); INVALID_ARGUMENT if start_revision has been compacted (re-read with GetPrefix).
  Status Watch(const std::string& prefix, int64_t start_revision,
               const std::function<bool(const std::vector<WatchEvent>&)>& on_events,
               const std::atomic<bool>& cancel);

 private:
  class HandlePool;  // idle libcurl easy handles, guarded by its own mutex

  // POSTs a JSON body to a gateway path (op names the call in error messages). The body of a 200
  // reply, or the error mapped as described at the top of this file.
  StatusOr<std::string> Post(const char* op, const char* path, const std::string& body);
  // *answered: an HTTP reply came back (the member is up, even if it could not serve the call).
  StatusOr<std::string> PostTo(const std::string& endpoint, const char* op, const char* path,
                               const std::string& body, bool* answered);
  Status WatchAt(const std::string& endpoint, const std::string& prefix, int64_t start_revision,
                 const std::function<bool(const std::vector<WatchEvent>&)>& on_events,
                 const std::atomic<bool>& cancel);

  std::vector<std::string> endpoints_;
  std::atomic<size_t> current_{0};
  EtcdTls tls_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<HandlePool> pool_;
};

}  // namespace zipg::cluster
