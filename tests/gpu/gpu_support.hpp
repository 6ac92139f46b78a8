#pragma once
// What the gpu tests share: the process's one CUDA device, random inputs, device
// copies of host data, and the closeness check for GPU-against-CPU results.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "mpiddp/common/random.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp::test {

inline Device& gpu() {
  static std::unique_ptr<Device> device = make_cuda_device(0);
  return *device;
}

inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  CounterRng rng(seed);
  for (std::size_t i = 0; i < n; ++i) v[i] = (2.0f * rng.uniform(i) - 1.0f) * scale;
  return v;
}

// A device copy of host data, and back.
struct OnGpu {
  explicit OnGpu(const std::vector<float>& host) : count(host.size()) {
    data = static_cast<float*>(gpu().allocate(count * sizeof(float)));
    gpu().copy_to_device(data, host.data(), count * sizeof(float));
  }
  explicit OnGpu(std::size_t n) : OnGpu(std::vector<float>(n, 0.0f)) {}
  OnGpu(const OnGpu&) = delete;
  OnGpu& operator=(const OnGpu&) = delete;
  ~OnGpu() { gpu().release(data); }
  std::vector<float> host() const {
    std::vector<float> v(count);
    gpu().copy_to_host(v.data(), data, count * sizeof(float));
    return v;
  }
  float* data;
  std::size_t count;
};

// True when every |a - b| <= atol + rtol |b| (GPU and CPU libraries round
// differently: cuBLAS sums in another order, CUDA's erff/tanhf differ by ulps).
// NaNs must sit at the same places.
inline bool close(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return false;
      continue;
    }
    if (std::abs(static_cast<double>(a[i]) - b[i]) > atol + rtol * std::abs(static_cast<double>(b[i]))) return false;
  }
  return true;
}

}  // namespace mpiddp::test
