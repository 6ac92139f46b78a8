#pragma once
// Functions marked MPIDDP_HD compile for the host and, under nvcc, for the GPU
// too: the element-wise math is written once, so the CPU tests exercise the very
// code the CUDA kernels run.
#if defined(__CUDACC__)
#define MPIDDP_HD __host__ __device__ __forceinline__
#else
#define MPIDDP_HD inline
#endif
