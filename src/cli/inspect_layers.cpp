// `mpiddp inspect layers`: the layer table (every layer a model.layers list may
// name, its arguments with their defaults, its torch.nn module), or with --list
// one list resolved as the builder resolves it (every argument named, defaults
// filled in). --json is what the Python tools read instead of parsing lists.
#include <boost/program_options.hpp>
#include <cstdio>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/layer_table.hpp"
#include "mpiddp/nn/model_builder.hpp"

namespace po = boost::program_options;

namespace mpiddp {
namespace {

void print_table() {
  std::printf("%-22s %-34s %s\n", "layer", "torch module", "arguments (positional order; = default)");
  for (const LayerSpec& spec : layer_table()) {
    std::string arguments;
    for (const auto& a : spec.arguments)
      arguments += (arguments.empty() ? "" : ", ") + a.name +
                   (a.fallback.empty() ? "" : a.fallback[0] == '=' ? " = " + a.fallback.substr(1) : " = " + a.fallback);
    std::printf("%-22s %-34s %s\n", spec.name.c_str(), torch_module_name(spec).c_str(),
                arguments.empty() ? "-" : arguments.c_str());
  }
}

// One line per layer, a residual's branches indented under it.
void print_resolved(const std::vector<ResolvedLayer>& layers, int indent = 0) {
  for (const ResolvedLayer& layer : layers) {
    std::string arguments;
    for (const auto& [key, value] : layer.arguments) arguments += (arguments.empty() ? "" : ", ") + key + "=" + value;
    std::printf("%*s%s %s(%s)\n", indent, "", layer.path.c_str(), layer.spec->name.c_str(), arguments.c_str());
    print_resolved(layer.body, indent + 2);
    print_resolved(layer.shortcut, indent + 2);
  }
}

}  // namespace

int inspect_layers(const std::vector<std::string>& args) {
  std::string list;
  long classes = 10;
  bool json = false;
  po::options_description options("mpiddp inspect layers");
  options.add_options()("help,h", "show this help")
      ("list", po::value(&list), "a model.layers list to resolve (every argument named, defaults filled in)")
      ("classes", po::value(&classes)->default_value(classes), "what a last linear without a width gets")
      ("json", po::bool_switch(&json), "JSON for scripts");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  if (!values.count("list")) {
    if (json) std::printf("%s\n", layer_table_json().c_str());
    else print_table();
    return kExitOk;
  }
  if (classes < 1 || classes > (1L << 30)) throw InputError("--classes must be in [1, 2^30], got " + std::to_string(classes));
  try {
    // The builder's own checks first (argument ranges), then the table's view.
    build_layers(list, static_cast<std::size_t>(classes), false);
    const std::vector<ResolvedLayer> layers = resolve_layer_list(list, static_cast<std::size_t>(classes));
    if (json) std::printf("%s\n", resolved_layers_json(layers).c_str());
    else print_resolved(layers);
  } catch (const LayerError& e) {
    throw InputError(std::string("model.layers: ") + e.what());
  }
  return kExitOk;
}

}  // namespace mpiddp
