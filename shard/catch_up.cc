#include "shard/catch_up.h"

#include <iostream>

namespace zipg::shard {

CatchUp::CatchUp(ServerGraph* graph, Fetch fetch, Announce announce, int retry_ms)
    : graph_(graph), fetch_(std::move(fetch)), announce_(std::move(announce)), retry_ms_(retry_ms) {
  graph_->StopServing();
  thread_ = std::thread([this] { Run(); });
}

CatchUp::~CatchUp() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CatchUp::Wake() {
  std::lock_guard lock(mu_);
  needed_ = true;
  cv_.notify_all();
}

void CatchUp::Run() {
  bool announced_serving = false;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || needed_; });
      if (stopping_) return;
      needed_ = false;
    }
    graph_->StopServing();
    if (announced_serving) {
      if (Status s = announce_(false); !s.ok()) {
        std::cerr << "zipg shard: cannot announce catching up: " << s.ToString() << std::endl;
      }
      announced_serving = false;
    }
    // Every hosted shard, then serve if no push was refused meanwhile (else another pass).
    bool done = false;
    while (!done) {
      const uint64_t refused_before = graph_->refused();
      bool complete = true;
      for (uint32_t shard : graph_->hosted()) {
        if (!CatchUpShard(shard)) {
          complete = false;
          break;
        }
      }
      if (!complete) break;  // stopping, or woken again
      done = graph_->StartServing(refused_before);
    }
    if (!done) {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      needed_ = true;  // start over
      continue;
    }
    // Until etcd says so, routers send nothing here; a failed announce is retried.
    while (true) {
      Status s = announce_(true);
      if (s.ok()) break;
      std::cerr << "zipg shard: cannot announce serving: " << s.ToString() << std::endl;
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [&] { return stopping_; })) {
        return;
      }
    }
    announced_serving = true;
  }
}

bool CatchUp::CatchUpShard(uint32_t shard) {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || needed_) return false;
    }
    const uint64_t refused_before = graph_->refused();
    ++reads_;
    StatusOr<FeedChunk> chunk = fetch_(shard, graph_->LastId(shard));
    Status applied = chunk.ok() ? graph_->ApplyFeed(shard, chunk->updates) : chunk.status();
    if (!applied.ok()) {
      std::cerr << "zipg shard: catching up shard " << shard << ": " << applied.ToString()
                << std::endl;
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [&] { return stopping_; });
      continue;
    }
    applied_ += chunk->updates.size();
    if (chunk->included && chunk->updates.empty() && graph_->refused() == refused_before) {
      return true;
    }
    if (!chunk->included && chunk->updates.empty()) {
      // The LogStore does not push to this server yet (its map is behind etcd): wait a little.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_; });
    }
  }
}

}  // namespace zipg::shard
