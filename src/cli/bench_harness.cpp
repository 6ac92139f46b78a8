#include "bench_harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/random.hpp"

namespace mpiddp::bench {

void check_seconds(double seconds) {
  if (!(seconds > 0.0 && seconds <= 3600.0))
    throw InputError("--seconds must be in (0, 3600], got " + std::to_string(seconds));
}

Times time_calls(const std::function<void()>& work, double seconds, int warmup) {
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> calls;
  double total = 0.0;
  while ((total < seconds || calls.size() < 3) && calls.size() < 100000) {
    const auto start = std::chrono::steady_clock::now();
    work();
    calls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    total += calls.back();
  }
  std::sort(calls.begin(), calls.end());
  Times t;
  t.repetitions = static_cast<int>(calls.size());
  t.min_s = calls.front();
  t.max_s = calls.back();
  const std::size_t mid = calls.size() / 2;
  t.median_s = calls.size() % 2 ? calls[mid] : 0.5 * (calls[mid - 1] + calls[mid]);
  return t;
}

std::size_t count_wrong(const float* got, const float* want, std::size_t count, double tolerance) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double a = got[i], b = want[i];
    if (!(std::fabs(a - b) <= tolerance * (1.0 + std::fabs(b)))) ++wrong;
  }
  return wrong;
}

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  CounterRng rng(seed);
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = 2.0f * rng.uniform(i) - 1.0f;
  return v;
}

void print_line(const std::string& name, const Times& t, double flops, std::size_t wrong, std::size_t checked) {
  std::printf("%s: min %.3f ms, median %.3f ms, max %.3f ms over %d calls", name.c_str(), t.min_s * 1e3,
              t.median_s * 1e3, t.max_s * 1e3, t.repetitions);
  if (flops > 0.0) std::printf("; %.1f GFLOP/s (median)", flops / t.median_s / 1e9);
  std::printf("; wrong %zu of %zu\n", wrong, checked);
}

void require_right(const std::string& what, std::size_t wrong, std::size_t checked) {
  if (wrong != 0)
    throw RuntimeError(what + ": " + std::to_string(wrong) + " of " + std::to_string(checked) +
                       " values differ from the reference computation");
}

}  // namespace mpiddp::bench
