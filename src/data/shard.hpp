#pragma once
// One open shard of a ShardedDataset (private to the data module: it holds
// HDF5 handles, and hdf5.h stays out of the public headers).
#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_util.hpp"

namespace mpiddp {

struct Shard {
  std::string path;
  std::int64_t first = 0;  // global index of row 0
  std::int64_t rows = 0;
  std::int64_t bytes = -1;  // the file's size when opened (h5::file_bytes; -1: unknown)
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

// Shards written by `mpiddp shard` say which part of which conversion they are
// (shard_index, shard_count, first_row, total_rows; sample_shape on features).
// Those of one data set must agree: one conversion, each index once, each shard
// the rows its index stands for, and for a directory every shard present, so that
// old shards left beside new ones are never read as one set. Files without these
// attributes (other tools) are taken as they are. Throws InputError naming `spec`.
void check_shard_set(const std::string& spec, const std::vector<Shard>& shards);

}  // namespace mpiddp
