// The C++ client library: a connection to a cluster through any of its aggregators, with every
// read operation of the contract (graph/api.h) plus the cluster status. Calls are synchronous;
// connections are pooled, so one Client may be shared by many threads.
//
// Errors are Status values with the contract's codes: UNAVAILABLE when the aggregator (or the
// shard server behind it) cannot be reached, DEADLINE_EXCEEDED when no answer comes within
// timeout_ms, RESOURCE_EXHAUSTED for requests over 16 MiB, and the server's own codes otherwise.
//
//   auto client = zipg::Connect("127.0.0.1:9000");
//   if (!client.ok()) ...;
//   auto node = (*client)->ObjGet(7);
//
// Snapshots (docs/consistency.md): Snapshot() returns a sequence covering every acknowledged
// write; the reads a thread makes inside a zipg::ReadAt::Scope (util/snapshot.h) answer as of it:
//   auto seq = (*client)->Snapshot();
//   { zipg::ReadAt::Scope at(*seq); auto then = (*client)->ObjGet(7); }
#pragma once

#include <memory>
#include <string>

#include "rpc/remote_graph.h"
#include "rpc/tls.h"
#include "util/snapshot.h"

namespace zipg {

struct ClientOptions {
  int connect_timeout_ms = 1000;
  int timeout_ms = 10000;  // per call
  rpc::TlsOptions tls;     // mutual TLS (rpc/tls.h); not enabled: the process default
};

// The TLS options of every Connect that names none (a command's --tls-* options). Validated.
Status SetDefaultTls(const rpc::TlsOptions& tls);
// The socket factory for `tls` (one per distinct option set in a process), or null if not enabled.
StatusOr<std::shared_ptr<apache::thrift::transport::TSSLSocketFactory>> ClientTlsFactory(
    const rpc::TlsOptions& tls);

using Client = rpc::RemoteGraph;

// Connects to the aggregator at "host:port" and checks that it answers (UNAVAILABLE if not).
StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                          const ClientOptions& options = {});

}  // namespace zipg
