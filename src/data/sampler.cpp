#include "mpiddp/data/sampler.hpp"

#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>

namespace mpiddp {

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  // PyTorch's CPU generator is MT19937 keyed by the low 32 bits of the seed, and
  // its randperm is a forward Fisher-Yates drawing one 32-bit word per position.
  std::mt19937 engine(static_cast<std::uint32_t>(seed & 0xffffffffULL));
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const std::int64_t z = static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(n - i));
    std::swap(perm[i], perm[i + z]);
  }
  return perm;
}

std::int64_t samples_per_rank(std::int64_t size, int world, bool drop_last) {
  if (drop_last && size % world != 0) return (size - world + world - 1) / world;  // ceil((N - W) / W)
  return (size + world - 1) / world;
}

std::vector<std::int64_t> distributed_sampler_indices(const SamplerOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world) throw std::invalid_argument("sampler: rank outside world");
  if (o.size < 1) throw std::invalid_argument("sampler: empty dataset");
  std::vector<std::int64_t> order;
  if (o.shuffle) {
    order = torch_randperm(o.size, o.seed + o.epoch);
  } else {
    order.resize(static_cast<std::size_t>(o.size));
    std::iota(order.begin(), order.end(), std::int64_t{0});
  }
  const std::int64_t per_rank = samples_per_rank(o.size, o.world, o.drop_last);
  // PyTorch pads the order to per_rank x world by cycling from the front (the data
  // set may be smaller than the padding): position i of the padded order is
  // order[i mod size], so the padding is never built (a huge world would size it).
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank));
  for (std::int64_t k = 0, i = o.rank; k < per_rank; ++k, i += o.world)
    mine.push_back(order[static_cast<std::size_t>(i % o.size)]);
  return mine;
}

}  // namespace mpiddp
