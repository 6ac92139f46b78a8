// Attention on the GPU: per sample, cuBLAS strided-batched products over the
// heads (strided views of qkv, no copies), and the causal softmax kernels of
// attention_kernels.cu, all on the device's compute stream. Data stays fp32;
// the products use TF32 tensor cores when the run's precision is tf32 or bf16
// (fp32 runs keep full fp32 products). tf32 runs got them from the handle's math
// mode already; bf16 runs did not, and their plain fp32 products took over a
// third of a GPT-2 step on an H200.
#include <cmath>

#include "attention_kernels.hpp"
#include "attention_ops.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_device.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cuda {
namespace {

// One row-major operand of a batched product: data, leading dimension, stride between heads.
struct View {
  const float* data;
  int ld;
  long long stride;
};

class CudaAttentionOps final : public AttentionOps {
 public:
  explicit CudaAttentionOps(CudaDevice& device) : device_(device) {}

  void probabilities(const float* qkv, float* probs, const AttentionGeometry& g) override {
    const int t = g.positions, d = g.width(), hd = g.head_dim, ld = 3 * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const long long tt = static_cast<long long>(t) * t;
    for (int s = 0; s < g.samples; ++s) {
      const float* base = qkv + static_cast<std::size_t>(s) * t * ld;
      float* p = probs + static_cast<std::size_t>(s) * g.heads * tt;
      gemm(false, true, t, t, hd, scale, {base, ld, hd}, {base + d, ld, hd}, 0.0f, p, t, tt, g.heads);
    }
    causal_softmax(probs, g.samples * g.heads * t, t, stream());
  }

  void weighted_sum(const float* weights, const float* qkv, float* y, const AttentionGeometry& g) override {
    const int t = g.positions, d = g.width(), hd = g.head_dim, ld = 3 * d;
    const long long tt = static_cast<long long>(t) * t;
    for (int s = 0; s < g.samples; ++s) {
      const float* base = qkv + static_cast<std::size_t>(s) * t * ld;
      const float* w = weights + static_cast<std::size_t>(s) * g.heads * tt;
      gemm(false, false, t, hd, t, 1.0f, {w, t, tt}, {base + 2 * d, ld, hd}, 0.0f,
           y + static_cast<std::size_t>(s) * t * d, d, hd, g.heads);
    }
  }

  void weighted_sum_backward(const float* weights, const float* qkv, const float* dy, float* dqkv, float* dweights,
                             const AttentionGeometry& g) override {
    const int t = g.positions, d = g.width(), hd = g.head_dim, ld = 3 * d;
    const long long tt = static_cast<long long>(t) * t;
    for (int s = 0; s < g.samples; ++s) {
      const float* base = qkv + static_cast<std::size_t>(s) * t * ld;
      const float* w = weights + static_cast<std::size_t>(s) * g.heads * tt;
      const float* go = dy + static_cast<std::size_t>(s) * t * d;
      float* dbase = dqkv + static_cast<std::size_t>(s) * t * ld;
      gemm(true, false, t, hd, t, 1.0f, {w, t, tt}, {go, d, hd}, 0.0f, dbase + 2 * d, ld, hd, g.heads);  // dv
      gemm(false, true, t, t, hd, 1.0f, {go, d, hd}, {base + 2 * d, ld, hd}, 0.0f,
           dweights + static_cast<std::size_t>(s) * g.heads * tt, t, tt, g.heads);  // d weights
    }
  }

  void probabilities_backward(const float* probs, float* dprobs, const float* qkv, float* dqkv,
                              const AttentionGeometry& g) override {
    const int t = g.positions, d = g.width(), hd = g.head_dim, ld = 3 * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const long long tt = static_cast<long long>(t) * t;
    causal_softmax_grad(probs, dprobs, g.samples * g.heads * t, t, stream());
    for (int s = 0; s < g.samples; ++s) {
      const float* base = qkv + static_cast<std::size_t>(s) * t * ld;
      const float* dss = dprobs + static_cast<std::size_t>(s) * g.heads * tt;
      float* dbase = dqkv + static_cast<std::size_t>(s) * t * ld;
      gemm(false, false, t, hd, t, scale, {dss, t, tt}, {base + d, ld, hd}, 0.0f, dbase, ld, hd, g.heads);  // dq
      gemm(true, false, t, hd, t, scale, {dss, t, tt}, {base, ld, hd}, 0.0f, dbase + d, ld, hd, g.heads);  // dk
    }
  }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }

  // Row-major C[m, n] = alpha op(A) op(B) + beta C for `batch` heads: cuBLAS is
  // column-major, so it computes C^T = op(B)^T op(A)^T with the operands swapped.
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, View a, View b, float beta, float* c, int ldc,
            long long stride_c, int batch) {
    const cublasComputeType_t compute =
        device_.precision() == Precision::fp32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    check(cublas().cublasGemmStridedBatchedEx(device_.blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     n, m, k, &alpha, b.data, CUDA_R_32F, b.ld, b.stride, a.data, CUDA_R_32F, a.ld,
                                     a.stride, &beta, c, CUDA_R_32F, ldc, stride_c, batch, compute,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx (attention)");
  }

  CudaDevice& device_;
};

std::unique_ptr<AttentionOps> make_cuda_attention_ops(Device& device) {
  return std::make_unique<CudaAttentionOps>(as_cuda(device));
}
const bool registered = register_ops<AttentionOps>(DeviceKind::cuda, make_cuda_attention_ops);

}  // namespace
}  // namespace mpiddp::cuda
