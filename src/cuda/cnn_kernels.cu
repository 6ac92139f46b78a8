// The CNN layers' kernels. Pooling gathers: each input element sums its own
// gradient from the windows that contain it, in window order, so backward needs
// no atomics and adds in the CPU's order (results equal the CPU's bit for bit).
// Per-channel sums take one block per channel: each thread sums a fixed stride
// of the channel's elements in double, then a fixed tree joins the threads.
#include "check.hpp"
#include "cnn_kernels.hpp"
#include "launch.cuh"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cuda {
namespace {

// ---- pooling: one thread per output (forward) or per input element (backward) ----

struct PoolShape {
  int h, w, oh, ow, kernel, stride;
  std::size_t planes;
  explicit PoolShape(const PoolGeometry& g)
      : h(g.h), w(g.w), oh(g.out_h()), ow(g.out_w()), kernel(g.kernel), stride(g.stride),
        planes(static_cast<std::size_t>(g.n) * g.c) {}
  // The windows (rows or columns of outputs) that contain input row/column `at`: [first, last].
  __device__ int first_window(int at) const { return at < kernel ? 0 : (at - kernel) / stride + 1; }
  __device__ int last_window(int at, int outs) const { return min(at / stride, outs - 1); }
};

__global__ void max_pool_forward_kernel(const float* x, float* y, std::int32_t* argmax, PoolShape p) {
  MPIDDP_GRID_STRIDE(o, p.planes * p.oh * p.ow) {
    const std::size_t plane = o / (static_cast<std::size_t>(p.oh) * p.ow);
    const int within = static_cast<int>(o % (static_cast<std::size_t>(p.oh) * p.ow));
    const int oy = within / p.ow, ox = within % p.ow;
    const float* in = x + plane * p.h * p.w;
    int best = oy * p.stride * p.w + ox * p.stride;
    float value = in[best];
    for (int ky = 0; ky < p.kernel; ++ky)
      for (int kx = 0; kx < p.kernel; ++kx) {
        const int at = (oy * p.stride + ky) * p.w + ox * p.stride + kx;
        // The first maximum wins, the last NaN over all (PyTorch's rule), as on the CPU.
        const float v = in[at];
        if (ew::max_pool_takes(v, value)) {
          value = v;
          best = at;
        }
      }
    y[o] = value;
    argmax[o] = best;
  }
}

__global__ void max_pool_backward_kernel(const float* dy, const std::int32_t* argmax, float* dx, PoolShape p) {
  MPIDDP_GRID_STRIDE(i, p.planes * p.h * p.w) {
    const std::size_t plane = i / (static_cast<std::size_t>(p.h) * p.w);
    const int at = static_cast<int>(i % (static_cast<std::size_t>(p.h) * p.w));
    const int iy = at / p.w, ix = at % p.w;
    const std::size_t outs = plane * p.oh * p.ow;
    float sum = 0.0f;
    for (int oy = p.first_window(iy); oy <= p.last_window(iy, p.oh); ++oy)
      for (int ox = p.first_window(ix); ox <= p.last_window(ix, p.ow); ++ox) {
        const std::size_t o = outs + static_cast<std::size_t>(oy) * p.ow + ox;
        if (argmax[o] == at) sum += dy[o];
      }
    dx[i] = sum;
  }
}

__global__ void avg_pool_forward_kernel(const float* x, float* y, PoolShape p, float inv) {
  MPIDDP_GRID_STRIDE(o, p.planes * p.oh * p.ow) {
    const std::size_t plane = o / (static_cast<std::size_t>(p.oh) * p.ow);
    const int within = static_cast<int>(o % (static_cast<std::size_t>(p.oh) * p.ow));
    const int oy = within / p.ow, ox = within % p.ow;
    const float* in = x + plane * p.h * p.w;
    float sum = 0.0f;
    for (int ky = 0; ky < p.kernel; ++ky)
      for (int kx = 0; kx < p.kernel; ++kx) sum += in[(oy * p.stride + ky) * p.w + ox * p.stride + kx];
    y[o] = sum * inv;
  }
}

__global__ void avg_pool_backward_kernel(const float* dy, float* dx, PoolShape p, float inv) {
  MPIDDP_GRID_STRIDE(i, p.planes * p.h * p.w) {
    const std::size_t plane = i / (static_cast<std::size_t>(p.h) * p.w);
    const int at = static_cast<int>(i % (static_cast<std::size_t>(p.h) * p.w));
    const int iy = at / p.w, ix = at % p.w;
    const float* grad = dy + plane * p.oh * p.ow;
    float sum = 0.0f;
    for (int oy = p.first_window(iy); oy <= p.last_window(iy, p.oh); ++oy)
      for (int ox = p.first_window(ix); ox <= p.last_window(ix, p.ow); ++ox)
        sum += __fmul_rn(grad[oy * p.ow + ox], inv);  // _rn: the share rounded first, like the CPU (no FMA)
    dx[i] = sum;
  }
}

// ---- per-channel sums over x[n, c, spatial] ----

struct Channels {
  int n, c, spatial;
  explicit Channels(const NormGeometry& g) : n(g.n), c(g.c), spatial(g.spatial) {}
  __device__ std::size_t per_channel() const { return static_cast<std::size_t>(n) * spatial; }
  // The k-th element of channel ch (samples in order, positions in order within each).
  __device__ std::size_t at(int ch, std::size_t k) const {
    return (k / spatial * c + ch) * static_cast<std::size_t>(spatial) + k % spatial;
  }
};

// Sums a and b over the block (kThreads threads) in a fixed tree; every thread gets the totals.
__device__ void block_sums(double& a, double& b) {
  __shared__ double sa[kThreads], sb[kThreads];
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      sa[threadIdx.x] += sa[threadIdx.x + half];
      sb[threadIdx.x] += sb[threadIdx.x + half];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();  // the next call may overwrite the arrays
}

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

// ---- batch normalisation ----

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

void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g, cudaStream_t s) {
  const PoolShape p(g);
  max_pool_forward_kernel<<<blocks_for(p.planes * p.oh * p.ow), kThreads, 0, s>>>(x, y, argmax, p);
  check_launch("max_pool_forward");
}

void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g,
                       cudaStream_t s) {
  const PoolShape p(g);
  max_pool_backward_kernel<<<blocks_for(p.planes * p.h * p.w), kThreads, 0, s>>>(dy, argmax, dx, p);
  check_launch("max_pool_backward");
}

void avg_pool_forward(const float* x, float* y, const PoolGeometry& g, cudaStream_t s) {
  const PoolShape p(g);
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  avg_pool_forward_kernel<<<blocks_for(p.planes * p.oh * p.ow), kThreads, 0, s>>>(x, y, p, inv);
  check_launch("avg_pool_forward");
}

void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t s) {
  const PoolShape p(g);
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  avg_pool_backward_kernel<<<blocks_for(p.planes * p.h * p.w), kThreads, 0, s>>>(dy, dx, p, inv);
  check_launch("avg_pool_backward");
}

void channel_sums(const float* x, float* out, const NormGeometry& g, bool accumulate, cudaStream_t s) {
  if (g.c <= 0) return;
  channel_sums_kernel<<<g.c, kThreads, 0, s>>>(x, out, Channels(g), accumulate);
  check_launch("channel_sums");
}

void add_channel_bias(float* y, const float* bias, const NormGeometry& g, cudaStream_t s) {
  add_channel_bias_kernel<<<blocks_for(static_cast<std::size_t>(g.n) * g.c * g.spatial), kThreads, 0, s>>>(
      y, bias, Channels(g));
  check_launch("add_channel_bias");
}

void bn_moments(const float* x, float* moments, const NormGeometry& g, cudaStream_t s) {
  if (g.c <= 0) return;
  moments_kernel<<<g.c, kThreads, 0, s>>>(x, moments, Channels(g));
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
      x, y, mean, invstd, weight, bias, Channels(g));
  check_launch("bn_apply");
}

void bn_backward_sums(const float* x, const float* dy, const float* saved, float* sums, const NormGeometry& g,
                      cudaStream_t s) {
  if (g.c <= 0) return;
  backward_sums_kernel<<<g.c, kThreads, 0, s>>>(x, dy, saved, sums, Channels(g));
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
      x, dy, saved, weight, sums, dx, Channels(g));
  check_launch("bn_backward_input");
}

}  // namespace mpiddp::cuda
