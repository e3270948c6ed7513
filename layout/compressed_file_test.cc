// Tests of CompressedFile against a naive reference (the plain text, std::string::find and a suffix
// array sorted with std::sort) on randomized inputs with fixed seeds, across every sampling
// configuration, plus the file format's guarantees: determinism, size accounting, corruption
// detection, atomic writes and concurrent reads.
//
// Random values come from std::mt19937_64 (whose output the standard fixes) reduced with plain
// modulo, so every standard library generates the same inputs.
//
// The sampling rate 1024 configuration walks up to 1023 Psi steps per access, each decoding up to
// 1023 gaps; a small cost model (WorkBudget) caps the random queries per text so that it does not
// dominate the run time, while always running a minimum number of them.

#include "layout/compressed_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "layout/format.h"
#include "util/checksum.h"
#include "util/coding.h"
#include "util/status.h"
#include "util/scratch_dir.h"

namespace {

using zipg::Status;
using zipg::StatusCode;
using zipg::StatusCodeName;
using zipg::StatusOr;
using zipg::layout::ComponentSize;
using zipg::layout::CompressedFile;
using zipg::layout::CompressedFileOptions;
using zipg::layout::OpenOptions;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

// ------------------------------------------------------------------------------------------------
// Deterministic random inputs.

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // A value in [0, bound), 0 if bound is 0 (modulo bias is irrelevant here).
  uint64_t Below(uint64_t bound) { return bound == 0 ? 0 : engine_() % bound; }
  char Byte() { return static_cast<char>(static_cast<uint8_t>(engine_() >> 56)); }

 private:
  std::mt19937_64 engine_;
};

// Bytes over all 256 values.
std::string RandomBytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = rng.Byte();
  return s;
}

std::string RandomOver(Rng& rng, std::string_view alphabet, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = alphabet[rng.Below(alphabet.size())];
  return s;
}

// A random block of `block_len` bytes repeated (and cut) to n bytes: long repeats, deep LCPs.
std::string RepeatedBlock(Rng& rng, size_t block_len, size_t n) {
  std::string block = RandomBytes(rng, block_len);
  std::string s;
  while (s.size() < n) s += block;
  s.resize(n);
  return s;
}

std::string Periodic(std::string_view period, size_t n) {
  std::string s;
  while (s.size() < n) s += period;
  s.resize(n);
  return s;
}

// Words from a small vocabulary separated by spaces, with the odd sentence end.
std::string TextLike(Rng& rng, size_t n) {
  static const char* const kWords[] = {"the",   "graph",  "node",  "edge",       "of",  "and",
                                       "a",     "to",     "in",    "is",         "zip", "store",
                                       "query", "suffix", "array", "compressed", "tao", "friend"};
  std::string s;
  while (s.size() < n) {
    s += kWords[rng.Below(std::size(kWords))];
    s += rng.Below(12) == 0 ? ".\n" : " ";
  }
  s.resize(n);
  return s;
}

// A random substring of 1..max_len bytes (text must not be empty).
std::string RandomSubstring(std::string_view text, Rng& rng, size_t max_len) {
  size_t start = rng.Below(text.size());
  size_t len = 1 + rng.Below(std::min(max_len, text.size() - start));
  return std::string(text.substr(start, len));
}

// ------------------------------------------------------------------------------------------------
// The naive reference.

// All (overlapping) occurrences of `pattern` by repeated find, ascending.
std::vector<uint64_t> FindAll(std::string_view text, std::string_view pattern) {
  std::vector<uint64_t> out;
  if (pattern.empty()) return out;
  for (size_t pos = text.find(pattern); pos != std::string_view::npos;
       pos = text.find(pattern, pos + 1)) {
    out.push_back(pos);
  }
  return out;
}

// The text and, for texts small enough, its suffix array sorted with std::sort over suffix
// comparisons (std::string_view compares bytes as unsigned char, like memcmp; a suffix sorts before
// the suffixes it is a prefix of, as with the end sentinel).
class ReferenceIndex {
 public:
  ReferenceIndex(std::string text, bool with_suffix_array) : text_(std::move(text)) {
    if (!with_suffix_array) return;
    std::string_view t = text_;
    sa_.resize(t.size());
    for (uint64_t i = 0; i < sa_.size(); ++i) sa_[i] = i;
    std::sort(sa_.begin(), sa_.end(),
              [t](uint64_t a, uint64_t b) { return t.substr(a) < t.substr(b); });
    has_sa_ = true;
  }

  const std::string& text() const { return text_; }
  uint64_t size() const { return text_.size(); }
  bool has_suffix_array() const { return has_sa_; }

  std::vector<uint64_t> Occurrences(std::string_view pattern) const {
    return FindAll(text_, pattern);
  }

  // The same from the suffix array: the rows whose suffix starts with `pattern`, as sorted offsets.
  std::vector<uint64_t> SuffixArrayOccurrences(std::string_view pattern) const {
    std::string_view t = text_;
    auto head = [&](uint64_t pos) { return t.substr(pos, pattern.size()); };
    auto lo =
        std::partition_point(sa_.begin(), sa_.end(), [&](uint64_t p) { return head(p) < pattern; });
    auto hi = std::partition_point(lo, sa_.end(), [&](uint64_t p) { return head(p) == pattern; });
    std::vector<uint64_t> out(lo, hi);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string text_;
  std::vector<uint64_t> sa_;
  bool has_sa_ = false;
};

// ------------------------------------------------------------------------------------------------
// Printing and comparing.

std::string Printable(std::string_view s) {
  std::ostringstream out;
  out << '"';
  const size_t shown = std::min<size_t>(s.size(), 40);
  for (size_t i = 0; i < shown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out << static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out << "\\x" << kHex[c >> 4] << kHex[c & 15];
    }
  }
  out << '"';
  if (shown < s.size()) out << "...";
  out << " (" << s.size() << " bytes)";
  return out.str();
}

std::string Describe(const CompressedFileOptions& o) {
  std::ostringstream out;
  out << "sa_sampling_rate=" << o.sa_sampling_rate << " isa_sampling_rate=" << o.isa_sampling_rate
      << " psi_block_size=" << o.psi_block_size
      << " force_64bit_construction=" << (o.force_64bit_construction ? "true" : "false");
  return out.str();
}

::testing::AssertionResult SameBytes(std::string_view got, std::string_view want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto at = [i](std::string_view s) {
    return i < s.size() ? std::to_string(static_cast<unsigned char>(s[i])) : std::string("end");
  };
  return ::testing::AssertionFailure()
         << "got " << got.size() << " bytes, want " << want.size() << "; first difference at byte "
         << i << " (got " << at(got) << ", want " << at(want) << ")";
}

::testing::AssertionResult SameOffsets(const std::vector<uint64_t>& got,
                                       const std::vector<uint64_t>& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto at = [i](const std::vector<uint64_t>& v) {
    return i < v.size() ? std::to_string(v[i]) : std::string("end");
  };
  return ::testing::AssertionFailure() << "got " << got.size() << " offsets, want " << want.size()
                                       << "; first difference at index " << i << " (got " << at(got)
                                       << ", want " << at(want) << ")";
}

// `s` failed with `code` and says why.
::testing::AssertionResult IsError(const Status& s, StatusCode code) {
  if (s.code() != code) {
    return ::testing::AssertionFailure()
           << "want " << StatusCodeName(code) << ", got " << s.ToString();
  }
  if (s.message().empty()) {
    return ::testing::AssertionFailure() << StatusCodeName(code) << " with an empty message";
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::string>& DocumentedComponents() {
  static const std::vector<std::string> kNames = {"header",     "counts",      "psi_samples",
                                                  "psi_gaps",   "psi_columns", "isa_samples",
                                                  "sa_samples", "sa_marks"};
  return kNames;
}

// ------------------------------------------------------------------------------------------------
// Building, files and directories.

// Builds `text` with BuildToBuffer and opens a copy with OpenBuffer; *bytes receives the image.
::testing::AssertionResult BuildInMemory(std::string_view text,
                                         const CompressedFileOptions& options, std::string* bytes,
                                         std::unique_ptr<CompressedFile>* file) {
  StatusOr<std::string> built = CompressedFile::BuildToBuffer(text, options);
  if (!built.ok()) {
    return ::testing::AssertionFailure() << "BuildToBuffer: " << built.status().ToString();
  }
  *bytes = *built;
  auto opened = CompressedFile::OpenBuffer(std::move(built).value());
  if (!opened.ok()) {
    return ::testing::AssertionFailure() << "OpenBuffer: " << opened.status().ToString();
  }
  *file = std::move(opened).value();
  return ::testing::AssertionSuccess();
}

// Builds `text` to `path` with Build and opens it with Open.
::testing::AssertionResult BuildOnDisk(std::string_view text, const CompressedFileOptions& options,
                                       const std::string& path,
                                       std::unique_ptr<CompressedFile>* file) {
  Status s = CompressedFile::Build(text, options, path);
  if (!s.ok()) return ::testing::AssertionFailure() << "Build: " << s.ToString();
  auto opened = CompressedFile::Open(path);
  if (!opened.ok()) return ::testing::AssertionFailure() << "Open: " << opened.status().ToString();
  *file = std::move(opened).value();
  return ::testing::AssertionSuccess();
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return static_cast<bool>(out);
}

std::string FlipBit(std::string bytes, size_t pos, int bit) {
  bytes[pos] = static_cast<char>(static_cast<uint8_t>(bytes[pos]) ^ (1u << bit));
  return bytes;
}

using zipg::ScratchDir;

// ------------------------------------------------------------------------------------------------
// Cost model: rough number of gap decodes per operation, to cap the work on expensive
// configurations.

class CostModel {
 public:
  CostModel(const CompressedFileOptions& o, uint64_t n) : o_(o), n_(static_cast<double>(n)) {}
  // One Psi access decodes on average half a block (never more than the text).
  double Psi() const { return std::max(1.0, std::min<double>(o_.psi_block_size, n_ + 1) / 2); }
  // Psi steps from a sample: on average half the rate.
  double Walk(uint32_t rate) const { return std::max(1.0, std::min<double>(rate, n_ + 1) / 2); }
  double Extract(double len) const { return (Walk(o_.isa_sampling_rate) + len) * Psi(); }
  double Locate(double occurrences) const {
    return (1 + occurrences * Walk(o_.sa_sampling_rate)) * Psi();
  }
  double Count(double pattern_len) const { return pattern_len * 2 * std::log2(n_ + 2) * Psi(); }

 private:
  CompressedFileOptions o_;
  double n_;
};

// Admits operations while their estimated cost fits in `total`; the first `min_ops` operations
// costing at most `forced_cost` are always admitted.
class WorkBudget {
 public:
  WorkBudget(double total, int min_ops, double forced_cost)
      : total_(total), min_ops_(min_ops), forced_cost_(forced_cost) {}
  bool Take(double cost) {
    bool forced = ops_ < min_ops_ && cost <= forced_cost_;
    if (!forced && spent_ + cost > total_) return false;
    spent_ += cost;
    ++ops_;
    return true;
  }

 private:
  double total_;
  int min_ops_;
  double forced_cost_;
  double spent_ = 0;
  int ops_ = 0;
};

constexpr double kBudgetPerKind = 1.5e6;

// ------------------------------------------------------------------------------------------------
// Single-query checks (AssertionResult, so that threads can use them too).

::testing::AssertionResult ExtractMatches(const CompressedFile& file, std::string_view text,
                                          uint64_t offset, uint64_t len) {
  StatusOr<std::string> got = file.Extract(offset, len);
  if (offset > text.size()) {
    if (got.ok()) {
      return ::testing::AssertionFailure()
             << "Extract(" << offset << ", " << len << ") of " << text.size() << " bytes succeeded";
    }
    auto r = IsError(got.status(), StatusCode::kInvalidArgument);
    if (!r) return r << " from Extract(" << offset << ", " << len << ")";
    return ::testing::AssertionSuccess();
  }
  if (!got.ok()) {
    return ::testing::AssertionFailure()
           << "Extract(" << offset << ", " << len << "): " << got.status().ToString();
  }
  auto r = SameBytes(*got, text.substr(offset, len));
  if (!r) return r << " from Extract(" << offset << ", " << len << ")";
  return ::testing::AssertionSuccess();
}

// The appending overload keeps what *out held.
::testing::AssertionResult ExtractAppends(const CompressedFile& file, std::string_view text,
                                          uint64_t offset, uint64_t len) {
  std::string out("prefix\0\xff", 8);
  const std::string before = out;
  Status s = file.Extract(offset, len, &out);
  if (!s.ok()) {
    return ::testing::AssertionFailure()
           << "Extract(" << offset << ", " << len << ", &out): " << s.ToString();
  }
  auto r = SameBytes(out, before + std::string(text.substr(offset, len)));
  if (!r) return r << " from Extract(" << offset << ", " << len << ", &out) onto a prefix";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult CharAtMatches(const CompressedFile& file, std::string_view text,
                                         uint64_t offset) {
  StatusOr<uint8_t> got = file.CharAt(offset);
  if (offset >= text.size()) {
    if (got.ok()) {
      return ::testing::AssertionFailure()
             << "CharAt(" << offset << ") of " << text.size() << " bytes succeeded";
    }
    auto r = IsError(got.status(), StatusCode::kInvalidArgument);
    if (!r) return r << " from CharAt(" << offset << ")";
    return ::testing::AssertionSuccess();
  }
  if (!got.ok()) {
    return ::testing::AssertionFailure() << "CharAt(" << offset << "): " << got.status().ToString();
  }
  const uint8_t want = static_cast<uint8_t>(text[offset]);
  if (*got != want) {
    return ::testing::AssertionFailure()
           << "CharAt(" << offset << ") = " << int{*got} << ", want " << int{want};
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult CountMatches(const CompressedFile& file, std::string_view pattern,
                                        const std::vector<uint64_t>& want) {
  StatusOr<uint64_t> got = file.Count(pattern);
  if (!got.ok()) {
    return ::testing::AssertionFailure()
           << "Count(" << Printable(pattern) << "): " << got.status().ToString();
  }
  if (*got != want.size()) {
    return ::testing::AssertionFailure()
           << "Count(" << Printable(pattern) << ") = " << *got << ", want " << want.size();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SearchMatches(const CompressedFile& file, std::string_view pattern,
                                         const std::vector<uint64_t>& want) {
  StatusOr<std::vector<uint64_t>> got = file.Search(pattern);
  if (!got.ok()) {
    return ::testing::AssertionFailure()
           << "Search(" << Printable(pattern) << "): " << got.status().ToString();
  }
  if (std::adjacent_find(got->begin(), got->end(), std::greater_equal<uint64_t>()) != got->end()) {
    return ::testing::AssertionFailure()
           << "Search(" << Printable(pattern) << ") is not strictly ascending";
  }
  auto r = SameOffsets(*got, want);
  if (!r) return r << " from Search(" << Printable(pattern) << ")";
  return ::testing::AssertionSuccess();
}

// ------------------------------------------------------------------------------------------------
// Whole-file checks against the reference. Each stops at its first mismatch (ASSERT), so that one
// bug does not print thousands of failures; the caller runs each with EXPECT_NO_FATAL_FAILURE.

void CheckSizeAccounting(const CompressedFile& file, uint64_t stored_bytes) {
  std::vector<ComponentSize> parts = file.Breakdown();
  std::vector<std::string> names;
  uint64_t sum = 0;
  for (const ComponentSize& c : parts) {
    names.push_back(c.name);
    sum += c.bytes;
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> want = DocumentedComponents();
  std::sort(want.begin(), want.end());
  EXPECT_EQ(names, want) << "Breakdown() names";
  EXPECT_EQ(sum, file.SizeInBytes()) << "sum of Breakdown() bytes";
  EXPECT_EQ(file.SizeInBytes(), stored_bytes) << "SizeInBytes() against the stored bytes";
}

void CheckBoundaries(const CompressedFile& file, const ReferenceIndex& ref) {
  const std::string& text = ref.text();
  const uint64_t n = text.size();
  ASSERT_EQ(file.size(), n);
  // Reads that run to or past the end start near it, so that they stay cheap on large texts (the
  // whole-text reads are in CheckExtract).
  const uint64_t near_end = n - std::min<uint64_t>(n, 40);
  const std::pair<uint64_t, uint64_t> kReads[] = {{0, 0},
                                                  {0, 1},
                                                  {0, std::min<uint64_t>(n, 50)},
                                                  {n, 0},
                                                  {n, 1},
                                                  {n, kMax64},
                                                  {n / 2, 0},
                                                  {near_end, kMax64},
                                                  {near_end, n - near_end},
                                                  {near_end, n - near_end + 1},
                                                  {n > 0 ? n - 1 : 0, 1},
                                                  {n > 0 ? n - 1 : 0, 5},
                                                  {n + 1, 0},
                                                  {n + 1, 1},
                                                  {n + 1000, 3},
                                                  {kMax64, 0},
                                                  {kMax64, kMax64}};
  for (auto [offset, len] : kReads) ASSERT_TRUE(ExtractMatches(file, text, offset, len));
  ASSERT_TRUE(ExtractAppends(file, text, 0, std::min<uint64_t>(n, 50)));
  ASSERT_TRUE(ExtractAppends(file, text, near_end, kMax64));
  ASSERT_TRUE(ExtractAppends(file, text, n / 3, 7));
  ASSERT_TRUE(ExtractAppends(file, text, n, 3));
  for (uint64_t offset : {n, n + 1, kMax64}) ASSERT_TRUE(CharAtMatches(file, text, offset));
  ASSERT_TRUE(IsError(file.Count("").status(), StatusCode::kInvalidArgument)) << "Count(\"\")";
  ASSERT_TRUE(IsError(file.Search("").status(), StatusCode::kInvalidArgument)) << "Search(\"\")";
  ASSERT_TRUE(IsError(file.Count(std::string_view()).status(), StatusCode::kInvalidArgument));
  ASSERT_TRUE(IsError(file.Search(std::string_view()).status(), StatusCode::kInvalidArgument));
}

void CheckExtract(const CompressedFile& file, const ReferenceIndex& ref,
                  const CompressedFileOptions& options, uint64_t seed) {
  const std::string& text = ref.text();
  const uint64_t n = text.size();
  const CostModel cost(options, n);
  {  // the whole text by one decode of Psi, appended
    std::string all = "before";
    ASSERT_TRUE(file.ExtractAll(&all).ok());
    ASSERT_EQ(all.size(), text.size() + 6);
    ASSERT_TRUE(all.compare(6, std::string::npos, text) == 0 && all.rfind("before", 0) == 0)
        << "ExtractAll differs from the text";
  }
  if (n <= 40) {  // every (offset, len), across the sample boundaries
    for (uint64_t offset = 0; offset <= n; ++offset) {
      for (uint64_t len = 0; len <= n - offset + 1; ++len) {
        ASSERT_TRUE(ExtractMatches(file, text, offset, len));
      }
    }
    return;
  }
  Rng rng(seed ^ 0x5EED0E47AC7ull);
  WorkBudget budget(kBudgetPerKind, 12, cost.Extract(64));
  for (int i = 0; i < 400; ++i) {
    const uint64_t offset = rng.Below(n + 1);
    uint64_t len;
    switch (rng.Below(5)) {
      case 0:
        len = 0;
        break;
      case 1:
        len = 1 + rng.Below(8);
        break;
      case 2:
        len = rng.Below(65);
        break;
      case 3:
        len = rng.Below(300);
        break;
      default:
        len = n - offset + rng.Below(3);
        break;  // to the end, or past it
    }
    if (!budget.Take(cost.Extract(static_cast<double>(std::min(len, n - offset))))) continue;
    if (i % 16 == 0) {
      ASSERT_TRUE(ExtractAppends(file, text, offset, len));
    } else {
      ASSERT_TRUE(ExtractMatches(file, text, offset, len));
    }
  }
  if (cost.Extract(static_cast<double>(n)) <= 5 * kBudgetPerKind) {
    ASSERT_TRUE(ExtractMatches(file, text, 0, n + 1));
  }
}

void CheckCharAt(const CompressedFile& file, const ReferenceIndex& ref,
                 const CompressedFileOptions& options, uint64_t seed) {
  const std::string& text = ref.text();
  const uint64_t n = text.size();
  if (n <= 300) {
    for (uint64_t offset = 0; offset < n; ++offset) ASSERT_TRUE(CharAtMatches(file, text, offset));
    return;
  }
  const CostModel cost(options, n);
  Rng rng(seed ^ 0xC4A7A7ull);
  WorkBudget budget(kBudgetPerKind, 12, cost.Extract(1));
  for (uint64_t offset : {uint64_t{0}, uint64_t{1}, n / 2, n - 2, n - 1}) {
    ASSERT_TRUE(CharAtMatches(file, text, offset));
  }
  for (int i = 0; i < 300 && budget.Take(cost.Extract(1)); ++i) {
    ASSERT_TRUE(CharAtMatches(file, text, rng.Below(n)));
  }
}

// Patterns for Count/Search, most important first (the budget may skip the tail).
std::vector<std::string> PatternsFor(std::string_view text, Rng& rng) {
  std::vector<std::string> p;
  const size_t n = text.size();
  p.push_back(std::string(1, '\0'));
  p.push_back(std::string(1, '\xff'));
  p.push_back(std::string("\0\xff", 2));
  p.push_back(std::string("\xff\0", 2));
  p.push_back(std::string(2, '\0'));
  p.push_back(std::string(3, '\xff'));
  p.push_back("a");
  p.push_back("aa");
  p.push_back("ab");
  if (n > 0) {
    for (size_t len : {1, 2, 3, 5, 17, 31}) {
      if (len > n) break;
      p.push_back(std::string(text.substr(0, len)));   // at the very beginning
      p.push_back(std::string(text.substr(n - len)));  // at the very end
    }
    p.push_back(std::string(text.substr(0, std::min<size_t>(n, 30))) +
                std::string(text.substr(0, 1)));
    for (int i = 0; i < 40; ++i) p.push_back(RandomSubstring(text, rng, 30));  // present
    for (int i = 0; i < 15; ++i) {  // one byte changed: usually absent
      std::string s = RandomSubstring(text, rng, 30);
      size_t k = rng.Below(s.size());
      s[k] = static_cast<char>((static_cast<uint8_t>(s[k]) + 1 + rng.Below(255)) & 0xFF);
      p.push_back(s);
    }
    for (int i = 0; i < 10; ++i) {  // the text's own bytes in a random order
      std::string s;
      for (size_t len = 1 + rng.Below(12); s.size() < len;) s.push_back(text[rng.Below(n)]);
      p.push_back(s);
    }
  }
  for (int i = 0; i < 10; ++i) p.push_back(RandomBytes(rng, 1 + rng.Below(8)));
  return p;
}

void CheckCountAndSearch(const CompressedFile& file, const ReferenceIndex& ref,
                         const CompressedFileOptions& options, uint64_t seed) {
  const std::string& text = ref.text();
  const uint64_t n = text.size();
  const CostModel cost(options, n);
  Rng rng(seed ^ 0x5EA4C4ull);

  std::vector<std::string> patterns = PatternsFor(text, rng);
  if (n <= 40) {  // every substring
    std::set<std::string> all;
    for (size_t i = 0; i < n; ++i) {
      for (size_t len = 1; i + len <= n; ++len) all.insert(text.substr(i, len));
    }
    patterns.insert(patterns.end(), all.begin(), all.end());
  }
  // The whole text, and patterns longer than it, when affordable.
  if (n > 0 && cost.Count(static_cast<double>(n)) <= 4 * kBudgetPerKind) {
    patterns.insert(patterns.begin(), text);
    if (n <= 1024 && cost.Count(static_cast<double>(n)) <= kBudgetPerKind) {
      patterns.insert(patterns.begin(), text + text.substr(0, 1));
      patterns.insert(patterns.begin(), text.substr(n - 1) + text);
    }
  }
  if (n == 0) patterns.push_back("x");

  WorkBudget count_budget(kBudgetPerKind, 40, cost.Count(31));
  WorkBudget search_budget(kBudgetPerKind, 40, cost.Locate(4));
  for (const std::string& pattern : patterns) {
    // Tiny texts check everything; the whole-text patterns were admitted above.
    const bool forced = n <= 40 || pattern.size() >= n;
    if (!forced && !count_budget.Take(cost.Count(static_cast<double>(pattern.size())))) continue;
    const std::vector<uint64_t> want = ref.Occurrences(pattern);
    if (ref.has_suffix_array()) {
      ASSERT_EQ(ref.SuffixArrayOccurrences(pattern), want)
          << "reference self-check: suffix array and find disagree on " << Printable(pattern);
    }
    ASSERT_TRUE(CountMatches(file, pattern, want));
    if (want.empty() || search_budget.Take(cost.Locate(static_cast<double>(want.size())))) {
      ASSERT_TRUE(SearchMatches(file, pattern, want));
    }
  }
}

void CheckAgainstReference(const CompressedFile& file, const ReferenceIndex& ref,
                           const CompressedFileOptions& options, uint64_t seed) {
  EXPECT_NO_FATAL_FAILURE(CheckBoundaries(file, ref));
  EXPECT_NO_FATAL_FAILURE(CheckExtract(file, ref, options, seed));
  EXPECT_NO_FATAL_FAILURE(CheckCharAt(file, ref, options, seed));
  EXPECT_NO_FATAL_FAILURE(CheckCountAndSearch(file, ref, options, seed));
}

// ------------------------------------------------------------------------------------------------
// The corpus every configuration runs on.

struct CorpusText {
  std::string name;
  uint64_t seed;
  ReferenceIndex ref;
};

const std::vector<CorpusText>& Corpus() {
  static const std::vector<CorpusText>* const kCorpus = [] {
    auto* corpus = new std::vector<CorpusText>;
    auto add = [corpus](std::string name, uint64_t seed, std::string text) {
      corpus->push_back(CorpusText{std::move(name), seed, ReferenceIndex(std::move(text), true)});
    };
    add("empty", 0, "");
    add("byte_0", 0, std::string(1, '\0'));
    add("byte_255", 0, std::string(1, '\xff'));
    add("byte_a", 0, "a");
    add("bytes_0_255", 0, std::string("\0\xff", 2));
    add("bytes_255_0", 0, std::string("\xff\0", 2));
    for (uint64_t len : {31, 32, 33, 63, 64, 65, 127, 128, 129}) {
      Rng rng(1000 + len);
      add("random_bytes_" + std::to_string(len), 1000 + len, RandomBytes(rng, len));
      Rng rng2(2000 + len);
      add("binary_" + std::to_string(len), 2000 + len, RandomOver(rng2, "ab", len));
    }
    add("all_a_64", 3, std::string(64, 'a'));
    add("periodic_ab_65", 4, Periodic("ab", 65));
    {
      Rng rng(11);
      add("random_bytes_4000", 11, RandomBytes(rng, 4000));
    }
    {
      Rng rng(12);
      add("alphabet2_3000", 12, RandomOver(rng, "01", 3000));
    }
    {
      Rng rng(13);
      add("dna_5000", 13, RandomOver(rng, "ACGT", 5000));
    }
    {
      Rng rng(14);
      add("repeated_block_37_3000", 14, RepeatedBlock(rng, 37, 3000));
    }
    {
      Rng rng(15);
      add("repeated_block_500_6000", 15, RepeatedBlock(rng, 500, 6000));
    }
    add("periodic_ab_3000", 16, Periodic("ab", 3000));
    add("periodic_aab_2501", 17, Periodic("aab", 2501));
    add("all_a_2000", 18, std::string(2000, 'a'));
    add("all_0_700", 19, std::string(700, '\0'));
    add("all_255_300", 20, std::string(300, '\xff'));
    {
      Rng rng(21);
      add("text_like_5000", 21, TextLike(rng, 5000));
    }
    {
      Rng rng(22);
      add("bytes_0_255_x_2000", 22, RandomOver(rng, std::string_view("\0\xffx", 3), 2000));
    }
    return corpus;
  }();
  return *kCorpus;
}

// ------------------------------------------------------------------------------------------------
// Every sampling configuration, with 32- and 64-bit suffix array construction.

struct SamplingConfig {
  uint32_t sa_sampling_rate;
  uint32_t isa_sampling_rate;
  uint32_t psi_block_size;
  bool force_64bit_construction;

  CompressedFileOptions Options() const {
    CompressedFileOptions o;
    o.sa_sampling_rate = sa_sampling_rate;
    o.isa_sampling_rate = isa_sampling_rate;
    o.psi_block_size = psi_block_size;
    o.force_64bit_construction = force_64bit_construction;
    return o;
  }
};

void PrintTo(const SamplingConfig& c, std::ostream* os) { *os << Describe(c.Options()); }

std::string ConfigName(const ::testing::TestParamInfo<SamplingConfig>& info) {
  const SamplingConfig& c = info.param;
  return "sa" + std::to_string(c.sa_sampling_rate) + "_isa" + std::to_string(c.isa_sampling_rate) +
         "_psi" + std::to_string(c.psi_block_size) +
         (c.force_64bit_construction ? "_index64" : "_index32");
}

std::vector<SamplingConfig> AllConfigs() {
  const uint32_t kRates[][3] = {{32, 32, 64},   {1, 1, 2},          {2, 4, 8},   {8, 16, 32},
                                {64, 128, 128}, {1024, 1024, 1024}, {4, 2, 1024}};
  std::vector<SamplingConfig> configs;
  for (const auto& r : kRates) {
    for (bool force64 : {false, true}) configs.push_back({r[0], r[1], r[2], force64});
  }
  return configs;
}

class CompressedFileConfigTest : public ::testing::TestWithParam<SamplingConfig> {};

INSTANTIATE_TEST_SUITE_P(Sampling, CompressedFileConfigTest, ::testing::ValuesIn(AllConfigs()),
                         ConfigName);

TEST_P(CompressedFileConfigTest, MatchesReferenceOnCorpus) {
  const CompressedFileOptions options = GetParam().Options();
  for (const CorpusText& c : Corpus()) {
    SCOPED_TRACE("text=" + c.name + " n=" + std::to_string(c.ref.size()) +
                 " seed=" + std::to_string(c.seed) + " " + Describe(options));
    std::string bytes;
    std::unique_ptr<CompressedFile> file;
    ASSERT_TRUE(BuildInMemory(c.ref.text(), options, &bytes, &file));
    EXPECT_EQ(file->options().sa_sampling_rate, options.sa_sampling_rate);
    EXPECT_EQ(file->options().isa_sampling_rate, options.isa_sampling_rate);
    EXPECT_EQ(file->options().psi_block_size, options.psi_block_size);
    EXPECT_FALSE(file->options().force_64bit_construction) << "documented as not recorded";
    EXPECT_NO_FATAL_FAILURE(CheckSizeAccounting(*file, bytes.size()));
    if (options.force_64bit_construction) {
      // The file is documented to be the same either way, and answers depend only on its bytes:
      // when they match the 32-bit build, a light check suffices (BuildIsDeterministic... reports
      // any difference; then the full check runs here too).
      CompressedFileOptions narrow = options;
      narrow.force_64bit_construction = false;
      StatusOr<std::string> narrow_bytes = CompressedFile::BuildToBuffer(c.ref.text(), narrow);
      if (narrow_bytes.ok() && *narrow_bytes == bytes) {
        EXPECT_NO_FATAL_FAILURE(CheckBoundaries(*file, c.ref));
        continue;
      }
    }
    CheckAgainstReference(*file, c.ref, options, c.seed);
  }
}

TEST_P(CompressedFileConfigTest, BuildIsDeterministicAndIndependentOfIndexWidth) {
  const CompressedFileOptions options = GetParam().Options();
  CompressedFileOptions other_width = options;
  other_width.force_64bit_construction = !options.force_64bit_construction;
  for (const CorpusText& c : Corpus()) {
    SCOPED_TRACE("text=" + c.name + " " + Describe(options));
    StatusOr<std::string> first = CompressedFile::BuildToBuffer(c.ref.text(), options);
    StatusOr<std::string> second = CompressedFile::BuildToBuffer(c.ref.text(), options);
    StatusOr<std::string> other = CompressedFile::BuildToBuffer(c.ref.text(), other_width);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_TRUE(SameBytes(*second, *first)) << "two builds of the same text differ";
    EXPECT_TRUE(SameBytes(*other, *first)) << "32- and 64-bit construction differ";
  }
}

TEST_P(CompressedFileConfigTest, FileRoundTrip) {
  const CompressedFileOptions options = GetParam().Options();
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("text.zcf");
  Rng rng(31);
  std::string text = TextLike(rng, 3000);
  text += RandomBytes(rng, 1000);  // a separate statement: `a + b` has no evaluation order
  const ReferenceIndex ref(std::move(text), true);
  SCOPED_TRACE("seed=31 " + Describe(options));
  std::unique_ptr<CompressedFile> file;
  ASSERT_TRUE(BuildOnDisk(ref.text(), options, path, &file));
  StatusOr<std::string> buffer = CompressedFile::BuildToBuffer(ref.text(), options);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  EXPECT_TRUE(SameBytes(ReadBytes(path), *buffer))
      << "Build and BuildToBuffer write different bytes";
  EXPECT_NO_FATAL_FAILURE(CheckSizeAccounting(*file, std::filesystem::file_size(path)));
  EXPECT_TRUE(file->Verify().ok()) << file->Verify().ToString();
  CheckAgainstReference(*file, ref, options, 31);
}

// ------------------------------------------------------------------------------------------------
// Options.

TEST(CompressedFileOptionsTest, ValidateAcceptsDefaultsAndLimits) {
  EXPECT_TRUE(CompressedFileOptions().Validate().ok())
      << CompressedFileOptions().Validate().ToString();
  for (const SamplingConfig& c : AllConfigs()) {
    Status s = c.Options().Validate();
    EXPECT_TRUE(s.ok()) << Describe(c.Options()) << ": " << s.ToString();
  }
  for (uint32_t v = 1; v <= 1024; v *= 2) {
    CompressedFileOptions o;
    o.sa_sampling_rate = v;
    o.isa_sampling_rate = v;
    if (v >= 2) o.psi_block_size = v;
    EXPECT_TRUE(o.Validate().ok()) << Describe(o) << ": " << o.Validate().ToString();
  }
}

// Options with exactly one field set to a bad value.
std::vector<std::pair<std::string, CompressedFileOptions>> InvalidOptions() {
  std::vector<std::pair<std::string, CompressedFileOptions>> out;
  for (uint32_t bad :
       {0u, 3u, 6u, 33u, 100u, 1000u, 1023u, 1025u, 2048u, 4096u, 1u << 31, 0xFFFFFFFFu}) {
    CompressedFileOptions o;
    o.sa_sampling_rate = bad;
    out.emplace_back("sa_sampling_rate", o);
    o = CompressedFileOptions();
    o.isa_sampling_rate = bad;
    out.emplace_back("isa_sampling_rate", o);
    o = CompressedFileOptions();
    o.psi_block_size = bad;
    out.emplace_back("psi_block_size", o);
  }
  CompressedFileOptions o;
  o.psi_block_size = 1;  // a power of two, but below the documented minimum of 2
  out.emplace_back("psi_block_size", o);
  return out;
}

TEST(CompressedFileOptionsTest, ValidateRejectsBadValuesNamingTheField) {
  for (const auto& [field, o] : InvalidOptions()) {
    Status s = o.Validate();
    EXPECT_TRUE(IsError(s, StatusCode::kInvalidArgument)) << Describe(o);
    EXPECT_NE(s.message().find(field), std::string::npos)
        << Describe(o) << ": message does not name " << field << ": " << s.ToString();
  }
}

TEST(CompressedFileOptionsTest, BuildRejectsInvalidOptions) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("invalid.zcf");
  for (const auto& [field, o] : InvalidOptions()) {
    SCOPED_TRACE(Describe(o));
    EXPECT_TRUE(IsError(CompressedFile::BuildToBuffer("some text", o).status(),
                        StatusCode::kInvalidArgument));
    EXPECT_TRUE(IsError(CompressedFile::Build("some text", o, path), StatusCode::kInvalidArgument));
    EXPECT_TRUE(dir.Entries().empty()) << "a failed Build left " << dir.Entries().front();
  }
}

// ------------------------------------------------------------------------------------------------
// Specific semantics.

TEST(CompressedFileTest, OverlappingOccurrences) {
  const std::pair<std::string, std::string> kCases[] = {
      {"aaaa", "aa"},
      {"abababa", "aba"},
      {"aaaaaaaa", "aaaa"},
      {std::string(5, '\0'), std::string(2, '\0')}};
  const std::vector<uint64_t> kWant[] = {{0, 1, 2}, {0, 2, 4}, {0, 1, 2, 3, 4}, {0, 1, 2, 3}};
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const auto& [text, pattern] = kCases[i];
    SCOPED_TRACE("text=" + Printable(text) + " pattern=" + Printable(pattern));
    ASSERT_EQ(FindAll(text, pattern), kWant[i]) << "reference";
    std::string bytes;
    std::unique_ptr<CompressedFile> file;
    ASSERT_TRUE(BuildInMemory(text, CompressedFileOptions(), &bytes, &file));
    EXPECT_TRUE(CountMatches(*file, pattern, kWant[i]));
    EXPECT_TRUE(SearchMatches(*file, pattern, kWant[i]));
  }
}

TEST(CompressedFileTest, EmptyAndOneByteTexts) {
  for (const std::string& text :
       {std::string(), std::string(1, '\0'), std::string(1, '\xff'), std::string("z")}) {
    SCOPED_TRACE("text=" + Printable(text));
    std::string bytes;
    std::unique_ptr<CompressedFile> file;
    ASSERT_TRUE(BuildInMemory(text, CompressedFileOptions(), &bytes, &file));
    EXPECT_EQ(file->size(), text.size());
    EXPECT_TRUE(ExtractMatches(*file, text, 0, 0));
    EXPECT_TRUE(ExtractMatches(*file, text, 0, 10));
    EXPECT_TRUE(ExtractMatches(*file, text, text.size(), 1));
    EXPECT_TRUE(ExtractMatches(*file, text, text.size() + 1, 0));
    std::string all;
    EXPECT_TRUE(file->ExtractAll(&all).ok());
    EXPECT_EQ(all, text);
    EXPECT_TRUE(CharAtMatches(*file, text, 0));
    EXPECT_TRUE(CharAtMatches(*file, text, 1));
    for (const std::string& pattern : {std::string(1, '\0'), std::string(1, '\xff'),
                                       std::string("z"), std::string(2, '\0'), text + text}) {
      if (pattern.empty()) continue;
      EXPECT_TRUE(CountMatches(*file, pattern, FindAll(text, pattern)));
      EXPECT_TRUE(SearchMatches(*file, pattern, FindAll(text, pattern)));
    }
    EXPECT_TRUE(IsError(file->Count("").status(), StatusCode::kInvalidArgument));
    EXPECT_TRUE(IsError(file->Search("").status(), StatusCode::kInvalidArgument));
    EXPECT_TRUE(file->Verify().ok()) << file->Verify().ToString();
  }
}

TEST(CompressedFileTest, LargeTexts) {
  struct Large {
    std::string name;
    uint64_t seed;
    std::string (*make)(Rng&);
  };
  const Large kLarge[] = {
      {"text_like_200k", 41, [](Rng& r) { return TextLike(r, 200000); }},
      {"random_bytes_200k", 42, [](Rng& r) { return RandomBytes(r, 200000); }},
      {"repeated_block_1000_120k", 43, [](Rng& r) { return RepeatedBlock(r, 1000, 120000); }},
  };
  const CompressedFileOptions options;
  for (const Large& l : kLarge) {
    SCOPED_TRACE("text=" + l.name + " seed=" + std::to_string(l.seed));
    Rng rng(l.seed);
    const ReferenceIndex ref(l.make(rng), false);
    std::string bytes;
    std::unique_ptr<CompressedFile> file;
    ASSERT_TRUE(BuildInMemory(ref.text(), options, &bytes, &file));
    EXPECT_NO_FATAL_FAILURE(CheckSizeAccounting(*file, bytes.size()));
    CheckAgainstReference(*file, ref, options, l.seed);
  }
}

TEST(CompressedFileTest, LargeBuildIsDeterministicAndIndependentOfIndexWidth) {
  Rng rng(51);
  std::string text = TextLike(rng, 150000);
  text += RandomOver(rng, "ACGT", 50000);
  CompressedFileOptions options;
  StatusOr<std::string> first = CompressedFile::BuildToBuffer(text, options);
  StatusOr<std::string> second = CompressedFile::BuildToBuffer(text, options);
  options.force_64bit_construction = true;
  StatusOr<std::string> wide = CompressedFile::BuildToBuffer(text, options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_TRUE(SameBytes(*second, *first)) << "two builds differ";
  EXPECT_TRUE(SameBytes(*wide, *first)) << "32- and 64-bit construction differ";
}

TEST(CompressedFileTest, LargerSamplingGivesSmallerFiles) {
  Rng rng(52);
  const std::string text = RandomOver(rng, "ACGT", 20000);
  auto size_with = [&text](uint32_t sa, uint32_t isa, uint32_t psi) -> uint64_t {
    CompressedFileOptions o;
    o.sa_sampling_rate = sa;
    o.isa_sampling_rate = isa;
    o.psi_block_size = psi;
    StatusOr<std::string> b = CompressedFile::BuildToBuffer(text, o);
    EXPECT_TRUE(b.ok()) << Describe(o) << ": " << b.status().ToString();
    return b.ok() ? b->size() : 0;
  };
  EXPECT_GT(size_with(1, 32, 64), size_with(32, 32, 64));
  EXPECT_GT(size_with(32, 32, 64), size_with(1024, 32, 64));
  EXPECT_GT(size_with(32, 1, 64), size_with(32, 32, 64));
  EXPECT_GT(size_with(32, 32, 64), size_with(32, 1024, 64));
  EXPECT_GT(size_with(32, 32, 2), size_with(32, 32, 64));
  EXPECT_GT(size_with(32, 32, 64), size_with(32, 32, 1024));
}

// ------------------------------------------------------------------------------------------------
// Corruption. The base file is a few KB: text with some bytes over the whole range.

std::string CorruptionText() {
  Rng rng(61);
  std::string text = TextLike(rng, 2500);
  text += RandomBytes(rng, 500);
  return text;
}

// Runs queries whose answers may be wrong on a damaged file; only a crash or sanitizer report
// fails.
void ExerciseQueries(const CompressedFile& file, std::string_view text, Rng& rng) {
  const uint64_t n = text.size();
  (void)file.size();
  (void)file.SizeInBytes();
  (void)file.Breakdown();
  (void)file.Extract(0, n);
  for (int i = 0; i < 4; ++i) {
    const uint64_t offset = rng.Below(n + 1);
    (void)file.Extract(offset, rng.Below(64));
  }
  for (int i = 0; i < 4; ++i) (void)file.CharAt(rng.Below(n + 1));
  for (int i = 0; i < 4; ++i) {
    std::string pattern = RandomSubstring(text, rng, 12);
    (void)file.Count(pattern);
    (void)file.Search(pattern);
  }
  (void)file.Search(text.substr(0, 5));
  (void)file.Search(text.substr(n - 5));
  (void)file.Count(text);
}

TEST(CompressedFileCorruptionTest, TruncatedBufferIsCorruption) {
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  for (size_t len = 0; len < bytes->size(); ++len) {
    for (bool verify : {true, false}) {
      auto opened = CompressedFile::OpenBuffer(bytes->substr(0, len), OpenOptions{verify});
      ASSERT_FALSE(opened.ok()) << "opened " << len << " of " << bytes->size()
                                << " bytes, verify_checksums=" << verify;
      ASSERT_TRUE(IsError(opened.status(), StatusCode::kCorruption))
          << "truncated to " << len << " of " << bytes->size() << " bytes, verify=" << verify;
    }
  }
}

TEST(CompressedFileCorruptionTest, TruncatedFileIsCorruption) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const std::string path = dir.File("truncated.zcf");
  std::vector<size_t> lengths;
  for (size_t i = 0; i < 200; ++i) lengths.push_back(i * bytes->size() / 200);
  for (size_t len = 1; len <= 16; ++len) lengths.push_back(bytes->size() - len);
  for (size_t len : lengths) {
    ASSERT_TRUE(WriteBytes(path, std::string_view(*bytes).substr(0, len)));
    for (bool verify : {true, false}) {
      auto opened = CompressedFile::Open(path, OpenOptions{verify});
      ASSERT_FALSE(opened.ok()) << "opened " << len << " of " << bytes->size() << " bytes";
      ASSERT_TRUE(IsError(opened.status(), StatusCode::kCorruption))
          << "truncated to " << len << " of " << bytes->size() << " bytes, verify=" << verify;
      ASSERT_NE(opened.status().message().find("truncated.zcf"), std::string::npos)
          << "documented: errors name the file; got " << opened.status().ToString();
    }
  }
}

TEST(CompressedFileCorruptionTest, EveryBitFlipInBufferIsDetected) {
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  std::vector<std::pair<size_t, int>> flips;
  for (size_t pos = 0; pos < bytes->size(); ++pos) flips.emplace_back(pos, (pos * 5) % 8);
  for (size_t pos = 0; pos < std::min<size_t>(256, bytes->size()); ++pos) {
    for (int bit = 0; bit < 8; ++bit) flips.emplace_back(pos, bit);
  }
  for (auto [pos, bit] : flips) {
    auto opened = CompressedFile::OpenBuffer(FlipBit(*bytes, pos, bit));
    ASSERT_FALSE(opened.ok()) << "bit " << bit << " of byte " << pos << " flipped, yet it opened";
    ASSERT_TRUE(IsError(opened.status(), StatusCode::kCorruption))
        << "bit " << bit << " of byte " << pos << " of " << bytes->size();
  }
}

TEST(CompressedFileCorruptionTest, BitFlipsInFileAreDetected) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const size_t size = bytes->size();
  std::vector<std::pair<size_t, int>> flips;
  for (size_t i = 0; i < 300; ++i) flips.emplace_back(i * size / 300, static_cast<int>(i % 8));
  for (size_t pos = 0; pos < std::min<size_t>(256, size); ++pos) flips.emplace_back(pos, pos % 8);
  flips.emplace_back(size - 1, 7);
  const std::string path = dir.File("flipped.zcf");
  for (auto [pos, bit] : flips) {
    ASSERT_TRUE(WriteBytes(path, FlipBit(*bytes, pos, bit)));
    auto opened = CompressedFile::Open(path);
    ASSERT_FALSE(opened.ok()) << "bit " << bit << " of byte " << pos << " flipped, yet it opened";
    ASSERT_TRUE(IsError(opened.status(), StatusCode::kCorruption))
        << "bit " << bit << " of byte " << pos << " of " << size;
    ASSERT_NE(opened.status().message().find("flipped.zcf"), std::string::npos)
        << "documented: errors name the file; got " << opened.status().ToString();
  }
}

TEST(CompressedFileCorruptionTest, ChangedMagicIsCorruptionEvenWithoutVerification) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_GE(bytes->size(), 8u);
  const std::string path = dir.File("magic.zcf");
  for (size_t pos = 0; pos < 8; ++pos) {
    for (uint8_t delta : {0x01, 0x80, 0xFF}) {
      std::string damaged = *bytes;
      damaged[pos] = static_cast<char>(static_cast<uint8_t>(damaged[pos]) ^ delta);
      ASSERT_TRUE(WriteBytes(path, damaged));
      for (bool verify : {true, false}) {
        SCOPED_TRACE("byte " + std::to_string(pos) + " ^ " + std::to_string(delta) +
                     " verify=" + std::to_string(verify));
        auto from_buffer = CompressedFile::OpenBuffer(damaged, OpenOptions{verify});
        ASSERT_FALSE(from_buffer.ok());
        EXPECT_TRUE(IsError(from_buffer.status(), StatusCode::kCorruption));
        auto from_file = CompressedFile::Open(path, OpenOptions{verify});
        ASSERT_FALSE(from_file.ok());
        EXPECT_TRUE(IsError(from_file.status(), StatusCode::kCorruption));
      }
    }
  }
}

// The one white-box test: the version field's place and the header checksum rule come from
// layout/format.h (docs/compressed-file.md), so that the header checksum can be recomputed and the
// version check itself is exercised, not the checksum.
TEST(CompressedFileCorruptionTest, UnknownVersionIsCorruptionEvenWithoutVerification) {
  namespace format = zipg::layout::format;
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const size_t covered = format::kHeaderSize + format::kNumSections * format::kSectionEntrySize;
  ASSERT_GE(bytes->size(), covered);
  ASSERT_EQ(zipg::DecodeFixed32(bytes->data() + format::kOffVersion), format::kVersion);
  auto with_version = [&](uint32_t version) {
    std::string damaged = *bytes;
    zipg::EncodeFixed32(damaged.data() + format::kOffVersion, version);
    std::string covered_bytes = damaged.substr(0, covered);
    std::memset(covered_bytes.data() + format::kOffHeaderChecksum, 0, 8);
    const uint64_t checksum = zipg::Checksum64(covered_bytes.data(), covered_bytes.size());
    std::memcpy(damaged.data() + format::kOffHeaderChecksum, &checksum, 8);
    return damaged;
  };
  // Control: the recomputed checksum is right, so the failures below come from the version.
  ASSERT_TRUE(SameBytes(with_version(format::kVersion), *bytes)) << "header checksum rule changed";

  const std::string path = dir.File("version.zcf");
  for (uint32_t version : {0u, format::kVersion + 1, 0xFFFFFFFFu}) {
    const std::string damaged = with_version(version);
    ASSERT_TRUE(WriteBytes(path, damaged));
    for (bool verify : {true, false}) {
      SCOPED_TRACE("version=" + std::to_string(version) + " verify=" + std::to_string(verify));
      auto from_buffer = CompressedFile::OpenBuffer(damaged, OpenOptions{verify});
      ASSERT_FALSE(from_buffer.ok());
      EXPECT_TRUE(IsError(from_buffer.status(), StatusCode::kCorruption));
      EXPECT_NE(from_buffer.status().message().find("version"), std::string::npos)
          << "the error should say what is wrong: " << from_buffer.status().ToString();
      auto from_file = CompressedFile::Open(path, OpenOptions{verify});
      ASSERT_FALSE(from_file.ok());
      EXPECT_TRUE(IsError(from_file.status(), StatusCode::kCorruption));
    }
  }
}

// Without checksum verification a damaged data section may open; queries must then not crash and
// Verify() must find the damage.
TEST(CompressedFileCorruptionTest, UnverifiedOpenOfDamagedBufferNeverCrashes) {
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const size_t size = bytes->size();
  Rng rng(62);
  int opened_count = 0;
  for (size_t i = 0; i < 300; ++i) {
    const size_t pos = i * size / 300;
    const int bit = static_cast<int>((i * 3) % 8);
    SCOPED_TRACE("bit " + std::to_string(bit) + " of byte " + std::to_string(pos) + " of " +
                 std::to_string(size));
    auto opened = CompressedFile::OpenBuffer(FlipBit(*bytes, pos, bit), OpenOptions{false});
    if (!opened.ok()) {
      EXPECT_TRUE(IsError(opened.status(), StatusCode::kCorruption));
      continue;
    }
    ++opened_count;
    ExerciseQueries(**opened, text, rng);
    EXPECT_TRUE(IsError((*opened)->Verify(), StatusCode::kCorruption));
  }
  EXPECT_GT(opened_count, 0) << "no damaged data section opened with verify_checksums=false; the "
                                "test exercised nothing";
}

TEST(CompressedFileCorruptionTest, UnverifiedOpenOfDamagedFileNeverCrashes) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string text = CorruptionText();
  StatusOr<std::string> bytes = CompressedFile::BuildToBuffer(text, CompressedFileOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const size_t size = bytes->size();
  const std::string path = dir.File("damaged.zcf");
  Rng rng(63);
  int opened_count = 0;
  for (size_t i = 0; i < 60; ++i) {
    const size_t pos = (2 * i + 1) * size / 120;
    const int bit = static_cast<int>((i * 5) % 8);
    SCOPED_TRACE("bit " + std::to_string(bit) + " of byte " + std::to_string(pos) + " of " +
                 std::to_string(size));
    ASSERT_TRUE(WriteBytes(path, FlipBit(*bytes, pos, bit)));
    auto opened = CompressedFile::Open(path, OpenOptions{false});
    if (!opened.ok()) {
      EXPECT_TRUE(IsError(opened.status(), StatusCode::kCorruption));
      continue;
    }
    ++opened_count;
    ExerciseQueries(**opened, text, rng);
    EXPECT_TRUE(IsError((*opened)->Verify(), StatusCode::kCorruption));
  }
  EXPECT_GT(opened_count, 0);
}

TEST(CompressedFileCorruptionTest, IntactFileVerifies) {
  const std::string text = CorruptionText();
  std::string bytes;
  std::unique_ptr<CompressedFile> file;
  ASSERT_TRUE(BuildInMemory(text, CompressedFileOptions(), &bytes, &file));
  EXPECT_TRUE(file->Verify().ok()) << file->Verify().ToString();
  auto unverified = CompressedFile::OpenBuffer(bytes, OpenOptions{false});
  ASSERT_TRUE(unverified.ok()) << unverified.status().ToString();
  EXPECT_TRUE((*unverified)->Verify().ok()) << (*unverified)->Verify().ToString();
  EXPECT_TRUE(ExtractMatches(**unverified, text, 0, text.size()));
}

TEST(CompressedFileCorruptionTest, OpenOfMissingPathOrDirectoryFails) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  auto missing = CompressedFile::Open(dir.File("does_not_exist.zcf"));
  ASSERT_FALSE(missing.ok());
  EXPECT_FALSE(missing.status().message().empty());
  auto missing_dir = CompressedFile::Open(dir.File("no_such_dir/x.zcf"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_FALSE(missing_dir.status().message().empty());
  auto directory = CompressedFile::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_FALSE(directory.status().message().empty());
  ASSERT_TRUE(WriteBytes(dir.File("empty.zcf"), ""));
  auto empty = CompressedFile::Open(dir.File("empty.zcf"));
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(IsError(empty.status(), StatusCode::kCorruption));
}

// ------------------------------------------------------------------------------------------------
// Atomic writes.

TEST(CompressedFileAtomicityTest, BuildIntoMissingDirectoryFailsAndLeavesNothing) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string missing = dir.File("no_such_dir");
  Status s = CompressedFile::Build("some text", CompressedFileOptions(), missing + "/f.zcf");
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.message().empty());
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_TRUE(dir.Entries().empty()) << "left " << dir.Entries().front();
}

TEST(CompressedFileAtomicityTest, BuildLeavesOnlyTheFile) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  Rng rng(71);
  const std::string text = TextLike(rng, 20000);
  ASSERT_TRUE(CompressedFile::Build(text, CompressedFileOptions(), dir.File("f.zcf")).ok());
  EXPECT_EQ(dir.Entries(), std::vector<std::string>{"f.zcf"});
  for (const std::string& name : dir.Entries()) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }
}

TEST(CompressedFileAtomicityTest, BuildReplacesAnExistingFile) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("f.zcf");
  Rng rng(72);
  const std::string old_text = TextLike(rng, 30000);
  const std::string new_text = RandomOver(rng, "xyz", 1500);

  // Junk much longer than the new file: nothing of it may remain.
  ASSERT_TRUE(WriteBytes(path, std::string(100000, '\x5a')));
  std::unique_ptr<CompressedFile> old_file;
  ASSERT_TRUE(BuildOnDisk(old_text, CompressedFileOptions(), path, &old_file));
  EXPECT_EQ(std::filesystem::file_size(path), old_file->SizeInBytes());

  // Replace it while the old file is still open: the rename leaves the old mapping intact.
  ASSERT_TRUE(CompressedFile::Build(new_text, CompressedFileOptions(), path).ok());
  StatusOr<std::string> want = CompressedFile::BuildToBuffer(new_text, CompressedFileOptions());
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_TRUE(SameBytes(ReadBytes(path), *want));
  EXPECT_EQ(dir.Entries(), std::vector<std::string>{"f.zcf"});

  auto reopened = CompressedFile::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_TRUE(ExtractMatches(**reopened, new_text, 0, new_text.size()));
  EXPECT_TRUE(ExtractMatches(*old_file, old_text, 0, old_text.size()))
      << "the file opened before the rebuild changed under it";
  EXPECT_TRUE(CountMatches(*old_file, "graph", FindAll(old_text, "graph")));
}

// ------------------------------------------------------------------------------------------------
// Concurrency.

TEST(CompressedFileConcurrencyTest, ConcurrentQueriesMatchReference) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  Rng rng(81);
  std::string text = TextLike(rng, 70000);
  text += RandomBytes(rng, 30000);
  std::unique_ptr<CompressedFile> file;
  ASSERT_TRUE(BuildOnDisk(text, CompressedFileOptions(), dir.File("shared.zcf"), &file));

  constexpr int kThreads = 4;
  std::vector<std::vector<std::string>> errors(kThreads);
  std::vector<int> checks(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Rng r(1000 + t);
      auto record = [&](::testing::AssertionResult result) {
        ++checks[t];
        if (!result && errors[t].size() < 5) errors[t].push_back(result.message());
      };
      for (int i = 0; i < 300; ++i) {
        const uint64_t offset = r.Below(text.size() + 1);
        switch (i % 3) {
          case 0:
            record(ExtractMatches(*file, text, offset, r.Below(200)));
            break;
          case 1:
            record(CharAtMatches(*file, text, offset));
            break;
          default: {
            std::string pattern = RandomSubstring(text, r, 20);
            if (i % 4 == 0) pattern.back() = static_cast<char>(pattern.back() ^ 0x20);
            const std::vector<uint64_t> want = FindAll(text, pattern);
            record(CountMatches(*file, pattern, want));
            record(SearchMatches(*file, pattern, want));
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_GT(checks[t], 300) << "thread " << t;
    for (const std::string& e : errors[t])
      ADD_FAILURE() << "thread " << t << " (seed " << 1000 + t << "): " << e;
  }
}

}  // namespace
