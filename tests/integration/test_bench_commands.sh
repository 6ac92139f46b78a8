#!/usr/bin/env bash
# The CPU benchmarks scripts/bench.sh builds on.
# `mpiddp bench peak`: a row for exactly the vector ISAs this CPU reports (the
# widest first, the portable loop last), every loop's lanes checked against the
# scalar recurrence (wrong 0), and a closing "peak:" line naming the fastest row, which
# scripts/bench.sh reads. No rate is compared with a number: only the rows' own.
# train.cpu_kernels / bench gemm --kernels: each library this binary links runs
# and is named; oneDNN in a build without it is refused in one line, by `bench
# gemm` and by `train` (whether the binary links libdnnl is asked of ldd, not of mpiddp).
source "$(dirname "$0")/lib.sh"

"$MPIDDP" bench peak --seconds 0.05 > "$WORK/peak.out" 2>&1 || fail "bench peak exited $?"
cat "$WORK/peak.out"
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
want=""
has() { [[ " $flags " == *" $1 "* ]]; }
if [ "$(uname -m)" = x86_64 ]; then
  has avx512f && want+="AVX-512 "
  has avx2 && has fma && want+="AVX2+FMA "
fi
want+="portable"
got=$(grep -o '^[^ ]* ([0-9]* floats per vector)' "$WORK/peak.out" | awk '{print $1}' | paste -sd' ')
[ "$got" = "$want" ] && pass "one row per ISA the CPU has, widest first: $got" || fail "rows '$got', want '$want'"
rows=$(grep -c 'floats per vector.*GFLOP/s (median); wrong 0 of [1-9]' "$WORK/peak.out" || true)
[ "$rows" = "$(wc -w <<< "$want")" ] && pass "every loop matches the scalar recurrence (wrong 0)" || fail "rows with wrong 0: $rows"
"$PYTHON" - "$WORK/peak.out" <<'PY' && pass "the peak line names the fastest row" || fail "peak line"
import re, sys
text = open(sys.argv[1]).read()
rows = {m[0]: float(m[1]) for m in re.findall(r"^(\S+) \(\d+ floats per vector\).*?([\d.]+) GFLOP/s \(median\)", text, re.M)}
peak = re.search(r"^peak: ([\d.]+) GFLOP/s per core \((\S+), FP32 FMA\)$", text, re.M)
assert peak and rows, text
# The row the peak line names is a fastest one: the rows are printed to 0.1 GFLOP/s, so on a CPU
# whose two widest loops run alike a tie in print may hide which one the binary measured faster.
best = max(rows.values())
assert peak[2] in rows and abs(rows[peak[2]] - best) < 0.051 and abs(float(peak[1]) - rows[peak[2]]) < 0.051, \
    (peak.groups(), rows)
PY

# ---- oneDNN's convolutions on a CPU without AVX2 (its gemm-based kernels) ----
# There oneDNN keeps the weight gradient in OIHW, mpiddp's own layout, in a buffer
# of its own: it must still reach the layer (it once stayed there, all zero).
if ldd "$MPIDDP" | grep -q libdnnl; then
  ONEDNN_MAX_CPU_ISA=AVX "$MPIDDP" bench conv --kernels onednn --seconds 0.05 --batch 4 > "$WORK/conv-avx.out" 2>&1 \
    || fail "bench conv under ONEDNN_MAX_CPU_ISA=AVX exited $?"
  [ "$(grep -c 'wrong 0 of [1-9]' "$WORK/conv-avx.out")" = 3 ] \
    && pass "oneDNN's gemm convolutions: forward, weight and input gradients match the reference (wrong 0)" \
    || fail "oneDNN's gemm convolutions: $(grep -o 'wrong [0-9]* of [0-9]*' "$WORK/conv-avx.out" | paste -sd' ')"
fi

# ---- the matrix-product library: chosen, named, or refused ----
gemm() { "$MPIDDP" bench gemm --seconds 0.02 --hidden 32 --kernels "$1" 2>&1 | tail -1; }
[[ "$(gemm openblas)" == *" openblas: "*" GFLOP/s"* ]] && pass "bench gemm --kernels openblas runs OpenBLAS" \
  || fail "openblas: $(gemm openblas)"
if grep -q libdnnl <<< "$(ldd "$MPIDDP")"; then
  [[ "$(gemm onednn)" == *" onednn: "*" GFLOP/s"* ]] && pass "linked with oneDNN: --kernels onednn runs it" \
    || fail "onednn: $(gemm onednn)"
  [[ "$(gemm auto)" == *" onednn: "* ]] && pass "linked with oneDNN: auto picks it" || fail "auto: $(gemm auto)"
else
  [[ "$(gemm auto)" == *" openblas: "* ]] && pass "without oneDNN: auto is OpenBLAS" || fail "auto: $(gemm auto)"
  expect_input_error gemm-onednn-missing 1 "train.cpu_kernels = onednn, but this mpiddp was built without oneDNN" \
    bench gemm --kernels onednn --seconds 0.02
  make_blobs_shards "$WORK/blobs" 64 1 1
  expect_input_error train-onednn-missing 2 "train.cpu_kernels = onednn, but this mpiddp was built without oneDNN" \
    train /dev/null --data.train "$WORK/blobs" --model.hidden 8 --train.epochs 1 --train.cpu_kernels onednn \
    --run.dir "$WORK/run"
  # tune has nothing to choose between: it says so and trains on OpenBLAS.
  run_ranks 2 train /dev/null --data.train "$WORK/blobs" --model.hidden 8 --train.epochs 1 --train.cpu_kernels tune \
    --run.dir "$WORK/tune" > "$WORK/tune.log" 2>&1 \
    && grep -q "^note: train.cpu_kernels = tune has one library to choose from here (this mpiddp was built without oneDNN)" \
      "$WORK/tune.log" && grep -q "CPU kernels: OpenBLAS" "$WORK/tune.log" && ! grep -q "timed per layer" "$WORK/tune.log" \
    && pass "without oneDNN: tune says it has one library and trains on OpenBLAS" || fail "tune without oneDNN: $(cat "$WORK/tune.log")"
fi
expect_input_error gemm-kernels-unknown 1 "cpu_kernels" bench gemm --kernels blis --seconds 0.02
expect_input_error peak-seconds 1 "--seconds must be in (0, 3600], got -1" bench peak --seconds -1
finish
