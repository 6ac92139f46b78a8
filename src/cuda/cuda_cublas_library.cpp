// Opens cuBLAS at run time (see cublas_api.hpp): libcublas.so.<major of the
// build's headers> from the library path, else from the folder the build found
// it in. Its major version must be the build's (its ABI is only stable within one).
#include <library_types.h>  // MAJOR_VERSION, ...

#include "cublas_api.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cuda.hpp"
#include "runtime_library.hpp"

namespace mpiddp {
namespace cuda {
namespace {

using Loaded = OpenedLibrary<CublasApi>;

// The spelled-out types name the exported functions (a mismatch fails to compile).
[[maybe_unused]] constexpr CublasGemmEx kExportedGemmEx = &::cublasGemmEx;
[[maybe_unused]] constexpr CublasGemmStridedBatchedEx kExportedStridedBatched = &::cublasGemmStridedBatchedEx;

Loaded load() {
  Loaded out;
  out.info.built = true;
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string problem;
  void* handle = open_runtime_library(name, MPIDDP_CUBLAS_BUILD_DIR, problem);
  if (!handle) {
    out.info.problem = "cuBLAS not found: " + problem;
    return out;
  }
  out.info.library = runtime_library_file(handle);
#define MPIDDP_CUBLAS_RESOLVE(fn, ...)                                                                        \
  out.api.fn = reinterpret_cast<decltype(out.api.fn)>(                                                         \
      runtime_symbol(handle, #fn, out.info, "older than the cuBLAS this mpiddp was built with"));              \
  if (!out.api.fn) return out;
  MPIDDP_CUBLAS_FUNCTIONS(MPIDDP_CUBLAS_RESOLVE)
  MPIDDP_CUBLAS_OVERLOADED(MPIDDP_CUBLAS_RESOLVE)
#undef MPIDDP_CUBLAS_RESOLVE
  int version[3] = {0, 0, 0};
  const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
  for (int i = 0; i < 3; ++i) out.api.cublasGetProperty(parts[i], &version[i]);
  out.info.version = std::to_string(version[0]) + "." + std::to_string(version[1]) + "." + std::to_string(version[2]);
  if (version[0] != CUBLAS_VER_MAJOR) {
    out.info.problem = out.info.library + " is cuBLAS " + out.info.version + ", but this mpiddp was built with " +
                       std::to_string(CUBLAS_VER_MAJOR) + ".x";
    return out;
  }
  out.info.loaded = true;
  return out;
}

const Loaded& loaded() { return opened_once<load>(); }

}  // namespace

const CublasApi& cublas() { return opened_api(loaded(), "the GPU's matrix products need cuBLAS"); }

}  // namespace cuda

const GpuLibraryInfo& cublas_info() { return cuda::loaded().info; }

}  // namespace mpiddp
