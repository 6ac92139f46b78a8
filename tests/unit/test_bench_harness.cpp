// The bench harness (src/cli/bench_harness.hpp): its reference loops agree with
// the CPU kernels the benches time, and its check finds a wrong value, so a
// `wrong 0` in a bench's report means something.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "../../src/cli/bench_harness.hpp"
#include "../../src/cli/bench_reference.hpp"
#include "mpiddp/device/cpu_blas.hpp"
#include "mpiddp/device/cpu_device.hpp"

using namespace mpiddp;

TEST_CASE("bench harness: count_wrong finds changed, NaN and out-of-tolerance values", "[bench]") {
  const std::vector<float> want = {1.0f, -2.0f, 100.0f, 0.0f};
  std::vector<float> got = want;
  CHECK(bench::count_wrong(got.data(), want.data(), want.size(), 1e-6) == 0);
  got[1] = -2.001f;
  got[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(bench::count_wrong(got.data(), want.data(), want.size(), 1e-6) == 2);
  CHECK(bench::count_wrong(got.data(), want.data(), want.size(), 1e-3) == 1);  // the NaN stays wrong
}

TEST_CASE("bench harness: the linear reference loops agree with OpenBLAS", "[bench]") {
  const int n = 5, in = 7, out = 3;
  const auto x = bench::random_values(n * in, 1), w = bench::random_values(out * in, 2), b = bench::random_values(out, 3);
  const auto dy = bench::random_values(n * out, 4);
  std::vector<float> y(n * out), dw(out * in), db(out), dx(n * in);
  cpu::linear_forward(x.data(), w.data(), b.data(), y.data(), n, in, out);
  cpu::linear_backward_params(x.data(), dy.data(), dw.data(), db.data(), n, in, out, false);
  cpu::linear_backward_input(dy.data(), w.data(), dx.data(), n, in, out);
  CHECK(bench::count_wrong(y.data(), bench::linear_forward(x.data(), w.data(), b.data(), n, in, out).data(), y.size(), 1e-5) == 0);
  std::vector<float> params(dw);
  params.insert(params.end(), db.begin(), db.end());
  CHECK(bench::count_wrong(params.data(), bench::linear_params_grad(x.data(), dy.data(), n, in, out).data(), params.size(),
                           1e-5) == 0);
  CHECK(bench::count_wrong(dx.data(), bench::linear_input_grad(dy.data(), w.data(), n, in, out).data(), dx.size(), 1e-5) == 0);
  // A transposed weight is caught.
  std::vector<float> wt(out * in);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) wt[i * out + o] = w[o * in + i];
  CHECK(bench::count_wrong(y.data(), bench::linear_forward(x.data(), wt.data(), b.data(), n, in, out).data(), y.size(), 1e-5) > 0);
}

TEST_CASE("bench harness: the convolution reference loops agree with the CPU convolution", "[bench]") {
  ConvGeometry g;
  g.n = 2;
  g.c = 3;
  g.h = g.w = 6;
  g.out_c = 4;
  g.kh = g.kw = 3;
  g.stride = 2;
  g.padding = 1;
  const std::size_t in = 2 * 3 * 36, out = static_cast<std::size_t>(2) * 4 * g.out_h() * g.out_w(), weights = 4 * 3 * 9;
  const auto x = bench::random_values(in, 5), w = bench::random_values(weights, 6), b = bench::random_values(4, 7);
  const auto dy = bench::random_values(out, 8);
  std::vector<float> y(out), params(weights + 4), dx(in);
  ConvOps& conv = cpu_device().ops<ConvOps>();
  auto scratch = conv.make_scratch();
  conv.conv_forward(x.data(), w.data(), b.data(), y.data(), g, scratch.get());
  conv.conv_backward_params(x.data(), dy.data(), params.data(), params.data() + weights, g, false, scratch.get());
  conv.conv_backward_input(dy.data(), w.data(), dx.data(), g, scratch.get());
  CHECK(bench::count_wrong(y.data(), bench::conv_forward(x.data(), w.data(), b.data(), g).data(), out, 1e-5) == 0);
  CHECK(bench::count_wrong(params.data(), bench::conv_params_grad(x.data(), dy.data(), g).data(), params.size(), 1e-5) == 0);
  CHECK(bench::count_wrong(dx.data(), bench::conv_input_grad(dy.data(), w.data(), g).data(), in, 1e-5) == 0);
}

TEST_CASE("bench harness: time_calls reports ordered statistics over at least 3 calls", "[bench]") {
  int calls = 0;
  const bench::Times t = bench::time_calls([&] { ++calls; }, 0.0, 2);
  CHECK(t.repetitions >= 3);
  CHECK(calls == t.repetitions + 2);
  CHECK(t.min_s <= t.median_s);
  CHECK(t.median_s <= t.max_s);
}
