#include "mpiddp/data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/random.hpp"

namespace mpiddp {
namespace {

// Keeps augmentation's hashes apart from every other stream derived from train.seed.
constexpr std::uint64_t kAugmentStream = 0x6175676d656e7421ULL;  // "augment!"

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string text;
  for (auto d : shape) text += (text.empty() ? "" : ", ") + std::to_string(d);
  return "[" + text + "]";
}

}  // namespace

ImageShape augment_image_shape(const std::vector<AugmentStep>& steps, const std::vector<std::size_t>& sample_shape,
                               const std::string& where) {
  const std::string prefix = where + ": key 'data.augment': ";
  const std::size_t dims = sample_shape.size();
  if (dims != 2 && dims != 3)
    throw InputError(prefix + "needs image samples (a sample_shape attribute [H, W] or [C, H, W] on the features), "
                     "but the samples have shape " + shape_text(sample_shape));
  ImageShape shape;
  shape.channels = dims == 3 ? sample_shape[0] : 1;
  shape.height = sample_shape[dims - 2];
  shape.width = sample_shape[dims - 1];
  const std::size_t side = std::min(shape.height, shape.width);
  for (const AugmentStep& step : steps) {
    if (step.kind == AugmentKind::crop && static_cast<std::size_t>(step.padding) >= side)
      throw InputError(prefix + "crop(" + std::to_string(step.padding) + ") pads by as much as the images' smaller " +
                       "side (" + std::to_string(shape.height) + "x" + std::to_string(shape.width) +
                       "): the padding must be below " + std::to_string(side));
  }
  return shape;
}

void flip_columns(float* image, const ImageShape& shape) {
  const std::size_t rows = shape.channels * shape.height;
  for (std::size_t r = 0; r < rows; ++r) std::reverse(image + r * shape.width, image + (r + 1) * shape.width);
}

void shift_image(float* image, const ImageShape& shape, int dx, int dy) {
  if (dx == 0 && dy == 0) return;
  const auto height = static_cast<std::ptrdiff_t>(shape.height);
  const std::size_t width = shape.width;
  const auto moved = static_cast<std::size_t>(std::abs(dx));
  const std::size_t kept = width - moved;
  for (std::size_t c = 0; c < shape.channels; ++c) {
    float* plane = image + c * shape.height * width;
    // In place: rows are written in the order that reads every source row
    // before it is overwritten (bottom up when moving down).
    for (std::ptrdiff_t k = 0; k < height; ++k) {
      const std::ptrdiff_t y = dy > 0 ? height - 1 - k : k;
      const std::ptrdiff_t from = y - dy;
      float* dst = plane + y * static_cast<std::ptrdiff_t>(width);
      if (from < 0 || from >= height) {
        std::fill(dst, dst + width, 0.0f);
        continue;
      }
      const float* src = plane + from * static_cast<std::ptrdiff_t>(width);
      if (dx >= 0) {
        std::memmove(dst + moved, src, kept * sizeof(float));
        std::fill(dst, dst + moved, 0.0f);
      } else {
        std::memmove(dst, src + moved, kept * sizeof(float));
        std::fill(dst + kept, dst + width, 0.0f);
      }
    }
  }
}

void erase_box(float* image, const ImageShape& shape, const Box& box) {
  for (std::size_t c = 0; c < shape.channels; ++c)
    for (std::size_t y = box.top; y < box.top + box.height; ++y) {
      float* row = image + (c * shape.height + y) * shape.width + box.left;
      std::fill(row, row + box.width, 0.0f);
    }
}

Augmenter::Augmenter(std::vector<AugmentStep> steps, ImageShape shape, std::uint64_t seed)
    : steps_(std::move(steps)), shape_(shape), seed_(seed) {}

std::uint64_t Augmenter::key(std::uint64_t epoch, std::int64_t index, std::size_t position) const {
  std::uint64_t k = hash_combine(kAugmentStream, seed_);
  k = hash_combine(k, epoch);
  k = hash_combine(k, static_cast<std::uint64_t>(index));
  return hash_combine(k, position);
}

bool Augmenter::flips(std::uint64_t epoch, std::int64_t index, std::size_t position) const {
  return (CounterRng(key(epoch, index, position)).bits(0) >> 63) != 0;
}

Shift Augmenter::shift(std::uint64_t epoch, std::int64_t index, std::size_t position) const {
  const CounterRng rng(key(epoch, index, position));
  const auto padding = static_cast<std::uint64_t>(steps_[position].padding);
  const std::uint64_t choices = 2 * padding + 1;  // the modulo's bias: below 2^-32
  return {static_cast<int>(rng.bits(0) % choices) - static_cast<int>(padding),
          static_cast<int>(rng.bits(1) % choices) - static_cast<int>(padding)};
}

Box Augmenter::erasure(std::uint64_t epoch, std::int64_t index, std::size_t position) const {
  const CounterRng rng(key(epoch, index, position));
  if (!(unit_double(rng.bits(0)) < steps_[position].probability)) return {};
  const double area = static_cast<double>(shape_.height * shape_.width);
  const double log_low = std::log(0.3), log_high = std::log(3.3);
  for (std::uint64_t attempt = 0; attempt < 10; ++attempt) {
    const std::uint64_t draw = 1 + 4 * attempt;
    const double erase_area = area * (0.02 + (0.33 - 0.02) * unit_double(rng.bits(draw)));
    const double aspect = std::exp(log_low + (log_high - log_low) * unit_double(rng.bits(draw + 1)));
    // Python's round(), as torchvision's: halves to even (the default rounding mode).
    const auto h = static_cast<std::size_t>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const auto w = static_cast<std::size_t>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (h >= shape_.height || w >= shape_.width) continue;
    if (h == 0 || w == 0) return {};  // torchvision erases this empty box: nothing
    // The top-left corner, uniform over the places the box fits (modulo bias below 2^-32).
    return {rng.bits(draw + 2) % (shape_.height - h + 1), rng.bits(draw + 3) % (shape_.width - w + 1), h, w};
  }
  return {};
}

void Augmenter::apply(std::uint64_t epoch, std::int64_t index, float* image) const {
  for (std::size_t position = 0; position < steps_.size(); ++position) {
    switch (steps_[position].kind) {
      case AugmentKind::hflip:
        if (flips(epoch, index, position)) flip_columns(image, shape_);
        break;
      case AugmentKind::crop: {
        const Shift s = shift(epoch, index, position);
        shift_image(image, shape_, s.dx, s.dy);
        break;
      }
      case AugmentKind::erase: {
        const Box box = erasure(epoch, index, position);
        if (box.height > 0) erase_box(image, shape_, box);
        break;
      }
    }
  }
}

void Augmenter::apply(std::uint64_t epoch, const std::vector<std::int64_t>& indices, Matrix& features) const {
  if (features.cols() != shape_.size() || features.rows() != indices.size())
    throw RuntimeError("augmenting a batch of " + std::to_string(features.rows()) + "x" +
                       std::to_string(features.cols()) + " floats as " + std::to_string(indices.size()) +
                       " images of " + std::to_string(shape_.size()));
  for (std::size_t r = 0; r < indices.size(); ++r) apply(epoch, indices[r], features.row(r));
}

}  // namespace mpiddp
