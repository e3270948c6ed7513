// The data model of the user-facing contract (../shared/spec/interface.md): nodes and edges with
// property lists. Plain values; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zipg {

// (name, value) pairs sorted by name, names distinct. Values are UTF-8 strings (may be empty).
using Properties = std::vector<std::pair<std::string, std::string>>;

struct Node {
  int64_t id = 0;
  Properties properties;
  friend bool operator==(const Node&, const Node&) = default;
};

struct Edge {
  int64_t src = 0;
  int64_t type = 0;
  int64_t dst = 0;
  int64_t timestamp = 0;
  Properties properties;
  friend bool operator==(const Edge&, const Edge&) = default;
};

}  // namespace zipg
