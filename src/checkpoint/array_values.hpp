#pragma once
// Float arrays read from a file (model.init, a checkpoint, a ZeRO shard of one)
// must hold values training can go on from: one NaN or Inf weight, or a negative
// variance, would poison every step after it, far from the file it came from.
// Private to the checkpoint module.
#include <cstddef>
#include <string>
#include <vector>

#include "mpiddp/nn/parameters.hpp"

namespace mpiddp {

// Checks values[0, count) of array `array` ("params/layers.0.weight"), whose
// first element here is the array's element `first_index`. Throws InputError
// "WHERE: ARRAY[i] is NaN (a non-finite value); refused" at the first bad value.
// A variance (BatchNorm's running_var, AdamW's exp_avg_sq) must also be >= 0.
void check_array_values(const float* values, std::size_t count, std::size_t first_index, const std::string& array,
                        const std::string& where);

// The same for the flat range [begin, end) of `list`'s layout held in `data`
// (a shard of optimizer state), each piece named group/<parameter name>.
void check_flat_range_values(const float* data, std::size_t begin, std::size_t end, const std::vector<Parameter>& list,
                             const std::string& group, const std::string& where);

}  // namespace mpiddp
