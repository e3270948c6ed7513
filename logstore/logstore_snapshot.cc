// LogStore: snapshots (docs/consistency.md, "Snapshots"): the applied id, the retention horizon
// and the pruning of the versions kept for reads at a snapshot. The versions themselves live with
// the fragments: the memtables' histories (logstore/history.h), the frozen overlay's and the log
// shards' deletion sets (engine/updates.h).

#include <algorithm>
#include <chrono>

#include "logstore/logstore.h"

namespace zipg::logstore {

void LogStore::NoteApplied(uint64_t id) {
  if (id > applied_id_.load()) applied_id_ = id;
  retention_.Note(id);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_prune_ < std::chrono::milliseconds(200)) return;
  last_prune_ = now;
  const uint64_t horizon = retention_.Horizon();
  memtable_->history()->Prune(horizon);
  if (frozen_) {
    frozen_->table->history()->Prune(horizon);
    frozen_->overlay_history.Prune(horizon);
  }
  for (auto& ls : log_shards_) ls.deletes->Prune(horizon);
  for (auto& ls : retired_) ls.deletes->Prune(horizon);
  // Merged shards whose swap the horizon passed need their inputs no more (those stay open in
  // retired_ until destruction, as before snapshots).
  for (auto& ls : log_shards_) {
    if (ls.merged_at != 0 && ls.merged_at <= horizon) {
      ls.merged_at = 0;
      ls.inputs.clear();
    }
  }
  for (auto it = histories_.begin(); it != histories_.end();) {
    it->second->Prune(horizon);
    // A compacted generation's history only shrinks: once empty, it is done.
    it = it->second->changes() == 0 ? histories_.erase(it) : std::next(it);
  }
}

uint64_t LogStore::SnapshotFloor() const { return std::max(floor_.load(), retention_.Horizon()); }

StatusOr<uint64_t> LogStore::Snapshot() {
  if (standby_) return Status::Unavailable("this LogStore is a standby: ask its leader");
  const uint64_t seq = applied_id_.load();
  // Replicas of shards with no update in flight learn that they hold everything up to seq.
  sink_->NotifyIdle();
  return seq;
}

}  // namespace zipg::logstore
