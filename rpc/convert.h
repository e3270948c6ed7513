// Conversions between the engine's types (graph/types.h, util/status.h) and the generated Thrift
// types (thrift/zipg.thrift), in both directions.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/api.h"
#include "graph/traversal.h"
#include "model/search.h"
#include "model/types.h"
#include "util/status.h"
#include "zipg_rpc/zipg_types.h"

namespace zipg::rpc {

// A non-OK Status as the declared exception; engine-internal codes become INTERNAL.
GraphError ToError(const Status& status);
Status FromError(const GraphError& error);
// The contract code of the last error this thread made with ToError since the last call (null:
// none), and forgets it: the server's call metrics read it when a call ends (rpc/server.cc).
const char* TakeErrorCode();

// Throws ToError(status) unless it is OK: the handler side of every call.
void ThrowIfError(const Status& status);
template <typename T>
T ValueOrThrow(StatusOr<T> v) {
  ThrowIfError(v.status());
  return std::move(v.value());
}

std::map<std::string, std::string> ToThrift(const Properties& properties);
Properties FromThrift(const std::map<std::string, std::string>& properties);
rpc::Edge ToThrift(const zipg::Edge& edge);
zipg::Edge FromThrift(const rpc::Edge& edge);
std::vector<rpc::Edge> ToThrift(const std::vector<zipg::Edge>& edges);
std::vector<zipg::Edge> FromThrift(const std::vector<rpc::Edge>& edges);
// Writes of a write_batch; INVALID_ARGUMENT for a kind this version does not know.
BatchedWrite ToThrift(const zipg::Write& write);
StatusOr<zipg::Write> FromThrift(const BatchedWrite& write);
WriteOutcome ToOutcome(const StatusOr<bool>& outcome);
StatusOr<bool> FromOutcome(const WriteOutcome& outcome);

// search_node_ids's arguments; a received one with an unknown match is INVALID_ARGUMENT (the
// other checks are ValidateSearch's, where the search runs).
SearchRequest ToThrift(const NodeSearch& search);
StatusOr<NodeSearch> FromThrift(const SearchRequest& search);

// Traversal steps (docs/traversal.md). A received automaton or visit list is checked: states in
// range, parallel lists of one length, tags and nodes >= 0 (INVALID_ARGUMENT otherwise).
std::vector<Transition> ToThrift(const graph::PathAutomaton& automaton);
Visits ToThrift(const std::vector<graph::Visit>& visits);
StatusOr<std::vector<graph::Visit>> FromThrift(const Visits& visits);
// The automaton of `transitions`, with as many states as they and `visits` name.
StatusOr<graph::PathAutomaton> FromThrift(const std::vector<Transition>& transitions,
                                          const std::vector<graph::Visit>& visits);

}  // namespace zipg::rpc
