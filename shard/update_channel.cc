#include "shard/update_channel.h"

#include <chrono>
#include <map>
#include <random>
#include <zmq.hpp>

#include "util/coding.h"

namespace zipg::shard {

namespace {
constexpr size_t kMaxBatch = 4096;  // updates per round trip
constexpr size_t kRequestHeader = 8 + 8 + 4;
constexpr size_t kReplyHeader = 8 + 8 + 1;

uint64_t RandomId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}
}  // namespace

UpdateSender::UpdateSender(uint32_t num_shards, Locate locate, int retry_ms)
    : locate_(std::move(locate)),
      retry_ms_(retry_ms),
      sender_id_(RandomId()),
      context_(std::make_unique<zmq::context_t>(1)) {
  for (uint32_t s = 0; s < num_shards; ++s) lanes_.push_back(std::make_unique<Lane>());
  for (uint32_t s = 0; s < num_shards; ++s) {
    lanes_[s]->thread = std::thread([this, s] { Run(s); });
  }
}

UpdateSender::~UpdateSender() {
  stopping_ = true;
  for (auto& lane : lanes_) {
    std::lock_guard lock(lane->mu);
    lane->cv.notify_all();
  }
  for (auto& lane : lanes_) lane->thread.join();
  for (auto& lane : lanes_) {
    for (auto& p : lane->queue) {
      p->done.set_value({Status::Unavailable("LogStore is shutting down"), {}});
    }
  }
}

StatusOr<std::vector<bool>> UpdateSender::Send(uint32_t shard, std::vector<engine::Update> updates,
                                               int timeout_ms) {
  ZIPG_ASSIGN_OR_RETURN(Reply reply, Post(shard, std::move(updates)));
  return Await(&reply, shard,
               std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms));
}

StatusOr<UpdateSender::Reply> UpdateSender::Post(uint32_t shard,
                                                 std::vector<engine::Update> updates) {
  if (shard >= lanes_.size()) return Status::Internal("update for unknown shard");
  auto pending = std::make_shared<Pending>();
  pending->updates = std::move(updates);
  Reply reply = pending->done.get_future();
  Lane& lane = *lanes_[shard];
  std::lock_guard lock(lane.mu);
  lane.queue.push_back(std::move(pending));
  lane.cv.notify_one();
  return reply;
}

StatusOr<std::vector<bool>> UpdateSender::Await(Reply* reply, uint32_t shard,
                                                std::chrono::steady_clock::time_point deadline) {
  if (reply->wait_until(deadline) != std::future_status::ready) {
    return Status::Unavailable("shard " + std::to_string(shard) +
                               " did not confirm the update in time");
  }
  auto [status, found] = reply->get();
  if (!status.ok()) return status;
  return found;
}

void UpdateSender::Run(uint32_t shard) {
  Lane& lane = *lanes_[shard];
  std::unique_ptr<zmq::socket_t> socket;
  std::string connected;
  uint64_t batch_id = 0;
  while (true) {
    std::vector<std::shared_ptr<Pending>> batch;
    {
      std::unique_lock lock(lane.mu);
      lane.cv.wait(lock, [&] { return stopping_ || !lane.queue.empty(); });
      if (stopping_) return;
      size_t n = 0;
      while (!lane.queue.empty() && (batch.empty() || n < kMaxBatch)) {
        n += lane.queue.front()->updates.size();
        batch.push_back(std::move(lane.queue.front()));
        lane.queue.pop_front();
      }
    }
    std::vector<engine::Update> updates;
    for (const auto& p : batch) updates.insert(updates.end(), p->updates.begin(), p->updates.end());
    std::string request;
    PutFixed64(&request, sender_id_);
    PutFixed64(&request, ++batch_id);
    PutFixed32(&request, shard);
    request += engine::EncodeUpdates(updates, nullptr);

    Status failure;
    std::vector<bool> found;
    bool done = false;
    while (!done && !stopping_) {
      auto where = locate_(shard);
      if (!where.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      try {
        if (!socket || connected != *where) {
          socket = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::dealer);
          socket->set(zmq::sockopt::linger, 0);
          socket->connect(*where);
          connected = *where;
        }
        socket->send(zmq::buffer(request), zmq::send_flags::dontwait);
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(retry_ms_);
        while (!done && std::chrono::steady_clock::now() < deadline && !stopping_) {
          zmq::pollitem_t item{socket->handle(), 0, ZMQ_POLLIN, 0};
          zmq::poll(&item, 1, std::chrono::milliseconds(100));
          if (!(item.revents & ZMQ_POLLIN)) continue;
          zmq::message_t reply;
          if (!socket->recv(reply, zmq::recv_flags::dontwait)) continue;
          const auto* p = static_cast<const char*>(reply.data());
          if (reply.size() < kReplyHeader || DecodeFixed64(p) != sender_id_ ||
              DecodeFixed64(p + 8) != batch_id) {
            continue;  // a late reply to an earlier attempt
          }
          if (p[16] == 1) {
            if (reply.size() - kReplyHeader != updates.size()) {
              failure = Status::Internal("malformed update reply");
            } else {
              for (size_t i = 0; i < updates.size(); ++i) found.push_back(p[kReplyHeader + i] != 0);
            }
          } else {
            failure = Status::Internal("shard " + std::to_string(shard) + " failed to apply: " +
                                       std::string(p + kReplyHeader, reply.size() - kReplyHeader));
          }
          done = true;
        }
      } catch (const zmq::error_t&) {
      }
      if (!done) socket.reset();  // rebuild: the owner may have moved or restarted
    }
    if (!done) {
      failure = Status::Unavailable("LogStore is shutting down");
    }
    ++batches_;
    size_t at = 0;
    for (auto& p : batch) {
      std::vector<bool> mine;
      if (failure.ok()) {
        mine.assign(found.begin() + at, found.begin() + at + p->updates.size());
      }
      at += p->updates.size();
      p->done.set_value({failure, std::move(mine)});
    }
  }
}

StatusOr<std::unique_ptr<UpdateReceiver>> UpdateReceiver::Start(const std::string& host, int port,
                                                                Apply apply) {
  std::unique_ptr<UpdateReceiver> r(new UpdateReceiver());
  r->apply_ = std::move(apply);
  r->context_ = std::make_unique<zmq::context_t>(1);
  try {
    r->socket_ = std::make_unique<zmq::socket_t>(*r->context_, zmq::socket_type::router);
    r->socket_->set(zmq::sockopt::linger, 0);
    r->socket_->bind("tcp://" + host + ":" + (port == 0 ? std::string("*") : std::to_string(port)));
    r->endpoint_ = r->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::IOError("cannot bind the update socket on " + host + ": " + e.what());
  }
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

UpdateReceiver::~UpdateReceiver() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void UpdateReceiver::Run() {
  // Last reply per (sender, shard): a lane sends one batch at a time, so a repeat is always of
  // the latest.
  std::map<std::pair<uint64_t, uint32_t>, std::pair<uint64_t, std::string>> replies;
  while (!stopping_) {
    zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t identity, request;
      if (!socket_->recv(identity, zmq::recv_flags::dontwait)) continue;
      if (!identity.more() || !socket_->recv(request, zmq::recv_flags::dontwait)) continue;
      while (request.more()) {  // not our protocol: drain the rest of the message
        zmq::message_t extra;
        (void)socket_->recv(extra, zmq::recv_flags::dontwait);
        if (!extra.more()) break;
      }
      if (request.size() < kRequestHeader) continue;
      const auto* p = static_cast<const char*>(request.data());
      const uint64_t sender = DecodeFixed64(p);
      const uint64_t batch = DecodeFixed64(p + 8);
      const uint32_t shard = DecodeFixed32(p + 16);
      std::string reply;
      auto& cached = replies[{sender, shard}];
      if (cached.first == batch && !cached.second.empty()) {
        reply = cached.second;
      } else {
        PutFixed64(&reply, sender);
        PutFixed64(&reply, batch);
        std::vector<engine::Update> updates;
        Status s = engine::DecodeUpdates(
            std::string_view(p + kRequestHeader, request.size() - kRequestHeader), &updates,
            nullptr);
        StatusOr<std::vector<bool>> found = s.ok() ? apply_(shard, updates) : s;
        if (found.ok()) {
          reply.push_back(1);
          for (bool f : *found) reply.push_back(f ? 1 : 0);
          cached = {batch, reply};
        } else {
          reply.push_back(0);
          reply += found.status().ToString();
        }
        ++batches_;
      }
      socket_->send(identity, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_->send(zmq::buffer(reply), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
    }
  }
}

}  // namespace zipg::shard
