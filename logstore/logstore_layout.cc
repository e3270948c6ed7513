// LogStore: the shard layout and its splits (docs/cluster-changes.md, step 4), and the feeds'
// reads across a split (UpdatesSince).

#include <algorithm>
#include <iostream>

#include "graph/partition.h"
#include "logstore/logstore.h"
#include "logstore/logstore_internal.h"

namespace zipg::logstore {

using engine::Update;
using engine::UpdateOp;
using nlohmann::json;

std::vector<std::pair<uint32_t, uint64_t>> LogStore::Layout() const {
  std::shared_lock lock(feeds_mu_);
  return layout_;
}

uint32_t LogStore::CountAt(uint64_t id) const {
  std::shared_lock lock(feeds_mu_);
  uint32_t count = layout_.front().first;
  for (const auto& [c, from] : layout_) {
    if (from < id) count = c;
  }
  return count;
}

Status LogStore::OpenFeeds(uint32_t count, uint64_t drop_from) {
  ZIPG_RETURN_IF_ERROR(sink_->Grow(count));
  std::unique_lock lock(feeds_mu_);
  for (uint32_t s = static_cast<uint32_t>(feeds_.size()); s < count; ++s) {
    ZIPG_ASSIGN_OR_RETURN(auto feed, UpdateFeed::Open(FeedPath(s), drop_from));
    sink_->SetPrev(s, feed->last_id());
    feeds_.push_back(std::move(feed));
  }
  return Status::OK();
}

std::vector<std::pair<uint32_t, uint64_t>> LogStore::SplitsEnding(int64_t g) const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  for (const auto& [count, z] : Layout()) {
    if (z != 0 && static_cast<int64_t>(z >> 32) == g) out.emplace_back(count, z);
  }
  return out;
}

Status LogStore::AppendMarks(int64_t g) {
  for (const auto& [count, z] : SplitsEnding(g)) {
    const Update mark{UpdateOp::kLayout, static_cast<int64_t>(count), 0, 0, 0, 0, z};
    std::shared_lock lock(feeds_mu_);
    for (uint32_t s = 0; s < count && s < feeds_.size(); ++s) {
      if (feeds_[s]->last_id() < z) ZIPG_RETURN_IF_ERROR(feeds_[s]->Append({mark}));
    }
  }
  return Status::OK();
}

Status LogStore::ApplyLayout(uint32_t count, uint64_t z) {
  {
    std::unique_lock lock(feeds_mu_);
    for (const auto& [c, from] : layout_) {
      if (from == z) return Status::OK();  // applied already (a repeated shipment)
    }
    if (count != 2 * layout_.back().first) {
      return Status::InvalidArgument("a split doubles the shard count (" +
                                     std::to_string(layout_.back().first) + "), not " +
                                     std::to_string(count));
    }
    layout_.emplace_back(count, z);
  }
  // The commit point: once STATE names the layout, recovery opens `count` feeds and lanes.
  ZIPG_RETURN_IF_ERROR(WriteState(ShardRanges(), LiveLogs()));
  ZIPG_RETURN_IF_ERROR(OpenFeeds(count, /*drop_from=*/~uint64_t{0}));
  return AppendMarks(static_cast<int64_t>(z >> 32));
}

StatusOr<json> LogStore::Split(uint32_t count, const std::function<Status(uint32_t)>& publish) {
  if (standby_) return Status::Unavailable("this LogStore is a standby: split through its leader");
  if (std::string why = Refusal(); !why.empty()) return Status::Unavailable(why);
  const auto layout = Layout();
  const uint32_t before = layout.back().first;
  if (count == before && before != layout.front().first) {
    return json{{"shards", count}, {"already", true}};  // a rerun after the switch
  }
  if (count != 2 * before) {
    return Status::InvalidArgument("a split doubles the shard count: " + std::to_string(before) +
                                   " shards become " + std::to_string(2 * before) + ", not " +
                                   std::to_string(count));
  }
  if (count > shard::UpdateSender::kMaxLanes) {
    return Status::InvalidArgument("at most " + std::to_string(shard::UpdateSender::kMaxLanes) +
                                   " shards");
  }
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard compacting(compact_mu_);
  json summary = {{"shards_before", before}, {"shards", count}};
  if (frozen_) {  // a compaction under way: finish it first (writes go on meanwhile)
    json built;
    ZIPG_RETURN_IF_ERROR(BuildFrozen(&built));
  }
  std::chrono::steady_clock::time_point paused;
  auto switch_layout = [&](int64_t g) -> Status {
    paused = std::chrono::steady_clock::now();
    const uint64_t z = static_cast<uint64_t>(g) << 32 | (kLayoutIndex + 1);
    summary["generation"] = g;
    summary["mark"] = z;
    ZIPG_RETURN_IF_ERROR(ApplyLayout(count, z));
    if (ship_ && !degraded_) {
      const std::string mismatch = internal::ShipMismatch(
          ship_->Send(ShipKind::kLayout, epoch_, count, z, {}, options_.ship_timeout_ms),
          static_cast<uint64_t>(g + 1), 0);
      if (!mismatch.empty()) ZIPG_RETURN_IF_ERROR(Degrade("the split: " + mismatch));
    }
    // The mark on every old lane: each replica applies it and switches its halves in.
    const Update mark{UpdateOp::kLayout, static_cast<int64_t>(count), 0, 0, 0, 0, z};
    std::vector<std::pair<uint32_t, shard::UpdateSender::Reply>> posted;
    for (uint32_t s = 0; s < before; ++s) {
      ZIPG_ASSIGN_OR_RETURN(auto reply, sink_->Post(s, {mark}));
      posted.emplace_back(s, std::move(reply));
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.update_timeout_ms);
    json marks = json::object();
    for (auto& [s, reply] : posted) {
      auto done = shard::UpdateSender::Await(&reply, s, deadline);
      marks[std::to_string(s)] = done.ok() ? "ok" : done.status().ToString();
    }
    summary["marks"] = marks;
    for (uint32_t t = before; t < count; ++t) sink_->SetPrev(t, z);
    summary["marks_ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - paused)
            .count();
    if (publish) ZIPG_RETURN_IF_ERROR(publish(count));
    return Status::OK();
  };
  ZIPG_RETURN_IF_ERROR(Freeze(/*force=*/true, switch_layout).status());
  summary["paused_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - paused).count();
  summary["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WakeCompactor();  // the generation the split ended
  return summary;
}

StatusOr<LogStore::FeedChunk> LogStore::UpdatesSince(uint32_t shard, uint64_t after,
                                                     const std::string& member, uint32_t count) {
  std::shared_lock lock(feeds_mu_);
  if (count == 0) count = layout_.back().first;
  if (shard >= count || count > layout_.back().first) {
    return Status::InvalidArgument("no shard " + std::to_string(shard) + " of " +
                                   std::to_string(count) + " in this store (it has " +
                                   std::to_string(layout_.back().first) + ")");
  }
  FeedChunk chunk;
  chunk.sender = sink_->sender_id();
  // In this order: a batch the read below misses was appended after the check, so it is
  // pushed to the member (docs/replication.md, "Catching up").
  chunk.included = sink_->IsTarget(shard, member);
  chunk.head = feeds_[shard]->last_id();
  // The layout `after` falls in: before a later split, shard `shard` is part of its parent's
  // feed (docs/cluster-changes.md, step 4), read up to that split's mark.
  size_t k = 0;
  while (k + 1 < layout_.size() && layout_[k + 1].second <= after) ++k;
  if (k + 1 == layout_.size()) {
    if (count != layout_.back().first) {
      return Status::FailedPrecondition("shard " + std::to_string(shard) + " of " +
                                        std::to_string(count) + " is past the split to " +
                                        std::to_string(layout_.back().first) +
                                        " shards: its server must switch to the new layout first");
    }
    ZIPG_ASSIGN_OR_RETURN(chunk.updates, feeds_[shard]->Since(after, kFeedChunkUpdates));
    return chunk;
  }
  // Kept: the updates of shard `shard` in the asker's numbering (all of the parent's for a
  // server that has not switched yet), and the mark that ends this layout.
  const UpdateFeed& parent = *feeds_[shard % layout_[k].first];
  const uint64_t end = layout_[k + 1].second;
  for (uint64_t from = after; from < end && chunk.updates.empty();) {
    ZIPG_ASSIGN_OR_RETURN(auto read, parent.Since(from, kFeedChunkUpdates));
    if (read.empty()) break;
    for (const Update& u : read) {
      if (u.id > end) break;
      if (u.op == UpdateOp::kLayout ? u.id == end : ShardOf(u.node, count) == shard) {
        chunk.updates.push_back(u);
      }
    }
    from = read.back().id;
  }
  return chunk;
}

}  // namespace zipg::logstore
