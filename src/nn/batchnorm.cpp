#include "mpiddp/nn/batchnorm.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

namespace mpiddp {

std::string BatchNorm::kind() const {
  if (sync_) return "SyncBatchNorm";
  return dims_ == 2 ? "BatchNorm2d" : "BatchNorm1d";
}

Shape BatchNorm::output_shape(const Shape& in) const {
  const bool fits = dims_ == 2 ? in.size() == 3 : (in.size() == 1 || in.size() == 2);
  if (!fits)
    throw LayerError(std::string(dims_ == 2 ? "batchnorm2d needs images (channels x height x width)"
                                            : "batchnorm1d needs features (or channels x length)") +
                     ", but gets " + shape_text(in) + (dims_ == 2 ? "" : " (use batchnorm2d on images)"));
  // NormGeometry holds both as ints.
  indexable(in[0], "its channels");
  indexable(in[0] ? element_count(in) / in[0] : 0, "its values per channel and sample");
  return in;
}

std::string BatchNorm::arguments() const {
  char text[96];
  std::snprintf(text, sizeof(text), "%zu, eps=%g, momentum=%g", channels_, eps_, momentum_);
  return text;
}

void BatchNorm::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  channels_ = in[0];
  spatial_ = element_count(in) / channels_;
  if (dims_ == 2) {
    height_ = in[1];
    width_ = in[2];
  }
  weight_ = params.add(prefix + ".weight", {channels_});
  bias_ = params.add(prefix + ".bias", {channels_});
  running_mean_ = params.add_buffer(prefix + ".running_mean", {channels_});
  running_var_ = params.add_buffer(prefix + ".running_var", {channels_});
  batches_tracked_ = params.add_counter(prefix + ".num_batches_tracked");
}

void BatchNorm::initialize(ParameterStore& params, std::uint64_t) {
  float* weight = params.host_values() + params.list()[weight_].offset;
  float* running_var = params.host_buffers() + params.buffer_list()[running_var_].offset;
  for (std::size_t c = 0; c < channels_; ++c) weight[c] = running_var[c] = 1.0f;
  params_ = &params;
}

void BatchNorm::on_bind() {
  for (Matrix* m : {&moments_, &gathered_, &saved_, &sums_, &global_sums_}) *m = Matrix(&device());
  argmax_.bind(device());
}

bool BatchNorm::absorb_next(const Layer* next, int taken) {
  if (taken == 0) {
    relu_after_ = next && next->is_relu() && norm().fuses_relu();
    pool_window_ = 0;
    return relu_after_;
  }
  if (taken == 1 && dims_ == 2 && next && next->tiling_max_pool_window() > 0 && norm().fuses_max_pool()) {
    pool_window_ = next->tiling_max_pool_window();
    return true;
  }
  return false;
}

// BatchNorm2d on ops that take the blocked layout: in its input's layout, or with
// a fused max pooling from NCHW into either (the pooled planes are written one by one).
LayoutRole BatchNorm::layout_role() const {
  if (dims_ != 2 || !norm().takes_blocked()) return LayoutRole::nchw_only;
  return pool_window_ > 0 ? LayoutRole::free_output : LayoutRole::preserving;
}

NormGeometry BatchNorm::geometry(std::size_t samples) const {
  NormGeometry g;
  g.n = static_cast<int>(samples);
  g.c = static_cast<int>(channels_);
  g.spatial = static_cast<int>(spatial_);
  g.relu_after = relu_after_;
  g.blocked = pool_window_ == 0 && blocked_in();
  g.pooled_blocked = pool_window_ > 0 && blocked_out();
  if (pool_window_ > 0) {
    g.pool_after.window = pool_window_;
    g.pool_after.h = static_cast<int>(height_);
    g.pool_after.w = static_cast<int>(width_);
    g.pool_after.argmax = argmax_.data();
  }
  return g;
}

std::size_t BatchNorm::output_values(std::size_t samples) const {
  if (pool_window_ == 0) return samples * channels_ * spatial_;
  const std::size_t k = static_cast<std::size_t>(pool_window_);
  return samples * channels_ * (height_ / k) * (width_ / k);
}

void BatchNorm::forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) {
  // Samples handed over count for this forward only, even if it throws.
  const std::unique_ptr<MomentStream> stream = std::move(streamed_);
  moments_streamed_ = false;
  waiting_ = {};
  argmax_.reserve(pool_window_ > 0 ? output_values(x.rows()) : 0);
  const NormGeometry g = geometry(x.rows());
  y.resize(x.rows(), output_values(1));
  ParameterStore& p = *params_;
  evaluated_ = !ctx.training;
  if (!ctx.training) {
    norm().normalize_eval(x.data(), y.data(), p.value(weight_), p.value(bias_), p.buffer(running_mean_),
                          p.buffer(running_var_), static_cast<float>(eps_), g);
    return;
  }
  // PyTorch refuses this too: one value per channel has no variance. (With
  // SyncBatchNorm the other ranks' samples would count, but a rank must not
  // depend on that to be valid.)
  if (x.rows() * spatial_ < 2)
    throw LayerError(
        "a training batch with 1 value per channel has no variance (choose a train.batch_size that "
        "leaves no batch of 1 sample)");
  moments_.resize(3, channels_);
  // Moments taken as the layer before wrote this very input, sample by sample.
  moments_streamed_ = stream && streamed_from_ == x.data() && stream->samples() == static_cast<int>(x.rows());
  if (moments_streamed_) stream->finish(moments_.data());
  else norm().batch_moments(x.data(), moments_.data(), g);
  if (across_ranks()) {
    gathered_.resize(static_cast<std::size_t>(cross_rank_->size()) * 3, channels_);
    cross_rank_->allgather_now(moments_.data(), gathered_.data(), moments_.size());
    norm().combine_moments(gathered_.data(), cross_rank_->size(), moments_.data(), g.c);
  }
  saved_.resize(3, channels_);
  norm().normalize_train(x.data(), y.data(), p.value(weight_), p.value(bias_), moments_.data(),
                         static_cast<float>(eps_), static_cast<float>(momentum_), p.buffer(running_mean_),
                         p.buffer(running_var_), saved_.data(), g);
  ++p.counter(batches_tracked_);
}

// After an evaluation forward the output is an affine function of x (the
// running statistics are constants), and PyTorch's backward is: dx = dy * weight *
// invstd, dweight = sum(dy * (x - running_mean) * invstd), dbias = sum(dy). The
// training ops give exactly that from saved statistics taken from the running
// ones and input sums of zero. Training never needs it, so the host round trip
// costs nothing there.
void BatchNorm::save_running_statistics(ParameterStore& p, std::size_t samples) {
  std::vector<float> mean(channels_), var(channels_), saved(3 * channels_);
  device().copy_to_host(mean.data(), p.buffer(running_mean_), channels_ * sizeof(float));
  device().copy_to_host(var.data(), p.buffer(running_var_), channels_ * sizeof(float));
  for (std::size_t c = 0; c < channels_; ++c) {
    saved[c] = mean[c];
    // As normalize_eval computes it.
    saved[channels_ + c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[c]) + static_cast<float>(eps_)));
    saved[2 * channels_ + c] = static_cast<float>(samples * spatial_);
  }
  saved_.resize(3, channels_);
  device().copy_to_device(saved_.data(), saved.data(), saved.size() * sizeof(float));
}

void BatchNorm::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                         bool accumulate) {
  const NormGeometry g = geometry(x.rows());
  waiting_ = {};
  if (evaluated_) save_running_statistics(params, x.rows());
  sums_.resize(2, channels_);
  norm().backward_sums(x.data(), dy.data(), params.value(weight_), params.value(bias_), saved_.data(), sums_.data(),
                       g);
  // Weight and bias gradients come from this rank's batch (DDP averages them);
  // the input gradient needs the sums over the batch the statistics came from.
  norm().backward_params(sums_.data(), saved_.data(), params.grad(weight_), params.grad(bias_), g.c, accumulate);
  if (!dx) return;
  const Matrix* sums = &sums_;
  if (evaluated_) {
    const std::vector<float> zeros(2 * channels_, 0.0f);
    global_sums_.resize(2, channels_);
    device().copy_to_device(global_sums_.data(), zeros.data(), zeros.size() * sizeof(float));
    sums = &global_sums_;
  } else if (across_ranks()) {
    global_sums_.resize(2, channels_);
    device().copy_within(global_sums_.data(), sums_.data(), sums_.size() * sizeof(float));
    cross_rank_->allreduce_sum_now(global_sums_.data(), global_sums_.size());
    sums = &global_sums_;
  }
  dx->resize(x.rows(), x.cols());
  if (moments_streamed_ && !evaluated_) {  // the layer before asks for dx into *dx, by sample or all at once
    waiting_ = {x.data(), dy.data(), sums->data(), dx, g};
    return;
  }
  norm().backward_input(x.data(), dy.data(), params.value(weight_), params.value(bias_), saved_.data(), sums->data(),
                        dx->data(), g);
}

// ---- Sample by sample, with the convolution before it ----------------------------

SampleConsumer* BatchNorm::sample_consumer() { return dims_ == 2 && norm().streams_samples() ? this : nullptr; }

void BatchNorm::input_sample_written(int i, int n, const float* x_i) {
  if (i == 0) {
    NormGeometry g = geometry(static_cast<std::size_t>(n));
    streamed_ = g.blocked ? nullptr : norm().start_moments(g);
    streamed_from_ = x_i;
  }
  if (streamed_ && streamed_->samples() == i) streamed_->add(x_i, 1);
}

void BatchNorm::write_input_grad_sample(int i, float* dx_i) {
  const WaitingGradient& w = waiting_;
  norm().backward_input_samples(w.x, w.dy, params_->value(weight_), params_->value(bias_), saved_.data(), w.sums,
                                dx_i, w.g, i, i + 1);
  if (i + 1 == w.g.n) waiting_ = {};
}

void BatchNorm::write_input_grad() {
  const WaitingGradient& w = waiting_;
  norm().backward_input(w.x, w.dy, params_->value(weight_), params_->value(bias_), saved_.data(), w.sums,
                        w.dx->data(), w.g);
  waiting_ = {};
}

}  // namespace mpiddp
