// A strict RFC 4180 CSV record reader over an in-memory (usually mmap'd) buffer, for the graph
// loaders in input.h.
//
// What it accepts:
//   - fields separated by ',' and records by LF or CRLF; the last record may lack a line ending;
//   - quoted fields ("...") holding anything, including ',', CR, LF and quotes written as "";
//   - an optional UTF-8 byte order mark at the very start, which is skipped;
//   - blank lines (nothing between two line endings), which are skipped: they hold no record. A
//     line holding only `""` is a record of one empty field.
// What it rejects, each with the position of the offending byte:
//   - a quote inside an unquoted field, anything but ',' or a line ending after a closing quote,
//     a quoted field that is never closed (reported where it opened);
//   - a carriage return that is not followed by a line feed, outside quotes;
//   - bytes that are not strict UTF-8 (RFC 3629): no overlong forms, no surrogates (U+D800 to
//     U+DFFF), nothing above U+10FFFF. Every other code point, U+0000 included, is kept.
// Values are returned byte-exact (only the quoting is undone).
//
// Positions: errors read "NAME:LINE:COLUMN: message". Lines are 1-based and counted by LF (a CRLF
// is one line ending; a line ending inside a quoted field starts a new line too). Columns are
// 1-based and counted in Unicode code points (characters, as an editor shows them), not bytes; the
// byte order mark is not counted. Positions are computed from byte offsets only when needed (for an
// error), so reading costs nothing for them.
//
// Thread-safety: a CsvReader is a cursor; use one per thread. The free functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace zipg::graph {

// A 1-based line and column (in code points) within a text.
struct TextPosition {
  uint64_t line = 1;
  uint64_t column = 1;
  friend bool operator==(const TextPosition&, const TextPosition&) = default;
};

// The position of byte `offset` of `text` (offset <= text.size()). A leading UTF-8 byte order mark
// is not counted as a column. Costs O(offset): meant for error messages.
TextPosition PositionOf(std::string_view text, size_t offset);

// The UTF-8 byte order mark, which a text may start with.
inline constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

// INVALID_ARGUMENT "NAME:LINE:COLUMN: what" for byte `offset` of `text`.
Status ErrorAtOffset(const std::string& name, std::string_view text, size_t offset,
                     std::string_view what);

// `value` in double quotes for an error message: quotes, backslashes and control characters are
// escaped C-style (\", \\, \n, \r, \t, \xNN), bytes that are not valid UTF-8 as \xNN, and a value
// longer than `max_bytes` is cut (at a character boundary) and ends in "...".
std::string QuoteForMessage(std::string_view value, size_t max_bytes = 64);

// One field of a record.
struct CsvField {
  std::string_view value;  // the unquoted value; valid until the reader's next ReadRecord
  size_t offset = 0;       // byte offset in the text of the field's first byte (its opening quote)
};

class CsvReader {
 public:
  // `name` (usually the file's path) prefixes error messages. `text` must outlive the reader.
  CsvReader(std::string name, std::string_view text);

  // Reads the next record into `fields` (replacing its contents). At the end of the input `fields`
  // is left empty; otherwise it holds at least one field. INVALID_ARGUMENT on malformed input,
  // after which the reader must not be used again.
  [[nodiscard]] Status ReadRecord(std::vector<CsvField>* fields);

  // Bytes of the text consumed so far.
  size_t offset() const { return static_cast<size_t>(pos_ - begin_); }
  // Byte offset just past the last field of the last record read (where its line ending starts).
  size_t record_end() const { return record_end_; }
  const std::string& name() const { return name_; }
  std::string_view text() const { return {begin_, static_cast<size_t>(end_ - begin_)}; }

  // INVALID_ARGUMENT "NAME:LINE:COLUMN: what" for byte `offset` of the text.
  Status ErrorAt(size_t offset, std::string_view what) const;

 private:
  Status InvalidUtf8(const char* p) const;
  Status BadCarriageReturn(const char* p) const;

  std::string name_;
  const char* begin_;
  const char* end_;
  const char* pos_;
  size_t record_end_ = 0;
  // Unescaped values of quoted fields that held "" (all other values are views into the text),
  // and for each such field its index, offset and length in `unescaped_`.
  std::string unescaped_;
  struct Pending {
    size_t field;
    size_t offset;
    size_t size;
  };
  std::vector<Pending> pending_;
};

// Length of the valid UTF-8 sequence starting at `p` (< end), or 0 if it is not valid (see the
// rules at the top). For p[0] < 0x80 it is 1.
size_t Utf8SequenceLength(const char* p, const char* end);

}  // namespace zipg::graph
