// The cluster side of a traversal step (docs/traversal.md): the frontier's visits, grouped by the
// shard owning their node, go to one server per shard group as traverse_expand calls (at most
// kVisitsPerCall visits each), and the sources of an rpq without sources come from
// traverse_sources calls. Each call gets the time the query has left when it is made, and a
// cap of what the query's memory budget has left. A call that fails with a retryable error
// (cluster::RetryElsewhere) is made once more on other replicas, unless the query's deadline
// has passed. Used by aggregators (the coordinator of a client's traversal)
// and by shard servers (for the groups they do not host).
//
// Thread-safety: the returned calls may run concurrently; they keep what they need alive.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "cluster/membership.h"
#include "graph/traversal.h"
#include "rpc/connection_pool.h"
#include "rpc/fanout.h"

namespace zipg::cluster {

inline constexpr size_t kVisitsPerCall = 256 * 1024;  // about 4 MiB of request

// Appends to *calls the traverse_expand calls for `groups` (shard -> visits of nodes it owns).
Status AddExpandCalls(const ClusterView& view, rpc::PoolSet* pools,
                      const graph::PathAutomaton& automaton,
                      const std::map<uint32_t, std::vector<graph::Visit>>& groups,
                      const graph::TraversalBudget& budget,
                      std::vector<rpc::ListCall<graph::Visit>>* calls);

// Appends to *calls the traverse_sources calls for `shards`, numbered by `map` (as for
// AddSearchCalls), within `budget`.
Status AddSourcesCalls(const ClusterView& view, const ShardMap& map, rpc::PoolSet* pools,
                       const std::vector<uint32_t>& shards, bool include_dsts,
                       const graph::TraversalBudget& budget, std::vector<rpc::IdsCall>* calls);

}  // namespace zipg::cluster
