#include "datagen/random.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace zipg::datagen {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// English letter frequencies (per mille), a..z.
constexpr int kLetterWeights[26] = {82, 15, 28, 43, 127, 22, 20, 61, 70, 2,  8, 40, 24,
                                    67, 75, 19, 1,  60,  63, 91, 28, 10, 24, 2, 20, 1};
// Word length weights for lengths 1..14.
constexpr int kLengthWeights[14] = {3, 17, 21, 19, 15, 11, 8, 6, 4, 3, 2, 1, 1, 1};

template <size_t N>
int Weighted(Rng& rng, const int (&weights)[N]) {
  int total = 0;
  for (int w : weights) total += w;
  int x = static_cast<int>(rng.Uniform(static_cast<uint64_t>(total)));
  for (size_t i = 0; i < N; ++i) {
    if (x < weights[i]) return static_cast<int>(i);
    x -= weights[i];
  }
  return N - 1;
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = SplitMix64(x);
}

uint64_t Rng::Next() {
  uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

ZipfSampler::ZipfSampler(uint64_t n, double exponent) : cdf_(n) {
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    sum += 1.0 / std::pow(static_cast<double>(i + 1), exponent);
    cdf_[i] = sum;
  }
  for (double& c : cdf_) c /= sum;
}

uint64_t ZipfSampler::Next(Rng& rng) const {
  double u = rng.NextDouble();
  auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return it == cdf_.end() ? cdf_.size() - 1 : static_cast<uint64_t>(it - cdf_.begin());
}

WordSource::WordSource(uint64_t vocabulary_size, double zipf_exponent, uint64_t seed)
    : zipf_(vocabulary_size, zipf_exponent) {
  Rng rng(seed);
  std::unordered_set<std::string> seen;
  words_.reserve(vocabulary_size);
  while (words_.size() < vocabulary_size) {
    // Frequent words tend to be short, as in natural language.
    int len = 1 + Weighted(rng, kLengthWeights);
    if (words_.size() < 100) len = std::min(len, 4);
    std::string w;
    for (int i = 0; i < len; ++i)
      w.push_back(static_cast<char>('a' + Weighted(rng, kLetterWeights)));
    if (seen.insert(w).second) words_.push_back(std::move(w));
  }
}

std::string GenerateText(uint64_t bytes, uint64_t seed) {
  static const WordSource* const kWords = new WordSource(50000, 1.0, 0x5eed);
  Rng rng(seed);
  std::string out;
  out.reserve(bytes + 32);
  bool sentence_start = true;
  while (out.size() < bytes) {
    std::string_view w = kWords->Next(rng);
    size_t at = out.size();
    out.append(w);
    if (sentence_start) out[at] = static_cast<char>(out[at] - 'a' + 'A');
    sentence_start = false;
    uint64_t r = rng.Uniform(100);
    if (r < 6) {
      out.append(". ");
      sentence_start = true;
    } else if (r < 10) {
      out.append(", ");
    } else if (r < 11) {
      out.append(".\n");
      sentence_start = true;
    } else {
      out.push_back(' ');
    }
  }
  out.resize(bytes);
  return out;
}

}  // namespace zipg::datagen
