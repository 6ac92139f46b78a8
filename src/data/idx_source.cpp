// IDX files (the MNIST / Fashion-MNIST format): a big-endian header of magic and
// dimensions, then raw uint8 values. Read through zlib, so .gz and plain work.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/memory.hpp"
#include "mpiddp/data/shard_writer.hpp"

namespace mpiddp {
namespace {

class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw InputError(path + ": cannot open");
  }
  ~GzFile() { gzclose(file_); }
  void read_exact(void* data, std::size_t bytes) {
    const int got = gzread(file_, data, static_cast<unsigned>(bytes));
    if (got < 0 || static_cast<std::size_t>(got) != bytes) throw InputError(path_ + ": file is truncated or not gzip/IDX");
  }
  std::uint32_t read_be32() {
    std::array<unsigned char, 4> b{};
    read_exact(b.data(), 4);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }
  const std::string& path() const { return path_; }

  // The most bytes this file can deliver: its size if plain, and deflate's best
  // compression ratio (1032:1) times its size if gzip.
  double max_payload() const {
    struct stat info {};
    if (::stat(path_.c_str(), &info) != 0) throw InputError(path_ + ": cannot stat (" + std::strerror(errno) + ")");
    const double size = static_cast<double>(info.st_size);
    return gzdirect(file_) ? size : size * 1032.0;
  }

 private:
  std::string path_;
  gzFile file_;
};

class IdxSource final : public RowSource {
 public:
  IdxSource(const std::string& images, const std::string& labels) : images_(images), labels_(labels) {
    const std::uint32_t image_magic = images_.read_be32();
    if ((image_magic & 0xffffff00u) != 0x00000800u || (image_magic & 0xff) < 2)
      throw InputError(images + ": not an IDX uint8 image file (magic " + std::to_string(image_magic) + ")");
    const int dims = static_cast<int>(image_magic & 0xff);
    rows_ = images_.read_be32();
    double dim = 1;  // a double first: a hostile header's product may not fit in 64 bits
    std::string shape_text;
    for (int d = 1; d < dims; ++d) {
      const std::uint32_t extent = images_.read_be32();
      shape_.push_back(extent);
      dim *= extent;
      shape_text += (shape_text.empty() ? "" : " x ") + std::to_string(extent);
    }
    if (labels_.read_be32() != 0x00000801u) throw InputError(labels + ": not an IDX uint8 label file");
    const std::int64_t label_rows = labels_.read_be32();
    if (label_rows != rows_)
      throw InputError(labels + ": " + std::to_string(label_rows) + " labels for " + std::to_string(rows_) + " images in " + images);
    check_declared_size(images_, static_cast<double>(rows_) * dim,
                        std::to_string(rows_) + " images of " + shape_text);
    check_declared_size(labels_, static_cast<double>(rows_), std::to_string(rows_) + " labels");
    // The converter reads blocks of rows: one block must fit in memory too.
    const double block = std::min<double>(static_cast<double>(rows_), 4096.0) * dim;
    if (const double memory = static_cast<double>(physical_memory_bytes()); memory > 0 && block > memory)
      throw InputError(images + ": images of " + shape_text + " are too large to convert (" + bytes_text(block) +
                       " per block of rows, this machine has " + bytes_text(memory) + ")");
    dim_ = static_cast<std::size_t>(dim);
  }
  std::int64_t rows() const override { return rows_; }
  std::size_t feature_dim() const override { return dim_; }
  std::size_t target_dim() const override { return 1; }
  bool class_labels() const override { return true; }
  // Refuses a header that declares more data than its file can hold, before any
  // buffer is sized from it.
  static void check_declared_size(const GzFile& file, double payload, const std::string& what) {
    const double most = file.max_payload();
    if (payload > most)
      throw InputError(file.path() + ": declares " + what + " (" + bytes_text(payload) +
                       "), more than the file can hold (at most " + bytes_text(most) + ")");
  }
  bool uint8_features() const override { return true; }
  std::vector<std::int64_t> sample_shape() const override { return shape_; }

  std::size_t read(std::size_t max_rows, std::vector<unsigned char>& u8, std::vector<float>&,
                   std::vector<std::int32_t>& ids, std::vector<float>&) override {
    const std::size_t n = static_cast<std::size_t>(std::min<std::int64_t>(max_rows, rows_ - done_));
    u8.resize(n * dim_);
    ids.resize(n);
    if (n == 0) return 0;
    images_.read_exact(u8.data(), n * dim_);
    std::vector<unsigned char> raw(n);
    labels_.read_exact(raw.data(), n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = raw[i];
    done_ += static_cast<std::int64_t>(n);
    return n;
  }

 private:
  GzFile images_, labels_;
  std::int64_t rows_ = 0, done_ = 0;
  std::size_t dim_ = 0;
  std::vector<std::int64_t> shape_;
};

}  // namespace

std::unique_ptr<RowSource> open_idx_source(const std::string& images, const std::string& labels) {
  return std::make_unique<IdxSource>(images, labels);
}

}  // namespace mpiddp
