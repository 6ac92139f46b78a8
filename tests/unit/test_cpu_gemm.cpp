// The CPU's matrix products on each library this build has (train.cpu_kernels):
// every transpose and leading dimension against a double-precision product, and
// whole layers (convolution, residual, dense on {T, D}, causal attention) giving
// the same forward and gradients on each library; the convolution ops (oneDNN's
// primitives or im2col + OpenBLAS) against plain loops, over shapes, batch sizes
// that alternate, accumulated gradients and buffers reused with new values.
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <regex>
#include <utility>
#include <vector>

#include "../../src/cli/bench_harness.hpp"
#include "../../src/cli/bench_reference.hpp"
#include "layer_test_util.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cpu_device.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/kernel_choices.hpp"
#include "ops/conv/conv_ops.hpp"
#include "ops/conv/onednn_conv.hpp"
#include "ops/conv/thin_conv.hpp"

using namespace mpiddp;

namespace {

std::vector<CpuKernels> libraries() {
  std::vector<CpuKernels> all{CpuKernels::openblas};
  if (cpu::onednn_linked()) all.push_back(CpuKernels::onednn);
  return all;
}

// Restores the process-wide choice when a test section ends.
struct LibraryGuard {
  CpuKernels saved = cpu::gemm_library();
  ~LibraryGuard() { cpu::use_gemm_library(saved); }
};

std::vector<float> seeded(std::size_t n, std::uint64_t seed) {
  CounterRng rng(seed);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 2.0f * rng.uniform(i) - 1.0f;
  return v;
}

struct Run {
  Matrix output{0, 0};
  std::vector<float> grads;
  Matrix input_grad{0, 0};
};

// One forward and backward of `layers` on `input`, with the products on `library`
// (and each layer with products of its own on `own`, when not automatic).
Run run_on(CpuKernels library, const std::string& layers, const Shape& input, std::size_t classes,
           CpuKernels own = CpuKernels::automatic) {
  LibraryGuard guard;
  cpu::use_gemm_library(library);
  // Straight from the layer list: build_model would read a 2-D sample as one image channel.
  auto model = std::make_unique<Sequential>(build_layers(layers, classes, false), input, 5);
  model->visit_layers([&](const std::string&, Layer& layer, const Shape&) {
    if (layer.has_own_products()) layer.set_cpu_kernels(own);
  });
  test::randomize_parameters(*model, 9);
  const Matrix x = test::random_matrix(4, element_count(input), 3);
  ForwardContext ctx;
  const Matrix& y = model->forward(x, ctx);
  Run run;
  run.output = Matrix(y.rows(), y.cols());
  std::copy(y.data(), y.data() + y.size(), run.output.data());
  const Matrix dy = test::random_matrix(y.rows(), y.cols(), 4);
  model->backward(dy, false, nullptr, &run.input_grad);
  run.grads.assign(model->parameters().grads(), model->parameters().grads() + model->parameters().total());
  return run;
}

bool same_matrix(const Matrix& a, const Matrix& b) {
  return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
}
// Output, parameter gradients and input gradient, bit for bit.
bool same_bits(const Run& a, const Run& b) {
  return same_matrix(a.output, b.output) && a.grads == b.grads && same_matrix(a.input_grad, b.input_grad);
}

double relative_difference(const float* a, const float* b, std::size_t n) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace

TEST_CASE("sgemm: every transpose, leading dimension, alpha and beta, on each library", "[gemm]") {
  const int m = 37, n = 29, k = 53, pad = 3;
  for (const CpuKernels library : libraries()) {
    LibraryGuard guard;
    cpu::use_gemm_library(library);
    CHECK(cpu::gemm_library() == library);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
          const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
          const auto a = seeded(static_cast<std::size_t>(ta ? k : m) * lda, 1);
          const auto b = seeded(static_cast<std::size_t>(tb ? n : k) * ldb, 2);
          auto c = seeded(static_cast<std::size_t>(m) * ldc, 3);
          const auto c0 = c;
          cpu::sgemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          double worst = 0;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              double sum = 0;
              for (int p = 0; p < k; ++p)
                sum += static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
              const double expected = 0.5 * sum + beta * c0[i * ldc + j];
              worst = std::max(worst, std::abs(expected - c[i * ldc + j]));
            }
          INFO(name_of(library) << " trans_a " << ta << " trans_b " << tb << " beta " << beta);
          CHECK(worst < 1e-4);
          for (int i = 0; i < m; ++i)  // the padding of C is never written
            for (int j = n; j < ldc; ++j) REQUIRE(c[i * ldc + j] == c0[i * ldc + j]);
        }
  }
}

TEST_CASE("train.cpu_kernels = auto is oneDNN exactly where this build links it", "[gemm]") {
  LibraryGuard guard;
  cpu::use_gemm_library(CpuKernels::automatic);
  CHECK(cpu::gemm_library() == (cpu::onednn_linked() ? CpuKernels::onednn : CpuKernels::openblas));
  if (!cpu::onednn_linked())
    CHECK_THROWS_WITH(cpu::use_gemm_library(CpuKernels::onednn), Catch::Contains("built without oneDNN"));
}

TEST_CASE("layers give the same forward and gradients on each library", "[gemm]") {
  struct Case {
    std::string layers;
    Shape input;
  };
  const std::vector<Case> cases{
      {"conv2d(6,3,padding=1) relu residual(conv2d(6,3,padding=1) batchnorm2d relu conv2d(6,3,padding=1)) "
       "conv2d(8,3,stride=2) flatten linear",
       Shape{2, 9, 9}},
      // Channels in eights: mpiddp's own Winograd kernels take every convolution but the last.
      {"conv2d(8,3,padding=1) relu residual(conv2d(8,3,padding=1) batchnorm2d relu conv2d(8,3,padding=1)) "
       "conv2d(16,3,padding=2) conv2d(8,3,stride=2) flatten linear",
       Shape{8, 7, 7}},
      {"linear(12) residual(layernorm causal_self_attention(3)) residual(layernorm linear(24) gelu(approximate=tanh) "
       "linear(12)) linear(7,bias=false)",
       Shape{8, 10}},
  };
  const auto all = libraries();
  // Each library for every layer; then own kernels (Winograd convolutions) for the
  // layers that have them (the convolutions), with auto's library for the rest.
  std::vector<std::pair<CpuKernels, CpuKernels>> choices;
  for (const CpuKernels library : all) choices.emplace_back(library, CpuKernels::automatic);
  if (cpu::thin_conv::available()) choices.emplace_back(CpuKernels::automatic, CpuKernels::own);
  if (cpu::onednn_conv::winograd_runs()) {
    choices.emplace_back(CpuKernels::automatic, CpuKernels::winograd);
    choices.emplace_back(CpuKernels::automatic, CpuKernels::winograd_all);
  }
  for (const CpuKernels tile : {CpuKernels::own_winograd, CpuKernels::own_winograd4}) {
    choices.emplace_back(CpuKernels::automatic, tile);
    for (const CpuKernels library : all) choices.emplace_back(library, tile);
  }
  for (const Case& c : cases) {
    const Run reference = run_on(CpuKernels::openblas, c.layers, c.input, 5);
    for (const auto& [library, own] : choices) {
      const Run other = run_on(library, c.layers, c.input, 5, own);
      INFO(c.layers << " on " << name_of(library) << ", layers' own choice " << name_of(own));
      REQUIRE(other.output.size() == reference.output.size());
      CHECK(relative_difference(other.output.data(), reference.output.data(), other.output.size()) < 1e-5);
      CHECK(relative_difference(other.grads.data(), reference.grads.data(), other.grads.size()) < 1e-5);
      CHECK(relative_difference(other.input_grad.data(), reference.input_grad.data(), other.input_grad.size()) <
            1e-5);
    }
  }
}

namespace {

struct ConvCase {
  ConvGeometry g;
  std::vector<float> x, w, b, dy;
  ConvCase(int n, int c, int size, int out_c, int kernel, int stride, int padding, std::uint64_t seed) {
    g.n = n;
    g.c = c;
    g.h = g.w = size;
    g.out_c = out_c;
    g.kh = g.kw = kernel;
    g.stride = stride;
    g.padding = padding;
    x = bench::random_values(static_cast<std::size_t>(n) * c * size * size, seed);
    w = bench::random_values(static_cast<std::size_t>(out_c) * c * kernel * kernel, seed + 1);
    b = bench::random_values(static_cast<std::size_t>(out_c), seed + 2);
    dy = bench::random_values(static_cast<std::size_t>(n) * out_c * g.out_h() * g.out_w(), seed + 3);
  }
  std::size_t weights() const { return w.size(); }
};

// Values off by more than 1e-5 of their size; with `of_largest`, of the largest
// value's (Winograd's tile transforms spread rounding over a tile, about 1e-6 of
// the output's scale: docs/performance.md).
std::size_t wrong_values(const std::vector<float>& got, const std::vector<float>& want, bool of_largest = false) {
  REQUIRE(got.size() == want.size());
  if (!of_largest) return bench::count_wrong(got.data(), want.data(), got.size(), 1e-5);
  float largest = 0;
  for (const float v : want) largest = std::max(largest, std::fabs(v));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1.0f + largest))) ++wrong;
  return wrong;
}

}  // namespace

TEST_CASE("convolution ops on each library equal the plain loops, whatever ran before", "[gemm][conv]") {
  const std::vector<std::array<int, 7>> shapes{// n, c, size, out_c, kernel, stride, padding
                                               {3, 1, 7, 4, 3, 1, 1}, {2, 3, 9, 5, 3, 2, 1}, {4, 2, 6, 3, 1, 1, 0},
                                               {2, 4, 8, 6, 5, 1, 2}, {5, 3, 7, 2, 3, 2, 0}, {1, 16, 5, 32, 3, 1, 1},
                                               {3, 48, 7, 48, 3, 1, 1}, {2, 8, 6, 16, 3, 1, 0},
                                               {2, 16, 5, 8, 3, 1, 2},  {3, 8, 9, 8, 3, 1, 1}};
  LibraryGuard guard;
  std::vector<CpuKernels> choices = libraries();
  if (cpu::thin_conv::available()) choices.push_back(CpuKernels::own);  // a layer's: set by a scope
  if (cpu::onednn_conv::winograd_runs()) {
    choices.push_back(CpuKernels::winograd);
    choices.push_back(CpuKernels::winograd_all);
  }
  choices.push_back(CpuKernels::own_winograd);  // on any CPU
  choices.push_back(CpuKernels::own_winograd4);
  for (const CpuKernels library : choices) {
    cpu::use_gemm_library(library);
    const cpu::LibraryScope layer_choice(library);
    for (const auto& s : shapes) {
      INFO(name_of(library) << ": n " << s[0] << " c " << s[1] << " size " << s[2] << " out " << s[3] << " kernel "
                            << s[4] << " stride " << s[5] << " padding " << s[6]);
      ConvCase a(s[0], s[1], s[2], s[3], s[4], s[5], s[6], 10);
      ConvCase other(s[0] + 1, s[1], s[2], s[3], s[4], s[5], s[6], 20);  // another batch size between
      ConvOps& conv = cpu_device().ops<ConvOps>();
      auto scratch = conv.make_scratch();
      const auto wrong = [&](const std::vector<float>& got, const std::vector<float>& want) {
        return wrong_values(got, want,
                            library == CpuKernels::winograd || library == CpuKernels::winograd_all ||
                                library == CpuKernels::own_winograd4);
      };
      std::vector<float> y(a.dy.size()), y_other(other.dy.size()), dx(a.x.size());
      std::vector<float> dw(a.weights()), db(a.b.size());
      conv.conv_forward(a.x.data(), a.w.data(), a.b.data(), y.data(), a.g, scratch.get());
      conv.conv_forward(other.x.data(), other.w.data(), other.b.data(), y_other.data(), other.g, scratch.get());
      conv.conv_backward_params(a.x.data(), a.dy.data(), dw.data(), db.data(), a.g, false, scratch.get());
      conv.conv_backward_input(a.dy.data(), a.w.data(), dx.data(), a.g, scratch.get());
      CHECK(wrong(y, bench::conv_forward(a.x.data(), a.w.data(), a.b.data(), a.g)) == 0);
      CHECK(wrong(y_other, bench::conv_forward(other.x.data(), other.w.data(), other.b.data(), other.g)) == 0);
      std::vector<float> params(dw);
      params.insert(params.end(), db.begin(), db.end());
      const std::vector<float> want_params = bench::conv_params_grad(a.x.data(), a.dy.data(), a.g);
      CHECK(wrong(params, want_params) == 0);
      CHECK(wrong(dx, bench::conv_input_grad(a.dy.data(), a.w.data(), a.g)) == 0);

      // The same buffers with new values (the next step): nothing stale is used,
      // and accumulated gradients add onto what is there.
      // Copied into the existing buffers, so the pointers the ops see are the same.
      const auto x2 = bench::random_values(a.x.size(), 30), w2 = bench::random_values(a.w.size(), 31),
                 dy2 = bench::random_values(a.dy.size(), 32);
      const float* const old_x = a.x.data();
      std::copy(x2.begin(), x2.end(), a.x.begin());
      std::copy(w2.begin(), w2.end(), a.w.begin());
      std::copy(dy2.begin(), dy2.end(), a.dy.begin());
      REQUIRE(a.x.data() == old_x);
      const ConvCase fresh = a;
      conv.conv_forward(a.x.data(), a.w.data(), a.b.data(), y.data(), a.g, scratch.get());
      conv.conv_backward_params(a.x.data(), a.dy.data(), dw.data(), db.data(), a.g, true, scratch.get());
      conv.conv_backward_input(a.dy.data(), a.w.data(), dx.data(), a.g, scratch.get());
      CHECK(wrong(y, bench::conv_forward(fresh.x.data(), fresh.w.data(), fresh.b.data(), fresh.g)) == 0);
      std::vector<float> summed = bench::conv_params_grad(fresh.x.data(), fresh.dy.data(), fresh.g);
      for (std::size_t i = 0; i < summed.size(); ++i) summed[i] += want_params[i];
      params.assign(dw.begin(), dw.end());
      params.insert(params.end(), db.begin(), db.end());
      CHECK(wrong(params, summed) == 0);
      CHECK(wrong(dx, bench::conv_input_grad(fresh.dy.data(), fresh.w.data(), fresh.g)) == 0);
    }
  }
}

TEST_CASE("a library scope sets this thread's library for a while, nested, automatic leaving it", "[gemm]") {
  LibraryGuard guard;
  cpu::use_gemm_library(CpuKernels::openblas);
  CHECK(cpu::library_in_effect() == CpuKernels::openblas);
  {
    const cpu::LibraryScope outer(CpuKernels::onednn);
    CHECK(cpu::library_in_effect() == CpuKernels::onednn);
    {
      const cpu::LibraryScope same(CpuKernels::automatic);
      CHECK(cpu::library_in_effect() == CpuKernels::onednn);
      const cpu::LibraryScope inner(CpuKernels::openblas);
      CHECK(cpu::library_in_effect() == CpuKernels::openblas);
      CHECK_FALSE(cpu::onednn_convolutions());
    }
    CHECK(cpu::library_in_effect() == CpuKernels::onednn);
    CHECK(cpu::onednn_convolutions());
  }
  CHECK(cpu::library_in_effect() == CpuKernels::openblas);
  CHECK(cpu::gemm_library() == CpuKernels::openblas);
}

TEST_CASE("a layer's own CPU library (train.cpu_kernels = tune) runs its passes, whatever the process's", "[gemm]") {
  if (!cpu::onednn_linked()) {
    WARN("this build has one library (no oneDNN): nothing to choose per layer");
    return;
  }
  struct Case {
    const char* layers;
    Shape input;
  };
  for (const Case& c : {Case{"linear(48)", {300}}, Case{"conv2d(8,3,padding=1) flatten", {5, 9, 9}}}) {
    INFO(c.layers);
    const Run openblas = run_on(CpuKernels::openblas, c.layers, c.input, 7);
    const Run onednn = run_on(CpuKernels::onednn, c.layers, c.input, 7);
    // Sizes where the two round differently somewhere, or this case could not tell them apart.
    REQUIRE_FALSE(same_bits(openblas, onednn));
    CHECK(same_bits(run_on(CpuKernels::onednn, c.layers, c.input, 7, CpuKernels::openblas), openblas));
    CHECK(same_bits(run_on(CpuKernels::openblas, c.layers, c.input, 7, CpuKernels::onednn), onednn));
  }
}

TEST_CASE("CPU kernel choices: the text a checkpoint keeps, read back onto the same model", "[gemm]") {
  const std::string layers =
      "conv2d(4,3,padding=1) batchnorm2d relu residual(conv2d(4,3,padding=1) batchnorm2d ; conv2d(4,1)) flatten "
      "linear(6) relu linear";
  auto model = std::make_unique<Sequential>(build_layers(layers, 3, false), Shape{1, 8, 8}, 5);
  CHECK(kernel_choices_text(*model, CpuKernels::onednn) == "onednn");
  model->visit_layers([](const std::string& name, Layer& layer, const Shape&) {
    if (name == "layers.0") layer.set_cpu_kernels(CpuKernels::openblas);
    if (name == "layers.3.shortcut.0") layer.set_cpu_kernels(CpuKernels::onednn);
  });
  const std::string text = kernel_choices_text(*model, CpuKernels::openblas);
  CHECK(text == "openblas;layers.0=openblas;layers.3.shortcut.0=onednn");
  CHECK(valid_kernel_choices(text));

  auto other = std::make_unique<Sequential>(build_layers(layers, 3, false), Shape{1, 8, 8}, 5);
  CHECK(apply_kernel_choices(*other, text, "f.h5") == CpuKernels::openblas);
  CHECK(kernel_choices_text(*other, CpuKernels::openblas) == text);
  // Applying again replaces, never adds: a layer named no more goes back to the process's library.
  apply_kernel_choices(*other, "onednn;layers.7=openblas", "f.h5");
  CHECK(kernel_choices_text(*other, CpuKernels::onednn) == "onednn;layers.7=openblas");

  // mpiddp's own kernels are a layer's choice, for a layer that has them.
  apply_kernel_choices(*other, "onednn;layers.3.body.0=own", "f.h5");
  CHECK(kernel_choices_text(*other, CpuKernels::onednn) == "onednn;layers.3.body.0=own");
  CHECK(kernel_choices_available(*other, "onednn;layers.0=own") ==
        (cpu::thin_conv::available() && cpu::onednn_linked()));
  CHECK(kernel_choices_available(*other, "openblas;layers.0=own") == cpu::thin_conv::available());
  // Where this CPU has own kernels, a Linear's lack of them is the model's, not the CPU's.
  if (cpu::thin_conv::available())
    CHECK_THROWS_WITH(apply_kernel_choices(*other, "onednn;layers.5=own", "f.h5"),
                      Catch::Contains("f.h5: CPU kernel choice own for layers.5, a Linear for which mpiddp has no kernels"));
  CHECK_FALSE(kernel_choices_available(*other, "onednn;layers.5=own"));
  // oneDNN's Winograd convolutions too (where this CPU has them for the layer's shape), never for a process.
  CHECK(valid_kernel_choices("onednn;layers.0=winograd"));
  CHECK(valid_kernel_choices("onednn;layers.0=winograd_all;layers.1=winograd"));
  CHECK_FALSE(valid_kernel_choices("winograd"));
  CHECK_FALSE(valid_kernel_choices("winograd_all"));
  CHECK_FALSE(valid_kernel_choices("onednn;layers.0=winograd-all"));
  bool body_winograd = false;
  other->visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    if (name == "layers.3.body.0") body_winograd = layer.has_winograd();
  });
  CHECK(kernel_choices_available(*other, "openblas;layers.3.body.0=winograd") == body_winograd);
  if (body_winograd) CHECK(cpu::onednn_conv::winograd_runs());
  // Which layers oneDNN has them for depends on the CPU, so a choice of them for a
  // layer it has none for here (a 1 x 1 convolution, a Linear) is not refused:
  // it does not run here, and a resume goes on with this rank's kernels.
  CHECK_FALSE(kernel_choices_available(*other, "onednn;layers.3.shortcut.0=winograd"));
  CHECK_FALSE(kernel_choices_available(*other, "onednn;layers.5=winograd"));
  CHECK_FALSE(kernel_choices_available(*other, "onednn;layers.5=winograd_all"));
  CHECK_NOTHROW(check_kernel_choices_fit(*other, "onednn;layers.5=winograd", "f.h5"));
  CHECK_NOTHROW(check_kernel_choices_fit(*other, "onednn;layers.5=winograd_all", "f.h5"));
  // A layer the model lacks is for check_kernel_choices_fit to refuse.
  CHECK(kernel_choices_available(*other, "openblas;layers.42=openblas"));
  CHECK_FALSE(kernel_choices_available(*other, "openblas;layers.0"));
  if (cpu::onednn_conv::winograd_runs()) {
    apply_kernel_choices(*other, "onednn;layers.3.body.0=winograd", "f.h5");
    CHECK(kernel_choices_text(*other, CpuKernels::onednn) == "onednn;layers.3.body.0=winograd");
  }

  for (const char* bad : {"", "blis", "own", "own;layers.0=own", "onednn;", "onednn;layers.0", "onednn;layers.0=mkl", "onednn;=openblas",
                          "onednn;layers.0=onednn;layers.0=openblas", "onednn;Layers.0=onednn",
                          "onednn;layers.0=onednn;", "onednn;layers/0=onednn"}) {
    INFO(bad);
    CHECK_FALSE(valid_kernel_choices(bad));
    CHECK_THROWS_WITH(apply_kernel_choices(*other, bad, "f.h5"), Catch::Contains("f.h5: CPU kernel choices"));
  }
  // Well formed but longer than any model would write (4 MiB): refused before it is split.
  std::string huge = "onednn";
  for (int i = 0; huge.size() <= (std::size_t{4} << 20); ++i) huge += ";layers." + std::to_string(i) + "=onednn";
  CHECK_FALSE(valid_kernel_choices(huge));
  CHECK(valid_kernel_choices(huge.substr(0, huge.rfind(';', std::size_t{4} << 20))));
  CHECK_THROWS_WITH(apply_kernel_choices(*other, "onednn;layers.1=openblas", "f.h5"),
                    Catch::Contains("f.h5: CPU kernel choice for layers.1, a BatchNorm2d without matrix products"));
  CHECK_THROWS_WITH(apply_kernel_choices(*other, "onednn;layers.42=openblas", "f.h5"),
                    Catch::Contains("layers.42, a layer this model does not have"));
}

TEST_CASE("auto gives mpiddp's own kernels to the convolutions they suit; own to every convolution", "[gemm]") {
  const std::string layers =
      "conv2d(4,3,padding=1) relu conv2d(8,3,padding=1) relu conv2d(8,3,padding=1) flatten linear";
  const auto choices = [&](CpuKernels setting, int threads, bool winograd_everywhere = true) {
    auto model = std::make_unique<Sequential>(build_layers(layers, 3, false), Shape{1, 6, 6}, 5);
    give_own_kernels(*model, setting, threads, winograd_everywhere);
    return kernel_choices_text(*model, CpuKernels::openblas);
  };
  CHECK(choices(CpuKernels::onednn, 1) == "openblas");
  CHECK(choices(CpuKernels::openblas, 1) == "openblas");
  if (!cpu::thin_conv::available()) {
    CHECK(choices(CpuKernels::automatic, 1) == "openblas");
    CHECK_THROWS_WITH(choices(CpuKernels::own, 1), Catch::Contains("need an x86-64 CPU with AVX2 and FMA"));
    return;
  }
  // Rows of columns: 9 (1 input channel), 36 (4: own kernels, not auto's), 72 (8: the libraries' only).
  // Without Winograd's kernels on every rank (the last argument).
  // There mpiddp's own Winograd kernels, F(4x4, 3x3), take the 8-channel one, with one thread per rank.
  CHECK(choices(CpuKernels::automatic, 1, false) == "openblas;layers.0=own;layers.4=own_winograd4");
  CHECK(choices(CpuKernels::own, 1, false) == "openblas;layers.0=own;layers.2=own;layers.4=own_winograd4");
  CHECK(choices(CpuKernels::tune, 1) == "openblas;layers.0=own");  // tune times Winograd's instead
  CHECK(choices(CpuKernels::automatic, 2, false) == "openblas");  // the own kernels run on one thread
  CHECK(choices(CpuKernels::own, 2, false) == "openblas;layers.0=own;layers.2=own");
  // Where oneDNN has Winograd's kernels (AVX-512) on every rank, auto and winograd give them every 3 x 3
  // convolution with more than 3 input channels (never the 1-channel one, whatever the threads).
  if (cpu::onednn_conv::winograd_runs()) {
    for (const CpuKernels setting : {CpuKernels::automatic, CpuKernels::winograd}) {
      CHECK(choices(setting, 1) == "openblas;layers.0=own;layers.2=winograd;layers.4=winograd");
      CHECK(choices(setting, 2) == "openblas;layers.2=winograd;layers.4=winograd");
    }
    // own keeps its kernels where they run and gives Winograd's to the rest, as auto would.
    CHECK(choices(CpuKernels::own, 2) == "openblas;layers.0=own;layers.2=own;layers.4=winograd");
    CHECK_THROWS_WITH(choices(CpuKernels::winograd, 1, false), Catch::Contains("another rank's CPU lacks"));
  } else {
    CHECK(choices(CpuKernels::automatic, 1) == "openblas;layers.0=own");
    CHECK_THROWS_WITH(choices(CpuKernels::winograd, 1), Catch::Contains("train.cpu_kernels = winograd: "));
  }
}

TEST_CASE("auto gives Winograd's weight gradient to wide convolutions on small planes; winograd never", "[gemm]") {
  // 4 -> 48 and 48 -> 48 at 14 x 14, a strided one, 32 -> 48 and 48 -> 48 at 7 x 7.
  const std::string layers =
      "conv2d(48,3,padding=1) conv2d(48,3,padding=1) conv2d(32,3,stride=2,padding=1) conv2d(48,3,padding=1) "
      "conv2d(48,3,padding=1) flatten linear";
  const auto model = [&] { return std::make_unique<Sequential>(build_layers(layers, 3, false), Shape{4, 14, 14}, 5); };
  const auto choices = [&](CpuKernels setting, bool winograd_everywhere = true) {
    auto m = model();
    give_own_kernels(*m, setting, 2, winograd_everywhere);
    return kernel_choices_text(*m, CpuKernels::openblas);
  };
  if (!cpu::onednn_conv::winograd_runs()) {
    CHECK_THROWS_WITH(choices(CpuKernels::winograd_all), Catch::Contains("train.cpu_kernels = winograd_all: "));
    CHECK(choices(CpuKernels::automatic) == "openblas");
    return;
  }
  // Where oneDNN has the weight gradient on Winograd for a layer: depends on the CPU.
  std::map<std::string, bool> has_all;
  model()->visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    has_all[name] = layer.has_winograd_weight_gradient();
  });
  CHECK_FALSE(has_all["layers.2"]);  // stride 2
  CHECK_FALSE(has_all["layers.6"]);  // a Linear
  const auto all_or_not = [&](const char* name) { return has_all[name] ? "winograd_all" : "winograd"; };
  CHECK(choices(CpuKernels::automatic) ==
        std::string("openblas;layers.0=winograd;layers.1=") + all_or_not("layers.1") +
            ";layers.3=winograd;layers.4=" + all_or_not("layers.4"));
  CHECK(choices(CpuKernels::winograd) ==
        "openblas;layers.0=winograd;layers.1=winograd;layers.3=winograd;layers.4=winograd");
  CHECK(choices(CpuKernels::winograd_all) == std::string("openblas;layers.0=") + all_or_not("layers.0") +
                                                 ";layers.1=" + all_or_not("layers.1") + ";layers.3=" +
                                                 all_or_not("layers.3") + ";layers.4=" + all_or_not("layers.4"));
  CHECK_THROWS_WITH(choices(CpuKernels::winograd_all, false),
                    Catch::Contains("train.cpu_kernels = winograd_all: another rank's CPU lacks"));
  // Never for a strided convolution.
  CHECK_FALSE(kernel_choices_available(*model(), "onednn;layers.2=winograd_all"));
  // The rule's edges, one convolution each: channels in and out (48), output positions (14 x 14).
  const auto alone = [&](const char* conv, Shape in) {
    auto m = std::make_unique<Sequential>(build_layers(std::string(conv) + " flatten linear", 3, false), in, 5);
    give_own_kernels(*m, CpuKernels::automatic, 2, true);
    bool has = false;
    m->visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
      if (name == "layers.0") has = layer.has_winograd_weight_gradient();
    });
    return std::make_pair(kernel_choices_text(*m, CpuKernels::openblas), has);
  };
  CHECK(alone("conv2d(32,3,padding=1)", Shape{48, 7, 7}).first == "openblas;layers.0=winograd");  // 32 out
  CHECK(alone("conv2d(48,3,padding=1)", Shape{47, 7, 7}).first == "openblas;layers.0=winograd");  // 47 in
  CHECK(alone("conv2d(48,3,padding=1)", Shape{48, 15, 15}).first == "openblas;layers.0=winograd");  // 225 outputs
  const auto fourteen = alone("conv2d(48,3,padding=1)", Shape{48, 14, 14});                           // 196 outputs
  CHECK(fourteen.first == std::string("openblas;layers.0=") + (fourteen.second ? "winograd_all" : "winograd"));
}

TEST_CASE("winograd keeps the direct weight gradient, winograd_all runs Winograd's", "[gemm][conv]") {
  ConvGeometry g;
  g.n = 3;
  g.c = g.out_c = 48;
  g.h = g.w = 7;
  g.kh = g.kw = 3;
  g.padding = 1;
  if (!cpu::onednn_conv::winograd_available(g, true)) {
    SUCCEED("oneDNN has no Winograd weight gradient for this shape on this CPU");
    return;
  }
  LibraryGuard guard;
  cpu::use_gemm_library(CpuKernels::onednn);
  const ConvCase c(g.n, g.c, g.h, g.out_c, 3, 1, 1, 40);
  const auto weight_gradient = [&](CpuKernels choice) {
    const cpu::LibraryScope scope(choice);
    ConvOps& conv = cpu_device().ops<ConvOps>();
    auto scratch = conv.make_scratch();
    std::vector<float> y(c.dy.size()), dw(c.weights()), db(c.b.size());
    conv.conv_forward(c.x.data(), c.w.data(), c.b.data(), y.data(), c.g, scratch.get());
    conv.conv_backward_params(c.x.data(), c.dy.data(), dw.data(), db.data(), c.g, false, scratch.get());
    return dw;
  };
  const std::vector<float> direct = weight_gradient(CpuKernels::onednn);
  CHECK(weight_gradient(CpuKernels::winograd) == direct);
  CHECK(weight_gradient(CpuKernels::winograd_all) != direct);
}

TEST_CASE("mpiddp's own Winograd kernels: own_winograd(4) gives them wherever they run, auto F(4x4) without oneDNN's",
          "[gemm]") {
  // At 12 x 12: 1 channel (thin kernels), 8 -> 16, 16 -> 12 (not in eights), strided 12 -> 16; at 6 x 6: 16 -> 16.
  const std::string layers =
      "conv2d(8,3,padding=1) conv2d(16,3,padding=1) conv2d(12,3,padding=1) conv2d(16,3,stride=2,padding=1) "
      "conv2d(16,3,padding=1) flatten linear";
  const auto choices = [&](CpuKernels setting, int threads, bool winograd_everywhere) {
    auto model = std::make_unique<Sequential>(build_layers(layers, 3, false), Shape{1, 12, 12}, 5);
    give_own_kernels(*model, setting, threads, winograd_everywhere);
    return kernel_choices_text(*model, CpuKernels::openblas);
  };
  // On any CPU and thread count, with or without oneDNN's Winograd kernels on every rank.
  for (const bool everywhere : {false, true})
    for (const int threads : {1, 2}) {
      const std::string text = choices(CpuKernels::own_winograd, threads, everywhere);
      INFO(text);
      CHECK(text.find("layers.1=own_winograd") != std::string::npos);
      CHECK(text.find("layers.4=own_winograd") != std::string::npos);
      CHECK(text.find("layers.2=own_winograd") == std::string::npos);
      CHECK(text.find("layers.3=own_winograd") == std::string::npos);
      // The others as auto gives them (e.g. the 12-channel one oneDNN's Winograd where every rank has it).
      std::string others = text, own_winograd_free = choices(CpuKernels::automatic, threads, everywhere);
      for (const char* layer : {";layers.1=", ";layers.4="})
        for (std::string* t : {&others, &own_winograd_free}) {
          const std::size_t at = t->find(layer);
          if (at != std::string::npos) t->erase(at, t->find(';', at + 1) - at);
        }
      CHECK(others == own_winograd_free);
      CHECK(choices(CpuKernels::own_winograd4, threads, everywhere) ==
            std::regex_replace(text, std::regex("=own_winograd\\b"), "=own_winograd4"));
      // auto and own give F(4x4, 3x3) to the same layers where some rank lacks oneDNN's Winograd kernels,
      // with one thread per rank; tune times them instead (a build without oneDNN: as auto); onednn never.
      for (const CpuKernels setting : {CpuKernels::automatic, CpuKernels::tune, CpuKernels::own, CpuKernels::onednn}) {
        const std::string other = choices(setting, threads, everywhere);
        INFO(name_of(setting) << ": " << other);
        const bool f4 = !everywhere && threads == 1 &&
                        (setting == CpuKernels::automatic || setting == CpuKernels::own ||
                         (setting == CpuKernels::tune && !cpu::onednn_linked()));
        CHECK((other.find("layers.1=own_winograd4") != std::string::npos) == f4);
        CHECK((other.find("layers.4=own_winograd4") != std::string::npos) == f4);
        CHECK(std::regex_search(other, std::regex("=own_winograd\\b")) == false);
        CHECK((other.find("layers.2=own_winograd4") == std::string::npos));
      }
    }
  if (cpu::onednn_conv::winograd_runs())
    CHECK(choices(CpuKernels::own_winograd, 2, true) ==
          "openblas;layers.1=own_winograd;layers.2=winograd;layers.4=own_winograd");
  // A layer they do not take is refused nothing: it does not run here (any build: OpenBLAS is always there).
  auto model = std::make_unique<Sequential>(build_layers(layers, 3, false), Shape{1, 12, 12}, 5);
  CHECK(valid_kernel_choices("onednn;layers.1=own_winograd"));
  CHECK_FALSE(valid_kernel_choices("own_winograd"));
  CHECK(kernel_choices_available(*model, "openblas;layers.1=own_winograd;layers.4=own_winograd"));
  CHECK_FALSE(kernel_choices_available(*model, "openblas;layers.2=own_winograd"));  // 12 channels
  CHECK_FALSE(kernel_choices_available(*model, "openblas;layers.3=own_winograd"));  // stride 2
}

TEST_CASE("mpiddp's own Winograd kernels over several chunks of samples equal the plain loops", "[gemm][conv]") {
  // 64 -> 64 channels at 14 x 14: 5 samples per chunk with F(2x2, 3x3), 7 with F(4x4, 3x3), so 9 samples
  // run as 5 and 4, or 7 and 2.
  const ConvCase c(9, 64, 14, 64, 3, 1, 1, 50);
  LibraryGuard guard;
  const CpuKernels tile = GENERATE(CpuKernels::own_winograd, CpuKernels::own_winograd4);
  INFO(name_of(tile));
  const cpu::LibraryScope scope(tile);
  ConvOps& conv = cpu_device().ops<ConvOps>();
  auto scratch = conv.make_scratch();
  std::vector<float> y(c.dy.size()), dx(c.x.size()), dw(c.weights()), db(c.b.size());
  conv.conv_forward(c.x.data(), c.w.data(), c.b.data(), y.data(), c.g, scratch.get());
  conv.conv_backward_params(c.x.data(), c.dy.data(), dw.data(), db.data(), c.g, false, scratch.get());
  conv.conv_backward_input(c.dy.data(), c.w.data(), dx.data(), c.g, scratch.get());
  // Sums of 576 to 1764 products: to 1e-5 of the largest value.
  CHECK(wrong_values(y, bench::conv_forward(c.x.data(), c.w.data(), c.b.data(), c.g), true) == 0);
  CHECK(wrong_values(dx, bench::conv_input_grad(c.dy.data(), c.w.data(), c.g), true) == 0);
  std::vector<float> params(dw);
  params.insert(params.end(), db.begin(), db.end());
  CHECK(wrong_values(params, bench::conv_params_grad(c.x.data(), c.dy.data(), c.g), true) == 0);
}
