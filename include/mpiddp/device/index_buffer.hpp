#pragma once
// A growable array of int32 indices in a device's memory (max pooling's window
// maxima): grown, never shrunk, and released by the device that allocated it.
#include <cstddef>
#include <cstdint>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

class IndexBuffer {
 public:
  IndexBuffer() = default;
  ~IndexBuffer() { release(); }
  IndexBuffer(const IndexBuffer&) = delete;
  IndexBuffer& operator=(const IndexBuffer&) = delete;

  // Later allocations come from `device` (what was held is released).
  void bind(Device& device) {
    release();
    device_ = &device;
  }
  // At least `count` indices; earlier contents are not kept when it grows.
  std::int32_t* reserve(std::size_t count) {
    if (count > capacity_) {
      release();
      data_ = static_cast<std::int32_t*>(device_->allocate(count * sizeof(std::int32_t)));
      capacity_ = count;
    }
    return data_;
  }
  std::int32_t* data() const { return data_; }

 private:
  void release() {
    if (data_) device_->release(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  Device* device_ = nullptr;
  std::int32_t* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace mpiddp
