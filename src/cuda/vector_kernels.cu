// Element-wise kernels over whole vectors that several op families and the NCCL
// transport share (fill, scale, bf16 conversion): grid-stride loops.
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "cuda/vector_kernels.hpp"

namespace mpiddp::cuda {
namespace {

__global__ void fill_kernel(float* data, std::size_t n, float value) {
  MPIDDP_GRID_STRIDE(i, n) data[i] = value;
}

__global__ void multiply_kernel(const float* a, const float* b, float* out, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

__global__ void add_kernel(const float* a, const float* b, float* out, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* data, std::size_t n, float factor) {
  MPIDDP_GRID_STRIDE(i, n) data[i] *= factor;
}

__global__ void to_bf16_kernel(const float* in, __nv_bfloat16* out, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void from_bf16_kernel(const __nv_bfloat16* in, float* out, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) out[i] = __bfloat162float(in[i]);
}

}  // namespace

void fill(float* data, std::size_t n, float value, cudaStream_t s) {
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(data, n, value);
  check_launch("fill");
}

void multiply(const float* a, const float* b, float* out, std::size_t n, cudaStream_t s) {
  multiply_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
  check_launch("multiply");
}

void add(const float* a, const float* b, float* out, std::size_t n, cudaStream_t s) {
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
  check_launch("add");
}

void scale(float* data, std::size_t n, float factor, cudaStream_t s) {
  scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(data, n, factor);
  check_launch("scale");
}

void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t s) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  check_launch("to_bf16");
}

void from_bf16(const __nv_bfloat16* in, float* out, std::size_t n, cudaStream_t s) {
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  check_launch("from_bf16");
}

}  // namespace mpiddp::cuda
