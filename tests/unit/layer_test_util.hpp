#pragma once
// Helpers shared by the layer unit tests: deterministic inputs, one-layer
// models, and a gradient check against central finite differences.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/random.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp::test {

// The message build_model throws for `layers` on samples of shape `input` with
// `outputs` classes, or "(accepted)".
inline std::string refusal_of(const std::string& layers, const Shape& input, std::size_t outputs = 3) {
  ModelConfig config;
  config.layers = layers;
  try {
    build_model(config, input, outputs, 1);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Element (r, c) of any matrix (Matrix::at reads host storage only, and a
// model's activations live in its device's memory, host memory on the CPU).
inline float element(const Matrix& m, std::size_t r, std::size_t c) {
  return m.data()[r * m.cols() + c];
}

inline Matrix random_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, float scale = 1.0f) {
  Matrix m(rows, cols);
  CounterRng rng(seed);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = (2.0f * rng.uniform(i) - 1.0f) * scale;
  return m;
}

// Values k * gap in a seeded order: no two within `gap`, so max pooling's winner
// cannot change under a finite-difference step smaller than gap / 2.
inline Matrix distinct_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, float gap) {
  Matrix m(rows, cols);
  std::vector<std::size_t> order(m.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  CounterRng rng(seed);
  for (std::size_t i = order.size(); i-- > 1;)  // Fisher-Yates
    std::swap(order[i], order[static_cast<std::size_t>(rng.uniform(i) * static_cast<float>(i + 1)) % (i + 1)]);
  const float centre = 0.5f * gap * static_cast<float>(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = gap * static_cast<float>(order[i]) - centre;
  return m;
}

inline std::unique_ptr<Sequential> one_layer(std::unique_ptr<Layer> layer, const Shape& input, std::uint64_t seed = 1) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::move(layer));
  return std::make_unique<Sequential>(std::move(layers), input, seed);
}

// Overwrites every parameter with seeded values in [-1, 1] (BatchNorm's weight
// starts at 1 and bias at 0, which would hide a missing or swapped term).
inline void randomize_parameters(Sequential& model, std::uint64_t seed) {
  ParameterStore& p = model.parameters();
  CounterRng rng(seed);
  for (std::size_t i = 0; i < p.total(); ++i) p.values()[i] = 2.0f * rng.uniform(i) - 1.0f;
}

struct GradientTolerance {
  float step;       // finite-difference step
  double absolute;  // allowed |numeric - analytic| = absolute + relative * |numeric|
  double relative;
};

// Checks dL/dx and dL/d(every parameter) of L = sum(model(x) * r) (r a fixed
// random tensor: backward gets dy = r) against central differences computed
// from float forward passes in double.
inline void check_gradients(Sequential& model, Matrix x, const ForwardContext& ctx, const GradientTolerance& tol,
                            const std::string& what) {
  const Matrix& y0 = model.forward(x, ctx);
  const Matrix r = random_matrix(y0.rows(), y0.cols(), 4242);
  Matrix dx;
  model.backward(r, false, nullptr, &dx);
  ParameterStore& params = model.parameters();
  const std::vector<float> analytic_params(params.grads(), params.grads() + params.total());
  const std::vector<float> analytic_x(dx.data(), dx.data() + dx.size());
  REQUIRE(dx.rows() == x.rows());
  REQUIRE(dx.cols() == x.cols());

  auto loss = [&] {
    const Matrix& y = model.forward(x, ctx);
    double sum = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y.data()[i]) * r.data()[i];
    return sum;
  };
  double worst = 0.0;
  std::string worst_at;
  auto probe = [&](float& v, float analytic, const std::string& where) {
    const float saved = v;
    v = saved + tol.step;
    const double up = loss();
    v = saved - tol.step;
    const double down = loss();
    v = saved;
    const double numeric = (up - down) / (2.0 * static_cast<double>(tol.step));
    const double error = std::abs(numeric - analytic) / (tol.absolute + tol.relative * std::abs(numeric));
    if (error > worst) {
      worst = error;
      worst_at = where + ": numeric " + std::to_string(numeric) + ", analytic " + std::to_string(analytic);
    }
  };
  for (std::size_t i = 0; i < x.size(); ++i) probe(x.data()[i], analytic_x[i], "x[" + std::to_string(i) + "]");
  for (const Parameter& p : params.list())
    for (std::size_t i = 0; i < p.count; ++i)
      probe(params.values()[p.offset + i], analytic_params[p.offset + i], p.name + "[" + std::to_string(i) + "]");
  INFO(what << ": worst error / tolerance " << worst << " at " << worst_at);
  CHECK(worst < 1.0);
}

}  // namespace mpiddp::test
