#include "logstore/memtable.h"

#include <algorithm>
#include <set>

#include "util/snapshot.h"

namespace zipg::logstore {

using engine::UpdateOp;

namespace {

// What the memtable's allocations really take (docs/writes.md, "Memory"): glibc's malloc rounds
// a request up to 16-byte granules after an 8-byte header, at least 32 bytes; a hash container
// has about one bucket pointer per element besides its nodes.
constexpr uint64_t Chunk(uint64_t n) { return std::max<uint64_t>(32, (n + 8 + 15) / 16 * 16); }
constexpr uint64_t kTreeNodeHeader = 32;  // color, parent, left, right (libstdc++)
constexpr uint64_t kBucket = sizeof(void*);

uint64_t StringHeap(const std::string& s) { return s.size() < 16 ? 0 : Chunk(s.capacity() + 1); }

}  // namespace

// The node's entry in nodes_ (hash node: next pointer, key, Entry) and its bucket.
const uint64_t Memtable::kNodeOverhead =
    Chunk(sizeof(void*) + sizeof(std::pair<const int64_t, Memtable::Entry>)) + kBucket;
// One (node, type)'s EdgeSet in Entry::edges (a tree node) and its hash table's first buckets.
const uint64_t Memtable::kTypeOverhead =
    Chunk(kTreeNodeHeader + sizeof(std::pair<const int64_t, Memtable::EdgeSet>)) +
    Chunk(13 * kBucket);
// One edge: its tree node in `ordered` and its hash node (and bucket) in `timestamp_of`.
const uint64_t Memtable::kEdgeOverhead =
    Chunk(kTreeNodeHeader + sizeof(Edge)) +
    Chunk(sizeof(void*) + sizeof(std::pair<const int64_t, int64_t>)) + kBucket;

std::set<Edge, Memtable::ByNewestFirst>::const_iterator Memtable::EdgeSet::Find(int64_t src,
                                                                                int64_t type,
                                                                                int64_t dst) const {
  auto t = timestamp_of.find(dst);
  if (t == timestamp_of.end()) return ordered.end();
  return ordered.find(Edge{src, type, dst, t->second, {}});
}

uint64_t Memtable::Size(const Properties& p) {
  uint64_t n = p.empty() ? 0 : Chunk(p.capacity() * sizeof(p[0]));
  for (const auto& [name, value] : p) n += StringHeap(name) + StringHeap(value);
  return n;
}

bool Memtable::FoundLive(const engine::Update& u, const engine::NodeUpdates* dead) const {
  auto it = nodes_.find(u.node);
  if (it == nodes_.end()) return false;
  const Entry& entry = it->second;
  switch (u.op) {
    case UpdateOp::kPutNode:
    case UpdateOp::kDeleteNode:
      if (entry.props && !(dead && dead->props_dead)) return true;
      if (u.op == UpdateOp::kPutNode) return false;
      for (const auto& [type, list] : entry.edges) {
        for (const auto& e : list.ordered) {
          if (!(dead && dead->EdgeDead(type, e.dst))) return true;
        }
      }
      return false;
    case UpdateOp::kPutEdge:
    case UpdateOp::kDeleteEdge: {
      if (dead && dead->EdgeDead(u.type, u.dst)) return false;
      auto list = entry.edges.find(u.type);
      return list != entry.edges.end() && list->second.timestamp_of.count(u.dst) > 0;
    }
  }
  return false;
}

bool Memtable::Remove(const engine::Update& u) {
  auto it = nodes_.find(u.node);
  if (it == nodes_.end()) return false;
  Entry& entry = it->second;
  bool found = false;
  if (u.op == UpdateOp::kPutNode || u.op == UpdateOp::kDeleteNode) {
    if (entry.props) {
      if (u.id != 0) history_->RecordProps(u.node, u.id, *entry.props);
      bytes_ -= Size(*entry.props);
      entry.props.reset();
      --props_;
      found = true;
    }
    if (u.op == UpdateOp::kDeleteNode) {
      for (const auto& [type, list] : entry.edges) {
        bytes_ -= kTypeOverhead;
        for (const auto& e : list.ordered) {
          if (u.id != 0) history_->RecordEdge(u.node, u.id, type, e.dst, e);
          bytes_ -= Size(e.properties) + kEdgeOverhead;
        }
        edges_ -= list.ordered.size();
        found = found || !list.ordered.empty();
      }
      entry.edges.clear();
    }
  } else {
    auto list = entry.edges.find(u.type);
    if (list != entry.edges.end()) {
      EdgeSet& set = list->second;
      auto e = set.Find(u.node, u.type, u.dst);
      if (e != set.ordered.end()) {
        if (u.id != 0) history_->RecordEdge(u.node, u.id, u.type, u.dst, *e);
        bytes_ -= Size(e->properties) + kEdgeOverhead;
        set.ordered.erase(e);
        set.timestamp_of.erase(u.dst);
        --edges_;
        found = true;
        if (set.ordered.empty()) {
          entry.edges.erase(list);
          bytes_ -= kTypeOverhead;
        }
      }
    }
  }
  if (!entry.props && entry.edges.empty()) {
    nodes_.erase(it);
    bytes_ -= kNodeOverhead;
  }
  return found;
}

void Memtable::Put(const LogRecord& r, uint64_t id) {
  auto [it, fresh] = nodes_.try_emplace(r.node);
  if (fresh) bytes_ += kNodeOverhead;
  Entry& entry = it->second;
  if (r.op == UpdateOp::kPutNode) {
    if (id != 0) history_->RecordProps(r.node, id, entry.props);
    if (!entry.props) ++props_;
    entry.props = r.properties;
    bytes_ += Size(*entry.props);
    return;
  }
  auto [list, new_type] = entry.edges.try_emplace(r.type);
  if (new_type) bytes_ += kTypeOverhead;
  EdgeSet& set = list->second;
  if (id != 0) {
    auto old = set.Find(r.node, r.type, r.dst);
    history_->RecordEdge(r.node, id, r.type, r.dst,
                         old == set.ordered.end() ? std::nullopt : std::optional<Edge>(*old));
  }
  set.timestamp_of[r.dst] = r.timestamp;
  auto stored = set.ordered.insert(Edge{r.node, r.type, r.dst, r.timestamp, r.properties}).first;
  bytes_ += Size(stored->properties) + kEdgeOverhead;
  ++edges_;
}

void Memtable::CollectAt(int64_t id, uint64_t at, bool any_type, int64_t type,
                         NodeData* out) const {
  const NodeAt fix = history_->At(id, at);
  auto it = nodes_.find(id);
  if (it != nodes_.end()) {
    out->properties = it->second.props;
    for (const auto& [t, list] : it->second.edges) {
      if (any_type || t == type)
        out->edges.insert(out->edges.end(), list.ordered.begin(), list.ordered.end());
    }
  }
  if (fix.props_changed) out->properties = fix.props;
  if (any_type || type >= 0) fix.FixEdges(&out->edges, any_type, type);
}

void Memtable::Collect(int64_t id, bool any_type, int64_t type, const engine::NodeUpdates* dead,
                       NodeData* out) const {
  if (const uint64_t at = ReadAt::Current(); at != 0 && history_->ChangedAfter(id, at)) {
    NodeData raw;
    CollectAt(id, at, any_type, type, &raw);
    if (raw.properties && !(dead && dead->props_dead)) out->properties = std::move(raw.properties);
    if ((!any_type && type < 0) || (dead && dead->edges_dead)) return;
    for (auto& e : raw.edges) {
      if (!(dead && dead->EdgeDead(e.type, e.dst))) out->edges.push_back(std::move(e));
    }
    return;
  }
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  const Entry& entry = it->second;
  if (entry.props && !(dead && dead->props_dead)) out->properties = entry.props;
  if ((!any_type && type < 0) || (dead && dead->edges_dead)) return;
  for (const auto& [t, list] : entry.edges) {
    if (!any_type && t != type) continue;
    for (const auto& e : list.ordered) {
      if (!(dead && dead->EdgeDead(t, e.dst))) out->edges.push_back(e);
    }
  }
}

void Memtable::CollectKeys(int64_t id, int64_t type, const std::vector<int64_t>& dsts,
                           const engine::NodeUpdates* dead, std::vector<Edge>* out) const {
  std::optional<NodeAt> fix;
  if (const uint64_t at = ReadAt::Current(); at != 0 && history_->ChangedAfter(id, at)) {
    fix = history_->At(id, at);
  }
  auto it = nodes_.find(id);
  const EdgeSet* set = nullptr;
  if (it != nodes_.end()) {
    auto list = it->second.edges.find(type);
    if (list != it->second.edges.end()) set = &list->second;
  }
  if (!set && !fix) return;
  for (int64_t dst : dsts) {
    if (fix) {
      auto k = fix->edges.find({type, dst});
      if (k != fix->edges.end()) {
        if (k->second && !(dead && dead->EdgeDead(type, dst))) out->push_back(*k->second);
        continue;
      }
    }
    if (!set) continue;
    auto e = set->Find(id, type, dst);
    if (e != set->ordered.end() && !(dead && dead->EdgeDead(type, dst))) {
      out->push_back(*e);
    }
  }
}

void Memtable::NodeIdsWhere(const std::function<bool(const Properties&)>& match,
                            const PropsDead& dead, std::vector<int64_t>* out) const {
  // At a snapshot, the nodes whose properties changed after it are decided by their old ones.
  const uint64_t at = ReadAt::Current();
  const std::vector<int64_t> changed =
      at == 0 ? std::vector<int64_t>() : history_->PropsChangedAfter(at);
  for (const auto& [id, entry] : nodes_) {
    if (!entry.props || !match(*entry.props)) continue;
    if (!changed.empty() && std::binary_search(changed.begin(), changed.end(), id)) continue;
    if (dead && dead(id)) continue;
    out->push_back(id);
  }
  for (int64_t id : changed) {
    const NodeAt fix = history_->At(id, at);
    if (fix.props && match(*fix.props) && !(dead && dead(id))) out->push_back(id);
  }
}

void Memtable::NodeIds(const Properties& filter, const PropsDead& dead,
                       std::vector<int64_t>* out) const {
  NodeIdsWhere([&](const Properties& props) { return MatchesAll(props, filter); }, dead, out);
}

void Memtable::SearchNodeIds(const NodeSearch& q, const PropsDead& dead,
                             std::vector<int64_t>* out) const {
  NodeIdsWhere([&](const Properties& props) { return PropertiesMatch(props, q); }, dead, out);
}

Status Memtable::Feed(graph::InputSink* sink) const {
  std::set<std::string> node_names, edge_names;
  for (const auto& [id, entry] : nodes_) {
    if (entry.props) {
      for (const auto& p : *entry.props) node_names.insert(p.first);
    }
    for (const auto& [type, list] : entry.edges) {
      for (const auto& e : list.ordered) {
        for (const auto& p : e.properties) edge_names.insert(p.first);
      }
    }
  }
  const std::vector<std::string> node_list(node_names.begin(), node_names.end());
  const std::vector<std::string> edge_list(edge_names.begin(), edge_names.end());
  ZIPG_RETURN_IF_ERROR(sink->NodeHeader(node_list));
  ZIPG_RETURN_IF_ERROR(sink->EdgeHeader(edge_list));
  graph::PropertyRefs refs;
  for (const auto& [id, entry] : nodes_) {
    if (entry.props) {
      ZIPG_RETURN_IF_ERROR(sink->Node(id, graph::RefsByName(node_list, *entry.props, &refs)));
    }
    for (const auto& [type, list] : entry.edges) {
      for (const auto& e : list.ordered) {
        ZIPG_RETURN_IF_ERROR(sink->Edge(e.src, e.dst, e.type, e.timestamp,
                                        graph::RefsByName(edge_list, e.properties, &refs)));
      }
    }
  }
  return Status::OK();
}

}  // namespace zipg::logstore
