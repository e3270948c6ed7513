// The store manifest: <store>/MANIFEST, a JSON document written last by `compress` (so a directory
// without one is not a store) describing the format version, partitioning, sampling options,
// property names and every file with its size and XXH3-64 checksum. docs/graph-layout.md shows an
// example.
//
// Thread-safety: plain values and reentrant functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "layout/compressed_file.h"
#include "layout/edge_file.h"
#include "util/status.h"

namespace zipg::graph {

inline constexpr uint32_t kStoreFormatVersion = 1;
inline constexpr char kManifestName[] = "MANIFEST";

struct ManifestFile {
  std::string path;  // relative to the store directory
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
};

struct Manifest {
  uint32_t version = kStoreFormatVersion;
  uint32_t shards = 0;
  // The shards this directory holds, ascending, when it holds only some (`zipg compress --shards
  // A,B --of N` on each of several machines); empty: all of them. "nodes", "edges" and "files"
  // are then those shards'.
  std::vector<uint32_t> built_shards;
  std::string partition;  // kPartitionFunction
  layout::NodeFileOptions node_file;
  layout::EdgeFileOptions edge_file;
  std::vector<std::string> node_properties;  // sorted
  std::vector<std::string> edge_properties;  // sorted
  uint64_t nodes = 0;
  uint64_t edges = 0;
  uint64_t raw_bytes = 0;
  std::vector<ManifestFile> files;

  bool Holds(uint32_t shard) const {
    return shard < shards && (built_shards.empty() || std::binary_search(built_shards.begin(),
                                                                         built_shards.end(), shard));
  }
  // "shards 0,2 of 4", or "4 shards" when it holds them all.
  std::string DescribeShards() const;
};

// The directory of shard i inside a store ("shard-0003").
std::string ShardDirName(uint32_t shard);

Status WriteManifest(const std::string& store_dir, const Manifest& manifest);
// CORRUPTION naming the problem for unparsable or inconsistent manifests; NOT_FOUND if there is
// no manifest (not a store).
StatusOr<Manifest> ReadManifest(const std::string& store_dir);
// XXH3-64 of a whole file, streamed.
StatusOr<uint64_t> FileChecksum(const std::string& path);

}  // namespace zipg::graph
