// CatchUp: brings a shard server's hosted shards up to the LogStore's update feed before they
// answer reads, and again whenever a push finds one behind or a shard is added
// (docs/replication.md, "Catching up"). A background thread: per shard not serving, read the
// feed after the last applied id and apply it, until a read that the LogStore says was made while
// pushes already went to this server brings nothing new and no push to that shard was refused
// meanwhile; then that shard serves, and the server's etcd entry says which shards still catch up.
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
  uint64_t sender = 0;                  // the LogStore's update sender (0: unknown)
};

class CatchUp {
 public:
  // Reads the feed of `shard` after id `after` (from the LogStore).
  using Fetch = std::function<StatusOr<FeedChunk>(uint32_t shard, uint64_t after)>;
  // Publishes the hosted shards that do not answer reads yet (ServerGraph::CatchingUp) in the
  // server's etcd entry (catching_up; none of them: it serves every hosted shard).
  using Announce = std::function<Status()>;

  // Starts catching up at once; `graph` must outlive the CatchUp.
  CatchUp(ServerGraph* graph, Fetch fetch, Announce announce, int retry_ms = 200);
  ~CatchUp();

  // A push found a shard behind (it has stopped serving), or a shard was added: catch up again.
  void Wake();

  // Rounds of feed reads so far, and updates applied from the feed (status, tests).
  uint64_t reads() const { return reads_.load(); }
  uint64_t applied() const { return applied_.load(); }

 private:
  void Run();
  // Announces until it succeeds; false if stopping first.
  bool AnnounceUntilDone();
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
