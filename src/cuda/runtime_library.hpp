#pragma once
// Opening a CUDA library at run time (cuBLAS, cuDNN) instead of linking it: a
// process that never uses it never loads it.
#include <string>

namespace mpiddp::cuda {

// dlopen of `soname` from the library path (LD_LIBRARY_PATH, ld.so.cache), else
// from `build_dir`, where the build found it; null when neither opens, with the
// first attempt's reason in `problem`. Local symbols (nothing else needs them);
// never closed (the library's kernels may be referenced until exit).
void* open_runtime_library(const std::string& soname, const std::string& build_dir, std::string& problem);

// The file an opened library came from ("" if unknown).
std::string runtime_library_file(void* handle);

}  // namespace mpiddp::cuda
