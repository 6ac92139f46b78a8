// Dense products on the GPU: cuBLAS on row-major data (seen by column-major
// cuBLAS as transposed), in the device's precision. In bf16 a layer's forward
// keeps the bf16 copies of its input and weights for its backward.
#include <cuda_bf16.h>

#include "cuda/check.hpp"
#include "cuda/cuda_device.hpp"
#include "dense_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "cuda/vector_kernels.hpp"
#include "dense_kernels.hpp"

namespace mpiddp::cuda {
namespace {

// bf16 copies of one Linear layer's operands: its forward converts the input and
// the weights, its backward reuses them (they are what the forward computed
// with) and converts dy once for both products. A copy is used only for the
// same source pointer and size it was made from.
struct Bf16Operands final : LayerScratch {
  struct Copy {
    Scratch<__nv_bfloat16> data;
    const float* source = nullptr;
    std::size_t count = 0;
  };
  Copy x, w, dy;
};

// The copy made from exactly this source, or null (then gemm converts afresh).
const __nv_bfloat16* reuse(Bf16Operands::Copy& copy, const float* source, std::size_t count) {
  return copy.source == source && copy.count == count ? copy.data.get(count) : nullptr;
}

class CudaDenseOps final : public DenseOps {
 public:
  explicit CudaDenseOps(CudaDevice& device) : device_(device) {}

  std::unique_ptr<LayerScratch> make_scratch() override { return std::make_unique<Bf16Operands>(); }

  void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                      LayerScratch* scratch) override {
    const std::size_t w_count = static_cast<std::size_t>(out) * in, x_count = static_cast<std::size_t>(n) * in;
    Operand wop{w, w_count}, xop{x, x_count};
    if (Bf16Operands* ops = bf16_operands(scratch)) {
      wop.bf16 = convert_into(ops->w, w, w_count);
      xop.bf16 = convert_into(ops->x, x, x_count);
      ops->dy.source = nullptr;  // a new forward: the old dy copy is stale
    }
    // y = bias (if any), then y^T += W x^T (column-major: W^T stored, so op T on it).
    if (b) broadcast_rows(b, y, n, out, stream());
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, wop, in, xop, in, b ? 1.0f : 0.0f, y, out);
  }

  void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                              bool accumulate, LayerScratch* scratch) override {
    const float beta = accumulate ? 1.0f : 0.0f;
    const std::size_t x_count = static_cast<std::size_t>(n) * in, dy_count = static_cast<std::size_t>(n) * out;
    Operand xop{x, x_count}, dyop{dy, dy_count};
    if (Bf16Operands* ops = bf16_operands(scratch)) {
      xop.bf16 = reuse(ops->x, x, x_count);
      dyop.bf16 = convert_into(ops->dy, dy, dy_count);  // also for linear_backward_input
    }
    // dW^T[in, out] = x^T[in, n] dy[n, out]
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, xop, in, dyop, out, beta, dw, in);
    // db = dy^T ones: a fixed-order reduction (no atomics), like the CPU's column sums.
    if (!db) return;  // a layer without bias
    const float one = 1.0f;
    check(cublas().cublasSgemv(device_.blas(), CUBLAS_OP_N, out, n, &one, dy, out, ones(n), 1, &beta, db, 1),
          "cublasSgemv (bias)");
  }

  void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                             LayerScratch* scratch) override {
    const std::size_t w_count = static_cast<std::size_t>(out) * in, dy_count = static_cast<std::size_t>(n) * out;
    Operand wop{w, w_count}, dyop{dy, dy_count};
    if (Bf16Operands* ops = bf16_operands(scratch)) {
      wop.bf16 = reuse(ops->w, w, w_count);
      dyop.bf16 = reuse(ops->dy, dy, dy_count);
      ops->dy.source = nullptr;  // used up: the next backward converts its own dy
    }
    // dx^T[in, n] = W^T[in, out] dy^T[out, n]
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, wop, in, dyop, out, 0.0f, dx, in);
  }

 private:
  // A GEMM operand: fp32 data of `count` floats, and its bf16 copy when one is ready.
  struct Operand {
    const float* fp32;
    std::size_t count;
    const __nv_bfloat16* bf16 = nullptr;
  };

  cudaStream_t stream() const { return device_.compute_stream(); }

  // C = op(A) op(B) in cuBLAS's column-major terms, in the device's precision.
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Operand& a, int lda,
            const Operand& b, int ldb, float beta, float* c, int ldc) {
    const float alpha = 1.0f;
    if (device_.precision() == Precision::bf16) {
      const __nv_bfloat16* a16 = a.bf16 ? a.bf16 : converted(bf16_a_, a);
      const __nv_bfloat16* b16 = b.bf16 ? b.bf16 : converted(bf16_b_, b);
      check(cublas().cublasGemmEx(device_.blas(), ta, tb, m, n, k, &alpha, a16, CUDA_R_16BF, lda, b16, CUDA_R_16BF, ldb, &beta,
                         c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (bf16)");
      return;
    }
    check(cublas().cublasSgemm(device_.blas(), ta, tb, m, n, k, &alpha, a.fp32, lda, b.fp32, ldb, &beta, c, ldc),
          "cublasSgemm");
  }

  const __nv_bfloat16* converted(Scratch<__nv_bfloat16>& into, const Operand& op) {
    __nv_bfloat16* data = into.get(op.count);
    to_bf16(op.fp32, data, op.count, stream());
    return data;
  }

  // The layer's bf16 operands in bf16 mode, else null.
  Bf16Operands* bf16_operands(LayerScratch* scratch) const {
    return device_.precision() == Precision::bf16 ? dynamic_cast<Bf16Operands*>(scratch) : nullptr;
  }

  const __nv_bfloat16* convert_into(Bf16Operands::Copy& copy, const float* source, std::size_t count) {
    __nv_bfloat16* data = copy.data.get(count);
    to_bf16(source, data, count, stream());
    copy.source = source;
    copy.count = count;
    return data;
  }

  const float* ones(int n) {
    float* data = ones_.get(static_cast<std::size_t>(n));
    if (ones_count_ < n) {
      fill(data, static_cast<std::size_t>(n), 1.0f, stream());
      ones_count_ = n;
    }
    return data;
  }

  CudaDevice& device_;
  Scratch<float> ones_;
  int ones_count_ = 0;
  Scratch<__nv_bfloat16> bf16_a_, bf16_b_;
};

std::unique_ptr<DenseOps> make_cuda_dense_ops(Device& device) { return std::make_unique<CudaDenseOps>(as_cuda(device)); }
const bool registered = register_ops<DenseOps>(DeviceKind::cuda, make_cuda_dense_ops);

}  // namespace

}  // namespace mpiddp::cuda
