#pragma once
// The cuBLAS functions mpiddp calls, reached through the library opened at run
// time (cuda_cublas_library.cpp) rather than linked: linked, cuBLASLt's start-up
// code cost every process about 0.35 s, GPU or not (mpiddp/device/cuda.hpp: cublas_info).
// The declarations come from cublas_v2.h, so every call is type-checked as if it
// were linked.
#include <cublas_v2.h>

namespace mpiddp::cuda {

// The names the library exports. cublas_v2.h maps cublasCreate to
// cublasCreate_v2 and so on, so callers write cublas().cublasCreate(...); the
// unsuffixed export is the legacy API's function, of another signature.
#define MPIDDP_CUBLAS_FUNCTIONS(X)                                                                     \
  X(cublasGetProperty) X(cublasGetStatusString) X(cublasCreate_v2) X(cublasDestroy_v2)                   \
  X(cublasSetStream_v2) X(cublasSetMathMode) X(cublasSgemm_v2) X(cublasSgemv_v2)

// These two have C++ overloads in the header (taking the legacy cudaDataType as
// the compute type) beside the exported function, so their types are spelled out.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, long long,
                                                      const void*, cudaDataType, int, long long, const void*, void*,
                                                      cudaDataType, int, long long, int, cublasComputeType_t,
                                                      cublasGemmAlgo_t);
#define MPIDDP_CUBLAS_OVERLOADED(X) X(cublasGemmEx, CublasGemmEx) X(cublasGemmStridedBatchedEx, CublasGemmStridedBatchedEx)

struct CublasApi {
#define MPIDDP_CUBLAS_POINTER(name) decltype(&::name) name = nullptr;
#define MPIDDP_CUBLAS_TYPED_POINTER(name, type) type name = nullptr;
  MPIDDP_CUBLAS_FUNCTIONS(MPIDDP_CUBLAS_POINTER)
  MPIDDP_CUBLAS_OVERLOADED(MPIDDP_CUBLAS_TYPED_POINTER)
#undef MPIDDP_CUBLAS_TYPED_POINTER
#undef MPIDDP_CUBLAS_POINTER
};

// The functions of the process's cuBLAS; throws InputError saying why there is
// none (not found, another major version, a function missing). Opened once, on
// first use.
const CublasApi& cublas();

}  // namespace mpiddp::cuda
