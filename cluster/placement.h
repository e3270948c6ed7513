// Placement of shard replicas on servers (or hosts): each shard's R copies go to the R least
// loaded servers, ties broken in index order starting at server (shard mod N). So no server holds
// two copies of a shard, loads differ by at most one, and with R = 1 shard s is on server s mod N
// (the layout before replicas). `zipg local start --replicas R` and `zipg deploy plan` both use it
// (docs/replication.md, docs/deploy.md).
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace zipg::cluster {

// Per server, the shards it holds (ascending). INVALID_ARGUMENT unless 1 <= replicas <= servers.
inline StatusOr<std::vector<std::vector<uint32_t>>> PlaceReplicas(uint32_t num_shards,
                                                                 uint32_t servers,
                                                                 uint32_t replicas) {
  if (replicas < 1) return Status::InvalidArgument("the replication factor must be at least 1");
  if (servers < replicas) {
    return Status::InvalidArgument(
        "replication factor " + std::to_string(replicas) + " needs at least " +
        std::to_string(replicas) + " servers on different hosts; there are " +
        std::to_string(servers));
  }
  std::vector<std::vector<uint32_t>> out(servers);
  for (uint32_t s = 0; s < num_shards; ++s) {
    std::vector<uint32_t> order(servers);
    for (uint32_t k = 0; k < servers; ++k) order[k] = (s + k) % servers;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return out[a].size() < out[b].size(); });
    for (uint32_t r = 0; r < replicas; ++r) out[order[r]].push_back(s);
  }
  for (auto& shards : out) std::sort(shards.begin(), shards.end());
  return out;
}

}  // namespace zipg::cluster
