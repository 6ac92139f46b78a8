#pragma once
// Plain loops (double accumulation) that compute what the benchmarked kernels
// compute, for the harness's check of their results. Slow on purpose: obviously
// right. Private to cli/.
#include <vector>

#include "ops/conv/conv_ops.hpp"

namespace mpiddp::bench {

// y[n, out] = x[n, in] w[out, in]^T + b[out]
std::vector<float> linear_forward(const float* x, const float* w, const float* b, int n, int in, int out);
// dw[out, in] = dy^T x, then db[out] = column sums of dy, concatenated
std::vector<float> linear_params_grad(const float* x, const float* dy, int n, int in, int out);
// dx[n, in] = dy[n, out] w[out, in]
std::vector<float> linear_input_grad(const float* dy, const float* w, int n, int in, int out);

// PyTorch's conv2d (NCHW, weight [out_c, c, kh, kw]) and its two gradients;
// conv_params_grad returns dweight then dbias.
std::vector<float> conv_forward(const float* x, const float* w, const float* b, const ConvGeometry& g);
std::vector<float> conv_params_grad(const float* x, const float* dy, const ConvGeometry& g);
std::vector<float> conv_input_grad(const float* dy, const float* w, const ConvGeometry& g);

}  // namespace mpiddp::bench
