// The second half of the compress pipeline: one shard directory (NodeFile + EdgeFile) built from
// the rows its partition spilled (graph/partitioner.h).
//
// Memory, in order (docs/graph-layout.md, "Memory model"): the node spill file and a 16-byte
// entry per node, then the node text; the spill is freed before the NodeFile's compressed file is
// built. Then the same for edges with a 48-byte entry per edge row. The compressed-file builds
// (text + suffix array) are the peak.
//
// Thread-safety: BuildShard may run for different shards on different threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout/compressed_file.h"
#include "layout/edge_file.h"
#include "layout/node_file.h"
#include "util/status.h"

namespace zipg::graph {

struct ShardBuildInput {
  std::string node_spill, edge_spill;  // deleted once read
  const std::vector<std::string>* node_names = nullptr;  // sorted
  const std::vector<std::string>* edge_names = nullptr;  // sorted
  layout::NodeFileOptions node_file;
  layout::EdgeFileOptions edge_file;
};

// Builds `dir` (created if needed) from one partition's spill files; *edges is the number of
// edges stored (repeated (src, type, dst) merged, the last row winning).
Status BuildShard(const ShardBuildInput& input, const std::string& dir, uint64_t* edges);

}  // namespace zipg::graph
