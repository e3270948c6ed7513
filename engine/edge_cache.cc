#include "engine/edge_cache.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace zipg::engine {

namespace {
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}  // namespace

size_t EdgeCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = std::hash<const void*>()(k.shard);
  for (int64_t v : {k.src, k.type}) {
    h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

uint64_t EdgeCache::BytesOf(const std::optional<Edge>& e) {
  uint64_t bytes = 64 + sizeof(std::optional<Edge>);  // the map node
  if (e) {
    for (const auto& [name, value] : e->properties) bytes += 64 + name.size() + value.size();
  }
  return bytes;
}

StatusOr<std::vector<Edge>> EdgeCache::Get(const layout::Shard& shard, int64_t src, int64_t type,
                                           const std::vector<int64_t>& dsts, bool fill) {
  std::vector<int64_t> wanted = dsts;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<Edge> out;
  if (wanted.empty()) return out;
  const Key key{&shard, src, type};
  std::optional<layout::EdgeFile::Record> record;
  bool record_known = false;
  std::vector<int64_t> missing;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      missing = wanted;
    } else {
      if (fill) lru_.splice(lru_.begin(), lru_, it->second);  // a scan leaves the order alone
      const Entry& e = *it->second;
      record = e.record;
      record_known = true;
      for (int64_t dst : wanted) {
        auto d = e.dsts.find(dst);
        if (d == e.dsts.end()) {
          missing.push_back(dst);
        } else if (d->second) {
          out.push_back(*d->second);
        }
      }
    }
    if (fill) {  // a scan's lookups would blur the readers' hit rate
      hits_ += wanted.size() - missing.size();
      misses_ += missing.size();
    }
  }
  if (missing.empty()) return out;
  if (!record_known) {
    ZIPG_ASSIGN_OR_RETURN(record, shard.edges().Find(src, type));
  }
  std::map<int64_t, std::optional<Edge>> found;  // every missing destination: absent, or its edge
  for (int64_t dst : missing) found[dst] = std::nullopt;
  if (record) {
    ZIPG_ASSIGN_OR_RETURN(auto edges, shard.EdgesTo(*record, missing, kMin, kMax));
    for (Edge& e : edges) {
      const int64_t dst = e.dst;
      found[dst] = std::move(e);
    }
  }
  for (const auto& [dst, e] : found) {
    if (e) out.push_back(*e);
  }
  if (capacity_ == 0 || !fill) return out;

  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    Entry e{key, record, {}, sizeof(Entry) + 64 + (record ? record->head.size() : 0)};
    if (e.bytes > capacity_ / 8) return out;  // too small a cache to hold even the location
    lru_.push_front(std::move(e));
    it = entries_.emplace(key, lru_.begin()).first;
    bytes_ += lru_.front().bytes;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  Entry& e = *it->second;
  for (auto& [dst, edge] : found) {
    const uint64_t bytes = BytesOf(edge);
    if (e.bytes + bytes > capacity_ / 8) break;  // one hot record must not push out the rest
    if (e.dsts.emplace(dst, std::move(edge)).second) {
      e.bytes += bytes;
      bytes_ += bytes;
    }
  }
  Evict();
  return out;
}

void EdgeCache::Forget(const layout::Shard* shard) {
  std::lock_guard lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->key.shard != shard) {
      ++it;
      continue;
    }
    bytes_ -= it->bytes;
    entries_.erase(it->key);
    it = lru_.erase(it);
  }
}

void EdgeCache::Evict() {
  while (bytes_ > capacity_ && !lru_.empty()) {
    const Entry& last = lru_.back();
    bytes_ -= last.bytes;
    entries_.erase(last.key);
    lru_.pop_back();
  }
}

EdgeCache::Stats EdgeCache::stats() const {
  std::lock_guard lock(mu_);
  return {hits_, misses_, bytes_, entries_.size(), capacity_};
}

}  // namespace zipg::engine
