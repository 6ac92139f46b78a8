#include "layer_arguments.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

LayerArguments::LayerArguments(const LayerCall& call, std::vector<std::string> names) : names_(std::move(names)) {
  if (call.positional.size() > names_.size())
    throw LayerError("takes at most " + std::to_string(names_.size()) + " positional argument(s)" +
                     (names_.empty() ? "" : " (" + [&] {
                       std::string list;
                       for (const auto& n : names_) list += (list.empty() ? "" : ", ") + n;
                       return list;
                     }() + ")") +
                     ", got " + std::to_string(call.positional.size()));
  for (std::size_t i = 0; i < call.positional.size(); ++i) values_[names_[i]] = call.positional[i];
  for (const auto& [key, value] : call.keywords) {
    if (values_.count(key)) throw LayerError("argument '" + key + "' given twice");
    values_[key] = value;
  }
}

long LayerArguments::integer(const std::string& name, std::optional<long> fallback, long minimum) {
  read_.push_back(name);
  const auto it = values_.find(name);
  if (it == values_.end()) {
    if (!fallback) throw LayerError("missing argument '" + name + "'");
    return *fallback;
  }
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(it->second.c_str(), &end, 10);
  if (errno != 0 || end == it->second.c_str() || *end != '\0' || value < minimum || value > (1L << 30))
    throw LayerError(name + " '" + it->second + "' is not a whole number from " + std::to_string(minimum) +
                     " to 1073741824");
  return value;
}

double LayerArguments::real(const std::string& name, double fallback, double low, double high, bool high_open) {
  read_.push_back(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(it->second.c_str(), &end);
  const bool inside = std::isfinite(value) && value >= low && (high_open ? value < high : value <= high);
  if (errno != 0 || end == it->second.c_str() || *end != '\0' || !inside) {
    char range[96];
    std::snprintf(range, sizeof(range), "[%g, %g%s", low, high, high_open ? ")" : "]");
    throw LayerError(name + " '" + it->second + "' is not a number in " + range);
  }
  return value;
}

void LayerArguments::finish() const {
  for (const auto& [key, value] : values_)
    if (std::find(read_.begin(), read_.end(), key) == read_.end()) {
      std::string list;
      for (const auto& n : names_) list += (list.empty() ? "" : ", ") + n;
      throw LayerError("unknown argument '" + key + "'" + (list.empty() ? " (it takes none)" : " (it takes " + list + ")"));
    }
}

}  // namespace mpiddp
