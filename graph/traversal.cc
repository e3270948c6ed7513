// Traversal coordinators and the shard-local step (graph/traversal.h).

#include "graph/traversal.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "graph/partition.h"
#include "util/call_deadline.h"

namespace zipg {

namespace {
using graph::PathAutomaton;
using graph::Visit;

// The transitions of `a` out of `state` (a is sorted by from).
std::pair<const PathAutomaton::Transition*, const PathAutomaton::Transition*> Out(
    const PathAutomaton& a, uint32_t state) {
  auto lo = std::lower_bound(a.transitions.begin(), a.transitions.end(), state,
                             [](const auto& t, uint32_t s) { return t.from < s; });
  auto hi = std::upper_bound(lo, a.transitions.end(), state,
                             [](uint32_t s, const auto& t) { return s < t.from; });
  return {a.transitions.data() + (lo - a.transitions.begin()),
          a.transitions.data() + (hi - a.transitions.begin())};
}

std::optional<int64_t> TypeArg(int64_t label) {
  return label == PathAutomaton::kAnyType ? std::nullopt : std::optional<int64_t>(label);
}

void SortUnique(std::vector<Visit>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// Expands the visits of one node: `neighbors(type)` gives its neighbors over a label.
template <typename Neighbors>
Status ExpandNode(const PathAutomaton& a, const Visit* begin, const Visit* end,
                  Neighbors&& neighbors, std::vector<Visit>* out, uint64_t max_visits) {
  std::map<int64_t, std::vector<int64_t>> by_label;  // read once per (node, label)
  for (const Visit* v = begin; v != end; ++v) {
    auto [t, t_end] = Out(a, v->state);
    for (; t != t_end; ++t) {
      auto it = by_label.find(t->type);
      if (it == by_label.end()) {
        ZIPG_ASSIGN_OR_RETURN(auto ids, neighbors(t->type));
        it = by_label.emplace(t->type, std::move(ids)).first;
      }
      if (out->size() + it->second.size() > max_visits) {
        SortUnique(out);  // count distinct successors only
        if (out->size() + it->second.size() > max_visits) {
          return Status::ResourceExhausted("a traversal step reached more than " +
                                           std::to_string(max_visits) +
                                           " successors (the query's memory budget)");
        }
      }
      for (int64_t d : it->second) out->push_back({v->tag, t->to, d});
    }
  }
  return Status::OK();
}

// Visits of the same node are adjacent in a sorted frontier: calls f(begin, end) per node.
template <typename F>
Status ForEachNode(const std::vector<Visit>& sorted, F&& f) {
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j].node == sorted[i].node) ++j;
    ZIPG_RETURN_IF_ERROR(f(sorted.data() + i, sorted.data() + j));
    i = j;
  }
  return Status::OK();
}

struct VisitHash {
  size_t operator()(const Visit& v) const {
    uint64_t h = static_cast<uint64_t>(v.node) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t{v.tag} << 32 | v.state) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

}  // namespace

namespace graph {

Status TraversalLimits::Validate() const {
  if (deadline.count() < 1 || deadline.count() > 3600000) {
    return Status::InvalidArgument("a traversal deadline must be 1..3600000 ms");
  }
  if (memory_bytes < 4096) {
    return Status::InvalidArgument("a traversal memory budget must be at least 4096 bytes");
  }
  return Status::OK();
}

TraversalBudget::TraversalBudget(const char* op, const TraversalLimits& limits)
    : op_(op), limits_(limits) {
  const auto now = Clock::now();
  deadline_ = now + limits.deadline;
  if (const auto call = CallDeadline::Current(); call && *call < deadline_) {
    deadline_ = *call;
    callers_ = true;
    limits_.deadline = std::max(std::chrono::milliseconds(0),
                                std::chrono::duration_cast<std::chrono::milliseconds>(*call - now));
  }
}

std::string TraversalBudget::DeadlineText() const {
  return "its deadline of " + std::to_string(limits_.deadline.count()) + " ms" +
         (callers_ ? " (what its caller had left)" : "");
}

Status TraversalBudget::CheckTime(const char* where) const {
  if (Clock::now() <= deadline_) return Status::OK();
  return Status::DeadlineExceeded(std::string(op_) + " exceeded " + DeadlineText() + " " + where);
}

Status TraversalBudget::CheckMemory(uint64_t bytes, const char* what) const {
  if (bytes <= limits_.memory_bytes) return Status::OK();
  return Status::ResourceExhausted(std::string(op_) + " needs more than its memory budget of " +
                                   std::to_string(limits_.memory_bytes) + " bytes (" + what + ")");
}

Status TraversalBudget::Explain(const Status& s) const {
  if (s.code() == StatusCode::kDeadlineExceeded) {
    return Status::DeadlineExceeded(std::string(op_) + " exceeded " + DeadlineText() + " (" +
                                    s.message() + ")");
  }
  if (s.code() == StatusCode::kResourceExhausted) {
    return Status::ResourceExhausted(std::string(op_) + " needs more than its memory budget of " +
                                     std::to_string(limits_.memory_bytes) + " bytes (" +
                                     s.message() + ")");
  }
  return s;
}

int64_t TraversalBudget::RemainingMs(Clock::time_point deadline) {
  const auto now = Clock::now();
  if (now > deadline) return 0;
  return std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count());
}

std::map<uint32_t, std::vector<Visit>> GroupByShard(const std::vector<Visit>& visits,
                                                    uint32_t num_shards) {
  std::map<uint32_t, std::vector<Visit>> groups;
  for (const Visit& v : visits) groups[ShardOf(v.node, num_shards)].push_back(v);
  return groups;
}

StatusOr<std::vector<Visit>> ExpandOnShard(const layout::ShardReader& shard,
                                           const PathAutomaton& automaton,
                                           std::vector<Visit> visits, int64_t deadline_ms,
                                           uint64_t max_visits) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::max<int64_t>(deadline_ms, 0));
  std::sort(visits.begin(), visits.end());
  std::vector<Visit> out;
  size_t nodes = 0;
  ZIPG_RETURN_IF_ERROR(ForEachNode(visits, [&](const Visit* begin, const Visit* end) -> Status {
    if (++nodes % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
      return Status::DeadlineExceeded("a traversal step ran out of its query's deadline");
    }
    return ExpandNode(
        automaton, begin, end,
        [&](int64_t label) { return shard.NeighborIds(begin->node, TypeArg(label)); }, &out,
        max_visits);
  }));
  SortUnique(&out);
  return out;
}

StatusOr<std::vector<Visit>> PulledExpander::Expand(const PathAutomaton& automaton,
                                                    const std::vector<Visit>& frontier,
                                                    const TraversalBudget& budget) {
  std::vector<Visit> sorted(frontier);
  std::sort(sorted.begin(), sorted.end());
  std::vector<Visit> out;
  ZIPG_RETURN_IF_ERROR(ForEachNode(sorted, [&](const Visit* begin, const Visit* end) -> Status {
    ZIPG_RETURN_IF_ERROR(budget.CheckTime("expanding a frontier"));
    return ExpandNode(
        automaton, begin, end,
        [&](int64_t label) {
          ++calls_;
          return graph_->GetNeighborIds(begin->node, TypeArg(label), {});
        },
        &out, budget.max_step_visits());
  }));
  return out;
}

Status CheckBfsArgs(int64_t id, const std::optional<std::vector<int64_t>>& types, int32_t max_depth,
                    int64_t limit) {
  if (id < 0) return Status::InvalidArgument("bfs: negative id " + std::to_string(id));
  if (types) {
    if (types->size() > PathAutomaton::kMaxAtoms) {
      return Status::InvalidArgument("bfs: more than " + std::to_string(PathAutomaton::kMaxAtoms) +
                                     " types");
    }
    for (int64_t t : *types) {
      if (t < 0) return Status::InvalidArgument("bfs: negative type " + std::to_string(t));
    }
  }
  if (max_depth < 0 || max_depth > kMaxBfsDepth) {
    return Status::InvalidArgument("bfs: max_depth must be 0.." + std::to_string(kMaxBfsDepth) +
                                   ", not " + std::to_string(max_depth));
  }
  if (limit < 1 || limit > kMaxTraversalLimit) {
    return Status::InvalidArgument("bfs: limit must be 1.." + std::to_string(kMaxTraversalLimit) +
                                   ", not " + std::to_string(limit));
  }
  return Status::OK();
}

Status CheckRpqArgs(const std::optional<std::vector<int64_t>>& sources, int64_t limit) {
  if (sources) {
    for (int64_t s : *sources) {
      if (s < 0) return Status::InvalidArgument("rpq: negative source " + std::to_string(s));
    }
  }
  if (limit < 1 || limit > kMaxTraversalLimit) {
    return Status::InvalidArgument("rpq: limit must be 1.." + std::to_string(kMaxTraversalLimit) +
                                   ", not " + std::to_string(limit));
  }
  return Status::OK();
}

namespace {

// INTERNAL unless every successor names a tag below `tags` and a state of `automaton`.
Status CheckReply(const std::vector<Visit>& next, size_t tags, const PathAutomaton& automaton) {
  for (const Visit& v : next) {
    if (v.tag >= tags || v.state >= automaton.num_states() || v.node < 0) {
      return Status::Internal("a traversal step answered a malformed visit");
    }
  }
  return Status::OK();
}

// The pairs of one batch of sources (`sources[first .. first+n)`), sorted and distinct.
StatusOr<std::vector<std::pair<int64_t, int64_t>>> RpqBatch(
    FrontierExpander& expander, const PathAutomaton& automaton, const std::vector<int64_t>& sources,
    size_t first, size_t n, uint64_t held_bytes, TraversalBudget& budget, TraversalStats* stats,
    size_t* visits) {
  std::unordered_set<Visit, VisitHash> seen;
  std::vector<Visit> frontier;
  for (size_t k = 0; k < n; ++k) {
    frontier.push_back({static_cast<uint32_t>(k), 0, sources[first + k]});
    seen.insert(frontier.back());
  }
  auto used = [&] { return held_bytes + (seen.size() + frontier.size()) * kVisitBytes; };
  while (!frontier.empty()) {
    ZIPG_RETURN_IF_ERROR(budget.CheckTime("before a round"));
    budget.set_used(used());
    auto step = expander.Expand(automaton, frontier, budget);
    if (!step.ok()) return budget.Explain(step.status());
    std::vector<Visit> next = std::move(step).value();
    if (stats) ++stats->rounds;
    ZIPG_RETURN_IF_ERROR(CheckReply(next, n, automaton));
    frontier.clear();
    for (size_t i = 0; i < next.size(); ++i) {
      if (seen.insert(next[i]).second) frontier.push_back(next[i]);
      if (i % 4096 == 0) {
        ZIPG_RETURN_IF_ERROR(budget.CheckMemory(used() + next.size() * sizeof(Visit),
                                                "visited (source, node, state)"));
      }
    }
    ZIPG_RETURN_IF_ERROR(budget.CheckMemory(used(), "visited (source, node, state)"));
  }
  *visits = seen.size();
  if (stats) stats->visits += seen.size();
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (const Visit& v : seen) {
    if (automaton.accepting[v.state]) pairs.emplace_back(sources[first + v.tag], v.node);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

}  // namespace

StatusOr<std::vector<BfsEntry>> RunBfs(FrontierExpander& expander, int64_t id,
                                       const std::optional<std::vector<int64_t>>& types,
                                       int32_t max_depth, int64_t limit,
                                       const TraversalLimits& limits, TraversalStats* stats) {
  TraversalBudget budget("bfs", limits);
  const PathAutomaton loop =
      PathAutomaton::Loop(!types.has_value(), types ? *types : std::vector<int64_t>());
  std::unordered_set<int64_t> seen = {id};
  std::vector<BfsEntry> out = {{id, 0}};
  std::vector<Visit> frontier = {{0, 0, id}};
  auto used = [&] { return (seen.size() + frontier.size()) * kVisitBytes; };
  for (int32_t depth = 1;
       depth <= max_depth && !frontier.empty() && out.size() < static_cast<uint64_t>(limit);
       ++depth) {
    ZIPG_RETURN_IF_ERROR(budget.CheckTime("before a round"));
    budget.set_used(used());
    auto step = expander.Expand(loop, frontier, budget);
    if (!step.ok()) return budget.Explain(step.status());
    std::vector<Visit> next = std::move(step).value();
    if (stats) ++stats->rounds;
    ZIPG_RETURN_IF_ERROR(CheckReply(next, 1, loop));
    frontier.clear();
    for (size_t i = 0; i < next.size(); ++i) {
      if (seen.insert(next[i].node).second) frontier.push_back({0, 0, next[i].node});
      if (i % 4096 == 0) {
        ZIPG_RETURN_IF_ERROR(
            budget.CheckMemory(used() + next.size() * sizeof(Visit), "reached ids"));
      }
    }
    ZIPG_RETURN_IF_ERROR(budget.CheckMemory(used(), "reached ids"));
    std::sort(frontier.begin(), frontier.end());
    for (const Visit& v : frontier) out.push_back({v.node, depth});
  }
  ZIPG_RETURN_IF_ERROR(budget.CheckTime("at the end"));
  if (stats) stats->visits = seen.size();
  if (out.size() > static_cast<uint64_t>(limit)) out.resize(static_cast<size_t>(limit));
  return out;
}

StatusOr<RpqResult> RunRpq(FrontierExpander& expander, const PathAutomaton& automaton,
                           const std::optional<std::vector<int64_t>>& given,
                           const SourceLister& lister, int64_t limit, const TraversalLimits& limits,
                           TraversalStats* stats) {
  TraversalBudget budget("rpq", limits);
  std::vector<int64_t> sources;
  if (given) {
    sources = *given;
  } else {
    auto listed = lister(automaton.nullable(), budget);
    if (!listed.ok()) return budget.Explain(listed.status());
    sources = std::move(listed).value();
  }
  ZIPG_RETURN_IF_ERROR(budget.CheckTime("after listing the sources"));
  ZIPG_RETURN_IF_ERROR(budget.CheckMemory(sources.size() * sizeof(int64_t), "sources"));
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());

  RpqResult out;
  const uint64_t max_visits = limits.memory_bytes / kVisitBytes;
  size_t batch = 1;
  for (size_t first = 0; first < sources.size();) {
    // Exactly `limit` pairs so far: one more source says whether more exist.
    if (out.pairs.size() == static_cast<uint64_t>(limit)) batch = 1;
    const size_t n = std::min(batch, sources.size() - first);
    size_t visits = 0;
    const uint64_t held = sources.size() * sizeof(int64_t) + out.pairs.size() * 16;
    auto pairs = RpqBatch(expander, automaton, sources, first, n, held, budget, stats, &visits);
    if (!pairs.ok()) {
      if (pairs.status().code() == StatusCode::kResourceExhausted && n > 1) {
        batch = n / 2;  // too many sources at once: try half of them
        continue;
      }
      return pairs.status();
    }
    out.pairs.insert(out.pairs.end(), pairs->begin(), pairs->end());
    if (out.pairs.size() > static_cast<uint64_t>(limit)) {
      out.pairs.resize(static_cast<size_t>(limit));
      out.truncated = true;
      return out;
    }
    first += n;
    // Grow the batch while its search stays well inside the budget; shrink it otherwise.
    if (visits * 8 < max_visits && batch < kMaxSourcesPerBatch) {
      batch *= 2;
    } else if (visits * 2 > max_visits && batch > 1) {
      batch /= 2;
    }
  }
  ZIPG_RETURN_IF_ERROR(budget.CheckTime("at the end"));
  return out;
}

}  // namespace graph

StatusOr<std::vector<BfsEntry>> GraphApi::Bfs(int64_t id,
                                              const std::optional<std::vector<int64_t>>& types,
                                              int32_t max_depth, int64_t limit) {
  ZIPG_RETURN_IF_ERROR(graph::CheckBfsArgs(id, types, max_depth, limit));
  graph::PulledExpander pulled(this);
  return graph::RunBfs(pulled, id, types, max_depth, limit, graph::TraversalLimits());
}

StatusOr<RpqResult> GraphApi::Rpq(const std::string& expr,
                                  const std::optional<std::vector<int64_t>>& sources,
                                  int64_t limit) {
  ZIPG_RETURN_IF_ERROR(graph::CheckRpqArgs(sources, limit));
  ZIPG_ASSIGN_OR_RETURN(auto automaton, graph::PathAutomaton::Parse(expr));
  graph::PulledExpander pulled(this);
  return graph::RunRpq(
      pulled, automaton, sources,
      [](bool, const graph::TraversalBudget&) -> StatusOr<std::vector<int64_t>> {
        return Status::InvalidArgument("rpq: this graph cannot list every source");
      },
      limit, graph::TraversalLimits());
}

}  // namespace zipg
