// Losses and the NaN/Inf check on the GPU: per-row kernels, then a fixed-order
// reduction into running sums in device memory, read back once per step.
#include "cuda/check.hpp"
#include "cuda/cuda_device.hpp"
#include "loss_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "loss_kernels.hpp"
#include "cuda/teardown.hpp"

namespace mpiddp::cuda {
namespace {

class CudaLossOps final : public LossOps {
 public:
  explicit CudaLossOps(CudaDevice& device) : device_(device) {
    check(cudaMalloc(reinterpret_cast<void**>(&sums_), sizeof(LossScalars)), "cudaMalloc (loss sums)");
    // On the compute stream: the loss kernels (also on it) must see the zeros.
    check(cudaMemsetAsync(sums_, 0, sizeof(LossScalars), stream()), "cudaMemset (loss sums)");
    check(cudaMallocHost(reinterpret_cast<void**>(&host_sums_), sizeof(LossScalars)), "cudaMallocHost");
  }
  ~CudaLossOps() override {
    free_device(sums_);
    free_pinned(host_sums_);
  }

  void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                             float smoothing) override {
    cuda::softmax_cross_entropy(logits, labels, grad, n, c, smoothing, row_loss_.get(n), row_correct_.get(n), sums_,
                                stream());
  }
  void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) override {
    cuda::mean_squared_error(y, targets, grad, n, t, row_loss_.get(n), sums_, stream());
  }
  void check_finite(const float* data, std::size_t n) override {
    // take_loss() clears the flag, so it is 0 here unless set by this check.
    find_nonfinite(data, n, sums_, stream());
  }
  LossResult take_loss() override {
    read_sums("reading the step's loss");
    LossResult r;
    r.loss_sum = host_sums_->loss_sum;
    r.correct = static_cast<std::int64_t>(host_sums_->correct);
    r.count = static_cast<std::int64_t>(host_sums_->count);
    r.finite = host_sums_->nonfinite == 0;
    check(cudaMemsetAsync(sums_, 0, sizeof(LossScalars), stream()), "cudaMemset (loss sums)");
    return r;
  }
  bool all_finite(const float* data, std::size_t n) override {
    check(cudaMemsetAsync(&sums_->nonfinite, 0, sizeof(int), stream()), "cudaMemset (finite flag)");
    find_nonfinite(data, n, sums_, stream());
    read_sums("checking gradients for NaN/Inf");
    const bool finite = host_sums_->nonfinite == 0;
    check(cudaMemsetAsync(&sums_->nonfinite, 0, sizeof(int), stream()), "cudaMemset (finite flag)");
    return finite;
  }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  void read_sums(const char* what) {
    check(cudaMemcpyAsync(host_sums_, sums_, sizeof(LossScalars), cudaMemcpyDeviceToHost, stream()), what);
    device_.wait_for_compute(what);
  }

  CudaDevice& device_;
  LossScalars* sums_ = nullptr;       // device
  LossScalars* host_sums_ = nullptr;  // pinned
  Scratch<double> row_loss_;
  Scratch<int> row_correct_;
};

std::unique_ptr<LossOps> make_cuda_loss_ops(Device& device) { return std::make_unique<CudaLossOps>(as_cuda(device)); }
const bool registered = register_ops<LossOps>(DeviceKind::cuda, make_cuda_loss_ops);

}  // namespace

}  // namespace mpiddp::cuda
