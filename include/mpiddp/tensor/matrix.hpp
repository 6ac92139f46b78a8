#pragma once
// A row-major float matrix on the host: batches of activations are [rows = samples,
// cols = features]. Storage only grows, so reusing a Matrix across steps does not
// reallocate when the last batch of an epoch is smaller.
#include <cstddef>
#include <vector>

namespace mpiddp {

class Matrix {
 public:
  Matrix() = default;
  Matrix(std::size_t rows, std::size_t cols) { resize(rows, cols); }

  void resize(std::size_t rows, std::size_t cols) {
    rows_ = rows;
    cols_ = cols;
    if (storage_.size() < rows * cols) storage_.resize(rows * cols);
  }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t size() const { return rows_ * cols_; }
  float* data() { return storage_.data(); }
  const float* data() const { return storage_.data(); }
  float* row(std::size_t r) { return storage_.data() + r * cols_; }
  const float* row(std::size_t r) const { return storage_.data() + r * cols_; }
  float& at(std::size_t r, std::size_t c) { return storage_[r * cols_ + c]; }
  float at(std::size_t r, std::size_t c) const { return storage_[r * cols_ + c]; }

 private:
  std::size_t rows_ = 0, cols_ = 0;
  std::vector<float> storage_;
};

}  // namespace mpiddp
