// Built when MPIDDP_ENABLE_CUDA is OFF: the GPU entry points say so (the NCCL
// ones: src/ddp/no_nccl.cpp).
#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {

namespace {
const char* kNoCuda = "this mpiddp was built without CUDA (MPIDDP_ENABLE_CUDA=OFF)";
}

bool built_with_cuda() { return false; }
const GpuLibraryInfo& cudnn_info() {
  static const GpuLibraryInfo info{false, false, "", "", kNoCuda};
  return info;
}
const GpuLibraryInfo& cublas_info() { return cudnn_info(); }
void prefer_eager_cuda_module_loading() {}
CudaProbe probe_cuda() { return {0, kNoCuda}; }
CudaDeviceInfo cuda_device_info(int) { return {}; }
std::unique_ptr<Device> make_cuda_device(int) { throw InputError(std::string("train.device = cuda: ") + kNoCuda); }
MatmulResult cuda_matmul(int, Precision, int, double) { throw InputError(kNoCuda); }
std::unique_ptr<TraceAnnotator> cuda_trace_annotator(Device&) { return nullptr; }

}  // namespace mpiddp
