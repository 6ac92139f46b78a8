// Activations and dropout on the GPU: grid-stride loops over the per-element
// math of elementwise.hpp, the CPU's own.
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "pointwise_kernels.hpp"

namespace mpiddp::cuda {
namespace {

template <ActivationKind K>
__device__ float activate(float x) {
  if constexpr (K == ActivationKind::relu) return ew::relu(x);
  else if constexpr (K == ActivationKind::gelu) return ew::gelu(x);
  else if constexpr (K == ActivationKind::gelu_tanh) return ew::gelu_tanh(x);
  else return ew::tanh_value(x);
}

template <ActivationKind K>
__device__ float activate_grad(float x, float y, float g) {
  if constexpr (K == ActivationKind::relu) return ew::relu_grad(x, y, g);
  else if constexpr (K == ActivationKind::gelu) return ew::gelu_grad(x, y, g);
  else if constexpr (K == ActivationKind::gelu_tanh) return ew::gelu_tanh_grad(x, y, g);
  else return ew::tanh_grad(x, y, g);
}

template <ActivationKind K>
__global__ void activation_forward_kernel(const float* x, float* y, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) y[i] = activate<K>(x[i]);
}

template <ActivationKind K>
__global__ void activation_backward_kernel(const float* x, const float* y, const float* dy, float* dx, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) dx[i] = activate_grad<K>(x[i], y[i], dy[i]);
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                               float keep) {
  MPIDDP_GRID_STRIDE(i, n) {
    mask[i] = ew::dropout_mask(key, i, p, keep);
    y[i] = x[i] * mask[i];
  }
}

}  // namespace

void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n, cudaStream_t s) {
  switch (kind) {
    case ActivationKind::relu:
      activation_forward_kernel<ActivationKind::relu><<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
      break;
    case ActivationKind::gelu:
      activation_forward_kernel<ActivationKind::gelu><<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
      break;
    case ActivationKind::tanh:
      activation_forward_kernel<ActivationKind::tanh><<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
      break;
    case ActivationKind::gelu_tanh:
      activation_forward_kernel<ActivationKind::gelu_tanh><<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
      break;
  }
  check_launch("activation_forward");
}

void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                         std::size_t n, cudaStream_t s) {
  switch (kind) {
    case ActivationKind::relu:
      activation_backward_kernel<ActivationKind::relu><<<blocks_for(n), kThreads, 0, s>>>(x, y, dy, dx, n);
      break;
    case ActivationKind::gelu:
      activation_backward_kernel<ActivationKind::gelu><<<blocks_for(n), kThreads, 0, s>>>(x, y, dy, dx, n);
      break;
    case ActivationKind::tanh:
      activation_backward_kernel<ActivationKind::tanh><<<blocks_for(n), kThreads, 0, s>>>(x, y, dy, dx, n);
      break;
    case ActivationKind::gelu_tanh:
      activation_backward_kernel<ActivationKind::gelu_tanh><<<blocks_for(n), kThreads, 0, s>>>(x, y, dy, dx, n);
      break;
  }
  check_launch("activation_backward");
}

void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p, float keep,
                     cudaStream_t s) {
  dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, mask, n, key, p, keep);
  check_launch("dropout_forward");
}

}  // namespace mpiddp::cuda
