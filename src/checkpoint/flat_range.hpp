#pragma once
// A range of the flat parameter order inside the per-parameter datasets of a
// checkpoint (private to the checkpoint module): how a shard of optimizer state
// is written into, and read from, full-size arrays without the rest of them.
#include <hdf5.h>

#include <cstddef>
#include <string>
#include <vector>

#include "mpiddp/nn/parameters.hpp"

namespace mpiddp {

// For every parameter overlapping the flat range [begin, end): its part of
// `data` (which holds end - begin floats, from `begin` on) to group/<name>,
// whose datasets exist at full size.
void write_flat_shard(hid_t group, const std::vector<Parameter>& list, std::size_t begin, std::size_t end,
                      const float* data, const std::string& path);
// The reverse: [begin, end) of the flat order from group/<name> into `data`.
// The datasets' shapes were checked before.
void read_flat_shard(hid_t group, const std::vector<Parameter>& list, std::size_t begin, std::size_t end,
                     float* data, const std::string& path);

}  // namespace mpiddp
