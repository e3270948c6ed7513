// Fuzzes the rpq path-expression parser (graph/path_expr.h, PathAutomaton::Parse). Properties:
// never crashes; a refused expression's error gives a position or the length bound; a parsed
// automaton is well formed (states in range, no move into the start state, types >= -1); the
// same text with whitespace removed parses to the same automaton.

#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.h"
#include "graph/path_expr.h"

using zipg::fuzz::Check;
using zipg::graph::PathAutomaton;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zipg::fuzz::MaybeWriteSeeds([] {
    // bench/rpq_queries.txt's expressions, and the spacing and nesting the contract allows.
    return std::vector<std::string>{"0",
                                    "0/1/2",
                                    "(0|1)/2",
                                    "_/_/_",
                                    "1/2*",
                                    "(0|1)/2+/3?",
                                    "0+",
                                    "(0/1)*/2",
                                    "0/1*(0|_)+/2?",
                                    "1 2",
                                    "((0))*_/_/_5?/(1|2)+",
                                    "9223372036854775807"};
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The length bound counts whitespace: past it, the squeezed text may parse where the text
  // does not.
  if (size > PathAutomaton::kMaxExprBytes) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto a = PathAutomaton::Parse(text);
  std::string squeezed;
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') squeezed += c;
  }
  auto b = PathAutomaton::Parse(squeezed);
  Check(a.ok() == b.ok(), "whitespace does not change whether an expression parses");
  if (!a.ok()) {
    Check(a.status().message().find("position") != std::string::npos ||
              a.status().message().find("longer than") != std::string::npos,
          "a refused expression's error gives a position or the length bound");
    return 0;
  }
  Check(a->transitions == b->transitions && a->accepting == b->accepting,
        "whitespace does not change the automaton");
  for (const auto& t : a->transitions) {
    Check(t.from < a->num_states() && t.to < a->num_states() && t.to != 0 && t.type >= -1,
          "a parsed automaton is well formed");
  }
  return 0;
}
