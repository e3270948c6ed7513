// CatchUp: brings a shard server's hosted shards up to the LogStore's update feed before it
// answers reads, and again whenever a push finds it behind (docs/replication.md, "Catching up").
// A background thread: per hosted shard, read the feed after the last applied id and apply it,
// until a read that the LogStore says was made while pushes already went to this server brings
// nothing new and no push was refused meanwhile; then the server serves and says so in etcd.
//
// Thread-safety: Wake may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/updates.h"
#include "shard/server.h"
#include "util/status.h"

namespace zipg::shard {

struct FeedChunk {
  std::vector<engine::Update> updates;  // the feed after the asked id
  bool included = false;                // pushes went to this server before the feed was read
};

class CatchUp {
 public:
  // Reads the feed of `shard` after id `after` (from the LogStore).
  using Fetch = std::function<StatusOr<FeedChunk>(uint32_t shard, uint64_t after)>;
  // Publishes whether the server serves (its etcd entry).
  using Announce = std::function<Status(bool serving)>;

  // Starts catching up at once; `graph` must outlive the CatchUp.
  CatchUp(ServerGraph* graph, Fetch fetch, Announce announce, int retry_ms = 200);
  ~CatchUp();

  // A push found the server behind (it has stopped serving): catch up again.
  void Wake();

  // Rounds of feed reads so far, and updates applied from the feed (status, tests).
  uint64_t reads() const { return reads_.load(); }
  uint64_t applied() const { return applied_.load(); }

 private:
  void Run();
  // One hosted shard up to the feed; false if stopping (or woken again) before it was.
  bool CatchUpShard(uint32_t shard);

  ServerGraph* const graph_;
  const Fetch fetch_;
  const Announce announce_;
  const int retry_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool needed_ = true;
  bool stopping_ = false;
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> applied_{0};
  std::thread thread_;
};

}  // namespace zipg::shard
