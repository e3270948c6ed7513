// FramedTransport: Thrift's TFramedTransport with its message-size budget restored after every
// message it reads.
//
// Thrift 0.17's C++ transports draw every byte a protocol consumes from one budget of
// TConfiguration::maxMessageSize per connection, and a TFramedTransport restores it only when it
// is flushed. A server reads requests through one transport and writes replies through another,
// so its input budget never comes back: after max_request_bytes of requests in all, the
// connection fails with "MaxMessageSize reached" (THRIFT-5371; a LinkBench load of 1M links in
// write batches lost a batch every 64 MiB). The generated code calls readEnd() after each
// message, which is where the budget is restored here; a single message is still bounded by it.
//
// Thread-safety: as TFramedTransport (one connection, one thread at a time).
#pragma once

#include <thrift/transport/TBufferTransports.h>

#include <memory>

namespace zipg::rpc {

class FramedTransport final : public apache::thrift::transport::TFramedTransport {
 public:
  using TFramedTransport::TFramedTransport;
  uint32_t readEnd() override {
    const uint32_t bytes = TFramedTransport::readEnd();
    resetConsumedMessageSize();
    return bytes;
  }
};

}  // namespace zipg::rpc
