// DeltaIndex (shard/delta.h).

#include "engine/delta.h"

#include <algorithm>
#include <limits>

#include "layout/shard.h"
#include "util/coding.h"
#include "util/wal.h"

namespace zipg::engine {

namespace {

// A batch record: u8 version | u32 n | n x (u8 op | i64 node | i64 type | i64 dst |
// i64 generation | i64 timestamp | u8 found | u64 time_order + 1, 0 for none | u64 id).
// Version 2 had no id (replayed with id 0).
constexpr uint8_t kRecordVersion = 3;
constexpr size_t kEntryBytesV2 = 1 + 5 * 8 + 1 + 8;
constexpr size_t kEntryBytes = kEntryBytesV2 + 8;

}  // namespace

StatusOr<std::unique_ptr<DeltaIndex>> DeltaIndex::Open(const std::string& path, bool sync,
                                                       uint64_t floor, bool hold_uncommitted) {
  std::unique_ptr<DeltaIndex> index(new DeltaIndex());
  index->last_id_ = floor;
  index->hold_ = hold_uncommitted;
  WalOptions options;
  options.sync = sync;
  ZIPG_ASSIGN_OR_RETURN(
      index->file_,
      Wal::Open(
          path, [&](std::string_view record) { return index->Replay(record); }, options));
  index->floor_ = index->last_id_.load();
  index->written_id_ = index->last_id_.load();
  return index;
}

Status DeltaIndex::Sync() { return file_->Sync(); }

uint64_t DeltaIndex::unsynced() const { return file_->unsynced_records(); }

DeltaIndex::~DeltaIndex() = default;

uint64_t DeltaIndex::Footprint(const NodeDelta& node) {
  // The hash entry and the NodeDelta, then per type its tree node and its three maps' entries.
  uint64_t bytes = 64 + sizeof(NodeDelta);
  for (const auto& [type, t] : node.types) {
    bytes += 48 + sizeof(TypeDelta) + t.dead.size() * decltype(t.dead)::EntryBytes() +
             t.log.size() * decltype(t.log)::EntryBytes() +
             t.log_dst.size() * decltype(t.log_dst)::EntryBytes();
  }
  return bytes;
}

void DeltaIndex::Transition(const Resolved& r, NodeDelta* node, Undo* undo) {
  const Update& u = r.update;
  switch (u.op) {
    case UpdateOp::kPutNode:
      if (undo) {
        undo->props_dead = node->props_dead;
        undo->props_generation = node->props_generation;
      }
      if (r.found) node->props_dead = true;
      node->props_generation = u.generation;
      return;
    case UpdateOp::kDeleteNode:
      // The node's properties and every edge are gone, wherever they were.
      node->props_dead = node->edges_dead = true;
      node->props_generation = 0;
      node->types.clear();
      return;
    case UpdateOp::kPutEdge:
    case UpdateOp::kDeleteEdge: {
      TypeDelta& t = node->types[u.type];
      if (undo) undo->type = u.type;
      if (const int64_t* ts = t.log_dst.Find(u.dst)) {
        const EdgeKey old{*ts, u.dst};
        if (undo) undo->erased_log = std::make_pair(old, *t.log.Find(old));
        t.log = t.log.Erase(old);
        t.log_dst = t.log_dst.Erase(u.dst);
      } else if (r.time_order) {
        if (undo && t.dead.Find(*r.time_order) == nullptr) undo->inserted_dead = *r.time_order;
        t.dead = t.dead.Insert(*r.time_order, Unit{});
      }
      if (u.op == UpdateOp::kPutEdge) {
        if (undo) undo->inserted_log = EdgeKey{u.timestamp, u.dst};
        t.log = t.log.Insert(EdgeKey{u.timestamp, u.dst}, u.generation);
        t.log_dst = t.log_dst.Insert(u.dst, u.timestamp);
      } else if (t.dead.empty() && t.log.empty()) {
        node->types.erase(u.type);
      }
      return;
    }
    case UpdateOp::kLayout:
      return;
  }
}

void DeltaIndex::ApplyUndo(const Undo& undo, std::optional<NodeDelta>* node) {
  if (undo.absent) {
    node->reset();
    return;
  }
  if (undo.whole) {
    *node = *undo.whole;
    return;
  }
  if (!*node) node->emplace();
  NodeDelta& n = **node;
  if (undo.type < 0) {
    n.props_dead = undo.props_dead;
    n.props_generation = undo.props_generation;
    return;
  }
  TypeDelta& t = n.types[undo.type];
  if (undo.inserted_log) {
    t.log = t.log.Erase(*undo.inserted_log);
    t.log_dst = t.log_dst.Erase(undo.inserted_log->dst);
  }
  if (undo.erased_log) {
    const auto& [key, generation] = *undo.erased_log;
    t.log = t.log.Insert(key, generation);
    t.log_dst = t.log_dst.Insert(key.dst, key.timestamp);
  }
  if (undo.inserted_dead) t.dead = t.dead.Erase(*undo.inserted_dead);
  if (t.dead.empty() && t.log.empty()) n.types.erase(undo.type);  // types hold no empty entry
}

StatusOr<DeltaIndex::Resolved> DeltaIndex::Resolve(const layout::Shard& base, const NodeDelta& node,
                                                   const Update& u) {
  Resolved r{u, false, std::nullopt};
  switch (u.op) {
    case UpdateOp::kPutNode:
    case UpdateOp::kDeleteNode:
      r.found = !node.props_dead && base.nodes().Contains(u.node);
      if (u.op == UpdateOp::kDeleteNode && !r.found && !node.edges_dead) {
        ZIPG_ASSIGN_OR_RETURN(auto records, base.edges().FindAll(u.node));
        for (const auto& record : records) {
          const TypeDelta* t = node.Type(record.type);
          if (record.count > (t ? t->dead.size() : 0)) r.found = true;
        }
      }
      return r;
    case UpdateOp::kPutEdge:
    case UpdateOp::kDeleteEdge: {
      const TypeDelta* t = node.Type(u.type);
      // A version in the LogStore means the base's is already dead.
      if (node.edges_dead || (t && t->log_dst.Find(u.dst))) return r;
      // Most edge writes are of new keys: the key filter answers those without a search.
      if (!base.edges().MayContain(u.node, u.type, u.dst)) return r;
      ZIPG_ASSIGN_OR_RETURN(auto record, base.edges().Find(u.node, u.type));
      if (!record) return r;
      ZIPG_ASSIGN_OR_RETURN(auto at, base.edges().FindDst(*record, u.dst));
      if (at && !(t && t->dead.Find(*at))) {
        r.found = true;
        r.time_order = at;
      }
      return r;
    }
    case UpdateOp::kLayout:
      return r;
  }
  return r;
}

StatusOr<std::vector<bool>> DeltaIndex::Apply(const layout::Shard& base,
                                              const std::vector<Update>& batch) {
  // Each update is decided against the state its predecessors in the batch leave, on new
  // versions of the nodes it touches; they are installed only after the batch is logged, so a
  // failed write leaves memory unchanged and readers never see half a batch.
  std::lock_guard apply_lock(apply_mu_);
  std::unordered_map<int64_t, NodeDelta> next;
  // Each numbered update's node and undo record, in id order (for snapshots).
  std::vector<std::pair<int64_t, Undo>> undos;
  std::vector<bool> found;
  found.reserve(batch.size());
  std::string record;
  record.push_back(static_cast<char>(kRecordVersion));
  const size_t count_at = record.size();
  PutFixed32(&record, 0);
  uint32_t applied = 0;
  Held held;
  uint64_t last = last_id_.load();
  for (const Update& u : batch) {
    if (u.id != 0 && u.id <= last) {  // applied already (a resend, or the feed and a push)
      found.push_back(false);
      continue;
    }
    if (u.id != 0) last = u.id;
    ++applied;
    if (u.id == 0) {
      ++held.unnumbered;
    } else if (u.op != UpdateOp::kLayout) {
      ++held.undoable;
    }
    if (u.op == UpdateOp::kLayout) {  // a split's mark: only its id (and the count) is kept
      found.push_back(false);
      record.push_back(static_cast<char>(u.op));
      PutFixed64(&record, static_cast<uint64_t>(u.node));
      for (int i = 0; i < 4; ++i) PutFixed64(&record, 0);
      record.push_back(0);
      PutFixed64(&record, 0);
      PutFixed64(&record, u.id);
      continue;
    }
    auto [it, fresh] = next.try_emplace(u.node);
    std::shared_ptr<const NodeDelta> old;
    if (fresh) {
      std::shared_lock lock(mu_);
      auto o = nodes_.find(u.node);
      if (o != nodes_.end()) old = o->second;
    }
    if (fresh && old) it->second = *old;
    ZIPG_ASSIGN_OR_RETURN(Resolved r, Resolve(base, it->second, u));
    Undo* undo = nullptr;
    if (u.id != 0) {
      undos.emplace_back(u.node, Undo());
      undo = &undos.back().second;
      undo->id = u.id;
      undo->absent = fresh && !old;
      if (u.op == UpdateOp::kDeleteNode && !undo->absent) {
        undo->whole = fresh ? old : std::make_shared<const NodeDelta>(it->second);
      }
    }
    Transition(r, &it->second, undo);
    found.push_back(r.found);
    record.push_back(static_cast<char>(u.op));
    PutFixed64(&record, static_cast<uint64_t>(u.node));
    PutFixed64(&record, static_cast<uint64_t>(u.type));
    PutFixed64(&record, static_cast<uint64_t>(u.dst));
    PutFixed64(&record, static_cast<uint64_t>(u.generation));
    PutFixed64(&record, static_cast<uint64_t>(u.timestamp));
    record.push_back(r.found ? 1 : 0);
    PutFixed64(&record, r.time_order ? *r.time_order + 1 : 0);
    PutFixed64(&record, u.id);
  }
  if (applied == 0) return found;
  EncodeFixed32(record.data() + count_at, applied);
  if (hold_ && (!held_.empty() || last > committed_.load())) {
    held.last = last;
    held.record = std::move(record);
    held_.push_back(std::move(held));
  } else {
    ZIPG_RETURN_IF_ERROR(file_->Append(record));
    written_id_ = last;
  }
  last_id_ = last;
  std::unique_lock lock(mu_);
  for (auto& [node, undo] : undos) history_.Record(node, std::move(undo));
  for (auto& [id, delta] : next) {
    auto& slot = nodes_[id];
    const uint64_t before = slot ? Footprint(*slot) : 0;
    bytes_ += Footprint(delta);
    bytes_ -= before;
    slot = std::make_shared<const NodeDelta>(std::move(delta));
  }
  return found;
}

Status DeltaIndex::Replay(std::string_view data) {
  const Status bad = Status::Corruption("malformed update delta record");
  if (data.size() < 5) return bad;
  const uint8_t version = static_cast<uint8_t>(data[0]);
  if (version != 2 && version != kRecordVersion) return bad;
  const size_t entry = version == 2 ? kEntryBytesV2 : kEntryBytes;
  const uint64_t n = DecodeFixed32(data.data() + 1);
  if (data.size() != 5 + n * entry) return bad;
  const char* p = data.data() + 5;
  for (uint64_t i = 0; i < n; ++i, p += entry) {
    Resolved r;
    const uint8_t op = static_cast<uint8_t>(p[0]);
    if (op < 1 || op > 5) return bad;
    r.update.op = static_cast<UpdateOp>(op);
    r.update.node = static_cast<int64_t>(DecodeFixed64(p + 1));
    r.update.type = static_cast<int64_t>(DecodeFixed64(p + 9));
    r.update.dst = static_cast<int64_t>(DecodeFixed64(p + 17));
    r.update.generation = static_cast<int64_t>(DecodeFixed64(p + 25));
    r.update.timestamp = static_cast<int64_t>(DecodeFixed64(p + 33));
    r.found = p[41] != 0;
    const uint64_t at = DecodeFixed64(p + 42);
    if (at != 0) r.time_order = at - 1;
    if (version != 2) {
      r.update.id = DecodeFixed64(p + 50);
      if (r.update.id > last_id_.load()) last_id_ = r.update.id;
    }
    if (r.update.op == UpdateOp::kLayout) continue;
    auto& slot = nodes_[r.update.node];
    NodeDelta delta = slot ? *slot : NodeDelta();
    Transition(r, &delta);
    bytes_ += Footprint(delta);
    bytes_ -= slot ? Footprint(*slot) : 0;
    slot = std::make_shared<const NodeDelta>(std::move(delta));
  }
  return Status::OK();
}

std::shared_ptr<const NodeDelta> DeltaIndex::Lookup(int64_t node) const {
  const uint64_t at = ReadAt::Current();
  std::shared_lock lock(mu_);
  auto it = nodes_.find(node);
  std::shared_ptr<const NodeDelta> current = it == nodes_.end() ? nullptr : it->second;
  if (at == 0 || !history_.ChangedAfter(node, at)) return current;
  // The current version with the node's updates above `at` undone, newest first.
  std::optional<NodeDelta> version;
  if (current) version = *current;
  const auto* changes = history_.Changes(node);
  for (auto u = changes->rbegin(); u != changes->rend() && u->id > at; ++u) {
    ApplyUndo(*u, &version);
  }
  return version ? std::make_shared<const NodeDelta>(std::move(*version)) : nullptr;
}

Status DeltaIndex::Commit(uint64_t id) {
  std::lock_guard apply_lock(apply_mu_);
  if (id > committed_.load()) committed_ = id;
  while (!held_.empty() && held_.front().last <= committed_.load()) {
    ZIPG_RETURN_IF_ERROR(file_->Append(held_.front().record));
    written_id_ = held_.front().last;
    held_.pop_front();
  }
  return Status::OK();
}

StatusOr<size_t> DeltaIndex::RollBackUncommitted() {
  std::lock_guard apply_lock(apply_mu_);
  if (held_.empty()) return size_t{0};
  size_t undoable = 0;
  for (const Held& h : held_) {
    if (h.unnumbered > 0) {
      return Status::Internal(
          "cannot roll back a batch of unnumbered updates (they have no undo "
          "records)");
    }
    undoable += h.undoable;
  }
  const uint64_t back_to = written_id_.load();
  std::unique_lock lock(mu_);
  if (history_.CountAbove(back_to) != undoable) {
    return Status::Internal("cannot roll back the " + std::to_string(undoable) +
                            " uncommitted updates above " + std::to_string(back_to) + ": " +
                            std::to_string(history_.CountAbove(back_to)) + " undo records");
  }
  // Each touched node's delta with its uncommitted updates undone, newest first.
  std::unordered_map<int64_t, std::optional<NodeDelta>> undone;
  history_.PopAbove(back_to, [&](int64_t node, const Undo& undo) {
    auto [it, fresh] = undone.try_emplace(node);
    if (fresh) {
      auto current = nodes_.find(node);
      if (current != nodes_.end()) it->second = *current->second;
    }
    ApplyUndo(undo, &it->second);
  });
  for (auto& [id, delta] : undone) {
    auto slot = nodes_.find(id);
    if (slot != nodes_.end()) {
      bytes_ -= Footprint(*slot->second);
      if (!delta) {
        nodes_.erase(slot);
        continue;
      }
    }
    if (!delta) continue;
    bytes_ += Footprint(*delta);
    nodes_[id] = std::make_shared<const NodeDelta>(std::move(*delta));
  }
  held_.clear();
  last_id_ = back_to;
  return undoable;
}

size_t DeltaIndex::held() const {
  std::lock_guard apply_lock(apply_mu_);
  size_t n = 0;
  for (const Held& h : held_) n += h.undoable + h.unnumbered;
  return n;
}

void DeltaIndex::Prune(uint64_t horizon) {
  // An uncommitted update's undo record is what rolls it back.
  if (hold_) horizon = std::min(horizon, written_id_.load());
  std::unique_lock lock(mu_);
  history_.Prune(horizon);
}

size_t DeltaIndex::versions() const {
  std::shared_lock lock(mu_);
  return history_.changes();
}

size_t DeltaIndex::size() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

std::vector<int64_t> DeltaIndex::Nodes() const {
  std::vector<int64_t> ids;
  {
    std::shared_lock lock(mu_);
    ids.reserve(nodes_.size());
    for (const auto& [id, node] : nodes_) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace zipg::engine
