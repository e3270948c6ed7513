// Fence: the largest LogStore epoch each shard has seen (docs/logstore-ha.md, "Fencing"). Every
// update batch carries the epoch of the LogStore leader that sent it; a shard applies a batch
// only if its epoch is at least the largest it has seen, so a paused or partitioned old leader
// can never apply an update once a newer leader has reached the shard. The epochs are persisted
// (a JSON file replaced atomically) before a larger one is admitted, so a restart keeps them.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "util/status.h"

namespace zipg::shard {

class Fence {
 public:
  // Loads `path` ({"<shard>": epoch, ...}); a missing file means no epoch seen yet.
  static StatusOr<std::unique_ptr<Fence>> Open(const std::string& path);

  // OK if `epoch` is at least the shard's largest (persisting it first if larger);
  // UNAVAILABLE ("fenced: ...", naming the larger epoch) otherwise; IO_ERROR if it cannot be
  // persisted.
  Status Admit(uint32_t shard, uint64_t epoch);
  // The largest epoch seen for the shard (0: none).
  uint64_t epoch(uint32_t shard) const;

 private:
  explicit Fence(std::string path) : path_(std::move(path)) {}
  Status Save(const std::map<uint32_t, uint64_t>& epochs) const;

  const std::string path_;
  mutable std::mutex mu_;
  std::map<uint32_t, uint64_t> epochs_;  // guarded by mu_
};

}  // namespace zipg::shard
