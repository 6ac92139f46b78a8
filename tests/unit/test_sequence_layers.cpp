// Sequence-model layers: GPT-2 124M's size from a shape-only pass (nothing is
// allocated), names and shapes of a small GPT, the tie refusals, and attention
// dropout (nanoGPT's attn_dropout and resid_dropout).
#include <catch2/catch.hpp>

#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "layer_test_util.hpp"

using namespace mpiddp;

namespace {

std::string gpt2_layers(int blocks, int d, int heads, long vocab, const std::string& head) {
  std::string layers = "embedding(" + std::to_string(vocab) + "," + std::to_string(d) + ") position_embedding";
  for (int i = 0; i < blocks; ++i)
    layers += " residual(layernorm causal_self_attention(" + std::to_string(heads) + ")) residual(layernorm linear(" +
              std::to_string(4 * d) + ") gelu(approximate=tanh) linear(" + std::to_string(d) + "))";
  return layers + " layernorm " + head;
}

std::string refusal(const std::string& layers) { return test::refusal_of(layers, Shape{8}, 11); }

}  // namespace

TEST_CASE("GPT-2 124M has 124,439,808 parameters with its output layer tied", "[nn][sequence]") {
  ModelConfig config;
  config.layers = gpt2_layers(12, 768, 12, 50257, "linear(tie=0)");
  const ModelPlan tied = plan_model(config, Shape{1024}, 50257, 1);
  CHECK(tied.parameters == 124439808.0);
  // Untied, the head adds its own 50257 x 768 weight (no bias).
  config.layers = gpt2_layers(12, 768, 12, 50257, "linear(bias=false)");
  CHECK(plan_model(config, Shape{1024}, 50257, 1).parameters == 124439808.0 + 50257.0 * 768.0);
}

TEST_CASE("a small GPT's names and shapes are nanoGPT's", "[nn][sequence]") {
  ModelConfig config;
  config.layers = gpt2_layers(1, 8, 2, 11, "linear(tie=0)");
  auto model = build_model(config, Shape{5}, 11, 1);
  CHECK(model->output_shape() == Shape{5, 11});
  std::vector<std::string> names;
  for (const auto& p : model->parameters().list()) names.push_back(p.name + " " + shape_text(p.shape));
  CHECK(names == std::vector<std::string>{
                     "layers.0.weight 11x8", "layers.1.weight 5x8", "layers.2.body.0.weight 8",
                     "layers.2.body.0.bias 8", "layers.2.body.1.c_attn.weight 24x8", "layers.2.body.1.c_attn.bias 24",
                     "layers.2.body.1.c_proj.weight 8x8", "layers.2.body.1.c_proj.bias 8", "layers.3.body.0.weight 8",
                     "layers.3.body.0.bias 8", "layers.3.body.1.weight 32x8", "layers.3.body.1.bias 32",
                     "layers.3.body.3.weight 8x32", "layers.3.body.3.bias 8", "layers.4.weight 8", "layers.4.bias 8"});
  // The tied head reports no parameter: the embedding, last in backward, reports the shared weight.
  CHECK(model->layers()[5]->parameter_indices().empty());
  CHECK(model->layers()[5]->arguments() == "in_features=8, out_features=11, bias=False, weight=layers.0.weight");
}

TEST_CASE("tie must name an earlier embedding at the top level, with matching sizes", "[nn][sequence]") {
  CHECK_THAT(refusal("embedding(11,8) linear(8,tie=1) linear"),
             Catch::Contains("tie=1 must name an earlier layer (an embedding)"));
  CHECK_THAT(refusal("embedding(11,8) linear(8) linear(tie=1)"),
             Catch::Contains("tie=1: layer 2 (layers.1) is Linear, not an embedding"));
  CHECK_THAT(refusal("embedding(11,8) residual(linear(8,tie=0)) linear"),
             Catch::Contains("tie=0 works at the top level of the list only"));
  CHECK_THAT(refusal("embedding(11,8) linear(4) linear(tie=0)"),
             Catch::Contains("tie=0: layer 1's weight is 11x8, but this linear maps 4 features to 11"));
  CHECK_THAT(refusal("embedding(11,8) causal_self_attention(2,dropout=1) linear"), Catch::Contains("dropout"));
  CHECK_THAT(refusal("embedding(11,8) linear(bias=maybe)"), Catch::Contains("bias 'maybe' is not true or false"));
}

TEST_CASE("attention dropout: off in evaluation, masks in training, exact gradients through the masks",
          "[nn][sequence]") {
  const Shape input{6, 8};
  auto make = [&](const std::string& layers) {
    auto model = std::make_unique<Sequential>(build_layers(layers, 3, false), input, 7);
    test::randomize_parameters(*model, 3);
    return model;
  };
  auto plain = make("causal_self_attention(2)");
  auto dropped = make("causal_self_attention(2,dropout=0.4)");
  CHECK(dropped->layers()[0]->arguments() == "n_embd=8, n_head=2, dropout=0.4");
  const Matrix x = test::random_matrix(5, element_count(input), 11);
  ForwardContext eval;
  eval.training = false;
  const Matrix& a = plain->forward(x, eval);
  const std::vector<float> expected(a.data(), a.data() + a.size());
  const Matrix& b = dropped->forward(x, eval);
  CHECK(std::vector<float>(b.data(), b.data() + b.size()) == expected);

  ForwardContext train;
  train.seed = 5;
  const Matrix& c = dropped->forward(x, train);
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < c.size(); ++i) zeros += c.data()[i] == 0.0f;
  // resid_dropout zeroes about 40% of the 240 outputs; the draw is fixed by the seed.
  CHECK(zeros > 60);
  CHECK(zeros < 130);
  const std::vector<float> first(c.data(), c.data() + c.size());
  const Matrix& again = dropped->forward(x, train);  // the same key: the same masks
  CHECK(std::vector<float>(again.data(), again.data() + again.size()) == first);
  train.counter = 1;  // the next micro-batch: other masks
  const Matrix& next = dropped->forward(x, train);
  CHECK(std::vector<float>(next.data(), next.data() + next.size()) != first);

  train.counter = 0;
  test::check_gradients(*dropped, x, train, {1e-2f, 2e-3, 2e-2}, "causal_self_attention with dropout 0.4");
}

TEST_CASE("training FLOPs per sample count every matrix product from the layers' geometry", "[nn][flops]") {
  ModelConfig config;
  // A GPT: per block c_attn, c_proj, two T x T products per head group, the MLP; then the tied head.
  const double t = 6, d = 8, v = 11, blocks = 2;
  config.layers = gpt2_layers(2, 8, 2, 11, "linear(tie=0)");
  auto gpt = build_model(config, Shape{6}, 11, 1);
  const double block = 2 * t * d * 3 * d + 2 * t * d * d + 4 * t * t * d + 2 * (2 * t * d * 4 * d);
  // The first layer (the embedding) does no product, so every product runs three times.
  CHECK(gpt->training_flops_per_sample() == Approx(3 * (blocks * block + 2 * t * d * v)).epsilon(1e-12));

  // A CNN whose first layer is a convolution: its input gradient is never computed (2 passes, not 3);
  // a residual block counts its body and its shortcut.
  config.layers = "conv2d(4,3,padding=1) relu residual(conv2d(6,3,stride=2,padding=1) ; conv2d(6,1,stride=2)) "
                  "flatten linear(10)";
  auto cnn = build_model(config, Shape{1, 8, 8}, 10, 1);
  const double conv1 = 2.0 * 4 * 8 * 8 * 1 * 9, body = 2.0 * 6 * 4 * 4 * 4 * 9, shortcut = 2.0 * 6 * 4 * 4 * 4;
  const double head = 2.0 * 6 * 4 * 4 * 10;
  CHECK(cnn->training_flops_per_sample() == Approx(2 * conv1 + 3 * (body + shortcut + head)).epsilon(1e-12));
}
