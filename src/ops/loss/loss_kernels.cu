// The losses' kernels. Per-row terms first, then one block sums the rows in a
// fixed order, so results repeat bit for bit (no floating-point atomics).
#include <climits>
#include <cmath>

#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "cuda/warp_reduce.cuh"
#include "mpiddp/device/elementwise.hpp"
#include "loss_kernels.hpp"

namespace mpiddp::cuda {
namespace {

// Softmax cross-entropy, one warp per row: the lanes read the row together
// (consecutive logits, so the loads coalesce), each keeps its own arg-max and
// sum of terms in column order, and a fixed butterfly of shuffles combines the
// lanes. Same pieces as the CPU's softmax_cross_entropy_row; only the order of
// the double sum differs, and it is the same in every run (deterministic).
struct TopLogit {
  float value;
  int index;
};

// The larger value; on ties the lower index (the CPU's first arg-max). Order-free.
__device__ TopLogit better(TopLogit a, TopLogit b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

__device__ TopLogit warp_top(TopLogit t) {
  for (int mask = kWarp / 2; mask > 0; mask /= 2) {
    const TopLogit other{__shfl_xor_sync(kAllLanes, t.value, mask), __shfl_xor_sync(kAllLanes, t.index, mask)};
    t = better(t, other);
  }
  return t;
}

__global__ void softmax_rows_kernel(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                                    float smoothing, double* row_loss, int* row_correct) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warps = static_cast<int>(gridDim.x * blockDim.x) / kWarp;
  const float inv_n = 1.0f / static_cast<float>(n);
  const ew::SmoothedShares share = ew::smoothed_shares(smoothing, c, inv_n);
  // The whole warp takes the same rows, so every lane reaches every shuffle.
  for (int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) / kWarp; r < n; r += warps) {
    const float* z = logits + static_cast<std::size_t>(r) * c;
    TopLogit top{-INFINITY, INT_MAX};
    for (int k = lane; k < c; k += kWarp) top = better(top, TopLogit{z[k], k});
    top = warp_top(top);
    double sum = 0.0;
    for (int k = lane; k < c; k += kWarp) sum += ew::softmax_term(z[k], top.value);
    const double log_sum = ew::softmax_log_sum(warp_sum(sum), top.value);
    double z_sum = 0.0;
    if (smoothing != 0.0f) {
      for (int k = lane; k < c; k += kWarp) z_sum += z[k];
      z_sum = warp_sum(z_sum);
    }
    const int label = labels[r];
    if (grad) {
      float* g = grad + static_cast<std::size_t>(r) * c;
      for (int k = lane; k < c; k += kWarp) {
        float v = ew::softmax_grad(z[k], log_sum, inv_n);
        if (share.each != 0.0f) v = __fsub_rn(v, share.each);  // _rn: never fused with the product, like the CPU
        g[k] = k == label ? __fsub_rn(v, share.label) : v;
      }
    }
    if (lane == 0) {
      row_loss[r] = ew::smoothed_loss(log_sum, z[label], z_sum, smoothing, c);
      if (row_correct) row_correct[r] = top.index == label ? 1 : 0;
    }
  }
}

__global__ void squared_error_rows_kernel(const float* y, const float* targets, float* grad, int n, int t,
                                          double* row_loss) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const std::size_t at = static_cast<std::size_t>(r) * t;
  const float scale = 2.0f / (static_cast<float>(n) * static_cast<float>(t));
  row_loss[r] = ew::squared_error_row(y + at, targets + at, t, scale, grad ? grad + at : nullptr);
}

// One block: each thread sums a fixed stride of rows, then a fixed tree.
__global__ void sum_rows_kernel(const double* row_loss, const int* row_correct, int n, LossScalars* sums) {
  __shared__ double loss[kThreads];
  __shared__ unsigned long long correct[kThreads];
  double l = 0.0;
  unsigned long long k = 0;
  for (int r = threadIdx.x; r < n; r += kThreads) {
    l += row_loss[r];
    if (row_correct) k += static_cast<unsigned long long>(row_correct[r]);
  }
  loss[threadIdx.x] = l;
  correct[threadIdx.x] = k;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      correct[threadIdx.x] += correct[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sums->loss_sum += loss[0];
    sums->correct += correct[0];
    sums->count += static_cast<unsigned long long>(n);
  }
}

__global__ void nonfinite_kernel(const float* data, std::size_t n, LossScalars* sums) {
  bool bad = false;
  MPIDDP_GRID_STRIDE(i, n) bad = bad || !isfinite(data[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(&sums->nonfinite, 1);  // OR: order does not matter
}

}  // namespace

void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                           float smoothing, double* row_loss, int* row_correct, LossScalars* sums, cudaStream_t s) {
  if (n == 0) return;
  constexpr int rows_per_block = kThreads / kWarp;
  softmax_rows_kernel<<<(n + rows_per_block - 1) / rows_per_block, kThreads, 0, s>>>(logits, labels, grad, n, c,
                                                                                     smoothing, row_loss, row_correct);
  check_launch("softmax_cross_entropy");
  sum_rows_kernel<<<1, kThreads, 0, s>>>(row_loss, row_correct, n, sums);
  check_launch("sum_rows");
}

void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t, double* row_loss,
                        LossScalars* sums, cudaStream_t s) {
  if (n == 0) return;
  squared_error_rows_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, s>>>(y, targets, grad, n, t, row_loss);
  check_launch("mean_squared_error");
  sum_rows_kernel<<<1, kThreads, 0, s>>>(row_loss, nullptr, n, sums);
  check_launch("sum_rows");
}

void find_nonfinite(const float* data, std::size_t n, LossScalars* sums, cudaStream_t s) {
  nonfinite_kernel<<<blocks_for(n), kThreads, 0, s>>>(data, n, sums);
  check_launch("find_nonfinite");
}

}  // namespace mpiddp::cuda
