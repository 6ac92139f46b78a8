#!/usr/bin/env bash
# Device and backend selection where no GPU is usable (CI, CPU nodes), with the
# CPU-only and the CUDA build alike: auto trains on the CPU (the CUDA build says
# why), and every GPU-only request is refused with one line naming the key.
source "$(dirname "$0")/lib.sh"
"$MPIDDP" inspect devices > "$WORK/devices" || fail "inspect devices: exit $?"
cat "$WORK/devices"
if grep -q "^usable GPUs: [1-9]" "$WORK/devices"; then skip "a GPU is usable here (see gpu_training)"; fi
grep -q "^usable GPUs: 0 - ." "$WORK/devices" && pass "inspect devices gives the reason" || fail "inspect devices"
# A CUDA build says whether this process can open cuBLAS and cuDNN (it needs no GPU for that), and which one or
# why not. Both are opened at run time, never linked: a linked cuBLAS's start-up code made every process of a
# CUDA build, GPU or not, start about 0.35 s later (docs/gpus.md).
if grep -q "CUDA yes" "$WORK/devices"; then
  for library in cuBLAS cuDNN; do
    grep -qE "^$library (yes: [0-9]+\.[0-9]+\.[0-9]+ \(/|no - .)" "$WORK/devices" &&
      pass "inspect devices: $(grep -m1 "^$library" "$WORK/devices")" || fail "inspect devices: no $library line"
  done
  linked=$(ldd "$MPIDDP" | { grep -oE "lib(cublas|cublasLt|cudnn)[^ ]*" || true; } | tr '\n' ' ')
  [ -z "$linked" ] && pass "the CUDA build links neither cuBLAS nor cuDNN (opened at run time)" \
    || fail "the CUDA build links $linked(each process then runs its start-up code)"
  # A cuBLAS first on the library path that lacks functions mpiddp calls, or is of another major version: one
  # line saying so, where the process would open it.
  if command -v cc >/dev/null; then
    mkdir -p "$WORK/old-cublas" "$WORK/other-cublas"
    echo 'int cublasCreate_v2(void** handle) { (void)handle; return 0; }' > "$WORK/old_cublas.c"
    cc -shared -fPIC -Wl,-soname,libcublas.so.13 -o "$WORK/old-cublas/libcublas.so.13" "$WORK/old_cublas.c"
    LD_LIBRARY_PATH="$WORK/old-cublas" "$MPIDDP" inspect devices > "$WORK/old-cublas.log" 2>&1 || true
    grep -q "^cuBLAS no - $WORK/old-cublas/libcublas.so.13 has no cublasGetProperty (older than" "$WORK/old-cublas.log" &&
      pass "an old cuBLAS: $(grep -m1 '^cuBLAS' "$WORK/old-cublas.log")" ||
      fail "an old cuBLAS: $(grep -m1 '^cuBLAS' "$WORK/old-cublas.log" || cat "$WORK/old-cublas.log")"
    { echo 'int cublasGetProperty(int type, int* value) { *value = type == 0 ? 12 : 0; return 0; }'
      for f in GetStatusString Create_v2 Destroy_v2 SetStream_v2 SetMathMode Sgemm_v2 Sgemv_v2 GemmEx \
               GemmStridedBatchedEx; do echo "void cublas$f(void) {}"; done; } > "$WORK/other_cublas.c"
    cc -shared -fPIC -Wl,-soname,libcublas.so.13 -o "$WORK/other-cublas/libcublas.so.13" "$WORK/other_cublas.c"
    LD_LIBRARY_PATH="$WORK/other-cublas" "$MPIDDP" inspect devices > "$WORK/other-cublas.log" 2>&1 || true
    grep -qE "^cuBLAS no - .*/libcublas.so.13 is cuBLAS 12\.0\.0, but this mpiddp was built with [0-9]+\.x$" \
      "$WORK/other-cublas.log" && pass "another major version: $(grep -m1 '^cuBLAS' "$WORK/other-cublas.log")" ||
      fail "another major version: $(grep -m1 '^cuBLAS' "$WORK/other-cublas.log" || cat "$WORK/other-cublas.log")"
  fi
fi

make_blobs_shards "$WORK/train" 600 1 2
write_ini "$WORK/run.ini" data.train="$WORK/train" model.hidden=16 train.epochs=1 train.eval=false
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/auto" > "$WORK/auto.log" 2>&1 || fail "auto: exit $?"
grep -q "device cpu, precision fp32, gradients over mpi" "$WORK/auto.log" && pass "auto trains on the CPU over MPI" \
  || { fail "auto banner"; head -5 "$WORK/auto.log"; }
if grep -q "CUDA yes" "$WORK/devices"; then
  grep -q "^note: train.device = auto: no usable GPU (" "$WORK/auto.log" && pass "CUDA build says why it uses the CPU" \
    || fail "no note on the CPU fallback"
fi
grep -q "rank 1: host .*, local rank 1 of 2" "$WORK/auto.log" && pass "placement of every rank logged" || fail "placement"

expect_error device-cuda 2 "train.device = cuda: " train "$WORK/run.ini" --run.dir "$WORK/x" --train.device cuda
expect_error device-unknown 2 "train.device" train "$WORK/run.ini" --run.dir "$WORK/x" --train.device gpu
expect_error precision-bf16 2 "train.precision = bf16 needs train.device = cuda" train "$WORK/run.ini" \
  --run.dir "$WORK/x" --train.precision bf16
expect_error precision-cpu 2 "train.precision" train "$WORK/run.ini" --run.dir "$WORK/x" --train.device cpu \
  --train.precision tf32
expect_error backend-nccl 2 "dist.backend = nccl" train "$WORK/run.ini" --run.dir "$WORK/x" --dist.backend nccl
expect_error bf16-buckets-mpi 2 "ddp.allreduce_dtype" train "$WORK/run.ini" --run.dir "$WORK/x" \
  --dist.backend mpi --ddp.allreduce_dtype bf16
expect_error bf16-buckets-cpu 2 "ddp.allreduce_dtype = bf16 needs dist.backend = nccl" train "$WORK/run.ini" \
  --run.dir "$WORK/x" --ddp.allreduce_dtype bf16

expect_error bench-data 2 "--data must be resident or staged" bench mlp --data somewhere
rc=0; "$MPIDDP" inspect checkpoint "$WORK/train.csv" > "$WORK/inspect.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l < "$WORK/inspect.out")" -eq 1 ] && grep -q "train.csv: not a readable HDF5 file" "$WORK/inspect.out" \
  && pass "inspect checkpoint of a non-HDF5 file: $(cat "$WORK/inspect.out")" || { fail "inspect checkpoint error"; cat "$WORK/inspect.out"; }
run_ranks 2 bench mlp --steps 20 --warmup 2 > "$WORK/bench.log" 2>&1 || fail "bench mlp: exit $?"
grep -q "^exposed communication: " "$WORK/bench.log" && pass "bench mlp table: $(tail -1 "$WORK/bench.log")" \
  || { fail "bench mlp output"; cat "$WORK/bench.log"; }
finish
