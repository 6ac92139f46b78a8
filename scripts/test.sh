#!/usr/bin/env bash
# Builds and tests mpiddp as CI does (after scripts/install-deps.sh):
#  1. the default build in build/ (with the GPU path when nvcc and NCCL are found),
#     and its whole test suite; tests that need a GPU report "Skipped" and why;
#  2. when that build has the GPU path, also the CPU-only build in build-cpu/
#     (MPIDDP_ENABLE_CUDA=OFF, and without oneDNN: OpenBLAS runs every product),
#     with its unit, MPI and device-selection tests, so both builds are known to
#     compile and work;
#  3. the sanitizer build in build-asan/ (CPU only, AddressSanitizer, LeakSanitizer
#     and UBSan, see tests/sanitizers/) with its unit and MPI tests (not the unit
#     suite's reruns with oneDNN held to AVX2 and SSE4.1) and the short integration
#     tests; any sanitizer report fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
# Each phase's start with the time since this script began, so a CI log shows
# where its minutes went (printed only: nothing here depends on a clock).
phase() { echo "=== $(date -u +%H:%M:%S) (+${SECONDS} s) $* ==="; }
# Ninja where installed (scripts/install-deps.sh installs it): unlike make, it
# compiles the test programs while the library is still being compiled, so both
# cores stay busy to the end. Only new build directories take it up; one made
# earlier keeps its generator, and CMAKE_GENERATOR set by the caller wins.
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then export CMAKE_GENERATOR=Ninja; fi
# A compiler cache where installed (install-deps.sh installs ccache): the CPU-only
# build compiles every source but the GPU ones exactly as the default build did
# (same command line, see CMakeLists.txt), so it takes those objects from the cache.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
phase "the default build"
cmake -S . -B build "${launcher[@]}"
cmake --build build -j"$jobs"
phase "the default build's tests"
# ctest runs two tests at a time (JOBS): most of a test's time is mpirun and Python
# start-up and ranks waiting on each other, so two overlap well on two cores; the
# tests hold no clocks, and the two Slurm tests run alone (RUN_SERIAL).
(cd build && ctest --output-on-failure -j"$jobs")
if build/mpiddp inspect devices | grep -q "CUDA yes"; then
  phase "the default build has the GPU path: now the CPU-only build"
  cmake -S . -B build-cpu -DMPIDDP_ENABLE_CUDA=OFF -DMPIDDP_ENABLE_ONEDNN=OFF "${launcher[@]}"
  cmake --build build-cpu -j"$jobs"
  (cd build-cpu && ctest --output-on-failure -j"$jobs" -L "unit|mpi" && \
     ctest --output-on-failure -j"$jobs" -R "test_train_small|test_device_selection|test_bench_commands|gpu_training")
fi
phase "the sanitizer build (address,undefined, CPU only)"
cmake -S . -B build-asan -DMPIDDP_ENABLE_CUDA=OFF -DMPIDDP_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${launcher[@]}"
cmake --build build-asan -j"$jobs"
phase "the sanitizer build's tests"
(cd build-asan && ctest --output-on-failure -j"$jobs" -L "unit|mpi" -E "^unit_onednn_" && \
   ctest --output-on-failure -j"$jobs" -R "^(test_train_small|test_bad_inputs)$")
phase "done"
