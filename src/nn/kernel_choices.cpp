#include "mpiddp/nn/kernel_choices.hpp"

#include <map>
#include <optional>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "ops/conv/onednn_conv.hpp"
#include "ops/conv/thin_conv.hpp"

namespace mpiddp {
namespace {

// A library or layer kernel choice by its name (the settings auto and tune are no choice of their own).
std::optional<CpuKernels> library_named(const std::string& name) {
  const auto choice = parse_choice<CpuKernels>(name);
  if (choice == CpuKernels::automatic || choice == CpuKernels::tune) return std::nullopt;
  return choice;
}

struct ParsedChoices {
  CpuKernels process = CpuKernels::automatic;
  std::map<std::string, CpuKernels> layers;
};

bool layer_name(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_')) return false;
  return true;
}

// Far more than any model's layers would write (a list holds at most 10,000
// layers at the top level): a longer text is refused before it is split.
constexpr std::size_t kMaxChoicesBytes = std::size_t{4} << 20;

// Null when `text` does not have the form.
std::optional<ParsedChoices> parse(const std::string& text) {
  if (text.size() > kMaxChoicesBytes) return std::nullopt;
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(';', start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  ParsedChoices parsed;
  const auto process = library_named(parts[0]);
  if (!process || layer_only_kernels(*process)) return std::nullopt;
  parsed.process = *process;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::size_t eq = parts[i].find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string name = parts[i].substr(0, eq);
    const auto library = library_named(parts[i].substr(eq + 1));
    if (!layer_name(name) || !library || !parsed.layers.emplace(name, *library).second) return std::nullopt;
  }
  return parsed;
}

}  // namespace

std::string kernel_choices_text(Sequential& model, CpuKernels library) {
  std::string text = name_of(library);
  model.visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    const CpuKernels own = layer.cpu_kernels();
    if (own == CpuKernels::onednn || own == CpuKernels::openblas || layer_only_kernels(own))
      text += ";" + name + "=" + name_of(own);
  });
  return text;
}

bool valid_kernel_choices(const std::string& text) { return parse(text).has_value(); }

bool runs_here(const Layer& layer, CpuKernels library) {
  switch (library) {
    case CpuKernels::onednn: return cpu::onednn_linked();
    case CpuKernels::own: return layer.has_own_kernels();
    case CpuKernels::winograd: return layer.has_winograd();
    case CpuKernels::winograd_all: return layer.has_winograd_weight_gradient();
    case CpuKernels::own_winograd:
    case CpuKernels::own_winograd4: return layer.has_own_winograd();
    default: return true;
  }
}

bool kernel_choices_available(Sequential& model, const std::string& text) {
  const auto parsed = parse(text);
  if (!parsed || (parsed->process == CpuKernels::onednn && !cpu::onednn_linked())) return false;
  bool available = true;
  model.visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    const auto it = parsed->layers.find(name);
    if (it != parsed->layers.end() && !runs_here(layer, it->second)) available = false;
  });
  return available;
}

void check_kernel_choices_fit(Sequential& model, const std::string& text, const std::string& source) {
  auto parsed = parse(text);
  if (!parsed)
    throw InputError(source + ": CPU kernel choices '" + printable(text) + "' do not parse (damaged or edited?)");
  model.visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    const auto it = parsed->layers.find(name);
    if (it == parsed->layers.end()) return;
    if (!layer.has_own_products())
      throw InputError(source + ": CPU kernel choice for " + name + ", a " + layer.kind() +
                       " without matrix products of its own (a checkpoint of another model?)");
    // Where this CPU has no own kernels at all, the layer's kind cannot tell:
    // kernel_choices_available says no instead.
    if (it->second == CpuKernels::own && !layer.has_own_kernels() && cpu::thin_conv::available())
      throw InputError(source + ": CPU kernel choice own for " + name + ", a " + layer.kind() +
                       " for which mpiddp has no kernels of its own (a checkpoint of another model?)");
    parsed->layers.erase(it);
  });
  if (!parsed->layers.empty())
    throw InputError(source + ": CPU kernel choice for " + parsed->layers.begin()->first +
                     ", a layer this model does not have (a checkpoint of another model?)");
}

CpuKernels apply_kernel_choices(Sequential& model, const std::string& text, const std::string& source) {
  check_kernel_choices_fit(model, text, source);
  const ParsedChoices parsed = *parse(text);
  model.visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    const auto it = parsed.layers.find(name);
    layer.set_cpu_kernels(it == parsed.layers.end() ? CpuKernels::automatic : it->second);
  });
  return parsed.process;
}

namespace {

// Which Winograd choice a layer Winograd suits gets: winograd insists on the
// direct weight gradient, winograd_all on Winograd's wherever oneDNN has it, and
// the rule (auto, own) takes Winograd's where it suits.
CpuKernels winograd_choice(const Layer& layer, CpuKernels setting, int threads) {
  if (setting == CpuKernels::winograd) return CpuKernels::winograd;
  const bool all = setting == CpuKernels::winograd_all ? layer.has_winograd_weight_gradient()
                                                       : layer.winograd_weight_gradient_suits(threads);
  return all ? CpuKernels::winograd_all : CpuKernels::winograd;
}

}  // namespace

void give_own_kernels(Sequential& model, CpuKernels setting, int threads, bool winograd_everywhere) {
  if (setting == CpuKernels::own && !cpu::thin_conv::available())
    throw InputError("train.cpu_kernels = own: mpiddp's own kernels need an x86-64 CPU with AVX2 and FMA; "
                     "use auto");
  const bool insists = setting == CpuKernels::winograd || setting == CpuKernels::winograd_all;
  const std::string asked = std::string("train.cpu_kernels = ") + name_of(setting) + ": ";
  if (insists && !cpu::onednn_conv::winograd_runs())
    throw InputError(asked +
                     (cpu::onednn_linked() ? "oneDNN has Winograd convolutions only for CPUs with AVX-512"
                                           : "this mpiddp was built without oneDNN") +
                     "; use auto");
  if (insists && !winograd_everywhere)
    throw InputError(asked + "another rank's CPU lacks oneDNN's Winograd convolutions (AVX-512); use auto");
  // winograd and winograd_all are auto's rule, insisting on Winograd's kernels;
  // auto (and own, for the layers its kernels do not take) takes them where every
  // rank's CPU has them; tune times them instead.
  // own_winograd(4): mpiddp's own Winograd kernels wherever they run (auto's rule for the rest).
  const bool own_winograd = setting == CpuKernels::own_winograd || setting == CpuKernels::own_winograd4;
  const bool rule = setting == CpuKernels::automatic || setting == CpuKernels::tune || insists || own_winograd;
  const bool winograd =
      insists || ((setting == CpuKernels::automatic || setting == CpuKernels::own || own_winograd) && winograd_everywhere);
  // Where some rank's CPU lacks oneDNN's Winograd kernels, auto and own give the
  // layers they would have suited mpiddp's own, F(4x4, 3x3), on every rank; so
  // does tune in a build without oneDNN, which has nothing to time them against.
  const bool own_winograd4 =
      !winograd_everywhere && (setting == CpuKernels::automatic || setting == CpuKernels::own ||
                               (setting == CpuKernels::tune && !cpu::onednn_linked()));
  model.visit_layers([&](const std::string&, Layer& layer, const Shape&) {
    if (setting == CpuKernels::own ? layer.has_own_kernels() : rule && layer.own_kernels_suit(threads))
      layer.set_cpu_kernels(CpuKernels::own);
    else if (own_winograd && layer.has_own_winograd())
      layer.set_cpu_kernels(setting);
    else if (winograd && layer.winograd_suits(threads))
      layer.set_cpu_kernels(winograd_choice(layer, setting, threads));
    else if (own_winograd4 && layer.own_winograd_suits(threads))
      layer.set_cpu_kernels(CpuKernels::own_winograd4);
  });
}

std::string layers_on(Sequential& model, CpuKernels choice) {
  std::string names;
  model.visit_layers([&](const std::string& name, Layer& layer, const Shape&) {
    if (layer.cpu_kernels() == choice) names += (names.empty() ? "" : ", ") + name;
  });
  return names;
}

}  // namespace mpiddp
