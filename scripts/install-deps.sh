#!/usr/bin/env bash
# Installs every Debian package mpiddp needs to build, run and test (as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
# Toolchain (scripts/test.sh builds with Ninja and ccache), MPI, HDF5 (+h5dump), Boost.Program_options, OpenBLAS, oneDNN, zlib, nlohmann-json,
# Catch2, the Fashion-MNIST package, the Python modules the scripts and tests use
# (h5py, numpy, torch for cross-checks and scripts/to-torch, matplotlib for scripts/plot), and
# Slurm + munge + iproute2 for the `slurm` tests (one-node and 3-node clusters in network namespaces).
packages=(
  g++ make cmake ninja-build ccache pkg-config
  openmpi-bin libopenmpi-dev
  libhdf5-dev hdf5-tools
  libboost-program-options-dev
  libopenblas-dev libdnnl-dev zlib1g-dev
  nlohmann-json3-dev
  catch2
  dataset-fashion-mnist bible-kjv bible-kjv-text
  python3-h5py python3-numpy python3-torch python3-matplotlib
  slurm-wlm munge iproute2
)
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  apt_get update -qq
  apt_get install -y --no-install-recommends "${packages[@]}"
fi
