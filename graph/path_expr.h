// Regular path expressions over edge types (the contract's rpq syntax, docs/traversal.md) and the
// automata that traversals run: a list of transitions (state, edge type or any, next state) with
// accepting states. A parsed expression becomes its Glushkov (position) automaton, which has no
// empty-word transitions: one state per type atom of the expression plus the start state 0, so a
// traversal step is "follow an edge", never "close over epsilon moves".
//
// Thread-safety: PathAutomaton is a value; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace zipg::graph {

struct PathAutomaton {
  // The label of a transition that any edge type takes.
  static constexpr int64_t kAnyType = -1;
  struct Transition {
    uint32_t from = 0;
    int64_t type = 0;  // kAnyType or a type >= 0
    uint32_t to = 0;
    friend bool operator==(const Transition&, const Transition&) = default;
  };
  // Sorted by (from, type, to), distinct; state 0 starts.
  std::vector<Transition> transitions;
  std::vector<bool> accepting;  // one per state

  uint32_t num_states() const { return static_cast<uint32_t>(accepting.size()); }
  // Whether the empty word is accepted (the start state accepts).
  bool nullable() const { return !accepting.empty() && accepting[0]; }

  // The automaton of expression `expr`; INVALID_ARGUMENT naming the 1-based character position of
  // the first error. Expressions longer than kMaxExprBytes or with more than kMaxAtoms types are
  // INVALID_ARGUMENT too (they bound the automaton's size).
  static StatusOr<PathAutomaton> Parse(std::string_view expr);
  // One state that takes every edge of the listed types (of any type if `any_type`) back to itself
  // and accepts: breadth-first search as an automaton.
  static PathAutomaton Loop(bool any_type, const std::vector<int64_t>& types);
  // An automaton received from elsewhere (a traversal step on a shard server): checks that every
  // transition names states below num_states (at most kMaxAtoms + 1) and a valid type, and sorts
  // them. Accepting states are not part of a step and are left all false.
  static StatusOr<PathAutomaton> FromTransitions(std::vector<Transition> transitions,
                                                 uint32_t num_states);

  static constexpr size_t kMaxExprBytes = 4096;
  static constexpr size_t kMaxAtoms = 512;
};

}  // namespace zipg::graph
