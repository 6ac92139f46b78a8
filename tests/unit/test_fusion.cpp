// Layers that take the layers after them into their own passes over memory
// (Layer::absorb_next): BatchNorm takes a ReLU and then a tiling max pooling,
// a residual block takes a ReLU; and a convolution on mpiddp's own kernels
// hands each sample to the BatchNorm after it as it writes it, and takes each
// sample's gradient from it as it reads it (SampleConsumer). The model as built,
// fused, against the same layers with nothing fused, at any depth: outputs,
// input gradients, parameter gradients and buffers bit for bit, in training and
// in evaluation.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <limits>
#include <regex>
#include <vector>

#include "layer_test_util.hpp"
#include "mpiddp/device/cpu_device.hpp"
#include "mpiddp/device/elementwise.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "ops/conv/thin_conv.hpp"
#include "ops/norm/norm_ops.hpp"
#include "ops/pointwise/pointwise_ops.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

// The same layer list with a dropout(0) (a copy, in training too) before every
// ReLU, max pooling and BatchNorm2d, so nothing takes them in or hands samples to
// them, at any depth: the layers one by one, with the same parameters in the same order.
std::string unfused(const std::string& layers) {
  static const std::regex taken(R"(\b(relu|maxpool2d|batchnorm2d)\b)");
  return std::regex_replace(layers, taken, "dropout(0) $1");
}

// Every convolution that mpiddp's own kernels take runs on them (where this CPU has them).
void own_convolutions(Sequential& model) {
  model.visit_layers([](const std::string&, Layer& layer, const Shape&) {
    if (layer.has_own_kernels()) layer.set_cpu_kernels(CpuKernels::own);
  });
}

// (memcmp takes no null pointer, even for 0 bytes: an empty vector's data may be one.)
bool same_bits(const float* a, const float* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("layers take in the ones after them, bit for bit as the layers one by one", "[nn][batchnorm][residual]") {
  struct Case {
    const char* layers;
    Shape input;
    std::vector<std::size_t> absorbed;
    int streamed;  // BatchNorm2d layers fed sample by sample in training (own kernels)
  };
  // Planes of 35, 9 and 195 values: whole lanes of 8 and a tail; pooling windows
  // that leave a last row or column out (7 x 5 by 2, 15 x 13 by 3).
  const Case cases[] = {
      {"conv2d(3,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(4,3,padding=1) batchnorm2d relu relu flatten "
       "linear(6) batchnorm1d relu linear",
       {2, 7, 5}, {2, 3, 6, 11}, 2},
      {"batchnorm1d relu linear(5) batchnorm1d gelu linear", {6}, {1}, 0},
      // Overlapping windows (stride 1 < kernel 2), an average pooling and a pooling
      // without a ReLU before it stay layers of their own.
      {"batchnorm2d relu maxpool2d(3) conv2d(2,1) batchnorm2d relu maxpool2d(2,1) batchnorm2d relu avgpool2d(2) "
       "batchnorm2d maxpool2d(1) flatten linear",
       {3, 15, 13}, {1, 2, 5, 8}, 1},
      // A residual takes in the ReLU after it (at the top level and in a branch),
      // not a second one; 100 values a sample, so lines of 16 and a tail.
      {"residual(conv2d(4,3,padding=1) batchnorm2d relu conv2d(4,3,padding=1) batchnorm2d) relu "
       "residual(conv2d(8,3,stride=2,padding=1) batchnorm2d ; conv2d(8,1,stride=2)) relu relu flatten linear",
       {4, 5, 5}, {1, 3}, 3},
      {"linear(6) residual(residual(linear(6)) relu linear(6)) relu linear", {6}, {2}, 0},
      {"residual(linear(6) relu) gelu residual(linear(6)) relu linear", {6}, {3}, 0},
  };
  for (const Case& c : cases)
    for (bool training : {true, false}) {
      INFO(c.layers << (training ? " (training)" : " (evaluation)"));
      ModelConfig config;
      config.layers = c.layers;
      auto fused = build_model(config, c.input, 3, 7);
      config.layers = unfused(c.layers);
      auto plain = build_model(config, c.input, 3, 7);
      own_convolutions(*fused);
      own_convolutions(*plain);
      randomize_parameters(*fused, 61);
      randomize_parameters(*plain, 61);
      std::vector<std::size_t> absorbed;
      for (std::size_t i = 0; i < fused->absorbed().size(); ++i)
        if (fused->absorbed()[i]) absorbed.push_back(i);
      CHECK(absorbed == c.absorbed);  // a second ReLU in a row stays a layer of its own; a GELU too
      const auto& taken = plain->absorbed();
      CHECK(std::none_of(taken.begin(), taken.end(), [](bool b) { return b; }));

      const Matrix x = random_matrix(5, element_count(c.input), 67, 2.0f);
      const Matrix dy = random_matrix(5, fused->out_features(), 71);
      ForwardContext ctx;
      ctx.training = training;
      const Matrix y = fused->forward(x, ctx);
      const Matrix y_plain = plain->forward(x, ctx);
      Matrix dx, dx_plain;
      fused->backward(dy, false, {}, &dx);
      plain->backward(dy, false, {}, &dx_plain);

      int streamed = 0;
      fused->visit_layers([&](const std::string&, Layer& layer, const Shape&) {
        const auto* norm = dynamic_cast<const BatchNorm*>(&layer);
        if (norm && norm->moments_streamed()) ++streamed;
      });
      CHECK(streamed == (training && cpu::thin_conv::available() ? c.streamed : 0));

      CHECK(same_bits(y.data(), y_plain.data(), y.size()));
      CHECK(same_bits(dx.data(), dx_plain.data(), dx.size()));
      const ParameterStore& a = fused->parameters();
      const ParameterStore& b = plain->parameters();
      REQUIRE(a.total() == b.total());
      CHECK(same_bits(a.host_grads(), b.host_grads(), a.total()));
      CHECK(same_bits(a.host_buffers(), b.host_buffers(), a.buffer_total()));

      // Without the network's input gradient (as in training), the first layer's
      // weight gradient reads each sample's gradient as the layer after writes it.
      fused->forward(x, ctx);
      plain->forward(x, ctx);
      fused->backward(dy, false, {}, nullptr);
      plain->backward(dy, false, {}, nullptr);
      CHECK(same_bits(a.host_grads(), b.host_grads(), a.total()));
    }
}

namespace {

// Values that find a loop's edge cases: ±0, ±inf, NaN, and plain ones.
std::vector<float> awkward_values(std::size_t n, std::uint64_t seed) {
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1.0f};
  std::vector<float> v(n);
  CounterRng rng(seed);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = rng.uniform(i) < 0.3f ? special[i % 6] : 4.0f * rng.uniform(i + n) - 2.0f;
  return v;
}

}  // namespace

TEST_CASE("the fused loops' vector bodies and tails give the scalar formulas' bits", "[nn][batchnorm][residual]") {
  Device& cpu = cpu_device();
  PointwiseOps& pointwise = cpu.ops<PointwiseOps>();
  NormOps& norm = cpu.ops<NormOps>();
  for (std::size_t n = 0; n <= 40; ++n) {
    INFO("n = " << n);
    std::vector<float> a = awkward_values(n, 3 + n), b = awkward_values(n, 5 + n);
    for (std::size_t i : {std::size_t{1}, std::size_t{17}})  // -0 + -0: a -0 sum, in the tail and in a vector
      if (i < n) a[i] = b[i] = -0.0f;
    std::vector<float> sum(n), sum_relu(n), expected(n), expected_relu(n);
    for (std::size_t i = 0; i < n; ++i) {
      expected[i] = a[i] + b[i];
      expected_relu[i] = ew::relu(a[i] + b[i]);
    }
    pointwise.add(a.data(), b.data(), sum.data(), n);
    pointwise.add_relu(a.data(), b.data(), sum_relu.data(), n);
    CHECK(same_bits(sum.data(), expected.data(), n));
    CHECK(same_bits(sum_relu.data(), expected_relu.data(), n));
    std::vector<float> in_place = a;  // dx += dy runs with out == a
    pointwise.add(in_place.data(), b.data(), in_place.data(), n);
    CHECK(same_bits(in_place.data(), expected.data(), n));

    // BatchNorm's NCHW planes of n values, two channels (the second with mean and
    // bias -0, so shift is -0 and x = +0 gives -0), with and without its ReLU:
    // evaluation's normalisation and the input gradient from given sums.
    const int c = 2, samples = 2;
    const std::vector<float> x = awkward_values(samples * c * n, 7 + n), dy = awkward_values(samples * c * n, 9 + n);
    const float weight[] = {0.75f, -1.5f}, bias[] = {0.25f, -0.0f}, mean[] = {0.5f, -0.0f}, var[] = {2.0f, 0.5f};
    const float eps = 1e-5f;
    for (bool relu : {false, true}) {
      INFO("relu " << relu);
      NormGeometry g;
      g.n = samples;
      g.c = c;
      g.spatial = static_cast<int>(n);
      g.relu_after = relu;
      std::vector<float> y(x.size()), y_expected(x.size()), dx(x.size()), dx_expected(x.size());
      const float invstd[] = {ew::bn_invstd(var[0], eps), ew::bn_invstd(var[1], eps)};
      const float saved[] = {mean[0], mean[1], invstd[0], invstd[1], 10.0f, 10.0f};
      const float sums[] = {1.5f, -0.5f, 0.25f, 3.0f};
      for (std::size_t i = 0; i < x.size(); ++i) {
        const int ch = static_cast<int>(i / n) % c;
        const float scale = invstd[ch] * weight[ch], shift = bias[ch] - mean[ch] * scale;
        const float out = x[i] * scale + shift;
        y_expected[i] = relu ? ew::relu(out) : out;
        const float mean_dy = sums[ch] / saved[4 + ch], projection = sums[c + ch] / saved[4 + ch] * invstd[ch] * invstd[ch];
        const float d = relu ? ew::relu_grad(out, 0.0f, dy[i]) : dy[i];
        dx_expected[i] = ew::bn_input_grad(x[i], d, mean[ch], mean_dy, projection, scale);
      }
      norm.normalize_eval(x.data(), y.data(), weight, bias, mean, var, eps, g);
      norm.backward_input(x.data(), dy.data(), weight, bias, saved, sums, dx.data(), g);
      CHECK(same_bits(y.data(), y_expected.data(), y.size()));
      CHECK(same_bits(dx.data(), dx_expected.data(), dx.size()));
    }
  }
}
