// Small uncompressed companion files (node id tables, property names): an 8-byte magic, a format
// version, the payload length, the payload, and an XXH3-64 checksum of everything before it, all
// little-endian. Written atomically; read whole into memory and checked.
//
// Thread-safety: reentrant functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace zipg::layout {

// `magic` must be exactly 8 bytes.
Status WriteSideFile(const std::string& path, std::string_view magic, uint32_t version,
                     std::string_view payload);

// The payload; CORRUPTION naming the file for a wrong magic, version, length or checksum.
StatusOr<std::string> ReadSideFile(const std::string& path, std::string_view magic,
                                   uint32_t version);
// The same for a file of any version in [min_version, max_version]; *version is the file's.
StatusOr<std::string> ReadSideFile(const std::string& path, std::string_view magic,
                                   uint32_t min_version, uint32_t max_version,
                                   uint32_t* version);

// Sequential reader of a payload; every Get returns false once the payload is exhausted.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view payload) : rest_(payload) {}
  bool GetFixed32(uint32_t* v);
  bool GetFixed64(uint64_t* v);
  bool GetString(std::string* s);  // a Fixed32 length, then the bytes
  bool GetBytes(size_t n, std::string_view* s);
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};
void PutLengthPrefixed(std::string* dst, std::string_view s);

}  // namespace zipg::layout
