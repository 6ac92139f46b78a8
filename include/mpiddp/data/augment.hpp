#pragma once
// Random image transforms of training samples (data.augment), applied in place
// to a batch's rows where it is read (data.loader). Every random decision is a hash of
// (train.seed, epoch, global sample index, step position): no generator state,
// so a run repeats bit-exactly, a resume mid-epoch continues bit-exactly, and
// neither the world size nor the batch size changes what a sample becomes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/device/matrix.hpp"

namespace mpiddp {

// A sample's layout in its row: channel-major, then rows, then columns (NCHW).
struct ImageShape {
  std::size_t channels = 1, height = 0, width = 0;
  std::size_t size() const { return channels * height * width; }
};

// The image shape of samples stored as `sample_shape` ([H, W] or [C, H, W],
// ShardedDataset::sample_shape) for `steps`. InputError naming data.augment and
// `where` (the shards) when the samples are not images or a crop pads by as much
// as the smaller side.
ImageShape augment_image_shape(const std::vector<AugmentStep>& steps, const std::vector<std::size_t>& sample_shape,
                               const std::string& where);

// Reverses the columns of every row of every channel.
void flip_columns(float* image, const ImageShape& shape);
// Moves the content of every channel `dx` columns right and `dy` rows down
// (negative: left, up), zeros coming in: out(y, x) = in(y - dy, x - dx). That is
// RandomCrop(padding=P) with its crop at (top, left) = (P - dy, P - dx).
// Needs |dx| < width and |dy| < height.
void shift_image(float* image, const ImageShape& shape, int dx, int dy);

struct Shift {
  int dx = 0, dy = 0;
};

// The rectangle erase(P) zeroes in every channel; height 0: none.
struct Box {
  std::size_t top = 0, left = 0, height = 0, width = 0;
};
// Zeroes `box` in every channel.
void erase_box(float* image, const ImageShape& shape, const Box& box);

class Augmenter {
 public:
  Augmenter(std::vector<AugmentStep> steps, ImageShape shape, std::uint64_t seed);

  const std::vector<AugmentStep>& steps() const { return steps_; }
  const ImageShape& shape() const { return shape_; }

  // The decision of step `position` (an hflip, a crop, an erasure) for sample `index` in `epoch`.
  bool flips(std::uint64_t epoch, std::int64_t index, std::size_t position) const;
  Shift shift(std::uint64_t epoch, std::int64_t index, std::size_t position) const;
  // torchvision's RandomErasing(p, scale=(0.02, 0.33), ratio=(0.3, 3.3)): with
  // probability p, up to 10 draws of an area share and a log-uniform aspect ratio
  // until the box fits inside the image; none fitting, or a side rounded to 0: no box.
  Box erasure(std::uint64_t epoch, std::int64_t index, std::size_t position) const;

  // Every step, in order, on one sample (shape().size() floats).
  void apply(std::uint64_t epoch, std::int64_t index, float* image) const;
  // Every row r of `features` is sample indices[r].
  void apply(std::uint64_t epoch, const std::vector<std::int64_t>& indices, Matrix& features) const;

 private:
  std::uint64_t key(std::uint64_t epoch, std::int64_t index, std::size_t position) const;

  std::vector<AugmentStep> steps_;
  ImageShape shape_;
  std::uint64_t seed_;
};

}  // namespace mpiddp
