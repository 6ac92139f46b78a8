#pragma once
// Launchers for the convolution's bias kernels (conv_kernels.cu), on the given
// stream; cuDNN does the products (cudnn_conv_ops.cpp).
#include <cuda_runtime.h>

#include "conv_ops.hpp"

namespace mpiddp::cuda {

// out[ch] (+)= sum over samples and positions of the output-shaped x (the bias gradient).
void channel_sums(const float* x, float* out, const ConvGeometry& g, bool accumulate, cudaStream_t s);
// y[i, ch, q] += bias[ch].
void add_channel_bias(float* y, const float* bias, const ConvGeometry& g, cudaStream_t s);

}  // namespace mpiddp::cuda
