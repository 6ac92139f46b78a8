// Built with CUDA but without cuDNN (MPIDDP_ENABLE_CUDNN=OFF, or none found at
// configure time): the GPU trains everything but convolutions, and a conv2d
// layer on it says so in one line.
#include "cuda_ops.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {

namespace {
const char* kNoCudnn = "this mpiddp was built without cuDNN (MPIDDP_ENABLE_CUDNN=OFF, or cudnn.h/libcudnn not found "
                       "when it was configured); rebuild with cuDNN, or use train.device = cpu";
}

const CudnnInfo& cudnn_info() {
  static const CudnnInfo info{false, false, "", "", kNoCudnn};
  return info;
}

namespace cuda {
std::unique_ptr<ConvOps> make_conv_ops(CudaDevice&) { return make_unavailable_conv_ops(kNoCudnn); }
}  // namespace cuda

}  // namespace mpiddp
