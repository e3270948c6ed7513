// zipg compress: CSV / SNAP input -> a compressed store directory, with a progress display and a
// size report.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "client/cli.h"
#include "graph/compress.h"
#include "util/memory.h"

namespace zipg::cli {
namespace {

const graph::CompressOptions kDefaults;

const std::string kUsage =
    "usage:\n"
    "  zipg compress --nodes F --edges F --out DIR [--shards N | --shards A,B,... --of N]\n"
    "                [--format csv|snap] [--force]\n"
    "                [--threads N] [--memory-limit SIZE] [--sa-rate N] [--isa-rate N]\n"
    "                [--psi-block N] [--node-format 1|2|3] [--node-block BYTES] [--node-level N]\n"
    "                [--edge-format 3|4] [--edge-block BYTES] [--edge-level N]\n"
    "                [--edge-sa-rate N] [--edge-isa-rate N] [--edge-psi-block N]\n"
    "                [--search-index all|none|NAME,NAME...] [--search-sample-rate N]\n"
    "      builds a store in DIR (nodes CSV `id,<prop>,...`; edges CSV\n"
    "      `src,dst,type,timestamp[,<prop>...]`, or with --format snap a `src dst` list and "
    "--nodes\n"
    "      optional). --shards A,B,... --of N builds only those shards of an N-shard store (each\n"
    "      machine of a cluster builds its own from the same input: docs/deploy.md).\n"
    "      --force replaces an existing store. Memory: builds are planned to stay\n"
    "      under --memory-limit (e.g. 8G; default 80% of the available memory, or of a cgroup\n"
    "      limit); --threads caps the builds at once. Defaults: one shard per core, more if a\n"
    "      shard would not fit; NodeFile --node-format " +
    std::to_string(kDefaults.node_file.format) +
    " (zstd blocks, a search index on the properties\n"
    "      --search-index names (default all; search_node_ids scans the others' values, slowly),\n"
    "      one byte in --search-sample-rate " +
    std::to_string(kDefaults.node_file.search_options.sample_rate) +
    " sampled, a value index for the rest; 2: no search index;\n"
    "      1: the suffix structure) --node-block " +
    std::to_string(kDefaults.node_file.blocks.block_bytes) + " --node-level " +
    std::to_string(kDefaults.node_file.blocks.level) + "; format 1 sampling --sa-rate " +
    std::to_string(kDefaults.node_file.suffix.sa_sampling_rate) + " --isa-rate " +
    std::to_string(kDefaults.node_file.suffix.isa_sampling_rate) + " --psi-block " +
    std::to_string(kDefaults.node_file.suffix.psi_block_size) + "; EdgeFile --edge-format " +
    std::to_string(kDefaults.edge_file.format) + " (zstd blocks; 3: the suffix structure)\n" +
    "      --edge-block " + std::to_string(kDefaults.edge_file.blocks.block_bytes) +
    " --edge-level " + std::to_string(kDefaults.edge_file.blocks.level) +
    "; format 3 sampling --edge-sa-rate " +
    std::to_string(kDefaults.edge_file.suffix.sa_sampling_rate) + " --edge-isa-rate " +
    std::to_string(kDefaults.edge_file.suffix.isa_sampling_rate) + " --edge-psi-block " +
    std::to_string(kDefaults.edge_file.suffix.psi_block_size) + ".\n";

std::string Megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

// Progress on stderr: one rewritten line on a terminal, plain log lines otherwise.
class ProgressDisplay {
 public:
  ProgressDisplay() : tty_(::isatty(STDERR_FILENO)), start_(Clock::now()) {}

  void Update(std::string_view phase, uint64_t done, uint64_t total) {
    const auto now = Clock::now();
    if (phase != phase_) {
      EndPhase(now);
      phase_ = phase;
      phase_start_ = now;
      if (!tty_) std::fprintf(stderr, "zipg compress: %s ...\n", phase_.c_str());
    }
    total_ = total;
    done_ = done;
    if (!tty_ || now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double seconds = Seconds(phase_start_, now);
    const double rate = seconds > 0 ? done / seconds : 0;
    char eta[32] = "--:--";
    if (rate > 0 && total >= done) {
      const uint64_t left = static_cast<uint64_t>((total - done) / rate);
      std::snprintf(eta, sizeof eta, "%llu:%02llu", static_cast<unsigned long long>(left / 60),
                    static_cast<unsigned long long>(left % 60));
    }
    std::fprintf(stderr, "\r\033[K%-10s %5.1f%%  %s / %s  %.1f MB/s  ETA %s  peak %s",
                 phase_.c_str(), total ? 100.0 * done / total : 100.0, Megabytes(done).c_str(),
                 Megabytes(total).c_str(), rate / 1e6, eta, FormatBytes(PeakRss()).c_str());
  }
  // A line that stays (the budget, the plan, ...), printed above the progress line.
  // Notes come between phases: the current one has ended.
  void Note(std::string_view line) {
    EndPhase(Clock::now());
    std::fprintf(stderr, "zipg compress: %.*s\n", static_cast<int>(line.size()), line.data());
  }
  // Ends the display; a failed run reports its last phase as failed, not done.
  void Finish(bool ok) {
    if (!ok && !phase_.empty()) {
      if (tty_) std::fprintf(stderr, "\r\033[K");
      std::fprintf(stderr, "zipg compress: %s failed\n", phase_.c_str());
      phase_.clear();
    }
    EndPhase(Clock::now());
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double Seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  void EndPhase(Clock::time_point now) {
    if (phase_.empty()) return;
    const double seconds = Seconds(phase_start_, now);
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "zipg compress: %s done: %s in %.1f s, peak memory %s\n", phase_.c_str(),
                 Megabytes(total_).c_str(), seconds, FormatBytes(PeakRss()).c_str());
    phase_.clear();
  }

  const bool tty_;
  const Clock::time_point start_;
  Clock::time_point phase_start_, last_draw_;
  std::string phase_;
  uint64_t done_ = 0, total_ = 0;
};

StatusOr<uint32_t> GetRate(const Args& args, const char* name, uint32_t fallback) {
  ZIPG_ASSIGN_OR_RETURN(uint64_t v, args.GetUint(name, fallback));
  if (v > UINT32_MAX) return Status::InvalidArgument(std::string("--") + name + " is too large");
  return static_cast<uint32_t>(v);
}

}  // namespace

int RunCompress(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"force"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  if (Status s = args->CheckKnown({"nodes",         "edges",
                                   "out",           "shards", "of",
                                   "format",        "force",
                                   "threads",       "memory-limit",
                                   "sa-rate",       "isa-rate",
                                   "psi-block",     "node-format",
                                   "node-block",    "node-level",
                                   "edge-format",   "edge-block",
                                   "edge-level",    "edge-sa-rate",
                                   "edge-isa-rate", "edge-psi-block",
                                   "search-index",  "search-sample-rate"});
      !s.ok()) {
    return UsageError(s.message(), kUsage);
  }
  if (!args->positional().empty()) return UsageError("compress takes only options", kUsage);
  graph::CompressInputs inputs;
  inputs.nodes_path = args->Get("nodes").value_or("");
  inputs.edges_path = args->Get("edges").value_or("");
  const std::string format = args->Get("format").value_or("csv");
  if (format == "snap") {
    inputs.format = graph::InputFormat::kSnap;
  } else if (format != "csv") {
    return UsageError("--format must be csv or snap", kUsage);
  }
  const auto out = args->Get("out");
  if (!out || inputs.edges_path.empty() ||
      (inputs.format == graph::InputFormat::kCsv && inputs.nodes_path.empty())) {
    return UsageError("compress needs --nodes (for csv), --edges and --out", kUsage);
  }
  graph::CompressOptions options;
  options.overwrite = args->Has("force");
  struct RateOption {
    const char* name;
    uint32_t* field;
  } rates[] = {{"threads", &options.threads},
               {"node-format", &options.node_file.format},
               {"node-block", &options.node_file.blocks.block_bytes},
               {"sa-rate", &options.node_file.suffix.sa_sampling_rate},
               {"isa-rate", &options.node_file.suffix.isa_sampling_rate},
               {"psi-block", &options.node_file.suffix.psi_block_size},
               {"edge-format", &options.edge_file.format},
               {"edge-block", &options.edge_file.blocks.block_bytes},
               {"edge-sa-rate", &options.edge_file.suffix.sa_sampling_rate},
               {"edge-isa-rate", &options.edge_file.suffix.isa_sampling_rate},
               {"edge-psi-block", &options.edge_file.suffix.psi_block_size},
               {"search-sample-rate", &options.node_file.search_options.sample_rate}};
  for (auto& rate : rates) {
    auto v = GetRate(*args, rate.name, *rate.field);
    if (!v.ok()) return UsageError(v.status().message(), kUsage);
    *rate.field = *v;
  }
  for (auto [name, level] : {std::pair("edge-level", &options.edge_file.blocks.level),
                             std::pair("node-level", &options.node_file.blocks.level)}) {
    auto v = GetRate(*args, name, static_cast<uint32_t>(*level));
    if (!v.ok()) return UsageError(v.status().message(), kUsage);
    *level = static_cast<int>(std::min<uint32_t>(*v, 1000));
  }
  if (options.edge_file.format < 3) {
    return UsageError("--edge-format must be 3 or 4 (1 and 2 are older forms of 3)", kUsage);
  }
  if (options.node_file.format < 1) return UsageError("--node-format must be 1, 2 or 3", kUsage);
  if (auto spec = args->Get("search-index")) {
    auto parsed = layout::SearchIndexSpec::Parse(*spec);
    if (!parsed.ok()) return UsageError(parsed.status().message(), kUsage);
    options.node_file.search = *parsed;
  }
  if (args->Has("of")) {
    // --shards A,B,... --of N: some shards of an N-shard store.
    auto n = GetRate(*args, "of", 0);
    if (!n.ok()) return UsageError(n.status().message(), kUsage);
    if (*n == 0) return UsageError("--of must be >= 1", kUsage);
    const auto list = args->Get("shards");
    if (!list || list->empty()) {
      return UsageError("--of N needs --shards A,B,...: the shards of the N to build", kUsage);
    }
    options.shards = *n;
    auto shards = ParseShardList(*list);
    if (!shards.ok()) {
      return UsageError(shards.status().message() + " (got '" + *list + "')", kUsage);
    }
    options.build_only = std::move(*shards);
    std::sort(options.build_only.begin(), options.build_only.end());
  } else if (args->Has("shards")) {
    auto n = GetRate(*args, "shards", 0);
    if (!n.ok()) return UsageError(n.status().message() + " (some shards: --shards A,B --of N)",
                                   kUsage);
    if (*n == 0) return UsageError("--shards must be >= 1", kUsage);
    options.shards = *n;
  }
  if (auto limit = args->Get("memory-limit")) {
    auto bytes = ParseByteSize(*limit);
    if (!bytes.ok()) return UsageError("--memory-limit: " + bytes.status().message(), kUsage);
    if (*bytes == 0) return UsageError("--memory-limit must be above 0", kUsage);
    options.memory_limit = *bytes;
  }
  if (Status s = options.Validate(); !s.ok()) return UsageError(s.message(), kUsage);

  ProgressDisplay display;
  options.on_note = [&display](std::string_view line) { display.Note(line); };
  const auto start = std::chrono::steady_clock::now();
  graph::CompressReport report;
  Status s = graph::CompressFiles(
      inputs, *out, options,
      [&](std::string_view phase, uint64_t done, uint64_t total) {
        display.Update(phase, done, total);
      },
      &report);
  display.Finish(s.ok());
  if (!s.ok()) return Fail(s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("store %s: %s, %llu nodes, %llu edges, built in %.1f s\n", out->c_str(),
              report.built.c_str(), static_cast<unsigned long long>(report.nodes),
              static_cast<unsigned long long>(report.edges), seconds);
  std::printf("memory      %u parallel builds, planned peak %s, peak RSS %s, budget %s\n",
              report.parallel_builds, FormatBytes(report.planned_peak).c_str(),
              FormatBytes(report.peak_rss).c_str(), FormatBytes(report.memory_budget).c_str());
  std::printf("raw input   %14llu bytes\n", static_cast<unsigned long long>(report.raw_bytes));
  std::printf("stored      %14llu bytes  ratio %.3f\n",
              static_cast<unsigned long long>(report.stored_bytes),
              report.raw_bytes ? static_cast<double>(report.stored_bytes) / report.raw_bytes : 0.0);
  for (const auto& [name, bytes] : report.breakdown) {
    std::printf("  %-24s %12llu bytes  %5.1f%%\n", name.c_str(),
                static_cast<unsigned long long>(bytes),
                report.stored_bytes ? 100.0 * bytes / report.stored_bytes : 0.0);
  }
  if (report.search_text_bytes > 0) {
    std::printf("search index %13llu bytes for %llu bytes of value text (%.3f bytes per byte)\n",
                static_cast<unsigned long long>(report.search_index_bytes),
                static_cast<unsigned long long>(report.search_text_bytes),
                static_cast<double>(report.search_index_bytes) / report.search_text_bytes);
  }
  // Each phase under its parent; a parent's time includes its children's.
  std::printf("cpu by phase (seconds, summed over threads)\n");
  for (const PhaseTime& phase : report.phases) {
    const size_t depth = std::count(phase.path.begin(), phase.path.end(), '/');
    const size_t slash = phase.path.rfind('/');
    const std::string name =
        std::string(2 * depth, ' ') + phase.path.substr(slash == std::string::npos ? 0 : slash + 1);
    std::printf("  %-30s %8.2f\n", name.c_str(), phase.cpu_seconds);
  }
  return kExitOk;
}

}  // namespace zipg::cli
