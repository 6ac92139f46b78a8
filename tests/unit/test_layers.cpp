// Layer and loss gradients against central finite differences.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <memory>

#include "mpiddp/common/random.hpp"
#include "mpiddp/nn/layers.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model_builder.hpp"

using namespace mpiddp;

namespace {

Matrix random_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, float scale = 1.0f) {
  Matrix m(rows, cols);
  CounterRng rng(seed);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = (2.0f * rng.uniform(i) - 1.0f) * scale;
  return m;
}

// Loss of the model on (x, labels) as a double, for finite differences.
double loss_of(Sequential& model, const Matrix& x, const std::vector<std::int32_t>& labels) {
  ForwardContext ctx;
  ctx.training = false;
  const Matrix& out = model.forward(x, ctx);
  return softmax_cross_entropy(out, labels.data(), nullptr).loss_sum / static_cast<double>(x.rows());
}

void check_model_gradients(ActivationKind activation) {
  ModelConfig config;
  config.hidden_sizes = {7, 5};
  config.activation = activation;
  auto model = build_mlp(config, 6, 4, 123);
  const Matrix x = random_matrix(9, 6, 7);
  const std::vector<std::int32_t> labels = {0, 1, 2, 3, 0, 1, 2, 3, 1};

  ForwardContext ctx;
  ctx.training = false;
  Matrix grad;
  softmax_cross_entropy(model->forward(x, ctx), labels.data(), &grad);
  model->backward(grad, false, nullptr);

  ParameterStore& params = model->parameters();
  const std::vector<float> analytic(params.grads(), params.grads() + params.total());
  const float eps = 1e-3f;
  double worst = 0.0;
  for (std::size_t i = 0; i < params.total(); ++i) {
    float& w = params.values()[i];
    const float saved = w;
    w = saved + eps;
    const double up = loss_of(*model, x, labels);
    w = saved - eps;
    const double down = loss_of(*model, x, labels);
    w = saved;
    const double numeric = (up - down) / (2.0 * eps);
    // Float forward passes: allow 5e-4 absolute (rounding of the loss) plus 1% relative.
    worst = std::max(worst, std::abs(numeric - analytic[i]) / (5e-4 + 1e-2 * std::abs(numeric)));
  }
  INFO("activation " << name_of(activation) << ", worst error / tolerance " << worst);
  CHECK(worst < 1.0);
}

}  // namespace

TEST_CASE("MLP gradients match finite differences", "[nn]") {
  for (ActivationKind act : {ActivationKind::relu, ActivationKind::gelu, ActivationKind::tanh})
    check_model_gradients(act);
}

TEST_CASE("Linear computes x W^T + b in PyTorch's layout", "[nn]") {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Linear>(2));
  Sequential model(std::move(layers), Shape{3}, 1);
  ParameterStore& p = model.parameters();
  REQUIRE(p.list()[0].name == "layers.0.weight");
  REQUIRE(p.list()[0].shape == std::vector<std::size_t>{2, 3});
  const float w[] = {1, 2, 3, 4, 5, 6}, b[] = {0.5f, -1};
  std::copy(w, w + 6, p.value(0));
  std::copy(b, b + 2, p.value(1));
  Matrix x(1, 3);
  x.at(0, 0) = 1;
  x.at(0, 1) = 0;
  x.at(0, 2) = -1;
  const Matrix& y = model.forward(x, ForwardContext{});
  CHECK(y.at(0, 0) == Approx(1 - 3 + 0.5));
  CHECK(y.at(0, 1) == Approx(4 - 6 - 1));
}

TEST_CASE("softmax cross-entropy value, gradient and accuracy", "[loss]") {
  Matrix logits(2, 3);
  const float z[] = {1, 2, 3, 0, 0, 0};
  std::copy(z, z + 6, logits.data());
  const std::int32_t labels[] = {2, 1};
  Matrix grad;
  const LossResult r = softmax_cross_entropy(logits, labels, &grad);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(r.loss_sum == Approx((lse - 3) + std::log(3.0)));
  CHECK(r.correct == 1);  // row 0 predicts 2 (right); row 1 ties, argmax 0 (wrong)
  CHECK(grad.at(0, 2) == Approx((std::exp(3.0 - lse) - 1) / 2));
  CHECK(grad.at(1, 0) == Approx((1.0 / 3) / 2));
}

TEST_CASE("mean squared error matches PyTorch's mean reduction", "[loss]") {
  Matrix out(2, 2);
  const float o[] = {1, 2, 3, 4};
  std::copy(o, o + 4, out.data());
  const float t[] = {0, 2, 3, 2};
  Matrix grad;
  const LossResult r = mean_squared_error(out, t, &grad);
  CHECK(r.loss_sum / r.count == Approx((1.0 + 0 + 0 + 4) / 4));
  CHECK(grad.at(0, 0) == Approx(2.0 * 1 / 4));
  CHECK(grad.at(1, 1) == Approx(2.0 * 2 / 4));
}

TEST_CASE("dropout keeps the expectation and is a pure function of its counters", "[nn]") {
  Dropout drop(0.25, 3);
  const Matrix x = random_matrix(64, 64, 11);
  Matrix a, b, c;
  ForwardContext ctx;
  ctx.seed = 5;
  ctx.counter = 9;
  drop.forward(x, a, ctx);
  drop.forward(x, b, ctx);
  ctx.counter = 10;
  drop.forward(x, c, ctx);
  std::size_t zeros = 0, differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    CHECK(a.data()[i] == b.data()[i]);
    zeros += a.data()[i] == 0.0f;
    differ += a.data()[i] != c.data()[i];
    if (a.data()[i] != 0.0f) CHECK(a.data()[i] == Approx(x.data()[i] / 0.75f));
  }
  CHECK(zeros > 900);   // ~1024 expected
  CHECK(zeros < 1150);
  CHECK(differ > 500);  // another micro-batch, another mask
  ctx.training = false;
  drop.forward(x, a, ctx);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(a.data()[i] == x.data()[i]);
}

TEST_CASE("weight initialisation is seeded and PyTorch-bounded", "[nn]") {
  ModelConfig config;
  config.hidden_sizes = {16};
  auto a = build_mlp(config, 100, 3, 42), b = build_mlp(config, 100, 3, 42), c = build_mlp(config, 100, 3, 43);
  const auto& p = a->parameters();
  bool same = true, differs = false;
  for (std::size_t i = 0; i < p.total(); ++i) {
    same = same && p.values()[i] == b->parameters().values()[i];
    differs = differs || p.values()[i] != c->parameters().values()[i];
  }
  CHECK(same);
  CHECK(differs);
  for (std::size_t i = 0; i < 1600; ++i) CHECK(std::abs(p.values()[i]) <= 0.1f);  // 1/sqrt(100)
}
