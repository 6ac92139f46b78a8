// The convolution's bias on the GPU (cuDNN does the products): the sum per
// channel for its gradient and the broadcast add.
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "cuda/channel_reduce.cuh"
#include "conv_kernels.hpp"

namespace mpiddp::cuda {
namespace {

__global__ void channel_sums_kernel(const float* x, float* out, Channels g, bool accumulate) {
  const int ch = blockIdx.x;
  double sum = 0.0, unused = 0.0;
  for (std::size_t k = threadIdx.x; k < g.per_channel(); k += kThreads) sum += x[g.at(ch, k)];
  block_sums(sum, unused);
  if (threadIdx.x == 0) out[ch] = (accumulate ? out[ch] : 0.0f) + static_cast<float>(sum);
}

__global__ void add_channel_bias_kernel(float* y, const float* bias, Channels g) {
  MPIDDP_GRID_STRIDE(i, static_cast<std::size_t>(g.n) * g.c * g.spatial) y[i] += bias[i / g.spatial % g.c];
}

// The convolution's output y[n, out_c, out_h * out_w] as channels.
Channels outputs(const ConvGeometry& g) { return Channels(g.n, g.out_c, g.out_h() * g.out_w()); }

}  // namespace

void channel_sums(const float* x, float* out, const ConvGeometry& g, bool accumulate, cudaStream_t s) {
  const Channels y = outputs(g);
  if (y.c <= 0) return;
  channel_sums_kernel<<<y.c, kThreads, 0, s>>>(x, out, y, accumulate);
  check_launch("channel_sums");
}

void add_channel_bias(float* y, const float* bias, const ConvGeometry& g, cudaStream_t s) {
  const Channels out = outputs(g);
  add_channel_bias_kernel<<<blocks_for(static_cast<std::size_t>(out.n) * out.c * out.spatial), kThreads, 0, s>>>(
      y, bias, out);
  check_launch("add_channel_bias");
}

}  // namespace mpiddp::cuda
