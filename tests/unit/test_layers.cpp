// Layer and loss gradients against central finite differences; NaN through the layers.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>

#include "layer_test_util.hpp"
#include "mpiddp/common/random.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/conv_layers.hpp"
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
  config.hidden = {7, 5};
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

TEST_CASE("label smoothing gives PyTorch's cross_entropy(label_smoothing=S) and its gradient", "[loss]") {
  // The values: torch.nn.functional.cross_entropy in double (loss x rows, gradient).
  Matrix logits(3, 4);
  const float z[] = {1, 2, 3, -0.5f, 0, 0, 0, 0, 4, -1, 0.25f, 2};
  std::copy(z, z + 12, logits.data());
  const std::int32_t labels[] = {2, 1, 3};
  struct Expected {
    float smoothing;
    double loss_sum;
    float grad[12];
  };
  const Expected cases[] = {
      {0.1f, 4.198267983311264, {0.021085869f, 0.0716363498f, -0.0909531968f, -0.001769022f, 0.075f, -0.225f, 0.075f,
                                 0.075f, 0.27764463f, -0.00640642897f, -0.00160777627f, -0.269630425f}},
      {0.35f, 4.776392983311263, {0.000252535679f, 0.0508030165f, -0.0284531968f, -0.0226023553f, 0.0541666667f,
                                  -0.1625f, 0.0541666667f, 0.0541666667f, 0.256811297f, -0.0272397623f,
                                  -0.0224411096f, -0.207130425f}}};
  for (const Expected& e : cases) {
    INFO("label_smoothing " << e.smoothing);
    Matrix grad;
    const LossResult r = softmax_cross_entropy(logits, labels, &grad, e.smoothing);
    CHECK(r.loss_sum == Approx(e.loss_sum).epsilon(1e-6));  // S is a float, torch's a double
    CHECK(r.correct == 1);
    for (int i = 0; i < 12; ++i) CHECK(grad.data()[i] == Approx(e.grad[i]).margin(1e-7));
  }
  // 0 is the plain loss, to the bit.
  Matrix plain, zero;
  const double plain_loss = softmax_cross_entropy(logits, labels, &plain).loss_sum;
  CHECK(softmax_cross_entropy(logits, labels, &zero, 0.0f).loss_sum == plain_loss);
  CHECK(std::equal(plain.data(), plain.data() + 12, zero.data()));
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
  config.hidden = {16};
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

// ---- NaN and Inf pass through the layers as in PyTorch (issue 22) ----
// relu(NaN) = NaN and a max-pooling window with a NaN gives NaN (its gradient
// going to the window's last NaN): a NaN turned into 0 would hide a broken input
// or weight. The expected values are PyTorch 1.13's; test_hostile_numbers.sh
// also compares the cases of nan_cases() with PyTorch itself (the hidden test
// "[nan_cases]" below writes what mpiddp computes).
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct NanCase {
  std::string name;  // what test_hostile_numbers.sh rebuilds in PyTorch: "relu", "maxpool2d(3,1)", ...
  std::function<std::unique_ptr<Layer>()> make;
  Shape input;
  std::size_t batch;
  std::vector<float> x;
};

std::vector<NanCase> nan_cases() {
  const std::vector<float> flat = {kNaN, -1, 2, -0.0f, kInf, -kInf, 0.5f, kNaN};
  auto activation = [](ActivationKind kind) { return [kind] { return std::make_unique<Activation>(kind); }; };
  auto pool = [](PoolKind kind, int k, int s) { return [=] { return std::make_unique<Pool2d>(kind, k, s); }; };
  return {
      {"relu", activation(ActivationKind::relu), {8}, 1, flat},
      {"gelu", activation(ActivationKind::gelu), {8}, 1, flat},
      {"tanh", activation(ActivationKind::tanh), {8}, 1, flat},
      // The 2x2 path and the general one; windows with one NaN, two NaNs and none.
      {"maxpool2d(2,2)", pool(PoolKind::max, 2, 2), {1, 2, 6}, 1, {kNaN, 1, kNaN, 2, 4, 1, 3, kNaN, 0, 5, 2, 3}},
      {"maxpool2d(3,1)", pool(PoolKind::max, 3, 1), {1, 3, 4}, 1, {1, kNaN, 4, 2, 3, 0, kNaN, kNaN, 7, 1, 2, 5}},
      {"avgpool2d(2,2)", pool(PoolKind::average, 2, 2), {1, 2, 4}, 1, {kNaN, 1, 3, 2, 3, 4, 0, 5}},
      {"batchnorm2d", [] { return std::make_unique<BatchNorm>(2, 1e-5, 0.1, false); }, {2, 2, 2}, 2,
       {1, 2, 3, 4, 1, kNaN, 0, 2, 5, 6, 7, 8, 3, 1, 2, 2}},
  };
}

struct NanResult {
  std::vector<float> y, dx, running_var;
};

// One training forward and backward with dy = 1, 2, 3, ...
NanResult run_nan_case(const NanCase& c) {
  auto model = test::one_layer(c.make(), c.input);
  Matrix x(c.batch, element_count(c.input));
  std::copy(c.x.begin(), c.x.end(), x.data());
  const Matrix& y = model->forward(x, ForwardContext{});
  Matrix dy(y.rows(), y.cols()), dx;
  for (std::size_t i = 0; i < dy.size(); ++i) dy.data()[i] = static_cast<float>(i + 1);
  NanResult r{{y.data(), y.data() + y.size()}, {}, {}};
  model->backward(dy, false, nullptr, &dx);
  r.dx.assign(dx.data(), dx.data() + dx.size());
  ParameterStore& p = model->parameters();
  if (!p.buffer_list().empty()) r.running_var.assign(p.buffer(1), p.buffer(1) + p.buffer_list()[1].count);
  return r;
}

// Equal, NaN where expected NaN (0 == -0: PyTorch's relu(-0) is -0, mpiddp's 0).
bool same_values(const std::vector<float>& got, const std::vector<float>& expected) {
  if (got.size() != expected.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::isnan(expected[i]) ? !std::isnan(got[i]) : got[i] != Approx(expected[i]).epsilon(1e-5)) return false;
  return true;
}

const NanCase& nan_case(const std::string& name) {
  static const std::vector<NanCase> cases = nan_cases();
  for (const NanCase& c : cases)
    if (c.name == name) return c;
  FAIL("no NaN case " << name);
  throw std::logic_error("unreachable");
}

// JSON numbers as Python's json reads them (NaN, Infinity), exact for floats.
std::string json_numbers(const std::vector<float>& values) {
  std::string text;
  for (float v : values) {
    char number[32];
    if (std::isnan(v)) std::snprintf(number, sizeof(number), "NaN");
    else if (std::isinf(v)) std::snprintf(number, sizeof(number), v > 0 ? "Infinity" : "-Infinity");
    else std::snprintf(number, sizeof(number), "%.9g", static_cast<double>(v));
    text += (text.empty() ? "" : ", ") + std::string(number);
  }
  return "[" + text + "]";
}

}  // namespace

TEST_CASE("ReLU passes NaN forward and its gradient at NaN, as PyTorch", "[nn][nan]") {
  const NanResult r = run_nan_case(nan_case("relu"));
  // torch.relu(x); x.grad for dy = 1..8
  CHECK(same_values(r.y, {kNaN, 0, 2, 0, kInf, 0, 0.5f, kNaN}));
  CHECK(same_values(r.dx, {1, 0, 3, 0, 5, 0, 7, 8}));
}

TEST_CASE("max pooling gives NaN for a window with a NaN, its gradient to the last NaN, as PyTorch", "[nn][nan]") {
  // torch.nn.functional.max_pool2d(x, 2, return_indices=True): indices 7, 2, 4.
  const NanResult two = run_nan_case(nan_case("maxpool2d(2,2)"));
  CHECK(same_values(two.y, {kNaN, kNaN, 4}));
  CHECK(same_values(two.dx, {0, 0, 2, 0, 3, 0, 0, 1, 0, 0, 0, 0}));
  // max_pool2d(x, 3, 1): indices 6 and 7.
  const NanResult three = run_nan_case(nan_case("maxpool2d(3,1)"));
  CHECK(same_values(three.y, {kNaN, kNaN}));
  CHECK(same_values(three.dx, {0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0}));
}

TEST_CASE("BatchNorm's statistics of a channel with a NaN are NaN, as PyTorch's", "[nn][nan]") {
  const NanResult r = run_nan_case(nan_case("batchnorm2d"));
  // torch.nn.BatchNorm2d(2) in training: running_var = [1.5, nan], channel 1 all NaN.
  CHECK(same_values(r.running_var, {1.5f, kNaN}));
  for (std::size_t sample = 0; sample < 2; ++sample)
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(std::isfinite(r.y[sample * 8 + i]));
      CHECK(std::isnan(r.y[sample * 8 + 4 + i]));
    }
}

TEST_CASE("NaN cases for test_hostile_numbers.sh to compare with PyTorch", "[.][nan_cases]") {
  const char* path = std::getenv("MPIDDP_NAN_CASES");
  REQUIRE(path);
  std::ofstream out(path);
  for (const NanCase& c : nan_cases()) {
    const NanResult r = run_nan_case(c);
    std::vector<std::size_t> shape{c.batch};
    shape.insert(shape.end(), c.input.begin(), c.input.end());
    std::string dims;
    for (std::size_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    out << "{\"name\": \"" << c.name << "\", \"shape\": [" << dims << "], \"x\": " << json_numbers(c.x)
        << ", \"y\": " << json_numbers(r.y) << ", \"dx\": " << json_numbers(r.dx)
        << ", \"running_var\": " << json_numbers(r.running_var) << "}\n";
  }
  REQUIRE(out.good());
}
