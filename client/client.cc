#include "client/client.h"

#include <map>
#include <mutex>

namespace zipg {

namespace {
std::mutex tls_mu;
rpc::TlsOptions default_tls;  // guarded by tls_mu
}  // namespace

Status SetDefaultTls(const rpc::TlsOptions& tls) {
  ZIPG_RETURN_IF_ERROR(tls.Validate());
  std::lock_guard lock(tls_mu);
  default_tls = tls;
  return Status::OK();
}

StatusOr<std::shared_ptr<apache::thrift::transport::TSSLSocketFactory>> ClientTlsFactory(
    const rpc::TlsOptions& tls) {
  static std::map<std::string, std::shared_ptr<apache::thrift::transport::TSSLSocketFactory>>
      factories;  // guarded by tls_mu
  std::lock_guard lock(tls_mu);
  const rpc::TlsOptions& use = tls.enabled() ? tls : default_tls;
  if (!use.enabled()) return std::shared_ptr<apache::thrift::transport::TSSLSocketFactory>();
  auto& factory = factories[use.ca + "\n" + use.cert + "\n" + use.key];
  if (!factory) {
    ZIPG_ASSIGN_OR_RETURN(factory, rpc::MakeTlsFactory(use, /*server=*/false));
  }
  return factory;
}

StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                          const ClientOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(rpc::Endpoint endpoint, rpc::Endpoint::Parse(address));
  rpc::ConnectionOptions conn;
  conn.connect_timeout_ms = options.connect_timeout_ms;
  conn.call_timeout_ms = options.timeout_ms;
  ZIPG_ASSIGN_OR_RETURN(conn.tls, ClientTlsFactory(options.tls));
  auto client =
      std::make_unique<Client>(std::make_shared<rpc::ConnectionPool>(std::move(endpoint), conn));
  ZIPG_RETURN_IF_ERROR(client->ServerStatus().status());
  return client;
}

}  // namespace zipg
