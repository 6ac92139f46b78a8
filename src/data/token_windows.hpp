#pragma once
// The samples of token shards (token_shards.hpp): window i of a shard of n tokens
// holds tokens [i T, i T + T] (T = data.context), so a shard has (n - 1) / T
// windows and they do not overlap; shards follow each other in name order. The
// inputs are the first T tokens, the targets the last T. Token ids stay
// integers: a batch's features matrix carries each input id's 32-bit integer
// bytes (the embedding reads them back as integers), its class_ids the targets.
#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_util.hpp"
#include "mpiddp/device/batch.hpp"

namespace mpiddp {

class TokenWindows {
 public:
  // Throws InputError naming the shard for a file without a 1-D unsigned
  // `tokens` dataset and `vocab_size`, vocabularies that differ, or a shard too
  // short for one window.
  TokenWindows(const std::vector<std::string>& paths, int context);
  std::int64_t size() const { return windows_; }
  std::int64_t vocab_size() const { return vocab_; }
  std::int64_t tokens() const { return tokens_; }
  std::size_t shards() const { return shards_.size(); }
  // Reads windows `indices` into `out`; an id at or above `limit` is refused
  // naming the shard and position (limit: the model's vocabulary), and so is a
  // batch read from a shard that another process cut short since it was opened.
  void read(const std::vector<std::int64_t>& indices, Batch& out, std::int64_t limit);

 private:
  struct Shard {
    std::string path;
    h5::Handle file, tokens;
    std::int64_t count = 0;         // tokens
    std::int64_t first_window = 0;  // global index of its window 0
    std::int64_t bytes = -1;        // the file's size when opened (h5::file_bytes)
  };
  void open(Shard& shard);

  int context_;
  std::vector<Shard> shards_;
  std::int64_t windows_ = 0, vocab_ = 0, tokens_ = 0;
  std::vector<std::uint32_t> window_;  // one window's tokens, reused
};

}  // namespace mpiddp
