#include "cuda_device.hpp"

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "check.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/dist/watchdog.hpp"

namespace mpiddp::cuda {

template <class T>
Scratch<T>::~Scratch() {
  if (data_) cudaFree(data_);
}

template <class T>
T* Scratch<T>::get(std::size_t count) {
  if (count > capacity_) {
    if (data_) {
      Watchdog::Scope scope("growing a GPU scratch buffer");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (growing a scratch buffer)");
      cudaFree(data_);
      data_ = nullptr;
    }
    check(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc (scratch)");
    capacity_ = count;
  }
  return data_;
}

template class Scratch<float>;
template class Scratch<double>;
template class Scratch<int>;
template class Scratch<__nv_bfloat16>;

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  const CudaDeviceInfo info = cuda_device_info(ordinal);
  description_ = "cuda:" + std::to_string(ordinal) + " (" + info.name + ", PCI " + info.pci_bus_id + ")";
  check(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreate (compute)");
  check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate (copy)");
  check(cublasCreate(&blas_), "cublasCreate");
  check(cublasSetStream(blas_, compute_), "cublasSetStream");
  for (Slot& s : slots_) {
    s.features = Matrix(this);
    check(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming), "cudaEventCreate");
  }
  check(cudaMalloc(reinterpret_cast<void**>(&scalars_), sizeof(LossScalars)), "cudaMalloc (loss sums)");
  // On the compute stream: the loss kernels (also on it) must see the zeros.
  check(cudaMemsetAsync(scalars_, 0, sizeof(LossScalars), compute_), "cudaMemset (loss sums)");
  check(cudaMallocHost(reinterpret_cast<void**>(&host_scalars_), sizeof(LossScalars)), "cudaMallocHost");
  set_precision(Precision::fp32);
}

CudaDevice::~CudaDevice() {
  // No throwing here: release what exists, ignore errors (the job is ending).
  cudaStreamSynchronize(compute_);
  cudaStreamSynchronize(copy_);
  for (Slot& s : slots_) {
    s.features = Matrix();
    if (s.pinned) cudaFreeHost(s.pinned);
    cudaEventDestroy(s.copied);
    cudaEventDestroy(s.consumed);
  }
  cudaFree(scalars_);
  cudaFreeHost(host_scalars_);
  cublasDestroy(blas_);
  cudaStreamDestroy(copy_);
  cudaStreamDestroy(compute_);
}

void CudaDevice::set_precision(Precision p) {
  precision_ = p;
  // fp32 must not silently use TF32 tensor cores; tf32 asks for them.
  check(cublasSetMathMode(blas_, p == Precision::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
}

// ---- memory ----

void* CudaDevice::allocate(std::size_t bytes) {
  void* data = nullptr;
  if (bytes) check(cudaMalloc(&data, bytes), "cudaMalloc");
  return data;
}

void CudaDevice::release(void* data) {
  if (!data) return;
  // Kernels or copies in flight may still use it: wait for both streams first.
  cudaStreamSynchronize(compute_);
  cudaStreamSynchronize(copy_);
  cudaFree(data);
}

void CudaDevice::copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, compute_), "cudaMemcpy device->host");
  wait_for_compute("cudaMemcpy device->host");
}

void CudaDevice::copy_to_device(void* device, const void* host, std::size_t bytes) {
  if (bytes) check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, compute_), "cudaMemcpy host->device");
}

void CudaDevice::copy_within(void* to, const void* from, std::size_t bytes) {
  if (bytes && to != from)
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, compute_), "cudaMemcpy device->device");
}

void CudaDevice::synchronize() { wait_for_compute("cudaStreamSynchronize"); }

void CudaDevice::wait_for_compute(const char* what) {
  // A kernel that never finishes ends the job after dist.timeout_s like a hung
  // collective. With NCCL the wait check owns that timeout, so that it can abort
  // NCCL before ending the job.
  std::optional<Watchdog::Scope> scope;
  if (!wait_check_) scope.emplace(what);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t status = cudaStreamQuery(compute_);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check(status, what);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (wait_check_) wait_check_(waited);
    // Spin briefly (steps are short), then poll gently.
    if (waited < 2e-3) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// ---- batches: pinned host slot -> device slot on the copy stream ----

StagedBatch CudaDevice::stage(const Batch& batch, int slot) {
  Slot& s = slots_[slot];
  const std::size_t rows = batch.size(), cols = batch.features.cols();
  const std::size_t feature_bytes = rows * cols * sizeof(float);
  const std::size_t label_bytes = batch.class_ids.size() * sizeof(std::int32_t);
  const std::size_t target_bytes = batch.targets.size() * sizeof(float);
  {
    // The previous copy out of this slot's pinned buffer must be finished.
    Watchdog::Scope scope("waiting for a batch copy to the GPU");
    check(cudaEventSynchronize(s.copied), "cudaEventSynchronize (batch slot)");
  }
  const std::size_t total = feature_bytes + label_bytes + target_bytes;
  if (s.pinned_bytes < total) {
    if (s.pinned) cudaFreeHost(s.pinned);
    s.pinned = nullptr;
    check(cudaMallocHost(reinterpret_cast<void**>(&s.pinned), total), "cudaMallocHost (batch slot)");
    s.pinned_bytes = total;
  }
  std::memcpy(s.pinned, batch.features.data(), feature_bytes);
  if (label_bytes) std::memcpy(s.pinned + feature_bytes, batch.class_ids.data(), label_bytes);
  if (target_bytes) std::memcpy(s.pinned + feature_bytes + label_bytes, batch.targets.data(), target_bytes);

  s.features.resize(rows, cols);
  std::int32_t* labels = label_bytes ? s.labels.get(batch.class_ids.size()) : nullptr;
  float* targets = target_bytes ? s.targets.get(batch.targets.size()) : nullptr;
  // Do not overwrite the device slot while the compute stream still reads it.
  check(cudaStreamWaitEvent(copy_, s.consumed, 0), "cudaStreamWaitEvent (batch slot)");
  check(cudaMemcpyAsync(s.features.data(), s.pinned, feature_bytes, cudaMemcpyHostToDevice, copy_), "copy batch");
  if (labels)
    check(cudaMemcpyAsync(labels, s.pinned + feature_bytes, label_bytes, cudaMemcpyHostToDevice, copy_), "copy labels");
  if (targets)
    check(cudaMemcpyAsync(targets, s.pinned + feature_bytes + label_bytes, target_bytes, cudaMemcpyHostToDevice, copy_),
          "copy targets");
  check(cudaEventRecord(s.copied, copy_), "cudaEventRecord (batch copied)");
  check(cudaStreamWaitEvent(compute_, s.copied, 0), "cudaStreamWaitEvent (batch copied)");

  StagedBatch staged;
  staged.features = &s.features;
  staged.labels = labels;
  staged.targets = targets;
  return staged;
}

void CudaDevice::done_with_stage(int slot) {
  check(cudaEventRecord(slots_[slot].consumed, compute_), "cudaEventRecord (batch consumed)");
}

// ---- matrix products (row-major data seen by column-major cuBLAS as transposed) ----

void CudaDevice::gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Operand& a, int lda,
                      const Operand& b, int ldb, float beta, float* c, int ldc) {
  const float alpha = 1.0f;
  if (precision_ == Precision::bf16) {
    const __nv_bfloat16* a16 = a.bf16;
    const __nv_bfloat16* b16 = b.bf16;
    if (!a16) {
      __nv_bfloat16* converted = bf16_a_.get(a.count);
      to_bf16(a.fp32, converted, a.count, compute_);
      a16 = converted;
    }
    if (!b16) {
      __nv_bfloat16* converted = bf16_b_.get(b.count);
      to_bf16(b.fp32, converted, b.count, compute_);
      b16 = converted;
    }
    check(cublasGemmEx(blas_, ta, tb, m, n, k, &alpha, a16, CUDA_R_16BF, lda, b16, CUDA_R_16BF, ldb, &beta, c,
                       CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (bf16)");
    return;
  }
  check(cublasSgemm(blas_, ta, tb, m, n, k, &alpha, a.fp32, lda, b.fp32, ldb, &beta, c, ldc), "cublasSgemm");
}

std::unique_ptr<LayerScratch> CudaDevice::make_layer_scratch() { return std::make_unique<Bf16Operands>(); }

Bf16Operands* CudaDevice::bf16_operands(LayerScratch* scratch) const {
  return precision_ == Precision::bf16 ? dynamic_cast<Bf16Operands*>(scratch) : nullptr;
}

const __nv_bfloat16* CudaDevice::convert_into(Bf16Operands::Copy& copy, const float* source, std::size_t count) {
  __nv_bfloat16* data = copy.data.get(count);
  to_bf16(source, data, count, compute_);
  copy.source = source;
  copy.count = count;
  return data;
}

namespace {
// The copy made from exactly this source, or null (then gemm converts afresh).
const __nv_bfloat16* reuse(Bf16Operands::Copy& copy, const float* source, std::size_t count) {
  return copy.source == source && copy.count == count ? copy.data.get(count) : nullptr;
}
}  // namespace

const float* CudaDevice::ones(int n) {
  float* data = ones_.get(static_cast<std::size_t>(n));
  if (ones_count_ < n) {
    fill(data, static_cast<std::size_t>(n), 1.0f, compute_);
    ones_count_ = n;
  }
  return data;
}

void CudaDevice::linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                                LayerScratch* scratch) {
  const std::size_t w_count = static_cast<std::size_t>(out) * in, x_count = static_cast<std::size_t>(n) * in;
  Operand wop{w, w_count}, xop{x, x_count};
  if (Bf16Operands* ops = bf16_operands(scratch)) {
    wop.bf16 = convert_into(ops->w, w, w_count);
    xop.bf16 = convert_into(ops->x, x, x_count);
    ops->dy.source = nullptr;  // a new forward: the old dy copy is stale
  }
  // y = bias, then y^T += W x^T (column-major: W^T stored, so op T on it).
  broadcast_rows(b, y, n, out, compute_);
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, wop, in, xop, in, 1.0f, y, out);
}

void CudaDevice::linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                                        bool accumulate, LayerScratch* scratch) {
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
  const float one = 1.0f;
  check(cublasSgemv(blas_, CUBLAS_OP_N, out, n, &one, dy, out, ones(n), 1, &beta, db, 1), "cublasSgemv (bias)");
}

void CudaDevice::linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                                       LayerScratch* scratch) {
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

// ---- element-wise ----

void CudaDevice::activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) {
  cuda::activation_forward(kind, x, y, n, compute_);
}
void CudaDevice::activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                                     std::size_t n) {
  cuda::activation_backward(kind, x, y, dy, dx, n, compute_);
}
void CudaDevice::dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                                 float keep_scale) {
  cuda::dropout_forward(x, y, mask, n, key, p, keep_scale, compute_);
}
void CudaDevice::multiply(const float* a, const float* b, float* out, std::size_t n) {
  cuda::multiply(a, b, out, n, compute_);
}
void CudaDevice::scale(float* data, std::size_t n, float factor) { cuda::scale(data, n, factor, compute_); }

// ---- losses ----

void CudaDevice::softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c) {
  cuda::softmax_cross_entropy(logits, labels, grad, n, c, row_loss_.get(n), row_correct_.get(n), scalars_, compute_);
}

void CudaDevice::mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) {
  cuda::mean_squared_error(y, targets, grad, n, t, row_loss_.get(n), scalars_, compute_);
}

void CudaDevice::read_scalars(const char* what) {
  check(cudaMemcpyAsync(host_scalars_, scalars_, sizeof(LossScalars), cudaMemcpyDeviceToHost, compute_), what);
  wait_for_compute(what);
}

void CudaDevice::check_finite(const float* data, std::size_t n) {
  // take_loss() clears the flag, so it is 0 here unless set by this check.
  find_nonfinite(data, n, scalars_, compute_);
}

LossResult CudaDevice::take_loss() {
  read_scalars("reading the step's loss");
  LossResult r;
  r.loss_sum = host_scalars_->loss_sum;
  r.correct = static_cast<std::int64_t>(host_scalars_->correct);
  r.count = static_cast<std::int64_t>(host_scalars_->count);
  r.finite = host_scalars_->nonfinite == 0;
  check(cudaMemsetAsync(scalars_, 0, sizeof(LossScalars), compute_), "cudaMemset (loss sums)");
  return r;
}

// ---- optimizer and finite check ----

void CudaDevice::sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                            const ew::SgdCoefficients& k) {
  cuda::sgd_update(params, grads, buffer, n, k, compute_);
}

void CudaDevice::adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                              const ew::AdamWCoefficients& k) {
  cuda::adamw_update(params, grads, m, v, n, k, compute_);
}

bool CudaDevice::all_finite(const float* data, std::size_t n) {
  check(cudaMemsetAsync(&scalars_->nonfinite, 0, sizeof(int), compute_), "cudaMemset (finite flag)");
  find_nonfinite(data, n, scalars_, compute_);
  read_scalars("checking gradients for NaN/Inf");
  const bool finite = host_scalars_->nonfinite == 0;
  check(cudaMemsetAsync(&scalars_->nonfinite, 0, sizeof(int), compute_), "cudaMemset (finite flag)");
  return finite;
}

}  // namespace mpiddp::cuda
