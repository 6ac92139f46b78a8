// Gradients of the image and normalisation layers against central finite
// differences: input, weight and bias gradients over kernel sizes, strides,
// paddings, non-square inputs and several channels.
#include <catch2/catch.hpp>

#include "layer_test_util.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/conv_layers.hpp"
#include "mpiddp/nn/layernorm.hpp"
#include "mpiddp/nn/layers.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model_builder.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

ForwardContext training() {
  ForwardContext ctx;
  ctx.training = true;
  ctx.seed = 3;
  return ctx;
}

std::string describe(const char* kind, const Shape& in, int kernel, int stride, int padding) {
  return std::string(kind) + " on " + shape_text(in) + ", kernel " + std::to_string(kernel) + ", stride " +
         std::to_string(stride) + ", padding " + std::to_string(padding);
}

}  // namespace

TEST_CASE("Conv2d gradients match finite differences", "[nn][conv]") {
  struct Case {
    Shape in;
    std::size_t out_channels;
    int kernel, stride, padding;
  };
  const Case cases[] = {
      {{2, 5, 7}, 3, 1, 1, 0}, {{3, 6, 5}, 2, 3, 1, 1}, {{2, 7, 9}, 3, 3, 2, 0}, {{1, 9, 8}, 2, 5, 1, 2},
      {{2, 8, 6}, 3, 5, 2, 2}, {{3, 5, 6}, 4, 3, 2, 1}, {{2, 4, 5}, 2, 3, 3, 2}, {{1, 3, 3}, 2, 5, 1, 1},
  };
  for (const Case& c : cases) {
    auto model = one_layer(std::make_unique<Conv2d>(c.out_channels, c.kernel, c.stride, c.padding), c.in, 7);
    const Matrix x = random_matrix(3, element_count(c.in), 11);
    // Linear in x and in the weights: central differences are exact up to rounding, so a large step.
    check_gradients(*model, x, training(), {0.25f, 2e-4, 1e-3},
                    describe("conv2d", c.in, c.kernel, c.stride, c.padding));
  }
}

TEST_CASE("Conv2d over several column chunks equals one sample at a time", "[nn][conv]") {
  // 16 x 5 x 5 columns of 144 x 144 positions: 8.3 M floats per sample, so the
  // 64 MiB column budget splits a batch of 3 into chunks of 2 and 1.
  const Shape in{16, 144, 144};
  auto batch = one_layer(std::make_unique<Conv2d>(2, 5, 1, 2), in, 5);
  auto single = one_layer(std::make_unique<Conv2d>(2, 5, 1, 2), in, 5);
  const Matrix x = random_matrix(3, element_count(in), 13);
  ForwardContext ctx = training();
  const Matrix y = batch->forward(x, ctx);
  const Matrix dy = random_matrix(y.rows(), y.cols(), 17);
  Matrix dx;
  batch->backward(dy, false, nullptr, &dx);
  ParameterStore& bp = batch->parameters();
  std::vector<double> grad_sum(single->parameters().total(), 0.0);
  double worst_y = 0, worst_dx = 0, scale_y = 0, scale_dx = 0;
  for (std::size_t s = 0; s < x.rows(); ++s) {
    Matrix xs(1, x.cols()), dys(1, y.cols()), dxs;
    std::copy(x.row(s), x.row(s) + x.cols(), xs.row(0));
    std::copy(dy.data() + s * dy.cols(), dy.data() + (s + 1) * dy.cols(), dys.row(0));
    const Matrix& ys = single->forward(xs, ctx);
    single->backward(dys, false, nullptr, &dxs);
    for (std::size_t i = 0; i < y.cols(); ++i) {
      worst_y = std::max(worst_y, static_cast<double>(std::abs(ys.data()[i] - element(y, s, i))));
      scale_y = std::max(scale_y, static_cast<double>(std::abs(element(y, s, i))));
    }
    for (std::size_t i = 0; i < x.cols(); ++i) {
      worst_dx = std::max(worst_dx, static_cast<double>(std::abs(dxs.data()[i] - element(dx, s, i))));
      scale_dx = std::max(scale_dx, static_cast<double>(std::abs(element(dx, s, i))));
    }
    for (std::size_t i = 0; i < grad_sum.size(); ++i) grad_sum[i] += single->parameters().grads()[i];
  }
  double worst_grad = 0, scale_grad = 0;
  for (std::size_t i = 0; i < grad_sum.size(); ++i) {
    worst_grad = std::max(worst_grad, std::abs(grad_sum[i] - bp.grads()[i]));
    scale_grad = std::max(scale_grad, std::abs(grad_sum[i]));
  }
  CHECK(worst_y <= 1e-5 * scale_y);
  CHECK(worst_dx <= 1e-5 * scale_dx);
  CHECK(worst_grad <= 1e-4 * scale_grad);  // sums of 3 x 20736 products per weight
}

TEST_CASE("max and average pooling gradients match finite differences", "[nn][pool]") {
  struct Case {
    Shape in;
    int kernel, stride;
  };
  const Case cases[] = {
      {{2, 6, 7}, 2, 2}, {{2, 5, 6}, 2, 1}, {{1, 7, 5}, 2, 3}, {{2, 7, 8}, 3, 1}, {{3, 7, 6}, 3, 2}, {{2, 9, 7}, 3, 3},
  };
  for (const Case& c : cases)
    for (PoolKind kind : {PoolKind::max, PoolKind::average}) {
      auto model = one_layer(std::make_unique<Pool2d>(kind, c.kernel, c.stride), c.in);
      // Values 0.05 apart and steps of 0.01: no window changes its maximum.
      const Matrix x = distinct_matrix(3, element_count(c.in), 19, 0.05f);
      check_gradients(*model, x, training(), {0.01f, 2e-4, 1e-3},
                      describe(kind == PoolKind::max ? "maxpool2d" : "avgpool2d", c.in, c.kernel, c.stride, 0));
    }
}

TEST_CASE("BatchNorm gradients in training mode match finite differences", "[nn][batchnorm]") {
  struct Case {
    int dims;
    Shape in;
    std::size_t batch;
  };
  // BatchNorm1d on features and on channels x length; BatchNorm2d on images.
  const Case cases[] = {{1, {4}, 7}, {1, {3, 5}, 4}, {2, {3, 4, 5}, 3}, {2, {2, 3, 2}, 5}};
  for (const Case& c : cases) {
    auto model = one_layer(std::make_unique<BatchNorm>(c.dims, 1e-5, 0.1, false), c.in);
    randomize_parameters(*model, 23);
    // Inputs off zero and of unequal spread per channel.
    Matrix x = random_matrix(c.batch, element_count(c.in), 29, 2.0f);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] += 0.5f;
    check_gradients(
        *model, x, training(), {1e-2f, 2e-3, 1e-2},
        "batchnorm" + std::to_string(c.dims) + "d on " + shape_text(c.in) + " x " + std::to_string(c.batch));
  }
}

TEST_CASE("LayerNorm gradients match finite differences", "[nn][layernorm]") {
  struct Case {
    Shape in;
    std::size_t batch;
  };
  // One row per sample, several rows per sample ({T, D}), and a 1-sample batch
  // (LayerNorm, unlike BatchNorm, needs no batch).
  const Case cases[] = {{{6}, 3}, {{4, 5}, 2}, {{2, 3, 7}, 1}};
  for (const Case& c : cases) {
    auto model = one_layer(std::make_unique<LayerNorm>(1e-5), c.in);
    randomize_parameters(*model, 31);
    Matrix x = random_matrix(c.batch, element_count(c.in), 37, 2.0f);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] += 0.5f;
    check_gradients(*model, x, training(), {1e-2f, 2e-3, 1e-2},
                    "layernorm on " + shape_text(c.in) + " x " + std::to_string(c.batch));
  }
}

TEST_CASE("Flatten passes values and gradients through unchanged", "[nn]") {
  auto model = one_layer(std::make_unique<Flatten>(), Shape{2, 3, 4});
  CHECK(model->output_shape() == Shape{24});
  const Matrix x = random_matrix(3, 24, 31);
  const Matrix y = model->forward(x, training());
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y.data()[i] == x.data()[i]);
  check_gradients(*model, x, training(), {0.25f, 1e-5, 1e-5}, "flatten");
}

TEST_CASE("a CNN's gradients match finite differences (training mode, dropout on)", "[nn][conv]") {
  ModelConfig config;
  config.layers =
      "conv2d(3,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(4,3) batchnorm2d tanh flatten "
      "linear(6) gelu dropout(0.25) linear";
  auto model = build_model(config, Shape{2, 8, 8}, 3, 37);
  REQUIRE(model->output_shape() == Shape{3});
  const Matrix x = random_matrix(6, 128, 41);
  const std::vector<std::int32_t> labels = {0, 1, 2, 2, 1, 0};
  ForwardContext ctx = training();  // the same counters: the same dropout mask in every forward
  Matrix grad;
  softmax_cross_entropy(model->forward(x, ctx), labels.data(), &grad);
  model->backward(grad, false, nullptr);
  ParameterStore& params = model->parameters();
  const std::vector<float> analytic(params.grads(), params.grads() + params.total());
  auto loss = [&] {
    return softmax_cross_entropy(model->forward(x, ctx), labels.data(), nullptr).loss_sum /
           static_cast<double>(x.rows());
  };
  const float eps = 1e-3f;
  double worst = 0.0;
  std::string where;
  for (const Parameter& p : params.list())
    for (std::size_t i = 0; i < p.count; ++i) {
      float& w = params.values()[p.offset + i];
      const float saved = w;
      w = saved + eps;
      const double up = loss();
      w = saved - eps;
      const double down = loss();
      w = saved;
      const double numeric = (up - down) / (2.0 * eps);
      const double error = std::abs(numeric - analytic[p.offset + i]) / (5e-4 + 1e-2 * std::abs(numeric));
      if (error > worst) {
        worst = error;
        where = p.name + "[" + std::to_string(i) + "]";
      }
    }
  INFO("worst error / tolerance " << worst << " at " << where);
  CHECK(worst < 1.0);
}
