#pragma once
// The dense kernels the layers need on the CPU, on top of BLAS.
#include <cstddef>

namespace mpiddp::cpu {

// y[n, out] = x[n, in] * w[out, in]^T + b[out]          (PyTorch Linear layout)
void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out);
// dw[out, in] (+)= dy[n, out]^T * x[n, in];  db[out] (+)= column sums of dy
void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                            bool accumulate);
// dx[n, in] = dy[n, out] * w[out, in]
void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out);

void scale(float* data, std::size_t count, float factor);

// Sets the BLAS library's thread count for this process.
void set_blas_threads(int threads);

}  // namespace mpiddp::cpu
