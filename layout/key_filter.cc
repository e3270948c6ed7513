#include "layout/key_filter.h"

#include <algorithm>
#include <cstring>

#include "util/checksum.h"
#include "util/coding.h"

namespace zipg::layout {

namespace {
// The block: the hash's high 32 bits scaled to [0, blocks) (Lemire's fast range).
uint64_t BlockOf(uint64_t hash, uint64_t blocks) { return ((hash >> 32) * blocks) >> 32; }
// The probes: 9-bit fields from the top of a second value mixed from the whole hash, so that
// they are independent of the block's bits.
uint64_t ProbeBits(uint64_t hash) { return hash * 0x9E3779B97F4A7C15ull; }
}  // namespace

KeyFilter::KeyFilter(uint64_t keys) {
  const uint64_t bits = std::max<uint64_t>(keys, 1) * kBitsPerKey;
  words_.assign((bits + kBlockBits - 1) / kBlockBits * kWords, 0);
}

void KeyFilter::Add(uint64_t hash) {
  uint64_t* block = &words_[BlockOf(hash, blocks()) * kWords];
  const uint64_t probes = ProbeBits(hash);
  for (uint32_t i = 0; i < kProbes; ++i) {
    const uint32_t bit = static_cast<uint32_t>(probes >> (64 - 9 * (i + 1))) & (kBlockBits - 1);
    block[bit / 64] |= uint64_t{1} << (bit % 64);
  }
}

bool KeyFilter::MayContain(uint64_t hash) const {
  const uint64_t* block = &words_[BlockOf(hash, blocks()) * kWords];
  const uint64_t probes = ProbeBits(hash);
  for (uint32_t i = 0; i < kProbes; ++i) {
    const uint32_t bit = static_cast<uint32_t>(probes >> (64 - 9 * (i + 1))) & (kBlockBits - 1);
    if ((block[bit / 64] & (uint64_t{1} << (bit % 64))) == 0) return false;
  }
  return true;
}

void KeyFilter::EncodeTo(std::string* dst) const {
  PutFixed32(dst, kProbes);
  PutFixed64(dst, blocks());
  dst->append(reinterpret_cast<const char*>(words_.data()), words_.size() * 8);
}

StatusOr<KeyFilter> KeyFilter::Decode(PayloadReader* reader, const std::string& what) {
  uint32_t probes;
  uint64_t blocks;
  std::string_view bits;
  if (!reader->GetFixed32(&probes) || !reader->GetFixed64(&blocks)) {
    return Status::Corruption(what + ": key filter header cut short");
  }
  if (probes != kProbes || blocks == 0 || blocks > (uint64_t{1} << 32)) {
    return Status::Corruption(what + ": key filter with " + std::to_string(probes) +
                              " probes and " + std::to_string(blocks) + " blocks (expected " +
                              std::to_string(kProbes) + " probes, 1 to 2^32 blocks)");
  }
  if (!reader->GetBytes(blocks * (kBlockBits / 8), &bits)) {
    return Status::Corruption(what + ": key filter of " + std::to_string(blocks) +
                              " blocks cut short");
  }
  KeyFilter filter;
  filter.words_.resize(blocks * kWords);
  std::memcpy(filter.words_.data(), bits.data(), bits.size());
  return filter;
}

uint64_t EdgeKeyHash(int64_t src, int64_t type, int64_t dst) {
  char key[24];
  EncodeFixed64(key, static_cast<uint64_t>(src));
  EncodeFixed64(key + 8, static_cast<uint64_t>(type));
  EncodeFixed64(key + 16, static_cast<uint64_t>(dst));
  return Checksum64(key, sizeof(key));
}

}  // namespace zipg::layout
