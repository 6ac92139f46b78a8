#pragma once
// Launchers for the activation and dropout kernels (pointwise_kernels.cu), on the
// given stream; the per-element math is elementwise.hpp's, shared with the CPU.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cuda {

void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n, cudaStream_t s);
void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                         std::size_t n, cudaStream_t s);
void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p, float keep,
                     cudaStream_t s);

}  // namespace mpiddp::cuda
