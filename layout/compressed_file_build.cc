// Construction and serialization of a CompressedFile (the query side is compressed_file.cc).
//
// Memory during construction: the text and the suffix array (4 bytes per text byte on the 32-bit
// path, 8 on the 64-bit path), then the text, the BWT (1 byte per byte) and the output sections.

#include <divsufsort.h>
#include <divsufsort64.h>

#include <array>
#include <bit>
#include <climits>
#include <cstring>

#include "layout/bits.h"
#include "layout/compressed_file.h"
#include "layout/format.h"
#include "layout/gap_code.h"
#include "util/checksum.h"
#include "util/coding.h"
#include "util/file.h"
#include "util/page_buffer.h"

namespace zipg::layout {
namespace {

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

Status CheckRate(const char* name, uint32_t value, uint32_t lo, uint32_t hi) {
  if (!IsPowerOfTwo(value) || value < lo || value > hi) {
    return Status::InvalidArgument(std::string(name) + " must be a power of two in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                   std::to_string(value));
  }
  return Status::OK();
}

// One section's contents before it is laid out in the file.
struct Section {
  uint32_t id = 0;
  uint32_t width = 0;
  uint64_t count = 0;
  std::vector<uint64_t> words;
};

struct Built {
  uint64_t n = 0;
  uint32_t psi_value_bits = 0;
  uint32_t psi_offset_bits = 0;
  uint32_t sa_bucket_bits = 0;
  uint64_t num_marks = 0;
  uint64_t psi_gap_bits = 0;
  std::array<Section, format::kNumSections> sections;  // in SectionId order
};

Section MakePacked(uint32_t id, const std::vector<uint64_t>& values, uint32_t width) {
  return Section{id, width, values.size(), Pack(values, width)};
}

// A packed array of `count` values of `width` bits, filled in any order; the layout of Pack().
class PackedArray {
 public:
  PackedArray(uint64_t count, uint32_t width)
      : words_(PackedView::WordsFor(count, width), 0), count_(count), width_(width) {}
  void Set(uint64_t i, uint64_t v) {
    const uint64_t bit = i * width_;
    sdsl::bits::write_int(words_.data() + (bit >> 6), v, static_cast<uint8_t>(bit & 63),
                          static_cast<uint8_t>(width_));
  }
  uint64_t Get(uint64_t i) const { return PackedView{words_.data(), count_, width_}.Get(i); }
  Section Take(uint32_t id) { return Section{id, width_, count_, std::move(words_)}; }

 private:
  std::vector<uint64_t> words_;
  uint64_t count_;
  uint32_t width_;
};

// The sections for text `t`, with suffix-array indexes of type Index (int32_t or int64_t).
//
// Memory: the suffix array (sizeof(Index) bytes per row) is the only large buffer besides the
// text. One pass over it takes the SA and ISA samples and turns it, in place, into the BWT (one
// byte per row: the byte before each row's suffix); the rest of the buffer is then given back.
// Psi is never materialized: the rows of column c, in order, have as Psi values the increasing
// rows j whose BWT byte is c (LF is Psi's inverse), so two more passes over the BWT gather each
// column's gap statistics, then write every column's blocks and gaps straight to their final
// places. Peak: text + suffix array + the samples (docs/graph-layout.md, "Memory model").
template <typename Index>
Status BuildSections(std::string_view t, const CompressedFileOptions& opt, Built* out) {
  const uint64_t n = t.size();
  const uint64_t rows = n + 1;  // row 0 is the sentinel's suffix
  const auto* text = reinterpret_cast<const unsigned char*>(t.data());
  out->n = n;

  std::array<uint64_t, 256> counts{};
  for (unsigned char c : t) ++counts[c];
  out->sections[0] =
      Section{format::kCounts, 64, 256, std::vector<uint64_t>(counts.begin(), counts.end())};

  // Suffix array of the n non-empty suffixes: sa[i] is the text position of row i + 1.
  PageBuffer buffer(n * sizeof(Index));
  Index* sa = buffer.as<Index>();
  if (n > 0) {
    int failed = 0;
    if constexpr (sizeof(Index) == 4) {
      failed = divsufsort(text, reinterpret_cast<saidx_t*>(sa), static_cast<saidx_t>(n));
    } else {
      failed = divsufsort64(text, reinterpret_cast<saidx64_t*>(sa), static_cast<saidx64_t>(n));
    }
    if (failed != 0) return Status::Internal("divsufsort failed");
  }

  // One pass over the rows: SA samples by value (rows whose text position is a multiple of
  // sa_rate, in row order), ISA samples (the row of every isa_rate-th position), and the BWT,
  // written over the suffix array: byte r is written after sa[r - 1] was read, and lies in an
  // element at or before it.
  const uint32_t sa_rate = opt.sa_sampling_rate, isa_rate = opt.isa_sampling_rate;
  const uint32_t bucket_bits = static_cast<uint32_t>(std::countr_zero(sa_rate)) + 5;
  const uint64_t num_buckets = (rows >> bucket_bits) + 1;
  const uint64_t num_marks = (n + sa_rate - 1) / sa_rate;
  PackedArray sa_samples(num_marks, BitsFor(n / sa_rate)), low(num_marks, bucket_bits);
  PackedArray isa_samples((n + isa_rate - 1) / isa_rate, BitsFor(n));
  std::vector<uint64_t> buckets(num_buckets + 1, 0);
  uint8_t* const bwt = reinterpret_cast<uint8_t*>(buffer.data());
  uint64_t dollar_row = 0;  // the row whose BWT "byte" is the sentinel (the whole text's row)
  uint64_t mark = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t p = static_cast<uint64_t>(sa[i]), r = i + 1;
    if (p % sa_rate == 0) {
      sa_samples.Set(mark, p / sa_rate);
      low.Set(mark, r & LowMask(bucket_bits));
      ++buckets[(r >> bucket_bits) + 1];
      ++mark;
    }
    if (p % isa_rate == 0) isa_samples.Set(p / isa_rate, r);
    if (p == 0) dollar_row = r;
    bwt[r] = p == 0 ? 0 : text[p - 1];
  }
  if (n > 0) {
    bwt[0] = text[n - 1];  // row 0 (the sentinel's suffix) follows the last byte
    buffer.ShrinkTo(rows);
  }
  for (uint64_t b = 1; b <= num_buckets; ++b) buckets[b] += buckets[b - 1];
  out->num_marks = num_marks;
  out->sa_bucket_bits = bucket_bits;
  out->sections[3] = isa_samples.Take(format::kIsaSamples);
  out->sections[4] = sa_samples.Take(format::kSaSamples);
  out->sections[5] = MakePacked(format::kSaMarkBuckets, buckets, BitsFor(num_marks));
  out->sections[6] = low.Take(format::kSaMarkLow);

  // Visits the rows j in increasing order with their column c = bwt[j] and index k within the
  // column (Psi of the column's k-th row is j), skipping the sentinel's row.
  auto for_each_psi = [&](auto&& visit) {
    if (n == 0) return;
    std::array<uint64_t, 256> seen{};
    for (uint64_t j = 0; j < rows; ++j) {
      if (j == dollar_row) continue;
      const uint8_t c = bwt[j];
      visit(c, seen[c]++, j);
    }
  };

  // Pass 1: each column's gap statistics (gaps inside blocks; a block starts with a sample).
  const uint32_t block = opt.psi_block_size;
  std::vector<std::array<uint64_t, GapCode::kSymbols>> z_counts(256);
  {
    std::array<uint64_t, 256> last{};
    for_each_psi([&](uint8_t c, uint64_t k, uint64_t j) {
      if (k % block != 0) ++z_counts[c][63 - std::countl_zero(j - last[c])];
      last[c] = j;
    });
  }

  // The code of each non-empty column, and where its gaps start in the stream.
  std::vector<GapCode> codes(256);
  std::vector<uint64_t> column_words;  // per non-empty column: format::kColumnEntryWords
  std::array<uint64_t, 256> cursor{}, first_block{};
  uint64_t total_bits = 0, num_blocks = 0;
  std::vector<uint64_t> column_first_block = {0};  // per non-empty column, plus the end
  for (int c = 0; c < 256; ++c) {
    if (counts[c] == 0) continue;
    const GapCode::Lengths lengths = GapCode::BuildLengths(z_counts[c]);
    codes[c] = std::move(GapCode::FromLengths(lengths)).value();  // valid by construction
    for (int w = 0; w < 8; ++w) {
      uint64_t word = 0;
      std::memcpy(&word, lengths.data() + 8 * w, 8);
      column_words.push_back(word);
    }
    column_words.push_back(0);  // sample widths, filled in below
    cursor[c] = total_bits;
    for (uint32_t z = 0; z < GapCode::kSymbols; ++z) {
      total_bits += z_counts[c][z] * codes[c].CodedBits(z);
    }
    first_block[c] = num_blocks;
    num_blocks += (counts[c] + block - 1) / block;
    column_first_block.push_back(num_blocks);
  }
  std::vector<std::array<uint64_t, GapCode::kSymbols>>().swap(z_counts);
  out->psi_gap_bits = total_bits;
  out->psi_value_bits = BitsFor(n);
  out->psi_offset_bits = BitsFor(total_bits);

  // Pass 2: block samples (first value and gap offset of every block) and the gaps, each column
  // writing at its own cursor. One zero word of padding follows the last bit, as BitWriter does.
  std::vector<uint64_t> gaps((total_bits + 63) / 64 + 1, 0);
  PackedArray block_values(num_blocks, out->psi_value_bits);
  PackedArray block_offsets(num_blocks, out->psi_offset_bits);
  {
    std::array<uint64_t, 256> last{};
    for_each_psi([&](uint8_t c, uint64_t k, uint64_t j) {
      if (k % block == 0) {
        const uint64_t b = first_block[c] + k / block;
        block_values.Set(b, j);
        block_offsets.Set(b, cursor[c]);
      } else {
        codes[c].EncodeAt(j - last[c], gaps.data(), &cursor[c]);
      }
      last[c] = j;
    });
  }
  buffer = PageBuffer();
  {
    // Block samples, column by column in superblocks of kBlocksPerSuper blocks: a record holds the
    // superblock's first block value and gap offset in full, then for each further block its value
    // and offset relative to those, at widths fixed per column.
    const uint32_t wv = out->psi_value_bits, wo = out->psi_offset_bits;
    BitWriter w;
    const uint64_t num_cols = column_first_block.size() - 1;
    for (uint64_t col = 0; col < num_cols; ++col) {
      const uint64_t b0 = column_first_block[col], b1 = column_first_block[col + 1];
      uint64_t max_dv = 0, max_do = 0;
      for (uint64_t b = b0; b < b1; ++b) {
        uint64_t sb = b0 + ((b - b0) / format::kBlocksPerSuper) * format::kBlocksPerSuper;
        max_dv = std::max(max_dv, block_values.Get(b) - block_values.Get(sb));
        max_do = std::max(max_do, block_offsets.Get(b) - block_offsets.Get(sb));
      }
      const uint32_t cwv = max_dv == 0 ? 0 : BitsFor(max_dv);
      const uint32_t cwo = max_do == 0 ? 0 : BitsFor(max_do);
      column_words[col * format::kColumnEntryWords + 8] = cwv | (cwo << 8);
      for (uint64_t b = b0; b < b1; ++b) {
        uint64_t sb = b0 + ((b - b0) / format::kBlocksPerSuper) * format::kBlocksPerSuper;
        if (b == sb) {
          w.Append(block_values.Get(b), wv);
          w.Append(block_offsets.Get(b), wo);
        } else {
          w.Append(block_values.Get(b) - block_values.Get(sb), cwv);
          w.Append(block_offsets.Get(b) - block_offsets.Get(sb), cwo);
        }
      }
    }
    Section samples{format::kPsiSamples, 0, w.bit_size(), {}};
    samples.words = w.Finish();
    out->sections[1] = std::move(samples);
  }
  out->sections[7] =
      Section{format::kPsiColumns, 8, column_words.size() * 8, std::move(column_words)};
  out->sections[2] = Section{format::kPsiGaps, 0, total_bits, std::move(gaps)};
  return Status::OK();
}

// Writes the header, section table and sections of `b` to `sink`.
Status Serialize(const Built& b, const CompressedFileOptions& opt, const FileSink& sink) {
  std::string header(format::kHeaderSize, '\0');
  std::memcpy(header.data() + format::kOffMagic, format::kMagic, sizeof(format::kMagic));
  auto put32 = [&](int off, uint32_t v) { EncodeFixed32(header.data() + off, v); };
  auto put64 = [&](int off, uint64_t v) { EncodeFixed64(header.data() + off, v); };
  put32(format::kOffVersion, format::kVersion);
  put32(format::kOffNumSections, format::kNumSections);
  put64(format::kOffTextSize, b.n);
  put32(format::kOffSaRate, opt.sa_sampling_rate);
  put32(format::kOffIsaRate, opt.isa_sampling_rate);
  put32(format::kOffPsiBlock, opt.psi_block_size);
  put32(format::kOffPsiValueBits, b.psi_value_bits);
  put32(format::kOffPsiOffsetBits, b.psi_offset_bits);
  put32(format::kOffSaBucketBits, b.sa_bucket_bits);
  put64(format::kOffNumMarks, b.num_marks);
  put64(format::kOffPsiGapBits, b.psi_gap_bits);

  std::string table;
  uint64_t offset = format::kHeaderSize + format::kNumSections * format::kSectionEntrySize;
  for (const Section& s : b.sections) {
    uint64_t length = s.words.size() * 8;
    PutFixed32(&table, s.id);
    PutFixed32(&table, s.width);
    PutFixed64(&table, s.count);
    PutFixed64(&table, offset);
    PutFixed64(&table, length);
    PutFixed64(&table, Checksum64(s.words.data(), length));
    offset += length;
  }
  std::string covered = header + table;  // checksum field is still zero here
  put64(format::kOffHeaderChecksum, Checksum64(covered.data(), covered.size()));

  ZIPG_RETURN_IF_ERROR(sink(header));
  ZIPG_RETURN_IF_ERROR(sink(table));
  for (const Section& s : b.sections) {
    ZIPG_RETURN_IF_ERROR(
        sink(std::string_view(reinterpret_cast<const char*>(s.words.data()), s.words.size() * 8)));
  }
  return Status::OK();
}

StatusOr<Built> BuildAll(std::string_view text, const CompressedFileOptions& options) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  Built built;
  try {
    if (!options.force_64bit_construction && text.size() < static_cast<uint64_t>(INT32_MAX)) {
      ZIPG_RETURN_IF_ERROR(BuildSections<int32_t>(text, options, &built));
    } else {
      ZIPG_RETURN_IF_ERROR(BuildSections<int64_t>(text, options, &built));
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory building a compressed file of " +
                                     std::to_string(text.size()) + " bytes");
  }
  return built;
}

}  // namespace

Status CompressedFileOptions::Validate() const {
  ZIPG_RETURN_IF_ERROR(CheckRate("sa_sampling_rate", sa_sampling_rate, 1, 1024));
  ZIPG_RETURN_IF_ERROR(CheckRate("isa_sampling_rate", isa_sampling_rate, 1, 1024));
  ZIPG_RETURN_IF_ERROR(CheckRate("psi_block_size", psi_block_size, 2, 1024));
  return Status::OK();
}

Status CompressedFile::Build(std::string_view text, const CompressedFileOptions& options,
                             const std::string& path) {
  ZIPG_ASSIGN_OR_RETURN(Built built, BuildAll(text, options));
  return WriteFileAtomically(path,
                             [&](const FileSink& sink) { return Serialize(built, options, sink); });
}

StatusOr<std::string> CompressedFile::BuildToBuffer(std::string_view text,
                                                    const CompressedFileOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(Built built, BuildAll(text, options));
  std::string out;
  ZIPG_RETURN_IF_ERROR(Serialize(built, options, [&](std::string_view chunk) {
    out.append(chunk);
    return Status::OK();
  }));
  return out;
}

}  // namespace zipg::layout
