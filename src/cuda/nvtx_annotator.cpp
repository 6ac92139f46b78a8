// NVTX ranges around the traced host spans, so that Nsight Systems shows the
// same phases (step, layers, all-reduce wait, optimizer) over its CUDA rows.
// NVTX 3 is header-only and costs nothing when no profiler is attached.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "mpiddp/device/cuda.hpp"

namespace mpiddp {
namespace {

class NvtxAnnotator : public TraceAnnotator {
 public:
  void push(const char* name, int index) override {
    if (index < 0) {
      nvtxRangePushA(name);
      return;
    }
    char text[96];
    std::snprintf(text, sizeof(text), "%s %d", name, index);
    nvtxRangePushA(text);
  }
  void pop() override { nvtxRangePop(); }
};

}  // namespace

TraceAnnotator* cuda_trace_annotator() {
  static NvtxAnnotator annotator;
  return &annotator;
}

}  // namespace mpiddp
