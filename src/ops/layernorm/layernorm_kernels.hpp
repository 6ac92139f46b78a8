#pragma once
// Launchers for the layer normalisation kernels (layernorm_kernels.cu), on the
// given stream: LayerNormOps' semantics, sums in double in a fixed order.
#include <cuda_runtime.h>

#include "cuda/cuda_scratch.hpp"
#include "layernorm_ops.hpp"

namespace mpiddp::cuda {

void layernorm_forward(const float* x, float* y, const float* weight, const float* bias, float eps, float* saved,
                       const LayerNormGeometry& g, cudaStream_t s);
void layernorm_backward_input(const float* x, const float* dy, const float* weight, const float* saved, float* dx,
                              const LayerNormGeometry& g, cudaStream_t s);
void layernorm_backward_params(const float* x, const float* dy, const float* saved, float* dweight, float* dbias,
                               bool accumulate, const LayerNormGeometry& g, Scratch<double>& partials,
                               cudaStream_t s);

}  // namespace mpiddp::cuda
