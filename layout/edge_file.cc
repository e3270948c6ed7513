// EdgeFile: building, opening and querying (format in docs/graph-layout.md).
//
// An EdgeRecord (format version 2; version 1 lacks order_width and the index columns):
//   0xFE varint6(src) varint6(type)                                   key: search pattern
//   varint6(count) varint6(zigzag(ts_min)) varint6(ts_width)
//   varint6(zigzag(dst_min)) varint6(dst_width) varint6(end_width)
//   varint6(order_width)                                              metadata
//   ts_width digits of (ts - ts_min) x count                          newest first
//   dst_width digits of (dst - dst_min) x count                       same order
//   end_width digits x count: end of edge i's property list, relative to the lists' start
//   dst_width digits of (dst - dst_min) x count, ascending            } the destination index,
//   order_width digits x count: TimeOrder of each of those            } if order_width > 0
//   { delimiter(p) value 0xF5 }* per edge                             property lists
// Columns are fixed width per record, so TimeOrder i is random access and a time range is a binary
// search over timestamps extracted from the compressed text.

#include "layout/edge_file.h"

#include <algorithm>
#include <functional>

#include "layout/record_coding.h"
#include "layout/side_file.h"
#include "util/coding.h"
#include "util/phase_times.h"

namespace zipg::layout {

namespace {
constexpr char kMetaMagic[] = "ZIPGEMET";
// The meta's version is the file's format: 1, records without the destination index; 2, no key
// filter after the property names; 3, records in a CompressedFile; 4, records in a BlockFile and
// the record index after the key filter.
constexpr uint32_t kMetaVersion = EdgeFile::kFormat;
// Bytes extracted when a record is found: key, metadata and, for small records, all columns.
constexpr uint64_t kHeadBytes = 192;
// A column slice at most this long is read whole for a binary search.
constexpr uint64_t kWholeColumnBytes = 512;

std::string SrcKey(int64_t src) {
  std::string key(1, static_cast<char>(kEdgeRecordMarker));
  PutVarint6(&key, static_cast<uint64_t>(src));
  return key;
}
}  // namespace

namespace {
Status CheckNames(const std::vector<std::string>& property_names) {
  if (property_names.size() > kMaxProperties ||
      !std::is_sorted(property_names.begin(), property_names.end()) ||
      std::adjacent_find(property_names.begin(), property_names.end()) != property_names.end()) {
    return Status::InvalidArgument("EdgeFile property names must be sorted, distinct and at most " +
                                   std::to_string(kMaxProperties));
  }
  return Status::OK();
}
}  // namespace

void EdgeFile::AppendRecord(int64_t src, int64_t type, const std::vector<EncodedEdge>& edges,
                            std::string* text, uint32_t format) {
  int64_t ts_min = edges[0].timestamp, ts_max = edges[0].timestamp;
  int64_t dst_min = edges[0].dst, dst_max = edges[0].dst;
  uint64_t lists = 0;
  for (const auto& e : edges) {
    ts_min = std::min(ts_min, e.timestamp);
    ts_max = std::max(ts_max, e.timestamp);
    dst_min = std::min(dst_min, e.dst);
    dst_max = std::max(dst_max, e.dst);
    lists += e.properties.size();
  }
  const uint32_t ts_width =
      DigitsFor(static_cast<uint64_t>(ts_max) - static_cast<uint64_t>(ts_min));
  const uint32_t dst_width =
      DigitsFor(static_cast<uint64_t>(dst_max) - static_cast<uint64_t>(dst_min));
  const uint32_t end_width = DigitsFor(lists);
  const bool indexed = format >= 2 && edges.size() >= kIndexedRecordEdges;
  const uint32_t order_width = indexed ? DigitsFor(edges.size() - 1) : 0;
  text->push_back(static_cast<char>(kEdgeRecordMarker));
  PutVarint6(text, static_cast<uint64_t>(src));
  PutVarint6(text, static_cast<uint64_t>(type));
  PutVarint6(text, edges.size());
  PutVarint6(text, ZigZag(ts_min));
  PutVarint6(text, ts_width);
  PutVarint6(text, ZigZag(dst_min));
  PutVarint6(text, dst_width);
  PutVarint6(text, end_width);
  if (format >= 2) PutVarint6(text, order_width);
  for (const auto& e : edges) {
    PutDigits(text, static_cast<uint64_t>(e.timestamp) - static_cast<uint64_t>(ts_min), ts_width);
  }
  for (const auto& e : edges) {
    PutDigits(text, static_cast<uint64_t>(e.dst) - static_cast<uint64_t>(dst_min), dst_width);
  }
  uint64_t end = 0;
  for (const auto& e : edges) {
    end += e.properties.size();
    PutDigits(text, end, end_width);
  }
  if (indexed) {
    std::vector<uint64_t> order(edges.size());
    for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](uint64_t a, uint64_t b) { return edges[a].dst < edges[b].dst; });
    for (uint64_t i : order) {
      PutDigits(text, static_cast<uint64_t>(edges[i].dst) - static_cast<uint64_t>(dst_min),
                dst_width);
    }
    for (uint64_t i : order) PutDigits(text, i, order_width);
  }
  for (const auto& e : edges) text->append(e.properties);
}

Status EdgeFileOptions::Validate() const {
  if (format < 1 || format > kEdgeFileFormat) {
    return Status::InvalidArgument("edge file format must be in [1, " +
                                   std::to_string(kEdgeFileFormat) + "], got " +
                                   std::to_string(format));
  }
  // Both, whichever the format uses: an option given wrong is an error either way.
  ZIPG_RETURN_IF_ERROR(blocks.Validate());
  return suffix.Validate();
}

Status EdgeFile::Build(const std::string& base, const std::vector<std::string>& property_names,
                       std::vector<EdgeRecordInput> records, const EdgeFileOptions& options) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(CheckNames(property_names));
  std::string text;
  for (size_t r = 0; r < records.size(); ++r) {
    EdgeRecordInput& record = records[r];
    const std::string where =
        "edge record (" + std::to_string(record.src) + ", " + std::to_string(record.type) + ")";
    if (record.src < 0 || record.type < 0 || record.edges.empty()) {
      return Status::InvalidArgument(where + ": src and type must be >= 0 and it needs edges");
    }
    if (r > 0 &&
        std::pair(record.src, record.type) <= std::pair(records[r - 1].src, records[r - 1].type)) {
      return Status::InvalidArgument("edge records must be sorted by (src, type) and distinct");
    }
    auto& edges = record.edges;
    std::sort(edges.begin(), edges.end(), [](const EdgeInput& a, const EdgeInput& b) {
      return a.timestamp != b.timestamp ? a.timestamp > b.timestamp : a.dst < b.dst;
    });
    std::vector<int64_t> dsts;
    for (const auto& e : edges) dsts.push_back(e.dst);
    std::sort(dsts.begin(), dsts.end());
    if (std::adjacent_find(dsts.begin(), dsts.end()) != dsts.end()) {
      return Status::InvalidArgument(where + ": repeated destination");
    }
    std::string lists;
    std::vector<uint64_t> ends;
    PropertyViews views;
    for (const auto& e : edges) {
      views.assign(e.properties.begin(), e.properties.end());
      size_t bad = 0;
      switch (AppendPropertyList(views, property_names.size(), &lists, &bad)) {
        case ListError::kNone:
          break;
        case ListError::kBadNumber:
          return Status::InvalidArgument(where + ": property numbers must be ascending and known");
        case ListError::kBadValue:
          return Status::InvalidArgument(where + ": the value of '" +
                                         property_names[views[bad].first] +
                                         "' is not valid UTF-8");
      }
      ends.push_back(lists.size());
    }
    std::vector<EncodedEdge> encoded;
    uint64_t start = 0;
    for (size_t i = 0; i < edges.size(); ++i) {
      encoded.push_back({edges[i].dst, edges[i].timestamp,
                         std::string_view(lists).substr(start, ends[i] - start)});
      start = ends[i];
    }
    AppendRecord(record.src, record.type, encoded, &text, options.format);
    std::vector<EdgeInput>().swap(edges);  // release memory as we go
  }
  return BuildFromRecords(base, property_names, text, options);
}

namespace {
// The record whose marker is at `marker_offset` of a text of `text_size` bytes, from `bytes`
// taken there (at least its header; head takes the rest of them).
StatusOr<EdgeFile::Record> ParseRecordHead(std::string_view bytes, uint64_t marker_offset,
                                           uint32_t format, uint64_t text_size) {
  const Status bad = Status::Corruption("edge record at text offset " +
                                        std::to_string(marker_offset) + " is malformed");
  if (bytes.empty() || static_cast<uint8_t>(bytes[0]) != kEdgeRecordMarker) return bad;
  EdgeFile::Record r;
  size_t pos = 1;
  uint64_t src, type, count, ts_min, ts_width, dst_min, dst_width, end_width, order_width = 0;
  if (!GetVarint6(bytes, &pos, &src) || !GetVarint6(bytes, &pos, &type) ||
      !GetVarint6(bytes, &pos, &count) || !GetVarint6(bytes, &pos, &ts_min) ||
      !GetVarint6(bytes, &pos, &ts_width) || !GetVarint6(bytes, &pos, &dst_min) ||
      !GetVarint6(bytes, &pos, &dst_width) || !GetVarint6(bytes, &pos, &end_width) ||
      (format >= 2 && !GetVarint6(bytes, &pos, &order_width)) || ts_width > 10 || dst_width > 10 ||
      end_width > 10 || order_width > 10 || count == 0 || count > text_size ||
      (count > 1 && dst_width == 0) ||
      (order_width > 0 && (count < 2 || DigitsFor(count - 1) > order_width))) {
    return bad;
  }
  r.src = static_cast<int64_t>(src);
  r.type = static_cast<int64_t>(type);
  r.count = count;
  r.ts_min = UnZigZag(ts_min);
  r.dst_min = UnZigZag(dst_min);
  r.ts_width = static_cast<uint32_t>(ts_width);
  r.dst_width = static_cast<uint32_t>(dst_width);
  r.end_width = static_cast<uint32_t>(end_width);
  r.order_width = static_cast<uint32_t>(order_width);
  r.columns = marker_offset + pos;
  if (r.properties() > text_size) return bad;
  r.head = std::string(bytes.substr(pos));
  return r;
}

// Calls fn(record, its marker's offset) for every record of `text`, a concatenation of records
// held in memory (what BuildFromRecords is given), in order.
Status ForEachRecordIn(std::string_view text, uint32_t format,
                       const std::function<Status(const EdgeFile::Record&, uint64_t)>& fn) {
  uint64_t at = 0;
  while (at < text.size()) {
    ZIPG_ASSIGN_OR_RETURN(EdgeFile::Record r,
                          ParseRecordHead(text.substr(at, kHeadBytes), at, format, text.size()));
    uint64_t list_end = 0;
    if ((r.end_width > 0 &&
         !GetDigits(text.data() + r.last_end_entry(), r.end_width, &list_end)) ||
        r.properties() + list_end > text.size()) {
      return Status::Corruption("edge text: bad end column at offset " + std::to_string(at));
    }
    ZIPG_RETURN_IF_ERROR(fn(r, at));
    at = r.properties() + list_end;
  }
  return Status::OK();
}
}  // namespace

Status EdgeFile::BuildFromRecords(const std::string& base,
                                  const std::vector<std::string>& property_names,
                                  std::string_view text, const EdgeFileOptions& options) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  const uint32_t format = options.format;
  ZIPG_RETURN_IF_ERROR(CheckNames(property_names));
  std::string meta;
  PutFixed32(&meta, static_cast<uint32_t>(property_names.size()));
  for (const auto& name : property_names) PutLengthPrefixed(&meta, name);
  if (format >= 3) {
    // Sized by a pass over the record heads, then filled from each record's destination column.
    ScopedPhase phase("key filter");
    uint64_t keys = 0;
    ZIPG_RETURN_IF_ERROR(ForEachRecordIn(text, format, [&](const Record& r, uint64_t) {
      keys += r.count;
      return Status::OK();
    }));
    KeyFilter filter(keys);
    ZIPG_RETURN_IF_ERROR(ForEachRecordIn(text, format, [&](const Record& r, uint64_t) {
      for (uint64_t i = 0; i < r.count; ++i) {
        uint64_t d = 0;
        if (r.dst_width > 0 &&
            !GetDigits(text.data() + r.dst_column() + i * r.dst_width, r.dst_width, &d)) {
          return Status::Corruption("edge text: bad destination in the record at offset " +
                                    std::to_string(r.columns));
        }
        filter.Add(
            EdgeKeyHash(r.src, r.type, static_cast<int64_t>(static_cast<uint64_t>(r.dst_min) + d)));
      }
      return Status::OK();
    }));
    filter.EncodeTo(&meta);
  }
  if (format >= 4) {
    // The record index: (src delta, type, offset delta) of the first record starting in each
    // block where one starts, in varint6.
    std::string index;
    uint64_t entries = 0, last_block = UINT64_MAX;
    int64_t last_src = 0;
    uint64_t last_offset = 0;
    ZIPG_RETURN_IF_ERROR(ForEachRecordIn(text, format, [&](const Record& r, uint64_t at) {
      const uint64_t block = at / options.blocks.block_bytes;
      if (block == last_block) return Status::OK();
      last_block = block;
      PutVarint6(&index, static_cast<uint64_t>(r.src - last_src));
      PutVarint6(&index, static_cast<uint64_t>(r.type));
      PutVarint6(&index, at - last_offset);
      last_src = r.src;
      last_offset = at;
      ++entries;
      return Status::OK();
    }));
    PutFixed64(&meta, entries);
    PutLengthPrefixed(&meta, index);
    ZIPG_RETURN_IF_ERROR(BlockFile::Build(text, options.blocks, TextPath(base, format)));
  } else {
    ZIPG_RETURN_IF_ERROR(CompressedFile::Build(text, options.suffix, TextPath(base, format)));
  }
  return WriteSideFile(base + ".meta", kMetaMagic, format, meta);
}

StatusOr<std::unique_ptr<EdgeFile>> EdgeFile::Open(const std::string& base,
                                                   const OpenOptions& options) {
  std::unique_ptr<EdgeFile> file(new EdgeFile());
  ZIPG_ASSIGN_OR_RETURN(std::string meta, ReadSideFile(base + ".meta", kMetaMagic, 1,
                                                       kMetaVersion, &file->format_));
  ZIPG_ASSIGN_OR_RETURN(file->text_, OpenRecordText(TextPath(base, file->format_),
                                                    file->format_ >= 4, options, &file->suffix_));
  file->meta_bytes_ = meta.size() + 28;
  PayloadReader reader(meta);
  uint32_t num_names;
  const Status bad = Status::Corruption(base + ".meta: malformed edge metadata");
  if (!reader.GetFixed32(&num_names) || num_names > kMaxProperties) return bad;
  file->names_.resize(num_names);
  for (auto& name : file->names_) {
    if (!reader.GetString(&name)) return bad;
  }
  if (file->format_ >= 3) {
    ZIPG_ASSIGN_OR_RETURN(file->keys_, KeyFilter::Decode(&reader, base + ".meta"));
  }
  if (file->format_ >= 4) {
    uint64_t entries = 0;
    std::string index;
    if (!reader.GetFixed64(&entries) || !reader.GetString(&index) || entries > index.size() / 3) {
      return bad;
    }
    file->index_.resize(entries);
    size_t pos = 0;
    uint64_t src = 0, offset = 0;
    for (uint64_t i = 0; i < entries; ++i) {
      uint64_t src_delta, type, offset_delta;
      if (!GetVarint6(index, &pos, &src_delta) || !GetVarint6(index, &pos, &type) ||
          !GetVarint6(index, &pos, &offset_delta)) {
        return bad;
      }
      src += src_delta;
      offset += offset_delta;
      auto& e = file->index_[i];
      e = {static_cast<int64_t>(src), static_cast<int64_t>(type), offset};
      // Keys and offsets strictly ascending, the first record at offset 0, and every key in
      // range: what Lookup's walk relies on.
      if (src > static_cast<uint64_t>(INT64_MAX) || type > static_cast<uint64_t>(INT64_MAX) ||
          offset >= file->text_->size() || (i == 0 && offset != 0) ||
          (i > 0 && (offset <= file->index_[i - 1].offset ||
                     std::pair(e.src, e.type) <=
                         std::pair(file->index_[i - 1].src, file->index_[i - 1].type)))) {
        return bad;
      }
    }
    if (pos != index.size() || (entries == 0) != (file->text_->size() == 0)) return bad;
  }
  if (!reader.empty()) return bad;
  return file;
}

EdgeFile::~EdgeFile() = default;

StatusOr<EdgeFile::Record> EdgeFile::ReadRecord(uint64_t marker_offset) const {
  std::string bytes;
  ZIPG_RETURN_IF_ERROR(text_->Extract(marker_offset, kHeadBytes, &bytes));
  return ParseHead(bytes, marker_offset);
}

StatusOr<EdgeFile::Record> EdgeFile::ParseHead(std::string_view bytes,
                                               uint64_t marker_offset) const {
  return ParseRecordHead(bytes, marker_offset, format_, text_->size());
}

Status EdgeFile::ForEachRecord(const std::function<Status(const Record&, std::vector<Edge>)>& visit,
                               uint64_t memory_bytes, uint64_t chunk_bytes) const {
  // A window [base, base + window.size()) of the text, extended in chunks as the scan needs,
  // or the whole text.
  uint64_t chunk = std::max<uint64_t>(chunk_bytes, 1);
  std::string window;
  uint64_t base = 0;
  if (text_->size() > 0 && text_->ExtractAllMemory() <= memory_bytes) {
    ZIPG_RETURN_IF_ERROR(text_->ExtractAll(&window));
    chunk = UINT64_MAX;  // never drop any of it
  }
  auto have = [&](uint64_t offset, uint64_t len) -> Status {
    const uint64_t want = std::min(offset + len, text_->size());
    while (base + window.size() < want) {
      const uint64_t from = base + window.size();
      ZIPG_RETURN_IF_ERROR(text_->Extract(
          from, std::max(want - from, std::min(chunk, text_->size() - from)), &window));
    }
    return Status::OK();
  };
  uint64_t at = 0;
  while (at < text_->size()) {
    if (at - base > chunk) {  // drop what the scan is past (at is inside the window)
      window.erase(0, at - base);
      base = at;
    }
    ZIPG_RETURN_IF_ERROR(have(at, kHeadBytes));
    const std::string_view view(window);
    ZIPG_ASSIGN_OR_RETURN(
        Record r, ParseHead(view.substr(at - base, std::min<uint64_t>(kHeadBytes,
                                                                      window.size() - (at - base))),
                            at));
    // The record ends where its last edge's property list does.
    const uint64_t last_end = r.last_end_entry();
    ZIPG_RETURN_IF_ERROR(have(last_end, r.end_width));
    uint64_t list_end = 0;
    if (r.end_width > 0 &&
        (last_end + r.end_width > base + window.size() ||
         !GetDigits(window.data() + (last_end - base), r.end_width, &list_end))) {
      return Status::Corruption("edge text: bad end column at offset " + std::to_string(at));
    }
    const uint64_t end = r.properties() + list_end;
    if (end > text_->size() || end <= at) {
      return Status::Corruption("edge text: the record at offset " + std::to_string(at) +
                                " has a bad end");
    }
    ZIPG_RETURN_IF_ERROR(have(r.columns, end - r.columns));
    r.head = window.substr(r.columns - base, end - r.columns);  // the whole record: no extracts
    ZIPG_ASSIGN_OR_RETURN(std::vector<Edge> edges, Edges(r, 0, r.count));
    ZIPG_RETURN_IF_ERROR(visit(r, std::move(edges)));
    at = end;
  }
  return Status::OK();
}

StatusOr<std::vector<EdgeFile::Record>> EdgeFile::Lookup(int64_t src,
                                                         std::optional<int64_t> type) const {
  std::vector<Record> records;
  if (src < 0 || (type && *type < 0)) return records;
  if (suffix_ != nullptr) {
    std::string key = SrcKey(src);
    if (type) PutVarint6(&key, static_cast<uint64_t>(*type));
    ZIPG_ASSIGN_OR_RETURN(std::vector<uint64_t> hits, suffix_->Search(key));
    for (uint64_t hit : hits) {
      ZIPG_ASSIGN_OR_RETURN(Record r, ReadRecord(hit));
      if (r.src != src || (type && r.type != *type)) {
        return Status::Corruption("edge text: key mismatch");
      }
      records.push_back(std::move(r));
    }
    return records;
  }
  // Walk from the last indexed record at or before the first key wanted, through the records of
  // (at most) that block and the next ones while they can still match.
  const std::pair<int64_t, int64_t> first(src, type.value_or(0));
  auto after = std::upper_bound(index_.begin(), index_.end(), first,
                                [](const std::pair<int64_t, int64_t>& key, const IndexEntry& e) {
                                  return key < std::pair(e.src, e.type);
                                });
  if (index_.empty()) return records;  // an empty file (Open checked: no text, no entries)
  // Below the first indexed key, the walk starts at the first record (src may still match it).
  const IndexEntry& start = after == index_.begin() ? index_.front() : *std::prev(after);
  uint64_t at = start.offset;
  while (at < text_->size()) {
    ZIPG_ASSIGN_OR_RETURN(Record r, ReadRecord(at));
    if (at == start.offset && (r.src != start.src || r.type != start.type)) {
      return Status::Corruption("edge record index: the record at offset " + std::to_string(at) +
                                " is not the one indexed");
    }
    if (r.src > src || (type && std::pair(r.src, r.type) > first)) break;
    ZIPG_ASSIGN_OR_RETURN(const uint64_t end, RecordEnd(r, at));
    if (r.src == src && (!type || r.type == *type)) {
      records.push_back(std::move(r));
      if (type) break;
    }
    at = end;
  }
  return records;
}

StatusOr<uint64_t> EdgeFile::RecordEnd(const Record& r, uint64_t marker_offset) const {
  ZIPG_ASSIGN_OR_RETURN(auto last, Column(r, r.end_column(), r.end_width, r.count - 1, r.count));
  const uint64_t end = r.properties() + last[0];
  if (end <= marker_offset || end > text_->size()) {
    return Status::Corruption("edge text: the record at offset " + std::to_string(marker_offset) +
                              " has a bad end");
  }
  return end;
}

StatusOr<std::optional<EdgeFile::Record>> EdgeFile::Find(int64_t src, int64_t type) const {
  ZIPG_ASSIGN_OR_RETURN(std::vector<Record> records, Lookup(src, type));
  if (records.empty()) return std::optional<Record>();
  if (records.size() > 1) return Status::Corruption("edge text: two records with the same key");
  return std::optional<Record>(std::move(records[0]));
}

StatusOr<std::vector<EdgeFile::Record>> EdgeFile::FindAll(int64_t src) const {
  return Lookup(src, std::nullopt);
}

Status EdgeFile::Read(const Record& r, uint64_t offset, uint64_t len, std::string* out) const {
  if (offset >= r.columns && offset + len <= r.columns + r.head.size()) {
    out->append(r.head, offset - r.columns, len);
    return Status::OK();
  }
  const size_t before = out->size();
  ZIPG_RETURN_IF_ERROR(text_->Extract(offset, len, out));
  if (out->size() - before != len) return Status::Corruption("edge text: record runs past the end");
  return Status::OK();
}

StatusOr<std::vector<uint64_t>> EdgeFile::Column(const Record& r, uint64_t column, uint32_t width,
                                                 uint64_t begin, uint64_t end) const {
  std::vector<uint64_t> values(end - begin, 0);
  if (width == 0 || begin >= end) return values;
  std::string bytes;
  ZIPG_RETURN_IF_ERROR(Read(r, column + begin * width, (end - begin) * width, &bytes));
  for (uint64_t i = 0; i < end - begin; ++i) {
    if (!GetDigits(bytes.data() + i * width, width, &values[i])) {
      return Status::Corruption("edge text: bad digit in a column");
    }
  }
  return values;
}

StatusOr<std::vector<int64_t>> EdgeFile::Timestamps(const Record& r, uint64_t begin,
                                                    uint64_t end) const {
  end = std::min(end, r.count);
  begin = std::min(begin, end);
  ZIPG_ASSIGN_OR_RETURN(auto raw, Column(r, r.columns, r.ts_width, begin, end));
  std::vector<int64_t> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    out[i] = static_cast<int64_t>(static_cast<uint64_t>(r.ts_min) + raw[i]);
  }
  return out;
}

StatusOr<std::vector<int64_t>> EdgeFile::Destinations(const Record& r, uint64_t begin,
                                                      uint64_t end) const {
  end = std::min(end, r.count);
  begin = std::min(begin, end);
  ZIPG_ASSIGN_OR_RETURN(auto raw, Column(r, r.dst_column(), r.dst_width, begin, end));
  std::vector<int64_t> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    out[i] = static_cast<int64_t>(static_cast<uint64_t>(r.dst_min) + raw[i]);
  }
  return out;
}

StatusOr<std::pair<uint64_t, uint64_t>> EdgeFile::TimeRange(const Record& r, int64_t lo,
                                                            int64_t hi) const {
  // Timestamps descend with TimeOrder: begin = first i with ts <= hi, end = first i with ts < lo.
  std::vector<int64_t> all;
  const bool whole = r.count * r.ts_width <= std::max<uint64_t>(kWholeColumnBytes, r.head.size());
  if (whole) {
    ZIPG_ASSIGN_OR_RETURN(all, Timestamps(r, 0, r.count));
  }
  auto first_where = [&](auto pred) -> StatusOr<uint64_t> {
    if (whole) return std::partition_point(all.begin(), all.end(), std::not_fn(pred)) - all.begin();
    uint64_t low = 0, high = r.count;
    while (low < high) {
      const uint64_t mid = low + (high - low) / 2;
      ZIPG_ASSIGN_OR_RETURN(auto ts, Timestamps(r, mid, mid + 1));
      if (pred(ts[0])) {
        high = mid;
      } else {
        low = mid + 1;
      }
    }
    return low;
  };
  ZIPG_ASSIGN_OR_RETURN(uint64_t begin, first_where([hi](int64_t ts) { return ts <= hi; }));
  ZIPG_ASSIGN_OR_RETURN(uint64_t end, first_where([lo](int64_t ts) { return ts < lo; }));
  return std::pair(begin, std::max(begin, end));
}

StatusOr<std::vector<Edge>> EdgeFile::Edges(const Record& r, uint64_t begin, uint64_t end) const {
  end = std::min(end, r.count);
  begin = std::min(begin, end);
  std::vector<Edge> edges;
  if (begin == end) return edges;
  ZIPG_ASSIGN_OR_RETURN(auto timestamps, Timestamps(r, begin, end));
  ZIPG_ASSIGN_OR_RETURN(auto dsts, Destinations(r, begin, end));
  const uint64_t first_end = begin > 0 ? begin - 1 : 0;
  ZIPG_ASSIGN_OR_RETURN(auto ends, Column(r, r.end_column(), r.end_width, first_end, end));
  const uint64_t start = begin > 0 ? ends[0] : 0;
  if (begin > 0) ends.erase(ends.begin());
  const uint64_t stop = ends.back();
  std::string lists;
  if (stop < start) return Status::Corruption("edge text: property list ends go backwards");
  ZIPG_RETURN_IF_ERROR(Read(r, r.properties() + start, stop - start, &lists));
  const Status bad = Status::Corruption("edge text: malformed property list");
  uint64_t pos = 0;
  for (uint64_t i = 0; i < end - begin; ++i) {
    Edge e{r.src, r.type, dsts[i], timestamps[i], {}};
    const uint64_t list_end = ends[i] - start;
    if (list_end > lists.size() || list_end < pos) return bad;
    while (pos < list_end) {
      const int p = DecodeDelimiter(std::string_view(lists).substr(pos, list_end - pos));
      if (p < 0 || static_cast<size_t>(p) >= names_.size()) return bad;
      const size_t value_end = lists.find(static_cast<char>(kValueEnd), pos + 2);
      if (value_end == std::string::npos || value_end >= list_end) return bad;
      e.properties.emplace_back(names_[p], lists.substr(pos + 2, value_end - pos - 2));
      pos = value_end + 1;
    }
    edges.push_back(std::move(e));
  }
  return edges;
}

StatusOr<std::optional<uint64_t>> EdgeFile::FindDst(const Record& r, int64_t dst) const {
  const uint64_t delta = static_cast<uint64_t>(dst) - static_cast<uint64_t>(r.dst_min);
  if (dst < r.dst_min || (r.dst_width < 10 && delta >> (7 * r.dst_width) != 0)) {
    return std::optional<uint64_t>();
  }
  if (r.order_width == 0) {
    // No index: scan the destination column (a small record, or a version 1 file).
    ZIPG_ASSIGN_OR_RETURN(auto dsts, Destinations(r, 0, r.count));
    auto it = std::find(dsts.begin(), dsts.end(), dst);
    if (it == dsts.end()) return std::optional<uint64_t>();
    return std::optional<uint64_t>(static_cast<uint64_t>(it - dsts.begin()));
  }
  // Binary search of the sorted destinations, one read per probe until the rest of the range is
  // short enough to read whole.
  const uint64_t column = r.sorted_dst_column();
  const uint64_t whole = std::max<uint64_t>(1, kWholeColumnBytes / std::max(1u, r.dst_width));
  uint64_t low = 0, high = r.count;  // the answer's rank is in [low, high)
  while (high - low > whole) {
    const uint64_t mid = low + (high - low) / 2;
    ZIPG_ASSIGN_OR_RETURN(auto v, Column(r, column, r.dst_width, mid, mid + 1));
    if (v[0] <= delta) {
      low = mid;
    } else {
      high = mid;
    }
  }
  ZIPG_ASSIGN_OR_RETURN(auto values, Column(r, column, r.dst_width, low, high));
  auto it = std::lower_bound(values.begin(), values.end(), delta);
  if (it == values.end() || *it != delta) return std::optional<uint64_t>();
  const uint64_t rank = low + static_cast<uint64_t>(it - values.begin());
  ZIPG_ASSIGN_OR_RETURN(auto order, Column(r, r.order_column(), r.order_width, rank, rank + 1));
  if (order[0] >= r.count) return Status::Corruption("edge text: destination index out of range");
  return std::optional<uint64_t>(order[0]);
}

std::vector<ComponentSize> EdgeFile::Breakdown() const {
  std::vector<ComponentSize> parts;
  for (auto& part : text_->Breakdown()) parts.push_back({"text." + part.name, part.bytes});
  const uint64_t filter = keys_ ? keys_->SizeInBytes() : 0;
  parts.push_back({"meta", meta_bytes_ - filter});
  if (keys_) parts.push_back({"key_filter", filter});
  return parts;
}

uint64_t EdgeFile::SizeInBytes() const { return text_->SizeInBytes() + meta_bytes_; }

}  // namespace zipg::layout
