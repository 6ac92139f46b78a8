#pragma once
// Hot element-wise loops are compiled for several instruction sets; the loader
// picks the best one the CPU has (GCC function multi-versioning), so one
// portable binary still uses AVX-512 where it exists.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPIDDP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MPIDDP_VECTOR_CLONES
#endif
#include <cstddef>
#include <cstdint>

namespace mpiddp::cpu {

// Eight float (or int32) lanes as one value, for loops whose lane order fixes the
// results: lane j of a partial sum takes elements j, j + 8, ..., in order.
// GCC's vectoriser turns the scalar form (float s[8]) into permutes and stack
// spills and stops at a conditional per lane; this form it keeps in registers.
// Load and store with memcpy in place: a function that took or returned one by
// value would change its ABI between the instruction sets the clones are built for.
typedef float Lanes8 __attribute__((vector_size(8 * sizeof(float))));
typedef std::int32_t IntLanes8 __attribute__((vector_size(8 * sizeof(std::int32_t))));
// Sixteen float lanes: one AVX-512 vector, one 64-byte cache line (two AVX2 vectors).
constexpr std::size_t kLineFloats = 16;
typedef float Lanes16 __attribute__((vector_size(kLineFloats * sizeof(float))));

// Loops that stream an activation larger than the L2 cache (BatchNorm's passes,
// residual adds, activations) waited on their loads even in memory order: on the
// virtual machines measured, the hardware prefetchers alone kept them at a third
// of the bandwidth a plain read gets. These loops ask for the line this far
// ahead themselves (4 KiB: a few hundred cycles of their work). A prefetch never
// faults, so it may point past the end of the data; the address is made as an
// integer, not by pointer arithmetic outside the object.
constexpr std::size_t kPrefetchBytes = 4096;
__attribute__((always_inline)) inline void prefetch_ahead(const float* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + kPrefetchBytes));
}

}  // namespace mpiddp::cpu
