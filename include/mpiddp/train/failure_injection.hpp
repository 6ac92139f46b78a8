#pragma once
// debug.fail_*: makes one rank fail at one step in the requested way, so the
// tests can check that every kind of failure ends the job cleanly.
#include <cstdint>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/data/dataset.hpp"

namespace mpiddp {

// Does nothing unless this is debug.fail_rank at debug.fail_step. `micro` is
// the step's batches (the "nan" mode poisons the first one).
void inject_failure(const DebugConfig& debug, int rank, std::int64_t step, std::vector<Batch>& micro);

}  // namespace mpiddp
