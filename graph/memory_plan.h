// Memory planning for building shards: how much memory a shard build needs at its peak, given
// what its partition spilled (graph/partitioner.h), and how many builds may run at once under a
// budget. The model and the measurements behind its constants are in docs/graph-layout.md
// ("Memory model"); bench/graph_bench and the compress CLI print planned against measured peaks.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/partitioner.h"
#include "layout/compressed_file.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "util/status.h"

namespace zipg::graph {

// The fraction of the detected available memory that compress plans to use when no explicit
// limit is given: room for the page cache, the rest of the system and the model's error.
inline constexpr double kDefaultBudgetFraction = 0.8;
// kDefaultBudgetFraction of the memory available now (util/memory.h); 0 if it cannot be told.
uint64_t DefaultMemoryBudget();
// Memory the process holds whatever it builds: code, libraries, allocator arenas, the
// partitioner's write buffers (64 MiB) and the input pages being read (measured: 94-120 MiB at
// the end of loading a 2.2 GB input).
inline constexpr uint64_t kProcessBaseline = uint64_t{128} << 20;

// Peak bytes of building a compressed file from `text_bytes` of text (the text itself included):
// the suffix array (4 bytes per byte below 2^31 bytes, else 8) and the samples written while it
// is scanned.
uint64_t CompressedFileBuildPeak(uint64_t text_bytes, const layout::CompressedFileOptions& options);
// The same for an EdgeFile: a CompressedFile's (formats 1-3), or for format 4 the text, its
// compressed blocks (at most zstd's bound, about the text's size), the dictionary's training
// samples and zstd's working memory.
uint64_t EdgeFileBuildPeak(uint64_t text_bytes, const layout::EdgeFileOptions& options);
// The same for a NodeFile (without its id tables): a CompressedFile's (format 1), or for format 2
// the text, its blocks, the value index's keys while they are collected (at most one per 5 bytes
// of text: a value's header entry, delimiter and end) and zstd's working memory.
uint64_t NodeFileBuildPeak(uint64_t text_bytes, const layout::NodeFileOptions& options);

// Peak bytes of BuildShard for a partition with this footprint (not counting the baseline).
uint64_t ShardBuildPeak(const ShardFootprint& footprint, const layout::NodeFileOptions& node_file,
                        const layout::EdgeFileOptions& edge_file);

// An estimate of a shard's footprint before the input is read: `input_bytes` of nodes and edges
// spread evenly over `shards`, with the text-per-input-byte ratios measured on CSV input (an
// estimate; the plan is made again from the real footprints once the input is partitioned).
ShardFootprint EstimateFootprint(uint64_t node_input_bytes, uint64_t edge_input_bytes,
                                 uint32_t shards);

struct BuildPlan {
  uint32_t shards = 0;
  uint32_t parallel = 0;   // shard builds at once
  uint64_t peak = 0;       // planned peak: baseline + the `parallel` largest build peaks
  uint64_t largest = 0;    // the largest single build's peak
  uint64_t budget = 0;
};

// The most builds at once (at most `max_parallel`) whose peaks together stay under `budget`.
// RESOURCE_EXHAUSTED if even the largest shard alone does not fit, saying how much it needs.
StatusOr<BuildPlan> PlanBuilds(const std::vector<ShardFootprint>& shards,
                               const layout::NodeFileOptions& node_file,
                               const layout::EdgeFileOptions& edge_file, uint64_t budget,
                               uint32_t max_parallel);

// An estimate of the shard count at which the largest shard of `shards` would fit `budget`,
// assuming shard sizes shrink in proportion (hash partitioning spreads nodes evenly, but a hub
// node's edges stay together); at least shards.size() + 1, and 4097 if none up to 4096 would.
uint32_t ShardsToFit(const std::vector<ShardFootprint>& shards,
                     const layout::NodeFileOptions& node_file,
                     const layout::EdgeFileOptions& edge_file, uint64_t budget);

}  // namespace zipg::graph
