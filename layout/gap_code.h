// GapCode: the code for the gaps between consecutive Psi values of one column.
//
// A gap x >= 1 with z = floor(log2 x) is written as a prefix code for z, then the low z bits of x
// (LSB first). The prefix code is a canonical Huffman code over z, built per column from the
// column's own gap statistics and limited to kMaxCodeLength bits, so one table lookup on the next
// kMaxCodeLength bits of the stream yields z. Codewords are complemented, so the shortest one is
// all ones: when z = 0 (gap 1) has a 1-bit code, that code is the bit 1 and a run of one bits is a
// run of gaps of 1 (decoded at once).
//
// Compared with Elias-gamma (whose prefix for z is unary), this saves about 10% of the gap bits on
// text-like data (docs/compressed-file.md has the measurements).
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "util/status.h"

namespace zipg::layout {

class BitWriter;

class GapCode {
 public:
  static constexpr uint32_t kMaxCodeLength = 10;
  static constexpr uint32_t kSymbols = 64;  // z in [0, 63]
  // Code lengths, one per z (0 = z never occurs); what the file stores for each column.
  using Lengths = std::array<uint8_t, kSymbols>;

  // Length-limited Huffman code lengths for the given counts of each z.
  static Lengths BuildLengths(const std::array<uint64_t, kSymbols>& counts);

  // Builds the encoder/decoder for `lengths`; CORRUPTION if they are not a valid prefix code.
  static StatusOr<GapCode> FromLengths(const Lengths& lengths);

  // Appends gap x (>= 1) to `out`; x's z must have a code.
  void Encode(uint64_t x, BitWriter* out) const;
  // Writes gap x (>= 1) at bit *pos of `words`, which must be zero there and long enough, and
  // advances *pos. For writing several columns' gap streams into one buffer at once.
  void EncodeAt(uint64_t x, uint64_t* words, uint64_t* pos) const;
  // Bits that Encode writes for a gap x with floor(log2 x) = z.
  uint32_t CodedBits(uint32_t z) const { return lengths_[z] + z; }

  // Decoding table entry for the next kMaxCodeLength stream bits: z | code length << 6; 0 if
  // invalid.
  uint16_t Lookup(uint64_t bits) const { return table_[bits & ((1u << kMaxCodeLength) - 1)]; }
  // True if gap 1 is coded as the single bit 1, so runs of one bits are runs of gaps of 1.
  bool ones_are_unit_gaps() const { return ones_are_unit_gaps_; }

 private:
  std::array<uint16_t, 1u << kMaxCodeLength> table_{};
  std::array<uint16_t, kSymbols> code_{};  // bit-reversed complemented codeword, ready to append
  Lengths lengths_{};
  bool ones_are_unit_gaps_ = false;
};

}  // namespace zipg::layout
