// MergedShard: a base shard as the writes left it (docs/writes.md, "Reads at the shard server").
// A node no write touched is read from the compressed Shard alone. A touched node is
// materialized: the base data minus its deletion set, plus the LogStore's fragments that its
// update pointers name, sorted in the contract's order; the operation is then answered from that
// list (graph/edge_list.h).
//
// Thread-safety: reads may run concurrently with each other and with Apply.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/edge_list.h"
#include "shard/shard.h"
#include "shard/updates.h"

namespace zipg::shard {

// Where a shard server gets a node's data from the LogStore.
class FragmentSource {
 public:
  virtual ~FragmentSource() = default;
  // The node's live data in `generations`: edges of every type (any_type), of `type`, or none
  // (type < 0). limit >= 0 (with one type): only the first `limit` of those edges in contract
  // order, sorted, and no properties.
  virtual StatusOr<NodeData> Fragment(int64_t id, bool any_type, int64_t type,
                                      const std::vector<int64_t>& generations,
                                      int64_t limit = -1) = 0;
  // The live edges of (id, type) to `dsts` in `generations`, any order.
  virtual StatusOr<std::vector<Edge>> FragmentEdges(int64_t id, int64_t type,
                                                    const std::vector<int64_t>& generations,
                                                    const std::vector<int64_t>& dsts) = 0;
  // How many live edges of (id, type) `generations` hold.
  virtual StatusOr<int64_t> FragmentCount(int64_t id, int64_t type,
                                          const std::vector<int64_t>& generations) = 0;
};

class MergedShard final : public ShardReader {
 public:
  // `base` and `log` must outlive this.
  MergedShard(const Shard* base, std::unique_ptr<UpdateIndex> updates, FragmentSource* log)
      : base_(base), updates_(std::move(updates)), log_(log) {}

  const UpdateIndex& updates() const { return *updates_; }
  // Applies a batch of updates from the LogStore (persisted before it returns).
  StatusOr<std::vector<bool>> Apply(const std::vector<Update>& batch) {
    return updates_->Apply(base_, batch);
  }

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) const override;
  StatusOr<bool> NodeMatches(int64_t id, const Properties& filter) const override;
  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) const override;
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

 private:
  enum class Want { kProperties, kType, kAllTypes };
  // assoc_range of a touched node with pos + limit up to this reads only the first pos + limit
  // edges of each fragment; beyond it, the node is materialized.
  static constexpr int64_t kBoundedRange = 10000;
  // The node's live data; edges sorted by (type, NewestFirst).
  StatusOr<NodeData> Materialize(int64_t id, const NodeUpdates& entry, Want want,
                                 int64_t type) const;
  // Edges of (id, type) if the node is touched; nullopt to use the base shard.
  StatusOr<std::optional<EdgeList>> TouchedEdges(int64_t id, int64_t type) const;

  const Shard* base_;
  std::unique_ptr<UpdateIndex> updates_;
  FragmentSource* log_;
};

}  // namespace zipg::shard
