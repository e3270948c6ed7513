// RandomAccessText: a stored, immutable byte string read by offset. What an EdgeFile keeps its
// records in: a CompressedFile (suffix structure, EdgeFile formats 1-3) or a BlockFile (zstd
// blocks, format 4).
//
// Thread-safety: implementations are immutable once opened; all const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace zipg::layout {

struct OpenOptions {
  // Verify every section's checksum while opening (reads the whole file once). With false, opening
  // only checks the header, section table and sizes; a corrupted data section then yields wrong
  // answers or CORRUPTION errors from queries, but never a crash.
  bool verify_checksums = true;
};

// One component of the stored size, as written in the file.
struct ComponentSize {
  std::string name;
  uint64_t bytes = 0;
};

class RandomAccessText {
 public:
  virtual ~RandomAccessText() = default;

  // Length of the text in bytes.
  virtual uint64_t size() const = 0;
  // Appends text[offset, offset + len) to *out, clamped to the end of the text like substr.
  // INVALID_ARGUMENT if offset > size().
  virtual Status Extract(uint64_t offset, uint64_t len, std::string* out) const = 0;
  // Appends the whole text to *out, faster per byte than Extract: for readers of a whole file.
  // Needs ExtractAllMemory() bytes while it runs, the text included.
  virtual Status ExtractAll(std::string* out) const = 0;
  virtual uint64_t ExtractAllMemory() const = 0;
  // Bytes of the stored file; equals the sum of Breakdown().
  virtual uint64_t SizeInBytes() const = 0;
  virtual std::vector<ComponentSize> Breakdown() const = 0;
};

class CompressedFile;

// Opens the record text of a NodeFile or EdgeFile at `path`: a BlockFile if `blocks`, else a
// CompressedFile, which *suffix then points to (for searches; nullptr for a BlockFile).
StatusOr<std::unique_ptr<RandomAccessText>> OpenRecordText(const std::string& path, bool blocks,
                                                           const OpenOptions& options,
                                                           const CompressedFile** suffix);

}  // namespace zipg::layout
