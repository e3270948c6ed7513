// Opening and querying a CompressedFile (construction is compressed_file_build.cc).

#include "layout/compressed_file.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "layout/bits.h"
#include "layout/format.h"
#include "layout/gap_code.h"
#include "util/checksum.h"
#include "util/coding.h"
#include "util/file.h"

namespace zipg::layout {

namespace {
constexpr uint64_t kInvalidRow = ~0ull;

struct SectionEntry {
  uint32_t id = 0;
  uint32_t width = 0;
  uint64_t count = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t checksum = 0;
};
// Reads one column's gaps (layout/gap_code.h) from the gap stream through a 64-bit window that is
// refilled once more than half of it is used, so each gap costs a table lookup and a shift rather
// than a fresh unaligned read. Each step: w = Window(), then UnitRun(w) and SkipUnits, or Next(w).
class GapReader {
 public:
  GapReader(BitStream stream, const GapCode& code, uint64_t pos)
      : stream_(stream),
        code_(&code),
        unit_ones_(code.ones_are_unit_gaps()),
        base_(pos),
        window_(stream.Read64(pos)) {}

  // The unread bits at the cursor: at least 32 valid ones, zeros above them.
  uint64_t Window() {
    if (used_ > 32) {
      base_ += used_;
      window_ = stream_.Read64(base_);
      used_ = 0;
    }
    return window_ >> used_;
  }
  // How many gaps of 1 start at the cursor as a run of one bits (0 if the column's code does not
  // code gap 1 as the bit 1, or the next gap is not 1).
  uint64_t UnitRun(uint64_t w) const {
    return unit_ones_ ? static_cast<uint64_t>(std::countr_one(w)) : 0;
  }
  // Consumes k <= UnitRun(w) gaps of 1.
  void SkipUnits(uint64_t k) { used_ += static_cast<uint32_t>(k); }
  // Consumes and returns the gap at the start of w; 0 if the data is corrupt.
  uint64_t Next(uint64_t w) {
    const uint16_t e = code_->Lookup(w);
    const uint32_t len = e >> 6, z = e & 63;
    if (len == 0) [[unlikely]]
      return 0;
    if (len + z <= 64 - used_) {
      used_ += len + z;
      return (1ull << z) | ((w >> len) & LowMask(z));
    }
    // A long gap running past the window.
    const uint64_t at = base_ + used_;
    const uint64_t gap = (1ull << z) | (stream_.Read64(at + len) & LowMask(z));
    base_ = at + len + z;
    window_ = stream_.Read64(base_);
    used_ = 0;
    return gap;
  }

 private:
  const BitStream stream_;
  const GapCode* const code_;
  const bool unit_ones_;
  uint64_t base_;  // stream position of the window's bit 0
  uint64_t window_;
  uint32_t used_ = 0;  // bits of the window consumed; <= 32 when Window() returns
};

}  // namespace

class CompressedFile::Impl {
 public:
  // Parses and checks the header and section table of `data` (which `owner`/`buffer` keep alive).
  Status Init(const char* data, uint64_t size, const std::string& name, const OpenOptions& options,
              CompressedFileOptions* file_options);

  uint64_t n() const { return n_; }
  Status Extract(uint64_t offset, uint64_t len, std::string* out) const;
  template <typename Row>
  Status ExtractAll(std::string* out) const;
  StatusOr<uint64_t> Count(std::string_view pattern, uint64_t* lo_row) const;
  StatusOr<uint64_t> Locate(uint64_t row) const;
  Status Verify() const;
  uint64_t file_size() const { return size_; }
  const std::array<SectionEntry, format::kNumSections>& sections() const { return sections_; }

  std::unique_ptr<MappedFile> file;
  std::vector<uint64_t> buffer;

 private:
  Status Corrupt(const std::string& what) const {
    return Status::Corruption("compressed file '" + name_ + "': " + what);
  }
  // Index into col_start_/col_sym_ of the column holding `row` (1 <= row <= n): the table gives the
  // column of the first row of row's bucket, and columns only grow from there.
  uint32_t ColumnOf(uint64_t row) const {
    uint32_t col = col_lookup_[row >> col_lookup_shift_];
    while (col_start_[col + 1] <= row) ++col;
    return col;
  }
  // Psi(row) for a row of column `col`; kInvalidRow if the data is inconsistent.
  uint64_t PsiInColumn(uint64_t row, uint32_t col) const;
  uint64_t Psi(uint64_t row) const {
    if (row == 0) return n_ == 0 ? kInvalidRow : isa_.Get(0);
    return PsiInColumn(row, ColumnOf(row));
  }
  // Adds `steps` gaps of column `col`, coded from bit `pos` on, to `value`; kInvalidRow if corrupt.
  uint64_t DecodeGaps(uint32_t col, uint64_t pos, uint64_t steps, uint64_t value) const;
  // First row of column `col` whose Psi is >= x (the column's end if none).
  uint64_t LowerBound(uint32_t col, uint64_t x) const;
  // Bit position of block `b` (counted within column `col`) in psi_samples, and of its superblock.
  uint64_t SuperblockBit(uint32_t col, uint64_t b) const {
    return col_sample_base_[col] + (b / format::kBlocksPerSuper) * col_record_bits_[col];
  }
  void ReadBlock(uint32_t col, uint64_t b, uint64_t* value, uint64_t* offset) const {
    const uint64_t rec = SuperblockBit(col, b);
    *value = sdsl::bits::read_int(psi_sample_words_ + (rec >> 6), rec & 63, psi_value_bits_);
    const uint64_t at = rec + psi_value_bits_;
    *offset = sdsl::bits::read_int(psi_sample_words_ + (at >> 6), at & 63, psi_offset_bits_);
    const uint64_t j = b % format::kBlocksPerSuper;
    if (j != 0) {
      const uint32_t wv = col_rel_value_bits_[col], wo = col_rel_offset_bits_[col];
      const uint64_t entry = at + psi_offset_bits_ + (j - 1) * (wv + wo);
      *value += sdsl::bits::read_int(psi_sample_words_ + (entry >> 6), entry & 63, wv);
      *offset +=
          sdsl::bits::read_int(psi_sample_words_ + ((entry + wv) >> 6), (entry + wv) & 63, wo);
    }
  }
  void PrefetchBlock(uint32_t col, uint64_t b) const {
    const uint64_t rec = SuperblockBit(col, b);
    __builtin_prefetch(psi_sample_words_ + (rec >> 6));
    const uint64_t entry =
        rec + psi_value_bits_ + psi_offset_bits_ +
        (b % format::kBlocksPerSuper) * (col_rel_value_bits_[col] + col_rel_offset_bits_[col]);
    __builtin_prefetch(psi_sample_words_ + (entry >> 6));
  }

  std::string name_;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t n_ = 0;
  std::array<SectionEntry, format::kNumSections> sections_;

  // Non-empty columns: first row, byte value, Psi blocks before it. col_start_[num_cols_] = n + 1.
  uint32_t num_cols_ = 0;
  std::array<uint64_t, 257> col_start_{};
  std::array<uint8_t, 256> col_sym_{};
  std::array<uint64_t, 257> col_blocks_before_{};
  std::array<int32_t, 256> col_of_byte_{};  // -1 if the byte does not occur
  static constexpr uint32_t kColLookupBits = 12;
  std::array<uint8_t, (1u << kColLookupBits) + 1>
      col_lookup_{};  // bucket -> column of its first row
  uint32_t col_lookup_shift_ = 0;

  std::vector<GapCode> codes_;  // per non-empty column
  // Psi block samples per non-empty column: first bit in psi_samples, bits per superblock record,
  // and the widths of a block's value and offset relative to its superblock's.
  std::array<uint64_t, 256> col_sample_base_{};
  std::array<uint32_t, 256> col_record_bits_{};
  std::array<uint8_t, 256> col_rel_value_bits_{};
  std::array<uint8_t, 256> col_rel_offset_bits_{};
  uint32_t block_shift_ = 0;
  uint32_t psi_value_bits_ = 0;
  uint32_t psi_offset_bits_ = 0;
  uint64_t psi_gap_bits_ = 0;
  const uint64_t* psi_sample_words_ = nullptr;
  BitStream psi_gaps_;
  uint32_t isa_shift_ = 0;
  PackedView isa_;
  uint32_t sa_shift_ = 0;
  PackedView sa_;
  uint32_t bucket_bits_ = 0;
  PackedView buckets_;
  PackedView low_;
};

Status CompressedFile::Impl::Init(const char* data, uint64_t size, const std::string& name,
                                  const OpenOptions& options, CompressedFileOptions* file_options) {
  name_ = name;
  data_ = data;
  size_ = size;
  const uint64_t table_end = format::kHeaderSize + format::kNumSections * format::kSectionEntrySize;
  if (size < format::kHeaderSize) {
    return Corrupt("truncated: " + std::to_string(size) + " bytes, shorter than the header");
  }
  if (std::memcmp(data, format::kMagic, sizeof(format::kMagic)) != 0) {
    return Corrupt("bad magic number (not a zipg compressed file)");
  }
  uint32_t version = DecodeFixed32(data + format::kOffVersion);
  if (version != format::kVersion) {
    return Corrupt("unsupported format version " + std::to_string(version) + " (this build reads " +
                   std::to_string(format::kVersion) + ")");
  }
  if (DecodeFixed32(data + format::kOffNumSections) != format::kNumSections) {
    return Corrupt("unexpected section count");
  }
  if (size < table_end) return Corrupt("truncated inside the section table");
  {
    std::string covered(data, table_end);
    std::memset(covered.data() + format::kOffHeaderChecksum, 0, 8);
    if (Checksum64(covered.data(), covered.size()) !=
        DecodeFixed64(data + format::kOffHeaderChecksum)) {
      return Corrupt("header checksum mismatch");
    }
  }
  n_ = DecodeFixed64(data + format::kOffTextSize);
  file_options->sa_sampling_rate = DecodeFixed32(data + format::kOffSaRate);
  file_options->isa_sampling_rate = DecodeFixed32(data + format::kOffIsaRate);
  file_options->psi_block_size = DecodeFixed32(data + format::kOffPsiBlock);
  file_options->force_64bit_construction = false;
  if (Status s = file_options->Validate(); !s.ok()) return Corrupt("bad options: " + s.message());
  psi_value_bits_ = DecodeFixed32(data + format::kOffPsiValueBits);
  psi_offset_bits_ = DecodeFixed32(data + format::kOffPsiOffsetBits);
  bucket_bits_ = DecodeFixed32(data + format::kOffSaBucketBits);
  const uint64_t num_marks = DecodeFixed64(data + format::kOffNumMarks);
  psi_gap_bits_ = DecodeFixed64(data + format::kOffPsiGapBits);
  if (n_ >= (1ull << 62) || psi_value_bits_ != BitsFor(n_) || psi_offset_bits_ == 0 ||
      psi_offset_bits_ > 64 || bucket_bits_ > 40 || num_marks > n_) {
    return Corrupt("inconsistent header fields");
  }

  // Section table: in order, contiguous, covering the rest of the file exactly.
  uint64_t expect_offset = table_end;
  for (uint32_t i = 0; i < format::kNumSections; ++i) {
    const char* e = data + format::kHeaderSize + i * format::kSectionEntrySize;
    SectionEntry& s = sections_[i];
    s.id = DecodeFixed32(e + format::kEntId);
    s.width = DecodeFixed32(e + format::kEntWidth);
    s.count = DecodeFixed64(e + format::kEntCount);
    s.offset = DecodeFixed64(e + format::kEntOffset);
    s.length = DecodeFixed64(e + format::kEntLength);
    s.checksum = DecodeFixed64(e + format::kEntChecksum);
    if (s.id != i + 1 || s.offset != expect_offset || s.length % 8 != 0 || s.width > 128 ||
        s.length > (1ull << 60)) {
      return Corrupt(std::string("bad section table entry for ") + format::SectionName(i + 1));
    }
    expect_offset += s.length;
  }
  if (expect_offset != size) {
    return Corrupt(size < expect_offset ? "truncated: " + std::to_string(size) + " of " +
                                              std::to_string(expect_offset) + " bytes"
                                        : "trailing bytes after the last section");
  }
  if (options.verify_checksums) ZIPG_RETURN_IF_ERROR(Verify());

  auto words = [&](const SectionEntry& s) {
    return reinterpret_cast<const uint64_t*>(data + s.offset);
  };
  auto packed = [&](uint32_t id, uint64_t count, uint32_t width, PackedView* view) -> Status {
    const SectionEntry& s = sections_[id - 1];
    if (s.count != count || s.width != width || s.length / 8 < PackedView::WordsFor(count, width)) {
      return Corrupt(std::string("section ") + format::SectionName(id) + " has the wrong shape");
    }
    *view = PackedView{words(s), count, width};
    return Status::OK();
  };

  // Columns from the byte counts.
  const SectionEntry& cs = sections_[format::kCounts - 1];
  if (cs.count != 256 || cs.length != 256 * 8) return Corrupt("bad counts section");
  const uint32_t block = file_options->psi_block_size;
  block_shift_ = static_cast<uint32_t>(std::countr_zero(block));
  uint64_t row = 1, total_blocks = 0;
  col_of_byte_.fill(-1);
  for (int c = 0; c < 256; ++c) {
    uint64_t count = DecodeFixed64(data + cs.offset + 8 * c);
    if (count == 0) continue;
    if (count > n_ || row + count > n_ + 1) return Corrupt("byte counts exceed the text size");
    col_of_byte_[c] = static_cast<int32_t>(num_cols_);
    col_sym_[num_cols_] = static_cast<uint8_t>(c);
    col_start_[num_cols_] = row;
    col_blocks_before_[num_cols_] = total_blocks;
    ++num_cols_;
    row += count;
    total_blocks += (count + block - 1) / block;
  }
  if (row != n_ + 1) return Corrupt("byte counts do not add up to the text size");
  col_start_[num_cols_] = row;
  col_blocks_before_[num_cols_] = total_blocks;
  col_lookup_shift_ = BitsFor(n_) > kColLookupBits ? BitsFor(n_) - kColLookupBits : 0;
  for (uint64_t b = 0, col = 0; b < col_lookup_.size() && num_cols_ > 0; ++b) {
    const uint64_t first_row = std::max<uint64_t>(b << col_lookup_shift_, 1);
    while (col + 1 < num_cols_ && col_start_[col + 1] <= first_row) ++col;
    col_lookup_[b] = static_cast<uint8_t>(col);
  }

  const SectionEntry& cols = sections_[format::kPsiColumns - 1];
  const uint64_t col_words = format::kColumnEntryWords;
  if (cols.count != num_cols_ * col_words * 8 || cols.length != num_cols_ * col_words * 8 ||
      cols.width != 8) {
    return Corrupt("bad psi_columns section");
  }
  codes_.clear();
  uint64_t sample_bits = 0;
  for (uint32_t col = 0; col < num_cols_; ++col) {
    const char* entry = data + cols.offset + col * col_words * 8;
    GapCode::Lengths lengths;
    std::memcpy(lengths.data(), entry, 64);
    auto code = GapCode::FromLengths(lengths);
    if (!code.ok()) return Corrupt(code.status().message());
    codes_.push_back(std::move(*code));
    const uint32_t wv = static_cast<uint8_t>(entry[64]), wo = static_cast<uint8_t>(entry[65]);
    if (wv > psi_value_bits_ || wo > psi_offset_bits_) return Corrupt("bad psi sample widths");
    col_rel_value_bits_[col] = static_cast<uint8_t>(wv);
    col_rel_offset_bits_[col] = static_cast<uint8_t>(wo);
    col_record_bits_[col] = static_cast<uint32_t>(psi_value_bits_ + psi_offset_bits_ +
                                                  (format::kBlocksPerSuper - 1) * (wv + wo));
    col_sample_base_[col] = sample_bits;
    const uint64_t blocks = col_blocks_before_[col + 1] - col_blocks_before_[col];
    const uint64_t supers = (blocks + format::kBlocksPerSuper - 1) / format::kBlocksPerSuper;
    const uint64_t last =
        blocks - (supers - 1) * format::kBlocksPerSuper;  // blocks in the last one
    sample_bits += (supers - 1) * col_record_bits_[col] + psi_value_bits_ + psi_offset_bits_ +
                   (last - 1) * (wv + wo);
  }
  const SectionEntry& ss = sections_[format::kPsiSamples - 1];
  if (ss.count != sample_bits || ss.length / 8 < (sample_bits + 63) / 64 + 1) {
    return Corrupt("bad psi_samples section");
  }
  psi_sample_words_ = words(ss);

  const SectionEntry& gs = sections_[format::kPsiGaps - 1];
  if (gs.count != psi_gap_bits_ || gs.length / 8 < (psi_gap_bits_ + 63) / 64 + 1) {
    return Corrupt("bad psi_gaps section");
  }
  psi_gaps_ = BitStream(words(gs), gs.length / 8);

  const uint32_t isa_rate = file_options->isa_sampling_rate;
  isa_shift_ = static_cast<uint32_t>(std::countr_zero(isa_rate));
  ZIPG_RETURN_IF_ERROR(
      packed(format::kIsaSamples, (n_ + isa_rate - 1) / isa_rate, BitsFor(n_), &isa_));

  const uint32_t sa_rate = file_options->sa_sampling_rate;
  sa_shift_ = static_cast<uint32_t>(std::countr_zero(sa_rate));
  if (bucket_bits_ != sa_shift_ + 5) return Corrupt("inconsistent sa_marks bucket size");
  const uint64_t num_buckets = ((n_ + 1) >> bucket_bits_) + 1;
  ZIPG_RETURN_IF_ERROR(packed(format::kSaSamples, num_marks, BitsFor(n_ / sa_rate), &sa_));
  ZIPG_RETURN_IF_ERROR(
      packed(format::kSaMarkBuckets, num_buckets + 1, BitsFor(num_marks), &buckets_));
  ZIPG_RETURN_IF_ERROR(packed(format::kSaMarkLow, num_marks, bucket_bits_, &low_));
  return Status::OK();
}

Status CompressedFile::Impl::Verify() const {
  for (const SectionEntry& s : sections_) {
    if (Checksum64(data_ + s.offset, s.length) != s.checksum) {
      return Corrupt(std::string("checksum mismatch in section ") + format::SectionName(s.id));
    }
  }
  return Status::OK();
}

uint64_t CompressedFile::Impl::DecodeGaps(uint32_t col, uint64_t pos, uint64_t steps,
                                          uint64_t value) const {
  GapReader reader(psi_gaps_, codes_[col], pos);
  while (steps > 0) {
    const uint64_t w = reader.Window();
    // A run of one bits is a run of gaps of 1: take as many as needed at once.
    if (uint64_t run = reader.UnitRun(w); run > 0) {
      uint64_t k = std::min(run, steps);
      reader.SkipUnits(k);
      value += k;
      steps -= k;
      continue;
    }
    uint64_t gap = reader.Next(w);
    if (gap == 0) [[unlikely]]
      return kInvalidRow;
    value += gap;
    --steps;
  }
  return value;
}

uint64_t CompressedFile::Impl::PsiInColumn(uint64_t row, uint32_t col) const {
  uint64_t j = row - col_start_[col];
  uint64_t value, offset;
  ReadBlock(col, j >> block_shift_, &value, &offset);
  uint64_t steps = j & ((1ull << block_shift_) - 1);
  if (offset > psi_gap_bits_) [[unlikely]]
    return kInvalidRow;
  return steps == 0 ? value : DecodeGaps(col, offset, steps, value);
}

uint64_t CompressedFile::Impl::LowerBound(uint32_t col, uint64_t x) const {
  const uint64_t num_blocks = col_blocks_before_[col + 1] - col_blocks_before_[col];
  // First block whose first value is >= x.
  uint64_t lo = 0, hi = num_blocks;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    uint64_t value, offset;
    ReadBlock(col, mid, &value, &offset);
    if (value < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return col_start_[col];
  // The answer is inside block lo - 1 (after its first row) or is the first row of block lo.
  const uint64_t block = lo - 1;
  const uint64_t block_size = 1ull << block_shift_;
  const uint64_t block_first_row = col_start_[col] + (block << block_shift_);
  const uint64_t rows_in_block = std::min(block_size, col_start_[col + 1] - block_first_row);
  uint64_t value, pos;
  ReadBlock(col, block, &value, &pos);
  if (pos > psi_gap_bits_) [[unlikely]]
    return col_start_[col + 1];
  GapReader reader(psi_gaps_, codes_[col], pos);
  uint64_t i = 1;
  while (i < rows_in_block) {
    const uint64_t w = reader.Window();
    if (uint64_t run = reader.UnitRun(w); run > 0) {
      // Gaps of 1: the value reaches x after x - value of them.
      uint64_t k = std::min({run, rows_in_block - i, x - value});
      reader.SkipUnits(k);
      value += k;
      i += k;
      if (value >= x) return block_first_row + i - 1;
      continue;
    }
    uint64_t gap = reader.Next(w);
    if (gap == 0) [[unlikely]]
      return col_start_[col + 1];
    value += gap;
    if (value >= x) return block_first_row + i;
    ++i;
  }
  return block_first_row + rows_in_block;
}

Status CompressedFile::Impl::Extract(uint64_t offset, uint64_t len, std::string* out) const {
  if (offset > n_) {
    return Status::InvalidArgument("extract offset " + std::to_string(offset) +
                                   " is past the end of the text (" + std::to_string(n_) +
                                   " bytes)");
  }
  len = std::min(len, n_ - offset);
  if (len == 0) return Status::OK();
  const uint64_t end = offset + len;
  const size_t start = out->size();
  out->resize(start + len);
  char* dst = out->data() + start - offset;  // dst[pos] is the byte at text position pos

  // Each ISA sample inside [offset, end) starts an independent Psi chain over the next isa_rate
  // positions. Chains advance in lockstep, one stage at a time with prefetches in between, so that
  // the cache misses of different chains overlap instead of adding up.
  struct Chain {
    uint64_t row, pos, stop;  // current row and text position; the chain ends at position stop
    uint32_t col;
    uint64_t block, steps, value, gap_offset;
  };
  constexpr uint64_t kMaxChains = 16;
  Chain chains[kMaxChains];
  const uint64_t first = offset >> isa_shift_, last = (end - 1) >> isa_shift_;
  for (uint64_t group = first; group <= last; group += kMaxChains) {
    const uint64_t num = std::min<uint64_t>(kMaxChains, last - group + 1);
    for (uint64_t i = 0; i < num; ++i) {
      Chain& c = chains[i];
      c.pos = (group + i) << isa_shift_;
      c.row = isa_.Get(group + i);
      c.stop = std::min<uint64_t>(c.pos + (1ull << isa_shift_), end);
    }
    uint64_t active = num;  // chains [0, active) may still run; finished ones have pos == stop
    while (active > 0) {
      bool any = false;
      for (uint64_t i = 0; i < active;
           ++i) {  // stage 1: emit the byte, find the block, prefetch it
        Chain& c = chains[i];
        if (c.pos == c.stop) continue;
        if (c.row == 0 || c.row > n_) [[unlikely]] {
          out->resize(start);
          return Corrupt("invalid row while extracting");
        }
        c.col = ColumnOf(c.row);
        if (c.pos >= offset) dst[c.pos] = static_cast<char>(col_sym_[c.col]);
        if (++c.pos == c.stop) continue;
        any = true;
        uint64_t j = c.row - col_start_[c.col];
        c.block = j >> block_shift_;
        c.steps = j & ((1ull << block_shift_) - 1);
        PrefetchBlock(c.col, c.block);
      }
      if (!any) break;
      for (uint64_t i = 0; i < active; ++i) {  // stage 2: read the block sample, prefetch its gaps
        Chain& c = chains[i];
        if (c.pos == c.stop) continue;
        ReadBlock(c.col, c.block, &c.value, &c.gap_offset);
        if (c.steps != 0) psi_gaps_.Prefetch(c.gap_offset);
      }
      for (uint64_t i = 0; i < active; ++i) {  // stage 3: decode
        Chain& c = chains[i];
        if (c.pos == c.stop) continue;
        if (c.gap_offset > psi_gap_bits_) [[unlikely]] {
          c.row = kInvalidRow;
        } else {
          c.row = c.steps == 0 ? c.value : DecodeGaps(c.col, c.gap_offset, c.steps, c.value);
        }
      }
      while (active > 0 && chains[active - 1].pos == chains[active - 1].stop) --active;
    }
  }
  return Status::OK();
}

template <typename Row>
Status CompressedFile::Impl::ExtractAll(std::string* out) const {
  if (n_ == 0) return Status::OK();
  // Psi of every row, column by column, block by block: each gap decoded once.
  std::vector<Row> psi(n_ + 1);
  for (uint32_t col = 0; col < num_cols_; ++col) {
    const uint64_t first = col_start_[col], end = col_start_[col + 1];
    const uint64_t block = 1ull << block_shift_;
    for (uint64_t b = 0; first + (b << block_shift_) < end; ++b) {
      uint64_t value, offset;
      ReadBlock(col, b, &value, &offset);
      if (offset > psi_gap_bits_) return Corrupt("invalid Psi block while extracting");
      uint64_t row = first + (b << block_shift_);
      const uint64_t stop = std::min(end, row + block);
      psi[row] = static_cast<Row>(value);
      GapReader reader(psi_gaps_, codes_[col], offset);
      while (++row < stop) {
        const uint64_t w = reader.Window();
        if (uint64_t run = reader.UnitRun(w); run > 0) {
          const uint64_t k = std::min(run, stop - row);
          reader.SkipUnits(k);
          for (uint64_t i = 0; i < k; ++i) psi[row + i] = static_cast<Row>(++value);
          row += k - 1;
          continue;
        }
        const uint64_t gap = reader.Next(w);
        if (gap == 0) [[unlikely]]
          return Corrupt("invalid Psi gap while extracting");
        value += gap;
        psi[row] = static_cast<Row>(value);
      }
    }
  }
  // Then the text: T[pos] is the byte of row's column, and Psi moves to pos + 1. Each ISA sample
  // starts a chain over the next isa_rate positions; kChains chains advance in lockstep, each
  // prefetching its next Psi entry, so that their cache misses in `psi` (one per text byte, the
  // cost of this loop) overlap instead of adding up.
  const size_t start = out->size();
  out->resize(start + n_);
  char* dst = out->data() + start;
  constexpr uint64_t kChains = 16;
  const uint64_t step = uint64_t{1} << isa_shift_;
  const uint64_t samples = (n_ + step - 1) >> isa_shift_;
  uint64_t rows[kChains];
  for (uint64_t group = 0; group < samples; group += kChains) {
    const uint64_t num = std::min(kChains, samples - group);
    for (uint64_t i = 0; i < num; ++i) rows[i] = isa_.Get(group + i);
    const uint64_t base = group << isa_shift_;
    for (uint64_t k = 0; k < step; ++k) {
      for (uint64_t i = 0; i < num; ++i) {
        const uint64_t pos = base + (i << isa_shift_) + k;
        if (pos >= n_) continue;
        const uint64_t row = rows[i];
        if (row == 0 || row > n_) [[unlikely]] {
          out->resize(start);
          return Corrupt("invalid row while extracting");
        }
        dst[pos] = static_cast<char>(col_sym_[ColumnOf(row)]);
        rows[i] = psi[row];
        __builtin_prefetch(&psi[rows[i]]);
      }
    }
  }
  return Status::OK();
}

StatusOr<uint64_t> CompressedFile::Impl::Count(std::string_view pattern, uint64_t* lo_row) const {
  if (pattern.empty()) return Status::InvalidArgument("search pattern is empty");
  *lo_row = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(pattern.data());
  int32_t col = col_of_byte_[p[pattern.size() - 1]];
  if (col < 0) return 0;
  uint64_t lo = col_start_[col], hi = col_start_[col + 1];
  // Backward search: rows starting with c followed by the current range are those of column c whose
  // Psi lands in the range, a contiguous run because Psi increases within a column.
  for (size_t k = pattern.size() - 1; k-- > 0;) {
    col = col_of_byte_[p[k]];
    if (col < 0) return 0;
    uint64_t new_lo = LowerBound(static_cast<uint32_t>(col), lo);
    uint64_t new_hi = LowerBound(static_cast<uint32_t>(col), hi);
    if (new_lo >= new_hi) return 0;
    lo = new_lo;
    hi = new_hi;
  }
  *lo_row = lo;
  return hi - lo;
}

StatusOr<uint64_t> CompressedFile::Impl::Locate(uint64_t row) const {
  const uint64_t mask = LowMask(bucket_bits_);
  const uint32_t sa_rate = 1u << sa_shift_;
  for (uint64_t steps = 0; steps < sa_rate; ++steps) {
    if (row == 0) return n_ - steps;  // the sentinel's suffix starts at n
    if (row > n_) break;
    // Is `row` marked? Binary search its low bits among the marks of its bucket.
    uint64_t b = row >> bucket_bits_;
    uint64_t lo = buckets_.Get(b), end = buckets_.Get(b + 1), hi = end;
    if (end > low_.count) break;
    uint64_t target = row & mask;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (low_.Get(mid) < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo < end && low_.Get(lo) == target) {
      return (sa_.Get(lo) << sa_shift_) - steps;
    }
    row = Psi(row);
  }
  return Corrupt("no SA sample within the sampling distance");
}

// ---- CompressedFile ----

CompressedFile::CompressedFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompressedFile::~CompressedFile() = default;

StatusOr<std::unique_ptr<CompressedFile>> CompressedFile::Open(const std::string& path,
                                                               const OpenOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  auto impl = std::make_unique<Impl>();
  CompressedFileOptions file_options;
  ZIPG_RETURN_IF_ERROR(impl->Init(file->data(), file->size(), path, options, &file_options));
  impl->file = std::move(file);
  std::unique_ptr<CompressedFile> f(new CompressedFile(std::move(impl)));
  f->options_ = file_options;
  return f;
}

StatusOr<std::unique_ptr<CompressedFile>> CompressedFile::OpenBuffer(std::string bytes,
                                                                     const OpenOptions& options) {
  auto impl = std::make_unique<Impl>();
  // Copy into 64-bit words so that sections are aligned for in-place reads.
  impl->buffer.assign((bytes.size() + 7) / 8, 0);
  if (!bytes.empty()) std::memcpy(impl->buffer.data(), bytes.data(), bytes.size());
  CompressedFileOptions file_options;
  ZIPG_RETURN_IF_ERROR(impl->Init(reinterpret_cast<const char*>(impl->buffer.data()), bytes.size(),
                                  "<buffer>", options, &file_options));
  std::unique_ptr<CompressedFile> f(new CompressedFile(std::move(impl)));
  f->options_ = file_options;
  return f;
}

uint64_t CompressedFile::size() const { return impl_->n(); }

Status CompressedFile::Extract(uint64_t offset, uint64_t len, std::string* out) const {
  return impl_->Extract(offset, len, out);
}

Status CompressedFile::ExtractAll(std::string* out) const {
  return impl_->n() < (uint64_t{1} << 32) ? impl_->ExtractAll<uint32_t>(out)
                                           : impl_->ExtractAll<uint64_t>(out);
}

uint64_t CompressedFile::ExtractAllMemory() const {
  // The text, and Psi of every row as 4-byte (8-byte past 4 GiB) entries.
  const uint64_t n = impl_->n();
  return n + (n + 1) * (n < (uint64_t{1} << 32) ? 4 : 8);
}

StatusOr<std::string> CompressedFile::Extract(uint64_t offset, uint64_t len) const {
  std::string out;
  ZIPG_RETURN_IF_ERROR(impl_->Extract(offset, len, &out));
  return out;
}

StatusOr<uint8_t> CompressedFile::CharAt(uint64_t offset) const {
  if (offset >= impl_->n()) {
    return Status::InvalidArgument("offset " + std::to_string(offset) +
                                   " is past the end of the text (" + std::to_string(impl_->n()) +
                                   " bytes)");
  }
  std::string out;
  ZIPG_RETURN_IF_ERROR(impl_->Extract(offset, 1, &out));
  return static_cast<uint8_t>(out[0]);
}

StatusOr<uint64_t> CompressedFile::Count(std::string_view pattern) const {
  uint64_t lo;
  return impl_->Count(pattern, &lo);
}

StatusOr<std::vector<uint64_t>> CompressedFile::Search(std::string_view pattern) const {
  uint64_t lo;
  ZIPG_ASSIGN_OR_RETURN(uint64_t count, impl_->Count(pattern, &lo));
  std::vector<uint64_t> offsets;
  offsets.reserve(count);
  for (uint64_t r = lo; r < lo + count; ++r) {
    ZIPG_ASSIGN_OR_RETURN(uint64_t pos, impl_->Locate(r));
    offsets.push_back(pos);
  }
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

uint64_t CompressedFile::SizeInBytes() const { return impl_->file_size(); }

std::vector<ComponentSize> CompressedFile::Breakdown() const {
  const auto& s = impl_->sections();
  auto len = [&](uint32_t id) { return s[id - 1].length; };
  return {
      {"header", format::kHeaderSize + format::kNumSections * format::kSectionEntrySize},
      {"counts", len(format::kCounts)},
      {"psi_samples", len(format::kPsiSamples)},
      {"psi_gaps", len(format::kPsiGaps)},
      {"psi_columns", len(format::kPsiColumns)},
      {"isa_samples", len(format::kIsaSamples)},
      {"sa_samples", len(format::kSaSamples)},
      {"sa_marks", len(format::kSaMarkBuckets) + len(format::kSaMarkLow)},
  };
}

Status CompressedFile::Verify() const { return impl_->Verify(); }

}  // namespace zipg::layout
