#pragma once
// All trainable parameters of a model live in one flat buffer, and their
// gradients in a second one with the same layout. Layers keep views into them.
// This makes the optimizer one loop, the initial broadcast one call, and lets
// the DDP reducer's buckets be plain ranges of the gradient buffer.
#include <cstddef>
#include <string>
#include <vector>

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
  void allocate();  // after the last add()

  const std::vector<Parameter>& list() const { return params_; }
  std::size_t total() const { return values_.size(); }
  float* values() { return values_.data(); }
  const float* values() const { return values_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  float* value(std::size_t index) { return values_.data() + params_[index].offset; }
  float* grad(std::size_t index) { return grads_.data() + params_[index].offset; }

  // A text that differs whenever names, shapes or order differ (cross-rank check).
  std::string signature() const;

 private:
  std::vector<Parameter> params_;
  std::vector<float> values_, grads_;
  std::size_t pending_total_ = 0;
};

}  // namespace mpiddp
