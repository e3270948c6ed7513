#include "logstore/ship.h"

#include <chrono>
#include <zmq.hpp>

#include "util/coding.h"

namespace zipg::logstore {

namespace {
constexpr size_t kRequestHeader = 8 + 8 + 1 + 8 + 8 + 8 + 4;
constexpr size_t kReplyHeader = 8 + 8 + 1 + 8 + 8 + 8;

std::string EncodeReply(uint64_t sender, uint64_t seq, const ShipReply& r) {
  std::string out;
  PutFixed64(&out, sender);
  PutFixed64(&out, seq);
  out.push_back(static_cast<char>(r.code));
  PutFixed64(&out, r.epoch);
  PutFixed64(&out, r.generation);
  PutFixed64(&out, r.next_index);
  out += r.message;
  return out;
}

// The request's records, pointing into `frame`; false if it is malformed.
// (sender and seq are set whenever the frame holds them, so that even a malformed request is
// answered.)
bool DecodeRequest(std::string_view frame, uint64_t* sender, uint64_t* seq, ShipRequest* r) {
  const char* p = frame.data();
  if (frame.size() < 16) return false;
  *sender = DecodeFixed64(p);
  *seq = DecodeFixed64(p + 8);
  if (frame.size() < kRequestHeader) return false;
  const uint8_t kind = static_cast<uint8_t>(p[16]);
  if (kind < 1 || kind > 5) return false;
  r->kind = static_cast<ShipKind>(kind);
  r->epoch = DecodeFixed64(p + 17);
  r->generation = DecodeFixed64(p + 25);
  r->first_index = DecodeFixed64(p + 33);
  const uint32_t n = DecodeFixed32(p + 41);
  size_t at = kRequestHeader;
  r->records.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (frame.size() - at < 4) return false;
    const uint32_t length = DecodeFixed32(p + at);
    at += 4;
    if (frame.size() - at < length) return false;
    r->records.emplace_back(p + at, length);
    at += length;
  }
  return at == frame.size();
}
}  // namespace

ShipSender::ShipSender(std::string endpoint, shard::CurveKeys curve)
    : endpoint_(std::move(endpoint)),
      curve_(std::move(curve)),
      sender_id_(shard::RandomSenderId()),
      context_(std::make_unique<zmq::context_t>(1)) {}

ShipSender::~ShipSender() {
  {
    std::lock_guard lock(async_mu_);
    async_stopping_ = true;
  }
  async_cv_.notify_all();
  if (async_thread_.joinable()) async_thread_.join();
  std::lock_guard lock(mu_);
  socket_.reset();
}

std::future<StatusOr<ShipReply>> ShipSender::SendAsync(
    ShipKind kind, uint64_t epoch, uint64_t generation, uint64_t first_index,
    const std::vector<std::string_view>& records, int timeout_ms) {
  std::packaged_task<StatusOr<ShipReply>()> task(
      [=, this] { return Send(kind, epoch, generation, first_index, records, timeout_ms); });
  auto future = task.get_future();
  std::lock_guard lock(async_mu_);
  if (!async_thread_.joinable()) async_thread_ = std::thread([this] { RunAsync(); });
  async_queue_.push_back(std::move(task));
  async_cv_.notify_one();
  return future;
}

void ShipSender::RunAsync() {
  std::unique_lock lock(async_mu_);
  while (true) {
    async_cv_.wait(lock, [this] { return async_stopping_ || !async_queue_.empty(); });
    if (async_queue_.empty()) return;  // stopping, and nothing left to send
    auto task = std::move(async_queue_.front());
    async_queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

StatusOr<ShipReply> ShipSender::Send(ShipKind kind, uint64_t epoch, uint64_t generation,
                                     uint64_t first_index,
                                     const std::vector<std::string_view>& records,
                                     int timeout_ms) {
  std::string request;
  size_t size = kRequestHeader;
  for (std::string_view r : records) size += 4 + r.size();
  request.reserve(size);
  std::lock_guard lock(mu_);
  const uint64_t seq = ++seq_;
  PutFixed64(&request, sender_id_);
  PutFixed64(&request, seq);
  request.push_back(static_cast<char>(kind));
  PutFixed64(&request, epoch);
  PutFixed64(&request, generation);
  PutFixed64(&request, first_index);
  PutFixed32(&request, static_cast<uint32_t>(records.size()));
  for (std::string_view r : records) {
    PutFixed32(&request, static_cast<uint32_t>(r.size()));
    request.append(r.data(), r.size());
  }
  const std::string who = "the standby LogStore at " + endpoint_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 1));
  try {
    if (socket_ == nullptr) socket_ = shard::ConnectDealer(*context_, endpoint_, curve_);
    socket_->send(zmq::buffer(request), zmq::send_flags::dontwait);
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t reply;
      if (!socket_->recv(reply, zmq::recv_flags::dontwait)) continue;
      const auto* p = static_cast<const char*>(reply.data());
      if (reply.size() < kReplyHeader || DecodeFixed64(p) != sender_id_ ||
          DecodeFixed64(p + 8) != seq) {
        continue;  // a late reply to a request that timed out
      }
      ShipReply out;
      out.code = static_cast<ShipCode>(p[16]);
      out.epoch = DecodeFixed64(p + 17);
      out.generation = DecodeFixed64(p + 25);
      out.next_index = DecodeFixed64(p + 33);
      out.message.assign(p + kReplyHeader, reply.size() - kReplyHeader);
      return out;
    }
  } catch (const zmq::error_t& e) {
    socket_.reset();
    return Status::Unavailable(who + ": " + e.what());
  }
  socket_.reset();  // it may be stuck on a dead peer: the next request connects anew
  return Status::Unavailable(who + " did not answer within " + std::to_string(timeout_ms) +
                             " ms");
}

StatusOr<std::unique_ptr<ShipReceiver>> ShipReceiver::Start(const std::string& host, int port,
                                                            Handler handler,
                                                            shard::CurveKeys curve) {
  std::unique_ptr<ShipReceiver> r(new ShipReceiver());
  r->handler_ = std::move(handler);
  ZIPG_ASSIGN_OR_RETURN(r->socket_,
                        shard::RouterEndpoint::Bind(host, port, curve, "the log shipping socket"));
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

ShipReceiver::~ShipReceiver() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void ShipReceiver::Run() {
  while (!stopping_) {
    zmq::message_t identity, frame;
    if (!socket_->Receive(&identity, &frame, std::chrono::milliseconds(100))) continue;
    uint64_t sender = 0, seq = 0;
    ShipRequest request;
    ShipReply reply;
    if (!DecodeRequest(std::string_view(static_cast<const char*>(frame.data()), frame.size()),
                       &sender, &seq, &request)) {
      if (frame.size() < 16) continue;  // cannot even say whom to answer
      reply.message = "malformed log shipping request";
    } else {
      reply = handler_(request);
    }
    ++requests_;
    socket_->Reply(identity, EncodeReply(sender, seq, reply));
  }
}

}  // namespace zipg::logstore
