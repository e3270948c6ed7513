// MergedShard: a base shard as the writes left it (docs/writes.md, "Reads of a written node"). A
// node no write touched is read from the compressed Shard alone. For a written node the
// DeltaIndex (shard/delta.h) places every live edge, the base record's and the LogStore's, in
// the contract's order without reading them, so each operation reads only what it answers plus
// O(log degree) keys; the LogStore is asked only for the edges (and properties) in the answer.
//
// Thread-safety: reads may run concurrently with each other and with Apply.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/delta.h"
#include "graph/edge_list.h"
#include "layout/shard.h"

namespace zipg::engine {

// Where a shard server gets a written node's data from the LogStore.
class FragmentSource {
 public:
  virtual ~FragmentSource() = default;
  // The node's live properties in `generations`; nullopt if they hold none.
  virtual StatusOr<std::optional<Properties>> FragmentProperties(
      int64_t id, const std::vector<int64_t>& generations) = 0;
  // The live edges of (id, type) to `dsts` in `generations`, any order.
  virtual StatusOr<std::vector<Edge>> FragmentEdges(int64_t id, int64_t type,
                                                    const std::vector<int64_t>& generations,
                                                    const std::vector<int64_t>& dsts) = 0;
  // FragmentEdges for each ask, one answer each (for whole-shard readers: fewer round trips).
  struct Ask {
    int64_t id = 0, type = 0;
    std::vector<int64_t> generations, dsts;
  };
  virtual StatusOr<std::vector<std::vector<Edge>>> FragmentEdgesBatch(
      const std::vector<Ask>& asks) {
    std::vector<std::vector<Edge>> out;
    for (const Ask& a : asks) {
      ZIPG_ASSIGN_OR_RETURN(auto edges, FragmentEdges(a.id, a.type, a.generations, a.dsts));
      out.push_back(std::move(edges));
    }
    return out;
  }
};

// Counts, on this thread while it lives, the LogStore versions the merged reads named and did not
// get: an edge or the properties a written node's delta points to that the LogStore does not
// hold in that version, left out of the answer (never another version in its place). Before
// the write that made them is committed that is expected (the LogStore applies after the
// replicas); for a node whose every update is committed it means this replica and the LogStore
// it asked disagree, and a linearizable read must not answer (shard/server.cc ReadNode).
// Not thread-safe: one per reading thread, nested scopes count in the innermost.
class MissedVersions {
 public:
  MissedVersions() : outer_(current_) { current_ = this; }
  ~MissedVersions() { current_ = outer_; }
  MissedVersions(const MissedVersions&) = delete;
  MissedVersions& operator=(const MissedVersions&) = delete;

  uint64_t count() const { return count_; }
  // Called by the reads for each version left out.
  static void Note() {
    if (current_ != nullptr) ++current_->count_;
  }

 private:
  static thread_local MissedVersions* current_;
  MissedVersions* outer_;
  uint64_t count_ = 0;
};

class MergedShard final : public layout::ShardReader {
 public:
  // `base` and `log` must outlive this.
  MergedShard(const layout::Shard* base, std::unique_ptr<DeltaIndex> delta, FragmentSource* log)
      : base_(base), delta_(std::move(delta)), log_(log) {}

  const DeltaIndex& delta() const { return *delta_; }
  DeltaIndex& mutable_delta() { return *delta_; }
  Status SyncDelta() { return delta_->Sync(); }
  // Applies a batch of updates from the LogStore (persisted before it returns).
  StatusOr<std::vector<bool>> Apply(const std::vector<Update>& batch) {
    return delta_->Apply(*base_, batch);
  }

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) const override;
  StatusOr<bool> NodeMatches(int64_t id, const Properties& filter) const override;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) const override;
  StatusOr<std::vector<int64_t>> SearchNodeIds(const NodeSearch& q) const override;
  StatusOr<std::vector<int64_t>> NeighborIds(int64_t id,
                                             std::optional<int64_t> type) const override;
  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) const override;
  StatusOr<std::pair<int64_t, int64_t>> EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                  int64_t hi) const override;
  StatusOr<std::optional<Edge>> EdgeData(int64_t id, int64_t type,
                                         int64_t time_order) const override;
  StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                         int64_t limit) const override;
  StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type, const std::vector<int64_t>& ids,
                                       int64_t low, int64_t high) const override;
  StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low, int64_t high,
                                             int64_t limit) const override;
  StatusOr<std::vector<int64_t>> Sources(bool include_dsts,
                                         const ListBounds& bounds) const override;

 private:
  class TypeView;
  // The merged view of (id, type), or nullopt if the base alone answers (no write touched it).
  StatusOr<std::optional<TypeView>> View(int64_t id, int64_t type) const;
  // `ids` (the base's answer to a node query) less the nodes whose properties were written since.
  std::vector<int64_t> WithBaseProperties(std::vector<int64_t> ids) const;
  // The node's live properties: the base's unless deleted, else the LogStore's.
  StatusOr<std::optional<zipg::Properties>> LiveProperties(int64_t id, const NodeDelta& node) const;

  const layout::Shard* base_;
  std::unique_ptr<DeltaIndex> delta_;
  FragmentSource* log_;
};

}  // namespace zipg::engine
