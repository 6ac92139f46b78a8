#pragma once
// Launchers for the optimizer update kernels (update_kernels.cu), on the given
// stream; the update rules are elementwise.hpp's, shared with the CPU.
#include <cuda_runtime.h>

#include <cstddef>

#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cuda {

void sgd_update(float* params, const float* grads, float* buffer, std::size_t n, const ew::SgdCoefficients& k,
                cudaStream_t s);
void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const ew::AdamWCoefficients& k, cudaStream_t s);

}  // namespace mpiddp::cuda
