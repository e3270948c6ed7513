// zipg gen text|graph: deterministic synthetic data for tests, examples and benchmarks.

#include <charconv>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "client/cli.h"
#include "datagen/random.h"
#include "datagen/tao.h"
#include "util/file.h"

namespace zipg::cli {
namespace {

// The defaults shown come from TaoGraphOptions, their one definition.
const std::string kUsage =
    "usage:\n"
    "  zipg gen text --bytes N --out FILE [--seed S]\n"
    "      N bytes of text-like data (Zipf-distributed pseudo-English words), deterministic in (N, "
    "S)\n"
    "  zipg gen graph --nodes N --out DIR [--seed S] [--degree D] [--properties P] [--hot-edges H]\n"
    "      a TAO-like property graph in DIR/nodes.csv and DIR/edges.csv (DIR is created if\n"
    "      missing), deterministic in the options: P properties per node (~16 value bytes each,\n"
    "      9 in 10 present), power-law out-degrees averaging D, " +
    std::to_string(datagen::TaoGraphOptions{}.edge_types) + " edge types, timestamps over " +
    std::to_string(datagen::TaoGraphOptions{}.days) + " days\n      and a ~" +
    std::to_string(datagen::TaoGraphOptions{}.edge_data_bytes) +
    "-byte edge property; defaults: --seed " + std::to_string(datagen::TaoGraphOptions{}.seed) +
    " --degree " + std::to_string(static_cast<int>(datagen::TaoGraphOptions{}.average_degree)) +
    " --properties " + std::to_string(datagen::TaoGraphOptions{}.properties) +
    "\n      --hot-edges H gives node 0 H more edges, of type " +
    std::to_string(datagen::TaoGraphOptions{}.edge_types) +
    ", to destinations 0..H-1 (a LinkBench-like hot node)\n";

int GenText(const Args& args) {
  if (Status s = args.CheckKnown({"bytes", "out", "seed"}); !s.ok()) {
    return UsageError(s.message(), kUsage);
  }
  auto bytes = args.GetUint("bytes", 0);
  auto seed = args.GetUint("seed", 1);
  auto out = args.Get("out");
  if (!bytes.ok()) return UsageError(bytes.status().message(), kUsage);
  if (!seed.ok()) return UsageError(seed.status().message(), kUsage);
  if (!args.Has("bytes") || !out || !args.positional().empty()) {
    return UsageError("gen text needs --bytes and --out", kUsage);
  }
  std::string text = datagen::GenerateText(*bytes, *seed);
  Status s = WriteFileAtomically(*out, [&](const FileSink& sink) { return sink(text); });
  return s.ok() ? kExitOk : Fail(s);
}

StatusOr<double> ParseDouble(const std::string& text, const std::string& what) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument(what + " must be a number, got '" + text + "'");
  }
  return v;
}

int GenGraph(const Args& args) {
  if (Status s = args.CheckKnown({"nodes", "out", "seed", "degree", "properties", "hot-edges"});
      !s.ok()) {
    return UsageError(s.message(), kUsage);
  }
  auto out = args.Get("out");
  if (!args.Has("nodes") || !out || !args.positional().empty()) {
    return UsageError("gen graph needs --nodes and --out", kUsage);
  }
  datagen::TaoGraphOptions options;
  auto nodes = args.GetUint("nodes", 0);
  auto seed = args.GetUint("seed", options.seed);
  auto properties = args.GetUint("properties", options.properties);
  auto hot_edges = args.GetUint("hot-edges", 0);
  for (const auto* v : {&nodes, &seed, &properties, &hot_edges}) {
    if (!v->ok()) return UsageError(v->status().message(), kUsage);
  }
  if (*properties < 1 || *properties > 1000) {
    return UsageError("--properties must be in 1..1000", kUsage);
  }
  options.nodes = *nodes;
  options.seed = *seed;
  options.properties = static_cast<uint32_t>(*properties);
  options.hot_edges = *hot_edges;
  // Keep ~16 value bytes per property, the default's 640 / 40.
  options.value_bytes =
      options.value_bytes / datagen::TaoGraphOptions{}.properties * options.properties;
  if (auto d = args.Get("degree")) {
    auto degree = ParseDouble(*d, "--degree");
    if (!degree.ok()) return UsageError(degree.status().message(), kUsage);
    options.average_degree = *degree;
  }
  if (Status s = options.Validate(); !s.ok()) return UsageError(s.message(), kUsage);

  std::error_code ec;
  std::filesystem::create_directories(*out, ec);
  if (ec) return Fail(Status::IOError("cannot create directory '" + *out + "': " + ec.message()));
  const std::string nodes_path = (std::filesystem::path(*out) / "nodes.csv").string();
  const std::string edges_path = (std::filesystem::path(*out) / "edges.csv").string();
  datagen::TaoGraphStats stats;
  if (Status s = datagen::WriteTaoGraph(options, nodes_path, edges_path, &stats); !s.ok()) {
    return Fail(s);
  }
  std::cout << "nodes " << stats.nodes << " (" << stats.node_file_bytes << " bytes) edges "
            << stats.edges << " (" << stats.edge_file_bytes << " bytes) max out-degree "
            << stats.max_out_degree << " in " << *out << "\n";
  return kExitOk;
}

}  // namespace

int RunGen(int argc, char** argv) {
  const std::string what = argc > 2 ? argv[2] : "";
  if (what != "text" && what != "graph") return UsageError("gen needs 'text' or 'graph'", kUsage);
  auto args = Args::Parse(argc, argv, 3);
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  return what == "text" ? GenText(*args) : GenGraph(*args);
}

}  // namespace zipg::cli
