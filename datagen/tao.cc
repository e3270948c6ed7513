// TAO-like graph generation: a schema derived from the seed (which properties are categorical,
// their dictionaries, the free-text lengths), then one streaming pass over the nodes and one over
// the edges, each formatting CSV rows into a buffer that is handed to the sink about 1 MiB at a
// time.

#include "datagen/tao.h"

#include <algorithm>
#include <numeric>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "datagen/random.h"

namespace zipg::datagen {
namespace {

constexpr uint64_t kMaxNodes = uint64_t{1} << 32;
constexpr double kMaxAverageDegree = 10000;
constexpr uint64_t kMaxOutDegree = uint64_t{1} << 24;
constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr uint64_t kVocabulary = 50000;
constexpr int64_t kSecondsPerDay = 86400;

// Dictionary sizes of the categorical properties, in turn (like gender, employer, school, city).
constexpr uint32_t kDictionarySizes[] = {50, 2000, 120, 500, 80, 1200, 300, 800, 200};
// Relative mean lengths of the free-text properties, in turn: mostly short, a few long "about"s.
constexpr uint32_t kFreeTextWeights[] = {2, 1, 4, 1, 2, 8, 1, 3};
// Between two words of free text, per 100000: a sentence end, and the rare comma and newline that
// make a CSV field quoted. A word is put in double quotes 10 times in 100000.
constexpr uint64_t kSentenceEnd = 3000;
constexpr uint64_t kComma = 25;
constexpr uint64_t kNewline = 25;
constexpr uint64_t kQuotedWord = 10;
// An edge repeats its node's previous edge's type and timestamp 1 time in kBurstOdds.
constexpr uint64_t kBurstOdds = 10;
// Destinations drawn from the skewed (low id) distribution, per 10.
constexpr uint64_t kSkewedDestinations = 3;

// The independent random streams of one seed.
enum class Stream : uint64_t { kSchema = 1, kVocabulary, kNodes, kDegrees, kEdges, kHot };

uint64_t Hash(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t StreamSeed(uint64_t seed, Stream stream) {
  return Hash(Hash(seed) ^ static_cast<uint64_t>(stream));
}

// Uniform in [0, n) from 32 random bits.
uint64_t Below(uint32_t bits, uint64_t n) { return (uint64_t{bits} * n) >> 32; }

// Shortest decimal form of a double, for messages.
std::string Decimal(double v) {
  char tmp[32];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof(tmp), v);
  return std::string(tmp, end);
}

char Upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

// Appends free text of at least `target` bytes (and at most one word more) to `out`: Zipf words,
// capitalised sentences, rarely a comma, a newline or a word in double quotes.
void AppendText(const WordSource& words, Rng& rng, uint64_t target, std::string* out) {
  const size_t start = out->size();
  bool capital = true;
  while (out->size() - start < target) {
    const uint64_t r = rng.Next();
    if (out->size() > start) {
      const uint64_t gap = Below(static_cast<uint32_t>(r >> 32), 100000);
      if (gap < kSentenceEnd) {
        out->append(". ");
        capital = true;
      } else if (gap < kSentenceEnd + kComma) {
        out->append(", ");
      } else if (gap < kSentenceEnd + kComma + kNewline) {
        out->push_back('\n');
      } else {
        out->push_back(' ');
      }
    }
    const bool quoted = Below(static_cast<uint32_t>(r), 100000) < kQuotedWord;
    if (quoted) out->push_back('"');
    const size_t at = out->size();
    out->append(words.Next(rng));
    if (capital) (*out)[at] = Upper((*out)[at]);
    capital = false;
    if (quoted) out->push_back('"');
  }
}

// Free text whose mean length over many calls is the mean of the nominal lengths: each call aims
// at its nominal length corrected by the running surplus or deficit of the earlier calls.
class LengthController {
 public:
  // The length to aim at for a value of nominal length `nominal`.
  uint64_t Target(double nominal) const {
    double target = nominal + std::clamp(deficit_, -0.5 * nominal, nominal);
    return target < 1 ? 1 : static_cast<uint64_t>(std::ceil(target));
  }
  // Records a value of length `actual` that should have had length `expected` on average.
  void Record(double expected, size_t actual) {
    deficit_ = std::clamp(deficit_ + expected - static_cast<double>(actual), -1e6, 1e6);
  }

 private:
  double deficit_ = 0;
};

// Buffers CSV output and hands it to the sink in chunks.
class CsvWriter {
 public:
  explicit CsvWriter(const FileSink& sink) : sink_(sink) { buf_.reserve(kChunkBytes + 4096); }

  void Raw(std::string_view s) { buf_.append(s); }
  void Comma() { buf_.push_back(','); }
  template <typename Int>
  void Number(Int v) {
    char tmp[24];
    auto [end, ec] = std::to_chars(tmp, tmp + sizeof(tmp), v);
    buf_.append(tmp, end);
  }
  // RFC 4180: quoted iff the value holds a comma, a double quote, CR or LF; quotes are doubled.
  void Field(std::string_view v) {
    if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
      buf_.append(v);
      return;
    }
    buf_.push_back('"');
    for (char c : v) {
      if (c == '"') buf_.push_back('"');
      buf_.push_back(c);
    }
    buf_.push_back('"');
  }
  Status EndRow() {
    buf_.push_back('\n');
    return buf_.size() >= kChunkBytes ? Flush() : Status::OK();
  }
  Status Flush() {
    if (buf_.empty()) return Status::OK();
    written_ += buf_.size();
    Status s = sink_(buf_);
    buf_.clear();
    return s;
  }
  uint64_t bytes() const { return written_ + buf_.size(); }

 private:
  const FileSink& sink_;
  std::string buf_;
  uint64_t written_ = 0;
};

struct Property {
  std::string name;
  // Categorical: the dictionary, most frequent first, and its Zipf sampler.
  std::vector<std::string> phrases;
  std::optional<ZipfSampler> zipf;
  // Expected length of a value: exact for a categorical property, the nominal mean for free text.
  double mean_length = 0;
};

// Property names, kinds, dictionaries and lengths, derived from (options, seed).
std::vector<Property> MakeSchema(const TaoGraphOptions& o, const WordSource& words) {
  Rng rng(StreamSeed(o.seed, Stream::kSchema));
  std::vector<Property> props(o.properties);
  const int width = o.properties > 100 ? 3 : 2;
  double categorical_length = 0;
  uint64_t weight_sum = 0;
  uint32_t categorical = 0, free_text = 0;
  for (uint32_t i = 0; i < o.properties; ++i) {
    Property& p = props[i];
    const std::string digits = std::to_string(i);
    p.name.assign(1, 'p');
    p.name.append(width - std::min<size_t>(width, digits.size()), '0');
    p.name.append(digits);
    if (i % 5 == 0 || i % 5 == 2) {  // 2 in 5 categorical, p00 among them
      const uint32_t size =
          kDictionarySizes[categorical++ % (sizeof(kDictionarySizes) / sizeof(uint32_t))];
      std::unordered_set<std::string> seen;
      while (p.phrases.size() < size) {
        std::string phrase;
        for (uint64_t w = 0, n = 1 + rng.Uniform(3); w < n; ++w) {
          if (w > 0) phrase.push_back(' ');
          size_t at = phrase.size();
          phrase.append(words.Next(rng));
          phrase[at] = Upper(phrase[at]);
        }
        if (seen.insert(phrase).second) p.phrases.push_back(std::move(phrase));
      }
      p.zipf.emplace(size, 1.0);
      double weights = 0, weighted_length = 0;  // P(rank r) is proportional to 1 / (r + 1)
      for (uint32_t r = 0; r < size; ++r) {
        weights += 1.0 / (r + 1);
        weighted_length += static_cast<double>(p.phrases[r].size()) / (r + 1);
      }
      p.mean_length = weighted_length / weights;
      categorical_length += p.mean_length;
    } else {
      weight_sum += kFreeTextWeights[free_text++ % (sizeof(kFreeTextWeights) / sizeof(uint32_t))];
    }
  }
  // Free text takes what the categorical properties leave of the per-node budget.
  const double budget = o.value_bytes / o.presence - categorical_length;
  free_text = 0;
  for (Property& p : props) {
    if (p.zipf) continue;
    const uint32_t w =
        kFreeTextWeights[free_text++ % (sizeof(kFreeTextWeights) / sizeof(uint32_t))];
    p.mean_length = std::max(2.0, budget * w / static_cast<double>(weight_sum));
  }
  return props;
}

// Out-degrees, node by node: a Lomax law of shape 2 (inverse CDF lambda * (1/sqrt(1-u) - 1), a
// function of a hash of the node id) drawn in a first pass, then scaled so the total is
// round(average_degree * nodes) exactly, preserving zeros and the shape.
class OutDegrees {
 public:
  explicit OutDegrees(const TaoGraphOptions& o)
      : seed_(StreamSeed(o.seed, Stream::kDegrees)),
        lambda_(o.average_degree),
        cap_(std::min(kMaxOutDegree, o.nodes * o.edge_types / 2)),
        target_(
            static_cast<uint64_t>(std::llround(o.average_degree * static_cast<double>(o.nodes)))) {
    for (uint64_t i = 0; i < o.nodes; ++i) raw_total_ += Raw(i);
  }

  // The out-degree of the next node (nodes in id order).
  uint64_t Next() {
    if (raw_total_ == 0) return 0;
    const uint64_t before = Scaled(raw_done_);
    raw_done_ += Raw(next_++);
    return std::min(cap_, Scaled(raw_done_) - before);
  }

 private:
  uint64_t Raw(uint64_t node) const {
    const double u = static_cast<double>(Hash(seed_ ^ node) >> 11) * 0x1.0p-53;
    const double x = lambda_ * (1.0 / std::sqrt(1.0 - u) - 1.0);
    return x < static_cast<double>(cap_) ? static_cast<uint64_t>(x) : cap_;
  }
  uint64_t Scaled(uint64_t raw) const {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(raw) * target_ / raw_total_);
  }

  uint64_t seed_;
  double lambda_;
  uint64_t cap_;
  uint64_t target_;
  uint64_t raw_total_ = 0;
  uint64_t raw_done_ = 0;
  uint64_t next_ = 0;
};

// A set of (type, dst) keys of one node's edges: open addressing, cleared in O(expected size).
class KeySet {
 public:
  void Reset(uint64_t expected) {
    size_t size = 16;
    shift_ = 60;
    while (size < 2 * expected) {
      size <<= 1;
      --shift_;
    }
    table_.assign(size, kEmpty);
  }
  // False if `key` was already in the set.
  bool Insert(uint64_t key) {
    const size_t mask = table_.size() - 1;
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;; i = (i + 1) & mask) {
      if (table_[i] == key) return false;
      if (table_[i] == kEmpty) {
        table_[i] = key;
        return true;
      }
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  std::vector<uint64_t> table_;
  int shift_ = 60;
};

uint64_t PickDestination(Rng& rng, uint64_t nodes) {
  if (rng.Uniform(10) < kSkewedDestinations) {
    const double u = rng.NextDouble();
    return std::min(nodes - 1, static_cast<uint64_t>(u * u * static_cast<double>(nodes)));
  }
  return rng.Uniform(nodes);
}

}  // namespace

Status TaoGraphOptions::Validate() const {
  if (nodes < 1 || nodes > kMaxNodes) {
    return Status::InvalidArgument("nodes must be in 1..2^32, got " + std::to_string(nodes));
  }
  if (properties < 1 || properties > 1000) {
    return Status::InvalidArgument("properties must be in 1..1000, got " +
                                   std::to_string(properties));
  }
  if (value_bytes < 16ull * properties || value_bytes > (1u << 24)) {
    return Status::InvalidArgument("value_bytes must be in 16 * properties (" +
                                   std::to_string(16ull * properties) + ")..2^24, got " +
                                   std::to_string(value_bytes));
  }
  if (!(presence > 0 && presence <= 1)) {
    return Status::InvalidArgument("presence must be in (0, 1], got " + Decimal(presence));
  }
  if (edge_types < 1 || edge_types > 1000) {
    return Status::InvalidArgument("edge_types must be in 1..1000, got " +
                                   std::to_string(edge_types));
  }
  const double max_degree =
      std::min(kMaxAverageDegree, static_cast<double>(nodes) * edge_types / 4.0);
  if (!(average_degree >= 0 && average_degree <= max_degree)) {
    return Status::InvalidArgument(
        "average_degree must be in 0..min(10000, nodes * edge_types / 4) = " + Decimal(max_degree) +
        ", got " + Decimal(average_degree));
  }
  if (hot_edges > (uint64_t{1} << 28)) {
    return Status::InvalidArgument("hot_edges must be in 0..2^28, got " + std::to_string(hot_edges));
  }
  if (edge_data_bytes < 1 || edge_data_bytes > 65536) {
    return Status::InvalidArgument("edge_data_bytes must be in 1..65536, got " +
                                   std::to_string(edge_data_bytes));
  }
  if (days < 1 || days > 100000) {
    return Status::InvalidArgument("days must be in 1..100000, got " + std::to_string(days));
  }
  if (epoch < -(int64_t{1} << 62) || epoch > (int64_t{1} << 62)) {
    return Status::InvalidArgument("epoch must be within +-2^62 seconds");
  }
  return Status::OK();
}

Status GenerateTaoNodes(const TaoGraphOptions& options, const FileSink& sink,
                        TaoGraphStats* stats) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  const WordSource words(kVocabulary, 1.0, StreamSeed(options.seed, Stream::kVocabulary));
  const std::vector<Property> props = MakeSchema(options, words);
  Rng rng(StreamSeed(options.seed, Stream::kNodes));
  CsvWriter out(sink);
  out.Raw("id");
  for (const Property& p : props) {
    out.Comma();
    out.Raw(p.name);
  }
  ZIPG_RETURN_IF_ERROR(out.EndRow());

  LengthController lengths;
  std::string text;
  uint64_t present = 0, value_bytes = 0;
  for (uint64_t id = 0; id < options.nodes; ++id) {
    out.Number(id);
    for (const Property& p : props) {
      out.Comma();
      if (!(rng.NextDouble() < options.presence)) continue;
      std::string_view value;
      if (p.zipf) {
        value = p.phrases[p.zipf->Next(rng)];
        lengths.Record(p.mean_length, value.size());
      } else {
        const double nominal = p.mean_length * (0.5 + rng.NextDouble());
        text.clear();
        AppendText(words, rng, lengths.Target(nominal), &text);
        lengths.Record(nominal, text.size());
        value = text;
      }
      ++present;
      value_bytes += value.size();
      out.Field(value);
    }
    ZIPG_RETURN_IF_ERROR(out.EndRow());
  }
  ZIPG_RETURN_IF_ERROR(out.Flush());
  if (stats != nullptr) {
    stats->nodes = options.nodes;
    stats->node_file_bytes = out.bytes();
    stats->present_values = present;
    stats->node_value_bytes = value_bytes;
  }
  return Status::OK();
}

Status GenerateTaoEdges(const TaoGraphOptions& options, const FileSink& sink,
                        TaoGraphStats* stats) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  const WordSource words(kVocabulary, 1.0, StreamSeed(options.seed, Stream::kVocabulary));
  const uint64_t n = options.nodes;
  const uint64_t span = uint64_t{options.days} * kSecondsPerDay;
  OutDegrees degrees(options);
  Rng rng(StreamSeed(options.seed, Stream::kEdges));
  CsvWriter out(sink);
  out.Raw("src,dst,type,timestamp,data");
  ZIPG_RETURN_IF_ERROR(out.EndRow());

  LengthController lengths;
  KeySet keys;
  std::string data;
  uint64_t edges = 0, data_bytes = 0, max_degree = 0, zero_degree = 0;
  for (uint64_t src = 0; src < n; ++src) {
    const uint64_t degree = degrees.Next();
    max_degree = std::max(max_degree, degree);
    if (degree == 0) ++zero_degree;
    keys.Reset(degree);
    uint64_t type = 0;
    int64_t timestamp = 0;
    for (uint64_t k = 0; k < degree; ++k) {
      if (k == 0 || rng.Uniform(kBurstOdds) != 0) {
        type = rng.Uniform(options.edge_types);
        timestamp = options.epoch + static_cast<int64_t>(rng.Uniform(span));
      }
      // At most half of the node's (type, dst) slots are taken (Validate and the degree cap), so
      // this ends quickly; after a few misses the type is drawn again, in case a burst's type is
      // full.
      uint64_t dst = 0;
      for (int attempt = 1;; ++attempt) {
        dst = PickDestination(rng, n);
        if (keys.Insert(type * n + dst)) break;
        if (attempt % 8 == 0) type = rng.Uniform(options.edge_types);
      }
      const double nominal = options.edge_data_bytes * (0.75 + 0.5 * rng.NextDouble());
      data.clear();
      AppendText(words, rng, lengths.Target(nominal), &data);
      lengths.Record(nominal, data.size());
      data_bytes += data.size();

      out.Number(src);
      out.Comma();
      out.Number(dst);
      out.Comma();
      out.Number(type);
      out.Comma();
      out.Number(timestamp);
      out.Comma();
      out.Field(data);
      ZIPG_RETURN_IF_ERROR(out.EndRow());
    }
    edges += degree;
    if (src == 0 && options.hot_edges > 0) {
      // Its own random stream, so that the regular edges are the same with or without these.
      Rng hot(StreamSeed(options.seed, Stream::kHot));
      LengthController hot_lengths;
      const uint64_t m = options.hot_edges;
      // k -> (k * step + offset) mod m is a permutation of 0..m-1 when gcd(step, m) = 1.
      uint64_t step = (m / 2 + 1) | 1;
      while (std::gcd(step, m) != 1) step += 2;
      const uint64_t offset = hot.Uniform(m);
      int64_t timestamp = 0;
      for (uint64_t k = 0; k < m; ++k) {
        if (k == 0 || hot.Uniform(kBurstOdds) != 0) {
          timestamp = options.epoch + static_cast<int64_t>(hot.Uniform(span));
        }
        const double nominal = options.edge_data_bytes * (0.75 + 0.5 * hot.NextDouble());
        data.clear();
        AppendText(words, hot, hot_lengths.Target(nominal), &data);
        hot_lengths.Record(nominal, data.size());
        data_bytes += data.size();
        out.Number(src);
        out.Comma();
        out.Number(static_cast<uint64_t>((static_cast<unsigned __int128>(k) * step + offset) % m));
        out.Comma();
        out.Number(options.edge_types);
        out.Comma();
        out.Number(timestamp);
        out.Comma();
        out.Field(data);
        ZIPG_RETURN_IF_ERROR(out.EndRow());
      }
      edges += m;
      max_degree = std::max(max_degree, degree + m);
    }
  }
  ZIPG_RETURN_IF_ERROR(out.Flush());
  if (stats != nullptr) {
    stats->edges = edges;
    stats->edge_file_bytes = out.bytes();
    stats->edge_data_bytes = data_bytes;
    stats->max_out_degree = max_degree;
    stats->zero_out_degree_nodes = zero_degree;
  }
  return Status::OK();
}

Status WriteTaoGraph(const TaoGraphOptions& options, const std::string& nodes_path,
                     const std::string& edges_path, TaoGraphStats* stats) {
  ZIPG_RETURN_IF_ERROR(options.Validate());
  ZIPG_RETURN_IF_ERROR(WriteFileAtomically(
      nodes_path, [&](const FileSink& sink) { return GenerateTaoNodes(options, sink, stats); }));
  return WriteFileAtomically(
      edges_path, [&](const FileSink& sink) { return GenerateTaoEdges(options, sink, stats); });
}

}  // namespace zipg::datagen
