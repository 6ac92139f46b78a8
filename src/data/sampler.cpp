#include "mpiddp/data/sampler.hpp"

#include <algorithm>
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

namespace {

void check_options(const SamplerOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world) throw std::invalid_argument("sampler: rank outside world");
  if (o.size < 1) throw std::invalid_argument("sampler: empty dataset");
}

// The epoch's global order before padding or truncation.
std::vector<std::int64_t> epoch_permutation(const SamplerOptions& o) {
  if (o.shuffle) return torch_randperm(o.size, o.seed + o.epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(o.size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

}  // namespace

std::vector<std::int64_t> distributed_sampler_indices(const SamplerOptions& o) {
  check_options(o);
  const std::vector<std::int64_t> order = epoch_permutation(o);
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

std::int64_t epoch_order_length(std::int64_t size, int world, bool drop_last) {
  return drop_last ? samples_per_rank(size, world, true) * world : size;
}

std::int64_t remaining_per_rank(std::int64_t length, std::int64_t done, int world) {
  if (world < 1 || done < 0 || done > length) throw std::invalid_argument("sampler: position outside the epoch");
  return (length - done + world - 1) / world;
}

std::int64_t samples_consumed(std::int64_t length, int world, std::int64_t per_step, std::int64_t steps) {
  const std::int64_t share = remaining_per_rank(length, 0, world);
  // Compared by division first: a damaged step count must not overflow.
  const std::int64_t taken = steps >= (share + per_step - 1) / per_step ? share : steps * per_step;
  return std::min(length, taken * world);
}

RemainingShare remaining_share(const SamplerOptions& o, std::int64_t length, std::int64_t done) {
  check_options(o);
  if (length < 1 || length > o.size) throw std::invalid_argument("sampler: epoch length outside the data set");
  const std::int64_t count = remaining_per_rank(length, done, o.world);
  const std::vector<std::int64_t> order = epoch_permutation(o);
  RemainingShare share;
  share.indices.reserve(static_cast<std::size_t>(count));
  for (std::int64_t k = 0, p = done + o.rank; k < count; ++k, p += o.world) {
    share.indices.push_back(order[static_cast<std::size_t>(p % length)]);
    if (p < length) ++share.real;
  }
  return share;
}

}  // namespace mpiddp
