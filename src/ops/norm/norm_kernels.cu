// Batch normalisation on the GPU. Every sum over a channel runs in one block in a
// fixed order (cuda/channel_reduce.cuh), so results repeat bit for bit.
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "mpiddp/device/elementwise.hpp"
#include "cuda/channel_reduce.cuh"
#include "norm_kernels.hpp"

namespace mpiddp::cuda {
namespace {

__global__ void moments_kernel(const float* x, float* moments, Channels g) {
  const int ch = blockIdx.x;
  const std::size_t per = g.per_channel();
  double sum = 0.0, unused = 0.0;
  for (std::size_t k = threadIdx.x; k < per; k += kThreads) sum += x[g.at(ch, k)];
  block_sums(sum, unused);
  const double count = static_cast<double>(per);
  const double mean = count > 0 ? sum / count : 0.0;
  const float centre = static_cast<float>(mean);
  double squares = 0.0;
  for (std::size_t k = threadIdx.x; k < per; k += kThreads) {
    const float d = x[g.at(ch, k)] - centre;
    squares += static_cast<double>(__fmul_rn(d, d));
  }
  block_sums(squares, unused);
  if (threadIdx.x == 0) {
    moments[ch] = static_cast<float>(count);
    moments[g.c + ch] = static_cast<float>(mean);
    moments[2 * g.c + ch] = static_cast<float>(ew::bn_corrected_m2(squares, count, mean, centre));
  }
}

__global__ void combine_moments_kernel(const float* all, int ranks, float* moments, int c) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  double count = 0.0, mean = 0.0, m2 = 0.0;
  for (int r = 0; r < ranks; ++r) {  // in rank order, like the CPU
    const float* m = all + static_cast<std::size_t>(r) * 3 * c;
    ew::bn_combine(count, mean, m2, m[ch], m[c + ch], m[2 * c + ch]);
  }
  moments[ch] = static_cast<float>(count);
  moments[c + ch] = static_cast<float>(mean);
  moments[2 * c + ch] = static_cast<float>(m2);
}

__global__ void train_statistics_kernel(const float* moments, float eps, float momentum, float* running_mean,
                                        float* running_var, float* saved, int c) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double count = moments[ch], mean = moments[c + ch], m2 = moments[2 * c + ch];
  running_mean[ch] = ew::bn_running(running_mean[ch], momentum, mean);
  running_var[ch] = ew::bn_running(running_var[ch], momentum, ew::bn_unbiased_variance(m2, count));
  saved[ch] = static_cast<float>(mean);
  saved[c + ch] = ew::bn_invstd(m2 / count, eps);
  saved[2 * c + ch] = static_cast<float>(count);
}

__global__ void eval_invstd_kernel(const float* running_var, float eps, float* invstd, int c) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch < c) invstd[ch] = ew::bn_invstd(running_var[ch], eps);
}

__global__ void apply_kernel(const float* x, float* y, const float* mean, const float* invstd, const float* weight,
                             const float* bias, Channels g) {
  MPIDDP_GRID_STRIDE(i, static_cast<std::size_t>(g.n) * g.c * g.spatial) {
    const int ch = static_cast<int>(i / g.spatial % g.c);
    // As the CPU: scale and shift per channel, then one multiply-add per element.
    const float scale = __fmul_rn(invstd[ch], weight[ch]), shift = __fsub_rn(bias[ch], __fmul_rn(mean[ch], scale));
    y[i] = __fadd_rn(__fmul_rn(x[i], scale), shift);
  }
}

__global__ void backward_sums_kernel(const float* x, const float* dy, const float* saved, float* sums, Channels g) {
  const int ch = blockIdx.x;
  const float mean = saved[ch];
  double sum_dy = 0.0, sum_dy_xmu = 0.0;
  for (std::size_t k = threadIdx.x; k < g.per_channel(); k += kThreads) {
    const std::size_t at = g.at(ch, k);
    sum_dy += dy[at];
    sum_dy_xmu += static_cast<double>(__fmul_rn(dy[at], x[at] - mean));
  }
  block_sums(sum_dy, sum_dy_xmu);
  if (threadIdx.x == 0) {
    sums[ch] = static_cast<float>(sum_dy);
    sums[g.c + ch] = static_cast<float>(sum_dy_xmu);
  }
}

__global__ void backward_params_kernel(const float* sums, const float* saved, float* dweight, float* dbias, int c,
                                       bool accumulate) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const float dw = sums[c + ch] * saved[c + ch];
  dweight[ch] = accumulate ? dweight[ch] + dw : dw;
  dbias[ch] = accumulate ? dbias[ch] + sums[ch] : sums[ch];
}

__global__ void backward_input_kernel(const float* x, const float* dy, const float* saved, const float* weight,
                                      const float* sums, float* dx, Channels g) {
  MPIDDP_GRID_STRIDE(i, static_cast<std::size_t>(g.n) * g.c * g.spatial) {
    const int ch = static_cast<int>(i / g.spatial % g.c);
    const float mean = saved[ch], invstd = saved[g.c + ch], count = saved[2 * g.c + ch];
    const float mean_dy = sums[ch] / count;
    const float projection = __fmul_rn(__fmul_rn(sums[g.c + ch] / count, invstd), invstd);
    dx[i] = ew::bn_input_grad(x[i], dy[i], mean, mean_dy, projection, __fmul_rn(invstd, weight[ch]));
  }
}

unsigned channel_blocks(int c) { return static_cast<unsigned>((c + kThreads - 1) / kThreads); }

}  // namespace

void bn_moments(const float* x, float* moments, const NormGeometry& g, cudaStream_t s) {
  if (g.c <= 0) return;
  moments_kernel<<<g.c, kThreads, 0, s>>>(x, moments, Channels(g.n, g.c, g.spatial));
  check_launch("bn_moments");
}

void bn_combine_moments(const float* all, int ranks, float* moments, int c, cudaStream_t s) {
  if (c <= 0) return;
  combine_moments_kernel<<<channel_blocks(c), kThreads, 0, s>>>(all, ranks, moments, c);
  check_launch("bn_combine_moments");
}

void bn_train_statistics(const float* moments, float eps, float momentum, float* running_mean, float* running_var,
                         float* saved, int c, cudaStream_t s) {
  if (c <= 0) return;
  train_statistics_kernel<<<channel_blocks(c), kThreads, 0, s>>>(moments, eps, momentum, running_mean, running_var,
                                                                  saved, c);
  check_launch("bn_train_statistics");
}

void bn_eval_invstd(const float* running_var, float eps, float* invstd, int c, cudaStream_t s) {
  if (c <= 0) return;
  eval_invstd_kernel<<<channel_blocks(c), kThreads, 0, s>>>(running_var, eps, invstd, c);
  check_launch("bn_eval_invstd");
}

void bn_apply(const float* x, float* y, const float* mean, const float* invstd, const float* weight,
              const float* bias, const NormGeometry& g, cudaStream_t s) {
  apply_kernel<<<blocks_for(static_cast<std::size_t>(g.n) * g.c * g.spatial), kThreads, 0, s>>>(
      x, y, mean, invstd, weight, bias, Channels(g.n, g.c, g.spatial));
  check_launch("bn_apply");
}

void bn_backward_sums(const float* x, const float* dy, const float* saved, float* sums, const NormGeometry& g,
                      cudaStream_t s) {
  if (g.c <= 0) return;
  backward_sums_kernel<<<g.c, kThreads, 0, s>>>(x, dy, saved, sums, Channels(g.n, g.c, g.spatial));
  check_launch("bn_backward_sums");
}

void bn_backward_params(const float* sums, const float* saved, float* dweight, float* dbias, int c, bool accumulate,
                        cudaStream_t s) {
  if (c <= 0) return;
  backward_params_kernel<<<channel_blocks(c), kThreads, 0, s>>>(sums, saved, dweight, dbias, c, accumulate);
  check_launch("bn_backward_params");
}

void bn_backward_input(const float* x, const float* dy, const float* saved, const float* weight, const float* sums,
                       float* dx, const NormGeometry& g, cudaStream_t s) {
  backward_input_kernel<<<blocks_for(static_cast<std::size_t>(g.n) * g.c * g.spatial), kThreads, 0, s>>>(
      x, dy, saved, weight, sums, dx, Channels(g.n, g.c, g.spatial));
  check_launch("bn_backward_input");
}

}  // namespace mpiddp::cuda
