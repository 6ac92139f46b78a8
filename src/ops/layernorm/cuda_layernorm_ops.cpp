// Layer normalisation on the GPU: layernorm_kernels.cu's launchers on the
// device's compute stream.
#include "cuda/cuda_device.hpp"
#include "layernorm_kernels.hpp"
#include "layernorm_ops.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cuda {
namespace {

class CudaLayerNormOps final : public LayerNormOps {
 public:
  explicit CudaLayerNormOps(CudaDevice& device) : device_(device) {}
  void forward(const float* x, float* y, const float* weight, const float* bias, float eps, float* saved,
               const LayerNormGeometry& g) override {
    layernorm_forward(x, y, weight, bias, eps, saved, g, stream());
  }
  void backward(const float* x, const float* dy, const float* weight, const float* saved, float* dx, float* dweight,
                float* dbias, bool accumulate, const LayerNormGeometry& g) override {
    layernorm_backward_params(x, dy, saved, dweight, dbias, accumulate, g, partials_, stream());
    if (dx) layernorm_backward_input(x, dy, weight, saved, dx, g, stream());
  }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  CudaDevice& device_;
  Scratch<double> partials_;  // the parameter gradients' per-chunk sums
};

std::unique_ptr<LayerNormOps> make_cuda_layernorm_ops(Device& device) {
  return std::make_unique<CudaLayerNormOps>(as_cuda(device));
}
const bool registered = register_ops<LayerNormOps>(DeviceKind::cuda, make_cuda_layernorm_ops);

}  // namespace
}  // namespace mpiddp::cuda
