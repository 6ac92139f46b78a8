// Built with CUDA but without cuDNN (MPIDDP_ENABLE_CUDNN=OFF, or none found at
// configure time): the GPU trains everything but convolutions, and a conv2d
// layer on it says so in one line (src/ops/conv/no_cudnn_conv_ops.cpp).
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {

namespace {
const char* kNoCudnn = "this mpiddp was built without cuDNN (MPIDDP_ENABLE_CUDNN=OFF, or cudnn.h/libcudnn not found "
                       "when it was configured); rebuild with cuDNN, or use train.device = cpu";
}

const GpuLibraryInfo& cudnn_info() {
  static const GpuLibraryInfo info{false, false, "", "", kNoCudnn};
  return info;
}

}  // namespace mpiddp
