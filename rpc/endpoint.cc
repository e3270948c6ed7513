#include "rpc/endpoint.h"

namespace zipg::rpc {

StatusOr<Endpoint> Endpoint::Parse(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument("'" + text + "' is not HOST:PORT");
  }
  Endpoint e;
  e.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return Status::InvalidArgument("'" + text + "': port must be 1..65535");
  }
  e.port = std::stoi(port);
  return e;
}

}  // namespace zipg::rpc
