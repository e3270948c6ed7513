#include "logstore/ship.h"

#include <chrono>

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
  if (kind < 1 || kind > 6) return false;
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

ShipSender::ShipSender(std::string endpoint, rpc::FrameSecurity security)
    : endpoint_(std::move(endpoint)),
      security_(std::move(security)),
      sender_id_(rpc::RandomSenderId()) {}

ShipSender::~ShipSender() = default;

StatusOr<ShipReply> ShipSender::Send(ShipKind kind, uint64_t epoch, uint64_t generation,
                                     uint64_t first_index,
                                     const std::vector<std::string_view>& records, int timeout_ms) {
  Pending pending = Begin(kind, epoch, generation, first_index, records, timeout_ms);
  return Finish(&pending);
}

ShipSender::Pending ShipSender::Begin(ShipKind kind, uint64_t epoch, uint64_t generation,
                                      uint64_t first_index,
                                      const std::vector<std::string_view>& records,
                                      int timeout_ms) {
  Pending p;
  p.timeout_ms = std::max(timeout_ms, 1);
  p.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(p.timeout_ms);
  std::string request;
  size_t size = kRequestHeader;
  for (std::string_view r : records) size += 4 + r.size();
  request.reserve(size);
  p.lock = std::unique_lock(mu_);
  p.seq = ++seq_;
  PutFixed64(&request, sender_id_);
  PutFixed64(&request, p.seq);
  request.push_back(static_cast<char>(kind));
  PutFixed64(&request, epoch);
  PutFixed64(&request, generation);
  PutFixed64(&request, first_index);
  PutFixed32(&request, static_cast<uint32_t>(records.size()));
  for (std::string_view r : records) {
    PutFixed32(&request, static_cast<uint32_t>(r.size()));
    request.append(r.data(), r.size());
  }
  p.sent = rpc::SendReconnecting(&connection_, endpoint_, security_, request, p.timeout_ms);
  return p;
}

StatusOr<ShipReply> ShipSender::Finish(Pending* p) {
  const std::string who = "the standby LogStore at " + endpoint_;
  if (!p->lock.owns_lock()) return Status::Internal("finishing a shipment twice");
  std::unique_lock lock = std::move(p->lock);
  if (!p->sent.ok()) return Status::Unavailable(who + ": " + p->sent.message());
  std::string reply;
  while (true) {
    if (Status s = connection_->Receive(&reply, p->deadline); !s.ok()) {
      connection_.reset();  // dead, or stuck on a dead peer: the next request connects anew
      return Status::Unavailable(who + " did not answer within " + std::to_string(p->timeout_ms) +
                                 " ms (" + s.message() + ")");
    }
    const char* data = reply.data();
    // A reply to an earlier request whose caller never finished it is skipped.
    if (reply.size() >= kReplyHeader && DecodeFixed64(data) == sender_id_ &&
        DecodeFixed64(data + 8) == p->seq) {
      ShipReply out;
      out.code = static_cast<ShipCode>(data[16]);
      out.epoch = DecodeFixed64(data + 17);
      out.generation = DecodeFixed64(data + 25);
      out.next_index = DecodeFixed64(data + 33);
      out.message.assign(data + kReplyHeader, reply.size() - kReplyHeader);
      return out;
    }
  }
}

StatusOr<std::unique_ptr<ShipReceiver>> ShipReceiver::Start(const std::string& host, int port,
                                                            Handler handler,
                                                            rpc::FrameSecurity security) {
  std::unique_ptr<ShipReceiver> r(new ShipReceiver());
  r->handler_ = std::move(handler);
  ZIPG_ASSIGN_OR_RETURN(
      r->server_,
      rpc::FrameServer::Start(
          host, port, security, [p = r.get()](std::string_view frame) { return p->Handle(frame); },
          "the log shipping socket"));
  return r;
}

ShipReceiver::~ShipReceiver() { server_.reset(); }

std::optional<std::string> ShipReceiver::Handle(std::string_view frame) {
  uint64_t sender = 0, seq = 0;
  ShipRequest request;
  ShipReply reply;
  std::lock_guard lock(mu_);
  if (!DecodeRequest(frame, &sender, &seq, &request)) {
    if (frame.size() < 16) return std::nullopt;  // cannot even say whom to answer
    reply.message = "malformed log shipping request";
  } else {
    reply = handler_(request);
  }
  ++requests_;
  return EncodeReply(sender, seq, reply);
}

}  // namespace zipg::logstore
