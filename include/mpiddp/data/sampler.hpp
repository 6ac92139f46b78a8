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

}  // namespace mpiddp
