// Building one shard from its spill files (graph/shard_build.h).

#include "graph/shard_build.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <tuple>

#include "graph/partitioner.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "util/file.h"
#include "util/phase_times.h"

namespace zipg::graph {

namespace fs = std::filesystem;

namespace {

// The whole spill file (empty if the partition received nothing), which is then deleted.
StatusOr<std::string> TakeSpill(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::string();
  ZIPG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  fs::remove(path, ec);
  return bytes;
}

Status BuildNodes(const ShardBuildInput& input, const std::string& base) {
  ScopedPhase phase("nodes");
  ScopedPhase records("records");
  std::string spill;
  ZIPG_ASSIGN_OR_RETURN(spill, TakeSpill(input.node_spill));
  struct Entry {
    int64_t id;
    uint64_t pos;  // of the row in the spill
  };
  std::vector<Entry> entries;
  NodeRow row;
  for (size_t pos = 0, at = 0; at < spill.size(); pos = at) {
    if (!DecodeRow(spill, &at, &row)) {
      return Status::Corruption(input.node_spill + ": truncated spill file");
    }
    entries.push_back({row.id, pos});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.id < b.id; });
  std::string text;
  std::vector<int64_t> ids;
  std::vector<uint64_t> offsets;
  ids.reserve(entries.size());
  offsets.reserve(entries.size() + 1);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0 && entries[i].id == entries[i - 1].id) {
      return Status::InvalidArgument("duplicate node id " + std::to_string(entries[i].id));
    }
    size_t at = entries[i].pos;
    DecodeRow(spill, &at, &row);
    ids.push_back(row.id);
    offsets.push_back(text.size());
    text.append(row.record);
  }
  offsets.push_back(text.size());
  std::vector<Entry>().swap(entries);
  std::string().swap(spill);
  records.End();
  return layout::NodeFile::BuildFromRecords(base, *input.node_names, ids, offsets, text,
                                            input.node_file);
}

Status BuildEdges(const ShardBuildInput& input, const std::string& base, uint64_t* count) {
  ScopedPhase phase("edges");
  ScopedPhase records("records");
  std::string spill;
  ZIPG_ASSIGN_OR_RETURN(spill, TakeSpill(input.edge_spill));
  std::vector<layout::EncodedEdge> edges_of_record;
  struct Entry {
    int64_t src, type, dst, timestamp;
    uint64_t pos;  // of the row's properties in the spill; rows later in the input come later
    uint64_t len;
  };
  std::vector<Entry> entries;
  EdgeRow row;
  for (size_t at = 0; at < spill.size();) {
    if (!DecodeRow(spill, &at, &row)) {
      return Status::Corruption(input.edge_spill + ": truncated spill file");
    }
    entries.push_back({row.src, row.type, row.dst, row.timestamp,
                       static_cast<uint64_t>(row.properties.data() - spill.data()),
                       row.properties.size()});
  }
  // By key, then input order; the last row of each (src, type, dst) wins.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.src, a.type, a.dst, a.pos) < std::tie(b.src, b.type, b.dst, b.pos);
  });
  size_t kept = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const bool superseded = i + 1 < entries.size() && entries[i + 1].src == entries[i].src &&
                            entries[i + 1].type == entries[i].type &&
                            entries[i + 1].dst == entries[i].dst;
    if (!superseded) entries[kept++] = entries[i];
  }
  entries.resize(kept);
  *count = kept;
  std::string text;
  for (size_t begin = 0; begin < entries.size();) {
    size_t end = begin + 1;
    while (end < entries.size() && entries[end].src == entries[begin].src &&
           entries[end].type == entries[begin].type) {
      ++end;
    }
    // Newest first; ties by dst ascending.
    std::sort(entries.begin() + static_cast<ptrdiff_t>(begin),
              entries.begin() + static_cast<ptrdiff_t>(end), [](const Entry& a, const Entry& b) {
                return a.timestamp != b.timestamp ? a.timestamp > b.timestamp : a.dst < b.dst;
              });
    edges_of_record.clear();
    for (size_t i = begin; i < end; ++i) {
      edges_of_record.push_back({entries[i].dst, entries[i].timestamp,
                                 std::string_view(spill).substr(entries[i].pos, entries[i].len)});
    }
    layout::EdgeFile::AppendRecord(entries[begin].src, entries[begin].type, edges_of_record, &text);
    begin = end;
  }
  std::vector<Entry>().swap(entries);
  std::string().swap(spill);
  records.End();
  return layout::EdgeFile::BuildFromRecords(base, *input.edge_names, text, input.edge_file);
}

}  // namespace

Status BuildShard(const ShardBuildInput& input, const std::string& dir, uint64_t* edges) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(dir + ": " + ec.message());
  ZIPG_RETURN_IF_ERROR(BuildNodes(input, dir + "/nodes"));
  return BuildEdges(input, dir + "/edges", edges);
}

}  // namespace zipg::graph
