#pragma once
// Builds the model the input file describes: `model.layers`, a Sequential layer
// list (`conv2d(32,3,padding=1) batchnorm2d relu ... flatten linear`), or the MLP
// shorthand `model.hidden`. Layer names and arguments are PyTorch's constructor
// arguments minus the input size, which is inferred from the shape before.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp {

// The most layers a model may have (a list, or the MLP of model.hidden): far
// more than any network trained here; a longer list is a mistake.
constexpr std::size_t kMaxLayers = 10000;

// One call of the list, as written: `name` or `name(args)`.
struct LayerCall {
  std::string text;
  std::string name;
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> keywords;
  std::string nested;  // a container's inside, as written: "conv2d(8,3) relu ; conv2d(8,1)"
};

// Whether a layer holds layer lists instead of arguments (residual).
bool is_container(const std::string& name);
// A container's inside split at its top-level ';': the body, then the shortcut
// if any. Throws LayerError for none, an empty one or more than two.
std::vector<std::string> split_branches(const std::string& inside);

// Splits a layer list at whitespace outside parentheses; throws LayerError
// naming the call's position on a syntax error, or on more than kMaxLayers calls.
// `branch`: "" for the model's list, "body" or "shortcut" inside a residual.
std::vector<LayerCall> parse_layer_list(const std::string& text, const std::string& branch = "");
// "layer 4 (layers.3)", or inside a residual "body layer 2 (body.1)".
std::string list_position(const std::string& branch, std::size_t index);

// The layers of a list, unconnected (Sequential gives them their shapes); throws
// LayerError naming the position of an unknown layer or a bad argument. A last
// `linear` without a width gets `outputs`.
std::vector<std::unique_ptr<Layer>> build_layers(const std::string& text, std::size_t outputs, bool sync_batchnorm);

// The layer names the layer table knows, for messages and --help.
std::vector<std::string> known_layer_names();
// The layer names that have a factory (a test: the same as known_layer_names).
std::vector<std::string> layers_with_factories();

// The model of `model`: its layer list if model.layers is set, else the MLP of
// model.hidden. `input`: one sample's shape ({features} or {C, H, W});
// `outputs`: classes or regression targets. Throws InputError naming
// `model.layers`, the layer's position and what is wrong.
std::unique_ptr<Sequential> build_model(const ModelConfig& model, const Shape& input, std::size_t outputs,
                                        std::uint64_t seed, Device* device = nullptr);

// What a model needs, from a shape-only pass over its layers: nothing is
// allocated, so the memory budget can refuse a model before it exists. Sizes
// are doubles (hostile ones multiply past 64 bits); activation and scratch
// sizes are for `samples` samples per batch. Throws what build_model throws.
struct ModelPlan {
  std::size_t layers = 0;       // every layer, those inside residual blocks too (nested_layer_count)
  std::size_t arrays = 0;        // parameter arrays (weight, bias, ...)
  double parameters = 0;         // trained floats
  double buffers = 0;            // other float state (BatchNorm's running statistics)
  double activation_floats = 0;  // per sample: every layer's output (kept for backward)
  double largest_floats = 0;     // per sample: the widest input or output (the gradient buffers)
  double scratch_bytes = 0;      // per batch: im2col columns, dropout masks, max-pooling positions
};
ModelPlan plan_model(const ModelConfig& model, const Shape& input, std::size_t outputs, std::size_t samples);

// The MLP shorthand: Linear + activation (+ Dropout) per hidden width, then Linear.
std::unique_ptr<Sequential> build_mlp(const ModelConfig& model, std::size_t in_features, std::size_t out_features,
                                      std::uint64_t seed, Device* device = nullptr);

}  // namespace mpiddp
