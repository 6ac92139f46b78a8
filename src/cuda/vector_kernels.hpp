#pragma once
// Launchers for the element-wise kernels over whole vectors (vector_kernels.cu)
// that several op families and the NCCL transport share. Everything runs on the
// given stream.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace mpiddp::cuda {

void fill(float* data, std::size_t n, float value, cudaStream_t s);
void add(const float* a, const float* b, float* out, std::size_t n, cudaStream_t s);  // out may be a or b
void multiply(const float* a, const float* b, float* out, std::size_t n, cudaStream_t s);
void scale(float* data, std::size_t n, float factor, cudaStream_t s);
void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t s);
void from_bf16(const __nv_bfloat16* in, float* out, std::size_t n, cudaStream_t s);

}  // namespace mpiddp::cuda
