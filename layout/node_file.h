// NodeFile: the node properties of one shard: the text of all node records (ascending id), read by
// random access on its compressed form, and a way to find the nodes holding a value (ZipG section
// 3.3; our format is in docs/graph-layout.md and docs/layout-v2.md).
//
// Format 3 (the default) keeps the text in a BlockFile (zstd blocks) and, for the properties
// chosen (all by default), a SuffixIndex that finds values by any piece of them (search_node_ids)
// and answers exact lookups (get_node_ids); the other properties' values are found through a
// ValueIndex (exact posting lists for frequent values, fingerprints for the rest, verified on the
// records). Format 2 is format 3 with no search index. Format 1 keeps the text in a
// CompressedFile and searches it.
//
// Files: <base>.zbk (formats 2, 3) or <base>.zcf (format 1), the text; <base>.idx (a side file with
// the property names, the sorted (node id, record offset) table and, formats 2 and 3, the value
// index); <base>.sfx (format 3: the search indexes, docs/search.md).
//
// Thread-safety: immutable once opened; all const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layout/block_file.h"
#include "layout/compressed_file.h"
#include "layout/record_coding.h"
#include "layout/suffix_index.h"
#include "model/types.h"
#include "util/status.h"

namespace zipg::layout {

// (property number, value) pairs, ascending by number; numbers index the file's property names.
using NumberedProperties = std::vector<std::pair<uint32_t, std::string>>;

struct NodeInput {
  int64_t id = 0;
  NumberedProperties properties;
};

// The newest NodeFile format, which builders write unless told otherwise.
inline constexpr uint32_t kNodeFileFormat = 3;

// Which properties get a search index: every one (the default), none, or the listed names.
struct SearchIndexSpec {
  bool all = true;
  std::vector<std::string> names;  // when !all; sorted, distinct

  bool Covers(const std::string& name) const;
  // "all", "none", or a comma-separated list of names; INVALID_ARGUMENT for an empty name.
  static StatusOr<SearchIndexSpec> Parse(std::string_view text);
  std::string ToString() const;
  friend bool operator==(const SearchIndexSpec&, const SearchIndexSpec&) = default;
};

struct NodeFileOptions {
  // 3: text in a BlockFile, a search index for the properties `search` names, a ValueIndex for
  // the others. 2: the same with no search index (layout v2). 1: text in a CompressedFile, values
  // found by searching it (the layout before v2). Default 3.
  uint32_t format = kNodeFileFormat;
  // Formats 2 and 3's blocks.
  BlockFileOptions blocks;
  // Format 1's suffix structure (sa, isa, Psi block 32/32/32 by default: obj_get extracts whole
  // records, and get_node_ids locates every hit of its rarest term).
  CompressedFileOptions suffix = {32, 32, 32, false};
  // Format 3: the properties with a search index (search_node_ids on any other one scans its
  // values), and the index's sampling.
  SearchIndexSpec search;
  SuffixIndexOptions search_options;

  // OK, or INVALID_ARGUMENT naming the offending field.
  Status Validate() const;
};

class ValueIndex;

class NodeFile {
 public:
  // Writes <base>.zcf and <base>.idx. `property_names` must be sorted and distinct (at most
  // kMaxProperties); `nodes` sorted by id with distinct ids; values must be valid UTF-8 (they may
  // not contain bytes 0xF5..0xFF; INVALID_ARGUMENT otherwise).
  static Status Build(const std::string& base, const std::vector<std::string>& property_names,
                      const std::vector<NodeInput>& nodes, const NodeFileOptions& options);
  // The two steps of Build, for callers that encode records as they arrive (the compress
  // pipeline). AppendRecord appends the record of a node with `properties` (numbers index
  // `property_names`) to *text; INVALID_ARGUMENT if a number is not ascending or not known, or a
  // value is not valid UTF-8 (*text then holds part of the record). BuildFromRecords writes the
  // files from `text`, which holds the records of `ids` (ascending, distinct) starting at
  // `offsets` (ids.size() + 1 entries, the last text.size()).
  static Status AppendRecord(const std::vector<std::string>& property_names,
                             const PropertyViews& properties, std::string* text);
  static Status BuildFromRecords(const std::string& base,
                                 const std::vector<std::string>& property_names,
                                 const std::vector<int64_t>& ids,
                                 const std::vector<uint64_t>& offsets, std::string_view text,
                                 const NodeFileOptions& options);
  // The path of the text file of a NodeFile of `format` at `base`.
  static std::string TextPath(const std::string& base, uint32_t format) {
    return base + (format >= 2 ? ".zbk" : ".zcf");
  }
  static StatusOr<std::unique_ptr<NodeFile>> Open(const std::string& base,
                                                  const OpenOptions& options = {});
  ~NodeFile();

  uint64_t num_nodes() const { return ids_.size(); }
  // The ids of every node stored here, ascending.
  const std::vector<int64_t>& ids() const { return ids_; }
  const std::vector<std::string>& property_names() const { return names_; }
  bool Contains(int64_t id) const;

  // The node's properties (all of them if `names` is null, else the listed ones that are present),
  // sorted by name; nullopt if the node is not in this file.
  StatusOr<std::optional<Properties>> Get(int64_t id,
                                          const std::vector<std::string>* names = nullptr) const;
  // Calls visit(id, its properties sorted by name) for every node in ascending id, reading the
  // text once front to back: for whole-file readers (a shard rebuild), not for queries. Stops at
  // the first error visit returns. Decodes the whole text at once if that fits in
  // `memory_bytes` (CompressedFile::ExtractAllMemory), else `chunk_bytes` of records at a time.
  Status ForEachNode(const std::function<Status(int64_t id, Properties properties)>& visit,
                     uint64_t memory_bytes = 0, uint64_t chunk_bytes = 4 << 20) const;
  // Whether the node exists and has every (name, value) of `filter` (an empty filter matches any
  // existing node).
  StatusOr<bool> Matches(int64_t id, const Properties& filter) const;
  // Ids (ascending) of the nodes that have every (name, value) of `match`; `match` non-empty.
  StatusOr<std::vector<int64_t>> FindIds(const Properties& match) const;
  // Ids (ascending) of the nodes with a value (of `property`, or of any property if null) that
  // matches `pattern` as `match` says. Through the search index where the property has one, else
  // by reading every record (slow: docs/search.md). RESOURCE_EXHAUSTED past `max_hits`
  // occurrences to locate, DEADLINE_EXCEEDED once the call's deadline passes.
  StatusOr<std::vector<int64_t>> SearchValues(std::string_view pattern, SearchMatch match,
                                              const std::string* property, uint64_t max_hits) const;
  // Whether `property` has a search index here.
  bool HasSearchIndex(const std::string& property) const;
  // The properties with a search index, as an option for building a file like this one: "all"
  // if every property has one or the file predates search indexes (format 1 or 2).
  SearchIndexSpec search_spec() const;

  // Stored bytes: the compressed text's components prefixed "text." and "index" (the side file).
  std::vector<ComponentSize> Breakdown() const;
  uint64_t SizeInBytes() const;
  uint64_t text_size() const { return text_->size(); }
  // Bytes of the search indexes, and of the value text they index (delimiters included).
  uint64_t search_index_bytes() const;
  uint64_t search_text_bytes() const;
  // 1, 2 or 3.
  uint32_t format_version() const { return format_; }

 private:
  struct Header;
  NodeFile() = default;
  int PropertyNumber(const std::string& name) const;
  // Index of the record of `id` in ids_, or -1.
  int64_t RecordIndex(int64_t id) const;
  Status ReadHeader(int64_t index, Header* header) const;
  Status ParseRecord(int64_t index, std::string_view record, Properties* out) const;
  // FindIds by searching the text (format 1) or through the indexes (formats 2, 3).
  StatusOr<std::vector<int64_t>> SuffixFileIds(const Properties& match) const;
  StatusOr<std::vector<int64_t>> IndexIds(const Properties& match) const;
  // Reads the search side file (format 3).
  Status OpenSearch(const std::string& path, uint32_t num_records);
  // SearchValues by reading every record, for the properties marked in `wanted`.
  StatusOr<std::vector<int64_t>> ScanValues(std::string_view pattern, SearchMatch match,
                                            const std::vector<bool>& wanted) const;

  std::unique_ptr<RandomAccessText> text_;
  const CompressedFile* suffix_ = nullptr;  // text_, format 1
  std::unique_ptr<ValueIndex> values_;      // formats 2, 3
  // Format 3: the search index over the covered properties' values (null: no value to index).
  std::unique_ptr<SuffixIndex> search_;
  std::vector<bool> covered_;  // by property number: has a search index (format 3)
  uint64_t search_bytes_ = 0;
  uint32_t format_ = kNodeFileFormat;
  std::vector<std::string> names_;
  std::vector<int64_t> ids_;
  std::vector<uint64_t> offsets_;  // ids_.size() + 1 entries; the last is the text size
  uint64_t index_bytes_ = 0;
};

}  // namespace zipg::layout
