#include "cuda_device.hpp"

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "check.hpp"
#include "mpiddp/device/batch.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/dist/watchdog.hpp"
#include "teardown.hpp"

namespace mpiddp::cuda {

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  // cuBLAS is opened before the context exists, as when it was linked (its kernels
  // then load with the context, under eager module loading) and so that a missing
  // one is this one-line error before any GPU work.
  cublas();
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  const CudaDeviceInfo info = cuda_device_info(ordinal);
  description_ = "cuda:" + std::to_string(ordinal) + " (" + info.name + ", PCI " + info.pci_bus_id + ")";
  check(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreate (compute)");
  check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate (copy)");
  check(cublas().cublasCreate(&blas_), "cublasCreate");
  check(cublas().cublasSetStream(blas_, compute_), "cublasSetStream");
  for (Slot& s : slots_) {
    s.features = Matrix(this);
    check(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming), "cudaEventCreate");
  }
  set_precision(Precision::fp32);
  provide_registered(DeviceKind::cuda);
}

CudaDevice::~CudaDevice() {
  // No throwing here: release what exists, ignore errors (the job is ending).
  // On the error path nothing waits for the GPU (teardown.hpp).
  if (unwinding()) return;
  drain(compute_, "waiting for the GPU at the end");
  drain(copy_, "waiting for the batch copies at the end");
  release_families();  // cuDNN's handle lives on compute_: destroy it while that stream exists
  for (Slot& s : slots_) {
    s.features = Matrix();
    free_pinned(s.pinned);
    cudaEventDestroy(s.copied);
    cudaEventDestroy(s.consumed);
  }
  cublas().cublasDestroy(blas_);
  cudaStreamDestroy(copy_);
  cudaStreamDestroy(compute_);
}

void CudaDevice::set_precision(Precision p) {
  precision_ = p;
  // fp32 must not silently use TF32 tensor cores; tf32 asks for them.
  check(cublas().cublasSetMathMode(blas_, p == Precision::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
}

// ---- memory ----

void* CudaDevice::allocate(std::size_t bytes) {
  void* data = nullptr;
  if (bytes) check(cudaMalloc(&data, bytes), "cudaMalloc");
  allocations_.added(data, bytes);
  return data;
}

void CudaDevice::release(void* data) {
  if (!data || unwinding()) return;  // the error path leaves memory to the process's end
  allocations_.removed(data);
  // Kernels or copies in flight may still use it: wait for both streams first
  // (a destructor may call this, so it never throws).
  drain(compute_, "waiting for the GPU before freeing memory");
  drain(copy_, "waiting for the batch copies before freeing memory");
  free_device(data);
}

void CudaDevice::copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (!bytes) return;
  // Into pageable memory cudaMemcpyAsync blocks the host until the copy is done,
  // so the stream's earlier work (which may wait for NCCL) is waited for first,
  // with the health check, and the copy itself under the watchdog.
  wait_for_compute("waiting for the GPU before a copy to the host");
  {
    Watchdog::Scope scope("cudaMemcpy device->host");
    check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, compute_), "cudaMemcpy device->host");
  }
  wait_for_compute("cudaMemcpy device->host");
}

// `host` is usually pageable and often a temporary that dies when the caller
// returns; CUDA does not promise that an asynchronous copy has finished reading
// pageable memory when cudaMemcpyAsync returns, so wait for the copy (the batches,
// the hot path, come through pinned slots instead: stage()).
void CudaDevice::copy_to_device(void* device, const void* host, std::size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, compute_), "cudaMemcpy host->device");
  wait_for_compute("cudaMemcpy host->device");
}

void CudaDevice::copy_within(void* to, const void* from, std::size_t bytes) {
  if (bytes && to != from)
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, compute_), "cudaMemcpy device->device");
}

void CudaDevice::synchronize() { wait_for_compute("cudaStreamSynchronize"); }

void CudaDevice::wait_for(cudaStream_t stream, const char* what) { check(drain(stream, what), what); }

cudaError_t CudaDevice::drain(cudaStream_t stream, const char* what) noexcept {
  // A kernel that never finishes ends the job after dist.timeout_s like a hung
  // collective. With NCCL the wait check owns that timeout, so that it can abort
  // NCCL before ending the job.
  std::optional<Watchdog::Scope> scope;
  if (!wait_check_) scope.emplace(what);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status != cudaErrorNotReady) return status;
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
    free_pinned(s.pinned);
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

}  // namespace mpiddp::cuda
