#include "layout/gap_code.h"

#include <algorithm>
#include <bit>
#include <queue>

#include "layout/bits.h"

namespace zipg::layout {
namespace {

// Huffman code lengths (unlimited) for the nonzero counts.
GapCode::Lengths HuffmanLengths(const std::array<uint64_t, GapCode::kSymbols>& counts) {
  GapCode::Lengths lengths{};
  struct Node {
    uint64_t weight;
    int left, right;  // children, or -1 for a leaf
    int symbol;
  };
  std::vector<Node> nodes;
  using Item = std::pair<uint64_t, int>;  // (weight, node), smallest first; ties by node index
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  for (uint32_t z = 0; z < GapCode::kSymbols; ++z) {
    if (counts[z] == 0) continue;
    heap.push({counts[z], static_cast<int>(nodes.size())});
    nodes.push_back({counts[z], -1, -1, static_cast<int>(z)});
  }
  if (nodes.empty()) return lengths;
  if (nodes.size() == 1) {
    lengths[nodes[0].symbol] = 1;
    return lengths;
  }
  while (heap.size() > 1) {
    auto [wa, a] = heap.top();
    heap.pop();
    auto [wb, b] = heap.top();
    heap.pop();
    heap.push({wa + wb, static_cast<int>(nodes.size())});
    nodes.push_back({wa + wb, a, b, -1});
  }
  // Depth of every leaf, iteratively from the root.
  std::vector<std::pair<int, uint8_t>> stack = {{heap.top().second, 0}};
  while (!stack.empty()) {
    auto [i, depth] = stack.back();
    stack.pop_back();
    if (nodes[i].left < 0) {
      lengths[nodes[i].symbol] = std::max<uint8_t>(depth, 1);
    } else {
      stack.push_back({nodes[i].left, static_cast<uint8_t>(depth + 1)});
      stack.push_back({nodes[i].right, static_cast<uint8_t>(depth + 1)});
    }
  }
  return lengths;
}

}  // namespace

GapCode::Lengths GapCode::BuildLengths(const std::array<uint64_t, kSymbols>& counts) {
  // Flatten the counts until the longest code fits; with at most 64 symbols this ends quickly (all
  // counts equal gives lengths <= 6).
  std::array<uint64_t, kSymbols> c = counts;
  while (true) {
    Lengths lengths = HuffmanLengths(c);
    if (*std::max_element(lengths.begin(), lengths.end()) <= kMaxCodeLength) return lengths;
    for (uint64_t& x : c) {
      if (x != 0) x = x / 2 + 1;
    }
  }
}

StatusOr<GapCode> GapCode::FromLengths(const Lengths& lengths) {
  GapCode code;
  code.lengths_ = lengths;
  // Kraft sum in units of 2^-kMaxCodeLength must not exceed 1.
  uint64_t kraft = 0;
  for (uint8_t l : lengths) {
    if (l > kMaxCodeLength) return Status::Corruption("gap code length above the limit");
    if (l != 0) kraft += 1ull << (kMaxCodeLength - l);
  }
  if (kraft > (1ull << kMaxCodeLength))
    return Status::Corruption("gap code lengths are not a prefix code");

  // Canonical assignment: by (length, symbol), consecutive codewords.
  std::vector<uint32_t> order;
  for (uint32_t z = 0; z < kSymbols; ++z) {
    if (lengths[z] != 0) order.push_back(z);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return lengths[a] < lengths[b]; });
  uint32_t next = 0, prev_len = order.empty() ? 0 : lengths[order[0]];
  for (uint32_t z : order) {
    uint32_t l = lengths[z];
    next <<= (l - prev_len);
    prev_len = l;
    // Complement (so the first code is all ones) and reverse (the stream is read LSB first).
    uint32_t cw = ~next & ((1u << l) - 1);
    uint32_t rev = 0;
    for (uint32_t i = 0; i < l; ++i) rev |= ((cw >> (l - 1 - i)) & 1u) << i;
    code.code_[z] = static_cast<uint16_t>(rev);
    for (uint32_t hi = 0; hi < (1u << (kMaxCodeLength - l)); ++hi) {
      code.table_[rev | (hi << l)] = static_cast<uint16_t>(z | (l << 6));
    }
    ++next;
  }
  code.ones_are_unit_gaps_ = lengths[0] == 1 && code.code_[0] == 1;

  return code;
}

void GapCode::Encode(uint64_t x, BitWriter* out) const {
  uint32_t z = 63 - static_cast<uint32_t>(std::countl_zero(x));
  out->Append(code_[z], lengths_[z]);
  out->Append(x & LowMask(z), z);
}

void GapCode::EncodeAt(uint64_t x, uint64_t* words, uint64_t* pos) const {
  const uint32_t z = 63 - static_cast<uint32_t>(std::countl_zero(x));
  const uint32_t len = lengths_[z];
  sdsl::bits::write_int(words + (*pos >> 6), code_[z], static_cast<uint8_t>(*pos & 63),
                        static_cast<uint8_t>(len));
  *pos += len;
  if (z != 0) {
    sdsl::bits::write_int(words + (*pos >> 6), x & LowMask(z), static_cast<uint8_t>(*pos & 63),
                          static_cast<uint8_t>(z));
    *pos += z;
  }
}

}  // namespace zipg::layout
