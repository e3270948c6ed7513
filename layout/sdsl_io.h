// Helpers shared by the encodings that embed sdsl-lite structures (ValueIndex, SuffixIndex):
// LEB128 varints, and serializing or loading an sdsl structure to or from a byte range.
//
// Thread-safety: free functions over caller-owned data.
#pragma once

#include <cstdint>
#include <sstream>
#include <streambuf>
#include <string>
#include <string_view>

namespace zipg::layout {

// LEB128: 7 bits per byte, high bit = more.
inline void PutVarint(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}
inline bool GetVarint(std::string_view s, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(s[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (b < 0x80) return true;
  }
  return false;
}

// Reads a byte range in place, for sdsl's load (which takes a std::istream).
class ViewBuffer : public std::streambuf {
 public:
  explicit ViewBuffer(std::string_view bytes) {
    char* p = const_cast<char*>(bytes.data());  // only ever read
    setg(p, p, p + bytes.size());
  }
  size_t consumed() const { return static_cast<size_t>(gptr() - eback()); }
};

// An sdsl structure's serialization.
template <typename T>
std::string SerializeSdsl(const T& structure) {
  std::ostringstream out;
  structure.serialize(out);
  return std::move(out).str();
}

// Appends varint(length) and the structure's serialization.
template <typename T>
void PutSdsl(std::string* dst, const T& structure) {
  const std::string bytes = SerializeSdsl(structure);
  PutVarint(dst, bytes.size());
  dst->append(bytes);
}

// Loads what PutSdsl wrote at *pos; false unless the structure used exactly its bytes.
template <typename T>
bool GetSdsl(std::string_view s, size_t* pos, T* structure) {
  uint64_t len;
  if (!GetVarint(s, pos, &len) || len > s.size() - *pos) return false;
  ViewBuffer buffer(s.substr(*pos, len));
  std::istream in(&buffer);
  structure->load(in);
  if (!in || buffer.consumed() != len) return false;
  *pos += len;
  return true;
}

}  // namespace zipg::layout
