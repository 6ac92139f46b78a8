// What GPUs this process sees, the CUDA device factory, and a matrix-product
// rate measurement for benchmarks.
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "check.hpp"
#include "cuda_device.hpp"
#include "mpiddp/common/random.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {

bool built_with_cuda() { return true; }

void prefer_eager_cuda_module_loading() { setenv("CUDA_MODULE_LOADING", "EAGER", 0); }  // 0: keep a user's choice

CudaProbe probe_cuda() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    return {0, std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status)};
  }
  if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return {0, std::string("no CUDA device visible (CUDA_VISIBLE_DEVICES=") + (visible ? visible : "unset") + ")"};
  }
  return {count, ""};
}

CudaDeviceInfo cuda_device_info(int ordinal) {
  CudaDeviceInfo info;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) {
    info.name = prop.name;
    info.memory_gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  }
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), ordinal) == cudaSuccess) info.pci_bus_id = bus;
  return info;
}

std::unique_ptr<Device> make_cuda_device(int ordinal) { return std::make_unique<cuda::CudaDevice>(ordinal); }

namespace {
// Entries (i, j) of the column-major product C = A B at 64 fixed places, from
// the host operands as the device holds them (bf16: truncated), compared with
// `device_c`. Tolerance: the inputs' rounding (bf16 8 bits, tf32 11) summed
// over `size` terms like a random walk, and the output's own rounding.
std::size_t wrong_entries(const std::vector<float>& host, const std::vector<float>& device_c, int size,
                          Precision precision, std::size_t& checked) {
  const double input_eps = precision == Precision::bf16 ? 0x1p-8 : precision == Precision::tf32 ? 0x1p-11 : 0x1p-23;
  const double output_eps = precision == Precision::bf16 ? 0x1p-8 : 0x1p-23;
  const auto n = static_cast<std::size_t>(size);
  std::size_t wrong = 0;
  checked = 0;
  for (std::size_t s = 0; s < 64; ++s) {
    const std::size_t i = (s * 2654435761u) % n, j = (s * 40503u + 17) % n;
    double want = 0.0, magnitude = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
      const double term = static_cast<double>(host[i + k * n]) * host[k + j * n];
      want += term;
      magnitude += term * term;
    }
    const double tolerance = 4.0 * input_eps * std::sqrt(magnitude) + 2.0 * output_eps * std::fabs(want) + 1e-6;
    const double got = device_c[i + j * n];
    if (!(std::fabs(got - want) <= tolerance)) ++wrong;
    ++checked;
  }
  return wrong;
}
}  // namespace

MatmulResult cuda_matmul(int ordinal, Precision precision, int size, double seconds) {
  using namespace cuda;
  cublas();  // opened before the context, as CudaDevice does
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  const std::size_t count = static_cast<std::size_t>(size) * size;
  const bool bf16 = precision == Precision::bf16;
  const std::size_t element = bf16 ? 2 : 4;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  check(cudaMalloc(&a, count * element), "cudaMalloc");
  check(cudaMalloc(&b, count * element), "cudaMalloc");
  check(cudaMalloc(&c, count * element), "cudaMalloc");
  // Random operands: zeros would let the GPU run cooler and faster than real data.
  {
    std::vector<float> host(count);
    CounterRng rng(42);
    for (std::size_t i = 0; i < count; ++i) host[i] = 2.0f * rng.uniform(i) - 1.0f;
    std::vector<std::uint16_t> half;
    const void* source = host.data();
    if (bf16) {  // bf16 = the upper half of a float
      half.resize(count);
      for (std::size_t i = 0; i < count; ++i) half[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(host[i]) >> 16);
      source = half.data();
    }
    check(cudaMemcpy(a, source, count * element, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(b, source, count * element, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  cublasHandle_t handle = nullptr;
  check(cublas().cublasCreate(&handle), "cublasCreate");
  if (precision == Precision::tf32) check(cublas().cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH), "cublasSetMathMode");
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&](int times) {
    for (int i = 0; i < times; ++i)
      check(cublas().cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &alpha, a, type, size, b, type, size,
                         &beta, c, type, size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  };
  run(3);
  long done = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0.0;
  while (elapsed < seconds) {
    run(10);
    done += 10;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  MatmulResult result;
  result.tflops = 2.0 * size * static_cast<double>(size) * size * static_cast<double>(done) / elapsed / 1e12;
  {
    // The check: the operands as the device holds them, and its product.
    std::vector<float> host(count), product(count);
    CounterRng rng(42);
    for (std::size_t i = 0; i < count; ++i) host[i] = 2.0f * rng.uniform(i) - 1.0f;
    if (bf16) {
      std::vector<std::uint16_t> half(count);
      check(cudaMemcpy(half.data(), c, count * element, cudaMemcpyDeviceToHost), "cudaMemcpy");
      for (std::size_t i = 0; i < count; ++i) {
        host[i] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(host[i]) & 0xFFFF0000u);
        product[i] = std::bit_cast<float>(static_cast<std::uint32_t>(half[i]) << 16);
      }
    } else {
      check(cudaMemcpy(product.data(), c, count * element, cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
    result.wrong = wrong_entries(host, product, size, precision, result.checked);
  }
  cublas().cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return result;
}

}  // namespace mpiddp
