#pragma once
// One batch of samples in host memory, as the loader reads it and a device
// stages it (Device::stage).
#include <cstdint>
#include <vector>

#include "mpiddp/device/matrix.hpp"

namespace mpiddp {

// Samples in the order the sampler asked for.
struct Batch {
  Matrix features;
  std::vector<std::int32_t> class_ids;  // classification
  Matrix targets;                       // regression
  std::size_t size() const { return features.rows(); }
};

}  // namespace mpiddp
