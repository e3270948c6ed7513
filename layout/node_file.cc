// NodeFile: building, opening and querying (format in docs/graph-layout.md).
//
// A record is a header and the values:
//   varint6(k) { varint6(p[i] - p[i-1] - 1) varint6(len[i]) } x k      (p[-1] = -1)
//   { delimiter(p[i]) value[i] 0xF5 } x k
// The header lets a lookup of a few properties extract only the header and those values; the
// delimiters and value ends make `delimiter(p) value 0xF5` a search pattern that matches exactly
// the nodes whose property p equals value.

#include "layout/node_file.h"

#include <algorithm>

#include "layout/record_coding.h"
#include "layout/sdsl_io.h"
#include "layout/side_file.h"
#include "layout/value_index.h"
#include "util/call_deadline.h"
#include "util/coding.h"
#include "util/phase_times.h"

namespace zipg::layout {

namespace {
constexpr char kIndexMagic[] = "ZIPGNIDX";
// The index side file's version is the file's format: 1, the text in a CompressedFile; 2, the text
// in a BlockFile and the value index after the offsets; 3, the same, and a search side file.
constexpr uint32_t kIndexVersion = kNodeFileFormat;
// The search side file (format 3):
//   varint covered, { varint property } x covered   properties with a search index, ascending
//   varint bytes, SuffixIndex                        over their values (0 bytes: no value to index)
constexpr char kSearchMagic[] = "ZIPGNSFX";
constexpr uint32_t kSearchVersion = 1;
// Bytes of records read at a time by a scan.
constexpr uint64_t kScanChunkBytes = 1 << 20;
// Searches whose occurrences times this exceed the text's bytes read the values instead of
// locating (NodeFile::SearchValues).
constexpr uint64_t kScanBytesPerOccurrence = 4096;
// First guess of a header's length: k = 40 dense properties with values < 64 bytes need 81.
constexpr uint64_t kHeaderGuess = 96;
}  // namespace

struct NodeFile::Header {
  std::vector<uint32_t> props;
  std::vector<uint64_t> value_pos;  // offset of value i's delimiter within the record
  std::vector<uint64_t> lengths;
};

namespace {
Status CheckNames(const std::vector<std::string>& property_names) {
  if (property_names.size() > kMaxProperties) {
    return Status::InvalidArgument("a NodeFile holds at most " + std::to_string(kMaxProperties) +
                                   " property names, got " + std::to_string(property_names.size()));
  }
  if (!std::is_sorted(property_names.begin(), property_names.end()) ||
      std::adjacent_find(property_names.begin(), property_names.end()) != property_names.end()) {
    return Status::InvalidArgument("NodeFile property names must be sorted and distinct");
  }
  return Status::OK();
}
}  // namespace

namespace {
// Parses a header from the first bytes of a record; false if `bytes` ends inside it.
bool ParseHeader(std::string_view bytes, std::vector<uint32_t>* props,
                 std::vector<uint64_t>* lengths, uint64_t* header_len, bool* malformed) {
  size_t pos = 0;
  uint64_t k;
  *malformed = false;
  if (!GetVarint6(bytes, &pos, &k)) return false;
  if (k > kMaxProperties) {
    *malformed = true;
    return false;
  }
  props->clear();
  lengths->clear();
  int64_t previous = -1;
  for (uint64_t i = 0; i < k; ++i) {
    uint64_t delta, len;
    if (!GetVarint6(bytes, &pos, &delta) || !GetVarint6(bytes, &pos, &len)) return false;
    if (delta >= kMaxProperties || previous + 1 + static_cast<int64_t>(delta) >= kMaxProperties) {
      *malformed = true;
      return false;
    }
    previous += 1 + static_cast<int64_t>(delta);
    props->push_back(static_cast<uint32_t>(previous));
    lengths->push_back(len);
  }
  *header_len = pos;
  return true;
}

// Calls fn(property, value) for every value of a record held in memory; CORRUPTION if malformed.
template <typename Fn>
Status ForEachValue(std::string_view record, Fn fn) {
  std::vector<uint32_t> props;
  std::vector<uint64_t> lengths;
  uint64_t pos;
  bool malformed;
  const Status bad = Status::Corruption("node text: a malformed record");
  if (!ParseHeader(record, &props, &lengths, &pos, &malformed)) return bad;
  for (size_t i = 0; i < props.size(); ++i) {
    if (pos + 3 + lengths[i] > record.size()) return bad;
    fn(props[i], record.substr(pos + 2, lengths[i]));
    pos += 3 + lengths[i];
  }
  return pos == record.size() ? Status::OK() : bad;
}
}  // namespace

Status NodeFile::AppendRecord(const std::vector<std::string>& property_names,
                              const PropertyViews& properties, std::string* text) {
  PutVarint6(text, properties.size());
  int64_t previous = -1;
  for (const auto& [p, value] : properties) {
    if (p >= property_names.size() || static_cast<int64_t>(p) <= previous) {
      return Status::InvalidArgument("property numbers must be ascending and known");
    }
    PutVarint6(text, static_cast<uint64_t>(p - previous - 1));
    PutVarint6(text, value.size());
    previous = p;
  }
  size_t bad = 0;
  if (AppendPropertyList(properties, property_names.size(), text, &bad) != ListError::kNone) {
    return Status::InvalidArgument("the value of '" + property_names[properties[bad].first] +
                                   "' is not valid UTF-8");
  }
  return Status::OK();
}

bool SearchIndexSpec::Covers(const std::string& name) const {
  return all || std::binary_search(names.begin(), names.end(), name);
}

StatusOr<SearchIndexSpec> SearchIndexSpec::Parse(std::string_view text) {
  SearchIndexSpec spec;
  if (text == "all") return spec;
  spec.all = false;
  if (text == "none") return spec;
  size_t begin = 0;
  for (;;) {
    const size_t comma = text.find(',', begin);
    const std::string_view name = text.substr(begin, comma - begin);
    if (name.empty()) {
      return Status::InvalidArgument("--search-index takes all, none or NAME,NAME...; got '" +
                                     std::string(text) + "'");
    }
    spec.names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  std::sort(spec.names.begin(), spec.names.end());
  spec.names.erase(std::unique(spec.names.begin(), spec.names.end()), spec.names.end());
  return spec;
}

std::string SearchIndexSpec::ToString() const {
  if (all) return "all";
  if (names.empty()) return "none";
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

Status NodeFileOptions::Validate() const {
  if (format < 1 || format > kNodeFileFormat) {
    return Status::InvalidArgument("node file format must be 1, 2 or 3, got " +
                                   std::to_string(format));
  }
  ZIPG_RETURN_IF_ERROR(search_options.Validate());
  // Both, whichever the format uses: an option given wrong is an error either way.
  ZIPG_RETURN_IF_ERROR(blocks.Validate());
  return suffix.Validate();
}

Status NodeFile::Build(const std::string& base, const std::vector<std::string>& property_names,
                       const std::vector<NodeInput>& nodes, const NodeFileOptions& options) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(CheckNames(property_names));
  std::string text;
  std::vector<int64_t> ids;
  std::vector<uint64_t> offsets;
  PropertyViews views;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInput& node = nodes[i];
    if (node.id < 0) return Status::InvalidArgument("NodeFile node ids must be >= 0");
    if (i > 0 && node.id <= nodes[i - 1].id) {
      return Status::InvalidArgument("NodeFile nodes must have ascending distinct ids");
    }
    ids.push_back(node.id);
    offsets.push_back(text.size());
    views.assign(node.properties.begin(), node.properties.end());
    if (Status s = AppendRecord(property_names, views, &text); !s.ok()) {
      return Status::InvalidArgument("node " + std::to_string(node.id) + ": " + s.message());
    }
  }
  offsets.push_back(text.size());
  return BuildFromRecords(base, property_names, ids, offsets, text, options);
}

Status NodeFile::BuildFromRecords(const std::string& base,
                                  const std::vector<std::string>& property_names,
                                  const std::vector<int64_t>& ids,
                                  const std::vector<uint64_t>& offsets, std::string_view text,
                                  const NodeFileOptions& options) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(CheckNames(property_names));
  if (offsets.size() != ids.size() + 1 || offsets.back() != text.size()) {
    return Status::InvalidArgument("NodeFile record offsets do not match the ids and the text");
  }
  std::string index;
  PutFixed32(&index, static_cast<uint32_t>(property_names.size()));
  for (const auto& name : property_names) PutLengthPrefixed(&index, name);
  PutFixed64(&index, ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) return Status::InvalidArgument("NodeFile node ids must be >= 0");
    if (i > 0 && ids[i] <= ids[i - 1]) {
      return Status::InvalidArgument("NodeFile nodes must have ascending distinct ids");
    }
    PutFixed64(&index, static_cast<uint64_t>(ids[i]));
  }
  for (uint64_t offset : offsets) PutFixed64(&index, offset);
  if (options.format >= 2) {
    if (ids.size() > UINT32_MAX) {
      return Status::InvalidArgument("a NodeFile of format 2 holds at most 2^32 - 1 nodes");
    }
    // Format 3: each value goes to its property's search index if it has one, else to the value
    // index.
    std::vector<bool> covered(property_names.size(), false);
    if (options.format >= 3) {
      for (size_t p = 0; p < property_names.size(); ++p) {
        covered[p] = options.search.Covers(property_names[p]);
      }
    }
    ScopedPhase index_phase("indexes");
    ValueIndex::Builder values;
    SuffixIndex::Builder search;
    uint64_t keys = 0;
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (offsets[i] > offsets[i + 1]) {
        return Status::InvalidArgument("NodeFile record offsets must ascend");
      }
      ZIPG_RETURN_IF_ERROR(ForEachValue(text.substr(offsets[i], offsets[i + 1] - offsets[i]),
                                        [&](uint32_t p, std::string_view) {
                                          if (p < covered.size() && !covered[p]) ++keys;
                                        }));
    }
    values.Reserve(keys);
    for (size_t i = 0; i < ids.size(); ++i) {
      ZIPG_RETURN_IF_ERROR(ForEachValue(text.substr(offsets[i], offsets[i + 1] - offsets[i]),
                                        [&](uint32_t p, std::string_view value) {
                                          if (p < covered.size() && covered[p]) {
                                            search.Add(p, value, static_cast<uint32_t>(i));
                                          } else {
                                            values.Add(p, value, static_cast<uint32_t>(i));
                                          }
                                        }));
    }
    if (options.format >= 3) {
      std::string payload;
      PutVarint(&payload, std::count(covered.begin(), covered.end(), true));
      for (size_t p = 0; p < covered.size(); ++p) {
        if (covered[p]) PutVarint(&payload, p);
      }
      std::string encoded;
      if (search.size() > 0) {
        ZIPG_ASSIGN_OR_RETURN(encoded, search.Finish(static_cast<uint32_t>(ids.size()),
                                                     static_cast<uint32_t>(property_names.size()),
                                                     options.search_options));
      }
      PutVarint(&payload, encoded.size());
      payload.append(encoded);
      ZIPG_RETURN_IF_ERROR(WriteSideFile(base + ".sfx", kSearchMagic, kSearchVersion, payload));
    }
    const std::string encoded = values.Finish(static_cast<uint32_t>(ids.size()));
    if (encoded.size() > UINT32_MAX) {
      return Status::InvalidArgument("the value index of " + base + " would pass 4 GiB (" +
                                     std::to_string(keys) + " values): use more shards");
    }
    PutLengthPrefixed(&index, encoded);
    index_phase.End();
    ZIPG_RETURN_IF_ERROR(BlockFile::Build(text, options.blocks, TextPath(base, options.format)));
  } else {
    ZIPG_RETURN_IF_ERROR(
        CompressedFile::Build(text, options.suffix, TextPath(base, options.format)));
  }
  return WriteSideFile(base + ".idx", kIndexMagic, options.format, index);
}

StatusOr<std::unique_ptr<NodeFile>> NodeFile::Open(const std::string& base,
                                                   const OpenOptions& options) {
  std::unique_ptr<NodeFile> file(new NodeFile());
  ZIPG_ASSIGN_OR_RETURN(std::string index,
                        ReadSideFile(base + ".idx", kIndexMagic, 1, kIndexVersion, &file->format_));
  ZIPG_ASSIGN_OR_RETURN(file->text_, OpenRecordText(TextPath(base, file->format_),
                                                    file->format_ >= 2, options, &file->suffix_));
  file->index_bytes_ = index.size() + 28;
  const Status bad = Status::Corruption(base + ".idx: malformed node index");
  PayloadReader reader(index);
  uint32_t num_names;
  if (!reader.GetFixed32(&num_names) || num_names > kMaxProperties) return bad;
  file->names_.resize(num_names);
  for (auto& name : file->names_) {
    if (!reader.GetString(&name)) return bad;
  }
  uint64_t count;
  if (!reader.GetFixed64(&count) || count > index.size() / 16) return bad;
  file->ids_.resize(count);
  file->offsets_.resize(count + 1);
  for (auto& id : file->ids_) {
    uint64_t v;
    if (!reader.GetFixed64(&v)) return bad;
    id = static_cast<int64_t>(v);
  }
  for (auto& offset : file->offsets_) {
    if (!reader.GetFixed64(&offset)) return bad;
  }
  if (file->format_ >= 2) {
    std::string values;
    if (!reader.GetString(&values) || count > UINT32_MAX) return bad;
    ZIPG_ASSIGN_OR_RETURN(
        file->values_,
        ValueIndex::Decode(std::move(values), static_cast<uint32_t>(count), base + ".idx"));
  }
  file->covered_.assign(num_names, false);
  if (file->format_ >= 3) {
    ZIPG_RETURN_IF_ERROR(file->OpenSearch(base + ".sfx", static_cast<uint32_t>(count)));
  }
  if (!reader.empty() || !std::is_sorted(file->offsets_.begin(), file->offsets_.end()) ||
      file->offsets_.back() != file->text_->size() ||
      std::adjacent_find(file->ids_.begin(), file->ids_.end(),
                         [](int64_t a, int64_t b) { return a >= b; }) != file->ids_.end()) {
    return bad;
  }
  return file;
}

Status NodeFile::OpenSearch(const std::string& path, uint32_t num_records) {
  ZIPG_ASSIGN_OR_RETURN(std::string payload, ReadSideFile(path, kSearchMagic, kSearchVersion));
  const Status bad = Status::Corruption(path + ": malformed search index file");
  const std::string_view s(payload);
  size_t pos = 0;
  uint64_t covered, p, len;
  int64_t previous = -1;
  if (!GetVarint(s, &pos, &covered) || covered > names_.size()) return bad;
  for (uint64_t i = 0; i < covered; ++i) {
    if (!GetVarint(s, &pos, &p) || p >= names_.size() || static_cast<int64_t>(p) <= previous) {
      return bad;
    }
    covered_[p] = true;
    previous = static_cast<int64_t>(p);
  }
  if (!GetVarint(s, &pos, &len) || len != s.size() - pos) return bad;
  if (len > 0) {
    ZIPG_ASSIGN_OR_RETURN(search_, SuffixIndex::Decode(s.substr(pos), num_records, path));
  }
  search_bytes_ = payload.size() + 28;
  return Status::OK();
}

NodeFile::~NodeFile() = default;

bool NodeFile::HasSearchIndex(const std::string& property) const {
  const int p = PropertyNumber(property);
  return p >= 0 && covered_[p];
}

SearchIndexSpec NodeFile::search_spec() const {
  SearchIndexSpec spec;
  if (format_ < 3 || std::find(covered_.begin(), covered_.end(), false) == covered_.end()) {
    return spec;
  }
  spec.all = false;
  for (size_t p = 0; p < names_.size(); ++p) {
    if (covered_[p]) spec.names.push_back(names_[p]);
  }
  return spec;
}

uint64_t NodeFile::search_index_bytes() const { return search_bytes_; }

uint64_t NodeFile::search_text_bytes() const { return search_ ? search_->text_bytes() : 0; }

int NodeFile::PropertyNumber(const std::string& name) const {
  auto it = std::lower_bound(names_.begin(), names_.end(), name);
  return it != names_.end() && *it == name ? static_cast<int>(it - names_.begin()) : -1;
}

int64_t NodeFile::RecordIndex(int64_t id) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  return it != ids_.end() && *it == id ? it - ids_.begin() : -1;
}

bool NodeFile::Contains(int64_t id) const { return RecordIndex(id) >= 0; }

Status NodeFile::ReadHeader(int64_t index, Header* header) const {
  const uint64_t begin = offsets_[index], end = offsets_[index + 1];
  std::string bytes;
  uint64_t want = std::min(end - begin, kHeaderGuess), header_len = 0;
  for (;;) {
    bytes.clear();
    ZIPG_RETURN_IF_ERROR(text_->Extract(begin, want, &bytes));
    bool malformed;
    if (ParseHeader(bytes, &header->props, &header->lengths, &header_len, &malformed)) break;
    if (malformed || want == end - begin) {
      return Status::Corruption("node record " + std::to_string(ids_[index]) + ": bad header");
    }
    want = std::min(end - begin, want * 4);
  }
  header->value_pos.resize(header->props.size());
  uint64_t pos = header_len;
  for (size_t i = 0; i < header->props.size(); ++i) {
    header->value_pos[i] = pos;
    pos += 2 + header->lengths[i] + 1;
  }
  if (begin + pos != end) {
    return Status::Corruption("node record " + std::to_string(ids_[index]) +
                              ": header does not match the record length");
  }
  return Status::OK();
}

Status NodeFile::ParseRecord(int64_t index, std::string_view record, Properties* out) const {
  std::vector<uint32_t> props;
  std::vector<uint64_t> lengths;
  uint64_t pos;
  bool malformed;
  const Status bad =
      Status::Corruption("node record " + std::to_string(ids_[index]) + " is malformed");
  if (!ParseHeader(record, &props, &lengths, &pos, &malformed)) return bad;
  out->clear();
  out->reserve(props.size());
  for (size_t i = 0; i < props.size(); ++i) {
    if (pos + 3 + lengths[i] > record.size() ||
        DecodeDelimiter(record.substr(pos)) != static_cast<int>(props[i]) ||
        static_cast<uint8_t>(record[pos + 2 + lengths[i]]) != kValueEnd ||
        props[i] >= names_.size()) {
      return bad;
    }
    out->emplace_back(names_[props[i]], std::string(record.substr(pos + 2, lengths[i])));
    pos += 3 + lengths[i];
  }
  return pos == record.size() ? Status::OK() : bad;
}

StatusOr<std::optional<Properties>> NodeFile::Get(int64_t id,
                                                  const std::vector<std::string>* names) const {
  const int64_t index = RecordIndex(id);
  if (index < 0) return std::optional<Properties>();
  Properties props;
  if (names == nullptr) {
    std::string record;
    ZIPG_RETURN_IF_ERROR(
        text_->Extract(offsets_[index], offsets_[index + 1] - offsets_[index], &record));
    ZIPG_RETURN_IF_ERROR(ParseRecord(index, record, &props));
    return std::optional<Properties>(std::move(props));
  }
  std::vector<int> wanted;
  for (const auto& name : *names) {
    if (int p = PropertyNumber(name); p >= 0) wanted.push_back(p);
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  if (wanted.empty()) return std::optional<Properties>(std::move(props));
  Header header;
  ZIPG_RETURN_IF_ERROR(ReadHeader(index, &header));
  for (int p : wanted) {
    auto it = std::lower_bound(header.props.begin(), header.props.end(), static_cast<uint32_t>(p));
    if (it == header.props.end() || *it != static_cast<uint32_t>(p)) continue;
    const size_t i = it - header.props.begin();
    std::string value;
    ZIPG_RETURN_IF_ERROR(
        text_->Extract(offsets_[index] + header.value_pos[i] + 2, header.lengths[i], &value));
    props.emplace_back(names_[p], std::move(value));
  }
  return std::optional<Properties>(std::move(props));
}

Status NodeFile::ForEachNode(const std::function<Status(int64_t, Properties)>& visit,
                             uint64_t memory_bytes, uint64_t chunk_bytes) const {
  const size_t n = ids_.size();
  std::string whole;
  const bool at_once = text_->size() > 0 && text_->ExtractAllMemory() <= memory_bytes;
  if (at_once) ZIPG_RETURN_IF_ERROR(text_->ExtractAll(&whole));
  std::string chunk;
  for (size_t first = 0; first < n;) {
    // Records [first, last): the whole text, or at least one record and about chunk_bytes.
    size_t last = first + 1;
    if (at_once) {
      last = n;
    } else {
      while (last < n && offsets_[last + 1] - offsets_[first] <= chunk_bytes) ++last;
      chunk.clear();
      ZIPG_RETURN_IF_ERROR(
          text_->Extract(offsets_[first], offsets_[last] - offsets_[first], &chunk));
    }
    const std::string_view view = at_once ? std::string_view(whole) : std::string_view(chunk);
    const uint64_t base = at_once ? 0 : offsets_[first];
    for (size_t i = first; i < last; ++i) {
      Properties props;
      ZIPG_RETURN_IF_ERROR(
          ParseRecord(static_cast<int64_t>(i),
                      view.substr(offsets_[i] - base, offsets_[i + 1] - offsets_[i]), &props));
      ZIPG_RETURN_IF_ERROR(visit(ids_[i], std::move(props)));
    }
    first = last;
  }
  return Status::OK();
}

StatusOr<bool> NodeFile::Matches(int64_t id, const Properties& filter) const {
  const int64_t index = RecordIndex(id);
  if (index < 0) return false;
  if (filter.empty()) return true;
  std::vector<std::pair<uint32_t, const std::string*>> wanted;
  for (const auto& [name, value] : filter) {
    const int p = PropertyNumber(name);
    if (p < 0) return false;
    wanted.emplace_back(p, &value);
  }
  Header header;
  ZIPG_RETURN_IF_ERROR(ReadHeader(index, &header));
  // Compare lengths first: a mismatch there costs no extraction.
  std::vector<size_t> positions;
  for (const auto& [p, value] : wanted) {
    auto it = std::lower_bound(header.props.begin(), header.props.end(), p);
    if (it == header.props.end() || *it != p) return false;
    const size_t i = it - header.props.begin();
    if (header.lengths[i] != value->size()) return false;
    positions.push_back(i);
  }
  for (size_t j = 0; j < wanted.size(); ++j) {
    const size_t i = positions[j];
    std::string stored;
    ZIPG_RETURN_IF_ERROR(
        text_->Extract(offsets_[index] + header.value_pos[i] + 2, header.lengths[i], &stored));
    if (stored != *wanted[j].second) return false;
  }
  return true;
}

StatusOr<std::vector<int64_t>> NodeFile::FindIds(const Properties& match) const {
  if (match.empty()) return Status::InvalidArgument("get_node_ids needs at least one property");
  return suffix_ != nullptr ? SuffixFileIds(match) : IndexIds(match);
}

StatusOr<std::vector<int64_t>> NodeFile::IndexIds(const Properties& match) const {
  // Each term's candidates: exact for a frequent value, else a small superset. Intersect them,
  // smallest first, then read the records left to check the terms whose candidates were inexact
  // (at least one inexact term bounds the records left by its few candidates).
  std::vector<ValueIndex::Candidates> terms;
  Properties to_verify;
  for (const auto& [name, value] : match) {
    const int p = PropertyNumber(name);
    if (p < 0 || !IsValueText(value)) return std::vector<int64_t>();
    if (covered_[p]) {  // the search index answers exactly
      ValueIndex::Candidates exact;
      exact.exact = true;
      if (search_) {
        ZIPG_RETURN_IF_ERROR(search_->Find(value, SearchMatch::kExact, static_cast<uint32_t>(p),
                                           UINT64_MAX, &exact.records));
      }
      terms.push_back(std::move(exact));
    } else {
      terms.push_back(values_->Find(static_cast<uint32_t>(p), value));
    }
    if (terms.back().records.empty()) return std::vector<int64_t>();
    if (!terms.back().exact) to_verify.emplace_back(name, value);
  }
  std::sort(terms.begin(), terms.end(),
            [](const auto& a, const auto& b) { return a.records.size() < b.records.size(); });
  std::vector<uint32_t> records = std::move(terms[0].records);
  for (size_t t = 1; t < terms.size() && !records.empty(); ++t) {
    std::vector<uint32_t> kept;
    std::set_intersection(records.begin(), records.end(), terms[t].records.begin(),
                          terms[t].records.end(), std::back_inserter(kept));
    records = std::move(kept);
  }
  std::vector<int64_t> ids;
  ids.reserve(records.size());
  for (uint32_t r : records) {
    if (r >= ids_.size()) return Status::Corruption("node value index: record out of range");
    if (!to_verify.empty()) {
      ZIPG_ASSIGN_OR_RETURN(bool ok, Matches(ids_[r], to_verify));
      if (!ok) continue;
    }
    ids.push_back(ids_[r]);
  }
  return ids;
}

StatusOr<std::vector<int64_t>> NodeFile::SuffixFileIds(const Properties& match) const {
  struct Term {
    std::string pattern;
    uint64_t count;
    size_t filter_index;
  };
  std::vector<Term> terms;
  for (size_t i = 0; i < match.size(); ++i) {
    const int p = PropertyNumber(match[i].first);
    const std::string& value = match[i].second;
    if (p < 0 || !IsValueText(value)) {
      return std::vector<int64_t>();  // no stored value can equal it
    }
    Term term{std::string(), 0, i};
    PutDelimiter(&term.pattern, p);
    term.pattern.append(value);
    term.pattern.push_back(static_cast<char>(kValueEnd));
    ZIPG_ASSIGN_OR_RETURN(term.count, suffix_->Count(term.pattern));
    if (term.count == 0) return std::vector<int64_t>();
    terms.push_back(std::move(term));
  }
  std::sort(terms.begin(), terms.end(),
            [](const Term& a, const Term& b) { return a.count < b.count; });
  auto ids_of = [&](const Term& term) -> StatusOr<std::vector<int64_t>> {
    ZIPG_ASSIGN_OR_RETURN(std::vector<uint64_t> hits, suffix_->Search(term.pattern));
    std::vector<int64_t> ids;
    ids.reserve(hits.size());
    for (uint64_t hit : hits) {
      auto it = std::upper_bound(offsets_.begin(), offsets_.end(), hit);
      if (it == offsets_.begin() || it == offsets_.end()) {
        return Status::Corruption("node text: a search hit lies outside every record");
      }
      ids.push_back(ids_[it - offsets_.begin() - 1]);
    }
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());  // hits ascend, so ids do
    return ids;
  };
  ZIPG_ASSIGN_OR_RETURN(std::vector<int64_t> result, ids_of(terms[0]));
  // Each further term either locates its own hits and intersects, or, when the candidates are
  // few next to its hits, checks the candidates' values directly (header + value extraction).
  for (size_t t = 1; t < terms.size() && !result.empty(); ++t) {
    std::vector<int64_t> kept;
    if (result.size() * 4 < terms[t].count) {
      const Properties single{match[terms[t].filter_index]};
      for (int64_t id : result) {
        ZIPG_ASSIGN_OR_RETURN(bool ok, Matches(id, single));
        if (ok) kept.push_back(id);
      }
    } else {
      ZIPG_ASSIGN_OR_RETURN(std::vector<int64_t> other, ids_of(terms[t]));
      std::set_intersection(result.begin(), result.end(), other.begin(), other.end(),
                            std::back_inserter(kept));
    }
    result = std::move(kept);
  }
  return result;
}

StatusOr<std::vector<int64_t>> NodeFile::SearchValues(std::string_view pattern, SearchMatch match,
                                                      const std::string* property,
                                                      uint64_t max_hits) const {
  std::vector<bool> scan(names_.size(), false);  // properties without an index, to read
  bool indexed = false;                          // some property to search has an index
  std::optional<uint32_t> number;                // `property`'s
  for (size_t p = 0; p < names_.size(); ++p) {
    if (property != nullptr && names_[p] != *property) continue;
    if (property != nullptr) number = static_cast<uint32_t>(p);
    if (covered_[p]) {
      indexed = true;
    } else {
      scan[p] = true;
    }
  }
  if (property != nullptr && !number) return std::vector<int64_t>();  // no such property here
  std::vector<uint32_t> records;
  if (indexed && search_) {
    // Locating walks up to sample_rate LF steps per occurrence (about 0.3 us each); reading
    // every value costs about 4 ns per byte of text. A pattern with more occurrences than
    // that trade-off allows is answered by reading the values instead (docs/search.md, "Cost
    // model"); past max_hits, the index refuses it as before.
    const bool locates = match == SearchMatch::kContains || match == SearchMatch::kSuffix;
    const uint64_t occurrences = locates ? search_->Count(pattern, match, number) : 0;
    if (locates && occurrences <= max_hits &&
        occurrences * kScanBytesPerOccurrence > text_->size()) {
      for (size_t p = 0; p < names_.size(); ++p) {
        if (covered_[p] && (property == nullptr || number == p)) scan[p] = true;
      }
    } else {
      ZIPG_RETURN_IF_ERROR(search_->Find(pattern, match, number, max_hits, &records));
    }
  }
  std::vector<int64_t> ids;
  ids.reserve(records.size());
  for (uint32_t r : records) {
    if (r >= ids_.size()) return Status::Corruption("node search index: record out of range");
    ids.push_back(ids_[r]);
  }
  if (std::find(scan.begin(), scan.end(), true) != scan.end()) {
    ZIPG_ASSIGN_OR_RETURN(auto scanned, ScanValues(pattern, match, scan));
    std::vector<int64_t> both;
    std::set_union(ids.begin(), ids.end(), scanned.begin(), scanned.end(),
                   std::back_inserter(both));
    ids = std::move(both);
  }
  return ids;
}

StatusOr<std::vector<int64_t>> NodeFile::ScanValues(std::string_view pattern, SearchMatch match,
                                                    const std::vector<bool>& wanted) const {
  const auto deadline = CallDeadline::Current();
  std::vector<int64_t> ids;
  std::string chunk;
  const size_t n = ids_.size();
  for (size_t first = 0; first < n;) {
    if (deadline && CallDeadline::Clock::now() > *deadline) {
      return Status::DeadlineExceeded("search: the call's deadline passed while reading values");
    }
    size_t last = first + 1;
    while (last < n && offsets_[last + 1] - offsets_[first] <= kScanChunkBytes) ++last;
    chunk.clear();
    ZIPG_RETURN_IF_ERROR(text_->Extract(offsets_[first], offsets_[last] - offsets_[first], &chunk));
    for (size_t i = first; i < last; ++i) {
      bool hit = false;
      ZIPG_RETURN_IF_ERROR(ForEachValue(
          std::string_view(chunk).substr(offsets_[i] - offsets_[first],
                                         offsets_[i + 1] - offsets_[i]),
          [&](uint32_t p, std::string_view value) {
            hit = hit || (p < wanted.size() && wanted[p] && ValueMatches(value, pattern, match));
          }));
      if (hit) ids.push_back(ids_[i]);
    }
    first = last;
  }
  return ids;
}

std::vector<ComponentSize> NodeFile::Breakdown() const {
  std::vector<ComponentSize> parts;
  for (auto& part : text_->Breakdown()) parts.push_back({"text." + part.name, part.bytes});
  const uint64_t values = values_ ? values_->SizeInBytes() : 0;
  parts.push_back({"index", index_bytes_ - values});
  if (values_) parts.push_back({"value_index", values});
  if (format_ >= 3) parts.push_back({"search_index", search_bytes_});
  return parts;
}

uint64_t NodeFile::SizeInBytes() const {
  return text_->SizeInBytes() + index_bytes_ + search_bytes_;
}

}  // namespace zipg::layout
