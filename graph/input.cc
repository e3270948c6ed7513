// The readers of input.h: nodes and edges CSV on top of CsvReader (csv.h), and a line scanner for
// SNAP edge lists. Each reader maps its file (reads it into memory when it is a pipe), validates
// every row and hands it to its sink; pages already read are given back as it goes. The Load*
// functions collect rows into an InputGraph and change it only when the file loaded completely.

#include "graph/input.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/csv.h"
#include "util/file.h"

namespace zipg::graph {
namespace {

// The progress callback is called each time this many more bytes have been consumed.
constexpr uint64_t kProgressStep = uint64_t{4} << 20;

// A file's bytes: mapped when it is a regular file, read into memory otherwise (a pipe, such as
// the `<(zcat edges.csv.gz)` of a shell).
struct InputText {
  std::unique_ptr<MappedFile> mapped;
  std::string owned;
  std::string_view text() const {
    return mapped ? std::string_view(mapped->data(), mapped->size()) : std::string_view(owned);
  }
  // The reader is at byte `offset`: give back mapped pages well behind it, now and then.
  void Consumed(uint64_t offset) {
    if (!mapped || offset < dropped_ + 2 * kDropStep) return;
    dropped_ = offset - kDropStep;
    mapped->DropPagesBefore(dropped_);
  }

 private:
  static constexpr uint64_t kDropStep = uint64_t{32} << 20;
  uint64_t dropped_ = 0;
};

StatusOr<InputText> ReadInput(const std::string& path) {
  InputText input;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::IOError("cannot open '" + path + "': " + std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) {
    StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path);
    if (!mapped.ok()) return Status::IOError(mapped.status().message());
    input.mapped = std::move(mapped).value();
    input.mapped->AdviseSequential();
  } else {
    StatusOr<std::string> owned = ReadFileToString(path);
    if (!owned.ok()) return Status::IOError(owned.status().message());
    input.owned = std::move(owned).value();
  }
  return input;
}

// Calls a LoadProgress every kProgressStep bytes and once at the end, if it is set.
class ProgressReporter {
 public:
  ProgressReporter(const LoadProgress& progress, uint64_t total)
      : progress_(progress), total_(total), next_(progress ? kProgressStep : kNever) {}
  void Update(uint64_t done) {
    if (done < next_) return;
    Report(done);
    next_ = done + kProgressStep;
  }
  void Finish() {
    if (progress_ && last_ != total_) Report(total_);
  }

 private:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  void Report(uint64_t done) {
    progress_(done, total_);
    last_ = done;
  }
  const LoadProgress& progress_;
  const uint64_t total_;
  uint64_t next_;
  uint64_t last_ = kNever;
};

// True if `text` holds nothing but maybe a byte order mark.
bool IsEmpty(std::string_view text) { return text.empty() || text == kByteOrderMark; }

enum class IntResult { kOk, kNotInteger, kOutOfRange };

// A decimal int64: an optional '-' (if `allow_negative`) and one or more digits, nothing else.
IntResult ParseInt64(std::string_view s, bool allow_negative, int64_t* out) {
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) {
    if (!allow_negative) return IntResult::kNotInteger;
    i = 1;
  }
  if (i == s.size()) return IntResult::kNotInteger;
  const uint64_t limit =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
  uint64_t v = 0;
  bool overflow = false;
  for (; i < s.size(); ++i) {
    const unsigned d = static_cast<unsigned char>(s[i]) - '0';
    if (d > 9) return IntResult::kNotInteger;
    if (v > (limit - d) / 10) overflow = true;  // keep going: a later non-digit is the worse error
    v = v * 10 + d;
  }
  if (overflow) return IntResult::kOutOfRange;
  *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return IntResult::kOk;
}

// "expected an integer WHAT, found "VALUE"" (with why, if it is out of range).
std::string BadInteger(std::string_view what, std::string_view value, IntResult result) {
  std::string m = "expected an integer " + std::string(what) + ", found " + QuoteForMessage(value);
  if (result == IntResult::kOutOfRange) m += " (out of the int64 range)";
  return m;
}

// Parses the int64 field `field` described by `what` ("node id >= 0").
Status ParseIntField(const CsvReader& reader, const CsvField& field, bool allow_negative,
                     std::string_view what, int64_t* out) {
  const IntResult r = ParseInt64(field.value, allow_negative, out);
  if (r == IntResult::kOk) return Status::OK();
  return reader.ErrorAt(field.offset, BadInteger(what, field.value, r));
}

// Checks the header's columns from `first` on as property names (non-empty, distinct from each
// other and from the fixed columns before `first`) and returns them.
Status ReadPropertyNames(const CsvReader& reader, const std::vector<CsvField>& header, size_t first,
                         std::vector<std::string>* names) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (i >= first && header[i].value.empty()) {
      return reader.ErrorAt(header[i].offset, "expected a property name in header column " +
                                                  std::to_string(i + 1) + ", found an empty one");
    }
    for (size_t j = 0; j < i; ++j) {
      if (header[j].value == header[i].value) {
        return reader.ErrorAt(header[i].offset, "duplicate column name " +
                                                    QuoteForMessage(header[i].value) +
                                                    " (also column " + std::to_string(j + 1) + ")");
      }
    }
  }
  names->clear();
  for (size_t i = first; i < header.size(); ++i) names->emplace_back(header[i].value);
  return Status::OK();
}

// Checks that a row has as many fields as the header.
Status CheckWidth(const CsvReader& reader, const std::vector<CsvField>& fields, size_t width) {
  if (fields.size() == width) return Status::OK();
  const std::string what = "expected " + std::to_string(width) +
                           " fields as in the header, found " + std::to_string(fields.size());
  // Too many: point at the first extra field; too few: at the end of the row.
  return reader.ErrorAt(fields.size() > width ? fields[width].offset : reader.record_end(), what);
}

// The non-empty fields from `first` on, as properties indexed from 0.
void TakeProperties(const std::vector<CsvField>& fields, size_t first, PropertyRefs* properties) {
  properties->clear();
  for (size_t i = first; i < fields.size(); ++i) {
    if (!fields[i].value.empty()) {
      properties->emplace_back(static_cast<uint32_t>(i - first), fields[i].value);
    }
  }
}

// A set of ids (all >= 0) by open addressing with linear probing; -1 marks a free slot.
class IdHashSet {
 public:
  // Starts loading the memory that Insert(id) will probe first.
  void Prefetch(int64_t id) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[Slot(id)]);
  }
  // Adds `id`; false if it was already there.
  bool Insert(int64_t id) {
    if ((size_ + 1) * 10 > slots_.size() * 7) Grow();
    for (size_t i = Slot(id);; i = (i + 1) & mask_) {
      if (slots_[i] == id) return false;
      if (slots_[i] < 0) {
        slots_[i] = id;
        ++size_;
        return true;
      }
    }
  }

 private:
  size_t Slot(int64_t id) const {
    return static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void Grow() {
    std::vector<int64_t> old = std::move(slots_);
    const size_t capacity = old.empty() ? 1024 : old.size() * 2;
    slots_.assign(capacity, -1);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    for (int64_t id : old) {
      if (id < 0) continue;
      size_t i = Slot(id);
      while (slots_[i] >= 0) i = (i + 1) & mask_;
      slots_[i] = id;
    }
  }

  std::vector<int64_t> slots_;
  size_t size_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
};

// The node ids of a file, to find duplicates as soon as they occur. While ids arrive in increasing
// order (the usual case) a new id only needs comparing with the last one, and nothing else is
// kept. At the first id out of order the ids so far are read again from the file into a hash set,
// which checks the rest (a random memory access each, about 16 bytes per node).
class NodeIdSet {
 public:
  // Call some work before Insert(id), so that the memory it needs is on its way.
  void Prefetch(int64_t id) const {
    if (!increasing_) hashed_.Prefetch(id);
  }
  // Adds `id`; false if it was added before. `earlier` fills the set with every id added so far
  // (it is called once, at the first id out of order).
  template <typename Earlier>
  bool Insert(int64_t id, const Earlier& earlier) {
    if (increasing_) {
      if (!any_ || id > last_) {
        any_ = true;
        last_ = id;
        return true;
      }
      increasing_ = false;
      earlier(&hashed_);
    }
    return hashed_.Insert(id);
  }

 private:
  bool increasing_ = true, any_ = false;
  int64_t last_ = 0;
  IdHashSet hashed_;
};

// Calls visit(id, offset of the id field) for the data rows of a nodes CSV text that parses
// cleanly up to `end`, in order, until it returns false.
template <typename Visit>
void ForEachNodeId(const std::string& path, std::string_view text, size_t end, Visit visit) {
  CsvReader reader(path, text);
  std::vector<CsvField> fields;
  if (!reader.ReadRecord(&fields).ok()) return;  // the header
  while (reader.offset() < end) {
    if (!reader.ReadRecord(&fields).ok() || fields.empty()) return;
    int64_t id;
    if (ParseInt64(fields[0].value, false, &id) != IntResult::kOk) return;
    if (!visit(id, fields[0].offset)) return;
  }
}

// Collects rows into an InputGraph's vectors (the Load* functions).
class GraphCollector final : public InputSink {
 public:
  Status NodeHeader(const std::vector<std::string>& names) override {
    node_names = names;
    return Status::OK();
  }
  Status Node(int64_t id, const PropertyRefs& properties) override {
    nodes.push_back({id, Copy(properties)});
    return Status::OK();
  }
  Status EdgeHeader(const std::vector<std::string>& names) override {
    edge_names = names;
    return Status::OK();
  }
  Status Edge(int64_t src, int64_t dst, int64_t type, int64_t timestamp,
              const PropertyRefs& properties) override {
    edges.push_back({src, dst, type, timestamp, Copy(properties)});
    return Status::OK();
  }

  std::vector<std::string> node_names, edge_names;
  std::vector<InputNode> nodes;
  std::vector<InputEdge> edges;

 private:
  static IndexedProperties Copy(const PropertyRefs& properties) {
    IndexedProperties out;
    out.reserve(properties.size());
    for (const auto& [index, value] : properties) out.emplace_back(index, std::string(value));
    return out;
  }
};

}  // namespace


StatusOr<uint64_t> ReadNodesCsv(const std::string& path, InputSink* sink,
                              const LoadProgress& progress) {
  ZIPG_ASSIGN_OR_RETURN(InputText input, ReadInput(path));
  const std::string_view text = input.text();
  CsvReader reader(path, text);
  std::vector<CsvField> fields;
  ZIPG_RETURN_IF_ERROR(reader.ReadRecord(&fields));
  if (fields.empty()) {
    return reader.ErrorAt(reader.offset(),
                          "expected a header line id,<property>,..., found " +
                              std::string(IsEmpty(text) ? "an empty file" : "only blank lines"));
  }
  if (fields[0].value != "id") {
    return reader.ErrorAt(fields[0].offset,
                          "expected the header's first column to be \"id\", found " +
                              QuoteForMessage(fields[0].value));
  }
  std::vector<std::string> names;
  ZIPG_RETURN_IF_ERROR(ReadPropertyNames(reader, fields, 1, &names));
  const size_t width = fields.size();
  ZIPG_RETURN_IF_ERROR(sink->NodeHeader(names));

  ProgressReporter reporter(progress, text.size());
  PropertyRefs properties;
  NodeIdSet ids;
  while (true) {
    const size_t row_start = reader.offset();
    ZIPG_RETURN_IF_ERROR(reader.ReadRecord(&fields));
    if (fields.empty()) break;
    ZIPG_RETURN_IF_ERROR(CheckWidth(reader, fields, width));
    int64_t id;
    ZIPG_RETURN_IF_ERROR(ParseIntField(reader, fields[0], false, "node id >= 0", &id));
    ids.Prefetch(id);
    TakeProperties(fields, 1, &properties);
    const bool fresh = ids.Insert(id, [&](IdHashSet* set) {
      ForEachNodeId(path, text, row_start, [&](int64_t earlier, size_t) {
        set->Insert(earlier);
        return true;
      });
    });
    if (!fresh) {
      size_t first = 0;
      ForEachNodeId(path, text, row_start, [&](int64_t earlier, size_t offset) {
        first = offset;
        return earlier != id;
      });
      const uint64_t first_line = PositionOf(text, first).line;
      return reader.ErrorAt(fields[0].offset, "duplicate node id " + std::to_string(id) +
                                                  " (first defined on line " +
                                                  std::to_string(first_line) + ")");
    }
    ZIPG_RETURN_IF_ERROR(sink->Node(id, properties));
    reporter.Update(reader.offset());
    input.Consumed(reader.offset());
  }
  reporter.Finish();
  return text.size();
}

StatusOr<uint64_t> ReadEdgesCsv(const std::string& path, InputSink* sink,
                              const LoadProgress& progress) {
  ZIPG_ASSIGN_OR_RETURN(InputText input, ReadInput(path));
  const std::string_view text = input.text();
  CsvReader reader(path, text);
  std::vector<CsvField> fields;
  ZIPG_RETURN_IF_ERROR(reader.ReadRecord(&fields));
  static constexpr std::string_view kColumns[] = {"src", "dst", "type", "timestamp"};
  constexpr size_t kFixed = std::size(kColumns);
  if (fields.empty()) {
    return reader.ErrorAt(reader.offset(),
                          "expected a header line src,dst,type,timestamp[,<property>...], found " +
                              std::string(IsEmpty(text) ? "an empty file" : "only blank lines"));
  }
  for (size_t i = 0; i < kFixed; ++i) {
    if (i >= fields.size()) {
      return reader.ErrorAt(reader.record_end(),
                            "expected the header to start with src,dst,type,timestamp, found " +
                                std::to_string(fields.size()) + " column(s)");
    }
    if (fields[i].value != kColumns[i]) {
      return reader.ErrorAt(fields[i].offset, "expected header column " + std::to_string(i + 1) +
                                                  " to be \"" + std::string(kColumns[i]) +
                                                  "\", found " + QuoteForMessage(fields[i].value));
    }
  }
  std::vector<std::string> names;
  ZIPG_RETURN_IF_ERROR(ReadPropertyNames(reader, fields, kFixed, &names));
  const size_t width = fields.size();
  ZIPG_RETURN_IF_ERROR(sink->EdgeHeader(names));

  ProgressReporter reporter(progress, text.size());
  PropertyRefs properties;
  while (true) {
    ZIPG_RETURN_IF_ERROR(reader.ReadRecord(&fields));
    if (fields.empty()) break;
    ZIPG_RETURN_IF_ERROR(CheckWidth(reader, fields, width));
    int64_t src, dst, type, timestamp;
    ZIPG_RETURN_IF_ERROR(ParseIntField(reader, fields[0], false, "src >= 0", &src));
    ZIPG_RETURN_IF_ERROR(ParseIntField(reader, fields[1], false, "dst >= 0", &dst));
    ZIPG_RETURN_IF_ERROR(ParseIntField(reader, fields[2], false, "type >= 0", &type));
    ZIPG_RETURN_IF_ERROR(ParseIntField(reader, fields[3], true, "timestamp", &timestamp));
    TakeProperties(fields, kFixed, &properties);
    ZIPG_RETURN_IF_ERROR(sink->Edge(src, dst, type, timestamp, properties));
    reporter.Update(reader.offset());
    input.Consumed(reader.offset());
  }
  reporter.Finish();
  return text.size();
}

StatusOr<uint64_t> ReadSnapEdges(const std::string& path, InputSink* sink,
                              const LoadProgress& progress) {
  ZIPG_ASSIGN_OR_RETURN(InputText input, ReadInput(path));
  const std::string_view text = input.text();
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  ProgressReporter reporter(progress, text.size());
  auto fail = [&](const char* at, const std::string& what) {
    return ErrorAtOffset(path, text, static_cast<size_t>(at - begin), what);
  };
  auto is_blank = [](char c) { return c == ' ' || c == '\t'; };
  // The token at p: up to a blank or a line ending.
  auto token_end = [&](const char* p) {
    while (p < end && !is_blank(*p) && *p != '\n' && *p != '\r') ++p;
    return p;
  };
  static constexpr std::string_view kWhat[] = {"source node id >= 0", "destination node id >= 0"};
  ZIPG_RETURN_IF_ERROR(sink->EdgeHeader({}));
  const PropertyRefs no_properties;

  const char* p = text.starts_with(kByteOrderMark) ? begin + kByteOrderMark.size() : begin;
  while (p < end) {  // one line per iteration
    while (p < end && is_blank(*p)) ++p;
    if (p < end && *p == '#') {
      const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
      p = nl == nullptr ? end : static_cast<const char*>(nl) + 1;
      continue;
    }
    int64_t ids[2];
    int count = 0;
    while (true) {
      // p is after blanks: at a token, a line ending or the end.
      const bool line_end = p == end || *p == '\n' || *p == '\r';
      if (line_end) {
        if (p < end && *p == '\r' && (p + 1 == end || p[1] != '\n')) {
          return fail(p, "expected a line feed after the carriage return");
        }
        if (count == 1) {
          return fail(p,
                      "expected a destination node id after the source node id, found the "
                      "end of the line");
        }
        break;  // a full edge or a blank line
      }
      const char* const t = token_end(p);
      const std::string_view token(p, static_cast<size_t>(t - p));
      if (count == 2) {
        return fail(
            p, "expected the end of the line after \"src dst\", found " + QuoteForMessage(token));
      }
      const IntResult r = ParseInt64(token, false, &ids[count]);
      if (r != IntResult::kOk) return fail(p, BadInteger(kWhat[count], token, r));
      ++count;
      p = t;
      while (p < end && is_blank(*p)) ++p;
    }
    if (count == 2) ZIPG_RETURN_IF_ERROR(sink->Edge(ids[0], ids[1], 0, 0, no_properties));
    if (p < end) p += *p == '\r' ? 2 : 1;
    reporter.Update(static_cast<uint64_t>(p - begin));
    input.Consumed(static_cast<uint64_t>(p - begin));
  }
  reporter.Finish();
  return text.size();
}

Status LoadNodesCsv(const std::string& path, InputGraph* graph, const LoadProgress& progress) {
  if (!graph->nodes.empty() || !graph->node_property_names.empty()) {
    return Status::InvalidArgument("cannot load nodes from '" + path +
                                   "': the graph already holds nodes");
  }
  GraphCollector rows;
  ZIPG_ASSIGN_OR_RETURN(const uint64_t bytes, ReadNodesCsv(path, &rows, progress));
  graph->node_property_names = std::move(rows.node_names);
  graph->nodes = std::move(rows.nodes);
  graph->raw_bytes += bytes;
  return Status::OK();
}

Status LoadEdgesCsv(const std::string& path, InputGraph* graph, const LoadProgress& progress) {
  if (!graph->edge_property_names.empty()) {
    return Status::InvalidArgument("cannot load edges from '" + path +
                                   "': the graph already has edge property names");
  }
  GraphCollector rows;
  ZIPG_ASSIGN_OR_RETURN(const uint64_t bytes, ReadEdgesCsv(path, &rows, progress));
  graph->edge_property_names = std::move(rows.edge_names);
  graph->edges.insert(graph->edges.end(), std::make_move_iterator(rows.edges.begin()),
                      std::make_move_iterator(rows.edges.end()));
  graph->raw_bytes += bytes;
  return Status::OK();
}

Status LoadSnapEdges(const std::string& path, InputGraph* graph, const LoadProgress& progress) {
  GraphCollector rows;
  ZIPG_ASSIGN_OR_RETURN(const uint64_t bytes, ReadSnapEdges(path, &rows, progress));
  graph->edges.insert(graph->edges.end(), std::make_move_iterator(rows.edges.begin()),
                      std::make_move_iterator(rows.edges.end()));
  graph->raw_bytes += bytes;
  return Status::OK();
}

const PropertyRefs& RefsByName(const std::vector<std::string>& names, const Properties& properties,
                               PropertyRefs* refs) {
  refs->clear();
  for (const auto& [name, value] : properties) {
    const auto pos = std::lower_bound(names.begin(), names.end(), name) - names.begin();
    refs->emplace_back(static_cast<uint32_t>(pos), value);
  }
  std::sort(refs->begin(), refs->end());
  return *refs;
}

}  // namespace zipg::graph
