// EdgeCache: edges read from immutable shards (the LogStore's log shards), kept decoded so that a
// second read of the same key costs a hash lookup instead of a search of the compressed text
// (docs/writes.md, "Edge cache"). A shard never changes once written (the deletes made since live
// in an overlay the caller applies after the cache), so what was read from it stays true for as
// long as the shard is open.
//
// Entries are per (shard, src, type): the record's location (EdgeFile::Find) and each destination
// looked up in it, present (the edge) or absent. The least recently used entries are dropped
// once the entries' bytes pass the capacity; an entry stops taking destinations at an eighth of
// it (so that one hot record cannot push out the rest), and is not kept at all if its record's
// location alone is larger than that.
//
// Thread-safety: all methods may be called concurrently. Reads of the compressed text happen
// outside the cache's lock. The shard must outlive its entries (the LogStore never closes a log
// shard while it runs).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "layout/shard.h"
#include "util/status.h"

namespace zipg::engine {

class EdgeCache {
 public:
  explicit EdgeCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The edges of (src, type) in `shard` to `dsts` (any order, repeats allowed), as
  // Shard::AssocGet over all timestamps returns them but in no particular order: from the cache
  // where known, the rest read from the shard and remembered. With `fill` false (a scan that would
  // push out what other readers use) nothing is added, reordered or counted in the stats. With
  // capacity 0, every call reads.
  StatusOr<std::vector<Edge>> Get(const layout::Shard& shard, int64_t src, int64_t type,
                                  const std::vector<int64_t>& dsts, bool fill = true);

  // Drops every entry of `shard` (which is no longer read: merged away or reloaded).
  void Forget(const layout::Shard* shard);

  struct Stats {
    uint64_t hits = 0;    // destinations answered from the cache
    uint64_t misses = 0;  // destinations read from a shard
    uint64_t bytes = 0;   // held now (estimated)
    uint64_t entries = 0;
    uint64_t capacity = 0;
  };
  Stats stats() const;

 private:
  struct Key {
    const layout::Shard* shard;
    int64_t src, type;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    Key key;
    std::optional<layout::EdgeFile::Record> record;  // nullopt: no edges of src, type there
    std::map<int64_t, std::optional<Edge>> dsts;     // looked up: the edge, or absent
    uint64_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first

  static uint64_t BytesOf(const std::optional<Edge>& e);
  // Drops the least recently used entries until the bytes fit (mu_ held).
  void Evict();

  const uint64_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;                                                  // guarded by mu_
  std::unordered_map<Key, Lru::iterator, KeyHash> entries_;  // guarded by mu_
  uint64_t bytes_ = 0;                                       // guarded by mu_
  uint64_t hits_ = 0, misses_ = 0;                           // guarded by mu_
};

}  // namespace zipg::engine
