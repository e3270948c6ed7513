// Mutual TLS for every Thrift connection of a cluster (docs/deploy.md, "TLS"): each process has
// a certificate and key signed by the cluster's CA, and accepts a peer only if the peer presents a
// certificate that chains to that CA. Names in certificates are not checked: membership in the
// cluster is what the CA's signature says (anyone with a certificate from this CA is a member).
//
// A process that uses TLS must ignore SIGPIPE (`zipg` does, in main): OpenSSL writes with
// write(2), and a peer that closes its connection would otherwise kill the process.
//
// Thread-safety: a factory is immutable once made and may be shared by any number of threads.
#pragma once

#include <memory>
#include <string>

#include "util/status.h"

namespace apache::thrift::transport {
class TSSLSocketFactory;
}

namespace zipg::rpc {

struct TlsOptions {
  std::string ca;    // PEM: the cluster's CA certificate
  std::string cert;  // PEM: this process's certificate
  std::string key;   // PEM: its private key
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
  // INVALID_ARGUMENT unless all three are given (or none) and readable.
  Status Validate() const;
};

// A socket factory for servers (server = true) or clients, requiring and verifying the peer's
// certificate, TLS 1.2 or later.
StatusOr<std::shared_ptr<apache::thrift::transport::TSSLSocketFactory>> MakeTlsFactory(
    const TlsOptions& options, bool server);

}  // namespace zipg::rpc
