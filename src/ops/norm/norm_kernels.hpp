#pragma once
// Launchers for the batch normalisation kernels (norm_kernels.cu), on the given
// stream. Every sum over a channel runs in one block in a fixed order (no
// floating-point atomics), so results repeat bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "norm_ops.hpp"

namespace mpiddp::cuda {

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
