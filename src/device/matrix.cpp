#include "mpiddp/device/matrix.hpp"

#include <string>
#include <utility>

#include "mpiddp/common/error.hpp"
#include "mpiddp/device/device.hpp"

namespace mpiddp {

Matrix::Matrix(Device* device) : device_(device && !device->is_host() ? device : nullptr) {}

Matrix::Matrix(const Matrix& other) : rows_(other.rows_), cols_(other.cols_), storage_(other.storage_),
                                      device_(other.device_) {
  if (device_) {
    reserve_on_device(size());
    device_->copy_within(device_data_, other.device_data_, size() * sizeof(float));
  }
}

Matrix& Matrix::operator=(const Matrix& other) {
  if (this != &other) {
    Matrix copy(other);
    *this = std::move(copy);
  }
  return *this;
}

Matrix::Matrix(Matrix&& other) noexcept
    : rows_(other.rows_), cols_(other.cols_), storage_(std::move(other.storage_)), device_(other.device_),
      device_data_(std::exchange(other.device_data_, nullptr)),
      device_capacity_(std::exchange(other.device_capacity_, 0)) {}

Matrix& Matrix::operator=(Matrix&& other) noexcept {
  if (this != &other) {
    release_device();
    rows_ = other.rows_;
    cols_ = other.cols_;
    storage_ = std::move(other.storage_);
    device_ = other.device_;
    device_data_ = std::exchange(other.device_data_, nullptr);
    device_capacity_ = std::exchange(other.device_capacity_, 0);
  }
  return *this;
}

Matrix::~Matrix() { release_device(); }

void Matrix::refuse_size(std::size_t rows, std::size_t cols) {
  throw RuntimeError("a matrix of " + std::to_string(rows) + " x " + std::to_string(cols) +
                     " floats has more elements than 64 bits count");
}

void Matrix::reserve_on_device(std::size_t count) {
  if (count <= device_capacity_) return;
  release_device();
  device_data_ = static_cast<float*>(device_->allocate(count * sizeof(float)));
  device_capacity_ = count;
}

void Matrix::release_device() {
  if (device_data_) device_->release(device_data_);
  device_data_ = nullptr;
  device_capacity_ = 0;
}

}  // namespace mpiddp
