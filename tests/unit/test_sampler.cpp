// DistributedSampler: orders recorded from PyTorch 1.13 (torch.utils.data
// .distributed.DistributedSampler) plus properties that must hold for any input.
#include <catch2/catch.hpp>
#include <algorithm>
#include <set>

#include "mpiddp/data/sampler.hpp"

using namespace mpiddp;
using Indices = std::vector<std::int64_t>;

namespace {
Indices sample(std::int64_t n, int world, int rank, std::uint64_t seed, std::uint64_t epoch, bool drop_last,
               bool shuffle = true) {
  SamplerOptions o;
  o.size = n;
  o.world = world;
  o.rank = rank;
  o.seed = seed;
  o.epoch = epoch;
  o.drop_last = drop_last;
  o.shuffle = shuffle;
  return distributed_sampler_indices(o);
}
}  // namespace

TEST_CASE("orders recorded from PyTorch", "[sampler]") {
  CHECK(torch_randperm(10, 0) == Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
  CHECK(sample(10, 1, 0, 0, 0, false) == Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
  CHECK(sample(10, 3, 1, 42, 0, false) == Indices{6, 4, 9, 2});
  CHECK(sample(10, 3, 2, 42, 3, false) == Indices{5, 9, 2, 6});
  CHECK(sample(11, 4, 3, 7, 1, true) == Indices{4, 3});
  CHECK(sample(7, 3, 0, 0, 0, false, false) == Indices{0, 3, 6});
  CHECK(sample(2, 3, 2, 5, 0, false) == Indices{1});  // padding longer than the data set
  // PyTorch keys its generator with the low 32 bits of seed + epoch.
  CHECK(sample(20, 2, 0, 4294967301ULL, 1, false) == Indices{10, 17, 14, 19, 3, 9, 15, 8, 6, 1});
}

TEST_CASE("ranks partition the epoch, padded or truncated like PyTorch", "[sampler]") {
  for (std::int64_t n : {1, 7, 100, 101, 1000}) {
    for (int world : {1, 2, 3, 4, 7}) {
      for (bool drop_last : {false, true}) {
        const std::int64_t per_rank = samples_per_rank(n, world, drop_last);
        if (per_rank == 0) continue;
        std::multiset<std::int64_t> all;
        for (int r = 0; r < world; ++r) {
          const Indices mine = sample(n, world, r, 3, 2, drop_last);
          REQUIRE(static_cast<std::int64_t>(mine.size()) == per_rank);
          all.insert(mine.begin(), mine.end());
        }
        std::set<std::int64_t> distinct(all.begin(), all.end());
        if (drop_last) {
          CHECK(per_rank == n / world);
          CHECK(distinct.size() == all.size());  // no repeats
        } else {
          CHECK(per_rank == (n + world - 1) / world);
          CHECK(static_cast<std::int64_t>(distinct.size()) == n);  // every sample seen
        }
        for (auto i : distinct) CHECK((i >= 0 && i < n));
      }
    }
  }
}

TEST_CASE("epochs and seeds change the order; no shuffle keeps it", "[sampler]") {
  CHECK(sample(100, 2, 0, 1, 0, false) != sample(100, 2, 0, 1, 1, false));
  CHECK(sample(100, 2, 0, 1, 0, false) != sample(100, 2, 0, 2, 0, false));
  CHECK(sample(100, 2, 0, 1, 0, false) == sample(100, 2, 0, 1, 0, false));
  CHECK(sample(10, 2, 1, 1, 5, false, false) == Indices{1, 3, 5, 7, 9});
}

TEST_CASE("a world far larger than the data set allocates only the rank's share", "[sampler]") {
  // Padding to per_rank x world is never built: 2e9 ranks of a 10-sample set.
  const Indices all = sample(10, 1, 0, 3, 0, false);
  CHECK(sample(10, 2000000000, 5, 3, 0, false) == Indices{all[5]});
  CHECK(sample(10, 2000000000, 1999999999, 3, 0, false) == Indices{all[1999999999 % 10]});
}
