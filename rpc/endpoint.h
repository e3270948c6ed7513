// A server's network address as the cluster writes it: "host:port".
#pragma once

#include <string>

#include "util/status.h"

namespace zipg::rpc {

struct Endpoint {
  std::string host;
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
  // "host:port"; INVALID_ARGUMENT otherwise.
  static StatusOr<Endpoint> Parse(const std::string& text);
};

}  // namespace zipg::rpc
