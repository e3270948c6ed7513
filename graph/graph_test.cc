// Acceptance tests of the graph layout: random property graphs are compressed with CompressGraph
// into stores of several shard counts and sampling settings, opened with Graph::Open, and every
// read operation of the contract (../shared/spec/interface.md) is checked against a naive
// in-memory reference model written from the contract's text alone. Also covered: the store
// directory's life cycle (refusing to overwrite, replacing, never touching a non-store), property
// count limits, malformed InputGraphs, and corruption detection when opening.
//
// Choices of the engine that the model follows (graph/graph.cc):
//  * a negative id, type, pos or limit is INVALID_ARGUMENT (ids and types are >= 0 in the contract;
//    a negative position or count has no meaning);
//  * get_edge_data with a negative time_order is "out of range": null, not an error;
//  * get_edge_range of an empty range is [b, b) with b = the number of edges newer than t_hi (for
//    t_lo > t_hi too), and [0, 0) for a record that does not exist.
//
// Random values come from std::mt19937_64 (whose output the standard fixes) reduced with plain
// modulo, so every standard library generates the same inputs.

#include "graph/graph.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/compress.h"
#include "graph/input.h"
#include "graph/manifest.h"
#include "graph/memory_plan.h"
#include "graph/partitioner.h"
#include "util/memory.h"

namespace zipg {

// Failure messages name status codes ("CORRUPTION", not a byte dump).
void PrintTo(StatusCode code, std::ostream* os) { *os << StatusCodeName(code); }

namespace {

namespace fs = std::filesystem;
using graph::CompressGraph;
using graph::CompressOptions;
using graph::CompressReport;
using graph::InputEdge;
using graph::InputGraph;
using graph::InputNode;
using layout::CompressedFileOptions;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// ------------------------------------------------------------------------------------------------
// Deterministic randomness.

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  uint64_t Next() { return engine_(); }
  // Uniform-ish in [0, n), n > 0.
  uint64_t Below(uint64_t n) { return engine_() % n; }
  int64_t Range(int64_t lo, int64_t hi) {  // inclusive, hi - lo < 2^63
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
  }
  bool Chance(int percent) { return Below(100) < static_cast<uint64_t>(percent); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }
  template <typename T>
  void Shuffle(std::vector<T>* v) {
    for (size_t i = v->size(); i > 1; --i) std::swap((*v)[i - 1], (*v)[Below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

std::string Utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// Every UTF-8 length, the extremes of each, U+0000, U+FFFD, U+10FFFF and CSV-ish punctuation.
const std::vector<char32_t> kCodePoints = {
    U'a',   U'Z',   U'0',   U',',   U'"',    U'\n',   U'\r',   U' ',   U'\t',
    U'\\',  0x0000, 0x0001, 0x007F, 0x0080,  0x00E9,  0x07FF,  0x0800, 0x65E5,
    0xFFFD, 0xFFFF, 0xE000, 0xFEFF, 0x10000, 0x1F600, 0x10FFFF};

// Short values shared by many nodes, so that get_node_ids finds several; "re"/"red"/"red " make
// prefix and extension queries meaningful.
const std::vector<std::string> kCommonValues = {"red",
                                                "re",
                                                "red ",
                                                "blue",
                                                "a,b",
                                                "\"quoted\"",
                                                "two\nlines",
                                                "cr\r\n",
                                                "\xC3\xA9",
                                                "\xE6\x97\xA5\xE6\x9C\xAC",
                                                std::string("nul\0byte", 8),
                                                "\xF4\x8F\xBF\xBF",
                                                "\xEF\xBF\xBD",
                                                "0"};

std::string RandomText(Rng& rng, size_t max_chars) {
  std::string s;
  const size_t n = 1 + rng.Below(max_chars);
  for (size_t i = 0; i < n; ++i) s += Utf8(rng.Pick(kCodePoints));
  return s;
}

std::string RandomValue(Rng& rng) {
  if (rng.Chance(55)) return rng.Pick(kCommonValues);
  return RandomText(rng, 24);
}

// prefix + decimal i (written out: GCC 12 warns falsely about "literal" + std::string).
std::string Named(const char* prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

// Drops the last code point (may give "").
std::string DropLastChar(const std::string& s) {
  if (s.empty()) return s;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return s.substr(0, i);
}

const std::vector<int64_t> kTypes = {0, 1, 2, 7, int64_t{1} << 40, kMax};

int64_t RandomTimestamp(Rng& rng) {
  switch (rng.Below(6)) {
    case 0:
      return rng.Range(-3, 3);  // many ties
    case 1: {
      const int64_t extremes[] = {kMin, kMin + 1, kMax, kMax - 1, 0, -1};
      return extremes[rng.Below(6)];
    }
    case 2:
      return static_cast<int64_t>(rng.Next());  // anywhere in int64
    default:
      return 1'600'000'000'000 + rng.Range(0, 1000);  // milliseconds, a few ties
  }
}

// ------------------------------------------------------------------------------------------------
// The reference model: the contract's text, on std::map, independently of the engine.

class Model final : public GraphApi {
 public:
  explicit Model(const InputGraph& g) {
    for (const InputNode& n : g.nodes) {
      auto& props = nodes_[n.id];
      for (const auto& [index, value] : n.properties) {
        props[g.node_property_names.at(index)] = value;
      }
    }
    // Upsert: a later row with the same (src, type, dst) replaces the earlier one.
    std::map<std::tuple<int64_t, int64_t, int64_t>, Edge> latest;
    for (const InputEdge& e : g.edges) {
      std::map<std::string, std::string> props;
      for (const auto& [index, value] : e.properties) {
        props[g.edge_property_names.at(index)] = value;
      }
      latest[{e.src, e.type, e.dst}] =
          Edge{e.src, e.type, e.dst, e.timestamp, Properties(props.begin(), props.end())};
    }
    for (auto& [key, e] : latest) records_[{e.src, e.type}].push_back(e);
    for (auto& [key, edges] : records_) {
      std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
        if (a.timestamp != b.timestamp) return a.timestamp > b.timestamp;  // newest first
        return a.dst < b.dst;
      });
    }
    num_edges_ = latest.size();
  }

  const std::map<int64_t, std::map<std::string, std::string>>& nodes() const { return nodes_; }
  const std::map<std::pair<int64_t, int64_t>, std::vector<Edge>>& records() const {
    return records_;
  }
  uint64_t num_edges() const { return num_edges_; }

  StatusOr<std::optional<Properties>> GetNodeProperty(
      int64_t id, const std::vector<std::string>* names) override {
    if (id < 0) return Status::InvalidArgument("id");
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return std::optional<Properties>();
    std::map<std::string, std::string> out;
    if (names == nullptr) {
      out = it->second;
    } else {
      for (const auto& name : *names) {
        auto p = it->second.find(name);
        if (p != it->second.end()) out[name] = p->second;
      }
    }
    return std::optional<Properties>(Properties(out.begin(), out.end()));
  }

  // The contract's text: every live node with a value matching, sorted, the first `limit`.
  StatusOr<SearchResult> SearchNodeIds(const NodeSearch& q) override {
    ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
    SearchResult out;
    for (const auto& [id, props] : nodes_) {
      bool hit = false;
      for (const auto& [name, value] : props) {
        if (q.property && name != *q.property) continue;
        if (ValueMatches(value, q.pattern, q.match)) hit = true;
      }
      if (!hit) continue;
      if (out.ids.size() == static_cast<size_t>(q.limit)) {
        out.truncated = true;
        break;
      }
      out.ids.push_back(id);
    }
    return out;
  }

  StatusOr<std::vector<int64_t>> GetNodeIds(const Properties& properties) override {
    if (properties.empty()) return Status::InvalidArgument("empty");
    std::vector<int64_t> ids;
    for (const auto& [id, props] : nodes_) {
      if (HasAll(props, properties)) ids.push_back(id);
    }
    return ids;
  }

  StatusOr<std::vector<int64_t>> GetNeighborIds(int64_t id, std::optional<int64_t> type,
                                                const Properties& properties) override {
    if (id < 0 || (type && *type < 0)) return Status::InvalidArgument("id/type");
    std::set<int64_t> dsts;
    for (const auto& [key, edges] : records_) {
      if (key.first != id || (type && key.second != *type)) continue;
      for (const Edge& e : edges) dsts.insert(e.dst);
    }
    std::vector<int64_t> out;
    for (int64_t dst : dsts) {
      if (properties.empty()) {
        out.push_back(dst);
        continue;
      }
      auto it = nodes_.find(dst);
      if (it != nodes_.end() && HasAll(it->second, properties)) out.push_back(dst);
    }
    return out;
  }

  StatusOr<EdgeRecordInfo> GetEdgeRecord(int64_t id, int64_t type) override {
    if (id < 0 || type < 0) return Status::InvalidArgument("id/type");
    return EdgeRecordInfo{id, type, static_cast<int64_t>(Record(id, type).size())};
  }

  StatusOr<std::pair<int64_t, int64_t>> GetEdgeRange(int64_t id, int64_t type, int64_t t_lo,
                                                     int64_t t_hi) override {
    if (id < 0 || type < 0) return Status::InvalidArgument("id/type");
    int64_t newer = 0, inside = 0;
    for (const Edge& e : Record(id, type)) {
      if (e.timestamp > t_hi) ++newer;
      if (t_lo <= e.timestamp && e.timestamp <= t_hi) ++inside;
    }
    return std::pair<int64_t, int64_t>(newer, newer + inside);
  }

  StatusOr<std::optional<Edge>> GetEdgeData(int64_t id, int64_t type, int64_t time_order) override {
    if (id < 0 || type < 0) return Status::InvalidArgument("id/type");
    const auto& edges = Record(id, type);
    if (time_order < 0 || time_order >= static_cast<int64_t>(edges.size())) {
      return std::optional<Edge>();
    }
    return std::optional<Edge>(edges[time_order]);
  }

  StatusOr<std::optional<Node>> ObjGet(int64_t id) override {
    if (id < 0) return Status::InvalidArgument("id");
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return std::optional<Node>();
    return std::optional<Node>(Node{id, Properties(it->second.begin(), it->second.end())});
  }

  StatusOr<std::vector<Edge>> AssocRange(int64_t id, int64_t type, int64_t pos,
                                         int64_t limit) override {
    if (id < 0 || type < 0 || pos < 0 || limit < 0) return Status::InvalidArgument("args");
    std::vector<Edge> out;
    const auto& edges = Record(id, type);
    for (int64_t i = pos; i < static_cast<int64_t>(edges.size()) && i - pos < limit; ++i) {
      out.push_back(edges[i]);
    }
    return out;
  }

  StatusOr<int64_t> AssocCount(int64_t id, int64_t type) override {
    if (id < 0 || type < 0) return Status::InvalidArgument("id/type");
    return static_cast<int64_t>(Record(id, type).size());
  }

  StatusOr<std::vector<Edge>> AssocGet(int64_t id, int64_t type, const std::vector<int64_t>& ids,
                                       int64_t low, int64_t high) override {
    if (id < 0 || type < 0) return Status::InvalidArgument("id/type");
    std::vector<Edge> out;
    for (const Edge& e : Record(id, type)) {
      const bool wanted = std::find(ids.begin(), ids.end(), e.dst) != ids.end();
      if (wanted && low <= e.timestamp && e.timestamp <= high) out.push_back(e);
    }
    return out;
  }

  StatusOr<std::vector<Edge>> AssocTimeRange(int64_t id, int64_t type, int64_t low, int64_t high,
                                             int64_t limit) override {
    if (id < 0 || type < 0 || limit < 0) return Status::InvalidArgument("args");
    std::vector<Edge> out;
    for (const Edge& e : Record(id, type)) {
      if (static_cast<int64_t>(out.size()) >= limit) break;
      if (low <= e.timestamp && e.timestamp <= high) out.push_back(e);
    }
    return out;
  }

 private:
  static bool HasAll(const std::map<std::string, std::string>& props, const Properties& filter) {
    for (const auto& [name, value] : filter) {
      auto it = props.find(name);
      if (it == props.end() || it->second != value) return false;
    }
    return true;
  }
  const std::vector<Edge>& Record(int64_t id, int64_t type) const {
    static const std::vector<Edge> kNone;
    auto it = records_.find({id, type});
    return it == records_.end() ? kNone : it->second;
  }

  std::map<int64_t, std::map<std::string, std::string>> nodes_;
  std::map<std::pair<int64_t, int64_t>, std::vector<Edge>> records_;
  uint64_t num_edges_ = 0;
};

// ------------------------------------------------------------------------------------------------
// Printing results for failure messages (values shortened: some are 100 KB).

std::string Str(const std::string& s) {
  std::ostringstream out;
  out << '"';
  for (size_t i = 0; i < s.size() && i < 48; ++i) {
    const uint8_t b = s[i];
    if (b < 0x20 || b >= 0x7F || b == '"' || b == '\\') {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02X", b);
      out << buf;
    } else {
      out << static_cast<char>(b);
    }
  }
  out << '"';
  if (s.size() > 48) out << "...(" << s.size() << " bytes)";
  return out.str();
}
std::string Str(int64_t v) { return std::to_string(v); }
std::string Str(const Properties& p) {
  std::string s = "{";
  for (const auto& [name, value] : p) s += Str(name) + ":" + Str(value) + ",";
  return s + "}";
}
std::string Str(const Edge& e) {
  return "(" + Str(e.src) + "," + Str(e.type) + "," + Str(e.dst) + " @" + Str(e.timestamp) + " " +
         Str(e.properties) + ")";
}
std::string Str(const Node& n) { return "node " + Str(n.id) + " " + Str(n.properties); }
std::string Str(const EdgeRecordInfo& r) {
  return "{" + Str(r.src) + "," + Str(r.type) + ",count " + Str(r.count) + "}";
}
std::string Str(const std::pair<int64_t, int64_t>& p) {
  return "[" + Str(p.first) + "," + Str(p.second) + ")";
}
template <typename T>
std::string Str(const std::vector<T>& v) {
  std::string s = "[";
  for (const auto& x : v) s += Str(x) + " ";
  return s + "]";
}
std::string Str(const SearchResult& r) { return Str(r.ids) + (r.truncated ? " truncated" : ""); }
template <typename T>
std::string Str(const std::optional<T>& v) {
  return v ? Str(*v) : std::string("null");
}
template <typename T>
std::string Str(const StatusOr<T>& v) {
  return v.ok() ? Str(*v) : v.status().ToString();
}

// Runs one operation on the store and on the model and records a mismatch (results must be equal,
// or both errors with the same code). Reports only the first few mismatches in detail.
class Checker {
 public:
  Checker(GraphApi* store, GraphApi* model, std::string context, uint64_t detailed = 8)
      : store_(store), model_(model), context_(std::move(context)), detailed_(detailed) {}
  ~Checker() {
    if (failures_ > detailed_) {
      ADD_FAILURE() << context_ << ": " << failures_ << " mismatches in " << checks_ << " checks";
    }
  }

  template <typename F>
  void operator()(const std::string& what, F call) {
    auto got = call(*store_);
    auto want = call(*model_);
    ++checks_;
    const bool same = got.ok() ? want.ok() && *got == *want
                               : !want.ok() && got.status().code() == want.status().code();
    if (same) return;
    if (++failures_ <= detailed_) {
      ADD_FAILURE() << context_ << ": " << what << "\n  store: " << Str(got)
                    << "\n  model: " << Str(want);
    }
  }
  uint64_t checks() const { return checks_; }
  uint64_t failures() const { return failures_; }

 private:
  GraphApi* store_;
  GraphApi* model_;
  std::string context_;
  uint64_t detailed_;
  uint64_t checks_ = 0, failures_ = 0;
};

// ------------------------------------------------------------------------------------------------
// Temporary directories and random graphs.

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "zipg_graph_test.XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // Names in the directory (to find leftovers such as .tmp-* directories).
  std::set<std::string> List() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.insert(e.path().filename().string());
    return names;
  }

 private:
  std::string path_;
};

struct GraphSpec {
  size_t nodes = 200;       // nodes with a row (some without properties)
  size_t ghosts = 40;       // ids that only appear as edge endpoints
  size_t edges = 800;       // edge rows (about 10% repeat an earlier (src, type, dst))
  size_t hubs = 4;          // sources that get ~30% of the edges
  size_t big_record = 100;  // one record with many equal and extreme timestamps (0 = none)
  int node_density = 50;    // percent of the node properties a node has
  int edge_density = 40;
  std::vector<std::string> node_names = {"name",   "city",     "a,b",  "x\"y\"", "\xE5\x90\x8D",
                                         "nl\nnl", "zz_empty", "type", "0"};
  std::vector<std::string> edge_names = {"data", "weight", "\xF0\x9F\x98\x80", "w,x"};
};

struct TestGraph {
  InputGraph input;
  std::vector<int64_t> node_ids;  // ids with a node row
  std::vector<int64_t> ghost_ids;
};

graph::IndexedProperties RandomProperties(Rng& rng, size_t names, int density) {
  graph::IndexedProperties props;
  for (uint32_t i = 0; i < names; ++i) {
    if (rng.Chance(density)) props.emplace_back(i, RandomValue(rng));
  }
  return props;
}

TestGraph MakeGraph(uint64_t seed, const GraphSpec& spec) {
  Rng rng(seed);
  TestGraph t;
  // Ids: small ones, varint6 length boundaries, and ids near 2^63.
  std::set<int64_t> ids = {0,
                           1,
                           63,
                           64,
                           4095,
                           4096,
                           (int64_t{1} << 31) - 1,
                           kMax,
                           kMax - 1,
                           kMax - 2,
                           int64_t{1} << 62,
                           int64_t{1} << 32};
  const size_t total = spec.nodes + spec.ghosts;
  while (ids.size() < total) {
    ids.insert(rng.Chance(15) ? static_cast<int64_t>(rng.Next() >> 1)
                              : rng.Range(0, static_cast<int64_t>(3 * total)));
  }
  std::vector<int64_t> pool(ids.begin(), ids.end());
  rng.Shuffle(&pool);
  pool.resize(total);
  t.node_ids.assign(pool.begin(), pool.begin() + spec.nodes);
  t.ghost_ids.assign(pool.begin() + spec.nodes, pool.end());

  InputGraph& g = t.input;
  g.node_property_names = spec.node_names;
  g.edge_property_names = spec.edge_names;
  for (int64_t id : t.node_ids) {  // file order: shuffled
    InputNode node;
    node.id = id;
    if (!rng.Chance(15)) {
      node.properties = RandomProperties(rng, spec.node_names.size(), spec.node_density);
    }
    g.nodes.push_back(std::move(node));
  }
  auto random_src = [&]() -> int64_t {
    if (spec.hubs > 0 && rng.Chance(30)) return pool[rng.Below(std::min(spec.hubs, pool.size()))];
    if (!t.ghost_ids.empty() && rng.Chance(10)) return rng.Pick(t.ghost_ids);
    if (t.node_ids.empty()) return rng.Pick(t.ghost_ids);
    // Only half of the nodes get outgoing edges, so many nodes have none.
    return t.node_ids[rng.Below((t.node_ids.size() + 1) / 2)];
  };
  for (size_t i = 0; i < spec.edges; ++i) {
    InputEdge e;
    if (!g.edges.empty() && rng.Chance(10)) {
      const InputEdge& old = g.edges[rng.Below(g.edges.size())];  // upsert of an earlier key
      e.src = old.src;
      e.type = old.type;
      e.dst = old.dst;
    } else {
      e.src = random_src();
      e.dst = rng.Pick(pool);
      e.type = rng.Chance(50) ? 0 : rng.Pick(kTypes);
    }
    e.timestamp = RandomTimestamp(rng);
    e.properties = RandomProperties(rng, spec.edge_names.size(), spec.edge_density);
    g.edges.push_back(std::move(e));
  }
  if (spec.big_record > 0) {
    // One long record: equal timestamps in runs and both int64 extremes, so that its timestamp
    // column is 10 digits wide and TimeRange takes the binary-search path.
    const int64_t src = pool[0];
    const int64_t times[] = {kMin, -5, 0, 0, 0, 5, 5, kMax};
    for (size_t i = 0; i < spec.big_record; ++i) {
      InputEdge e;
      e.src = src;
      e.type = 3;
      e.dst = static_cast<int64_t>(i % 2 ? i : kMax - static_cast<int64_t>(i));
      e.timestamp = times[rng.Below(8)];
      e.properties = RandomProperties(rng, spec.edge_names.size(), spec.edge_density);
      g.edges.push_back(std::move(e));
    }
  }
  rng.Shuffle(&g.nodes);
  return t;
}

CompressOptions Options(uint32_t shards, layout::NodeFileOptions node_file,
                        layout::EdgeFileOptions edge_file) {
  CompressOptions o;
  o.shards = shards;
  o.threads = 2;
  o.node_file = node_file;
  o.edge_file = edge_file;
  return o;
}

std::unique_ptr<Graph> OpenOrDie(const std::string& dir) {
  auto g = Graph::Open(dir);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  return std::move(g).value();
}

// ------------------------------------------------------------------------------------------------
// Queries: every operation, with arguments drawn from the graph and its edge cases.

struct QueryBudget {
  size_t node_ids_queries = 150;
  size_t neighbor_filters = 3;  // filtered get_neighbor_ids per source
  size_t per_record = 6;        // random range/get/time_range queries per record
};

// Timestamps worth querying around for a record: each distinct one, its neighbours, extremes.
std::vector<int64_t> InterestingTimes(const std::vector<Edge>& edges) {
  std::set<int64_t> t = {kMin, kMin + 1, -1, 0, 1, kMax - 1, kMax};
  for (const Edge& e : edges) {
    t.insert(e.timestamp);
    if (e.timestamp != kMin) t.insert(e.timestamp - 1);
    if (e.timestamp != kMax) t.insert(e.timestamp + 1);
  }
  return std::vector<int64_t>(t.begin(), t.end());
}

Properties RandomFilter(Rng& rng, const Model& model, const std::vector<std::string>& names,
                        size_t max_pairs) {
  std::map<std::string, std::string> filter;
  const size_t pairs = 1 + rng.Below(max_pairs);
  // Start from a real node's values most of the time, so that matches exist.
  auto it = model.nodes().begin();
  std::advance(it, rng.Below(model.nodes().size()));
  const auto& props = it->second;
  for (size_t i = 0; i < pairs; ++i) {
    const int kind = static_cast<int>(rng.Below(10));
    if (kind < 5 && !props.empty()) {  // a value that exists
      auto p = props.begin();
      std::advance(p, rng.Below(props.size()));
      filter[p->first] = p->second;
    } else if (kind < 7 && !props.empty()) {  // a prefix or an extension of an existing value
      auto p = props.begin();
      std::advance(p, rng.Below(props.size()));
      filter[p->first] = rng.Chance(50) ? DropLastChar(p->second)
                                        : p->second + (rng.Chance(50) ? "x" : "\xEF\xBF\xBD");
    } else if (kind == 7) {  // an unknown property name
      filter[rng.Chance(50) ? "no such property" : ""] = rng.Pick(kCommonValues);
    } else if (kind == 8 && !names.empty()) {  // a common value under any name
      filter[rng.Pick(names)] = rng.Pick(kCommonValues);
    } else {  // something random, sometimes not even UTF-8
      filter[names.empty() ? "n" : rng.Pick(names)] =
          rng.Chance(20) ? std::string("\xFF\xF5", 2) : RandomValue(rng);
    }
  }
  return Properties(filter.begin(), filter.end());
}

template <typename CheckFn>
void CheckSearches(CheckFn& check, Rng& rng, const Model& model,
                   const std::vector<std::string>& node_names, size_t queries) {
  std::vector<std::string> values;
  for (const auto& [id, props] : model.nodes()) {
    for (const auto& [name, value] : props) {
      if (!value.empty()) values.push_back(value);
    }
  }
  const SearchMatch kinds[] = {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix,
                               SearchMatch::kExact};
  for (size_t i = 0; i < queries; ++i) {
    NodeSearch q;
    if (!values.empty() && rng.Chance(60)) {
      const std::string& v = rng.Pick(values);
      const size_t at = rng.Below(v.size());
      q.pattern = rng.Chance(30) ? v : v.substr(at, 1 + rng.Below(v.size() - at));
    } else if (rng.Chance(60)) {
      q.pattern = rng.Pick(kCommonValues);
    } else {
      q.pattern = rng.Chance(10) ? std::string("re\xF5", 3) : RandomText(rng, 3);
    }
    q.match = kinds[rng.Below(4)];
    if (!node_names.empty() && rng.Chance(40)) q.property = rng.Pick(node_names);
    if (rng.Chance(5)) q.property = "no such property";
    q.limit = rng.Chance(30) ? 1 + static_cast<int64_t>(rng.Below(5)) : kDefaultSearchLimit;
    check(std::string("search_node_ids ") + SearchMatchName(q.match) + " " + Str(q.pattern) +
              " in " + q.property.value_or("any") + " limit " + std::to_string(q.limit),
          [&](GraphApi& g) { return g.SearchNodeIds(q); });
  }
  for (NodeSearch bad :
       {NodeSearch{"", std::nullopt, SearchMatch::kContains, 10},
        NodeSearch{std::string(kMaxSearchPattern + 1, 'a'), std::nullopt, SearchMatch::kPrefix, 10},
        NodeSearch{"a", std::nullopt, SearchMatch::kContains, 0},
        NodeSearch{"a", std::nullopt, SearchMatch::kContains, kMaxSearchLimit + 1}}) {
    check("search_node_ids refused", [&](GraphApi& g) { return g.SearchNodeIds(bad); });
  }
}

void CheckEveryOperation(GraphApi* store, Model* model, const TestGraph& t,
                         const std::vector<std::string>& node_names, uint64_t seed,
                         const std::string& context, const QueryBudget& budget = {}) {
  Rng rng(seed);
  Checker check(store, model, context);
  const auto S = [](int64_t v) { return std::to_string(v); };

  // Node reads: every node, every ghost, absent and invalid ids.
  std::vector<int64_t> ids = t.node_ids;
  ids.insert(ids.end(), t.ghost_ids.begin(), t.ghost_ids.end());
  for (int64_t extra : {int64_t{0}, int64_t{2}, kMax, kMax - 1, kMax - 3, int64_t{-1}, kMin}) {
    ids.push_back(extra);
  }
  std::vector<std::string> query_names = node_names;
  query_names.insert(query_names.end(), {"no such property", "", "name\xF5"});
  for (int64_t id : ids) {
    check("obj_get " + S(id), [&](GraphApi& g) { return g.ObjGet(id); });
    check("get_node_property all " + S(id),
          [&](GraphApi& g) { return g.GetNodeProperty(id, nullptr); });
    const std::vector<std::string> none;
    check("get_node_property [] " + S(id),
          [&](GraphApi& g) { return g.GetNodeProperty(id, &none); });
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> names;
      const size_t n = 1 + rng.Below(4);
      for (size_t j = 0; j < n; ++j) names.push_back(rng.Pick(query_names));
      if (rng.Chance(30)) names.push_back(names[0]);  // a duplicate
      check("get_node_property subset " + S(id) + " " + Str(names),
            [&](GraphApi& g) { return g.GetNodeProperty(id, &names); });
    }
  }

  // get_node_ids.
  check("get_node_ids {}", [&](GraphApi& g) { return g.GetNodeIds({}); });
  if (!model->nodes().empty()) {
    for (size_t i = 0; i < budget.node_ids_queries; ++i) {
      const Properties filter = RandomFilter(rng, *model, node_names, 3);
      check("get_node_ids " + Str(filter), [&](GraphApi& g) { return g.GetNodeIds(filter); });
    }
  }
  for (const auto& value : kCommonValues) {
    for (const auto& name : node_names) {
      if (rng.Chance(30)) {
        const Properties filter = {{name, value}};
        check("get_node_ids " + Str(filter), [&](GraphApi& g) { return g.GetNodeIds(filter); });
      }
    }
  }
  {
    const Properties empty_value = {{node_names.empty() ? "x" : node_names[0], ""}};
    check("get_node_ids empty value", [&](GraphApi& g) { return g.GetNodeIds(empty_value); });
  }

  // search_node_ids: pieces of stored values (any byte boundary), common values, random text and
  // bytes no value holds; every match kind, with and without a property, small and large limits;
  // and the arguments the contract refuses.
  CheckSearches(check, rng, *model, node_names, budget.node_ids_queries);

  // get_neighbor_ids: every source, with and without type and filters.
  std::set<int64_t> sources(ids.begin(), ids.end());
  std::map<int64_t, std::set<int64_t>> types_of;
  for (const auto& [key, edges] : model->records()) types_of[key.first].insert(key.second);
  for (int64_t src : sources) {
    check("get_neighbor_ids " + S(src),
          [&](GraphApi& g) { return g.GetNeighborIds(src, std::nullopt, {}); });
    std::vector<int64_t> types(types_of[src].begin(), types_of[src].end());
    types.insert(types.end(), {5, -1, kMin});
    for (int64_t type : types) {
      check("get_neighbor_ids " + S(src) + " type " + S(type),
            [&](GraphApi& g) { return g.GetNeighborIds(src, type, {}); });
    }
    if (model->nodes().empty()) continue;
    for (size_t i = 0; i < budget.neighbor_filters; ++i) {
      const Properties filter = RandomFilter(rng, *model, node_names, 2);
      std::optional<int64_t> type;
      if (rng.Chance(40)) type = rng.Pick(types);
      check("get_neighbor_ids " + S(src) + " type " + (type ? S(*type) : "-") + " " + Str(filter),
            [&](GraphApi& g) { return g.GetNeighborIds(src, type, filter); });
    }
  }

  // Edge-record operations: every record, plus absent ones.
  std::vector<std::pair<int64_t, int64_t>> keys;
  for (const auto& [key, edges] : model->records()) keys.push_back(key);
  for (int64_t src : {int64_t{0}, kMax, t.node_ids.empty() ? int64_t{3} : t.node_ids.back()}) {
    keys.push_back({src, 5});
    keys.push_back({src, kMax - 1});
  }
  keys.push_back({-1, 0});
  keys.push_back({0, -1});
  keys.push_back({kMin, kMin});
  static const std::vector<Edge> kNoEdges;
  for (const auto& key : keys) {  // not a structured binding: clang 14 cannot capture one
    const int64_t src = key.first, type = key.second;
    auto rec = model->records().find({src, type});
    const std::vector<Edge>& edges = rec == model->records().end() ? kNoEdges : rec->second;
    const int64_t count = static_cast<int64_t>(edges.size());
    const std::string at = "(" + S(src) + "," + S(type) + ") ";
    check("get_edge_record " + at, [&](GraphApi& g) { return g.GetEdgeRecord(src, type); });
    check("assoc_count " + at, [&](GraphApi& g) { return g.AssocCount(src, type); });

    const std::vector<int64_t> times = InterestingTimes(edges);
    auto range_check = [&](int64_t lo, int64_t hi) {
      check("get_edge_range " + at + S(lo) + ".." + S(hi),
            [&](GraphApi& g) { return g.GetEdgeRange(src, type, lo, hi); });
    };
    range_check(kMin, kMax);
    range_check(kMax, kMin);
    range_check(kMin, kMin);
    range_check(kMax, kMax);
    for (size_t i = 0; i < budget.per_record; ++i) {
      const int64_t a = rng.Pick(times), b = rng.Pick(times);
      range_check(a, b);  // sometimes a > b
      range_check(a, a);  // exact equality at both ends
      range_check(std::min(a, b), std::max(a, b));
    }

    for (int64_t order : {int64_t{-1}, kMin, int64_t{0}, int64_t{1}, count - 1, count, count + 1,
                          kMax, count > 0 ? static_cast<int64_t>(rng.Below(count)) : 0}) {
      check("get_edge_data " + at + S(order),
            [&](GraphApi& g) { return g.GetEdgeData(src, type, order); });
    }

    check("assoc_range all " + at, [&](GraphApi& g) { return g.AssocRange(src, type, 0, kMax); });
    const std::vector<int64_t> positions = {0, 1, count - 1, count, count + 3, kMax, -1};
    const std::vector<int64_t> limits = {0, 1, 2, count, kMax, -1};
    for (size_t i = 0; i < budget.per_record + 2; ++i) {
      const int64_t pos = rng.Chance(20) ? rng.Range(0, count + 1) : rng.Pick(positions);
      const int64_t limit = rng.Chance(20) ? rng.Range(0, count + 1) : rng.Pick(limits);
      check("assoc_range " + at + S(pos) + " " + S(limit),
            [&](GraphApi& g) { return g.AssocRange(src, type, pos, limit); });
    }

    for (size_t i = 0; i < budget.per_record; ++i) {
      std::vector<int64_t> wanted;
      const size_t n = rng.Below(5);
      for (size_t j = 0; j < n; ++j) {
        if (count > 0 && rng.Chance(70)) {
          wanted.push_back(edges[rng.Below(count)].dst);
        } else {
          wanted.push_back(rng.Chance(50) ? rng.Range(0, 1000) : kMax - rng.Range(0, 3));
        }
      }
      if (!wanted.empty() && rng.Chance(30)) wanted.push_back(wanted[0]);  // a duplicate
      if (rng.Chance(10)) wanted.push_back(-7);
      int64_t low = rng.Pick(times), high = rng.Pick(times);
      if (rng.Chance(40)) {
        low = kMin;
        high = kMax;
      } else if (rng.Chance(70) && low > high) {
        std::swap(low, high);
      }
      check("assoc_get " + at + Str(wanted) + " " + S(low) + ".." + S(high),
            [&](GraphApi& g) { return g.AssocGet(src, type, wanted, low, high); });
    }

    for (size_t i = 0; i < budget.per_record; ++i) {
      int64_t low = rng.Pick(times), high = rng.Pick(times);
      if (rng.Chance(70) && low > high) std::swap(low, high);
      if (rng.Chance(20)) {
        low = kMin;
        high = kMax;
      }
      const int64_t limit = rng.Pick(limits);
      check("assoc_time_range " + at + S(low) + ".." + S(high) + " limit " + S(limit),
            [&](GraphApi& g) { return g.AssocTimeRange(src, type, low, high, limit); });
    }
  }
  EXPECT_EQ(check.failures(), 0u) << context << ": " << check.checks() << " checks";
}

// Compresses `t` (a copy) and checks the report against the model.
void Compress(const TestGraph& t, const std::string& dir, const CompressOptions& options,
              const Model& model) {
  CompressReport report;
  std::map<std::string, std::pair<uint64_t, uint64_t>> progress;  // phase -> (calls, bad calls)
  const Status s = CompressGraph(
      t.input, dir, options,
      [&](std::string_view phase, uint64_t done, uint64_t total) {
        auto& p = progress[std::string(phase)];
        ++p.first;
        if (done > total) ++p.second;
      },
      &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(report.nodes, t.input.nodes.size());
  EXPECT_EQ(report.edges, model.num_edges());
  EXPECT_EQ(report.shards, options.shards);
  uint64_t sum = 0;
  for (const auto& [name, bytes] : report.breakdown) sum += bytes;
  EXPECT_EQ(sum, report.stored_bytes);
  // The report counts what is written: the store's files, byte for byte.
  uint64_t on_disk = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) on_disk += e.file_size();
  }
  EXPECT_EQ(on_disk, report.stored_bytes);
  for (const char* phase : {"partition", "build", "finish"}) {
    EXPECT_GT(progress[phase].first, 0u) << phase;
    EXPECT_EQ(progress[phase].second, 0u) << phase << ": done > total";
  }
}

// ------------------------------------------------------------------------------------------------
// Randomized graphs over shard counts and sampling settings.

const CompressedFileOptions kSampling[] = {
    {1, 1, 2, false}, {4, 8, 16, false}, {32, 32, 64, false}, {64, 128, 128, false}};
// EdgeFile layouts: format 3 over each sampling above, then format 4 in small blocks (records
// span blocks; lookups walk across them) and in the default's 4 KiB blocks (level 3: the level
// changes only the size).
const layout::EdgeFileOptions kEdgeLayouts[] = {
    {3, {}, kSampling[0]}, {3, {}, kSampling[1]},    {3, {}, kSampling[2]},
    {3, {}, kSampling[3]}, {4, {1024, 1, 4096}, {}}, {4, {4096, 3, 64 << 10}, {}}};
constexpr int kNumEdgeLayouts = 6;
// NodeFile layouts, likewise: format 1 over each sampling, then format 2 in two block sizes
// (search_node_ids scans), then format 3 with a search index on every property (sampled densely)
// and on some of them (the others scanned, and in the value index).
const layout::NodeFileOptions kNodeLayouts[] = {
    {1, {}, kSampling[0]},
    {1, {}, kSampling[1]},
    {1, {}, kSampling[2]},
    {1, {}, kSampling[3]},
    {2, {1024, 1, 4096}, {}},
    {2, {4096, 3, 64 << 10}, {}},
    {3, {1024, 1, 4096}, {}, {}, {2}},
    {3, {4096, 3, 64 << 10}, {}, {false, {"\xE5\x90\x8D", "city", "name", "nl\nnl"}}, {32}}};
constexpr int kNumNodeLayouts = 8;

struct Config {
  uint32_t shards;
  int node_sampling;  // index into kNodeLayouts
  int edge_sampling;  // index into kEdgeLayouts
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << "shards " << c.shards << ", sampling " << c.node_sampling << "/" << c.edge_sampling;
}

class RandomGraphTest : public testing::TestWithParam<Config> {};

TEST_P(RandomGraphTest, EveryOperationMatchesTheModel) {
  const Config c = GetParam();
  const uint64_t seed = 1000 + c.shards * 16 + c.node_sampling * 4 + c.edge_sampling;
  const TestGraph t = MakeGraph(seed, GraphSpec{});
  Model model(t.input);
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  Compress(t, dir, Options(c.shards, kNodeLayouts[c.node_sampling], kEdgeLayouts[c.edge_sampling]),
           model);
  if (HasFatalFailure()) return;
  EXPECT_EQ(tmp.List(), std::set<std::string>{"store"}) << "leftovers next to the store";
  auto g = OpenOrDie(dir);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->num_shards(), c.shards);
  CheckEveryOperation(g.get(), &model, t, GraphSpec{}.node_names, seed * 7,
                      "shards " + std::to_string(c.shards) + " sampling " +
                          std::to_string(c.node_sampling) + "/" + std::to_string(c.edge_sampling));
}

// Every shard count with every node layout; the edge layout is rotated so that each of them
// occurs with several node layouts (of both formats) and shard counts.
std::vector<Config> AllConfigs() {
  std::vector<Config> configs;
  const uint32_t shard_counts[] = {1, 2, 3, 7};
  for (int s = 0; s < 4; ++s) {
    for (int n = 0; n < kNumNodeLayouts; ++n) {
      configs.push_back(Config{shard_counts[s], n, (n + 2 * s) % kNumEdgeLayouts});
    }
  }
  return configs;
}

INSTANTIATE_TEST_SUITE_P(ShardsAndSampling, RandomGraphTest, testing::ValuesIn(AllConfigs()),
                         [](const testing::TestParamInfo<Config>& info) {
                           return "shards" + std::to_string(info.param.shards) + "_node" +
                                  std::to_string(info.param.node_sampling) + "_edge" +
                                  std::to_string(info.param.edge_sampling);
                         });

TEST(GraphTest, ConcurrentReadersMatchTheModel) {
  const TestGraph t = MakeGraph(77, GraphSpec{});
  Model model(t.input);
  TempDir tmp;
  Compress(t, tmp.Sub("store"), Options(3, kNodeLayouts[5], kEdgeLayouts[5]), model);
  if (HasFatalFailure()) return;
  auto g = OpenOrDie(tmp.Sub("store"));
  ASSERT_NE(g, nullptr);
  std::vector<std::thread> threads;
  std::vector<Model> models(4, model);  // the model is not thread-safe; the store must be
  QueryBudget small;
  small.node_ids_queries = 40;
  small.neighbor_filters = 1;
  small.per_record = 2;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      CheckEveryOperation(g.get(), &models[i], t, GraphSpec{}.node_names, 500 + i,
                          "thread " + std::to_string(i), small);
    });
  }
  for (auto& th : threads) th.join();
}

// Several machines each build some shards of one store (compress --shards A,B --of N): every
// shard they build is the whole store's, byte for byte, and a part opens only for its shards.
TEST(GraphTest, ShardsBuiltInPartsAreTheShardsOfTheWholeStore) {
  const TestGraph t = MakeGraph(61, GraphSpec{});
  Model model(t.input);
  TempDir tmp;
  const CompressOptions whole = Options(4, kNodeLayouts[5], kEdgeLayouts[5]);
  Compress(t, tmp.Sub("whole"), whole, model);
  if (HasFatalFailure()) return;
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ASSERT_TRUE(graph::ReadManifest(tmp.Sub("whole")).ok());
  const graph::Manifest full = *graph::ReadManifest(tmp.Sub("whole"));
  EXPECT_TRUE(full.built_shards.empty());
  uint64_t nodes = 0, edges = 0;
  std::set<std::string> files;
  for (const std::vector<uint32_t>& part : {std::vector<uint32_t>{0, 2}, {1, 3}}) {
    const std::string dir = tmp.Sub("part" + std::to_string(part[0]));
    CompressOptions options = whole;
    options.build_only = part;
    CompressReport report;
    const Status s = CompressGraph(t.input, dir, options, nullptr, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto m = graph::ReadManifest(dir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->built_shards, part);
    EXPECT_EQ(m->shards, 4u);
    EXPECT_EQ(m->node_properties, full.node_properties);
    EXPECT_EQ(m->edge_properties, full.edge_properties);
    nodes += m->nodes;
    edges += m->edges;
    for (const auto& f : m->files) {
      const uint32_t shard = static_cast<uint32_t>(std::stoul(f.path.substr(6, 4)));
      EXPECT_TRUE(std::count(part.begin(), part.end(), shard)) << f.path;
      EXPECT_EQ(slurp(dir + "/" + f.path), slurp(tmp.Sub("whole") + "/" + f.path)) << f.path;
      EXPECT_TRUE(files.insert(f.path).second) << f.path << " built twice";
    }
    for (uint32_t shard = 0; shard < 4; ++shard) {
      const bool held = std::count(part.begin(), part.end(), shard) > 0;
      EXPECT_EQ(m->Holds(shard), held);
      EXPECT_EQ(fs::exists(dir + "/" + graph::ShardDirName(shard)), held);
    }
    // The servers of its shards open it; nothing else does.
    EXPECT_TRUE(OpenStore(dir, {}, &part).ok());
    const std::vector<uint32_t> other = {part[0] == 0 ? 1u : 0u};
    auto missing = OpenStore(dir, {}, &other);
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
    auto all = Graph::Open(dir, {});
    EXPECT_EQ(all.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(all.status().message().find("holds only shards"), std::string::npos)
        << all.status().ToString();
  }
  EXPECT_EQ(nodes, full.nodes);
  EXPECT_EQ(edges, full.edges);
  EXPECT_EQ(files.size(), full.files.size());

  // Bad lists are refused before anything is read.
  for (const std::vector<uint32_t>& bad : {std::vector<uint32_t>{4}, {1, 1}, {2, 1}}) {
    CompressOptions options = whole;
    options.build_only = bad;
    EXPECT_EQ(options.Validate().code(), StatusCode::kInvalidArgument);
  }
  CompressOptions no_count = whole;
  no_count.shards = 0;
  no_count.build_only = {0};
  EXPECT_EQ(no_count.Validate().code(), StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------------------------------------
// Special graphs.

TEST(GraphTest, EmptyGraph) {
  for (uint32_t shards : {1u, 3u}) {
    TempDir tmp;
    TestGraph t;
    Model model(t.input);
    Compress(t, tmp.Sub("store"), Options(shards, kNodeLayouts[0], kEdgeLayouts[3]), model);
    if (HasFatalFailure()) return;
    auto g = OpenOrDie(tmp.Sub("store"));
    ASSERT_NE(g, nullptr);
    t.node_ids = {0, 1, kMax};
    CheckEveryOperation(g.get(), &model, t, {"p"}, 3, "empty graph " + std::to_string(shards));
    const Properties filter = {{"p", "v"}};
    auto ids = g->GetNodeIds(filter);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_TRUE(ids->empty());
  }
}

TEST(GraphTest, EdgesOnly) {
  GraphSpec spec;
  spec.nodes = 0;
  spec.ghosts = 60;
  spec.hubs = 0;
  spec.node_names.clear();
  const TestGraph t = MakeGraph(9, spec);  // no node rows: every endpoint is a ghost
  Model model(t.input);
  TempDir tmp;
  Compress(t, tmp.Sub("store"), Options(2, kNodeLayouts[4], kEdgeLayouts[4]), model);
  if (HasFatalFailure()) return;
  auto g = OpenOrDie(tmp.Sub("store"));
  ASSERT_NE(g, nullptr);
  CheckEveryOperation(g.get(), &model, t, {"name"}, 11, "edges only");
  // A missing node matches no non-empty filter; with no filter every neighbor is kept.
  const int64_t src = t.input.edges[0].src;
  auto all = g->GetNeighborIds(src, std::nullopt, {});
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->empty());
  const Properties filter = {{"name", "red"}};
  auto filtered = g->GetNeighborIds(src, std::nullopt, filter);
  ASSERT_TRUE(filtered.ok());
  EXPECT_TRUE(filtered->empty());
}

// The special cases above, written out by hand: checks the model as much as the store.
TEST(GraphTest, HandWrittenExpectations) {
  InputGraph g;
  g.node_property_names = {"name", "city"};
  g.edge_property_names = {"w"};
  g.nodes = {{kMax, {{0, "max"}}}, {5, {{1, "Paris"}}}, {6, {}}, {7, {{0, "x"}, {1, "Paris"}}}};
  g.edges = {
      {5, 6, 1, 10, {{0, "old"}}},  // replaced by the row below
      {5, 7, 1, 20, {}},
      {5, 6, 1, 20, {{0, "new"}}},
      {5, kMax, 1, kMin, {}},
      {5, 99, 1, kMax, {}},  // dst without a node
      {5, 6, 2, 0, {}},
  };
  TempDir tmp;
  ASSERT_TRUE(
      CompressGraph(g, tmp.Sub("s"), Options(2, kNodeLayouts[5], kEdgeLayouts[5]), {}, nullptr)
          .ok());
  auto store = OpenOrDie(tmp.Sub("s"));
  ASSERT_NE(store, nullptr);
  auto count = store->AssocCount(5, 1);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 4);
  auto edges = store->AssocRange(5, 1, 0, 10);
  ASSERT_TRUE(edges.ok());
  ASSERT_EQ(edges->size(), 4u);
  EXPECT_EQ((*edges)[0], (Edge{5, 1, 99, kMax, {}}));
  EXPECT_EQ((*edges)[1], (Edge{5, 1, 6, 20, {{"w", "new"}}}));  // ties: dst ascending
  EXPECT_EQ((*edges)[2], (Edge{5, 1, 7, 20, {}}));
  EXPECT_EQ((*edges)[3], (Edge{5, 1, kMax, kMin, {}}));
  auto range = store->GetEdgeRange(5, 1, 20, 20);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, (std::pair<int64_t, int64_t>(1, 3)));
  range = store->GetEdgeRange(5, 1, kMin, kMin);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, (std::pair<int64_t, int64_t>(3, 4)));
  auto neighbors = store->GetNeighborIds(5, std::nullopt, {{"city", "Paris"}});
  ASSERT_TRUE(neighbors.ok());
  EXPECT_EQ(*neighbors, (std::vector<int64_t>{7}));
  neighbors = store->GetNeighborIds(5, std::nullopt, {});
  ASSERT_TRUE(neighbors.ok());
  EXPECT_EQ(*neighbors, (std::vector<int64_t>{6, 7, 99, kMax}));
  auto ids = store->GetNodeIds({{"city", "Paris"}});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int64_t>{5, 7}));
  auto node = store->ObjGet(6);
  ASSERT_TRUE(node.ok());
  ASSERT_TRUE(node->has_value());
  EXPECT_TRUE((*node)->properties.empty());
  node = store->ObjGet(kMax);
  ASSERT_TRUE(node.ok() && node->has_value());
  EXPECT_EQ((*node)->properties, (Properties{{"name", "max"}}));
  // Negative arguments.
  EXPECT_EQ(store->ObjGet(-1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->AssocRange(5, 1, -1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->AssocRange(5, 1, 0, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->AssocTimeRange(5, 1, 0, 1, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->AssocGet(5, -1, {6}, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->GetNeighborIds(5, -1, {}).status().code(), StatusCode::kInvalidArgument);
  auto data = store->GetEdgeData(5, 1, -1);
  ASSERT_TRUE(data.ok());
  EXPECT_FALSE(data->has_value());
}

TEST(GraphTest, HugeValuesAndEveryUtf8Length) {
  Rng rng(21);
  InputGraph g;
  g.node_property_names = {"big", "small", "all"};
  g.edge_property_names = {"payload", "tag"};
  std::string all_chars;
  for (char32_t c : kCodePoints) all_chars += Utf8(c);
  std::string big1;  // 100 KB+ of mixed-length characters
  while (big1.size() < 110'000) big1 += Utf8(rng.Pick(kCodePoints));
  std::string big2(150'000, 'a');  // highly repetitive
  std::string big3 = big1.substr(0, 60'000) + "\xF4\x8F\xBF\xBF" + big1.substr(0, 60'000);
  g.nodes = {{1, {{0, big1}, {1, "s"}, {2, all_chars}}},
             {2, {{0, big2}}},
             {3, {{0, big3}, {2, all_chars}}},
             {4, {{1, big1.substr(0, 1000)}}},
             {kMax, {{0, big1}, {1, "max"}}}};
  g.edges = {{1, 2, 0, 5, {{0, big1}, {1, "t"}}},
             {1, 3, 0, 5, {{1, all_chars}}},
             {1, 4, 0, kMin, {{0, big2}}},
             {2, 1, 9, 0, {{0, all_chars + big3}}}};
  for (uint32_t shards : {1u, 3u}) {
    TempDir tmp;
    TestGraph t;
    t.input = g;
    t.node_ids = {1, 2, 3, 4, kMax};
    Model model(t.input);
    Compress(t, tmp.Sub("store"), Options(shards, kNodeLayouts[3], kEdgeLayouts[4]), model);
    if (HasFatalFailure()) return;
    auto store = OpenOrDie(tmp.Sub("store"));
    ASSERT_NE(store, nullptr);
    QueryBudget small;
    small.node_ids_queries = 30;
    CheckEveryOperation(store.get(), &model, t, g.node_property_names, 22,
                        "huge values, shards " + std::to_string(shards), small);
    Checker check(store.get(), &model, "huge value search");
    for (const std::string& v : {big1, big2, big3, DropLastChar(big1), big1 + "x", all_chars,
                                 DropLastChar(all_chars), big1.substr(0, 1000)}) {
      for (const char* name : {"big", "small", "all"}) {
        const Properties filter = {{name, v}};
        check(std::string("get_node_ids ") + name + " " + Str(v),
              [&](GraphApi& api) { return api.GetNodeIds(filter); });
      }
    }
    const Properties two = {{"big", big1}, {"small", "max"}};
    check("get_node_ids two", [&](GraphApi& api) { return api.GetNodeIds(two); });
  }
}

// 1000 node property names and the layout's maximum of 1024 edge property names; a node with all
// of them (a header far longer than the first guess) and values under the highest numbers.
TEST(GraphTest, ManyProperties) {
  Rng rng(31);
  InputGraph g;
  for (int i = 0; i < 1000; ++i) g.node_property_names.push_back(Named("p", i * 7919));
  for (int i = 0; i < 1024; ++i) g.edge_property_names.push_back(Named("e", i));
  TestGraph t;
  for (int64_t id = 0; id < 60; ++id) {
    InputNode node;
    node.id = id * 3;
    for (uint32_t p = 0; p < 1000; ++p) {
      if (id == 0 || rng.Chance(3) || (id == 1 && p >= 990)) {
        node.properties.emplace_back(p,
                                     rng.Chance(50) ? rng.Pick(kCommonValues) : RandomText(rng, 6));
      }
    }
    t.node_ids.push_back(node.id);
    g.nodes.push_back(std::move(node));
  }
  for (int i = 0; i < 200; ++i) {
    InputEdge e;
    e.src = rng.Pick(t.node_ids);
    e.dst = rng.Pick(t.node_ids);
    e.type = rng.Below(3);
    e.timestamp = RandomTimestamp(rng);
    for (uint32_t p = 0; p < 1024; ++p) {
      if (rng.Chance(1) || (i == 0) || (i == 1 && p >= 1000)) {
        e.properties.emplace_back(p, RandomText(rng, 4));
      }
    }
    g.edges.push_back(std::move(e));
  }
  t.input = g;
  Model model(t.input);
  TempDir tmp;
  Compress(t, tmp.Sub("store"), Options(2, kNodeLayouts[5], kEdgeLayouts[3]), model);
  if (HasFatalFailure()) return;
  auto store = OpenOrDie(tmp.Sub("store"));
  ASSERT_NE(store, nullptr);
  QueryBudget budget;
  budget.node_ids_queries = 300;
  budget.per_record = 2;
  CheckEveryOperation(store.get(), &model, t, g.node_property_names, 32, "many properties", budget);
  // The highest property numbers (delimiter lead byte 0xFD) and the lowest.
  Checker check(store.get(), &model, "many properties");
  for (uint32_t p : {0u, 127u, 128u, 895u, 896u, 998u, 999u}) {
    const std::string& name = g.node_property_names[p];
    const std::vector<std::string> names = {name};
    for (int64_t id : {int64_t{0}, int64_t{3}}) {
      check("get_node_property " + name,
            [&](GraphApi& api) { return api.GetNodeProperty(id, &names); });
    }
    for (const auto& [index, value] : g.nodes[0].properties) {
      if (index != p) continue;
      const Properties filter = {{name, value}};
      check("get_node_ids " + name, [&](GraphApi& api) { return api.GetNodeIds(filter); });
    }
  }
}

TEST(GraphTest, TooManyPropertiesFailAndLeaveNoStore) {
  for (bool on_edges : {false, true}) {
    InputGraph g;
    auto& names = on_edges ? g.edge_property_names : g.node_property_names;
    for (int i = 0; i < 1025; ++i) names.push_back(Named("q", i));
    g.nodes = {{1, {}}};
    g.edges = {{1, 1, 0, 0, {}}};
    TempDir tmp;
    const Status s = CompressGraph(g, tmp.Sub("store"),
                                   Options(2, kNodeLayouts[5], kEdgeLayouts[5]), {}, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_TRUE(tmp.List().empty()) << "left behind: " << *tmp.List().begin();
  }
}

// InputGraphs that break the data model are refused with INVALID_ARGUMENT and leave nothing
// behind (no store, no temporary directory).
void ExpectRejected(const char* what, const std::function<void(InputGraph*)>& mutate) {
  TestGraph t = MakeGraph(41, GraphSpec{});
  mutate(&t.input);
  TempDir tmp;
  const Status s = CompressGraph(std::move(t.input), tmp.Sub("store"),
                                 Options(3, kNodeLayouts[5], kEdgeLayouts[5]), {}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
  EXPECT_TRUE(tmp.List().empty()) << what << ": left " << *tmp.List().begin();
}

TEST(GraphTest, MalformedInputGraphsFailAndLeaveNoStore) {
  ExpectRejected("duplicate node id", [](InputGraph* g) {
    g->nodes.push_back({g->nodes[0].id, {}});
  });
  ExpectRejected("negative edge src", [](InputGraph* g) { g->edges.push_back({-1, 1, 0, 0, {}}); });
  ExpectRejected("negative edge type", [](InputGraph* g) {
    g->edges.push_back({1, 1, -1, 0, {}});
  });
  ExpectRejected("duplicate node property name", [](InputGraph* g) {
    g->node_property_names.push_back(g->node_property_names[0]);
  });
  ExpectRejected("duplicate edge property name", [](InputGraph* g) {
    g->edge_property_names.push_back(g->edge_property_names[0]);
  });
  ExpectRejected("node value that is not UTF-8", [](InputGraph* g) {
    g->nodes.push_back({12345, {{0, "ok\xFF"}}});
  });
  ExpectRejected("edge value that is not UTF-8", [](InputGraph* g) {
    g->edges.push_back({1, 2, 0, 0, {{0, std::string("\xF5", 1)}}});
  });
}

TEST(GraphTest, InvalidOptionsFailAndLeaveNoStore) {
  TempDir tmp;
  const TestGraph t = MakeGraph(42, GraphSpec{});
  CompressOptions bad_rate = Options(2, {1, {}, {3, 32, 64, false}}, kEdgeLayouts[5]);
  CompressOptions bad_block = Options(2, kNodeLayouts[5], {3, {}, {32, 32, 1, false}});
  CompressOptions too_many_shards = Options(5000, kNodeLayouts[5], kEdgeLayouts[5]);
  for (const CompressOptions* o : {&bad_rate, &bad_block, &too_many_shards}) {
    const Status s = CompressGraph(t.input, tmp.Sub("store"), *o, {}, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  }
  EXPECT_TRUE(tmp.List().empty());
}

// The contract's node ids are >= 0 (and every read refuses a negative id), so a node with a
// negative id could never be read back: compress must refuse it, as it refuses a negative src.
TEST(GraphTest, NegativeNodeIdIsRejected) {
  ExpectRejected("negative node id", [](InputGraph* g) { g->nodes.push_back({-1, {}}); });
}

// A property index beyond the name list is malformed input, not a reason to read out of bounds.
TEST(GraphTest, PropertyIndexOutOfRangeIsRejected) {
  ExpectRejected("node property index out of range", [](InputGraph* g) {
    g->nodes.push_back({12345, {{static_cast<uint32_t>(g->node_property_names.size()), "v"}}});
  });
  ExpectRejected("edge property index out of range", [](InputGraph* g) {
    g->edges.push_back({1, 2, 0, 0, {{static_cast<uint32_t>(g->edge_property_names.size()), "v"}}});
  });
}

// ------------------------------------------------------------------------------------------------
// The store directory's life cycle.

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GraphTest, ExistingStoreIsKeptUnlessOverwriteAndOtherDirectoriesAreNeverTouched) {
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  InputGraph old_graph;
  old_graph.node_property_names = {"v"};
  old_graph.nodes = {{1, {{0, "old"}}}};
  InputGraph new_graph;
  new_graph.node_property_names = {"v"};
  new_graph.nodes = {{1, {{0, "new"}}}};
  const CompressOptions keep = Options(2, kNodeLayouts[5], kEdgeLayouts[5]);
  CompressOptions replace = keep;
  replace.overwrite = true;
  auto value_of_1 = [&]() -> std::string {
    auto g = OpenOrDie(dir);
    if (!g) return "<no store>";
    auto node = g->ObjGet(1);
    if (!node.ok() || !node->has_value() || (*node)->properties.empty()) return "<no node>";
    return (*node)->properties[0].second;
  };

  ASSERT_TRUE(CompressGraph(old_graph, dir, keep, {}, nullptr).ok());
  const std::string manifest = ReadAll(dir + "/MANIFEST");
  Status s = CompressGraph(new_graph, dir, keep, {}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(value_of_1(), "old");
  EXPECT_EQ(ReadAll(dir + "/MANIFEST"), manifest);
  EXPECT_EQ(tmp.List(), std::set<std::string>{"store"});

  s = CompressGraph(new_graph, dir, replace, {}, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value_of_1(), "new");
  EXPECT_EQ(tmp.List(), std::set<std::string>{"store"}) << "old store or temporary left behind";

  // A directory holding anything but a store is never touched, even with overwrite.
  const std::string other = tmp.Sub("other");
  fs::create_directories(other + "/sub");
  std::ofstream(other + "/precious.txt") << "keep me";
  for (const CompressOptions& o : {keep, replace}) {
    s = CompressGraph(new_graph, other, o, {}, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
    EXPECT_EQ(ReadAll(other + "/precious.txt"), "keep me");
    EXPECT_TRUE(fs::is_directory(other + "/sub"));
    EXPECT_FALSE(fs::exists(other + "/MANIFEST"));
  }
  // Nor is a regular file.
  const std::string file = tmp.Sub("file");
  std::ofstream(file) << "data";
  for (const CompressOptions& o : {keep, replace}) {
    s = CompressGraph(new_graph, file, o, {}, nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(ReadAll(file), "data");
  }
  // An empty directory may receive a store.
  const std::string empty = tmp.Sub("empty");
  fs::create_directories(empty);
  s = CompressGraph(new_graph, empty, keep, {}, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Graph::Open(empty).ok());
  EXPECT_EQ(tmp.List(), (std::set<std::string>{"empty", "file", "other", "store"}));
}

// "DIR/" names the same directory as "DIR": creating and replacing a store through it works.
TEST(GraphTest, OutputPathWithTrailingSlash) {
  TempDir tmp;
  InputGraph g;
  g.node_property_names = {"v"};
  g.nodes = {{1, {{0, "x"}}}};
  CompressOptions o = Options(2, kNodeLayouts[5], kEdgeLayouts[5]);
  Status s = CompressGraph(g, tmp.Sub("store/"), o, {}, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Graph::Open(tmp.Sub("store")).ok());
  o.overwrite = true;
  s = CompressGraph(g, tmp.Sub("store/"), o, {}, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Graph::Open(tmp.Sub("store")).ok());
  EXPECT_EQ(tmp.List(), std::set<std::string>{"store"});
}

// A store written before NodeFile format 2 and EdgeFile format 4 has a manifest whose node_file and
// edge_file hold only the suffix sampling: it opens as formats 1 and 3 and answers like the model;
// a store of the new formats whose manifest lost them no longer matches its file list and is
// refused.
TEST(GraphTest, AManifestFromBeforeLayoutTwoMeansTheOldFormats) {
  const TestGraph t = MakeGraph(91, GraphSpec{});
  for (int layout : {2, 5}) {
    Model model(t.input);
    TempDir tmp;
    const std::string dir = tmp.Sub("store");
    Compress(t, dir, Options(2, kNodeLayouts[layout], kEdgeLayouts[layout]), model);
    if (HasFatalFailure()) return;
    std::string manifest = ReadAll(dir + "/MANIFEST");
    for (const char* key : {"format", "block_bytes", "level", "dictionary_bytes"}) {
      // The edge_file object's keys: a number after them, where the top level's "format" holds a
      // string.
      const std::string field = std::string("\"") + key + "\": ";
      size_t at = 0;
      while ((at = manifest.find(field, at)) != std::string::npos) {
        const size_t end = manifest.find('\n', at);
        if (manifest[at + field.size()] == '"') {
          at = end;
          continue;
        }
        const size_t line = manifest.rfind('\n', at);
        manifest.erase(line, end - line);
        at = line;
      }
    }
    // JSON allows no comma before a closing brace: the erased key may have been the last.
    for (size_t at; (at = manifest.find(",\n  }")) != std::string::npos;) manifest.erase(at, 1);
    ASSERT_EQ(manifest.find("block_bytes"), std::string::npos);
    std::ofstream(dir + "/MANIFEST", std::ios::trunc) << manifest;
    auto g = Graph::Open(dir);
    if (layout == 5) {
      ASSERT_FALSE(g.ok());
      EXPECT_EQ(g.status().code(), StatusCode::kCorruption) << g.status().ToString();
      continue;
    }
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ((*g)->manifest().edge_file.format, 3u);
    EXPECT_EQ((*g)->manifest().node_file.format, 1u);
    CheckEveryOperation(g->get(), &model, t, GraphSpec{}.node_names, 91, "old manifest");
  }
}

// ------------------------------------------------------------------------------------------------
// Corruption.

class GraphCorruptionTest : public testing::Test {
 protected:
  void SetUp() override {
    GraphSpec spec;
    spec.nodes = 50;
    spec.ghosts = 10;
    spec.edges = 150;
    spec.big_record = 40;
    graph_ = MakeGraph(51, spec);
    model_ = std::make_unique<Model>(graph_.input);
    store_ = tmp_.Sub("store");
    Compress(graph_, store_, Options(3, kNodeLayouts[6], kEdgeLayouts[5]), *model_);
  }
  // A fresh copy of the store to damage.
  std::string Copy(const std::string& name) {
    const std::string dir = tmp_.Sub(name);
    fs::remove_all(dir);
    fs::copy(store_, dir, fs::copy_options::recursive);
    return dir;
  }
  static void FlipByte(const std::string& path, uint64_t offset, uint8_t mask) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ mask));
  }
  std::vector<std::string> StoreFiles() const {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(store_)) {
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), store_).string());
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  TempDir tmp_;
  TestGraph graph_;
  std::unique_ptr<Model> model_;
  std::string store_;
};

TEST_F(GraphCorruptionTest, FlippedOrTruncatedFilesFailToOpen) {
  const auto files = StoreFiles();
  ASSERT_EQ(files.size(), 16u);  // MANIFEST + 5 per shard (nodes.sfx: the search index)
  for (const std::string& file : files) {
    const uint64_t size = fs::file_size(store_ + "/" + file);
    for (uint64_t offset : {uint64_t{0}, uint64_t{9}, size / 3, size / 2, size - 9, size - 1}) {
      const std::string dir = Copy("bad");
      FlipByte(dir + "/" + file, offset, 0x10);
      auto g = Graph::Open(dir);
      EXPECT_FALSE(g.ok()) << file << " @" << offset;
      if (!g.ok()) {
        EXPECT_EQ(g.status().code(), StatusCode::kCorruption)
            << file << " @" << offset << ": " << g.status().ToString();
      }
    }
    const std::string dir = Copy("bad");
    // (The manifest's last byte is a newline that JSON does not need: cut it in half instead.)
    fs::resize_file(dir + "/" + file, file == "MANIFEST" ? size / 2 : size - 1);
    auto g = Graph::Open(dir);
    EXPECT_EQ(g.status().code(), StatusCode::kCorruption) << file << " truncated";
    if (file == "MANIFEST") continue;
    fs::remove(dir + "/" + file);
    g = Graph::Open(dir);
    EXPECT_EQ(g.status().code(), StatusCode::kCorruption) << file << " missing";
  }
  const std::string dir = Copy("bad");
  fs::remove(dir + "/MANIFEST");
  EXPECT_EQ(Graph::Open(dir).status().code(), StatusCode::kNotFound);
}

// The manifest's shard count decides the routing of every id: one that disagrees with the shard
// directories and files the manifest lists must be refused, not routed with.
TEST_F(GraphCorruptionTest, ManifestShardCountDisagreeingWithItsFilesIsCorruption) {
  const std::string original = ReadAll(store_ + "/MANIFEST");
  const std::string key = "\"shards\": 3";
  ASSERT_NE(original.find(key), std::string::npos);
  for (const char* shards : {"1", "2", "4"}) {
    std::string edited = original;
    edited.replace(edited.find(key), key.size(), std::string("\"shards\": ") + shards);
    const std::string dir = Copy("shards");
    std::ofstream(dir + "/MANIFEST", std::ios::binary | std::ios::trunc) << edited;
    auto g = Graph::Open(dir);
    EXPECT_EQ(g.status().code(), StatusCode::kCorruption)
        << "shards " << shards << ": " << (g.ok() ? "opened" : g.status().ToString());
  }
}

// Every single-bit change of the manifest (which has no checksum of its own) is either detected
// (CORRUPTION) or harmless (the store still answers exactly as before).
TEST_F(GraphCorruptionTest, EveryManifestBitFlipIsDetectedOrHarmless) {
  const uint64_t size = fs::file_size(store_ + "/MANIFEST");
  const std::string original = ReadAll(store_ + "/MANIFEST");
  uint64_t harmless = 0, detected = 0;
  int reported = 0;
  const std::string dir = Copy("manifest");
  for (uint64_t offset = 0; offset < size; ++offset) {
    std::ofstream(dir + "/MANIFEST", std::ios::binary | std::ios::trunc) << original;
    FlipByte(dir + "/MANIFEST", offset, 0x01);
    GraphOpenOptions fast;
    fast.verify_checksums = (offset % 16 == 0);  // sizes are always checked; checksums sometimes
    auto g = Graph::Open(dir, fast);
    const std::string where = "MANIFEST byte " + std::to_string(offset) + " ('" +
                              original.substr(offset, 1) + "' in ..." +
                              original.substr(offset >= 20 ? offset - 20 : 0, 40) + "...)";
    if (!g.ok()) {
      ++detected;
      if (g.status().code() != StatusCode::kCorruption && reported++ < 5) {
        ADD_FAILURE() << where << ": " << g.status().ToString();
      }
      continue;
    }
    ++harmless;
    // Spot-check that it still answers like the model.
    Checker check(g->get(), model_.get(), where, /*detailed=*/1);
    for (int64_t id : graph_.node_ids) {
      check("obj_get", [&](GraphApi& api) { return api.ObjGet(id); });
    }
    for (const auto& [key, edges] : model_->records()) {
      const int64_t src = key.first, type = key.second;
      check("assoc_range", [&](GraphApi& api) { return api.AssocRange(src, type, 0, 100); });
    }
    const Properties filter = {{"city", "red"}};
    check("get_node_ids", [&](GraphApi& api) { return api.GetNodeIds(filter); });
  }
  EXPECT_GT(detected, 0u);
  RecordProperty("harmless_manifest_flips", static_cast<int>(harmless));
}

// With checksum verification off, a damaged data file may give wrong answers or errors, but never
// a crash (compressed_file.h OpenOptions).
TEST_F(GraphCorruptionTest, UnverifiedDamagedFilesNeverCrash) {
  Rng rng(61);
  GraphOpenOptions fast;
  fast.verify_checksums = false;
  QueryBudget small;
  small.node_ids_queries = 10;
  small.neighbor_filters = 1;
  small.per_record = 1;
  for (const std::string& file : StoreFiles()) {
    if (file == "MANIFEST" || file.rfind("shard-0000", 0) != 0) continue;
    const uint64_t size = fs::file_size(store_ + "/" + file);
    for (int i = 0; i < 12; ++i) {
      const std::string dir = Copy("fuzz");
      FlipByte(dir + "/" + file, rng.Below(size), static_cast<uint8_t>(1 + rng.Below(255)));
      auto g = Graph::Open(dir, fast);
      if (!g.ok()) continue;
      // Answers are allowed to differ: run everything for the absence of crashes only.
      GraphApi* store = g->get();
      Rng q(i);
      for (int64_t id : graph_.node_ids) {
        (void)store->ObjGet(id);
        const std::vector<std::string> names = {"name", "city"};
        (void)store->GetNodeProperty(id, &names);
        (void)store->GetNeighborIds(id, std::nullopt, {{"name", "red"}});
      }
      (void)store->GetNodeIds({{"name", "red"}, {"city", "blue"}});
      for (SearchMatch m : {SearchMatch::kContains, SearchMatch::kPrefix, SearchMatch::kSuffix,
                            SearchMatch::kExact}) {
        (void)store->SearchNodeIds({"re", std::nullopt, m, 100});
        (void)store->SearchNodeIds({"e", std::string("city"), m, 100});
      }
      for (const auto& [key, edges] : model_->records()) {
        const int64_t count = static_cast<int64_t>(edges.size());
        (void)store->AssocRange(key.first, key.second, 0, kMax);
        (void)store->GetEdgeRange(key.first, key.second, -1, 5);
        (void)store->GetEdgeData(key.first, key.second, q.Range(0, count));
        (void)store->AssocGet(key.first, key.second, {edges[0].dst}, kMin, kMax);
        (void)store->AssocTimeRange(key.first, key.second, kMin, 0, 3);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Compressing under a memory budget (graph/memory_plan.h).

// The planned build peak of each shard of `t` partitioned into `shards`.
std::vector<uint64_t> ShardPeaks(const TestGraph& t, uint32_t shards, const CompressOptions& o) {
  TempDir tmp;
  graph::Partitioner p(tmp.path(), shards);
  EXPECT_TRUE(p.NodeHeader(t.input.node_property_names).ok());
  EXPECT_TRUE(p.EdgeHeader(t.input.edge_property_names).ok());
  graph::PropertyRefs refs;
  for (const auto& n : t.input.nodes) {
    refs.assign(n.properties.begin(), n.properties.end());
    EXPECT_TRUE(p.Node(n.id, refs).ok());
  }
  for (const auto& e : t.input.edges) {
    refs.assign(e.properties.begin(), e.properties.end());
    EXPECT_TRUE(p.Edge(e.src, e.dst, e.type, e.timestamp, refs).ok());
  }
  EXPECT_TRUE(p.Flush().ok());
  std::vector<uint64_t> peaks;
  for (const auto& f : p.footprints()) {
    peaks.push_back(graph::ShardBuildPeak(f, o.node_file, o.edge_file));
  }
  return peaks;
}

GraphSpec BudgetSpec() {
  GraphSpec spec;
  spec.nodes = 600;
  spec.edges = 6000;
  return spec;
}

TEST(CompressMemoryTest, ChosenShardCountFitsTheBudget) {
  const TestGraph t = MakeGraph(91, BudgetSpec());
  Model model(t.input);
  CompressOptions o = Options(0, kNodeLayouts[5], kEdgeLayouts[5]);
  o.auto_shards = 1;
  o.memory_limit = graph::kProcessBaseline + ShardPeaks(t, 1, o)[0] / 3;
  std::vector<std::string> notes;
  o.on_note = [&](std::string_view line) { notes.emplace_back(line); };
  TempDir tmp;
  CompressReport report;
  const Status s = CompressGraph(t.input, tmp.Sub("store"), o, {}, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(report.shards, 3u);
  EXPECT_EQ(report.memory_budget, o.memory_limit);
  EXPECT_LE(report.planned_peak, o.memory_limit);
  const std::string moved =
      "1 shards would not fit the budget: partitioning into " + std::to_string(report.shards);
  EXPECT_NE(std::find(notes.begin(), notes.end(), moved), notes.end()) << "no note: " << moved;
  EXPECT_EQ(tmp.List(), std::set<std::string>{"store"});
  auto g = OpenOrDie(tmp.Sub("store"));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->num_shards(), report.shards);
  CheckEveryOperation(g.get(), &model, t, BudgetSpec().node_names, 91, "repartitioned");
}

TEST(CompressMemoryTest, GivenShardCountThatCannotFitFailsBeforeBuilding) {
  const TestGraph t = MakeGraph(92, BudgetSpec());
  CompressOptions o = Options(1, kNodeLayouts[5], kEdgeLayouts[5]);
  o.memory_limit = graph::kProcessBaseline + ShardPeaks(t, 1, o)[0] / 3;
  TempDir tmp;
  std::set<std::string> phases;
  Status s = CompressGraph(
      t.input, tmp.Sub("store"), o,
      [&](std::string_view phase, uint64_t, uint64_t) { phases.emplace(phase); }, nullptr);
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(phases.count("build"), 0u) << "it started building";
  EXPECT_TRUE(tmp.List().empty()) << "a store or temporary directory was left behind";
  const std::string& m = s.message();
  const size_t at = m.find("--shards ");
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_NE(m.find("more than the " + FormatBytes(o.memory_limit) + " budget"), std::string::npos)
      << m;
  // The suggested count is honest: it fits.
  o.shards = static_cast<uint32_t>(std::stoul(m.substr(at + 9)));
  EXPECT_GE(o.shards, 3u);
  CompressReport report;
  s = CompressGraph(t.input, tmp.Sub("store"), o, {}, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(report.planned_peak, o.memory_limit);
}

TEST(CompressMemoryTest, ParallelBuildsShrinkToFitTheBudget) {
  const TestGraph t = MakeGraph(93, BudgetSpec());
  Model model(t.input);
  CompressOptions o = Options(4, kNodeLayouts[5], kEdgeLayouts[5]);
  o.threads = 4;
  const std::vector<uint64_t> peaks = ShardPeaks(t, 4, o);
  const uint64_t largest = *std::max_element(peaks.begin(), peaks.end());
  for (const auto& [limit, parallel] : {std::pair(graph::kProcessBaseline + largest * 3 / 2, 1u),
                                        std::pair(uint64_t{1} << 40, 4u)}) {
    o.memory_limit = limit;
    TempDir tmp;
    CompressReport report;
    const Status s = CompressGraph(t.input, tmp.Sub("store"), o, {}, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(report.parallel_builds, parallel) << "budget " << limit;
    EXPECT_LE(report.planned_peak, limit);
    auto g = OpenOrDie(tmp.Sub("store"));
    ASSERT_NE(g, nullptr);
    QueryBudget small;
    small.node_ids_queries = 20;
    small.per_record = 1;
    CheckEveryOperation(g.get(), &model, t, BudgetSpec().node_names, 93, "parallel", small);
  }
}

TEST(CompressMemoryTest, LeftoversOfKilledRunsAreRemovedAndLiveOnesKept) {
  TempDir tmp;
  auto make = [&](const std::string& name, bool lock_file) {
    fs::create_directories(tmp.Sub(name + "/shard-0000"));
    std::ofstream(tmp.Sub(name + "/shard-0000/nodes.zcf")) << "partial";
    if (lock_file) std::ofstream(tmp.Sub(name + "/LOCK")) << "";
  };
  make("store.tmp-4242", true);        // killed: its lock is free
  make("store.tmp-999999999", false);  // older layout without a lock: no such process
  make("store.old-999999998", false);  // a replaced store that was never deleted
  make("store.tmp-1", true);           // running: its lock is held (below); pid 1 lives
  make("store.tmp-abc", false);        // not a pid: not ours
  make("other.tmp-999999999", false);  // another store's
  const int held = ::open(tmp.Sub("store.tmp-1/LOCK").c_str(), O_RDWR);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  InputGraph g;
  g.node_property_names = {"v"};
  g.nodes = {{1, {{0, "x"}}}};
  CompressOptions o = Options(2, kNodeLayouts[5], kEdgeLayouts[5]);
  std::vector<std::string> notes;
  o.on_note = [&](std::string_view line) { notes.emplace_back(line); };
  const Status s = CompressGraph(g, tmp.Sub("store"), o, {}, nullptr);
  ::close(held);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(tmp.List(), (std::set<std::string>{"other.tmp-999999999", "store", "store.tmp-1",
                                               "store.tmp-abc"}));
  size_t removed = 0;
  for (const std::string& name : {"store.tmp-4242", "store.tmp-999999999", "store.old-999999998"}) {
    for (const auto& line : notes) {
      if (line.find("removed " + tmp.Sub(name) + ", left behind") != std::string::npos) ++removed;
    }
  }
  EXPECT_EQ(removed, 3u) << "notes: " << notes.size();
}

}  // namespace
}  // namespace zipg
