// `mpiddp bench conv`: the CPU convolution (the library of --kernels, or
// mpiddp's own kernels) on one layer's shapes, each of its three products
// timed alone. scripts/bench-conv.sh puts it
// next to oneDNN's convolution (as PyTorch calls it) on the same shapes.
#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "bench_reference.hpp"

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/device/cpu_blas.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "ops/conv/conv_ops.hpp"
#include "ops/conv/onednn_conv.hpp"
#include "ops/conv/own_winograd.hpp"
#include "ops/conv/thin_conv.hpp"

namespace po = boost::program_options;

namespace mpiddp {
namespace {

// Each product of the convolution on `g` against the plain loops, from the
// same random operands. Counts the values checked in `checked`.
std::size_t check_conv(ConvOps& conv, const ConvGeometry& g, std::size_t& checked) {
  const std::size_t in = static_cast<std::size_t>(g.n) * g.c * g.h * g.w;
  const std::size_t out = static_cast<std::size_t>(g.n) * g.out_c * g.out_h() * g.out_w();
  const std::size_t weights = static_cast<std::size_t>(g.out_c) * g.c * g.kh * g.kw;
  const auto x = bench::random_values(in, 11), w = bench::random_values(weights, 12), b = bench::random_values(g.out_c, 13);
  const auto dy = bench::random_values(out, 14);
  std::vector<float> y(out), dx(in), params(weights + g.out_c);
  auto scratch = conv.make_scratch();
  conv.conv_forward(x.data(), w.data(), b.data(), y.data(), g, scratch.get());
  conv.conv_backward_params(x.data(), dy.data(), params.data(), params.data() + weights, g, false, scratch.get());
  conv.conv_backward_input(dy.data(), w.data(), dx.data(), g, scratch.get());
  const double terms = std::max<double>(static_cast<double>(g.c) * g.kh * g.kw, static_cast<double>(g.n) * g.out_h() * g.out_w());
  const double tolerance = 4.0 * (terms + 1.0) * 1.2e-7;  // float sums of that many terms
  const auto want_y = bench::conv_forward(x.data(), w.data(), b.data(), g);
  const auto want_params = bench::conv_params_grad(x.data(), dy.data(), g);
  const auto want_dx = bench::conv_input_grad(dy.data(), w.data(), g);
  checked = want_y.size() + want_params.size() + want_dx.size();
  return bench::count_wrong(y.data(), want_y.data(), y.size(), tolerance) +
         bench::count_wrong(params.data(), want_params.data(), params.size(), tolerance) +
         bench::count_wrong(dx.data(), want_dx.data(), dx.size(), tolerance);
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
  std::string kernels = "auto";
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
      ("kernels", po::value(&kernels)->default_value(kernels), "auto, onednn, openblas, own, winograd, winograd_all, own_winograd or own_winograd4 (train.cpu_kernels)")
      ("seconds", po::value(&seconds)->default_value(seconds), "measuring time per product");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  g.w = g.h;
  g.kw = g.kh;
  if (g.n < 1 || g.c < 1 || g.h < 1 || g.out_c < 1 || g.kh < 1 || g.stride < 1 || g.padding < 0 ||
      g.kh > g.h + 2 * g.padding || g.n > 65536 || g.c > 65536 || g.h > 65536 || g.out_c > 65536)
    throw InputError("bench conv: sizes must be positive (padding >= 0), the kernel at most the padded input");
  bench::check_seconds(seconds);
  // Input, output (twice each, with their gradients) and the im2col columns, in
  // floats, counted in double so absurd sizes cannot wrap around.
  const double floats = 2.0 * g.n * g.c * g.h * g.w + 3.0 * g.n * g.out_c * g.out_h() * g.out_w() +
                        2.0 * g.c * g.kh * g.kw * g.n * g.out_h() * g.out_w();
  if (floats * 4.0 > 16.0 * (1u << 30))
    throw InputError("bench conv: these sizes need about " + std::to_string(static_cast<long long>(floats * 4.0 / (1u << 30))) +
                     " GiB; at most 16 GiB");
  cpu::set_blas_threads(threads);
  // The input-file parser checks the name.
  const CpuKernels choice =
      load_config("", {"--data.train", "x", "--train.cpu_kernels", kernels}).train.cpu_kernels;
  cpu::use_gemm_library(choice);
  const cpu::LibraryScope layer_choice(choice);  // own and winograd(_all) are a layer's choices
  // own (winograd) runs a shape the own kernels (Winograd's) do not take on the
  // library; winograd_all, a shape without Winograd's weight gradient as winograd.
  const bool wino = choice == CpuKernels::winograd || choice == CpuKernels::winograd_all;
  const CpuKernels method =
      (choice == CpuKernels::own && cpu::thin_conv::supports(g)) ? choice
      : (choice == CpuKernels::winograd_all && cpu::onednn_conv::winograd_available(g, true)) ? choice
      : (wino && cpu::onednn_conv::winograd_available(g)) ? CpuKernels::winograd
      : ((choice == CpuKernels::own_winograd || choice == CpuKernels::own_winograd4) && cpu::own_winograd::supports(g)) ? choice
                                                            : cpu::gemm_library();

  const std::size_t in = static_cast<std::size_t>(g.n) * g.c * g.h * g.w;
  const std::size_t out = static_cast<std::size_t>(g.n) * g.out_c * g.out_h() * g.out_w();
  const std::size_t weights = static_cast<std::size_t>(g.out_c) * g.c * g.kh * g.kw;
  std::vector<float> x = bench::random_values(in, 1), w = bench::random_values(weights, 2),
                     b = bench::random_values(g.out_c, 3);
  std::vector<float> y(out), dy = bench::random_values(out, 4), dx(in), dw(weights), db(g.out_c);
  ConvOps& conv = cpu_device().ops<ConvOps>();
  auto scratch = conv.make_scratch();
  // Each product on its own: backward would otherwise reuse what forward kept.
  const bench::Times forward =
      bench::time_calls([&] { conv.conv_forward(x.data(), w.data(), b.data(), y.data(), g, scratch.get()); }, seconds);
  const bench::Times weight_grad = bench::time_calls([&] {
    conv.conv_backward_params(x.data(), dy.data(), dw.data(), db.data(), g, false, scratch.get());
  }, seconds);
  const bench::Times input_grad =
      bench::time_calls([&] { conv.conv_backward_input(dy.data(), w.data(), dx.data(), g, scratch.get()); }, seconds);
  // The check runs the same code on at most 4 samples (the plain loops are slow).
  ConvGeometry small = g;
  small.n = std::min(g.n, 4);
  std::size_t checked = 0;
  const std::size_t wrong = check_conv(conv, small, checked);
  const double flops = 2.0 * static_cast<double>(out) * g.c * g.kh * g.kw;
  char shape[200];
  std::snprintf(shape, sizeof(shape), "conv %s batch %d in %dx%dx%d out %d kernel %d stride %d padding %d threads %d",
                cpu::convolution_method(method), g.n, g.c, g.h, g.w, g.out_c, g.kh, g.stride, g.padding,
                threads);
  bench::print_line(std::string(shape) + " forward", forward, flops, wrong, checked);
  bench::print_line(std::string(shape) + " weight-grad", weight_grad, flops, wrong, checked);
  bench::print_line(std::string(shape) + " input-grad", input_grad, flops, wrong, checked);
  std::printf("%s: forward %.3f ms (%.1f GFLOP/s) weight-grad %.3f ms (%.1f GFLOP/s) input-grad %.3f ms (%.1f GFLOP/s)\n",
              shape, forward.median_s * 1e3, flops / forward.median_s / 1e9, weight_grad.median_s * 1e3,
              flops / weight_grad.median_s / 1e9, input_grad.median_s * 1e3, flops / input_grad.median_s / 1e9);
  bench::require_right("bench conv", wrong, checked);
  return kExitOk;
}

}  // namespace mpiddp
