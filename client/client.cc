#include "client/client.h"

namespace zipg {

StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                          const ClientOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(rpc::Endpoint endpoint, rpc::Endpoint::Parse(address));
  rpc::ConnectionOptions conn;
  conn.connect_timeout_ms = options.connect_timeout_ms;
  conn.call_timeout_ms = options.timeout_ms;
  auto client =
      std::make_unique<Client>(std::make_shared<rpc::ConnectionPool>(std::move(endpoint), conn));
  ZIPG_RETURN_IF_ERROR(client->ServerStatus().status());
  return client;
}

}  // namespace zipg
