#include "layer_arguments.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

LayerArguments::LayerArguments(const LayerCall& call, const LayerSpec& spec, bool last, std::size_t outputs)
    : spec_(spec) {
  for (auto& [key, value] : resolve_arguments(call, spec, last, outputs)) values_[key] = value;
}

const std::string& LayerArguments::text(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) throw LayerError("missing argument '" + name + "'");  // not in the table: a bug
  return it->second;
}

long LayerArguments::integer(const std::string& name, long minimum) const {
  const std::string& value_text = text(name);
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(value_text.c_str(), &end, 10);
  if (errno != 0 || end == value_text.c_str() || *end != '\0' || value < minimum || value > (1L << 30))
    throw LayerError(name + " '" + value_text + "' is not a whole number from " + std::to_string(minimum) +
                     " to 1073741824");
  return value;
}

double LayerArguments::real(const std::string& name, double low, double high, bool high_open) const {
  const std::string& value_text = text(name);
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(value_text.c_str(), &end);
  const bool inside = std::isfinite(value) && value >= low && (high_open ? value < high : value <= high);
  if (errno != 0 || end == value_text.c_str() || *end != '\0' || !inside) {
    char range[96];
    std::snprintf(range, sizeof(range), "[%g, %g%s", low, high, high_open ? ")" : "]");
    throw LayerError(name + " '" + value_text + "' is not a number in " + range);
  }
  return value;
}

bool LayerArguments::boolean(const std::string& name) const {
  const std::string& value = text(name);
  if (value != "true" && value != "false") throw LayerError(name + " '" + value + "' is not true or false");
  return value == "true";
}

const std::string& LayerArguments::word(const std::string& name) const {
  const std::string& value = text(name);
  std::vector<std::string> allowed;
  for (const LayerArgumentSpec& a : spec_.arguments)
    if (a.name == name) allowed = a.choices;
  std::string choices;
  for (const std::string& choice : allowed) {
    if (choice == value) return value;
    choices += (choices.empty() ? "" : ", ") + choice;
  }
  throw LayerError(name + " '" + value + "' is not one of: " + choices);
}

}  // namespace mpiddp
