#pragma once
// A flat float buffer that lives where the model computes, with a host copy
// for what only the host does (initialisation, MPI broadcasts, checkpoints).
// On the CPU both are the same memory and pull()/push() do nothing.
#include <cstddef>
#include <vector>

namespace mpiddp {

class Device;

class FlatBuffer {
 public:
  FlatBuffer() = default;
  explicit FlatBuffer(Device& device) : device_(&device) {}
  FlatBuffer(const FlatBuffer&) = delete;
  FlatBuffer& operator=(const FlatBuffer&) = delete;
  ~FlatBuffer();

  void bind(Device& device) { device_ = &device; }
  // count zeros on both sides.
  void assign_zeros(std::size_t count);
  std::size_t size() const { return host_.size(); }
  bool empty() const { return host_.empty(); }

  float* data();  // where the device computes
  const float* data() const;
  std::vector<float>& host() { return host_; }
  const std::vector<float>& host() const { return host_; }
  void pull();  // device -> host (waits)
  void push();  // host -> device, after the host copy changed (its size may change too)

 private:
  bool mirrored() const;
  void release_device();

  Device* device_ = nullptr;
  std::vector<float> host_;
  float* device_data_ = nullptr;
  std::size_t device_count_ = 0;
};

}  // namespace mpiddp
