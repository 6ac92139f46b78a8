#pragma once
// Hot element-wise loops are compiled for several instruction sets; the loader
// picks the best one the CPU has (GCC function multi-versioning), so one
// portable binary still uses AVX-512 where it exists.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPIDDP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MPIDDP_VECTOR_CLONES
#endif
