#include "mpiddp/dist/watchdog.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Watchdog& Watchdog::instance() {
  static Watchdog watchdog;
  return watchdog;
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::start(double timeout_s, int rank) {
  if (timeout_s <= 0.0 || running_.exchange(true)) return;
  timeout_s_ = timeout_s;
  rank_ = rank;
  thread_ = std::thread([this] { run(); });
}

void Watchdog::stop() {
  if (!running_.exchange(false)) return;
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  const auto limit_ns = static_cast<std::int64_t>(timeout_s_ * 1e9);
  while (running_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const char* op = operation_.load();
    const std::int64_t since = started_ns_.load();
    if (op && since > 0 && now_ns() - since > limit_ns) {
      std::fprintf(stderr,
                   "mpiddp: error: rank %d: %s at step %lld did not complete within dist.timeout_s = %g s "
                   "(another rank died, hung or is far behind); ending the job\n",
                   rank_, op, static_cast<long long>(step_.load()), timeout_s_);
      std::fflush(stderr);
      // Without MPI_Finalize the launcher sees this rank fail and ends the others.
      ::_exit(kExitRuntimeError);
    }
  }
}

Watchdog::Scope::Scope(const char* operation) {
  Watchdog& w = instance();
  outer_operation_ = w.operation_.load();
  outer_started_ns_ = w.started_ns_.load();
  w.started_ns_.store(0);  // never a new name with the old start time
  w.operation_.store(operation);
  w.started_ns_.store(now_ns());
}

Watchdog::Scope::~Scope() {
  Watchdog& w = instance();
  w.started_ns_.store(0);
  w.operation_.store(outer_operation_);
  w.started_ns_.store(outer_started_ns_);
}

}  // namespace mpiddp
