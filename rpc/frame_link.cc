#include "rpc/frame_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thrift/transport/TSSLSocket.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "util/coding.h"

namespace zipg::rpc {

using apache::thrift::TException;
using apache::thrift::transport::TSocket;
using apache::thrift::transport::TSSLException;
using apache::thrift::transport::TSSLSocketFactory;
using apache::thrift::transport::TTransportException;

namespace {

// How long a server's connection thread blocks in a read before it looks at stopping_.
constexpr int kServerPollMs = 200;

// "tcp://host:port" or "host:port" -> (host, port).
bool SplitEndpoint(const std::string& endpoint, std::string* host, int* port) {
  std::string rest = endpoint;
  if (rest.rfind("tcp://", 0) == 0) rest = rest.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = rest.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    size_t used = 0;
    *port = std::stoi(rest.substr(colon + 1), &used);
    return used == rest.size() - colon - 1 && *port > 0 && *port < 65536;
  } catch (const std::exception&) {
    return false;
  }
}

int RemainingMs(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// The frame's length prefix and body as one write.
std::string Framed(std::string_view frame) {
  std::string out;
  out.reserve(4 + frame.size());
  PutFixed32(&out, static_cast<uint32_t>(frame.size()));
  out.append(frame.data(), frame.size());
  return out;
}

}  // namespace

uint64_t RandomSenderId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

StatusOr<FrameSecurity> FrameSecurity::Make(const TlsOptions& tls) {
  FrameSecurity security;
  if (!tls.enabled()) return security;
  ZIPG_ASSIGN_OR_RETURN(security.client_, MakeTlsFactory(tls, /*server=*/false));
  ZIPG_ASSIGN_OR_RETURN(security.server_, MakeTlsFactory(tls, /*server=*/true));
  return security;
}

// ---- FrameConnection ----

StatusOr<std::unique_ptr<FrameConnection>> FrameConnection::Connect(const std::string& endpoint,
                                                                    const FrameSecurity& security,
                                                                    int timeout_ms) {
  std::string host;
  int port = 0;
  if (!SplitEndpoint(endpoint, &host, &port)) {
    return Status::InvalidArgument("not a host:port endpoint: " + endpoint);
  }
  std::unique_ptr<FrameConnection> c(new FrameConnection());
  c->endpoint_ = endpoint;
  try {
    c->socket_ = security.tls() ? security.client_->createSocket(host, port)
                                : std::make_shared<TSocket>(host, port);
    c->socket_->setConnTimeout(std::max(timeout_ms, 1));
    c->socket_->setSendTimeout(std::max(timeout_ms, 1));
    // Bounds the TLS handshake, which reads before the first frame is written.
    c->socket_->setRecvTimeout(std::max(timeout_ms, 1));
    c->socket_->open();
  } catch (const TException& e) {
    return Status::Unavailable("cannot connect to " + endpoint + ": " + e.what());
  }
  return c;
}

FrameConnection::~FrameConnection() {
  if (socket_ == nullptr) return;
  try {
    socket_->close();
  } catch (const TException&) {
  }
}

Status FrameConnection::Send(std::string_view frame, int timeout_ms) {
  if (frame.size() > kMaxFrameBytes) {
    return Status::InvalidArgument("a frame of " + std::to_string(frame.size()) +
                                   " bytes is over the limit");
  }
  try {
    socket_->setSendTimeout(std::max(timeout_ms, 1));
    const std::string framed = Framed(frame);
    socket_->write(reinterpret_cast<const uint8_t*>(framed.data()),
                   static_cast<uint32_t>(framed.size()));
  } catch (const TException& e) {
    return Status::Unavailable("sending to " + endpoint_ + ": " + e.what());
  }
  return Status::OK();
}

Status FrameConnection::Receive(std::string* frame,
                                std::chrono::steady_clock::time_point deadline) {
  uint8_t prefix[4];
  size_t got = 0;
  size_t want = sizeof(prefix);
  bool body = false;
  try {
    while (true) {
      const int left = RemainingMs(deadline);
      if (left == 0) break;
      socket_->setRecvTimeout(left);
      uint8_t* into = body ? reinterpret_cast<uint8_t*>(frame->data()) + got : prefix + got;
      uint32_t n = 0;
      try {
        n = socket_->read(into, static_cast<uint32_t>(want - got));
      } catch (const TTransportException& e) {
        if (e.getType() == TTransportException::TIMED_OUT) continue;  // the deadline decides
        throw;
      }
      if (n == 0) return Status::Unavailable(endpoint_ + " closed the connection");
      got += n;
      if (got < want) continue;
      if (body) return Status::OK();
      const uint32_t length = DecodeFixed32(reinterpret_cast<const char*>(prefix));
      if (length > kMaxFrameBytes) {
        return Status::Unavailable(endpoint_ + " sent a frame over the limit");
      }
      frame->resize(length);
      if (length == 0) return Status::OK();
      body = true;
      got = 0;
      want = length;
    }
  } catch (const TException& e) {
    return Status::Unavailable("reading from " + endpoint_ + ": " + e.what());
  }
  return Status::Unavailable("no answer from " + endpoint_ + " in time");
}

// ---- FrameServer ----

StatusOr<std::unique_ptr<FrameServer>> FrameServer::Start(const std::string& host, int port,
                                                          const FrameSecurity& security,
                                                          Handler handler,
                                                          const std::string& what) {
  std::unique_ptr<FrameServer> s(new FrameServer());
  s->handler_ = std::move(handler);
  s->what_ = what;
  s->tls_ = security.server_;
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return Status::IOError("cannot bind " + what + " on " + host + ": " + gai_strerror(rc));
  }
  std::string error = "no address";
  for (struct addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      error = std::strerror(errno);
      close(fd);
      continue;
    }
    s->listen_fd_ = fd;
    break;
  }
  freeaddrinfo(found);
  if (s->listen_fd_ < 0) {
    return Status::IOError("cannot bind " + what + " on " + host + ":" + service + ": " + error);
  }
  struct sockaddr_storage bound {};
  socklen_t length = sizeof(bound);
  getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  s->endpoint_ = "tcp://" + host + ":" + std::to_string(bound_port);
  s->accept_thread_ = std::thread([p = s.get()] { p->Accept(); });
  return s;
}

FrameServer::~FrameServer() {
  stopping_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  std::lock_guard lock(mu_);
  for (Connection& c : connections_) c.thread.join();  // each sees stopping_ within a poll
}

void FrameServer::Accept() {
  while (!stopping_) {
    struct pollfd p = {listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kServerPollMs) != 1) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {  // reap finished ones
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = connections_.erase(it);
    }
    Connection& c = connections_.emplace_back();
    try {
      c.socket = tls_ ? tls_->createSocket(fd) : std::make_shared<TSocket>(fd);
      c.socket->setRecvTimeout(kServerPollMs);
      c.socket->setSendTimeout(10'000);
    } catch (const TException&) {
      connections_.pop_back();
      close(fd);
      continue;
    }
    c.thread = std::thread([this, &c] { Serve(&c); });
  }
}

void FrameServer::Serve(Connection* c) {
  std::string frame;
  uint8_t prefix[4];
  size_t got = 0;
  size_t want = sizeof(prefix);
  bool body = false;
  bool any = false;  // a frame arrived: the peer got past the TLS handshake
  try {
    while (!stopping_) {
      uint8_t* into = body ? reinterpret_cast<uint8_t*>(frame.data()) + got : prefix + got;
      uint32_t n = 0;
      if (want > got) {
        try {
          n = c->socket->read(into, static_cast<uint32_t>(want - got));
        } catch (const TTransportException& e) {
          if (e.getType() == TTransportException::TIMED_OUT) continue;
          throw;
        }
        if (n == 0) break;  // the peer closed
      }
      got += n;
      if (got < want) continue;
      if (!body) {
        const uint32_t length = DecodeFixed32(reinterpret_cast<const char*>(prefix));
        if (length > kMaxFrameBytes) break;  // not our protocol
        frame.resize(length);
        body = true;
        got = 0;
        want = length;
        if (length > 0) continue;
      }
      any = true;
      std::optional<std::string> reply = handler_(frame);
      if (reply.has_value()) {
        const std::string framed = Framed(*reply);
        c->socket->write(reinterpret_cast<const uint8_t*>(framed.data()),
                         static_cast<uint32_t>(framed.size()));
      }
      body = false;
      got = 0;
      want = sizeof(prefix);
    }
  } catch (const TSSLException&) {
    if (!any) ++refused_clients_;
  } catch (const TException&) {
  }
  try {
    c->socket->close();
  } catch (const TException&) {
  }
  c->done = true;
}

}  // namespace zipg::rpc
