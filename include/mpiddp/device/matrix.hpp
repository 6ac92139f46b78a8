#pragma once
// A row-major float matrix in host memory, or in a device's own memory when created
// for a non-host Device (a GPU, the emulated one): batches of activations are
// [rows = samples, cols = features]. Storage only grows, so reusing a Matrix
// across steps does not reallocate when the last batch of an epoch is smaller.
#include <cstddef>
#include <memory>
#include <vector>

namespace mpiddp {

// Leaves new floats uninitialised: every Matrix is written before it is read, and
// zero-filling a fresh batch (200 KB per Fashion-MNIST batch) cost 3% of a step.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

class Device;

// Storage is host memory unless the Matrix was created for a non-host Device; then
// data() is device memory, and row()/at() (host accessors) must not be used.
class Matrix {
 public:
  Matrix() = default;
  Matrix(std::size_t rows, std::size_t cols) { resize(rows, cols); }
  // An empty matrix whose storage will live on `device` (host memory for the CPU).
  explicit Matrix(Device* device);
  Matrix(const Matrix& other);
  Matrix& operator=(const Matrix& other);
  Matrix(Matrix&& other) noexcept;
  Matrix& operator=(Matrix&& other) noexcept;
  ~Matrix();

  // Growing device storage does not keep the old contents (nothing needs them).
  // A count past 64 bits is refused: wrapped around, it would allocate too little.
  void resize(std::size_t rows, std::size_t cols) {
    std::size_t count = 0;
    if (__builtin_mul_overflow(rows, cols, &count)) refuse_size(rows, cols);
    rows_ = rows;
    cols_ = cols;
    if (device_) reserve_on_device(count);
    else if (storage_.size() < count) storage_.resize(count);
  }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t size() const { return rows_ * cols_; }
  float* data() { return device_ ? device_data_ : storage_.data(); }
  const float* data() const { return device_ ? device_data_ : storage_.data(); }
  float* row(std::size_t r) { return storage_.data() + r * cols_; }
  const float* row(std::size_t r) const { return storage_.data() + r * cols_; }
  float& at(std::size_t r, std::size_t c) { return storage_[r * cols_ + c]; }
  float at(std::size_t r, std::size_t c) const { return storage_[r * cols_ + c]; }

 private:
  [[noreturn]] static void refuse_size(std::size_t rows, std::size_t cols);
  void reserve_on_device(std::size_t count);
  void release_device();

  std::size_t rows_ = 0, cols_ = 0;
  std::vector<float, DefaultInitAllocator<float>> storage_;
  Device* device_ = nullptr;  // set only for non-host devices
  float* device_data_ = nullptr;
  std::size_t device_capacity_ = 0;
};

}  // namespace mpiddp
