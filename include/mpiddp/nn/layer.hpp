#pragma once
// A layer with explicit forward and backward. Layers own no parameter memory:
// they register parameters in a ParameterStore and keep their indices. All
// arithmetic goes through the bound Device, so a layer runs on CPU or GPU alike.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/device/device.hpp"
#include "mpiddp/nn/parameters.hpp"
#include "mpiddp/device/matrix.hpp"

namespace mpiddp {

// What a forward pass may depend on besides its input.
struct ForwardContext {
  bool training = true;
  std::uint64_t seed = 0;       // train.seed
  std::uint64_t stream = 0;     // the rank: dropout masks differ per rank, like per-process RNGs
  std::uint64_t counter = 0;    // micro-batch counter: masks differ per micro-batch, resumable
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;
  // The device every forward and backward runs on (set by Sequential).
  void bind(Device& device) {
    device_ = &device;
    on_bind();
  }
  // Width of the output for an input of width `in`.
  virtual std::size_t out_features(std::size_t in) const { return in; }
  // Registers parameters under `prefix` (e.g. "layers.0").
  virtual void declare(ParameterStore&, const std::string& /*prefix*/, std::size_t /*in*/) {}
  // Writes initial values (after ParameterStore::allocate).
  virtual void initialize(ParameterStore&, std::uint64_t /*seed*/) {}
  virtual void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) = 0;
  // Given dL/dy, accumulates parameter gradients (overwrites them unless
  // accumulate) and writes dL/dx when dx is not null.
  virtual void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                        bool accumulate) = 0;
  // Parameter indices this layer owns (ready for reduction after its backward).
  virtual std::vector<std::size_t> parameter_indices() const { return {}; }

 protected:
  Device& device() const { return *device_; }
  virtual void on_bind() {}  // e.g. move scratch buffers to the device

 private:
  Device* device_ = &cpu_device();
};

}  // namespace mpiddp
