// Fetching a shard's files (shard/fetch.h): into an empty directory the MANIFEST and the shard's
// files arrive byte for byte and the shard opens with its checksums verified; an interrupted
// fetch resumes where it stopped; a file that fails its check is fetched again, and one that
// fails twice is an error that leaves no shard directory; a source that fails mid-way is replaced
// by another; the rate bounds the pace; and a replica hands out only the MANIFEST and files of
// the shards it hosts.

#include "shard/fetch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/manifest.h"
#include "util/file.h"
#include "util/scratch_dir.h"

namespace zipg::shard {
namespace {

namespace fs = std::filesystem;

// A 2-shard store with enough data that its files take many small chunks.
class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(5);
    graph::InputGraph input;
    input.node_property_names = {"name"};
    for (int64_t id = 0; id < 400; ++id) {
      input.nodes.push_back({id, {{0, "n" + std::to_string(rng() % 100000)}}});
      for (int k = 0; k < 5; ++k) {
        input.edges.push_back({id, static_cast<int64_t>(rng() % 400), 1, k, {}});
      }
    }
    graph::CompressOptions options;
    options.shards = 2;
    ASSERT_TRUE(graph::CompressGraph(input, source(), options, {}, nullptr).ok());
    auto manifest = graph::ReadManifest(source());
    ASSERT_TRUE(manifest.ok());
    files_ = manifest->files;
  }

  std::string source() const { return dir_.File("source"); }
  std::string target() const { return dir_.File("target"); }

  // Reads what a replica hosting `hosted` would hand out (the test's own reading of the rule).
  ChunkReader Reader(std::vector<uint32_t> hosted = {0, 1}) const {
    return [this, hosted](const std::string& path, uint64_t offset,
                          uint32_t length) -> StatusOr<std::string> {
      ++chunks_;
      if (!Fetchable(files_, hosted, path)) return Status::NotFound(path);
      std::ifstream in(source() + "/" + path, std::ios::binary);
      std::string out(length, '\0');
      in.seekg(static_cast<std::streamoff>(offset));
      in.read(out.data(), length);
      out.resize(static_cast<size_t>(in.gcount()));
      return out;
    };
  }

  FetchOptions Options(std::vector<FetchSource> sources) const {
    FetchOptions options;
    options.chunk_bytes = 1000;
    options.sources = [sources] { return sources; };
    return options;
  }

  // The bytes of every file under `dir` of `store`, by path relative to the store.
  static std::map<std::string, std::string> Files(const std::string& store,
                                                  const std::string& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(store + "/" + dir)) {
      if (!e.is_regular_file()) continue;
      auto bytes = ReadFileToString(e.path().string());
      EXPECT_TRUE(bytes.ok());
      out[fs::relative(e.path(), store).string()] = bytes.ok() ? *bytes : "";
    }
    return out;
  }

  uint64_t ShardBytes(uint32_t shard) const {
    uint64_t total = 0;
    for (const auto& [path, bytes] : Files(source(), graph::ShardDirName(shard))) {
      total += bytes.size();
    }
    return total;
  }

  ScratchDir dir_{"fetch_test"};
  std::vector<graph::ManifestFile> files_;
  mutable std::atomic<int> chunks_{0};
};

TEST_F(FetchTest, AnEmptyDirectoryGetsTheManifestAndTheShardByteForByte) {
  auto missing = ShardMissing(target(), 0);
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(*missing);
  auto report = FetchShardFiles(target(), 0, Options({{"a", Reader()}}));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->manifest);
  EXPECT_EQ(report->resumed_bytes, 0u);
  EXPECT_EQ(report->sources, std::vector<std::string>{"a"});
  EXPECT_EQ(Files(target(), "shard-0000"), Files(source(), "shard-0000"));
  EXPECT_EQ(ReadFileToString(target() + "/MANIFEST").value(),
            ReadFileToString(source() + "/MANIFEST").value());
  EXPECT_EQ(report->bytes, ShardBytes(0) + fs::file_size(source() + "/MANIFEST"));
  EXPECT_FALSE(fs::exists(target() + "/shard-0001"));
  EXPECT_FALSE(ShardMissing(target(), 0).value());
  EXPECT_TRUE(ShardMissing(target(), 1).value());
  EXPECT_FALSE(ShardMissing(target(), 2).ok());  // not a shard of the store

  GraphOpenOptions verify;
  verify.verify_checksums = true;
  const std::vector<uint32_t> only = {0};
  auto opened = OpenStore(target(), verify, &only);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();

  // Shard 1 next, into the same store: the MANIFEST is kept.
  report = FetchShardFiles(target(), 1, Options({{"a", Reader()}}));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->manifest);
  EXPECT_EQ(report->bytes, ShardBytes(1));
  EXPECT_EQ(Files(target(), "shard-0001"), Files(source(), "shard-0001"));
}

TEST_F(FetchTest, AnInterruptedFetchResumesWhereItStopped) {
  // The first attempt's only source fails after 10 chunks, and the fetch is then stopped.
  std::atomic<bool> failed{false};
  ChunkReader good = Reader();
  ChunkReader dies = [&, good](const std::string& p, uint64_t o,
                               uint32_t l) -> StatusOr<std::string> {
    if (chunks_ >= 10) {
      failed = true;
      return Status::Unavailable("killed");
    }
    return good(p, o, l);
  };
  FetchOptions first = Options({{"a", dies}});
  first.cancelled = [&] { return failed.load(); };
  auto stopped = FetchShardFiles(target(), 0, first);
  ASSERT_FALSE(stopped.ok());
  EXPECT_FALSE(fs::exists(target() + "/shard-0000"));  // never a partial shard directory
  EXPECT_TRUE(fs::exists(target() + "/shard-0000.fetch"));

  auto report = FetchShardFiles(target(), 0, Options({{"b", Reader()}}));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->manifest);  // fetched whole by the first attempt
  EXPECT_GT(report->resumed_bytes, 0u);
  EXPECT_EQ(report->bytes + report->resumed_bytes, ShardBytes(0));
  EXPECT_EQ(Files(target(), "shard-0000"), Files(source(), "shard-0000"));
  EXPECT_FALSE(fs::exists(target() + "/shard-0000.fetch"));
}

TEST_F(FetchTest, AFileThatFailsItsCheckIsFetchedAgainOnce) {
  const std::string victim = "shard-0000/nodes.idx";
  ASSERT_TRUE(std::any_of(files_.begin(), files_.end(),
                          [&](const graph::ManifestFile& f) { return f.path == victim; }));
  ChunkReader good = Reader();
  // Flips a byte of the victim's first chunk, the first time only.
  std::atomic<int> flips{1};
  ChunkReader flaky = [&, good](const std::string& p, uint64_t o,
                                uint32_t l) -> StatusOr<std::string> {
    auto chunk = good(p, o, l);
    if (chunk.ok() && p == victim && o == 0 && !chunk->empty() && flips-- > 0) (*chunk)[0] ^= 1;
    return chunk;
  };
  auto report = FetchShardFiles(target(), 0, Options({{"a", flaky}}));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->refetched, std::vector<std::string>{victim});
  EXPECT_EQ(Files(target(), "shard-0000"), Files(source(), "shard-0000"));

  // Always corrupt: an error naming the file, and no shard directory.
  ScratchDir other("fetch_test_other");
  flips = 1 << 20;
  auto failed = FetchShardFiles(other.File("store"), 0, Options({{"a", flaky}}));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruption);
  EXPECT_NE(failed.status().message().find(victim), std::string::npos)
      << failed.status().ToString();
  EXPECT_FALSE(fs::exists(other.File("store") + "/shard-0000"));
}

TEST_F(FetchTest, ASourceThatFailsIsReplacedByAnother) {
  ChunkReader good = Reader();
  ChunkReader dies = [&, good](const std::string& p, uint64_t o,
                               uint32_t l) -> StatusOr<std::string> {
    if (chunks_ >= 5) return Status::Unavailable("gone");
    return good(p, o, l);
  };
  // "b" hosts only shard 1: asked for shard 0's files it answers NOT_FOUND, and "c" is used.
  auto report =
      FetchShardFiles(target(), 0, Options({{"a", dies}, {"b", Reader({1})}, {"c", Reader({0})}}));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->sources, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(Files(target(), "shard-0000"), Files(source(), "shard-0000"));
}

TEST_F(FetchTest, TheRateBoundsThePace) {
  const uint64_t total = ShardBytes(0);
  ASSERT_TRUE(FetchShardFiles(target(), 0, Options({{"a", Reader()}})).ok());  // unpaced
  fs::remove_all(target() + "/shard-0000");  // the MANIFEST stays: only the shard is paced
  FetchOptions options = Options({{"a", Reader()}});
  options.rate_bytes_per_s = total * 2;  // the shard in no less than half a second
  const auto start = std::chrono::steady_clock::now();
  auto report = FetchShardFiles(target(), 0, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->bytes, total);
  // The last chunk starts at its bound: the time is at least that of all bytes but one chunk.
  const double chunk_share =
      static_cast<double>(options.chunk_bytes) / static_cast<double>(options.rate_bytes_per_s);
  EXPECT_GE(seconds, 0.5 - chunk_share) << total << " bytes";
}

TEST_F(FetchTest, AReplicaHandsOutOnlyTheManifestAndItsShardsFiles) {
  const std::vector<uint32_t> hosted = {0};
  EXPECT_TRUE(Fetchable(files_, hosted, "MANIFEST"));
  EXPECT_TRUE(Fetchable(files_, hosted, "shard-0000/nodes.idx"));
  EXPECT_FALSE(Fetchable(files_, hosted, "shard-0001/nodes.idx"));  // not hosted
  for (const char* path : {"../source/MANIFEST", "/etc/passwd", "shard-0000/../MANIFEST",
                           "shard-0000/", "shard-0000/nodes.idx.tmp", ""}) {
    EXPECT_FALSE(Fetchable(files_, hosted, path)) << path;
  }
}

TEST_F(FetchTest, ANonEmptyDirectoryWithoutAManifestIsNotAStore) {
  // What zipg puts in a store directory itself does not count.
  fs::create_directories(target() + "/run");
  fs::create_directories(target() + "/updates");
  fs::create_directories(target() + "/shard-0000.fetch");
  auto ours = ShardMissing(target(), 0);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_TRUE(*ours);
  std::ofstream(target() + "/notes.txt") << "mine";
  auto missing = ShardMissing(target(), 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zipg::shard
