// The embedded Graph: opening a store directory and checking it against its manifest.

#include "graph/graph.h"

#include <algorithm>
#include <filesystem>

#include "graph/partition.h"

namespace zipg {

StatusOr<std::unique_ptr<Graph>> Graph::Open(const std::string& dir,
                                             const GraphOpenOptions& options) {
  std::unique_ptr<Graph> g(new Graph());
  ZIPG_ASSIGN_OR_RETURN(g->manifest_, graph::ReadManifest(dir));
  g->set_num_shards(g->manifest_.shards);
  if (g->manifest_.partition != kPartitionFunction) {
    return Status::Corruption(dir + ": unknown partition function '" + g->manifest_.partition +
                              "'");
  }
  // The file list must be exactly the shards' files: a shard count that disagrees with it would
  // route ids with the wrong modulus and answer wrongly without any error.
  std::vector<std::string> expected, listed;
  for (uint32_t i = 0; i < g->manifest_.shards; ++i) {
    for (const char* name : shard::kShardFiles) {
      expected.push_back(graph::ShardDirName(i) + "/" + name);
    }
  }
  for (const auto& file : g->manifest_.files) listed.push_back(file.path);
  std::sort(expected.begin(), expected.end());
  std::sort(listed.begin(), listed.end());
  if (expected != listed) {
    return Status::Corruption(dir + "/" + graph::kManifestName + ": " +
                              std::to_string(g->manifest_.shards) +
                              " shards do not match the listed files");
  }
  for (const auto& file : g->manifest_.files) {
    const std::string path = dir + "/" + file.path;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return Status::Corruption(path + ": listed in the manifest but missing");
    if (size != file.bytes) {
      return Status::Corruption(path + ": size " + std::to_string(size) +
                                " differs from the manifest's " + std::to_string(file.bytes));
    }
    if (options.verify_checksums) {
      ZIPG_ASSIGN_OR_RETURN(uint64_t sum, graph::FileChecksum(path));
      if (sum != file.xxh3) return Status::Corruption(path + ": checksum mismatch");
    }
  }
  // Whole-file checksums above cover every byte; the per-section pass would read it all again.
  layout::OpenOptions open_options;
  open_options.verify_checksums = false;
  for (uint32_t i = 0; i < g->manifest_.shards; ++i) {
    ZIPG_ASSIGN_OR_RETURN(auto shard,
                          shard::Shard::Open(dir + "/" + graph::ShardDirName(i), open_options));
    g->shards_.push_back(std::move(shard));
  }
  return g;
}

}  // namespace zipg
