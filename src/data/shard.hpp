#pragma once
// One open shard of a ShardedDataset (private to the data module: it holds
// HDF5 handles, and hdf5.h stays out of the public headers).
#include <cstdint>
#include <string>

#include "io/hdf5_util.hpp"

namespace mpiddp {

struct Shard {
  std::string path;
  std::int64_t first = 0;  // global index of row 0
  std::int64_t rows = 0;
  h5::Handle file, features, labels;
  // Fast path: contiguous, uncompressed, little-endian datasets are read straight
  // from a read-only mapping of the file at the datasets' offsets (no per-row
  // system calls); anything else goes through HDF5 hyperslab reads.
  struct Mapping {
    int fd = -1;
    const unsigned char* base = nullptr;
    std::size_t length = 0;
    std::size_t features_offset = 0, labels_offset = 0;
  } mapping;
  Shard() = default;
  Shard(Shard&& other) noexcept;
  Shard& operator=(Shard&&) = delete;
  ~Shard();
};

}  // namespace mpiddp
