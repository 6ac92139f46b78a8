#!/usr/bin/env bash
# Every layer kind against PyTorch: tests/torch/layer_cases (built with the tests)
# writes mpiddp's forward and backward for convolutions over kernel sizes,
# strides and paddings, both pools, BatchNorm in training and evaluation, and
# two small CNNs; tests/torch/compare_layers.py recomputes them with torch.nn
# (one line per case) and compares outputs, gradients and running statistics,
# once per CPU kernel choice the build has.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch
LAYER_CASES=${LAYER_CASES:-$(dirname "$MPIDDP")/tests/layer_cases}
[ -x "$LAYER_CASES" ] || { fail "no layer_cases program at $LAYER_CASES (build the tests)"; finish; }

# Every CPU kernel choice (train.cpu_kernels) this build has: OpenBLAS (im2col
# convolutions), oneDNN (its convolution primitives) where the binary links it,
# mpiddp's own convolution kernels where the CPU has AVX2 and FMA, and oneDNN's
# Winograd convolutions where it has oneDNN and AVX-512 (winograd, and
# winograd_all: their weight gradients too).
kernels=(openblas)
grep -q libdnnl <<< "$(ldd "$LAYER_CASES")" && kernels+=(onednn)
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then kernels+=(own); fi
kernels+=(own_winograd own_winograd4)  # mpiddp's own Winograd convolutions F(2x2), F(4x4): any CPU
if grep -q libdnnl <<< "$(ldd "$LAYER_CASES")" && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo \
  && grep -qw avx512dq /proc/cpuinfo; then kernels+=(winograd winograd_all); fi
for k in "${kernels[@]}"; do
  "$LAYER_CASES" "$WORK/cases-$k.h5" "$k" > "$WORK/cases-$k.log" 2>&1 && pass "$k: $(cat "$WORK/cases-$k.log")" \
    || { fail "layer_cases $k exited $?: $(cat "$WORK/cases-$k.log")"; continue; }
  rc=0
  "$PYTHON" "$MPIDDP_SOURCE_DIR/tests/torch/compare_layers.py" "$WORK/cases-$k.h5" "$MPIDDP_SOURCE_DIR/scripts" \
    > "$WORK/compare-$k.log" 2>&1 || rc=$?
  sed "s/^/[$k] /" "$WORK/compare-$k.log"
  # Its FAIL lines are the verdicts; anything else that stopped it is one more.
  FAILURES=$((FAILURES + $(grep -c "^FAIL:" "$WORK/compare-$k.log" || true)))
  [ "$rc" = 0 ] || grep -q "^FAIL:" "$WORK/compare-$k.log" || fail "$k: compare_layers.py exited $rc"
  [ "$(grep -c "^ok:" "$WORK/compare-$k.log" || true)" -ge 20 ] || fail "$k: fewer than 20 cases compared"
done
finish
