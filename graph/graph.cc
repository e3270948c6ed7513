// The embedded Graph: opening a store directory and checking it against its manifest.

#include "graph/graph.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "graph/partition.h"

namespace zipg {

StatusOr<OpenedStore> OpenStore(const std::string& dir, const GraphOpenOptions& options,
                                const std::vector<uint32_t>* only) {
  OpenedStore store;
  ZIPG_ASSIGN_OR_RETURN(store.manifest, graph::ReadManifest(dir));
  const graph::Manifest& m = store.manifest;
  std::vector<bool> wanted(m.shards, only == nullptr);
  if (only) {
    for (uint32_t s : *only) {
      if (s >= m.shards) {
        return Status::InvalidArgument(dir + " has " + std::to_string(m.shards) +
                                       " shards; there is no shard " + std::to_string(s));
      }
      if (!m.Holds(s)) {
        return Status::NotFound(dir + " holds " + m.DescribeShards() + "; shard " +
                                std::to_string(s) + " was built elsewhere (compress --of)");
      }
      wanted[s] = true;
    }
  } else if (!m.built_shards.empty()) {
    return Status::InvalidArgument(dir + " holds only " + m.DescribeShards() +
                                   " (compress --of): only the shard servers of those shards "
                                   "open it (docs/deploy.md)");
  }
  if (store.manifest.partition != kPartitionFunction) {
    return Status::Corruption(dir + ": unknown partition function '" + store.manifest.partition +
                              "'");
  }
  // The file list must be exactly the shards' files: a shard count that disagrees with it would
  // route ids with the wrong modulus and answer wrongly without any error.
  std::vector<std::string> expected, listed;
  std::set<std::string> opened;  // the files of the shards opened here
  for (uint32_t i = 0; i < store.manifest.shards; ++i) {
    if (!m.Holds(i)) continue;
    for (const std::string& name :
         layout::ShardFiles(store.manifest.node_file.format, store.manifest.edge_file.format)) {
      expected.push_back(graph::ShardDirName(i) + "/" + name);
      if (wanted[i]) opened.insert(expected.back());
    }
  }
  for (const auto& file : store.manifest.files) listed.push_back(file.path);
  std::sort(expected.begin(), expected.end());
  std::sort(listed.begin(), listed.end());
  if (expected != listed) {
    return Status::Corruption(dir + "/" + graph::kManifestName + ": " + m.DescribeShards() +
                              " do not match the listed files");
  }
  for (const auto& file : store.manifest.files) {
    if (!opened.count(file.path)) continue;  // another server's files
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
  for (uint32_t i = 0; i < store.manifest.shards; ++i) {
    if (!wanted[i]) {
      store.shards.emplace_back();
      continue;
    }
    ZIPG_ASSIGN_OR_RETURN(auto shard,
                          layout::Shard::Open(dir + "/" + graph::ShardDirName(i), open_options));
    store.shards.push_back(std::move(shard));
  }
  return store;
}

StatusOr<std::unique_ptr<Graph>> Graph::Open(const std::string& dir,
                                             const GraphOpenOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(OpenedStore store, OpenStore(dir, options, nullptr));
  std::unique_ptr<Graph> g(new Graph());
  g->manifest_ = std::move(store.manifest);
  g->shards_ = std::move(store.shards);
  g->set_num_shards(g->manifest_.shards);
  return g;
}

}  // namespace zipg
