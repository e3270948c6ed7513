// The CSV record reader of csv.h: a byte loop driven by lookup tables (no per-byte calls), with
// UTF-8 validated inline whenever a byte >= 0x80 is met.

#include "graph/csv.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <utility>

namespace zipg::graph {
namespace {

inline uint8_t Byte(const char* p) { return static_cast<uint8_t>(*p); }

// Bytes that end a run of plain bytes in an unquoted field: the delimiters, a quote (an error
// there) and every non-ASCII byte (to be validated).
constexpr std::array<bool, 256> MakeStopTable(bool quoted) {
  std::array<bool, 256> t{};
  for (int b = 0x80; b < 256; ++b) t[b] = true;
  t['"'] = true;
  if (!quoted) t[','] = t['\n'] = t['\r'] = true;
  return t;
}
constexpr std::array<bool, 256> kUnquotedStop = MakeStopTable(false);
constexpr std::array<bool, 256> kQuotedStop = MakeStopTable(true);

// "0xAB", or "AB" without the prefix.
std::string Hex(uint8_t b, bool prefix = true) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), prefix ? "0x%02X" : "%02X", b);
  return buf;
}

// Why the bytes at `p` are not valid UTF-8 (Utf8SequenceLength(p, end) == 0).
std::string DescribeInvalidUtf8(const char* p, const char* end) {
  const uint8_t b0 = Byte(p);
  if (b0 >= 0x80 && b0 < 0xC0) return "unexpected continuation byte " + Hex(b0);
  if (b0 == 0xC0 || b0 == 0xC1) return "byte " + Hex(b0) + " never appears in UTF-8 (overlong)";
  if (b0 >= 0xF5) return "byte " + Hex(b0) + " never appears in UTF-8";
  const int length = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  const std::string starts =
      "byte " + Hex(b0) + " starts a " + std::to_string(length) + "-byte sequence but ";
  for (int i = 1; i < length; ++i) {
    if (p + i >= end) return starts + "the input ends after " + std::to_string(i) + " byte(s)";
    const uint8_t b = Byte(p + i);
    if (b < 0x80 || b > 0xBF) return starts + "is followed by " + Hex(b);
    if (i == 1) {
      const std::string pair = "bytes " + Hex(b0) + " " + Hex(b);
      if (b0 == 0xE0 && b < 0xA0) return pair + " start an overlong encoding";
      if (b0 == 0xF0 && b < 0x90) return pair + " start an overlong encoding";
      if (b0 == 0xED && b > 0x9F) return pair + " start a UTF-16 surrogate (U+D800 to U+DFFF)";
      if (b0 == 0xF4 && b > 0x8F) return pair + " start a code point above U+10FFFF";
    }
  }
  return "unknown problem";  // not reached when Utf8SequenceLength(p, end) == 0
}

}  // namespace

size_t Utf8SequenceLength(const char* p, const char* end) {
  const uint8_t b0 = Byte(p);
  if (b0 < 0x80) return 1;
  const size_t avail = static_cast<size_t>(end - p);
  auto cont = [&](size_t i) { return i < avail && (Byte(p + i) & 0xC0) == 0x80; };
  if (b0 < 0xC2) return 0;  // a continuation byte, or an overlong lead byte (C0, C1)
  if (b0 < 0xE0) return cont(1) ? 2 : 0;
  if (b0 < 0xF0) {
    if (!cont(1) || !cont(2)) return 0;
    const uint8_t b1 = Byte(p + 1);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (b0 < 0xF5) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const uint8_t b1 = Byte(p + 1);
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

TextPosition PositionOf(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  TextPosition pos;
  pos.line = 1 + static_cast<uint64_t>(std::count(text.begin(), text.begin() + offset, '\n'));
  const size_t newline = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  if (line_start == 0 && text.starts_with(kByteOrderMark) && offset >= kByteOrderMark.size()) {
    line_start = kByteOrderMark.size();
  }
  for (size_t i = line_start; i < offset; ++i) {
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) ++pos.column;
  }
  return pos;
}

std::string QuoteForMessage(std::string_view value, size_t max_bytes) {
  std::string out = "\"";
  const char* p = value.data();
  const char* const end = p + value.size();
  while (p < end) {
    const uint8_t b = Byte(p);
    size_t n = b < 0x80 ? 1 : Utf8SequenceLength(p, end);
    if (static_cast<size_t>(p - value.data()) + std::max<size_t>(n, 1) > max_bytes) break;
    if (n == 0) {
      out += "\\x" + Hex(b, false);
      n = 1;
    } else if (b == '"' || b == '\\') {
      out += '\\';
      out += static_cast<char>(b);
    } else if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7F) {
      out += "\\x" + Hex(b, false);
    } else {
      out.append(p, n);
    }
    p += n;
  }
  out += '"';
  if (p < end) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

CsvReader::CsvReader(std::string name, std::string_view text)
    : name_(std::move(name)),
      begin_(text.data()),
      end_(text.data() + text.size()),
      pos_(text.data()) {
  if (text.starts_with(kByteOrderMark)) pos_ += kByteOrderMark.size();
}

Status ErrorAtOffset(const std::string& name, std::string_view text, size_t offset,
                     std::string_view what) {
  const TextPosition pos = PositionOf(text, offset);
  std::string message = name;
  message += ':';
  message += std::to_string(pos.line);
  message += ':';
  message += std::to_string(pos.column);
  message += ": ";
  message += what;
  return Status::InvalidArgument(std::move(message));
}

Status CsvReader::ErrorAt(size_t offset, std::string_view what) const {
  return ErrorAtOffset(name_, text(), offset, what);
}

Status CsvReader::InvalidUtf8(const char* p) const {
  return ErrorAt(static_cast<size_t>(p - begin_), "invalid UTF-8: " + DescribeInvalidUtf8(p, end_));
}

Status CsvReader::BadCarriageReturn(const char* p) const {
  return ErrorAt(static_cast<size_t>(p - begin_),
                 "expected a line feed after the carriage return (a field holding a carriage "
                 "return must be quoted)");
}

Status CsvReader::ReadRecord(std::vector<CsvField>* fields) {
  fields->clear();
  unescaped_.clear();
  pending_.clear();
  const char* const end = end_;
  const char* p = pos_;
  while (p < end) {  // blank lines hold no record
    if (*p == '\n') {
      ++p;
    } else if (*p == '\r' && p + 1 < end && p[1] == '\n') {
      p += 2;
    } else {
      break;
    }
  }
  if (p == end) {
    pos_ = p;
    return Status::OK();
  }
  while (true) {  // one field per iteration; p is at its first byte
    const char* const start = p;
    const size_t start_offset = static_cast<size_t>(start - begin_);
    if (p < end && *p == '"') {
      const char* segment = ++p;  // bytes not yet copied to `unescaped_` (when escaped)
      const size_t unescaped_begin = unescaped_.size();
      bool escaped = false;
      while (true) {
        while (p < end && !kQuotedStop[Byte(p)]) ++p;
        if (p == end) {
          return ErrorAt(start_offset,
                         "unterminated quoted field: the quote opened here is never closed");
        }
        if (Byte(p) >= 0x80) {
          const size_t n = Utf8SequenceLength(p, end);
          if (n == 0) return InvalidUtf8(p);
          p += n;
          continue;
        }
        if (p + 1 < end && p[1] == '"') {  // "" stands for one quote
          unescaped_.append(segment, p + 1);
          p += 2;
          segment = p;
          escaped = true;
          continue;
        }
        break;  // the closing quote
      }
      if (escaped) {
        unescaped_.append(segment, p);
        pending_.push_back({fields->size(), unescaped_begin, unescaped_.size() - unescaped_begin});
        fields->push_back({std::string_view(), start_offset});
      } else {
        fields->push_back(
            {std::string_view(segment, static_cast<size_t>(p - segment)), start_offset});
      }
      ++p;
      if (p < end && *p != ',' && *p != '\n' && *p != '\r') {
        const size_t n = std::max<size_t>(Utf8SequenceLength(p, end), 1);
        return ErrorAt(static_cast<size_t>(p - begin_),
                       "expected a comma or a line end after the closing quote, found " +
                           QuoteForMessage(std::string_view(p, n)));
      }
    } else {
      while (true) {
        while (p < end && !kUnquotedStop[Byte(p)]) ++p;
        if (p < end && Byte(p) >= 0x80) {
          const size_t n = Utf8SequenceLength(p, end);
          if (n == 0) return InvalidUtf8(p);
          p += n;
          continue;
        }
        break;
      }
      if (p < end && *p == '"') {
        return ErrorAt(static_cast<size_t>(p - begin_),
                       "unexpected quote in an unquoted field (a field holding quotes must be "
                       "quoted and its quotes doubled)");
      }
      fields->push_back({std::string_view(start, static_cast<size_t>(p - start)), start_offset});
    }
    // p is past the field: at a comma, a line ending or the end of the input.
    if (p < end && *p == ',') {
      ++p;
      continue;
    }
    record_end_ = static_cast<size_t>(p - begin_);
    if (p == end) break;
    if (*p == '\n') {
      ++p;
      break;
    }
    if (p + 1 < end && p[1] == '\n') {  // *p == '\r'
      p += 2;
      break;
    }
    return BadCarriageReturn(p);
  }
  pos_ = p;
  for (const Pending& e : pending_) {
    (*fields)[e.field].value = std::string_view(unescaped_.data() + e.offset, e.size);
  }
  return Status::OK();
}

}  // namespace zipg::graph
