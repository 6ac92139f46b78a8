#pragma once
// PyTorch's torch.utils.data.DistributedSampler, reproduced bit for bit:
// randperm(N) from an MT19937 seeded with (seed + epoch), padded by repeating
// from the front (or truncated with drop_last), then every world-th index
// starting at rank.
#include <cstdint>
#include <vector>

namespace mpiddp {

struct SamplerOptions {
  std::int64_t size = 0;
  int world = 1;
  int rank = 0;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  bool shuffle = true;
  bool drop_last = false;
};

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU.
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);

// Samples per rank (DistributedSampler.num_samples).
std::int64_t samples_per_rank(std::int64_t size, int world, bool drop_last);

// The indices `rank` visits in `epoch`, in order.
std::vector<std::int64_t> distributed_sampler_indices(const SamplerOptions& options);

// Elastic resume. An epoch's global order is the permutation (or 0..N-1) of
// `options`; its first `length` entries are the epoch's samples (all N, or with
// drop_last the multiple of the world that PyTorch keeps). Rank r of a world of
// W reads the padded order interleaved, positions r, r+W, r+2W, ...; after
// steps that consumed c entries on every rank, the ranks together consumed the
// global prefix of c x W positions. The rest of the epoch, positions
// [done, length), is split over a new world the same way: rank r reads
// positions done+r, done+r+W, ... while below done + W x ceil((length-done)/W),
// and a position p >= length is padding that reads entry (p mod length): the
// front of the epoch's order, as DistributedSampler pads. With done = 0 this is
// exactly distributed_sampler_indices.

// The epoch's samples, padding aside, at world `world`.
std::int64_t epoch_order_length(std::int64_t size, int world, bool drop_last);

// The samples of the epoch's order (prefix length, at most `length`) that steps
// taking `per_step` entries of every rank's share consumed, `steps` of them, at
// world `world` from position 0 (a run that kept its world size).
std::int64_t samples_consumed(std::int64_t length, int world, std::int64_t per_step, std::int64_t steps);

// One rank's part of the rest of an epoch.
struct RemainingShare {
  std::vector<std::int64_t> indices;  // in reading order
  std::int64_t real = 0;              // the first `real` are samples of the epoch; the rest padding
};

// options.world and options.rank: the world that reads the rest; `done` <= `length`.
RemainingShare remaining_share(const SamplerOptions& options, std::int64_t length, std::int64_t done);

// Entries every rank reads of the rest of the epoch (the same on every rank).
std::int64_t remaining_per_rank(std::int64_t length, std::int64_t done, int world);

}  // namespace mpiddp
