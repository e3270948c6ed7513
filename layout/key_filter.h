// KeyFilter: a blocked Bloom filter over 64-bit key hashes, answering "certainly absent" or
// "maybe present". Each key sets kProbes bits inside one 512-bit block (one cache line), chosen
// by the hash, so a query reads one cache line (Putze, Sanders, Singler: cache-efficient Bloom
// filters). At kBitsPerKey = 10 the false-positive rate is about 1%; there are no false
// negatives.
//
// The EdgeFile keeps one over its (src, type, dst) keys, so that a write of a new edge, the common
// case, need not search the compressed text to learn that the edge is not there
// (docs/writes.md, "Edge-key filters").
//
// Encoding (little-endian): Fixed32 probes, Fixed64 blocks, then blocks x 64 bytes of bits.
//
// Thread-safety: a built filter is immutable; MayContain may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout/side_file.h"
#include "util/status.h"

namespace zipg::layout {

class KeyFilter {
 public:
  static constexpr uint32_t kBitsPerKey = 10;
  static constexpr uint32_t kProbes = 6;
  static constexpr uint32_t kBlockBits = 512;

  // An empty filter with room for `keys` keys (at least one block).
  explicit KeyFilter(uint64_t keys);

  void Add(uint64_t hash);
  bool MayContain(uint64_t hash) const;

  void EncodeTo(std::string* dst) const;
  // Reads what EncodeTo wrote; CORRUPTION (with `what` in the message) if it is malformed.
  static StatusOr<KeyFilter> Decode(PayloadReader* reader, const std::string& what);

  uint64_t blocks() const { return words_.size() / kWords; }
  uint64_t SizeInBytes() const { return words_.size() * 8; }

 private:
  static constexpr uint32_t kWords = kBlockBits / 64;
  KeyFilter() = default;
  std::vector<uint64_t> words_;
};

// The hash of an edge key, as EdgeFile's filter stores it.
uint64_t EdgeKeyHash(int64_t src, int64_t type, int64_t dst);

}  // namespace zipg::layout
