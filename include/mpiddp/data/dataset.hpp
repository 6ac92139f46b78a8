#pragma once
// A data set stored as HDF5 shards (see docs/data.md): every shard
// has a 2-D `features` dataset (rows = samples; uint8 with a `scale` attribute,
// or float32) and a `labels` dataset (int32 class ids, or float32 targets).
// Shards are ordered by file name; global sample i is row i - first(shard) of
// the shard whose range contains it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/device/batch.hpp"

namespace mpiddp {

enum class LabelKind { class_id, target };

struct Shard;         // one open shard file (private to the data module)
class TokenWindows;   // the windows of token shards (private to the data module)

class ShardedDataset {
 public:
  // `spec`: a directory (all *.h5 in it), a glob, or one .h5 file.
  ShardedDataset(const std::string& spec, const std::string& features_name, const std::string& labels_name,
                 LabelKind kind);
  // Token shards (data.context > 0): samples are windows of context + 1 tokens
  // (token_windows.hpp); sample_shape() is {context}, declared_classes() the
  // vocabulary size, and each sample has `context` targets.
  ShardedDataset(const std::string& spec, int context);
  bool holds_tokens() const { return windows_ != nullptr; }
  ShardedDataset(ShardedDataset&&) noexcept;
  ~ShardedDataset();

  std::int64_t size() const { return size_; }
  std::size_t feature_dim() const { return feature_dim_; }
  std::size_t target_dim() const { return target_dim_; }
  // A sample's shape as the shards' `sample_shape` attribute on the features
  // stores it ([H, W], [C, H, W], ...), or {feature_dim()} when they have none.
  // Its product is feature_dim() (checked when the shards are opened).
  std::vector<std::size_t> sample_shape() const { return sample_shape_; }
  // The shards' num_classes attribute, 0 when absent.
  int declared_classes() const { return declared_classes_; }
  // Labels outside [0, classes) are reported as errors when read.
  void set_classes(int classes) { classes_ = classes; }
  std::string describe() const;

  // Reads the samples `indices` (global, any order, repeats allowed) into `out`.
  void read(const std::vector<std::int64_t>& indices, Batch& out);

 private:
  void open_shard(Shard& shard, bool first);
  void map_shard(Shard& shard);
  void read_mapped(const std::vector<std::int64_t>& indices, Batch& out);
  void check_not_truncated(const Shard& shard) const;
  void check_sample_shapes(const std::string& spec);
  [[noreturn]] void refuse_nonfinite(const float* values, const Shard& shard, std::size_t row, const char* what) const;
  std::unique_ptr<TokenWindows> windows_;
  bool all_mapped_ = true;
  std::vector<Shard> shards_;
  std::string features_name_, labels_name_;
  LabelKind kind_;
  std::int64_t size_ = 0;
  std::size_t feature_dim_ = 0, target_dim_ = 1;
  std::vector<std::size_t> sample_shape_;
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
