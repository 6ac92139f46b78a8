// model.layers: the grammar, the registry's arguments and the shape checks.
// Every refusal must name the layer's position and what is wrong.
#include <catch2/catch.hpp>

#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/layer_table.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/train/memory_budget.hpp"
#include "layer_test_util.hpp"

using namespace mpiddp;

namespace {

// The message build_model throws for `layers` on samples of shape `input` with 3 outputs.
std::string refusal(const std::string& layers, const Shape& input) { return test::refusal_of(layers, input); }

std::string parse_refusal(const std::string& text) {
  try {
    parse_layer_list(text);
  } catch (const LayerError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("layer lists parse into calls", "[nn][layers]") {
  const auto calls = parse_layer_list(
      "  conv2d(32,3,padding=1) batchnorm2d\trelu maxpool2d(2)\n conv2d( 64 , 3 , stride = 2 ) flatten linear(128) "
      "dropout(0.3) linear  ");
  REQUIRE(calls.size() == 9);
  CHECK(calls[0].name == "conv2d");
  CHECK(calls[0].text == "conv2d(32,3,padding=1)");
  CHECK(calls[0].positional == std::vector<std::string>{"32", "3"});
  REQUIRE(calls[0].keywords.size() == 1);
  CHECK(calls[0].keywords[0] == std::make_pair(std::string("padding"), std::string("1")));
  CHECK(calls[1].name == "batchnorm2d");
  CHECK(calls[1].positional.empty());
  CHECK(calls[2].name == "relu");
  CHECK(calls[3].positional == std::vector<std::string>{"2"});
  CHECK(calls[4].positional == std::vector<std::string>{"64", "3"});
  CHECK(calls[4].keywords[0] == std::make_pair(std::string("stride"), std::string("2")));
  CHECK(calls[7].positional == std::vector<std::string>{"0.3"});
  CHECK(calls[8].name == "linear");
  CHECK(parse_layer_list("relu()").size() == 1);
}

TEST_CASE("layer list syntax errors name the position and the problem", "[nn][layers]") {
  struct Bad {
    const char* text;
    const char* expected;
  };
  const Bad cases[] = {
      {"relu conv2d(32,3", "layer 2 (layers.1) 'conv2d(32,3': a '(' without its ')'"},
      {"relu flatten)", "layer 2 (layers.1) 'flatten)': a ')' without its '('"},
      {"relu Conv2d(3,3)", "layer 2 (layers.1) 'Conv2d(3,3)': 'Conv2d' is not a layer name"},
      {"conv2d(3,3)x relu", "layer 1 (layers.0) 'conv2d(3,3)x': text after the closing parenthesis"},
      {"linear(4) conv2d(,3)", "layer 2 (layers.1) 'conv2d(,3)': an empty argument"},
      {"conv2d(3,3,)", "layer 1 (layers.0) 'conv2d(3,3,)': an empty argument"},
      {"relu relu conv2d(padding=1,3)",
       "layer 3 (layers.2) 'conv2d(padding=1,3)': positional argument '3' after a key=value"},
      {"conv2d(3,3,padding=1,padding=2)",
       "layer 1 (layers.0) 'conv2d(3,3,padding=1,padding=2)': argument 'padding' given twice"},
      {"conv2d(3,3,Padding=1)", "'Padding=1' is not key=value"},
      {"conv2d(3,3,padding=)", "'padding=' is not key=value"},
      {"relu block((relu))", "layer 2 (layers.1)"},
      {"   ", "no layers"},
  };
  for (const Bad& bad : cases) {
    INFO("list '" << bad.text << "'");
    CHECK_THAT(parse_refusal(bad.text), Catch::Contains(bad.expected));
  }
}

TEST_CASE("bad layers and arguments are refused naming model.layers and the position", "[nn][layers]") {
  struct Bad {
    const char* layers;
    Shape input;
    const char* expected;
  };
  const Shape image{1, 8, 8};
  const Bad cases[] = {
      {"flatten conv3d(4,3) linear", image, "layer 2 (layers.1) 'conv3d(4,3)': unknown layer (known: avgpool2d,"},
      {"conv2d(4) flatten linear", image, "layer 1 (layers.0) 'conv2d(4)': missing argument 'kernel_size'"},
      {"conv2d(4,three) flatten linear", image,
       "layer 1 (layers.0) 'conv2d(4,three)': kernel_size 'three' is not a whole number"},
      {"conv2d(0,3) flatten linear", image, "out_channels '0' is not a whole number from 1"},
      {"conv2d(4,3,padding=-1) flatten linear", image, "padding '-1' is not a whole number from 0"},
      {"conv2d(4,3,1,0,7) flatten linear", image,
       "takes at most 4 positional argument(s) (out_channels, kernel_size, stride, padding), got 5"},
      {"conv2d(4,3,dilation=2) flatten linear", image,
       "unknown argument 'dilation' (it takes out_channels, kernel_size, stride, padding)"},
      {"flatten relu(inplace=true) linear", image,
       "layer 2 (layers.1) 'relu(inplace=true)': unknown argument 'inplace' (it takes none)"},
      {"flatten dropout(1.5) linear", image, "layer 2 (layers.1) 'dropout(1.5)': p '1.5' is not a number in [0, 1)"},
      {"batchnorm2d(eps=0) flatten linear", image, "layer 1 (layers.0) 'batchnorm2d(eps=0)': eps must be above 0"},
      {"batchnorm2d(momentum=2) flatten linear", image, "momentum '2' is not a number in [0, 1]"},
      {"flatten linear(0) linear", image,
       "layer 2 (layers.1) 'linear(0)': out_features '0' is not a whole number from 1"},
      {"flatten linear relu linear", image, "layer 2 (layers.1) 'linear': missing argument 'out_features'"},
      // Shapes.
      {"conv2d(4,3) flatten linear", Shape{64},
       "layer 1 (layers.0) Conv2d: needs images (channels x height x width), but each sample is 64 flat features"},
      {"conv2d(4,3) flatten linear", Shape{64}, "set model.input_shape = C,H,W"},
      {"linear(64) relu maxpool2d(2) flatten linear", Shape{64}, "layer 3 (layers.2) MaxPool2d: needs images"},
      {"conv2d(4,9) flatten linear", image,
       "layer 1 (layers.0) Conv2d: kernel 9 is larger than its input 1x8x8 with padding 0"},
      {"conv2d(4,3) maxpool2d(7) flatten linear", image,
       "layer 2 (layers.1) MaxPool2d: kernel 7 is larger than its input 4x6x6"},
      {"flatten avgpool2d(2) linear", image,
       "layer 2 (layers.1) AvgPool2d: avgpool2d needs images (channels x height x width), but gets 64 flat features"},
      {"flatten batchnorm2d linear", image, "layer 2 (layers.1) BatchNorm2d: batchnorm2d needs images"},
      {"batchnorm1d flatten linear", image, "layer 1 (layers.0) BatchNorm1d: batchnorm1d needs features"},
      {"conv2d(4,3) relu", image, "the last layer gives 4x6x6 per sample, but the loss needs 3"},
      {"flatten linear(5)", image, "the last layer gives 5 per sample, but the loss needs 3"},
  };
  for (const Bad& bad : cases) {
    INFO("model.layers = '" << bad.layers << "' on " << shape_text(bad.input));
    const std::string text = refusal(bad.layers, bad.input);
    CHECK_THAT(text, Catch::StartsWith("model.layers: "));
    CHECK_THAT(text, Catch::Contains(bad.expected));
    // Only data that comes flat needs model.input_shape, not data a flatten made flat.
    if (bad.input.size() == 3) CHECK_THAT(text, !Catch::Contains("input_shape"));
  }
}

TEST_CASE("good layer lists build PyTorch's modules, names and shapes", "[nn][layers]") {
  ModelConfig config;
  config.layers =
      "conv2d(8,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(16,5,stride=2,padding=2) "
      "avgpool2d(kernel_size=2,stride=1) flatten linear(32) batchnorm1d(eps=1e-3,momentum=0.2) gelu "
      "dropout(0.3) linear";
  auto model = build_model(config, Shape{1, 12, 10}, 4, 1);
  const auto& layers = model->layers();
  REQUIRE(layers.size() == 12);
  const char* kinds[] = {"Conv2d",  "BatchNorm2d", "ReLU",        "MaxPool2d", "Conv2d",  "AvgPool2d",
                         "Flatten", "Linear",      "BatchNorm1d", "GELU",      "Dropout", "Linear"};
  for (std::size_t i = 0; i < layers.size(); ++i) CHECK(layers[i]->kind() == kinds[i]);
  // 1x12x10 -> 8x12x10 -> 8x6x5 -> 16x3x3 -> 16x2x2 -> 64 -> 32 -> 4
  CHECK(model->output_shape() == Shape{4});
  const ParameterStore& p = model->parameters();
  std::vector<std::string> names;
  for (const auto& param : p.list()) names.push_back(param.name + " " + shape_text(param.shape));
  CHECK(names == std::vector<std::string>{"layers.0.weight 8x1x3x3", "layers.0.bias 8", "layers.1.weight 8",
                                          "layers.1.bias 8", "layers.4.weight 16x8x5x5", "layers.4.bias 16",
                                          "layers.7.weight 32x64", "layers.7.bias 32", "layers.8.weight 32",
                                          "layers.8.bias 32", "layers.11.weight 4x32", "layers.11.bias 4"});
  std::vector<std::string> buffers;
  for (const auto& b : p.buffer_list()) buffers.push_back(b.name);
  CHECK(buffers == std::vector<std::string>{"layers.1.running_mean", "layers.1.running_var", "layers.8.running_mean",
                                            "layers.8.running_var"});
  CHECK(p.counter_names() == std::vector<std::string>{"layers.1.num_batches_tracked", "layers.8.num_batches_tracked"});
  CHECK(layers[4]->arguments() == "8, 16, kernel_size=5, stride=2, padding=2");
  CHECK(layers[8]->arguments() == "32, eps=0.001, momentum=0.2");
  // With sync_batchnorm every BatchNorm is a SyncBatchNorm.
  config.sync_batchnorm = true;
  auto synced = build_model(config, Shape{1, 12, 10}, 4, 1);
  CHECK(synced->layers()[1]->kind() == "SyncBatchNorm");
  CHECK(synced->layers()[8]->kind() == "SyncBatchNorm");
  // [H, W] samples are images of one channel.
  config.layers = "conv2d(2,3) flatten linear";
  CHECK(build_model(config, Shape{5, 6}, 3, 1)->parameters().list()[0].shape == Shape{2, 1, 3, 3});
}

// ---- issue 22: sizes checked for overflow and counted before allocating ----

TEST_CASE("sizes past 64 bits or past the kernels' int are refused with the numbers", "[nn][layers]") {
  struct Bad {
    const char* layers;
    Shape input;
    const char* expected;
  };
  const Bad cases[] = {
      {"conv2d(8,1073741824,padding=1073741824) flatten linear", {1, 28, 28},
       "layer 1 (layers.0) Conv2d: its input 1x28x28 padded by 1073741824: the height is 2147483676, more than "
       "2147483647 (the largest size mpiddp's kernels index)"},
      {"conv2d(8,3,padding=100000) flatten linear", {1, 28, 28},
       "layer 1 (layers.0) Conv2d: its output positions 200026 x 200026 is 40010400676, more than 2147483647"},
      {"conv2d(4,32768) flatten linear", {4, 32768, 32768},
       "Conv2d: its im2col rows (input channels x kernel x kernel) is 4294967296, more than 2147483647"},
      {"flatten linear", {1024, 2048, 2048}, "layer 2 (layers.1) Linear: its input width is 4294967296, more than"},
      {"maxpool2d(2) flatten linear", {1, 65536, 65536},
       "layer 1 (layers.0) MaxPool2d: its input plane 65536 x 65536 is 4294967296, more than 2147483647"},
      {"flatten batchnorm1d linear", {1, 65536, 65536}, "layer 2 (layers.1) BatchNorm1d: its channels is 4294967296"},
  };
  for (const Bad& bad : cases) {
    INFO("model.layers = '" << bad.layers << "' on " << shape_text(bad.input));
    CHECK_THAT(refusal(bad.layers, bad.input), Catch::StartsWith("model.layers: ") && Catch::Contains(bad.expected));
  }
  const std::size_t big = std::size_t{1} << 32;
  CHECK_THROWS_WITH(element_count(Shape{big, big}), Catch::Contains("the shape 4294967296x4294967296 has more elements"));
  ParameterStore store;
  CHECK_THROWS_WITH(store.add("layers.0.weight", {big, big}), Catch::Contains("4294967296x4294967296"));
  store.add("layers.0.weight", {big, big / 2});
  CHECK_THROWS_WITH(store.add("layers.0.bias", {big, big / 2}),
                    Catch::Contains("the model's floats before and in layers.0.bias: 9223372036854775808 + "
                                    "9223372036854775808 overflows 64 bits"));
}

TEST_CASE("a model has at most kMaxLayers layers, as a list or as model.hidden", "[nn][layers]") {
  std::string list;
  for (std::size_t i = 0; i < kMaxLayers; ++i) list += "relu ";
  CHECK(parse_layer_list(list).size() == kMaxLayers);
  CHECK(parse_refusal(list + "linear") == "10001 layers; at most 10000");
  ModelConfig config;
  config.hidden.assign(5000, 4);
  CHECK_THROWS_WITH(build_mlp(config, 8, 3, 1), "model.hidden: 5000 hidden widths make 10001 layers; at most 10000");
  config.hidden.assign(4999, 4);
  CHECK(build_mlp(config, 8, 3, 1)->layers().size() == 9999);
}

TEST_CASE("plan_model measures the model build_model builds, without allocating it", "[nn][layers]") {
  ModelConfig config;
  config.layers = "conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) flatten dropout(0.5) linear(16) relu linear";
  const Shape input{1, 12, 10};
  auto model = build_model(config, input, 4, 1);
  const ModelPlan plan = plan_model(config, input, 4, 8);
  CHECK(plan.layers == model->layers().size());
  CHECK(plan.arrays == model->parameters().list().size());
  CHECK(plan.parameters == static_cast<double>(model->parameters().total()));
  CHECK(plan.buffers == static_cast<double>(model->parameters().buffer_total()));
  // Outputs: 4x12x10 three times, 4x6x5 twice (maxpool, flatten), 120 (dropout), 16 twice, 4.
  CHECK(plan.activation_floats == 3 * 480 + 2 * 120 + 120 + 2 * 16 + 4);
  CHECK(plan.largest_floats == 480);
  CHECK(plan.scratch_bytes > 0);  // im2col columns, the dropout mask, max pooling's argmax
  // 12884901891 parameters (48 GiB): measured, never allocated.
  ModelConfig big;
  big.layers = "conv2d(1073741824,1) flatten linear";
  CHECK(plan_model(big, Shape{8, 1, 1}, 3, 64).parameters == 12884901891.0);
  // A list that cannot work is refused as build_model refuses it.
  big.layers = "conv2d(4,3) flatten linear";
  CHECK_THROWS_WITH(plan_model(big, Shape{64}, 3, 8), Catch::StartsWith("model.layers: layer 1 (layers.0) Conv2d: needs images"));
}

TEST_CASE("the memory budget counts model.layers as it counts model.hidden", "[nn][layers][budget]") {
  auto config = [](std::vector<std::string> settings) {
    settings.insert(settings.begin(), {"--data.train", "x"});
    return load_config("", settings);
  };
  const JobShape shape{200, 8, 3, 1, "data", {}};
  const Config hidden = config({"--model.hidden", "1073741824"});
  const Config layers = config({"--model.layers", "linear(1073741824) relu linear"});
  CHECK(estimated_rank_bytes(layers, shape) == estimated_rank_bytes(hidden, shape));
  CHECK_THROWS_WITH(check_memory_budget(layers, shape),
                    Catch::StartsWith("data: 200 samples of 8 features with model.layers = 'linear(1073741824) relu "
                                      "linear' and train.batch_size = 64 need about 1.23 TiB per rank (model 240 GiB "
                                      "for 12884901891 parameters, batches") &&
                        Catch::Contains("of memory"));
  CHECK_THROWS_WITH(check_memory_budget(config({"--train.trace_steps", "1000000000"}), shape),
                    Catch::Contains("trace window 1.13 TiB for train.trace_steps = 1000000000"));
  // The shards' sample shape (or model.input_shape) is what image layers get.
  const Config conv = config({"--model.layers", "conv2d(1073741824,1) flatten linear"});
  const JobShape images{200, 8, 3, 1, "data", {8, 1, 1}};
  CHECK_THROWS_WITH(check_memory_budget(conv, images), Catch::Contains("for 12884901891 parameters"));
  // Without one, the model's part is left to build_model, which knows the shape.
  CHECK_NOTHROW(check_memory_budget(conv, shape));
  CHECK(estimated_rank_bytes(config({}), shape) < 1e8);
}

TEST_CASE("layer table: every entry has a factory and every factory an entry", "[layers]") {
  CHECK(mpiddp::layers_with_factories() == mpiddp::known_layer_names());
  for (const auto& spec : mpiddp::layer_table()) {
    CHECK(spec.torch_module.size() > 0);
    for (const auto& a : spec.arguments) CHECK((a.type == "int" || a.type == "float" || a.type == "bool" || a.type == "word"));
  }
}

TEST_CASE("layer table: a list resolves with every argument named and every default filled in", "[layers]") {
  const auto layers = mpiddp::resolve_layer_list("conv2d(8, 3, padding=1) maxpool2d(2) dropout linear", 7);
  REQUIRE(layers.size() == 4);
  using Args = std::vector<std::pair<std::string, std::string>>;
  CHECK(layers[0].arguments == Args{{"out_channels", "8"}, {"kernel_size", "3"}, {"stride", "1"}, {"padding", "1"}});
  CHECK(layers[1].arguments == Args{{"kernel_size", "2"}, {"stride", "2"}});  // stride = kernel_size
  CHECK(layers[2].arguments == Args{{"p", "0.5"}});
  CHECK(layers[3].arguments == Args{{"out_features", "7"}, {"bias", "true"}, {"tie", "-1"}});  // the last linear: the classes
  CHECK_THROWS_WITH(mpiddp::resolve_layer_list("linear relu", 7), Catch::Contains("layer 1 (layers.0) 'linear': missing argument 'out_features'"));
  CHECK_THROWS_WITH(mpiddp::resolve_layer_list("conv2d(8, 3, out_channels=4)", 7), Catch::Contains("given twice"));
  CHECK_THROWS_WITH(mpiddp::resolve_layer_list("relu(p=1)", 7), Catch::Contains("unknown argument 'p' (it takes none)"));
}
