// The layer factories and the model builder. A new layer kind is its line in
// the layer table (layer_table.cpp), one factory line here, and its class.
#include "mpiddp/nn/model_builder.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "layer_arguments.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/attention.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/conv_layers.hpp"
#include "mpiddp/nn/embedding.hpp"
#include "mpiddp/nn/layer_table.hpp"
#include "mpiddp/nn/layernorm.hpp"
#include "mpiddp/nn/layers.hpp"
#include "mpiddp/nn/residual.hpp"

namespace mpiddp {
namespace {

struct LayerContext {
  std::size_t index;     // position in the list: layers.<index>; inside residuals, 10000 + a count (Dropout's stream)
  bool last;
  std::size_t outputs;   // classes or regression targets
  bool sync_batchnorm;
};

using LayerFactory = std::function<std::unique_ptr<Layer>(LayerArguments&, const LayerContext&)>;

// Factories: the arguments, their order and defaults are the layer table's.
std::unique_ptr<Layer> make_linear(LayerArguments& a, const LayerContext& ctx) {
  const long tie = a.integer("tie", -1);
  if (tie >= 0 && ctx.index >= kMaxLayers) throw LayerError("tie=" + std::to_string(tie) + " works at the top level of the list only");
  if (tie >= static_cast<long>(ctx.index))
    throw LayerError("tie=" + std::to_string(tie) + " must name an earlier layer (an embedding)");
  return std::make_unique<Linear>(static_cast<std::size_t>(a.integer("out_features", 1)), a.boolean("bias"));
}

std::unique_ptr<Layer> make_embedding(LayerArguments& a, const LayerContext&) {
  return std::make_unique<Embedding>(static_cast<std::size_t>(a.integer("num_embeddings", 1)),
                                     static_cast<std::size_t>(a.integer("embedding_dim", 1)));
}

std::unique_ptr<Layer> make_attention(LayerArguments& a, const LayerContext& ctx) {
  const double dropout = a.real("dropout", 0.0, 1.0, true);
  return std::make_unique<CausalSelfAttention>(static_cast<std::size_t>(a.integer("num_heads", 1)), dropout, ctx.index);
}

std::unique_ptr<Layer> make_conv2d(LayerArguments& a, const LayerContext&) {
  return std::make_unique<Conv2d>(static_cast<std::size_t>(a.integer("out_channels", 1)),
                                  static_cast<int>(a.integer("kernel_size", 1)), static_cast<int>(a.integer("stride", 1)),
                                  static_cast<int>(a.integer("padding", 0)));
}

LayerFactory pool(PoolKind kind) {
  return [kind](LayerArguments& a, const LayerContext&) -> std::unique_ptr<Layer> {
    return std::make_unique<Pool2d>(kind, static_cast<int>(a.integer("kernel_size", 1)),
                                    static_cast<int>(a.integer("stride", 1)));
  };
}

LayerFactory batchnorm(int dims) {
  return [dims](LayerArguments& a, const LayerContext& ctx) -> std::unique_ptr<Layer> {
    const double eps = a.real("eps", 0.0, 1.0, false);
    if (eps <= 0.0) throw LayerError("eps must be above 0");
    return std::make_unique<BatchNorm>(dims, eps, a.real("momentum", 0.0, 1.0, false), ctx.sync_batchnorm);
  };
}

std::unique_ptr<Layer> make_layernorm(LayerArguments& a, const LayerContext&) {
  const double eps = a.real("eps", 0.0, 1.0, false);
  if (eps <= 0.0) throw LayerError("eps must be above 0");
  return std::make_unique<LayerNorm>(eps);
}

std::unique_ptr<Layer> make_gelu(LayerArguments& a, const LayerContext&) {
  const bool tanh = a.word("approximate") == "tanh";
  return std::make_unique<Activation>(tanh ? ActivationKind::gelu_tanh : ActivationKind::gelu);
}

LayerFactory activation(ActivationKind kind) {
  return [kind](LayerArguments&, const LayerContext&) -> std::unique_ptr<Layer> {
    return std::make_unique<Activation>(kind);
  };
}

// Which factory builds each entry of the layer table (a test checks that both
// name the same layers).
const std::map<std::string, LayerFactory>& factories() {
  static const std::map<std::string, LayerFactory> made = {
      {"linear", make_linear},
      {"conv2d", make_conv2d},
      {"maxpool2d", pool(PoolKind::max)},
      {"avgpool2d", pool(PoolKind::average)},
      {"batchnorm1d", batchnorm(1)},
      {"batchnorm2d", batchnorm(2)},
      {"layernorm", make_layernorm},
      {"embedding", make_embedding},
      {"position_embedding",
       [](LayerArguments&, const LayerContext&) -> std::unique_ptr<Layer> {
         return std::make_unique<PositionEmbedding>();
       }},
      {"causal_self_attention", make_attention},
      {"relu", activation(ActivationKind::relu)},
      {"gelu", make_gelu},
      {"residual", nullptr},  // make_residual: it builds layer lists
      {"tanh", activation(ActivationKind::tanh)},
      {"dropout",
       [](LayerArguments& a, const LayerContext& ctx) -> std::unique_ptr<Layer> {
         return std::make_unique<Dropout>(a.real("p", 0.0, 1.0, true), ctx.index);
       }},
      {"flatten", [](LayerArguments&, const LayerContext&) -> std::unique_ptr<Layer> {
         return std::make_unique<Flatten>();
       }},
  };
  return made;
}

// What builds a list: `nested` counts the layers inside residuals, so each
// Dropout gets a stream of its own (top-level layers keep their index as theirs).
struct ListBuilder {
  std::size_t outputs;
  bool sync_batchnorm;
  std::size_t nested = 0;
  std::size_t made = 0;  // layers at every depth: the cap is on all of them, not on the top level alone

  // `branch`: "" for the model's list, else "body" or "shortcut".
  std::vector<std::unique_ptr<Layer>> make(const std::vector<LayerCall>& calls, const std::string& branch) {
    const bool top = branch.empty();
    std::vector<std::unique_ptr<Layer>> layers;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      try {
        if (++made > kMaxLayers)
          throw LayerError("more than " + std::to_string(kMaxLayers) + " layers in all (those inside residual blocks count too)");
        layers.push_back(make_one(calls[i], top ? i : kMaxLayers + nested++, top && i + 1 == calls.size()));
        if (top) tie_weights(calls[i], i + 1 == calls.size(), layers);
      } catch (const LayerError& e) {
        throw LayerError(list_position(branch, i) + " '" + calls[i].text + "': " + e.what());
      }
    }
    return layers;
  }

  // linear(tie=K) as the last of `layers`: K must be an embedding before it.
  void tie_weights(const LayerCall& call, bool last, std::vector<std::unique_ptr<Layer>>& layers) {
    if (call.name != "linear") return;
    LayerArguments arguments(call, *find_layer_spec("linear"), last, outputs);
    const long tie = arguments.integer("tie", -1);
    if (tie < 0) return;
    auto* embedding = dynamic_cast<Embedding*>(layers[static_cast<std::size_t>(tie)].get());
    if (!embedding)
      throw LayerError("tie=" + std::to_string(tie) + ": " + layer_position(static_cast<std::size_t>(tie)) + " is " +
                       layers[static_cast<std::size_t>(tie)]->kind() + ", not an embedding");
    bool own_width = !call.positional.empty();
    for (const auto& [key, value] : call.keywords) own_width = own_width || key == "out_features";
    static_cast<Linear&>(*layers.back()).tie_to(*embedding, static_cast<std::size_t>(tie), own_width);
  }

  std::unique_ptr<Layer> make_one(const LayerCall& call, std::size_t index, bool last) {
    const LayerSpec* spec = find_layer_spec(call.name);
    const auto made = factories().find(call.name);
    if (!spec || made == factories().end()) {
      std::string names;
      for (const auto& n : known_layer_names()) names += (names.empty() ? "" : ", ") + n;
      throw LayerError("unknown layer (known: " + names + ")");
    }
    if (is_container(call.name)) {
      const std::vector<std::string> branches = split_branches(call.nested);
      auto body = make(parse_layer_list(branches[0], "body"), "body");
      auto shortcut = branches.size() > 1 ? make(parse_layer_list(branches[1], "shortcut"), "shortcut")
                                          : std::vector<std::unique_ptr<Layer>>{};
      return std::make_unique<Residual>(std::move(body), std::move(shortcut));
    }
    LayerArguments arguments(call, *spec, last, outputs);
    return made->second(arguments, {index, last, outputs, sync_batchnorm});
  }
};

}  // namespace

std::vector<std::unique_ptr<Layer>> build_layers(const std::string& text, std::size_t outputs, bool sync_batchnorm) {
  return ListBuilder{outputs, sync_batchnorm}.make(parse_layer_list(text), "");
}

std::vector<std::string> known_layer_names() {
  std::vector<std::string> names;
  for (const LayerSpec& spec : layer_table()) names.push_back(spec.name);
  return names;
}

std::vector<std::string> layers_with_factories() {
  std::vector<std::string> names;
  for (const auto& [name, unused] : factories()) names.push_back(name);
  return names;
}

namespace {

// The MLP shorthand's layers: Linear + activation (+ Dropout) per hidden width, then Linear.
std::vector<std::unique_ptr<Layer>> mlp_layers(const ModelConfig& model, std::size_t outputs) {
  const std::size_t per_width = model.dropout > 0.0 ? 3 : 2;
  const std::size_t count = model.hidden.size() * per_width + 1;
  if (count > kMaxLayers)
    throw LayerError(std::to_string(model.hidden.size()) + " hidden widths make " + std::to_string(count) +
                     " layers; at most " + std::to_string(kMaxLayers));
  std::vector<std::unique_ptr<Layer>> layers;
  for (int width : model.hidden) {
    layers.push_back(std::make_unique<Linear>(static_cast<std::size_t>(width)));
    layers.push_back(std::make_unique<Activation>(model.activation));
    if (model.dropout > 0.0) layers.push_back(std::make_unique<Dropout>(model.dropout, layers.size()));
  }
  layers.push_back(std::make_unique<Linear>(outputs));
  return layers;
}

// A model's layers, not yet connected, with the shape of one sample they take.
struct Prepared {
  std::string key;  // model.layers or model.hidden: what error messages name
  std::vector<std::unique_ptr<Layer>> layers;
  Shape input;
};

Prepared prepare_list(const ModelConfig& model, const Shape& input, std::size_t outputs) {
  Prepared p{"model.layers", build_layers(model.layers, outputs, model.sync_batchnorm), input};
  // No layer turns flat data into images: on flat samples the first image
  // layer fails because the input lacks its shape, whatever comes before it.
  if (input.size() == 1)
    for (std::size_t i = 0; i < p.layers.size(); ++i)
      if (p.layers[i]->needs_images())
        throw LayerError(layer_position(i) + " " + p.layers[i]->kind() +
                         ": needs images (channels x height x width), but each sample is " +
                         std::to_string(input[0]) +
                         " flat features: the shards carry no sample_shape; set model.input_shape = C,H,W");
  // [H, W] images have one channel.
  if (input.size() == 2) p.input = Shape{1, input[0], input[1]};
  return p;
}

// Throws InputError naming the key (model.layers or model.hidden) on a list or a shape that cannot work.
Prepared prepare(const ModelConfig& model, const Shape& input, std::size_t outputs) {
  const std::string key = model.layers.empty() ? "model.hidden" : "model.layers";
  try {
    if (!model.layers.empty()) return prepare_list(model, input, outputs);
    return {key, mlp_layers(model, outputs), Shape{element_count(input)}};
  } catch (const LayerError& e) {
    throw InputError(key + ": " + e.what());
  }
}

// One class score per sample, or, for a model that reads token ids, one per
// position of the sequence ({T} of token ids in, {T, classes} out: the next
// token's scores at every position; the loss pairs them with every target).
void check_output(const Shape& input, const Shape& output, std::size_t outputs, bool tokens) {
  if (tokens) {
    if (output == Shape{input[0], outputs}) return;
    throw LayerError("the last layer gives " + shape_text(output) + " per sample, but a model of token ids must give " +
                     shape_text(Shape{input[0], outputs}) +
                     " (scores for every position of the window): no flatten; end with a linear without arguments");
  }
  if (output != Shape{outputs})
    throw LayerError("the last layer gives " + shape_text(output) + " per sample, but the loss needs " +
                     std::to_string(outputs) + " (" + "classes or regression targets" +
                     "): end the list with flatten and a linear without arguments");
}

bool reads_tokens(const Prepared& p) {
  return !p.layers.empty() && p.layers.front()->takes_tokens();
}

}  // namespace

std::unique_ptr<Sequential> build_model(const ModelConfig& model, const Shape& input, std::size_t outputs,
                                        std::uint64_t seed, Device* device) {
  Prepared p = prepare(model, input, outputs);
  try {
    const bool tokens = reads_tokens(p);
    auto built = std::make_unique<Sequential>(std::move(p.layers), p.input, seed, device);
    check_output(p.input, built->output_shape(), outputs, tokens);
    return built;
  } catch (const LayerError& e) {
    throw InputError(p.key + ": " + e.what());
  }
}

std::unique_ptr<Sequential> build_mlp(const ModelConfig& model, std::size_t in_features, std::size_t out_features,
                                      std::uint64_t seed, Device* device) {
  try {
    return std::make_unique<Sequential>(mlp_layers(model, out_features), Shape{in_features}, seed, device);
  } catch (const LayerError& e) {
    throw InputError(std::string("model.hidden: ") + e.what());
  }
}

ModelPlan plan_model(const ModelConfig& model, const Shape& input, std::size_t outputs, std::size_t samples) {
  Prepared p = prepare(model, input, outputs);
  try {
    ParameterStore store;  // names and shapes only: nothing is allocated
    const std::vector<Shape> shapes = declare_layers(p.layers, p.input, store);
    check_output(p.input, shapes.back(), outputs, reads_tokens(p));
    ModelPlan plan;
    plan.layers = nested_layer_count(p.layers);
    plan.arrays = store.list().size();
    plan.parameters = static_cast<double>(store.declared_total());
    plan.buffers = static_cast<double>(store.declared_buffer_total());
    plan.largest_floats = static_cast<double>(element_count(shapes.front()));
    for (std::size_t i = 0; i < p.layers.size(); ++i) {
      const double out = static_cast<double>(element_count(shapes[i + 1]));
      plan.activation_floats += out;
      plan.largest_floats = std::max(plan.largest_floats, out);
      plan.scratch_bytes += p.layers[i]->scratch_bytes(shapes[i], samples);
    }
    return plan;
  } catch (const LayerError& e) {
    throw InputError(p.key + ": " + e.what());
  }
}

}  // namespace mpiddp
