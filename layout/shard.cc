// Shard-local reads over a NodeFile and an EdgeFile.

#include "layout/shard.h"

#include <algorithm>
#include <limits>

namespace zipg::layout {

StatusOr<std::unique_ptr<Shard>> Shard::Open(const std::string& dir,
                                             const layout::OpenOptions& options) {
  std::unique_ptr<Shard> shard(new Shard());
  ZIPG_ASSIGN_OR_RETURN(shard->nodes_, layout::NodeFile::Open(dir + "/nodes", options));
  ZIPG_ASSIGN_OR_RETURN(shard->edges_, layout::EdgeFile::Open(dir + "/edges", options));
  return shard;
}

StatusOr<std::optional<Properties>> Shard::GetNodeProperty(
    int64_t id, const std::vector<std::string>* names) const {
  return nodes_->Get(id, names);
}

StatusOr<bool> Shard::NodeMatches(int64_t id, const Properties& filter) const {
  return nodes_->Matches(id, filter);
}

StatusOr<std::vector<int64_t>> Shard::GetNodeIds(const Properties& properties) const {
  return nodes_->FindIds(properties);
}

StatusOr<std::vector<int64_t>> Shard::SearchNodeIds(const NodeSearch& q) const {
  return nodes_->SearchValues(q.pattern, q.match, q.property ? &*q.property : nullptr,
                              kMaxSearchOccurrences);
}

StatusOr<std::vector<layout::EdgeFile::Record>> Shard::Records(int64_t id,
                                                               std::optional<int64_t> type) const {
  if (!type) return edges_->FindAll(id);
  std::vector<layout::EdgeFile::Record> records;
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, *type));
  if (record) records.push_back(std::move(*record));
  return records;
}

StatusOr<std::vector<int64_t>> Shard::NeighborIds(int64_t id, std::optional<int64_t> type) const {
  ZIPG_ASSIGN_OR_RETURN(auto records, Records(id, type));
  std::vector<int64_t> ids;
  for (const auto& record : records) {
    ZIPG_ASSIGN_OR_RETURN(auto dsts, edges_->Destinations(record, 0, record.count));
    ids.insert(ids.end(), dsts.begin(), dsts.end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> Shard::Sources(bool include_dsts, const ListBounds& bounds) const {
  return SourcesExcept(include_dsts, {}, bounds);
}

StatusOr<std::vector<int64_t>> Shard::SourcesExcept(bool include_dsts,
                                                    const std::vector<int64_t>& skip,
                                                    const ListBounds& bounds) const {
  auto skipped = [&](int64_t id) { return std::binary_search(skip.begin(), skip.end(), id); };
  std::vector<int64_t> ids;
  // Distinct ids within bounds.max_ids (duplicates removed before giving up).
  auto bounded = [&]() -> Status {
    if (ids.size() <= bounds.max_ids) return Status::OK();
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.size() <= bounds.max_ids) return Status::OK();
    return Status::ResourceExhausted("more than " + std::to_string(bounds.max_ids) +
                                     " sources (the query's memory budget)");
  };
  for (int64_t id : nodes_->ids()) {
    if (!skipped(id)) ids.push_back(id);
  }
  ZIPG_RETURN_IF_ERROR(bounded());
  uint64_t records = 0;
  ZIPG_RETURN_IF_ERROR(edges_->ForEachRecord(
      [&](const layout::EdgeFile::Record& record, std::vector<Edge> edges) -> Status {
        if (++records % 256 == 0 && std::chrono::steady_clock::now() > bounds.deadline) {
          return Status::DeadlineExceeded("listing the sources ran out of the query's deadline");
        }
        if (skipped(record.src)) return Status::OK();
        ids.push_back(record.src);
        if (include_dsts) {
          for (const Edge& e : edges) ids.push_back(e.dst);
        }
        return ids.size() / 2 > bounds.max_ids ? bounded() : Status::OK();
      }));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  ZIPG_RETURN_IF_ERROR(bounded());
  return ids;
}

StatusOr<std::vector<Edge>> Shard::AllEdges(int64_t id, std::optional<int64_t> type) const {
  ZIPG_ASSIGN_OR_RETURN(auto records, Records(id, type));
  std::vector<Edge> out;
  for (const auto& record : records) {
    ZIPG_ASSIGN_OR_RETURN(auto edges, edges_->Edges(record, 0, record.count));
    for (auto& e : edges) out.push_back(std::move(e));
  }
  return out;
}

StatusOr<int64_t> Shard::AssocCount(int64_t id, int64_t type) const {
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, type));
  return record ? static_cast<int64_t>(record->count) : 0;
}

StatusOr<std::pair<int64_t, int64_t>> Shard::EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                       int64_t hi) const {
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, type));
  if (!record) return std::pair<int64_t, int64_t>(0, 0);
  ZIPG_ASSIGN_OR_RETURN(auto range, edges_->TimeRange(*record, lo, hi));
  return std::pair<int64_t, int64_t>(range.first, range.second);
}

StatusOr<std::optional<Edge>> Shard::EdgeData(int64_t id, int64_t type, int64_t time_order) const {
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, type));
  if (!record || time_order < 0 || static_cast<uint64_t>(time_order) >= record->count) {
    return std::optional<Edge>();
  }
  ZIPG_ASSIGN_OR_RETURN(auto edges, edges_->Edges(*record, time_order, time_order + 1));
  return std::optional<Edge>(std::move(edges.at(0)));
}

StatusOr<std::vector<Edge>> Shard::AssocRange(int64_t id, int64_t type, int64_t pos,
                                              int64_t limit) const {
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, type));
  if (!record || limit == 0) return std::vector<Edge>();
  const uint64_t begin = static_cast<uint64_t>(pos);
  const uint64_t end = begin + std::min<uint64_t>(static_cast<uint64_t>(limit), record->count);
  return edges_->Edges(*record, begin, end);
}

StatusOr<std::vector<Edge>> Shard::AssocGet(int64_t id, int64_t type,
                                            const std::vector<int64_t>& ids, int64_t low,
                                            int64_t high) const {
  if (ids.empty()) return std::vector<Edge>();
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, type));
  if (!record) return std::vector<Edge>();
  std::vector<int64_t> wanted = ids;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  return EdgesTo(*record, wanted, low, high);
}

StatusOr<std::vector<Edge>> Shard::EdgesTo(const layout::EdgeFile::Record& record,
                                           const std::vector<int64_t>& wanted, int64_t low,
                                           int64_t high) const {
  std::vector<uint64_t> positions;  // TimeOrders of the wanted edges, ascending (newest first)
  if (record.order_width > 0 && wanted.size() * 64 < record.count) {
    // Few ids in a large record: look each one up in the destination index.
    for (int64_t dst : wanted) {
      ZIPG_ASSIGN_OR_RETURN(auto at, edges_->FindDst(record, dst));
      if (at) positions.push_back(*at);
    }
    std::sort(positions.begin(), positions.end());
  } else {
    std::pair<uint64_t, uint64_t> range{0, record.count};
    if (low != std::numeric_limits<int64_t>::min() || high != std::numeric_limits<int64_t>::max()) {
      ZIPG_ASSIGN_OR_RETURN(range, edges_->TimeRange(record, low, high));
    }
    ZIPG_ASSIGN_OR_RETURN(auto dsts, edges_->Destinations(record, range.first, range.second));
    for (uint64_t i = 0; i < dsts.size(); ++i) {
      if (std::binary_search(wanted.begin(), wanted.end(), dsts[i])) {
        positions.push_back(range.first + i);
      }
    }
  }
  // Runs of neighbouring positions in one read each.
  std::vector<Edge> out;
  for (size_t a = 0; a < positions.size();) {
    size_t b = a + 1;
    while (b < positions.size() && positions[b] == positions[b - 1] + 1) ++b;
    ZIPG_ASSIGN_OR_RETURN(auto run, edges_->Edges(record, positions[a], positions[b - 1] + 1));
    for (Edge& e : run) {
      if (e.timestamp >= low && e.timestamp <= high) out.push_back(std::move(e));
    }
    a = b;
  }
  return out;
}

StatusOr<std::vector<Edge>> Shard::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                  int64_t high, int64_t limit) const {
  ZIPG_ASSIGN_OR_RETURN(auto record, edges_->Find(id, type));
  if (!record || limit == 0) return std::vector<Edge>();
  ZIPG_ASSIGN_OR_RETURN(auto range, edges_->TimeRange(*record, low, high));
  const uint64_t end =
      range.first + std::min<uint64_t>(range.second - range.first, static_cast<uint64_t>(limit));
  return edges_->Edges(*record, range.first, end);
}

}  // namespace zipg::layout
