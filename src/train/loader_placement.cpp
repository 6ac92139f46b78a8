#include "mpiddp/train/loader_placement.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace mpiddp {

LoaderPlacementChoice place_loader(LoaderPlacement setting, bool gpu, int compute_threads, int usable_cpus) {
  if (setting == LoaderPlacement::thread) return {true, "on a loader thread (data.loader = thread)"};
  if (setting == LoaderPlacement::inline_reads) return {false, "inline, in the training thread (data.loader = inline)"};
  if (gpu) return {true, "on a loader thread (auto: the rank trains on a GPU)"};
  const std::string cpus = std::to_string(usable_cpus) + " CPU(s) for " + std::to_string(compute_threads) +
                           " BLAS thread(s) per rank";
  if (usable_cpus > compute_threads) return {true, "on a loader thread (auto: " + cpus + ")"};
  return {false, "inline, in the training thread (auto: " + cpus + ", none to spare for a loader thread)"};
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace mpiddp
