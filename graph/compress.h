// The compress pipeline: input graph -> hash-partitioned shards of NodeFile + EdgeFile -> a store
// directory with a manifest, built in a temporary directory and renamed into place at the end so
// that a failure never leaves a partial store (docs/graph-layout.md).
//
// Thread-safety: CompressGraph is reentrant; it runs shard builds on its own threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/input.h"
#include "layout/compressed_file.h"
#include "util/status.h"

namespace zipg::graph {

struct CompressOptions {
  // Hash partitions. 0 (default) = one per hardware thread, as in ZipG.
  uint32_t shards = 0;
  // Parallel shard builds. 0 (default) = min(shards, hardware threads). Each build needs about 14
  // bytes of memory per byte of the shard's larger text.
  uint32_t threads = 0;
  // Sampling of the NodeFiles (sa, isa, psi block): Psi blocks of 32 rather than the flat file's 64
  // because obj_get extracts whole records (measured: -35% obj_get latency for +6% NodeFile size);
  // SA 32 because get_node_ids locates every hit of its rarest term.
  layout::CompressedFileOptions node_file = {32, 32, 32, false};
  // Sampling of the EdgeFiles: edge text is mostly property values that are extracted but never
  // searched (only record keys are, one hit each), so SA and Psi are sampled sparsely; SA 128
  // measured ~2x slower assoc_count than 64 for 3% less space.
  layout::CompressedFileOptions edge_file = {64, 64, 128, false};
  // Replace an existing store at the output directory (never any other directory).
  bool overwrite = false;

  Status Validate() const;
};

struct CompressReport {
  uint64_t raw_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t nodes = 0;
  uint64_t edges = 0;  // after merging repeated (src, type, dst)
  uint32_t shards = 0;
  // Summed over shards: "nodes.text.psi_gaps", ..., "nodes.index", "edges.text.*", "edges.meta",
  // "manifest".
  std::vector<std::pair<std::string, uint64_t>> breakdown;
};

// Called with a phase name ("load nodes", "load edges", "partition", "build", "finish") and the
// progress within it, in bytes of input (done <= total).
using CompressProgress = std::function<void(std::string_view phase, uint64_t done, uint64_t total)>;

enum class InputFormat { kCsv, kSnap };

struct CompressInputs {
  std::string nodes_path;  // optional for kSnap and for edge-only graphs
  std::string edges_path;
  InputFormat format = InputFormat::kCsv;
};

// Loads the inputs and compresses them into `out_dir`.
Status CompressFiles(const CompressInputs& inputs, const std::string& out_dir,
                     const CompressOptions& options, const CompressProgress& progress,
                     CompressReport* report);

// Compresses an already loaded graph (consumed) into `out_dir`. An edge repeated with the same
// (src, type, dst) keeps its last occurrence (upsert, as assoc_add).
Status CompressGraph(InputGraph graph, const std::string& out_dir, const CompressOptions& options,
                     const CompressProgress& progress, CompressReport* report);

}  // namespace zipg::graph
