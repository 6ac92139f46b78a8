#pragma once
// The shape of one sample as it flows between layers: {features} for flat data,
// {channels, height, width} for images. A batch is a Matrix of rows = samples,
// cols = the shape's element count, each row in this (C-order) layout.
//
// Sizes come from input files, so every product of them is checked: a size that
// wraps around 64 bits, or passes the int the kernels index with, is refused
// with the numbers instead of becoming a small wrong one.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpiddp {

using Shape = std::vector<std::size_t>;

// A layer list that cannot work (bad shape, kernel larger than its input, sizes
// beyond what can be indexed, ...). The model builder adds `model.layers` and the
// layer's position.
struct LayerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The largest size a kernel indexes with an int (BLAS dimensions, im2col rows,
// image planes, channels): the layers refuse shapes beyond it.
constexpr std::size_t kMaxIndexedSize = 2147483647;

// "1x28x28"
inline std::string shape_text(const Shape& shape) {
  std::string text;
  for (std::size_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "scalar" : text;
}

// a x b and a + b, or a LayerError naming `what` and the numbers.
inline std::size_t checked_product(std::size_t a, std::size_t b, const std::string& what) {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    throw LayerError(what + ": " + std::to_string(a) + " x " + std::to_string(b) + " overflows 64 bits");
  return product;
}
inline std::size_t checked_sum(std::size_t a, std::size_t b, const std::string& what) {
  std::size_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw LayerError(what + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows 64 bits");
  return sum;
}

inline std::size_t element_count(const Shape& shape) {
  std::size_t count = 1;
  for (std::size_t d : shape)
    if (__builtin_mul_overflow(count, d, &count))
      throw LayerError("the shape " + shape_text(shape) + " has more elements than 64 bits count");
  return count;
}

// `size` when a kernel can index it, else a LayerError naming `what`.
inline std::size_t indexable(std::size_t size, const std::string& what) {
  if (size > kMaxIndexedSize)
    throw LayerError(what + " is " + std::to_string(size) + ", more than " + std::to_string(kMaxIndexedSize) +
                     " (the largest size mpiddp's kernels index)");
  return size;
}

}  // namespace mpiddp
