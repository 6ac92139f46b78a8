#include "mpiddp/device/flat_buffer.hpp"

#include "mpiddp/device/device.hpp"

namespace mpiddp {

FlatBuffer::~FlatBuffer() { release_device(); }

bool FlatBuffer::mirrored() const { return device_ && !device_->is_host(); }

void FlatBuffer::release_device() {
  if (device_data_) device_->release(device_data_);
  device_data_ = nullptr;
  device_count_ = 0;
}

void FlatBuffer::assign_zeros(std::size_t count) {
  host_.assign(count, 0.0f);
  push();
}

float* FlatBuffer::data() { return mirrored() ? device_data_ : host_.data(); }
const float* FlatBuffer::data() const { return mirrored() ? device_data_ : host_.data(); }

void FlatBuffer::pull() {
  if (mirrored() && !host_.empty()) device_->copy_to_host(host_.data(), device_data_, host_.size() * sizeof(float));
}

void FlatBuffer::push() {
  if (!mirrored()) return;
  if (device_count_ != host_.size()) {
    release_device();
    if (!host_.empty()) device_data_ = static_cast<float*>(device_->allocate(host_.size() * sizeof(float)));
    device_count_ = host_.size();
  }
  if (!host_.empty()) device_->copy_to_device(device_data_, host_.data(), host_.size() * sizeof(float));
}

}  // namespace mpiddp
