// `mpiddp bench conv`: the CPU convolution (im2col + OpenBLAS) on one layer's
// shapes, each of its three products timed alone. scripts/bench-conv.sh puts it
// next to oneDNN's convolution (as PyTorch calls it) on the same shapes.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <functional>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/random.hpp"
#include "mpiddp/device/cpu_blas.hpp"
#include "mpiddp/device/ops/conv_ops.hpp"

namespace po = boost::program_options;

namespace mpiddp {
namespace {

// Seconds per call of `work`, repeated for at least `seconds` after a warm-up.
double time_per_call(const std::function<void()>& work, double seconds) {
  for (int i = 0; i < 3; ++i) work();
  const auto start = std::chrono::steady_clock::now();
  long calls = 0;
  double elapsed = 0.0;
  while (elapsed < seconds) {
    work();
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed / static_cast<double>(calls);
}

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  CounterRng rng(seed);
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = 2.0f * rng.uniform(i) - 1.0f;
  return v;
}

}  // namespace

int command_bench_conv(const std::vector<std::string>& args) {
  ConvGeometry g;
  g.n = 64;
  g.c = 32;
  g.h = g.w = 14;
  g.out_c = 64;
  g.kh = g.kw = 3;
  g.padding = 1;
  int threads = 1;
  double seconds = 1.0;
  po::options_description options("mpiddp bench conv");
  options.add_options()("help,h", "show this help")
      ("batch", po::value(&g.n)->default_value(g.n), "samples")
      ("channels", po::value(&g.c)->default_value(g.c), "input channels")
      ("size", po::value(&g.h)->default_value(g.h), "input height = width")
      ("out", po::value(&g.out_c)->default_value(g.out_c), "output channels")
      ("kernel", po::value(&g.kh)->default_value(g.kh), "kernel size")
      ("stride", po::value(&g.stride)->default_value(g.stride), "stride")
      ("padding", po::value(&g.padding)->default_value(g.padding), "padding")
      ("threads", po::value(&threads)->default_value(threads), "BLAS threads")
      ("seconds", po::value(&seconds)->default_value(seconds), "measuring time per product");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  g.w = g.h;
  g.kw = g.kh;
  if (g.n < 1 || g.c < 1 || g.h < 1 || g.out_c < 1 || g.kh < 1 || g.stride < 1 || g.padding < 0 ||
      g.kh > g.h + 2 * g.padding || g.n > 65536 || g.c > 65536 || g.h > 65536 || g.out_c > 65536)
    throw InputError("bench conv: sizes must be positive (padding >= 0), the kernel at most the padded input");
  if (!(seconds > 0.0 && seconds <= 3600.0)) throw InputError("--seconds must be in (0, 3600]");
  // Input, output (twice each, with their gradients) and the im2col columns, in
  // floats, counted in double so absurd sizes cannot wrap around.
  const double floats = 2.0 * g.n * g.c * g.h * g.w + 3.0 * g.n * g.out_c * g.out_h() * g.out_w() +
                        2.0 * g.c * g.kh * g.kw * g.n * g.out_h() * g.out_w();
  if (floats * 4.0 > 16.0 * (1u << 30))
    throw InputError("bench conv: these sizes need about " + std::to_string(static_cast<long long>(floats * 4.0 / (1u << 30))) +
                     " GiB; at most 16 GiB");
  cpu::set_blas_threads(threads);

  const std::size_t in = static_cast<std::size_t>(g.n) * g.c * g.h * g.w;
  const std::size_t out = static_cast<std::size_t>(g.n) * g.out_c * g.out_h() * g.out_w();
  const std::size_t weights = static_cast<std::size_t>(g.out_c) * g.c * g.kh * g.kw;
  std::vector<float> x = random_values(in, 1), w = random_values(weights, 2), b = random_values(g.out_c, 3);
  std::vector<float> y(out), dy = random_values(out, 4), dx(in), dw(weights), db(g.out_c);
  ConvOps& conv = cpu_device().ops<ConvOps>();
  auto scratch = conv.make_scratch();
  // Each product on its own: backward would otherwise reuse what forward kept.
  const double forward = time_per_call([&] { conv.conv_forward(x.data(), w.data(), b.data(), y.data(), g, scratch.get()); }, seconds);
  const double weight_grad = time_per_call([&] {
    conv.conv_forward(x.data(), w.data(), b.data(), y.data(), g, scratch.get());
    conv.conv_backward_params(x.data(), dy.data(), dw.data(), db.data(), g, false, scratch.get());
  }, seconds) - forward;
  const double input_grad = time_per_call([&] {
    conv.conv_backward_input(dy.data(), w.data(), dx.data(), g, scratch.get());
  }, seconds);
  const double flops = 2.0 * static_cast<double>(out) * g.c * g.kh * g.kw;
  std::printf("conv im2col+openblas batch %d in %dx%dx%d out %d kernel %d stride %d padding %d threads %d: "
              "forward %.3f ms (%.1f GFLOP/s) weight-grad %.3f ms (%.1f GFLOP/s) input-grad %.3f ms (%.1f GFLOP/s)\n",
              g.n, g.c, g.h, g.w, g.out_c, g.kh, g.stride, g.padding, threads, forward * 1e3, flops / forward / 1e9,
              weight_grad * 1e3, flops / weight_grad / 1e9, input_grad * 1e3, flops / input_grad / 1e9);
  return kExitOk;
}

}  // namespace mpiddp
