// Tests of BlockFile: random reads of texts of every size around the block boundaries answer like
// std::string::substr, over block sizes, levels and with or without a dictionary; reads from
// several threads over several files; and every kind of damage to a file is a CORRUPTION error,
// never a wrong answer or a crash.

#include "layout/block_file.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "util/file.h"
#include "util/scratch_dir.h"

namespace zipg::layout {
namespace {

// Text that compresses like the EdgeFile's: repeated structure with random values mixed in.
std::string MakeText(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static const char* const kWords[] = {"alpha", "beta", "gamma", "delta", "epsilon", "\xfe\x01"};
  std::string text;
  while (text.size() < n) {
    if (rng() % 3 == 0) {
      text.push_back(static_cast<char>(rng() % 256));
    } else {
      text.append(kWords[rng() % 6]);
    }
  }
  text.resize(n);
  return text;
}

std::unique_ptr<BlockFile> BuildAndOpen(const std::string& text, const BlockFileOptions& options,
                                        const std::string& path) {
  const Status built = BlockFile::Build(text, options, path);
  EXPECT_TRUE(built.ok()) << built.ToString();
  auto file = BlockFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(*file) : nullptr;
}

void CheckReads(const BlockFile& file, const std::string& text, uint64_t seed) {
  ASSERT_EQ(file.size(), text.size());
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 300; ++i) {
    const uint64_t offset = rng() % (text.size() + 1);
    const uint64_t len = rng() % 4 == 0 ? rng() % (3 * file.options().block_bytes) : rng() % 64;
    std::string got = "prefix";
    ASSERT_TRUE(file.Extract(offset, len, &got).ok());
    ASSERT_EQ(got, "prefix" + text.substr(offset, len)) << "offset " << offset << " len " << len;
  }
  std::string all;
  ASSERT_TRUE(file.ExtractAll(&all).ok());
  EXPECT_EQ(all, text);
  std::string past;
  EXPECT_EQ(file.Extract(text.size() + 1, 1, &past).code(), StatusCode::kInvalidArgument);
  uint64_t total = 0;
  for (const auto& part : file.Breakdown()) total += part.bytes;
  EXPECT_EQ(total, file.SizeInBytes());
}

TEST(BlockFileTest, ReadsMatchTheTextOverSizesAndOptions) {
  ScratchDir dir("block_file_test");
  for (uint32_t block : {1024u, 4096u, 65536u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{block - 1}, size_t{block}, size_t{block + 1},
                     size_t{20 * block + 17}}) {
      for (uint32_t dictionary : {0u, 16u << 10}) {
        for (int level : {1, 19}) {
          SCOPED_TRACE("block " + std::to_string(block) + " n " + std::to_string(n) + " dict " +
                       std::to_string(dictionary) + " level " + std::to_string(level));
          const std::string text = MakeText(n, n + block + level);
          BlockFileOptions options{block, level, dictionary};
          auto file = BuildAndOpen(text, options, dir.File("f.zbk"));
          ASSERT_NE(file, nullptr);
          EXPECT_EQ(file->options().block_bytes, block);
          EXPECT_EQ(file->options().level, level);
          if (dictionary == 0 || n < BlockFile::kMinTrainingText) {
            EXPECT_EQ(file->options().dictionary_bytes, 0u);
          } else {
            EXPECT_GT(file->options().dictionary_bytes, 0u) << "no dictionary was trained";
          }
          CheckReads(*file, text, n);
        }
      }
    }
  }
}

TEST(BlockFileTest, ADictionaryIsTrainedOnEnoughTextAndMakesTheFileSmaller) {
  ScratchDir dir("block_file_test");
  const std::string text = MakeText(4 << 20, 7);
  auto with = BuildAndOpen(text, {4096, 3, 64 << 10}, dir.File("with.zbk"));
  auto without = BuildAndOpen(text, {4096, 3, 0}, dir.File("without.zbk"));
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  EXPECT_GT(with->options().dictionary_bytes, 0u);
  EXPECT_LT(with->SizeInBytes(), without->SizeInBytes());
  CheckReads(*with, text, 1);
}

TEST(BlockFileTest, ThreadsReadingSeveralFilesGetTheirOwnBytes) {
  ScratchDir dir("block_file_test");
  std::vector<std::string> texts;
  std::vector<std::unique_ptr<BlockFile>> files;
  for (int i = 0; i < 3; ++i) {
    texts.push_back(MakeText(300 << 10, 100 + i));
    files.push_back(BuildAndOpen(texts.back(), {1024, 1, 4096}, dir.File(std::to_string(i))));
    ASSERT_NE(files.back(), nullptr);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 3000; ++i) {
        // The same offsets in different files, so that a cache keyed by block alone would mix
        // them up.
        const size_t f = rng() % 3;
        const uint64_t offset = rng() % 4096, len = rng() % 300;
        std::string got;
        if (!files[f]->Extract(offset, len, &got).ok() || got != texts[f].substr(offset, len)) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(BlockFileTest, ReopeningAtTheSameAddressNeverServesTheOldFilesBlocks) {
  ScratchDir dir("block_file_test");
  const std::string a = MakeText(10000, 1), b = MakeText(10000, 2);
  for (int round = 0; round < 4; ++round) {
    const std::string& text = round % 2 == 0 ? a : b;
    auto file = BuildAndOpen(text, {1024, 1, 0}, dir.File("f"));
    ASSERT_NE(file, nullptr);
    std::string got;
    ASSERT_TRUE(file->Extract(100, 50, &got).ok());
    EXPECT_EQ(got, text.substr(100, 50));
  }
}

class BlockFileDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = MakeText(BlockFile::kMinTrainingText + (100 << 10), 3);
    path_ = dir_.File("f.zbk");
    ASSERT_TRUE(BlockFile::Build(text_, {1024, 3, 8 << 10}, path_).ok());
    auto bytes = ReadFileToString(path_);
    ASSERT_TRUE(bytes.ok());
    bytes_ = *bytes;
    auto file = BlockFile::Open(path_);
    ASSERT_TRUE(file.ok());
    ASSERT_GT((*file)->options().dictionary_bytes, 0u);
    blocks_start_ = bytes_.size() - (*file)->Breakdown()[3].bytes;
  }
  StatusOr<std::unique_ptr<BlockFile>> OpenDamaged(const std::string& bytes, bool verify) {
    return BlockFile::Open(dir_.Write("damaged.zbk", bytes), OpenOptions{verify});
  }
  void ExpectCorruption(const std::string& bytes, const std::string& what) {
    auto file = OpenDamaged(bytes, true);
    ASSERT_FALSE(file.ok()) << what;
    EXPECT_EQ(file.status().code(), StatusCode::kCorruption) << what;
    EXPECT_NE(file.status().ToString().find("damaged.zbk"), std::string::npos)
        << file.status().ToString();
  }

  ScratchDir dir_{"block_file_test"};
  std::string text_, path_, bytes_;
  size_t blocks_start_ = 0;
};

TEST_F(BlockFileDamageTest, EveryDamagedPartIsACorruptionError) {
  ExpectCorruption(bytes_.substr(0, 10), "shorter than the header");
  for (size_t cut : {size_t{64}, blocks_start_ - 3, bytes_.size() - 1}) {
    ExpectCorruption(bytes_.substr(0, cut), "truncated at " + std::to_string(cut));
  }
  std::string magic = bytes_;
  magic[2] ^= 1;
  ExpectCorruption(magic, "magic");
  std::string version = bytes_;
  version[8] = 9;
  auto opened = OpenDamaged(version, true);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().ToString().find("unknown version 9"), std::string::npos);
  // A byte of the header, of the dictionary, of the block directory, and one of the blocks.
  for (size_t at : {size_t{20}, size_t{64 + 100}, blocks_start_ - 20, blocks_start_ + 500}) {
    std::string damaged = bytes_;
    damaged[at] ^= 0x10;
    ExpectCorruption(damaged, "flipped byte at " + std::to_string(at));
  }
  std::string longer = bytes_ + "x";
  ExpectCorruption(longer, "trailing byte");
}

TEST_F(BlockFileDamageTest, ADamagedBlockOpenedWithoutVerifyingFailsWhenRead) {
  std::string damaged = bytes_;
  damaged[blocks_start_ + 500] ^= 0x10;
  auto file = OpenDamaged(damaged, false);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Status first_error;
  for (uint64_t offset = 0; offset < text_.size(); offset += 512) {
    std::string got;
    const Status s = (*file)->Extract(offset, 10, &got);
    if (!s.ok()) {
      if (first_error.ok()) first_error = s;
    } else {
      EXPECT_EQ(got, text_.substr(offset, 10)) << "a damaged file served wrong bytes";
    }
  }
  EXPECT_EQ(first_error.code(), StatusCode::kCorruption);
  std::string all;
  EXPECT_EQ((*file)->ExtractAll(&all).code(), StatusCode::kCorruption);
}

TEST(BlockFileOptionsTest, BadOptionsAreRejected) {
  EXPECT_TRUE(BlockFileOptions{}.Validate().ok());
  EXPECT_FALSE((BlockFileOptions{1000, 3, 0}).Validate().ok());
  EXPECT_FALSE((BlockFileOptions{512, 3, 0}).Validate().ok());
  EXPECT_FALSE((BlockFileOptions{1 << 17, 3, 0}).Validate().ok());
  EXPECT_FALSE((BlockFileOptions{4096, 0, 0}).Validate().ok());
  EXPECT_FALSE((BlockFileOptions{4096, 20, 0}).Validate().ok());
  EXPECT_FALSE((BlockFileOptions{4096, 3, 2 << 20}).Validate().ok());
  ScratchDir dir("block_file_test");
  EXPECT_EQ(BlockFile::Build("abc", {1000, 3, 0}, dir.File("x")).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zipg::layout
