// Shared pieces of the libFuzzer targets (docs/testing.md, "Fuzz targets"): a scratch directory
// per process, the small fixed graph the store-backed targets serve, a checked failure that
// names the property it broke, and seed writing.
//
// Seeds: every target is built with a seed generator. Run with ZIPG_FUZZ_WRITE_SEEDS=DIR, a target
// writes its seeds, made from valid inputs by the real encoders, into DIR and exits
// (scripts/fuzz_corpus.sh regenerates fuzz/seeds/ that way).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/input.h"

namespace zipg::fuzz {

// Aborts (a libFuzzer crash, with the input kept) when a property does not hold.
inline void Check(bool ok, const char* property) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property failed: %s\n", property);
  std::abort();
}

// A fresh directory /tmp/zipg-<name>-fuzz-<pid>. It outlives the process (a crash's files stay
// for a look, and the target's servers may use it until the very end); the ones of processes
// that are gone are removed here, so a machine keeps at most the last run's.
inline std::string TempDir(const std::string& name) {
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string prefix = "zipg-" + name + "-fuzz-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tmp, ec)) {
    const std::string base = entry.path().filename().string();
    if (base.rfind(prefix, 0) != 0) continue;
    const std::string pid = base.substr(prefix.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    // kill(pid, 0) fails with ESRCH only for a pid no process has.
    if (kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
  const auto dir = tmp / (prefix + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

// In LLVMFuzzerInitialize: with ZIPG_FUZZ_WRITE_SEEDS=DIR set, writes the seeds `make` returns
// into DIR as seed-000, seed-001, ... and exits.
inline void MaybeWriteSeeds(const std::function<std::vector<std::string>()>& make) {
  const char* dir = std::getenv("ZIPG_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return;
  std::filesystem::create_directories(dir);
  const std::vector<std::string> seeds = make();
  for (size_t i = 0; i < seeds.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "/seed-%03zu", i);
    WriteFile(dir + std::string(name), seeds[i]);
  }
  std::fprintf(stderr, "wrote %zu seeds to %s\n", seeds.size(), dir);
  std::exit(0);
}

// A small graph with the shapes reads care about: cycles, self-loops, a hub of 300 edges, ids
// without node entries, three property names.
inline graph::InputGraph SmallGraph() {
  graph::InputGraph input;
  input.node_property_names = {"name", "city"};
  input.edge_property_names = {"w"};
  for (int64_t i = 0; i < 40; ++i) {
    if (i % 5 == 4) continue;  // ids without a node entry
    input.nodes.push_back({i, {{0, "n" + std::to_string(i)}, {1, i % 3 ? "red" : "blue"}}});
  }
  std::set<std::tuple<int64_t, int64_t, int64_t>> keys;
  for (int64_t i = 0; i < 200; ++i) {
    const int64_t src = (i * 7) % 43, dst = i % 9 == 0 ? src : (i * 13 + 5) % 47, type = i % 3;
    if (!keys.insert({src, type, dst}).second) continue;
    input.edges.push_back({src, dst, type, 1000 + i % 17, {{0, std::to_string(i)}}});
  }
  for (int64_t d = 100; d < 400; ++d) input.edges.push_back({0, d, 5, d, {}});  // a hub
  return input;
}

// Compresses SmallGraph() into `dir` as `shards` shards; aborts on failure.
inline void CompressSmallGraph(const std::string& dir, uint32_t shards) {
  graph::CompressOptions options;
  options.shards = shards;
  options.threads = 1;
  graph::CompressReport report;
  Check(graph::CompressGraph(SmallGraph(), dir, options, nullptr, &report).ok(),
        "the small graph compresses");
}

// SmallGraph() compressed into a new temporary directory named after `name` as 3 shards and
// opened embedded, with small traversal budgets so that no input runs long. Never freed.
inline Graph* OpenSmallGraph(const std::string& name) {
  const std::string dir = TempDir(name);
  CompressSmallGraph(dir, 3);
  auto g = Graph::Open(dir);
  Check(g.ok(), "the small store opens");
  graph::TraversalLimits limits;
  limits.deadline = std::chrono::milliseconds(200);
  limits.memory_bytes = 1 << 20;
  (*g)->set_traversal_limits(limits);
  return g->release();
}

}  // namespace zipg::fuzz
