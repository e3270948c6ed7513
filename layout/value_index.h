// ValueIndex: which records of a NodeFile hold a property value, for get_node_ids on a NodeFile
// whose text is not a suffix structure (NodeFile format 2; docs/layout-v2.md).
//
// Two parts:
//  * frequent keys (property, value) held by at least kFrequent records: the exact value and the
//    ascending record numbers (delta varints). A lookup of such a key is exact.
//  * every other key: a fingerprint of the key's hash with each record number, in one Elias-Fano
//    coded sorted set (sdsl::sd_vector) of (fingerprint << record_bits | record). A lookup returns
//    the records whose keys share the fingerprint: a superset of the answer (about 1 in 256 of
//    other keys' records collide), which the caller checks against the records themselves.
// A frequent key therefore costs a few bits per record and no record reads; a rare key costs its
// records' reads to verify, which are few by definition.
//
// Thread-safety: immutable once built or decoded; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace zipg::layout {

class ValueIndex {
 public:
  // Keys held by at least this many records are stored exactly.
  static constexpr uint32_t kFrequent = 16;

  // Collects keys, then encodes the index.
  class Builder {
   public:
    // `value` must stay valid until Finish. Records are numbered from 0, in any order.
    void Add(uint32_t property, std::string_view value, uint32_t record);
    // The encoded index over records [0, num_records).
    std::string Finish(uint32_t num_records);
    // Room for `keys` Adds (without it the key vector may copy itself while it grows).
    void Reserve(size_t keys) { keys_.reserve(keys); }
    // Bytes held per Add while collecting, reserved (for memory planning).
    static constexpr uint64_t kBytesPerKey = 32;

   private:
    struct Key {
      uint64_t hash;
      uint32_t record;
      uint32_t property;
      std::string_view value;
    };
    std::vector<Key> keys_;
  };

  // Decodes what Builder::Finish wrote for `num_records` records; CORRUPTION naming `where`.
  static StatusOr<std::unique_ptr<ValueIndex>> Decode(std::string bytes, uint32_t num_records,
                                                      const std::string& where);
  ~ValueIndex();

  struct Candidates {
    bool exact = false;             // true: exactly the records holding the key
    std::vector<uint32_t> records;  // ascending, distinct
  };
  // The records that may hold `value` for `property`.
  Candidates Find(uint32_t property, std::string_view value) const;

  // Bytes of the encoding (as stored).
  uint64_t SizeInBytes() const { return encoded_bytes_; }
  uint64_t num_frequent() const { return frequent_.size(); }

 private:
  ValueIndex() = default;
  struct Frequent {
    uint32_t property;
    std::string_view value;
    std::string_view postings;  // delta varints
    uint32_t count;
  };
  struct Rare;
  std::string bytes_;  // the frequent keys' part of the encoding: frequent_ points into it
  uint64_t encoded_bytes_ = 0;
  std::vector<Frequent> frequent_;  // ascending (property, value)
  std::unique_ptr<Rare> rare_;
};

}  // namespace zipg::layout
