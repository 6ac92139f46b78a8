#pragma once
// The GPU side as the rest of mpiddp sees it. These functions exist in every
// build; without CUDA (MPIDDP_ENABLE_CUDA=OFF) they report that plainly.
#include <memory>
#include <string>

#include "mpiddp/ddp/transport.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/dist/communicator.hpp"

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

// NCCL all-reduce of gradient buckets on a dedicated stream of `device` (a CUDA
// device): the unique id goes from rank 0 to all over `control` (MPI_Bcast).
// bf16: buckets travel as bf16 (already divided by the world size). A failure
// reported by NCCL, or a wait longer than timeout_s (> 0), aborts the NCCL
// communicator and the MPI job with a one-line message.
std::unique_ptr<GradientTransport> make_nccl_transport(Communicator& control, Device& device, bool bf16,
                                                       double timeout_s);

// Measured rate of a large matrix product (m = n = k = size), in TFLOP/s.
double cuda_matmul_tflops(int ordinal, Precision precision, int size, double seconds);

}  // namespace mpiddp
