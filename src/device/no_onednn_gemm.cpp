// A build without oneDNN: train.cpu_kernels = auto means OpenBLAS, onednn is refused (cpu_gemm.cpp).
#include "device/onednn_gemm.hpp"

#include "mpiddp/common/error.hpp"

namespace mpiddp::cpu::onednn {

bool linked() { return false; }
std::string version() { return ""; }

void sgemm(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int) {
  throw RuntimeError("internal: oneDNN sgemm called in a build without oneDNN");
}

void set_threads(int) {}

}  // namespace mpiddp::cpu::onednn
