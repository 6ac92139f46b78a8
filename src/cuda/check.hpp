#pragma once
// Every CUDA, cuBLAS and NCCL call is checked; a failure throws RuntimeError
// naming the call, so the top level prints one line and the job ends.
#include <cuda_runtime.h>

#include <string>

#include "cublas_api.hpp"
#include "mpiddp/common/error.hpp"

namespace mpiddp::cuda {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw RuntimeError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

inline void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(std::string("cuBLAS: ") + what + ": " + cublas().cublasGetStatusString(status));
}

// After a kernel launch: launch errors are reported here, execution errors at the next wait.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace mpiddp::cuda
