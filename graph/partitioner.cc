// Partitioner and spill files (graph/partitioner.h).

#include "graph/partitioner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "graph/partition.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "util/coding.h"

namespace zipg::graph {

namespace {

constexpr size_t kNodeRowHeader = 8 + 4;
constexpr size_t kEdgeRowHeader = 4 * 8 + 4;
// Write buffers of all partitions together; each is flushed to its file when full.
constexpr size_t kBufferBudget = size_t{64} << 20;
constexpr size_t kMinBuffer = size_t{16} << 10, kMaxBuffer = size_t{8} << 20;
// Bytes a spill scanner reads at a time (more if one row is longer).
constexpr size_t kScanChunk = size_t{4} << 20;

Status ErrnoError(const std::string& what, const std::string& path) {
  return Status::IOError(what + " '" + path + "': " + std::strerror(errno));
}

// Bytes of varint6(v).
uint64_t Varint6Bytes(uint64_t v) {
  uint64_t n = 1;
  while (v >= 0x40) {
    v >>= 6;
    ++n;
  }
  return n;
}

// Rank of each header position in sorted name order, and the sorted names.
std::vector<uint32_t> SortedRanks(const std::vector<std::string>& names,
                                  std::vector<std::string>* sorted) {
  std::vector<uint32_t> order(names.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return names[a] < names[b]; });
  std::vector<uint32_t> rank(names.size());
  sorted->clear();
  for (uint32_t r = 0; r < order.size(); ++r) {
    rank[order[r]] = r;
    sorted->push_back(names[order[r]]);
  }
  return rank;
}

Status CheckColumnCount(const std::vector<std::string>& names) {
  if (names.size() > layout::kMaxProperties) {
    return Status::InvalidArgument(std::to_string(names.size()) +
                                   " property columns; the layout supports at most " +
                                   std::to_string(layout::kMaxProperties));
  }
  return Status::OK();
}

// `properties` (header positions) as views numbered by rank, ascending; false if a position is
// out of range.
bool Rank(const PropertyRefs& properties, const std::vector<uint32_t>& rank,
          layout::PropertyViews* out) {
  out->clear();
  for (const auto& [index, value] : properties) {
    if (index >= rank.size()) return false;
    out->emplace_back(rank[index], value);
  }
  std::sort(out->begin(), out->end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return true;
}

std::string EdgeName(int64_t src, int64_t type, int64_t dst) {
  return "edge (" + std::to_string(src) + ", " + std::to_string(type) + ", " +
         std::to_string(dst) + ")";
}

}  // namespace

uint64_t ShardFootprint::EdgeTextBound() const {
  if (edges == 0) return 0;
  auto digits = [](int64_t lo, int64_t hi) {
    return layout::DigitsFor(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo));
  };
  const uint64_t per_edge = digits(ts_min, ts_max) + digits(dst_min, dst_max) +
                            layout::DigitsFor(edge_property_bytes);
  const uint64_t header =
      1 + Varint6Bytes(static_cast<uint64_t>(src_max)) +
      Varint6Bytes(static_cast<uint64_t>(type_max)) + Varint6Bytes(edges) +
      Varint6Bytes(std::max(layout::ZigZag(ts_min), layout::ZigZag(ts_max))) +
      Varint6Bytes(std::max(layout::ZigZag(dst_min), layout::ZigZag(dst_max))) + 3;
  return edge_property_bytes + edges * per_edge + edge_runs * header;
}

void ShardFootprint::AddNode(uint64_t record_bytes) {
  ++nodes;
  node_text += record_bytes;
  node_spill += kNodeRowHeader + record_bytes;
}

void ShardFootprint::AddEdge(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                             uint64_t property_bytes, bool new_run) {
  if (edges == 0) {
    ts_min = ts_max = timestamp;
    dst_min = dst_max = dst;
  }
  ++edges;
  edge_property_bytes += property_bytes;
  edge_spill += kEdgeRowHeader + property_bytes;
  ts_min = std::min(ts_min, timestamp);
  ts_max = std::max(ts_max, timestamp);
  dst_min = std::min(dst_min, dst);
  dst_max = std::max(dst_max, dst);
  src_max = std::max(src_max, src);
  type_max = std::max(type_max, type);
  if (new_run) ++edge_runs;
}

bool DecodeRow(std::string_view bytes, size_t* pos, NodeRow* row) {
  if (bytes.size() - *pos < kNodeRowHeader) return false;
  const char* p = bytes.data() + *pos;
  const uint32_t n = DecodeFixed32(p + 8);
  if (bytes.size() - *pos - kNodeRowHeader < n) return false;
  row->id = static_cast<int64_t>(DecodeFixed64(p));
  row->record = bytes.substr(*pos + kNodeRowHeader, n);
  *pos += kNodeRowHeader + n;
  return true;
}

bool DecodeRow(std::string_view bytes, size_t* pos, EdgeRow* row) {
  if (bytes.size() - *pos < kEdgeRowHeader) return false;
  const char* p = bytes.data() + *pos;
  const uint32_t n = DecodeFixed32(p + 32);
  if (bytes.size() - *pos - kEdgeRowHeader < n) return false;
  row->src = static_cast<int64_t>(DecodeFixed64(p));
  row->type = static_cast<int64_t>(DecodeFixed64(p + 8));
  row->dst = static_cast<int64_t>(DecodeFixed64(p + 16));
  row->timestamp = static_cast<int64_t>(DecodeFixed64(p + 24));
  row->properties = bytes.substr(*pos + kEdgeRowHeader, n);
  *pos += kEdgeRowHeader + n;
  return true;
}

template <typename Row>
SpillScanner<Row>::~SpillScanner() {
  if (fd_ >= 0) ::close(fd_);
}

template <typename Row>
Status SpillScanner<Row>::Fill() {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno != ENOENT) return ErrnoError("cannot open", path_);
      eof_ = true;  // nothing was spilled to this partition
      return Status::OK();
    }
  }
  buffer_.erase(0, pos_);
  pos_ = 0;
  const size_t want = std::max(kScanChunk, buffer_.size());
  const size_t old = buffer_.size();
  buffer_.resize(old + want);
  ssize_t got;
  do {
    got = ::read(fd_, buffer_.data() + old, want);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return ErrnoError("cannot read", path_);
  buffer_.resize(old + static_cast<size_t>(got));
  if (got == 0) eof_ = true;
  return Status::OK();
}

template <typename Row>
StatusOr<bool> SpillScanner<Row>::Next(Row* row) {
  while (!DecodeRow(buffer_, &pos_, row)) {
    if (eof_) {
      if (pos_ != buffer_.size()) return Status::Corruption(path_ + ": truncated spill file");
      return false;
    }
    ZIPG_RETURN_IF_ERROR(Fill());
  }
  return true;
}

template class SpillScanner<NodeRow>;
template class SpillScanner<EdgeRow>;

Partitioner::Partitioner(std::string dir, uint32_t shards) : dir_(std::move(dir)) {
  Reset(shards);
}

Partitioner::~Partitioner() = default;

void Partitioner::Reset(uint32_t shards) {
  buffer_limit_ = std::clamp(kBufferBudget / (2 * size_t{shards}), kMinBuffer, kMaxBuffer);
  footprints_.assign(shards, {});
  node_buffers_.assign(shards, {});
  edge_buffers_.assign(shards, {});
  last_key_.assign(shards, {-1, -1});
  for (uint32_t s = 0; s < shards; ++s) {
    node_buffers_[s].path = NodeSpill(s);
    edge_buffers_[s].path = EdgeSpill(s);
  }
}

std::string Partitioner::SpillPath(const char* kind, uint32_t generation, uint32_t shard) const {
  return dir_ + "/" + kind + "-" + std::to_string(generation) + "-" + std::to_string(shard) +
         ".spill";
}

std::string Partitioner::NodeSpill(uint32_t shard) const {
  return SpillPath("nodes", generation_, shard);
}

std::string Partitioner::EdgeSpill(uint32_t shard) const {
  return SpillPath("edges", generation_, shard);
}

Status Partitioner::Append(Buffer* buffer) {
  if (buffer->bytes.empty()) return Status::OK();
  // Opened for each flush: thousands of partitions would otherwise need thousands of descriptors.
  const int fd = ::open(buffer->path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot open", buffer->path);
  std::string_view left = buffer->bytes;
  while (!left.empty()) {
    const ssize_t n = ::write(fd, left.data(), left.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoError("cannot write", buffer->path);
      ::close(fd);
      return s;
    }
    left.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0) return ErrnoError("cannot write", buffer->path);
  buffer->bytes.clear();
  return Status::OK();
}

Status Partitioner::NodeHeader(const std::vector<std::string>& names) {
  ZIPG_RETURN_IF_ERROR(CheckColumnCount(names));
  node_rank_ = SortedRanks(names, &node_names_);
  return Status::OK();
}

Status Partitioner::EdgeHeader(const std::vector<std::string>& names) {
  ZIPG_RETURN_IF_ERROR(CheckColumnCount(names));
  edge_rank_ = SortedRanks(names, &edge_names_);
  return Status::OK();
}

Status Partitioner::Node(int64_t id, const PropertyRefs& properties) {
  if (id < 0) return Status::InvalidArgument("node id " + std::to_string(id) + " is negative");
  if (!Rank(properties, node_rank_, &ranked_)) {
    return Status::InvalidArgument("node " + std::to_string(id) + ": property index out of range");
  }
  scratch_.clear();
  if (Status s = layout::NodeFile::AppendRecord(node_names_, ranked_, &scratch_); !s.ok()) {
    return Status::InvalidArgument("node " + std::to_string(id) + ": " + s.message());
  }
  return AddNode(id, scratch_);
}

Status Partitioner::Edge(int64_t src, int64_t dst, int64_t type, int64_t timestamp,
                         const PropertyRefs& properties) {
  if (src < 0 || dst < 0 || type < 0) {
    return Status::InvalidArgument(EdgeName(src, type, dst) + ": src, dst and type must be >= 0");
  }
  if (!Rank(properties, edge_rank_, &ranked_)) {
    return Status::InvalidArgument(EdgeName(src, type, dst) + ": property index out of range");
  }
  scratch_.clear();
  size_t bad = 0;
  switch (layout::AppendPropertyList(ranked_, edge_names_.size(), &scratch_, &bad)) {
    case layout::ListError::kNone:
      break;
    case layout::ListError::kBadNumber:  // Rank sorted them: only a repeated index gets here
      return Status::InvalidArgument(EdgeName(src, type, dst) + ": repeated property");
    case layout::ListError::kBadValue:
      return Status::InvalidArgument(EdgeName(src, type, dst) + ": the value of '" +
                                     edge_names_[ranked_[bad].first] + "' is not valid UTF-8");
  }
  return AddEdge(src, type, dst, timestamp, scratch_);
}

Status Partitioner::AddNode(int64_t id, std::string_view record) {
  const uint32_t s = ShardOf(id, shards());
  if (!Kept(s)) return Status::OK();
  Buffer& buffer = node_buffers_[s];
  PutFixed64(&buffer.bytes, static_cast<uint64_t>(id));
  PutFixed32(&buffer.bytes, static_cast<uint32_t>(record.size()));
  buffer.bytes.append(record);
  footprints_[s].AddNode(record.size());
  return buffer.bytes.size() >= buffer_limit_ ? Append(&buffer) : Status::OK();
}

Status Partitioner::AddEdge(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                            std::string_view properties) {
  const uint32_t s = ShardOf(src, shards());
  if (!Kept(s)) return Status::OK();
  Buffer& buffer = edge_buffers_[s];
  PutFixed64(&buffer.bytes, static_cast<uint64_t>(src));
  PutFixed64(&buffer.bytes, static_cast<uint64_t>(type));
  PutFixed64(&buffer.bytes, static_cast<uint64_t>(dst));
  PutFixed64(&buffer.bytes, static_cast<uint64_t>(timestamp));
  PutFixed32(&buffer.bytes, static_cast<uint32_t>(properties.size()));
  buffer.bytes.append(properties);
  const bool new_run = last_key_[s] != std::pair(src, type);
  last_key_[s] = {src, type};
  footprints_[s].AddEdge(src, type, dst, timestamp, properties.size(), new_run);
  return buffer.bytes.size() >= buffer_limit_ ? Append(&buffer) : Status::OK();
}

Status Partitioner::Flush() {
  for (auto* buffers : {&node_buffers_, &edge_buffers_}) {
    for (Buffer& buffer : *buffers) {
      ZIPG_RETURN_IF_ERROR(Append(&buffer));
      std::string().swap(buffer.bytes);
    }
  }
  return Status::OK();
}

Status Partitioner::ScanRows(uint32_t generation, uint32_t shards,
                             const std::function<Status(const NodeRow&)>& node,
                             const std::function<Status(const EdgeRow&)>& edge,
                             bool remove) const {
  // Partitions in order: each source's edges are in one partition, in input order.
  for (uint32_t s = 0; s < shards; ++s) {
    {
      SpillScanner<NodeRow> scanner(SpillPath("nodes", generation, s));
      NodeRow row;
      while (true) {
        ZIPG_ASSIGN_OR_RETURN(bool more, scanner.Next(&row));
        if (!more) break;
        ZIPG_RETURN_IF_ERROR(node(row));
      }
    }
    {
      SpillScanner<EdgeRow> scanner(SpillPath("edges", generation, s));
      EdgeRow row;
      while (true) {
        ZIPG_ASSIGN_OR_RETURN(bool more, scanner.Next(&row));
        if (!more) break;
        ZIPG_RETURN_IF_ERROR(edge(row));
      }
    }
    if (remove) {
      std::error_code ec;
      std::filesystem::remove(SpillPath("nodes", generation, s), ec);
      std::filesystem::remove(SpillPath("edges", generation, s), ec);
    }
  }
  return Status::OK();
}

Status Partitioner::Repartition(uint32_t shards) {
  ZIPG_RETURN_IF_ERROR(Flush());
  const uint32_t old_generation = generation_++, old_shards = this->shards();
  Reset(shards);
  ZIPG_RETURN_IF_ERROR(ScanRows(
      old_generation, old_shards, [&](const NodeRow& row) { return AddNode(row.id, row.record); },
      [&](const EdgeRow& row) {
        return AddEdge(row.src, row.type, row.dst, row.timestamp, row.properties);
      },
      /*remove=*/true));
  return Flush();
}

StatusOr<std::vector<std::vector<ShardFootprint>>> Partitioner::FootprintsAt(
    const std::vector<uint32_t>& candidates) const {
  std::vector<std::vector<ShardFootprint>> out;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> last;
  for (uint32_t c : candidates) {
    out.emplace_back(c);
    last.emplace_back(c, std::pair<int64_t, int64_t>{-1, -1});
  }
  ZIPG_RETURN_IF_ERROR(ScanRows(
      generation_, shards(),
      [&](const NodeRow& row) {
        const uint64_t h = PartitionHash(row.id);
        for (size_t i = 0; i < candidates.size(); ++i) {
          out[i][h % candidates[i]].AddNode(row.record.size());
        }
        return Status::OK();
      },
      [&](const EdgeRow& row) {
        const uint64_t h = PartitionHash(row.src);
        for (size_t i = 0; i < candidates.size(); ++i) {
          const uint64_t s = h % candidates[i];
          const bool new_run = last[i][s] != std::pair(row.src, row.type);
          last[i][s] = {row.src, row.type};
          out[i][s].AddEdge(row.src, row.type, row.dst, row.timestamp, row.properties.size(),
                            new_run);
        }
        return Status::OK();
      },
      /*remove=*/false));
  return out;
}

}  // namespace zipg::graph
