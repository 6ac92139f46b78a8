#include "mpiddp/train/failure_injection.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/watchdog.hpp"

namespace mpiddp {

void inject_failure(const DebugConfig& debug, int rank, std::int64_t step, std::vector<Batch>& micro) {
  if (debug.fail_mode == FailMode::none || rank != debug.fail_rank || step != debug.fail_step) return;
  const std::string where =
      std::string("debug.fail_mode = ") + name_of(debug.fail_mode) + " at step " + std::to_string(step);
  if (debug.fail_mode == FailMode::throw_error) throw RuntimeError(where);
  if (debug.fail_mode == FailMode::nan) {
    micro.front().features.data()[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (debug.fail_mode == FailMode::signal) {
    std::raise(SIGUSR1);
    return;
  }
  if (debug.fail_mode == FailMode::erred_exit) {
    std::fprintf(stderr, "mpiddp: error: rank %d: %s\n", rank, where.c_str());
    std::fflush(stderr);
    Watchdog::instance().announce_own_error();
    std::_Exit(kExitRuntimeError);
  }
  std::fprintf(stderr, "mpiddp: debug: rank %d: %s\n", rank, where.c_str());
  std::fflush(stderr);
  if (debug.fail_mode == FailMode::exit) std::_Exit(kExitRuntimeError);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hang
}

}  // namespace mpiddp
