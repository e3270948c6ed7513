// SuffixIndex: where a byte pattern occurs inside the node property values of a NodeFile,
// answered on a compressed suffix structure without decompressing any value (issue 28;
// docs/search.md).
//
// A key is a distinct (value, property) pair. The keys, sorted by value then property, are laid
// out as one text
//     { S value E d(property) } x keys
// with the bytes of a value shifted up by 3 (values are UTF-8, so no value byte is above 0xF4),
// S = 2, E = 1, and d(p) the property number in `digits` base-8 digits 0xF8..0xFF (big-endian,
// fixed width). A search is one backward search: `S p` finds the values starting with p (prefix),
// `p E` those ending with it (suffix), `S p E` those equal to it (exact), `p` every occurrence
// (contains); with a property, suffix and exact end in `E d(property)` and so count only that
// property's values. The text is held as an FM-index: the Burrows-Wheeler transform of text +
// sentinel in a Huffman-shaped wavelet tree of RRR bit vectors (sdsl-lite), and the counts C: 2
// ranks per pattern byte, however many occurrences there are.
//
// Locating turns an occurrence (a row of the suffix array) into the records holding its key:
//  * rows that start with S are the keys in order (E sorts below every value byte, so a value
//    sorts before its extensions, and the digits sort by property): row C[S] + k is key k. A
//    prefix or exact search ends on such rows and locates nothing.
//  * any other row walks backwards (LF) until it reaches its key's S row, or a sampled row: every
//    `sample_rate`-th byte of a value is sampled, with its key's number. A hit costs at most
//    sample_rate steps.
//  * the keys' properties, in key order, are a wavelet tree over property numbers: prefix and
//    exact searches with a property select that property's keys in their S-row range (rank and
//    select, no scan); a located key's property is one access.
//  * key k's records are its posting list: ascending record numbers (fixed width), whose starts
//    are marked in an Elias-Fano bit vector.
// A contains search with a property locates every occurrence and keeps those of its property.
//
// Thread-safety: immutable once built or decoded; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/search.h"
#include "util/status.h"

namespace zipg::layout {

struct SuffixIndexOptions {
  // One byte in sample_rate of every value carries its value's number: a located hit walks at
  // most this many steps. Larger: smaller index, slower contains/suffix searches. Default 32.
  uint32_t sample_rate = 32;

  Status Validate() const;
};

class SuffixIndex {
 public:
  // Collects (property, value, record) triples, then encodes the index.
  class Builder {
   public:
    // `value` must stay valid until Finish and be UTF-8 text (no byte above 0xF4).
    void Add(uint32_t property, std::string_view value, uint32_t record) {
      entries_.push_back({value, property, record});
    }
    size_t size() const { return entries_.size(); }
    // The encoded index over records [0, num_records) and properties [0, num_properties);
    // INVALID_ARGUMENT for a value byte above 0xF4, or a record or property out of range.
    StatusOr<std::string> Finish(uint32_t num_records, uint32_t num_properties,
                                 const SuffixIndexOptions& options);
    // Bytes held while building, per value (its entry: a view and two numbers) and per byte of
    // value text (the mapped text, the 32-bit suffix array, the BWT beside it, the samples), for
    // memory planning. Measured: a 1M-node graph's two shards built at once peaked at 5.1 GiB.
    static constexpr uint64_t kBuildBytesPerValue = 24;
    static constexpr uint64_t kBuildBytesPerTextByte = 8;

   private:
    struct Entry {
      std::string_view value;
      uint32_t property;
      uint32_t record;
    };
    std::vector<Entry> entries_;
  };

  // Decodes what Builder::Finish wrote for `num_records` records; CORRUPTION naming `where`.
  static StatusOr<std::unique_ptr<SuffixIndex>> Decode(std::string_view bytes, uint32_t num_records,
                                                       const std::string& where);
  ~SuffixIndex();

  // Occurrences of the pattern: for `contains`, every position in every key (of any property;
  // `property` is not applied); otherwise the matching keys (of `property` if given).
  // O(|pattern|) rank operations (and, for a prefix with a property, two more ranks).
  uint64_t Count(std::string_view pattern, SearchMatch match,
                 std::optional<uint32_t> property = std::nullopt) const;

  // The records holding a value (of `property`, or any) that matches, ascending and distinct.
  // Locating stops with RESOURCE_EXHAUSTED once more than `max_hits` occurrences would be
  // located, and with DEADLINE_EXCEEDED when the thread's call deadline passes.
  Status Find(std::string_view pattern, SearchMatch match, std::optional<uint32_t> property,
              uint64_t max_hits, std::vector<uint32_t>* records) const;

  uint64_t num_keys() const;    // distinct (value, property) pairs
  uint64_t text_bytes() const;  // bytes of the indexed text, delimiters included
  uint64_t SizeInBytes() const { return encoded_bytes_; }
  // Named parts of the encoding: "header", "bwt", "samples", "properties", "postings".
  struct Part {
    std::string name;
    uint64_t bytes;
  };
  std::vector<Part> Breakdown() const;

 private:
  struct Rep;
  explicit SuffixIndex(std::unique_ptr<Rep> rep);
  // The rows [*begin, *end) of the suffixes that start with the mapped pattern (with the
  // delimiters `match` and `property` add); false if none.
  bool Range(std::string_view pattern, SearchMatch match, std::optional<uint32_t> property,
             uint64_t* begin, uint64_t* end) const;

  std::unique_ptr<Rep> rep_;
  uint64_t encoded_bytes_ = 0;
};

}  // namespace zipg::layout
