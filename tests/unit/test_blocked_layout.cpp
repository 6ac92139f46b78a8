// train.blocked_layout: which activations plan_layouts() keeps in oneDNN's
// blocked layout, and that a model gives the same bits either way: outputs
// (training and evaluation), input and parameter gradients, running statistics.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "mpiddp/common/random.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/layouts.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "layer_test_util.hpp"

using namespace mpiddp;

namespace {

struct Results {
  std::vector<float> train_y, dx, grads, buffers, eval_y;
};

std::vector<float> values(const float* data, std::size_t count) { return {data, data + count}; }

// A training step's forward and backward, then an evaluation forward, of a fresh
// model (the same initial weights for the same seed) with its layouts planned.
Results run(const std::string& layers, const Shape& input, bool blocked, std::size_t samples, std::size_t* planned) {
  ModelConfig config;
  config.layers = layers;
  auto model = build_model(config, input, 3, 11);
  test::randomize_parameters(*model, 5);
  model->plan_layouts(blocked);
  *planned = model->blocked_activations();
  const Matrix x = test::random_matrix(samples, element_count(input), 21);
  Results r;
  ForwardContext training;
  const Matrix& y = model->forward(x, training);
  r.train_y = values(y.data(), y.size());
  const Matrix dy = test::random_matrix(y.rows(), y.cols(), 22);
  Matrix dx;
  model->backward(dy, false, nullptr, &dx);
  r.dx = values(dx.data(), dx.size());
  ParameterStore& p = model->parameters();
  r.grads = values(p.grads(), p.total());
  r.buffers = values(p.host_buffers(), p.buffer_total());
  ForwardContext evaluation;
  evaluation.training = false;
  const Matrix& e = model->forward(x, evaluation);
  r.eval_y = values(e.data(), e.size());
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // (memcmp must not see the null data of an empty vector: a model without buffers has none.)
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("a model gives the same bits with its activations blocked as in NCHW", "[nn][layout]") {
  if (!cpu::onednn_linked()) SUCCEED("built without oneDNN: nothing is blocked");
  // Planes of 36 and 9 positions (not whole eights: the sums' tails), a stem
  // whose BatchNorm pools into the blocked layout, a projection shortcut, a
  // non-global and a global average pooling, SyncBatchNorm's ops, GELU.
  const std::string resnet =
      "conv2d(16,3,padding=1) batchnorm2d relu maxpool2d(2) "
      "residual(conv2d(16,3,padding=1) batchnorm2d relu conv2d(16,3,padding=1) batchnorm2d) relu "
      "residual(conv2d(32,3,stride=2,padding=1) batchnorm2d relu conv2d(32,3,padding=1) batchnorm2d ; "
      "conv2d(32,1,stride=2) batchnorm2d) relu avgpool2d(3) flatten linear";
  const std::string pooled =
      "conv2d(32,3,padding=1) batchnorm2d gelu avgpool2d(2) conv2d(16,1) batchnorm2d relu conv2d(16,3) "
      "residual(batchnorm2d relu) flatten linear";
  // A 32-channel stem: its pooled gradient is two blocks a sample, read in place.
  const std::string wide_stem =
      "conv2d(32,3,padding=1) batchnorm2d relu maxpool2d(2) "
      "residual(conv2d(32,3,padding=1) batchnorm2d relu conv2d(32,3,padding=1) batchnorm2d) relu avgpool2d(5) "
      "flatten linear";
  struct Case {
    std::string layers;
    Shape input;
    std::size_t samples;
  };
  for (const Case& c : {Case{resnet, {1, 12, 12}, 5}, Case{resnet, {3, 13, 13}, 2}, Case{pooled, {2, 10, 10}, 3},
                        Case{wide_stem, {2, 10, 10}, 3}}) {
    INFO(c.layers << " on " << shape_text(c.input) << " x " << c.samples);
    std::size_t blocked = 0, nchw = 0;
    const Results a = run(c.layers, c.input, true, c.samples, &blocked);
    const Results b = run(c.layers, c.input, false, c.samples, &nchw);
    CHECK(nchw == 0);
    if (cpu::onednn_linked()) CHECK(blocked > 0);
    CHECK(same_bits(a.train_y, b.train_y));
    CHECK(same_bits(a.dx, b.dx));
    CHECK(same_bits(a.grads, b.grads));
    CHECK(same_bits(a.buffers, b.buffers));
    CHECK(same_bits(a.eval_y, b.eval_y));
  }
}

TEST_CASE("plan_layouts blocks what lies between layers that take the blocked layout", "[nn][layout]") {
  if (!cpu::onednn_linked()) return;  // no layer takes it
  const auto planned = [](const std::string& layers, const Shape& input, bool allow) {
    ModelConfig config;
    config.layers = layers;
    auto model = build_model(config, input, 3, 1);
    model->plan_layouts(allow);
    return model;
  };
  // The stem's BatchNorm (with its ReLU and pooling) writes the blocked layout for
  // the residual blocks; everything up to the global pooling keeps it.
  auto resnet = planned(
      "conv2d(16,3,padding=1) batchnorm2d relu maxpool2d(2) residual(conv2d(16,3,padding=1) batchnorm2d) relu "
      "avgpool2d(4) flatten linear",
      {1, 8, 8}, true);
  const auto& layers = resnet->layers();
  CHECK_FALSE(layers[0]->blocked_in());
  CHECK_FALSE(layers[0]->blocked_out());  // the fused pooling reads NCHW
  CHECK(layers[1]->blocked_out());
  CHECK(layers[4]->blocked_in());
  CHECK(layers[4]->blocked_out());
  CHECK(layers[6]->blocked_in());  // the global pooling's output is the same bytes either way
  CHECK(resnet->blocked_activations() == 4);  // stem, body conv and BatchNorm, the block's sum (its ReLU taken in)
  CHECK(planned("conv2d(16,3,padding=1) batchnorm2d relu maxpool2d(2) residual(conv2d(16,3,padding=1) batchnorm2d) "
                "flatten linear",
                {1, 8, 8}, false)
            ->blocked_activations() == 0);
  // Dropout's masks follow the element order: NCHW around it. Channels that are
  // not whole blocks of 16: NCHW.
  CHECK(planned("conv2d(16,3) relu dropout(0.1) conv2d(16,3) flatten linear", {1, 8, 8}, true)
            ->blocked_activations() == 0);
  CHECK(planned("conv2d(24,3) batchnorm2d relu conv2d(24,3) flatten linear", {1, 8, 8}, true)
            ->blocked_activations() == 0);
  CHECK(planned("conv2d(16,3) batchnorm2d relu conv2d(16,3) flatten linear", {1, 8, 8}, true)
            ->blocked_activations() == 2);  // conv -> BatchNorm (its ReLU fused) -> conv
  // Where it saves no layout change: a fused pooling would write blocked planes
  // (a change) for one convolution to read them (one saved).
  CHECK(planned("conv2d(16,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(32,3,padding=1) batchnorm2d relu "
                "maxpool2d(2) flatten linear",
                {1, 8, 8}, true)
            ->blocked_activations() == 0);
}

namespace {

// A random image model from `seed`: convolutions of 16, 24 or 32 channels (some
// strided, some 1 x 1), BatchNorm, activations, poolings, Dropout and residual
// blocks, in any order the shapes allow, then flatten and a linear layer.
std::string random_model(std::uint64_t seed, std::size_t* channels_in) {
  CounterRng rng(seed);
  std::uint64_t draw = 0;
  const auto pick = [&](int n) { return static_cast<int>(rng.uniform(draw++) * static_cast<float>(n)) % n; };
  const std::size_t starts[] = {1, 3, 16};
  *channels_in = starts[pick(3)];
  std::size_t channels = *channels_in, size = 10;
  std::string layers;
  const int count = 3 + pick(6);
  for (int i = 0; i < count; ++i) {
    const std::string width = std::to_string(16 + 8 * pick(3));
    switch (pick(9)) {
      case 0: layers += "conv2d(" + width + ",3,padding=1) "; channels = std::stoul(width); break;
      case 1: layers += "conv2d(" + width + ",1) "; channels = std::stoul(width); break;
      case 2:
        if (size < 4) continue;
        layers += "conv2d(" + width + ",3,stride=2,padding=1) ";
        channels = std::stoul(width);
        size = (size + 1) / 2;
        break;
      case 3: layers += "batchnorm2d "; break;
      case 4: layers += pick(2) ? "relu " : "gelu "; break;
      case 5:
        if (size < 4) continue;
        layers += pick(2) ? "avgpool2d(2) " : "maxpool2d(2) ";
        size /= 2;
        break;
      case 6: layers += "dropout(0.2) "; break;
      case 7:
        layers += "residual(conv2d(" + std::to_string(channels) + ",3,padding=1) batchnorm2d relu) ";
        break;
      default:
        layers += "residual(conv2d(" + width + ",3,padding=1) batchnorm2d ; conv2d(" + width + ",1) batchnorm2d) relu ";
        channels = std::stoul(width);
        break;
    }
  }
  return layers + "flatten linear";
}

}  // namespace

TEST_CASE("random models give the same bits in either layout", "[nn][layout]") {
  const std::uint64_t first = 1000;
  std::size_t with_blocked = 0;  // models that blocked something: the test must exercise the blocked loops
  for (std::uint64_t seed = first; seed < first + 80; ++seed) {
    std::size_t channels = 1;
    const std::string layers = random_model(seed, &channels);
    INFO("seed " << seed << ": " << layers << " on " << channels << "x10x10");
    std::size_t blocked = 0, nchw = 0;
    const Results a = run(layers, {channels, 10, 10}, true, 3, &blocked);
    const Results b = run(layers, {channels, 10, 10}, false, 3, &nchw);
    CHECK(nchw == 0);
    with_blocked += blocked > 0;
    CHECK(same_bits(a.train_y, b.train_y));
    CHECK(same_bits(a.dx, b.dx));
    CHECK(same_bits(a.grads, b.grads));
    CHECK(same_bits(a.buffers, b.buffers));
    CHECK(same_bits(a.eval_y, b.eval_y));
  }
  std::printf("random layouts: %zu of 80 models blocked some activations (seeds %llu-%llu)\n", with_blocked,
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(first + 79));
  if (cpu::onednn_linked()) CHECK(with_blocked >= 15);
}

TEST_CASE("planning the layouts of deeply nested residual blocks takes one pass per block", "[nn][layout]") {
  // Each block's role plans its branches; asked afresh at every level, 30 levels
  // took 3^30 plans (a start-up that never ended). The parser allows 32 parentheses.
  std::string inner = "relu";
  for (int depth = 0; depth < 30; ++depth) inner = "residual(" + inner + ")";
  ModelConfig config;
  config.layers = "conv2d(16,3,padding=1) " + inner + " conv2d(16,3,padding=1) flatten linear";
  auto model = build_model(config, Shape{1, 6, 6}, 3, 1);
  model->plan_layouts(true);
  // The first conv's output, the ReLU's and each block's sum.
  if (cpu::onednn_linked()) CHECK(model->blocked_activations() == 32);
  model->plan_layouts(false);
  CHECK(model->blocked_activations() == 0);
}
