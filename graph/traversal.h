// Traversals (bfs, rpq; docs/traversal.md): frontier-at-a-time search of the product of the graph
// and an automaton (graph/path_expr.h). A coordinator holds the visited set of (source tag, node,
// state) and the frontier; each round it hands the frontier to a FrontierExpander, which computes
// the successors where the nodes live: in-process shards for the embedded Graph, the shard
// servers owning them in a cluster (traverse_expand), or single get_neighbor_ids calls (pulled
// execution, the benchmark's baseline). Every round checks the query's deadline and memory budget.
//
// Thread-safety: the functions are reentrant; an expander is used by one traversal at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "layout/shard.h"
#include "graph/api.h"
#include "graph/path_expr.h"

namespace zipg::graph {

// `node` reached in automaton state `state` on a path from the source numbered `tag`.
struct Visit {
  uint32_t tag = 0;
  uint32_t state = 0;
  int64_t node = 0;
  friend bool operator==(const Visit&, const Visit&) = default;
  friend bool operator<(const Visit& a, const Visit& b) {
    return a.node != b.node ? a.node < b.node
                            : (a.tag != b.tag ? a.tag < b.tag : a.state < b.state);
  }
};

// The bounds of one traversal query, enforced by its coordinator (and passed on to every step).
struct TraversalLimits {
  std::chrono::milliseconds deadline{5000};
  uint64_t memory_bytes = uint64_t{256} << 20;  // visited set, frontier, sources and answer
  // INVALID_ARGUMENT unless 1 ms <= deadline <= 1 hour and memory_bytes >= 4 KiB.
  Status Validate() const;
};
// What one visit costs a coordinator (its visited-set entry and frontier slots).
inline constexpr uint64_t kVisitBytes = 48;

// A query's clock and memory budget. The coordinator reports what it holds (set_used); a step
// may return as many successors as the rest of the budget holds at sizeof(Visit) each. The
// deadline is the limits' or, if nearer, that of the call the thread works for
// (util/call_deadline.h): a traversal never outlives its client.
class TraversalBudget {
 public:
  using Clock = std::chrono::steady_clock;
  TraversalBudget(const char* op, const TraversalLimits& limits);
  // DEADLINE_EXCEEDED once the deadline passed, saying where.
  Status CheckTime(const char* where) const;
  // RESOURCE_EXHAUSTED if `bytes` exceed the memory budget.
  Status CheckMemory(uint64_t bytes, const char* what) const;
  // A step's or a listing's DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED, reworded to name this
  // query's budget; other statuses as they are.
  Status Explain(const Status& s) const;
  Clock::time_point deadline() const { return deadline_; }
  // Milliseconds left (at least 1 while not exceeded; 0 after).
  int64_t remaining_ms() const { return RemainingMs(deadline_); }
  static int64_t RemainingMs(Clock::time_point deadline);
  uint64_t memory_bytes() const { return limits_.memory_bytes; }
  void set_used(uint64_t bytes) { used_ = bytes; }
  // The most successors one step call may return (what the budget has left).
  uint64_t max_step_visits() const {
    return used_ >= limits_.memory_bytes ? 0 : (limits_.memory_bytes - used_) / sizeof(Visit);
  }

 private:
  // "its deadline of N ms", saying whether that was what its caller had left.
  std::string DeadlineText() const;

  const char* op_;
  TraversalLimits limits_;
  Clock::time_point deadline_;
  bool callers_ = false;  // the deadline is the calling client's
  uint64_t used_ = 0;
};

// The visits grouped by the shard owning their node (graph/partition.h).
std::map<uint32_t, std::vector<Visit>> GroupByShard(const std::vector<Visit>& visits,
                                                    uint32_t num_shards);

// Where a traversal step runs.
class FrontierExpander {
 public:
  virtual ~FrontierExpander() = default;
  // The successors of `frontier` under `automaton` (duplicates allowed).
  virtual StatusOr<std::vector<Visit>> Expand(const PathAutomaton& automaton,
                                              const std::vector<Visit>& frontier,
                                              const TraversalBudget& budget) = 0;
};

// The successors of `visits`, whose nodes `shard` owns: for each visit, each transition out of its
// state, each live neighbor of its node over the transition's type. Sorted, distinct. Each
// (node, type) is read once however many visits ask for it. DEADLINE_EXCEEDED after
// `deadline_ms` (checked at each node; clamped to 0..1 hour), RESOURCE_EXHAUSTED past
// `max_visits` distinct successors.
StatusOr<std::vector<Visit>> ExpandOnShard(const layout::ShardReader& shard,
                                           const PathAutomaton& automaton,
                                           std::vector<Visit> visits, int64_t deadline_ms,
                                           uint64_t max_visits);

// Pulled execution: each (node, type) of the frontier is one GetNeighborIds call on `graph`.
class PulledExpander final : public FrontierExpander {
 public:
  explicit PulledExpander(GraphApi* graph) : graph_(graph) {}
  StatusOr<std::vector<Visit>> Expand(const PathAutomaton& automaton,
                                      const std::vector<Visit>& frontier,
                                      const TraversalBudget& budget) override;
  uint64_t calls() const { return calls_; }

 private:
  GraphApi* graph_;
  uint64_t calls_ = 0;
};

// The contract's argument checks and defaults.
inline constexpr int32_t kMaxBfsDepth = 10;
inline constexpr int64_t kDefaultBfsLimit = 10000;
inline constexpr int64_t kDefaultRpqLimit = 100000;
inline constexpr int64_t kMaxTraversalLimit = 1000000;
inline constexpr size_t kMaxSourcesPerBatch = 4096;
Status CheckBfsArgs(int64_t id, const std::optional<std::vector<int64_t>>& types, int32_t max_depth,
                    int64_t limit);
Status CheckRpqArgs(const std::optional<std::vector<int64_t>>& sources, int64_t limit);

// Counts of one traversal's work, for benchmarks and tests.
struct TraversalStats {
  uint64_t rounds = 0;  // Expand calls
  uint64_t visits = 0;  // distinct visits
};

// bfs from `id` (arguments checked): rounds of `expander` until max_depth or `limit` entries.
StatusOr<std::vector<BfsEntry>> RunBfs(FrontierExpander& expander, int64_t id,
                                       const std::optional<std::vector<int64_t>>& types,
                                       int32_t max_depth, int64_t limit,
                                       const TraversalLimits& limits,
                                       TraversalStats* stats = nullptr);

// Lists every source of an rpq without sources (with the destinations of live edges if
// `include_dsts`), any order, duplicates allowed, within the budget's deadline and memory.
using SourceLister =
    std::function<StatusOr<std::vector<int64_t>>(bool include_dsts, const TraversalBudget&)>;

// rpq of `automaton` from `sources` (>= 0; any order, duplicates allowed), or from what `lister`
// lists if nullopt; at most `limit` pairs. Sources go in batches (of 1 at first, doubling while a
// batch's visits stay small, halving when a batch exceeds the budget) so that the first `limit`
// pairs are found without searching from every source at once.
StatusOr<RpqResult> RunRpq(FrontierExpander& expander, const PathAutomaton& automaton,
                           const std::optional<std::vector<int64_t>>& sources,
                           const SourceLister& lister, int64_t limit, const TraversalLimits& limits,
                           TraversalStats* stats = nullptr);

}  // namespace zipg::graph
