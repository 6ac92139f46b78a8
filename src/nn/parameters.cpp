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

void ParameterStore::allocate(Device* device) {
  device_ = device ? device : &cpu_device();
  values_.bind(*device_);
  grads_.bind(*device_);
  values_.assign_zeros(pending_total_);
  grads_.assign_zeros(pending_total_);
}

std::string ParameterStore::signature() const {
  std::string text;
  for (const auto& p : params_) {
    text += p.name + "[";
    for (auto d : p.shape) text += std::to_string(d) + ",";
    text += "];";
  }
  return text;
}

}  // namespace mpiddp
