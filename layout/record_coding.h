// Byte-level encodings shared by the NodeFile and EdgeFile texts (docs/graph-layout.md).
//
// The texts mix UTF-8 property values with structure. Valid UTF-8 never contains the bytes
// 0xF5..0xFF, so the layout takes exactly those bytes for structure and no value is ever escaped:
//   0xF5        end of a value
//   0xF6..0xFD  lead byte of a property delimiter; the next byte (0x00..0x7F) completes it, so a
//               text has up to 8 * 128 = 1024 distinct property names
//   0xFE        start of an EdgeRecord
//   0xFF        reserved
// Numbers inside records are written with bytes below 0x80 only, so they can never be mistaken
// for structure: self-delimiting "varint6" (6 payload bits per byte, 0x40 = more follows) where
// the reader walks a record sequentially, and fixed-width big-endian base-128 digits where it
// needs random access (EdgeRecord columns).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zipg::layout {

inline constexpr uint8_t kValueEnd = 0xF5;
inline constexpr uint8_t kDelimiterLeadFirst = 0xF6;
inline constexpr uint32_t kMaxProperties = 8 * 128;
inline constexpr uint8_t kEdgeRecordMarker = 0xFE;

// True for bytes that valid UTF-8 can contain, i.e. bytes that may appear inside a value.
inline bool IsValueByte(uint8_t b) { return b < kValueEnd; }
// True if every byte of `s` may appear inside a value (it holds no structure byte).
inline bool IsValueText(std::string_view s) {
  for (char c : s) {
    if (!IsValueByte(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

// (property number, value) pairs as views, ascending by number: a record's properties before they
// are encoded.
using PropertyViews = std::vector<std::pair<uint32_t, std::string_view>>;

// Appends the two-byte delimiter of property number p < kMaxProperties.
inline void PutDelimiter(std::string* dst, uint32_t p) {
  dst->push_back(static_cast<char>(kDelimiterLeadFirst + p / 128));
  dst->push_back(static_cast<char>(p % 128));
}
// The property number of the delimiter at s[0..1], or -1 if s does not start with one.
inline int DecodeDelimiter(std::string_view s) {
  if (s.size() < 2) return -1;
  const uint8_t lead = s[0], low = s[1];
  if (lead < kDelimiterLeadFirst || lead >= kEdgeRecordMarker || low >= 0x80) return -1;
  return (lead - kDelimiterLeadFirst) * 128 + low;
}

// Why a property list cannot be encoded (AppendPropertyList).
enum class ListError { kNone, kBadNumber, kBadValue };

// Appends `{ delimiter(p) value 0xF5 }` for each property. Stops at the first property whose
// number is not ascending or not below `num_names` (kBadNumber), or whose value holds a structure
// byte (kBadValue: not valid UTF-8), and sets *bad to its index.
inline ListError AppendPropertyList(const PropertyViews& properties, size_t num_names,
                                    std::string* dst, size_t* bad) {
  int64_t previous = -1;
  for (size_t i = 0; i < properties.size(); ++i) {
    const auto& [p, value] = properties[i];
    *bad = i;
    if (p >= num_names || static_cast<int64_t>(p) <= previous) return ListError::kBadNumber;
    if (!IsValueText(value)) return ListError::kBadValue;
    previous = p;
    PutDelimiter(dst, p);
    dst->append(value);
    dst->push_back(static_cast<char>(kValueEnd));
  }
  return ListError::kNone;
}

// varint6: little-endian groups of 6 bits; every byte but the last has 0x40 set. At most 11 bytes.
inline void PutVarint6(std::string* dst, uint64_t v) {
  while (v >= 0x40) {
    dst->push_back(static_cast<char>(0x40 | (v & 0x3F)));
    v >>= 6;
  }
  dst->push_back(static_cast<char>(v));
}
// Decodes a varint6 at s[*pos], advancing *pos; false if truncated, overlong or not a varint6.
inline bool GetVarint6(std::string_view s, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 66 && *pos < s.size(); shift += 6) {
    const uint8_t b = s[(*pos)++];
    if (b >= 0x80) return false;
    if (shift == 60 && (b & 0x3F) > 0xF) return false;  // beyond 64 bits
    result |= static_cast<uint64_t>(b & 0x3F) << shift;
    if ((b & 0x40) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

// Signed values as unsigned, small magnitudes small (zigzag).
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t u) { return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1)); }

// Base-128 digits needed for v (0 for v == 0: a column of equal values takes no bytes).
inline uint32_t DigitsFor(uint64_t v) {
  uint32_t w = 0;
  while (v != 0) {
    ++w;
    v >>= 7;
  }
  return w;
}
// Appends v as exactly `width` big-endian base-128 digits (v must fit).
inline void PutDigits(std::string* dst, uint64_t v, uint32_t width) {
  for (uint32_t i = width; i-- > 0;) dst->push_back(static_cast<char>((v >> (7 * i)) & 0x7F));
}
// Reads `width` digits at p; false if a byte is not a digit.
inline bool GetDigits(const char* p, uint32_t width, uint64_t* v) {
  uint64_t result = 0;
  for (uint32_t i = 0; i < width; ++i) {
    const uint8_t b = p[i];
    if (b >= 0x80) return false;
    result = (result << 7) | b;
  }
  *v = result;
  return true;
}

}  // namespace zipg::layout
