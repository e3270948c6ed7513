// BlockFile: a byte string stored as independently compressed blocks (zstd, with a dictionary
// trained on the text), read by offset. It answers random access only, no search: an offset's
// block is decompressed whole (a few microseconds for a 4 KiB block), where a CompressedFile walks
// Psi once per byte. The EdgeFile keeps its records in one (format 4; docs/layout-v2.md).
//
// Each thread keeps its last few decompressed blocks, so the several reads of one query that fall
// in one block decompress it once.
//
// Files are written atomically, with a versioned header whose checksum covers the dictionary and
// the block directory, a checksum of the compressed blocks (checked at open with
// OpenOptions::verify_checksums) and zstd's own checksum in every block (checked on every read).
//
// Thread-safety: immutable once opened; all const methods may be called concurrently.
#pragma once

#include <algorithm>
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

struct BlockFileOptions {
  // Text bytes per block. Larger: smaller file, more bytes decompressed per random read. Power of
  // two, 1 KiB..64 KiB. Default 4 KiB.
  uint32_t block_bytes = 4096;
  // zstd compression level, 1..19. Higher: smaller file, slower build; reads cost the same.
  // Default 6 with a 1 MiB dictionary: on the 100k/1M graph (docs/writes.md, "Bulk load") the
  // store is 0.610 of the CSV in 9 s against 0.592 in 55 s at level 19 with 256 KiB; level 9 with
  // 512 KiB gives 0.607 in 11.6 s. Level 7 and up cost twice level 6's compression time.
  int level = 6;
  // Upper bound on the bytes of the dictionary trained on the text's blocks (0: no dictionary).
  // A dictionary lets small blocks share what they have in common (property names, repeated
  // values). A text shorter than BlockFile::kMinTrainingText, or one training finds nothing in,
  // gets none. Default 1 MiB: at level 6 the store is 0.619 of the CSV with 256 KiB, 0.613 with
  // 512 KiB and 0.610 with 1 MiB, for the same build time.
  uint32_t dictionary_bytes = 1 << 20;

  // OK, or INVALID_ARGUMENT naming the offending field.
  Status Validate() const;
};

class BlockFile : public RandomAccessText {
 public:
  // Texts shorter than this get no dictionary: it would cost about as much as it saves.
  static constexpr uint64_t kMinTrainingText = 1 << 20;
  // A dictionary is at most this fraction of its text: a 1 MiB dictionary for a text of 2 MiB
  // would cost what it saves (a 3,000-node graph was stored at 1.00 of its CSV, against 0.55).
  static constexpr uint64_t kTextBytesPerDictionaryByte = 32;
  // The bytes of the dictionary a text of `text_bytes` gets at most: 0 below kMinTrainingText,
  // else options.dictionary_bytes up to 1/kTextBytesPerDictionaryByte of the text.
  static uint64_t DictionaryBytes(uint64_t text_bytes, const BlockFileOptions& options) {
    if (text_bytes < kMinTrainingText) return 0;
    return std::min<uint64_t>(options.dictionary_bytes, text_bytes / kTextBytesPerDictionaryByte);
  }
  // Dictionary training samples this many times the dictionary's bytes of the text's blocks.
  // zstd advises about 100x; on the generated 100k/1M graph 15x gave files within 0.2% of 100x's
  // in a fifth of the training time (docs/writes.md, "Bulk load").
  static constexpr uint64_t kTrainingRatio = 15;
  // Build memory beyond the text and its blocks, when the text is long enough to train a
  // dictionary: the training's samples, fastCover's tables (6 MiB at f = 20) and the dictionary,
  // then the compression dictionary (zstd's own estimate for the level) and the compression
  // context; 16 MiB spare. Without a dictionary zstd's context (under 0.3 MB) is left to the
  // caller's baseline.
  static uint64_t BuildWorkingBytes(uint64_t text_bytes, const BlockFileOptions& options);

  // Compresses `text` and writes it to `path` atomically.
  static Status Build(std::string_view text, const BlockFileOptions& options,
                      const std::string& path);
  // Wrong magic, unknown version, truncation and corruption of the header, dictionary or block
  // directory are CORRUPTION errors naming the file; so is a corrupted block (at open with
  // verify_checksums, else when it is read).
  static StatusOr<std::unique_ptr<BlockFile>> Open(const std::string& path,
                                                   const OpenOptions& options = {});

  ~BlockFile() override;
  BlockFile(const BlockFile&) = delete;
  BlockFile& operator=(const BlockFile&) = delete;

  uint64_t size() const override { return text_size_; }
  // The options the file was built with (dictionary_bytes: the dictionary's actual size).
  const BlockFileOptions& options() const { return options_; }
  uint64_t num_blocks() const { return num_blocks_; }

  Status Extract(uint64_t offset, uint64_t len, std::string* out) const override;
  Status ExtractAll(std::string* out) const override;
  uint64_t ExtractAllMemory() const override;
  uint64_t SizeInBytes() const override;
  // "header", "dictionary", "block_directory", "blocks".
  std::vector<ComponentSize> Breakdown() const override;
  // Checks the blocks' checksum; CORRUPTION if it does not match.
  Status Verify() const;

 private:
  BlockFile() = default;
  Status Corrupt(const std::string& what) const;
  // Decompresses block b, exactly its text length, into dst.
  Status Decode(uint64_t b, char* dst) const;
  // Block b's text, from this thread's cache of decompressed blocks (decoded into it if absent).
  StatusOr<std::string_view> Cached(uint64_t b) const;
  uint64_t BlockLength(uint64_t b) const {
    return std::min<uint64_t>(options_.block_bytes, text_size_ - b * options_.block_bytes);
  }

  class Dictionary;
  std::unique_ptr<MappedFile> file_;
  std::unique_ptr<Dictionary> dictionary_;
  BlockFileOptions options_;
  uint64_t id_ = 0;  // unique among all BlockFiles opened by this process (the cache's key)
  uint64_t text_size_ = 0;
  uint64_t num_blocks_ = 0;
  const char* directory_ = nullptr;  // num_blocks + 1 u64 offsets into blocks_
  const char* blocks_ = nullptr;
  uint64_t blocks_bytes_ = 0;
  uint64_t blocks_checksum_ = 0;
  uint64_t directory_offset_ = 0;
  uint64_t dictionary_size_ = 0;
};

}  // namespace zipg::layout
