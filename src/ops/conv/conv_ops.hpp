#pragma once
// 2-D convolution (PyTorch's Conv2d, groups = 1, dilation = 1), NCHW: x[n, c, h, w],
// weight[out_c, c, kh, kw], bias[out_c], y[n, out_c, oh, ow]. On the CPU: im2col
// and BLAS; on the GPU: cuDNN.
#include <cstddef>
#include <functional>
#include <memory>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

// The CPU splits a batch's im2col columns into chunks of samples above this many
// floats (64 MiB); the memory budget counts one chunk.
constexpr std::size_t kCpuColumnBudget = std::size_t{1} << 24;

struct ConvGeometry {
  int n = 0;                // samples
  int c = 0, h = 0, w = 0;  // input channels, height, width
  int out_c = 0, kh = 0, kw = 0, stride = 1, padding = 0;
  // x and dx (blocked_in), y and dy (blocked_out) in oneDNN's nChw16c instead of
  // NCHW (nn/layouts.hpp): only where takes_blocked() said so.
  bool blocked_in = false, blocked_out = false;
  int out_h() const { return (h + 2 * padding - kh) / stride + 1; }
  int out_w() const { return (w + 2 * padding - kw) / stride + 1; }
};

class ConvOps : public OpFamily {
 public:
  // The layer's scratch (im2col buffers, cuDNN descriptors and workspace).
  virtual std::unique_ptr<LayerScratch> make_scratch() = 0;
  // Whether this geometry's passes can read and write the blocked layout, under
  // the kernel choice in effect (cpu::LibraryScope): oneDNN's convolutions only.
  virtual bool takes_blocked(const ConvGeometry& /*g*/) const { return false; }
  virtual void conv_forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
                            LayerScratch* scratch) = 0;
  // dweight (+)= and dbias (+)= (overwritten unless accumulate).
  virtual void conv_backward_params(const float* x, const float* dy, float* dweight, float* dbias,
                                    const ConvGeometry& g, bool accumulate, LayerScratch* scratch) = 0;
  virtual void conv_backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                                   LayerScratch* scratch) = 0;

  // Sample by sample, for a BatchNorm after the convolution that takes its input
  // and gives its input gradient one sample at a time (NormOps::streams_samples),
  // where these ops run the convolution that way for g (CPU, mpiddp's own
  // kernels, NCHW); false where they do not (nothing was run: use the calls above).
  // Forward, as conv_forward, calling after_sample(i, y of sample i) once sample
  // i is written, in order.
  using SampleWritten = std::function<void(int, const float*)>;
  virtual bool conv_forward_by_sample(const float* /*x*/, const float* /*weight*/, const float* /*bias*/,
                                      float* /*y*/, const ConvGeometry& /*g*/, LayerScratch* /*scratch*/,
                                      const SampleWritten& /*after_sample*/) {
    return false;
  }
  // The weight and bias gradients, as conv_backward_params, with sample i's dy
  // from dy_of(i) (asked for in order, read before the next call).
  using SampleGradient = std::function<const float*(int)>;
  virtual bool conv_backward_params_by_sample(const float* /*x*/, const SampleGradient& /*dy_of*/,
                                              float* /*dweight*/, float* /*dbias*/, const ConvGeometry& /*g*/,
                                              bool /*accumulate*/, LayerScratch* /*scratch*/) {
    return false;
  }
};

}  // namespace mpiddp
