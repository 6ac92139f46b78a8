#include "token_windows.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "io/stored_extent.hpp"
#include "mpiddp/common/error.hpp"

namespace mpiddp {

TokenWindows::TokenWindows(const std::vector<std::string>& paths, int context) : context_(context) {
  h5::silence_errors();
  for (const std::string& path : paths) {
    Shard shard;
    shard.path = path;
    open(shard);
    shard.first_window = windows_;
    windows_ += (shard.count - 1) / context_;
    tokens_ += shard.count;
    shards_.push_back(std::move(shard));
  }
  window_.resize(static_cast<std::size_t>(context_) + 1);
}

void TokenWindows::open(Shard& shard) {
  const std::string& path = shard.path;
  if (::access(path.c_str(), R_OK) != 0) throw InputError(path + ": cannot read shard (" + std::strerror(errno) + ")");
  shard.file = h5::open_read_only(path, path);
  if (!shard.file) throw InputError(path + ": not a readable HDF5 file");
  h5::refuse_outside_storage(shard.file.get(), path);
  if (H5Lexists(shard.file.get(), "tokens", H5P_DEFAULT) <= 0)
    throw InputError(path + ": no dataset 'tokens' (data.context is set: token shards from mpiddp shard --format "
                            "bytes|llmc are expected)");
  shard.tokens = h5::Handle(H5Dopen2(shard.file.get(), "tokens", H5P_DEFAULT), H5Dclose);
  const std::string where = path + ": dataset 'tokens'";
  if (!shard.tokens) throw InputError(where + " cannot be opened");
  h5::Handle type(H5Dget_type(shard.tokens.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) != H5T_SGN_NONE || H5Tget_size(type.get()) > 4)
    throw InputError(where + " must hold unsigned integers of at most 32 bits");
  h5::Handle space(H5Dget_space(shard.tokens.get()), H5Sclose);
  hsize_t dims[1] = {0};
  if (H5Sget_simple_extent_ndims(space.get()) != 1) throw InputError(where + " must be 1-D");
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  h5::check_stored_extent(shard.tokens.get(), {dims[0]}, where);
  shard.count = static_cast<std::int64_t>(dims[0]);
  if (shard.count < context_ + 1)
    throw InputError(where + " holds " + std::to_string(shard.count) + " tokens, fewer than one window of data.context + 1 = " +
                     std::to_string(context_ + 1));
  const std::int64_t vocab = h5::read_int_attribute(shard.tokens.get(), "vocab_size", where);
  if (vocab < 2 || vocab > (1 << 30))
    throw InputError(where + ": vocab_size " + std::to_string(vocab) + " is not in [2, 2^30]");
  if (vocab_ != 0 && vocab != vocab_)
    throw InputError(where + ": vocab_size " + std::to_string(vocab) + ", but " + shards_.front().path + " has " +
                     std::to_string(vocab_));
  vocab_ = vocab;
  shard.bytes = h5::file_bytes(shard.file.get());
}

void TokenWindows::read(const std::vector<std::int64_t>& indices, Batch& out, std::int64_t limit) {
  const std::size_t n = indices.size(), t = static_cast<std::size_t>(context_);
  out.features.resize(n, t);
  out.class_ids.resize(n * t);
  h5::silence_errors();  // per thread: this may run on the loader thread
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  std::vector<bool> touched(shards_.size(), false);
  for (std::size_t p = 0; p < n; ++p) {
    const std::int64_t index = indices[p];
    const auto shard = std::upper_bound(shards_.begin(), shards_.end(), index,
                                        [](std::int64_t i, const Shard& s) { return i < s.first_window; }) - 1;
    touched[static_cast<std::size_t>(shard - shards_.begin())] = true;
    const hsize_t start[1] = {static_cast<hsize_t>((index - shard->first_window) * context_)};
    const hsize_t count[1] = {t + 1};
    h5::Handle file_space(H5Dget_space(shard->tokens.get()), H5Sclose);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    h5::Handle memory(H5Screate_simple(1, count, nullptr), H5Sclose);
    h5::check<InputError>(H5Dread(shard->tokens.get(), H5T_NATIVE_UINT32, memory.get(), file_space.get(), H5P_DEFAULT,
                                  window_.data()),
                          shard->path + ": cannot read tokens " + std::to_string(start[0]) + " to " +
                              std::to_string(start[0] + t));
    for (std::size_t j = 0; j <= t; ++j)
      if (window_[j] >= limit)
        throw InputError(shard->path + ": token " + std::to_string(start[0] + j) + " is " + std::to_string(window_[j]) +
                         ", not below the vocabulary size " + std::to_string(limit));
    float* row = out.features.data() + p * t;
    for (std::size_t j = 0; j < t; ++j) {
      const auto id = static_cast<std::int32_t>(window_[j]);
      std::memcpy(row + j, &id, sizeof(id));
      out.class_ids[p * t + j] = static_cast<std::int32_t>(window_[j + 1]);
    }
  }
  // After the reads: a cut before or during them shows here, one after them in the next batch.
  for (std::size_t s = 0; s < shards_.size(); ++s)
    if (touched[s]) h5::refuse_shrunk(shards_[s].file.get(), shards_[s].bytes, shards_[s].path);
}

}  // namespace mpiddp
