// Element-wise layer math on the GPU: pointwise_kernels.cu's launchers over
// elementwise.hpp's functions, on the compute stream.
#include "cuda/cuda_device.hpp"
#include "pointwise_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "cuda/vector_kernels.hpp"
#include "pointwise_kernels.hpp"

namespace mpiddp::cuda {
namespace {

class CudaPointwiseOps final : public PointwiseOps {
 public:
  explicit CudaPointwiseOps(CudaDevice& device) : device_(device) {}
  void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) override {
    cuda::activation_forward(kind, x, y, n, stream());
  }
  void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                           std::size_t n) override {
    cuda::activation_backward(kind, x, y, dy, dx, n, stream());
  }
  void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                       float keep_scale) override {
    cuda::dropout_forward(x, y, mask, n, key, p, keep_scale, stream());
  }
  void add(const float* a, const float* b, float* out, std::size_t n) override { cuda::add(a, b, out, n, stream()); }
  // Two kernels, the ReLU in place (element by element, so it may).
  void add_relu(const float* a, const float* b, float* out, std::size_t n) override {
    cuda::add(a, b, out, n, stream());
    cuda::activation_forward(ActivationKind::relu, out, out, n, stream());
  }
  void multiply(const float* a, const float* b, float* out, std::size_t n) override {
    cuda::multiply(a, b, out, n, stream());
  }
  void scale(float* data, std::size_t n, float factor) override { cuda::scale(data, n, factor, stream()); }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  CudaDevice& device_;
};

std::unique_ptr<PointwiseOps> make_cuda_pointwise_ops(Device& device) {
  return std::make_unique<CudaPointwiseOps>(as_cuda(device));
}
const bool registered = register_ops<PointwiseOps>(DeviceKind::cuda, make_cuda_pointwise_ops);

}  // namespace

}  // namespace mpiddp::cuda
