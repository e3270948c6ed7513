#include "shard/catch_up.h"

#include <iostream>
#include <optional>

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

bool CatchUp::AnnounceUntilDone() {
  // Until etcd says so, routers send nothing to a shard that started serving; a failed announce
  // is retried.
  while (true) {
    Status s = announce_();
    if (s.ok()) return true;
    std::cerr << "zipg shard: cannot announce the shards catching up: " << s.ToString()
              << std::endl;
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [&] { return stopping_; })) {
      return false;
    }
  }
}

void CatchUp::Run() {
  std::optional<std::vector<uint32_t>> announced;  // what etcd was last told
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || needed_; });
      if (stopping_) return;
      needed_ = false;
    }
    // The shards not serving now (found behind, just added, or all after a lost lease), each
    // brought up to the feed and then serving on its own while the others serve.
    std::vector<uint32_t> behind = graph_->CatchingUp();
    if (behind != announced) {
      if (!AnnounceUntilDone()) return;
      announced = behind;
    }
    bool again = false;
    for (uint32_t shard : behind) {
      // A split's mark found in this shard's feed: the switch waits for the other shards'.
      if (graph_->AwaitingSwitch(shard)) continue;
      const uint64_t refused_before = graph_->refused(shard);
      if (!CatchUpShard(shard)) {  // stopping, or woken again
        again = true;
        break;
      }
      if (graph_->AwaitingSwitch(shard)) continue;
      if (!graph_->StartServing(shard, refused_before)) again = true;  // a push refused meanwhile
      const std::vector<uint32_t> now = graph_->CatchingUp();
      if (now != announced) {
        if (!AnnounceUntilDone()) return;
        announced = now;
      }
    }
    if (again || !graph_->CatchingUp().empty()) {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      needed_ = true;  // start over with what is still behind
    }
  }
}

bool CatchUp::CatchUpShard(uint32_t shard) {
  // What a catch-up that does not end is waiting for, said every kReportAfter (a replica left
  // "not serving" after a partition once, with nothing in its log: docs/replication.md).
  constexpr auto kReportAfter = std::chrono::seconds(10);
  auto report_at = std::chrono::steady_clock::now() + kReportAfter;
  uint64_t empty_not_included = 0, refused_meanwhile = 0;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || needed_) return false;
    }
    if (!graph_->Hosts(shard)) return true;  // unserved meanwhile: nothing to catch up
    if (std::chrono::steady_clock::now() >= report_at) {
      std::cerr << "zipg shard: still catching up shard " << shard << " after "
                << kReportAfter.count() << " s more: last id " << graph_->LastId(shard)
                << "; feed reads that found nothing while the LogStore did not push here: "
                << empty_not_included
                << "; reads whose pushes were refused meanwhile: " << refused_meanwhile
                << std::endl;
      report_at = std::chrono::steady_clock::now() + kReportAfter;
      empty_not_included = refused_meanwhile = 0;
    }
    const uint64_t refused_before = graph_->refused(shard);
    ++reads_;
    StatusOr<FeedChunk> chunk = fetch_(shard, graph_->LastId(shard));
    // Applied only if this feed's LogStore is the sender the shard's pushes come from: a deposed
    // leader may still answer, and its feed may hold pointers it never made durable
    // (docs/write-pipeline.md, "Provisional pointers").
    Status applied =
        chunk.ok() ? graph_->ApplyFeed(shard, chunk->updates, chunk->sender) : chunk.status();
    if (!applied.ok()) {
      std::cerr << "zipg shard: catching up shard " << shard << ": " << applied.ToString()
                << std::endl;
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [&] { return stopping_; });
      continue;
    }
    applied_ += chunk->updates.size();
    if (graph_->AwaitingSwitch(shard)) return true;  // the rest after the switch, as its halves
    const bool refused = graph_->refused(shard) != refused_before;
    if (chunk->included && chunk->updates.empty() && !refused) return true;
    if (refused) ++refused_meanwhile;
    if (!chunk->included && chunk->updates.empty()) {
      ++empty_not_included;
      // The LogStore does not push to this server yet (its map is behind etcd): wait a little.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_; });
    }
  }
}

}  // namespace zipg::shard
