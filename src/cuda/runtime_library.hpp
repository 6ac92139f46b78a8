#pragma once
// Opening a CUDA library at run time (cuBLAS, cuDNN) instead of linking it: a
// process that never uses it never loads it.
#include <string>

#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp::cuda {

// What a process found of one such library: the file and version, or why none,
// and the functions it resolved (`Api`: a struct of function pointers).
template <class Api>
struct OpenedLibrary {
  GpuLibraryInfo info;
  Api api;
};

// `open()`'s library, opened the first time it is asked for (thread-safe, once).
template <auto open>
const auto& opened_once() {
  static const auto library = open();
  return library;
}

// `name` in the opened library, or null with info.problem naming the file that
// lacks it and `why` (what that means for this library).
void* runtime_symbol(void* handle, const char* name, GpuLibraryInfo& info, const char* why);

// The functions of a library opened once per process by `open`; InputError
// "`need`: <why not>" where there is none.
template <class Api>
const Api& opened_api(const OpenedLibrary<Api>& library, const std::string& need) {
  if (!library.info.loaded) throw InputError(need + ": " + library.info.problem);
  return library.api;
}

// dlopen of `soname` from the library path (LD_LIBRARY_PATH, ld.so.cache), else
// from `build_dir`, where the build found it; null when neither opens, with the
// first attempt's reason in `problem`. Local symbols (nothing else needs them);
// never closed (the library's kernels may be referenced until exit).
void* open_runtime_library(const std::string& soname, const std::string& build_dir, std::string& problem);

// The file an opened library came from ("" if unknown).
std::string runtime_library_file(void* handle);

}  // namespace mpiddp::cuda
