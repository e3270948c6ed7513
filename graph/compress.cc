// The compress pipeline (graph/compress.h).

#include "graph/compress.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "layout/shard.h"
#include "graph/manifest.h"
#include "graph/memory_plan.h"
#include "graph/partition.h"
#include "graph/partitioner.h"
#include "graph/shard_build.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "layout/record_coding.h"
#include "util/memory.h"
#include "util/phase_times.h"

namespace zipg::graph {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kMaxShards = 4096;
constexpr char kLockName[] = "LOCK";

uint32_t HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

// A store directory can be replaced only if it is empty or holds a manifest.
Status CheckOutput(const std::string& out_dir, bool overwrite) {
  if (!fs::exists(out_dir)) return Status::OK();
  if (fs::is_directory(out_dir) && fs::is_empty(out_dir)) return Status::OK();
  if (!fs::exists(fs::path(out_dir) / kManifestName)) {
    return Status::AlreadyExists(out_dir + " exists and is not a zipg store; refusing to touch it");
  }
  if (!overwrite) {
    return Status::AlreadyExists(out_dir + " already holds a store (use --force to replace it)");
  }
  return Status::OK();
}

// The pid in "NAME.tmp-PID" / "NAME.old-PID" beside `out`, or 0 if `entry` is not one of those.
pid_t LeftoverPid(const fs::path& out, const std::string& entry) {
  const std::string name = out.filename().string();
  for (const char* kind : {".tmp-", ".old-"}) {
    const std::string prefix = name + kind;
    if (entry.size() <= prefix.size() || entry.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = entry.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) {
      return 0;
    }
    return static_cast<pid_t>(std::stol(digits));
  }
  return 0;
}

// Whether the compress that made `dir` is gone: its lock is free (the lock dies with its
// process), or, for a directory without one, no process has its pid.
bool Abandoned(const fs::path& dir, pid_t pid) {
  const std::string lock = (dir / kLockName).string();
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    return free;
  }
  return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

// Removes what killed runs of compress left beside `out`, and says so.
void RemoveLeftovers(const fs::path& out, const CompressOptions& options) {
  std::error_code ec;
  const fs::path parent = out.parent_path();
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    const pid_t pid = LeftoverPid(out, entry);
    if (pid <= 0 || !it->is_directory(ec) || !Abandoned(it->path(), pid)) continue;
    std::error_code removed;
    fs::remove_all(it->path(), removed);
    if (options.on_note) {
      options.on_note("removed " + it->path().string() + ", left behind by compress process " +
                      std::to_string(pid) + ", which is gone" +
                      (removed ? " (failed: " + removed.message() + ")" : ""));
    }
  }
}

// The temporary directory of this run, locked for as long as the object lives.
class WorkDir {
 public:
  static StatusOr<std::unique_ptr<WorkDir>> Create(const std::string& path) {
    std::error_code ec;
    fs::remove_all(path, ec);  // a leftover of an earlier process that had our pid
    fs::create_directories(path + "/spill", ec);
    if (ec) return Status::IOError(path + ": " + ec.message());
    const std::string lock = path + "/" + kLockName;
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (fd >= 0) ::close(fd);
      fs::remove_all(path, ec);
      return Status::IOError("cannot lock " + lock + ": " + std::strerror(errno));
    }
    return std::unique_ptr<WorkDir>(new WorkDir(path, fd));
  }
  ~WorkDir() {
    if (!kept_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
    ::close(fd_);
  }
  const std::string& path() const { return path_; }
  // The directory was renamed into place: do not remove it.
  void Keep() { kept_ = true; }

 private:
  WorkDir(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
  bool kept_ = false;
};

uint64_t Sum(const std::vector<ShardFootprint>& shards, uint64_t ShardFootprint::*field) {
  uint64_t total = 0;
  for (const auto& f : shards) total += f.*field;
  return total;
}

// The shard count to partition into before the input is read.
uint32_t FirstShardCount(const GraphSource& source, const CompressOptions& options,
                         uint64_t budget) {
  if (options.shards != 0) return options.shards;
  uint32_t shards = options.auto_shards != 0 ? options.auto_shards : HardwareThreads();
  if (source.node_bytes + source.edge_bytes == 0) return shards;
  while (shards < kMaxShards) {
    const std::vector<ShardFootprint> guess(
        shards, EstimateFootprint(source.node_bytes, source.edge_bytes, shards));
    if (PlanBuilds(guess, options.node_file, options.edge_file, budget, 1).ok()) break;
    shards = std::min(kMaxShards, ShardsToFit(guess, options.node_file, options.edge_file, budget));
  }
  return shards;
}

// The smallest shard count (above the current one) at which every shard of `partitioner`'s rows
// fits the budget alone, from the exact footprints of candidate counts (one pass over the spill
// files per round of candidates); kMaxShards + 1 if none does.
StatusOr<uint32_t> ShardsThatFit(const Partitioner& partitioner, const CompressOptions& options,
                                 uint64_t budget) {
  const uint32_t estimate =
      ShardsToFit(partitioner.footprints(), options.node_file, options.edge_file, budget);
  uint32_t lo = std::max(partitioner.shards() + 1, estimate * 4 / 5);
  while (lo <= kMaxShards) {
    // Up to 24 candidates spread over [lo, 1.5 * max(lo, estimate)].
    const uint32_t hi = std::min(kMaxShards, std::max(lo, estimate) * 3 / 2 + 1);
    std::vector<uint32_t> candidates;
    for (uint32_t c = lo; c <= hi; c += std::max<uint32_t>(1, (hi - lo) / 24)) {
      candidates.push_back(c);
    }
    ZIPG_ASSIGN_OR_RETURN(auto footprints, partitioner.FootprintsAt(candidates));
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (PlanBuilds(footprints[i], options.node_file, options.edge_file, budget, 1).ok()) {
        return candidates[i];
      }
    }
    lo = hi + 1;
  }
  return kMaxShards + 1;
}

}  // namespace

Status CompressOptions::Validate() const {
  if (Status s = node_file.Validate(); !s.ok()) {
    return Status::InvalidArgument("node file options: " + s.message());
  }
  if (Status s = edge_file.Validate(); !s.ok()) {
    return Status::InvalidArgument("edge file options: " + s.message());
  }
  if (shards > kMaxShards || auto_shards > kMaxShards) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxShards) + " shards");
  }
  if (!build_only.empty()) {
    if (shards == 0) return Status::InvalidArgument("building some shards needs the shard count");
    for (size_t i = 0; i < build_only.size(); ++i) {
      if (build_only[i] >= shards) {
        return Status::InvalidArgument("there is no shard " + std::to_string(build_only[i]) +
                                       " of " + std::to_string(shards) + " (shards are 0.." +
                                       std::to_string(shards - 1) + ")");
      }
      if (i > 0 && build_only[i] <= build_only[i - 1]) {
        return Status::InvalidArgument("the shards to build must ascend without repeats");
      }
    }
  }
  return Status::OK();
}

Status Compress(const GraphSource& source, const std::string& out_dir,
                const CompressOptions& options, const CompressProgress& progress,
                CompressReport* report) {
  TakePhaseTimes();  // this run's phases only
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(CheckOutput(out_dir, options.overwrite));
  auto note = [&](const std::string& line) {
    if (options.on_note) options.on_note(line);
  };
  fs::path out = fs::absolute(out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "DIR/" names DIR
  RemoveLeftovers(out, options);

  // The memory budget.
  uint64_t budget = options.memory_limit;
  if (budget != 0) {
    note("memory budget " + FormatBytes(budget) + " (--memory-limit)");
  } else {
    ZIPG_ASSIGN_OR_RETURN(AvailableMemory available, DetectAvailableMemory());
    budget = static_cast<uint64_t>(static_cast<double>(available.bytes) * kDefaultBudgetFraction);
    note("memory budget " + FormatBytes(budget) + " (" +
         std::to_string(static_cast<int>(kDefaultBudgetFraction * 100)) + "% of " +
         FormatBytes(available.bytes) + " available: " + available.source + ")");
  }

  if (budget <= kProcessBaseline) {
    return Status::ResourceExhausted("a memory budget of " + FormatBytes(budget) +
                                     " is not enough: compress needs " +
                                     FormatBytes(kProcessBaseline) + " before it builds anything");
  }

  // Partition the input into spill files.
  ZIPG_ASSIGN_OR_RETURN(auto work,
                        WorkDir::Create(out.string() + ".tmp-" + std::to_string(::getpid())));
  const std::string tmp = work->path();
  Partitioner partitioner(tmp + "/spill", FirstShardCount(source, options, budget));
  partitioner.KeepOnly(options.build_only);
  ScopedPhase load_phase("load");
  ZIPG_ASSIGN_OR_RETURN(const uint64_t raw_bytes, source.feed(&partitioner, progress));
  ZIPG_RETURN_IF_ERROR(partitioner.Flush());
  load_phase.End();

  // Plan the builds from what each partition really holds; partition again if it must.
  const uint32_t max_parallel = options.threads != 0 ? options.threads : HardwareThreads();
  auto plan = PlanBuilds(partitioner.footprints(), options.node_file, options.edge_file, budget,
                         max_parallel);
  if (!plan.ok()) {
    // A count suggested to the user keeps a tenth of what the builds may use to spare: the memory
    // available to the next run differs a little (page cache, other processes), and a suggestion
    // that fits only to the last MiB would fail there.
    const uint64_t target =
        options.shards != 0 ? budget - (budget - kProcessBaseline) / 10 : budget;
    ZIPG_ASSIGN_OR_RETURN(uint32_t fit, ShardsThatFit(partitioner, options, target));
    if (fit > kMaxShards && target != budget) {
      ZIPG_ASSIGN_OR_RETURN(fit, ShardsThatFit(partitioner, options, budget));
    }
    if (options.shards != 0 || fit > kMaxShards) {
      return Status(
          plan.status().code(),
          plan.status().message() + (fit <= kMaxShards
                                         ? "; --shards " + std::to_string(fit) + " would fit"
                                         : "; no shard count up to " + std::to_string(kMaxShards) +
                                               " fits (one node's edges may be too many)"));
    }
    note(std::to_string(partitioner.shards()) + " shards would not fit the budget: partitioning " +
         "into " + std::to_string(fit));
    if (progress) progress("repartition", 0, raw_bytes);
    ZIPG_RETURN_IF_ERROR(partitioner.Repartition(fit));
    if (progress) progress("repartition", raw_bytes, raw_bytes);
    plan = PlanBuilds(partitioner.footprints(), options.node_file, options.edge_file, budget,
                      max_parallel);
    if (!plan.ok()) return plan.status();  // cannot happen: `fit` was planned on these rows
  }
  const uint32_t num_shards = plan->shards;
  note("plan: " + std::to_string(num_shards) + " shards (" +
       (options.shards != 0 ? "given" : "chosen") + "), " + std::to_string(plan->parallel) +
       " parallel build" + (plan->parallel == 1 ? "" : "s") + ", planned peak " +
       FormatBytes(plan->peak) + " of " + FormatBytes(budget));

  Manifest manifest;
  manifest.shards = num_shards;
  manifest.built_shards = options.build_only;
  manifest.partition = kPartitionFunction;
  manifest.node_file = options.node_file;
  manifest.edge_file = options.edge_file;
  manifest.raw_bytes = raw_bytes;
  manifest.node_properties = partitioner.node_names();
  manifest.edge_properties = partitioner.edge_names();
  manifest.nodes = Sum(partitioner.footprints(), &ShardFootprint::nodes);
  for (const std::string& name : options.node_file.search.names) {
    if (!std::binary_search(manifest.node_properties.begin(), manifest.node_properties.end(),
                            name)) {
      return Status::InvalidArgument("--search-index names '" + name +
                                     "', which is not a node property of this graph");
    }
  }

  // Build the shards, `parallel` at a time, largest first.
  std::vector<uint64_t> weight(num_shards);
  std::vector<uint32_t> order;
  uint64_t total_weight = 0;
  for (uint32_t s = 0; s < num_shards; ++s) {
    if (!manifest.Holds(s)) continue;
    const ShardFootprint& f = partitioner.footprints()[s];
    weight[s] = f.node_text + f.EdgeTextBound();
    total_weight += weight[s];
    order.push_back(s);
  }
  const uint32_t num_built = static_cast<uint32_t>(order.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return weight[a] > weight[b]; });
  std::atomic<uint32_t> next{0};
  std::atomic<uint64_t> edges{0}, done_weight{0};
  std::mutex mu;
  Status first_error;
  if (progress) progress("build", 0, total_weight);
  auto worker = [&] {
    for (uint32_t i; (i = next++) < num_built;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok()) return;
      }
      const uint32_t s = order[i];
      ShardBuildInput input;
      input.node_spill = partitioner.NodeSpill(s);
      input.edge_spill = partitioner.EdgeSpill(s);
      input.node_names = &manifest.node_properties;
      input.edge_names = &manifest.edge_properties;
      input.node_file = options.node_file;
      input.edge_file = options.edge_file;
      uint64_t count = 0;
      ScopedPhase build_phase("build");
      Status st = BuildShard(input, tmp + "/" + ShardDirName(s), &count);
      build_phase.End();
      edges += count;
      const uint64_t done = done_weight += weight[s];
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok() && first_error.ok()) {
        first_error = Status(st.code(), ShardDirName(s) + ": " + st.message());
      }
      if (progress) progress("build", done, total_weight);
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < plan->parallel; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!first_error.ok()) return first_error;
  manifest.edges = edges;
  std::error_code ec;
  fs::remove_all(tmp + "/spill", ec);

  // Checksums, size report, manifest, then publish with one rename.
  if (progress) progress("finish", 0, 1);
  ScopedPhase finish_phase("finish");
  std::map<std::string, uint64_t> breakdown;
  uint64_t search_index_bytes = 0, search_text_bytes = 0;
  for (uint32_t s = 0; s < num_shards; ++s) {
    if (!manifest.Holds(s)) continue;
    const std::string dir = tmp + "/" + ShardDirName(s);
    for (const std::string& name :
         layout::ShardFiles(options.node_file.format, options.edge_file.format)) {
      ManifestFile file;
      file.path = ShardDirName(s) + "/" + name;
      file.bytes = fs::file_size(dir + "/" + name, ec);
      if (ec) return Status::IOError(dir + "/" + name + ": " + ec.message());
      ZIPG_ASSIGN_OR_RETURN(file.xxh3, FileChecksum(dir + "/" + name));
      manifest.files.push_back(file);
    }
    layout::OpenOptions no_verify;
    no_verify.verify_checksums = false;
    ZIPG_ASSIGN_OR_RETURN(auto nodes, layout::NodeFile::Open(dir + "/nodes", no_verify));
    for (const auto& part : nodes->Breakdown()) breakdown["nodes." + part.name] += part.bytes;
    search_index_bytes += nodes->search_index_bytes();
    search_text_bytes += nodes->search_text_bytes();
    ZIPG_ASSIGN_OR_RETURN(auto edge_file, layout::EdgeFile::Open(dir + "/edges", no_verify));
    for (const auto& part : edge_file->Breakdown()) breakdown["edges." + part.name] += part.bytes;
  }
  fs::remove(tmp + "/" + kLockName, ec);  // the lock file is not part of the store
  ZIPG_RETURN_IF_ERROR(WriteManifest(tmp, manifest));
  breakdown["manifest"] = fs::file_size(tmp + "/" + kManifestName, ec);

  if (fs::exists(out)) {
    // Replace an existing store (CheckOutput allowed it): move it aside, publish, delete it.
    const std::string old = out.string() + ".old-" + std::to_string(::getpid());
    fs::rename(out, old, ec);
    if (ec) return Status::IOError(out.string() + ": " + ec.message());
    fs::rename(tmp, out, ec);
    if (ec) {
      std::error_code ignored;
      fs::rename(old, out, ignored);
      return Status::IOError(out.string() + ": " + ec.message());
    }
    work->Keep();
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp, out, ec);
    if (ec) return Status::IOError(out.string() + ": " + ec.message());
    work->Keep();
  }
  if (progress) progress("finish", 1, 1);
  finish_phase.End();

  if (report) {
    report->phases = TakePhaseTimes();
    report->raw_bytes = manifest.raw_bytes;
    report->nodes = manifest.nodes;
    report->edges = manifest.edges;
    report->shards = num_shards;
    report->built = manifest.DescribeShards();
    report->parallel_builds = plan->parallel;
    report->memory_budget = budget;
    report->planned_peak = plan->peak;
    report->peak_rss = PeakRss();
    report->stored_bytes = 0;
    report->breakdown.assign(breakdown.begin(), breakdown.end());
    for (const auto& [name, bytes] : breakdown) report->stored_bytes += bytes;
    report->search_index_bytes = search_index_bytes;
    report->search_text_bytes = search_text_bytes;
  }
  return Status::OK();
}

Status CompressFiles(const CompressInputs& inputs, const std::string& out_dir,
                     const CompressOptions& options, const CompressProgress& progress,
                     CompressReport* report) {
  if (inputs.edges_path.empty()) return Status::InvalidArgument("an edges file is required");
  GraphSource source;
  // Sizes of regular files only (a pipe has none; a missing file is for the reader to report).
  auto size_of = [](const std::string& path) -> uint64_t {
    std::error_code ec;
    if (path.empty() || !fs::is_regular_file(path, ec)) return 0;
    const uint64_t bytes = fs::file_size(path, ec);
    return ec ? 0 : bytes;
  };
  source.node_bytes = size_of(inputs.nodes_path);
  source.edge_bytes = size_of(inputs.edges_path);
  source.feed = [&inputs](InputSink* sink, const CompressProgress& progress) -> StatusOr<uint64_t> {
    auto phase = [&](const char* name) -> LoadProgress {
      if (!progress) return {};
      return [&progress, name](uint64_t done, uint64_t total) { progress(name, done, total); };
    };
    uint64_t bytes = 0;
    if (!inputs.nodes_path.empty()) {
      ZIPG_ASSIGN_OR_RETURN(bytes, ReadNodesCsv(inputs.nodes_path, sink, phase("load nodes")));
    }
    ZIPG_ASSIGN_OR_RETURN(const uint64_t edge_bytes,
                          inputs.format == InputFormat::kSnap
                              ? ReadSnapEdges(inputs.edges_path, sink, phase("load edges"))
                              : ReadEdgesCsv(inputs.edges_path, sink, phase("load edges")));
    return bytes + edge_bytes;
  };
  return Compress(source, out_dir, options, progress, report);
}

Status CompressGraph(InputGraph graph, const std::string& out_dir, const CompressOptions& options,
                     const CompressProgress& progress, CompressReport* report) {
  GraphSource source;
  source.feed = [&graph](InputSink* sink, const CompressProgress& progress) -> StatusOr<uint64_t> {
    const uint64_t rows = graph.nodes.size() + graph.edges.size();
    if (progress) progress("partition", 0, rows);
    ZIPG_RETURN_IF_ERROR(sink->NodeHeader(graph.node_property_names));
    ZIPG_RETURN_IF_ERROR(sink->EdgeHeader(graph.edge_property_names));
    PropertyRefs refs;
    auto views = [&refs](const IndexedProperties& properties) -> const PropertyRefs& {
      refs.assign(properties.begin(), properties.end());
      return refs;
    };
    for (const auto& node : graph.nodes) {
      ZIPG_RETURN_IF_ERROR(sink->Node(node.id, views(node.properties)));
    }
    for (const auto& e : graph.edges) {
      ZIPG_RETURN_IF_ERROR(sink->Edge(e.src, e.dst, e.type, e.timestamp, views(e.properties)));
    }
    if (progress) progress("partition", rows, rows);
    return graph.raw_bytes;
  };
  return Compress(source, out_dir, options, progress, report);
}

}  // namespace zipg::graph
