// SuffixIndex: where a byte pattern occurs inside the values of one node property, answered on a
// compressed suffix structure without decompressing any value (issue 28; docs/search.md).
//
// The distinct values of the property, sorted, are laid out as one text
//     { S value E } x distinct values
// with the bytes of a value shifted up by 3 (values are UTF-8, so no value byte is above 0xF4)
// and S = 2, E = 1, so that a search for `S p` finds the values starting with p (prefix), `p E`
// those ending with it (suffix), `S p E` the one equal to it (exact), and `p` every occurrence
// (contains). The text is held as an FM-index: the Burrows-Wheeler transform of text + sentinel in
// a Huffman-shaped wavelet tree of RRR bit vectors (sdsl-lite), and the counts C. A search is one
// backward search: 2 ranks per pattern byte, however many occurrences there are.
//
// Locating turns an occurrence (a row of the suffix array) into the records holding its value:
//  * rows that start with S are the distinct values in sorted order (E sorts below every value
//    byte, so a value sorts before its extensions, as in std::string order): row C[S] + k is value
//    k. A prefix or exact search ends on such rows and needs no locating at all.
//  * any other row walks backwards (LF) until it reaches its value's S row, or a sampled row: every
//    `sample_rate`-th byte of a value is sampled, with its value's number. A hit costs at most
//    sample_rate steps.
//  * value k's records are its posting list: ascending record numbers (fixed width), whose starts
//    are marked in an Elias-Fano bit vector.
//
// Thread-safety: immutable once built or decoded; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
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
  // Collects (value, record) pairs, then encodes the index.
  class Builder {
   public:
    // `value` must stay valid until Finish and be valid UTF-8 text (no byte above 0xF4).
    void Add(std::string_view value, uint32_t record) { entries_.push_back({value, record}); }
    size_t size() const { return entries_.size(); }
    // The encoded index over records [0, num_records); INVALID_ARGUMENT for a value byte above
    // 0xF4 or a record out of range.
    StatusOr<std::string> Finish(uint32_t num_records, const SuffixIndexOptions& options);
    // Bytes held while building, per value (its entry, as Added and sorted) and per byte of
    // value text (the mapped text, the suffix array, the BWT, the wavelet tree being built), for
    // memory planning.
    static constexpr uint64_t kBuildBytesPerValue = 24;
    static constexpr uint64_t kBuildBytesPerTextByte = 10;

   private:
    struct Entry {
      std::string_view value;
      uint32_t record;
    };
    std::vector<Entry> entries_;
  };

  // Decodes what Builder::Finish wrote for `num_records` records; CORRUPTION naming `where`.
  static StatusOr<std::unique_ptr<SuffixIndex>> Decode(std::string_view bytes, uint32_t num_records,
                                                       const std::string& where);
  ~SuffixIndex();

  // Occurrences of the pattern (for `contains`, every position; otherwise the matching distinct
  // values). O(|pattern|) rank operations.
  uint64_t Count(std::string_view pattern, SearchMatch match) const;

  // The records holding a value that matches, ascending and distinct. Locating stops with
  // RESOURCE_EXHAUSTED once more than `max_hits` occurrences would be located, and with
  // DEADLINE_EXCEEDED when the thread's call deadline passes.
  Status Find(std::string_view pattern, SearchMatch match, uint64_t max_hits,
              std::vector<uint32_t>* records) const;

  uint64_t num_values() const;  // distinct values
  uint64_t text_bytes() const;  // bytes of the indexed text, delimiters included
  uint64_t SizeInBytes() const { return encoded_bytes_; }
  // Named parts of the encoding: "bwt", "samples", "postings", "header".
  struct Part {
    std::string name;
    uint64_t bytes;
  };
  std::vector<Part> Breakdown() const;

 private:
  struct Rep;
  explicit SuffixIndex(std::unique_ptr<Rep> rep);
  // The rows [*begin, *end) of the suffixes that start with the mapped pattern; false if none.
  bool Range(std::string_view pattern, SearchMatch match, uint64_t* begin, uint64_t* end) const;

  std::unique_ptr<Rep> rep_;
  uint64_t encoded_bytes_ = 0;
};

}  // namespace zipg::layout
