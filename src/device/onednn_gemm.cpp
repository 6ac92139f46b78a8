#include "device/onednn_gemm.hpp"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include "mpiddp/common/error.hpp"

namespace mpiddp::cpu::onednn {

bool linked() { return true; }

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                          beta, c, ldc);
  if (status != dnnl_success)
    throw RuntimeError("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") on " +
                       std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
}

// Debian's oneDNN runs on OpenMP: its thread count is the calling thread's.
void set_threads(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }

}  // namespace mpiddp::cpu::onednn
