// Tests of util/memory.h: DetectAvailableMemory against fake /proc and /sys/fs/cgroup trees (cgroup
// v1 and v2, limits on ancestors, missing directories), ParseByteSize and FormatBytes, and
// CurrentRss / PeakRss against memory the test itself touches.

#include "util/memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "util/scratch_dir.h"
#include "util/status.h"

namespace zipg {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;

// What cgroup v1 writes to memory.limit_in_bytes when there is no limit.
constexpr uint64_t kV1Unlimited = 9223372036854771712ULL;

// MemAvailable of every fake meminfo below, in kB as /proc/meminfo writes it: about 7.6 GiB.
constexpr uint64_t kMemAvailableKb = 8000000;
constexpr uint64_t kMemAvailable = kMemAvailableKb * 1024;

// Writes `contents` to `path`, creating the directories on the way.
void WriteFile(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << path;
}

std::string Meminfo(uint64_t available_kb) {
  return "MemTotal:       16318480 kB\n"
         "MemFree:         1234567 kB\n"
         "MemAvailable:    " +
         std::to_string(available_kb) +
         " kB\n"
         "Buffers:          123456 kB\n"
         "Cached:          4567890 kB\n";
}

// A fake /proc and /sys/fs/cgroup under one scratch directory.
class FakeSystem {
 public:
  FakeSystem() : proc_(dir_.path() + "/proc"), cgroup_(dir_.path() + "/cgroup") {
    EXPECT_TRUE(dir_.ok());
    std::filesystem::create_directories(proc_);
    std::filesystem::create_directories(cgroup_);
  }

  const std::string& proc() const { return proc_; }
  const std::string& cgroup() const { return cgroup_; }

  void Meminfo(const std::string& text) { WriteFile(proc_ + "/meminfo", text); }
  void SelfCgroup(const std::string& text) { WriteFile(proc_ + "/self/cgroup", text); }
  // A file under the cgroup root, e.g. "memory/a/b/memory.limit_in_bytes".
  void Cgroup(const std::string& name, const std::string& text) {
    WriteFile(cgroup_ + "/" + name, text);
  }

  // A v1 memory cgroup `path` ("/a/b") with its limit, usage and inactive file pages. memory.stat
  // also holds a (much larger) non-hierarchical inactive_file, which must not be used.
  void V1(const std::string& path, uint64_t limit, uint64_t usage, uint64_t inactive) {
    const std::string dir = "memory" + path;
    Cgroup(dir + "/memory.limit_in_bytes", std::to_string(limit) + "\n");
    Cgroup(dir + "/memory.usage_in_bytes", std::to_string(usage) + "\n");
    Cgroup(dir + "/memory.stat", "cache 1\nrss 2\ninactive_file " + std::to_string(usage) +
                                     "\nactive_file 3\ntotal_cache 4\ntotal_inactive_file " +
                                     std::to_string(inactive) + "\ntotal_active_file 5\n");
  }

  // A v2 cgroup `path` under the unified root, `max` being "max" or a number.
  void V2(const std::string& path, const std::string& max, uint64_t current, uint64_t inactive) {
    Cgroup(path.substr(1) + "/memory.max", max + "\n");
    Cgroup(path.substr(1) + "/memory.current", std::to_string(current) + "\n");
    Cgroup(path.substr(1) + "/memory.stat", "anon 100\nfile 200\nactive_file 300\ninactive_file " +
                                                std::to_string(inactive) + "\nslab 400\n");
  }

  AvailableMemory Detect() const {
    StatusOr<AvailableMemory> m = DetectAvailableMemory(proc_, cgroup_);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : AvailableMemory{};
  }

 private:
  ScratchDir dir_{"memory_test"};
  std::string proc_;
  std::string cgroup_;
};

// ---------------------------------------------------------------------------------------------
// DetectAvailableMemory: /proc/meminfo only.

TEST(DetectAvailableMemoryTest, MemAvailableInKilobytes) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, kMemAvailable);
  EXPECT_EQ(m.source, "MemAvailable");
}

TEST(DetectAvailableMemoryTest, FallsBackToMemFree) {
  FakeSystem sys;
  sys.Meminfo("MemTotal:       16318480 kB\nMemFree:         1234567 kB\nCached:    4567 kB\n");
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, uint64_t{1234567} * 1024);
  EXPECT_EQ(m.source, "MemFree");
}

TEST(DetectAvailableMemoryTest, MissingMeminfoIsIoError) {
  FakeSystem sys;
  StatusOr<AvailableMemory> m = DetectAvailableMemory(sys.proc(), sys.cgroup());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIOError) << m.status().ToString();
}

TEST(DetectAvailableMemoryTest, MeminfoWithoutEitherFieldIsIoError) {
  FakeSystem sys;
  sys.Meminfo("MemTotal:       16318480 kB\nCached:    4567 kB\n");
  StatusOr<AvailableMemory> m = DetectAvailableMemory(sys.proc(), sys.cgroup());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIOError) << m.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// cgroup v1.

TEST(DetectAvailableMemoryTest, CgroupV1LeafLimit) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("12:pids:/a/b\n4:memory:/a/b\n3:cpu:/\n1:name=systemd:/a/b\n");
  const uint64_t limit = 2 * kGiB, usage = kGiB + 300 * kMiB, inactive = 200 * kMiB;
  sys.V1("/a/b", limit, usage, inactive);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, limit - (usage - inactive));
  EXPECT_EQ(m.source, "cgroup v1 limit of /a/b");
  EXPECT_NE(m.source.find("cgroup v1"), std::string::npos);
  EXPECT_NE(m.source.find("/a/b"), std::string::npos);
}

TEST(DetectAvailableMemoryTest, CgroupV1LimitAboveMemAvailableKeepsMemAvailable) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("4:memory:/a/b\n");
  sys.V1("/a/b", 64 * kGiB, kGiB, 0);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, kMemAvailable);
  EXPECT_EQ(m.source, "MemAvailable");
}

TEST(DetectAvailableMemoryTest, CgroupV1AncestorLimitWithUnlimitedLeaf) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("4:memory:/a/b\n3:cpu:/\n");
  sys.V1("/a/b", kV1Unlimited, 500 * kMiB, 0);
  const uint64_t limit = kGiB, usage = 100 * kMiB, inactive = 10 * kMiB;
  sys.V1("/a", limit, usage, inactive);
  sys.V1("", kV1Unlimited, 3 * kGiB, 0);  // the root of the hierarchy
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, limit - (usage - inactive));
  EXPECT_EQ(m.source, "cgroup v1 limit of /a");
}

TEST(DetectAvailableMemoryTest, CgroupV1SmallestRoomOverTheChainWins) {
  // The ancestor has the higher limit but the smaller room.
  {
    FakeSystem sys;
    sys.Meminfo(Meminfo(kMemAvailableKb));
    sys.SelfCgroup("4:memory:/a/b\n");
    sys.V1("/a/b", 3 * kGiB, kGiB, 0);                  // room 2 GiB
    sys.V1("/a", 4 * kGiB, 3 * kGiB + 512 * kMiB, 0);  // room 512 MiB
    const AvailableMemory m = sys.Detect();
    EXPECT_EQ(m.bytes, 512 * kMiB);
    EXPECT_EQ(m.source, "cgroup v1 limit of /a");
  }
  // The leaf has the smaller room, and the ancestor above the ancestor a larger one.
  {
    FakeSystem sys;
    sys.Meminfo(Meminfo(kMemAvailableKb));
    sys.SelfCgroup("4:memory:/a/b/c\n");
    sys.V1("/a/b/c", 2 * kGiB, kGiB + 724 * kMiB, 100 * kMiB);  // room 400 MiB
    sys.V1("/a/b", kV1Unlimited, kGiB, 0);
    sys.V1("/a", 3 * kGiB, 2 * kGiB, 0);  // room 1 GiB
    const AvailableMemory m = sys.Detect();
    EXPECT_EQ(m.bytes, 2 * kGiB - (kGiB + 724 * kMiB - 100 * kMiB));
    EXPECT_EQ(m.bytes, 400 * kMiB);
    EXPECT_EQ(m.source, "cgroup v1 limit of /a/b/c");
  }
}

TEST(DetectAvailableMemoryTest, CgroupV1UsageAboveLimitGivesZero) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("4:memory:/a/b\n");
  sys.V1("/a/b", kGiB, kGiB + 100 * kMiB, 50 * kMiB);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, 0u);
  EXPECT_EQ(m.source, "cgroup v1 limit of /a/b");
}

TEST(DetectAvailableMemoryTest, CgroupV1CombinedControllers) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  // A limit in memory/d must be ignored: hierarchy 3 does not carry the memory controller.
  sys.SelfCgroup("3:cpu,cpuacct:/d\n5:cpu,memory:/c\n");
  sys.V1("/d", 100 * kMiB, 0, 0);
  const uint64_t limit = 3 * kGiB, usage = 2 * kGiB, inactive = 256 * kMiB;
  sys.V1("/c", limit, usage, inactive);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, limit - (usage - inactive));
  EXPECT_EQ(m.source, "cgroup v1 limit of /c");
}

// ---------------------------------------------------------------------------------------------
// cgroup v2.

TEST(DetectAvailableMemoryTest, CgroupV2ParentLimit) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("0::/x/y\n");
  sys.Cgroup("cgroup.controllers", "cpuset cpu io memory pids\n");
  sys.V2("/x/y", "max", 700 * kMiB, 100 * kMiB);
  const uint64_t limit = 3 * kGiB, current = 2 * kGiB, inactive = 300 * kMiB;
  sys.V2("/x", std::to_string(limit), current, inactive);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, limit - (current - inactive));
  EXPECT_EQ(m.source, "cgroup v2 limit of /x");
  EXPECT_NE(m.source.find("cgroup v2"), std::string::npos);
}

TEST(DetectAvailableMemoryTest, CgroupV2HybridUnifiedMount) {
  // No cgroup.controllers at the root: the v2 hierarchy is mounted at <cgroup>/unified.
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("4:cpu:/\n0::/x\n");
  const uint64_t limit = kGiB, current = 900 * kMiB, inactive = 0;
  sys.V2("/unified/x", std::to_string(limit), current, inactive);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, limit - current);
  EXPECT_EQ(m.source, "cgroup v2 limit of /x");
}

// ---------------------------------------------------------------------------------------------
// Missing cgroup directories.

TEST(DetectAvailableMemoryTest, MissingCgroupDirectoryIsSkipped) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.SelfCgroup("4:memory:/gone/away\n");
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, kMemAvailable);
  EXPECT_EQ(m.source, "MemAvailable");
}

TEST(DetectAvailableMemoryTest, MissingCgroupDirectoryDoesNotHideOtherHierarchies) {
  FakeSystem sys;
  sys.Meminfo(Meminfo(kMemAvailableKb));
  sys.Cgroup("cgroup.controllers", "memory\n");
  sys.SelfCgroup("0::/gone\n4:memory:/a\n");
  sys.V1("/a", 2 * kGiB, kGiB, 0);
  const AvailableMemory m = sys.Detect();
  EXPECT_EQ(m.bytes, kGiB);
  EXPECT_EQ(m.source, "cgroup v1 limit of /a");
}

// ---------------------------------------------------------------------------------------------
// ParseByteSize and FormatBytes.

uint64_t ParseOk(const std::string& text) {
  StatusOr<uint64_t> v = ParseByteSize(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : ~uint64_t{0};
}

TEST(ParseByteSizeTest, Accepts) {
  EXPECT_EQ(ParseOk("0"), 0u);
  EXPECT_EQ(ParseOk("1073741824"), kGiB);
  EXPECT_EQ(ParseOk("512M"), 512 * kMiB);
  EXPECT_EQ(ParseOk("4G"), 4 * kGiB);
  EXPECT_EQ(ParseOk("1.5GiB"), kGiB + kGiB / 2);
  EXPECT_EQ(ParseOk("300MB"), 300 * kMiB);
  EXPECT_EQ(ParseOk("64k"), 64 * kKiB);
  EXPECT_EQ(ParseOk("2T"), 2 * kTiB);
  EXPECT_EQ(ParseOk("1B"), 1u);
  EXPECT_EQ(ParseOk("8Ki"), 8 * kKiB);
  EXPECT_EQ(ParseOk("7gib"), 7 * kGiB);
}

TEST(ParseByteSizeTest, LargeValuesThatFitIn64Bits) {
  EXPECT_EQ(ParseOk("8388608T"), uint64_t{1} << 63);
  EXPECT_EQ(ParseOk("10000000T"), uint64_t{10000000} * kTiB);
  EXPECT_EQ(ParseOk("16777215T"), uint64_t{16777215} * kTiB);  // 2^64 - 2^40
}

TEST(ParseByteSizeTest, Rejects) {
  for (const std::string text :
       {"", "G", "-1", "4X", "4GG", "1e3", "abc", "99999999999T", "16777216T", ".", "1.2.3", "4 G",
        "4iB", "4GiBB"}) {
    StatusOr<uint64_t> v = ParseByteSize(text);
    ASSERT_FALSE(v.ok()) << "\"" << text << "\" gave " << *v;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(v.status().message().find("\"" + text + "\""), std::string::npos)
        << v.status().message();
  }
}

TEST(FormatBytesTest, Formats) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(12 * kKiB), "12.0 KiB");
  EXPECT_EQ(FormatBytes(300 * kMiB), "300.0 MiB");
  EXPECT_EQ(FormatBytes(3 * kGiB), "3.0 GiB");
  EXPECT_EQ(FormatBytes(kGiB + kGiB / 2), "1.5 GiB");
  EXPECT_EQ(FormatBytes(5 * kTiB), "5.0 TiB");
}

// ---------------------------------------------------------------------------------------------
// CurrentRss and PeakRss.

TEST(RssTest, PositiveAndPeakAtLeastCurrent) {
  const uint64_t current = CurrentRss();
  const uint64_t peak = PeakRss();
  EXPECT_GT(current, 0u);
  EXPECT_GT(peak, 0u);
  EXPECT_GE(peak, current);
}

TEST(RssTest, PeakGrowsWithTouchedMemory) {
  // The peak is a high-water mark: start it from what the process holds now, so that an earlier
  // peak (another test, --gtest_repeat) cannot hide the growth.
  ASSERT_TRUE(ResetPeakRss());
  const uint64_t before = PeakRss();
  ASSERT_GT(before, 0u);
  EXPECT_LE(before, CurrentRss() + 4 * kMiB);
  std::vector<char> block(64 * kMiB);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i / 4096 + 1);
  // Read the pages back so that the compiler cannot drop the vector.
  uint64_t sum = 0;
  for (size_t i = 0; i < block.size(); i += 4096) sum += static_cast<unsigned char>(block[i]);
  const uint64_t after = PeakRss();
  uint64_t expected_sum = 0;
  for (size_t i = 0; i < block.size(); i += 4096) expected_sum += (i / 4096 + 1) & 0xff;
  EXPECT_EQ(sum, expected_sum);
  EXPECT_GE(after, before + 48 * kMiB) << "before " << before << ", after " << after;
  EXPECT_GE(CurrentRss(), 48 * kMiB);  // the block is still resident
}

}  // namespace
}  // namespace zipg
