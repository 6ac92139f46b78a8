#pragma once
// The CUDA device: one compute stream that every layer, loss and optimizer
// kernel is ordered on, a copy stream for input batches (pinned host buffers,
// two slots), cuBLAS for the matrix products, and device-side loss sums read
// back once per step.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "kernels.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/tensor/matrix.hpp"

namespace mpiddp::cuda {

// Device memory that grows on demand (contents are not kept when it grows).
template <class T>
class Scratch {
 public:
  ~Scratch();
  T* get(std::size_t count);  // at least count elements

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

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

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;

  int ordinal() const { return ordinal_; }
  cudaStream_t compute_stream() const { return compute_; }
  // Called about every millisecond while the host waits for the GPU, with the
  // seconds waited so far; may end the job (the NCCL transport checks its
  // communicator here).
  void set_wait_check(std::function<void(double)> check) { wait_check_ = std::move(check); }

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string describe() const override { return description_; }
  void set_precision(Precision p) override;
  Precision precision() const override { return precision_; }

  void* allocate(std::size_t bytes) override;
  void release(void* data) override;
  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  void copy_to_device(void* device, const void* host, std::size_t bytes) override;
  void copy_within(void* to, const void* from, std::size_t bytes) override;
  void synchronize() override;

  StagedBatch stage(const Batch& batch, int slot) override;
  void done_with_stage(int slot) override;

  std::unique_ptr<LayerScratch> make_layer_scratch() override;
  void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                      LayerScratch* scratch) override;
  void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                              bool accumulate, LayerScratch* scratch) override;
  void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                             LayerScratch* scratch) override;

  void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) override;
  void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                           std::size_t n) override;
  void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                       float keep_scale) override;
  void multiply(const float* a, const float* b, float* out, std::size_t n) override;
  void scale(float* data, std::size_t n, float factor) override;

  void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c) override;
  void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) override;
  void check_finite(const float* data, std::size_t n) override;
  LossResult take_loss() override;

  void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                  const ew::SgdCoefficients& k) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const ew::AdamWCoefficients& k) override;
  bool all_finite(const float* data, std::size_t n) override;

 private:
  struct Slot {
    Matrix features;
    Scratch<std::int32_t> labels;
    Scratch<float> targets;
    char* pinned = nullptr;
    std::size_t pinned_bytes = 0;
    cudaEvent_t copied = nullptr, consumed = nullptr;
  };
  // Waits for the compute stream, calling the wait check while it waits.
  void wait_for_compute(const char* what);
  // A GEMM operand: fp32 data of `count` floats, and its bf16 copy when one is ready.
  struct Operand {
    const float* fp32;
    std::size_t count;
    const __nv_bfloat16* bf16 = nullptr;
  };
  // C = op(A) op(B) in cuBLAS's column-major terms, in the device's precision.
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Operand& a, int lda,
            const Operand& b, int ldb, float beta, float* c, int ldc);
  // The layer's bf16 operands in bf16 mode, else null.
  Bf16Operands* bf16_operands(LayerScratch* scratch) const;
  const __nv_bfloat16* convert_into(Bf16Operands::Copy& copy, const float* source, std::size_t count);
  const float* ones(int n);
  void read_scalars(const char* what);

  int ordinal_;
  std::string description_;
  Precision precision_ = Precision::fp32;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Slot slots_[2];
  LossScalars* scalars_ = nullptr;       // device
  LossScalars* host_scalars_ = nullptr;  // pinned
  Scratch<double> row_loss_;
  Scratch<int> row_correct_;
  Scratch<float> ones_;
  int ones_count_ = 0;
  Scratch<__nv_bfloat16> bf16_a_, bf16_b_;
  std::function<void(double)> wait_check_;
};

}  // namespace mpiddp::cuda
