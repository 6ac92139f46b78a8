#pragma once
// The shape of one sample as it flows between layers: {features} for flat data,
// {channels, height, width} for images. A batch is a Matrix of rows = samples,
// cols = the shape's element count, each row in this (C-order) layout.
#include <cstddef>
#include <string>
#include <vector>

namespace mpiddp {

using Shape = std::vector<std::size_t>;

inline std::size_t element_count(const Shape& shape) {
  std::size_t count = 1;
  for (std::size_t d : shape) count *= d;
  return count;
}

// "1x28x28"
inline std::string shape_text(const Shape& shape) {
  std::string text;
  for (std::size_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "scalar" : text;
}

}  // namespace mpiddp
