// The GPU side of a trace: each traced host span is an NVTX range (Nsight
// Systems shows the same phases over its CUDA rows) and a pair of CUDA events
// on the compute stream, so the file also shows when the device itself reached
// the span's start and end. NVTX 3 is header-only and costs nothing when no
// profiler is attached.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_device.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {
namespace {

class CudaTimeline : public TraceAnnotator {
 public:
  explicit CudaTimeline(cudaStream_t stream) : stream_(stream) {}
  ~CudaTimeline() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
    if (reference_) cudaEventDestroy(reference_);
  }

  void push(const char* name, int index) override {
    if (index < 0) {
      nvtxRangePushA(name);
    } else {
      char text[96];
      std::snprintf(text, sizeof(text), "%s %d", name, index);
      nvtxRangePushA(text);
    }
    if (!reference_) start_reference();
    open_.push_back(spans_.size());
    spans_.push_back({name, index, record(), nullptr});
  }

  void pop() override {
    nvtxRangePop();
    if (open_.empty()) return;
    spans_[open_.back()].end = record();
    open_.pop_back();
  }

  // Device times are offsets from a reference event whose host time is known.
  void flush(Tracer& tracer) override {
    if (!reference_ || cudaStreamSynchronize(stream_) != cudaSuccess) return;
    for (const Span& s : spans_) {
      float begin_ms = 0.0f, end_ms = 0.0f;
      if (!s.begin || !s.end || cudaEventElapsedTime(&begin_ms, reference_, s.begin) != cudaSuccess ||
          cudaEventElapsedTime(&end_ms, reference_, s.end) != cudaSuccess)
        continue;
      tracer.complete(s.name, s.index, kTraceDeviceTrack, reference_ns_ + static_cast<std::int64_t>(begin_ms * 1e6),
                      reference_ns_ + static_cast<std::int64_t>(end_ms * 1e6));
    }
    spans_.clear();
    // Every span's events are read: the pool is reused from here, so it holds at
    // most two events per span between flushes (the reference is not in it).
    if (open_.empty()) used_ = 0;
  }

 private:
  struct Span {
    const char* name;
    int index;
    cudaEvent_t begin, end;
  };

  cudaEvent_t record() {
    if (used_ == pool_.size()) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) return nullptr;
      pool_.push_back(e);
    }
    cudaEvent_t e = pool_[used_++];
    return cudaEventRecord(e, stream_) == cudaSuccess ? e : nullptr;
  }

  // Once, at the first span: the device catches up and the host notes the time.
  // The reference event is its own, outside the pool that flush() recycles.
  void start_reference() {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    if (cudaEventRecord(e, stream_) != cudaSuccess || cudaEventSynchronize(e) != cudaSuccess) {
      cudaEventDestroy(e);
      return;
    }
    reference_ = e;
    reference_ns_ = Tracer::now_ns();
  }

  cudaStream_t stream_;
  std::vector<cudaEvent_t> pool_;
  std::size_t used_ = 0;
  std::vector<Span> spans_;
  std::vector<std::size_t> open_;
  cudaEvent_t reference_ = nullptr;
  std::int64_t reference_ns_ = 0;
};

}  // namespace

std::unique_ptr<TraceAnnotator> cuda_trace_annotator(Device& device) {
  if (device.kind() != DeviceKind::cuda) return nullptr;
  return std::make_unique<CudaTimeline>(static_cast<cuda::CudaDevice&>(device).compute_stream());
}

}  // namespace mpiddp
