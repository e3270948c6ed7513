// Loading a property graph from the contract's input formats (nodes CSV, edges CSV, SNAP edge list)
// into memory, with validation. Errors name file, line and column.
//
// Thread-safety: functions are reentrant; an InputGraph is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace zipg::graph {

// A property value as (index into the file's property-name list, value). Lists are sorted by index.
using IndexedProperties = std::vector<std::pair<uint32_t, std::string>>;

struct InputNode {
  int64_t id = 0;
  IndexedProperties properties;  // only non-empty fields: the CSV loader treats empty as absent
};

struct InputEdge {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t type = 0;
  int64_t timestamp = 0;
  IndexedProperties properties;  // only non-empty fields
};

struct InputGraph {
  std::vector<std::string> node_property_names;  // header order, distinct, non-empty
  std::vector<std::string> edge_property_names;  // header order, distinct, non-empty
  std::vector<InputNode> nodes;                  // file order; ids are distinct
  std::vector<InputEdge> edges;                  // file order; may repeat (src, type, dst)
  uint64_t raw_bytes = 0;                        // total size of the files read
};

// Called now and then with the bytes of the current file consumed so far.
using LoadProgress = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

// Nodes CSV (RFC 4180, UTF-8): header `id,<prop>,...`; one row per node; id is a decimal int64 >= 0;
// empty field = absent property. Appends to `graph` (nodes and node_property_names must be empty).
// INVALID_ARGUMENT "FILE:LINE:COLUMN: what was expected" for malformed input; IO_ERROR if unreadable.
Status LoadNodesCsv(const std::string& path, InputGraph* graph, const LoadProgress& progress = {});

// Edges CSV: header `src,dst,type,timestamp[,<prop>...]`; src, dst, type int64 >= 0, timestamp int64.
Status LoadEdgesCsv(const std::string& path, InputGraph* graph, const LoadProgress& progress = {});

// SNAP edge list: `src dst` per line (whitespace separated), `#` comment lines, blank lines allowed;
// type 0, timestamp 0, no properties.
Status LoadSnapEdges(const std::string& path, InputGraph* graph, const LoadProgress& progress = {});

}  // namespace zipg::graph
