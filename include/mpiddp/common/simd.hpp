#pragma once
// Hot element-wise loops are compiled for several instruction sets; the loader
// picks the best one the CPU has (GCC function multi-versioning), so one
// portable binary still uses AVX-512 where it exists.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPIDDP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MPIDDP_VECTOR_CLONES
#endif
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

}  // namespace mpiddp::cpu
