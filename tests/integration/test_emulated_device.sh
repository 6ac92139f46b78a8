#!/usr/bin/env bash
# The GPU path's host side, without a GPU: debug.emulate_device trains on an
# emulated GPU (the CPU's arithmetic in memory of its own, reached only by
# copies; fresh memory is NaN). Because the arithmetic is the CPU's, every run
# must end bit-identical to the same run on the CPU, which checks the device
# copies of parameters and optimizer state, checkpoint pulls, batch staging and
# the next-batch prefetch order, resume, and the host-staged MPI all-reduce.
source "$(dirname "$0")/lib.sh"
make_blobs_shards "$WORK/train" 1500 1 3
write_ini "$WORK/run.ini" data.train="$WORK/train" data.test="$WORK/train" model.hidden=32,16 model.dropout=0.2 \
  train.batch_size=25 train.epochs=3 optim.name=adamw optim.lr=0.01 \
  ddp.first_bucket_mb=0.001 ddp.bucket_mb=0.002 checkpoint.every_steps=40 checkpoint.keep=0
# run NAME RANKS args...
run() { local name=$1 ranks=$2; shift 2
  run_ranks "$ranks" train "$WORK/run.ini" --run.dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1; }

for ranks in 1 2; do
  run cpu$ranks $ranks || fail "cpu, $ranks rank(s): exit $?"
  run emu$ranks $ranks --debug.emulate_device true --train.share_device true || { fail "emulated, $ranks rank(s): exit $?"; tail -3 "$WORK/emu$ranks.log"; }
  grep -q "device emulated" "$WORK/emu$ranks.log" && pass "$ranks rank(s): trained on the emulated GPU" \
    || fail "banner lacks the emulated device"
  same_parameters "$(latest_checkpoint "$WORK/cpu$ranks")" "$(latest_checkpoint "$WORK/emu$ranks")" \
    && pass "$ranks rank(s): emulated GPU ends bit-identical to the CPU (parameters and AdamW state)" \
    || fail "$ranks rank(s): emulated GPU differs from the CPU"
done
# Every intermediate checkpoint too (pulls before each write).
intermediate=("$WORK"/cpu2/checkpoints/ckpt-step-*.h5) differing=0
for f in "${intermediate[@]}"; do
  same_parameters "$f" "$WORK/emu2/checkpoints/$(basename "$f")" || { differing=1; fail "checkpoint $(basename "$f") differs"; }
done
[ "$differing" = 0 ] && pass "all ${#intermediate[@]} intermediate checkpoints identical"

# mpiddp's own checkpoint summary (used where h5py is missing) agrees.
arrays() { "$MPIDDP" inspect checkpoint "$1" | grep ' \['; }
first=${intermediate[0]}
[ "$(arrays "$first" | wc -l)" -eq 18 ] && cmp -s <(arrays "$(latest_checkpoint "$WORK/cpu2")") \
  <(arrays "$(latest_checkpoint "$WORK/emu2")") && ! cmp -s <(arrays "$first") <(arrays "$(latest_checkpoint "$WORK/cpu2")") \
  && pass "inspect checkpoint: 18 arrays, equal checksums for equal runs, different for different steps" \
  || fail "inspect checkpoint checksums"

# Stopped mid-epoch by an agreed signal, resumed on the emulated GPU.
rc=0
run split 2 --debug.emulate_device true --train.share_device true --debug.fail_rank 1 --debug.fail_step 77 \
  --debug.fail_mode signal || rc=$?
[ "$rc" -eq 75 ] && pass "stop signal on the emulated GPU: exit 75" || fail "stop signal: exit $rc"
# Resumed with batches read inline, next to the emulated GPU's prefetch and staging
# slots (auto reads on a thread there): the choice may change on a resume, never the bits.
run split 2 --debug.emulate_device true --train.share_device true --resume auto --data.loader inline \
  || fail "resume: exit $?"
grep -q "batches read on a loader thread (auto: the rank trains on a GPU) on rank 0; 2 of 2" "$WORK/emu2.log" \
  && grep -q "batches read inline, in the training thread (data.loader = inline) on rank 0; 0 of 2" "$WORK/split.log" \
  && pass "the emulated GPU reads on a loader thread by default, inline when told" \
  || fail "banner: $(grep -h "batches read" "$WORK/emu2.log" "$WORK/split.log")"
same_parameters "$(latest_checkpoint "$WORK/cpu2")" "$(latest_checkpoint "$WORK/split")" \
  && pass "stop + resume (inline reads) on the emulated GPU ends bit-identical to the uninterrupted CPU run" \
  || fail "resumed emulated run differs"

# Two ranks on one (emulated) GPU need train.share_device, and never NCCL.
expect_error shared-gpu 2 "both use GPU emulated" train "$WORK/run.ini" --run.dir "$WORK/x" --debug.emulate_device true
grep -q "train.share_device = true" "$WORK/shared-gpu.out" && pass "the message says how to allow sharing" \
  || fail "sharing message"
expect_error shared-gpu-nccl 2 "debug.emulate_device works with dist.backend = mpi only" train "$WORK/run.ini" \
  --run.dir "$WORK/x" --debug.emulate_device true --train.share_device true --dist.backend nccl

# A CNN (convolution, BatchNorm and its buffers, pooling) on 8 features seen as
# 2 x 2 x 2 images: the same on the emulated GPU, with DDP's buffer broadcast and
# with SyncBatchNorm's gathers and all-reduces (host-staged there).
cnn=(--model.layers "conv2d(6,2,padding=1) batchnorm2d relu maxpool2d(2) flatten linear(8) batchnorm1d tanh linear"
  --model.input_shape 2,2,2 --model.dropout 0)
for sync in false true; do
  run cnn-cpu-$sync 2 "${cnn[@]}" --model.sync_batchnorm $sync || fail "cnn on the cpu (sync $sync): exit $?"
  run cnn-emu-$sync 2 "${cnn[@]}" --model.sync_batchnorm $sync --debug.emulate_device true --train.share_device true \
    || fail "cnn on the emulated GPU (sync $sync): exit $?"
  same_parameters "$(latest_checkpoint "$WORK/cnn-cpu-$sync")" "$(latest_checkpoint "$WORK/cnn-emu-$sync")" \
    && pass "CNN (sync_batchnorm $sync): emulated GPU ends bit-identical to the CPU, buffers included" \
    || fail "CNN (sync_batchnorm $sync): emulated GPU differs from the CPU"
done

# LayerNorm (rows of 12 and 8 values per sample) through the same path.
ln=(--model.layers "linear(12) layernorm gelu linear(8) layernorm(eps=1e-3) tanh linear" --model.dropout 0)
run ln-cpu 2 "${ln[@]}" || fail "layernorm MLP on the cpu: exit $?"
run ln-emu 2 "${ln[@]}" --debug.emulate_device true --train.share_device true \
  || fail "layernorm MLP on the emulated GPU: exit $?"
same_parameters "$(latest_checkpoint "$WORK/ln-cpu")" "$(latest_checkpoint "$WORK/ln-emu")" \
  && pass "LayerNorm MLP: emulated GPU ends bit-identical to the CPU" \
  || fail "LayerNorm MLP: emulated GPU differs from the CPU"

# Evaluation, metrics and the loss curve match the CPU's exactly.
cmp -s <(grep '"type": *"eval"' "$WORK/cpu2/metrics.jsonl") <(grep '"type": *"eval"' "$WORK/emu2/metrics.jsonl") \
  && pass "test loss and accuracy records identical" || fail "eval records differ"
finish
