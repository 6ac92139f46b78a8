// Built with CUDA but without cuDNN (MPIDDP_ENABLE_CUDNN=OFF, or none found at
// configure time): the CUDA device still provides ConvOps, one that says why in
// one line when a model with a conv2d layer is placed on the device. Models
// without convolutions never call it.
#include "conv_ops.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cuda {
namespace {

class UnavailableConvOps final : public ConvOps {
 public:
  explicit UnavailableConvOps(std::string reason) : reason_(std::move(reason)) {}
  std::unique_ptr<LayerScratch> make_scratch() override { fail(); }
  void conv_forward(const float*, const float*, const float*, float*, const ConvGeometry&, LayerScratch*) override {
    fail();
  }
  void conv_backward_params(const float*, const float*, float*, float*, const ConvGeometry&, bool,
                            LayerScratch*) override {
    fail();
  }
  void conv_backward_input(const float*, const float*, float*, const ConvGeometry&, LayerScratch*) override { fail(); }

 private:
  [[noreturn]] void fail() const { throw InputError("conv2d on the GPU (train.device = cuda): " + reason_); }
  std::string reason_;
};

std::unique_ptr<ConvOps> make_unavailable_conv_ops(Device&) {
  return std::make_unique<UnavailableConvOps>(cudnn_info().problem);
}
const bool registered = register_ops<ConvOps>(DeviceKind::cuda, make_unavailable_conv_ops);

}  // namespace
}  // namespace mpiddp::cuda
