// Construction and serialization of a CompressedFile (the query side is compressed_file.cc).
//
// Memory during construction: the text, the suffix array and the inverse suffix array (4 + 4 bytes
// per text byte on the 32-bit path, 8 + 8 on the 64-bit path), plus the output sections.

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

// The sections for text `t` given its suffix array `sa` (Index is int32_t or int64_t).
template <typename Index>
void BuildSections(std::string_view t, const std::vector<Index>& sa,
                   const CompressedFileOptions& opt, Built* out) {
  const uint64_t n = t.size();
  const uint64_t rows = n + 1;  // row 0 is the sentinel's suffix
  out->n = n;

  // isa[p] = row of the suffix at p.
  std::vector<Index> isa(n);
  for (uint64_t i = 0; i < n; ++i) isa[static_cast<uint64_t>(sa[i])] = static_cast<Index>(i + 1);

  std::array<uint64_t, 256> counts{};
  for (unsigned char c : t) ++counts[c];
  std::array<uint64_t, 257> col_start{};  // first row of each byte's column
  col_start[0] = 1;
  for (int c = 0; c < 256; ++c) col_start[c + 1] = col_start[c] + counts[c];

  // Psi for every row (row 0's is isa[0] and is not stored in the blocks).
  std::vector<Index> psi(rows);
  for (uint64_t r = 1; r < rows; ++r) {
    uint64_t p = static_cast<uint64_t>(sa[r - 1]);
    psi[r] = p + 1 < n ? isa[p + 1] : 0;
  }

  // Column by column (rows of a column are contiguous and their Psi values increase): the gap code
  // from the column's gap statistics, then its blocks.
  const uint32_t block = opt.psi_block_size;
  std::vector<uint64_t> block_values, block_offsets;
  std::vector<uint64_t> column_words;  // per non-empty column: format::kColumnEntryBytes
  std::vector<uint64_t> column_first_block = {0};  // per non-empty column, plus the end
  BitWriter gaps;
  for (int c = 0; c < 256; ++c) {
    const uint64_t s = col_start[c], e = col_start[c + 1];
    if (s == e) continue;
    std::array<uint64_t, GapCode::kSymbols> z_counts{};
    for (uint64_t r = s; r < e; ++r) {
      if ((r - s) % block != 0) {
        uint64_t gap = static_cast<uint64_t>(psi[r]) - static_cast<uint64_t>(psi[r - 1]);
        ++z_counts[63 - std::countl_zero(gap)];
      }
    }
    GapCode::Lengths lengths = GapCode::BuildLengths(z_counts);
    GapCode code = std::move(GapCode::FromLengths(lengths)).value();  // valid by construction
    for (int w = 0; w < 8; ++w) {
      uint64_t word = 0;
      std::memcpy(&word, lengths.data() + 8 * w, 8);
      column_words.push_back(word);
    }
    column_words.push_back(0);  // sample widths, filled in below
    for (uint64_t r = s; r < e; ++r) {
      if ((r - s) % block == 0) {
        block_values.push_back(static_cast<uint64_t>(psi[r]));
        block_offsets.push_back(gaps.bit_size());
      } else {
        // > 0: Psi strictly increases within a column
        code.Encode(static_cast<uint64_t>(psi[r]) - static_cast<uint64_t>(psi[r - 1]), &gaps);
      }
    }
    column_first_block.push_back(block_values.size());
  }
  std::vector<Index>().swap(psi);
  out->psi_gap_bits = gaps.bit_size();
  out->psi_value_bits = BitsFor(n);
  out->psi_offset_bits = BitsFor(gaps.bit_size());
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
        max_dv = std::max(max_dv, block_values[b] - block_values[sb]);
        max_do = std::max(max_do, block_offsets[b] - block_offsets[sb]);
      }
      const uint32_t cwv = max_dv == 0 ? 0 : BitsFor(max_dv);
      const uint32_t cwo = max_do == 0 ? 0 : BitsFor(max_do);
      column_words[col * format::kColumnEntryWords + 8] = cwv | (cwo << 8);
      for (uint64_t b = b0; b < b1; ++b) {
        uint64_t sb = b0 + ((b - b0) / format::kBlocksPerSuper) * format::kBlocksPerSuper;
        if (b == sb) {
          w.Append(block_values[b], wv);
          w.Append(block_offsets[b], wo);
        } else {
          w.Append(block_values[b] - block_values[sb], cwv);
          w.Append(block_offsets[b] - block_offsets[sb], cwo);
        }
      }
    }
    Section samples{format::kPsiSamples, 0, w.bit_size(), {}};
    samples.words = w.Finish();
    out->sections[1] = std::move(samples);
  }
  out->sections[7] =
      Section{format::kPsiColumns, 8, column_words.size() * 8, std::move(column_words)};
  std::vector<uint64_t> gap_words = gaps.Finish();
  out->sections[2] = Section{format::kPsiGaps, 0, out->psi_gap_bits, std::move(gap_words)};

  // ISA samples.
  std::vector<uint64_t> isa_samples;
  for (uint64_t p = 0; p < n; p += opt.isa_sampling_rate) {
    isa_samples.push_back(static_cast<uint64_t>(isa[p]));
  }
  out->sections[3] = MakePacked(format::kIsaSamples, isa_samples, BitsFor(n));
  std::vector<Index>().swap(isa);

  // SA samples by value: rows whose text position is a multiple of sa_rate, in row order.
  const uint32_t sa_rate = opt.sa_sampling_rate;
  const uint32_t bucket_bits = static_cast<uint32_t>(std::countr_zero(sa_rate)) + 5;
  const uint64_t num_buckets = (rows >> bucket_bits) + 1;
  std::vector<uint64_t> sa_samples, low, buckets(num_buckets + 1, 0);
  for (uint64_t r = 1; r < rows; ++r) {
    uint64_t p = static_cast<uint64_t>(sa[r - 1]);
    if (p % sa_rate == 0) {
      sa_samples.push_back(p / sa_rate);
      low.push_back(r & LowMask(bucket_bits));
      ++buckets[(r >> bucket_bits) + 1];
    }
  }
  for (uint64_t b = 1; b <= num_buckets; ++b) buckets[b] += buckets[b - 1];
  out->num_marks = sa_samples.size();
  out->sa_bucket_bits = bucket_bits;
  out->sections[4] = MakePacked(format::kSaSamples, sa_samples, BitsFor(n / sa_rate));
  out->sections[5] = MakePacked(format::kSaMarkBuckets, buckets, BitsFor(sa_samples.size()));
  out->sections[6] = MakePacked(format::kSaMarkLow, low, bucket_bits);

  out->sections[0] =
      Section{format::kCounts, 64, 256, std::vector<uint64_t>(counts.begin(), counts.end())};
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
  const uint64_t n = text.size();
  const auto* t = reinterpret_cast<const unsigned char*>(text.data());
  if (!options.force_64bit_construction && n < static_cast<uint64_t>(INT32_MAX)) {
    std::vector<int32_t> sa(n);
    if (n > 0 && divsufsort(t, sa.data(), static_cast<saidx_t>(n)) != 0) {
      return Status::Internal("divsufsort failed");
    }
    BuildSections(text, sa, options, &built);
  } else {
    std::vector<int64_t> sa(n);
    if (n > 0 && divsufsort64(t, sa.data(), static_cast<saidx64_t>(n)) != 0) {
      return Status::Internal("divsufsort64 failed");
    }
    BuildSections(text, sa, options, &built);
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
