// Bit-level building blocks of the compressed file, all reading in place from 64-bit little-endian
// words (an mmap'd file section) through sdsl-lite's bit routines:
//  * PackedView: an array of `count` unsigned integers of `width` bits each (0..64), packed LSB
//  first;
//  * BitStream: a read-only bit string with 64-bit reads at any bit position;
//  * BitWriter: the build-time counterpart, appending fixed-width fields and Elias-gamma codes.
//
// Elias-gamma code of x >= 1 with z = floor(log2 x), LSB first: z zero bits, a one bit, then the
// low z bits of x. So gamma(1) is the single bit 1, and a run of k ones in the stream is k
// consecutive gaps of 1.
//
// Thread-safety: views are immutable; BitWriter is single-threaded.
#pragma once

#include <bit>
#include <cstdint>
#include <sdsl/bits.hpp>
#include <vector>

namespace zipg::layout {

// Bits needed to write every value in [0, max_value]; at least 1.
inline uint32_t BitsFor(uint64_t max_value) {
  return max_value == 0 ? 1 : 64 - static_cast<uint32_t>(std::countl_zero(max_value));
}

inline uint64_t LowMask(uint32_t bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

struct PackedView {
  const uint64_t* words = nullptr;
  uint64_t count = 0;
  uint32_t width = 0;

  // Words that hold `count` values of `width` bits.
  static uint64_t WordsFor(uint64_t count, uint32_t width) { return (count * width + 63) / 64; }

  uint64_t Get(uint64_t i) const {
    uint64_t bit = i * width;
    return sdsl::bits::read_int(words + (bit >> 6), static_cast<uint8_t>(bit & 63),
                                static_cast<uint8_t>(width));
  }
  // Reads a field of `len` bits at an arbitrary bit position (for records of several fields).
  uint64_t GetBits(uint64_t bit, uint32_t len) const {
    return sdsl::bits::read_int(words + (bit >> 6), static_cast<uint8_t>(bit & 63),
                                static_cast<uint8_t>(len));
  }
};

class BitStream {
 public:
  BitStream() = default;
  // `num_words` includes at least one trailing zero word so that Read64 near the end stays in
  // bounds.
  BitStream(const uint64_t* words, uint64_t num_words) : words_(words), num_words_(num_words) {}

  // The 64 bits starting at bit position `pos`; zero past the end (which a valid stream never
  // reaches).
  void Prefetch(uint64_t pos) const {
    uint64_t w = pos >> 6;
    if (w < num_words_) __builtin_prefetch(words_ + w);
  }

  uint64_t Read64(uint64_t pos) const {
    uint64_t w = pos >> 6;
    uint32_t off = pos & 63;
    if (w + 1 >= num_words_) [[unlikely]] {
      return w < num_words_ ? words_[w] >> off : 0;
    }
    uint64_t lo = words_[w] >> off;
    return off == 0 ? lo : lo | (words_[w + 1] << (64 - off));
  }

 private:
  const uint64_t* words_ = nullptr;
  uint64_t num_words_ = 0;
};

class BitWriter {
 public:
  uint64_t bit_size() const { return bits_; }

  void Append(uint64_t value, uint32_t len) {
    if (len == 0) return;
    Reserve(len);
    sdsl::bits::write_int(words_.data() + (bits_ >> 6), value, static_cast<uint8_t>(bits_ & 63),
                          static_cast<uint8_t>(len));
    bits_ += len;
  }

  void AppendGamma(uint64_t x) {  // x >= 1
    uint32_t z = 63 - static_cast<uint32_t>(std::countl_zero(x));
    if (2 * z + 1 <= 64) {
      Append(((x & LowMask(z)) << (z + 1)) | (1ull << z), 2 * z + 1);
    } else {
      Append(1ull << z, z + 1);
      Append(x & LowMask(z), z);
    }
  }

  // The words, with one zero word of padding after the last written bit.
  std::vector<uint64_t> Finish() {
    words_.resize((bits_ + 63) / 64 + 1, 0);
    return std::move(words_);
  }

 private:
  void Reserve(uint32_t len) {
    uint64_t need = (bits_ + len + 63) / 64 + 1;
    if (words_.size() < need) words_.resize(std::max<uint64_t>(need, words_.size() * 2), 0);
  }
  std::vector<uint64_t> words_;
  uint64_t bits_ = 0;
};

// Packs `values` into words of `width` bits each.
inline std::vector<uint64_t> Pack(const std::vector<uint64_t>& values, uint32_t width) {
  std::vector<uint64_t> words(PackedView::WordsFor(values.size(), width), 0);
  for (uint64_t i = 0; i < values.size(); ++i) {
    uint64_t bit = i * width;
    sdsl::bits::write_int(words.data() + (bit >> 6), values[i], static_cast<uint8_t>(bit & 63),
                          static_cast<uint8_t>(width));
  }
  return words;
}

}  // namespace zipg::layout
