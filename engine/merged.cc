// Reads of written nodes (shard/merged.h; the algorithms are in docs/writes.md, "Reads of a
// written node").

#include "engine/merged.h"

#include <algorithm>
#include <limits>
#include <map>

namespace zipg::engine {

thread_local MissedVersions* MissedVersions::current_ = nullptr;

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

using LogMap = PersistentMap<EdgeKey, int64_t, NewestFirstKey, EdgeKeyHash>;

// Keys of `log` with timestamp > t, and with timestamp >= t (the contract's order puts newer
// timestamps first).
uint64_t NewerThan(const LogMap& log, int64_t t) { return log.Rank(EdgeKey{t, kMin}); }
uint64_t AtLeast(const LogMap& log, int64_t t) {
  return t == kMin ? log.size() : log.Rank(EdgeKey{t - 1, kMin});
}

const TypeDelta& NoWrites() {
  static const TypeDelta kEmpty;
  return kEmpty;
}

}  // namespace

// One (node, type) of a written node: the base record's live edges (its stored edges minus the
// dead TimeOrders) and the LogStore's, both in the contract's order. Live base edges are named by
// their live rank r (0 = newest live one), LogStore edges by their rank in `log`.
class MergedShard::TypeView {
 public:
  TypeView(const MergedShard* shard, int64_t id, int64_t type,
           std::shared_ptr<const NodeDelta> node, std::optional<layout::EdgeFile::Record> record)
      : shard_(shard), id_(id), type_(type), node_(std::move(node)), record_(std::move(record)) {
    const TypeDelta* t = node_->Type(type);
    delta_ = t ? t : &NoWrites();
    stored_ = record_ ? record_->count : 0;
  }

  uint64_t base_live() const { return stored_ - delta_->dead.size(); }
  uint64_t log_count() const { return delta_->log.size(); }
  uint64_t count() const { return base_live() + log_count(); }
  const LogMap& log() const { return delta_->log; }

  // Live base edges stored before position p.
  uint64_t LiveBefore(uint64_t p) const { return p - delta_->dead.Rank(p); }
  // The stored position of live base edge r (r < base_live()).
  uint64_t SelectLive(uint64_t r) const {
    uint64_t lo = r, hi = std::min(stored_ - 1, r + delta_->dead.size());
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (LiveBefore(mid + 1) > r) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }
  const layout::EdgeFile& edges() const { return shard_->base_->edges(); }

  // The merged rank of live base edge r: r plus the LogStore edges before its key. Reads its
  // timestamp, and its destination only if a LogStore edge has the same timestamp.
  StatusOr<uint64_t> MergedRank(uint64_t r) const {
    const uint64_t p = SelectLive(r);
    ZIPG_ASSIGN_OR_RETURN(auto ts, edges().Timestamps(*record_, p, p + 1));
    const uint64_t newer = NewerThan(log(), ts[0]);
    if (AtLeast(log(), ts[0]) == newer) return r + newer;
    ZIPG_ASSIGN_OR_RETURN(auto dst, edges().Destinations(*record_, p, p + 1));
    return r + log().Rank(EdgeKey{ts[0], dst[0]});
  }

  // The stored range [b0, b1) of base edges with low <= timestamp <= high.
  StatusOr<std::pair<uint64_t, uint64_t>> BaseWindow(int64_t low, int64_t high) const {
    if (!record_) return std::pair<uint64_t, uint64_t>(0, 0);
    return edges().TimeRange(*record_, low, high);
  }

  // Up to `limit` edges in the contract's order from live base edges [base_from, base_to) and
  // LogStore edges [log_from, log_to).
  StatusOr<std::vector<Edge>> Take(uint64_t base_from, uint64_t base_to, uint64_t log_from,
                                   uint64_t log_to, uint64_t limit) const {
    base_to = std::min({base_to, base_live(), base_from + limit});
    log_to = std::min({log_to, log_count(), log_from + limit});
    // Candidates' keys: the base's read run by run of consecutive positions.
    std::vector<std::pair<EdgeKey, uint64_t>> base;  // key, stored position
    for (uint64_t r = base_from; r < base_to;) {
      const uint64_t p = SelectLive(r);
      uint64_t q = p + 1, s = r + 1;
      while (s < base_to && q < stored_ && !delta_->dead.Find(q)) {
        ++q;
        ++s;
      }
      ZIPG_ASSIGN_OR_RETURN(auto ts, edges().Timestamps(*record_, p, q));
      ZIPG_ASSIGN_OR_RETURN(auto dst, edges().Destinations(*record_, p, q));
      for (uint64_t i = 0; i < q - p; ++i) base.push_back({EdgeKey{ts[i], dst[i]}, p + i});
      r = s;
    }
    std::vector<std::pair<EdgeKey, int64_t>> logged;  // key, generation
    log().Visit(log_from, log_to, [&](const EdgeKey& k, int64_t generation) {
      logged.push_back({k, generation});
      return true;
    });
    // Merge; each chosen edge is base position or LogStore key.
    struct Pick {
      bool base;
      size_t index;
    };
    std::vector<Pick> picks;
    size_t i = 0, j = 0;
    while (picks.size() < limit && (i < base.size() || j < logged.size())) {
      const bool take_base = j == logged.size() ||
                             (i < base.size() && NewestFirstKey()(base[i].first, logged[j].first));
      picks.push_back(take_base ? Pick{true, i++} : Pick{false, j++});
    }
    return Fetch(picks, base, logged);
  }

  // Edges by stored position (ascending) and LogStore key, as picked, in the picked order.
  template <typename PickList>
  StatusOr<std::vector<Edge>> Fetch(const PickList& picks,
                                    const std::vector<std::pair<EdgeKey, uint64_t>>& base,
                                    const std::vector<std::pair<EdgeKey, int64_t>>& logged) const {
    std::map<uint64_t, Edge> base_edges;
    std::vector<uint64_t> positions;
    std::vector<int64_t> dsts, generations;
    for (const auto& pick : picks) {
      if (pick.base) {
        positions.push_back(base[pick.index].second);
      } else {
        dsts.push_back(logged[pick.index].first.dst);
        generations.push_back(logged[pick.index].second);
      }
    }
    std::sort(positions.begin(), positions.end());
    for (size_t a = 0; a < positions.size();) {
      size_t b = a + 1;
      while (b < positions.size() && positions[b] == positions[b - 1] + 1) ++b;
      ZIPG_ASSIGN_OR_RETURN(auto run, edges().Edges(*record_, positions[a], positions[b - 1] + 1));
      for (size_t k = 0; k < run.size(); ++k)
        base_edges.emplace(positions[a] + k, std::move(run[k]));
      a = b;
    }
    std::map<int64_t, Edge> log_edges;  // by dst
    if (!dsts.empty()) {
      if (shard_->log_ == nullptr) {
        return Status::Unavailable("no LogStore to read written node from");
      }
      std::sort(generations.begin(), generations.end());
      generations.erase(std::unique(generations.begin(), generations.end()), generations.end());
      ZIPG_ASSIGN_OR_RETURN(auto found, shard_->log_->FragmentEdges(id_, type_, generations, dsts));
      for (auto& e : found) log_edges.emplace(e.dst, std::move(e));
    }
    std::vector<Edge> out;
    for (const auto& pick : picks) {
      if (pick.base) {
        auto it = base_edges.find(base[pick.index].second);
        if (it == base_edges.end())
          return Status::Corruption("edge text: record shorter than its count");
        out.push_back(std::move(it->second));
        continue;
      }
      // Left out if the LogStore has not applied this version yet (a concurrent, unanswered
      // write): never another version in its place.
      const EdgeKey& key = logged[pick.index].first;
      auto it = log_edges.find(key.dst);
      if (it != log_edges.end() && it->second.timestamp == key.timestamp) {
        out.push_back(std::move(it->second));
      } else {
        MissedVersions::Note();
      }
    }
    return out;
  }

  // The live edges to `ids` with low <= timestamp <= high, newest first.
  StatusOr<std::vector<Edge>> Get(const std::vector<int64_t>& ids, int64_t low,
                                  int64_t high) const {
    std::vector<int64_t> wanted = ids;
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    std::vector<std::pair<EdgeKey, uint64_t>> base;
    std::vector<std::pair<EdgeKey, int64_t>> logged;
    for (int64_t dst : wanted) {
      if (const int64_t* ts = delta_->log_dst.Find(dst)) {
        if (*ts < low || *ts > high) continue;
        const EdgeKey key{*ts, dst};
        logged.push_back({key, *delta_->log.Find(key)});
      } else if (record_) {
        ZIPG_ASSIGN_OR_RETURN(auto at, edges().FindDst(*record_, dst));
        if (!at || delta_->dead.Find(*at)) continue;
        ZIPG_ASSIGN_OR_RETURN(auto ts, edges().Timestamps(*record_, *at, *at + 1));
        if (ts[0] >= low && ts[0] <= high) base.push_back({EdgeKey{ts[0], dst}, *at});
      }
    }
    struct Pick {
      bool base;
      size_t index;
      EdgeKey key;
    };
    std::vector<Pick> picks;
    for (size_t i = 0; i < base.size(); ++i) picks.push_back({true, i, base[i].first});
    for (size_t i = 0; i < logged.size(); ++i) picks.push_back({false, i, logged[i].first});
    std::sort(picks.begin(), picks.end(),
              [](const Pick& a, const Pick& b) { return NewestFirstKey()(a.key, b.key); });
    return Fetch(picks, base, logged);
  }

  // The live destinations, any order.
  StatusOr<std::vector<int64_t>> Destinations() const {
    std::vector<int64_t> out;
    if (record_) {
      ZIPG_ASSIGN_OR_RETURN(out, edges().Destinations(*record_, 0, stored_));
      if (!delta_->dead.empty()) {
        std::vector<int64_t> live;
        for (uint64_t p = 0; p < out.size(); ++p) {
          if (!delta_->dead.Find(p)) live.push_back(out[p]);
        }
        out.swap(live);
      }
    }
    delta_->log_dst.Visit(0, delta_->log_dst.size(), [&](int64_t dst, int64_t) {
      out.push_back(dst);
      return true;
    });
    return out;
  }

 private:
  const MergedShard* shard_;
  int64_t id_, type_;
  std::shared_ptr<const NodeDelta> node_;  // keeps delta_ alive
  std::optional<layout::EdgeFile::Record> record_;
  const TypeDelta* delta_;
  uint64_t stored_ = 0;
};

StatusOr<std::optional<MergedShard::TypeView>> MergedShard::View(int64_t id, int64_t type) const {
  auto node = delta_->Lookup(id);
  if (!node || (!node->edges_dead && node->Type(type) == nullptr)) {
    return std::optional<TypeView>();  // no write touched these edges
  }
  std::optional<layout::EdgeFile::Record> record;
  if (!node->edges_dead) {
    ZIPG_ASSIGN_OR_RETURN(record, base_->edges().Find(id, type));
  }
  return std::optional<TypeView>(TypeView(this, id, type, std::move(node), std::move(record)));
}

StatusOr<std::optional<zipg::Properties>> MergedShard::LiveProperties(int64_t id,
                                                                      const NodeDelta& node) const {
  std::optional<zipg::Properties> props;
  if (!node.props_dead) {
    ZIPG_ASSIGN_OR_RETURN(props, base_->GetNodeProperty(id, nullptr));
  }
  if (node.props_generation != 0) {
    if (log_ == nullptr) return Status::Unavailable("no LogStore to read written node from");
    ZIPG_ASSIGN_OR_RETURN(auto logged, log_->FragmentProperties(id, {node.props_generation}));
    if (logged) {
      props = std::move(logged);
    } else {
      MissedVersions::Note();  // the base's (or none) in their place, as before the write
    }
  }
  if (props) std::sort(props->begin(), props->end());
  return props;
}

StatusOr<std::optional<Properties>> MergedShard::GetNodeProperty(
    int64_t id, const std::vector<std::string>* names) const {
  auto node = delta_->Lookup(id);
  if (!node) return base_->GetNodeProperty(id, names);
  ZIPG_ASSIGN_OR_RETURN(auto props, LiveProperties(id, *node));
  if (!props) return std::optional<Properties>();
  return std::optional<Properties>(SelectProperties(*props, names));
}

StatusOr<bool> MergedShard::NodeMatches(int64_t id, const Properties& filter) const {
  auto node = delta_->Lookup(id);
  if (!node) return base_->NodeMatches(id, filter);
  ZIPG_ASSIGN_OR_RETURN(auto props, LiveProperties(id, *node));
  if (!props) return false;
  Properties sorted_filter = filter;
  std::sort(sorted_filter.begin(), sorted_filter.end());
  return MatchesAll(*props, sorted_filter);
}

StatusOr<std::vector<int64_t>> MergedShard::GetNodeIds(const Properties& properties) const {
  // Live properties of a written node are either still here (not props_dead) or in the LogStore,
  // which answers for its own fragments (log_node_ids).
  ZIPG_ASSIGN_OR_RETURN(auto ids, base_->GetNodeIds(properties));
  return WithBaseProperties(std::move(ids));
}

StatusOr<std::vector<int64_t>> MergedShard::SearchNodeIds(const NodeSearch& q) const {
  // As GetNodeIds: the base answers for the nodes whose properties were not written since.
  ZIPG_ASSIGN_OR_RETURN(auto ids, base_->SearchNodeIds(q));
  return WithBaseProperties(std::move(ids));
}

std::vector<int64_t> MergedShard::WithBaseProperties(std::vector<int64_t> ids) const {
  if (delta_->size() == 0) return ids;
  std::erase_if(ids, [&](int64_t id) {
    auto node = delta_->Lookup(id);
    return node && node->props_dead;
  });
  return ids;
}

StatusOr<std::vector<int64_t>> MergedShard::NeighborIds(int64_t id,
                                                        std::optional<int64_t> type) const {
  auto node = delta_->Lookup(id);
  if (!node) return base_->NeighborIds(id, type);
  std::vector<int64_t> types;
  if (type) {
    types.push_back(*type);
  } else {
    if (!node->edges_dead) {
      ZIPG_ASSIGN_OR_RETURN(auto records, base_->edges().FindAll(id));
      for (const auto& r : records) types.push_back(r.type);
    }
    for (const auto& [t, delta] : node->types) types.push_back(t);
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
  }
  std::vector<int64_t> ids;
  for (int64_t t : types) {
    ZIPG_ASSIGN_OR_RETURN(auto view, View(id, t));
    if (!view) {
      ZIPG_ASSIGN_OR_RETURN(auto base_ids, base_->NeighborIds(id, t));
      ids.insert(ids.end(), base_ids.begin(), base_ids.end());
      continue;
    }
    ZIPG_ASSIGN_OR_RETURN(auto dsts, view->Destinations());
    ids.insert(ids.end(), dsts.begin(), dsts.end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<int64_t> MergedShard::AssocCount(int64_t id, int64_t type) const {
  ZIPG_ASSIGN_OR_RETURN(auto view, View(id, type));
  if (!view) return base_->AssocCount(id, type);
  return static_cast<int64_t>(view->count());
}

StatusOr<std::pair<int64_t, int64_t>> MergedShard::EdgeRange(int64_t id, int64_t type, int64_t lo,
                                                             int64_t hi) const {
  ZIPG_ASSIGN_OR_RETURN(auto view, View(id, type));
  if (!view) return base_->EdgeRange(id, type, lo, hi);
  ZIPG_ASSIGN_OR_RETURN(auto window, view->BaseWindow(lo, hi));
  const int64_t begin =
      static_cast<int64_t>(view->LiveBefore(window.first) + NewerThan(view->log(), hi));
  const int64_t end =
      static_cast<int64_t>(view->LiveBefore(window.second) + AtLeast(view->log(), lo));
  return std::pair<int64_t, int64_t>(begin, std::max(begin, end));
}

StatusOr<std::optional<Edge>> MergedShard::EdgeData(int64_t id, int64_t type,
                                                    int64_t time_order) const {
  ZIPG_ASSIGN_OR_RETURN(auto view, View(id, type));
  if (!view) return base_->EdgeData(id, type, time_order);
  if (time_order < 0 || static_cast<uint64_t>(time_order) >= view->count()) {
    return std::optional<Edge>();
  }
  ZIPG_ASSIGN_OR_RETURN(auto edges, AssocRange(id, type, time_order, 1));
  if (edges.empty()) return std::optional<Edge>();  // a concurrent write not yet applied
  return std::optional<Edge>(std::move(edges[0]));
}

StatusOr<std::vector<Edge>> MergedShard::AssocRange(int64_t id, int64_t type, int64_t pos,
                                                    int64_t limit) const {
  ZIPG_ASSIGN_OR_RETURN(auto view, View(id, type));
  if (!view) return base_->AssocRange(id, type, pos, limit);
  if (pos < 0 || limit <= 0 || static_cast<uint64_t>(pos) >= view->count()) {
    return std::vector<Edge>();
  }
  // a = how many of the first `pos` merged edges are base edges: the first live base rank whose
  // merged rank is >= pos (merged ranks grow with r).
  const uint64_t p = static_cast<uint64_t>(pos), m = view->log_count();
  uint64_t lo = p > m ? p - m : 0, hi = std::min(view->base_live(), p);
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    ZIPG_ASSIGN_OR_RETURN(uint64_t rank, view->MergedRank(mid));
    if (rank >= p) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return view->Take(lo, view->base_live(), p - lo, m, static_cast<uint64_t>(limit));
}

StatusOr<std::vector<Edge>> MergedShard::AssocGet(int64_t id, int64_t type,
                                                  const std::vector<int64_t>& ids, int64_t low,
                                                  int64_t high) const {
  ZIPG_ASSIGN_OR_RETURN(auto view, View(id, type));
  if (!view) return base_->AssocGet(id, type, ids, low, high);
  return view->Get(ids, low, high);
}

StatusOr<std::vector<Edge>> MergedShard::AssocTimeRange(int64_t id, int64_t type, int64_t low,
                                                        int64_t high, int64_t limit) const {
  ZIPG_ASSIGN_OR_RETURN(auto view, View(id, type));
  if (!view) return base_->AssocTimeRange(id, type, low, high, limit);
  if (limit <= 0) return std::vector<Edge>();
  ZIPG_ASSIGN_OR_RETURN(auto window, view->BaseWindow(low, high));
  const uint64_t log_from = NewerThan(view->log(), high);
  const uint64_t log_to = std::max(log_from, AtLeast(view->log(), low));
  return view->Take(view->LiveBefore(window.first), view->LiveBefore(window.second), log_from,
                    log_to, static_cast<uint64_t>(limit));
}

}  // namespace zipg::engine

namespace zipg::engine {

StatusOr<std::vector<int64_t>> MergedShard::Sources(bool include_dsts,
                                                    const ListBounds& bounds) const {
  // The base's, less the written nodes; then each written node as the writes left it.
  const std::vector<int64_t> written = delta_->Nodes();
  ZIPG_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                        base_->SourcesExcept(include_dsts, written, bounds));
  for (int64_t id : written) {
    if (std::chrono::steady_clock::now() > bounds.deadline) {
      return Status::DeadlineExceeded("listing the sources ran out of the query's deadline");
    }
    ZIPG_ASSIGN_OR_RETURN(auto props, GetNodeProperty(id, nullptr));
    ZIPG_ASSIGN_OR_RETURN(auto neighbors, NeighborIds(id, std::nullopt));
    if (props || !neighbors.empty()) ids.push_back(id);
    if (include_dsts) ids.insert(ids.end(), neighbors.begin(), neighbors.end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.size() > bounds.max_ids) {
    return Status::ResourceExhausted("more than " + std::to_string(bounds.max_ids) +
                                     " sources (the query's memory budget)");
  }
  return ids;
}

}  // namespace zipg::engine
