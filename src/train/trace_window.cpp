#include "mpiddp/train/trace_window.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "mpiddp/common/error.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/train/memory_budget.hpp"

namespace mpiddp {

namespace {
// This job's name for its trace files, the same on every rank (rank 0's UTC
// start time, to the second, and its pid): a resumed job writes beside the
// first job's traces instead of over them, and scripts/trace-merge merges one
// job at a time (the newest by the job_first_step the files record, not by the
// clock in the name).
std::string job_tag(Communicator& comm) {
  char tag[64] = {0};
  if (comm.rank() == 0) {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char when[32] = {0};
    std::strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &utc);
    std::snprintf(tag, sizeof(tag), "job-%s-%ld", when, static_cast<long>(getpid()));
  }
  comm.broadcast(tag, sizeof(tag), 0);
  tag[sizeof(tag) - 1] = '\0';
  return tag;
}
}  // namespace

TraceWindow::TraceWindow(const Config& config, Communicator& comm, std::size_t layers, std::size_t buckets,
                         Device& device, std::int64_t first_step)
    : steps_(config.train.trace_steps),
      warmup_(config.train.trace_after),
      buckets_(static_cast<std::int64_t>(buckets)),
      first_step_(first_step) {
  if (steps_ <= 0) return;
  // The common clock: every rank reads its steady clock right after the same
  // barrier; scripts/trace-merge subtracts each rank's reading (skew = the
  // barrier's exit spread, microseconds on one node).
  comm.barrier();
  const std::int64_t sync_us = Tracer::now_us();
  const int rank = comm.rank();
  // Room for every event of the window, so recording never allocates.
  // (The memory budget counted the same number before anything was allocated.)
  const double events = trace_window_events(config, static_cast<double>(layers), static_cast<double>(buckets));
  tracer_ = std::make_unique<Tracer>(rank, static_cast<std::size_t>(events), sync_us);
  device_ = cuda_trace_annotator(device);
  tracer_->set_annotator(device_.get());
  tracer_->name_track(kTraceMainTrack, "host");
  if (device_) tracer_->name_track(kTraceDeviceTrack, "device (compute stream)");
  for (std::size_t b = 0; b < buckets; ++b)
    tracer_->name_track(kTraceBucketTrack + static_cast<int>(b), "allreduce bucket " + std::to_string(b));
  path_ = (std::filesystem::path(config.run.dir) / "trace" / (job_tag(comm) + "-rank-" + std::to_string(rank) + ".json"))
              .string();
}

void TraceWindow::advance() {
  if (seen_ == warmup_) set_active_tracer(tracer_.get());
  if (seen_ == warmup_ + steps_) write();
  ++seen_;
}

void TraceWindow::finish() {
  if (tracer_) write();
}

void TraceWindow::write() {
  set_active_tracer(nullptr);
  if (written_) return;
  written_ = true;
  // A trace that cannot be written is worth a warning, not the run.
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    const std::int64_t traced = std::max<std::int64_t>(0, std::min(steps_, seen_ - warmup_));
    if (device_) device_->flush(*tracer_);
    tracer_->write(path_, {{"warmup_steps", warmup_},
                           {"traced_steps", traced},
                           {"buckets", buckets_},
                           {"job_first_step", first_step_}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpiddp: warning: %s\n", e.what());
  }
}

}  // namespace mpiddp
