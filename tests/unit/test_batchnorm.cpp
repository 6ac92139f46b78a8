// BatchNorm's state against PyTorch's rules, computed here in double: running
// statistics (momentum, unbiased variance), evaluation with them, and
// num_batches_tracked.
#include <catch2/catch.hpp>

#include "layer_test_util.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/model_builder.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

struct Moments {
  std::vector<double> mean, biased, unbiased;
};

// Per-channel statistics of a batch of samples {C, spatial...}.
Moments moments_of(const Matrix& x, std::size_t channels) {
  const std::size_t spatial = x.cols() / channels, count = x.rows() * spatial;
  Moments m{std::vector<double>(channels), std::vector<double>(channels), std::vector<double>(channels)};
  for (std::size_t c = 0; c < channels; ++c) {
    double sum = 0, squares = 0;
    for (std::size_t s = 0; s < x.rows(); ++s)
      for (std::size_t q = 0; q < spatial; ++q) sum += x.at(s, c * spatial + q);
    m.mean[c] = sum / static_cast<double>(count);
    for (std::size_t s = 0; s < x.rows(); ++s)
      for (std::size_t q = 0; q < spatial; ++q) squares += std::pow(x.at(s, c * spatial + q) - m.mean[c], 2);
    m.biased[c] = squares / static_cast<double>(count);
    m.unbiased[c] = squares / static_cast<double>(count - 1);
  }
  return m;
}

struct Buffers {
  const float* running_mean;
  const float* running_var;
  std::int64_t batches;
};

Buffers buffers_of(Sequential& model) {
  ParameterStore& p = model.parameters();
  REQUIRE(p.buffer_list().size() == 2);
  REQUIRE(p.buffer_list()[0].name == "layers.0.running_mean");
  REQUIRE(p.buffer_list()[1].name == "layers.0.running_var");
  REQUIRE(p.counter_names() == std::vector<std::string>{"layers.0.num_batches_tracked"});
  return {p.buffer(0), p.buffer(1), p.counter(0)};
}

}  // namespace

TEST_CASE("BatchNorm updates running statistics with momentum and the unbiased variance", "[nn][batchnorm]") {
  const double momentum = 0.3;
  for (int dims : {1, 2}) {
    const Shape in = dims == 2 ? Shape{3, 4, 5} : Shape{6};
    const std::size_t channels = in[0];
    auto model = one_layer(std::make_unique<BatchNorm>(dims, 1e-5, momentum, false), in);
    Buffers b = buffers_of(*model);
    for (std::size_t c = 0; c < channels; ++c) {  // PyTorch's initial state
      CHECK(b.running_mean[c] == 0.0f);
      CHECK(b.running_var[c] == 1.0f);
    }
    CHECK(b.batches == 0);
    std::vector<double> mean(channels, 0.0), var(channels, 1.0);
    ForwardContext ctx;
    for (int step = 0; step < 3; ++step) {
      Matrix x = random_matrix(5, element_count(in), 100 + step, 1.5f + step);
      for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] += static_cast<float>(step) - 0.7f;
      const Matrix& y = model->forward(x, ctx);
      const Moments m = moments_of(x, channels);
      // The output is normalised with the biased variance (weight 1, bias 0).
      const std::size_t spatial = element_count(in) / channels;
      for (std::size_t c = 0; c < channels; ++c)
        for (std::size_t q = 0; q < spatial; ++q) {
          const double expected = (x.at(1, c * spatial + q) - m.mean[c]) / std::sqrt(m.biased[c] + 1e-5);
          CHECK(element(y, 1, c * spatial + q) == Approx(expected).margin(2e-5));
        }
      b = buffers_of(*model);
      for (std::size_t c = 0; c < channels; ++c) {
        mean[c] = (1 - momentum) * mean[c] + momentum * m.mean[c];
        var[c] = (1 - momentum) * var[c] + momentum * m.unbiased[c];
        INFO("batchnorm" << dims << "d, step " << step << ", channel " << c);
        CHECK(b.running_mean[c] == Approx(mean[c]).epsilon(1e-5).margin(1e-6));
        CHECK(b.running_var[c] == Approx(var[c]).epsilon(1e-5));
      }
      CHECK(b.batches == step + 1);
    }
  }
}

TEST_CASE("BatchNorm in evaluation uses the running statistics and changes no state", "[nn][batchnorm]") {
  const Shape in{2, 3, 3};
  auto model = one_layer(std::make_unique<BatchNorm>(2, 1e-3, 0.1, false), in);
  randomize_parameters(*model, 43);
  ParameterStore& p = model->parameters();
  const float running_mean[] = {0.5f, -1.25f}, running_var[] = {2.0f, 0.25f};
  std::copy(running_mean, running_mean + 2, p.buffer(0));
  std::copy(running_var, running_var + 2, p.buffer(1));
  p.counter(0) = 7;
  const Matrix x = random_matrix(4, element_count(in), 47, 3.0f);
  ForwardContext ctx;
  ctx.training = false;
  const Matrix& y = model->forward(x, ctx);
  const float* weight = p.value(0);
  const float* bias = p.value(1);
  for (std::size_t s = 0; s < x.rows(); ++s)
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t q = 0; q < 9; ++q) {
        const double expected =
            (x.at(s, c * 9 + q) - running_mean[c]) / std::sqrt(running_var[c] + 1e-3) * weight[c] + bias[c];
        CHECK(element(y, s, c * 9 + q) == Approx(expected).margin(1e-5));
      }
  // A batch of one sample is fine in evaluation (no batch statistics needed).
  Matrix one = random_matrix(1, element_count(in), 53);
  model->forward(one, ctx);
  for (std::size_t c = 0; c < 2; ++c) {
    CHECK(p.buffer(0)[c] == running_mean[c]);
    CHECK(p.buffer(1)[c] == running_var[c]);
  }
  CHECK(p.counter(0) == 7);
}

TEST_CASE("BatchNorm refuses a training batch with one value per channel", "[nn][batchnorm]") {
  auto model = one_layer(std::make_unique<BatchNorm>(1, 1e-5, 0.1, false), Shape{4});
  const Matrix x = random_matrix(1, 4, 59);
  try {
    model->forward(x, ForwardContext{});
    FAIL("no error");
  } catch (const std::exception& e) {
    const std::string text = e.what();
    CHECK_THAT(text, Catch::Contains("model.layers: layer 1 (layers.0) BatchNorm1d"));
    CHECK_THAT(text, Catch::Contains("1 value per channel"));
  }
  CHECK(model->parameters().counter(0) == 0);
}
