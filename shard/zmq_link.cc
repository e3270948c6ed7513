#include "shard/zmq_link.h"

#include <fstream>
#include <random>
#include <vector>
#include <zmq.hpp>

namespace zipg::shard {

StatusOr<CurveKeys> LoadCurveKeys(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot read the CURVE key file " + path);
  CurveKeys keys;
  std::string word, value;
  while (in >> word >> value) {
    if (word == "public") keys.public_key = value;
    if (word == "secret") keys.secret_key = value;
  }
  if (keys.public_key.size() != 40 || keys.secret_key.size() != 40) {
    return Status::InvalidArgument(path + ": expected lines 'public <40 Z85 characters>' and "
                                          "'secret <40 Z85 characters>'");
  }
  return keys;
}

StatusOr<std::string> NewCurveKeyFile() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) {
    return Status::Internal("zmq_curve_keypair failed: this libzmq has no CURVE support");
  }
  return "public " + std::string(pub) + "\nsecret " + std::string(sec) + "\n";
}

uint64_t RandomSenderId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::unique_ptr<zmq::socket_t> ConnectDealer(zmq::context_t& context, const std::string& endpoint,
                                             const CurveKeys& curve) {
  auto socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
  socket->set(zmq::sockopt::linger, 0);
  if (curve.enabled()) {
    socket->set(zmq::sockopt::curve_serverkey,
                curve.server_key.empty() ? curve.public_key : curve.server_key);
    socket->set(zmq::sockopt::curve_publickey, curve.public_key);
    socket->set(zmq::sockopt::curve_secretkey, curve.secret_key);
  }
  socket->connect(endpoint);
  return socket;
}

StatusOr<std::unique_ptr<RouterEndpoint>> RouterEndpoint::Bind(const std::string& host, int port,
                                                               const CurveKeys& curve,
                                                               const std::string& what) {
  std::unique_ptr<RouterEndpoint> r(new RouterEndpoint());
  r->curve_ = curve;
  r->context_ = std::make_unique<zmq::context_t>(1);
  try {
    if (curve.enabled()) {
      // The ZAP handler must be bound before the first CURVE handshake (RFC 27).
      r->zap_ = std::make_unique<zmq::socket_t>(*r->context_, zmq::socket_type::rep);
      r->zap_->set(zmq::sockopt::linger, 0);
      r->zap_->bind("inproc://zeromq.zap.01");
    }
    r->socket_ = std::make_unique<zmq::socket_t>(*r->context_, zmq::socket_type::router);
    r->socket_->set(zmq::sockopt::linger, 0);
    if (curve.enabled()) {
      r->socket_->set(zmq::sockopt::curve_server, 1);
      r->socket_->set(zmq::sockopt::curve_secretkey, curve.secret_key);
      r->socket_->set(zmq::sockopt::zap_domain, "zipg");
    }
    r->socket_->bind("tcp://" + host + ":" + (port == 0 ? std::string("*") : std::to_string(port)));
    r->endpoint_ = r->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::IOError("cannot bind " + what + " on " + host + ": " + e.what());
  }
  return r;
}

RouterEndpoint::~RouterEndpoint() = default;

bool RouterEndpoint::Receive(zmq::message_t* identity, zmq::message_t* request,
                             std::chrono::milliseconds timeout) {
  zmq::pollitem_t items[2] = {{socket_->handle(), 0, ZMQ_POLLIN, 0},
                              {zap_ ? zap_->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, zap_ ? 2 : 1, timeout);
    if (zap_ && (items[1].revents & ZMQ_POLLIN)) AnswerZap();
    if (!(items[0].revents & ZMQ_POLLIN)) return false;
    if (!socket_->recv(*identity, zmq::recv_flags::dontwait)) return false;
    if (!identity->more() || !socket_->recv(*request, zmq::recv_flags::dontwait)) return false;
    if (request->more()) {  // not our protocol: drain the rest of the message
      while (true) {
        zmq::message_t extra;
        if (!socket_->recv(extra, zmq::recv_flags::dontwait) || !extra.more()) break;
      }
      return false;
    }
    return true;
  } catch (const zmq::error_t&) {
    return false;
  }
}

void RouterEndpoint::Reply(zmq::message_t& identity, std::string_view reply) {
  try {
    socket_->send(identity, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_->send(zmq::buffer(reply.data(), reply.size()), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
  }
}

void RouterEndpoint::AnswerZap() {
  // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
  std::vector<zmq::message_t> frames;
  while (true) {
    zmq::message_t frame;
    if (!zap_->recv(frame, zmq::recv_flags::dontwait)) break;
    const bool more = frame.more();
    frames.push_back(std::move(frame));
    if (!more) break;
  }
  if (frames.size() < 6) return;
  const std::string mechanism = frames[5].to_string();
  bool allowed = false;
  if (mechanism == "CURVE" && frames.size() >= 7 && frames[6].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), 32);
    allowed = curve_.public_key == z85;
  }
  if (!allowed) ++refused_clients_;
  const std::string status = allowed ? "200" : "400";
  zap_->send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(frames[1].to_string()), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(status), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(allowed ? std::string("OK") : std::string("not a cluster member")),
             zmq::send_flags::sndmore);
  zap_->send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  zap_->send(zmq::str_buffer(""), zmq::send_flags::none);
}

}  // namespace zipg::shard
