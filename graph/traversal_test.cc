// Tests of the traversals (docs/traversal.md): the path-expression automaton against std::regex
// (an independent matcher: every type becomes one letter), and bfs / rpq on random compressed
// graphs against a textbook reference (a plain adjacency map, one BFS per source over the product
// of the graph and the automaton). The graphs have cycles, self-loops, nodes without edges and
// dangling destinations; the queries hit their limits, unknown types and expressions matching the
// empty word. Budgets: a memory budget too small and a deadline too short fail whole.

#include "graph/traversal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <queue>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/path_expr.h"
#include "util/call_deadline.h"
#include "util/scratch_dir.h"

namespace zipg::graph {
namespace {

// ---- the automaton
// -------------------------------------------------------------------------------

TEST(PathExprTest, MalformedExpressionsNameThePosition) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "at the end (position 1)"},
      {"   ", "at the end (position 4)"},
      {"1/", "at the end (position 3)"},
      {"|1", "at position 1"},
      {"1||2", "at position 3"},
      {"*1", "at position 1"},
      {"()", "at position 2"},
      {"(1", "at the end (position 3)"},
      {"1)", "at position 2"},
      {"1 / (2 | x)", "at position 10"},
      {"-1", "at position 1"},
      {"9223372036854775808", "at position 19"},
      {"1/2/", "at the end (position 5)"},
      {"(1|2", "expected ')' to close the '(' at position 1"},
  };
  for (const auto& [expr, where] : cases) {
    auto a = PathAutomaton::Parse(expr);
    ASSERT_FALSE(a.ok()) << "'" << expr << "'";
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument) << expr;
    EXPECT_NE(a.status().message().find(where), std::string::npos)
        << "'" << expr << "': " << a.status().message();
  }
  EXPECT_FALSE(PathAutomaton::Parse(std::string(PathAutomaton::kMaxExprBytes + 1, '1')).ok());
  std::string many;
  for (size_t i = 0; i <= PathAutomaton::kMaxAtoms; ++i) many += i ? "/1" : "1";
  EXPECT_FALSE(PathAutomaton::Parse(many).ok());
  std::string deep(300, '(');
  deep += "1" + std::string(300, ')');
  EXPECT_FALSE(PathAutomaton::Parse(deep).ok());
}

TEST(PathExprTest, AcceptedForms) {
  for (const char* expr :
       {"0", "_", "1**", "1+?", "( 1 | 2 ) / 3", "9223372036854775807", "((1))", "_*/_", "1 2"}) {
    EXPECT_TRUE(PathAutomaton::Parse(expr).ok()) << expr;
  }
  // Spaces are ignored everywhere, even inside a number: "1 2" is the type 12.
  auto a = PathAutomaton::Parse("1 2");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->transitions.size(), 1u);
  EXPECT_EQ(a->transitions[0].type, 12);
}

// Whether the automaton accepts `word` (a list of edge types).
bool Accepts(const PathAutomaton& a, const std::vector<int64_t>& word) {
  std::set<uint32_t> states = {0};
  for (int64_t letter : word) {
    std::set<uint32_t> next;
    for (const auto& t : a.transitions) {
      if (states.count(t.from) && (t.type == PathAutomaton::kAnyType || t.type == letter)) {
        next.insert(t.to);
      }
    }
    states = std::move(next);
  }
  for (uint32_t s : states) {
    if (a.accepting[s]) return true;
  }
  return false;
}

// A random expression in our syntax (with random spaces) and the same as an ECMAScript regex
// over letters a.. (type k is letter 'a' + k; `_` is any of the letters).
struct ExprPair {
  std::string expr, regex;
};
ExprPair RandomExpr(std::mt19937_64& rng, int depth, int types) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  auto space = [&] { return pick(4) == 0 ? std::string(" ") : std::string(); };
  ExprPair out;
  const int kind = depth <= 0 ? pick(2) : pick(7);
  if (kind == 0) {
    const int t = pick(types);
    out = {std::to_string(t), std::string(1, static_cast<char>('a' + t))};
  } else if (kind == 1) {
    out = {"_", "[a-" + std::string(1, static_cast<char>('a' + types)) + "]"};
  } else if (kind <= 3) {
    ExprPair l = RandomExpr(rng, depth - 1, types), r = RandomExpr(rng, depth - 1, types);
    const bool alt = kind == 3;
    out = {"(" + l.expr + space() + (alt ? "|" : "/") + space() + r.expr + ")",
           "(?:" + l.regex + (alt ? "|" : "") + r.regex + ")"};
  } else {
    ExprPair in = RandomExpr(rng, depth - 1, types);
    const char op = "*+?"[kind - 4];
    out = {in.expr + space() + op, "(?:" + in.regex + ")" + op};
  }
  return out;
}

TEST(PathExprTest, AgreesWithStdRegex) {
  std::mt19937_64 rng(7);
  const int types = 3;  // letters a..c, plus d for a type no atom names
  // Shapes where follow sets merge (a star over a concatenation ending in a star, ...).
  std::vector<ExprPair> fixed = {{"(0/1*)*", "(?:a(?:b)*)*"},
                                 {"(0/1?)+/2", "(?:ab?)+c"},
                                 {"((0|1*)/2)*", "(?:(?:a|b*)c)*"},
                                 {"_/(0|_/1)*", "[a-d](?:a|[a-d]b)*"}};
  for (int round = 0; round < 3000; ++round) {
    const ExprPair e = round < static_cast<int>(fixed.size())
                           ? fixed[round]
                           : RandomExpr(rng, 1 + static_cast<int>(rng() % 4), types);
    auto a = PathAutomaton::Parse(e.expr);
    ASSERT_TRUE(a.ok()) << e.expr << ": " << a.status().ToString();
    // libstdc++'s breadth-first matcher: the default one backtracks exponentially on nested stars.
    const std::regex re(e.regex, std::regex::ECMAScript | std::regex_constants::__polynomial);
    EXPECT_EQ(a->nullable(), std::regex_match("", re)) << e.expr;
    for (int w = 0; w < 60; ++w) {
      std::vector<int64_t> word(rng() % 6);
      std::string text;
      for (auto& letter : word) {
        letter = static_cast<int64_t>(rng() % (types + 1));
        text += static_cast<char>('a' + letter);
      }
      ASSERT_EQ(Accepts(*a, word), std::regex_match(text, re))
          << e.expr << " as " << e.regex << " on " << text;
    }
  }
}

// ---- bfs and rpq on random graphs ---------------------------------------------------------------

struct RefGraph {
  std::set<int64_t> nodes;                                      // ids with a node entry
  std::map<int64_t, std::map<int64_t, std::set<int64_t>>> out;  // src -> type -> dsts
  std::set<int64_t> endpoints;

  std::set<int64_t> Neighbors(int64_t id, int64_t type) const {
    std::set<int64_t> r;
    auto it = out.find(id);
    if (it == out.end()) return r;
    for (const auto& [t, dsts] : it->second) {
      if (type == PathAutomaton::kAnyType || t == type) r.insert(dsts.begin(), dsts.end());
    }
    return r;
  }
};

// Textbook BFS.
std::vector<BfsEntry> RefBfs(const RefGraph& g, int64_t id,
                             const std::optional<std::vector<int64_t>>& types, int max_depth,
                             int64_t limit) {
  std::map<int64_t, int> depth = {{id, 0}};
  std::queue<int64_t> q;
  q.push(id);
  while (!q.empty()) {
    const int64_t n = q.front();
    q.pop();
    if (depth[n] == max_depth) continue;
    std::set<int64_t> next;
    if (!types) {
      next = g.Neighbors(n, PathAutomaton::kAnyType);
    } else {
      for (int64_t t : *types) {
        auto part = g.Neighbors(n, t);
        next.insert(part.begin(), part.end());
      }
    }
    for (int64_t d : next) {
      if (depth.emplace(d, depth[n] + 1).second) q.push(d);
    }
  }
  std::vector<BfsEntry> out;
  for (const auto& [n, d] : depth) out.push_back({n, d});
  std::sort(out.begin(), out.end(), [](const BfsEntry& a, const BfsEntry& b) {
    return a.depth != b.depth ? a.depth < b.depth : a.id < b.id;
  });
  if (out.size() > static_cast<size_t>(limit)) out.resize(static_cast<size_t>(limit));
  return out;
}

// One BFS per source over (node, state).
RpqResult RefRpq(const RefGraph& g, const PathAutomaton& a, std::set<int64_t> sources,
                 int64_t limit) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t s : sources) {
    std::set<std::pair<int64_t, uint32_t>> seen = {{s, 0}};
    std::queue<std::pair<int64_t, uint32_t>> q;
    q.push({s, 0});
    std::set<int64_t> reached;
    while (!q.empty()) {
      auto [n, state] = q.front();
      q.pop();
      if (a.accepting[state]) reached.insert(n);
      for (const auto& t : a.transitions) {
        if (t.from != state) continue;
        for (int64_t d : g.Neighbors(n, t.type)) {
          if (seen.insert({d, t.to}).second) q.push({d, t.to});
        }
      }
    }
    for (int64_t d : reached) pairs.emplace_back(s, d);
  }
  RpqResult r;
  r.truncated = pairs.size() > static_cast<size_t>(limit);
  if (r.truncated) pairs.resize(static_cast<size_t>(limit));
  r.pairs = std::move(pairs);
  return r;
}

std::string Str(const std::vector<BfsEntry>& v) {
  std::string s;
  for (const auto& e : v) s += std::to_string(e.id) + "@" + std::to_string(e.depth) + " ";
  return s;
}
std::string Str(const RpqResult& r) {
  std::string s = r.truncated ? "truncated: " : "";
  for (const auto& [a, b] : r.pairs) s += "(" + std::to_string(a) + "," + std::to_string(b) + ")";
  return s;
}

// A random graph over ids 0..range-1 with a few large ids, `types` edge types, cycles and
// self-loops; compressed into `shards` shards at `dir`.
RefGraph MakeGraph(uint64_t seed, const std::string& dir, uint32_t shards, int64_t range, int edges,
                   int types) {
  std::mt19937_64 rng(seed);
  RefGraph ref;
  InputGraph input;
  input.node_property_names = {"name"};
  auto id = [&] {
    return rng() % 10 == 0 ? int64_t{1} << 40 | static_cast<int64_t>(rng() % 5)
                           : static_cast<int64_t>(rng() % static_cast<uint64_t>(range));
  };
  for (int64_t i = 0; i < range; ++i) {
    if (rng() % 3 != 0) {  // a third of the ids have no node entry
      ref.nodes.insert(i);
      input.nodes.push_back({i, {{0, "n" + std::to_string(i)}}});
    }
  }
  std::set<std::tuple<int64_t, int64_t, int64_t>> keys;
  for (int e = 0; e < edges; ++e) {
    const int64_t src = id(), type = static_cast<int64_t>(rng() % static_cast<uint64_t>(types));
    const int64_t dst = rng() % 8 == 0 ? src : id();  // self-loops
    if (!keys.insert({src, type, dst}).second) continue;
    input.edges.push_back({src, dst, type, static_cast<int64_t>(rng() % 100), {}});
    ref.out[src][type].insert(dst);
    ref.endpoints.insert(src);
    ref.endpoints.insert(dst);
  }
  CompressOptions options;
  options.shards = shards;
  options.threads = 2;
  CompressReport report;
  const Status s = CompressGraph(std::move(input), dir, options, nullptr, &report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ref;
}

TEST(TraversalTest, RandomGraphsMatchTheReference) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    ScratchDir dir;
    const int64_t range = 30 + static_cast<int64_t>(seed) * 15;
    const RefGraph ref = MakeGraph(seed, dir.path() + "/store", static_cast<uint32_t>(seed % 3 + 1),
                                   range, static_cast<int>(range * 2), 4);
    auto g = Graph::Open(dir.path() + "/store");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    std::mt19937_64 rng(seed * 101);
    auto some_id = [&] {
      const uint64_t r = rng() % 10;
      if (r == 0) return int64_t{1} << 40 | static_cast<int64_t>(rng() % 6);
      if (r == 1) return range + static_cast<int64_t>(rng() % 5);  // no entry, no edges
      return static_cast<int64_t>(rng() % static_cast<uint64_t>(range));
    };
    for (int q = 0; q < 150; ++q) {
      const int64_t start = some_id();
      std::optional<std::vector<int64_t>> types;
      if (rng() % 2) {
        types.emplace();
        for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
          types->push_back(static_cast<int64_t>(rng() % 6));  // 4 and 5 are unknown types
        }
      }
      const int depth = static_cast<int>(rng() % 6);
      const int64_t limit = rng() % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 8) : 10000;
      auto got = (*g)->Bfs(start, types, depth, limit);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const auto want = RefBfs(ref, start, types, depth, limit);
      ASSERT_EQ(*got, want) << "bfs " << start << " depth " << depth << " limit " << limit
                            << "\n got  " << Str(*got) << "\n want " << Str(want);
    }
    for (int q = 0; q < 120; ++q) {
      const ExprPair e = RandomExpr(rng, 1 + static_cast<int>(rng() % 3), 5);
      auto automaton = PathAutomaton::Parse(e.expr);
      ASSERT_TRUE(automaton.ok()) << e.expr;
      const int64_t limit = rng() % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 40) : 100000;
      std::optional<std::vector<int64_t>> sources;
      std::set<int64_t> from;
      if (rng() % 4 != 0) {
        sources.emplace();
        for (int k = static_cast<int>(rng() % 6); k > 0; --k) sources->push_back(some_id());
        if (!sources->empty() && rng() % 2) sources->push_back(sources->front());  // duplicate
        from.insert(sources->begin(), sources->end());
      } else {
        from = ref.nodes;
        from.insert(ref.endpoints.begin(), ref.endpoints.end());
      }
      auto got = (*g)->Rpq(e.expr, sources, limit);
      ASSERT_TRUE(got.ok()) << e.expr << ": " << got.status().ToString();
      const RpqResult want = RefRpq(ref, *automaton, from, limit);
      ASSERT_EQ(*got, want) << "rpq " << e.expr << " limit " << limit
                            << (sources ? "" : " (every source)") << "\n got  " << Str(*got)
                            << "\n want " << Str(want);
    }
  }
}

TEST(TraversalTest, ArgumentErrors) {
  ScratchDir dir;
  MakeGraph(9, dir.path() + "/store", 2, 20, 40, 2);
  auto g = Graph::Open(dir.path() + "/store");
  ASSERT_TRUE(g.ok());
  auto code = [](const auto& r) { return r.ok() ? StatusCode::kOk : r.status().code(); };
  EXPECT_EQ(code((*g)->Bfs(-1, std::nullopt, 1, 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Bfs(1, std::nullopt, -1, 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Bfs(1, std::nullopt, 11, 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Bfs(1, std::nullopt, 10, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Bfs(1, std::nullopt, 10, 1000001)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Bfs(1, std::vector<int64_t>{0, -3}, 2, 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Rpq("1/", std::nullopt, 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Rpq("1", std::vector<int64_t>{-1}, 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*g)->Rpq("1", std::nullopt, 0)), StatusCode::kInvalidArgument);
  // An empty type list allows no edge; no sources, no pairs.
  auto only = (*g)->Bfs(3, std::vector<int64_t>{}, 5, 10);
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(*only, (std::vector<BfsEntry>{{3, 0}}));
  auto none = (*g)->Rpq("_*", std::vector<int64_t>{}, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->pairs.empty());
  EXPECT_FALSE(none->truncated);
}

using Ids = std::vector<int64_t>;

// Wraps an expander, sleeping before each step.
class SlowExpander final : public FrontierExpander {
 public:
  SlowExpander(FrontierExpander* inner, std::chrono::milliseconds pause)
      : inner_(inner), pause_(pause) {}
  StatusOr<std::vector<Visit>> Expand(const PathAutomaton& a, const std::vector<Visit>& frontier,
                                      const TraversalBudget& budget) override {
    std::this_thread::sleep_for(pause_);
    return inner_->Expand(a, frontier, budget);
  }

 private:
  FrontierExpander* inner_;
  std::chrono::milliseconds pause_;
};

TEST(TraversalTest, BudgetsFailWholeQueries) {
  ScratchDir dir;
  // A dense graph: every id reaches every other.
  const RefGraph ref = MakeGraph(11, dir.path() + "/store", 3, 200, 3000, 2);
  auto g = Graph::Open(dir.path() + "/store");
  ASSERT_TRUE(g.ok());
  PulledExpander pulled(g->get());
  TraversalLimits tiny;
  tiny.memory_bytes = 4096;  // about 85 visits
  auto bfs = RunBfs(pulled, 1, std::nullopt, 5, 10000, tiny);
  ASSERT_FALSE(bfs.ok());
  EXPECT_EQ(bfs.status().code(), StatusCode::kResourceExhausted) << bfs.status().ToString();
  EXPECT_NE(bfs.status().message().find("memory budget of 4096 bytes"), std::string::npos);
  auto automaton = PathAutomaton::Parse("_*");
  ASSERT_TRUE(automaton.ok());
  auto rpq = RunRpq(pulled, *automaton, Ids{1, 2, 3}, nullptr, 100000, tiny);
  ASSERT_FALSE(rpq.ok());
  EXPECT_EQ(rpq.status().code(), StatusCode::kResourceExhausted);
  // With the limit it fits: the first sources' pairs, truncated.
  TraversalLimits normal;
  auto first = RunRpq(pulled, *automaton, Ids{1, 2, 3}, nullptr, 5, normal);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, RefRpq(ref, *automaton, {1, 2, 3}, 5));
  EXPECT_TRUE(first->truncated);

  SlowExpander slow(&pulled, std::chrono::milliseconds(30));
  TraversalLimits short_deadline;
  short_deadline.deadline = std::chrono::milliseconds(50);
  auto late = RunBfs(slow, 1, std::nullopt, 10, 10000, short_deadline);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().ToString();
  EXPECT_NE(late.status().message().find("deadline of 50 ms"), std::string::npos);
  auto late_rpq = RunRpq(slow, *automaton, Ids{1}, nullptr, 100000, short_deadline);
  ASSERT_FALSE(late_rpq.ok());
  EXPECT_EQ(late_rpq.status().code(), StatusCode::kDeadlineExceeded);
  // The deadline of the call the thread works for (util/call_deadline.h), when nearer than the
  // limits', is the query's.
  {
    CallDeadline::Scope call(CallDeadline::Clock::now() + std::chrono::milliseconds(50));
    auto cut = RunBfs(slow, 1, std::nullopt, 10, 10000, normal);
    ASSERT_FALSE(cut.ok());
    EXPECT_EQ(cut.status().code(), StatusCode::kDeadlineExceeded) << cut.status().ToString();
    EXPECT_NE(cut.status().message().find("ms (what its caller had left)"), std::string::npos)
        << cut.status().ToString();
  }
  {
    CallDeadline::Scope call(CallDeadline::Clock::now() + std::chrono::hours(1));
    const TraversalBudget budget("bfs", short_deadline);
    EXPECT_LE(budget.deadline(),
              TraversalBudget::Clock::now() + std::chrono::milliseconds(50));  // the limits'
  }
  // The shard-local step stops at its own deadline too (checked every 64 nodes), and at its
  // successor budget.
  std::vector<Visit> all;
  for (int64_t i = 0; i < 200; ++i) all.push_back({0, 0, i});
  auto step = (*g)->ExpandLocal(*automaton, all, 0, 1000000);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), StatusCode::kDeadlineExceeded) << step.status().ToString();
  auto big = (*g)->ExpandLocal(*automaton, all, 10000, 100);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted) << big.status().ToString();
  auto fine = (*g)->ExpandLocal(*automaton, all, 10000, 1000000);
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_GT(fine->size(), 100u);
}

// Steps over a RefGraph in memory.
class RefExpander final : public FrontierExpander {
 public:
  explicit RefExpander(const RefGraph* g) : g_(g) {}
  StatusOr<std::vector<Visit>> Expand(const PathAutomaton& a, const std::vector<Visit>& frontier,
                                      const TraversalBudget&) override {
    std::vector<Visit> out;
    for (const Visit& v : frontier) {
      for (const auto& t : a.transitions) {
        if (t.from != v.state) continue;
        for (int64_t d : g_->Neighbors(v.node, t.type)) out.push_back({v.tag, t.to, d});
      }
    }
    return out;
  }
  const RefGraph* g_;
};

TEST(TraversalTest, SourceBatchesShrinkToFitTheBudget) {
  // Sources 0..99 reach nothing, so batches grow; each of 100..199 walks a 300-node cycle to
  // one answer, so a grown batch does not fit in the budget and must be split.
  RefGraph g;
  for (int64_t s = 100; s < 200; ++s) g.out[s][0].insert(1000);
  for (int64_t a = 1000; a < 1300; ++a) g.out[a][0].insert(a == 1299 ? 1000 : a + 1);
  g.out[1299][1].insert(5000);
  std::set<int64_t> sources;
  for (int64_t s = 0; s < 200; ++s) sources.insert(s);
  auto automaton = PathAutomaton::Parse("0*/1");
  ASSERT_TRUE(automaton.ok());
  RefExpander expander(&g);
  TraversalLimits limits;
  limits.memory_bytes = 64 << 10;  // about 1365 visits: 4 of the big sources at once
  TraversalStats stats;
  auto got = RunRpq(expander, *automaton, Ids(sources.begin(), sources.end()), nullptr, 1000000,
                    limits, &stats);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, RefRpq(g, *automaton, sources, 1000000));
  EXPECT_EQ(got->pairs.size(), 100u);
  // One big source alone does not fit: the query fails whole.
  limits.memory_bytes = 8 << 10;
  auto too_big = RunRpq(expander, *automaton, Ids{150}, nullptr, 1000000, limits);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
}

// An expander answering a visit the coordinator never asked about.
class BadExpander final : public FrontierExpander {
 public:
  StatusOr<std::vector<Visit>> Expand(const PathAutomaton&, const std::vector<Visit>& frontier,
                                      const TraversalBudget&) override {
    return std::vector<Visit>{{frontier[0].tag + 7, 0, 5}};
  }
};

TEST(TraversalTest, MalformedStepRepliesAreInternal) {
  BadExpander bad;
  auto automaton = PathAutomaton::Parse("_");
  ASSERT_TRUE(automaton.ok());
  auto r = RunRpq(bad, *automaton, Ids{1}, nullptr, 10, TraversalLimits());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  auto b = RunBfs(bad, 1, std::nullopt, 2, 10, TraversalLimits());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInternal);
}

TEST(PathExprTest, LongPostfixRuns) {
  std::string alt = "(";
  for (int t = 0; t < 500; ++t) alt += (t ? "|" : "") + std::to_string(t % 10);
  alt += ")";
  auto a = PathAutomaton::Parse(alt + std::string(PathAutomaton::kMaxExprBytes - alt.size(), '*'));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->nullable());
  EXPECT_EQ(a->num_states(), 501u);
  // One star's worth of transitions: 500 from the start, 500 x 500 between positions.
  EXPECT_EQ(a->transitions.size(), 500u + 500u * 500u);
}

TEST(TraversalTest, LimitsValidate) {
  TraversalLimits l;
  EXPECT_TRUE(l.Validate().ok());
  l.deadline = std::chrono::milliseconds(0);
  EXPECT_FALSE(l.Validate().ok());
  l = TraversalLimits();
  l.memory_bytes = 100;
  EXPECT_FALSE(l.Validate().ok());
}

}  // namespace
}  // namespace zipg::graph
