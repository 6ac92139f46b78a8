#pragma once
// A data set stored as HDF5 shards (see README "Data set layout"): every shard
// has a 2-D `features` dataset (rows = samples; uint8 with a `scale` attribute,
// or float32) and a `labels` dataset (int32 class ids, or float32 targets).
// Shards are ordered by file name; global sample i is row i - first(shard) of
// the shard whose range contains it.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/data/hdf5_util.hpp"
#include "mpiddp/tensor/matrix.hpp"

namespace mpiddp {

enum class LabelKind { class_id, target };

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

// One batch in the order the sampler asked for.
struct Batch {
  Matrix features;
  std::vector<std::int32_t> class_ids;  // classification
  Matrix targets;                       // regression
  std::size_t size() const { return features.rows(); }
};

class ShardedDataset {
 public:
  // `spec`: a directory (all *.h5 in it), a glob, or one .h5 file.
  ShardedDataset(const std::string& spec, const std::string& features_name, const std::string& labels_name,
                 LabelKind kind);
  ShardedDataset(ShardedDataset&&) = default;

  std::int64_t size() const { return size_; }
  std::size_t feature_dim() const { return feature_dim_; }
  std::size_t target_dim() const { return target_dim_; }
  // The shards' num_classes attribute, 0 when absent.
  int declared_classes() const { return declared_classes_; }
  // Labels outside [0, classes) are reported as errors when read.
  void set_classes(int classes) { classes_ = classes; }
  const std::vector<Shard>& shards() const { return shards_; }
  std::string describe() const;

  // Reads the samples `indices` (global, any order, repeats allowed) into `out`.
  void read(const std::vector<std::int64_t>& indices, Batch& out);

 private:
  void open_shard(Shard& shard, bool first);
  void map_shard(Shard& shard);
  void read_mapped(const std::vector<std::int64_t>& indices, Batch& out);
  void check_not_truncated(const Shard& shard) const;
  bool all_mapped_ = true;
  std::vector<Shard> shards_;
  std::string features_name_, labels_name_;
  LabelKind kind_;
  std::int64_t size_ = 0;
  std::size_t feature_dim_ = 0, target_dim_ = 1;
  bool stored_uint8_ = false;
  double scale_ = 1.0;
  int declared_classes_ = 0;
  int classes_ = 0;
  std::vector<unsigned char> raw_;  // read buffer, reused
  std::vector<float> raw_targets_;
  std::vector<std::int32_t> raw_ids_;
};

// Resolves `spec` to the ordered list of shard files (InputError if none).
std::vector<std::string> list_shards(const std::string& spec);

}  // namespace mpiddp
