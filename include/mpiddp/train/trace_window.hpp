#pragma once
// train.trace_steps: the steps whose timeline every rank writes to
// <run.dir>/trace/job-<UTC start>-<pid>-rank-R.json (one set of files per job). The first train.trace_after steps this
// process runs are skipped (first-touch allocations, BLAS and transport set-up would
// dominate them; oneDNN's kernels run slow for their first ~10 ms), then
// train.trace_steps steps are traced and the file is written at once, before the
// next step starts (or at the end of the run).
#include <cstdint>
#include <memory>
#include <string>

#include "mpiddp/common/trace.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/dist/communicator.hpp"

namespace mpiddp {

class TraceWindow {
 public:
  // Collective when tracing is on (a barrier gives the ranks a common instant).
  // On a CUDA `device` the spans are also NVTX ranges and device-side spans.
  // `first_step`: the global step this job starts at (0, or a resume's), which
  // the files record so that scripts/trace-merge orders jobs without a clock.
  TraceWindow(const Config& config, Communicator& comm, std::size_t layers, std::size_t buckets, Device& device,
              std::int64_t first_step);
  ~TraceWindow() { set_active_tracer(nullptr); }
  // Before each step: opens the window, or closes it and writes the file.
  void before_step() {
    if (tracer_) advance();
  }
  // At the end of the run: writes the file if the window is still open.
  void finish();

 private:
  void advance();
  void write();

  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<TraceAnnotator> device_;
  std::string path_;
  std::int64_t steps_ = 0, warmup_ = 0, seen_ = 0, buckets_ = 0, first_step_ = 0;
  bool written_ = false;
};

}  // namespace mpiddp
