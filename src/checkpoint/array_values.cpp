#include "array_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// Variances: PyTorch's names for them, under /buffers and /optimizer.
bool is_variance(const std::string& array) {
  return ends_with(array, ".running_var") || array.rfind("optimizer/exp_avg_sq/", 0) == 0;
}

std::string value_text(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(v));
  return text;
}

}  // namespace

void check_array_values(const float* values, std::size_t count, std::size_t first_index, const std::string& array,
                        const std::string& where) {
  const bool variance = is_variance(array);
  // One pass that stays fast on large arrays; the message is built only for the bad value.
  const float* bad =
      std::find_if(values, values + count, [variance](float v) { return !std::isfinite(v) || (variance && v < 0.0f); });
  if (bad == values + count) return;
  const std::string why = std::isfinite(*bad) ? "a variance is never negative" : "a non-finite value";
  throw InputError(where + ": " + array + "[" + std::to_string(first_index + (bad - values)) + "] is " +
                   value_text(*bad) + " (" + why + "); refused");
}

void check_flat_range_values(const float* data, std::size_t begin, std::size_t end, const std::vector<Parameter>& list,
                             const std::string& group, const std::string& where) {
  for (const Parameter& p : list) {
    const std::size_t first = std::max(begin, p.offset), last = std::min(end, p.offset + p.count);
    if (first < last)
      check_array_values(data + (first - begin), last - first, first - p.offset, group + "/" + p.name, where);
  }
}

}  // namespace mpiddp
