#!/usr/bin/env bash
# ddp.zero_stage = 1 (ZeRO stage 1, sharded optimizer state): the same weights and
# the same checkpoint arrays as stage 0 (bit for bit at world 2, to float rounding
# at world 3), checkpoints that resume under the other stage, the memory figures
# of summary.json, the emulated GPU's path, and refused values.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy

make_blobs_shards "$WORK/train" 480 1 2
# Tiny buckets (about 1 KiB) so that buckets straddle the shard boundaries.
write_ini "$WORK/run.ini" data.train="$WORK/train" model.hidden=32,16 train.batch_size=8 train.epochs=2 \
  train.seed=5 train.accumulate=2 optim.name=adamw optim.lr=0.003 optim.weight_decay=0.01 \
  checkpoint.every_epochs=1 checkpoint.keep=0 ddp.first_bucket_mb=0.001 ddp.bucket_mb=0.002

train() {  # train RANKS NAME ARGS...
  local n=$1 name=$2; shift 2
  run_ranks "$n" train "$WORK/run.ini" --run.dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { fail "$name: exit code $?"; tail -5 "$WORK/$name.log" >&2; }
}
# Arrays of two checkpoints equal to float rounding (world 3: the sums run in another order).
close_arrays() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
def arrays(path):
    out = {}
    h5py.File(path, "r").visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset) else None)
    return out
x, y = arrays(sys.argv[1]), arrays(sys.argv[2])
assert x and sorted(x) == sorted(y), (sorted(x), sorted(y))
assert any(n.startswith("optimizer/") for n in x), "no optimizer state"
bad = [n for n in x if not np.allclose(x[n], y[n], rtol=1e-4, atol=1e-6)]
assert not bad, bad
print("max difference %.3g" % max(float(np.max(np.abs(x[n] - y[n]))) for n in x))
PY
}

# World 2, AdamW, accumulate 2: stage 1 is stage 0 bit for bit, checkpoint arrays included.
train 2 w2s0 --ddp.zero_stage 0
train 2 w2s1 --ddp.zero_stage 1
same_parameters "$(latest_checkpoint "$WORK/w2s0")" "$(latest_checkpoint "$WORK/w2s1")" \
  && pass "world 2 adamw: stage 1 checkpoint arrays identical to stage 0's" || fail "world 2 adamw: arrays differ"
same_parameters "$WORK/w2s0/checkpoints/keep-epoch-0001.h5" "$WORK/w2s1/checkpoints/keep-epoch-0001.h5" 2>/dev/null \
  || same_parameters "$WORK/w2s0/checkpoints/ckpt-step-000000015.h5" "$WORK/w2s1/checkpoints/ckpt-step-000000015.h5" \
  && pass "world 2: epoch-1 checkpoints identical too" || fail "world 2: epoch-1 checkpoints differ"

# World 2 and 3, SGD with momentum.
train 2 sgd2s0 --ddp.zero_stage 0 --optim.name sgd --optim.momentum 0.9 --optim.lr 0.05
train 2 sgd2s1 --ddp.zero_stage 1 --optim.name sgd --optim.momentum 0.9 --optim.lr 0.05
same_parameters "$(latest_checkpoint "$WORK/sgd2s0")" "$(latest_checkpoint "$WORK/sgd2s1")" \
  && pass "world 2 sgd+momentum: identical" || fail "world 2 sgd+momentum: arrays differ"
train 3 w3s0 --ddp.zero_stage 0
train 3 w3s1 --ddp.zero_stage 1
d=$(close_arrays "$(latest_checkpoint "$WORK/w3s0")" "$(latest_checkpoint "$WORK/w3s1")") \
  && pass "world 3 adamw: stage 1 equals stage 0 to float rounding ($d)" || fail "world 3 adamw: arrays differ"

# summary.json and the banner: state per rank about half of stage 0's at world 2.
s0=$(json_field "$WORK/w2s0/summary.json" optimizer_state_bytes_per_rank)
s1=$(json_field "$WORK/w2s1/summary.json" optimizer_state_bytes_per_rank)
p=$(json_field "$WORK/w2s1/summary.json" parameter_bytes)
[ "$s0" = $((2 * p)) ] && at_least "$s1" $((p)) && below "$s1" $((p + 2 * 64 + 1)) \
  && pass "optimizer_state_bytes_per_rank: stage 0 $s0, stage 1 $s1 (parameters $p bytes)" \
  || fail "optimizer_state_bytes_per_rank: stage 0 $s0, stage 1 $s1, parameter_bytes $p"
grep -q "optimizer_state_bytes_per_rank $s1 (adamw, ddp.zero_stage 1" "$WORK/w2s1.log" \
  && grep -q "parameter_bytes $p" "$WORK/w2s1.log" && pass "banner shows both" || fail "banner"
h=$(json_field "$WORK/w2s1/summary.json" peak_host_bytes)
g=$(json_field "$WORK/w2s1/summary.json" peak_device_bytes)
n=$("$PYTHON" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['peak_host_bytes_per_rank']))" "$WORK/w2s1/summary.json")
at_least "$h" 1000000 && [ "$g" = 0 ] && [ "$n" = 2 ] && pass "peak_host_bytes $h (2 ranks listed), peak_device_bytes 0 on the CPU" \
  || fail "peak memory fields: host $h device $g ranks $n"

# Checkpoint of one stage resumes under the other: stopped by a signal at step 20,
# resumed, the end equals the uninterrupted run bit for bit (world 2).
for from in 0 1; do
  to=$((1 - from))
  rc=0; run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/r$from$to" --ddp.zero_stage $from --debug.fail_rank 1 \
    --debug.fail_step 20 --debug.fail_mode signal > "$WORK/r$from$to.log" 2>&1 || rc=$?
  [ "$rc" = 75 ] || fail "stage $from: stop by signal, exit $rc"
  train 2 "r$from$to" --ddp.zero_stage $to --resume auto
  grep -q "resuming from" "$WORK/r$from$to.log" && same_parameters "$(latest_checkpoint "$WORK/w2s0")" \
    "$(latest_checkpoint "$WORK/r$from$to")" && pass "stage $from checkpoint resumed under stage $to: identical end" \
    || fail "stage $from -> $to resume differs"
done
# World 3, stage 1 to stage 1 through a checkpoint (each rank gets its shard back).
rc=0; run_ranks 3 train "$WORK/run.ini" --run.dir "$WORK/r3" --ddp.zero_stage 1 --debug.fail_rank 2 \
  --debug.fail_step 12 --debug.fail_mode signal > "$WORK/r3a.log" 2>&1 || rc=$?
train 3 r3 --ddp.zero_stage 1 --resume auto
[ "$rc" = 75 ] && same_parameters "$(latest_checkpoint "$WORK/w3s1")" "$(latest_checkpoint "$WORK/r3")" \
  && pass "world 3 stage 1 resume: identical to the uninterrupted stage-1 run" || fail "world 3 stage 1 resume (stop rc $rc)"

# A model smaller than four shards (27 floats: ranks 2 and 3 own nothing) through a stop and resume at world 4.
rc=0; run_ranks 4 train "$WORK/run.ini" --run.dir "$WORK/tiny" --model.hidden 2 --ddp.zero_stage 1 --debug.fail_rank 3 \
  --debug.fail_step 10 --debug.fail_mode signal > "$WORK/tiny1.log" 2>&1 || rc=$?
train 4 tiny --model.hidden 2 --ddp.zero_stage 1 --resume auto
train 4 tiny-straight --model.hidden 2 --ddp.zero_stage 1
[ "$rc" = 75 ] && same_parameters "$(latest_checkpoint "$WORK/tiny")" "$(latest_checkpoint "$WORK/tiny-straight")" \
  && pass "empty shards (world 4, 27 parameters): resumed = uninterrupted" || fail "empty shards: stop rc $rc or differs"

# Elastic resume (another world size) with sharded state: one world-3 stage-0 checkpoint resumed at world 2,
# under stage 0 and under stage 1 (shards of another size than the writer's), ends identically.
rc=0; run_ranks 3 train "$WORK/run.ini" --run.dir "$WORK/el0" --ddp.zero_stage 0 --debug.fail_rank 1 \
  --debug.fail_step 12 --debug.fail_mode signal > "$WORK/el0a.log" 2>&1 || rc=$?
[ "$rc" = 75 ] || fail "elastic: stop at world 3, exit $rc"
cp -a "$WORK/el0" "$WORK/el1"
train 2 el0 --ddp.zero_stage 0 --resume auto
train 2 el1 --ddp.zero_stage 1 --resume auto
same_parameters "$(latest_checkpoint "$WORK/el0")" "$(latest_checkpoint "$WORK/el1")" \
  && pass "world 3 -> 2 elastic resume: stage 1 ends as stage 0" || fail "elastic resume: stages differ"

# The emulated GPU (separate memory, host-staged MPI): stage 1 equals stage 0, device peak reported.
train 2 e0 --debug.emulate_device true --train.share_device true --ddp.zero_stage 0
train 2 e1 --debug.emulate_device true --train.share_device true --ddp.zero_stage 1
same_parameters "$(latest_checkpoint "$WORK/e0")" "$(latest_checkpoint "$WORK/e1")" \
  && pass "emulated GPU: stage 1 identical to stage 0" || fail "emulated GPU: stages differ"
g=$(json_field "$WORK/e1/summary.json" peak_device_bytes)
at_least "$g" 1 && pass "emulated GPU: peak_device_bytes $g" || fail "emulated GPU: peak_device_bytes '$g'"

# train.nonfinite at stage 1: each rank checks its shard, the verdict is agreed; skip drops the same step as at stage 0.
for s in 0 1; do
  train 2 "nan$s" --ddp.zero_stage $s --debug.fail_rank 1 --debug.fail_step 9 --debug.fail_mode nan --train.nonfinite skip
done
[ "$(json_field "$WORK/nan1/summary.json" skipped_steps)" = 1 ] && same_parameters "$(latest_checkpoint "$WORK/nan0")"   "$(latest_checkpoint "$WORK/nan1")" && pass "nonfinite = skip at stage 1: one step skipped, the same end as stage 0"   || fail "nonfinite skip at stage 1"
expect_error nan-stop 3 "global step 10: non-finite loss or gradient" train "$WORK/run.ini" --run.dir "$WORK/nan-stop"   --ddp.zero_stage 1 --debug.fail_rank 2 --debug.fail_step 9 --debug.fail_mode nan

# Refused: stage outside 0..1, and optimizer state that does not fit the model.
for bad in 2 -1 one; do
  expect_error "zero-stage-$bad" 1 "ddp.zero_stage" train "$WORK/run.ini" --run.dir "$WORK/bad" --ddp.zero_stage "$bad"
  [ "$EXPECT_RC" = 2 ] || fail "zero_stage $bad: exit $EXPECT_RC"
done
cp "$(latest_checkpoint "$WORK/w2s1")" "$WORK/edited.h5"
"$PYTHON" - "$WORK/edited.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+")
name = sorted(f["optimizer/exp_avg"].keys())[0]
del f["optimizer/exp_avg/" + name]
f["optimizer/exp_avg/" + name] = np.zeros(3, np.float32)
PY
expect_error edited-state 2 "optimizer/exp_avg/" train "$WORK/run.ini" --run.dir "$WORK/edited" --ddp.zero_stage 1 \
  --resume "$WORK/edited.h5"
[ "$EXPECT_RC" = 2 ] || fail "edited optimizer state: exit $EXPECT_RC"
finish
