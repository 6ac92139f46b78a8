#include <dlfcn.h>
#include <link.h>

#include "runtime_library.hpp"

namespace mpiddp::cuda {

void* open_runtime_library(const std::string& soname, const std::string& build_dir, std::string& problem) {
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const char* why = dlerror();
  problem = why ? why : soname + ": cannot be opened";
  if (build_dir.empty()) return nullptr;
  const std::string beside_build = build_dir + "/" + soname;
  return dlopen(beside_build.c_str(), RTLD_NOW | RTLD_LOCAL);
}

void* runtime_symbol(void* handle, const char* name, GpuLibraryInfo& info, const char* why) {
  void* found = dlsym(handle, name);
  if (!found) info.problem = info.library + " has no " + name + " (" + why + ")";
  return found;
}

std::string runtime_library_file(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) return map->l_name;
  return "";
}

}  // namespace mpiddp::cuda
