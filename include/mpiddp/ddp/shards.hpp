#pragma once
// ZeRO stage 1's split of the flat parameter buffer: one contiguous shard per
// rank, rank r owning [r * shard, min((r + 1) * shard, total)). The shard size
// is ceil(total / world) rounded up to 16 floats (64 bytes: every shard starts
// on a cache line and a SIMD boundary); the last shards are shorter, possibly
// empty, so nothing is padded in memory.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace mpiddp {

struct ShardLayout {
  static constexpr std::size_t kAlignFloats = 16;

  std::size_t total = 0;  // floats in the flat buffer
  std::size_t shard = 0;  // floats per (full) shard
  int world = 1;
  int rank = 0;

  static ShardLayout of(std::size_t total, int world, int rank) {
    ShardLayout s;
    s.total = total;
    s.world = std::max(1, world);
    s.rank = rank;
    const std::size_t per_rank = (total + static_cast<std::size_t>(s.world) - 1) / static_cast<std::size_t>(s.world);
    s.shard = (per_rank + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    return s;
  }
  std::size_t begin(int r) const { return std::min(total, static_cast<std::size_t>(r) * shard); }
  std::size_t end(int r) const { return std::min(total, (static_cast<std::size_t>(r) + 1) * shard); }
  std::size_t count(int r) const { return end(r) - begin(r); }
  std::size_t begin() const { return begin(rank); }
  std::size_t end() const { return end(rank); }
  std::size_t count() const { return count(rank); }
  // How many floats of [first, last) each rank owns, rank by rank (they add up to last - first).
  std::vector<std::size_t> pieces(std::size_t first, std::size_t last) const {
    std::vector<std::size_t> out(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) {
      const std::size_t a = std::max(first, begin(r)), b = std::min(last, end(r));
      out[static_cast<std::size_t>(r)] = b > a ? b - a : 0;
    }
    return out;
  }
  // Every rank's whole shard (for the all-gather of the parameters).
  std::vector<std::size_t> counts() const { return pieces(0, total); }
};

}  // namespace mpiddp
