#pragma once
// The CUDA device: one compute stream that every layer, loss and optimizer
// kernel is ordered on, a copy stream for input batches (pinned host buffers,
// two slots), and the cuBLAS handle. The math is in the CUDA op families
// (src/ops/<family>/cuda_*.cpp), which run on this device's compute stream.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "mpiddp/device/allocation_tracker.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/device/matrix.hpp"
#include "cuda_scratch.hpp"

namespace mpiddp::cuda {

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;

  int ordinal() const { return ordinal_; }
  cudaStream_t compute_stream() const { return compute_; }
  cublasHandle_t blas() const { return blas_; }
  // Called about every millisecond while the host waits for the GPU, with the
  // seconds waited so far; may end the job (the NCCL transport checks its
  // communicator here).
  void set_wait_check(std::function<void(double)> check) { wait_check_ = std::move(check); }
  // Waits for the compute stream (or another of this device's streams), calling
  // the wait check while it waits; throws on a CUDA error.
  void wait_for_compute(const char* what) { wait_for(compute_, what); }
  void wait_for(cudaStream_t stream, const char* what);
  // The same wait for teardown: never throws, returns the stream's final status.
  cudaError_t drain(cudaStream_t stream, const char* what) noexcept;

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string describe() const override { return description_; }
  void set_precision(Precision p) override;
  Precision precision() const override { return precision_; }

  void* allocate(std::size_t bytes) override;
  void release(void* data) override;
  std::uint64_t peak_allocated_bytes() const override { return allocations_.peak(); }
  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  void copy_to_device(void* device, const void* host, std::size_t bytes) override;
  void copy_within(void* to, const void* from, std::size_t bytes) override;
  void synchronize() override;

  StagedBatch stage(const Batch& batch, int slot) override;
  void done_with_stage(int slot) override;

 private:
  AllocationTracker allocations_;
  struct Slot {
    Matrix features;
    Scratch<std::int32_t> labels;
    Scratch<float> targets;
    char* pinned = nullptr;
    std::size_t pinned_bytes = 0;
    cudaEvent_t copied = nullptr, consumed = nullptr;
  };

  int ordinal_;
  std::string description_;
  Precision precision_ = Precision::fp32;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Slot slots_[2];
  std::function<void(double)> wait_check_;
};

// The CUDA device an op family's maker was given (op_registry.hpp: CUDA makers
// are only ever called by a CudaDevice).
inline CudaDevice& as_cuda(Device& device) { return static_cast<CudaDevice&>(device); }

}  // namespace mpiddp::cuda
