#include "shard/updates.h"

#include <algorithm>
#include <mutex>

#include "logstore/wal.h"
#include "shard/shard.h"
#include "util/coding.h"

namespace zipg::shard {

namespace {
constexpr size_t kUpdateBytes = 1 + 4 * 8;
}  // namespace

std::string EncodeUpdates(const std::vector<Update>& updates, const std::vector<uint8_t>* flags) {
  std::string out;
  out.reserve(4 + updates.size() * (kUpdateBytes + 1));
  PutFixed32(&out, static_cast<uint32_t>(updates.size()));
  for (const Update& u : updates) {
    out.push_back(static_cast<char>(u.op));
    PutFixed64(&out, static_cast<uint64_t>(u.node));
    PutFixed64(&out, static_cast<uint64_t>(u.type));
    PutFixed64(&out, static_cast<uint64_t>(u.dst));
    PutFixed64(&out, static_cast<uint64_t>(u.generation));
  }
  if (flags) out.append(reinterpret_cast<const char*>(flags->data()), flags->size());
  return out;
}

Status DecodeUpdates(std::string_view data, std::vector<Update>* updates,
                     std::vector<uint8_t>* flags) {
  if (data.size() < 4) return Status::Corruption("update batch shorter than its header");
  const uint64_t n = DecodeFixed32(data.data());
  const uint64_t need = 4 + n * kUpdateBytes + (flags ? n : 0);
  if (data.size() != need) {
    return Status::Corruption("update batch of " + std::to_string(data.size()) +
                              " bytes, expected " + std::to_string(need));
  }
  updates->clear();
  const char* p = data.data() + 4;
  for (uint64_t i = 0; i < n; ++i, p += kUpdateBytes) {
    Update u;
    const uint8_t op = static_cast<uint8_t>(p[0]);
    if (op < 1 || op > 4) return Status::Corruption("unknown update op " + std::to_string(op));
    u.op = static_cast<UpdateOp>(op);
    u.node = static_cast<int64_t>(DecodeFixed64(p + 1));
    u.type = static_cast<int64_t>(DecodeFixed64(p + 9));
    u.dst = static_cast<int64_t>(DecodeFixed64(p + 17));
    u.generation = static_cast<int64_t>(DecodeFixed64(p + 25));
    updates->push_back(u);
  }
  if (flags) flags->assign(p, p + n);
  return Status::OK();
}

StatusOr<bool> FoundLive(const Shard& data, const NodeUpdates* entry, const Update& u) {
  switch (u.op) {
    case UpdateOp::kPutNode:
    case UpdateOp::kDeleteNode: {
      if (!(entry && entry->props_dead)) {
        static const std::vector<std::string> kNone;
        ZIPG_ASSIGN_OR_RETURN(auto props, data.GetNodeProperty(u.node, &kNone));
        if (props) return true;
      }
      if (u.op == UpdateOp::kPutNode || (entry && entry->edges_dead)) return false;
      ZIPG_ASSIGN_OR_RETURN(auto records, data.edges().FindAll(u.node));
      for (const auto& r : records) {
        ZIPG_ASSIGN_OR_RETURN(int64_t live, LiveCount(data, u.node, r.type, entry));
        if (live > 0) return true;
      }
      return false;
    }
    case UpdateOp::kPutEdge:
    case UpdateOp::kDeleteEdge: {
      if (entry && entry->EdgeDead(u.type, u.dst)) return false;
      ZIPG_ASSIGN_OR_RETURN(auto found, data.AssocGet(u.node, u.type, {u.dst},
                                                      std::numeric_limits<int64_t>::min(),
                                                      std::numeric_limits<int64_t>::max()));
      return !found.empty();
    }
  }
  return false;
}

void UpdateIndex::ApplyTo(const Update& u, bool found, NodeUpdates* entry) {
  switch (u.op) {
    case UpdateOp::kPutNode:
      if (found) entry->props_dead = true;
      break;
    case UpdateOp::kDeleteNode:
      if (found) entry->props_dead = entry->edges_dead = true;
      break;
    case UpdateOp::kPutEdge:
    case UpdateOp::kDeleteEdge:
      if (found) entry->dead_edges.insert({u.type, u.dst});
      break;
  }
  if ((u.op == UpdateOp::kPutNode || u.op == UpdateOp::kPutEdge) && u.generation > 0) {
    auto& g = entry->generations;
    auto it = std::lower_bound(g.begin(), g.end(), u.generation);
    if (it == g.end() || *it != u.generation) g.insert(it, u.generation);
  }
}

StatusOr<std::unique_ptr<UpdateIndex>> UpdateIndex::Open(const std::string& path, bool sync) {
  std::unique_ptr<UpdateIndex> index(new UpdateIndex());
  logstore::WalOptions options;
  options.sync = sync;
  ZIPG_ASSIGN_OR_RETURN(
      index->file_,
      logstore::Wal::Open(
          path, [&](std::string_view record) { return index->Replay(record); }, options));
  return index;
}

UpdateIndex::~UpdateIndex() = default;

Status UpdateIndex::Replay(std::string_view record) {
  std::vector<Update> batch;
  std::vector<uint8_t> found;
  ZIPG_RETURN_IF_ERROR(DecodeUpdates(record, &batch, &found));
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& slot = nodes_[batch[i].node];
    if (!slot) slot = std::make_shared<NodeUpdates>();
    ApplyTo(batch[i], found[i] != 0, slot.get());
  }
  return Status::OK();
}

StatusOr<std::vector<bool>> UpdateIndex::Apply(const Shard* data, const std::vector<Update>& batch) {
  // Batches apply one at a time; readers are blocked only while the result is installed, not
  // during the lookups and the sync. Each update is decided against the state its predecessors in
  // the batch leave (on scratch copies of the entries that need a lookup), then logged, then
  // applied in place: a failed write leaves memory unchanged.
  std::lock_guard apply_lock(apply_mu_);
  std::unordered_map<int64_t, NodeUpdates> scratch;
  std::vector<uint8_t> flags;
  flags.reserve(batch.size());
  for (const Update& u : batch) {
    bool found = true;
    if (u.op != UpdateOp::kPutEdge) {
      auto [it, fresh] = scratch.try_emplace(u.node);
      if (fresh) {
        if (auto old = Lookup(u.node)) it->second = *old;
      }
      found = false;
      if (data) {
        ZIPG_ASSIGN_OR_RETURN(found, FoundLive(*data, &it->second, u));
      }
      ApplyTo(u, found, &it->second);
    } else if (auto it = scratch.find(u.node); it != scratch.end()) {
      // An upsert needs no answer, so its key is marked dead without the compressed lookup (the
      // write path's most expensive step otherwise); a dead key with no version is harmless.
      ApplyTo(u, true, &it->second);
    }
    flags.push_back(found ? 1 : 0);
  }
  std::vector<bool> found(flags.begin(), flags.end());
  ZIPG_RETURN_IF_ERROR(Record(batch, found));
  return found;
}

Status UpdateIndex::Record(const std::vector<Update>& batch, const std::vector<bool>& found) {
  std::vector<uint8_t> flags(found.begin(), found.end());
  ZIPG_RETURN_IF_ERROR(file_->Append(EncodeUpdates(batch, &flags)));
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& slot = nodes_[batch[i].node];
    if (!slot) {
      slot = std::make_shared<NodeUpdates>();
    } else if (slot.use_count() > 1) {
      slot = std::make_shared<NodeUpdates>(*slot);  // a reader holds the old one: copy on write
    }
    ApplyTo(batch[i], found[i], slot.get());
  }
  return Status::OK();
}

std::shared_ptr<const NodeUpdates> UpdateIndex::Lookup(int64_t node) const {
  std::shared_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return nullptr;
  return it->second;
}

bool UpdateIndex::Touched(int64_t node) const {
  std::shared_lock lock(mu_);
  return nodes_.count(node) > 0;
}

size_t UpdateIndex::size() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

StatusOr<int64_t> LiveCount(const Shard& data, int64_t id, int64_t type, const NodeUpdates* entry) {
  if (entry && entry->edges_dead) return int64_t{0};
  ZIPG_ASSIGN_OR_RETURN(int64_t n, data.AssocCount(id, type));
  if (entry == nullptr || n == 0) return n;
  const std::vector<int64_t> dead = entry->DeadDsts(type);
  if (dead.empty()) return n;
  ZIPG_ASSIGN_OR_RETURN(auto stored, data.AssocGet(id, type, dead,
                                                   std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max()));
  return n - static_cast<int64_t>(stored.size());
}

}  // namespace zipg::shard
