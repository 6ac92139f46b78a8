#!/usr/bin/env bash
# Packs what a GPU machine without Debian's MPI/HDF5/Boost stack needs to run
# scripts/gpu-check.sh: the CUDA build's binaries (mpiddp, gpu_tests, mpi_tests),
# every shared library they load except the C library's and CUDA's, Open MPI's
# runtime (mpirun, orted, components, PMIx), the Fashion-MNIST files and the
# Python tools (python/mpiddp_tools, the GPU check's runner among them).
#   usage: scripts/gpu-bundle.sh [BUILD_DIR]             -> gpu-bundle.tar.xz (ignored by git)
#          scripts/gpu-bundle.sh --dir DIR [BUILD_DIR]   -> the same, unpacked in DIR, no archive
# BUILD_DIR defaults to the repository's build; DIR and BUILD_DIR are relative to
# where it is called. --dir is the quick form the CI dry-run test uses
# (tests/integration/test_gpu_check_dry_run.sh); it also takes a CPU-only build.
# Never carried:
#  - the C library (every library of Debian's libc6 package: libc, libm,
#    libresolv, libpthread, ld-linux, libnss_*, ...). They must match the host's
#    ld.so exactly; libresolv, reached through HDF5 -> curl -> Kerberos, even uses
#    GLIBC_PRIVATE symbols. The bundle is checked for them at the end.
#  - CUDA's libraries and the driver's (cudart, cuBLAS, cuBLASLt, NCCL, libcuda):
#    they come with the GPU machine (gpu-check.sh stops at once if one is missing).
#  - cuDNN (~500 MB, far too large to carry): mpiddp opens it at run time, so it is
#    not among the libraries ldd lists; gpu-check.sh finds the GPU machine's own
#    (PyTorch's nvidia-cudnn wheel) and SKIPs the CNN rows when there is none.
#    cuBLAS too is opened at run time; gpu-check.sh stops when there is none.
set -euo pipefail
dir=""
if [ "${1:-}" = "--dir" ]; then dir=$(realpath -m "${2:?usage: gpu-bundle.sh --dir DIR [BUILD_DIR]}"); shift 2; fi
build=$(realpath -m "${1:-$(dirname "$0")/../build}")
cd "$(dirname "$0")/.."
die() { echo "gpu-bundle: error: $*" >&2; exit 2; }
[ -x "$build/mpiddp" ] || die "$build/mpiddp not found (build first: cmake -S . -B build && cmake --build build -j2)"
if ! "$build/mpiddp" inspect devices | grep -q "CUDA yes"; then
  [ -n "$dir" ] || die "$build has no CUDA build"
  echo "gpu-bundle: note: $build is a CPU-only build (enough for the dry run only)"
fi
out=${dir:-gpu-bundle}
# Replaces an earlier bundle only, never another folder.
if [ -n "$(ls -A "$out" 2>/dev/null)" ] && [ ! -e "$out/.gpu-bundle" ]; then die "$out exists and is not a bundle"; fi
rm -rf "$out"
[ -n "$dir" ] || rm -f gpu-bundle.tar.xz
mkdir -p "$out/bin" "$out/lib" "$out/data" "$out/ompi/bin" "$out/ompi/lib/x86_64-linux-gnu"
touch "$out/.gpu-bundle"

# The C library's files by name: Debian's own list, and the names glibc has
# used for years in case dpkg is missing.
libc_names=$(
  { dpkg -L libc6 2>/dev/null || true; } | sed -n 's|.*/\([^/]*\.so[.0-9]*\)$|\1|p'
  printf '%s\n' ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libdl.so.2 librt.so.1 libpthread.so.0 \
    libresolv.so.2 libutil.so.1 libanl.so.1 libnsl.so.1 libBrokenLocale.so.1 libthread_db.so.1 \
    libc_malloc_debug.so.0 libnss_files.so.2 libnss_dns.so.2 libnss_compat.so.2 libnss_hesiod.so.2
)
is_libc() { grep -qxF "$1" <<<"$libc_names"; }
# CUDA and the driver, wherever they were found here.
is_cuda() { [[ $1 =~ ^lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-|nvrtc|nvJitLink|cudnn) || $2 == /usr/local/cuda* ]]; }

binaries=("$build/mpiddp")
for t in gpu_tests mpi_tests; do [ -x "$build/tests/$t" ] && binaries+=("$build/tests/$t"); done
cp "${binaries[@]}" "$out/bin/"
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi
for binary in "${binaries[@]}" /usr/bin/orterun /usr/bin/orted "$ompi_lib"/lib/openmpi3/*.so \
              /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  is_libc "$name" || is_cuda "$name" "$lib" || cp -L "$lib" "$out/lib/"
done

# Open MPI with its Debian layout under a relocatable prefix (OPAL_PREFIX). Its
# site defaults (/etc/openmpi) stay behind: gpu-check.sh sets them explicitly.
cp /usr/bin/orterun /usr/bin/orted "$out/ompi/bin/"
ln -sf orterun "$out/ompi/bin/mpirun"
cp -a "$ompi_lib" /usr/lib/x86_64-linux-gnu/pmix2 "$out/ompi/lib/x86_64-linux-gnu/"
rm -rf "$out/ompi/lib/x86_64-linux-gnu/openmpi/include" "$out/ompi/lib/x86_64-linux-gnu/pmix2/include"
mkdir -p "$out/ompi/share"
cp -a /usr/share/openmpi "$out/ompi/share/"
if [ -d /usr/share/pmix ]; then cp -a /usr/share/pmix "$out/ompi/share/"; fi
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$out/data/"
# The King James Bible's text for the gpt_kjv_bf16 row (Debian's bible-kjv; the row SKIPs without it).
if command -v bible > /dev/null; then bible "Gen1:1-Rev22:21" < /dev/null > "$out/data/kjv.txt"; fi
# The Python tools as in this checkout, without compiled caches.
mkdir -p "$out/python"
cp -a python/mpiddp_tools "$out/python/"
rm -rf "$out/python/mpiddp_tools/__pycache__"

# No file of the C library, wherever it hides (a component's own dependencies too).
while read -r file; do
  if is_libc "$(basename "$file")"; then die "the bundle holds the C library's $(basename "$file") ($file)"; fi
done < <(find "$out" -name '*.so*')
echo "gpu-bundle: $(find "$out/lib" -type f | wc -l) libraries, none of the C library's or CUDA's"

if [ -n "$dir" ]; then echo "gpu-bundle: $dir"; exit 0; fi
XZ_OPT=${XZ_OPT:--6 -T0} tar -cJf gpu-bundle.tar.xz "$out"
rm -rf "$out"
ls -la gpu-bundle.tar.xz
