#pragma once
// Launchers for the causal softmax kernels (attention_kernels.cu), on the given
// stream: one warp per row of scores; row r of the [samples][heads][T][T] block
// is query position r % T and sees the first r % T + 1 keys.
#include <cuda_runtime.h>

namespace mpiddp::cuda {

void causal_softmax(float* scores, int rows, int t, cudaStream_t s);
// dp -> d(scores) in place, from the probabilities p.
void causal_softmax_grad(const float* p, float* dp, int rows, int t, cudaStream_t s);

}  // namespace mpiddp::cuda
