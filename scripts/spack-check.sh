#!/usr/bin/env bash
# Installs this source tree with Spack, offline, from the machine's own packages:
# a self-contained Spack environment (in a temporary folder) with externals for
# the compiler, CMake, MPI, HDF5, BLAS, oneDNN, Boost, zlib, nlohmann-json and Catch2, a repository that
# holds package.py, and a `develop` spec on this checkout; then
# `spack install --test=root` and `spack test run`. Prints PASS or FAIL.
#
# usage: scripts/spack-check.sh SPACK_DIR BUILTIN_PACKAGES_DIR
#   SPACK_DIR             a Spack 1.x checkout
#   BUILTIN_PACKAGES_DIR  a checkout of Spack's package repository (spack-packages)
# environment: PYTHONPATH must find clingo's Python module; SPACK_PYTHON the
# interpreter it was built for; KEEP=1 keeps the environment folder;
# CUDA=1 installs mpiddp+cuda cuda_arch=90 instead, with the CUDA toolkit and
# NCCL from CUDA_HOME (default /usr/local/cuda) as externals.
# No target is required: Spack concretizes for the host's microarchitecture as it
# sees it, which need not be the one the CPU's name suggests (a CPU hiding lzcnt is
# x86_64_v2 to Spack, and a pinned x86_64_v3 fails to concretize there).
set -uo pipefail
spack_dir=${1:?usage: spack-check.sh SPACK_DIR BUILTIN_PACKAGES_DIR}
builtin=${2:?usage: spack-check.sh SPACK_DIR BUILTIN_PACKAGES_DIR}/repos/spack_repo/builtin
source_dir=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$builtin" ] || { echo "spack-check: $builtin not found"; echo FAIL; exit 1; }
env_dir=$(mktemp -d /tmp/mpiddp-spack.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$env_dir"' EXIT
export SPACK_USER_CONFIG_PATH=$env_dir/user-config SPACK_USER_CACHE_PATH=$env_dir/user-cache
export SPACK_DISABLE_LOCAL_CONFIG=1
spack=("$spack_dir/bin/spack" -e "$env_dir")

# A package repository holding this checkout's recipe.
mkdir -p "$env_dir/repo/spack_repo/mpiddp_local/packages/mpiddp"
cp "$source_dir/package.py" "$env_dir/repo/spack_repo/mpiddp_local/packages/mpiddp/package.py"
printf 'repo:\n  namespace: mpiddp_local\n  api: v2.0\n' > "$env_dir/repo/spack_repo/mpiddp_local/repo.yaml"

version() { dpkg-query -W -f='${Version}' "$1" | sed 's/^[0-9]*://; s/[-+~].*//'; }
root_spec=mpiddp@main
cuda_externals=
if [ -n "${CUDA:-}" ]; then
  cuda_home=${CUDA_HOME:-/usr/local/cuda}
  cuda_version=$("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  nccl_version=$(awk '/define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$cuda_home/include/nccl.h")
  root_spec="mpiddp@main+cuda cuda_arch=90"
  cuda_externals="    cuda: {buildable: false, externals: [{spec: cuda@$cuda_version, prefix: $cuda_home}]}
    nccl: {buildable: false, externals: [{spec: nccl@$nccl_version cuda_arch=90, prefix: $cuda_home}]}"
fi
cat > "$env_dir/spack.yaml" <<YAML
spack:
  specs: ["$root_spec"]
  develop:
    mpiddp:
      spec: mpiddp@main
      path: $source_dir
  view: false
  concretizer:
    unify: true
    reuse: false
  config:
    install_tree:
      root: $env_dir/opt
    build_stage: [$env_dir/stage]
    source_cache: $env_dir/source-cache
    misc_cache: $env_dir/misc-cache
    test_stage: $env_dir/test-stage
  bootstrap:
    enable: false
  repos:
    mpiddp_local: $env_dir/repo/spack_repo/mpiddp_local
    builtin: $builtin
  packages:
    gcc:
      buildable: false
      externals:
      - spec: gcc@$(gcc -dumpfullversion) languages:='c,c++,fortran'
        prefix: /usr
        extra_attributes:
          compilers: {c: /usr/bin/gcc, cxx: /usr/bin/g++, fortran: /usr/bin/gfortran}
    cmake: {buildable: false, externals: [{spec: cmake@$(version cmake), prefix: /usr}]}
    gmake: {buildable: false, externals: [{spec: gmake@$(version make), prefix: /usr}]}
    openmpi: {buildable: false, externals: [{spec: openmpi@$(version openmpi-bin), prefix: /usr}]}
    mpi: {require: [openmpi]}
    hdf5: {buildable: false, externals: [{spec: hdf5@$(version libhdf5-dev)~mpi+hl api=default, prefix: /usr}]}
    openblas: {buildable: false, externals: [{spec: openblas@$(version libopenblas-dev) threads=pthreads, prefix: /usr}]}
    onednn: {buildable: false, externals: [{spec: onednn@$(version libdnnl-dev) cpu_runtime=omp gpu_runtime=none, prefix: /usr}]}
    blas: {require: [openblas]}
    lapack: {require: [openblas]}
    boost: {buildable: false, externals: [{spec: boost@$(version libboost-program-options-dev)+program_options, prefix: /usr}]}
    zlib: {buildable: false, externals: [{spec: zlib@$(version zlib1g-dev), prefix: /usr}]}
    zlib-api: {require: [zlib]}
    nlohmann-json: {buildable: false, externals: [{spec: nlohmann-json@$(version nlohmann-json3-dev), prefix: /usr}]}
    catch2: {buildable: false, externals: [{spec: catch2@$(version catch2), prefix: /usr}]}
$cuda_externals
YAML

status=0
step() {  # name, command...
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== $name: $*"
  if "$@" > "$env_dir/$name.log" 2>&1; then
    echo "   ok ($(( $(date +%s) - t0 )) s)"
  else
    echo "   FAILED ($(( $(date +%s) - t0 )) s); last lines of $name.log:"; tail -25 "$env_dir/$name.log"; status=1
  fi
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
step concretize "${spack[@]}" concretize --fresh --test=root
[ $status = 0 ] && sed -n '1,40p' "$env_dir/concretize.log"
[ $status = 0 ] && step install "${spack[@]}" install --test=root --fail-fast
[ $status = 0 ] && step test-run "${spack[@]}" test run mpiddp
[ $status = 0 ] && { "${spack[@]}" test results > "$env_dir/results.log" 2>&1; tail -8 "$env_dir/results.log"; }
step spec-cuda "$spack_dir/bin/spack" -e "$env_dir" spec --fresh mpiddp+cuda cuda_arch=90
[ $status = 0 ] && grep -E "^ -   mpiddp|^\[\+\]|nccl|cuda@" "$env_dir/spec-cuda.log" | head -6
if [ $status = 0 ]; then echo PASS; else echo FAIL; fi
exit $status
