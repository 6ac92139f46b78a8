// Pooling on the GPU: mpiddp's own kernels (pool_kernels.cu), not cuDNN's. The
// layer keeps an argmax buffer for max pooling, which cuDNN's pooling would not
// use (its backward recomputes the maxima from x and y); the kernels fill it
// with the CPU's first-maximum rule and scatter nothing, so results equal the
// CPU's bit for bit and need no cuDNN.
#include "pool_kernels.hpp"
#include "cuda/cuda_device.hpp"
#include "pool_ops.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cuda {
namespace {

class CudaPoolOps final : public PoolOps {
 public:
  explicit CudaPoolOps(CudaDevice& device) : device_(device) {}
  void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g) override {
    cuda::max_pool_forward(x, y, argmax, g, stream());
  }
  void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g) override {
    cuda::max_pool_backward(dy, argmax, dx, g, stream());
  }
  void avg_pool_forward(const float* x, float* y, const PoolGeometry& g) override {
    cuda::avg_pool_forward(x, y, g, stream());
  }
  void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g) override {
    cuda::avg_pool_backward(dy, dx, g, stream());
  }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  CudaDevice& device_;
};

std::unique_ptr<PoolOps> make_cuda_pool_ops(Device& device) { return std::make_unique<CudaPoolOps>(as_cuda(device)); }
const bool registered = register_ops<PoolOps>(DeviceKind::cuda, make_cuda_pool_ops);

}  // namespace

}  // namespace mpiddp::cuda
