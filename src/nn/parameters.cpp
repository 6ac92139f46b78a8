#include "mpiddp/nn/parameters.hpp"

#include <stdexcept>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

std::size_t ParameterStore::add(const std::string& name, std::vector<std::size_t> shape) {
  if (device_) throw std::logic_error("ParameterStore::add after allocate");
  Parameter p;
  p.name = name;
  p.shape = std::move(shape);
  p.count = 1;
  for (auto d : p.shape) p.count *= d;
  p.offset = pending_total_;
  pending_total_ += p.count;
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

std::size_t ParameterStore::add_buffer(const std::string& name, std::vector<std::size_t> shape) {
  if (device_) throw std::logic_error("ParameterStore::add_buffer after allocate");
  Parameter b;
  b.name = name;
  b.shape = std::move(shape);
  b.count = 1;
  for (auto d : b.shape) b.count *= d;
  b.offset = pending_buffers_;
  pending_buffers_ += b.count;
  buffer_list_.push_back(std::move(b));
  return buffer_list_.size() - 1;
}

std::size_t ParameterStore::add_counter(const std::string& name) {
  counter_names_.push_back(name);
  counters_.push_back(0);
  return counters_.size() - 1;
}

void ParameterStore::allocate(Device* device) {
  device_ = device ? device : &cpu_device();
  values_.bind(*device_);
  grads_.bind(*device_);
  values_.assign_zeros(pending_total_);
  grads_.assign_zeros(pending_total_);
  buffers_.bind(*device_);
  buffers_.assign_zeros(pending_buffers_);
}

std::string ParameterStore::signature() const {
  std::string text;
  for (const auto& p : params_) {
    text += p.name + "[";
    for (auto d : p.shape) text += std::to_string(d) + ",";
    text += "];";
  }
  for (const auto& b : buffer_list_) {
    text += "buffer " + b.name + "[";
    for (auto d : b.shape) text += std::to_string(d) + ",";
    text += "];";
  }
  for (const auto& name : counter_names_) text += "counter " + name + ";";
  return text;
}

}  // namespace mpiddp
