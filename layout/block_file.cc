// BlockFile: building, opening and reading. The format (little-endian; docs/layout-v2.md):
//
//   [header: 64 bytes][dictionary][block directory: (num_blocks + 1) x u64][blocks]
//
//   header: 0 magic "ZIPGBLK\0", 8 u32 version, 12 u32 block_bytes, 16 u64 text_size,
//           24 u64 num_blocks, 32 u32 dictionary_bytes, 36 u32 level, 40 u64 blocks_bytes,
//           48 u64 XXH3-64 of the blocks, 56 u64 XXH3-64 of header[0, 56) followed by the
//           dictionary and the directory
//   directory: where block b's zstd frame starts, relative to the blocks; the last entry is
//           blocks_bytes. Block b holds text[b * block_bytes, (b + 1) * block_bytes), the last
//           block the rest; each frame carries its content size and checksum.

#include "layout/block_file.h"

// ZDICT_trainFromBuffer_fastCover (exported by libzstd 1.5; declared under this macro).
#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
// ZSTD_estimateCDictSize, ZSTD_estimateCCtxSize (the build's memory plan).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>

#include "util/checksum.h"
#include "util/coding.h"
#include "util/file.h"
#include "util/phase_times.h"

namespace zipg::layout {

namespace {
constexpr char kMagic[8] = {'Z', 'I', 'P', 'G', 'B', 'L', 'K', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kHeaderSize = 64;
constexpr uint64_t kHeaderChecksumOffset = 56;
// Decompressed blocks each thread keeps.
constexpr size_t kCachedBlocks = 8;

std::atomic<uint64_t> next_file_id{1};

// Each thread's decompression context and its last decompressed blocks, least recently used
// first out. Keyed by the file's process-unique id, so a closed file's blocks are never mistaken
// for another's; they just age out.
struct ThreadBlocks {
  struct Slot {
    uint64_t file = 0;  // 0: empty
    uint64_t block = 0;
    uint64_t used = 0;
    std::string bytes;
  };
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::array<Slot, kCachedBlocks> slots;
  uint64_t clock = 0;
  ~ThreadBlocks() { ZSTD_freeDCtx(dctx); }
};
ThreadBlocks& Blocks() {
  thread_local ThreadBlocks blocks;
  return blocks;
}

uint64_t HeaderChecksum(const char* header, std::string_view rest) {
  std::string bytes(header, kHeaderChecksumOffset);
  bytes.append(rest);
  return Checksum64(bytes.data(), bytes.size());
}
}  // namespace

class BlockFile::Dictionary {
 public:
  explicit Dictionary(std::string_view bytes)
      : ddict_(bytes.empty() ? nullptr : ZSTD_createDDict(bytes.data(), bytes.size())) {}
  ~Dictionary() { ZSTD_freeDDict(ddict_); }
  bool ok(bool want) const { return !want || ddict_ != nullptr; }
  const ZSTD_DDict* get() const { return ddict_; }

 private:
  ZSTD_DDict* ddict_;
};

Status BlockFileOptions::Validate() const {
  if (block_bytes < 1024 || block_bytes > (64u << 10) || !std::has_single_bit(block_bytes)) {
    return Status::InvalidArgument("block_bytes must be a power of two in [1024, 65536], got " +
                                   std::to_string(block_bytes));
  }
  if (level < 1 || level > 19) {
    return Status::InvalidArgument("level must be in [1, 19], got " + std::to_string(level));
  }
  if (dictionary_bytes > (1u << 20)) {
    return Status::InvalidArgument("dictionary_bytes must be at most 1 MiB, got " +
                                   std::to_string(dictionary_bytes));
  }
  return Status::OK();
}

namespace {
// How many of `blocks` blocks the training samples: kTrainingRatio times the dictionary's bytes,
// and at least kMinTrainingBlocks (fastCover refuses fewer than 5 samples).
uint64_t TrainingBlocks(uint64_t blocks, uint64_t dictionary_bytes,
                        const BlockFileOptions& options) {
  constexpr uint64_t kMinTrainingBlocks = 32;
  return std::min(blocks, std::max(kMinTrainingBlocks, BlockFile::kTrainingRatio *
                                                           dictionary_bytes / options.block_bytes));
}

// A dictionary trained on blocks spread evenly over the text, or empty if the text is too small
// for training to produce one.
std::string TrainDictionary(std::string_view text, const BlockFileOptions& options) {
  const uint64_t blocks = (text.size() + options.block_bytes - 1) / options.block_bytes;
  const uint64_t dictionary_bytes = BlockFile::DictionaryBytes(text.size(), options);
  if (dictionary_bytes == 0) return "";
  const uint64_t want = TrainingBlocks(blocks, dictionary_bytes, options);
  std::string samples;
  std::vector<size_t> sizes;
  for (uint64_t i = 0; i < want; ++i) {
    const uint64_t b = i * blocks / want;
    const std::string_view block = text.substr(b * options.block_bytes, options.block_bytes);
    samples.append(block);
    sizes.push_back(block.size());
  }
  // fastCover with fixed parameters. ZDICT_trainFromBuffer searches for them instead (4 trainings
  // and a trial compression of a quarter of the samples each), which took 7 of 21 s of CPU in a
  // compress of the 100k/1M graph for files 0.5% smaller.
  ZDICT_fastCover_params_t params{};
  params.k = 256;     // segment size
  params.d = 8;       // dmer size
  params.f = 20;      // log2 of the frequency table's entries
  params.accel = 4;   // of 1..10: 4 trains in a third of 1's time, files 0.1% larger
  params.steps = 0;   // no parameter search
  params.zParams.compressionLevel = options.level;
  std::string dictionary(dictionary_bytes, '\0');
  const size_t n = ZDICT_trainFromBuffer_fastCover(dictionary.data(), dictionary.size(),
                                                   samples.data(), sizes.data(),
                                                   static_cast<unsigned>(sizes.size()), params);
  if (ZDICT_isError(n)) return "";  // too little or too uniform text: go without
  dictionary.resize(n);
  return dictionary;
}

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct CDictDeleter {
  void operator()(ZSTD_CDict* c) const { ZSTD_freeCDict(c); }
};
}  // namespace

uint64_t BlockFile::BuildWorkingBytes(uint64_t text_bytes, const BlockFileOptions& options) {
  const uint64_t dictionary = DictionaryBytes(text_bytes, options);
  if (dictionary == 0) return 0;
  const uint64_t blocks = (text_bytes + options.block_bytes - 1) / options.block_bytes;
  const uint64_t training =
      TrainingBlocks(blocks, dictionary, options) * options.block_bytes + (uint64_t{6} << 20) +
      dictionary;
  const uint64_t compressing = ZSTD_estimateCDictSize(dictionary, options.level) +
                               ZSTD_estimateCCtxSize(options.level) + dictionary;
  return (uint64_t{16} << 20) + std::max(training, compressing);
}

Status BlockFile::Build(std::string_view text, const BlockFileOptions& options,
                        const std::string& path) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ScopedPhase phase("blocks");
  std::string dictionary;
  {
    ScopedPhase train("dictionary");
    dictionary = TrainDictionary(text, options);
  }
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  std::unique_ptr<ZSTD_CDict, CDictDeleter> cdict;
  if (!dictionary.empty()) {
    cdict.reset(ZSTD_createCDict(dictionary.data(), dictionary.size(), options.level));
  }
  if (!cctx || (!dictionary.empty() && !cdict)) {
    return Status::ResourceExhausted("zstd: cannot allocate a compression context");
  }
  auto set = [&](ZSTD_cParameter p, int v) {
    return !ZSTD_isError(ZSTD_CCtx_setParameter(cctx.get(), p, v));
  };
  if (!set(ZSTD_c_compressionLevel, options.level) || !set(ZSTD_c_checksumFlag, 1) ||
      !set(ZSTD_c_contentSizeFlag, 1) || !set(ZSTD_c_dictIDFlag, 0) ||
      (cdict && ZSTD_isError(ZSTD_CCtx_refCDict(cctx.get(), cdict.get())))) {
    return Status::Internal("zstd: cannot set the compression parameters");
  }

  const uint64_t num_blocks = (text.size() + options.block_bytes - 1) / options.block_bytes;
  std::string directory, blocks;
  // Reserved, not touched: only the bytes written become resident, and the string never copies
  // itself while it grows (the build's peak stays the text plus its blocks).
  blocks.reserve(ZSTD_compressBound(text.size()));
  std::string frame(ZSTD_compressBound(options.block_bytes), '\0');
  ScopedPhase compress("compress");
  for (uint64_t b = 0; b < num_blocks; ++b) {
    PutFixed64(&directory, blocks.size());
    const std::string_view block = text.substr(b * options.block_bytes, options.block_bytes);
    const size_t n =
        ZSTD_compress2(cctx.get(), frame.data(), frame.size(), block.data(), block.size());
    if (ZSTD_isError(n)) {
      return Status::Internal(std::string("zstd: ") + ZSTD_getErrorName(n));
    }
    blocks.append(frame.data(), n);
  }
  PutFixed64(&directory, blocks.size());

  char header[kHeaderSize] = {};
  std::memcpy(header, kMagic, 8);
  EncodeFixed32(header + 8, kVersion);
  EncodeFixed32(header + 12, options.block_bytes);
  EncodeFixed64(header + 16, text.size());
  EncodeFixed64(header + 24, num_blocks);
  EncodeFixed32(header + 32, static_cast<uint32_t>(dictionary.size()));
  EncodeFixed32(header + 36, static_cast<uint32_t>(options.level));
  EncodeFixed64(header + 40, blocks.size());
  EncodeFixed64(header + 48, Checksum64(blocks.data(), blocks.size()));
  EncodeFixed64(header + kHeaderChecksumOffset, HeaderChecksum(header, dictionary + directory));
  return WriteFileAtomically(path, [&](const FileSink& sink) -> Status {
    ZIPG_RETURN_IF_ERROR(sink(std::string_view(header, kHeaderSize)));
    ZIPG_RETURN_IF_ERROR(sink(dictionary));
    ZIPG_RETURN_IF_ERROR(sink(directory));
    return sink(blocks);
  });
}

Status BlockFile::Corrupt(const std::string& what) const {
  return Status::Corruption("block file '" + file_->path() + "': " + what);
}

StatusOr<std::unique_ptr<BlockFile>> BlockFile::Open(const std::string& path,
                                                     const OpenOptions& options) {
  std::unique_ptr<BlockFile> f(new BlockFile());
  ZIPG_ASSIGN_OR_RETURN(f->file_, MappedFile::Open(path));
  const char* p = f->file_->data();
  const uint64_t size = f->file_->size();
  if (size < kHeaderSize) return f->Corrupt("shorter than its header (truncated?)");
  if (std::memcmp(p, kMagic, 8) != 0) return f->Corrupt("bad magic number");
  if (DecodeFixed32(p + 8) != kVersion) {
    return f->Corrupt("unknown version " + std::to_string(DecodeFixed32(p + 8)) +
                      " (this build reads version " + std::to_string(kVersion) + ")");
  }
  f->options_.block_bytes = DecodeFixed32(p + 12);
  f->text_size_ = DecodeFixed64(p + 16);
  f->num_blocks_ = DecodeFixed64(p + 24);
  f->dictionary_size_ = DecodeFixed32(p + 32);
  f->options_.dictionary_bytes = static_cast<uint32_t>(f->dictionary_size_);
  f->options_.level = static_cast<int>(DecodeFixed32(p + 36));
  f->blocks_bytes_ = DecodeFixed64(p + 40);
  f->blocks_checksum_ = DecodeFixed64(p + 48);
  if (!f->options_.Validate().ok() ||
      f->num_blocks_ != f->text_size_ / f->options_.block_bytes +
                            (f->text_size_ % f->options_.block_bytes != 0)) {
    return f->Corrupt("inconsistent header");
  }
  f->directory_offset_ = kHeaderSize + f->dictionary_size_;
  const uint64_t directory_bytes = 8 * (f->num_blocks_ + 1);
  // Compared without overflow: each term is checked against what is left.
  if (f->dictionary_size_ > size - kHeaderSize ||
      f->num_blocks_ >= (size - f->directory_offset_) / 8 ||
      f->blocks_bytes_ != size - f->directory_offset_ - directory_bytes) {
    return f->Corrupt("size " + std::to_string(size) + " does not match its header (truncated?)");
  }
  const std::string_view rest(p + kHeaderSize, f->dictionary_size_ + directory_bytes);
  if (HeaderChecksum(p, rest) != DecodeFixed64(p + kHeaderChecksumOffset)) {
    return f->Corrupt("header, dictionary or block directory checksum mismatch");
  }
  f->directory_ = p + f->directory_offset_;
  f->blocks_ = f->directory_ + directory_bytes;
  uint64_t previous = 0;
  for (uint64_t b = 0; b <= f->num_blocks_; ++b) {
    const uint64_t at = DecodeFixed64(f->directory_ + 8 * b);
    if (at < previous || (b == 0 && at != 0) || at > f->blocks_bytes_ ||
        (b == f->num_blocks_ && at != f->blocks_bytes_)) {
      return f->Corrupt("block directory out of order");  // only after a checksum collision
    }
    previous = at;
  }
  f->dictionary_ =
      std::make_unique<Dictionary>(std::string_view(p + kHeaderSize, f->dictionary_size_));
  if (!f->dictionary_->ok(f->dictionary_size_ > 0)) return f->Corrupt("unreadable dictionary");
  if (options.verify_checksums) ZIPG_RETURN_IF_ERROR(f->Verify());
  f->id_ = next_file_id.fetch_add(1);
  return f;
}

BlockFile::~BlockFile() = default;

Status BlockFile::Verify() const {
  if (Checksum64(blocks_, blocks_bytes_) != blocks_checksum_) {
    return Corrupt("blocks checksum mismatch");
  }
  return Status::OK();
}

Status BlockFile::Decode(uint64_t b, char* dst) const {
  const uint64_t from = DecodeFixed64(directory_ + 8 * b);
  const uint64_t to = DecodeFixed64(directory_ + 8 * (b + 1));
  const uint64_t want = BlockLength(b);
  ZSTD_DCtx* dctx = Blocks().dctx;
  if (dctx == nullptr) return Status::ResourceExhausted("zstd: cannot allocate a context");
  const size_t n = dictionary_->get() != nullptr
                       ? ZSTD_decompress_usingDDict(dctx, dst, want, blocks_ + from, to - from,
                                                    dictionary_->get())
                       : ZSTD_decompressDCtx(dctx, dst, want, blocks_ + from, to - from);
  if (ZSTD_isError(n)) {
    return Corrupt("block " + std::to_string(b) + ": " + ZSTD_getErrorName(n));
  }
  if (n != want) return Corrupt("block " + std::to_string(b) + " has the wrong length");
  return Status::OK();
}

StatusOr<std::string_view> BlockFile::Cached(uint64_t b) const {
  ThreadBlocks& blocks = Blocks();
  ThreadBlocks::Slot* victim = &blocks.slots[0];
  for (auto& slot : blocks.slots) {
    if (slot.file == id_ && slot.block == b) {
      slot.used = ++blocks.clock;
      return std::string_view(slot.bytes);
    }
    if (slot.used < victim->used) victim = &slot;
  }
  victim->file = 0;  // empty until the block is decoded whole
  victim->bytes.resize(BlockLength(b));
  ZIPG_RETURN_IF_ERROR(Decode(b, victim->bytes.data()));
  victim->file = id_;
  victim->block = b;
  victim->used = ++blocks.clock;
  return std::string_view(victim->bytes);
}

Status BlockFile::Extract(uint64_t offset, uint64_t len, std::string* out) const {
  if (offset > text_size_) {
    return Status::InvalidArgument("offset " + std::to_string(offset) + " past the end (" +
                                   std::to_string(text_size_) + ")");
  }
  const uint64_t end = offset + std::min(len, text_size_ - offset);
  const uint64_t block_bytes = options_.block_bytes;
  while (offset < end) {
    const uint64_t b = offset / block_bytes;
    const uint64_t within = offset % block_bytes;
    const uint64_t take = std::min(end - offset, BlockLength(b) - within);
    if (within == 0 && take == BlockLength(b)) {
      // A whole block: straight into *out, leaving the cache to the blocks read in part.
      const size_t at = out->size();
      out->resize(at + take);
      if (Status s = Decode(b, out->data() + at); !s.ok()) {
        out->resize(at);
        return s;
      }
    } else {
      ZIPG_ASSIGN_OR_RETURN(std::string_view block, Cached(b));
      out->append(block.substr(within, take));
    }
    offset += take;
  }
  return Status::OK();
}

Status BlockFile::ExtractAll(std::string* out) const {
  out->reserve(out->size() + text_size_);
  return Extract(0, text_size_, out);
}

uint64_t BlockFile::ExtractAllMemory() const { return text_size_; }

uint64_t BlockFile::SizeInBytes() const { return file_->size(); }

std::vector<ComponentSize> BlockFile::Breakdown() const {
  return {{"header", kHeaderSize},
          {"dictionary", dictionary_size_},
          {"block_directory", 8 * (num_blocks_ + 1)},
          {"blocks", blocks_bytes_}};
}

}  // namespace zipg::layout
