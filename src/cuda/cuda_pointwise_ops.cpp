// Element-wise layer math and optimizer updates on the GPU: kernels.cu's
// launchers over elementwise.hpp's functions, on the compute stream.
#include "cuda_ops.hpp"
#include "kernels.hpp"

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
  void multiply(const float* a, const float* b, float* out, std::size_t n) override {
    cuda::multiply(a, b, out, n, stream());
  }
  void scale(float* data, std::size_t n, float factor) override { cuda::scale(data, n, factor, stream()); }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  CudaDevice& device_;
};

class CudaUpdateOps final : public UpdateOps {
 public:
  explicit CudaUpdateOps(CudaDevice& device) : device_(device) {}
  void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                  const ew::SgdCoefficients& k) override {
    cuda::sgd_update(params, grads, buffer, n, k, device_.compute_stream());
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const ew::AdamWCoefficients& k) override {
    cuda::adamw_update(params, grads, m, v, n, k, device_.compute_stream());
  }

 private:
  CudaDevice& device_;
};

}  // namespace

std::unique_ptr<PointwiseOps> make_pointwise_ops(CudaDevice& device) {
  return std::make_unique<CudaPointwiseOps>(device);
}
std::unique_ptr<UpdateOps> make_update_ops(CudaDevice& device) { return std::make_unique<CudaUpdateOps>(device); }

}  // namespace mpiddp::cuda
