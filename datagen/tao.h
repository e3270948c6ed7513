// A deterministic generator of TAO-like property graphs, the synthetic datasets of the ZipG
// evaluation (Facebook TAO's distributions): ~40 node properties totalling ~640 bytes of values,
// power-law out-degrees averaging ~10, 5 edge types, timestamps spread over 50 days and one
// ~128-byte edge property. Output is the contract's nodes and edges CSV (RFC 4180, see
// ../shared/spec/interface.md "Input formats"), streamed: memory use does not grow with the graph.
//
// The bytes written are a pure function of the options (seed included), the same on every run and
// platform: what is written is decided by integer arithmetic and correctly rounded IEEE operations
// (+ - * / sqrt; the Zipf weights use exponent 1, which std::pow computes exactly), and no product
// feeding a sum is inexact, so a fused multiply-add cannot change a result.
//
// Thread-safety: the functions are reentrant and share no state.
#pragma once

#include <cstdint>
#include <string>

#include "util/file.h"
#include "util/status.h"

namespace zipg::datagen {

struct TaoGraphOptions {
  // Number of nodes; ids are 0..nodes-1. Required: 1..2^32.
  uint64_t nodes = 0;
  // Selects the graph: same options and seed, same bytes.
  uint64_t seed = 1;

  // Node properties, named p00, p01, ... (three digits when more than 100); 1..1000. About 2 in 5
  // are categorical: a short phrase drawn Zipf-wise from a per-property dictionary of 50-2000
  // phrases (like city, school or employer), so equality queries on values find many matches. The
  // rest are free text of Zipf-distributed pseudo-English words, lengths varying per property.
  uint32_t properties = 40;
  // Mean total bytes of property values per node (absent properties count 0; CSV quoting not
  // counted). Free-text lengths are set to meet it; at least 16 per property.
  uint32_t value_bytes = 640;
  // Probability that a node has a given property, in (0, 1]; an absent one is an empty field.
  double presence = 0.9;

  // Mean out-degree, from 0 to min(10000, nodes * edge_types / 4). Out-degrees follow a
  // Lomax (Pareto II, shape 2) law scaled so that the edge count is round(average_degree * nodes)
  // (fewer only if a node hits the cap of min(2^24, nodes * edge_types / 2) edges):
  // ~17% of nodes have no out-edge and the largest degree grows like sqrt(nodes) (~5000 at 100k
  // nodes). Destinations are uniform over the nodes for 70% of edges; the rest have density
  // proportional to 1/sqrt(id), so low ids are popular (node 0 has in-degree ~1000 at 100k
  // nodes). (src, type, dst) triples are distinct.
  double average_degree = 10;
  // Edge types 0..edge_types-1, each equally likely; 1..1000.
  uint32_t edge_types = 5;
  // Mean length of the edge property `data` (free text; lengths vary by +-25%); 1..65536.
  uint32_t edge_data_bytes = 128;
  // Timestamps are int64 seconds, uniform in [epoch, epoch + days * 86400), except that about 1
  // edge in 10 repeats the type and timestamp of the previous edge from the same node (a burst), so
  // equal timestamps occur within one node's edges of one type. days: 1..100000.
  uint32_t days = 50;
  int64_t epoch = 1483228800;  // 2017-01-01T00:00:00Z
  // A hot node, as LinkBench's degree law makes one: node 0 gets this many more edges (0..2^28),
  // of its own type `edge_types` (one past the regular ones), to destinations 0..hot_edges-1 in a
  // scrambled order (ids past `nodes` have no node row), with timestamps drawn as above (bursts
  // included) and the same `data` property. They follow node 0's regular edges; the rest of the
  // graph is the same as without them.
  uint64_t hot_edges = 0;

  // INVALID_ARGUMENT naming the first field out of range.
  Status Validate() const;
};

// What a generation wrote.
struct TaoGraphStats {
  uint64_t nodes = 0;
  uint64_t edges = 0;
  uint64_t node_file_bytes = 0;   // bytes of the nodes CSV
  uint64_t edge_file_bytes = 0;   // bytes of the edges CSV
  uint64_t present_values = 0;    // non-empty node property fields
  uint64_t node_value_bytes = 0;  // total length of node property values (unquoted)
  uint64_t edge_data_bytes = 0;   // total length of edge `data` values (unquoted)
  uint64_t max_out_degree = 0;  // hot edges included
  uint64_t zero_out_degree_nodes = 0;
};

// Streams the nodes CSV (header `id,p00,...`, one row per node in id order) to `sink` in chunks of
// about 1 MiB. Fills the node fields of `stats` if not null.
Status GenerateTaoNodes(const TaoGraphOptions& options, const FileSink& sink,
                        TaoGraphStats* stats = nullptr);

// Streams the edges CSV (header `src,dst,type,timestamp,data`, rows grouped by src in ascending
// order) to `sink`. Fills the edge fields of `stats` if not null.
Status GenerateTaoEdges(const TaoGraphOptions& options, const FileSink& sink,
                        TaoGraphStats* stats = nullptr);

// Writes both files, each atomically (a temporary name, then rename). If the edges fail, the
// nodes file is already in place.
Status WriteTaoGraph(const TaoGraphOptions& options, const std::string& nodes_path,
                     const std::string& edges_path, TaoGraphStats* stats = nullptr);

}  // namespace zipg::datagen
