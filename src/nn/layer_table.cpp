#include "mpiddp/nn/layer_table.hpp"

#include <algorithm>

#include "mpiddp/common/json.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/model_builder.hpp"

namespace mpiddp {

const std::vector<LayerSpec>& layer_table() {
  // clang-format off
  static const std::vector<LayerSpec> table = {
      {"avgpool2d",   "AvgPool2d",   {{"kernel_size", "", "int"}, {"stride", "=kernel_size", "int"}}, "", -1},
      {"batchnorm1d", "BatchNorm1d", {{"eps", "1e-05", "float"}, {"momentum", "0.1", "float"}}, "num_features", 0},
      {"batchnorm2d", "BatchNorm2d", {{"eps", "1e-05", "float"}, {"momentum", "0.1", "float"}}, "num_features", 0},
      // nanoGPT's module (mpiddp_tools.torch_layers defines it for PyTorch)
      {"causal_self_attention", "mpiddp_tools.CausalSelfAttention",
                                     {{"num_heads", "", "int"}, {"dropout", "0", "float"}}, "", -1,
                                     {{"n_embd", "c_attn.weight", 1, 1}}},
      {"conv2d",      "Conv2d",      {{"out_channels", "", "int"}, {"kernel_size", "", "int"},
                                      {"stride", "1", "int"}, {"padding", "0", "int"}}, "in_channels", 1},
      {"dropout",     "Dropout",     {{"p", "0.5", "float"}}, "", -1},
      {"embedding",   "Embedding",   {{"num_embeddings", "", "int"}, {"embedding_dim", "", "int"}}, "", -1, {}, 0,
                                     true},
      {"flatten",     "Flatten",     {}, "", -1},
      {"gelu",        "GELU",        {{"approximate", "none", "word", {"none", "tanh"}}}, "", -1},
      {"layernorm",   "LayerNorm",   {{"eps", "1e-05", "float"}}, "normalized_shape", 0, {}, -1},
      {"linear",      "Linear",      {{"out_features", "=classes", "int"}, {"bias", "true", "bool"},
                                      {"tie", "-1", "int", {}, false}}, "in_features", 1, {}, -1},
      {"maxpool2d",   "MaxPool2d",   {{"kernel_size", "", "int"}, {"stride", "=kernel_size", "int"}}, "", -1},
      {"position_embedding", "mpiddp_tools.PositionEmbedding", {}, "", -1,
                                     {{"positions", "weight", 0, 0}, {"width", "weight", 1, 1}}},
      {"relu",        "ReLU",        {}, "", -1},
      // y = f(x) + x or f(x) + g(x): its inside is layer lists, not arguments.
      {"residual",    "mpiddp_tools.Residual", {}, "", -1},
      {"tanh",        "Tanh",        {}, "", -1},
  };
  // clang-format on
  return table;
}

std::string torch_module_name(const LayerSpec& spec) {
  return spec.torch_module.find('.') == std::string::npos ? "torch.nn." + spec.torch_module : spec.torch_module;
}

const LayerSpec* find_layer_spec(const std::string& name) {
  for (const LayerSpec& spec : layer_table())
    if (spec.name == name) return &spec;
  return nullptr;
}

namespace {

std::string names_of(const LayerSpec& spec) {
  std::string list;
  for (const auto& a : spec.arguments) list += (list.empty() ? "" : ", ") + a.name;
  return list;
}

// The call's arguments by name, as written; throws for too many positional ones,
// unknown names and repeats.
std::vector<std::pair<std::string, std::string>> written_arguments(const LayerCall& call, const LayerSpec& spec) {
  if (call.positional.size() > spec.arguments.size())
    throw LayerError("takes at most " + std::to_string(spec.arguments.size()) + " positional argument(s)" +
                     (spec.arguments.empty() ? "" : " (" + names_of(spec) + ")") + ", got " +
                     std::to_string(call.positional.size()));
  std::vector<std::pair<std::string, std::string>> written;
  for (std::size_t i = 0; i < call.positional.size(); ++i) written.emplace_back(spec.arguments[i].name, call.positional[i]);
  for (const auto& [key, value] : call.keywords) {
    const bool known = std::any_of(spec.arguments.begin(), spec.arguments.end(), [&](const auto& a) { return a.name == key; });
    if (!known)
      throw LayerError("unknown argument '" + key + "'" +
                       (spec.arguments.empty() ? " (it takes none)" : " (it takes " + names_of(spec) + ")"));
    for (const auto& w : written)
      if (w.first == key) throw LayerError("argument '" + key + "' given twice");
    written.emplace_back(key, value);
  }
  return written;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> resolve_arguments(const LayerCall& call, const LayerSpec& spec,
                                                                   bool last, std::size_t outputs) {
  using Arguments = std::vector<std::pair<std::string, std::string>>;
  const Arguments written = written_arguments(call, spec);
  Arguments resolved;
  const auto value_of = [&](const std::string& name) -> const std::string* {
    for (const Arguments* list : {&written, static_cast<const Arguments*>(&resolved)})
      for (const auto& [key, value] : *list)
        if (key == name) return &value;
    return nullptr;
  };
  for (const LayerArgumentSpec& a : spec.arguments) {
    if (const std::string* given = value_of(a.name)) {
      resolved.emplace_back(a.name, *given);
    } else if (a.fallback == "=classes" && last) {
      resolved.emplace_back(a.name, std::to_string(outputs));
    } else if (!a.fallback.empty() && a.fallback[0] == '=' && a.fallback != "=classes") {
      const std::string* other = value_of(a.fallback.substr(1));
      if (!other) throw LayerError("missing argument '" + a.fallback.substr(1) + "'");
      resolved.emplace_back(a.name, *other);
    } else if (a.fallback.empty() || a.fallback[0] == '=') {
      throw LayerError("missing argument '" + a.name + "'");
    } else {
      resolved.emplace_back(a.name, a.fallback);
    }
  }
  return resolved;
}

namespace {

// linear(tie=K) as the builder builds it: no bias, the weight layers.K.weight.
void share_tied_weight(ResolvedLayer& layer) {
  if (layer.spec->name != "linear") return;
  for (auto& [key, value] : layer.arguments)
    if (key == "tie" && value.rfind("-", 0) != 0) layer.shared_weight = "layers." + value + ".weight";
  if (layer.shared_weight.empty()) return;
  for (auto& [key, value] : layer.arguments)
    if (key == "bias") value = "false";
}

// `prefix`: "layers", or a residual branch's "layers.3.body"; `branch`: "" for
// the model's list (only its last layer takes the outputs), else "body" or "shortcut".
std::vector<ResolvedLayer> resolve_calls(const std::vector<LayerCall>& calls, std::size_t outputs,
                                         const std::string& prefix, const std::string& branch) {
  const bool top = branch.empty();
  std::vector<ResolvedLayer> layers;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    try {
      const LayerSpec* spec = find_layer_spec(calls[i].name);
      if (!spec) {
        std::string names;
        for (const auto& s : layer_table()) names += (names.empty() ? "" : ", ") + s.name;
        throw LayerError("unknown layer (known: " + names + ")");
      }
      const std::string path = prefix + "." + std::to_string(i);
      if (is_container(calls[i].name)) {
        const std::vector<std::string> branches = split_branches(calls[i].nested);
        ResolvedLayer layer{i, spec, {}, path, "", {}, {}};
        layer.body = resolve_calls(parse_layer_list(branches[0], "body"), outputs, path + ".body", "body");
        if (branches.size() > 1)
          layer.shortcut = resolve_calls(parse_layer_list(branches[1], "shortcut"), outputs, path + ".shortcut", "shortcut");
        layers.push_back(std::move(layer));
      } else {
        layers.push_back({i, spec, resolve_arguments(calls[i], *spec, top && i + 1 == calls.size(), outputs), path,
                          "", {}, {}});
        share_tied_weight(layers.back());
      }
    } catch (const LayerError& e) {
      throw LayerError(list_position(branch, i) + " '" + calls[i].text + "': " + e.what());
    }
  }
  return layers;
}

// What the Python tools need besides the arguments to build the torch module:
// where its sizes come from, and which arguments are not torch's.
void describe_torch_sizes(const LayerSpec& spec, Json& entry) {
  entry["input_argument"] = spec.input_argument.empty() ? Json() : Json(spec.input_argument);
  entry["input_weight_dim"] = spec.input_weight_dim;
  entry["input_sample_dim"] = spec.input_sample_dim;
  entry["takes_tokens"] = spec.takes_tokens;
  entry["weight_sizes"] = Json::array();
  for (const WeightSize& w : spec.weight_sizes) {
    Json size;
    size["argument"] = w.argument;
    size["parameter"] = w.parameter;
    size["weight_dim"] = w.weight_dim;
    size["sample_dim"] = w.sample_dim;
    entry["weight_sizes"].push_back(size);
  }
  entry["not_torch"] = Json::array();
  for (const LayerArgumentSpec& a : spec.arguments)
    if (!a.torch) entry["not_torch"].push_back(a.name);
}

Json resolved_json(const std::vector<ResolvedLayer>& layers) {
  Json list = Json::array();
  for (const ResolvedLayer& layer : layers) {
    Json entry;
    entry["index"] = layer.index;
    entry["path"] = layer.path;
    entry["name"] = layer.spec->name;
    entry["torch_module"] = torch_module_name(*layer.spec);
    entry["arguments"] = Json::object();
    for (std::size_t i = 0; i < layer.arguments.size(); ++i) {
      const auto& [key, value] = layer.arguments[i];
      // Typed as the table says (the builder has checked the ranges and the words).
      const std::string& type = layer.spec->arguments[i].type;
      if (type == "int") entry["arguments"][key] = std::stoll(value);
      else if (type == "word") entry["arguments"][key] = value;
      else if (type == "bool") entry["arguments"][key] = value == "true";
      else entry["arguments"][key] = std::stod(value);
    }
    describe_torch_sizes(*layer.spec, entry);
    if (!layer.shared_weight.empty()) entry["shared_weight"] = layer.shared_weight;
    if (is_container(layer.spec->name)) {
      entry["body"] = resolved_json(layer.body);
      entry["shortcut"] = resolved_json(layer.shortcut);
    }
    list.push_back(entry);
  }
  return list;
}

}  // namespace

std::vector<ResolvedLayer> resolve_layer_list(const std::string& text, std::size_t outputs) {
  return resolve_calls(parse_layer_list(text), outputs, "layers", "");
}

std::string layer_table_json() {
  Json table = Json::array();
  for (const LayerSpec& spec : layer_table()) {
    Json entry;
    entry["name"] = spec.name;
    entry["torch_module"] = torch_module_name(spec);
    entry["arguments"] = Json::array();
    for (const auto& a : spec.arguments) {
      Json argument;
      argument["name"] = a.name;
      argument["type"] = a.type;
      argument["required"] = a.fallback.empty();
      argument["default"] = a.fallback.empty() ? Json() : Json(a.fallback);
      argument["torch"] = a.torch;
      if (a.type == "word") argument["choices"] = a.choices;
      entry["arguments"].push_back(argument);
    }
    describe_torch_sizes(spec, entry);
    table.push_back(entry);
  }
  return json_line(table);
}

std::string resolved_layers_json(const std::vector<ResolvedLayer>& layers) {
  return json_line(resolved_json(layers));
}

}  // namespace mpiddp
