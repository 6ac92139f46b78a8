#pragma once
// Every matrix product of the CPU ops goes through sgemm() here, so one setting
// (train.cpu_kernels) decides which library runs them. Debian's OpenBLAS picks
// its kernels from a CPU table that ends before today's CPUs (sites then set
// OPENBLAS_CORETYPE=Haswell: AVX2 kernels on AVX-512 cores); oneDNN's sgemm
// generates code for the ISA the CPU reports, about twice OpenBLAS's speed there.
// The two libraries round differently: a run is bit-exact for one choice.
#include <string>

#include "mpiddp/config/choices.hpp"

namespace mpiddp::cpu {

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, row-major (cblas's meaning of lda, ldb, ldc).
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);

// The library sgemm() uses in this process, and with it the CPU's convolutions
// (oneDNN's primitives, or im2col + OpenBLAS): auto (and tune, which then picks
// per layer) means onednn where this build has it.
void use_gemm_library(CpuKernels choice);
CpuKernels gemm_library();
// While it lives, this thread's products and convolutions use `choice` (a layer's
// own, from train.cpu_kernels = tune) instead of the process's library;
// automatic changes nothing. Chains of layers hold one around each layer's passes.
class LibraryScope {
 public:
  explicit LibraryScope(CpuKernels choice);
  ~LibraryScope();
  LibraryScope(const LibraryScope&) = delete;
  LibraryScope& operator=(const LibraryScope&) = delete;

 private:
  CpuKernels outer_;
};
// The library in effect here: the innermost scope's, else the process's.
CpuKernels library_in_effect();
// Whether the layer in effect runs mpiddp's own kernels (a LibraryScope of own:
// Conv2d's forward and weight gradient, ops/conv/thin_conv.hpp), or oneDNN's
// Winograd convolutions (a LibraryScope of winograd or winograd_all: Conv2d,
// ops/conv/onednn_conv.hpp), and with winograd_all for the weight gradient too.
bool own_kernels();
// mpiddp's own Winograd convolutions (a LibraryScope of own_winograd or own_winograd4:
// ops/conv/own_winograd.hpp).
bool own_winograd_convolutions();
bool winograd_convolutions();
bool winograd_weight_gradients();
// The library of the products those kernels do not cover: the process's under
// own, winograd, winograd_all, own_winograd or own_winograd4, else the one in effect.
CpuKernels library_for_products();
// Whether the CPU's Conv2d runs oneDNN's own convolutions (ops/conv/onednn_conv.hpp:
// under that library, or winograd), and a library's method's name: "onednn primitives",
// "im2col+openblas", "own thin-convolution kernels", "onednn winograd primitives
// (weight gradient direct)", "onednn winograd primitives" or "own winograd F(2x2,3x3)" / "F(4x4,3x3)".
bool onednn_convolutions();
const char* convolution_method(CpuKernels library);
// Whether this build links oneDNN, and its version ("" when it does not).
bool onednn_linked();
std::string onednn_version();

}  // namespace mpiddp::cpu
