// UpdateFeed: every update the LogStore sent to one base shard, in id order, so that a shard
// replica that missed some can read them again (docs/replication.md, "The feed").
//
// File: records of `u32 length | u64 XXH3-64(payload) | payload`, payload = one posted batch in
// the update wire form with ids (engine/updates.h). Appends are not synced (the WAL is the durable
// copy of every live log's records, and recovery appends them again); Sync() makes the whole file
// durable before a compaction deletes a WAL. At open, a torn or corrupt tail is cut, and so is
// every record from the first one whose first id is >= drop_from.
//
// Thread-safety: Append and Sync are called by one writer at a time; Since and last_id may run
// concurrently with them and with each other.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/updates.h"
#include "util/status.h"

namespace zipg::logstore {

class UpdateFeed {
 public:
  static StatusOr<std::unique_ptr<UpdateFeed>> Open(const std::string& path, uint64_t drop_from);
  ~UpdateFeed();
  UpdateFeed(const UpdateFeed&) = delete;
  UpdateFeed& operator=(const UpdateFeed&) = delete;

  // Appends a batch whose ids are ascending and above last_id() (unnumbered ones are refused).
  Status Append(const std::vector<engine::Update>& updates);
  Status Sync();

  // The last id appended (0 for an empty feed).
  uint64_t last_id() const;
  // The updates with id > after, in order: whole records, stopping at the first record that
  // would take the answer past max_updates (at least one record if any qualifies).
  StatusOr<std::vector<engine::Update>> Since(uint64_t after, size_t max_updates) const;
  // Bytes in the file.
  uint64_t size() const;

 private:
  struct Entry {  // one record: its first and last ids and where it starts
    uint64_t first = 0;
    uint64_t last = 0;
    uint64_t offset = 0;
  };
  UpdateFeed(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
  mutable std::mutex mu_;
  std::vector<Entry> index_;  // guarded by mu_
  uint64_t size_ = 0;         // guarded by mu_
};

}  // namespace zipg::logstore
