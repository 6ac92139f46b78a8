#pragma once
// The GPU side as the rest of mpiddp sees it. These functions exist in every
// build; without CUDA (MPIDDP_ENABLE_CUDA=OFF) they report that plainly.
#include <memory>
#include <string>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

bool built_with_cuda();
bool built_with_nccl();

// What this process can use. `problem` says why count is 0 (never throws: a
// failing cudaGetDeviceCount means "no GPU", as train.device = auto needs).
struct CudaProbe {
  int count = 0;
  std::string problem;
};
CudaProbe probe_cuda();

// Name and PCI bus id of a visible device, e.g. {"NVIDIA H200", "0000:1b:00.0"}.
struct CudaDeviceInfo {
  std::string name, pci_bus_id;
  double memory_gib = 0.0;
};
CudaDeviceInfo cuda_device_info(int ordinal);

std::unique_ptr<Device> make_cuda_device(int ordinal);

// Measured rate of a large matrix product (m = n = k = size), in TFLOP/s.
double cuda_matmul_tflops(int ordinal, Precision precision, int size, double seconds);

}  // namespace mpiddp
