// DistributedSampler: orders recorded from PyTorch 1.13 (torch.utils.data
// .distributed.DistributedSampler) plus properties that must hold for any input.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
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

// ---- elastic resume: the rest of an epoch split over another world ----
namespace {
SamplerOptions options(std::int64_t n, int world, int rank, bool shuffle = true) {
  SamplerOptions o;
  o.size = n;
  o.world = world;
  o.rank = rank;
  o.seed = 3;
  o.epoch = 2;
  o.shuffle = shuffle;
  return o;
}
}  // namespace

TEST_CASE("the rest of an epoch from its start is DistributedSampler's share", "[sampler][elastic]") {
  for (std::int64_t n : {1, 2, 7, 100, 101}) {
    for (int world : {1, 2, 3, 4, 7}) {
      for (bool drop_last : {false, true}) {
        const std::int64_t length = epoch_order_length(n, world, drop_last);
        if (length == 0) continue;  // drop_last with fewer samples than ranks: refused at start-up
        for (int r = 0; r < world; ++r) {
          const RemainingShare share = remaining_share(options(n, world, r), length, 0);
          CHECK(share.indices == sample(n, world, r, 3, 2, drop_last));
          // Padding: the positions at or past the data set's end (none with drop_last).
          const std::int64_t padded = share.indices.size() * world;
          CHECK(share.real == static_cast<std::int64_t>(share.indices.size()) - (r >= world - (padded - length)));
        }
      }
    }
  }
  CHECK(epoch_order_length(11, 4, true) == 8);
  CHECK(epoch_order_length(10, 3, true) == 9);
  CHECK(epoch_order_length(12, 4, true) == 12);
  CHECK(epoch_order_length(11, 4, false) == 11);
}

TEST_CASE("a resume at the same world size continues every rank's share exactly", "[sampler][elastic]") {
  for (std::int64_t n : {7, 100, 101}) {
    for (int world : {1, 3, 4}) {
      for (bool drop_last : {false, true}) {
        const std::int64_t length = epoch_order_length(n, world, drop_last);
        const std::int64_t per_rank = samples_per_rank(n, world, drop_last);
        for (std::int64_t c = 0; c <= per_rank; ++c) {
          const std::int64_t done = std::min(length, c * world);
          for (int r = 0; r < world; ++r) {
            const Indices whole = sample(n, world, r, 3, 2, drop_last);
            const RemainingShare rest = remaining_share(options(n, world, r), length, done);
            CHECK(rest.indices == Indices(whole.begin() + c, whole.end()));
          }
        }
      }
    }
  }
}

// Steps of c entries per rank at world `from`, the rest at world `to`: every
// sample of the epoch exactly once, padding only at the end, every rank alike.
TEST_CASE("the rest of an epoch at another world size: each sample once", "[sampler][elastic]") {
  for (std::int64_t n : {1, 2, 7, 100, 101, 1001}) {
    for (int from : {1, 2, 3, 4}) {
      for (int to : {1, 2, 3, 4, 5}) {
        for (bool drop_last : {false, true}) {
          for (bool shuffle : {true, false}) {
            const std::int64_t length = epoch_order_length(n, from, drop_last);
            if (length == 0) continue;
            const std::int64_t per_rank = samples_per_rank(n, from, drop_last);
            for (std::int64_t c : {std::int64_t{0}, std::int64_t{1}, per_rank / 2, per_rank - 1}) {
              if (c < 0 || c >= per_rank) continue;
              const std::int64_t done = c * from;  // unfinished epoch: within the epoch's samples
              REQUIRE(done < length);
              std::multiset<std::int64_t> seen;
              for (int r = 0; r < from; ++r) {
                const Indices whole = remaining_share(options(n, from, r, shuffle), length, 0).indices;
                seen.insert(whole.begin(), whole.begin() + c);
              }
              std::int64_t padding = 0;
              const std::int64_t count = remaining_per_rank(length, done, to);
              for (int r = 0; r < to; ++r) {
                const RemainingShare rest = remaining_share(options(n, to, r, shuffle), length, done);
                REQUIRE(static_cast<std::int64_t>(rest.indices.size()) == count);
                seen.insert(rest.indices.begin(), rest.indices.begin() + rest.real);
                padding += count - rest.real;
              }
              // The epoch's samples: the first `length` entries of its order.
              const Indices epoch = remaining_share(options(n, 1, 0, shuffle), length, 0).indices;
              CHECK(std::multiset<std::int64_t>(epoch.begin(), epoch.end()) == seen);
              CHECK(static_cast<std::int64_t>(seen.size()) == length);
              CHECK(padding == count * to - (length - done));
              CHECK(padding < to);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("the rest of an epoch, by hand", "[sampler][elastic]") {
  // 10 samples, world 3: order O = randperm(10, seed 3 + epoch 2); after 2 entries
  // per rank the global prefix O[0..5] is done; world 2 reads O[6], O[8] and O[7],
  // O[9]; world 5 reads O[6..9] and pads its fifth rank with O[0].
  const Indices order = torch_randperm(10, 5);
  CHECK(remaining_share(options(10, 2, 0), 10, 6).indices == Indices{order[6], order[8]});
  CHECK(remaining_share(options(10, 2, 1), 10, 6).indices == Indices{order[7], order[9]});
  const RemainingShare last = remaining_share(options(10, 5, 4), 10, 6);
  CHECK(last.indices == Indices{order[0]});
  CHECK(last.real == 0);
  CHECK(remaining_share(options(10, 5, 3), 10, 6).real == 1);
  // Fewer samples left than ranks, tiny data set: 2 samples, 1 done, 4 ranks.
  const Indices two = torch_randperm(2, 5);
  for (int r = 0; r < 4; ++r) {
    const RemainingShare share = remaining_share(options(2, 4, r), 2, 1);
    CHECK(share.indices == Indices{two[(1 + r) % 2]});
    CHECK(share.real == (r == 0 ? 1 : 0));
  }
  // drop_last, 11 samples at world 4: the epoch is O[0..7]; after 1 per rank, 4 left for world 3:
  // 2 each, O[4], O[7] / O[5], O[0] (padding) / O[6], O[1] (padding) -- the dropped O[8..10] never.
  const Indices eleven = torch_randperm(11, 5);
  CHECK(remaining_share(options(11, 3, 0), 8, 4).indices == Indices{eleven[4], eleven[7]});
  CHECK(remaining_share(options(11, 3, 1), 8, 4).indices == Indices{eleven[5], eleven[0]});
  CHECK(remaining_share(options(11, 3, 2), 8, 4).real == 1);
  // The epoch is over: nothing left.
  CHECK(remaining_share(options(10, 3, 0), 10, 10).indices.empty());
  CHECK(remaining_per_rank(10, 10, 3) == 0);
}

TEST_CASE("samples consumed by a run that kept its world size", "[sampler][elastic]") {
  // 101 samples, world 4: 26 per rank (104 with padding); steps of 8 per rank.
  CHECK(samples_consumed(101, 4, 8, 0) == 0);
  CHECK(samples_consumed(101, 4, 8, 1) == 32);
  CHECK(samples_consumed(101, 4, 8, 3) == 96);
  CHECK(samples_consumed(101, 4, 8, 4) == 101);  // the last step: the rest, padding aside
  CHECK(samples_consumed(101, 4, 8, INT64_MAX) == 101);
  CHECK(samples_consumed(100, 4, 8, 4) == 100);  // drop_last 4 x 25 (or no padding at all)
  CHECK_THROWS(remaining_share(options(10, 2, 0), 11, 0));  // longer than the data set
  CHECK_THROWS(remaining_per_rank(10, 11, 2));
}
