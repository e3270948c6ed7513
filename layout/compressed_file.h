// CompressedFile: a byte string stored as a Succinct-style compressed suffix structure that answers
// random access (Extract, CharAt), Search and Count directly on the compressed form.
//
// The structure (docs/compressed-file.md has the full design and the on-disk format):
//  * the text T of n bytes is extended by a virtual end sentinel that sorts below every byte, so
//  any byte
//    value 0..255 may appear in T; the sentinel is never stored and never returned;
//  * rows 0..n are the suffixes of T$ in sorted order (row 0 is the sentinel's suffix);
//  * Psi(row) is the row of the suffix one position later; within the rows that start with one byte
//    ("column") Psi increases, so each column is stored as blocks of `psi_block_size` values: a
//    sampled first value plus gaps in a code fitted to that column (layout/gap_code.h);
//  * ISA samples: the row of every isa_sampling_rate-th text position (for Extract);
//  * SA samples: for each row whose text position is a multiple of sa_sampling_rate, that position
//  (for
//    Search), with a compact rank structure to find them.
//
// Files are written atomically with a versioned header and per-section checksums, and opened with
// mmap.
//
// Thread-safety: a CompressedFile is immutable once opened; all const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layout/random_access_text.h"
#include "util/status.h"

namespace zipg {
class MappedFile;
}

namespace zipg::layout {

struct CompressedFileOptions {
  // Every sa_sampling_rate-th text position keeps its suffix-array row. Larger: smaller file,
  // slower Search (each result walks up to rate-1 Psi steps). Power of two, 1..1024. Default 32.
  uint32_t sa_sampling_rate = 32;
  // Every isa_sampling_rate-th text position keeps its row. Larger: smaller file, slower Extract (a
  // read at a random offset first walks on average rate/2 Psi steps). Power of two, 1..1024.
  // Default 32.
  uint32_t isa_sampling_rate = 32;
  // Psi values per block (one absolute sample + gaps). Larger: smaller file, slower Psi access
  // (decodes on average half a block). Power of two, 2..1024. Default 64.
  uint32_t psi_block_size = 64;
  // Build the suffix array with 64-bit indexes even when the text is shorter than 2^31 bytes (the
  // path larger texts take anyway). For tests of that path; the file is the same either way.
  bool force_64bit_construction = false;

  // OK, or INVALID_ARGUMENT naming the offending field.
  Status Validate() const;
};

class CompressedFile : public RandomAccessText {
 public:
  // Compresses `text` and writes it to `path` atomically (a temporary file renamed into place).
  static Status Build(std::string_view text, const CompressedFileOptions& options,
                      const std::string& path);
  // Compresses `text` into the bytes of a file, in memory.
  static StatusOr<std::string> BuildToBuffer(std::string_view text,
                                             const CompressedFileOptions& options);

  // Opens a file written by Build. Wrong magic, unknown version, truncation and (with verification)
  // corruption are CORRUPTION errors naming the file and what is wrong.
  static StatusOr<std::unique_ptr<CompressedFile>> Open(const std::string& path,
                                                        const OpenOptions& options = {});
  // Opens the bytes produced by BuildToBuffer; the object keeps them.
  static StatusOr<std::unique_ptr<CompressedFile>> OpenBuffer(std::string bytes,
                                                              const OpenOptions& options = {});

  ~CompressedFile() override;
  CompressedFile(const CompressedFile&) = delete;
  CompressedFile& operator=(const CompressedFile&) = delete;

  // Length n of the original text in bytes.
  uint64_t size() const override;
  // The sampling options the file was built with (force_64bit_construction is not recorded: false).
  const CompressedFileOptions& options() const { return options_; }

  // Appends text[offset, offset + len) to *out, clamped to the end of the text like substr.
  // INVALID_ARGUMENT if offset > size().
  Status Extract(uint64_t offset, uint64_t len, std::string* out) const override;
  StatusOr<std::string> Extract(uint64_t offset, uint64_t len) const;
  // Appends the whole text to *out by decoding every Psi value once, in order (O(n) gap decodes,
  // where Extract costs about half a Psi block of them per byte): for readers of a whole file.
  // Needs ExtractAllMemory() bytes while it runs, the text included.
  Status ExtractAll(std::string* out) const override;
  uint64_t ExtractAllMemory() const override;
  // The byte at `offset`; INVALID_ARGUMENT if offset >= size().
  StatusOr<uint8_t> CharAt(uint64_t offset) const;

  // Number of (possibly overlapping) occurrences of `pattern`. INVALID_ARGUMENT if it is empty.
  StatusOr<uint64_t> Count(std::string_view pattern) const;
  // Offsets of all (possibly overlapping) occurrences, ascending. INVALID_ARGUMENT if it is empty.
  StatusOr<std::vector<uint64_t>> Search(std::string_view pattern) const;

  // Bytes of the stored file; equals the sum of Breakdown().
  uint64_t SizeInBytes() const override;
  // Stored bytes per component: "header", "counts", "psi_samples", "psi_gaps", "psi_columns",
  // "isa_samples", "sa_samples", "sa_marks", as recorded in the file's section table.
  std::vector<ComponentSize> Breakdown() const override;
  // Checks every section checksum; CORRUPTION naming the first bad section.
  Status Verify() const;

  class Impl;

 private:
  explicit CompressedFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  CompressedFileOptions options_;
};

}  // namespace zipg::layout
