#pragma once
// The cuDNN functions mpiddp calls, reached through the library opened at run
// time (cudnn_library.cpp) rather than linked: a binary built with cuDNN then
// still starts, and trains everything but convolutions, where cuDNN is missing
// (it is ~500 MB and often not installed next to CUDA). The declarations come
// from cudnn.h, so every call is type-checked as if it were linked.
#include <cudnn.h>

#include <string>

namespace mpiddp::cuda {

// The legacy (descriptor) API, which cuDNN 9 still ships in libcudnn.so.9.
#define MPIDDP_CUDNN_FUNCTIONS(X)                                                                           \
  X(cudnnGetVersion) X(cudnnGetCudartVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)               \
  X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor)             \
  X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor)             \
  X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor)                                  \
  X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionMathType)                                         \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionForwardWorkspaceSize)                      \
  X(cudnnConvolutionForward)                                                                                \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnGetConvolutionBackwardDataWorkspaceSize)            \
  X(cudnnConvolutionBackwardData)                                                                           \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnGetConvolutionBackwardFilterWorkspaceSize)        \
  X(cudnnConvolutionBackwardFilter)

struct CudnnApi {
#define MPIDDP_CUDNN_POINTER(name) decltype(&::name) name = nullptr;
  MPIDDP_CUDNN_FUNCTIONS(MPIDDP_CUDNN_POINTER)
#undef MPIDDP_CUDNN_POINTER
};

// The functions of the process's cuDNN; throws InputError saying why there is
// none (not found, too old, a function missing). Opened once, on first use.
const CudnnApi& cudnn_api();

// Throws RuntimeError naming the call when status is not success.
void check(cudnnStatus_t status, const char* what);

}  // namespace mpiddp::cuda
