#pragma once
// Register-blocked FP32 FMA loops, one per vector ISA, for `mpiddp bench peak`:
// the arithmetic bound a core can reach, against which the trainer's
// throughput is measured. Each loop keeps kFmaChains independent
// accumulators (more than the FMA latency x pipes of current cores, so the
// units never wait on a result, and few enough to stay in registers) and
// nothing but FMAs in its body. Private to cli/.
#include <vector>

namespace mpiddp::bench {

constexpr int kFmaChains = 12;

// Every accumulator lane runs x <- x * scale + kFmaShift from fma_start(chain,
// lane), where scale = 1 reaches the loop through fma_scale(), which the compiler
// cannot see through (a known 1 would turn the FMAs into additions). Each step
// moves x by kFmaShift, so the value after N steps tells N: the caller recomputes
// lanes with scalar arithmetic and wants the same bits, and a loop that was cut
// short, skipped or miscompiled cannot pass.
constexpr float kFmaShift = 1.0f / 65536;
float fma_scale();
float fma_start(int chain, int lane);

struct FmaLoop {
  const char* isa;  // "AVX-512", "AVX2+FMA", "portable"
  int lanes;        // floats per vector
  bool fused;       // one rounding per step (FMA), or two (a multiply, then an add)
  // Runs `iterations` steps on every chain; writes kFmaChains x lanes final values to `out`.
  void (*run)(long iterations, float* out);
};

// The loops this CPU can run, the widest ISA first (x86_fma_loops.cpp on x86-64,
// no_x86_fma_loops.cpp elsewhere: the portable loop only).
std::vector<FmaLoop> fma_loops();

// Plain C++ on arrays, vectorised as the compiler's baseline ISA allows; a
// multiply and an add (ISO C++ does not fuse them; still 2 floating-point operations).
void portable_fma_loop(long iterations, float* out);
constexpr int kPortableLanes = 4;

// Lane (chain, lane) after `iterations` steps, one scalar step at a time.
float reference_lane(int chain, int lane, long iterations, bool fused);

}  // namespace mpiddp::bench
