#pragma once
// Freeing GPU memory without hanging. cudaFree and cudaFreeHost wait for the
// whole device, so they run under the watchdog (a GPU that never finishes ends
// the job with one line). While an exception unwinds (the error path: a sticky
// CUDA error, or a kernel waiting for a peer that is gone) nothing waits for the
// GPU at all: the memory is left to the end of the process, which is near.
#include <cuda_runtime.h>

#include <exception>

#include "mpiddp/dist/watchdog.hpp"

namespace mpiddp::cuda {

inline bool unwinding() { return std::uncaught_exceptions() > 0; }

inline void free_device(void* data) noexcept {
  if (!data || unwinding()) return;
  Watchdog::Scope scope("cudaFree (waits for the GPU)");
  cudaFree(data);
}

inline void free_pinned(void* data) noexcept {
  if (!data || unwinding()) return;
  Watchdog::Scope scope("cudaFreeHost (waits for the GPU)");
  cudaFreeHost(data);
}

}  // namespace mpiddp::cuda
