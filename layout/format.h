// The on-disk format of a CompressedFile (docs/compressed-file.md describes it in prose).
//
//   [header: 128 bytes][section table: kNumSections x 40 bytes][section 1][section 2]...
//
// All integers little-endian. Every section is a whole number of 64-bit words, so each starts
// 8-byte aligned and can be read in place from the mmap. The header checksum (XXH3-64) covers the
// header with its checksum field zeroed plus the section table; each section has its own checksum.
#pragma once

#include <cstdint>

namespace zipg::layout::format {

inline constexpr char kMagic[8] = {'Z', 'I', 'P', 'G', 'C', 'S', 'F', '\0'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint64_t kHeaderSize = 128;
inline constexpr uint64_t kSectionEntrySize = 40;

// Header field offsets.
inline constexpr int kOffMagic = 0;             // char[8]
inline constexpr int kOffVersion = 8;           // u32
inline constexpr int kOffNumSections = 12;      // u32
inline constexpr int kOffTextSize = 16;         // u64  n
inline constexpr int kOffSaRate = 24;           // u32
inline constexpr int kOffIsaRate = 28;          // u32
inline constexpr int kOffPsiBlock = 32;         // u32
inline constexpr int kOffPsiValueBits = 36;     // u32  width of a block's first Psi value
inline constexpr int kOffPsiOffsetBits = 40;    // u32  width of a block's bit offset into psi_gaps
inline constexpr int kOffSaBucketBits = 44;     // u32  log2 of rows per sa_marks bucket
inline constexpr int kOffNumMarks = 48;         // u64  rows holding an SA sample
inline constexpr int kOffPsiGapBits = 56;       // u64  bits used in psi_gaps
inline constexpr int kOffHeaderChecksum = 120;  // u64

// Section table entry field offsets.
inline constexpr int kEntId = 0;         // u32
inline constexpr int kEntWidth = 4;      // u32  bits per element (packed arrays), 0 otherwise
inline constexpr int kEntCount = 8;      // u64  elements
inline constexpr int kEntOffset = 16;    // u64  byte offset in the file
inline constexpr int kEntLength = 24;    // u64  bytes (a multiple of 8)
inline constexpr int kEntChecksum = 32;  // u64  XXH3-64 of the section bytes

enum SectionId : uint32_t {
  kCounts = 1,      // 256 x u64: occurrences of each byte value
  kPsiSamples = 2,  // bit string: per column, per superblock of kBlocksPerSuper Psi blocks, a
                    // record: (first value, gap bit offset) in full, then for each further block
                    // the two relative to those at the column's widths; plus one zero padding word
  kPsiGaps = 3,        // bit string: coded gaps (layout/gap_code.h), plus one zero padding word
  kIsaSamples = 4,     // packed: row of text position k * isa_rate
  kSaSamples = 5,      // packed: text position / sa_rate of each marked row, in row order
  kSaMarkBuckets = 6,  // packed: marked rows before each bucket of 2^bucket_bits rows (+1 entry)
  kSaMarkLow = 7,      // packed: low bucket_bits bits of each marked row, in row order
  kPsiColumns = 8,  // per non-empty column, kColumnEntryWords words: 64 gap code lengths (one per
                    // z, layout/gap_code.h), then u8 relative value width, u8 relative offset width
};
inline constexpr uint32_t kNumSections = 8;
inline constexpr uint64_t kBlocksPerSuper = 16;
inline constexpr uint64_t kColumnEntryWords = 9;

inline const char* SectionName(uint32_t id) {
  switch (id) {
    case kCounts:
      return "counts";
    case kPsiSamples:
      return "psi_samples";
    case kPsiGaps:
      return "psi_gaps";
    case kIsaSamples:
      return "isa_samples";
    case kSaSamples:
      return "sa_samples";
    case kSaMarkBuckets:
      return "sa_mark_buckets";
    case kSaMarkLow:
      return "sa_mark_low";
    case kPsiColumns:
      return "psi_columns";
  }
  return "unknown";
}

}  // namespace zipg::layout::format
