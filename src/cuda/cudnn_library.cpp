// Opens cuDNN at run time (see cudnn_api.hpp): libcudnn.so.<major of the build's
// headers> from the library path (LD_LIBRARY_PATH, ld.so.cache), else from the
// folder the build found it in. Its major version must be the build's: the
// descriptor API's types and enums are only stable within one major version.
#include <cuda_runtime_api.h>  // CUDART_VERSION

#include "cudnn_api.hpp"
#include "cudnn_requirements.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cuda.hpp"
#include "runtime_library.hpp"

namespace mpiddp {
namespace cuda {
namespace {

using Loaded = OpenedLibrary<CudnnApi>;

std::string version_text(std::size_t version) {
  // cuDNN 9 numbers its versions major * 10000 + minor * 100 + patch.
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

Loaded load() {
  Loaded out;
  out.info.built = true;
  const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  std::string problem;
  void* handle = open_runtime_library(name, MPIDDP_CUDNN_BUILD_DIR, problem);
  if (!handle) {
    out.info.problem = "cuDNN not found: " + problem;
    return out;
  }
  // The handle stays open for the life of the process (no dlclose: cuDNN's
  // sub-libraries and their kernels may still be referenced at exit).
  out.info.library = runtime_library_file(handle);
#define MPIDDP_CUDNN_RESOLVE(fn)                                                                              \
  out.api.fn = reinterpret_cast<decltype(out.api.fn)>(                                                         \
      runtime_symbol(handle, #fn, out.info, "an incomplete or foreign cuDNN"));                                \
  if (!out.api.fn) return out;
  MPIDDP_CUDNN_FUNCTIONS(MPIDDP_CUDNN_RESOLVE)
#undef MPIDDP_CUDNN_RESOLVE
  const std::size_t version = out.api.cudnnGetVersion();
  out.info.version = version_text(version);
  if (version / 10000 != CUDNN_MAJOR) {
    out.info.problem = out.info.library + " is cuDNN " + out.info.version + ", but this mpiddp was built with " +
                       std::to_string(CUDNN_MAJOR) + ".x";
    return out;
  }
  // cuDNN opens its sub-libraries later, by bare name, at the first convolution;
  // open them now so that a missing or broken one is this line, not a failed step.
  for (const std::string& part : cudnn_sublibraries(CUDNN_MAJOR)) {
    if (!open_runtime_library(part, MPIDDP_CUDNN_BUILD_DIR, problem)) {
      out.info.problem = "cuDNN " + out.info.version + " is incomplete: " + problem;
      return out;
    }
  }
  out.info.problem = cudart_mismatch(static_cast<int>(out.api.cudnnGetCudartVersion()), CUDART_VERSION);
  if (!out.info.problem.empty()) {
    out.info.problem = out.info.library + ": " + out.info.problem;
    return out;
  }
  out.info.loaded = true;
  return out;
}

const Loaded& loaded() { return opened_once<load>(); }

}  // namespace

const CudnnApi& cudnn_api() { return opened_api(loaded(), "conv2d on the GPU needs cuDNN"); }

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw RuntimeError(std::string("cuDNN: ") + what + ": " + loaded().api.cudnnGetErrorString(status));
}

}  // namespace cuda

const GpuLibraryInfo& cudnn_info() { return cuda::loaded().info; }

}  // namespace mpiddp
