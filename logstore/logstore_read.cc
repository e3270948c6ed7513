// LogStore: the reads the shard servers and aggregators make of the written data: a node's
// fragments in the memtables and log shards, get_node_ids and search_node_ids over them, and the
// update feed of a base shard (docs/writes.md).

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <limits>
#include <set>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/memory_plan.h"
#include "graph/partition.h"
#include "layout/record_coding.h"
#include "logstore/logstore.h"
#include "logstore/logstore_internal.h"
#include "util/file.h"
#include "util/memory.h"

namespace zipg::logstore {

using engine::NodeUpdates;
using internal::Contains;

const engine::Shard* LogStore::LogShard::PartFor(int64_t id) const {
  return parts[ShardOf(id, static_cast<uint32_t>(parts.size()))].get();
}

std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> LogStore::ShardsIn(
    const std::vector<int64_t>* generations, std::optional<int64_t> id) const {
  // Log shards are never closed while the LogStore lives, so their pointers stay valid after the
  // data lock is released: the slow compressed reads then do not hold it (a writer waiting for
  // the lock would otherwise starve behind a stream of readers).
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> out;
  for (const auto& ls : log_shards_) {
    if (generations && std::none_of(generations->begin(), generations->end(),
                                    [&ls](int64_t g) { return ls.Covers(g); })) {
      continue;
    }
    if (id) {
      out.emplace_back(ls.PartFor(*id), ls.deletes.get());
    } else {
      for (const auto& part : ls.parts) out.emplace_back(part.get(), ls.deletes.get());
    }
  }
  return out;
}

std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> LogStore::ReadFragments(
    int64_t id, const std::vector<int64_t>& generations, const MemtableVisitor& visit) {
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> shards;
  {
    std::shared_lock data(data_mu_);
    shards = ShardsIn(&generations, id);
    if (frozen_ && Contains(generations, frozen_->generation)) {
      auto it = frozen_->overlay.find(id);
      visit(*frozen_->table, it == frozen_->overlay.end() ? nullptr : &it->second);
    }
    if (Contains(generations, generation_)) visit(*memtable_, nullptr);
  }
  std::lock_guard lock(stats_mu_);
  for (int64_t g : generations) ++fragment_reads_[g];
  return shards;
}

StatusOr<NodeData> LogStore::Fragment(int64_t id, bool any_type, int64_t type,
                                      const std::vector<int64_t>& generations) {
  NodeData out;
  const bool edges = any_type || type >= 0;
  auto shards = ReadFragments(id, generations, [&](const Memtable& t, const NodeUpdates* dead) {
    t.Collect(id, any_type, type, dead, &out);
  });
  for (const auto& [log_shard, deletes] : shards) {
    auto entry = deletes->Lookup(id);
    if (!(entry && entry->props_dead)) {
      ZIPG_ASSIGN_OR_RETURN(auto props, log_shard->GetNodeProperty(id, nullptr));
      if (props) {
        std::sort(props->begin(), props->end());
        out.properties = std::move(props);
      }
    }
    if (edges && !(entry && entry->edges_dead)) {
      ZIPG_ASSIGN_OR_RETURN(
          auto list,
          log_shard->AllEdges(id, any_type ? std::nullopt : std::optional<int64_t>(type)));
      for (auto& e : list) {
        if (!(entry && entry->EdgeDead(e.type, e.dst))) out.edges.push_back(std::move(e));
      }
    }
  }
  return out;
}

StatusOr<std::vector<Edge>> LogStore::FragmentEdges(int64_t id, int64_t type,
                                                    const std::vector<int64_t>& generations,
                                                    const std::vector<int64_t>& dsts,
                                                    bool fill_cache) {
  std::vector<int64_t> wanted = dsts;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<Edge> out;
  if (wanted.empty() || type < 0) return out;
  auto shards = ReadFragments(id, generations, [&](const Memtable& t, const NodeUpdates* dead) {
    t.CollectKeys(id, type, wanted, dead, &out);
  });
  std::vector<int64_t> maybe;
  for (const auto& [log_shard, deletes] : shards) {
    // Only the keys the shard's filter may hold: a read names several generations, and a key
    // lives in one of them.
    maybe.clear();
    for (int64_t dst : wanted) {
      if (log_shard->edges().MayContain(id, type, dst)) maybe.push_back(dst);
    }
    if (maybe.empty()) continue;
    auto entry = deletes->Lookup(id);
    if (entry && entry->edges_dead) continue;
    ZIPG_ASSIGN_OR_RETURN(auto list, edge_cache_.Get(*log_shard, id, type, maybe, fill_cache));
    for (auto& e : list) {
      if (!(entry && entry->EdgeDead(e.type, e.dst))) out.push_back(std::move(e));
    }
  }
  return out;
}

StatusOr<std::vector<int64_t>> LogStore::WrittenNodeIds(const TableIds& in_table,
                                                        const ShardIds& in_shard) {
  std::vector<int64_t> ids;
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> shards;
  {
    std::shared_lock data(data_mu_);
    in_table(*memtable_, nullptr, &ids);
    if (frozen_) in_table(*frozen_->table, &frozen_->overlay, &ids);
    shards = ShardsIn(nullptr, std::nullopt);
  }
  for (const auto& [log_shard, deletes] : shards) {
    ZIPG_ASSIGN_OR_RETURN(auto found, in_shard(*log_shard));
    for (int64_t id : found) {
      auto entry = deletes->Lookup(id);
      if (!(entry && entry->props_dead)) ids.push_back(id);
    }
  }
  return ids;
}

StatusOr<std::vector<int64_t>> LogStore::NodeIds(const Properties& properties) {
  Properties filter = properties;
  std::sort(filter.begin(), filter.end());
  ZIPG_ASSIGN_OR_RETURN(
      auto ids, WrittenNodeIds([&](const Memtable& t, const auto* dead,
                                   std::vector<int64_t>* out) { t.NodeIds(filter, dead, out); },
                               [&](const engine::Shard& s) { return s.GetNodeIds(filter); }));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> LogStore::SearchNodeIds(const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  ZIPG_ASSIGN_OR_RETURN(
      auto ids, WrittenNodeIds([&](const Memtable& t, const auto* dead,
                                   std::vector<int64_t>* out) { t.SearchNodeIds(q, dead, out); },
                               [&](const engine::Shard& s) { return s.SearchNodeIds(q); }));
  CutSearchPart(&ids, q.limit);
  return ids;
}

StatusOr<LogStore::FeedChunk> LogStore::UpdatesSince(uint32_t shard, uint64_t after,
                                                     const std::string& member) {
  if (shard >= feeds_.size()) {
    return Status::InvalidArgument("no shard " + std::to_string(shard) + " in this store");
  }
  FeedChunk chunk;
  // In this order: a batch the read below misses was appended after the check, so it is
  // pushed to the member (docs/replication.md, "Catching up").
  chunk.included = sink_->IsTarget(shard, member);
  chunk.head = feeds_[shard]->last_id();
  ZIPG_ASSIGN_OR_RETURN(chunk.updates, feeds_[shard]->Since(after, kFeedChunkUpdates));
  return chunk;
}

}  // namespace zipg::logstore
