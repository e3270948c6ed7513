// Benchmark of the compressed file against sdsl-lite's csa_sada<enc_vector<>, 32, 32> on the same
// input, in one run: build speed and peak memory, stored size, extract / count / search latency,
// and ratios. Results of both structures are cross-checked against each other and the plain text.
// The layout v2 store keeps record text in a BlockFile (zstd blocks, random access only): it is
// built from the same input and its size and extract latency printed beside (v1 = ours, the
// suffix structure; v2 = blocks).
//
//   file_bench [--bytes N] [--seed S] [--input FILE] [--sa-rate N] [--isa-rate N] [--psi-block N]
//              [--block N] [--level N] [--dict N] [--queries N] [--dir DIR] [--skip-sdsl]
//
// Builds run in forked children so that each peak RSS (which includes the input text) is its own.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sdsl/suffix_arrays.hpp>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "client/cli.h"
#include "datagen/random.h"
#include "layout/block_file.h"
#include "layout/compressed_file.h"
#include "util/file.h"

namespace {

using Clock = std::chrono::steady_clock;
using zipg::layout::CompressedFile;
using SdslCsa = sdsl::csa_sada<sdsl::enc_vector<>, 32, 32>;

using zipg::bench::ChildResult;
using zipg::bench::Latency;
using zipg::bench::Measure;
using zipg::bench::RunInChild;

void Die(const std::string& what) {
  std::fprintf(stderr, "file_bench: %s\n", what.c_str());
  std::exit(1);
}

void PrintRow(const char* name, const Latency& ours, const Latency* sdsl) {
  if (sdsl) {
    std::printf("%-22s %10.2f %10.2f %10.2f | %10.2f %10.2f | %7.2fx\n", name, ours.mean_us,
                ours.p50_us, ours.p99_us, sdsl->mean_us, sdsl->p50_us,
                sdsl->mean_us / ours.mean_us);
  } else {
    std::printf("%-22s %10.2f %10.2f %10.2f |\n", name, ours.mean_us, ours.p50_us, ours.p99_us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto args_or = zipg::cli::Args::Parse(argc, argv, 1, {"skip-sdsl"});
  if (!args_or.ok()) Die(args_or.status().ToString());
  const auto& args = *args_or;
  if (auto s = args.CheckKnown({"bytes", "seed", "input", "sa-rate", "isa-rate", "psi-block",
                                "block", "level", "dict", "queries", "dir", "skip-sdsl"});
      !s.ok()) {
    Die(s.ToString());
  }
  auto get = [&](const char* name, uint64_t def) {
    auto v = args.GetUint(name, def);
    if (!v.ok()) Die(v.status().ToString());
    return *v;
  };
  const uint64_t seed = get("seed", 1);
  const size_t queries = get("queries", 20000);
  zipg::layout::CompressedFileOptions options;
  options.sa_sampling_rate = static_cast<uint32_t>(get("sa-rate", options.sa_sampling_rate));
  options.isa_sampling_rate = static_cast<uint32_t>(get("isa-rate", options.isa_sampling_rate));
  options.psi_block_size = static_cast<uint32_t>(get("psi-block", options.psi_block_size));
  zipg::layout::BlockFileOptions block_options;
  block_options.block_bytes = static_cast<uint32_t>(get("block", block_options.block_bytes));
  block_options.level = static_cast<int>(get("level", static_cast<uint64_t>(block_options.level)));
  block_options.dictionary_bytes =
      static_cast<uint32_t>(get("dict", block_options.dictionary_bytes));
  const bool with_sdsl = !args.Has("skip-sdsl");
  std::string dir = args.Get("dir").value_or(std::filesystem::temp_directory_path().string());

  std::string text;
  std::string source;
  if (auto input = args.Get("input")) {
    auto t = zipg::ReadFileToString(*input);
    if (!t.ok()) Die(t.status().ToString());
    text = std::move(*t);
    source = *input;
  } else {
    uint64_t bytes = get("bytes", 100'000'000);
    text = zipg::datagen::GenerateText(bytes, seed);
    source = "zipg gen text --bytes " + std::to_string(bytes) + " --seed " + std::to_string(seed);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("input: %s (%zu bytes)\n", source.c_str(), text.size());
  std::printf("ours: sa_rate=%u isa_rate=%u psi_block=%u; sdsl: csa_sada<enc_vector<>, 32, 32>\n",
              options.sa_sampling_rate, options.isa_sampling_rate, options.psi_block_size);

  const std::string ours_path = dir + "/file_bench." + std::to_string(getpid()) + ".zcf";
  const std::string sdsl_path = dir + "/file_bench." + std::to_string(getpid()) + ".sdsl";
  const std::string blocks_path = dir + "/file_bench." + std::to_string(getpid()) + ".zbk";

  ChildResult ours_build = RunInChild([&] {
    auto s = CompressedFile::Build(text, options, ours_path);
    if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return s.ok();
  });
  if (!ours_build.ok) Die("build failed");
  auto open_start = Clock::now();
  auto ours_or =
      CompressedFile::Open(ours_path, zipg::layout::OpenOptions{.verify_checksums = false});
  double open_ms = std::chrono::duration<double, std::milli>(Clock::now() - open_start).count();
  if (!ours_or.ok()) Die(ours_or.status().ToString());
  auto& ours = **ours_or;
  auto verify_start = Clock::now();
  if (!ours.Verify().ok()) Die("verify failed");
  double verify_ms = std::chrono::duration<double, std::milli>(Clock::now() - verify_start).count();

  ChildResult blocks_build = RunInChild([&] {
    auto s = zipg::layout::BlockFile::Build(text, block_options, blocks_path);
    if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return s.ok();
  });
  if (!blocks_build.ok) Die("block file build failed");
  auto blocks_or = zipg::layout::BlockFile::Open(blocks_path);
  if (!blocks_or.ok()) Die(blocks_or.status().ToString());
  auto& blocks = **blocks_or;

  SdslCsa csa;
  ChildResult sdsl_build;
  uint64_t sdsl_bytes = 0;
  if (with_sdsl) {
    if (text.find('\0') != std::string::npos) Die("sdsl needs an input without zero bytes");
    sdsl_build = RunInChild([&] {
      SdslCsa c;
      sdsl::construct_im(c, text, 1);
      return sdsl::store_to_file(c, sdsl_path);
    });
    if (!sdsl_build.ok || !sdsl::load_from_file(csa, sdsl_path)) Die("sdsl build failed");
    sdsl_bytes = sdsl::size_in_bytes(csa);
  }

  std::printf("\n== build and size ==\n");
  std::printf("%-22s %12s %12s %12s %12s\n", "", "MB/s", "peak RSS MB", "stored bytes", "/ input");
  std::printf("%-22s %12.2f %12.0f %12llu %12.3f\n", "ours", mb / ours_build.seconds,
              ours_build.peak_mb, static_cast<unsigned long long>(ours.SizeInBytes()),
              static_cast<double>(ours.SizeInBytes()) / static_cast<double>(text.size()));
  std::printf("%-22s %12.2f %12.0f %12llu %12.3f\n", "v2 blocks", mb / blocks_build.seconds,
              blocks_build.peak_mb, static_cast<unsigned long long>(blocks.SizeInBytes()),
              static_cast<double>(blocks.SizeInBytes()) / static_cast<double>(text.size()));
  std::printf("v2 blocks: %u B blocks, zstd level %d, dictionary %u B; size v2 / ours: %.3f\n",
              blocks.options().block_bytes, blocks.options().level,
              blocks.options().dictionary_bytes,
              static_cast<double>(blocks.SizeInBytes()) / static_cast<double>(ours.SizeInBytes()));
  if (with_sdsl) {
    std::printf("%-22s %12.2f %12.0f %12llu %12.3f\n", "csa_sada", mb / sdsl_build.seconds,
                sdsl_build.peak_mb, static_cast<unsigned long long>(sdsl_bytes),
                static_cast<double>(sdsl_bytes) / static_cast<double>(text.size()));
    std::printf("size ours / csa_sada: %.3f\n",
                static_cast<double>(ours.SizeInBytes()) / static_cast<double>(sdsl_bytes));
  }
  std::printf("ours breakdown:");
  for (const auto& c : ours.Breakdown()) {
    std::printf(" %s=%.2f%%", c.name.c_str(), 100.0 * c.bytes / ours.SizeInBytes());
  }
  std::printf("\nours open (mmap, header checks): %.3f ms; full checksum verify: %.1f ms\n",
              open_ms, verify_ms);

  // Queries at fixed pseudo-random offsets; patterns taken from the text so they occur.
  zipg::datagen::Rng rng(seed * 7 + 3);
  auto offsets = [&](size_t count, uint64_t len) {
    std::vector<uint64_t> v(count);
    for (auto& o : v) o = rng.Uniform(text.size() - len);
    return v;
  };
  std::printf(
      "\n== latency (us) ==  ours: mean p50 p99 | csa_sada: mean p50 | csa_sada mean / ours "
      "mean\n");
  size_t mismatches = 0;
  for (uint64_t len : {64, 640}) {
    size_t n = len == 64 ? queries : queries / 4;
    auto offs = offsets(n, len);
    std::string out;
    Latency o = Measure(n, [&](size_t i) {
      out.clear();
      if (!ours.Extract(offs[i], len, &out).ok() || out != text.substr(offs[i], len)) ++mismatches;
    });
    Latency s;
    if (with_sdsl) {
      s = Measure(n, [&](size_t i) {
        std::string e = sdsl::extract(csa, offs[i], offs[i] + len - 1);
        if (e != text.substr(offs[i], len)) ++mismatches;
      });
    }
    std::string name = "extract " + std::to_string(len) + " B";
    PrintRow(name.c_str(), o, with_sdsl ? &s : nullptr);
    Latency b = Measure(n, [&](size_t i) {
      out.clear();
      if (!blocks.Extract(offs[i], len, &out).ok() || out != text.substr(offs[i], len)) {
        ++mismatches;
      }
    });
    std::printf("%-22s %10.2f %10.2f %10.2f | v2 / ours mean %.3f\n", (name + ", v2").c_str(),
                b.mean_us, b.p50_us, b.p99_us, b.mean_us / o.mean_us);
  }
  for (uint64_t len : {8, 20}) {
    size_t n = queries / 4;
    auto offs = offsets(n, len);
    std::vector<std::string> pats(n);
    for (size_t i = 0; i < n; ++i) pats[i] = text.substr(offs[i], len);
    uint64_t total_occ = 0;
    Latency o = Measure(n, [&](size_t i) { total_occ += *ours.Count(pats[i]); });
    Latency s;
    if (with_sdsl) {
      uint64_t sdsl_occ = 0;
      s = Measure(n,
                  [&](size_t i) { sdsl_occ += sdsl::count(csa, pats[i].begin(), pats[i].end()); });
      if (sdsl_occ != total_occ) ++mismatches;
    }
    std::string name = "count " + std::to_string(len) + " B";
    PrintRow(name.c_str(), o, with_sdsl ? &s : nullptr);
    // Search locates every occurrence; frequent 8-byte patterns can have thousands, so use fewer
    // queries.
    size_t ns = std::min<size_t>(n, len == 8 ? 500 : 2000);
    std::vector<std::vector<uint64_t>> ours_res(ns);
    Latency os = Measure(ns, [&](size_t i) { ours_res[i] = *ours.Search(pats[i]); });
    Latency ss;
    if (with_sdsl) {
      ss = Measure(ns, [&](size_t i) {
        auto occ = sdsl::locate(csa, pats[i].begin(), pats[i].end());
        std::vector<uint64_t> v(occ.begin(), occ.end());
        std::sort(v.begin(), v.end());
        if (v != ours_res[i]) ++mismatches;
      });
    }
    std::string sname = "search " + std::to_string(len) + " B";
    PrintRow(sname.c_str(), os, with_sdsl ? &ss : nullptr);
    std::printf("%-22s avg occurrences %.1f\n", "", static_cast<double>(total_occ) / n);
  }
  std::printf("\nresult mismatches: %zu\n", mismatches);
  std::filesystem::remove(ours_path);
  std::filesystem::remove(sdsl_path);
  std::filesystem::remove(blocks_path);
  return mismatches == 0 ? 0 : 1;
}
