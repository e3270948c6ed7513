// Reading a property graph from the contract's input formats (nodes CSV, edges CSV, SNAP edge list),
// with validation. Errors name file, line and column.
//
// The readers stream: each row is handed to an InputSink as soon as it is parsed and checked, so
// a reader holds only the file's mapping (whose pages it gives back as it goes) and 8 bytes per
// node id (to find duplicates). The Load* functions collect the rows into an InputGraph in memory,
// for tests and small graphs; `zipg compress` streams into the partitioner (graph/partitioner.h).
//
// Thread-safety: functions are reentrant; an InputGraph is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/types.h"
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

// A property value as a view: (index into the file's property-name list, value). The value is
// valid only during the call that receives it. Lists are sorted by index.
using PropertyRefs = std::vector<std::pair<uint32_t, std::string_view>>;

// Sets *refs to `properties` (name, value pairs) as indexes into `names` (sorted, holding every
// name of `properties`), sorted by index, and returns it; the views point into `properties`.
const PropertyRefs& RefsByName(const std::vector<std::string>& names, const Properties& properties,
                               PropertyRefs* refs);

// Receives the rows of a graph as a reader checks them. A non-OK status stops the reader, which
// returns it. A reader calls a header function once, before the rows of its file.
class InputSink {
 public:
  virtual ~InputSink() = default;
  // The node property names in header order (distinct, non-empty).
  virtual Status NodeHeader(const std::vector<std::string>& names) = 0;
  // One node; ids are distinct over the file.
  virtual Status Node(int64_t id, const PropertyRefs& properties) = 0;
  // The edge property names in header order (distinct, non-empty; none for SNAP).
  virtual Status EdgeHeader(const std::vector<std::string>& names) = 0;
  // One edge; (src, type, dst) may repeat (the last one wins).
  virtual Status Edge(int64_t src, int64_t dst, int64_t type, int64_t timestamp,
                      const PropertyRefs& properties) = 0;
};

// Streaming readers: same formats, checks and errors as the Load* functions below, but rows go to
// `sink` (which may have received part of a file when an error stops the reader). They return the
// bytes read.
StatusOr<uint64_t> ReadNodesCsv(const std::string& path, InputSink* sink,
                                const LoadProgress& progress = {});
StatusOr<uint64_t> ReadEdgesCsv(const std::string& path, InputSink* sink,
                                const LoadProgress& progress = {});
StatusOr<uint64_t> ReadSnapEdges(const std::string& path, InputSink* sink,
                                 const LoadProgress& progress = {});

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
