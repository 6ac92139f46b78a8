// mpiddp's own thin-convolution kernels (ops/conv/thin_conv.hpp): forward and
// weight gradient against plain loops over shapes that leave every tile partly
// filled (positions not a multiple of 16, output channels not of 4, rows not of
// 5), strides, paddings and accumulated gradients; and every kernel set this CPU
// runs (AVX-512, AVX2+FMA) giving the same bits, so a run does not depend on it
// (on a CPU without AVX-512 there is one set, and that check compares it with itself).
#include <catch2/catch.hpp>
#include <array>
#include <cstring>
#include <vector>

#include "../../src/cli/bench_harness.hpp"
#include "../../src/cli/bench_reference.hpp"
#include "ops/conv/thin_conv.hpp"

using namespace mpiddp;
using mpiddp::cpu::ThinKernels;
using mpiddp::cpu::thin_kernel_sets;

namespace {

struct Outputs {
  std::vector<float> y, params, accumulated;  // params: weight gradient, then bias gradient
};

// On `scratch` (one that served other shapes before), or a fresh one.
Outputs run_set(const ThinKernels& set, const ConvGeometry& g, const std::vector<float>& x,
                const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& dy,
                LayerScratch* reused = nullptr) {
  std::unique_ptr<LayerScratch> fresh;
  if (!reused) fresh = cpu::thin_conv::make_scratch(&set);
  LayerScratch& scratch = reused ? *reused : *fresh;
  Outputs out;
  out.y.assign(dy.size(), -1.0f);
  const std::size_t weights = w.size();
  out.params.assign(weights + b.size(), -1.0f);
  cpu::thin_conv::forward(x.data(), w.data(), b.data(), out.y.data(), g, scratch);
  cpu::thin_conv::backward_params(x.data(), dy.data(), out.params.data(), out.params.data() + weights, g, false,
                                  scratch);
  out.accumulated = out.params;
  cpu::thin_conv::backward_params(x.data(), dy.data(), out.accumulated.data(), out.accumulated.data() + weights, g,
                                  true, scratch);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("thin convolution kernels equal the plain loops, and every kernel set gives the same bits", "[conv]") {
  const std::vector<ThinKernels> sets = thin_kernel_sets();
  if (sets.empty()) {
    WARN("this CPU has no AVX2 and FMA: no thin-convolution kernels to test");
    CHECK_FALSE(cpu::thin_conv::available());
    return;
  }
  CHECK(cpu::thin_conv::available());
  // One scratch per set through every shape: whatever it laid out for the last must not leak into the next.
  std::vector<std::unique_ptr<LayerScratch>> reused;
  for (const ThinKernels& set : sets) reused.push_back(cpu::thin_conv::make_scratch(&set));
  const std::vector<std::array<int, 7>> shapes{// n, c, size, out_c, kernel, stride, padding
                                               {3, 1, 28, 32, 3, 1, 1}, {2, 1, 7, 5, 3, 1, 1},  {4, 3, 9, 6, 3, 2, 1},
                                               {2, 2, 6, 3, 1, 1, 0},   {3, 1, 11, 9, 5, 1, 2}, {2, 3, 8, 1, 3, 1, 0},
                                               {1, 4, 5, 7, 3, 2, 2},   {5, 1, 4, 4, 4, 1, 0}};
  for (const auto& s : shapes) {
    const ConvGeometry g{.n = s[0], .c = s[1], .h = s[2], .w = s[2], .out_c = s[3], .kh = s[4], .kw = s[4],
                         .stride = s[5], .padding = s[6]};
    INFO("n " << s[0] << " c " << s[1] << " size " << s[2] << " out " << s[3] << " kernel " << s[4] << " stride "
              << s[5] << " padding " << s[6]);
    const std::size_t out = static_cast<std::size_t>(g.n) * g.out_c * g.out_h() * g.out_w();
    const auto x = bench::random_values(static_cast<std::size_t>(g.n) * g.c * g.h * g.w, 1);
    const auto w = bench::random_values(static_cast<std::size_t>(g.out_c) * g.c * g.kh * g.kw, 2);
    const auto b = bench::random_values(static_cast<std::size_t>(g.out_c), 3);
    const auto dy = bench::random_values(out, 4);
    const auto want_y = bench::conv_forward(x.data(), w.data(), b.data(), g);
    const auto want_params = bench::conv_params_grad(x.data(), dy.data(), g);
    std::vector<float> want_twice(want_params);
    for (float& v : want_twice) v *= 2.0f;
    const Outputs first = run_set(sets.front(), g, x, w, b, dy);
    // Float sums of that many terms (the plain loops sum in double).
    const double sum_terms = static_cast<double>(g.n) * g.out_h() * g.out_w() + 1.0;
    const double tolerance = 4.0 * sum_terms * 1.2e-7;
    CHECK(bench::count_wrong(first.y.data(), want_y.data(), want_y.size(), 1e-5) == 0);
    CHECK(bench::count_wrong(first.params.data(), want_params.data(), want_params.size(), tolerance) == 0);
    CHECK(bench::count_wrong(first.accumulated.data(), want_twice.data(), want_twice.size(), tolerance) == 0);
    for (std::size_t i = 0; i < sets.size(); ++i) {
      INFO(sets[i].isa << " against " << sets.front().isa);
      for (LayerScratch* scratch : {static_cast<LayerScratch*>(nullptr), reused[i].get()}) {
        const Outputs other = run_set(sets[i], g, x, w, b, dy, scratch);
        CHECK(same_bits(other.y, first.y));
        CHECK(same_bits(other.params, first.params));
        CHECK(same_bits(other.accumulated, first.accumulated));
      }
    }
  }
}

TEST_CASE("thin convolutions take at most 64 rows, and auto gives them 27 on one thread", "[conv]") {
  ConvGeometry g{.n = 1, .c = 1, .h = 28, .w = 28, .out_c = 32, .kh = 3, .kw = 3};
  const bool here = cpu::thin_conv::available();
  CHECK(cpu::thin_conv::suits(g, 1) == here);
  CHECK_FALSE(cpu::thin_conv::suits(g, 2));
  g.c = 3;
  CHECK(cpu::thin_conv::suits(g, 1) == here);  // 27 rows: an RGB image's 3x3 kernel
  g.c = 4;
  CHECK_FALSE(cpu::thin_conv::suits(g, 1));
  g.c = 1;
  g.kh = g.kw = 7;
  CHECK_FALSE(cpu::thin_conv::suits(g, 1));
  CHECK(cpu::thin_conv::supports(g) == here);  // 49 rows: `own` takes it
  g.kh = g.kw = 8;
  CHECK(cpu::thin_conv::supports(g) == here);  // 64
  g.kh = g.kw = 9;
  CHECK_FALSE(cpu::thin_conv::supports(g));  // 81
}
