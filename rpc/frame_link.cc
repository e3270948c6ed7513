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

bool TimedOut(const TTransportException& e) {
  return e.getType() == TTransportException::TIMED_OUT;
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

// ---- FrameReader ----

FrameReader::Step FrameReader::Take(std::string* frame) {
  const size_t have = buffer_.size() - pos_;
  if (have < sizeof(uint32_t)) return Step::kMore;
  const uint32_t length = DecodeFixed32(buffer_.data() + pos_);
  if (length > kMaxFrameBytes) return Step::kTooLarge;
  if (have - sizeof(uint32_t) < length) return Step::kMore;
  frame->assign(buffer_, pos_ + sizeof(uint32_t), length);
  pos_ += sizeof(uint32_t) + length;
  if (pos_ == buffer_.size()) {
    buffer_.clear();
    pos_ = 0;
  }
  return Step::kFrame;
}

FrameReader::Step FrameReader::Read(TSocket& socket, std::string* frame) {
  if (Step step = Take(frame); step != Step::kMore) return step;
  if (pos_ > 0) {  // keep only the part of a frame not taken yet
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  // A small frame and what follows it in one read; a large one's whole rest at once.
  constexpr size_t kReadAhead = 16 << 10;
  size_t want = kReadAhead;
  if (buffer_.size() >= sizeof(uint32_t)) {
    const size_t whole = sizeof(uint32_t) + DecodeFixed32(buffer_.data());
    want = std::max(want, whole - buffer_.size());
  }
  const size_t had = buffer_.size();
  buffer_.resize(had + want);
  uint32_t n = 0;
  try {
    n = socket.read(reinterpret_cast<uint8_t*>(buffer_.data()) + had, static_cast<uint32_t>(want));
  } catch (...) {
    buffer_.resize(had);
    throw;
  }
  buffer_.resize(had + n);
  if (n == 0) return Step::kClosed;
  return Take(frame);
}

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
  ZIPG_ASSIGN_OR_RETURN(
      const Endpoint parsed,
      Endpoint::Parse(endpoint.rfind("tcp://", 0) == 0 ? endpoint.substr(6) : endpoint));
  const std::string& host = parsed.host;
  const int port = parsed.port;
  std::unique_ptr<FrameConnection> c(new FrameConnection());
  c->endpoint_ = endpoint;
  try {
    c->socket_ = security.tls() ? security.client_->createSocket(host, port)
                                : std::make_shared<TSocket>(host, port);
    c->socket_->setConnTimeout(std::max(timeout_ms, 1));
    c->send_timeout_ms_ = std::max(timeout_ms, 1);
    c->socket_->setSendTimeout(c->send_timeout_ms_);
    // Bounds the TLS handshake, which reads before the first frame is written.
    c->recv_timeout_ms_ = std::max(timeout_ms, 1);
    c->socket_->setRecvTimeout(c->recv_timeout_ms_);
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
    if (std::max(timeout_ms, 1) != send_timeout_ms_) {  // a system call: only when it changes
      send_timeout_ms_ = std::max(timeout_ms, 1);
      socket_->setSendTimeout(send_timeout_ms_);
    }
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
  try {
    for (int left = RemainingMs(deadline); left > 0; left = RemainingMs(deadline)) {
      // A system call: only when the socket's timeout would pass the deadline, or wake the
      // read far too early (it then times out early and reads again: the deadline decides).
      if (recv_timeout_ms_ > left || recv_timeout_ms_ < left / 2) {
        recv_timeout_ms_ = left;
        socket_->setRecvTimeout(left);
      }
      FrameReader::Step step;
      try {
        step = reader_.Read(*socket_, frame);
      } catch (const TTransportException& e) {
        if (TimedOut(e)) continue;  // the deadline decides
        throw;
      }
      if (step == FrameReader::Step::kFrame) return Status::OK();
      if (step == FrameReader::Step::kClosed) {
        return Status::Unavailable(endpoint_ + " closed the connection");
      }
      if (step == FrameReader::Step::kTooLarge) {
        return Status::Unavailable(endpoint_ + " sent a frame over the limit");
      }
    }
  } catch (const TException& e) {
    return Status::Unavailable("reading from " + endpoint_ + ": " + e.what());
  }
  return Status::Unavailable("no answer from " + endpoint_ + " in time");
}

Status SendReconnecting(std::unique_ptr<FrameConnection>* connection, const std::string& endpoint,
                        const FrameSecurity& security, std::string_view frame, int timeout_ms) {
  Status sent;
  for (int fresh = *connection == nullptr; fresh < 2; ++fresh) {
    if (fresh == 1) {
      auto made = FrameConnection::Connect(endpoint, security, timeout_ms);
      if (!made.ok()) return made.status();
      *connection = std::move(*made);
    }
    sent = (*connection)->Send(frame, timeout_ms);
    if (sent.ok()) return sent;
    connection->reset();
  }
  return sent;
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
  FrameReader reader;
  bool any = false;  // a frame arrived: the peer got past the TLS handshake
  try {
    while (!stopping_) {
      FrameReader::Step step;
      try {
        step = reader.Read(*c->socket, &frame);
      } catch (const TTransportException& e) {
        if (TimedOut(e)) continue;  // look at stopping_
        throw;
      }
      if (step == FrameReader::Step::kMore) continue;
      if (step != FrameReader::Step::kFrame) break;  // closed, or not our protocol
      any = true;
      if (std::optional<std::string> reply = handler_(frame)) {
        const std::string framed = Framed(*reply);
        c->socket->write(reinterpret_cast<const uint8_t*>(framed.data()),
                         static_cast<uint32_t>(framed.size()));
      }
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
