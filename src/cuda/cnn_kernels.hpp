#pragma once
// Launchers for the CNN layers' own kernels (cnn_kernels.cu): pooling, batch
// normalisation and the convolution's bias, on the given stream. Every sum over
// a channel runs in one block in a fixed order (no floating-point atomics), so
// results repeat bit for bit; the per-element math is elementwise.hpp's.
#include <cuda_runtime.h>

#include <cstdint>

#include "mpiddp/device/ops/norm_ops.hpp"
#include "mpiddp/device/ops/pool_ops.hpp"

namespace mpiddp::cuda {

// ---- pooling (PoolOps' semantics; bit-identical to the CPU's) ----
void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g, cudaStream_t s);
void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g,
                       cudaStream_t s);
void avg_pool_forward(const float* x, float* y, const PoolGeometry& g, cudaStream_t s);
void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t s);

// ---- per-channel data x[n, c, spatial] ----
// out[ch] (+)= sum over samples and positions of x (the convolution's bias gradient).
void channel_sums(const float* x, float* out, const NormGeometry& g, bool accumulate, cudaStream_t s);
// y[i, ch, q] += bias[ch] (the convolution's bias).
void add_channel_bias(float* y, const float* bias, const NormGeometry& g, cudaStream_t s);

// ---- batch normalisation (NormOps' calls) ----
void bn_moments(const float* x, float* moments, const NormGeometry& g, cudaStream_t s);
void bn_combine_moments(const float* all, int ranks, float* moments, int c, cudaStream_t s);
// Statistics from moments into saved[3][c] and the running buffers.
void bn_train_statistics(const float* moments, float eps, float momentum, float* running_mean, float* running_var,
                         float* saved, int c, cudaStream_t s);
// invstd[c] from the running variance.
void bn_eval_invstd(const float* running_var, float eps, float* invstd, int c, cudaStream_t s);
// y = (x - mean[ch]) * invstd[ch] * weight[ch] + bias[ch].
void bn_apply(const float* x, float* y, const float* mean, const float* invstd, const float* weight,
              const float* bias, const NormGeometry& g, cudaStream_t s);
void bn_backward_sums(const float* x, const float* dy, const float* saved, float* sums, const NormGeometry& g,
                      cudaStream_t s);
void bn_backward_params(const float* sums, const float* saved, float* dweight, float* dbias, int c, bool accumulate,
                        cudaStream_t s);
void bn_backward_input(const float* x, const float* dy, const float* saved, const float* weight, const float* sums,
                       float* dx, const NormGeometry& g, cudaStream_t s);

}  // namespace mpiddp::cuda
