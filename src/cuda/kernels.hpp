#pragma once
// Launchers for mpiddp's CUDA kernels (kernels.cu). Everything runs on the
// given stream; the element-wise math is elementwise.hpp's, shared with the CPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cuda {

// Running sums the losses accumulate into (device memory; read back once per step).
struct LossScalars {
  double loss_sum;
  unsigned long long correct;
  unsigned long long count;
  int nonfinite;
};

void broadcast_rows(const float* bias, float* y, int n, int out, cudaStream_t s);  // y[r, :] = bias
void fill(float* data, std::size_t n, float value, cudaStream_t s);
void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n, cudaStream_t s);
void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                         std::size_t n, cudaStream_t s);
void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p, float keep,
                     cudaStream_t s);
void multiply(const float* a, const float* b, float* out, std::size_t n, cudaStream_t s);
void scale(float* data, std::size_t n, float factor, cudaStream_t s);
void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t s);
void from_bf16(const __nv_bfloat16* in, float* out, std::size_t n, cudaStream_t s);

// Per-row losses into row_loss/row_correct, then one deterministic reduction into *sums.
void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                           double* row_loss, int* row_correct, LossScalars* sums, cudaStream_t s);
void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t, double* row_loss,
                        LossScalars* sums, cudaStream_t s);

void sgd_update(float* params, const float* grads, float* buffer, std::size_t n, const ew::SgdCoefficients& k,
                cudaStream_t s);
void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const ew::AdamWCoefficients& k, cudaStream_t s);
// Sets sums->nonfinite to 1 if any element is NaN or Inf (clear it first).
void find_nonfinite(const float* data, std::size_t n, LossScalars* sums, cudaStream_t s);

}  // namespace mpiddp::cuda
