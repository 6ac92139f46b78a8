#pragma once
// What a usable cuDNN must bring besides libcudnn.so.<major> (cudnn_library.cpp
// checks it when cuDNN is opened): plain functions of version numbers, so that
// they are tested on machines without a GPU (tests/unit/test_cudnn_requirements.cpp).
#include <string>
#include <vector>

namespace mpiddp::cuda {

// The sub-libraries the convolutions need, which libcudnn.so opens by bare name
// at first use (cuDNN 9 split into graph/ops/cnn/engines; cuDNN 8 into
// ops/cnn x infer/train).
inline std::vector<std::string> cudnn_sublibraries(int major) {
  const std::string so = ".so." + std::to_string(major);
  if (major >= 9)
    return {"libcudnn_graph" + so, "libcudnn_ops" + so, "libcudnn_cnn" + so, "libcudnn_engines_precompiled" + so,
            "libcudnn_engines_runtime_compiled" + so};
  return {"libcudnn_ops_infer" + so, "libcudnn_ops_train" + so, "libcudnn_cnn_infer" + so,
          "libcudnn_cnn_train" + so};
}

// Why a cuDNN built for CUDA `cudnn_cudart` (cudnnGetCudartVersion: 12080 = 12.8)
// cannot serve a process built with CUDA `built_cudart` (CUDART_VERSION); "" when
// it can: their major versions must agree (a cuDNN for CUDA 12 in a CUDA 13 process
// fails inside its kernels' loading, not at dlopen).
inline std::string cudart_mismatch(int cudnn_cudart, int built_cudart) {
  if (cudnn_cudart / 1000 == built_cudart / 1000) return "";
  auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "this cuDNN is built for CUDA " + text(cudnn_cudart) + ", mpiddp for CUDA " + text(built_cudart) +
         " (install the cuDNN for CUDA " + std::to_string(built_cudart / 1000) + ")";
}

}  // namespace mpiddp::cuda
