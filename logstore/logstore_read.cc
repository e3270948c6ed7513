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
#include <thread>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/memory_plan.h"
#include "graph/partition.h"
#include "layout/record_coding.h"
#include "logstore/logstore.h"
#include "logstore/logstore_internal.h"
#include "util/call_deadline.h"
#include "util/file.h"
#include "util/memory.h"
#include "util/snapshot.h"

namespace zipg::logstore {

using engine::NodeUpdates;
using internal::Contains;

const layout::Shard* LogStore::LogShard::PartFor(int64_t id) const {
  return parts[ShardOf(id, static_cast<uint32_t>(parts.size()))].get();
}

std::vector<LogStore::ShardRef> LogStore::ShardsIn(const std::vector<int64_t>* generations,
                                                   std::optional<int64_t> id) const {
  // Log shards are never closed while the LogStore lives, so their pointers stay valid after the
  // data lock is released: the slow compressed reads then do not hold it (a writer waiting for
  // the lock would otherwise starve behind a stream of readers).
  std::vector<ShardRef> out;
  const uint64_t at = ReadAt::Current();
  for (const auto& ls : log_shards_) AddShardRefs(ls, generations, id, at, &out);
  return out;
}

void LogStore::AddShardRefs(const LogShard& ls, const std::vector<int64_t>* generations,
                            std::optional<int64_t> id, uint64_t at,
                            std::vector<ShardRef>* out) const {
  if (generations && std::none_of(generations->begin(), generations->end(),
                                  [&ls](int64_t g) { return ls.Covers(g); })) {
    return;
  }
  if (at != 0 && at < ls.merged_at) {  // the merge dropped versions this snapshot sees
    for (const LogShard* input : ls.inputs) AddShardRefs(*input, generations, id, at, out);
    return;
  }
  const uint32_t parts = static_cast<uint32_t>(ls.parts.size());
  if (id) {
    out->push_back(
        {ls.PartFor(*id), ls.deletes.get(), ls.history.get(), ShardOf(*id, parts), parts});
  } else {
    for (uint32_t p = 0; p < parts; ++p) {
      out->push_back({ls.parts[p].get(), ls.deletes.get(), ls.history.get(), p, parts});
    }
  }
}

std::shared_ptr<const NodeUpdates> LogStore::OverlayEntry(int64_t id) const {
  auto it = frozen_->overlay.find(id);
  // The current entry, not owned: valid while the data lock is held.
  std::shared_ptr<const NodeUpdates> current =
      it == frozen_->overlay.end()
          ? nullptr
          : std::shared_ptr<const NodeUpdates>(std::shared_ptr<void>(), &it->second);
  return frozen_->overlay_history.At(id, ReadAt::Current(), std::move(current));
}

std::vector<LogStore::ShardRef> LogStore::ReadFragments(int64_t id,
                                                        const std::vector<int64_t>& generations,
                                                        const MemtableVisitor& visit) {
  std::vector<ShardRef> shards;
  {
    std::shared_lock data(data_mu_);
    shards = ShardsIn(&generations, id);
    if (frozen_ && Contains(generations, frozen_->generation)) {
      visit(*frozen_->table, OverlayEntry(id).get());
    }
    if (Contains(generations, generation_)) visit(*memtable_, nullptr);
  }
  std::lock_guard lock(stats_mu_);
  for (int64_t g : generations) ++fragment_reads_[g];
  return shards;
}

Status LogStore::CheckSnapshot() {
  const uint64_t at = ReadAt::Current();
  if (at == 0) return Status::OK();
  if (at > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::InvalidArgument("at must be a sequence returned by snapshot, not " +
                                   std::to_string(static_cast<int64_t>(at)));
  }
  // A snapshot not applied here yet (a standby just promoted): wait for it.
  const auto deadline =
      CallDeadline::Current().value_or(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  while (applied_id_.load() < at) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::DeadlineExceeded("snapshot " + std::to_string(at) +
                                      " is not reached yet by the LogStore (it has applied " +
                                      std::to_string(applied_id_.load()) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Held(at);
}

Status LogStore::Held(uint64_t at) const {
  if (at == 0) return Status::OK();
  if (const uint64_t floor = SnapshotFloor(); at < floor) {
    return Status::FailedPrecondition(SnapshotGoneMessage(at, floor, "the LogStore"));
  }
  return Status::OK();
}

std::optional<NodeAt> LogStore::HistoryAt(const ShardRef& ref, int64_t id, uint64_t at) {
  if (at == 0 || ref.history == nullptr || !ref.history->ChangedAfter(id, at)) {
    return std::nullopt;
  }
  return ref.history->At(id, at);
}

Status LogStore::CheckAppliedThrough(int64_t id) const {
  const uint64_t applied = applied_id_.load();
  if (id <= 0 || static_cast<uint64_t>(id) <= applied) return Status::OK();
  return Status::Unavailable("this LogStore has applied updates through " +
                             std::to_string(applied) + ", the reading replica has seen " +
                             std::to_string(id) +
                             " committed: it is not the leader that committed them");
}

StatusOr<NodeData> LogStore::Fragment(int64_t id, bool any_type, int64_t type,
                                      const std::vector<int64_t>& generations) {
  ZIPG_RETURN_IF_ERROR(CheckSnapshot());
  const uint64_t at = ReadAt::Current();
  NodeData out;
  const bool edges = any_type || type >= 0;
  auto shards = ReadFragments(id, generations, [&](const Memtable& t, const NodeUpdates* dead) {
    t.Collect(id, any_type, type, dead, &out);
  });
  for (const auto& ref : shards) {
    auto entry = ref.deletes->Lookup(id);
    const std::optional<NodeAt> fix = HistoryAt(ref, id, at);
    if (!(entry && entry->props_dead)) {
      std::optional<Properties> props;
      if (fix && fix->props_changed) {
        props = fix->props;
      } else {
        ZIPG_ASSIGN_OR_RETURN(props, ref.shard->GetNodeProperty(id, nullptr));
      }
      if (props) {
        std::sort(props->begin(), props->end());
        out.properties = std::move(props);
      }
    }
    if (edges && !(entry && entry->edges_dead)) {
      ZIPG_ASSIGN_OR_RETURN(
          auto list,
          ref.shard->AllEdges(id, any_type ? std::nullopt : std::optional<int64_t>(type)));
      if (fix) fix->FixEdges(&list, any_type, type);
      for (auto& e : list) {
        if (!(entry && entry->EdgeDead(e.type, e.dst))) out.edges.push_back(std::move(e));
      }
    }
  }
  ZIPG_RETURN_IF_ERROR(Held(at));  // not forgotten while the read ran
  return out;
}

StatusOr<std::vector<Edge>> LogStore::FragmentEdges(int64_t id, int64_t type,
                                                    const std::vector<int64_t>& generations,
                                                    const std::vector<int64_t>& dsts,
                                                    bool fill_cache) {
  ZIPG_RETURN_IF_ERROR(CheckSnapshot());
  const uint64_t at = ReadAt::Current();
  std::vector<int64_t> wanted = dsts;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<Edge> out;
  if (wanted.empty() || type < 0) return out;
  auto shards = ReadFragments(id, generations, [&](const Memtable& t, const NodeUpdates* dead) {
    t.CollectKeys(id, type, wanted, dead, &out);
  });
  std::vector<int64_t> maybe;
  for (const auto& ref : shards) {
    auto entry = ref.deletes->Lookup(id);
    if (entry && entry->edges_dead) continue;
    const std::optional<NodeAt> fix = HistoryAt(ref, id, at);
    // Only the keys the shard's filter may hold: a read names several generations, and a key
    // lives in one of them. A key changed after the snapshot is taken from the history.
    maybe.clear();
    for (int64_t dst : wanted) {
      if (fix) {
        auto k = fix->edges.find({type, dst});
        if (k != fix->edges.end()) {
          if (k->second && !(entry && entry->EdgeDead(type, dst))) out.push_back(*k->second);
          continue;
        }
      }
      if (ref.shard->edges().MayContain(id, type, dst)) maybe.push_back(dst);
    }
    if (maybe.empty()) continue;
    ZIPG_ASSIGN_OR_RETURN(auto list, edge_cache_.Get(*ref.shard, id, type, maybe, fill_cache));
    for (auto& e : list) {
      if (!(entry && entry->EdgeDead(e.type, e.dst))) out.push_back(std::move(e));
    }
  }
  ZIPG_RETURN_IF_ERROR(Held(at));  // not forgotten while the read ran
  return out;
}

StatusOr<std::vector<int64_t>> LogStore::WrittenNodeIds(
    const TableIds& in_table, const ShardIds& in_shard,
    const std::function<bool(const Properties&)>& match) {
  ZIPG_RETURN_IF_ERROR(CheckSnapshot());
  const uint64_t at = ReadAt::Current();
  std::vector<int64_t> ids;
  std::vector<ShardRef> shards;
  {
    std::shared_lock data(data_mu_);
    in_table(*memtable_, nullptr, &ids);
    if (frozen_) {
      in_table(
          *frozen_->table,
          [&](int64_t id) {
            auto entry = OverlayEntry(id);
            return entry && entry->props_dead;
          },
          &ids);
    }
    shards = ShardsIn(nullptr, std::nullopt);
  }
  // A log shard's memtable history is per generation, not per part: each node is decided by
  // the part that holds it.
  for (const auto& ref : shards) {
    std::vector<int64_t> changed;
    if (at != 0 && ref.history) changed = ref.history->PropsChangedAfter(at);
    ZIPG_ASSIGN_OR_RETURN(auto found, in_shard(*ref.shard));
    for (int64_t id : found) {
      if (!changed.empty() && std::binary_search(changed.begin(), changed.end(), id)) continue;
      auto entry = ref.deletes->Lookup(id);
      if (!(entry && entry->props_dead)) ids.push_back(id);
    }
    for (int64_t id : changed) {
      if (ShardOf(id, ref.parts) != ref.part) continue;  // another part's node
      const NodeAt fix = ref.history->At(id, at);
      if (!fix.props || !match(*fix.props)) continue;
      auto entry = ref.deletes->Lookup(id);
      if (!(entry && entry->props_dead)) ids.push_back(id);
    }
  }
  ZIPG_RETURN_IF_ERROR(Held(at));  // not forgotten while the read ran
  return ids;
}

StatusOr<std::vector<int64_t>> LogStore::NodeIds(const Properties& properties) {
  Properties filter = properties;
  std::sort(filter.begin(), filter.end());
  ZIPG_ASSIGN_OR_RETURN(
      auto ids, WrittenNodeIds([&](const Memtable& t, const Memtable::PropsDead& dead,
                                   std::vector<int64_t>* out) { t.NodeIds(filter, dead, out); },
                               [&](const layout::Shard& s) { return s.GetNodeIds(filter); },
                               [&](const Properties& props) { return MatchesAll(props, filter); }));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> LogStore::SearchNodeIds(const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  ZIPG_ASSIGN_OR_RETURN(
      auto ids, WrittenNodeIds([&](const Memtable& t, const Memtable::PropsDead& dead,
                                   std::vector<int64_t>* out) { t.SearchNodeIds(q, dead, out); },
                               [&](const layout::Shard& s) { return s.SearchNodeIds(q); },
                               [&](const Properties& props) { return PropertiesMatch(props, q); }));
  CutSearchPart(&ids, q.limit);
  return ids;
}

}  // namespace zipg::logstore
