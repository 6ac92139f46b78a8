#pragma once
// A timeline trace in the Chrome trace event format (Perfetto, chrome://tracing).
// One process-wide tracer, installed only while steps are being traced: every
// hook asks active_tracer(), and when that is null (tracing off, or outside the
// traced window) a span costs one predictable branch: no clock read, no allocation.
// Events go to a vector reserved up front; the file is written once, at the end.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mpiddp {

// Tracks (Chrome "tid"s) of one rank: the host thread, then one per bucket.
constexpr int kTraceMainTrack = 0;
constexpr int kTraceDeviceTrack = 1;  // the GPU's compute stream
constexpr int kTraceBucketTrack = 100;  // bucket b is on track kTraceBucketTrack + b

// Follows the host spans on a device: in a CUDA build (cuda_trace_annotator())
// NVTX ranges for Nsight Systems and CUDA events on the compute stream, which
// flush() turns into the device's own spans on track kTraceDeviceTrack.
class Tracer;
class TraceAnnotator {
 public:
  virtual ~TraceAnnotator() = default;
  virtual void push(const char* name, int index) = 0;
  virtual void pop() = 0;
  virtual void flush(Tracer& tracer) = 0;  // before the file is written
};

class Tracer {
 public:
  // `reserve`: events to preallocate; `clock_sync_us`: this rank's steady-clock
  // reading right after a barrier that all ranks passed together (the merge
  // lines the ranks up on it).
  Tracer(int rank, std::size_t reserve, std::int64_t clock_sync_us);

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  static std::int64_t now_us() { return now_ns() / 1000; }
  // The steady clock in nanoseconds, but strictly increasing from one reading to
  // the next: a span opened or closed after another gets a later time even where
  // the clock is coarse, so spans nest exactly as they were opened and closed
  // (two readings of a microsecond clock can be equal). Only the training thread records.
  std::int64_t tick() {
    last_ns_ = std::max(now_ns(), last_ns_ + 1);
    return last_ns_;
  }
  // A complete event ("X"), times from tick(). `name` must outlive the tracer (a
  // literal); `index` >= 0 is appended to it when written ("forward layer 3").
  // `kind` (a literal or a trace_label, or null): the layer kind a layer's span
  // runs, written as args.kind (scripts/trace-shares sums the time per kind).
  void complete(const char* name, int index, int track, std::int64_t start_ns, std::int64_t end_ns,
                const char* kind = nullptr) {
    events_.push_back({name, index, track, kind, start_ns, end_ns - start_ns});
  }
  // Names a track (a metadata event in the file).
  void name_track(int track, std::string name);
  // Writes the events as a JSON object {"traceEvents": [...], ...} to `path`;
  // `meta` goes into "otherData". Throws RuntimeError when the file cannot be written.
  void write(const std::string& path, const std::vector<std::pair<std::string, std::int64_t>>& meta) const;

  std::size_t size() const { return events_.size(); }
  void set_annotator(TraceAnnotator* annotator) { annotator_ = annotator; }
  TraceAnnotator* annotator() const { return annotator_; }

 private:
  struct Event {
    const char* name;
    int index;
    int track;
    const char* kind;
    std::int64_t ts_ns, dur_ns;
  };
  int rank_;
  std::int64_t clock_sync_us_;
  std::int64_t last_ns_ = 0;
  std::vector<Event> events_;
  std::vector<std::pair<int, std::string>> tracks_;
  TraceAnnotator* annotator_ = nullptr;
};

// A span name made at run time ("forward layers.3.body.0"), kept for the life of
// the process so a span may point at it; call it when a model is built, never
// while a step runs (it takes a lock and may allocate).
const char* trace_label(const std::string& text);

// The tracer that hooks record into; null when nothing is traced.
Tracer* active_tracer();
void set_active_tracer(Tracer* tracer);

// RAII span on the host track: from construction to destruction.
class TraceSpan {
 public:
  explicit TraceSpan(const char* name, int index = -1, const char* kind = nullptr)
      : tracer_(active_tracer()), name_(name), index_(index), kind_(kind) {
    if (!tracer_) return;
    if (TraceAnnotator* a = tracer_->annotator()) a->push(name_, index_);
    start_ns_ = tracer_->tick();
  }
  ~TraceSpan() {
    if (!tracer_) return;
    tracer_->complete(name_, index_, kTraceMainTrack, start_ns_, tracer_->tick(), kind_);
    if (TraceAnnotator* a = tracer_->annotator()) a->pop();
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  const char* name_;
  int index_;
  const char* kind_;
  std::int64_t start_ns_ = 0;
};

}  // namespace mpiddp
