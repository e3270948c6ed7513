// Throwaway: fuzz PathAutomaton::Parse. Properties: no crash; a parsed automaton is well formed;
// the same text with whitespace removed parses to the same automaton.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "graph/path_expr.h"
using zipg::graph::PathAutomaton;
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto a = PathAutomaton::Parse(text);
  std::string squeezed;
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') squeezed += c;
  auto b = PathAutomaton::Parse(squeezed);
  if (a.ok() != b.ok()) abort();
  if (!a.ok()) {
    if (a.status().message().find("position") == std::string::npos &&
        a.status().message().find("longer than") == std::string::npos)
      abort();
    return 0;
  }
  if (a->transitions != b->transitions || a->accepting != b->accepting) abort();
  for (const auto& t : a->transitions) {
    if (t.from >= a->num_states() || t.to >= a->num_states() || t.to == 0) abort();
    if (t.type < -1) abort();
  }
  return 0;
}
