#include "mpiddp/nn/parameters.hpp"

#include <stdexcept>

#include "mpiddp/device/device.hpp"
#include "mpiddp/nn/shape.hpp"

namespace mpiddp {

namespace {
// Appends an array to `list`, laid out after `end` (which grows by its size).
// Sizes come from the input file: a count that overflows is refused (LayerError).
std::size_t append(std::vector<Parameter>& list, std::size_t& end, const std::string& name,
                   std::vector<std::size_t> shape) {
  Parameter p;
  p.name = name;
  p.shape = std::move(shape);
  p.count = element_count(p.shape);
  p.offset = end;
  end = checked_sum(end, p.count, "the model's floats before and in " + name);
  list.push_back(std::move(p));
  return list.size() - 1;
}
}  // namespace

std::size_t ParameterStore::add(const std::string& name, std::vector<std::size_t> shape) {
  if (device_) throw std::logic_error("ParameterStore::add after allocate");
  return append(params_, pending_total_, name, std::move(shape));
}

std::size_t ParameterStore::add_buffer(const std::string& name, std::vector<std::size_t> shape) {
  if (device_) throw std::logic_error("ParameterStore::add_buffer after allocate");
  return append(buffer_list_, pending_buffers_, name, std::move(shape));
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
