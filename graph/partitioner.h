// Partitioner: the first half of the compress pipeline. It receives a graph row by row (it is an
// InputSink), routes each row to the hash partition that owns it, encodes it the way the layout
// will store it, and spills it to that partition's files in a work directory. So loading a graph
// holds no rows in memory, and each shard build later reads back only its own rows
// (graph/shard_build.h). docs/graph-layout.md ("Compress pipeline") has the design.
//
// Spill files (temporary, never read by another version), little-endian:
//   nodes-<k>.spill  { u64 id | u32 n | n bytes: the NodeFile record }*
//   edges-<k>.spill  { u64 src | u64 type | u64 dst | u64 timestamp | u32 n |
//                      n bytes: the property list as an EdgeRecord stores it }*
// Rows keep their input order within a file, so "the last of repeated (src, type, dst) wins"
// still holds when a shard sorts them.
//
// Thread-safety: single-threaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/input.h"
#include "layout/record_coding.h"
#include "util/status.h"

namespace zipg::graph {

// What a shard's spilled rows will need when built: exact for nodes, an upper estimate for edges
// (an EdgeRecord's widths depend on the record, known only after grouping).
struct ShardFootprint {
  uint64_t nodes = 0;
  uint64_t node_text = 0;   // bytes of NodeFile text (exact)
  uint64_t node_spill = 0;  // bytes of the spill file
  uint64_t edges = 0;       // rows, before repeated (src, type, dst) are merged
  uint64_t edge_property_bytes = 0;
  uint64_t edge_runs = 0;  // rows whose (src, type) differs from the previous row's: >= records
  uint64_t edge_spill = 0;
  int64_t ts_min = 0, ts_max = 0, dst_min = 0, dst_max = 0, src_max = 0, type_max = 0;

  // An upper bound of the EdgeFile text: every record at the shard's widest columns and largest
  // header, one record per run (exact count when the input lists each (src, type) together).
  uint64_t EdgeTextBound() const;

  // Counts a node row with a record of `record_bytes`, or an edge row (`new_run`: its (src, type)
  // differs from the previous edge row's of this shard).
  void AddNode(uint64_t record_bytes);
  void AddEdge(int64_t src, int64_t type, int64_t dst, int64_t timestamp, uint64_t property_bytes,
               bool new_run);
};

// Spilled rows, viewing the bytes they were decoded from.
struct NodeRow {
  int64_t id = 0;
  std::string_view record;
};
struct EdgeRow {
  int64_t src = 0, type = 0, dst = 0, timestamp = 0;
  std::string_view properties;
};
// Decode the row at bytes[*pos] and advance *pos; false if `bytes` ends inside the row.
bool DecodeRow(std::string_view bytes, size_t* pos, NodeRow* row);
bool DecodeRow(std::string_view bytes, size_t* pos, EdgeRow* row);

// Reads a spill file front to back in chunks, so that its rows can be visited in little memory.
template <typename Row>
class SpillScanner {
 public:
  explicit SpillScanner(std::string path) : path_(std::move(path)) {}
  ~SpillScanner();
  // The next row (valid until the next call): true, or false at the end of the file.
  StatusOr<bool> Next(Row* row);

 private:
  Status Fill();
  std::string path_;
  int fd_ = -1;
  bool eof_ = false;
  std::string buffer_;
  size_t pos_ = 0;
};

class Partitioner final : public InputSink {
 public:
  // Spills into `dir` (which must exist) for `shards` partitions.
  Partitioner(std::string dir, uint32_t shards);
  ~Partitioner() override;

  Status NodeHeader(const std::vector<std::string>& names) override;
  Status Node(int64_t id, const PropertyRefs& properties) override;
  Status EdgeHeader(const std::vector<std::string>& names) override;
  Status Edge(int64_t src, int64_t dst, int64_t type, int64_t timestamp,
              const PropertyRefs& properties) override;

  // Spill only the rows of these partitions (ascending); the others' rows are checked, then
  // dropped, and their footprints stay empty. Call before the first row. Empty: every partition.
  void KeepOnly(std::vector<uint32_t> partitions) { keep_only_ = std::move(partitions); }
  bool Kept(uint32_t partition) const {
    return keep_only_.empty() ||
           std::binary_search(keep_only_.begin(), keep_only_.end(), partition);
  }

  // Writes out what is buffered; call after the last row (and before reading the spill files).
  Status Flush();
  // Moves every spilled row into `shards` new partitions (their files replace the old ones).
  Status Repartition(uint32_t shards);
  // The footprints the rows would have in each of the `candidates` shard counts, from one pass
  // over the spill files (nothing is written).
  StatusOr<std::vector<std::vector<ShardFootprint>>> FootprintsAt(
      const std::vector<uint32_t>& candidates) const;

  uint32_t shards() const { return static_cast<uint32_t>(footprints_.size()); }
  const std::vector<ShardFootprint>& footprints() const { return footprints_; }
  // Property names in sorted order: the numbering of the store.
  const std::vector<std::string>& node_names() const { return node_names_; }
  const std::vector<std::string>& edge_names() const { return edge_names_; }
  std::string NodeSpill(uint32_t shard) const;
  std::string EdgeSpill(uint32_t shard) const;

 private:
  struct Buffer {
    std::string path;
    std::string bytes;
  };
  void Reset(uint32_t shards);
  Status Append(Buffer* buffer);
  std::string SpillPath(const char* kind, uint32_t generation, uint32_t shard) const;
  // Visits every row spilled in `generation` over `shards`, partition by partition (node rows,
  // then edge rows, of each); with `remove`, deletes each partition's files once read.
  Status ScanRows(uint32_t generation, uint32_t shards,
                  const std::function<Status(const NodeRow&)>& node,
                  const std::function<Status(const EdgeRow&)>& edge, bool remove) const;
  Status AddNode(int64_t id, std::string_view record);
  Status AddEdge(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                 std::string_view properties);

  const std::string dir_;
  uint32_t generation_ = 0;  // names the spill files; Repartition moves to the next
  size_t buffer_limit_ = 0;
  std::vector<ShardFootprint> footprints_;
  std::vector<uint32_t> keep_only_;  // KeepOnly's partitions; empty: all
  std::vector<Buffer> node_buffers_, edge_buffers_;
  std::vector<std::pair<int64_t, int64_t>> last_key_;  // per shard: the previous edge's (src, type)
  std::vector<std::string> node_names_, edge_names_;
  std::vector<uint32_t> node_rank_, edge_rank_;  // header position -> rank in sorted order
  layout::PropertyViews ranked_;                 // scratch
  std::string scratch_;
};

}  // namespace zipg::graph
