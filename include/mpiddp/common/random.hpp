#pragma once
// Small, portable random helpers. Everything random in mpiddp is derived from
// train.seed through these functions, so results never depend on the C++
// library's distributions.
#include <cstdint>

#include "mpiddp/common/hd.hpp"

namespace mpiddp {

// SplitMix64 finaliser: a good 64-bit mixing function.
MPIDDP_HD std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

MPIDDP_HD std::uint64_t hash_combine(std::uint64_t a, std::uint64_t b) { return mix64(a ^ mix64(b)); }

// Uniform in [0, 1) with 24 random bits (exactly representable as float).
MPIDDP_HD float unit_float(std::uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }
// Uniform in [0, 1) with 53 random bits (exactly representable as double).
MPIDDP_HD double unit_double(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

// A counter-based stream: value i depends only on (key, i).
class CounterRng {
 public:
  MPIDDP_HD explicit CounterRng(std::uint64_t key) : key_(key) {}
  MPIDDP_HD std::uint64_t bits(std::uint64_t i) const { return mix64(key_ + mix64(i)); }
  MPIDDP_HD float uniform(std::uint64_t i) const { return unit_float(bits(i)); }

 private:
  std::uint64_t key_;
};

}  // namespace mpiddp
