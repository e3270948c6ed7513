#include "rpc/tls.h"

#include <unistd.h>

#include <openssl/ssl.h>
#include <thrift/transport/TSSLSocket.h>

namespace zipg::rpc {

using apache::thrift::TException;
using apache::thrift::transport::AccessManager;
using apache::thrift::transport::SSLProtocol;
using apache::thrift::transport::TSSLSocketFactory;

namespace {

// The chain to the cluster's CA is verified by OpenSSL (authenticate(true)); that is the check.
class ClusterMembers final : public AccessManager {
 public:
  Decision verify(const sockaddr_storage&) noexcept override { return ALLOW; }
};

// Any TLS version from 1.2 on (Thrift's TLSv1_2 would allow exactly 1.2): the SSLTLS context with
// a floor.
class ClusterTlsFactory final : public TSSLSocketFactory {
 public:
  ClusterTlsFactory() : TSSLSocketFactory(SSLProtocol::SSLTLS) {
    SSL_CTX_set_min_proto_version(ctx_->get(), TLS1_2_VERSION);
  }
};

}  // namespace

Status TlsOptions::Validate() const {
  if (!enabled()) return Status::OK();
  if (ca.empty() || cert.empty() || key.empty()) {
    return Status::InvalidArgument("TLS needs all of --tls-ca, --tls-cert and --tls-key");
  }
  for (const std::string* f : {&ca, &cert, &key}) {
    if (access(f->c_str(), R_OK) != 0) {
      return Status::InvalidArgument("cannot read the TLS file " + *f);
    }
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<TSSLSocketFactory>> MakeTlsFactory(const TlsOptions& options,
                                                            bool server) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return Status::InvalidArgument("TLS is not configured");
  try {
    std::shared_ptr<TSSLSocketFactory> factory = std::make_shared<ClusterTlsFactory>();
    factory->server(server);
    factory->loadTrustedCertificates(options.ca.c_str());
    factory->loadCertificate(options.cert.c_str());
    factory->loadPrivateKey(options.key.c_str());
    factory->authenticate(true);  // the peer must present a certificate from our CA
    factory->access(std::make_shared<ClusterMembers>());
    return factory;
  } catch (const TException& e) {
    return Status::InvalidArgument(std::string("TLS set-up failed (") + options.cert + ", " +
                                   options.key + ", CA " + options.ca + "): " + e.what());
  }
}

}  // namespace zipg::rpc
