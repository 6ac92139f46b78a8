// Optimizer updates on the GPU: update_kernels.cu's launchers over
// elementwise.hpp's update rules, on the compute stream.
#include "cuda/cuda_device.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "update_kernels.hpp"
#include "update_ops.hpp"

namespace mpiddp::cuda {
namespace {

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

std::unique_ptr<UpdateOps> make_cuda_update_ops(Device& device) { return std::make_unique<CudaUpdateOps>(as_cuda(device)); }
const bool registered = register_ops<UpdateOps>(DeviceKind::cuda, make_cuda_update_ops);

}  // namespace
}  // namespace mpiddp::cuda
