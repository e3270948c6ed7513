// Fixed-width little-endian encoding of integers, the byte order of every on-disk format here.
//
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

namespace zipg {

static_assert(
    std::endian::native == std::endian::little,
    "on-disk formats are little-endian and read in place; big-endian hosts are unsupported");

inline void PutFixed32(std::string* dst, uint32_t v) {
  dst->append(reinterpret_cast<char*>(&v), 4);
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  dst->append(reinterpret_cast<char*>(&v), 8);
}

inline uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t DecodeFixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void EncodeFixed32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void EncodeFixed64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace zipg
