// The cluster side of search_node_ids (docs/search.md): one local_search_node_ids call per shard
// server for the shards it is picked for, and one log_search_node_ids call to the LogStore (which
// answers for the nodes whose properties were written since the load). Each part comes back cut
// to the first limit + 1 ids, so no server sends more than the answer can use. A call that fails
// with a retryable error (cluster::RetryElsewhere) is made once more on other replicas. Used by
// aggregators and by shard servers (for the shards they do not host).
//
// Thread-safety: the returned calls may run concurrently; they keep what they need alive.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/membership.h"
#include "model/search.h"
#include "rpc/connection_pool.h"
#include "rpc/fanout.h"

namespace zipg::cluster {

// Appends to *calls the local_search_node_ids calls for `shards`, numbered by `map` (the map
// the caller listed them from: a map read again could have another count after a split), and
// with `logstore` the LogStore's call. Retries read `view`.
Status AddSearchCalls(const ClusterView& view, const ShardMap& map, rpc::PoolSet* pools,
                      const std::vector<uint32_t>& shards, bool logstore, const NodeSearch& q,
                      std::vector<rpc::IdsCall>* calls);

}  // namespace zipg::cluster
