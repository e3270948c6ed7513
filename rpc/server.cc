#include "rpc/server.h"

#include <thrift/TConfiguration.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/server/TThreadedServer.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TServerSocket.h>

#include <future>

namespace zipg::rpc {

using apache::thrift::TConfiguration;
using apache::thrift::TProcessor;
using apache::thrift::protocol::TBinaryProtocolFactory;
using apache::thrift::server::TServerEventHandler;
using apache::thrift::server::TThreadedServer;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TServerSocket;
using apache::thrift::transport::TTransport;
using apache::thrift::transport::TTransportFactory;

namespace {

// Framed transports with our frame limit (the stock factory takes no configuration).
class FramedFactory : public TTransportFactory {
 public:
  explicit FramedFactory(int max_bytes)
      : config_(std::make_shared<TConfiguration>(max_bytes, max_bytes)) {}
  std::shared_ptr<TTransport> getTransport(std::shared_ptr<TTransport> trans) override {
    return std::make_shared<TFramedTransport>(trans, config_);
  }

 private:
  std::shared_ptr<TConfiguration> config_;
};

// Reports when the socket is listening.
class ListenSignal : public TServerEventHandler {
 public:
  void preServe() override { listening_.set_value(); }
  std::future<void> Future() { return listening_.get_future(); }

 private:
  std::promise<void> listening_;
};

}  // namespace

StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(std::shared_ptr<TProcessor> processor,
                                                      const ServerOptions& options) {
  auto socket = std::make_shared<TServerSocket>(options.host, options.port);
  std::unique_ptr<RpcServer> s(new RpcServer());
  s->server_ = std::make_shared<TThreadedServer>(
      std::move(processor), socket, std::make_shared<FramedFactory>(options.max_request_bytes),
      std::make_shared<TBinaryProtocolFactory>());
  s->server_->setConcurrentClientLimit(options.max_connections);
  auto signal = std::make_shared<ListenSignal>();
  auto listening = signal->Future();
  s->server_->setServerEventHandler(signal);
  auto failure = std::make_shared<std::promise<std::string>>();
  auto failed = failure->get_future();
  auto server = s->server_;
  s->thread_ = std::thread([server, failure] {
    try {
      server->serve();
    } catch (const std::exception& e) {
      failure->set_value(e.what());
    }
  });
  // Whichever comes first: listening, or serve() failing (e.g. the port is taken).
  for (;;) {
    if (listening.wait_for(std::chrono::milliseconds(5)) == std::future_status::ready) break;
    if (failed.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) {
      s->thread_.join();
      return Status::Unavailable("cannot listen on " + options.host + ":" +
                                 std::to_string(options.port) + ": " + failed.get());
    }
  }
  s->port_ = socket->getPort();
  return s;
}

void RpcServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

RpcServer::~RpcServer() { Stop(); }

}  // namespace zipg::rpc
