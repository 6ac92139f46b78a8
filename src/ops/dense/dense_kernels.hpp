#pragma once
// The dense family's kernel launcher (dense_kernels.cu), on the given stream.
#include <cuda_runtime.h>

namespace mpiddp::cuda {

void broadcast_rows(const float* bias, float* y, int n, int out, cudaStream_t s);  // y[r, :] = bias

}  // namespace mpiddp::cuda
