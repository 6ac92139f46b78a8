#include "cuda_scratch.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "check.hpp"
#include "mpiddp/dist/watchdog.hpp"
#include "teardown.hpp"

namespace mpiddp::cuda {

template <class T>
Scratch<T>::~Scratch() {
  free_device(data_);
}

template <class T>
T* Scratch<T>::get(std::size_t count) {
  if (count > capacity_) {
    if (data_) {
      Watchdog::Scope scope("growing a GPU scratch buffer");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (growing a scratch buffer)");
      free_device(data_);
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
template class Scratch<unsigned char>;  // cuDNN workspaces

}  // namespace mpiddp::cuda
