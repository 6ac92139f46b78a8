#!/usr/bin/env bash
# Every layer kind against PyTorch: tests/torch/layer_cases (built with the tests)
# writes mpiddp's forward and backward for convolutions over kernel sizes,
# strides and paddings, both pools, BatchNorm in training and evaluation, and
# two small CNNs; tests/torch/compare_layers.py recomputes them with torch.nn
# (one line per case) and compares outputs, gradients and running statistics.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch
LAYER_CASES=${LAYER_CASES:-$(dirname "$MPIDDP")/tests/layer_cases}
[ -x "$LAYER_CASES" ] || { fail "no layer_cases program at $LAYER_CASES (build the tests)"; finish; }

"$LAYER_CASES" "$WORK/cases.h5" > "$WORK/cases.log" 2>&1 && pass "$(cat "$WORK/cases.log")" \
  || { fail "layer_cases exited $?: $(cat "$WORK/cases.log")"; finish; }
rc=0
"$PYTHON" "$MPIDDP_SOURCE_DIR/tests/torch/compare_layers.py" "$WORK/cases.h5" "$MPIDDP_SOURCE_DIR/scripts" \
  > "$WORK/compare.log" 2>&1 || rc=$?
cat "$WORK/compare.log"
# Its FAIL lines are the verdicts; anything else that stopped it is one more.
FAILURES=$((FAILURES + $(grep -c "^FAIL:" "$WORK/compare.log" || true)))
[ "$rc" = 0 ] || grep -q "^FAIL:" "$WORK/compare.log" || fail "compare_layers.py exited $rc"
[ "$(grep -c "^ok:" "$WORK/compare.log" || true)" -ge 20 ] || fail "fewer than 20 cases compared"
finish
