#pragma once
// The one table of the layers a `model.layers` list may name: each layer's
// arguments in PyTorch's positional order with their defaults, and the torch.nn
// module it is. The builder reads its defaults from here, `mpiddp inspect layers`
// prints it (--json for the Python tools, which build their torch modules from
// it and never parse a layer list themselves).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace mpiddp {

struct LayerArgumentSpec {
  std::string name;      // PyTorch's
  std::string fallback;  // as a list would write it; "" = required; "=NAME": that argument's value;
                         // "=classes": the model's outputs (classes or targets), for the last layer only
  std::string type;      // "int", "float", "bool" (true or false) or "word" (one of `choices`: approximate=tanh)
  std::vector<std::string> choices = {};  // a word's allowed values
  bool torch = true;                      // false: mpiddp's own (tie), not the torch constructor's
};

// A torch constructor argument read from a parameter's shape (PositionEmbedding's
// positions and width, CausalSelfAttention's n_embd), or from the shape of a
// sample at the layer's input (its dimension `sample_dim`).
struct WeightSize {
  std::string argument;   // the constructor's
  std::string parameter;  // its suffix after the layer's prefix: "weight", "c_attn.weight"
  int weight_dim;
  int sample_dim;
};

struct LayerSpec {
  std::string name;          // in model.layers
  std::string torch_module;  // the torch.nn class, or a dotted name: a module mpiddp_tools defines
  std::vector<LayerArgumentSpec> arguments;  // positional order
  // The torch constructor's input-size argument (in_features, in_channels,
  // num_features), which a list never writes: the shape before gives it, and so
  // does dimension `input_weight_dim` of the layer's weight. "" / -1: none.
  std::string input_argument;
  int input_weight_dim = -1;
  std::vector<WeightSize> weight_sizes = {};
  int input_sample_dim = 0;   // which dimension of its input sample the input size is: 0, or -1 (the last)
  bool takes_tokens = false;  // its input is token ids (embedding)
};

// "torch.nn.Linear", or the dotted name as it is ("mpiddp_tools.Residual").
std::string torch_module_name(const LayerSpec& spec);
// Every layer, in name order.
const std::vector<LayerSpec>& layer_table();
// The entry for `name`, or null.
const LayerSpec* find_layer_spec(const std::string& name);

// A call of a list with every argument named and every default filled in, as
// text (a list's own spelling): what the builder builds.
struct ResolvedLayer {
  std::size_t index = 0;  // layers.<index>
  const LayerSpec* spec = nullptr;
  std::vector<std::pair<std::string, std::string>> arguments;  // positional order
  std::string path;                                            // its parameters' prefix: layers.3.body.0
  std::string shared_weight;                                   // linear(tie=K): "layers.K.weight"
  std::vector<ResolvedLayer> body, shortcut;                   // a residual's branches
};
struct LayerCall;
// One call's arguments, resolved as above (`last`: the list's last layer).
// Throws LayerError (without the position) like resolve_layer_list.
std::vector<std::pair<std::string, std::string>> resolve_arguments(const LayerCall& call, const LayerSpec& spec,
                                                                   bool last, std::size_t outputs);
// Throws LayerError naming the position of an unknown layer or argument, a
// missing one, or a positional argument given as a keyword too. `outputs`:
// what "=classes" resolves to.
std::vector<ResolvedLayer> resolve_layer_list(const std::string& text, std::size_t outputs);

// JSON texts: the table, and a resolved list.
std::string layer_table_json();
std::string resolved_layers_json(const std::vector<ResolvedLayer>& layers);

}  // namespace mpiddp
