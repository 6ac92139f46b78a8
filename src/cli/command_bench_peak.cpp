// `mpiddp bench peak`: the FP32 FMA throughput of one core for each vector ISA
// the CPU runs (fma_loops.hpp), the widest first, and its last line the peak
// that scripts/bench.sh measures the trainer against:
//   peak: 230.4 GFLOP/s per core (AVX-512, FP32 FMA)
// Run it on an otherwise idle core: a busy core gives a lower bound.
#include <boost/program_options.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "fma_loops.hpp"

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"

namespace po = boost::program_options;

namespace mpiddp {

namespace {

// Enough steps per call that the clock's cost vanishes.
constexpr long kStepsPerCall = 1L << 20;

// Lanes of the last call that differ from the scalar recurrence (the first lane
// of the first chain and the last of the last; bit for bit: std::fma rounds once,
// as the FMA instructions do).
std::size_t wrong_lanes(const bench::FmaLoop& loop, const std::vector<float>& out, std::size_t& checked) {
  const int last = bench::kFmaChains - 1, lanes = loop.lanes;
  const float first_want = bench::reference_lane(0, 0, kStepsPerCall, loop.fused);
  const float last_want = bench::reference_lane(last, lanes - 1, kStepsPerCall, loop.fused);
  checked = 2;
  return (out.front() != first_want ? 1 : 0) + (out.back() != last_want ? 1 : 0);
}

double flops_per_call(const bench::FmaLoop& loop) {
  return 2.0 * static_cast<double>(kStepsPerCall) * bench::kFmaChains * loop.lanes;  // one FMA = 2
}

}  // namespace

int command_bench_peak(const std::vector<std::string>& args) {
  double seconds = 1.0;
  po::options_description options("mpiddp bench peak");
  options.add_options()("help,h", "show this help")
      ("seconds", po::value(&seconds)->default_value(seconds), "measuring time per ISA");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  bench::check_seconds(seconds);
  std::printf("FP32 FMA throughput of one core, %d independent chains per loop:\n", bench::kFmaChains);
  std::vector<float> out;
  double peak = 0.0;
  std::string peak_isa;
  for (const bench::FmaLoop& loop : bench::fma_loops()) {
    out.assign(static_cast<std::size_t>(bench::kFmaChains) * loop.lanes, 0.0f);
    const bench::Times times = bench::time_calls([&] { loop.run(kStepsPerCall, out.data()); }, seconds, 2);
    std::size_t checked = 0;
    const std::size_t wrong = wrong_lanes(loop, out, checked);
    bench::print_line(std::string(loop.isa) + " (" + std::to_string(loop.lanes) + " floats per vector)", times,
                      flops_per_call(loop), wrong, checked);
    bench::require_right(std::string("bench peak ") + loop.isa, wrong, checked);
    const double rate = flops_per_call(loop) / times.median_s / 1e9;
    if (rate > peak) {
      peak = rate;
      peak_isa = loop.isa;
    }
  }
  std::printf("peak: %.1f GFLOP/s per core (%s, FP32 FMA)\n", peak, peak_isa.c_str());
  return kExitOk;
}

}  // namespace mpiddp
