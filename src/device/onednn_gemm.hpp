#pragma once
// oneDNN's row-major sgemm, or, in a build without oneDNN (no_onednn_gemm.cpp),
// a stand-in that says so. Chosen at link time by CMakeLists.txt.
#include <string>

namespace mpiddp::cpu::onednn {

bool linked();
std::string version();
// As cpu::sgemm (cpu_gemm.hpp).
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);
// oneDNN's OpenMP threads for products started by the calling thread.
void set_threads(int threads);

}  // namespace mpiddp::cpu::onednn
