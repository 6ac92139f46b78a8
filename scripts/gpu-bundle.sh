#!/usr/bin/env bash
# Packs what a GPU machine without Debian's MPI/HDF5/Boost stack needs to run
# scripts/gpu-check.sh: the CUDA build's binaries (mpiddp, gpu_tests, mpi_tests),
# every non-CUDA shared library they load, Open MPI's runtime (mpirun, orted,
# components, PMIx) and the Fashion-MNIST files. CUDA itself (cudart, cuBLAS,
# NCCL) is expected on that machine. Output: gpu-bundle.tar.xz (ignored by git).
#   usage: scripts/gpu-bundle.sh [BUILD_DIR]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
"$build/mpiddp" inspect devices | grep -q "CUDA yes" || { echo "gpu-bundle: $build has no CUDA build" >&2; exit 2; }
out=gpu-bundle
rm -rf "$out" gpu-bundle.tar.xz
mkdir -p "$out/bin" "$out/lib" "$out/data" "$out/ompi"
cp "$build/mpiddp" "$build/tests/gpu_tests" "$build/tests/mpi_tests" "$out/bin/"
# Shared libraries, except the C runtime and CUDA's own (those come with the driver/toolkit there).
for binary in "$out"/bin/* /usr/bin/orterun /usr/bin/orted /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so \
              /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so|/usr/local/cuda|libcuda\.so|libcudart|libcublas|libnccl' \
  | while read -r lib; do cp -L "$lib" "$out/lib/"; done
# Open MPI with its Debian layout under a relocatable prefix (OPAL_PREFIX).
mkdir -p "$out/ompi/bin" "$out/ompi/lib/x86_64-linux-gnu" "$out/ompi/share"
cp /usr/bin/orterun /usr/bin/orted "$out/ompi/bin/"
ln -sf orterun "$out/ompi/bin/mpirun"
cp -a /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 "$out/ompi/lib/x86_64-linux-gnu/"
cp -a /usr/share/openmpi "$out/ompi/share/"
[ -d /usr/share/pmix ] && cp -a /usr/share/pmix "$out/ompi/share/"
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$out/data/"
tar -cJf gpu-bundle.tar.xz "$out"
rm -rf "$out"
ls -la gpu-bundle.tar.xz
