// Batch normalisation on the GPU: mpiddp's own kernels (norm_kernels.cu). cuDNN's
// batch norm computes the statistics and normalises in one call, which leaves no
// place for SyncBatchNorm's step between them (every rank's moments combined);
// the kernels follow the CPU's NormOps call for call, with fixed-order sums.
#include "norm_kernels.hpp"
#include "cuda/cuda_device.hpp"
#include "norm_ops.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cuda {
namespace {

class CudaNormOps final : public NormOps {
 public:
  explicit CudaNormOps(CudaDevice& device) : device_(device) {}

  void batch_moments(const float* x, float* moments, const NormGeometry& g) override {
    bn_moments(x, moments, g, stream());
  }
  void combine_moments(const float* all, int ranks, float* moments, int c) override {
    bn_combine_moments(all, ranks, moments, c, stream());
  }
  void normalize_train(const float* x, float* y, const float* weight, const float* bias, const float* moments,
                       float eps, float momentum, float* running_mean, float* running_var, float* saved,
                       const NormGeometry& g) override {
    bn_train_statistics(moments, eps, momentum, running_mean, running_var, saved, g.c, stream());
    bn_apply(x, y, saved, saved + g.c, weight, bias, g, stream());
  }
  void normalize_eval(const float* x, float* y, const float* weight, const float* bias, const float* running_mean,
                      const float* running_var, float eps, const NormGeometry& g) override {
    float* invstd = invstd_.get(static_cast<std::size_t>(g.c));
    bn_eval_invstd(running_var, eps, invstd, g.c, stream());
    bn_apply(x, y, running_mean, invstd, weight, bias, g, stream());
  }
  // fuses_relu() is false: g.relu_after is never set here, and the bias is not read.
  void backward_sums(const float* x, const float* dy, const float*, const float*, const float* saved, float* sums,
                     const NormGeometry& g) override {
    bn_backward_sums(x, dy, saved, sums, g, stream());
  }
  void backward_params(const float* sums, const float* saved, float* dweight, float* dbias, int c,
                       bool accumulate) override {
    bn_backward_params(sums, saved, dweight, dbias, c, accumulate, stream());
  }
  void backward_input(const float* x, const float* dy, const float* weight, const float*, const float* saved,
                      const float* sums, float* dx, const NormGeometry& g) override {
    bn_backward_input(x, dy, saved, weight, sums, dx, g, stream());
  }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  CudaDevice& device_;
  Scratch<float> invstd_;  // evaluation's per-channel 1/std from the running variance
};

std::unique_ptr<NormOps> make_cuda_norm_ops(Device& device) { return std::make_unique<CudaNormOps>(as_cuda(device)); }
const bool registered = register_ops<NormOps>(DeviceKind::cuda, make_cuda_norm_ops);

}  // namespace

}  // namespace mpiddp::cuda
