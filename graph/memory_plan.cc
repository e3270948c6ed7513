// Memory planning (graph/memory_plan.h). Constants are from measurements on this repository's
// generated graphs; docs/graph-layout.md ("Memory model") lists them.

#include "graph/memory_plan.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <functional>

#include "layout/bits.h"
#include "layout/suffix_index.h"
#include "layout/value_index.h"
#include "util/memory.h"

namespace zipg::graph {

uint64_t DefaultMemoryBudget() {
  auto available = DetectAvailableMemory();
  return available.ok()
             ? static_cast<uint64_t>(static_cast<double>(available->bytes) * kDefaultBudgetFraction)
             : 0;
}

namespace {

// Bytes of working memory per row while a shard's text is assembled (graph/shard_build.cc): a
// sort entry per node (id, position) and per edge row (key, timestamp, position, length).
constexpr uint64_t kNodeEntryBytes = 16;
constexpr uint64_t kEdgeEntryBytes = 48;
// Per node while the NodeFile is written: the id and offset vectors and the index side file.
constexpr uint64_t kNodeIndexBytes = 32;
// NodeFile / EdgeFile text per byte of CSV input, measured on generated TAO-like graphs (1.20
// and 0.93: a node record adds a header and three structure bytes per value), rounded up: only
// for the first guess of the shard count before the input is read.
constexpr double kNodeTextPerInputByte = 1.25;
constexpr double kEdgeTextPerInputByte = 1.0;
// Headroom on a scaled estimate (shards of a hash partition differ by a few percent).
constexpr double kScaleMargin = 1.1;

ShardFootprint Scale(const ShardFootprint& f, double factor) {
  auto scale = [factor](uint64_t v) {
    return static_cast<uint64_t>(static_cast<double>(v) * factor) + 1;
  };
  ShardFootprint out = f;
  out.nodes = scale(f.nodes);
  out.node_text = scale(f.node_text);
  out.node_spill = scale(f.node_spill);
  out.edges = scale(f.edges);
  out.edge_property_bytes = scale(f.edge_property_bytes);
  out.edge_runs = scale(f.edge_runs);
  out.edge_spill = scale(f.edge_spill);
  return out;
}

}  // namespace

uint64_t CompressedFileBuildPeak(uint64_t text_bytes,
                                 const layout::CompressedFileOptions& options) {
  const uint64_t n = text_bytes;
  const bool wide = options.force_64bit_construction || n >= static_cast<uint64_t>(INT32_MAX);
  const uint64_t suffix_array = n * (wide ? 8 : 4);
  // The packed SA samples (value and low bits), ISA samples and mark buckets written meanwhile
  // (layout/compressed_file_build.cc).
  const uint64_t width = layout::BitsFor(n);
  const uint64_t bucket_bits = std::countr_zero(options.sa_sampling_rate) + 5;
  const uint64_t samples = (n / options.sa_sampling_rate + 1) * (width + bucket_bits) / 8 +
                           (n / options.isa_sampling_rate + 1) * width / 8 +
                           8 * ((n >> bucket_bits) + 2);
  return n + suffix_array + samples;
}

uint64_t EdgeFileBuildPeak(uint64_t text_bytes, const layout::EdgeFileOptions& options) {
  if (options.format < 4) return CompressedFileBuildPeak(text_bytes, options.suffix);
  // The text, its blocks (at most zstd's bound) and the dictionary's training.
  return 2 * text_bytes + text_bytes / 128 +
         layout::BlockFile::BuildWorkingBytes(text_bytes, options.blocks);
}

uint64_t NodeFileBuildPeak(uint64_t text_bytes, const layout::NodeFileOptions& options) {
  if (options.format < 2) return CompressedFileBuildPeak(text_bytes, options.suffix);
  constexpr uint64_t kMinValueBytes = 5;
  const uint64_t keys = text_bytes / kMinValueBytes;
  // The text, the value index's keys and then its rare entries (8 bytes each) sorted beside them;
  // format 3: the search indexes' entries, then one property's index at a time (at most the whole
  // value text's); later the blocks and the dictionary's training.
  const uint64_t search =
      options.format >= 3 ? keys * layout::SuffixIndex::Builder::kBuildBytesPerValue +
                                text_bytes * layout::SuffixIndex::Builder::kBuildBytesPerTextByte
                          : 0;
  return text_bytes +
         std::max({keys * (layout::ValueIndex::Builder::kBytesPerKey + 8), search,
                   text_bytes + text_bytes / 128 +
                       layout::BlockFile::BuildWorkingBytes(text_bytes, options.blocks)});
}

uint64_t ShardBuildPeak(const ShardFootprint& f, const layout::NodeFileOptions& node_file,
                        const layout::EdgeFileOptions& edge_file) {
  const uint64_t edge_text = f.EdgeTextBound();
  return std::max({
      f.node_spill + f.nodes * kNodeEntryBytes + f.node_text,  // assembling the node text
      NodeFileBuildPeak(f.node_text, node_file) + f.nodes * kNodeIndexBytes,
      f.edge_spill + f.edges * kEdgeEntryBytes + edge_text,  // assembling the edge text
      // The key filter (1.25 bytes per edge) and its encoded copy stay while the text is built.
      EdgeFileBuildPeak(edge_text, edge_file) + f.edges * 5 / 2,
  });
}

ShardFootprint EstimateFootprint(uint64_t node_input_bytes, uint64_t edge_input_bytes,
                                 uint32_t shards) {
  ShardFootprint f;
  const double per_shard = kScaleMargin / std::max<uint32_t>(shards, 1);
  f.node_text = static_cast<uint64_t>(kNodeTextPerInputByte * node_input_bytes * per_shard);
  f.node_spill = f.node_text;
  // Without rows to count, the edge text is its estimate alone (EdgeTextBound of property bytes).
  f.edges = edge_input_bytes > 0 ? 1 : 0;
  f.edge_property_bytes =
      static_cast<uint64_t>(kEdgeTextPerInputByte * edge_input_bytes * per_shard);
  f.edge_spill = f.edge_property_bytes;
  return f;
}

StatusOr<BuildPlan> PlanBuilds(const std::vector<ShardFootprint>& shards,
                               const layout::NodeFileOptions& node_file,
                               const layout::EdgeFileOptions& edge_file, uint64_t budget,
                               uint32_t max_parallel) {
  std::vector<uint64_t> peaks;
  for (const auto& f : shards) peaks.push_back(ShardBuildPeak(f, node_file, edge_file));
  std::sort(peaks.begin(), peaks.end(), std::greater<>());
  BuildPlan plan;
  plan.shards = static_cast<uint32_t>(shards.size());
  plan.budget = budget;
  plan.largest = peaks.empty() ? 0 : peaks[0];
  plan.peak = kProcessBaseline;
  const uint32_t limit = std::min<uint32_t>(std::max<uint32_t>(max_parallel, 1), plan.shards);
  for (uint32_t p = 0; p < limit; ++p) {
    if (plan.peak + peaks[p] > budget && p > 0) break;
    plan.peak += peaks[p];
    plan.parallel = p + 1;
  }
  if (plan.shards > 0 && plan.peak > budget) {
    return Status::ResourceExhausted(
        "the largest of " + std::to_string(plan.shards) + " shards needs about " +
        FormatBytes(plan.largest + kProcessBaseline) + " of memory to build, more than the " +
        FormatBytes(budget) + " budget");
  }
  return plan;
}

uint32_t ShardsToFit(const std::vector<ShardFootprint>& shards,
                     const layout::NodeFileOptions& node_file,
                     const layout::EdgeFileOptions& edge_file, uint64_t budget) {
  const uint32_t s = static_cast<uint32_t>(shards.size());
  if (s == 0) return 1;
  const ShardFootprint* largest = &shards[0];
  uint64_t largest_peak = 0;
  for (const auto& f : shards) {
    const uint64_t peak = ShardBuildPeak(f, node_file, edge_file);
    if (peak > largest_peak) {
      largest_peak = peak;
      largest = &f;
    }
  }
  for (uint32_t t = s + 1; t <= 4096; ++t) {
    const ShardFootprint scaled = Scale(*largest, kScaleMargin * s / t);
    if (kProcessBaseline + ShardBuildPeak(scaled, node_file, edge_file) <= budget) return t;
  }
  return 4097;
}

}  // namespace zipg::graph
