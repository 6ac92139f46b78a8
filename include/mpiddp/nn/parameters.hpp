#pragma once
// All trainable parameters of a model live in one flat buffer, and their
// gradients in a second one with the same layout. Layers keep views into them.
// This makes the optimizer one loop, the initial broadcast one call, and lets
// the DDP reducer's buckets be plain ranges of the gradient buffer. The buffers
// live on the model's device; the host copies serve initialisation, broadcasts
// and checkpoints (see FlatBuffer).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/device/flat_buffer.hpp"

namespace mpiddp {

struct Parameter {
  std::string name;               // e.g. "layers.0.weight" (PyTorch's naming)
  std::vector<std::size_t> shape;
  std::size_t offset = 0;         // into the flat buffers
  std::size_t count = 0;
};

class ParameterStore {
 public:
  // Registration order is fixed by the model description and is the order of
  // the flat buffers; the reducer buckets it in reverse.
  std::size_t add(const std::string& name, std::vector<std::size_t> shape);
  // After the last add(): zeroed buffers on `device` (the CPU when null).
  void allocate(Device* device = nullptr);
  // Floats of parameters and of buffers added so far (before allocate() too).
  std::size_t declared_total() const { return pending_total_; }
  std::size_t declared_buffer_total() const { return pending_buffers_; }
  Device& device() const { return *device_; }

  const std::vector<Parameter>& list() const { return params_; }
  std::size_t total() const { return values_.size(); }
  // Where the device computes (host memory on the CPU).
  float* values() { return values_.data(); }
  const float* values() const { return values_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  float* value(std::size_t index) { return values_.data() + params_[index].offset; }
  float* grad(std::size_t index) { return grads_.data() + params_[index].offset; }
  // Host copies: pull_*() refreshes them from the device, push_values() sends
  // host edits to the device. No-ops on the CPU, where they are the same memory.
  float* host_values() { return values_.host().data(); }
  const float* host_values() const { return values_.host().data(); }
  const float* host_grads() const { return grads_.host().data(); }
  void pull_values() { values_.pull(); }
  void pull_grads() { grads_.pull(); }
  void push_values() { values_.push(); }

  // Buffers: model state that is not trained (BatchNorm's running statistics).
  // Float buffers live in a third flat buffer on the device; int64 counters
  // (num_batches_tracked, a scalar) on the host. Both are checkpointed under
  // /buffers with PyTorch's names, and DDP broadcasts rank 0's float buffers.
  std::size_t add_buffer(const std::string& name, std::vector<std::size_t> shape);
  std::size_t add_counter(const std::string& name);
  const std::vector<Parameter>& buffer_list() const { return buffer_list_; }
  std::size_t buffer_total() const { return buffers_.size(); }
  float* buffer(std::size_t index) { return buffers_.data() + buffer_list_[index].offset; }
  float* buffers() { return buffers_.data(); }
  float* host_buffers() { return buffers_.host().data(); }
  const float* host_buffers() const { return buffers_.host().data(); }
  void pull_buffers() { buffers_.pull(); }
  void push_buffers() { buffers_.push(); }
  const std::vector<std::string>& counter_names() const { return counter_names_; }
  std::int64_t& counter(std::size_t index) { return counters_[index]; }
  std::int64_t counter(std::size_t index) const { return counters_[index]; }

  // A text that differs whenever names, shapes or order differ (cross-rank check).
  std::string signature() const;

 private:
  std::vector<Parameter> params_;
  Device* device_ = nullptr;
  FlatBuffer values_, grads_, buffers_;
  std::size_t pending_total_ = 0, pending_buffers_ = 0;
  std::vector<Parameter> buffer_list_;
  std::vector<std::string> counter_names_;
  std::vector<std::int64_t> counters_;
};

}  // namespace mpiddp
