// Layers that take the layers after them into their own passes over memory
// (Layer::absorb_next): BatchNorm takes a ReLU and then a tiling max pooling,
// a residual block takes a ReLU. The model as built, fused, against its layers
// run one by one: outputs, input gradients, parameter gradients and buffers
// bit for bit, in training and in evaluation.
#include <catch2/catch.hpp>
#include <cstring>

#include "layer_test_util.hpp"
#include "mpiddp/nn/model_builder.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

// The model's layers run one by one, nothing fused: forward, then backward from
// dy. Returns the output; the input gradient goes to dx.
Matrix layers_one_by_one(Sequential& model, const Matrix& x, const Matrix& dy, Matrix& dx, bool training) {
  const auto& layers = model.layers();
  for (const auto& layer : layers) layer->absorb_next(nullptr, 0);
  std::vector<Matrix> outputs(layers.size()), grads(layers.size());
  ForwardContext ctx;
  ctx.training = training;
  for (std::size_t i = 0; i < layers.size(); ++i) layers[i]->forward(i ? outputs[i - 1] : x, outputs[i], ctx);
  for (std::size_t i = layers.size(); i-- > 0;)
    layers[i]->backward(i ? outputs[i - 1] : x, outputs[i], i + 1 < layers.size() ? grads[i + 1] : dy, &grads[i],
                        model.parameters(), false);
  dx = grads[0];
  return outputs.back();
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

TEST_CASE("layers take in the ones after them, bit for bit as the layers one by one", "[nn][batchnorm][residual]") {
  struct Case {
    const char* layers;
    Shape input;
    std::vector<std::size_t> absorbed;
  };
  // Planes of 35, 9 and 195 values: whole lanes of 8 and a tail; pooling windows
  // that leave a last row or column out (7 x 5 by 2, 15 x 13 by 3).
  const Case cases[] = {
      {"conv2d(3,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(4,3,padding=1) batchnorm2d relu relu flatten "
       "linear(6) batchnorm1d relu linear",
       {2, 7, 5}, {2, 3, 6, 11}},
      {"batchnorm1d relu linear(5) batchnorm1d gelu linear", {6}, {1}},
      // Overlapping windows (stride 1 < kernel 2), an average pooling and a pooling
      // without a ReLU before it stay layers of their own.
      {"batchnorm2d relu maxpool2d(3) conv2d(2,1) batchnorm2d relu maxpool2d(2,1) batchnorm2d relu avgpool2d(2) "
       "batchnorm2d maxpool2d(1) flatten linear",
       {3, 15, 13}, {1, 2, 5, 8}},
      // A residual takes in the ReLU after it (at the top level and in a branch),
      // not a second one; 100 values a sample, so lines of 16 and a tail.
      {"residual(conv2d(4,3,padding=1) batchnorm2d relu conv2d(4,3,padding=1) batchnorm2d) relu "
       "residual(conv2d(8,3,stride=2,padding=1) batchnorm2d ; conv2d(8,1,stride=2)) relu relu flatten linear",
       {4, 5, 5}, {1, 3}},
      {"linear(6) residual(residual(linear(6)) relu linear(6)) relu linear", {6}, {2}},
      {"residual(linear(6) relu) gelu residual(linear(6)) relu linear", {6}, {3}},
  };
  for (const Case& c : cases)
    for (bool training : {true, false}) {
      INFO(c.layers << (training ? " (training)" : " (evaluation)"));
      ModelConfig config;
      config.layers = c.layers;
      auto fused = build_model(config, c.input, 3, 7);
      auto plain = build_model(config, c.input, 3, 7);
      randomize_parameters(*fused, 61);
      randomize_parameters(*plain, 61);
      std::vector<std::size_t> absorbed;
      for (std::size_t i = 0; i < fused->absorbed().size(); ++i)
        if (fused->absorbed()[i]) absorbed.push_back(i);
      CHECK(absorbed == c.absorbed);  // a second ReLU in a row stays a layer of its own; a GELU too

      const Matrix x = random_matrix(5, element_count(c.input), 67, 2.0f);
      const Matrix dy = random_matrix(5, fused->out_features(), 71);
      ForwardContext ctx;
      ctx.training = training;
      const Matrix y = fused->forward(x, ctx);
      Matrix dx, dx_plain;
      fused->backward(dy, false, {}, &dx);
      const Matrix y_plain = layers_one_by_one(*plain, x, dy, dx_plain, training);

      CHECK(same_bits(y.data(), y_plain.data(), y.size()));
      CHECK(same_bits(dx.data(), dx_plain.data(), dx.size()));
      const ParameterStore& a = fused->parameters();
      const ParameterStore& b = plain->parameters();
      CHECK(same_bits(a.host_grads(), b.host_grads(), a.total()));
      CHECK(same_bits(a.host_buffers(), b.host_buffers(), a.buffer_total()));
    }
}
