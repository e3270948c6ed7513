#include "shard/update_channel.h"

#include <chrono>
#include <map>

#include "util/coding.h"

namespace zipg::shard {

namespace {
constexpr size_t kMaxBatch = 4096;  // updates per round trip
constexpr size_t kRequestHeader = 8 + 8 + 4 + 8 + 8 + 8;
constexpr size_t kReplyHeader = 8 + 8 + 1;
// A commit notice is worth little time: its connection attempt and write give up sooner than a
// batch's (the next notice, or the next batch's header, carries the committed id again).
constexpr int kNoticeTimeoutMs = 100;
}  // namespace

UpdateSender::UpdateSender(uint32_t num_shards, Locate locate, int retry_ms,
                           rpc::FrameSecurity security)
    : locate_(std::move(locate)),
      retry_ms_(retry_ms),
      security_(std::move(security)),
      sender_id_(rpc::RandomSenderId()),
      lanes_(std::make_unique<std::unique_ptr<Lane>[]>(kMaxLanes)) {
  (void)Grow(num_shards);
}

Status UpdateSender::Grow(uint32_t num_shards) {
  std::lock_guard lock(grow_mu_);
  if (num_shards > kMaxLanes) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxLanes) + " shards");
  }
  const uint32_t from = count_.load();
  for (uint32_t s = from; s < num_shards; ++s) lanes_[s] = std::make_unique<Lane>();
  for (uint32_t s = from; s < num_shards; ++s) {
    lanes_[s]->thread = std::thread([this, s] { Run(s); });
  }
  if (num_shards > from) count_.store(num_shards, std::memory_order_release);
  return Status::OK();
}

UpdateSender::~UpdateSender() {
  stopping_ = true;
  const uint32_t n = count_.load();
  for (uint32_t s = 0; s < n; ++s) {
    std::lock_guard lock(lanes_[s]->mu);
    lanes_[s]->cv.notify_all();
  }
  for (uint32_t s = 0; s < n; ++s) lanes_[s]->thread.join();
  for (uint32_t s = 0; s < n; ++s) {
    for (auto& p : lanes_[s]->queue) {
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
  if (shard >= num_shards()) return Status::Internal("update for unknown shard");
  if (fenced_) {
    return Status::Unavailable(
        "fenced: a newer LogStore leader has reached the shards; this one "
        "applies no more writes");
  }
  auto pending = std::make_shared<Pending>();
  pending->updates = std::move(updates);
  Reply reply = pending->done.get_future();
  Lane& lane = *lanes_[shard];
  {
    std::lock_guard lock(lane.mu);
    lane.queue.push_back(std::move(pending));
  }
  // Outside lane.mu, which the lane's thread takes as it wakes (here and below).
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

void UpdateSender::SetPrev(uint32_t shard, uint64_t id) {
  if (shard >= num_shards()) return;
  // What the feed held before: delivered then, or its replicas are behind and catch up.
  lanes_[shard]->prev = id;
  lanes_[shard]->delivered = id;
}

void UpdateSender::SetApplied(uint64_t id) {
  if (id <= applied_.load()) return;
  applied_ = id;
  // Wake only the lanes with something new to tell: the shards the last groups touched.
  for (uint32_t s = 0; s < num_shards(); ++s) {
    Lane* lane = lanes_[s].get();
    if (std::min(id, lane->delivered.load()) <= lane->told.load()) continue;
    // Taken and released so that a lane between its check and its wait sees the new id.
    { std::lock_guard lock(lane->mu); }
    lane->cv.notify_one();
  }
}

void UpdateSender::NotifyIdle() {
  for (uint32_t s = 0; s < num_shards(); ++s) {
    Lane* lane = lanes_[s].get();
    {
      std::lock_guard lock(lane->mu);
      lane->poke = true;
    }
    lane->cv.notify_one();
  }
}

uint64_t UpdateSender::Committed(uint32_t shard) const {
  if (shard >= num_shards()) return 0;
  return std::min(applied_.load(), lanes_[shard]->delivered.load());
}

std::string UpdateSender::Header(uint32_t shard, uint64_t batch, uint64_t committed) const {
  std::string header;
  PutFixed64(&header, sender_id_);
  PutFixed64(&header, batch);
  PutFixed32(&header, shard);
  PutFixed64(&header, lanes_[shard]->prev.load());
  PutFixed64(&header, epoch_.load());
  PutFixed64(&header, committed);
  return header;
}

void UpdateSender::Notify(uint32_t shard, uint64_t committed) {
  Lane& lane = *lanes_[shard];
  const std::string notice = Header(shard, /*batch=*/0, committed);
  for (const UpdateTarget& t : locate_(shard)) {
    auto& connection = lane.connections[t.endpoint];
    if (!rpc::SendReconnecting(&connection, t.endpoint, security_, notice, kNoticeTimeoutMs).ok()) {
      lane.connections.erase(t.endpoint);
    }
  }
  ++notices_;
}

bool UpdateSender::IsTarget(uint32_t shard, const std::string& member) const {
  for (const UpdateTarget& t : locate_(shard)) {
    if (t.name == member) return true;
  }
  return false;
}

void UpdateSender::Run(uint32_t shard) {
  Lane& lane = *lanes_[shard];
  uint64_t batch_id = 0;
  auto heartbeat = std::chrono::steady_clock::now();
  while (true) {
    std::vector<std::shared_ptr<Pending>> batch;
    {
      std::unique_lock lock(lane.mu);
      lane.cv.wait_until(lock, heartbeat + std::chrono::milliseconds(kNoticeIntervalMs), [&] {
        return stopping_ || !lane.queue.empty() || lane.poke || Committed(shard) > lane.told;
      });
      if (stopping_) return;
      if (lane.queue.empty()) {
        // Idle: every update posted to it is delivered (this thread sent them all), and every
        // update up to the applied id was posted before it was applied (NotifyIdle).
        const uint64_t applied = applied_.load();
        if (!fenced_ && applied > lane.delivered.load()) lane.delivered = applied;
        lane.poke = false;
        // Nothing to carry the committed id: a notice, now if it grew, else as the heartbeat.
        lock.unlock();
        const uint64_t committed = Committed(shard);
        if (committed > lane.told || std::chrono::steady_clock::now() >=
                                         heartbeat + std::chrono::milliseconds(kNoticeIntervalMs)) {
          if (applied_.load() > 0) Notify(shard, committed);
          lane.told = committed;
          heartbeat = std::chrono::steady_clock::now();
        }
        continue;
      }
      size_t n = 0;
      while (!lane.queue.empty() && (batch.empty() || n < kMaxBatch)) {
        n += lane.queue.front()->updates.size();
        batch.push_back(std::move(lane.queue.front()));
        lane.queue.pop_front();
      }
    }
    std::vector<engine::Update> updates;
    for (const auto& p : batch) updates.insert(updates.end(), p->updates.begin(), p->updates.end());
    const uint64_t committed = applied_.load() > 0 ? Committed(shard) : 0;
    std::string request = Header(shard, ++batch_id, committed);
    request += engine::EncodeUpdates(updates, nullptr, /*with_ids=*/true);
    auto [failure, found] = Deliver(shard, batch_id, request, updates.size());
    if (committed > lane.told) lane.told = committed;
    heartbeat = std::chrono::steady_clock::now();
    uint64_t last = lane.prev.load();
    for (const auto& u : updates) last = std::max(last, u.id);
    lane.prev = last;
    // Delivered unless no replica could be reached at all (a timeout keeps Deliver retrying, so
    // it does not return before every replica in the map answered or left it).
    if (!stopping_ && !fenced_) lane.delivered = last;
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

std::pair<Status, std::vector<bool>> UpdateSender::Deliver(uint32_t shard, uint64_t batch_id,
                                                           const std::string& request, size_t n) {
  struct Replica {
    std::string endpoint;
    int attempts = 0;
    bool answered = false;
    uint8_t code = 0;
    std::string body;
  };
  Lane& lane = *lanes_[shard];
  std::map<std::string, Replica> replicas;  // by member name
  const std::string who = "shard " + std::to_string(shard);
  const auto give_up_empty =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(retry_ms_);
  while (!stopping_) {
    // The current replicas: new ones join, ones that left the map are no longer waited for.
    std::map<std::string, std::string> now;
    for (UpdateTarget& t : locate_(shard)) now[t.name] = std::move(t.endpoint);
    for (auto it = replicas.begin(); it != replicas.end();) {
      it = (!it->second.answered && !now.count(it->first)) ? replicas.erase(it) : std::next(it);
    }
    for (auto& [name, endpoint] : now) {
      Replica& r = replicas[name];
      if (r.endpoint != endpoint) r = Replica{endpoint};
    }
    for (auto it = lane.connections.begin(); it != lane.connections.end();) {  // gone for good
      bool used = false;
      for (const auto& [name, r] : replicas) used |= r.endpoint == it->first;
      it = used ? std::next(it) : lane.connections.erase(it);
    }
    bool waiting = false;
    for (auto& [name, r] : replicas) waiting |= !r.answered;
    if (!waiting) {
      if (!replicas.empty()) break;
      if (std::chrono::steady_clock::now() >= give_up_empty) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    // Send to everyone who has not answered: on the lane's connection to it the first time, on a
    // fresh one after a timeout (the replica may have restarted, or the connection be stuck).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(retry_ms_);
    std::vector<Replica*> sent;
    for (auto& [name, r] : replicas) {
      if (r.answered) continue;
      auto& connection = lane.connections[r.endpoint];
      if (r.attempts++ > 0) connection.reset();
      if (rpc::SendReconnecting(&connection, r.endpoint, security_, request, retry_ms_).ok()) {
        sent.push_back(&r);
      } else {
        lane.connections.erase(r.endpoint);
      }
    }
    // Read the replies: the replicas apply in parallel, so reading one after another waits for
    // the slowest, as waiting on all at once would.
    for (Replica* r : sent) {
      auto it = lane.connections.find(r->endpoint);
      std::string reply;
      while (it != lane.connections.end() && !stopping_) {
        if (!it->second->Receive(&reply, deadline).ok()) {
          lane.connections.erase(it);  // dead or stuck: the next attempt connects anew
          break;
        }
        const char* p = reply.data();
        if (reply.size() < kReplyHeader || DecodeFixed64(p) != sender_id_ ||
            DecodeFixed64(p + 8) != batch_id) {
          continue;  // not this batch's (a connection only carries this lane's, one at a time)
        }
        r->answered = true;
        r->code = static_cast<uint8_t>(p[16]);
        r->body.assign(p + kReplyHeader, reply.size() - kReplyHeader);
        break;
      }
    }
    // Nobody reached: wait out the retry interval before trying again.
    while (sent.empty() && !stopping_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Combine: any ok answer decides (replicas applied the same updates in the same order).
  std::string errors;
  size_t behind = 0;
  for (const auto& [name, r] : replicas) behind += r.answered && r.code == 2;
  behind_ += behind;
  for (const auto& [name, r] : replicas) {  // a newer leader reached this replica: stop for good
    if (r.answered && r.code == 3) {
      fenced_ = true;
      return {Status::Unavailable(who + ": " + name + " " + r.body), {}};
    }
  }
  for (const auto& [name, r] : replicas) {
    if (!r.answered) continue;
    if (r.code == 1 && r.body.size() == n) {
      std::vector<bool> found(n);
      for (size_t i = 0; i < n; ++i) found[i] = r.body[i] != 0;
      return {Status::OK(), std::move(found)};
    }
    if (r.code != 2) {
      errors += (errors.empty() ? "" : "; ") + name + ": " +
                (r.code == 1 ? std::string("malformed update reply") : r.body);
    }
  }
  if (stopping_) return {Status::Unavailable("LogStore is shutting down"), {}};
  if (!errors.empty()) return {Status::Internal(who + " failed to apply: " + errors), {}};
  if (behind > 0) {
    return {Status::Unavailable(who + ": every replica is catching up; the write is logged and "
                                      "reaches them from the feed"),
            {}};
  }
  return {Status::Unavailable(who + " has no live replica; the write is logged and reaches it "
                                    "when one registers"),
          {}};
}

StatusOr<std::unique_ptr<UpdateReceiver>> UpdateReceiver::Start(const std::string& host, int port,
                                                                Apply apply,
                                                                rpc::FrameSecurity security,
                                                                Fence* fence, Commit commit,
                                                                NewSender new_sender) {
  std::unique_ptr<UpdateReceiver> r(new UpdateReceiver());
  r->apply_ = std::move(apply);
  r->commit_ = std::move(commit);
  r->new_sender_ = std::move(new_sender);
  r->fence_ = fence;
  ZIPG_ASSIGN_OR_RETURN(r->server_,
                        rpc::FrameServer::Start(
                            host, port, security,
                            [p = r.get()](std::string_view request) { return p->Handle(request); },
                            "the update socket"));
  return r;
}

UpdateReceiver::~UpdateReceiver() { server_.reset(); }

Status UpdateReceiver::Admit(uint32_t shard, uint64_t sender, uint64_t epoch) {
  if (fence_ != nullptr) ZIPG_RETURN_IF_ERROR(fence_->Admit(shard, epoch));
  if (new_sender_) new_sender_(shard, sender);
  return Status::OK();
}

std::optional<std::string> UpdateReceiver::Handle(std::string_view request) {
  if (request.size() < kRequestHeader) return std::nullopt;
  std::lock_guard lock(mu_);
  const char* p = request.data();
  const uint64_t sender = DecodeFixed64(p);
  const uint64_t batch = DecodeFixed64(p + 8);
  const uint32_t shard = DecodeFixed32(p + 16);
  const uint64_t prev = DecodeFixed64(p + 20);
  const uint64_t epoch = DecodeFixed64(p + 28);
  const uint64_t committed = DecodeFixed64(p + 36);
  if (batch == 0) {  // a commit notice: no reply
    if (commit_ && Admit(shard, sender, epoch).ok()) commit_(shard, prev, committed);
    return std::nullopt;
  }
  std::string reply;
  PutFixed64(&reply, sender);
  PutFixed64(&reply, batch);
  auto& cached = replies_[{sender, shard}];
  if (cached.first == batch && !cached.second.empty()) return cached.second;
  {
    if (Status admitted = Admit(shard, sender, epoch); !admitted.ok()) {
      const bool fenced = admitted.message().rfind("fenced:", 0) == 0;
      reply.push_back(fenced ? 3 : 0);
      reply += fenced ? admitted.message() : admitted.ToString();
      ++fenced_batches_;
      return reply;
    }
  }
  std::vector<engine::Update> updates;
  Status s = engine::DecodeUpdates(request.substr(kRequestHeader), &updates, nullptr);
  StatusOr<PushAnswer> answer = s.ok() ? apply_(shard, prev, updates) : s;
  // The committed id (of earlier batches) after the batch: a shard that lacks `prev` has been
  // found behind by then and serves no read that could take the commit to cover what it lacks
  // (after a new sender, updates it rolled back: ServerGraph::NoteSender).
  if (commit_ && committed > 0) commit_(shard, 0, committed);
  if (!answer.ok()) {
    reply.push_back(0);
    reply += answer.status().ToString();
  } else if (answer->behind) {
    reply.push_back(2);
  } else {
    reply.push_back(1);
    for (bool f : answer->found) reply.push_back(f ? 1 : 0);
    cached = {batch, reply};
  }
  ++batches_;
  return reply;
}

}  // namespace zipg::shard
