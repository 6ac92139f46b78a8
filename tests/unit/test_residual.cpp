// residual(BODY) and residual(BODY ; SHORTCUT): names, shapes, refusals, and the
// math (y = f(x) + g(x), gradients through both branches) on real layers.
#include <catch2/catch.hpp>

#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "layer_test_util.hpp"

using namespace mpiddp;

namespace {

std::string refusal(const std::string& layers, const Shape& input) { return test::refusal_of(layers, input); }

std::vector<std::string> parameter_names(const Sequential& model) {
  std::vector<std::string> names;
  for (const auto& p : model.parameters().list()) names.push_back(p.name + " " + shape_text(p.shape));
  return names;
}

}  // namespace

TEST_CASE("residual blocks name their layers as PyTorch's body/shortcut Sequentials", "[nn][residual]") {
  ModelConfig config;
  config.layers =
      "conv2d(4,3,padding=1) residual(conv2d(4,3,padding=1) batchnorm2d relu residual(relu conv2d(4,1))) "
      "residual(conv2d(8,3,stride=2,padding=1) ; conv2d(8,1,stride=2) batchnorm2d) flatten linear";
  auto model = build_model(config, Shape{1, 6, 6}, 3, 1);
  CHECK(model->layers()[1]->kind() == "Residual");
  CHECK(model->output_shape() == Shape{3});
  CHECK(parameter_names(*model) ==
        std::vector<std::string>{"layers.0.weight 4x1x3x3", "layers.0.bias 4", "layers.1.body.0.weight 4x4x3x3",
                                 "layers.1.body.0.bias 4", "layers.1.body.1.weight 4", "layers.1.body.1.bias 4",
                                 "layers.1.body.3.body.1.weight 4x4x1x1", "layers.1.body.3.body.1.bias 4",
                                 "layers.2.body.0.weight 8x4x3x3", "layers.2.body.0.bias 8",
                                 "layers.2.shortcut.0.weight 8x4x1x1", "layers.2.shortcut.0.bias 8",
                                 "layers.2.shortcut.1.weight 8", "layers.2.shortcut.1.bias 8",
                                 "layers.4.weight 3x72", "layers.4.bias 3"});
  CHECK(model->parameters().counter_names() ==
        std::vector<std::string>{"layers.1.body.1.num_batches_tracked", "layers.2.shortcut.1.num_batches_tracked"});
  // BatchNorm1d inside a block still needs two samples to train.
  CHECK(model->layers()[1]->min_training_batch() == 1);
  config.layers = "residual(linear(5) batchnorm1d) linear";
  CHECK(build_model(config, Shape{5}, 3, 1)->layers()[0]->min_training_batch() == 2);
}

TEST_CASE("residual refusals name the block, the branch layer and both shapes", "[nn][residual]") {
  const Shape image{1, 8, 8};
  CHECK_THAT(refusal("residual(conv2d(4,3,padding=1)) flatten linear", image),
             Catch::Contains("layer 1 (layers.0) Residual: its body gives 4x8x8 but its input (the identity shortcut) "
                             "is 1x8x8: the two are added, so they must agree (give a shortcut"));
  CHECK_THAT(refusal("residual(conv2d(4,3,stride=2) ; conv2d(4,1)) flatten linear", image),
             Catch::Contains("its body gives 4x3x3 but its shortcut gives 4x8x8"));
  CHECK_THAT(refusal("residual(relu conv2d(4,0)) flatten linear", image),
             Catch::Contains("layer 1 (layers.0) 'residual(relu conv2d(4,0))': body layer 2 (body.1) 'conv2d(4,0)': "
                             "kernel_size '0' is not a whole number"));
  CHECK_THAT(refusal("residual(relu ; maxpool2d(9)) flatten linear", image),
             Catch::Contains("shortcut layer 1 (shortcut.0) MaxPool2d"));
  CHECK_THAT(refusal("residual(relu ; relu ; relu) flatten linear", image),
             Catch::Contains("takes one layer list, or two separated by ';' (body ; shortcut), not 3"));
  CHECK_THAT(refusal("residual() flatten linear", image), Catch::Contains("needs a layer list"));
  CHECK_THAT(refusal("residual(relu ;) flatten linear", image), Catch::Contains("an empty layer list beside ';'"));
  CHECK_THAT(refusal("flatten residual(linear)", image), Catch::Contains("missing argument 'out_features'"));
  // Flat samples: an image layer inside a block is found as at the top level.
  CHECK_THAT(refusal("residual(conv2d(1,1)) flatten linear", Shape{64}), Catch::Contains("needs images"));
  // Nesting has a limit: a hostile list cannot recurse the builder off its stack.
  std::string deep = "relu";
  for (int i = 0; i < 40; ++i) deep = "residual(" + deep + ")";
  CHECK_THAT(refusal(deep + " flatten linear", image), Catch::Contains("parentheses nested deeper than 32"));
  // Nested parentheses stay refused outside a container.
  CHECK_THAT(refusal("linear(relu(3))", Shape{4}), Catch::Contains("nested parentheses are only for residual(...)"));
}

TEST_CASE("a residual block computes f(x) + x and sends dy through both paths", "[nn][residual]") {
  ModelConfig config;
  config.layers = "residual(linear(3))";
  auto model = build_model(config, Shape{3}, 3, 7);
  ParameterStore& p = model->parameters();
  const float w[] = {1, 2, 0, 0, 1, 0, -1, 0, 3}, b[] = {0.5f, 0, -1};
  std::copy(w, w + 9, p.value(0));
  std::copy(b, b + 3, p.value(1));
  Matrix x(2, 3);
  const float xs[] = {1, 2, 3, -1, 0, 2};
  std::copy(xs, xs + 6, x.data());
  const Matrix& y = model->forward(x, ForwardContext{});
  // Row 0: W x + b = (5.5, 2, 7), plus x = (6.5, 4, 10).
  CHECK(std::vector<float>(y.data(), y.data() + 3) == std::vector<float>{6.5f, 4, 10});
  Matrix dy(2, 3), dx;
  const float gs[] = {1, 0, 0, 0, 0, 1};
  std::copy(gs, gs + 6, dy.data());
  model->backward(dy, false, nullptr, &dx);
  // dx = dy W + dy: row 0 = (1, 2, 0) + (1, 0, 0); row 1 = (-1, 0, 3) + (0, 0, 1).
  CHECK(std::vector<float>(dx.data(), dx.data() + 6) == std::vector<float>{2, 2, 0, -1, 0, 4});
  // dW = dy^T x: row 0 of dW is x0 = (1, 2, 3); row 2 is x1 = (-1, 0, 2).
  CHECK(std::vector<float>(p.grad(0), p.grad(0) + 9) == std::vector<float>{1, 2, 3, 0, 0, 0, -1, 0, 2});
}
