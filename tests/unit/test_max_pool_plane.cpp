// The CPU's 2 x 2, stride 2 max pooling (eight windows at a time, shared by the
// pooling layer and BatchNorm's fused pooling) against the reference loop for any
// window: the same values and the same positions, bit for bit, on planes full of
// ties (a ReLU's zeros), -0, NaNs and infinities, even and odd sizes, narrower and
// wider than eight windows. Each plane lies in a vector of exactly its size, so
// the sanitizer build catches a read or write past it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "device/cpu_max_pool_plane.hpp"

using mpiddp::cpu::max_pool_plane;
using mpiddp::cpu::max_pool_plane_any;
using mpiddp::cpu::PoolPlane;

namespace {

// Values drawn from a few with many repeats, so windows tie often.
std::vector<float> plane_of(int h, int w, std::mt19937& rng) {
  const float specials[] = {0.0f, -0.0f, 1.0f, 1.0f, 0.5f, -2.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::uniform_int_distribution<int> pick(0, 11);
  std::uniform_real_distribution<float> any(-1.0f, 1.0f);
  std::vector<float> in(static_cast<std::size_t>(h) * w);
  for (float& v : in) {
    const int k = pick(rng);
    v = k < 9 ? specials[k] : any(rng);
  }
  return in;
}

}  // namespace

TEST_CASE("2 x 2 max pooling, eight windows at a time, gives the reference loop's values and positions",
          "[pool]") {
  const unsigned seed = 20261204;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  const int sizes[][2] = {{28, 28}, {14, 14}, {7, 7}, {2, 2}, {3, 3}, {5, 9}, {9, 5}, {4, 34}, {33, 32}, {6, 17}};
  for (const auto& size : sizes)
    for (int trial = 0; trial < 20; ++trial) {
      const int h = size[0], w = size[1];
      INFO(h << " x " << w << ", trial " << trial);
      const PoolPlane p{h, w, 2, 2, h / 2, w / 2};
      REQUIRE(p.two_by_two());
      const std::vector<float> in = plane_of(h, w, rng);
      std::vector<float> out(p.outs(), 7.0f), expected(p.outs(), -7.0f);
      std::vector<std::int32_t> where(p.outs(), -1), expected_where(p.outs(), -2);
      max_pool_plane(in.data(), p, out.data(), where.data());
      max_pool_plane_any(in.data(), w, 2, 2, p.oh, p.ow, expected.data(), expected_where.data());
      CHECK(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)) == 0);
      CHECK(where == expected_where);
    }
}

TEST_CASE("the pooling gradient puts each window's gradient at its maximum", "[pool]") {
  // A 4 x 6 plane whose maxima are known: 2 x 3 windows.
  const std::vector<float> in = {1, 2, 0, 0, 5, 5,  //
                                 3, 0, 0, 9, 5, 5,  //
                                 0, 0, 7, 7, 1, 1,  //
                                 0, 8, 7, 7, 1, 2};
  const PoolPlane p{4, 6, 2, 2, 2, 3};
  std::vector<float> out(p.outs());
  std::vector<std::int32_t> where(p.outs());
  max_pool_plane(in.data(), p, out.data(), where.data());
  CHECK(out == std::vector<float>{3, 9, 5, 8, 7, 2});
  CHECK(where == std::vector<std::int32_t>{6, 9, 4, 19, 14, 23});
  const std::vector<float> dy = {10, 20, 30, 40, 50, 60};
  std::vector<float> d(p.size(), -1.0f);
  mpiddp::cpu::max_pool_plane_grad(dy.data(), where.data(), p, d.data());
  std::vector<float> expected(p.size(), 0.0f);
  for (std::size_t o = 0; o < where.size(); ++o) expected[where[o]] = dy[o];
  CHECK(d == expected);
  // Read with a stride (a block plane of the blocked layout); a -0 lands as the
  // +0 that adding it onto the zeroed plane gives.
  const std::vector<float> spaced = {10, -1, -0.0f, -1, 30, -1, 40, -1, 50, -1, 60, -1};
  mpiddp::cpu::max_pool_plane_grad(spaced.data(), where.data(), p, d.data(), 2);
  expected[where[1]] = 0.0f;
  CHECK(d == expected);
  CHECK_FALSE(std::signbit(d[where[1]]));
  // Overlapping windows (3 x 3 at stride 1 over 3 x 4) add up where they share a maximum.
  const std::vector<float> small = {0, 0, 0, 0,  //
                                    0, 9, 0, 0,  //
                                    0, 0, 0, 0};
  const PoolPlane q{3, 4, 3, 1, 1, 2};
  std::vector<float> pooled(q.outs());
  std::vector<std::int32_t> at(q.outs());
  max_pool_plane(small.data(), q, pooled.data(), at.data());
  CHECK(at == std::vector<std::int32_t>{5, 5});
  const std::vector<float> g = {1.5f, 2.0f};
  std::vector<float> spread(q.size(), -1.0f);
  mpiddp::cpu::max_pool_plane_grad(g.data(), at.data(), q, spread.data());
  CHECK(spread[5] == 3.5f);
}
