// The ZeroMQ plumbing shared by the cluster's request/reply channels (the update channel,
// shard/update_channel.h; log shipping, logstore/ship.h): a bound ROUTER endpoint that answers
// requests one at a time, and DEALER connections to one, both optionally encrypted and
// authenticated with the cluster's CURVE key pair (docs/deploy.md, "TLS"). A request and its reply
// are each one frame.
//
// Thread-safety: a RouterEndpoint is used by one thread (its server loop); a DEALER socket by one
// thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace zmq {
class context_t;
class socket_t;
class message_t;
}  // namespace zmq

namespace zipg::shard {

// The cluster's CURVE key pair (ZeroMQ's CurveZMQ: encryption and authentication). Every server
// endpoint uses it as its server key, every client as its client key, and a server accepts only
// clients holding it: only a member that has the secret can send or read. Empty: plaintext.
struct CurveKeys {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;
  std::string server_key;  // a client's view of the servers' public key; empty: public_key
  bool enabled() const { return !public_key.empty(); }
};
// Reads a key file: "public <z85>" and "secret <z85>" lines.
StatusOr<CurveKeys> LoadCurveKeys(const std::string& path);
// A new key pair, in that file's form.
StatusOr<std::string> NewCurveKeyFile();

// A random id for a request sender: its replies carry it, so a restarted sender never takes an
// answer meant for its predecessor.
uint64_t RandomSenderId();

// A DEALER socket of `context` connected to `endpoint` ("tcp://host:port"), a CURVE client if
// `curve` is enabled. Throws zmq::error_t.
std::unique_ptr<zmq::socket_t> ConnectDealer(zmq::context_t& context, const std::string& endpoint,
                                             const CurveKeys& curve);

class RouterEndpoint {
 public:
  // Binds tcp://host:port (port 0: any free port) in its own context. With `curve`, only clients
  // holding the cluster's key pair get through (a ZAP handler checks their key). `what` names the
  // endpoint in errors ("the update socket").
  static StatusOr<std::unique_ptr<RouterEndpoint>> Bind(const std::string& host, int port,
                                                        const CurveKeys& curve,
                                                        const std::string& what);
  ~RouterEndpoint();

  // Waits up to `timeout` for one request (answering CURVE handshakes meanwhile); false if none
  // came. *identity is the peer, for Reply.
  bool Receive(zmq::message_t* identity, zmq::message_t* request,
               std::chrono::milliseconds timeout);
  void Reply(zmq::message_t& identity, std::string_view reply);

  const std::string& endpoint() const { return endpoint_; }
  // Connections refused by the ZAP handler (a client without the cluster's key).
  uint64_t refused_clients() const { return refused_clients_.load(); }

 private:
  RouterEndpoint() = default;
  void AnswerZap();

  CurveKeys curve_;
  std::string endpoint_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> zap_;  // the ZAP handler (curve only)
  std::unique_ptr<zmq::socket_t> socket_;
  std::atomic<uint64_t> refused_clients_{0};
};

}  // namespace zipg::shard
