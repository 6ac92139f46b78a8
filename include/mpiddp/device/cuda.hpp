#pragma once
// The GPU side as the rest of mpiddp sees it. These functions exist in every
// build; without CUDA (MPIDDP_ENABLE_CUDA=OFF) they report that plainly.
#include <memory>
#include <string>

#include "mpiddp/common/trace.hpp"
#include "mpiddp/device/device.hpp"

namespace mpiddp {

bool built_with_cuda();
bool built_with_nccl();

// A CUDA library opened at run time: whether this build can use it, and whether
// this process found it.
struct GpuLibraryInfo {
  bool built = false;    // the build found it at configure time
  bool loaded = false;   // this process opened a usable one
  std::string version;   // "9.19.0" when loaded
  std::string library;   // the file it opened
  std::string problem;   // why not, when !loaded
};
// cuDNN (the GPU's convolutions), opened the first time this is asked (a GPU
// model with a conv2d layer, or `inspect devices`), so a build with cuDNN still
// runs everything else where cuDNN is missing.
const GpuLibraryInfo& cudnn_info();
// cuBLAS (the GPU's matrix products), opened the first time this is asked (a GPU
// device, `bench matmul`, `inspect devices`): linked, it made every process start
// about 0.35 s slower (cuBLASLt's start-up code touches ~26 000 pages), GPU or not.
const GpuLibraryInfo& cublas_info();

// Call first thing in main, before MPI or CUDA start: sets CUDA_MODULE_LOADING=EAGER
// unless the environment already names a mode. With CUDA's default lazy loading
// the first launch of each kernel loads its module, which can wait for the
// device while an NCCL kernel spins waiting for a peer that is itself loading a
// module; loading everything when the context is created (a second or so, once)
// removes that wait. A no-op in a build without CUDA.
void prefer_eager_cuda_module_loading();

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

// NVTX ranges and device-side spans from CUDA events around the traced spans
// (train.trace_steps); null unless `device` is a CUDA device.
std::unique_ptr<TraceAnnotator> cuda_trace_annotator(Device& device);

// Measured rate of a large matrix product (m = n = k = size), in TFLOP/s, and
// its check: `checked` entries of the product (a fixed sample) recomputed on the
// host from the same operands, `wrong` of them outside the precision's tolerance.
struct MatmulResult {
  double tflops = 0.0;
  std::size_t wrong = 0, checked = 0;
};
MatmulResult cuda_matmul(int ordinal, Precision precision, int size, double seconds);

}  // namespace mpiddp
