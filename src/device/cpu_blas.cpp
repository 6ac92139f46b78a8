#include "mpiddp/device/cpu_blas.hpp"

#include <cblas.h>

#include <algorithm>

#include "device/onednn_gemm.hpp"
#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/cpu_gemm.hpp"

namespace mpiddp::cpu {

void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out) {
  // Seed y with the bias (if any) so one GEMM with beta = 1 does the rest.
  if (b)
    for (int r = 0; r < n; ++r) std::copy(b, b + out, y + static_cast<std::size_t>(r) * out);
  sgemm(false, true, n, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

namespace {
MPIDDP_VECTOR_CLONES
void add_column_sums(const float* __restrict dy, float* __restrict db, int n, int out) {
  for (int r = 0; r < n; ++r) {
    const float* g = dy + static_cast<std::size_t>(r) * out;
    for (int c = 0; c < out; ++c) db[c] += g[c];
  }
}
}  // namespace

void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                            bool accumulate) {
  sgemm(true, false, out, in, n, 1.0f, dy, out, x, in, accumulate ? 1.0f : 0.0f,
              dw, in);
  if (!db) return;  // a layer without bias
  if (!accumulate) std::fill(db, db + out, 0.0f);
  add_column_sums(dy, db, n, out);
}

void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out) {
  sgemm(false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

MPIDDP_VECTOR_CLONES
void scale(float* data, std::size_t count, float factor) {
  for (std::size_t i = 0; i < count; ++i) data[i] *= factor;
}

#ifdef MPIDDP_HAVE_OPENBLAS_THREADS
void set_blas_threads(int threads) {
  openblas_set_num_threads(std::max(1, threads));
  onednn::set_threads(threads);
}
#else
void set_blas_threads(int threads) {  // this BLAS reads its thread count from the environment
  onednn::set_threads(threads);
}
#endif

}  // namespace mpiddp::cpu
