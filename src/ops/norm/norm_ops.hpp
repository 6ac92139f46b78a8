#pragma once
// Batch normalisation over the channels of x[n, c, spatial] (BatchNorm1d: spatial
// = 1 or L; BatchNorm2d: spatial = h * w). The statistics come in steps so that
// SyncBatchNorm can combine every rank's before normalising:
//   batch_moments -> (gathered from all ranks) combine_moments -> normalize_train
// Moments are per channel: count, mean and M2 (sum of squared deviations), the
// form that combines across ranks without cancellation.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

// A max pooling fused after the ReLU (fuses_max_pool): windows of `window` x
// `window` at that stride over planes of h x w (h * w = spatial). The normalise
// steps write the pooled output, n x c planes of (h / window) x (w / window), and
// the position of each window's maximum in its plane to `argmax` (as the pooling
// layer would, PyTorch's scan order); the backward steps take dy of the pooled
// output and that argmax.
struct FusedMaxPool {
  int window = 0;  // 0: none
  int h = 0, w = 0;
  std::int32_t* argmax = nullptr;
  int out_h() const { return h / window; }
  int out_w() const { return w / window; }
};

struct NormGeometry {
  int n = 0, c = 0, spatial = 1;
  // A ReLU fused after it (fuses_relu): the normalise steps write max(y, 0) (NaN
  // kept, as ew::relu), and the backward steps take dy as the ReLU's output
  // gradient, zeroing it where y <= 0, as ew::relu_grad does. They recompute y
  // from x with the forward's own float operations (the same bits), which costs
  // less than reading the stored output twice more.
  bool relu_after = false;
  FusedMaxPool pool_after;
  // BatchNorm2d in oneDNN's blocked layout (takes_blocked; c a multiple of 16):
  // x, y and their gradients (blocked), or with a fused pooling its pooled output
  // and that gradient (pooled_blocked; x and dx stay NCHW).
  bool blocked = false, pooled_blocked = false;
};

// batch_moments in parts, for samples handed over one at a time (NormOps::start_moments).
class MomentStream {
 public:
  virtual ~MomentStream() = default;
  // The next `samples` samples, in order, from x (the first of them).
  virtual void add(const float* x, int samples) = 0;
  virtual int samples() const = 0;
  // moments[3][c], as batch_moments gives them over the samples added.
  virtual void finish(float* moments) = 0;
};

class NormOps : public OpFamily {
 public:
  // Whether these ops take NormGeometry::relu_after.
  virtual bool fuses_relu() const { return false; }
  // Whether these ops take NormGeometry::pool_after (after a fused ReLU).
  virtual bool fuses_max_pool() const { return false; }
  // Whether these ops take NormGeometry::blocked and pooled_blocked.
  virtual bool takes_blocked() const { return false; }
  // moments[3][c]: count, mean, M2 of this batch.
  virtual void batch_moments(const float* x, float* moments, const NormGeometry& g) = 0;
  // all[ranks][3][c] -> moments[3][c], combined in rank order (Chan et al.).
  virtual void combine_moments(const float* all, int ranks, float* moments, int c) = 0;
  // From combined moments: y = (x - mean) * invstd * weight + bias; saves mean,
  // invstd and count (saved[3][c]) for backward; running = (1 - momentum) * running +
  // momentum * batch statistic (unbiased variance).
  virtual void normalize_train(const float* x, float* y, const float* weight, const float* bias,
                               const float* moments, float eps, float momentum, float* running_mean,
                               float* running_var, float* saved, const NormGeometry& g) = 0;
  virtual void normalize_eval(const float* x, float* y, const float* weight, const float* bias,
                              const float* running_mean, const float* running_var, float eps,
                              const NormGeometry& g) = 0;
  // sums[2][c]: sum of dy and of dy * (x - mean) over this rank's batch. `weight`
  // and `bias` matter only with relu_after (for y).
  virtual void backward_sums(const float* x, const float* dy, const float* weight, const float* bias,
                             const float* saved, float* sums, const NormGeometry& g) = 0;
  // dweight (+)= sum(dy * xhat), dbias (+)= sum(dy) from this rank's sums.
  virtual void backward_params(const float* sums, const float* saved, float* dweight, float* dbias, int c,
                               bool accumulate) = 0;
  // dx from the sums over the batch the statistics came from (all ranks' with
  // SyncBatchNorm), count = saved count: dx = weight * invstd * (dy - sum_dy / count
  // - (x - mean) * invstd^2 * sum_dy_xmu / count).
  virtual void backward_input(const float* x, const float* dy, const float* weight, const float* bias,
                              const float* saved, const float* sums, float* dx, const NormGeometry& g) = 0;

  // Sample by sample, where the layer before writes its output and reads its
  // output gradient one sample at a time (a convolution on mpiddp's own kernels):
  // the moments taken as each sample is written, and each sample's dx written
  // just before it is read, while both are in cache. The same loops as the
  // whole-batch calls, so the same bits. Only where streams_samples().
  virtual bool streams_samples() const { return false; }
  // A stream for batch_moments over g (NCHW), to which samples are added in order.
  virtual std::unique_ptr<MomentStream> start_moments(const NormGeometry& /*g*/) { return nullptr; }
  // backward_input for samples [begin, end) of the batch (x, dy, argmax: the
  // whole batch's), into dx, where sample `begin` goes.
  virtual void backward_input_samples(const float* /*x*/, const float* /*dy*/, const float* /*weight*/,
                                      const float* /*bias*/, const float* /*saved*/, const float* /*sums*/,
                                      float* /*dx*/, const NormGeometry& /*g*/, int /*begin*/, int /*end*/) {
    throw std::logic_error("NormOps::backward_input_samples: these ops do not stream samples");
  }
};

}  // namespace mpiddp
