#include "engine/updates.h"

#include <algorithm>
#include <mutex>

#include "layout/shard.h"
#include "util/coding.h"
#include "util/wal.h"

namespace zipg::engine {

namespace {
constexpr size_t kUpdateBytesV1 = 1 + 4 * 8;
constexpr size_t kUpdateBytes = 1 + 5 * 8;
constexpr uint32_t kVersion2 = 0x80000000u;
constexpr uint32_t kWithIds = 0x40000000u;  // each update carries its u64 id
}  // namespace

std::string EncodeUpdates(const std::vector<Update>& updates, const std::vector<uint8_t>* flags,
                          bool with_ids) {
  std::string out;
  out.reserve(4 + updates.size() * (kUpdateBytes + 9));
  PutFixed32(&out, static_cast<uint32_t>(updates.size()) | kVersion2 | (with_ids ? kWithIds : 0));
  for (const Update& u : updates) {
    out.push_back(static_cast<char>(u.op));
    PutFixed64(&out, static_cast<uint64_t>(u.node));
    PutFixed64(&out, static_cast<uint64_t>(u.type));
    PutFixed64(&out, static_cast<uint64_t>(u.dst));
    PutFixed64(&out, static_cast<uint64_t>(u.generation));
    PutFixed64(&out, static_cast<uint64_t>(u.timestamp));
    if (with_ids) PutFixed64(&out, u.id);
  }
  if (flags) out.append(reinterpret_cast<const char*>(flags->data()), flags->size());
  return out;
}

Status DecodeUpdates(std::string_view data, std::vector<Update>* updates,
                     std::vector<uint8_t>* flags) {
  if (data.size() < 4) return Status::Corruption("update batch shorter than its header");
  const uint32_t head = DecodeFixed32(data.data());
  const bool v2 = (head & kVersion2) != 0;
  const bool with_ids = v2 && (head & kWithIds) != 0;
  const uint64_t n = head & ~(kVersion2 | kWithIds);
  const size_t size = v2 ? kUpdateBytes + (with_ids ? 8 : 0) : kUpdateBytesV1;
  const uint64_t need = 4 + n * size + (flags ? n : 0);
  if (data.size() != need) {
    return Status::Corruption("update batch of " + std::to_string(data.size()) +
                              " bytes, expected " + std::to_string(need));
  }
  updates->clear();
  const char* p = data.data() + 4;
  for (uint64_t i = 0; i < n; ++i, p += size) {
    Update u;
    const uint8_t op = static_cast<uint8_t>(p[0]);
    if (op < 1 || op > 5) return Status::Corruption("unknown update op " + std::to_string(op));
    u.op = static_cast<UpdateOp>(op);
    u.node = static_cast<int64_t>(DecodeFixed64(p + 1));
    u.type = static_cast<int64_t>(DecodeFixed64(p + 9));
    u.dst = static_cast<int64_t>(DecodeFixed64(p + 17));
    u.generation = static_cast<int64_t>(DecodeFixed64(p + 25));
    if (v2) u.timestamp = static_cast<int64_t>(DecodeFixed64(p + 33));
    if (with_ids) u.id = DecodeFixed64(p + 41);
    updates->push_back(u);
  }
  if (flags) flags->assign(p, p + n);
  return Status::OK();
}

StatusOr<bool> FoundLive(const layout::Shard& data, const NodeUpdates* entry, const Update& u) {
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
    case UpdateOp::kLayout:
      return false;
    case UpdateOp::kPutEdge:
    case UpdateOp::kDeleteEdge: {
      if (entry && entry->EdgeDead(u.type, u.dst)) return false;
      // Most edge writes are of new keys: the filter answers those without a search.
      if (!data.edges().MayContain(u.node, u.type, u.dst)) return false;
      ZIPG_ASSIGN_OR_RETURN(
          auto found, data.AssocGet(u.node, u.type, {u.dst}, std::numeric_limits<int64_t>::min(),
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
      if (found) {
        auto& dsts = entry->dead_edges[u.type];
        dsts = dsts.Insert(u.dst, Unit{});
      }
      break;
    case UpdateOp::kLayout:
      break;
  }
}

StatusOr<std::unique_ptr<UpdateIndex>> UpdateIndex::Open(const std::string& path, bool sync) {
  std::unique_ptr<UpdateIndex> index(new UpdateIndex());
  WalOptions options;
  options.sync = sync;
  ZIPG_ASSIGN_OR_RETURN(
      index->file_,
      Wal::Open(
          path, [&](std::string_view record) { return index->Replay(record); }, options));
  return index;
}

UpdateIndex::~UpdateIndex() = default;

Status UpdateIndex::Replay(std::string_view record) {
  std::vector<Update> batch;
  std::vector<uint8_t> found;
  ZIPG_RETURN_IF_ERROR(DecodeUpdates(record, &batch, &found));
  for (size_t i = 0; i < batch.size(); ++i) ApplyLocked(batch[i], found[i] != 0);
  return Status::OK();
}

void UpdateIndex::ApplyLocked(const Update& u, bool found) {
  auto& slot = nodes_[u.node];
  // The entry before a numbered update stays readable at snapshots before it (it is shared
  // with the history, so the update copies it).
  if (u.id != 0) history_.Record(u.node, u.id, slot);
  if (!slot) {
    slot = std::make_shared<NodeUpdates>();
  } else if (slot.use_count() > 1) {
    slot = std::make_shared<NodeUpdates>(*slot);  // a reader holds the old one: copy on write
  }
  ApplyTo(u, found, slot.get());
}

Status UpdateIndex::Record(const std::vector<Update>& batch, const std::vector<bool>& found) {
  std::vector<uint8_t> flags(found.begin(), found.end());
  ZIPG_RETURN_IF_ERROR(file_->Append(EncodeUpdates(batch, &flags, /*with_ids=*/true)));
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < batch.size(); ++i) ApplyLocked(batch[i], found[i]);
  return Status::OK();
}

void UpdateIndex::Apply(const Update& u) {
  std::unique_lock lock(mu_);
  ApplyLocked(u, true);
  pending_.push_back(u);
}

Status UpdateIndex::Flush() {
  std::vector<Update> batch;
  {
    std::unique_lock lock(mu_);
    batch.swap(pending_);
  }
  if (batch.empty()) return Status::OK();
  const std::vector<uint8_t> flags(batch.size(), 1);
  return file_->Append(EncodeUpdates(batch, &flags, /*with_ids=*/true));
}

std::shared_ptr<const NodeUpdates> UpdateIndex::Lookup(int64_t node) const {
  const uint64_t at = ReadAt::Current();
  std::shared_lock lock(mu_);
  auto it = nodes_.find(node);
  std::shared_ptr<const NodeUpdates> current =
      it == nodes_.end() ? nullptr : std::shared_ptr<const NodeUpdates>(it->second);
  return at == 0 ? current : history_.At(node, at, std::move(current));
}

void UpdateIndex::Prune(uint64_t horizon) {
  std::unique_lock lock(mu_);
  history_.Prune(horizon);
}

size_t UpdateIndex::versions() const {
  std::shared_lock lock(mu_);
  return history_.changes();
}

bool UpdateIndex::Touched(int64_t node) const {
  std::shared_lock lock(mu_);
  return nodes_.count(node) > 0;
}

namespace {
// A hash node with its bucket and the entry, per type a tree node with its set, per dead key a
// set entry (a version's own; versions share most of them).
uint64_t EntryBytes(const NodeUpdates& e) {
  uint64_t bytes = 80 + sizeof(NodeUpdates);
  for (const auto& [type, dsts] : e.dead_edges) {
    bytes += 48 + sizeof(dsts) + dsts.size() * PersistentMap<int64_t, Unit>::EntryBytes();
  }
  return bytes;
}
}  // namespace

uint64_t NodeUpdatesBytes(const std::unordered_map<int64_t, NodeUpdates>& entries) {
  uint64_t bytes = 0;
  for (const auto& [node, e] : entries) bytes += EntryBytes(e);
  return bytes;
}

uint64_t UpdateIndex::bytes() const {
  std::shared_lock lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [node, e] : nodes_) bytes += EntryBytes(*e);
  return bytes;
}

size_t UpdateIndex::size() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

StatusOr<int64_t> LiveCount(const layout::Shard& data, int64_t id, int64_t type,
                            const NodeUpdates* entry) {
  if (entry && entry->edges_dead) return int64_t{0};
  ZIPG_ASSIGN_OR_RETURN(int64_t n, data.AssocCount(id, type));
  if (entry == nullptr) return n;
  // Each dead key was live here when it was recorded, so it is stored here once.
  return std::max<int64_t>(0, n - static_cast<int64_t>(entry->DeadCount(type)));
}

}  // namespace zipg::engine
