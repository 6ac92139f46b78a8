#!/usr/bin/env bash
# Device and backend selection where no GPU is usable (CI, CPU nodes), with the
# CPU-only and the CUDA build alike: auto trains on the CPU (the CUDA build says
# why), and every GPU-only request is refused with one line naming the key.
source "$(dirname "$0")/lib.sh"
"$MPIDDP" inspect devices > "$WORK/devices" || fail "inspect devices: exit $?"
cat "$WORK/devices"
if grep -q "^usable GPUs: [1-9]" "$WORK/devices"; then skip "a GPU is usable here (see gpu_training)"; fi
grep -q "^usable GPUs: 0 - ." "$WORK/devices" && pass "inspect devices gives the reason" || fail "inspect devices"
# A CUDA build says whether this process can open cuDNN (it needs no GPU for that), and which one or why not.
if grep -q "CUDA yes" "$WORK/devices"; then
  grep -qE "^cuDNN (yes: [0-9]+\.[0-9]+\.[0-9]+ \(/|no - .)" "$WORK/devices" &&
    pass "inspect devices: $(grep -m1 '^cuDNN' "$WORK/devices")" || fail "inspect devices: no cuDNN line"
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
