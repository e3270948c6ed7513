// The compress pipeline: input graph -> hash-partitioned shards of NodeFile + EdgeFile -> a store
// directory with a manifest, built in a temporary directory and renamed into place at the end so
// that a failure never leaves a partial store (docs/graph-layout.md, "Compress pipeline").
//
// Rows stream from the input into per-shard spill files (graph/partitioner.h); then shards are
// built from them (graph/shard_build.h), as many at once as the memory budget allows
// (graph/memory_plan.h). When the shard count is not given it is chosen so that builds fit.
//
// Thread-safety: the functions are reentrant; they run shard builds on their own threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/input.h"
#include "layout/compressed_file.h"
#include "layout/edge_file.h"
#include "util/phase_times.h"
#include "util/status.h"

namespace zipg::graph {

struct CompressOptions {
  // Hash partitions. 0 (default) = chosen: `auto_shards`, or more if a shard build would not fit
  // the memory budget.
  uint32_t shards = 0;
  // Where the chosen shard count starts. 0 (default) = one per hardware thread, as in ZipG.
  uint32_t auto_shards = 0;
  // Parallel shard builds at most. 0 (default) = one per hardware thread. Fewer run when their
  // planned peaks together would exceed the memory budget.
  uint32_t threads = 0;
  // Memory the build may use, in bytes. 0 (default) = kDefaultBudgetFraction of the memory
  // available when it starts (MemAvailable, or a cgroup limit if smaller: util/memory.h).
  uint64_t memory_limit = 0;
  // The NodeFiles: format 2 (zstd blocks and a value index) by default; layout/node_file.h. For
  // format 1, Psi blocks of 32 rather than the flat file's 64 because obj_get extracts whole
  // records (measured: -35% obj_get latency for +6% NodeFile size); SA 32 because get_node_ids
  // locates every hit of its rarest term.
  layout::NodeFileOptions node_file;
  // The EdgeFiles: format 4 (zstd blocks and a record index) by default; layout/edge_file.h. For
  // format 3, edge text is mostly property values that are extracted but never searched (only
  // record keys are, one hit each), so SA and Psi are sampled sparsely; SA 128 measured ~2x slower
  // assoc_count than 64 for 3% less space.
  layout::EdgeFileOptions edge_file;
  // Build only these of the `shards` shards (ascending, distinct; `shards` must be given): several
  // machines each build some shards of one store from the same input (docs/deploy.md). The store
  // holds those shards' files and a manifest that names them (Manifest::built_shards). Empty
  // (default): every shard.
  std::vector<uint32_t> build_only;
  // Replace an existing store at the output directory (never any other directory).
  bool overwrite = false;
  // Receives one line for each thing a user should know: the memory budget, the plan, a stale
  // temporary directory that was removed. Optional.
  std::function<void(std::string_view line)> on_note;

  Status Validate() const;
};

struct CompressReport {
  uint64_t raw_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t nodes = 0;
  uint64_t edges = 0;  // after merging repeated (src, type, dst)
  uint32_t shards = 0;
  std::string built;  // "2 shards", or "shards 0,2 of 4" (CompressOptions::build_only)
  uint32_t parallel_builds = 0;
  uint64_t memory_budget = 0;
  uint64_t planned_peak = 0;  // bytes: the plan's peak for the build phase
  uint64_t peak_rss = 0;      // bytes: this process's peak resident set when compress returned
  // Summed over shards: "nodes.text.psi_gaps", ..., "nodes.index", "edges.text.*", "edges.meta",
  // "manifest".
  std::vector<std::pair<std::string, uint64_t>> breakdown;
  // Summed over shards: the search indexes' bytes, and the value text they index (delimiters
  // included; docs/search.md).
  uint64_t search_index_bytes = 0;
  uint64_t search_text_bytes = 0;
  // CPU seconds by phase of this run, all threads ("load", "build/nodes/blocks/compress", ...).
  std::vector<PhaseTime> phases;
};

// Called with a phase name ("load nodes", "load edges", "repartition", "build", "finish") and the
// progress within it, in bytes of input or text (done <= total).
using CompressProgress = std::function<void(std::string_view phase, uint64_t done, uint64_t total)>;

enum class InputFormat { kCsv, kSnap };

struct CompressInputs {
  std::string nodes_path;  // optional for kSnap and for edge-only graphs
  std::string edges_path;
  InputFormat format = InputFormat::kCsv;
};

// A graph to compress: feed() hands every row to the sink (the header of each kind first) and
// returns the bytes of input it read.
struct GraphSource {
  uint64_t node_bytes = 0, edge_bytes = 0;  // input sizes, to plan before reading (0: unknown)
  std::function<StatusOr<uint64_t>(InputSink* sink, const CompressProgress& progress)> feed;
};

// Compresses the rows of `source` into `out_dir`. An edge repeated with the same (src, type, dst)
// keeps its last occurrence (upsert, as assoc_add).
Status Compress(const GraphSource& source, const std::string& out_dir,
                const CompressOptions& options, const CompressProgress& progress,
                CompressReport* report);

// Reads the input files and compresses them into `out_dir`.
Status CompressFiles(const CompressInputs& inputs, const std::string& out_dir,
                     const CompressOptions& options, const CompressProgress& progress,
                     CompressReport* report);

// Compresses an already loaded graph (consumed) into `out_dir`.
Status CompressGraph(InputGraph graph, const std::string& out_dir, const CompressOptions& options,
                     const CompressProgress& progress, CompressReport* report);

}  // namespace zipg::graph
