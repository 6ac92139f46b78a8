#include "mpiddp/common/trace.hpp"

#include <mutex>
#include <set>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"
#include "mpiddp/common/json.hpp"

namespace mpiddp {
namespace {
Tracer* g_active = nullptr;  // the training thread is the only one that records
}  // namespace

const char* trace_label(const std::string& text) {
  static std::mutex lock;
  static std::set<std::string> labels;  // a node never moves: its c_str() stays valid
  std::lock_guard<std::mutex> hold(lock);
  return labels.insert(text).first->c_str();
}

Tracer* active_tracer() { return g_active; }
void set_active_tracer(Tracer* tracer) { g_active = tracer; }

Tracer::Tracer(int rank, std::size_t reserve, std::int64_t clock_sync_us)
    : rank_(rank), clock_sync_us_(clock_sync_us) {
  events_.reserve(reserve);
}

void Tracer::name_track(int track, std::string name) { tracks_.emplace_back(track, std::move(name)); }

void Tracer::write(const std::string& path, const std::vector<std::pair<std::string, std::int64_t>>& meta) const {
  Json events = Json::array();
  const auto metadata = [&](const char* what, int track, const std::string& name) {
    Json m;
    m["name"] = what;
    m["ph"] = "M";
    m["pid"] = rank_;
    m["tid"] = track;
    m["args"]["name"] = name;
    events.push_back(std::move(m));
  };
  metadata("process_name", 0, "rank " + std::to_string(rank_));
  for (const auto& t : tracks_) metadata("thread_name", t.first, t.second);
  for (const Event& e : events_) {
    Json j;
    j["name"] = e.index >= 0 ? std::string(e.name) + " " + std::to_string(e.index) : std::string(e.name);
    j["ph"] = "X";
    j["pid"] = rank_;
    j["tid"] = e.track;
    // Microseconds with a fractional part (the format allows it): exact to the nanosecond.
    j["ts"] = static_cast<double>(e.ts_ns) / 1000.0;
    j["dur"] = static_cast<double>(e.dur_ns) / 1000.0;
    if (e.kind) j["args"]["kind"] = e.kind;
    events.push_back(std::move(j));
  }
  Json file;
  file["traceEvents"] = std::move(events);
  file["displayTimeUnit"] = "ms";
  Json other;
  other["rank"] = rank_;
  other["clock"] = "steady_clock microseconds (fractional: nanoseconds)";
  other["clock_sync_us"] = clock_sync_us_;
  for (const auto& m : meta) other[m.first] = m.second;
  file["otherData"] = std::move(other);
  // A new file, never written through a link left at its (guessable) name.
  write_file_atomically(path, json_line(file) + "\n", /*durable=*/false);
}

}  // namespace mpiddp
