// Tests of the write-ahead log: the framing checked byte for byte against an independent encoder,
// recovery from every possible torn tail and from flipped bytes, group commit under 16 threads,
// and poisoning after a real write error (provoked with RLIMIT_FSIZE in a forked child).
//
// Random values come from std::mt19937_64 (whose output the standard fixes) with fixed seeds.

#include "util/wal.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "util/checksum.h"
#include "util/coding.h"
#include "util/file.h"
#include "util/scratch_dir.h"
#include "util/status.h"

namespace {

using zipg::kMaxWalPayload;
using zipg::kWalHeaderSize;
using zipg::Status;
using zipg::StatusCode;
using zipg::StatusOr;
using zipg::Wal;
using zipg::WalOptions;

using zipg::ScratchDir;

// The record framing, written independently of wal.cc: u32 length | u64 Checksum64(length bytes,
// payload) | payload.
std::string Frame(std::string_view payload) {
  std::string length;
  zipg::PutFixed32(&length, static_cast<uint32_t>(payload.size()));
  std::string covered = length + std::string(payload);
  std::string out = length;
  zipg::PutFixed64(&out, zipg::Checksum64(covered.data(), covered.size()));
  out.append(payload);
  return out;
}

std::string Frames(const std::vector<std::string>& payloads) {
  std::string out;
  for (const std::string& p : payloads) out += Frame(p);
  return out;
}

std::string ReadAll(const std::string& path) {
  StatusOr<std::string> bytes = zipg::ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

void WriteAll(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

// Opens the log at `path`, appending every replayed payload to *replayed.
StatusOr<std::unique_ptr<Wal>> OpenCollect(const std::string& path,
                                           std::vector<std::string>* replayed,
                                           uint64_t* dropped = nullptr,
                                           const WalOptions& options = {}) {
  return Wal::Open(
      path,
      [replayed](std::string_view payload) {
        replayed->emplace_back(payload);
        return Status::OK();
      },
      options, dropped);
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() % 256);
  return s;
}

// Payloads of varied sizes: empty, one byte, 100 KB, every byte value (NULs included), and random
// binary strings.
std::vector<std::string> VariedPayloads(uint64_t seed, size_t random_count) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> payloads;
  payloads.push_back("");
  payloads.push_back("x");
  payloads.push_back(RandomBytes(rng, 100 * 1024));
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte.push_back(static_cast<char>(i));
  payloads.push_back(every_byte);
  payloads.push_back(std::string(17, '\0'));
  for (size_t i = 0; i < random_count; ++i) payloads.push_back(RandomBytes(rng, rng() % 2000));
  return payloads;
}

// Starting offset of each record in a file holding `payloads`, plus the file size at the end.
std::vector<uint64_t> RecordOffsets(const std::vector<std::string>& payloads) {
  std::vector<uint64_t> offsets = {0};
  for (const std::string& p : payloads)
    offsets.push_back(offsets.back() + kWalHeaderSize + p.size());
  return offsets;
}

// Writes `payloads` through a Wal into a new file at `path`.
void WriteLog(const std::string& path, const std::vector<std::string>& payloads) {
  std::vector<std::string> replayed;
  auto wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  ASSERT_TRUE(replayed.empty());
  for (const std::string& p : payloads) ASSERT_TRUE((*wal)->Append(p).ok());
}

// Opens `path` and checks that exactly `expected` replays and `expected_dropped` bytes are cut;
// then appends one record, reopens, and checks that it follows the intact prefix.
void ExpectRecovers(const std::string& path, const std::vector<std::string>& expected,
                    uint64_t expected_dropped, const std::string& context) {
  SCOPED_TRACE(context);
  const uint64_t intact = Frames(expected).size();
  {
    std::vector<std::string> replayed;
    uint64_t dropped = 12345;
    auto wal = OpenCollect(path, &replayed, &dropped);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    EXPECT_EQ(replayed, expected);
    EXPECT_EQ(dropped, expected_dropped);
    EXPECT_EQ((*wal)->size(), intact);
    EXPECT_EQ(FileSize(path), intact);  // truncated at Open, before any append
    ASSERT_TRUE((*wal)->Append("appended after recovery").ok());
  }
  std::vector<std::string> replayed;
  uint64_t dropped = 12345;
  auto wal = OpenCollect(path, &replayed, &dropped);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  std::vector<std::string> want = expected;
  want.push_back("appended after recovery");
  EXPECT_EQ(replayed, want);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(ReadAll(path), Frames(want));
}

// ------------------------------------------------------------------------------------------------

TEST(WalTest, NewLogIsAnEmptyFileWithMode0644) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal-1.log");
  std::vector<std::string> replayed;
  uint64_t dropped = 99;
  auto wal = OpenCollect(path, &replayed, &dropped);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_TRUE(replayed.empty());
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ((*wal)->size(), 0u);
  EXPECT_EQ((*wal)->path(), path);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0644u & ~mask);
}

TEST(WalTest, RoundTripAcrossReopensMatchesTheFormatByteForByte) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  const std::vector<std::string> payloads = VariedPayloads(/*seed=*/42, /*random_count=*/120);
  const size_t half = payloads.size() / 2;
  const std::vector<std::string> first(payloads.begin(), payloads.begin() + half);

  {  // Session 1: the first half.
    std::vector<std::string> replayed;
    auto wal = OpenCollect(path, &replayed);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    for (const std::string& p : first) ASSERT_TRUE((*wal)->Append(p).ok());
    const zipg::WalStats stats = (*wal)->stats();
    EXPECT_EQ(stats.records, first.size());
    EXPECT_EQ(stats.syncs, first.size());  // one caller at a time: nothing to share
    EXPECT_EQ(stats.bytes, Frames(first).size());
    EXPECT_EQ((*wal)->size(), Frames(first).size());
  }
  EXPECT_EQ(ReadAll(path), Frames(first));

  {  // Session 2: replays the first half, appends the rest.
    std::vector<std::string> replayed;
    uint64_t dropped = 99;
    auto wal = OpenCollect(path, &replayed, &dropped);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    EXPECT_EQ(replayed, first);
    EXPECT_EQ(dropped, 0u);
    EXPECT_EQ((*wal)->size(), Frames(first).size());
    for (size_t i = half; i < payloads.size(); ++i) ASSERT_TRUE((*wal)->Append(payloads[i]).ok());
    EXPECT_EQ((*wal)->stats().records, payloads.size() - half);  // replayed records not counted
    EXPECT_EQ((*wal)->size(), Frames(payloads).size());
  }
  EXPECT_EQ(ReadAll(path), Frames(payloads));

  // Session 3: everything, in order.
  std::vector<std::string> replayed;
  uint64_t dropped = 99;
  auto wal = OpenCollect(path, &replayed, &dropped);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(replayed, payloads);
  EXPECT_EQ(dropped, 0u);
}

TEST(WalTest, WithoutSyncFramingIsTheSameAndSyncIsExplicit) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  const std::vector<std::string> payloads = VariedPayloads(/*seed=*/7, /*random_count=*/20);
  {
    std::vector<std::string> replayed;
    auto wal = OpenCollect(path, &replayed, nullptr, WalOptions{.sync = false});
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    for (const std::string& p : payloads) ASSERT_TRUE((*wal)->Append(p).ok());
    EXPECT_EQ((*wal)->stats().records, payloads.size());
    EXPECT_EQ((*wal)->stats().syncs, 0u);
    // Sync makes what was appended durable with one fdatasync, and only when there is something.
    EXPECT_EQ((*wal)->unsynced_records(), payloads.size());
    ASSERT_TRUE((*wal)->Sync().ok());
    EXPECT_EQ((*wal)->stats().syncs, 1u);
    EXPECT_EQ((*wal)->unsynced_records(), 0u);
    ASSERT_TRUE((*wal)->Sync().ok());
    EXPECT_EQ((*wal)->stats().syncs, 1u);
    ASSERT_TRUE((*wal)->Append("one more").ok());
    EXPECT_EQ((*wal)->unsynced_records(), 1u);
    ASSERT_TRUE((*wal)->Sync().ok());
    EXPECT_EQ((*wal)->stats().syncs, 2u);
  }
  std::vector<std::string> all = payloads;
  all.push_back("one more");
  EXPECT_EQ(ReadAll(path), Frames(all));
  std::vector<std::string> replayed;
  auto wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(replayed, all);
}

// A log cut at any byte replays exactly the records that end at or before the cut.
TEST(WalTest, TornTailAtEveryCutReplaysTheIntactPrefix) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::string> payloads = {"",
                                             "first",
                                             std::string(300, '\0'),
                                             "q",
                                             "the record before the last one",
                                             "the last record"};
  const std::vector<uint64_t> offsets = RecordOffsets(payloads);
  const std::string good_path = dir.File("good.log");
  WriteLog(good_path, payloads);
  const std::string good = ReadAll(good_path);
  ASSERT_EQ(good, Frames(payloads));

  const size_t last = payloads.size() - 1;
  std::vector<uint64_t> cuts;
  for (uint64_t c = offsets[last]; c < offsets[last + 1]; ++c) cuts.push_back(c);  // last record
  const uint64_t prev = offsets[last - 1];
  for (uint64_t c : {prev + 1, prev + 4, prev + 11, prev + 12, prev + 13, offsets[last] - 1}) {
    cuts.push_back(c);  // into the previous record's header and payload
  }
  cuts.push_back(0);
  cuts.push_back(5);  // inside the first header

  for (uint64_t cut : cuts) {
    // The intact records are those that end at or before the cut.
    size_t intact = 0;
    while (intact < payloads.size() && offsets[intact + 1] <= cut) ++intact;
    const std::string path = dir.File("cut-" + std::to_string(cut) + ".log");
    WriteAll(path, std::string_view(good).substr(0, cut));
    ExpectRecovers(path, std::vector<std::string>(payloads.begin(), payloads.begin() + intact),
                   cut - offsets[intact], "cut at byte " + std::to_string(cut));
  }
}

// Flipping any bit pattern in any byte of the last record (length, checksum or payload) drops it.
TEST(WalTest, FlippedByteInTheLastRecordDropsIt) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::string> payloads = {"alpha", std::string(40, '\0'), "the last record"};
  const std::vector<uint64_t> offsets = RecordOffsets(payloads);
  const std::string good_path = dir.File("good.log");
  WriteLog(good_path, payloads);
  const std::string good = ReadAll(good_path);
  const std::vector<std::string> prefix(payloads.begin(), payloads.end() - 1);
  const uint64_t start = offsets[payloads.size() - 1];

  for (uint64_t pos = start; pos < good.size(); ++pos) {
    for (uint8_t mask : {0x01, 0x80}) {
      std::string bad = good;
      bad[pos] = static_cast<char>(static_cast<uint8_t>(bad[pos]) ^ mask);
      const std::string path = dir.File("flip.log");
      WriteAll(path, bad);
      const char* part = pos < start + 4                ? "length"
                         : pos < start + kWalHeaderSize ? "checksum"
                                                        : "payload";
      ExpectRecovers(
          path, prefix, good.size() - start,
          std::string(part) + " byte " + std::to_string(pos) + " mask " + std::to_string(mask));
    }
  }
}

// A corrupt record in the middle ends the log there: the intact records after it are dropped too
// (after a bad record nothing can be trusted to start on a record boundary).
TEST(WalTest, CorruptMiddleRecordEndsTheLog) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::string> payloads = {"zero", "one", "two", "three", "four"};
  const std::vector<uint64_t> offsets = RecordOffsets(payloads);
  const std::string path = dir.File("wal.log");
  WriteLog(path, payloads);
  std::string bad = ReadAll(path);
  bad[offsets[1] + kWalHeaderSize + 1] ^= 0x20;  // "one" -> "oNe"
  WriteAll(path, bad);
  ExpectRecovers(path, {"zero"}, offsets.back() - offsets[1], "payload of record 1 flipped");
}

TEST(WalTest, GarbageTailsAreDropped) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::string> payloads = {"a", "bb", "ccc"};
  const std::string good = Frames(payloads);
  struct Case {
    const char* name;
    std::string tail;
    bool counted;  // whether the cut bytes count as dropped (zeros are preallocated space)
  };
  const std::vector<Case> cases = {
      {"length 0xFFFFFFFF alone", std::string(4, '\xFF'), true},
      {"length 0xFFFFFFFF with a header and bytes", std::string(4, '\xFF') + std::string(60, 'z'),
       true},
      {"length 0xFFFFFFFF, then a valid record", std::string(12, '\xFF') + Frame("hidden"), true},
      {"zero-filled tail (preallocated blocks)", std::string(4096, '\0'), false},
      {"zeros, then one non-zero byte", std::string(4096, '\0') + "z", true},
      {"a header claiming more bytes than are left", Frame(std::string(100, 'y')).substr(0, 50),
       true},
  };
  for (const Case& c : cases) {
    const std::string path = dir.File("garbage.log");
    WriteAll(path, good + c.tail);
    ExpectRecovers(path, payloads, c.counted ? c.tail.size() : 0, c.name);
  }
}

// With preallocation the file runs ahead of the records in zeros, by at least the option and in
// whole 64 KiB steps; the records are byte for byte the format, a copy taken while the log is open
// (what a crash leaves) replays them all and drops nothing, and closing trims the zeros.
TEST(WalTest, PreallocatedLogKeepsZerosAheadAndReopensExactly) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  const std::vector<std::string> payloads = VariedPayloads(/*seed=*/7, /*random_count=*/150);
  WalOptions options;
  options.preallocate = 100000;
  {
    std::vector<std::string> replayed;
    auto wal = OpenCollect(path, &replayed, nullptr, options);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    EXPECT_EQ(FileSize(path), 0u);  // nothing is written ahead before the first append
    for (size_t i = 0; i < payloads.size(); ++i) {
      ASSERT_TRUE((*wal)->Append(payloads[i]).ok());
      if (i % 10 != 0 && i + 1 != payloads.size()) continue;
      const std::vector<std::string> prefix(payloads.begin(), payloads.begin() + i + 1);
      const std::string bytes = ReadAll(path);
      const std::string framed = Frames(prefix);
      ASSERT_EQ((*wal)->size(), framed.size());
      ASSERT_GE(bytes.size(), framed.size());
      EXPECT_EQ(bytes.size() % (64 << 10), 0u) << "after record " << i;
      EXPECT_EQ(bytes.substr(0, framed.size()), framed) << "after record " << i;
      EXPECT_EQ(bytes.find_first_not_of('\0', framed.size()), std::string::npos)
          << "after record " << i;
    }
    EXPECT_LE(FileSize(path), (*wal)->size() + options.preallocate + (64 << 10));
    // A crash leaves the zeros: a copy taken now replays every record and drops nothing.
    const std::string copy = dir.File("crash-copy.log");
    WriteAll(copy, ReadAll(path));
    ASSERT_GT(FileSize(copy), (*wal)->size());
    ExpectRecovers(copy, payloads, 0, "a copy of the open, preallocated log");
  }
  EXPECT_EQ(ReadAll(path), Frames(payloads));  // closing trimmed the zeros

  // Reopened with preallocation, it appends after the records and replays them all again.
  {
    std::vector<std::string> replayed;
    uint64_t dropped = 99;
    auto wal = OpenCollect(path, &replayed, &dropped, options);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    EXPECT_EQ(replayed, payloads);
    EXPECT_EQ(dropped, 0u);
    ASSERT_TRUE((*wal)->Append("after the reopen").ok());
  }
  std::vector<std::string> want = payloads;
  want.push_back("after the reopen");
  EXPECT_EQ(ReadAll(path), Frames(want));
}

// A torn record in a preallocated log with an intact record after it (the disk wrote the second's
// block, not the first's) ends the log there; a new record of the same size written over the torn
// one must not bring the old second record back on the next replay.
TEST(WalTest, PreallocatedLogNeverReplaysARecordAfterATornOne) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  WalOptions options;
  options.preallocate = 4096;
  const std::vector<std::string> kept = {"kept 0", "kept 1"};
  const std::string torn(40, 't');
  const std::string hidden(40, 'h');
  std::string image;
  {
    std::vector<std::string> replayed;
    auto wal = OpenCollect(path, &replayed, nullptr, options);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    for (const std::string& p : kept) ASSERT_TRUE((*wal)->Append(p).ok());
    ASSERT_TRUE((*wal)->Append(torn).ok());
    ASSERT_TRUE((*wal)->Append(hidden).ok());
    image = ReadAll(path);  // taken open: the zeros are still there
  }
  ASSERT_GT(image.size(), Frames({"kept 0", "kept 1", torn, hidden}).size());
  const size_t torn_at = Frames(kept).size();
  image[torn_at + kWalHeaderSize + 5] ^= 0x40;  // the torn record's payload no longer matches
  WriteAll(path, image);

  const std::string replacement(40, 'r');
  {
    std::vector<std::string> replayed;
    uint64_t dropped = 0;
    auto wal = OpenCollect(path, &replayed, &dropped, options);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    EXPECT_EQ(replayed, kept);
    EXPECT_EQ(dropped, image.size() - torn_at);  // garbage, then zeros: all of it is cut
    ASSERT_TRUE((*wal)->Append(replacement).ok());
  }
  std::vector<std::string> replayed;
  auto wal = OpenCollect(path, &replayed, nullptr, options);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(replayed, (std::vector<std::string>{"kept 0", "kept 1", replacement}));
}

// A header claiming kMaxWalPayload + 1 bytes is a torn tail even when that many bytes follow (a
// sparse file, so that the test costs no disk space).
TEST(WalTest, LengthAboveTheLimitIsATornTail) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  std::string bytes = Frames({"kept"});
  const uint64_t kept = bytes.size();
  zipg::PutFixed32(&bytes, kMaxWalPayload + 1);
  zipg::PutFixed64(&bytes, 0);
  WriteAll(path, bytes);
  const uint64_t sparse_size = kept + kWalHeaderSize + uint64_t{kMaxWalPayload} + 1;
  std::filesystem::resize_file(path, sparse_size);
  ExpectRecovers(path, {"kept"}, sparse_size - kept, "length kMaxWalPayload + 1");
}

TEST(WalTest, OversizedPayloadIsInvalidArgumentAndTheLogStaysUsable) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  std::vector<std::string> replayed;
  auto wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  // Untouched anonymous memory: reserves address space, not RAM.
  const size_t huge = size_t{kMaxWalPayload} + 1;
  void* mem = ::mmap(nullptr, huge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Status s = (*wal)->Append(std::string_view(static_cast<const char*>(mem), huge));
  ::munmap(mem, huge);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ((*wal)->size(), 0u);
  EXPECT_TRUE((*wal)->Append("fine").ok());
  wal->reset();  // closes the log
  replayed.clear();
  wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  EXPECT_EQ(replayed, std::vector<std::string>{"fine"});
}

TEST(WalTest, ReplayErrorAbortsOpenAndLeavesTheFileAlone) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  const std::vector<std::string> payloads = {"r0", "r1", "r2", "r3", "r4"};
  WriteAll(path, Frames(payloads) + "torn");
  const uint64_t size_before = FileSize(path);

  std::vector<std::string> seen;
  auto wal = Wal::Open(path, [&seen](std::string_view payload) {
    seen.emplace_back(payload);
    return seen.size() == 3 ? Status::Corruption("cannot apply r2") : Status::OK();
  });
  ASSERT_FALSE(wal.ok());
  EXPECT_EQ(wal.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(wal.status().message(), "cannot apply r2");
  EXPECT_EQ(seen, (std::vector<std::string>{"r0", "r1", "r2"}));
  EXPECT_EQ(FileSize(path), size_before);  // the torn tail past the failure is not cut

  ExpectRecovers(path, payloads, 4, "after the failed open");
}

TEST(WalTest, OpenFailsCleanlyOnBadPaths) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  auto missing_dir = Wal::Open(dir.File("no/such/dir/wal.log"), nullptr);
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kIOError);
  EXPECT_NE(missing_dir.status().message().find("no/such/dir/wal.log"), std::string::npos);

  auto directory = Wal::Open(dir.File(""), nullptr);
  ASSERT_FALSE(directory.ok());
}

// 16 threads append at once with sync on: everything replays, each thread's records in its own
// order, and the appenders shared syncs.
TEST(WalTest, GroupCommitSharesSyncsAndLosesNothing) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  constexpr int kThreads = 16;
  constexpr int kPerThread = 500;
  auto payload_of = [](int thread, int i) {
    // Varied lengths; "<thread> <i> " first so that the record can be traced back.
    return std::to_string(thread) + " " + std::to_string(i) + " " +
           std::string(static_cast<size_t>((thread * 131 + i * 17) % 300),
                       static_cast<char>('a' + thread));
  };

  std::vector<std::string> replayed;
  auto wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  Wal* log = wal->get();
  std::vector<int> failures(kThreads, 0);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kPerThread; ++i) {
        if (!log->Append(payload_of(t, i)).ok()) ++failures[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;

  const zipg::WalStats stats = log->stats();
  std::printf(
      "group commit: %d threads x %d appends: %llu records, %llu syncs (%.1f records/sync)\n",
      kThreads, kPerThread, static_cast<unsigned long long>(stats.records),
      static_cast<unsigned long long>(stats.syncs),
      static_cast<double>(stats.records) / static_cast<double>(std::max<uint64_t>(stats.syncs, 1)));
  EXPECT_EQ(stats.records, uint64_t{kThreads} * kPerThread);
  EXPECT_LT(stats.syncs, stats.records);
  EXPECT_GT(stats.syncs, 0u);
  EXPECT_EQ(stats.bytes, log->size());
  EXPECT_EQ(FileSize(path), log->size());
  wal->reset();

  replayed.clear();
  wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  // The same multiset of payloads...
  std::vector<std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) expected.push_back(payload_of(t, i));
  }
  std::vector<std::string> sorted = replayed;
  std::sort(sorted.begin(), sorted.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(sorted, expected);
  // ...and each thread's in the order it appended them.
  std::vector<int> next(kThreads, 0);
  for (const std::string& p : replayed) {
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(p.c_str(), "%d %d", &t, &i), 2) << p;
    ASSERT_TRUE(t >= 0 && t < kThreads) << p;
    EXPECT_EQ(i, next[t]) << "thread " << t;
    next[t] = i + 1;
  }
}

// AppendAll writes its records as one unit: back to back, in order, never interleaved with another
// caller's records, counted one by one. Empty calls are no-ops; one oversized record refuses the
// whole call and writes nothing.
TEST(WalTest, AppendAllKeepsEachCallContiguousAndInOrder) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  constexpr int kThreads = 8;
  constexpr int kCalls = 200;
  auto record_of = [](int thread, int call, int k) {
    return std::to_string(thread) + " " + std::to_string(call) + " " + std::to_string(k) + " " +
           std::string(static_cast<size_t>((thread * 37 + call * 11 + k * 5) % 200), 'x');
  };
  auto count_of = [](int thread, int call) { return 1 + (thread + call) % 4; };
  {
    std::vector<std::string> replayed;
    auto wal = OpenCollect(path, &replayed);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    Wal* log = wal->get();
    EXPECT_TRUE(log->AppendAll(nullptr, 0).ok());
    EXPECT_EQ(log->size(), 0u);
    const size_t huge = size_t{kMaxWalPayload} + 1;  // address space only, as above
    void* mem =
        ::mmap(nullptr, huge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    const std::string_view refused[] = {"a", std::string_view(static_cast<const char*>(mem), huge),
                                        "c"};
    EXPECT_EQ(log->AppendAll(refused, 3).code(), StatusCode::kInvalidArgument);
    ::munmap(mem, huge);
    EXPECT_EQ(log->size(), 0u);
    EXPECT_EQ(log->stats().records, 0u);

    std::latch start(kThreads);
    std::vector<int> failures(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int c = 0; c < kCalls; ++c) {
          std::vector<std::string> records;
          for (int k = 0; k < count_of(t, c); ++k) records.push_back(record_of(t, c, k));
          const std::vector<std::string_view> views(records.begin(), records.end());
          if (!log->AppendAll(views.data(), views.size()).ok()) ++failures[t];
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
    uint64_t total = 0;
    for (int t = 0; t < kThreads; ++t) {
      for (int c = 0; c < kCalls; ++c) total += static_cast<uint64_t>(count_of(t, c));
    }
    EXPECT_EQ(log->stats().records, total);
    EXPECT_EQ(log->stats().bytes, log->size());
  }

  std::vector<std::string> replayed;
  auto wal = OpenCollect(path, &replayed);
  ASSERT_TRUE(wal.ok()) << wal.status().ToString();
  std::vector<int> next_call(kThreads, 0);
  size_t at = 0;
  while (at < replayed.size()) {
    int t = -1, c = -1, k = -1;
    ASSERT_EQ(std::sscanf(replayed[at].c_str(), "%d %d %d", &t, &c, &k), 3) << replayed[at];
    ASSERT_TRUE(t >= 0 && t < kThreads) << replayed[at];
    ASSERT_EQ(c, next_call[t]) << "thread " << t << " calls out of order";
    ASSERT_EQ(k, 0) << "a call's first record is not first: " << replayed[at];
    for (int j = 0; j < count_of(t, c); ++j) {
      ASSERT_LT(at + static_cast<size_t>(j), replayed.size());
      EXPECT_EQ(replayed[at + static_cast<size_t>(j)], record_of(t, c, j))
          << "call (" << t << ", " << c << ") is not contiguous";
    }
    at += static_cast<size_t>(count_of(t, c));
    next_call[t] = c + 1;
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next_call[t], kCalls) << "thread " << t;
}

// A real write error: a forked child lowers RLIMIT_FSIZE (ignoring SIGXFSZ) so that an append
// crosses the limit. That append and every later one, even one that would fit, fail with IOError
// naming the file. The child reports through its exit code and a pipe; the parent then checks that
// reopening drops the partial record.
TEST(WalTest, WriteErrorPoisonsTheLog) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("wal.log");
  const std::vector<std::string> before = {"before 0", "before 1"};
  WriteLog(path, before);
  const uint64_t start = Frames(before).size();
  constexpr uint64_t kRoom = 1000;  // bytes the child may add
  auto payload_of = [](int i) { return std::string(100, static_cast<char>('A' + i % 26)); };
  const int fit = static_cast<int>(kRoom / (kWalHeaderSize + 100));  // 8 whole records

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    auto wal = Wal::Open(path, nullptr);
    if (!wal.ok()) ::_exit(10);
    const struct rlimit limit = {start + kRoom, start + kRoom};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(11);
    int appended = 0;
    Status s;
    while (appended < 100) {
      s = (*wal)->Append(payload_of(appended));
      if (!s.ok()) break;
      ++appended;
    }
    if (s.ok()) ::_exit(12);
    if (s.code() != StatusCode::kIOError) ::_exit(13);
    if (s.message().find(path) == std::string::npos) ::_exit(14);
    if ((*wal)->size() != start + uint64_t(appended) * (kWalHeaderSize + 100)) ::_exit(15);
    for (int i = 0; i < 3; ++i) {
      Status later = (*wal)->Append("");  // 12 bytes: would fit below the limit
      if (later.ok()) ::_exit(16);
      if (later.code() != StatusCode::kIOError) ::_exit(17);
      if (later.message().find(path) == std::string::npos) ::_exit(18);
    }
    if ((*wal)->stats().records != uint64_t(appended)) ::_exit(19);
    if (::write(pipe_fds[1], &appended, sizeof(appended)) != sizeof(appended)) ::_exit(20);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  int appended = -1;
  const ssize_t got = ::read(pipe_fds[0], &appended, sizeof(appended));
  ::close(pipe_fds[0]);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(pid, &wait_status, 0), pid);
  ASSERT_TRUE(WIFEXITED(wait_status)) << "child status " << wait_status;
  ASSERT_EQ(WEXITSTATUS(wait_status), 0) << "child failed check " << WEXITSTATUS(wait_status);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(appended)));
  EXPECT_EQ(appended, fit);

  // The failing write stopped at the limit, leaving a partial record that reopening drops.
  EXPECT_EQ(FileSize(path), start + kRoom);
  std::vector<std::string> expected = before;
  for (int i = 0; i < appended; ++i) expected.push_back(payload_of(i));
  ExpectRecovers(path, expected, start + kRoom - Frames(expected).size(), "after the write error");
}

}  // namespace
