// Hash partitioning of nodes over shards: the one function `compress`, the servers and the
// aggregators share (recorded in the store manifest as kPartitionFunction).
//
// Thread-safety: pure functions.
#pragma once

#include <xxhash.h>

#include <cstdint>

#include "util/coding.h"

namespace zipg {

inline constexpr char kPartitionFunction[] = "xxh3_64(int64 little-endian id) mod shards";

// The hash that ShardOf reduces modulo the shard count.
inline uint64_t PartitionHash(int64_t id) {
  char bytes[8];
  EncodeFixed64(bytes, static_cast<uint64_t>(id));
  return XXH3_64bits(bytes, 8);
}

inline uint32_t ShardOf(int64_t id, uint32_t num_shards) {
  return static_cast<uint32_t>(PartitionHash(id) % num_shards);
}

}  // namespace zipg
