// ValueIndex: building, decoding and lookups. The encoding (inside the NodeFile's index side
// file, which is checksummed as a whole):
//
//   varint frequent_keys
//   { varint property, varint value_len, value, varint count, varint postings_len,
//     postings: count delta varints (the first record, then the gaps) } x frequent_keys,
//     ascending (property, value)
//   varint fingerprint_bits, varint record_bits, varint rare_entries
//   the serialized sdsl::sd_vector of rare_entries ones over 2^(fingerprint_bits + record_bits)
//
// varint: LEB128 (7 bits per byte, high bit = more). A key's hash is XXH3-64 of the property number
// (u32) followed by the value; its fingerprint is the hash's top fingerprint_bits bits.

#include "layout/value_index.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <sdsl/sd_vector.hpp>
#include <sstream>

#include "layout/sdsl_io.h"

namespace zipg::layout {

namespace {
// The hash of the property number (4 bytes, little-endian) followed by the value. (Seeding the
// hash with the property instead collides for short values: XXH3 mixes a 1-3 byte input and its
// seed by xor and add, so "c10" under seed 0 and "c11" under seed 1 hash alike.)
uint64_t KeyHash(uint32_t property, std::string_view value) {
  std::string key(4 + value.size(), '\0');
  std::memcpy(key.data(), &property, 4);
  std::memcpy(key.data() + 4, value.data(), value.size());
  return XXH3_64bits(key.data(), key.size());
}
}  // namespace

struct ValueIndex::Rare {
  uint32_t fingerprint_bits = 0, record_bits = 0;
  sdsl::sd_vector<> set;
  sdsl::sd_vector<>::rank_1_type rank;
  sdsl::sd_vector<>::select_1_type select;
};

void ValueIndex::Builder::Add(uint32_t property, std::string_view value, uint32_t record) {
  keys_.push_back({KeyHash(property, value), record, property, value});
}

std::string ValueIndex::Builder::Finish(uint32_t num_records) {
  std::sort(keys_.begin(), keys_.end(), [](const Key& a, const Key& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.record < b.record;
  });
  // Frequent keys: a hash shared by kFrequent records or more, all with the same key (two keys
  // with one 64-bit hash go to the rare part, where lookups verify).
  struct Group {
    size_t begin, end;
  };
  std::vector<Group> frequent;
  std::vector<uint64_t> rare;  // (fingerprint << record_bits) | record
  const uint32_t record_bits = std::max<uint32_t>(1, std::bit_width(num_records));
  // Rare entries are counted first to size the fingerprint.
  uint64_t rare_count = 0;
  auto for_each_group = [&](auto fn) {
    for (size_t begin = 0; begin < keys_.size();) {
      size_t end = begin + 1;
      while (end < keys_.size() && keys_[end].hash == keys_[begin].hash) ++end;
      bool same = end - begin >= kFrequent;
      for (size_t i = begin + 1; same && i < end; ++i) {
        same = keys_[i].property == keys_[begin].property && keys_[i].value == keys_[begin].value;
      }
      fn(begin, end, same);
      begin = end;
    }
  };
  for_each_group([&](size_t begin, size_t end, bool is_frequent) {
    if (is_frequent) {
      frequent.push_back({begin, end});
    } else {
      rare_count += end - begin;
    }
  });
  // About 2^-8 of other keys' entries share a fingerprint with any one key.
  const uint32_t fingerprint_bits =
      std::min<uint32_t>(63 - record_bits, static_cast<uint32_t>(std::bit_width(rare_count)) + 8);
  rare.reserve(rare_count);
  for_each_group([&](size_t begin, size_t end, bool is_frequent) {
    if (is_frequent) return;
    for (size_t i = begin; i < end; ++i) {
      rare.push_back((keys_[i].hash >> (64 - fingerprint_bits)) << record_bits | keys_[i].record);
    }
  });
  std::sort(rare.begin(), rare.end());
  rare.erase(std::unique(rare.begin(), rare.end()), rare.end());

  std::string out;
  std::sort(frequent.begin(), frequent.end(), [&](const Group& a, const Group& b) {
    const Key &x = keys_[a.begin], &y = keys_[b.begin];
    return x.property != y.property ? x.property < y.property : x.value < y.value;
  });
  PutVarint(&out, frequent.size());
  for (const auto& g : frequent) {
    const Key& k = keys_[g.begin];
    PutVarint(&out, k.property);
    PutVarint(&out, k.value.size());
    out.append(k.value);
    std::string postings;
    uint32_t previous = 0;
    for (size_t i = g.begin; i < g.end; ++i) {
      PutVarint(&postings, keys_[i].record - (i == g.begin ? 0 : previous + 1));
      previous = keys_[i].record;
    }
    PutVarint(&out, g.end - g.begin);
    PutVarint(&out, postings.size());
    out.append(postings);
  }
  PutVarint(&out, fingerprint_bits);
  PutVarint(&out, record_bits);
  PutVarint(&out, rare.size());
  sdsl::sd_vector_builder builder(uint64_t{1} << (fingerprint_bits + record_bits), rare.size());
  for (uint64_t v : rare) builder.set(v);
  sdsl::sd_vector<> set(builder);
  std::ostringstream serialized;
  sdsl::serialize(set, serialized);
  out.append(serialized.str());
  std::vector<Key>().swap(keys_);
  return out;
}

ValueIndex::~ValueIndex() = default;


StatusOr<std::unique_ptr<ValueIndex>> ValueIndex::Decode(std::string bytes, uint32_t num_records,
                                                         const std::string& where) {
  std::unique_ptr<ValueIndex> index(new ValueIndex());
  const std::string_view s(bytes);
  const Status bad = Status::Corruption(where + ": malformed value index");
  size_t pos = 0;
  uint64_t frequent;
  if (!GetVarint(s, &pos, &frequent) || frequent > s.size()) return bad;
  // Where each frequent key's value and postings lie, checked; views are made once the bytes
  // they point into are final.
  struct Place {
    uint32_t property, count;
    size_t value, value_len, postings, postings_len;
  };
  std::vector<Place> places;
  places.reserve(frequent);
  for (uint64_t i = 0; i < frequent; ++i) {
    uint64_t property, len, count, postings_len;
    if (!GetVarint(s, &pos, &property) || !GetVarint(s, &pos, &len) || len > s.size() - pos) {
      return bad;
    }
    const size_t value = pos;
    pos += len;
    if (!GetVarint(s, &pos, &count) || !GetVarint(s, &pos, &postings_len) ||
        postings_len > s.size() - pos || count < kFrequent || count > num_records ||
        property > UINT32_MAX) {
      return bad;
    }
    // The postings: exactly `count` ascending record numbers below num_records.
    const std::string_view postings = s.substr(pos, postings_len);
    size_t at = 0;
    uint64_t record = 0, gap;
    for (uint64_t k = 0; k < count; ++k) {
      if (!GetVarint(postings, &at, &gap) || gap >= num_records ||
          (record += gap + (k == 0 ? 0 : 1)) >= num_records) {
        return bad;
      }
    }
    if (at != postings.size()) return bad;
    const Place p{static_cast<uint32_t>(property),
                  static_cast<uint32_t>(count),
                  value,
                  len,
                  pos,
                  postings_len};
    pos += postings_len;
    if (!places.empty()) {
      const Place& q = places.back();
      if (std::pair(q.property, s.substr(q.value, q.value_len)) >=
          std::pair(p.property, s.substr(p.value, p.value_len))) {
        return bad;
      }
    }
    places.push_back(p);
  }
  const size_t frequent_end = pos;
  uint64_t fingerprint_bits, record_bits, entries;
  if (!GetVarint(s, &pos, &fingerprint_bits) || !GetVarint(s, &pos, &record_bits) ||
      !GetVarint(s, &pos, &entries) || fingerprint_bits == 0 || record_bits == 0 ||
      record_bits > 32 || fingerprint_bits + record_bits > 63 ||
      (uint64_t{1} << record_bits) < num_records || entries > s.size()) {
    return bad;
  }
  auto rare = std::make_unique<Rare>();
  rare->fingerprint_bits = static_cast<uint32_t>(fingerprint_bits);
  rare->record_bits = static_cast<uint32_t>(record_bits);
  ViewBuffer buffer(s.substr(pos));
  std::istream in(&buffer);
  rare->set.load(in);
  if (!in || rare->set.size() != uint64_t{1} << (fingerprint_bits + record_bits) ||
      buffer.consumed() != s.size() - pos) {
    return bad;
  }
  rare->rank.set_vector(&rare->set);
  rare->select.set_vector(&rare->set);
  if (rare->rank(rare->set.size()) != entries) return bad;
  index->rare_ = std::move(rare);
  index->encoded_bytes_ = bytes.size();
  // Keep only the frequent keys' part of the bytes: the rare set now lives in its own structure.
  bytes.resize(frequent_end);
  bytes.shrink_to_fit();
  index->bytes_ = std::move(bytes);
  const std::string_view kept(index->bytes_);
  index->frequent_.reserve(places.size());
  for (const Place& p : places) {
    index->frequent_.push_back({p.property, kept.substr(p.value, p.value_len),
                                kept.substr(p.postings, p.postings_len), p.count});
  }
  return index;
}

ValueIndex::Candidates ValueIndex::Find(uint32_t property, std::string_view value) const {
  Candidates out;
  auto it = std::lower_bound(frequent_.begin(), frequent_.end(), std::pair(property, value),
                             [](const Frequent& f, const std::pair<uint32_t, std::string_view>& k) {
                               return std::pair(f.property, f.value) < k;
                             });
  if (it != frequent_.end() && it->property == property && it->value == value) {
    out.exact = true;
    out.records.reserve(it->count);
    size_t pos = 0;
    uint64_t record = 0, gap;
    for (uint32_t i = 0; i < it->count && GetVarint(it->postings, &pos, &gap); ++i) {
      record += gap + (i == 0 ? 0 : 1);
      out.records.push_back(static_cast<uint32_t>(record));
    }
    return out;
  }
  const Rare& r = *rare_;
  const uint64_t fingerprint = KeyHash(property, value) >> (64 - r.fingerprint_bits);
  const uint64_t lo = fingerprint << r.record_bits, hi = (fingerprint + 1) << r.record_bits;
  const uint64_t first = r.rank(lo), last = r.rank(hi);
  const uint64_t mask = (uint64_t{1} << r.record_bits) - 1;
  for (uint64_t k = first; k < last; ++k) {
    out.records.push_back(static_cast<uint32_t>(r.select(k + 1) & mask));
  }
  return out;
}

}  // namespace zipg::layout
