#include "mpiddp/device/cpu_gemm.hpp"

#include <cblas.h>

#include "device/onednn_gemm.hpp"
#include "mpiddp/common/error.hpp"

namespace mpiddp::cpu {
namespace {

// What auto means: oneDNN where this build links it.
CpuKernels automatic_library() { return onednn::linked() ? CpuKernels::onednn : CpuKernels::openblas; }

// auto's library unless train.cpu_kernels says otherwise (Session sets it before
// any product runs); read by every sgemm.
CpuKernels active = automatic_library();
// A layer's own library while its passes run (LibraryScope); automatic: none.
thread_local CpuKernels scoped = CpuKernels::automatic;

}  // namespace

void use_gemm_library(CpuKernels choice) {
  // own and winograd are a layer's choices (LibraryScope); the process's products run on auto's library.
  if (choice == CpuKernels::automatic || choice == CpuKernels::tune || layer_only_kernels(choice))
    choice = automatic_library();
  if (choice == CpuKernels::onednn && !onednn::linked())
    throw InputError("train.cpu_kernels = onednn, but this mpiddp was built without oneDNN (libdnnl-dev; "
                     "Spack: +onednn); use auto or openblas");
  active = choice;
}

CpuKernels gemm_library() { return active; }

LibraryScope::LibraryScope(CpuKernels choice) : outer_(scoped) {
  if (choice == CpuKernels::onednn || choice == CpuKernels::openblas || layer_only_kernels(choice)) scoped = choice;
}
LibraryScope::~LibraryScope() { scoped = outer_; }

CpuKernels library_in_effect() { return scoped == CpuKernels::automatic ? active : scoped; }
// Under own or winograd, what those kernels do not cover runs on the process's library.
CpuKernels library_for_products() {
  const CpuKernels library = library_in_effect();
  return layer_only_kernels(library) ? active : library;
}
bool own_kernels() { return library_in_effect() == CpuKernels::own; }
bool own_winograd_convolutions() {
  const CpuKernels library = library_in_effect();
  return library == CpuKernels::own_winograd || library == CpuKernels::own_winograd4;
}
// (Only where oneDNN is linked: in a build without it, a winograd scope runs the process's library.)
bool winograd_convolutions() {
  const CpuKernels library = library_in_effect();
  return (library == CpuKernels::winograd || library == CpuKernels::winograd_all) && onednn::linked();
}
bool winograd_weight_gradients() { return winograd_convolutions() && library_in_effect() == CpuKernels::winograd_all; }
bool onednn_convolutions() { return library_for_products() == CpuKernels::onednn || winograd_convolutions(); }
const char* convolution_method(CpuKernels library) {
  if (library == CpuKernels::own) return "own thin-convolution kernels";
  if (library == CpuKernels::winograd) return "onednn winograd primitives (weight gradient direct)";
  if (library == CpuKernels::winograd_all) return "onednn winograd primitives";
  if (library == CpuKernels::own_winograd) return "own winograd F(2x2,3x3)";
  if (library == CpuKernels::own_winograd4) return "own winograd F(4x4,3x3)";
  return library == CpuKernels::onednn ? "onednn primitives" : "im2col+openblas";
}
bool onednn_linked() { return onednn::linked(); }
std::string onednn_version() { return onednn::version(); }

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (library_for_products() == CpuKernels::onednn) {
    onednn::sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace mpiddp::cpu
