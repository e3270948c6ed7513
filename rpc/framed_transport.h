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
// FramedOver puts a read buffer beneath it: TFramedTransport reads a frame's length and then its
// body, and a server peeks for the next request before that, each a read of the socket (with a
// poll before it on a server's socket); from a buffer, a small frame is one read.
//
// Thread-safety: as TFramedTransport (one connection, one thread at a time).
#pragma once

#include <thrift/TConfiguration.h>
#include <thrift/transport/TBufferTransports.h>

#include <atomic>
#include <memory>

#include "util/sanitizer.h"

namespace zipg::rpc {

// Bytes of frames (with their 4-byte length) a server read and wrote, for status documents and
// benchmarks that count what moves between processes.
struct Traffic {
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
};

class FramedTransport final : public apache::thrift::transport::TFramedTransport {
 public:
  using TFramedTransport::TFramedTransport;
  // A server's connection thread closes its transports and drops its references inside
  // libthrift; the accept thread, which holds references too, may drop the last one and destroy
  // the transport. libthrift's reference counts order the two, out of TSan's sight
  // (util/sanitizer.h).
  ~FramedTransport() override { HappensAfter(this); }
  void close() override {
    TFramedTransport::close();
    HappensBefore(this);
  }
  // Counts into *traffic (which must outlive this) from now on.
  void CountInto(std::shared_ptr<Traffic> traffic) { traffic_ = std::move(traffic); }

  uint32_t readEnd() override {
    const uint32_t bytes = TFramedTransport::readEnd();
    resetConsumedMessageSize();
    if (traffic_) traffic_->bytes_in.fetch_add(bytes, std::memory_order_relaxed);
    return bytes;
  }
  void flush() override {
    if (traffic_ && wBase_ - wBuf_.get() > static_cast<std::ptrdiff_t>(sizeof(uint32_t))) {
      traffic_->bytes_out.fetch_add(static_cast<uint64_t>(wBase_ - wBuf_.get()),
                                    std::memory_order_relaxed);
    }
    TFramedTransport::flush();
  }

 private:
  std::shared_ptr<Traffic> traffic_;
};

// A FramedTransport over `socket` through a read buffer of 16 KiB (most requests and replies fit
// in it). Writes are unchanged: a frame is still one write to the socket.
inline std::shared_ptr<FramedTransport> FramedOver(
    std::shared_ptr<apache::thrift::transport::TTransport> socket,
    std::shared_ptr<apache::thrift::TConfiguration> config) {
  constexpr uint32_t kReadBuffer = 16 << 10;
  constexpr uint32_t kWriteBuffer = 512;  // a frame larger than this is written directly
  auto buffered = std::make_shared<apache::thrift::transport::TBufferedTransport>(
      std::move(socket), kReadBuffer, kWriteBuffer, config);
  return std::make_shared<FramedTransport>(std::move(buffered), std::move(config));
}

}  // namespace zipg::rpc
