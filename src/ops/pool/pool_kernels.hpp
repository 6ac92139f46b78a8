#pragma once
// Launchers for the pooling kernels (pool_kernels.cu), on the given stream:
// PoolOps' semantics, bit-identical to the CPU's.
#include <cuda_runtime.h>

#include <cstdint>

#include "pool_ops.hpp"

namespace mpiddp::cuda {

void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g, cudaStream_t s);
void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g,
                       cudaStream_t s);
void avg_pool_forward(const float* x, float* y, const PoolGeometry& g, cudaStream_t s);
void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t s);

}  // namespace mpiddp::cuda
