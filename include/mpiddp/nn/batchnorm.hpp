#pragma once
// BatchNorm1d / BatchNorm2d, and their SyncBatchNorm form (statistics over the
// global batch of all ranks), with PyTorch's math: training normalises with the
// batch's biased variance and updates the running statistics with `momentum` and
// the unbiased variance; evaluation uses the running statistics.
#include "ops/norm/norm_ops.hpp"
#include "mpiddp/device/index_buffer.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

class BatchNorm final : public Layer, public SampleConsumer {
 public:
  // dims: 1 (samples {C} or {C, L}) or 2 (samples {C, H, W}).
  BatchNorm(int dims, double eps, double momentum, bool sync)
      : dims_(dims), eps_(eps), momentum_(momentum), sync_(sync) {}
  std::string kind() const override;
  bool needs_images() const override { return dims_ == 2; }
  std::size_t min_training_batch() const override { return spatial_ == 1 ? 2 : 1; }
  Shape output_shape(const Shape& in) const override;
  std::string arguments() const override;
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  // weight 1, bias 0, running_mean 0, running_var 1 (PyTorch's reset_parameters).
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  void set_cross_rank(CrossRank* collectives) override { cross_rank_ = collectives; }
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override { return {weight_, bias_}; }
  // A ReLU right after it, where the device's ops fuse it (NormOps::fuses_relu),
  // then a max pooling that tiles its planes (NormOps::fuses_max_pool; BatchNorm2d).
  bool absorb_next(const Layer* next, int taken) override;
  LayoutRole layout_role() const override;
  // BatchNorm2d where the device's ops take samples one at a time (NormOps::streams_samples).
  SampleConsumer* sample_consumer() override;
  void input_sample_written(int i, int n, const float* x_i) override;
  bool input_grad_waiting(const float* into) const override { return waiting_.dx && waiting_.dx->data() == into; }
  void write_input_grad_sample(int i, float* dx_i) override;
  void write_input_grad() override;
  // Whether the last training forward took its moments from samples handed over.
  bool moments_streamed() const { return moments_streamed_; }

 private:
  NormGeometry geometry(std::size_t samples) const;
  // Values of the output for `samples` (pooled where a pooling is fused).
  std::size_t output_values(std::size_t samples) const;
  NormOps& norm() const { return device().ops<NormOps>(); }
  bool across_ranks() const { return sync_ && cross_rank_ && cross_rank_->size() > 1; }
  void on_bind() override;
  void save_running_statistics(ParameterStore& params, std::size_t samples);

  int dims_;
  double eps_, momentum_;
  bool sync_;
  CrossRank* cross_rank_ = nullptr;
  bool evaluated_ = false;  // the last forward normalised with the running statistics
  bool relu_after_ = false;  // it writes max(y, 0) for the ReLU after it (absorb_next)
  int pool_window_ = 0;      // and pools that for the max pooling after the ReLU (0: none)
  std::size_t channels_ = 0, spatial_ = 1;
  std::size_t height_ = 0, width_ = 0;  // BatchNorm2d's planes
  IndexBuffer argmax_;  // the fused pooling's window maxima (pool_window_)
  std::size_t weight_ = 0, bias_ = 0, running_mean_ = 0, running_var_ = 0, batches_tracked_ = 0;
  ParameterStore* params_ = nullptr;
  // Small per-channel arrays on the device: moments [3][C], every rank's moments
  // [ranks][3][C], saved mean/invstd/count [3][C], backward sums [2][C] (local, global).
  Matrix moments_{nullptr}, gathered_{nullptr}, saved_{nullptr}, sums_{nullptr}, global_sums_{nullptr};
  // The moments of the samples handed over by the layer before (input_sample_written),
  // for the forward whose input starts at streamed_from_.
  std::unique_ptr<MomentStream> streamed_;
  const float* streamed_from_ = nullptr;
  bool moments_streamed_ = false;  // the last training forward took them from there
  // A backward that left dx to the layer before: what backward_input reads.
  struct WaitingGradient {
    const float* x = nullptr;
    const float* dy = nullptr;
    const float* sums = nullptr;
    Matrix* dx = nullptr;  // null: nothing waits
    NormGeometry g;
  } waiting_;
};

}  // namespace mpiddp
