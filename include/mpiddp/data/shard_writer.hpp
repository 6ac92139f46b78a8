#pragma once
// `mpiddp shard`: streams a source (Fashion-MNIST/MNIST IDX .gz files, or CSV
// rows "features..., label") into N HDF5 shard files. Only one block of rows is
// in memory at a time; the row count is known before writing (IDX header, or a
// first counting pass over the CSV), so every dataset is contiguous, which makes
// the trainer's scattered row reads cheap.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mpiddp {

// Rows of a source, delivered in blocks.
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual std::int64_t rows() const = 0;
  virtual std::size_t feature_dim() const = 0;
  virtual std::size_t target_dim() const = 0;   // 1 for class ids
  virtual bool class_labels() const = 0;        // int32 class ids, else float32 targets
  virtual bool uint8_features() const = 0;      // stored as uint8 with a scale
  virtual std::vector<std::int64_t> sample_shape() const = 0;
  // Fills up to `max_rows` rows; returns how many (0 at the end).
  virtual std::size_t read(std::size_t max_rows, std::vector<unsigned char>& u8, std::vector<float>& f32,
                           std::vector<std::int32_t>& ids, std::vector<float>& targets) = 0;
};

std::unique_ptr<RowSource> open_idx_source(const std::string& images, const std::string& labels);
// CSV: numbers separated by commas, the last `targets` columns are the label(s);
// a first line that is not numeric is taken as a header and skipped. Plain or gzip.
std::unique_ptr<RowSource> open_csv_source(const std::string& path, bool classification, std::size_t targets);

struct ShardSummary {
  std::vector<std::string> files;
  std::int64_t rows = 0;
  int classes = 0;
};

// Refuses an output directory that exists and is not empty (or is no directory):
// a second conversion's shards beside the first's would be read as one data set.
void check_shard_output_dir(const std::string& out_dir);

// Writes `out_dir`/shard-00000-of-0000N.h5 ... into a new or empty directory
// (created if needed). On failure it removes every file it made and the
// directory if it created it: a failed conversion leaves nothing new.
// `progress`, if set, is called after every block of rows with the rows written so far.
using ShardProgress = std::function<void(std::int64_t rows_done, std::int64_t total)>;
ShardSummary write_shards(RowSource& source, const std::string& out_dir, int shards, const std::string& prefix,
                          const ShardProgress& progress = {});

}  // namespace mpiddp
