// SuffixIndex: building, decoding and searching. The encoding (inside the NodeFile's search side
// file, which is checksummed as a whole; docs/search.md):
//
//   varint sample_rate, varint digits, varint keys (K), varint text_bytes (n),
//   varint max_value_len, varint postings (M)
//   { varint count } x 256            symbol counts of the BWT (symbol 0 = the sentinel, once)
//   sdsl: wt_huff<rrr_vector<63>>     the BWT of text + sentinel, n + 1 rows
//   sdsl: sd_vector<>                 rows sampled inside values (n + 1 bits)
//   sdsl: int_vector<>                the key number of each sampled row, in row order
//   sdsl: wt_int<rrr_vector<63>>      the property of each key, in key order (K entries)
//   sdsl: sd_vector<>                 posting starts: M + 1 bits, K + 1 ones (the last at M)
//   sdsl: int_vector<>                the postings: record numbers, ascending within a key
// where "sdsl:" is varint(length) and the structure's serialization.

#include "layout/suffix_index.h"

#include <divsufsort.h>
#include <divsufsort64.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <sdsl/int_vector_buffer.hpp>
#include <sdsl/ram_fs.hpp>
#include <sdsl/rrr_vector.hpp>
#include <sdsl/sd_vector.hpp>
#include <sdsl/wt_huff.hpp>
#include <sdsl/wt_int.hpp>

#include "layout/sdsl_io.h"
#include "util/call_deadline.h"
#include "util/phase_times.h"

namespace zipg::layout {

namespace {
constexpr uint8_t kSentinel = 0, kEnd = 1, kStart = 2, kShift = 3;
constexpr uint8_t kMaxValueByte = 0xF4;  // UTF-8 never uses 0xF5..0xFF
constexpr uint8_t kDigit0 = 0xF8;        // property digits: 0xF8..0xFF, base 8
constexpr uint32_t kMaxDigits = 11;      // enough for any uint32 property number
// Rows located between two looks at the call deadline.
constexpr uint64_t kDeadlineEvery = 1024;
// Searches with at least this many occurrences remember the ones they pass (8 bytes each).
constexpr uint64_t kMemoizeFrom = 32;

using WaveletTree = sdsl::wt_huff<sdsl::rrr_vector<63>>;
using PropertyTree = sdsl::wt_int<sdsl::rrr_vector<63>>;

uint8_t Mapped(uint8_t b) { return static_cast<uint8_t>(b + kShift); }

// Base-8 digits that number `properties` values.
uint32_t DigitsFor(uint32_t properties) {
  uint32_t digits = 1;
  while (digits < kMaxDigits && (uint64_t{1} << (3 * digits)) < properties) ++digits;
  return digits;
}

// Appends d(p): `digits` big-endian base-8 digits.
template <typename Out>
void PutDigits(uint32_t p, uint32_t digits, Out* out) {
  for (uint32_t i = digits; i-- > 0;) {
    out->push_back(static_cast<typename Out::value_type>(kDigit0 + ((p >> (3 * i)) & 7)));
  }
}

uint32_t BitsFor(uint64_t max_value) {
  uint32_t bits = 1;
  while (bits < 64 && (max_value >> bits) != 0) ++bits;
  return bits;
}

// The suffix array of text[0, n): sa[i] is the text position of row i + 1 (row 0 is the
// sentinel's suffix, which sorts first).
template <typename Index>
Status SortSuffixes(const std::vector<uint8_t>& text, std::vector<Index>* sa) {
  sa->resize(text.size());
  if (text.empty()) return Status::OK();
  int failed;
  if constexpr (sizeof(Index) == 4) {
    failed = divsufsort(text.data(), reinterpret_cast<saidx_t*>(sa->data()),
                        static_cast<saidx_t>(text.size()));
  } else {
    failed = divsufsort64(text.data(), reinterpret_cast<saidx64_t*>(sa->data()),
                          static_cast<saidx64_t>(text.size()));
  }
  return failed == 0 ? Status::OK() : Status::Internal("divsufsort failed");
}

// A process-unique name in sdsl's in-memory file system (its own id counter is not atomic, and
// shards are built on several threads).
std::string RamFileName() {
  static std::atomic<uint64_t> next{0};
  return sdsl::ram_file_name("zipg_bwt_" + std::to_string(sdsl::util::pid()) + "_" +
                             std::to_string(next.fetch_add(1)));
}
}  // namespace

Status SuffixIndexOptions::Validate() const {
  if (sample_rate < 1 || sample_rate > 4096) {
    return Status::InvalidArgument("search index sample rate must be in 1..4096, got " +
                                   std::to_string(sample_rate));
  }
  return Status::OK();
}

struct SuffixIndex::Rep {
  uint32_t sample_rate = 0, digits = 1;
  uint64_t keys = 0, text_bytes = 0, max_value_len = 0, postings_count = 0;
  std::array<uint64_t, 257> starts{};  // row of the first suffix starting with each symbol
  WaveletTree bwt;
  sdsl::sd_vector<> sampled;
  sdsl::sd_vector<>::rank_1_type sampled_rank;
  sdsl::int_vector<> sample_values;
  PropertyTree properties;
  sdsl::sd_vector<> posting_starts;
  sdsl::sd_vector<>::select_1_type posting_select;
  sdsl::int_vector<> postings;
  std::vector<Part> parts;

  uint64_t rows() const { return text_bytes + 1; }
  // Postings [first, last) of values [a, b).
  std::pair<uint64_t, uint64_t> PostingRange(uint64_t a, uint64_t b) const {
    return {posting_select(a + 1), posting_select(b + 1)};
  }
};

StatusOr<std::string> SuffixIndex::Builder::Finish(uint32_t num_records, uint32_t num_properties,
                                                   const SuffixIndexOptions& options) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ScopedPhase phase("search index");
  ScopedPhase keys_phase("keys");
  for (const Entry& e : entries_) {
    if (e.record >= num_records || e.property >= num_properties) {
      return Status::InvalidArgument("search index: record " + std::to_string(e.record) +
                                     " or property " + std::to_string(e.property) +
                                     " out of range");
    }
    for (char c : e.value) {
      if (static_cast<uint8_t>(c) > kMaxValueByte) {
        return Status::InvalidArgument("search index: a value is not UTF-8 text");
      }
    }
  }
  // Keys in (value, property) order, each key's records ascending.
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.value != b.value) return a.value < b.value;
    return a.property != b.property ? a.property < b.property : a.record < b.record;
  });
  entries_.erase(std::unique(entries_.begin(), entries_.end(),
                             [](const Entry& a, const Entry& b) {
                               return a.value == b.value && a.property == b.property &&
                                      a.record == b.record;
                             }),
                 entries_.end());
  keys_phase.End();
  const uint32_t digits = DigitsFor(num_properties);

  // The text, the keys' starts and properties, and the postings.
  std::vector<uint8_t> text;
  std::vector<uint64_t> value_starts;  // text position of each key's S
  std::vector<uint32_t> key_props;
  sdsl::bit_vector posting_marks(entries_.size() + 1, 0);
  sdsl::int_vector<> postings(entries_.size(), 0, BitsFor(num_records));
  uint64_t max_len = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (i == 0 || e.value != entries_[i - 1].value || e.property != entries_[i - 1].property) {
      value_starts.push_back(text.size());
      key_props.push_back(e.property);
      posting_marks[i] = 1;
      text.push_back(kStart);
      for (char c : e.value) text.push_back(Mapped(static_cast<uint8_t>(c)));
      text.push_back(kEnd);
      PutDigits(e.property, digits, &text);
      max_len = std::max<uint64_t>(max_len, e.value.size());
    }
    postings[i] = e.record;
  }
  posting_marks[entries_.size()] = 1;
  const uint64_t n = text.size(), values = value_starts.size();
  const uint32_t rate = options.sample_rate;

  // Sampled text positions: byte j of a value, for j a positive multiple of the rate.
  sdsl::bit_vector sampled_pos(n + 1, 0);
  std::vector<uint64_t> pos_values;  // in text order
  for (uint64_t k = 0; k < values; ++k) {
    const uint64_t begin = value_starts[k] + 1;
    const uint64_t end = (k + 1 < values ? value_starts[k + 1] : n) - 1 - digits;  // the E
    for (uint64_t p = begin + rate; p < end; p += rate) {
      sampled_pos[p] = 1;
      pos_values.push_back(k);
    }
  }
  sdsl::rank_support_v<> pos_rank(&sampled_pos);

  // One pass over the rows: the BWT, and the sampled rows' value numbers in row order.
  const std::string bwt_file = RamFileName();
  std::vector<uint64_t> row_marks;
  std::vector<uint64_t> row_values;
  row_values.reserve(pos_values.size());
  {
    sdsl::int_vector_buffer<8> bwt(bwt_file, std::ios::out);
    auto emit = [&](uint64_t row, uint64_t p) {
      bwt.push_back(p == 0 ? kSentinel : text[p - 1]);
      if (sampled_pos[p]) {
        row_marks.push_back(row);
        row_values.push_back(pos_values[pos_rank(p)]);
      }
    };
    auto rows_of = [&](const auto& sa) {
      emit(0, n);  // the sentinel's suffix: preceded by the last byte
      for (uint64_t i = 0; i < n; ++i) emit(i + 1, static_cast<uint64_t>(sa[i]));
    };
    ScopedPhase sort("suffix sort");
    if (n < (uint64_t{1} << 31)) {
      std::vector<int32_t> sa;
      ZIPG_RETURN_IF_ERROR(SortSuffixes(text, &sa));
      rows_of(sa);
    } else {
      std::vector<int64_t> sa;
      ZIPG_RETURN_IF_ERROR(SortSuffixes(text, &sa));
      rows_of(sa);
    }
    bwt.close();
  }
  std::array<uint64_t, 256> counts{};
  counts[kSentinel] = 1;
  for (uint8_t c : text) ++counts[c];
  std::vector<uint8_t>().swap(text);
  WaveletTree wt;
  {
    ScopedPhase wt_phase("wavelet tree");
    sdsl::int_vector_buffer<8> bwt(bwt_file, std::ios::in);
    wt = WaveletTree(bwt, n + 1);
  }
  sdsl::ram_fs::remove(bwt_file);

  sdsl::sd_vector_builder marks(n + 1, row_marks.size());
  for (uint64_t r : row_marks) marks.set(r);
  sdsl::int_vector<> sample_values(row_values.size(), 0, BitsFor(values));
  for (size_t i = 0; i < row_values.size(); ++i) sample_values[i] = row_values[i];
  PropertyTree properties;
  if (!key_props.empty()) {
    const std::string props_file = RamFileName();
    {
      sdsl::int_vector_buffer<> buf(props_file, std::ios::out, 1 << 20,
                                    static_cast<uint8_t>(BitsFor(num_properties)));
      for (uint32_t p : key_props) buf.push_back(p);
      buf.close();
    }
    {
      sdsl::int_vector_buffer<> buf(props_file, std::ios::in);
      properties = PropertyTree(buf, key_props.size());
    }
    sdsl::ram_fs::remove(props_file);
  }

  std::string out;
  PutVarint(&out, rate);
  PutVarint(&out, digits);
  PutVarint(&out, values);
  PutVarint(&out, n);
  PutVarint(&out, max_len);
  PutVarint(&out, entries_.size());
  for (uint64_t c : counts) PutVarint(&out, c);
  PutSdsl(&out, wt);
  PutSdsl(&out, sdsl::sd_vector<>(marks));
  PutSdsl(&out, sample_values);
  PutSdsl(&out, properties);
  PutSdsl(&out, sdsl::sd_vector<>(posting_marks));
  PutSdsl(&out, postings);
  std::vector<Entry>().swap(entries_);
  return out;
}

SuffixIndex::SuffixIndex(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
SuffixIndex::~SuffixIndex() = default;

StatusOr<std::unique_ptr<SuffixIndex>> SuffixIndex::Decode(std::string_view s, uint32_t num_records,
                                                           const std::string& where) {
  auto rep = std::make_unique<Rep>();
  const Status bad = Status::Corruption(where + ": malformed search index");
  size_t pos = 0;
  uint64_t rate, digits;
  if (!GetVarint(s, &pos, &rate) || !GetVarint(s, &pos, &digits) || digits < 1 ||
      digits > kMaxDigits || !GetVarint(s, &pos, &rep->keys) ||
      !GetVarint(s, &pos, &rep->text_bytes) || !GetVarint(s, &pos, &rep->max_value_len) ||
      !GetVarint(s, &pos, &rep->postings_count) || rate < 1 || rate > 4096 ||
      rep->text_bytes >= (uint64_t{1} << 48) || rep->keys > rep->text_bytes ||
      rep->postings_count < rep->keys || rep->max_value_len > rep->text_bytes) {
    return bad;
  }
  rep->sample_rate = static_cast<uint32_t>(rate);
  rep->digits = static_cast<uint32_t>(digits);
  uint64_t total = 0;
  for (int c = 0; c < 256; ++c) {
    uint64_t count;
    if (!GetVarint(s, &pos, &count) || count > rep->rows()) return bad;
    rep->starts[c] = total;
    total += count;
  }
  rep->starts[256] = total;
  // Exactly one sentinel, one S and one E per key, and `digits` digits per key.
  const auto count_of = [&](int c) { return rep->starts[c + 1] - rep->starts[c]; };
  if (total != rep->rows() || count_of(kSentinel) != 1 || count_of(kStart) != rep->keys ||
      count_of(kEnd) != rep->keys ||
      rep->starts[256] - rep->starts[kDigit0] != rep->keys * rep->digits) {
    return bad;
  }
  rep->parts.push_back({"header", pos});
  size_t at = pos;
  if (!GetSdsl(s, &pos, &rep->bwt) || rep->bwt.size() != rep->rows()) return bad;
  rep->parts.push_back({"bwt", pos - at});
  at = pos;
  if (!GetSdsl(s, &pos, &rep->sampled) || rep->sampled.size() != rep->rows() ||
      !GetSdsl(s, &pos, &rep->sample_values)) {
    return bad;
  }
  rep->sampled_rank.set_vector(&rep->sampled);
  if (rep->sampled_rank(rep->rows()) != rep->sample_values.size()) return bad;
  for (uint64_t v : rep->sample_values) {
    if (v >= rep->keys) return bad;
  }
  rep->parts.push_back({"samples", pos - at});
  at = pos;
  if (!GetSdsl(s, &pos, &rep->properties) || rep->properties.size() != rep->keys) return bad;
  rep->parts.push_back({"properties", pos - at});
  at = pos;
  if (!GetSdsl(s, &pos, &rep->posting_starts) ||
      rep->posting_starts.size() != rep->postings_count + 1 || !GetSdsl(s, &pos, &rep->postings) ||
      rep->postings.size() != rep->postings_count || pos != s.size()) {
    return bad;
  }
  sdsl::sd_vector<>::rank_1_type posting_rank(&rep->posting_starts);
  if (posting_rank(rep->postings_count + 1) != rep->keys + 1 ||
      (rep->postings_count > 0 && rep->posting_starts[0] != 1) ||
      rep->posting_starts[rep->postings_count] != 1) {
    return bad;
  }
  rep->posting_select.set_vector(&rep->posting_starts);
  for (uint64_t r : rep->postings) {
    if (r >= num_records) return bad;
  }
  rep->parts.push_back({"postings", pos - at});
  std::unique_ptr<SuffixIndex> index(new SuffixIndex(std::move(rep)));
  index->encoded_bytes_ = s.size();
  return index;
}

uint64_t SuffixIndex::num_keys() const { return rep_->keys; }
uint64_t SuffixIndex::text_bytes() const { return rep_->text_bytes; }
std::vector<SuffixIndex::Part> SuffixIndex::Breakdown() const { return rep_->parts; }

bool SuffixIndex::Range(std::string_view pattern, SearchMatch match,
                        std::optional<uint32_t> property, uint64_t* begin, uint64_t* end) const {
  const Rep& r = *rep_;
  const bool starts = match == SearchMatch::kPrefix || match == SearchMatch::kExact;
  const bool ends = match == SearchMatch::kSuffix || match == SearchMatch::kExact;
  if (property && (uint64_t{*property} >> (3 * r.digits)) != 0) return false;  // no key has it
  std::string symbols;
  symbols.reserve(pattern.size() + 2 + r.digits);
  if (starts) symbols.push_back(static_cast<char>(kStart));
  for (char c : pattern) {
    if (static_cast<uint8_t>(c) > kMaxValueByte) return false;  // no value holds it
    symbols.push_back(static_cast<char>(Mapped(static_cast<uint8_t>(c))));
  }
  if (ends) symbols.push_back(static_cast<char>(kEnd));
  if (ends && property) PutDigits(*property, r.digits, &symbols);
  if (symbols.empty()) return false;
  uint8_t c = static_cast<uint8_t>(symbols.back());
  uint64_t sp = r.starts[c], ep = r.starts[c + 1];
  for (size_t i = symbols.size() - 1; i-- > 0 && sp < ep;) {
    c = static_cast<uint8_t>(symbols[i]);
    if (r.starts[c] == r.starts[c + 1]) return false;
    sp = r.starts[c] + r.bwt.rank(sp, c);
    ep = r.starts[c] + r.bwt.rank(ep, c);
  }
  *begin = sp;
  *end = ep;
  return sp < ep;
}

uint64_t SuffixIndex::Count(std::string_view pattern, SearchMatch match,
                            std::optional<uint32_t> property) const {
  if (match == SearchMatch::kContains) property.reset();
  uint64_t begin, end;
  if (!Range(pattern, match, property, &begin, &end)) return 0;
  if (match != SearchMatch::kPrefix || !property) return end - begin;
  const uint64_t first_key = rep_->starts[kStart];
  return rep_->properties.rank(end - first_key, *property) -
         rep_->properties.rank(begin - first_key, *property);
}

Status SuffixIndex::Find(std::string_view pattern, SearchMatch match,
                         std::optional<uint32_t> property, uint64_t max_hits,
                         std::vector<uint32_t>* records) const {
  records->clear();
  uint64_t begin, end;
  // A contains search cannot name the property in its pattern: its keys are kept below.
  const auto in_pattern = match == SearchMatch::kContains ? std::nullopt : property;
  if (!Range(pattern, match, in_pattern, &begin, &end)) return Status::OK();
  const Rep& r = *rep_;
  const uint64_t first_key = r.starts[kStart];
  const auto too_many = [&](uint64_t n, const char* what) {
    return Status::ResourceExhausted("search: " + std::to_string(n) + " " + what +
                                     " pass the bound of " + std::to_string(max_hits));
  };
  std::vector<uint64_t> keys;  // distinct key numbers
  if (match == SearchMatch::kPrefix || match == SearchMatch::kExact) {
    // Rows that start with S are the keys themselves, in order.
    if (begin < first_key || end > first_key + r.keys) {
      return Status::Corruption("search index: a value search left the keys' rows");
    }
    const uint64_t a = begin - first_key, b = end - first_key;
    if (property && match == SearchMatch::kPrefix) {
      // That property's keys among [a, b): by rank and select on the keys' properties.
      const uint64_t ra = r.properties.rank(a, *property), rb = r.properties.rank(b, *property);
      if (rb - ra > max_hits) return too_many(rb - ra, "matching values");
      for (uint64_t i = ra; i < rb; ++i) keys.push_back(r.properties.select(i + 1, *property));
    } else {
      if (b - a > max_hits) return too_many(b - a, "matching values");
      const auto [first, last] = r.PostingRange(a, b);  // contiguous keys: contiguous postings
      records->reserve(last - first);
      for (uint64_t i = first; i < last; ++i) {
        records->push_back(static_cast<uint32_t>(r.postings[i]));
      }
    }
  } else {
    if (end - begin > max_hits) return too_many(end - begin, "occurrences");
    const auto deadline = CallDeadline::Current();
    keys.reserve(end - begin);
    const uint64_t max_steps = std::min<uint64_t>(r.sample_rate, r.max_value_len) + 1;
    // A walk back from one occurrence passes the rows of the occurrences before it in its value
    // (their rows are in [begin, end)): each such row is remembered with its key, and a later
    // walk that reaches one stops there. So the steps of a dense pattern are at most those from
    // the last occurrence of each sampled stretch, not one walk per occurrence.
    const bool memoize = end - begin >= kMemoizeFrom;
    std::vector<uint64_t> located;  // key + 1 of occurrence row begin + i, 0 if not located yet
    if (memoize) located.assign(end - begin, 0);
    std::vector<uint64_t> passed;  // occurrence rows the current walk went through
    for (uint64_t row = begin; row < end; ++row) {
      if (deadline && (row - begin) % kDeadlineEvery == kDeadlineEvery - 1 &&
          CallDeadline::Clock::now() > *deadline) {
        return Status::DeadlineExceeded("search: the call's deadline passed while locating " +
                                        std::to_string(end - begin) + " occurrences");
      }
      uint64_t at = row, key;
      passed.clear();
      for (uint64_t step = 0;; ++step) {
        if (at >= first_key && at < first_key + r.keys) {
          key = at - first_key;
          break;
        }
        if (memoize && at >= begin && at < end) {
          if (located[at - begin] != 0) {
            key = located[at - begin] - 1;
            break;
          }
          passed.push_back(at);
        }
        if (r.sampled[at]) {
          key = r.sample_values[r.sampled_rank(at)];
          break;
        }
        if (step == max_steps) {
          return Status::Corruption("search index: an occurrence reaches no value start");
        }
        const auto [rank, c] = r.bwt.inverse_select(at);
        at = r.starts[c] + rank;
      }
      keys.push_back(key);
      for (uint64_t p : passed) located[p - begin] = key + 1;
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (property && match == SearchMatch::kContains) {
      std::erase_if(keys, [&](uint64_t k) { return r.properties[k] != *property; });
    }
  }
  for (uint64_t k : keys) {
    const auto [first, last] = r.PostingRange(k, k + 1);
    for (uint64_t i = first; i < last; ++i) {
      records->push_back(static_cast<uint32_t>(r.postings[i]));
    }
  }
  std::sort(records->begin(), records->end());
  records->erase(std::unique(records->begin(), records->end()), records->end());
  return Status::OK();
}

}  // namespace zipg::layout
