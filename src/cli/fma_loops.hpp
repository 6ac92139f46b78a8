#pragma once
// Register-blocked FP32 FMA loops, one per vector ISA, for `mpiddp bench peak`:
// the arithmetic bound a core can reach, against which the trainer's
// throughput is measured. Each loop keeps kFmaChains independent
// accumulators (more than the FMA latency x pipes of current cores, so the
// units never wait on a result) and nothing but FMAs in its body. Private to cli/.
#include <vector>

namespace mpiddp::bench {

constexpr int kFmaChains = 12;

// Every accumulator lane runs x <- x * kFmaScale + (1 - kFmaScale) from its own
// start: after enough iterations every lane is 1 (the fixed point), which the
// caller checks, so a loop that was skipped or miscompiled cannot pass.
constexpr float kFmaScale = 0.999f;

struct FmaLoop {
  const char* isa;  // "AVX-512", "AVX2+FMA", "portable"
  int lanes;        // floats per vector
  // Runs `iterations` steps on every chain; writes kFmaChains x lanes final values to `out`.
  void (*run)(long iterations, float* out);
};

// The loops this CPU can run, the widest ISA first (x86_fma_loops.cpp on x86-64,
// no_x86_fma_loops.cpp elsewhere: the portable loop only).
std::vector<FmaLoop> fma_loops();

// Plain C++ on arrays, vectorised as the compiler's baseline ISA allows; a
// multiply and an add where that ISA has no FMA (still 2 floating-point operations).
void portable_fma_loop(long iterations, float* out);
constexpr int kPortableLanes = 8;

}  // namespace mpiddp::bench
