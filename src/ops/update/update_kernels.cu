// Optimizer updates on the GPU: elementwise.hpp's update rules, one thread per element.
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "update_kernels.hpp"

namespace mpiddp::cuda {
namespace {

__global__ void sgd_kernel(float* params, const float* grads, float* buffer, std::size_t n, ew::SgdCoefficients k) {
  MPIDDP_GRID_STRIDE(i, n) ew::sgd_update(params[i], grads[i], buffer ? buffer + i : nullptr, k);
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, std::size_t n,
                             ew::AdamWCoefficients k) {
  MPIDDP_GRID_STRIDE(i, n) ew::adamw_update(params[i], grads[i], m[i], v[i], k);
}

}  // namespace

void sgd_update(float* params, const float* grads, float* buffer, std::size_t n, const ew::SgdCoefficients& k,
                cudaStream_t s) {
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(params, grads, buffer, n, k);
  check_launch("sgd_update");
}

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const ew::AdamWCoefficients& k, cudaStream_t s) {
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(params, grads, m, v, n, k);
  check_launch("adamw_update");
}

}  // namespace mpiddp::cuda
