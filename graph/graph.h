// Graph: a compressed store opened in-process (embedded mode): every shard open here, so the
// routing and cross-shard steps of ShardRouter all run locally. The serving layer does the same
// across processes (shard/server.h, aggregator/aggregator.h).
//
// Thread-safety: immutable once opened; every operation may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layout/shard.h"
#include "graph/manifest.h"
#include "graph/router.h"

namespace zipg {

struct GraphOpenOptions {
  // Check every file against the manifest's checksum and every compressed section's checksum
  // (reads the whole store once). Default true; false opens in about a millisecond per shard.
  bool verify_checksums = true;
};

// A store's manifest and shards, checked as Graph::Open describes.
struct OpenedStore {
  graph::Manifest manifest;
  std::vector<std::unique_ptr<layout::Shard>> shards;  // null for shards not opened
};
// Opens the shards listed in `only` (every shard if null); only their files are checked.
StatusOr<OpenedStore> OpenStore(const std::string& dir, const GraphOpenOptions& options,
                                const std::vector<uint32_t>* only);

class Graph final : public ShardRouter {
 public:
  static StatusOr<std::unique_ptr<Graph>> Open(const std::string& dir,
                                               const GraphOpenOptions& options = {});

  const graph::Manifest& manifest() const { return manifest_; }
  const layout::Shard& shard(uint32_t i) const { return *shards_[i]; }

 protected:
  StatusOr<ShardRef> LocalShard(uint32_t index) override {
    return ShardRef(ShardRef(), shards_[index].get());  // owned by the Graph: no count
  }

 private:
  Graph() = default;

  graph::Manifest manifest_;
  std::vector<std::unique_ptr<layout::Shard>> shards_;
};

}  // namespace zipg
