#pragma once
// One harness for every `mpiddp bench`: a warm-up, timed repetitions reported as
// min / median / max, and a check of the result against a plain reference
// computation, whose count of wrong values is printed with the times (as
// nccl-tests does): a fast wrong kernel is not a result. Private to cli/.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mpiddp::bench {

struct Times {
  double min_s = 0.0, median_s = 0.0, max_s = 0.0;  // seconds per call
  int repetitions = 0;
};

// Throws InputError unless --seconds is in (0, 3600].
void check_seconds(double seconds);

// Calls `work` `warmup` times, then times single calls until `seconds` have
// passed (at least 3 calls, at most 100000).
Times time_calls(const std::function<void()>& work, double seconds, int warmup = 3);

// Values of `got` that differ from `want` by more than tolerance x (1 + |want|);
// NaN counts as wrong.
std::size_t count_wrong(const float* got, const float* want, std::size_t count, double tolerance);

// Deterministic values in [-1, 1) for inputs and weights.
std::vector<float> random_values(std::size_t count, std::uint64_t seed);

// "NAME: min A ms, median B ms, max C ms over R calls; G GFLOP/s (median); wrong W of N"
// (`flops` per call; 0 leaves out the rate).
void print_line(const std::string& name, const Times& times, double flops, std::size_t wrong, std::size_t checked);

// Throws RuntimeError naming the check when any value was wrong (exit 1).
void require_right(const std::string& what, std::size_t wrong, std::size_t checked);

}  // namespace mpiddp::bench
