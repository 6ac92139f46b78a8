#pragma once
// The CPU device: host memory, batches used where they are, and the CPU op
// families (BLAS products, vectorised element-wise loops). Each instance has its
// own state (the loss sums); the emulated GPU derives from it.
#include "mpiddp/device/device.hpp"

namespace mpiddp {

class CpuDevice : public Device {
 public:
  CpuDevice();
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override { return "cpu"; }
  void set_precision(Precision p) override;
  Precision precision() const override { return Precision::fp32; }

  void* allocate(std::size_t bytes) override;
  void release(void* data) override;
  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  void copy_to_device(void* device, const void* host, std::size_t bytes) override;
  void copy_within(void* to, const void* from, std::size_t bytes) override;
  void synchronize() override {}

  StagedBatch stage(const Batch& batch, int slot) override;
  void done_with_stage(int) override {}
};

}  // namespace mpiddp
