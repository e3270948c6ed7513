// EdgeFile: the outgoing edges of one shard's nodes as EdgeRecords (all edges of one (src, type),
// newest first), read by random access on the compressed form (ZipG section 3.3; our format is in
// docs/graph-layout.md and docs/layout-v2.md).
//
// Format 4 (the default) keeps the records in a BlockFile (zstd blocks) and finds a record from a
// sparse index of record keys: the first record that starts in each block. Formats 1-3 keep them in
// a CompressedFile and find a record by searching for its key.
//
// Files: <base>.zbk (format 4) or <base>.zcf (formats 1-3), the records' text; <base>.meta (a side
// file with the property names, the key filter and, format 4, the record index).
//
// Thread-safety: immutable once opened; all const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "layout/block_file.h"
#include "layout/compressed_file.h"
#include "layout/key_filter.h"
#include "layout/node_file.h"
#include "model/types.h"
#include "util/status.h"

namespace zipg::layout {

struct EdgeInput {
  int64_t dst = 0;
  int64_t timestamp = 0;
  NumberedProperties properties;
};

// One edge of a record being encoded: its property list already in the layout's form
// ({ delimiter(p) value 0xF5 }*, layout/record_coding.h AppendPropertyList).
struct EncodedEdge {
  int64_t dst = 0;
  int64_t timestamp = 0;
  std::string_view properties;
};

struct EdgeRecordInput {
  int64_t src = 0;
  int64_t type = 0;
  std::vector<EdgeInput> edges;  // any order, distinct dst; Build orders them newest first
};

// The newest EdgeFile format, which builders write unless told otherwise.
inline constexpr uint32_t kEdgeFileFormat = 4;

struct EdgeFileOptions {
  // 4: records in a BlockFile, found through a sparse key index (no Psi walks; docs/layout-v2.md).
  // 3: records in a CompressedFile, found by a search for their key (the layout before v2). 1 and
  // 2 write older forms of 3, for tests of reading old files. Default 4.
  uint32_t format = kEdgeFileFormat;
  // Format 4's blocks.
  BlockFileOptions blocks;
  // Formats 1-3's suffix structure (sa 64, isa 64, Psi block 128 by default).
  CompressedFileOptions suffix = {64, 64, 128, false};

  // OK, or INVALID_ARGUMENT naming the offending field.
  Status Validate() const;
};

class EdgeFile {
 public:
  // An EdgeRecord's location and metadata, as found by Find / FindAll.
  struct Record {
    int64_t src = 0;
    int64_t type = 0;
    uint64_t count = 0;
    int64_t ts_min = 0;
    int64_t dst_min = 0;
    uint32_t ts_width = 0, dst_width = 0, end_width = 0;  // base-128 digits per column entry
    // Digits of a TimeOrder in the destination index; 0: the record has no index (fewer than
    // kIndexedRecordEdges edges, or a version 1 file).
    uint32_t order_width = 0;
    uint64_t columns = 0;  // text offset of the timestamp column
    std::string head;      // text already extracted from `columns` on (saves later extracts)

    uint64_t dst_column() const { return columns + count * ts_width; }
    uint64_t end_column() const { return dst_column() + count * dst_width; }
    // The last edge's entry of the end column: where the record's property lists end.
    uint64_t last_end_entry() const { return end_column() + (count - 1) * end_width; }
    // The index: the destinations in ascending order, then the TimeOrder of each.
    uint64_t sorted_dst_column() const { return end_column() + count * end_width; }
    uint64_t order_column() const {
      return sorted_dst_column() + (order_width > 0 ? count * dst_width : 0);
    }
    uint64_t properties() const { return order_column() + count * order_width; }
  };

  // Records with at least this many edges carry a destination index (format version 2).
  static constexpr uint64_t kIndexedRecordEdges = 64;

  // Writes the text file and <base>.meta. `records` sorted by (src, type), distinct, each
  // non-empty; src, type >= 0. Edges of a record are sorted newest first (timestamp descending,
  // dst ascending).
  static Status Build(const std::string& base, const std::vector<std::string>& property_names,
                      std::vector<EdgeRecordInput> records, const EdgeFileOptions& options);
  // The two steps of Build, for callers that encode records themselves (the compress pipeline).
  // AppendRecord appends the EdgeRecord of (src, type) to *text; `edges` is non-empty, sorted
  // newest first (timestamp descending, dst ascending) with distinct dst, src and type >= 0.
  // BuildFromRecords writes the files from `text`, a concatenation of records in (src, type)
  // order, with a key filter of every (src, type, dst) in it (formats 3 and 4). `format` 1 writes
  // the older records without a destination index, 2 the file without a key filter (for tests of
  // reading old files); `text` must be encoded in the same format.
  static constexpr uint32_t kFormat = kEdgeFileFormat;
  static void AppendRecord(int64_t src, int64_t type, const std::vector<EncodedEdge>& edges,
                           std::string* text, uint32_t format = kFormat);
  static Status BuildFromRecords(const std::string& base,
                                 const std::vector<std::string>& property_names,
                                 std::string_view text, const EdgeFileOptions& options);
  // The path of the records' text file of an EdgeFile of `format` at `base`.
  static std::string TextPath(const std::string& base, uint32_t format) {
    return base + (format >= 4 ? ".zbk" : ".zcf");
  }
  static StatusOr<std::unique_ptr<EdgeFile>> Open(const std::string& base,
                                                  const OpenOptions& options = {});
  ~EdgeFile();

  const std::vector<std::string>& property_names() const { return names_; }

  // The record of (src, type), or nullopt if it has no edges here.
  StatusOr<std::optional<Record>> Find(int64_t src, int64_t type) const;
  // Every record of src, ascending type.
  StatusOr<std::vector<Record>> FindAll(int64_t src) const;
  // Calls visit(record, its edges) for every record in text order (ascending (src, type)),
  // reading the text once front to back: no search, no locate. For whole-file readers (a
  // LogStore merge), not for queries. Stops at the first error visit returns. If decoding the
  // whole text at once (CompressedFile::ExtractAll: about 5 bytes per text byte, several times
  // faster) fits in `memory_bytes`, it does that; else it extracts `chunk_bytes` at a time (at
  // least) and holds at most about twice that.
  Status ForEachRecord(const std::function<Status(const Record&, std::vector<Edge>)>& visit,
                       uint64_t memory_bytes = 0, uint64_t chunk_bytes = 4 << 20) const;

  // [begin, end): the TimeOrder range of edges with lo <= timestamp <= hi (binary search).
  StatusOr<std::pair<uint64_t, uint64_t>> TimeRange(const Record& r, int64_t lo, int64_t hi) const;
  StatusOr<std::vector<int64_t>> Timestamps(const Record& r, uint64_t begin, uint64_t end) const;
  StatusOr<std::vector<int64_t>> Destinations(const Record& r, uint64_t begin, uint64_t end) const;
  // Whole edges at TimeOrder [begin, end) (clamped to the record).
  StatusOr<std::vector<Edge>> Edges(const Record& r, uint64_t begin, uint64_t end) const;
  // The TimeOrder of the edge to `dst`, or nullopt: a binary search of the destination index
  // (O(log count) reads), or a scan of the destination column for a record without one.
  StatusOr<std::optional<uint64_t>> FindDst(const Record& r, int64_t dst) const;

  // False if src has no edge of `type` to dst here; true if it may have one (about 1% of absent
  // keys: KeyFilter), and always true for a file without a key filter (format 1 or 2).
  bool MayContain(int64_t src, int64_t type, int64_t dst) const {
    return !keys_ || keys_->MayContain(EdgeKeyHash(src, type, dst));
  }
  bool has_key_filter() const { return keys_.has_value(); }

  // The file's format: 1 (records without a destination index), 2 (no key filter), 3 or 4.
  uint32_t format_version() const { return format_; }

  std::vector<ComponentSize> Breakdown() const;
  uint64_t SizeInBytes() const;
  uint64_t text_size() const { return text_->size(); }

 private:
  EdgeFile() = default;
  StatusOr<Record> ReadRecord(uint64_t marker_offset) const;
  // Where the record r, whose marker is at `marker_offset`, ends.
  StatusOr<uint64_t> RecordEnd(const Record& r, uint64_t marker_offset) const;
  // The records of src, ascending type, or only that of (src, *type): a search for their key
  // (formats 1-3) or a walk from the record index (format 4).
  StatusOr<std::vector<Record>> Lookup(int64_t src, std::optional<int64_t> type) const;
  // The record whose marker is at `marker_offset`, from `bytes` extracted there (at least its
  // header; head takes the rest of them).
  StatusOr<Record> ParseHead(std::string_view bytes, uint64_t marker_offset) const;
  // text[offset, offset + len), from r.head when it covers the range.
  Status Read(const Record& r, uint64_t offset, uint64_t len, std::string* out) const;
  StatusOr<std::vector<uint64_t>> Column(const Record& r, uint64_t column, uint32_t width,
                                         uint64_t begin, uint64_t end) const;

  std::unique_ptr<RandomAccessText> text_;
  const CompressedFile* suffix_ = nullptr;  // text_, formats 1-3
  // Format 4: the key and marker offset of the first record that starts in each block (of the
  // blocks where one starts), ascending.
  struct IndexEntry {
    int64_t src = 0, type = 0;
    uint64_t offset = 0;
  };
  std::vector<IndexEntry> index_;
  std::vector<std::string> names_;
  std::optional<KeyFilter> keys_;
  uint64_t meta_bytes_ = 0;
  uint32_t format_ = kFormat;
};

}  // namespace zipg::layout
