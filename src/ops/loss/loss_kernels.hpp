#pragma once
// Launchers for the losses' kernels (loss_kernels.cu), on the given stream.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiddp::cuda {

// Running sums the losses accumulate into (device memory; read back once per step).
struct LossScalars {
  double loss_sum;
  unsigned long long correct;
  unsigned long long count;
  int nonfinite;
};

// Per-row losses into row_loss/row_correct, then one deterministic reduction into *sums.
void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                           float smoothing, double* row_loss, int* row_correct, LossScalars* sums, cudaStream_t s);
void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t, double* row_loss,
                        LossScalars* sums, cudaStream_t s);
// Sets sums->nonfinite to 1 if any element is NaN or Inf (clear it first).
void find_nonfinite(const float* data, std::size_t n, LossScalars* sums, cudaStream_t s);

}  // namespace mpiddp::cuda
