#pragma once
// What both shard writers (rows: shard_writer.cpp, tokens: token_shard_writer.cpp)
// share: file names, dataset creation, and the all-or-nothing directory.
#include <functional>
#include <string>
#include <vector>

#include "io/hdf5_util.hpp"
#include "mpiddp/data/shard_writer.hpp"

namespace mpiddp {

// PREFIX-0000i-of-0000N.h5
std::string shard_name(const std::string& prefix, int index, int count);
h5::Handle create_dataset(hid_t file, const char* name, hid_t type, std::vector<hsize_t> dims, const std::string& path);
// Rows [first, first + count) of a 1-D (or 2-D, `width` wide) dataset.
void write_rows(hid_t dataset, hid_t mem_type, const void* data, hsize_t first, hsize_t count, hsize_t width,
                bool two_d, const std::string& path);

// Runs `convert` (which writes into `out_dir` and lists in `written` every file
// it makes) in a new or empty directory, created if needed; if it throws, every
// listed file and the directory if it was made here are removed: a failed
// conversion leaves nothing new.
using Conversion = std::function<ShardSummary(std::vector<std::string>& written)>;
ShardSummary convert_into_new_directory(const std::string& out_dir, const Conversion& convert);

}  // namespace mpiddp
