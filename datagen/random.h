// Deterministic pseudo-random numbers for data generators: the same seed gives the same stream on
// every platform and standard library (std::*_distribution are not portable, so none are used).
//
// Thread-safety: an Rng is single-threaded; use one per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zipg::datagen {

// xoshiro256** seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, n) for n >= 1 (multiply-shift; bias below 2^-64 * n).
  uint64_t Uniform(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

// Draws ranks 0..n-1 with probability proportional to 1 / (rank + 1)^exponent.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double exponent);
  uint64_t Next(Rng& rng) const;

 private:
  std::vector<double> cdf_;
};

// A vocabulary of distinct pseudo-English words (letters drawn with English letter frequencies,
// lengths 1..14 peaking at 4-6) used with Zipf-distributed frequencies, so generated text
// compresses like prose.
class WordSource {
 public:
  WordSource(uint64_t vocabulary_size, double zipf_exponent, uint64_t seed);
  std::string_view Next(Rng& rng) const { return words_[zipf_.Next(rng)]; }
  uint64_t vocabulary_size() const { return words_.size(); }

 private:
  std::vector<std::string> words_;
  ZipfSampler zipf_;
};

// `bytes` bytes of text-like data: Zipf-distributed words, spaces, sentence punctuation, capitals
// and line breaks. Contains no zero byte. Deterministic in (bytes, seed).
std::string GenerateText(uint64_t bytes, uint64_t seed);

}  // namespace zipg::datagen
