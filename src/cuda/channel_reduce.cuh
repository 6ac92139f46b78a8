#pragma once
// Per-channel sums over x[n, c, spatial] (the convolution's bias gradient and
// batch normalisation): one block per channel, each thread sums a fixed stride of
// the channel's elements in double, then a fixed tree joins the threads, so the
// order of every addition is the same in every run.
#include <cstddef>

#include "launch.cuh"

namespace mpiddp::cuda {
namespace {

struct Channels {
  int n, c, spatial;
  Channels(int n_, int c_, int spatial_) : n(n_), c(c_), spatial(spatial_) {}
  __device__ std::size_t per_channel() const { return static_cast<std::size_t>(n) * spatial; }
  // The k-th element of channel ch (samples in order, positions in order within each).
  __device__ std::size_t at(int ch, std::size_t k) const {
    return (k / spatial * c + ch) * static_cast<std::size_t>(spatial) + k % spatial;
  }
};

// Sums a and b over the block (kThreads threads) in a fixed tree; every thread gets the totals.
__device__ inline void block_sums(double& a, double& b) {
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

}  // namespace
}  // namespace mpiddp::cuda
